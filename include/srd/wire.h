/* What travels between peers: the 32-bit immediate data of every RDMA write,
 * the 128-byte listen handle, and the control messages (hello, accept,
 * clear-to-send, eager data, truncation notice, keepalive). Pure encode and
 * decode; every decoder validates lengths and counts and rejects nonsense. */
#ifndef SRD_WIRE_H
#define SRD_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define SRD_MAX_RECVS 8
#define SRD_MAX_STRIPES 7
#define SRD_COMM_INDEX_BITS 16
#define SRD_MAX_COMMS (1 << SRD_COMM_INDEX_BITS)
#define SRD_IMM_SLOT_MASK 0xffu
#define SRD_SLOT_BITS 6   /* of the slot byte: the receive slot's index; the rest counts its uses */
#define SRD_RECV_SLOTS 40 /* receive slots per comm (NCCL keeps at most 32 requests in flight) */
#define SRD_HANDLE_SIZE 128
#define SRD_NAME_MAX 64
#define SRD_MAX_PATHS 64 /* rails x endpoints per rail named in a hello */

/* Immediate data: write id (16) | receive slot (8) | stripe (5) | receive
 * entry in the group (3): 32 bits, which every provider carries (efa's CQ
 * data has no more). The write id names the receive comm: drawn at random
 * by the receiver (unique in its device) and told only to that comm's peer
 * in the answer, so that a peer of one comm cannot name another by counting
 * (comm indexes are small numbers). The slot names the receive request the clear-to-send
 * offered (its index and a use count, chosen by the receiver): the message
 * sequence travels in the control messages, whose 32-bit fields have room,
 * so the write needs only what finds the request. The stripe field holds the
 * message's stripe count n and this write's index i in it, as pair number
 * n(n-1)/2 + i (0..27 for n <= 7): the count tells the receiver when the
 * message is complete, the index lets it count a re-sent stripe once (rail
 * failover). Numbers 28..31 decode to an index outside the count: rejected. */
struct srd_imm {
  uint32_t write_id;
  uint32_t slot;
  uint32_t nstripes;
  uint32_t stripe;
  uint32_t entry;
};

static inline uint32_t srd_imm_pack(struct srd_imm v) {
  uint32_t pair = v.nstripes * (v.nstripes - 1) / 2 + v.stripe;
  return (v.write_id & (SRD_MAX_COMMS - 1)) | (v.slot & SRD_IMM_SLOT_MASK) << 16 | (pair & 31u) << 24 |
         (v.entry & 7u) << 29;
}

/* Every field, unchecked (a field of n bits holds any n-bit value). */
static inline struct srd_imm srd_imm_unpack(uint32_t x) {
  uint32_t pair = (x >> 24) & 31u, n = 1;
  while (n < SRD_MAX_STRIPES && pair >= n) pair -= n++;
  struct srd_imm v = {x & (SRD_MAX_COMMS - 1), (x >> 16) & SRD_IMM_SLOT_MASK, n, pair, (x >> 29) & 7u};
  return v;
}

/* The immediate data of a write as a peer sent it: 0 and *v, or -1 with *why
 * when a field is out of its range (a slot index of SRD_RECV_SLOTS or more,
 * a stripe pair number past the last). Receivers use this one. */
int srd_imm_decode(uint32_t x, struct srd_imm *v, const char **why);

/* One-sided (RMA) writes carry another layout, told apart by stripe pair
 * bits (26..28) all set, which a two-sided immediate never has (its pairs
 * stop at 27): write id (16) | op sequence mod 128 (7, bits 16..22) |
 * signal follows (1, bit 23) | stripe pair (5: bits 24..25 low, 29..31
 * high). The write id names the target's receive comm of this peer (as in
 * two-sided writes, told only to that peer); the sequence
 * orders the peer's ops (DESIGN.md, "One-sided RMA"). */
#define SRD_RMA_SEQ_BITS 7
#define SRD_RMA_SEQ_WINDOW (1u << SRD_RMA_SEQ_BITS)
#define SRD_IMM_RMA_MARK (7u << 26)

struct srd_rma_imm {
  uint32_t write_id;
  uint32_t seq; /* mod SRD_RMA_SEQ_WINDOW */
  uint32_t signal;
  uint32_t nstripes;
  uint32_t stripe;
};

static inline int srd_imm_is_rma(uint32_t x) { return (x & SRD_IMM_RMA_MARK) == SRD_IMM_RMA_MARK; }

static inline uint32_t srd_rma_imm_pack(struct srd_rma_imm v) {
  uint32_t pair = v.nstripes * (v.nstripes - 1) / 2 + v.stripe;
  return (v.write_id & (SRD_MAX_COMMS - 1)) | (v.seq & (SRD_RMA_SEQ_WINDOW - 1)) << 16 | (v.signal & 1u) << 23 |
         (pair & 3u) << 24 | SRD_IMM_RMA_MARK | (pair >> 2 & 7u) << 29;
}

/* 0, or -1 for a pair that names no stripe of a count up to
 * SRD_MAX_STRIPES (forged). */
