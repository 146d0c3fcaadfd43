/* Hop statistics: where the time of one message goes on the proxy path
 * (calls into the plugin, libfabric calls, lock contention, lane wake-ups).
 * Built only with `configure --enable-hop-stats` (a benchmark build): without
 * it every SRD_STAT* macro is empty and nothing runs in the hot path. The
 * counters are per process and printed to stderr when the library unloads. */
#ifndef SRD_STATS_H
#define SRD_STATS_H

#include <stdint.h>

enum srd_stat {
  SRD_STAT_ISEND,          /* isend calls */
  SRD_STAT_ISEND_AGAIN,    /* ... that found no clear-to-send (NCCL calls again) */
  SRD_STAT_IRECV,          /* irecv calls */
  SRD_STAT_TEST,           /* test calls */
  SRD_STAT_TEST_DONE,      /* ... that returned done */
  SRD_STAT_TEST_BUSY,      /* ... that found a lane holding the lock */
  SRD_STAT_NS_IN_CALLS,    /* ns inside isend/irecv/test */
  SRD_STAT_LOCK,           /* dev->lock taken by an entry point */
  SRD_STAT_LOCK_WAITED,    /* ... and it was held by another thread first */
  SRD_STAT_CQ_READ,        /* fi_cq_read / fi_cq_readfrom calls */
  SRD_STAT_CQ_EMPTY,       /* ... that returned nothing */
  SRD_STAT_CQ_BY_CALLER,   /* CQ reads made by the caller's thread (inline) */
  SRD_STAT_FI_SEND,        /* control messages posted (eager, clear-to-send, ...) */
  SRD_STAT_FI_WRITE,       /* RMA writes posted */
  SRD_STAT_FI_RECV,        /* receive buffers reposted */
  SRD_STAT_EAGER_SENT,     /* messages sent inline */
  SRD_STAT_CTS_SENT,       /* clear-to-sends posted */
  SRD_STAT_CTS_WAIT_NS,    /* sender: ns from the first isend without a clear-to-send to its arrival */
  SRD_STAT_RTS_SENT,       /* requests to send posted (a message that found no clear-to-send) */
  SRD_STAT_KICK_SIGNAL,    /* kicks that signalled sleeping lanes (a futex wake) */
  SRD_STAT_LANE_SLEEP,     /* lane sleeps */
  SRD_STAT_LANE_WOKEN,     /* ... that ended by a kick before their timeout */
  SRD_STAT_LANE_YIELD,     /* lane sched_yield calls while idle */
  SRD_STAT_LANES_STARTED,  /* lane threads started */
  SRD_STAT_LANE_RING_FULL, /* lane polls skipped: its ring waited for the lock's holder */
  SRD_STAT_LANE_LOCK,      /* dev->lock taken by a lane (a refused write, a failed CQ, a drain) */
  SRD_STAT_LANE_LOCK_WAITED, /* ... and it was held by another thread first */
  SRD_STAT_LANE_LOCK_NS,   /* ns lanes waited for it */
  SRD_STAT_COUNT
};

#ifdef SRD_HOP_STATS
void srd_stat_add(enum srd_stat s, uint64_t v);
uint64_t srd_stat_now_ns(void);
#define SRD_STAT(s) srd_stat_add((s), 1)
#define SRD_STAT_ADD(s, v) srd_stat_add((s), (v))
#define SRD_STAT_T0(var) uint64_t var = srd_stat_now_ns()
#define SRD_STAT_SINCE(s, var) srd_stat_add((s), srd_stat_now_ns() - (var))
#else
#define SRD_STAT(s) ((void)0)
#define SRD_STAT_ADD(s, v) ((void)0)
#define SRD_STAT_T0(var) ((void)0)
#define SRD_STAT_SINCE(s, var) ((void)0)
#endif

#endif
