// The protocol's state machines (send.c, recv.c, request.c, ctrl.c, the comm
// layer's dispatch and close) against a fake rail: two devices of one rail
// each, a sender on device A and a receiver on device B. The fake records
// every send and write; the tests decide when each is delivered to the other
// side and when its completion runs, in any order, as often as they like.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <deque>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <rdma/fi_errno.h>
#include <sys/wait.h>
#include <unistd.h>

// The C headers name functions after structs (srd_rail_write, srd_send_comm).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
extern "C" {
#include "nccl/net.h"
#include "srd/comm.h"
#include "srd/log.h"
#include "srd/net.h"
#include "srd/param.h"
#include "srd/rma.h"
}
#pragma GCC diagnostic pop

#include "fake_cuda.h"

namespace {

constexpr size_t kEagerMax = 1024;
constexpr size_t kMaxWrite = 4096; // a 16 KiB message is four writes

struct Sent {
  srd_rail *rail;
  srd_rail_buf *buf;
  size_t len;
  fi_addr_t dest;
};

struct Write {
  srd_rail *rail;
  srd_op *op;
  const void *src;
  size_t len;
  uint32_t imm;
  int stripe;
  fi_addr_t dest;
  uint64_t raddr;
};

struct Read {
  srd_rail *rail;
  srd_op *op;
  uint64_t raddr, key;
};

// A loopback RMA of a device to itself (signal words the NIC writes).
struct Loop {
  srd_rail *rail;
  srd_op *op;
  bool write;
  void *local;
  size_t len;
  uint64_t raddr, key;
};

struct Fake {
  std::deque<Sent> sends;
  std::deque<Write> writes;
  std::deque<Read> reads;
  std::deque<Loop> loops;
  int loop_refused = 0; // loopback ops fail with this
  int read_refused = 0; // flush_read fails with this
  int reg_refused = 0;  // reg fails with this
  int av_refused = 0;   // av_insert fails with this
  uint64_t keys_made = 0;
  int mrs_open = 0;
  int writable_open = 0; // of them, remotely writable
  int reg_cuda_dev = -2;  // the GPU the last registration named (-1 host memory)

  bool no_buffers = false;
  bool provider_full = false;
  bool listener_gone = false; // peer_refused: a connect to the peer's address was refused
  // Peers the provider refuses for now, as efa does one peer in
  // receiver-not-ready backoff or waiting for its handshake.
  std::set<fi_addr_t> refused_peers;
  int refusals = 0; // -FI_EAGAIN answers given
  int send_refused = 0; // send fails with this
  int bufs_out = 0;
  srd_dev *devs[2] = {nullptr, nullptr};
  bool lanes = false;                  // a test that gives rails to lane threads
  std::vector<struct srd_rail_write *> queued; // writes handed to a lane's thread
  // Writes the target's provider placed and acknowledged to their sender,
  // their completions not read yet: a poll of that rail reads them.
  std::vector<std::pair<srd_rail *, Write>> unread;
  std::set<const srd_rail *> links_down; // link_down says so for these
} g;

int av_insert(srd_rail *, const void *, fi_addr_t *addr) {
  *addr = 0;
  return g.av_refused;
}
void av_remove(srd_rail *, fi_addr_t) {}
srd_rail_buf *get_send_buf(srd_rail *rail) {
  if (g.no_buffers) return nullptr;
  auto *b = static_cast<srd_rail_buf *>(calloc(1, sizeof(srd_rail_buf) + rail->buf_size));
  b->rail = rail;
  g.bufs_out++;
  return b;
}
void put_send_buf(srd_rail_buf *b) {
  g.bufs_out--;
  free(b);
}
int send(srd_rail *rail, int, srd_rail_buf *b, size_t len, fi_addr_t dest) {
  if (g.provider_full || g.refused_peers.count(dest)) return g.refusals++, -FI_EAGAIN;
  if (g.send_refused) return g.send_refused;
  g.sends.push_back({rail, b, len, dest});
  return 0;
}
int write(srd_rail *rail, int, const void *src, size_t len, void *, uint32_t imm, fi_addr_t dest, uint64_t raddr,
          uint64_t, srd_op *op) {
  if (g.provider_full || g.refused_peers.count(dest)) return g.refusals++, -FI_EAGAIN;
  g.writes.push_back({rail, op, src, len, imm, static_cast<int>(srd_imm_unpack(imm).stripe), dest, raddr});
  return 0;
}
void queue_write(srd_rail *, struct srd_rail_write *w) {
  if (!g.lanes) ADD_FAILURE() << "no lanes in this test";
  g.queued.push_back(w);
}
void *mr_desc(fid_mr *) { return nullptr; }
// Registrations made through the fake (srd_dev_reg) carry keys 1, 2, 3...;
// the hand-made ones of struct Reg have none (key 0x5eed). libfabric's
// fid_mr stays opaque here (its header trips -Wshadow in C++ on 2.6).
struct FakeMr {
  uint64_t key;
  uint64_t access;
};
uint64_t mr_key(fid_mr *mr) { return mr ? reinterpret_cast<FakeMr *>(mr)->key : 0x5eed; }
int reg(srd_rail *, void *, size_t, uint64_t access, int cuda_dev, int, uint64_t, fid_mr **mr) {
  if (g.reg_refused) return g.reg_refused;
  g.reg_cuda_dev = cuda_dev;
  *mr = reinterpret_cast<fid_mr *>(new FakeMr{++g.keys_made, access});
  g.mrs_open++;
  g.writable_open += (access & FI_REMOTE_WRITE) != 0;
  return 0;
}
void mr_close(fid_mr *mr) {
  auto *m = reinterpret_cast<FakeMr *>(mr);
  g.mrs_open--;
  g.writable_open -= (m->access & FI_REMOTE_WRITE) != 0;
  delete m;
}
int poll(srd_rail *rail, int max);
int link_down(const srd_rail *rail) { return g.links_down.count(rail) ? 1 : 0; }

int flush_read(srd_rail *rail, uint64_t raddr, uint64_t key, srd_op *op) {
  if (g.read_refused) return g.read_refused;
  g.reads.push_back({rail, op, raddr, key});
  return 0;
}

bool peer_refused(srd_rail *, fi_addr_t, uint64_t, uint64_t) { return g.listener_gone; }

// A get's stripe read from a peer, posted by the caller.
int rma_read(srd_rail *rail, int, void *, size_t, void *, fi_addr_t, uint64_t raddr, uint64_t key, srd_op *op) {
  if (g.provider_full) return g.refusals++, -FI_EAGAIN;
  g.reads.push_back({rail, op, raddr, key});
  return 0;
}

int loopback_read(srd_rail *rail, void *dst, size_t len, void *, uint64_t raddr, uint64_t key, srd_op *op) {
  if (g.loop_refused) return g.loop_refused;
  g.loops.push_back({rail, op, false, dst, len, raddr, key});
  return 0;
}
int loopback_write(srd_rail *rail, const void *src, size_t len, void *, uint64_t raddr, uint64_t key, srd_op *op) {
  if (g.loop_refused) return g.loop_refused;
  g.loops.push_back({rail, op, true, const_cast<void *>(src), len, raddr, key});
  return 0;
}

const srd_rail_ops kFake = {av_insert,    av_remove, get_send_buf,  put_send_buf,  send,      write,      queue_write,
                            mr_desc,      mr_key,    reg,           mr_close,      poll,      link_down, flush_read,
                            peer_refused, rma_read,  loopback_read, loopback_write};

// Addresses: a comm's peer address is the index of the peer's device, plus
// twice any k (another AV entry of that device: another peer to the
// provider); what arrives at one device comes from the other (FI_SOURCE),
// through the entry of the same k.
srd_dev *dest_dev(fi_addr_t a) { return g.devs[a % 2]; }
constexpr fi_addr_t kFromA = 0, kFromB = 1;
fi_addr_t src_of(const srd_dev *to) { return to == g.devs[0] ? kFromB : kFromA; }
fi_addr_t source_for(fi_addr_t dest) { return dest ^ 1; }

int poll(srd_rail *rail, int max) {
  int n = 0;
  for (size_t i = 0; i < g.unread.size() && n < max;) {
    if (g.unread[i].first != rail) {
      i++;
      continue;
    }
    Write w = g.unread[i].second;
    g.unread.erase(g.unread.begin() + static_cast<long>(i));
    srd_dispatch_handlers.on_remote_write(dest_dev(w.dest), rail, w.imm, w.len, source_for(w.dest));
    n++;
  }
  return n;
}

// A device of nrails NICs (one lane, one endpoint each).
void make_dev(srd_dev *d, int index, int nrails = 1) {
  memset(static_cast<void *>(d), 0, sizeof(*d));
  srd_dev_init(d, index, &srd_dispatch_handlers);
  d->rail_ops = &kFake;
  d->rails = static_cast<srd_rail *>(calloc(static_cast<size_t>(nrails), sizeof(srd_rail)));
  d->neps = d->lanes_per_nic = 1;
  d->nrails = d->npaths = d->nnics = d->inline_paths = nrails;
  for (int l = 0; l < nrails; l++) {
    d->rails[l].buf_size = 4096;
    d->rails[l].virt_addr = 1;
    d->rails[l].source = d->rails[l].write_source = true;
    snprintf(d->rails[l].name, sizeof d->rails[l].name, "fake%d.%d", index, l);
  }
  d->eager_max = kEagerMax;
  d->sched = {1, 1 << 20, 4096, kMaxWrite};
  ASSERT_EQ(0, srd_dev_comms_init(d));
  g.devs[index] = d;
}

void free_dev(srd_dev *d) {
  srd_dev_free_closed(d, true);
  for (int i = 0; i < d->comms_end; i++)
    if (d->comms[i]) srd_comm_free(d->comms[i]);
  srd_dev_comms_fini(d);
  free(d->rails);
  d->rails = nullptr;
  srd_dev_fini(d);
}

// A registration of buf as the cache would hand it out.
struct Reg {
  srd_rail_mrs mrs{};
  srd_mr mr{}, send_mr{};
  srd_mr_ref ref{};
  explicit Reg(std::vector<char> &buf) {
    mrs.nrails = 1;
    // One handle serves both directions, as with regIsGlobal: the receive
    // class first, the send class as its second registration.
    mr.access = SRD_MR_RECV;
    send_mr.access = SRD_MR_SEND;
    send_mr.handle = &mrs;
    ref.alt = &send_mr;
    mr.base = reinterpret_cast<uintptr_t>(buf.data());
    mr.len = buf.size();
    mr.refs = 1;
    mr.device = -1; // host memory
    mr.handle = &mrs;
    ref.mr = &mr;
    ref.addr = mr.base;
    ref.len = buf.size();
  }
};

// dev->lock for the ops, released even when an assertion returns early.
struct Locked {
  pthread_mutex_t *m;
  explicit Locked(srd_dev &d) : m(&d.lock) { pthread_mutex_lock(m); }
  ~Locked() { pthread_mutex_unlock(m); }
  Locked(const Locked &) = delete;
  Locked &operator=(const Locked &) = delete;
};

class Proto : public ::testing::Test {
 protected:
  srd_dev a, b;
  srd_comm *s = nullptr, *r = nullptr;

  virtual int rails() const { return 1; }
  void SetUp() override {
    g = Fake();
    make_dev(&a, 0, rails());
    make_dev(&b, 1, rails());
    s = srd_comm_alloc(&a, true);
    r = srd_comm_alloc(&b, false);
    ASSERT_TRUE(s && r);
    join(s, r, 1);
    join(r, s, 0);
    s->eager_max = a.eager_max;
  }
  // Every path of c reaches the peer device at addr (both have c's rails).
  static void join(srd_comm *c, srd_comm *peer, fi_addr_t addr) {
    size_t n = static_cast<size_t>(c->dev->nrails);
    c->peer_id = peer->id;
    c->peer_token = peer->token;
    if (c->is_send) c->write_id = peer->write_id; // as the answer tells it
    c->remote_rails = c->dev->nrails;
    c->remote_eps = 1;
    c->peer = static_cast<fi_addr_t *>(calloc(n, sizeof(fi_addr_t)));
    c->inserted = static_cast<fi_addr_t *>(calloc(n * n, sizeof(fi_addr_t)));
    for (size_t i = 0; i < n; i++) c->peer[i] = addr;
    for (size_t i = 0; i < n * n; i++) c->inserted[i] = addr;
    c->ready = true;
  }
  // A one-sided group on device b as rank 0 of 2; rank 1 is device a, reached
  // by a send comm of b's own and received from over r.
  srd_rma_coll *rma_group(srd_comm **send) {
    *send = srd_comm_alloc(&b, true);
    srd_comm *ar = srd_comm_alloc(&a, false);
    if (!*send || !ar) return nullptr;
    join(*send, ar, 0);
    join(ar, *send, 1);
    srd_rma_coll *coll = srd_rma_coll_new(&b, 2, 0);
    if (coll) srd_rma_set_peer(coll, 1, *send, r);
    return coll;
  }
  // Another connection from A to B, over AV entries of its own (k > 0): to
  // the provider, another peer on each side.
  std::pair<srd_comm *, srd_comm *> another_pair(fi_addr_t k) {
    srd_comm *s2 = srd_comm_alloc(&a, true), *r2 = srd_comm_alloc(&b, false);
    EXPECT_TRUE(s2 && r2);
    join(s2, r2, 1 + 2 * k);
    join(r2, s2, 2 * k);
    return {s2, r2};
  }
  // The rail of the destination device with the index of the one m left by.
  static srd_rail *arrival_rail(srd_dev *to, const srd_rail *from) {
    srd_dev *src = to == g.devs[0] ? g.devs[1] : g.devs[0];
    return &to->rails[from - src->rails];
  }
  void TearDown() override {
    // Run what the fake still holds, as a provider would at close.
    while (!g.writes.empty()) complete_write(0);
    while (!g.sends.empty()) complete_send(0);
    while (!g.reads.empty()) complete_read(0);
    free_dev(&a);
    free_dev(&b);
    EXPECT_EQ(0, g.bufs_out) << "control buffers leaked";
  }

  // Hand the i-th recorded send to its destination (it stays recorded).
  void deliver_send(size_t i) {
    const Sent &m = g.sends.at(i);
    srd_dev *d = dest_dev(m.dest);
    srd_dispatch_handlers.on_message(d, arrival_rail(d, m.rail), m.buf->data, m.len, source_for(m.dest));
  }
  // Its completion at the sender; then it is gone.
  void complete_send(size_t i, int err = 0) {
    Sent m = g.sends.at(i);
    g.sends.erase(g.sends.begin() + static_cast<long>(i));
    m.buf->op.done(&m.buf->op, err, err ? "fake failure" : nullptr);
  }
  // The flags of the close notice g.sends[i]; -1 when it is something else.
  int sent_bye_flags(size_t i) {
    srd_msg m;
    const char *why = nullptr;
    const Sent &x = g.sends.at(i);
    return srd_msg_decode(x.buf->data, x.len, &m, &why) || m.type != SRD_MSG_BYE ? -1 : m.u.bye.flags;
  }
  int sent_type(size_t i) {
    srd_msg m;
    const char *why = nullptr;
    const Sent &x = g.sends.at(i);
    return srd_msg_decode(x.buf->data, x.len, &m, &why) ? -1 : m.type;
  }
  void deliver_and_complete_sends() {
    while (!g.sends.empty()) {
      deliver_send(0);
      complete_send(0);
    }
  }
  void deliver_write(size_t i) {
    const Write &w = g.writes.at(i);
    memcpy(reinterpret_cast<void *>(w.raddr), w.src, w.len);
    srd_dev *d = dest_dev(w.dest);
    srd_dispatch_handlers.on_remote_write(d, arrival_rail(d, w.rail), w.imm, w.len, source_for(w.dest));
  }
  // The i-th write lands and its sender is told, but its completion waits in
  // the target rail's CQ until that rail is polled.
  void place_write_unread(size_t i) {
    const Write &w = g.writes.at(i);
    memcpy(reinterpret_cast<void *>(w.raddr), w.src, w.len);
    srd_dev *d = dest_dev(w.dest);
    g.unread.push_back({arrival_rail(d, w.rail), w});
  }
  void complete_write(size_t i, int err = 0) {
    Write w = g.writes.at(i);
    g.writes.erase(g.writes.begin() + static_cast<long>(i));
    w.op->done(w.op, err, err ? "fake failure" : nullptr);
  }

  void complete_read(size_t i, int err = 0) {
    Read rd = g.reads.at(i);
    g.reads.erase(g.reads.begin() + static_cast<long>(i));
    rd.op->done(rd.op, err, err ? "fake failure" : nullptr);
  }
  srd_req *iflush(std::vector<char> &buf, Reg &reg, int size, int expect_rc = 0) {
    void *data[] = {buf.data()};
    int sizes[] = {size};
    srd_mr_ref *mrs[] = {&reg.ref};
    srd_req *req = nullptr;
    EXPECT_EQ(expect_rc, srd_proto_iflush(r, 1, data, sizes, mrs, &req));
    return req;
  }
  srd_req *isend(std::vector<char> &buf, Reg &reg, size_t size, int tag, int expect_rc = 0) {
    srd_req *req = nullptr;
    EXPECT_EQ(expect_rc, srd_proto_isend(s, buf.data(), size, tag, &reg.ref, &req));
    return req;
  }
  // One message of one write from s to r, landed and completed on both
  // sides; the write as the fake recorded it, to be played again late.
  // A receive of in, cleared, and a send of out into it: its writes posted,
  // none landed.
  void cleared_send(std::vector<char> &out, Reg &ro, std::vector<char> &in, Reg &ri, srd_req **rr, srd_req **sr) {
    Reg *regs[] = {&ri};
    *rr = irecv(1, &in, regs, nullptr);
    deliver_and_complete_sends();
    *sr = isend(out, ro, out.size(), 0);
  }
  Write one_landed_message(std::vector<char> &out, Reg &ro, std::vector<char> &in, Reg &ri, srd_req **rr,
                           srd_req **sr) {
    cleared_send(out, ro, in, ri, rr, sr);
    EXPECT_EQ(1u, g.writes.size());
    Write w = g.writes.front();
    deliver_write(0);
    complete_write(0);
    EXPECT_TRUE((*rr)->done);
    return w;
  }
  size_t writes_to(fi_addr_t dest) {
    size_t n = 0;
    for (const Write &w : g.writes) n += w.dest == dest;
    return n;
  }
  size_t sends_to(fi_addr_t dest) {
    size_t n = 0;
    for (const Sent &m : g.sends) n += m.dest == dest;
    return n;
  }
  srd_req *irecv(int n, std::vector<char> *bufs, Reg **regs, const int *tags, srd_comm *on = nullptr) {
    void *data[SRD_MAX_RECVS];
    size_t sizes[SRD_MAX_RECVS];
    srd_mr_ref *mrs[SRD_MAX_RECVS];
    for (int i = 0; i < n; i++) {
      data[i] = bufs[i].data();
      sizes[i] = bufs[i].size();
      mrs[i] = &regs[i]->ref;
    }
    srd_req *req = nullptr;
    EXPECT_EQ(0, srd_proto_irecv(on ? on : r, n, data, sizes, tags, mrs, &req));
    return req;
  }
};

std::vector<char> pattern(size_t n, int seed) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; i++) v[i] = static_cast<char>(i * 7 + static_cast<size_t>(seed) * 13 + 1);
  return v;
}

TEST_F(Proto, ClearToSendBeforeSend) {
  std::vector<char> out = pattern(16384, 1), in(16384);
  Reg ro(out), ri(in);
  Reg *regs[] = {&ri};
  int tag = 5;
  srd_req *rr = irecv(1, &in, regs, &tag);
  ASSERT_TRUE(rr);
  ASSERT_EQ(1u, g.sends.size()) << "the receive posts its clear-to-send";
  deliver_and_complete_sends();
  srd_req *sr = isend(out, ro, out.size(), 5);
  ASSERT_TRUE(sr);
  ASSERT_EQ(4u, g.writes.size()) << "16 KiB in writes of at most 4 KiB";
  for (size_t i = 0; i < 4; i++) deliver_write(i);
  EXPECT_TRUE(rr->done);
  EXPECT_EQ(0, rr->result);
  EXPECT_EQ(16384u, rr->e[0].got);
  EXPECT_EQ(out, in);
  EXPECT_FALSE(sr->done) << "a send is done when its writes complete";
  while (!g.writes.empty()) complete_write(0);
  EXPECT_TRUE(sr->done);
  srd_req_release(sr);
  srd_req_release(rr);
}

TEST_F(Proto, SendBeforeClearToSendWaits) {
  std::vector<char> out = pattern(8192, 2), in(8192);
  Reg ro(out), ri(in);
  EXPECT_EQ(nullptr, isend(out, ro, out.size(), 0, SRD_AGAIN)) << "no clear-to-send yet: try later";
  EXPECT_TRUE(g.writes.empty());
  EXPECT_EQ(0u, s->next_seq) << "a refused send takes no sequence";
  Reg *regs[] = {&ri};
  srd_req *rr = irecv(1, &in, regs, nullptr);
  deliver_and_complete_sends();
  srd_req *sr = isend(out, ro, out.size(), 0);
  ASSERT_TRUE(sr);
  while (!g.writes.empty()) {
    deliver_write(0);
    complete_write(0);
  }
  EXPECT_TRUE(rr->done && sr->done);
  EXPECT_EQ(out, in);
  srd_req_release(sr);
  srd_req_release(rr);
}

TEST_F(Proto, EagerBeforeClearToSend) {
  std::vector<char> out = pattern(100, 3), in(4096);
  Reg ro(out), ri(in);
  srd_req *sr = isend(out, ro, out.size(), 9);
  ASSERT_TRUE(sr) << "small messages go at once";
  ASSERT_EQ(1u, g.sends.size());
  deliver_send(0); // arrives before any receive: kept
  complete_send(0);
  EXPECT_TRUE(sr->done);
  Reg *regs[] = {&ri};
  int tag = 9;
  srd_req *rr = irecv(1, &in, regs, &tag);
  ASSERT_TRUE(rr);
  EXPECT_TRUE(rr->done) << "the kept eager data completes the receive";
  EXPECT_EQ(100u, rr->e[0].got);
  EXPECT_EQ(0, memcmp(out.data(), in.data(), 100));
  EXPECT_TRUE(g.sends.empty()) << "no clear-to-send for a receive that is already complete";
  srd_req_release(sr);
  srd_req_release(rr);
}

TEST_F(Proto, EagerSentBeforeTheClearToSendUsesItsEntry) {
  // Receive of two with one tag; the sender sends the first eagerly before
  // the clear-to-send arrives, then the second large: it must take entry 1,
  // which the eager message left, not entry 0.
  std::vector<char> bufs[2] = {std::vector<char>(4096), std::vector<char>(8192)};
  Reg r0(bufs[0]), r1(bufs[1]);
  Reg *regs[] = {&r0, &r1};
  int tags[] = {7, 7};
  srd_req *rr = irecv(2, bufs, regs, tags);
  std::vector<char> small = pattern(64, 4), big = pattern(8192, 5);
  Reg rs(small), rb(big);
  srd_req *s1 = isend(small, rs, small.size(), 7);
  ASSERT_TRUE(s1);
  // Now the receiver's clear-to-send (first) and the eager data reach their peers.
  deliver_send(0);
  deliver_send(1);
  complete_send(1);
  complete_send(0);
  srd_req *s2 = isend(big, rb, big.size(), 7);
  ASSERT_TRUE(s2);
  while (!g.writes.empty()) {
    deliver_write(0);
    complete_write(0);
  }
  EXPECT_TRUE(rr->done);
  EXPECT_EQ(0, rr->result);
  EXPECT_EQ(0, memcmp(small.data(), bufs[0].data(), 64));
  EXPECT_EQ(big, bufs[1]);
  srd_req_release(s1);
  srd_req_release(s2);
  srd_req_release(rr);
}

