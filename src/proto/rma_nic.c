/* Signal words written by the NIC (include/srd/rma.h, DESIGN.md "One-sided
 * RMA"): where a NIC places GPU data without the provider's CUDA calls
 * (efa), a signal is an 8-byte loopback RDMA write from a registered host
 * slot into the window, never a CUDA stream operation: a stream's write can
 * be scheduled behind the application's cuStreamWaitValue64 on a shared
 * hardware queue, the very wait the write would release (CUDA's warning on
 * cuStreamWaitValue64: "Improper use of this API may deadlock").
 *
 * One loopback op in flight per group, each posted only once the last one
 * completed (placed: FI_DELIVERY_COMPLETE), so signal words change in the
 * order signals were applied. Before every write the driver flushes the
 * GPUDirect RDMA writes completed so far where the GPU does not order them
 * (gdr.flush): the data of every op applied before is visible first. A word
 * waits in the queue at most once; signals to it meanwhile add to what the
 * write will carry, so the queue is bounded by the windows' words. A
 * resettable word (not NEVER_RESET: the GPU may zero it) is read back by a
 * loopback read first.
 *
 * Puts and gets to ourselves take the same queue (loopback writes or reads,
 * max_write at a time), for the same reason: a copy on a stream could wait
 * behind the application's stream wait too. Their signal is applied once
 * their data is placed, so a signal to ourselves is seen after the data of
 * its op and of every earlier op to ourselves. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/fi_errno.h>

#include "srd/log.h"
#include "srd/param.h"
#include "srd/rma.h"
#include "srd/sys.h"

enum nic_state {
  NIC_IDLE,  /* nothing taken from the queue */
  NIC_READ,  /* cur's word must be read back (posted when in_flight) */
  NIC_WRITE, /* slot[0] must be written to cur's word (posted when in_flight) */
  NIC_SELF,  /* cur's op moves its data from cur_off on (posted when in_flight) */
};

enum entry_kind {
  ENTRY_WORD,        /* a word the NIC writes: win, word; its adds wait in the window's pending */
  ENTRY_SELF,        /* an op to ourselves: win is the window of its remote side (destination of a
                      * put, source of a get), word the index of its local one (UINT32_MAX both
                      * for a signal without data) */
  ENTRY_HOST_SIGNAL, /* an op to ourselves signals a word no NIC writes: add to win's word, in turn */
};

struct nic_entry {
  enum entry_kind kind;
  uint32_t win, word;
  uint64_t add;
  struct srd_rma_op *self;
};

struct srd_rma_nic {
  struct srd_rma_coll *coll; /* NULL: the group closed with the op in flight, which frees this */
  struct srd_dev *dev;
  struct srd_op op;
  uint64_t *slot;  /* registered on rail 0: [0] the value written, [1] a word read back */
  struct fid_mr *mr;
  struct nic_entry *q; /* ring of words to write */
  size_t head, count, cap;
  enum nic_state state;
  bool in_flight;
  struct nic_entry cur;
  uint64_t cur_add; /* what cur's write adds to the word read back */
  size_t cur_off, cur_len; /* NIC_SELF: data placed so far, and what the op in flight moves */
  uint64_t selves; /* ops to ourselves taken so far */
};

static void nic_free(struct srd_rma_nic *nic) {
  if (nic->mr) nic->dev->rail_ops->mr_close(nic->mr);
  free(nic->slot);
  free(nic->q);
  free(nic);
}

static void nic_done(struct srd_op *op, int err, const char *errstr);

static struct srd_rma_nic *nic_get(struct srd_rma_coll *coll) {
  if (coll->nic) return coll->nic;
  struct srd_dev *dev = coll->dev;
  struct srd_rma_nic *nic = calloc(1, sizeof(*nic));
  if (!nic || posix_memalign((void **)&nic->slot, 64, 64)) {
    SRD_WARN("RMA: no memory for the slots that signals are written from");
    free(nic);
    return NULL;
  }
  nic->coll = coll;
  nic->dev = dev;
  nic->op.done = nic_done;
  nic->op.owner = nic;
  memset(nic->slot, 0, 64);
  int rc = dev->rail_ops->reg(&dev->rails[0], nic->slot, 64, FI_READ | FI_WRITE, -1, -1, 0, &nic->mr);
  if (rc) {
    SRD_WARN("RMA: registering the signal slots on rail %s failed: %s", dev->rails[0].name, fi_strerror(-rc));
    nic->mr = NULL;
    nic_free(nic);
    return NULL;
  }
  SRD_INFO(NCCL_NET, "RMA: signal words written by loopback RDMA writes on rail %s%s", dev->rails[0].name,
           dev->gdr.flush ? ", each after cuFlushGPUDirectRDMAWrites" : "");
  return coll->nic = nic;
}

