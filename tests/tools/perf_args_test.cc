#include <gtest/gtest.h>

#include <string>
#include <vector>

extern "C" {
#include "perf_args.h"
}

namespace {

struct Parsed {
  perf_args_result result;
  perf_opts opts;
  std::string err;
};

Parsed Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "srd-perf");
  std::vector<char *> argv;
  for (auto &a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  Parsed p;
  char err[512];
  p.result = perf_args_parse(static_cast<int>(args.size()), argv.data(), &p.opts, err, sizeof(err));
  p.err = err;
  return p;
}

TEST(PerfArgs, DefaultsAreTheQuickStart) {
  Parsed p = Parse({});
  ASSERT_EQ(p.result, PERF_ARGS_OK);
  EXPECT_EQ(p.opts.role, PERF_ROLE_LOCAL);
  EXPECT_EQ(p.opts.raw, 0);
  EXPECT_STREQ(p.opts.plugin, "");
  EXPECT_EQ(p.opts.tests, PERF_TEST_LAT | PERF_TEST_BW);
  EXPECT_EQ(p.opts.min_size, 8u);
  EXPECT_EQ(p.opts.max_size, 64u << 20);
  EXPECT_EQ(p.opts.window, 8);
  EXPECT_EQ(p.opts.comms, 1);
  EXPECT_EQ(p.opts.group, 1);
  EXPECT_EQ(p.opts.iters, 0);
  EXPECT_EQ(p.opts.warmup, -1);
  EXPECT_EQ(p.opts.port, PERF_DEFAULT_PORT);
}

TEST(PerfArgs, LongShortAndEqualsForms) {
  Parsed p = Parse({"--plugin", "/x/lib.so", "-b", "1K", "--max-size=4M", "-f", "2", "-n", "50", "--warmup=3",
                    "-c", "4", "-W", "32", "-g", "8", "--check", "--json", "--dev", "1", "--timeout", "5"});
  ASSERT_EQ(p.result, PERF_ARGS_OK) << p.err;
  EXPECT_STREQ(p.opts.plugin, "/x/lib.so");
  EXPECT_EQ(p.opts.min_size, 1024u);
  EXPECT_EQ(p.opts.max_size, 4u << 20);
  EXPECT_EQ(p.opts.factor, 2);
  EXPECT_EQ(p.opts.iters, 50);
  EXPECT_EQ(p.opts.warmup, 3);
  EXPECT_EQ(p.opts.comms, 4);
  EXPECT_EQ(p.opts.window, 32);
  EXPECT_EQ(p.opts.group, 8);
  EXPECT_EQ(p.opts.check, 1);
  EXPECT_EQ(p.opts.json, 1);
  EXPECT_EQ(p.opts.dev, 1);
  EXPECT_EQ(p.opts.timeout_s, 5);
  EXPECT_EQ(Parse({"--net-version", "8"}).opts.net_version, 8);
  EXPECT_EQ(Parse({}).opts.net_version, 0);
  EXPECT_EQ(Parse({"--pin"}).opts.pin, 1);
}

TEST(PerfArgs, RolesAndPort) {
  Parsed s = Parse({"--server", "--port", "9000"});
  ASSERT_EQ(s.result, PERF_ARGS_OK);
  EXPECT_EQ(s.opts.role, PERF_ROLE_SERVER);
  EXPECT_EQ(s.opts.port, 9000);
  Parsed c = Parse({"--client", "node2", "--raw"});
  ASSERT_EQ(c.result, PERF_ARGS_OK);
  EXPECT_EQ(c.opts.role, PERF_ROLE_CLIENT);
  EXPECT_STREQ(c.opts.host, "node2");
  EXPECT_EQ(c.opts.raw, 1);
}

TEST(PerfArgs, CudaWithPluginOrRaw) {
  EXPECT_EQ(Parse({}).opts.cuda, 0);
  for (auto args : {std::vector<std::string>{"--cuda"}, std::vector<std::string>{"--raw", "--cuda", "--check"}}) {
    Parsed p = Parse(args);
    ASSERT_EQ(p.result, PERF_ARGS_OK) << p.err;
    EXPECT_EQ(p.opts.cuda, 1);
  }
}

