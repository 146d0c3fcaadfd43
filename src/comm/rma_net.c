/* One-sided RMA's entry points (ncclRma, include/srd/net.h): locks,
 * ncclResult_t, and the collective steps. A group's comms are made with the
 * two-sided calls of this facade (a send comm to every peer's listener, a
 * receive comm from each), and the same comms carry the rounds that name
 * their ranks and exchange window keys: NCCL gives the plugin no allgather.
 * The ops themselves are src/proto/rma.c's. */
#include <stdlib.h>
#include <string.h>

#include "nccl/net_common.h"
#include "srd/comm.h"
#include "srd/cuda.h"
#include "srd/log.h"
#include "srd/net.h"
#include "srd/param.h"
#include "srd/rma.h"
#include "srd/sys.h"

#define ROUND_TAG 0x524d41              /* "RMA": the setup rounds' messages */
#define ROUND_MAGIC 0x53524452u

struct rma_ctx {
  uint64_t magic; /* SRD_RMA_CTX_MAGIC */
  struct srd_rma_coll *coll;
  int ncontexts;
};

ncclResult_t srd_rma_net_listen(void *ctx, int dev, void *handle, void **listen_comm) {
  (void)ctx; /* NCCL passes its net context here at times: nothing is kept in it */
  return srd_net_listen(dev, handle, listen_comm);
}

/* One round: every peer gets out[peer] (len bytes) over sends[peer] and we
 * get in[peer] from recvs[peer] (NULL entries: no such peer). Bounded by
 * NCCL_SRD_CONNECT_TIMEOUT_MS without progress. */
static int round_trip(int n, void **sends, void **recvs, char *out, char *in, size_t len) {
  struct xfer {
    void *comm, *mh, *req;
    bool posted, done;
  } *x = calloc((size_t)2 * n, sizeof(*x));
  if (!x) return SRD_ERR_SYSTEM;
  int rc = SRD_OK, left = 0;
  for (int i = 0; i < 2 * n && !rc; i++) {
    x[i].comm = i < n ? sends[i] : recvs[i - n];
    if (!x[i].comm) continue;
    char *buf = i < n ? out + (size_t)i * len : in + (size_t)(i - n) * len;
    if (srd_net_reg_mr(x[i].comm, buf, len, NCCL_PTR_HOST, -1, 0, &x[i].mh) != ncclSuccess) rc = SRD_ERR_SYSTEM;
    left++;
  }
  uint64_t limit = (uint64_t)srd_param_int(SRD_PARAM_CONNECT_TIMEOUT_MS), since = srd_now_ms();
  while (!rc && left) {
    bool moved = false;
    for (int i = 0; i < 2 * n && !rc; i++) {
      if (!x[i].comm || x[i].done) continue;
      ncclResult_t r;
      if (!x[i].posted) {
        int tag = ROUND_TAG;
        size_t sz = len;
        void *buf = i < n ? out + (size_t)i * len : in + (size_t)(i - n) * len;
        r = i < n ? srd_net_isend(x[i].comm, buf, len, tag, x[i].mh, &x[i].req)
                  : srd_net_irecv(x[i].comm, 1, &buf, &sz, &tag, &x[i].mh, &x[i].req);
        x[i].posted = r == ncclSuccess && x[i].req;
      } else {
        int done = 0;
        r = srd_net_test(x[i].req, &done, NULL);
        if (done) x[i].done = true, left--, moved = true;
      }
      if (r != ncclSuccess) rc = SRD_ERR_REMOTE;
    }
    if (moved) since = srd_now_ms();
    else if (srd_now_ms() - since > limit) {
      SRD_WARN("RMA connect: %d setup message(s) of the group still open after %llu ms", left,
               (unsigned long long)limit);
      rc = SRD_ERR_REMOTE;
    }
  }
  for (int i = 0; i < 2 * n; i++)
    if (x[i].mh) srd_net_dereg_mr(x[i].comm, x[i].mh);
  free(x);
  return rc;
}

