/* The baseline srd-perf compares a plugin against: what a libfabric program
 * does best on the same provider and NIC group (srd_topo_*), with as little
 * as possible around it. Up to the plugin's eager size a message goes at once
 * (fi_injectdata within the inject size, else fi_senddata, its sequence as
 * immediate data) into a control receive the peer posted ahead and copies
 * out; the sender holds RAW_EAGER_CREDITS of them, returned in batches.
 * Above, the receiver sends a small clear-to-send (CTS) per buffer
 * {sequence, address, length, one key per rail}; the sender answers with
 * fi_writedata stripes whose 32-bit immediate data {sequence, stripe count}
 * the receiver counts. From the plugin's stripe threshold up the stripes go
 * over as many lanes per NIC as the plugin has progress threads, each lane
 * an endpoint with a thread of its own (perf_raw_lanes.c), as the plugin
 * spreads them.
 * One endpoint per rail for the whole process; rail i talks to peer rail i mod n.
 * Sent and posted sizes are assumed equal (srd-perf always posts both). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "perf_log.h"
#include "perf_transport.h"
#include "srd/cuda.h"
#include "srd/gdr.h"
#include "srd/param.h"
#include "srd/sys.h"
#include "srd/topo.h"

#include "perf_raw.h"

static struct raw *as_raw(struct perf_transport *t) { return (struct raw *)t; }

static int raw_listen(struct perf_transport *t, void *handle, void **listen_comm) {
  if (raw_lanes_open(as_raw(t))) return -1;
  struct raw_listen *l = calloc(1, sizeof(*l));
  if (!l) return -1;
  l->comm = raw_comm_create(as_raw(t));
  if (!l->comm) {
    free(l);
    return -1;
  }
  struct raw_handle *h = handle;
  memset(h, 0, sizeof(*h));
  size_t len = sizeof(h->name);
  if (raw_fi_check(fi_getname(&as_raw(t)->rails[0].ep->fid, h->name, &len), "fi_getname")) {
    raw_comm_destroy(l->comm);
    free(l);
    return -1;
  }
  h->magic = RAW_MAGIC;
  h->len = (uint16_t)len;
  h->comm = (uint16_t)l->comm->id;
  *listen_comm = l;
  return 0;
}

static int raw_connect(struct perf_transport *t, void *handle, void **send_comm) {
  struct raw_handle *h = handle;
  *send_comm = NULL;
  if (!h->connecting) {
    if (h->magic != RAW_MAGIC || h->len == 0 || h->len > RAW_NAME_MAX || h->comm >= RAW_MAX_COMMS) {
      perf_error("raw: the peer's handle is not a raw srd-perf handle (a plugin run on the other side?)");
      return -1;
    }
    if (raw_lanes_open(as_raw(t))) return -1;
    struct raw_comm *c = raw_comm_create(as_raw(t));
    if (!c) return -1;
    c->peer0 = raw_peer_insert(c->r, 0, h->name, h->len);
    if (!c->peer0) {
      raw_comm_destroy(c);
      return -1;
    }
    c->peer[0] = c->peer0->addr;
    c->peer_id = h->comm;
    int slot = raw_take_send_slot(c);
    if (slot < 0) {
      raw_comm_destroy(c);
      return -1;
    }
    struct raw_msg *m = raw_msg_start(c, slot, RAW_HELLO);
    if (raw_fill_names(c->r, &m->u.names)) {
      raw_comm_destroy(c);
      return -1;
    }
    c->staged_slot = slot;
    c->staged_len = sizeof(*m);
    h->connecting = c;
  }
  struct raw_comm *c = h->connecting;
  if (raw_try_send_staged(c) < 0 || raw_comm_progress(c)) {
    raw_comm_destroy(c);
    h->connecting = NULL;
    return -1;
  }
  if (c->ready) {
    *send_comm = c;
    h->connecting = NULL;
  }
  return 0;
}

static int raw_accept(struct perf_transport *t, void *listen_comm, void **recv_comm) {
  struct raw_listen *l = listen_comm;
  struct raw_comm *c = l->comm;
  *recv_comm = NULL;
  if (l->accepted) {
    perf_error("raw: a listener accepts one connection");
    return -1;
  }
  if (raw_comm_progress(c)) return -1;
  if (!c->peer_known) return 0;
  if (!c->ready) { /* stage the welcome once */
    int slot = raw_take_send_slot(c);
    if (slot < 0) return -1;
    struct raw_msg *m = raw_msg_start(c, slot, RAW_WELCOME);
    if (raw_fill_names(c->r, &m->u.names)) return -1;
    c->staged_slot = slot;
    c->staged_len = sizeof(*m);
    c->ready = 1;
  }
  int sent = raw_try_send_staged(c);
  if (sent <= 0) return sent;
  /* With manual progress a posted send moves only while we poll: hand the
   * comm over once the welcome is out. */
  if (c->setup_slot >= 0 && raw_comm_progress(c)) return -1;
  if (c->setup_slot >= 0) return 0;
  l->accepted = 1;
  *recv_comm = c;
  return 0;
}

