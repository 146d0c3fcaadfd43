/* Closing comms while requests are in flight: no crash, no hang (every
 * process is bounded by its alarm), clean under AddressSanitizer. As NCCL
 * does when it aborts, each side deregisters, closes and then frees its
 * buffers; abandoned requests are never touched again. What the peer sees is
 * exact: a receive pending when the sender closed fails with
 * ncclRemoteError within 10 s and a message that left before its sender
 * closed is still delivered intact. */
#include <stdio.h>
#include <string.h>

#include "srdtest.h"

#define MIB ((size_t)1 << 20)
#define SETUP_MS 30000
#define RESOLVE_MS 10000
#define VERSION 11

static void close_comm(int rank, int receiver, void *comm, void *mh) {
  ST_NCCL(st_net_dereg_mr(comm, mh));
  ST_NCCL(rank == receiver ? st_net_close_recv(comm) : st_net_close_send(comm));
}

static void signal_peer(int peer, char what) { st_oob_send(peer, &what, 1); }

static void await_peer(int peer, char what) {
  char got = 0;
  st_oob_recv(peer, &got, 1, SETUP_MS);
  ST_CHECK(got == what, "expected '%c' from rank %d, got '%c'", what, peer, got);
}

/* Test each request once: progress without waiting (some may be NULL). */
static void poke(void **reqs, int n) {
  for (int i = 0; i < n; i++) {
    if (!reqs[i]) continue;
    int done = 0;
    if (st_net_test(reqs[i], &done, NULL) != ncclSuccess || done) reqs[i] = NULL;
  }
}

/* The receiver closes with two receives posted that no one will send to. */
static int recv_pending(int rank, int nranks, void *arg) {
  st_setup(arg, st_version(VERSION));
  void *comm = st_pair_comm(rank, 0, 1, SETUP_MS), *mh = NULL;
  unsigned char *buf = st_alloc(2 * MIB);
  ST_NCCL(st_net_reg_mr(comm, buf, 2 * MIB, &mh));
  /* The receiver's side of a pair is up as soon as it answered; it closes
   * only once the sender has the answer too (else the sender's connect fails
   * against a peer that left, which is not what this case is about). */
  if (rank == 1) signal_peer(0, 'c');
  else await_peer(1, 'c');
  if (rank == 0) {
    void *reqs[2], *data[2] = {buf, buf + MIB};
    size_t sizes[2] = {MIB, 1024};
    int tags[2] = {0, 1};
    for (int i = 0; i < 2; i++) {
      ncclResult_t rc = ncclSuccess;
      enum st_wait w = st_irecv_wait(comm, 1, &data[i], &sizes[i], &tags[i], &mh, &reqs[i], SETUP_MS, &rc);
      ST_CHECK(w == ST_DONE, "irecv %d: %s (rc %d)", i, w == ST_TIMEOUT ? "never accepted" : "error", (int)rc);
    }
    poke(reqs, 2);
    close_comm(rank, 0, comm, mh);
    signal_peer(1, 'x');
  } else {
    await_peer(0, 'x');
    close_comm(rank, 0, comm, mh);
  }
  st_free(buf, 2 * MIB);
  ST_NCCL(st_net_finalize());
  return 0;
}

/* The sender closes with an eager send (and a large one that waits for a
 * clear-to-send) pending; the receiver then posts for the eager one: it left
 * before the close, so it completes with the right bytes within 10 s. */
