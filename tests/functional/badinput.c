/* Bad input gets an error return and a warning, never a crash or a hang:
 * garbage, truncated and foreign 128-byte handles (ncclInvalidArgument at
 * once); a well-formed handle with a wrong cookie, and a handle whose
 * listener was closed or whose process exited (ncclRemoteError within the
 * plugin's NCCL_SRD_CONNECT_TIMEOUT_MS plus a margin; the listener drops the
 * wrong cookie's hello); NULL comms, device indexes out of range, receive
 * counts out of range, and sizes beyond a buffer's registration
 * (ncclInvalidArgument). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "srdtest.h"

/* Short enough to keep the suite quick, long enough for a good handshake
 * over tcp;ofi_rxm under ThreadSanitizer (about 4.6 s measured). */
#define CONNECT_TIMEOUT_MS 5000
#define CONNECT_TIMEOUT_TEXT "5000"
#define BOUND_MS (CONNECT_TIMEOUT_MS + 5000)
#define SETUP_MS ST_HANG_MS
#define RESOLVE_MS 10000
#define VERSION 11
#define HSIZE NCCL_NET_HANDLE_MAXSIZE

static void setup(void *arg) {
  ST_CHECK(setenv("NCCL_SRD_CONNECT_TIMEOUT_MS", CONNECT_TIMEOUT_TEXT, 1) == 0, "setenv failed");
  st_setup(arg, st_version(VERSION));
  /* NCCL listens before it connects, which opens the device; do the same so
   * that the bounds below time the connect, not the device's first opening
   * (seconds under ThreadSanitizer). */
  char handle[HSIZE] = {0};
  void *lcomm = NULL;
  ST_NCCL(st_net_listen(0, handle, &lcomm));
  ST_NCCL(st_net_close_listen(lcomm));
}

#define CODE(rc) (1u << (rc))
/* Where the listen handle keeps the listener's cookie (include/srd/wire.h). */
#define COOKIE_OFFSET 16
#define COOKIE_SIZE 8
/* Where it names the listener's transport: after the longest address. */
#define TRANSPORT_OFFSET (24 + 64)

/* A connect with this handle must fail within BOUND_MS with one of the codes
 * in `codes` (a CODE() mask) and log a warning. */
static void expect_connect_error(const char *what, void *handle, unsigned codes) {
  int warn0 = st_warn_count();
  int64_t t0 = st_now_ms();
  void *comm = NULL;
  ncclResult_t rc = ncclSuccess;
  enum st_wait w = st_connect_wait(0, handle, &comm, BOUND_MS, &rc);
  int64_t ms = st_now_ms() - t0;
  ST_CHECK(w != ST_DONE, "connect with %s handle gave a comm", what);
  ST_CHECK(w != ST_TIMEOUT, "connect with %s handle: no error within %d ms", what, BOUND_MS);
  ST_CHECK(st_warn_count() > warn0, "connect with %s handle failed (rc %d) without logging a warning", what, (int)rc);
  ST_CHECK(codes & CODE(rc), "connect with %s handle failed with rc %d, not the expected code", what, (int)rc);
  st_note("connect with %s handle: error %d after %lld ms", what, (int)rc, (long long)ms);
}

