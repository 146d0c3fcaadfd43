/* One-sided RMA, the origin's side: ops, their stripes and signals, the
 * per-peer queue under the target's acknowledgements (include/srd/rma.h). */
#include "srd/rma.h"

#include <stdlib.h>
#include <string.h>

#include <rdma/fi_errno.h>

#include "srd/log.h"

struct srd_rma_coll *srd_rma_coll_new(struct srd_dev *dev, int nranks, int rank) {
  struct srd_rma_coll *coll = calloc(1, sizeof(*coll));
  if (!coll) return NULL;
  coll->peers = calloc((size_t)nranks, sizeof(*coll->peers));
  if (!coll->peers) {
    free(coll);
    return NULL;
  }
  coll->magic = SRD_RMA_COLL_MAGIC;
  coll->dev = dev;
  coll->nranks = nranks;
  coll->rank = rank;
  for (int r = 0; r < nranks; r++) {
    coll->peers[r].coll = coll;
    coll->peers[r].rank = r;
  }
  return coll;
}

void srd_rma_set_peer(struct srd_rma_coll *coll, int rank, struct srd_comm *send, struct srd_comm *recv) {
  struct srd_rma_peer *p = &coll->peers[rank];
  p->send = send;
  p->recv = recv;
  send->rma = p;
  recv->rma = p;
}

void srd_rma_coll_detach(struct srd_rma_coll *coll) {
  coll->magic = 0;
  for (int r = 0; r < coll->nranks; r++) {
    struct srd_rma_peer *p = &coll->peers[r];
    if (p->send) p->send->rma = NULL;
    if (p->recv) p->recv->rma = NULL;
  }
}

void srd_rma_coll_free(struct srd_rma_coll *coll) {
  srd_rma_nic_close(coll); /* first: a loopback op completing meanwhile may still name an op */
  while (coll->all_ops) {
    struct srd_rma_op *op = coll->all_ops;
    coll->all_ops = op->all;
    if (op->in_use && op->event) srd_cuda_stream_forget(op->stream, op->event);
    free(op);
  }
  srd_rma_gpu_close(coll);
  coll->magic = 0;
  free(coll->wins);
  free(coll->peers);
  free(coll);
}

int srd_rma_coll_fail(struct srd_rma_coll *coll, int result) {
  if (!coll->result) coll->result = result;
  return result;
}

static struct srd_rma_op *op_get(struct srd_rma_coll *coll) {
  struct srd_rma_op *op = coll->free_ops;
  if (op) {
    coll->free_ops = op->next;
  } else {
    if (!(op = malloc(sizeof(*op)))) return NULL;
    op->all = coll->all_ops;
    coll->all_ops = op;
  }
  memset(op, 0, offsetof(struct srd_rma_op, stripes));
  op->coll = coll;
  op->in_use = true;
  return op;
}

static void op_put(struct srd_rma_op *op) {
  op->in_use = false;
  op->next = op->coll->free_ops;
  op->coll->free_ops = op;
}

bool srd_rma_op_valid(const struct srd_rma_coll *coll, const struct srd_rma_op *op) {
  return op && op->in_use && !op->released && op->coll == coll;
}

void srd_rma_op_release(struct srd_rma_op *op) {
  op->released = true;
  if (!op->outstanding) op_put(op);
}

static void op_finish(struct srd_rma_op *op, int result) {
  if (op->done) return;
  op->done = true;
  op->result = result;
  if (result) srd_rma_coll_fail(op->coll, result);
}

void srd_rma_op_end(struct srd_rma_op *op, int result) {
  op->outstanding--;
  op_finish(op, result);
  if (op->released && !op->outstanding) op_put(op);
}

static void op_check_done(struct srd_rma_op *op) {
  if (op->posted == op->nstripes && op->completed == op->nstripes && (!op->has_signal || op->signal_sent))
    op_finish(op, SRD_OK);
}