static int send_pending(int rank, int nranks, void *arg) {
  st_setup(arg, st_version(VERSION));
  void *comm = st_pair_comm(rank, 0, 1, SETUP_MS), *mh = NULL;
  unsigned char *buf = st_alloc(17 * MIB);
  ST_NCCL(st_net_reg_mr(comm, buf, 17 * MIB, &mh));
  if (rank == 1) {
    void *reqs[2] = {0};
    st_pattern_fill(buf, 1024, 7);
    ncclResult_t rc = ncclSuccess;
    enum st_wait w = st_isend_wait(comm, buf, 1024, 0, mh, &reqs[0], SETUP_MS, &rc);
    ST_CHECK(w == ST_DONE, "eager isend: %s (rc %d)", w == ST_TIMEOUT ? "never accepted" : "error", (int)rc);
    ST_NCCL(st_net_isend(comm, buf + MIB, 16 * MIB, 1, mh, &reqs[1]));
    close_comm(rank, 0, comm, mh);
    signal_peer(0, 'x');
    /* The process stays until the receiver is done: a process that exits
     * resets its tcp connections, and the kernel then drops what the peer had
     * not read yet (what this case checks is the close, not an exit). */
    await_peer(0, 'd');
  } else {
    await_peer(1, 'x');
    void *req = NULL, *data = buf;
    size_t size = 1024;
    int tag = 0, got = -1;
    ncclResult_t rc = ncclSuccess;
    int64_t t0 = st_now_ms();
    enum st_wait w = st_irecv_wait(comm, 1, &data, &size, &tag, &mh, &req, RESOLVE_MS, &rc);
    if (w == ST_DONE) w = st_test_wait(req, &got, RESOLVE_MS, &rc);
    ST_CHECK(w != ST_TIMEOUT, "a receive for a send whose comm was closed did not resolve in %d ms", RESOLVE_MS);
    ST_CHECK(w == ST_DONE, "the receive of an eager message sent before its sender closed failed (rc %d)", (int)rc);
    ST_CHECK(got == 1024, "the receive completed reporting %d bytes, sent 1024", got);
    size_t bad = st_pattern_check(buf, 1024, 7);
    ST_CHECK(bad == SIZE_MAX, "the receive completed with a wrong byte at offset %zu", bad);
    st_note("receive after the sender closed: %s (rc %d) after %lld ms", w == ST_DONE ? "completed" : "error",
            (int)rc, (long long)(st_now_ms() - t0));
    close_comm(rank, 0, comm, mh);
    signal_peer(1, 'd');
  }
  st_free(buf, 17 * MIB);
  ST_NCCL(st_net_finalize());
  return 0;
}

/* Both sides close with 32 one-MiB transfers under way. */
#define NREQ 32
static int mid_transfer(int rank, int nranks, void *arg) {
  st_setup(arg, st_version(VERSION));
  void *comm = st_pair_comm(rank, 0, 1, SETUP_MS), *mh = NULL;
  unsigned char *buf = st_alloc(NREQ * MIB);
  ST_NCCL(st_net_reg_mr(comm, buf, NREQ * MIB, &mh));
  void *reqs[NREQ] = {0};
  for (int j = 0; j < NREQ; j++) {
    void *data = buf + j * MIB;
    size_t size = MIB;
    ncclResult_t rc = ncclSuccess;
    enum st_wait w = rank == 0 ? st_irecv_wait(comm, 1, &data, &size, &j, &mh, &reqs[j], SETUP_MS, &rc)
                               : st_isend_wait(comm, data, size, j, mh, &reqs[j], SETUP_MS, &rc);
    ST_CHECK(w == ST_DONE, "%s #%d: %s (rc %d)", rank ? "isend" : "irecv", j,
             w == ST_TIMEOUT ? "never accepted" : "error", (int)rc);
  }
  if (rank == 1) {
    poke(reqs, NREQ);
    signal_peer(0, 'x');
  } else {
    /* Keep the receives moving until the sender has posted all of its own. */
    int64_t deadline = st_now_ms() + SETUP_MS;
    while (!st_oob_ready(1)) {
      poke(reqs, NREQ);
      ST_CHECK(st_now_ms() < deadline, "the sender did not post its sends");
    }
    await_peer(1, 'x');
  }
  close_comm(rank, 0, comm, mh);
  st_free(buf, NREQ * MIB);
  ST_NCCL(st_net_finalize());
  return 0;
}

/* The sender sends one message and closes; the receiver's second receive
 * must fail within 10 s instead of waiting forever. The sender's process
 * stays until then: only the close notice can tell the receiver, not a
 * vanished peer. */
