/* One-sided RMA (ncclRmaPlugin_v14, and _v15 in the -v15 cases: every entry
 * taken from that table, the ops given optFlags) driven as NCCL 2.30 drives it: the net
 * table loaded and initialized first, the RMA table found in the same
 * library, init twice (NCCL's RMA and GIN contexts), listen, handles
 * exchanged, connect with a context pointer that is not ours, a context,
 * collective regMrSym of host windows, ops from the rank's thread while
 * another thread calls rmaProgress.
 *   put-sizes      ring of put+signal, 1 B .. 64 MiB, checked byte for byte,
 *                  nothing written past the put (2 ranks)
 *   ordering       256 ops in flight per peer (32 x maxRecvs; the origin's
 *                  window is 128), puts with a signal, plain puts followed
 *                  by a signal alone (INC), striped over 4 endpoints: every
 *                  value the target's signal shows must have the data of
 *                  that many puts there (2 and 4 ranks; reorder.sh runs it
 *                  with completions shuffled)
 *   loopback       put+signal and get to ourselves
 *   get-flush      striped gets of the next rank's window, iflush, checked
 *   get-lanes      a get striped over the automatic progress threads' lanes:
 *                  the target's threads started by registering the window
 *   bad-input      unknown rank, out-of-window offsets, foreign handles, bad
 *                  signal op: errors, and no byte of the target changes
 *   init-refused   without NCCL_SRD_RMA=host init fails with its reason
 *   gpu-refused    NCCL_SRD_RMA=gpu where the rails cannot take GPU windows
 *                  (tcp: no FI_HMEM; shm here: no CUDA) fails init, warned,
 *                  with the reason
 *   ordering-v15, get-flush-v15, bad-input-v15   the same through
 *                  ncclRmaPlugin_v15, optFlags alternating between
 *                  AggregateRequests and none
 *   rail-cut       (tests/netns/rma-cut.sh only: two namespaces joined by 4
 *                  veth rails) rank 0 stops progressing, rank 1 posts puts
 *                  with a signal striped over every rail, which cannot
 *                  complete; rank 0 cuts rail 2 and progresses again. A
 *                  one-sided write in flight on a lost rail is not written
 *                  again: rank 1 must get an error naming the rail, not
 *                  wait for good, and rank 0 never sees a signal without
 *                  its data
 *   rail-cut-lanes the same with rank 1's writes posted by a progress thread
 *                  (tests/netns/rma-cut.sh) */
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl/rma_v15.h"
#include "srdtest.h"

#define MIB ((size_t)1 << 20)
#define GUARD ((size_t)4096)
#define POISON 0x5A
#define TIMEOUT_MS 120000
#define NOPS 256
#define CHUNK ((size_t)48 << 10)

struct rank_state {
  const ncclRma_v14_t *rma;
  void *ctx[2], *coll, *rctx;
  int rank, nranks;
  pthread_t progress;
  atomic_bool stop;
  bool failed; /* the group was made to fail: close expects its error */
};

/* Set by the -v15 cases before the ranks fork: the ranks then drive
 * ncclRmaPlugin_v15 through a v14-shaped view whose ops pass optFlags. */
static bool via_v15;
static const ncclRma_v15_t *v15;
static uint32_t v15_ops;

/* Alternate the hint, so both values reach every op. */
static uint32_t next_flags(void) {
  return v15_ops++ % 2 ? ncclRmaOptFlagsAggregateRequests : ncclRmaOptFlagsDefault;
}

static ncclResult_t iput_via_v15(void *rctx, int context, uint64_t src_off, void *src_mh, size_t size,
                                 uint64_t dst_off, void *dst_mh, uint32_t rank, void **req) {
  return v15->iput(rctx, context, src_off, src_mh, size, dst_off, dst_mh, rank, next_flags(), req);
}

static ncclResult_t iput_signal_via_v15(void *rctx, int context, uint64_t src_off, void *src_mh, size_t size,
                                        uint64_t dst_off, void *dst_mh, uint32_t rank, uint64_t sig_off, void *sig_mh,
                                        uint64_t sig_value, uint32_t sig_op, bool strong, void **req) {
  return v15->iputSignal(rctx, context, src_off, src_mh, size, dst_off, dst_mh, rank, sig_off, sig_mh, sig_value,
                         sig_op, strong, next_flags(), req);
}

static ncclResult_t iget_via_v15(void *rctx, int context, uint64_t remote_off, void *remote_mh, size_t size,
                                 uint64_t local_off, void *local_mh, uint32_t rank, void **req) {
  return v15->iget(rctx, context, remote_off, remote_mh, size, local_off, local_mh, rank, next_flags(), req);
}

