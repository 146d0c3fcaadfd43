/* A rogue peer gets nothing. Rank 0 is the victim (the plugin, as NCCL
 * drives it), rank 1 the rogue (a bare libfabric endpoint speaking our wire
 * format, rogue.h), rank 2 when there is one a legitimate peer. Cases:
 *   keys     read and write registered memory without a hello, guessing keys
 *   cts      a peer given a 256-byte receive writes and reads around it
 *   hellos   hellos with a wrong family, a wrong length, an unreachable
 *            address (or, on shm, bogus names): the listener drops them and
 *            serves the legitimate peer
 *   self     connecting to our own closed listener fails, nothing crashes
 *   floods   unexpected eager data, hellos and pre-answer messages are capped
 *            (floods.c)
 *   places   hellos naming ports that refuse connections hold no place: a legitimate peer
 *            right after them is served (places.c)
 *   unexpected  eager data kept before its receive: at most 1,024 sequences
 *            ahead and 1,024 messages, memory measured (unexpected.c)
 *   regions  a killed process's shm region is removed by the next process
 *   misuse   double close, accept after closeListen, test after close, a
 *            deregistered handle, double finalize: errors, not crashes
 *   fuzz, nested, closed-peer, sweep: a peer inside the job (insider.c) */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "rogue.h"
#include "srdtest.h"

#define PROBE_MS 1000 /* a forbidden access may never complete (tcp drops the connection) */


/* ---------- keys: no hello, guessed keys ---------- */

static int keys(int rank, int nranks, void *arg) {
  (void)nranks;
  const size_t size = 4096;
  st_setup(arg, st_version(VERSION));
  if (rank == 2) {
    void *s = st_pair_comm(rank, 0, 2, SETUP_MS);
    char g;
    st_oob_recv(0, &g, 1, 110000);
    st_send_one(s, size, 7, 0, SETUP_MS);
    ST_NCCL(st_net_close_send(s));
    ST_NCCL(st_net_finalize());
    return 0;
  }
  if (rank == 0) {
    void *rc = st_pair_comm(rank, 0, 2, SETUP_MS);
    char *recvbuf = st_alloc(size), *secret = st_alloc(size);
    memset(recvbuf, 0xaa, size);
    memset(secret, 0x5e, size);
    void *rmh = NULL, *smh = NULL, *req = NULL;
    ST_NCCL(st_net_reg_mr(rc, recvbuf, size, &rmh));
    ST_NCCL(st_net_reg_mr(rc, secret, size, &smh)); /* registered, never posted */
    int tag = 0;
    void *data = recvbuf;
    ncclResult_t err;
    ST_CHECK(st_irecv_wait(rc, 1, &data, &size, &tag, &rmh, &req, SETUP_MS, &err) == ST_DONE, "irecv");
    char handle[HSIZE];
    void *lcomm = victim_listen(handle, 1, -1);
    uint64_t addrs[2] = {(uint64_t)(uintptr_t)recvbuf, (uint64_t)(uintptr_t)secret};
    st_oob_send(1, addrs, sizeof addrs);
    while (!st_oob_ready(1)) st_net_accept(lcomm, &(void *){NULL}); /* progress while the rogue probes */
    char d;
    st_oob_recv(1, &d, 1, 120000);
    ST_CHECK(st_check_byte(secret, size, 0x5e) == SIZE_MAX, "the rogue wrote into a registered buffer");
    ST_CHECK(st_check_byte(recvbuf, size, 0xaa) == SIZE_MAX, "the rogue wrote into a posted receive buffer");
    char g = 'g';
    st_oob_send(2, &g, 1);
    int got = 0;
    ST_CHECK(st_test_wait(req, &got, SETUP_MS, &err) == ST_DONE, "legit receive after the rogue");
    ST_CHECK(st_pattern_check(recvbuf, size, 7) == SIZE_MAX, "legit data corrupted");
    ST_NCCL(st_net_dereg_mr(rc, rmh));
    ST_NCCL(st_net_dereg_mr(rc, smh));
    ST_NCCL(st_net_close_recv(rc));
    ST_NCCL(st_net_close_listen(lcomm));
    ST_NCCL(st_net_finalize());
    return 0;
  }
  char handle[HSIZE];
  st_oob_recv(0, handle, HSIZE, SETUP_MS);
  uint64_t addrs[2];
  st_oob_recv(0, addrs, sizeof addrs, SETUP_MS);
  struct srd_handle h;
  rogue_decode_handle(handle, &h);
  char buf[64], junk[64];
  memset(junk, 0xee, sizeof junk);
  int hits = 0;
  /* A fresh endpoint for every access: tcp drops a connection after one
   * refused access, which would hide the accesses after it (a refused read
   * hid a write with the same guessed key). */
  for (uint64_t key = 0; key <= 4; key++)
    for (int a = 0; a < 4; a++) {
      struct rogue r;
      rogue_open(&r, ((const struct st_ctx *)arg)->provider);
      fi_addr_t v = rogue_insert(&r, h.name);
      /* Without FI_MR_VIRT_ADDR (tcp) addresses are offsets in the registration. */
      uint64_t where = r.virt_addr ? addrs[a / 2] : (uint64_t)(a / 2) * 64;
      if (a % 2 == 0 && rogue_read(&r, v, buf, 64, where, key, PROBE_MS) == 0) {
        st_note("read with key %llu at %#llx succeeded", (unsigned long long)key, (unsigned long long)where);
        hits++;
      }
      if (a % 2) rogue_write(&r, v, junk, 64, where, key, 0, PROBE_MS); /* the victim checks its memory */
      rogue_close(&r);
    }
  char d = 'd';
  st_oob_send(0, &d, 1);
  ST_CHECK(hits == 0, "%d remote reads with guessed keys succeeded", hits);
  return 0;
}

