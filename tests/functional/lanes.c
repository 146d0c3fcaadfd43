/* Progress lanes (NCCL_SRD_PROGRESS_THREADS): every process here picks its
 * own thread count, whatever the environment says.
 *   lanes-running: with 2 threads per NIC the plugin opens 3 lanes per NIC
 *     and runs exactly one named thread per lane after the first
 *     ("srd-d0-rN", 2 per NIC; a fallback to no lanes fails), moves patterned
 *     messages both ways (eager, one stripe, striped over the lanes), and an
 *     idle process's lanes back off: together they use under a quarter of
 *     a core over a quiet second that starts once both ranks closed.
 *   lanes-inline: with 2 threads per NIC running, messages below the stripe
 *     threshold (by default the eager size) go eagerly and are completed by
 *     the caller's thread on both sides: the close log counts no request
 *     completed on a lane thread. From the threshold up (the eager size
 *     itself included, which fits eagerly: NCCL's 32 KiB steps on 2.x tcp)
 *     messages are written on the lanes only, none on lane 0 (there NCCL's
 *     thread would copy bulk data), and arrive intact.
 *   lanes-written-inline: the same with the threshold set above the eager
 *     size (8 KiB eager, 64 KiB threshold): the 12 and 48 KiB messages in
 *     between are written after the clear-to-send on lane 0 only, and
 *     completed by the caller's thread on both sides.
 *   lanes-lazy: NCCL_SRD_PROGRESS_THREADS unset, 4096 CPUs assumed (whatever else runs beside it)
 *     (NCCL_SRD_TEST_CPUS): the device opens with lanes, but no thread runs
 *     while only small messages (below the eager size) went by; after a 1 MiB
 *     message each way both sides run their threads, and data arrives intact.
 *   lanes-mixed: one side without threads (1 rail per NIC), the other with 3
 *     threads (4 lanes): the two rail counts map onto each other and data
 *     arrives intact in both directions. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "srdtest.h"

#define SETUP_MS ST_HANG_MS
#define XFER_MS ST_HANG_MS
#define VERSION 10
#define QUIET_MS 1000
#define SETTLE_MS 200
#define LANE_PREFIX "srd-d0-r"

static const size_t sizes[] = {0, 100, 8192, 48 << 10, 64 << 10, 1 << 20, (4 << 20) + 136};
#define NSIZES (sizeof sizes / sizeof sizes[0])

struct lane_usage {
  int threads;
  long ticks; /* user + system clock ticks of every lane thread */
};

static struct lane_usage lane_usage(void) {
  struct lane_usage u = {0, 0};
  DIR *d = opendir("/proc/self/task");
  ST_CHECK(d != NULL, "cannot list /proc/self/task");
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    char path[300], comm[64] = "", stat[1024] = "";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue; /* the thread ended meanwhile */
    if (!fgets(comm, sizeof comm, f)) comm[0] = 0;
    fclose(f);
    if (strncmp(comm, LANE_PREFIX, strlen(LANE_PREFIX))) continue;
    u.threads++;
    snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
    if (!(f = fopen(path, "r"))) continue;
    if (!fgets(stat, sizeof stat, f)) stat[0] = 0;
    fclose(f);
    /* Fields after the parenthesized name: state is 3, utime 14, stime 15. */
    const char *p = strrchr(stat, ')');
    long utime = 0, stime = 0;
    if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %ld %ld", &utime, &stime) == 2)
      u.ticks += utime + stime;
  }
  closedir(d);
  return u;
}

static void use_lanes(int lanes) {
  char v[16];
  snprintf(v, sizeof v, "%d", lanes);
  ST_CHECK(setenv("NCCL_SRD_PROGRESS_THREADS", v, 1) == 0, "setenv failed");
}

