/* Which libfabric API version every fi_getinfo asks for, and which runtime
 * versions the efa provider is refused or warned on. */
#include "config.h"

#include <stdio.h>

#include <rdma/fabric.h>

#include "srd/topo.h"

uint32_t srd_fi_api_choose(uint32_t built, uint32_t runtime, uint32_t oldest) {
  if (FI_VERSION_LT(runtime, oldest)) return 0;
  /* Never newer than the runtime (fi_getinfo: -FI_ENOSYS, "Requested version
   * is newer than library"), never newer than our headers: libfabric reads
   * the structures we pass by the version we ask for (ofi_mr_update_attr
   * reads fi_mr_attr.page_size from 1.22 on), and ours are the headers'. */
  return FI_VERSION_LT(runtime, built) ? runtime : built;
}

uint32_t srd_fi_api_version(void) {
  return srd_fi_api_choose(SRD_FI_BUILT_VERSION, fi_version(), FI_VERSION(SRD_FI_MIN_MAJOR, SRD_FI_MIN_MINOR));
}

int srd_efa_version_check(uint32_t runtime, uint32_t api, char *why, size_t whylen) {
  if (FI_VERSION_LT(runtime, SRD_EFA_MIN_RUNTIME)) {
    snprintf(why, whylen,
             "libfabric %u.%u at run time is older than %u.%u, the oldest the efa path is written for (and "
             "aws-ofi-nccl's floor): install a current EFA installer",
             FI_MAJOR(runtime), FI_MINOR(runtime), FI_MAJOR(SRD_EFA_MIN_RUNTIME), FI_MINOR(SRD_EFA_MIN_RUNTIME));
    return -1;
  }
  if (FI_VERSION_LT(api, SRD_EFA_FULL_API)) {
    snprintf(why, whylen,
             "nccl-srd was built against libfabric %u.%u headers, so it asks for API %u.%u: efa then offers no GPU "
             "memory (FI_OPT_CUDA_API_PERMITTED, dma-buf) and enables RDMA only on some devices (fi_efa(7), "
             "FI_OPT_EFA_USE_DEVICE_RDMA); rebuild nccl-srd against the EFA installer's libfabric "
             "(PKG_CONFIG_PATH=/opt/amazon/efa/lib/pkgconfig)",
             FI_MAJOR(SRD_FI_BUILT_VERSION), FI_MINOR(SRD_FI_BUILT_VERSION), FI_MAJOR(api), FI_MINOR(api));
    return 0;
  }
  if (!FI_VERSION_GE(runtime, SRD_EFA_SETTLED_RUNTIME)) {
    snprintf(why, whylen,
             "libfabric %u.%u: crashes in efa's connection management were reported in the field with 1.22 (EFA "
             "installers 1.34 and 1.38); libfabric 2.0 or later (a newer EFA installer) is advised",
             FI_MAJOR(runtime), FI_MINOR(runtime));
    return 0;
  }
  why[0] = 0;
  return 1;
}
