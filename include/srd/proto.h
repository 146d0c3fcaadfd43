/* The data path: devices (groups of rails sharing one lock), comms, requests,
 * and the receiver-driven protocol of DESIGN.md. Sender and receiver are
 * matched by a per-comm message sequence: the n-th isend meets the n-th
 * receive buffer (a grouped receive of n buffers takes n sequence numbers).
 *
 * Progress and locking. dev->lock owns every rail's software state, every
 * comm and every request of the device; it is the only lock the protocol
 * knows. Without progress threads (NCCL_SRD_PROGRESS_THREADS=0) the caller's
 * thread polls the CQs inside srd_dev_progress. With N > 0 progress threads
 * every NIC is opened N + 1 times (lanes: rails of their own fabric, domain,
 * AV, CQ and endpoints). Lane 0 stays with the caller's thread: control
 * messages (eager data, clear-to-sends) and messages below the stripe
 * threshold use only its paths, so a small message never waits on a thread.
 * Lanes 1..N (FI_THREAD_SAFE) carry stripes of large messages; one thread per
 * lane reaps its CQ without dev->lock (the provider's socket copies happen
 * there, on N cores at once), then takes dev->lock only to dispatch what it
 * reaped. Threads start at open when NCCL_SRD_PROGRESS_THREADS asks for them,
 * otherwise on the device's first large message (srd_dev_want_lanes).
 * dev->wake_lock guards nothing but the sleep and wake-up of idle lanes; it
 * is never held together with dev->lock. */
#ifndef SRD_PROTO_H
#define SRD_PROTO_H

#include <pthread.h>
#ifdef __cplusplus /* the unit tests: the same layout through C++'s atomics */
#include <atomic>
typedef std::atomic<bool> atomic_bool;
typedef std::atomic<unsigned> atomic_uint;
typedef std::atomic<int> atomic_int;
#else
#include <stdatomic.h>
#endif
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "srd/err.h"
#include "srd/gdr.h"
#include "srd/log.h"
#include "srd/mr.h"
#include "srd/rail.h"
#include "srd/sched.h"
#include "srd/sys.h"
#include "srd/topo.h"
#include "srd/wire.h"

#define SRD_REQS_PER_COMM SRD_RECV_SLOTS /* a receive's slot travels in the immediate data */
#define SRD_CTS_RECORDS 48
#define SRD_SENT_TAGS 1024    /* tags of eager sends, for a clear-to-send that comes later */
/* Eager messages a sender may send past the receives its peer said it posted
 * (a clear-to-send names them): what a receive comm keeps before its
 * receives, at most this many messages of the eager size. */
#define SRD_EAGER_WINDOW 64
/* Unneeded clear-to-sends in a row after which receives post theirs on request. */
#define SRD_CTS_UNUSED_MAX 4
#define SRD_QUIET_PEERS 16      /* peers remembered for not answering a close (struct srd_dev) */
#define SRD_PENDING_REFUSALS 4 /* refusals in a row that end a pass over the pending comms: the provider is full */

struct srd_comm;
struct srd_rma_peer;

enum srd_req_kind { SRD_REQ_SEND = 1, SRD_REQ_RECV, SRD_REQ_FLUSH };

struct srd_recv_entry {
  void *buf;
  size_t cap;
  int tag;
  struct srd_mr_ref *mr;
  size_t got;
  uint32_t stripes_seen, stripes_total;
  uint32_t stripe_mask; /* stripes landed, by index: a re-sent copy or a late original counts once */
  bool complete;
};

/* Operations of one request: a send's stripes, or a flush's read per rail. */
#define SRD_REQ_OPS (SRD_MAX_RAILS > SRD_MAX_STRIPES ? SRD_MAX_RAILS : SRD_MAX_STRIPES)

/* Requests come from the device's pool when a call needs one and go back when
 * NCCL and the provider are both done with them; a comm keeps only pointers
 * (its slots). */
struct srd_req {
  struct srd_comm *comm;
  enum srd_req_kind kind;
  int slot;            /* index in comm->reqs */
  uint8_t slot_tag;    /* receive: slot and use count, as the writes carry it */
  bool in_use, done;
  bool released;       /* NCCL is done with it; free once outstanding is 0 */
  bool on_pending;
  bool cts_sent;       /* receive: its clear-to-send was posted, so writes may name it */
  bool old_keys;       /* receive: that clear-to-send named keys a rail re-key has closed since */
  int result;          /* enum srd_err once done */
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
  uint32_t stripes_done; /* by index: completed at least once (an original and its re-send count once) */
  uint32_t resend;       /* by index: to post again on a healthy rail (failover) */
  /* Failover's fence (DESIGN.md, "Re-sends wait for the receiver"): stripes
   * whose original may have landed unacknowledged, re-sent only once the
   * peer's answer to fence round unsure_round says the receive is open;
   * settle_round: the peer holds that receive until told SETTLED, once no
   * copy (copies: in flight) or unsure stripe is left. */
  uint32_t unsure, unsure_round, settle_round;
  uint32_t settle_seq; /* send: the held receive's first message sequence */
  int copies;
  uint32_t held_round; /* receive: held since this fence round until the sender's SETTLED */
  int remote_entry;     /* which buffer of the peer's group */
  uint8_t remote_slot;  /* the peer's receive, from its clear-to-send */
  uint64_t raddr;
  uint64_t rkey[SRD_MAX_RAILS]; /* by local rail: the key of the remote rail it writes to */
  struct srd_req *next_pending, *prev_pending; /* on its comm's pending list; next: also the pool's free list */
  struct srd_stripe stripes[SRD_MAX_STRIPES];
  struct srd_rail_write ops[SRD_REQ_OPS];
};

