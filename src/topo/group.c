/* GPU <-> NIC grouping. Each NIC is placed in the hwloc topology by its PCI
 * address; each GPU takes the NICs nearest to it, in tiers: behind the same
 * PCIe switch, else on the same NUMA node, else anywhere in the machine.
 * GPUs that land on the same candidate set split it evenly, so 2 GPUs behind
 * a switch with 8 NICs get 4 each, and 2 GPUs with 1 NIC both use it. */
#include <errno.h>
#include <hwloc.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "srd/log.h"
#include "srd/param.h"
#include "srd/topo.h"

#define NVIDIA_VENDOR 0x10de
#define PCI_CLASS_VGA 0x0300
#define PCI_CLASS_3D 0x0302

const char *srd_locality_name(int locality) {
  switch (locality) {
  case SRD_LOCALITY_SWITCH: return "same PCIe switch";
  case SRD_LOCALITY_NUMA: return "same NUMA node";
  case SRD_LOCALITY_MACHINE: return "machine (no closer NIC)";
  default: return "no GPU";
  }
}

struct gpu {
  hwloc_obj_t obj;
  int numa;
  enum srd_locality tier;
  uint64_t candidates; /* bit i: nics->nics[i] */
  uint64_t switch_local;
};

struct placement {
  hwloc_topology_t topo;
  int nnics;                     /* NICs considered (at most SRD_MAX_NICS) */
  hwloc_obj_t nic_obj[SRD_MAX_NICS]; /* NULL: not found in the topology */
  int nic_numa[SRD_MAX_NICS];
  int ngpus;
  struct gpu gpus[SRD_MAX_GPUS];
};

static int load_topology(hwloc_topology_t *topo, const char *xml_path) {
  if (hwloc_topology_init(topo)) {
    SRD_WARN("hwloc: cannot initialize a topology");
    return -1;
  }
  hwloc_topology_set_io_types_filter(*topo, HWLOC_TYPE_FILTER_KEEP_ALL);
  /* NVIDIA GPUs are found by their PCI class (and by nvml OS devices where
   * hwloc has that component). The cuda component would start the CUDA
   * runtime hwloc was built with inside NCCL's process, gl would open X
   * displays, opencl would initialize every OpenCL driver: slow, risky and
   * of no use here. */
#if HWLOC_API_VERSION >= 0x00020100
  static const char *const unused_components[] = {"cuda", "gl", "opencl", "rsmi", "levelzero"};
  for (size_t i = 0; i < sizeof(unused_components) / sizeof(unused_components[0]); i++)
    hwloc_topology_set_components(*topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, unused_components[i]);
#endif
  if (xml_path && access(xml_path, R_OK)) {
    SRD_WARN("topology file %s: %s", xml_path, strerror(errno));
    hwloc_topology_destroy(*topo);
    return -1;
  }
  if (xml_path && hwloc_topology_set_xml(*topo, xml_path)) {
    SRD_WARN("topology file %s: hwloc cannot parse it as an XML topology", xml_path);
    hwloc_topology_destroy(*topo);
    return -1;
  }
  if (hwloc_topology_load(*topo)) {
    SRD_WARN("hwloc: cannot load the topology of %s", xml_path ? xml_path : "this machine");
    hwloc_topology_destroy(*topo);
    return -1;
  }
  return 0;
}

/* The live machine is loaded once and kept for the life of the process: it
 * does not change, reading it walks all of sysfs, and destroying the last
 * topology unloads hwloc's PCI plugin, which strands libpciaccess's memory
 * (a leak report in every sanitized run). A loaded topology may be read by
 * several threads at once. */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static hwloc_topology_t live_topo;

static int live_topology(hwloc_topology_t *topo) {
  pthread_mutex_lock(&live_lock);
  int rc = live_topo ? 0 : load_topology(&live_topo, NULL);
  if (rc) live_topo = NULL;
  *topo = live_topo;
  pthread_mutex_unlock(&live_lock);
  return rc;
}

/* The NUMA node the object's I/O subtree hangs from, -1 when that is not a
 * single node (I/O attached to the whole machine). */
static int numa_of(hwloc_topology_t topo, hwloc_obj_t obj) {
  hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, obj);
  if (!anc || !anc->nodeset || hwloc_bitmap_weight(anc->nodeset) != 1) return -1;
  return hwloc_bitmap_first(anc->nodeset);
}

static int tree_depth(hwloc_obj_t obj) {
  int d = 0;
  for (; obj->parent; obj = obj->parent) d++;
  return d;
}

/* hwloc_get_common_ancestor_obj compares level depths, which I/O objects do
 * not have; walk parents instead. *hops gets the path length a -> b. */