static void close_comms(int n, void **sends, void **recvs) {
  for (int i = 0; i < n; i++) {
    if (sends[i]) srd_net_close_send(sends[i]);
    if (recvs[i]) srd_net_close_recv(recvs[i]);
  }
}

/* Comms to and from every peer; recvs come in accept order (ranks unknown). */
static int make_comms(int dev, void *handles[], int nranks, int rank, struct srd_listener *l, void **sends,
                      void **recvs) {
  int want = nranks - 1, have_s = 0, have_r = 0;
  uint64_t limit = (uint64_t)srd_param_int(SRD_PARAM_CONNECT_TIMEOUT_MS), since = srd_now_ms();
  while (have_s < want || have_r < want) {
    bool moved = false;
    for (int p = 0; p < nranks; p++) {
      if (p == rank || sends[p]) continue;
      if (srd_net_connect(dev, handles[p], &sends[p]) != ncclSuccess) {
        SRD_WARN("RMA connect: connecting to rank %d failed", p);
        return SRD_ERR_REMOTE;
      }
      if (sends[p]) have_s++, moved = true;
    }
    if (have_r < want) {
      if (srd_net_accept(l, &recvs[have_r]) != ncclSuccess) return SRD_ERR_REMOTE;
      if (recvs[have_r]) have_r++, moved = true;
    }
    if (moved) since = srd_now_ms();
    else if (srd_now_ms() - since > limit) {
      SRD_WARN("RMA connect: %d of %d peers connected, %d of %d accepted after %llu ms without progress", have_s,
               want, have_r, want, (unsigned long long)limit);
      return SRD_ERR_REMOTE;
    }
  }
  return SRD_OK;
}

ncclResult_t srd_rma_net_connect(void *handles[], int nranks, int rank, void *listen_comm, void **out) {
  struct srd_listener *l = listen_comm;
  if (!out) return ncclInvalidArgument;
  *out = NULL;
  if (!handles || nranks < 1 || rank < 0 || rank >= nranks || !l || l->magic != SRD_LISTENER_MAGIC) {
    SRD_WARN("RMA connect: rank %d of %d, listener %p: bad arguments", rank, nranks, listen_comm);
    return ncclInvalidArgument;
  }
  struct srd_dev *dev = l->dev;
  void **sends = calloc((size_t)nranks, sizeof(void *)), **recvs = calloc((size_t)nranks, sizeof(void *));
  void **by_rank = calloc((size_t)nranks, sizeof(void *));
  uint32_t *out_msg = calloc((size_t)nranks, 4 * sizeof(uint32_t)), *in_msg = calloc((size_t)nranks, 4 * sizeof(uint32_t));
  struct srd_rma_coll *coll = srd_rma_coll_new(dev, nranks, rank);
  int rc = sends && recvs && by_rank && out_msg && in_msg && coll ? SRD_OK : SRD_ERR_SYSTEM;
  if (!rc) rc = make_comms(dev->index, handles, nranks, rank, l, sends, recvs);
  /* Round 1: who is behind each accepted comm. */
  for (int p = 0; p < nranks && !rc; p++) {
    uint32_t *m = out_msg + 4 * p;
    m[0] = ROUND_MAGIC, m[1] = (uint32_t)rank, m[2] = (uint32_t)nranks, m[3] = (uint32_t)p;
  }
  if (!rc) rc = round_trip(nranks, sends, recvs, (char *)out_msg, (char *)in_msg, 4 * sizeof(uint32_t));
  for (int i = 0; i < nranks - 1 && !rc; i++) {
    const uint32_t *m = in_msg + 4 * i;
    if (m[0] != ROUND_MAGIC || m[2] != (uint32_t)nranks || m[3] != (uint32_t)rank || m[1] >= (uint32_t)nranks ||
        m[1] == (uint32_t)rank || by_rank[m[1]]) {
      SRD_WARN("RMA connect: a peer introduced itself as rank %u of %u to rank %u: not of this group", m[1], m[2],
               m[3]);
      rc = SRD_ERR_REMOTE;
    } else {
      by_rank[m[1]] = recvs[i];
    }
  }
  if (!rc) {
    pthread_mutex_lock(&dev->lock);
    for (int p = 0; p < nranks; p++)
      if (p != rank) srd_rma_set_peer(coll, p, sends[p], by_rank[p]);
    pthread_mutex_unlock(&dev->lock);
    /* Round 2: every peer is ready for our writes before we return. */
    rc = round_trip(nranks, sends, by_rank, (char *)out_msg, (char *)in_msg, 4 * sizeof(uint32_t));
  }
  if (rc) {
    if (coll) {
      pthread_mutex_lock(&dev->lock);
      srd_rma_coll_detach(coll);
      pthread_mutex_unlock(&dev->lock);
    }
    if (sends && recvs) close_comms(nranks, sends, recvs);
    if (coll) {
      pthread_mutex_lock(&dev->lock);
      srd_rma_coll_free(coll);
      pthread_mutex_unlock(&dev->lock);
    }
  } else {
    *out = coll;
    SRD_INFO(NCCL_INIT | NCCL_NET, "RMA: rank %d connected to %d peer(s) on device %d", rank, nranks - 1,
             dev->index);
  }
  free(sends);
  free(recvs);
  free(by_rank);
  free(out_msg);
  free(in_msg);
  return srd_to_nccl(rc);
}

