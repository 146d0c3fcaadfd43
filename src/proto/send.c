#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include <rdma/fi_errno.h>

#include "srd/log.h"
#include "srd/proto.h"
#include "srd/stats.h"

/* Every entry of the record is used: back to the device's pool. */
static void release_cts(struct srd_comm *c, struct srd_cts_rec *rec) {
  struct srd_send_comm *s = srd_send_comm(c);
  if (s->cur == rec) s->cur = NULL;
  for (int i = 0; i < SRD_CTS_RECORDS; i++)
    if (s->cts[i] == rec) s->cts[i] = NULL;
  rec->next_free = c->dev->free_cts;
  c->dev->free_cts = rec;
}

/* The clear-to-send covering sequence k, if it has arrived. */
static struct srd_cts_rec *cts_for(struct srd_comm *c, uint32_t k) {
  struct srd_send_comm *s = srd_send_comm(c);
  struct srd_cts_rec *rec = s->cur;
  if (rec && !srd_seq_before(k, rec->seq) && srd_seq_before(k, rec->seq + (uint32_t)rec->n)) return rec;
  for (int i = 0; i < SRD_CTS_RECORDS; i++)
    if (s->cts[i] && s->cts[i]->seq == k) return s->cur = s->cts[i];
  return NULL;
}

/* A free record slot of c with a record from the pool (NULL: none). */
static struct srd_cts_rec *cts_take(struct srd_comm *c) {
  struct srd_send_comm *s = srd_send_comm(c);
  int i = 0;
  while (i < SRD_CTS_RECORDS && s->cts[i]) i++;
  if (i == SRD_CTS_RECORDS) {
    srd_comm_fail(c, SRD_ERR_INTERNAL, "more than %d clear-to-send messages outstanding", SRD_CTS_RECORDS);
    return NULL;
  }
  struct srd_cts_rec *rec = c->dev->free_cts;
  if (rec) c->dev->free_cts = rec->next_free;
  else if (!(rec = calloc(1, sizeof(*rec)))) {
    srd_comm_fail(c, SRD_ERR_SYSTEM, "out of memory");
    return NULL;
  }
  int need = SRD_MAX_RECVS * c->remote_rails;
  if (rec->keys_cap < need) {
    uint64_t *keys = realloc(rec->keys, (size_t)need * sizeof(uint64_t));
    if (!keys) {
      rec->next_free = c->dev->free_cts;
      c->dev->free_cts = rec;
      srd_comm_fail(c, SRD_ERR_SYSTEM, "out of memory");
      return NULL;
    }
    rec->keys = keys;
    rec->keys_cap = need;
  }
  s->cts[i] = rec;
  return rec;
}

static int claim_entry(struct srd_cts_rec *rec, int tag) {
  for (int j = 0; j < rec->n; j++)
    if (!(rec->used & 1u << j) && rec->e[j].tag == tag) {
      rec->used |= 1u << j;
      return j;
    }
  return -1;
}

_Static_assert(SRD_EAGER_WINDOW <= SRD_SENT_TAGS, "the receiver keeps eager data only that far ahead");

