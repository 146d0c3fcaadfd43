#define _GNU_SOURCE /* pthread_timedjoin_np, pthread_setname_np */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fi_errno.h>

#include "nccl/net_common.h"
#include "srd/log.h"
#include "srd/param.h"
#include "srd/proto.h"

#define POLL_BUDGET 64
#define SCAN_INTERVAL_MS 100

uint64_t srd_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t srd_random64(void) {
  uint64_t v = 0;
  while (getrandom(&v, sizeof(v), 0) != sizeof(v) || v == 0) {
  }
  return v;
}

static void on_message(void *arg, struct srd_rail *rail, const void *buf, size_t len);
static void on_remote_write(void *arg, struct srd_rail *rail, uint32_t imm, size_t len);
static void on_rail_error(void *arg, struct srd_rail *rail, int err, const char *errstr);

static void free_closed(struct srd_dev *dev, bool all);

static size_t ctrl_buf_size(const struct srd_dev *dev) {
  size_t hello = 32 + (size_t)SRD_MAX_PATHS * SRD_NAME_MAX;
  size_t cts = 16 + (size_t)SRD_MAX_RECVS * (20 + 8 * SRD_MAX_RAILS);
  size_t eager = 32 + dev->eager_max;
  size_t m = hello > cts ? hello : cts;
  return m > eager ? m : eager;
}

void srd_dev_init(struct srd_dev *dev, int index) {
  dev->index = index;
  pthread_mutex_init(&dev->lock, NULL);
  pthread_mutex_init(&dev->wake_lock, NULL);
  pthread_cond_init(&dev->wake, NULL);
  atomic_init(&dev->stop, false);
  atomic_init(&dev->activity, 0);
  atomic_init(&dev->sleepers, 0);
}

/* Lanes per NIC within what a hello (paths) and a clear-to-send (keys per
 * rail) can name. */
static int lanes_that_fit(int want, int nnics, int neps) {
  int lanes = want;
  if (lanes * nnics > SRD_MAX_RAILS) lanes = SRD_MAX_RAILS / nnics;
  if (lanes * nnics * neps > SRD_MAX_PATHS) lanes = SRD_MAX_PATHS / (nnics * neps);
  return lanes < 1 ? 1 : lanes;
}

/* CPUs this process may run on, 0 when unknown. */
static int cpus_available(void) {
  cpu_set_t set;
  return sched_getaffinity(0, sizeof(set), &set) ? 0 : CPU_COUNT(&set);
}

static void close_rails(struct srd_dev *dev) {
  for (int i = 0; i < dev->nrails; i++) srd_rail_close(&dev->rails[i]);
  free(dev->rails);
  dev->rails = NULL;
  dev->nrails = 0;
}

/* Rail i is lane i / nnics of NIC i % nnics: a peer with another lane count
 * maps rail i to its rail i mod n, which is then on the same NIC index. */
static int open_rails(struct srd_dev *dev, int lanes, bool thread_safe) {
  struct srd_rail_handlers h = {on_message, on_remote_write, on_rail_error, dev};
  dev->nrails = dev->nnics * lanes;
  dev->rails = calloc((size_t)dev->nrails, sizeof(*dev->rails));
  if (!dev->rails) return -FI_ENOMEM;
  for (int i = 0; i < dev->nrails; i++) {
    const struct srd_nic *nic = &dev->nics->nics[dev->group.rails[i % dev->nnics]];
    int rc = srd_rail_open(&dev->rails[i], i, nic->info, dev->neps, ctrl_buf_size(dev), thread_safe, &h);
    if (rc) {
      dev->nrails = i;
      close_rails(dev);
      return rc;
    }
    SRD_INFO(NCCL_INIT | NCCL_NET, "device %d rail %d: %s lane %d (%d Mbps, PCI %s, NUMA %d), %d endpoint(s)%s",
             dev->index, i, nic->name, i / dev->nnics, nic->speed_mbps, nic->pci_bus_id[0] ? nic->pci_bus_id : "none",
             nic->numa, dev->neps, thread_safe ? ", thread-safe domain" : "");
  }
  dev->lanes_per_nic = lanes;
  return 0;
}

