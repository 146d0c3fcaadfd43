/* The version adapter: one set of calls over ncclNetPlugin_v8..v12. */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "srdtest.h"

static int version;
static void *ctx; /* v11+: from init() */
static union {
  void *any;
  ncclNet_v8_t *v8;
  ncclNet_v9_t *v9;
  ncclNet_v10_t *v10;
  ncclNet_v11_t *v11;
  ncclNet_v12_t *v12;
} table;
static atomic_int warnings;

const char *st_plugin_path(void) {
  static char path[PATH_MAX];
  const char *env = getenv("SRD_TEST_PLUGIN");
  if (env && *env) return env;
  const char *top = getenv("top_builddir");
  char rel[PATH_MAX];
  snprintf(rel, sizeof rel, "%s/.libs/libnccl-net-srd.so", top && *top ? top : ".");
  /* dlopen searches the library path for a name without '/', so resolve it. */
  if (!realpath(rel, path)) snprintf(path, sizeof path, "%s", rel);
  return path;
}

void *st_plugin_table(int v) {
  const char *path = st_plugin_path();
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "dlopen(%s): %s\n", path, dlerror());
    return NULL;
  }
  char sym[32];
  snprintf(sym, sizeof sym, "ncclNetPlugin_v%d", v);
  void *t = dlsym(lib, sym);
  if (!t) fprintf(stderr, "dlsym(%s) in %s: %s\n", sym, path, dlerror());
  return t;
}

/* The plugin's latest log lines (every level), for tests that check what it
 * reported; lane threads log too, hence the lock. */
#define LOG_LINES 256
#define LOG_LINE_MAX 1024
static struct {
  pthread_mutex_t lock;
  unsigned next; /* lines logged so far; line i is in slot i % LOG_LINES */
  char line[LOG_LINES][LOG_LINE_MAX];
} log_ring = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The device's opening line ("device 0: 1 NIC(s) x 2 lane(s) = 2 rail(s) ...
 * completions polled by the caller's thread on lane 0 and one thread per other
 * lane") and whether lanes were given
 * up, kept apart from the ring so that a long test cannot push them out. */
static char device_line[LOG_LINE_MAX];
static int lanes_off;
/* The first warning, for a test that fails on any: its failure says which. */
static char first_warning[LOG_LINE_MAX];

static void keep_line(ncclDebugLogLevel level, const char *msg) {
  pthread_mutex_lock(&log_ring.lock);
  if (level == NCCL_LOG_WARN && !first_warning[0]) snprintf(first_warning, sizeof first_warning, "%s", msg);
  if (strstr(msg, " lane(s) = ")) snprintf(device_line, sizeof device_line, "%s", msg);
  if (strstr(msg, "progress threads off")) lanes_off = 1;
  snprintf(log_ring.line[log_ring.next % LOG_LINES], LOG_LINE_MAX, "%s", msg);
  log_ring.next++;
  pthread_mutex_unlock(&log_ring.lock);
}

int st_log_count(const char *needle) {
  int n = 0;
  pthread_mutex_lock(&log_ring.lock);
  unsigned first = log_ring.next > LOG_LINES ? log_ring.next - LOG_LINES : 0;
  for (unsigned i = first; i < log_ring.next; i++) n += strstr(log_ring.line[i % LOG_LINES], needle) != NULL;
  pthread_mutex_unlock(&log_ring.lock);
  return n;
}

struct st_traffic st_traffic_last(int is_send) {
  char line[LOG_LINE_MAX] = "";
  struct st_traffic t = {-1, -1, -1, -1, -1};
  const char *what = is_send ? "send comm " : "recv comm ";
  pthread_mutex_lock(&log_ring.lock);
  unsigned first = log_ring.next > LOG_LINES ? log_ring.next - LOG_LINES : 0;
  for (unsigned i = log_ring.next; i-- > first && !line[0];) {
    const char *l = log_ring.line[i % LOG_LINES];
    if (strstr(l, what) && strstr(l, " closed: ")) snprintf(line, sizeof line, "%s", l);
  }
  pthread_mutex_unlock(&log_ring.lock);
  ST_CHECK(line[0], "the plugin logged no traffic line for a closed %scomm", what);
  const char *p = strstr(line, " closed: ");
  ST_CHECK(sscanf(p,
                  " closed: %lld eager message(s), %lld by RMA write in %lld write(s) (%lld on lane 0), %lld "
                  "request(s) completed on a lane thread",
                  &t.eager, &t.rendezvous, &t.writes, &t.on_lane0, &t.by_lane) == 5,
           "unexpected traffic line: %s", line);
  return t;
}

