/* Truncation: a send larger than the posted receive. The receive fails with
 * ncclInvalidUsage and no byte of its buffer (nor of a guard after it, inside
 * the same registration) is written. The send fails with ncclInvalidUsage
 * when it went through the clear-to-send (the sender saw the buffer's size);
 * an eager send (up to NCCL_SRD_EAGER_MAX, 8192 here) has left before the
 * sender could know and succeeds. Both sides resolve within 10 s. Each case
 * uses a fresh comm pair, since a comm that saw an error may fail from then
 * on. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srdtest.h"

#define POSTED 4096
#define GUARD ((size_t)2 << 20) /* more than the largest send, so any overrun lands in it */
#define POISON 0xC3
#define RESOLVE_MS 10000
#define SETUP_MS ST_HANG_MS
#define VERSION 10

/* Sizes over the posted 4 KiB: eager (just over, and at the eager
 * limit) and through the clear-to-send path. */
static const size_t send_sizes[] = {POSTED + 1, 8192, 1 << 20};
#define EAGER_MAX 8192
#define NCASES (sizeof send_sizes / sizeof send_sizes[0])

enum outcome { OUT_SUCCESS, OUT_ERROR, OUT_TIMEOUT };
static const char *outcome_name[] = {"success", "error", "no answer within 10 s"};

static enum outcome from_wait(enum st_wait w) { return w == ST_DONE ? OUT_SUCCESS : w == ST_ERROR ? OUT_ERROR : OUT_TIMEOUT; }

static enum outcome send_case(void *comm, unsigned char *buf, void *mh, size_t size, int tag, ncclResult_t *rc) {
  void *req = NULL;
  int64_t deadline = st_now_ms() + RESOLVE_MS;
  enum st_wait w = st_isend_wait(comm, buf, size, tag, mh, &req, RESOLVE_MS, rc);
  if (w != ST_DONE) return from_wait(w);
  int left = (int)(deadline - st_now_ms());
  return from_wait(st_test_wait(req, NULL, left > 0 ? left : 1, rc));
}

static enum outcome recv_case(void *comm, unsigned char *buf, void *mh, int tag, int *got, ncclResult_t *rc) {
  void *req = NULL, *data = buf;
  size_t posted = POSTED;
  int64_t deadline = st_now_ms() + RESOLVE_MS;
  enum st_wait w = st_irecv_wait(comm, 1, &data, &posted, &tag, &mh, &req, RESOLVE_MS, rc);
  if (w != ST_DONE) return from_wait(w);
  int left = (int)(deadline - st_now_ms());
  return from_wait(st_test_wait(req, got, left > 0 ? left : 1, rc));
}

struct side {
  enum outcome out;
  ncclResult_t rc;
};

/* What `who` must see for a send of `size` bytes into the 4 KiB receive. */
static int expect(const char *who, size_t size, struct side got, struct side want) {
  if (got.out == want.out && (got.out == OUT_SUCCESS || got.rc == want.rc)) return 0;
  st_note("FAIL %zu bytes into %d: the %s got %s (rc %d), expected %s (rc %d)", size, POSTED, who,
          outcome_name[got.out], (int)got.rc, outcome_name[want.out], (int)want.rc);
  return 1;
}

static int rank_main(int rank, int nranks, void *arg) {
  /* The threshold above the eager size: with progress threads (threads.sh)
   * a message of the threshold or more goes to them, not eagerly. */
  ST_CHECK(setenv("NCCL_SRD_EAGER_MAX", "8192", 1) == 0 && setenv("NCCL_SRD_STRIPE_THRESHOLD", "16K", 1) == 0,
           "setenv failed");
  st_setup(arg, st_version(VERSION));
  size_t len = POSTED + GUARD;
  unsigned char *buf = st_alloc(len);
  int failed = 0;
  for (size_t c = 0; c < NCASES; c++) {
    size_t size = send_sizes[c];
    void *comm = st_pair_comm(rank, 0, 1, SETUP_MS), *mh = NULL;
    ST_NCCL(st_net_reg_mr(comm, buf, len, &mh));
    struct side mine = {OUT_TIMEOUT, ncclSuccess}, peer;
    int got = -1;
    if (rank == 0) {
      memset(buf, POISON, len);
      mine.out = recv_case(comm, buf, mh, (int)c, &got, &mine.rc);
    } else {
      st_pattern_fill(buf, size, c);
      mine.out = send_case(comm, buf, mh, size, (int)c, &mine.rc);
    }
    st_oob_send(1 - rank, &mine, sizeof mine);
    st_oob_recv(1 - rank, &peer, sizeof peer, 2 * RESOLVE_MS);
    st_note("%zu bytes into %d: %s: %s (rc %d), peer: %s (rc %d)", size, POSTED, rank == 0 ? "receiver" : "sender",
            outcome_name[mine.out], (int)mine.rc, outcome_name[peer.out], (int)peer.rc);
    if (rank == 0) {
      struct side refused = {OUT_ERROR, ncclInvalidUsage}, sent = {OUT_SUCCESS, ncclSuccess};
      failed |= expect("receiver", size, mine, refused);
      failed |= expect("sender", size, peer, size <= EAGER_MAX ? sent : refused);
      size_t bad = st_check_byte(buf, POSTED + GUARD, POISON);
      if (bad != SIZE_MAX) {
        st_note("FAIL %zu bytes into %d: byte %zu of the buffer%s was written (test() reported %d bytes)", size,
                POSTED, bad, bad >= POSTED ? " (past its end)" : "", got);
        failed = 1;
      }
    }
    ST_NCCL(st_net_dereg_mr(comm, mh));
    ST_NCCL(rank == 0 ? st_net_close_recv(comm) : st_net_close_send(comm));
    st_barrier(SETUP_MS);
  }
  st_free(buf, len);
  ST_NCCL(st_net_finalize());
  return failed;
}

static int truncation(const struct st_ctx *ctx) {
  char label[96];
  snprintf(label, sizeof label, "%s[%s]", ctx->test, ctx->provider);
  struct st_group_opts opts = {0}; /* the default alarm: a hang guard */
  return st_group_run(label, 2, rank_main, (void *)ctx, &opts);
}

int main(int argc, char **argv) {
  static const struct st_case cases[] = {{"truncation", truncation}};
  return st_main(argc, argv, cases, 1);
}
