/* Which path each message takes, read from the traffic line the plugin logs
 * at INFO when it closes a comm (eager messages, messages written after the
 * receiver's clear-to-send, RMA writes), on both sides; every message is also
 * checked byte for byte.
 *   eager-default: NCCL_SRD_EAGER_MAX unset: the device says it chose 32 KiB
 *     on libfabric 2.x's native tcp and 8 KiB on other providers; 0, 1 and
 *     that many bytes go eagerly, one byte more and 64 KiB after the
 *     clear-to-send, one write each.
 *   eager-rxm-buffer: FI_OFI_RXM_BUFFER_SIZE=32808: as eager-default, but
 *     32 KiB on ofi_rxm too (its eager buffers now hold 32 KiB and the header).
 *   eager-changed: NCCL_SRD_EAGER_MAX=1000: 1000 bytes eagerly, 1001 not.
 *   eager-peer-smaller: the receiver's NCCL_SRD_EAGER_MAX=1000, the sender's
 *     8 KiB (every provider's sends hold it: efa-direct's 8,928 bytes): the sender keeps to the receiver's 1000 bytes (its control
 *     buffers are no larger; a larger message is cut there, a rail error).
 *   striped: eager up to 8 KiB, 1 rail, 4 endpoints (NCCL_SRD_EPS_PER_RAIL=4), stripes from
 *     16 KiB of 4 KiB (NCCL_SRD_STRIPE_THRESHOLD, NCCL_SRD_MIN_STRIPE): every
 *     message of 16 KiB or more is 4 writes, odd sizes included. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srdtest.h"

#define TIMEOUT_MS ST_HANG_MS
#define VERSION 11
#define MAX_MSGS 8

struct plan {
  const char *name;
  const char *eager_max; /* NULL: unset */
  const char *recv_eager_max; /* the receiver's, when it differs */
  const char *rxm_buffer;     /* FI_OFI_RXM_BUFFER_SIZE; NULL: unset */
  int striped;
  size_t sizes[MAX_MSGS];
  int n;
  struct st_traffic want;
};

static const struct plan plans[] = {
    {"eager-default", NULL, NULL, NULL, 0, {0, 1, 0 /* the default */, 1 /* past it */, 65536}, 5, {3, 2, 2}},
    {"eager-rxm-buffer", NULL, NULL, "32808", 0, {0, 1, 0, 1, 65536}, 5, {3, 2, 2}},
    {"eager-changed", "1000", NULL, NULL, 0, {999, 1000, 1001, 8192}, 4, {2, 2, 2}},
    {"eager-peer-smaller", "8192", "1000", NULL, 0, {1000, 1001, 16384}, 3, {1, 2, 2}},
    {"striped", "8192", NULL, NULL, 1, {16384, 100001, (1 << 20) + 3, (4 << 20) + 136}, 4, {0, 4, 16}},
};

static void set_or_unset(const char *name, const char *value) {
  if (value) ST_CHECK(setenv(name, value, 1) == 0, "setenv failed");
  else unsetenv(name);
}

/* Rank 0 receives, rank 1 sends. */
static void configure(const struct plan *p, int rank) {
  set_or_unset("NCCL_SRD_EAGER_MAX", rank == 0 && p->recv_eager_max ? p->recv_eager_max : p->eager_max);
  set_or_unset("FI_OFI_RXM_BUFFER_SIZE", p->rxm_buffer);
  if (p->striped) {
    ST_CHECK(setenv("NCCL_SRD_RAILS", "1", 1) == 0 && setenv("NCCL_SRD_EPS_PER_RAIL", "4", 1) == 0 &&
                 setenv("NCCL_SRD_STRIPE_THRESHOLD", "16K", 1) == 0 && setenv("NCCL_SRD_MIN_STRIPE", "4K", 1) == 0,
             "setenv failed");
  }
}

static int rank_main(int rank, int nranks, void *arg) {
  (void)nranks;
  const struct st_ctx *ctx = arg;
  const struct plan *p = plans;
  while (strcmp(p->name, ctx->test)) p++;
  configure(p, rank);
  st_setup(ctx, st_version(VERSION));
  void *comm = st_pair_comm(rank, 0, 1, TIMEOUT_MS);
  size_t sizes[MAX_MSGS];
  memcpy(sizes, p->sizes, sizeof sizes);
  if (!p->eager_max) {
    char why[64];
    size_t eager = st_device_eager_max(why, sizeof why);
    size_t want = !strcmp(why, "tcp") || (p->rxm_buffer && strstr(why, "ofi_rxm")) ? 32768 : 8192;
    ST_CHECK(eager == want, "the device chose eager messages up to %zu bytes for %s; expected %zu", eager, why, want);
    sizes[2] += eager;
    sizes[3] += eager;
  }
  for (int i = 0; i < p->n; i++) {
    if (rank == 1) st_send_one(comm, sizes[i], 77 + (uint64_t)i, i, TIMEOUT_MS);
    else st_recv_one(comm, sizes[i], 77 + (uint64_t)i, i, TIMEOUT_MS);
  }
  st_barrier(TIMEOUT_MS);
  ST_NCCL(rank == 1 ? st_net_close_send(comm) : st_net_close_recv(comm));
  struct st_traffic t = st_traffic_last(rank == 1);
  st_note("%s: %lld eager, %lld by RMA write in %lld write(s)", rank == 1 ? "sender" : "receiver", t.eager,
          t.rendezvous, t.writes);
  ST_CHECK(t.eager == p->want.eager && t.rendezvous == p->want.rendezvous && t.writes == p->want.writes,
           "%s: %lld eager, %lld by RMA write in %lld write(s); expected %lld, %lld in %lld",
           rank == 1 ? "sender" : "receiver", t.eager, t.rendezvous, t.writes, p->want.eager, p->want.rendezvous,
           p->want.writes);
  char warning[512];
  st_first_warning(warning, sizeof warning);
  ST_CHECK(st_warn_count() == 0, "the plugin logged %d warning(s), the first: %s", st_warn_count(), warning);
  ST_NCCL(st_net_finalize());
  return 0;
}

static int run2(const struct st_ctx *ctx) {
  char label[96];
  snprintf(label, sizeof label, "%s[%s]", ctx->test, ctx->provider);
  struct st_group_opts opts = {0}; /* the default alarm: a hang guard */
  return st_group_run(label, 2, rank_main, (void *)ctx, &opts);
}

int main(int argc, char **argv) {
  static const struct st_case cases[] = {
      {"eager-default", run2},   {"eager-rxm-buffer", run2}, {"eager-changed", run2},
      {"eager-peer-smaller", run2}, {"striped", run2},
  };
  return st_main(argc, argv, cases, 5);
}