/* ---------- cts: only the posted range ---------- */

#define CANARY 0xcc

static int cts(int rank, int nranks, void *arg) {
  (void)nranks;
  const size_t arena = 3 * 4096, off = 1024, size = 256;
  if (rank == 0) {
    st_setup(arg, st_version(VERSION));
    char handle[HSIZE];
    void *lcomm = victim_listen(handle, 1, -1), *rc = NULL;
    ncclResult_t err;
    ST_CHECK(st_accept_wait(lcomm, &rc, SETUP_MS, &err) == ST_DONE, "accept of the rogue's hello");
    char *mem = st_alloc(arena);
    memset(mem, CANARY, arena);
    void *mh = NULL, *req = NULL, *data = mem + off;
    int tag = 0;
    ST_NCCL(st_net_reg_mr(rc, mem + off, size, &mh));
    ST_CHECK(st_irecv_wait(rc, 1, &data, &size, &tag, &mh, &req, SETUP_MS, &err) == ST_DONE, "irecv");
    int got = 0;
    enum st_wait w = st_test_wait(req, &got, SETUP_MS, &err);
    ST_CHECK(w == ST_DONE && got == (int)size, "the rogue's exact write: %d, %d bytes", (int)w, got);
    char d;
    while (!st_oob_ready(1)) st_net_accept(lcomm, &(void *){NULL}); /* progress while the rogue probes */
    st_oob_recv(1, &d, 1, SETUP_MS);
    ST_CHECK(st_check_byte(mem, off, CANARY) == SIZE_MAX, "bytes before the receive buffer were written");
    ST_CHECK(st_check_byte(mem + off + size, arena - off - size, CANARY) == SIZE_MAX,
             "bytes after the receive buffer were written");
    ST_CHECK(st_check_byte(mem + off, size, 0x11) == SIZE_MAX, "the receive holds the wrong bytes");
    ST_NCCL(st_net_dereg_mr(rc, mh));
    ST_NCCL(st_net_close_recv(rc));
    ST_NCCL(st_net_close_listen(lcomm));
    ST_NCCL(st_net_finalize());
    return 0;
  }
  struct rogue r;
  struct rogue_peer p;
  struct srd_handle h;
  rogue_start(&r, ((const struct st_ctx *)arg)->provider, &p, &h);
  fi_addr_t v = p.victim;
  struct srd_msg m;
  rogue_wait_cts(&r, &m);
  ST_CHECK(m.u.cts.n == 1 && m.u.cts.e[0].len == size, "unexpected clear-to-send");
  uint64_t addr = m.u.cts.e[0].addr, key = srd_cts_key(&m.u.cts, 0, 0);
  char *big = malloc(arena);
  memset(big, 0x11, size);
  struct srd_imm imm = {p.write_id, m.u.cts.slot, 1, 0};
  ST_CHECK(rogue_write(&r, v, big, size, addr, key, srd_imm_pack(imm), OP_MS) == 0, "the exact write failed");
  /* The receive is done, its buffer still registered: now around it (tcp
   * may drop the connection after the first refusal). */
  memset(big, 0xee, arena);
  /* A write's completion at the initiator proves nothing (tcp completes it
   * once sent): the victim checks its memory. A read that completes is a leak. */
  int hits = 0;
  if (r.virt_addr) rogue_write(&r, v, big, size + 256, addr - 128, key, 0, PROBE_MS);
  rogue_write(&r, v, big, size + 256, addr, key, 0, PROBE_MS);
  rogue_write(&r, v, big, size, addr + 128, key, 0, PROBE_MS);
  if (rogue_read(&r, v, big, size + 512, addr, key, PROBE_MS) == 0) hits++, st_note("read past the end");
  /* Inside the posted range with the key the CTS gave, from a fresh endpoint
   * (tcp drops a connection after one refused access, which would hide this
   * read): a receive buffer is written by the peer, never read. */
  struct rogue fresh;
  rogue_open(&fresh, ((const struct st_ctx *)arg)->provider);
  fi_addr_t fv = rogue_insert(&fresh, h.name);
  if (rogue_read(&fresh, fv, big, size, addr, key, PROBE_MS) == 0) hits++, st_note("read the receive buffer");
  rogue_close(&fresh);
  char d = 'd';
  st_oob_send(0, &d, 1);
  ST_CHECK(hits == 0, "%d accesses outside the posted range (or reads) succeeded", hits);
  free(big);
  rogue_close(&r);
  return 0;
}