TEST_F(Proto, GroupedReceiveMatchesByTag) {
  std::vector<char> bufs[3] = {std::vector<char>(8192), std::vector<char>(8192), std::vector<char>(8192)};
  Reg r0(bufs[0]), r1(bufs[1]), r2(bufs[2]);
  Reg *regs[] = {&r0, &r1, &r2};
  int tags[] = {10, 20, 30};
  srd_req *rr = irecv(3, bufs, regs, tags);
  deliver_and_complete_sends();
  std::vector<char> msgs[3] = {pattern(8192, 30), pattern(5000, 10), pattern(7000, 20)};
  const int order[] = {30, 10, 20};
  srd_req *sr[3];
  for (int i = 0; i < 3; i++) {
    Reg reg(msgs[i]);
    sr[i] = isend(msgs[i], reg, msgs[i].size(), order[i]);
    ASSERT_TRUE(sr[i]);
  }
  // Deliver the writes last to first.
  for (size_t i = g.writes.size(); i-- > 0;) deliver_write(i);
  EXPECT_TRUE(rr->done);
  EXPECT_EQ(0, rr->result);
  EXPECT_EQ(5000u, rr->e[0].got);
  EXPECT_EQ(7000u, rr->e[1].got);
  EXPECT_EQ(8192u, rr->e[2].got);
  EXPECT_EQ(0, memcmp(msgs[1].data(), bufs[0].data(), 5000));
  EXPECT_EQ(0, memcmp(msgs[2].data(), bufs[1].data(), 7000));
  EXPECT_EQ(msgs[0], bufs[2]);
  while (!g.writes.empty()) complete_write(g.writes.size() - 1);
  for (srd_req *q : sr) {
    EXPECT_TRUE(q->done);
    srd_req_release(q);
  }
  srd_req_release(rr);
}

TEST_F(Proto, TruncationFailsBothSides) {
  std::vector<char> out = pattern(16384, 6), in(8192);
  Reg ro(out), ri(in);
  Reg *regs[] = {&ri};
  srd_req *rr = irecv(1, &in, regs, nullptr);
  deliver_and_complete_sends();
  srd_req *sr = isend(out, ro, out.size(), 0);
  ASSERT_TRUE(sr);
  EXPECT_TRUE(sr->done);
  EXPECT_EQ(SRD_ERR_USAGE, sr->result);
  EXPECT_TRUE(g.writes.empty()) << "nothing is written past the peer's buffer";
  deliver_and_complete_sends(); // the truncation notice
  EXPECT_TRUE(rr->done);
  EXPECT_EQ(SRD_ERR_USAGE, rr->result);
  srd_req_release(sr);
  srd_req_release(rr);
}

TEST_F(Proto, EagerLargerThanTheBufferFailsTheReceive) {
  std::vector<char> out = pattern(512, 7), in(100);
  Reg ro(out), ri(in);
  Reg *regs[] = {&ri};
  srd_req *rr = irecv(1, &in, regs, nullptr);
  srd_req *sr = isend(out, ro, out.size(), 0);
  ASSERT_TRUE(sr);
  deliver_and_complete_sends();
  EXPECT_TRUE(rr->done);
  EXPECT_EQ(SRD_ERR_USAGE, rr->result);
  EXPECT_EQ(std::vector<char>(100), in) << "nothing copied past the buffer";
  srd_req_release(sr);
  srd_req_release(rr);
}

TEST_F(Proto, DuplicateWriteIsRefused) {
  std::vector<char> out = pattern(4096, 8), in(4096);
  Reg ro(out), ri(in);
  Reg *regs[] = {&ri};
  srd_req *rr = irecv(1, &in, regs, nullptr);
  deliver_and_complete_sends();
  srd_req *sr = isend(out, ro, out.size(), 0);
  ASSERT_EQ(1u, g.writes.size());
  deliver_write(0);
  EXPECT_TRUE(rr->done);
  EXPECT_EQ(0, r->result);
  deliver_write(0);
  EXPECT_NE(0, r->result) << "a second completion of one write fails the comm, never counts twice";
  complete_write(0);
  srd_req_release(sr);
  srd_req_release(rr);
}

TEST_F(Proto, LateWriteCannotCompleteTheSlotsNextReceive) {
  std::vector<char> out = pattern(4096, 9), in(4096), in2(4096);
  Reg ro(out), ri(in), ri2(in2);
  srd_req *rr = nullptr, *sr = nullptr;
  Write late = one_landed_message(out, ro, in, ri, &rr, &sr);
  ASSERT_TRUE(rr && rr->done);
  int slot = rr->slot;
  srd_req_release(rr);
  Reg *regs2[] = {&ri2};
  srd_req *rr2 = irecv(1, &in2, regs2, nullptr);
  ASSERT_EQ(slot, rr2->slot) << "the freed slot is reused";
  // The old write's completion shows up again (a duplicate from the provider).
  srd_dispatch_handlers.on_remote_write(&b, &b.rails[0], late.imm, late.len, kFromA);
  EXPECT_FALSE(rr2->done) << "an old write completed the slot's next receive";
  EXPECT_NE(0, r->result);
  srd_req_release(sr);
  srd_req_release(rr2);
}

// Rail failover re-sends the stripes a dead rail carried with the same
// immediate data, which names the stripe; the original may land too. Each
// stripe counts once: the receive completes only when every stripe landed.
// (The fake rails report 4 bytes of CQ data, as efa does: the stripe index
// must travel in the immediate itself.)
TEST_F(Proto, ResentStripeCountsOnce) {
  std::vector<char> out = pattern(16384, 21), in(16384);
  Reg ro(out), ri(in);
  Reg *regs[] = {&ri};
  srd_req *rr = irecv(1, &in, regs, nullptr);
  deliver_and_complete_sends();
  srd_req *sr = isend(out, ro, out.size(), 0);
  ASSERT_EQ(4u, g.writes.size());
  for (size_t i = 0; i < 4; i++) EXPECT_EQ(static_cast<int>(i), g.writes[i].stripe);
  deliver_write(0);
  deliver_write(0); // the re-sent copy of stripe 0
  deliver_write(1);
  deliver_write(2);
  EXPECT_FALSE(rr->done) << "a second copy of a stripe stood in for a missing one";
  EXPECT_EQ(0, r->result) << "a second copy of a stripe is harmless";
  deliver_write(1); // late original after its copy
  deliver_write(3);
  ASSERT_TRUE(rr->done);
  EXPECT_EQ(0, rr->result);
  EXPECT_EQ(16384u, rr->e[0].got) << "bytes counted once per stripe";
  EXPECT_EQ(0, memcmp(out.data(), in.data(), in.size()));
  EXPECT_EQ(0, r->result);
  while (!g.writes.empty()) complete_write(0);
  EXPECT_TRUE(sr->done);
  srd_req_release(sr);
  srd_req_release(rr);
}

// Failover needs only more than one NIC: rails whose CQ data has 4 bytes
// (efa) keep it, since the immediate names the stripe.
TEST(Failover, OnForTwoNicsWithFourBytesOfCqData) {
  srd_dev d;
  memset(static_cast<void *>(&d), 0, sizeof(d));
  srd_rail rails[2] = {};
  d.rails = rails;
  d.nrails = d.nnics = 2;
  for (auto &rail : rails) rail.len_in_data = 0;
  srd_dev_failover_init(&d);
  EXPECT_TRUE(d.failover) << "failover turned off on 4-byte CQ data";
  EXPECT_TRUE(rails[0].delivery_complete && rails[1].delivery_complete);
  d.nnics = 1;
  srd_dev_failover_init(&d);
  EXPECT_FALSE(d.failover) << "one NIC has no rail to take over";
}

// A second copy of a stripe is dropped before its length is checked against
// what is left of the buffer: with only a shorter stripe missing, a copy of a
// longer one failed the comm as an overflow (failover-lanes cut-all, 1 of 20
// runs: "writes for slot 0 entry 0 add up to more than its 67108864 bytes").
TEST_F(Proto, ResentCopyLongerThanWhatIsMissingIsNoOverflow) {
  std::vector<char> out = pattern(14000, 22), in(14000);
  Reg ro(out), ri(in);
  Reg *regs[] = {&ri};
  srd_req *rr = irecv(1, &in, regs, nullptr);
  deliver_and_complete_sends();
  srd_req *sr = isend(out, ro, out.size(), 0);
  ASSERT_GE(g.writes.size(), 2u);
  size_t shortest = 0, longest = 0;
  for (size_t i = 0; i < g.writes.size(); i++) {
    if (g.writes[i].len < g.writes[shortest].len) shortest = i;
    if (g.writes[i].len > g.writes[longest].len) longest = i;
  }
  ASSERT_GT(g.writes[longest].len, g.writes[shortest].len) << "the case needs stripes of two lengths";
  Write copy = g.writes[longest], missing = g.writes[shortest];
  for (size_t i = 0; i < g.writes.size(); i++)
    if (i != shortest) deliver_write(i);
  srd_dispatch_handlers.on_remote_write(&b, &b.rails[0], copy.imm, copy.len, kFromA);
  EXPECT_EQ(0, r->result) << "a second copy counted against the bytes left";
  EXPECT_FALSE(rr->done);
  memcpy(reinterpret_cast<void *>(missing.raddr), missing.src, missing.len);
  srd_dispatch_handlers.on_remote_write(&b, &b.rails[0], missing.imm, missing.len, kFromA);
  ASSERT_TRUE(rr->done);
  EXPECT_EQ(0, rr->result);
  EXPECT_EQ(14000u, rr->e[0].got);
  EXPECT_EQ(out, in);
  while (!g.writes.empty()) complete_write(0);
  EXPECT_TRUE(sr->done);
  srd_req_release(sr);
  srd_req_release(rr);
}

// After a rail failed, a write for a receive that already completed is an
// original that sat on the dead link: dropped, the comm lives on. Without a
// failover the same write still fails the comm (LateWriteCannotComplete...).
TEST_F(Proto, LateOriginalAfterFailoverIsDropped) {
  std::vector<char> out = pattern(4096, 23), in(4096);
  Reg ro(out), ri(in);
  srd_req *rr = nullptr, *sr = nullptr;
  Write late = one_landed_message(out, ro, in, ri, &rr, &sr);
  ASSERT_TRUE(rr && rr->done);
  r->failover_seen = true;
  srd_dispatch_handlers.on_remote_write(&b, &b.rails[0], late.imm, late.len, kFromA);
  EXPECT_EQ(0, r->result);
  EXPECT_EQ(1u, r->traffic.dropped);
  srd_req_release(sr);
  srd_req_release(rr);
}

// With failover on, the copy of a stripe may land before the notice of the
// rail failure that made it (the notice travels on another rail): a late
// original naming a receive that was offered and completed (this use of the
// slot, or the one before) is dropped even before the comm saw a failover.
// A write naming a slot use never offered still fails the comm.
TEST_F(Proto, LateWriteBeforeTheFailoverNoticeIsDroppedWhereFailoverIsOn) {
  b.failover = true;
  std::vector<char> out = pattern(4096, 24), in(4096), in2(4096);
  Reg ro(out), ri(in), ri2(in2);
  srd_req *rr = nullptr, *sr = nullptr;
  Write late = one_landed_message(out, ro, in, ri, &rr, &sr);
  ASSERT_TRUE(rr && rr->done);
  ASSERT_FALSE(r->failover_seen);
  srd_dispatch_handlers.on_remote_write(&b, &b.rails[0], late.imm, late.len, kFromA);
  EXPECT_EQ(0, r->result) << "a late copy for this use of the slot";
  srd_req_release(rr);
  Reg *regs2[] = {&ri2};
  srd_req *rr2 = irecv(1, &in2, regs2, nullptr);
  srd_dispatch_handlers.on_remote_write(&b, &b.rails[0], late.imm, late.len, kFromA);
  EXPECT_EQ(0, r->result) << "a late copy for the slot's use before";
  EXPECT_FALSE(rr2->done);
  EXPECT_EQ(2u, r->traffic.dropped);
  srd_imm never = srd_imm_unpack(late.imm);
  never.slot = (never.slot + (3u << SRD_SLOT_BITS)) & SRD_IMM_SLOT_MASK;
  srd_dispatch_handlers.on_remote_write(&b, &b.rails[0], srd_imm_pack(never), late.len, kFromA);
  EXPECT_NE(0, r->result) << "a write for a slot use never offered was taken for a late copy";
  srd_req_release(sr);
  srd_req_release(rr2);
}

// A probe is answered from the rail it came by to the address it came from,
// echoing its round; the prober counts an answer once, and only for the
// round it is in.
TEST_F(Proto, ProbeIsAnsweredWhereItCameFromAndCountsOnceInItsRound) {
  srd_rail_health *h = &a.health[0];
  h->probing = true;
  h->round = 5;
  h->answers_due = 1;
  h->probes_out = 1;
  s->probe_wait = 1;
  ASSERT_EQ(SRD_OK, srd_comm_probe_rail(s, 0, 5));
  ASSERT_EQ(1u, g.sends.size());
  ASSERT_EQ(SRD_MSG_PROBE, sent_type(0));
  // It comes from an address of the peer's other than the one r sends to.
  constexpr fi_addr_t kOther = 7;
  r->inserted[0] = kOther;
  srd_dispatch_handlers.on_message(&b, &b.rails[0], g.sends[0].buf->data, g.sends[0].len, kOther);
  r->inserted[0] = kFromA;
  complete_send(0);
  EXPECT_EQ(0, h->probes_out) << "the probe left, and is not counted out";
  ASSERT_EQ(1u, g.sends.size()) << "no answer";
  srd_msg m;
  const char *why = nullptr;
  ASSERT_EQ(0, srd_msg_decode(g.sends[0].buf->data, g.sends[0].len, &m, &why));
  EXPECT_EQ(SRD_MSG_PROBE, m.type);
  EXPECT_EQ(1, m.u.probe.answer);
  EXPECT_EQ(5u, m.u.probe.round);
  EXPECT_EQ(0, m.u.probe.rail);
  EXPECT_EQ(&b.rails[0], g.sends[0].rail);
  EXPECT_EQ(kOther, g.sends[0].dest) << "answered to another address than the probe came from";
  g.sends[0].dest = kFromA; // where the fake delivers to a
  h->round = 6; // an answer to an earlier round
  deliver_send(0);
  EXPECT_EQ(1, h->answers_due);
  h->round = 5;
  deliver_send(0);
  EXPECT_EQ(0, h->answers_due);
  EXPECT_EQ(0u, s->probe_wait);
  deliver_send(0);
  EXPECT_EQ(0, h->answers_due) << "one answer counted twice";
  complete_send(0);
  // A probe the provider refuses fails its round (the caller counts it), not the comm.
  g.send_refused = -FI_EIO;
  EXPECT_EQ(SRD_ERR_SYSTEM, srd_comm_probe_rail(s, 0, 6));
  EXPECT_EQ(0, s->result) << "a refused probe failed the comm";
  EXPECT_EQ(0, g.bufs_out);
  g.send_refused = 0;
}

// Devices of two NICs: rail failover.
class TwoRails : public Proto {
 protected:
  int rails() const override { return 2; }
  // Failover on, a 16 KiB message striped over both rails: the receive
  // (returned in *rr, its clear-to-send delivered) and the send, its writes
  // posted and not yet completed.
  srd_req *isend_striped(std::vector<char> &out, Reg &ro, std::vector<char> &in, Reg &ri, srd_req **rr) {
    a.failover = b.failover = true;
    a.sched.npaths = 2;
    a.sched.threshold = 4096; // striped over both rails
    Reg *regs[] = {&ri};
    *rr = irecv(1, &in, regs, nullptr);
    deliver_and_complete_sends();
    return isend(out, ro, out.size(), 0);
  }
  // A message striped over two rails; the receiver's rail 1 goes down while
  // the completions of writes that landed on it wait unread in its CQ, and
  // the sender was told of every write (delivery-complete): it counts them
  // landed and never writes them again. Returns the receive.
  srd_req *landed_unread_then_down(std::vector<char> &out, Reg &ro, std::vector<char> &in, Reg &ri, srd_req **sr) {
    srd_req *rr = nullptr;
    *sr = isend_striped(out, ro, in, ri, &rr);
    EXPECT_EQ(4u, g.writes.size());
    for (size_t i = 0; i < g.writes.size(); i++)
      if (g.writes[i].rail == &a.rails[1]) place_write_unread(i);
      else deliver_write(i);
    EXPECT_FALSE(g.unread.empty()) << "the case needs a stripe on rail 1";
    while (!g.writes.empty()) complete_write(0);
    EXPECT_TRUE((*sr)->done);
    EXPECT_FALSE(rr->done);
    return rr;
  }
};

// NCCL registers a buffer once for both directions (regIsGlobal): the send
// comm's registration, and the receive class (remotely writable) made the
// first time a receive uses the handle. Deregistering the handle closes both
// on every rail at once: nothing stays pinned or writable by the peer.
TEST_F(TwoRails, DeregisteringABufferOfBothDirectionsClosesEveryRegistration) {
  for (int l = 0; l < b.nrails; l++) b.rails[l].mr_local = true; // send buffers are registered too (efa)
  srd_mr_ops ops = {srd_dev_reg, srd_dev_dereg, &b};
  srd_mr_cache_init(&b.mrs, &ops, 1);
  std::vector<char> buf(8192);
  srd_mr_ref *ref = nullptr;
  ASSERT_EQ(0, srd_mr_acquire(&b.mrs, buf.data(), buf.size(), 1 /* NCCL_PTR_HOST */, -1, SRD_MR_SEND, 0, -1, 0, &ref));
  EXPECT_EQ(b.nrails, g.mrs_open);
  EXPECT_EQ(0, g.writable_open);
  srd_mr *recv_entry = nullptr;
  ASSERT_EQ(0, srd_mr_entry_for(&b.mrs, ref, SRD_MR_RECV, 7 /* a receive comm */, &recv_entry));
  EXPECT_EQ(2 * b.nrails, g.mrs_open);
  EXPECT_EQ(b.nrails, g.writable_open);
  ASSERT_EQ(0, srd_mr_release(&b.mrs, ref));
  EXPECT_EQ(0, g.writable_open) << "the buffer is still remotely writable after it was deregistered";
  EXPECT_EQ(0, g.mrs_open) << "registrations of the deregistered buffer left open (pinned)";
  srd_mr_cache_fini(&b.mrs);
}

// A GPU buffer any rail may have written into: iflush reads it back on every
// rail (each read flushes only its own rail's writes), and the request is done
// only when every read is.
TEST_F(TwoRails, FlushReadsOnEveryRail) {
  b.gdr.flush = true;
  std::vector<char> in(4096);
  Reg ri(in);
  ri.mr.device = 0;
  srd_req *fr = iflush(in, ri, 4096);
  ASSERT_TRUE(fr);
  ASSERT_EQ(size_t(b.nrails), g.reads.size()) << "one read per rail";
  EXPECT_EQ(&b.rails[0], g.reads[0].rail);
  EXPECT_EQ(&b.rails[1], g.reads[1].rail);
  complete_read(0);
  EXPECT_FALSE(fr->done) << "done before rail 1's read";
  complete_read(0);
  EXPECT_TRUE(fr->done);
  EXPECT_EQ(0, fr->result);
  srd_req_release(fr);
}

// A rail whose link came back is probed in rounds. An answer that is lost
// (with the connection it crossed, or sent before the peer polled the rail)
// must not stall the rail: the round ends at its time-out, another hold-down
// follows, and the next round's answer brings the rail back.
TEST_F(TwoRails, ProbeRoundWhoseAnswerIsLostEndsAndTheRailRejoins) {
  a.failover = b.failover = true;
  a.holddown_ms = 100;
  srd_rail_health *h = &a.health[1];
  srd_dev_rail_down(&a, 1, "link down (test)");
  ASSERT_TRUE(h->down);
  deliver_and_complete_sends(); // the peer is told
  uint64_t t = srd_now_ms();
  srd_dev_check_rails(&a, t); // the link is up: hold-down
  EXPECT_FALSE(h->probing);
  srd_dev_check_rails(&a, t += a.holddown_ms);
  ASSERT_TRUE(h->probing) << "no round after the hold-down";
  ASSERT_EQ(1u, g.sends.size());
  ASSERT_EQ(SRD_MSG_PROBE, sent_type(0));
  EXPECT_EQ(&a.rails[1], g.sends[0].rail);
  deliver_send(0);
  complete_send(0);
  ASSERT_EQ(1u, g.sends.size()) << "the peer did not answer";
  ASSERT_EQ(SRD_MSG_PROBE, sent_type(0));
  complete_send(0); // the answer left the peer and never arrives
  srd_dev_check_rails(&a, t + SRD_PROBE_ROUND_MS / 2);
  EXPECT_TRUE(h->probing && h->down) << "the round ended before its time-out, or the rail rejoined unanswered";
  srd_dev_check_rails(&a, t += SRD_PROBE_ROUND_MS + 1);
  EXPECT_FALSE(h->probing) << "a round whose answer was lost never ends";
  EXPECT_TRUE(h->down);
  EXPECT_TRUE(g.sends.empty()) << "probed again without a hold-down";
  srd_dev_check_rails(&a, t += a.holddown_ms);
  ASSERT_TRUE(h->probing) << "the rail is not probed again";
  ASSERT_EQ(1u, g.sends.size());
  deliver_send(0);
  complete_send(0);
  ASSERT_EQ(1u, g.sends.size());
  deliver_send(0); // this answer arrives
  complete_send(0);
  srd_dev_check_rails(&a, t + 1);
  EXPECT_FALSE(h->down) << "the rail did not rejoin on an answered round";
  EXPECT_EQ(0u, s->rails_bad);
}

// A rail failed under a message whose writes on it all landed, but whose
// acknowledgements were cut off: the receive completed and its buffer may be
// reused. The sender must not write those stripes again before the receiver
// said which receives are open (DESIGN.md, "Re-sends wait for the
// receiver"); told that this one completed, it writes nothing and its send
// completes.
TEST_F(TwoRails, StripeThatLandedUnacknowledgedIsNotWrittenAgainIntoACompletedReceive) {
  a.failover = b.failover = true;
  a.sched.npaths = 2;
  a.sched.threshold = 4096; // striped over both rails
  std::vector<char> out = pattern(16384, 41), in(16384), next = pattern(16384, 42);
  Reg ro(out), ri(in);
  Reg *regs[] = {&ri};
  srd_req *rr = irecv(1, &in, regs, nullptr);
  deliver_and_complete_sends();
  srd_req *sr = isend(out, ro, out.size(), 0);
  ASSERT_EQ(4u, g.writes.size());
  size_t on_rail1 = 0;
  for (size_t i = 0; i < g.writes.size(); i++) {
    deliver_write(i);
    on_rail1 += g.writes[i].rail == &a.rails[1];
  }
  ASSERT_GT(on_rail1, 0u) << "the case needs a stripe on rail 1";
  for (size_t i = 0; i < g.writes.size();)
    if (g.writes[i].rail == &a.rails[0]) complete_write(i);
    else i++;
  ASSERT_TRUE(rr->done);
  EXPECT_EQ(0, memcmp(out.data(), in.data(), in.size()));
  srd_req_release(rr);
  memcpy(in.data(), next.data(), next.size()); // NCCL reuses the buffer
  srd_dev_rail_down(&a, 1, "link down (test)");
  EXPECT_EQ(on_rail1, g.writes.size()) << "stripes written again before the receiver answered";
  deliver_and_complete_sends();
  EXPECT_EQ(on_rail1, g.writes.size()) << "stripes written again into a receive that completed";
  EXPECT_EQ(0, memcmp(next.data(), in.data(), in.size()));
  EXPECT_TRUE(sr->done) << "the send did not complete once the receive was known complete";
  EXPECT_EQ(0, sr->result);
  EXPECT_EQ(0, s->result);
  EXPECT_EQ(0, r->result);
  srd_req_release(sr);
}

