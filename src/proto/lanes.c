/* Progress lanes: lane 0 stays with the caller; one thread per rail of the
 * other lanes reaps its CQ without the device lock into a ring, which the
 * lock's holder dispatches (srd_dev_deliver_lanes): the thread itself when
 * the lock is free, never waiting for it; idle lanes sleep until a call
 * about a large message wakes them. */
#define _GNU_SOURCE /* pthread_timedjoin_np, pthread_setname_np */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fi_errno.h>

#include "srd/log.h"
#include "srd/proto.h"
#include "srd/stats.h"
#include "srd/sys.h"

/* Lock held: the lane's reaped batches, oldest first. What they complete
 * completes on a lane (a device field, not thread-local storage: a
 * thread-local in a dlopened library faults LeakSanitizer's tracer of GCC
 * 12, which scans its dynamic TLS range wrongly). */
static void deliver_lane(struct srd_dev *dev, struct srd_lane *lane) {
  struct srd_rail *rail = lane->rail;
  unsigned d = atomic_load_explicit(&lane->delivered, memory_order_relaxed);
  unsigned r = atomic_load_explicit(&lane->reaped, memory_order_acquire);
  bool was = dev->from_lane;
  dev->from_lane = true;
  if (d == r && (rail->unposted || (rail->reorder && rail->nheld))) {
    /* Receive buffers the provider refused are offered again; in the
     * reorder test mode an empty batch releases held completions. */
    struct srd_rail_batch none = {.n = 0, .has_err = false};
    srd_rail_dispatch(rail, &none);
  }
  for (; d != r; d++) {
    srd_rail_dispatch(rail, &lane->ring[d % lane->ring_cap]);
    atomic_store_explicit(&lane->delivered, d + 1, memory_order_release);
  }
  dev->from_lane = was;
}

void srd_dev_deliver_lanes(struct srd_dev *dev) {
  if (!dev->lanes) return;
  for (int i = dev->nnics; i < dev->nrails; i++) deliver_lane(dev, &dev->lanes[i]);
}

/* One batch from the lane's CQ into its ring; a full ring waits for the
 * lock's holder (bounded memory: the CQ keeps the rest). */
static int lane_reap(struct srd_lane *lane, bool *full) {
  unsigned r = atomic_load_explicit(&lane->reaped, memory_order_relaxed);
  *full = r - atomic_load_explicit(&lane->delivered, memory_order_acquire) >= lane->ring_cap;
  if (*full) {
    SRD_STAT(SRD_STAT_LANE_RING_FULL);
    return 0;
  }
  int n = srd_rail_reap(lane->rail, &lane->ring[r % lane->ring_cap]);
  if (n > 0) atomic_store_explicit(&lane->reaped, r + 1, memory_order_release);
  return n;
}

/* The device lock taken by a lane thread, only on the rare paths (a write
 * the provider refused, a failed CQ, a rail that went down). One that has to
 * wait says so, and the calls NCCL repeats anyway (test, isend) step aside
 * for it, and it spins a little before it sleeps (DESIGN.md, "Locking"). Its
 * ring goes first: what it does next may depend on what was reaped before. */
static void lane_lock(struct srd_lane *lane) {
  struct srd_dev *dev = lane->dev;
  SRD_STAT(SRD_STAT_LANE_LOCK);
  if (pthread_mutex_trylock(&dev->lock)) {
    SRD_STAT(SRD_STAT_LANE_LOCK_WAITED);
    SRD_STAT_T0(t0);
    atomic_fetch_add_explicit(&dev->lanes_waiting, 1, memory_order_relaxed);
    srd_mutex_lock_spin(&dev->lock);
    atomic_fetch_sub_explicit(&dev->lanes_waiting, 1, memory_order_relaxed);
    SRD_STAT_SINCE(SRD_STAT_LANE_LOCK_NS, t0);
  }
  deliver_lane(dev, lane);
  dev->from_lane = true;
}

static void lane_unlock(struct srd_dev *dev) {
  dev->from_lane = false;
  pthread_mutex_unlock(&dev->lock);
}

