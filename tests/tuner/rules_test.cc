// The NCCL_SRD_TUNER_CONFIG parser: what it accepts, how it reports what it
// refuses (line and reason), and that random or hostile input never crashes it.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include <unistd.h>

extern "C" {
#include "srd/tuner.h"
}

namespace {

int parse(const std::string &text, srd_tuner_rules *r, std::string *err) {
  char buf[256];
  int rc = srd_rules_parse(text.data(), text.size(), r, buf, sizeof(buf));
  *err = buf;
  return rc;
}

}  // namespace

TEST(TunerRules, ParsesEveryField) {
  srd_tuner_rules r;
  std::string err;
  ASSERT_EQ(parse("# comment only\n"
                  "\n"
                  "   coll=allreduce size=0-64K nodes=2-* ranks=-512 algo=tree proto=ll   # trailing\n"
                  "coll=allgather,ReduceScatter size=1M- algo=* proto=SIMPLE channels=8 chunk=1M\r\n"
                  "size=4096 channels=1\n"
                  "model hop_us=12.5 rail_gbps=25 margin=0\n",
                  &r, &err),
            0)
      << err;
  ASSERT_EQ(r.n, 3);
  const srd_tuner_rule &a = r.rule[0];
  EXPECT_EQ(a.line, 3);
  EXPECT_EQ(a.coll_mask, 1u << SRD_COLL_ALLREDUCE);
  EXPECT_EQ(a.size.lo, 0u);
  EXPECT_EQ(a.size.hi, 64u * 1024);
  EXPECT_EQ(a.nodes.lo, 2u);
  EXPECT_EQ(a.nodes.hi, ~0ULL);
  EXPECT_EQ(a.ranks.lo, 0u);
  EXPECT_EQ(a.ranks.hi, 512u);
  EXPECT_EQ(a.algo, SRD_ALGO_TREE);
  EXPECT_EQ(a.proto, SRD_PROTO_LL);
  const srd_tuner_rule &b = r.rule[1];
  EXPECT_EQ(b.coll_mask, (1u << SRD_COLL_ALLGATHER) | (1u << SRD_COLL_REDUCESCATTER));
  EXPECT_EQ(b.size.lo, 1u << 20);
  EXPECT_EQ(b.algo, SRD_RULE_ANY);
  EXPECT_EQ(b.proto, SRD_PROTO_SIMPLE);
  EXPECT_EQ(b.channels, 8);
  EXPECT_EQ(b.chunk, 1u << 20);
  const srd_tuner_rule &c = r.rule[2];
  EXPECT_EQ(c.coll_mask, (1u << SRD_COLL_COUNT) - 1);
  EXPECT_EQ(c.size.lo, 4096u);
  EXPECT_EQ(c.size.hi, 4096u);
  EXPECT_DOUBLE_EQ(r.cal.hop_us, 12.5);
  EXPECT_DOUBLE_EQ(r.cal.rail_gbps, 25.0);
  EXPECT_EQ(r.cal.efficiency, 0.0);
  EXPECT_EQ(r.cal.has_margin, 1);
  EXPECT_EQ(r.cal.margin, 0.0);

  // First match wins; ranges are inclusive.
  EXPECT_EQ(srd_rules_match(&r, SRD_COLL_ALLREDUCE, 65536, 2, 16), &r.rule[0]);
  EXPECT_EQ(srd_rules_match(&r, SRD_COLL_ALLREDUCE, 65537, 2, 16), nullptr);
  EXPECT_EQ(srd_rules_match(&r, SRD_COLL_ALLREDUCE, 4096, 1, 16), &r.rule[2]);
  EXPECT_EQ(srd_rules_match(&r, SRD_COLL_ALLREDUCE, 100, 2, 513), nullptr);
  EXPECT_EQ(srd_rules_match(&r, SRD_COLL_REDUCESCATTER, 1u << 30, 1, 1), &r.rule[1]);
  EXPECT_EQ(srd_rules_match(&r, SRD_COLL_BROADCAST, 1u << 30, 1, 1), nullptr);
  EXPECT_EQ(srd_rules_match(&r, 7, 4096, 1, 1), nullptr);
  srd_rules_free(&r);
}

