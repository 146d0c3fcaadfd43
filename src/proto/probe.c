/* Liveness. A peer is gone only on evidence that it is: an operation to it
 * that completes with an error (tcp: the connection reset; efa: the device
 * gave up after SRD's retries), a post the provider fails outright, its
 * process gone (shm), its listening address refusing connections (tcp,
 * whose providers only ever answer try-later then). A post the provider
 * refuses (try later) is backpressure: a busy, paused or slower peer; it is
 * tried again. Silence alone is logged as a warning and fails a comm only
 * past NCCL_SRD_PEER_TIMEOUT_MS, which the user sets (off by default). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>

#include <rdma/fi_errno.h>

#include "srd/log.h"
#include "srd/param.h"
#include "srd/proto.h"

/* Repeated warnings about one silence are spaced at most this far apart. */
#define SILENT_WARN_GAP_MAX_MS (10 * 60 * 1000)

static size_t encode_ping(void *buf, size_t cap, const void *arg) {
  const struct srd_comm *c = arg;
  return srd_msg_encode_ping(buf, cap, c->peer_id);
}

/* A probe into a broken connection comes back as an error completion
 * (ctrl_done: the comm fails with the provider's reason). One the provider
 * refuses holds no buffer and goes again at the next scan. */
static void send_ping(struct srd_comm *c, uint64_t now) {
  int rc = srd_comm_send_ctrl(c, FI_ADDR_UNSPEC, encode_ping, c, NULL);
  if (rc == SRD_OK) c->last_ping_ms = now;
  c->ping_refused = rc == SRD_AGAIN;
}

/* While the provider refuses probes, is there evidence that the peer is
 * gone? (tcp: its listening address refuses connections.) */
static bool peer_endpoint_gone(struct srd_comm *c, uint64_t now, uint64_t quiet) {
  struct srd_dev *dev = c->dev;
  if (!c->ping_refused || !dev->rail_ops->peer_refused(&dev->rails[0], c->peer[0], now, quiet)) return false;
  c->peer_lost = true;
  srd_comm_fail(c, SRD_ERR_REMOTE,
                "peer gone: its provider refuses our messages and its address on rail %s refuses connections "
                "(silent for %llu ms)",
                dev->rails[0].name, (unsigned long long)(now - c->last_heard_ms));
  return true;
}

/* shm has no transport-level failure detection; its peers share our host.
 * True when the peer's process is gone (the comm fails at the next scan). */
static bool shm_peer_exited(struct srd_comm *c, uint64_t now, bool gone) {
  if (!gone) return false;
  /* What the peer wrote or sent before it exited may still wait in our
   * CQ (its sends completed on its side): fail only at the next scan, after
   * progress has dispatched it. */
  if (!c->peer_gone_ms) c->peer_gone_ms = now;
  else if (now > c->peer_gone_ms) {
    c->peer_lost = true;
    srd_comm_fail(c, SRD_ERR_REMOTE, "peer process %u exited", c->peer_pid);
  }
  return true;
}

struct silence {
  int comms;          /* waiting comms whose peer is silent past NCCL_SRD_SILENT_WARN_MS */
  uint64_t longest;   /* the longest of those silences */
  uint32_t comm, pid; /* the comm with the longest, and its peer's process */
};

/* One line per device for all silent peers, rate-limited: the first after
 * NCCL_SRD_SILENT_WARN_MS, then after gaps that double while the silence
 * lasts; one more when every peer was heard again. */
static void warn_silence(struct srd_dev *dev, const struct silence *s, uint64_t now, uint64_t warn_ms) {
  if (!s->comms) {
    if (dev->silent_warned) SRD_WARN("device %d: no comm waits on a silent peer any more", dev->index);
    dev->silent_warned = false;
    dev->silent_warn_next_ms = 0;
    dev->silent_warn_gap_ms = warn_ms;
    return;
  }
  if (now < dev->silent_warn_next_ms) return;
  long long timeout = (long long)srd_param_int(SRD_PARAM_PEER_TIMEOUT_MS);
  char bound[96];
  if (timeout) snprintf(bound, sizeof bound, "until NCCL_SRD_PEER_TIMEOUT_MS=%lld", timeout);
  else snprintf(bound, sizeof bound, "without bound (NCCL_SRD_PEER_TIMEOUT_MS=0)");
  SRD_WARN("device %d: %d comm(s) wait on peers that were silent for up to %.1f s (comm %#x, peer pid %u): a slow, "
           "paused or overloaded peer; still waiting %s",
           dev->index, s->comms, (double)s->longest / 1000, s->comm, s->pid, bound);
  dev->silent_warned = true;
  if (dev->silent_warn_gap_ms < warn_ms) dev->silent_warn_gap_ms = warn_ms;
  dev->silent_warn_next_ms = now + dev->silent_warn_gap_ms;
  /* Doubled, then cut to the cap: 30 s doubles to 480 s, then 600 s, not 960. */
  dev->silent_warn_gap_ms *= 2;
  if (dev->silent_warn_gap_ms > SILENT_WARN_GAP_MAX_MS) dev->silent_warn_gap_ms = SILENT_WARN_GAP_MAX_MS;
}

/* A comm that waits on its peer and has heard nothing for
 * NCCL_SRD_KEEPALIVE_MS probes it; silence is warned about, and fails the
 * comm only past the user's NCCL_SRD_PEER_TIMEOUT_MS. */
void srd_dev_probe_silent_peers(struct srd_dev *dev, uint64_t now) {
  uint64_t quiet = (uint64_t)srd_param_int(SRD_PARAM_KEEPALIVE_MS);
  uint64_t warn_ms = (uint64_t)srd_param_int(SRD_PARAM_SILENT_WARN_MS);
  uint64_t timeout = (uint64_t)srd_param_int(SRD_PARAM_PEER_TIMEOUT_MS);
  uint32_t last_pid = 0; /* many comms share a peer: ask about it once per scan */
  bool last_gone = false;
  struct silence s = {0};
  for (int i = 0; i < dev->comms_end; i++) {
    struct srd_comm *c = dev->comms[i];
    if (c && c->bye_due) srd_proto_bye_progress(c); /* the provider refused it earlier */
    if (!c || !c->ready || c->result || c->closing) continue;
    if (dev->host_local && c->peer_pid && c->peer_pid != last_pid) {
      last_pid = c->peer_pid;
      last_gone = kill((pid_t)c->peer_pid, 0) && errno == ESRCH;
    }
    if (dev->host_local && c->peer_pid && shm_peer_exited(c, now, last_gone)) continue;
    bool waiting = c->reqs_in_flight > 0 || now - c->last_wait_ms < 2 * quiet;
    uint64_t silent = now > c->last_heard_ms ? now - c->last_heard_ms : 0;
    if (!waiting || silent <= quiet) continue;
    if (timeout && silent > timeout) {
      srd_comm_fail(c, SRD_ERR_REMOTE, "peer silent for %llu ms, past NCCL_SRD_PEER_TIMEOUT_MS=%llu",
                    (unsigned long long)silent, (unsigned long long)timeout);
      continue;
    }
    if (now - c->last_ping_ms > quiet) send_ping(c, now);
    if (peer_endpoint_gone(c, now, quiet)) continue;
    if (silent >= warn_ms) {
      s.comms++;
      if (silent > s.longest) s = (struct silence){s.comms, silent, c->id, c->peer_pid};
    }
  }
  warn_silence(dev, &s, now, warn_ms);
}
