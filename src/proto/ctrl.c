/* Control messages to a comm's peer: take a buffer on the next usable path
 * of lane 0 (the caller's thread polls those, so no control message waits on
 * a lane thread), let the caller's encoder fill it, post. One place for the buffer's life:
 * given back when nothing was posted, by ctrl_done when the send completes.
 * With failover a message that failed on one rail goes again on another. */
#include <stdio.h>
#include <string.h>

#include <rdma/fi_errno.h>

#include "srd/log.h"
#include "srd/proto.h"

typedef void (*op_done_fn)(struct srd_op *op, int err, const char *errstr);
static void ctrl_done(struct srd_op *op, int err, const char *errstr);

/* Post the len bytes already in b (taken from the rail of path) to the peer;
 * aux is for done (ctrl_done: the request it finishes; probe_done: the round).
 * SRD_OK, SRD_AGAIN, or the provider's refusal as -FI_* (b given back): what
 * a refusal means is the caller's to say. */
static int post(struct srd_comm *c, int path, fi_addr_t dest, struct srd_rail_buf *b, size_t len, void *aux,
                op_done_fn done) {
  struct srd_dev *dev = c->dev;
  b->len = len;
  b->op.done = done;
  b->op.owner = c;
  b->op.aux = aux;
  int rc = dev->rail_ops->send(&dev->rails[path / dev->neps], path % dev->neps, b, len, dest);
  if (rc) {
    dev->rail_ops->put_send_buf(b);
    return rc == -FI_EAGAIN ? SRD_AGAIN : rc;
  }
  c->ops_in_flight++;
  c->ctrl_on_rail[path / dev->neps]++;
  return SRD_OK;
}

/* Every control message's completion, whatever its kind. */
static void ctrl_sent(struct srd_comm *c, const struct srd_rail_buf *b) {
  c->ops_in_flight--;
  c->ctrl_on_rail[b->rail - c->dev->rails]--;
}

/* A control message the provider refused fails its comm. */
static int refused_fails_comm(struct srd_comm *c, int rc) {
  if (rc >= 0) return rc;
  srd_comm_fail(c, SRD_ERR_SYSTEM, "posting a control message failed: %s", fi_strerror(-rc));
  return c->result;
}

/* The next path of lane 0 that failover allows; -1 when none. */
static int next_path(struct srd_comm *c) {
  int path = srd_sched_pick(c->dev->inline_paths, srd_comm_usable_paths(c), c->ctrl_cursor);
  if (path >= 0) c->ctrl_cursor++;
  return path;
}

/* The message in b failed on its rail: the same bytes again on another one.
 * False when none is left or nothing could be posted (c then fails). */
static bool resend(struct srd_comm *c, const struct srd_rail_buf *b, struct srd_req *req) {
  int path = next_path(c);
  if (path < 0 || c->result) return false;
  struct srd_dev *dev = c->dev;
  struct srd_rail_buf *nb = dev->rail_ops->get_send_buf(&dev->rails[path / dev->neps]);
  if (!nb) return false;
  memcpy(nb->data, b->data, b->len);
  return refused_fails_comm(c, post(c, path, c->peer[path], nb, b->len, req, ctrl_done)) == SRD_OK;
}

static void ctrl_done(struct srd_op *op, int err, const char *errstr) {
  struct srd_rail_buf *b = (struct srd_rail_buf *)op;
  struct srd_comm *c = op->owner;
  struct srd_req *req = op->aux;
  struct srd_dev *dev = c->dev;
  ctrl_sent(c, b);
  if (err && dev->failover && c->ready && !c->result) {
    char why[160];
    snprintf(why, sizeof(why), "control message failed: %s", errstr ? errstr : fi_strerror(-err));
    srd_comm_rail_failed(c, (int)(b->rail - dev->rails), why);
    if (resend(c, b, req)) {
      dev->rail_ops->put_send_buf(b);
      return; /* req follows the copy */
    }
  }
  dev->rail_ops->put_send_buf(b);
  if (err) {
    c->peer_lost = true; /* no close handshake waits on it */
    /* A receive comm that said it took all its closed peer sent keeps what
     * it took: that peer may well have exited since. */
    if (!c->is_send && c->peer_closed && c->bye_sent)
      SRD_INFO(NCCL_NET, "recv comm %#x: a control message to the closed peer failed: %s", c->id,
               errstr ? errstr : fi_strerror(-err));
    else
      srd_comm_fail(c, SRD_ERR_REMOTE, "control message to the peer failed: %s", errstr ? errstr : fi_strerror(-err));
  }
  if (req) {
    srd_req_finish(req, err ? SRD_ERR_REMOTE : SRD_OK);
    srd_req_op_done(req);
  }
  srd_proto_bye_progress(c);
}

/* Encode into a buffer of path's rail and post it: post's answers, or the
 * comm's error when the message does not fit. */
static int send_on(struct srd_comm *c, int path, fi_addr_t dest, srd_ctrl_encoder encode, const void *arg,
                   void *aux, op_done_fn done) {
  struct srd_dev *dev = c->dev;
  struct srd_rail *rail = &dev->rails[path / dev->neps];
  struct srd_rail_buf *b = dev->rail_ops->get_send_buf(rail);
  if (!b) return SRD_AGAIN;
  size_t len = encode(b->data, rail->buf_size, arg);
  if (!len) {
    dev->rail_ops->put_send_buf(b);
    srd_comm_fail(c, SRD_ERR_INTERNAL, "a control message does not fit the %zu-byte buffer", rail->buf_size);
    return c->result;
  }
  srd_msg_set_token(b->data, c->peer_token);
  return post(c, path, dest, b, len, aux, done);
}

