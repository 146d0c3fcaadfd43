/* The ceiling srd-perf compares a plugin against: the same receiver-driven
 * pattern written straight on libfabric, with as little as possible around
 * it. The receiver sends a small clear-to-send (CTS) per buffer {sequence,
 * address, length, one key per rail}; the sender answers with fi_writedata
 * stripes whose 32-bit immediate data {sequence, stripe count} the receiver
 * counts. Same provider and NIC group (srd_topo_*) as our plugin.
 * One endpoint per rail per connection; rail i talks to peer rail i mod n.
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
#include "srd/topo.h"

#define RAW_MAGIC 0x53524450u /* "SRDP" */
#define RAW_MAX_RAILS 16
#define RAW_NAME_MAX 64
#define RAW_CTRL_SLOTS 64 /* posted control receives, and control sends in flight */
#define RAW_SEQ_BITS 20
#define RAW_SEQ_MASK ((1u << RAW_SEQ_BITS) - 1)
#define RAW_RING 1024 /* receives in flight per connection, far above NCCL's 32 x 8 */
#define RAW_MAX_STRIPES 4095 /* 12 bits of immediate data */
#define RAW_STRIPE_ALIGN 128
#define RAW_MIN_STRIPE (64 * 1024)
#define RAW_POST_TIMEOUT_S 10

enum raw_msg_type { RAW_HELLO = 1, RAW_WELCOME = 2, RAW_CTS = 3 };

struct raw_names {
  uint32_t nrails;
  uint32_t len[RAW_MAX_RAILS];
  uint8_t name[RAW_MAX_RAILS][RAW_NAME_MAX];
};

struct raw_cts {
  uint32_t seq;
  uint32_t nkeys;
  uint64_t addr; /* virtual address, or offset in the region for offset-based providers */
  uint64_t len;
  uint64_t key[RAW_MAX_RAILS];
};

struct raw_msg {
  uint32_t magic;
  uint32_t type;
  union {
    struct raw_names names;
    struct raw_cts cts;
  } u;
};

/* The handle NCCL's exchange carries: the listener's rail-0 address. Like
 * NCCL plugins, connect keeps its in-progress state in its copy of the
 * handle, so several connects can be under way at once. */
struct raw_handle {
  uint32_t magic;
  uint32_t len;
  struct raw_comm *connecting; /* local only: zero on the wire */
  uint8_t name[PERF_HANDLE_SIZE - 16];
};
_Static_assert(sizeof(struct raw_handle) == PERF_HANDLE_SIZE, "handle size");

struct raw_rail {
  struct fi_info *info;
  struct fid_fabric *fabric;
  struct fid_domain *domain;
  size_t max_msg;
  int virt_addr;
  int prov_key;
};

struct raw {
  struct perf_transport base;
  int nrails;
  struct raw_rail rails[RAW_MAX_RAILS];
  uint64_t next_key;
  struct raw_comm *comms; /* every live comm, so that none outlives the domains */
};

enum raw_op_kind { OP_CTRL_RECV, OP_CTRL_SEND, OP_WRITE };

/* Every posted operation's context: libfabric's scratch space first. */
struct raw_op {
  struct fi_context2 fi_ctx;
  enum raw_op_kind kind;
  int slot;
  struct raw_req *req;
};

struct raw_mr {
  int nrails;
  char *base; /* offset-based providers address writes from here */
  struct fid_mr *mr[RAW_MAX_RAILS];
  void *desc[RAW_MAX_RAILS];
  uint64_t key[RAW_MAX_RAILS];
};

struct raw_req {
  struct raw_comm *comm;
  struct raw_req *prev, *next; /* the comm's live requests */
  int pending; /* stripes or sub-receives not complete */
  int n;
  size_t sizes[PERF_TEST_SIZES];
  int nops;
  struct raw_op *ops; /* write contexts (sends) */
  struct raw_op inline_ops[8];
};

