/* Liveness: probes to silent peers and rails that lost their link. */
#include <errno.h>
#include <signal.h>

#include <rdma/fi_errno.h>

#include "srd/log.h"
#include "srd/param.h"
#include "srd/proto.h"

/* A probe the provider refuses for this long (tcp reconnecting to a dead
 * peer refuses forever) means the peer is gone. */
#define PROBE_REFUSALS_MS_FACTOR 4

static size_t encode_ping(void *buf, size_t cap, const void *arg) {
  const struct srd_comm *c = arg;
  return srd_msg_encode_ping(buf, cap, c->peer_id);
}

static void send_ping(struct srd_comm *c, uint64_t now, uint64_t quiet) {
  int rc = srd_comm_send_ctrl(c, FI_ADDR_UNSPEC, encode_ping, c, NULL);
  if (rc == SRD_OK) {
    c->last_ping_ms = now;
    c->probe_refused_since_ms = 0;
  } else if (rc == SRD_AGAIN) {
    /* A refusal counts toward the peer's loss only while nothing has been
     * heard from it since the first one: a busy provider refuses now and
     * then, minutes apart, and those refusals are not one long silence. */
    if (!c->probe_refused_since_ms || c->last_heard_ms >= c->probe_refused_since_ms)
      c->probe_refused_since_ms = now;
    else if (now - c->probe_refused_since_ms > PROBE_REFUSALS_MS_FACTOR * quiet) {
      c->peer_lost = true;
      srd_comm_fail(c, SRD_ERR_REMOTE, "peer unreachable: silent for %llu ms and the provider refuses to reach it",
                    (unsigned long long)(now - c->last_heard_ms));
    }
  }
}

/* A comm that waits on its peer and has heard nothing for a while probes it:
 * a vanished peer then fails the probe, and the comm, within seconds. */
void srd_dev_probe_silent_peers(struct srd_dev *dev, uint64_t now) {
  uint64_t quiet = (uint64_t)srd_param_int(SRD_PARAM_KEEPALIVE_MS);
  uint32_t last_pid = 0; /* many comms share a peer: ask about it once per scan */
  bool last_gone = false;
  for (int i = 0; i < dev->comms_end; i++) {
    struct srd_comm *c = dev->comms[i];
    if (c && c->bye_due) srd_proto_bye_progress(c); /* the provider refused it earlier */
    if (!c || !c->ready || c->result || c->closing) continue;
    /* shm has no transport-level failure detection; its peers share our host. */
    if (dev->host_local && c->peer_pid && c->peer_pid != last_pid) {
      last_pid = c->peer_pid;
      last_gone = kill((pid_t)c->peer_pid, 0) && errno == ESRCH;
    }
    /* What the peer wrote or sent before it exited may still wait in our
     * CQ (its sends completed on its side): fail only at the next scan, after
     * progress has dispatched it. */
    if (dev->host_local && c->peer_pid && last_gone) {
      if (!c->peer_gone_ms) c->peer_gone_ms = now;
      else if (now > c->peer_gone_ms) {
        c->peer_lost = true;
        srd_comm_fail(c, SRD_ERR_REMOTE, "peer process %u exited", c->peer_pid);
      }
      continue;
    }
    bool waiting = c->reqs_in_flight > 0 || now - c->last_wait_ms < 2 * quiet;
    if (waiting && now - c->last_heard_ms > quiet && now - c->last_ping_ms > quiet) send_ping(c, now, quiet);
  }
}
