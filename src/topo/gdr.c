#define _GNU_SOURCE /* strcasestr */
#include "srd/gdr.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include "config.h"
#include "srd/cuda.h"
#include "srd/log.h"
#include "srd/param.h"

/* A value other than auto, 0 or 1 was rejected (and warned about) when the
 * variables were read: it reads as unset. */
int srd_gdr_mode(void) {
  const char *v = srd_param_str(SRD_PARAM_GDR);
  if (v && !strcmp(v, "0")) return SRD_GDR_OFF;
  if (v && !strcmp(v, "1")) return SRD_GDR_ON;
  return SRD_GDR_AUTO;
}

/* The provider's first component: "tcp" of "tcp;ofi_rxm". */
static bool provider_is(const char *provider, const char *name) {
  size_t n = strcspn(provider, ";");
  return strlen(name) == n && !strncmp(provider, name, n);
}

bool srd_gdr_provider_copies(const char *provider) {
  static const char *const copying[] = {"shm", "tcp", "sockets", "udp"};
  for (size_t i = 0; i < sizeof(copying) / sizeof(copying[0]); i++)
    if (provider_is(provider, copying[i])) return true;
  return false;
}

static void decide_dmabuf(const struct srd_gdr_inputs *in, struct srd_gdr_decision *out) {
  if (in->fi_dmabuf != 1) {
    snprintf(out->dmabuf_why, sizeof(out->dmabuf_why), "%s", in->fi_dmabuf_why);
  } else if (in->cuda_dmabuf != 1) {
    snprintf(out->dmabuf_why, sizeof(out->dmabuf_why), "the CUDA driver does not export dma-bufs on every device");
  } else {
    out->dmabuf = true;
    snprintf(out->dmabuf_why, sizeof(out->dmabuf_why), "%s takes dma-bufs and the CUDA driver exports them",
             in->provider);
  }
}

/* Who must do work in iflush. A provider that copies the data into GPU
 * memory itself (shm: CUDA IPC or cudaMemcpy; tcp: a CUDA copy from its
 * socket buffer) finishes that synchronous copy before it reports the write:
 * the data is visible to the GPU then. A NIC that writes GPU memory over
 * PCIe (efa) reports completion when the NIC is done, while its writes may
 * still be on their way to the GPU's memory: NCCL's kernel could read stale
 * bytes unless the writes are flushed, except where the driver promises the
 * owning GPU sees them in order (CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING). */
static void decide_flush(const struct srd_gdr_inputs *in, struct srd_gdr_decision *out) {
  if (srd_gdr_provider_copies(in->provider)) {
    snprintf(out->flush_why, sizeof(out->flush_why),
             "%s copies received data into GPU memory itself before it completes: visible without a flush",
             in->provider);
  } else if (in->cuda_ordered == 1) {
    snprintf(out->flush_why, sizeof(out->flush_why),
             "the CUDA driver orders GPUDirect RDMA writes for the owning GPU: no flush needed");
  } else {
    out->flush = true;
    snprintf(out->flush_why, sizeof(out->flush_why),
             "%s writes GPU memory from the NIC and the driver does not promise ordering: flush before NCCL reads",
             in->provider);
  }
}

void srd_gdr_decide(const struct srd_gdr_inputs *in, struct srd_gdr_decision *out) {
  memset(out, 0, sizeof(*out));
  if (in->mode == SRD_GDR_OFF)
    snprintf(out->why, sizeof(out->why), "NCCL_SRD_GDR=0: host memory only");
  else if (in->fi_hmem != 1)
    snprintf(out->why, sizeof(out->why), "provider %s does not offer FI_HMEM (GPU memory)", in->provider);
  else if (in->fi_cuda != 1)
    snprintf(out->why, sizeof(out->why), "provider %s offers FI_HMEM but libfabric cannot handle CUDA memory: %s",
             in->provider, in->fi_cuda_why);
  else if (in->cuda != 1)
    snprintf(out->why, sizeof(out->why), "%s", in->cuda_why);
  else if (in->fi_no_cuda_calls != 1 && in->mode != SRD_GDR_ON)
    snprintf(out->why, sizeof(out->why),
             "provider %s makes CUDA calls of its own in NCCL's proxy thread (%s): its synchronous copies can hang "
             "applications whose default stream waits on NCCL (PyTorch); NCCL_SRD_GDR=1 forces it",
             in->provider, in->fi_no_cuda_calls_why);
  else
    out->gpu = true;
  if (!out->gpu) {
    out->fail = in->mode == SRD_GDR_ON;
    snprintf(out->dmabuf_why, sizeof(out->dmabuf_why), "no GPU pointers");
    snprintf(out->flush_why, sizeof(out->flush_why), "host memory only: nothing to flush");
    return;
  }
  if (in->fi_no_cuda_calls == 1)
    snprintf(out->why, sizeof(out->why), "provider %s offers FI_HMEM with CUDA and makes no CUDA calls of its own; %s",
             in->provider, in->cuda_why);
  else
    snprintf(out->why, sizeof(out->why),
             "forced by NCCL_SRD_GDR=1: provider %s offers FI_HMEM with CUDA but makes CUDA calls of its own (%s), "
             "which can hang applications whose default stream waits on NCCL (PyTorch); %s",
             in->provider, in->fi_no_cuda_calls_why, in->cuda_why);
  decide_dmabuf(in, out);
  decide_flush(in, out);
  out->nic_writes = in->fi_no_cuda_calls == 1 && !srd_gdr_provider_copies(in->provider);
}

