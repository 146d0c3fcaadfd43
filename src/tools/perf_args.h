/* srd-perf command line: a pure parser (no I/O, no globals) so every option
 * and every rejection is unit-tested. */
#ifndef SRD_TOOLS_PERF_ARGS_H
#define SRD_TOOLS_PERF_ARGS_H

#include <stddef.h>

#define PERF_MAX_COMMS 256
#define PERF_MAX_WINDOW 32 /* NCCL_NET_MAX_REQUESTS: requests in flight per comm */
#define PERF_MAX_GROUP 8   /* grouped receives, NCCL's maxRecvs */
#define PERF_MAX_RUNS 100  /* --runs: each size timed at most this often */
#define PERF_DEFAULT_PORT 18515

enum perf_role { PERF_ROLE_LOCAL, PERF_ROLE_SERVER, PERF_ROLE_CLIENT };

/* Which patterns run at each size. */
enum {
  PERF_TEST_LAT = 1 << 0,  /* ping-pong latency */
  PERF_TEST_BW = 1 << 1,   /* unidirectional bandwidth and message rate */
  PERF_TEST_BIBW = 1 << 2, /* bidirectional bandwidth */
};

/* One-sided mode (--rma): which op the patterns time, through the plugin's
 * ncclRmaPlugin_v14 table or plain libfabric RMA. */
enum perf_rma_op { PERF_RMA_OFF = 0, PERF_RMA_PUT, PERF_RMA_PUTSIG, PERF_RMA_GET };

struct perf_opts {
  enum perf_role role;
  char host[256];    /* peer for --client */
  int port;
  int raw;           /* drive libfabric directly instead of a plugin */
  char plugin[1024]; /* "" means: find our own libnccl-net-srd.so */
  int net_version;   /* ncclNet table to drive, 0: the highest exported */
  int dev;           /* NCCL device (plugin) or device group (raw) */
  int tests;         /* PERF_TEST_* bits */
  size_t min_size, max_size;
  int factor;        /* size multiplier between sweep points */
  int iters;         /* 0: chosen per size */
  int warmup;        /* -1: chosen per size */
  int comms;
  int window;        /* requests in flight per comm */
  int group;         /* buffers per grouped receive */
  int check;
  int pin;           /* local run: client and server on two different CPUs */
  int json;
  int compare;       /* the default local run: our plugin, then raw libfabric, side by side */
  int cuda;
  int timeout_s;     /* bound on waiting for the peer */
  enum perf_rma_op rma;
  int runs;          /* timed runs per size; 0 until parsed: 3 for compare, else 1 */
};

enum perf_args_result { PERF_ARGS_OK = 0, PERF_ARGS_HELP = 1, PERF_ARGS_ERROR = -1 };

void perf_args_defaults(struct perf_opts *o);
/* Fills *o (after defaults). On PERF_ARGS_ERROR, err says which argument is
 * wrong and why. */
enum perf_args_result perf_args_parse(int argc, char *const argv[], struct perf_opts *o, char *err, size_t errlen);
/* Parse "64", "8K", "4M", "1G" (powers of 1024); 0 on success. */
int perf_parse_size(const char *text, size_t *out);
/* "8 B", "4 KiB", "64 MiB": exact binary units when they divide, else bytes. */
void perf_format_size(size_t bytes, char *buf, size_t len);
/* Sweep points: min, min*factor, ... and max itself; returns the count
 * written (at most cap). */
size_t perf_sweep(size_t min_size, size_t max_size, int factor, size_t *sizes, size_t cap);
/* Timed iterations and warmup at a size: the options' values, else about
 * 32 MiB per point (4 to 1000 iterations) and a tenth of that as warmup. */
void perf_iters_for(const struct perf_opts *o, size_t size, int *iters, int *warmup);
/* "put", "putsig", "get" (NULL for PERF_RMA_OFF). */
const char *perf_rma_op_name(enum perf_rma_op op);
extern const char perf_usage[];

#endif
