/* GPU memory (GPUDirect RDMA): whether a device offers NCCL GPU pointers, and
 * whether its received GPU data needs a flush. Decided once per device from
 * what the provider, libfabric and the CUDA driver can do, and from
 * NCCL_SRD_GDR=auto|0|1. srd_gdr_decide is pure (every input in one struct,
 * tested with every combination); srd_gdr_gather asks libfabric and the
 * driver for those inputs. */
#ifndef SRD_GDR_H
#define SRD_GDR_H

#include <stdbool.h>
#include <stddef.h>

#include "srd/topo.h"

struct fi_info;
struct fid_ep;
struct srd_cuda;

enum srd_gdr_mode {
  SRD_GDR_AUTO = -1, /* offer GPU pointers when possible */
  SRD_GDR_OFF = 0,   /* host memory only */
  SRD_GDR_ON = 1,    /* GPU pointers or fail at init */
};

/* NCCL_SRD_GDR: unset, "auto", "0" or "1"; anything else is reported and
 * taken as auto. */
int srd_gdr_mode(void);

/* What the decision depends on. Flags are 1 yes, 0 no, -1 not checked; each
 * "no" has its why beside it. */
struct srd_gdr_inputs {
  int mode;                /* enum srd_gdr_mode */
  char provider[64];       /* libfabric provider name, "tcp;ofi_rxm" style */
  int fi_hmem;             /* the provider offers FI_HMEM on every rail of the device */
  int fi_cuda;             /* libfabric can handle CUDA memory */
  char fi_cuda_why[200];
  int fi_dmabuf;           /* the provider takes FI_MR_DMABUF registrations */
  char fi_dmabuf_why[160];
  int cuda;                /* the CUDA driver is usable here */
  char cuda_why[200];
  int cuda_dmabuf;         /* every CUDA device exports dma-bufs */
  int cuda_ordered;        /* every CUDA device sees GPUDirect RDMA writes in order */
  int fi_no_cuda_calls;    /* the provider promises no CUDA calls of its own (FI_OPT_CUDA_API_PERMITTED) */
  char fi_no_cuda_calls_why[200];
};

struct srd_gdr_decision {
  bool gpu;                /* offer NCCL_PTR_CUDA */
  bool dmabuf;             /* offer NCCL_PTR_DMABUF too */
  bool flush;              /* iflush must make received GPU data visible (forceFlush) */
  bool nic_writes;         /* GPU data lands without the provider's CUDA calls (a NIC writes it: efa) */
  bool fail;               /* NCCL_SRD_GDR=1 and GPU pointers are impossible */
  char why[400];           /* why GPU pointers are (not) offered */
  char dmabuf_why[200];
  char flush_why[200];
};

/* Pure: the decision and its reasons from the inputs. */
void srd_gdr_decide(const struct srd_gdr_inputs *in, struct srd_gdr_decision *out);

/* Whether the provider itself copies received data into GPU memory with a
 * synchronous CUDA copy (shm, tcp: data is visible when the completion is
 * reported) rather than a NIC writing it over PCIe (efa). */
bool srd_gdr_provider_copies(const char *provider);

/* Ask ep's provider to make no CUDA calls of its own (FI_OPT_CUDA_API_PERMITTED
 * false, before fi_enable): 1 promised, 0 refused (why filled), -1 when
 * these libfabric headers cannot ask. A provider that copies GPU memory with a
 * synchronous cudaMemcpy in NCCL's proxy thread waits there for every
 * operation queued on the legacy default stream, and PyTorch queues work
 * there that waits for NCCL's kernel, which waits for the proxy: a hang. */
int srd_gdr_forbid_cuda_calls(struct fid_ep *ep, char *why, size_t whylen);

/* FI_HMEM version of a rail's fi_info (caps FI_HMEM, mr_mode FI_MR_HMEM) for
 * the same domain, or NULL when the provider does not offer it there. The
 * caller frees it with fi_freeinfo. Rails must be opened with it for GPU
 * registrations to be accepted. */
struct fi_info *srd_gdr_hmem_info(const struct fi_info *info);

/* Fill *in for device group grp of nics: the provider probes, the libfabric
 * build, and (unless mode is SRD_GDR_OFF) the CUDA driver. */
void srd_gdr_gather(const struct srd_nic_list *nics, const struct srd_device_group *grp, int mode,
                    struct srd_gdr_inputs *in);

/* Gather, decide and log the decision and its reasons at INFO for device
 * index; with NCCL_SRD_GDR=1 and GPU pointers impossible, warn and return
 * -1 (init must fail). */
int srd_gdr_device(const struct srd_nic_list *nics, const struct srd_device_group *grp, int index,
                   struct srd_gdr_decision *out);

/* One-sided RMA (NCCL_SRD_RMA=gpu): can a device whose rails are provider's,
 * with GPU decision gdr, take GPU windows? 0, or -1 with why. Where a NIC
 * writes GPU memory (gdr->nic_writes: efa) the NIC writes signal words too
 * (a loopback write), after the driver's flush where gdr->flush says so:
 * the driver must have cuFlushGPUDirectRDMAWrites then. On shm (copies by
 * the provider's CUDA calls) a CUDA stream writes them: every CUDA device
 * must write 64-bit stream memory and CUDA_DEVICE_MAX_CONNECTIONS be at
 * least SRD_RMA_SHM_CUDA_QUEUES (shm's copies would queue behind signal
 * waits). Both need the device to offer GPU memory; other providers have no
 * FI_HMEM. */
#define SRD_RMA_SHM_CUDA_QUEUES 32
int srd_gdr_rma_windows(const char *provider, const struct srd_gdr_decision *gdr, const struct srd_cuda *cu,
                        char *why, size_t len);

#endif
