/* Which CUDA driver calls can a plugin's progress thread make while the
 * application cannot launch? A kernel spins on a host-mapped flag (as a GIN
 * kernel waits for a signal) and a launcher thread queues no-op kernels
 * behind it on the same non-blocking stream until cuLaunchKernel blocks (the
 * launch queue is full); or, as the control, queues 10 and waits. Another
 * thread, whose stream, memory and event were made before, then makes one
 * call; a call that has not returned within 5 s is reported BLOCKED, and the
 * flag is set to release everything. DESIGN.md ("One-sided RMA") cites it.
 *
 *   cc -O2 -o /tmp/launch_queue tests/device/launch_queue.c -I$CUDA/include -L$CUDA/lib64/stubs -lcuda -lpthread
 *   /tmp/launch_queue          # on the GPU machine, no MPS
 */
#define _GNU_SOURCE /* usleep, clock_gettime */
#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

/* spin(flag): wait until *flag != 0; nop(): nothing. Plain PTX, JIT-compiled
 * for the GPU, so no CUDA compiler is needed. */
static const char ptx[] = ".version 7.0\n.target sm_50\n.address_size 64\n"
                          ".visible .entry spin(.param .u64 flag) {\n"
                          "  .reg .u64 %rd<2>; .reg .u32 %r<2>; .reg .pred %p<2>;\n"
                          "  ld.param.u64 %rd1, [flag];\n"
                          "LOOP:\n  ld.volatile.global.u32 %r1, [%rd1];\n  setp.eq.u32 %p1, %r1, 0;\n"
                          "  @%p1 bra LOOP;\n  ret;\n}\n"
                          ".visible .entry nop() { ret; }\n";

enum { CALLS = 6, FULL = 20000, CONTROL = 10 };
static const char *names[CALLS] = {"cuFlushGPUDirectRDMAWrites(TO_OWNER)", "cuStreamWriteValue64 (non-blocking stream)",
                                   "cuMemcpyHtoDAsync 8 B (non-blocking stream)",
                                   "cuMemcpyHtoD 8 B (synchronous, as shm's copies)", "cuCtxPushCurrent + PopCurrent",
                                   "cuEventRecord + cuEventQuery"};

static CUcontext ctx;
static CUfunction spin_fn, nop_fn;
static CUdeviceptr dflag;
static volatile unsigned *hflag;
static atomic_int launched, stop, ready, go, returned;
static int nlaunch;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void check(CUresult r, const char *what) {
  if (r == CUDA_SUCCESS) return;
  const char *s = NULL;
  cuGetErrorString(r, &s);
  fprintf(stderr, "%s: %s\n", what, s ? s : "?");
  _exit(1);
}

static void *launcher(void *arg) {
  (void)arg;
  CUstream s;
  check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  check(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  void *args[] = {&dflag};
  check(cuLaunchKernel(spin_fn, 1, 1, 1, 1, 1, 1, 0, s, args, NULL), "launch spin");
  for (int i = 0; i < nlaunch && !atomic_load(&stop); i++) {
    check(cuLaunchKernel(nop_fn, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL), "launch nop");
    atomic_store(&launched, i + 1);
  }
  check(cuStreamSynchronize(s), "cuStreamSynchronize");
  return NULL;
}

static void *caller(void *arg) {
  int which = (int)(long)arg;
  CUstream s;
  CUdeviceptr word, dbuf;
  void *host;
  CUevent e;
  CUcontext c;
  check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  check(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  check(cuMemAlloc(&word, 8), "cuMemAlloc");
  check(cuMemAlloc(&dbuf, 8), "cuMemAlloc");
  check(cuMemAllocHost(&host, 4096), "cuMemAllocHost");
  check(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  atomic_store(&ready, 1);
  while (!atomic_load(&go)) usleep(1000);
  double t0 = now_s();
  CUresult r = CUDA_SUCCESS;
  switch (which) {
  case 0:
    r = cuFlushGPUDirectRDMAWrites(CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX,
                                   CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER);
    break;
  case 1: r = cuStreamWriteValue64(s, word, 1, CU_STREAM_WRITE_VALUE_DEFAULT); break;
  case 2: r = cuMemcpyHtoDAsync(dbuf, host, 8, s); break;
  case 3: r = cuMemcpyHtoD(dbuf, host, 8); break;
  case 4:
    r = cuCtxPushCurrent(ctx);
    if (r == CUDA_SUCCESS) r = cuCtxPopCurrent(&c);
    break;
  default:
    r = cuEventRecord(e, s);
    if (r == CUDA_SUCCESS) r = cuEventQuery(e);
    if (r == CUDA_ERROR_NOT_READY) r = CUDA_SUCCESS;
  }
  printf("  returned %d after %.3f s\n", (int)r, now_s() - t0);
  fflush(stdout);
  atomic_store(&returned, 1);
  cuStreamSynchronize(s);
  cuEventDestroy(e);
  cuMemFreeHost(host);
  cuMemFree(dbuf);
  cuMemFree(word);
  cuStreamDestroy(s);
  return NULL;
}

/* One call while the launcher has queued n kernels behind the spinning one
 * (or blocked trying). */
static void probe(int which, int n) {
  pthread_t lt, ct;
  *hflag = 0;
  nlaunch = n;
  atomic_store(&launched, 0), atomic_store(&stop, 0), atomic_store(&ready, 0), atomic_store(&go, 0);
  atomic_store(&returned, 0);
  pthread_create(&ct, NULL, caller, (void *)(long)which);
  while (!atomic_load(&ready)) usleep(1000);
  pthread_create(&lt, NULL, launcher, NULL);
  int last = -1;
  for (double t0 = now_s(); now_s() - t0 < 10;) { /* until the launcher stops advancing */
    usleep(100000);
    int l = atomic_load(&launched);
    if (l > 0 && l == last) break;
    last = l;
  }
  printf("%s, %d kernels queued%s:\n", names[which], atomic_load(&launched),
         atomic_load(&launched) < n ? " (the launcher blocks: queue full)" : "");
  atomic_store(&go, 1);
  double t1 = now_s();
  while (!atomic_load(&returned) && now_s() - t1 < 5) usleep(10000);
  if (!atomic_load(&returned)) printf("  BLOCKED for 5 s\n");
  atomic_store(&stop, 1);
  *hflag = 1;
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  pthread_join(lt, NULL);
  pthread_join(ct, NULL);
}

int main(void) {
  CUdevice dev;
  CUmodule mod;
  int order = -1;
  void *h;
  check(cuInit(0), "cuInit");
  check(cuDeviceGet(&dev, 0), "cuDeviceGet");
  check(cuDeviceGetAttribute(&order, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING, dev), "attribute");
  printf("GPU_DIRECT_RDMA_WRITES_ORDERING %d (0 none, 100 owner, 200 all devices)\n", order);
  check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  check(cuModuleLoadData(&mod, ptx), "cuModuleLoadData");
  check(cuModuleGetFunction(&spin_fn, mod, "spin"), "spin");
  check(cuModuleGetFunction(&nop_fn, mod, "nop"), "nop");
  check(cuMemHostAlloc(&h, 64, CU_MEMHOSTALLOC_DEVICEMAP), "cuMemHostAlloc");
  hflag = h;
  check(cuMemHostGetDevicePointer(&dflag, h, 0), "cuMemHostGetDevicePointer");
  printf("== the launch queue full behind a spinning kernel\n");
  for (int i = 0; i < CALLS; i++) probe(i, FULL);
  printf("== control: a spinning kernel, %d kernels behind it\n", CONTROL);
  for (int i = 0; i < CALLS; i++) probe(i, CONTROL);
  return 0;
}
