#include "nccl/types.h"
#include "srd/comm.h"
#include "srd/log.h"
#include "srd/param.h"

/* Best effort: tell the peer, so its pending calls fail instead of waiting. */
static void send_bye(struct srd_comm *c) {
  int path;
  struct srd_rail_buf *b = srd_comm_ctrl_buf(c, &path);
  if (!b) return;
  size_t len = srd_msg_encode_bye(b->data, c->dev->rails[path / c->dev->neps].buf_size, c->peer_id, c->next_seq);
  srd_comm_post_ctrl(c, b, path, len, NULL);
}

void srd_comm_close(struct srd_comm *c) {
  struct srd_dev *dev = c->dev;
  if (c->ready)
    SRD_INFO(NCCL_NET, "%s comm %#x closed: %llu eager message(s), %llu by RMA write in %llu write(s)",
             c->is_send ? "send" : "recv", c->id, (unsigned long long)c->traffic.eager,
             (unsigned long long)c->traffic.rendezvous, (unsigned long long)c->traffic.writes);
  if (c->ready && !c->result && !c->peer_closed) send_bye(c);
  c->closing = true;
  for (int i = 0; i < SRD_REQS_PER_COMM; i++)
    if (c->reqs[i].in_use && !c->reqs[i].done) srd_req_finish(&c->reqs[i], ncclInvalidUsage);
  uint64_t deadline = srd_now_ms() + (uint64_t)srd_param_int(SRD_PARAM_CLOSE_TIMEOUT_MS);
  while (c->ops_in_flight > 0 && srd_now_ms() < deadline) srd_dev_wait_step(dev);
  if (c->ops_in_flight > 0) {
    SRD_WARN("comm %#x closed with %d operations still held by the provider; freed when they complete", c->id,
             c->ops_in_flight);
    srd_comm_retire(c);
    return;
  }
  srd_comm_free(c);
}
