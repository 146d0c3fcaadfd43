/* Re-sends wait for the receiver (DESIGN.md, "Re-sends wait for the
 * receiver"). A stripe whose write did not complete on a lost rail may have
 * landed all the same (its acknowledgement was cut off): a copy sent at once
 * could land after the receive completed, in a buffer NCCL reused. So the
 * sender holds such stripes (unsure) and asks (a stale RAIL notice, with a
 * round); the receiver fences the rail (the caller taints it), holds every
 * open receive, and answers with them (FENCED). Unsure stripes of an open
 * receive are re-sent; those of any other receive landed, since it
 * completed. A held receive completes only once the sender said SETTLED: no
 * copy for it is in flight any more. */
#include "srd/log.h"
#include "srd/proto.h"

struct fenced_msg {
  const struct srd_comm *c;
  const struct srd_msg_fenced *m;
};

static size_t encode_fenced(void *buf, size_t cap, const void *arg) {
  const struct fenced_msg *f = arg;
  return srd_msg_encode_fenced(buf, cap, f->c->peer_id, f->m);
}

/* Asked or answered again after this long without an answer or SETTLED. */
#define FENCE_AGAIN_MS 200

void srd_proto_answer_fence(struct srd_comm *c, uint32_t round, int rail) {
  struct srd_msg_fenced m = {.round = round, .rail = (uint8_t)rail};
  for (int i = 0; i < SRD_REQS_PER_COMM; i++) {
    struct srd_req *r = c->reqs[i];
    if (!r || r->kind != SRD_REQ_RECV || r->done || !r->cts_sent) continue;
    if (r->held_round < round) r->held_round = round;
    m.open[m.n++] = (struct srd_fenced_recv){r->seq, (uint8_t)r->n};
  }
  if (round >= c->fence_round) {
    c->fence_round = round;
    c->fence_rail = (uint8_t)rail;
  }
  c->fence_ms = srd_now_ms();
  struct fenced_msg f = {c, &m};
  srd_comm_send_ctrl(c, FI_ADDR_UNSPEC, encode_fenced, &f, NULL); /* refused or lost: answered again */
}

/* The open receive that message seq goes to, or NULL. */
static const struct srd_fenced_recv *open_for(const struct srd_msg_fenced *m, uint32_t seq) {
  for (int i = 0; i < m->n; i++)
    if (seq - m->open[i].seq < m->open[i].count) return &m->open[i];
  return NULL;
}

static bool writes_to(const struct srd_comm *c, const struct srd_fenced_recv *o) {
  for (int k = 0; k < SRD_REQS_PER_COMM; k++) {
    const struct srd_req *r = c->reqs[k];
    if (r && r->kind == SRD_REQ_SEND && r->nstripes && r->seq - o->seq < o->count) return true;
  }
  return false;
}

struct settled_msg {
  const struct srd_comm *c;
  struct srd_msg_settled m;
};

static size_t encode_settled(void *buf, size_t cap, const void *arg) {
  const struct settled_msg *s = arg;
  return srd_msg_encode_settled(buf, cap, s->c->peer_id, &s->m);
}

static int tell_settled(struct srd_comm *c, uint32_t round, uint32_t seq) {
  struct settled_msg s = {c, {round, seq}};
  return srd_comm_send_ctrl(c, FI_ADDR_UNSPEC, encode_settled, &s, NULL);
}

void srd_proto_on_fenced(struct srd_comm *c, const struct srd_msg_fenced *m) {
  int again = 0, landed = 0;
  for (int k = 0; k < SRD_REQS_PER_COMM; k++) {
    struct srd_req *r = c->reqs[k];
    if (!r || r->kind != SRD_REQ_SEND || !r->nstripes) continue;
    const struct srd_fenced_recv *open = open_for(m, r->seq);
    uint32_t unsure = 0;
    for (uint32_t u = r->unsure; u; u &= u - 1)
      if (r->stripes[__builtin_ctz(u)].path / c->dev->neps == m->rail) unsure |= u & -u;
    if (unsure && m->round >= r->unsure_round) {
      r->unsure &= ~unsure;
      if (open) {
        again += __builtin_popcount(unsure);
        r->resend |= unsure;
        srd_proto_resend(r);
      } else {
        landed += __builtin_popcount(unsure);
        srd_proto_stripes_landed(r, unsure); /* its receive completed */
      }
    }
    if (open && r->settle_round < m->round) {
      r->settle_round = m->round;
      r->settle_seq = open->seq;
      c->settle_due = true;
    }
  }
  if (again || landed)
    SRD_INFO(NCCL_NET, "comm %#x: the peer fenced its rail for our rail %d (round %u): %d stripe(s) written again, "
             "%d landed unacknowledged (their receive had completed)", c->id, m->rail, m->round, again, landed);
  /* Held receives no send of ours names: nothing of ours is in flight to them. */
  for (int i = 0; i < m->n && !c->result; i++)
    if (!writes_to(c, &m->open[i]) && tell_settled(c, m->round, m->open[i].seq) == SRD_AGAIN)
      SRD_INFO(NCCL_NET, "comm %#x: settle notice refused; the peer's receive %u stays held until a later fence",
               c->id, m->open[i].seq);
  if (c->settle_due) srd_proto_settle(c);
}