static void handle_variants(const char *real) {
  char h[HSIZE];
  const unsigned invalid = CODE(ncclInvalidArgument);
  memset(h, 0, HSIZE);
  expect_connect_error("an all-zero", h, invalid);
  memset(h, 0xff, HSIZE);
  expect_connect_error("an all-ones", h, invalid);
  st_pattern_fill(h, HSIZE, 0xbad);
  expect_connect_error("a random", h, invalid);
  for (int i = 0; i < HSIZE; i++) h[i] = (char)(real[i] ^ 0x5a);
  expect_connect_error("a scrambled", h, invalid);
  memset(h, 0, HSIZE);
  memcpy(h, real, 4);
  expect_connect_error("a truncated (4 bytes kept)", h, invalid);
  /* Header and cookie kept, address and transport zeros: no transport named. */
  memset(h, 0, HSIZE);
  memcpy(h, real, 24);
  expect_connect_error("a truncated (24 bytes kept)", h, invalid);
  /* The address is zeros, the transport ours: tcp refuses the address at
   * once, shm finds no one there. */
  memset(h, 0, HSIZE);
  memcpy(h, real, 24);
  memcpy(h + TRANSPORT_OFFSET, real + TRANSPORT_OFFSET, HSIZE - TRANSPORT_OFFSET);
  expect_connect_error("a zero-address", h, CODE(ncclInvalidUsage) | CODE(ncclRemoteError));
  /* A listener on another transport (efa's other fabric, another provider)
   * cannot be reached: refused at once as a usage error naming both, not
   * after the connect timeout (ncclRemoteError). */
  memcpy(h, real, HSIZE);
  memset(h + TRANSPORT_OFFSET, 0, HSIZE - TRANSPORT_OFFSET);
  const char *other = strncmp(real + TRANSPORT_OFFSET, "efa-direct", 11) ? "efa-direct" : "efa";
  memcpy(h + TRANSPORT_OFFSET, other, strlen(other));
  expect_connect_error("another transport's", h, CODE(ncclInvalidUsage));
  /* Everything right but the cookie: only the listener can tell, and it must
   * not answer. */
  memcpy(h, real, HSIZE);
  for (int i = COOKIE_OFFSET; i < COOKIE_OFFSET + COOKIE_SIZE; i++) h[i] = (char)~h[i];
  expect_connect_error("a wrong-cookie", h, CODE(ncclRemoteError));
  /* What another transport would put there: a socket address, then a magic. */
  memset(h, 0, HSIZE);
  struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(42424)};
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  uint64_t magic = 0x0123456789abcdefull;
  memcpy(h, &sin, sizeof sin);
  memcpy(h + sizeof sin, &magic, sizeof magic);
  expect_connect_error("a foreign (socket address)", h, invalid);
}

/* Rank 0 listens and keeps accepting (no comm may appear) while rank 1 tries
 * the bad handles; then the real handle must still work. Rank 1 connects with
 * it only once rank 0 has stopped looking for stray comms (else the real one
 * could land in that loop: seen under ASan). */
static int bad_handles(int rank, int nranks, void *arg) {
  setup(arg);
  char handle[HSIZE] = {0};
  if (rank == 0) {
    void *lcomm = NULL, *comm = NULL;
    ST_NCCL(st_net_listen(0, handle, &lcomm));
    st_oob_send(1, handle, HSIZE);
    int64_t deadline = st_now_ms() + 120000;
    while (!st_oob_ready(1)) {
      ST_NCCL(st_net_accept(lcomm, &comm));
      ST_CHECK(!comm, "accept gave a comm while only bad handles were used");
      ST_CHECK(st_now_ms() < deadline, "rank 1 did not finish its bad handles");
      usleep(200);
    }
    char g = 0;
    st_oob_recv(1, &g, 1, SETUP_MS);
    ST_NCCL(st_net_accept(lcomm, &comm));
    ST_CHECK(!comm, "accept gave a comm while only bad handles were used");
    st_oob_send(1, &g, 1);
    /* The connector sends its unanswered hello again (250 ms, doubling to
     * 2 s) until its 5 s timeout: at most 5 copies, each dropped. */
    int wrong = st_log_count("with a wrong cookie dropped");
    ST_CHECK(wrong >= 1 && wrong <= 5, "the listener logged %d wrong-cookie hello(s), expected 1 to 5", wrong);
    ncclResult_t rc = ncclSuccess;
    enum st_wait w = st_accept_wait(lcomm, &comm, SETUP_MS, &rc);
    ST_CHECK(w == ST_DONE, "accept after the bad handles: %s (rc %d)", w == ST_TIMEOUT ? "no comm" : "error", (int)rc);
    ST_NCCL(st_net_close_listen(lcomm));
    st_recv_one(comm, 1024, 5, 0, SETUP_MS);
    ST_NCCL(st_net_close_recv(comm));
  } else {
    st_oob_recv(0, handle, HSIZE, SETUP_MS);
    handle_variants(handle);
    char g = 'g';
    st_oob_send(0, &g, 1);
    st_oob_recv(0, &g, 1, SETUP_MS);
    void *comm = NULL;
    ncclResult_t rc = ncclSuccess;
    enum st_wait w = st_connect_wait(0, handle, &comm, SETUP_MS, &rc);
    ST_CHECK(w == ST_DONE, "connect with the real handle after bad ones: %s (rc %d)",
             w == ST_TIMEOUT ? "no comm" : "error", (int)rc);
    st_send_one(comm, 1024, 5, 0, SETUP_MS);
    ST_NCCL(st_net_close_send(comm));
  }
  ST_NCCL(st_net_finalize());
  return 0;
}

