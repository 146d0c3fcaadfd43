#include "srd/wire.h"

#include <string.h>

#define MSG_MAGIC 0x5352u /* "SR" */
#define MSG_VERSION 10 /* 4: every header carries the destination comm's token; 5: requests to send, rail notices, the close notice counts writes; 6: rail probes answered; 7: the answer carries the write id, the handle names the transport; 8: eager data only within a window of the last clear-to-send, which receives post every half window; 9: the close notice counts eager messages and is answered once everything was taken; 10: the answer says the largest eager payload the receiver takes */
#define HANDLE_MAGIC 0x31445253u /* "SRD1" */
#define HANDLE_TRANSPORT_AT (24 + SRD_NAME_MAX) /* after the header and the longest address */
_Static_assert(HANDLE_TRANSPORT_AT + SRD_HANDLE_TRANSPORT_MAX <= SRD_HANDLE_SIZE, "the transport fits the handle");
#define TOKEN_AT 8 /* header: magic (2), version (1), type (1), destination comm (4), token (8) */

/* Little-endian byte cursor: peers may differ in alignment, never in meaning. */
struct cur {
  uint8_t *w;
  const uint8_t *r;
  size_t left;
  int bad;
};

static void put(struct cur *c, uint64_t v, int bytes) {
  if ((size_t)bytes > c->left) {
    c->bad = 1;
    return;
  }
  for (int i = 0; i < bytes; i++) *c->w++ = (uint8_t)(v >> (8 * i));
  c->left -= (size_t)bytes;
}

static void put_bytes(struct cur *c, const void *p, size_t n) {
  if (n > c->left) {
    c->bad = 1;
    return;
  }
  memcpy(c->w, p, n);
  c->w += n;
  c->left -= n;
}

static uint64_t get(struct cur *c, int bytes) {
  if ((size_t)bytes > c->left) {
    c->bad = 1;
    return 0;
  }
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++) v |= (uint64_t)*c->r++ << (8 * i);
  c->left -= (size_t)bytes;
  return v;
}

static const uint8_t *get_bytes(struct cur *c, size_t n) {
  if (n > c->left) {
    c->bad = 1;
    return NULL;
  }
  const uint8_t *p = c->r;
  c->r += n;
  c->left -= n;
  return p;
}

static struct cur writer(void *buf, size_t cap) { return (struct cur){.w = buf, .left = cap}; }
static struct cur reader(const void *buf, size_t len) { return (struct cur){.r = buf, .left = len}; }

static size_t written(const struct cur *c, const void *buf) { return c->bad ? 0 : (size_t)(c->w - (uint8_t *)buf); }

void srd_handle_encode(const struct srd_handle *h, void *out128) {
  memset(out128, 0, SRD_HANDLE_SIZE);
  struct cur c = writer(out128, SRD_HANDLE_SIZE);
  put(&c, HANDLE_MAGIC, 4);
  put(&c, MSG_VERSION, 1);
  put(&c, h->name_len, 1);
  put(&c, 0, 2);
  put(&c, h->listener_id, 4);
  put(&c, 0, 4);
  put(&c, h->cookie, 8);
  put_bytes(&c, h->name, h->name_len);
  c = writer((uint8_t *)out128 + HANDLE_TRANSPORT_AT, SRD_HANDLE_TRANSPORT_MAX);
  const char *end = memchr(h->transport, 0, SRD_HANDLE_TRANSPORT_MAX - 1);
  put_bytes(&c, h->transport, end ? (size_t)(end - h->transport) : SRD_HANDLE_TRANSPORT_MAX - 1);
}