/* The hints ask for what the rail asked for, on the same fabric and domain,
 * plus FI_HMEM. Not a copy of info itself: providers describe their FI_HMEM
 * endpoints with other limits (shm: no inject), which a copy would demand. */
struct fi_info *srd_gdr_hmem_info(const struct fi_info *info) {
  struct fi_info *hints = fi_allocinfo(), *out = NULL;
  if (!hints) return NULL;
  hints->caps = info->caps | FI_HMEM;
  hints->mode = info->mode;
  hints->ep_attr->type = info->ep_attr->type;
  hints->domain_attr->mr_mode = info->domain_attr->mr_mode | FI_MR_HMEM;
  hints->domain_attr->threading = info->domain_attr->threading;
  hints->tx_attr->msg_order = info->tx_attr->msg_order;
  hints->rx_attr->msg_order = info->rx_attr->msg_order;
  hints->fabric_attr->prov_name = strdup(info->fabric_attr->prov_name);
  hints->fabric_attr->name = info->fabric_attr->name ? strdup(info->fabric_attr->name) : NULL;
  hints->domain_attr->name = info->domain_attr->name ? strdup(info->domain_attr->name) : NULL;
  int rc = fi_getinfo(srd_fi_api_version(), NULL, NULL, 0, hints, &out);
  fi_freeinfo(hints);
  if (rc) return NULL;
  if (!(out->caps & FI_HMEM)) {
    fi_freeinfo(out);
    return NULL;
  }
  return out;
}

/* libfabric's CUDA support: FI_HMEM, when set, lists the interfaces it
 * initialises; a build with CUDA defines FI_HMEM_CUDA_* parameters; one made
 * with --enable-cuda-dlopen also needs to load "libcudart.so" (unversioned)
 * at run time, or its CUDA interface stays off. */
static void probe_fabric_cuda(struct srd_gdr_inputs *in) {
  const char *filter = getenv("FI_HMEM");
  if (filter && *filter && !strcasestr(filter, "cuda")) {
    in->fi_cuda = 0;
    snprintf(in->fi_cuda_why, sizeof(in->fi_cuda_why), "FI_HMEM=%s leaves CUDA out of libfabric's GPU interfaces",
             filter);
    return;
  }
  struct fi_param *params = NULL;
  int n = 0, built = 0;
  if (fi_getparams(&params, &n) == 0) {
    for (int i = 0; i < n && !built; i++)
      built = params[i].name && strncasecmp(params[i].name, "FI_HMEM_CUDA", 12) == 0;
    fi_freeparams(params);
  }
  if (!built) {
    in->fi_cuda = 0;
    snprintf(in->fi_cuda_why, sizeof(in->fi_cuda_why), "libfabric %u.%u was built without CUDA support",
             FI_MAJOR(fi_version()), FI_MINOR(fi_version()));
    return;
  }
  void *cudart = dlopen("libcudart.so", RTLD_NOW | RTLD_LOCAL);
  if (!cudart) {
    in->fi_cuda = 0;
    snprintf(in->fi_cuda_why, sizeof(in->fi_cuda_why),
             "libfabric loads the CUDA runtime as libcudart.so, which the library path does not find (put the CUDA "
             "toolkit's lib64 on LD_LIBRARY_PATH)");
    return;
  }
  dlclose(cudart);
  in->fi_cuda = 1;
}

