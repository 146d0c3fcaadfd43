/* What only an efa endpoint can be asked: its promise that 128-byte aligned
 * writes land in order (what LL128 needs across nodes; asked by the rail for
 * every efa endpoint it opens and by srd-info's probe), whether its device
 * writes (or the provider emulates writes with sends), and to leave its shm
 * path off; and what the efa process needs of its environment (fork, huge
 * pages), which we check and never set. */
#include "config.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <rdma/fabric.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_ext.h>
#include <string.h>

#include "srd/log.h"
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

int srd_efa_device_reads(struct fid_ep *ep) {
#if HAVE_DECL_FI_OPT_EFA_EMULATED_READ
  bool emulated = true;
  size_t len = sizeof(emulated);
  if (fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_EFA_EMULATED_READ, &emulated, &len)) return -1;
  return !emulated;
#else
  (void)ep;
  return -1;
#endif
}

int srd_efa_forbid_shm(struct fid_ep *ep) {
#if HAVE_DECL_FI_OPT_SHARED_MEMORY_PERMITTED
  /* efa would hand host-local peers to its shm provider (its own /dev/shm
   * regions, an AV of at most 256 peers, CUDA copies in our thread);
   * NCCL carries host-local traffic itself, so the device serves every peer
   * (efa_rdm_ep_set_shared_memory_permitted, libfabric 1.21+). */
  bool permitted = false;
  return fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_SHARED_MEMORY_PERMITTED, &permitted, sizeof(permitted)) == 0;
#else
  (void)ep;
  return -1;
#endif
}

int srd_efa_fork_advice(int fork_status, const char *fork_safe_env, const char *huge_page_env, char *why,
                        size_t whylen) {
  bool fork_safe = fork_safe_env && *fork_safe_env && strcmp(fork_safe_env, "0");
  bool huge_on = huge_page_env && (!strcmp(huge_page_env, "1") || !strcasecmp(huge_page_env, "on") ||
                                   !strcasecmp(huge_page_env, "true") || !strcasecmp(huge_page_env, "yes"));
  /* Linux 5.13+ with rdma-core 35+ needs nothing; ENABLED: someone already
   * turned rdma-core's fork support on (efa does for FI_EFA_FORK_SAFE). */
  if (fork_status == SRD_FORK_UNNEEDED || (fork_status == SRD_FORK_ENABLED && !huge_on)) return why[0] = 0, 0;
  if ((fork_safe || fork_status == SRD_FORK_ENABLED) && huge_on) {
    snprintf(why, whylen, "FI_EFA_FORK_SAFE (or RDMAV_FORK_SAFE) and FI_EFA_USE_HUGE_PAGE=%s are both set: efa aborts "
             "the process at start (efa_fork_support_request_initialize); unset FI_EFA_USE_HUGE_PAGE",
             huge_page_env);
    return 1;
  }
  if (fork_safe) return why[0] = 0, 0;
  snprintf(why, whylen, "rdma-core here is not fork-safe by itself (%s): efa aborts a process that forks after it "
           "registered memory (PyTorch data loaders do). Set FI_EFA_FORK_SAFE=1 (efa then uses no huge pages), or run "
           "Linux 5.13+ with rdma-core 35+", fork_status == SRD_FORK_UNKNOWN
           ? "rdma-core older than 35 has no ibv_is_fork_initialized" : "ibv_is_fork_initialized: fork support needed");
  return 1;
}

/* rdma-core answers whether fork needs its help (ibv_is_fork_initialized,
 * rdma-core 35+: IBV_FORK_UNNEEDED on Linux 5.13+); efa's provider already
 * loaded the library, so this only looks it up. */
static int fork_status(void) {
  void *ibv = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!ibv) return SRD_FORK_UNKNOWN;
  int (*is_fork_initialized)(void) = (int (*)(void))dlsym(ibv, "ibv_is_fork_initialized");
  int s = is_fork_initialized ? is_fork_initialized() : SRD_FORK_UNKNOWN;
  dlclose(ibv);
  return s;
}

/* A hugetlb limit on our cgroup (v2): efa's buffer pools take huge pages
 * whenever mmap grants them (ofi_bufpool_grow falls back only when it fails),
 * and past the limit a touch of one is a SIGBUS, not an error. */
static long long hugetlb_limit(void) {
  FILE *f = fopen("/sys/fs/cgroup/hugetlb.2MB.max", "r");
  if (!f) return -1;
  char line[64] = "";
  if (!fgets(line, sizeof(line), f)) line[0] = 0;
  fclose(f);
  return line[0] >= '0' && line[0] <= '9' ? atoll(line) : -1;
}

void srd_efa_check_process(void) {
  char why[400];
  const char *safe = getenv("FI_EFA_FORK_SAFE");
  if (!safe || !*safe) safe = getenv("RDMAV_FORK_SAFE");
  if (srd_efa_fork_advice(fork_status(), safe, getenv("FI_EFA_USE_HUGE_PAGE"), why, sizeof(why)))
    SRD_WARN("efa: %s", why);
  long long limit = hugetlb_limit();
  if (limit >= 0 && !getenv("FI_EFA_USE_HUGE_PAGE") && !(safe && *safe && strcmp(safe, "0")))
    SRD_WARN("efa: this container limits huge pages to %lld bytes (hugetlb.2MB.max) while efa's buffers take them "
             "where mmap grants them: past the limit the process dies of SIGBUS. Set FI_EFA_USE_HUGE_PAGE=0", limit);
}
