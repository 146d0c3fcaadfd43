/* Load: 32 requests in flight on one comm (posted before any is tested), 3
 * rounds of them (inflight-32) or 64 (inflight-32x64: 2048 messages, more
 * than the receive buffers a rail's endpoints hold, however they are spread:
 * recv-refuse.sh needs every buffer to have been reposted several times), and
 * 72 comm pairs between two processes, half in each direction, with traffic
 * on every one. The 72 are set up the way NCCL does it: one thread connects
 * and accepts while another drives the data path of the comms already up, so
 * a ThreadSanitizer build sees the two meet. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "srdtest.h"

#define TIMEOUT_MS ST_HANG_MS
#define VERSION 12

/* ---------- 32 in flight ---------- */

#define INFLIGHT 32
#define SLOT ((size_t)1 << 20)
static const size_t inflight_sizes[] = {1, 4096, 8193, 65536, SLOT, 0, 300000, 17};

static size_t inflight_size(int j) { return inflight_sizes[j % (int)(sizeof inflight_sizes / sizeof inflight_sizes[0])]; }

static int inflight_rounds(int rank, void *arg, int rounds) {
  st_setup(arg, st_version(VERSION));
  void *comm = st_pair_comm(rank, 0, 1, TIMEOUT_MS), *mh = NULL;
  unsigned char *buf = st_alloc(INFLIGHT * SLOT);
  ST_NCCL(st_net_reg_mr(comm, buf, INFLIGHT * SLOT, &mh));
  for (int round = 0; round < rounds; round++) {
    void *reqs[INFLIGHT];
    for (int j = 0; j < INFLIGHT; j++) {
      unsigned char *slot = buf + j * SLOT;
      size_t size = inflight_size(j + round);
      ncclResult_t rc = ncclSuccess;
      enum st_wait w;
      if (rank == 1) {
        st_pattern_fill(slot, size, (uint64_t)(round * 100 + j));
        w = st_isend_wait(comm, slot, size, j, mh, &reqs[j], TIMEOUT_MS, &rc);
      } else {
        memset(slot, 0, SLOT);
        void *data = slot;
        size_t posted = SLOT;
        w = st_irecv_wait(comm, 1, &data, &posted, &j, &mh, &reqs[j], TIMEOUT_MS, &rc);
      }
      ST_CHECK(w == ST_DONE, "round %d: %s #%d with %d in flight: %s (rc %d)", round, rank ? "isend" : "irecv", j, j,
               w == ST_TIMEOUT ? "never accepted" : "error", (int)rc);
    }
    for (int j = 0; j < INFLIGHT; j++) {
      int got = -1;
      size_t size = inflight_size(j + round);
      ncclResult_t rc = ncclSuccess;
      enum st_wait w = st_test_wait(reqs[j], &got, TIMEOUT_MS, &rc);
      ST_CHECK(w == ST_DONE, "round %d: request #%d of %d in flight: %s (rc %d)", round, j, INFLIGHT,
               w == ST_TIMEOUT ? "not done" : "error", (int)rc);
      if (rank == 1) continue;
      ST_CHECK(got >= 0 && (size_t)got == size, "round %d: receive #%d reported %d bytes, sent %zu", round, j, got,
               size);
      size_t bad = st_pattern_check(buf + j * SLOT, size, (uint64_t)(round * 100 + j));
      ST_CHECK(bad == SIZE_MAX, "round %d: receive #%d (%zu bytes): wrong byte at offset %zu", round, j, size, bad);
    }
  }
  /* The sender stays until the receiver has everything: its sends complete
   * when the data left, and a process that exits then resets the tcp
   * connection under the receiver's last clear-to-send (what this test
   * checks is data in flight, not a peer's exit). */
  char done = 'd';
  if (rank == 0) st_oob_send(1, &done, 1);
  else st_oob_recv(0, &done, 1, TIMEOUT_MS);
  ST_NCCL(st_net_dereg_mr(comm, mh));
  ST_NCCL(rank == 0 ? st_net_close_recv(comm) : st_net_close_send(comm));
  st_free(buf, INFLIGHT * SLOT);
  ST_NCCL(st_net_finalize());
  return 0;
}

static int inflight_rank(int rank, int nranks, void *arg) {
  (void)nranks;
  return inflight_rounds(rank, arg, 3);
}

static int inflight_long_rank(int rank, int nranks, void *arg) {
  (void)nranks;
  return inflight_rounds(rank, arg, 64);
}

/* ---------- 72 comm pairs ---------- */

#define NPAIRS 72
#define NMSGS 8
#define COMM_BUF ((size_t)256 << 10)
static const size_t comm_sizes[] = {0, 1024, 65537, COMM_BUF};

struct conn {
  atomic_int ready;  /* set by the connecting thread once comm is up */
  void *comm;
  int is_send;
  /* Owned by the data thread. */
  void *mh, *req;
  unsigned char *buf;
  int msg;           /* messages finished */
  int filled;        /* the sender has written message `msg` */
};

struct comms {
  struct conn conn[NPAIRS];
};

static size_t comm_msg_size(int pair, int msg) { return comm_sizes[(pair + msg) % 4]; }
static uint64_t comm_seed(int pair, int msg) { return (uint64_t)pair * 64 + (uint64_t)msg; }

/* One step of one comm's traffic; returns 1 when the comm has sent or
 * received all its messages. */