/* A stripe posted again on another rail (failover): its own descriptor, as
 * the provider may still own the original's; on the device's list until it
 * completes (or the device closes). */
struct srd_resend {
  struct srd_rail_write w; /* first: the completion names its op */
  int stripe;
  struct srd_resend *prev, *next;
};

/* A clear-to-send as the sender keeps it until every entry is used; from the
 * device's pool. */
struct srd_cts_rec {
  struct srd_cts_rec *next_free;
  uint32_t seq;
  int n;
  uint8_t slot;
  unsigned used;
  struct srd_cts_entry e[SRD_MAX_RECVS];
  int keys_cap;
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
struct srd_listener;

/* Comms and listeners are not freed while their device lives: a closed one
 * goes back to the device's pool, dead (magic 0), and is reused later. A
 * caller that closes twice, or tests a request of a closed comm, then gets an
 * error from a field check instead of touching freed memory. */
#define SRD_COMM_MAGIC 0x535244434f4d4d31ull     /* "SRDCOMM1" */
#define SRD_LISTENER_MAGIC 0x5352444c49535431ull /* "SRDLIST1" */

/* What both directions keep; a send comm (struct srd_send_comm) and a
 * receive comm (struct srd_recv_comm) extend it. */
/* A listener's answer to a hello: efa takes a send to any address and fails
 * it later (a peer gone or unreachable), so accept() hands a comm out only
 * once the provider reports the answer delivered. */
enum srd_answer_state { SRD_ANSWER_UNSENT, SRD_ANSWER_POSTED, SRD_ANSWER_DELIVERED, SRD_ANSWER_FAILED };

struct srd_comm {
  uint64_t magic;       /* SRD_COMM_MAGIC from alloc until close */
  struct srd_dev *dev;
  uint32_t id;          /* index | generation << SRD_COMM_INDEX_BITS */
  uint32_t peer_id;     /* the peer comm's id */
  uint64_t token;       /* random, never 0: every message to this comm must carry it */
  uint64_t peer_token;  /* the peer comm's, from its hello or answer: carried in ours */
  uint32_t peer_pid;
  /* What writes into the receive comm carry to name it (wire.h): a receive
   * comm's own, drawn at random; a send comm's, its peer's from the answer. */
  uint16_t write_id;
  bool peer_closed;     /* the peer sent its close notice */
  uint32_t peer_final_seq; /* messages the closed peer sent (or received) */
  /* The close handshake (src/proto/bye.c): a closing receive comm waits
   * until every write its peer completed has landed. */
  bool bye_sent;        /* our close notice went out */
  bool bye_due;         /* send comm: the notice goes once our writes are over */
  bool peer_drained;    /* receive comm: the peer's notice said it writes no more */
  bool peer_lost;       /* the peer is gone: evidence only (an error completion, its process or listener gone) */
  uint64_t peer_writes; /* receive comm: the writes the drained peer completed */
  uint64_t writes_done; /* send comm: our writes that completed; receive comm: writes that named us */
  uint64_t eagers;      /* send comm: eager messages posted; receive comm: eager messages taken (kept or delivered) */
  uint64_t peer_eagers; /* receive comm: the eager messages the drained peer sent */
  int writes_in_flight; /* send comm: posted or queued writes not completed (also in ops_in_flight) */
  bool is_send, ready;
  bool closing;         /* closed, or its buffer deregistered mid-receive: writes to it only count */
  atomic_bool large;    /* carried a message of at least the stripe threshold: its calls wake the lanes
                         * (read before the lock is taken) */
  int result;           /* first error (enum srd_err); the comm fails fast after it */
  char error[256];
  int remote_rails, remote_eps;
  fi_addr_t *peer;      /* [local path] -> remote path address in that rail's AV */
  fi_addr_t *inserted;  /* [local rail * remote paths] every AV entry we own */
  size_t eager_max;     /* the largest message sent eagerly: ours or the receiver's, the smaller (0: none) */
  /* Rail failover (src/proto/failover.c): local rails this comm gave up on
   * (a write or control message failed on them), the peer's rails it says
   * are down, and whether a write may come late or twice (some rail failed:
   * an original on a dead link can land after its re-send). */
  uint32_t rails_bad, peer_rails_down;
  uint32_t probe_wait;  /* rails whose probe this round it has not answered yet */
  /* The fence (src/proto/fence.c). Send: the last round asked and when;
   * asked again while stripes stay unsure. Receive: the last answer and
   * when; answered again while a receive stays held (the answer or a
   * SETTLED may be lost with a link, or refused). */
  uint32_t fence_round;
  uint64_t fence_ms;
  uint8_t fence_rail;
  bool settle_due; /* send: a request waits to tell the peer SETTLED */
  bool failover_seen;
  unsigned ctrl_cursor, sched_cursor;
  int ops_in_flight;    /* posted operations whose completion is pending */
  uint16_t ctrl_on_rail[SRD_MAX_RAILS]; /* control messages posted on each local rail, not completed */
  int reqs_in_flight;
  /* Requests whose stripes or clear-to-send the provider refused for now
   * (-FI_EAGAIN), in order; while there are some the comm is on the device's
   * ring of pending comms (pend_next: NULL when off it). */
  struct srd_req *pending_head, *pending_tail;
  struct srd_comm *pend_next, *pend_prev;
  uint64_t last_heard_ms, last_ping_ms;
  bool ping_refused;     /* the provider refused the last probe (try later) */
  uint64_t last_wait_ms; /* last isend that found no clear-to-send */
  uint64_t peer_gone_ms; /* shm: when a scan first found the peer's process gone */
#ifdef SRD_HOP_STATS
  uint64_t stat_wait_ns; /* first isend without a clear-to-send (hop statistics) */
#endif
  /* Messages by path, logged at INFO when the comm closes: which path a
   * message took is otherwise invisible (users tuning NCCL_SRD_EAGER_MAX,
   * tests checking the eager boundary and striping). */
  struct {
    uint64_t eager;      /* inline messages sent or received */
    uint64_t rendezvous; /* messages written into the peer's buffer after its clear-to-send */
    uint64_t writes;     /* RMA writes (stripes) posted or received */
    uint64_t on_lane0;   /* of the writes posted, those on lane 0's paths (sender) */
    uint64_t resent;     /* stripes re-sent on another rail (sender) */
    uint64_t dropped;    /* second copies and late writes ignored (receiver) */
    uint64_t by_lane;    /* requests completed on a lane thread (small messages never are) */
  } traffic;
  struct srd_req *reqs[SRD_REQS_PER_COMM]; /* requests in use, by slot */
  uint32_t next_seq;    /* the next message's sequence */
  /* handshake */
  uint64_t cookie;
  uint64_t deadline_ms;
  uint64_t answer_since_ms; /* accept: when its answer was first tried */
  enum srd_answer_state answer; /* accept: the answer's send; the comm is handed out once delivered */
  const void *connect_key;
  fi_addr_t listener_addr;  /* rail 0 AV entry of the listener, for the hello */
  uint32_t listener_id;
  bool hello_sent;
  uint64_t hello_next_ms;   /* unanswered by then: the hello is sent again (the listener may have dropped it) */
  uint32_t hello_gap_ms;
  struct srd_comm *next_connecting;
  struct srd_early_msg *early;
  int nearly;           /* messages on early */
  struct srd_comm *next_closed; /* on the device's list of closed comms */
  struct srd_rma_peer *rma; /* the one-sided group's peer this comm carries (include/srd/rma.h), or NULL */
};

struct srd_send_comm {
  struct srd_comm base;
  bool asked;           /* asked for asked_seq's clear-to-send (RTS) */
  uint32_t asked_seq;
  struct srd_cts_rec *cur;
  struct srd_cts_rec *cts[SRD_CTS_RECORDS]; /* NULL: free */
  /* The end of the latest clear-to-send (0 before any): eager messages may
   * take the SRD_EAGER_WINDOW sequences past it. A sender beyond waits for
   * the next clear-to-send (the receiver sends one every half window). */
  uint32_t cts_end;
  int32_t sent_tag[SRD_SENT_TAGS];
};

struct srd_recv_comm {
  struct srd_comm base;
  struct srd_unexpected *unexpected;
  int nunexpected;      /* eager messages kept before their receive */
  /* Receives post no clear-to-send until the sender asks (RTS): set once
   * SRD_CTS_UNUSED_MAX clear-to-sends in a row were not needed (their
   * messages came eagerly), cleared by the next RTS. Saves a control message
   * per small message; costs a large message after small ones one more trip.
   * A write into a cleared receive (a clear-to-send that was needed) starts
   * the count again, so traffic that mixes small and large messages keeps
   * its clear-to-sends ahead of the large ones. */
  bool cts_on_request;
  uint8_t cts_unused;   /* clear-to-sends in a row whose message came eagerly */
  uint32_t told_seq;    /* the end of the last clear-to-send posted: the sender's eager window starts there */
  bool asked;           /* an RTS named asked_seq before its receive was posted: */
  uint32_t asked_seq;   /* that receive posts its clear-to-send whatever cts_on_request says */
  int cleared;          /* receives whose clear-to-send went out and that are not complete: the peer may write */
  uint8_t slot_uses[SRD_REQS_PER_COMM]; /* a late write cannot name a slot's next request */
  /* Whether the use of each slot before the current one posted its
   * clear-to-send: a write naming that use is a late copy (failover), not
   * nonsense. */
  bool prev_offered[SRD_REQS_PER_COMM];
};

/* A receive slot's tag in the immediate data: the slot and how many uses of
 * it came before (modulo what the byte holds). */
static inline uint8_t srd_slot_tag(uint32_t slot, unsigned uses) {
  return (uint8_t)(slot | uses << SRD_SLOT_BITS);
}

/* Serial-number comparison: sequences wrap at 2^32. */
static inline bool srd_seq_before(uint32_t a, uint32_t b) { return (int32_t)(a - b) < 0; }
static inline struct srd_send_comm *srd_send_comm(struct srd_comm *c) { return (struct srd_send_comm *)c; }
static inline struct srd_recv_comm *srd_recv_comm(struct srd_comm *c) { return (struct srd_recv_comm *)c; }

/* A control message that overtook the handshake's answer (the transport is
 * unordered): kept raw and replayed once the comm knows its peer. */
struct srd_early_msg {
  struct srd_early_msg *next;
  struct srd_rail *rail; /* where it arrived, and from whom: checked at replay */
  fi_addr_t src;
  size_t len;
  char data[];
};

#define SRD_LANE_RING 8 /* reaped batches a lane holds at most */

/* The progress thread of one rail (lane). */
struct srd_lane {
  struct srd_dev *dev;
  struct srd_rail *rail;
  pthread_t thread;
  bool running;         /* created and not yet joined */
  atomic_bool paused;   /* its rail is down: neither reap nor post (see struct srd_rail_health) */
  atomic_bool drain;    /* its rail just went down: reap it once more first (srd_dev_drain_rail) */
  /* Batches the thread reaped, dispatched in order by the device lock's
   * holder (srd_dev_deliver_lanes: the thread itself when the lock was
   * free), so the thread never waits for the lock to hand over a
   * completion. One reaper, one dispatcher at a time. */
  atomic_uint reaped;    /* batches put in the ring (the thread) */
  atomic_uint delivered; /* batches dispatched from it (dev->lock held) */
  unsigned ring_cap;     /* slots in use: SRD_LANE_RING, 1 in the reorder test mode; a power of 2 */
  struct srd_rail_batch ring[SRD_LANE_RING];
};

/* What the protocol asks of a rail: the seam under proto. srd_dev_init sets
 * the rail itself (src/rail/rail.c); unit tests give a fake. Opening,
 * closing and the lanes' reaping use the rail directly. */
struct srd_rail_ops {
  int (*av_insert)(struct srd_rail *rail, const void *name, fi_addr_t *addr);
  void (*av_remove)(struct srd_rail *rail, fi_addr_t addr);
  struct srd_rail_buf *(*get_send_buf)(struct srd_rail *rail);
  void (*put_send_buf)(struct srd_rail_buf *buf);
  int (*send)(struct srd_rail *rail, int ep, struct srd_rail_buf *buf, size_t len, fi_addr_t dest);
  int (*write)(struct srd_rail *rail, int ep, const void *src, size_t len, void *desc, uint32_t imm, fi_addr_t dest,
               uint64_t raddr, uint64_t key, struct srd_op *op);
  void (*queue_write)(struct srd_rail *rail, struct srd_rail_write *w);
  void *(*mr_desc)(struct fid_mr *mr);
  uint64_t (*mr_key)(struct fid_mr *mr);
  int (*reg)(struct srd_rail *rail, void *base, size_t len, uint64_t access, int cuda_dev, int dmabuf_fd,
             uint64_t dmabuf_offset, struct fid_mr **mr);
  void (*mr_close)(struct fid_mr *mr);
  int (*poll)(struct srd_rail *rail, int max);
  int (*link_down)(const struct srd_rail *rail);
  int (*flush_read)(struct srd_rail *rail, uint64_t raddr, uint64_t key, struct srd_op *op);
  bool (*peer_refused)(struct srd_rail *rail, fi_addr_t addr, uint64_t now_ms, uint64_t every_ms);
  int (*read)(struct srd_rail *rail, int ep, void *dst, size_t len, void *desc, fi_addr_t src, uint64_t raddr,
              uint64_t key, struct srd_op *op);
  int (*loopback_read)(struct srd_rail *rail, void *dst, size_t len, void *desc, uint64_t raddr, uint64_t key,
                       struct srd_op *op);
  int (*loopback_write)(struct srd_rail *rail, const void *src, size_t len, void *desc, uint64_t raddr, uint64_t key,
                        struct srd_op *op);
};
extern const struct srd_rail_ops srd_rail_ops_fabric;

/* A rail's health as the device sees it (src/proto/failover.c). A rail goes
 * down when its link does (kernel interfaces), when its CQ cannot be read,
 * or (without failover) when anything fails on it. A down rail is not
 * polled until its link has been up for the hold-down: over kernel TCP the
 * bytes of a write cut off by the link failure are still in the sockets and
 * land when the link returns. A rail the peer's writes were cut off on is
 * tainted: where new keys stop those writes (efa) its registrations are made
 * again at once, elsewhere it stays out for good. It rejoins once every
 * comm's peer answered a probe on it, and, if tainted, no clear-to-send
 * naming an old key is open. */
struct srd_rail_health {
  bool down;
  bool tainted;
  const char *out_for_good; /* tainted and cannot rejoin: why */
  bool told_out;          /* its link came back and we said why it stays out */
  char why[96];
  uint64_t down_ms;
  uint64_t link_back_ms;  /* the link is up again since (0: not yet) */
  bool polled;            /* down, link back, hold-down over: polled for probes */
  bool probing;
  uint32_t round;         /* probe round; answers echo it */
  int answers_due;        /* comms probed this round and not answered yet */
  int probes_out;         /* probe sends (any round) the provider has not completed */
  int probes_failed;      /* probes of this round the provider failed */
  uint64_t probe_ms;
  bool drain;             /* just went down: the caller reaps it once more (srd_dev_drain_rail) */
};

struct srd_dev {
  pthread_mutex_t lock; /* one owner of every rail, comm and request of the device */
  int index;
  bool open;
  int nrails, neps, npaths;
  int nnics;            /* NICs of the group; rail i is lane i / nnics of NIC i % nnics */
  int lanes_per_nic;    /* lane 0 polled by the caller; the others get threads */
  int inline_paths;     /* lane 0's paths (the first nnics rails): control and small messages */
  bool threaded;        /* lane threads poll the CQs of lanes 1..; callers poll lane 0 */
  bool want_lanes;      /* a large message went by: start the threads at the next progress */
  bool lanes_failed;    /* a thread did not start: the caller keeps polling every lane */
  bool from_lane;       /* what is dispatched now was reaped by a lane thread (src/proto/lanes.c) */
  unsigned lane_polls;  /* caller's polls of lane rails before their threads run */
  struct srd_rail_handlers handlers; /* what the rails call with a completion: the comm layer's dispatch */
  const struct srd_rail_ops *rail_ops;
  struct srd_log_limit foreign_log; /* warnings about forged, malformed or misdirected messages and writes */
  struct srd_rail *rails;
  struct srd_rail_health health[SRD_MAX_RAILS];
  bool failover;          /* NCCL_SRD_FAILOVER, and more than one NIC */
  bool no_link_state;     /* the rails are no kernel interfaces (efa, shm): only CQ errors take them down */
  uint64_t holddown_ms;   /* NCCL_SRD_RAIL_HOLDDOWN_MS */
  struct srd_lane *lanes; /* [nrails] when threaded */
  pid_t lanes_pid;        /* the process that started them */
  atomic_bool stop;       /* lanes end */
  atomic_uint activity;   /* bumped by every entry point: keeps lanes from sleeping */
  atomic_int sleepers;    /* lanes waiting on wake */
  atomic_int lanes_waiting; /* lanes waiting for lock with completions to dispatch: test and isend step aside */
  pthread_mutex_t wake_lock;
  pthread_cond_t wake;
  const struct srd_nic_list *nics;
  struct srd_device_group group;
  struct srd_mr_cache mrs;
  struct srd_sched_params sched;
  size_t eager_max;     /* NCCL_SRD_EAGER_MAX, cut to the rails' largest send (srd_dev_eager_fit) */
  char transport[SRD_TRANSPORT_MAX]; /* srd_transport_name: named in our handles, checked in theirs */
  struct srd_gdr_decision gdr; /* GPU memory: offered, dma-buf, flush (decided at init) */
  bool host_local;      /* shm: peers are processes of this host */
  /* The comm table, allocated at open: comms[index] and its generation,
   * free indexes on a stack (connect costs the same with 60,000 comms as with
   * one); comms_end bounds the scans. */
  struct srd_comm **comms;
  struct srd_comm **by_write_id; /* receive comms by the write id their peer's writes carry */
  uint32_t *write_id_retired_s;  /* when each write id was last given back (srd_now_ms / 1000 + 1; 0: never) */
  uint16_t *gen;
  uint32_t *free_index;
  int nfree, comms_end;
  int ncomms;
  struct srd_req *free_reqs;      /* the request pool */
  struct srd_cts_rec *free_cts;   /* the clear-to-send pool */
  struct srd_comm *free_comms[2]; /* closed comms by direction (is_send), linked by next_closed */
  struct srd_listener *free_listeners; /* closed listeners */
  struct srd_listener *listeners;
  struct srd_comm *connecting;
  uint32_t next_listener_id;
  uint64_t listener_key; /* listeners' cookies derive from it and their id (handshake.c) */
  uint64_t last_scan_ms;
  /* Warnings about silent peers (src/proto/probe.c): when the next may be
   * logged, the gap after it (doubling while peers stay silent), whether the
   * last scan found any. */
  uint64_t silent_warn_next_ms, silent_warn_gap_ms;
  bool silent_warned;
  /* The ring of comms with refused work (srd_proto_post_pending): the comm
   * whose turn is next, and how many are on it. */
  struct srd_comm *pending;
  int npending;
  struct srd_resend *resends; /* re-sent stripes the provider holds */
  struct srd_rail_mrs *regs;  /* every registration (src/proto/regs.c) */
  /* Closed comms the provider still holds operations of: freed when those
   * complete, or when the device closes. */
  struct srd_comm *closed;
  /* Peers (rail 0 address and process) that did not say they took what a
   * closing send comm sent within NCCL_SRD_CLOSE_TIMEOUT_MS: a peer that
   * is not calling in (busy before its own teardown) would cost that wait
   * once per comm; later closes to it do not wait (src/proto/bye.c). */
  struct {
    fi_addr_t addr;
    uint32_t pid;
    bool set;
  } quiet_peers[SRD_QUIET_PEERS];
  unsigned quiet_next;
};

/* Access classes of the registration cache: what a buffer is registered
 * for. A receive buffer is remotely writable; a send buffer is not reachable
 * from outside. */
enum srd_mr_class { SRD_MR_SEND = 1, SRD_MR_RECV = 2, SRD_MR_RMA = 4 };

/* FI_* access of one rail's registration of a buffer of class cls on CUDA
 * device cuda_dev (-1: host memory), or 0 where that rail needs none. A host
 * send buffer is registered only where the provider needs a descriptor
 * (FI_MR_LOCAL). GPU memory always is: the descriptor is how the provider
 * knows the memory's interface (FI_MR_HMEM), and without it shm copied a GPU
 * source with memcpy and crashed. A device that flushes reads a byte of each
 * GPU receive buffer back through its own loopback address (flush.c). */
/* A rail whose provider may turn our write into the peer's RDMA read of the
 * source (sends_read: efa's emulated write, long-read protocol) registers
 * send buffers remotely readable too, and only there. */
static inline uint64_t srd_mr_rail_access(unsigned cls, int cuda_dev, bool mr_local, bool flush, bool sends_read) {
  /* A one-sided window: peers write and read it, we write and read from it. */
  if (cls == SRD_MR_RMA) return FI_WRITE | FI_READ | FI_REMOTE_WRITE | FI_REMOTE_READ;
  if (cls == SRD_MR_SEND) return mr_local || cuda_dev >= 0 ? FI_WRITE | (sends_read ? FI_REMOTE_READ : 0) : 0;
  return FI_REMOTE_WRITE | (cuda_dev >= 0 && flush ? FI_REMOTE_READ : 0);
}

/* Per-rail registration behind one srd_mr. mr[i] is NULL where rail i needs
 * no registration (srd_mr_rail_access 0). On the device's list (dev->regs)
 * with what it was made from, so that a rail's can be made again. */
struct srd_rail_mrs {
  int nrails;
  struct fid_mr *mr[SRD_MAX_RAILS];
  void *base;
  size_t len;
  unsigned access; /* enum srd_mr_class */
  int cuda_dev;
  bool dmabuf;     /* from a dma-buf fd, which may be closed since: cannot be made again */
  struct srd_rail_mrs *prev, *next;
};

/* The registration cache's reg/dereg for a device (src/proto/regs.c): every
 * rail that needs it; they take dev->lock. */
int srd_dev_reg(void *dev, void *base, size_t len, int type, int cuda_dev, unsigned access, int dmabuf_fd,
                uint64_t offset, void **handle);
void srd_dev_dereg(void *dev, void *handle);
/* Every registration on rail l again under a new key, the old ones closed:
 * a write that still carries an old key is refused by the provider. Lock
 * held. SRD_ERR_SYSTEM (logged) when one could not be made again (some keep
 * their old key then). */
int srd_dev_rekey_rail(struct srd_dev *dev, int l);

/* The eager size that fits one send of max_send bytes with its header:
 * eager_max, or less; SIZE_MAX when not even a hello or clear-to-send fits. */
size_t srd_dev_eager_fit(size_t eager_max, size_t max_send);

/* Device lifetime (src/proto/dev.c). Caller holds no lock. srd_dev_init once
 * before the first open, with the handlers of incoming completions (their arg
 * becomes the device); srd_dev_open starts the lane threads it asks for. */
void srd_dev_init(struct srd_dev *dev, int index, const struct srd_rail_handlers *h);
/* SRD_OK, or SRD_ERR_SYSTEM when the rails do not open (logged). */
int srd_dev_open(struct srd_dev *dev);
void srd_dev_close(struct srd_dev *dev);
/* Close, then release what srd_dev_init made. */
void srd_dev_fini(struct srd_dev *dev);
/* Stop and join the lane threads (bounded wait). Returns false when one did
 * not end (its rails must then stay open) or when a caller is inside the
 * device (the rings it may be dispatching stay). Caller holds no lock. */
bool srd_dev_stop_lanes(struct srd_dev *dev);
/* Whether a lane drops a write queued for it that its provider keeps
 * refusing: only once the comm it serves failed (a slow peer's stay). */
bool srd_queued_write_abandoned(const struct srd_rail_write *w);
/* An entry point was called: idle lanes wake and poll. No lock needed. */
void srd_dev_kick(struct srd_dev *dev);
/* One step of a bounded wait inside a call (lock held): progress, and give the
 * lanes a chance at the lock. */
void srd_dev_wait_step(struct srd_dev *dev);
/* The comm table and the pools (src/proto/comms.c), made at open and freed
 * at close. srd_dev_comms_init returns SRD_OK or SRD_ERR_SYSTEM. */
int srd_dev_comms_init(struct srd_dev *dev);
void srd_dev_comms_fini(struct srd_dev *dev);
struct srd_comm *srd_dev_comm_by_id(struct srd_dev *dev, uint32_t id);
/* What an idle comm of a direction holds (its requests and clear-to-send
 * records come from the device's pools when used). */
size_t srd_comm_size(bool is_send);
struct srd_comm *srd_comm_alloc(struct srd_dev *dev, bool is_send);
/* Back to the device's pool (see SRD_COMM_MAGIC). */
void srd_comm_free(struct srd_comm *c);
/* Is c a comm NCCL may use in this direction (not closed)? Warns when not.
 * c must be NULL or a pointer this plugin gave out. */
bool srd_comm_usable(const struct srd_comm *c, bool is_send);
/* Take the comm out of the device (no message reaches it) and keep it on the
 * closed list until its operations complete. */
void srd_comm_retire(struct srd_comm *c);
/* Fail the comm with an error (enum srd_err) kept for every later call. */
void srd_comm_fail(struct srd_comm *c, int result, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Insert the peer's paths; builds c->peer. SRD_OK or the comm's error. */
int srd_comm_set_peer(struct srd_comm *c, const struct srd_msg_peer *p);

/* Progress: dispatch what the lanes reaped, poll the caller's rails, post
 * what waits, probe silent peers. Lock held. */
void srd_dev_progress(struct srd_dev *dev);
/* Dispatch the batches the lane threads reaped (lock held). */
void srd_dev_deliver_lanes(struct srd_dev *dev);
/* Everything but the CQs: post what waits, and the periodic checks. */
void srd_dev_progress_without_cqs(struct srd_dev *dev);
/* The periodic checks (src/proto/probe.c): comms that wait on a silent peer
 * probe it. */
void srd_dev_probe_silent_peers(struct srd_dev *dev, uint64_t now);
/* Rail failover (src/proto/failover.c). srd_dev_check_rails: rails that lost
 * their link or CQ go down; rails whose link is back rejoin after the
 * hold-down and a probe. Without failover a failed rail fails every comm. */
void srd_dev_failover_init(struct srd_dev *dev);
void srd_dev_check_rails(struct srd_dev *dev, uint64_t now);
/* Probe answers may never come (lost with a connection, a peer not polling
 * the rail yet): after this long a round failed, and another hold-down follows. */
#define SRD_PROBE_ROUND_MS 2000
void srd_dev_rail_down(struct srd_dev *dev, int l, const char *why);
/* A rail that went down is reaped once more (lock held), by its lane's
 * thread or the caller, before it stops being polled: its provider may hold
 * completions of writes it already acknowledged to the peer, which then
 * counts them as landed and never writes them again. Not while its link is
 * up: there the reap could also land the rest of a write cut off in its
 * middle (DESIGN.md, "Rail failover"). */
void srd_dev_drain_rail(struct srd_dev *dev, int l);
/* Is rail l polled (up, or down with its link back and being probed)? */
static inline bool srd_rail_polled(const struct srd_dev *dev, int l) {
  return !dev->health[l].down || dev->health[l].polled;
}
/* The paths c may use now (bit per path): healthy local rails whose peer
 * rail is not down. */
uint64_t srd_comm_usable_paths(const struct srd_comm *c);
/* Something c posted on local rail l failed: c stops using l (and tells the
 * peer); without failover, or with no rail left, c fails. */
void srd_comm_rail_failed(struct srd_comm *c, int l, const char *why);
/* c has no path left: it fails with an error naming every rail and why it
 * is gone. */
void srd_comm_fail_no_rail(struct srd_comm *c);
/* Why c may not use its rail l (a down rail's reason, its own failure
 * there, or the peer's rail). */
const char *srd_comm_rail_gone_why(const struct srd_comm *c, int l);
/* The peer says its rail r went down or came back. */
void srd_proto_on_rail(struct srd_comm *c, const struct srd_msg_rail *m);
/* Probe request of round `round` to c's peer from rail l (rejoin); a send
 * the provider fails counts in the round's probes_failed. */
int srd_comm_probe_rail(struct srd_comm *c, int l, uint32_t round);
/* Answer a probe that came on rail l from src, from rail l back to src. */
int srd_comm_answer_probe(struct srd_comm *c, int l, fi_addr_t src, const struct srd_msg_probe *m);
/* A probe or an answer for c arrived on rail l from src. */
void srd_proto_on_probe(struct srd_comm *c, int l, fi_addr_t src, const struct srd_msg_probe *m);
/* Free closed comms whose last operation completed; all of them when the
 * device's rails are gone (no completion can arrive any more). */
void srd_dev_free_closed(struct srd_dev *dev, bool all);
/* Start one progress thread per rail of lanes 1.. (src/proto/lanes.c);
 * locked: the caller holds dev->lock (released while a failed start stops
 * the threads it made). */
void srd_dev_start_lanes(struct srd_dev *dev, bool locked);
/* A message of at least the stripe threshold went by (lock held): start the
 * lanes' threads, if the device has lanes, at the end of this progress step. */
void srd_dev_want_lanes(struct srd_dev *dev);
/* Does the caller's thread poll rail i (no lane thread reaps it)? */
static inline bool srd_dev_caller_polls(const struct srd_dev *dev, int i) { return !dev->threaded || i < dev->nnics; }

/* Control messages to the peer of c (src/proto/ctrl.c). The encoder writes
 * the message into buf (cap bytes) and returns its length, 0 when it does not
 * fit. dest: FI_ADDR_UNSPEC for the peer on the next path, or an explicit
 * address (the handshake, before the peer is known: rail 0, endpoint 0).
 * Returns SRD_OK (posted), SRD_AGAIN (no buffer free or the provider's queue
 * is full: nothing was sent) or the error the comm failed with. req, when
 * given, completes with the send (eager data). */
typedef size_t (*srd_ctrl_encoder)(void *buf, size_t cap, const void *arg);
int srd_comm_send_ctrl(struct srd_comm *c, fi_addr_t dest, srd_ctrl_encoder encode, const void *arg,
                       struct srd_req *req);
/* The listener's answer (rail 0, endpoint 0, to dest): its completion sets
 * c->answer (and on failure the provider's text in c->error) without failing
 * the comm, which accept() then drops. SRD_OK, SRD_AGAIN, or -FI_* refused. */
int srd_comm_send_answer(struct srd_comm *c, fi_addr_t dest, srd_ctrl_encoder encode, const void *arg);

/* Data path (src/proto/send.c, recv.c). Lock held. Results are enum srd_err;
 * isend answers SRD_AGAIN (no request) until the peer's clear-to-send or a
 * buffer is there. */
int srd_proto_isend(struct srd_comm *c, const void *data, size_t size, int tag, struct srd_mr_ref *mr,
                    struct srd_req **req);
int srd_proto_irecv(struct srd_comm *c, int n, void **data, const size_t *sizes, const int *tags,
                    struct srd_mr_ref **mrs, struct srd_req **req);
void srd_proto_on_cts(struct srd_comm *c, const struct srd_msg_cts *m);
void srd_proto_on_eager(struct srd_comm *c, const struct srd_msg_eager *m);
void srd_proto_on_trunc(struct srd_comm *c, const struct srd_msg_trunc *m);
void srd_proto_on_write(struct srd_comm *c, struct srd_imm imm, size_t len);
/* Failover: hold the stripes of c's sends that rail l carried and that have
 * not completed (true when there were any): they are unsure until the
 * peer's answer to fence round `round` (src/proto/fence.c). */
bool srd_proto_hold_stripes(struct srd_comm *c, int l, uint32_t round);
/* Post what r has to post, or queue it. */
void srd_proto_resend(struct srd_req *r);
/* Stripes of r known to have landed (completed, or the receive completed). */
void srd_proto_stripes_landed(struct srd_req *r, uint32_t mask);
/* A receive comm posts again the clear-to-sends no write has answered yet
 * (one may sit on the dead link). */
void srd_proto_repost_cts(struct srd_comm *c);
/* The fence (src/proto/fence.c). Receiver: the sender's stale rail is
 * tainted by the caller; hold every open receive and answer with them.
 * Sender: the answer re-sends held stripes of open receives only; SETTLED
 * tells the peer that no copy for a held receive is in flight any more. */
void srd_proto_answer_fence(struct srd_comm *c, uint32_t round, int rail);
void srd_proto_on_fenced(struct srd_comm *c, const struct srd_msg_fenced *m);
void srd_proto_settle(struct srd_comm *c);
void srd_proto_on_settled(struct srd_comm *c, const struct srd_msg_settled *m);
/* Send: ask the peer to fence rail l (a stale notice of round fence_round). */
void srd_proto_ask_fence(struct srd_comm *c, int l);
/* Ask or answer again what may have been lost (every scan of the rails). */
void srd_proto_fence_timers(struct srd_comm *c, uint64_t now);
/* A receive all of whose entries completed finishes, unless a fence holds it. */
void srd_recv_finish(struct srd_req *r);
/* Free the re-sent stripes' descriptors (device close, rails closed). */
void srd_dev_free_resends(struct srd_dev *dev);
void srd_proto_on_rts(struct srd_comm *c, const struct srd_msg_rts *m);
/* A send comm moved off a rail: a request to send that rail carried may be lost. */
void srd_proto_reask_cts(struct srd_comm *c);
/* Close notices (src/proto/bye.c). on_bye: the peer closed; a send comm
 * stops writing and answers with its own notice once its writes are over. */
void srd_proto_on_bye(struct srd_comm *c, const struct srd_msg_bye *m);
/* Post our notice with flags (SRD_BYE_DRAINED: a send comm whose writes
 * are over; SRD_BYE_TAKEN: a receive comm that took all its closed peer
 * sent). SRD_OK, SRD_AGAIN or the comm's error. */
int srd_proto_send_bye(struct srd_comm *c, uint8_t flags);
/* A closing receive comm's notice, posted once; while the provider refuses
 * it (backpressure), posted again at the next call (the caller's wait is
 * bounded by NCCL_SRD_CLOSE_TIMEOUT_MS). A post that fails outright cannot
 * reach the peer: the comm then waits for nothing (peer_lost). */
void srd_proto_notify_peer(struct srd_comm *c);
/* A send comm that owes its peer the drained notice sends it once none of
 * its writes is in flight any more; a receive comm whose peer closed
 * answers once it has taken every message the peer says it sent (the
 * sender's close waits for that: tcp drops what a peer had not read when
 * the connection breaks, and the sender's process may exit next). */
void srd_proto_bye_progress(struct srd_comm *c);
/* A closing send comm still waits for its receiver's SRD_BYE_TAKEN. */
bool srd_proto_awaits_taken(const struct srd_comm *c);
/* A closing receive comm sent its notice and its peer has not said it
 * closed: it waits for that notice, so that the process does not exit with
 * it unread (tcp resets a connection closed with data unread, and the reset
 * discards what this side sent that the peer had not read yet: the notice). */
bool srd_proto_awaits_notice(const struct srd_comm *c);
/* The receiver of c left an earlier close's wait unanswered (and has not
 * answered one since): c's close does not wait for it. */
bool srd_proto_peer_quiet(const struct srd_comm *c);
/* c's close waited out its bound for the answer: remember its peer. */
void srd_proto_note_quiet_peer(struct srd_comm *c);
/* Can a write the peer was cleared to do still land in this receive comm's
 * buffers? */
bool srd_proto_peer_may_write(const struct srd_comm *c);
/* NCCL deregisters a buffer (and frees it) before it closes the comm, also
 * mid-transfer (an abort). Every receive comm of the device with an
 * unfinished receive into the handle mr fails and tells its peer to stop
 * writing; every unfinished send from mr fails and posts nothing more. This
 * waits (bounded by NCCL_SRD_CLOSE_TIMEOUT_MS) until the writes the peers
 * completed have landed and the provider is done with every write it was
 * given from mr (a provider that queued one reads the registration when it
 * posts it). false: writes from mr are still with the provider at the
 * bound; the registration must stay open. mr is compared, never
 * dereferenced. Lock held. */
bool srd_proto_quiesce(struct srd_dev *dev, const struct srd_mr_ref *mr);
/* Make the data received into GPU buffers (NCCL's iflush) visible to the GPU
 * (src/proto/flush.c). *req NULL: nothing to wait for (the device needs no
 * flush, no buffer has bytes, or the driver flushed at once); otherwise a
 * request that completes when a loopback read on every rail has. */
int srd_proto_iflush(struct srd_comm *c, int n, void **data, const int *sizes, struct srd_mr_ref **mrs,
                     struct srd_req **req);
void srd_proto_post_pending(struct srd_dev *dev);
/* Post the clear-to-send of a receive, or queue it (SRD_AGAIN) when the
 * provider is full. */
int srd_proto_post_cts(struct srd_req *r);
/* A request from the pool in a free slot of c; NULL when c has none free or
 * memory runs out. */
struct srd_req *srd_req_get(struct srd_comm *c, enum srd_req_kind kind);
/* Give every request of a freed comm back to the pool. */
void srd_req_put_all(struct srd_comm *c);
/* Free the pools (device close). */
void srd_pools_free(struct srd_dev *dev);
/* A send told its peer SETTLED: its slot is free once released and idle. */
void srd_req_settled(struct srd_req *r);
/* NCCL saw the request done: recycle it once no operation names it. */
void srd_req_release(struct srd_req *r);
void srd_req_finish(struct srd_req *r, int result);
/* One posted operation naming r completed. */
void srd_req_op_done(struct srd_req *r);
void srd_pending_add(struct srd_req *r);
void srd_pending_remove(struct srd_req *r);

#endif