static bool clean(const struct srd_req *r) { return !r->unsure && !r->resend && !r->copies; }

/* Every send of ours into the held receive starting at seq is clean. */
static bool group_clean(const struct srd_comm *c, uint32_t seq) {
  for (int k = 0; k < SRD_REQS_PER_COMM; k++) {
    const struct srd_req *r = c->reqs[k];
    if (r && r->kind == SRD_REQ_SEND && r->settle_round && r->settle_seq == seq && !clean(r)) return false;
  }
  return true;
}

/* Tell SETTLED for the held receives whose sends of ours are all clean. */
void srd_proto_settle(struct srd_comm *c) {
  c->settle_due = false;
  for (int k = 0; k < SRD_REQS_PER_COMM && !c->result; k++) {
    struct srd_req *r = c->reqs[k];
    if (!r || r->kind != SRD_REQ_SEND || !r->settle_round) continue;
    uint32_t seq = r->settle_seq, round = 0;
    if (!group_clean(c, seq)) {
      c->settle_due = true;
      continue;
    }
    for (int j = 0; j < SRD_REQS_PER_COMM; j++) {
      const struct srd_req *o = c->reqs[j];
      if (o && o->kind == SRD_REQ_SEND && o->settle_round && o->settle_seq == seq && o->settle_round > round)
        round = o->settle_round;
    }
    if (tell_settled(c, round, seq) == SRD_AGAIN) {
      c->settle_due = true; /* told again from srd_dev_check_rails */
      continue;
    }
    for (int j = 0; j < SRD_REQS_PER_COMM; j++) {
      struct srd_req *o = c->reqs[j];
      if (o && o->kind == SRD_REQ_SEND && o->settle_round && o->settle_seq == seq) srd_req_settled(o);
    }
  }
}

void srd_proto_on_settled(struct srd_comm *c, const struct srd_msg_settled *m) {
  for (int i = 0; i < SRD_REQS_PER_COMM; i++) {
    struct srd_req *r = c->reqs[i];
    if (!r || r->kind != SRD_REQ_RECV || r->done || m->seq - r->seq >= (uint32_t)r->n) continue;
    if (!r->held_round || m->round < r->held_round) return;
    r->held_round = 0;
    if (r->entries_done == r->n) srd_recv_finish(r);
    return;
  }
}

/* The sender closed, so no SETTLED comes any more. Its notice counts the
 * writes it completed, copies included: once as many landed here, no copy
 * can land later and the held receives complete. A notice without that
 * count (its close gave up waiting on its writes) leaves nothing to wait
 * for: they fail. */
static void release_held_after_close(struct srd_comm *c) {
  bool landed = c->peer_drained && c->writes_done >= c->peer_writes;
  if (c->peer_drained && !landed) return;
  for (int i = 0; i < SRD_REQS_PER_COMM; i++) {
    struct srd_req *r = c->reqs[i];
    if (!r || r->kind != SRD_REQ_RECV || r->done || !r->held_round) continue;
    r->held_round = 0;
    if (!landed) {
      SRD_WARN("recv comm %#x: the peer closed its send comm while copies it wrote again into receive %u may still "
               "land; the receive fails", c->id, r->seq);
      srd_req_finish(r, SRD_ERR_REMOTE);
    } else if (r->entries_done == r->n) {
      srd_recv_finish(r);
    }
  }
}

void srd_proto_fence_timers(struct srd_comm *c, uint64_t now) {
  if (c->settle_due) srd_proto_settle(c);
  if (c->peer_closed && !c->is_send) release_held_after_close(c);
  if (now - c->fence_ms < FENCE_AGAIN_MS) return;
  uint32_t rails = 0;
  bool held = false;
  for (int k = 0; k < SRD_REQS_PER_COMM; k++) {
    const struct srd_req *r = c->reqs[k];
    if (!r) continue;
    held |= r->kind == SRD_REQ_RECV && r->held_round;
    for (uint32_t u = r->kind == SRD_REQ_SEND ? r->unsure : 0; u; u &= u - 1)
      rails |= 1u << (r->stripes[__builtin_ctz(u)].path / c->dev->neps);
  }
  for (; rails; rails &= rails - 1) srd_proto_ask_fence(c, __builtin_ctz(rails));
  if (held) srd_proto_answer_fence(c, c->fence_round, c->fence_rail);
}
