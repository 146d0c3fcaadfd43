/* Control messages to a comm's peer: a buffer on the next path, posted. */
#include <rdma/fi_errno.h>

#include "nccl/types.h"
#include "srd/proto.h"

static void ctrl_done(struct srd_op *op, int err, const char *errstr) {
  struct srd_rail_buf *b = (struct srd_rail_buf *)op;
  struct srd_comm *c = op->owner;
  struct srd_req *req = op->aux;
  srd_rail_put_send_buf(b);
  if (!c) return;
  c->ops_in_flight--;
  if (err) srd_comm_fail(c, ncclRemoteError, "control message to the peer failed: %s", errstr ? errstr : fi_strerror(-err));
  if (req) {
    srd_req_finish(req, err ? ncclRemoteError : ncclSuccess);
    srd_req_op_done(req);
  }
}

struct srd_rail_buf *srd_comm_ctrl_buf(struct srd_comm *c, int *path) {
  struct srd_dev *dev = c->dev;
  int p = (int)(c->ctrl_cursor % (unsigned)dev->npaths);
  struct srd_rail_buf *b = srd_rail_get_send_buf(&dev->rails[p / dev->neps]);
  if (!b) return NULL;
  c->ctrl_cursor++;
  *path = p;
  return b;
}

int srd_comm_post_ctrl(struct srd_comm *c, struct srd_rail_buf *b, int path, size_t len, struct srd_req *req) {
  return srd_comm_post_ctrl_to(c, b, path, c->peer[path], len, req);
}

int srd_comm_post_ctrl_to(struct srd_comm *c, struct srd_rail_buf *b, int path, fi_addr_t dest, size_t len,
                          struct srd_req *req) {
  struct srd_dev *dev = c->dev;
  b->op.done = ctrl_done;
  b->op.owner = c;
  b->op.aux = req;
  int rc = srd_rail_send(&dev->rails[path / dev->neps], path % dev->neps, b, len, dest);
  if (rc) {
    srd_rail_put_send_buf(b);
    if (rc != -FI_EAGAIN) srd_comm_fail(c, ncclSystemError, "posting a control message failed: %s", fi_strerror(-rc));
    return rc;
  }
  c->ops_in_flight++;
  return 0;
}
