/* A slow peer is not a dead peer. Two processes stream messages over 64
 * comms in each direction; once a quarter of rank 0's messages are done,
 * rank 0 stops rank 1 (SIGSTOP) and continues it (SIGCONT) after STOP_MS,
 * progressing its own side meanwhile, so its posts meet a provider that
 * refuses them (try later) and peers that say nothing. Every message must
 * then complete with the right bytes, and rank 0's log must show the
 * slow-peer warning and no failed comm. Case stop-hog runs the same with a
 * busy process pinned to rank 1's CPU throughout.
 *
 * The timers that run during a transfer are NCCL_SRD_KEEPALIVE_MS (probes of
 * silent peers), NCCL_SRD_SILENT_WARN_MS (the warning) and, before this
 * rule, 4 x NCCL_SRD_KEEPALIVE_MS of refused probes, which failed comms: the
 * stop lasts three times the longest of them.
 *
 * Case run-ahead: a receiver that posts no receive for a while, its device
 * progressing meanwhile, while the sender streams small (eager) messages:
 * the sender must wait, not flood it (the receiver keeps early eager data
 * only up to a bound and fails a comm that passes it), and every message
 * arrives once the receives come. */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "srdtest.h"

#define NCOMMS 64 /* per direction */
#define NMSGS 4
#define WINDOW 2
#define MSG ((size_t)256 << 10)
#define KEEPALIVE_MS 100
#define SILENT_WARN_MS 500
#define REFUSAL_WINDOW_MS (4 * KEEPALIVE_MS)
#define STOP_MS (3 * (REFUSAL_WINDOW_MS > SILENT_WARN_MS ? REFUSAL_WINDOW_MS : SILENT_WARN_MS))
#define TIMEOUT_MS (60000 + STOP_MS)
#define VERSION 12

#define STR_(x) #x
#define STR(x) STR_(x)

struct conn {
  void *comm, *mh;
  void *req[WINDOW]; /* message m in req[m % WINDOW] */
  unsigned char *buf; /* WINDOW slots of MSG bytes */
  int is_send;
  int posted, done; /* messages posted, finished (in order) */
};

static struct conn conns[2 * NCOMMS]; /* [0, NCOMMS): send comms */

static uint64_t seed(int rank_sending, int comm, int msg) {
  return (uint64_t)rank_sending << 32 | (uint64_t)comm << 8 | (uint64_t)msg;
}

/* One step of comm i's traffic (up to WINDOW messages in flight, so that
 * writes queue up at a stopped peer); returns 1 when it has finished. */
static int step(int rank, int i) {
  struct conn *c = &conns[i];
  int k = i % NCOMMS;
  if (c->posted < NMSGS && c->posted - c->done < WINDOW) {
    int m = c->posted, tag = m;
    unsigned char *slot = c->buf + (size_t)(m % WINDOW) * MSG;
    void **req = &c->req[m % WINDOW];
    if (c->is_send) {
      st_pattern_fill(slot, MSG, seed(rank, k, m));
      ST_NCCL(st_net_isend(c->comm, slot, MSG, tag, c->mh, req));
    } else {
      void *data = slot;
      size_t posted = MSG;
      ST_NCCL(st_net_irecv(c->comm, 1, &data, &posted, &tag, &c->mh, req));
    }
    if (*req) c->posted++;
  }
  if (c->done == c->posted) return c->done == NMSGS;
  int m = c->done, finished = 0, got = -1;
  ncclResult_t rc = st_net_test(c->req[m % WINDOW], &finished, &got);
  ST_CHECK(rc == ncclSuccess, "%s comm %d: message %d: test() returned %d", c->is_send ? "send" : "recv", k, m,
           (int)rc);
  if (!finished) return 0;
  if (!c->is_send) {
    ST_CHECK(got == (int)MSG, "recv comm %d: message %d reported %d bytes, sent %zu", k, m, got, MSG);
    size_t bad = st_pattern_check(c->buf + (size_t)(m % WINDOW) * MSG, MSG, seed(1 - rank, k, m));
    ST_CHECK(bad == SIZE_MAX, "recv comm %d: message %d: wrong byte at offset %zu", k, m, bad);
  }
  c->req[m % WINDOW] = NULL;
  c->done++;
  return c->done == NMSGS;
}

