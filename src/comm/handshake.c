/* listen / connect / accept: non-blocking, as NCCL calls them again until a
 * comm comes back. The hello carries a cookie from the listen handle; a hello
 * or answer with the wrong cookie is dropped and logged. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fi_errno.h>

#include "srd/comm.h"
#include "srd/log.h"
#include "srd/param.h"

static void our_paths(struct srd_dev *dev, struct srd_msg_peer *p, uint8_t *names) {
  p->nrails = (uint8_t)dev->nrails;
  p->neps = (uint8_t)dev->neps;
  p->name_len = (uint8_t)dev->rails[0].ep_name_len;
  for (int r = 0; r < dev->nrails; r++)
    for (int e = 0; e < dev->neps; e++)
      memcpy(names + (size_t)(r * dev->neps + e) * p->name_len, dev->rails[r].ep_name[e], p->name_len);
  p->names = names;
}

/* An unanswered hello goes again after this, doubling up to the max. */
#define HELLO_AGAIN_MS 250
#define HELLO_AGAIN_MAX_MS 2000

struct peer_msg {
  const struct srd_comm *c;
  enum srd_msg_type type;
  uint32_t dst, listener_id;
};

static size_t encode_peer(void *buf, size_t cap, const void *arg) {
  const struct peer_msg *m = arg;
  struct srd_dev *dev = m->c->dev;
  uint8_t names[SRD_MAX_PATHS * SRD_NAME_MAX];
  struct srd_msg_peer p = {
      .cookie = m->c->cookie, .token = m->c->token, .listener_id = m->listener_id, .src_comm = m->c->id, .pid = (uint32_t)getpid()};
  our_paths(dev, &p, names);
  /* Eager data lands in a host control buffer and is copied into the receive
   * buffer by the CPU; into GPU memory that copy would be a CUDA call (or a
   * loopback read) on NCCL's proxy thread. A device that takes GPU buffers
   * therefore refuses eager data for the whole comm: the sender decides before
   * any clear-to-send says what the buffer is, so it cannot be per receive. */
  if (m->type == SRD_MSG_ACCEPT && !dev->gdr.gpu) p.eager_max = (uint32_t)dev->eager_max;
  if (m->type == SRD_MSG_ACCEPT) p.write_id = m->c->write_id;
  return srd_msg_encode_peer(buf, cap, m->type, m->dst, &p);
}

/* Post a hello to the listener, from rail 0, endpoint 0. */
static int post_hello(struct srd_comm *c) {
  struct peer_msg m = {c, SRD_MSG_HELLO, 0, c->listener_id};
  return srd_comm_send_ctrl(c, c->listener_addr, encode_peer, &m, NULL);
}

/* A listener's cookie is a keyed mix of its id (splitmix64's finalizer): a
 * hello for one closed since is told from a stray one without keeping
 * anything of the closed listener. */
static uint64_t listener_cookie(const struct srd_dev *dev, uint32_t id) {
  uint64_t z = dev->listener_key + (uint64_t)id * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return z ? z : 1; /* a handle's cookie is never 0 */
}

int srd_listen(struct srd_dev *dev, void *handle, struct srd_listener **out) {
  struct srd_listener *l = dev->free_listeners;
  if (l) {
    dev->free_listeners = l->next;
    memset(l, 0, sizeof(*l));
  } else if (!(l = calloc(1, sizeof(*l)))) {
    return SRD_ERR_SYSTEM;
  }
  l->magic = SRD_LISTENER_MAGIC;
  l->dev = dev;
  l->id = dev->next_listener_id++;
  l->next = dev->listeners;
  dev->listeners = l;
  struct srd_handle h = {.listener_id = l->id, .cookie = listener_cookie(dev, l->id), .name_len = (uint8_t)dev->rails[0].ep_name_len};
  memcpy(h.name, dev->rails[0].ep_name[0], h.name_len);
  snprintf(h.transport, sizeof(h.transport), "%s", dev->transport);
  srd_handle_encode(&h, handle);
  *out = l;
  return SRD_OK;
}

static void unlink_connecting(struct srd_dev *dev, struct srd_comm *c) {
  for (struct srd_comm **p = &dev->connecting; *p; p = &(*p)->next_connecting)
    if (*p == c) {
      *p = c->next_connecting;
      return;
    }
}

