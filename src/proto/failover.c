/* Rail failover (DESIGN.md, "Rail failover"). A rail goes down for the
 * whole device when its link does (kernel interfaces: operstate or carrier)
 * or its CQ cannot be read; for one comm when a write or control message of
 * that comm failed on it. Its stripes then move to the rails left (send.c
 * re-sends the ones it carried that have not completed, with the same
 * immediate data, which names the stripe, so the receiver counts it once;
 * an original that landed unacknowledged lets the copy land after the
 * receive completed: DESIGN.md, "Known hole"); receive
 * comms post again the clear-to-sends no write has answered (one may sit on
 * the dead link); the peer is told (RAIL message) and stops using its rails
 * that map onto the dead one. Only a comm with no rail left fails, naming
 * every rail. A down rail is not polled; one into which the peer's writes
 * were cut off is tainted (see taint()). A rail rejoins once its link has
 * been up for NCCL_SRD_RAIL_HOLDDOWN_MS and every comm's peer answered a
 * probe on it (struct srd_rail_health). NCCL_SRD_FAILOVER=0 keeps the old
 * rule: a failed rail fails every comm of its device. */
#include <stdio.h>
#include <string.h>

#include "srd/log.h"
#include "srd/param.h"
#include "srd/proto.h"
#include "srd/rma.h"

void srd_dev_failover_init(struct srd_dev *dev) {
  memset(dev->health, 0, sizeof(dev->health));
  dev->holddown_ms = (uint64_t)srd_param_int(SRD_PARAM_RAIL_HOLDDOWN_MS);
  dev->failover = srd_param_int(SRD_PARAM_FAILOVER) != 0;
  /* One NIC: its lanes share its link, so no rail could take over; and
   * failover's delivery-complete writes cost 2-4x at 32 KiB..2 MiB over tcp
   * (srd-perf, BENCHMARKS.md): not paid for nothing. */
  if (dev->failover && dev->nnics < 2) {
    dev->failover = false;
    SRD_INFO(NCCL_INIT | NCCL_NET, "device %d: rail failover off: one NIC, no other rail to take over", dev->index);
  }
  for (int i = 0; i < dev->nrails; i++) dev->rails[i].delivery_complete = dev->failover;
}

static int rail_mbps(const struct srd_dev *dev, int l) {
  int lanes = dev->lanes_per_nic > 0 ? dev->lanes_per_nic : 1;
  return dev->nics ? dev->nics->nics[dev->group.nics[l % dev->nnics]].speed_mbps / lanes : 0;
}

static int rails_left(const struct srd_dev *dev, int *mbps) {
  int n = 0;
  *mbps = 0;
  for (int i = 0; i < dev->nrails; i++)
    if (!dev->health[i].down) {
      n++;
      *mbps += rail_mbps(dev, i);
    }
  return n;
}

uint64_t srd_comm_usable_paths(const struct srd_comm *c) {
  const struct srd_dev *dev = c->dev;
  uint64_t all = dev->npaths >= 64 ? ~0ull : (1ull << dev->npaths) - 1;
  if (!dev->failover) return all;
  uint64_t usable = 0;
  for (int p = 0; p < dev->npaths; p++) {
    int l = p / dev->neps;
    if (dev->health[l].down || c->rails_bad >> l & 1) continue;
    if (c->remote_rails && c->peer_rails_down >> (l % c->remote_rails) & 1) continue;
    usable |= 1ull << p;
  }
  return usable;
}

struct rail_notice {
  const struct srd_comm *c;
  struct srd_msg_rail m;
};

static size_t encode_rail(void *buf, size_t cap, const void *arg) {
  const struct rail_notice *n = arg;
  return srd_msg_encode_rail(buf, cap, n->c->peer_id, &n->m);
}

/* Lanes stop reaping and posting on a down rail, callers stop polling it
 * (see struct srd_rail_health), until it is probed. */
static void set_polled(struct srd_dev *dev, int l, bool polled) {
  if (!polled) {
    dev->health[l].drain = true;
    if (dev->lanes) atomic_store(&dev->lanes[l].drain, true);
  }
  if (dev->lanes) atomic_store(&dev->lanes[l].paused, !polled);
}

static void tell_peer(struct srd_comm *c, int l, bool up, bool stale) {
  struct rail_notice n = {c, {(uint8_t)l, up, stale, stale ? c->fence_round : 0}};
  /* Best effort: a stale notice refused or lost is asked again while its
   * stripes stay unsure (srd_proto_fence_timers). */
  srd_comm_send_ctrl(c, FI_ADDR_UNSPEC, encode_rail, &n, NULL);
}

