/* Message sizes from 0 bytes to 64 MiB, verified byte for byte; each size is
 * received once into a buffer of exactly its size and, all but the largest,
 * once more into a buffer larger than 64 MiB (test() must report the size
 * sent, to the sender too); nothing past the sent bytes may be written. ABI
 * v11, v8 (int sizes) up to 16 MiB, and v9, v10, v12 up to 1 MiB (eager and
 * written, sizes-abi). sizes-striped: v11 again with 1 rail of 4 endpoints
 * and stripes from 16 KiB of 4 KiB, so that every message of 16 KiB or more
 * is split into 4 writes. Run with NCCL_SRD_TEST_REORDER=1 too (reorder.sh). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "srdtest.h"

#define MIB ((size_t)1 << 20)
#define GUARD ((size_t)64 << 10)
#define POISON 0xA5
#define TIMEOUT_MS ST_HANG_MS

static const size_t sizes[] = {0, 1, 3, 4095, 8192, 65536, 65537, MIB, 16 * MIB, 64 * MIB};
#define NSIZES (sizeof sizes / sizeof sizes[0])
#define MAX_SIZE (64 * MIB)
/* The larger receive: more than the biggest send. */
#define BIG_POST (MAX_SIZE + 4096)

struct run {
  const struct st_ctx *ctx;
  int version;
  size_t nsizes; /* how many of sizes[] this run sends */
  int striped;
};

/* Transfer i: sizes[i] into an exact receive for i < n, then sizes[i - n]
 * into the large receive; the largest size only goes into an exact one. */
static size_t transfers(size_t n) { return 2 * n - 1; }
static size_t transfer_size(size_t n, size_t i) { return i < n ? sizes[i] : sizes[i - n]; }

static void sender(void *comm, size_t n) {
  void *buf = st_alloc(MAX_SIZE), *mh = NULL;
  ST_NCCL(st_net_reg_mr(comm, buf, MAX_SIZE, &mh));
  for (size_t i = 0; i < transfers(n); i++) {
    size_t size = transfer_size(n, i);
    st_pattern_fill(buf, size, 1000 + i);
    void *req = NULL;
    ncclResult_t rc = ncclSuccess;
    enum st_wait w = st_isend_wait(comm, buf, size, (int)i, mh, &req, TIMEOUT_MS, &rc);
    ST_CHECK(w == ST_DONE, "isend #%zu of %zu bytes: %s (rc %d)", i, size, w == ST_TIMEOUT ? "never accepted" : "error",
             (int)rc);
    int got = -1;
    w = st_test_wait(req, &got, TIMEOUT_MS, &rc);
    ST_CHECK(w == ST_DONE, "send #%zu of %zu bytes: %s (rc %d)", i, size, w == ST_TIMEOUT ? "not done" : "error",
             (int)rc);
    ST_CHECK(got >= 0 && (size_t)got == size, "send #%zu of %zu bytes: test() reported %d", i, size, got);
  }
  ST_NCCL(st_net_dereg_mr(comm, mh));
  st_free(buf, MAX_SIZE);
}

static void receiver(void *comm, size_t n) {
  size_t len = BIG_POST + GUARD;
  unsigned char *buf = st_alloc(len);
  void *mh = NULL;
  /* One registration of the whole buffer, guard included, as NCCL does: an
   * overrun would land in registered memory and be seen. */
  ST_NCCL(st_net_reg_mr(comm, buf, len, &mh));
  /* Poisoned whole once; after each check (which found the rest still
   * poisoned) only the message's bytes are poisoned again. */
  memset(buf, POISON, len);
  for (size_t i = 0; i < transfers(n); i++) {
    size_t size = transfer_size(n, i);
    size_t posted = i < n ? size : BIG_POST;
    void *req = NULL, *data = buf;
    int tag = (int)i;
    ncclResult_t rc = ncclSuccess;
    enum st_wait w = st_irecv_wait(comm, 1, &data, &posted, &tag, &mh, &req, TIMEOUT_MS, &rc);
    ST_CHECK(w == ST_DONE, "irecv #%zu (%zu posted): %s (rc %d)", i, posted, w == ST_TIMEOUT ? "never accepted" : "error",
             (int)rc);
    int got = -1;
    w = st_test_wait(req, &got, TIMEOUT_MS, &rc);
    ST_CHECK(w == ST_DONE, "recv #%zu of %zu bytes (%zu posted): %s (rc %d)", i, size, posted,
             w == ST_TIMEOUT ? "not done" : "error", (int)rc);
    ST_CHECK(got >= 0 && (size_t)got == size, "recv #%zu of %zu bytes (%zu posted): test() reported %d", i, size,
             posted, got);
    size_t bad = st_pattern_check(buf, size, 1000 + i);
    ST_CHECK(bad == SIZE_MAX, "recv #%zu of %zu bytes (%zu posted): wrong byte at offset %zu", i, size, posted, bad);
    bad = st_check_byte(buf + size, posted + GUARD - size, POISON);
    ST_CHECK(bad == SIZE_MAX, "recv #%zu of %zu bytes (%zu posted): byte %zu past the message was written", i, size,
             posted, size + bad);
    memset(buf, POISON, size);
  }
  ST_NCCL(st_net_dereg_mr(comm, mh));
  st_free(buf, len);
}