struct raw_ep {
  struct fid_ep *ep;
  struct fid_av *av;
  struct fid_cq *cq;
  fi_addr_t peer; /* peer rail (i mod peer_nrails) */
};

struct raw_rx_slot {
  struct raw_req *req;
  uint32_t stripes_seen;
};

struct raw_comm {
  struct raw *r;
  struct raw_comm *prev, *next;
  struct raw_req *reqs;
  int nrails, peer_nrails;
  int ready, peer_known, error;
  int staged_slot; /* hello or welcome waiting to be posted, -1 when none */
  size_t staged_len;
  int setup_slot;  /* welcome posted but not yet complete, -1 when none */
  struct raw_ep eps[RAW_MAX_RAILS];
  fi_addr_t peer_rail0_addr;
  struct raw_msg *ctrl; /* RAW_CTRL_SLOTS receive slots, then as many send slots */
  struct raw_mr ctrl_mr;
  struct raw_op recv_ops[RAW_CTRL_SLOTS], send_ops[RAW_CTRL_SLOTS];
  int send_free[RAW_CTRL_SLOTS], nsend_free;
  uint32_t seq;
  struct raw_cts cts[RAW_RING]; /* sender: CTS received, by sequence */
  uint8_t cts_valid[RAW_RING];
  struct raw_rx_slot rx[RAW_RING]; /* receiver: buffers waiting, by sequence */
};

/* The listener owns its comm until accept hands it over. */
struct raw_listen {
  struct raw_comm *comm;
  int accepted;
};

static struct raw *as_raw(struct perf_transport *t) { return (struct raw *)t; }

static int fi_check(int rc, const char *what) {
  if (rc >= 0) return 0;
  perf_error("raw: %s failed: %s (%d)", what, fi_strerror(-rc), rc);
  return -1;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int comm_progress(struct raw_comm *c);

/* Post with retries while the provider says EAGAIN; progress frees room. */
#define POST_RETRY(c, expr, what)                                                                                      \
  ({                                                                                                                   \
    ssize_t rc_;                                                                                                       \
    double deadline_ = now_s() + RAW_POST_TIMEOUT_S;                                                                   \
    while ((rc_ = (expr)) == -FI_EAGAIN) {                                                                             \
      if (comm_progress(c)) break;                                                                                     \
      if (now_s() > deadline_) break;                                                                                  \
    }                                                                                                                  \
    rc_ == -FI_EAGAIN ? (perf_error("raw: %s: provider busy for %d s", what, RAW_POST_TIMEOUT_S), -1)                  \
                      : fi_check((int)rc_, what);                                                                      \
  })

/* GPU memory is registered with its own CUDA device, which the driver names. */
static int register_on_rails(struct raw *r, void *buf, size_t size, int cuda, struct raw_mr *m) {
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
    if (fi_check(fi_mr_regattr(r->rails[i].domain, &attr, 0, &m->mr[i]), cuda ? "fi_mr_regattr (FI_HMEM_CUDA)"
                                                                            : "fi_mr_regattr")) {
      for (int j = 0; j < i; j++) fi_close(&m->mr[j]->fid);
      return -1;
    }
    m->desc[i] = fi_mr_desc(m->mr[i]);
    m->key[i] = fi_mr_key(m->mr[i]);
  }
  return 0;
}

static void deregister(struct raw_mr *m) {
  for (int i = 0; i < m->nrails; i++)
    if (m->mr[i]) fi_close(&m->mr[i]->fid);
  memset(m, 0, sizeof(*m));
}

static struct raw_msg *send_slot_msg(struct raw_comm *c, int slot) { return &c->ctrl[RAW_CTRL_SLOTS + slot]; }

static int post_ctrl_recv(struct raw_comm *c, int slot) {
  struct raw_op *op = &c->recv_ops[slot];
  op->kind = OP_CTRL_RECV;
  op->slot = slot;
  return POST_RETRY(c, fi_recv(c->eps[0].ep, &c->ctrl[slot], sizeof(struct raw_msg), c->ctrl_mr.desc[0], FI_ADDR_UNSPEC,
                               &op->fi_ctx),
                    "fi_recv (control)");
}