// Then the rail is reaped once more: the receive completes.
TEST_F(TwoRails, WritesLandedOnARailThatWentDownAreReadOnce) {
  std::vector<char> out = pattern(16384, 43), in(16384);
  Reg ro(out), ri(in);
  srd_req *sr = nullptr, *rr = landed_unread_then_down(out, ro, in, ri, &sr);
  g.links_down.insert(&b.rails[1]);
  srd_dev_rail_down(&b, 1, "link down (test)");
  srd_dev_progress(&b);
  EXPECT_TRUE(g.unread.empty()) << "completions left unread on the rail that went down";
  ASSERT_TRUE(rr->done) << "writes the sender counts landed were never counted here: the receive waits forever";
  EXPECT_EQ(0, rr->result);
  EXPECT_EQ(0, memcmp(out.data(), in.data(), in.size()));
  srd_dev_progress(&b);
  srd_req_release(rr);
  srd_req_release(sr);
}

// A lane's thread leaves the batches it reaped in its ring, and never waits
// for the device lock to hand them over: the caller's progress dispatches
// them, oldest first, and what they complete counts as completed on a lane.
// Here the receiver's rail 1 is a lane's, and each write that landed there
// waits in a batch of its own.
TEST_F(TwoRails, WhatALaneReapedIsDispatchedByTheCallersProgress) {
  std::vector<char> out = pattern(16384, 45), in(16384);
  Reg ro(out), ri(in);
  srd_req *sr = nullptr, *rr = landed_unread_then_down(out, ro, in, ri, &sr);
  std::vector<srd_lane> lanes(2);
  srd_lane *lane = &lanes[1];
  lane->dev = &b;
  lane->rail = &b.rails[1];
  lane->ring_cap = SRD_LANE_RING;
  b.rails[1].h = b.handlers;
  unsigned reaped = 0;
  for (const auto &u : g.unread) {
    ASSERT_LT(reaped, static_cast<unsigned>(SRD_LANE_RING));
    srd_rail_batch &batch = lane->ring[reaped++];
    batch.n = 1;
    batch.has_err = false;
    batch.e[0] = {nullptr, FI_RMA | FI_REMOTE_CQ_DATA, u.second.len, nullptr, u.second.imm};
    batch.src[0] = source_for(u.second.dest);
  }
  g.unread.clear();
  atomic_store(&lane->reaped, reaped);
  b.lanes = lanes.data();
  b.threaded = true;
  b.nnics = 1;
  EXPECT_FALSE(rr->done);
  srd_dev_progress(&b);
  b.lanes = nullptr;
  b.threaded = false;
  b.nnics = b.nrails;
  EXPECT_EQ(reaped, atomic_load(&lane->delivered)) << "batches a lane reaped were left in its ring";
  ASSERT_TRUE(rr->done) << "the writes a lane reaped never reached the receive";
  EXPECT_EQ(0, rr->result);
  EXPECT_EQ(0, memcmp(out.data(), in.data(), in.size()));
  EXPECT_EQ(1, r->traffic.by_lane) << "a receive completed by a lane's completions was not counted as such";
  EXPECT_FALSE(b.from_lane);
  srd_req_release(rr);
  srd_req_release(sr);
}

// Not while the rail's link is up (down on the peer's word): a reap there
// could land the rest of a write cut off in its middle, into a buffer that
// may be reused.
TEST_F(TwoRails, RailThatWentDownWithItsLinkUpIsNotReadAgain) {
  std::vector<char> out = pattern(16384, 44), in(16384);
  Reg ro(out), ri(in);
  srd_req *sr = nullptr, *rr = landed_unread_then_down(out, ro, in, ri, &sr);
  srd_dev_rail_down(&b, 1, "the peer's writes into it were cut off (test)");
  srd_dev_progress(&b);
  EXPECT_FALSE(g.unread.empty()) << "a rail that went down with its link up was polled";
  EXPECT_FALSE(rr->done);
  g.unread.clear();
  srd_req_release(sr);
}

// The same failure while the receive is open: the receiver holds it, the
// sender writes the stripes the dead rail carried again on the other rail,
// and the receive completes only once the sender said that no copy is in
// flight any more (SETTLED), not when the last stripe is counted.
TEST_F(TwoRails, OpenReceiveIsHeldUntilTheSenderSettles) {
  std::vector<char> out = pattern(16384, 43), in(16384);
  Reg ro(out), ri(in);
  srd_req *rr = nullptr;
  srd_req *sr = isend_striped(out, ro, in, ri, &rr);
  ASSERT_EQ(4u, g.writes.size());
  size_t on_rail1 = 0;
  for (size_t i = 0; i < g.writes.size();)
    if (g.writes[i].rail == &a.rails[0]) {
      deliver_write(i);
      complete_write(i);
    } else {
      i++;
      on_rail1++;
    }
  ASSERT_GT(on_rail1, 0u);
  ASSERT_FALSE(rr->done);
  srd_dev_rail_down(&a, 1, "link down (test)");
  EXPECT_EQ(on_rail1, g.writes.size()) << "stripes written again before the receiver answered";
  deliver_and_complete_sends(); // the stale notice; the receiver's answer
  ASSERT_EQ(2 * on_rail1, g.writes.size()) << "the open receive's missing stripes were not written again";
  for (size_t i = on_rail1; i < g.writes.size(); i++) EXPECT_EQ(&a.rails[0], g.writes[i].rail);
  while (g.writes.size() > on_rail1) {
    deliver_write(on_rail1);
    EXPECT_FALSE(rr->done) << "completed while a copy of its stripes was in flight";
    complete_write(on_rail1);
  }
  EXPECT_EQ(0, memcmp(out.data(), in.data(), in.size()));
  EXPECT_FALSE(rr->done) << "completed before the sender said SETTLED";
  deliver_and_complete_sends(); // SETTLED
  EXPECT_TRUE(rr->done) << "a settled receive never completes";
  EXPECT_EQ(0, rr->result);
  EXPECT_TRUE(sr->done);
  EXPECT_EQ(0, s->result);
  EXPECT_EQ(0, r->result);
  srd_req_release(sr);
  srd_req_release(rr);
}

// A write that completes with an error on one rail (tcp's answer to a
// delivery-complete write its target refused: tests/rail/rail_write_test)
// fails that rail for the comm only: its stripes go again on the other rail
// and the message arrives whole; the comm does not fail.
TEST_F(TwoRails, FailedWriteOnOneRailGoesAgainOnTheOther) {
  std::vector<char> out = pattern(16384, 47), in(16384);
  Reg ro(out), ri(in);
  srd_req *rr = nullptr;
  srd_req *sr = isend_striped(out, ro, in, ri, &rr);
  ASSERT_EQ(4u, g.writes.size());
  size_t failed = 0;
  for (size_t i = 0; i < g.writes.size();)
    if (g.writes[i].rail == &a.rails[1]) {
      complete_write(i, -FI_ECANCELED);
      failed++;
    } else {
      deliver_write(i);
      complete_write(i);
    }
  ASSERT_GT(failed, 0u) << "the case needs a stripe on rail 1";
  EXPECT_FALSE(sr->done) << "a send whose stripe failed completed";
  EXPECT_EQ(0, s->result) << "one failed rail failed the comm";
  size_t again = 0;
  for (int round = 0; round < 8 && !(rr->done && sr->done); round++) {
    deliver_and_complete_sends();
    while (!g.writes.empty()) {
      EXPECT_EQ(&a.rails[0], g.writes[0].rail) << "written again on the rail that failed";
      deliver_write(0);
      complete_write(0);
      again++;
    }
  }
  EXPECT_EQ(failed, again) << "the failed stripes were not written again";
  ASSERT_TRUE(rr->done && sr->done) << "the message never completed";
  EXPECT_EQ(0, rr->result);
  EXPECT_EQ(0, sr->result);
  EXPECT_EQ(0, memcmp(out.data(), in.data(), in.size()));
  EXPECT_EQ(0, s->result);
  EXPECT_EQ(0, r->result);
  srd_req_release(sr);
  srd_req_release(rr);
}

// The fence's messages can be lost with a link or refused: a sender whose
// stripes stay unsure asks again, and a receiver holding a receive answers
// again (which brings a lost SETTLED again), each after a while.
TEST_F(TwoRails, LostFenceAnswerAndSettleAreAskedAgain) {
  a.failover = b.failover = true;
  a.sched.npaths = 2;
  a.sched.threshold = 4096;
  auto deliver_all_but = [this](int lose) {
    bool lost = false;
    while (!g.sends.empty()) {
      if (!lost && sent_type(0) == lose) {
        lost = true;
        complete_send(0); // sent, never arrives
        continue;
      }
      deliver_send(0);
      complete_send(0);
    }
    return lost;
  };
  std::vector<char> out = pattern(16384, 44), in(16384);
  Reg ro(out), ri(in);
  Reg *regs[] = {&ri};
  srd_req *rr = irecv(1, &in, regs, nullptr);
  deliver_and_complete_sends();
  srd_req *sr = isend(out, ro, out.size(), 0);
  size_t on_rail1 = 0;
  for (size_t i = 0; i < g.writes.size();)
    if (g.writes[i].rail == &a.rails[0]) {
      deliver_write(i);
      complete_write(i);
    } else {
      i++;
      on_rail1++;
    }
  ASSERT_GT(on_rail1, 0u);
  srd_dev_rail_down(&a, 1, "link down (test)");
  ASSERT_TRUE(deliver_all_but(SRD_MSG_FENCED));
  EXPECT_EQ(on_rail1, g.writes.size()) << "stripes written again without an answer";
  srd_dev_check_rails(&a, srd_now_ms() + 1000);
  deliver_and_complete_sends();
  ASSERT_EQ(2 * on_rail1, g.writes.size()) << "the fence was not asked again after its answer was lost";
  while (g.writes.size() > on_rail1) {
    deliver_write(on_rail1);
    complete_write(on_rail1);
  }
  ASSERT_TRUE(deliver_all_but(SRD_MSG_SETTLED));
  EXPECT_FALSE(rr->done);
  srd_dev_check_rails(&b, srd_now_ms() + 1000);
  deliver_and_complete_sends();
  EXPECT_TRUE(rr->done) << "a receive whose SETTLED was lost stays held";
  EXPECT_EQ(0, memcmp(out.data(), in.data(), in.size()));
  EXPECT_TRUE(sr->done);
  EXPECT_EQ(0, s->result);
  EXPECT_EQ(0, r->result);
  srd_req_release(sr);
  srd_req_release(rr);
}

// A sender that closes owes no SETTLED any more: its close notice counts the
// writes it completed, copies included, and once as many landed the held
// receive completes, with nothing more from the sender (its comm is gone).
TEST_F(TwoRails, HeldReceiveCompletesOnceAClosedSendersWritesLanded) {
  a.failover = b.failover = true;
  a.sched.npaths = 2;
  a.sched.threshold = 4096;
  std::vector<char> out = pattern(16384, 45), in(16384);
  Reg ro(out), ri(in);
  Reg *regs[] = {&ri};
  srd_req *rr = irecv(1, &in, regs, nullptr);
  deliver_and_complete_sends();
  srd_req *sr = isend(out, ro, out.size(), 0);
  size_t on_rail1 = 0;
  for (size_t i = 0; i < g.writes.size();)
    if (g.writes[i].rail == &a.rails[0]) {
      deliver_write(i);
      complete_write(i);
    } else {
      i++;
      on_rail1++;
    }
  ASSERT_GT(on_rail1, 0u);
  srd_dev_rail_down(&a, 1, "link down (test)");
  while (!g.sends.empty() && sent_type(0) != SRD_MSG_FENCED) {
    deliver_send(0);
    complete_send(0);
  }
  ASSERT_FALSE(g.sends.empty());
  deliver_send(0); // the answer; the copies follow
  complete_send(0);
  ASSERT_EQ(2 * on_rail1, g.writes.size());
  while (g.writes.size() > on_rail1) {
    deliver_write(on_rail1);
    complete_write(on_rail1);
  }
  ASSERT_TRUE(sr->done);
  srd_req_release(sr);
  while (!g.sends.empty()) complete_send(0); // SETTLED, lost
  ASSERT_FALSE(rr->done);
  ASSERT_EQ(SRD_OK, srd_proto_send_bye(s, SRD_BYE_DRAINED)); // as the send comm closes after its writes
  deliver_send(0);
  complete_send(0);
  srd_dev_check_rails(&b, srd_now_ms() + 1000);
  EXPECT_TRUE(rr->done) << "a held receive waits for a SETTLED its closed sender can no longer send";
  EXPECT_EQ(0, rr->result);
  EXPECT_EQ(0, memcmp(out.data(), in.data(), in.size()));
  while (!g.sends.empty()) complete_send(0);
  srd_req_release(rr);
}

// One-sided ops over two rails, host windows, rank 0 (device b) to rank 1
// (device a): what a lost rail does to them.
class TwoRailsRma : public TwoRails {
 protected:
  std::vector<char> src = pattern(16384, 5), dst = std::vector<char>(16384);
  std::vector<uint64_t> words = std::vector<uint64_t>(4);
  srd_comm *bs = nullptr;
  srd_rma_coll *coll = nullptr;
  srd_rma_win *swin = nullptr, *dwin = nullptr, *sigwin = nullptr;
  srd_msg_rma_signal sig{};

  void SetUp() override {
    TwoRails::SetUp();
    a.failover = b.failover = true;
    b.sched.npaths = 2;
    b.sched.threshold = 4096; // striped over both rails
    coll = rma_group(&bs);
    ASSERT_TRUE(coll);
    srd_rma_remote mine{};
    ASSERT_EQ(SRD_OK, srd_rma_win_new(coll, src.data(), src.size(), -1, 0, -1, 0, &swin, &mine));
    ASSERT_EQ(SRD_OK, srd_rma_win_new(coll, dst.data(), dst.size(), -1, 0, -1, 0, &dwin, &mine));
    ASSERT_EQ(SRD_OK, srd_rma_win_set_remote(dwin, 1, &mine));
    ASSERT_EQ(SRD_OK, srd_rma_win_new(coll, words.data(), words.size() * 8, -1, SRD_RMA_WIN_NEVER_RESET, -1, 0,
                                      &sigwin, &mine));
    ASSERT_EQ(SRD_OK, srd_rma_win_set_remote(sigwin, 1, &mine));
    sig.window = sigwin->index;
    sig.op = SRD_RMA_SIGNAL_INC;
  }
  void TearDown() override {
    // The provider ends what it holds before the group goes.
    while (!g.writes.empty()) complete_write(0);
    while (!g.sends.empty()) complete_send(0);
    for (srd_rma_win *w : {swin, dwin, sigwin})
      if (w) srd_rma_win_free(w);
    srd_rma_coll_detach(coll);
    srd_rma_coll_free(coll);
    TwoRails::TearDown();
  }
  srd_rma_op *put() {
    Locked held(b);
    srd_rma_op *op = nullptr;
    EXPECT_EQ(SRD_OK, srd_rma_put(coll, 1, swin, 0, dwin, 0, src.size(), &sig, &op));
    return op;
  }
  size_t writes_on(int l) const {
    size_t n = 0;
    for (const auto &w : g.writes) n += w.rail == &b.rails[l];
    return n;
  }
  void complete_writes_on(int l) {
    for (size_t i = 0; i < g.writes.size();)
      if (g.writes[i].rail == &b.rails[l]) complete_write(i);
      else i++;
  }
};

// Writes of a put in flight on a rail that goes down may or may not have
// landed, and a copy could be counted twice or land after its op was
// applied: the group fails at once, naming the rail, instead of waiting for
// completions an unpolled rail never gives.
TEST_F(TwoRailsRma, PutInFlightOnALostRailFailsTheGroupNamingTheRail) {
  srd_rma_op *op = put();
  ASSERT_TRUE(op);
  ASSERT_GT(writes_on(1), 0u) << "the case needs a write on rail 1";
  complete_writes_on(0);
  {
    Locked held(b);
    srd_dev_rail_down(&b, 1, "link down (test)");
    EXPECT_TRUE(srd_rma_op_test(op)) << "the op waits for a rail that is not polled";
  }
  EXPECT_NE(0, op->result);
  EXPECT_NE(0, bs->result);
  EXPECT_NE(nullptr, strstr(bs->error, "rail 1 (fake1.1)")) << bs->error;
  EXPECT_NE(nullptr, strstr(bs->error, "link down (test)")) << bs->error;
  srd_rma_op_release(op);
}

// A rail lost while nothing of the group is in flight on it costs nothing:
// the group goes on, and later ops use the rails left.
TEST_F(TwoRailsRma, RailLostWithNothingInFlightOnItKeepsTheGroup) {
  srd_rma_op *op = put();
  ASSERT_TRUE(op);
  while (!g.writes.empty()) complete_write(0);
  while (!g.sends.empty()) complete_send(0);
  {
    Locked held(b);
    ASSERT_TRUE(srd_rma_op_test(op));
    EXPECT_EQ(SRD_OK, op->result);
    srd_rma_op_release(op);
    srd_dev_rail_down(&b, 1, "link down (test)");
  }
  while (!g.sends.empty()) complete_send(0); // the peer is told
  EXPECT_EQ(0, bs->result) << bs->error;
  op = put();
  ASSERT_TRUE(op);
  EXPECT_GT(writes_on(0), 0u);
  EXPECT_EQ(0u, writes_on(1)) << "a write went to the lost rail";
  while (!g.writes.empty()) complete_write(0);
  Locked held(b);
  ASSERT_TRUE(srd_rma_op_test(op));
  EXPECT_EQ(SRD_OK, op->result);
  srd_rma_op_release(op);
}

// The same for a signal: its message in flight on the lost rail may or may
// not have arrived (the target drops a second copy, but one never sent again
// leaves the target waiting for good): the group fails naming the rail.
TEST_F(TwoRailsRma, SignalInFlightOnALostRailFailsTheGroup) {
  int tries = 0;
  for (;; tries++) { // control messages take the rails in turn
    ASSERT_LT(tries, 4) << "no signal went on rail 1";
    srd_rma_op *op = put();
    ASSERT_TRUE(op);
    while (!g.writes.empty()) complete_write(0);
    ASSERT_EQ(1u, g.sends.size());
    ASSERT_EQ(SRD_MSG_RMA_SIGNAL, sent_type(0));
    Locked held(b);
    ASSERT_TRUE(srd_rma_op_test(op)) << "test waits for the signal's delivery";
    srd_rma_op_release(op);
    if (g.sends[0].rail == &b.rails[1]) break;
    complete_send(0);
  }
  {
    Locked held(b);
    srd_dev_rail_down(&b, 1, "link down (test)");
  }
  EXPECT_NE(0, bs->result);
  EXPECT_NE(nullptr, strstr(bs->error, "rail 1 (fake1.1)")) << bs->error;
  EXPECT_NE(nullptr, strstr(bs->error, "1 signal or control message(s)")) << bs->error;
}

// An op split over both rails and queued (the provider full) before rail 1
// went down: its stripes, not yet posted, go on the rail left.
TEST_F(TwoRailsRma, QueuedOpMovesToTheRailsLeft) {
  g.provider_full = true;
  srd_rma_op *op = put();
  ASSERT_TRUE(op);
  ASSERT_TRUE(g.writes.empty());
  Locked held(b);
  srd_dev_rail_down(&b, 1, "link down (test)");
  g.provider_full = false;
  srd_rma_progress(coll);
  EXPECT_EQ(0, bs->result) << bs->error;
  EXPECT_GT(writes_on(0), 0u) << "the queued op was not posted";
  EXPECT_EQ(0u, writes_on(1)) << "a stripe went to the lost rail";
  while (!g.writes.empty()) complete_write(0);
  while (!g.sends.empty()) complete_send(0);
  ASSERT_TRUE(srd_rma_op_test(op));
  EXPECT_EQ(SRD_OK, op->result);
  srd_rma_op_release(op);
}

// A lane whose provider keeps refusing a queued stripe drops it only once
// the comm it serves failed: a slow peer's one-sided writes stay queued. The
// stripe's owner is an RMA op here, not a message's request.
TEST_F(TwoRailsRma, LaneKeepsAQueuedStripeUntilItsCommFailed) {
  g.lanes = true;
  b.threaded = true;
  b.nnics = 1; // rail 1 is a lane's: its stripes are queued for its thread
  srd_rma_op *op = put();
  ASSERT_TRUE(op);
  ASSERT_FALSE(g.queued.empty()) << "no stripe was queued for the lane";
  Locked held(b);
  for (struct srd_rail_write *w : g.queued) EXPECT_FALSE(srd_queued_write_abandoned(w)) << "a live comm's stripe dropped";
  srd_comm_fail(bs, SRD_ERR_REMOTE, "the peer is gone (test)");
  for (struct srd_rail_write *w : g.queued) EXPECT_TRUE(srd_queued_write_abandoned(w)) << "a failed comm's stripe kept";
  for (struct srd_rail_write *w : g.queued) w->op.done(&w->op, -FI_ECANCELED, "dropped (test)");
  g.queued.clear();
  b.threaded = false;
  b.nnics = b.nrails;
  while (!g.writes.empty()) complete_write(0);
  while (!g.sends.empty()) complete_send(0);
  ASSERT_TRUE(srd_rma_op_test(op));
  EXPECT_NE(SRD_OK, op->result);
  srd_rma_op_release(op);
}

// A get striped over a lane's rail: its stripe there is queued for the lane's
// thread, which alone posts and reaps that rail, as a put's are; posted from
// the caller it contended with the lane's progress for the provider.
TEST_F(TwoRailsRma, GetStripesOnALanesRailGoToItsThread) {
  g.lanes = true;
  b.threaded = true;
  b.nnics = 1; // rail 1 is a lane's
  srd_rma_op *op = nullptr;
  {
    Locked held(b);
    ASSERT_EQ(SRD_OK, srd_rma_get(coll, 1, swin, 0, dwin, 0, src.size(), &op));
  }
  ASSERT_TRUE(op);
  size_t on_lane = 0;
  for (const Read &rd : g.reads) on_lane += rd.rail == &b.rails[1];
  EXPECT_EQ(0u, on_lane) << "the caller read on a lane's rail";
  ASSERT_FALSE(g.queued.empty()) << "no stripe was queued for the lane";
  EXPECT_FALSE(g.reads.empty()) << "the stripes on the caller's rail were not read";
  size_t queued_bytes = 0;
  for (const struct srd_rail_write *w : g.queued) {
    const char *at = static_cast<const char *>(w->dst);
    EXPECT_TRUE(at >= src.data() && at + w->len <= src.data() + src.size()) << "a queued read lands outside the window";
    queued_bytes += w->len;
  }
  EXPECT_LT(queued_bytes, src.size()) << "every stripe went to the lane";
  Locked held(b);
  for (struct srd_rail_write *w : g.queued) w->op.done(&w->op, 0, nullptr);
  g.queued.clear();
  while (!g.reads.empty()) complete_read(0);
  b.threaded = false;
  b.nnics = b.nrails;
  ASSERT_TRUE(srd_rma_op_test(op));
  EXPECT_EQ(SRD_OK, op->result);
  srd_rma_op_release(op);
}

