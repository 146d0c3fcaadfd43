/* Mixed traffic on one comm, as NCCL mixes it: eager-size and larger
 * messages interleaved, several receives and sends in flight, the receives
 * posted larger than any message (NCCL's buffers), so the receiver cannot
 * tell which way a message will come. Every message must arrive whole, in
 * its own buffer, with its size; both paths must be taken. A send that finds
 * no clear-to-send must get one without a timer's help: the run ends within
 * RUN_MS however often a large message follows small ones. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srdtest.h"

#define WINDOW 8
#define NMSGS 600
#define POSTED ((size_t)300 << 10) /* every receive: more than the largest message */
#define RUN_MS 60000
#define SETUP_MS 30000
#define VERSION 10

/* Cycled through: eager (0 B, at and under an 8 KiB limit, set) and
 * rendezvous (just over it, one stripe, several stripes), with runs of
 * each so the receiver's view of the comm changes back and forth. */
static const size_t cycle[] = {8, 8192, 8193, 0, 64, 256 << 10, 100, 4096, 70000, 65536, 1, 9000, 9000, 5};
#define NCYCLE (sizeof cycle / sizeof cycle[0])

static size_t size_of(int i) { return cycle[(size_t)i % NCYCLE]; }

static int receiver(void *comm, unsigned char *bufs, void *mh) {
  void *req[WINDOW] = {0};
  int posted = 0, done = 0, failed = 0;
  int64_t deadline = st_now_ms() + RUN_MS;
  while (done < NMSGS) {
    while (posted < NMSGS && posted - done < WINDOW) {
      void *data = bufs + (size_t)(posted % WINDOW) * POSTED;
      size_t size = POSTED;
      int tag = 0;
      memset(data, 0xEE, POSTED);
      ncclResult_t rc;
      if (st_irecv_wait(comm, 1, &data, &size, &tag, &mh, &req[posted % WINDOW], RUN_MS, &rc) != ST_DONE)
        st_fail(__FILE__, __LINE__, "receive %d not posted (rc %d)", posted, (int)rc);
      posted++;
    }
    int got = -1;
    ncclResult_t rc;
    int left = (int)(deadline - st_now_ms());
    if (st_test_wait(req[done % WINDOW], &got, left > 0 ? left : 1, &rc) != ST_DONE)
      st_fail(__FILE__, __LINE__, "message %d (%zu bytes) did not arrive within %d ms of the start (rc %d)", done, size_of(done), RUN_MS,
              (int)rc);
    const unsigned char *data = bufs + (size_t)(done % WINDOW) * POSTED;
    size_t want = size_of(done), bad = st_pattern_check(data, want, (uint64_t)done);
    if (got != (int)want || bad != SIZE_MAX || st_check_byte(data + want, POSTED - want, 0xEE) != SIZE_MAX) {
      st_note("FAIL message %d: %d bytes reported, %zu sent; first wrong byte %zu", done, got, want, bad);
      failed = 1;
    }
    done++;
  }
  return failed;
}

static void sender(void *comm, unsigned char *bufs, void *mh) {
  void *req[WINDOW] = {0};
  int posted = 0, done = 0;
  int64_t deadline = st_now_ms() + RUN_MS;
  while (done < NMSGS) {
    while (posted < NMSGS && posted - done < WINDOW) {
      unsigned char *data = bufs + (size_t)(posted % WINDOW) * POSTED;
      st_pattern_fill(data, size_of(posted), (uint64_t)posted);
      ncclResult_t rc;
      if (st_isend_wait(comm, data, size_of(posted), 0, mh, &req[posted % WINDOW], RUN_MS, &rc) != ST_DONE)
        st_fail(__FILE__, __LINE__, "send %d (%zu bytes) not accepted within %d ms (rc %d)", posted, size_of(posted), RUN_MS, (int)rc);
      posted++;
    }
    ncclResult_t rc;
    int left = (int)(deadline - st_now_ms());
    if (st_test_wait(req[done % WINDOW], NULL, left > 0 ? left : 1, &rc) != ST_DONE)
      st_fail(__FILE__, __LINE__, "send %d did not complete (rc %d)", done, (int)rc);
    done++;
  }
}

static int rank_main(int rank, int nranks, void *arg) {
  (void)nranks;
  ST_CHECK(setenv("NCCL_SRD_EAGER_MAX", "8192", 1) == 0, "setenv failed");
  st_setup(arg, st_version(VERSION));
  size_t len = WINDOW * POSTED;
  unsigned char *bufs = st_alloc(len);
  void *comm = st_pair_comm(rank, 0, 1, SETUP_MS), *mh = NULL;
  ST_NCCL(st_net_reg_mr(comm, bufs, len, &mh));
  int failed = 0;
  if (rank == 0) failed = receiver(comm, bufs, mh);
  else sender(comm, bufs, mh);
  st_barrier(SETUP_MS);
  ST_NCCL(st_net_dereg_mr(comm, mh));
  ST_NCCL(rank == 0 ? st_net_close_recv(comm) : st_net_close_send(comm));
  struct st_traffic t = st_traffic_last(rank == 1);
  if (!t.eager || !t.rendezvous) {
    st_note("FAIL %s: %lld eager, %lld by write: the mix did not take both paths", rank ? "sender" : "receiver",
            t.eager, t.rendezvous);
    failed = 1;
  }
  st_free(bufs, len);
  ST_NCCL(st_net_finalize());
  return failed;
}

static int mixed(const struct st_ctx *ctx) {
  char label[96];
  snprintf(label, sizeof label, "%s[%s]", ctx->test, ctx->provider);
  struct st_group_opts opts = {.timeout_s = 120};
  return st_group_run(label, 2, rank_main, (void *)ctx, &opts);
}

int main(int argc, char **argv) {
  static const struct st_case cases[] = {{"mixed", mixed}};
  return st_main(argc, argv, cases, 1);
}