int srd_handle_decode(const void *in128, struct srd_handle *h, const char **why) {
  struct cur c = reader(in128, SRD_HANDLE_SIZE);
  memset(h, 0, sizeof(*h));
  if (get(&c, 4) != HANDLE_MAGIC) return *why = "not an SRD handle (bad magic)", -1;
  if (get(&c, 1) != MSG_VERSION) return *why = "handle from an incompatible nccl-srd version", -1;
  h->name_len = (uint8_t)get(&c, 1);
  get(&c, 2);
  h->listener_id = (uint32_t)get(&c, 4);
  get(&c, 4);
  h->cookie = get(&c, 8);
  if (h->name_len == 0 || h->name_len > SRD_NAME_MAX) return *why = "handle has a bad address length", -1;
  const uint8_t *name = get_bytes(&c, h->name_len);
  if (!name) return *why = "handle address overruns the handle", -1;
  memcpy(h->name, name, h->name_len);
  if (h->cookie == 0) return *why = "handle has no cookie", -1;
  const char *t = (const char *)in128 + HANDLE_TRANSPORT_AT;
  const char *end = memchr(t, 0, SRD_HANDLE_TRANSPORT_MAX);
  size_t tlen = end ? (size_t)(end - t) : 0;
  if (tlen == 0) return *why = "handle names no transport", -1;
  for (size_t i = 0; i < tlen; i++)
    if (t[i] < 0x21 || t[i] > 0x7e) return *why = "handle's transport name is not printable", -1;
  memcpy(h->transport, t, tlen);
  return 0;
}

static void put_header(struct cur *c, enum srd_msg_type type, uint32_t dst_comm) {
  put(c, MSG_MAGIC, 2);
  put(c, MSG_VERSION, 1);
  put(c, type, 1);
  put(c, dst_comm, 4);
  put(c, 0, 8); /* the token: srd_msg_set_token */
}

void srd_msg_set_token(void *buf, uint64_t token) {
  struct cur c = writer((uint8_t *)buf + TOKEN_AT, 8);
  put(&c, token, 8);
}

size_t srd_msg_encode_peer(void *buf, size_t cap, enum srd_msg_type type, uint32_t dst_comm,
                           const struct srd_msg_peer *p) {
  struct cur c = writer(buf, cap);
  size_t names = (size_t)p->nrails * p->neps * p->name_len;
  put_header(&c, type, dst_comm);
  put(&c, p->cookie, 8);
  put(&c, p->token, 8);
  put(&c, p->listener_id, 4);
  put(&c, p->src_comm, 4);
  put(&c, p->pid, 4);
  put(&c, p->write_id, 2);
  put(&c, p->nrails, 1);
  put(&c, p->neps, 1);
  put(&c, p->name_len, 1);
  put(&c, p->eager_max, 4);
  put_bytes(&c, p->names, names);
  return written(&c, buf);
}

size_t srd_msg_encode_cts(void *buf, size_t cap, uint32_t dst_comm, const struct srd_msg_cts *m,
                          const uint64_t *keys) {
  struct cur c = writer(buf, cap);
  put_header(&c, SRD_MSG_CTS, dst_comm);
  put(&c, m->seq, 4);
  put(&c, m->n, 1);
  put(&c, m->nkeys, 1);
  put(&c, m->slot, 1);
  put(&c, 0, 1);
  for (int i = 0; i < m->n; i++) {
    put(&c, m->e[i].addr, 8);
    put(&c, m->e[i].len, 8);
    put(&c, (uint32_t)m->e[i].tag, 4);
    for (int k = 0; k < m->nkeys; k++) put(&c, keys[i * m->nkeys + k], 8);
  }
  return written(&c, buf);
}

size_t srd_msg_encode_eager_header(void *buf, size_t cap, uint32_t dst_comm, uint32_t seq, int32_t tag, uint32_t len) {
  struct cur c = writer(buf, cap);
  put_header(&c, SRD_MSG_EAGER, dst_comm);
  put(&c, seq, 4);
  put(&c, (uint32_t)tag, 4);
  put(&c, len, 4);
  if (c.left < len) return 0;
  return written(&c, buf);
}

size_t srd_msg_encode_trunc(void *buf, size_t cap, uint32_t dst_comm, uint32_t seq, uint64_t size) {
  struct cur c = writer(buf, cap);
  put_header(&c, SRD_MSG_TRUNC, dst_comm);
  put(&c, seq, 4);
  put(&c, size, 8);
  return written(&c, buf);
}

size_t srd_msg_encode_ping(void *buf, size_t cap, uint32_t dst_comm) {
  struct cur c = writer(buf, cap);
  put_header(&c, SRD_MSG_PING, dst_comm);
  return written(&c, buf);
}

