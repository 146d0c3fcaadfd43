/* Eager data kept before its receive is bounded (DESIGN.md, "Bounds"): a
 * message is kept only within 1,024 sequences (SRD_SENT_TAGS) of the next
 * receive, and at most 1,024 messages are kept. A rogue sender (rank 1)
 * floods two receive comms of the victim (rank 0) with eager messages of
 * NCCL_SRD_EAGER_MAX bytes for receives never posted: one with sequences
 * 0..1022 then past the window, the other with the same 100 sequences over
 * and over (a peer may repeat a sequence; only the count stops it). Each comm
 * fails exactly at its bound, naming the flood, its receives fail, and the
 * victim's memory grows by what 2 x 1,024 messages take, not by the flood.
 * Each flood ends with a message under a wrong token, which the victim drops
 * and logs: tcp and shm deliver a connection's messages in order, so once
 * both are logged the victim has taken in every message before them. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "rogue.h"

#define EAGER 8192         /* the victim's NCCL_SRD_EAGER_MAX: the largest message kept */
#define KEPT_MAX 1024      /* SRD_SENT_TAGS: sequences ahead, and messages kept */
#define PAST_WINDOW 1100   /* comm 0's first sequence outside the window */
#define REPEATS 16384      /* comm 1's flood: 16x the bound */
#define FLOOD "ahead of the receives"
#define MARKER "with a wrong token dropped"

static long rss_bytes(void) {
  long size = 0, resident = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  ST_CHECK(f, "cannot read /proc/self/statm");
  ST_CHECK(fscanf(f, "%ld %ld", &size, &resident) == 2, "cannot parse /proc/self/statm");
  fclose(f);
  return resident * sysconf(_SC_PAGESIZE);
}

static int victim(void *arg) {
  ST_CHECK(setenv("NCCL_SRD_EAGER_MAX", "8192", 1) == 0, "setenv failed");
  st_setup(arg, st_version(VERSION));
  char handle[HSIZE];
  void *lcomm = victim_listen(handle, 1, -1), *rc[2] = {NULL, NULL};
  ncclResult_t err;
  for (int i = 0; i < 2; i++)
    ST_CHECK(st_accept_wait(lcomm, &rc[i], SETUP_MS, &err) == ST_DONE, "accept of the rogue's hello %d", i);
  long rss0 = rss_bytes();
  char g = 'g';
  st_oob_send(1, &g, 1);
  /* Progress (the rogue's sends need it to complete) until both floods'
   * last messages arrived. */
  int64_t deadline = st_now_ms() + SETUP_MS;
  while (st_log_count(MARKER) < 2) {
    st_net_accept(lcomm, &(void *){NULL});
    ST_CHECK(st_now_ms() < deadline, "the floods' last messages did not arrive within %d ms", SETUP_MS);
  }
  long held = rss_bytes() - rss0;
  /* Plus the providers' own buffers: tcp;ofi_rxm grows its pool while we
   * are slow to take messages in (up to 17 MiB more seen under load). */
  const long bound = 2L * KEPT_MAX * (EAGER + 256) + (32L << 20);
  st_note("memory held after the floods: %ld KiB (bound %ld KiB)", held >> 10, bound >> 10);
  char text[128];
  snprintf(text, sizeof text, "for sequence %d, %d " FLOOD " (%d kept): flood?", PAST_WINDOW, PAST_WINDOW,
           KEPT_MAX - 1);
  ST_CHECK(st_log_count(text) == 1, "comm 0 did not fail at its first message past the window (\"%s\")", text);
  snprintf(text, sizeof text, FLOOD " (%d kept): flood?", KEPT_MAX);
  ST_CHECK(st_log_count(text) == 1, "comm 1 did not fail at its first message past the count (\"%s\")", text);
  ST_CHECK(held <= bound, "the victim holds %ld KiB after the floods: more than %d messages kept", held >> 10,
           2 * KEPT_MAX);
  char *buf = st_alloc(EAGER);
  for (int i = 0; i < 2; i++) {
    void *mh = NULL, *req = NULL, *data = buf;
    size_t size = EAGER;
    int tag = 0, done = 0;
    ST_NCCL(st_net_reg_mr(rc[i], buf, size, &mh));
    ncclResult_t posted = st_net_irecv(rc[i], 1, &data, &size, &tag, &mh, &req);
    if (posted == ncclSuccess && req) posted = st_net_test(req, &done, NULL);
    ST_CHECK(posted != ncclSuccess, "a receive on flooded comm %d did not fail", i);
    ST_NCCL(st_net_dereg_mr(rc[i], mh));
    st_net_close_recv(rc[i]);
  }
  ST_NCCL(st_net_close_listen(lcomm));
  ST_NCCL(st_net_finalize());
  char d;
  st_oob_recv(1, &d, 1, SETUP_MS);
  return 0;
}

static int eager_to(struct rogue *r, fi_addr_t v, uint32_t comm, uint64_t token, uint32_t seq, char *msg) {
  size_t hl = srd_msg_encode_eager_header(msg, ROGUE_BUF, comm, seq, 0, EAGER);
  srd_msg_set_token(msg, token);
  memset(msg + hl, 0x42, EAGER);
  return rogue_send(r, v, msg, hl + EAGER, OP_MS);
}

int unexpected_cap(int rank, int nranks, void *arg) {
  (void)nranks;
  if (rank == 0) return victim(arg);
  const struct st_ctx *ctx = arg;
  char handle[HSIZE], g;
  st_oob_recv(0, handle, HSIZE, SETUP_MS);
  struct rogue r[2];
  struct rogue_peer p[2];
  for (int i = 0; i < 2; i++) {
    rogue_open(&r[i], ctx->provider);
    rogue_join(&r[i], handle, &p[i]);
  }
  st_oob_recv(0, &g, 1, SETUP_MS);
  char *msg = malloc(ROGUE_BUF);
  ST_CHECK(msg, "malloc");
  /* Each send is waited for, so each comm's messages arrive in order. */
  int sent = 0;
  for (uint32_t k = 0; k < KEPT_MAX - 1 + 16; k++, sent++) {
    uint32_t seq = k < KEPT_MAX - 1 ? k : PAST_WINDOW + (k - (KEPT_MAX - 1));
    if (eager_to(&r[0], p[0].victim, p[0].comm, p[0].token, seq, msg)) break;
  }
  for (uint32_t k = 0; k < REPEATS; k++, sent++)
    if (eager_to(&r[1], p[1].victim, p[1].comm, p[1].token, k % 100, msg)) break;
  st_note("%d eager messages sent", sent);
  for (int i = 0; i < 2; i++)
    ST_CHECK(eager_to(&r[i], p[i].victim, p[i].comm, ~p[i].token, 0, msg) == 0, "the last message of flood %d not sent", i);
  char d = 'd';
  st_oob_send(0, &d, 1);
  free(msg);
  for (int i = 0; i < 2; i++) rogue_close(&r[i]);
  return 0;
}