static const ncclRma_v14_t *rma_table(void) {
  void *lib = dlopen(st_plugin_path(), RTLD_NOW | RTLD_LOCAL);
  ST_CHECK(lib, "dlopen: %s", dlerror());
  const char *name = via_v15 ? "ncclRmaPlugin_v15" : "ncclRmaPlugin_v14";
  const ncclRma_v14_t *t = dlsym(lib, "ncclRmaPlugin_v14");
  if (via_v15) {
    static ncclRma_v14_t view;
    ST_CHECK((v15 = dlsym(lib, name)) != NULL, "%s missing", name);
    view = (ncclRma_v14_t){.name = v15->name, .init = v15->init, .devices = v15->devices,
                           .getProperties = v15->getProperties, .listen = v15->listen, .connect = v15->connect,
                           .createContext = v15->createContext, .regMrSym = v15->regMrSym,
                           .regMrSymDmaBuf = v15->regMrSymDmaBuf, .deregMrSym = v15->deregMrSym,
                           .destroyContext = v15->destroyContext, .closeColl = v15->closeColl,
                           .closeListen = v15->closeListen, .iput = iput_via_v15, .iputSignal = iput_signal_via_v15,
                           .iget = iget_via_v15, .iflush = v15->iflush, .test = v15->test,
                           .rmaProgress = v15->rmaProgress, .queryLastError = v15->queryLastError,
                           .finalize = v15->finalize};
    ST_CHECK(v15->iput && v15->iputSignal && v15->iget, "%s has no ops", name);
    t = &view;
  }
  ST_CHECK(t && t->init && t->connect && t->regMrSym && t->iput && t->iputSignal && t->iget && t->iflush && t->test &&
               t->rmaProgress && t->queryLastError && t->finalize,
           "%s missing or incomplete", name);
  return t;
}

static void *progress_main(void *arg) {
  struct rank_state *s = arg;
  while (!atomic_load(&s->stop)) {
    ncclResult_t rc = s->rma->rmaProgress(s->rctx);
    if (rc != ncclSuccess) {
      fprintf(stderr, "[%s] rmaProgress returned %d\n", st_label(), (int)rc);
      return NULL;
    }
  }
  return NULL;
}

static void start_progress(struct rank_state *s) {
  atomic_init(&s->stop, false);
  ST_CHECK(pthread_create(&s->progress, NULL, progress_main, s) == 0, "pthread_create failed");
}

static void stop_progress(struct rank_state *s) {
  atomic_store(&s->stop, true);
  pthread_join(s->progress, NULL);
}

/* Everything NCCL does before its first op. */
static void open_rma(struct rank_state *s, int rank, int nranks, const struct st_ctx *ctx, bool striped) {
  ST_CHECK(setenv("NCCL_SRD_RMA", "host", 1) == 0, "setenv failed");
  if (striped)
    ST_CHECK(setenv("NCCL_SRD_RAILS", "1", 1) == 0 && setenv("NCCL_SRD_EPS_PER_RAIL", "4", 1) == 0 &&
                 setenv("NCCL_SRD_STRIPE_THRESHOLD", "16K", 1) == 0 && setenv("NCCL_SRD_MIN_STRIPE", "4K", 1) == 0,
             "setenv failed");
  st_setup(ctx, 12);
  memset(s, 0, sizeof(*s));
  s->rma = rma_table();
  s->rank = rank;
  s->nranks = nranks;
  for (int i = 0; i < 2; i++) ST_NCCL(s->rma->init(&s->ctx[i], 0x1234 + (uint64_t)i, st_logger()));
  ST_CHECK(s->ctx[0] && s->ctx[1] && s->ctx[0] != s->ctx[1], "two inits gave contexts %p and %p", s->ctx[0], s->ctx[1]);
  int ndev = 0;
  ST_NCCL(s->rma->devices(&ndev));
  ST_CHECK(ndev >= 1, "%d RMA devices", ndev);
  ncclNetProperties_v12_t props;
  ST_NCCL(s->rma->getProperties(0, &props));
  ST_CHECK(props.netDeviceType == NCCL_NET_DEVICE_GIN_PROXY, "netDeviceType %d", (int)props.netDeviceType);
  ST_CHECK(props.maxRecvs == 8, "maxRecvs %d", props.maxRecvs);
  /* Host windows only: NCCL must not hand us CUDA or dma-buf windows. */
  ST_CHECK(props.ptrSupport == NCCL_PTR_HOST, "NCCL_SRD_RMA=host: ptrSupport %#x", (unsigned)props.ptrSupport);
  char *handles = calloc((size_t)nranks, NCCL_NET_HANDLE_MAXSIZE);
  void **hp = calloc((size_t)nranks, sizeof(void *));
  ST_CHECK(handles && hp, "out of memory");
  void *listen = NULL;
  ST_NCCL(s->rma->listen(s->ctx[0], 0, handles + (size_t)rank * NCCL_NET_HANDLE_MAXSIZE, &listen));
  for (int p = 0; p < nranks; p++)
    if (p != rank) st_oob_send(p, handles + (size_t)rank * NCCL_NET_HANDLE_MAXSIZE, NCCL_NET_HANDLE_MAXSIZE);
  for (int p = 0; p < nranks; p++) {
    if (p != rank) st_oob_recv(p, handles + (size_t)p * NCCL_NET_HANDLE_MAXSIZE, NCCL_NET_HANDLE_MAXSIZE, TIMEOUT_MS);
    hp[p] = handles + (size_t)p * NCCL_NET_HANDLE_MAXSIZE;
  }
  int unrelated = 0; /* NCCL 2.30.7 passes its net context, not the RMA one */
  ST_NCCL(s->rma->connect(&unrelated, hp, nranks, rank, listen, &s->coll));
  ST_CHECK(s->coll, "connect gave no group");
  ST_NCCL(s->rma->closeListen(listen));
  free(hp);
  free(handles);
  ncclRmaConfig_v14_t config = {1, -1, 1};
  ST_NCCL(s->rma->createContext(s->coll, &config, &s->rctx));
  start_progress(s);
}