/* Rank 0's listener is closed; rank 2's process exits (closing nothing)
 * before anyone connects. Rank 1 connects to both at once: each connect must
 * fail within BOUND_MS and log a warning. */
static int gone_listeners(int rank, int nranks, void *arg) {
  setup(arg);
  char handle[HSIZE] = {0};
  if (rank != 1) {
    void *lcomm = NULL;
    ST_NCCL(st_net_listen(0, handle, &lcomm));
    if (rank == 0) ST_NCCL(st_net_close_listen(lcomm));
    st_oob_send(1, handle, HSIZE);
    if (rank == 2) _exit(0);
    char d = 0;
    st_oob_recv(1, &d, 1, SETUP_MS + BOUND_MS);
    ST_NCCL(st_net_finalize());
    return 0;
  }
  char closed[HSIZE], exited[HSIZE];
  st_oob_recv(0, closed, HSIZE, SETUP_MS);
  st_oob_recv(2, exited, HSIZE, SETUP_MS);
  int64_t deadline = st_now_ms() + SETUP_MS;
  char c;
  for (;;) {
    ssize_t n = read(st_oob_fd(2), &c, 1);
    if (n == 0) break;
    ST_CHECK(n > 0 || errno == EINTR, "read: %s", strerror(errno));
    ST_CHECK(st_now_ms() < deadline, "rank 2 did not exit");
  }
  const char *what[2] = {"a closed listener's", "an exited process's"};
  void *handles[2] = {closed, exited}, *comms[2] = {NULL, NULL};
  ncclResult_t rcs[2] = {ncclSuccess, ncclSuccess};
  int64_t t0 = st_now_ms(), took[2] = {-1, -1};
  int warn0 = st_warn_count();
  while (took[0] < 0 || took[1] < 0) {
    for (int i = 0; i < 2; i++) {
      if (took[i] >= 0) continue;
      rcs[i] = st_net_connect(0, handles[i], &comms[i]);
      ST_CHECK(!comms[i], "connect with %s handle gave a comm", what[i]);
      if (rcs[i] != ncclSuccess) took[i] = st_now_ms() - t0;
    }
    ST_CHECK(st_now_ms() - t0 < BOUND_MS, "connect with %s handle: no error within %d ms",
             took[0] < 0 ? what[0] : what[1], BOUND_MS);
  }
  ST_CHECK(st_warn_count() >= warn0 + 2, "the failed connects logged %d warnings, expected one each",
           st_warn_count() - warn0);
  for (int i = 0; i < 2; i++) {
    st_note("connect with %s handle: error %d after %lld ms", what[i], (int)rcs[i], (long long)took[i]);
    ST_CHECK(rcs[i] == ncclRemoteError, "connect with %s handle: rc %d, expected %d (ncclRemoteError)", what[i],
             (int)rcs[i], (int)ncclRemoteError);
  }
  char d = 'd';
  st_oob_send(0, &d, 1);
  ST_NCCL(st_net_finalize());
  return 0;
}