static void stripe_done(struct srd_op *o, int err, const char *errstr) {
  struct srd_rma_op *op = o->owner;
  struct srd_comm *c = op->peer->send;
  c->ops_in_flight--;
  op->peer->stripes_on_rail[(int)(intptr_t)o->aux]--;
  if (op->kind == SRD_RMA_PUT) {
    c->writes_in_flight--;
    if (!err) c->writes_done++; /* the target counts every write that landed */
  }
  op->outstanding--;
  if (err) {
    srd_comm_fail(c, SRD_ERR_REMOTE, "RMA %s to rank %d failed on rail %s: %s",
                  op->kind == SRD_RMA_PUT ? "write" : "read", op->peer->rank,
                  c->dev->rails[(int)(intptr_t)o->aux].name, errstr ? errstr : fi_strerror(-err));
    op_finish(op, SRD_ERR_REMOTE);
  } else {
    op->completed++;
    op_check_done(op);
  }
  if (op->released && !op->outstanding) op_put(op);
  else srd_proto_bye_progress(c);
}

/* Split the op over the send comm's paths as a message of its size is. */
static int split(struct srd_rma_op *op) {
  struct srd_comm *c = op->peer->send;
  struct srd_dev *dev = c->dev;
  const struct srd_sched_params *sp = &dev->sched;
  if (op->size >= sp->threshold) {
    atomic_store_explicit(&c->large, true, memory_order_relaxed);
    srd_dev_want_lanes(dev);
  }
  uint64_t usable = srd_sched_paths_for(sp, op->size, dev->inline_paths, dev->failover ? srd_comm_usable_paths(c) : 0);
  op->nstripes = srd_sched_split_over(sp, op->size, usable, &c->sched_cursor, op->stripes, SRD_MAX_STRIPES);
  if (op->nstripes < 0) {
    SRD_WARN("RMA %s of %zu bytes to rank %d needs more than %d writes of at most %zu bytes",
             op->kind == SRD_RMA_PUT ? "put" : "get", op->size, op->peer->rank, SRD_MAX_STRIPES, sp->max_write);
    return SRD_ERR_ARG;
  }
  return SRD_OK;
}

/* A stripe not yet posted whose path failover has taken away since the op
 * was split goes on another usable path of the same kind (the immediate
 * names the stripe, not the path). False when none is left. Asked only of a
 * comm that lost paths (failover_seen): the data path pays nothing before. */
static bool repath(struct srd_rma_op *op, struct srd_stripe *s) {
  struct srd_comm *c = op->peer->send;
  struct srd_dev *dev = c->dev;
  uint64_t usable = srd_comm_usable_paths(c);
  if (usable >> s->path & 1) return true;
  uint64_t paths = srd_sched_paths_for(&dev->sched, op->size, dev->inline_paths, usable);
  int path = srd_sched_pick(dev->npaths, paths, c->sched_cursor++);
  if (path < 0) return false;
  s->path = path;
  return true;
}

static int post_stripe(struct srd_rma_op *op, int i, bool *queued) {
  struct srd_comm *c = op->peer->send;
  struct srd_dev *dev = c->dev;
  struct srd_stripe *s = &op->stripes[i];
  if (c->failover_seen && !repath(op, s)) {
    srd_comm_fail_no_rail(c);
    return c->result;
  }
  int l = s->path / dev->neps;
  struct srd_rail *rail = &dev->rails[l];
  struct srd_rail_write *w = &op->w[i];
  w->op.done = stripe_done;
  w->op.owner = op;
  w->op.aux = (void *)(intptr_t)l;
  w->ep = s->path % dev->neps;
  w->src = op->local + s->offset;
  w->dst = op->kind == SRD_RMA_GET ? op->local + s->offset : NULL;
  w->len = s->len;
  w->desc = op->lwin->mrs->mr[l] ? dev->rail_ops->mr_desc(op->lwin->mrs->mr[l]) : NULL;
  w->dest = c->peer[s->path];
  w->raddr = op->raddr + s->offset;
  w->key = op->remote->key[l % op->remote->nkeys];
  w->owner_result = &c->result;
  struct srd_rma_imm imm = {c->write_id, op->seq, op->has_signal, (uint32_t)op->nstripes,
                            (uint32_t)i};
  w->imm = op->kind == SRD_RMA_GET ? 0 : srd_rma_imm_pack(imm);
  /* A lane's rail is posted to by its thread alone, reads as writes: a post
   * from here would contend with the lane's progress for the provider. */
  if (!srd_dev_caller_polls(dev, l)) {
    dev->rail_ops->queue_write(rail, w);
    *queued = true;
    return 0;
  }
  if (w->dst) return dev->rail_ops->read(rail, w->ep, w->dst, w->len, w->desc, w->dest, w->raddr, w->key, &w->op);
  return dev->rail_ops->write(rail, w->ep, w->src, w->len, w->desc, w->imm, w->dest, w->raddr, w->key, &w->op);
}