static bool coll_ok(const struct srd_rma_coll *coll) {
  if (coll && coll->magic == SRD_RMA_COLL_MAGIC) return true;
  SRD_WARN("RMA: %p is not an open RMA group", (const void *)coll);
  return false;
}

ncclResult_t srd_rma_net_close(void *p) {
  struct srd_rma_coll *coll = p;
  if (!coll_ok(coll)) return ncclInvalidArgument;
  struct srd_dev *dev = coll->dev;
  int n = coll->nranks;
  void **sends = calloc((size_t)n, sizeof(void *)), **recvs = calloc((size_t)n, sizeof(void *));
  if (!sends || !recvs) {
    free(sends);
    free(recvs);
    return ncclSystemError;
  }
  pthread_mutex_lock(&dev->lock);
  for (int r = 0; r < n; r++) sends[r] = coll->peers[r].send, recvs[r] = coll->peers[r].recv;
  for (int i = 0; i < coll->nwins; i++)
    if (coll->wins[i]) SRD_WARN("RMA: group closed with window %d still registered", i);
  srd_rma_coll_detach(coll);
  pthread_mutex_unlock(&dev->lock);
  close_comms(n, sends, recvs);
  pthread_mutex_lock(&dev->lock);
  srd_rma_coll_free(coll);
  pthread_mutex_unlock(&dev->lock);
  free(sends);
  free(recvs);
  return ncclSuccess;
}

ncclResult_t srd_rma_net_create_context(void *p, int ncontexts, void **rctx) {
  struct srd_rma_coll *coll = p;
  if (!rctx || !coll_ok(coll) || ncontexts < 1) return ncclInvalidArgument;
  struct rma_ctx *c = calloc(1, sizeof(*c));
  if (!c) return ncclSystemError;
  c->magic = SRD_RMA_CTX_MAGIC;
  c->coll = coll;
  c->ncontexts = ncontexts;
  *rctx = c;
  return ncclSuccess;
}

ncclResult_t srd_rma_net_destroy_context(void *p) {
  struct rma_ctx *c = p;
  if (!c || c->magic != SRD_RMA_CTX_MAGIC) return ncclInvalidArgument;
  c->magic = 0;
  free(c);
  return ncclSuccess;
}

/* Window descriptions as they travel: addr, len, key count, keys. */
#define DESC_WORDS (3 + SRD_MAX_RAILS)

