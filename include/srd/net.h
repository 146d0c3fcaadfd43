/* The plugin in one internal vocabulary. src/api/ maps every ncclNet version
 * onto these calls; nothing below src/api/ knows NCCL versions. Results are
 * ncclResult_t values. */
#ifndef SRD_NET_H
#define SRD_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl/types.h"

struct srd_props {
  const char *name;
  const char *pci_path; /* NULL when not PCI */
  uint64_t guid;
  int ptr_support;      /* NCCL_PTR_* */
  int speed_mbps;
  float latency_us;
  int max_comms;
  int max_recvs;
  size_t max_p2p_bytes;
  int rail_id;
  int force_flush;      /* received GPU data needs iflush (v9+ forceFlush) */
};

/* An internal result (enum srd_err) as NCCL's; SRD_AGAIN is success (the
 * comm or request stays NULL). */
ncclResult_t srd_to_nccl(int rc);
ncclResult_t srd_net_init(ncclDebugLogger_t logger);
/* Drop one reference taken by init; the last one releases every device. */
void srd_net_fini(void);
ncclResult_t srd_net_devices(int *ndev);
/* A NULL where `call` needs its `what`: warned, ncclInvalidArgument (NCCL
 * never passes one; a wrapper might). */
ncclResult_t srd_net_null_arg(const char *call, const char *what);
ncclResult_t srd_net_get_properties(int dev, struct srd_props *props);
ncclResult_t srd_net_listen(int dev, void *handle, void **listen_comm);
ncclResult_t srd_net_connect(int dev, void *handle, void **send_comm);
ncclResult_t srd_net_accept(void *listen_comm, void **recv_comm);
ncclResult_t srd_net_reg_mr(void *comm, void *data, size_t size, int type, int dmabuf_fd, uint64_t offset,
                            void **mhandle);
ncclResult_t srd_net_dereg_mr(void *comm, void *mhandle);
ncclResult_t srd_net_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle, void **request);
ncclResult_t srd_net_irecv(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags, void **mhandles,
                           void **request);
ncclResult_t srd_net_iflush(void *recv_comm, int n, void **data, const int *sizes, void **mhandles, void **request);
/* sizes: one per buffer of the request (may be NULL); every ncclNet version
 * reports int sizes here. */
ncclResult_t srd_net_test(void *request, int *done, int *sizes);
ncclResult_t srd_net_close_send(void *send_comm);
ncclResult_t srd_net_close_recv(void *recv_comm);
ncclResult_t srd_net_close_listen(void *listen_comm);

/* One-sided RMA (ncclRma, NCCL 2.30+; src/comm/rma_init.c, rma_net.c). init
 * fails, logged, where the path cannot work: NCCL_SRD_RMA off or auto, or
 * NCCL_SRD_RMA=gpu on a device that cannot take GPU windows
 * (srd_net_rma_gpu_check). srd_rma_net_gpu_windows: did init offer GPU
 * windows (NCCL_PTR_CUDA in the RMA properties, regMrSym takes them)? connect and regMrSym are collective:
 * every rank of the group calls them in the same order. Ops never answer
 * "later": what the provider cannot take yet waits inside. */
ncclResult_t srd_rma_net_init(void **ctx, ncclDebugLogger_t logger);
ncclResult_t srd_rma_net_finalize(void *ctx);
bool srd_rma_net_gpu_windows(void);
/* Every device can take GPU windows (srd_gdr_rma_windows): 0, or -1 with the
 * first device's why. After srd_net_init. */
int srd_net_rma_gpu_check(char *why, size_t len);
ncclResult_t srd_rma_net_listen(void *ctx, int dev, void *handle, void **listen_comm);
ncclResult_t srd_rma_net_connect(void *handles[], int nranks, int rank, void *listen_comm, void **coll);
ncclResult_t srd_rma_net_close(void *coll);
ncclResult_t srd_rma_net_create_context(void *coll, int ncontexts, void **rctx);
ncclResult_t srd_rma_net_destroy_context(void *rctx);
/* type: NCCL_PTR_HOST, or NCCL_PTR_CUDA where GPU windows are offered;
 * mr_flags: NCCL_NET_MR_FLAG_*. */
ncclResult_t srd_rma_net_reg(void *coll, void *data, size_t size, int type, uint64_t mr_flags, int dmabuf_fd,
                             uint64_t offset, void **mhandle);
ncclResult_t srd_rma_net_dereg(void *coll, void *mhandle);
/* signal_mh NULL: a put without signal; size 0 with a signal: a signal alone.
 * signal_op: NCCL_NET_SIGNAL_OP_*. */
ncclResult_t srd_rma_net_put(void *rctx, int context, uint64_t src_off, void *src_mh, size_t size, uint64_t dst_off,
                             void *dst_mh, uint32_t rank, uint64_t signal_off, void *signal_mh, uint64_t signal_value,
                             uint32_t signal_op, void **request);
ncclResult_t srd_rma_net_get(void *rctx, int context, uint64_t remote_off, void *remote_mh, size_t size,
                             uint64_t local_off, void *local_mh, uint32_t rank, void **request);
ncclResult_t srd_rma_net_flush(void *rctx, int context, void *mhandle, uint32_t rank, void **request);
ncclResult_t srd_rma_net_test(void *coll, void *request, int *done);
ncclResult_t srd_rma_net_progress(void *rctx);
ncclResult_t srd_rma_net_last_error(void *rctx, int *has_error);

#endif