static inline int srd_rma_imm_unpack(uint32_t x, struct srd_rma_imm *v) {
  uint32_t pair = (x >> 24 & 3u) | (x >> 29 & 7u) << 2, n = 1;
  while (n < SRD_MAX_STRIPES && pair >= n) pair -= n++;
  v->write_id = x & (SRD_MAX_COMMS - 1);
  v->seq = x >> 16 & (SRD_RMA_SEQ_WINDOW - 1);
  v->signal = x >> 23 & 1u;
  v->nstripes = n;
  v->stripe = pair;
  return pair < n ? 0 : -1;
}

/* The listen handle NCCL carries to the connecting side. */
#define SRD_HANDLE_TRANSPORT_MAX 32 /* with its NUL */
struct srd_handle {
  uint32_t listener_id;
  uint64_t cookie;
  uint8_t name_len;
  uint8_t name[SRD_NAME_MAX]; /* rail 0, endpoint 0 of the listener */
  /* The listener's provider, or efa's fabric (srd_transport_name): a connect
   * from another one fails at once, naming both, instead of waiting out the
   * connect timeout for an answer that cannot come. */
  char transport[SRD_HANDLE_TRANSPORT_MAX];
};

void srd_handle_encode(const struct srd_handle *h, void *out128);
/* 0, or -1 with *why set: not ours, wrong version, bad length. */
int srd_handle_decode(const void *in128, struct srd_handle *h, const char **why);

enum srd_msg_type {
  SRD_MSG_HELLO = 1,  /* connect -> listener */
  SRD_MSG_ACCEPT,     /* listener -> connect */
  SRD_MSG_CTS,        /* receiver -> sender: buffers for a group */
  SRD_MSG_EAGER,      /* sender -> receiver: small message inline */
  SRD_MSG_TRUNC,      /* sender -> receiver: message larger than the buffer */
  SRD_MSG_PING,       /* either way: liveness probe, no answer */
  SRD_MSG_BYE,        /* either way: the comm closed after next_seq messages (a send comm: and its writes) */
  SRD_MSG_RAIL,       /* either way: the sender's rail went down or came back */
  SRD_MSG_RTS,        /* sender -> receiver: a message that cannot go eagerly waits for seq's clear-to-send */
  SRD_MSG_PROBE,      /* either way: is a down rail usable again? answered on the rail it came by */
  SRD_MSG_RMA_SIGNAL, /* RMA origin -> target: op seq's signal (and its stripe count) */
  SRD_MSG_RMA_ACK,    /* RMA target -> origin: ops before seq are applied (flow control) */
  SRD_MSG_FENCED,     /* receiver -> sender: a stale rail is fenced; these receives are open and held */
  SRD_MSG_SETTLED,    /* sender -> receiver: no copy for that receive is in flight any more */
};

struct srd_msg_peer { /* HELLO and ACCEPT */
  uint64_t cookie;
  uint64_t token;       /* the sender's comm token: every later message to it carries this */
  uint32_t listener_id;
  uint32_t src_comm;
  uint32_t pid;         /* lets a host-local transport notice a dead peer */
  uint16_t write_id;    /* ACCEPT: what the accepting receive comm's writes carry (0 in a hello) */
  uint8_t nrails, neps, name_len;
  uint32_t eager_max;   /* ACCEPT: the largest eager payload the receive comm takes (0: none) */
  const uint8_t *names; /* nrails * neps names of name_len bytes, rail-major */
};

struct srd_cts_entry {
  uint64_t addr;
  uint64_t len;
  int32_t tag;
};

struct srd_msg_cts {
  uint32_t seq; /* first message sequence of the group */
  uint8_t n, nkeys;
  uint8_t slot;  /* goes back in the immediate data of every write */
  struct srd_cts_entry e[SRD_MAX_RECVS];
  const uint8_t *keys; /* n * nkeys little-endian uint64 keys, entry-major */
};

struct srd_msg_eager {
  uint32_t seq;
  int32_t tag;
  uint32_t len;
  const void *data;
};

struct srd_msg_trunc {
  uint32_t seq;
  uint64_t size;
};

/* A send comm's notice says, with SRD_BYE_DRAINED, that it posts no more
 * writes, that `writes` of its writes completed and that it sent `eagers`
 * eager messages: the receiver, closing, waits until that many writes have
 * landed; a receive comm that has taken all of both answers with
 * SRD_BYE_TAKEN, which the closing sender waits for (DESIGN.md, "Close"). */
struct srd_msg_bye {
  uint32_t next_seq;
  uint8_t flags;
  uint64_t writes;
  uint64_t eagers;
};
#define SRD_BYE_DRAINED 0x1
#define SRD_BYE_TAKEN 0x2

struct srd_msg_rail {
  uint8_t rail;   /* the sender's rail index */
  uint8_t up;     /* 1: it rejoined; 0: it is down */
  uint8_t stale;  /* down: writes of ours were in flight on it (their bytes may still land) */
  uint32_t round; /* stale: the sender's fence round, echoed in the FENCED answer */
};