static void start_lanes(struct srd_dev *dev);

int srd_dev_open(struct srd_dev *dev) {
  dev->neps = (int)srd_param_int(SRD_PARAM_EPS_PER_RAIL);
  dev->eager_max = (size_t)srd_param_int(SRD_PARAM_EAGER_MAX);
  dev->nnics = dev->group.nrails;
  int want = (int)srd_param_int(SRD_PARAM_PROGRESS_THREADS);
  int lanes = want ? lanes_that_fit(want, dev->nnics, dev->neps) : 1;
  if (lanes != (want ? want : 1))
    SRD_WARN("device %d: NCCL_SRD_PROGRESS_THREADS=%d with %d NIC(s) x %d endpoint(s) exceeds %d rails or %d paths; "
             "using %d lane(s) per NIC", dev->index, want, dev->nnics, dev->neps, SRD_MAX_RAILS, SRD_MAX_PATHS, lanes);
  int rc = open_rails(dev, lanes, want > 0);
  if (rc && want > 0) {
    SRD_WARN("device %d: cannot open %d thread-safe lane(s) per NIC (%s); progress threads off", dev->index, lanes,
             fi_strerror(-rc));
    want = 0;
    rc = open_rails(dev, 1, false);
  }
  if (rc) return rc;
  size_t max_write = SIZE_MAX;
  for (int i = 0; i < dev->nrails; i++)
    if (dev->rails[i].max_write < max_write) max_write = dev->rails[i].max_write;
  dev->npaths = dev->nrails * dev->neps;
  dev->host_local = !strcmp(dev->rails[0].info->fabric_attr->prov_name, "shm");
  dev->sched.npaths = dev->npaths;
  dev->sched.threshold = (size_t)srd_param_int(SRD_PARAM_STRIPE_THRESHOLD);
  dev->sched.min_stripe = (size_t)srd_param_int(SRD_PARAM_MIN_STRIPE);
  dev->sched.max_write = max_write;
  dev->next_listener_id = (uint32_t)srd_random64();
  if (want > 0) start_lanes(dev);
  SRD_INFO(NCCL_INIT | NCCL_NET, "device %d: %d NIC(s) x %d lane(s) = %d rail(s), %d endpoint(s) each, %d path(s); "
           "completions polled by %s", dev->index, dev->nnics, dev->lanes_per_nic, dev->nrails, dev->neps,
           dev->npaths, dev->threaded ? "one thread per lane" : "the caller's thread");
  /* Over kernel TCP one polling thread caps bandwidth near 3 GB/s (BENCHMARKS.md). */
  if (!dev->threaded && !strncmp(dev->rails[0].info->fabric_attr->prov_name, "tcp", 3) && cpus_available() >= 8)
    SRD_INFO(NCCL_INIT | NCCL_NET, "device %d: tcp with %d CPU(s): NCCL_SRD_PROGRESS_THREADS=4 spreads the socket "
             "copies over 4 threads (2.3x all_reduce bandwidth measured with cores to spare)", dev->index,
             cpus_available());
  dev->open = true;
  return 0;
}

void srd_dev_close(struct srd_dev *dev) {
  if (!dev->open) return;
  if (!srd_dev_stop_lanes(dev)) return;
  /* Rails first: no completion can name a closed comm afterwards. */
  for (int i = 0; i < dev->nrails; i++) srd_rail_close(&dev->rails[i]);
  free_closed(dev, true);
  close_rails(dev);
  dev->open = false;
}

void srd_dev_fini(struct srd_dev *dev) {
  srd_dev_close(dev);
  if (dev->open) return; /* a lane still runs: its locks stay */
  pthread_cond_destroy(&dev->wake);
  pthread_mutex_destroy(&dev->wake_lock);
  pthread_mutex_destroy(&dev->lock);
}

struct srd_comm *srd_dev_comm_by_id(struct srd_dev *dev, uint32_t id) {
  struct srd_comm *c = dev->comms[id & (SRD_MAX_COMMS - 1)];
  return c && c->id == id ? c : NULL;
}

