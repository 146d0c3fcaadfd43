#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <rdma/fi_errno.h>

#include "nccl/net_common.h"
#include "srd/log.h"
#include "srd/param.h"
#include "srd/proto.h"

#define POLL_BUDGET 64
#define SCAN_INTERVAL_MS 100

uint64_t srd_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t srd_random64(void) {
  uint64_t v = 0;
  while (getrandom(&v, sizeof(v), 0) != sizeof(v) || v == 0) {
  }
  return v;
}

static void on_message(void *arg, struct srd_rail *rail, const void *buf, size_t len);
static void on_remote_write(void *arg, struct srd_rail *rail, uint32_t imm, size_t len);
static void on_rail_error(void *arg, struct srd_rail *rail, int err, const char *errstr);

static void free_closed(struct srd_dev *dev, bool all);

static size_t ctrl_buf_size(const struct srd_dev *dev) {
  size_t hello = 32 + (size_t)SRD_MAX_PATHS * SRD_NAME_MAX;
  size_t cts = 16 + (size_t)SRD_MAX_RECVS * (20 + 8 * SRD_MAX_RAILS);
  size_t eager = 32 + dev->eager_max;
  size_t m = hello > cts ? hello : cts;
  return m > eager ? m : eager;
}

int srd_dev_open(struct srd_dev *dev) {
  struct srd_rail_handlers h = {on_message, on_remote_write, on_rail_error, dev};
  dev->neps = (int)srd_param_int(SRD_PARAM_EPS_PER_RAIL);
  dev->eager_max = (size_t)srd_param_int(SRD_PARAM_EAGER_MAX);
  dev->nrails = dev->group.nrails;
  dev->rails = calloc((size_t)dev->nrails, sizeof(*dev->rails));
  if (!dev->rails) return -FI_ENOMEM;
  size_t max_write = SIZE_MAX;
  for (int i = 0; i < dev->nrails; i++) {
    const struct srd_nic *nic = &dev->nics->nics[dev->group.rails[i]];
    int rc = srd_rail_open(&dev->rails[i], i, nic->info, dev->neps, ctrl_buf_size(dev), &h);
    if (rc) {
      while (i-- > 0) srd_rail_close(&dev->rails[i]);
      free(dev->rails);
      dev->rails = NULL;
      return rc;
    }
    if (dev->rails[i].max_write < max_write) max_write = dev->rails[i].max_write;
    SRD_INFO(NCCL_INIT | NCCL_NET, "device %d rail %d: %s (%d Mbps, PCI %s, NUMA %d), %d endpoint(s)", dev->index, i,
             nic->name, nic->speed_mbps, nic->pci_bus_id[0] ? nic->pci_bus_id : "none", nic->numa, dev->neps);
  }
  dev->npaths = dev->nrails * dev->neps;
  dev->host_local = !strcmp(dev->rails[0].info->fabric_attr->prov_name, "shm");
  dev->sched.npaths = dev->npaths;
  dev->sched.threshold = (size_t)srd_param_int(SRD_PARAM_STRIPE_THRESHOLD);
  dev->sched.min_stripe = (size_t)srd_param_int(SRD_PARAM_MIN_STRIPE);
  dev->sched.max_write = max_write;
  dev->next_listener_id = (uint32_t)srd_random64();
  dev->open = true;
  return 0;
}

void srd_dev_close(struct srd_dev *dev) {
  if (!dev->open) return;
  for (int i = 0; i < dev->nrails; i++) srd_rail_close(&dev->rails[i]);
  free_closed(dev, true);
  free(dev->rails);
  dev->rails = NULL;
  dev->open = false;
}

struct srd_comm *srd_dev_comm_by_id(struct srd_dev *dev, uint32_t id) {
  struct srd_comm *c = dev->comms[id & (SRD_MAX_COMMS - 1)];
  return c && c->id == id ? c : NULL;
}

