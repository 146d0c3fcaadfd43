/* One-sided RMA (NCCL's ncclRma table): puts, puts with a signal, signals
 * alone and gets between the ranks of a collective group, on windows every
 * rank registered (DESIGN.md, "One-sided RMA").
 *
 * A group (struct srd_rma_coll) holds, per peer rank, one send comm and one
 * receive comm of the two-sided protocol: their paths, tokens and close
 * handshake carry the one-sided traffic too. A put is striped over the send
 * comm's paths like a message, each stripe an RDMA write into the peer's
 * window whose immediate data names the peer's receive comm, the op's
 * sequence and the stripe (wire.h, srd_rma_imm). A signal travels as a
 * control message with the op's sequence and stripe count. The target counts
 * stripes per op and applies signals in op order, each once every stripe of
 * its op and every earlier op from that peer has landed: a signal never
 * overtakes data, and the origin never fences. The target acknowledges
 * applied ops every SRD_RMA_ACK_EVERY; the origin keeps at most
 * SRD_RMA_SEQ_WINDOW ops unacknowledged and queues the rest (NCCL is never
 * refused). Signals into GPU windows go by a loopback RDMA write where a NIC
 * writes GPU memory (efa: src/proto/rma_nic.c), else through a CUDA stream
 * of the group's (shm: src/proto/rma_gpu.c), which also copies ops to
 * ourselves on GPU memory. Everything runs under dev->lock. */
#ifndef SRD_RMA_H
#define SRD_RMA_H

#include "srd/cuda.h"
#include "srd/proto.h"

#define SRD_RMA_COLL_MAGIC 0x5352444d41434f31ull /* "SRDMACO1" */
#define SRD_RMA_ACK_EVERY 32

/* A window as its owner registered it, and what every peer told of its own
 * window of the same registration (the same index on every rank). */
struct srd_rma_remote {
  uint64_t addr, len;
  uint64_t key[SRD_MAX_RAILS]; /* by the peer's rail */
  int nkeys;
};

/* How NCCL registered a window (its mrFlags, translated by the comm layer). */
enum srd_rma_win_flags {
  SRD_RMA_WIN_FORCE_SO = 1,    /* strongly ordered: every window is, recorded for the logs */
  SRD_RMA_WIN_NEVER_RESET = 2, /* signal words only we change: a host shadow holds their value */
};

struct srd_rma_win {
  uint64_t magic; /* SRD_RMA_COLL_MAGIC while registered */
  struct srd_rma_coll *coll;
  uint32_t index;
  char *base;
  size_t len;
  int cuda_dev;   /* the CUDA device owning the window, -1 host memory */
  unsigned flags; /* enum srd_rma_win_flags */
  struct srd_cuda_stream *stream; /* GPU windows: the group's stream for cuda_dev */
  uint64_t *shadow; /* NEVER_RESET GPU windows: each word's value, made at the first signal */
  bool nic_signals; /* signals written by a loopback write (rma_nic.c) */
  uint64_t *pending; /* nic_signals: per word, what signals added and no write carries yet */
  uint8_t *queued;   /* nic_signals: per word, 1 while it waits in the group's queue */
  struct srd_rail_mrs *mrs; /* exactly [base, base+len), remote write and read */
  struct srd_rma_remote *remote; /* [nranks] */
};

enum srd_rma_kind { SRD_RMA_PUT = 1, SRD_RMA_GET };

struct srd_rma_op {
  struct srd_rma_coll *coll;
  struct srd_rma_peer *peer;
  enum srd_rma_kind kind;
  bool in_use, done;
  int result;
  bool sequenced; /* a put or signal: takes a sequence, counted by the target */
  uint32_t seq;
  char *local;
  size_t size;
  struct srd_rma_win *lwin; /* the local window (source of a put, destination of a get) */
  uint64_t raddr;
  const struct srd_rma_remote *remote;
  bool has_signal, signal_sent;
  struct srd_msg_rma_signal signal;
  int nstripes, posted, completed;
  int outstanding; /* posted operations that still name the op */
  bool released;   /* NCCL saw it done: back to the pool once outstanding is 0 */
  /* A self op on GPU memory runs on a stream: done when its event is.
   * Before stripes: op_get clears everything up to there. */
  struct srd_cuda_stream *stream;
  srd_cuevent event;
  struct srd_stripe stripes[SRD_MAX_STRIPES];
  struct srd_rail_write w[SRD_MAX_STRIPES];
  struct srd_rma_op *next; /* the peer's queue, or the pool */
  struct srd_rma_op *all;  /* every op the group made, freed with it */
};