static hwloc_obj_t common_ancestor(hwloc_obj_t a, hwloc_obj_t b, int *hops) {
  int da = tree_depth(a), db = tree_depth(b);
  *hops = 0;
  for (; da > db; da--, ++*hops) a = a->parent;
  for (; db > da; db--, ++*hops) b = b->parent;
  while (a != b) {
    a = a->parent;
    b = b->parent;
    *hops += 2;
  }
  return a;
}

/* Two devices share a PCIe switch when their closest common ancestor is a
 * PCI-to-PCI bridge (a switch port or the root port above a switch), not a
 * host bridge or a CPU-side object. */
static int behind_same_switch(hwloc_obj_t ancestor) {
  return ancestor->type == HWLOC_OBJ_BRIDGE && ancestor->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI;
}

static int is_nvidia_gpu(hwloc_obj_t pci) {
  const struct hwloc_pcidev_attr_s *p = &pci->attr->pcidev;
  return p->vendor_id == NVIDIA_VENDOR && (p->class_id == PCI_CLASS_3D || p->class_id == PCI_CLASS_VGA);
}

/* CUDA and NVML OS devices mark GPUs whose PCI class is something else. */
static hwloc_obj_t gpu_of_osdev(hwloc_obj_t osdev) {
  const char *name = osdev->name ? osdev->name : "";
  int cuda = osdev->attr->osdev.type == HWLOC_OBJ_OSDEV_COPROC && !strncmp(name, "cuda", 4);
  int nvml = osdev->attr->osdev.type == HWLOC_OBJ_OSDEV_GPU && !strncmp(name, "nvml", 4);
  if (!cuda && !nvml) return NULL;
  hwloc_obj_t p = osdev->parent;
  while (p && p->type != HWLOC_OBJ_PCI_DEVICE) p = p->parent;
  return p;
}

static void add_gpu(struct placement *pl, hwloc_obj_t obj) {
  for (int i = 0; i < pl->ngpus; i++)
    if (pl->gpus[i].obj == obj) return;
  if (pl->ngpus == SRD_MAX_GPUS) {
    SRD_WARN("more than %d GPUs; grouping NICs for the first %d", SRD_MAX_GPUS, SRD_MAX_GPUS);
    return;
  }
  pl->gpus[pl->ngpus++].obj = obj;
}

static uint64_t busid_key(hwloc_obj_t obj) {
  const struct hwloc_pcidev_attr_s *p = &obj->attr->pcidev;
  return ((uint64_t)p->domain << 24) | ((uint64_t)p->bus << 16) | ((uint64_t)p->dev << 8) | p->func;
}

static int cmp_gpu(const void *a, const void *b) {
  uint64_t ka = busid_key(((const struct gpu *)a)->obj), kb = busid_key(((const struct gpu *)b)->obj);
  return ka < kb ? -1 : ka > kb;
}

/* GPUs in PCI bus order, which is CUDA's order under CUDA_DEVICE_ORDER=PCI_BUS_ID
 * and NCCL's. */
static void find_gpus(struct placement *pl) {
  for (hwloc_obj_t o = NULL; (o = hwloc_get_next_pcidev(pl->topo, o));)
    if (is_nvidia_gpu(o)) add_gpu(pl, o);
  for (hwloc_obj_t o = NULL; (o = hwloc_get_next_osdev(pl->topo, o));) {
    hwloc_obj_t g = gpu_of_osdev(o);
    if (g) add_gpu(pl, g);
  }
  qsort(pl->gpus, pl->ngpus, sizeof(pl->gpus[0]), cmp_gpu);
  for (int i = 0; i < pl->ngpus; i++) {
    const struct hwloc_pcidev_attr_s *p = &pl->gpus[i].obj->attr->pcidev;
    pl->gpus[i].numa = numa_of(pl->topo, pl->gpus[i].obj);
    SRD_INFO(NCCL_INIT | NCCL_NET, "topology: GPU %d at PCI %04x:%02x:%02x.%x [%04x:%04x], NUMA node %d", i,
             p->domain, p->bus, p->dev, p->func, p->vendor_id, p->device_id, pl->gpus[i].numa);
  }
}

static int place_nics(struct placement *pl, const struct srd_nic_list *nics) {
  int placed = 0;
  for (int i = 0; i < pl->nnics; i++) {
    const struct srd_nic *nic = &nics->nics[i];
    pl->nic_obj[i] = NULL;
    pl->nic_numa[i] = nic->numa;
    if (!nic->pci_bus_id[0]) {
      SRD_INFO(NCCL_INIT | NCCL_NET, "topology: NIC %d (%s) has no PCI address", i, nic->name);
      continue;
    }
    hwloc_obj_t obj = hwloc_get_pcidev_by_busidstring(pl->topo, nic->pci_bus_id);
    if (!obj) {
      SRD_INFO(NCCL_INIT | NCCL_NET, "topology: NIC %d (%s) at PCI %s is not in the topology", i, nic->name,
               nic->pci_bus_id);
      continue;
    }
    pl->nic_obj[i] = obj;
    int numa = numa_of(pl->topo, obj);
    if (numa >= 0) pl->nic_numa[i] = numa;
    placed++;
    SRD_INFO(NCCL_INIT | NCCL_NET, "topology: NIC %d (%s) at PCI %s, NUMA node %d", i, nic->name, nic->pci_bus_id,
             pl->nic_numa[i]);
  }
  return placed;
}

