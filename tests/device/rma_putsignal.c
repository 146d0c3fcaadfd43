/* On the GPU device machine (tests/device/rma.sh runs it): NCCL 2.30's host
 * one-sided API through our ncclRmaPlugin_v14 with GPU windows. Two ranks
 * (RANK, WORLD_SIZE from tests/device's `ranks`), one window each from
 * ncclMemAlloc; every rank puts rounds of each size into its peer's window
 * with ncclPutSignal, waits for the peer's signal with ncclWaitSignal on the
 * same stream, then copies the landed bytes back on that stream and checks
 * them. A wrong signal value shows as a wait that never ends (NCCL waits for
 * the running count 1, 2, 3...: a signal word stuck at 1 hangs round 2), so
 * the script bounds each run with timeout; data that arrived after its
 * signal shows as a byte mismatch.
 *
 *   rma_putsignal [rounds] [signal]   (SRD_ID_FILE: where rank 0 leaves the unique id)
 *
 * "signal": ncclSignal instead of ncclPutSignal, no data: the provider moves
 * no GPU bytes, only the plugin's signal writes reach GPU memory.
 * "time": no checks; the time of one ring step (each rank puts to the other
 * with a signal and waits for the other's) against the same step as
 * ncclSend/ncclRecv, 8 B to 64 MiB, timed with CUDA events on the stream.
 *
 * Exit 0 all checks passed; 1 a check failed (the first mismatch printed);
 * 2 setup failed (the failing call and NCCL's error string printed). */
#define _DEFAULT_SOURCE /* usleep */
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SLOT ((size_t)1 << 20)      /* the largest put; each round's slot */
#define TIME_MAX ((size_t)64 << 20) /* the largest timed step */

static int rank = -1;

#define NCCL_OK(call)                                                                                  \
  do {                                                                                                 \
    ncclResult_t r_ = (call);                                                                          \
    if (r_ != ncclSuccess) {                                                                           \
      fprintf(stderr, "rank %d: %s failed: %s (%d) [%s:%d]\n", rank, #call, ncclGetErrorString(r_), r_, \
              __FILE__, __LINE__);                                                                     \
      exit(2);                                                                                         \
    }                                                                                                  \
  } while (0)

#define CUDA_OK(call)                                                                                   \
  do {                                                                                                  \
    cudaError_t e_ = (call);                                                                            \
    if (e_ != cudaSuccess) {                                                                            \
      fprintf(stderr, "rank %d: %s failed: %s [%s:%d]\n", rank, #call, cudaGetErrorString(e_), __FILE__, \
              __LINE__);                                                                                \
      exit(2);                                                                                          \
    }                                                                                                   \
  } while (0)

/* The byte at offset i of round k's put from rank r. */
static uint8_t pattern(int r, int k, size_t i) { return (uint8_t)(i * 31 + (size_t)k * 7 + (size_t)r * 101 + 1); }

static void get_id(ncclUniqueId *id, int nranks) {
  const char *path = getenv("SRD_ID_FILE");
  if (!path) path = "/tmp/srd-rma-putsignal.id";
  char tmp[512];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  if (rank == 0) {
    NCCL_OK(ncclGetUniqueId(id));
    FILE *f = fopen(tmp, "wb");
    if (!f || fwrite(id, sizeof(*id), 1, f) != 1 || fclose(f) || rename(tmp, path)) {
      fprintf(stderr, "rank 0: cannot write the unique id to %s\n", path);
      exit(2);
    }
    return;
  }
  (void)nranks;
  for (int waited = 0; waited < 600; waited++) { /* 60 s */
    FILE *f = fopen(path, "rb");
    if (f) {
      size_t n = fread(id, sizeof(*id), 1, f);
      fclose(f);
      if (n == 1) return;
    }
    usleep(100000);
  }
  fprintf(stderr, "rank %d: no unique id in %s after 60 s (did rank 0 start?)\n", rank, path);
  exit(2);
}

