/* srd-perf's raw lanes: the plugin's parallelism for large messages, in
 * plain libfabric (perf_raw_lanes.h). */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "srd/param.h"
#include "srd/sys.h"

#include "perf_raw.h"

/* Idle lanes, as the plugin's: poll at once while there is work, yield the
 * core while the caller keeps calling in, sleep once it has been quiet (1 ms
 * doubling to 16 ms, or until a write is queued). */
#define LANE_QUIET_US 2000
#define LANE_SLEEP_MIN_US 1000
#define LANE_SLEEP_MAX_US 16000
#define LANE_REAP 16

/* The plugin's progress threads per NIC for this provider. */
static int threads_per_nic(const struct raw *r) {
  int set = (int)srd_param_int(SRD_PARAM_PROGRESS_THREADS);
  if (set >= 0) return set;
  if (!strcmp(r->rails[0].info->fabric_attr->prov_name, "efa")) return 0; /* the NIC moves the data */
  int fake = (int)srd_param_int(SRD_PARAM_TEST_CPUS); /* the plugin's test mode, honoured alike */
  return srd_lanes_auto(fake ? fake : srd_cpus_available(), fake ? fake : srd_cpus_online(), srd_host_procs_count());
}

int raw_lanes_open(struct raw *r) {
  if (r->lanes_opened) return r->lanes_opened < 0 ? -1 : 0;
  r->lanes_opened = -1; /* until every lane opened: a half-open transport stays failed */
  int lanes = threads_per_nic(r) + 1;
  if (lanes * r->nnics > RAW_MAX_RAILS) lanes = RAW_MAX_RAILS / r->nnics;
  for (int i = r->nnics; i < lanes * r->nnics; i++) {
    struct raw_rail *rail = &r->rails[i];
    rail->info = fi_dupinfo(r->rails[i % r->nnics].info);
    if (!rail->info) {
      perf_error("raw: out of memory for lane %d", i / r->nnics);
      return -1;
    }
    /* The caller registers memory and inserts peers while the thread posts. */
    rail->info->domain_attr->threading = FI_THREAD_SAFE;
    r->nrails = i + 1;
    if (raw_open_domain(rail) || raw_open_endpoint(r, rail)) return -1;
  }
  r->lanes_opened = 1;
  raw_describe(r);
  return 0;
}

static int grow(void **items, size_t *cap, size_t need, size_t size) {
  if (need <= *cap) return 0;
  size_t cap2 = *cap ? *cap * 2 : 64;
  while (cap2 < need) cap2 *= 2;
  void *p = realloc(*items, cap2 * size);
  if (!p) return -1;
  *items = p;
  *cap = cap2;
  return 0;
}

static void lane_fail(struct raw_lane *l, int err, const char *what) {
  char detail[160] = "";
  if (err == -FI_EAVAIL) {
    struct fi_cq_err_entry e;
    memset(&e, 0, sizeof(e));
    fi_cq_readerr(l->rail->cq, &e, 0);
    err = -(int)e.err;
    snprintf(detail, sizeof(detail), " (provider: %s)", fi_cq_strerror(l->rail->cq, e.prov_errno, e.err_data, NULL, 0));
  }
  pthread_mutex_lock(&l->lock);
  l->error = err ? err : -FI_EOTHER;
  snprintf(l->why, sizeof(l->why), "%s: %s%s", what, fi_strerror(-l->error), detail);
  atomic_store(&l->has_done, 1);
  pthread_mutex_unlock(&l->lock);
}

/* Sleep until a write is queued, a caller calls in, or us pass. */
static void lane_sleep(struct raw_lane *l, unsigned seen, long us) {
  struct timespec until = srd_deadline_in_us(us);
  pthread_mutex_lock(&l->lock);
  atomic_store(&l->sleeping, 1);
  /* A kick either sees us sleeping (and signals under the lock, once we
   * wait) or bumped activity before we look here. */
  if (!l->ntodo && atomic_load(&l->activity) == seen && !atomic_load(&l->stop))
    pthread_cond_timedwait(&l->wake, &l->lock, &until);
  atomic_store(&l->sleeping, 0);
  pthread_mutex_unlock(&l->lock);
}