/* Per-word state of w, made at its first signal. */
static int win_words(struct srd_rma_win *w) {
  size_t n = w->len / 8;
  if (!w->pending) w->pending = calloc(n, sizeof(*w->pending));
  if (!w->queued) w->queued = calloc(n, 1);
  if ((w->flags & SRD_RMA_WIN_NEVER_RESET) && !w->shadow) w->shadow = calloc(n, sizeof(*w->shadow));
  if (w->pending && w->queued && (w->shadow || !(w->flags & SRD_RMA_WIN_NEVER_RESET))) return SRD_OK;
  SRD_WARN("RMA window %u: no memory for the state of its %zu signal words", w->index, n);
  return SRD_ERR_SYSTEM;
}

static int push(struct srd_rma_nic *nic, struct nic_entry e) {
  if (nic->count == nic->cap) {
    size_t cap = nic->cap ? 2 * nic->cap : 64;
    struct nic_entry *q = malloc(cap * sizeof(*q));
    if (!q) return SRD_ERR_SYSTEM;
    for (size_t i = 0; i < nic->count; i++) q[i] = nic->q[(nic->head + i) % nic->cap];
    free(nic->q);
    nic->q = q;
    nic->head = 0;
    nic->cap = cap;
  }
  nic->q[(nic->head + nic->count++) % nic->cap] = e;
  return SRD_OK;
}

static int queue_word(struct srd_rma_nic *nic, struct srd_rma_win *w, size_t word, uint64_t add) {
  if (win_words(w)) return srd_rma_coll_fail(w->coll, SRD_ERR_SYSTEM);
  w->pending[word] += add;
  if (!w->queued[word]) {
    if (push(nic, (struct nic_entry){ENTRY_WORD, w->index, (uint32_t)word, 0, NULL})) {
      SRD_WARN("RMA window %u: no memory to queue a signal", w->index);
      return srd_rma_coll_fail(w->coll, SRD_ERR_SYSTEM);
    }
    w->queued[word] = 1;
  }
  return SRD_OK;
}

int srd_rma_nic_apply(struct srd_rma_win *w, size_t word, uint64_t add) {
  struct srd_rma_nic *nic = nic_get(w->coll);
  if (!nic) return srd_rma_coll_fail(w->coll, SRD_ERR_SYSTEM);
  int rc = queue_word(nic, w, word, add);
  return rc ? rc : srd_rma_nic_post(w->coll);
}

bool srd_rma_nic_takes_self(const struct srd_rma_coll *coll, const struct srd_rma_win *lwin,
                            const struct srd_rma_win *rwin, const struct srd_rma_win *sigwin) {
  return (lwin && lwin->nic_signals) || (rwin && rwin->nic_signals) || (sigwin && sigwin->nic_signals) ||
         (coll->nic && (coll->nic->count || coll->nic->state != NIC_IDLE));
}

int srd_rma_nic_self(struct srd_rma_op *op, struct srd_rma_win *rwin, struct srd_rma_win *lwin) {
  struct srd_rma_coll *coll = op->coll;
  struct srd_rma_nic *nic = nic_get(coll);
  struct nic_entry e = {ENTRY_SELF, op->size ? rwin->index : UINT32_MAX, op->size ? lwin->index : UINT32_MAX, 0, op};
  if (!nic || push(nic, e)) {
    SRD_WARN("RMA %s of %zu bytes to ourselves: no memory to queue it", op->kind == SRD_RMA_PUT ? "put" : "get",
             op->size);
    return srd_rma_coll_fail(coll, SRD_ERR_SYSTEM);
  }
  if (!nic->selves++) SRD_INFO(NCCL_NET, "RMA: ops to ourselves by loopback RDMA on rail %s", coll->dev->rails[0].name);
  op->outstanding++;
  return srd_rma_nic_post(coll);
}

/* The op to ourselves under way ends: its signal, once its data is placed,
 * goes to the back of the queue, behind every signal queued before (or adds
 * to a word waiting there: that write comes after this data either way). */
