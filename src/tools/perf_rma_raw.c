/* srd-perf --rma, raw half: what a libfabric program does for one-sided
 * RMA on the provider and NIC the plugin would use, with nothing around it:
 * fi_write for a put, fi_read for a get, and for put+signal one fi_writedata
 * whose remote completion (its immediate data) is the signal: the target
 * counts the completions its CQ reports, which it sees only once the data
 * landed. The plugin must carry a signal into a memory word and order it
 * after striped writes; this is the cheapest a single-endpoint program can
 * pay for the same promise. One endpoint on the group's first NIC. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "perf_ctrl.h"
#include "perf_log.h"
#include "perf_raw.h"
#include "perf_rma.h"
#include "srd/param.h"
#include "srd/topo.h"

#define REQS (PERF_MAX_WINDOW + 4) /* ops in flight: srd-perf's window and a few more */
#define RX_SLOTS 64                /* receives a writedata may consume (FI_RX_CQ_DATA providers) */
#define RX_BYTES 64

struct raw_rma_req {
  struct fi_context2 fi_ctx; /* first: the completion's op_context */
  int in_use, done;
};

struct raw_window {
  struct fid_mr *mr;
  void *desc;
  char *base;
  uint64_t peer_addr, peer_key, peer_len; /* the peer's window of the same index */
};

/* What a registration tells the peer. */
struct raw_window_wire {
  uint64_t addr, key, len;
};

struct rma_raw {
  struct perf_rma base;
  struct fi_info *info;
  struct fid_fabric *fabric;
  struct fid_domain *domain;
  struct fid_ep *ep;
  struct fid_av *av;
  struct fid_cq *cq;
  fi_addr_t peer;
  int fd, timeout_s;
  uint64_t next_key, signals;
  size_t max_msg;
  struct raw_rma_req reqs[REQS];
  struct fi_context2 rx_ctx[RX_SLOTS];
  char *rx_buf;
  struct fid_mr *rx_mr;
};

static struct rma_raw *as_rma_raw(struct perf_rma *t) { return (struct rma_raw *)t; }

static int post_rx(struct rma_raw *r, int slot) {
  return raw_fi_check((int)fi_recv(r->ep, r->rx_buf + (size_t)slot * RX_BYTES, RX_BYTES, fi_mr_desc(r->rx_mr),
                                   FI_ADDR_UNSPEC, &r->rx_ctx[slot]),
                      "fi_recv");
}

static int rx_slot_of(struct rma_raw *r, void *ctx) {
  for (int i = 0; i < RX_SLOTS; i++)
    if (ctx == &r->rx_ctx[i]) return i;
  return -1;
}

static int progress(struct rma_raw *r) {
  struct fi_cq_data_entry e[16];
  for (;;) {
    ssize_t n = fi_cq_read(r->cq, e, 16);
    if (n == -FI_EAGAIN) return 0;
    if (n == -FI_EAVAIL) {
      struct fi_cq_err_entry err;
      memset(&err, 0, sizeof(err));
      fi_cq_readerr(r->cq, &err, 0);
      perf_error("raw RMA: an op failed: %s (provider: %s)", fi_strerror(err.err),
                 fi_cq_strerror(r->cq, err.prov_errno, err.err_data, NULL, 0));
      return -1;
    }
    if (n < 0) return raw_fi_check((int)n, "fi_cq_read");
    for (ssize_t i = 0; i < n; i++) {
      int slot = rx_slot_of(r, e[i].op_context);
      if (e[i].flags & FI_REMOTE_CQ_DATA) r->signals++;
      if (slot >= 0) {
        if (post_rx(r, slot)) return -1;
      } else if (!(e[i].flags & FI_REMOTE_CQ_DATA)) {
        ((struct raw_rma_req *)e[i].op_context)->done = 1;
      }
    }
    if (n < 16) return 0;
  }
}

static struct raw_rma_req *take_req(struct rma_raw *r) {
  for (int i = 0; i < REQS; i++)
    if (!r->reqs[i].in_use) {
      r->reqs[i] = (struct raw_rma_req){.in_use = 1};
      return &r->reqs[i];
    }
  return NULL;
}

static int raw_connect(struct perf_rma *t, int fd, int is_client, int timeout_s) {
  struct rma_raw *r = as_rma_raw(t);
  (void)is_client;
  r->fd = fd;
  r->timeout_s = timeout_s;
  uint8_t mine[256], theirs[256];
  size_t len = sizeof(mine);
  memset(mine, 0, sizeof(mine));
  if (raw_fi_check(fi_getname(&r->ep->fid, mine, &len), "fi_getname") ||
      perf_ctrl_send(fd, mine, sizeof(mine), timeout_s, "the raw RMA address") ||
      perf_ctrl_recv(fd, theirs, sizeof(theirs), timeout_s, "the raw RMA address"))
    return -1;
  if (fi_av_insert(r->av, theirs, 1, &r->peer, 0, NULL) != 1) {
    perf_error("raw RMA: fi_av_insert of the peer's address failed");
    return -1;
  }
  return 0;
}