struct srd_comm *srd_comm_alloc(struct srd_dev *dev, bool is_send) {
  int idx;
  for (idx = 0; idx < SRD_MAX_COMMS && dev->comms[idx]; idx++) {
  }
  if (idx == SRD_MAX_COMMS) {
    SRD_WARN("device %d: all %d comms in use", dev->index, SRD_MAX_COMMS);
    return NULL;
  }
  struct srd_comm *c = calloc(1, sizeof(*c));
  if (!c) return NULL;
  c->dev = dev;
  c->is_send = is_send;
  c->id = (uint32_t)idx | (++dev->gen[idx] & 0xfffffu) << SRD_COMM_INDEX_BITS;
  c->last_heard_ms = srd_now_ms();
  c->listener_addr = FI_ADDR_NOTAVAIL;
  for (int i = 0; i < SRD_REQS_PER_COMM; i++) c->reqs[i].comm = c;
  dev->comms[idx] = c;
  dev->ncomms++;
  return c;
}

static void detach(struct srd_comm *c) {
  struct srd_dev *dev = c->dev;
  if (dev->comms[c->id & (SRD_MAX_COMMS - 1)] != c) return;
  dev->comms[c->id & (SRD_MAX_COMMS - 1)] = NULL;
  dev->ncomms--;
}

void srd_comm_retire(struct srd_comm *c) {
  detach(c);
  c->next_closed = c->dev->closed;
  c->dev->closed = c;
}

/* Free closed comms whose last operation completed; all of them when the
 * device's rails are gone (no completion can arrive any more). */
static void free_closed(struct srd_dev *dev, bool all) {
  for (struct srd_comm **p = &dev->closed; *p;) {
    struct srd_comm *c = *p;
    if (all || c->ops_in_flight == 0) {
      *p = c->next_closed;
      srd_comm_free(c);
    } else {
      p = &c->next_closed;
    }
  }
}

void srd_comm_free(struct srd_comm *c) {
  struct srd_dev *dev = c->dev;
  if (c->listener_addr != FI_ADDR_NOTAVAIL) srd_rail_av_remove(&dev->rails[0], c->listener_addr);
  if (c->inserted)
    for (int i = 0; i < dev->nrails * c->remote_rails * c->remote_eps; i++)
      if (c->inserted[i] != FI_ADDR_NOTAVAIL) srd_rail_av_remove(&dev->rails[i / (c->remote_rails * c->remote_eps)],
                                                                 c->inserted[i]);
  while (c->early) {
    struct srd_early_msg *e = c->early;
    c->early = e->next;
    free(e);
  }
  while (c->unexpected) {
    struct srd_unexpected *u = c->unexpected;
    c->unexpected = u->next;
    free(u);
  }
  for (int i = 0; i < SRD_CTS_RECORDS; i++) free(c->cts[i].keys);
  detach(c);
  free(c->peer);
  free(c->inserted);
  free(c);
}

void srd_comm_fail(struct srd_comm *c, int result, const char *fmt, ...) {
  if (c->result) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->error, sizeof(c->error), fmt, ap);
  va_end(ap);
  c->result = result;
  SRD_WARN("%s comm %#x: %s", c->is_send ? "send" : "recv", c->id, c->error);
}

/* Local rail i talks to remote rail i mod R. A remote rail r also writes into
 * local rail r mod L, and SRD accepts traffic only from addresses in the AV,
 * so each local rail inserts both its target and the rails that target it. */
static bool rail_needs(int local, int nlocal, int remote, int nremote) {
  return remote == local % nremote || remote % nlocal == local;
}

