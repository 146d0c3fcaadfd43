/* srd-perf's raw transport: registration, the shared endpoints and their
 * receive pool, control messages, progress, and comm creation and
 * teardown. */
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
#include "srd/topo.h"

#include "perf_raw.h"

int raw_fi_check(int rc, const char *what) {
  if (rc >= 0) return 0;
  perf_error("raw: %s failed: %s (%d)", what, fi_strerror(-rc), rc);
  return -1;
}

double raw_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* GPU memory is registered with its own CUDA device, which the driver names. */
int raw_register_on_rails(struct raw *r, void *buf, size_t size, int cuda, struct raw_mr *m) {
  memset(m, 0, sizeof(*m));
  m->nrails = r->nrails;
  m->base = buf;
  struct iovec iov = {buf, size};
  struct fi_mr_attr attr = {.mr_iov = &iov, .iov_count = 1, .iface = FI_HMEM_SYSTEM};
  attr.access = FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
  if (cuda) {
    char err[256];
    int ordinal;
    if (srd_cuda_pointer_device(srd_cuda_get(), buf, &ordinal, err, sizeof(err))) {
      perf_error("raw: --cuda: %s", err);
      return -1;
    }
    attr.iface = FI_HMEM_CUDA;
    attr.device.cuda = ordinal;
  }
  for (int i = 0; i < r->nrails; i++) {
    attr.requested_key = r->rails[i].prov_key ? 0 : ++r->next_key;
    if (raw_fi_check(fi_mr_regattr(r->rails[i].domain, &attr, 0, &m->mr[i]), cuda ? "fi_mr_regattr (FI_HMEM_CUDA)"
                                                                            : "fi_mr_regattr")) {
      for (int j = 0; j < i; j++) fi_close(&m->mr[j]->fid);
      return -1;
    }
    m->desc[i] = fi_mr_desc(m->mr[i]);
    m->key[i] = fi_mr_key(m->mr[i]);
  }
  return 0;
}

void raw_deregister(struct raw_mr *m) {
  for (int i = 0; i < m->nrails; i++)
    if (m->mr[i]) fi_close(&m->mr[i]->fid);
  memset(m, 0, sizeof(*m));
}

static int post_pool_recv(struct raw *r, struct raw_op *op) {
  ssize_t rc = fi_recv(r->rails[0].ep, op->buf, r->rx_bytes, r->pool_mr.desc[0], FI_ADDR_UNSPEC, &op->fi_ctx);
  /* The pool is half the receive queue: a refusal here is no passing state. */
  if (raw_fi_check((int)rc, "fi_recv (pool)")) {
    r->failed = 1;
    return -1;
  }
  return 0;
}

struct raw_msg *raw_send_slot_msg(struct raw_comm *c, int slot) { return &c->tx[slot]; }

struct raw_msg *raw_msg_start(struct raw_comm *c, int slot, enum raw_msg_type type) {
  struct raw_msg *m = &c->tx[slot];
  memset(m, 0, offsetof(struct raw_msg, u));
  m->magic = RAW_MAGIC;
  m->type = (uint16_t)type;
  m->to = (uint16_t)c->peer_id;
  m->from = (uint16_t)c->id;
  return m;
}

static ssize_t post_ctrl_send(struct raw_comm *c, int slot, size_t len) {
  struct raw_op *op = &c->send_ops[slot];
  op->kind = OP_CTRL_SEND;
  op->slot = slot;
  op->comm = c;
  ssize_t rc = fi_send(c->r->rails[0].ep, &c->tx[slot], len, c->tx_mr.desc[0], c->peer[0], &op->fi_ctx);
  if (rc == 0) c->inflight++;
  return rc;
}

/* Send the message staged in a taken send slot to the peer's rail 0. */
int raw_send_ctrl(struct raw_comm *c, int slot, size_t len) {
  return POST_RETRY(c, post_ctrl_send(c, slot, len), "fi_send (control)");
}

/* Connection setup never spins: the peer may need this very process to
 * progress before our send can go out. */
int raw_try_send_staged(struct raw_comm *c) {
  if (c->staged_slot < 0) return 1;
  ssize_t rc = post_ctrl_send(c, c->staged_slot, c->staged_len);
  if (rc == -FI_EAGAIN) return raw_comm_progress(c) ? -1 : 0;
  if (raw_fi_check((int)rc, "fi_send (connection setup)")) return -1;
  c->setup_slot = c->staged_slot;
  c->staged_slot = -1;
  return 1;
}

