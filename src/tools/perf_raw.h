/* Internal to srd-perf's raw-libfabric transport (perf_raw.c, perf_raw_comm.c):
 * wire formats, state, and the connection machinery both files use. */
#ifndef SRD_TOOLS_PERF_RAW_H
#define SRD_TOOLS_PERF_RAW_H

#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include "perf_log.h"
#include "perf_transport.h"

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
/* Messages up to this size go eagerly (fi_senddata, fi_injectdata within the
 * provider's inject size) into the peer's posted control receives, which
 * are this large; the peer copies them out. */
#define RAW_EAGER_MAX 8192
#define RAW_RX_BYTES RAW_EAGER_MAX
#define RAW_EAGER_CREDITS 32 /* eager messages in flight per connection: at most half the posted receives */
#define RAW_CREDIT_BATCH 8   /* the receiver returns credits this many at a time */

enum raw_msg_type { RAW_HELLO = 1, RAW_WELCOME = 2, RAW_CTS = 3, RAW_CREDIT = 4 };

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
    uint32_t credits;
  } u;
};
_Static_assert(sizeof(struct raw_msg) <= RAW_RX_BYTES, "a control message fits a posted receive");

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
  size_t inject_size;
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

enum raw_op_kind { OP_CTRL_RECV, OP_CTRL_SEND, OP_DATA /* a request's write or eager send */ };

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

/* A receive waiting by sequence; or an eager message that came first, held
 * in its control receive (eager_slot + 1) until the receive is posted. */
struct raw_rx_slot {
  struct raw_req *req;
  void *buf;    /* eager: where the message goes */
  size_t *size; /* eager: the posted size, then the size that came */
  uint32_t stripes_seen;
  int eager_slot;
  uint32_t eager_len;
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
  char *ctrl; /* RAW_CTRL_SLOTS receive slots of RAW_RX_BYTES, then as many send slots */
  struct raw_mr ctrl_mr;
  struct raw_op recv_ops[RAW_CTRL_SLOTS], send_ops[RAW_CTRL_SLOTS];
  int send_free[RAW_CTRL_SLOTS], nsend_free;
  size_t eager_max;
  int credits;           /* sender: eager messages it may still send */
  int consumed;          /* receiver: eager messages taken, credits not yet returned */
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

/* Post with retries while the provider says EAGAIN; progress frees room. */
#define POST_RETRY(c, expr, what)                                                                                      \
  ({                                                                                                                   \
    ssize_t rc_;                                                                                                       \
    double deadline_ = raw_now_s() + RAW_POST_TIMEOUT_S;                                                               \
    while ((rc_ = (expr)) == -FI_EAGAIN) {                                                                             \
      if (raw_comm_progress(c)) break;                                                                                 \
      if (raw_now_s() > deadline_) break;                                                                              \
    }                                                                                                                  \
    rc_ == -FI_EAGAIN ? (perf_error("raw: %s: provider busy for %d s", what, RAW_POST_TIMEOUT_S), -1)                  \
                      : raw_fi_check((int)rc_, what);                                                                  \
  })

int raw_fi_check(int rc, const char *what);
double raw_now_s(void);
int raw_register_on_rails(struct raw *r, void *buf, size_t size, int cuda, struct raw_mr *m);
void raw_deregister(struct raw_mr *m);
struct raw_msg *raw_send_slot_msg(struct raw_comm *c, int slot);
int raw_send_ctrl(struct raw_comm *c, int slot, size_t len, fi_addr_t to);
int raw_try_send_staged(struct raw_comm *c, fi_addr_t to);
int raw_fill_names(struct raw_comm *c, struct raw_names *names);
int raw_comm_progress(struct raw_comm *c);
struct raw_req *raw_req_new(struct raw_comm *c);
void raw_req_free(struct raw_req *req);
void raw_comm_destroy(struct raw_comm *c);
struct raw_comm *raw_comm_create(struct raw *r);
int raw_take_send_slot(struct raw_comm *c);
void raw_eager_take(struct raw_comm *c, struct raw_rx_slot *s);

#endif