static struct srd_comm *start_connect(struct srd_dev *dev, const struct srd_handle *h, const void *key) {
  struct srd_comm *c = srd_comm_alloc(dev, true);
  if (!c) return NULL;
  c->cookie = h->cookie;
  c->connect_key = key;
  c->listener_id = h->listener_id;
  c->deadline_ms = srd_now_ms() + (uint64_t)srd_param_int(SRD_PARAM_CONNECT_TIMEOUT_MS);
  /* Two transports cannot reach each other: say so now, not after the
   * connect timeout. */
  if (strcmp(h->transport, dev->transport)) {
    srd_comm_fail(c, SRD_ERR_USAGE, "the listener uses %s and this device %s: every node must choose the same "
                  "provider and efa fabric (NCCL_SRD_PROVIDER, FI_PROVIDER, NCCL_SRD_EFA_FABRIC)", h->transport,
                  dev->transport);
    c->next_connecting = dev->connecting;
    dev->connecting = c;
    return c;
  }
  int rc = h->name_len != dev->rails[0].ep_name_len ? -FI_EINVAL
                                                    : dev->rail_ops->av_insert(&dev->rails[0], h->name, &c->listener_addr);
  if (rc == -FI_EHOSTDOWN) {
    srd_comm_fail(c, SRD_ERR_REMOTE, "the listener's process is gone (its shared-memory region or process)");
  } else if (rc) {
    srd_comm_fail(c, SRD_ERR_USAGE, "the handle's address (%u bytes) is not one of provider %s (%zu bytes)",
                  h->name_len, dev->rails[0].info->fabric_attr->prov_name, dev->rails[0].ep_name_len);
  }
  c->next_connecting = dev->connecting;
  dev->connecting = c;
  return c;
}

int srd_connect(struct srd_dev *dev, void *handle, struct srd_comm **out) {
  struct srd_handle h;
  const char *why;
  *out = NULL;
  if (srd_handle_decode(handle, &h, &why)) {
    SRD_WARN("connect on device %d: invalid handle: %s", dev->index, why);
    return SRD_ERR_ARG;
  }
  struct srd_comm *c;
  for (c = dev->connecting; c; c = c->next_connecting)
    if (c->connect_key == handle && c->cookie == h.cookie && c->listener_id == h.listener_id) break;
  if (!c && !(c = start_connect(dev, &h, handle))) return SRD_ERR_SYSTEM;
  /* A listener whose places are full drops hellos (on_hello): ours goes
   * again, spaced out, until answered or the connect times out. */
  uint64_t now = srd_now_ms();
  if (!c->result && !c->ready && (!c->hello_sent || now >= c->hello_next_ms)) {
    int rc = post_hello(c);
    if (rc == SRD_OK && c->hello_sent)
      SRD_INFO(NCCL_NET, "comm %#x: no answer from listener %#x within %u ms: hello sent again", c->id,
               c->listener_id, c->hello_gap_ms);
    if (rc == SRD_OK) {
      if (!c->hello_sent) c->hello_gap_ms = HELLO_AGAIN_MS;
      else if (c->hello_gap_ms < HELLO_AGAIN_MAX_MS) c->hello_gap_ms *= 2;
      c->hello_sent = true;
      c->hello_next_ms = now + c->hello_gap_ms;
    }
  }
  srd_dev_progress(dev);
  if (!c->result && !c->ready && srd_now_ms() > c->deadline_ms)
    srd_comm_fail(c, SRD_ERR_REMOTE, "no answer from the listener within %lld ms (NCCL_SRD_CONNECT_TIMEOUT_MS)",
                  (long long)srd_param_int(SRD_PARAM_CONNECT_TIMEOUT_MS));
  if (c->result) {
    int rc = c->result;
    unlink_connecting(dev, c);
    srd_comm_close(c);
    return rc;
  }
  if (!c->ready) return SRD_AGAIN;
  unlink_connecting(dev, c);
  c->connect_key = NULL;
  *out = c;
  return SRD_OK;
}

static struct srd_listener *find_listener(struct srd_dev *dev, uint32_t id) {
  for (struct srd_listener *l = dev->listeners; l; l = l->next)
    if (l->id == id) return l;
  return NULL;
}

/* Bounds on what one listener keeps for peers that said hello: a flood of
 * hellos costs at most this much memory, and answers that cannot be
 * delivered (an unreachable address) block no one: several are tried at
 * once, each for NCCL_SRD_CONNECT_TIMEOUT_MS at most, and one whose address
 * refuses connections (tcp: nothing listens there) is given up at once, so
 * that hellos naming closed ports cannot hold every place. */
#define MAX_PENDING_HELLOS 64
#define MAX_ANSWERING 8
/* An answer refused this long (a connection to a live peer is made well
 * within it) has its address checked, then again at this spacing: a legit
 * peer's provider is not sent an empty connection at every accept. */
#define ANSWER_CHECK_MS 100

/* A hello whose copy this listener keeps, answers or answered: the
 * connecting comm is one, whatever copies arrive in whatever order (a resent
 * copy can overtake the first on an unordered fabric). */
