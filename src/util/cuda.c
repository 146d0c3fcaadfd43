#include "srd/cuda.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

#if HAVE_CUDA_H
/* Our declarations must match the driver's. */
#include <cuda.h>
_Static_assert(SRD_CUDA_ERROR_NO_DEVICE == CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE");
_Static_assert(SRD_CUDA_ERROR_INVALID_VALUE == CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE");
_Static_assert(SRD_CUDA_ERROR_NOT_INITIALIZED == CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED");
_Static_assert(SRD_CU_POINTER_ATTRIBUTE_MEMORY_TYPE == CU_POINTER_ATTRIBUTE_MEMORY_TYPE, "memory type");
_Static_assert(SRD_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, "device ordinal");
_Static_assert(SRD_CU_MEMORYTYPE_DEVICE == CU_MEMORYTYPE_DEVICE, "CU_MEMORYTYPE_DEVICE");
_Static_assert(SRD_CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING ==
                   CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING, "writes ordering");
_Static_assert(SRD_CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED == CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, "dma-buf");
_Static_assert(SRD_CU_GPU_DIRECT_RDMA_WRITES_ORDERING_OWNER == CU_GPU_DIRECT_RDMA_WRITES_ORDERING_OWNER, "owner");
_Static_assert(SRD_CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD == CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, "dma-buf fd");
_Static_assert(SRD_CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX ==
                   CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX, "flush target");
_Static_assert(SRD_CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER == CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER, "scope");
_Static_assert(SRD_CUDA_ERROR_NOT_READY == CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY");
_Static_assert(SRD_CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS == CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS,
               "64-bit stream memory operations");
_Static_assert(SRD_CU_STREAM_NON_BLOCKING == CU_STREAM_NON_BLOCKING, "CU_STREAM_NON_BLOCKING");
_Static_assert(SRD_CU_STREAM_WRITE_VALUE_DEFAULT == CU_STREAM_WRITE_VALUE_DEFAULT, "CU_STREAM_WRITE_VALUE_DEFAULT");
_Static_assert(SRD_CU_EVENT_DISABLE_TIMING == CU_EVENT_DISABLE_TIMING, "CU_EVENT_DISABLE_TIMING");
_Static_assert(sizeof(srd_cudeviceptr) == sizeof(CUdeviceptr), "CUdeviceptr");
_Static_assert(sizeof(srd_cudevice) == sizeof(CUdevice), "CUdevice");
#endif

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool loaded;
static struct srd_cuda state;
static void *lib;
static const struct srd_cuda_ops *test_ops;

/* Symbol names as libcuda exports them: the versioned names are the ones
 * cuda.h maps the plain names to. */
static const struct {
  size_t offset;
  const char *name;
  bool optional;
} symbols[] = {
#define SYM(field, name, optional) {offsetof(struct srd_cuda_ops, field), name, optional}
    SYM(init, "cuInit", false),
    SYM(driver_get_version, "cuDriverGetVersion", false),
    SYM(get_error_string, "cuGetErrorString", false),
    SYM(device_get_count, "cuDeviceGetCount", false),
    SYM(device_get, "cuDeviceGet", false),
    SYM(device_get_attribute, "cuDeviceGetAttribute", false),
    SYM(pointer_get_attribute, "cuPointerGetAttribute", false),
    SYM(primary_ctx_retain, "cuDevicePrimaryCtxRetain", false),
    SYM(primary_ctx_release, "cuDevicePrimaryCtxRelease_v2", false),
    SYM(ctx_set_current, "cuCtxSetCurrent", false),
    SYM(mem_alloc, "cuMemAlloc_v2", false),
    SYM(mem_free, "cuMemFree_v2", false),
    SYM(memcpy_htod, "cuMemcpyHtoD_v2", false),
    SYM(memcpy_dtoh, "cuMemcpyDtoH_v2", false),
    SYM(mem_get_handle_for_address_range, "cuMemGetHandleForAddressRange", true),
    SYM(flush_gpudirect_rdma_writes, "cuFlushGPUDirectRDMAWrites", true),
    SYM(ctx_get_current, "cuCtxGetCurrent", true),
    SYM(stream_create, "cuStreamCreate", true),
    SYM(stream_destroy, "cuStreamDestroy_v2", true),
    SYM(stream_synchronize, "cuStreamSynchronize", true),
    SYM(stream_write_value64, "cuStreamWriteValue64_v2", true),
    SYM(memcpy_dtoh_async, "cuMemcpyDtoHAsync_v2", true),
    SYM(memcpy_async, "cuMemcpyAsync", true),
    SYM(event_create, "cuEventCreate", true),
    SYM(event_record, "cuEventRecord", true),
    SYM(event_query, "cuEventQuery", true),
    SYM(event_destroy, "cuEventDestroy_v2", true),
#undef SYM
};

static void **slot(struct srd_cuda_ops *ops, size_t offset) { return (void **)((char *)ops + offset); }

/* Resolve every entry point from the library (or copy the fake's). 0, or -1
 * with the reason set. */
static int resolve(struct srd_cuda *cu) {
  if (test_ops) {
    cu->ops = *test_ops;
  } else {
    lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char *e = dlerror();
      snprintf(cu->reason, sizeof(cu->reason), "no CUDA driver: cannot load libcuda.so.1 (%s)", e ? e : "not found");
      return -1;
    }
    for (size_t i = 0; i < sizeof(symbols) / sizeof(symbols[0]); i++)
      *slot(&cu->ops, symbols[i].offset) = dlsym(lib, symbols[i].name);
  }
  for (size_t i = 0; i < sizeof(symbols) / sizeof(symbols[0]); i++)
    if (!symbols[i].optional && !*slot(&cu->ops, symbols[i].offset)) {
      snprintf(cu->reason, sizeof(cu->reason), "the CUDA driver lacks %s", symbols[i].name);
      return -1;
    }
  return 0;
}

static void load_locked(void) {
  struct srd_cuda *cu = &state;
  memset(cu, 0, sizeof(*cu));
  if (resolve(cu)) return;
  srd_curesult rc = cu->ops.init(0);
  if (rc != SRD_CUDA_SUCCESS) {
    snprintf(cu->reason, sizeof(cu->reason), "cuInit failed: %s", srd_cuda_error_text(cu, rc).text);
    return;
  }
  if ((rc = cu->ops.driver_get_version(&cu->driver_version)) != SRD_CUDA_SUCCESS) {
    snprintf(cu->reason, sizeof(cu->reason), "cuDriverGetVersion failed: %s", srd_cuda_error_text(cu, rc).text);
    return;
  }
  if (cu->driver_version < SRD_CUDA_MIN_DRIVER) {
    snprintf(cu->reason, sizeof(cu->reason), "CUDA driver %d.%d is older than %d.%d (no cuFlushGPUDirectRDMAWrites)",
             cu->driver_version / 1000, cu->driver_version % 1000 / 10, SRD_CUDA_MIN_DRIVER / 1000,
             SRD_CUDA_MIN_DRIVER % 1000 / 10);
    return;
  }
  if ((rc = cu->ops.device_get_count(&cu->device_count)) != SRD_CUDA_SUCCESS || cu->device_count < 1) {
    snprintf(cu->reason, sizeof(cu->reason), "no CUDA device (%s)",
             rc ? srd_cuda_error_text(cu, rc).text : "the driver counts none");
    return;
  }
  cu->usable = true;
  snprintf(cu->reason, sizeof(cu->reason), "CUDA driver %d.%d, %d device(s)", cu->driver_version / 1000,
           cu->driver_version % 1000 / 10, cu->device_count);
}

const struct srd_cuda *srd_cuda_get(void) {
  pthread_mutex_lock(&lock);
  if (!loaded) {
    load_locked();
    loaded = true;
  }
  pthread_mutex_unlock(&lock);
  return &state;
}

void srd_cuda_set_test_ops(const struct srd_cuda_ops *fake) {
  pthread_mutex_lock(&lock);
  test_ops = fake;
  loaded = false;
  pthread_mutex_unlock(&lock);
}

struct srd_cuda_errtext srd_cuda_error_text(const struct srd_cuda *cu, srd_curesult err) {
  struct srd_cuda_errtext e;
  const char *text = NULL;
  if (cu->ops.get_error_string && cu->ops.get_error_string(err, &text) == SRD_CUDA_SUCCESS && text)
    snprintf(e.text, sizeof(e.text), "%s", text);
  else
    snprintf(e.text, sizeof(e.text), "CUDA error %d", err);
  return e;
}

int srd_cuda_pointer_device(const struct srd_cuda *cu, const void *ptr, int *ordinal, char *err, size_t errlen) {
  if (!cu->usable) {
    snprintf(err, errlen, "%s", cu->reason);
    return -1;
  }
  srd_cudeviceptr p = (srd_cudeviceptr)(uintptr_t)ptr;
  unsigned type = 0;
  srd_curesult rc = cu->ops.pointer_get_attribute(&type, SRD_CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p);
  if (rc != SRD_CUDA_SUCCESS) {
    snprintf(err, errlen, "%p is not CUDA memory (%s)", ptr, srd_cuda_error_text(cu, rc).text);
    return -1;
  }
  if (type != SRD_CU_MEMORYTYPE_DEVICE) {
    snprintf(err, errlen, "%p is CUDA memory of type %u, not device memory", ptr, type);
    return -1;
  }
  int dev = -1;
  rc = cu->ops.pointer_get_attribute(&dev, SRD_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p);
  if (rc != SRD_CUDA_SUCCESS || dev < 0) {
    snprintf(err, errlen, "the driver does not say which device owns %p (%s)", ptr,
             rc ? srd_cuda_error_text(cu, rc).text : "negative ordinal");
    return -1;
  }
  *ordinal = dev;
  return 0;
}

static int device_attribute(const struct srd_cuda *cu, int ordinal, int attribute, int *value) {
  srd_cudevice dev;
  if (!cu->usable || cu->ops.device_get(&dev, ordinal) != SRD_CUDA_SUCCESS) return -1;
  return cu->ops.device_get_attribute(value, attribute, dev) == SRD_CUDA_SUCCESS ? 0 : -1;
}

int srd_cuda_dmabuf_supported(const struct srd_cuda *cu, int ordinal) {
  if (!cu->usable) return -1;
  if (!cu->ops.mem_get_handle_for_address_range || cu->driver_version < SRD_CUDA_DMABUF_DRIVER) return 0;
  int v = 0;
  if (device_attribute(cu, ordinal, SRD_CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, &v)) return -1;
  return v != 0;
}

int srd_cuda_rdma_writes_ordered(const struct srd_cuda *cu, int ordinal) {
  int v = 0;
  if (device_attribute(cu, ordinal, SRD_CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING, &v)) return -1;
  return v >= SRD_CU_GPU_DIRECT_RDMA_WRITES_ORDERING_OWNER;
}

int srd_cuda_dmabuf_fd(const struct srd_cuda *cu, const void *ptr, size_t len, int *fd, uint64_t *offset, char *err,
                       size_t errlen) {
  if (!cu->usable || !cu->ops.mem_get_handle_for_address_range) {
    snprintf(err, errlen, "%s", cu->usable ? "the CUDA driver cannot export dma-bufs" : cu->reason);
    return -1;
  }
  long page = sysconf(_SC_PAGESIZE);
  uintptr_t mask = (uintptr_t)(page > 0 ? page : 4096) - 1;
  uintptr_t start = (uintptr_t)ptr & ~mask;
  if (len > UINTPTR_MAX - (uintptr_t)ptr - mask) {
    snprintf(err, errlen, "range of %zu bytes at %p wraps around", len, ptr);
    return -1;
  }
  uintptr_t end = ((uintptr_t)ptr + len + mask) & ~mask;
  int handle = -1;
  srd_curesult rc = cu->ops.mem_get_handle_for_address_range(&handle, (srd_cudeviceptr)start, end - start,
                                                          SRD_CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
  if (rc != SRD_CUDA_SUCCESS || handle < 0) {
    snprintf(err, errlen, "cuMemGetHandleForAddressRange(%p, %zu) failed: %s", (void *)start, (size_t)(end - start),
             rc ? srd_cuda_error_text(cu, rc).text : "no descriptor");
    return -1;
  }
  *fd = handle;
  *offset = (uint64_t)((uintptr_t)ptr - start);
  return 0;
}

int srd_cuda_flush_rdma_writes(const struct srd_cuda *cu, char *err, size_t errlen) {
  if (!cu->usable) {
    snprintf(err, errlen, "%s", cu->reason);
    return -1;
  }
  if (!cu->ops.flush_gpudirect_rdma_writes) {
    snprintf(err, errlen, "the CUDA driver lacks cuFlushGPUDirectRDMAWrites");
    return -1;
  }
  srd_curesult rc = cu->ops.flush_gpudirect_rdma_writes(SRD_CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX,
                                                       SRD_CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER);
  if (rc != SRD_CUDA_SUCCESS) {
    snprintf(err, errlen, "cuFlushGPUDirectRDMAWrites failed: %s", srd_cuda_error_text(cu, rc).text);
    return -1;
  }
  return 0;
}
