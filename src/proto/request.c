/* Requests: taken from the device's pool into a free slot of the comm when a
 * call needs one, given back when NCCL and the provider are both done. */
#include <stdlib.h>
#include <string.h>

#include "srd/log.h"
#include "srd/proto.h"

_Static_assert(SRD_REQS_PER_COMM <= 1 << SRD_SLOT_BITS, "a receive slot must fit the immediate data");

static struct srd_req *pool_take(struct srd_dev *dev) {
  struct srd_req *r = dev->free_reqs;
  if (r) {
    dev->free_reqs = r->next_pending;
    return r;
  }
  return malloc(sizeof(*r));
}

/* The slot is free again; a receive slot counts the use, so that a write
 * still on its way for the old request cannot complete the next one. */
static void recycle(struct srd_req *r) {
  struct srd_comm *c = r->comm;
  struct srd_dev *dev = c->dev;
  srd_pending_remove(r); /* a comm freed with refused work leaves the ring */
  r->in_use = false;
  c->reqs[r->slot] = NULL;
  if (!c->is_send) {
    struct srd_recv_comm *rcv = srd_recv_comm(c);
    rcv->prev_offered[r->slot] = r->cts_sent;
    rcv->slot_uses[r->slot]++;
  }
  r->next_pending = dev->free_reqs;
  dev->free_reqs = r;
}

struct srd_req *srd_req_get(struct srd_comm *c, enum srd_req_kind kind) {
  int i = 0;
  while (i < SRD_REQS_PER_COMM && c->reqs[i]) i++;
  if (i == SRD_REQS_PER_COMM) return NULL;
  struct srd_req *r = pool_take(c->dev);
  if (!r) return NULL;
  /* Reset only the bookkeeping: buffers and ops are overwritten on use. */
  r->comm = c;
  r->slot = i;
  r->slot_tag = c->is_send ? 0 : srd_slot_tag((uint32_t)i, srd_recv_comm(c)->slot_uses[i]);
  r->kind = kind;
  r->in_use = true;
  r->done = r->released = r->on_pending = r->cts_sent = r->old_keys = false;
  r->result = 0;
  r->outstanding = 0;
  r->n = r->entries_done = 0;
  r->nstripes = r->posted = r->completed = 0;
  r->stripes_done = r->resend = r->unsure = 0;
  r->unsure_round = r->settle_round = r->held_round = 0;
  r->copies = 0;
  r->next_pending = r->prev_pending = NULL;
  c->reqs[i] = r;
  c->reqs_in_flight++;
  return r;
}

void srd_req_put_all(struct srd_comm *c) {
  for (int i = 0; i < SRD_REQS_PER_COMM; i++)
    if (c->reqs[i]) recycle(c->reqs[i]);
}

void srd_pools_free(struct srd_dev *dev) {
  for (int d = 0; d < 2; d++)
    while (dev->free_comms[d]) {
      struct srd_comm *c = dev->free_comms[d];
      dev->free_comms[d] = c->next_closed;
      free(c);
    }
  while (dev->free_reqs) {
    struct srd_req *r = dev->free_reqs;
    dev->free_reqs = r->next_pending;
    free(r);
  }
  while (dev->free_cts) {
    struct srd_cts_rec *rec = dev->free_cts;
    dev->free_cts = rec->next_free;
    free(rec->keys);
    free(rec);
  }
}

/* The ring of comms with refused work, in the order they get their turns:
 * a comm joins before the one whose turn is next (at the ring's end). */
static void ring_join(struct srd_comm *c) {
  struct srd_dev *dev = c->dev;
  struct srd_comm *next = dev->pending;
  if (!next) {
    c->pend_next = c->pend_prev = c;
    dev->pending = c;
  } else {
    c->pend_next = next;
    c->pend_prev = next->pend_prev;
    next->pend_prev->pend_next = c;
    next->pend_prev = c;
  }
  dev->npending++;
}

static void ring_leave(struct srd_comm *c) {
  struct srd_dev *dev = c->dev;
  if (!c->pend_next) return;
  if (c->pend_next == c) {
    dev->pending = NULL;
  } else {
    c->pend_prev->pend_next = c->pend_next;
    c->pend_next->pend_prev = c->pend_prev;
    if (dev->pending == c) dev->pending = c->pend_next; /* its turn passes on */
  }
  c->pend_next = c->pend_prev = NULL;
  dev->npending--;
}

void srd_pending_remove(struct srd_req *r) {
  struct srd_comm *c = r->comm;
  if (!r->on_pending) return;
  if (r->prev_pending) r->prev_pending->next_pending = r->next_pending;
  else c->pending_head = r->next_pending;
  if (r->next_pending) r->next_pending->prev_pending = r->prev_pending;
  else c->pending_tail = r->prev_pending;
  r->next_pending = r->prev_pending = NULL;
  r->on_pending = false;
  if (!c->pending_head) ring_leave(c);
}

void srd_pending_add(struct srd_req *r) {
  struct srd_comm *c = r->comm;
  if (r->on_pending) return;
  r->on_pending = true;
  r->next_pending = NULL;
  r->prev_pending = c->pending_tail;
  if (c->pending_tail) c->pending_tail->next_pending = r;
  else c->pending_head = r;
  c->pending_tail = r;
  if (!c->pend_next) ring_join(c);
}

void srd_req_finish(struct srd_req *r, int result) {
  if (r->done) return;
  r->done = true;
  r->result = result;
  if (r->comm->dev->from_lane) r->comm->traffic.by_lane++;
  if (r->on_pending) srd_pending_remove(r);
  r->comm->reqs_in_flight--;
}

/* A receive whose clear-to-send went out and that did not complete (it
 * failed) may still be written by the peer: it keeps its slot until the comm
 * closes, so that deregistering its buffer finds it (srd_proto_quiesce). */
static bool may_be_written(const struct srd_req *r) {
  return r->kind == SRD_REQ_RECV && r->cts_sent && r->entries_done < r->n;
}

/* A send whose peer holds the receive it wrote to until told SETTLED keeps
 * its slot until then (src/proto/fence.c). */
static bool keeps_slot(const struct srd_req *r) { return may_be_written(r) || r->settle_round; }

void srd_req_settled(struct srd_req *r) {
  r->settle_round = 0;
  if (r->released && r->outstanding == 0 && !keeps_slot(r)) recycle(r);
}

void srd_req_release(struct srd_req *r) {
  if (!r->done) srd_req_finish(r, r->result);
  r->released = true;
  if (r->outstanding == 0 && !keeps_slot(r)) recycle(r);
}

void srd_req_op_done(struct srd_req *r) {
  r->outstanding--;
  if (r->released && r->outstanding == 0 && !keeps_slot(r)) recycle(r);
}
