/* A peer inside the job (issue 23): a rogue that has the listen handle,
 * connects as a sender and so has its own comm, token, write id, key and
 * buffer on the victim, turned against the victim's other comms and memory.
 * Rank 0 is the victim, rank 1 the rogue, rank 2 when there is one the
 * legitimate peer of another comm of the victim (B).
 *   fuzz         random immediate data and control messages against the
 *                rogue's live comm, and writes naming other comms: no
 *                sanitizer report, no completion of B, warnings rate-limited
 *   nested       a 4 KiB receive of the rogue's comm inside B's 64 KiB
 *                registration: the rogue's key reaches only its 4 KiB
 *   closed-peer  shm: messages of a peer still queued in the provider when
 *                the victim closes that peer's comm */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_endpoint.h>

#include "rogue.h"
#include "srdtest.h"

#define OP_MS 3000
#define B_SIZE 65536
#define B_SEED 9

/* Rank 2: B's sender, which sends once rank 0 says so. */
static int legit_sender(int rank) {
  void *s = st_pair_comm(rank, 0, 2, SETUP_MS);
  char g;
  st_oob_recv(0, &g, 1, 170000);
  st_send_one(s, B_SIZE, B_SEED, 0, SETUP_MS);
  ST_NCCL(st_net_close_send(s));
  ST_NCCL(st_net_finalize());
  return 0;
}

struct victim_b {
  void *rc, *mh, *req;
  char *buf;
};

/* Rank 0: B's receive of B_SIZE bytes, posted (its clear-to-send went to
 * rank 2, which holds its send back). */
static void victim_post_b(int rank, struct victim_b *b) {
  b->rc = st_pair_comm(rank, 0, 2, SETUP_MS);
  b->buf = st_alloc(B_SIZE);
  memset(b->buf, 0xaa, B_SIZE);
  size_t size = B_SIZE;
  int tag = 0;
  void *data = b->buf;
  ncclResult_t err;
  ST_NCCL(st_net_reg_mr(b->rc, b->buf, size, &b->mh));
  ST_CHECK(st_irecv_wait(b->rc, 1, &data, &size, &tag, &b->mh, &b->req, SETUP_MS, &err) == ST_DONE, "irecv of B");
}

static void victim_check_b_open(struct victim_b *b) {
  int done = 0, got = 0;
  ST_NCCL(st_net_test(b->req, &done, &got));
  ST_CHECK(!done, "B's receive completed before its peer sent anything (%d bytes)", got);
}

/* B's peer sends now: B's receive completes with its data. */
static void victim_finish_b(struct victim_b *b) {
  victim_check_b_open(b);
  char g = 'g';
  st_oob_send(2, &g, 1);
  int got = 0;
  ncclResult_t err;
  ST_CHECK(st_test_wait(b->req, &got, SETUP_MS, &err) == ST_DONE, "B's receive after the rogue (error %d)", (int)err);
  ST_CHECK(got == B_SIZE, "B received %d bytes", got);
  ST_CHECK(st_pattern_check(b->buf, B_SIZE, B_SEED) == SIZE_MAX, "B's data corrupted");
  ST_NCCL(st_net_dereg_mr(b->rc, b->mh));
  ST_NCCL(st_net_close_recv(b->rc));
}

/* Rank 0: accept the rogue and post a receive of size bytes at buf on its
 * comm (the clear-to-send gives the rogue a key, an address and a slot). */
static void *victim_offer_rogue(void *lcomm, void *buf, size_t size, void **mh, void **req) {
  void *rc = NULL;
  ncclResult_t err;
  ST_CHECK(st_accept_wait(lcomm, &rc, SETUP_MS, &err) == ST_DONE, "accept of the rogue's hello");
  int tag = 0;
  ST_NCCL(st_net_reg_mr(rc, buf, size, mh));
  ST_CHECK(st_irecv_wait(rc, 1, &buf, &size, &tag, mh, req, SETUP_MS, &err) == ST_DONE, "irecv for the rogue");
  return rc;
}

/* ---------- fuzz ---------- */

#define FUZZ_WRITES 1500
#define FUZZ_MSGS 3000

static uint64_t rnd(uint64_t *s) {
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return *s;
}