static void close_rma(struct rank_state *s) {
  stop_progress(s);
  bool err = !s->failed;
  ST_NCCL(s->rma->queryLastError(s->rctx, &err));
  ST_CHECK(err == s->failed, "queryLastError reports %s", err ? "an error" : "no error");
  st_barrier(TIMEOUT_MS);
  ST_NCCL(s->rma->destroyContext(s->rctx));
  ST_NCCL(s->rma->closeColl(s->coll));
  for (int i = 0; i < 2; i++) ST_NCCL(s->rma->finalize(s->ctx[i]));
  ST_NCCL(st_net_finalize());
}

static void *reg(struct rank_state *s, void *buf, size_t len) {
  void *mh = NULL;
  ST_NCCL(s->rma->regMrSym(s->coll, buf, len, NCCL_PTR_HOST, 0, &mh));
  ST_CHECK(mh, "regMrSym gave no handle");
  return mh;
}

static void wait_req(struct rank_state *s, void *req, const char *what) {
  int64_t end = st_now_ms() + TIMEOUT_MS;
  int done = 0;
  while (!done) {
    ST_NCCL(s->rma->test(s->coll, req, &done));
    ST_CHECK(done || st_now_ms() < end, "%s: not done after %d ms", what, TIMEOUT_MS);
  }
}

static uint64_t load_signal(const uint64_t *w) { return __atomic_load_n(w, __ATOMIC_ACQUIRE); }

/* Wait until *w reaches want; the rank's own thread also tests nothing
 * meanwhile: the progress thread alone moves the target. */
static void wait_signal(const uint64_t *w, uint64_t want, const char *what) {
  int64_t end = st_now_ms() + TIMEOUT_MS;
  while (load_signal(w) < want) ST_CHECK(st_now_ms() < end, "%s: signal %llu, waiting for %llu", what,
                                         (unsigned long long)load_signal(w), (unsigned long long)want);
}

static const size_t put_sizes[] = {1, 3, 4095, 65536, 65537, MIB + 5, 16 * MIB, 64 * MIB};
#define NPUT (sizeof put_sizes / sizeof put_sizes[0])

static int put_sizes_rank(int rank, int nranks, void *arg) {
  struct rank_state s;
  open_rma(&s, rank, nranks, arg, false);
  size_t max = 64 * MIB;
  char *src = st_alloc(max), *dst = st_alloc(max + GUARD);
  uint64_t *sig = st_alloc(4096);
  void *smh = reg(&s, src, max), *dmh = reg(&s, dst, max + GUARD), *gmh = reg(&s, sig, 4096);
  int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  char ready = 1;
  for (size_t i = 0; i < NPUT; i++) {
    size_t size = put_sizes[i];
    memset(dst, POISON, size + GUARD);
    st_oob_send(prev, &ready, 1); /* our window is poisoned: prev may write */
    st_pattern_fill(src, size, 77 + i * 31 + (size_t)rank);
    st_oob_recv(next, &ready, 1, TIMEOUT_MS);
    void *req = NULL;
    ST_NCCL(s.rma->iputSignal(s.rctx, 0, 0, smh, size, 0, dmh, (uint32_t)next, (uint64_t)rank * 8, gmh, 1,
                              NCCL_NET_SIGNAL_OP_ADD, true, &req));
    ST_CHECK(req, "iputSignal gave no request");
    wait_req(&s, req, "put+signal");
    wait_signal(&sig[prev], i + 1, "put+signal");
    size_t bad = st_pattern_check(dst, size, 77 + i * 31 + (size_t)prev);
    ST_CHECK(bad == SIZE_MAX, "put of %zu bytes: wrong byte at offset %zu", size, bad);
    bad = st_check_byte(dst + size, GUARD, POISON);
    ST_CHECK(bad == SIZE_MAX, "put of %zu bytes: byte %zu past it was written", size, size + bad);
  }
  ST_CHECK(load_signal(&sig[prev]) == NPUT, "signal %llu after %zu puts", (unsigned long long)load_signal(&sig[prev]),
           NPUT);
  st_barrier(TIMEOUT_MS);
  ST_NCCL(s.rma->deregMrSym(s.coll, smh));
  ST_NCCL(s.rma->deregMrSym(s.coll, dmh));
  ST_NCCL(s.rma->deregMrSym(s.coll, gmh));
  close_rma(&s);
  st_free(src, max);
  st_free(dst, max + GUARD);
  st_free(sig, 4096);
  return 0;
}

