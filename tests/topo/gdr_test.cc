// The GPUDirect decision: every combination of its inputs against a plain
// statement of the rules, NCCL_SRD_GDR, the flush rule per provider, and the
// inputs gathered from this host's libfabric with a fake CUDA driver.
#include <gtest/gtest.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fake_cuda.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
extern "C" {
#include "srd/gdr.h"
#include "srd/log.h"
#include "srd/param.h"
#include "srd/topo.h"
}
#pragma GCC diagnostic pop

namespace {

bool has(const char *text, const char *part) { return std::string(text).find(part) != std::string::npos; }

srd_gdr_inputs inputs(int mode, const char *prov, int hmem, int fcuda, int fdmabuf, int cuda, int cdmabuf,
                      int ordered, int nocalls = 1) {
  srd_gdr_inputs in{};
  in.mode = mode;
  snprintf(in.provider, sizeof(in.provider), "%s", prov);
  in.fi_hmem = hmem;
  in.fi_cuda = fcuda;
  snprintf(in.fi_cuda_why, sizeof(in.fi_cuda_why), "FCUDA-WHY");
  in.fi_dmabuf = fdmabuf;
  snprintf(in.fi_dmabuf_why, sizeof(in.fi_dmabuf_why), "FDMABUF-WHY");
  in.cuda = cuda;
  snprintf(in.cuda_why, sizeof(in.cuda_why), "CUDA-WHY");
  in.cuda_dmabuf = cdmabuf;
  in.cuda_ordered = ordered;
  in.fi_no_cuda_calls = nocalls;
  snprintf(in.fi_no_cuda_calls_why, sizeof(in.fi_no_cuda_calls_why), "NOCALLS-WHY");
  return in;
}

TEST(GdrDecide, EveryCombination) {
  const char *provs[] = {"efa", "shm", "tcp;ofi_rxm", "verbs;ofi_rxm"};
  int count = 0;
  for (int mode : {SRD_GDR_AUTO, SRD_GDR_OFF, SRD_GDR_ON})
    for (const char *prov : provs)
      for (int bits = 0; bits < 128; bits++) {
        int hmem = bits & 1, fcuda = bits >> 1 & 1, fdmabuf = bits >> 2 & 1, cuda = bits >> 3 & 1,
            cdmabuf = bits >> 4 & 1, ordered = bits >> 5 & 1, nocalls = bits >> 6 & 1;
        srd_gdr_inputs in = inputs(mode, prov, hmem, fcuda, fdmabuf, cuda, cdmabuf, ordered, nocalls);
        srd_gdr_decision d;
        srd_gdr_decide(&in, &d);
        bool copies = std::string(prov) == "shm" || std::string(prov).rfind("tcp", 0) == 0;
        // A provider that makes CUDA calls of its own is offered only when forced.
        bool gpu = mode != SRD_GDR_OFF && hmem && fcuda && cuda && (nocalls || mode == SRD_GDR_ON);
        SCOPED_TRACE(std::string(prov) + " mode " + std::to_string(mode) + " bits " + std::to_string(bits));
        EXPECT_EQ(gpu, d.gpu) << d.why;
        EXPECT_EQ(mode == SRD_GDR_ON && !gpu, d.fail);
        EXPECT_EQ(gpu && fdmabuf && cdmabuf, d.dmabuf) << d.dmabuf_why;
        EXPECT_EQ(gpu && !copies && !ordered, d.flush) << d.flush_why;
        EXPECT_EQ(gpu && !copies && nocalls, d.nic_writes) << "a NIC writes GPU memory only where nothing else does";
        EXPECT_STRNE("", d.why);
        EXPECT_STRNE("", d.dmabuf_why);
        EXPECT_STRNE("", d.flush_why);
        // The first missing piece is the reason given.
        const char *expect = mode == SRD_GDR_OFF ? "NCCL_SRD_GDR=0"
                             : !hmem             ? "does not offer FI_HMEM"
                             : !fcuda            ? "cannot handle CUDA memory: FCUDA-WHY"
                             : !cuda             ? "CUDA-WHY"
                             : !nocalls && mode == SRD_GDR_AUTO
                                 ? "makes CUDA calls of its own in NCCL's proxy thread (NOCALLS-WHY)"
                             : !nocalls ? "forced by NCCL_SRD_GDR=1"
                                        : "offers FI_HMEM with CUDA and makes no CUDA calls of its own; CUDA-WHY";
        EXPECT_TRUE(has(d.why, expect)) << d.why;
        if (gpu && !fdmabuf) {
          EXPECT_STREQ("FDMABUF-WHY", d.dmabuf_why);
        }
        if (gpu && fdmabuf && !cdmabuf) {
          EXPECT_TRUE(has(d.dmabuf_why, "does not export dma-bufs")) << d.dmabuf_why;
        }
        count++;
      }
  EXPECT_EQ(3 * 4 * 128, count);
}

TEST(GdrDecide, UnknownInputsCountAsNo) {
  srd_gdr_inputs in = inputs(SRD_GDR_AUTO, "efa", 1, 1, 1, 1, -1, -1);
  srd_gdr_decision d;
  srd_gdr_decide(&in, &d);
  EXPECT_TRUE(d.gpu);
  EXPECT_FALSE(d.dmabuf);
  EXPECT_TRUE(d.flush); // ordering unknown: flush to be safe
  in.cuda = -1;
  srd_gdr_decide(&in, &d);
  EXPECT_FALSE(d.gpu);
  in.cuda = 1;
  in.fi_no_cuda_calls = -1; // headers that cannot ask: not promised
  srd_gdr_decide(&in, &d);
  EXPECT_FALSE(d.gpu);
}

TEST(GdrFlush, PerProvider) {
  EXPECT_TRUE(srd_gdr_provider_copies("shm"));
  EXPECT_TRUE(srd_gdr_provider_copies("tcp"));
  EXPECT_TRUE(srd_gdr_provider_copies("tcp;ofi_rxm"));
  EXPECT_FALSE(srd_gdr_provider_copies("efa"));
  EXPECT_FALSE(srd_gdr_provider_copies("verbs;ofi_rxm"));
  EXPECT_FALSE(srd_gdr_provider_copies("shmx"));
  EXPECT_FALSE(srd_gdr_provider_copies(""));
}

class Env : public ::testing::Test {
 protected:
  void SetUp() override { clear(); }
  void TearDown() override {
    clear();
    srd_log_set_logger(nullptr);
  }
  static void clear() {
    unsetenv("NCCL_SRD_GDR");
    unsetenv("NCCL_SRD_PROVIDER");
    srd_param_reload();
  }
  static void set(const char *name, const char *value) {
    ASSERT_EQ(0, setenv(name, value, 1));
    srd_param_reload();
  }
};

std::vector<std::string> warnings, infos;

void recorder(ncclDebugLogLevel level, unsigned long, const char *, int, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  (level == NCCL_LOG_WARN ? warnings : infos).push_back(buf);
}

TEST_F(Env, Mode) {
  EXPECT_EQ(SRD_GDR_AUTO, srd_gdr_mode());
  set("NCCL_SRD_GDR", "auto");
  EXPECT_EQ(SRD_GDR_AUTO, srd_gdr_mode());
  set("NCCL_SRD_GDR", "0");
  EXPECT_EQ(SRD_GDR_OFF, srd_gdr_mode());
  set("NCCL_SRD_GDR", "1");
  EXPECT_EQ(SRD_GDR_ON, srd_gdr_mode());
  warnings.clear();
  srd_log_set_logger(recorder);
  set("NCCL_SRD_GDR", "yes");
  EXPECT_EQ(SRD_GDR_AUTO, srd_gdr_mode());
  ASSERT_EQ(1u, warnings.size());
  EXPECT_TRUE(has(warnings[0].c_str(), "NCCL_SRD_GDR=yes is not auto, 0 or 1")) << warnings[0];
}

// This host's libfabric (no CUDA build here) with a fake, working driver.
class Host : public Env {
 protected:
  void open(const char *provider) {
    set("NCCL_SRD_PROVIDER", provider);
    if (srd_topo_discover(&nics_)) GTEST_SKIP() << "provider " << provider << " unusable here";
    opened_ = true;
    grp_ = srd_device_group();
    grp_.nnics = 1;
    grp_.nics[0] = 0;
  }
  void TearDown() override {
    if (opened_) srd_topo_free(&nics_);
    Env::TearDown();
  }
  srd_nic_list nics_{};
  srd_device_group grp_{};
  bool opened_ = false;
};

TEST_F(Host, TcpHasNoHmem) {
  fake::Driver d;
  open("tcp;ofi_rxm");
  srd_gdr_inputs in;
  srd_gdr_gather(&nics_, &grp_, SRD_GDR_AUTO, &in);
  EXPECT_EQ(0, in.fi_hmem);
  EXPECT_EQ(1, in.cuda) << in.cuda_why;
  srd_gdr_decision dec;
  srd_gdr_decide(&in, &dec);
  EXPECT_FALSE(dec.gpu);
  EXPECT_TRUE(has(dec.why, "provider tcp;ofi_rxm does not offer FI_HMEM")) << dec.why;
}

TEST_F(Host, ShmOffersHmemButThisLibfabricHasNoCuda) {
  fake::Driver d;
  open("shm");
  srd_gdr_inputs in;
  srd_gdr_gather(&nics_, &grp_, SRD_GDR_AUTO, &in);
  EXPECT_EQ(1, in.fi_hmem);
  if (in.fi_cuda == 1) GTEST_SKIP() << "this libfabric was built with CUDA";
  EXPECT_TRUE(has(in.fi_cuda_why, "built without CUDA support") || has(in.fi_cuda_why, "libcudart.so"))
      << in.fi_cuda_why;
  EXPECT_EQ(0, in.fi_dmabuf); // shm copies: a dma-buf gives it nothing
  EXPECT_EQ(1, in.cuda);
  EXPECT_EQ(1, in.cuda_dmabuf);
  EXPECT_EQ(0, in.cuda_ordered);
  srd_gdr_decision dec;
  srd_gdr_decide(&in, &dec);
  EXPECT_FALSE(dec.gpu);
  EXPECT_TRUE(has(dec.why, "libfabric cannot handle CUDA memory")) << dec.why;
}

// shm copies GPU memory with CUDA calls of its own: it never promises
// otherwise, so auto never offers GPU pointers on it (PyTorch hung there).
TEST_F(Host, ShmNeverPromisesNoCudaCalls) {
  fake::Driver d;
  open("shm");
  srd_gdr_inputs in;
  srd_gdr_gather(&nics_, &grp_, SRD_GDR_AUTO, &in);
  ASSERT_EQ(1, in.fi_hmem);
  EXPECT_NE(1, in.fi_no_cuda_calls);
  EXPECT_TRUE(has(in.fi_no_cuda_calls_why, "FI_OPT_CUDA_API_PERMITTED")) << in.fi_no_cuda_calls_why;
  in.fi_cuda = 1; // as with a CUDA-aware libfabric
  srd_gdr_decision dec;
  srd_gdr_decide(&in, &dec);
  EXPECT_FALSE(dec.gpu);
  EXPECT_TRUE(has(dec.why, "makes CUDA calls of its own")) << dec.why;
  srd_gdr_gather(&nics_, &grp_, SRD_GDR_OFF, &in);
  EXPECT_EQ(-1, in.fi_no_cuda_calls) << "NCCL_SRD_GDR=0 asks nothing";
}

// A device gets GPU buffers of whichever GPU NCCL hands it (a GPU without a
// NIC of its own uses another's), so its flush and dma-buf decisions must hold
// for every GPU of the host: one GPU that does not order the NIC's writes
// makes every device flush, one that cannot export dma-bufs turns them off.
// The odd GPU is put in every position, with GPUs that differ.
TEST_F(Host, EveryGpuWeighsInEachDevicesDecision) {
  fake::Driver d;
  fake::state.devices = 4;
  open("shm");
  const int ordered = SRD_CU_GPU_DIRECT_RDMA_WRITES_ORDERING_OWNER;
  for (int odd = -1; odd < 4; odd++) {
    SCOPED_TRACE(odd < 0 ? std::string("all alike") : "GPU " + std::to_string(odd) + " differs");
    for (int k = 0; k < 4; k++) {
      fake::state.ordering_attr[k] = k == odd ? 0 : ordered;
      fake::state.dmabuf_attr[k] = k != odd;
    }
    srd_gdr_inputs in;
    srd_gdr_gather(&nics_, &grp_, SRD_GDR_AUTO, &in);
    ASSERT_EQ(1, in.cuda) << in.cuda_why;
    EXPECT_EQ(odd < 0, in.cuda_ordered == 1);
    EXPECT_EQ(odd < 0, in.cuda_dmabuf == 1);
    // As a NIC that writes GPU memory itself (efa) would decide with them.
    snprintf(in.provider, sizeof(in.provider), "efa");
    in.fi_hmem = in.fi_cuda = in.fi_dmabuf = in.fi_no_cuda_calls = 1;
    srd_gdr_decision dec;
    srd_gdr_decide(&in, &dec);
    ASSERT_TRUE(dec.gpu) << dec.why;
    EXPECT_EQ(odd >= 0, dec.flush) << dec.flush_why;
    EXPECT_EQ(odd < 0, dec.dmabuf) << dec.dmabuf_why;
  }
}

TEST_F(Host, HmemFilterWithoutCuda) {
  fake::Driver d;
  open("shm");
  ASSERT_EQ(0, setenv("FI_HMEM", "ze", 1));
  srd_gdr_inputs in;
  srd_gdr_gather(&nics_, &grp_, SRD_GDR_AUTO, &in);
  unsetenv("FI_HMEM");
  EXPECT_EQ(0, in.fi_cuda);
  EXPECT_STREQ("FI_HMEM=ze leaves CUDA out of libfabric's GPU interfaces", in.fi_cuda_why);
}

TEST_F(Host, OffSkipsTheDriver) {
  srd_cuda_ops o = fake::ops();
  o.init = nullptr; // would make the driver unusable if it were loaded
  fake::Driver d(o);
  open("tcp;ofi_rxm");
  srd_gdr_inputs in;
  srd_gdr_gather(&nics_, &grp_, SRD_GDR_OFF, &in);
  EXPECT_EQ(-1, in.cuda);
  EXPECT_TRUE(has(in.cuda_why, "not checked")) << in.cuda_why;
}

TEST_F(Host, RequiredButImpossibleFailsLoudly) {
  fake::Driver d;
  open("tcp;ofi_rxm");
  set("NCCL_SRD_GDR", "1");
  warnings.clear();
  srd_log_set_logger(recorder);
  srd_gdr_decision dec;
  EXPECT_EQ(-1, srd_gdr_device(&nics_, &grp_, 3, &dec));
  EXPECT_TRUE(dec.fail);
  ASSERT_EQ(1u, warnings.size());
  EXPECT_TRUE(has(warnings[0].c_str(), "device 3: NCCL_SRD_GDR=1 but GPU memory cannot be offered: provider "
                                       "tcp;ofi_rxm does not offer FI_HMEM"))
      << warnings[0];
}

TEST_F(Host, AutoLogsWhyAtInfo) {
  fake::Driver d;
  open("tcp;ofi_rxm");
  infos.clear();
  warnings.clear();
  srd_log_set_logger(recorder);
  srd_gdr_decision dec;
  EXPECT_EQ(0, srd_gdr_device(&nics_, &grp_, 0, &dec));
  EXPECT_TRUE(warnings.empty());
  ASSERT_EQ(1u, infos.size());
  EXPECT_TRUE(has(infos[0].c_str(), "device 0: GPU pointers not offered: provider tcp;ofi_rxm does not offer FI_HMEM"))
      << infos[0];
}

TEST_F(Host, NoDriverIsTheReason) {
  fake::Driver d;
  fake::state.init_result = SRD_CUDA_ERROR_NO_DEVICE;
  open("shm");
  srd_gdr_inputs in;
  srd_gdr_gather(&nics_, &grp_, SRD_GDR_AUTO, &in);
  in.fi_cuda = 1; // as with a CUDA-aware libfabric
  srd_gdr_decision dec;
  srd_gdr_decide(&in, &dec);
  EXPECT_FALSE(dec.gpu);
  EXPECT_STREQ("cuInit failed: fake: no CUDA-capable device is detected", dec.why);
}

} // namespace
