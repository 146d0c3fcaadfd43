/* srd-perf --rma, raw half: what a libfabric program does for one-sided
 * RMA on the provider and NIC group the plugin would use, with nothing
 * around it: fi_write for a put, fi_read for a get, and for put+signal
 * fi_writedata whose remote completions (their immediate data) are the
 * signal. It opens the rails and lanes srd-perf --raw opens (perf_raw.c,
 * perf_raw_lanes.c): below the plugin's stripe threshold an op goes on the
 * NICs' own endpoints (whole on a one-NIC group, split over the NICs as
 * --raw splits); from the threshold up it is split over as many lanes as
 * the plugin has, each an endpoint with a thread of its own, as the plugin
 * stripes its RMA.
 *
 * The signal of a striped put: every stripe is an fi_writedata carrying
 * {sequence, stripe count} (raw_imm), and the target counts a signal once
 * it saw that many remote completions of the sequence. A remote completion
 * is reported only after its stripe's data landed, on any endpoint, so the
 * signal cannot overtake any of the op's data. Writing the data with
 * fi_write and one signal after their local completions would not do:
 * local completion of a write does not mean remote placement (tcp). The
 * sequence ring (RAW_RING) is far above the ops srd-perf keeps in flight.
 * No receives are posted: the provider's mode never has FI_RX_CQ_DATA
 * (srd_topo_discover's hints). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include "perf_ctrl.h"
#include "perf_log.h"
#include "perf_raw.h"
#include "perf_rma.h"

#define REQS (PERF_MAX_WINDOW + 4) /* ops in flight: srd-perf's window and a few more */
#define REQ_STRIPES RAW_MAX_RAILS  /* one a rail; more only where max_msg_size cuts stripes smaller */

struct rma_req;

struct rma_stripe {
  struct fi_context2 fi_ctx; /* first: the completion's op_context */
  struct rma_req *req;
};

struct rma_req {
  int in_use, pending; /* pending: stripes not complete */
  struct rma_stripe stripes[REQ_STRIPES];
};

/* What a registration tells the peer: its window on each of its rails. */
struct window_wire {
  uint64_t addr, len;
  uint32_t nkeys, pad;
  uint64_t key[RAW_MAX_RAILS];
};

struct raw_window {
  struct raw_mr mr;
  struct window_wire peer; /* the peer's window of the same index */
};

struct rma_raw {
  struct perf_rma base;
  struct raw raw;                /* rails and lanes, as srd-perf --raw opens them */
  fi_addr_t peer[RAW_MAX_RAILS]; /* rail i reaches the peer's rail i mod its count */
  int peer_nrails;
  int fd, timeout_s;
  uint32_t signal_seq;             /* origin: the next put+signal's sequence */
  uint64_t signals;                /* target: the peer's put+signals whose stripes all landed */
  uint16_t stripes_seen[RAW_RING]; /* target: stripes landed, by sequence */
  struct rma_req reqs[REQS];
};

static struct rma_raw *as_rma_raw(struct perf_rma *t) { return (struct rma_raw *)t; }
static struct rma_raw *rma_of(struct raw *r) { return (struct rma_raw *)((char *)r - offsetof(struct rma_raw, raw)); }

static void on_completion(struct raw *raw, const struct fi_cq_data_entry *e) {
  struct rma_raw *r = rma_of(raw);
  if (e->flags & FI_REMOTE_CQ_DATA) { /* a stripe of the peer's put+signal landed */
    uint32_t seq = raw_imm_seq(e->data);
    if (++r->stripes_seen[seq] == raw_imm_stripes(e->data)) {
      r->stripes_seen[seq] = 0;
      r->signals++;
    }
    return;
  }
  ((struct rma_stripe *)e->op_context)->req->pending--;
}

static int progress(struct rma_raw *r) { return raw_poll(&r->raw, on_completion); }

static struct rma_req *take_req(struct rma_raw *r) {
  for (int i = 0; i < REQS; i++)
    if (!r->reqs[i].in_use) {
      r->reqs[i].in_use = 1;
      r->reqs[i].pending = 0;
      return &r->reqs[i];
    }
  return NULL;
}