/* Each of n sizes from rank `sender` to the other rank of comm. */
static void send_each(void *comm, int rank, int sender, const size_t *sz, size_t n, uint64_t seed) {
  for (size_t i = 0; i < n; i++) {
    if (rank == sender) st_send_one(comm, sz[i], seed + i, (int)i, XFER_MS);
    else st_recv_one(comm, sz[i], seed + i, (int)i, XFER_MS);
  }
}

/* The same over a fresh comm pair, closed afterwards. */
static void one_way(int rank, int receiver, int sender, const size_t *sz, size_t n, uint64_t seed) {
  void *comm = st_pair_comm(rank, receiver, sender, SETUP_MS);
  send_each(comm, rank, sender, sz, n, seed);
  ST_NCCL(rank == sender ? st_net_close_send(comm) : st_net_close_recv(comm));
}

static int running(int rank, int nranks, void *arg) {
  (void)nranks;
  use_lanes(2);
  st_setup(arg, st_version(VERSION));
  one_way(rank, 0, 1, sizes, NSIZES, 100);
  one_way(rank, 1, 0, sizes, NSIZES, 200);
  /* The quiet window starts once both ranks closed their comms, and what was
   * still on its way between them has been taken. */
  st_barrier(SETUP_MS);
  st_sleep_ms(SETTLE_MS);
  struct lane_usage before = lane_usage();
  int nics = 0, threaded = 0, lanes = st_device_lanes(&nics, &threaded);
  ST_CHECK(lanes == 3 && threaded, "NCCL_SRD_PROGRESS_THREADS=2 but the device opened with %d lane(s) per NIC, %s",
           lanes, threaded ? "threaded" : "without progress threads");
  ST_CHECK(nics >= 1 && before.threads == 2 * nics,
           "%d lane threads named " LANE_PREFIX "* with 2 lanes per NIC and %d NIC(s) (expected %d)", before.threads,
           nics, 2 * nics);
  st_sleep_ms(QUIET_MS);
  struct lane_usage after = lane_usage();
  long hz = sysconf(_SC_CLK_TCK), used_ms = (after.ticks - before.ticks) * 1000 / (hz > 0 ? hz : 100);
  st_note("%d lane threads used %ld ms of CPU over %d quiet ms", after.threads, used_ms, QUIET_MS);
  /* Lanes that never sleep take a core each wherever they get one: at least
   * a third of one on a loaded 2-core host. Backed-off ones wake some 60
   * times a second (a sanitizer makes each wake dearer). */
  ST_CHECK(used_ms * 4 < QUIET_MS, "idle lanes used %ld ms of CPU in %d ms: they do not back off", used_ms,
           QUIET_MS);
  st_barrier(SETUP_MS);
  ST_NCCL(st_net_finalize());
  return 0;
}

/* Below the smallest eager size of any provider (8 KiB). */
static const size_t small_sizes[] = {0, 8, 100, 4096, 4096, 4096, 4096, 8, 8, 8, 8, 8, 8, 8, 8};
#define NSMALL (sizeof small_sizes / sizeof small_sizes[0])

