// The exported ABI as NCCL sees it: dlopen the built library, find
// ncclTunerPlugin_v2..v6, and call each version with a real float[7][3] cost
// table. The same tables must come out of libnccl-net-srd.so, where NCCL
// looks when NCCL_TUNER_PLUGIN is unset.
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

extern "C" {
#include "nccl/tuner.h"
}

namespace {

std::string lib_path(const char *name) {
  const char *dir = getenv("top_builddir");
  return std::string(dir ? dir : ".") + "/.libs/" + name;
}

void quiet_logger(ncclDebugLogLevel, unsigned long, const char *, int, const char *, ...) {}

std::string warnings;
void recording_logger(ncclDebugLogLevel level, unsigned long, const char *, int, const char *fmt, ...) {
  if (level != NCCL_LOG_WARN) return;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  warnings += buf;
  warnings += "\n";
}

// Loaded once and kept: unloading would leave what the library's globals
// (and libfabric's) still hold looking like leaks to LeakSanitizer.
struct Lib {
  void *handle = nullptr;
  explicit Lib(const char *name) {
    std::string path = lib_path(name);
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) ADD_FAILURE() << "dlopen " << path << ": " << dlerror();
  }
  template <typename T>
  const T *sym(const char *name) const {
    return handle ? static_cast<const T *>(dlsym(handle, name)) : nullptr;
  }
};

const Lib &library(const char *name) {
  static Lib tuner("libnccl-tuner-srd.so"), net("libnccl-net-srd.so");
  return strcmp(name, "libnccl-net-srd.so") ? tuner : net;
}

// Every test runs with a malformed NCCL_SRD_TUNER_CONFIG, set before the
// library first reads its parameters: the tuner must report it at each init
// and fall back to the model, which is what every other test expects anyway.
char bad_config[] = "/tmp/srd-tuner-abi-XXXXXX";

class BadConfigEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    int fd = mkstemp(bad_config);
    ASSERT_GE(fd, 0);
    const char text[] = "coll=allreduce algo=ring proto=simple\nthis is not a rule\n";
    ASSERT_EQ(write(fd, text, sizeof(text) - 1), (ssize_t)(sizeof(text) - 1));
    close(fd);
    setenv("NCCL_SRD_TUNER_CONFIG", bad_config, 1);
  }
  void TearDown() override { unlink(bad_config); }
};

const ::testing::Environment *const bad_config_env = ::testing::AddGlobalTestEnvironment(new BadConfigEnvironment);

// An all-reduce table for four nodes of one GPU: ring and tree enabled for
// every protocol but LL128 (NCCL disables it across a host network), PAT off
// for all-reduce, CollNet/NVLS ignored. NCCL's cheapest entry is Ring/Simple,
// which at 8 bytes no model of a network would choose: the tuner must step in.
struct CostTable {
  float t[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
  CostTable() {
    for (auto &row : t)
      for (float &c : row) c = NCCL_ALGO_PROTO_IGNORE;
    t[NCCL_ALGO_TREE][NCCL_PROTO_LL] = 40.0f;
    t[NCCL_ALGO_TREE][NCCL_PROTO_SIMPLE] = 60.0f;
    t[NCCL_ALGO_RING][NCCL_PROTO_LL] = 45.0f;
    t[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] = 30.0f;
  }
  float **arg() { return reinterpret_cast<float **>(t); }
};

// At most one enabled entry became 0.0 (none when the tuner keeps NCCL's
// pick) and nothing ignored came back.
int count_winners(const CostTable &before, const CostTable &after) {
  int zeros = 0;
  for (int a = 0; a < NCCL_NUM_ALGORITHMS; a++)
    for (int p = 0; p < NCCL_NUM_PROTOCOLS; p++) {
      if (before.t[a][p] == NCCL_ALGO_PROTO_IGNORE) {
        EXPECT_EQ(after.t[a][p], NCCL_ALGO_PROTO_IGNORE) << a << "/" << p;
      } else if (after.t[a][p] != before.t[a][p]) {
        EXPECT_EQ(after.t[a][p], 0.0f);
        zeros++;
      }
    }
  EXPECT_LE(zeros, 1);
  return zeros;
}

void expect_one_winner(const CostTable &before, const CostTable &after) { EXPECT_EQ(count_winners(before, after), 1); }

class TunerAbi : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("NCCL_ALGO");
    unsetenv("NCCL_PROTO");
  }
};