struct signal_msg {
  const struct srd_comm *c;
  const struct srd_msg_rma_signal *m;
};

static size_t encode_signal(void *buf, size_t cap, const void *arg) {
  const struct signal_msg *s = arg;
  return srd_msg_encode_rma_signal(buf, cap, s->c->peer_id, s->m);
}

/* Post the op's stripes, then its signal: SRD_OK once everything is posted,
 * SRD_AGAIN when the provider is full (the rest waits), or an error. */
static int post_op(struct srd_rma_op *op) {
  struct srd_comm *c = op->peer->send;
  if (c->result) return c->result;
  bool queued = false;
  int rc = SRD_OK;
  while (op->posted < op->nstripes) {
    int prc = post_stripe(op, op->posted, &queued);
    if (prc == -FI_EAGAIN) {
      rc = SRD_AGAIN;
      break;
    }
    if (prc && c->result) { /* no rail left for the stripe */
      rc = c->result;
      break;
    }
    if (prc) {
      srd_comm_fail(c, SRD_ERR_SYSTEM, "RMA %s to rank %d on rail %s refused: %s",
                    op->kind == SRD_RMA_PUT ? "write" : "read", op->peer->rank,
                    c->dev->rails[op->stripes[op->posted].path / c->dev->neps].name, fi_strerror(-prc));
      rc = c->result;
      break;
    }
    op->peer->stripes_on_rail[op->stripes[op->posted].path / c->dev->neps]++;
    op->posted++;
    op->outstanding++;
    c->ops_in_flight++;
    if (op->kind == SRD_RMA_PUT) c->writes_in_flight++;
    c->traffic.writes++;
  }
  if (queued) srd_dev_kick(c->dev);
  if (rc == SRD_OK && op->has_signal && !op->signal_sent) {
    struct signal_msg s = {c, &op->signal};
    rc = srd_comm_send_ctrl(c, FI_ADDR_UNSPEC, encode_signal, &s, NULL);
    if (rc == SRD_OK) op->signal_sent = true;
  }
  return rc;
}

/* Post queued ops in order while the target's acknowledgements allow. */
static void peer_post(struct srd_rma_peer *p) {
  while (p->qhead) {
    struct srd_rma_op *op = p->qhead;
    if (op->sequenced && op->seq - p->acked >= SRD_RMA_SEQ_WINDOW) return; /* the target has not caught up */
    int rc = post_op(op);
    if (rc == SRD_AGAIN) return;
    p->qhead = op->next;
    if (!p->qhead) p->qtail = NULL;
    if (rc) op_finish(op, rc);
    else op_check_done(op);
  }
}

static void enqueue(struct srd_rma_peer *p, struct srd_rma_op *op) {
  op->next = NULL;
  if (p->qtail) p->qtail->next = op;
  else p->qhead = op;
  p->qtail = op;
  peer_post(p);
}

static bool in_window(const char *what, int rank, uint64_t off, size_t size, uint64_t len) {
  if (off <= len && size <= len - off) return true;
  SRD_WARN("RMA %s of %zu bytes at offset %llu lies outside rank %d's window of %llu bytes", what, size,
           (unsigned long long)off, rank, (unsigned long long)len);
  return false;
}

static bool peer_known(const struct srd_rma_coll *coll, int rank) {
  if (rank >= 0 && rank < coll->nranks && (rank == coll->rank || coll->peers[rank].send)) return true;
  SRD_WARN("RMA op names rank %d of a group of %d", rank, coll->nranks);
  return false;
}

/* An op to ourselves through the NIC's loopback queue: its windows and the
 * signal (checked by the caller) ride on op. */
static int self_by_nic(struct srd_rma_op *op, struct srd_rma_win *lwin, uint64_t loff, struct srd_rma_win *rwin,
                       uint64_t roff, const struct srd_msg_rma_signal *sig, struct srd_rma_op **out) {
  if (op->size) {
    op->lwin = lwin;
    op->local = lwin->base + loff;
    op->raddr = rwin->remote[op->coll->rank].addr + roff;
  }
  if (sig) {
    op->has_signal = true;
    op->signal = *sig;
  }
  int rc = srd_rma_nic_self(op, rwin, lwin);
  if (rc) {
    op_put(op);
    return rc;
  }
  *out = op;
  return SRD_OK;
}

