/* The data path: devices (groups of rails sharing one lock), comms, requests,
 * and the receiver-driven protocol of DESIGN.md. Sender and receiver are
 * matched by a per-comm message sequence: the n-th isend meets the n-th
 * receive buffer (a grouped receive of n buffers takes n sequence numbers).
 *
 * Progress and locking. dev->lock owns every rail's software state, every
 * comm and every request of the device; it is the only lock the protocol
 * knows. Without progress threads (NCCL_SRD_PROGRESS_THREADS=0) the caller's
 * thread polls the CQs inside srd_dev_progress. With N > 0 every NIC is opened
 * N times (lanes: rails of their own fabric, domain, AV, CQ and endpoints,
 * FI_THREAD_SAFE), and one thread per lane reaps its CQ without dev->lock (the
 * provider's socket copies happen there, on N cores at once), then takes
 * dev->lock only to dispatch what it reaped. Callers then never poll a CQ;
 * srd_dev_progress only posts what waits and runs the periodic checks.
 * dev->wake_lock guards nothing but the sleep and wake-up of idle lanes; it
 * is never held together with dev->lock. */
#ifndef SRD_PROTO_H
#define SRD_PROTO_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "srd/mr.h"
#include "srd/rail.h"
#include "srd/sched.h"
#include "srd/topo.h"
#include "srd/wire.h"

#define SRD_REQS_PER_COMM 40 /* NCCL keeps at most 32 in flight */
#define SRD_CTS_RECORDS 48

struct srd_comm;

enum srd_req_kind { SRD_REQ_SEND = 1, SRD_REQ_RECV, SRD_REQ_FLUSH };

struct srd_recv_entry {
  void *buf;
  size_t cap;
  int tag;
  struct srd_mr_ref *mr;
  size_t got;
  uint32_t stripes_seen, stripes_total;
  bool complete;
};

struct srd_req {
  struct srd_comm *comm;
  enum srd_req_kind kind;
  bool in_use, done;
  bool released;       /* NCCL is done with it; free once outstanding is 0 */
  bool on_pending;
  int result;          /* ncclResult_t once done */
  int outstanding;     /* posted operations that still name this request */
  uint32_t seq;        /* first message sequence */
  int n;               /* receive entries */
  int entries_done;
  struct srd_recv_entry e[SRD_MAX_RECVS];
  /* send */
  const char *buf;
  size_t size;
  struct srd_mr_ref *mr;
  int nstripes, posted, completed;
  int remote_entry;     /* which buffer of the peer's group */
  uint64_t raddr;
  uint64_t rkey[SRD_MAX_RAILS]; /* by local rail: the key of the remote rail it writes to */
  struct srd_req *next_pending;
  struct srd_stripe stripes[SRD_MAX_STRIPES];
  struct srd_rail_write ops[SRD_MAX_STRIPES];
};

/* A clear-to-send as the sender keeps it until every entry is used. */
struct srd_cts_rec {
  bool valid;
  uint32_t seq;
  int n;
  unsigned used;
  struct srd_cts_entry e[SRD_MAX_RECVS];
  uint64_t *keys; /* n * nkeys */
};

struct srd_unexpected { /* eager data that arrived before its receive */
  struct srd_unexpected *next;
  uint32_t seq;
  int32_t tag;
  uint32_t len;
  char data[];
};

struct srd_dev;