/* Send the message staged in a free send slot to the peer's rail 0. */
static int send_ctrl(struct raw_comm *c, int slot, size_t len, fi_addr_t to) {
  struct raw_op *op = &c->send_ops[slot];
  op->kind = OP_CTRL_SEND;
  op->slot = slot;
  return POST_RETRY(c, fi_send(c->eps[0].ep, send_slot_msg(c, slot), len, c->ctrl_mr.desc[0], to, &op->fi_ctx),
                    "fi_send (control)");
}

/* Connection setup never spins: the peer may need this very process to
 * progress another endpoint (its listener) before our send can go out. */
static int try_send_staged(struct raw_comm *c, fi_addr_t to) {
  if (c->staged_slot < 0) return 1;
  struct raw_op *op = &c->send_ops[c->staged_slot];
  op->kind = OP_CTRL_SEND;
  op->slot = c->staged_slot;
  ssize_t rc = fi_send(c->eps[0].ep, send_slot_msg(c, c->staged_slot), c->staged_len, c->ctrl_mr.desc[0], to,
                       &op->fi_ctx);
  if (rc == -FI_EAGAIN) return comm_progress(c) ? -1 : 0;
  if (fi_check((int)rc, "fi_send (connection setup)")) return -1;
  c->setup_slot = c->staged_slot;
  c->staged_slot = -1;
  return 1;
}

static int fill_names(struct raw_comm *c, struct raw_names *names) {
  names->nrails = (uint32_t)c->nrails;
  for (int i = 0; i < c->nrails; i++) {
    size_t len = RAW_NAME_MAX;
    if (fi_check(fi_getname(&c->eps[i].ep->fid, names->name[i], &len), "fi_getname")) return -1;
    names->len[i] = (uint32_t)len;
  }
  return 0;
}

/* Insert the peer's rails: local rail i sends to peer rail i mod n. The
 * connector already has the listener's rail 0 from the handle. */
static int insert_peer(struct raw_comm *c, const struct raw_names *names, int have_rail0) {
  if (names->nrails == 0 || names->nrails > RAW_MAX_RAILS) {
    perf_error("raw: peer announced %u rails", names->nrails);
    return -1;
  }
  c->peer_nrails = (int)names->nrails;
  for (int i = 0; i < c->nrails; i++) {
    int pr = i % c->peer_nrails;
    if (i == 0 && have_rail0) {
      c->eps[0].peer = c->peer_rail0_addr;
      continue;
    }
    if (names->len[pr] == 0 || names->len[pr] > RAW_NAME_MAX) {
      perf_error("raw: peer rail %d has a malformed address", pr);
      return -1;
    }
    if (fi_av_insert(c->eps[i].av, names->name[pr], 1, &c->eps[i].peer, 0, NULL) != 1) {
      perf_error("raw: fi_av_insert of the peer's rail %d failed", pr);
      return -1;
    }
  }
  return 0;
}

static void handle_imm(struct raw_comm *c, uint64_t data) {
  uint32_t seq = (uint32_t)data & RAW_SEQ_MASK, stripes = (uint32_t)(data >> RAW_SEQ_BITS) & 0xfff;
  struct raw_rx_slot *s = &c->rx[seq % RAW_RING];
  if (!s->req) {
    perf_error("raw: write for sequence %u that has no receive posted", seq);
    c->error = 1;
    return;
  }
  if (++s->stripes_seen == stripes) {
    s->req->pending--;
    s->req = NULL;
    s->stripes_seen = 0;
  }
}