int srd_comm_set_peer(struct srd_comm *c, const struct srd_msg_peer *p) {
  struct srd_dev *dev = c->dev;
  int rpaths = p->nrails * p->neps;
  if (p->name_len != dev->rails[0].ep_name_len) {
    srd_comm_fail(c, ncclSystemError, "peer address length %d differs from ours (%zu): different providers on the two sides?",
                  p->name_len, dev->rails[0].ep_name_len);
    return -1;
  }
  c->remote_rails = p->nrails;
  c->remote_eps = p->neps;
  c->peer = calloc((size_t)dev->npaths, sizeof(*c->peer));
  c->inserted = malloc((size_t)dev->nrails * rpaths * sizeof(*c->inserted));
  if (!c->peer || !c->inserted) {
    srd_comm_fail(c, ncclSystemError, "out of memory");
    return -1;
  }
  for (int i = 0; i < dev->nrails * rpaths; i++) c->inserted[i] = FI_ADDR_NOTAVAIL;
  for (int l = 0; l < dev->nrails; l++)
    for (int r = 0; r < p->nrails; r++) {
      if (!rail_needs(l, dev->nrails, r, p->nrails)) continue;
      for (int e = 0; e < p->neps; e++) {
        const uint8_t *name = p->names + (size_t)(r * p->neps + e) * p->name_len;
        fi_addr_t *slot = &c->inserted[l * rpaths + r * p->neps + e];
        if (srd_rail_av_insert(&dev->rails[l], name, slot)) {
          srd_comm_fail(c, ncclSystemError, "cannot insert the peer's rail %d into the address vector of rail %s", r,
                        dev->rails[l].name);
          return -1;
        }
      }
    }
  for (int path = 0; path < dev->npaths; path++) {
    int l = path / dev->neps, e = path % dev->neps;
    int r = l % p->nrails, re = e % p->neps;
    c->peer[path] = c->inserted[l * rpaths + r * p->neps + re];
  }
  return 0;
}

static void ctrl_done(struct srd_op *op, int err, const char *errstr) {
  struct srd_rail_buf *b = (struct srd_rail_buf *)op;
  struct srd_comm *c = op->owner;
  struct srd_req *req = op->aux;
  srd_rail_put_send_buf(b);
  if (!c) return;
  c->ops_in_flight--;
  if (err) srd_comm_fail(c, ncclRemoteError, "control message to the peer failed: %s", errstr ? errstr : fi_strerror(-err));
  if (req) {
    srd_req_finish(req, err ? ncclRemoteError : ncclSuccess);
    srd_req_op_done(req);
  }
}

struct srd_rail_buf *srd_comm_ctrl_buf(struct srd_comm *c, int *path) {
  struct srd_dev *dev = c->dev;
  int p = (int)(c->ctrl_cursor % (unsigned)dev->npaths);
  struct srd_rail_buf *b = srd_rail_get_send_buf(&dev->rails[p / dev->neps]);
  if (!b) return NULL;
  c->ctrl_cursor++;
  *path = p;
  return b;
}

int srd_comm_post_ctrl(struct srd_comm *c, struct srd_rail_buf *b, int path, size_t len, struct srd_req *req) {
  return srd_comm_post_ctrl_to(c, b, path, c->peer[path], len, req);
}

int srd_comm_post_ctrl_to(struct srd_comm *c, struct srd_rail_buf *b, int path, fi_addr_t dest, size_t len,
                          struct srd_req *req) {
  struct srd_dev *dev = c->dev;
  b->op.done = ctrl_done;
  b->op.owner = c;
  b->op.aux = req;
  int rc = srd_rail_send(&dev->rails[path / dev->neps], path % dev->neps, b, len, dest);
  if (rc) {
    srd_rail_put_send_buf(b);
    if (rc != -FI_EAGAIN) srd_comm_fail(c, ncclSystemError, "posting a control message failed: %s", fi_strerror(-rc));
    return rc;
  }
  c->ops_in_flight++;
  return 0;
}

static void keep_early(struct srd_comm *c, const void *buf, size_t len) {
  struct srd_early_msg *e = malloc(sizeof(*e) + len), **tail = &c->early;
  if (!e) {
    srd_comm_fail(c, ncclSystemError, "out of memory keeping an early control message");
    return;
  }
  e->next = NULL;
  e->len = len;
  memcpy(e->data, buf, len);
  while (*tail) tail = &(*tail)->next;
  *tail = e;
}