/* The target's view of one op of a peer, by sequence modulo the window. */
struct srd_rma_slot {
  bool known;      /* a stripe or the signal arrived */
  bool signal;     /* a signal belongs to the op */
  bool signal_in;  /* ... and arrived */
  uint8_t nstripes;
  uint32_t mask;   /* stripes landed, by index */
  struct srd_msg_rma_signal sig;
};

struct srd_rma_peer {
  struct srd_rma_coll *coll;
  int rank;
  struct srd_comm *send, *recv; /* NULL for ourselves */
  /* origin */
  uint32_t next_seq, acked;
  struct srd_rma_op *qhead, *qtail; /* ops not yet fully posted, in order */
  uint16_t stripes_on_rail[SRD_MAX_RAILS]; /* writes and reads posted on each local rail, not completed */
  /* target */
  uint32_t next_apply, acked_sent;
  bool ack_due;
  struct srd_rma_slot slots[SRD_RMA_SEQ_WINDOW];
};

struct srd_rma_coll {
  uint64_t magic;
  struct srd_dev *dev;
  int nranks, rank;
  struct srd_rma_peer *peers; /* [nranks] */
  struct srd_rma_win **wins;  /* by registration order; NULL once deregistered */
  int nwins, cap_wins;
  struct srd_rma_op *free_ops, *all_ops;
  struct srd_cuda_stream **streams; /* [nstreams]: by CUDA device, opened by the first window there */
  int nstreams;
  struct srd_rma_nic *nic; /* signal words the NIC writes: made at the first such signal */
  int result; /* first error (enum srd_err), kept for queryLastError */
};

/* Group lifetime; the comms are the caller's to make and close: detach
 * (no call, message or write reaches the group any more), close the comms
 * (they wait for operations that name the group's ops), then free. */
struct srd_rma_coll *srd_rma_coll_new(struct srd_dev *dev, int nranks, int rank);
void srd_rma_coll_detach(struct srd_rma_coll *coll);
void srd_rma_coll_free(struct srd_rma_coll *coll);
/* Tie peer rank's comms to the group (their messages and writes reach it). */
void srd_rma_set_peer(struct srd_rma_coll *coll, int rank, struct srd_comm *send, struct srd_comm *recv);

/* Windows. srd_rma_win_new registers [base, base+len) on every rail (no lock
 * held: registering takes dev->lock) and returns the window with the next
 * index, its local keys in *mine; srd_rma_win_set_remote records a peer's.
 * A GPU window (cuda_dev >= 0) gets the group's stream for its device. */
int srd_rma_win_new(struct srd_rma_coll *coll, void *base, size_t len, int cuda_dev, unsigned flags, int dmabuf_fd,
                    uint64_t offset, struct srd_rma_win **out, struct srd_rma_remote *mine);
int srd_rma_win_set_remote(struct srd_rma_win *w, int rank, const struct srd_rma_remote *r);
/* No lock held. Waits for the window's stream first; SRD_OK, or that wait's
 * error (the window is freed either way). */
int srd_rma_win_free(struct srd_rma_win *w);
/* Is h a live window of coll? (h must be a pointer NCCL got from us or NULL.) */
bool srd_rma_win_valid(const struct srd_rma_coll *coll, const void *h);

/* Ops (lock held). A put of size bytes from lwin+loff to rank's copy of
 * rwin at roff, with an optional signal (sig NULL: none; sig->window and
 * offset name the target's signal window); size 0 with a signal is a signal
 * alone. A get reads rank's rwin+roff into lwin+loff. Bounds are checked
 * here: SRD_ERR_ARG (logged) for anything outside a window or an unknown
 * rank. */
int srd_rma_put(struct srd_rma_coll *coll, int rank, struct srd_rma_win *lwin, uint64_t loff, struct srd_rma_win *rwin,
                uint64_t roff, size_t size, const struct srd_msg_rma_signal *sig, struct srd_rma_op **out);
int srd_rma_get(struct srd_rma_coll *coll, int rank, struct srd_rma_win *lwin, uint64_t loff, struct srd_rma_win *rwin,
                uint64_t roff, size_t size, struct srd_rma_op **out);
/* Post what waits (queued ops, due acknowledgements). */
void srd_rma_progress(struct srd_rma_coll *coll);
/* Is the op done? (An op of a failed comm is, with its error.) */
bool srd_rma_op_test(struct srd_rma_op *op);
/* Is op one of coll's ops in use? */
bool srd_rma_op_valid(const struct srd_rma_coll *coll, const struct srd_rma_op *op);
/* NCCL saw it done. */
void srd_rma_op_release(struct srd_rma_op *op);
/* Inside the module: an op a queue held (outstanding) ends with result. */
void srd_rma_op_end(struct srd_rma_op *op, int result);

/* Inside the module: the word a signal m for rank's window adds to (*word
 * set only for our own windows); SRD_ERR_ARG outside the window, logged
 * (through limit for signals a peer sent; NULL: always, for our caller's). */
