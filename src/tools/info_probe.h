/* What srd-info reports, gathered once and rendered as text or JSON: the
 * libfabric in use, the provider and NICs our plugin would choose, their
 * grouping around GPUs, what the provider can do, and what will break. */
#ifndef SRD_TOOLS_INFO_PROBE_H
#define SRD_TOOLS_INFO_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include "srd/gdr.h"
#include "srd/topo.h"

#define INFO_MAX_PROVIDERS 32
#define INFO_MAX_WARNINGS 16

struct info_provider {
  char name[64];
  int rdm; /* offers FI_EP_RDM endpoints */
};

/* -1: not known (not probed, or not applicable). */
struct info_caps {
  int rma;
  size_t cq_data_size;
  int hmem;            /* FI_HMEM offered by the provider */
  int dmabuf_built;    /* libfabric headers had FI_MR_DMABUF at build time */
  int write_order_128; /* efa: 128-byte aligned writes land in order (every NIC) */
  int write_order_128_built;
  int device_writes;   /* efa: the device writes, the provider does not emulate (every NIC) */
  int ll, ll128;       /* NCCL's LL / LL128 may cross the network (srd_ll_rule_for) */
  const char *ll_why;
  size_t max_msg_size;
  size_t inject_size;
  uint64_t mr_mode;
  int data_progress_auto;
};

struct info_report {
  uint32_t fi_runtime; /* fi_version() */
  uint32_t fi_built;   /* FI_VERSION this was compiled against */
  uint32_t fi_api;     /* the API version asked for (srd_fi_api_version), 0: runtime too old */
  int nproviders;
  struct info_provider providers[INFO_MAX_PROVIDERS];
  int discovered; /* srd_topo_discover succeeded */
  struct srd_nic_list nics;
  char transport[SRD_TRANSPORT_MAX]; /* srd_transport_name of the chosen NICs */
  int grouped;
  struct srd_topo topo;
  struct info_caps caps;
  int gpu_peer_mem; /* efa_nv_peermem, nvidia_peermem or nv_peer_mem loaded */
  int init_fails;   /* the plugin's init would fail (NCCL_SRD_GDR=1 without GPU memory) */
  struct srd_gdr_decision gdr[SRD_MAX_GPUS]; /* per device (topo.groups), when grouped */
  int nwarnings;
  char warnings[INFO_MAX_WARNINGS][512];
};

/* Fills *r; never fails as a whole: what cannot be found is reported. */
void info_gather(struct info_report *r);
void info_release(struct info_report *r);
/* The plugin would start: the provider chose one and listed at least one
 * NIC, and init would not fail. */
int info_usable(const struct info_report *r);
/* The libfabric in use is older than the oldest supported. */
int info_fi_too_old(const struct info_report *r);

#endif
