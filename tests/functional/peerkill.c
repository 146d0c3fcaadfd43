/* A peer killed with SIGKILL: the survivor's pending or next request must end
 * in an error from isend/irecv/test within 10 s of the death, never a hang.
 * The victim writes 'k' on the out-of-band channel just before it kills
 * itself, which dates the death for the survivor. Cases: the sender or the
 * receiver dies mid-transfer (16 MiB messages streaming), or dies idle and
 * the survivor posts a request afterwards. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "srdtest.h"

#define MSG ((size_t)16 << 20)
#define SETUP_MS ST_HANG_MS
#define DETECT_MS 10000
#define VERSION 11

struct survivor {
  int peer;
  int64_t killed_at; /* -1 until the victim's notice arrives */
  int64_t started;
};

static void note_death(struct survivor *s) {
  if (s->killed_at >= 0 || !st_oob_ready(s->peer)) return;
  char c = 0;
  st_oob_recv(s->peer, &c, 1, SETUP_MS);
  ST_CHECK(c == 'k', "expected the death notice 'k', got '%c'", c);
  s->killed_at = st_now_ms();
}

static void check_time(struct survivor *s, int done_msgs) {
  int64_t now = st_now_ms();
  if (s->killed_at >= 0)
    ST_CHECK(now - s->killed_at <= DETECT_MS, "no error within %d ms of the peer's death (%d messages done): a hang",
             DETECT_MS, done_msgs);
  else
    ST_CHECK(now - s->started <= SETUP_MS, "the peer did not die within %d ms", SETUP_MS);
}

static void report_error(struct survivor *s, const char *what, ncclResult_t rc, int msg) {
  note_death(s);
  ST_CHECK(s->killed_at >= 0, "%s of message %d returned %d while the peer was still alive", what, msg, (int)rc);
  st_note("%s of message %d returned %d, %lld ms after the peer died", what, msg, (int)rc,
          (long long)(st_now_ms() - s->killed_at));
}

/* Stream messages from message `first` on until the plugin reports an error. */
static void survive(struct survivor *s, void *comm, int is_send, unsigned char *buf, void *mh, int first) {
  for (int i = first;; i++) {
    void *req = NULL;
    int tag = i;
    size_t size = MSG;
    if (is_send) st_pattern_fill(buf, MSG, (uint64_t)i);
    for (;;) {
      void *data = buf;
      ncclResult_t rc = is_send ? st_net_isend(comm, buf, MSG, tag, mh, &req)
                                : st_net_irecv(comm, 1, &data, &size, &tag, &mh, &req);
      if (rc != ncclSuccess) return report_error(s, is_send ? "isend" : "irecv", rc, i);
      if (req) break;
      note_death(s);
      check_time(s, i);
    }
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
        break;
      }
      note_death(s);
      check_time(s, i);
    }
  }
}

static void die(int survivor) {
  char k = 'k';
  st_oob_send(survivor, &k, 1);
  raise(SIGKILL);
}

static void message_zero(void *comm, int is_send, unsigned char *buf, void *mh) {
  void *req = NULL, *data = buf;
  int tag = 0, got = -1;
  size_t size = MSG;
  ncclResult_t rc = ncclSuccess;
  if (is_send) st_pattern_fill(buf, MSG, 0);
  enum st_wait w = is_send ? st_isend_wait(comm, buf, MSG, tag, mh, &req, SETUP_MS, &rc)
                           : st_irecv_wait(comm, 1, &data, &size, &tag, &mh, &req, SETUP_MS, &rc);
  if (w == ST_DONE) w = st_test_wait(req, &got, SETUP_MS, &rc);
  ST_CHECK(w == ST_DONE, "message 0: %s (rc %d)", w == ST_TIMEOUT ? "not done" : "error", (int)rc);
  if (is_send) return;
  ST_CHECK(got == (int)MSG, "message 0 reported %d bytes, sent %zu", got, MSG);
  size_t bad = st_pattern_check(buf, MSG, 0);
  ST_CHECK(bad == SIZE_MAX, "message 0: wrong byte at offset %zu", bad);
}