/* Op j (1-based) puts chunk j; odd j carry their signal (ADD 1), even j
 * are plain puts followed by a signal alone (INC, whose value is ignored):
 * signal v means chunks 1..v. */
static int ordering_rank(int rank, int nranks, void *arg) {
  struct rank_state s;
  open_rma(&s, rank, nranks, arg, true);
  size_t len = NOPS * CHUNK;
  char *src = st_alloc(len), *dst = st_alloc(len);
  uint64_t *sig = st_alloc(4096);
  void *smh = reg(&s, src, len), *dmh = reg(&s, dst, len), *gmh = reg(&s, sig, 4096);
  int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  for (int j = 0; j < NOPS; j++) st_pattern_fill(src + (size_t)j * CHUNK, CHUNK, 5000 + (size_t)j * 7 + (size_t)rank);
  st_barrier(TIMEOUT_MS);
  static void *reqs[2 * NOPS];
  int nreq = 0;
  for (int j = 0; j < NOPS; j++) {
    uint64_t off = (uint64_t)j * CHUNK;
    if (j % 2 == 0) {
      ST_NCCL(s.rma->iputSignal(s.rctx, 0, off, smh, CHUNK, off, dmh, (uint32_t)next, (uint64_t)rank * 8, gmh, 1,
                                NCCL_NET_SIGNAL_OP_ADD, true, &reqs[nreq++]));
    } else {
      ST_NCCL(s.rma->iput(s.rctx, 0, off, smh, CHUNK, off, dmh, (uint32_t)next, &reqs[nreq++]));
      ST_NCCL(s.rma->iputSignal(s.rctx, 0, 0, NULL, 0, 0, NULL, (uint32_t)next, (uint64_t)rank * 8, gmh, 12345,
                                NCCL_NET_SIGNAL_OP_INC, true, &reqs[nreq++]));
    }
  }
  /* The target's view while ops land: every value is backed by its data. */
  uint64_t checked = 0;
  int64_t end = st_now_ms() + TIMEOUT_MS;
  while (checked < NOPS) {
    uint64_t v = load_signal(&sig[prev]);
    ST_CHECK(v <= NOPS, "signal %llu past %d ops", (unsigned long long)v, NOPS);
    for (; checked < v; checked++) {
      size_t bad = st_pattern_check(dst + checked * CHUNK, CHUNK, 5000 + checked * 7 + (size_t)prev);
      ST_CHECK(bad == SIZE_MAX, "signal %llu, but put %llu has a wrong byte at offset %zu", (unsigned long long)v,
               (unsigned long long)checked + 1, bad);
    }
    ST_CHECK(st_now_ms() < end, "signal at %llu of %d after %d ms", (unsigned long long)v, NOPS, TIMEOUT_MS);
  }
  for (int i = 0; i < nreq; i++) wait_req(&s, reqs[i], "ordering op");
  st_barrier(TIMEOUT_MS);
  ST_NCCL(s.rma->deregMrSym(s.coll, smh));
  ST_NCCL(s.rma->deregMrSym(s.coll, dmh));
  ST_NCCL(s.rma->deregMrSym(s.coll, gmh));
  close_rma(&s);
  st_free(src, len);
  st_free(dst, len);
  st_free(sig, 4096);
  return 0;
}

/* Puts to ourselves, each adding 1 to one word: whenever the word reads k,
 * the first k pieces are there (strong signals), seen while they land; where
 * the NIC writes signals the puts themselves go by loopback writes too. */
static void self_ordering(struct rank_state *s, int rank, const char *mine, char *got, size_t len, void *mmh,
                          void *gmh, void *smh, const uint64_t *sig) {
  enum { PIECES = 8 };
  const uint64_t *word = &sig[3];
  size_t piece = len / PIECES;
  void *reqs[PIECES];
  memset(got, POISON, len);
  for (int i = 0; i < PIECES; i++)
    ST_NCCL(s->rma->iputSignal(s->rctx, 0, (uint64_t)i * piece, mmh, piece, (uint64_t)i * piece, gmh, (uint32_t)rank,
                               3 * sizeof(uint64_t), smh, 0,
                               NCCL_NET_SIGNAL_OP_INC, true, &reqs[i]));
  int64_t end = st_now_ms() + TIMEOUT_MS;
  for (uint64_t seen = 0; seen < PIECES;) {
    uint64_t k = load_signal(word);
    ST_CHECK(k <= PIECES, "self signal reads %llu after %d puts", (unsigned long long)k, PIECES);
    for (uint64_t i = seen; i < k; i++)
      ST_CHECK(!memcmp(got + i * piece, mine + i * piece, piece), "self signal reads %llu but piece %llu is not there",
               (unsigned long long)k, (unsigned long long)i);
    seen = k;
    ST_CHECK(st_now_ms() < end, "self signal %llu of %d after %d ms", (unsigned long long)k, PIECES, TIMEOUT_MS);
  }
  for (int i = 0; i < PIECES; i++) wait_req(s, reqs[i], "self put");
  if (getenv("NCCL_SRD_TEST_NIC_SIGNALS"))
    ST_CHECK(st_log_count("ops to ourselves by loopback RDMA") > 0, "no put to ourselves went by the NIC");
}