static void logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line, const char *fmt, ...) {
  if (level == NCCL_LOG_WARN) atomic_fetch_add(&warnings, 1);
  char msg[LOG_LINE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  keep_line(level, msg);
  if (level != NCCL_LOG_WARN && !getenv("SRD_TEST_VERBOSE")) return;
  static const char *names[] = {"NONE", "VERSION", "WARN", "INFO", "ABORT", "TRACE"};
  const char *lvl = (unsigned)level < sizeof names / sizeof names[0] ? names[level] : "?";
  fprintf(stderr, "[%s] %s %s:%d %s\n", st_label(), lvl, file ? file : "?", line, msg);
}

int st_warn_count(void) { return atomic_load(&warnings); }

void st_first_warning(char *out, size_t cap) {
  pthread_mutex_lock(&log_ring.lock);
  snprintf(out, cap, "%s", first_warning[0] ? first_warning : "none");
  pthread_mutex_unlock(&log_ring.lock);
}

ncclDebugLogger_t st_logger(void) { return logger; }

void st_net_load(int v) {
  ST_CHECK(v >= 8 && v <= 12, "no adapter for ncclNet v%d", v);
  table.any = st_plugin_table(v);
  ST_CHECK(table.any, "plugin table v%d not found", v);
  version = v;
  ncclResult_t rc;
  ncclNetCommConfig_v10_t config = {.trafficClass = -1};
  uint64_t comm_id = ((uint64_t)getpid() << 16) ^ 0x5244u;
  switch (v) {
  case 8: rc = table.v8->init(logger); break;
  case 9: rc = table.v9->init(logger); break;
  case 10: rc = table.v10->init(logger, NULL); break;
  case 11: rc = table.v11->init(&ctx, comm_id, &config, logger, NULL); break;
  default: rc = table.v12->init(&ctx, comm_id, &config, logger, NULL); break;
  }
  ST_CHECK(rc == ncclSuccess, "init of ncclNetPlugin_v%d returned %d", v, (int)rc);
}

int st_net_version(void) { return version; }

const char *st_net_name(void) {
  switch (version) {
  case 8: return table.v8->name;
  case 9: return table.v9->name;
  case 10: return table.v10->name;
  case 11: return table.v11->name;
  default: return table.v12->name;
  }
}

int st_device_lanes(int *nics, int *threaded) {
  int lanes = -1, n = -1;
  pthread_mutex_lock(&log_ring.lock);
  const char *p = strstr(device_line, "device ");
  if (p && sscanf(p, "device %*d: %d NIC(s) x %d lane(s)", &n, &lanes) != 2) lanes = -1;
  if (threaded) *threaded = !lanes_off && strstr(device_line, "one thread per other lane") != NULL;
  pthread_mutex_unlock(&log_ring.lock);
  if (nics) *nics = n;
  return lanes;
}

size_t st_device_eager_max(char *why, size_t len) {
  size_t eager = 0;
  char what[64] = "";
  pthread_mutex_lock(&log_ring.lock);
  const char *p = strstr(device_line, "eager messages up to ");
  if (!p || sscanf(p, "eager messages up to %zu bytes (%63[^)])", &eager, what) != 2) eager = 0;
  pthread_mutex_unlock(&log_ring.lock);
  snprintf(why, len, "%s", what);
  return eager;
}

/* SRD_TEST_EXPECT_LANES=N (threads.sh, with NCCL_SRD_PROGRESS_THREADS=N): a
 * device opened with fewer than N + 1 lanes (lane 0 and one per thread) or
 * without its threads is a failure, not a quiet fallback. */
static void check_expected_lanes(void) {
  const char *want = getenv("SRD_TEST_EXPECT_LANES");
  if (!want || !*want) return;
  int threaded = 0, lanes = st_device_lanes(NULL, &threaded);
  pthread_mutex_lock(&log_ring.lock);
  int opened = device_line[0] != 0;
  pthread_mutex_unlock(&log_ring.lock);
  if (!opened) return; /* this process never opened a device */
  ST_CHECK(lanes == atoi(want) + 1 && threaded, "SRD_TEST_EXPECT_LANES=%s but the device opened with %d lane(s), %s", want,
           lanes, threaded ? "threaded" : "without progress threads");
}

ncclResult_t st_net_finalize(void) {
  check_expected_lanes();
  if (version == 11) return table.v11->finalize(ctx);
  if (version == 12) return table.v12->finalize(ctx);
  return ncclSuccess;
}

#define COPY_COMMON_PROPS(dst, src)           \
  do {                                        \
    (dst)->name = (src).name;                 \
    (dst)->pci_path = (src).pciPath;          \
    (dst)->guid = (src).guid;                 \
    (dst)->ptr_support = (src).ptrSupport;    \
    (dst)->reg_is_global = (src).regIsGlobal; \
    (dst)->speed = (src).speed;               \
    (dst)->port = (src).port;                 \
    (dst)->latency = (src).latency;           \
    (dst)->max_comms = (src).maxComms;        \
    (dst)->max_recvs = (src).maxRecvs;        \
  } while (0)

ncclResult_t st_net_devices(int *ndev) {
  switch (version) {
  case 8: return table.v8->devices(ndev);
  case 9: return table.v9->devices(ndev);
  case 10: return table.v10->devices(ndev);
  case 11: return table.v11->devices(ndev);
  default: return table.v12->devices(ndev);
  }
}

ncclResult_t st_net_get_properties(int dev, struct st_props *p) {
  ncclResult_t rc;
  memset(p, 0, sizeof *p);
  switch (version) {
  case 8: {
    ncclNetProperties_v8_t q;
    memset(&q, 0, sizeof q);
    rc = table.v8->getProperties(dev, &q);
    COPY_COMMON_PROPS(p, q);
    break;
  }
  case 9:
  case 10: {
    ncclNetProperties_v9_t q;
    memset(&q, 0, sizeof q);
    rc = version == 9 ? table.v9->getProperties(dev, &q) : table.v10->getProperties(dev, &q);
    COPY_COMMON_PROPS(p, q);
    p->max_p2p_bytes = q.maxP2pBytes;
    break;
  }
  case 11: {
    ncclNetProperties_v11_t q;
    memset(&q, 0, sizeof q);
    rc = table.v11->getProperties(dev, &q);
    COPY_COMMON_PROPS(p, q);
    p->max_p2p_bytes = q.maxP2pBytes;
    break;
  }
  default: {
    ncclNetProperties_v12_t q;
    memset(&q, 0, sizeof q);
    rc = table.v12->getProperties(dev, &q);
    COPY_COMMON_PROPS(p, q);
    p->max_p2p_bytes = q.maxP2pBytes;
    break;
  }
  }
  return rc;
}

ncclResult_t st_net_listen(int dev, void *handle, void **listen_comm) {
  switch (version) {
  case 8: return table.v8->listen(dev, handle, listen_comm);
  case 9: return table.v9->listen(dev, handle, listen_comm);
  case 10: return table.v10->listen(dev, handle, listen_comm);
  case 11: return table.v11->listen(ctx, dev, handle, listen_comm);
  default: return table.v12->listen(ctx, dev, handle, listen_comm);
  }
}

ncclResult_t st_net_connect(int dev, void *handle, void **send_comm) {
  ncclNetDeviceHandle_v8_t *dev_comm = NULL;
  ncclNetCommConfig_v10_t config = {.trafficClass = -1};
  switch (version) {
  case 8: return table.v8->connect(dev, handle, send_comm, &dev_comm);
  case 9: return table.v9->connect(dev, handle, send_comm, &dev_comm);
  case 10: return table.v10->connect(dev, &config, handle, send_comm, &dev_comm);
  case 11: return table.v11->connect(ctx, dev, handle, send_comm, &dev_comm);
  default: return table.v12->connect(ctx, dev, handle, send_comm, &dev_comm);
  }
}

ncclResult_t st_net_accept(void *listen_comm, void **recv_comm) {
  ncclNetDeviceHandle_v8_t *dev_comm = NULL;
  switch (version) {
  case 8: return table.v8->accept(listen_comm, recv_comm, &dev_comm);
  case 9: return table.v9->accept(listen_comm, recv_comm, &dev_comm);
  case 10: return table.v10->accept(listen_comm, recv_comm, &dev_comm);
  case 11: return table.v11->accept(listen_comm, recv_comm, &dev_comm);
  default: return table.v12->accept(listen_comm, recv_comm, &dev_comm);
  }
}

ncclResult_t st_net_reg_mr(void *comm, void *data, size_t size, void **mhandle) {
  switch (version) {
  case 8: return table.v8->regMr(comm, data, size, NCCL_PTR_HOST, mhandle);
  case 9: return table.v9->regMr(comm, data, size, NCCL_PTR_HOST, mhandle);
  case 10: return table.v10->regMr(comm, data, size, NCCL_PTR_HOST, mhandle);
  case 11: return table.v11->regMr(comm, data, size, NCCL_PTR_HOST, mhandle);
  default: return table.v12->regMr(comm, data, size, NCCL_PTR_HOST, mhandle);
  }
}

ncclResult_t st_net_dereg_mr(void *comm, void *mhandle) {
  switch (version) {
  case 8: return table.v8->deregMr(comm, mhandle);
  case 9: return table.v9->deregMr(comm, mhandle);
  case 10: return table.v10->deregMr(comm, mhandle);
  case 11: return table.v11->deregMr(comm, mhandle);
  default: return table.v12->deregMr(comm, mhandle);
  }
}

ncclResult_t st_net_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle, void **request) {
  switch (version) {
  case 8:
    ST_CHECK(size <= INT_MAX, "v8 cannot express a %zu-byte send", size);
    return table.v8->isend(send_comm, data, (int)size, tag, mhandle, request);
  case 9: return table.v9->isend(send_comm, data, size, tag, mhandle, request);
  case 10: return table.v10->isend(send_comm, data, size, tag, mhandle, NULL, request);
  case 11: return table.v11->isend(send_comm, data, size, tag, mhandle, NULL, request);
  default: return table.v12->isend(send_comm, data, size, tag, mhandle, NULL, request);
  }
}