/* ---------- hellos: bad ones are dropped, the legit peer is served ---------- */

static void bad_name(const struct st_ctx *ctx, const struct rogue *r, char *name, int kind, const char *evil) {
  memset(name, 0, SRD_NAME_MAX);
  if (!is_shm(ctx)) {
    /* An address in the black hole of TEST-NET-1 (no answer ever), an
     * AF_UNIX address, and the same with a wrong length (below). */
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(9)};
    sin.sin_addr.s_addr = htonl(0xc0000201);
    if (kind == 0) memcpy(name, &sin, sizeof sin);
    else name[0] = AF_UNIX;
    return;
  }
  (void)r;
  const char *names[] = {"../../../../tmp/srd-rogue", "srd-0000000001-0000000000000000-000-0", evil};
  snprintf(name, SRD_NAME_MAX, "%s", names[kind % 3]);
}

static int hellos(int rank, int nranks, void *arg) {
  (void)nranks;
  const struct st_ctx *ctx = arg;
  char evil[SRD_NAME_MAX], evil_path[SRD_NAME_MAX + 16];
  snprintf(evil, sizeof evil, "srd-%010d-%016llx-000-0", (int)getppid(), 0xfeedULL);
  snprintf(evil_path, sizeof evil_path, "/dev/shm/%s", evil);
  if (rank == 0) {
    ST_CHECK(setenv("NCCL_SRD_CONNECT_TIMEOUT_MS", "4000", 1) == 0, "setenv");
    st_setup(arg, st_version(VERSION));
    char handle[HSIZE];
    void *lcomm = victim_listen(handle, 1, -1), *rc = NULL;
    while (!st_oob_ready(1)) {
      ST_NCCL(st_net_accept(lcomm, &rc));
      ST_CHECK(!rc, "accept gave a comm for a bad hello");
    }
    char g;
    st_oob_recv(1, &g, 1, SETUP_MS);
    st_oob_send(2, handle, HSIZE);
    int64_t t0 = st_now_ms();
    while (!rc) {
      ncclResult_t err = st_net_accept(lcomm, &rc);
      ST_CHECK(err == ncclSuccess, "accept failed (%d) after bad hellos", (int)err);
      ST_CHECK(st_now_ms() - t0 < 15000, "the legit peer was not accepted within 15 s of its connect");
    }
    st_note("legit peer accepted after %lld ms", (long long)(st_now_ms() - t0));
    st_recv_one(rc, 1024, 3, 0, SETUP_MS);
    ST_NCCL(st_net_close_recv(rc));
    /* The undeliverable answer is given up after NCCL_SRD_CONNECT_TIMEOUT_MS
     * (logged: "the answer to process N's hello could not be sent"); no
     * comm ever comes out of a bad hello. */
    for (int64_t t1 = st_now_ms(); st_now_ms() - t1 < 6000;) {
      void *x = NULL;
      ST_NCCL(st_net_accept(lcomm, &x));
      ST_CHECK(!x, "accept gave a comm for a bad hello");
      st_sleep_ms(10);
    }
    ST_NCCL(st_net_close_listen(lcomm));
    ST_NCCL(st_net_finalize());
    char e = 'e'; /* shm: the rogue checks its planted region now that we are done with the hellos */
    if (is_shm(ctx)) st_oob_send(1, &e, 1);
    return 0;
  }
  if (rank == 2) {
    st_setup(arg, st_version(VERSION));
    char handle[HSIZE];
    st_oob_recv(0, handle, HSIZE, SETUP_MS);
    void *s = NULL;
    ncclResult_t err;
    ST_CHECK(st_connect_wait(0, handle, &s, SETUP_MS, &err) == ST_DONE, "legit connect");
    st_send_one(s, 1024, 3, 0, SETUP_MS);
    ST_NCCL(st_net_close_send(s));
    ST_NCCL(st_net_finalize());
    return 0;
  }
  struct rogue r;
  rogue_open(&r, ctx->provider);
  char handle[HSIZE];
  st_oob_recv(0, handle, HSIZE, SETUP_MS);
  struct srd_handle h;
  rogue_decode_handle(handle, &h);
  fi_addr_t v = rogue_insert(&r, h.name);
  if (is_shm(ctx)) {
    /* Same shape as ours, a live pid, but a region the victim must not map:
     * not of the victim's user where we can arrange that. */
    int fd = open(evil_path, O_CREAT | O_RDWR | O_TRUNC, 0666);
    ST_CHECK(fd >= 0, "create %s: %s", evil_path, strerror(errno));
    ST_CHECK(ftruncate(fd, 1 << 20) == 0, "ftruncate");
    if (geteuid() == 0) ST_CHECK(fchown(fd, 65534, 65534) == 0, "fchown");
    close(fd);
  }
  char msg[ROGUE_BUF], name[SRD_NAME_MAX];
  for (int kind = 0; kind < 3; kind++) {
    bad_name(ctx, &r, name, kind, evil);
    size_t len = rogue_hello(&r, msg, &h, 0x100 + (uint32_t)kind, name, (uint8_t)r.name_len);
    ST_CHECK(rogue_send(&r, v, msg, len, OP_MS) == 0, "bad hello %d not sent", kind);
  }
  /* A wrong address length. */
  size_t len = rogue_hello(&r, msg, &h, 0x200, name, (uint8_t)(r.name_len - 1));
  ST_CHECK(rogue_send(&r, v, msg, len, OP_MS) == 0, "short hello not sent");
  char g = 'g';
  st_oob_send(0, &g, 1);
  if (is_shm(ctx)) {
    st_oob_recv(0, &g, 1, SETUP_MS); /* the victim is done with every hello */
    struct stat st;
    ST_CHECK(stat(evil_path, &st) == 0 && st.st_size == (1 << 20), "the planted region changed");
    int fd = open(evil_path, O_RDONLY);
    char *b = malloc(1 << 20);
    ST_CHECK(read(fd, b, 1 << 20) == (1 << 20), "read");
    close(fd);
    ST_CHECK(st_check_byte(b, 1 << 20, 0) == SIZE_MAX, "the victim wrote into the planted region");
    free(b);
    unlink(evil_path);
  }
  rogue_close(&r);
  return 0;
}

