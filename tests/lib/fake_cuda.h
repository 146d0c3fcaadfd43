// A fake CUDA driver for the loader and decision tests: every entry point
// answers from one global state that each test sets up. Each GPU has answers
// of its own (attributes, device memory), and device handles are not
// ordinals, so that an answer taken from the wrong GPU shows.
#ifndef SRD_TESTS_FAKE_CUDA_H
#define SRD_TESTS_FAKE_CUDA_H

#include <cstdint>
#include <cstring>
#include <vector>

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
  // Streams (src/util/cuda_stream.c): every queued operation, in order, and
  // the context current when it was made. The fake runs each at once.
  int mem_ops_attr[8] = {1, 1, 1, 1, 1, 1, 1, 1}; // CAN_USE_64_BIT_STREAM_MEM_OPS
  struct Call {
    enum Kind { kCopy, kRead, kWrite, kSync, kMark, kFlush } kind;
    void *stream;
    uintptr_t addr; // written or read word, copy destination
    uint64_t value; // value written or read; copy size
    srd_cucontext ctx;
  };
  std::vector<Call> calls;
  srd_cucontext current = nullptr;
  int retained[8] = {};
  int streams_open = 0, events_open = 0;
  unsigned stream_flags = ~0u;
  int not_ready = 0; // event queries answered NOT_READY before the events are done
  srd_curesult write_result = SRD_CUDA_SUCCESS; // what cuStreamWriteValue64 answers
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
  else if (attr == SRD_CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS) *v = state.mem_ops_attr[dev];
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
inline void record(int kind, void *stream, uintptr_t addr, uint64_t value);
inline srd_curesult flush(int target, int scope) {
  state.flush_target = target;
  state.flush_scope = scope;
  state.flushes++;
  record(State::Call::kFlush, nullptr, 0, 0);
  return SRD_CUDA_SUCCESS;
}

// Primary contexts: one per device, never the device handle.
inline srd_cucontext primary(int dev) { return reinterpret_cast<srd_cucontext>(static_cast<uintptr_t>(0xc0 + dev)); }
inline srd_curesult ctx_retain(srd_cucontext *ctx, srd_cudevice handle) {
  int dev = handle - kHandleBase;
  if (dev < 0 || dev >= state.devices || dev >= 8) return SRD_CUDA_ERROR_INVALID_VALUE;
  state.retained[dev]++;
  *ctx = primary(dev);
  return SRD_CUDA_SUCCESS;
}
inline srd_curesult ctx_release(srd_cudevice handle) {
  int dev = handle - kHandleBase;
  if (dev < 0 || dev >= 8 || state.retained[dev] < 1) return SRD_CUDA_ERROR_INVALID_VALUE;
  state.retained[dev]--;
  return SRD_CUDA_SUCCESS;
}
inline srd_curesult ctx_set(srd_cucontext ctx) {
  state.current = ctx;
  return SRD_CUDA_SUCCESS;
}
inline srd_curesult ctx_get(srd_cucontext *ctx) {
  *ctx = state.current;
  return SRD_CUDA_SUCCESS;
}
inline void record(int kind, void *stream, uintptr_t addr, uint64_t value) {
  state.calls.push_back({static_cast<State::Call::Kind>(kind), stream, addr, value, state.current});
}
inline srd_curesult stream_create(srd_custream *s, unsigned flags) {
  state.stream_flags = flags;
  state.streams_open++;
  *s = reinterpret_cast<srd_custream>(static_cast<uintptr_t>(0x5000 + state.streams_open));
  return SRD_CUDA_SUCCESS;
}
inline srd_curesult stream_destroy(srd_custream) {
  state.streams_open--;
  return SRD_CUDA_SUCCESS;
}
inline srd_curesult stream_sync(srd_custream s) {
  record(State::Call::kSync, s, 0, 0);
  return SRD_CUDA_SUCCESS;
}
inline srd_curesult write_value64(srd_custream s, srd_cudeviceptr addr, uint64_t value, unsigned flags) {
  if (flags != SRD_CU_STREAM_WRITE_VALUE_DEFAULT) return SRD_CUDA_ERROR_INVALID_VALUE; // unordered: refused here
  if (state.write_result) return state.write_result;
  record(State::Call::kWrite, s, addr, value);
  memcpy(reinterpret_cast<void *>(static_cast<uintptr_t>(addr)), &value, 8);
  return SRD_CUDA_SUCCESS;
}
inline srd_curesult dtoh_async(void *dst, srd_cudeviceptr src, size_t size, srd_custream s) {
  memcpy(dst, reinterpret_cast<void *>(static_cast<uintptr_t>(src)), size);
  uint64_t v = 0;
  memcpy(&v, dst, size < 8 ? size : 8);
  record(State::Call::kRead, s, src, v);
  return SRD_CUDA_SUCCESS;
}
inline srd_curesult copy_async(srd_cudeviceptr dst, srd_cudeviceptr src, size_t size, srd_custream s) {
  record(State::Call::kCopy, s, dst, size);
  memmove(reinterpret_cast<void *>(static_cast<uintptr_t>(dst)), reinterpret_cast<void *>(static_cast<uintptr_t>(src)),
          size);
  return SRD_CUDA_SUCCESS;
}
inline srd_curesult event_create(srd_cuevent *e, unsigned) {
  state.events_open++;
  *e = reinterpret_cast<srd_cuevent>(static_cast<uintptr_t>(0xe000 + state.events_open));
  return SRD_CUDA_SUCCESS;
}
inline srd_curesult event_record(srd_cuevent, srd_custream s) {
  record(State::Call::kMark, s, 0, 0);
  return SRD_CUDA_SUCCESS;
}
inline srd_curesult event_query(srd_cuevent) {
  if (state.not_ready > 0) return state.not_ready--, SRD_CUDA_ERROR_NOT_READY;
  return SRD_CUDA_SUCCESS;
}
inline srd_curesult event_destroy(srd_cuevent) {
  state.events_open--;
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
  o.primary_ctx_retain = ctx_retain;
  o.primary_ctx_release = ctx_release;
  o.ctx_set_current = ctx_set;
  o.mem_alloc = unused_alloc;
  o.mem_free = unused_free;
  o.memcpy_htod = unused_htod;
  o.memcpy_dtoh = unused_dtoh;
  o.mem_get_handle_for_address_range = handle;
  o.flush_gpudirect_rdma_writes = flush;
  o.ctx_get_current = ctx_get;
  o.stream_create = stream_create;
  o.stream_destroy = stream_destroy;
  o.stream_synchronize = stream_sync;
  o.stream_write_value64 = write_value64;
  o.memcpy_dtoh_async = dtoh_async;
  o.memcpy_async = copy_async;
  o.event_create = event_create;
  o.event_record = event_record;
  o.event_query = event_query;
  o.event_destroy = event_destroy;
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