struct srd_comm {
  struct srd_dev *dev;
  uint32_t id;          /* index | generation << 12 */
  uint32_t peer_id;     /* the peer comm's id */
  uint32_t peer_pid;
  bool peer_closed;     /* the peer sent its close notice */
  uint32_t peer_final_seq; /* messages the closed peer sent (or received) */
  bool is_send, ready, closing;
  int result;           /* first error; the comm fails fast after it */
  char error[256];
  int remote_rails, remote_eps;
  fi_addr_t *peer;      /* [local path] -> remote path address in that rail's AV */
  fi_addr_t *inserted;  /* [local rail * remote paths] every AV entry we own */
  bool eager_ok;        /* the receiver accepts eager data */
  unsigned ctrl_cursor, sched_cursor;
  int ops_in_flight;    /* posted operations whose completion is pending */
  int reqs_in_flight;
  uint64_t last_heard_ms, last_ping_ms;
  uint64_t last_wait_ms; /* last isend that found no clear-to-send */
  uint64_t probe_refused_since_ms;
  /* Messages by path, logged at INFO when the comm closes: which path a
   * message took is otherwise invisible (users tuning NCCL_SRD_EAGER_MAX,
   * tests checking the eager boundary and striping). */
  struct {
    uint64_t eager;      /* inline messages sent or received */
    uint64_t rendezvous; /* messages written into the peer's buffer after its clear-to-send */
    uint64_t writes;     /* RMA writes (stripes) posted or received */
  } traffic;
  struct srd_req reqs[SRD_REQS_PER_COMM];
  /* sender */
  uint32_t next_seq;
  struct srd_cts_rec *cur;
  struct srd_cts_rec cts[SRD_CTS_RECORDS];
  int32_t sent_tag[SRD_SEQ_MASK + 1];
  /* receiver */
  struct srd_req *by_seq[SRD_SEQ_MASK + 1];
  struct srd_unexpected *unexpected;
  /* handshake */
  uint64_t cookie;
  uint64_t deadline_ms;
  const void *connect_key;
  fi_addr_t listener_addr;  /* rail 0 AV entry of the listener, for the hello */
  uint32_t listener_id;
  bool hello_sent;
  struct srd_comm *next_connecting;
  struct srd_early_msg *early;
  struct srd_comm *next_closed; /* on the device's list of closed comms */
};

/* A control message that overtook the handshake's answer (the transport is
 * unordered): kept raw and replayed once the comm knows its peer. */
struct srd_early_msg {
  struct srd_early_msg *next;
  size_t len;
  char data[];
};

struct srd_pending_hello {
  struct srd_pending_hello *next;
  struct srd_msg_peer peer;
  uint8_t names[];
};

struct srd_listener {
  struct srd_dev *dev;
  struct srd_listener *next;
  uint32_t id;
  uint64_t cookie;
  struct srd_pending_hello *hellos;
  struct srd_comm *accepting; /* accepted, answer not yet posted */
};

/* The progress thread of one rail (lane). */
struct srd_lane {
  struct srd_dev *dev;
  struct srd_rail *rail;
  pthread_t thread;
  bool running;         /* created and not yet joined */
};

struct srd_dev {
  pthread_mutex_t lock; /* one owner of every rail, comm and request of the device */
  int index;
  bool open;
  int nrails, neps, npaths;
  int nnics;            /* NICs of the group; rail i is lane i / nnics of NIC i % nnics */
  int lanes_per_nic;
  bool threaded;        /* lane threads poll the CQs; callers do not */
  struct srd_rail *rails;
  struct srd_lane *lanes; /* [nrails] when threaded */
  pid_t lanes_pid;        /* the process that started them */
  atomic_bool stop;       /* lanes end */
  atomic_uint activity;   /* bumped by every entry point: keeps lanes from sleeping */
  atomic_int sleepers;    /* lanes waiting on wake */
  pthread_mutex_t wake_lock;
  pthread_cond_t wake;
  const struct srd_nic_list *nics;
  struct srd_device_group group;
  struct srd_mr_cache mrs;
  struct srd_sched_params sched;
  size_t eager_max;
  bool cuda;            /* provider and driver can register GPU memory */
  bool host_local;      /* shm: peers are processes of this host */
  struct srd_comm *comms[SRD_MAX_COMMS];
  uint32_t gen[SRD_MAX_COMMS];
  int ncomms;
  struct srd_listener *listeners;
  struct srd_comm *connecting;
  uint32_t next_listener_id;
  uint64_t last_scan_ms;
  struct srd_req *pending_head, *pending_tail; /* sends with stripes to post */
  /* Closed comms the provider still holds operations of: freed when those
   * complete, or when the device closes. */
  struct srd_comm *closed;
};

/* Per-rail registration behind one srd_mr. */
struct srd_rail_mrs {
  int nrails;
  struct fid_mr *mr[SRD_MAX_RAILS];
};

uint64_t srd_now_ms(void);
uint64_t srd_random64(void);