/* The window's CUDA device (-1: host memory), or why NCCL's type is refused. */
static int window_device(void *data, int type, int *cuda_dev) {
  *cuda_dev = -1;
  if (type == NCCL_PTR_HOST) return SRD_OK;
  if (type != NCCL_PTR_CUDA) {
    SRD_WARN("RMA: window of memory type %d refused: host or CUDA windows only", type);
    return SRD_ERR_ARG;
  }
  if (!srd_rma_net_gpu_windows()) {
    SRD_WARN("RMA: GPU window at %p refused: host windows only (NCCL_SRD_RMA=gpu offers GPU windows on shm)", data);
    return SRD_ERR_ARG;
  }
  char err[256];
  if (srd_cuda_pointer_device(srd_cuda_get(), data, cuda_dev, err, sizeof(err))) {
    SRD_WARN("RMA: GPU window at %p refused: %s", data, err);
    return SRD_ERR_ARG;
  }
  return SRD_OK;
}

ncclResult_t srd_rma_net_reg(void *p, void *data, size_t size, int type, uint64_t mr_flags, int dmabuf_fd,
                             uint64_t offset, void **mhandle) {
  struct srd_rma_coll *coll = p;
  if (!mhandle || !coll_ok(coll) || !data || !size) return ncclInvalidArgument;
  *mhandle = NULL;
  int cuda_dev;
  int rc = window_device(data, type, &cuda_dev);
  if (rc) return srd_to_nccl(rc);
  /* No dma-buf is offered for RMA (shm and tcp take none): registered by address. */
  (void)offset;
  (void)dmabuf_fd;
  unsigned flags = (mr_flags & NCCL_NET_MR_FLAG_FORCE_SO ? SRD_RMA_WIN_FORCE_SO : 0) |
                   (mr_flags & NCCL_NET_MR_FLAG_SIGNAL_NEVER_RESET ? SRD_RMA_WIN_NEVER_RESET : 0);
  struct srd_rma_win *w;
  struct srd_rma_remote mine;
  rc = srd_rma_win_new(coll, data, size, cuda_dev, flags, -1, 0, &w, &mine);
  if (rc) return srd_to_nccl(rc);
  /* How its signals will be applied (DESIGN.md "One-sided RMA"): resettable
   * words in GPU memory cost a read-back on the stream each. */
  if (cuda_dev >= 0)
    SRD_INFO(NCCL_NET, "RMA window %u: %zu bytes of GPU memory on CUDA device %d, signal words %s", w->index, size,
             cuda_dev, flags & SRD_RMA_WIN_NEVER_RESET ? "never reset" : "resettable (read back before each signal)");
  int n = coll->nranks;
  uint64_t *out = calloc((size_t)n, DESC_WORDS * 8), *in = calloc((size_t)n, DESC_WORDS * 8);
  void **sends = calloc((size_t)n, sizeof(void *)), **recvs = calloc((size_t)n, sizeof(void *));
  rc = out && in && sends && recvs ? SRD_OK : SRD_ERR_SYSTEM;
  for (int r = 0; r < n && !rc; r++) {
    sends[r] = coll->peers[r].send, recvs[r] = coll->peers[r].recv;
    uint64_t *d = out + (size_t)r * DESC_WORDS;
    d[0] = mine.addr, d[1] = mine.len, d[2] = (uint64_t)mine.nkeys;
    memcpy(d + 3, mine.key, sizeof(mine.key));
  }
  if (!rc) rc = round_trip(n, sends, recvs, (char *)out, (char *)in, DESC_WORDS * 8);
  for (int r = 0; r < n && !rc; r++) {
    if (!recvs[r]) continue;
    const uint64_t *d = in + (size_t)r * DESC_WORDS;
    struct srd_rma_remote rem = {.addr = d[0], .len = d[1], .nkeys = d[2] <= SRD_MAX_RAILS ? (int)d[2] : 0};
    memcpy(rem.key, d + 3, sizeof(rem.key));
    rc = srd_rma_win_set_remote(w, r, &rem);
  }
  free(out);
  free(in);
  free(sends);
  free(recvs);
  if (rc) {
    srd_rma_win_free(w);
    return srd_to_nccl(rc);
  }
  *mhandle = w;
  return ncclSuccess;
}