/* Comm k of each direction: rank 0's send comm k connects to rank 1's
 * listener k, and the other way round. */
static void connect_all(int rank) {
  static char mine[NCOMMS][NCCL_NET_HANDLE_MAXSIZE], theirs[NCOMMS][NCCL_NET_HANDLE_MAXSIZE];
  void *lcomm[NCOMMS];
  for (int k = 0; k < NCOMMS; k++) ST_NCCL(st_net_listen(0, mine[k], &lcomm[k]));
  st_oob_send(1 - rank, mine, sizeof mine);
  st_oob_recv(1 - rank, theirs, sizeof theirs, TIMEOUT_MS);
  for (int k = 0; k < NCOMMS; k++) {
    struct conn *s = &conns[k], *r = &conns[NCOMMS + k];
    st_connect_accept(0, theirs[k], &s->comm, lcomm[k], &r->comm, TIMEOUT_MS);
    ST_NCCL(st_net_close_listen(lcomm[k]));
    s->is_send = 1;
    for (struct conn *c = s; c; c = c == s ? r : NULL) {
      c->buf = st_alloc(WINDOW * MSG);
      ST_NCCL(st_net_reg_mr(c->comm, c->buf, WINDOW * MSG, &c->mh));
    }
  }
}

/* A process that only burns the CPU rank 1 runs on; it dies with its parent
 * and, whatever happens, after the test's bound. */
static pid_t start_hog(void) {
  cpu_set_t set;
  ST_CHECK(sched_getaffinity(0, sizeof set, &set) == 0, "sched_getaffinity failed");
  int cpu = 0;
  while (!CPU_ISSET(cpu, &set)) cpu++;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  ST_CHECK(sched_setaffinity(0, sizeof set, &set) == 0, "pinning to CPU %d failed", cpu);
  pid_t pid = fork();
  ST_CHECK(pid >= 0, "fork failed");
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    alarm(600);
    for (volatile unsigned long n = 0;; n++) {
    }
  }
  st_note("a busy process pinned to CPU %d beside rank 1", cpu);
  return pid;
}

/* Stop the peer for STOP_MS from a process of its own, which continues it
 * whatever becomes of the caller. */
static pid_t stop_peer(pid_t peer) {
  pid_t pid = fork();
  ST_CHECK(pid >= 0, "fork failed");
  if (pid) return pid;
  int rc = kill(peer, SIGSTOP);
  st_sleep_ms(STOP_MS);
  kill(peer, SIGCONT);
  _exit(rc ? 1 : 0);
}

struct scenario {
  const struct st_ctx *ctx;
  int hog;
};

#define AHEAD_MSGS 4096 /* four times what a receiver keeps before its receives */
#define AHEAD_SIZE 1024 /* eager everywhere */
#define AHEAD_WINDOW 8
#define AHEAD_PAUSE_MS 1000

/* Rank 1 sends AHEAD_MSGS messages as fast as the plugin takes them, with at
 * most NCCL_NET_MAX_REQUESTS unfinished as NCCL keeps (on efa a send finishes
 * only once the peer's device took it), then one on a second comm; rank 0 waits on that second comm alone for
 * AHEAD_PAUSE_MS (its calls progress the device, which reads what arrives)
 * before it posts the data receives. */