#define ST_MAX_RECVS 64

ncclResult_t st_net_irecv(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags, void **mhandles,
                          void **request) {
  /* The plugin may be handed n outside [1, maxRecvs] by a bad-input test:
   * the arrays below cover what such a test passes. */
  ST_CHECK(n <= ST_MAX_RECVS, "st_net_irecv: n=%d is beyond what the adapter carries", n);
  int isizes[ST_MAX_RECVS];
  size_t zsizes[ST_MAX_RECVS];
  int itags[ST_MAX_RECVS];
  void *phandles[ST_MAX_RECVS] = {0};
  for (int i = 0; i < n; i++) {
    if (version == 8) ST_CHECK(sizes[i] <= INT_MAX, "v8 cannot express a %zu-byte receive", sizes[i]);
    isizes[i] = (int)sizes[i];
    zsizes[i] = sizes[i];
    itags[i] = tags[i];
  }
  switch (version) {
  case 8: return table.v8->irecv(recv_comm, n, data, isizes, itags, mhandles, request);
  case 9: return table.v9->irecv(recv_comm, n, data, zsizes, itags, mhandles, request);
  case 10: return table.v10->irecv(recv_comm, n, data, zsizes, itags, mhandles, phandles, request);
  case 11: return table.v11->irecv(recv_comm, n, data, zsizes, itags, mhandles, phandles, request);
  default: return table.v12->irecv(recv_comm, n, data, zsizes, itags, mhandles, phandles, request);
  }
}