static int raw_disconnect(struct perf_rma *t) {
  (void)t; /* the endpoint and its address vector go with the transport */
  return 0;
}

static int raw_reg(struct perf_rma *t, void *buf, size_t len, void **win) {
  struct rma_raw *r = as_rma_raw(t);
  struct raw_window *w = calloc(1, sizeof(*w));
  if (!w) return -1;
  int prov_key = (r->info->domain_attr->mr_mode & FI_MR_PROV_KEY) != 0;
  if (raw_fi_check(fi_mr_reg(r->domain, buf, len, FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE, 0,
                             prov_key ? 0 : ++r->next_key, 0, &w->mr, NULL),
                   "fi_mr_reg")) {
    free(w);
    return -1;
  }
  w->desc = fi_mr_desc(w->mr);
  w->base = buf;
  /* Offset-based providers address the peer's window from 0. */
  int virt = (r->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) != 0;
  struct raw_window_wire mine = {virt ? (uint64_t)(uintptr_t)buf : 0, fi_mr_key(w->mr), len}, theirs;
  if (perf_ctrl_send(r->fd, &mine, sizeof(mine), r->timeout_s, "the raw RMA window") ||
      perf_ctrl_recv(r->fd, &theirs, sizeof(theirs), r->timeout_s, "the raw RMA window")) {
    fi_close(&w->mr->fid);
    free(w);
    return -1;
  }
  w->peer_addr = theirs.addr, w->peer_key = theirs.key, w->peer_len = theirs.len;
  *win = w;
  return 0;
}

static int raw_dereg(struct perf_rma *t, void *win) {
  (void)t;
  struct raw_window *w = win;
  int rc = raw_fi_check(fi_close(&w->mr->fid), "fi_close (MR)");
  free(w);
  return rc;
}

/* Does the op fit the provider and the peer's window? 0, or -1 said why. */
static int check_fits(struct rma_raw *r, const struct raw_window *remote, size_t remote_off, size_t size) {
  if (size > r->max_msg || remote_off + size > remote->peer_len) {
    perf_error("raw RMA: %zu bytes at %zu do not fit the provider's %zu or the peer's window", size, remote_off,
               r->max_msg);
    return -1;
  }
  return 0;
}

/* A refused post (EAGAIN) leaves *req NULL: the caller tries again. */
static int finish_post(struct rma_raw *r, ssize_t rc, struct raw_rma_req *q, void **req, const char *what) {
  if (rc == -FI_EAGAIN) {
    q->in_use = 0;
    return progress(r);
  }
  if (raw_fi_check((int)rc, what)) {
    q->in_use = 0;
    return -1;
  }
  *req = q;
  return 0;
}

static int raw_put(struct perf_rma *t, void *src, size_t src_off, void *dst, size_t dst_off, size_t size, int signal,
                   void **req) {
  struct rma_raw *r = as_rma_raw(t);
  struct raw_window *s = src, *d = dst;
  *req = NULL;
  if (check_fits(r, d, dst_off, size)) return -1;
  struct raw_rma_req *q = take_req(r);
  if (!q) return progress(r);
  ssize_t rc = signal ? fi_writedata(r->ep, s->base + src_off, size, s->desc, 1, r->peer, d->peer_addr + dst_off,
                                     d->peer_key, &q->fi_ctx)
                      : fi_write(r->ep, s->base + src_off, size, s->desc, r->peer, d->peer_addr + dst_off, d->peer_key,
                                 &q->fi_ctx);
  return finish_post(r, rc, q, req, signal ? "fi_writedata" : "fi_write");
}

static int raw_get(struct perf_rma *t, void *local, size_t local_off, void *remote, size_t remote_off, size_t size,
                   void **req) {
  struct rma_raw *r = as_rma_raw(t);
  struct raw_window *l = local, *m = remote;
  *req = NULL;
  if (check_fits(r, m, remote_off, size)) return -1;
  struct raw_rma_req *q = take_req(r);
  if (!q) return progress(r);
  ssize_t rc = fi_read(r->ep, l->base + local_off, size, l->desc, r->peer, m->peer_addr + remote_off, m->peer_key,
                       &q->fi_ctx);
  return finish_post(r, rc, q, req, "fi_read");
}

static int raw_test(struct perf_rma *t, void *req, int *done) {
  struct rma_raw *r = as_rma_raw(t);
  struct raw_rma_req *q = req;
  if (progress(r)) return -1;
  *done = q->done;
  if (q->done) q->in_use = 0;
  return 0;
}