/* A valid message of a random type for comm `dst`, with random fields. */
static size_t random_msg(uint64_t *s, char *msg, uint32_t dst) {
  uint32_t seq = (uint32_t)rnd(s) % 8;
  switch (rnd(s) % 8) {
  case 0: {
    struct srd_msg_cts c = {.seq = seq, .n = (uint8_t)(1 + rnd(s) % SRD_MAX_RECVS), .nkeys = 1, .slot = (uint8_t)rnd(s)};
    uint64_t keys[SRD_MAX_RECVS];
    for (int i = 0; i < c.n; i++) c.e[i] = (struct srd_cts_entry){rnd(s), rnd(s) % 100000, (int32_t)rnd(s)}, keys[i] = rnd(s);
    return srd_msg_encode_cts(msg, ROGUE_BUF, dst, &c, keys);
  }
  case 1: {
    uint32_t len = (uint32_t)(rnd(s) % 256);
    size_t hl = srd_msg_encode_eager_header(msg, ROGUE_BUF, dst, seq, (int32_t)(rnd(s) % 3), len);
    memset(msg + hl, 0x5a, len);
    return hl + len;
  }
  case 2:
    return srd_msg_encode_trunc(msg, ROGUE_BUF, dst, seq, rnd(s));
  case 3: {
    struct srd_msg_bye b = {(uint32_t)rnd(s), (uint8_t)(rnd(s) % 3), rnd(s) % 1000, rnd(s) % 1000};
    return srd_msg_encode_bye(msg, ROGUE_BUF, dst, &b);
  }
  case 4: {
    struct srd_msg_rail m = {(uint8_t)(rnd(s) % SRD_MAX_PATHS), (uint8_t)(rnd(s) % 2), 0};
    return srd_msg_encode_rail(msg, ROGUE_BUF, dst, &m);
  }
  case 5:
    return srd_msg_encode_rts(msg, ROGUE_BUF, dst, (uint32_t)rnd(s));
  case 6: {
    struct srd_msg_probe m = {(uint8_t)(rnd(s) % SRD_MAX_PATHS), (uint8_t)(rnd(s) % 2), (uint32_t)rnd(s)};
    return srd_msg_encode_probe(msg, ROGUE_BUF, dst, &m);
  }
  default:
    return srd_msg_encode_ping(msg, ROGUE_BUF, dst);
  }
}

static int fuzz_rogue(const struct st_ctx *ctx) {
  struct rogue r;
  struct rogue_peer p;
  rogue_start(&r, ctx->provider, &p, NULL);
  struct srd_msg m;
  rogue_wait_cts(&r, &m);
  uint64_t addr = m.u.cts.e[0].addr, key = srd_cts_key(&m.u.cts, 0, 0);
  uint8_t slot = m.u.cts.slot;
  char data[64];
  memset(data, 0xee, sizeof data);
  uint64_t s = 0x9e3779b97f4a7c15ull ^ (uint64_t)st_now_ms();
  st_note("rogue: comm %#x, write id %#x, slot %#x; seed %#llx", p.comm, p.write_id, slot, (unsigned long long)s);
  /* Writes naming other comms by what a peer can count: comm indexes up to
   * a few past its own, in slot 0 with every use count (B is one of them:
   * before write ids, these completed or failed it). One of these equals B's
   * random write id by chance once in about 4,000 runs. */
  uint32_t own_index = p.comm & (SRD_MAX_COMMS - 1);
  for (uint32_t w = 0; w <= own_index + 2; w++)
    for (uint32_t use = 0; use < 4; use++)
      if (w != p.write_id)
        rogue_write(&r, p.victim, data, sizeof data, addr, key,
                    srd_imm_pack((struct srd_imm){w, use << SRD_SLOT_BITS, 1, 0, 0}), OP_MS);
  /* Slot indexes past the 40 a comm has, then random fields, for its own
   * comm (random write ids could hit B's with a bad slot and fail it). */
  for (uint32_t i = SRD_RECV_SLOTS; i < 1u << SRD_SLOT_BITS; i++)
    rogue_write(&r, p.victim, data, sizeof data, addr, key, srd_imm_pack((struct srd_imm){p.write_id, i, 1, 0, 0}),
                OP_MS);
  for (int i = 0; i < FUZZ_WRITES; i++) {
    uint32_t imm = ((uint32_t)rnd(&s) & ~(uint32_t)(SRD_MAX_COMMS - 1)) | p.write_id;
    rogue_write(&r, p.victim, data, 1 + rnd(&s) % sizeof data, addr, key, imm, OP_MS);
  }
  /* Control messages: valid ones with random fields, then mutated bytes, to
   * its own comm (with its token) and to guessed ids (B's among them). */
  char msg[ROGUE_BUF];
  int junk = 0;
  for (int i = 0; i < FUZZ_MSGS; i++) {
    bool own = rnd(&s) % 4;
    uint32_t dst = own ? p.comm : (uint32_t)(rnd(&s) % (own_index + 3)) | 1u << 16;
    size_t len = random_msg(&s, msg, dst);
    ST_CHECK(len, "rogue: message %d not encoded", i);
    srd_msg_set_token(msg, p.token);
    if (rnd(&s) % 2) {
      for (int k = (int)(1 + rnd(&s) % 4); k > 0; k--) msg[rnd(&s) % len] = (char)rnd(&s);
      if (rnd(&s) % 8 == 0) len = 1 + rnd(&s) % len;
      junk++;
    }
    if (rogue_send(&r, p.victim, msg, len, OP_MS)) break;
  }
  st_oob_send(0, &junk, sizeof junk);
  char g;
  st_oob_recv(0, &g, 1, 120000);
  rogue_close(&r);
  return 0;
}

