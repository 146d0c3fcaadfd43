// GPU <-> NIC grouping against the synthetic topologies of make_topologies.py.
// The NIC lists are built by hand (no libfabric info), in an order unlike the
// PCI order, so the tests prove that NICs are placed by address.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

// param.h names a function like its struct, which C++ calls shadowing.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
extern "C" {
#include "srd/param.h"
#include "srd/topo.h"
}
#pragma GCC diagnostic pop

#ifndef TOPO_XML_DIR
#error "TOPO_XML_DIR must name the directory of the test topologies"
#endif

namespace {

std::string xml(const char *name) { return std::string(TOPO_XML_DIR) + "/" + name; }

// A list of NICs at the given PCI addresses ("" for a NIC without one).
class NicList {
 public:
  explicit NicList(const std::vector<std::string> &busids, int speed_mbps = 100000) {
    list_.n = (int)busids.size();
    list_.nics = (struct srd_nic *)calloc(busids.size() ? busids.size() : 1, sizeof(struct srd_nic));
    for (size_t i = 0; i < busids.size(); i++) {
      struct srd_nic *nic = &list_.nics[i];
      snprintf(nic->name, sizeof(nic->name), "nic%zu", i);
      snprintf(nic->pci_bus_id, sizeof(nic->pci_bus_id), "%s", busids[i].c_str());
      if (!busids[i].empty())
        snprintf(nic->pci_path, sizeof(nic->pci_path), "/sys/devices/pci0000:00/%s", busids[i].c_str());
      nic->numa = -1;
      nic->speed_mbps = speed_mbps;
    }
  }
  ~NicList() { srd_topo_free(&list_); }
  NicList(const NicList &) = delete;
  NicList &operator=(const NicList &) = delete;
  const struct srd_nic_list *get() const { return &list_; }
  int index_of(const std::string &busid) const {
    for (int i = 0; i < list_.n; i++)
      if (busid == list_.nics[i].pci_bus_id) return i;
    return -1;
  }
  std::string path(int i) const { return list_.nics[i].pci_path; }

