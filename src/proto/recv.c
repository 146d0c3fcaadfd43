#include <stdlib.h>
#include <string.h>

#include <rdma/fi_errno.h>

#include "srd/log.h"
#include "srd/proto.h"
#include "srd/stats.h"

static void entry_complete(struct srd_req *r, struct srd_recv_entry *e) {
  e->complete = true;
  if (++r->entries_done == r->n) srd_recv_finish(r);
}

void srd_recv_finish(struct srd_req *r) {
  if (r->held_round) return; /* a copy may still be in flight to it */
  if (r->cts_sent) srd_recv_comm(r->comm)->cleared--; /* no write can come for it any more */
  srd_req_finish(r, r->result);
}

/* Eager data for entry-matching by tag, as the sender matched the CTS.
 * False when it was not taken: a second copy, dropped, or a comm failed. */
static bool deliver_eager(struct srd_req *r, int32_t tag, uint32_t len, const void *data) {
  struct srd_comm *c = r->comm;
  for (int i = 0; i < r->n; i++) {
    struct srd_recv_entry *e = &r->e[i];
    if (e->complete || e->tag != tag || e->stripes_seen) continue;
    if (len > e->cap) {
      SRD_WARN("recv comm %#x: message of %u bytes does not fit the %zu-byte buffer (tag %d)", c->id, len, e->cap,
               tag);
      r->result = SRD_ERR_USAGE;
    } else {
      if (len) memcpy(e->buf, data, len);
      e->got = len;
      c->traffic.eager++;
    }
    /* Its clear-to-send was not needed: after a few such in a row, wait for
     * the sender to ask. */
    struct srd_recv_comm *rcv = srd_recv_comm(c);
    if (r->cts_sent && ++rcv->cts_unused >= SRD_CTS_UNUSED_MAX) rcv->cts_on_request = true;
    entry_complete(r, e);
    return true;
  }
  /* A copy that sat on a dead link and came late (perhaps before the notice
   * of that link's failure). */
  if (c->failover_seen || c->dev->failover) {
    c->traffic.dropped++;
    return false;
  }
  srd_comm_fail(c, SRD_ERR_REMOTE, "eager message with tag %d matches no buffer of receive %u", tag, r->seq);
  return false;
}

/* The open receive whose group holds sequence seq (at most
 * SRD_REQS_PER_COMM to look at). */
static struct srd_req *recv_for_seq(struct srd_comm *c, uint32_t seq) {
  for (int i = 0; i < SRD_REQS_PER_COMM; i++) {
    struct srd_req *r = c->reqs[i];
    if (r && !r->released && r->kind == SRD_REQ_RECV && seq - r->seq < (uint32_t)r->n) return r;
  }
  return NULL;
}

/* Counted for the closed sender, which waits until all it sent is taken. */
static void took_eager(struct srd_comm *c) {
  c->eagers++;
  if (c->peer_closed) srd_proto_bye_progress(c);
}

void srd_proto_on_eager(struct srd_comm *c, const struct srd_msg_eager *m) {
  struct srd_req *r = recv_for_seq(c, m->seq);
  if (r) {
    if (deliver_eager(r, m->tag, m->len, m->data)) took_eager(c);
    return;
  }
  /* Kept only within the window of sequences a sender can be ahead by (the
   * eager tags it remembers): at most that many messages of eager_max bytes. */
  struct srd_recv_comm *rc = srd_recv_comm(c);
  if (c->result) return;
  /* After a rail failed, a message that sat on its dead link may come again
   * when the link returns: one already received, or already kept. */
  if (c->failover_seen) {
    bool seen = srd_seq_before(m->seq, c->next_seq);
    for (struct srd_unexpected *u = rc->unexpected; u && !seen; u = u->next) seen = u->seq == m->seq;
    if (seen) {
      c->traffic.dropped++;
      return;
    }
  }
  if (m->seq - c->next_seq >= SRD_SENT_TAGS || rc->nunexpected >= SRD_SENT_TAGS) {
    srd_comm_fail(c, SRD_ERR_REMOTE, "eager message for sequence %u, %u ahead of the receives (%d kept): flood?",
                  m->seq, m->seq - c->next_seq, rc->nunexpected);
    return;
  }
  struct srd_unexpected *u = malloc(sizeof(*u) + m->len);
  if (!u) {
    srd_comm_fail(c, SRD_ERR_SYSTEM, "out of memory holding an early eager message");
    return;
  }
  u->seq = m->seq;
  u->tag = m->tag;
  u->len = m->len;
  if (m->len) memcpy(u->data, m->data, m->len);
  u->next = rc->unexpected;
  rc->unexpected = u;
  rc->nunexpected++;
  took_eager(c);
}

void srd_proto_on_trunc(struct srd_comm *c, const struct srd_msg_trunc *m) {
  struct srd_req *r = recv_for_seq(c, m->seq);
  if (!r) return;
  SRD_WARN("recv comm %#x: the peer's message of %llu bytes is larger than the posted buffer", c->id,
           (unsigned long long)m->size);
  srd_req_finish(r, SRD_ERR_USAGE);
}

