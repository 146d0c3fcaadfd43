#include "perf_bench.h"

#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "perf_ctrl.h"
#include "perf_log.h"
#include "perf_mem.h"

/* --check allocates a buffer per request in flight; refuse beyond this. */
#define CHECK_MEMORY_LIMIT (4ull << 30)
#define ACK_BYTES 8

struct perf_conn {
  void *send_comm, *recv_comm;
  void *send_mh, *recv_mh;
  char *send_buf, *recv_buf; /* slots buffers of slot_bytes each */
};

struct perf_session {
  struct perf_transport *t;
  const struct perf_opts *o;
  int fd;
  int is_client;
  int nconn;
  struct perf_conn *conns;
  struct perf_mem *mem;      /* host or GPU memory (--cuda) */
  char *send_mem, *recv_mem; /* one allocation each, split among comms */
  char *stage;               /* --check with GPU buffers: the host copy of one message */
  size_t slot_bytes;
  int slots;     /* buffers per comm and direction: 1, or one per request in flight with --check */
  int send_window; /* isends in flight per comm */
  uint32_t run;  /* varies the --check pattern between runs */
  double *samples;
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* --check data: a cheap function of the message's identity and offset, in
 * every byte of the offset: a stripe written a multiple of 64 KiB off
 * (stripes are) must not read right. */
static uint8_t pattern_byte(uint32_t seed, size_t i) {
  return (uint8_t)(seed * 131u + i * 7u + (i >> 8) * 13u + (i >> 16) * 17u + (i >> 24) * 19u);
}

static void fill(char *buf, size_t size, uint32_t seed) {
  for (size_t i = 0; i < size; i++) buf[i] = (char)pattern_byte(seed, i);
}

static int verify(const char *buf, size_t size, uint32_t seed, const char *what, int comm, long msg) {
  for (size_t i = 0; i < size; i++)
    if ((uint8_t)buf[i] != pattern_byte(seed, i)) {
      perf_error("--check: %s comm %d message %ld: byte %zu of %zu is 0x%02x, expected 0x%02x", what, comm, msg, i,
                 size, (uint8_t)buf[i], pattern_byte(seed, i));
      return -1;
    }
  return 0;
}

/* --check data in the session's buffers: through a host copy for GPU memory. */
static int fill_buf(struct perf_session *s, char *buf, size_t size, uint32_t seed) {
  if (!perf_mem_is_cuda(s->mem)) {
    fill(buf, size, seed);
    return 0;
  }
  fill(s->stage, size, seed);
  return perf_mem_put(s->mem, buf, s->stage, size);
}

static int verify_buf(struct perf_session *s, const char *buf, size_t size, uint32_t seed, const char *what, int comm,
                      long msg) {
  if (!perf_mem_is_cuda(s->mem)) return verify(buf, size, seed, what, comm, msg);
  if (perf_mem_get(s->mem, s->stage, buf, size)) return -1;
  return verify(s->stage, size, seed, what, comm, msg);
}

static uint32_t seed_of(const struct perf_session *s, int dir, int comm, long msg) {
  return s->run * 1000003u + (uint32_t)dir * 7919u + (uint32_t)comm * 104729u + (uint32_t)msg;
}

/* A silent or vanished peer is an error within the timeout, never a hang. */
struct watchdog {
  double last_progress;
  unsigned spins;
};

static int watchdog_check(struct perf_session *s, struct watchdog *w, const char *what) {
  /* Both processes poll; when they may share a core, let the peer run now
   * and then instead of burning a whole time slice. Pinned, each owns one. */
  if (++w->spins % 8 == 0 && !s->o->pin) sched_yield();
  if (w->spins % 4096) return 0;
  double now = now_s();
  if (perf_ctrl_peer_gone(s->fd)) {
    perf_error("the peer process exited during %s", what);
    return -1;
  }
  if (now - w->last_progress > s->o->timeout_s) {
    perf_error("no progress for %d s during %s: the peer does not answer", s->o->timeout_s, what);
    return -1;
  }
  return 0;
}

static int wait_request(struct perf_session *s, void *req, size_t *sizes, const char *what) {
  struct watchdog w = {now_s(), 0};
  for (;;) {
    int done;
    if (s->t->ops->test(s->t, req, &done, sizes)) return -1;
    if (done) return 0;
    if (watchdog_check(s, &w, what)) return -1;
  }
}

static int post_send(struct perf_session *s, void *comm, void *buf, size_t size, int tag, void *mh, void **req,
                     const char *what) {
  struct watchdog w = {now_s(), 0};
  for (;;) {
    if (s->t->ops->isend(s->t, comm, buf, size, tag, mh, req)) return -1;
    if (*req) return 0;
    if (watchdog_check(s, &w, what)) return -1;
  }
}

static int post_recv(struct perf_session *s, void *comm, int n, void **bufs, size_t *sizes, int *tags, void **mhs,
                     void **req, const char *what) {
  struct watchdog w = {now_s(), 0};
  for (;;) {
    if (s->t->ops->irecv(s->t, comm, n, bufs, sizes, tags, mhs, req)) return -1;
    if (*req) return 0;
    if (watchdog_check(s, &w, what)) return -1;
  }
}

static int exchange_handles(struct perf_session *s, char *mine, char *theirs) {
  size_t len = (size_t)s->nconn * PERF_HANDLE_SIZE;
  return perf_ctrl_send(s->fd, mine, len, s->o->timeout_s, "the connection handles") ||
         perf_ctrl_recv(s->fd, theirs, len, s->o->timeout_s, "the connection handles");
}

/* Listen for every comm, swap handles, then drive connect and accept until
 * all are up, the way NCCL's proxy does: both are non-blocking. */
static int connect_all(struct perf_session *s) {
  const struct perf_transport_ops *ops = s->t->ops;
  size_t len = (size_t)s->nconn * PERF_HANDLE_SIZE;
  char *mine = calloc(1, len), *theirs = calloc(1, len);
  void **listens = calloc((size_t)s->nconn, sizeof(void *));
  int rc = -1, nlisten = 0;
  if (!mine || !theirs || !listens) goto out;
  for (; nlisten < s->nconn; nlisten++)
    if (ops->listen(s->t, mine + (size_t)nlisten * PERF_HANDLE_SIZE, &listens[nlisten])) goto out;
  if (exchange_handles(s, mine, theirs)) goto out;
  int connected = 0, accepted = 0;
  double deadline = now_s() + s->o->timeout_s;
  while (connected < s->nconn || accepted < s->nconn) {
    for (int i = 0; i < s->nconn; i++) {
      struct perf_conn *c = &s->conns[i];
      if (!c->send_comm) {
        if (ops->connect(s->t, theirs + (size_t)i * PERF_HANDLE_SIZE, &c->send_comm)) goto out;
        if (c->send_comm) connected++, deadline = now_s() + s->o->timeout_s;
      }
      if (!c->recv_comm) {
        if (ops->accept(s->t, listens[i], &c->recv_comm)) goto out;
        if (c->recv_comm) accepted++, deadline = now_s() + s->o->timeout_s;
      }
    }
    if (connected == s->nconn && accepted == s->nconn) break;
    if (perf_ctrl_peer_gone(s->fd)) {
      perf_error("the peer exited while connecting (%d/%d connected, %d/%d accepted)", connected, s->nconn, accepted,
                 s->nconn);
      goto out;
    }
    if (now_s() > deadline) {
      perf_error("no connection progress for %d s (%d/%d connected, %d/%d accepted): the peer does not answer on "
                 "this provider/NIC",
                 s->o->timeout_s, connected, s->nconn, accepted, s->nconn);
      goto out;
    }
  }
  rc = 0;
out:
  for (int i = 0; i < nlisten; i++)
    if (ops->close_listen(s->t, listens[i])) rc = -1;
  free(listens);
  free(mine);
  free(theirs);
  return rc;
}

static int alloc_buffers(struct perf_session *s) {
  const struct perf_opts *o = s->o;
  s->slot_bytes = (o->max_size < ACK_BYTES ? ACK_BYTES : o->max_size);
  s->slot_bytes = (s->slot_bytes + 4095) & ~(size_t)4095;
  s->slots = o->check ? o->window * o->group : 1;
  s->send_window = o->window * o->group > PERF_MAX_WINDOW ? PERF_MAX_WINDOW : o->window * o->group;
  /* Without --check every comm shares one buffer per direction, as a
   * benchmark may: the bytes are not looked at. */
  int regions = o->check ? s->nconn : 1;
  unsigned long long per_dir = (unsigned long long)s->slot_bytes * (unsigned)s->slots * (unsigned)regions;
  if (o->check && 2 * per_dir > CHECK_MEMORY_LIMIT) {
    perf_error("--check needs %llu MiB of buffers here; lower --max-size, --window, --group or --comms",
               2 * per_dir >> 20);
    return -1;
  }
  s->mem = perf_mem_open(o->cuda);
  if (!s->mem) return -1;
  s->send_mem = perf_mem_alloc(s->mem, per_dir);
  s->recv_mem = perf_mem_alloc(s->mem, per_dir);
  if (o->check && o->cuda) s->stage = malloc(s->slot_bytes);
  if (!s->send_mem || !s->recv_mem || (o->check && o->cuda && !s->stage)) {
    perf_error("cannot allocate %llu MiB of %s buffers", 2 * per_dir >> 20, o->cuda ? "GPU" : "host");
    return -1;
  }
  for (int i = 0; i < s->nconn; i++) {
    struct perf_conn *c = &s->conns[i];
    size_t off = o->check ? (size_t)i * s->slot_bytes * (size_t)s->slots : 0;
    c->send_buf = s->send_mem + off;
    c->recv_buf = s->recv_mem + off;
    size_t len = s->slot_bytes * (size_t)s->slots;
    if (s->t->ops->reg(s->t, c->send_comm, c->send_buf, len, &c->send_mh)) return -1;
    if (s->t->ops->reg(s->t, c->recv_comm, c->recv_buf, len, &c->recv_mh)) return -1;
  }
  return 0;
}

struct perf_session *perf_session_open(struct perf_transport *t, int ctrl_fd, const struct perf_opts *o,
                                       int is_client) {
  if (o->group > t->max_recvs) {
    perf_error("--group %d: the transport accepts at most %d buffers per receive", o->group, t->max_recvs);
    return NULL;
  }
  struct perf_session *s = calloc(1, sizeof(*s));
  if (!s) return NULL;
  s->t = t;
  s->o = o;
  s->fd = ctrl_fd;
  s->is_client = is_client;
  s->nconn = o->comms;
  s->conns = calloc((size_t)s->nconn, sizeof(*s->conns));
  s->samples = calloc(1, sizeof(double));
  if (!s->conns || !s->samples || connect_all(s) || alloc_buffers(s)) {
    perf_session_close(s);
    return NULL;
  }
  return s;
}

int perf_session_close(struct perf_session *s) {
  if (!s) return 0;
  const struct perf_transport_ops *ops = s->t->ops;
  int rc = 0;
  for (int i = 0; s->conns && i < s->nconn; i++) {
    struct perf_conn *c = &s->conns[i];
    if (c->send_mh && ops->dereg(s->t, c->send_comm, c->send_mh)) rc = -1;
    if (c->recv_mh && ops->dereg(s->t, c->recv_comm, c->recv_mh)) rc = -1;
    if (c->send_comm && ops->close_send(s->t, c->send_comm)) rc = -1;
    if (c->recv_comm && ops->close_recv(s->t, c->recv_comm)) rc = -1;
  }
  free(s->conns);
  if (s->mem) {
    perf_mem_free(s->mem, s->send_mem);
    perf_mem_free(s->mem, s->recv_mem);
    perf_mem_close(s->mem);
  }
  free(s->stage);
  free(s->samples);
  free(s);
  return rc;
}

/* Ping-pong on comm 0: the client sends, the server answers with the same
 * size; one-way latency is half the round trip. Each side has its next
 * receive posted before the data for it can arrive, as NCCL does. */
static int run_latency(struct perf_session *s, size_t size, int iters, int warmup, struct perf_stats *out) {
  struct perf_conn *c = &s->conns[0];
  size_t sizes[PERF_TEST_SIZES];
  int tag = 0, total = iters + warmup;
  void *rreq = NULL, *sreq;
  void *rbuf = c->recv_buf, *rmh = c->recv_mh;
  size_t rsize = size;
  double *samples = realloc(s->samples, (size_t)iters * sizeof(double));
  if (!samples) return -1;
  s->samples = samples;
  s->run++;
  if (perf_ctrl_barrier(s->fd, s->o->timeout_s, "the latency test")) return -1;
  if (!s->is_client && post_recv(s, c->recv_comm, 1, &rbuf, &rsize, &tag, &rmh, &rreq, "ping receive")) return -1;
  for (int it = 0; it < total; it++) {
    if (s->is_client) {
      if (post_recv(s, c->recv_comm, 1, &rbuf, &rsize, &tag, &rmh, &rreq, "pong receive")) return -1;
      if (s->o->check && fill_buf(s, c->send_buf, size, seed_of(s, 0, 0, it))) return -1;
      double t0 = now_s();
      if (post_send(s, c->send_comm, c->send_buf, size, tag, c->send_mh, &sreq, "ping send") ||
          wait_request(s, sreq, sizes, "ping send") || wait_request(s, rreq, sizes, "pong receive"))
        return -1;
      double t1 = now_s();
      if (it >= warmup) samples[it - warmup] = (t1 - t0) * 1e6 / 2;
      if (sizes[0] != size) {
        perf_error("pong of %zu bytes arrived as %zu", size, sizes[0]);
        return -1;
      }
      if (s->o->check && verify_buf(s, c->recv_buf, size, seed_of(s, 1, 0, it), "pong", 0, it)) return -1;
    } else {
      if (wait_request(s, rreq, sizes, "ping receive")) return -1;
      if (sizes[0] != size) {
        perf_error("ping of %zu bytes arrived as %zu", size, sizes[0]);
        return -1;
      }
      if (s->o->check && verify_buf(s, c->recv_buf, size, seed_of(s, 0, 0, it), "ping", 0, it)) return -1;
      if (it + 1 < total &&
          post_recv(s, c->recv_comm, 1, &rbuf, &rsize, &tag, &rmh, &rreq, "ping receive"))
        return -1;
      if (s->o->check && fill_buf(s, c->send_buf, size, seed_of(s, 1, 0, it))) return -1;
      if (post_send(s, c->send_comm, c->send_buf, size, tag, c->send_mh, &sreq, "pong send") ||
          wait_request(s, sreq, sizes, "pong send"))
        return -1;
    }
  }
  if (s->is_client) perf_stats_compute(samples, (size_t)iters, out);
  return 0;
}

/* Requests in flight on one comm and direction, completed in order. */
struct flight {
  void *req[PERF_MAX_WINDOW];
  int head, count;
  long posted, done; /* sends: messages; receives: grouped requests */
};

/* Keep every comm's window full in the chosen directions until iters grouped
 * receives (iters x group messages) have completed on each. This side sends
 * --check data as direction dir and expects the peer's as !dir. */
static int run_stream(struct perf_session *s, size_t size, int iters, int do_send, int do_recv, int dir) {
  const struct perf_opts *o = s->o;
  const struct perf_transport_ops *ops = s->t->ops;
  int n = o->group;
  long send_total = (long)iters * n;
  struct flight *fl = calloc((size_t)s->nconn * 2, sizeof(*fl));
  if (!fl) return -1;
  int rc = -1;
  long comms_left = (long)s->nconn * ((do_send ? 1 : 0) + (do_recv ? 1 : 0));
  struct watchdog w = {now_s(), 0};
  size_t sizes[PERF_TEST_SIZES];
  while (comms_left > 0) {
    for (int ci = 0; ci < s->nconn; ci++) {
      struct perf_conn *c = &s->conns[ci];
      struct flight *rf = &fl[2 * ci], *sf = &fl[2 * ci + 1];
      if (do_recv && rf->done < iters) {
        while (rf->posted < iters && rf->count < o->window) {
          void *bufs[PERF_MAX_GROUP], *mhs[PERF_MAX_GROUP], *req;
          size_t rsizes[PERF_MAX_GROUP];
          int tags[PERF_MAX_GROUP];
          int slot0 = (int)((rf->posted * n) % s->slots);
          for (int i = 0; i < n; i++) {
            bufs[i] = c->recv_buf + (size_t)((slot0 + i) % s->slots) * s->slot_bytes;
            mhs[i] = c->recv_mh;
            rsizes[i] = size;
            tags[i] = i;
          }
          if (ops->irecv(s->t, c->recv_comm, n, bufs, rsizes, tags, mhs, &req)) goto out;
          if (!req) break;
          rf->req[(rf->head + rf->count++) % PERF_MAX_WINDOW] = req;
          rf->posted++;
        }
        while (rf->count) {
          int done;
          if (ops->test(s->t, rf->req[rf->head], &done, sizes)) goto out;
          if (!done) break;
          for (int i = 0; i < n; i++) {
            long msg = rf->done * n + i;
            if (sizes[i] != size) {
              perf_error("comm %d message %ld: %zu bytes arrived, %zu were sent", ci, msg, sizes[i], size);
              goto out;
            }
            if (o->check && verify_buf(s, c->recv_buf + (size_t)(msg % s->slots) * s->slot_bytes, size,
                                       seed_of(s, !dir, ci, msg), "stream", ci, msg))
              goto out;
          }
          rf->head = (rf->head + 1) % PERF_MAX_WINDOW;
          rf->count--;
          w.last_progress = now_s();
          if (++rf->done == iters) comms_left--;
        }
      }
      if (do_send && sf->done < send_total) {
        while (sf->posted < send_total && sf->count < s->send_window) {
          char *buf = c->send_buf + (size_t)(sf->posted % s->slots) * s->slot_bytes;
          void *req;
          if (o->check && fill_buf(s, buf, size, seed_of(s, dir, ci, sf->posted))) goto out;
          if (ops->isend(s->t, c->send_comm, buf, size, (int)(sf->posted % n), c->send_mh, &req)) goto out;
          if (!req) break;
          sf->req[(sf->head + sf->count++) % PERF_MAX_WINDOW] = req;
          sf->posted++;
        }
        while (sf->count) {
          int done;
          if (ops->test(s->t, sf->req[sf->head], &done, sizes)) goto out;
          if (!done) break;
          sf->head = (sf->head + 1) % PERF_MAX_WINDOW;
          sf->count--;
          w.last_progress = now_s();
          if (++sf->done == send_total) comms_left--;
        }
      }
    }
    if (watchdog_check(s, &w, do_send && do_recv ? "the bidirectional stream" : "the stream")) goto out;
  }
  rc = 0;
out:
  free(fl);
  return rc;
}

/* Client to server; the server's small acknowledgement after its last
 * receive ends the client's clock, so the time covers delivery. */
static int run_bw(struct perf_session *s, size_t size, int iters, double *elapsed) {
  struct perf_conn *c = &s->conns[0];
  size_t sizes[PERF_TEST_SIZES], ack_size = ACK_BYTES;
  void *req = NULL, *rbuf = c->recv_buf, *rmh = c->recv_mh;
  int tag = 0;
  s->run++;
  if (s->is_client &&
      post_recv(s, c->recv_comm, 1, &rbuf, &ack_size, &tag, &rmh, &req, "the acknowledgement receive"))
    return -1;
  if (perf_ctrl_barrier(s->fd, s->o->timeout_s, "the bandwidth test")) return -1;
  double t0 = now_s();
  if (run_stream(s, size, iters, s->is_client, !s->is_client, s->is_client ? 0 : 1)) return -1;
  if (s->is_client) {
    if (wait_request(s, req, sizes, "the acknowledgement")) return -1;
  } else {
    if (post_send(s, c->send_comm, c->send_buf, ACK_BYTES, 0, c->send_mh, &req, "the acknowledgement") ||
        wait_request(s, req, sizes, "the acknowledgement"))
      return -1;
  }
  *elapsed = now_s() - t0;
  return 0;
}

/* Both directions at once; the slower side's time counts. */
static int run_bibw(struct perf_session *s, size_t size, int iters, double *elapsed) {
  s->run++;
  if (perf_ctrl_barrier(s->fd, s->o->timeout_s, "the bidirectional test")) return -1;
  double t0 = now_s();
  if (run_stream(s, size, iters, 1, 1, s->is_client ? 0 : 1)) return -1;
  double mine = now_s() - t0, theirs;
  if (perf_ctrl_send(s->fd, &mine, sizeof(mine), s->o->timeout_s, "the bidirectional time") ||
      perf_ctrl_recv(s->fd, &theirs, sizeof(theirs), s->o->timeout_s, "the bidirectional time"))
    return -1;
  *elapsed = mine > theirs ? mine : theirs;
  return 0;
}

int perf_session_run(struct perf_session *s, size_t size, struct perf_result *res) {
  const struct perf_opts *o = s->o;
  memset(res, 0, sizeof(*res));
  res->size = size;
  perf_iters_for(o, size, &res->iters, &res->warmup);
  double msgs = (double)res->iters * s->nconn * o->group, elapsed;
  if (o->tests & PERF_TEST_LAT) {
    if (run_latency(s, size, res->iters, res->warmup, &res->lat_us)) return -1;
    res->have_lat = s->is_client;
  }
  if (o->tests & PERF_TEST_BW) {
    if (res->warmup && run_bw(s, size, res->warmup, &elapsed)) return -1;
    if (run_bw(s, size, res->iters, &elapsed)) return -1;
    res->have_bw = s->is_client;
    res->bw_GBps = msgs * (double)size / elapsed / 1e9;
    res->bw_msg_rate = msgs / elapsed;
  }
  if (o->tests & PERF_TEST_BIBW) {
    if (res->warmup && run_bibw(s, size, res->warmup, &elapsed)) return -1;
    if (run_bibw(s, size, res->iters, &elapsed)) return -1;
    res->have_bibw = s->is_client;
    res->bibw_GBps = 2 * msgs * (double)size / elapsed / 1e9;
    res->bibw_msg_rate = 2 * msgs / elapsed;
  }
  return 0;
}