static void self_end(struct srd_rma_nic *nic, int rc) {
  struct srd_rma_coll *coll = nic->coll;
  struct srd_rma_op *op = nic->cur.self;
  nic->state = NIC_IDLE;
  char *at = NULL;
  if (!rc && op->has_signal && !(rc = srd_rma_signal_target(coll, &op->signal, coll->rank, &at, NULL))) {
    struct srd_rma_win *w = coll->wins[op->signal.window];
    uint64_t add = op->signal.op == SRD_RMA_SIGNAL_INC ? 1 : op->signal.value;
    uint32_t word = (uint32_t)((size_t)(at - w->base) / 8);
    if (w->nic_signals) {
      rc = queue_word(nic, w, word, add);
    } else if (push(nic, (struct nic_entry){ENTRY_HOST_SIGNAL, w->index, word, add, NULL})) {
      SRD_WARN("RMA window %u: no memory to queue a signal", w->index);
      rc = SRD_ERR_SYSTEM;
    }
  }
  srd_rma_op_end(op, rc);
}

/* Take the next entry whose window is still there (a word's adds go with
 * it); a signal to a word no NIC writes is applied on the way. */
static bool take(struct srd_rma_nic *nic) {
  struct srd_rma_coll *coll = nic->coll;
  while (nic->count) {
    struct nic_entry e = nic->q[nic->head];
    nic->head = (nic->head + 1) % nic->cap;
    nic->count--;
    if (e.kind == ENTRY_SELF) {
      nic->cur = e;
      nic->cur_off = 0;
      nic->state = NIC_SELF;
      return true;
    }
    struct srd_rma_win *w = coll->wins[e.win];
    if (!w) continue; /* deregistered: NCCL no longer waits on it */
    if (e.kind == ENTRY_HOST_SIGNAL) {
      int rc = srd_rma_apply(w, w->base + (size_t)e.word * 8, SRD_RMA_SIGNAL_ADD, e.add);
      if (rc) srd_rma_coll_fail(coll, rc);
      continue;
    }
    w->queued[e.word] = 0;
    nic->cur = e;
    nic->cur_add = w->pending[e.word];
    w->pending[e.word] = 0;
    if (w->shadow) {
      nic->slot[0] = w->shadow[e.word] += nic->cur_add;
      nic->state = NIC_WRITE;
    } else {
      nic->state = NIC_READ;
    }
    return true;
  }
  return false;
}

/* The loopback op of the op to ourselves under way failed (the provider's
 * text): the op and the group fail. */
static int self_failed(struct srd_rma_nic *nic, const char *text) {
  const struct srd_rma_op *op = nic->cur.self;
  SRD_WARN("RMA %s of %zu bytes to ourselves: loopback %s on rail %s failed: %s",
           op->kind == SRD_RMA_PUT ? "put" : "get", op->size, op->kind == SRD_RMA_PUT ? "write" : "read",
           nic->dev->rails[0].name, text);
  self_end(nic, SRD_ERR_SYSTEM);
  return srd_rma_coll_fail(nic->coll, SRD_ERR_SYSTEM);
}

/* Post the next piece of the op to ourselves under way: SRD_OK posted (or
 * the provider's queue full: progress posts it again), SRD_AGAIN the op
 * ended, or the group's error. */
static int post_self(struct srd_rma_nic *nic) {
  struct srd_rma_coll *coll = nic->coll;
  struct srd_rma_op *op = nic->cur.self;
  if (nic->cur_off == op->size) {
    self_end(nic, SRD_OK);
    return SRD_AGAIN;
  }
  struct srd_rma_win *rwin = coll->wins[nic->cur.win], *lwin = coll->wins[nic->cur.word];
  if (!rwin || !lwin) {
    SRD_WARN("RMA %s of %zu bytes to ourselves: a window it names was deregistered before it ran",
             op->kind == SRD_RMA_PUT ? "put" : "get", op->size);
    self_end(nic, SRD_ERR_USAGE);
    return SRD_AGAIN;
  }
  struct srd_dev *dev = coll->dev;
  struct srd_rail *rail = &dev->rails[0];
  uint64_t key = dev->rail_ops->mr_key(rwin->mrs->mr[0]);
  void *desc = dev->rail_ops->mr_desc(lwin->mrs->mr[0]);
  size_t len = op->size - nic->cur_off;
  if (rail->max_write && len > rail->max_write) len = rail->max_write;
  char *local = op->local + nic->cur_off;
  uint64_t raddr = op->raddr + nic->cur_off;
  int rc = op->kind == SRD_RMA_PUT ? dev->rail_ops->loopback_write(rail, local, len, desc, raddr, key, &nic->op)
                                   : dev->rail_ops->loopback_read(rail, local, len, desc, raddr, key, &nic->op);
  if (rc == -FI_EAGAIN) return SRD_OK;
  if (rc) return self_failed(nic, fi_strerror(-rc));
  nic->cur_len = len;
  nic->in_flight = true;
  return SRD_OK;
}

