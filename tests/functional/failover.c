/* Rail failover between two namespaces joined by 4 veth rails
 * (tests/netns/failover.sh sets SRD_FAILOVER_NETNS to netns.sh): the receiver
 * (rank 0) and the sender (rank 1) stream 64 MiB messages striped over every
 * rail, the receiver checks every byte, and the receiver cuts rails
 * (`netns.sh cut K`).
 *
 *   cut-one  cut rail 2 while a message is in flight, keep streaming (every
 *            message complete and right), mend it, stream until both sides
 *            settled (rejoined, or stays out because writes were cut off on
 *            it: their bytes land when the link returns), then a few more
 *            messages, still right. Bandwidth before the cut, after it and
 *            after the mend is printed.
 *   cut-idle the same with rail 2 cut between two messages (nothing in
 *            flight): it must rejoin on both sides and carry data again
 *            (its byte count grows).
 *   cut-all  cut rails 1, 2, 3 one after another (still right), then rail
 *            0: both sides must see an error within FAIL_MS of that cut, and
 *            the plugin's error must name the rails.
 *
 * Without SRD_FAILOVER_NETNS the program skips. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srdtest.h"

#define MSG ((size_t)64 << 20)
#define SETUP_MS ST_HANG_MS
#define MSG_MS ST_HANG_MS /* one message, however loaded the machine */
#define FAIL_MS 1000   /* every comm fails within this of losing its last rail */
#define REJOIN_MS 60000 /* 20 attempts of hold-down (NCCL_SRD_RAIL_HOLDDOWN_MS, 1 s) and probe round (2 s) */
#define CUT_EVERY 4
#define AFTER_REJOIN 4
#define VERSION 11
#define SKIP 77

enum { ONE, IDLE, ALL };

struct side {
  int scenario, peer;
  int is_send;
  void *comm, *mh;
  unsigned char *buf;
  int stop_at;         /* sender: the receiver posts no receive from here (-1: not told yet) */
  int64_t last_cut_ms; /* the last rail's cut was done (-1: not yet) */
  char peer_settled;   /* receiver: 'R' the sender logged rail 2's rejoin, 'O' that it stays out */
  int notices[3];      /* most lines ever seen of rail 2 going down, rejoining, staying out (see settled) */
  int told_settled;    /* sender: we told the receiver */
  int peer_idle;       /* cut-idle, receiver: the sender completed the message before the cut ('i') */
  int cut_told;        /* cut-idle, sender: the receiver cut rail 2 ('c') */
  int told_noticed;    /* cut-idle, sender: we told the receiver that we saw it go down ('n') */
  int peer_noticed;    /* cut-idle, receiver: the sender saw rail 2 go down */
  int peer_done;       /* the peer finished streaming ('d') */
};

static void run_netns(const char *verb, int rail) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "%s %s %d", getenv("SRD_FAILOVER_NETNS"), verb, rail);
  int64_t t0 = st_now_ms();
  int rc = system(cmd);
  ST_CHECK(rc == 0, "'%s' failed (status %d)", cmd, rc);
  st_note("'%s' took %lld ms", cmd, (long long)(st_now_ms() - t0));
}

/* Bytes side a received on interface vaK so far (the receiver is side a). */
static long long rx_bytes(int rail) {
  char path[96];
  snprintf(path, sizeof path, "/sys/class/net/va%d/statistics/rx_bytes", rail);
  FILE *f = fopen(path, "r");
  long long v = -1;
  if (f) {
    if (fscanf(f, "%lld", &v) != 1) v = -1;
    fclose(f);
  }
  return v;
}

/* Lines of ours saying that rail K (on vaK or vbK) did what. */
static int logged(int rail, const char *what) {
  char needle[64];
  snprintf(needle, sizeof needle, "(va%d) %s", rail, what);
  int n = st_log_count(needle);
  snprintf(needle, sizeof needle, "(vb%d) %s", rail, what);
  return n + st_log_count(needle);
}

