/* RMA writes and reads: one posted now, or queued for the lane thread that
 * owns the rail (it alone posts and reaps there, so an operation's
 * completion is never handled before it left the queue). */
#include "srd/rail.h"

#include <sys/uio.h>

#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "srd/stats.h"

int srd_rail_write(struct srd_rail *rail, int ep, const void *src, size_t len, void *desc, uint32_t imm,
                   fi_addr_t dest, uint64_t raddr, uint64_t key, struct srd_op *op) {
  uint64_t data = rail->len_in_data ? (uint64_t)len << 32 | imm : imm;
  SRD_STAT(SRD_STAT_FI_WRITE);
  if (!rail->delivery_complete)
    return (int)fi_writedata(rail->ep[ep], src, len, desc, data, dest, raddr, key, &op->fi_ctx);
  struct iovec iov = {(void *)src, len};
  struct fi_rma_iov rma = {raddr, len, key};
  struct fi_msg_rma msg = {.msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = dest, .rma_iov = &rma,
                           .rma_iov_count = 1, .context = &op->fi_ctx, .data = data};
  return (int)fi_writemsg(rail->ep[ep], &msg, FI_REMOTE_CQ_DATA | FI_COMPLETION | FI_DELIVERY_COMPLETE);
}

int srd_rail_read(struct srd_rail *rail, int ep, void *dst, size_t len, void *desc, fi_addr_t src, uint64_t raddr,
                  uint64_t key, struct srd_op *op) {
  return (int)fi_read(rail->ep[ep], dst, len, desc, src, raddr, key, &op->fi_ctx);
}

static int post_queued_one(struct srd_rail *rail, struct srd_rail_write *w) {
  if (w->dst) return srd_rail_read(rail, w->ep, w->dst, w->len, w->desc, w->dest, w->raddr, w->key, &w->op);
  return srd_rail_write(rail, w->ep, w->src, w->len, w->desc, w->imm, w->dest, w->raddr, w->key, &w->op);
}

void srd_rail_queue_write(struct srd_rail *rail, struct srd_rail_write *w) {
  w->next = NULL;
  pthread_mutex_lock(&rail->post_lock);
  if (rail->postq_tail) rail->postq_tail->next = w;
  else rail->postq_head = w;
  rail->postq_tail = w;
  pthread_mutex_unlock(&rail->post_lock);
}

int srd_rail_post_queued(struct srd_rail *rail, struct srd_rail_write **failed, bool *more) {
  int posted = 0;
  *failed = NULL;
  *more = false;
  for (;;) {
    pthread_mutex_lock(&rail->post_lock);
    struct srd_rail_write *w = rail->postq_head;
    pthread_mutex_unlock(&rail->post_lock);
    if (!w) break;
    srd_rail_cq_lock(rail);
    int rc = post_queued_one(rail, w);
    srd_rail_cq_unlock(rail);
    if (rc == -FI_EAGAIN) {
      *more = true;
      break;
    }
    /* Only this thread reaps the rail: w's completion cannot be handled
     * before it leaves the queue here. */
    pthread_mutex_lock(&rail->post_lock);
    rail->postq_head = w->next;
    if (!rail->postq_head) rail->postq_tail = NULL;
    pthread_mutex_unlock(&rail->post_lock);
    if (rc) {
      w->err = rc;
      w->next = *failed;
      *failed = w;
    } else {
      posted++;
    }
  }
  return posted;
}

struct srd_rail_write *srd_rail_drop_queued(struct srd_rail *rail, bool (*abandon)(const struct srd_rail_write *w)) {
  struct srd_rail_write *dropped = NULL, *prev = NULL;
  pthread_mutex_lock(&rail->post_lock);
  for (struct srd_rail_write **p = &rail->postq_head; *p;) {
    struct srd_rail_write *w = *p;
    if (!abandon(w)) {
      prev = w;
      p = &w->next;
      continue;
    }
    *p = w->next;
    w->next = dropped;
    dropped = w;
  }
  rail->postq_tail = prev;
  pthread_mutex_unlock(&rail->post_lock);
  return dropped;
}
