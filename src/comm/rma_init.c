/* One-sided RMA's init and finalize (include/srd/net.h): whether NCCL gets
 * the table, and with which windows. NCCL has no host fallback once init
 * succeeds (a refused window fails the user's registration), so init refuses
 * unless every window NCCL will register can work. */
#include <stdlib.h>

#include "srd/comm.h"
#include "srd/log.h"
#include "srd/net.h"
#include "srd/param.h"

/* Set by a successful init; every init of the process gives the same
 * answer (the variables and devices do not change). */
static bool gpu_windows;

bool srd_rma_net_gpu_windows(void) { return gpu_windows; }

ncclResult_t srd_rma_net_init(void **ctx, ncclDebugLogger_t logger) {
  if (!ctx) return ncclInvalidArgument;
  *ctx = NULL;
  if (logger) srd_log_set_logger(logger);
  const char *why;
  int mode = srd_param_rma_offered(&why);
  if (mode == SRD_RMA_OFF) {
    SRD_INFO(NCCL_INIT | NCCL_NET, "RMA: not offered: %s", why);
    return ncclInternalError;
  }
  ncclResult_t rc = srd_net_init(logger);
  if (rc != ncclSuccess) return rc;
  int ndev = 0;
  srd_net_devices(&ndev);
  char gpu_why[600];
  if (ndev < 1) {
    SRD_INFO(NCCL_INIT | NCCL_NET, "RMA: not offered: no device");
    rc = ncclSystemError;
  } else if (mode == SRD_RMA_GPU && srd_net_rma_gpu_check(gpu_why, sizeof(gpu_why))) {
    /* Asked for explicitly: say so at WARN, not only at INFO. */
    SRD_WARN("RMA: not offered: NCCL_SRD_RMA=gpu, but GPU windows cannot work: %s", gpu_why);
    rc = ncclInternalError;
  } else if (!(*ctx = calloc(1, sizeof(uint64_t)))) {
    rc = ncclSystemError;
  }
  if (rc != ncclSuccess) {
    srd_net_fini();
    return rc;
  }
  *(uint64_t *)*ctx = SRD_RMA_CTX_MAGIC;
  gpu_windows = mode == SRD_RMA_GPU;
  SRD_INFO(NCCL_INIT | NCCL_NET, "RMA: offered on %d device(s), %s", ndev,
           gpu_windows ? "host and GPU windows (signals into GPU memory on a plugin stream; NCCL_SRD_RMA=gpu)"
                       : "host windows only");
  return ncclSuccess;
}

ncclResult_t srd_rma_net_finalize(void *ctx) {
  if (!ctx || *(uint64_t *)ctx != SRD_RMA_CTX_MAGIC) return ncclInvalidArgument;
  *(uint64_t *)ctx = 0;
  free(ctx);
  srd_net_fini();
  return ncclSuccess;
}