static int get_rank(int rank, int nranks, void *arg, bool self) {
  struct rank_state s;
  open_rma(&s, rank, nranks, arg, true);
  size_t len = 3 * MIB + 77;
  char *mine = st_alloc(len), *got = st_alloc(len + GUARD);
  uint64_t *sig = st_alloc(4096);
  void *mmh = reg(&s, mine, len), *gmh = reg(&s, got, len + GUARD), *smh = reg(&s, sig, 4096);
  st_pattern_fill(mine, len, 900 + (size_t)rank);
  memset(got, POISON, len + GUARD);
  st_barrier(TIMEOUT_MS);
  int from = self ? rank : (rank + 1) % nranks;
  void *req = NULL;
  ST_NCCL(s.rma->iget(s.rctx, 0, 0, mmh, len, 0, gmh, (uint32_t)from, &req));
  ST_CHECK(req, "iget gave no request");
  wait_req(&s, req, "get");
  ST_NCCL(s.rma->iflush(s.rctx, 0, gmh, (uint32_t)from, &req));
  if (req) wait_req(&s, req, "flush");
  size_t bad = st_pattern_check(got, len, 900 + (size_t)from);
  ST_CHECK(bad == SIZE_MAX, "get from rank %d: wrong byte at offset %zu", from, bad);
  ST_CHECK(st_check_byte(got + len, GUARD, POISON) == SIZE_MAX, "get wrote past its size");
  if (self) {
    /* A put+signal to ourselves lands before test says done, except where
     * the NIC writes signals (NCCL_SRD_TEST_NIC_SIGNALS): then the signal
     * comes once its loopback write does, after the data. */
    memset(got, POISON, len);
    ST_NCCL(s.rma->iputSignal(s.rctx, 0, 0, mmh, len, 0, gmh, (uint32_t)rank, 16, smh, 7, NCCL_NET_SIGNAL_OP_ADD,
                              true, &req));
    wait_req(&s, req, "loopback put");
    if (getenv("NCCL_SRD_TEST_NIC_SIGNALS")) {
      wait_signal(&sig[2], 7, "loopback signal");
      ST_CHECK(st_log_count("signal words written by loopback RDMA writes") > 0, "no signal went by the NIC");
    }
    ST_CHECK(load_signal(&sig[2]) == 7, "loopback signal %llu", (unsigned long long)load_signal(&sig[2]));
    ST_CHECK(st_pattern_check(got, len, 900 + (size_t)rank) == SIZE_MAX, "loopback put: wrong data");
    self_ordering(&s, rank, mine, got, len, mmh, gmh, smh, sig);
  }
  st_barrier(TIMEOUT_MS);
  ST_NCCL(s.rma->deregMrSym(s.coll, mmh));
  ST_NCCL(s.rma->deregMrSym(s.coll, gmh));
  ST_NCCL(s.rma->deregMrSym(s.coll, smh));
  close_rma(&s);
  st_free(mine, len);
  st_free(got, len + GUARD);
  st_free(sig, 4096);
  return 0;
}

static int get_flush_rank(int rank, int nranks, void *arg) { return get_rank(rank, nranks, arg, false); }

/* With the automatic progress threads (as if on 4096 CPUs, whatever runs beside it: they start on the
 * first large message): rank 0 gets rank 1's window, striped over the
 * lanes (a device of one lane per NIC has none: then rank 1 just waits). Reads make no completion at rank 1, so registering a window that
 * large must have started rank 1's lane threads, which serve them (tcp
 * places a read only when its endpoint is polled). */
static int get_lanes_rank(int rank, int nranks, void *arg) {
  ST_CHECK(unsetenv("NCCL_SRD_PROGRESS_THREADS") == 0 && setenv("NCCL_SRD_TEST_CPUS", "4096", 1) == 0,
           "setenv failed");
  struct rank_state s;
  open_rma(&s, rank, nranks, arg, true);
  size_t len = 2 * MIB + 64;
  char *mine = st_alloc(len), *got = st_alloc(len);
  void *mmh = reg(&s, mine, len), *gmh = reg(&s, got, len);
  st_pattern_fill(mine, len, 300 + (size_t)rank);
  memset(got, POISON, len);
  st_barrier(TIMEOUT_MS);
  if (rank == 0) {
    void *req = NULL;
    ST_NCCL(s.rma->iget(s.rctx, 0, 0, mmh, len, 0, gmh, 1, &req));
    wait_req(&s, req, "get");
    ST_NCCL(s.rma->iflush(s.rctx, 0, gmh, 1, &req));
    if (req) wait_req(&s, req, "flush");
    size_t bad = st_pattern_check(got, len, 301);
    ST_CHECK(bad == SIZE_MAX, "get on lanes: wrong byte at offset %zu", bad);
  } else if (st_log_count(" x 1 lane(s) ") > 0) {
    /* One lane per NIC (efa's four devices here): no thread to start, and
     * rank 1 does not progress while rank 0 reads, which the device serves. */
    st_note("one lane per NIC: no lane threads; rank 1 idle while its window is read");
  } else {
    /* The progress thread starts them at its next call: on a loaded host
     * that may take a while. */
    int64_t end = st_now_ms() + 30000;
    while (st_log_count("progress thread(s) started") == 0 && st_now_ms() < end) sched_yield();
    ST_CHECK(st_log_count("progress thread(s) started") > 0,
             "a window of %zu bytes registered, peers' gets to serve, and no lane thread started", len);
  }
  st_barrier(TIMEOUT_MS);
  ST_NCCL(s.rma->deregMrSym(s.coll, mmh));
  ST_NCCL(s.rma->deregMrSym(s.coll, gmh));
  close_rma(&s);
  st_free(mine, len);
  st_free(got, len);
  return 0;
}
static int loopback_rank(int rank, int nranks, void *arg) { return get_rank(rank, nranks, arg, true); }

