// The rail's index of inserted peer addresses (src/rail/av_index.c) at
// thousands of peers: every insert finds a name already there, every removal
// finds its address, while peers come and go in any order. Correctness only;
// how fast it is shows in the connect benchmarks, not here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

// rail.h names a function after a struct (srd_rail_write).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
extern "C" {
#include "srd/rail.h"
}
#pragma GCC diagnostic pop

namespace {

constexpr size_t kNameLen = 24; // an efa address is 32 bytes, tcp's 16: any length works

std::string name_of(unsigned peer) {
  std::string n(kNameLen, '\0');
  // Names that differ only late, as addresses of one subnet do.
  snprintf(&n[kNameLen - 12], 12, "%011u", peer);
  return n;
}

class AvIndex : public ::testing::Test {
 protected:
  srd_av_index x{};
  void SetUp() override { srd_av_index_init(&x, kNameLen); }
  void TearDown() override { srd_av_index_free(&x); }
};

TEST_F(AvIndex, EmptyFindsNothing) {
  EXPECT_EQ(-1, srd_av_index_find_name(&x, name_of(1).data()));
  EXPECT_EQ(-1, srd_av_index_find_addr(&x, 7));
}

// Thousands of peers inserted, a random half removed, others inserted in their
// place (reusing freed entries), then all removed: every lookup agrees with a
// reference map at every step.
TEST_F(AvIndex, ThousandsOfPeersComingAndGoing) {
  constexpr unsigned kPeers = 6000;
  std::map<unsigned, fi_addr_t> live; // peer -> its address
  std::map<fi_addr_t, unsigned> by_addr;
  std::mt19937 rng(7);
  fi_addr_t next_addr = 0;
  auto add = [&](unsigned p) {
    fi_addr_t a = next_addr++;
    int i = srd_av_index_add(&x, name_of(p).data(), a);
    ASSERT_GE(i, 0);
    live[p] = a;
    by_addr[a] = p;
  };
  auto del = [&](unsigned p) {
    fi_addr_t a = live.at(p);
    int i = srd_av_index_find_addr(&x, a);
    ASSERT_GE(i, 0) << "peer " << p << " not found by its address";
    EXPECT_EQ(i, srd_av_index_find_name(&x, name_of(p).data()));
    srd_av_index_del(&x, i);
    live.erase(p);
    by_addr.erase(a);
  };
  auto check_all = [&](const char *when) {
    EXPECT_EQ(static_cast<int>(live.size()), x.used) << when;
    for (unsigned p = 0; p < 2 * kPeers; p++) {
      int i = srd_av_index_find_name(&x, name_of(p).data());
      auto it = live.find(p);
      if (it == live.end()) {
        ASSERT_EQ(-1, i) << when << ": removed peer " << p << " still found";
        continue;
      }
      ASSERT_GE(i, 0) << when << ": peer " << p << " lost";
      EXPECT_EQ(it->second, x.e[i].addr);
      EXPECT_EQ(i, srd_av_index_find_addr(&x, it->second)) << when << ": peer " << p << " not found by address";
    }
  };
  for (unsigned p = 0; p < kPeers; p++) add(p);
  check_all("after the inserts");
  std::vector<unsigned> order;
  for (unsigned p = 0; p < kPeers; p++) order.push_back(p);
  std::shuffle(order.begin(), order.end(), rng);
  for (unsigned k = 0; k < kPeers / 2; k++) del(order[k]);
  check_all("after removing half");
  for (unsigned p = kPeers; p < kPeers + kPeers / 2; p++) add(p);
  EXPECT_LE(x.cap, 2 * static_cast<int>(kPeers)) << "freed entries were not reused";
  check_all("after inserting others");
  std::vector<unsigned> rest;
  for (auto &kv : live) rest.push_back(kv.first);
  std::shuffle(rest.begin(), rest.end(), rng);
  for (unsigned p : rest) del(p);
  check_all("after removing all");
  EXPECT_EQ(-1, srd_av_index_find_addr(&x, 0));
}

} // namespace