static void probe_fabric_dmabuf(struct srd_gdr_inputs *in) {
  in->fi_dmabuf = 0;
  if (!HAVE_DECL_FI_MR_DMABUF)
    snprintf(in->fi_dmabuf_why, sizeof(in->fi_dmabuf_why), "built against libfabric headers without FI_MR_DMABUF");
  /* The API version asked for, not the runtime's: below 1.20 libfabric
   * reads fi_mr_attr's dmabuf union as mr_iov (ofi_mr_update_attr). */
  else if (FI_VERSION_LT(srd_fi_api_version(), FI_VERSION(1, 20)))
    snprintf(in->fi_dmabuf_why, sizeof(in->fi_dmabuf_why), "libfabric API %u.%u (asked of libfabric %u.%u) predates "
             "FI_MR_DMABUF (1.20)", FI_MAJOR(srd_fi_api_version()), FI_MINOR(srd_fi_api_version()),
             FI_MAJOR(fi_version()), FI_MINOR(fi_version()));
  else if (srd_gdr_provider_copies(in->provider))
    snprintf(in->fi_dmabuf_why, sizeof(in->fi_dmabuf_why), "%s copies GPU memory with CUDA: a dma-buf gives it nothing",
             in->provider);
  else
    in->fi_dmabuf = 1;
}

static void probe_driver(struct srd_gdr_inputs *in) {
  const struct srd_cuda *cu = srd_cuda_get();
  in->cuda = cu->usable;
  snprintf(in->cuda_why, sizeof(in->cuda_why), "%s", cu->reason);
  if (!cu->usable) return;
  in->cuda_dmabuf = in->cuda_ordered = 1;
  for (int d = 0; d < cu->device_count; d++) {
    if (srd_cuda_dmabuf_supported(cu, d) != 1) in->cuda_dmabuf = 0;
    if (srd_cuda_rdma_writes_ordered(cu, d) != 1) in->cuda_ordered = 0;
  }
}

int srd_gdr_forbid_cuda_calls(struct fid_ep *ep, char *why, size_t whylen) {
#if HAVE_DECL_FI_OPT_CUDA_API_PERMITTED
  bool permitted = false;
  int rc = fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_CUDA_API_PERMITTED, &permitted, sizeof(permitted));
  if (rc == 0) return 1;
  snprintf(why, whylen, "it refused FI_OPT_CUDA_API_PERMITTED=false: %s", fi_strerror(-rc));
  return 0;
#else
  (void)ep;
  snprintf(why, whylen, "built against libfabric headers without FI_OPT_CUDA_API_PERMITTED: cannot ask it not to");
  return -1;
#endif
}

/* Whether the provider of info promises no CUDA calls: asked of a scratch
 * endpoint, since the answer decides whether rails open with FI_HMEM. */
static void probe_no_cuda_calls(const struct fi_info *info, struct srd_gdr_inputs *in) {
  struct fid_fabric *fabric = NULL;
  struct fid_domain *domain = NULL;
  struct fid_ep *ep = NULL;
  int rc = fi_fabric(info->fabric_attr, &fabric, NULL);
  if (!rc) rc = fi_domain(fabric, (struct fi_info *)info, &domain, NULL);
  if (!rc) rc = fi_endpoint(domain, (struct fi_info *)info, &ep, NULL);
  if (rc) {
    in->fi_no_cuda_calls = 0;
    snprintf(in->fi_no_cuda_calls_why, sizeof(in->fi_no_cuda_calls_why),
             "no endpoint to ask whether it makes CUDA calls: %s", fi_strerror(-rc));
  } else {
    in->fi_no_cuda_calls =
        srd_gdr_forbid_cuda_calls(ep, in->fi_no_cuda_calls_why, sizeof(in->fi_no_cuda_calls_why));
  }
  if (ep) fi_close(&ep->fid);
  if (domain) fi_close(&domain->fid);
  if (fabric) fi_close(&fabric->fid);
}

void srd_gdr_gather(const struct srd_nic_list *nics, const struct srd_device_group *grp, int mode,
                    struct srd_gdr_inputs *in) {
  memset(in, 0, sizeof(*in));
  in->mode = mode;
  snprintf(in->provider, sizeof(in->provider), "%s", nics->provider);
  in->fi_hmem = grp->nnics > 0;
  in->fi_no_cuda_calls = -1;
  for (int i = 0; i < grp->nnics && in->fi_hmem; i++) {
    struct fi_info *h = srd_gdr_hmem_info(nics->nics[grp->nics[i]].info);
    in->fi_hmem = h != NULL;
    if (h && i == 0 && mode != SRD_GDR_OFF) probe_no_cuda_calls(h, in);
    fi_freeinfo(h);
  }
  probe_fabric_cuda(in);
  probe_fabric_dmabuf(in);
  in->cuda = in->cuda_dmabuf = in->cuda_ordered = -1;
  if (mode == SRD_GDR_OFF) snprintf(in->cuda_why, sizeof(in->cuda_why), "not checked (NCCL_SRD_GDR=0)");
  else probe_driver(in);
}