static void *lane_main(void *arg) {
  struct raw_lane *l = arg;
  struct raw_lane_op *posting = NULL; /* taken from todo, posted from next on */
  size_t nposting = 0, next = 0, posting_cap = 0;
  int outstanding = 0; /* stripes posted, not complete */
  unsigned seen = atomic_load(&l->activity);
  uint64_t quiet_since = srd_now_us();
  long sleep_us = LANE_SLEEP_MIN_US;
  while (!atomic_load(&l->stop)) {
    int worked = 0;
    if (next == nposting && atomic_load(&l->has_todo)) { /* swap the queue for the empty array */
      srd_mutex_lock_spin(&l->lock);
      atomic_store(&l->has_todo, 0);
      struct raw_lane_op *t = l->todo;
      size_t tcap = l->todo_cap;
      l->todo = posting, l->todo_cap = posting_cap;
      posting = t, posting_cap = tcap, nposting = l->ntodo, next = 0;
      l->ntodo = 0;
      pthread_mutex_unlock(&l->lock);
    }
    for (; next < nposting; next++, outstanding++, worked = 1) {
      ssize_t rc = raw_post_op(l->rail->ep, &posting[next]);
      if (rc == -FI_EAGAIN) break; /* completions make room */
      if (rc) {
        lane_fail(l, (int)rc, raw_op_name(posting[next].kind));
        goto out;
      }
    }
    struct fi_cq_data_entry e[LANE_REAP];
    ssize_t n = fi_cq_read(l->rail->cq, e, LANE_REAP);
    if (n < 0 && n != -FI_EAGAIN) {
      lane_fail(l, (int)n, "fi_cq_read");
      goto out;
    }
    if (n > 0) {
      worked = 1;
      for (ssize_t i = 0; i < n; i++)
        if (!(e[i].flags & FI_REMOTE_CQ_DATA)) outstanding--; /* ours, not the peer's write */
      srd_mutex_lock_spin(&l->lock);
      int ok = !grow((void **)&l->done, &l->done_cap, l->ndone + (size_t)n, sizeof(*l->done));
      if (ok) memcpy(l->done + l->ndone, e, (size_t)n * sizeof(*e)), l->ndone += (size_t)n;
      atomic_store(&l->has_done, 1);
      pthread_mutex_unlock(&l->lock);
      if (!ok) {
        lane_fail(l, -FI_ENOMEM, "completion queue");
        goto out;
      }
    }
    unsigned a = atomic_load(&l->activity);
    if (worked || a != seen) {
      seen = a;
      quiet_since = srd_now_us();
      sleep_us = LANE_SLEEP_MIN_US;
      continue;
    }
    if (outstanding || next < nposting || srd_now_us() - quiet_since < LANE_QUIET_US) {
      sched_yield();
      continue;
    }
    lane_sleep(l, seen, sleep_us);
    if (sleep_us < LANE_SLEEP_MAX_US) sleep_us *= 2;
  }
out:
  free(posting);
  return NULL;
}

static void lane_free(struct raw_lane *l) {
  pthread_mutex_destroy(&l->lock);
  pthread_cond_destroy(&l->wake);
  free(l->todo);
  free(l->done);
  free(l->taken);
  free(l);
}

int raw_lanes_start(struct raw *r) {
  if (r->lanes_running || r->nrails == r->nnics) return 0;
  for (int i = r->nnics; i < r->nrails; i++) {
    struct raw_lane *l = calloc(1, sizeof(*l));
    if (!l) {
      perf_error("raw: out of memory for a lane");
      raw_lanes_stop(r);
      return -1;
    }
    l->rail = &r->rails[i];
    pthread_mutex_init(&l->lock, NULL);
    pthread_cond_init(&l->wake, NULL);
    r->lanes[i] = l;
    int rc = pthread_create(&l->thread, NULL, lane_main, l);
    if (rc) {
      perf_error("raw: cannot start the thread of rail %d: %s", i, strerror(rc));
      raw_lanes_stop(r);
      return -1;
    }
    l->running = 1;
  }
  r->lanes_running = 1;
  return 0;
}