static void describe(struct rma_raw *r) {
  int lanes = r->raw.nrails / r->raw.nnics;
  snprintf(r->base.base.description, sizeof(r->base.base.description),
           "raw libfabric %s (fi_write; putsig: fi_writedata, their remote completions the signal; fi_read; %d NIC%s "
           "x %d lane%s, one endpoint each%s; ops of %zu B or more striped over %s)",
           r->raw.base.provider, r->raw.nnics, r->raw.nnics == 1 ? "" : "s", lanes, lanes == 1 ? "" : "s",
           lanes > 1 ? ", a thread per lane but the first" : "", r->raw.stripe_threshold,
           lanes > 1 ? "the threads' lanes" : "every NIC");
}

/* The lanes open here, as srd-perf --raw opens them at its connect; then
 * every rail's address goes to the peer. */
static int rma_connect(struct perf_rma *t, int fd, int is_client, int timeout_s) {
  struct rma_raw *r = as_rma_raw(t);
  (void)is_client;
  r->fd = fd;
  r->timeout_s = timeout_s;
  struct raw_names mine, theirs;
  struct raw_peer *first;
  memset(&mine, 0, sizeof(mine));
  if (raw_lanes_open(&r->raw) || raw_fill_names(&r->raw, &mine) ||
      perf_ctrl_send(fd, &mine, sizeof(mine), timeout_s, "the raw RMA addresses") ||
      perf_ctrl_recv(fd, &theirs, sizeof(theirs), timeout_s, "the raw RMA addresses") ||
      raw_peer_insert_rails(&r->raw, r->raw.nrails, &theirs, r->peer, &first))
    return -1;
  r->peer_nrails = (int)theirs.nrails;
  describe(r);
  return 0;
}

static int rma_disconnect(struct perf_rma *t) {
  (void)t; /* the endpoints and their address vectors go with the transport */
  return 0;
}

static int rma_reg(struct perf_rma *t, void *buf, size_t len, void **win) {
  struct rma_raw *r = as_rma_raw(t);
  struct raw_window *w = calloc(1, sizeof(*w));
  if (!w) {
    perf_error("raw RMA: out of memory");
    return -1;
  }
  /* A target cannot tell when striped ops come, and a provider with manual
   * progress (tcp) lands them only while their lane is polled: the lanes'
   * threads start once a window can take one. */
  if ((len >= r->raw.stripe_threshold && raw_lanes_start(&r->raw)) ||
      raw_register_on_rails(&r->raw, buf, len, 0, &w->mr)) {
    free(w);
    return -1;
  }
  /* Offset-based providers address the peer's window from 0. */
  struct window_wire mine = {r->raw.rails[0].virt_addr ? (uint64_t)(uintptr_t)buf : 0, len, (uint32_t)w->mr.nrails};
  for (int i = 0; i < w->mr.nrails; i++) mine.key[i] = w->mr.key[i];
  int rc = perf_ctrl_send(r->fd, &mine, sizeof(mine), r->timeout_s, "the raw RMA window") ||
           perf_ctrl_recv(r->fd, &w->peer, sizeof(w->peer), r->timeout_s, "the raw RMA window");
  if (!rc && w->peer.nkeys != (uint32_t)r->peer_nrails) {
    perf_error("raw RMA: the peer registered its window on %u rails, not on its %d", w->peer.nkeys, r->peer_nrails);
    rc = -1;
  }
  if (rc) {
    raw_deregister(&w->mr);
    free(w);
    return -1;
  }
  *win = w;
  return 0;
}

static int rma_dereg(struct perf_rma *t, void *win) {
  (void)t;
  raw_deregister(&((struct raw_window *)win)->mr);
  free(win);
  return 0;
}

/* size bytes between our local window at local_off and the peer's remote
 * one at remote_off, as kind, split over the rails raw_stripe_rails picks
 * for the size. 0 with *req NULL: every request is taken, call again. */