void srd_proto_on_cts(struct srd_comm *c, const struct srd_msg_cts *m) {
  struct srd_send_comm *sc = srd_send_comm(c);
  if (m->nkeys != c->remote_rails) {
    srd_comm_fail(c, SRD_ERR_REMOTE, "clear-to-send carries %d keys for %d peer rails", m->nkeys, c->remote_rails);
    return;
  }
  /* The receiver posted everything before end: the eager window moves on. */
  uint32_t end = m->seq + m->n;
  if (srd_seq_before(sc->cts_end, end)) sc->cts_end = end;
  /* A clear-to-send posted again after a rail failed (its first copy may sit
   * on the dead link) is one we may have already. */
  for (int i = 0; i < SRD_CTS_RECORDS; i++)
    if (sc->cts[i] && sc->cts[i]->seq == m->seq) return;
  if (!srd_seq_before(c->next_seq, end)) return; /* everything in it went eagerly */
  struct srd_cts_rec *rec = cts_take(c);
  if (!rec) return;
  rec->seq = m->seq;
  rec->n = m->n;
  rec->slot = m->slot;
  rec->used = 0;
  for (int j = 0; j < m->n; j++) {
    rec->e[j] = m->e[j];
    for (int r = 0; r < c->remote_rails; r++) rec->keys[j * c->remote_rails + r] = srd_cts_key(m, j, r);
  }
  /* Messages of this group that already went eagerly used their buffers. */
  struct srd_send_comm *s = srd_send_comm(c);
  for (uint32_t k = m->seq; srd_seq_before(k, c->next_seq); k++) claim_entry(rec, s->sent_tag[k % SRD_SENT_TAGS]);
  if (srd_seq_before(m->seq, c->next_seq)) s->cur = rec;
}

static void resend_unlink(struct srd_dev *dev, struct srd_resend *x) {
  if (x->prev) x->prev->next = x->next;
  else dev->resends = x->next;
  if (x->next) x->next->prev = x->prev;
}

void srd_dev_free_resends(struct srd_dev *dev) {
  while (dev->resends) {
    struct srd_resend *x = dev->resends;
    resend_unlink(dev, x);
    free(x);
  }
}

static void stripe_done(struct srd_op *op, int err, const char *errstr) {
  struct srd_req *r = op->owner;
  struct srd_comm *c = r->comm;
  bool copy = !(op >= &r->ops[0].op && op < &r->ops[SRD_REQ_OPS].op);
  int i = copy ? ((struct srd_resend *)op)->stripe : (int)((struct srd_rail_write *)op - r->ops);
  int l = (int)(intptr_t)op->aux;
  if (copy) {
    resend_unlink(c->dev, (struct srd_resend *)op);
    free(op);
    r->copies--;
  }
  c->ops_in_flight--;
  c->writes_in_flight--;
  if (!err) c->writes_done++; /* every copy that completed: the peer counts every one that landed */
  if (r->stripes_done >> i & 1) {
    /* The other copy of this stripe completed first. */
  } else if (err && c->dev->failover && !c->result && !r->done) {
    char why[160];
    snprintf(why, sizeof(why), "RDMA write failed: %s", errstr ? errstr : fi_strerror(-err));
    srd_comm_rail_failed(c, l, why); /* holds what l carried, this stripe too, and fences l */
  } else if (err) {
    srd_comm_fail(c, SRD_ERR_REMOTE, "RDMA write failed: %s", errstr ? errstr : fi_strerror(-err));
    srd_req_finish(r, SRD_ERR_REMOTE);
  } else {
    srd_proto_stripes_landed(r, 1u << i);
  }
  if (c->settle_due) srd_proto_settle(c);
  srd_req_op_done(r);
  srd_proto_bye_progress(c);
}

void srd_proto_stripes_landed(struct srd_req *r, uint32_t mask) {
  mask &= ~r->stripes_done;
  r->stripes_done |= mask;
  r->resend &= ~mask;
  r->unsure &= ~mask;
  r->completed += __builtin_popcount(mask);
  if (mask && r->completed == r->nstripes) srd_req_finish(r, r->result);
}

/* Post stripe i of r on path into w; the provider's answer (0, -FI_EAGAIN,
 * another error). A stripe for a lane with a thread goes to that lane's queue
 * instead: the lane posts it, so the provider's copy into the socket runs
 * there. */