ncclResult_t st_net_test(void *request, int *done, int *sizes) {
  switch (version) {
  case 8: return table.v8->test(request, done, sizes);
  case 9: return table.v9->test(request, done, sizes);
  case 10: return table.v10->test(request, done, sizes);
  case 11: return table.v11->test(request, done, sizes);
  default: return table.v12->test(request, done, sizes);
  }
}

ncclResult_t st_net_close_send(void *comm) {
  switch (version) {
  case 8: return table.v8->closeSend(comm);
  case 9: return table.v9->closeSend(comm);
  case 10: return table.v10->closeSend(comm);
  case 11: return table.v11->closeSend(comm);
  default: return table.v12->closeSend(comm);
  }
}

ncclResult_t st_net_close_recv(void *comm) {
  switch (version) {
  case 8: return table.v8->closeRecv(comm);
  case 9: return table.v9->closeRecv(comm);
  case 10: return table.v10->closeRecv(comm);
  case 11: return table.v11->closeRecv(comm);
  default: return table.v12->closeRecv(comm);
  }
}

ncclResult_t st_net_close_listen(void *comm) {
  switch (version) {
  case 8: return table.v8->closeListen(comm);
  case 9: return table.v9->closeListen(comm);
  case 10: return table.v10->closeListen(comm);
  case 11: return table.v11->closeListen(comm);
  default: return table.v12->closeListen(comm);
  }
}