/* Each GPU's candidate NICs: the nearest ones behind its switch, else those of
 * its NUMA node that no GPU has behind its own switch (all of the node's when
 * every one is taken), else every placed NIC. */
static void choose_candidates(struct placement *pl) {
  uint64_t all = 0, claimed = 0;
  for (int i = 0; i < pl->nnics; i++)
    if (pl->nic_obj[i]) all |= 1ull << i;
  for (int g = 0; g < pl->ngpus; g++) {
    struct gpu *gpu = &pl->gpus[g];
    int best = -1;
    gpu->switch_local = 0;
    for (int i = 0; i < pl->nnics; i++) {
      if (!pl->nic_obj[i]) continue;
      int hops;
      if (!behind_same_switch(common_ancestor(gpu->obj, pl->nic_obj[i], &hops))) continue;
      if (best < 0 || hops < best) best = hops, gpu->switch_local = 0;
      if (hops == best) gpu->switch_local |= 1ull << i;
    }
    claimed |= gpu->switch_local;
  }
  for (int g = 0; g < pl->ngpus; g++) {
    struct gpu *gpu = &pl->gpus[g];
    uint64_t numa_local = 0;
    for (int i = 0; i < pl->nnics; i++)
      if ((all >> i & 1) && gpu->numa >= 0 && pl->nic_numa[i] == gpu->numa) numa_local |= 1ull << i;
    if (gpu->switch_local) {
      gpu->tier = SRD_LOCALITY_SWITCH, gpu->candidates = gpu->switch_local;
    } else if (numa_local) {
      gpu->tier = SRD_LOCALITY_NUMA;
      gpu->candidates = (numa_local & ~claimed) ? (numa_local & ~claimed) : numa_local;
    } else {
      gpu->tier = SRD_LOCALITY_MACHINE, gpu->candidates = all;
    }
  }
}

static int popcount64(uint64_t m) { return __builtin_popcountll(m); }

/* The k-th set bit of m (0-based). */
static int nth_bit(uint64_t m, int k) {
  for (int i = 0; i < 64; i++)
    if ((m >> i & 1) && k-- == 0) return i;
  return -1;
}

/* GPU g's share of its candidates: with k GPUs on the same set of m NICs,
 * the j-th takes a contiguous m/k slice, or one NIC (j*m/k) when m < k. */
static uint64_t share_of(const struct placement *pl, int g) {
  const struct gpu *gpu = &pl->gpus[g];
  int k = 0, j = 0;
  for (int o = 0; o < pl->ngpus; o++) {
    if (pl->gpus[o].tier != gpu->tier || pl->gpus[o].candidates != gpu->candidates) continue;
    if (o < g) j++;
    k++;
  }
  int m = popcount64(gpu->candidates);
  if (m < k) return 1ull << nth_bit(gpu->candidates, j * m / k);
  uint64_t share = 0;
  for (int b = j * m / k; b < (j + 1) * m / k; b++) share |= 1ull << nth_bit(gpu->candidates, b);
  return share;
}

static void add_rail(struct srd_device_group *grp, const struct srd_nic_list *nics, int i) {
  grp->nics[grp->nnics++] = i;
  grp->speed_mbps += nics->nics[i].speed_mbps;
}

static void log_group(const struct srd_device_group *grp, const struct srd_nic_list *nics, int index,
                      const char *why) {
  char names[512] = "";
  size_t len = 0;
  for (int r = 0; r < grp->nnics && len < sizeof(names); r++)
    len += snprintf(names + len, sizeof(names) - len, "%s%s", r ? "," : "", nics->nics[grp->nics[r]].name);
  SRD_INFO(NCCL_INIT | NCCL_NET, "topology: device %d (GPU %d): %d rail(s) [%s], %d Mb/s, NUMA node %d, %s; %s",
           index, grp->gpu, grp->nnics, names, grp->speed_mbps, grp->numa, grp->pci_path[0] ? grp->pci_path : "no PCI path",
           why);
}

static void finish_group(struct srd_device_group *grp, const struct srd_nic_list *nics, const int *nic_numa) {
  if (!grp->nnics) return;
  int first = grp->nics[0];
  grp->numa = nic_numa ? nic_numa[first] : nics->nics[first].numa;
  snprintf(grp->pci_path, sizeof(grp->pci_path), "%s", nics->nics[first].pci_path);
}