int insider_fuzz(int rank, int nranks, void *arg) {
  (void)nranks;
  /* The rogue's comm is closed under its unfinished receive: no answer comes. */
  ST_CHECK(setenv("NCCL_SRD_CLOSE_TIMEOUT_MS", "1000", 1) == 0, "setenv");
  st_setup(arg, st_version(VERSION));
  if (rank == 2) return legit_sender(rank);
  if (rank == 1) return fuzz_rogue(arg);
  struct victim_b b;
  victim_post_b(rank, &b);
  char handle[HSIZE];
  void *lcomm = victim_listen(handle, 1, -1), *mh = NULL, *req = NULL;
  char *abuf = st_alloc(4096);
  void *ra = victim_offer_rogue(lcomm, abuf, 4096, &mh, &req);
  int warn0 = st_warn_count(), a_open = 1;
  while (!st_oob_ready(1)) { /* progress while the rogue fuzzes */
    victim_check_b_open(&b);
    if (a_open) {
      int done = 0;
      a_open = st_net_test(req, &done, NULL) == ncclSuccess && !done;
    } else {
      st_net_accept(lcomm, &(void *){NULL});
    }
  }
  int junk = 0;
  st_oob_recv(1, &junk, sizeof junk, SETUP_MS);
  int warns = st_warn_count() - warn0;
  st_note("%d warnings for %d writes and %d messages (%d mangled)", warns, FUZZ_WRITES, FUZZ_MSGS, junk);
  ST_CHECK(warns * 20 < FUZZ_MSGS, "%d warnings for %d foreign messages: not rate-limited", warns, FUZZ_MSGS);
  victim_finish_b(&b);
  char g = 'g';
  st_oob_send(1, &g, 1);
  st_net_dereg_mr(ra, mh);
  st_net_close_recv(ra);
  ST_NCCL(st_net_close_listen(lcomm));
  ST_NCCL(st_net_finalize());
  return 0;
}

/* ---------- nested: a registration inside another comm's ---------- */

#define NESTED_AT 8192
#define NESTED_SIZE 4096
#define NESTED_REACH 32768