/* ---------- self: our own closed listener ---------- */

static int self(int rank, int nranks, void *arg) {
  (void)nranks;
  ST_CHECK(setenv("NCCL_SRD_CONNECT_TIMEOUT_MS", "3000", 1) == 0, "setenv");
  st_setup(arg, st_version(VERSION));
  if (rank == 0) {
    char own[HSIZE];
    void *lown = victim_listen(own, -1, -1);
    ST_NCCL(st_net_close_listen(lown));
    void *s = NULL;
    ncclResult_t err;
    int64_t t0 = st_now_ms();
    ST_CHECK(st_connect_wait(0, own, &s, 10000, &err) == ST_ERROR, "connect to our own closed listener did not fail");
    /* shm: our own address never enters our AV, so this fails at once, not
     * by the connect timeout (removing a self address crashed shm 1.17's peer). */
    if (is_shm(arg)) ST_CHECK(st_now_ms() - t0 < 1000, "connect to our own address was not refused at once");
  }
  void *comm = st_pair_comm(rank, 1, 0, SETUP_MS);
  if (rank == 0) {
    st_send_one(comm, 4096, 9, 0, SETUP_MS);
    ST_NCCL(st_net_close_send(comm));
  } else {
    st_recv_one(comm, 4096, 9, 0, SETUP_MS);
    ST_NCCL(st_net_close_recv(comm));
  }
  st_barrier(SETUP_MS);
  ST_NCCL(st_net_finalize());
  return 0;
}