void check_v3_style(ncclResult_t (*coll_info)(void *, ncclFunc_t, size_t, int, float **, int, int, int, int *),
                    void *ctx) {
  for (size_t bytes : {size_t(8), size_t(1) << 20, size_t(1) << 30}) {
    CostTable table, before;
    int channels = 0;
    ASSERT_EQ(coll_info(ctx, ncclFuncAllReduce, bytes, 1, table.arg(), NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS, 0,
                        &channels),
              ncclSuccess);
    if (bytes == 8) {
      expect_one_winner(before, table);
      EXPECT_TRUE(table.t[NCCL_ALGO_TREE][NCCL_PROTO_LL] == 0.0f || table.t[NCCL_ALGO_RING][NCCL_PROTO_LL] == 0.0f)
          << "8 bytes: LL, the protocol with the cheapest hop";
    } else {
      count_winners(before, table);
    }
    EXPECT_EQ(channels, 0);
  }
  // Send/recv and unknown collectives: success, table untouched.
  CostTable table, before;
  int channels = 0;
  EXPECT_EQ(coll_info(ctx, ncclFuncSendRecv, 64, 1, table.arg(), NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS, 0,
                      &channels),
            ncclSuccess);
  EXPECT_EQ(memcmp(table.t, before.t, sizeof(table.t)), 0);
  EXPECT_EQ(coll_info(ctx, (ncclFunc_t)1000, 64, 1, table.arg(), NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS, 0,
                      &channels),
            ncclSuccess);
  EXPECT_EQ(memcmp(table.t, before.t, sizeof(table.t)), 0) << "an unknown collective changed the cost table";
  EXPECT_EQ(channels, 0) << "an unknown collective set a channel count";
  // No table: nothing to write into, and still no channel count.
  EXPECT_EQ(coll_info(ctx, ncclFuncAllReduce, 64, 1, nullptr, 0, 0, 0, &channels), ncclSuccess);
  EXPECT_EQ(channels, 0) << "a call without a cost table set a channel count";
}

ncclResult_t (*v3_as_v4_target)(void *, ncclFunc_t, size_t, int, float **, int, int, int *);
ncclResult_t v3_as_v4(void *c, ncclFunc_t f, size_t n, int pipes, float **t, int na, int np, int, int *ch) {
  return v3_as_v4_target(c, f, n, pipes, t, na, np, ch);
}