int insider_nested(int rank, int nranks, void *arg) {
  (void)nranks;
  ST_CHECK(setenv("NCCL_SRD_CLOSE_TIMEOUT_MS", "1000", 1) == 0, "setenv");
  st_setup(arg, st_version(VERSION));
  if (rank == 2) return legit_sender(rank);
  if (rank == 1) {
    struct rogue r;
    struct rogue_peer p;
    rogue_start(&r, ((const struct st_ctx *)arg)->provider, &p, NULL);
    struct srd_msg m;
    rogue_wait_cts(&r, &m);
    ST_CHECK(m.u.cts.e[0].len == NESTED_SIZE, "clear-to-send for %llu bytes", (unsigned long long)m.u.cts.e[0].len);
    uint64_t addr = m.u.cts.e[0].addr, key = srd_cts_key(&m.u.cts, 0, 0);
    char *junk = malloc(NESTED_REACH);
    memset(junk, 0xee, NESTED_REACH);
    /* Past the end of its buffer, with the key its buffer came with (a
     * refused write may cost the rogue its connection: the one past the end
     * goes first, then one before the start where addresses are virtual). */
    rogue_write(&r, p.victim, junk, NESTED_REACH, addr, key, 0, OP_MS);
    if (r.virt_addr) rogue_write(&r, p.victim, junk, NESTED_SIZE, addr - NESTED_SIZE, key, 0, OP_MS);
    free(junk);
    char d = 'd';
    st_oob_send(0, &d, 1);
    rogue_close(&r);
    return 0;
  }
  struct victim_b b;
  victim_post_b(rank, &b);
  char handle[HSIZE];
  void *lcomm = victim_listen(handle, 1, -1), *mh = NULL, *req = NULL;
  void *ra = victim_offer_rogue(lcomm, b.buf + NESTED_AT, NESTED_SIZE, &mh, &req);
  while (!st_oob_ready(1)) st_net_accept(lcomm, &(void *){NULL});
  char d;
  st_oob_recv(1, &d, 1, SETUP_MS);
  for (int64_t t = st_now_ms(); st_now_ms() - t < 500;) st_net_accept(lcomm, &(void *){NULL});
  ST_CHECK(st_check_byte(b.buf, NESTED_AT, 0xaa) == SIZE_MAX, "the rogue wrote into B's buffer before its own");
  size_t after = st_check_byte(b.buf + NESTED_AT + NESTED_SIZE, B_SIZE - NESTED_AT - NESTED_SIZE, 0xaa);
  ST_CHECK(after == SIZE_MAX, "the rogue wrote %zu bytes past its 4 KiB into B's buffer", after + 1);
  victim_finish_b(&b);
  st_net_dereg_mr(ra, mh);
  st_net_close_recv(ra);
  ST_NCCL(st_net_close_listen(lcomm));
  ST_NCCL(st_net_finalize());
  return 0;
}

/* ---------- closed-peer: its messages still queued in the provider ---------- */

#define FLOOD 192
#define FLOOD_SIZE 8192 /* above shm's inject size: the data stays with the sender until received */

int insider_closed_peer(int rank, int nranks, void *arg) {
  (void)nranks;
  st_setup(arg, st_version(VERSION));
  char go = 'g';
  if (rank == 1) {
    struct rogue r;
    struct rogue_peer p;
    rogue_start(&r, ((const struct st_ctx *)arg)->provider, &p, NULL);
    st_oob_recv(0, &go, 1, SETUP_MS);
    static char junk[FLOOD_SIZE];
    static struct fi_context2 ctx[FLOOD];
    memset(junk, 0x33, sizeof junk);
    int posted = 0;
    for (int64_t t = st_now_ms(); posted < FLOOD && st_now_ms() - t < OP_MS;) {
      int rc = (int)fi_send(r.ep, junk, sizeof junk, NULL, p.victim, &ctx[posted]);
      if (rc == 0) posted++;
      else if (rc == -FI_EAGAIN) fi_cq_read(r.cq, NULL, 0);
      else break;
    }
    st_oob_send(0, &posted, sizeof posted);
    st_oob_recv(0, &go, 1, 120000);
    rogue_close(&r);
    return 0;
  }
  char handle[HSIZE];
  void *lcomm = victim_listen(handle, 1, -1), *rc = NULL;
  ncclResult_t err;
  ST_CHECK(st_accept_wait(lcomm, &rc, SETUP_MS, &err) == ST_DONE, "accept of the rogue's hello");
  st_oob_send(1, &go, 1);
  int posted = 0;
  st_oob_recv(1, &posted, sizeof posted, SETUP_MS); /* no progress meanwhile: they queue up */
  st_note("%d messages of %d bytes queued by the rogue", posted, FLOOD_SIZE);
  /* Closed before the provider saw them: the next progress finds more than
   * our posted receives and keeps the rest, which our reposts then match
   * (shm, peer address removed: SIGSEGV in smr_unexp_start, 1.17 and 2.6). */
  ST_NCCL(st_net_close_recv(rc));
  for (int64_t t = st_now_ms(); st_now_ms() - t < 2000;) st_net_accept(lcomm, &(void *){NULL});
  st_oob_send(1, &go, 1);
  ST_NCCL(st_net_close_listen(lcomm));
  ST_NCCL(st_net_finalize());
  return 0;
}