static int raw_reg(struct perf_transport *t, void *comm, void *buf, size_t size, void **mhandle) {
  struct raw_mr *m = malloc(sizeof(*m));
  if (!m) return -1;
  if (raw_register_on_rails(as_raw(t), buf, size, t->cuda, m)) {
    free(m);
    return -1;
  }
  *mhandle = m;
  return 0;
}

static int raw_dereg(struct perf_transport *t, void *comm, void *mhandle) {
  raw_deregister(mhandle);
  free(mhandle);
  return 0;
}

static int try_irecv(struct raw_comm *c, int n, void **bufs, size_t *sizes, void **mhandles, void **request) {
  for (int i = 0; i < n; i++)
    if (c->rx[(c->seq + (uint32_t)i) % RAW_RING].req) return 0; /* ring full: call again */
  struct raw_req *req = raw_req_new(c);
  if (!req) return -1;
  req->n = n;
  req->pending = n;
  for (int i = 0; i < n; i++) {
    struct raw_mr *m = mhandles[i];
    uint32_t seq = c->seq++ & RAW_SEQ_MASK;
    struct raw_rx_slot *rx = &c->rx[seq % RAW_RING];
    rx->req = req;
    req->sizes[i] = sizes[i];
    /* Writes from the stripe threshold up come to the lanes: reap them there. */
    if (sizes[i] >= c->r->stripe_threshold && raw_lanes_start(c->r)) return -1;
    if (sizes[i] <= c->eager_max) { /* no CTS: the message comes eagerly, or already came */
      rx->buf = bufs[i];
      rx->size = &req->sizes[i];
      if (rx->eager) raw_eager_take(c, rx);
      continue;
    }
    int slot = raw_take_send_slot(c);
    if (slot < 0) return -1; /* the comm is broken: requests already posted stay with it */
    struct raw_msg *msg = raw_msg_start(c, slot, RAW_CTS);
    msg->u.cts.seq = seq;
    msg->u.cts.nkeys = (uint32_t)m->nrails;
    msg->u.cts.addr = c->r->rails[0].virt_addr ? (uint64_t)(uintptr_t)bufs[i] : (uint64_t)((char *)bufs[i] - m->base);
    msg->u.cts.len = sizes[i];
    for (int k = 0; k < m->nrails; k++) msg->u.cts.key[k] = m->key[k];
    size_t len = offsetof(struct raw_msg, u.cts.key) + (size_t)m->nrails * sizeof(uint64_t);
    if (raw_send_ctrl(c, slot, len)) return -1;
  }
  *request = req;
  return 0;
}