TEST(PerfArgs, TestList) {
  EXPECT_EQ(Parse({"-t", "lat"}).opts.tests, PERF_TEST_LAT);
  EXPECT_EQ(Parse({"--test", "bw,bibw"}).opts.tests, PERF_TEST_BW | PERF_TEST_BIBW);
  EXPECT_EQ(Parse({"-t", "all"}).opts.tests, PERF_TEST_LAT | PERF_TEST_BW | PERF_TEST_BIBW);
  EXPECT_EQ(Parse({"-t", "lat,nope"}).result, PERF_ARGS_ERROR);
  EXPECT_EQ(Parse({"-t", ""}).result, PERF_ARGS_ERROR);
}

TEST(PerfArgs, Help) {
  EXPECT_EQ(Parse({"--help"}).result, PERF_ARGS_HELP);
  EXPECT_EQ(Parse({"-c", "2", "-h"}).result, PERF_ARGS_HELP);
  EXPECT_NE(std::string(perf_usage).find("--raw"), std::string::npos);
}

TEST(PerfArgs, RejectsWithAReason) {
  struct Case {
    std::vector<std::string> args;
    const char *mentions;
  } cases[] = {
      {{"--bogus"}, "--bogus"},
      {{"-x"}, "-x"},
      {{"--comms"}, "needs a value"},
      {{"--comms", "0"}, "--comms"},
      {{"--comms", "257"}, "--comms"},
      {{"--window", "33"}, "--window"},
      {{"--group", "9"}, "--group"},
      {{"--iters", "-1"}, "--iters"},
      {{"--iters", "12abc"}, "--iters"},
      {{"--port", "70000"}, "--port"},
      {{"-b", "1M", "-e", "1K"}, "larger"},
      {{"-e", "4G"}, "exceeds"},
      {{"-e", "-5"}, "-e"},
      {{"--raw", "--plugin", "x.so"}, "exclude"},
      {{"--raw", "--net-version", "9"}, "exclude"},
      {{"--net-version", "7"}, "--net-version"},
      {{"--net-version", "13"}, "--net-version"},
      {{"--server", "--client", "h"}, "exclude"},
      {{"--check=1"}, "takes no value"},
      {{"--server", "--pin"}, "--pin"},
      {{"-f", "1"}, "-f"},
  };
  for (const Case &c : cases) {
    Parsed p = Parse(c.args);
    EXPECT_EQ(p.result, PERF_ARGS_ERROR) << c.args[0];
    EXPECT_NE(p.err.find(c.mentions), std::string::npos) << p.err;
  }
}

TEST(PerfArgs, Sizes) {
  size_t v = 0;
  EXPECT_EQ(perf_parse_size("0", &v), 0);
  EXPECT_EQ(v, 0u);
  EXPECT_EQ(perf_parse_size("64", &v), 0);
  EXPECT_EQ(v, 64u);
  EXPECT_EQ(perf_parse_size("8k", &v), 0);
  EXPECT_EQ(v, 8192u);
  EXPECT_EQ(perf_parse_size("2MiB", &v), 0);
  EXPECT_EQ(v, 2u << 20);
  EXPECT_EQ(perf_parse_size("1G", &v), 0);
  EXPECT_EQ(v, 1u << 30);
  EXPECT_NE(perf_parse_size("", &v), 0);
  EXPECT_NE(perf_parse_size("K", &v), 0);
  EXPECT_NE(perf_parse_size("1T", &v), 0);
  EXPECT_NE(perf_parse_size("-1", &v), 0);
  EXPECT_NE(perf_parse_size("99999999999999999999", &v), 0);
  EXPECT_NE(perf_parse_size("18014398509481984G", &v), 0);
}

TEST(PerfArgs, FormatSize) {
  char buf[32];
  perf_format_size(8, buf, sizeof(buf));
  EXPECT_STREQ(buf, "8 B");
  perf_format_size(4096, buf, sizeof(buf));
  EXPECT_STREQ(buf, "4 KiB");
  perf_format_size(64u << 20, buf, sizeof(buf));
  EXPECT_STREQ(buf, "64 MiB");
  perf_format_size(1536, buf, sizeof(buf));
  EXPECT_STREQ(buf, "1536 B");
  perf_format_size(0, buf, sizeof(buf));
  EXPECT_STREQ(buf, "0 B");
}