/* The victim's side: message 0 completes; with `idle`, it dies right after;
 * otherwise it posts message 1, progresses it once and dies. */
static void victim(void *comm, int is_send, unsigned char *buf, void *mh, int idle, int survivor) {
  message_zero(comm, is_send, buf, mh);
  if (idle) die(survivor);
  void *req = NULL, *data = buf;
  int tag = 1, done = 0;
  size_t size = MSG;
  ncclResult_t rc = ncclSuccess;
  if (is_send) st_pattern_fill(buf, MSG, 1);
  enum st_wait w = is_send ? st_isend_wait(comm, buf, MSG, tag, mh, &req, SETUP_MS, &rc)
                           : st_irecv_wait(comm, 1, &data, &size, &tag, &mh, &req, SETUP_MS, &rc);
  ST_CHECK(w == ST_DONE, "posting message 1: %s (rc %d)", w == ST_TIMEOUT ? "never accepted" : "error", (int)rc);
  ST_NCCL(st_net_test(req, &done, NULL));
  die(survivor);
}

struct scenario {
  const struct st_ctx *ctx;
  int victim_rank; /* rank 0 receives, rank 1 sends */
  int idle;
};

static int rank_main(int rank, int nranks, void *arg) {
  const struct scenario *sc = arg;
  st_setup(sc->ctx, st_version(VERSION));
  void *comm = st_pair_comm(rank, 0, 1, SETUP_MS), *mh = NULL;
  unsigned char *buf = st_alloc(MSG);
  ST_NCCL(st_net_reg_mr(comm, buf, MSG, &mh));
  int is_send = rank == 1;
  if (rank == sc->victim_rank) victim(comm, is_send, buf, mh, sc->idle, 1 - rank);

  struct survivor s = {.peer = 1 - rank, .killed_at = -1, .started = st_now_ms()};
  int first = 0;
  if (sc->idle) {
    /* Message 0 goes through, then the peer dies; only then post more. */
    message_zero(comm, is_send, buf, mh);
    char c = 0;
    st_oob_recv(s.peer, &c, 1, SETUP_MS);
    ST_CHECK(c == 'k', "expected the death notice 'k', got '%c'", c);
    s.killed_at = st_now_ms();
    st_sleep_ms(200);
    first = 1;
  }
  survive(&s, comm, is_send, buf, mh, first);
  /* After the error the comm must still close cleanly. */
  ST_NCCL(st_net_dereg_mr(comm, mh));
  ST_NCCL(is_send ? st_net_close_send(comm) : st_net_close_recv(comm));
  st_free(buf, MSG);
  ST_NCCL(st_net_finalize());
  return 0;
}

static int run(const struct st_ctx *ctx, int victim_rank, int idle) {
  struct scenario sc = {ctx, victim_rank, idle};
  char label[96];
  snprintf(label, sizeof label, "%s[%s]", ctx->test, ctx->provider);
  struct st_group_opts opts = {.killed_mask = 1u << victim_rank};
  return st_group_run(label, 2, rank_main, &sc, &opts);
}

static int kill_sender(const struct st_ctx *ctx) { return run(ctx, 1, 0); }
static int kill_receiver(const struct st_ctx *ctx) { return run(ctx, 0, 0); }
static int kill_idle_sender(const struct st_ctx *ctx) { return run(ctx, 1, 1); }
static int kill_idle_receiver(const struct st_ctx *ctx) { return run(ctx, 0, 1); }

int main(int argc, char **argv) {
  static const struct st_case cases[] = {
      {"kill-sender", kill_sender},
      {"kill-receiver", kill_receiver},
      {"kill-idle-sender", kill_idle_sender},
      {"kill-idle-receiver", kill_idle_receiver},
  };
  return st_main(argc, argv, cases, 4);
}