void srd_dev_kick(struct srd_dev *dev) {
  if (!dev->threaded) return;
  atomic_fetch_add(&dev->activity, 1);
  if (atomic_load(&dev->sleepers) == 0) return;
  SRD_STAT(SRD_STAT_KICK_SIGNAL);
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
  /* A lane may need the lock (a refused write, a rail that went down). */
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

struct lane_idle {
  unsigned polls;         /* empty polls in a row */
  unsigned seen_activity;
  uint64_t quiet_since_us;
  long sleep_us;          /* next sleep */
};

static void lane_sleep(struct srd_dev *dev, unsigned seen, long us) {
  struct timespec until = srd_deadline_in_us(us);
  pthread_mutex_lock(&dev->wake_lock);
  atomic_fetch_add(&dev->sleepers, 1);
  /* A kick either sees us counted (and signals under wake_lock, after we
   * wait) or bumped activity before we look here. */
  SRD_STAT(SRD_STAT_LANE_SLEEP);
  if (atomic_load(&dev->activity) == seen && !atomic_load(&dev->stop) &&
      pthread_cond_timedwait(&dev->wake, &dev->wake_lock, &until) == 0)
    SRD_STAT(SRD_STAT_LANE_WOKEN);
  atomic_fetch_sub(&dev->sleepers, 1);
  pthread_mutex_unlock(&dev->wake_lock);
}

static void lane_idle(struct srd_dev *dev, struct lane_idle *st) {
  if (++st->polls <= LANE_SPIN_POLLS) return;
  uint64_t now = srd_now_us();
  unsigned a = atomic_load_explicit(&dev->activity, memory_order_relaxed);
  if (a != st->seen_activity) {
    st->seen_activity = a;
    st->quiet_since_us = now;
    st->sleep_us = LANE_SLEEP_MIN_US;
  }
  if (now - st->quiet_since_us < LANE_QUIET_US) {
    SRD_STAT(SRD_STAT_LANE_YIELD);
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
    snprintf(text, sizeof(text), "RMA %s on rail %s failed: %s", w->dst ? "read" : "write", rail->name,
             fi_strerror(-w->err));
    w->op.done(&w->op, w->err, text);
  }
}

/* Stripes of messages and of one-sided ops are queued: each names the
 * result of the comm it serves (its owner is a request or an RMA op). */
bool srd_queued_write_abandoned(const struct srd_rail_write *w) { return *w->owner_result != 0; }

static bool any_write(const struct srd_rail_write *w) {
  (void)w;
  return true;
}

/* A provider that keeps refusing a write (a peer that vanished: tcp
 * reconnects forever) must not keep a lane busy once the comm has failed. */
#define LANE_REFUSED_CHECK_US 100000

/* Lock held. */
static void cancel_writes(struct srd_rail *rail, struct srd_rail_write *dropped) {
  for (struct srd_rail_write *w = dropped; w; w = w->next) w->err = -FI_ECANCELED;
  fail_writes(rail, dropped);
}

static void drop_abandoned(struct srd_lane *lane) {
  lane_lock(lane);
  cancel_writes(lane->rail, srd_rail_drop_queued(lane->rail, srd_queued_write_abandoned));
  lane_unlock(lane->dev);
}

/* A paused lane's rail is down: what waits in its queue goes on another rail
 * (failover re-sends it), not later on this one, whose keys may change. The
 * queue needs only its own lock; the lock is taken when there is something. */
static void drop_all_queued(struct srd_lane *lane) {
  struct srd_rail_write *dropped = srd_rail_drop_queued(lane->rail, any_write);
  if (!dropped) return;
  lane_lock(lane);
  cancel_writes(lane->rail, dropped);
  lane_unlock(lane->dev);
}

static void *lane_main(void *arg) {
  struct srd_lane *lane = arg;
  struct srd_dev *dev = lane->dev;
  struct srd_rail *rail = lane->rail;
  struct lane_idle idle = {0, 0, srd_now_us(), LANE_SLEEP_MIN_US};
  uint64_t refused_since_us = 0;
  while (!atomic_load_explicit(&dev->stop, memory_order_acquire)) {
    if (atomic_load(&lane->paused)) {
      if (atomic_exchange(&lane->drain, false)) {
        lane_lock(lane); /* only this thread reaps its rail */
        srd_dev_drain_rail(dev, (int)(rail - dev->rails));
        lane_unlock(dev);
      }
      drop_all_queued(lane);
      sleep_us(LANE_FAILED_SLEEP_US);
      continue;
    }
    struct srd_rail_write *failed;
    bool more, full;
    int posted = srd_rail_post_queued(rail, &failed, &more);
    if (failed) {
      lane_lock(lane);
      fail_writes(rail, failed);
      lane_unlock(dev);
    }
    int n = lane_reap(lane, &full);
    if (n < 0) {
      lane_lock(lane);
      rail->failed = 1;
      lane_unlock(dev);
      sleep_us(LANE_FAILED_SLEEP_US);
      continue;
    }
    /* Dispatched here while nobody holds the lock (NCCL's thread keeps its
     * time); otherwise the holder, or the next caller, does it. A full ring
     * tries too, then backs off as an idle lane does: no spinning on it. */
    if ((n > 0 || full) && !pthread_mutex_trylock(&dev->lock)) {
      srd_dev_deliver_lanes(dev);
      srd_dev_progress_without_cqs(dev);
      pthread_mutex_unlock(&dev->lock);
    }
    if (!more || posted > 0) refused_since_us = 0;
    else if (!refused_since_us) refused_since_us = srd_now_us();
    else if (srd_now_us() - refused_since_us > LANE_REFUSED_CHECK_US) {
      drop_abandoned(lane);
      refused_since_us = 0;
    }
    if (n > 0 || posted > 0) {
      idle.polls = 0;
      idle.quiet_since_us = srd_now_us();
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

#define LANE_JOIN_TIMEOUT_S 5

static bool join_lanes(struct srd_dev *dev) {
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
  return all;
}

static void free_lanes(struct srd_dev *dev) {
  free(dev->lanes);
  dev->lanes = NULL;
  dev->threaded = false;
  dev->sched.npaths = dev->inline_paths;
}

/* Lanes pay off only with cores to run on: each polls without pause while
 * the process moves large messages. */
static void warn_if_few_cpus(const struct srd_dev *dev) {
  int cpus = srd_cpus_available(), threads = dev->nrails - dev->nnics;
  if (cpus && threads + 1 > cpus)
    SRD_WARN("device %d: %d progress threads and NCCL's proxy thread share %d CPU(s): they compete for cores "
             "(lower bandwidth); NCCL_SRD_PROGRESS_THREADS=0 polls from NCCL's thread instead",
             dev->index, threads, cpus);
}

void srd_dev_start_lanes(struct srd_dev *dev, bool locked) {
  if (dev->nrails <= dev->nnics) return;
  warn_if_few_cpus(dev);
  dev->lanes = calloc((size_t)dev->nrails, sizeof(*dev->lanes));
  if (!dev->lanes) {
    SRD_WARN("device %d: out of memory for progress lanes; progress threads off", dev->index);
    dev->lanes_failed = true;
    return;
  }
  atomic_store(&dev->stop, false);
  dev->lanes_pid = getpid();
  dev->threaded = true; /* before the first lane runs: callers stop polling its rail */
  for (int i = dev->nnics; i < dev->nrails; i++) {
    struct srd_lane *lane = &dev->lanes[i];
    lane->dev = dev;
    lane->rail = &dev->rails[i];
    atomic_init(&lane->paused, !srd_rail_polled(dev, i));
    atomic_init(&lane->drain, false);
    lane->ring_cap = lane->rail->reorder ? 1 : SRD_LANE_RING;
    int rc = pthread_create(&lane->thread, NULL, lane_main, lane);
    if (rc) {
      SRD_WARN("device %d: cannot start the progress thread of rail %d: %s; progress threads off", dev->index, i,
               strerror(rc));
      dev->lanes_failed = true;
      /* The lanes already running may wait for the lock; what they reaped
       * is dispatched before their rings go. */
      if (locked) pthread_mutex_unlock(&dev->lock);
      bool joined = join_lanes(dev);
      if (locked) pthread_mutex_lock(&dev->lock);
      if (joined && locked) srd_dev_deliver_lanes(dev);
      if (joined) free_lanes(dev);
      return;
    }
    lane->running = true;
    char name[16];
    snprintf(name, sizeof(name), "srd-d%d-r%d", dev->index, i);
    pthread_setname_np(lane->thread, name);
    SRD_STAT(SRD_STAT_LANES_STARTED);
  }
  /* Large messages now stripe over every lane. */
  dev->sched.npaths = dev->npaths;
  SRD_INFO(NCCL_INIT | NCCL_NET, "device %d: %d progress thread(s) started", dev->index, dev->nrails - dev->nnics);
}

bool srd_dev_stop_lanes(struct srd_dev *dev) {
  if (!dev->lanes) return true;
  if (!join_lanes(dev)) return false;
  /* A caller still inside (the library unloads while NCCL's thread polls)
   * may be dispatching the rings: they stay while it is there. */
  if (pthread_mutex_trylock(&dev->lock)) return false;
  free_lanes(dev);
  pthread_mutex_unlock(&dev->lock);
  return true;
}