static int post_write(struct srd_req *r, int i, int path, struct srd_rail_write *w, bool *queued) {
  struct srd_comm *c = r->comm;
  struct srd_dev *dev = c->dev;
  const struct srd_stripe *s = &r->stripes[i];
  int l = path / dev->neps;
  struct srd_rail *rail = &dev->rails[l];
  struct srd_rail_mrs *mrs = srd_mr_entry(r->mr, SRD_MR_SEND)->handle;
  struct srd_imm imm = {c->write_id, r->remote_slot, (uint32_t)r->nstripes, (uint32_t)i,
                        (uint32_t)r->remote_entry};
  w->op.done = stripe_done;
  w->op.owner = r;
  w->op.aux = (void *)(intptr_t)l;
  w->ep = path % dev->neps;
  w->src = r->buf + s->offset;
  w->dst = NULL;
  w->len = s->len;
  w->desc = dev->rail_ops->mr_desc(mrs->mr[l]);
  w->imm = srd_imm_pack(imm);
  w->dest = c->peer[path];
  w->raddr = r->raddr + s->offset;
  w->key = r->rkey[l];
  w->owner_result = &c->result;
  if (!srd_dev_caller_polls(dev, l)) {
    dev->rail_ops->queue_write(rail, w);
    *queued = true;
    return 0;
  }
  int rc = dev->rail_ops->write(rail, w->ep, w->src, w->len, w->desc, w->imm, w->dest, w->raddr, w->key, &w->op);
  if (!rc && path < dev->inline_paths) c->traffic.on_lane0++;
  return rc;
}

static int write_refused(struct srd_req *r, int path, int rc) {
  struct srd_comm *c = r->comm;
  srd_comm_fail(c, SRD_ERR_SYSTEM, "RMA write on rail %s failed: %s", c->dev->rails[path / c->dev->neps].name,
                fi_strerror(-rc));
  srd_req_finish(r, SRD_ERR_SYSTEM);
  return c->result;
}

/* The stripes marked for a re-send, each on the next usable path. */
static int post_resends(struct srd_req *r, bool *queued) {
  struct srd_comm *c = r->comm;
  while (r->resend) {
    int i = __builtin_ctz(r->resend);
    if (r->stripes_done >> i & 1) {
      r->resend &= ~(1u << i);
      continue;
    }
    int path = srd_sched_pick(c->dev->sched.npaths, srd_comm_usable_paths(c), c->sched_cursor);
    if (path < 0) {
      srd_comm_fail_no_rail(c);
      srd_req_finish(r, c->result);
      return c->result;
    }
    struct srd_resend *x = calloc(1, sizeof(*x));
    if (!x) return SRD_AGAIN; /* tried again at the next progress */
    x->stripe = i;
    int rc = post_write(r, i, path, &x->w, queued);
    if (rc) {
      free(x);
      return rc == -FI_EAGAIN ? SRD_AGAIN : write_refused(r, path, rc);
    }
    x->next = c->dev->resends;
    if (x->next) x->next->prev = x;
    c->dev->resends = x;
    c->sched_cursor++;
    r->stripes[i].path = path;
    r->resend &= ~(1u << i);
    r->copies++;
    r->outstanding++;
    c->ops_in_flight++;
    c->writes_in_flight++;
    c->traffic.resent++;
  }
  return SRD_OK;
}

/* Post what the provider accepts; the rest waits on the pending list. */
static int post_stripes(struct srd_req *r) {
  struct srd_comm *c = r->comm;
  struct srd_dev *dev = c->dev;
  bool queued = false;
  int rc = r->resend && !r->done ? post_resends(r, &queued) : SRD_OK;
  while (rc == SRD_OK && r->posted < r->nstripes && !r->done) {
    int i = r->posted, path = r->stripes[i].path;
    /* Its rail failed since the split: the next usable path instead. */
    if (dev->failover && !(srd_comm_usable_paths(c) >> path & 1)) {
      path = srd_sched_pick(dev->sched.npaths, srd_comm_usable_paths(c), c->sched_cursor++);
      if (path < 0) break; /* the comm failed: post_resends reports it */
      r->stripes[i].path = path;
    }
    rc = post_write(r, i, path, &r->ops[i], &queued);
    if (rc == -FI_EAGAIN) rc = SRD_AGAIN;
    else if (rc) rc = write_refused(r, path, rc);
    else {
      r->posted++;
      r->outstanding++;
      c->ops_in_flight++;
      c->writes_in_flight++;
    }
  }
  if (queued) srd_dev_kick(dev);
  return rc;
}

