/* The CUDA driver, loaded at run time with dlopen("libcuda.so.1") and never
 * linked: the plugin must keep loading on hosts without a GPU. The few driver
 * types and constants we use are declared here (src/util/cuda.c checks them
 * against cuda.h when configure found it). Every call goes through one ops
 * table, so that tests can install a fake driver. */
#ifndef SRD_CUDA_H
#define SRD_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef int srd_curesult;          /* CUresult: 0 is CUDA_SUCCESS */
typedef int srd_cudevice;          /* CUdevice */
typedef unsigned long long srd_cudeviceptr; /* CUdeviceptr on 64-bit hosts */
typedef void *srd_cucontext;       /* CUcontext */
typedef void *srd_custream;        /* CUstream */
typedef void *srd_cuevent;         /* CUevent */

#define SRD_CUDA_SUCCESS 0
#define SRD_CUDA_ERROR_INVALID_VALUE 1
#define SRD_CUDA_ERROR_NOT_INITIALIZED 3
#define SRD_CUDA_ERROR_NO_DEVICE 100
#define SRD_CUDA_ERROR_NOT_READY 600
#define SRD_CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define SRD_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define SRD_CU_MEMORYTYPE_DEVICE 2
#define SRD_CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING 118
#define SRD_CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS 122
#define SRD_CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED 124
#define SRD_CU_STREAM_NON_BLOCKING 0x1
#define SRD_CU_STREAM_WRITE_VALUE_DEFAULT 0
#define SRD_CU_EVENT_DISABLE_TIMING 0x2
#define SRD_CU_GPU_DIRECT_RDMA_WRITES_ORDERING_OWNER 100
#define SRD_CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD 1
#define SRD_CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX 0
#define SRD_CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER 100

/* cuFlushGPUDirectRDMAWrites appeared in 11.3: older drivers are refused. */
#define SRD_CUDA_MIN_DRIVER 11030
/* cuMemGetHandleForAddressRange (dma-buf export) appeared in 11.7. */
#define SRD_CUDA_DMABUF_DRIVER 11070

/* The driver entry points we call (cuInit, cuDriverGetVersion, ... in the
 * CUDA driver API; snake_case here, as cuda.h turns the API names into
 * macros). The optional ones are NULL when the driver lacks them. */
struct srd_cuda_ops {
  srd_curesult (*init)(unsigned flags);
  srd_curesult (*driver_get_version)(int *version);
  srd_curesult (*get_error_string)(srd_curesult err, const char **text);
  srd_curesult (*device_get_count)(int *count);
  srd_curesult (*device_get)(srd_cudevice *dev, int ordinal);
  srd_curesult (*device_get_attribute)(int *value, int attribute, srd_cudevice dev);
  srd_curesult (*pointer_get_attribute)(void *data, int attribute, srd_cudeviceptr ptr);
  srd_curesult (*primary_ctx_retain)(srd_cucontext *ctx, srd_cudevice dev);
  srd_curesult (*primary_ctx_release)(srd_cudevice dev);
  srd_curesult (*ctx_set_current)(srd_cucontext ctx);
  srd_curesult (*mem_alloc)(srd_cudeviceptr *ptr, size_t size);
  srd_curesult (*mem_free)(srd_cudeviceptr ptr);
  srd_curesult (*memcpy_htod)(srd_cudeviceptr dst, const void *src, size_t size);
  srd_curesult (*memcpy_dtoh)(void *dst, srd_cudeviceptr src, size_t size);
  /* optional */
  srd_curesult (*mem_get_handle_for_address_range)(void *handle, srd_cudeviceptr ptr, size_t size, int type,
                                                unsigned long long flags);
  srd_curesult (*flush_gpudirect_rdma_writes)(int target, int scope);
  /* optional, needed for signals into GPU memory (srd_cuda_stream) */
  srd_curesult (*ctx_get_current)(srd_cucontext *ctx);
  srd_curesult (*stream_create)(srd_custream *stream, unsigned flags);
  srd_curesult (*stream_destroy)(srd_custream stream);
  srd_curesult (*stream_synchronize)(srd_custream stream);
  srd_curesult (*stream_write_value64)(srd_custream stream, srd_cudeviceptr addr, uint64_t value, unsigned flags);
  srd_curesult (*memcpy_dtoh_async)(void *dst, srd_cudeviceptr src, size_t size, srd_custream stream);
  srd_curesult (*memcpy_async)(srd_cudeviceptr dst, srd_cudeviceptr src, size_t size, srd_custream stream);
  srd_curesult (*event_create)(srd_cuevent *event, unsigned flags);
  srd_curesult (*event_record)(srd_cuevent event, srd_custream stream);
  srd_curesult (*event_query)(srd_cuevent event);
  srd_curesult (*event_destroy)(srd_cuevent event);
};

/* The loaded driver, or why there is none. */
struct srd_cuda {
  bool usable;             /* loaded, initialised, at least one device */
  char reason[200];        /* why not usable; when usable, what was loaded */
  int driver_version;      /* 12040 for 12.4; 0 unknown */
  int device_count;
  struct srd_cuda_ops ops; /* valid when usable */
};