struct srd_comm *srd_comm_alloc(struct srd_dev *dev, bool is_send) {
  int idx;
  for (idx = 0; idx < SRD_MAX_COMMS && dev->comms[idx]; idx++) {
  }
  if (idx == SRD_MAX_COMMS) {
    SRD_WARN("device %d: all %d comms in use", dev->index, SRD_MAX_COMMS);
    return NULL;
  }
  struct srd_comm *c = calloc(1, sizeof(*c));
  if (!c) return NULL;
  c->dev = dev;
  c->is_send = is_send;
  c->id = (uint32_t)idx | (++dev->gen[idx] & 0xfffffu) << SRD_COMM_INDEX_BITS;
  c->last_heard_ms = srd_now_ms();
  c->listener_addr = FI_ADDR_NOTAVAIL;
  for (int i = 0; i < SRD_REQS_PER_COMM; i++) c->reqs[i].comm = c;
  dev->comms[idx] = c;
  dev->ncomms++;
  return c;
}

static void detach(struct srd_comm *c) {
  struct srd_dev *dev = c->dev;
  if (dev->comms[c->id & (SRD_MAX_COMMS - 1)] != c) return;
  dev->comms[c->id & (SRD_MAX_COMMS - 1)] = NULL;
  dev->ncomms--;
}

void srd_comm_retire(struct srd_comm *c) {
  detach(c);
  c->next_closed = c->dev->closed;
  c->dev->closed = c;
}

/* Free closed comms whose last operation completed; all of them when the
 * device's rails are gone (no completion can arrive any more). */
static void free_closed(struct srd_dev *dev, bool all) {
  for (struct srd_comm **p = &dev->closed; *p;) {
    struct srd_comm *c = *p;
    if (all || c->ops_in_flight == 0) {
      *p = c->next_closed;
      srd_comm_free(c);
    } else {
      p = &c->next_closed;
    }
  }
}

void srd_comm_free(struct srd_comm *c) {
  struct srd_dev *dev = c->dev;
  if (c->listener_addr != FI_ADDR_NOTAVAIL) srd_rail_av_remove(&dev->rails[0], c->listener_addr);
  if (c->inserted)
    for (int i = 0; i < dev->nrails * c->remote_rails * c->remote_eps; i++)
      if (c->inserted[i] != FI_ADDR_NOTAVAIL) srd_rail_av_remove(&dev->rails[i / (c->remote_rails * c->remote_eps)],
                                                                 c->inserted[i]);
  while (c->early) {
    struct srd_early_msg *e = c->early;
    c->early = e->next;
    free(e);
  }
  while (c->unexpected) {
    struct srd_unexpected *u = c->unexpected;
    c->unexpected = u->next;
    free(u);
  }
  for (int i = 0; i < SRD_CTS_RECORDS; i++) free(c->cts[i].keys);
  detach(c);
  free(c->peer);
  free(c->inserted);
  free(c);
}

void srd_comm_fail(struct srd_comm *c, int result, const char *fmt, ...) {
  if (c->result) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->error, sizeof(c->error), fmt, ap);
  va_end(ap);
  c->result = result;
  SRD_WARN("%s comm %#x: %s", c->is_send ? "send" : "recv", c->id, c->error);
}

/* Local rail i talks to remote rail i mod R. A remote rail r also writes into
 * local rail r mod L, and SRD accepts traffic only from addresses in the AV,
 * so each local rail inserts both its target and the rails that target it. */
static bool rail_needs(int local, int nlocal, int remote, int nremote) {
  return remote == local % nremote || remote % nlocal == local;
}

