/* srd-perf's patterns, written once against struct perf_transport: connection
 * setup as NCCL does it (listen, exchange handles, non-blocking
 * connect/accept), ping-pong latency, windowed uni- and bidirectional streams
 * over many comms, grouped receives, optional data verification. Both
 * processes run the same sequence; the client measures and reports. */
#ifndef SRD_TOOLS_PERF_BENCH_H
#define SRD_TOOLS_PERF_BENCH_H

#include <stddef.h>

#include "perf_args.h"
#include "perf_stats.h"
#include "perf_transport.h"

struct perf_result {
  size_t size;
  int iters, warmup;
  int have_lat;
  struct perf_stats lat_us; /* one-way latency: half the round trip */
  int have_bw;
  double bw_GBps, bw_msg_rate; /* client to server: GB/s (1e9 bytes/s), messages per second */
  int have_bibw;
  double bibw_GBps, bibw_msg_rate; /* both directions together */
  /* --runs: the values above are the median run's; these are the runs'
   * spread (all equal with one run). */
  int runs;
  double lat_p50_min, lat_p50_max, bw_min, bw_max, bibw_min, bibw_max;
};

struct perf_session;

/* Connect every comm in both directions and register the buffers. */
struct perf_session *perf_session_open(struct perf_transport *t, int ctrl_fd, const struct perf_opts *o,
                                       int is_client);
/* Run every selected pattern at one size; both sides call it in step. */
int perf_session_run(struct perf_session *s, size_t size, struct perf_result *res);
/* Deregister and close; returns -1 when a close failed. */
int perf_session_close(struct perf_session *s);

#endif
