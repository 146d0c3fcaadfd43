/* Closing comms while requests are in flight: no crash, no hang (every
 * process is bounded by its alarm), clean under AddressSanitizer. As NCCL
 * does when it aborts, each side deregisters, closes and then frees its
 * buffers; abandoned requests are never touched again. What the peer sees is
 * exact: a receive pending when the sender closed fails with
 * ncclRemoteError within 10 s and a message that left before its sender
 * closed is still delivered intact. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srdtest.h"

#define MIB ((size_t)1 << 20)
#define SETUP_MS ST_HANG_MS
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

/* The receiver closes with two receives posted that no one will send to.
 * The sender closes too, as NCCL tears down both sides: its close answers
 * the receiver's close notice (a peer that never calls in again would keep
 * the receiver waiting NCCL_SRD_CLOSE_TIMEOUT_MS for that answer). */
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
    signal_peer(1, 'r');
    close_comm(rank, 0, comm, mh);
    signal_peer(1, 'x');
  } else {
    await_peer(0, 'r');
    close_comm(rank, 0, comm, mh);
    await_peer(0, 'x');
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

/* The sender sends eagerly, closes and goes on (here: sleeps, then exits)
 * while the receiver is slow: it posts its receive (the clear-to-send that
 * goes out reaches the sender after the sender's close) and calls in again
 * only later. When the sender's process ends with that clear-to-send
 * unread, tcp resets the connection, and the receiver's provider drops what
 * it had not read: the message, although it left before the close. So the
 * sender's close waits until the receiver says it took everything. */
#define EXIT_AFTER_MS 200
static int send_exit(int rank, int nranks, void *arg) {
  st_setup(arg, st_version(VERSION));
  void *comm = st_pair_comm(rank, 0, 1, SETUP_MS), *mh = NULL;
  unsigned char *buf = st_alloc(4096);
  ST_NCCL(st_net_reg_mr(comm, buf, 4096, &mh));
  if (rank == 1) signal_peer(0, 'c');
  else await_peer(1, 'c');
  if (rank == 1) {
    void *req = NULL;
    st_pattern_fill(buf, 1024, 5);
    ncclResult_t rc = ncclSuccess;
    enum st_wait w = st_isend_wait(comm, buf, 1024, 0, mh, &req, SETUP_MS, &rc);
    ST_CHECK(w == ST_DONE, "eager isend: %s (rc %d)", w == ST_TIMEOUT ? "never accepted" : "error", (int)rc);
    int done = 0;
    w = st_test_wait(req, &done, SETUP_MS, &rc);
    ST_CHECK(w == ST_DONE, "eager send: %s (rc %d)", w == ST_TIMEOUT ? "not done" : "error", (int)rc);
    close_comm(rank, 0, comm, mh);
    st_sleep_ms(EXIT_AFTER_MS);
  } else {
    st_sleep_ms(EXIT_AFTER_MS / 2);
    void *req = NULL, *data = buf;
    size_t size = 4096;
    int tag = 0, got = -1;
    ncclResult_t rc = ncclSuccess;
    enum st_wait w = st_irecv_wait(comm, 1, &data, &size, &tag, &mh, &req, SETUP_MS, &rc);
    ST_CHECK(w == ST_DONE, "irecv: %s (rc %d)", w == ST_TIMEOUT ? "never accepted" : "error", (int)rc);
    st_sleep_ms(3 * EXIT_AFTER_MS / 2);
    w = st_test_wait(req, &got, RESOLVE_MS, &rc);
    ST_CHECK(w == ST_DONE, "a message sent before its sender closed and exited was lost (%s, rc %d)",
             w == ST_TIMEOUT ? "no answer" : "error", (int)rc);
    ST_CHECK(got == 1024, "the receive completed reporting %d bytes, sent 1024", got);
    size_t bad = st_pattern_check(buf, 1024, 5);
    ST_CHECK(bad == SIZE_MAX, "the receive completed with a wrong byte at offset %zu", bad);
    close_comm(rank, 0, comm, mh);
  }
  st_free(buf, 4096);
  ST_NCCL(st_net_finalize());
  return 0;
}

/* A receiver that took everything and then stops calling in (busy before
 * its own teardown) cannot answer a close. The first close to it waits out
 * NCCL_SRD_CLOSE_TIMEOUT_MS; the sender's later closes to it do not wait
 * again, so a teardown of many comms costs that wait once, not per comm. */
#define QUIET_COMMS 3
#define QUIET_TIMEOUT_MS 3000
#define QUIET_TIMEOUT_TEXT "3000"
static int quiet_peer(int rank, int nranks, void *arg) {
  ST_CHECK(setenv("NCCL_SRD_CLOSE_TIMEOUT_MS", QUIET_TIMEOUT_TEXT, 1) == 0, "setenv failed");
  st_setup(arg, st_version(VERSION));
  void *comms[QUIET_COMMS];
  for (int i = 0; i < QUIET_COMMS; i++) comms[i] = st_pair_comm(rank, 0, 1, SETUP_MS);
  if (rank == 1) {
    for (int i = 0; i < QUIET_COMMS; i++) st_send_one(comms[i], 1024, 40 + (uint64_t)i, 0, SETUP_MS);
    await_peer(0, 'r');
    int64_t took[QUIET_COMMS];
    for (int i = 0; i < QUIET_COMMS; i++) {
      int64_t t0 = st_now_ms();
      ST_NCCL(st_net_close_send(comms[i]));
      took[i] = st_now_ms() - t0;
    }
    st_note("closes to a receiver that stopped calling in: %lld, %lld, %lld ms", (long long)took[0],
            (long long)took[1], (long long)took[2]);
    for (int i = 1; i < QUIET_COMMS; i++)
      ST_CHECK(took[i] < QUIET_TIMEOUT_MS / 2, "close %d to a peer that left an earlier close unanswered waited %lld ms",
               i, (long long)took[i]);
    signal_peer(0, 'x');
  } else {
    for (int i = 0; i < QUIET_COMMS; i++) st_recv_one(comms[i], 1024, 40 + (uint64_t)i, 0, SETUP_MS);
    signal_peer(1, 'r');
    await_peer(1, 'x');
    for (int i = 0; i < QUIET_COMMS; i++) ST_NCCL(st_net_close_recv(comms[i]));
  }
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
  /* NCCL's order when it aborts (sendProxyFree, recvProxyFree): deregister,
   * unmap, then close. A write the provider still holds reads or fills
   * unmapped memory: a crash (shm copies, efa reads the registration). */
  ST_NCCL(st_net_dereg_mr(comm, mh));
  st_free(buf, NREQ * MIB);
  ST_NCCL(rank == 0 ? st_net_close_recv(comm) : st_net_close_send(comm));
  ST_NCCL(st_net_finalize());
  return 0;
}

/* The receiver stops while the sender's writes into its buffers are under
 * way, then marks the whole buffer and keeps its device progressing (a
 * second comm's receive; progress lanes need nothing) until the sender's
 * sends are over and a while after: no byte may change once the call that
 * gives the buffer up returned. NCCL deregisters, frees the buffer, then
 * closes the comm (recvProxyFree), so that call is deregMr; closeRecv first
 * (the other case) must protect the buffer just as well. A write landing
 * later lands in memory NCCL has freed. */
#define LATE_NREQ 16
#define LATE_SIZE (4 * MIB)
#define LATE_MARK 0xa5
static int late_writes(int rank, void *arg, bool dereg_first) {
  st_setup(arg, st_version(VERSION));
  void *comm = st_pair_comm(rank, 0, 1, SETUP_MS), *mh = NULL;
  void *idle = st_pair_comm(rank, 0, 1, SETUP_MS); /* only to drive the receiver's progress */
  unsigned char *buf = st_alloc(LATE_NREQ * LATE_SIZE);
  ST_NCCL(st_net_reg_mr(comm, buf, LATE_NREQ * LATE_SIZE, &mh));
  void *reqs[LATE_NREQ] = {0};
  for (int j = 0; j < LATE_NREQ; j++) {
    void *data = buf + j * LATE_SIZE;
    size_t size = LATE_SIZE;
    ncclResult_t rc = ncclSuccess;
    enum st_wait w = rank == 0 ? st_irecv_wait(comm, 1, &data, &size, &j, &mh, &reqs[j], SETUP_MS, &rc)
                               : st_isend_wait(comm, data, size, j, mh, &reqs[j], SETUP_MS, &rc);
    /* The receiver may close before the last sends are posted: they fail. */
    if (rank == 1 && j > 0 && w == ST_ERROR && rc == ncclRemoteError) break;
    ST_CHECK(w == ST_DONE, "%s #%d: %s (rc %d)", rank ? "isend" : "irecv", j,
             w == ST_TIMEOUT ? "never accepted" : "error", (int)rc);
  }
  if (rank == 1) {
    signal_peer(0, 'p');
    /* Every send ends, completed or failed, once the receiver closed. */
    int64_t deadline = st_now_ms() + SETUP_MS;
    for (int left = LATE_NREQ; left > 0;) {
      ST_CHECK(st_now_ms() < deadline, "%d send(s) neither completed nor failed after the receiver closed", left);
      left = 0;
      for (int j = 0; j < LATE_NREQ; j++) {
        if (!reqs[j]) continue;
        int done = 0;
        if (st_net_test(reqs[j], &done, NULL) != ncclSuccess || done) reqs[j] = NULL;
        else left++;
      }
    }
    signal_peer(0, 'd');
    await_peer(0, 'y');
    ST_NCCL(st_net_close_send(idle));
    close_comm(rank, 0, comm, mh);
  } else {
    /* Close once the first message is in or the sender posted its sends,
     * whichever comes first: the rest is in flight. */
    int64_t deadline = st_now_ms() + SETUP_MS;
    void *first[1] = {reqs[0]};
    while (first[0] && !st_oob_ready(1)) {
      poke(first, 1);
      ST_CHECK(st_now_ms() < deadline, "the first message did not arrive");
    }
    ncclResult_t rc = ncclSuccess;
    enum st_wait w;
    int64_t t0 = st_now_ms();
    ST_NCCL(dereg_first ? st_net_dereg_mr(comm, mh) : st_net_close_recv(comm));
    int64_t closed_ms = st_now_ms() - t0;
    memset(buf, LATE_MARK, LATE_NREQ * LATE_SIZE);
    void *probe_req = NULL, *probe_mh = NULL, *probe_data = st_alloc(64);
    size_t probe_size = 64;
    int probe_tag = 0;
    ST_NCCL(st_net_reg_mr(idle, probe_data, 64, &probe_mh));
    w = st_irecv_wait(idle, 1, &probe_data, &probe_size, &probe_tag, &probe_mh, &probe_req, SETUP_MS, &rc);
    ST_CHECK(w == ST_DONE, "irecv on the second comm: %s (rc %d)", w == ST_TIMEOUT ? "never accepted" : "error",
             (int)rc);
    await_peer(1, 'p');
    int64_t quiet_until = 0;
    deadline = st_now_ms() + SETUP_MS;
    while (!quiet_until || st_now_ms() < quiet_until) {
      void *p[1] = {probe_req};
      poke(p, 1);
      ST_CHECK(p[0], "the second comm's receive ended although nothing was sent to it");
      if (!quiet_until && st_oob_ready(1)) {
        await_peer(1, 'd');
        quiet_until = st_now_ms() + 300;
      }
      ST_CHECK(st_now_ms() < deadline, "the sender did not finish its sends");
    }
    size_t bad = st_check_byte(buf, LATE_NREQ * LATE_SIZE, LATE_MARK);
    const char *call = dereg_first ? "deregMr" : "closeRecv";
    ST_CHECK(bad == SIZE_MAX, "a write landed in receive buffer %zu at offset %zu after %s returned", bad / LATE_SIZE,
             bad % LATE_SIZE, call);
    st_note("%s with writes in flight returned after %lld ms; nothing landed after it", call, (long long)closed_ms);
    signal_peer(1, 'y');
    ST_NCCL(dereg_first ? st_net_close_recv(comm) : st_net_dereg_mr(comm, mh));
    ST_NCCL(st_net_dereg_mr(idle, probe_mh));
    ST_NCCL(st_net_close_recv(idle));
    st_free(probe_data, 64);
  }
  st_free(buf, LATE_NREQ * LATE_SIZE);
  ST_NCCL(st_net_finalize());
  return 0;
}
static int close_late_writes(int rank, int nranks, void *arg) { return late_writes(rank, arg, false); }
static int dereg_late_writes(int rank, int nranks, void *arg) { return late_writes(rank, arg, true); }

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
  struct st_group_opts opts = {0}; /* the default alarm: a hang guard */
  return st_group_run(label, 2, fn, (void *)ctx, &opts);
}