/* A request that must fail with ncclInvalidArgument: immediately, or from
 * test() within RESOLVE_MS. */
static void expect_request_error(const char *what, ncclResult_t posted, void *req) {
  if (posted != ncclSuccess) {
    st_note("%s: error %d at once", what, (int)posted);
    ST_CHECK(posted == ncclInvalidArgument, "%s: rc %d, expected %d (ncclInvalidArgument)", what, (int)posted,
             (int)ncclInvalidArgument);
    return;
  }
  ST_CHECK(req, "%s: no request and no error", what);
  ncclResult_t rc = ncclSuccess;
  int got = -1;
  enum st_wait w = st_test_wait(req, &got, RESOLVE_MS, &rc);
  ST_CHECK(w != ST_DONE, "%s: completed (%d bytes)", what, got);
  ST_CHECK(w != ST_TIMEOUT, "%s: neither an error nor a completion in %d ms", what, RESOLVE_MS);
  st_note("%s: error %d from test()", what, (int)rc);
  ST_CHECK(rc == ncclInvalidArgument, "%s: rc %d, expected %d (ncclInvalidArgument)", what, (int)rc,
           (int)ncclInvalidArgument);
}

/* A call that must return ncclInvalidArgument. */
#define EXPECT_INVALID(call, ...)                                                                     \
  do {                                                                                                \
    ncclResult_t rc_ = (call);                                                                        \
    if (rc_ != ncclInvalidArgument) {                                                                 \
      st_note(__VA_ARGS__);                                                                           \
      st_fail(__FILE__, __LINE__, "%s returned %d, expected %d (ncclInvalidArgument)", #call, (int)rc_, \
              (int)ncclInvalidArgument);                                                              \
    }                                                                                                 \
  } while (0)

static void null_and_range_args(void) {
  char buf[64];
  void *req = NULL, *data = buf, *mh = NULL, *comm = NULL;
  size_t size = sizeof buf;
  int tag = 0, ndev = 0;
  EXPECT_INVALID(st_net_isend(NULL, buf, size, 0, NULL, &req), "isend on a NULL comm");
  EXPECT_INVALID(st_net_irecv(NULL, 1, &data, &size, &tag, &mh, &req), "irecv on a NULL comm");
  ST_NCCL(st_net_devices(&ndev));
  struct st_props props;
  EXPECT_INVALID(st_net_get_properties(ndev, &props), "getProperties of device %d (of %d)", ndev, ndev);
  EXPECT_INVALID(st_net_get_properties(-1, &props), "getProperties of device -1");
  char handle[HSIZE] = {0};
  EXPECT_INVALID(st_net_listen(ndev, handle, &comm), "listen on device %d (of %d)", ndev, ndev);
  EXPECT_INVALID(st_net_connect(-1, handle, &comm), "connect on device -1");
}

#define REGISTERED 4096
#define BEYOND 8192 /* eager with the default limit, so no peer help is needed */

/* Pair A: rank 1 sends beyond its registration into a valid receive.
 * Pair B: rank 0 receives beyond its registration from a valid send. */
