/* Many comms between two processes, opened as NCCL opens them (per pair:
 * listen, connect, accept, close the listener): 10,000 pairs by default
 * ($SRD_MANYCOMMS_PAIRS), every one kept open. A sample carries a small
 * (eager) and a large (RDMA write) message once all are open, so comm indexes
 * far beyond the old 4,096 limit carry data; then all close. Prints the
 * resident memory per comm (each process holds one direction) and the
 * connect time per pair at the start and at the end (connecting must not get
 * slower as comms accumulate). Checks: every comm opens, the sample's data
 * arrives intact, the device claims at least 65,535 comms, and an idle comm
 * costs at most 8 KiB of resident memory (not checked under AddressSanitizer,
 * whose padding is not the comm's). early-close (below): early messages go
 * with their comm. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "srdtest.h"

#define TIMEOUT_MS ST_HANG_MS
#define VERSION 11
#define DEFAULT_PAIRS 10000
#define WINDOW 2000        /* pairs timed at the start and at the end */
#define SAMPLE_EVERY 997
#define MAX_IDLE_BYTES 8192

static int pairs(void) {
  const char *v = getenv("SRD_MANYCOMMS_PAIRS");
  int n = v ? atoi(v) : DEFAULT_PAIRS;
  return n > 0 ? n : DEFAULT_PAIRS;
}

static long rss_bytes(void) {
  long size = 0, resident = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  ST_CHECK(f, "cannot read /proc/self/statm");
  ST_CHECK(fscanf(f, "%ld %ld", &size, &resident) == 2, "cannot parse /proc/self/statm");
  fclose(f);
  return resident * sysconf(_SC_PAGESIZE);
}

/* Per pair, as NCCL: the receiver listens and hands the handle over; both
 * poll until their comm appears; the receiver closes the listener. */
static void *open_pair(int rank) {
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {0};
  void *comm = NULL;
  ncclResult_t rc = ncclSuccess;
  if (rank == 0) {
    void *lcomm = NULL;
    ST_NCCL(st_net_listen(0, handle, &lcomm));
    st_oob_send(1, handle, sizeof handle);
    enum st_wait w = st_accept_wait(lcomm, &comm, TIMEOUT_MS, &rc);
    ST_CHECK(w == ST_DONE, "accept: %s (rc %d)", w == ST_TIMEOUT ? "no comm" : "error", (int)rc);
    ST_NCCL(st_net_close_listen(lcomm));
  } else {
    st_oob_recv(0, handle, sizeof handle, TIMEOUT_MS);
    enum st_wait w = st_connect_wait(0, handle, &comm, TIMEOUT_MS, &rc);
    ST_CHECK(w == ST_DONE, "connect: %s (rc %d)", w == ST_TIMEOUT ? "no comm" : "error", (int)rc);
  }
  return comm;
}

static int many(int rank, int nranks, void *arg) {
  (void)nranks;
  st_setup(arg, st_version(VERSION));
  int n = pairs();
  struct st_props props;
  ST_NCCL(st_net_get_properties(0, &props));
  ST_CHECK(props.max_comms >= 65535, "device claims %d comms, not 65,535", props.max_comms);
  void **comms = calloc((size_t)n, sizeof(*comms));
  ST_CHECK(comms, "out of memory");
  /* The first pair opens the device (rails, buffers, the comm table): not a
   * comm's cost. */
  comms[0] = open_pair(rank);
  long rss0 = rss_bytes();
  int64_t t0 = st_now_ms(), first_ms = 0, last_start = 0;
  for (int i = 1; i < n; i++) {
    if (i == n - WINDOW) last_start = st_now_ms();
    comms[i] = open_pair(rank);
    if (i == WINDOW) first_ms = st_now_ms() - t0;
  }
  int64_t open_ms = st_now_ms() - t0, last_ms = st_now_ms() - last_start;
  long per_comm = (rss_bytes() - rss0) / (n - 1);
  const char *dir = rank == 0 ? "recv" : "send";
  st_note("%d pairs in %lld ms; %s comm: %ld bytes resident each", n, (long long)open_ms, dir, per_comm);
  if (n > 2 * WINDOW)
    st_note("connect per pair: %.0f us over the first %d pairs, %.0f us over the last %d", first_ms * 1000.0 / WINDOW,
            WINDOW, last_ms * 1000.0 / WINDOW, WINDOW);
#ifndef __SANITIZE_ADDRESS__ /* AddressSanitizer pads every allocation */
  ST_CHECK(per_comm <= MAX_IDLE_BYTES, "an idle %s comm costs %ld bytes (at most %d)", dir, per_comm, MAX_IDLE_BYTES);
#endif
  st_barrier(TIMEOUT_MS);
  for (int i = n - 1; i >= 0; i -= SAMPLE_EVERY) {
    if (rank == 1) {
      st_send_one(comms[i], 64, (uint64_t)i, 1, TIMEOUT_MS);
      st_send_one(comms[i], 1 << 20, (uint64_t)i + 1, 2, TIMEOUT_MS);
    } else {
      st_recv_one(comms[i], 64, (uint64_t)i, 1, TIMEOUT_MS);
      st_recv_one(comms[i], 1 << 20, (uint64_t)i + 1, 2, TIMEOUT_MS);
    }
  }
  st_barrier(TIMEOUT_MS);
  int64_t c0 = st_now_ms();
  for (int i = 0; i < n; i++) ST_NCCL(rank == 0 ? st_net_close_recv(comms[i]) : st_net_close_send(comms[i]));
  st_note("closed %d comms in %lld ms", n, (long long)(st_now_ms() - c0));
  free(comms);
  ST_NCCL(st_net_finalize());
  return 0;
}

