// Wire formats: immediate data, listen handle, control messages. Decoders
// read from heap buffers of exactly the message length, so under ASan any
// read past the end is caught, not just the ones that change a result.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <vector>

extern "C" {
#include "srd/wire.h"
}

namespace {

// Byte layout facts the tests rely on (little-endian, see wire.c).
constexpr size_t kHeader = 16; // magic, version, type, destination comm, token
constexpr size_t kPeerFixed = kHeader + 37;
constexpr size_t kCtsFixed = kHeader + 8;
constexpr size_t kCtsEntryFixed = 20;
constexpr size_t kEagerHeader = kHeader + 12;
constexpr size_t kHandleNameOffset = 24;
constexpr size_t kHandleTransportOffset = kHandleNameOffset + SRD_NAME_MAX;

// A copy of bytes in a heap block of exactly their size.
struct Exact {
  explicit Exact(const uint8_t *p, size_t n) : buf(new uint8_t[n]), len(n) {
    if (n) memcpy(buf.get(), p, n);
  }
  std::unique_ptr<uint8_t[]> buf;
  size_t len;
};

int decode(const std::vector<uint8_t> &bytes, size_t len, struct srd_msg *m, const char **why) {
  Exact e(bytes.data(), len);
  *why = nullptr;
  int rc = srd_msg_decode(e.buf.get(), e.len, m, why);
  // Pointers into the buffer are about to dangle; rebase them onto bytes so
  // callers can compare contents.
  if (rc == 0) {
    const uint8_t *base = e.buf.get();
    auto rebase = [&](const uint8_t *p) -> const uint8_t * {
      EXPECT_GE(p, base);
      EXPECT_LE(p, base + len);
      return bytes.data() + (p - base);
    };
    if (m->type == SRD_MSG_HELLO || m->type == SRD_MSG_ACCEPT) m->u.peer.names = rebase(m->u.peer.names);
    if (m->type == SRD_MSG_CTS) m->u.cts.keys = rebase(m->u.cts.keys);
    if (m->type == SRD_MSG_EAGER) m->u.eager.data = rebase(static_cast<const uint8_t *>(m->u.eager.data));
  }
  return rc;
}

void expect_rejected(const std::vector<uint8_t> &bytes, size_t len, const char *what) {
  struct srd_msg m;
  const char *why = nullptr;
  EXPECT_EQ(-1, decode(bytes, len, &m, &why)) << what << " (length " << len << ")";
  ASSERT_NE(nullptr, why) << what;
  EXPECT_NE('\0', why[0]) << what;
}

std::vector<uint8_t> random_bytes(std::mt19937_64 &rng, size_t n) {
  std::vector<uint8_t> v(n);
  for (auto &b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// ---------------------------------------------------------------------------
// Immediate data

TEST(Imm, RoundTripEveryValueOfEachField) {
  std::mt19937_64 rng(1);
  for (uint32_t ci = 0; ci < SRD_MAX_COMMS; ci++) {
    for (uint32_t seq = 0; seq <= SRD_IMM_SLOT_MASK; seq += 1 + static_cast<uint32_t>(rng() % 97)) {
      uint32_t ns = 1 + static_cast<uint32_t>(rng() % SRD_MAX_STRIPES);
      struct srd_imm v = {ci, seq, ns, static_cast<uint32_t>(rng() % ns), static_cast<uint32_t>(rng() % SRD_MAX_RECVS)};
      uint32_t x = srd_imm_pack(v);
      struct srd_imm u = srd_imm_unpack(x);
      ASSERT_EQ(v.write_id, u.write_id);
      ASSERT_EQ(v.slot, u.slot);
      ASSERT_EQ(v.nstripes, u.nstripes);
      ASSERT_EQ(v.stripe, u.stripe);
      ASSERT_EQ(v.entry, u.entry);
    }
  }
  for (uint32_t seq = 0; seq <= SRD_IMM_SLOT_MASK; seq++)
    for (uint32_t ns = 1; ns <= SRD_MAX_STRIPES; ns++)
      for (uint32_t stripe = 0; stripe < ns; stripe++)
        for (uint32_t entry = 0; entry < SRD_MAX_RECVS; entry++) {
          struct srd_imm v = {static_cast<uint32_t>(rng() % SRD_MAX_COMMS), seq, ns, stripe, entry};
          struct srd_imm u = srd_imm_unpack(srd_imm_pack(v));
          ASSERT_EQ(v.write_id, u.write_id);
          ASSERT_EQ(seq, u.slot);
          ASSERT_EQ(ns, u.nstripes);
          ASSERT_EQ(stripe, u.stripe);
          ASSERT_EQ(entry, u.entry);
        }
}

TEST(Imm, FieldsAreIndependent) {
  // Extremes of every field against extremes of the others.
  const uint32_t cis[] = {0, 1, SRD_MAX_COMMS - 1};
  const uint32_t seqs[] = {0, 1, SRD_IMM_SLOT_MASK};
  const uint32_t nss[] = {1, 2, SRD_MAX_STRIPES};
  const uint32_t stripes[] = {0, 1, SRD_MAX_STRIPES - 1};
  const uint32_t entries[] = {0, 1, SRD_MAX_RECVS - 1};
  for (uint32_t ci : cis)
    for (uint32_t seq : seqs)
      for (uint32_t ns : nss)
        for (uint32_t stripe : stripes)
          for (uint32_t entry : entries) {
            if (stripe >= ns) continue;
            struct srd_imm u = srd_imm_unpack(srd_imm_pack({ci, seq, ns, stripe, entry}));
            EXPECT_EQ(ci, u.write_id);
            EXPECT_EQ(seq, u.slot);
            EXPECT_EQ(ns, u.nstripes);
            EXPECT_EQ(stripe, u.stripe);
            EXPECT_EQ(entry, u.entry);
          }
}

// The stripe field's spare numbers (28..31: no count of at most 7 has them)
// must not pass for a real stripe: they decode to an index the count lacks.
TEST(Imm, SpareStripeNumbersDecodeToNoStripe) {
  std::set<std::pair<uint32_t, uint32_t>> seen;
  for (uint32_t pair = 0; pair < 32; pair++) {
    struct srd_imm u = srd_imm_unpack(pair << 24);
    ASSERT_GE(u.nstripes, 1u);
    ASSERT_LE(u.nstripes, static_cast<uint32_t>(SRD_MAX_STRIPES));
    if (pair < SRD_MAX_STRIPES * (SRD_MAX_STRIPES + 1) / 2) {
      EXPECT_LT(u.stripe, u.nstripes) << "number " << pair;
      EXPECT_TRUE(seen.insert({u.nstripes, u.stripe}).second) << "number " << pair << " decodes like another";
    } else {
      EXPECT_GE(u.stripe, u.nstripes) << "spare number " << pair << " decodes to a real stripe";
    }
  }
  EXPECT_EQ(static_cast<size_t>(SRD_MAX_STRIPES * (SRD_MAX_STRIPES + 1) / 2), seen.size());
}


// Receivers decode with srd_imm_decode: every value of the 32 bits either
// decodes to fields in range or is refused (issue 23: a slot index of 40..63
// indexed past the comm's 40 slots).
TEST(Imm, DecodeRefusesEveryOutOfRangeField) {
  uint64_t ok = 0;
  for (uint64_t x = 0; x <= UINT32_MAX; x += 1 + (x & 0xff)) {
    struct srd_imm v;
    const char *why = nullptr;
    uint32_t slot_index = (static_cast<uint32_t>(x) >> 16) & ((1u << SRD_SLOT_BITS) - 1);
    struct srd_imm raw = srd_imm_unpack(static_cast<uint32_t>(x));
    bool valid = slot_index < SRD_RECV_SLOTS && raw.stripe < raw.nstripes;
    ASSERT_EQ(valid ? 0 : -1, srd_imm_decode(static_cast<uint32_t>(x), &v, &why)) << std::hex << x;
    if (!valid) {
      ASSERT_NE(nullptr, why);
      continue;
    }
    ok++;
    ASSERT_LT(v.slot & ((1u << SRD_SLOT_BITS) - 1), static_cast<uint32_t>(SRD_RECV_SLOTS));
    ASSERT_LT(v.stripe, v.nstripes);
    ASSERT_LT(v.entry, static_cast<uint32_t>(SRD_MAX_RECVS));
  }
  EXPECT_GT(ok, 0u);
  struct srd_imm v;
  const char *why = nullptr;
  EXPECT_EQ(-1, srd_imm_decode(srd_imm_pack({1, 63, 1, 0, 0}), &v, &why));
  EXPECT_EQ(-1, srd_imm_decode(srd_imm_pack({1, SRD_RECV_SLOTS, 1, 0, 0}), &v, &why));
  EXPECT_EQ(0, srd_imm_decode(srd_imm_pack({1, SRD_RECV_SLOTS - 1, 1, 0, 0}), &v, &why));
}

TEST(Msg, CtsWithASlotOutOfRangeOrAWrappingBufferIsRefused) {
  std::vector<uint8_t> buf(4096);
  struct srd_msg_cts c;
  memset(&c, 0, sizeof(c));
  c.n = 1;
  c.nkeys = 1;
  c.e[0] = {0x1000, 4096, 0};
  uint64_t key = 9;
  struct srd_msg m;
  const char *why = nullptr;
  size_t len = srd_msg_encode_cts(buf.data(), buf.size(), 1, &c, &key);
  ASSERT_EQ(0, srd_msg_decode(buf.data(), len, &m, &why)) << why;
  c.slot = SRD_RECV_SLOTS;
  len = srd_msg_encode_cts(buf.data(), buf.size(), 1, &c, &key);
  EXPECT_EQ(-1, srd_msg_decode(buf.data(), len, &m, &why));
  c.slot = 0;
  c.e[0] = {UINT64_MAX - 100, 4096, 0};
  len = srd_msg_encode_cts(buf.data(), buf.size(), 1, &c, &key);
  EXPECT_EQ(-1, srd_msg_decode(buf.data(), len, &m, &why)) << "a buffer at 2^64 - 100 of 4096 bytes";
}

TEST(Imm, SlotWrapsModulo256) {
  struct srd_imm u = srd_imm_unpack(srd_imm_pack({7, 256 + 5, 3, 1, 2}));
  EXPECT_EQ(5u, u.slot);
  EXPECT_EQ(7u, u.write_id);
  EXPECT_EQ(3u, u.nstripes);
  EXPECT_EQ(1u, u.stripe);
  EXPECT_EQ(2u, u.entry);
}

TEST(Imm, UnpackThenPackKeepsEveryUsedBit) {
  std::mt19937_64 rng(2);
  for (int i = 0; i < 100000; i++) {
    uint32_t x = static_cast<uint32_t>(rng());
    ASSERT_EQ(x, srd_imm_pack(srd_imm_unpack(x)));
  }
}

// ---------------------------------------------------------------------------
// Listen handle

struct srd_handle make_handle(std::mt19937_64 &rng, uint8_t name_len) {
  struct srd_handle h;
  memset(&h, 0, sizeof(h));
  h.listener_id = static_cast<uint32_t>(rng());
  do h.cookie = rng();
  while (h.cookie == 0);
  h.name_len = name_len;
  for (int i = 0; i < name_len; i++) h.name[i] = static_cast<uint8_t>(rng());
  snprintf(h.transport, sizeof(h.transport), "%s", rng() % 2 ? "efa-direct" : "tcp;ofi_rxm");
  return h;
}

std::vector<uint8_t> encode_handle(const struct srd_handle &h) {
  std::vector<uint8_t> out(SRD_HANDLE_SIZE, 0xa5);
  srd_handle_encode(&h, out.data());
  return out;
}

int decode_handle(const std::vector<uint8_t> &bytes, struct srd_handle *h, const char **why) {
  EXPECT_EQ(static_cast<size_t>(SRD_HANDLE_SIZE), bytes.size());
  Exact e(bytes.data(), SRD_HANDLE_SIZE);
  *why = nullptr;
  return srd_handle_decode(e.buf.get(), h, why);
}

void expect_handle_rejected(const std::vector<uint8_t> &bytes, const char *what) {
  struct srd_handle h;
  const char *why = nullptr;
  EXPECT_EQ(-1, decode_handle(bytes, &h, &why)) << what;
  ASSERT_NE(nullptr, why) << what;
  EXPECT_NE('\0', why[0]) << what;
}

TEST(Handle, GoodHandlesRoundTrip) {
  std::mt19937_64 rng(3);
  for (int name_len = 1; name_len <= SRD_NAME_MAX; name_len++) {
    for (int rep = 0; rep < 20; rep++) {
      struct srd_handle h = make_handle(rng, static_cast<uint8_t>(name_len));
      if (rep == 0) h.cookie = ~0ull;
      if (rep == 1) h.listener_id = 0;
      std::vector<uint8_t> bytes = encode_handle(h);
      struct srd_handle d;
      const char *why = nullptr;
      ASSERT_EQ(0, decode_handle(bytes, &d, &why)) << (why ? why : "");
      EXPECT_EQ(h.listener_id, d.listener_id);
      EXPECT_EQ(h.cookie, d.cookie);
      ASSERT_EQ(h.name_len, d.name_len);
      EXPECT_EQ(0, memcmp(h.name, d.name, h.name_len));
      EXPECT_STREQ(h.transport, d.transport);
    }
  }
}

// The transport (provider, or efa's fabric) travels in the handle so that a
// connect across two fails at once; a handle without one, or with one that
// is not a printable, terminated name, is refused.
TEST(Handle, TransportIsRequiredAndChecked) {
  std::mt19937_64 rng(41);
  struct srd_handle h = make_handle(rng, SRD_NAME_MAX);
  snprintf(h.transport, sizeof(h.transport), "%s", "efa");
  std::vector<uint8_t> good = encode_handle(h);
  EXPECT_EQ(0, memcmp(&good[kHandleTransportOffset], "efa", 4));
  struct srd_handle d;
  const char *why = nullptr;
  ASSERT_EQ(0, decode_handle(good, &d, &why)) << (why ? why : "");
  EXPECT_STREQ("efa", d.transport);
  std::vector<uint8_t> none = good;
  none[kHandleTransportOffset] = 0;
  expect_handle_rejected(none, "no transport");
  std::vector<uint8_t> unterminated = good;
  memset(&unterminated[kHandleTransportOffset], 'x', SRD_HANDLE_TRANSPORT_MAX);
  expect_handle_rejected(unterminated, "unterminated transport");
  std::vector<uint8_t> unprintable = good;
  unprintable[kHandleTransportOffset + 1] = '\n';
  expect_handle_rejected(unprintable, "unprintable transport");
}

TEST(Handle, EncodeFillsTheWholeHandle) {
  // Unused bytes are zeroed: NCCL copies all 128 bytes between processes.
  std::mt19937_64 rng(4);
  struct srd_handle h = make_handle(rng, 10);
  std::vector<uint8_t> bytes = encode_handle(h);
  size_t tlen = strlen(h.transport);
  for (size_t i = kHandleNameOffset + 10; i < SRD_HANDLE_SIZE; i++) {
    bool transport = i >= kHandleTransportOffset && i < kHandleTransportOffset + tlen;
    EXPECT_TRUE(transport || bytes[i] == 0) << i;
  }
}

TEST(Handle, BadMagicIsRejected) {
  std::mt19937_64 rng(5);
  std::vector<uint8_t> good = encode_handle(make_handle(rng, 16));
  for (int byte = 0; byte < 4; byte++) {
    std::vector<uint8_t> bad = good;
    bad[byte] ^= 0x40;
    expect_handle_rejected(bad, "bad magic");
  }
}

TEST(Handle, WrongVersionIsRejected) {
  std::mt19937_64 rng(6);
  std::vector<uint8_t> good = encode_handle(make_handle(rng, 16));
  for (int v : {0, 1, 2, 3, 4, 8, 255}) {
    std::vector<uint8_t> bad = good;
    bad[4] = static_cast<uint8_t>(v);
    expect_handle_rejected(bad, "wrong version");
  }
}

TEST(Handle, BadNameLengthIsRejected) {
  std::mt19937_64 rng(7);
  std::vector<uint8_t> good = encode_handle(make_handle(rng, 16));
  for (int n : {0, SRD_NAME_MAX + 1, SRD_HANDLE_SIZE - static_cast<int>(kHandleNameOffset),
                SRD_HANDLE_SIZE - static_cast<int>(kHandleNameOffset) + 1, 255}) {
    std::vector<uint8_t> bad = good;
    bad[5] = static_cast<uint8_t>(n);
    expect_handle_rejected(bad, "bad name length");
  }
}

TEST(Handle, ZeroCookieIsRejected) {
  std::mt19937_64 rng(8);
  struct srd_handle h = make_handle(rng, 16);
  h.cookie = 0;
  expect_handle_rejected(encode_handle(h), "zero cookie");
}

TEST(Handle, ConstantBuffersAreRejected) {
  expect_handle_rejected(std::vector<uint8_t>(SRD_HANDLE_SIZE, 0x00), "all zero");
  expect_handle_rejected(std::vector<uint8_t>(SRD_HANDLE_SIZE, 0xff), "all 0xff");
}

TEST(Handle, RandomBuffersNeverCrash) {
  std::mt19937_64 rng(9);
  std::vector<uint8_t> good = encode_handle(make_handle(rng, 16));
  for (int i = 0; i < 100000; i++) {
    std::vector<uint8_t> bytes = random_bytes(rng, SRD_HANDLE_SIZE);
    // Fully random: the magic alone rules it out (the seed is fixed).
    if (i % 2 == 0) {
      expect_handle_rejected(bytes, "random handle");
      continue;
    }
    // Right magic and version, random rest: whatever is accepted is sane.
    memcpy(bytes.data(), good.data(), 5);
    struct srd_handle h;
    const char *why = nullptr;
    int rc = decode_handle(bytes, &h, &why);
    if (rc == 0) {
      ASSERT_GE(h.name_len, 1);
      ASSERT_LE(h.name_len, SRD_NAME_MAX);
      ASSERT_NE(0u, h.cookie);
      ASSERT_EQ(0, memcmp(h.name, bytes.data() + kHandleNameOffset, h.name_len));
    } else {
      ASSERT_EQ(-1, rc);
      ASSERT_NE(nullptr, why);
    }
  }
}

// ---------------------------------------------------------------------------
// Control messages

std::vector<uint8_t> encode_peer(enum srd_msg_type type, uint32_t dst, const struct srd_msg_peer &p) {
  std::vector<uint8_t> buf(kPeerFixed + SRD_MAX_PATHS * SRD_NAME_MAX);
  size_t n = srd_msg_encode_peer(buf.data(), buf.size(), type, dst, &p);
  EXPECT_GT(n, 0u);
  buf.resize(n);
  return buf;
}

std::vector<uint8_t> encode_cts(uint32_t dst, const struct srd_msg_cts &c, const std::vector<uint64_t> &keys) {
  std::vector<uint8_t> buf(8192);
  size_t n = srd_msg_encode_cts(buf.data(), buf.size(), dst, &c, keys.data());
  EXPECT_GT(n, 0u);
  buf.resize(n);
  return buf;
}

std::vector<uint8_t> encode_eager(uint32_t dst, uint32_t seq, int32_t tag, const std::vector<uint8_t> &payload) {
  std::vector<uint8_t> buf(kEagerHeader + payload.size() + 64);
  size_t n = srd_msg_encode_eager_header(buf.data(), buf.size(), dst, seq, tag, static_cast<uint32_t>(payload.size()));
  EXPECT_EQ(kEagerHeader, n);
  if (!payload.empty()) memcpy(buf.data() + n, payload.data(), payload.size());
  buf.resize(n + payload.size());
  return buf;
}

std::vector<uint8_t> encode_trunc(uint32_t dst, uint32_t seq, uint64_t size) {
  std::vector<uint8_t> buf(256);
  buf.resize(srd_msg_encode_trunc(buf.data(), buf.size(), dst, seq, size));
  return buf;
}

std::vector<uint8_t> encode_ping(uint32_t dst) {
  std::vector<uint8_t> buf(256);
  buf.resize(srd_msg_encode_ping(buf.data(), buf.size(), dst));
  return buf;
}

std::vector<uint8_t> encode_rts(uint32_t dst, uint32_t seq) {
  std::vector<uint8_t> buf(64);
  buf.resize(srd_msg_encode_rts(buf.data(), buf.size(), dst, seq));
  return buf;
}

std::vector<uint8_t> encode_bye(uint32_t dst, uint32_t next_seq, uint8_t flags = 0, uint64_t writes = 0,
                                uint64_t eagers = 0) {
  std::vector<uint8_t> buf(256);
  struct srd_msg_bye b = {next_seq, flags, writes, eagers};
  buf.resize(srd_msg_encode_bye(buf.data(), buf.size(), dst, &b));
  return buf;
}

struct PeerCase {
  struct srd_msg_peer p;
  std::vector<uint8_t> names;
};

PeerCase make_peer(std::mt19937_64 &rng, uint8_t nrails, uint8_t neps, uint8_t name_len) {
  PeerCase c;
  memset(&c.p, 0, sizeof(c.p));
  c.p.cookie = rng();
  c.p.listener_id = static_cast<uint32_t>(rng());
  c.p.src_comm = static_cast<uint32_t>(rng());
  c.p.pid = static_cast<uint32_t>(rng());
  c.p.nrails = nrails;
  c.p.neps = neps;
  c.p.name_len = name_len;
  c.p.eager_max = static_cast<uint32_t>(rng());
  c.names = random_bytes(rng, static_cast<size_t>(nrails) * neps * name_len);
  c.names.reserve(1);  // a real pointer even for no names: memcpy(dst, NULL, 0) is undefined
  c.p.names = c.names.data();
  return c;
}

struct CtsCase {
  struct srd_msg_cts c;
  std::vector<uint64_t> keys;
};

CtsCase make_cts(std::mt19937_64 &rng, uint8_t n, uint8_t nkeys) {
  CtsCase k;
  memset(&k.c, 0, sizeof(k.c));
  k.c.seq = static_cast<uint32_t>(rng());
  k.c.n = n;
  k.c.nkeys = nkeys;
  k.c.slot = static_cast<uint8_t>(rng() % SRD_RECV_SLOTS | (rng() % 4) << SRD_SLOT_BITS);
  for (int i = 0; i < n; i++) {
    k.c.e[i].addr = rng() >> 1; // the two never wrap around the address space
    k.c.e[i].len = rng() >> 1;
    k.c.e[i].tag = static_cast<int32_t>(rng());
  }
  k.keys.resize(static_cast<size_t>(n) * nkeys);
  for (auto &key : k.keys) key = rng();
  return k;
}

TEST(Msg, HelloAndAcceptRoundTrip) {
  std::mt19937_64 rng(10);
  const int shapes[][3] = {{1, 1, 1}, {1, 1, SRD_NAME_MAX}, {4, 2, 32}, {8, 8, 16}, {64, 1, 8}, {1, 64, 64}, {2, 3, 5}};
  for (enum srd_msg_type type : {SRD_MSG_HELLO, SRD_MSG_ACCEPT}) {
    for (const auto &s : shapes) {
      PeerCase c = make_peer(rng, static_cast<uint8_t>(s[0]), static_cast<uint8_t>(s[1]), static_cast<uint8_t>(s[2]));
      uint32_t dst = static_cast<uint32_t>(rng());
      std::vector<uint8_t> bytes = encode_peer(type, dst, c.p);
      ASSERT_EQ(kPeerFixed + c.names.size(), bytes.size());
      struct srd_msg m;
      const char *why = nullptr;
      ASSERT_EQ(0, decode(bytes, bytes.size(), &m, &why)) << (why ? why : "");
      EXPECT_EQ(type, m.type);
      EXPECT_EQ(dst, m.dst_comm);
      EXPECT_EQ(c.p.cookie, m.u.peer.cookie);
      EXPECT_EQ(c.p.listener_id, m.u.peer.listener_id);
      EXPECT_EQ(c.p.src_comm, m.u.peer.src_comm);
      EXPECT_EQ(c.p.pid, m.u.peer.pid);
      EXPECT_EQ(c.p.nrails, m.u.peer.nrails);
      EXPECT_EQ(c.p.neps, m.u.peer.neps);
      EXPECT_EQ(c.p.name_len, m.u.peer.name_len);
      EXPECT_EQ(c.p.eager_max, m.u.peer.eager_max);
      EXPECT_EQ(bytes.data() + kPeerFixed, m.u.peer.names);
      EXPECT_EQ(0, memcmp(c.names.data(), m.u.peer.names, c.names.size()));
    }
  }
}

TEST(Msg, PeerWithBadCountsIsRejected) {
  std::mt19937_64 rng(11);
  // The encoder writes what it is given; the decoder must refuse it.
  const int shapes[][3] = {{0, 1, 8}, {1, 0, 8}, {0, 0, 8}, {65, 1, 8}, {9, 8, 8},
                           {1, 1, 0}, {1, 1, SRD_NAME_MAX + 1}, {1, 1, 255}};
  for (const auto &s : shapes) {
    PeerCase c = make_peer(rng, static_cast<uint8_t>(s[0]), static_cast<uint8_t>(s[1]), static_cast<uint8_t>(s[2]));
    std::vector<uint8_t> bytes = encode_peer(SRD_MSG_HELLO, 1, c.p);
    expect_rejected(bytes, bytes.size(), "peer with bad counts");
  }
}

TEST(Msg, PeerEncodeRefusesASmallBuffer) {
  std::mt19937_64 rng(12);
  PeerCase c = make_peer(rng, 2, 2, 16);
  size_t need = kPeerFixed + c.names.size();
  std::vector<uint8_t> buf(need);
  EXPECT_EQ(need, srd_msg_encode_peer(buf.data(), need, SRD_MSG_HELLO, 0, &c.p));
  for (size_t cap : {size_t{0}, size_t{7}, kPeerFixed, need - 1})
    EXPECT_EQ(0u, srd_msg_encode_peer(buf.data(), cap, SRD_MSG_HELLO, 0, &c.p)) << cap;
}

TEST(Msg, CtsRoundTripAndKeys) {
  std::mt19937_64 rng(13);
  for (int n = 1; n <= SRD_MAX_RECVS; n++) {
    for (int nkeys = 1; nkeys <= 32; nkeys++) {
      CtsCase k = make_cts(rng, static_cast<uint8_t>(n), static_cast<uint8_t>(nkeys));
      uint32_t dst = static_cast<uint32_t>(rng());
      std::vector<uint8_t> bytes = encode_cts(dst, k.c, k.keys);
      ASSERT_EQ(kCtsFixed + static_cast<size_t>(n) * (kCtsEntryFixed + 8 * static_cast<size_t>(nkeys)), bytes.size());
      struct srd_msg m;
      const char *why = nullptr;
      ASSERT_EQ(0, decode(bytes, bytes.size(), &m, &why)) << (why ? why : "");
      ASSERT_EQ(SRD_MSG_CTS, m.type);
      EXPECT_EQ(dst, m.dst_comm);
      EXPECT_EQ(k.c.seq, m.u.cts.seq);
      EXPECT_EQ(k.c.slot, m.u.cts.slot);
      ASSERT_EQ(n, m.u.cts.n);
      ASSERT_EQ(nkeys, m.u.cts.nkeys);
      for (int i = 0; i < n; i++) {
        EXPECT_EQ(k.c.e[i].addr, m.u.cts.e[i].addr);
        EXPECT_EQ(k.c.e[i].len, m.u.cts.e[i].len);
        EXPECT_EQ(k.c.e[i].tag, m.u.cts.e[i].tag);
        for (int r = 0; r < nkeys; r++)
          ASSERT_EQ(k.keys[static_cast<size_t>(i) * nkeys + r], srd_cts_key(&m.u.cts, i, r))
              << "entry " << i << " rail " << r;
      }
    }
  }
}

TEST(Msg, CtsWithBadCountsIsRejected) {
  std::mt19937_64 rng(14);
  CtsCase k = make_cts(rng, 2, 2);
  std::vector<uint8_t> good = encode_cts(5, k.c, k.keys);
  const size_t n_at = kHeader + 4, nkeys_at = kHeader + 5;
  for (int n : {0, SRD_MAX_RECVS + 1, 255}) {
    std::vector<uint8_t> bad = good;
    bad[n_at] = static_cast<uint8_t>(n);
    expect_rejected(bad, bad.size(), "bad receive count");
  }
  for (int nkeys : {0, SRD_MAX_PATHS + 1, 255}) {
    std::vector<uint8_t> bad = good;
    bad[nkeys_at] = static_cast<uint8_t>(nkeys);
    expect_rejected(bad, bad.size(), "bad key count");
  }
  // Counts that are valid but larger than what the buffer holds.
  std::vector<uint8_t> more = good;
  more[n_at] = 3;
  expect_rejected(more, more.size(), "more entries than bytes");
  more = good;
  more[nkeys_at] = 3;
  expect_rejected(more, more.size(), "more keys than bytes");
  // Fewer than the buffer holds: trailing bytes.
  std::vector<uint8_t> fewer = good;
  fewer[n_at] = 1;
  expect_rejected(fewer, fewer.size(), "fewer entries than bytes");
}

TEST(Msg, EagerRoundTrip) {
  std::mt19937_64 rng(15);
  for (size_t len : {size_t{0}, size_t{1}, size_t{7}, size_t{128}, size_t{4000}, size_t{65536}}) {
    std::vector<uint8_t> payload = random_bytes(rng, len);
    uint32_t dst = static_cast<uint32_t>(rng()), seq = static_cast<uint32_t>(rng());
    int32_t tag = len == 1 ? -1 : static_cast<int32_t>(rng());
    std::vector<uint8_t> bytes = encode_eager(dst, seq, tag, payload);
    struct srd_msg m;
    const char *why = nullptr;
    ASSERT_EQ(0, decode(bytes, bytes.size(), &m, &why)) << (why ? why : "");
    ASSERT_EQ(SRD_MSG_EAGER, m.type);
    EXPECT_EQ(dst, m.dst_comm);
    EXPECT_EQ(seq, m.u.eager.seq);
    EXPECT_EQ(tag, m.u.eager.tag);
    ASSERT_EQ(len, m.u.eager.len);
    EXPECT_EQ(static_cast<const void *>(bytes.data() + kEagerHeader), m.u.eager.data);
    if (len) {
      EXPECT_EQ(0, memcmp(payload.data(), m.u.eager.data, len));
    }
  }
}

TEST(Msg, EagerHeaderRefusesWhenThePayloadDoesNotFit) {
  std::vector<uint8_t> buf(kEagerHeader + 100);
  EXPECT_EQ(kEagerHeader, srd_msg_encode_eager_header(buf.data(), buf.size(), 1, 2, 3, 100));
  EXPECT_EQ(0u, srd_msg_encode_eager_header(buf.data(), buf.size(), 1, 2, 3, 101));
  EXPECT_EQ(0u, srd_msg_encode_eager_header(buf.data(), kEagerHeader - 1, 1, 2, 3, 0));
  EXPECT_EQ(0u, srd_msg_encode_eager_header(buf.data(), buf.size(), 1, 2, 3, UINT32_MAX));
}

TEST(Msg, TruncPingByeRoundTrip) {
  struct srd_msg m;
  const char *why = nullptr;
  std::vector<uint8_t> t = encode_trunc(0xdeadbeef, 0xfffffff0u, UINT64_MAX - 1);
  ASSERT_EQ(kHeader + 12, t.size());
  ASSERT_EQ(0, decode(t, t.size(), &m, &why)) << (why ? why : "");
  EXPECT_EQ(SRD_MSG_TRUNC, m.type);
  EXPECT_EQ(0xdeadbeefu, m.dst_comm);
  EXPECT_EQ(0xfffffff0u, m.u.trunc.seq);
  EXPECT_EQ(UINT64_MAX - 1, m.u.trunc.size);

  std::vector<uint8_t> p = encode_ping(SRD_MAX_COMMS - 1);
  ASSERT_EQ(kHeader, p.size());
  ASSERT_EQ(0, decode(p, p.size(), &m, &why)) << (why ? why : "");
  EXPECT_EQ(SRD_MSG_PING, m.type);
  EXPECT_EQ(static_cast<uint32_t>(SRD_MAX_COMMS - 1), m.dst_comm);

  std::vector<uint8_t> b = encode_bye(3, 123456789, SRD_BYE_DRAINED, UINT64_MAX - 2, UINT64_MAX - 5);
  ASSERT_EQ(kHeader + 21, b.size());
  ASSERT_EQ(0, decode(b, b.size(), &m, &why)) << (why ? why : "");
  EXPECT_EQ(SRD_MSG_BYE, m.type);
  EXPECT_EQ(3u, m.dst_comm);
  EXPECT_EQ(123456789u, m.u.bye.next_seq);
  EXPECT_EQ(SRD_BYE_DRAINED, m.u.bye.flags);
  EXPECT_EQ(UINT64_MAX - 2, m.u.bye.writes);
  EXPECT_EQ(UINT64_MAX - 5, m.u.bye.eagers);
  std::vector<uint8_t> taken = encode_bye(3, 7, SRD_BYE_TAKEN);
  ASSERT_EQ(0, decode(taken, taken.size(), &m, &why)) << (why ? why : "");
  EXPECT_EQ(SRD_BYE_TAKEN, m.u.bye.flags);
  std::vector<uint8_t> odd = encode_bye(3, 1, 0x4, 0);
  expect_rejected(odd, odd.size(), "unknown close notice flags");
  odd = encode_bye(3, 1, SRD_BYE_DRAINED | SRD_BYE_TAKEN, 0);
  expect_rejected(odd, odd.size(), "close notice both from a sender (drained) and a receiver (taken)");
  expect_rejected(b, b.size() - 1, "truncated close notice");

  std::vector<uint8_t> rail(64);
  struct srd_msg_rail down = {31, 0, 1, 0x89abcdefu};
  rail.resize(srd_msg_encode_rail(rail.data(), rail.size(), 7, &down));
  ASSERT_EQ(kHeader + 7, rail.size());
  ASSERT_EQ(0, decode(rail, rail.size(), &m, &why)) << (why ? why : "");
  EXPECT_EQ(SRD_MSG_RAIL, m.type);
  EXPECT_EQ(31, m.u.rail.rail);
  EXPECT_EQ(0, m.u.rail.up);
  EXPECT_EQ(1, m.u.rail.stale);
  EXPECT_EQ(0x89abcdefu, m.u.rail.round);
  std::vector<uint8_t> bad_rail = rail;
  bad_rail[kHeader] = SRD_MAX_PATHS;
  expect_rejected(bad_rail, bad_rail.size(), "rail index out of range");
  bad_rail = rail;
  bad_rail[kHeader + 1] = 2;
  expect_rejected(bad_rail, bad_rail.size(), "up neither 0 nor 1");
  bad_rail = rail;
  bad_rail[kHeader + 1] = 1;
  expect_rejected(bad_rail, bad_rail.size(), "stale writes on a rail that is up");
  expect_rejected(rail, rail.size() - 1, "truncated rail notice");
  std::vector<uint8_t> rts = encode_rts(5, 0xfffffffeu);
  ASSERT_EQ(kHeader + 4, rts.size());
  ASSERT_EQ(0, decode(rts, rts.size(), &m, &why)) << (why ? why : "");
  EXPECT_EQ(SRD_MSG_RTS, m.type);
  EXPECT_EQ(5u, m.dst_comm);
  EXPECT_EQ(0xfffffffeu, m.u.rts.seq);
  uint8_t buf_rts[64];
  EXPECT_EQ(0u, srd_msg_encode_rts(buf_rts, kHeader + 3, 0, 0));

  std::vector<uint8_t> buf(64);
  EXPECT_EQ(0u, srd_msg_encode_rail(buf.data(), kHeader + 2, 0, &down));
  EXPECT_EQ(0u, srd_msg_encode_trunc(buf.data(), kHeader + 11, 0, 0, 0));
  EXPECT_EQ(0u, srd_msg_encode_ping(buf.data(), kHeader - 1, 0));
  struct srd_msg_bye zero = {0, 0, 0, 0};
  EXPECT_EQ(0u, srd_msg_encode_bye(buf.data(), kHeader + 20, 0, &zero));
}

TEST(Msg, ProbeRoundTripAndBadFieldsAreRejected) {
  struct srd_msg m;
  const char *why = nullptr;
  std::vector<uint8_t> p(64);
  struct srd_msg_probe ask = {SRD_MAX_PATHS - 1, 1, 0xfffffffeu};
  p.resize(srd_msg_encode_probe(p.data(), p.size(), 9, &ask));
  ASSERT_EQ(kHeader + 6, p.size());
  ASSERT_EQ(0, decode(p, p.size(), &m, &why)) << (why ? why : "");
  EXPECT_EQ(SRD_MSG_PROBE, m.type);
  EXPECT_EQ(9u, m.dst_comm);
  EXPECT_EQ(SRD_MAX_PATHS - 1, m.u.probe.rail);
  EXPECT_EQ(1, m.u.probe.answer);
  EXPECT_EQ(0xfffffffeu, m.u.probe.round);
  std::vector<uint8_t> bad = p;
  bad[kHeader] = SRD_MAX_PATHS;
  expect_rejected(bad, bad.size(), "rail index out of range");
  bad = p;
  bad[kHeader + 1] = 2;
  expect_rejected(bad, bad.size(), "answer neither 0 nor 1");
  expect_rejected(p, p.size() - 1, "truncated probe");
  uint8_t small[64];
  EXPECT_EQ(0u, srd_msg_encode_probe(small, kHeader + 5, 0, &ask));
}

TEST(Msg, BadHeaderIsRejected) {
  std::vector<uint8_t> good = encode_bye(1, 2);
  for (int byte = 0; byte < 2; byte++) {
    std::vector<uint8_t> bad = good;
    bad[byte] ^= 0x01;
    expect_rejected(bad, bad.size(), "bad magic");
  }
  for (int v : {0, 1, 2, 3, 4, 8, 255}) {
    std::vector<uint8_t> bad = good;
    bad[2] = static_cast<uint8_t>(v);
    expect_rejected(bad, bad.size(), "bad version");
  }
  std::vector<uint8_t> ping = encode_ping(1);
  for (int type : {0, SRD_MSG_RTS + 1, 64, 255}) {
    std::vector<uint8_t> bad = ping;
    bad[3] = static_cast<uint8_t>(type);
    expect_rejected(bad, bad.size(), "unknown type");
    bad.resize(64, 0);
    expect_rejected(bad, bad.size(), "unknown type with a body");
  }
}

// One valid message of every type and several shapes.
std::vector<std::vector<uint8_t>> valid_messages(std::mt19937_64 &rng) {
  std::vector<std::vector<uint8_t>> out;
  for (auto type : {SRD_MSG_HELLO, SRD_MSG_ACCEPT}) {
    out.push_back(encode_peer(type, 1, make_peer(rng, 1, 1, 1).p));
    out.push_back(encode_peer(type, 2, make_peer(rng, 4, 2, 24).p));
    out.push_back(encode_peer(type, 3, make_peer(rng, 8, 8, 2).p));
  }
  for (int n : {1, 3, SRD_MAX_RECVS}) {
    for (int nkeys : {1, 4, 32}) {
      CtsCase k = make_cts(rng, static_cast<uint8_t>(n), static_cast<uint8_t>(nkeys));
      out.push_back(encode_cts(4, k.c, k.keys));
    }
  }
  for (size_t len : {size_t{0}, size_t{1}, size_t{100}}) out.push_back(encode_eager(5, 6, 7, random_bytes(rng, len)));
  out.push_back(encode_trunc(8, 9, 10));
  out.push_back(encode_ping(11));
  out.push_back(encode_bye(12, 13));
  out.push_back(encode_rts(14, 15));
  out.push_back(encode_bye(14, 15, SRD_BYE_DRAINED, 16));
  for (uint8_t answer : {0, 1}) {
    std::vector<uint8_t> p(64);
    struct srd_msg_probe probe = {3, answer, 0xfedcba98u};
    p.resize(srd_msg_encode_probe(p.data(), p.size(), 17, &probe));
    out.push_back(p);
  }
  for (uint8_t n : {0, 1, 5, SRD_RECV_SLOTS}) {
    struct srd_msg_fenced f = {static_cast<uint32_t>(rng()), static_cast<uint8_t>(n % SRD_MAX_PATHS), n, {}};
    for (int i = 0; i < n; i++) f.open[i] = {static_cast<uint32_t>(rng()), static_cast<uint8_t>(1 + i % SRD_MAX_RECVS)};
    std::vector<uint8_t> b(1024);
    b.resize(srd_msg_encode_fenced(b.data(), b.size(), 18, &f));
    out.push_back(b);
  }
  std::vector<uint8_t> st(64);
  struct srd_msg_settled settled = {7, 0xfffffff0u};
  st.resize(srd_msg_encode_settled(st.data(), st.size(), 19, &settled));
  out.push_back(st);
  return out;
}

TEST(Msg, EveryTruncationIsRejected) {
  std::mt19937_64 rng(16);
  for (const auto &msg : valid_messages(rng)) {
    struct srd_msg m;
    const char *why = nullptr;
    ASSERT_EQ(0, decode(msg, msg.size(), &m, &why)) << (why ? why : "");
    for (size_t len = 0; len < msg.size(); len++) expect_rejected(msg, len, "truncated message");
  }
}

TEST(Msg, TrailingBytesAreRejected) {
  std::mt19937_64 rng(17);
  for (auto msg : valid_messages(rng)) {
    size_t len = msg.size();
    std::vector<uint8_t> extra = random_bytes(rng, 16);
    msg.insert(msg.end(), extra.begin(), extra.end());
    for (size_t more = 1; more <= extra.size(); more++) expect_rejected(msg, len + more, "trailing bytes");
  }
}

// An accepted message must be exactly what the encoder would write for the
// decoded fields: then no count or length can reach past the buffer, and no
// byte is left over. The two padding bytes of a CTS are not compared.
void expect_canonical(const std::vector<uint8_t> &bytes, size_t len, const struct srd_msg &m) {
  std::vector<uint8_t> again(len + 64);
  size_t n = 0;
  switch (m.type) {
  case SRD_MSG_HELLO:
  case SRD_MSG_ACCEPT:
    ASSERT_GE(m.u.peer.nrails, 1);
    ASSERT_GE(m.u.peer.neps, 1);
    ASSERT_LE(m.u.peer.nrails * m.u.peer.neps, SRD_MAX_PATHS);
    ASSERT_GE(m.u.peer.name_len, 1);
    ASSERT_LE(m.u.peer.name_len, SRD_NAME_MAX);
    ASSERT_EQ(kPeerFixed + static_cast<size_t>(m.u.peer.nrails) * m.u.peer.neps * m.u.peer.name_len, len);
    n = srd_msg_encode_peer(again.data(), again.size(), m.type, m.dst_comm, &m.u.peer);
    break;
  case SRD_MSG_CTS: {
    ASSERT_GE(m.u.cts.n, 1);
    ASSERT_LE(m.u.cts.n, SRD_MAX_RECVS);
    ASSERT_GE(m.u.cts.nkeys, 1);
    ASSERT_LE(m.u.cts.nkeys, SRD_MAX_PATHS);
    ASSERT_EQ(kCtsFixed + static_cast<size_t>(m.u.cts.n) * (kCtsEntryFixed + 8 * static_cast<size_t>(m.u.cts.nkeys)),
              len);
    std::vector<uint64_t> keys;
    for (int i = 0; i < m.u.cts.n; i++)
      for (int r = 0; r < m.u.cts.nkeys; r++) keys.push_back(srd_cts_key(&m.u.cts, i, r));
    n = srd_msg_encode_cts(again.data(), again.size(), m.dst_comm, &m.u.cts, keys.data());
    again[kHeader + 6] = bytes[kHeader + 6];
    again[kHeader + 7] = bytes[kHeader + 7];
    break;
  }
  case SRD_MSG_EAGER:
    ASSERT_EQ(kEagerHeader + m.u.eager.len, len);
    n = srd_msg_encode_eager_header(again.data(), again.size(), m.dst_comm, m.u.eager.seq, m.u.eager.tag,
                                    m.u.eager.len);
    ASSERT_EQ(kEagerHeader, n);
    if (m.u.eager.len) memcpy(again.data() + n, m.u.eager.data, m.u.eager.len);
    n += m.u.eager.len;
    break;
  case SRD_MSG_TRUNC:
    n = srd_msg_encode_trunc(again.data(), again.size(), m.dst_comm, m.u.trunc.seq, m.u.trunc.size);
    break;
  case SRD_MSG_PING:
    n = srd_msg_encode_ping(again.data(), again.size(), m.dst_comm);
    break;
  case SRD_MSG_BYE:
    n = srd_msg_encode_bye(again.data(), again.size(), m.dst_comm, &m.u.bye);
    break;
  case SRD_MSG_RAIL:
    ASSERT_LT(m.u.rail.rail, SRD_MAX_PATHS);
    ASSERT_LE(m.u.rail.up, 1);
    ASSERT_LE(m.u.rail.stale, m.u.rail.up ? 0 : 1);
    n = srd_msg_encode_rail(again.data(), again.size(), m.dst_comm, &m.u.rail);
    break;
  case SRD_MSG_RTS:
    n = srd_msg_encode_rts(again.data(), again.size(), m.dst_comm, m.u.rts.seq);
    break;
  case SRD_MSG_PROBE:
    ASSERT_LT(m.u.probe.rail, SRD_MAX_PATHS);
    ASSERT_LE(m.u.probe.answer, 1);
    n = srd_msg_encode_probe(again.data(), again.size(), m.dst_comm, &m.u.probe);
    break;
  case SRD_MSG_RMA_SIGNAL:
    ASSERT_LE(m.u.rma_signal.nstripes, SRD_MAX_STRIPES);
    ASSERT_TRUE(m.u.rma_signal.op == SRD_RMA_SIGNAL_INC || m.u.rma_signal.op == SRD_RMA_SIGNAL_ADD);
    n = srd_msg_encode_rma_signal(again.data(), again.size(), m.dst_comm, &m.u.rma_signal);
    break;
  case SRD_MSG_RMA_ACK:
    n = srd_msg_encode_rma_ack(again.data(), again.size(), m.dst_comm, m.u.rma_ack.seq);
    break;
  case SRD_MSG_FENCED:
    ASSERT_LE(m.u.fenced.n, SRD_RECV_SLOTS);
    for (int i = 0; i < m.u.fenced.n; i++) {
      ASSERT_GE(m.u.fenced.open[i].count, 1);
      ASSERT_LE(m.u.fenced.open[i].count, SRD_MAX_RECVS);
    }
    n = srd_msg_encode_fenced(again.data(), again.size(), m.dst_comm, &m.u.fenced);
    break;
  case SRD_MSG_SETTLED:
    n = srd_msg_encode_settled(again.data(), again.size(), m.dst_comm, &m.u.settled);
    break;
  default:
    FAIL() << "accepted unknown type " << static_cast<int>(m.type);
  }
  ASSERT_EQ(len, n) << "type " << static_cast<int>(m.type);
  srd_msg_set_token(again.data(), m.token);
  ASSERT_EQ(0, memcmp(bytes.data(), again.data(), len)) << "type " << static_cast<int>(m.type);
}

void decode_any(const std::vector<uint8_t> &bytes, size_t len, int *accepted) {
  struct srd_msg m;
  const char *why = nullptr;
  int rc = decode(bytes, len, &m, &why);
  if (rc == 0) {
    ++*accepted;
    expect_canonical(bytes, len, m);
  } else {
    ASSERT_EQ(-1, rc);
    ASSERT_NE(nullptr, why);
  }
}

TEST(Msg, RandomBuffersNeverCrash) {
  std::mt19937_64 rng(18);
  int accepted = 0;
  for (int i = 0; i < 200000; i++) {
    std::vector<uint8_t> bytes = random_bytes(rng, rng() % 300);
    decode_any(bytes, bytes.size(), &accepted);
    if (HasFatalFailure()) return;
  }
  EXPECT_EQ(0, accepted) << "fully random bytes matched a magic and version";
}

TEST(Msg, RandomBodiesBehindAValidHeaderNeverCrash) {
  std::mt19937_64 rng(19);
  std::vector<uint8_t> header = encode_ping(0);
  int accepted = 0;
  for (int i = 0; i < 200000; i++) {
    // Short bodies with small counts, so that some are accepted.
    size_t len = kHeader + rng() % (i % 4 == 0 ? 400 : 48);
    std::vector<uint8_t> bytes = random_bytes(rng, len);
    memcpy(bytes.data(), header.data(), 3);
    bytes[3] = static_cast<uint8_t>(rng() % (SRD_MSG_RAIL + 2));
    if (bytes[3] == SRD_MSG_HELLO || bytes[3] == SRD_MSG_ACCEPT) {
      // nrails, neps, name_len are the 4th, 3rd and 2nd last fixed bytes.
      if (len > kPeerFixed - 4) bytes[kPeerFixed - 4] = static_cast<uint8_t>(rng() % 3);
      if (len > kPeerFixed - 3) bytes[kPeerFixed - 3] = static_cast<uint8_t>(rng() % 3);
      if (len > kPeerFixed - 2) bytes[kPeerFixed - 2] = static_cast<uint8_t>(rng() % 4);
    } else if (bytes[3] == SRD_MSG_CTS) {
      if (len > kHeader + 4) bytes[kHeader + 4] = static_cast<uint8_t>(rng() % 3);
      if (len > kHeader + 5) bytes[kHeader + 5] = static_cast<uint8_t>(rng() % 3);
    } else if (bytes[3] == SRD_MSG_EAGER && len > kEagerHeader - 1) {
      memset(bytes.data() + kEagerHeader - 4, 0, 4);
      bytes[kEagerHeader - 4] = static_cast<uint8_t>(rng() % 48);
    }
    decode_any(bytes, bytes.size(), &accepted);
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(accepted, 1000) << "the fuzzer should reach every decoder's success path";
}

TEST(Msg, MutatedValidMessagesNeverCrash) {
  std::mt19937_64 rng(20);
  std::vector<std::vector<uint8_t>> valid = valid_messages(rng);
  int accepted = 0;
  for (int i = 0; i < 100000; i++) {
    std::vector<uint8_t> bytes = valid[rng() % valid.size()];
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; f++) bytes[rng() % bytes.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
    size_t len = bytes.size();
    if (rng() % 4 == 0) len = rng() % (len + 1);
    decode_any(bytes, len, &accepted);
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(accepted, 0);
}

}  // namespace

TEST(RmaImm, RoundTripEveryStripeAndSequence) {
  for (uint32_t seq = 0; seq < SRD_RMA_SEQ_WINDOW; seq++)
    for (uint32_t ns = 1; ns <= SRD_MAX_STRIPES; ns++)
      for (uint32_t stripe = 0; stripe < ns; stripe++)
        for (uint32_t sig = 0; sig < 2; sig++) {
          const uint32_t ci = (seq * 2654435761u) & (SRD_MAX_COMMS - 1);
          uint32_t x = srd_rma_imm_pack({ci, seq, sig, ns, stripe});
          ASSERT_TRUE(srd_imm_is_rma(x));
          struct srd_rma_imm u;
          ASSERT_EQ(0, srd_rma_imm_unpack(x, &u));
          ASSERT_EQ(ci, u.write_id);
          ASSERT_EQ(seq, u.seq);
          ASSERT_EQ(sig, u.signal);
          ASSERT_EQ(ns, u.nstripes);
          ASSERT_EQ(stripe, u.stripe);
        }
}

TEST(RmaImm, TwoSidedImmediatesAreNeverRma) {
  for (uint32_t ns = 1; ns <= SRD_MAX_STRIPES; ns++)
    for (uint32_t stripe = 0; stripe < ns; stripe++)
      for (uint32_t entry = 0; entry < SRD_MAX_RECVS; entry++)
        ASSERT_FALSE(srd_imm_is_rma(srd_imm_pack({SRD_MAX_COMMS - 1, SRD_IMM_SLOT_MASK, ns, stripe, entry})));
}

TEST(RmaImm, SpareStripeNumbersAreRejected) {
  // Pairs 28..31 name no stripe of a count up to 7: a forged immediate.
  for (uint32_t pair = 28; pair < 32; pair++) {
    uint32_t x = SRD_IMM_RMA_MARK | (pair & 3u) << 24 | (pair >> 2) << 29;
    struct srd_rma_imm u;
    EXPECT_EQ(-1, srd_rma_imm_unpack(x, &u)) << pair;
  }
}

TEST(Msg, RmaSignalAndAckRoundTrip) {
  uint8_t buf[256];
  struct srd_msg_rma_signal s = {0xfffffff0u, 7, SRD_RMA_SIGNAL_ADD, 3, 4096, 0x0123456789abcdefull};
  size_t n = srd_msg_encode_rma_signal(buf, sizeof buf, 0x10002, &s);
  ASSERT_GT(n, 0u);
  struct srd_msg m;
  const char *why = nullptr;
  ASSERT_EQ(0, srd_msg_decode(buf, n, &m, &why)) << why;
  EXPECT_EQ(SRD_MSG_RMA_SIGNAL, m.type);
  EXPECT_EQ(0x10002u, m.dst_comm);
  EXPECT_EQ(s.seq, m.u.rma_signal.seq);
  EXPECT_EQ(s.nstripes, m.u.rma_signal.nstripes);
  EXPECT_EQ(s.op, m.u.rma_signal.op);
  EXPECT_EQ(s.window, m.u.rma_signal.window);
  EXPECT_EQ(s.offset, m.u.rma_signal.offset);
  EXPECT_EQ(s.value, m.u.rma_signal.value);
  s.op = 3;
  n = srd_msg_encode_rma_signal(buf, sizeof buf, 1, &s);
  EXPECT_EQ(-1, srd_msg_decode(buf, n, &m, &why));
  s.op = SRD_RMA_SIGNAL_INC;
  s.nstripes = SRD_MAX_STRIPES + 1;
  n = srd_msg_encode_rma_signal(buf, sizeof buf, 1, &s);
  EXPECT_EQ(-1, srd_msg_decode(buf, n, &m, &why));
  n = srd_msg_encode_rma_ack(buf, sizeof buf, 5, 77);
  ASSERT_EQ(0, srd_msg_decode(buf, n, &m, &why)) << why;
  EXPECT_EQ(SRD_MSG_RMA_ACK, m.type);
  EXPECT_EQ(77u, m.u.rma_ack.seq);
  for (size_t k = 0; k < n; k++) EXPECT_EQ(-1, srd_msg_decode(buf, k, &m, &why)) << k;
}

// The fence's answer and its settle notice (src/proto/fence.c): every field
// round-trips; a receive of no message or of more than a group's, or more
// receives than a comm has slots, is rejected, as is every truncation.
TEST(Msg, FenceAnswerAndSettleRoundTrip) {
  struct srd_msg_fenced f = {0x01020304u, 5, 3, {}};
  f.open[0] = {10, 1};
  f.open[1] = {0xffffffffu, SRD_MAX_RECVS};
  f.open[2] = {77, 3};
  std::vector<uint8_t> b(1024);
  b.resize(srd_msg_encode_fenced(b.data(), b.size(), 9, &f));
  ASSERT_EQ(kHeader + 6 + 3 * 5, b.size());
  struct srd_msg m;
  const char *why = nullptr;
  ASSERT_EQ(0, decode(b, b.size(), &m, &why)) << (why ? why : "");
  EXPECT_EQ(SRD_MSG_FENCED, m.type);
  EXPECT_EQ(f.round, m.u.fenced.round);
  EXPECT_EQ(5, m.u.fenced.rail);
  ASSERT_EQ(3, m.u.fenced.n);
  for (int i = 0; i < 3; i++) {
    EXPECT_EQ(f.open[i].seq, m.u.fenced.open[i].seq);
    EXPECT_EQ(f.open[i].count, m.u.fenced.open[i].count);
  }
  for (size_t len = 0; len < b.size(); len++) expect_rejected(b, len, "truncated fence answer");
  std::vector<uint8_t> bad = b;
  bad[kHeader + 4] = SRD_MAX_PATHS;
  expect_rejected(bad, bad.size(), "a rail out of range");
  bad = b;
  bad[kHeader + 6 + 4] = 0;
  expect_rejected(bad, bad.size(), "a receive of no message");
  bad[kHeader + 6 + 4] = SRD_MAX_RECVS + 1;
  expect_rejected(bad, bad.size(), "a receive of more messages than a group");
  bad = b;
  bad[kHeader + 5] = SRD_RECV_SLOTS + 1;
  bad.resize(kHeader + 6 + (SRD_RECV_SLOTS + 1) * 5, 1);
  expect_rejected(bad, bad.size(), "more receives than a comm has slots");
  f.n = SRD_RECV_SLOTS + 1;
  EXPECT_EQ(0u, srd_msg_encode_fenced(b.data(), 1024, 9, &f)) << "encoded more receives than a comm has";

  struct srd_msg_settled st = {0x0a0b0c0du, 0xfffffff0u};
  std::vector<uint8_t> sb(64);
  sb.resize(srd_msg_encode_settled(sb.data(), sb.size(), 4, &st));
  ASSERT_EQ(kHeader + 8, sb.size());
  ASSERT_EQ(0, decode(sb, sb.size(), &m, &why)) << (why ? why : "");
  EXPECT_EQ(SRD_MSG_SETTLED, m.type);
  EXPECT_EQ(st.round, m.u.settled.round);
  EXPECT_EQ(st.seq, m.u.settled.seq);
  for (size_t len = 0; len < sb.size(); len++) expect_rejected(sb, len, "truncated settle notice");
}
