/* A plugin-owned CUDA stream for one device (include/srd/cuda.h): how the
 * plugin writes signal words and copies into GPU memory without the
 * application's streams and without GDRCopy. */
#include <stdio.h>
#include <stdlib.h>

#include "srd/cuda.h"

struct srd_cuda_stream {
  const struct srd_cuda *cu;
  int ordinal;
  srd_cudevice dev;
  srd_cucontext ctx; /* the device's primary context, retained while open */
  srd_custream stream;
  uint64_t slot; /* where a read-back lands */
};

static int fail(const struct srd_cuda *cu, srd_curesult rc, const char *what, char *err, size_t errlen) {
  snprintf(err, errlen, "%s failed: %s", what, srd_cuda_error_text(cu, rc).text);
  return -1;
}

int srd_cuda_stream_usable(const struct srd_cuda *cu, int ordinal, char *err, size_t errlen) {
  if (!cu->usable) {
    snprintf(err, errlen, "%s", cu->reason);
    return -1;
  }
  const struct srd_cuda_ops *o = &cu->ops;
  if (!o->stream_create || !o->stream_destroy || !o->stream_synchronize || !o->stream_write_value64 ||
      !o->memcpy_dtoh_async || !o->memcpy_async || !o->event_create || !o->event_record || !o->event_query ||
      !o->event_destroy) {
    snprintf(err, errlen, "the CUDA driver lacks stream memory operations (cuStreamWriteValue64_v2 needs 11.7+)");
    return -1;
  }
  srd_cudevice dev;
  int v = 0;
  srd_curesult rc = o->device_get(&dev, ordinal);
  if (!rc) rc = o->device_get_attribute(&v, SRD_CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, dev);
  if (rc) return fail(cu, rc, "asking CUDA for 64-bit stream memory operations", err, errlen);
  if (!v) {
    snprintf(err, errlen, "CUDA device %d cannot use 64-bit stream memory operations "
             "(CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS is 0)", ordinal);
    return -1;
  }
  return 0;
}

/* Make s's context current for the calls that follow; *saved is the
 * caller's, for unbind. */
static int bind(struct srd_cuda_stream *s, srd_cucontext *saved, char *err, size_t errlen) {
  *saved = NULL;
  if (s->cu->ops.ctx_get_current && s->cu->ops.ctx_get_current(saved)) *saved = NULL;
  srd_curesult rc = s->cu->ops.ctx_set_current(s->ctx);
  return rc ? fail(s->cu, rc, "cuCtxSetCurrent", err, errlen) : 0;
}

static void unbind(struct srd_cuda_stream *s, srd_cucontext saved) {
  if (saved != s->ctx) s->cu->ops.ctx_set_current(saved);
}

int srd_cuda_stream_open(const struct srd_cuda *cu, int ordinal, struct srd_cuda_stream **out, char *err,
                         size_t errlen) {
  *out = NULL;
  if (srd_cuda_stream_usable(cu, ordinal, err, errlen)) return -1;
  struct srd_cuda_stream *s = calloc(1, sizeof(*s));
  if (!s) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  s->cu = cu;
  s->ordinal = ordinal;
  srd_curesult rc = cu->ops.device_get(&s->dev, ordinal);
  if (!rc) rc = cu->ops.primary_ctx_retain(&s->ctx, s->dev);
  if (rc) {
    fail(cu, rc, "cuDevicePrimaryCtxRetain", err, errlen);
    free(s);
    return -1;
  }
  srd_cucontext saved;
  int r = bind(s, &saved, err, errlen);
  if (!r && (rc = cu->ops.stream_create(&s->stream, SRD_CU_STREAM_NON_BLOCKING)))
    r = fail(cu, rc, "cuStreamCreate", err, errlen);
  unbind(s, saved);
  if (r) {
    cu->ops.primary_ctx_release(s->dev);
    free(s);
    return -1;
  }
  *out = s;
  return 0;
}

void srd_cuda_stream_close(struct srd_cuda_stream *s) {
  if (!s) return;
  srd_cucontext saved;
  char err[8];
  if (!bind(s, &saved, err, sizeof(err))) {
    s->cu->ops.stream_synchronize(s->stream);
    s->cu->ops.stream_destroy(s->stream);
  }
  unbind(s, saved);
  s->cu->ops.primary_ctx_release(s->dev);
  free(s);
}

int srd_cuda_stream_ordinal(const struct srd_cuda_stream *s) { return s->ordinal; }