int raw_fill_names(struct raw *r, struct raw_names *names) {
  names->nrails = (uint32_t)r->nrails;
  for (int i = 0; i < r->nrails; i++) {
    size_t len = RAW_NAME_MAX;
    if (raw_fi_check(fi_getname(&r->rails[i].ep->fid, names->name[i], &len), "fi_getname")) return -1;
    names->len[i] = (uint32_t)len;
  }
  return 0;
}

struct raw_peer *raw_peer_insert(struct raw *r, int rail, const void *name, size_t len) {
  for (struct raw_peer *p = r->peers; p; p = p->next)
    if (p->rail == rail && p->len == len && !memcmp(p->name, name, len)) return p;
  struct raw_peer *p = calloc(1, sizeof(*p));
  if (!p || len > RAW_NAME_MAX) {
    free(p);
    perf_error("raw: out of memory, or a peer address of %zu bytes", len);
    return NULL;
  }
  if (fi_av_insert(r->rails[rail].av, name, 1, &p->addr, 0, NULL) != 1) {
    perf_error("raw: fi_av_insert of a peer address on rail %d failed", rail);
    free(p);
    return NULL;
  }
  p->rail = rail;
  p->len = len;
  memcpy(p->name, name, len);
  p->credits = r->npool / 4;
  p->next = r->peers;
  r->peers = p;
  return p;
}

int raw_peer_insert_rails(struct raw *r, int nrails, const struct raw_names *names, fi_addr_t *peer,
                          struct raw_peer **first) {
  if (names->nrails == 0 || names->nrails > RAW_MAX_RAILS) {
    perf_error("raw: peer announced %u rails", names->nrails);
    return -1;
  }
  for (int i = 0; i < nrails; i++) {
    uint32_t pr = (uint32_t)i % names->nrails;
    if (names->len[pr] == 0 || names->len[pr] > RAW_NAME_MAX) {
      perf_error("raw: peer rail %u has a malformed address", pr);
      return -1;
    }
    struct raw_peer *p = raw_peer_insert(r, i, names->name[pr], names->len[pr]);
    if (!p) return -1;
    peer[i] = p->addr;
    if (i == 0) *first = p;
  }
  return 0;
}

static int insert_peer(struct raw_comm *c, const struct raw_names *names) {
  if (raw_peer_insert_rails(c->r, c->nrails, names, c->peer, &c->peer0)) return -1;
  c->peer_nrails = (int)names->nrails;
  return 0;
}

/* NULL for a comm closed here: the peer's last credits or clear-to-sends
 * may still come for it. */
static struct raw_comm *comm_for(struct raw *r, uint32_t id) { return id < RAW_MAX_COMMS ? r->by_id[id] : NULL; }

static void handle_imm(struct raw *r, uint64_t data) {
  struct raw_comm *c = comm_for(r, raw_imm_comm(data));
  if (!c) return;
  uint32_t seq = raw_imm_seq(data), stripes = raw_imm_stripes(data);
  struct raw_rx_slot *s = &c->rx[seq % RAW_RING];
  if (!s->req || s->buf) {
    perf_error("raw: write for sequence %u that has no receive posted for it", seq);
    c->error = 1;
    return;
  }
  if (++s->stripes_seen == stripes) {
    s->req->pending--;
    *s = (struct raw_rx_slot){0};
  }
}

static void owe_credit(struct raw_comm *c);

/* An eager message's bytes go to its receive and its pool receive is posted
 * again; every RAW_CREDIT_BATCH of them the sender hears so. */
void raw_eager_take(struct raw_comm *c, struct raw_rx_slot *s) {
  struct raw_op *op = s->eager;
  if (s->eager_len > *s->size) {
    perf_error("raw: eager message of %u bytes for a %zu-byte receive", s->eager_len, *s->size);
    c->error = 1;
  } else {
    memcpy(s->buf, op->buf, s->eager_len);
    *s->size = s->eager_len;
  }
  s->req->pending--;
  *s = (struct raw_rx_slot){0};
  post_pool_recv(c->r, op);
  owe_credit(c);
}