static int inline_small(int rank, int nranks, void *arg) {
  (void)nranks;
  use_lanes(2);
  st_setup(arg, st_version(VERSION));
  void *comm = st_pair_comm(rank, 0, 1, SETUP_MS);
  send_each(comm, rank, 1, small_sizes, NSMALL, 500);
  st_barrier(SETUP_MS);
  ST_NCCL(rank == 1 ? st_net_close_send(comm) : st_net_close_recv(comm));
  struct st_traffic t = st_traffic_last(rank == 1);
  int nics = 0, threaded = 0, lanes = st_device_lanes(&nics, &threaded);
  struct lane_usage u = lane_usage();
  char why[64];
  size_t eager = st_device_eager_max(why, sizeof why);
  st_note("%s: %lld eager, %lld written, %lld completed on a lane thread; %d lane threads; eager up to %zu (%s)",
          rank ? "sender" : "receiver", t.eager, t.rendezvous, t.by_lane, u.threads, eager, why);
  ST_CHECK(lanes == 3 && threaded && u.threads == 2 * nics, "lanes not running: %d lane(s), %d thread(s)", lanes,
           u.threads);
  ST_CHECK(eager >= 8192, "eager size %zu: below the smallest default (8 KiB)", eager);
  ST_CHECK(t.eager == (long long)NSMALL && t.rendezvous == 0, "%lld eager, %lld written", t.eager, t.rendezvous);
  ST_CHECK(t.by_lane == 0, "%s: %lld small message(s) completed on a lane thread", rank ? "sender" : "receiver",
           t.by_lane);
  st_barrier(SETUP_MS);
  /* The eager size and one byte less, then sizes past it. */
  const size_t large[] = {0, 100, eager - 1, eager, 48 << 10, 64 << 10, 1 << 20, (4 << 20) + 136};
  const long long nlarge = (long long)(sizeof large / sizeof large[0]), written = 5;
  one_way(rank, 0, 1, large, (size_t)nlarge, 600);
  if (rank == 1) {
    t = st_traffic_last(1);
    st_note("sender, every size: %lld eager, %lld written in %lld write(s), %lld on lane 0", t.eager, t.rendezvous,
            t.writes, t.on_lane0);
    ST_CHECK(t.eager == nlarge - written && t.rendezvous == written && t.writes > written && t.on_lane0 == 0,
             "%lld eager, %lld written in %lld write(s), %lld on lane 0 (expected %lld eager and %lld written on "
             "the lanes only: from the eager size of %zu bytes up, the lanes)",
             t.eager, t.rendezvous, t.writes, t.on_lane0, nlarge - written, written, eager);
  }
  st_barrier(SETUP_MS);
  ST_NCCL(st_net_finalize());
  return 0;
}

static int written_inline(int rank, int nranks, void *arg) {
  (void)nranks;
  use_lanes(2);
  ST_CHECK(setenv("NCCL_SRD_EAGER_MAX", "8K", 1) == 0 && setenv("NCCL_SRD_STRIPE_THRESHOLD", "64K", 1) == 0,
           "setenv failed");
  st_setup(arg, st_version(VERSION));
  static const size_t between[] = {8, 12 << 10, 48 << 10, 48 << 10, 48 << 10};
  const long long n = (long long)(sizeof between / sizeof between[0]);
  void *comm = st_pair_comm(rank, 0, 1, SETUP_MS);
  send_each(comm, rank, 1, between, (size_t)n, 650);
  st_barrier(SETUP_MS);
  ST_NCCL(rank == 1 ? st_net_close_send(comm) : st_net_close_recv(comm));
  struct st_traffic t = st_traffic_last(rank == 1);
  int nics = 0, threaded = 0, lanes = st_device_lanes(&nics, &threaded);
  st_note("%s: %lld eager, %lld written in %lld write(s), %lld on lane 0, %lld completed on a lane thread",
          rank ? "sender" : "receiver", t.eager, t.rendezvous, t.writes, t.on_lane0, t.by_lane);
  ST_CHECK(lanes == 3 && threaded, "lanes not running: %d lane(s)", lanes);
  ST_CHECK(t.eager == 1 && t.rendezvous == n - 1 && t.by_lane == 0,
           "%s: %lld eager, %lld written, %lld completed on a lane thread (expected 1, %lld, 0)",
           rank ? "sender" : "receiver", t.eager, t.rendezvous, t.by_lane, n - 1);
  if (rank == 1)
    ST_CHECK(t.writes == n - 1 && t.on_lane0 == n - 1, "%lld write(s), %lld on lane 0 (expected %lld, all there)",
             t.writes, t.on_lane0, n - 1);
  st_barrier(SETUP_MS);
  ST_NCCL(st_net_finalize());
  unsetenv("NCCL_SRD_EAGER_MAX");
  unsetenv("NCCL_SRD_STRIPE_THRESHOLD");
  return 0;
}