/* ---------- forged: control messages and write completions for a comm the
 * rogue never joined ---------- */

/* Comm ids are index | generation << 16, generations from 1: a stranger can
 * guess them, not the token. */
#define GUESSED_IDS 4

static int forged(int rank, int nranks, void *arg) {
  (void)nranks;
  const size_t size = 65536; /* by RMA write after the clear-to-send */
  st_setup(arg, st_version(VERSION));
  if (rank == 2) {
    void *s = st_pair_comm(rank, 0, 2, SETUP_MS);
    char g;
    st_oob_recv(0, &g, 1, 110000);
    st_send_one(s, size, 9, 0, SETUP_MS);
    ST_NCCL(st_net_close_send(s));
    ST_NCCL(st_net_finalize());
    return 0;
  }
  if (rank == 0) {
    void *rc = st_pair_comm(rank, 0, 2, SETUP_MS);
    char *buf = st_alloc(size);
    memset(buf, 0xaa, size);
    void *mh = NULL, *req = NULL, *data = buf;
    int tag = 0, done = 0, got = 0;
    ncclResult_t err;
    ST_NCCL(st_net_reg_mr(rc, buf, size, &mh));
    ST_CHECK(st_irecv_wait(rc, 1, &data, &size, &tag, &mh, &req, SETUP_MS, &err) == ST_DONE, "irecv");
    char handle[HSIZE];
    void *lcomm = victim_listen(handle, 1, -1);
    uint64_t addr = (uint64_t)(uintptr_t)buf;
    st_oob_send(1, &addr, sizeof addr);
    while (!st_oob_ready(1)) { /* progress while the rogue forges */
      ST_NCCL(st_net_test(req, &done, &got));
      ST_CHECK(!done, "the receive completed from forged traffic");
    }
    char d;
    st_oob_recv(1, &d, 1, 120000);
    ST_NCCL(st_net_test(req, &done, &got));
    ST_CHECK(!done, "the receive completed from forged traffic");
    char g = 'g';
    st_oob_send(2, &g, 1);
    ST_CHECK(st_test_wait(req, &got, SETUP_MS, &err) == ST_DONE, "the legit receive after the forgeries (error %d)",
             (int)err);
    ST_CHECK((size_t)got == size, "received %d bytes", got);
    ST_CHECK(st_pattern_check(buf, size, 9) == SIZE_MAX, "legit data corrupted");
    ST_NCCL(st_net_dereg_mr(rc, mh));
    ST_NCCL(st_net_close_recv(rc));
    ST_NCCL(st_net_close_listen(lcomm));
    ST_NCCL(st_net_finalize());
    return 0;
  }
  char handle[HSIZE];
  st_oob_recv(0, handle, HSIZE, SETUP_MS);
  uint64_t addr;
  st_oob_recv(0, &addr, sizeof addr, SETUP_MS);
  struct srd_handle h;
  rogue_decode_handle(handle, &h);
  struct rogue r;
  rogue_open(&r, ((const struct st_ctx *)arg)->provider);
  fi_addr_t v = rogue_insert(&r, h.name);
  char msg[ROGUE_BUF], junk[256];
  memset(junk, 0xee, sizeof junk);
  for (uint32_t i = 0; i < GUESSED_IDS; i++) {
    uint32_t id = i | 1u << 16;
    struct srd_msg_cts c = {.seq = 0, .n = 1, .nkeys = 1, .e = {{.addr = 0, .len = size}}};
    uint64_t key = 1;
    size_t len = srd_msg_encode_cts(msg, sizeof msg, id, &c, &key);
    srd_msg_set_token(msg, 0x1234);
    rogue_send(&r, v, msg, len, OP_MS);
    len = srd_msg_encode_eager_header(msg, sizeof msg, id, 0, 0, sizeof junk);
    memcpy(msg + len, junk, sizeof junk);
    srd_msg_set_token(msg, 0x1234);
    rogue_send(&r, v, msg, len + sizeof junk, OP_MS);
    struct srd_msg_bye bye = {0, 0, 0, 0};
    len = srd_msg_encode_bye(msg, sizeof msg, id, &bye);
    srd_msg_set_token(msg, 0);
    rogue_send(&r, v, msg, len, OP_MS);
    /* A write naming the victim's receive (slot 0, first use): shm checks no
     * key, so it lands; its completion must not count (FI_SOURCE). Elsewhere
     * the key is refused and nothing completes. */
    struct srd_imm imm = {i, 0, 1, 0};
    rogue_write(&r, v, junk, sizeof junk, r.virt_addr ? addr : 0, 0, srd_imm_pack(imm), PROBE_MS);
  }
  char d = 'd';
  st_oob_send(0, &d, 1);
  rogue_close(&r);
  return 0;
}

