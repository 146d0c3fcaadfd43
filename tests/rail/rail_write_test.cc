// Remote writes of the rail module on this host's libfabric, between two
// rails of one process: what rail failover relies on (DESIGN.md, "Its
// receiver's keys"). A write posted delivery-complete (failover's writes)
// that its target refuses, naming a key the target never registered, ends
// in an error at the writer, so failover re-sends it or fails the comm
// instead of counting it done; one with the right key lands with its
// immediate data. Runs for each tcp provider this libfabric offers.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

// rail.h names a function after a struct (srd_rail_write).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
#include <rdma/fi_errno.h>
extern "C" {
#include "srd/param.h"
#include "srd/rail.h"
#include "srd/topo.h"
}
#pragma GCC diagnostic pop

namespace {

constexpr size_t kLen = 4096;
constexpr size_t kCtrl = 256;
constexpr int kWaitMs = 20000; // a loaded machine; tcp answers a refusal within milliseconds
constexpr uint32_t kImm = 0x5a5a;

struct Seen {
  int writes = 0;
  uint32_t imm = 0;
};

void on_message(void *, srd_rail *, const void *, size_t, fi_addr_t) {}
void on_remote_write(void *arg, srd_rail *, uint32_t imm, size_t, fi_addr_t) {
  auto *s = static_cast<Seen *>(arg);
  s->writes++;
  s->imm = imm;
}
void on_rail_error(void *, srd_rail *, int, const char *) {}

struct Op {
  srd_op op{};
  bool done = false;
  int err = 0;
  std::string errstr;
};

void op_done(srd_op *op, int err, const char *errstr) {
  auto *o = reinterpret_cast<Op *>(op);
  o->done = true;
  o->err = err;
  o->errstr = errstr ? errstr : "";
}

class RailWrite : public ::testing::TestWithParam<const char *> {
 protected:
  void SetUp() override {
    const char *old = getenv("NCCL_SRD_PROVIDER");
    if (old) saved_ = old, had_ = true;
    setenv("NCCL_SRD_PROVIDER", GetParam(), 1);
    srd_param_reload();
    if (srd_topo_discover(&nics_)) GTEST_SKIP() << "provider " << GetParam() << " not offered here";
    listed_ = true;
    if (strcmp(nics_.provider, GetParam()))
      GTEST_SKIP() << "asked for " << GetParam() << ", libfabric offers " << nics_.provider;
    srd_rail_handlers h{on_message, on_remote_write, on_rail_error, &seen_};
    ASSERT_EQ(0, srd_rail_open(&writer_, 0, nics_.nics[0].info, 1, kCtrl, false, &h));
    writer_open_ = true;
    ASSERT_EQ(0, srd_rail_open(&target_, 1, nics_.nics[0].info, 1, kCtrl, false, &h));
    target_open_ = true;
    ASSERT_EQ(0, srd_rail_av_insert(&writer_, target_.ep_name[0], &dest_));
    src_.assign(kLen, 0x11);
    dst_.assign(kLen, 0);
    ASSERT_EQ(0, srd_rail_reg(&writer_, src_.data(), kLen, FI_WRITE, -1, -1, 0, &src_mr_));
    ASSERT_EQ(0, srd_rail_reg(&target_, dst_.data(), kLen, FI_REMOTE_WRITE, -1, -1, 0, &dst_mr_));
    raddr_ = target_.virt_addr ? reinterpret_cast<uint64_t>(dst_.data()) : 0;
  }

  void TearDown() override {
    if (src_mr_) srd_rail_mr_close(src_mr_);
    if (dst_mr_) srd_rail_mr_close(dst_mr_);
    if (writer_open_) srd_rail_close(&writer_);
    if (target_open_) srd_rail_close(&target_);
    if (listed_) srd_topo_free(&nics_);
    if (had_) setenv("NCCL_SRD_PROVIDER", saved_.c_str(), 1);
    else unsetenv("NCCL_SRD_PROVIDER");
    srd_param_reload();
  }

  // Post one write of kLen bytes and progress both rails until it completes
  // (false: it did not within kWaitMs).
  bool write(uint64_t key, Op *o) {
    o->op.done = op_done;
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(kWaitMs);
    int rc;
    while ((rc = srd_rail_write(&writer_, 0, src_.data(), kLen, srd_rail_mr_desc(src_mr_), kImm, dest_, raddr_, key,
                                &o->op)) == -FI_EAGAIN &&
           std::chrono::steady_clock::now() < until)
      progress();
    EXPECT_EQ(0, rc) << "the write was not posted";
    if (rc) return false;
    while (!o->done && std::chrono::steady_clock::now() < until) progress();
    return o->done;
  }
  void progress() {
    srd_rail_poll(&writer_, SRD_RAIL_BATCH);
    srd_rail_poll(&target_, SRD_RAIL_BATCH);
  }

  srd_nic_list nics_{};
  srd_rail writer_{}, target_{};
  fid_mr *src_mr_ = nullptr, *dst_mr_ = nullptr;
  fi_addr_t dest_ = FI_ADDR_NOTAVAIL;
  uint64_t raddr_ = 0;
  std::vector<char> src_, dst_;
  Seen seen_;
  bool listed_ = false, writer_open_ = false, target_open_ = false, had_ = false;
  std::string saved_;
};

TEST_P(RailWrite, DeliveryCompleteWriteLands) {
  writer_.delivery_complete = true;
  Op o;
  ASSERT_TRUE(write(srd_rail_mr_key(dst_mr_), &o)) << "no completion within " << kWaitMs << " ms";
  EXPECT_EQ(0, o.err) << o.errstr;
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(kWaitMs);
  while (!seen_.writes && std::chrono::steady_clock::now() < until) progress();
  EXPECT_EQ(1, seen_.writes) << "the target saw no write with data";
  EXPECT_EQ(kImm, seen_.imm);
  EXPECT_EQ(src_, dst_) << "the written bytes did not land";
}

TEST_P(RailWrite, RefusedDeliveryCompleteWriteFailsAtTheWriter) {
  writer_.delivery_complete = true;
  Op o;
  ASSERT_TRUE(write(srd_rail_mr_key(dst_mr_) + 0x1000, &o)) << "no completion within " << kWaitMs << " ms";
  EXPECT_NE(0, o.err) << "a write the target refused completed as a success: failover would count it done";
  EXPECT_EQ(0, seen_.writes);
  EXPECT_EQ(std::vector<char>(kLen, 0), dst_) << "a write with a foreign key landed";
}

INSTANTIATE_TEST_SUITE_P(Tcp, RailWrite, ::testing::Values("tcp;ofi_rxm", "tcp"),
                         [](const ::testing::TestParamInfo<const char *> &p) {
                           return std::string(strchr(p.param, ';') ? "tcp_rxm" : "tcp");
                         });

} // namespace