static int send_eager(struct raw_comm *c, void *buf, size_t size, struct raw_mr *m, void **request) {
  if (!c->peer0->credits) return 0; /* the peer has not taken enough yet: call again */
  struct raw_req *req = raw_req_new(c);
  if (!req) return -1;
  req->n = 1;
  req->sizes[0] = size;
  uint64_t imm = raw_imm(c->peer_id, c->seq++, 0);
  c->peer0->credits--;
  struct fid_ep *ep = c->r->rails[0].ep;
  if (size <= c->r->rails[0].inject_size) {
    if (POST_RETRY(c, fi_injectdata(ep, buf, size, imm, c->peer[0]), "fi_injectdata"))
      return -1; /* the comm is broken; the request stays with it */
  } else {
    struct raw_op *op = &req->inline_ops[0];
    *op = (struct raw_op){.kind = OP_DATA, .comm = c, .req = req};
    req->pending = 1;
    if (POST_RETRY(c, fi_senddata(ep, buf, size, m->desc[0], imm, c->peer[0], &op->fi_ctx), "fi_senddata"))
      return -1;
    c->inflight++;
  }
  *request = req;
  return 0;
}

static int try_isend(struct raw_comm *c, void *buf, size_t size, struct raw_mr *m, void **request) {
  uint32_t seq = c->seq & RAW_SEQ_MASK;
  if (size <= c->eager_max) return send_eager(c, buf, size, m, request);
  uint32_t slot = seq % RAW_RING;
  if (!c->cts_valid[slot]) return 0; /* no clear-to-send yet: call again */
  const struct raw_cts *cts = &c->cts[slot];
  if (cts->seq != seq || size > cts->len) {
    perf_error("raw: CTS for sequence %u (%llu bytes) does not fit send %u (%zu bytes)", cts->seq,
               (unsigned long long)cts->len, seq, size);
    return -1;
  }
  int first_rail, nrails = raw_stripe_rails(c->r, size, &first_rail);
  if (nrails < 0) return -1;
  size_t stripe = raw_stripe_len(c->r, size, nrails);
  size_t nstripes = size ? (size + stripe - 1) / stripe : 1;
  if (nstripes > RAW_MAX_STRIPES) {
    perf_error("raw: %zu bytes need %zu stripes (max %d)", size, nstripes, RAW_MAX_STRIPES);
    return -1;
  }
  struct raw_req *req = raw_req_new(c);
  if (!req) return -1;
  req->n = 1;
  req->sizes[0] = size;
  req->nops = (int)nstripes;
  req->ops = nstripes <= 8 ? req->inline_ops : calloc(nstripes, sizeof(*req->ops));
  if (!req->ops) {
    raw_req_free(req);
    return -1;
  }
  c->cts_valid[slot] = 0;
  c->seq++;
  uint64_t imm = raw_imm(c->peer_id, seq, (uint32_t)nstripes);
  unsigned cursor = c->r->stripe_cursor;
  c->r->stripe_cursor += (unsigned)nstripes;
  for (size_t i = 0; i < nstripes; i++) {
    size_t off = i * stripe, len = size - off < stripe ? size - off : stripe;
    int rail = first_rail + (int)((cursor + i) % (size_t)nrails), peer_rail = rail % c->peer_nrails;
    struct raw_op *op = &req->ops[i];
    *op = (struct raw_op){.kind = OP_DATA, .comm = c, .req = req};
    req->pending++;
    struct raw_lane_op w = {RAW_LANE_WRITEDATA, &op->fi_ctx, (char *)buf + off, len, m->desc[rail], imm,
                            c->peer[rail], cts->addr + off, cts->key[peer_rail]};
    if (rail >= c->r->nnics ? raw_lane_post(c->r, rail, &w)
                            : POST_RETRY(c, raw_post_op(c->r->rails[rail].ep, &w), "fi_writedata"))
      return -1; /* the comm is broken; the request stays referenced by posted writes */
    c->inflight++;
  }
  *request = req;
  return 0;
}

/* A post costs no progress (on tcp a poll(2) each) unless it has to wait:
 * for a ring slot, eager credits or a clear-to-send; test progresses. */
static int raw_irecv(struct perf_transport *t, void *recv_comm, int n, void **bufs, size_t *sizes, int *tags,
                     void **mhandles, void **request) {
  struct raw_comm *c = recv_comm;
  *request = NULL;
  if (n < 1 || n > PERF_TEST_SIZES) {
    perf_error("raw: grouped receive of %d buffers", n);
    return -1;
  }
  if (raw_comm_failed(c)) return -1;
  int rc = try_irecv(c, n, bufs, sizes, mhandles, request);
  if (rc || *request) return rc;
  return raw_comm_progress(c) ? -1 : try_irecv(c, n, bufs, sizes, mhandles, request);
}