static void deliver(struct srd_comm *c, const struct srd_msg *m);

static void on_message(void *arg, struct srd_rail *rail, const void *buf, size_t len) {
  struct srd_dev *dev = arg;
  struct srd_msg m;
  const char *why;
  if (srd_msg_decode(buf, len, &m, &why)) {
    SRD_WARN("rail %s: dropped a malformed control message of %zu bytes: %s", rail->name, len, why);
    return;
  }
  if (m.type == SRD_MSG_HELLO || m.type == SRD_MSG_ACCEPT) {
    srd_handshake_on_message(dev, &m);
    return;
  }
  struct srd_comm *c = srd_dev_comm_by_id(dev, m.dst_comm);
  if (!c) {
    SRD_INFO(NCCL_NET, "rail %s: message type %d for comm %#x that no longer exists", rail->name, m.type, m.dst_comm);
    return;
  }
  if (!c->ready) {
    keep_early(c, buf, len);
    return;
  }
  deliver(c, &m);
}

void srd_comm_replay_early(struct srd_comm *c) {
  while (c->early && !c->result) {
    struct srd_early_msg *e = c->early;
    struct srd_msg m;
    const char *why;
    c->early = e->next;
    if (srd_msg_decode(e->data, e->len, &m, &why) == 0) deliver(c, &m);
    free(e);
  }
}

static void deliver(struct srd_comm *c, const struct srd_msg *msg) {
  const struct srd_msg m = *msg;
  c->last_heard_ms = srd_now_ms();
  switch (m.type) {
  case SRD_MSG_CTS:
    if (c->is_send) srd_proto_on_cts(c, &m.u.cts);
    break;
  case SRD_MSG_EAGER:
    if (!c->is_send) srd_proto_on_eager(c, &m.u.eager);
    break;
  case SRD_MSG_TRUNC:
    if (!c->is_send) srd_proto_on_trunc(c, &m.u.trunc);
    break;
  case SRD_MSG_BYE:
    srd_proto_on_bye(c, &m.u.bye);
    break;
  default:
    break;
  }
}

static void on_remote_write(void *arg, struct srd_rail *rail, uint32_t imm, size_t len) {
  struct srd_dev *dev = arg;
  struct srd_imm v = srd_imm_unpack(imm);
  struct srd_comm *c = dev->comms[v.comm_index];
  if (!c || c->is_send) {
    SRD_WARN("rail %s: remote write for unknown comm index %u dropped", rail->name, v.comm_index);
    return;
  }
  c->last_heard_ms = srd_now_ms();
  srd_proto_on_write(c, v, len);
}

static void on_rail_error(void *arg, struct srd_rail *rail, int err, const char *errstr) {
  /* Without an operation we cannot tell which peer it concerns: the comms
   * that are hit see their own operations fail. */
  struct srd_dev *dev = arg;
  SRD_WARN("device %d: %s (error %d)", dev->index, errstr, err);
  (void)rail;
}

/* A probe the provider refuses for this long (tcp reconnecting to a dead
 * peer answers -FI_EAGAIN forever) means the peer is gone. */
#define PROBE_REFUSALS_MS_FACTOR 4

static void send_ping(struct srd_comm *c, uint64_t now, uint64_t quiet) {
  int path, rc = -FI_EAGAIN;
  struct srd_rail_buf *b = srd_comm_ctrl_buf(c, &path);
  if (b) {
    size_t len = srd_msg_encode_ping(b->data, c->dev->rails[0].buf_size, c->peer_id);
    rc = srd_comm_post_ctrl(c, b, path, len, NULL);
  }
  if (rc == 0) {
    c->last_ping_ms = now;
    c->probe_refused_since_ms = 0;
  } else if (rc == -FI_EAGAIN) {
    if (!c->probe_refused_since_ms) c->probe_refused_since_ms = now;
    else if (now - c->probe_refused_since_ms > PROBE_REFUSALS_MS_FACTOR * quiet)
      srd_comm_fail(c, ncclRemoteError, "peer unreachable: silent for %llu ms and the provider refuses to reach it",
                    (unsigned long long)(now - c->last_heard_ms));
  }
}

