/* Internal to srd-perf's raw-libfabric transports (perf_raw.c, perf_raw_comm.c, perf_raw_lanes.c;
 * perf_rma_raw.c opens its rails and lanes here too): wire formats, state, and the machinery the
 * files share. */
#ifndef SRD_TOOLS_PERF_RAW_H
#define SRD_TOOLS_PERF_RAW_H

#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include "perf_log.h"
#include "perf_raw_lanes.h"
#include "perf_transport.h"

#define RAW_MAGIC 0x53524450u /* "SRDP" */
#define RAW_MAX_RAILS 16
#define RAW_NAME_MAX 64
#define RAW_CTRL_SLOTS 64 /* a comm's control sends in flight */
#define RAW_POOL_MAX 512  /* posted receives shared by all comms: half the provider's receive queue, at most this */
/* Immediate data: destination comm (10 bits) | sequence (10) | stripes (12). */
#define RAW_COMM_BITS 10
#define RAW_MAX_COMMS (1 << RAW_COMM_BITS)
#define RAW_SEQ_BITS 10
#define RAW_SEQ_MASK ((1u << RAW_SEQ_BITS) - 1)
#define RAW_RING (1u << RAW_SEQ_BITS) /* messages in flight per comm, above srd-perf's 32 x 8 */
#define RAW_MAX_STRIPES 4095
#define RAW_STRIPE_ALIGN 128
#define RAW_POST_TIMEOUT_S 10
/* Messages up to the plugin's eager size for the provider
 * (srd_eager_default) go eagerly (fi_senddata, fi_injectdata within the
 * provider's inject size) into the pool's posted receives, which are that
 * large; the receiver copies them out. */
#define RAW_CREDIT_BATCH 8 /* the receiver returns eager credits this many at a time */
/* A peer's credits are a quarter of the pool, at least two batches: fewer
 * and the credits could never come back. */
#define RAW_POOL_MIN (8 * RAW_CREDIT_BATCH)

static inline uint32_t raw_imm(uint32_t comm, uint32_t seq, uint32_t stripes) {
  return comm | (seq & RAW_SEQ_MASK) << RAW_COMM_BITS | stripes << (RAW_COMM_BITS + RAW_SEQ_BITS);
}
static inline uint32_t raw_imm_comm(uint64_t imm) { return (uint32_t)imm & (RAW_MAX_COMMS - 1); }
static inline uint32_t raw_imm_seq(uint64_t imm) { return (uint32_t)(imm >> RAW_COMM_BITS) & RAW_SEQ_MASK; }
static inline uint32_t raw_imm_stripes(uint64_t imm) { return (uint32_t)(imm >> (RAW_COMM_BITS + RAW_SEQ_BITS)) & 0xfff; }

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

/* Every control message names the comm it is for and the one it is from. */
struct raw_msg {
  uint32_t magic;
  uint16_t type;
  uint16_t to, from;
  uint16_t pad[3];
  union {
    struct raw_names names;
    struct raw_cts cts;
    uint32_t credits;
  } u;
};
_Static_assert(sizeof(struct raw_msg) <= 8192, "a control message fits a posted receive of the smallest eager size");

/* The handle NCCL's exchange carries: the listener's rail-0 address and comm.
 * Like NCCL plugins, connect keeps its in-progress state in its copy of the
 * handle, so several connects can be under way at once. */
struct raw_handle {
  uint32_t magic;
  uint16_t len;
  uint16_t comm;
  struct raw_comm *connecting; /* local only: zero on the wire */
  uint8_t name[PERF_HANDLE_SIZE - 16];
};
_Static_assert(sizeof(struct raw_handle) == PERF_HANDLE_SIZE, "handle size");

/* One endpoint per rail for the whole process, shared by every comm, as a
 * plugin does: both directions between two processes share a connection
 * where the provider has one (tcp), so acknowledgements ride on data. */
struct raw_rail {
  struct fi_info *info;
  struct fid_fabric *fabric;
  struct fid_domain *domain;
  struct fid_ep *ep;
  struct fid_av *av;
  struct fid_cq *cq;
  size_t max_msg;
  size_t inject_size;
  int virt_addr;
  int prov_key;
};

enum raw_op_kind { OP_CTRL_RECV, OP_CTRL_SEND, OP_DATA /* a request's write or eager send */ };

/* Every posted operation's context: libfabric's scratch space first. */
struct raw_op {
  struct fi_context2 fi_ctx;
  enum raw_op_kind kind;
  int slot;
  struct raw_comm *comm; /* control sends and data: the comm that posted it */
  struct raw_req *req;   /* data */
  char *buf;             /* pool receives: their buffer */
};

struct raw_mr {
  int nrails;
  char *base; /* offset-based providers address writes from here */
  struct fid_mr *mr[RAW_MAX_RAILS];
  void *desc[RAW_MAX_RAILS];
  uint64_t key[RAW_MAX_RAILS];
};

/* A peer address inserted once per rail: every comm to that peer shares it,
 * and, on rail 0, its eager credits: a quarter of the pool each way. */
struct raw_peer {
  struct raw_peer *next;
  int rail;
  size_t len;
  uint8_t name[RAW_NAME_MAX];
  fi_addr_t addr;
  int credits;  /* eager messages we may still send it */
  int consumed; /* its eager messages we took, credits not yet returned */
};

/* Rail i is lane i / nnics of NIC i % nnics, as in the plugin: lane 0 is
 * polled by the caller, the others by their threads (perf_raw_lanes.h). */
