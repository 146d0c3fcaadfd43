/* Close notices, and the handshake that keeps a receive buffer NCCL gives
 * up out of its peer's reach: NCCL deregisters it, frees it, then closes the
 * comm, while writes the peer was cleared to do may still be under way (tcp
 * places them from the socket, shm copies them, later, in whichever thread
 * progresses). The receiver (in deregMr or closeRecv) sends its notice; the
 * sender stops posting writes and, once its posted writes completed,
 * answers with its count of them (SRD_BYE_DRAINED); the receiver returns
 * when as many writes have landed. A sender that closes first sends that
 * notice on its own, with its count of eager messages, and waits until the
 * receiver answers that it took them all and the writes (SRD_BYE_TAKEN):
 * what the sender's process wrote into a tcp socket is gone if the receiver
 * writes to it after that process exited, before reading it. */
#include "srd/log.h"
#include "srd/param.h"
#include "srd/proto.h"

struct bye_arg {
  const struct srd_comm *c;
  uint8_t flags;
};

static size_t encode_bye(void *buf, size_t cap, const void *arg) {
  const struct bye_arg *a = arg;
  const struct srd_comm *c = a->c;
  bool drained = a->flags & SRD_BYE_DRAINED;
  struct srd_msg_bye b = {c->next_seq, a->flags, drained ? c->writes_done : 0, drained ? c->eagers : 0};
  return srd_msg_encode_bye(buf, cap, c->peer_id, &b);
}

int srd_proto_send_bye(struct srd_comm *c, uint8_t flags) {
  struct bye_arg a = {c, flags};
  int rc = srd_comm_send_ctrl(c, FI_ADDR_UNSPEC, encode_bye, &a, NULL);
  if (rc == SRD_OK) c->bye_sent = true;
  return rc;
}

void srd_proto_notify_peer(struct srd_comm *c) {
  if (c->bye_sent || c->peer_closed || c->peer_lost || !c->ready) return;
  int rc = srd_proto_send_bye(c, 0);
  if (rc != SRD_OK && rc != SRD_AGAIN) c->peer_lost = true;
}

/* Has a receive comm taken everything its drained peer sent? */
static bool took_all(const struct srd_comm *c) {
  return c->peer_drained && c->eagers >= c->peer_eagers && c->writes_done >= c->peer_writes;
}

void srd_proto_bye_progress(struct srd_comm *c) {
  if (c->bye_sent) return;
  if (c->is_send) {
    if (c->bye_due && c->writes_in_flight == 0) srd_proto_send_bye(c, SRD_BYE_DRAINED);
  } else if (!c->peer_lost && took_all(c)) {
    srd_proto_send_bye(c, SRD_BYE_TAKEN);
  }
}

bool srd_proto_awaits_taken(const struct srd_comm *c) {
  return c->is_send && c->bye_sent && !c->peer_closed && !c->peer_lost;
}

bool srd_proto_awaits_notice(const struct srd_comm *c) {
  return !c->is_send && c->bye_sent && !c->peer_closed && !c->peer_lost;
}

static int quiet_slot(const struct srd_comm *c) {
  const struct srd_dev *dev = c->dev;
  for (int i = 0; i < SRD_QUIET_PEERS; i++)
    if (dev->quiet_peers[i].set && dev->quiet_peers[i].addr == c->peer[0] && dev->quiet_peers[i].pid == c->peer_pid)
      return i;
  return -1;
}

bool srd_proto_peer_quiet(const struct srd_comm *c) { return c->ready && quiet_slot(c) >= 0; }

void srd_proto_note_quiet_peer(struct srd_comm *c) {
  struct srd_dev *dev = c->dev;
  if (quiet_slot(c) >= 0) return;
  unsigned i = dev->quiet_next++ % SRD_QUIET_PEERS;
  dev->quiet_peers[i].addr = c->peer[0];
  dev->quiet_peers[i].pid = c->peer_pid;
  dev->quiet_peers[i].set = true;
}

bool srd_proto_peer_may_write(const struct srd_comm *c) {
  if (c->is_send || c->peer_lost || srd_recv_comm((struct srd_comm *)c)->cleared == 0) return false;
  return !c->peer_drained || c->writes_done < c->peer_writes;
}

/* The receiver closed: a send comm posts no more writes (the next isend
 * fails; a send's stripes not yet posted never are, and it fails once those
 * posted are over) and answers once the writes it posted are over. */
static void sender_stop(struct srd_comm *c) {
  for (int i = 0; i < SRD_REQS_PER_COMM; i++) {
    struct srd_req *r = c->reqs[i];
    if (!r || r->done || r->kind != SRD_REQ_SEND || r->posted == r->nstripes) continue;
    if (r->on_pending) srd_pending_remove(r);
    r->result = SRD_ERR_REMOTE;
    r->nstripes = r->posted;
    if (r->completed == r->nstripes) srd_req_finish(r, r->result);
  }
  c->bye_due = !c->bye_sent;
  srd_proto_bye_progress(c);
}

/* A send comm's notice: receives beyond its messages can never complete;
 * earlier ones still may (the notice can overtake data). */