/* ---------- bounded helpers ---------- */

enum st_wait st_connect_wait(int dev, void *handle, void **send_comm, int timeout_ms, ncclResult_t *rc) {
  int64_t deadline = st_now_ms() + timeout_ms;
  *send_comm = NULL;
  for (;;) {
    ncclResult_t r = st_net_connect(dev, handle, send_comm);
    if (rc) *rc = r;
    if (r != ncclSuccess) return ST_ERROR;
    if (*send_comm) return ST_DONE;
    if (st_now_ms() > deadline) return ST_TIMEOUT;
    usleep(100);
  }
}

enum st_wait st_accept_wait(void *listen_comm, void **recv_comm, int timeout_ms, ncclResult_t *rc) {
  int64_t deadline = st_now_ms() + timeout_ms;
  *recv_comm = NULL;
  for (;;) {
    ncclResult_t r = st_net_accept(listen_comm, recv_comm);
    if (rc) *rc = r;
    if (r != ncclSuccess) return ST_ERROR;
    if (*recv_comm) return ST_DONE;
    if (st_now_ms() > deadline) return ST_TIMEOUT;
    usleep(100);
  }
}

void st_connect_accept(int dev, void *handle, void **send_comm, void *listen_comm, void **recv_comm, int timeout_ms) {
  int64_t deadline = st_now_ms() + timeout_ms;
  *send_comm = NULL;
  *recv_comm = NULL;
  while (!*send_comm || !*recv_comm) {
    if (!*send_comm) ST_NCCL(st_net_connect(dev, handle, send_comm));
    if (!*recv_comm) ST_NCCL(st_net_accept(listen_comm, recv_comm));
    ST_CHECK(st_now_ms() <= deadline, "connect+accept did not finish in %d ms (send %p recv %p)", timeout_ms,
             *send_comm, *recv_comm);
  }
}

enum st_wait st_isend_wait(void *send_comm, void *data, size_t size, int tag, void *mhandle, void **request,
                           int timeout_ms, ncclResult_t *rc) {
  int64_t deadline = st_now_ms() + timeout_ms;
  *request = NULL;
  for (;;) {
    ncclResult_t r = st_net_isend(send_comm, data, size, tag, mhandle, request);
    if (rc) *rc = r;
    if (r != ncclSuccess) return ST_ERROR;
    if (*request) return ST_DONE;
    if (st_now_ms() > deadline) return ST_TIMEOUT;
  }
}

enum st_wait st_irecv_wait(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags, void **mhandles,
                           void **request, int timeout_ms, ncclResult_t *rc) {
  int64_t deadline = st_now_ms() + timeout_ms;
  *request = NULL;
  for (;;) {
    ncclResult_t r = st_net_irecv(recv_comm, n, data, sizes, tags, mhandles, request);
    if (rc) *rc = r;
    if (r != ncclSuccess) return ST_ERROR;
    if (*request) return ST_DONE;
    if (st_now_ms() > deadline) return ST_TIMEOUT;
  }
}