/* A comm that waits on its peer and has heard nothing for a while probes it:
 * a vanished peer then fails the probe, and the comm, within seconds. */
static void probe_silent_peers(struct srd_dev *dev, uint64_t now) {
  uint64_t quiet = (uint64_t)srd_param_int(SRD_PARAM_KEEPALIVE_MS);
  for (int i = 0; i < SRD_MAX_COMMS; i++) {
    struct srd_comm *c = dev->comms[i];
    if (!c || !c->ready || c->result || c->closing) continue;
    /* shm has no transport-level failure detection; its peers share our host. */
    if (dev->host_local && c->peer_pid && kill((pid_t)c->peer_pid, 0) && errno == ESRCH) {
      srd_comm_fail(c, ncclRemoteError, "peer process %u exited", c->peer_pid);
      continue;
    }
    bool waiting = c->reqs_in_flight > 0 || now - c->last_wait_ms < 2 * quiet;
    if (waiting && now - c->last_heard_ms > quiet && now - c->last_ping_ms > quiet) send_ping(c, now, quiet);
  }
}

/* A rail whose link went away fails every comm of the device (they all
 * stripe over it) with an error that names it, instead of a silent stall. */
static void check_links(struct srd_dev *dev) {
  for (int i = 0; i < dev->nrails; i++) {
    struct srd_rail *rail = &dev->rails[i];
    if (!rail->failed && srd_rail_link_down(rail)) {
      rail->failed = 1;
      SRD_WARN("device %d: rail %d (%s) lost its link", dev->index, i, rail->name);
    }
    if (!rail->failed) continue;
    for (int k = 0; k < SRD_MAX_COMMS; k++)
      if (dev->comms[k] && !dev->comms[k]->result)
        srd_comm_fail(dev->comms[k], ncclSystemError, "rail %d (%s) of device %d failed", i, rail->name,
                      dev->index);
  }
}

/* Everything but the CQs: post what waits, and the periodic checks. */
static void progress_without_cqs(struct srd_dev *dev) {
  if (dev->pending_head) srd_proto_post_pending(dev);
  uint64_t now = srd_now_ms();
  if (now - dev->last_scan_ms >= SCAN_INTERVAL_MS) {
    dev->last_scan_ms = now;
    check_links(dev);
    probe_silent_peers(dev, now);
    if (dev->closed) free_closed(dev, false);
  }
}

void srd_dev_progress(struct srd_dev *dev) {
  if (!dev->threaded)
    for (int i = 0; i < dev->nrails; i++) {
      int rc = srd_rail_poll(&dev->rails[i], POLL_BUDGET);
      if (rc < 0) dev->rails[i].failed = 1;
    }
  progress_without_cqs(dev);
}

void srd_dev_kick(struct srd_dev *dev) {
  if (!dev->threaded) return;
  atomic_fetch_add(&dev->activity, 1);
  if (atomic_load(&dev->sleepers) == 0) return;
  pthread_mutex_lock(&dev->wake_lock);
  pthread_cond_broadcast(&dev->wake);
  pthread_mutex_unlock(&dev->wake_lock);
}

static void sleep_us(long us) {
  struct timespec ts = {0, us * 1000};
  nanosleep(&ts, NULL);
}

void srd_dev_wait_step(struct srd_dev *dev) {
  srd_dev_progress(dev);
  if (!dev->threaded) {
    sched_yield();
    return;
  }
  /* The lanes need the lock to deliver the completions waited for. */
  pthread_mutex_unlock(&dev->lock);
  srd_dev_kick(dev);
  sleep_us(20);
  pthread_mutex_lock(&dev->lock);
}

/* Idle lanes: poll again at once for a while, then yield the core while the
 * process keeps calling in, then sleep until an entry point wakes them, or
 * for 1 ms doubling to 16 ms (data from the peer wakes nobody; a caller that
 * waits for it calls in, and that wakes the lanes). */
