// A fake CUDA driver for the loader and decision tests: every entry point
// answers from one global state that each test sets up. Each GPU has answers
// of its own (attributes, device memory), and device handles are not
// ordinals, so that an answer taken from the wrong GPU shows.
#ifndef SRD_TESTS_FAKE_CUDA_H
#define SRD_TESTS_FAKE_CUDA_H

#include <cstdint>
#include <cstring>

extern "C" {
#include "srd/cuda.h"
}

namespace fake {

struct State {
  srd_curesult init_result = SRD_CUDA_SUCCESS;
  int driver_version = 12040;
  int devices = 2;
  int dmabuf_attr[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  int ordering_attr[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  uintptr_t mem_base[8] = {}, mem_len[8] = {}; // [base, base + len) is device memory of GPU k
  // what the last cuMemGetHandleForAddressRange and flush were asked
  srd_cudeviceptr handle_ptr = 0;
  size_t handle_size = 0;
  int handle_type = -1;
  int flush_target = -1, flush_scope = -1, flushes = 0;
};

inline State state;

inline srd_curesult init(unsigned) { return state.init_result; }
inline srd_curesult driver_version(int *v) {
  *v = state.driver_version;
  return SRD_CUDA_SUCCESS;
}
inline srd_curesult error_string(srd_curesult err, const char **text) {
  *text = err == SRD_CUDA_ERROR_NO_DEVICE ? "fake: no CUDA-capable device is detected" : "fake: some error";
  return SRD_CUDA_SUCCESS;
}
inline srd_curesult device_count(int *n) {
  *n = state.devices;
  return SRD_CUDA_SUCCESS;
}
// CUdevice handles are opaque: these are not the ordinals they stand for.
constexpr srd_cudevice kHandleBase = 0x100;
inline srd_curesult device_get(srd_cudevice *dev, int ordinal) {
  if (ordinal < 0 || ordinal >= state.devices) return SRD_CUDA_ERROR_INVALID_VALUE;
  *dev = kHandleBase + ordinal;
  return SRD_CUDA_SUCCESS;
}
inline srd_curesult device_attribute(int *v, int attr, srd_cudevice handle) {
  int dev = handle - kHandleBase;
  if (dev < 0 || dev >= state.devices || dev >= 8) return SRD_CUDA_ERROR_INVALID_VALUE;
  if (attr == SRD_CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED) *v = state.dmabuf_attr[dev];
  else if (attr == SRD_CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING) *v = state.ordering_attr[dev];
  else return SRD_CUDA_ERROR_INVALID_VALUE;
  return SRD_CUDA_SUCCESS;
}
inline srd_curesult pointer_attribute(void *data, int attr, srd_cudeviceptr p) {
  int owner = -1;
  for (int k = 0; k < state.devices && k < 8; k++)
    if (p >= state.mem_base[k] && p - state.mem_base[k] < state.mem_len[k]) owner = k;
  if (owner < 0) return SRD_CUDA_ERROR_INVALID_VALUE;
  if (attr == SRD_CU_POINTER_ATTRIBUTE_MEMORY_TYPE) *(unsigned *)data = SRD_CU_MEMORYTYPE_DEVICE;
  else if (attr == SRD_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL) *(int *)data = owner;
  else return SRD_CUDA_ERROR_INVALID_VALUE;
  return SRD_CUDA_SUCCESS;
}
inline srd_curesult unused_ctx(srd_cucontext *, srd_cudevice) { return SRD_CUDA_ERROR_INVALID_VALUE; }
inline srd_curesult unused_dev(srd_cudevice) { return SRD_CUDA_ERROR_INVALID_VALUE; }
inline srd_curesult unused_set(srd_cucontext) { return SRD_CUDA_ERROR_INVALID_VALUE; }
inline srd_curesult unused_alloc(srd_cudeviceptr *, size_t) { return SRD_CUDA_ERROR_INVALID_VALUE; }
inline srd_curesult unused_free(srd_cudeviceptr) { return SRD_CUDA_ERROR_INVALID_VALUE; }
inline srd_curesult unused_htod(srd_cudeviceptr, const void *, size_t) { return SRD_CUDA_ERROR_INVALID_VALUE; }
inline srd_curesult unused_dtoh(void *, srd_cudeviceptr, size_t) { return SRD_CUDA_ERROR_INVALID_VALUE; }
inline srd_curesult handle(void *out, srd_cudeviceptr p, size_t size, int type, unsigned long long) {
  state.handle_ptr = p;
  state.handle_size = size;
  state.handle_type = type;
  *(int *)out = 42;
  return SRD_CUDA_SUCCESS;
}
inline srd_curesult flush(int target, int scope) {
  state.flush_target = target;
  state.flush_scope = scope;
  state.flushes++;
  return SRD_CUDA_SUCCESS;
}

inline srd_cuda_ops ops() {
  srd_cuda_ops o;
  memset(&o, 0, sizeof(o));
  o.init = init;
  o.driver_get_version = driver_version;
  o.get_error_string = error_string;
  o.device_get_count = device_count;
  o.device_get = device_get;
  o.device_get_attribute = device_attribute;
  o.pointer_get_attribute = pointer_attribute;
  o.primary_ctx_retain = unused_ctx;
  o.primary_ctx_release = unused_dev;
  o.ctx_set_current = unused_set;
  o.mem_alloc = unused_alloc;
  o.mem_free = unused_free;
  o.memcpy_htod = unused_htod;
  o.memcpy_dtoh = unused_dtoh;
  o.mem_get_handle_for_address_range = handle;
  o.flush_gpudirect_rdma_writes = flush;
  return o;
}

// Installs a fake driver (ops, then state) for one test; the real loader again afterwards.
class Driver {
 public:
  explicit Driver(const srd_cuda_ops &o) : ops_(o) {
    state = State();
    srd_cuda_set_test_ops(&ops_);
  }
  Driver() : Driver(ops()) {}
  ~Driver() { srd_cuda_set_test_ops(nullptr); }
  Driver(const Driver &) = delete;
  Driver &operator=(const Driver &) = delete;

 private:
  srd_cuda_ops ops_;
};

} // namespace fake

#endif
