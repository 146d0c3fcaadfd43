/* A rail dies mid-transfer: the receiver (rank 0) and the sender (rank 1)
 * stream 16 MiB messages, striped over every rail; after CUT_AFTER verified
 * messages the receiver tells the sender on the out-of-band channel and runs
 * $SRD_RAILDOWN_CUT (tests/netns/multirail.sh sets it to `netns.sh cut 2`,
 * which downs one veth of the pair). Each side must then see an error from
 * isend/irecv/test within DETECT_MS of the cut: not a hang, and no message
 * may complete with wrong bytes or a wrong size. Each side reports which call
 * failed, with what, and how long after the cut. Without $SRD_RAILDOWN_CUT
 * (no namespaces to cut a rail in) the program skips. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srdtest.h"

#define MSG ((size_t)16 << 20)
#define CUT_AFTER 4
#define SETUP_MS ST_HANG_MS
#define DETECT_MS 30000
#define VERSION 11
#define SKIP 77

struct side {
  int peer;
  int64_t cut_at; /* -1 until the rail is cut (receiver) or the notice arrives (sender) */
  int64_t started;
  int after_cut; /* messages completed after the cut */
};

static void note_cut(struct side *s) {
  if (s->cut_at >= 0 || !st_oob_ready(s->peer)) return;
  char c = 0;
  st_oob_recv(s->peer, &c, 1, SETUP_MS);
  ST_CHECK(c == 'c', "expected the cut notice 'c', got '%c'", c);
  s->cut_at = st_now_ms();
}

/* The notice goes out before the cut, so the sender knows of it before it can
 * see an error; the cut is dated from the start of the command. */
static void cut_rail(struct side *s, const char *cmd) {
  char c = 'c';
  st_oob_send(s->peer, &c, 1);
  s->cut_at = st_now_ms();
  int rc = system(cmd);
  ST_CHECK(rc == 0, "'%s' failed (status %d)", cmd, rc);
  st_note("rail cut by '%s' (took %lld ms), %lld ms after the comm was set up", cmd,
          (long long)(st_now_ms() - s->cut_at), (long long)(s->cut_at - s->started));
}

static void check_time(struct side *s, int msg) {
  int64_t now = st_now_ms();
  if (s->cut_at >= 0)
    ST_CHECK(now - s->cut_at <= DETECT_MS,
             "no error within %d ms of the cut (%d messages completed after it, stuck in message %d): a hang",
             DETECT_MS, s->after_cut, msg);
  else
    ST_CHECK(now - s->started <= SETUP_MS, "message %d not done within %d ms and the rail is not cut yet", msg,
             SETUP_MS);
}

static void report_error(struct side *s, const char *what, ncclResult_t rc, int msg) {
  note_cut(s);
  ST_CHECK(s->cut_at >= 0, "%s of message %d returned %d before the rail was cut", what, msg, (int)rc);
  st_note("%s of message %d returned %d, %lld ms after the cut (%d messages completed after the cut)", what, msg,
          (int)rc, (long long)(st_now_ms() - s->cut_at), s->after_cut);
}

/* Stream messages until the plugin reports an error; the receiver cuts the
 * rail once it has posted message CUT_AFTER. */
static void stream(struct side *s, void *comm, int is_send, unsigned char *buf, void *mh, const char *cut_cmd) {
  for (int i = 0;; i++) {
    void *req = NULL;
    int tag = i;
    size_t size = MSG;
    if (is_send) st_pattern_fill(buf, MSG, (uint64_t)i);
    else memset(buf, 0, MSG);
    for (;;) {
      void *data = buf;
      ncclResult_t rc = is_send ? st_net_isend(comm, buf, MSG, tag, mh, &req)
                                : st_net_irecv(comm, 1, &data, &size, &tag, &mh, &req);
      if (rc != ncclSuccess) return report_error(s, is_send ? "isend" : "irecv", rc, i);
      if (req) break;
      note_cut(s);
      check_time(s, i);
    }
    /* Cut while message CUT_AFTER is posted and the sender streams into it. */
    if (!is_send && i == CUT_AFTER) cut_rail(s, cut_cmd);
    for (;;) {
      int done = 0, got = -1;
      ncclResult_t rc = st_net_test(req, &done, &got);
      if (rc != ncclSuccess) return report_error(s, "test", rc, i);
      if (done) {
        if (!is_send) {
          ST_CHECK(got == (int)MSG, "message %d reported %d bytes, sent %zu", i, got, MSG);
          size_t bad = st_pattern_check(buf, MSG, (uint64_t)i);
          ST_CHECK(bad == SIZE_MAX, "message %d: wrong byte at offset %zu", i, bad);
        }
        if (s->cut_at >= 0) s->after_cut++;
        break;
      }
      note_cut(s);
      check_time(s, i);
    }
  }
}

static int rank_main(int rank, int nranks, void *arg) {
  (void)nranks;
  const char *cut_cmd = getenv("SRD_RAILDOWN_CUT");
  st_setup(arg, st_version(VERSION));
  void *comm = st_pair_comm(rank, 0, 1, SETUP_MS), *mh = NULL;
  unsigned char *buf = st_alloc(MSG);
  ST_NCCL(st_net_reg_mr(comm, buf, MSG, &mh));
  struct side s = {.peer = 1 - rank, .cut_at = -1, .started = st_now_ms()};
  stream(&s, comm, rank == 1, buf, mh, cut_cmd);
  /* After the error the comm must still close, in bounded time. */
  int64_t t0 = st_now_ms();
  ST_NCCL(st_net_dereg_mr(comm, mh));
  ST_NCCL(rank == 1 ? st_net_close_send(comm) : st_net_close_recv(comm));
  st_note("closed in %lld ms", (long long)(st_now_ms() - t0));
  st_free(buf, MSG);
  ST_NCCL(st_net_finalize());
  return 0;
}

static int raildown(const struct st_ctx *ctx) {
  char label[96];
  snprintf(label, sizeof label, "%s[%s]", ctx->test, ctx->provider);
  struct st_group_opts opts = {0}; /* the default alarm: a hang guard */
  return st_group_run(label, 2, rank_main, (void *)ctx, &opts);
}

int main(int argc, char **argv) {
  const char *cut_cmd = getenv("SRD_RAILDOWN_CUT");
  if (!cut_cmd || !*cut_cmd) {
    fprintf(stderr, "raildown: SKIP: set SRD_RAILDOWN_CUT to a command that cuts one rail (tests/netns/multirail.sh)\n");
    return SKIP;
  }
  static const struct st_case cases[] = {{"raildown", raildown}};
  return st_main(argc, argv, cases, 1);
}