int srd_comm_set_peer(struct srd_comm *c, const struct srd_msg_peer *p) {
  struct srd_dev *dev = c->dev;
  int rpaths = p->nrails * p->neps;
  if (p->name_len != dev->rails[0].ep_name_len) {
    srd_comm_fail(c, ncclSystemError, "peer address length %d differs from ours (%zu): different providers on the two sides?",
                  p->name_len, dev->rails[0].ep_name_len);
    return -1;
  }
  c->remote_rails = p->nrails;
  c->remote_eps = p->neps;
  c->peer = calloc((size_t)dev->npaths, sizeof(*c->peer));
  c->inserted = malloc((size_t)dev->nrails * rpaths * sizeof(*c->inserted));
  if (!c->peer || !c->inserted) {
    srd_comm_fail(c, ncclSystemError, "out of memory");
    return -1;
  }
  for (int i = 0; i < dev->nrails * rpaths; i++) c->inserted[i] = FI_ADDR_NOTAVAIL;
  for (int l = 0; l < dev->nrails; l++)
    for (int r = 0; r < p->nrails; r++) {
      if (!rail_needs(l, dev->nrails, r, p->nrails)) continue;
      for (int e = 0; e < p->neps; e++) {
        const uint8_t *name = p->names + (size_t)(r * p->neps + e) * p->name_len;
        fi_addr_t *slot = &c->inserted[l * rpaths + r * p->neps + e];
        if (srd_rail_av_insert(&dev->rails[l], name, slot)) {
          srd_comm_fail(c, ncclSystemError, "cannot insert the peer's rail %d into the address vector of rail %s", r,
                        dev->rails[l].name);
          return -1;
        }
      }
    }
  for (int path = 0; path < dev->npaths; path++) {
    int l = path / dev->neps, e = path % dev->neps;
    int r = l % p->nrails, re = e % p->neps;
    c->peer[path] = c->inserted[l * rpaths + r * p->neps + re];
  }
  return 0;
}

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

static void keep_early(struct srd_comm *c, const void *buf, size_t len) {
  struct srd_early_msg *e = malloc(sizeof(*e) + len), **tail = &c->early;
  if (!e) {
    srd_comm_fail(c, ncclSystemError, "out of memory keeping an early control message");
    return;
  }
  e->next = NULL;
  e->len = len;
  memcpy(e->data, buf, len);
  while (*tail) tail = &(*tail)->next;
  *tail = e;
}

static void deliver(struct srd_comm *c, const struct srd_msg *m);

static void on_message(void *arg, struct srd_rail *rail, const void *buf, size_t len) {
  struct srd_dev *dev = arg;
  struct srd_msg m;
  const char *why;
  if (srd_msg_decode(buf, len, &m, &why)) {
    SRD_WARN("rail %s: dropped a malformed control message of %zu bytes: %s", rail->name, len, why);
    return;
  }
  if (m.type == SRD_MSG_HELLO || m.type == SRD_MSG_ACCEPT) {
    srd_handshake_on_message(dev, &m);
    return;
  }
  struct srd_comm *c = srd_dev_comm_by_id(dev, m.dst_comm);
  if (!c) {
    SRD_INFO(NCCL_NET, "rail %s: message type %d for comm %#x that no longer exists", rail->name, m.type, m.dst_comm);
    return;
  }
  if (!c->ready) {
    keep_early(c, buf, len);
    return;
  }
  deliver(c, &m);
}

void srd_comm_replay_early(struct srd_comm *c) {
  while (c->early && !c->result) {
    struct srd_early_msg *e = c->early;
    struct srd_msg m;
    const char *why;
    c->early = e->next;
    if (srd_msg_decode(e->data, e->len, &m, &why) == 0) deliver(c, &m);
    free(e);
  }
}

static void deliver(struct srd_comm *c, const struct srd_msg *msg) {
  const struct srd_msg m = *msg;
  c->last_heard_ms = srd_now_ms();
  switch (m.type) {
  case SRD_MSG_CTS:
    if (c->is_send) srd_proto_on_cts(c, &m.u.cts);
    break;
  case SRD_MSG_EAGER:
    if (!c->is_send) srd_proto_on_eager(c, &m.u.eager);
    break;
  case SRD_MSG_TRUNC:
    if (!c->is_send) srd_proto_on_trunc(c, &m.u.trunc);
    break;
  case SRD_MSG_BYE:
    srd_proto_on_bye(c, &m.u.bye);
    break;
  default:
    break;
  }
}

static void on_remote_write(void *arg, struct srd_rail *rail, uint32_t imm, size_t len) {
  struct srd_dev *dev = arg;
  struct srd_imm v = srd_imm_unpack(imm);
  struct srd_comm *c = dev->comms[v.comm_index];
  if (!c || c->is_send) {
    SRD_WARN("rail %s: remote write for unknown comm index %u dropped", rail->name, v.comm_index);
    return;
  }
  c->last_heard_ms = srd_now_ms();
  srd_proto_on_write(c, v, len);
}