static struct srd_rma_win *window(struct srd_rma_coll *coll, void *h, const char *what) {
  if (!h) return NULL;
  if (srd_rma_win_valid(coll, h)) return h;
  SRD_WARN("RMA: %s %p is not a registered window of this group", what, h);
  return (struct srd_rma_win *)-1;
}
#define BAD_WIN ((struct srd_rma_win *)-1)

ncclResult_t srd_rma_net_dereg(void *p, void *mhandle) {
  struct srd_rma_coll *coll = p;
  if (!coll_ok(coll)) return ncclInvalidArgument;
  pthread_mutex_lock(&coll->dev->lock);
  struct srd_rma_win *w = window(coll, mhandle, "deregistered handle");
  pthread_mutex_unlock(&coll->dev->lock);
  if (!w || w == BAD_WIN) return ncclInvalidArgument;
  return srd_to_nccl(srd_rma_win_free(w));
}

static struct rma_ctx *ctx_of(void *p, int context) {
  struct rma_ctx *c = p;
  if (!c || c->magic != SRD_RMA_CTX_MAGIC || !coll_ok(c->coll)) return NULL;
  if (context < 0 || context >= c->ncontexts) {
    SRD_WARN("RMA: context %d of %d", context, c->ncontexts);
    return NULL;
  }
  return c;
}

/* Every op: lock, progress, the op, unlock. */
static ncclResult_t finish_call(struct srd_rma_coll *coll, int rc, struct srd_rma_op *op, void **request) {
  if (!rc) {
    srd_rma_progress(coll);
    *request = op;
  }
  pthread_mutex_unlock(&coll->dev->lock);
  return srd_to_nccl(rc);
}

ncclResult_t srd_rma_net_put(void *p, int context, uint64_t src_off, void *src_mh, size_t size, uint64_t dst_off,
                             void *dst_mh, uint32_t rank, uint64_t signal_off, void *signal_mh, uint64_t signal_value,
                             uint32_t signal_op, void **request) {
  struct rma_ctx *c = ctx_of(p, context);
  if (!c || !request) return ncclInvalidArgument;
  *request = NULL;
  struct srd_rma_coll *coll = c->coll;
  struct srd_msg_rma_signal sig = {.offset = signal_off, .value = signal_value};
  if (signal_mh && signal_op != NCCL_NET_SIGNAL_OP_INC && signal_op != NCCL_NET_SIGNAL_OP_ADD) {
    SRD_WARN("RMA: signal op %u is neither INC nor ADD", signal_op);
    return ncclInvalidArgument;
  }
  sig.op = signal_op == NCCL_NET_SIGNAL_OP_INC ? SRD_RMA_SIGNAL_INC : SRD_RMA_SIGNAL_ADD;
  srd_dev_kick(coll->dev);
  pthread_mutex_lock(&coll->dev->lock);
  struct srd_rma_win *src = window(coll, src_mh, "source"), *dst = window(coll, dst_mh, "destination"),
                     *sw = window(coll, signal_mh, "signal window");
  struct srd_rma_op *op = NULL;
  int rc = src == BAD_WIN || dst == BAD_WIN || sw == BAD_WIN ? SRD_ERR_ARG : SRD_OK;
  if (!rc && sw) sig.window = sw->index;
  if (!rc) rc = srd_rma_put(coll, (int)rank, src, src_off, dst, dst_off, size, sw ? &sig : NULL, &op);
  return finish_call(coll, rc, op, request);
}