 private:
  struct srd_nic_list list_ = {};
};

std::string busid(unsigned bus) {
  char b[16];
  snprintf(b, sizeof(b), "0000:%02x:00.0", bus);
  return b;
}

std::vector<int> rails(const struct srd_device_group &g) { return std::vector<int>(g.nics, g.nics + g.nnics); }

// p5.xml: switch s has its host bridge on bus 0x10 + 0x1c*s, the GPU on
// bus +3 and 4 NICs on buses +4..+7; switches 0-3 on socket 0, 4-7 on 1.
unsigned p5_nic_bus(int sw, int k) { return 0x10 + 0x1c * sw + 4 + k; }

std::vector<std::string> p5_nics_reversed() {
  std::vector<std::string> ids;
  for (int sw = 7; sw >= 0; sw--)
    for (int k = 3; k >= 0; k--) ids.push_back(busid(p5_nic_bus(sw, k)));
  return ids;
}

TEST(TopoGroup, P5EachGpuGetsTheFourNicsOfItsSwitch) {
  NicList nics(p5_nics_reversed());
  struct srd_topo topo;
  ASSERT_EQ(0, srd_topo_group(nics.get(), xml("p5.xml").c_str(), 0, &topo));
  EXPECT_EQ(8, topo.ngpus);  // the BMC's VGA and the NVSwitch are not GPUs
  ASSERT_EQ(8, topo.ngroups);
  for (int g = 0; g < 8; g++) {
    SCOPED_TRACE("GPU " + std::to_string(g));
    const struct srd_device_group &grp = topo.groups[g];
    std::vector<int> want;
    for (int k = 0; k < 4; k++) want.push_back(nics.index_of(busid(p5_nic_bus(g, k))));
    std::sort(want.begin(), want.end());
    EXPECT_EQ(want, rails(grp));
    EXPECT_EQ(g, grp.gpu);
    EXPECT_EQ(g / 4, grp.numa);
    EXPECT_EQ(400000, grp.speed_mbps);
    EXPECT_EQ(nics.path(want[0]), grp.pci_path);
  }
}

TEST(TopoGroup, P5MaxRailsCapsEachGroup) {
  NicList nics(p5_nics_reversed());
  struct srd_topo topo;
  ASSERT_EQ(0, srd_topo_group(nics.get(), xml("p5.xml").c_str(), 2, &topo));
  ASSERT_EQ(8, topo.ngroups);
  for (int g = 0; g < 8; g++) {
    EXPECT_EQ(2, topo.groups[g].nnics);
    EXPECT_EQ(200000, topo.groups[g].speed_mbps);
    for (int r = 0; r < 2; r++) {
      int i = topo.groups[g].nics[r];
      bool on_switch = false;
      for (int k = 0; k < 4; k++) on_switch |= i == nics.index_of(busid(p5_nic_bus(g, k)));
      EXPECT_TRUE(on_switch) << "GPU " << g << " got NIC " << i;
    }
  }
}

// p4d.xml: switch s (host bridge bus 0x10 + 0x20*s) holds 2 GPUs (+3, +4) and
// one NIC (+5): both GPUs use that NIC.
TEST(TopoGroup, P4dTwoGpusShareEachNic) {
  std::vector<std::string> ids;
  for (int sw = 3; sw >= 0; sw--) ids.push_back(busid(0x10 + 0x20 * sw + 5));
  NicList nics(ids);
  struct srd_topo topo;
  ASSERT_EQ(0, srd_topo_group(nics.get(), xml("p4d.xml").c_str(), 0, &topo));
  EXPECT_EQ(8, topo.ngpus);
  ASSERT_EQ(8, topo.ngroups);
  for (int g = 0; g < 8; g++) {
    SCOPED_TRACE("GPU " + std::to_string(g));
    int nic = nics.index_of(busid(0x10 + 0x20 * (g / 2) + 5));
    EXPECT_EQ(std::vector<int>{nic}, rails(topo.groups[g]));
    EXPECT_EQ(g / 4, topo.groups[g].numa);
    EXPECT_EQ(100000, topo.groups[g].speed_mbps);
    EXPECT_EQ(nics.path(nic), topo.groups[g].pci_path);
  }
}

TEST(TopoGroup, SingleGpuTakesItsNumaNodesNic) {
  NicList nics({busid(0x41)});
  struct srd_topo topo;
  ASSERT_EQ(0, srd_topo_group(nics.get(), xml("single.xml").c_str(), 0, &topo));
  EXPECT_EQ(1, topo.ngpus);
  ASSERT_EQ(1, topo.ngroups);
  EXPECT_EQ(std::vector<int>{0}, rails(topo.groups[0]));
  EXPECT_EQ(0, topo.groups[0].gpu);
  EXPECT_EQ(0, topo.groups[0].numa);
  EXPECT_EQ(nics.path(0), topo.groups[0].pci_path);
}

// GPUs on socket 0 (one of class VGA, one found only by its CUDA OS device),
// NICs on socket 1: nothing is closer, so the GPUs split the machine's NICs.
TEST(TopoGroup, CrossNumaGpusSplitTheRemoteNics) {
  NicList nics({busid(0x82), busid(0x81)});
  struct srd_topo topo;
  ASSERT_EQ(0, srd_topo_group(nics.get(), xml("cross-numa.xml").c_str(), 0, &topo));
  EXPECT_EQ(2, topo.ngpus);
  ASSERT_EQ(2, topo.ngroups);
  EXPECT_EQ(std::vector<int>{0}, rails(topo.groups[0]));
  EXPECT_EQ(std::vector<int>{1}, rails(topo.groups[1]));
  for (int g = 0; g < 2; g++) {
    EXPECT_EQ(g, topo.groups[g].gpu);
    EXPECT_EQ(1, topo.groups[g].numa);  // where the NIC is, not the GPU
  }
}

TEST(TopoGroup, SharedSwitchSplitsNicsEvenly) {
  std::vector<std::string> ids;
  for (unsigned bus = 0x25; bus <= 0x2c; bus++) ids.push_back(busid(bus));
  NicList nics(ids);
  struct srd_topo topo;
  ASSERT_EQ(0, srd_topo_group(nics.get(), xml("shared-switch.xml").c_str(), 0, &topo));
  ASSERT_EQ(2, topo.ngroups);
  EXPECT_EQ((std::vector<int>{0, 1, 2, 3}), rails(topo.groups[0]));
  EXPECT_EQ((std::vector<int>{4, 5, 6, 7}), rails(topo.groups[1]));
  EXPECT_EQ(400000, topo.groups[1].speed_mbps);
}

TEST(TopoGroup, UnevenSplitCoversEveryNicOnce) {
  std::vector<std::string> ids;
  for (unsigned bus = 0x25; bus <= 0x29; bus++) ids.push_back(busid(bus));
  NicList nics(ids);
  struct srd_topo topo;
  ASSERT_EQ(0, srd_topo_group(nics.get(), xml("shared-switch.xml").c_str(), 0, &topo));
  ASSERT_EQ(2, topo.ngroups);
  EXPECT_EQ((std::vector<int>{0, 1}), rails(topo.groups[0]));
  EXPECT_EQ((std::vector<int>{2, 3, 4}), rails(topo.groups[1]));
}

// Tiers side by side: GPU 0 has a NIC behind its switch; GPU 1 takes the
// NUMA node's other NIC rather than GPU 0's; GPU 2 has nothing on its socket
// and takes both, the fewer PCI hops first.
TEST(TopoGroup, MixedTiersPreferUnclaimedNics) {
  NicList nics({busid(0x32), busid(0x14)});
  struct srd_topo topo;
  ASSERT_EQ(0, srd_topo_group(nics.get(), xml("mixed.xml").c_str(), 0, &topo));
  EXPECT_EQ(3, topo.ngpus);
  ASSERT_EQ(3, topo.ngroups);
  EXPECT_EQ(std::vector<int>{1}, rails(topo.groups[0]));
  EXPECT_EQ(std::vector<int>{0}, rails(topo.groups[1]));
  EXPECT_EQ((std::vector<int>{0, 1}), rails(topo.groups[2]));
  EXPECT_EQ(SRD_LOCALITY_SWITCH, topo.groups[0].locality);
  EXPECT_EQ(SRD_LOCALITY_NUMA, topo.groups[1].locality);
  EXPECT_EQ(SRD_LOCALITY_MACHINE, topo.groups[2].locality);
  EXPECT_EQ(200000, topo.groups[2].speed_mbps);
  EXPECT_EQ(0, topo.groups[2].numa);
  EXPECT_EQ(nics.path(0), topo.groups[2].pci_path);
}

TEST(TopoGroup, NoGpuGivesOneGroupOfEveryRail) {
  NicList nics({busid(0x03), busid(0x02), ""}, 25000);
  struct srd_topo topo;
  ASSERT_EQ(0, srd_topo_group(nics.get(), xml("no-gpu.xml").c_str(), 0, &topo));
  EXPECT_EQ(0, topo.ngpus);
  ASSERT_EQ(1, topo.ngroups);
  EXPECT_EQ(-1, topo.groups[0].gpu);
  EXPECT_EQ(SRD_LOCALITY_NO_GPU, topo.groups[0].locality);
  EXPECT_EQ((std::vector<int>{0, 1, 2}), rails(topo.groups[0]));
  EXPECT_EQ(75000, topo.groups[0].speed_mbps);
  EXPECT_EQ(nics.path(0), topo.groups[0].pci_path);
  EXPECT_EQ(0, topo.groups[0].numa);  // from the topology
}

TEST(TopoGroup, NoPciNicGivesOneGroupEvenWithGpus) {
  NicList nics({"", "", "", ""});
  struct srd_topo topo;
  ASSERT_EQ(0, srd_topo_group(nics.get(), xml("p5.xml").c_str(), 3, &topo));
  EXPECT_EQ(8, topo.ngpus);
  ASSERT_EQ(1, topo.ngroups);
  EXPECT_EQ(-1, topo.groups[0].gpu);
  EXPECT_EQ(SRD_LOCALITY_NO_GPU, topo.groups[0].locality);
  EXPECT_EQ((std::vector<int>{0, 1, 2}), rails(topo.groups[0]));
  EXPECT_STREQ("", topo.groups[0].pci_path);
  EXPECT_EQ(-1, topo.groups[0].numa);
}

TEST(TopoGroup, NicsOutsideTheTopologyAreLeftOut) {
  // A veth (no PCI) and an address the machine does not have, beside p4d's NICs.
  NicList nics({"", busid(0x15), "0000:ee:00.0", busid(0x35), busid(0x55), busid(0x75)});
  struct srd_topo topo;
  ASSERT_EQ(0, srd_topo_group(nics.get(), xml("p4d.xml").c_str(), 0, &topo));
  ASSERT_EQ(8, topo.ngroups);
  const int want[8] = {1, 1, 3, 3, 4, 4, 5, 5};
  for (int g = 0; g < 8; g++) EXPECT_EQ(std::vector<int>{want[g]}, rails(topo.groups[g])) << "GPU " << g;
}

TEST(TopoGroup, TopoFileParameterIsUsedWhenNoPathIsGiven) {
  NicList nics({busid(0x41)});
  struct srd_topo topo;
  ASSERT_EQ(0, setenv("NCCL_SRD_TOPO_FILE", xml("single.xml").c_str(), 1));
  srd_param_reload();
  int rc = srd_topo_group(nics.get(), nullptr, 0, &topo);
  unsetenv("NCCL_SRD_TOPO_FILE");
  srd_param_reload();
  ASSERT_EQ(0, rc);
  EXPECT_EQ(1, topo.ngpus);
  ASSERT_EQ(1, topo.ngroups);
  EXPECT_EQ(0, topo.groups[0].gpu);
}

TEST(TopoGroup, LiveMachineWithoutPciNicsIsOneGroup) {
  NicList nics({"", ""});
  struct srd_topo topo;
  ASSERT_EQ(0, srd_topo_group(nics.get(), nullptr, 0, &topo));
  ASSERT_EQ(1, topo.ngroups);
  EXPECT_EQ(-1, topo.groups[0].gpu);
  EXPECT_EQ(2, topo.groups[0].nnics);
}

TEST(TopoGroup, MissingTopologyFileIsAnError) {
  NicList nics({busid(0x41)});
  struct srd_topo topo;
  EXPECT_EQ(-1, srd_topo_group(nics.get(), xml("does-not-exist.xml").c_str(), 0, &topo));
  EXPECT_EQ(0, topo.ngroups);
}

TEST(TopoGroup, MalformedTopologyFileIsAnError) {
  char path[] = "/tmp/srd-topo-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const char junk[] = "<?xml version=\"1.0\"?>\n<topology version=\"2.0\"><object type=\"Machine\"";
  ASSERT_EQ((ssize_t)strlen(junk), write(fd, junk, strlen(junk)));
  close(fd);
  NicList nics({busid(0x41)});
  struct srd_topo topo;
  int rc = srd_topo_group(nics.get(), path, 0, &topo);
  unlink(path);
  EXPECT_EQ(-1, rc);
  EXPECT_EQ(0, topo.ngroups);
}

TEST(TopoGroup, EmptyNicListIsAnError) {
  NicList nics({});
  struct srd_topo topo;
  EXPECT_EQ(-1, srd_topo_group(nics.get(), xml("single.xml").c_str(), 0, &topo));
}

}  // namespace