/* early-close: comm after comm, each flooded with eager messages no
 * receive was posted for (kept by the receiver until one is), then closed:
 * what was kept must go with the comm. The receiver's resident memory over
 * EARLY_ROUNDS such comms, after EARLY_WARMUP to let the providers' pools
 * settle, must grow by less than a quarter of what the comms were sent. A
 * 1-byte message on a comm kept open follows each flood on the same
 * connection (tcp and shm deliver in order): once it is received, the flood
 * has been taken in. */
#define EARLY_ROUNDS 64
#define EARLY_WARMUP 8
#define EARLY_MSGS 64 /* SRD_EAGER_WINDOW: as many as a sender may send ahead */
#define EARLY_SIZE_MAX (64 << 10)

static void flood_and_close(int rank, void *marker, int round, size_t size) {
  void *comm = open_pair(rank);
  if (rank == 1) {
    char *buf = st_alloc(size);
    void *mh = NULL;
    ST_NCCL(st_net_reg_mr(comm, buf, size, &mh));
    for (int i = 0; i < EARLY_MSGS; i++) {
      void *req = NULL;
      ncclResult_t rc = ncclSuccess;
      ST_CHECK(st_isend_wait(comm, buf, size, i, mh, &req, TIMEOUT_MS, &rc) == ST_DONE &&
                   st_test_wait(req, NULL, TIMEOUT_MS, &rc) == ST_DONE,
               "round %d: send %d: rc %d", round, i, (int)rc);
    }
    ST_NCCL(st_net_dereg_mr(comm, mh));
    st_free(buf, size);
    st_send_one(marker, 1, (uint64_t)round, round, TIMEOUT_MS);
    ST_NCCL(st_net_close_send(comm));
    struct st_traffic t = st_traffic_last(1);
    ST_CHECK(t.eager == EARLY_MSGS && t.rendezvous == 0, "round %d: %lld eager and %lld written, not %d eager", round,
             t.eager, t.rendezvous, EARLY_MSGS);
  } else {
    st_recv_one(marker, 1, (uint64_t)round, round, TIMEOUT_MS);
    ST_NCCL(st_net_close_recv(comm));
  }
  st_barrier(TIMEOUT_MS);
}

static int early(int rank, int nranks, void *arg) {
  (void)nranks;
  st_setup(arg, st_version(VERSION));
  void *marker = open_pair(rank);
  /* The largest message both sides send eagerly (the same device here). */
  size_t size = st_device_eager_max(NULL, 0);
  ST_CHECK(size > 0, "no eager size logged");
  if (size > EARLY_SIZE_MAX) size = EARLY_SIZE_MAX;
  long rss0 = 0;
  for (int i = 0; i < EARLY_WARMUP + EARLY_ROUNDS; i++) {
    if (i == EARLY_WARMUP) rss0 = rss_bytes();
    flood_and_close(rank, marker, i, size);
  }
  if (rank == 0) {
    long grown = rss_bytes() - rss0, sent = (long)EARLY_ROUNDS * EARLY_MSGS * (long)size;
    st_note("%d comms closed with %d early messages of %zu bytes each: %ld KiB more resident (%ld KiB sent)",
            EARLY_ROUNDS, EARLY_MSGS, size, grown >> 10, sent >> 10);
#ifndef __SANITIZE_ADDRESS__ /* its quarantine keeps freed memory resident; its leak check runs instead */
    ST_CHECK(grown < sent / 4, "the receiver grew by %ld KiB over %d closed comms: their early messages were kept",
             grown >> 10, EARLY_ROUNDS);
#endif
  }
  ST_NCCL(rank == 0 ? st_net_close_recv(marker) : st_net_close_send(marker));
  ST_NCCL(st_net_finalize());
  return 0;
}

static int case_early(const struct st_ctx *ctx) {
  char label[96];
  snprintf(label, sizeof label, "%s[%s]", ctx->test, ctx->provider);
  struct st_group_opts opts = {0};
  return st_group_run(label, 2, early, (void *)ctx, &opts);
}

static int case_many(const struct st_ctx *ctx) {
  char label[96];
  snprintf(label, sizeof label, "%s[%s]", ctx->test, ctx->provider);
  struct st_group_opts opts = {0}; /* the default alarm: a hang guard */
  return st_group_run(label, 2, many, (void *)ctx, &opts);
}

int main(int argc, char **argv) {
  static const struct st_case cases[] = {{"many", case_many}, {"early-close", case_early}};
  return st_main(argc, argv, cases, 2);
}
