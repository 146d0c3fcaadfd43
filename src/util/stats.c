/* Hop statistics (see srd/stats.h): relaxed atomic counters, printed once when
 * the library unloads. Compiled to nothing without --enable-hop-stats. */
#include "srd/stats.h"

#ifdef SRD_HOP_STATS
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static _Atomic uint64_t counters[SRD_STAT_COUNT];

static const char *const names[SRD_STAT_COUNT] = {
    "isend", "isend_again", "irecv", "test", "test_done", "test_busy", "ns_in_calls", "lock", "lock_waited",
    "cq_read", "cq_empty", "cq_by_caller", "fi_send", "fi_write", "fi_recv", "eager_sent", "cts_sent",
    "cts_wait_ns", "rts_sent", "kick_signal", "lane_sleep", "lane_woken", "lane_yield", "lanes_started",
    "lane_ring_full", "lane_lock", "lane_lock_waited", "lane_lock_ns",
};

void srd_stat_add(enum srd_stat s, uint64_t v) { atomic_fetch_add_explicit(&counters[s], v, memory_order_relaxed); }

uint64_t srd_stat_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

__attribute__((destructor)) static void print_stats(void) {
  uint64_t v[SRD_STAT_COUNT];
  for (int i = 0; i < SRD_STAT_COUNT; i++) v[i] = atomic_load(&counters[i]);
  if (!v[SRD_STAT_ISEND] && !v[SRD_STAT_IRECV]) return;
  char line[2048];
  int n = snprintf(line, sizeof(line), "srd hop-stats pid %d:", (int)getpid());
  for (int i = 0; i < SRD_STAT_COUNT && n < (int)sizeof(line); i++)
    n += snprintf(line + n, sizeof(line) - (size_t)n, " %s=%llu", names[i], (unsigned long long)v[i]);
  fprintf(stderr, "%s\n", line);
}
#endif