static int raw_signals(struct perf_rma *t, uint64_t *count) {
  struct rma_raw *r = as_rma_raw(t);
  if (progress(r)) return -1;
  *count = r->signals;
  return 0;
}

static void raw_destroy(struct perf_transport *t) {
  struct rma_raw *r = (struct rma_raw *)t;
  if (r->ep) fi_close(&r->ep->fid);
  if (r->rx_mr) fi_close(&r->rx_mr->fid);
  if (r->cq) fi_close(&r->cq->fid);
  if (r->av) fi_close(&r->av->fid);
  if (r->domain) fi_close(&r->domain->fid);
  if (r->fabric) fi_close(&r->fabric->fid);
  if (r->info) fi_freeinfo(r->info);
  free(r->rx_buf);
  free(r);
}

static const struct perf_transport_ops destroy_only = {.destroy = raw_destroy};

static const struct perf_rma_ops raw_rma_ops = {
    .connect = raw_connect,
    .reg = raw_reg,
    .dereg = raw_dereg,
    .put = raw_put,
    .get = raw_get,
    .test = raw_test,
    .signals = raw_signals,
    .disconnect = raw_disconnect,
};

static int open_endpoint(struct rma_raw *r) {
  struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_NONE, .size = 4096};
  struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
  if (raw_fi_check(fi_fabric(r->info->fabric_attr, &r->fabric, NULL), "fi_fabric") ||
      raw_fi_check(fi_domain(r->fabric, r->info, &r->domain, NULL), "fi_domain") ||
      raw_fi_check(fi_endpoint(r->domain, r->info, &r->ep, NULL), "fi_endpoint") ||
      raw_fi_check(fi_cq_open(r->domain, &cq_attr, &r->cq, NULL), "fi_cq_open") ||
      raw_fi_check(fi_av_open(r->domain, &av_attr, &r->av, NULL), "fi_av_open") ||
      raw_fi_check(fi_ep_bind(r->ep, &r->av->fid, 0), "fi_ep_bind(av)") ||
      raw_fi_check(fi_ep_bind(r->ep, &r->cq->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)") ||
      raw_name_shm_endpoint(r->base.base.provider, r->ep) || raw_fi_check(fi_enable(r->ep), "fi_enable"))
    return -1;
  r->rx_buf = calloc(RX_SLOTS, RX_BYTES);
  if (!r->rx_buf || raw_fi_check(fi_mr_reg(r->domain, r->rx_buf, RX_SLOTS * RX_BYTES, FI_RECV, 0, ++r->next_key, 0,
                                           &r->rx_mr, NULL),
                                 "fi_mr_reg (receives)"))
    return -1;
  for (int i = 0; i < RX_SLOTS; i++)
    if (post_rx(r, i)) return -1;
  return 0;
}

struct perf_transport *perf_rma_raw_open(int dev) {
  struct srd_nic_list nics;
  if (srd_topo_discover(&nics)) {
    perf_error("raw: no usable libfabric provider or NIC (run srd-info)");
    return NULL;
  }
  struct srd_topo *topo = calloc(1, sizeof(*topo));
  struct rma_raw *r = calloc(1, sizeof(*r));
  if (!topo || !r) {
    perf_error("raw: out of memory");
    goto fail;
  }
  r->base.base.ops = &destroy_only;
  r->base.rma = &raw_rma_ops;
  snprintf(r->base.base.kind, sizeof(r->base.base.kind), "raw");
  snprintf(r->base.base.provider, sizeof(r->base.base.provider), "%s", nics.provider);
  srd_topo_group_or_all(&nics, (int)srd_param_int(SRD_PARAM_RAILS), topo);
  if (dev >= topo->ngroups) {
    perf_error("raw: --dev %d: there are %d NIC groups", dev, topo->ngroups);
    goto fail;
  }
  const struct srd_nic *nic = &nics.nics[topo->groups[dev].nics[0]];
  r->info = fi_dupinfo(nic->info);
  if (!r->info || !(r->info->caps & FI_RMA)) {
    perf_error("raw --rma: provider %s offers no RMA on %s", nics.provider, nic->name);
    goto fail;
  }
  r->max_msg = r->info->ep_attr->max_msg_size ? r->info->ep_attr->max_msg_size : SIZE_MAX;
  if (open_endpoint(r)) goto fail;
  snprintf(r->base.base.device, sizeof(r->base.base.device), "group %d of %d: %s", dev, topo->ngroups, nic->name);
  snprintf(r->base.base.description, sizeof(r->base.base.description),
           "raw libfabric %s (fi_write; putsig: fi_writedata, its remote completion the signal; fi_read; one endpoint)",
           nics.provider);
  free(topo);
  srd_topo_free(&nics);
  return &r->base.base;
fail:
  if (r) raw_destroy(&r->base.base);
  free(topo);
  srd_topo_free(&nics);
  return NULL;
}
