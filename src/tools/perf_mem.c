#include "perf_mem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "perf_log.h"
#include "srd/cuda.h"

#define PERF_CUDA_DEVICE 0

struct perf_mem {
  const struct srd_cuda *cu; /* NULL: host memory */
  srd_cudevice dev;
  int retained;              /* the primary context is ours to release */
};

static int cuda_check(struct perf_mem *m, srd_curesult rc, const char *call) {
  if (rc == SRD_CUDA_SUCCESS) return 0;
  perf_error("--cuda: %s failed: %s", call, srd_cuda_error_text(m->cu, rc).text);
  return -1;
}

struct perf_mem *perf_mem_open(int cuda) {
  struct perf_mem *m = calloc(1, sizeof(*m));
  if (!m || !cuda) return m;
  m->cu = srd_cuda_get();
  if (!m->cu->usable) {
    perf_error("--cuda: %s", m->cu->reason);
    free(m);
    return NULL;
  }
  srd_cucontext ctx;
  if (cuda_check(m, m->cu->ops.device_get(&m->dev, PERF_CUDA_DEVICE), "cuDeviceGet") ||
      cuda_check(m, m->cu->ops.primary_ctx_retain(&ctx, m->dev), "cuDevicePrimaryCtxRetain")) {
    free(m);
    return NULL;
  }
  m->retained = 1;
  if (cuda_check(m, m->cu->ops.ctx_set_current(ctx), "cuCtxSetCurrent")) {
    perf_mem_close(m);
    return NULL;
  }
  return m;
}

void perf_mem_close(struct perf_mem *m) {
  if (!m) return;
  if (m->retained) m->cu->ops.primary_ctx_release(m->dev);
  free(m);
}

int perf_mem_is_cuda(const struct perf_mem *m) { return m->cu != NULL; }

void *perf_mem_alloc(struct perf_mem *m, size_t size) {
  if (!m->cu) {
    void *p = NULL;
    if (posix_memalign(&p, 4096, size)) return NULL;
    memset(p, 0, size);
    return p;
  }
  /* cuMemAlloc returns at least 256-byte aligned memory; zeroed through a
   * host copy so that no kernel (and no runtime API) is needed. */
  srd_cudeviceptr d = 0;
  if (cuda_check(m, m->cu->ops.mem_alloc(&d, size), "cuMemAlloc")) return NULL;
  void *zero = calloc(1, size);
  int rc = zero ? cuda_check(m, m->cu->ops.memcpy_htod(d, zero, size), "cuMemcpyHtoD") : -1;
  free(zero);
  if (rc) {
    m->cu->ops.mem_free(d);
    return NULL;
  }
  return (void *)(uintptr_t)d;
}

void perf_mem_free(struct perf_mem *m, void *p) {
  if (!p) return;
  if (m->cu) m->cu->ops.mem_free((srd_cudeviceptr)(uintptr_t)p);
  else free(p);
}

int perf_mem_put(struct perf_mem *m, void *dst, const void *src, size_t size) {
  if (!m->cu) {
    memcpy(dst, src, size);
    return 0;
  }
  return cuda_check(m, m->cu->ops.memcpy_htod((srd_cudeviceptr)(uintptr_t)dst, src, size), "cuMemcpyHtoD");
}

int perf_mem_get(struct perf_mem *m, void *dst, const void *src, size_t size) {
  if (!m->cu) {
    memcpy(dst, src, size);
    return 0;
  }
  return cuda_check(m, m->cu->ops.memcpy_dtoh(dst, (srd_cudeviceptr)(uintptr_t)src, size), "cuMemcpyDtoH");
}