// The registrations of a rail are made again under new keys (rail failover
// after writes were cut off on it) and the old ones closed; the other rails'
// stay. A dma-buf registration, which cannot be made again, changes nothing.
TEST(Regs, RekeyMakesARailsRegistrationsAgainUnderNewKeys) {
  g = Fake();
  srd_dev d;
  make_dev(&d, 0);
  std::vector<char> one(4096), two(8192);
  void *h1 = nullptr, *h2 = nullptr;
  ASSERT_EQ(0, srd_dev_reg(&d, one.data(), one.size(), 0, -1, SRD_MR_RECV, -1, 0, &h1));
  ASSERT_EQ(0, srd_dev_reg(&d, two.data(), two.size(), 0, -1, SRD_MR_RECV, -1, 0, &h2));
  auto *m1 = static_cast<srd_rail_mrs *>(h1), *m2 = static_cast<srd_rail_mrs *>(h2);
  uint64_t k1 = mr_key(m1->mr[0]), k2 = mr_key(m2->mr[0]);
  EXPECT_NE(k1, k2);
  EXPECT_EQ(2, g.mrs_open);
  ASSERT_EQ(SRD_OK, srd_dev_rekey_rail(&d, 0));
  EXPECT_EQ(2, g.mrs_open) << "old registrations left open, or new ones not made";
  EXPECT_NE(k1, mr_key(m1->mr[0]));
  EXPECT_NE(k2, mr_key(m2->mr[0]));
  EXPECT_NE(k1, mr_key(m2->mr[0]));
  g.reg_refused = -FI_ENOMEM;
  EXPECT_EQ(SRD_ERR_SYSTEM, srd_dev_rekey_rail(&d, 0)) << "a registration that failed went unreported";
  g.reg_refused = 0;
  void *h3 = nullptr;
  ASSERT_EQ(0, srd_dev_reg(&d, one.data(), one.size(), 0, -1, SRD_MR_RECV, 7, 0, &h3));
  uint64_t k3 = mr_key(static_cast<srd_rail_mrs *>(h3)->mr[0]), k1now = mr_key(m1->mr[0]);
  EXPECT_EQ(SRD_ERR_SYSTEM, srd_dev_rekey_rail(&d, 0));
  EXPECT_EQ(k3, mr_key(static_cast<srd_rail_mrs *>(h3)->mr[0]));
  EXPECT_EQ(k1now, mr_key(m1->mr[0])) << "a refused re-key changed some keys";
  srd_dev_dereg(&d, h3);
  srd_dev_dereg(&d, h2);
  srd_dev_dereg(&d, h1);
  EXPECT_EQ(0, g.mrs_open) << "registrations leaked";
  EXPECT_EQ(nullptr, d.regs);
  free_dev(&d);
}

// A rail the peer's writes were cut off on: where keys fence writes (efa
// whose device writes) its registrations get new keys at once and receives
// whose clear-to-send named the old ones are marked; elsewhere (tcp) it
// stays out for good and nothing is registered again.
// efa promises neither a key check per packet nor device writes to every
// peer (it emulates writes per peer while FI_OPT_EFA_EMULATED_WRITE reads
// false): a cut efa rail rejoins under new keys only where the device writes
// and the user vouched (NCCL_SRD_FAILOVER_REKEY=1); otherwise it stays out.
TEST(EfaFailover, RekeyOnlyWithDeviceWritesAndTheUsersWord) {
  EXPECT_FALSE(srd_efa_rekey_fences(1, 0)) << "device writes alone: the default keeps a cut rail out";
  EXPECT_FALSE(srd_efa_rekey_fences(0, 1)) << "emulated writes check the key once, at the header";
  EXPECT_FALSE(srd_efa_rekey_fences(-1, 1)) << "built without the option: unknown";
  EXPECT_TRUE(srd_efa_rekey_fences(1, 1));
}

TEST_F(Proto, TaintedRailRekeysOnlyWhereKeysFenceWrites) {
  for (bool fence : {false, true}) {
    SCOPED_TRACE(fence ? "keys fence writes" : "keys do not fence writes");
    b.failover = true;
    b.rails[0].keys_fence_writes = fence;
    memset(static_cast<void *>(b.health), 0, sizeof(b.health));
    std::vector<char> in(4096);
    void *h = nullptr;
    ASSERT_EQ(0, srd_dev_reg(&b, in.data(), in.size(), 0, -1, SRD_MR_RECV, -1, 0, &h));
    uint64_t before = mr_key(static_cast<srd_rail_mrs *>(h)->mr[0]);
    Reg ri(in);
    Reg *regs[] = {&ri};
    srd_req *rr = irecv(1, &in, regs, nullptr);
    ASSERT_TRUE(rr->cts_sent);
    srd_msg_rail stale = {0, 0, 1};
    srd_proto_on_rail(r, &stale);
    EXPECT_TRUE(b.health[0].down);
    EXPECT_TRUE(b.health[0].tainted);
    uint64_t after = mr_key(static_cast<srd_rail_mrs *>(h)->mr[0]);
    if (fence) {
      EXPECT_NE(before, after);
      EXPECT_EQ(nullptr, b.health[0].out_for_good);
      EXPECT_TRUE(rr->old_keys);
    } else {
      EXPECT_EQ(before, after) << "registered again where new keys stop nothing";
      EXPECT_NE(nullptr, b.health[0].out_for_good);
    }
    while (!g.sends.empty()) complete_send(0);
    srd_req_release(rr);
    srd_dev_dereg(&b, h);
    srd_comm_free(r);
    r = srd_comm_alloc(&b, false);
    ASSERT_TRUE(r);
    join(r, s, 0);
  }
}

TEST_F(Proto, ReorderedCompletions) {
  std::vector<char> out = pattern(16384, 11), in(16384);
  Reg ro(out), ri(in);
  Reg *regs[] = {&ri};
  srd_req *rr = irecv(1, &in, regs, nullptr);
  ASSERT_EQ(1u, g.sends.size());
  deliver_send(0);
  srd_req *sr = isend(out, ro, out.size(), 0);
  ASSERT_EQ(4u, g.writes.size());
  // Data lands out of order; the send's completions come back out of order
  // too, and the clear-to-send's own completion comes last of all.
  const size_t order[] = {2, 0, 3, 1};
  for (size_t i : order) deliver_write(i);
  EXPECT_TRUE(rr->done);
  EXPECT_EQ(out, in);
  complete_write(3);
  complete_write(0);
  EXPECT_FALSE(sr->done);
  complete_write(1);
  EXPECT_FALSE(sr->done);
  complete_write(0);
  EXPECT_TRUE(sr->done);
  EXPECT_EQ(0, sr->result);
  complete_send(0);
  EXPECT_EQ(0, r->result);
  srd_req_release(sr);
  srd_req_release(rr);
}

// Control messages carry the destination comm's token: a copy with any other
// token (a forger who knows only the comm id) is dropped on arrival.
TEST_F(Proto, MessagesWithAWrongTokenAreDropped) {
  std::vector<char> out = pattern(4096, 15), in(4096), small = pattern(64, 16), in2(64);
  Reg ro(out), ri(in), rs(small), ri2(in2);
  Reg *regs[] = {&ri};
  srd_req *rr = irecv(1, &in, regs, nullptr);
  ASSERT_EQ(1u, g.sends.size());
  auto forge = [](size_t i, uint64_t token) {
    const Sent &m = g.sends.at(i);
    std::vector<char> copy(m.buf->data, m.buf->data + m.len);
    srd_msg_set_token(copy.data(), token);
    srd_dev *d = dest_dev(m.dest);
    srd_dispatch_handlers.on_message(d, &d->rails[0], copy.data(), copy.size(), src_of(d));
  };
  forge(0, s->token ^ 1); // the clear-to-send
  forge(0, 0);
  srd_req *sr = isend(out, ro, out.size(), 0, SRD_AGAIN);
  EXPECT_EQ(nullptr, sr) << "a clear-to-send with a wrong token was taken";
  deliver_and_complete_sends();
  sr = isend(out, ro, out.size(), 0);
  ASSERT_TRUE(sr);
  deliver_write(0);
  complete_write(0);
  EXPECT_TRUE(rr->done);
  EXPECT_EQ(out, in);
  srd_req_release(sr);
  srd_req_release(rr);
  // An eager message and a close notice with the wrong token change nothing.
  srd_req *es = isend(small, rs, small.size(), 0);
  ASSERT_TRUE(es);
  ASSERT_EQ(1u, g.sends.size());
  forge(0, r->token + 1);
  EXPECT_EQ(nullptr, srd_recv_comm(r)->unexpected) << "a forged eager message was kept";
  deliver_and_complete_sends();
  Reg *regs2[] = {&ri2};
  srd_req *rr2 = irecv(1, &in2, regs2, nullptr);
  EXPECT_TRUE(rr2->done);
  EXPECT_EQ(small, in2);
  srd_req_release(es);
  srd_req_release(rr2);
  srd_comm *closing = s;
  s = nullptr;
  srd_comm_close(closing);
  ASSERT_EQ(1u, g.sends.size());
  forge(0, r->token ^ 0x8000000000000000ull);
  EXPECT_FALSE(r->peer_closed) << "a forged close notice was taken";
  deliver_send(0);
  EXPECT_TRUE(r->peer_closed);
  complete_send(0);
}

// With FI_SOURCE, a message that the provider names as coming from another
// address than the comm's peer is dropped, even with the right token (an
// unnamed sender, FI_ADDR_NOTAVAIL, is vouched for by the token alone).
TEST_F(Proto, StrangersMessagesAreDroppedWhereTheProviderNamesTheSource) {
  std::vector<char> out = pattern(4096, 17), in(4096);
  Reg ro(out), ri(in);
  Reg *regs[] = {&ri};
  srd_req *rr = irecv(1, &in, regs, nullptr);
  ASSERT_EQ(1u, g.sends.size());
  const Sent &cts = g.sends.at(0);
  srd_dispatch_handlers.on_message(&a, &a.rails[0], cts.buf->data, cts.len, fi_addr_t{7});
  EXPECT_EQ(nullptr, isend(out, ro, out.size(), 0, SRD_AGAIN)) << "a clear-to-send from a stranger was taken";
  deliver_and_complete_sends();
  srd_req *sr = isend(out, ro, out.size(), 0);
  ASSERT_EQ(1u, g.writes.size());
  deliver_write(0);
  complete_write(0);
  EXPECT_TRUE(rr->done);
  EXPECT_EQ(0, rr->result);
  EXPECT_EQ(out, in);
  srd_req_release(sr);
  srd_req_release(rr);
}

// A peer inside the job naming another peer's comm by its write id (issue
// 60), where the provider names writers: the write is not that comm's, the
// writer's own comms fail with the evidence, the named comm goes on and
// completes with its own peer's data.
TEST_F(Proto, AWriteNamingAnotherPeersCommCutsTheWriterOff) {
  auto [s2, r2] = another_pair(1);
  const fi_addr_t rogue = 2; // r2's peer, as b's rails name it
  std::vector<char> out = pattern(4096, 21), in(4096);
  Reg ro(out), ri(in);
  Reg *regs[] = {&ri};
  srd_req *rr = irecv(1, &in, regs, nullptr);
  deliver_and_complete_sends();
  srd_imm guess = {r->write_id, rr->slot_tag, 1, 0, 0};
  srd_dispatch_handlers.on_remote_write(&b, &b.rails[0], srd_imm_pack(guess), in.size(), rogue);
  EXPECT_FALSE(rr->done) << "another peer's write completed the receive";
  EXPECT_EQ(0, r->result) << "another peer's write failed the comm it named";
  EXPECT_NE(0, r2->result) << "the writer was not cut off";
  EXPECT_EQ(0, s2->result) << "a comm of another device was failed";
  srd_req *sr = isend(out, ro, out.size(), 0);
  ASSERT_EQ(1u, g.writes.size());
  deliver_write(0);
  complete_write(0);
  EXPECT_TRUE(rr->done);
  EXPECT_EQ(0, rr->result);
  EXPECT_EQ(out, in);
  srd_req_release(sr);
  srd_req_release(rr);
}

// The same across one-sided groups: a peer's one-sided immediate naming the
// RMA comm of another peer records no op there.
TEST_F(Proto, AOneSidedWriteNamingAnotherPeersCommCutsTheWriterOff) {
  auto [s2, r2] = another_pair(1);
  const fi_addr_t rogue = 2;
  srd_comm *bs = nullptr;
  srd_rma_coll *coll = rma_group(&bs);
  ASSERT_TRUE(coll && r->rma);
  uint32_t next = r->rma->next_apply;
  srd_rma_imm guess = {r->write_id, next, 1, SRD_MAX_STRIPES, 0};
  srd_dispatch_handlers.on_remote_write(&b, &b.rails[0], srd_rma_imm_pack(guess), 64, rogue);
  EXPECT_FALSE(r->rma->slots[next % SRD_RMA_SEQ_WINDOW].known) << "another peer's write shaped this peer's op";
  EXPECT_EQ(0, r->result);
  EXPECT_NE(0, r2->result) << "the writer was not cut off";
  srd_rma_coll_detach(coll);
  srd_rma_coll_free(coll);
}

// A write whose immediate data the receiver did not offer (forged, or from a
// buggy writer) fails that comm and completes nothing.
uint32_t forged(const Write &w, uint32_t nstripes) {
  srd_imm v = srd_imm_unpack(w.imm);
  v.nstripes = nstripes;
  return srd_imm_pack(v);
}

TEST_F(Proto, StripeCountIsFixedByTheFirstWrite) {
  std::vector<char> out = pattern(16384, 13), in(16384);
  Reg ro(out), ri(in);
  Reg *regs[] = {&ri};
  srd_req *rr = irecv(1, &in, regs, nullptr);
  deliver_and_complete_sends();
  srd_req *sr = isend(out, ro, out.size(), 0);
  ASSERT_EQ(4u, g.writes.size());
  deliver_write(0);
  Write w = g.writes.at(1);
  srd_dispatch_handlers.on_remote_write(&b, &b.rails[0], forged(w, 2), w.len, kFromA);
  EXPECT_NE(0, r->result) << "a second stripe count for one entry fails the comm";
  EXPECT_FALSE(rr->done && rr->result == 0) << "the receive never completes with a forged count";
  EXPECT_EQ(0, s->result) << "only the receiving comm fails";
  while (!g.writes.empty()) complete_write(0);
  srd_req_release(sr);
  srd_req_release(rr);
}

TEST_F(Proto, WritesNeverAddUpToMoreThanThePostedBuffer) {
  std::vector<char> out = pattern(4096, 14), in(4096);
  Reg ro(out), ri(in);
  Reg *regs[] = {&ri};
  srd_req *rr = irecv(1, &in, regs, nullptr);
  deliver_and_complete_sends();
  srd_req *sr = isend(out, ro, out.size(), 0);
  ASSERT_EQ(1u, g.writes.size());
  Write w = g.writes.at(0);
  // tcp reports the length the writer claims: a claim past the buffer.
  srd_dispatch_handlers.on_remote_write(&b, &b.rails[0], w.imm, w.len + 1, kFromA);
  EXPECT_NE(0, r->result);
  EXPECT_FALSE(rr->done && rr->result == 0) << "a receive never reports more than it posted";
  complete_write(0);
  srd_req_release(sr);
  srd_req_release(rr);
}

TEST_F(Proto, WriteBeforeTheClearToSendIsRefused) {
  std::vector<char> in(4096);
  Reg ri(in);
  Reg *regs[] = {&ri};
  g.no_buffers = true;
  srd_req *rr = irecv(1, &in, regs, nullptr);
  ASSERT_TRUE(rr->on_pending);
  srd_imm v = {r->write_id, rr->slot_tag, 1, 0};
  srd_dispatch_handlers.on_remote_write(&b, &b.rails[0], srd_imm_pack(v), 16, kFromA);
  EXPECT_FALSE(rr->done) << "a slot whose clear-to-send never went out took a write";
  EXPECT_NE(0, r->result);
  g.no_buffers = false;
  srd_req_release(rr);
}

// A send comm has no write id of its own: on a device of only send comms no
// write id names anything.
TEST_F(Proto, WriteNamingASendCommOrAConnectingCommIsDropped) {
  srd_comm *connecting = srd_comm_alloc(&b, false);
  ASSERT_TRUE(connecting);
  srd_imm to_send = {s->id & (SRD_MAX_COMMS - 1), 0, 1, 0};
  srd_dispatch_handlers.on_remote_write(&a, &a.rails[0], srd_imm_pack(to_send), 16, kFromB);
  srd_imm to_connecting = {connecting->write_id, 0, 1, 0};
  srd_dispatch_handlers.on_remote_write(&b, &b.rails[0], srd_imm_pack(to_connecting), 16, kFromA);
  EXPECT_EQ(0, s->result);
  EXPECT_EQ(0, connecting->result);
  EXPECT_EQ(0, r->result);
  srd_comm_free(connecting);
}

// Writes name a receive comm by its random write id, not by its index: the
// comm's index (a small number a peer of another comm can count to) names
// nothing, unless the draw happened to give that very id.
TEST_F(Proto, WriteIdsAreDrawnNotCounted) {
  std::vector<srd_comm *> more;
  int same = 0;
  for (int i = 0; i < 64; i++) {
    srd_comm *c = srd_comm_alloc(&b, false);
    ASSERT_TRUE(c);
    same += c->write_id == (c->id & (SRD_MAX_COMMS - 1));
    EXPECT_EQ(c, b.by_write_id[c->write_id]);
    more.push_back(c);
  }
  EXPECT_LT(same, 3) << "write ids follow the comm indexes";
  for (srd_comm *c : more) {
    uint16_t w = c->write_id;
    srd_comm_free(c);
    EXPECT_EQ(nullptr, b.by_write_id[w]) << "a freed comm keeps its write id";
  }
}

TEST_F(Proto, NoControlBufferMeansTryLater) {
  std::vector<char> in(4096);
  Reg ri(in);
  Reg *regs[] = {&ri};
  g.no_buffers = true;
  srd_req *rr = irecv(1, &in, regs, nullptr);
  ASSERT_TRUE(rr);
  EXPECT_TRUE(g.sends.empty());
  EXPECT_TRUE(rr->on_pending) << "the clear-to-send waits for a buffer";
  g.no_buffers = false;
  srd_proto_post_pending(&b);
  EXPECT_EQ(1u, g.sends.size());
  EXPECT_FALSE(rr->on_pending);
  srd_req_release(rr);
}

TEST_F(Proto, CloseWhileInFlightWaitsForTheProvider) {
  std::vector<char> out = pattern(8192, 12), in(8192);
  Reg ro(out), ri(in);
  srd_req *rr = nullptr, *sr = nullptr;
  cleared_send(out, ro, in, ri, &rr, &sr);
  ASSERT_TRUE(sr);
  ASSERT_EQ(2u, g.writes.size());
  srd_comm *closing = s;
  s = nullptr;
  srd_comm_close(closing); // the fake provider holds the writes past the wait
  ASSERT_EQ(closing, a.closed) << "retired, not freed, while the provider holds its writes";
  EXPECT_TRUE(sr->done);
  EXPECT_EQ(SRD_ERR_USAGE, sr->result);
  EXPECT_EQ(nullptr, srd_dev_comm_by_id(&a, closing->id)) << "no message reaches a closed comm";
  while (!g.writes.empty()) complete_write(0);
  srd_dev_free_closed(&a, false);
  EXPECT_EQ(closing, a.closed) << "its close notice is still held";
  ASSERT_EQ(1u, g.sends.size());
  deliver_send(0);
  EXPECT_TRUE(r->peer_closed);
  complete_send(0);
  srd_dev_free_closed(&a, false);
  EXPECT_EQ(nullptr, a.closed) << "freed once its last operation completed";
  srd_comm_close(r);
  r = nullptr;
  (void)rr;
}

// The receiver gives its buffer up while two of four writes have landed: its
// close notice stops the sender, which answers only once its writes are over,
// with their count; until as many have landed the receiver is not safe.
TEST_F(Proto, CloseNoticeIsAnsweredWithTheWritesOnceTheyAreOver) {
  std::vector<char> out = pattern(16384, 14), in(16384);
  Reg ro(out), ri(in);
  srd_req *rr = nullptr, *sr = nullptr;
  cleared_send(out, ro, in, ri, &rr, &sr);
  ASSERT_TRUE(sr);
  ASSERT_EQ(4u, g.writes.size());
  std::vector<Write> held(g.writes.begin(), g.writes.end());
  deliver_write(0);
  deliver_write(1);
  r->closing = true; // as srd_comm_close and srd_proto_quiesce mark it
  EXPECT_TRUE(srd_proto_peer_may_write(r)) << "a cleared receive is unfinished";
  srd_proto_notify_peer(r);
  ASSERT_EQ(1u, g.sends.size()) << "the receiver's close notice";
  deliver_send(0);
  complete_send(0);
  EXPECT_TRUE(s->peer_closed);
  EXPECT_TRUE(g.sends.empty()) << "no answer while the sender's writes are in flight";
  EXPECT_EQ(nullptr, isend(out, ro, 64, 1, SRD_ERR_REMOTE)) << "no send after the receiver closed";
  while (!g.writes.empty()) complete_write(0);
  EXPECT_TRUE(sr->done);
  ASSERT_EQ(1u, g.sends.size()) << "the answer, once the writes are over";
  deliver_send(0);
  complete_send(0);
  EXPECT_TRUE(r->peer_drained);
  EXPECT_EQ(4u, r->peer_writes);
  EXPECT_TRUE(srd_proto_peer_may_write(r)) << "two of its four writes have not landed";
  for (size_t i = 2; i < 4; i++)
    srd_dispatch_handlers.on_remote_write(&b, &b.rails[0], held[i].imm, held[i].len, kFromA);
  EXPECT_FALSE(srd_proto_peer_may_write(r)) << "every write the sender completed has landed";
  srd_req_release(sr);
  (void)rr;
}

} // namespace