void check_library(const char *name) {
  const Lib &lib = library(name);
  ASSERT_NE(lib.handle, nullptr);
  auto v2 = lib.sym<ncclTuner_v2_t>("ncclTunerPlugin_v2");
  auto v3 = lib.sym<ncclTuner_v3_t>("ncclTunerPlugin_v3");
  auto v4 = lib.sym<ncclTuner_v4_t>("ncclTunerPlugin_v4");
  auto v5 = lib.sym<ncclTuner_v5_t>("ncclTunerPlugin_v5");
  auto v6 = lib.sym<ncclTuner_v6_t>("ncclTunerPlugin_v6");
  ASSERT_TRUE(v2 && v3 && v4 && v5 && v6) << name << " must export ncclTunerPlugin_v2..v6";
  for (const char *n : {v2->name, v3->name, v4->name, v5->name, v6->name}) EXPECT_STREQ(n, "SRD");

  void *ctx = nullptr;
  // v2: the plugin names algorithm and protocol.
  ASSERT_EQ(v2->init(4, 4, quiet_logger, &ctx), ncclSuccess);
  int algo = -1, proto = -1, channels = 0;
  ASSERT_EQ(v2->getCollInfo(ctx, ncclFuncAllReduce, 8, 0, 0, 1, &algo, &proto, &channels), ncclSuccess);
  EXPECT_TRUE(algo == NCCL_ALGO_RING || algo == NCCL_ALGO_TREE) << algo;
  EXPECT_TRUE(proto >= 0 && proto < NCCL_NUM_PROTOCOLS) << proto;
  EXPECT_NE(proto, NCCL_PROTO_LL128) << "no LL128 over this host's network";
  algo = proto = -1;
  ASSERT_EQ(v2->getCollInfo(ctx, ncclFuncAllReduce, 8, 1, 1, 1, &algo, &proto, &channels), ncclSuccess);
  EXPECT_EQ(algo, -1) << "with CollNet/NVLS offered, v2 leaves the choice to NCCL";
  // Only NCCL 2.21 loads v2 and it has no PAT (algorithm 6 is past its
  // tables): never name it, even where v3+ would (one rank per node).
  for (ncclFunc_t coll : {ncclFuncAllGather, ncclFuncReduceScatter})
    for (size_t bytes = 8; bytes <= (size_t(1) << 30); bytes *= 4) {
      algo = proto = -1;
      ASSERT_EQ(v2->getCollInfo(ctx, coll, bytes, 0, 0, 1, &algo, &proto, &channels), ncclSuccess);
      EXPECT_NE(algo, NCCL_ALGO_PAT) << name << " v2 coll " << coll << " " << bytes << " bytes";
    }
  ASSERT_EQ(v2->destroy(ctx), ncclSuccess);

  // v3: cost table, no regBuff.
  ASSERT_EQ(v3->init(4, 4, quiet_logger, &ctx), ncclSuccess);
  v3_as_v4_target = v3->getCollInfo;
  check_v3_style(v3_as_v4, ctx);
  ASSERT_EQ(v3->destroy(ctx), ncclSuccess);

  ASSERT_EQ(v4->init(4, 4, quiet_logger, &ctx), ncclSuccess);
  check_v3_style(v4->getCollInfo, ctx);
  ASSERT_EQ(v4->destroy(ctx), ncclSuccess);

  ncclNvlDomainInfo_v5_t nvl = {4, 1, 1};
  ncclTunerConstants_v5_t constants;
  memset(&constants, 0x5a, sizeof(constants));
  ncclTunerConstants_v5_t constants_before = constants;
  ASSERT_EQ(v5->init(&ctx, 0x1234, 4, 4, quiet_logger, &nvl, &constants), ncclSuccess);
  check_v3_style(v5->getCollInfo, ctx);
  ASSERT_EQ(v5->finalize(ctx), ncclSuccess);
  EXPECT_EQ(memcmp(&constants, &constants_before, sizeof(constants)), 0) << "NCCL's constants are left alone";

  ASSERT_EQ(v6->init(&ctx, 0x1234, 4, 4, quiet_logger, nullptr, nullptr), ncclSuccess);
  check_v3_style(v6->getCollInfo, ctx);
  ASSERT_NE(v6->getChunkSize, nullptr);
  size_t chunk = 131072;
  EXPECT_EQ(v6->getChunkSize(ctx, ncclFuncAllReduce, 1 << 20, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE, 4, &chunk),
            ncclSuccess);
  EXPECT_EQ(chunk, 131072u) << "without a rule, NCCL's chunk size";
  ASSERT_EQ(v6->finalize(ctx), ncclSuccess);

  // One node: NCCL's own model stays in charge.
  ASSERT_EQ(v6->init(&ctx, 1, 8, 1, quiet_logger, nullptr, nullptr), ncclSuccess);
  CostTable table, before;
  int nch = 0;
  ASSERT_EQ(v6->getCollInfo(ctx, ncclFuncAllReduce, 1 << 20, 1, table.arg(), NCCL_NUM_ALGORITHMS,
                            NCCL_NUM_PROTOCOLS, 0, &nch),
            ncclSuccess);
  EXPECT_EQ(memcmp(table.t, before.t, sizeof(table.t)), 0);
  ASSERT_EQ(v6->finalize(ctx), ncclSuccess);
}

}  // namespace