/* Does a write that matched no open entry name a receive that was offered
 * and has completed: r, the request in its slot i (this use of the slot), or
 * the slot's use before? */
static bool names_completed_receive(struct srd_comm *c, const struct srd_req *r, uint32_t i, struct srd_imm imm) {
  const struct srd_recv_comm *rcv = srd_recv_comm(c);
  if (r && r->slot_tag == imm.slot && r->kind == SRD_REQ_RECV)
    return r->cts_sent && (r->done || (imm.entry < (uint32_t)r->n && r->e[imm.entry].complete));
  return rcv->prev_offered[i] && srd_slot_tag(i, rcv->slot_uses[i] - 1u) == imm.slot;
}

/* The immediate data is the writer's claim, its fields in range
 * (srd_imm_decode): it must name a receive whose
 * clear-to-send went out, keep the stripe count of its first write, and never
 * add up to more than the buffer posted. Anything else fails this comm only.
 * Each stripe counts once: after a rail failed, the sender re-sends what the
 * dead rail carried, and the original may land too (late, or beside its
 * copy). Such a second copy, or a write for a receive that completed, is
 * dropped then: once this comm saw a failover, or, with failover on, when it
 * names a receive that completed (the notice of the failure may come after
 * the copy: it travels on another rail). */
void srd_proto_on_write(struct srd_comm *c, struct srd_imm imm, size_t len) {
  c->writes_done++;
  if (c->peer_closed) srd_proto_bye_progress(c); /* a closed sender waits for its writes to land */
  if (c->closing) return; /* the close waits for it: its receive was failed already */
  uint32_t i = imm.slot & ((1u << SRD_SLOT_BITS) - 1);
  struct srd_req *r = c->reqs[i];
  if (!r || r->slot_tag != imm.slot || r->kind != SRD_REQ_RECV || r->done || !r->cts_sent ||
      imm.entry >= (uint32_t)r->n || r->e[imm.entry].complete) {
    if (c->failover_seen || (c->dev->failover && names_completed_receive(c, r, i, imm))) {
      c->traffic.dropped++;
      SRD_INFO(NCCL_NET, "recv comm %#x: late write (slot %#x entry %u stripe %u) after a rail failover dropped",
               c->id, imm.slot, imm.entry, imm.stripe);
      return;
    }
    srd_comm_fail(c, SRD_ERR_REMOTE, "write for slot %#x entry %u matches no open receive", imm.slot, imm.entry);
    return;
  }
  struct srd_recv_entry *e = &r->e[imm.entry];
  if (e->stripes_seen && e->stripes_total != imm.nstripes) {
    srd_comm_fail(c, SRD_ERR_REMOTE, "write for slot %#x entry %u claims %u stripes, earlier ones %u", imm.slot,
                  imm.entry, imm.nstripes, e->stripes_total);
    return;
  }
  if (e->stripe_mask >> imm.stripe & 1) {
    /* The second copy of a re-sent stripe: its bytes are the first's, counted
     * already, so not weighed against what is left of the buffer. */
    c->traffic.dropped++;
    return;
  }
  if (len > e->cap - e->got) {
    srd_comm_fail(c, SRD_ERR_REMOTE, "writes for slot %#x entry %u add up to more than its %zu bytes", imm.slot,
                  imm.entry, e->cap);
    return;
  }
  e->stripes_total = imm.nstripes;
  if (imm.nstripes > 1 && !atomic_load_explicit(&c->large, memory_order_relaxed)) {
    atomic_store_explicit(&c->large, true, memory_order_relaxed);
    srd_dev_want_lanes(c->dev);
  }
  e->got += len;
  e->stripe_mask |= 1u << imm.stripe;
  c->traffic.writes++;
  if (++e->stripes_seen == e->stripes_total) {
    c->traffic.rendezvous++;
    srd_recv_comm(c)->cts_unused = 0; /* its clear-to-send was needed */
    entry_complete(r, e);
  }
}

/* The sender has a message for m->seq that cannot go eagerly. */
void srd_proto_on_rts(struct srd_comm *c, const struct srd_msg_rts *m) {
  struct srd_recv_comm *rcv = srd_recv_comm(c);
  rcv->cts_on_request = false; /* large messages again: post with the receive */
  rcv->cts_unused = 0;
  struct srd_req *r = recv_for_seq(c, m->seq);
  if (r && !r->done && !r->cts_sent && !r->on_pending) srd_proto_post_cts(r);
  /* Not posted yet: an eager message delivered meanwhile may set
   * cts_on_request again, so the receive remembers it was asked for. */
  if (!r && !srd_seq_before(m->seq, c->next_seq)) {
    rcv->asked = true;
    rcv->asked_seq = m->seq;
  }
}