static void handle_ctrl(struct raw_comm *c, const struct raw_msg *m, size_t len) {
  if (len < 8 || m->magic != RAW_MAGIC) {
    perf_error("raw: malformed control message (%zu bytes)", len);
    c->error = 1;
    return;
  }
  switch (m->type) {
  case RAW_HELLO: /* listener: the connector's rails */
    if (insert_peer(c, &m->u.names, 0)) c->error = 1;
    else c->peer_known = 1; /* the welcome is due; accept sends it */
    break;
  case RAW_WELCOME:
    if (insert_peer(c, &m->u.names, 1)) c->error = 1;
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
  default:
    perf_error("raw: unknown control message type %u", m->type);
    c->error = 1;
  }
}

static int comm_progress(struct raw_comm *c) {
  struct fi_cq_data_entry e[16];
  for (int r = 0; r < c->nrails; r++) {
    for (;;) {
      ssize_t n = fi_cq_read(c->eps[r].cq, e, 16);
      if (n == -FI_EAGAIN) break;
      if (n == -FI_EAVAIL) {
        struct fi_cq_err_entry err;
        memset(&err, 0, sizeof(err));
        fi_cq_readerr(c->eps[r].cq, &err, 0);
        perf_error("raw: rail %d completion error: %s (provider: %s)", r, fi_strerror(err.err),
                   fi_cq_strerror(c->eps[r].cq, err.prov_errno, err.err_data, NULL, 0));
        c->error = 1;
        return -1;
      }
      if (n < 0) return fi_check((int)n, "fi_cq_read"), c->error = 1, -1;
      for (ssize_t i = 0; i < n; i++) {
        if (e[i].flags & FI_REMOTE_CQ_DATA) {
          handle_imm(c, e[i].data);
          continue;
        }
        struct raw_op *op = e[i].op_context;
        switch (op->kind) {
        case OP_CTRL_RECV:
          handle_ctrl(c, &c->ctrl[op->slot], e[i].len);
          if (post_ctrl_recv(c, op->slot)) c->error = 1;
          break;
        case OP_CTRL_SEND:
          c->send_free[c->nsend_free++] = op->slot;
          if (op->slot == c->setup_slot) c->setup_slot = -1;
          break;
        case OP_WRITE: op->req->pending--; break;
        }
      }
      if (n < 16) break;
    }
  }
  return c->error ? -1 : 0;
}

static struct raw_req *req_new(struct raw_comm *c) {
  struct raw_req *req = calloc(1, sizeof(*req));
  if (!req) return NULL;
  req->comm = c;
  req->next = c->reqs;
  if (c->reqs) c->reqs->prev = req;
  c->reqs = req;
  return req;
}

static void req_free(struct raw_req *req) {
  struct raw_comm *c = req->comm;
  if (req->prev) req->prev->next = req->next;
  else c->reqs = req->next;
  if (req->next) req->next->prev = req->prev;
  if (req->ops != req->inline_ops) free(req->ops);
  free(req);
}

static void comm_destroy(struct raw_comm *c) {
  if (!c) return;
  if (c->prev) c->prev->next = c->next;
  else c->r->comms = c->next;
  if (c->next) c->next->prev = c->prev;
  /* Endpoints first: nothing completes into a request after this. */
  for (int i = 0; i < c->nrails; i++)
    if (c->eps[i].ep) fi_close(&c->eps[i].ep->fid);
  while (c->reqs) req_free(c->reqs);
  for (int i = 0; i < c->nrails; i++) {
    if (c->eps[i].cq) fi_close(&c->eps[i].cq->fid);
    if (c->eps[i].av) fi_close(&c->eps[i].av->fid);
  }
  deregister(&c->ctrl_mr);
  free(c->ctrl);
  free(c);
}

/* shm names its region after the pid; a process killed earlier leaves its
 * region behind, and a later process that gets the same pid then fails
 * with EBUSY. A name of our own that no earlier process can have used
 * avoids that. */