static void on_rail_error(void *arg, struct srd_rail *rail, int err, const char *errstr) {
  /* Without an operation we cannot tell which peer it concerns: the comms
   * that are hit see their own operations fail. */
  struct srd_dev *dev = arg;
  SRD_WARN("device %d: %s (error %d)", dev->index, errstr, err);
  (void)rail;
}

/* A probe the provider refuses for this long (tcp reconnecting to a dead
 * peer answers -FI_EAGAIN forever) means the peer is gone. */
#define PROBE_REFUSALS_MS_FACTOR 4

static void send_ping(struct srd_comm *c, uint64_t now, uint64_t quiet) {
  int path, rc = -FI_EAGAIN;
  struct srd_rail_buf *b = srd_comm_ctrl_buf(c, &path);
  if (b) {
    size_t len = srd_msg_encode_ping(b->data, c->dev->rails[0].buf_size, c->peer_id);
    rc = srd_comm_post_ctrl(c, b, path, len, NULL);
  }
  if (rc == 0) {
    c->last_ping_ms = now;
    c->probe_refused_since_ms = 0;
  } else if (rc == -FI_EAGAIN) {
    if (!c->probe_refused_since_ms) c->probe_refused_since_ms = now;
    else if (now - c->probe_refused_since_ms > PROBE_REFUSALS_MS_FACTOR * quiet)
      srd_comm_fail(c, ncclRemoteError, "peer unreachable: silent for %llu ms and the provider refuses to reach it",
                    (unsigned long long)(now - c->last_heard_ms));
  }
}

/* A comm that waits on its peer and has heard nothing for a while probes it:
 * a vanished peer then fails the probe, and the comm, within seconds. */
static void probe_silent_peers(struct srd_dev *dev, uint64_t now) {
  uint64_t quiet = (uint64_t)srd_param_int(SRD_PARAM_KEEPALIVE_MS);
  for (int i = 0; i < SRD_MAX_COMMS; i++) {
    struct srd_comm *c = dev->comms[i];
    if (!c || !c->ready || c->result || c->closing) continue;
    /* shm has no transport-level failure detection; its peers share our host. */
    if (dev->host_local && c->peer_pid && kill((pid_t)c->peer_pid, 0) && errno == ESRCH) {
      srd_comm_fail(c, ncclRemoteError, "peer process %u exited", c->peer_pid);
      continue;
    }
    bool waiting = c->reqs_in_flight > 0 || now - c->last_wait_ms < 2 * quiet;
    if (waiting && now - c->last_heard_ms > quiet && now - c->last_ping_ms > quiet) send_ping(c, now, quiet);
  }
}

/* A rail whose link went away fails every comm of the device (they all
 * stripe over it) with an error that names it, instead of a silent stall. */
static void check_links(struct srd_dev *dev) {
  for (int i = 0; i < dev->nrails; i++) {
    struct srd_rail *rail = &dev->rails[i];
    if (!rail->failed && srd_rail_link_down(rail)) {
      rail->failed = 1;
      SRD_WARN("device %d: rail %d (%s) lost its link", dev->index, i, rail->name);
    }
    if (!rail->failed) continue;
    for (int k = 0; k < SRD_MAX_COMMS; k++)
      if (dev->comms[k] && !dev->comms[k]->result)
        srd_comm_fail(dev->comms[k], ncclSystemError, "rail %d (%s) of device %d failed", i, rail->name,
                      dev->index);
  }
}

void srd_dev_progress(struct srd_dev *dev) {
  for (int i = 0; i < dev->nrails; i++) {
    int rc = srd_rail_poll(&dev->rails[i], POLL_BUDGET);
    if (rc < 0) dev->rails[i].failed = 1;
  }
  if (dev->pending_head) srd_proto_post_pending(dev);
  uint64_t now = srd_now_ms();
  if (now - dev->last_scan_ms >= SCAN_INTERVAL_MS) {
    dev->last_scan_ms = now;
    check_links(dev);
    probe_silent_peers(dev, now);
    if (dev->closed) free_closed(dev, false);
  }
}