static void group_all(const struct srd_nic_list *nics, int nnics, const int *nic_numa, int max_rails,
                      struct srd_topo *out, const char *why) {
  struct srd_device_group *grp = &out->groups[0];
  memset(grp, 0, sizeof(*grp));
  grp->gpu = -1;
  grp->locality = SRD_LOCALITY_NO_GPU;
  for (int i = 0; i < nnics && (!max_rails || grp->nnics < max_rails); i++) add_rail(grp, nics, i);
  finish_group(grp, nics, nic_numa);
  out->ngroups = 1;
  log_group(grp, nics, 0, why);
}

void srd_topo_group_all(const struct srd_nic_list *nics, int max_rails, struct srd_topo *out, const char *why) {
  group_all(nics, nics->n < SRD_MAX_NICS ? nics->n : SRD_MAX_NICS, NULL, max_rails, out, why);
}

static void group_by_gpu(const struct placement *pl, const struct srd_nic_list *nics, int max_rails,
                         struct srd_topo *out) {
  for (int g = 0; g < pl->ngpus; g++) {
    struct srd_device_group *grp = &out->groups[g];
    uint64_t share = share_of(pl, g);
    int nshare = popcount64(share);
    grp->gpu = g;
    grp->locality = pl->gpus[g].tier;
    /* Closest first (fewest PCI hops), ties in list order. */
    int hops[SRD_MAX_NICS];
    for (int i = 0; i < pl->nnics; i++)
      if (share >> i & 1) common_ancestor(pl->gpus[g].obj, pl->nic_obj[i], &hops[i]);
    while (share && (!max_rails || grp->nnics < max_rails)) {
      int pick = -1;
      for (int i = 0; i < pl->nnics; i++)
        if ((share >> i & 1) && (pick < 0 || hops[i] < hops[pick])) pick = i;
      share &= ~(1ull << pick);
      add_rail(grp, nics, pick);
    }
    finish_group(grp, nics, pl->nic_numa);
    char why[160];
    snprintf(why, sizeof(why), "%s, %d of %d candidate NIC(s)%s", srd_locality_name(pl->gpus[g].tier), nshare,
             popcount64(pl->gpus[g].candidates), grp->nnics < nshare ? ", capped by max rails" : "");
    log_group(grp, nics, g, why);
  }
  out->ngroups = pl->ngpus;
}

int srd_topo_group(const struct srd_nic_list *nics, const char *xml_path, int max_rails, struct srd_topo *out) {
  memset(out, 0, sizeof(*out));
  if (!nics || nics->n <= 0 || !nics->nics) {
    SRD_WARN("topology: no NIC to group");
    return -1;
  }
  if (max_rails < 0) max_rails = 0;
  /* A copy: the parameter cache may be reloaded by another thread (tools). */
  char topo_file[PATH_MAX];
  if (!xml_path && srd_param_str(SRD_PARAM_TOPO_FILE)) {
    snprintf(topo_file, sizeof(topo_file), "%s", srd_param_str(SRD_PARAM_TOPO_FILE));
    xml_path = topo_file;
  }

  struct placement *pl = calloc(1, sizeof(*pl));
  if (!pl) {
    SRD_WARN("topology: out of memory");
    return -1;
  }
  if (xml_path ? load_topology(&pl->topo, xml_path) : live_topology(&pl->topo)) {
    free(pl);
    return -1;
  }
  SRD_INFO(NCCL_INIT | NCCL_NET, "topology: grouping %d NIC(s) with %s", nics->n,
           xml_path ? xml_path : "the live machine");
  pl->nnics = nics->n;
  if (pl->nnics > SRD_MAX_NICS) {
    SRD_WARN("topology: more than %d NICs; grouping the first %d", SRD_MAX_NICS, SRD_MAX_NICS);
    pl->nnics = SRD_MAX_NICS;
  }
  find_gpus(pl);
  int placed = place_nics(pl, nics);
  out->ngpus = pl->ngpus;

  if (pl->ngpus == 0) {
    group_all(nics, pl->nnics, pl->nic_numa, max_rails, out, "no GPU found: one device holds every rail");
  } else if (placed == 0) {
    group_all(nics, pl->nnics, pl->nic_numa, max_rails, out, "no NIC placed on PCI: one device holds every rail");
  } else {
    choose_candidates(pl);
    group_by_gpu(pl, nics, max_rails, out);
  }
  if (xml_path) hwloc_topology_destroy(pl->topo);
  free(pl);
  return 0;
}

void srd_topo_group_or_all(const struct srd_nic_list *nics, int max_rails, struct srd_topo *out) {
  if (!srd_topo_group(nics, NULL, max_rails, out) && out->ngroups > 0) return;
  SRD_WARN("NIC grouping failed; one device holds every NIC");
  srd_topo_group_all(nics, max_rails, out, "grouping failed: one device holds every NIC");
}