static int comm_step(int pair, struct conn *c) {
  if (c->msg == NMSGS) return 1;
  size_t size = comm_msg_size(pair, c->msg);
  int tag = c->msg;
  if (!c->buf) {
    c->buf = st_alloc(COMM_BUF);
    ST_NCCL(st_net_reg_mr(c->comm, c->buf, COMM_BUF, &c->mh));
  }
  if (!c->req) {
    if (c->is_send) {
      if (!c->filled) st_pattern_fill(c->buf, size, comm_seed(pair, c->msg)), c->filled = 1;
      ST_NCCL(st_net_isend(c->comm, c->buf, size, tag, c->mh, &c->req));
    } else {
      void *data = c->buf;
      size_t posted = COMM_BUF;
      ST_NCCL(st_net_irecv(c->comm, 1, &data, &posted, &tag, &c->mh, &c->req));
    }
    if (!c->req) return 0;
  }
  int done = 0, got = -1;
  ncclResult_t rc = st_net_test(c->req, &done, &got);
  ST_CHECK(rc == ncclSuccess, "pair %d: message %d (%zu bytes): test() returned %d", pair, c->msg, size, (int)rc);
  if (!done) return 0;
  if (!c->is_send) {
    ST_CHECK(got >= 0 && (size_t)got == size, "pair %d: message %d reported %d bytes, sent %zu", pair, c->msg, got,
             size);
    size_t bad = st_pattern_check(c->buf, size, comm_seed(pair, c->msg));
    ST_CHECK(bad == SIZE_MAX, "pair %d: message %d (%zu bytes): wrong byte at offset %zu", pair, c->msg, size, bad);
  }
  c->req = NULL;
  c->filled = 0;
  c->msg++;
  return c->msg == NMSGS;
}

/* Bounded by what it checks, not by the machine's speed: a hang is
 * TIMEOUT_MS in which no comm came up and no message finished. */
static void *data_thread(void *arg) {
  struct comms *s = arg;
  int64_t deadline = st_now_ms() + TIMEOUT_MS;
  int finished = 0, moved = -1;
  while (finished < NPAIRS) {
    finished = 0;
    int progress = 0;
    for (int p = 0; p < NPAIRS; p++) {
      struct conn *c = &s->conn[p];
      if (!atomic_load_explicit(&c->ready, memory_order_acquire)) continue;
      finished += comm_step(p, c);
      progress += 1 + c->msg;
    }
    if (progress != moved) moved = progress, deadline = st_now_ms() + TIMEOUT_MS;
    ST_CHECK(st_now_ms() < deadline, "no comm came up or finished a message in %d ms (%d of %d comms finished)",
             TIMEOUT_MS, finished, NPAIRS);
  }
  return NULL;
}

static int comms_rank(int rank, int nranks, void *arg) {
  st_setup(arg, st_version(VERSION));
  static struct comms s;
  /* Pair p: rank p % 2 receives, the other sends. */
  char mine[NPAIRS][NCCL_NET_HANDLE_MAXSIZE], theirs[NPAIRS][NCCL_NET_HANDLE_MAXSIZE];
  void *lcomm[NPAIRS] = {0};
  memset(mine, 0, sizeof mine);
  for (int p = 0; p < NPAIRS; p++) {
    s.conn[p].is_send = p % 2 != rank;
    if (s.conn[p].is_send) continue;
    ST_NCCL(st_net_listen(0, mine[p], &lcomm[p]));
  }
  pthread_t tid;
  ST_CHECK(pthread_create(&tid, NULL, data_thread, &s) == 0, "pthread_create failed");
  st_oob_send(1 - rank, mine, sizeof mine);
  st_oob_recv(1 - rank, theirs, sizeof theirs, TIMEOUT_MS);

  int64_t deadline = st_now_ms() + TIMEOUT_MS;
  int up = 0;
  while (up < NPAIRS) {
    for (int p = 0; p < NPAIRS; p++) {
      struct conn *c = &s.conn[p];
      if (c->comm) continue;
      void *comm = NULL;
      if (c->is_send)
        ST_NCCL(st_net_connect(0, theirs[p], &comm));
      else
        ST_NCCL(st_net_accept(lcomm[p], &comm));
      if (!comm) continue;
      c->comm = comm;
      atomic_store_explicit(&c->ready, 1, memory_order_release);
      up++;
      deadline = st_now_ms() + TIMEOUT_MS;
    }
    ST_CHECK(st_now_ms() < deadline, "no comm came up in %d ms (%d of %d connected)", TIMEOUT_MS, up, NPAIRS);
  }
  for (int p = 0; p < NPAIRS; p++)
    if (lcomm[p]) ST_NCCL(st_net_close_listen(lcomm[p]));
  ST_CHECK(pthread_join(tid, NULL) == 0, "pthread_join failed");
  st_barrier(TIMEOUT_MS);
  for (int p = 0; p < NPAIRS; p++) {
    struct conn *c = &s.conn[p];
    ST_NCCL(st_net_dereg_mr(c->comm, c->mh));
    ST_NCCL(c->is_send ? st_net_close_send(c->comm) : st_net_close_recv(c->comm));
    st_free(c->buf, COMM_BUF);
  }
  ST_NCCL(st_net_finalize());
  return 0;
}

static int run2(const struct st_ctx *ctx, st_rank_fn fn) {
  char label[96];
  snprintf(label, sizeof label, "%s[%s]", ctx->test, ctx->provider);
  /* The last resort against a hang; the waits above bound what they check. */
  struct st_group_opts opts = {.timeout_s = 600};
  return st_group_run(label, 2, fn, (void *)ctx, &opts);
}

static int inflight(const struct st_ctx *ctx) { return run2(ctx, inflight_rank); }
static int inflight_long(const struct st_ctx *ctx) { return run2(ctx, inflight_long_rank); }
static int many_comms(const struct st_ctx *ctx) { return run2(ctx, comms_rank); }

int main(int argc, char **argv) {
  static const struct st_case cases[] = {
      {"inflight-32", inflight}, {"inflight-32x64", inflight_long}, {"comms-72", many_comms}};
  return st_main(argc, argv, cases, 3);
}