static int post_op(struct rma_raw *r, enum raw_lane_kind kind, struct raw_window *local, size_t local_off,
                   struct raw_window *remote, size_t remote_off, size_t size, void **req) {
  *req = NULL;
  if (remote_off + size > remote->peer.len) {
    perf_error("raw RMA: %zu bytes at %zu do not fit the peer's window of %llu bytes", size, remote_off,
               (unsigned long long)remote->peer.len);
    return -1;
  }
  int first_rail, nrails = raw_stripe_rails(&r->raw, size, &first_rail);
  if (nrails < 0) return -1;
  size_t stripe = raw_stripe_len(&r->raw, size, nrails);
  size_t nstripes = size ? (size + stripe - 1) / stripe : 1;
  if (nstripes > REQ_STRIPES) {
    perf_error("raw RMA: %zu bytes need %zu stripes of the provider's largest message (%d at most)", size, nstripes,
               REQ_STRIPES);
    return -1;
  }
  struct rma_req *q = take_req(r);
  if (!q) return progress(r);
  uint64_t imm = kind == RAW_LANE_WRITEDATA ? raw_imm(0, r->signal_seq++, (uint32_t)nstripes) : 0;
  unsigned cursor = r->raw.stripe_cursor;
  r->raw.stripe_cursor += (unsigned)nstripes;
  for (size_t i = 0; i < nstripes; i++) {
    size_t off = i * stripe, len = size - off < stripe ? size - off : stripe;
    int rail = first_rail + (int)((cursor + i) % (size_t)nrails);
    struct rma_stripe *s = &q->stripes[i];
    s->req = q;
    struct raw_lane_op w = {.kind = kind,
                            .ctx = &s->fi_ctx,
                            .buf = local->mr.base + local_off + off,
                            .len = len,
                            .desc = local->mr.desc[rail],
                            .imm = imm,
                            .dest = r->peer[rail],
                            .addr = remote->peer.addr + remote_off + off,
                            .key = remote->peer.key[rail % r->peer_nrails]};
    q->pending++;
    if (rail >= r->raw.nnics ? raw_lane_post(&r->raw, rail, &w)
                             : POST_RETRY_WITH(progress(r), raw_post_op(r->raw.rails[rail].ep, &w), raw_op_name(kind)))
      return -1; /* the transport is broken; stripes already posted keep the request */
  }
  *req = q;
  return 0;
}

static int rma_put(struct perf_rma *t, void *src, size_t src_off, void *dst, size_t dst_off, size_t size, int signal,
                   void **req) {
  return post_op(as_rma_raw(t), signal ? RAW_LANE_WRITEDATA : RAW_LANE_WRITE, src, src_off, dst, dst_off, size, req);
}

static int rma_get(struct perf_rma *t, void *local, size_t local_off, void *remote, size_t remote_off, size_t size,
                   void **req) {
  return post_op(as_rma_raw(t), RAW_LANE_READ, local, local_off, remote, remote_off, size, req);
}

static int rma_test(struct perf_rma *t, void *req, int *done) {
  struct rma_raw *r = as_rma_raw(t);
  struct rma_req *q = req;
  if (q->pending && progress(r)) return -1; /* a finished op costs no poll(2) */
  *done = !q->pending;
  if (*done) q->in_use = 0;
  return 0;
}

static int rma_signals(struct perf_rma *t, uint64_t *count) {
  struct rma_raw *r = as_rma_raw(t);
  if (progress(r)) return -1;
  *count = r->signals;
  return 0;
}

static void rma_destroy(struct perf_transport *t) {
  struct rma_raw *r = (struct rma_raw *)t;
  raw_close(&r->raw);
  free(r);
}

static const struct perf_transport_ops destroy_only = {.destroy = rma_destroy};

static const struct perf_rma_ops raw_rma_ops = {
    .connect = rma_connect,
    .reg = rma_reg,
    .dereg = rma_dereg,
    .put = rma_put,
    .get = rma_get,
    .test = rma_test,
    .signals = rma_signals,
    .disconnect = rma_disconnect,
};

struct perf_transport *perf_rma_raw_open(int dev) {
  struct rma_raw *r = calloc(1, sizeof(*r));
  if (!r) {
    perf_error("raw: out of memory");
    return NULL;
  }
  r->base.base.ops = &destroy_only;
  r->base.rma = &raw_rma_ops;
  if (raw_open_rails(&r->raw, dev, 0)) goto fail;
  for (int i = 0; i < r->raw.nnics; i++)
    if (raw_open_endpoint(&r->raw, &r->raw.rails[i])) goto fail;
  struct perf_transport *b = &r->base.base;
  snprintf(b->kind, sizeof(b->kind), "%s", r->raw.base.kind);
  snprintf(b->provider, sizeof(b->provider), "%s", r->raw.base.provider);
  snprintf(b->device, sizeof(b->device), "%s", r->raw.base.device);
  describe(r);
  return b;
fail:
  rma_destroy(&r->base.base);
  return NULL;
}
