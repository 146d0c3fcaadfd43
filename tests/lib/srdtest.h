/* Shared plumbing for the functional and ABI tests of libnccl-net-srd.so.
 *
 * The tests drive the plugin exactly as NCCL does: dlopen(RTLD_NOW|RTLD_LOCAL),
 * dlsym one ncclNetPlugin_vN table, and call it. This library hides the
 * differences between ABI versions 8..12 behind one set of st_net_* calls,
 * runs a test as N forked processes joined by a mesh of socketpairs (the
 * out-of-band channel that carries listen handles), and provides data
 * patterns and deadlines. Every wait is bounded: a hang becomes a failure.
 *
 * Each test process loads the plugin itself after fork(), so the parent never
 * holds libfabric state across fork(). */
#ifndef SRD_TEST_H
#define SRD_TEST_H

#include <stddef.h>
#include <stdint.h>

#include "nccl/net.h"

/* ---------- failing a test process ---------- */

/* Print where and why, then end this test process with status 1. Test
 * processes are forked children, so ending them is how a failure is reported. */
void st_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4), noreturn));
void st_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define ST_CHECK(cond, ...)                                   \
  do {                                                        \
    if (!(cond)) st_fail(__FILE__, __LINE__, __VA_ARGS__);    \
  } while (0)

/* A plugin call that must succeed. */
#define ST_NCCL(call)                                                                   \
  do {                                                                                  \
    ncclResult_t st_rc_ = (call);                                                       \
    if (st_rc_ != ncclSuccess) st_fail(__FILE__, __LINE__, "%s returned %d", #call, (int)st_rc_); \
  } while (0)

/* ---------- time ---------- */

int64_t st_now_ms(void);
void st_sleep_ms(int ms);

/* ---------- loading the plugin and the version adapter ---------- */

/* Path of the plugin: $SRD_TEST_PLUGIN, else $top_builddir/.libs/libnccl-net-srd.so. */
const char *st_plugin_path(void);
/* dlopen the plugin as NCCL does and return the table ncclNetPlugin_v<version>
 * (NULL with a message on stderr when absent). Does not call init. */
void *st_plugin_table(int version);
/* Load table v<version> and initialize it (v11+: with a per-communicator
 * context, trafficClass -1). Fails the process on error. */
void st_net_load(int version);
int st_net_version(void);
/* The table name reported by the loaded version. */
const char *st_net_name(void);
/* v11+: finalize the context from init; other versions: nothing to do. */
ncclResult_t st_net_finalize(void);

/* Properties common to every version. */
struct st_props {
  const char *name;
  const char *pci_path;
  uint64_t guid;
  int ptr_support;
  int reg_is_global;
  int speed;
  int port;
  float latency;
  int max_comms;
  int max_recvs;
  size_t max_p2p_bytes; /* v9+: the largest message NCCL gives one isend; v8: 0 */
};

ncclResult_t st_net_devices(int *ndev);
ncclResult_t st_net_get_properties(int dev, struct st_props *props);
ncclResult_t st_net_listen(int dev, void *handle, void **listen_comm);
/* One non-blocking call each: success with a NULL comm means "call again". */
ncclResult_t st_net_connect(int dev, void *handle, void **send_comm);
ncclResult_t st_net_accept(void *listen_comm, void **recv_comm);
ncclResult_t st_net_reg_mr(void *comm, void *data, size_t size, void **mhandle);
ncclResult_t st_net_dereg_mr(void *comm, void *mhandle);
/* Sizes are size_t for every version; v8 gets them as int (the tests keep
 * v8 traffic below 2 GiB). *request NULL on success means "try again". */
ncclResult_t st_net_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle, void **request);
ncclResult_t st_net_irecv(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags, void **mhandles,
                          void **request);
