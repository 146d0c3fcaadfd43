// The NCCL_SRD_* table: number parsing, ranges, defaults, strings.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

// param.h names a function like its struct, which C++ calls shadowing.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
extern "C" {
#include "srd/param.h"
}
#pragma GCC diagnostic pop

namespace {

// Sets variables for one test and restores a clean environment afterwards.
class Params : public ::testing::Test {
 protected:
  void SetUp() override { clear(); }
  void TearDown() override { clear(); }
  static void clear() {
    for (int p = 0; p < SRD_PARAM_COUNT; p++) unsetenv(srd_param_info((enum srd_param)p)->name);
    srd_param_reload();
  }
  static void set(const char *name, const char *value) {
    ASSERT_EQ(0, setenv(name, value, 1));
    srd_param_reload();
  }
};

int64_t parsed(const char *text) {
  int64_t v = -12345;
  EXPECT_EQ(0, srd_param_parse_int(text, &v)) << text;
  return v;
}

bool rejected(const char *text) {
  int64_t v = -12345;
  return srd_param_parse_int(text, &v) != 0 && v == -12345;
}

TEST(ParamParse, PlainNumbers) {
  EXPECT_EQ(0, parsed("0"));
  EXPECT_EQ(42, parsed("42"));
  EXPECT_EQ(-7, parsed("-7"));
  EXPECT_EQ(16, parsed("0x10"));
}

TEST(ParamParse, SuffixesArePowersOf1024) {
  EXPECT_EQ(4096, parsed("4K"));
  EXPECT_EQ(4096, parsed("4k"));
  EXPECT_EQ(2 * 1024 * 1024, parsed("2M"));
  EXPECT_EQ(2 * 1024 * 1024, parsed("2m"));
  EXPECT_EQ(INT64_C(1) << 30, parsed("1G"));
  EXPECT_EQ(INT64_C(3) << 30, parsed("3g"));
}

TEST(ParamParse, GarbageIsRejected) {
  EXPECT_TRUE(rejected(nullptr));
  EXPECT_TRUE(rejected(""));
  EXPECT_TRUE(rejected("abc"));
  EXPECT_TRUE(rejected("12Q"));
  EXPECT_TRUE(rejected("1KB"));
  EXPECT_TRUE(rejected("K"));
  EXPECT_TRUE(rejected("1 "));
  EXPECT_TRUE(rejected("99999999999999999999"));
  EXPECT_TRUE(rejected("9223372036854775807K"));
  EXPECT_TRUE(rejected("-9223372036854775807G"));
}

TEST_F(Params, TableIsConsistent) {
  std::set<std::string> names;
  for (int p = 0; p < SRD_PARAM_COUNT; p++) {
    const struct srd_param_desc *d = srd_param_info((enum srd_param)p);
    ASSERT_NE(nullptr, d->name) << "parameter " << p;
    EXPECT_EQ(0, strncmp(d->name, "NCCL_SRD_", 9)) << d->name;
    EXPECT_TRUE(names.insert(d->name).second) << d->name << " twice";
    ASSERT_NE(nullptr, d->doc) << d->name;
    EXPECT_GT(strlen(d->doc), 0u) << d->name;
    if (!d->is_string) {
      EXPECT_LE(d->min, d->def) << d->name;
      EXPECT_LE(d->def, d->max) << d->name;
    }
  }
}

TEST_F(Params, UnsetGivesDefaults) {
  for (int p = 0; p < SRD_PARAM_COUNT; p++) {
    const struct srd_param_desc *d = srd_param_info((enum srd_param)p);
    if (d->is_string)
      EXPECT_EQ(nullptr, srd_param_str((enum srd_param)p)) << d->name;
    else
      EXPECT_EQ(d->def, srd_param_int((enum srd_param)p)) << d->name;
  }
  EXPECT_EQ(0, srd_param_int(SRD_PARAM_RAILS));
  EXPECT_EQ(1, srd_param_int(SRD_PARAM_EPS_PER_RAIL));
  EXPECT_EQ(64 * 1024, srd_param_int(SRD_PARAM_MIN_STRIPE));
}

TEST_F(Params, ValuesInRangeAreTaken) {
  set("NCCL_SRD_RAILS", "4");
  EXPECT_EQ(4, srd_param_int(SRD_PARAM_RAILS));
  set("NCCL_SRD_MIN_STRIPE", "1M");
  EXPECT_EQ(1024 * 1024, srd_param_int(SRD_PARAM_MIN_STRIPE));
  set("NCCL_SRD_EAGER_MAX", "0");
  EXPECT_EQ(0, srd_param_int(SRD_PARAM_EAGER_MAX));
}

TEST_F(Params, RangeBoundsAreInclusive) {
  const struct srd_param_desc *d = srd_param_info(SRD_PARAM_EPS_PER_RAIL);
  set(d->name, std::to_string(d->min).c_str());
  EXPECT_EQ(d->min, srd_param_int(SRD_PARAM_EPS_PER_RAIL));
  set(d->name, std::to_string(d->max).c_str());
  EXPECT_EQ(d->max, srd_param_int(SRD_PARAM_EPS_PER_RAIL));
}

TEST_F(Params, OutOfRangeFallsBackToDefault) {
  const struct srd_param_desc *d = srd_param_info(SRD_PARAM_EPS_PER_RAIL);
  set(d->name, std::to_string(d->max + 1).c_str());
  EXPECT_EQ(d->def, srd_param_int(SRD_PARAM_EPS_PER_RAIL));
  set(d->name, std::to_string(d->min - 1).c_str());
  EXPECT_EQ(d->def, srd_param_int(SRD_PARAM_EPS_PER_RAIL));
  set("NCCL_SRD_MIN_STRIPE", "64");  // below the 128-byte minimum
  EXPECT_EQ(srd_param_info(SRD_PARAM_MIN_STRIPE)->def, srd_param_int(SRD_PARAM_MIN_STRIPE));
}

TEST_F(Params, GarbageFallsBackToDefault) {
  // The defaults here are not what a parser that gave up would return (0).
  ASSERT_NE(0, srd_param_info(SRD_PARAM_EPS_PER_RAIL)->def);
  set("NCCL_SRD_EPS_PER_RAIL", "4");
  EXPECT_EQ(4, srd_param_int(SRD_PARAM_EPS_PER_RAIL));
  set("NCCL_SRD_EPS_PER_RAIL", "four");
  EXPECT_EQ(srd_param_info(SRD_PARAM_EPS_PER_RAIL)->def, srd_param_int(SRD_PARAM_EPS_PER_RAIL));
  set("NCCL_SRD_RAILS", "four");
  EXPECT_EQ(0, srd_param_int(SRD_PARAM_RAILS));
  set("NCCL_SRD_CONNECT_TIMEOUT_MS", "10s");
  EXPECT_EQ(srd_param_info(SRD_PARAM_CONNECT_TIMEOUT_MS)->def, srd_param_int(SRD_PARAM_CONNECT_TIMEOUT_MS));
}

TEST_F(Params, EmptyValueIsUnset) {
  ASSERT_NE(0, srd_param_info(SRD_PARAM_KEEPALIVE_MS)->def);
  set("NCCL_SRD_KEEPALIVE_MS", "");
  EXPECT_EQ(srd_param_info(SRD_PARAM_KEEPALIVE_MS)->def, srd_param_int(SRD_PARAM_KEEPALIVE_MS));
  set("NCCL_SRD_RAILS", "");
  EXPECT_EQ(0, srd_param_int(SRD_PARAM_RAILS));
  set("NCCL_SRD_IFNAME", "");
  EXPECT_EQ(nullptr, srd_param_str(SRD_PARAM_IFNAME));
}

TEST_F(Params, StringsAreCopied) {
  set("NCCL_SRD_IFNAME", "^lo,docker");
  const char *v = srd_param_str(SRD_PARAM_IFNAME);
  ASSERT_NE(nullptr, v);
  EXPECT_STREQ("^lo,docker", v);
  ASSERT_EQ(0, setenv("NCCL_SRD_IFNAME", "eth", 1));  // no reload: the cached copy stays
  EXPECT_STREQ("^lo,docker", srd_param_str(SRD_PARAM_IFNAME));
}

TEST_F(Params, ValuesAreReadOnceUntilReload) {
  set("NCCL_SRD_RAILS", "2");
  ASSERT_EQ(0, setenv("NCCL_SRD_RAILS", "3", 1));
  EXPECT_EQ(2, srd_param_int(SRD_PARAM_RAILS));
  srd_param_reload();
  EXPECT_EQ(3, srd_param_int(SRD_PARAM_RAILS));
}

// The one validation the plugin and srd-info share: each rejection says why
// in words that complete "NAME=VALUE ...".
std::string why_rejected(enum srd_param p, const char *value) {
  char why[160] = "";
  return srd_param_check(p, value, why, sizeof(why)) ? why : "";
}

TEST(ParamCheck, NumbersSayWhetherUnparsableOrOutOfRange) {
  EXPECT_EQ("", why_rejected(SRD_PARAM_KEEPALIVE_MS, "10"));
  EXPECT_EQ("", why_rejected(SRD_PARAM_KEEPALIVE_MS, nullptr));
  EXPECT_EQ("", why_rejected(SRD_PARAM_KEEPALIVE_MS, ""));
  EXPECT_NE(std::string::npos, why_rejected(SRD_PARAM_KEEPALIVE_MS, "10s").find("is not a number"));
  EXPECT_EQ("is out of range [10, 600000]", why_rejected(SRD_PARAM_KEEPALIVE_MS, "5"));
  EXPECT_EQ("is out of range [-1, 65536]", why_rejected(SRD_PARAM_EAGER_MAX, "1M"));
}

TEST(ParamCheck, GdrIsAutoZeroOrOne) {
  for (const char *ok : {"auto", "AUTO", "0", "1"}) EXPECT_EQ("", why_rejected(SRD_PARAM_GDR, ok)) << ok;
  for (const char *bad : {"maybe", "yes", "2", "on"})
    EXPECT_EQ("is not auto, 0 or 1", why_rejected(SRD_PARAM_GDR, bad)) << bad;
}

// GPU windows only on the explicit opt-in; auto says how to get them.
TEST_F(Params, RmaGpuWindowsOnlyWhenAskedFor) {
  const char *why = nullptr;
  EXPECT_EQ(SRD_RMA_OFF, srd_param_rma_offered(&why));
  EXPECT_NE(nullptr, strstr(why, "NCCL_SRD_RMA=gpu")) << why;
  set("NCCL_SRD_RMA", "auto");
  EXPECT_EQ(SRD_RMA_OFF, srd_param_rma_offered(&why));
  set("NCCL_SRD_RMA", "0");
  EXPECT_EQ(SRD_RMA_OFF, srd_param_rma_offered(&why));
  set("NCCL_SRD_RMA", "host");
  EXPECT_EQ(SRD_RMA_HOST, srd_param_rma_offered(&why));
  set("NCCL_SRD_RMA", "gpu");
  EXPECT_EQ(SRD_RMA_GPU, srd_param_rma_offered(&why));
  EXPECT_NE(nullptr, strstr(why, "GPU windows")) << why;
}

TEST(ParamCheck, RmaAndEfaFabricTakeTheirWordsOnly) {
  for (const char *ok : {"auto", "0", "host", "gpu"}) EXPECT_EQ("", why_rejected(SRD_PARAM_RMA, ok)) << ok;
  for (const char *bad : {"GPU", "1", "yes", "cuda"})
    EXPECT_EQ("is not auto, 0, host or gpu", why_rejected(SRD_PARAM_RMA, bad)) << bad;
  for (const char *ok : {"efa", "efa-direct"}) EXPECT_EQ("", why_rejected(SRD_PARAM_EFA_FABRIC, ok)) << ok;
  for (const char *bad : {"EFA", "direct", "tcp"})
    EXPECT_EQ("is neither efa nor efa-direct", why_rejected(SRD_PARAM_EFA_FABRIC, bad)) << bad;
}

TEST(ParamCheck, TopoFileMustBeReadable) {
  EXPECT_EQ("", why_rejected(SRD_PARAM_TOPO_FILE, "/proc/self/status"));
  EXPECT_EQ("cannot be read (No such file or directory)", why_rejected(SRD_PARAM_TOPO_FILE, "/nonexistent"));
  EXPECT_EQ("", why_rejected(SRD_PARAM_IFNAME, "anything"));
}

TEST_F(Params, RejectedStringsReadAsUnset) {
  set("NCCL_SRD_GDR", "maybe");
  EXPECT_EQ(nullptr, srd_param_str(SRD_PARAM_GDR));
  set("NCCL_SRD_TOPO_FILE", "/nonexistent");
  EXPECT_EQ(nullptr, srd_param_str(SRD_PARAM_TOPO_FILE));
  set("NCCL_SRD_GDR", "1");
  EXPECT_STREQ("1", srd_param_str(SRD_PARAM_GDR));
}

TEST(ParamCheck, DefaultText) {
  char buf[64];
  srd_param_default_text(SRD_PARAM_KEEPALIVE_MS, buf, sizeof(buf));
  EXPECT_STREQ("1000", buf);
  srd_param_default_text(SRD_PARAM_GDR, buf, sizeof(buf));
  EXPECT_STREQ("auto", buf);
}

}  // namespace