struct raw {
  struct perf_transport base;
  int nrails, nnics;
  struct raw_rail rails[RAW_MAX_RAILS];
  int lanes_opened; /* 1, or -1 when opening them failed */
  int lanes_running;
  struct raw_lane *lanes[RAW_MAX_RAILS]; /* rails nnics.. */
  size_t stripe_threshold, min_stripe;   /* the plugin's settings (NCCL_SRD_STRIPE_THRESHOLD, NCCL_SRD_MIN_STRIPE) */
  unsigned stripe_cursor;                /* the first lane of the next message: turns, as the plugin's paths */
  uint64_t next_key;
  struct raw_comm *comms; /* every comm not yet freed */
  struct raw_comm *by_id[RAW_MAX_COMMS];
  uint32_t next_id;
  int failed;
  int credits_due; /* some peer is owed credits that could not be sent at once */
  /* Receives posted on rail 0 for every comm's control and eager messages. */
  int npool;
  size_t rx_bytes; /* each pool receive, the largest eager message */
  char *pool;
  struct raw_mr pool_mr;
  struct raw_op *pool_ops;
  struct raw_peer *peers;
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

/* A receive waiting by sequence; or an eager message that came first, held
 * in its pool receive until the receive is posted. */
struct raw_rx_slot {
  struct raw_req *req;
  void *buf;    /* eager: where the message goes */
  size_t *size; /* eager: the posted size, then the size that came */
  uint32_t stripes_seen;
  struct raw_op *eager; /* the pool receive holding an early eager message */
  uint32_t eager_len;
};

struct raw_comm {
  struct raw *r;
  struct raw_comm *prev, *next;
  struct raw_req *reqs;
  uint32_t id, peer_id;
  int nrails, peer_nrails;
  int ready, peer_known, error, closed;
  int inflight; /* its operations the provider holds */
  int staged_slot; /* hello or welcome waiting to be posted, -1 when none */
  size_t staged_len;
  int setup_slot;  /* welcome posted but not yet complete, -1 when none */
  fi_addr_t peer[RAW_MAX_RAILS]; /* rail i sends to peer rail i mod n */
  struct raw_peer *peer0;         /* the peer's rail 0: its credits */
  struct raw_msg *tx; /* RAW_CTRL_SLOTS control send slots */
  struct raw_mr tx_mr;
  struct raw_op send_ops[RAW_CTRL_SLOTS];
  int send_free[RAW_CTRL_SLOTS], nsend_free;
  size_t eager_max;
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

/* Post with retries while the provider says EAGAIN; progress (0, or -1 on
 * failure) frees room. */
#define POST_RETRY_WITH(progress, expr, what)                                                                          \
  ({                                                                                                                   \
    ssize_t rc_;                                                                                                       \
    double deadline_ = raw_now_s() + RAW_POST_TIMEOUT_S;                                                               \
    while ((rc_ = (expr)) == -FI_EAGAIN) {                                                                             \
      if (progress) break;                                                                                             \
      if (raw_now_s() > deadline_) break;                                                                              \
    }                                                                                                                  \
    rc_ == -FI_EAGAIN ? (perf_error("raw: %s: provider busy for %d s", what, RAW_POST_TIMEOUT_S), -1)                  \
                      : raw_fi_check((int)rc_, what);                                                                  \
  })
#define POST_RETRY(c, expr, what) POST_RETRY_WITH(raw_comm_progress(c), expr, what)

int raw_fi_check(int rc, const char *what);
double raw_now_s(void);
int raw_register_on_rails(struct raw *r, void *buf, size_t size, int cuda, struct raw_mr *m);
void raw_deregister(struct raw_mr *m);
struct raw_msg *raw_send_slot_msg(struct raw_comm *c, int slot);
struct raw_msg *raw_msg_start(struct raw_comm *c, int slot, enum raw_msg_type type);
int raw_send_ctrl(struct raw_comm *c, int slot, size_t len);
int raw_try_send_staged(struct raw_comm *c);
/* shm endpoints (before fi_enable) get a name no earlier process used. */
int raw_name_shm_endpoint(const char *provider, struct fid_ep *ep);
/* The NICs of group dev, a rail each (domains, no endpoints yet), and the
 * plugin's striping settings; raw_close undoes it, a failure too. */
int raw_open_rails(struct raw *r, int dev, int cuda);
void raw_close(struct raw *r);
int raw_open_domain(struct raw_rail *rail);
int raw_open_endpoint(struct raw *r, struct raw_rail *rail);
int raw_open_endpoints(struct raw *r);
void raw_describe(struct raw *r);
void raw_close_endpoints(struct raw *r);
/* Reap every rail's completions (the lanes' through their threads) into
 * on_entry; -1 once a rail failed, said why. */
int raw_poll(struct raw *r, void (*on_entry)(struct raw *r, const struct fi_cq_data_entry *e));
int raw_progress(struct raw *r);
int raw_fill_names(struct raw *r, struct raw_names *names);
struct raw_peer *raw_peer_insert(struct raw *r, int rail, const void *name, size_t len);
/* The peer's rails (names) into ours 0..nrails-1: rail i reaches the peer's
 * rail i mod its count, at peer[i]; *first is rail 0's peer. */
int raw_peer_insert_rails(struct raw *r, int nrails, const struct raw_names *names, fi_addr_t *peer,
                          struct raw_peer **first);
int raw_comm_progress(struct raw_comm *c);
int raw_comm_failed(const struct raw_comm *c);
struct raw_req *raw_req_new(struct raw_comm *c);
void raw_req_free(struct raw_req *req);
void raw_comm_destroy(struct raw_comm *c);
struct raw_comm *raw_comm_create(struct raw *r);
int raw_take_send_slot(struct raw_comm *c);
void raw_eager_take(struct raw_comm *c, struct raw_rx_slot *s);

#endif