void srd_proto_ask_fence(struct srd_comm *c, int l) {
  c->fence_ms = srd_now_ms();
  tell_peer(c, l, false, true);
}

const char *srd_comm_rail_gone_why(const struct srd_comm *c, int l) {
  return c->dev->health[l].down ? c->dev->health[l].why
         : c->rails_bad >> l & 1 ? "an operation of this comm failed on it"
                                 : "the peer's rail is down";
}

void srd_comm_fail_no_rail(struct srd_comm *c) {
  const struct srd_dev *dev = c->dev;
  char text[200];
  size_t off = 0;
  for (int l = 0; l < dev->nrails && off < sizeof(text); l++)
    off += (size_t)snprintf(text + off, sizeof(text) - off, "%srail %d (%s): %s", l ? "; " : "", l,
                            dev->rails[l].name, srd_comm_rail_gone_why(c, l));
  srd_comm_fail(c, SRD_ERR_SYSTEM, "no rail left to the peer: %s", text);
}

/* Stripes that lost rails carried and that did not complete are held, and
 * the peer is asked to fence those rails (a stale notice, with the next
 * round): the rest of a write cut off on one may still land when its link
 * returns, and one that landed unacknowledged must not be written again into
 * a receive that completed (src/proto/fence.c). */
static void fence_lost_rails(struct srd_comm *c) {
  uint32_t round = c->fence_round + 1, rails = 0;
  for (int r = 0; r < c->dev->nrails; r++)
    if (!(srd_comm_usable_paths(c) >> (r * c->dev->neps) & 1) && srd_proto_hold_stripes(c, r, round))
      rails |= 1u << r;
  if (!rails) return;
  c->fence_round = round;
  for (; rails; rails &= rails - 1) srd_proto_ask_fence(c, __builtin_ctz(rails));
}

/* What c does once some of its paths are gone: fail when none is left,
 * otherwise move what the gone ones carried. */
static void comm_lost_paths(struct srd_comm *c) {
  c->failover_seen = true;
  if (!srd_comm_usable_paths(c)) {
    srd_comm_fail_no_rail(c);
    return;
  }
  if (c->is_send) {
    if (c->rma && srd_rma_lost_rails(c)) return;
    fence_lost_rails(c);
    srd_proto_reask_cts(c);
  } else {
    srd_proto_repost_cts(c);
  }
}

void srd_comm_rail_failed(struct srd_comm *c, int l, const char *why) {
  struct srd_dev *dev = c->dev;
  if (!dev->failover) return;
  if (c->rails_bad >> l & 1 || dev->health[l].down) {
    comm_lost_paths(c);
    return;
  }
  c->rails_bad |= 1u << l;
  SRD_WARN("comm %#x: stops using rail %d (%s) of device %d: %s", c->id, l, dev->rails[l].name, dev->index, why);
  tell_peer(c, l, false, false);
  comm_lost_paths(c);
}

/* The peer's writes into rail l were cut off. Where the NIC checks the key
 * of every packet it places (rail->keys_fence_writes: efa whose device
 * writes, vouched for by the user: efa does not promise it), new keys stop
 * the rest of them, so they change now, before the
 * link can return; the rail rejoins once no receive whose clear-to-send
 * named an old key is open (a write for it there would be refused).
 * Elsewhere (tcp;ofi_rxm) the key is checked once, at a write's header: the
 * rest of one cut off in its middle lands whenever the link returns, and
 * dropping the connection under it crashes libfabric's rxm (a NULL context
 * in rxm_handle_comp_error, 1.17 and 2.6): the rail stays out, not polled. */
static void taint(struct srd_dev *dev, int l) {
  struct srd_rail_health *h = &dev->health[l];
  if (h->tainted) return;
  h->tainted = true;
  if (!dev->rails[l].keys_fence_writes) {
    h->out_for_good = "the rest of a write cut off in its middle could land in reused buffers (no provider "
                      "promises to check keys per packet: see NCCL_SRD_FAILOVER_REKEY for efa)";
    return;
  }
  if (srd_dev_rekey_rail(dev, l) != SRD_OK) {
    h->out_for_good = "its registrations could not be made again under new keys";
    return;
  }
  for (int k = 0; k < dev->comms_end; k++) {
    struct srd_comm *c = dev->comms[k];
    if (!c || c->is_send) continue;
    for (int i = 0; i < SRD_REQS_PER_COMM; i++) {
      struct srd_req *r = c->reqs[i];
      if (r && r->kind == SRD_REQ_RECV && r->cts_sent && !r->done) r->old_keys = true;
    }
  }
}

