/* connect/accept in every order NCCL may use them: connect polled for a
 * while before anyone accepts; accept polled before anyone connects; and both
 * ranks connecting to each other at once (each is sender and receiver); connect
 * polled for 2 s first, its hello sent again meanwhile, still one comm. Both
 * calls are non-blocking: success with a NULL comm means "call again". Every
 * comm then carries a small and a large message. */
#include <stdio.h>
#include <string.h>

#include "srdtest.h"

#define TIMEOUT_MS ST_HANG_MS
#define EARLY_MS 300 /* how long one side polls before the other starts */
#define LONG_EARLY_MS 2000 /* connect-long: an unanswered hello is sent again meanwhile (at 250, 750, 1750 ms) */

static int connect_early_ms = EARLY_MS; /* connect_first's head start: set before the ranks fork */
#define VERSION 11

static void traffic(void *comm, int sending, uint64_t seed) {
  static const size_t sizes[] = {1024, 1 << 20};
  for (int i = 0; i < 2; i++) {
    if (sending)
      st_send_one(comm, sizes[i], seed + (uint64_t)i, i, TIMEOUT_MS);
    else
      st_recv_one(comm, sizes[i], seed + (uint64_t)i, i, TIMEOUT_MS);
  }
}

/* Rank 1 polls connect for connect_early_ms (it may or may not get a comm
 * before the accept), then tells rank 0 to start accepting. The hello and
 * its copies (sent again while unanswered) make one comm: accept finds no
 * second one. */
static int connect_first(int rank, int nranks, void *arg) {
  st_setup(arg, st_version(VERSION));
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {0}, go = 'a';
  void *comm = NULL;
  ncclResult_t rc = ncclSuccess;
  if (rank == 0) {
    void *lcomm = NULL;
    ST_NCCL(st_net_listen(0, handle, &lcomm));
    st_oob_send(1, handle, sizeof handle);
    st_oob_recv(1, &go, 1, TIMEOUT_MS);
    enum st_wait w = st_accept_wait(lcomm, &comm, TIMEOUT_MS, &rc);
    ST_CHECK(w == ST_DONE, "accept: %s (rc %d)", w == ST_TIMEOUT ? "no comm" : "error", (int)rc);
    void *extra = NULL;
    for (int64_t end = st_now_ms() + 500; st_now_ms() < end && !extra;) ST_NCCL(st_net_accept(lcomm, &extra));
    ST_CHECK(!extra, "accept gave a second comm for one connect (a resent hello taken as a new one)");
    ST_NCCL(st_net_close_listen(lcomm));
    traffic(comm, 0, 10);
    ST_NCCL(st_net_close_recv(comm));
  } else {
    st_oob_recv(0, handle, sizeof handle, TIMEOUT_MS);
    int calls = 0;
    for (int64_t end = st_now_ms() + connect_early_ms; st_now_ms() < end && !comm; calls++)
      ST_NCCL(st_net_connect(0, handle, &comm));
    st_note("connect called %d times before the accept began: %s", calls, comm ? "comm ready" : "still pending");
    st_oob_send(0, &go, 1);
    if (!comm) {
      enum st_wait w = st_connect_wait(0, handle, &comm, TIMEOUT_MS, &rc);
      ST_CHECK(w == ST_DONE, "connect: %s (rc %d)", w == ST_TIMEOUT ? "no comm" : "error", (int)rc);
    }
    traffic(comm, 1, 10);
    ST_NCCL(st_net_close_send(comm));
  }
  ST_NCCL(st_net_finalize());
  return 0;
}

/* Rank 0 polls accept for EARLY_MS (no comm may appear: nobody connected),
 * then hands out the handle while it keeps polling. */
static int accept_first(int rank, int nranks, void *arg) {
  st_setup(arg, st_version(VERSION));
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {0};
  void *comm = NULL;
  ncclResult_t rc = ncclSuccess;
  if (rank == 0) {
    void *lcomm = NULL;
    ST_NCCL(st_net_listen(0, handle, &lcomm));
    for (int64_t end = st_now_ms() + EARLY_MS; st_now_ms() < end;) {
      ST_NCCL(st_net_accept(lcomm, &comm));
      ST_CHECK(!comm, "accept returned a comm before anyone connected");
    }
    st_oob_send(1, handle, sizeof handle);
    enum st_wait w = st_accept_wait(lcomm, &comm, TIMEOUT_MS, &rc);
    ST_CHECK(w == ST_DONE, "accept: %s (rc %d)", w == ST_TIMEOUT ? "no comm" : "error", (int)rc);
    ST_NCCL(st_net_close_listen(lcomm));
    traffic(comm, 0, 20);
    ST_NCCL(st_net_close_recv(comm));
  } else {
    st_oob_recv(0, handle, sizeof handle, TIMEOUT_MS);
    enum st_wait w = st_connect_wait(0, handle, &comm, TIMEOUT_MS, &rc);
    ST_CHECK(w == ST_DONE, "connect: %s (rc %d)", w == ST_TIMEOUT ? "no comm" : "error", (int)rc);
    traffic(comm, 1, 20);
    ST_NCCL(st_net_close_send(comm));
  }
  ST_NCCL(st_net_finalize());
  return 0;
}

/* Both ranks listen, swap handles and connect to each other at once; rank 0
 * sends first, then rank 1. */
static int both_ways(int rank, int nranks, void *arg) {
  st_setup(arg, st_version(VERSION));
  char mine[NCCL_NET_HANDLE_MAXSIZE] = {0}, theirs[NCCL_NET_HANDLE_MAXSIZE];
  void *lcomm = NULL, *send_comm = NULL, *recv_comm = NULL;
  ST_NCCL(st_net_listen(0, mine, &lcomm));
  st_oob_send(1 - rank, mine, sizeof mine);
  st_oob_recv(1 - rank, theirs, sizeof theirs, TIMEOUT_MS);
  st_connect_accept(0, theirs, &send_comm, lcomm, &recv_comm, TIMEOUT_MS);
  ST_NCCL(st_net_close_listen(lcomm));
  for (int turn = 0; turn < 2; turn++) {
    if (turn == rank)
      traffic(send_comm, 1, 30 + (uint64_t)turn * 10);
    else
      traffic(recv_comm, 0, 30 + (uint64_t)turn * 10);
  }
  ST_NCCL(st_net_close_send(send_comm));
  ST_NCCL(st_net_close_recv(recv_comm));
  ST_NCCL(st_net_finalize());
  return 0;
}

static int run2(const struct st_ctx *ctx, st_rank_fn fn) {
  char label[96];
  snprintf(label, sizeof label, "%s[%s]", ctx->test, ctx->provider);
  struct st_group_opts opts = {0}; /* the default alarm: a hang guard */
  return st_group_run(label, 2, fn, (void *)ctx, &opts);
}

static int case_connect_first(const struct st_ctx *ctx) { return run2(ctx, connect_first); }
static int case_connect_long(const struct st_ctx *ctx) {
  connect_early_ms = LONG_EARLY_MS;
  int rc = run2(ctx, connect_first);
  connect_early_ms = EARLY_MS;
  return rc;
}
static int case_accept_first(const struct st_ctx *ctx) { return run2(ctx, accept_first); }
static int case_both_ways(const struct st_ctx *ctx) { return run2(ctx, both_ways); }

int main(int argc, char **argv) {
  static const struct st_case cases[] = {
      {"connect-first", case_connect_first},
      {"accept-first", case_accept_first},
      {"both-ways", case_both_ways},
      {"connect-long", case_connect_long},
  };
  return st_main(argc, argv, cases, 4);
}
