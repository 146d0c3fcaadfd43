/* Control messages to a comm's peer: take a buffer on the next path, let the
 * caller's encoder fill it, post. One place for the buffer's life: given
 * back when nothing was posted, by ctrl_done when the send completes. */
#include <rdma/fi_errno.h>

#include "srd/proto.h"

static void ctrl_done(struct srd_op *op, int err, const char *errstr) {
  struct srd_rail_buf *b = (struct srd_rail_buf *)op;
  struct srd_comm *c = op->owner;
  struct srd_req *req = op->aux;
  c->dev->rail_ops->put_send_buf(b);
  c->ops_in_flight--;
  if (err) {
    c->peer_lost = true; /* no close handshake waits on it */
    srd_comm_fail(c, SRD_ERR_REMOTE, "control message to the peer failed: %s", errstr ? errstr : fi_strerror(-err));
  }
  if (req) {
    srd_req_finish(req, err ? SRD_ERR_REMOTE : SRD_OK);
    srd_req_op_done(req);
  }
  srd_proto_bye_progress(c);
}

int srd_comm_send_ctrl(struct srd_comm *c, fi_addr_t dest, srd_ctrl_encoder encode, const void *arg,
                       struct srd_req *req) {
  struct srd_dev *dev = c->dev;
  const struct srd_rail_ops *ops = dev->rail_ops;
  /* To an explicit address (the handshake): rail 0, endpoint 0, the address
   * the peer's handle names. Otherwise the paths take turns. */
  int path = dest == FI_ADDR_UNSPEC ? (int)(c->ctrl_cursor % (unsigned)dev->npaths) : 0;
  struct srd_rail *rail = &dev->rails[path / dev->neps];
  struct srd_rail_buf *b = ops->get_send_buf(rail);
  if (!b) return SRD_AGAIN;
  size_t len = encode(b->data, rail->buf_size, arg);
  if (!len) {
    ops->put_send_buf(b);
    srd_comm_fail(c, SRD_ERR_INTERNAL, "a control message does not fit the %zu-byte buffer", rail->buf_size);
    return c->result;
  }
  srd_msg_set_token(b->data, c->peer_token);
  if (dest == FI_ADDR_UNSPEC) {
    c->ctrl_cursor++;
    dest = c->peer[path];
  }
  b->op.done = ctrl_done;
  b->op.owner = c;
  b->op.aux = req;
  int rc = ops->send(rail, path % dev->neps, b, len, dest);
  if (rc) {
    ops->put_send_buf(b);
    if (rc == -FI_EAGAIN) return SRD_AGAIN;
    srd_comm_fail(c, SRD_ERR_SYSTEM, "posting a control message failed: %s", fi_strerror(-rc));
    return c->result;
  }
  c->ops_in_flight++;
  return SRD_OK;
}
