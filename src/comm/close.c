#include "srd/comm.h"
#include "srd/log.h"
#include "srd/param.h"

/* Best effort: tell the peer, so its pending calls fail instead of waiting. */
static size_t encode_bye(void *buf, size_t cap, const void *arg) {
  const struct srd_comm *c = arg;
  return srd_msg_encode_bye(buf, cap, c->peer_id, c->next_seq);
}

static void send_bye(struct srd_comm *c) { srd_comm_send_ctrl(c, FI_ADDR_UNSPEC, encode_bye, c, NULL); }

void srd_comm_close(struct srd_comm *c) {
  struct srd_dev *dev = c->dev;
  if (c->ready)
    SRD_INFO(NCCL_NET, "%s comm %#x closed: %llu eager message(s), %llu by RMA write in %llu write(s), "
             "%llu request(s) completed on a lane thread", c->is_send ? "send" : "recv", c->id,
             (unsigned long long)c->traffic.eager, (unsigned long long)c->traffic.rendezvous,
             (unsigned long long)c->traffic.writes, (unsigned long long)c->traffic.by_lane);
  if (c->ready && !c->result && !c->peer_closed) send_bye(c);
  c->closing = true;
  c->magic = 0; /* NCCL's handle is dead from here on, even if the memory waits on the provider */
  for (int i = 0; i < SRD_REQS_PER_COMM; i++)
    if (c->reqs[i] && !c->reqs[i]->done) srd_req_finish(c->reqs[i], SRD_ERR_USAGE);
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