static int raw_isend(struct perf_transport *t, void *send_comm, void *buf, size_t size, int tag, void *mhandle,
                     void **request) {
  struct raw_comm *c = send_comm;
  *request = NULL;
  if (raw_comm_failed(c)) return -1;
  int rc = try_isend(c, buf, size, mhandle, request);
  if (rc || *request) return rc;
  return raw_comm_progress(c) ? -1 : try_isend(c, buf, size, mhandle, request);
}

static int raw_test(struct perf_transport *t, void *request, int *done, size_t *sizes) {
  struct raw_req *req = request;
  *done = 0;
  if (raw_comm_failed(req->comm)) return -1;
  if (req->pending && raw_comm_progress(req->comm)) return -1;
  if (req->pending) return 0;
  *done = 1;
  for (int i = 0; i < req->n; i++) sizes[i] = req->sizes[i];
  raw_req_free(req);
  return 0;
}

static int raw_close_comm(struct perf_transport *t, void *comm) {
  raw_comm_destroy(comm);
  return 0;
}

static int raw_close_listen(struct perf_transport *t, void *listen_comm) {
  struct raw_listen *l = listen_comm;
  if (!l->accepted) raw_comm_destroy(l->comm);
  free(l);
  return 0;
}

void raw_close(struct raw *r) {
  raw_close_endpoints(r);
  for (int i = 0; i < r->nrails; i++) {
    if (r->rails[i].domain) fi_close(&r->rails[i].domain->fid);
    if (r->rails[i].fabric) fi_close(&r->rails[i].fabric->fid);
    fi_freeinfo(r->rails[i].info);
  }
}

static void raw_destroy(struct perf_transport *t) {
  raw_close(as_raw(t));
  free(t);
}

static const struct perf_transport_ops raw_ops = {
    .listen = raw_listen,
    .connect = raw_connect,
    .accept = raw_accept,
    .reg = raw_reg,
    .dereg = raw_dereg,
    .isend = raw_isend,
    .irecv = raw_irecv,
    .test = raw_test,
    .close_send = raw_close_comm,
    .close_recv = raw_close_comm,
    .close_listen = raw_close_listen,
    .destroy = raw_destroy,
};

/* A domain for rail->info. */
int raw_open_domain(struct raw_rail *rail) {
  if (raw_fi_check(fi_fabric(rail->info->fabric_attr, &rail->fabric, NULL), "fi_fabric") ||
      raw_fi_check(fi_domain(rail->fabric, rail->info, &rail->domain, NULL), "fi_domain"))
    return -1;
  rail->max_msg = rail->info->ep_attr->max_msg_size ? rail->info->ep_attr->max_msg_size : SIZE_MAX;
  rail->inject_size = rail->info->tx_attr->inject_size;
  rail->virt_addr = (rail->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) != 0;
  rail->prov_key = (rail->info->domain_attr->mr_mode & FI_MR_PROV_KEY) != 0;
  return 0;
}

int raw_open_endpoint(struct raw *r, struct raw_rail *rail) {
  struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_NONE, .size = 16384};
  struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
  if (raw_fi_check(fi_endpoint(rail->domain, rail->info, &rail->ep, NULL), "fi_endpoint") ||
      raw_fi_check(fi_cq_open(rail->domain, &cq_attr, &rail->cq, NULL), "fi_cq_open") ||
      raw_fi_check(fi_av_open(rail->domain, &av_attr, &rail->av, NULL), "fi_av_open") ||
      raw_fi_check(fi_ep_bind(rail->ep, &rail->av->fid, 0), "fi_ep_bind(av)") ||
      raw_fi_check(fi_ep_bind(rail->ep, &rail->cq->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)") ||
      raw_name_shm_endpoint(r->base.provider, rail->ep) || raw_fi_check(fi_enable(rail->ep), "fi_enable"))
    return -1;
  return 0;
}