int srd_rma_signal_target(struct srd_rma_coll *coll, const struct srd_msg_rma_signal *m, int rank, char **word,
                          struct srd_log_limit *limit);
/* Record the group's first error (queryLastError); returns result. */
int srd_rma_coll_fail(struct srd_rma_coll *coll, int result);
/* Tell the origin how far we applied its ops (again at progress when the
 * provider is full). */
void srd_rma_send_ack(struct srd_rma_peer *p);
/* Apply a signal to word of window w, once every write it covers landed
 * (src/proto/rma_gpu.c). Host memory: the CPU's atomic, whose release order
 * publishes every write counted before it. GPU memory: an 8-byte write on
 * the window's stream, which lands after the copies before it (shm copied
 * the data synchronously before we counted it), of the word's shadow plus
 * the signal (NEVER_RESET), or of the word read back on that stream plus
 * the signal. SRD_OK, or an error logged. Lock held. */
int srd_rma_apply(struct srd_rma_win *w, char *word, uint8_t op, uint64_t value);
/* A put or get to ourselves with GPU memory on either side (or a signal
 * into a GPU window): the copy and then the signal on the stream, op->event
 * set when the op waits for the stream (test polls it). Lock held. */
int srd_rma_gpu_self(struct srd_rma_op *op, struct srd_rma_win *dwin, char *dst, struct srd_rma_win *swin,
                     const char *src, size_t size, struct srd_rma_win *sigwin, char *word,
                     const struct srd_msg_rma_signal *sig);
/* Has op's stream work run? SRD_OK yes, SRD_AGAIN not yet, or an error
 * (logged). */
int srd_rma_gpu_op_poll(struct srd_rma_op *op);
/* Attach GPU window w to the group's stream for its device, opening it on
 * first use. Lock held. */
int srd_rma_gpu_win(struct srd_rma_coll *coll, struct srd_rma_win *w);
/* Wait for everything queued on w's stream (none for host windows). No lock
 * held: progress goes on meanwhile. */
int srd_rma_gpu_sync(struct srd_rma_win *w);
/* iflush: what a NIC wrote into w (gets) made visible to its GPU where the
 * device needs a flush (gdr.flush), then w's stream waited for. No lock. */
int srd_rma_gpu_flush(struct srd_rma_win *w);
/* The group's streams, waited for and closed (srd_rma_coll_free). */
void srd_rma_gpu_close(struct srd_rma_coll *coll);

/* Signals the NIC writes (src/proto/rma_nic.c), lock held. apply: add to
 * word (its index in w) and queue it; post: start the next queued write if
 * none is in flight (progress calls it again after the provider refused);
 * close: with the group (an op still in flight keeps what it
 * uses until it completes). SRD_OK or an error, logged, that fails the
 * group. */
int srd_rma_nic_apply(struct srd_rma_win *w, size_t word, uint64_t add);
int srd_rma_nic_post(struct srd_rma_coll *coll);
/* Ops to ourselves by loopback RMA, in the same queue: where a window they
 * name has its signals written by the NIC, or while earlier ones are queued
 * (order). self: op (kind, size, local, raddr, signal set; windows: rwin the
 * remote side's, lwin the local one's) ends by srd_rma_op_end. */
bool srd_rma_nic_takes_self(const struct srd_rma_coll *coll, const struct srd_rma_win *lwin,
                            const struct srd_rma_win *rwin, const struct srd_rma_win *sigwin);
int srd_rma_nic_self(struct srd_rma_op *op, struct srd_rma_win *rwin, struct srd_rma_win *lwin);
/* Wait, bounded by NCCL_SRD_CLOSE_TIMEOUT_MS, while a loopback op into window
 * index (any window: UINT32_MAX) is in flight; true when none is. */
bool srd_rma_nic_settle(struct srd_rma_coll *coll, uint32_t index);
void srd_rma_nic_close(struct srd_rma_coll *coll);


/* Incoming (dispatch, lock held): a one-sided write into c's windows, a
 * signal, an acknowledgement. Forged or impossible ones are dropped and
 * logged. */
void srd_rma_on_write(struct srd_comm *c, uint32_t imm, size_t len);
void srd_rma_on_signal(struct srd_comm *c, const struct srd_msg_rma_signal *m);
void srd_rma_on_ack(struct srd_comm *c, const struct srd_msg_rma_ack *m);
/* The send comm c of a peer lost rails (failover): one-sided writes, reads
 * or signals still in flight on one may or may not have landed, and a copy
 * could be counted twice or land after its op was applied, so they do not
 * move to other rails; c fails naming the rail. True when it failed. */
bool srd_rma_lost_rails(struct srd_comm *c);

#endif