/* One ring step of n bytes, iters times, in microseconds a step. */
static double step_us(ncclComm_t comm, cudaStream_t stream, ncclWindow_t win, char *buf, size_t n, int peer,
                      int rma, int iters) {
  cudaEvent_t t0, t1;
  CUDA_OK(cudaEventCreate(&t0));
  CUDA_OK(cudaEventCreate(&t1));
  ncclWaitSignalDesc_t desc = {.opCnt = 1, .peer = peer, .sigIdx = 0, .ctx = 0};
  for (int i = -3; i < iters; i++) { /* 3 warm-up steps */
    if (i == 0) CUDA_OK(cudaEventRecord(t0, stream));
    if (rma) {
      NCCL_OK(ncclPutSignal(buf, n, ncclUint8, peer, win, TIME_MAX, 0, 0, 0, comm, stream));
      NCCL_OK(ncclWaitSignal(1, &desc, comm, stream));
    } else {
      NCCL_OK(ncclGroupStart());
      NCCL_OK(ncclSend(buf, n, ncclUint8, peer, comm, stream));
      NCCL_OK(ncclRecv(buf + TIME_MAX, n, ncclUint8, peer, comm, stream));
      NCCL_OK(ncclGroupEnd());
    }
  }
  CUDA_OK(cudaEventRecord(t1, stream));
  CUDA_OK(cudaEventSynchronize(t1));
  float ms = 0;
  CUDA_OK(cudaEventElapsedTime(&ms, t0, t1));
  CUDA_OK(cudaEventDestroy(t0));
  CUDA_OK(cudaEventDestroy(t1));
  return ms * 1000.0 / iters;
}

/* put+signal against send/recv, alternating per size so drift hits both. */
static void time_steps(ncclComm_t comm, cudaStream_t stream, int peer) {
  char *buf = NULL;
  NCCL_OK(ncclMemAlloc((void **)&buf, 2 * TIME_MAX));
  CUDA_OK(cudaMemset(buf, 1, 2 * TIME_MAX));
  ncclWindow_t win;
  NCCL_OK(ncclCommWindowRegister(comm, buf, 2 * TIME_MAX, &win, NCCL_WIN_COLL_SYMMETRIC));
  static const size_t sizes[] = {8, 1024, 65536, 1 << 20, 16 << 20, TIME_MAX};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    size_t n = sizes[s];
    int iters = n <= 65536 ? 200 : n <= (1 << 20) ? 50 : 10;
    double rma = step_us(comm, stream, win, buf, n, peer, 1, iters);
    double two_sided = step_us(comm, stream, win, buf, n, peer, 0, iters);
    if (rank == 0)
      printf("time %zu B: put+signal %.1f us, send/recv %.1f us, ratio %.2f (%d steps each)\n", n, rma, two_sided,
             rma / two_sided, iters);
  }
  NCCL_OK(ncclCommWindowDeregister(comm, win));
  NCCL_OK(ncclMemFree(buf));
}

