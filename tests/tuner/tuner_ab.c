/* Paired A/B of NCCL's collectives with and without our tuner's decisions, in
 * one set of processes, for the GPU machine (tests/tuner/device-ab.sh builds
 * and runs it; CI has no NCCL).
 *
 * Separate nccl-tests runs differ by 10-30% at small sizes on the shared
 * device even when both make the same choice, so a 5% goal cannot be judged
 * from them. Here every rank holds three communicators over the same plugin
 * and tuner library:
 *   tuner  our tuner decides (NCCL_ALGO unset at its init)
 *   nccl   NCCL decides: NCCL_ALGO lists every algorithm at its init, which
 *          leaves NCCL's choice as it is and makes our tuner hands-off
 *   nccl2  the same as nccl again: the control, whose ratio to nccl is what
 *          this method cannot tell apart from zero
 * and times batches of each in rotating order, round after round, so drift
 * and placement hit all three alike. Per size it prints the median time of
 * each and the median of the per-round ratios.
 *
 * Ranks come from RANK and WORLD_SIZE (the device's `ranks N` helper); rank 0
 * hands out the communicator ids through the file SRD_AB_IDS (unique per run).
 *
 *   tuner_ab -c allreduce|allgather|reducescatter [-b 8] [-e 1G] [-n ROUNDS]
 *   tuner_ab -c ... --decisions   one collective per communicator and size, no
 *                                 timing: run with NCCL_DEBUG_SUBSYS=TUNING to
 *                                 log which algorithm each one got */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime.h>
#include <nccl.h>

#define NVARIANTS 3
#define MAX_ROUNDS 64
#define ID_WAIT_S 120

static const char *const variant_name[NVARIANTS] = {"tuner", "nccl", "nccl2"};
/* Every algorithm NCCL 2.2x knows: NCCL's choice stands, our tuner stands back. */
static const char *const all_algos = "Tree,Ring,CollNetDirect,CollNetChain,NVLS,NVLSTree,PAT";

enum coll { ALLREDUCE, ALLGATHER, REDUCESCATTER };
static const char *const coll_name[] = {"allreduce", "allgather", "reducescatter"};

struct bench {
  enum coll coll;
  int rank, nranks;
  size_t min_bytes, max_bytes;
  int rounds; /* 0: by size */
  int decisions;
  ncclComm_t comm[NVARIANTS];
  cudaStream_t stream[NVARIANTS];
  cudaEvent_t start[NVARIANTS], stop[NVARIANTS];
  float *send, *recv, *host;
};

static void fail_call(int rank, const char *call, const char *why, int line) {
  fprintf(stderr, "rank %d: %s: %s (line %d)\n", rank, call, why, line);
  exit(1);
}
#define CUDA_OK(x)                                                                   \
  do {                                                                               \
    cudaError_t e_ = (x);                                                            \
    if (e_ != cudaSuccess) fail_call(b->rank, #x, cudaGetErrorString(e_), __LINE__); \
  } while (0)
#define NCCL_OK(x)                                                                   \
  do {                                                                               \
    ncclResult_t r_ = (x);                                                           \
    if (r_ != ncclSuccess) fail_call(b->rank, #x, ncclGetErrorString(r_), __LINE__); \
  } while (0)

static size_t parse_size(const char *s) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  unsigned long long mult = 1;
  if (*end == 'K' || *end == 'k') mult = 1ULL << 10, end++;
  else if (*end == 'M' || *end == 'm') mult = 1ULL << 20, end++;
  else if (*end == 'G' || *end == 'g') mult = 1ULL << 30, end++;
  if (errno || end == s || *end || v == 0 || v > (4ULL << 30) / mult) {
    fprintf(stderr, "tuner_ab: bad size '%s' (1 .. 4G, optional K/M/G)\n", s);
    exit(2);
  }
  return (size_t)(v * mult);
}

static void usage(void) {
  fprintf(stderr, "usage: tuner_ab -c allreduce|allgather|reducescatter [-b MIN] [-e MAX] [-n ROUNDS] [--decisions]\n");
  exit(2);
}

static void parse_args(struct bench *b, int argc, char **argv) {
  b->coll = (enum coll)-1;
  b->min_bytes = 8;
  b->max_bytes = 1ULL << 30;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--decisions")) {
      b->decisions = 1;
      continue;
    }
    if (!v) usage();
    i++;
    if (!strcmp(a, "-c")) {
      for (int c = 0; c < 3; c++)
        if (!strcmp(v, coll_name[c])) b->coll = (enum coll)c;
    } else if (!strcmp(a, "-b")) {
      b->min_bytes = parse_size(v);
    } else if (!strcmp(a, "-e")) {
      b->max_bytes = parse_size(v);
    } else if (!strcmp(a, "-n")) {
      b->rounds = atoi(v);
      if (b->rounds < 1 || b->rounds > MAX_ROUNDS) usage();
    } else {
      usage();
    }
  }
  if ((int)b->coll < 0 || b->min_bytes > b->max_bytes) usage();
}

