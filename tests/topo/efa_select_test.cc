// What the efa path chooses, from what libfabric 2.6.0's efa provider offers
// (tests/topo/efa_fi_info.txt, each field with its source): the API version
// asked for, the version floor, the fabric kept out of efa's list, the name
// peers compare, the eager size that fits one send, the CQ size, the dma-buf
// range, and the fork and huge-page advice. No EFA device is needed.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "config.h"
// C functions named like their structs (srd_rail_write, srd_send_comm; the
// libfabric 2.x headers' fi_alias, fi_mr_raw_attr).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>
extern "C" {
#include "srd/proto.h"
}
#pragma GCC diagnostic pop

namespace {

TEST(ApiVersion, TheHeadersBoundedByTheRuntime) {
  const uint32_t oldest = FI_VERSION(1, 17);
  // A 2.6 build on EFA installer 1.47's libfabric 2.4 asks for 2.4.
  EXPECT_EQ(FI_VERSION(2, 4), srd_fi_api_choose(FI_VERSION(2, 6), FI_VERSION(2, 4), oldest));
  EXPECT_EQ(FI_VERSION(2, 6), srd_fi_api_choose(FI_VERSION(2, 6), FI_VERSION(2, 6), oldest));
  // Never newer than the headers: libfabric reads our structures by it.
  EXPECT_EQ(FI_VERSION(1, 17), srd_fi_api_choose(FI_VERSION(1, 17), FI_VERSION(2, 6), oldest));
  EXPECT_EQ(FI_VERSION(1, 17), srd_fi_api_choose(FI_VERSION(2, 6), FI_VERSION(1, 17), oldest));
  EXPECT_EQ(FI_VERSION(2, 4), srd_fi_api_choose(FI_VERSION(2, 4), FI_VERSION(2, 5), oldest));
  EXPECT_EQ(0u, srd_fi_api_choose(FI_VERSION(2, 6), FI_VERSION(1, 16), oldest));
  // This build and this runtime: never above either.
  uint32_t v = srd_fi_api_version();
  EXPECT_FALSE(FI_VERSION_LT(fi_version(), v));
  EXPECT_FALSE(FI_VERSION_LT(SRD_FI_BUILT_VERSION, v));
}

TEST(EfaVersion, RefusedBelowTheFloorWarnedWhereItHurts) {
  char why[400];
  EXPECT_EQ(-1, srd_efa_version_check(FI_VERSION(1, 21), FI_VERSION(1, 21), why, sizeof(why)));
  EXPECT_NE(nullptr, strstr(why, "1.21")) << why;
  EXPECT_EQ(0, srd_efa_version_check(FI_VERSION(1, 22), FI_VERSION(1, 22), why, sizeof(why)));
  EXPECT_NE(nullptr, strstr(why, "1.22")) << why;
  // A 1.17-headers build on 2.x: usable, and told why no GPU memory.
  EXPECT_EQ(0, srd_efa_version_check(FI_VERSION(2, 4), FI_VERSION(1, 17), why, sizeof(why)));
  EXPECT_NE(nullptr, strstr(why, "EFA installer's libfabric")) << why;
  EXPECT_EQ(1, srd_efa_version_check(FI_VERSION(2, 0), FI_VERSION(2, 0), why, sizeof(why)));
  EXPECT_EQ(1, srd_efa_version_check(FI_VERSION(2, 6), FI_VERSION(2, 4), why, sizeof(why)));
  EXPECT_STREQ("", why);
}

struct Entry {
  std::string scenario, fabric, domain;
  uint64_t max_msg, send, cq_data;
  bool mr_local;
};

std::vector<Entry> fixture() {
  std::ifstream in(EFA_FIXTURE);
  EXPECT_TRUE(in.good()) << EFA_FIXTURE;
  std::vector<Entry> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream f(line);
    Entry e;
    int mr_local = 0;
    f >> e.scenario >> e.fabric >> e.domain >> e.max_msg >> e.send >> e.cq_data >> mr_local;
    EXPECT_FALSE(f.fail()) << line;
    e.mr_local = mr_local;
    out.push_back(e);
  }
  return out;
}

