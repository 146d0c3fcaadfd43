/* Floods from a peer that joined: unexpected eager data fails its comm,
 * hellos beyond the cap are dropped, and a connect flooded with messages
 * before its answer fails early (tests/security/rogue, case floods). */
#include <stdlib.h>
#include <string.h>

#include "rogue.h"

int flood_caps(int rank, int nranks, void *arg) {
  (void)nranks;
  const struct st_ctx *ctx = arg;
  if (rank == 0) {
    st_setup(arg, st_version(VERSION));
    char handle[HSIZE];
    void *lcomm = victim_listen(handle, 1, -1), *rc = NULL;
    ncclResult_t err;
    ST_CHECK(st_accept_wait(lcomm, &rc, SETUP_MS, &err) == ST_DONE, "accept of the rogue's hello");
    char d;
    int warn0 = st_warn_count();
    while (!st_oob_ready(1)) st_net_accept(lcomm, &(void *){NULL}); /* progress while the rogue floods */
    st_oob_recv(1, &d, 1, 120000);
    for (int64_t t = st_now_ms(); st_warn_count() == warn0 && st_now_ms() - t < 10000;)
      st_net_accept(lcomm, &(void *){NULL}); /* what the rogue sent last may still be on its way */
    char *buf = st_alloc(4096);
    void *mh = NULL, *req = NULL, *data = buf;
    size_t size = 4096;
    int tag = 1;
    ST_NCCL(st_net_reg_mr(rc, buf, size, &mh));
    ncclResult_t posted = st_net_irecv(rc, 1, &data, &size, &tag, &mh, &req);
    int done = 0;
    if (posted == ncclSuccess && req) posted = st_net_test(req, &done, NULL);
    ST_CHECK(posted != ncclSuccess, "the comm of a peer flooding eager data did not fail");
    ST_CHECK(st_warn_count() > warn0, "no warning about the flood");
    ST_NCCL(st_net_dereg_mr(rc, mh));
    st_net_close_recv(rc);
    /* Hello flood: at most the cap is kept. */
    char g = 'g';
    st_oob_send(1, &g, 1);
    st_oob_recv(1, &d, 1, 120000);
    int comms = 0;
    int64_t t1 = st_now_ms();
    void *keep[256];
    while (st_now_ms() - t1 < 3000 && comms < 256) {
      void *x = NULL;
      ST_NCCL(st_net_accept(lcomm, &x));
      if (x) keep[comms++] = x;
    }
    st_note("%d comms from 300 flooded hellos", comms);
    ST_CHECK(comms <= 80, "%d hellos of one flood were kept", comms);
    for (int i = 0; i < comms; i++) st_net_close_recv(keep[i]);
    ST_NCCL(st_net_close_listen(lcomm));
    /* Early-message flood: we connect to the rogue's fake listener. */
    char fake[HSIZE];
    st_oob_recv(1, fake, HSIZE, SETUP_MS);
    void *s = NULL;
    int64_t t2 = st_now_ms();
    enum st_wait w = st_connect_wait(0, fake, &s, 20000, &err);
    st_note("connect under a flood of early messages: %d after %lld ms", (int)w, (long long)(st_now_ms() - t2));
    ST_CHECK(w == ST_ERROR && st_now_ms() - t2 < 12000, "connect flooded before the answer did not fail early");
    st_oob_send(1, &g, 1);
    ST_NCCL(st_net_finalize());
    return 0;
  }
  struct rogue r;
  struct rogue_peer p;
  struct srd_handle h;
  rogue_start(&r, ctx->provider, &p, &h);
  fi_addr_t v = p.victim;
  char msg[ROGUE_BUF];
  int sent = 0;
  for (uint32_t seq = 1; seq <= 3000; seq++, sent++) {
    size_t hl = srd_msg_encode_eager_header(msg, sizeof msg, p.comm, seq, 0, 4096);
    srd_msg_set_token(msg, p.token);
    memset(msg + hl, 0x42, 4096);
    if (rogue_send(&r, v, msg, hl + 4096, OP_MS)) break;
  }
  st_note("%d eager messages sent", sent);
  char d = 'd', g;
  st_oob_send(0, &d, 1);
  st_oob_recv(0, &g, 1, 120000);
  for (int i = 0; i < 300; i++) {
    size_t len = rogue_hello(&r, msg, &h, 0x1000 + (uint32_t)i, NULL, (uint8_t)r.name_len);
    if (rogue_send(&r, v, msg, len, OP_MS)) break;
  }
  st_oob_send(0, &d, 1);
  /* A fake listener handle naming the rogue. */
  struct srd_handle fh = {.listener_id = 0x5151, .cookie = 0x1234, .name_len = (uint8_t)r.name_len};
  memcpy(fh.name, r.name, r.name_len);
  memcpy(fh.transport, h.transport, sizeof(fh.transport)); /* the victim's own: the connect goes ahead */
  char fake[HSIZE];
  srd_handle_encode(&fh, fake);
  st_oob_send(0, fake, HSIZE);
  struct srd_msg m;
  do ST_CHECK(rogue_recv(&r, &m, SETUP_MS) == 0, "rogue: no hello from the victim");
  while (m.type != SRD_MSG_HELLO);
  uint32_t connecting = m.u.peer.src_comm;
  uint64_t connecting_token = m.u.peer.token;
  fi_addr_t vc = rogue_insert(&r, m.u.peer.names);
  struct srd_msg_cts c = {.seq = 0, .n = 1, .nkeys = 1};
  uint64_t key = 1;
  for (int i = 0; i < 2000 && !st_oob_ready(0); i++) {
    c.seq = (uint32_t)i;
    size_t len = srd_msg_encode_cts(msg, sizeof msg, connecting, &c, &key);
    srd_msg_set_token(msg, connecting_token);
    if (rogue_send(&r, vc, msg, len, OP_MS)) break;
  }
  st_oob_recv(0, &g, 1, 60000);
  rogue_close(&r);
  return 0;
}