static int run_ahead_main(int rank, int nranks, void *arg) {
  (void)nranks;
  const struct scenario *sc = arg;
  st_setup(sc->ctx, st_version(VERSION));
  void *data_comm = st_pair_comm(rank, 0, 1, TIMEOUT_MS), *end_comm = st_pair_comm(rank, 0, 1, TIMEOUT_MS), *mh, *emh;
  size_t len = (size_t)AHEAD_MSGS * AHEAD_SIZE;
  unsigned char *buf = st_alloc(len), end_byte = 0;
  ST_NCCL(st_net_reg_mr(data_comm, buf, len, &mh));
  ST_NCCL(st_net_reg_mr(end_comm, &end_byte, 1, &emh));
  void *req[AHEAD_MSGS] = {0}, *end_req = NULL;
  int posted = 0, done = 0, tag = 7, got = -1, end_done = 0;
  ncclResult_t rc;
  if (rank == 0) {
    void *ebuf = &end_byte;
    size_t esize = 1;
    ST_CHECK(st_irecv_wait(end_comm, 1, &ebuf, &esize, &tag, &emh, &end_req, TIMEOUT_MS, &rc) == ST_DONE,
             "posting the end receive failed (%d)", (int)rc);
    int64_t resume = st_now_ms() + AHEAD_PAUSE_MS;
    while (st_now_ms() < resume)
      if (!end_done) ST_NCCL(st_net_test(end_req, &end_done, NULL)); /* a sender that never waits is done */
  } else {
    for (int m = 0; m < AHEAD_MSGS; m++) st_pattern_fill(buf + (size_t)m * AHEAD_SIZE, AHEAD_SIZE, seed(1, 0, m));
  }
  int64_t deadline = st_now_ms() + TIMEOUT_MS;
  while (done < AHEAD_MSGS) {
    void **r = &req[posted];
    unsigned char *slot = buf + (size_t)posted * AHEAD_SIZE;
    if (posted < AHEAD_MSGS && posted - done < (rank == 1 ? NCCL_NET_MAX_REQUESTS : AHEAD_WINDOW)) {
      if (rank == 1) {
        ST_NCCL(st_net_isend(data_comm, slot, AHEAD_SIZE, tag, mh, r));
      } else {
        void *d = slot;
        size_t size = AHEAD_SIZE;
        ST_NCCL(st_net_irecv(data_comm, 1, &d, &size, &tag, &mh, r));
      }
      if (*r) posted++;
    }
    int finished = 0;
    if (done < posted) {
      rc = st_net_test(req[done], &finished, &got);
      ST_CHECK(rc == ncclSuccess, "message %d: test() returned %d", done, (int)rc);
    }
    if (finished && rank == 0) {
      size_t bad = st_pattern_check(buf + (size_t)done * AHEAD_SIZE, AHEAD_SIZE, seed(1, 0, done));
      ST_CHECK(got == AHEAD_SIZE && bad == SIZE_MAX, "message %d: %d bytes, wrong byte at %zu", done, got, bad);
    }
    if (finished) done++, deadline = st_now_ms() + TIMEOUT_MS;
    ST_CHECK(st_now_ms() < deadline, "no message finished in %d ms (%d of %d done, %d posted)", TIMEOUT_MS, done,
             AHEAD_MSGS, posted);
  }
  if (rank == 1) ST_CHECK(st_isend_wait(end_comm, &end_byte, 1, tag, emh, &end_req, TIMEOUT_MS, &rc) == ST_DONE,
                          "the end message was not taken (%d)", (int)rc);
  if (!end_done)
    ST_CHECK(st_test_wait(end_req, NULL, TIMEOUT_MS, &rc) == ST_DONE, "the end message did not complete (%d)", (int)rc);
  ST_CHECK(st_log_count("failed") == 0 && st_log_count("flood") == 0, "a failure was logged");
  st_note("%d messages of %d bytes, every one right", AHEAD_MSGS, AHEAD_SIZE);
  st_barrier(TIMEOUT_MS);
  ST_NCCL(st_net_dereg_mr(data_comm, mh));
  ST_NCCL(st_net_dereg_mr(end_comm, emh));
  ST_NCCL(rank == 1 ? st_net_close_send(data_comm) : st_net_close_recv(data_comm));
  ST_NCCL(rank == 1 ? st_net_close_send(end_comm) : st_net_close_recv(end_comm));
  st_free(buf, len);
  ST_NCCL(st_net_finalize());
  return 0;
}