TEST_F(TunerAbi, TunerLibraryExportsEveryVersion) { check_library("libnccl-tuner-srd.so"); }

TEST_F(TunerAbi, NetPluginCarriesTheTuner) { check_library("libnccl-net-srd.so"); }

TEST_F(TunerAbi, ExportsNothingElse) {
  const Lib &lib = library("libnccl-tuner-srd.so");
  ASSERT_NE(lib.handle, nullptr);
  for (const char *internal : {"srd_tuner_decide", "srd_model_costs", "srd_rules_parse", "srd_log", "srd_topo_discover"})
    EXPECT_EQ(dlsym(lib.handle, internal), nullptr) << internal << " leaks out of the library";
}

// NCCL_ALGO, NCCL_PROTO or both set: no cell of any table changes and no
// channel count is set, through every table version, for each collective
// and size. The same call with neither set changes a cell (the control), so
// the check can fail.
void expect_hands_off(const char *algo, const char *proto) {
  SCOPED_TRACE(std::string("NCCL_ALGO=") + (algo ? algo : "(unset)") + " NCCL_PROTO=" + (proto ? proto : "(unset)"));
  const Lib &lib = library("libnccl-tuner-srd.so");
  auto v2 = lib.sym<ncclTuner_v2_t>("ncclTunerPlugin_v2");
  auto v3 = lib.sym<ncclTuner_v3_t>("ncclTunerPlugin_v3");
  auto v4 = lib.sym<ncclTuner_v4_t>("ncclTunerPlugin_v4");
  auto v5 = lib.sym<ncclTuner_v5_t>("ncclTunerPlugin_v5");
  auto v6 = lib.sym<ncclTuner_v6_t>("ncclTunerPlugin_v6");
  ASSERT_TRUE(v2 && v3 && v4 && v5 && v6);
  bool forced = algo || proto;
  if (algo) setenv("NCCL_ALGO", algo, 1);
  if (proto) setenv("NCCL_PROTO", proto, 1);
  void *c2 = nullptr, *c3 = nullptr, *c4 = nullptr, *c5 = nullptr, *c6 = nullptr;
  ASSERT_EQ(v2->init(4, 4, quiet_logger, &c2), ncclSuccess);
  ASSERT_EQ(v3->init(4, 4, quiet_logger, &c3), ncclSuccess);
  ASSERT_EQ(v4->init(4, 4, quiet_logger, &c4), ncclSuccess);
  ASSERT_EQ(v5->init(&c5, 1, 4, 4, quiet_logger, nullptr, nullptr), ncclSuccess);
  ASSERT_EQ(v6->init(&c6, 1, 4, 4, quiet_logger, nullptr, nullptr), ncclSuccess);
  unsetenv("NCCL_ALGO");
  unsetenv("NCCL_PROTO");
  int changed = 0;
  for (ncclFunc_t coll : {ncclFuncAllReduce, ncclFuncAllGather, ncclFuncReduceScatter, ncclFuncBroadcast})
    for (size_t bytes : {size_t(8), size_t(1) << 16, size_t(1) << 20, size_t(1) << 30}) {
      int a = -1, p = -1, nch = 0;
      ASSERT_EQ(v2->getCollInfo(c2, coll, bytes, 0, 0, 1, &a, &p, &nch), ncclSuccess);
      if (forced) {
        EXPECT_TRUE(a == -1 && p == -1 && nch == 0) << "v2 coll " << coll << " " << bytes << " B: " << a << "/" << p;
      } else {
        changed += a != -1;
      }
      auto as_v4 = [](ncclResult_t (*f)(void *, ncclFunc_t, size_t, int, float **, int, int, int *)) {
        return [f](void *c, ncclFunc_t fn, size_t n, float **t, int *ch) {
          return f(c, fn, n, 1, t, NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS, ch);
        };
      };
      auto with_regbuff = [](ncclResult_t (*f)(void *, ncclFunc_t, size_t, int, float **, int, int, int, int *)) {
        return [f](void *c, ncclFunc_t fn, size_t n, float **t, int *ch) {
          return f(c, fn, n, 1, t, NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS, 0, ch);
        };
      };
      std::function<ncclResult_t(void *, ncclFunc_t, size_t, float **, int *)> calls[] = {
          as_v4(v3->getCollInfo), with_regbuff(v4->getCollInfo), with_regbuff(v5->getCollInfo),
          with_regbuff(v6->getCollInfo)};
      void *ctxs[] = {c3, c4, c5, c6};
      for (int v = 0; v < 4; v++) {
        CostTable table, before;
        nch = 0;
        ASSERT_EQ(calls[v](ctxs[v], coll, bytes, table.arg(), &nch), ncclSuccess);
        bool same = memcmp(table.t, before.t, sizeof(table.t)) == 0;
        if (forced) {
          EXPECT_TRUE(same) << "v" << v + 3 << " coll " << coll << " " << bytes << " B: a cell changed";
          EXPECT_EQ(nch, 0) << "v" << v + 3 << " coll " << coll << " " << bytes << " B";
        } else {
          changed += !same;
        }
      }
    }
  if (!forced) {
    EXPECT_GT(changed, 0) << "the control: with neither set the tuner never chose";
  }
  ASSERT_EQ(v2->destroy(c2), ncclSuccess);
  ASSERT_EQ(v3->destroy(c3), ncclSuccess);
  ASSERT_EQ(v4->destroy(c4), ncclSuccess);
  ASSERT_EQ(v5->finalize(c5), ncclSuccess);
  ASSERT_EQ(v6->finalize(c6), ncclSuccess);
}