enum st_wait st_test_wait(void *request, int *sizes, int timeout_ms, ncclResult_t *rc) {
  int64_t deadline = st_now_ms() + timeout_ms;
  for (;;) {
    int done = 0;
    ncclResult_t r = st_net_test(request, &done, sizes);
    if (rc) *rc = r;
    if (r != ncclSuccess) return ST_ERROR;
    if (done) return ST_DONE;
    if (st_now_ms() > deadline) return ST_TIMEOUT;
  }
}

void *st_pair_comm(int rank, int receiver, int sender, int timeout_ms) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  if (rank == receiver) {
    void *lcomm = NULL, *rcomm = NULL;
    memset(handle, 0, sizeof handle);
    ST_NCCL(st_net_listen(0, handle, &lcomm));
    ST_CHECK(lcomm, "listen succeeded without a listen comm");
    st_oob_send(sender, handle, sizeof handle);
    ncclResult_t rc = ncclSuccess;
    enum st_wait w = st_accept_wait(lcomm, &rcomm, timeout_ms, &rc);
    ST_CHECK(w == ST_DONE, "accept: %s (rc %d)", w == ST_TIMEOUT ? "no comm in time" : "error", (int)rc);
    ST_NCCL(st_net_close_listen(lcomm));
    return rcomm;
  }
  ST_CHECK(rank == sender, "rank %d is neither receiver %d nor sender %d", rank, receiver, sender);
  void *scomm = NULL;
  st_oob_recv(receiver, handle, sizeof handle, timeout_ms);
  ncclResult_t rc = ncclSuccess;
  enum st_wait w = st_connect_wait(0, handle, &scomm, timeout_ms, &rc);
  ST_CHECK(w == ST_DONE, "connect: %s (rc %d)", w == ST_TIMEOUT ? "no comm in time" : "error", (int)rc);
  return scomm;
}

void st_send_one(void *send_comm, size_t size, uint64_t seed, int tag, int timeout_ms) {
  void *buf = st_alloc(size), *mh = NULL, *req = NULL;
  st_pattern_fill(buf, size, seed);
  ST_NCCL(st_net_reg_mr(send_comm, buf, size, &mh));
  ncclResult_t rc = ncclSuccess;
  enum st_wait w = st_isend_wait(send_comm, buf, size, tag, mh, &req, timeout_ms, &rc);
  ST_CHECK(w == ST_DONE, "isend of %zu bytes: %s (rc %d)", size, w == ST_TIMEOUT ? "never accepted" : "error", (int)rc);
  w = st_test_wait(req, NULL, timeout_ms, &rc);
  ST_CHECK(w == ST_DONE, "send of %zu bytes: %s (rc %d)", size, w == ST_TIMEOUT ? "not done in time" : "error", (int)rc);
  ST_NCCL(st_net_dereg_mr(send_comm, mh));
  st_free(buf, size);
}

void st_recv_one(void *recv_comm, size_t size, uint64_t seed, int tag, int timeout_ms) {
  void *buf = st_alloc(size), *mh = NULL, *req = NULL;
  ST_NCCL(st_net_reg_mr(recv_comm, buf, size, &mh));
  ncclResult_t rc = ncclSuccess;
  enum st_wait w = st_irecv_wait(recv_comm, 1, &buf, &size, &tag, &mh, &req, timeout_ms, &rc);
  ST_CHECK(w == ST_DONE, "irecv of %zu bytes: %s (rc %d)", size, w == ST_TIMEOUT ? "never accepted" : "error", (int)rc);
  int got = -1;
  w = st_test_wait(req, &got, timeout_ms, &rc);
  ST_CHECK(w == ST_DONE, "recv of %zu bytes: %s (rc %d)", size, w == ST_TIMEOUT ? "not done in time" : "error", (int)rc);
  ST_CHECK((size_t)got == size, "recv of %zu bytes reported size %d", size, got);
  size_t bad = st_pattern_check(buf, size, seed);
  ST_CHECK(bad == SIZE_MAX, "recv of %zu bytes: wrong byte at offset %zu", size, bad);
  ST_NCCL(st_net_dereg_mr(recv_comm, mh));
  st_free(buf, size);
}
