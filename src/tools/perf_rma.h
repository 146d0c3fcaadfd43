/* srd-perf's one-sided mode (--rma): the same two processes and sweep, but
 * the patterns time puts, puts with a signal or gets between two windows
 * each side registered, through the plugin's ncclRmaPlugin_v14 table
 * (perf_rma_plugin.c) or plain libfabric RMA (perf_rma_raw.c, the
 * baseline). The patterns (perf_rma_bench.c) see only struct perf_rma. */
#ifndef SRD_TOOLS_PERF_RMA_H
#define SRD_TOOLS_PERF_RMA_H

#include <stddef.h>
#include <stdint.h>

#include "perf_args.h"
#include "perf_bench.h"
#include "perf_transport.h"

struct perf_rma;

/* Every call returns 0, or -1 after printing what went wrong. */
struct perf_rma_ops {
  /* Both processes call it at once; the client is rank 0. fd is the
   * control channel, kept for the collective registrations. */
  int (*connect)(struct perf_rma *t, int fd, int is_client, int timeout_s);
  /* Collective: both sides register their [buf, buf+len) in the same order;
   * *win names ours and the peer's of the same index. */
  int (*reg)(struct perf_rma *t, void *buf, size_t len, void **win);
  int (*dereg)(struct perf_rma *t, void *win);
  /* size bytes from our src+src_off into the peer's dst+dst_off; with
   * signal, the peer's signal count grows by one once they all landed.
   * 0 with *req NULL: the transport is full, call again. */
  int (*put)(struct perf_rma *t, void *src, size_t src_off, void *dst, size_t dst_off, size_t size, int signal,
             void **req);
  /* size bytes of the peer's remote+remote_off into our local+local_off. */
  int (*get)(struct perf_rma *t, void *local, size_t local_off, void *remote, size_t remote_off, size_t size,
             void **req);
  /* Progresses; *done once the op completed at this side (req is gone). */
  int (*test)(struct perf_rma *t, void *req, int *done);
  /* Progresses; how many signals of the peer's reached us so far. */
  int (*signals)(struct perf_rma *t, uint64_t *count);
  /* Undo connect (windows deregistered first); both sides call it. */
  int (*disconnect)(struct perf_rma *t);
};

/* base carries what the report prints; base.ops has destroy only. */
struct perf_rma {
  struct perf_transport base;
  const struct perf_rma_ops *rma;
};

/* The plugin at path ("" for ours) through its ncclRmaPlugin_v14 table, on
 * NCCL device dev. NULL after printing why (no table, init refused: the
 * plugin's reason). */
struct perf_transport *perf_rma_plugin_open(const char *path, int dev);
/* libfabric RMA on the provider and NIC group dev the plugin would use, on
 * srd-perf --raw's rails: the NICs' endpoints, and from the plugin's stripe
 * threshold up as many lanes (an endpoint and a thread each) as it has. */
struct perf_transport *perf_rma_raw_open(int dev);

/* The patterns, in step on both sides like perf_session_*. */
struct perf_rma_session;
struct perf_rma_session *perf_rma_session_open(struct perf_transport *t, int ctrl_fd, const struct perf_opts *o,
                                               int is_client);
int perf_rma_session_run(struct perf_rma_session *s, size_t size, struct perf_result *res);
int perf_rma_session_close(struct perf_rma_session *s);

#endif
