/* ncclRmaPlugin_v14 (NCCL 2.30): one-sided RMA on the same devices as the
 * net tables. NCCL finds it in the net plugin library it loaded. */
#include <string.h>

#include "api.h"
#include "nccl/rma_v14.h"

static ncclResult_t init_v14(void **ctx, uint64_t comm_id, ncclDebugLogger_t logger) {
  (void)comm_id;
  return srd_rma_net_init(ctx, logger);
}

/* NCCL's GIN proxy drives the table (netDeviceType 2). */
static ncclResult_t props_v14(int dev, ncclNetProperties_v12_t *out) {
  struct srd_props p;
  ncclResult_t rc = srd_net_get_properties(dev, &p);
  if (rc != ncclSuccess) return rc;
  SRD_FILL_PROPS_V9(out, p);
  /* Never DMABUF: NCCL would register GPU windows by dma-buf, which shm
   * and tcp do not take (and a failed dma-buf registration is fatal). */
  out->ptrSupport = NCCL_PTR_HOST | (srd_rma_net_gpu_windows() ? NCCL_PTR_CUDA : 0);
  out->netDeviceType = NCCL_NET_DEVICE_GIN_PROXY;
  out->maxMultiRequestSize = 1;
  out->railId = (int16_t)p.rail_id;
  return rc;
}

static ncclResult_t connect_v14(void *ctx, void *handles[], int nranks, int rank, void *listen_comm, void **coll) {
  (void)ctx; /* NCCL 2.30.7 passes its net context, not ours */
  return srd_rma_net_connect(handles, nranks, rank, listen_comm, coll);
}

static ncclResult_t create_context_v14(void *coll, ncclRmaConfig_v14_t *config, void **rctx) {
  return srd_rma_net_create_context(coll, config ? config->nContexts : 0, rctx);
}

static ncclResult_t reg_v14(void *coll, void *data, size_t size, int type, uint64_t flags, void **mh) {
  return srd_rma_net_reg(coll, data, size, type, flags, -1, 0, mh);
}

static ncclResult_t reg_dmabuf_v14(void *coll, void *data, size_t size, int type, uint64_t offset, int fd,
                                   uint64_t flags, void **mh) {
  return srd_rma_net_reg(coll, data, size, type, flags, fd, offset, mh);
}

static ncclResult_t iput_v14(void *rctx, int context, uint64_t src_off, void *src_mh, size_t size, uint64_t dst_off,
                             void *dst_mh, uint32_t rank, void **req) {
  return srd_rma_net_put(rctx, context, src_off, src_mh, size, dst_off, dst_mh, rank, 0, NULL, 0, 0, req);
}

/* Every signal is strong: a weak one costs the same here. */
static ncclResult_t iput_signal_v14(void *rctx, int context, uint64_t src_off, void *src_mh, size_t size,
                                    uint64_t dst_off, void *dst_mh, uint32_t rank, uint64_t sig_off, void *sig_mh,
                                    uint64_t sig_value, uint32_t sig_op, bool strong, void **req) {
  (void)strong;
  if (!sig_mh) return ncclInvalidArgument;
  return srd_rma_net_put(rctx, context, src_off, src_mh, size, dst_off, dst_mh, rank, sig_off, sig_mh, sig_value,
                         sig_op, req);
}

static ncclResult_t last_error_v14(void *rctx, bool *has_error) {
  int e = 0;
  ncclResult_t rc = srd_rma_net_last_error(rctx, &e);
  if (has_error) *has_error = e != 0;
  return rc;
}

SRD_EXPORT const ncclRma_v14_t ncclRmaPlugin_v14 = {
    .name = SRD_NET_NAME,
    .init = init_v14,
    .devices = srd_net_devices,
    .getProperties = props_v14,
    .listen = srd_rma_net_listen,
    .connect = connect_v14,
    .createContext = create_context_v14,
    .regMrSym = reg_v14,
    .regMrSymDmaBuf = reg_dmabuf_v14,
    .deregMrSym = srd_rma_net_dereg,
    .destroyContext = srd_rma_net_destroy_context,
    .closeColl = srd_rma_net_close,
    .closeListen = srd_net_close_listen,
    .iput = iput_v14,
    .iputSignal = iput_signal_v14,
    .iget = srd_rma_net_get,
    .iflush = srd_rma_net_flush,
    .test = srd_rma_net_test,
    .rmaProgress = srd_rma_net_progress,
    .queryLastError = last_error_v14,
    .finalize = srd_rma_net_finalize,
};