static int name_shm_endpoint(struct raw *r, struct raw_ep *e) {
  static unsigned counter;
  if (strcmp(r->base.provider, "shm")) return 0;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  char name[RAW_NAME_MAX];
  snprintf(name, sizeof(name), "srd-perf-%d-%lx-%u", (int)getpid(), (unsigned long)(ts.tv_sec * 1000000000L + ts.tv_nsec),
           counter++);
  return fi_check(fi_setname(&e->ep->fid, name, strlen(name) + 1), "fi_setname (shm)");
}

static struct raw_comm *comm_create(struct raw *r) {
  struct raw_comm *c = calloc(1, sizeof(*c));
  if (!c) return NULL;
  c->r = r;
  c->nrails = r->nrails;
  c->next = r->comms;
  if (r->comms) r->comms->prev = c;
  r->comms = c;
  c->staged_slot = c->setup_slot = -1;
  for (int i = 0; i < c->nrails; i++) {
    struct raw_rail *rail = &r->rails[i];
    struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_NONE, .size = 4096};
    struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
    struct raw_ep *e = &c->eps[i];
    if (fi_check(fi_endpoint(rail->domain, rail->info, &e->ep, NULL), "fi_endpoint") ||
        fi_check(fi_cq_open(rail->domain, &cq_attr, &e->cq, NULL), "fi_cq_open") ||
        fi_check(fi_av_open(rail->domain, &av_attr, &e->av, NULL), "fi_av_open") ||
        fi_check(fi_ep_bind(e->ep, &e->av->fid, 0), "fi_ep_bind(av)") ||
        fi_check(fi_ep_bind(e->ep, &e->cq->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)") || name_shm_endpoint(r, e) ||
        fi_check(fi_enable(e->ep), "fi_enable")) {
      comm_destroy(c);
      return NULL;
    }
  }
  c->ctrl = calloc(2 * RAW_CTRL_SLOTS, sizeof(*c->ctrl));
  if (!c->ctrl || register_on_rails(r, c->ctrl, 2 * RAW_CTRL_SLOTS * sizeof(*c->ctrl), 0, &c->ctrl_mr)) {
    comm_destroy(c);
    return NULL;
  }
  for (int i = 0; i < RAW_CTRL_SLOTS; i++) c->send_free[c->nsend_free++] = i;
  for (int i = 0; i < RAW_CTRL_SLOTS; i++)
    if (post_ctrl_recv(c, i)) {
      comm_destroy(c);
      return NULL;
    }
  return c;
}

/* A free control send slot, progressing until one completes. */
static int take_send_slot(struct raw_comm *c) {
  double deadline = now_s() + RAW_POST_TIMEOUT_S;
  while (!c->nsend_free) {
    if (comm_progress(c)) return -1;
    if (now_s() > deadline) {
      perf_error("raw: no control send completed in %d s", RAW_POST_TIMEOUT_S);
      return -1;
    }
  }
  return c->send_free[--c->nsend_free];
}

static int raw_listen(struct perf_transport *t, void *handle, void **listen_comm) {
  struct raw_listen *l = calloc(1, sizeof(*l));
  if (!l) return -1;
  l->comm = comm_create(as_raw(t));
  if (!l->comm) {
    free(l);
    return -1;
  }
  struct raw_handle *h = handle;
  memset(h, 0, sizeof(*h));
  size_t len = sizeof(h->name);
  if (fi_check(fi_getname(&l->comm->eps[0].ep->fid, h->name, &len), "fi_getname")) {
    comm_destroy(l->comm);
    free(l);
    return -1;
  }
  h->magic = RAW_MAGIC;
  h->len = (uint32_t)len;
  *listen_comm = l;
  return 0;
}

