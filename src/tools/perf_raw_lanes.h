/* srd-perf's raw lanes (perf_raw_lanes.c): as many extra endpoints per NIC
 * as the plugin has progress lanes, each fed and reaped by a thread of its
 * own, so that raw moves a large message (two-sided, or srd-perf --rma's
 * op) over as many connections, with as many threads, as the plugin does.
 * A lane's thread alone posts on its endpoint and reads its completion
 * queue; the caller hands it stripes and takes its completions back through
 * two queues under the lane's lock, so every protocol state stays with the
 * caller's thread. */
#ifndef SRD_TOOLS_PERF_RAW_LANES_H
#define SRD_TOOLS_PERF_RAW_LANES_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_eq.h>

struct raw;
struct raw_rail;

/* What a lane posts for a stripe: two-sided messages write with immediate
 * data; srd-perf --rma writes (put), writes with data (put+signal) and
 * reads (get). */
enum raw_lane_kind { RAW_LANE_WRITEDATA, RAW_LANE_WRITE, RAW_LANE_READ };

/* One stripe: the libfabric call's arguments (imm for writedata only). */
struct raw_lane_op {
  enum raw_lane_kind kind;
  struct fi_context2 *ctx;
  void *buf;
  size_t len;
  void *desc;
  uint64_t imm;
  fi_addr_t dest;
  uint64_t addr, key;
};

struct raw_lane {
  struct raw_rail *rail;
  pthread_t thread;
  int running;
  pthread_mutex_t lock;
  pthread_cond_t wake;
  atomic_uint activity; /* bumped by every caller's progress: keeps an idle lane polling */
  atomic_int sleeping;
  atomic_int stop;
  /* Hints that todo or done (or error) changed, read without the lock, so
   * that neither the lane nor a caller polling at full speed takes the lock
   * for nothing: the two would contend for it on every poll. */
  atomic_int has_todo, has_done;
  /* Under lock. */
  struct raw_lane_op *todo; /* stripes to post */
  size_t ntodo, todo_cap;
  struct fi_cq_data_entry *done; /* completions for the caller */
  size_t ndone, done_cap;
  int error; /* the thread stopped: this libfabric error */
  char why[256];
  /* The caller's: completions taken from done, swapped with it. */
  struct fi_cq_data_entry *taken;
  size_t taken_cap;
};

/* Open the lanes' rails (NCCL_SRD_PROGRESS_THREADS, else the plugin's own
 * automatic count; none on efa) once, at the first listen or connect, when
 * the plugin reads the count of our processes too. */
int raw_lanes_open(struct raw *r);
/* Start the threads at the first message of the stripe threshold or more,
 * as the plugin does: before, the lanes' endpoints carry nothing. */
int raw_lanes_start(struct raw *r);
void raw_lanes_stop(struct raw *r);
/* Queue a stripe on rail (a lane's). */
int raw_lane_post(struct raw *r, int rail, const struct raw_lane_op *w);
/* Post a stripe on an endpoint: fi_writedata, fi_write or fi_read. */
ssize_t raw_post_op(struct fid_ep *ep, const struct raw_lane_op *w);
const char *raw_op_name(enum raw_lane_kind kind);
/* Wake the lanes and hand their completions to on_completion. */
int raw_lanes_progress(struct raw *r, void (*on_completion)(struct raw *r, const struct fi_cq_data_entry *e));
/* The rails a message of size bytes is written on: *first and the count.
 * From the stripe threshold up, the lanes' (their threads started here),
 * below it, lane 0's, the NICs' own endpoints. */
int raw_stripe_rails(struct raw *r, size_t size, int *first);
/* The stripe of a size-byte message over nrails: 128-byte aligned, none
 * below the plugin's smallest stripe, each within max_msg_size. */
size_t raw_stripe_len(const struct raw *r, size_t size, int nrails);

#endif