size_t srd_msg_encode_bye(void *buf, size_t cap, uint32_t dst_comm, const struct srd_msg_bye *b) {
  struct cur c = writer(buf, cap);
  put_header(&c, SRD_MSG_BYE, dst_comm);
  put(&c, b->next_seq, 4);
  put(&c, b->flags, 1);
  put(&c, b->writes, 8);
  put(&c, b->eagers, 8);
  return written(&c, buf);
}

size_t srd_msg_encode_rail(void *buf, size_t cap, uint32_t dst_comm, const struct srd_msg_rail *m) {
  struct cur c = writer(buf, cap);
  put_header(&c, SRD_MSG_RAIL, dst_comm);
  put(&c, m->rail, 1);
  put(&c, m->up, 1);
  put(&c, m->stale, 1);
  put(&c, m->round, 4);
  return written(&c, buf);
}

size_t srd_msg_encode_fenced(void *buf, size_t cap, uint32_t dst_comm, const struct srd_msg_fenced *m) {
  if (m->n > SRD_RECV_SLOTS) return 0;
  struct cur c = writer(buf, cap);
  put_header(&c, SRD_MSG_FENCED, dst_comm);
  put(&c, m->round, 4);
  put(&c, m->rail, 1);
  put(&c, m->n, 1);
  for (int i = 0; i < m->n; i++) {
    put(&c, m->open[i].seq, 4);
    put(&c, m->open[i].count, 1);
  }
  return written(&c, buf);
}

size_t srd_msg_encode_settled(void *buf, size_t cap, uint32_t dst_comm, const struct srd_msg_settled *m) {
  struct cur c = writer(buf, cap);
  put_header(&c, SRD_MSG_SETTLED, dst_comm);
  put(&c, m->round, 4);
  put(&c, m->seq, 4);
  return written(&c, buf);
}

size_t srd_msg_encode_probe(void *buf, size_t cap, uint32_t dst_comm, const struct srd_msg_probe *m) {
  struct cur c = writer(buf, cap);
  put_header(&c, SRD_MSG_PROBE, dst_comm);
  put(&c, m->rail, 1);
  put(&c, m->answer, 1);
  put(&c, m->round, 4);
  return written(&c, buf);
}

size_t srd_msg_encode_rts(void *buf, size_t cap, uint32_t dst_comm, uint32_t seq) {
  struct cur c = writer(buf, cap);
  put_header(&c, SRD_MSG_RTS, dst_comm);
  put(&c, seq, 4);
  return written(&c, buf);
}

int srd_imm_decode(uint32_t x, struct srd_imm *v, const char **why) {
  *v = srd_imm_unpack(x);
  if ((v->slot & ((1u << SRD_SLOT_BITS) - 1)) >= SRD_RECV_SLOTS) return *why = "receive slot out of range", -1;
  if (v->stripe >= v->nstripes) return *why = "stripe number out of range", -1;
  return 0;
}

size_t srd_msg_encode_rma_signal(void *buf, size_t cap, uint32_t dst_comm, const struct srd_msg_rma_signal *m) {
  struct cur c = writer(buf, cap);
  put_header(&c, SRD_MSG_RMA_SIGNAL, dst_comm);
  put(&c, m->seq, 4);
  put(&c, m->nstripes, 1);
  put(&c, m->op, 1);
  put(&c, m->window, 4);
  put(&c, m->offset, 8);
  put(&c, m->value, 8);
  return written(&c, buf);
}

size_t srd_msg_encode_rma_ack(void *buf, size_t cap, uint32_t dst_comm, uint32_t seq) {
  struct cur c = writer(buf, cap);
  put_header(&c, SRD_MSG_RMA_ACK, dst_comm);
  put(&c, seq, 4);
  return written(&c, buf);
}

