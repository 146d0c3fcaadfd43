// NCCL_SRD_IFNAME syntax: prefixes, '^' to exclude, '=' for exact names.
#include <gtest/gtest.h>

extern "C" {
#include "srd/topo.h"
}

namespace {

TEST(IfnameMatch, NoSpecMatchesEverything) {
  EXPECT_TRUE(srd_ifname_match(nullptr, "eth0"));
  EXPECT_TRUE(srd_ifname_match("", "eth0"));
  EXPECT_TRUE(srd_ifname_match("", "lo"));
}

TEST(IfnameMatch, PrefixesSelect) {
  EXPECT_TRUE(srd_ifname_match("eth", "eth0"));
  EXPECT_TRUE(srd_ifname_match("eth", "eth12"));
  EXPECT_TRUE(srd_ifname_match("eth", "eth"));
  EXPECT_FALSE(srd_ifname_match("eth", "et"));
  EXPECT_FALSE(srd_ifname_match("eth", "ib0"));
  EXPECT_FALSE(srd_ifname_match("eth", "veth0"));
}

TEST(IfnameMatch, ListMatchesAnyItem) {
  EXPECT_TRUE(srd_ifname_match("ib,va", "va3"));
  EXPECT_TRUE(srd_ifname_match("ib,va", "ib0"));
  EXPECT_FALSE(srd_ifname_match("ib,va", "vb0"));
  // Empty items select nothing rather than everything.
  EXPECT_FALSE(srd_ifname_match(",", "eth0"));
  EXPECT_TRUE(srd_ifname_match("eth0,", "eth0"));
  EXPECT_TRUE(srd_ifname_match(",,eth0", "eth0"));
}

TEST(IfnameMatch, CaretExcludes) {
  EXPECT_FALSE(srd_ifname_match("^eth", "eth0"));
  EXPECT_TRUE(srd_ifname_match("^eth", "ib0"));
  EXPECT_FALSE(srd_ifname_match("^lo,docker", "docker0"));
  EXPECT_TRUE(srd_ifname_match("^lo,docker", "va0"));
  EXPECT_TRUE(srd_ifname_match("^", "eth0"));  // excluding nothing
}

TEST(IfnameMatch, EqualsAsksForExactNames) {
  EXPECT_TRUE(srd_ifname_match("=eth0", "eth0"));
  EXPECT_FALSE(srd_ifname_match("=eth0", "eth01"));
  EXPECT_FALSE(srd_ifname_match("=eth0", "eth"));
  EXPECT_TRUE(srd_ifname_match("=va0,va2", "va2"));
  EXPECT_FALSE(srd_ifname_match("=va0,va2", "va1"));
}

TEST(IfnameMatch, CaretThenEqualsExcludesExactNames) {
  EXPECT_FALSE(srd_ifname_match("^=eth0", "eth0"));
  EXPECT_TRUE(srd_ifname_match("^=eth0", "eth01"));
  EXPECT_TRUE(srd_ifname_match("^=va0,va1", "va2"));
  EXPECT_FALSE(srd_ifname_match("^=va0,va1", "va1"));
}

TEST(IfnameMatch, EqualsBeforeCaretIsAName) {
  // '^' is only recognized first; "=^eth0" asks for the exact name "^eth0".
  EXPECT_FALSE(srd_ifname_match("=^eth0", "eth0"));
}

}  // namespace