static int lazy(int rank, int nranks, void *arg) {
  (void)nranks;
  unsetenv("NCCL_SRD_PROGRESS_THREADS");
  ST_CHECK(setenv("NCCL_SRD_TEST_CPUS", "4096", 1) == 0, "setenv failed");
  st_setup(arg, st_version(VERSION));
  void *comm = st_pair_comm(rank, 0, 1, SETUP_MS);
  static const size_t small[] = {8, 100, 4096};
  send_each(comm, rank, 1, small, sizeof small / sizeof small[0], 700);
  int nics = 0, threaded = 0, lanes = st_device_lanes(&nics, &threaded);
  struct lane_usage u = lane_usage();
  st_note("after small messages: %d lane(s) per NIC, %d lane thread(s)", lanes, u.threads);
  ST_CHECK(lanes > 1, "4096 CPUs assumed but the device opened with %d lane(s) per NIC", lanes);
  ST_CHECK(u.threads == 0, "%d lane thread(s) run although no large message went by", u.threads);
  st_barrier(SETUP_MS);
  if (rank == 1) st_send_one(comm, 1 << 20, 710, 10, XFER_MS);
  else st_recv_one(comm, 1 << 20, 710, 10, XFER_MS);
  ST_NCCL(rank == 1 ? st_net_close_send(comm) : st_net_close_recv(comm));
  one_way(rank, 1, 0, sizes, NSIZES, 800);
  u = lane_usage();
  st_note("after large messages: %d lane thread(s)", u.threads);
  ST_CHECK(u.threads == (lanes - 1) * nics, "%d lane thread(s) after large messages; expected %d", u.threads,
           (lanes - 1) * nics);
  st_barrier(SETUP_MS);
  ST_NCCL(st_net_finalize());
  unsetenv("NCCL_SRD_TEST_CPUS");
  return 0;
}

static int mixed(int rank, int nranks, void *arg) {
  (void)nranks;
  use_lanes(rank == 0 ? 0 : 3);
  st_setup(arg, st_version(VERSION));
  one_way(rank, 0, 1, sizes, NSIZES, 300);
  one_way(rank, 1, 0, sizes, NSIZES, 400);
  int nics = 0, threaded = 0, lanes = st_device_lanes(&nics, &threaded);
  struct lane_usage u = lane_usage();
  ST_CHECK(lanes == (rank == 0 ? 1 : 4) && threaded == (rank == 1) && u.threads == (rank == 0 ? 0 : 3 * nics),
           "NCCL_SRD_PROGRESS_THREADS=%d: %d lane(s) per NIC, %d NIC(s), %s, %d lane threads", rank == 0 ? 0 : 3,
           lanes, nics, threaded ? "threaded" : "not threaded", u.threads);
  st_barrier(SETUP_MS);
  ST_NCCL(st_net_finalize());
  return 0;
}

static int run2(const struct st_ctx *ctx, st_rank_fn fn) {
  char label[128];
  snprintf(label, sizeof label, "%s[%s]", ctx->test, ctx->provider);
  struct st_group_opts opts = {0}; /* the default alarm: a hang guard */
  return st_group_run(label, 2, fn, (void *)ctx, &opts);
}

static int case_running(const struct st_ctx *ctx) { return run2(ctx, running); }
static int case_mixed(const struct st_ctx *ctx) { return run2(ctx, mixed); }
static int case_inline(const struct st_ctx *ctx) { return run2(ctx, inline_small); }
static int case_written_inline(const struct st_ctx *ctx) { return run2(ctx, written_inline); }
static int case_lazy(const struct st_ctx *ctx) { return run2(ctx, lazy); }

int main(int argc, char **argv) {
  static const struct st_case cases[] = {
      {"lanes-running", case_running},
      {"lanes-mixed", case_mixed},
      {"lanes-inline", case_inline},
      {"lanes-written-inline", case_written_inline},
      {"lanes-lazy", case_lazy},
  };
  return st_main(argc, argv, cases, 5);
}