/* ---------- sweep: every write id, guessed from a comm of its own ---------- */

#define SWEEP_BUF 4096

/* Rank 1: one 8-byte write into its own buffer, with its own key, per write
 * id but its own, each naming slot 0 (B's first receive), one stripe and
 * B_SIZE bytes: before writes were bound to their writer, one of these
 * completed B empty (issue 60). */
static int sweep_rogue(const struct st_ctx *ctx) {
  struct rogue r;
  struct rogue_peer p;
  rogue_start(&r, ctx->provider, &p, NULL);
  struct srd_msg m;
  rogue_wait_cts(&r, &m);
  uint64_t addr = m.u.cts.e[0].addr, key = srd_cts_key(&m.u.cts, 0, 0);
  char data[8];
  memset(data, 0xee, sizeof data);
  uint32_t writes = 0;
  int64_t t0 = st_now_ms();
  for (uint32_t w = 0; w < SRD_MAX_COMMS; w++) {
    if (w == p.write_id) continue;
    uint32_t imm = srd_imm_pack((struct srd_imm){w, 0, 1, 0, 0});
    if (rogue_write_claiming(&r, p.victim, data, sizeof data, addr, key, imm, B_SIZE, OP_MS)) break;
    writes++;
  }
  st_note("rogue: %u writes in %lld ms", writes, (long long)(st_now_ms() - t0));
  st_oob_send(0, &writes, sizeof writes);
  char g;
  st_oob_recv(0, &g, 1, 120000);
  rogue_close(&r);
  return 0;
}

int insider_sweep(int rank, int nranks, void *arg) {
  (void)nranks;
  ST_CHECK(setenv("NCCL_SRD_CLOSE_TIMEOUT_MS", "1000", 1) == 0, "setenv");
  st_setup(arg, st_version(VERSION));
  if (rank == 2) return legit_sender(rank);
  if (rank == 1) return sweep_rogue(arg);
  struct victim_b b;
  victim_post_b(rank, &b);
  char handle[HSIZE];
  void *lcomm = victim_listen(handle, 1, -1), *mh = NULL, *req = NULL;
  char *abuf = st_alloc(SWEEP_BUF);
  void *ra = victim_offer_rogue(lcomm, abuf, SWEEP_BUF, &mh, &req);
  int warn0 = st_warn_count(), done = 0;
  ncclResult_t cut = ncclSuccess;
  /* B's receive may neither complete nor fail meanwhile (victim_check_b_open
   * fails the test on either); the rogue's own receive must fail. */
  for (bool swept = false; !swept || (cut == ncclSuccess && !done);) {
    victim_check_b_open(&b);
    if (cut == ncclSuccess && !done) cut = st_net_test(req, &done, NULL);
    else st_net_accept(lcomm, &(void *){NULL});
    if (!swept && st_oob_ready(1)) {
      uint32_t writes = 0;
      st_oob_recv(1, &writes, sizeof writes, SETUP_MS);
      st_note("the rogue swept %u write ids", writes);
      ST_CHECK(writes == SRD_MAX_COMMS - 1, "the rogue's sweep stopped after %u writes", writes);
      swept = true;
      for (int64_t t = st_now_ms(); st_now_ms() - t < 1000 && cut == ncclSuccess && !done;)
        cut = st_net_test(req, &done, NULL); /* what is still queued */
      break;
    }
  }
  ST_CHECK(cut != ncclSuccess || !done, "the rogue's own receive completed");
  ST_CHECK(cut != ncclSuccess, "the rogue swept every write id and was not cut off");
  ST_CHECK(st_log_count("cut off") > 0, "no line says why the rogue was cut off");
  int warns = st_warn_count() - warn0;
  st_note("%d warnings for the sweep", warns);
  ST_CHECK(warns < 100, "%d warnings for one sweep: not rate-limited", warns);
  victim_finish_b(&b);
  char g = 'g';
  st_oob_send(1, &g, 1);
  st_net_dereg_mr(ra, mh);
  st_net_close_recv(ra);
  ST_NCCL(st_net_close_listen(lcomm));
  ST_NCCL(st_net_finalize());
  return 0;
}