static int raw_connect(struct perf_transport *t, void *handle, void **send_comm) {
  struct raw_handle *h = handle;
  *send_comm = NULL;
  if (!h->connecting) {
    if (h->magic != RAW_MAGIC || h->len == 0 || h->len > sizeof(h->name)) {
      perf_error("raw: the peer's handle is not a raw srd-perf handle (a plugin run on the other side?)");
      return -1;
    }
    struct raw_comm *c = comm_create(as_raw(t));
    if (!c) return -1;
    if (fi_av_insert(c->eps[0].av, h->name, 1, &c->peer_rail0_addr, 0, NULL) != 1) {
      perf_error("raw: fi_av_insert of the listener's address failed");
      comm_destroy(c);
      return -1;
    }
    int slot = take_send_slot(c);
    if (slot < 0) {
      comm_destroy(c);
      return -1;
    }
    struct raw_msg *m = send_slot_msg(c, slot);
    m->magic = RAW_MAGIC;
    m->type = RAW_HELLO;
    if (fill_names(c, &m->u.names)) {
      comm_destroy(c);
      return -1;
    }
    c->staged_slot = slot;
    c->staged_len = sizeof(*m);
    h->connecting = c;
  }
  struct raw_comm *c = h->connecting;
  if (try_send_staged(c, c->peer_rail0_addr) < 0 || comm_progress(c)) {
    comm_destroy(c);
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
  if (comm_progress(c)) return -1;
  if (!c->peer_known) return 0;
  if (!c->ready) { /* stage the welcome once */
    int slot = take_send_slot(c);
    if (slot < 0) return -1;
    struct raw_msg *m = send_slot_msg(c, slot);
    m->magic = RAW_MAGIC;
    m->type = RAW_WELCOME;
    if (fill_names(c, &m->u.names)) return -1;
    c->staged_slot = slot;
    c->staged_len = sizeof(*m);
    c->ready = 1;
  }
  int sent = try_send_staged(c, c->eps[0].peer);
  if (sent <= 0) return sent;
  /* With manual progress a posted send moves only while we poll this
   * endpoint: hand the comm over once the welcome is out. */
  if (c->setup_slot >= 0 && comm_progress(c)) return -1;
  if (c->setup_slot >= 0) return 0;
  l->accepted = 1;
  *recv_comm = c;
  return 0;
}

static int raw_reg(struct perf_transport *t, void *comm, void *buf, size_t size, void **mhandle) {
  struct raw_mr *m = malloc(sizeof(*m));
  if (!m) return -1;
  if (register_on_rails(as_raw(t), buf, size, t->cuda, m)) {
    free(m);
    return -1;
  }
  *mhandle = m;
  return 0;
}

static int raw_dereg(struct perf_transport *t, void *comm, void *mhandle) {
  deregister(mhandle);
  free(mhandle);
  return 0;
}

static int raw_irecv(struct perf_transport *t, void *recv_comm, int n, void **bufs, size_t *sizes, int *tags,
                     void **mhandles, void **request) {
  struct raw_comm *c = recv_comm;
  *request = NULL;
  if (n < 1 || n > PERF_TEST_SIZES) {
    perf_error("raw: grouped receive of %d buffers", n);
    return -1;
  }
  if (comm_progress(c)) return -1;
  for (int i = 0; i < n; i++)
    if (c->rx[(c->seq + (uint32_t)i) % RAW_RING].req) return 0; /* ring full: call again */
  struct raw_req *req = req_new(c);
  if (!req) return -1;
  req->n = n;
  req->pending = n;
  for (int i = 0; i < n; i++) {
    struct raw_mr *m = mhandles[i];
    int slot = take_send_slot(c);
    if (slot < 0) return -1; /* the comm is broken: requests already posted stay with it */
    uint32_t seq = c->seq++ & RAW_SEQ_MASK;
    c->rx[seq % RAW_RING] = (struct raw_rx_slot){.req = req};
    req->sizes[i] = sizes[i];
    struct raw_msg *msg = send_slot_msg(c, slot);
    msg->magic = RAW_MAGIC;
    msg->type = RAW_CTS;
    msg->u.cts.seq = seq;
    msg->u.cts.nkeys = (uint32_t)m->nrails;
    msg->u.cts.addr = c->r->rails[0].virt_addr ? (uint64_t)(uintptr_t)bufs[i] : (uint64_t)((char *)bufs[i] - m->base);
    msg->u.cts.len = sizes[i];
    for (int k = 0; k < m->nrails; k++) msg->u.cts.key[k] = m->key[k];
    size_t len = offsetof(struct raw_msg, u.cts.key) + (size_t)m->nrails * sizeof(uint64_t);
    if (send_ctrl(c, slot, len, c->eps[0].peer)) return -1;
  }
  *request = req;
  return 0;
}

static int raw_isend(struct perf_transport *t, void *send_comm, void *buf, size_t size, int tag, void *mhandle,
                     void **request) {
  struct raw_comm *c = send_comm;
  struct raw_mr *m = mhandle;
  *request = NULL;
  if (comm_progress(c)) return -1;
  uint32_t seq = c->seq & RAW_SEQ_MASK;
  uint32_t slot = seq % RAW_RING;
  if (!c->cts_valid[slot]) return 0; /* no clear-to-send yet: call again */
  const struct raw_cts *cts = &c->cts[slot];
  if (cts->seq != seq || size > cts->len) {
    perf_error("raw: CTS for sequence %u (%llu bytes) does not fit send %u (%zu bytes)", cts->seq,
               (unsigned long long)cts->len, seq, size);
    return -1;
  }
  /* Stripe across rails, 128-byte aligned, each within max_msg_size. */
  size_t stripe = (size + (size_t)c->nrails - 1) / (size_t)c->nrails;
  stripe = (stripe + RAW_STRIPE_ALIGN - 1) & ~(size_t)(RAW_STRIPE_ALIGN - 1);
  if (stripe < RAW_MIN_STRIPE) stripe = RAW_MIN_STRIPE;
  size_t max_msg = c->r->rails[0].max_msg;
  if (stripe > max_msg) stripe = max_msg & ~(size_t)(RAW_STRIPE_ALIGN - 1);
  size_t nstripes = size ? (size + stripe - 1) / stripe : 1;
  if (nstripes > RAW_MAX_STRIPES) {
    perf_error("raw: %zu bytes need %zu stripes (max %d)", size, nstripes, RAW_MAX_STRIPES);
    return -1;
  }
  struct raw_req *req = req_new(c);
  if (!req) return -1;
  req->n = 1;
  req->sizes[0] = size;
  req->nops = (int)nstripes;
  req->ops = nstripes <= 8 ? req->inline_ops : calloc(nstripes, sizeof(*req->ops));
  if (!req->ops) {
    req_free(req);
    return -1;
  }
  c->cts_valid[slot] = 0;
  c->seq++;
  uint64_t imm = seq | ((uint64_t)nstripes << RAW_SEQ_BITS);
  for (size_t i = 0; i < nstripes; i++) {
    size_t off = i * stripe, len = size - off < stripe ? size - off : stripe;
    int rail = (int)(i % (size_t)c->nrails), peer_rail = rail % c->peer_nrails;
    struct raw_op *op = &req->ops[i];
    op->kind = OP_WRITE;
    op->req = req;
    req->pending++;
    if (POST_RETRY(c,
                   fi_writedata(c->eps[rail].ep, (char *)buf + off, len, m->desc[rail], imm, c->eps[rail].peer,
                                cts->addr + off, cts->key[peer_rail], &op->fi_ctx),
                   "fi_writedata"))
      return -1; /* the comm is broken; the request stays referenced by posted writes */
  }
  *request = req;
  return 0;
}

static int raw_test(struct perf_transport *t, void *request, int *done, size_t *sizes) {
  struct raw_req *req = request;
  *done = 0;
  if (comm_progress(req->comm)) return -1;
  if (req->pending) return 0;
  *done = 1;
  for (int i = 0; i < req->n; i++) sizes[i] = req->sizes[i];
  req_free(req);
  return 0;
}

static int raw_close_comm(struct perf_transport *t, void *comm) {
  comm_destroy(comm);
  return 0;
}

static int raw_close_listen(struct perf_transport *t, void *listen_comm) {
  struct raw_listen *l = listen_comm;
  if (!l->accepted) comm_destroy(l->comm);
  free(l);
  return 0;
}

static void raw_destroy(struct perf_transport *t) {
  struct raw *r = as_raw(t);
  while (r->comms) comm_destroy(r->comms);
  for (int i = 0; i < r->nrails; i++) {
    if (r->rails[i].domain) fi_close(&r->rails[i].domain->fid);
    if (r->rails[i].fabric) fi_close(&r->rails[i].fabric->fid);
    fi_freeinfo(r->rails[i].info);
  }
  free(r);
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

/* GPU registrations need a domain opened with FI_HMEM. */
static int open_rail(struct raw_rail *rail, const struct srd_nic *nic, int cuda) {
  rail->info = cuda ? srd_gdr_hmem_info(nic->info) : fi_dupinfo(nic->info);
  if (!rail->info) {
    if (cuda) perf_error("raw: --cuda: provider %s offers no FI_HMEM on %s", nic->info->fabric_attr->prov_name, nic->name);
    return -1;
  }
  if (fi_check(fi_fabric(rail->info->fabric_attr, &rail->fabric, NULL), "fi_fabric") ||
      fi_check(fi_domain(rail->fabric, rail->info, &rail->domain, NULL), "fi_domain"))
    return -1;
  rail->max_msg = rail->info->ep_attr->max_msg_size ? rail->info->ep_attr->max_msg_size : SIZE_MAX;
  rail->virt_addr = (rail->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) != 0;
  rail->prov_key = (rail->info->domain_attr->mr_mode & FI_MR_PROV_KEY) != 0;
  return 0;
}

struct perf_transport *perf_raw_open(int dev, int cuda) {
  struct srd_nic_list nics;
  if (srd_topo_discover(&nics)) {
    perf_error("raw: no usable libfabric provider or NIC (run srd-info)");
    return NULL;
  }
  struct srd_topo *topo = calloc(1, sizeof(*topo));
  struct raw *r = calloc(1, sizeof(*r));
  if (!topo || !r || srd_topo_group(&nics, NULL, (int)srd_param_int(SRD_PARAM_RAILS), topo)) goto fail;
  if (dev >= topo->ngroups) {
    perf_error("raw: --dev %d: there are %d NIC groups", dev, topo->ngroups);
    goto fail;
  }
  const struct srd_device_group *g = &topo->groups[dev];
  r->base.ops = &raw_ops;
  r->base.cuda = cuda;
  snprintf(r->base.kind, sizeof(r->base.kind), "raw");
  snprintf(r->base.provider, sizeof(r->base.provider), "%s", nics.provider);
  r->base.max_recvs = PERF_TEST_SIZES;
  int n = snprintf(r->base.device, sizeof(r->base.device), "group %d of %d:", dev, topo->ngroups);
  for (int i = 0; i < g->nrails && r->nrails < RAW_MAX_RAILS; i++) {
    const struct srd_nic *nic = &nics.nics[g->rails[i]];
    if (open_rail(&r->rails[r->nrails++], nic, cuda)) goto fail;
    if (n < (int)sizeof(r->base.device))
      n += snprintf(r->base.device + n, sizeof(r->base.device) - (size_t)n, " %s", nic->name);
  }
  snprintf(r->base.description, sizeof(r->base.description), "raw libfabric %s (fi_writedata, %d rail%s%s)",
           nics.provider, r->nrails, r->nrails == 1 ? "" : "s", cuda ? ", FI_HMEM" : "");
  free(topo);
  srd_topo_free(&nics);
  return &r->base;
fail:
  if (r) raw_destroy(&r->base);
  free(topo);
  srd_topo_free(&nics);
  return NULL;
}