static bool old_keys_open(const struct srd_dev *dev) {
  for (int k = 0; k < dev->comms_end; k++) {
    const struct srd_comm *c = dev->comms[k];
    if (!c || c->is_send || c->result) continue;
    for (int i = 0; i < SRD_REQS_PER_COMM; i++)
      if (c->reqs[i] && c->reqs[i]->old_keys && !c->reqs[i]->done) return true;
  }
  return false;
}

void srd_proto_on_rail(struct srd_comm *c, const struct srd_msg_rail *m) {
  /* A sender that holds stripes waits for the answer, whatever our side. */
  bool answer = m->stale && !c->is_send;
  if (!c->dev->failover || m->rail >= c->remote_rails || m->rail >= 32) {
    if (answer) srd_proto_answer_fence(c, m->round, m->rail);
    return;
  }
  uint32_t bit = 1u << m->rail;
  if (m->up) {
    if (c->peer_rails_down & bit)
      SRD_INFO(NCCL_NET, "comm %#x: the peer's rail %d is back", c->id, m->rail);
    c->peer_rails_down &= ~bit;
    return;
  }
  /* The peer's writes cut off on its rail may still land in the rail of ours
   * they target (r mod our rails) when the link returns: that rail goes down
   * too, and its keys change. */
  struct srd_dev *dev = c->dev;
  if (m->stale) {
    int ours = m->rail % dev->nrails;
    if (!dev->health[ours].down) srd_dev_rail_down(dev, ours, "the peer's writes into it were cut off");
    taint(dev, ours);
  }
  if (answer) srd_proto_answer_fence(c, m->round, m->rail); /* after the taint: the rail is fenced */
  if (c->peer_rails_down & bit) return;
  c->peer_rails_down |= bit;
  SRD_WARN("comm %#x: the peer reports its rail %d down; our rails mapped onto it carry nothing for it", c->id,
           m->rail);
  comm_lost_paths(c);
}

static void fail_all(struct srd_dev *dev) {
  for (int k = 0; k < dev->comms_end; k++)
    if (dev->comms[k] && !dev->comms[k]->result) srd_comm_fail_no_rail(dev->comms[k]);
}

void srd_dev_rail_down(struct srd_dev *dev, int l, const char *why) {
  struct srd_rail_health *h = &dev->health[l];
  if (h->down) return;
  h->down = true;
  h->down_ms = srd_now_ms();
  h->link_back_ms = 0;
  h->probing = h->polled = false;
  h->told_out = false;
  snprintf(h->why, sizeof(h->why), "%s", why);
  set_polled(dev, l, false);
  int mbps, left = rails_left(dev, &mbps);
  if (!dev->failover || !left) {
    SRD_WARN("device %d: rail %d (%s) %s%s", dev->index, l, dev->rails[l].name, why,
             dev->failover ? ": no rail left" : " (NCCL_SRD_FAILOVER=0)");
    return; /* srd_dev_check_rails fails the comms */
  }
  SRD_WARN("device %d: rail %d (%s) down (%s): its work moves to the %d rail(s) left, %d Mbps", dev->index, l,
           dev->rails[l].name, why, left, mbps);
  for (int k = 0; k < dev->comms_end; k++) {
    struct srd_comm *c = dev->comms[k];
    if (!c || !c->ready || c->result || c->closing) continue;
    tell_peer(c, l, false, false);
    comm_lost_paths(c);
  }
}

static void rejoin(struct srd_dev *dev, int l) {
  struct srd_rail_health *h = &dev->health[l];
  h->down = h->probing = h->polled = h->tainted = false;
  int mbps, left = rails_left(dev, &mbps);
  SRD_WARN("device %d: rail %d (%s) rejoined after %llu ms down: %d rail(s), %d Mbps", dev->index, l,
           dev->rails[l].name, (unsigned long long)(srd_now_ms() - h->down_ms), left, mbps);
  for (int k = 0; k < dev->comms_end; k++) {
    struct srd_comm *c = dev->comms[k];
    if (!c || !c->ready || c->result || c->closing) continue;
    c->rails_bad &= ~(1u << l);
    tell_peer(c, l, true, false);
  }
}

/* A new round only once the last one's probes left: one stuck behind a
 * cut-off write holds its buffer until the connection dies, and rounds must
 * not drain the pool. A probe that could not be posted fails the round. */