static srd_cudeviceptr dptr(const void *p) { return (srd_cudeviceptr)(uintptr_t)p; }

/* One driver call made with s's context current; r: 0, or -1 with the
 * failed call's name and CUDA's error text in err. */
#define ON_STREAM(r, s, what, call, err, errlen)                            \
  do {                                                                     \
    srd_cucontext saved_;                                                  \
    srd_curesult rc_;                                                      \
    (r) = bind((s), &saved_, (err), (errlen));                             \
    if (!(r) && (rc_ = (call))) (r) = fail((s)->cu, rc_, (what), (err), (errlen)); \
    unbind((s), saved_);                                                   \
  } while (0)

int srd_cuda_stream_write64(struct srd_cuda_stream *s, void *word, uint64_t value, char *err, size_t errlen) {
  int r;
  ON_STREAM(r, s, "cuStreamWriteValue64",
            s->cu->ops.stream_write_value64(s->stream, dptr(word), value, SRD_CU_STREAM_WRITE_VALUE_DEFAULT), err,
            errlen);
  return r;
}

int srd_cuda_stream_read64(struct srd_cuda_stream *s, const void *word, uint64_t *value, char *err, size_t errlen) {
  int r;
  ON_STREAM(r, s, "cuMemcpyDtoHAsync", s->cu->ops.memcpy_dtoh_async(&s->slot, dptr(word), sizeof(s->slot), s->stream),
            err, errlen);
  if (!r) r = srd_cuda_stream_sync(s, err, errlen);
  if (!r) *value = s->slot;
  return r;
}

int srd_cuda_stream_copy(struct srd_cuda_stream *s, void *dst, const void *src, size_t size, char *err,
                         size_t errlen) {
  int r;
  ON_STREAM(r, s, "cuMemcpyAsync", s->cu->ops.memcpy_async(dptr(dst), dptr(src), size, s->stream), err, errlen);
  return r;
}

int srd_cuda_stream_flush_remote(struct srd_cuda_stream *s, char *err, size_t errlen) {
  if (!s->cu->ops.flush_gpudirect_rdma_writes) {
    snprintf(err, errlen, "the CUDA driver lacks cuFlushGPUDirectRDMAWrites");
    return -1;
  }
  int r;
  ON_STREAM(r, s, "cuFlushGPUDirectRDMAWrites",
            s->cu->ops.flush_gpudirect_rdma_writes(SRD_CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX,
                                                   SRD_CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER),
            err, errlen);
  return r;
}

int srd_cuda_stream_sync(struct srd_cuda_stream *s, char *err, size_t errlen) {
  int r;
  ON_STREAM(r, s, "cuStreamSynchronize", s->cu->ops.stream_synchronize(s->stream), err, errlen);
  return r;
}

int srd_cuda_stream_mark(struct srd_cuda_stream *s, srd_cuevent *event, char *err, size_t errlen) {
  srd_cucontext saved;
  *event = NULL;
  int r = bind(s, &saved, err, errlen);
  srd_curesult rc;
  if (!r && (rc = s->cu->ops.event_create(event, SRD_CU_EVENT_DISABLE_TIMING))) {
    r = fail(s->cu, rc, "cuEventCreate", err, errlen);
    *event = NULL;
  }
  if (!r && (rc = s->cu->ops.event_record(*event, s->stream))) {
    r = fail(s->cu, rc, "cuEventRecord", err, errlen);
    s->cu->ops.event_destroy(*event);
    *event = NULL;
  }
  unbind(s, saved);
  return r;
}

int srd_cuda_stream_done(struct srd_cuda_stream *s, srd_cuevent event, char *err, size_t errlen) {
  srd_cucontext saved;
  /* Without its context the event can be neither asked nor destroyed. */
  if (bind(s, &saved, err, errlen)) {
    unbind(s, saved);
    return -1;
  }
  srd_curesult rc = s->cu->ops.event_query(event);
  if (rc != SRD_CUDA_ERROR_NOT_READY) s->cu->ops.event_destroy(event);
  unbind(s, saved);
  if (rc == SRD_CUDA_ERROR_NOT_READY) return 0;
  return rc ? fail(s->cu, rc, "cuEventQuery", err, errlen) : 1;
}

void srd_cuda_stream_forget(struct srd_cuda_stream *s, srd_cuevent event) {
  srd_cucontext saved;
  char err[8];
  if (!bind(s, &saved, err, sizeof(err))) s->cu->ops.event_destroy(event);
  unbind(s, saved);
}