#define EXPECT_ERROR(call, what)                                                              \
  do {                                                                                        \
    void *r_ = NULL;                                                                          \
    (void)r_;                                                                                 \
    ncclResult_t rc_ = (call);                                                                \
    ST_CHECK(rc_ != ncclSuccess, "%s: accepted", what);                                       \
  } while (0)

static int bad_input_rank(int rank, int nranks, void *arg) {
  struct rank_state s;
  open_rma(&s, rank, nranks, arg, false);
  size_t len = 65536;
  char *src = st_alloc(len), *dst = st_alloc(len);
  uint64_t *sig = st_alloc(4096);
  void *smh = reg(&s, src, len), *dmh = reg(&s, dst, len), *gmh = reg(&s, sig, 4096);
  memset(dst, POISON, len);
  memset(src, 1, len);
  int next = (rank + 1) % nranks;
  void *r;
  char foreign[256] = {0};
  EXPECT_ERROR(s.rma->iput(s.rctx, 0, 0, smh, 8, 0, dmh, (uint32_t)nranks, &r), "put to an unknown rank");
  EXPECT_ERROR(s.rma->iput(s.rctx, 0, 0, smh, 8, len - 4, dmh, (uint32_t)next, &r), "put past the window");
  EXPECT_ERROR(s.rma->iput(s.rctx, 0, 0, smh, 8, UINT64_MAX - 2, dmh, (uint32_t)next, &r), "put at a huge offset");
  EXPECT_ERROR(s.rma->iput(s.rctx, 0, len, smh, 8, 0, dmh, (uint32_t)next, &r), "put from past the source");
  EXPECT_ERROR(s.rma->iput(s.rctx, 0, 0, smh, 8, 0, foreign, (uint32_t)next, &r), "put into a foreign handle");
  EXPECT_ERROR(s.rma->iput(s.rctx, 1, 0, smh, 8, 0, dmh, (uint32_t)next, &r), "put on context 1 of 1");
  EXPECT_ERROR(s.rma->iputSignal(s.rctx, 0, 0, smh, 8, 0, dmh, (uint32_t)next, 4096, gmh, 1, NCCL_NET_SIGNAL_OP_ADD,
                                 true, &r),
               "signal past its window");
  EXPECT_ERROR(s.rma->iputSignal(s.rctx, 0, 0, smh, 8, 0, dmh, (uint32_t)next, 4, gmh, 1, NCCL_NET_SIGNAL_OP_ADD,
                                 true, &r),
               "unaligned signal");
  EXPECT_ERROR(s.rma->iputSignal(s.rctx, 0, 0, smh, 8, 0, dmh, (uint32_t)next, 0, gmh, 1, 3, true, &r),
               "unknown signal op");
  EXPECT_ERROR(s.rma->iget(s.rctx, 0, len - 1, dmh, 2, 0, smh, (uint32_t)next, &r), "get past the window");
  /* The remote range fits its window; the local one it lands in is smaller. */
  EXPECT_ERROR(s.rma->iget(s.rctx, 0, 0, dmh, 8192, 0, gmh, (uint32_t)next, &r), "get past the local window");
  EXPECT_ERROR(s.rma->test(s.coll, foreign, (int[]){0}), "test of a foreign request");
  EXPECT_ERROR(s.rma->deregMrSym(s.coll, foreign), "deregistering a foreign handle");
  EXPECT_ERROR(s.rma->regMrSym(s.coll, src, len, NCCL_PTR_CUDA, 0, &r), "a CUDA window with host windows only");
  st_barrier(TIMEOUT_MS);
  ST_CHECK(st_check_byte(dst, len, POISON) == SIZE_MAX, "a refused op wrote into the target's window");
  ST_CHECK(st_check_byte(sig, 4096, 0) == SIZE_MAX, "a refused op wrote into the signal window");
  ST_CHECK(st_log_count("RMA") > 0, "no logged reason");
  ST_NCCL(s.rma->deregMrSym(s.coll, smh));
  ST_NCCL(s.rma->deregMrSym(s.coll, dmh));
  ST_NCCL(s.rma->deregMrSym(s.coll, gmh));
  /* The refusals are usage errors, not the group's: it is still healthy. */
  close_rma(&s);
  st_free(src, len);
  st_free(dst, len);
  st_free(sig, 4096);
  return 0;
}