static bool hello_known(const struct srd_listener *l, const struct srd_msg_peer *p) {
  for (const struct srd_pending_hello *ph = l->hellos; ph; ph = ph->next)
    if (ph->peer.token == p->token && ph->peer.src_comm == p->src_comm) return true;
  for (const struct srd_comm *c = l->answering; c; c = c->next_connecting)
    if (c->peer_token == p->token && c->peer_id == p->src_comm) return true;
  unsigned n = l->nanswered < SRD_LISTENER_ANSWERED ? l->nanswered : SRD_LISTENER_ANSWERED;
  for (unsigned i = 0; i < n; i++)
    if (l->answered[i] == p->token) return true;
  return false;
}

static void on_hello(struct srd_dev *dev, const struct srd_msg_peer *p) {
  if (p->cookie != listener_cookie(dev, p->listener_id)) {
    SRD_WARN_LIMITED(&dev->foreign_log,
                     "device %d: hello for listener %#x with a wrong cookie dropped (a stale handle, or another job's)",
                     dev->index, p->listener_id);
    return;
  }
  struct srd_listener *l = find_listener(dev, p->listener_id);
  if (!l) {
    /* One of ours, closed since: mostly a late copy of a hello answered
     * before (a loaded host, an unordered fabric). A peer that really
     * connects to a closed listener is told by its own connect timeout. */
    SRD_INFO(NCCL_NET, "device %d: a hello for listener %#x, closed since, dropped", dev->index, p->listener_id);
    return;
  }
  if (hello_known(l, p)) return;
  if (l->nhellos >= MAX_PENDING_HELLOS) {
    unsigned n = ++l->dropped_hellos;
    if (!(n & (n - 1)))
      SRD_WARN("device %d: listener %#x has %d hellos waiting for accept(); %u more dropped so far", dev->index, l->id,
               MAX_PENDING_HELLOS, n);
    return;
  }
  if (p->name_len != dev->rails[0].ep_name_len) {
    SRD_WARN_LIMITED(&dev->foreign_log, "device %d: hello with %u-byte addresses (ours: %zu) dropped", dev->index,
                     p->name_len, dev->rails[0].ep_name_len);
    return;
  }
  size_t names = (size_t)p->nrails * p->neps * p->name_len;
  struct srd_pending_hello *ph = malloc(sizeof(*ph) + names);
  if (!ph) return;
  ph->peer = *p;
  memcpy(ph->names, p->names, names);
  ph->peer.names = ph->names;
  struct srd_pending_hello **tail = &l->hellos;
  while (*tail) tail = &(*tail)->next;
  ph->next = NULL;
  *tail = ph;
  l->nhellos++;
}

static void on_accept(struct srd_dev *dev, uint32_t dst, uint64_t token, const struct srd_msg_peer *p) {
  struct srd_comm *c = srd_dev_comm_by_id(dev, dst);
  /* An answer after one that failed (c->result: its addresses refused) is
   * dropped: the comm keeps its first peer state, and its error. */
  if (!c || !c->is_send || c->ready || c->result || c->cookie != p->cookie || c->token != token) {
    SRD_WARN_LIMITED(&dev->foreign_log,
                     "device %d: answer for comm %#x that is not connecting (or wrong cookie or token) dropped",
                     dev->index, dst);
    return;
  }
  c->peer_token = p->token;
  c->peer_id = p->src_comm;
  c->peer_pid = p->pid;
  c->write_id = p->write_id;
  /* Its control buffers hold its own eager size: a larger message would be
   * cut by the provider, a rail error, not a clear one. */
  c->eager_max = p->eager_max < dev->eager_max ? p->eager_max : dev->eager_max;
  if (srd_comm_set_peer(c, p)) return;
  c->ready = true;
  c->last_heard_ms = srd_now_ms();
  srd_comm_replay_early(c);
}

void srd_handshake_on_message(struct srd_dev *dev, const struct srd_msg *m) {
  if (m->type == SRD_MSG_HELLO) on_hello(dev, &m->u.peer);
  else on_accept(dev, m->dst_comm, m->token, &m->u.peer);
}

/* Turn waiting hellos into comms to answer. A hello whose addresses the
 * provider refuses (wrong family or length, a bad shm name) is dropped with a
 * warning: it is no failure of accept(). */
