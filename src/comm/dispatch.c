/* Incoming messages: decoded, then handed to the handshake or to the comm
 * they name. The device's rails call these handlers (installed by
 * srd_dev_init); proto never calls up into comm. */
#include <stdlib.h>
#include <string.h>

#include "srd/comm.h"
#include "srd/log.h"
#include "srd/rma.h"
#include "srd/sys.h"

/* A legitimate peer sends a few clear-to-sends before our connect sees its
 * answer (at most one per receive NCCL keeps in flight); more is a flood. */
#define MAX_EARLY_MSGS 256

static void keep_early(struct srd_comm *c, struct srd_rail *rail, fi_addr_t src, const void *buf, size_t len) {
  if (c->nearly >= MAX_EARLY_MSGS) {
    srd_comm_fail(c, SRD_ERR_REMOTE, "more than %d messages before the listener's answer", MAX_EARLY_MSGS);
    return;
  }
  struct srd_early_msg *e = malloc(sizeof(*e) + len), **tail = &c->early;
  if (!e) {
    srd_comm_fail(c, SRD_ERR_SYSTEM, "out of memory keeping an early control message");
    return;
  }
  e->next = NULL;
  e->rail = rail;
  e->src = src;
  e->len = len;
  memcpy(e->data, buf, len);
  while (*tail) tail = &(*tail)->next;
  *tail = e;
  c->nearly++;
}

static void deliver(struct srd_comm *c, struct srd_rail *rail, fi_addr_t src, const struct srd_msg *msg);

/* Is src, as the provider named it on rail, one of c's peer's addresses? */
static bool peer_address(const struct srd_comm *c, const struct srd_rail *rail, fi_addr_t src) {
  if (!c->inserted) return false;
  int rpaths = c->remote_rails * c->remote_eps, l = (int)(rail - c->dev->rails);
  for (int j = 0; j < rpaths; j++)
    if (c->inserted[l * rpaths + j] == src) return true;
  return false;
}

/* Did src (see struct srd_rail_handlers) send for c's peer? Where the
 * provider does not say (no FI_SOURCE), yes: the token and, for writes, the
 * keys are then what stands between a stranger and the comm. */
static bool from_peer(const struct srd_comm *c, const struct srd_rail *rail, fi_addr_t src) {
  /* FI_ADDR_NOTAVAIL: the provider could not name this sender (shm 2.6 with
   * lanes, for a peer rail another lane inserted): the token vouches. */
  if (!rail->source || src == FI_ADDR_NOTAVAIL) return true;
  return peer_address(c, rail, src);
}

/* A write named comm `named` by its write id, but the provider names its
 * writer, src, and that is not named's peer: a peer guessing write ids (a
 * legitimate peer writes only with the write id its answer gave it, and
 * retired write ids rest before reuse: srd_comm_alloc). Every comm whose peer
 * src is fails with this evidence; named and other peers' comms go on. */
static void cut_off_writer(struct srd_dev *dev, struct srd_rail *rail, fi_addr_t src, const struct srd_comm *named,
                           uint32_t write_id) {
  int cut = 0;
  for (int i = 0; i < dev->comms_end; i++) {
    struct srd_comm *o = dev->comms[i];
    if (!o || o == named || !o->ready || o->result || !peer_address(o, rail, src)) continue;
    srd_comm_fail(o, SRD_ERR_REMOTE,
                  "its peer wrote on rail %s naming write id %#x, which is comm %#x's of another peer: cut off", rail->name,
                  write_id, named->id);
    cut++;
  }
  if (!cut)
    SRD_WARN_LIMITED(&dev->foreign_log,
                     "rail %s: remote write for write id %#x (comm %#x) from address %#llx, which is not its peer's, dropped",
                     rail->name, write_id, named->id, (unsigned long long)src);
}

/* Is a remote write naming c by its write id c's? Where the provider names
 * writers (write_source), only when c's peer wrote it; elsewhere the write id
 * (and the keys) are all there is. A writer the provider cannot name
 * (FI_ADDR_NOTAVAIL: an address this rail never inserted) is judged by the
 * write id alone, as without write sources. */
static bool write_is_comms(struct srd_dev *dev, struct srd_rail *rail, struct srd_comm *c, fi_addr_t src,
                           uint32_t write_id) {
  if (!rail->write_source || src == FI_ADDR_NOTAVAIL || peer_address(c, rail, src)) return true;
  cut_off_writer(dev, rail, src, c, write_id);
  return false;
}

static void on_message(void *arg, struct srd_rail *rail, const void *buf, size_t len, fi_addr_t src) {
  struct srd_dev *dev = arg;
  struct srd_msg m;
  const char *why;
  if (srd_msg_decode(buf, len, &m, &why)) {
    SRD_WARN_LIMITED(&dev->foreign_log, "rail %s: dropped a malformed control message of %zu bytes: %s", rail->name,
                     len, why);
    return;
  }
  if (m.type == SRD_MSG_HELLO || m.type == SRD_MSG_ACCEPT) {
    srd_handshake_on_message(dev, &m);
    return;
  }
  struct srd_comm *c = srd_dev_comm_by_id(dev, m.dst_comm);
  if (!c) {
    SRD_INFO(NCCL_NET, "rail %s: message type %d for comm %#x that no longer exists", rail->name, m.type, m.dst_comm);
    return;
  }
  if (m.token != c->token) {
    SRD_WARN_LIMITED(&dev->foreign_log, "rail %s: message type %d for comm %#x with a wrong token dropped (forged?)",
                     rail->name, m.type, m.dst_comm);
    return;
  }
  if (!c->ready) {
    if (!c->result) keep_early(c, rail, src, buf, len);
    return;
  }
  if (!from_peer(c, rail, src)) {
    SRD_WARN_LIMITED(&dev->foreign_log,
                     "rail %s: message type %d for comm %#x from an address that is not its peer's dropped", rail->name,
                     m.type, m.dst_comm);
    return;
  }
  deliver(c, rail, src, &m);
}