#define CUT_OPS 8
#define CUT_PUT MIB
#define CUT_RAIL 2

static void run_netns(const char *verb, int rail) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "%s %s %d", getenv("SRD_FAILOVER_NETNS"), verb, rail);
  int rc = system(cmd);
  ST_CHECK(rc == 0, "'%s' failed (status %d)", cmd, rc);
}

/* Rank 1: the puts, then each one's end: done, or the group's error. */
static void rail_cut_origin(struct rank_state *s, void *smh, void *dmh, void *gmh) {
  void *reqs[CUT_OPS];
  char c = 0;
  st_oob_recv(0, &c, 1, TIMEOUT_MS); /* rank 0 no longer progresses */
  for (int j = 0; j < CUT_OPS; j++) {
    uint64_t off = (uint64_t)j * CUT_PUT;
    ST_NCCL(s->rma->iputSignal(s->rctx, 0, off, smh, CUT_PUT, off, dmh, 0, 8, gmh, 1, NCCL_NET_SIGNAL_OP_ADD, true,
                               &reqs[j]));
  }
  st_oob_send(0, "o", 1);
  st_oob_recv(0, &c, 1, TIMEOUT_MS); /* rail 2 is cut */
  int64_t end = st_now_ms() + TIMEOUT_MS;
  for (int j = 0; j < CUT_OPS; j++) {
    int done = 0;
    ncclResult_t rc = ncclSuccess;
    while (!done && rc == ncclSuccess) {
      rc = s->rma->test(s->coll, reqs[j], &done);
      ST_CHECK(done || rc != ncclSuccess || st_now_ms() < end,
               "put %d: neither done nor failed %d ms after rail %d was cut under it", j, TIMEOUT_MS, CUT_RAIL);
    }
    s->failed |= rc != ncclSuccess;
  }
  ST_CHECK(s->failed, "every put completed although rank 0 progressed nothing before rail %d was cut", CUT_RAIL);
  /* The rail named as gone (with lanes, one of that NIC's lanes' rails), or
   * a write's error on it if the provider reported one first. */
  char gone[64], failed[64];
  snprintf(gone, sizeof gone, "(vb%d) is gone", CUT_RAIL);
  snprintf(failed, sizeof failed, "failed on rail vb%d", CUT_RAIL);
  ST_CHECK(st_log_count(gone) + st_log_count(failed) > 0, "the error does not name the rail (no '%s' or '%s' logged)",
           gone, failed);
  st_oob_send(0, "f", 1);
}

/* Rank 0: stop progressing, let the puts be posted, cut, progress again and
 * check that every signal value seen is backed by its puts' data. */
static void rail_cut_target(struct rank_state *s, const char *dst, const uint64_t *sig) {
  char c = 0;
  stop_progress(s);
  st_oob_send(1, "p", 1);
  st_oob_recv(1, &c, 1, TIMEOUT_MS); /* the puts are posted */
  run_netns("cut", CUT_RAIL);
  start_progress(s);
  st_oob_send(1, "c", 1);
  uint64_t checked = 0;
  while (!st_oob_ready(1))
    for (uint64_t v = load_signal(&sig[1]); checked < v; checked++) {
      size_t bad = st_pattern_check(dst + checked * CUT_PUT, CUT_PUT, 600 + checked);
      ST_CHECK(bad == SIZE_MAX, "signal %llu, but put %llu has a wrong byte at offset %zu", (unsigned long long)v,
               (unsigned long long)checked + 1, bad);
    }
  st_oob_recv(1, &c, 1, TIMEOUT_MS);
  st_note("rank 0 saw %llu of %d signals", (unsigned long long)checked, CUT_OPS);
}

/* lanes: rank 1 posts through a progress thread per NIC (writes queued to a
 * lane whose rail goes down); rank 0 has none either way, so that only its
 * rmaProgress progresses it. */
static int rail_cut_rank(int rank, int nranks, void *arg, bool lanes) {
  const struct st_ctx *ctx = arg;
  ST_CHECK(setenv("NCCL_SRD_PROGRESS_THREADS", rank == 1 && lanes ? "1" : "0", 1) == 0, "setenv failed");
  struct rank_state s;
  open_rma(&s, rank, nranks, ctx, false);
  size_t len = CUT_OPS * CUT_PUT;
  char *buf = st_alloc(len);
  uint64_t *sig = st_alloc(4096);
  void *bmh = reg(&s, buf, len), *gmh = reg(&s, sig, 4096);
  if (rank == 1)
    for (int j = 0; j < CUT_OPS; j++) st_pattern_fill(buf + (size_t)j * CUT_PUT, CUT_PUT, 600 + (size_t)j);
  else
    memset(buf, POISON, len);
  st_barrier(TIMEOUT_MS);
  if (rank == 1) rail_cut_origin(&s, bmh, bmh, gmh);
  else rail_cut_target(&s, buf, sig);
  ST_NCCL(s.rma->deregMrSym(s.coll, bmh));
  ST_NCCL(s.rma->deregMrSym(s.coll, gmh));
  close_rma(&s);
  st_free(buf, len);
  st_free(sig, 4096);
  return 0;
}