// The scenario's entries as fi_getinfo hands them over: one list, in order.
struct fi_info *efa_list(const std::vector<Entry> &all, const std::string &scenario) {
  struct fi_info *head = nullptr, **tail = &head;
  for (const Entry &e : all) {
    if (e.scenario != scenario) continue;
    struct fi_info *i = fi_allocinfo();
    i->ep_attr->type = FI_EP_RDM;
    i->fabric_attr->prov_name = strdup("efa");
    i->fabric_attr->name = strdup(e.fabric.c_str());
    i->domain_attr->name = strdup(e.domain.c_str());
    i->ep_attr->max_msg_size = e.max_msg;
    i->domain_attr->cq_data_size = e.cq_data;
    i->domain_attr->mr_mode = e.mr_local ? FI_MR_LOCAL : 0;
    *tail = i;
    tail = &i->next;
  }
  return head;
}

std::vector<std::string> fabrics(const struct fi_info *l) {
  std::vector<std::string> out;
  for (; l; l = l->next) out.push_back(std::string(l->fabric_attr->name) + "@" + l->domain_attr->name);
  return out;
}

// nics.c keeps the first entry of each domain: efa's own order would make
// that efa-direct wherever the device offers it, so the list is cut to the
// chosen fabric first.
TEST(EfaFabric, TheChosenFabricAloneReachesNicDiscovery) {
  std::vector<Entry> all = fixture();
  ASSERT_EQ(6u, all.size());
  struct fi_info *l = efa_list(all, "device-writes-unsolicited");
  EXPECT_STREQ("efa-direct", l->fabric_attr->name) << "efa lists efa-direct first";
  srd_fabric_keep(&l, "efa");
  EXPECT_EQ((std::vector<std::string>{"efa@rdmap16s27-rdm", "efa@rdmap32s27-rdm"}), fabrics(l));
  fi_freeinfo(l);

  l = efa_list(all, "device-writes-unsolicited");
  srd_fabric_keep(&l, "efa-direct");
  EXPECT_EQ((std::vector<std::string>{"efa-direct@rdmap16s27-rdm", "efa-direct@rdmap32s27-rdm"}), fabrics(l));
  fi_freeinfo(l);

  // Without unsolicited write receive efa-direct is not offered to our hints.
  l = efa_list(all, "no-unsolicited-write-recv");
  srd_fabric_keep(&l, "efa-direct");
  EXPECT_EQ(nullptr, l);
  l = efa_list(all, "no-unsolicited-write-recv");
  srd_fabric_keep(&l, SRD_EFA_FABRIC_DEFAULT);
  EXPECT_EQ(2u, fabrics(l).size());
  fi_freeinfo(l);
}

TEST(EfaFabric, OtherProvidersAreNotFiltered) {
  struct fi_info *i = fi_allocinfo();
  i->fabric_attr->prov_name = strdup("tcp");
  i->fabric_attr->name = strdup("192.168.0.0/24");
  EXPECT_EQ(1, srd_fabric_fits(i, "efa"));
  char name[SRD_TRANSPORT_MAX];
  srd_transport_name(i, name, sizeof(name));
  EXPECT_STREQ("tcp", name) << "tcp's fabric is a subnet, which may differ between peers";
  fi_freeinfo(i);
}

TEST(EfaFabric, PeersCompareTheFabricName) {
  struct fi_info *l = efa_list(fixture(), "device-writes-unsolicited");
  char direct[SRD_TRANSPORT_MAX], rdm[SRD_TRANSPORT_MAX];
  srd_transport_name(l, direct, sizeof(direct));
  srd_transport_name(l->next->next, rdm, sizeof(rdm));
  EXPECT_STREQ("efa-direct", direct);
  EXPECT_STREQ("efa", rdm);
  fi_freeinfo(l);
}