/* Returns 1 when the pool receive is held for a receive not yet posted. */
static int handle_eager(struct raw *r, struct raw_op *op, uint64_t data, size_t len) {
  struct raw_comm *c = comm_for(r, raw_imm_comm(data));
  if (!c) return 0;
  struct raw_rx_slot *s = &c->rx[raw_imm_seq(data) % RAW_RING];
  const char *bad = s->eager ? "one is already waiting there"
                    : len > c->eager_max ? "larger than any eager message"
                    : s->req && !s->buf ? "its receive waits for a write"
                    : NULL;
  if (bad) {
    perf_error("raw: eager message for sequence %u: %s", raw_imm_seq(data), bad);
    c->error = 1;
    return 0;
  }
  s->eager = op;
  s->eager_len = (uint32_t)len;
  if (s->req) raw_eager_take(c, s);
  return 1;
}

/* Without waiting for a send slot: this runs inside progress. */
static int return_credits(struct raw_comm *c) {
  struct raw_peer *p = c->peer0;
  if (!c->nsend_free) return -1;
  int slot = c->send_free[c->nsend_free - 1];
  struct raw_msg *m = raw_msg_start(c, slot, RAW_CREDIT);
  m->u.credits = (uint32_t)p->consumed;
  ssize_t rc = post_ctrl_send(c, slot, offsetof(struct raw_msg, u) + sizeof(m->u.credits));
  if (rc == -FI_EAGAIN) return -1;
  if (raw_fi_check((int)rc, "fi_send (credits)")) {
    c->error = 1;
    return 0;
  }
  c->nsend_free--;
  p->consumed = 0;
  return 0;
}

static void owe_credit(struct raw_comm *c) {
  if (++c->peer0->consumed >= RAW_CREDIT_BATCH && return_credits(c)) c->r->credits_due = 1;
}

static void handle_ctrl(struct raw *r, const struct raw_msg *m, size_t len) {
  if (len < offsetof(struct raw_msg, u) || m->magic != RAW_MAGIC) {
    perf_error("raw: malformed control message (%zu bytes)", len);
    r->failed = 1;
    return;
  }
  struct raw_comm *c = comm_for(r, m->to);
  if (!c) return;
  switch (m->type) {
  case RAW_HELLO: /* listener: the connector's rails */
    c->peer_id = m->from;
    if (insert_peer(c, &m->u.names)) c->error = 1;
    else c->peer_known = 1; /* the welcome is due; accept sends it */
    break;
  case RAW_WELCOME:
    c->peer_id = m->from;
    if (insert_peer(c, &m->u.names)) c->error = 1;
    else c->ready = 1;
    break;
  case RAW_CTS: {
    uint32_t slot = m->u.cts.seq % RAW_RING;
    if (c->cts_valid[slot]) {
      perf_error("raw: CTS ring overflow at sequence %u", m->u.cts.seq);
      c->error = 1;
      return;
    }
    c->cts[slot] = m->u.cts;
    c->cts_valid[slot] = 1;
    break;
  }
  case RAW_CREDIT:
    c->peer0->credits += (int)m->u.credits;
    if (c->peer0->credits > r->npool / 4) {
      perf_error("raw: the peer returned %u eager credits, more than were sent", m->u.credits);
      c->error = 1;
    }
    break;
  default:
    perf_error("raw: unknown control message type %u", m->type);
    c->error = 1;
  }
}

static void on_completion(struct raw *r, const struct fi_cq_data_entry *e) {
  if ((e->flags & (FI_REMOTE_CQ_DATA | FI_RECV)) == FI_REMOTE_CQ_DATA) { /* a write */
    handle_imm(r, e->data);
    return;
  }
  struct raw_op *op = e->op_context;
  switch (op->kind) {
  case OP_CTRL_RECV:
    if ((e->flags & FI_REMOTE_CQ_DATA) && handle_eager(r, op, e->data, e->len)) return;
    if (!(e->flags & FI_REMOTE_CQ_DATA)) handle_ctrl(r, (const struct raw_msg *)op->buf, e->len);
    post_pool_recv(r, op);
    break;
  case OP_CTRL_SEND:
    op->comm->inflight--;
    op->comm->send_free[op->comm->nsend_free++] = op->slot;
    if (op->slot == op->comm->setup_slot) op->comm->setup_slot = -1;
    break;
  case OP_DATA:
    op->comm->inflight--;
    op->req->pending--;
    break;
  }
}

