#include <string.h>

#include "srd/log.h"
#include "srd/proto.h"

struct srd_req *srd_req_get(struct srd_comm *c, enum srd_req_kind kind) {
  for (int i = 0; i < SRD_REQS_PER_COMM; i++) {
    struct srd_req *r = &c->reqs[i];
    if (r->in_use) continue;
    /* Reset only the bookkeeping: buffers and ops are overwritten on use. */
    r->kind = kind;
    r->in_use = true;
    r->done = r->released = r->on_pending = false;
    r->result = 0;
    r->outstanding = 0;
    r->n = r->entries_done = 0;
    r->nstripes = r->posted = r->completed = 0;
    r->next_pending = NULL;
    c->reqs_in_flight++;
    return r;
  }
  return NULL;
}

static void pending_remove(struct srd_req *r) {
  struct srd_dev *dev = r->comm->dev;
  struct srd_req **p = &dev->pending_head, *prev = NULL;
  while (*p && *p != r) prev = *p, p = &(*p)->next_pending;
  if (!*p) return;
  *p = r->next_pending;
  if (dev->pending_tail == r) dev->pending_tail = prev;
  r->on_pending = false;
}

void srd_pending_add(struct srd_req *r) {
  struct srd_dev *dev = r->comm->dev;
  if (r->on_pending) return;
  r->on_pending = true;
  r->next_pending = NULL;
  if (dev->pending_tail) dev->pending_tail->next_pending = r;
  else dev->pending_head = r;
  dev->pending_tail = r;
}

void srd_req_finish(struct srd_req *r, int result) {
  if (r->done) return;
  r->done = true;
  r->result = result;
  if (r->on_pending) pending_remove(r);
  r->comm->reqs_in_flight--;
}

static void clear_recv_window(struct srd_req *r) {
  for (int i = 0; i < r->n; i++) {
    struct srd_req **slot = &r->comm->by_seq[(r->seq + (uint32_t)i) & SRD_SEQ_MASK];
    if (*slot == r) *slot = NULL;
  }
}

void srd_req_release(struct srd_req *r) {
  if (!r->done) srd_req_finish(r, r->result);
  if (r->kind == SRD_REQ_RECV) clear_recv_window(r);
  r->released = true;
  if (r->outstanding == 0) r->in_use = false;
}

void srd_req_op_done(struct srd_req *r) {
  r->outstanding--;
  if (r->released && r->outstanding == 0) r->in_use = false;
}
