// Striping of a message over paths: fixed cases for each rule, then a
// randomized property test over sizes, path counts and limits.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

extern "C" {
#include "srd/sched.h"
}

namespace {

constexpr int kMaxOut = 32;

struct Split {
  int n;
  unsigned cursor_before, cursor_after;
  std::vector<struct srd_stripe> s;
};

Split split(const struct srd_sched_params &p, size_t size, unsigned cursor = 0, int max_out = kMaxOut) {
  Split r;
  r.cursor_before = cursor;
  r.s.assign(static_cast<size_t>(max_out) + 1, {-7, 7, 7});
  r.n = srd_sched_split(&p, size, &cursor, r.s.data(), max_out);
  r.cursor_after = cursor;
  EXPECT_EQ(-7, r.s[static_cast<size_t>(max_out)].path) << "wrote past max_out";
  r.s.resize(r.n > 0 ? static_cast<size_t>(r.n) : 0);
  return r;
}

std::string describe(const struct srd_sched_params &p, size_t size, const Split &r) {
  std::ostringstream o;
  o << "npaths=" << p.npaths << " threshold=" << p.threshold << " min_stripe=" << p.min_stripe
    << " max_write=" << p.max_write << " size=" << size << " cursor=" << r.cursor_before << " ->";
  for (const auto &s : r.s) o << " [" << s.path << " " << s.offset << "+" << s.len << "]";
  return o.str();
}

// The rules every successful split obeys, whatever the parameters.
void check_rules(const struct srd_sched_params &p, size_t size, const Split &r, int max_out) {
  ASSERT_GE(r.n, 1);
  ASSERT_LE(r.n, max_out);
  int npaths = p.npaths > 0 ? p.npaths : 1;
  size_t off = 0;
  for (int i = 0; i < r.n; i++) {
    const struct srd_stripe &s = r.s[static_cast<size_t>(i)];
    ASSERT_EQ(off, s.offset) << "stripe " << i << ": bytes covered once, in order";
    if (size) {
      ASSERT_GT(s.len, 0u) << "stripe " << i << " is empty";
    }
    if (i + 1 < r.n) {
      ASSERT_EQ(0u, s.len % SRD_STRIPE_ALIGN) << "stripe " << i << " is not aligned";
    }
    if (p.max_write) {
      ASSERT_LE(s.len, p.max_write) << "stripe " << i << " exceeds max_write";
    }
    ASSERT_EQ(static_cast<int>((r.cursor_before + static_cast<unsigned>(i)) % static_cast<unsigned>(npaths)), s.path)
        << "stripe " << i << ": paths rotate from the cursor";
    off += s.len;
  }
  ASSERT_EQ(size, off) << "every byte covered";
  if (size == 0) {
    ASSERT_EQ(1, r.n);
  }
  ASSERT_EQ(r.cursor_before + static_cast<unsigned>(r.n), r.cursor_after);
}

// The description is built only on failure: the randomized test calls this
// hundreds of thousands of times.
void check_valid(const struct srd_sched_params &p, size_t size, const Split &r, int max_out = kMaxOut) {
  bool failed_before = ::testing::Test::HasFailure();
  check_rules(p, size, r, max_out);
  if (!failed_before && ::testing::Test::HasFailure()) ADD_FAILURE() << "in " << describe(p, size, r);
}

struct srd_sched_params params(int npaths, size_t threshold, size_t min_stripe, size_t max_write) {
  struct srd_sched_params p;
  p.npaths = npaths;
  p.threshold = threshold;
  p.min_stripe = min_stripe;
  p.max_write = max_write;
  return p;
}

TEST(Sched, ZeroLengthIsOneEmptyStripe) {
  for (int npaths : {1, 2, 8}) {
    for (size_t threshold : {size_t{0}, size_t{1}, size_t{1} << 20}) {
      for (size_t max_write : {size_t{0}, size_t{4096}}) {
        struct srd_sched_params p = params(npaths, threshold, 4096, max_write);
        Split r = split(p, 0, 5);
        check_valid(p, 0, r);
        ASSERT_EQ(1, r.n);
        EXPECT_EQ(0u, r.s[0].offset);
        EXPECT_EQ(0u, r.s[0].len);
        EXPECT_EQ(static_cast<int>(5u % static_cast<unsigned>(npaths)), r.s[0].path);
      }
    }
  }
}

TEST(Sched, BelowThresholdIsOneStripe) {
  struct srd_sched_params p = params(8, 1 << 20, 128, 0);
  for (size_t size : {size_t{1}, size_t{127}, size_t{128}, size_t{4096}, size_t{65537}, (size_t{1} << 20) - 1}) {
    Split r = split(p, size, 3);
    check_valid(p, size, r);
    EXPECT_EQ(1, r.n) << size;
    EXPECT_EQ(3, r.s[0].path);
  }
  // At the threshold it splits.
  Split r = split(p, 1 << 20, 3);
  check_valid(p, 1 << 20, r);
  EXPECT_EQ(8, r.n);
}

TEST(Sched, OnePathIsOneStripe) {
  struct srd_sched_params p = params(1, 0, 128, 0);
  for (size_t size : {size_t{1}, size_t{4096}, size_t{1} << 30}) {
    Split r = split(p, size, 9);
    check_valid(p, size, r);
    EXPECT_EQ(1, r.n);
    EXPECT_EQ(0, r.s[0].path);
  }
}

TEST(Sched, EvenSplitOverAllPaths) {
  struct srd_sched_params p = params(4, 0, 128, 0);
  Split r = split(p, 4 * 65536, 0);
  check_valid(p, 4 * 65536, r);
  ASSERT_EQ(4, r.n);
  for (int i = 0; i < 4; i++) {
    EXPECT_EQ(65536u, r.s[static_cast<size_t>(i)].len);
    EXPECT_EQ(i, r.s[static_cast<size_t>(i)].path);
  }
}

TEST(Sched, UnevenSizeKeepsAlignmentAndCoversTheTail) {
  struct srd_sched_params p = params(3, 0, 128, 0);
  for (size_t size : {size_t{1000}, size_t{1000001}, size_t{3} * 128 + 1, size_t{12345678}}) {
    Split r = split(p, size, 1);
    check_valid(p, size, r);
    EXPECT_GE(r.n, 2) << size;
    EXPECT_LE(r.n, 3) << size;
  }
}

TEST(Sched, CursorRotatesAcrossCalls) {
  // Single-stripe messages walk the paths one by one.
  struct srd_sched_params p = params(5, 1 << 20, 128, 0);
  unsigned cursor = 0;
  std::vector<int> uses(5, 0);
  for (int i = 0; i < 50; i++) {
    struct srd_stripe s[kMaxOut];
    ASSERT_EQ(1, srd_sched_split(&p, 4096, &cursor, s, kMaxOut));
    EXPECT_EQ(i % 5, s[0].path);
    uses[static_cast<size_t>(s[0].path)]++;
  }
  for (int u : uses) {
    EXPECT_EQ(10, u);
  }
  // Split messages start where the previous one stopped.
  p.threshold = 0;
  p.min_stripe = 4096;
  Split a = split(p, 3 * 4096, 2);
  check_valid(p, 3 * 4096, a);
  ASSERT_EQ(3, a.n);
  EXPECT_EQ(5u, a.cursor_after);
  Split b = split(p, 3 * 4096, a.cursor_after);
  check_valid(p, 3 * 4096, b);
  EXPECT_EQ(0, b.s[0].path);
}

TEST(Sched, CursorWrapsAroundUnsignedMax) {
  struct srd_sched_params p = params(3, 0, 128, 0);
  Split r = split(p, 3 * 4096, UINT32_MAX - 1);
  check_valid(p, 3 * 4096, r);
  EXPECT_EQ(3, r.n);
}

TEST(Sched, MinStripeIsRespected) {
  for (size_t min_stripe : {size_t{4096}, size_t{65536}, size_t{1} << 20}) {
    struct srd_sched_params p = params(16, 0, min_stripe, 0);
    for (size_t size : {min_stripe - 1, min_stripe, 2 * min_stripe - 1, 2 * min_stripe, 5 * min_stripe + 77,
                        16 * min_stripe, 1000 * min_stripe}) {
      Split r = split(p, size, 0);
      check_valid(p, size, r);
      size_t want = size / min_stripe;
      if (want < 2) {
        EXPECT_EQ(1, r.n) << size;
      } else {
        EXPECT_GE(r.n, 2) << size;
      }
      for (int i = 0; i + 1 < r.n; i++) {
        EXPECT_GE(r.s[static_cast<size_t>(i)].len, min_stripe) << size;
      }
    }
  }
}

TEST(Sched, MinStripeBelowAlignmentIsAligned) {
  struct srd_sched_params p = params(8, 0, 1, 0);
  Split r = split(p, 1000, 0);
  check_valid(p, 1000, r);
  for (int i = 0; i + 1 < r.n; i++) {
    EXPECT_GE(r.s[static_cast<size_t>(i)].len, size_t{SRD_STRIPE_ALIGN});
  }
}

TEST(Sched, MaxWriteIsRespected) {
  // Even below the threshold and on one path, no write exceeds the limit.
  for (int npaths : {1, 2, 4}) {
    for (size_t threshold : {size_t{0}, size_t{1} << 40}) {
      struct srd_sched_params p = params(npaths, threshold, 4096, 1 << 20);
      for (size_t size : {(size_t{1} << 20) - 1, size_t{1} << 20, (size_t{1} << 20) + 1, size_t{5} << 20,
                          (size_t{32} << 20)}) {
        Split r = split(p, size, 0);
        check_valid(p, size, r);
        EXPECT_GE(static_cast<size_t>(r.n), (size + (size_t{1} << 20) - 1) >> 20) << size;
      }
    }
  }
}

TEST(Sched, MaxWriteNotAMultipleOfTheAlignment) {
  struct srd_sched_params p = params(2, 0, 128, 1000);
  for (size_t size : {size_t{999}, size_t{1000}, size_t{1001}, size_t{2000}, size_t{10000}}) {
    Split r = split(p, size, 0);
    check_valid(p, size, r);
  }
}

TEST(Sched, TooManyStripesFailsAndLeavesTheCursor) {
  struct srd_sched_params p = params(4, 0, 128, 4096);
  unsigned cursor = 11;
  struct srd_stripe s[kMaxOut + 1];
  EXPECT_EQ(-1, srd_sched_split(&p, size_t{4096} * kMaxOut + 1, &cursor, s, kMaxOut));
  EXPECT_EQ(11u, cursor);
  EXPECT_EQ(-1, srd_sched_split(&p, 3 * 4096, &cursor, s, 2));
  EXPECT_EQ(11u, cursor);
  // Exactly max_out stripes still fit.
  Split r = split(p, size_t{4096} * kMaxOut, cursor);
  check_valid(p, size_t{4096} * kMaxOut, r);
  EXPECT_EQ(kMaxOut, r.n);
  r = split(p, 2 * 4096, cursor, 2);
  check_valid(p, 2 * 4096, r, 2);
  EXPECT_EQ(2, r.n);
}

TEST(Sched, MorePathsThanMaxOutUseMaxOutStripes) {
  // 8 rails x 8 endpoints is 64 paths; a message still fits in 32 writes, and
  // the next message continues on the paths this one did not use.
  struct srd_sched_params p = params(64, 0, 4096, size_t{1} << 30);
  Split r = split(p, size_t{64} << 20, 0);
  check_valid(p, size_t{64} << 20, r);
  EXPECT_EQ(kMaxOut, r.n);
  Split next = split(p, size_t{64} << 20, r.cursor_after);
  check_valid(p, size_t{64} << 20, next);
  EXPECT_EQ(kMaxOut, next.s[0].path);
  r = split(p, size_t{64} << 20, 0, 8);
  check_valid(p, size_t{64} << 20, r, 8);
  EXPECT_EQ(8, r.n);
}

TEST(Sched, NonPositivePathCountMeansOnePath) {
  for (int npaths : {0, -3}) {
    struct srd_sched_params p = params(npaths, 0, 128, 0);
    Split r = split(p, 1 << 20, 4);
    check_valid(p, 1 << 20, r);
    EXPECT_EQ(1, r.n);
    EXPECT_EQ(0, r.s[0].path);
  }
}

TEST(Sched, SmallMessagesStayOnLaneZeroLargeOnesGoOnTheLanes) {
  // 2 NICs x 4 lanes: paths 0-1 are lane 0's (the caller polls them), 2-7 the
  // lanes' threads'.
  struct srd_sched_params p = params(8, 256 << 10, 64 << 10, 0);
  EXPECT_EQ(0x03u, srd_sched_paths_for(&p, 8, 2, 0));
  EXPECT_EQ(0x03u, srd_sched_paths_for(&p, (256 << 10) - 1, 2, 0));
  EXPECT_EQ(0xfcu, srd_sched_paths_for(&p, 256 << 10, 2, 0));
  // Within the usable paths (failover), and when none of the wanted ones is
  // usable, on what is.
  EXPECT_EQ(0x02u, srd_sched_paths_for(&p, 8, 2, 0x0a));
  EXPECT_EQ(0x08u, srd_sched_paths_for(&p, 1 << 20, 2, 0x0a));
  EXPECT_EQ(0x01u, srd_sched_paths_for(&p, 1 << 20, 2, 0x01));
  EXPECT_EQ(0x30u, srd_sched_paths_for(&p, 8, 2, 0x30));
  // The split then never puts a large message's stripe on lane 0.
  unsigned cursor = 0;
  struct srd_stripe s[kMaxOut];
  for (int m = 0; m < 7; m++) {
    int n = srd_sched_split_over(&p, 512 << 10, srd_sched_paths_for(&p, 512 << 10, 2, 0), &cursor, s, kMaxOut);
    ASSERT_GE(n, 1);
    for (int i = 0; i < n; i++) EXPECT_GE(s[i].path, 2) << "message " << m << " stripe " << i;
  }
  // Before the lanes run (npaths counts lane 0 only) large messages use it.
  p.npaths = 2;
  EXPECT_EQ(0u, srd_sched_paths_for(&p, 1 << 20, 2, 0));
  EXPECT_EQ(0x03u, srd_sched_paths_for(&p, 8, 2, 0));
  // 64 paths and more: no shift past the word.
  p.npaths = 64;
  EXPECT_EQ(~uint64_t{0} << 8, srd_sched_paths_for(&p, 1 << 20, 8, 0));
}

size_t random_size(std::mt19937_64 &rng) {
  switch (rng() % 5) {
  case 0:
    return rng() % 1024;
  case 1:
    return rng() % (size_t{1} << 20);
  case 2: {
    size_t pow = size_t{1} << (rng() % 34);
    return pow + (rng() % 257) - 128 + (pow < 128 ? 128 : 0);
  }
  case 3:
    return rng() % (size_t{1} << 34);
  default:
    return (rng() % 4096) * SRD_STRIPE_ALIGN;
  }
}

// What the randomized test checks beyond the rules of every split.
void check_properties(const struct srd_sched_params &p, size_t size, unsigned cursor, const Split &r) {
  size_t max_write = p.max_write, threshold = p.threshold, min_stripe = p.min_stripe;
  int npaths = p.npaths;
  bool fits = max_write == 0 || (size + max_write - 1) / max_write <= static_cast<size_t>(kMaxOut);
  if (r.n == -1) {
    ASSERT_EQ(cursor, r.cursor_after) << "a failed split moved the cursor";
    // With a write limit in whole alignment units, -1 means it cannot fit.
    if (max_write % SRD_STRIPE_ALIGN == 0) {
      ASSERT_FALSE(fits);
    }
    return;
  }
  check_rules(p, size, r, kMaxOut);
  if (::testing::Test::HasFatalFailure()) return;
  ASSERT_TRUE(fits) << "more stripes than max_out were needed, yet it succeeded";
  bool limited = max_write && size > max_write;
  if (size < threshold && !limited) {
    ASSERT_EQ(1, r.n);
  }
  if (!limited) {
    ASSERT_LE(r.n, npaths);
  }
  size_t min_eff = min_stripe < SRD_STRIPE_ALIGN ? SRD_STRIPE_ALIGN : min_stripe;
  // The write limit may force smaller stripes; when it leaves room for two
  // minimum stripes, the minimum holds.
  if (!max_write || max_write >= 2 * min_eff) {
    for (int i = 0; i + 1 < r.n; i++) ASSERT_GE(r.s[static_cast<size_t>(i)].len, min_eff) << "stripe " << i;
  }
  if (size >= threshold && npaths > 1 && size >= 2 * min_eff) {
    ASSERT_GE(r.n, 2) << "splitting was wanted";
  }
}

TEST(Sched, RandomizedProperties) {
  std::mt19937_64 rng(42);
  int splits = 0, failures = 0;
  for (int iter = 0; iter < 200000; iter++) {
    int npaths = 1 + static_cast<int>(rng() % 64);
    size_t threshold = rng() % 3 == 0 ? 0 : rng() % (size_t{1} << (rng() % 28));
    size_t min_stripe = rng() % 4 == 0 ? rng() % 300 : size_t{128} << (rng() % 14);
    bool aligned_max = rng() % 4 != 0;
    size_t max_write = 0;
    switch (rng() % 3) {
    case 0:
      break;
    case 1:
      max_write = aligned_max ? (1 + rng() % 8192) * SRD_STRIPE_ALIGN : SRD_STRIPE_ALIGN + rng() % (size_t{1} << 20);
      break;
    default:
      max_write = aligned_max ? size_t{1} << (7 + rng() % 24) : SRD_STRIPE_ALIGN + rng() % (size_t{1} << 30);
      break;
    }
    struct srd_sched_params p = params(npaths, threshold, min_stripe, max_write);
    size_t size = random_size(rng);
    unsigned cursor = static_cast<unsigned>(rng());
    Split r = split(p, size, cursor);
    failures += r.n == -1;
    splits += r.n > 1;
    check_properties(p, size, cursor, r);
    if (HasFailure()) {
      FAIL() << "in " << describe(p, size, r);
    }
  }
  EXPECT_GT(splits, 10000);
  EXPECT_GT(failures, 100);
}

}  // namespace