int raw_poll(struct raw *r, void (*on_entry)(struct raw *r, const struct fi_cq_data_entry *e)) {
  struct fi_cq_data_entry e[16];
  if (!r->failed && r->lanes_running && raw_lanes_progress(r, on_entry)) r->failed = 1;
  for (int k = 0; k < r->nnics && !r->failed; k++) {
    for (;;) {
      ssize_t n = fi_cq_read(r->rails[k].cq, e, 16);
      if (n == -FI_EAGAIN) break;
      if (n == -FI_EAVAIL) {
        struct fi_cq_err_entry err;
        memset(&err, 0, sizeof(err));
        fi_cq_readerr(r->rails[k].cq, &err, 0);
        perf_error("raw: rail %d completion error: %s (provider: %s)", k, fi_strerror(err.err),
                   fi_cq_strerror(r->rails[k].cq, err.prov_errno, err.err_data, NULL, 0));
        r->failed = 1;
        return -1;
      }
      if (n < 0) return raw_fi_check((int)n, "fi_cq_read"), r->failed = 1, -1;
      for (ssize_t i = 0; i < n; i++) on_entry(r, &e[i]);
      if (n < 16) break;
    }
  }
  return r->failed ? -1 : 0;
}

int raw_progress(struct raw *r) {
  if (raw_poll(r, on_completion)) return -1;
  if (r->credits_due) {
    r->credits_due = 0;
    for (struct raw_comm *c = r->comms; c; c = c->next)
      if (c->peer0 && c->peer0->consumed >= RAW_CREDIT_BATCH && !c->closed && return_credits(c)) r->credits_due = 1;
  }
  return r->failed ? -1 : 0;
}

int raw_comm_progress(struct raw_comm *c) { return raw_progress(c->r) || c->error ? -1 : 0; }

int raw_comm_failed(const struct raw_comm *c) { return c->r->failed || c->error; }

struct raw_req *raw_req_new(struct raw_comm *c) {
  struct raw_req *req = calloc(1, sizeof(*req));
  if (!req) return NULL;
  req->comm = c;
  req->next = c->reqs;
  if (c->reqs) c->reqs->prev = req;
  c->reqs = req;
  return req;
}

void raw_req_free(struct raw_req *req) {
  struct raw_comm *c = req->comm;
  if (req->prev) req->prev->next = req->next;
  else c->reqs = req->next;
  if (req->next) req->next->prev = req->prev;
  if (req->ops != req->inline_ops) free(req->ops);
  free(req);
}

static void comm_free(struct raw_comm *c) {
  if (c->prev) c->prev->next = c->next;
  else c->r->comms = c->next;
  if (c->next) c->next->prev = c->prev;
  while (c->reqs) raw_req_free(c->reqs);
  raw_deregister(&c->tx_mr);
  free(c->tx);
  free(c);
}

/* Messages for it are refused from here on; its memory waits for the
 * operations the provider holds (freed with the transport if they never
 * end), and early eager messages it held go back to the pool. */
void raw_comm_destroy(struct raw_comm *c) {
  if (!c || c->closed) return;
  struct raw *r = c->r;
  c->closed = 1;
  if (r->by_id[c->id] == c) r->by_id[c->id] = NULL;
  for (uint32_t i = 0; i < RAW_RING; i++)
    if (c->rx[i].eager) post_pool_recv(r, c->rx[i].eager);
  double deadline = raw_now_s() + RAW_POST_TIMEOUT_S;
  while (c->inflight && !r->failed && raw_now_s() < deadline) raw_progress(r);
  if (!c->inflight) comm_free(c);
}

/* shm names its region after the pid; a process killed earlier leaves its
 * region behind, and a later process that gets the same pid then fails
 * with EBUSY. A name of our own that no earlier process can have used
 * avoids that. */