// The eager size when NCCL_SRD_EAGER_MAX is unset: 32 KiB on native tcp, 8
// KiB on efa and shm, and on ofi_rxm the largest power of two that fits rxm's
// eager buffer with the 40-byte header (FI_OFI_RXM_BUFFER_SIZE, as libfabric
// parses it: strtol, so "1M" is 1 byte; 16 KiB when unset).
TEST(EagerDefault, FollowsTheProvidersBuffers) {
  struct fi_info *i = fi_allocinfo();
  const char *old = getenv("FI_OFI_RXM_BUFFER_SIZE");
  std::string saved = old ? old : "";
  unsetenv("FI_OFI_RXM_BUFFER_SIZE");
  const struct {
    const char *prov, *buffer;
    size_t eager;
  } cases[] = {
      {"tcp", nullptr, 32768},         {"efa", nullptr, 8192},          {"shm", "65536", 8192},
      {"tcp;ofi_rxm", nullptr, 8192},  {"tcp;ofi_rxm", "32808", 32768}, {"tcp;ofi_rxm", "32807", 16384},
      {"tcp;ofi_rxm", "0x8028", 32768}, {"tcp;ofi_rxm", "1M", 0},   {"verbs;ofi_rxm", "16424", 16384},
      {"tcp;ofi_rxm", "0", 0},         {"tcp;ofi_rxm", "junk", 0},      {"tcp;ofi_rxm", "1064", 1024},
  };
  for (const auto &c : cases) {
    free(i->fabric_attr->prov_name);
    i->fabric_attr->prov_name = strdup(c.prov);
    if (c.buffer) setenv("FI_OFI_RXM_BUFFER_SIZE", c.buffer, 1);
    else unsetenv("FI_OFI_RXM_BUFFER_SIZE");
    EXPECT_EQ(c.eager, srd_eager_default(i)) << c.prov << " with FI_OFI_RXM_BUFFER_SIZE=" << (c.buffer ? c.buffer : "");
  }
  if (old) setenv("FI_OFI_RXM_BUFFER_SIZE", saved.c_str(), 1);
  else unsetenv("FI_OFI_RXM_BUFFER_SIZE");
  fi_freeinfo(i);
}

// Every control message fits one send: eager data is cut to the smallest
// rail's send limit minus its 40-byte header.
TEST(EfaLimits, EagerDataFitsOneSend) {
  for (const Entry &e : fixture()) {
    SCOPED_TRACE(e.fabric + " " + e.scenario);
    if (e.fabric == "efa-direct") {
      EXPECT_EQ(8 * 1024u, srd_dev_eager_fit(8 * 1024, e.send)) << "the default fits one MTU";
      EXPECT_EQ(e.send - 40, srd_dev_eager_fit(64 * 1024, e.send));
    } else {
      EXPECT_EQ(64 * 1024u, srd_dev_eager_fit(64 * 1024, e.send));
    }
  }
  EXPECT_EQ(SIZE_MAX, srd_dev_eager_fit(0, 1024)) << "a hello naming every path does not fit";
}

TEST(EfaLimits, EfaKeepsItsOwnCqSize) {
  struct fi_info *l = efa_list(fixture(), "device-writes-unsolicited");
  for (struct fi_info *i = l; i; i = i->next) EXPECT_EQ(0, srd_rail_cq_size(i)) << i->fabric_attr->name;
  fi_freeinfo(l);
  struct fi_info *t = fi_allocinfo();
  t->fabric_attr->prov_name = strdup("tcp");
  EXPECT_EQ(SRD_RAIL_CQ_SIZE, srd_rail_cq_size(t));
  fi_freeinfo(t);
}

// NCCL's regMrDmaBuf: the buffer lies offset bytes into the dma-buf, and efa
// registers [base_addr + offset, + len) (efa_mr_reg_ibv_mr): that must be the
// buffer's own address, which peers write to.
TEST(DmaBuf, TheRegisteredRangeIsTheBuffer) {
  static char gpu[1 << 16];
  char *base = gpu + 20000;
  for (uint64_t offset : {uint64_t{0}, uint64_t{4096}, uint64_t{12345}})
    EXPECT_EQ(base, static_cast<char *>(srd_rail_dmabuf_base(base, offset)) + offset) << offset;
}

// What srd_rail_reg hands the provider, captured by a domain whose
// registration call records its attributes.
struct Captured {
  int calls = 0;
  uint64_t flags = 0, access = 0;
  int iface = 0;
  void *iov_base = nullptr;
  size_t iov_len = 0;
  bool dmabuf = false;
  void *dmabuf_base = nullptr;
  uint64_t dmabuf_offset = 0;
  size_t dmabuf_len = 0;
} captured;

struct fid_mr fake_mr;