static int env_int(const char *name) {
  const char *v = getenv(name);
  if (!v || !*v) {
    fprintf(stderr, "tuner_ab: %s is not set (run it under the device's `ranks N`)\n", name);
    exit(2);
  }
  return atoi(v);
}

/* Rank 0 writes the ids whole (rename), the others wait for the file. */
static void share_ids(struct bench *b, ncclUniqueId ids[NVARIANTS]) {
  const char *path = getenv("SRD_AB_IDS");
  if (!path || !*path) {
    fprintf(stderr, "tuner_ab: SRD_AB_IDS (a file path unique to this run) is not set\n");
    exit(2);
  }
  if (b->rank == 0) {
    for (int v = 0; v < NVARIANTS; v++) NCCL_OK(ncclGetUniqueId(&ids[v]));
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f || fwrite(ids, sizeof(ncclUniqueId), NVARIANTS, f) != NVARIANTS || fclose(f) || rename(tmp, path)) {
      fprintf(stderr, "tuner_ab: cannot write %s: %s\n", path, strerror(errno));
      exit(1);
    }
    return;
  }
  for (int waited_ms = 0; waited_ms < ID_WAIT_S * 1000; waited_ms += 10) {
    FILE *f = fopen(path, "rb");
    if (f) {
      size_t n = fread(ids, sizeof(ncclUniqueId), NVARIANTS, f);
      fclose(f);
      if (n == NVARIANTS) return;
    }
    usleep(10000);
  }
  fprintf(stderr, "rank %d: no ids in %s after %d s\n", b->rank, path, ID_WAIT_S);
  exit(1);
}

static void init_comms(struct bench *b) {
  ncclUniqueId ids[NVARIANTS];
  share_ids(b, ids);
  for (int v = 0; v < NVARIANTS; v++) {
    /* NCCL and our tuner read NCCL_ALGO at communicator init only. */
    if (v == 0) unsetenv("NCCL_ALGO");
    else setenv("NCCL_ALGO", all_algos, 1);
    NCCL_OK(ncclCommInitRank(&b->comm[v], b->nranks, ids[v], b->rank));
    CUDA_OK(cudaStreamCreateWithFlags(&b->stream[v], cudaStreamNonBlocking));
    CUDA_OK(cudaEventCreate(&b->start[v]));
    CUDA_OK(cudaEventCreate(&b->stop[v]));
  }
  unsetenv("NCCL_ALGO");
}

/* Element counts of a size as nccl-tests counts it: allgather's size is what
 * every rank receives, reducescatter's what every rank sends. */
static size_t send_count(const struct bench *b, size_t bytes) {
  size_t n = bytes / sizeof(float);
  return b->coll == ALLGATHER ? n / (size_t)b->nranks : n;
}
static size_t recv_count(const struct bench *b, size_t bytes) {
  size_t n = bytes / sizeof(float);
  return b->coll == REDUCESCATTER ? n / (size_t)b->nranks : n;
}

static void post(struct bench *b, int v, size_t bytes) {
  switch (b->coll) {
  case ALLREDUCE:
    NCCL_OK(ncclAllReduce(b->send, b->recv, send_count(b, bytes), ncclFloat, ncclSum, b->comm[v], b->stream[v]));
    break;
  case ALLGATHER:
    NCCL_OK(ncclAllGather(b->send, b->recv, send_count(b, bytes), ncclFloat, b->comm[v], b->stream[v]));
    break;
  case REDUCESCATTER:
    NCCL_OK(ncclReduceScatter(b->send, b->recv, recv_count(b, bytes), ncclFloat, ncclSum, b->comm[v],
                              b->stream[v]));
    break;
  }
}

/* Every rank sends rank+1 everywhere: sums are n(n+1)/2, gathered block j is j+1. */
static long check_result(struct bench *b, int v, size_t bytes) {
  size_t n = recv_count(b, bytes);
  CUDA_OK(cudaMemsetAsync(b->recv, 0, n * sizeof(float), b->stream[v]));
  post(b, v, bytes);
  CUDA_OK(cudaMemcpyAsync(b->host, b->recv, n * sizeof(float), cudaMemcpyDeviceToHost, b->stream[v]));
  CUDA_OK(cudaStreamSynchronize(b->stream[v]));
  float sum = (float)b->nranks * (float)(b->nranks + 1) / 2.0f;
  size_t block = send_count(b, bytes);
  long wrong = 0;
  for (size_t i = 0; i < n; i++) {
    float want = b->coll == ALLGATHER ? (float)(i / block + 1) : sum;
    wrong += b->host[i] != want;
  }
  return wrong;
}

/* Iterations per timed batch and rounds per size: batches of a few ms, and
 * fewer rounds where one collective takes most of a second. */