static int run(const struct st_ctx *ctx, const char *label, int nranks, st_rank_fn fn) {
  char l[128];
  snprintf(l, sizeof l, "%s[%s]", label, ctx->provider);
  struct st_group_opts o = {0}; /* the default alarm: a hang guard */
  return st_group_run(l, nranks, fn, (void *)ctx, &o);
}

/* shm's RMA is a cross-memory copy (process_vm_writev/readv) made by the
 * initiator itself: the target checks no key and no range, and any process
 * of our user can do the same without libfabric. Keys and ranges are tested
 * where the target enforces them. */
#define SHM_RMA "shm's RMA is a copy the initiator makes; the target checks no key and no range"
static int case_keys(const struct st_ctx *c) { return is_shm(c) ? st_skip(c, SHM_RMA) : run(c, "keys", 3, keys); }
static int case_cts(const struct st_ctx *c) { return is_shm(c) ? st_skip(c, SHM_RMA) : run(c, "cts", 2, cts); }
static int case_hellos(const struct st_ctx *c) { return run(c, "hellos", 3, hellos); }
static int case_self(const struct st_ctx *c) { return run(c, "self", 2, self); }
static int case_floods(const struct st_ctx *c) { return run(c, "floods", 2, flood_caps); }
static int case_forged(const struct st_ctx *c) { return run(c, "forged", 3, forged); }
static int case_regions(const struct st_ctx *c) {
  return is_shm(c) ? run(c, "regions", 2, victim_killed_region) : st_skip(c, "only shm leaves regions in /dev/shm");
}
static int case_misuse(const struct st_ctx *c) { return run(c, "misuse", 2, api_misuse); }
static int case_fuzz(const struct st_ctx *c) { return run(c, "fuzz", 3, insider_fuzz); }
static int case_nested(const struct st_ctx *c) {
  return is_shm(c) ? st_skip(c, SHM_RMA) : run(c, "nested", 3, insider_nested);
}
/* Where the provider names no writer of a remote write (tcp;ofi_rxm: struct
 * srd_rail's write_source), a write is bound by its write id alone: DESIGN.md,
 * "A peer inside the job", gives the odds. */
static int case_sweep(const struct st_ctx *c) {
  return strcmp(c->provider, "shm") ? st_skip(c, "tcp;ofi_rxm names no writer of a remote write")
                                    : run(c, "sweep", 3, insider_sweep);
}
static int case_closed_peer(const struct st_ctx *c) { return run(c, "closed-peer", 2, insider_closed_peer); }
static int case_unexpected(const struct st_ctx *c) { return run(c, "unexpected", 2, unexpected_cap); }
static int case_places(const struct st_ctx *c) {
  return is_shm(c) ? st_skip(c, "shm addresses are no ports; a hello naming no region is dropped when accept() takes it")
                   : run(c, "places", 3, hello_places);
}

int main(int argc, char **argv) {
  static const struct st_case cases[] = {
      {"keys", case_keys},     {"cts", case_cts},         {"hellos", case_hellos}, {"self", case_self},
      {"floods", case_floods}, {"regions", case_regions}, {"misuse", case_misuse}, {"forged", case_forged},
      {"fuzz", case_fuzz},     {"nested", case_nested},   {"closed-peer", case_closed_peer},
      {"unexpected", case_unexpected}, {"places", case_places}, {"sweep", case_sweep},
  };
  return st_main(argc, argv, cases, (int)(sizeof cases / sizeof cases[0]));
}