static int init_refused_rank(int rank, int nranks, void *arg) {
  (void)rank, (void)nranks;
  unsetenv("NCCL_SRD_RMA");
  st_setup(arg, 12);
  const ncclRma_v14_t *t = rma_table();
  void *ctx = NULL;
  ST_CHECK(t->init(&ctx, 1, st_logger()) != ncclSuccess, "init succeeded without NCCL_SRD_RMA=host");
  ST_CHECK(st_log_count("RMA: not offered") == 1, "init failed without its reason in the log");
  ST_NCCL(st_net_finalize());
  return 0;
}

static int gpu_refused_rank(int rank, int nranks, void *arg) {
  (void)rank, (void)nranks;
  setenv("NCCL_SRD_RMA", "gpu", 1);
  st_setup(arg, 12);
  const ncclRma_v14_t *t = rma_table();
  void *ctx = NULL;
  ST_CHECK(t->init(&ctx, 1, st_logger()) != ncclSuccess, "NCCL_SRD_RMA=gpu: init succeeded without GPU windows");
  ST_CHECK(st_log_count("RMA: not offered: NCCL_SRD_RMA=gpu, but GPU windows cannot work: device 0: ") == 1,
           "init failed without its reason in the log");
  ST_NCCL(st_net_finalize());
  return 0;
}

static int run_table(const struct st_ctx *ctx, int nranks, st_rank_fn fn, bool v15_table) {
  via_v15 = v15_table;
  char label[96];
  snprintf(label, sizeof label, "%s[%s] %d ranks", ctx->test, ctx->provider, nranks);
  struct st_group_opts opts = {.timeout_s = 300};
  return st_group_run(label, nranks, fn, (void *)ctx, &opts);
}

static int run(const struct st_ctx *ctx, int nranks, st_rank_fn fn) { return run_table(ctx, nranks, fn, false); }

static int put_sizes_case(const struct st_ctx *c) { return run(c, 2, put_sizes_rank); }
static int ordering2(const struct st_ctx *c) { return run(c, 2, ordering_rank); }
static int ordering4(const struct st_ctx *c) { return run(c, 4, ordering_rank); }
static int loopback(const struct st_ctx *c) { return run(c, 2, loopback_rank); }
static int get_flush(const struct st_ctx *c) { return run(c, 4, get_flush_rank); }
static int get_lanes(const struct st_ctx *c) { return run(c, 2, get_lanes_rank); }
static int bad_input(const struct st_ctx *c) { return run(c, 2, bad_input_rank); }
static int init_refused(const struct st_ctx *c) { return run(c, 1, init_refused_rank); }
static int gpu_refused(const struct st_ctx *c) { return run(c, 1, gpu_refused_rank); }
static int ordering_v15(const struct st_ctx *c) { return run_table(c, 2, ordering_rank, true); }
static int get_flush_v15(const struct st_ctx *c) { return run_table(c, 4, get_flush_rank, true); }
static int bad_input_v15(const struct st_ctx *c) { return run_table(c, 2, bad_input_rank, true); }
static int rail_cut_plain(int rank, int nranks, void *arg) { return rail_cut_rank(rank, nranks, arg, false); }
static int rail_cut_lanes(int rank, int nranks, void *arg) { return rail_cut_rank(rank, nranks, arg, true); }
static int rail_cut(const struct st_ctx *c) {
  if (!getenv("SRD_FAILOVER_NETNS")) return st_skip(c, "runs from tests/netns/rma-cut.sh (namespaces)");
  return run(c, 2, rail_cut_plain);
}
static int rail_cut_lanes_case(const struct st_ctx *c) {
  if (!getenv("SRD_FAILOVER_NETNS")) return st_skip(c, "runs from tests/netns/rma-cut.sh (namespaces)");
  return run(c, 2, rail_cut_lanes);
}

int main(int argc, char **argv) {
  static const struct st_case cases[] = {{"put-sizes", put_sizes_case}, {"ordering", ordering2}, {"ordering-4", ordering4},
                                         {"loopback", loopback},   {"get-flush", get_flush}, {"bad-input", bad_input},
                                         {"init-refused", init_refused}, {"gpu-refused", gpu_refused},
                                         {"get-lanes", get_lanes},
                                         {"ordering-v15", ordering_v15}, {"get-flush-v15", get_flush_v15},
                                         {"bad-input-v15", bad_input_v15}, {"rail-cut", rail_cut},
                                         {"rail-cut-lanes", rail_cut_lanes_case}};
  return st_main(argc, argv, cases, (int)(sizeof cases / sizeof cases[0]));
}
