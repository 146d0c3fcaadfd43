// Registration cache against a fake register/deregister pair. The fake
// allocates one record per registration and frees it on deregistration, so
// ASan reports a double deregistration and LeakSanitizer a missing one. The
// cache never touches the memory it registers, so addresses are made up.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

extern "C" {
#include "srd/mr.h"
}

namespace {

struct Registration {
  uintptr_t base;
  size_t len;
  int type;
  int device;
  int fd;
  uint64_t offset;
};

struct Fake {
  int regs = 0, deregs = 0;
  int fail_with = 0;
  std::set<Registration *> live;
  std::mutex lock;

  static int reg(void *arg, void *base, size_t len, int type, int device, unsigned access, int fd, uint64_t offset,
                 void **handle) {
    (void)access;
    Fake *f = static_cast<Fake *>(arg);
    std::lock_guard<std::mutex> g(f->lock);
    if (f->fail_with) return f->fail_with;
    Registration *r = new Registration{reinterpret_cast<uintptr_t>(base), len, type, device, fd, offset};
    f->live.insert(r);
    f->regs++;
    *handle = r;
    return 0;
  }

  static void dereg(void *arg, void *handle) {
    Fake *f = static_cast<Fake *>(arg);
    std::lock_guard<std::mutex> g(f->lock);
    Registration *r = static_cast<Registration *>(handle);
    EXPECT_EQ(1u, f->live.erase(r)) << "deregistered a handle that is not registered";
    f->deregs++;
    delete r;
  }
};

constexpr size_t kPage = 4096;
constexpr uintptr_t kArena = 0x7f0000000000;
constexpr int kHost = 1;  // NCCL_PTR_HOST
constexpr int kCuda = 2;  // NCCL_PTR_CUDA
constexpr int kDmabufOnly = 8;

void *at(uintptr_t offset) { return reinterpret_cast<void *>(kArena + offset); }

class MrCache : public ::testing::Test {
 protected:
  void SetUp() override { init(kPage); }
  void TearDown() override {
    if (initialized) fini();
    EXPECT_EQ(fake.regs, fake.deregs);
    EXPECT_TRUE(fake.live.empty());
  }
  void init(size_t page) {
    struct srd_mr_ops ops = {Fake::reg, Fake::dereg, &fake};
    srd_mr_cache_init(&cache, &ops, page);
    initialized = true;
  }
  void fini() {
    srd_mr_cache_fini(&cache);
    initialized = false;
  }
  struct srd_mr_ref *acquire(uintptr_t offset, size_t len, int type = kHost, int fd = -1, uint64_t dmabuf_off = 0,
                             unsigned access = 0, int device = -1, uint64_t owner = 0) {
    struct srd_mr_ref *ref = nullptr;
    int rc = srd_mr_acquire(&cache, at(offset), len, type, device, access, owner, fd, dmabuf_off, &ref);
    EXPECT_EQ(0, rc);
    EXPECT_NE(nullptr, ref);
    return ref;
  }
  static const Registration *reg_of(const struct srd_mr_ref *ref) {
    return static_cast<const Registration *>(ref->mr->handle);
  }