static void start_round(struct srd_dev *dev, int l, uint64_t now) {
  struct srd_rail_health *h = &dev->health[l];
  if (h->probes_out) return;
  h->probing = true;
  h->round++;
  h->answers_due = h->probes_failed = 0;
  h->probe_ms = now;
  for (int k = 0; k < dev->comms_end; k++) {
    struct srd_comm *c = dev->comms[k];
    if (!c || !c->ready || c->result || c->closing) continue;
    c->probe_wait &= ~(1u << l);
    if (srd_comm_probe_rail(c, l, h->round) != SRD_OK) {
      h->probes_failed++;
      continue;
    }
    h->probes_out++;
    c->probe_wait |= 1u << l;
    h->answers_due++;
  }
}

void srd_proto_on_probe(struct srd_comm *c, int l, fi_addr_t src, const struct srd_msg_probe *m) {
  struct srd_rail_health *h = &c->dev->health[l];
  if (!m->answer) {
    /* Back to the endpoint it came from where the provider names it. */
    if (!c->dev->rails[l].source || src == FI_ADDR_NOTAVAIL) src = c->peer[l * c->dev->neps];
    srd_comm_answer_probe(c, l, src, m); /* refused: the prober's round times out and asks again */
    return;
  }
  if (m->rail != l || !h->probing || m->round != h->round || !(c->probe_wait >> l & 1)) return;
  c->probe_wait &= ~(1u << l);
  h->answers_due--;
}

/* A down rail whose link is back: hold-down, then polled and probed; it
 * rejoins when every probed peer answered (or another hold-down). */
static void try_rejoin(struct srd_dev *dev, int l, uint64_t now) {
  struct srd_rail_health *h = &dev->health[l];
  if (h->out_for_good) {
    if (!h->told_out)
      SRD_WARN("device %d: rail %d (%s) has its link back but stays out: the peer's writes into it were cut off, "
               "and %s", dev->index, l, dev->rails[l].name, h->out_for_good);
    h->told_out = true;
    return;
  }
  if (!h->link_back_ms) {
    h->link_back_ms = now;
    SRD_INFO(NCCL_NET, "device %d: rail %d (%s) has its link back; probed after %llu ms", dev->index, l,
             dev->rails[l].name, (unsigned long long)dev->holddown_ms);
    return;
  }
  if (now - h->link_back_ms < dev->holddown_ms) return;
  if (!h->polled) {
    h->polled = true;
    set_polled(dev, l, true);
  }
  if (!h->probing) {
    start_round(dev, l, now);
    return;
  }
  if (!h->answers_due && !h->probes_failed && !(h->tainted && old_keys_open(dev))) {
    rejoin(dev, l);
    return;
  }
  if (h->probes_failed || now - h->probe_ms > SRD_PROBE_ROUND_MS) {
    SRD_INFO(NCCL_NET, "device %d: rail %d (%s): probe round %u: %d unanswered, %d failed; probed again after %llu ms",
             dev->index, l, dev->rails[l].name, h->round, h->answers_due, h->probes_failed,
             (unsigned long long)dev->holddown_ms);
    h->probing = false;
    h->link_back_ms = now; /* another hold-down, still polled */
  }
}

void srd_dev_check_rails(struct srd_dev *dev, uint64_t now) {
  bool any_down = false;
  for (int l = 0; l < dev->nrails; l++) {
    struct srd_rail *rail = &dev->rails[l];
    bool link = !dev->rail_ops->link_down(rail);
    if (!dev->health[l].down) {
      if (rail->failed) srd_dev_rail_down(dev, l, "its completion queue cannot be read");
      else if (!link) srd_dev_rail_down(dev, l, "link down");
    } else if (dev->failover && !rail->failed) {
      if (link) try_rejoin(dev, l, now);
      else if (dev->health[l].link_back_ms) {
        dev->health[l].link_back_ms = 0;
        dev->health[l].probing = dev->health[l].polled = false;
        set_polled(dev, l, false);
      }
    }
    if (dev->health[l].down) {
      any_down = true;
      if (!dev->failover)
        for (int k = 0; k < dev->comms_end; k++)
          if (dev->comms[k] && !dev->comms[k]->result)
            srd_comm_fail(dev->comms[k], SRD_ERR_SYSTEM, "rail %d (%s) of device %d failed: %s", l, rail->name,
                          dev->index, dev->health[l].why);
    }
  }
  int mbps;
  if (any_down && dev->failover && !rails_left(dev, &mbps)) fail_all(dev);
  for (int k = 0; k < dev->comms_end; k++) {
    struct srd_comm *c = dev->comms[k];
    if (!c || c->result) continue;
    srd_proto_fence_timers(c, now);
  }
}