ncclResult_t srd_rma_net_get(void *p, int context, uint64_t remote_off, void *remote_mh, size_t size,
                             uint64_t local_off, void *local_mh, uint32_t rank, void **request) {
  struct rma_ctx *c = ctx_of(p, context);
  if (!c || !request) return ncclInvalidArgument;
  *request = NULL;
  struct srd_rma_coll *coll = c->coll;
  srd_dev_kick(coll->dev);
  pthread_mutex_lock(&coll->dev->lock);
  struct srd_rma_win *rw = window(coll, remote_mh, "remote window"), *lw = window(coll, local_mh, "local window");
  struct srd_rma_op *op = NULL;
  int rc = !rw || !lw || rw == BAD_WIN || lw == BAD_WIN ? SRD_ERR_ARG : SRD_OK;
  if (!rc) rc = srd_rma_get(coll, (int)rank, lw, local_off, rw, remote_off, size, &op);
  return finish_call(coll, rc, op, request);
}

ncclResult_t srd_rma_net_flush(void *p, int context, void *mhandle, uint32_t rank, void **request) {
  struct rma_ctx *c = ctx_of(p, context);
  if (!c || !request) return ncclInvalidArgument;
  *request = NULL;
  struct srd_rma_coll *coll = c->coll;
  pthread_mutex_lock(&coll->dev->lock);
  struct srd_rma_win *w = window(coll, mhandle, "flushed window");
  bool ok = w && w != BAD_WIN && rank < (uint32_t)coll->nranks;
  pthread_mutex_unlock(&coll->dev->lock);
  /* What a write or read of a peer completed is in memory already (host
   * windows; shm copies into GPU windows synchronously) or is once the
   * driver flushed GPUDirect writes (a NIC's, where the GPU does not order
   * them): nothing else to wait for (NULL request). Self ops on GPU windows
   * may still run on the window's stream, waited for out of the lock so that
   * progress goes on (the stream and window outlive a flush NCCL makes of
   * them). */
  return srd_to_nccl(ok ? srd_rma_gpu_flush(w) : SRD_ERR_ARG);
}

ncclResult_t srd_rma_net_test(void *p, void *request, int *done) {
  struct srd_rma_coll *coll = p;
  struct srd_rma_op *op = request;
  if (!done || !coll_ok(coll)) return ncclInvalidArgument;
  *done = 0;
  struct srd_dev *dev = coll->dev;
  srd_dev_kick(dev);
  pthread_mutex_lock(&dev->lock);
  if (!srd_rma_op_valid(coll, op)) {
    pthread_mutex_unlock(&dev->lock);
    SRD_WARN("RMA: test of request %p, which is not an open request of this group", request);
    return ncclInvalidArgument;
  }
  /* NCCL may spin on test alone (its loopback flush does): it progresses. */
  if (!op->done) {
    srd_dev_progress(dev);
    srd_rma_progress(coll);
  }
  int rc = SRD_OK;
  if (srd_rma_op_test(op)) {
    *done = 1;
    rc = op->result;
    srd_rma_op_release(op);
  }
  pthread_mutex_unlock(&dev->lock);
  return srd_to_nccl(rc);
}

ncclResult_t srd_rma_net_progress(void *p) {
  struct rma_ctx *c = p;
  if (!c || c->magic != SRD_RMA_CTX_MAGIC || !coll_ok(c->coll)) return ncclInvalidArgument;
  struct srd_dev *dev = c->coll->dev;
  srd_dev_kick(dev);
  pthread_mutex_lock(&dev->lock);
  srd_dev_progress(dev);
  srd_rma_progress(c->coll);
  int rc = c->coll->result;
  pthread_mutex_unlock(&dev->lock);
  return srd_to_nccl(rc);
}

ncclResult_t srd_rma_net_last_error(void *p, int *has_error) {
  struct rma_ctx *c = p;
  if (!has_error || !c || c->magic != SRD_RMA_CTX_MAGIC || !coll_ok(c->coll)) return ncclInvalidArgument;
  pthread_mutex_lock(&c->coll->dev->lock);
  *has_error = c->coll->result != 0;
  pthread_mutex_unlock(&c->coll->dev->lock);
  return ncclSuccess;
}
