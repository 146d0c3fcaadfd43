/* What ncclRmaPlugin_v14 and _v15 share: every entry but the three ops that
 * v15 gave an optFlags argument. */
#include <string.h>

#include "api.h"

ncclResult_t srd_api_rma_init(void **ctx, uint64_t comm_id, ncclDebugLogger_t logger) {
  (void)comm_id;
  return srd_rma_net_init(ctx, logger);
}

/* NCCL's GIN proxy drives the table (netDeviceType 2). */
ncclResult_t srd_api_rma_props(int dev, ncclNetProperties_v12_t *out) {
  struct srd_props p;
  ncclResult_t rc = out ? srd_net_get_properties(dev, &p) : srd_net_null_arg("getProperties", "properties");
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

ncclResult_t srd_api_rma_connect(void *ctx, void *handles[], int nranks, int rank, void *listen_comm, void **coll) {
  (void)ctx; /* NCCL 2.30.7 passes its net context, not ours */
  return srd_rma_net_connect(handles, nranks, rank, listen_comm, coll);
}

ncclResult_t srd_api_rma_create_context(void *coll, ncclRmaConfig_v14_t *config, void **rctx) {
  return srd_rma_net_create_context(coll, config ? config->nContexts : 0, rctx);
}

ncclResult_t srd_api_rma_reg(void *coll, void *data, size_t size, int type, uint64_t flags, void **mh) {
  return srd_rma_net_reg(coll, data, size, type, flags, -1, 0, mh);
}

ncclResult_t srd_api_rma_reg_dmabuf(void *coll, void *data, size_t size, int type, uint64_t offset, int fd,
                                    uint64_t flags, void **mh) {
  return srd_rma_net_reg(coll, data, size, type, flags, fd, offset, mh);
}

/* Every signal is strong: a weak one costs the same here. */
ncclResult_t srd_api_rma_put_signal(void *rctx, int context, uint64_t src_off, void *src_mh, size_t size,
                                    uint64_t dst_off, void *dst_mh, uint32_t rank, uint64_t sig_off, void *sig_mh,
                                    uint64_t sig_value, uint32_t sig_op, void **req) {
  if (!sig_mh) return ncclInvalidArgument;
  return srd_rma_net_put(rctx, context, src_off, src_mh, size, dst_off, dst_mh, rank, sig_off, sig_mh, sig_value,
                         sig_op, req);
}

ncclResult_t srd_api_rma_last_error(void *rctx, bool *has_error) {
  int e = 0;
  ncclResult_t rc = srd_rma_net_last_error(rctx, &e);
  if (has_error) *has_error = e != 0;
  return rc;
}