/* Device lifetime (src/proto/dev.c). Caller holds no lock. srd_dev_init once
 * before the first open; srd_dev_open starts the lane threads it asks for. */
void srd_dev_init(struct srd_dev *dev, int index);
int srd_dev_open(struct srd_dev *dev);
void srd_dev_close(struct srd_dev *dev);
/* Close, then release what srd_dev_init made. */
void srd_dev_fini(struct srd_dev *dev);
/* Stop and join the lane threads (bounded wait). Returns false when one did
 * not end: its rails must then stay open. Caller holds no lock. */
bool srd_dev_stop_lanes(struct srd_dev *dev);
/* An entry point was called: idle lanes wake and poll. No lock needed. */
void srd_dev_kick(struct srd_dev *dev);
/* One step of a bounded wait inside a call (lock held): progress, and give the
 * lanes a chance at the lock. */
void srd_dev_wait_step(struct srd_dev *dev);
struct srd_comm *srd_dev_comm_by_id(struct srd_dev *dev, uint32_t id);
struct srd_comm *srd_comm_alloc(struct srd_dev *dev, bool is_send);
void srd_comm_free(struct srd_comm *c);
/* Take the comm out of the device (no message reaches it) and keep it on the
 * closed list until its operations complete. */
void srd_comm_retire(struct srd_comm *c);
/* Fail the comm with an error kept for every later call. */
void srd_comm_fail(struct srd_comm *c, int result, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Insert the peer's paths; builds c->peer. */
int srd_comm_set_peer(struct srd_comm *c, const struct srd_msg_peer *p);

/* Progress: poll every rail, post what waits, probe silent peers. Lock held. */
void srd_dev_progress(struct srd_dev *dev);
/* Handshake messages are delivered here by the progress engine. */
void srd_handshake_on_message(struct srd_dev *dev, const struct srd_msg *m);
/* Deliver messages that arrived before the comm was ready. */
void srd_comm_replay_early(struct srd_comm *c);

/* Control messages to the peer of c: take a buffer on the next path (NULL
 * when none is free), encode into b->data, post. Posting returns -FI_EAGAIN
 * when the provider queue is full; the buffer is then given back. req, when
 * given, completes with the send (eager data). */
struct srd_rail_buf *srd_comm_ctrl_buf(struct srd_comm *c, int *path);
int srd_comm_post_ctrl(struct srd_comm *c, struct srd_rail_buf *b, int path, size_t len, struct srd_req *req);
/* The same to an explicit address (the handshake, before the peer is known). */
int srd_comm_post_ctrl_to(struct srd_comm *c, struct srd_rail_buf *b, int path, fi_addr_t dest, size_t len,
                          struct srd_req *req);

/* Data path (src/proto/send.c, recv.c). Lock held. *req NULL: try again. */
int srd_proto_isend(struct srd_comm *c, const void *data, size_t size, int tag, struct srd_mr_ref *mr,
                    struct srd_req **req);
int srd_proto_irecv(struct srd_comm *c, int n, void **data, const size_t *sizes, const int *tags,
                    struct srd_mr_ref **mrs, struct srd_req **req);
void srd_proto_on_cts(struct srd_comm *c, const struct srd_msg_cts *m);
void srd_proto_on_eager(struct srd_comm *c, const struct srd_msg_eager *m);
void srd_proto_on_trunc(struct srd_comm *c, const struct srd_msg_trunc *m);
void srd_proto_on_write(struct srd_comm *c, struct srd_imm imm, size_t len);
void srd_proto_on_bye(struct srd_comm *c, const struct srd_msg_bye *m);
void srd_proto_post_pending(struct srd_dev *dev);
/* Post the clear-to-send of a receive, or queue it when the provider is full. */
int srd_proto_post_cts(struct srd_req *r);
struct srd_req *srd_req_get(struct srd_comm *c, enum srd_req_kind kind);
/* NCCL saw the request done: recycle it once no operation names it. */
void srd_req_release(struct srd_req *r);
void srd_req_finish(struct srd_req *r, int result);
/* One posted operation naming r completed. */
void srd_req_op_done(struct srd_req *r);
void srd_pending_add(struct srd_req *r);

#endif