void srd_comm_replay_early(struct srd_comm *c) {
  while (c->early && !c->result) {
    struct srd_early_msg *e = c->early;
    struct srd_msg m;
    const char *why;
    c->early = e->next;
    c->nearly--;
    /* A message that overtook the answer came before the peer was in our AV:
     * the provider could not name it (FI_ADDR_NOTAVAIL), and its token, checked
     * on arrival, is what vouches for it. A named stranger is dropped. */
    if (e->src != FI_ADDR_NOTAVAIL && !from_peer(c, e->rail, e->src))
      SRD_WARN_LIMITED(&c->dev->foreign_log, "comm %#x: a message kept before the answer came from an address that is not its peer's; dropped",
               c->id);
    else if (srd_msg_decode(e->data, e->len, &m, &why) == 0)
      deliver(c, e->rail, e->src, &m);
    free(e);
  }
}

static void deliver(struct srd_comm *c, struct srd_rail *rail, fi_addr_t src, const struct srd_msg *msg) {
  const struct srd_msg m = *msg;
  c->last_heard_ms = srd_now_ms();
  switch (m.type) {
  case SRD_MSG_CTS:
    if (c->is_send) srd_proto_on_cts(c, &m.u.cts);
    break;
  case SRD_MSG_EAGER:
    if (!c->is_send) srd_proto_on_eager(c, &m.u.eager);
    break;
  case SRD_MSG_TRUNC:
    if (!c->is_send) srd_proto_on_trunc(c, &m.u.trunc);
    break;
  case SRD_MSG_BYE:
    srd_proto_on_bye(c, &m.u.bye);
    break;
  case SRD_MSG_RAIL:
    srd_proto_on_rail(c, &m.u.rail);
    break;
  case SRD_MSG_RTS:
    if (!c->is_send) srd_proto_on_rts(c, &m.u.rts);
    break;
  case SRD_MSG_PROBE:
    srd_proto_on_probe(c, (int)(rail - c->dev->rails), src, &m.u.probe);
    break;
  case SRD_MSG_RMA_SIGNAL:
    if (!c->is_send && c->rma) srd_rma_on_signal(c, &m.u.rma_signal);
    else SRD_WARN("comm %#x: RMA signal for a comm of no RMA group dropped", c->id);
    break;
  case SRD_MSG_RMA_ACK:
    if (c->is_send && c->rma) srd_rma_on_ack(c, &m.u.rma_ack);
    break;
  case SRD_MSG_FENCED:
    if (c->is_send) srd_proto_on_fenced(c, &m.u.fenced);
    break;
  case SRD_MSG_SETTLED:
    if (!c->is_send) srd_proto_on_settled(c, &m.u.settled);
    break;
  default:
    break;
  }
}

static void on_remote_write(void *arg, struct srd_rail *rail, uint32_t imm, size_t len, fi_addr_t src) {
  struct srd_dev *dev = arg;
  if (srd_imm_is_rma(imm)) {
    struct srd_comm *c = dev->by_write_id[imm & (SRD_MAX_COMMS - 1)];
    if (c && !c->is_send && c->ready && c->rma) {
      if (!write_is_comms(dev, rail, c, src, c->write_id)) return;
      c->last_heard_ms = srd_now_ms();
      srd_rma_on_write(c, imm, len);
    } else {
      SRD_WARN_LIMITED(&dev->foreign_log, "rail %s: one-sided write for write id %#x, which names no ready RMA comm, dropped",
                       rail->name, imm & (SRD_MAX_COMMS - 1));
    }
    return;
  }
  struct srd_imm v;
  const char *why;
  if (srd_imm_decode(imm, &v, &why)) {
    SRD_WARN_LIMITED(&dev->foreign_log, "rail %s: remote write with immediate data %#x dropped: %s", rail->name, imm,
                     why);
    return;
  }
  struct srd_comm *c = dev->by_write_id[v.write_id];
  if (!c || !c->ready) {
    SRD_WARN_LIMITED(&dev->foreign_log, "rail %s: remote write for write id %#x, which names no ready receive comm, dropped",
                     rail->name, v.write_id);
    return;
  }
  /* Its immediate data is then checked against the receive
   * (srd_proto_on_write). */
  if (!write_is_comms(dev, rail, c, src, v.write_id)) return;
  c->last_heard_ms = srd_now_ms();
  srd_proto_on_write(c, v, len);
}

static void on_rail_error(void *arg, struct srd_rail *rail, int err, const char *errstr) {
  /* Without an operation we cannot tell which peer it concerns: the comms
   * that are hit see their own operations fail. */
  struct srd_dev *dev = arg;
  SRD_WARN_LIMITED(&dev->foreign_log, "device %d: %s (error %d)", dev->index, errstr, err);
  (void)rail;
}

const struct srd_rail_handlers srd_dispatch_handlers = {on_message, on_remote_write, on_rail_error, NULL};