int main(int argc, char **argv) {
  const char *r = getenv("RANK"), *w = getenv("WORLD_SIZE");
  if (!r || !w) {
    fprintf(stderr, "RANK and WORLD_SIZE must be set (tests/device's ranks sets them)\n");
    return 2;
  }
  rank = atoi(r);
  setvbuf(stdout, NULL, _IOLBF, 0); /* a rank killed on a hang still shows how far it got */
  int nranks = atoi(w), rounds = argc > 1 ? atoi(argv[1]) : 8;
  int signal_only = argc > 2 && !strcmp(argv[2], "signal");
  if (nranks != 2 || rounds < 1 || rounds > 64) {
    fprintf(stderr, "rank %d: 2 ranks and 1..64 rounds (got %d ranks, %d rounds)\n", rank, nranks, rounds);
    return 2;
  }
  int peer = 1 - rank, version = 0;
  NCCL_OK(ncclGetVersion(&version));
  printf("rank %d: NCCL %d, %d rounds per size, peer %d\n", rank, version, rounds, peer);
  CUDA_OK(cudaSetDevice(0));
  ncclUniqueId id;
  get_id(&id, nranks);
  ncclComm_t comm;
  NCCL_OK(ncclCommInitRank(&comm, nranks, id, rank));
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  if (argc > 2 && !strcmp(argv[2], "time")) {
    time_steps(comm, stream, peer);
    CUDA_OK(cudaStreamDestroy(stream));
    NCCL_OK(ncclCommFinalize(comm));
    NCCL_OK(ncclCommDestroy(comm));
    printf("rank %d: PASS (timing only)\n", rank);
    return 0;
  }

  /* One window: a source slot per round, then a destination slot per round
   * (no slot is reused, so no put can still be reading one we refill). */
  static const size_t sizes[] = {8, 4096, 65536 + 8, SLOT};
  const int total = rounds * (int)(sizeof sizes / sizeof sizes[0]);
  size_t len = 2 * (size_t)total * SLOT;
  char *buf = NULL;
  NCCL_OK(ncclMemAlloc((void **)&buf, len));
  CUDA_OK(cudaMemset(buf, 0, len));
  ncclWindow_t win;
  NCCL_OK(ncclCommWindowRegister(comm, buf, len, &win, NCCL_WIN_COLL_SYMMETRIC));
  printf("rank %d: window of %zu bytes registered\n", rank, len);

  /* Pinned, so the copies are asynchronous and the thread blocks only in
   * cudaStreamSynchronize. A copy to pageable memory waits for the stream
   * inside the driver holding a lock that shm's own synchronous cudaMemcpy
   * (its progress, on NCCL's proxy thread) needs: that deadlocks whatever the
   * plugin does (seen on the device; DESIGN.md "One-sided RMA"). */
  uint8_t *host = NULL, *back = NULL; /* what we put; what landed (two: the copies are asynchronous) */
  CUDA_OK(cudaMallocHost((void **)&host, SLOT));
  CUDA_OK(cudaMallocHost((void **)&back, SLOT));
  int failures = 0, round = 0;
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0] && !failures; s++) {
    size_t n = sizes[s];
    for (int k = 0; k < rounds && !failures; k++, round++) {
      char *src = buf + (size_t)round * SLOT;
      size_t dst_off = (size_t)(total + round) * SLOT;
      for (size_t i = 0; i < n; i++) host[i] = pattern(rank, round, i);
      CUDA_OK(cudaMemcpyAsync(src, host, n, cudaMemcpyHostToDevice, stream));
      if (signal_only)
        NCCL_OK(ncclSignal(peer, 0, 0, 0, comm, stream));
      else
        NCCL_OK(ncclPutSignal(src, n, ncclUint8, peer, win, dst_off, 0, 0, 0, comm, stream));
      if (k == 0) printf("rank %d: first put of %zu bytes queued, waiting for the peer's signal\n", rank, n);
      ncclWaitSignalDesc_t desc = {.opCnt = 1, .peer = peer, .sigIdx = 0, .ctx = 0};
      NCCL_OK(ncclWaitSignal(1, &desc, comm, stream));
      /* Ordered after the wait: what the signal promised must be there. */
      memset(back, 0, n);
      CUDA_OK(cudaMemcpyAsync(back, buf + dst_off, n, cudaMemcpyDeviceToHost, stream));
      CUDA_OK(cudaStreamSynchronize(stream));
      for (size_t i = 0; i < n && !signal_only; i++)
        if (back[i] != pattern(peer, round, i)) {
          fprintf(stderr, "rank %d: FAIL round %d (%zu bytes): byte %zu is %u, expected %u (data behind its signal?)\n",
                  rank, round, n, i, back[i], pattern(peer, round, i));
          failures++;
          break;
        }
    }
    if (!failures && signal_only) printf("rank %d: %d signals arrived\n", rank, rounds);
    else if (!failures) printf("rank %d: %d puts of %zu bytes with signals: data and signals right\n", rank, rounds, n);
  }
  CUDA_OK(cudaFreeHost(host));
  CUDA_OK(cudaFreeHost(back));
  NCCL_OK(ncclCommWindowDeregister(comm, win));
  NCCL_OK(ncclMemFree(buf));
  CUDA_OK(cudaStreamDestroy(stream));
  NCCL_OK(ncclCommFinalize(comm));
  NCCL_OK(ncclCommDestroy(comm));
  printf("rank %d: %s (%d signals waited for)\n", rank, failures ? "FAIL" : "PASS", round);
  return failures ? 1 : 0;
}