int capture_regattr(struct fid *, const struct fi_mr_attr *attr, uint64_t flags, struct fid_mr **mr) {
  captured.calls++;
  captured.flags = flags;
  captured.access = attr->access;
  captured.iface = attr->iface;
#if HAVE_DECL_FI_MR_DMABUF
  captured.dmabuf = flags & FI_MR_DMABUF;
  if (captured.dmabuf) {
    captured.dmabuf_base = attr->dmabuf->base_addr;
    captured.dmabuf_offset = attr->dmabuf->offset;
    captured.dmabuf_len = attr->dmabuf->len;
    *mr = &fake_mr;
    return 0;
  }
#endif
  captured.iov_base = attr->mr_iov[0].iov_base;
  captured.iov_len = attr->mr_iov[0].iov_len;
  *mr = &fake_mr;
  return 0;
}

TEST(DmaBuf, RegistrationAttributesAsTheProviderSeesThem) {
  struct fi_ops_mr ops;
  memset(&ops, 0, sizeof(ops));
  ops.size = sizeof(ops);
  ops.regattr = capture_regattr;
  struct fid_domain domain;
  memset(&domain, 0, sizeof(domain));
  domain.mr = &ops;
  struct srd_rail rail;
  memset(&rail, 0, sizeof(rail));
  rail.domain = &domain;
  rail.info = fi_allocinfo();
  rail.info->domain_attr->mr_mode = FI_MR_PROV_KEY;
  static char gpu[1 << 16];
  char *base = gpu + 20000;
  struct fid_mr *mr = nullptr;
  captured = Captured();
  ASSERT_EQ(0, srd_rail_reg(&rail, base, 777, FI_WRITE | FI_REMOTE_READ, 2, -1, 0, &mr));
  EXPECT_EQ(base, captured.iov_base);
  EXPECT_EQ(777u, captured.iov_len);
  EXPECT_EQ(uint64_t{FI_WRITE | FI_REMOTE_READ}, captured.access);
  EXPECT_EQ(int{FI_HMEM_CUDA}, captured.iface);
  captured = Captured();
  int rc = srd_rail_reg(&rail, base, 777, FI_REMOTE_WRITE, 2, 9, 4096, &mr);
#if HAVE_DECL_FI_MR_DMABUF
  ASSERT_EQ(0, rc);
  ASSERT_TRUE(captured.dmabuf);
  EXPECT_EQ(base, static_cast<char *>(captured.dmabuf_base) + captured.dmabuf_offset);
  EXPECT_EQ(4096u, captured.dmabuf_offset);
  EXPECT_EQ(777u, captured.dmabuf_len);
#else
  EXPECT_EQ(-FI_ENOSYS, rc) << "headers without FI_MR_DMABUF cannot describe a dma-buf";
  EXPECT_EQ(0, captured.calls);
#endif
  fi_freeinfo(rail.info);
}

TEST(EfaProcess, ForkAndHugePageAdvice) {
  char why[400];
  EXPECT_EQ(0, srd_efa_fork_advice(SRD_FORK_UNNEEDED, nullptr, nullptr, why, sizeof(why)));
  EXPECT_EQ(0, srd_efa_fork_advice(SRD_FORK_ENABLED, nullptr, nullptr, why, sizeof(why)));
  EXPECT_EQ(0, srd_efa_fork_advice(SRD_FORK_DISABLED, "1", nullptr, why, sizeof(why)));
  for (int s : {SRD_FORK_DISABLED, SRD_FORK_UNKNOWN}) {
    EXPECT_EQ(1, srd_efa_fork_advice(s, nullptr, nullptr, why, sizeof(why)));
    EXPECT_NE(nullptr, strstr(why, "FI_EFA_FORK_SAFE=1")) << why;
    EXPECT_EQ(1, srd_efa_fork_advice(s, "0", nullptr, why, sizeof(why)));
  }
  EXPECT_EQ(1, srd_efa_fork_advice(SRD_FORK_DISABLED, "1", "1", why, sizeof(why)));
  EXPECT_NE(nullptr, strstr(why, "unset FI_EFA_USE_HUGE_PAGE")) << why;
  EXPECT_EQ(1, srd_efa_fork_advice(SRD_FORK_ENABLED, nullptr, "true", why, sizeof(why)));
}

}  // namespace
