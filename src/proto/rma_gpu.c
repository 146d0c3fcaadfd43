/* One-sided RMA into GPU memory: self ops, and signals where the provider
 * copies GPU data itself (shm), through a plugin-owned CUDA stream per device
 * (include/srd/rma.h, DESIGN.md "One-sided RMA"). No GDRCopy: the driver
 * writes the signal word, ordered after every copy queued before it on the
 * same stream. Where a NIC writes GPU memory, it writes signals too
 * (rma_nic.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srd/log.h"
#include "srd/rma.h"

#define ERRLEN 256

int srd_rma_gpu_win(struct srd_rma_coll *coll, struct srd_rma_win *w) {
  const struct srd_cuda *cu = srd_cuda_get();
  char err[ERRLEN];
  if (w->cuda_dev >= cu->device_count) {
    SRD_WARN("RMA window on CUDA device %d of %d", w->cuda_dev, cu->device_count);
    return SRD_ERR_ARG;
  }
  if (!coll->streams) {
    coll->streams = calloc((size_t)cu->device_count, sizeof(*coll->streams));
    if (!coll->streams) return SRD_ERR_SYSTEM;
    coll->nstreams = cu->device_count;
  }
  struct srd_cuda_stream **s = &coll->streams[w->cuda_dev];
  if (!*s && srd_cuda_stream_open(cu, w->cuda_dev, s, err, sizeof(err))) {
    SRD_WARN("RMA window on CUDA device %d: no stream for its signals: %s", w->cuda_dev, err);
    return SRD_ERR_SYSTEM;
  }
  w->stream = *s;
  return SRD_OK;
}

int srd_rma_gpu_sync(struct srd_rma_win *w) {
  char err[ERRLEN];
  if (!w->stream || !srd_cuda_stream_sync(w->stream, err, sizeof(err))) return SRD_OK;
  SRD_WARN("RMA window %u on CUDA device %d: %s", w->index, w->cuda_dev, err);
  return SRD_ERR_SYSTEM;
}

int srd_rma_gpu_flush(struct srd_rma_win *w) {
  char err[ERRLEN];
  if (w->stream && w->coll->dev->gdr.flush && srd_cuda_stream_flush_remote(w->stream, err, sizeof(err))) {
    SRD_WARN("RMA flush of GPU window %u on CUDA device %d: %s", w->index, w->cuda_dev, err);
    return SRD_ERR_SYSTEM;
  }
  return srd_rma_gpu_sync(w);
}

void srd_rma_gpu_close(struct srd_rma_coll *coll) {
  for (int d = 0; d < coll->nstreams; d++) srd_cuda_stream_close(coll->streams[d]);
  free(coll->streams);
  coll->streams = NULL;
  coll->nstreams = 0;
}

int srd_rma_apply(struct srd_rma_win *w, char *word, uint8_t op, uint64_t value) {
  uint64_t add = op == SRD_RMA_SIGNAL_INC ? 1 : value;
  if (w->nic_signals) return srd_rma_nic_apply(w, (size_t)(word - w->base) / 8, add);
  if (!w->stream) {
    __atomic_fetch_add((uint64_t *)(void *)word, add, __ATOMIC_RELEASE);
    return SRD_OK;
  }
  char err[ERRLEN];
  uint64_t v;
  size_t at = (size_t)(word - w->base);
  if (w->flags & SRD_RMA_WIN_NEVER_RESET) {
    /* Nobody else writes these words (NCCL zeroed them before registering):
     * what we wrote last is what they hold, no read-back needed. */
    if (!w->shadow && !(w->shadow = calloc(w->len / 8, sizeof(uint64_t)))) {
      SRD_WARN("RMA window %u: no memory for the shadow of its %zu signal words", w->index, w->len / 8);
      return SRD_ERR_SYSTEM;
    }
    v = w->shadow[at / 8] += add;
  } else if (srd_cuda_stream_read64(w->stream, word, &v, err, sizeof(err))) {
    goto fail;
  } else {
    v += add;
  }
  if (!srd_cuda_stream_write64(w->stream, word, v, err, sizeof(err))) return SRD_OK;
fail:
  SRD_WARN("RMA signal into GPU window %u at offset %zu: %s", w->index, at, err);
  return SRD_ERR_SYSTEM;
}

int srd_rma_gpu_self(struct srd_rma_op *op, struct srd_rma_win *dwin, char *dst, struct srd_rma_win *swin,
                     const char *src, size_t size, struct srd_rma_win *sigwin, char *word,
                     const struct srd_msg_rma_signal *sig) {
  char err[ERRLEN];
  struct srd_rma_coll *coll = op->coll;
  struct srd_cuda_stream *s = dwin && dwin->stream ? dwin->stream : swin && swin->stream ? swin->stream : NULL;
  bool queued = false;
  if (size && !s) {
    memmove(dst, src, size);
  } else if (size) {
    if (srd_cuda_stream_copy(s, dst, src, size, err, sizeof(err))) goto fail;
    queued = true;
  }
  if (sig) {
    /* This op's data and every earlier self op's land before the signal: on
     * the signal's own stream that is the stream's order; the other streams
     * (all of them, for a host word or one the NIC writes) are waited for. */
    bool on_stream = sigwin->stream && !sigwin->nic_signals;
    for (int d = 0; d < coll->nstreams; d++)
      if (coll->streams[d] && (!on_stream || coll->streams[d] != sigwin->stream) &&
          srd_cuda_stream_sync(coll->streams[d], err, sizeof(err)))
        goto fail;
    int rc = srd_rma_apply(sigwin, word, sig->op, sig->value);
    if (rc) return rc;
    queued = on_stream;
    if (on_stream) s = sigwin->stream;
  }
  if (queued && srd_cuda_stream_mark(s, &op->event, err, sizeof(err))) goto fail;
  op->stream = queued ? s : NULL;
  return SRD_OK;
fail:
  SRD_WARN("RMA %s of %zu bytes to ourselves: %s", op->kind == SRD_RMA_PUT ? "put" : "get", size, err);
  return SRD_ERR_SYSTEM;
}

int srd_rma_gpu_op_poll(struct srd_rma_op *op) {
  char err[ERRLEN];
  int r = srd_cuda_stream_done(op->stream, op->event, err, sizeof(err));
  if (!r) return SRD_AGAIN;
  op->event = NULL;
  if (r > 0) return SRD_OK;
  SRD_WARN("RMA %s to ourselves on CUDA device %d: %s", op->kind == SRD_RMA_PUT ? "put" : "get",
           srd_cuda_stream_ordinal(op->stream), err);
  return SRD_ERR_SYSTEM;
}