bool srd_proto_hold_stripes(struct srd_comm *c, int l, uint32_t round) {
  bool held = false;
  for (int k = 0; k < SRD_REQS_PER_COMM; k++) {
    struct srd_req *r = c->reqs[k];
    if (!r || r->kind != SRD_REQ_SEND || r->done || !r->nstripes) continue;
    uint32_t mark = 0;
    for (int i = 0; i < r->posted; i++)
      if (!((r->stripes_done | r->resend | r->unsure) >> i & 1) && r->stripes[i].path / c->dev->neps == l)
        mark |= 1u << i;
    if (!mark) continue;
    held = true;
    r->unsure |= mark;
    r->unsure_round = round;
  }
  return held;
}

void srd_proto_resend(struct srd_req *r) {
  if (post_stripes(r) == SRD_AGAIN) srd_pending_add(r);
}

/* A comm's refused work in order, until the provider refuses again. */
static int post_comm_pending(struct srd_comm *c) {
  while (c->pending_head) {
    struct srd_req *r = c->pending_head;
    int rc = r->kind == SRD_REQ_SEND ? post_stripes(r) : srd_proto_post_cts(r);
    if (rc == SRD_AGAIN) return rc;
    srd_pending_remove(r);
  }
  return SRD_OK;
}

/* efa refuses per peer (a peer in receiver-not-ready backoff, writes queued
 * for a peer's handshake: efa_rdm_rma_generic_writemsg,
 * efa_rdm_msg_generic_send, efa_rdm_ep_enforce_handshake_for_txe), so one
 * refusal says nothing of the other comms: each comm on the ring gets a turn,
 * in order from where the last pass stopped, and keeps its own order. A pass
 * ends after every comm's turn, or after SRD_PENDING_REFUSALS refusals in a
 * row (the provider is full, not one peer): the next pass starts after the
 * last comm refused, so none waits behind peers that keep refusing. */
void srd_proto_post_pending(struct srd_dev *dev) {
  int turns = dev->npending, refusals = 0;
  while (turns-- > 0 && dev->pending) {
    struct srd_comm *c = dev->pending;
    int rc = post_comm_pending(c);
    if (dev->pending == c) dev->pending = c->pend_next; /* still waiting: the next comm's turn */
    if (rc != SRD_AGAIN) refusals = 0;
    else if (++refusals == SRD_PENDING_REFUSALS) break;
  }
}

struct eager_msg {
  const struct srd_comm *c;
  const void *data;
  size_t size;
  int tag;
};

static size_t encode_eager(void *buf, size_t cap, const void *arg) {
  const struct eager_msg *m = arg;
  size_t hdr = srd_msg_encode_eager_header(buf, cap, m->c->peer_id, m->c->next_seq, m->tag, (uint32_t)m->size);
  if (hdr && m->size) memcpy((char *)buf + hdr, m->data, m->size);
  return hdr ? hdr + m->size : 0;
}

static int send_eager(struct srd_comm *c, const void *data, size_t size, int tag, struct srd_req **out) {
  struct srd_req *r = srd_req_get(c, SRD_REQ_SEND);
  if (!r) {
    srd_comm_fail(c, SRD_ERR_INTERNAL, "more than %d requests in flight", SRD_REQS_PER_COMM);
    return c->result;
  }
  r->seq = c->next_seq;
  r->size = size;
  r->outstanding = 1;
  struct eager_msg m = {c, data, size, tag};
  int rc = srd_comm_send_ctrl(c, FI_ADDR_UNSPEC, encode_eager, &m, r);
  if (rc) {
    r->outstanding = 0;
    srd_req_release(r);
    return rc;
  }
  srd_send_comm(c)->sent_tag[c->next_seq % SRD_SENT_TAGS] = tag;
  c->next_seq++;
  c->eagers++;
  c->traffic.eager++;
  SRD_STAT(SRD_STAT_EAGER_SENT);
  *out = r;
  return SRD_OK;
}