#define LANE_SPIN_POLLS 64
#define LANE_QUIET_US 2000
#define LANE_SLEEP_MIN_US 1000
#define LANE_SLEEP_MAX_US 16000
#define LANE_FAILED_SLEEP_US 10000

static uint64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

struct lane_idle {
  unsigned polls;         /* empty polls in a row */
  unsigned seen_activity;
  uint64_t quiet_since_us;
  long sleep_us;          /* next sleep */
};

static void lane_sleep(struct srd_dev *dev, unsigned seen, long us) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_nsec += us * 1000L;
  if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
  pthread_mutex_lock(&dev->wake_lock);
  atomic_fetch_add(&dev->sleepers, 1);
  /* A kick either sees us counted (and signals under wake_lock, after we
   * wait) or bumped activity before we look here. */
  if (atomic_load(&dev->activity) == seen && !atomic_load(&dev->stop))
    pthread_cond_timedwait(&dev->wake, &dev->wake_lock, &until);
  atomic_fetch_sub(&dev->sleepers, 1);
  pthread_mutex_unlock(&dev->wake_lock);
}

static void lane_idle(struct srd_dev *dev, struct lane_idle *st) {
  if (++st->polls <= LANE_SPIN_POLLS) return;
  uint64_t now = now_us();
  unsigned a = atomic_load_explicit(&dev->activity, memory_order_relaxed);
  if (a != st->seen_activity) {
    st->seen_activity = a;
    st->quiet_since_us = now;
    st->sleep_us = LANE_SLEEP_MIN_US;
  }
  if (now - st->quiet_since_us < LANE_QUIET_US) {
    sched_yield();
    return;
  }
  lane_sleep(dev, a, st->sleep_us);
  if (st->sleep_us < LANE_SLEEP_MAX_US) st->sleep_us *= 2;
}

/* Complete the writes the provider refused to post (dev->lock held). */
static void fail_writes(struct srd_rail *rail, struct srd_rail_write *failed) {
  while (failed) {
    struct srd_rail_write *w = failed;
    failed = w->next;
    char text[200];
    snprintf(text, sizeof(text), "fi_writedata on rail %s failed: %s", rail->name, fi_strerror(-w->err));
    w->op.done(&w->op, w->err, text);
  }
}

/* Only stripes are queued; their owner is a send request. */
static bool write_abandoned(const struct srd_rail_write *w) {
  const struct srd_req *r = w->op.owner;
  return r->comm->result != 0;
}

/* A provider that keeps refusing a write (a peer that vanished: tcp
 * reconnects forever) must not keep a lane busy once the comm has failed. */
#define LANE_REFUSED_CHECK_US 100000

static void drop_abandoned(struct srd_dev *dev, struct srd_rail *rail) {
  pthread_mutex_lock(&dev->lock);
  struct srd_rail_write *dropped = srd_rail_drop_queued(rail, write_abandoned);
  for (struct srd_rail_write *w = dropped; w; w = w->next) w->err = -FI_ECANCELED;
  fail_writes(rail, dropped);
  pthread_mutex_unlock(&dev->lock);
}

