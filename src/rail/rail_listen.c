/* Whether a tcp peer's endpoint is gone. tcp;ofi_rxm and native tcp answer
 * every send to a peer whose connection broke with -FI_EAGAIN while they
 * reconnect, and a refused reconnect only sets them back to idle
 * (libfabric prov/rxm/src/rxm_conn.c: rxm_handle_error, rxm_process_reject,
 * rxm_connect; prov/tcp/src/xnet_rdm_cm.c: xnet_get_conn): no completion
 * says that the peer is gone. Its address is its provider's listening
 * socket, so a TCP connect there that the peer's host refuses (nothing
 * listens: the process exited or closed its endpoint) is that evidence. A
 * connect that is accepted (a paused peer's kernel still accepts) is closed
 * at once; the peer's provider drops a connection request that sends
 * nothing (prov/tcp/src/xnet_cm.c: xnet_handle_conn). Checks never block,
 * run one at a time per address, and are spaced out, doubling, while the
 * peer keeps listening. A refusal is evidence for every_ms only: another
 * process may later listen at the same address (a restarted peer, a port
 * used again), so an older one is checked anew. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "srd/rail.h"

#define LISTEN_CHECKS 16   /* addresses tracked per rail; the least recently asked makes room */
#define GAP_MAX_FACTOR 64  /* a listening peer is checked again after at most 64 first gaps */

struct srd_listen_check {
  uint8_t name[SRD_EP_NAME_MAX];
  int fd; /* a connect under way, else -1 */
  bool refused;
  uint64_t next_ms, gap_ms, used_ms, judged_ms;
};

static const uint8_t *name_of(const struct srd_rail *rail, fi_addr_t addr) {
  int i = srd_av_index_find_addr(&rail->av_index, addr);
  return i < 0 ? NULL : rail->av_index.e[i].name;
}

static struct srd_listen_check *check_for(struct srd_rail *rail, const uint8_t *name, uint64_t every_ms) {
  if (!rail->listen_checks) {
    rail->listen_checks = calloc(LISTEN_CHECKS, sizeof(*rail->listen_checks));
    if (!rail->listen_checks) return NULL;
    for (int i = 0; i < LISTEN_CHECKS; i++) rail->listen_checks[i].fd = -1;
  }
  struct srd_listen_check *room = NULL;
  for (int i = 0; i < LISTEN_CHECKS; i++) {
    struct srd_listen_check *k = &rail->listen_checks[i];
    if (k->used_ms && !memcmp(k->name, name, rail->ep_name_len)) return k;
    if (k->fd < 0 && (!room || k->used_ms < room->used_ms)) room = k;
  }
  if (!room) return NULL;
  memcpy(room->name, name, rail->ep_name_len);
  room->refused = false;
  room->next_ms = 0;
  room->gap_ms = every_ms;
  return room;
}

/* err: the connect's outcome. Anything but a refusal (accepted, or a network
 * error, which is no evidence about the peer) waits for the gap. */
static void judge(struct srd_listen_check *k, int err, uint64_t now_ms, uint64_t every_ms) {
  if (k->fd >= 0) close(k->fd);
  k->fd = -1;
  k->refused = err == ECONNREFUSED;
  k->judged_ms = now_ms;
  k->next_ms = now_ms + k->gap_ms;
  if (k->gap_ms < GAP_MAX_FACTOR * every_ms) k->gap_ms *= 2;
}

static void start(struct srd_listen_check *k, uint64_t now_ms, uint64_t every_ms) {
  sa_family_t family;
  memcpy(&family, k->name, sizeof(family));
  socklen_t len = family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
  int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  struct sockaddr_storage sa;
  memcpy(&sa, k->name, len);
  k->fd = fd;
  int rc = connect(fd, (struct sockaddr *)&sa, len);
  if (rc && errno == EINPROGRESS) return;
  judge(k, rc ? errno : 0, now_ms, every_ms);
}

static void finish(struct srd_listen_check *k, uint64_t now_ms, uint64_t every_ms) {
  struct pollfd p = {k->fd, POLLOUT, 0};
  if (poll(&p, 1, 0) != 1) return;
  int err = 0;
  socklen_t len = sizeof(err);
  if (getsockopt(k->fd, SOL_SOCKET, SO_ERROR, &err, &len)) err = errno;
  judge(k, err, now_ms, every_ms);
}

bool srd_rail_peer_refused(struct srd_rail *rail, fi_addr_t addr, uint64_t now_ms, uint64_t every_ms) {
  uint32_t format = rail->info->addr_format;
  if (format != FI_SOCKADDR_IN && format != FI_SOCKADDR_IN6 && format != FI_SOCKADDR) return false;
  const uint8_t *name = name_of(rail, addr);
  sa_family_t family;
  if (!name || rail->ep_name_len > sizeof(struct sockaddr_storage)) return false;
  memcpy(&family, name, sizeof(family));
  if (family != AF_INET && family != AF_INET6) return false;
  struct srd_listen_check *k = check_for(rail, name, every_ms);
  if (!k) return false;
  k->used_ms = now_ms;
  if (k->fd >= 0) finish(k, now_ms, every_ms);
  else if (k->refused ? now_ms - k->judged_ms > every_ms : now_ms >= k->next_ms) {
    k->refused = false;
    start(k, now_ms, every_ms);
  }
  return k->refused;
}

void srd_rail_listen_checks_free(struct srd_rail *rail) {
  if (!rail->listen_checks) return;
  for (int i = 0; i < LISTEN_CHECKS; i++)
    if (rail->listen_checks[i].fd >= 0) close(rail->listen_checks[i].fd);
  free(rail->listen_checks);
  rail->listen_checks = NULL;
}
