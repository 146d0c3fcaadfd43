/* What only an efa endpoint can be asked: its promise that 128-byte aligned
 * writes land in order (what LL128 needs across nodes; asked by the rail for
 * every efa endpoint it opens and by srd-info's probe), and whether its
 * device writes (or the provider emulates writes with sends). */
#include "config.h"

#include <stdbool.h>

#include <rdma/fabric.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_ext.h>
#include <string.h>

#include "srd/topo.h"

int srd_efa_write_order_128(struct fid_ep *ep) {
#if HAVE_DECL_FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES
  bool on = true;
  return fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES, &on, sizeof(on)) == 0;
#else
  (void)ep;
  return -1;
#endif
}

int srd_efa_device_writes(struct fid_ep *ep) {
#if HAVE_DECL_FI_OPT_EFA_EMULATED_WRITE
  bool emulated = true;
  size_t len = sizeof(emulated);
  if (fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_EFA_EMULATED_WRITE, &emulated, &len)) return -1;
  return !emulated;
#else
  (void)ep;
  return -1;
#endif
}

void srd_efa_probe(const struct fi_info *info, int *ordered_128, int *device_writes) {
  struct fid_fabric *fabric = NULL;
  struct fid_domain *domain = NULL;
  struct fid_ep *ep = NULL;
  *ordered_128 = *device_writes = -1;
  if (!fi_fabric(info->fabric_attr, &fabric, NULL) && !fi_domain(fabric, (struct fi_info *)info, &domain, NULL) &&
      !fi_endpoint(domain, (struct fi_info *)info, &ep, NULL)) {
    *ordered_128 = srd_efa_write_order_128(ep);
    *device_writes = srd_efa_device_writes(ep);
  }
  if (ep) fi_close(&ep->fid);
  if (domain) fi_close(&domain->fid);
  if (fabric) fi_close(&fabric->fid);
}

/* LL writes a flag beside every 8 bytes of data into a host buffer the GPU
 * polls, LL128 one flag per 128-byte line into GPU memory: both take a line
 * whose flag is there for a line whose data is. efa promises nothing of the
 * order or the number of times it places a write's bytes (SRD is unordered;
 * p5en may place a payload twice: aws-ofi-nccl), except where an endpoint
 * accepted FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES (man fi_efa.7: each
 * aligned 128-byte block in order and once); that promise is the device's
 * (efa_base_ep_check_qp_in_order_aligned_128_bytes asks the QP), and writes the
 * provider emulates with sends never consult it. So on efa both protocols need
 * the option granted and device writes. Other providers: LL as NCCL decides
 * (tcp and shm copy with whole-word stores, never twice), LL128 never. */
void srd_ll_rule_for(const char *provider, int ordered_128, int device_writes, struct srd_ll_rule *out) {
  if (!provider || strncmp(provider, "efa", 3)) {
    out->ll = 1;
    out->ll128 = 0;
    out->why = "only efa promises 128-byte ordered writes; LL's 8-byte lines are copied whole";
  } else if (ordered_128 != 1) {
    out->ll = out->ll128 = 0;
    out->why = ordered_128 < 0 ? "efa: FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES not asked (libfabric headers "
                                 "without it, or no endpoint)"
                               : "efa refused FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES (p5en does)";
  } else if (device_writes != 1) {
    out->ll = out->ll128 = 0;
    out->why = "efa emulates writes (FI_OPT_EFA_EMULATED_WRITE): the 128-byte promise covers device writes only";
  } else {
    out->ll = out->ll128 = 1;
    out->why = "efa granted 128-byte ordered device writes";
  }
}

/* A rail cut under a write rejoins only where new keys stop the rest of that
 * write. efa does not promise it: fi_efa.7 says nothing of checking a key per
 * packet; FI_OPT_EFA_EMULATED_WRITE reads only the local device
 * (efa_rdm_ep_getopt: !efa_rdm_ep_support_rdma_write) while writes to a peer
 * are emulated with sends wherever efa_rdm_rma_should_write_using_rdma says so
 * (the peer without device writes, unsolicited write receive on one side
 * only), and an emulated write's key is checked once, at its header
 * (efa_rdm_pke_rtw.c: efa_rdm_rma_verified_copy_iov), its data packets copied
 * after. So: only device writes, and only where the user vouches for every
 * peer and the NIC. */
int srd_efa_rekey_fences(int device_writes, int vouched) { return device_writes == 1 && vouched; }