/* GPU registrations need a domain opened with FI_HMEM. */
static int open_rail(struct raw_rail *rail, const struct srd_nic *nic, int cuda) {
  rail->info = cuda ? srd_gdr_hmem_info(nic->info) : fi_dupinfo(nic->info);
  if (!rail->info) {
    if (cuda) perf_error("raw: --cuda: provider %s offers no FI_HMEM on %s", nic->info->fabric_attr->prov_name, nic->name);
    return -1;
  }
  return raw_open_domain(rail);
}

void raw_describe(struct raw *r) {
  int lanes = r->nrails / r->nnics;
  snprintf(r->base.description, sizeof(r->base.description),
           "raw libfabric %s (eager fi_senddata up to %zu B, fi_writedata above; %d NIC%s x %d lane%s, one endpoint "
           "each%s; stripes of %zu B or more on %s%s)",
           r->base.provider, r->rx_bytes, r->nnics, r->nnics == 1 ? "" : "s", lanes, lanes == 1 ? "" : "s",
           lanes > 1 ? ", a thread per lane but the first" : "", r->stripe_threshold,
           lanes > 1 ? "the threads' lanes" : "every NIC", r->base.cuda ? ", FI_HMEM" : "");
}

int raw_open_rails(struct raw *r, int dev, int cuda) {
  /* Counted, as a plugin's process is, by both sides' lane sizing. */
  srd_host_procs_join();
  struct srd_nic_list nics;
  if (srd_topo_discover(&nics)) {
    perf_error("raw: no usable libfabric provider or NIC (run srd-info)");
    return -1;
  }
  int rc = -1;
  struct srd_topo *topo = calloc(1, sizeof(*topo));
  if (!topo) {
    perf_error("raw: out of memory");
    goto out;
  }
  srd_topo_group_or_all(&nics, (int)srd_param_int(SRD_PARAM_RAILS), topo);
  if (dev >= topo->ngroups) {
    perf_error("raw: --dev %d: there are %d NIC groups", dev, topo->ngroups);
    goto out;
  }
  const struct srd_device_group *g = &topo->groups[dev];
  r->base.cuda = cuda;
  snprintf(r->base.kind, sizeof(r->base.kind), "raw");
  snprintf(r->base.provider, sizeof(r->base.provider), "%s", nics.provider);
  int n = snprintf(r->base.device, sizeof(r->base.device), "group %d of %d:", dev, topo->ngroups);
  for (int i = 0; i < g->nnics && r->nrails < RAW_MAX_RAILS; i++) {
    const struct srd_nic *nic = &nics.nics[g->nics[i]];
    if (open_rail(&r->rails[r->nrails++], nic, cuda)) goto out;
    if (n < (int)sizeof(r->base.device))
      n += snprintf(r->base.device + n, sizeof(r->base.device) - (size_t)n, " %s", nic->name);
  }
  r->nnics = r->nrails;
  int64_t threshold = srd_param_int(SRD_PARAM_STRIPE_THRESHOLD);
  r->stripe_threshold = threshold >= 0 ? (size_t)threshold : srd_eager_default(nics.nics[g->nics[0]].info);
  r->min_stripe = ((size_t)srd_param_int(SRD_PARAM_MIN_STRIPE) + RAW_STRIPE_ALIGN - 1) & ~(size_t)(RAW_STRIPE_ALIGN - 1);
  rc = 0;
out:
  free(topo);
  srd_topo_free(&nics);
  return rc;
}

struct perf_transport *perf_raw_open(int dev, int cuda) {
  struct raw *r = calloc(1, sizeof(*r));
  if (!r) {
    perf_error("raw: out of memory");
    return NULL;
  }
  r->base.ops = &raw_ops;
  r->base.max_recvs = PERF_TEST_SIZES;
  if (raw_open_rails(r, dev, cuda) || raw_open_endpoints(r)) {
    raw_destroy(&r->base);
    return NULL;
  }
  raw_describe(r);
  return &r->base;
}