int raw_name_shm_endpoint(const char *provider, struct fid_ep *ep) {
  static unsigned counter;
  if (strcmp(provider, "shm")) return 0;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  char name[RAW_NAME_MAX];
  snprintf(name, sizeof(name), "srd-perf-%d-%lx-%u", (int)getpid(), (unsigned long)(ts.tv_sec * 1000000000L + ts.tv_nsec),
           counter++);
  return raw_fi_check(fi_setname(&ep->fid, name, strlen(name) + 1), "fi_setname (shm)");
}

int raw_open_endpoints(struct raw *r) {
  for (int i = 0; i < r->nrails; i++)
    if (raw_open_endpoint(r, &r->rails[i])) return -1;
  size_t rx = r->rails[0].info->rx_attr->size / 2;
  r->npool = rx < RAW_POOL_MIN ? RAW_POOL_MIN : rx > RAW_POOL_MAX ? RAW_POOL_MAX : (int)rx;
  r->rx_bytes = srd_eager_default(r->rails[0].info);
  r->pool = calloc((size_t)r->npool, r->rx_bytes);
  r->pool_ops = calloc((size_t)r->npool, sizeof(*r->pool_ops));
  if (!r->pool || !r->pool_ops || raw_register_on_rails(r, r->pool, (size_t)r->npool * r->rx_bytes, 0, &r->pool_mr))
    return -1;
  for (int i = 0; i < r->npool; i++) {
    r->pool_ops[i] = (struct raw_op){.kind = OP_CTRL_RECV, .slot = i, .buf = r->pool + (size_t)i * r->rx_bytes};
    if (post_pool_recv(r, &r->pool_ops[i])) return -1;
  }
  return 0;
}

/* Lanes' threads, then endpoints: nothing completes into a comm or the pool
 * after this. */
void raw_close_endpoints(struct raw *r) {
  raw_lanes_stop(r);
  for (int i = 0; i < r->nrails; i++)
    if (r->rails[i].ep) fi_close(&r->rails[i].ep->fid);
  while (r->comms) comm_free(r->comms);
  raw_deregister(&r->pool_mr);
  free(r->pool);
  free(r->pool_ops);
  while (r->peers) {
    struct raw_peer *p = r->peers;
    r->peers = p->next;
    free(p);
  }
  for (int i = 0; i < r->nrails; i++) {
    if (r->rails[i].cq) fi_close(&r->rails[i].cq->fid);
    if (r->rails[i].av) fi_close(&r->rails[i].av->fid);
  }
}

struct raw_comm *raw_comm_create(struct raw *r) {
  uint32_t id = r->next_id;
  while (r->by_id[id % RAW_MAX_COMMS] && id - r->next_id < RAW_MAX_COMMS) id++;
  if (r->by_id[id % RAW_MAX_COMMS]) {
    perf_error("raw: more than %d comms", RAW_MAX_COMMS);
    return NULL;
  }
  struct raw_comm *c = calloc(1, sizeof(*c));
  if (!c) return NULL;
  c->r = r;
  c->id = id % RAW_MAX_COMMS;
  c->nrails = r->nrails;
  c->staged_slot = c->setup_slot = -1;
  /* GPU buffers take no CPU copy: with --cuda only empty messages go eagerly. */
  c->eager_max = r->base.cuda ? 0 : r->rails[0].max_msg < r->rx_bytes ? r->rails[0].max_msg : r->rx_bytes;
  c->next = r->comms;
  if (r->comms) r->comms->prev = c;
  r->comms = c;
  c->tx = calloc(RAW_CTRL_SLOTS, sizeof(*c->tx));
  if (!c->tx || raw_register_on_rails(r, c->tx, RAW_CTRL_SLOTS * sizeof(*c->tx), 0, &c->tx_mr)) {
    comm_free(c);
    return NULL;
  }
  for (int i = 0; i < RAW_CTRL_SLOTS; i++) c->send_free[c->nsend_free++] = i;
  r->by_id[c->id] = c;
  r->next_id = c->id + 1;
  return c;
}

/* A free control send slot, progressing until one completes. */
int raw_take_send_slot(struct raw_comm *c) {
  double deadline = raw_now_s() + RAW_POST_TIMEOUT_S;
  while (!c->nsend_free) {
    if (raw_comm_progress(c)) return -1;
    if (raw_now_s() > deadline) {
      perf_error("raw: no control send completed in %d s", RAW_POST_TIMEOUT_S);
      return -1;
    }
  }
  return c->send_free[--c->nsend_free];
}