int srd_rma_nic_post(struct srd_rma_coll *coll) {
  struct srd_rma_nic *nic = coll->nic;
  if (!nic || nic->in_flight || coll->result) return coll->result;
  for (;;) {
    if (nic->state == NIC_IDLE && !take(nic)) return SRD_OK;
    if (nic->state == NIC_SELF) {
      int rc = post_self(nic);
      if (rc == SRD_AGAIN) continue; /* ended: the next entry */
      return rc;
    }
    struct srd_rma_win *w = coll->wins[nic->cur.win];
    if (!w) {
      nic->state = NIC_IDLE;
      continue;
    }
    struct srd_dev *dev = coll->dev;
    struct srd_rail *rail = &dev->rails[0];
    uint64_t key = dev->rail_ops->mr_key(w->mrs->mr[0]);
    uint64_t raddr = w->remote[coll->rank].addr + (uint64_t)nic->cur.word * 8;
    void *desc = dev->rail_ops->mr_desc(nic->mr);
    char err[256];
    int rc;
    if (nic->state == NIC_READ) {
      rc = dev->rail_ops->loopback_read(rail, &nic->slot[1], 8, desc, raddr, key, &nic->op);
    } else {
      if (dev->gdr.flush && w->stream && srd_cuda_stream_flush_remote(w->stream, err, sizeof(err))) {
        SRD_WARN("RMA signal into GPU window %u: %s", w->index, err);
        return srd_rma_coll_fail(coll, SRD_ERR_SYSTEM);
      }
      rc = dev->rail_ops->loopback_write(rail, &nic->slot[0], 8, desc, raddr, key, &nic->op);
    }
    if (rc == -FI_EAGAIN) return SRD_OK; /* progress posts it again */
    if (rc) {
      SRD_WARN("RMA signal into window %u at offset %u: loopback %s on rail %s failed: %s", w->index,
               nic->cur.word * 8, nic->state == NIC_READ ? "read" : "write", rail->name, fi_strerror(-rc));
      return srd_rma_coll_fail(coll, SRD_ERR_SYSTEM);
    }
    nic->in_flight = true;
    return SRD_OK;
  }
}

static void nic_done(struct srd_op *op, int err, const char *errstr) {
  struct srd_rma_nic *nic = op->owner;
  struct srd_rma_coll *coll = nic->coll;
  nic->in_flight = false;
  if (!coll) {
    nic_free(nic);
    return;
  }
  if (err && nic->state == NIC_SELF) {
    self_failed(nic, errstr ? errstr : fi_strerror(-err));
    return;
  }
  if (err) {
    SRD_WARN("RMA signal into window %u at offset %u: loopback %s on rail %s failed: %s", nic->cur.win,
             nic->cur.word * 8, nic->state == NIC_READ ? "read" : "write", nic->dev->rails[0].name,
             errstr ? errstr : fi_strerror(-err));
    nic->state = NIC_IDLE;
    srd_rma_coll_fail(coll, SRD_ERR_SYSTEM);
    return;
  }
  if (nic->state == NIC_SELF) {
    nic->cur_off += nic->cur_len;
  } else if (nic->state == NIC_READ) {
    nic->slot[0] = nic->slot[1] + nic->cur_add;
    nic->state = NIC_WRITE;
  } else {
    nic->state = NIC_IDLE;
  }
  srd_rma_nic_post(coll);
}

/* An op to ourselves names two windows: any deregistration waits for it. */
static bool busy(const struct srd_rma_nic *nic, uint32_t index) {
  return nic && nic->in_flight && (index == UINT32_MAX || nic->state == NIC_SELF || nic->cur.win == index);
}

bool srd_rma_nic_settle(struct srd_rma_coll *coll, uint32_t index) {
  /* Lock held: progress here completes the op. */
  uint64_t until = srd_now_us() + (uint64_t)srd_param_int(SRD_PARAM_CLOSE_TIMEOUT_MS) * 1000;
  while (busy(coll->nic, index) && srd_now_us() < until) srd_dev_progress(coll->dev);
  return !busy(coll->nic, index);
}

void srd_rma_nic_close(struct srd_rma_coll *coll) {
  struct srd_rma_nic *nic = coll->nic;
  if (!nic) return;
  nic->count = 0; /* the group closes: nothing queued starts (its ops go with the group) */
  bool settled = srd_rma_nic_settle(coll, UINT32_MAX);
  coll->nic = NULL;
  if (settled) {
    nic_free(nic);
    return;
  }
  SRD_WARN("RMA: a loopback signal write on rail %s outlived the group's close: freed when it completes",
           nic->dev->rails[0].name);
  nic->coll = NULL;
}