static void kick(struct raw_lane *l) {
  atomic_fetch_add(&l->activity, 1);
  if (!atomic_load(&l->sleeping)) return;
  pthread_mutex_lock(&l->lock);
  pthread_cond_signal(&l->wake);
  pthread_mutex_unlock(&l->lock);
}

void raw_lanes_stop(struct raw *r) {
  for (int i = r->nnics; i < r->nrails; i++) {
    struct raw_lane *l = r->lanes[i];
    if (!l) continue;
    if (l->running) {
      atomic_store(&l->stop, 1);
      kick(l);
      pthread_join(l->thread, NULL);
    }
    lane_free(l);
    r->lanes[i] = NULL;
  }
  r->lanes_running = 0;
}

const char *raw_op_name(enum raw_lane_kind kind) {
  return kind == RAW_LANE_READ ? "fi_read" : kind == RAW_LANE_WRITE ? "fi_write" : "fi_writedata";
}

ssize_t raw_post_op(struct fid_ep *ep, const struct raw_lane_op *w) {
  switch (w->kind) {
  case RAW_LANE_WRITE:
    return fi_write(ep, w->buf, w->len, w->desc, w->dest, w->addr, w->key, w->ctx);
  case RAW_LANE_READ:
    return fi_read(ep, w->buf, w->len, w->desc, w->dest, w->addr, w->key, w->ctx);
  default:
    return fi_writedata(ep, w->buf, w->len, w->desc, w->imm, w->dest, w->addr, w->key, w->ctx);
  }
}

int raw_lane_post(struct raw *r, int rail, const struct raw_lane_op *w) {
  struct raw_lane *l = r->lanes[rail];
  pthread_mutex_lock(&l->lock);
  int ok = !grow((void **)&l->todo, &l->todo_cap, l->ntodo + 1, sizeof(*l->todo));
  if (ok) l->todo[l->ntodo++] = *w, atomic_store(&l->has_todo, 1);
  if (ok && atomic_load(&l->sleeping)) pthread_cond_signal(&l->wake);
  pthread_mutex_unlock(&l->lock);
  if (!ok) perf_error("raw: out of memory queueing a stripe on rail %d", rail);
  return ok ? 0 : -1;
}

int raw_lanes_progress(struct raw *r, void (*on_completion)(struct raw *r, const struct fi_cq_data_entry *e)) {
  for (int i = r->nnics; i < r->nrails; i++) {
    struct raw_lane *l = r->lanes[i];
    kick(l);
    if (!atomic_load(&l->has_done)) continue;
    pthread_mutex_lock(&l->lock);
    atomic_store(&l->has_done, 0);
    struct fi_cq_data_entry *t = l->done;
    size_t n = l->ndone, tcap = l->done_cap;
    l->done = l->taken, l->done_cap = l->taken_cap, l->ndone = 0;
    l->taken = t, l->taken_cap = tcap;
    int err = l->error;
    pthread_mutex_unlock(&l->lock);
    for (size_t k = 0; k < n; k++) on_completion(r, &t[k]);
    if (err) {
      perf_error("raw: rail %d (lane %d) failed: %s", i, i / r->nnics, l->why);
      return -1;
    }
  }
  return 0;
}

int raw_stripe_rails(struct raw *r, size_t size, int *first) {
  *first = 0;
  if (size < r->stripe_threshold || r->nrails == r->nnics) return r->nnics;
  if (raw_lanes_start(r)) return -1;
  *first = r->nnics;
  return r->nrails - r->nnics;
}

size_t raw_stripe_len(const struct raw *r, size_t size, int nrails) {
  size_t stripe = (size + (size_t)nrails - 1) / (size_t)nrails;
  stripe = (stripe + RAW_STRIPE_ALIGN - 1) & ~(size_t)(RAW_STRIPE_ALIGN - 1);
  if (stripe < r->min_stripe) stripe = r->min_stripe;
  size_t max_msg = r->rails[0].max_msg;
  if (stripe > max_msg) stripe = max_msg & ~(size_t)(RAW_STRIPE_ALIGN - 1);
  return stripe;
}