/* A self op started: done now, or when its stream work is (test polls). */
static int self_done(struct srd_rma_op *op, int rc, struct srd_rma_op **out) {
  if (rc) {
    if (op->event) srd_cuda_stream_forget(op->stream, op->event);
    op_put(op);
    return rc;
  }
  if (!op->event) op_finish(op, SRD_OK);
  *out = op;
  return SRD_OK;
}

/* Points op at its local and remote ranges and splits it into stripes; on
 * failure op goes back to the pool. */
static int aim(struct srd_rma_op *op, struct srd_rma_win *lwin, uint64_t loff, struct srd_rma_win *rwin, int rank,
               uint64_t roff) {
  op->lwin = lwin;
  op->local = lwin->base + loff;
  op->remote = &rwin->remote[rank];
  op->raddr = op->remote->addr + roff;
  int rc = split(op);
  if (rc) op_put(op);
  return rc;
}

int srd_rma_put(struct srd_rma_coll *coll, int rank, struct srd_rma_win *lwin, uint64_t loff, struct srd_rma_win *rwin,
                uint64_t roff, size_t size, const struct srd_msg_rma_signal *sig, struct srd_rma_op **out) {
  *out = NULL;
  if (coll->result) return coll->result;
  if (!peer_known(coll, rank)) return SRD_ERR_ARG;
  if (size && (!lwin || !rwin)) {
    SRD_WARN("RMA put of %zu bytes to rank %d without a source or destination window", size, rank);
    return SRD_ERR_ARG;
  }
  if (size && (!in_window("put source", coll->rank, loff, size, lwin->len) ||
               !in_window("put", rank, roff, size, rwin->remote[rank].len)))
    return SRD_ERR_ARG;
  char *word = NULL;
  if (sig && srd_rma_signal_target(coll, sig, rank, &word, NULL)) return SRD_ERR_ARG;
  struct srd_rma_op *op = op_get(coll);
  if (!op) return SRD_ERR_SYSTEM;
  op->kind = SRD_RMA_PUT;
  op->peer = &coll->peers[rank];
  op->size = size;
  if (rank == coll->rank) {
    struct srd_rma_win *sigwin = sig ? coll->wins[sig->window] : NULL;
    if (srd_rma_nic_takes_self(coll, lwin, rwin, sigwin)) return self_by_nic(op, lwin, loff, rwin, roff, sig, out);
    /* Ourselves: every earlier op to us is complete already, in order, or
     * queued before this one on the same stream. */
    int rc = srd_rma_gpu_self(op, rwin, size ? rwin->base + roff : NULL, lwin, size ? lwin->base + loff : NULL, size,
                              sig ? coll->wins[sig->window] : NULL, word, sig);
    return self_done(op, rc, out);
  }
  if (size) {
    int rc = aim(op, lwin, loff, rwin, rank, roff);
    if (rc) return rc;
  }
  if (size || sig) {
    op->sequenced = true;
    op->seq = op->peer->next_seq++;
    if (sig) {
      op->has_signal = true;
      op->signal = *sig;
      op->signal.seq = op->seq;
      op->signal.nstripes = (uint8_t)op->nstripes;
    }
    enqueue(op->peer, op);
  } else {
    op_finish(op, SRD_OK); /* nothing to carry */
  }
  *out = op;
  return SRD_OK;
}

int srd_rma_get(struct srd_rma_coll *coll, int rank, struct srd_rma_win *lwin, uint64_t loff, struct srd_rma_win *rwin,
                uint64_t roff, size_t size, struct srd_rma_op **out) {
  *out = NULL;
  if (coll->result) return coll->result;
  if (!peer_known(coll, rank)) return SRD_ERR_ARG;
  if (size && (!in_window("get destination", coll->rank, loff, size, lwin->len) ||
               !in_window("get", rank, roff, size, rwin->remote[rank].len)))
    return SRD_ERR_ARG;
  struct srd_rma_op *op = op_get(coll);
  if (!op) return SRD_ERR_SYSTEM;
  op->kind = SRD_RMA_GET;
  op->peer = &coll->peers[rank];
  op->size = size;
  if (rank == coll->rank && size && srd_rma_nic_takes_self(coll, lwin, rwin, NULL))
    return self_by_nic(op, lwin, loff, rwin, roff, NULL, out);
  if (rank == coll->rank || !size) {
    int rc = srd_rma_gpu_self(op, lwin, size ? lwin->base + loff : NULL, rwin, size ? rwin->base + roff : NULL, size,
                              NULL, NULL, NULL);
    return self_done(op, rc, out);
  }
  int rc = aim(op, lwin, loff, rwin, rank, roff);
  if (rc) return rc;
  enqueue(op->peer, op);
  *out = op;
  return SRD_OK;
}