struct trunc_msg {
  const struct srd_comm *c;
  size_t size;
};

static size_t encode_trunc(void *buf, size_t cap, const void *arg) {
  const struct trunc_msg *m = arg;
  return srd_msg_encode_trunc(buf, cap, m->c->peer_id, m->c->next_seq, m->size);
}

/* The peer's buffer is too small: tell it (its receive fails too, rather than
 * waiting forever) and fail this send. */
static int reject_oversized(struct srd_comm *c, size_t size, const struct srd_cts_entry *e, struct srd_req **out) {
  struct srd_req *r = srd_req_get(c, SRD_REQ_SEND);
  if (!r) return SRD_AGAIN;
  struct trunc_msg m = {c, size};
  if (srd_comm_send_ctrl(c, FI_ADDR_UNSPEC, encode_trunc, &m, NULL)) {
    srd_req_release(r);
    return SRD_AGAIN;
  }
  SRD_WARN("send comm %#x: message of %zu bytes is larger than the peer's buffer of %llu bytes (tag %d)", c->id, size,
           (unsigned long long)e->len, e->tag);
  srd_req_finish(r, SRD_ERR_USAGE);
  *out = r;
  return SRD_OK;
}

static size_t encode_rts(void *buf, size_t cap, const void *arg) {
  const struct srd_comm *c = arg;
  return srd_msg_encode_rts(buf, cap, c->peer_id, c->next_seq);
}

/* A message that cannot go eagerly and finds no clear-to-send asks for it
 * (RTS) at once, once: the receiver may be posting them on request only
 * (cts_on_request) and then answers the RTS; otherwise its clear-to-send is
 * on the way and the RTS is dropped there. No timer: an RTS lost with a rail
 * is asked again when the comm moves off that rail (srd_proto_reask_cts). */
static void ask_for_cts(struct srd_comm *c, uint32_t k) {
  struct srd_send_comm *s = srd_send_comm(c);
  if (s->asked && s->asked_seq == k) return;
  if (srd_comm_send_ctrl(c, FI_ADDR_UNSPEC, encode_rts, c, NULL) != SRD_OK) return; /* next call tries again */
  SRD_STAT(SRD_STAT_RTS_SENT);
  s->asked = true;
  s->asked_seq = k;
}

void srd_proto_reask_cts(struct srd_comm *c) { srd_send_comm(c)->asked = false; }

