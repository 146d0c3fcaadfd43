/* Topology: which NICs the chosen libfabric provider offers (each one a rail
 * candidate), and how they group into NCCL devices around GPUs. Used by the
 * net plugin, the tuner and srd-info alike. */
#ifndef SRD_TOPO_H
#define SRD_TOPO_H

#include <stddef.h>
#include <stdint.h>

/* Vocabulary: a NIC is one network interface the provider reports; a device
 * (what NCCL sees) is a group of NICs, one group per GPU. */
#define SRD_MAX_NICS 32 /* NICs the plugin uses, and so NICs of one device */
#define SRD_MAX_GPUS 32 /* GPUs NICs are grouped around: one device each */
/* The libfabric API version of the headers we were built against. */
#define SRD_FI_BUILT_VERSION FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION)

/* The API version every fi_getinfo asks for (src/topo/fi_api.c): the
 * headers' version bounded by the runtime's; 0 when the runtime is older than
 * oldest. srd_fi_api_version applies it to this build and fi_version(). */
uint32_t srd_fi_api_choose(uint32_t built, uint32_t runtime, uint32_t oldest);
uint32_t srd_fi_api_version(void);

/* efa and the libfabric versions: refused below SRD_EFA_MIN_RUNTIME; warned
 * when the API asked for predates SRD_EFA_FULL_API (no GPU memory, RDMA off on
 * some devices) or the runtime predates SRD_EFA_SETTLED_RUNTIME (field crash
 * reports). Returns -1 refuse, 0 usable with the warning in why, 1 fine. */
#define SRD_EFA_MIN_RUNTIME FI_VERSION(1, 22)
#define SRD_EFA_SETTLED_RUNTIME FI_VERSION(2, 0)
#define SRD_EFA_FULL_API FI_VERSION(1, 18)
int srd_efa_version_check(uint32_t runtime, uint32_t api, char *why, size_t whylen);

struct fi_info;

struct srd_nic {
  struct fi_info *info;  /* a duplicate owned by the list; one domain */
  char name[64];         /* domain name: EFA device or interface */
  char pci_bus_id[16];   /* "0000:3b:00.0", "" when not on PCI */
  char pci_path[256];    /* sysfs device path, "" when not on PCI */
  int numa;              /* -1 unknown */
  int speed_mbps;
  uint64_t guid;
};

struct srd_nic_list {
  char provider[64];     /* provider name as libfabric reports it */
  char reason[160];      /* why this provider was chosen */
  int n;
  struct srd_nic *nics;
};

/* Choose the provider (NCCL_SRD_PROVIDER, else FI_PROVIDER, else efa,
 * tcp;ofi_rxm, shm) and list its usable NICs after NCCL_SRD_IFNAME filtering.
 * Loopback is left out unless it is the only interface. Returns 0, or -1 with
 * a warning that names the missing capability or the empty selection. */
int srd_topo_discover(struct srd_nic_list *out);
void srd_topo_free(struct srd_nic_list *list);

/* NCCL_SRD_IFNAME syntax: comma-separated prefixes; a leading '^' excludes the
 * list; a leading '=' (after any '^') asks for exact names. NULL or "" matches
 * everything. */
int srd_ifname_match(const char *spec, const char *name);
/* The link state of kernel interface ifname as rail failover reads it: 1 down
 * (operstate neither up nor unknown, or no carrier), 0 up, -1 not a kernel
 * interface (efa, shm: they report failures through their CQs). */
int srd_nic_link_down(const char *ifname);

/* One NCCL device: the NICs PCIe-local to one GPU (or every NIC when there
 * is no GPU or no PCI NIC). */
/* How close a device's NICs are to its GPU (the tier the grouping used). */
enum srd_locality {
  SRD_LOCALITY_NO_GPU = -1,  /* a device of every rail, no GPU to serve */
  SRD_LOCALITY_SWITCH = 0,   /* behind the GPU's PCIe switch */
  SRD_LOCALITY_NUMA,         /* same NUMA node: traffic crosses the host bridge */
  SRD_LOCALITY_MACHINE,      /* anywhere: traffic also crosses the CPU interconnect */
};
const char *srd_locality_name(int locality);

struct srd_device_group {
  int nnics;
  int nics[SRD_MAX_NICS];   /* the group's NICs: indexes into srd_nic_list.nics, closest first */
  int gpu;                  /* index of the GPU it serves, -1 when none */
  int locality;             /* enum srd_locality */
  int numa;                 /* NUMA node of the first NIC, -1 unknown */
  char pci_path[256];       /* sysfs path of the closest NIC, "" when not PCI */
  int speed_mbps;           /* sum over the NICs */
};

struct srd_topo {
  int ngpus;
  int ngroups;
  struct srd_device_group groups[SRD_MAX_GPUS];
};

/* Group NICs around GPUs with hwloc: same PCIe switch first, then same NUMA
 * node, split evenly when GPUs share a switch; max_rails (0: no cap) limits
 * rails per group. xml_path NULL: NCCL_SRD_TOPO_FILE, else the live machine.
 * Returns 0, or -1 with a warning. */
int srd_topo_group(const struct srd_nic_list *nics, const char *xml_path, int max_rails, struct srd_topo *out);
/* One device of every NIC (up to max_rails, 0: no cap), without a topology:
 * what srd_topo_group falls back to, and its caller when it fails. */
