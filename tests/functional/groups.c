/* Grouped receives: one irecv of n = 1..8 buffers with distinct tags; the
 * sender issues the n isends on one sendComm in another order of tags. Each
 * buffer must hold its own message, sizes[] must give each sent size, and no
 * byte past a message may change. */
#include <stdio.h>
#include <string.h>

#include "srdtest.h"

#define MAX_N 8
#define SLOT ((size_t)1280 << 10) /* largest message (1 MiB + 100) plus a guard */
#define POISON 0x5A
#define TIMEOUT_MS ST_HANG_MS
#define VERSION 9

/* Message sizes cycle through the eager and the clear-to-send paths, 0 included. */
static const size_t size_cycle[] = {0, 1, 4095, 8192, 65537, 1 << 20, 3, 300000};

struct group {
  int n;
  size_t sent[MAX_N], posted[MAX_N];
  int tags[MAX_N];
  int order[MAX_N]; /* the order the sender issues buffers in */
};

/* Round r: n buffers; receive i is posted 100 bytes larger than its message
 * when i is odd; the sender goes backwards, or rotated by n/2. */
static void describe_round(int round, struct group *g) {
  g->n = round < MAX_N ? round + 1 : 2 * MAX_N - round;
  for (int i = 0; i < g->n; i++) {
    g->sent[i] = size_cycle[(size_t)(i + round) % (sizeof size_cycle / sizeof size_cycle[0])];
    g->posted[i] = g->sent[i] + (i % 2 ? 100 : 0);
    g->tags[i] = 1000 * round + 7 * i + 1;
    g->order[i] = round % 2 ? g->n - 1 - i : (i + g->n / 2) % g->n;
  }
}

#define NROUNDS (2 * MAX_N)

static void sender(void *comm) {
  unsigned char *buf = st_alloc(MAX_N * SLOT);
  void *mh = NULL;
  ST_NCCL(st_net_reg_mr(comm, buf, MAX_N * SLOT, &mh));
  for (int round = 0; round < NROUNDS; round++) {
    struct group g;
    describe_round(round, &g);
    void *reqs[MAX_N] = {0};
    for (int k = 0; k < g.n; k++) {
      int i = g.order[k];
      st_pattern_fill(buf + i * SLOT, g.sent[i], (uint64_t)g.tags[i]);
      ncclResult_t rc = ncclSuccess;
      enum st_wait w = st_isend_wait(comm, buf + i * SLOT, g.sent[i], g.tags[i], mh, &reqs[i], TIMEOUT_MS, &rc);
      ST_CHECK(w == ST_DONE, "round %d: isend of tag %d (%zu bytes): %s (rc %d)", round, g.tags[i], g.sent[i],
               w == ST_TIMEOUT ? "never accepted" : "error", (int)rc);
    }
    for (int i = 0; i < g.n; i++) {
      ncclResult_t rc = ncclSuccess;
      enum st_wait w = st_test_wait(reqs[i], NULL, TIMEOUT_MS, &rc);
      ST_CHECK(w == ST_DONE, "round %d: send of tag %d: %s (rc %d)", round, g.tags[i],
               w == ST_TIMEOUT ? "not done" : "error", (int)rc);
    }
  }
  ST_NCCL(st_net_dereg_mr(comm, mh));
  st_free(buf, MAX_N * SLOT);
}

static void receiver(void *comm) {
  struct st_props props;
  ST_NCCL(st_net_get_properties(0, &props));
  ST_CHECK(props.max_recvs >= MAX_N, "maxRecvs is %d; grouped receives need %d", props.max_recvs, MAX_N);
  unsigned char *buf = st_alloc(MAX_N * SLOT);
  void *mh = NULL;
  ST_NCCL(st_net_reg_mr(comm, buf, MAX_N * SLOT, &mh));
  for (int round = 0; round < NROUNDS; round++) {
    struct group g;
    describe_round(round, &g);
    void *data[MAX_N], *mhs[MAX_N], *req = NULL;
    memset(buf, POISON, MAX_N * SLOT);
    for (int i = 0; i < g.n; i++) data[i] = buf + i * SLOT, mhs[i] = mh;
    ncclResult_t rc = ncclSuccess;
    enum st_wait w = st_irecv_wait(comm, g.n, data, g.posted, g.tags, mhs, &req, TIMEOUT_MS, &rc);
    ST_CHECK(w == ST_DONE, "round %d: irecv of %d buffers: %s (rc %d)", round, g.n,
             w == ST_TIMEOUT ? "never accepted" : "error", (int)rc);
    int got[MAX_N];
    for (int i = 0; i < MAX_N; i++) got[i] = -1;
    w = st_test_wait(req, got, TIMEOUT_MS, &rc);
    ST_CHECK(w == ST_DONE, "round %d: grouped receive of %d: %s (rc %d)", round, g.n,
             w == ST_TIMEOUT ? "not done" : "error", (int)rc);
    for (int i = 0; i < g.n; i++) {
      ST_CHECK(got[i] >= 0 && (size_t)got[i] == g.sent[i], "round %d (n=%d): buffer %d (tag %d) reported %d bytes, sent %zu",
               round, g.n, i, g.tags[i], got[i], g.sent[i]);
      size_t bad = st_pattern_check(data[i], g.sent[i], (uint64_t)g.tags[i]);
      ST_CHECK(bad == SIZE_MAX, "round %d (n=%d): buffer %d (tag %d, %zu bytes): wrong byte at offset %zu", round, g.n,
               i, g.tags[i], g.sent[i], bad);
    }
    for (int i = 0; i < MAX_N; i++) {
      size_t used = i < g.n ? g.sent[i] : 0;
      size_t bad = st_check_byte(buf + i * SLOT + used, SLOT - used, POISON);
      ST_CHECK(bad == SIZE_MAX, "round %d (n=%d): slot %d written at offset %zu, past its %zu-byte message", round, g.n,
               i, used + bad, used);
    }
  }
  ST_NCCL(st_net_dereg_mr(comm, mh));
  st_free(buf, MAX_N * SLOT);
}

static int rank_main(int rank, int nranks, void *arg) {
  st_setup(arg, st_version(VERSION));
  void *comm = st_pair_comm(rank, 0, 1, TIMEOUT_MS);
  if (rank == 0) {
    receiver(comm);
    ST_NCCL(st_net_close_recv(comm));
  } else {
    sender(comm);
    ST_NCCL(st_net_close_send(comm));
  }
  ST_NCCL(st_net_finalize());
  return 0;
}

static int grouped(const struct st_ctx *ctx) {
  char label[96];
  snprintf(label, sizeof label, "%s[%s]", ctx->test, ctx->provider);
  struct st_group_opts opts = {0}; /* the default alarm: a hang guard */
  return st_group_run(label, 2, rank_main, (void *)ctx, &opts);
}

int main(int argc, char **argv) {
  static const struct st_case cases[] = {{"grouped-recv", grouped}};
  return st_main(argc, argv, cases, 1);
}