TEST(TunerRules, EmptyFileHasNoRules) {
  srd_tuner_rules r;
  std::string err;
  ASSERT_EQ(parse("", &r, &err), 0);
  EXPECT_EQ(r.n, 0);
  ASSERT_EQ(parse("\n\n   \t\n# x\n", &r, &err), 0);
  EXPECT_EQ(r.n, 0);
  srd_rules_free(&r);
}

TEST(TunerRules, ReportsLineAndReason) {
  struct Case {
    const char *text;
    const char *expect;  // substring of the error
  } cases[] = {
      {"coll=allreduce\n", "line 1: the rule sets nothing"},
      {"\n\ncoll=allgreduce algo=ring\n", "line 3: coll=allgreduce: unknown collective"},
      {"algo=ring\nalgo=rng\n", "line 2: algo=rng: expected one of"},
      {"proto=ll256\n", "proto=ll256: expected one of"},
      {"size=10-2 algo=ring\n", "empty range"},
      {"size=-5K- algo=ring\n", "bad"},
      {"size=- algo=ring\n", "needs at least one bound"},
      {"size=1T algo=ring\n", "not a number"},
      {"size=99999999999999999999 algo=ring\n", "not a number"},
      {"size=17179869184G algo=ring\n", "not a number"},
      {"nodes=x algo=ring\n", "nodes=x"},
      {"channels=0\n", "channels=0: expected 1-64"},
      {"channels=65\n", "channels=65"},
      {"chunk=0\n", "chunk=0"},
      {"chunk=2G\n", "chunk=2G"},
      {"algo=ring algo=tree\n", "'algo' given twice"},
      {"algo ring\n", "'algo': expected key=value"},
      {"algo=\n", "expected key=value"},
      {"=ring\n", "expected key=value"},
      {"colour=red algo=ring\n", "unknown key 'colour'"},
      {"algo=tree\n", "algo=tree serves only allreduce"},
      {"coll=allreduce algo=pat\n", "algo=pat serves only allgather"},
      {"coll=allgather algo=pat proto=ll\n", "algo=pat runs only with proto=simple"},
      {"model\n", "'model' needs"},
      {"model hop_us=-1\n", "hop_us=-1"},
      {"model efficiency=1.5\n", "efficiency=1.5"},
      {"model hop_us=1 hop_us=2\n", "given twice"},
      {"model margin=-0.1\n", "margin=-0.1: expected a number in [0, 10]"},
      {"model margin=11\n", "margin=11"},
      {"model speed=3\n", "unknown key 'speed'"},
      {"algo=ring\xff\n", "unexpected byte 0xff"},
      {"a=1 a=2 a=3 a=4 a=5 a=6 a=7 a=8 a=9 a=10 a=11 a=12 a=13 a=14 a=15 a=16 a=17\n", "more than 16 fields"},
  };
  for (const Case &c : cases) {
    srd_tuner_rules r;
    std::string err;
    EXPECT_EQ(parse(c.text, &r, &err), -1) << c.text;
    EXPECT_NE(err.find(c.expect), std::string::npos) << "input: " << c.text << "error: " << err;
    EXPECT_EQ(r.n, 0);
    EXPECT_EQ(r.rule, nullptr);
  }
  // A NUL inside a rule is refused; after '#' anything goes.
  std::string nul("algo=ring\0x\n", 12);
  srd_tuner_rules r;
  std::string err;
  EXPECT_EQ(parse(nul, &r, &err), -1);
  EXPECT_NE(err.find("0x00"), std::string::npos) << err;
  static const char with_bytes[] = "algo=ring # \xff\x01\0 ok\n";
  std::string comment(with_bytes, sizeof(with_bytes) - 1);
  EXPECT_EQ(parse(comment, &r, &err), 0) << err;
  srd_rules_free(&r);
  // Long lines are refused whole, not cut.
  std::string longline = "algo=ring " + std::string(2000, ' ') + "proto=ll\n";
  EXPECT_EQ(parse(longline, &r, &err), -1);
  EXPECT_NE(err.find("line 1: longer than"), std::string::npos) << err;
}

TEST(TunerRules, TooManyRules) {
  std::string text;
  for (int i = 0; i <= SRD_RULES_MAX; i++) text += "algo=ring\n";
  srd_tuner_rules r;
  std::string err;
  EXPECT_EQ(parse(text, &r, &err), -1);
  EXPECT_NE(err.find("more than"), std::string::npos) << err;
  text.erase(0, strlen("algo=ring\n"));
  ASSERT_EQ(parse(text, &r, &err), 0) << err;
  EXPECT_EQ(r.n, SRD_RULES_MAX);
  srd_rules_free(&r);
}

