/* srd-perf's raw transport: registration, control messages, progress, and
 * comm creation and teardown. */
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

static char *rx_slot(struct raw_comm *c, int slot) { return c->ctrl + (size_t)slot * RAW_RX_BYTES; }

struct raw_msg *raw_send_slot_msg(struct raw_comm *c, int slot) {
  return (struct raw_msg *)(c->ctrl + (size_t)RAW_CTRL_SLOTS * RAW_RX_BYTES) + slot;
}

static int post_ctrl_recv(struct raw_comm *c, int slot) {
  struct raw_op *op = &c->recv_ops[slot];
  op->kind = OP_CTRL_RECV;
  op->slot = slot;
  return POST_RETRY(c, fi_recv(c->eps[0].ep, rx_slot(c, slot), RAW_RX_BYTES, c->ctrl_mr.desc[0], FI_ADDR_UNSPEC,
                               &op->fi_ctx),
                    "fi_recv (control)");
}

/* Send the message staged in a free send slot to the peer's rail 0. */
int raw_send_ctrl(struct raw_comm *c, int slot, size_t len, fi_addr_t to) {
  struct raw_op *op = &c->send_ops[slot];
  op->kind = OP_CTRL_SEND;
  op->slot = slot;
  return POST_RETRY(c, fi_send(c->eps[0].ep, raw_send_slot_msg(c, slot), len, c->ctrl_mr.desc[0], to, &op->fi_ctx),
                    "fi_send (control)");
}

/* Connection setup never spins: the peer may need this very process to
 * progress another endpoint (its listener) before our send can go out. */
int raw_try_send_staged(struct raw_comm *c, fi_addr_t to) {
  if (c->staged_slot < 0) return 1;
  struct raw_op *op = &c->send_ops[c->staged_slot];
  op->kind = OP_CTRL_SEND;
  op->slot = c->staged_slot;
  ssize_t rc = fi_send(c->eps[0].ep, raw_send_slot_msg(c, c->staged_slot), c->staged_len, c->ctrl_mr.desc[0], to,
                       &op->fi_ctx);
  if (rc == -FI_EAGAIN) return raw_comm_progress(c) ? -1 : 0;
  if (raw_fi_check((int)rc, "fi_send (connection setup)")) return -1;
  c->setup_slot = c->staged_slot;
  c->staged_slot = -1;
  return 1;
}

int raw_fill_names(struct raw_comm *c, struct raw_names *names) {
  names->nrails = (uint32_t)c->nrails;
  for (int i = 0; i < c->nrails; i++) {
    size_t len = RAW_NAME_MAX;
    if (raw_fi_check(fi_getname(&c->eps[i].ep->fid, names->name[i], &len), "fi_getname")) return -1;
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

/* An eager message's bytes go to its receive, and its control receive is
 * posted again; every RAW_CREDIT_BATCH of them the sender hears so. */
void raw_eager_take(struct raw_comm *c, struct raw_rx_slot *s) {
  int slot = s->eager_slot - 1;
  if (s->eager_len > *s->size) {
    perf_error("raw: eager message of %u bytes for a %zu-byte receive", s->eager_len, *s->size);
    c->error = 1;
  } else {
    memcpy(s->buf, rx_slot(c, slot), s->eager_len);
    *s->size = s->eager_len;
  }
  s->req->pending--;
  *s = (struct raw_rx_slot){0};
  c->consumed++;
  if (post_ctrl_recv(c, slot)) c->error = 1;
}

static void handle_eager(struct raw_comm *c, int slot, uint64_t data, size_t len) {
  struct raw_rx_slot *s = &c->rx[((uint32_t)data & RAW_SEQ_MASK) % RAW_RING];
  const char *bad = s->eager_slot ? "one is already waiting there"
                    : len > c->eager_max ? "larger than any eager message"
                    : s->req && !s->buf ? "its receive waits for a write"
                    : NULL;
  if (bad) {
    perf_error("raw: eager message for sequence %u: %s", (unsigned)(data & RAW_SEQ_MASK), bad);
    c->error = 1;
    return;
  }
  s->eager_slot = slot + 1;
  s->eager_len = (uint32_t)len;
  if (s->req) raw_eager_take(c, s); /* else held until the receive is posted */
}

/* Without waiting for a send slot: this runs inside progress. */
static void return_credits(struct raw_comm *c) {
  if (c->consumed < RAW_CREDIT_BATCH || !c->nsend_free || c->error) return;
  int slot = c->send_free[c->nsend_free - 1];
  struct raw_msg *m = raw_send_slot_msg(c, slot);
  m->magic = RAW_MAGIC;
  m->type = RAW_CREDIT;
  m->u.credits = (uint32_t)c->consumed;
  struct raw_op *op = &c->send_ops[slot];
  op->kind = OP_CTRL_SEND;
  op->slot = slot;
  ssize_t rc = fi_send(c->eps[0].ep, m, offsetof(struct raw_msg, u) + sizeof(m->u.credits), c->ctrl_mr.desc[0],
                       c->eps[0].peer, &op->fi_ctx);
  if (rc == -FI_EAGAIN) return; /* the next progress tries again */
  if (raw_fi_check((int)rc, "fi_send (credits)")) {
    c->error = 1;
    return;
  }
  c->nsend_free--;
  c->consumed = 0;
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
  case RAW_CREDIT:
    c->credits += (int)m->u.credits;
    if (m->u.credits > RAW_EAGER_CREDITS || c->credits > RAW_EAGER_CREDITS) {
      perf_error("raw: the peer returned %u eager credits, more than were sent", m->u.credits);
      c->error = 1;
    }
    break;
  default:
    perf_error("raw: unknown control message type %u", m->type);
    c->error = 1;
  }
}

int raw_comm_progress(struct raw_comm *c) {
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
      if (n < 0) return raw_fi_check((int)n, "fi_cq_read"), c->error = 1, -1;
      for (ssize_t i = 0; i < n; i++) {
        if ((e[i].flags & (FI_REMOTE_CQ_DATA | FI_RECV)) == FI_REMOTE_CQ_DATA) { /* a write */
          handle_imm(c, e[i].data);
          continue;
        }
        struct raw_op *op = e[i].op_context;
        switch (op->kind) {
        case OP_CTRL_RECV:
          if (e[i].flags & FI_REMOTE_CQ_DATA) {
            handle_eager(c, op->slot, e[i].data, e[i].len);
            break;
          }
          handle_ctrl(c, (const struct raw_msg *)rx_slot(c, op->slot), e[i].len);
          if (post_ctrl_recv(c, op->slot)) c->error = 1;
          break;
        case OP_CTRL_SEND:
          c->send_free[c->nsend_free++] = op->slot;
          if (op->slot == c->setup_slot) c->setup_slot = -1;
          break;
        case OP_DATA: op->req->pending--; break;
        }
      }
      if (n < 16) break;
    }
  }
  return_credits(c);
  return c->error ? -1 : 0;
}

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