static int rank_main(int rank, int nranks, void *arg) {
  (void)nranks;
  const struct scenario *sc = arg;
  ST_CHECK(setenv("NCCL_SRD_KEEPALIVE_MS", STR(KEEPALIVE_MS), 1) == 0, "setenv failed");
  ST_CHECK(setenv("NCCL_SRD_SILENT_WARN_MS", STR(SILENT_WARN_MS), 1) == 0, "setenv failed");
  st_setup(sc->ctx, st_version(VERSION));
  pid_t hog = rank == 1 && sc->hog ? start_hog() : 0;
  pid_t peer = 0, me = getpid();
  if (rank == 1) st_oob_send(0, &me, sizeof me);
  else st_oob_recv(1, &peer, sizeof peer, TIMEOUT_MS);
  connect_all(rank);

  /* Bounded by what it checks, not by the machine's speed: a hang is
   * TIMEOUT_MS (STOP_MS and a minute) in which no message finished. */
  int64_t deadline = st_now_ms() + TIMEOUT_MS, stopped_at = 0, continued_at = 0;
  int moved = -1;
  pid_t stopper = 0;
  int finished = 0, status = 0;
  while (finished < 2 * NCOMMS) {
    finished = 0;
    int msgs = 0;
    for (int i = 0; i < 2 * NCOMMS; i++) {
      finished += step(rank, i);
      msgs += conns[i].done;
    }
    int64_t now = st_now_ms();
    if (rank == 0 && !stopped_at && msgs >= 2 * NCOMMS * NMSGS / 4) {
      stopper = stop_peer(peer);
      stopped_at = now;
      st_note("stopping rank 1 for %d ms with %d of %d messages done", STOP_MS, msgs, 2 * NCOMMS * NMSGS);
    }
    if (stopper && !continued_at && waitpid(stopper, &status, WNOHANG) == stopper) {
      ST_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "stopping rank 1 failed");
      continued_at = now;
      st_note("rank 1 continued after %lld ms", (long long)(now - stopped_at));
    }
    if (msgs != moved) moved = msgs, deadline = now + TIMEOUT_MS;
    ST_CHECK(now < deadline, "no message finished in %d ms (%d of %d comms finished)", TIMEOUT_MS, finished,
             2 * NCOMMS);
  }
  if (stopper && !continued_at) {
    ST_CHECK(waitpid(stopper, &status, 0) == stopper && WIFEXITED(status) && WEXITSTATUS(status) == 0,
             "stopping rank 1 failed");
    st_note("rank 1 continued; every message was done %lld ms after the stop", (long long)(st_now_ms() - stopped_at));
  }
  if (rank == 0) {
    ST_CHECK(stopped_at, "rank 1 was never stopped");
    ST_CHECK(st_log_count("still waiting") > 0, "no slow-peer warning while rank 1 was stopped");
    ST_CHECK(st_log_count("peer gone") == 0 && st_log_count("failed") == 0, "a failure was logged");
    st_note("every message completed; %d slow-peer warning(s)", st_log_count("still waiting"));
  }
  /* Both sides have everything before either closes. */
  st_barrier(TIMEOUT_MS);
  for (int i = 0; i < 2 * NCOMMS; i++) {
    struct conn *c = &conns[i];
    ST_NCCL(st_net_dereg_mr(c->comm, c->mh));
    ST_NCCL(c->is_send ? st_net_close_send(c->comm) : st_net_close_recv(c->comm));
    st_free(c->buf, WINDOW * MSG);
  }
  ST_NCCL(st_net_finalize());
  if (hog) {
    kill(hog, SIGKILL);
    waitpid(hog, NULL, 0);
  }
  return 0;
}

static int run(const struct st_ctx *ctx, int hog, int (*main_fn)(int, int, void *)) {
  struct scenario sc = {ctx, hog};
  char label[96];
  snprintf(label, sizeof label, "%s[%s]", ctx->test, ctx->provider);
  struct st_group_opts opts = {.timeout_s = 600}; /* the last resort against a hang */
  return st_group_run(label, 2, main_fn, &sc, &opts);
}

static int stop(const struct st_ctx *ctx) { return run(ctx, 0, rank_main); }
static int stop_hog(const struct st_ctx *ctx) { return run(ctx, 1, rank_main); }
static int run_ahead(const struct st_ctx *ctx) { return run(ctx, 0, run_ahead_main); }

int main(int argc, char **argv) {
  static const struct st_case cases[] = {{"stop", stop}, {"stop-hog", stop_hog}, {"run-ahead", run_ahead}};
  return st_main(argc, argv, cases, 3);
}