static size_t encode_cts(void *buf, size_t cap, const void *arg) {
  const struct srd_req *r = arg;
  const struct srd_comm *c = r->comm;
  const struct srd_dev *dev = c->dev;
  struct srd_msg_cts m = {.seq = r->seq, .n = (uint8_t)r->n, .nkeys = (uint8_t)dev->nrails, .slot = r->slot_tag};
  uint64_t keys[SRD_MAX_RECVS * SRD_MAX_RAILS];
  for (int i = 0; i < r->n; i++) {
    const struct srd_recv_entry *e = &r->e[i];
    const struct srd_mr *reg = srd_mr_entry(e->mr, SRD_MR_RECV);
    struct srd_rail_mrs *mrs = reg->handle;
    uintptr_t a = (uintptr_t)e->buf;
    m.e[i].addr = dev->rails[0].virt_addr ? a : a - reg->base;
    m.e[i].len = e->cap;
    m.e[i].tag = e->tag;
    for (int l = 0; l < dev->nrails; l++) keys[i * dev->nrails + l] = dev->rail_ops->mr_key(mrs->mr[l]);
  }
  return srd_msg_encode_cts(buf, cap, c->peer_id, &m, keys);
}

void srd_proto_repost_cts(struct srd_comm *c) {
  for (int i = 0; i < SRD_REQS_PER_COMM; i++) {
    struct srd_req *r = c->reqs[i];
    if (!r || r->kind != SRD_REQ_RECV || r->done || !r->cts_sent || r->on_pending) continue;
    bool answered = false;
    for (int k = 0; k < r->n; k++) answered |= r->e[k].stripes_seen > 0 || r->e[k].complete;
    if (!answered) srd_proto_post_cts(r);
  }
}

static int post_cts(struct srd_req *r) {
  int rc = srd_comm_send_ctrl(r->comm, FI_ADDR_UNSPEC, encode_cts, r, NULL);
  if (rc == SRD_OK) {
    struct srd_recv_comm *rcv = srd_recv_comm(r->comm);
    if (!r->cts_sent) rcv->cleared++; /* a failover re-post is not a second clearance */
    if (srd_seq_before(rcv->told_seq, r->seq + (uint32_t)r->n)) rcv->told_seq = r->seq + (uint32_t)r->n;
    r->cts_sent = true;
    SRD_STAT(SRD_STAT_CTS_SENT);
  }
  return rc;
}

int srd_proto_post_cts(struct srd_req *r) {
  int rc = post_cts(r);
  if (rc == SRD_AGAIN) {
    srd_pending_add(r);
    return rc;
  }
  if (rc) srd_req_finish(r, SRD_ERR_SYSTEM);
  return rc;
}

int srd_proto_irecv(struct srd_comm *c, int n, void **data, const size_t *sizes, const int *tags, struct srd_mr_ref **mrs,
                    struct srd_req **out) {
  *out = NULL;
  if (c->result) return c->result;
  if (n < 1 || n > SRD_MAX_RECVS) {
    SRD_WARN("recv comm %#x: %d buffers in one receive (1..%d allowed)", c->id, n, SRD_MAX_RECVS);
    return SRD_ERR_ARG;
  }
  for (int i = 0; i < n; i++)
    if (!mrs[i] || !srd_mr_live(mrs[i]) || !srd_mr_entry(mrs[i], SRD_MR_RECV) ||
        (sizes[i] && !srd_mr_covers(mrs[i], data[i], sizes[i]))) {
      SRD_WARN("recv comm %#x: buffer %d (%zu bytes at %p) is outside its registration", c->id, i, sizes[i], data[i]);
      return SRD_ERR_ARG;
    }
  if (c->peer_closed && srd_seq_before(c->peer_final_seq, c->next_seq + (uint32_t)n)) {
    SRD_WARN("recv comm %#x: receive after the peer closed its send comm", c->id);
    return SRD_ERR_REMOTE;
  }
  struct srd_req *r = srd_req_get(c, SRD_REQ_RECV);
  if (!r) {
    SRD_WARN("recv comm %#x: more than %d requests in flight", c->id, SRD_REQS_PER_COMM);
    return SRD_ERR_INTERNAL;
  }
  r->seq = c->next_seq;
  r->n = n;
  for (int i = 0; i < n; i++) {
    r->e[i] = (struct srd_recv_entry){.buf = data[i], .cap = sizes[i], .tag = tags ? tags[i] : 0, .mr = mrs[i]};
  }
  c->next_seq += (uint32_t)n;
  for (struct srd_unexpected **p = &srd_recv_comm(c)->unexpected; *p;) {
    struct srd_unexpected *u = *p;
    if (u->seq - r->seq < (uint32_t)n) {
      *p = u->next;
      srd_recv_comm(c)->nunexpected--;
      deliver_eager(r, u->tag, u->len, u->data);
      free(u);
    } else {
      p = &u->next;
    }
  }
  *out = r;
  if (r->done) return 0; /* everything came eagerly: no clear-to-send */
  struct srd_recv_comm *rcv = srd_recv_comm(c);
  bool asked = rcv->asked && rcv->asked_seq - r->seq < (uint32_t)n;
  if (asked) rcv->asked = false;
  /* On request only, yet one every half window: the sender's eager window
   * moves on clear-to-sends alone. */
  if (rcv->cts_on_request && !asked && c->next_seq - rcv->told_seq < SRD_EAGER_WINDOW / 2) return 0;
  int rc = srd_proto_post_cts(r);
  return rc == SRD_AGAIN ? SRD_OK : rc;
}