int srd_gdr_device(const struct srd_nic_list *nics, const struct srd_device_group *grp, int index,
                   struct srd_gdr_decision *out) {
  struct srd_gdr_inputs in;
  srd_gdr_gather(nics, grp, srd_gdr_mode(), &in);
  srd_gdr_decide(&in, out);
  if (out->fail) {
    SRD_WARN("device %d: NCCL_SRD_GDR=1 but GPU memory cannot be offered: %s", index, out->why);
    return -1;
  }
  SRD_INFO(NCCL_INIT | NCCL_NET, "device %d: GPU pointers %s: %s", index, out->gpu ? "offered" : "not offered",
           out->why);
  /* On efa with GPUs this is a misbuilt or misconfigured install, not a
   * choice: every transfer would be staged through host memory. */
  if (!out->gpu && in.mode != SRD_GDR_OFF && in.cuda == 1 && provider_is(in.provider, "efa"))
    SRD_WARN("device %d: efa WITHOUT GPU memory (%s)%s", index, out->why,
             HAVE_DECL_FI_OPT_CUDA_API_PERMITTED ? ""
             : "; fix: rebuild nccl-srd against the EFA installer's libfabric "
               "(PKG_CONFIG_PATH=/opt/amazon/efa/lib/pkgconfig)");
  if (out->gpu) {
    SRD_INFO(NCCL_INIT | NCCL_NET, "device %d: dma-buf %s: %s", index, out->dmabuf ? "offered" : "not offered",
             out->dmabuf_why);
    SRD_INFO(NCCL_INIT | NCCL_NET, "device %d: flush %s: %s", index, out->flush ? "needed" : "not needed",
             out->flush_why);
  }
  return 0;
}

int srd_gdr_rma_windows(const char *provider, const struct srd_gdr_decision *gdr, const struct srd_cuda *cu,
                        char *why, size_t len) {
  bool shm = provider_is(provider, "shm");
  if (!shm && !gdr->nic_writes) {
    if (gdr->gpu)
      snprintf(why, len, "provider %s copies GPU data with CUDA calls of its own: GPU windows need efa or shm",
               provider);
    else
      snprintf(why, len, "%s: GPU windows need efa or shm", gdr->why);
    return -1;
  }
  if (!gdr->gpu) {
    snprintf(why, len, "the device offers no GPU memory: %s", gdr->why);
    return -1;
  }
  if (!cu->usable) {
    snprintf(why, len, "%s", cu->reason);
    return -1;
  }
  for (int d = 0; d < cu->device_count; d++)
    if (srd_cuda_stream_usable(cu, d, why, len)) return -1;
  if (!shm) {
    if (gdr->flush && !cu->ops.flush_gpudirect_rdma_writes) {
      snprintf(why, len, "%s writes GPU memory from the NIC, the driver does not order those writes and lacks "
               "cuFlushGPUDirectRDMAWrites: a signal could be seen before its data", provider);
      return -1;
    }
    return 0;
  }
  /* shm copies a put's GPU bytes with a synchronous cudaMemcpy on NCCL's
   * proxy thread. With CUDA's default 8 hardware queues that copy can queue
   * behind the stream that waits for the put's own signal: every NCCL 2.30.7
   * put-with-signal run on the device hung so; with 32, 2 runs in 10 did
   * (DESIGN.md "One-sided RMA"): fewer shared queues, not none. */
  const char *queues = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  char *end = NULL;
  long n = queues && *queues ? strtol(queues, &end, 10) : 0;
  if (!queues || !*queues || *end || n < SRD_RMA_SHM_CUDA_QUEUES) {
    snprintf(why, len,
             "shm copies GPU data with a synchronous cudaMemcpy that can queue behind the stream waiting for its "
             "signal and hang: set CUDA_DEVICE_MAX_CONNECTIONS=%d (it is %s)",
             SRD_RMA_SHM_CUDA_QUEUES, queues ? queues : "unset: CUDA's default 8");
    return -1;
  }
  return 0;
}