int main(int argc, char **argv) {
  // close waits this long for operations the (fake) provider holds.
  setenv("NCCL_SRD_CLOSE_TIMEOUT_MS", "50", 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

// The sender's close notice says how many messages it sent: a receive
// posted before it arrived for a message never sent fails when it arrives,
// and one posted after it fails at once, rather than waiting forever; a
// receive of a message sent before the notice still completes.
TEST_F(Proto, ReceiveAfterTheSendersCloseNoticeFailsAtOnce) {
  std::vector<char> small = pattern(100, 21), in(4096), more(4096), late(4096);
  Reg rs(small), ri(in), rm(more), rl(late);
  srd_req *sr = isend(small, rs, small.size(), 0);
  ASSERT_TRUE(sr);
  deliver_and_complete_sends(); // kept until its receive
  ASSERT_TRUE(sr->done);
  Reg *regs[] = {&ri};
  srd_req *first = irecv(1, &in, regs, nullptr);
  ASSERT_TRUE(first && first->done);
  EXPECT_EQ(0, first->result);
  Reg *mregs[] = {&rm};
  srd_req *waiting = irecv(1, &more, mregs, nullptr);
  ASSERT_TRUE(waiting);
  EXPECT_FALSE(waiting->done);
  while (!g.sends.empty()) complete_send(0); // its clear-to-send, which the closed sender ignores
  ASSERT_EQ(SRD_OK, srd_proto_send_bye(s, SRD_BYE_DRAINED)); // as a send comm closes after its writes
  ASSERT_EQ(1u, g.sends.size());
  deliver_send(0);
  complete_send(0);
  EXPECT_TRUE(r->peer_closed);
  ASSERT_EQ(1u, g.sends.size()) << "no answer to the sender's close notice";
  EXPECT_EQ(SRD_BYE_TAKEN, sent_bye_flags(0));
  deliver_send(0);
  complete_send(0);
  EXPECT_TRUE(waiting->done) << "a receive for a message never sent still waits";
  EXPECT_EQ(SRD_ERR_REMOTE, waiting->result);
  void *data[] = {late.data()};
  size_t sizes[] = {late.size()};
  srd_mr_ref *mrs[] = {&rl.ref};
  srd_req *after = nullptr;
  EXPECT_EQ(SRD_ERR_REMOTE, srd_proto_irecv(r, 1, data, sizes, nullptr, mrs, &after))
      << "a receive posted after the close notice was accepted (it can never complete)";
  EXPECT_EQ(nullptr, after);
  EXPECT_TRUE(g.sends.empty()) << "a clear-to-send went to a closed sender";
  srd_req_release(first);
  srd_req_release(waiting);
  srd_req_release(sr);
}

// A closing sender waits until its receiver says it took every eager
// message and write it sent (SRD_BYE_TAKEN): its process may exit next, and
// tcp drops what the receiver had not read when the connection then breaks.
// The notice can overtake the messages (efa delivers out of order): the
// receiver answers only once the last of them is here, kept or delivered.
TEST_F(Proto, ClosedSenderIsToldOnceEverythingItSentIsTaken) {
  std::vector<char> first = pattern(100, 31), second = pattern(200, 32), in(4096);
  Reg ra(first), rb(second), ri(in);
  srd_req *s1 = isend(first, ra, first.size(), 0);
  srd_req *s2 = isend(second, rb, second.size(), 0);
  ASSERT_TRUE(s1 && s2);
  ASSERT_EQ(2u, g.sends.size());
  ASSERT_EQ(SRD_OK, srd_proto_send_bye(s, SRD_BYE_DRAINED));
  EXPECT_TRUE(srd_proto_awaits_taken(s));
  ASSERT_EQ(3u, g.sends.size());
  deliver_send(2); // the notice first
  complete_send(2);
  EXPECT_TRUE(r->peer_closed);
  EXPECT_EQ(2u, g.sends.size()) << "taken answered while two eager messages are still on their way";
  deliver_send(1);
  complete_send(1);
  EXPECT_EQ(1u, g.sends.size()) << "taken answered while an eager message is still on its way";
  deliver_send(0);
  complete_send(0);
  ASSERT_EQ(1u, g.sends.size()) << "no answer once everything the sender sent was kept";
  EXPECT_EQ(SRD_BYE_TAKEN, sent_bye_flags(0));
  deliver_send(0);
  complete_send(0);
  EXPECT_FALSE(srd_proto_awaits_taken(s));
  Reg *regs[] = {&ri};
  srd_req *rr = irecv(1, &in, regs, nullptr);
  ASSERT_TRUE(rr && rr->done) << "a message kept before the answer is still delivered";
  EXPECT_EQ(0, memcmp(in.data(), first.data(), first.size()));
  srd_req_release(rr);
  srd_req_release(s1);
  srd_req_release(s2);
}

// Writes likewise: the notice counts the sender's completed writes, and the
// answer waits until as many have landed.
TEST_F(Proto, ClosedSenderIsToldTakenOnlyOnceItsWritesLanded) {
  std::vector<char> out = pattern(16384, 33), in(16384);
  Reg ro(out), ri(in);
  srd_req *rr = nullptr, *sr = nullptr;
  cleared_send(out, ro, in, ri, &rr, &sr);
  ASSERT_TRUE(sr);
  ASSERT_EQ(4u, g.writes.size());
  std::vector<Write> held(g.writes.begin(), g.writes.end());
  while (!g.writes.empty()) complete_write(0); // completed at the sender, not landed yet
  ASSERT_TRUE(sr->done);
  ASSERT_EQ(SRD_OK, srd_proto_send_bye(s, SRD_BYE_DRAINED));
  deliver_send(0);
  complete_send(0);
  EXPECT_TRUE(g.sends.empty()) << "taken answered while the sender's writes have not landed";
  auto land = [&](const Write &w) {
    memcpy(reinterpret_cast<void *>(w.raddr), w.src, w.len);
    srd_dispatch_handlers.on_remote_write(&b, &b.rails[0], w.imm, w.len, kFromA);
  };
  for (size_t i = 0; i < 3; i++) land(held[i]);
  EXPECT_TRUE(g.sends.empty()) << "taken answered with one of four writes still on its way";
  land(held[3]);
  ASSERT_EQ(1u, g.sends.size());
  EXPECT_EQ(SRD_BYE_TAKEN, sent_bye_flags(0));
  EXPECT_TRUE(rr->done);
  EXPECT_EQ(0, memcmp(in.data(), out.data(), out.size()));
  deliver_send(0);
  complete_send(0);
  EXPECT_FALSE(srd_proto_awaits_taken(s));
  srd_req_release(rr);
  srd_req_release(sr);
}

// A peer that left a close unanswered is not waited for by the next closes
// to it (close.c), until it answers one again.
TEST_F(Proto, QuietPeerIsWaitedForAgainOnceItAnswers) {
  std::vector<char> msg = pattern(100, 35);
  Reg rm(msg);
  srd_req *sr = isend(msg, rm, msg.size(), 0);
  EXPECT_FALSE(srd_proto_peer_quiet(s));
  srd_proto_note_quiet_peer(s); // as a close whose wait ran out
  EXPECT_TRUE(srd_proto_peer_quiet(s));
  ASSERT_EQ(SRD_OK, srd_proto_send_bye(s, SRD_BYE_DRAINED));
  for (int i = 0; i < 2; i++) {
    deliver_send(0);
    complete_send(0);
  }
  ASSERT_EQ(1u, g.sends.size());
  EXPECT_EQ(SRD_BYE_TAKEN, sent_bye_flags(0));
  deliver_send(0);
  complete_send(0);
  EXPECT_FALSE(srd_proto_peer_quiet(s)) << "a peer that answered is still taken for quiet";
  srd_req_release(sr);
}

// After the answer the sender may be gone: a control message that then
// fails (here the answer itself) costs the receiver nothing it took.
TEST_F(Proto, FailureAfterTakenKeepsWhatWasTaken) {
  std::vector<char> msg = pattern(100, 34), in(4096);
  Reg rm(msg), ri(in);
  srd_req *sr = isend(msg, rm, msg.size(), 0);
  ASSERT_EQ(SRD_OK, srd_proto_send_bye(s, SRD_BYE_DRAINED));
  for (int i = 0; i < 2; i++) {
    deliver_send(0);
    complete_send(0);
  }
  ASSERT_EQ(1u, g.sends.size());
  EXPECT_EQ(SRD_BYE_TAKEN, sent_bye_flags(0));
  complete_send(0, -FI_ECONNRESET);
  EXPECT_EQ(0, r->result) << "the receive comm failed after it took everything";
  Reg *regs[] = {&ri};
  srd_req *rr = irecv(1, &in, regs, nullptr);
  ASSERT_TRUE(rr && rr->done);
  EXPECT_EQ(0, rr->result);
  EXPECT_EQ(0, memcmp(in.data(), msg.data(), msg.size()));
  srd_req_release(rr);
  srd_req_release(sr);
}

// iflush: nothing unless the device's decision asks for a flush (efa writing
// GPU memory over PCIe); then one loopback read per rail of the received
// buffer, and the request completes when every read has.
TEST_F(Proto, NoFlushWhereTheDeviceNeedsNone) {
  std::vector<char> in(4096);
  Reg ri(in);
  ri.mr.device = 0;
  EXPECT_EQ(nullptr, iflush(in, ri, 4096));
  EXPECT_TRUE(g.reads.empty());
}

TEST_F(Proto, FlushReadsTheBufferAndCompletesWithTheRead) {
  b.gdr.flush = true;
  std::vector<char> in(4096);
  Reg ri(in);
  EXPECT_EQ(nullptr, iflush(in, ri, 4096)) << "host memory needs no flush";
  ri.mr.device = 0;
  EXPECT_EQ(nullptr, iflush(in, ri, 0)) << "a buffer that received nothing needs no flush";
  EXPECT_TRUE(g.reads.empty());
  srd_req *fr = iflush(in, ri, 4096);
  ASSERT_TRUE(fr);
  ASSERT_EQ(1u, g.reads.size()) << "one read per rail";
  EXPECT_EQ(reinterpret_cast<uintptr_t>(in.data()), g.reads[0].raddr);
  EXPECT_EQ(0x5eedu, g.reads[0].key);
  EXPECT_FALSE(fr->done) << "done only when the read is";
  complete_read(0);
  EXPECT_TRUE(fr->done);
  EXPECT_EQ(0, fr->result);
  srd_req_release(fr);
}

TEST_F(Proto, FailedFlushReadFailsTheRequest) {
  b.gdr.flush = true;
  std::vector<char> in(4096);
  Reg ri(in);
  ri.mr.device = 0;
  srd_req *fr = iflush(in, ri, 100);
  ASSERT_TRUE(fr);
  complete_read(0, -FI_EIO);
  EXPECT_TRUE(fr->done);
  EXPECT_EQ(SRD_ERR_SYSTEM, fr->result);
  srd_req_release(fr);
}

TEST_F(Proto, RefusedFlushReadFallsBackToTheDriver) {
  fake::Driver driver;
  b.gdr.flush = true;
  g.read_refused = -FI_ENOSYS;
  std::vector<char> in(4096);
  Reg ri(in);
  ri.mr.device = 1;
  EXPECT_EQ(nullptr, iflush(in, ri, 4096)) << "flushed synchronously";
  EXPECT_EQ(1, fake::state.flushes);
  EXPECT_EQ(0, r->result);
  EXPECT_EQ(0, r->reqs_in_flight) << "the request taken for the reads went back";
}

// SRD_CTS_UNUSED_MAX clear-to-sends in a row that small messages did not
// need (they came eagerly) stop the next receives from posting theirs; a
// message that cannot go eagerly asks for it (RTS), and receives post theirs
// at once again.
TEST_F(Proto, ClearToSendOnlyWhenAskedAfterSmallMessages) {
  std::vector<char> small = pattern(100, 7), big = pattern(8192, 8), in(8192);
  Reg rs(small), rb(big), ri(in);
  Reg *regs[] = {&ri};
  srd_req *rr, *sr;
  for (int i = 0; i < SRD_CTS_UNUSED_MAX; i++) {
    rr = irecv(1, &in, regs, nullptr);
    ASSERT_EQ(1u, g.sends.size()) << "receive " << i << " posts its clear-to-send: too few unneeded ones yet";
    sr = isend(small, rs, small.size(), 0);
    ASSERT_TRUE(sr);
    deliver_and_complete_sends();
    ASSERT_TRUE(rr->done && sr->done);
    srd_req_release(sr);
    srd_req_release(rr);
  }

  rr = irecv(1, &in, regs, nullptr);
  EXPECT_TRUE(g.sends.empty()) << "after unneeded clear-to-sends in a row the next receive posts none";
  EXPECT_EQ(nullptr, isend(big, rb, big.size(), 0, SRD_AGAIN)) << "too large to go eagerly";
  ASSERT_EQ(1u, g.sends.size());
  EXPECT_EQ(SRD_MSG_RTS, sent_type(0));
  EXPECT_EQ(nullptr, isend(big, rb, big.size(), 0, SRD_AGAIN));
  EXPECT_EQ(1u, g.sends.size()) << "asked once per message";
  deliver_send(0);
  complete_send(0);
  ASSERT_EQ(1u, g.sends.size()) << "the request brings the clear-to-send";
  EXPECT_EQ(SRD_MSG_CTS, sent_type(0));
  deliver_and_complete_sends();
  sr = isend(big, rb, big.size(), 0);
  ASSERT_TRUE(sr);
  while (!g.writes.empty()) {
    deliver_write(0);
    complete_write(0);
  }
  EXPECT_TRUE(rr->done && sr->done);
  EXPECT_EQ(big, in);
  srd_req_release(sr);
  srd_req_release(rr);

  rr = irecv(1, &in, regs, nullptr);
  ASSERT_EQ(1u, g.sends.size()) << "after a large message receives post their clear-to-send again";
  EXPECT_EQ(SRD_MSG_CTS, sent_type(0));
  deliver_and_complete_sends();
  sr = isend(big, rb, big.size(), 0);
  ASSERT_TRUE(sr);
  while (!g.writes.empty()) {
    deliver_write(0);
    complete_write(0);
  }
  EXPECT_TRUE(rr->done && sr->done);
  srd_req_release(sr);
  srd_req_release(rr);
}

// An RTS that overtakes the eager message before it and arrives before its
// own receive is posted: that eager message, delivered into a receive whose
// clear-to-send went out after the RTS, sets cts_on_request again, yet the
// receive the RTS named still posts its clear-to-send (it was asked for).
TEST_F(Proto, RequestToSendBeforeItsReceiveIsRemembered) {
  std::vector<char> small = pattern(100, 10), big = pattern(8192, 11), in1(8192), in2(8192);
  Reg rs(small), rb(big), r1(in1), r2(in2);
  Reg *regs1[] = {&r1}, *regs2[] = {&r2};
  srd_req *rr, *sr;
  for (int i = 0; i < SRD_CTS_UNUSED_MAX; i++) {
    rr = irecv(1, &in1, regs1, nullptr);
    sr = isend(small, rs, small.size(), 0);
    deliver_and_complete_sends();
    ASSERT_TRUE(rr->done && sr->done);
    srd_req_release(sr);
    srd_req_release(rr);
  }
  ASSERT_TRUE(srd_recv_comm(r)->cts_on_request);

  sr = isend(small, rs, small.size(), 0);
  ASSERT_TRUE(sr);
  EXPECT_EQ(nullptr, isend(big, rb, big.size(), 0, SRD_AGAIN));
  ASSERT_EQ(2u, g.sends.size());
  ASSERT_EQ(SRD_MSG_RTS, sent_type(1));
  deliver_send(1); // the RTS first
  complete_send(1);
  rr = irecv(1, &in1, regs1, nullptr);
  ASSERT_EQ(2u, g.sends.size()) << "after the RTS the receive posts its clear-to-send";
  // As if SRD_CTS_UNUSED_MAX - 1 unneeded clear-to-sends had followed the
  // RTS, so that the eager message below switches to on request.
  srd_recv_comm(r)->cts_unused = SRD_CTS_UNUSED_MAX - 1;
  deliver_send(0); // then the eager message, into a receive whose clear-to-send went out
  complete_send(0);
  ASSERT_TRUE(rr->done && sr->done);
  ASSERT_TRUE(srd_recv_comm(r)->cts_on_request);
  deliver_and_complete_sends();
  srd_req_release(sr);
  srd_req_release(rr);

  srd_req *rr2 = irecv(1, &in2, regs2, nullptr);
  ASSERT_EQ(1u, g.sends.size()) << "the receive the RTS named posts its clear-to-send";
  deliver_and_complete_sends();
  sr = isend(big, rb, big.size(), 0);
  ASSERT_TRUE(sr);
  while (!g.writes.empty()) {
    deliver_write(0);
    complete_write(0);
  }
  EXPECT_TRUE(rr2->done && sr->done);
  EXPECT_EQ(big, in2);
  srd_req_release(sr);
  srd_req_release(rr2);
}

// A receiver keeps eager data only so far past its receives: a sender that
// ran SRD_EAGER_WINDOW messages past the last clear-to-send (none yet: past
// sequence 0) waits, asking for nothing, until the next clear-to-send moves
// the window; everything it sent meanwhile lands in the right receive.
TEST_F(Proto, EagerSenderWaitsPastItsWindow) {
  const int n = SRD_EAGER_WINDOW + 1;
  std::vector<std::vector<char>> out, in;
  for (int i = 0; i < n; i++) out.push_back(pattern(100, 20 + i)), in.emplace_back(100);
  std::vector<Reg> ro, ri;
  ro.reserve(n), ri.reserve(n);
  for (int i = 0; i < n; i++) ro.emplace_back(out[i]), ri.emplace_back(in[i]);
  for (int i = 0; i < SRD_EAGER_WINDOW; i++) {
    srd_req *sr = isend(out[i], ro[i], 100, i);
    ASSERT_TRUE(sr) << "message " << i;
    deliver_and_complete_sends();
    ASSERT_TRUE(sr->done);
    srd_req_release(sr);
  }
  EXPECT_EQ(SRD_EAGER_WINDOW, srd_recv_comm(r)->nunexpected);
  EXPECT_EQ(nullptr, isend(out[n - 1], ro[n - 1], 100, n - 1, SRD_AGAIN)) << "past the window";
  EXPECT_TRUE(g.sends.empty()) << "asked for something while waiting";
  for (int i = 0; i < n; i++) {
    Reg *regs[] = {&ri[i]};
    int tag = i;
    srd_req *rr = irecv(1, &in[i], regs, &tag);
    ASSERT_TRUE(rr);
    if (i == n - 1) {
      ASSERT_EQ(1u, g.sends.size()) << "the first receive not done by kept data posts its clear-to-send";
      EXPECT_EQ(SRD_MSG_CTS, sent_type(0));
      deliver_and_complete_sends();
      srd_req *sr = isend(out[i], ro[i], 100, i);
      ASSERT_TRUE(sr) << "the clear-to-send did not move the window";
      deliver_and_complete_sends();
      EXPECT_TRUE(sr->done);
      srd_req_release(sr);
    }
    EXPECT_TRUE(rr->done) << "message " << i;
    EXPECT_EQ(out[i], in[i]) << "message " << i;
    srd_req_release(rr);
  }
}

// Receives that post their clear-to-send only on request still post one
// every half window, so a steady stream of small messages never waits.
TEST_F(Proto, ReceivesOnRequestPostAClearToSendEveryHalfWindow) {
  std::vector<char> out = pattern(100, 14), in(100);
  Reg ro(out), ri(in);
  Reg *regs[] = {&ri};
  int ctss = 0;
  const int msgs = 4 * SRD_EAGER_WINDOW;
  for (int i = 0; i < msgs; i++) {
    srd_req *rr = irecv(1, &in, regs, nullptr);
    for (size_t k = 0; k < g.sends.size(); k++) ctss += sent_type(k) == SRD_MSG_CTS;
    deliver_and_complete_sends();
    srd_req *sr = isend(out, ro, out.size(), 0);
    ASSERT_TRUE(sr) << "message " << i << " waited";
    deliver_and_complete_sends();
    ASSERT_TRUE(rr->done && sr->done);
    srd_req_release(sr);
    srd_req_release(rr);
  }
  // The first SRD_CTS_UNUSED_MAX receives' (unneeded, not yet enough in a
  // row), then one per half window.
  EXPECT_EQ(SRD_CTS_UNUSED_MAX + (msgs - SRD_CTS_UNUSED_MAX) / (SRD_EAGER_WINDOW / 2), ctss);
}

// Traffic that mixes small and large messages, as NCCL's steps do (eager
// ones between the larger ones): receives keep posting their clear-to-sends
// with the receive, so no large message waits to ask for one.
TEST_F(Proto, MixedTrafficKeepsClearToSendsAhead) {
  std::vector<char> small = pattern(100, 15), big = pattern(8192, 16), in(8192);
  Reg rs(small), rb(big), ri(in);
  Reg *regs[] = {&ri};
  for (int i = 0; i < 4 * SRD_CTS_UNUSED_MAX; i++) {
    const bool large = i % SRD_CTS_UNUSED_MAX == SRD_CTS_UNUSED_MAX - 1; // the most small ones in a row that keep it
    srd_req *rr = irecv(1, &in, regs, nullptr);
    ASSERT_EQ(1u, g.sends.size()) << "receive " << i << " posted no clear-to-send";
    EXPECT_EQ(SRD_MSG_CTS, sent_type(0));
    deliver_and_complete_sends();
    srd_req *sr = large ? isend(big, rb, big.size(), 0) : isend(small, rs, small.size(), 0);
    ASSERT_TRUE(sr) << "message " << i << " waited for its clear-to-send";
    deliver_and_complete_sends();
    while (!g.writes.empty()) {
      deliver_write(0);
      complete_write(0);
    }
    ASSERT_TRUE(rr->done && sr->done) << "message " << i;
    EXPECT_EQ(0, memcmp(in.data(), large ? big.data() : small.data(), large ? big.size() : small.size()));
    srd_req_release(sr);
    srd_req_release(rr);
  }
  EXPECT_FALSE(srd_recv_comm(r)->cts_on_request);
}

// A message that finds no clear-to-send asks for it at once, once per
// message, and no timer asks again: the receiver either answers the request
// or has its clear-to-send on the way.
TEST_F(Proto, SenderAsksAtOnceAndOnce) {
  std::vector<char> small = pattern(100, 12), big = pattern(8192, 13);
  Reg rs(small), rb(big);
  EXPECT_EQ(nullptr, isend(big, rb, big.size(), 0, SRD_AGAIN));
  ASSERT_EQ(1u, g.sends.size()) << "a fresh comm asks at once too";
  EXPECT_EQ(SRD_MSG_RTS, sent_type(0));
  complete_send(0); // lost on the way, as far as this test cares
  usleep(5000);
  EXPECT_EQ(nullptr, isend(big, rb, big.size(), 0, SRD_AGAIN));
  EXPECT_TRUE(g.sends.empty()) << "asked again: a timer on the data path";
}

// A request that a failed rail may have carried is asked again once the
// comm moved off it (failover.c calls srd_proto_reask_cts).
TEST_F(Proto, SenderAsksAgainAfterMovingOffARail) {
  std::vector<char> big = pattern(8192, 9);
  Reg rb(big);
  EXPECT_EQ(nullptr, isend(big, rb, big.size(), 0, SRD_AGAIN));
  ASSERT_EQ(1u, g.sends.size());
  complete_send(0);
  srd_proto_reask_cts(s);
  EXPECT_EQ(nullptr, isend(big, rb, big.size(), 0, SRD_AGAIN));
  ASSERT_EQ(1u, g.sends.size()) << "not asked again after the rail went";
  EXPECT_EQ(SRD_MSG_RTS, sent_type(0));
  complete_send(0);
}

// A provider that refuses every probe (try later: a paused or overloaded
// peer) never fails the comm, however long (a live peer was failed as
// unreachable under ThreadSanitizer in CI after 6 s of refusals); a probe
// that completes with an error is evidence, and fails it.
TEST_F(Proto, RefusedProbesNeverFailAComm) {
  const uint64_t quiet = static_cast<uint64_t>(srd_param_int(SRD_PARAM_KEEPALIVE_MS)), t = srd_now_ms() + 100000;
  s->last_heard_ms = s->last_ping_ms = t;
  g.provider_full = true;
  uint64_t now = t;
  for (int i = 0; i < 100; i++) {
    now += quiet + 1;
    s->last_wait_ms = now; // an isend still waits for its clear-to-send
    srd_dev_probe_silent_peers(&a, now);
  }
  EXPECT_EQ(0, s->result) << "refused probes over 100 keepalives failed the comm: " << s->error;
  EXPECT_FALSE(s->peer_lost);
  g.provider_full = false;
  now += quiet + 1;
  s->last_wait_ms = now;
  srd_dev_probe_silent_peers(&a, now);
  ASSERT_EQ(1u, g.sends.size()) << "the provider accepts again and no probe went";
  EXPECT_EQ(SRD_MSG_PING, sent_type(0));
  complete_send(0, -FI_ECONNRESET);
  EXPECT_EQ(SRD_ERR_REMOTE, s->result) << "a probe that failed did not fail the comm";
  EXPECT_TRUE(s->peer_lost);
}

// GPU buffers are registered with the GPU that owns them, asked of the
// driver for each buffer: on a host of several GPUs a device gets buffers of
// any of them.
TEST_F(Proto, GpuBufferIsRegisteredWithItsOwnGpu) {
  fake::Driver driver;
  fake::state.devices = 4;
  static char gpu[4][4096];
  for (int k = 0; k < 4; k++) {
    fake::state.mem_base[k] = reinterpret_cast<uintptr_t>(gpu[k]);
    fake::state.mem_len[k] = sizeof(gpu[k]);
  }
  b.gdr.gpu = true;
  srd_mr_ops ops = {srd_dev_reg, srd_dev_dereg, &b};
  srd_mr_cache_init(&b.mrs, &ops, 1);
  for (int k : {2, 0, 3, 1}) {
    void *mh = nullptr;
    ASSERT_EQ(ncclSuccess, srd_net_reg_mr(r, gpu[k] + 64, 1024, NCCL_PTR_CUDA, -1, 0, &mh));
    EXPECT_EQ(k, g.reg_cuda_dev) << "a buffer of GPU " << k << " registered for another GPU";
    EXPECT_EQ(ncclSuccess, srd_net_dereg_mr(r, mh));
  }
  std::vector<char> host(1024);
  void *mh = nullptr;
  ASSERT_EQ(ncclSuccess, srd_net_reg_mr(r, host.data(), host.size(), NCCL_PTR_HOST, -1, 0, &mh));
  EXPECT_EQ(-1, g.reg_cuda_dev);
  EXPECT_EQ(ncclSuccess, srd_net_dereg_mr(r, mh));
  EXPECT_EQ(0, g.mrs_open);
  srd_mr_cache_fini(&b.mrs);
}


// tcp: while the provider refuses probes, a peer whose listening address
// refuses connections is gone; one whose probes go is not asked about.
TEST_F(Proto, RefusedProbesAndAClosedListenerAreALoss) {
  const uint64_t quiet = static_cast<uint64_t>(srd_param_int(SRD_PARAM_KEEPALIVE_MS)), t = srd_now_ms() + 100000;
  s->last_heard_ms = s->last_ping_ms = t;
  g.listener_gone = true;
  s->last_wait_ms = t + quiet + 1;
  srd_dev_probe_silent_peers(&a, s->last_wait_ms);
  EXPECT_EQ(0, s->result) << "the probe went: no reason to doubt the peer";
  deliver_and_complete_sends();
  g.provider_full = true;
  s->last_wait_ms += quiet + 1;
  srd_dev_probe_silent_peers(&a, s->last_wait_ms);
  g.provider_full = g.listener_gone = false;
  EXPECT_EQ(SRD_ERR_REMOTE, s->result) << "refused, and nothing listens at the peer's address";
  EXPECT_TRUE(s->peer_lost);
  EXPECT_NE(nullptr, strstr(s->error, "refuses connections")) << s->error;
}

// A close notice the provider refuses (try later) is posted again, and the
// close keeps waiting for the writes its peer was cleared to do: a busy peer
// is not a lost one.
TEST_F(Proto, RefusedCloseNoticeIsNoLoss) {
  std::vector<char> in(16384);
  Reg ri(in);
  Reg *regs[] = {&ri};
  srd_req *rr = irecv(1, &in, regs, nullptr);
  deliver_and_complete_sends();
  r->closing = true; // as srd_comm_close marks it
  g.provider_full = true;
  srd_proto_notify_peer(r);
  g.provider_full = false;
  EXPECT_FALSE(r->peer_lost) << "a refused close notice was taken for a lost peer";
  EXPECT_TRUE(srd_proto_peer_may_write(r)) << "the close stopped waiting for the cleared receive";
  srd_proto_notify_peer(r);
  ASSERT_EQ(1u, g.sends.size()) << "the notice went not once the provider took it again";
  EXPECT_EQ(SRD_MSG_BYE, sent_type(0));
  deliver_and_complete_sends();
  (void)rr;
}

// Silence alone fails a waiting comm only past NCCL_SRD_PEER_TIMEOUT_MS,
// and only where the user set it.
TEST_F(Proto, SilenceFailsOnlyPastThePeerTimeout) {
  const uint64_t t = srd_now_ms() + 100000;
  s->last_heard_ms = s->last_ping_ms = t;
  g.provider_full = true;
  s->last_wait_ms = t + 3600000;
  srd_dev_probe_silent_peers(&a, s->last_wait_ms);
  EXPECT_EQ(0, s->result) << "silent for an hour without NCCL_SRD_PEER_TIMEOUT_MS";
  setenv("NCCL_SRD_PEER_TIMEOUT_MS", "5000", 1);
  srd_param_reload();
  s->last_wait_ms = t + 5000;
  srd_dev_probe_silent_peers(&a, s->last_wait_ms);
  EXPECT_EQ(0, s->result) << "failed at the timeout, not past it";
  s->last_wait_ms = t + 5001;
  srd_dev_probe_silent_peers(&a, s->last_wait_ms);
  unsetenv("NCCL_SRD_PEER_TIMEOUT_MS");
  srd_param_reload();
  g.provider_full = false;
  EXPECT_EQ(SRD_ERR_REMOTE, s->result) << "silent past NCCL_SRD_PEER_TIMEOUT_MS";
  EXPECT_NE(nullptr, strstr(s->error, "NCCL_SRD_PEER_TIMEOUT_MS")) << s->error;
  EXPECT_FALSE(s->peer_lost) << "silence is no evidence that the peer is gone";
}

// A small send from GPU memory waits for the clear-to-send and is written,
// even to a receiver that takes eager data: the CPU cannot copy it.
TEST_F(Proto, GpuMemoryNeverGoesEagerly) {
  std::vector<char> out = pattern(100, 4), in(4096);
  Reg ro(out), ri(in);
  ro.mr.device = 0;
  EXPECT_EQ(nullptr, isend(out, ro, out.size(), 3, SRD_AGAIN)) << "no eager send from GPU memory";
  ASSERT_EQ(1u, g.sends.size()) << "asked for the clear-to-send";
  EXPECT_EQ(SRD_MSG_RTS, sent_type(0));
  deliver_and_complete_sends();
  Reg *regs[] = {&ri};
  int tag = 3;
  srd_req *rr = irecv(1, &in, regs, &tag);
  deliver_and_complete_sends();
  srd_req *sr = isend(out, ro, out.size(), 3);
  ASSERT_TRUE(sr);
  ASSERT_EQ(1u, g.writes.size()) << "written after the clear-to-send";
  deliver_write(0);
  complete_write(0);
  EXPECT_TRUE(rr->done && sr->done);
  EXPECT_EQ(0, memcmp(out.data(), in.data(), 100));
  srd_req_release(sr);
  srd_req_release(rr);
}

// What each rail registers: a GPU send buffer gets a local-only registration
// even where the provider takes host buffers without one (shm copied a GPU
// source with memcpy when given no descriptor), a host send buffer gets
// none there, and nothing a send buffer gets is reachable from outside.
// efa refuses writes to one peer while it backs off from that peer (receiver
// not ready) or waits for its handshake, and takes writes to the others: a
// refused peer's stripes wait, the other comms' go out.
TEST_F(Proto, APeerTheProviderRefusesStallsNoOtherPeersStripes) {
  auto [s2, r2] = another_pair(1);
  std::vector<char> out1 = pattern(16384, 1), out2 = pattern(16384, 2), in1(16384), in2(16384);
  Reg ro1(out1), ro2(out2), ri1(in1), ri2(in2);
  Reg *regs1[] = {&ri1}, *regs2[] = {&ri2};
  srd_req *rr1 = irecv(1, &in1, regs1, nullptr), *rr2 = irecv(1, &in2, regs2, nullptr, r2);
  deliver_and_complete_sends();
  g.provider_full = true;
  srd_req *sr1 = isend(out1, ro1, out1.size(), 0), *sr2 = nullptr;
  ASSERT_EQ(0, srd_proto_isend(s2, out2.data(), out2.size(), 0, &ro2.ref, &sr2));
  ASSERT_TRUE(sr1 && sr2);
  ASSERT_TRUE(g.writes.empty());
  g.provider_full = false;
  g.refused_peers = {1}; // s's peer, first on the pending list
  srd_proto_post_pending(&a);
  EXPECT_EQ(0u, writes_to(1));
  EXPECT_EQ(4u, writes_to(3)) << "the other peer's stripes waited behind a peer the provider refuses";
  g.refused_peers.clear();
  srd_proto_post_pending(&a);
  EXPECT_EQ(4u, writes_to(1)) << "the refused peer's stripes once it takes them again";
  while (!g.writes.empty()) {
    deliver_write(0);
    complete_write(0);
  }
  EXPECT_TRUE(rr1->done && rr2->done && sr1->done && sr2->done);
  EXPECT_EQ(out1, in1);
  EXPECT_EQ(out2, in2);
  EXPECT_EQ(nullptr, a.pending) << "nothing left waiting";
}

// The same for clear-to-sends: a receiver's CTS to a refused peer waits, the
// CTS to another peer goes.
TEST_F(Proto, APeerTheProviderRefusesStallsNoOtherPeersClearToSend) {
  auto [s2, r2] = another_pair(1);
  std::vector<char> in1(16384), in2(16384);
  Reg ri1(in1), ri2(in2);
  Reg *regs1[] = {&ri1}, *regs2[] = {&ri2};
  g.provider_full = true;
  srd_req *rr1 = irecv(1, &in1, regs1, nullptr), *rr2 = irecv(1, &in2, regs2, nullptr, r2);
  ASSERT_TRUE(rr1 && rr2);
  ASSERT_TRUE(g.sends.empty());
  g.provider_full = false;
  g.refused_peers = {0}; // r's peer, first on the pending list
  srd_proto_post_pending(&b);
  EXPECT_EQ(0u, sends_to(0));
  ASSERT_EQ(1u, sends_to(2)) << "the other peer's clear-to-send waited behind a peer the provider refuses";
  EXPECT_EQ(SRD_MSG_CTS, sent_type(0));
  g.refused_peers.clear();
  srd_proto_post_pending(&b);
  EXPECT_EQ(1u, sends_to(0));
  EXPECT_EQ(nullptr, b.pending);
  deliver_and_complete_sends();
}

// Passes over the pending comms are bounded when the provider refuses
// everything (it is full, not one peer), and fair when more peers refuse than
// one pass tries: the next pass goes on after the last comm refused.
TEST_F(Proto, PendingPassesAreBoundedAndNoCommWaitsForever) {
  constexpr int kPairs = SRD_PENDING_REFUSALS + 3;
  std::vector<srd_comm *> senders = {s}, receivers = {r};
  for (int k = 1; k < kPairs; k++) {
    auto [s2, r2] = another_pair(static_cast<fi_addr_t>(k));
    senders.push_back(s2);
    receivers.push_back(r2);
  }
  std::vector<std::vector<char>> out, in;
  for (int k = 0; k < kPairs; k++) out.push_back(pattern(16384, k)), in.emplace_back(16384);
  std::vector<Reg> ro, ri;
  ro.reserve(kPairs);
  ri.reserve(kPairs);
  for (int k = 0; k < kPairs; k++) ro.emplace_back(out[k]), ri.emplace_back(in[k]);
  for (int k = 0; k < kPairs; k++) {
    Reg *regs[] = {&ri[k]};
    irecv(1, &in[k], regs, nullptr, receivers[k]);
  }
  deliver_and_complete_sends();
  g.provider_full = true;
  for (int k = 0; k < kPairs; k++) {
    srd_req *req = nullptr;
    ASSERT_EQ(0, srd_proto_isend(senders[k], out[k].data(), out[k].size(), 0, &ro[k].ref, &req));
  }
  ASSERT_EQ(kPairs, a.npending);
  g.refusals = 0;
  srd_proto_post_pending(&a);
  EXPECT_EQ(SRD_PENDING_REFUSALS, g.refusals) << "a full provider was asked for every pending comm";
  g.provider_full = false;
  // The first SRD_PENDING_REFUSALS + 1 peers keep refusing: more than a pass tries.
  for (int k = 0; k <= SRD_PENDING_REFUSALS; k++) g.refused_peers.insert(1 + 2 * static_cast<fi_addr_t>(k));
  for (int pass = 0; pass < kPairs; pass++) srd_proto_post_pending(&a);
  for (int k = SRD_PENDING_REFUSALS + 1; k < kPairs; k++)
    EXPECT_EQ(4u, writes_to(1 + 2 * static_cast<fi_addr_t>(k))) << "comm " << k << " waited for ever";
  g.refused_peers.clear();
  srd_proto_post_pending(&a);
  srd_proto_post_pending(&a);
  EXPECT_EQ(static_cast<size_t>(4 * kPairs), g.writes.size());
  EXPECT_EQ(0, a.npending);
}

TEST(MrRailAccess, PerClassMemoryAndProvider) {
  for (bool mr_local : {false, true})
    for (bool flush : {false, true}) {
      SCOPED_TRACE(testing::Message() << "mr_local " << mr_local << " flush " << flush);
      EXPECT_EQ(uint64_t{FI_WRITE}, srd_mr_rail_access(SRD_MR_SEND, 0, mr_local, flush, false));
      EXPECT_EQ(uint64_t{FI_WRITE}, srd_mr_rail_access(SRD_MR_SEND, 3, mr_local, flush, false));
      EXPECT_EQ(mr_local ? uint64_t{FI_WRITE} : 0, srd_mr_rail_access(SRD_MR_SEND, -1, mr_local, flush, false));
      EXPECT_EQ(uint64_t{FI_REMOTE_WRITE}, srd_mr_rail_access(SRD_MR_RECV, -1, mr_local, flush, false));
      EXPECT_EQ(FI_REMOTE_WRITE | (flush ? FI_REMOTE_READ : 0),
                srd_mr_rail_access(SRD_MR_RECV, 0, mr_local, flush, false));
    }
}

// efa's "efa" fabric may emulate a write by the peer's RDMA read of our
// source (long-read protocol): a send registration there is readable too,
// and only a send registration we make at all; receive buffers never.
TEST(MrRailAccess, EmulatedWritesReadTheSource) {
  for (bool mr_local : {false, true})
    for (bool flush : {false, true}) {
      SCOPED_TRACE(testing::Message() << "mr_local " << mr_local << " flush " << flush);
      EXPECT_EQ(FI_WRITE | FI_REMOTE_READ, srd_mr_rail_access(SRD_MR_SEND, 0, mr_local, flush, true));
      EXPECT_EQ(mr_local ? FI_WRITE | FI_REMOTE_READ : 0, srd_mr_rail_access(SRD_MR_SEND, -1, mr_local, flush, true));
      EXPECT_EQ(uint64_t{FI_REMOTE_WRITE}, srd_mr_rail_access(SRD_MR_RECV, -1, mr_local, flush, true));
      EXPECT_EQ(FI_REMOTE_WRITE | (flush ? FI_REMOTE_READ : 0),
                srd_mr_rail_access(SRD_MR_RECV, 0, mr_local, flush, true));
    }
}

// Threads per NIC with NCCL_SRD_PROGRESS_THREADS unset: a process's share of
// the host's CPUs (never more than it may run on), less two (NCCL's proxy
// thread and the rank's own), at most SRD_AUTO_LANES_MAX.
TEST(LaneSizing, ShareOfTheCores) {
  EXPECT_EQ(4, srd_lanes_auto(16, 16, 2)) << "2 ranks on 16 cores: 8 each, capped";
  EXPECT_EQ(2, srd_lanes_auto(16, 16, 4)) << "4 ranks on 16 cores: 4 each";
  EXPECT_EQ(0, srd_lanes_auto(16, 16, 8)) << "8 ranks on 16 cores: 2 each, none left";
  EXPECT_EQ(0, srd_lanes_auto(2, 2, 1)) << "this build host";
  EXPECT_EQ(1, srd_lanes_auto(3, 64, 1)) << "pinned to 3 CPUs of 64";
  EXPECT_EQ(4, srd_lanes_auto(64, 64, 0)) << "an unknown count is one process";
  EXPECT_EQ(0, srd_lanes_auto(0, 0, 1)) << "nothing known: no threads";
  EXPECT_EQ(3, srd_lanes_auto(5, 0, 1)) << "online unknown: the CPUs it may use";
}

// The count of our processes on the host: live pids count, a dead one's file
// is removed, foreign names and other users' files are left alone, and a
// file of another pid namespace counts (its pid cannot be judged here).
TEST(LaneSizing, HostProcessCount) {
  char dir[] = "/tmp/srd-procs-XXXXXX";
  ASSERT_NE(nullptr, mkdtemp(dir));
  auto touch = [&](const std::string &name) {
    std::string path = std::string(dir) + "/" + name;
    FILE *f = fopen(path.c_str(), "w");
    ASSERT_NE(nullptr, f);
    fclose(f);
  };
  char ns[16];
  snprintf(ns, sizeof ns, "%08x.", srd_pid_ns_tag());
  std::string mine = std::string(SRD_HOST_PROCS_PREFIX) + std::to_string(getuid()) + "." + ns;
  std::string other_ns = std::string(SRD_HOST_PROCS_PREFIX) + std::to_string(getuid()) + "." +
                         (srd_pid_ns_tag() == 1 ? "00000002." : "00000001.");
  EXPECT_EQ(1, srd_host_procs_count_in(dir)) << "none: this process alone";
  touch(mine + std::to_string(getpid()));
  touch(mine + std::to_string(getppid()));
  pid_t dead = fork();
  if (dead == 0) _exit(0);
  ASSERT_GT(dead, 0);
  waitpid(dead, nullptr, 0);
  touch(mine + std::to_string(dead));
  touch(mine + "12x");
  touch(std::string(SRD_HOST_PROCS_PREFIX) + std::to_string(getuid() + 1) + "." + ns + std::to_string(getpid()));
  touch(other_ns + std::to_string(dead));
  EXPECT_EQ(3, srd_host_procs_count_in(dir)) << "this process, its parent, and one of another pid namespace";
  std::string gone = std::string(dir) + "/" + mine + std::to_string(dead);
  EXPECT_NE(0, access(gone.c_str(), F_OK)) << "the dead process's file stays";
  std::string foreign = std::string(dir) + "/" + mine + "12x";
  EXPECT_EQ(0, access(foreign.c_str(), F_OK)) << "a name not of our shape was removed";
  std::string cmd = std::string("rm -rf ") + dir;
  EXPECT_EQ(0, system(cmd.c_str()));
}

int forged_warnings = 0;
void count_warnings(ncclDebugLogLevel level, unsigned long, const char *, int, const char *, ...) {
  forged_warnings += level == NCCL_LOG_WARN;
}

std::vector<uint64_t> silence_warned_at;
uint64_t silence_now = 0;
void record_silence_warnings(ncclDebugLogLevel level, unsigned long, const char *, int, const char *fmt, ...) {
  if (level != NCCL_LOG_WARN) return;
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (strstr(line, "wait on peers that were silent")) silence_warned_at.push_back(silence_now);
}

// A waiting comm's silent peer is warned about after NCCL_SRD_SILENT_WARN_MS,
// then at gaps that double while the silence lasts, never more than 10 min
// apart (README): a slow peer stays visible in a long job's log without
// flooding it.
TEST_F(Proto, SilenceWarningsComeAtDoublingGapsOfAtMostTenMinutes) {
  const uint64_t warn_ms = static_cast<uint64_t>(srd_param_int(SRD_PARAM_SILENT_WARN_MS)), cap_ms = 600000;
  const uint64_t t = srd_now_ms() + 100000;
  s->last_heard_ms = s->last_ping_ms = t;
  g.provider_full = true; // probes refused: a busy peer, never failed
  silence_warned_at.clear();
  srd_log_set_logger(record_silence_warnings);
  for (silence_now = t; silence_now <= t + 3 * 3600 * 1000; silence_now += 1000) {
    s->last_wait_ms = silence_now; // an isend still waits for its clear-to-send
    srd_dev_probe_silent_peers(&a, silence_now);
  }
  srd_log_set_logger(nullptr);
  g.provider_full = false;
  EXPECT_EQ(0, s->result) << s->error;
  ASSERT_GE(silence_warned_at.size(), 3u);
  EXPECT_EQ(t + warn_ms, silence_warned_at[0]) << "the first warning after NCCL_SRD_SILENT_WARN_MS";
  uint64_t gap = warn_ms;
  for (size_t i = 1; i < silence_warned_at.size(); i++) {
    EXPECT_EQ(gap, silence_warned_at[i] - silence_warned_at[i - 1]) << "warning " << i;
    gap = std::min(2 * gap, cap_ms);
  }
  EXPECT_EQ(cap_ms, silence_warned_at.back() - silence_warned_at[silence_warned_at.size() - 2])
      << "three hours of silence reach the 10-minute gap";
}

// A peer inside the job forging one-sided traffic into an RMA comm: writes
// with random immediate data naming the comm's write id, and signals with
// random sequences, stripe counts, windows and offsets, through dispatch as
// the rails deliver them. Nothing outside the window changes, nothing
// crashes (the sanitizer build runs this too), the comm stays up, and the
// warnings go through the limiter.
TEST_F(Proto, ForgedRmaTrafficStaysInItsWindow) {
  constexpr size_t kWin = 4096, kGuard = 4096;
  std::vector<char> mem(kGuard + kWin + kGuard, 0x5a);
  char *base = mem.data() + kGuard;
  memset(base, 0, kWin);
  srd_comm *bs = srd_comm_alloc(&b, true), *ar = srd_comm_alloc(&a, false);
  ASSERT_TRUE(bs && ar);
  join(bs, ar, 0);
  join(ar, bs, 1);
  srd_rma_coll *coll = srd_rma_coll_new(&b, 2, 0);
  ASSERT_TRUE(coll);
  srd_rma_set_peer(coll, 1, bs, r);
  srd_rma_win *w = nullptr;
  srd_rma_remote mine{};
  ASSERT_EQ(SRD_OK, srd_rma_win_new(coll, base, kWin, -1, 0, -1, 0, &w, &mine));

  std::mt19937_64 rng(2312);
  uint64_t applied = 0;
  forged_warnings = 0;
  srd_log_set_logger(count_warnings);
  char buf[256];
  for (int i = 0; i < 200000; i++) {
    uint64_t x = rng();
    if (x & 1) {
      uint32_t imm = SRD_IMM_RMA_MARK | static_cast<uint32_t>(x >> 8 & 0xffff0000u) | r->write_id;
      srd_dispatch_handlers.on_remote_write(&b, &b.rails[0], imm, static_cast<size_t>(x >> 40 & 0xffff), kFromA);
      continue;
    }
    srd_msg_rma_signal m{};
    m.seq = coll->peers[1].next_apply + static_cast<uint32_t>(x >> 8 & 0xff) - 64;
    m.nstripes = static_cast<uint8_t>(1 + (x >> 16) % SRD_MAX_STRIPES);
    m.op = (x >> 20 & 1) ? SRD_RMA_SIGNAL_INC : SRD_RMA_SIGNAL_ADD;
    m.window = (x >> 21 & 7) == 0 ? static_cast<uint32_t>(x >> 32) : static_cast<uint32_t>(x >> 24 & 1);
    m.offset = (x >> 25 & 3) == 0 ? (x >> 8) : kWin - 16 + (x >> 27 & 31);
    m.value = 1;
    size_t n = srd_msg_encode_rma_signal(buf, sizeof buf, r->id, &m);
    ASSERT_GT(n, 0u);
    srd_msg_set_token(buf, r->token);
    srd_dispatch_handlers.on_message(&b, &b.rails[0], buf, n, kFromA);
  }
  srd_log_set_logger(nullptr);
  EXPECT_LT(forged_warnings, 100) << "200,000 forged operations, one warning each: no limiter";
  for (size_t k = 0; k < kWin; k += 8) {
    uint64_t v;
    memcpy(&v, base + k, 8);
    applied += v;
  }
  for (size_t k = 0; k < kGuard; k++) {
    ASSERT_EQ(0x5a, mem[k]) << "byte " << kGuard - k << " before the window changed";
    ASSERT_EQ(0x5a, mem[kGuard + kWin + k]) << "byte " << k << " after the window changed";
  }
  EXPECT_GT(applied, 0u) << "no forged signal completed an op: the fuzz reaches too little";
  EXPECT_EQ(0, r->result) << "forged one-sided traffic is dropped, it does not fail the comm";
  srd_rma_win_free(w);
  srd_rma_coll_detach(coll);
  srd_rma_coll_free(coll);
}

// A connecting comm sends its hello again while unanswered (a listener whose
// places are full drops hellos). The copies, in any order, make no second
// comm, whether the first still waits, is being answered or was accepted; a
// copy whose first was dropped is served.
// A listener of B and a hello for it (from process 42, token 0x1234) in m.
class Hello : public Proto {
 protected:
  uint8_t name[16] = {1, 2, 3};
  srd_msg m{};
  srd_listener *l = nullptr;
  char handle[SRD_HANDLE_SIZE] = {};
  void SetUp() override {
    Proto::SetUp();
    b.rails[0].ep_name_len = 16;
    b.listener_key = 0x5eedf00d; // cookies are never 0 in a valid handle
    snprintf(b.transport, sizeof b.transport, "tcp");
    ASSERT_EQ(SRD_OK, srd_listen(&b, handle, &l));
    m.type = SRD_MSG_HELLO;
    m.u.peer = {cookie_of(handle), 0x1234, l->id, 0x10005, 42, 0, 1, 1, 16, 0, name};
  }
  static uint64_t cookie_of(const char *handle) {
    srd_handle h{};
    const char *why = nullptr;
    EXPECT_EQ(0, srd_handle_decode(handle, &h, &why)) << why;
    return h.cookie;
  }
  void TearDown() override {
    srd_close_listen(l);
    srd_listener_pool_free(&b);
    Proto::TearDown();
  }
};

// An answer whose addresses the provider refuses fails the connecting comm;
// a second answer for it is dropped, not taken over the first's peer state
// (issue 60: the second srd_comm_set_peer leaked the first's).
TEST_F(Hello, ASecondAnswerAfterARefusedOneIsDropped) {
  srd_comm *c = srd_comm_alloc(&a, true);
  ASSERT_TRUE(c);
  c->cookie = 0x77;
  a.rails[0].ep_name_len = 16;
  srd_msg ans{};
  ans.type = SRD_MSG_ACCEPT;
  ans.dst_comm = c->id;
  ans.token = c->token;
  ans.u.peer = {0x77, 0x99, 0, 0x10009, 43, 5, 1, 1, 16, 0, name};
  g.av_refused = -FI_EINVAL;
  srd_handshake_on_message(&a, &ans);
  g.av_refused = 0;
  ASSERT_NE(0, c->result) << "a refused address did not fail the connect";
  const fi_addr_t *first = c->inserted;
  srd_handshake_on_message(&a, &ans);
  EXPECT_EQ(first, c->inserted) << "the second answer replaced the first's peer state";
  EXPECT_FALSE(c->ready);
  srd_comm_close(c);
}

TEST_F(Hello, HelloCopiesMakeNoSecondComm) {
  srd_handshake_on_message(&b, &m);
  ASSERT_EQ(1, l->nhellos);
  srd_handshake_on_message(&b, &m);
  EXPECT_EQ(1, l->nhellos) << "a copy of a waiting hello took a place";
  srd_comm *c = nullptr, *c2 = nullptr;
  ASSERT_EQ(SRD_AGAIN, srd_accept(l, &c)); // the answer posted
  srd_handshake_on_message(&b, &m);
  EXPECT_EQ(0, l->nhellos) << "a copy of a hello being answered took a place: two answers race to one comm";
  EXPECT_EQ(1, l->nanswering);
  complete_send(0);
  ASSERT_EQ(SRD_OK, srd_accept(l, &c));
  ASSERT_TRUE(c);
  srd_handshake_on_message(&b, &m);
  EXPECT_EQ(0, l->nhellos) << "a copy of an accepted hello took a place";
  EXPECT_EQ(SRD_AGAIN, srd_accept(l, &c2));
  EXPECT_FALSE(c2) << "one connect, two comms";
  m.u.peer.token = 0x5678; // another connect whose first hello was dropped
  srd_handshake_on_message(&b, &m);
  EXPECT_EQ(1, l->nhellos) << "a resent hello whose first never came is served";
  srd_comm_close(c);
}

// The connecting side: a hello the listener dropped (its places full of a
// flood's hellos) goes again once the gap has passed, and the copy is served.
// Without it the connect waits for NCCL_SRD_CONNECT_TIMEOUT_MS and fails.
TEST_F(Hello, DroppedHelloIsSentAgainAndServed) {
  a.rails[0].ep_name_len = 16;
  snprintf(a.transport, sizeof a.transport, "tcp");
  srd_comm *c = nullptr, *bc = nullptr;
  ASSERT_EQ(SRD_AGAIN, srd_connect(&a, handle, &c));
  ASSERT_EQ(1u, g.sends.size());
  ASSERT_EQ(SRD_MSG_HELLO, sent_type(0));
  complete_send(0); // delivered, and dropped by a listener with no place
  usleep(300 * 1000); // past the first gap (250 ms)
  ASSERT_EQ(SRD_AGAIN, srd_connect(&a, handle, &c));
  ASSERT_EQ(1u, g.sends.size()) << "a hello the listener dropped was never sent again";
  ASSERT_EQ(SRD_MSG_HELLO, sent_type(0));
  srd_dispatch_handlers.on_message(&b, &b.rails[0], g.sends[0].buf->data, g.sends[0].len, 0);
  complete_send(0);
  ASSERT_EQ(1, l->nhellos);
  ASSERT_EQ(SRD_AGAIN, srd_accept(l, &bc)); // the answer posted, to a
  ASSERT_EQ(1u, g.sends.size());
  deliver_send(0);
  complete_send(0);
  ASSERT_EQ(SRD_OK, srd_accept(l, &bc));
  ASSERT_TRUE(bc);
  ASSERT_EQ(SRD_OK, srd_connect(&a, handle, &c));
  ASSERT_TRUE(c);
  EXPECT_EQ(bc->id, c->peer_id);
  srd_comm_close(bc);
  srd_comm_close(c);
}

// A copy of a hello whose first was accepted can come after the listener
// closed (a loaded host, an unordered fabric): dropped without a warning,
// which users would read as a fault. A hello for no listener of ours warns.
TEST_F(Hello, HelloForAClosedListenerIsNoWarning) {
  srd_listener *closed = nullptr;
  char closed_handle[SRD_HANDLE_SIZE] = {};
  ASSERT_EQ(SRD_OK, srd_listen(&b, closed_handle, &closed));
  m.u.peer.listener_id = closed->id;
  m.u.peer.cookie = cookie_of(closed_handle);
  srd_close_listen(closed);
  forged_warnings = 0;
  srd_log_set_logger(count_warnings);
  srd_handshake_on_message(&b, &m);
  EXPECT_EQ(0, forged_warnings) << "a late copy of our own hello warned about";
  m.u.peer.listener_id += 1000; // never one of ours
  srd_handshake_on_message(&b, &m);
  srd_log_set_logger(nullptr);
  EXPECT_EQ(1, forged_warnings) << "a hello for no listener passed silently";
  EXPECT_EQ(0, l->nhellos);
}

// accept() hands a comm out once its answer is delivered, not posted: efa
// takes a send to any address and fails it later, and tcp's address may be a
// closed port; a failed answer is dropped and holds no place.
TEST_F(Hello, AcceptWaitsForItsAnswer) {
  srd_handshake_on_message(&b, &m);
  srd_comm *c = nullptr;
  ASSERT_EQ(SRD_AGAIN, srd_accept(l, &c));
  ASSERT_EQ(1u, g.sends.size());
  EXPECT_EQ(SRD_MSG_ACCEPT, sent_type(0));
  EXPECT_EQ(SRD_AGAIN, srd_accept(l, &c));
  EXPECT_FALSE(c) << "a comm whose answer is only posted was handed out";
  EXPECT_EQ(1u, g.sends.size()) << "the answer was posted twice";
  complete_send(0, -FI_EHOSTUNREACH);
  EXPECT_EQ(SRD_AGAIN, srd_accept(l, &c));
  EXPECT_FALSE(c) << "a comm whose answer failed was handed out";
  EXPECT_EQ(0, l->nanswering) << "a failed answer holds its place";
  m.u.peer.token = 0x5678;
  srd_handshake_on_message(&b, &m);
  ASSERT_EQ(SRD_AGAIN, srd_accept(l, &c));
  complete_send(0);
  ASSERT_EQ(SRD_OK, srd_accept(l, &c));
  ASSERT_TRUE(c);
  EXPECT_EQ(0x5678u, c->peer_token);
  srd_comm_close(c);
}

// One-sided RMA into GPU memory (src/proto/rma_gpu.c) against the fake CUDA
// driver: B (rank 0) owns GPU windows that rank 1 writes into. "GPU memory"
// is host memory the fake driver calls device 0's; its stream runs each
// operation at once and records it, so the tests see what was queued, in
// which order, and under which context.
class RmaGpu : public Proto {
 protected:
  static constexpr size_t kData = 4096, kSig = 64;
  std::vector<char> gpu = std::vector<char>(kData + kSig, 0);
  char *data = gpu.data(), *sigs = gpu.data() + kData;
  fake::Driver *cuda = nullptr;
  srd_comm *bs = nullptr;
  srd_rma_coll *coll = nullptr;
  srd_rma_win *dwin = nullptr, *swin = nullptr;

  void SetUp() override {
    Proto::SetUp();
    cuda = new fake::Driver();
    fake::state.devices = 1;
    fake::state.mem_base[0] = reinterpret_cast<uintptr_t>(gpu.data());
    fake::state.mem_len[0] = gpu.size();
    coll = rma_group(&bs);
    ASSERT_TRUE(coll);
  }
  void TearDown() override {
    for (srd_rma_win *w : {dwin, swin, swin1})
      if (w) srd_rma_win_free(w);
    srd_rma_coll_detach(coll);
    srd_rma_coll_free(coll);
    EXPECT_EQ(0, fake::state.streams_open) << "the group's stream outlived it";
    EXPECT_EQ(0, fake::state.events_open) << "events leaked";
    for (int k = 0; k < 8; k++) EXPECT_EQ(0, fake::state.retained[k]) << "GPU " << k << "'s primary context stays retained";
    EXPECT_EQ(nullptr, fake::state.current) << "the caller's (no) context was not restored";
    delete cuda;
    Proto::TearDown();
  }
  void windows(unsigned sig_flags) {
    srd_rma_remote mine{};
    ASSERT_EQ(SRD_OK, srd_rma_win_new(coll, data, kData, 0, 0, -1, 0, &dwin, &mine));
    ASSERT_EQ(SRD_OK, srd_rma_win_new(coll, sigs, kSig, 0, sig_flags, -1, 0, &swin, &mine));
    ASSERT_EQ(0, g.reg_cuda_dev) << "registered as host memory";
    fake::state.calls.clear();
  }
  // Rank 1's op seq: stripe i of n landed.
  void stripe(uint32_t seq, uint32_t i, uint32_t n, bool signal) {
    srd_rma_on_write(r, srd_rma_imm_pack({r->write_id, seq, signal, n, i}), 64);
  }
  void signal(uint32_t seq, uint8_t n, uint8_t op, uint64_t value, uint64_t offset = 8) {
    signal_into(swin, seq, n, op, value, offset);
  }
  void signal_into(const srd_rma_win *w, uint32_t seq, uint8_t n, uint8_t op, uint64_t value, uint64_t offset) {
    srd_msg_rma_signal m{};
    m.seq = seq;
    m.nstripes = n;
    m.op = op;
    m.window = w->index;
    m.offset = offset;
    m.value = value;
    srd_rma_on_signal(r, &m);
  }
  // A second GPU in the process (before the first window: the driver, loaded
  // then, counts the GPUs once), with a signal window of its own.
  std::vector<char> gpu1 = std::vector<char>(64, 0);
  srd_rma_win *swin1 = nullptr;
  void second_gpu() {
    fake::state.devices = 2;
    fake::state.mem_base[1] = reinterpret_cast<uintptr_t>(gpu1.data());
    fake::state.mem_len[1] = gpu1.size();
  }
  void second_gpu_window() {
    srd_rma_remote mine{};
    ASSERT_EQ(SRD_OK, srd_rma_win_new(coll, gpu1.data(), gpu1.size(), 1, SRD_RMA_WIN_NEVER_RESET, -1, 0, &swin1, &mine));
    EXPECT_EQ(1, g.reg_cuda_dev) << "registered with the wrong GPU";
    fake::state.calls.clear();
  }
  // The values written to signal word offset, in order.
  std::vector<uint64_t> written(uint64_t offset = 8) const {
    std::vector<uint64_t> v;
    for (const auto &c : fake::state.calls)
      if (c.kind == fake::State::Call::kWrite && c.addr == reinterpret_cast<uintptr_t>(sigs + offset))
        v.push_back(c.value);
    return v;
  }
  size_t count(fake::State::Call::Kind k) const {
    size_t n = 0;
    for (const auto &c : fake::state.calls) n += c.kind == k;
    return n;
  }
};

// The signal waits for every stripe of its op and every earlier op; then one
// stream write of the shadow (1, 2, 3 for INC; sums for ADD), never a read,
// made under the window device's primary context.
TEST_F(RmaGpu, SignalFollowsTheDataAsTheShadowOfANeverResetWord) {
  windows(SRD_RMA_WIN_NEVER_RESET | SRD_RMA_WIN_FORCE_SO);
  signal(0, 2, SRD_RMA_SIGNAL_INC, 0);
  stripe(0, 0, 2, true);
  EXPECT_TRUE(written().empty()) << "signal written before its second stripe landed";
  stripe(0, 1, 2, true);
  EXPECT_EQ(std::vector<uint64_t>({1}), written());
  // Op 2 complete before op 1: its signal waits for op 1's data.
  stripe(2, 0, 1, true);
  signal(2, 1, SRD_RMA_SIGNAL_ADD, 5);
  EXPECT_EQ(std::vector<uint64_t>({1}), written()) << "op 2's signal overtook op 1";
  signal(1, 1, SRD_RMA_SIGNAL_INC, 0);
  EXPECT_EQ(std::vector<uint64_t>({1}), written()) << "op 1's signal overtook its data";
  stripe(1, 0, 1, true);
  EXPECT_EQ(std::vector<uint64_t>({1, 2, 7}), written());
  signal(3, 0, SRD_RMA_SIGNAL_INC, 0); // a signal alone
  EXPECT_EQ(std::vector<uint64_t>({1, 2, 7, 8}), written());
  EXPECT_EQ(0u, count(fake::State::Call::kRead)) << "a NEVER_RESET word is never read back";
  for (const auto &c : fake::state.calls) EXPECT_EQ(fake::primary(0), c.ctx) << "driver call without the context";
  EXPECT_EQ(unsigned{SRD_CU_STREAM_NON_BLOCKING}, fake::state.stream_flags);
  EXPECT_EQ(0, coll->result);
}

// Without NEVER_RESET the GPU may have reset the word: read it back on our
// stream, wait for our stream only, add, write.
TEST_F(RmaGpu, SignalIntoAResettableWordReadsItBackFirst) {
  windows(0);
  uint64_t reset = 40;
  memcpy(sigs + 16, &reset, 8);
  stripe(0, 0, 1, true);
  signal(0, 1, SRD_RMA_SIGNAL_ADD, 2, 16);
  ASSERT_EQ(3u, fake::state.calls.size());
  EXPECT_EQ(fake::State::Call::kRead, fake::state.calls[0].kind);
  EXPECT_EQ(fake::State::Call::kSync, fake::state.calls[1].kind);
  EXPECT_EQ(fake::State::Call::kWrite, fake::state.calls[2].kind);
  EXPECT_EQ(std::vector<uint64_t>({42}), written(16));
  for (const auto &c : fake::state.calls) EXPECT_EQ(fake::state.calls[0].stream, c.stream) << "another stream";
}

// A put with a signal to ourselves: the copy, then the signal, on one
// stream; done only when the event after them is.
TEST_F(RmaGpu, SelfPutCopiesThenSignalsThenWaitsForItsEvent) {
  windows(SRD_RMA_WIN_NEVER_RESET);
  std::vector<char> host(256);
  for (size_t i = 0; i < host.size(); i++) host[i] = static_cast<char>(i * 7 + 1);
  srd_rma_win *hwin = nullptr;
  srd_rma_remote mine{};
  ASSERT_EQ(SRD_OK, srd_rma_win_new(coll, host.data(), host.size(), -1, 0, -1, 0, &hwin, &mine));
  fake::state.calls.clear();
  srd_msg_rma_signal sig{};
  sig.window = swin->index;
  sig.offset = 24;
  sig.op = SRD_RMA_SIGNAL_INC;
  fake::state.not_ready = 2;
  srd_rma_op *op = nullptr;
  {
    Locked held(b);
    ASSERT_EQ(SRD_OK, srd_rma_put(coll, 0, hwin, 0, dwin, 512, host.size(), &sig, &op));
    ASSERT_TRUE(op);
    ASSERT_EQ(3u, fake::state.calls.size());
    EXPECT_EQ(fake::State::Call::kCopy, fake::state.calls[0].kind);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(data + 512), fake::state.calls[0].addr);
    EXPECT_EQ(fake::State::Call::kWrite, fake::state.calls[1].kind);
    EXPECT_EQ(fake::State::Call::kMark, fake::state.calls[2].kind);
    EXPECT_EQ(std::vector<uint64_t>({1}), written(24));
    EXPECT_FALSE(srd_rma_op_test(op)) << "done before its event";
    EXPECT_FALSE(srd_rma_op_test(op));
    EXPECT_TRUE(srd_rma_op_test(op));
    EXPECT_EQ(SRD_OK, op->result);
    srd_rma_op_release(op);
    EXPECT_EQ(0, memcmp(host.data(), data + 512, host.size()));
    // A get from our own GPU window into host memory: a copy and its event.
    fake::state.calls.clear();
    ASSERT_EQ(SRD_OK, srd_rma_get(coll, 0, hwin, 0, dwin, 0, 128, &op));
    ASSERT_EQ(2u, fake::state.calls.size());
    EXPECT_EQ(fake::State::Call::kCopy, fake::state.calls[0].kind);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(host.data()), fake::state.calls[0].addr);
    EXPECT_TRUE(srd_rma_op_test(op));
    srd_rma_op_release(op);
  }
  srd_rma_win_free(hwin);
}