ncclResult_t st_net_test(void *request, int *done, int *sizes);
ncclResult_t st_net_close_send(void *send_comm);
ncclResult_t st_net_close_recv(void *recv_comm);
ncclResult_t st_net_close_listen(void *listen_comm);

/* The logger st_net_load gives the plugin (for other tables of it: ncclRma). */
ncclDebugLogger_t st_logger(void);
/* Warnings the plugin logged through our logger since load. */
int st_warn_count(void);
/* The first warning the plugin logged ("none" if none), for a failure message. */
void st_first_warning(char *out, size_t cap);
/* How many of the plugin's last 256 log lines (every level, whatever
 * NCCL_DEBUG says) contain needle. */
int st_log_count(const char *needle);

/* What a comm carried, by path, from the INFO line the plugin logs when it
 * closes a comm ("send comm 0x1 closed: 2 eager message(s), 1 by RMA write in
 * 4 write(s)"). Call right after closing it. */
struct st_traffic {
  long long eager;      /* inline messages */
  long long rendezvous; /* messages written after the receiver's clear-to-send */
  long long writes;     /* RMA writes (stripes) */
  long long on_lane0;   /* of the writes a sender posted, those on lane 0 (the caller's thread) */
  long long by_lane;    /* requests completed on a lane thread */
};
/* The latest closed send (is_send 1) or recv comm's; fails the process when
 * there is none. */
struct st_traffic st_traffic_last(int is_send);

/* Lanes per NIC of the device this process opened last, from the plugin's
 * INFO line (-1 when none opened); *nics its NIC count, *threaded 1 when one
 * thread polls each lane and they were not given up. With
 * SRD_TEST_EXPECT_LANES=N set, st_net_finalize fails the process when a
 * device opened with other than N threaded lanes. */
int st_device_lanes(int *nics, int *threaded);
/* The largest eager message of the device this process opened last, from
 * the same line (0 when none opened), and what set it: NCCL_SRD_EAGER_MAX or
 * the provider's name (at most len bytes into why). */
size_t st_device_eager_max(char *why, size_t len);

/* ---------- bounded helpers over the plugin ---------- */

/* Outcome of waiting on the plugin. */
enum st_wait { ST_DONE = 0, ST_ERROR = 1, ST_TIMEOUT = 2 };

/* Call connect / accept until a comm appears, an error, or timeout_ms. The
 * plugin's return code is stored in *rc when rc is not NULL. */
enum st_wait st_connect_wait(int dev, void *handle, void **send_comm, int timeout_ms, ncclResult_t *rc);
enum st_wait st_accept_wait(void *listen_comm, void **recv_comm, int timeout_ms, ncclResult_t *rc);
/* Drive a connect and an accept at once (a rank that is both a sender and a
 * receiver, as in a ring). Fails the process on error or timeout. */
void st_connect_accept(int dev, void *handle, void **send_comm, void *listen_comm, void **recv_comm, int timeout_ms);
/* Post an isend, retrying while the plugin answers "later". */
enum st_wait st_isend_wait(void *send_comm, void *data, size_t size, int tag, void *mhandle, void **request,
                           int timeout_ms, ncclResult_t *rc);
/* Post an irecv, retrying while the plugin answers "later". */
enum st_wait st_irecv_wait(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags, void **mhandles,
                           void **request, int timeout_ms, ncclResult_t *rc);
/* test() until done; sizes may be NULL. */
enum st_wait st_test_wait(void *request, int *sizes, int timeout_ms, ncclResult_t *rc);

/* Two ranks of a group: `receiver` listens on device 0 and passes the handle
 * to `sender` through the out-of-band channel; both wait for their comm.
 * Returns this rank's comm (a recv comm on the receiver, a send comm on the
 * sender); fails the process on error or timeout. */
void *st_pair_comm(int rank, int receiver, int sender, int timeout_ms);

/* One message of `size` patterned bytes through a comm, from a buffer each
 * side registers for it; the receiver verifies size and bytes. */