static void receiver_on_bye(struct srd_comm *c, const struct srd_msg_bye *m) {
  if (m->flags & SRD_BYE_DRAINED) {
    c->peer_drained = true;
    c->peer_writes = m->writes;
    c->peer_eagers = m->eagers;
  }
  int failed = 0;
  for (int i = 0; i < SRD_REQS_PER_COMM; i++) {
    struct srd_req *r = c->reqs[i];
    if (r && !r->done && r->kind == SRD_REQ_RECV && srd_seq_before(m->next_seq, r->seq + (uint32_t)r->n)) {
      srd_req_finish(r, SRD_ERR_REMOTE);
      failed++;
    }
  }
  if (failed)
    SRD_WARN("recv comm %#x: the peer closed its send comm after %u messages; %d receive(s) fail", c->id,
             m->next_seq, failed);
  srd_proto_bye_progress(c);
}

void srd_proto_on_bye(struct srd_comm *c, const struct srd_msg_bye *m) {
  if (c->is_send && (m->flags & SRD_BYE_TAKEN)) {
    int quiet = quiet_slot(c);
    if (quiet >= 0) c->dev->quiet_peers[quiet].set = false; /* it answers again */
  }
  c->peer_closed = true;
  c->peer_final_seq = m->next_seq;
  if (c->is_send) sender_stop(c);
  else receiver_on_bye(c, m);
}

/* Does a receive of c that may still be written point into mr? */
static bool writes_into(struct srd_comm *c, const struct srd_mr_ref *mr) {
  for (int i = 0; i < SRD_REQS_PER_COMM; i++) {
    const struct srd_req *r = c->reqs[i];
    if (!r || r->kind != SRD_REQ_RECV || !r->cts_sent) continue;
    for (int j = 0; j < r->n; j++)
      if (!r->e[j].complete && r->e[j].mr == mr) return true;
  }
  return false;
}

/* Does a send of c read from mr: unfinished, or with writes still posted? */
static bool reads_from(const struct srd_comm *c, const struct srd_mr_ref *mr) {
  for (int i = 0; i < SRD_REQS_PER_COMM; i++) {
    const struct srd_req *r = c->reqs[i];
    if (r && r->kind == SRD_REQ_SEND && r->mr == mr && (!r->done || r->outstanding)) return true;
  }
  return false;
}

/* The unfinished sends from mr fail; those with writes posted keep their
 * slots until the provider is done with them. */
static void stop_sends_from(struct srd_comm *c, const struct srd_mr_ref *mr) {
  int failed = 0;
  for (int k = 0; k < SRD_REQS_PER_COMM; k++) {
    struct srd_req *r = c->reqs[k];
    if (r && r->kind == SRD_REQ_SEND && r->mr == mr && !r->done) {
      srd_req_finish(r, SRD_ERR_USAGE);
      failed++;
    }
  }
  if (failed)
    srd_comm_fail(c, SRD_ERR_USAGE, "the buffer of %d unfinished send(s) was deregistered: they stop", failed);
}

static void stop_receives_into(struct srd_comm *c) {
  srd_comm_fail(c, SRD_ERR_USAGE, "a buffer of an unfinished receive was deregistered: the peer stops writing");
  for (int k = 0; k < SRD_REQS_PER_COMM; k++)
    if (c->reqs[k] && !c->reqs[k]->done) srd_req_finish(c->reqs[k], SRD_ERR_USAGE);
  c->closing = true; /* writes still on their way only count (srd_proto_on_write) */
}

bool srd_proto_quiesce(struct srd_dev *dev, const struct srd_mr_ref *mr) {
  int n = 0;
  for (int i = 0; i < dev->comms_end; i++) {
    struct srd_comm *c = dev->comms[i];
    if (!c) continue;
    if (c->is_send && reads_from(c, mr)) stop_sends_from(c, mr);
    else if (!c->is_send && srd_proto_peer_may_write(c) && writes_into(c, mr)) stop_receives_into(c);
    else continue;
    n++;
  }
  if (!n) return true;
  uint64_t deadline = srd_now_ms() + (uint64_t)srd_param_int(SRD_PARAM_CLOSE_TIMEOUT_MS);
  for (;;) {
    int writers = 0, readers = 0;
    for (int i = 0; i < dev->comms_end; i++) {
      struct srd_comm *c = dev->comms[i];
      if (!c) continue;
      if (c->is_send) {
        readers += reads_from(c, mr);
      } else if (c->closing) {
        srd_proto_notify_peer(c);
        writers += srd_proto_peer_may_write(c);
      }
    }
    if (!writers && !readers) return true;
    if (srd_now_ms() >= deadline) {
      if (writers)
        SRD_WARN("device %d: %d receive comm(s) whose buffer was deregistered may still be written by their peer "
                 "(no close acknowledgement within NCCL_SRD_CLOSE_TIMEOUT_MS)", dev->index, writers);
      if (readers)
        SRD_WARN("device %d: %d send comm(s) still have writes from a deregistered buffer with the provider after "
                 "NCCL_SRD_CLOSE_TIMEOUT_MS: its registration stays open", dev->index, readers);
      return !readers;
    }
    srd_dev_wait_step(dev);
  }
}