/* Load and initialise once (thread-safe; later calls return the same
 * answer). Never NULL. Reasons name what is missing: no libcuda.so.1,
 * cuInit failed (with the driver's error), a symbol missing, driver older
 * than SRD_CUDA_MIN_DRIVER, or no device. */
const struct srd_cuda *srd_cuda_get(void);

/* Tests: answer with this fake driver from now on, as if libcuda.so.1 had
 * these entry points (loading and initialising run again on the next
 * srd_cuda_get). NULL goes back to the real library. */
void srd_cuda_set_test_ops(const struct srd_cuda_ops *fake);

/* The driver's text for err, "CUDA error N" when it has none; by value
 * (use .text within the expression): no thread-local buffer in a dlopened
 * library. */
struct srd_cuda_errtext {
  char text[128];
};
struct srd_cuda_errtext srd_cuda_error_text(const struct srd_cuda *cu, srd_curesult err);

/* The CUDA device ordinal that owns ptr. Returns 0, or -1 with why (host
 * memory, or the driver's error) in err. */
int srd_cuda_pointer_device(const struct srd_cuda *cu, const void *ptr, int *ordinal, char *err, size_t errlen);

/* 1: device ordinal exports dma-bufs (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED
 * and cuMemGetHandleForAddressRange present), 0: it does not, -1: the driver
 * could not say. */
int srd_cuda_dmabuf_supported(const struct srd_cuda *cu, int ordinal);

/* 1: the driver promises that GPUDirect RDMA writes are seen in order by the
 * owning device (no flush needed), 0: it does not, -1: cannot tell. */
int srd_cuda_rdma_writes_ordered(const struct srd_cuda *cu, int ordinal);

/* A dma-buf fd for [ptr, ptr + len): the driver wants page-aligned ranges,
 * so the fd covers the enclosing pages and *offset is where ptr lies in it.
 * The caller closes *fd. Returns 0, or -1 with why in err. */
int srd_cuda_dmabuf_fd(const struct srd_cuda *cu, const void *ptr, size_t len, int *fd, uint64_t *offset, char *err,
                       size_t errlen);

/* Make GPUDirect RDMA writes already received visible to the device of the
 * calling thread's current context. Returns 0, or -1 with why in err. */
int srd_cuda_flush_rdma_writes(const struct srd_cuda *cu, char *err, size_t errlen);

/* A plugin-owned stream (src/util/cuda_stream.c): CU_STREAM_NON_BLOCKING on
 * the primary context of one device, so that its work never waits for, nor
 * holds up, the application's streams, the legacy default stream included.
 * Work on it runs in the order it was queued. Every call makes the device's
 * primary context current for its driver calls and restores the caller's
 * (NCCL's proxy threads have none). Not thread-safe: the caller serialises
 * calls on one stream. Functions return 0, or -1 with why in err. */
struct srd_cuda_stream;

/* Can ordinal take the stream writes? Returns 0, or -1 with why (driver
 * lacks an entry point, or CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS
 * is 0) in err. */
int srd_cuda_stream_usable(const struct srd_cuda *cu, int ordinal, char *err, size_t errlen);
int srd_cuda_stream_open(const struct srd_cuda *cu, int ordinal, struct srd_cuda_stream **out, char *err,
                         size_t errlen);
/* Waits for the stream's work, then frees it. NULL is a no-op. */
void srd_cuda_stream_close(struct srd_cuda_stream *s);
int srd_cuda_stream_ordinal(const struct srd_cuda_stream *s);
/* Queue an 8-byte write of value to word (device memory), after every write
 * queued before it on this stream has landed (flags default). */
int srd_cuda_stream_write64(struct srd_cuda_stream *s, void *word, uint64_t value, char *err, size_t errlen);
/* Read word after the stream's earlier work: queues the copy, waits for this
 * stream only. */
int srd_cuda_stream_read64(struct srd_cuda_stream *s, const void *word, uint64_t *value, char *err, size_t errlen);
/* Queue a copy of size bytes (host or device on either side: unified
 * addressing). */
int srd_cuda_stream_copy(struct srd_cuda_stream *s, void *dst, const void *src, size_t size, char *err,
                         size_t errlen);
/* Make the GPUDirect RDMA writes a NIC completed so far visible to the
 * stream's GPU (cuFlushGPUDirectRDMAWrites to the owner, its context
 * current); nothing is queued. */
int srd_cuda_stream_flush_remote(struct srd_cuda_stream *s, char *err, size_t errlen);
/* Wait until everything queued so far has run. */
int srd_cuda_stream_sync(struct srd_cuda_stream *s, char *err, size_t errlen);
/* An event recorded after everything queued so far; poll it with
 * srd_cuda_stream_done: 1 done (the event is freed), 0 not yet, -1 error
 * (why in err; the event is freed, or left when the stream's context cannot
 * be made current, since CUDA cannot free it then either).
 * srd_cuda_stream_forget frees one not polled to the end. */
int srd_cuda_stream_mark(struct srd_cuda_stream *s, srd_cuevent *event, char *err, size_t errlen);
int srd_cuda_stream_done(struct srd_cuda_stream *s, srd_cuevent event, char *err, size_t errlen);
void srd_cuda_stream_forget(struct srd_cuda_stream *s, srd_cuevent event);

#endif