void st_send_one(void *send_comm, size_t size, uint64_t seed, int tag, int timeout_ms);
void st_recv_one(void *recv_comm, size_t size, uint64_t seed, int tag, int timeout_ms);

/* ---------- data patterns ---------- */

/* Deterministic bytes that differ at every offset and for every seed. */
void st_pattern_fill(void *buf, size_t size, uint64_t seed);
/* Offset of the first byte that differs from the pattern, or SIZE_MAX. */
size_t st_pattern_check(const void *buf, size_t size, uint64_t seed);
/* Offset of the first byte in buf[0..size) that is not `byte`, or SIZE_MAX. */
size_t st_check_byte(const void *buf, size_t size, uint8_t byte);
/* Page-aligned zeroed memory; fails the process when out of memory. */
void *st_alloc(size_t size);
void st_free(void *buf, size_t size);

/* ---------- process groups ---------- */

/* What a test runs in every process. Returns the process's exit status. */
typedef int (*st_rank_fn)(int rank, int nranks, void *arg);

/* Hang guards: how long a wait for setup, a transfer or a peer may take
 * before a test calls it a hang. They catch hangs, never a slow machine
 * (opening one device of 12 rails took 100 s on 2 cores shared by 8 builds),
 * so they are minutes; a bound a test checks derives from the plugin's own
 * timeouts instead. */
#define ST_HANG_MS (5 * 60 * 1000)
#define ST_CASE_HANG_S (20 * 60) /* a whole case */

struct st_group_opts {
  int timeout_s;      /* alarm in every process (a hang kills it); 0: ST_CASE_HANG_S */
  /* Ranks that are expected to die by SIGKILL (bit per rank). */
  unsigned killed_mask;
};

/* Fork nranks processes running fn, with a socketpair between every two of
 * them, and wait for them all, bounded. Returns 0 when every process exited
 * with status 0 (or died by SIGKILL when killed_mask says so), else 1, after
 * printing what each failing process did. */
int st_group_run(const char *label, int nranks, st_rank_fn fn, void *arg, const struct st_group_opts *opts);

/* Inside a group process: this process's label ("sizes[shm] r1"). */
const char *st_label(void);
/* Out-of-band messages to / from another rank of the group (blocking,
 * bounded by timeout_ms; failure ends the process). */
void st_oob_send(int peer, const void *buf, size_t len);
void st_oob_recv(int peer, void *buf, size_t len, int timeout_ms);
/* 1 when a message from peer is waiting (does not read it). */
int st_oob_ready(int peer);
/* The file descriptor of the channel to peer (to poll it). */
int st_oob_fd(int peer);
void st_barrier(int timeout_ms);

/* ---------- test programs ---------- */

struct st_ctx {
  const char *provider; /* NCCL_SRD_PROVIDER for this run */
  const char *test;     /* the test case's name */
};

struct st_case {
  const char *name;
  int (*run)(const struct st_ctx *ctx); /* 0: pass, ST_SKIP (st_skip): does not apply, else fail */
};

/* Automake's "skipped" status; a case that does not apply to a provider
 * returns st_skip(ctx, why), which prints why. */
#define ST_SKIP 77
int st_skip(const struct st_ctx *ctx, const char *why);

/* Runs every case for every provider: argv[1] (a comma-separated list of
 * providers), else $SRD_TEST_PROVIDERS, else "tcp,shm". Optional
 * argv[2]: run only the cases it names (comma-separated). Prints one PASS/FAIL/SKIP line
 * per case and provider; returns 1 when a case failed, ST_SKIP when every
 * case was skipped, else 0. */
int st_main(int argc, char **argv, const struct st_case *cases, int ncases);

/* In a test process: select the provider and load the plugin version. */
void st_setup(const struct st_ctx *ctx, int version);

/* The ABI version a test uses: $SRD_TEST_NET_VERSION when set, else def. */
int st_version(int def);

#endif