static int case_recv_pending(const struct st_ctx *ctx) { return run2(ctx, recv_pending); }
static int case_send_pending(const struct st_ctx *ctx) { return run2(ctx, send_pending); }
static int case_send_exit(const struct st_ctx *ctx) { return run2(ctx, send_exit); }
static int case_quiet_peer(const struct st_ctx *ctx) { return run2(ctx, quiet_peer); }
static int case_mid_transfer(const struct st_ctx *ctx) { return run2(ctx, mid_transfer); }
static int case_peer_closed(const struct st_ctx *ctx) { return run2(ctx, peer_closed); }
static int case_close_late_writes(const struct st_ctx *ctx) { return run2(ctx, close_late_writes); }
static int case_dereg_late_writes(const struct st_ctx *ctx) { return run2(ctx, dereg_late_writes); }

int main(int argc, char **argv) {
  static const struct st_case cases[] = {
      {"close-recv-pending", case_recv_pending},
      {"close-send-pending", case_send_pending},
      {"close-send-exit", case_send_exit},
      {"close-quiet-peer", case_quiet_peer},
      {"close-mid-transfer", case_mid_transfer},
      {"close-peer-closed", case_peer_closed},
      {"close-recv-late-writes", case_close_late_writes},
      {"dereg-recv-late-writes", case_dereg_late_writes},
  };
  return st_main(argc, argv, cases, 8);
}