static void *lane_main(void *arg) {
  struct srd_lane *lane = arg;
  struct srd_dev *dev = lane->dev;
  struct srd_rail *rail = lane->rail;
  struct srd_rail_batch b;
  struct lane_idle idle = {0, 0, now_us(), LANE_SLEEP_MIN_US};
  uint64_t refused_since_us = 0;
  while (!atomic_load_explicit(&dev->stop, memory_order_acquire)) {
    struct srd_rail_write *failed;
    bool more;
    int posted = srd_rail_post_queued(rail, &failed, &more);
    if (failed) {
      pthread_mutex_lock(&dev->lock);
      fail_writes(rail, failed);
      pthread_mutex_unlock(&dev->lock);
    }
    int n = srd_rail_reap(rail, &b);
    if (n < 0) {
      pthread_mutex_lock(&dev->lock);
      rail->failed = 1;
      pthread_mutex_unlock(&dev->lock);
      sleep_us(LANE_FAILED_SLEEP_US);
      continue;
    }
    /* In the reorder test mode an empty batch releases held completions. */
    if (n > 0 || rail->reorder) {
      pthread_mutex_lock(&dev->lock);
      srd_rail_dispatch(rail, &b);
      progress_without_cqs(dev);
      pthread_mutex_unlock(&dev->lock);
    }
    if (!more || posted > 0) refused_since_us = 0;
    else if (!refused_since_us) refused_since_us = now_us();
    else if (now_us() - refused_since_us > LANE_REFUSED_CHECK_US) {
      drop_abandoned(dev, rail);
      refused_since_us = 0;
    }
    if (n > 0 || posted > 0) {
      idle.polls = 0;
      idle.quiet_since_us = now_us();
      idle.sleep_us = LANE_SLEEP_MIN_US;
      continue;
    }
    if (more) {
      sched_yield(); /* the provider's queue is full: completions make room */
      continue;
    }
    lane_idle(dev, &idle);
  }
  return NULL;
}

/* Lanes pay off only with cores to run on: each polls without pause while
 * the process is busy. */
static void warn_if_few_cpus(const struct srd_dev *dev) {
  int cpus = cpus_available();
  if (cpus && dev->nrails + 1 > cpus)
    SRD_WARN("device %d: %d progress threads and NCCL's proxy thread share %d CPU(s): they compete for cores "
             "(lower bandwidth, much higher latency); NCCL_SRD_PROGRESS_THREADS=0 polls from NCCL's thread instead",
             dev->index, dev->nrails, cpus);
}

static void start_lanes(struct srd_dev *dev) {
  warn_if_few_cpus(dev);
  dev->lanes = calloc((size_t)dev->nrails, sizeof(*dev->lanes));
  if (!dev->lanes) {
    SRD_WARN("device %d: out of memory for progress lanes; progress threads off", dev->index);
    return;
  }
  atomic_store(&dev->stop, false);
  dev->lanes_pid = getpid();
  dev->threaded = true; /* before the first lane runs: callers stop polling */
  for (int i = 0; i < dev->nrails; i++) {
    struct srd_lane *lane = &dev->lanes[i];
    lane->dev = dev;
    lane->rail = &dev->rails[i];
    int rc = pthread_create(&lane->thread, NULL, lane_main, lane);
    if (rc) {
      SRD_WARN("device %d: cannot start the progress thread of rail %d: %s; progress threads off", dev->index, i,
               strerror(rc));
      srd_dev_stop_lanes(dev);
      return;
    }
    lane->running = true;
    char name[16];
    snprintf(name, sizeof(name), "srd-d%d-r%d", dev->index, i);
    pthread_setname_np(lane->thread, name);
  }
}

#define LANE_JOIN_TIMEOUT_S 5

bool srd_dev_stop_lanes(struct srd_dev *dev) {
  if (!dev->lanes) return true;
  /* A forked child has the device's memory but none of its threads (and its
   * rails are the parent's): leave both alone. */
  if (getpid() != dev->lanes_pid) return false;
  atomic_store_explicit(&dev->stop, true, memory_order_release);
  pthread_mutex_lock(&dev->wake_lock);
  pthread_cond_broadcast(&dev->wake);
  pthread_mutex_unlock(&dev->wake_lock);
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += LANE_JOIN_TIMEOUT_S;
  bool all = true;
  for (int i = 0; i < dev->nrails; i++) {
    struct srd_lane *lane = &dev->lanes[i];
    if (!lane->running) continue;
    int rc = pthread_timedjoin_np(lane->thread, NULL, &until);
    if (rc) {
      SRD_WARN("device %d: progress thread of rail %d did not end within %d s (%s)", dev->index, i,
               LANE_JOIN_TIMEOUT_S, strerror(rc));
      all = false;
      continue;
    }
    lane->running = false;
  }
  if (!all) return false;
  free(dev->lanes);
  dev->lanes = NULL;
  dev->threaded = false;
  return true;
}