struct ack_msg {
  const struct srd_comm *c;
  uint32_t seq;
};

static size_t encode_ack(void *buf, size_t cap, const void *arg) {
  const struct ack_msg *a = arg;
  return srd_msg_encode_rma_ack(buf, cap, a->c->peer_id, a->seq);
}

void srd_rma_send_ack(struct srd_rma_peer *p) {
  struct ack_msg a = {p->recv, p->next_apply};
  p->ack_due = true;
  if (srd_comm_send_ctrl(p->recv, FI_ADDR_UNSPEC, encode_ack, &a, NULL) == SRD_OK) {
    p->ack_due = false;
    p->acked_sent = a.seq;
  }
}

/* A failed comm posts nothing more: its queued ops end with its error. */
static void peer_drain(struct srd_rma_peer *p, int result) {
  while (p->qhead) {
    struct srd_rma_op *op = p->qhead;
    p->qhead = op->next;
    op_finish(op, result);
  }
  p->qtail = NULL;
}

void srd_rma_progress(struct srd_rma_coll *coll) {
  for (int r = 0; r < coll->nranks; r++) {
    struct srd_rma_peer *p = &coll->peers[r];
    if (!p->send) continue;
    if (p->send->result) peer_drain(p, p->send->result);
    if (p->ack_due && !p->recv->result) srd_rma_send_ack(p);
    peer_post(p);
  }
  srd_rma_nic_post(coll);
}

bool srd_rma_op_test(struct srd_rma_op *op) {
  if (!op->done && op->event) {
    int rc = srd_rma_gpu_op_poll(op);
    if (rc != SRD_AGAIN) op_finish(op, rc);
    return op->done;
  }
  struct srd_comm *c = op->peer->send;
  if (!op->done && c && c->result) {
    peer_drain(op->peer, c->result);
    op_finish(op, c->result);
  }
  /* An op to ourselves waiting in the NIC's queue of a failed group never
   * runs (the queue stops): it ends with the group's error. */
  if (!op->done && !c && op->coll->result) op_finish(op, op->coll->result);
  return op->done;
}

bool srd_rma_lost_rails(struct srd_comm *c) {
  const struct srd_rma_peer *p = c->rma;
  const struct srd_dev *dev = c->dev;
  if (!p || !c->is_send || c->result) return c->result != 0;
  uint64_t usable = srd_comm_usable_paths(c);
  for (int l = 0; l < dev->nrails; l++) {
    if (usable >> (l * dev->neps) & 1 || (!p->stripes_on_rail[l] && !c->ctrl_on_rail[l])) continue;
    srd_comm_fail(c, SRD_ERR_REMOTE,
                  "RMA to rank %d: rail %d (%s) is gone (%s) with %u write(s) or read(s) and %u signal or control "
                  "message(s) on it in flight, which may or may not have landed; one-sided ops do not move to "
                  "other rails",
                  p->rank, l, dev->rails[l].name, srd_comm_rail_gone_why(c, l), p->stripes_on_rail[l],
                  c->ctrl_on_rail[l]);
    return true;
  }
  return false;
}

void srd_rma_on_ack(struct srd_comm *c, const struct srd_msg_rma_ack *m) {
  struct srd_rma_peer *p = c->rma;
  if (!p || !c->is_send) return;
  /* Acknowledgements may overtake each other: an older one says nothing new.
   * One past what we sent is forged. */
  int32_t ahead = (int32_t)(m->seq - p->acked);
  if (ahead <= 0) return;
  if ((uint32_t)ahead > p->next_seq - p->acked) {
    SRD_WARN_LIMITED(&c->dev->foreign_log,
                     "comm %#x: RMA acknowledgement of op %u outside the ops sent (%u..%u), dropped", c->id, m->seq,
                     p->acked, p->next_seq);
    return;
  }
  p->acked = m->seq;
  peer_post(p);
}