int srd_comm_send_ctrl(struct srd_comm *c, fi_addr_t dest, srd_ctrl_encoder encode, const void *arg,
                       struct srd_req *req) {
  /* To an explicit address (the handshake): rail 0, endpoint 0, the address
   * the peer's handle names. Otherwise the usable paths of lane 0 take turns. */
  if (dest != FI_ADDR_UNSPEC) return refused_fails_comm(c, send_on(c, 0, dest, encode, arg, req, ctrl_done));
  int path = (int)(c->ctrl_cursor % (unsigned)c->dev->inline_paths);
  if (c->dev->failover) {
    path = srd_sched_pick(c->dev->inline_paths, srd_comm_usable_paths(c), c->ctrl_cursor);
    if (path < 0) {
      srd_comm_fail_no_rail(c);
      return c->result;
    }
  }
  int rc = refused_fails_comm(c, send_on(c, path, c->peer[path], encode, arg, req, ctrl_done));
  if (rc == SRD_OK) c->ctrl_cursor++;
  return rc;
}

/* The answer's outcome is accept()'s to judge: a stranger's hello naming a
 * dead address is logged there, limited, not as a comm failure. */
static void answer_sent(struct srd_op *op, int err, const char *errstr) {
  struct srd_rail_buf *b = (struct srd_rail_buf *)op;
  struct srd_comm *c = op->owner;
  ctrl_sent(c, b);
  if (err) snprintf(c->error, sizeof(c->error), "%s", errstr ? errstr : fi_strerror(-err));
  c->answer = err ? SRD_ANSWER_FAILED : SRD_ANSWER_DELIVERED;
  c->dev->rail_ops->put_send_buf(b);
}

int srd_comm_send_answer(struct srd_comm *c, fi_addr_t dest, srd_ctrl_encoder encode, const void *arg) {
  int rc = send_on(c, 0, dest, encode, arg, NULL, answer_sent);
  if (rc == SRD_OK) c->answer = SRD_ANSWER_POSTED;
  if (rc < 0) snprintf(c->error, sizeof(c->error), "%s", fi_strerror(-rc)); /* the provider refused it */
  return rc;
}

struct probe_msg {
  const struct srd_comm *c;
  struct srd_msg_probe m;
};

static size_t encode_probe(void *buf, size_t cap, const void *arg) {
  const struct probe_msg *p = arg;
  return srd_msg_encode_probe(buf, cap, p->c->peer_id, &p->m);
}

/* A probe request's send: a failure fails its round (if still current). */
static void probe_done(struct srd_op *op, int err, const char *errstr) {
  struct srd_rail_buf *b = (struct srd_rail_buf *)op;
  struct srd_comm *c = op->owner;
  struct srd_dev *dev = c->dev;
  struct srd_rail_health *h = &dev->health[b->rail - dev->rails];
  ctrl_sent(c, b);
  h->probes_out--;
  if (err) {
    if (h->probing && (uint32_t)(uintptr_t)op->aux == h->round) h->probes_failed++;
    SRD_INFO(NCCL_NET, "rail %s: probe to the peer of comm %#x failed: %s", b->rail->name, c->id,
             errstr ? errstr : fi_strerror(-err));
  }
  dev->rail_ops->put_send_buf(b);
}

/* An answer's send: nothing waits on it (the prober times its round out). */
static void probe_answer_done(struct srd_op *op, int err, const char *errstr) {
  struct srd_rail_buf *b = (struct srd_rail_buf *)op;
  struct srd_comm *c = op->owner;
  ctrl_sent(c, b);
  if (err)
    SRD_INFO(NCCL_NET, "rail %s: answer to a probe of comm %#x's peer failed: %s", b->rail->name, c->id,
             errstr ? errstr : fi_strerror(-err));
  c->dev->rail_ops->put_send_buf(b);
}

/* A probe or its answer goes on a rail that is down: one the provider
 * refuses fails its round, not the comm (its text logged). */
static int refused_fails_round(struct srd_comm *c, int l, int rc) {
  if (rc >= 0) return rc;
  SRD_INFO(NCCL_NET, "rail %s: posting a rail probe for comm %#x failed: %s", c->dev->rails[l].name, c->id,
           fi_strerror(-rc));
  return SRD_ERR_SYSTEM;
}

int srd_comm_probe_rail(struct srd_comm *c, int l, uint32_t round) {
  int path = l * c->dev->neps;
  struct probe_msg p = {c, {(uint8_t)l, 0, round}};
  return refused_fails_round(
      c, l, send_on(c, path, c->peer[path], encode_probe, &p, (void *)(uintptr_t)round, probe_done));
}

int srd_comm_answer_probe(struct srd_comm *c, int l, fi_addr_t src, const struct srd_msg_probe *m) {
  struct probe_msg p = {c, {m->rail, 1, m->round}};
  return refused_fails_round(c, l, send_on(c, l * c->dev->neps, src, encode_probe, &p, NULL, probe_answer_done));
}