/* 'R': rail 2 rejoined, 'O': it stays out, 0: neither yet. With progress
 * lanes the NIC on link 2 carries one rail per lane (all named after it),
 * each going down and coming back on its own, and the large messages go
 * over the lanes' rails: settled means every rail that went down there
 * rejoined or stays out. The log keeps only its last lines, so the most
 * lines of each kind ever seen count. */
static char settled(struct side *s) {
  const char *what[3] = {"down (", "rejoined", "has its link back but stays out"};
  for (int k = 0; k < 3; k++) {
    int n = logged(2, what[k]);
    if (n > s->notices[k]) s->notices[k] = n;
  }
  if (!s->notices[0] || s->notices[1] + s->notices[2] < s->notices[0]) return 0;
  return s->notices[2] ? 'O' : 'R';
}

/* Messages between the two: 's' + count (stop), 'C' (the last rail is cut),
 * 'R' / 'O' (the sender saw rail 2 rejoin / stay out), cut-idle's 'i' (the
 * sender completed the message before the cut), 'c' (rail 2 is cut) and 'n'
 * (the sender saw every rail on it go down: one still up there could carry
 * the next message's write into the cut), 'd' (done streaming: the channel closes only
 * once both are). */
static void read_oob(struct side *s) {
  while (!s->peer_done && st_oob_ready(s->peer)) {
    char c = 0;
    st_oob_recv(s->peer, &c, 1, SETUP_MS);
    if (c == 's') st_oob_recv(s->peer, &s->stop_at, sizeof s->stop_at, SETUP_MS);
    else if (c == 'C') s->last_cut_ms = st_now_ms();
    else if (c == 'R' || c == 'O') s->peer_settled = c;
    else if (c == 'i') s->peer_idle = 1;
    else if (c == 'c') s->cut_told = 1;
    else if (c == 'n') s->peer_noticed = 1;
    else if (c == 'd') s->peer_done = 1;
    else ST_CHECK(0, "unexpected out-of-band byte '%c'", c);
  }
  /* Every call, on both sides: settled() keeps the most lines it saw. */
  char c = s->scenario != ALL ? settled(s) : 0;
  if (c && s->is_send && !s->told_settled) {
    st_oob_send(s->peer, &c, 1);
    s->told_settled = 1;
  }
  /* settled() above kept the most down lines seen; the link carries one rail per lane. */
  if (s->cut_told && !s->told_noticed && s->notices[0] >= st_device_lanes(NULL, NULL)) {
    c = 'n';
    st_oob_send(s->peer, &c, 1);
    s->told_noticed = 1;
  }
}

/* Receiver: until the sender set *flag (read_oob), bounded. */
static void await_peer(struct side *s, const int *flag, const char *what) {
  int64_t deadline = st_now_ms() + SETUP_MS;
  while (!*flag) {
    read_oob(s);
    ST_CHECK(st_now_ms() < deadline, "the sender did not say within %d ms that %s", SETUP_MS, what);
    st_sleep_ms(1);
  }
}

/* The comm failed: that is right only after the last rail's cut, within
 * FAIL_MS of it, with an error that names the rails. */
static void failed(struct side *s, const char *what, int msg, ncclResult_t rc) {
  int64_t wait_until = st_now_ms() + SETUP_MS;
  while (s->is_send && s->last_cut_ms < 0 && st_now_ms() < wait_until) {
    if (st_oob_ready(s->peer)) read_oob(s);
    else st_sleep_ms(1);
  }
  ST_CHECK(s->scenario == ALL && s->last_cut_ms >= 0, "%s of message %d failed (%d) before the last rail was cut",
           what, msg, (int)rc);
  int64_t after = st_now_ms() - s->last_cut_ms;
  st_note("%s of message %d failed (%d) %lld ms after the last rail's cut", what, msg, (int)rc, (long long)after);
  ST_CHECK(after <= FAIL_MS, "the comm failed %lld ms after losing its last rail (bound %d ms)", (long long)after,
           FAIL_MS);
  ST_CHECK(st_log_count("no rail left to the peer: rail 0 (") > 0, "the error does not name the rails");
}