int srd_proto_isend(struct srd_comm *c, const void *data, size_t size, int tag, struct srd_mr_ref *mr,
                    struct srd_req **out) {
  struct srd_dev *dev = c->dev;
  *out = NULL;
  if (c->peer_closed) srd_comm_fail(c, SRD_ERR_REMOTE, "the peer closed its receive comm");
  if (c->result) return c->result;
  if (size && (!mr || !srd_mr_live(mr) || !srd_mr_entry(mr, SRD_MR_SEND) || !srd_mr_covers(mr, data, size))) {
    SRD_WARN("send comm %#x: %zu bytes at %p are outside their registration", c->id, size, data);
    return SRD_ERR_ARG;
  }
  uint32_t k = c->next_seq;
  struct srd_cts_rec *rec = cts_for(c, k);
  /* Small messages go eagerly even when the clear-to-send is there: a send
   * completes as soon as it left, while an RMA write may complete only when
   * the target acknowledged it, and the receiver's copy of a few KiB is cheap. */
  /* GPU memory never goes eagerly: the CPU cannot copy it into a control
   * buffer (only a receiver on a host-only device takes eager data). */
  bool gpu_src = mr && mr->mr->device >= 0;
  /* Where progress threads run, a message they would carry goes to them even
   * if it fits eagerly: an eager send's socket copies are NCCL's thread's own. */
  bool for_lanes = dev->lanes_per_nic > 1 && !dev->lanes_failed && size >= dev->sched.threshold;
  bool eager = size == 0 || (!gpu_src && !for_lanes && size <= c->eager_max);
  if (eager && !srd_seq_before(k, srd_send_comm(c)->cts_end + SRD_EAGER_WINDOW)) {
    /* The receiver keeps eager data only that far past its receives: a slow
     * one is waited for, not flooded. Its next clear-to-send moves the
     * window (a clear-to-send for k would have). */
    c->last_wait_ms = srd_now_ms();
    SRD_STAT(SRD_STAT_ISEND_AGAIN);
    return SRD_AGAIN;
  }
  if (!rec || eager) {
    if (eager) {
      int rc = send_eager(c, data, size, tag, out);
      if (rc == SRD_OK && rec) claim_entry(rec, tag);
      if (rec && rec->used == (1u << rec->n) - 1) release_cts(c, rec);
      return rc;
    }
    c->last_wait_ms = srd_now_ms();
    ask_for_cts(c, k);
#ifdef SRD_HOP_STATS
    if (!c->stat_wait_ns) c->stat_wait_ns = srd_stat_now_ns();
#endif
    SRD_STAT(SRD_STAT_ISEND_AGAIN);
    return SRD_AGAIN;
  }
#ifdef SRD_HOP_STATS
  if (c->stat_wait_ns) SRD_STAT_ADD(SRD_STAT_CTS_WAIT_NS, srd_stat_now_ns() - c->stat_wait_ns);
  c->stat_wait_ns = 0;
#endif
  int j = claim_entry(rec, tag);
  if (j < 0) {
    srd_comm_fail(c, SRD_ERR_USAGE, "send with tag %d matches no buffer of the peer's receive (sequence %u)", tag,
                  k);
    return c->result;
  }
  if (size > rec->e[j].len) {
    if (reject_oversized(c, size, &rec->e[j], out)) {
      rec->used &= ~(1u << j);
      return SRD_AGAIN;
    }
  } else {
    struct srd_req *r = srd_req_get(c, SRD_REQ_SEND);
    if (!r) {
      rec->used &= ~(1u << j);
      srd_comm_fail(c, SRD_ERR_INTERNAL, "more than %d requests in flight", SRD_REQS_PER_COMM);
      return c->result;
    }
    r->seq = k;
    r->remote_entry = j;
    r->remote_slot = rec->slot;
    r->buf = data;
    r->size = size;
    r->mr = mr;
    r->raddr = rec->e[j].addr;
    for (int l = 0; l < dev->nrails; l++) r->rkey[l] = rec->keys[j * c->remote_rails + l % c->remote_rails];
    /* Small messages stay on lane 0, large ones go on the lanes once they
     * run (sched.h); with failover only the paths of usable rails. */
    const struct srd_sched_params *sp = &dev->sched;
    if (size >= sp->threshold) {
      atomic_store_explicit(&c->large, true, memory_order_relaxed);
      srd_dev_want_lanes(dev);
    }
    uint64_t usable =
        srd_sched_paths_for(sp, size, dev->inline_paths, dev->failover ? srd_comm_usable_paths(c) : 0);
    r->nstripes = srd_sched_split_over(sp, size, usable, &c->sched_cursor, r->stripes, SRD_MAX_STRIPES);
    if (r->nstripes < 0) {
      srd_req_release(r);
      srd_comm_fail(c, SRD_ERR_ARG, "message of %zu bytes needs more than %d writes", size, SRD_MAX_STRIPES);
      return c->result;
    }
    c->traffic.rendezvous++;
    c->traffic.writes += (uint64_t)r->nstripes;
    if (post_stripes(r) == SRD_AGAIN) srd_pending_add(r);
    *out = r;
  }
  c->next_seq++;
  if (rec->used == (1u << rec->n) - 1) release_cts(c, rec);
  return SRD_OK;
}