static void start_answers(struct srd_listener *l) {
  struct srd_dev *dev = l->dev;
  while (l->hellos && l->nanswering < MAX_ANSWERING) {
    struct srd_pending_hello *ph = l->hellos;
    l->hellos = ph->next;
    l->nhellos--;
    struct srd_comm *c = srd_comm_alloc(dev, false);
    if (!c) {
      SRD_WARN("device %d: no comm for the hello of process %u; dropped", dev->index, ph->peer.pid);
      free(ph);
      continue;
    }
    c->cookie = listener_cookie(dev, l->id);
    c->peer_id = ph->peer.src_comm;
    c->peer_token = ph->peer.token;
    c->peer_pid = ph->peer.pid;
    int rc = srd_comm_set_peer(c, &ph->peer);
    free(ph);
    if (rc) {
      SRD_WARN_LIMITED(&dev->foreign_log, "device %d: hello of process %u dropped", dev->index, c->peer_pid);
      srd_comm_close(c);
      continue;
    }
    c->answer_since_ms = srd_now_ms();
    c->deadline_ms = c->answer_since_ms + (uint64_t)srd_param_int(SRD_PARAM_CONNECT_TIMEOUT_MS);
    struct srd_comm **tail = &l->answering;
    while (*tail) tail = &(*tail)->next_connecting;
    c->next_connecting = NULL;
    *tail = c;
    l->nanswering++;
  }
}

/* Where the answer to c's hello stands: SRD_OK delivered, SRD_AGAIN on its
 * way, otherwise given up, *why saying why (with c->error, the provider's text). */
static int answer_progress(struct srd_listener *l, struct srd_comm *c, const char **why) {
  struct srd_dev *dev = l->dev;
  uint64_t now = srd_now_ms();
  if (c->result) { /* c->error says why (a flood of early messages, ...) */
    *why = "failed";
    return c->result;
  }
  if (c->answer == SRD_ANSWER_UNSENT) {
    struct peer_msg m = {c, SRD_MSG_ACCEPT, c->peer_id, l->id};
    int rc = srd_comm_send_answer(c, c->peer[0], encode_peer, &m);
    if (rc != SRD_OK && rc != SRD_AGAIN) {
      *why = "could not be posted";
      return rc;
    }
    if (rc == SRD_AGAIN && now - c->answer_since_ms >= ANSWER_CHECK_MS &&
        dev->rail_ops->peer_refused(&dev->rails[0], c->peer[0], now, ANSWER_CHECK_MS)) {
      *why = "goes to an address that refuses connections";
      return SRD_ERR_REMOTE;
    }
  }
  if (c->answer == SRD_ANSWER_DELIVERED) return SRD_OK;
  if (c->answer == SRD_ANSWER_FAILED) {
    *why = "failed";
    return SRD_ERR_REMOTE;
  }
  if (now <= c->deadline_ms) return SRD_AGAIN;
  *why = c->answer == SRD_ANSWER_POSTED ? "was not delivered within NCCL_SRD_CONNECT_TIMEOUT_MS"
                                        : "could not be sent within NCCL_SRD_CONNECT_TIMEOUT_MS";
  return SRD_ERR_REMOTE;
}

int srd_accept(struct srd_listener *l, struct srd_comm **out) {
  *out = NULL;
  srd_dev_progress(l->dev);
  start_answers(l);
  struct srd_dev *dev = l->dev;
  for (struct srd_comm **p = &l->answering; *p;) {
    struct srd_comm *c = *p;
    const char *why = NULL;
    int rc = answer_progress(l, c, &why);
    if (rc == SRD_AGAIN) {
      p = &c->next_connecting;
      continue;
    }
    *p = c->next_connecting;
    l->nanswering--;
    c->next_connecting = NULL;
    if (rc) {
      SRD_WARN_LIMITED(&dev->foreign_log, "device %d: the answer to process %u's hello %s%s%s; dropped", dev->index,
                       c->peer_pid, why, c->error[0] ? ": " : "", c->error);
      srd_comm_close(c);
      continue;
    }
    l->answered[l->nanswered++ % SRD_LISTENER_ANSWERED] = c->peer_token;
    c->ready = true;
    c->last_heard_ms = srd_now_ms();
    srd_comm_replay_early(c);
    *out = c;
    return SRD_OK;
  }
  return SRD_AGAIN;
}

void srd_close_listen(struct srd_listener *l) {
  struct srd_dev *dev = l->dev;
  for (struct srd_listener **p = &dev->listeners; *p; p = &(*p)->next)
    if (*p == l) {
      *p = l->next;
      break;
    }
  while (l->hellos) {
    struct srd_pending_hello *ph = l->hellos;
    l->hellos = ph->next;
    free(ph);
  }
  while (l->answering) {
    struct srd_comm *c = l->answering;
    l->answering = c->next_connecting;
    srd_comm_close(c);
  }
  l->nanswering = l->nhellos = 0;
  l->magic = 0;
  l->next = dev->free_listeners;
  dev->free_listeners = l;
}

void srd_listener_pool_free(struct srd_dev *dev) {
  while (dev->free_listeners) {
    struct srd_listener *l = dev->free_listeners;
    dev->free_listeners = l->next;
    free(l);
  }
}