/* The answer to a stale rail notice (DESIGN.md, "Re-sends wait for the
 * receiver"): the rail is fenced, and these receives (by the message
 * sequences they cover: seq .. seq + count - 1) had a clear-to-send out, were
 * open, and are held until SETTLED. Every other receive the sender wrote to
 * has completed: nothing may be re-sent to it. */
struct srd_fenced_recv {
  uint32_t seq;
  uint8_t count;
};

struct srd_msg_fenced {
  uint32_t round;
  uint8_t rail; /* the sender's rail the stale notice named: fenced now */
  uint8_t n;
  struct srd_fenced_recv open[SRD_RECV_SLOTS];
};

struct srd_msg_settled {
  uint32_t round; /* the fence round it answers */
  uint32_t seq;   /* the held receive's first message sequence */
};

/* A probe goes from the prober's rail `rail` and is answered from the rail it
 * arrived on, to its source: the answer comes back over the very connection
 * the peer's writes into that rail used, after whatever they left in it. */
struct srd_msg_probe {
  uint8_t rail;   /* the prober's rail */
  uint8_t answer; /* 0: a request; 1: the answer to one */
  uint32_t round; /* the prober's round, echoed in the answer */
};

struct srd_msg_rts {
  uint32_t seq;
};

/* The signal of RMA op seq: applied by the target once every stripe of the
 * op (nstripes) and every earlier op of the peer has landed. window names
 * one of the target's windows by its registration order. */
struct srd_msg_rma_signal {
  uint32_t seq;
  uint8_t nstripes; /* 0: a signal alone */
  uint8_t op;       /* SRD_RMA_SIGNAL_INC (adds 1) or _ADD (adds value) */
  uint32_t window;
  uint64_t offset;
  uint64_t value;
};

#define SRD_RMA_SIGNAL_INC 1
#define SRD_RMA_SIGNAL_ADD 2

struct srd_msg_rma_ack {
  uint32_t seq; /* the target applied every op before this one */
};

/* Every header carries the destination comm's token, a random number that
 * comm chose and told its peer in the hello or the answer (0 in a hello: the
 * listener's cookie stands for it). A message whose token is not its
 * comm's is dropped: knowing a comm id (they are guessable) is not enough. */
struct srd_msg {
  enum srd_msg_type type;
  uint32_t dst_comm;
  uint64_t token;
  union {
    struct srd_msg_peer peer;
    struct srd_msg_cts cts;
    struct srd_msg_eager eager;
    struct srd_msg_trunc trunc;
    struct srd_msg_bye bye;
    struct srd_msg_rail rail;
    struct srd_msg_rts rts;
    struct srd_msg_probe probe;
    struct srd_msg_rma_signal rma_signal;
    struct srd_msg_rma_ack rma_ack;
    struct srd_msg_fenced fenced;
    struct srd_msg_settled settled;
  } u;
};

uint64_t srd_cts_key(const struct srd_msg_cts *cts, int entry, int rail);

/* Encoders return the bytes written, or 0 when the message does not fit. */
size_t srd_msg_encode_peer(void *buf, size_t cap, enum srd_msg_type type, uint32_t dst_comm,
                           const struct srd_msg_peer *p);
size_t srd_msg_encode_cts(void *buf, size_t cap, uint32_t dst_comm, const struct srd_msg_cts *c,
                          const uint64_t *keys);
/* Writes the eager header; the payload goes at buf + the returned size. */
size_t srd_msg_encode_eager_header(void *buf, size_t cap, uint32_t dst_comm, uint32_t seq, int32_t tag, uint32_t len);
size_t srd_msg_encode_trunc(void *buf, size_t cap, uint32_t dst_comm, uint32_t seq, uint64_t size);
size_t srd_msg_encode_ping(void *buf, size_t cap, uint32_t dst_comm);
size_t srd_msg_encode_bye(void *buf, size_t cap, uint32_t dst_comm, const struct srd_msg_bye *b);
size_t srd_msg_encode_rail(void *buf, size_t cap, uint32_t dst_comm, const struct srd_msg_rail *m);
size_t srd_msg_encode_rts(void *buf, size_t cap, uint32_t dst_comm, uint32_t seq);
size_t srd_msg_encode_probe(void *buf, size_t cap, uint32_t dst_comm, const struct srd_msg_probe *m);
size_t srd_msg_encode_rma_signal(void *buf, size_t cap, uint32_t dst_comm, const struct srd_msg_rma_signal *m);
size_t srd_msg_encode_rma_ack(void *buf, size_t cap, uint32_t dst_comm, uint32_t seq);
size_t srd_msg_encode_fenced(void *buf, size_t cap, uint32_t dst_comm, const struct srd_msg_fenced *m);
size_t srd_msg_encode_settled(void *buf, size_t cap, uint32_t dst_comm, const struct srd_msg_settled *m);

/* Encoders write token 0; the sender stamps the peer's token into the
 * encoded message (srd_comm_send_ctrl). */
void srd_msg_set_token(void *buf, uint64_t token);

/* 0 and *m (pointing into buf), or -1 with *why. */
int srd_msg_decode(const void *buf, size_t len, struct srd_msg *m, const char **why);

#endif