static int rank_main(int rank, int nranks, void *arg) {
  const struct run *run = arg;
  if (run->striped)
    ST_CHECK(setenv("NCCL_SRD_RAILS", "1", 1) == 0 && setenv("NCCL_SRD_EPS_PER_RAIL", "4", 1) == 0 &&
                 setenv("NCCL_SRD_STRIPE_THRESHOLD", "16K", 1) == 0 && setenv("NCCL_SRD_MIN_STRIPE", "4K", 1) == 0,
             "setenv failed");
  st_setup(run->ctx, run->version);
  void *comm = st_pair_comm(rank, 0, 1, TIMEOUT_MS);
  if (rank == 0) {
    receiver(comm, run->nsizes);
    ST_NCCL(st_net_close_recv(comm));
  } else {
    sender(comm, run->nsizes);
    ST_NCCL(st_net_close_send(comm));
  }
  ST_NCCL(st_net_finalize());
  return 0;
}

static int run_version(const struct st_ctx *ctx, int version, size_t nsizes, int striped) {
  struct run run = {ctx, st_version(version), nsizes, striped};
  char label[96];
  snprintf(label, sizeof label, "%s[%s] v%d", ctx->test, ctx->provider, run.version);
  struct st_group_opts opts = {0}; /* the default alarm: a hang guard */
  return st_group_run(label, 2, rank_main, &run, &opts);
}

/* max-p2p: the largest message getProperties offers NCCL (maxP2pBytes, v9+)
 * arrives whole, byte for byte, with its size in test() on both sides; one
 * byte more fails the send with an error and writes nothing into the
 * receiver's buffer. max-p2p-striped: the same over 4 endpoints. */
static size_t max_p2p_bytes(void) {
  struct st_props p;
  ST_NCCL(st_net_get_properties(0, &p));
  ST_CHECK(p.max_p2p_bytes > 0, "getProperties reported maxP2pBytes 0");
  st_note("maxP2pBytes %zu", p.max_p2p_bytes);
  return p.max_p2p_bytes;
}

static void max_p2p_sender(void *comm) {
  size_t max = max_p2p_bytes();
  char *buf = st_alloc(max + 1);
  void *mh = NULL, *req = NULL;
  ST_NCCL(st_net_reg_mr(comm, buf, max + 1, &mh));
  st_pattern_fill(buf, max + 1, 7);
  ncclResult_t rc = ncclSuccess;
  ST_CHECK(st_isend_wait(comm, buf, max, 0, mh, &req, TIMEOUT_MS, &rc) == ST_DONE, "isend of maxP2pBytes: rc %d",
           (int)rc);
  int got = -1;
  ST_CHECK(st_test_wait(req, &got, TIMEOUT_MS, &rc) == ST_DONE, "send of maxP2pBytes (%zu): rc %d", max, (int)rc);
  ST_CHECK(got >= 0 && (size_t)got == (max > INT_MAX ? INT_MAX : max), "send of %zu bytes: test() reported %d", max,
           got);
  enum st_wait w = st_isend_wait(comm, buf, max + 1, 1, mh, &req, TIMEOUT_MS, &rc);
  if (w == ST_DONE) w = st_test_wait(req, NULL, TIMEOUT_MS, &rc);
  ST_CHECK(w == ST_ERROR && rc != ncclSuccess, "a send of maxP2pBytes + 1 (%zu) was %s", max + 1,
           w == ST_DONE ? "sent" : "neither sent nor refused");
  ST_CHECK(st_warn_count() > 0, "the refused send of %zu bytes logged no warning", max + 1);
  st_oob_send(0, &rc, sizeof rc);
  ST_NCCL(st_net_dereg_mr(comm, mh));
  st_free(buf, max + 1);
}