TEST_F(TunerAbi, ChoosesWhenTheUserDidNot) { expect_hands_off(nullptr, nullptr); }

TEST_F(TunerAbi, HandsOffWhenTheUserChoseTheAlgorithm) { expect_hands_off("ring", nullptr); }

TEST_F(TunerAbi, HandsOffWhenTheUserChoseTheProtocol) { expect_hands_off(nullptr, "simple"); }

TEST_F(TunerAbi, HandsOffWhenTheUserChoseBoth) { expect_hands_off("tree", "ll"); }

TEST_F(TunerAbi, BadConfigFallsBackToTheModel) {
  auto v6 = library("libnccl-tuner-srd.so").sym<ncclTuner_v6_t>("ncclTunerPlugin_v6");
  ASSERT_NE(v6, nullptr);
  warnings.clear();
  void *ctx = nullptr;
  ASSERT_EQ(v6->init(&ctx, 1, 4, 4, recording_logger, nullptr, nullptr), ncclSuccess);
  EXPECT_NE(warnings.find("line 2: 'this': expected key=value"), std::string::npos) << warnings;
  EXPECT_NE(warnings.find(bad_config), std::string::npos) << warnings;
  // The first line alone would force ring/simple; the whole file is ignored.
  CostTable table, before;
  int nch = 0;
  ASSERT_EQ(v6->getCollInfo(ctx, ncclFuncAllReduce, 8, 1, table.arg(), NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS, 0,
                            &nch),
            ncclSuccess);
  expect_one_winner(before, table);
  EXPECT_EQ(table.t[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE], 30.0f) << "8 bytes: the model never picks SIMPLE";
  ASSERT_EQ(v6->finalize(ctx), ncclSuccess);
}