uint64_t srd_cts_key(const struct srd_msg_cts *cts, int entry, int rail) {
  /* Each entry record: addr (8), len (8), tag (4), then nkeys keys (8 each). */
  const uint8_t *p = cts->keys + (size_t)entry * (20 + (size_t)cts->nkeys * 8) + 20 + (size_t)rail * 8;
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

static int decode_peer(struct cur *c, struct srd_msg_peer *p, const char **why) {
  p->cookie = get(c, 8);
  p->token = get(c, 8);
  p->listener_id = (uint32_t)get(c, 4);
  p->src_comm = (uint32_t)get(c, 4);
  p->pid = (uint32_t)get(c, 4);
  p->write_id = (uint16_t)get(c, 2);
  p->nrails = (uint8_t)get(c, 1);
  p->neps = (uint8_t)get(c, 1);
  p->name_len = (uint8_t)get(c, 1);
  p->eager_max = (uint32_t)get(c, 4);
  if (c->bad) return *why = "truncated peer description", -1;
  if (!p->nrails || !p->neps || p->nrails * p->neps > SRD_MAX_PATHS)
    return *why = "bad rail or endpoint count", -1;
  if (!p->name_len || p->name_len > SRD_NAME_MAX) return *why = "bad address length", -1;
  p->names = get_bytes(c, (size_t)p->nrails * p->neps * p->name_len);
  if (!p->names) return *why = "addresses overrun the message", -1;
  return 0;
}

static int decode_cts(struct cur *c, struct srd_msg_cts *m, const char **why) {
  m->seq = (uint32_t)get(c, 4);
  m->n = (uint8_t)get(c, 1);
  m->nkeys = (uint8_t)get(c, 1);
  m->slot = (uint8_t)get(c, 1);
  get(c, 1);
  if (c->bad) return *why = "truncated clear-to-send", -1;
  if (!m->n || m->n > SRD_MAX_RECVS) return *why = "bad receive count", -1;
  if (!m->nkeys || m->nkeys > SRD_MAX_PATHS) return *why = "bad key count", -1;
  if ((m->slot & ((1u << SRD_SLOT_BITS) - 1)) >= SRD_RECV_SLOTS) return *why = "receive slot out of range", -1;
  m->keys = c->r;
  for (int i = 0; i < m->n; i++) {
    m->e[i].addr = get(c, 8);
    m->e[i].len = get(c, 8);
    m->e[i].tag = (int32_t)get(c, 4);
    get_bytes(c, (size_t)m->nkeys * 8);
    if (m->e[i].len > UINT64_MAX - m->e[i].addr) return *why = "a buffer that wraps around the address space", -1;
  }
  if (c->bad) return *why = "clear-to-send entries overrun the message", -1;
  return 0;
}

int srd_msg_decode(const void *buf, size_t len, struct srd_msg *m, const char **why) {
  struct cur c = reader(buf, len);
  memset(m, 0, sizeof(*m));
  if (get(&c, 2) != MSG_MAGIC) return *why = "bad magic", -1;
  if (get(&c, 1) != MSG_VERSION) return *why = "unsupported version", -1;
  m->type = (enum srd_msg_type)get(&c, 1);
  m->dst_comm = (uint32_t)get(&c, 4);
  m->token = get(&c, 8);
  if (c.bad) return *why = "shorter than a header", -1;
  switch (m->type) {
  case SRD_MSG_HELLO:
  case SRD_MSG_ACCEPT:
    if (decode_peer(&c, &m->u.peer, why)) return -1;
    break;
  case SRD_MSG_CTS:
    if (decode_cts(&c, &m->u.cts, why)) return -1;
    break;
  case SRD_MSG_EAGER:
    m->u.eager.seq = (uint32_t)get(&c, 4);
    m->u.eager.tag = (int32_t)get(&c, 4);
    m->u.eager.len = (uint32_t)get(&c, 4);
    if (c.bad) return *why = "truncated eager header", -1;
    if (!(m->u.eager.data = get_bytes(&c, m->u.eager.len))) return *why = "eager payload overruns the message", -1;
    break;
  case SRD_MSG_TRUNC:
    m->u.trunc.seq = (uint32_t)get(&c, 4);
    m->u.trunc.size = get(&c, 8);
    if (c.bad) return *why = "truncated truncation notice", -1;
    break;
  case SRD_MSG_PING:
    break;
  case SRD_MSG_BYE:
    m->u.bye.next_seq = (uint32_t)get(&c, 4);
    m->u.bye.flags = (uint8_t)get(&c, 1);
    m->u.bye.writes = get(&c, 8);
    m->u.bye.eagers = get(&c, 8);
    if (c.bad) return *why = "truncated close notice", -1;
    if (m->u.bye.flags & ~(SRD_BYE_DRAINED | SRD_BYE_TAKEN)) return *why = "unknown close notice flags", -1;
    if ((m->u.bye.flags & SRD_BYE_DRAINED) && (m->u.bye.flags & SRD_BYE_TAKEN))
      return *why = "close notice both from a sender (drained) and a receiver (taken)", -1;
    break;
  case SRD_MSG_RAIL:
    m->u.rail.rail = (uint8_t)get(&c, 1);
    m->u.rail.up = (uint8_t)get(&c, 1);
    m->u.rail.stale = (uint8_t)get(&c, 1);
    m->u.rail.round = (uint32_t)get(&c, 4);
    if (c.bad) return *why = "truncated rail notice", -1;
    if (m->u.rail.rail >= SRD_MAX_PATHS || m->u.rail.up > 1 ||
        m->u.rail.stale > !m->u.rail.up)
      return *why = "bad rail notice", -1;
    break;
  case SRD_MSG_PROBE:
    m->u.probe.rail = (uint8_t)get(&c, 1);
    m->u.probe.answer = (uint8_t)get(&c, 1);
    m->u.probe.round = (uint32_t)get(&c, 4);
    if (c.bad) return *why = "truncated rail probe", -1;
    if (m->u.probe.rail >= SRD_MAX_PATHS || m->u.probe.answer > 1) return *why = "bad rail probe", -1;
    break;
  case SRD_MSG_RTS:
    m->u.rts.seq = (uint32_t)get(&c, 4);
    if (c.bad) return *why = "truncated request to send", -1;
    break;
  case SRD_MSG_RMA_SIGNAL:
    m->u.rma_signal.seq = (uint32_t)get(&c, 4);
    m->u.rma_signal.nstripes = (uint8_t)get(&c, 1);
    m->u.rma_signal.op = (uint8_t)get(&c, 1);
    m->u.rma_signal.window = (uint32_t)get(&c, 4);
    m->u.rma_signal.offset = get(&c, 8);
    m->u.rma_signal.value = get(&c, 8);
    if (c.bad) return *why = "truncated RMA signal", -1;
    if (m->u.rma_signal.nstripes > SRD_MAX_STRIPES || 
        (m->u.rma_signal.op != SRD_RMA_SIGNAL_INC && m->u.rma_signal.op != SRD_RMA_SIGNAL_ADD))
      return *why = "bad RMA signal", -1;
    break;
  case SRD_MSG_RMA_ACK:
    m->u.rma_ack.seq = (uint32_t)get(&c, 4);
    if (c.bad) return *why = "truncated RMA acknowledgement", -1;
    break;
  case SRD_MSG_FENCED:
    m->u.fenced.round = (uint32_t)get(&c, 4);
    m->u.fenced.rail = (uint8_t)get(&c, 1);
    m->u.fenced.n = (uint8_t)get(&c, 1);
    if (c.bad) return *why = "truncated fence answer", -1;
    if (m->u.fenced.rail >= SRD_MAX_PATHS) return *why = "bad rail in a fence answer", -1;
    if (m->u.fenced.n > SRD_RECV_SLOTS) return *why = "fence answer names too many receives", -1;
    for (int i = 0; i < m->u.fenced.n; i++) {
      m->u.fenced.open[i].seq = (uint32_t)get(&c, 4);
      m->u.fenced.open[i].count = (uint8_t)get(&c, 1);
      if (m->u.fenced.open[i].count < 1 || m->u.fenced.open[i].count > SRD_MAX_RECVS)
        return *why = "bad receive in a fence answer", -1;
    }
    if (c.bad) return *why = "truncated fence answer", -1;
    break;
  case SRD_MSG_SETTLED:
    m->u.settled.round = (uint32_t)get(&c, 4);
    m->u.settled.seq = (uint32_t)get(&c, 4);
    if (c.bad) return *why = "truncated settle notice", -1;
    break;
  default:
    return *why = "unknown message type", -1;
  }
  if (c.left) return *why = "trailing bytes", -1;
  return 0;
}