static void max_p2p_receiver(void *comm) {
  size_t max = max_p2p_bytes(), len = max + 1 + GUARD;
  unsigned char *buf = st_alloc(len);
  void *mh = NULL, *req = NULL, *data = buf;
  ST_NCCL(st_net_reg_mr(comm, buf, len, &mh));
  int tag = 0, got = -1;
  ncclResult_t rc = ncclSuccess;
  ST_CHECK(st_irecv_wait(comm, 1, &data, &max, &tag, &mh, &req, TIMEOUT_MS, &rc) == ST_DONE, "irecv: rc %d", (int)rc);
  ST_CHECK(st_test_wait(req, &got, TIMEOUT_MS, &rc) == ST_DONE, "recv of maxP2pBytes (%zu): rc %d", max, (int)rc);
  ST_CHECK(got >= 0 && (size_t)got == (max > INT_MAX ? INT_MAX : max), "recv of %zu bytes: test() reported %d", max,
           got);
  size_t bad = st_pattern_check(buf, max, 7);
  ST_CHECK(bad == SIZE_MAX, "recv of maxP2pBytes (%zu): wrong byte at offset %zu", max, bad);
  memset(buf, POISON, len);
  size_t over = max + 1;
  tag = 1;
  ST_CHECK(st_irecv_wait(comm, 1, &data, &over, &tag, &mh, &req, TIMEOUT_MS, &rc) == ST_DONE, "irecv: rc %d",
           (int)rc);
  /* Keep testing the receive while the sender decides, as NCCL's proxy
   * does: on tcp;ofi_rxm the receive's notice leaves only while this
   * process progresses. */
  int done = 0;
  int64_t t0 = st_now_ms();
  rc = ncclSuccess;
  while (!st_oob_ready(1) && st_now_ms() - t0 < TIMEOUT_MS) {
    if (!done && rc == ncclSuccess) rc = st_net_test(req, &done, &got);
    usleep(100);
  }
  ncclResult_t sender_rc;
  st_oob_recv(1, &sender_rc, sizeof sender_rc, TIMEOUT_MS);
  if (!done && rc == ncclSuccess) rc = st_net_test(req, &done, &got);
  ST_CHECK(!(done && rc == ncclSuccess), "a receive of maxP2pBytes + 1 (%zu) completed with success (%d bytes)", over,
           got);
  bad = st_check_byte(buf, len, POISON);
  ST_CHECK(bad == SIZE_MAX, "the refused send of %zu bytes wrote byte %zu", over, bad);
  ST_NCCL(st_net_dereg_mr(comm, mh));
  st_free(buf, len);
}

static int max_p2p_main(int rank, int nranks, void *arg) {
  (void)nranks;
  const struct run *run = arg;
  if (run->striped)
    ST_CHECK(setenv("NCCL_SRD_EPS_PER_RAIL", "4", 1) == 0, "setenv failed");
  st_setup(run->ctx, run->version);
  void *comm = st_pair_comm(rank, 0, 1, TIMEOUT_MS);
  if (rank == 0) {
    max_p2p_receiver(comm);
    ST_NCCL(st_net_close_recv(comm));
  } else {
    max_p2p_sender(comm);
    st_net_close_send(comm); /* failed by the refused send: the code is not this test's */
  }
  ST_NCCL(st_net_finalize());
  return 0;
}

static int run_max_p2p(const struct st_ctx *ctx, int striped) {
  struct run run = {ctx, st_version(11), 0, striped};
  if (run.version < 9) return st_skip(ctx, "ABI v8 has no maxP2pBytes");
  char label[96];
  snprintf(label, sizeof label, "%s[%s] v%d", ctx->test, ctx->provider, run.version);
  struct st_group_opts opts = {0};
  return st_group_run(label, 2, max_p2p_main, &run, &opts);
}

static int max_p2p(const struct st_ctx *ctx) { return run_max_p2p(ctx, 0); }
static int max_p2p_striped(const struct st_ctx *ctx) { return run_max_p2p(ctx, 1); }

static int sizes_abi(const struct st_ctx *ctx) {
  int failed = 0;
  for (int v = 9; v <= 12; v++)
    if (v != 11) failed |= run_version(ctx, v, NSIZES - 2, 0);
  return failed;
}
static int sizes_v11(const struct st_ctx *ctx) { return run_version(ctx, 11, NSIZES, 0); }
static int sizes_v8(const struct st_ctx *ctx) { return run_version(ctx, 8, NSIZES - 1, 0); }
static int sizes_striped(const struct st_ctx *ctx) { return run_version(ctx, 11, NSIZES, 1); }

int main(int argc, char **argv) {
  static const struct st_case cases[] = {{"sizes", sizes_v11},
                                         {"sizes-v8", sizes_v8},
                                         {"sizes-abi", sizes_abi},
                                         {"sizes-striped", sizes_striped},
                                         {"max-p2p", max_p2p},
                                         {"max-p2p-striped", max_p2p_striped}};
  return st_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