void raw_comm_destroy(struct raw_comm *c) {
  if (!c) return;
  if (c->prev) c->prev->next = c->next;
  else c->r->comms = c->next;
  if (c->next) c->next->prev = c->prev;
  /* Endpoints first: nothing completes into a request after this. */
  for (int i = 0; i < c->nrails; i++)
    if (c->eps[i].ep) fi_close(&c->eps[i].ep->fid);
  while (c->reqs) raw_req_free(c->reqs);
  for (int i = 0; i < c->nrails; i++) {
    if (c->eps[i].cq) fi_close(&c->eps[i].cq->fid);
    if (c->eps[i].av) fi_close(&c->eps[i].av->fid);
  }
  raw_deregister(&c->ctrl_mr);
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
  return raw_fi_check(fi_setname(&e->ep->fid, name, strlen(name) + 1), "fi_setname (shm)");
}

struct raw_comm *raw_comm_create(struct raw *r) {
  struct raw_comm *c = calloc(1, sizeof(*c));
  if (!c) return NULL;
  c->r = r;
  c->nrails = r->nrails;
  c->next = r->comms;
  if (r->comms) r->comms->prev = c;
  r->comms = c;
  c->staged_slot = c->setup_slot = -1;
  /* GPU buffers take no CPU copy: with --cuda only empty messages go eagerly. */
  c->eager_max = r->base.cuda ? 0 : r->rails[0].max_msg < RAW_EAGER_MAX ? r->rails[0].max_msg : RAW_EAGER_MAX;
  c->credits = RAW_EAGER_CREDITS;
  for (int i = 0; i < c->nrails; i++) {
    struct raw_rail *rail = &r->rails[i];
    struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_NONE, .size = 4096};
    struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
    struct raw_ep *e = &c->eps[i];
    if (raw_fi_check(fi_endpoint(rail->domain, rail->info, &e->ep, NULL), "fi_endpoint") ||
        raw_fi_check(fi_cq_open(rail->domain, &cq_attr, &e->cq, NULL), "fi_cq_open") ||
        raw_fi_check(fi_av_open(rail->domain, &av_attr, &e->av, NULL), "fi_av_open") ||
        raw_fi_check(fi_ep_bind(e->ep, &e->av->fid, 0), "fi_ep_bind(av)") ||
        raw_fi_check(fi_ep_bind(e->ep, &e->cq->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)") || name_shm_endpoint(r, e) ||
        raw_fi_check(fi_enable(e->ep), "fi_enable")) {
      raw_comm_destroy(c);
      return NULL;
    }
  }
  size_t ctrl_bytes = (size_t)RAW_CTRL_SLOTS * (RAW_RX_BYTES + sizeof(struct raw_msg));
  c->ctrl = calloc(1, ctrl_bytes);
  if (!c->ctrl || raw_register_on_rails(r, c->ctrl, ctrl_bytes, 0, &c->ctrl_mr)) {
    raw_comm_destroy(c);
    return NULL;
  }
  for (int i = 0; i < RAW_CTRL_SLOTS; i++) c->send_free[c->nsend_free++] = i;
  for (int i = 0; i < RAW_CTRL_SLOTS; i++)
    if (post_ctrl_recv(c, i)) {
      raw_comm_destroy(c);
      return NULL;
    }
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