TEST(PerfArgs, SweepEndsAtMax) {
  size_t s[64];
  size_t n = perf_sweep(8, 64u << 20, 4, s, 64);
  ASSERT_EQ(n, 13u);  // 8 .. 32 MiB by 4, then 64 MiB itself
  EXPECT_EQ(s[0], 8u);
  EXPECT_EQ(s[1], 32u);
  EXPECT_EQ(s[11], 32u << 20);
  EXPECT_EQ(s[12], 64u << 20);
  n = perf_sweep(8, 64, 2, s, 64);
  ASSERT_EQ(n, 4u);
  EXPECT_EQ(s[3], 64u);
  n = perf_sweep(100, 100, 4, s, 64);
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(s[0], 100u);
  n = perf_sweep(0, 4, 2, s, 64);
  ASSERT_EQ(n, 4u);  // 0, 1, 2, 4
  EXPECT_EQ(s[1], 1u);
  n = perf_sweep(1, 1u << 30, 2, s, 5);
  EXPECT_EQ(n, 5u);  // capped
}

TEST(PerfArgs, ItersBySize) {
  perf_opts o;
  perf_args_defaults(&o);
  int iters, warmup;
  perf_iters_for(&o, 8, &iters, &warmup);
  EXPECT_EQ(iters, 1000);
  EXPECT_EQ(warmup, 1024) << "every posted receive of raw's pool used before the timing";
  perf_iters_for(&o, 64u << 10, &iters, &warmup);
  EXPECT_EQ(iters, 512);
  EXPECT_EQ(warmup, 52);
  perf_iters_for(&o, 64u << 20, &iters, &warmup);
  EXPECT_EQ(iters, 4);
  EXPECT_EQ(warmup, 1);
  perf_iters_for(&o, 1u << 20, &iters, &warmup);
  EXPECT_EQ(iters, 32);
  o.iters = 7;
  o.warmup = 0;
  perf_iters_for(&o, 8, &iters, &warmup);
  EXPECT_EQ(iters, 7);
  EXPECT_EQ(warmup, 0);
}

TEST(PerfArgs, RmaOps) {
  EXPECT_EQ(Parse({}).opts.rma, PERF_RMA_OFF);
  const struct {
    const char *text;
    perf_rma_op op;
  } ops[] = {{"put", PERF_RMA_PUT}, {"putsig", PERF_RMA_PUTSIG}, {"get", PERF_RMA_GET}};
  for (const auto &c : ops) {
    Parsed p = Parse({"--rma", c.text});
    ASSERT_EQ(p.result, PERF_ARGS_OK) << c.text << ": " << p.err;
    EXPECT_EQ(p.opts.rma, c.op);
    EXPECT_STREQ(perf_rma_op_name(c.op), c.text);
    EXPECT_EQ(p.opts.compare, 1) << "--rma keeps the side-by-side run";
  }
  Parsed p = Parse({"--rma=get", "--raw", "-t", "lat", "-W", "32"});
  ASSERT_EQ(p.result, PERF_ARGS_OK) << p.err;
  EXPECT_EQ(p.opts.rma, PERF_RMA_GET);
  EXPECT_EQ(p.opts.tests, PERF_TEST_LAT);
  EXPECT_EQ(perf_rma_op_name(PERF_RMA_OFF), nullptr);
}

TEST(PerfArgs, RmaRejections) {
  for (const char *bad : {"", "PUT", "write", "put,get", "putsignal"}) {
    Parsed p = Parse({"--rma", bad});
    EXPECT_EQ(p.result, PERF_ARGS_ERROR) << bad;
    EXPECT_NE(p.err.find("--rma"), std::string::npos) << p.err;
  }
  EXPECT_EQ(Parse({"--rma"}).result, PERF_ARGS_ERROR);
  for (std::vector<std::string> args : std::vector<std::vector<std::string>>{{"--rma", "put", "-t", "bibw"},
                                                                            {"--rma", "put", "-t", "all"},
                                                                            {"--rma", "get", "-c", "2"},
                                                                            {"--rma", "putsig", "-g", "2"},
                                                                            {"--rma", "put", "--cuda"},
                                                                            {"--rma", "put", "--net-version", "12"}}) {
    Parsed p = Parse(args);
    EXPECT_EQ(p.result, PERF_ARGS_ERROR) << args[2];
    EXPECT_NE(p.err.find("--rma times lat and bw"), std::string::npos) << p.err;
  }
}

}  // namespace