static int bad_args(int rank, int nranks, void *arg) {
  setup(arg);
  null_and_range_args();
  void *a = st_pair_comm(rank, 0, 1, SETUP_MS);
  void *b = st_pair_comm(rank, 0, 1, SETUP_MS);
  /* Valid memory past the registration: only a range check can tell. */
  unsigned char *buf = st_alloc(BEYOND);
  void *mh_a = NULL, *mh_b = NULL, *req = NULL, *data = buf;
  ST_NCCL(st_net_reg_mr(a, buf, rank == 1 ? REGISTERED : BEYOND, &mh_a));
  ST_NCCL(st_net_reg_mr(b, buf, rank == 0 ? REGISTERED : BEYOND, &mh_b));
  size_t size = BEYOND;
  int tag = 0;
  char token = 't';
  if (rank == 1) {
    st_pattern_fill(buf, BEYOND, 3);
    ncclResult_t rc = st_net_isend(a, buf, BEYOND, 0, mh_a, &req);
    for (int64_t end = st_now_ms() + RESOLVE_MS; rc == ncclSuccess && !req && st_now_ms() < end;)
      rc = st_net_isend(a, buf, BEYOND, 0, mh_a, &req);
    expect_request_error("isend beyond the registered region", rc, req);
    st_oob_send(0, &token, 1);
    /* A valid send on B; the receiver refuses its side, so any outcome is fine. */
    void *breq = NULL;
    st_isend_wait(b, buf, BEYOND, 0, mh_b, &breq, 3000, NULL);
    st_oob_recv(0, &token, 1, SETUP_MS);
  } else {
    /* A valid receive on A, kept moving until the sender has its answer. */
    void *areq = NULL;
    int64_t deadline = st_now_ms() + SETUP_MS + RESOLVE_MS;
    while (!st_oob_ready(1)) {
      if (!areq) ST_NCCL(st_net_irecv(a, 1, &data, &size, &tag, &mh_a, &areq));
      int done = 0;
      if (areq && (st_net_test(areq, &done, NULL) != ncclSuccess || done)) break;
      ST_CHECK(st_now_ms() < deadline, "the sender did not finish its send beyond the registration");
    }
    st_oob_recv(1, &token, 1, SETUP_MS + RESOLVE_MS);
    struct st_props props;
    ST_NCCL(st_net_get_properties(0, &props));
    int n = props.max_recvs + 1;
    void *datas[64];
    size_t sizes[64];
    int tags[64];
    void *mhs[64];
    for (int i = 0; i < n && i < 64; i++) datas[i] = buf, sizes[i] = 1, tags[i] = i, mhs[i] = mh_b;
    ST_CHECK(n <= 64, "maxRecvs %d is beyond this test", props.max_recvs);
    EXPECT_INVALID(st_net_irecv(b, n, datas, sizes, tags, mhs, &req), "irecv of %d buffers (maxRecvs %d)", n,
                   props.max_recvs);
    EXPECT_INVALID(st_net_irecv(b, 0, datas, sizes, tags, mhs, &req), "irecv of 0 buffers");
    req = NULL;
    ncclResult_t rc = st_net_irecv(b, 1, &data, &size, &tag, &mh_b, &req);
    for (int64_t end = st_now_ms() + RESOLVE_MS; rc == ncclSuccess && !req && st_now_ms() < end;)
      rc = st_net_irecv(b, 1, &data, &size, &tag, &mh_b, &req);
    expect_request_error("irecv beyond the registered region", rc, req);
    st_oob_send(1, &token, 1);
  }
  ST_NCCL(st_net_dereg_mr(a, mh_a));
  ST_NCCL(st_net_dereg_mr(b, mh_b));
  ST_NCCL(rank == 0 ? st_net_close_recv(a) : st_net_close_send(a));
  ST_NCCL(rank == 0 ? st_net_close_recv(b) : st_net_close_send(b));
  st_free(buf, BEYOND);
  ST_NCCL(st_net_finalize());
  return 0;
}

static int run(const struct st_ctx *ctx, st_rank_fn fn, int nranks) {
  char label[96];
  snprintf(label, sizeof label, "%s[%s]", ctx->test, ctx->provider);
  struct st_group_opts opts = {0}; /* the default alarm: a hang guard */
  return st_group_run(label, nranks, fn, (void *)ctx, &opts);
}

static int case_bad_handles(const struct st_ctx *ctx) { return run(ctx, bad_handles, 2); }
static int case_gone_listeners(const struct st_ctx *ctx) { return run(ctx, gone_listeners, 3); }
static int case_bad_args(const struct st_ctx *ctx) { return run(ctx, bad_args, 2); }

int main(int argc, char **argv) {
  static const struct st_case cases[] = {
      {"bad-handles", case_bad_handles},
      {"gone-listeners", case_gone_listeners},
      {"bad-args", case_bad_args},
  };
  return st_main(argc, argv, cases, 3);
}