  Fake fake;
  struct srd_mr_cache cache;
  bool initialized = false;
};

// Memory a peer reaches (an owner's): a range inside another owner's
// registration, or inside a larger one of the same owner, gets its own exact
// registration (issue 23: a 4 KiB buffer of one comm got the key of another
// comm's 64 KiB registration around it).
TEST_F(MrCache, OwnedRangesAreExactAndNeverShared) {
  struct srd_mr_ref *big = acquire(0, 65536, kHost, -1, 0, 2, -1, 7);
  struct srd_mr_ref *inside_other = acquire(4096, 4096, kHost, -1, 0, 2, -1, 8);
  EXPECT_NE(big->mr, inside_other->mr);
  EXPECT_EQ(at(4096), reinterpret_cast<void *>(inside_other->mr->base));
  EXPECT_EQ(4096u, inside_other->mr->len);
  struct srd_mr_ref *inside_own = acquire(8192, 100, kHost, -1, 0, 2, -1, 7);
  EXPECT_NE(big->mr, inside_own->mr);
  EXPECT_EQ(100u, inside_own->mr->len); // exact, not page-rounded
  struct srd_mr_ref *same = acquire(8192, 100, kHost, -1, 0, 2, -1, 7);
  EXPECT_EQ(inside_own->mr, same->mr); // the owner's exact range again: shared
  struct srd_mr_ref *unowned = acquire(8192, 100, kHost, -1, 0, 2, -1, 0);
  EXPECT_NE(inside_own->mr, unowned->mr);
  EXPECT_EQ(4, fake.regs);
  for (auto *r : {big, inside_other, inside_own, same, unowned}) EXPECT_EQ(0, srd_mr_release(&cache, r));
}

// A handle NCCL uses in both directions holds a registration of each access
// class (the second made on first use). Releasing it drops both at once,
// not when the cache ends; an entry another handle still holds stays.
TEST_F(MrCache, ReleaseDropsTheOtherClassToo) {
  constexpr unsigned kSend = 1, kRecv = 2;
  struct srd_mr_ref *ref = acquire(0, 8192, kHost, -1, 0, kSend);
  struct srd_mr *other = nullptr;
  ASSERT_EQ(0, srd_mr_entry_for(&cache, ref, kRecv, 0, &other));
  ASSERT_NE(nullptr, other);
  EXPECT_EQ(kRecv, other->access);
  EXPECT_EQ(2, fake.regs);
  struct srd_mr_ref *recv_only = acquire(0, 8192, kHost, -1, 0, kRecv);
  EXPECT_EQ(2, fake.regs) << "the receive class is shared";
  EXPECT_EQ(0, srd_mr_release(&cache, ref));
  EXPECT_EQ(1, fake.deregs) << "the send class is still registered, or the shared receive class was dropped";
  EXPECT_EQ(0, srd_mr_release(&cache, recv_only));
  EXPECT_EQ(2, fake.deregs);
  ref = acquire(0, 8192, kHost, -1, 0, kSend);
  ASSERT_EQ(0, srd_mr_entry_for(&cache, ref, kRecv, 0, &other));
  EXPECT_EQ(0, srd_mr_release(&cache, ref));
  EXPECT_EQ(4, fake.deregs) << "a handle of both classes left a registration behind";
  EXPECT_TRUE(fake.live.empty());
}

TEST_F(MrCache, SameRangeRegistersOncePageRounded) {
  struct srd_mr_ref *a = acquire(100, 1000);
  struct srd_mr_ref *b = acquire(100, 1000);
  struct srd_mr_ref *c = acquire(100, 1000);
  EXPECT_EQ(1, fake.regs);
  EXPECT_NE(a, b);
  EXPECT_NE(b, c);
  EXPECT_EQ(a->mr, b->mr);
  EXPECT_EQ(a->mr, c->mr);
  EXPECT_EQ(3, a->mr->refs);
  const Registration *r = reg_of(a);
  EXPECT_EQ(kArena, r->base);
  EXPECT_EQ(kPage, r->len);
  EXPECT_EQ(kHost, r->type);
  EXPECT_EQ(-1, r->fd);
  EXPECT_EQ(0, srd_mr_release(&cache, b));
  EXPECT_EQ(0, srd_mr_release(&cache, a));
  EXPECT_EQ(0, fake.deregs);
  EXPECT_EQ(1, c->mr->refs);
  EXPECT_EQ(0, srd_mr_release(&cache, c));
  EXPECT_EQ(1, fake.deregs);
  // Registered afresh after the last release.
  struct srd_mr_ref *d = acquire(100, 1000);
  EXPECT_EQ(2, fake.regs);
  EXPECT_EQ(0, srd_mr_release(&cache, d));
  EXPECT_EQ(2, fake.deregs);
}

TEST_F(MrCache, RangeSpanningPagesIsRoundedOutward) {
  struct srd_mr_ref *a = acquire(kPage - 10, 20);
  EXPECT_EQ(kArena, reg_of(a)->base);
  EXPECT_EQ(2 * kPage, reg_of(a)->len);
  struct srd_mr_ref *b = acquire(5 * kPage, kPage);
  EXPECT_EQ(kArena + 5 * kPage, reg_of(b)->base);
  EXPECT_EQ(kPage, reg_of(b)->len);
  EXPECT_EQ(2, fake.regs);
  EXPECT_EQ(0, srd_mr_release(&cache, a));
  EXPECT_EQ(0, srd_mr_release(&cache, b));
}

TEST_F(MrCache, OtherPageSize) {
  fini();
  init(65536);
  struct srd_mr_ref *a = acquire(70000, 10);
  EXPECT_EQ(kArena + 65536, reg_of(a)->base);
  EXPECT_EQ(65536u, reg_of(a)->len);
  struct srd_mr_ref *b = acquire(65536 + 60000, 5000);
  EXPECT_EQ(1, fake.regs);
  EXPECT_EQ(0, srd_mr_release(&cache, a));
  EXPECT_EQ(0, srd_mr_release(&cache, b));
}

TEST_F(MrCache, ContainedRangeSharesTheRegistration) {
  struct srd_mr_ref *big = acquire(100, 3 * kPage);  // registers pages 0..3
  struct srd_mr_ref *inner = acquire(kPage + 7, 100);
  struct srd_mr_ref *tail = acquire(4 * kPage - 1, 1);  // last byte of page 3
  struct srd_mr_ref *head = acquire(0, 1);  // page 0, before NCCL's range but inside the registration
  EXPECT_EQ(1, fake.regs);
  EXPECT_EQ(big->mr, inner->mr);
  EXPECT_EQ(big->mr, tail->mr);
  EXPECT_EQ(big->mr, head->mr);
  EXPECT_EQ(4, big->mr->refs);
  // One byte past the registration needs a new one.
  struct srd_mr_ref *past = acquire(4 * kPage - 1, 2);
  EXPECT_EQ(2, fake.regs);
  EXPECT_NE(big->mr, past->mr);
  // Releasing the big range keeps the entry while smaller ones hold it.
  EXPECT_EQ(0, srd_mr_release(&cache, big));
  EXPECT_EQ(0, fake.deregs);
  struct srd_mr_ref *again = acquire(2 * kPage, kPage);
  EXPECT_EQ(inner->mr, again->mr);
  EXPECT_EQ(2, fake.regs);
  for (struct srd_mr_ref *r : {inner, tail, head, again}) EXPECT_EQ(0, srd_mr_release(&cache, r));
  EXPECT_EQ(1, fake.deregs);
  EXPECT_EQ(0, srd_mr_release(&cache, past));
  EXPECT_EQ(2, fake.deregs);
}

TEST_F(MrCache, OverlappingRanges) {
  struct srd_mr_ref *a = acquire(0, 2 * kPage);         // pages 0-1
  struct srd_mr_ref *b = acquire(kPage, 3 * kPage);     // pages 1-3: not inside a
  struct srd_mr_ref *c = acquire(kPage + 10, 100);      // inside both
  struct srd_mr_ref *d = acquire(3 * kPage + 10, 100);  // inside b only
  EXPECT_EQ(2, fake.regs);
  EXPECT_NE(a->mr, b->mr);
  EXPECT_TRUE(c->mr == a->mr || c->mr == b->mr);
  EXPECT_EQ(b->mr, d->mr);
  const bool c_on_a = c->mr == a->mr;
  // Each release drops the entry that ref holds, whatever the order.
  EXPECT_EQ(0, srd_mr_release(&cache, b));
  EXPECT_EQ(0, srd_mr_release(&cache, a));
  EXPECT_EQ(c_on_a ? 0 : 1, fake.deregs);
  EXPECT_EQ(0, srd_mr_release(&cache, c));
  EXPECT_EQ(1, fake.deregs);
  EXPECT_EQ(1u, fake.live.size());
  EXPECT_EQ(kArena + kPage, (*fake.live.begin())->base);
  EXPECT_EQ(0, srd_mr_release(&cache, d));
  EXPECT_EQ(2, fake.deregs);
}

TEST_F(MrCache, DifferentTypesNeverShare) {
  struct srd_mr_ref *host = acquire(0, kPage, kHost);
  struct srd_mr_ref *cuda = acquire(0, kPage, kCuda);
  struct srd_mr_ref *cuda_inner = acquire(100, 100, kCuda);
  struct srd_mr_ref *host_inner = acquire(100, 100, kHost);
  EXPECT_EQ(2, fake.regs);
  EXPECT_NE(host->mr, cuda->mr);
  EXPECT_EQ(cuda->mr, cuda_inner->mr);
  EXPECT_EQ(host->mr, host_inner->mr);
  EXPECT_EQ(kHost, reg_of(host)->type);
  EXPECT_EQ(kCuda, reg_of(cuda)->type);
  for (struct srd_mr_ref *r : {host, cuda, cuda_inner, host_inner}) EXPECT_EQ(0, srd_mr_release(&cache, r));
  EXPECT_EQ(2, fake.deregs);
}

TEST_F(MrCache, GpuMemoryIsExactAndKeyedByDevice) {
  struct srd_mr_ref *g0 = acquire(100, 1000, kCuda, -1, 0, 0, 0);
  // Registered exactly as given: never rounded out to pages.
  EXPECT_EQ(kArena + 100, reg_of(g0)->base);
  EXPECT_EQ(1000u, reg_of(g0)->len);
  EXPECT_EQ(0, reg_of(g0)->device);
  struct srd_mr_ref *g0_inner = acquire(200, 100, kCuda, -1, 0, 0, 0);
  EXPECT_EQ(g0->mr, g0_inner->mr);
  // The same addresses on another GPU, or as host memory, are other registrations.
  struct srd_mr_ref *g1 = acquire(200, 100, kCuda, -1, 0, 0, 1);
  struct srd_mr_ref *host = acquire(200, 100, kHost);
  EXPECT_NE(g0->mr, g1->mr);
  EXPECT_NE(g0->mr, host->mr);
  EXPECT_EQ(1, reg_of(g1)->device);
  EXPECT_EQ(-1, reg_of(host)->device);
  EXPECT_EQ(3, fake.regs);
  for (struct srd_mr_ref *r : {g0, g0_inner, g1, host}) EXPECT_EQ(0, srd_mr_release(&cache, r));
  EXPECT_EQ(3, fake.deregs);
}

TEST_F(MrCache, DmabufIsNeverShared) {
  struct srd_mr_ref *a = acquire(100, 1000, kCuda, 5, 4096);
  struct srd_mr_ref *b = acquire(100, 1000, kCuda, 5, 4096);
  EXPECT_EQ(2, fake.regs);
  EXPECT_NE(a->mr, b->mr);
  // Exactly the range and offset given: the fd's offset names the start.
  EXPECT_EQ(kArena + 100, reg_of(a)->base);
  EXPECT_EQ(1000u, reg_of(a)->len);
  EXPECT_EQ(5, reg_of(a)->fd);
  EXPECT_EQ(4096u, reg_of(a)->offset);
  // Nor does it reuse an ordinary registration that covers the range.
  struct srd_mr_ref *plain = acquire(0, kPage, kCuda);
  struct srd_mr_ref *c = acquire(100, 1000, kCuda, 6, 0);
  EXPECT_EQ(4, fake.regs);
  EXPECT_NE(plain->mr, c->mr);
  EXPECT_EQ(6, reg_of(c)->fd);
  EXPECT_EQ(0, srd_mr_release(&cache, a));
  EXPECT_EQ(1, fake.deregs);
  for (struct srd_mr_ref *r : {b, plain, c}) EXPECT_EQ(0, srd_mr_release(&cache, r));
  EXPECT_EQ(4, fake.deregs);
}

TEST_F(MrCache, CoversUsesTheExactRange) {
  struct srd_mr_ref *a = acquire(100, 1000);
  EXPECT_TRUE(srd_mr_covers(a, at(100), 1000));
  EXPECT_TRUE(srd_mr_covers(a, at(100), 0));
  EXPECT_TRUE(srd_mr_covers(a, at(500), 600));
  EXPECT_TRUE(srd_mr_covers(a, at(1099), 1));
  EXPECT_TRUE(srd_mr_covers(a, at(1100), 0));
  // Inside the registered page but outside what NCCL registered.
  EXPECT_FALSE(srd_mr_covers(a, at(99), 1));
  EXPECT_FALSE(srd_mr_covers(a, at(0), 100));
  EXPECT_FALSE(srd_mr_covers(a, at(100), 1001));
  EXPECT_FALSE(srd_mr_covers(a, at(1100), 1));
  EXPECT_FALSE(srd_mr_covers(a, at(2000), 10));
  EXPECT_FALSE(srd_mr_covers(a, at(100), SIZE_MAX));
  EXPECT_FALSE(srd_mr_covers(a, at(1099), SIZE_MAX));
  // A second handle on the same entry keeps its own range.
  struct srd_mr_ref *b = acquire(2000, 100);
  ASSERT_EQ(a->mr, b->mr);
  EXPECT_TRUE(srd_mr_covers(b, at(2000), 100));
  EXPECT_FALSE(srd_mr_covers(b, at(100), 10));
  EXPECT_FALSE(srd_mr_covers(a, at(2000), 100));
  EXPECT_EQ(0, srd_mr_release(&cache, a));
  EXPECT_EQ(0, srd_mr_release(&cache, b));
}

TEST_F(MrCache, ForeignAndStaleHandlesAreRejected) {
  struct srd_mr_ref *a = acquire(0, 100);
  // A foreign handle full of garbage: rejected without being read.
  struct srd_mr_ref foreign;
  memset(&foreign, 0xab, sizeof(foreign));
  EXPECT_EQ(-1, srd_mr_release(&cache, &foreign));
  EXPECT_EQ(-1, srd_mr_release(&cache, nullptr));
  EXPECT_EQ(0, fake.deregs);
  EXPECT_EQ(1, a->mr->refs);
  struct srd_mr_ref *b = acquire(0, 100);
  EXPECT_EQ(0, srd_mr_release(&cache, a));
  // a is released now: releasing it again is refused, and it reads as dead.
  EXPECT_EQ(-1, srd_mr_release(&cache, a));
  EXPECT_FALSE(srd_mr_live(a));
  EXPECT_TRUE(srd_mr_live(b));
  EXPECT_EQ(0, fake.deregs);
  EXPECT_EQ(1, b->mr->refs);
  EXPECT_EQ(0, srd_mr_release(&cache, b));
  EXPECT_EQ(-1, srd_mr_release(&cache, b));
  EXPECT_EQ(1, fake.deregs);
}

TEST_F(MrCache, FiniDeregistersWhatRemains) {
  std::vector<struct srd_mr_ref *> refs;
  for (int i = 0; i < 40; i++) refs.push_back(acquire(static_cast<uintptr_t>(i) * 3 * kPage, kPage + 1));
  refs.push_back(acquire(0, 10));
  refs.push_back(acquire(0, 10, kCuda));
  refs.push_back(acquire(0, 10, kCuda, 3, 0));
  EXPECT_EQ(0, srd_mr_release(&cache, refs[5]));
  EXPECT_EQ(42, fake.regs);
  EXPECT_EQ(1, fake.deregs);
  fini();
  EXPECT_EQ(42, fake.deregs);
  EXPECT_TRUE(fake.live.empty());
}

TEST_F(MrCache, FailedRegistrationLeavesNothing) {
  fake.fail_with = -EIO;
  struct srd_mr_ref *ref = nullptr;
  EXPECT_EQ(-EIO, srd_mr_acquire(&cache, at(0), 100, kHost, -1, 0, 0, -1, 0, &ref));
  EXPECT_EQ(nullptr, ref);
  EXPECT_EQ(-EIO, srd_mr_acquire(&cache, at(0), 100, kHost, -1, 0, 0, -1, 0, &ref));
  fake.fail_with = 0;
  ref = acquire(0, 100);
  EXPECT_EQ(1, fake.regs);
  EXPECT_EQ(1, ref->mr->refs);
  EXPECT_EQ(0, srd_mr_release(&cache, ref));
}

TEST_F(MrCache, BadRangesAreRejected) {
  struct srd_mr_ref *ref = nullptr;
  EXPECT_EQ(-EINVAL, srd_mr_acquire(&cache, nullptr, 100, kHost, -1, 0, 0, -1, 0, &ref));
  EXPECT_EQ(-EINVAL, srd_mr_acquire(&cache, reinterpret_cast<void *>(UINTPTR_MAX - 100), 10, kHost, -1, 0, 0, -1, 0, &ref));
  EXPECT_EQ(-EINVAL, srd_mr_acquire(&cache, at(0), SIZE_MAX, kHost, -1, 0, 0, -1, 0, &ref));
  EXPECT_EQ(-EINVAL, srd_mr_acquire(&cache, at(0), SIZE_MAX - kPage + 1, kHost, -1, 0, 0, -1, 0, &ref));
  EXPECT_EQ(nullptr, ref);
  EXPECT_EQ(0, fake.regs);
  // An empty range is a valid registration of the page it names.
  ref = acquire(10, 0);
  EXPECT_EQ(kArena, reg_of(ref)->base);
  EXPECT_EQ(kPage, reg_of(ref)->len);
  EXPECT_EQ(0, srd_mr_release(&cache, ref));
}

TEST_F(MrCache, ManyBuffersEachHitTheirOwnEntry) {
  std::vector<struct srd_mr_ref *> outer, inner;
  for (int i = 0; i < 200; i++) outer.push_back(acquire(static_cast<uintptr_t>(i) * 4 * kPage, 2 * kPage));
  for (int i = 199; i >= 0; i--) inner.push_back(acquire(static_cast<uintptr_t>(i) * 4 * kPage + kPage, 64));
  EXPECT_EQ(200, fake.regs);
  for (int i = 0; i < 200; i++) EXPECT_EQ(outer[static_cast<size_t>(i)]->mr, inner[static_cast<size_t>(199 - i)]->mr);
  for (auto *r : outer) EXPECT_EQ(0, srd_mr_release(&cache, r));
  EXPECT_EQ(0, fake.deregs);
  for (auto *r : inner) EXPECT_EQ(0, srd_mr_release(&cache, r));
  EXPECT_EQ(200, fake.deregs);
}

// Random acquires and releases against the invariants: every handle's entry
// covers its exact range in whole pages with the right type; an entry stays
// registered exactly while some handle holds it.
TEST_F(MrCache, RandomizedAgainstInvariants) {
  std::mt19937_64 rng(7);
  std::vector<struct srd_mr_ref *> held;
  for (int step = 0; step < 20000; step++) {
    if (held.empty() || rng() % 5 < 3) {
      uintptr_t off = rng() % (64 * kPage);
      size_t len = rng() % 4 == 0 ? rng() % 64 : rng() % (8 * kPage);
      // dmabuf requests use a type of their own, so this test does not
      // depend on whether plain memory may reuse a dmabuf entry.
      int fd = rng() % 10 == 0 ? 9 : -1;
      int type = fd >= 0 ? kDmabufOnly : rng() % 2 ? kHost : kCuda;
      struct srd_mr_ref *ref = acquire(off, len, type, fd, fd >= 0 ? 123 : 0);
      ASSERT_NE(nullptr, ref);
      const Registration *r = reg_of(ref);
      ASSERT_EQ(type, r->type);
      ASSERT_EQ(fd, r->fd);
      ASSERT_LE(r->base, kArena + off);
      ASSERT_GE(r->base + r->len, kArena + off + len);
      if (fd < 0) {
        ASSERT_EQ(0u, r->base % kPage);
        ASSERT_EQ(0u, r->len % kPage);
      } else {
        ASSERT_EQ(1, ref->mr->refs) << "a dmabuf registration was shared";
      }
      ASSERT_TRUE(srd_mr_covers(ref, at(off), len));
      held.push_back(ref);
    } else {
      size_t i = rng() % held.size();
      ASSERT_EQ(0, srd_mr_release(&cache, held[i]));
      held[i] = held.back();
      held.pop_back();
    }
    if (step % 500 == 0 || held.empty()) {
      std::map<const struct srd_mr *, int> refs;
      for (auto *h : held) refs[h->mr]++;
      ASSERT_EQ(refs.size(), fake.live.size());
      for (auto &kv : refs) {
        ASSERT_EQ(kv.second, kv.first->refs);
        ASSERT_EQ(1u, fake.live.count(static_cast<Registration *>(kv.first->handle)));
      }
    }
  }
  for (auto *h : held) ASSERT_EQ(0, srd_mr_release(&cache, h));
  EXPECT_EQ(fake.regs, fake.deregs);
}

TEST_F(MrCache, ConcurrentAcquireAndRelease) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; t++) {
    threads.emplace_back([this, t] {
      std::mt19937_64 rng(static_cast<uint64_t>(t));
      for (int i = 0; i < 5000; i++) {
        struct srd_mr_ref *ref = nullptr;
        uintptr_t off = (rng() % 8) * kPage + rng() % 100;
        if (srd_mr_acquire(&cache, at(off), 100, kHost, -1, 0, 0, -1, 0, &ref) != 0) {
          ADD_FAILURE() << "acquire failed";
          return;
        }
        if (!srd_mr_covers(ref, at(off), 100)) ADD_FAILURE() << "handle does not cover its range";
        if (srd_mr_release(&cache, ref) != 0) ADD_FAILURE() << "release failed";
      }
    });
  }
  for (auto &th : threads) th.join();
  EXPECT_EQ(fake.regs, fake.deregs);
  EXPECT_TRUE(fake.live.empty());
}

}  // namespace