// A self put into our GPU window with its signal on a host word: the copy
// must have run before the CPU adds to the word, so the stream is waited for
// first; nothing is left on the stream, so the op is done at once.
TEST_F(RmaGpu, SelfPutWithAHostSignalWaitsForTheCopyFirst) {
  windows(0);
  std::vector<char> host(512, 3);
  std::vector<uint64_t> words(4, 0);
  srd_rma_win *hwin = nullptr, *hsig = nullptr;
  srd_rma_remote mine{};
  ASSERT_EQ(SRD_OK, srd_rma_win_new(coll, host.data(), host.size(), -1, 0, -1, 0, &hwin, &mine));
  ASSERT_EQ(SRD_OK, srd_rma_win_new(coll, words.data(), 32, -1, 0, -1, 0, &hsig, &mine));
  fake::state.calls.clear();
  srd_msg_rma_signal sig{};
  sig.window = hsig->index;
  sig.offset = 8;
  sig.op = SRD_RMA_SIGNAL_ADD;
  sig.value = 9;
  srd_rma_op *op = nullptr;
  {
    Locked held(b);
    ASSERT_EQ(SRD_OK, srd_rma_put(coll, 0, hwin, 0, dwin, 0, host.size(), &sig, &op));
    ASSERT_EQ(2u, fake::state.calls.size());
    EXPECT_EQ(fake::State::Call::kCopy, fake::state.calls[0].kind);
    EXPECT_EQ(fake::State::Call::kSync, fake::state.calls[1].kind) << "host signal before the copy ran";
    EXPECT_EQ(9u, words[1]);
    EXPECT_TRUE(srd_rma_op_test(op));
    srd_rma_op_release(op);
  }
  srd_rma_win_free(hsig);
  srd_rma_win_free(hwin);
}

