/* srd-perf --rma: the patterns over struct perf_rma. The client (rank 0)
 * initiates and measures; the server is the target, progressing its side
 * until the client says it is done. Latency: put and get from post to
 * completion at the initiator (a get's completion means the data is here;
 * a put's that the transport finished with the source); putsig a ping-pong
 * of puts with a signal, each side waiting until its signal count reaches
 * the value it expects before it answers: one-way latency is half the round
 * trip. Bandwidth: a window of ops in flight until every op completed at
 * the initiator, and for putsig until the target saw every signal. After the
 * timed runs each size moves one pattern and checks every byte of it. */
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "perf_ctrl.h"
#include "perf_log.h"
#include "perf_mem.h"
#include "perf_rma.h"

#define POISON 0xA5
#define END_TOKEN 'e'

struct perf_rma_session {
  struct perf_rma *t;
  const struct perf_opts *o;
  int fd, is_client, connected;
  struct perf_mem *mem;
  char *src, *dst; /* host windows of len bytes: puts go src to the peer's dst, gets the peer's src to our dst */
  size_t len;
  void *src_win, *dst_win;
  uint64_t signals_seen; /* the peer's signals this side has waited for */
  double *samples;
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A silent or vanished peer is an error within the timeout, never a hang. */
struct watchdog {
  double last_progress;
  unsigned spins;
};

static int watchdog_check(struct perf_rma_session *s, struct watchdog *w, const char *what) {
  /* Unpinned, both processes may share a core: let the peer run at times. */
  if (++w->spins % 8 == 0 && !s->o->pin) sched_yield();
  if (w->spins % 4096) return 0;
  if (perf_ctrl_peer_gone(s->fd)) {
    perf_error("the peer process exited during %s", what);
    return -1;
  }
  if (now_s() - w->last_progress > s->o->timeout_s) {
    perf_error("no progress for %d s during %s", s->o->timeout_s, what);
    return -1;
  }
  return 0;
}

static int try_post(struct perf_rma_session *s, size_t off, size_t size, void **req) {
  *req = NULL;
  if (s->o->rma == PERF_RMA_GET) return s->t->rma->get(s->t, s->dst_win, off, s->src_win, off, size, req);
  return s->t->rma->put(s->t, s->src_win, off, s->dst_win, off, size, s->o->rma == PERF_RMA_PUTSIG, req);
}

/* Timed ops use the first half of each window (off 0), checks the second
 * (off s->len): a put completes when its source may be reused, and an
 * unsignalled stripe of a timed put may still land later, which must not
 * fall on the bytes a check reads. */
static int post(struct perf_rma_session *s, size_t off, size_t size, void **req, const char *what) {
  struct watchdog w = {now_s(), 0};
  for (;;) {
    if (try_post(s, off, size, req)) return -1;
    if (*req) return 0;
    if (watchdog_check(s, &w, what)) return -1;
  }
}

static int wait_op(struct perf_rma_session *s, void *req, const char *what) {
  struct watchdog w = {now_s(), 0};
  for (;;) {
    int done = 0;
    if (s->t->rma->test(s->t, req, &done)) return -1;
    if (done) return 0;
    if (watchdog_check(s, &w, what)) return -1;
  }
}

/* Wait until want of the peer's signals have reached us. */
static int wait_signals(struct perf_rma_session *s, uint64_t want, const char *what) {
  struct watchdog w = {now_s(), 0};
  for (;;) {
    uint64_t n = 0;
    if (s->t->rma->signals(s->t, &n)) return -1;
    if (n >= want) return 0;
    if (watchdog_check(s, &w, what)) return -1;
  }
}

/* Keep progressing (a target's provider may need it for the initiator's ops
 * to land) until the peer sends a token; return it in *token. Silence is
 * the peer's to bound: its own watchdog ends it, closing the channel. */
static int serve(struct perf_rma_session *s, char *token, const char *what) {
  unsigned spins = 0;
  for (;;) {
    uint64_t n;
    if (s->t->rma->signals(s->t, &n)) return -1;
    if (++spins % 64 == 0) {
      if (perf_ctrl_pending(s->fd)) break;
      if (!s->o->pin) sched_yield();
    }
  }
  return perf_ctrl_recv(s->fd, token, 1, s->o->timeout_s, what);
}

static int send_token(struct perf_rma_session *s, char token, const char *what) {
  return perf_ctrl_send(s->fd, &token, 1, s->o->timeout_s, what);
}

/* Check data: a cheap function of the size's seed and the offset. */
static uint8_t pattern_byte(uint32_t seed, size_t i) { return (uint8_t)(seed ^ (i * 131u) ^ (i >> 9)); }

static void fill(char *buf, size_t size, uint32_t seed) {
  for (size_t i = 0; i < size; i++) buf[i] = (char)pattern_byte(seed, i);
}

/* The first wrong offset, or SIZE_MAX. */
static size_t first_wrong(const char *buf, size_t size, uint32_t seed) {
  for (size_t i = 0; i < size; i++)
    if ((uint8_t)buf[i] != pattern_byte(seed, i)) return i;
  return SIZE_MAX;
}

static int report_wrong(const char *buf, size_t size, uint32_t seed, size_t at, const char *op) {
  perf_error("--rma %s: data check of %zu bytes failed: byte %zu is 0x%02x, expected 0x%02x", op, size, at,
             (uint8_t)buf[at], pattern_byte(seed, at));
  return -1;
}

/* One op of size bytes moved and checked. A get: the target fills its
 * source, the initiator reads it and checks. A putsig: the target checks
 * as soon as its signal arrived (the signal must not overtake the data). A
 * plain put has no signal: the target polls until every byte arrived, or
 * the timeout. The verdict travels back as a token. */
static int check_size(struct perf_rma_session *s, size_t size) {
  const char *op = perf_rma_op_name(s->o->rma);
  uint32_t seed = (uint32_t)size * 2654435761u + (uint32_t)s->o->rma;
  void *req;
  char token;
  if (s->o->rma == PERF_RMA_GET) {
    if (!s->is_client) {
      fill(s->src + s->len, size, seed);
      return send_token(s, 'f', "the get check") || serve(s, &token, "the get check") || token != 'k' ? -1 : 0;
    }
    memset(s->dst + s->len, POISON, size);
    if (perf_ctrl_recv(s->fd, &token, 1, s->o->timeout_s, "the get check") ||
        post(s, s->len, size, &req, "the get check") || wait_op(s, req, "the get check"))
      return -1;
    size_t at = first_wrong(s->dst + s->len, size, seed);
    if (send_token(s, at == SIZE_MAX ? 'k' : 'x', "the get check")) return -1;
    return at == SIZE_MAX ? 0 : report_wrong(s->dst + s->len, size, seed, at, op);
  }
  if (s->is_client) {
    fill(s->src + s->len, size, seed);
    if (perf_ctrl_recv(s->fd, &token, 1, s->o->timeout_s, "the put check") ||
        post(s, s->len, size, &req, "the put check") || wait_op(s, req, "the put check") ||
        serve(s, &token, "the put check"))
      return -1;
    if (token != 'k') perf_error("--rma %s: the target found wrong data at %zu bytes (see above)", op, size);
    return token == 'k' ? 0 : -1;
  }
  memset(s->dst + s->len, POISON, size);
  if (send_token(s, 'r', "the put check")) return -1;
  size_t at;
  if (s->o->rma == PERF_RMA_PUTSIG) {
    if (wait_signals(s, ++s->signals_seen, "the put+signal check")) return -1;
    at = first_wrong(s->dst + s->len, size, seed);
  } else {
    double deadline = now_s() + s->o->timeout_s;
    uint64_t n;
    while ((at = first_wrong(s->dst + s->len, size, seed)) != SIZE_MAX && now_s() < deadline)
      if (s->t->rma->signals(s->t, &n)) return -1;
  }
  if (send_token(s, at == SIZE_MAX ? 'k' : 'x', "the put check")) return -1;
  return at == SIZE_MAX ? 0 : report_wrong(s->dst + s->len, size, seed, at, op);
}

static int rma_latency(struct perf_rma_session *s, size_t size, int iters, int warmup, struct perf_stats *out) {
  double *samples = realloc(s->samples, (size_t)iters * sizeof(double));
  if (!samples) return -1;
  s->samples = samples;
  if (perf_ctrl_barrier(s->fd, s->o->timeout_s, "the RMA latency test")) return -1;
  void *req;
  char token;
  for (int it = 0; it < iters + warmup; it++) {
    if (s->o->rma == PERF_RMA_PUTSIG && !s->is_client) {
      /* The server answers each signal. */
      if (wait_signals(s, ++s->signals_seen, "the put+signal ping") || post(s, 0, size, &req, "put+signal") ||
          wait_op(s, req, "put+signal"))
        return -1;
    } else if (s->o->rma == PERF_RMA_PUTSIG) {
      /* The client times the round trip. */
      double t0 = now_s();
      if (post(s, 0, size, &req, "put+signal") || wait_signals(s, ++s->signals_seen, "the put+signal pong") ||
          wait_op(s, req, "put+signal"))
        return -1;
      if (it >= warmup) samples[it - warmup] = (now_s() - t0) * 1e6 / 2;
    } else if (s->is_client) {
      double t0 = now_s();
      if (post(s, 0, size, &req, perf_rma_op_name(s->o->rma)) || wait_op(s, req, perf_rma_op_name(s->o->rma))) return -1;
      if (it >= warmup) samples[it - warmup] = (now_s() - t0) * 1e6;
    }
  }
  if (s->o->rma != PERF_RMA_PUTSIG &&
      (s->is_client ? send_token(s, END_TOKEN, "the RMA latency test") : serve(s, &token, "the RMA latency test")))
    return -1;
  if (s->is_client) perf_stats_compute(samples, (size_t)iters, out);
  return 0;
}

/* The client keeps --window ops in flight until iters completed, in order. */
static int rma_stream(struct perf_rma_session *s, size_t size, int iters, double *elapsed) {
  char token;
  if (perf_ctrl_barrier(s->fd, s->o->timeout_s, "the RMA bandwidth test")) return -1;
  if (!s->is_client) {
    if (s->o->rma != PERF_RMA_PUTSIG) return serve(s, &token, "the RMA bandwidth test");
    s->signals_seen += (uint64_t)iters;
    return wait_signals(s, s->signals_seen, "the put+signal stream") || send_token(s, END_TOKEN, "the RMA bandwidth test");
  }
  void *ring[PERF_MAX_WINDOW];
  int head = 0, count = 0;
  long posted = 0, done = 0;
  struct watchdog w = {now_s(), 0};
  double t0 = now_s();
  while (done < iters) {
    while (posted < iters && count < s->o->window) {
      void *req;
      if (try_post(s, 0, size, &req)) return -1;
      if (!req) break;
      ring[(head + count++) % PERF_MAX_WINDOW] = req;
      posted++;
    }
    while (count) {
      int finished = 0;
      if (s->t->rma->test(s->t, ring[head], &finished)) return -1;
      if (!finished) break;
      head = (head + 1) % PERF_MAX_WINDOW;
      count--;
      done++;
      w.last_progress = now_s();
    }
    if (watchdog_check(s, &w, "the RMA bandwidth test")) return -1;
  }
  /* putsig: the target's token says it saw every signal. */
  if (s->o->rma == PERF_RMA_PUTSIG ? serve(s, &token, "the put+signal stream")
                                   : send_token(s, END_TOKEN, "the RMA bandwidth test"))
    return -1;
  *elapsed = now_s() - t0;
  return 0;
}

int perf_rma_session_run(struct perf_rma_session *s, size_t size, struct perf_result *res) {
  const struct perf_opts *o = s->o;
  memset(res, 0, sizeof(*res));
  res->size = size;
  perf_iters_for(o, size, &res->iters, &res->warmup);
  if (o->tests & PERF_TEST_LAT) {
    if (rma_latency(s, size, res->iters, res->warmup, &res->lat_us)) return -1;
    res->have_lat = s->is_client;
  }
  if (o->tests & PERF_TEST_BW) {
    double elapsed = 0;
    if ((res->warmup && rma_stream(s, size, res->warmup, &elapsed)) || rma_stream(s, size, res->iters, &elapsed))
      return -1;
    if (s->is_client) {
      res->have_bw = 1;
      res->bw_GBps = (double)res->iters * (double)size / elapsed / 1e9;
      res->bw_msg_rate = (double)res->iters / elapsed;
    }
  }
  return check_size(s, size);
}

struct perf_rma_session *perf_rma_session_open(struct perf_transport *t, int ctrl_fd, const struct perf_opts *o,
                                               int is_client) {
  struct perf_rma_session *s = calloc(1, sizeof(*s));
  if (!s) return NULL;
  s->t = (struct perf_rma *)t;
  s->o = o;
  s->fd = ctrl_fd;
  s->is_client = is_client;
  s->len = ((o->max_size ? o->max_size : 1) + 4095) & ~(size_t)4095;
  if (s->t->rma->connect(s->t, ctrl_fd, is_client, o->timeout_s)) goto fail;
  s->connected = 1;
  s->mem = perf_mem_open(0);
  if (!s->mem) goto fail;
  s->src = perf_mem_alloc(s->mem, 2 * s->len);
  s->dst = perf_mem_alloc(s->mem, 2 * s->len);
  if (!s->src || !s->dst) {
    perf_error("cannot allocate 2 x %zu MiB of windows", (2 * s->len) >> 20);
    goto fail;
  }
  if (s->t->rma->reg(s->t, s->src, 2 * s->len, &s->src_win) || s->t->rma->reg(s->t, s->dst, 2 * s->len, &s->dst_win))
    goto fail;
  return s;
fail:
  perf_rma_session_close(s);
  return NULL;
}

int perf_rma_session_close(struct perf_rma_session *s) {
  if (!s) return 0;
  int rc = 0;
  if (s->src_win && s->t->rma->dereg(s->t, s->src_win)) rc = -1;
  if (s->dst_win && s->t->rma->dereg(s->t, s->dst_win)) rc = -1;
  if (s->connected && s->t->rma->disconnect(s->t)) rc = -1;
  if (s->mem) {
    perf_mem_free(s->mem, s->src);
    perf_mem_free(s->mem, s->dst);
    perf_mem_close(s->mem);
  }
  free(s->samples);
  free(s);
  return rc;
}