TEST(TunerRules, LoadsFilesAndRefusesBadOnes) {
  srd_tuner_rules r;
  char err[256];
  ASSERT_EQ(srd_rules_load(TUNER_EXAMPLE_CONF, &r, err, sizeof(err)), 0) << err;
  EXPECT_GT(r.n, 0) << "the documented example has rules";
  srd_rules_free(&r);

  EXPECT_EQ(srd_rules_load("/nonexistent/tuner.conf", &r, err, sizeof(err)), -1);
  EXPECT_NE(strstr(err, "cannot open"), nullptr) << err;

  char path[] = "/tmp/srd-tuner-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  FILE *f = fdopen(fd, "w");
  for (int i = 0; i < SRD_RULES_MAX_FILE / 8 + 1; i++) fputs("#######\n", f);
  fclose(f);
  EXPECT_EQ(srd_rules_load(path, &r, err, sizeof(err)), -1);
  EXPECT_NE(strstr(err, "larger than"), nullptr) << err;
  f = fopen(path, "w");
  fputs("algo=ring\nproto=fast\n", f);
  fclose(f);
  EXPECT_EQ(srd_rules_load(path, &r, err, sizeof(err)), -1);
  EXPECT_NE(strstr(err, "line 2: proto=fast"), nullptr) << err;
  unlink(path);
  // A directory opens but cannot be read.
  EXPECT_EQ(srd_rules_load("/", &r, err, sizeof(err)), -1);
  EXPECT_EQ(r.n, 0);
}

TEST(TunerRules, RandomBytesNeverCrash) {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 20000; iter++) {
    std::string text(rng() % 300, '\0');
    for (char &c : text) c = (char)(rng() % 256);
    srd_tuner_rules r;
    char err[64];  // small on purpose: messages must truncate safely
    int rc = srd_rules_parse(text.data(), text.size(), &r, err, sizeof(err));
    if (rc) {
      EXPECT_EQ(r.n, 0);
      EXPECT_EQ(strncmp(err, "line ", 5), 0) << err;
    }
    srd_rules_free(&r);
  }
}

TEST(TunerRules, RandomTokenSoupNeverCrashes) {
  const char *words[] = {"coll=", "size=", "nodes=", "ranks=", "algo=", "proto=", "channels=", "chunk=", "model",
                         "hop_us=", "rail_gbps=", "efficiency=", "allreduce", "allgather", "ring", "tree", "pat",
                         "ll", "ll128", "simple", "*", "-", "0", "1", "64", "65", "1K", "4G", "18446744073709551615",
                         "99999999999999999999999", ",", "=", "#", " ", "\t", "\n", "\r\n", "0.5", "1e308", "nan",
                         "inf", "-1", "K", "G-"};
  std::mt19937 rng(11);
  int accepted = 0;
  for (int iter = 0; iter < 20000; iter++) {
    std::string text;
    int n = rng() % 40;
    for (int i = 0; i < n; i++) text += words[rng() % (sizeof(words) / sizeof(words[0]))];
    srd_tuner_rules r;
    char err[128];
    int rc = srd_rules_parse(text.data(), text.size(), &r, err, sizeof(err));
    if (rc == 0) {
      accepted++;
      for (int i = 0; i < r.n; i++) {
        EXPECT_LE(r.rule[i].size.lo, r.rule[i].size.hi);
        EXPECT_TRUE(r.rule[i].algo == SRD_RULE_ANY || r.rule[i].algo == SRD_ALGO_RING ||
                    r.rule[i].algo == SRD_ALGO_TREE || r.rule[i].algo == SRD_ALGO_PAT);
        EXPECT_GE(r.rule[i].channels, 0);
        EXPECT_LE(r.rule[i].channels, 64);
      }
      EXPECT_TRUE(r.cal.efficiency == 0 || (r.cal.efficiency > 0 && r.cal.efficiency <= 1));
    } else {
      EXPECT_EQ(strncmp(err, "line ", 5), 0) << err;
    }
    srd_rules_free(&r);
  }
  EXPECT_GT(accepted, 0) << "the soup should sometimes make valid rules";
}