// A signal the driver refuses fails the group (queryLastError), logged; the
// ops after it are not applied out of order.
TEST_F(RmaGpu, RefusedSignalWriteFailsTheGroup) {
  windows(SRD_RMA_WIN_NEVER_RESET);
  fake::state.write_result = SRD_CUDA_ERROR_INVALID_VALUE;
  forged_warnings = 0;
  srd_log_set_logger(count_warnings);
  signal(0, 0, SRD_RMA_SIGNAL_INC, 0);
  srd_log_set_logger(nullptr);
  EXPECT_EQ(SRD_ERR_SYSTEM, coll->result);
  EXPECT_EQ(1, forged_warnings) << "no warning for the refused signal";
}

// Deregistering waits for the window's stream; the group's close closes it.
// Several GPUs in one process: a signal into a window of GPU 1 goes on a
// stream of GPU 1, made and written under GPU 1's primary context; GPU 0's
// words keep GPU 0's stream. Each GPU's context is released at the end.
TEST_F(RmaGpu, WindowsOnTwoGpusTakeEachGpusStreamAndContext) {
  second_gpu();
  windows(SRD_RMA_WIN_NEVER_RESET);
  second_gpu_window();
  stripe(0, 0, 1, true);
  signal_into(swin1, 0, 1, SRD_RMA_SIGNAL_INC, 0, 8);
  stripe(1, 0, 1, true);
  signal_into(swin, 1, 1, SRD_RMA_SIGNAL_INC, 0, 8);
  ASSERT_EQ(2u, count(fake::State::Call::kWrite));
  const auto &w1 = fake::state.calls[0], &w0 = fake::state.calls[1];
  EXPECT_EQ(reinterpret_cast<uintptr_t>(gpu1.data() + 8), w1.addr);
  EXPECT_EQ(fake::primary(1), w1.ctx) << "GPU 1's word written without GPU 1's context";
  EXPECT_EQ(reinterpret_cast<uintptr_t>(sigs + 8), w0.addr);
  EXPECT_EQ(fake::primary(0), w0.ctx) << "GPU 0's word written without GPU 0's context";
  EXPECT_NE(w0.stream, w1.stream) << "one stream for two GPUs";
  EXPECT_EQ(0, coll->result);
}

