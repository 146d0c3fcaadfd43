/* A holder of the listen handle fills the listener's hello places with
 * hellos naming ports that refuse connections (tcp): their answers must be given up at once,
 * on the refused connect, not after NCCL_SRD_CONNECT_TIMEOUT_MS each, so
 * that a legitimate peer connecting right after is served (issue 23). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rogue.h"

#define FLOOD 100         /* hellos: more than the 64 places and 8 answers a listener keeps */
#define SETTLE_MS 1000    /* accept() keeps turning the hellos' answers over this long */
#define TIMEOUT_MS 20000  /* NCCL_SRD_CONNECT_TIMEOUT_MS here: far beyond the test's bound */

/* A loopback address that refuses connections: a port bound, not listening.
 * The socket stays open till the victim is done: a port freed at once may be
 * taken by a live endpoint (the legitimate peer's, opened later), whose
 * provider would then take the answer. */
static int refusing_port(char *name) {
  struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  socklen_t len = sizeof sin;
  ST_CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&sin, sizeof sin) == 0 &&
               getsockname(fd, (struct sockaddr *)&sin, &len) == 0,
           "no loopback port");
  memset(name, 0, SRD_NAME_MAX);
  memcpy(name, &sin, sizeof sin);
  return fd;
}

static int victim(void) {
  char handle[HSIZE], g;
  void *lcomm = victim_listen(handle, 1, -1), *rc = NULL;
  while (!st_oob_ready(1)) {
    ST_NCCL(st_net_accept(lcomm, &rc));
    ST_CHECK(!rc, "accept gave a comm for a hello naming a refusing port");
  }
  st_oob_recv(1, &g, 1, SETUP_MS);
  /* Answers still being tried when the hellos stopped: none may become a comm. */
  for (int64_t t = st_now_ms(); st_now_ms() - t < SETTLE_MS;) {
    ST_NCCL(st_net_accept(lcomm, &rc));
    ST_CHECK(!rc, "accept gave a comm for a hello naming a refusing port (after the hellos)");
  }
  st_oob_send(2, handle, HSIZE);
  int64_t t0 = st_now_ms();
  while (!rc) {
    ST_NCCL(st_net_accept(lcomm, &rc));
    ST_CHECK(st_now_ms() - t0 < TIMEOUT_MS, "the legitimate peer was not accepted within %d ms", TIMEOUT_MS);
  }
  st_note("legitimate peer accepted %lld ms after its connect began", (long long)(st_now_ms() - t0));
  st_recv_one(rc, 1024, 5, 0, SETUP_MS);
  ST_NCCL(st_net_close_recv(rc));
  ST_NCCL(st_net_close_listen(lcomm));
  st_oob_send(1, &g, 1);
  return 0;
}

static int legitimate(void) {
  char handle[HSIZE];
  st_oob_recv(0, handle, HSIZE, SETUP_MS);
  void *s = NULL;
  ncclResult_t err;
  ST_CHECK(st_connect_wait(0, handle, &s, SETUP_MS, &err) == ST_DONE, "connect of the legitimate peer failed (%d)",
           (int)err);
  st_send_one(s, 1024, 5, 0, SETUP_MS);
  ST_NCCL(st_net_close_send(s));
  return 0;
}

int hello_places(int rank, int nranks, void *arg) {
  (void)nranks;
  const struct st_ctx *ctx = arg;
  if (rank != 1) {
    char timeout[16];
    snprintf(timeout, sizeof timeout, "%d", TIMEOUT_MS);
    ST_CHECK(setenv("NCCL_SRD_CONNECT_TIMEOUT_MS", timeout, 1) == 0, "setenv");
    st_setup(arg, st_version(VERSION));
    int rc = rank == 0 ? victim() : legitimate();
    ST_NCCL(st_net_finalize());
    return rc;
  }
  struct rogue r;
  rogue_open(&r, ctx->provider);
  char handle[HSIZE], msg[ROGUE_BUF], name[SRD_NAME_MAX];
  st_oob_recv(0, handle, HSIZE, SETUP_MS);
  struct srd_handle h;
  rogue_decode_handle(handle, &h);
  fi_addr_t v = rogue_insert(&r, h.name);
  int fds[FLOOD];
  for (uint32_t i = 0; i < FLOOD; i++) {
    fds[i] = refusing_port(name);
    size_t len = rogue_hello(&r, msg, &h, 0x300 + i, name, (uint8_t)r.name_len);
    ST_CHECK(rogue_send(&r, v, msg, len, OP_MS) == 0, "hello %u not sent", i);
  }
  char g = 'g';
  st_oob_send(0, &g, 1);
  st_oob_recv(0, &g, 1, TIMEOUT_MS + SETUP_MS);
  for (int i = 0; i < FLOOD; i++) close(fds[i]);
  rogue_close(&r);
  return 0;
}