// A receive registration (remote write) and a send one of the same bytes are
// separate entries: a send buffer never gets the rights of a receive buffer.
TEST_F(MrCache, AccessClassesNeverShare) {
  struct srd_mr_ref *send = acquire(0, 100, kHost, -1, 0, 1);
  struct srd_mr_ref *recv = acquire(0, 100, kHost, -1, 0, 2);
  EXPECT_NE(send->mr, recv->mr);
  EXPECT_EQ(2, fake.regs);
  struct srd_mr_ref *recv2 = acquire(10, 50, kHost, -1, 0, 2);
  EXPECT_EQ(recv->mr, recv2->mr);
  EXPECT_EQ(0, srd_mr_release(&cache, send));
  EXPECT_EQ(0, srd_mr_release(&cache, recv));
  EXPECT_EQ(0, srd_mr_release(&cache, recv2));
}

// Page size 1: the registration is exactly NCCL's range, nothing around it.
TEST(MrCacheExact, RegistersExactly) {
  Fake fake;
  struct srd_mr_cache cache;
  struct srd_mr_ops ops = {Fake::reg, Fake::dereg, &fake};
  srd_mr_cache_init(&cache, &ops, 1);
  struct srd_mr_ref *ref = nullptr;
  ASSERT_EQ(0, srd_mr_acquire(&cache, at(1000), 256, kHost, -1, 0, 0, -1, 0, &ref));
  const Registration *r = static_cast<const Registration *>(ref->mr->handle);
  EXPECT_EQ(kArena + 1000, r->base);
  EXPECT_EQ(256u, r->len);
  EXPECT_EQ(0, srd_mr_release(&cache, ref));
  srd_mr_cache_fini(&cache);
  EXPECT_EQ(fake.regs, fake.deregs);
}