/* Receiver: the cuts and mends, once message i is posted. */
static void receiver_plan(struct side *s, int i) {
  if (s->scenario != ALL) {
    if (i == CUT_EVERY && s->scenario == ONE) run_netns("cut", 2);
    if (i == 3 * CUT_EVERY) run_netns("mend", 2);
  } else if (i > 0 && i % CUT_EVERY == 0 && i <= 4 * CUT_EVERY) {
    int rail = i / CUT_EVERY % 4; /* 1, 2, 3, then 0 */
    if (rail == 0) {
      char c = 'C';
      run_netns("cut", 0);
      s->last_cut_ms = st_now_ms();
      st_oob_send(s->peer, &c, 1);
    } else {
      run_netns("cut", rail);
    }
  }
}

static void stream(struct side *s) {
  int64_t phase_start = st_now_ms(), rejoin_wait = -1;
  int phase = 0, phase_msgs = 0, stop = -1;
  long long va2_at_rejoin = -1;
  const char *phase_name[] = {"before the cut", "after the cut", "after the mend"};
  for (int i = 0;; i++) {
    void *req = NULL;
    int tag = i;
    size_t size = MSG;
    if (s->is_send) st_pattern_fill(s->buf, MSG, (uint64_t)i);
    else memset(s->buf, 0, MSG);
    int64_t deadline = st_now_ms() + MSG_MS;
    for (;;) {
      void *data = s->buf;
      if (s->is_send && s->stop_at >= 0 && i >= s->stop_at) return;
      ncclResult_t rc = s->is_send ? st_net_isend(s->comm, s->buf, MSG, tag, s->mh, &req)
                                   : st_net_irecv(s->comm, 1, &data, &size, &tag, &s->mh, &req);
      if (rc != ncclSuccess) return failed(s, s->is_send ? "isend" : "irecv", i, rc);
      if (req) break;
      read_oob(s);
      ST_CHECK(st_now_ms() < deadline, "message %d: no request within %d ms", i, MSG_MS);
    }
    if (!s->is_send) {
      int old = phase;
      if (s->scenario != ALL && ((i == CUT_EVERY && phase == 0) || (stop >= 0 && phase == 1))) phase++;
      if (phase != old && i > 0) {
        double secs = (double)(st_now_ms() - phase_start) / 1000.0;
        st_note("%s: %d message(s), %.0f MB/s", phase_name[old], phase_msgs,
                secs > 0 ? (double)phase_msgs * MSG / 1e6 / secs : 0.0);
        phase_start = st_now_ms();
        phase_msgs = 0;
        if (phase == 2) va2_at_rejoin = rx_bytes(2);
      }
      receiver_plan(s, i);
    }
    for (;;) {
      int done = 0, got = -1;
      ncclResult_t rc = st_net_test(req, &done, &got);
      if (rc != ncclSuccess) return failed(s, "test", i, rc);
      if (done) break;
      read_oob(s);
      ST_CHECK(st_now_ms() < deadline, "message %d not done within %d ms", i, MSG_MS);
    }
    if (s->is_send) {
      char c = 'i';
      if (s->scenario == IDLE && i + 1 == CUT_EVERY) st_oob_send(s->peer, &c, 1);
      continue;
    }
    size_t bad = st_pattern_check(s->buf, MSG, (uint64_t)i);
    ST_CHECK(bad == SIZE_MAX, "message %d: wrong byte at offset %zu", i, bad);
    phase_msgs++;
    if (s->scenario == ALL) {
      ST_CHECK(i <= 4 * CUT_EVERY + 16, "message %d completed; the comm should have failed after the last cut", i);
      continue;
    }
    /* cut-idle: the next cut falls between two messages, once the sender
     * completed its last one (nothing in flight), and the next
     * clear-to-send goes out only once the sender saw the rail go down. */
    if (s->scenario == IDLE && i + 1 == CUT_EVERY) {
      await_peer(s, &s->peer_idle, "its message completed");
      run_netns("cut", 2);
      char c = 'c';
      st_oob_send(s->peer, &c, 1);
      await_peer(s, &s->peer_noticed, "it saw rail 2 go down");
    }
    /* After the mend, wait until both sides settled rail 2. */
    if (i >= 3 * CUT_EVERY && rejoin_wait < 0) rejoin_wait = st_now_ms();
    if (rejoin_wait >= 0 && stop < 0) {
      read_oob(s);
      /* A rail that stays out here carries nothing to us whatever the
       * sender makes of it; the sender's probe may then never complete (its
       * cut-off write blocks the connection): it settles only when ours
       * rejoined. */
      char mine = settled(s);
      if (mine == 'O' || (mine && s->peer_settled)) {
        stop = i + 1 + AFTER_REJOIN;
        char c = 's';
        st_oob_send(s->peer, &c, 1);
        st_oob_send(s->peer, &stop, sizeof stop);
        st_note("rail 2 %s here and %s at the sender, %lld ms after the mend", mine == 'R' ? "rejoined" : "stays out",
                s->peer_settled == 'R' ? "rejoined" : s->peer_settled == 'O' ? "stays out" : "is not settled",
                (long long)(st_now_ms() - rejoin_wait));
        if (s->scenario == IDLE)
          ST_CHECK(mine == 'R' && s->peer_settled == 'R', "rail 2 was cut with nothing in flight but did not rejoin");
      }
      ST_CHECK(st_now_ms() - rejoin_wait < REJOIN_MS, "rail 2 did not settle on both sides within %d ms of the mend",
               REJOIN_MS);
    }
    if (stop >= 0 && i + 1 == stop) {
      double secs = (double)(st_now_ms() - phase_start) / 1000.0;
      st_note("%s: %d message(s), %.0f MB/s", phase_name[phase], phase_msgs,
              secs > 0 ? (double)phase_msgs * MSG / 1e6 / secs : 0.0);
      long long grew = rx_bytes(2) - va2_at_rejoin;
      st_note("va2 received %lld bytes after rail 2 settled", grew);
      if (settled(s) == 'R' && s->peer_settled == 'R')
        ST_CHECK(va2_at_rejoin >= 0 && grew > (long long)(MSG / 8), "rail 2 carried %lld bytes after it rejoined",
                 grew);
      return;
    }
  }
}