static int peer_closed(int rank, int nranks, void *arg) {
  st_setup(arg, st_version(VERSION));
  void *comm = st_pair_comm(rank, 0, 1, SETUP_MS), *mh = NULL;
  unsigned char *buf = st_alloc(2 * MIB);
  ST_NCCL(st_net_reg_mr(comm, buf, 2 * MIB, &mh));
  if (rank == 1) {
    void *req = NULL;
    st_pattern_fill(buf, MIB, 11);
    ncclResult_t rc = ncclSuccess;
    enum st_wait w = st_isend_wait(comm, buf, MIB, 0, mh, &req, SETUP_MS, &rc);
    if (w == ST_DONE) w = st_test_wait(req, NULL, SETUP_MS, &rc);
    ST_CHECK(w == ST_DONE, "send: %s (rc %d)", w == ST_TIMEOUT ? "not done" : "error", (int)rc);
    close_comm(rank, 0, comm, mh);
    signal_peer(0, 'x');
    await_peer(0, 'y');
  } else {
    void *reqs[2], *data[2] = {buf, buf + MIB};
    size_t sizes[2] = {MIB, MIB};
    int tags[2] = {0, 1}, got = -1;
    for (int i = 0; i < 2; i++) {
      ncclResult_t rc = ncclSuccess;
      enum st_wait w = st_irecv_wait(comm, 1, &data[i], &sizes[i], &tags[i], &mh, &reqs[i], SETUP_MS, &rc);
      ST_CHECK(w == ST_DONE, "irecv %d: %s (rc %d)", i, w == ST_TIMEOUT ? "never accepted" : "error", (int)rc);
    }
    ncclResult_t rc = ncclSuccess;
    enum st_wait w = st_test_wait(reqs[0], &got, SETUP_MS, &rc);
    ST_CHECK(w == ST_DONE && got == (int)MIB, "first receive: %s (rc %d, %d bytes)",
             w == ST_TIMEOUT ? "not done" : w == ST_ERROR ? "error" : "wrong size", (int)rc, got);
    size_t bad = st_pattern_check(buf, MIB, 11);
    ST_CHECK(bad == SIZE_MAX, "first receive: wrong byte at offset %zu", bad);
    await_peer(1, 'x');
    int64_t t0 = st_now_ms();
    w = st_test_wait(reqs[1], &got, RESOLVE_MS, &rc);
    ST_CHECK(w != ST_TIMEOUT, "a receive pending when the sender closed its comm did not fail within %d ms",
             RESOLVE_MS);
    ST_CHECK(w == ST_ERROR, "a receive no one sent to completed (%d bytes) after the sender closed", got);
    ST_CHECK(rc == ncclRemoteError, "a receive pending when the sender closed failed with rc %d, expected %d", (int)rc,
             (int)ncclRemoteError);
    st_note("pending receive failed %lld ms after the sender closed (rc %d)", (long long)(st_now_ms() - t0), (int)rc);
    signal_peer(1, 'y');
    close_comm(rank, 0, comm, mh);
  }
  st_free(buf, 2 * MIB);
  ST_NCCL(st_net_finalize());
  return 0;
}

static int run2(const struct st_ctx *ctx, st_rank_fn fn) {
  char label[96];
  snprintf(label, sizeof label, "%s[%s]", ctx->test, ctx->provider);
  struct st_group_opts opts = {.timeout_s = 60};
  return st_group_run(label, 2, fn, (void *)ctx, &opts);
}

static int case_recv_pending(const struct st_ctx *ctx) { return run2(ctx, recv_pending); }
static int case_send_pending(const struct st_ctx *ctx) { return run2(ctx, send_pending); }
static int case_mid_transfer(const struct st_ctx *ctx) { return run2(ctx, mid_transfer); }
static int case_peer_closed(const struct st_ctx *ctx) { return run2(ctx, peer_closed); }

int main(int argc, char **argv) {
  static const struct st_case cases[] = {
      {"close-recv-pending", case_recv_pending},
      {"close-send-pending", case_send_pending},
      {"close-mid-transfer", case_mid_transfer},
      {"close-peer-closed", case_peer_closed},
  };
  return st_main(argc, argv, cases, 4);
}