TEST_F(RmaGpu, DeregisterWaitsForTheStream) {
  windows(0);
  srd_rma_win_free(dwin);
  dwin = nullptr;
  ASSERT_EQ(1u, fake::state.calls.size());
  EXPECT_EQ(fake::State::Call::kSync, fake::state.calls[0].kind);
}

// Where a NIC writes GPU memory (efa: gdr.nic_writes) it writes signal words
// too: a loopback RDMA write of the word's new value from a registered host
// slot, never a stream operation (which could be scheduled behind the
// application's stream wait for that very signal). B's device here is such a
// device; flush says whether the GPU needs GPUDirect writes flushed.
class RmaNic : public RmaGpu {
 protected:
  void SetUp() override {
    RmaGpu::SetUp();
    b.gdr.nic_writes = true;
    b.gdr.flush = true;
  }
  // Complete loopback op i as the NIC would: place the bytes, then report.
  void complete_loop(size_t i = 0, int err = 0) {
    Loop l = g.loops[i];
    g.loops.erase(g.loops.begin() + static_cast<long>(i));
    if (!err && l.write) memcpy(reinterpret_cast<void *>(static_cast<uintptr_t>(l.raddr)), l.local, l.len);
    if (!err && !l.write) memcpy(l.local, reinterpret_cast<void *>(static_cast<uintptr_t>(l.raddr)), l.len);
    l.op->done(l.op, err, nullptr);
  }
  uint64_t loop_value(size_t i = 0) const {
    uint64_t v = 0;
    memcpy(&v, g.loops[i].local, 8);
    return v;
  }
  uint64_t word(size_t offset) const {
    uint64_t v;
    memcpy(&v, sigs + offset, 8);
    return v;
  }
};

// Each signal waits for its op's and every earlier op's stripes, then the
// driver's flush (under the window GPU's context), then one loopback write;
// one in flight at a time, so the word takes its values in order; signals
// that come meanwhile add to the next write.
TEST_F(RmaNic, SignalIsALoopbackWriteAfterTheFlushOneInFlight) {
  windows(SRD_RMA_WIN_NEVER_RESET | SRD_RMA_WIN_FORCE_SO);
  ASSERT_TRUE(swin->nic_signals && dwin->nic_signals);
  signal(0, 2, SRD_RMA_SIGNAL_INC, 0);
  stripe(0, 0, 2, true);
  EXPECT_TRUE(g.loops.empty()) << "signal written before its second stripe landed";
  stripe(0, 1, 2, true);
  ASSERT_EQ(1u, g.loops.size());
  EXPECT_TRUE(g.loops[0].write);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(sigs + 8), g.loops[0].raddr);
  EXPECT_EQ(b.rail_ops->mr_key(swin->mrs->mr[0]), g.loops[0].key) << "not the signal window's key on rail 0";
  EXPECT_EQ(&b.rails[0], g.loops[0].rail);
  EXPECT_EQ(1u, loop_value());
  ASSERT_EQ(1u, count(fake::State::Call::kFlush)) << "the write went without the flush before it";
  EXPECT_EQ(fake::primary(0), fake::state.calls[0].ctx) << "flushed without the window GPU's context";
  EXPECT_EQ(SRD_CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER, fake::state.flush_scope);
  EXPECT_EQ(0u, count(fake::State::Call::kWrite)) << "a stream wrote the signal";
  // Ops 1 and 2 land while the first write is in flight.
  stripe(1, 0, 1, true);
  signal(1, 1, SRD_RMA_SIGNAL_INC, 0);
  stripe(2, 0, 1, true);
  signal(2, 1, SRD_RMA_SIGNAL_ADD, 5);
  signal(3, 0, SRD_RMA_SIGNAL_ADD, 100, 16); // another word, later
  EXPECT_EQ(1u, g.loops.size()) << "a second loopback write while the first is in flight";
  complete_loop();
  EXPECT_EQ(1u, word(8));
  ASSERT_EQ(1u, g.loops.size());
  EXPECT_EQ(7u, loop_value()) << "ops 1 and 2 ride one write of the word's value";
  EXPECT_EQ(2u, count(fake::State::Call::kFlush));
  complete_loop();
  ASSERT_EQ(1u, g.loops.size());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(sigs + 16), g.loops[0].raddr);
  EXPECT_EQ(100u, loop_value());
  complete_loop();
  EXPECT_TRUE(g.loops.empty());
  EXPECT_EQ(7u, word(8));
  EXPECT_EQ(100u, word(16));
  EXPECT_EQ(0, coll->result);
}

// Ops to ourselves on windows the NIC writes go by loopback RDMA through the
// signal queue, never a stream: the data, then its signal. A later op to
// ourselves on host memory waits its turn: its signal never shows before an
// earlier one's.
TEST_F(RmaNic, SelfOpsAreLoopbackRdmaInOrder) {
  windows(SRD_RMA_WIN_NEVER_RESET);
  std::vector<char> host(256, 0);
  srd_rma_remote mine{};
  srd_rma_win *hwin = nullptr;
  ASSERT_EQ(SRD_OK, srd_rma_win_new(coll, host.data(), host.size(), -1, 0, -1, 0, &hwin, &mine));
  ASSERT_FALSE(hwin->nic_signals);
  memset(data, 0x5a, 1024);
  srd_msg_rma_signal sig{};
  sig.window = swin->index;
  sig.offset = 8;
  sig.op = SRD_RMA_SIGNAL_INC;
  srd_rma_op *op1 = nullptr, *op2 = nullptr, *op3 = nullptr;
  ASSERT_EQ(SRD_OK, srd_rma_put(coll, 0, dwin, 0, dwin, 2048, 1024, &sig, &op1));
  ASSERT_EQ(1u, g.loops.size());
  EXPECT_TRUE(g.loops[0].write);
  EXPECT_EQ(1024u, g.loops[0].len);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(data + 2048), g.loops[0].raddr);
  EXPECT_EQ(b.rail_ops->mr_key(dwin->mrs->mr[0]), g.loops[0].key);
  EXPECT_EQ(0u, count(fake::State::Call::kCopy)) << "a stream copied the data";
  EXPECT_FALSE(srd_rma_op_test(op1)) << "done before its data was placed";
  memcpy(host.data(), "hostdata", 8);
  srd_msg_rma_signal hsig{};
  hsig.window = hwin->index;
  hsig.offset = 64;
  hsig.op = SRD_RMA_SIGNAL_ADD;
  hsig.value = 3;
  ASSERT_EQ(SRD_OK, srd_rma_put(coll, 0, hwin, 0, hwin, 128, 8, &hsig, &op2));
  EXPECT_EQ(0, host[128]) << "a put to ourselves overtook an earlier one";
  complete_loop(); // op1's data
  EXPECT_TRUE(srd_rma_op_test(op1));
  EXPECT_EQ(0x5a, data[2048 + 1023]);
  EXPECT_EQ(0u, word(8)) << "the signal before its data";
  ASSERT_EQ(1u, g.loops.size());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(host.data() + 128), g.loops[0].raddr) << "op2's data next";
  complete_loop();
  EXPECT_TRUE(srd_rma_op_test(op2));
  EXPECT_EQ(0, memcmp(host.data() + 128, "hostdata", 8));
  uint64_t hword = 0;
  memcpy(&hword, host.data() + 64, 8);
  EXPECT_EQ(0u, hword) << "op2's signal shows before op1's";
  ASSERT_EQ(1u, g.loops.size());
  EXPECT_EQ(1u, loop_value()) << "op1's signal";
  complete_loop();
  EXPECT_EQ(1u, word(8));
  memcpy(&hword, host.data() + 64, 8);
  EXPECT_EQ(3u, hword) << "op2's signal, in turn";
  EXPECT_TRUE(g.loops.empty());
  // A get from ourselves: a loopback read into the local window.
  ASSERT_EQ(SRD_OK, srd_rma_get(coll, 0, dwin, 0, dwin, 2048, 16, &op3));
  ASSERT_EQ(1u, g.loops.size());
  EXPECT_FALSE(g.loops[0].write);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(data + 2048), g.loops[0].raddr);
  EXPECT_EQ(static_cast<void *>(data), g.loops[0].local);
  complete_loop();
  EXPECT_TRUE(srd_rma_op_test(op3));
  EXPECT_EQ(0u, count(fake::State::Call::kCopy));
  EXPECT_EQ(0, coll->result);
  for (srd_rma_op *op : {op1, op2, op3}) srd_rma_op_release(op);
  srd_rma_win_free(hwin);
}

// A loopback op to ourselves that fails fails its op and the group, naming
// the provider's error; ops to ourselves queued behind it never run and end
// with the group's error, not never.
TEST_F(RmaNic, FailedSelfOpEndsTheQueuedOnes) {
  windows(SRD_RMA_WIN_NEVER_RESET);
  srd_rma_op *op1 = nullptr, *op2 = nullptr;
  ASSERT_EQ(SRD_OK, srd_rma_put(coll, 0, dwin, 0, dwin, 2048, 1024, nullptr, &op1));
  ASSERT_EQ(SRD_OK, srd_rma_put(coll, 0, dwin, 1024, dwin, 3072, 1024, nullptr, &op2));
  ASSERT_EQ(1u, g.loops.size()) << "one loopback op in flight";
  complete_loop(0, -FI_EIO);
  EXPECT_TRUE(srd_rma_op_test(op1));
  EXPECT_EQ(SRD_ERR_SYSTEM, op1->result);
  EXPECT_EQ(SRD_ERR_SYSTEM, coll->result);
  EXPECT_TRUE(g.loops.empty()) << "a queued op ran after the group failed";
  EXPECT_TRUE(srd_rma_op_test(op2)) << "a queued op to ourselves of a failed group never ends";
  EXPECT_EQ(SRD_ERR_SYSTEM, op2->result);
  srd_rma_op_release(op1);
  srd_rma_op_release(op2);
}

// A GPU that orders GPUDirect writes for its owner needs no flush.
// Several GPUs in one process, the NIC writing: the flush before a signal
// into GPU 1's window is made under GPU 1's context, and the loopback write
// goes to GPU 1's word with that window's key.
TEST_F(RmaNic, FlushBeforeASignalIsUnderItsWindowsGpu) {
  second_gpu();
  windows(SRD_RMA_WIN_NEVER_RESET);
  second_gpu_window();
  ASSERT_TRUE(swin1->nic_signals);
  stripe(0, 0, 1, true);
  signal_into(swin1, 0, 1, SRD_RMA_SIGNAL_INC, 0, 16);
  ASSERT_EQ(1u, g.loops.size());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(gpu1.data() + 16), g.loops[0].raddr);
  EXPECT_EQ(b.rail_ops->mr_key(swin1->mrs->mr[0]), g.loops[0].key) << "not GPU 1's window's key";
  ASSERT_EQ(1u, count(fake::State::Call::kFlush));
  EXPECT_EQ(fake::primary(1), fake::state.calls[0].ctx) << "flushed under another GPU's context";
  complete_loop();
  EXPECT_EQ(1u, *reinterpret_cast<uint64_t *>(gpu1.data() + 16));
  EXPECT_EQ(0, coll->result);
}

TEST_F(RmaNic, NoFlushWhereTheGpuOrdersTheWrites) {
  b.gdr.flush = false;
  windows(SRD_RMA_WIN_NEVER_RESET);
  stripe(0, 0, 1, true);
  signal(0, 1, SRD_RMA_SIGNAL_INC, 0);
  ASSERT_EQ(1u, g.loops.size());
  EXPECT_EQ(0u, count(fake::State::Call::kFlush));
  complete_loop();
  EXPECT_EQ(1u, word(8));
}

// A resettable word is read back (by the NIC) first; adds that come while
// it is read ride the next write.
TEST_F(RmaNic, ResettableWordIsReadBackThenWritten) {
  windows(0);
  uint64_t reset = 40;
  memcpy(sigs + 16, &reset, 8);
  stripe(0, 0, 1, true);
  signal(0, 1, SRD_RMA_SIGNAL_ADD, 2, 16);
  ASSERT_EQ(1u, g.loops.size());
  EXPECT_FALSE(g.loops[0].write);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(sigs + 16), g.loops[0].raddr);
  signal(1, 0, SRD_RMA_SIGNAL_INC, 0, 16);
  complete_loop();
  ASSERT_EQ(1u, g.loops.size());
  EXPECT_TRUE(g.loops[0].write);
  EXPECT_EQ(42u, loop_value());
  complete_loop();
  ASSERT_EQ(1u, g.loops.size()) << "the signal that came during the read was lost";
  EXPECT_FALSE(g.loops[0].write);
  complete_loop();
  EXPECT_EQ(43u, loop_value());
  complete_loop();
  EXPECT_EQ(43u, word(16));
}

// The provider full: the write waits for progress; a failed one fails the
// group with the rail named.
TEST_F(RmaNic, RefusedWriteWaitsFailedWriteFailsTheGroup) {
  windows(SRD_RMA_WIN_NEVER_RESET);
  g.loop_refused = -FI_EAGAIN;
  stripe(0, 0, 1, true);
  signal(0, 1, SRD_RMA_SIGNAL_INC, 0);
  EXPECT_TRUE(g.loops.empty());
  EXPECT_EQ(0, coll->result) << "backpressure failed the group";
  g.loop_refused = 0;
  {
    Locked held(b);
    srd_rma_progress(coll);
  }
  ASSERT_EQ(1u, g.loops.size()) << "progress did not post the write again";
  forged_warnings = 0;
  srd_log_set_logger(count_warnings);
  complete_loop(0, -FI_EIO);
  srd_log_set_logger(nullptr);
  EXPECT_EQ(SRD_ERR_SYSTEM, coll->result);
  EXPECT_EQ(1, forged_warnings);
}

// A window deregistered with signals queued for it: they are dropped, never
// written into memory that may be gone.
TEST_F(RmaNic, QueuedSignalsOfAFreedWindowAreDropped) {
  windows(SRD_RMA_WIN_NEVER_RESET);
  std::vector<uint64_t> other(8, 0);
  srd_rma_win *hsig = nullptr;
  srd_rma_remote mine{};
  ASSERT_EQ(SRD_OK, srd_rma_win_new(coll, other.data(), 64, 0, SRD_RMA_WIN_NEVER_RESET, -1, 0, &hsig, &mine));
  stripe(0, 0, 1, true);
  signal(0, 1, SRD_RMA_SIGNAL_INC, 0); // in flight
  srd_msg_rma_signal m{};
  m.seq = 1;
  m.op = SRD_RMA_SIGNAL_INC;
  m.window = hsig->index;
  m.offset = 8;
  srd_rma_on_signal(r, &m); // queued behind it
  ASSERT_EQ(1u, g.loops.size());
  srd_rma_win_free(hsig);
  complete_loop();
  EXPECT_TRUE(g.loops.empty()) << "a signal written into a deregistered window";
  EXPECT_EQ(0u, other[1]);
  signal(2, 0, SRD_RMA_SIGNAL_INC, 0);
  ASSERT_EQ(1u, g.loops.size());
  EXPECT_EQ(2u, loop_value());
  complete_loop();
}

// iflush of a GPU window a NIC wrote (gets): the driver's flush where the GPU
// does not order GPUDirect writes, then the window's stream; none without.
TEST_F(RmaNic, FlushOfAGpuWindowFlushesTheNicsWrites) {
  windows(0);
  EXPECT_EQ(SRD_OK, srd_rma_gpu_flush(dwin));
  ASSERT_EQ(2u, fake::state.calls.size());
  EXPECT_EQ(fake::State::Call::kFlush, fake::state.calls[0].kind);
  EXPECT_EQ(fake::primary(0), fake::state.calls[0].ctx);
  EXPECT_EQ(fake::State::Call::kSync, fake::state.calls[1].kind);
  b.gdr.flush = false;
  fake::state.calls.clear();
  EXPECT_EQ(SRD_OK, srd_rma_gpu_flush(dwin));
  EXPECT_EQ(0u, count(fake::State::Call::kFlush)) << "flushed where the GPU orders the writes";
}

// CUDA_DEVICE_MAX_CONNECTIONS for one scope (nullptr: unset), restored after.
class CudaQueues {
 public:
  explicit CudaQueues(const char *value) {
    const char *old = getenv(kName);
    if (old) saved_ = old, had_ = true;
    if (value) setenv(kName, value, 1);
    else unsetenv(kName);
  }
  ~CudaQueues() {
    if (had_) setenv(kName, saved_.c_str(), 1);
    else unsetenv(kName);
  }

 private:
  static constexpr const char *kName = "CUDA_DEVICE_MAX_CONNECTIONS";
  std::string saved_;
  bool had_ = false;
};

// Who may take GPU windows: shm with FI_HMEM on every rail, a device that
// offers GPU memory, CUDA that can write 64-bit stream memory, and 32 CUDA
// hardware queues.
TEST(RmaGpuOffer, ShmWithFiHmemAndStreamMemoryOperationsOnly) {
  fake::Driver d;
  CudaQueues queues("32");
  srd_gdr_decision gdr{};
  gdr.gpu = true;
  char why[512];
  EXPECT_EQ(0, srd_gdr_rma_windows("shm", &gdr, srd_cuda_get(), why, sizeof why)) << why;
  EXPECT_EQ(-1, srd_gdr_rma_windows("tcp", &gdr, srd_cuda_get(), why, sizeof why));
  EXPECT_NE(nullptr, strstr(why, "CUDA calls of its own")) << why;
  EXPECT_EQ(-1, srd_gdr_rma_windows("tcp;ofi_rxm", &gdr, srd_cuda_get(), why, sizeof why));
  EXPECT_EQ(-1, srd_gdr_rma_windows("shmx", &gdr, srd_cuda_get(), why, sizeof why));
  gdr.gpu = false;
  snprintf(gdr.why, sizeof gdr.why, "provider shm does not offer FI_HMEM (GPU memory)");
  EXPECT_EQ(-1, srd_gdr_rma_windows("shm", &gdr, srd_cuda_get(), why, sizeof why));
  EXPECT_NE(nullptr, strstr(why, "does not offer FI_HMEM")) << why;
  gdr.gpu = true;
  fake::state.mem_ops_attr[1] = 0;
  EXPECT_EQ(-1, srd_gdr_rma_windows("shm", &gdr, srd_cuda_get(), why, sizeof why));
  EXPECT_NE(nullptr, strstr(why, "device 1")) << why;
  EXPECT_NE(nullptr, strstr(why, "CAN_USE_64_BIT_STREAM_MEM_OPS")) << why;
}

// shm's synchronous copies queue behind signal waits unless CUDA has 32
// hardware queues: refused with what to set (unset, too few, not a number).
TEST(RmaGpuOffer, ShmNeedsThirtyTwoCudaQueues) {
  fake::Driver d;
  srd_gdr_decision gdr{};
  gdr.gpu = true;
  char why[512];
  for (const char *v : {static_cast<const char *>(nullptr), "8", "31", "32x", ""}) {
    CudaQueues queues(v);
    EXPECT_EQ(-1, srd_gdr_rma_windows("shm", &gdr, srd_cuda_get(), why, sizeof why)) << (v ? v : "unset");
    EXPECT_NE(nullptr, strstr(why, "set CUDA_DEVICE_MAX_CONNECTIONS=32")) << why;
  }
  for (const char *v : {"32", "64"}) {
    CudaQueues queues(v);
    EXPECT_EQ(0, srd_gdr_rma_windows("shm", &gdr, srd_cuda_get(), why, sizeof why)) << v << ": " << why;
  }
}

// Where a NIC writes GPU memory without the provider's CUDA calls (efa), it
// writes the signals too: no CUDA queue rule, but a GPU that does not order
// GPUDirect writes needs the driver's flush.
TEST(RmaGpuOffer, NicWritesTakeGpuWindowsWithTheFlushTheyNeed) {
  fake::Driver d;
  CudaQueues queues(nullptr);
  srd_gdr_decision gdr{};
  gdr.gpu = true;
  char why[512];
  EXPECT_EQ(-1, srd_gdr_rma_windows("efa", &gdr, srd_cuda_get(), why, sizeof why)) << "efa making CUDA calls";
  EXPECT_NE(nullptr, strstr(why, "CUDA calls of its own")) << why;
  gdr.nic_writes = true;
  EXPECT_EQ(0, srd_gdr_rma_windows("efa", &gdr, srd_cuda_get(), why, sizeof why)) << why;
  gdr.flush = true;
  EXPECT_EQ(0, srd_gdr_rma_windows("efa", &gdr, srd_cuda_get(), why, sizeof why)) << why;
  gdr.gpu = false;
  snprintf(gdr.why, sizeof gdr.why, "NCCL_SRD_GDR=0: host memory only");
  EXPECT_EQ(-1, srd_gdr_rma_windows("efa", &gdr, srd_cuda_get(), why, sizeof why));
  EXPECT_NE(nullptr, strstr(why, "NCCL_SRD_GDR=0")) << why;
}

TEST(RmaGpuOffer, UnorderedNicWritesNeedTheDriversFlush) {
  srd_cuda_ops o = fake::ops();
  o.flush_gpudirect_rdma_writes = nullptr;
  fake::Driver d(o);
  srd_gdr_decision gdr{};
  gdr.gpu = gdr.nic_writes = gdr.flush = true;
  char why[512];
  EXPECT_EQ(-1, srd_gdr_rma_windows("efa", &gdr, srd_cuda_get(), why, sizeof why));
  EXPECT_NE(nullptr, strstr(why, "cuFlushGPUDirectRDMAWrites")) << why;
  gdr.flush = false;
  EXPECT_EQ(0, srd_gdr_rma_windows("efa", &gdr, srd_cuda_get(), why, sizeof why)) << why;
}

TEST(RmaGpuOffer, DriverWithoutStreamWritesIsRefused) {
  srd_cuda_ops o = fake::ops();
  o.stream_write_value64 = nullptr;
  fake::Driver d(o);
  srd_gdr_decision gdr{};
  gdr.gpu = true;
  char why[512];
  EXPECT_EQ(-1, srd_gdr_rma_windows("shm", &gdr, srd_cuda_get(), why, sizeof why));
  EXPECT_NE(nullptr, strstr(why, "cuStreamWriteValue64")) << why;
}