static int batch_iters(size_t bytes) {
  return bytes <= (64u << 10) ? 50 : bytes <= (1u << 20) ? 20 : bytes <= (16u << 20) ? 5 : 1;
}
static int size_rounds(const struct bench *b, size_t bytes) {
  if (b->rounds) return b->rounds;
  return bytes <= (16u << 20) ? 15 : bytes <= (256u << 20) ? 5 : 3;
}

static double batch_us(struct bench *b, int v, size_t bytes, int iters) {
  CUDA_OK(cudaEventRecord(b->start[v], b->stream[v]));
  for (int i = 0; i < iters; i++) post(b, v, bytes);
  CUDA_OK(cudaEventRecord(b->stop[v], b->stream[v]));
  CUDA_OK(cudaEventSynchronize(b->stop[v]));
  float ms = 0;
  CUDA_OK(cudaEventElapsedTime(&ms, b->start[v], b->stop[v]));
  return 1000.0 * ms / iters;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}
static double median(double *x, int n) {
  qsort(x, (size_t)n, sizeof(*x), cmp_double);
  return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

static void run_size(struct bench *b, size_t bytes) {
  if (b->decisions) {
    for (int v = 0; v < NVARIANTS; v++) {
      post(b, v, bytes);
      CUDA_OK(cudaStreamSynchronize(b->stream[v]));
      if (b->rank == 0) printf("decision %s %zu %s\n", coll_name[b->coll], bytes, variant_name[v]);
    }
    return;
  }
  int iters = batch_iters(bytes), rounds = size_rounds(b, bytes);
  double t[NVARIANTS][MAX_ROUNDS], ratio[NVARIANTS][MAX_ROUNDS];
  for (int v = 0; v < NVARIANTS; v++) batch_us(b, v, bytes, iters < 2 ? 1 : iters / 2); /* warm-up */
  for (int r = 0; r < rounds; r++)
    for (int j = 0; j < NVARIANTS; j++) {
      int v = (r + j) % NVARIANTS;
      t[v][r] = batch_us(b, v, bytes, iters);
    }
  for (int r = 0; r < rounds; r++)
    for (int v = 0; v < NVARIANTS; v++) ratio[v][r] = t[v][r] / t[1][r];
  long wrong[NVARIANTS];
  for (int v = 0; v < NVARIANTS; v++) wrong[v] = check_result(b, v, bytes);
  if (b->rank != 0) return;
  double med[NVARIANTS];
  for (int v = 0; v < NVARIANTS; v++) med[v] = median(t[v], rounds);
  printf("%-13s %2d %11zu %3d %2d %11.1f %11.1f %11.1f %7.3f %7.3f %ld\n", coll_name[b->coll], b->nranks, bytes,
         iters, rounds, med[0], med[1], med[2], median(ratio[0], rounds), median(ratio[2], rounds),
         wrong[0] + wrong[1] + wrong[2]);
  fflush(stdout);
}

int main(int argc, char **argv) {
  struct bench bench = {0}, *b = &bench;
  parse_args(b, argc, argv);
  b->rank = env_int("RANK");
  b->nranks = env_int("WORLD_SIZE");
  if (b->nranks < 1 || b->rank < 0 || b->rank >= b->nranks) {
    fprintf(stderr, "tuner_ab: RANK %d of WORLD_SIZE %d\n", b->rank, b->nranks);
    return 2;
  }
  CUDA_OK(cudaSetDevice(0));
  size_t bytes_max = b->max_bytes;
  /* reducescatter and allreduce read max bytes, allgather writes them */
  CUDA_OK(cudaMalloc((void **)&b->send, bytes_max));
  CUDA_OK(cudaMalloc((void **)&b->recv, bytes_max));
  b->host = malloc(bytes_max);
  if (!b->host) {
    fprintf(stderr, "rank %d: out of host memory for %zu bytes\n", b->rank, bytes_max);
    return 1;
  }
  size_t n = bytes_max / sizeof(float);
  for (size_t i = 0; i < n; i++) b->host[i] = (float)(b->rank + 1);
  CUDA_OK(cudaMemcpy(b->send, b->host, n * sizeof(float), cudaMemcpyHostToDevice));
  init_comms(b);
  if (b->rank == 0 && !b->decisions)
    printf("#coll        rk       bytes  it rd   tuner(us)    nccl(us)   nccl2(us) tuner/n nccl2/n wrong\n");
  for (size_t bytes = b->min_bytes; bytes <= b->max_bytes; bytes *= 2) {
    if (send_count(b, bytes) == 0 || recv_count(b, bytes) == 0) continue;
    run_size(b, bytes);
  }
  for (int v = 0; v < NVARIANTS; v++) {
    NCCL_OK(ncclCommDestroy(b->comm[v]));
    cudaStreamDestroy(b->stream[v]);
    cudaEventDestroy(b->start[v]);
    cudaEventDestroy(b->stop[v]);
  }
  cudaFree(b->send);
  cudaFree(b->recv);
  free(b->host);
  if (b->rank == 0 && getenv("SRD_AB_IDS")) unlink(getenv("SRD_AB_IDS"));
  return 0;
}
