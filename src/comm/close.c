#include <stdio.h>

#include "srd/comm.h"
#include "srd/log.h"
#include "srd/param.h"

/* Still waiting: operations the provider holds (a send comm's writes, then
 * its notice), writes the peer completed that have not landed here yet, or
 * a send comm's peer that has not said it took all we sent, a receive
 * comm's peer that has not answered its notice (src/proto/bye.c). A notice the provider refuses is posted again while
 * the wait lasts. */
static bool close_busy(struct srd_comm *c, bool wait_taken) {
  /* A connect that never completed has only hellos in flight, in our own
   * buffers: nothing to wait for (efa holds them while a listener's process
   * does not progress, which made a failed connect take another timeout). */
  if (!c->ready) return false;
  return c->ops_in_flight > 0 || srd_proto_peer_may_write(c) ||
         (wait_taken && (srd_proto_awaits_taken(c) || srd_proto_awaits_notice(c)));
}

void srd_comm_close(struct srd_comm *c) {
  struct srd_dev *dev = c->dev;
  if (c->ready)
    SRD_INFO(NCCL_NET,
             "%s comm %#x closed: %llu eager message(s), %llu by RMA write in %llu write(s) (%llu on lane 0), "
             "%llu request(s) completed on a lane thread",
             c->is_send ? "send" : "recv", c->id,
             (unsigned long long)c->traffic.eager, (unsigned long long)c->traffic.rendezvous,
             (unsigned long long)c->traffic.writes, (unsigned long long)c->traffic.on_lane0,
             (unsigned long long)c->traffic.by_lane);
  c->closing = true;
  c->magic = 0; /* NCCL's handle is dead from here on, even if the memory waits on the provider */
  for (int i = 0; i < SRD_REQS_PER_COMM; i++)
    if (c->reqs[i] && !c->reqs[i]->done) srd_req_finish(c->reqs[i], SRD_ERR_USAGE);
  /* Tell the peer, so its pending calls fail instead of waiting, and, on a
   * receive comm, so that it stops writing and says how many writes it
   * completed; a send comm says so once its own writes are over. */
  if (c->is_send && c->ready && !c->bye_sent && !c->peer_lost) c->bye_due = true;
  uint64_t timeout = (uint64_t)srd_param_int(SRD_PARAM_CLOSE_TIMEOUT_MS), start = srd_now_ms();
  bool wait_taken = !srd_proto_peer_quiet(c);
  for (;;) {
    if (c->is_send) srd_proto_bye_progress(c);
    else srd_proto_notify_peer(c);
    if (!close_busy(c, wait_taken) || srd_now_ms() - start >= timeout) break;
    srd_dev_wait_step(dev);
  }
  /* Writes that outlived the wait: the peer's receives must still fail. */
  if (c->is_send && c->bye_due && !c->bye_sent) srd_proto_send_bye(c, 0);
  if (srd_proto_peer_may_write(c)) {
    char what[96];
    if (c->peer_drained)
      snprintf(what, sizeof what, "%llu of the peer's %llu writes landed", (unsigned long long)c->writes_done,
               (unsigned long long)c->peer_writes);
    else
      snprintf(what, sizeof what, "the peer did not answer the close notice");
    SRD_WARN("recv comm %#x closed while writes its peer was cleared to do may still land in its buffers: %s within "
             "NCCL_SRD_CLOSE_TIMEOUT_MS=%llu", c->id, what, (unsigned long long)timeout);
  }
  if (srd_proto_awaits_taken(c) && wait_taken) {
    srd_proto_note_quiet_peer(c);
    SRD_WARN("send comm %#x closed before its peer (process %u) said it took the %llu eager message(s) and %llu "
             "write(s) sent within NCCL_SRD_CLOSE_TIMEOUT_MS=%llu: on tcp, any of it not read yet is lost once this "
             "process exits; closes to that peer no longer wait until it answers one",
             c->id, c->peer_pid, (unsigned long long)c->eagers, (unsigned long long)c->writes_done,
             (unsigned long long)timeout);
  } else if (srd_proto_awaits_notice(c) && wait_taken) {
    srd_proto_note_quiet_peer(c);
    SRD_INFO(NCCL_NET, "recv comm %#x closed without its peer's (process %u) close notice within "
             "NCCL_SRD_CLOSE_TIMEOUT_MS=%llu; closes to that peer no longer wait for it", c->id, c->peer_pid,
             (unsigned long long)timeout);
  } else if (srd_proto_awaits_taken(c)) {
    SRD_INFO(NCCL_NET, "send comm %#x closed without waiting for its peer (process %u), which left an earlier "
             "close unanswered", c->id, c->peer_pid);
  }
  if (c->ops_in_flight > 0) {
    SRD_WARN("comm %#x closed with %d operations still held by the provider; freed when they complete", c->id,
             c->ops_in_flight);
    srd_comm_retire(c);
    return;
  }
  srd_comm_free(c);
}