static int rank_main(int rank, int nranks, void *arg) {
  (void)nranks;
  const struct st_ctx *ctx = arg;
  st_setup(ctx, st_version(VERSION));
  int scenario = !strcmp(ctx->test, "cut-all") ? ALL : !strcmp(ctx->test, "cut-idle") ? IDLE : ONE;
  struct side s = {.scenario = scenario, .peer = 1 - rank, .is_send = rank == 1,
                   .stop_at = -1, .last_cut_ms = -1};
  s.comm = st_pair_comm(rank, 0, 1, SETUP_MS);
  s.buf = st_alloc(MSG);
  ST_NCCL(st_net_reg_mr(s.comm, s.buf, MSG, &s.mh));
  stream(&s);
  char c = 'd';
  st_oob_send(s.peer, &c, 1);
  while (!s.peer_done) {
    st_oob_recv(s.peer, &c, 1, SETUP_MS);
    if (c == 'd') s.peer_done = 1; /* anything else was meant for a stream that ended */
  }
  ST_NCCL(st_net_dereg_mr(s.comm, s.mh));
  ST_NCCL(rank == 1 ? st_net_close_send(s.comm) : st_net_close_recv(s.comm));
  st_free(s.buf, MSG);
  ST_NCCL(st_net_finalize());
  return 0;
}

static int run_case(const struct st_ctx *ctx) {
  char label[96];
  snprintf(label, sizeof label, "%s[%s]", ctx->test, ctx->provider);
  struct st_group_opts opts = {0}; /* the default alarm: a hang guard */
  return st_group_run(label, 2, rank_main, (void *)ctx, &opts);
}

int main(int argc, char **argv) {
  const char *netns = getenv("SRD_FAILOVER_NETNS");
  if (!netns || !*netns) {
    fprintf(stderr, "failover: SKIP: set SRD_FAILOVER_NETNS to netns.sh (tests/netns/failover.sh)\n");
    return SKIP;
  }
  static const struct st_case cases[] = {{"cut-one", run_case}, {"cut-idle", run_case}, {"cut-all", run_case}};
  return st_main(argc, argv, cases, 3);
}