void srd_topo_group_all(const struct srd_nic_list *nics, int max_rails, struct srd_topo *out, const char *why);
/* srd_topo_group on the live machine (or NCCL_SRD_TOPO_FILE), else, warned
 * about, srd_topo_group_all: what the plugin, srd-info and srd-perf run on. */
void srd_topo_group_or_all(const struct srd_nic_list *nics, int max_rails, struct srd_topo *out);

/* Ask an efa endpoint for 128-byte ordered writes (src/topo/efa.c): 1 granted,
 * 0 refused, -1 when built without the option. */
struct fid_ep;
int srd_efa_write_order_128(struct fid_ep *ep);
/* Does an efa endpoint's device write (1), or does the provider emulate
 * writes (0)? -1: it cannot say (or built without the option). */
int srd_efa_device_writes(struct fid_ep *ep);
/* Whether a rail cut under writes may rejoin under new keys (src/topo/efa.c):
 * device writes (srd_efa_device_writes) and the user's NCCL_SRD_FAILOVER_REKEY. */
int srd_efa_rekey_fences(int device_writes, int vouched);
/* Both, on a scratch endpoint of info (-1 each where it cannot be opened). */
void srd_efa_probe(const struct fi_info *info, int *ordered_128, int *device_writes);

/* Whether NCCL's LL and LL128 may cross the network over this provider, from
 * what its endpoints promised (src/topo/efa.c; DESIGN.md "efa: protocol
 * guarantees"). The tuner, the plugin and srd-info all decide by it. */
struct srd_ll_rule {
  int ll, ll128;
  const char *why;
};
void srd_ll_rule_for(const char *provider, int ordered_128, int device_writes, struct srd_ll_rule *out);

/* efa's RDM fabrics (man/fi_efa.7.md): "efa", the provider's protocol
 * (segmentation, emulated RMA where the device lacks it), and "efa-direct"
 * (libfabric 2.1+: the device alone, sends of one MTU). NCCL_SRD_EFA_FABRIC
 * chooses (default SRD_EFA_FABRIC_DEFAULT); other providers have one. */
#define SRD_EFA_FABRIC_DEFAULT "efa"
const char *srd_efa_fabric(void);
/* Whether info is of the chosen efa fabric (always, for other providers). */
int srd_fabric_fits(const struct fi_info *info, const char *efa_fabric);
/* Frees the entries of *infos that do not fit, keeping the order. */
void srd_fabric_keep(struct fi_info **infos, const char *efa_fabric);
/* Bytes an eager message carries besides its data. */
#define SRD_EAGER_HEADER 40
/* The eager size wanted for NCCL's mid-size steps, where the provider sends
 * it in one message (libfabric 2.x's tcp; ofi_rxm with buffers that large). */
#define SRD_EAGER_MID (32 * 1024)
/* The largest message sent eagerly on this provider when NCCL_SRD_EAGER_MAX
 * is unset: the plugin's choice, which srd-perf's raw half follows. */
size_t srd_eager_default(const struct fi_info *info);
/* ofi_rxm's eager buffer (FI_OFI_RXM_BUFFER_SIZE, else its 16 KiB default):
 * a message with its header above it goes by rxm's own rendezvous. */
size_t srd_rxm_buffer_size(void);
/* ofi_rxm whose eager buffers keep the default eager size below
 * SRD_EAGER_MID; FI_OFI_RXM_BUFFER_SIZE=SRD_RXM_BUFFER_ADVISED lifts it. */
#define SRD_RXM_BUFFER_ADVISED (SRD_EAGER_MID + SRD_EAGER_HEADER)
int srd_rxm_buffer_short(const struct fi_info *info);
/* Who can talk to whom: the efa fabric's name on efa, the provider's name
 * elsewhere. Carried in the listen handle; a connect across two fails. */
#define SRD_TRANSPORT_MAX 32
void srd_transport_name(const struct fi_info *info, char *out, size_t len);

/* Does an efa endpoint's device read (1), or not (0)? -1: cannot say. */
int srd_efa_device_reads(struct fid_ep *ep);
/* Ask an efa endpoint (before fi_enable) not to use its shm path: 1 done,
 * 0 refused, -1 built without the option. */
int srd_efa_forbid_shm(struct fid_ep *ep);
/* rdma-core's fork status as ibv_is_fork_initialized answers it, or unknown
 * (rdma-core before 35). */
enum { SRD_FORK_DISABLED = 0, SRD_FORK_ENABLED = 1, SRD_FORK_UNNEEDED = 2, SRD_FORK_UNKNOWN = -1 };
/* What an efa process must be told about fork and huge pages, given the fork
 * status and FI_EFA_FORK_SAFE (or RDMAV_FORK_SAFE) and FI_EFA_USE_HUGE_PAGE
 * (NULL: unset): 1 with the warning and its remedy in why, 0 nothing. */
int srd_efa_fork_advice(int fork_status, const char *fork_safe_env, const char *huge_page_env, char *why,
                        size_t whylen);
/* Warn (never set anything) about fork safety and huge pages for efa. */
void srd_efa_check_process(void);

/* Link speed assumed when neither libfabric nor sysfs reports one. */
#define SRD_DEFAULT_SPEED_MBPS 10000

/* Provider choice behind srd_topo_discover: *infos gets every RDM domain of
 * the chosen provider with the capabilities the data path needs. */
int srd_fabric_choose(struct fi_info **infos, char *provider, size_t provider_len, char *reason, size_t reason_len);

/* 1 when libfabric's FI_PROVIDER filter leaves provider out (why names it). */
int srd_fabric_filtered(const char *provider, char *why, size_t len);

#endif
