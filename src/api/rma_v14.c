/* ncclRmaPlugin_v14 (NCCL 2.30): one-sided RMA on the same devices as the
 * net tables. NCCL finds it in the net plugin library it loaded. */
#include "api.h"

static ncclResult_t iput_v14(void *rctx, int context, uint64_t src_off, void *src_mh, size_t size, uint64_t dst_off,
                             void *dst_mh, uint32_t rank, void **req) {
  return srd_rma_net_put(rctx, context, src_off, src_mh, size, dst_off, dst_mh, rank, 0, NULL, 0, 0, req);
}

static ncclResult_t iput_signal_v14(void *rctx, int context, uint64_t src_off, void *src_mh, size_t size,
                                    uint64_t dst_off, void *dst_mh, uint32_t rank, uint64_t sig_off, void *sig_mh,
                                    uint64_t sig_value, uint32_t sig_op, bool strong, void **req) {
  (void)strong;
  return srd_api_rma_put_signal(rctx, context, src_off, src_mh, size, dst_off, dst_mh, rank, sig_off, sig_mh,
                                sig_value, sig_op, req);
}

SRD_EXPORT const ncclRma_v14_t ncclRmaPlugin_v14 = {
    SRD_RMA_COMMON_ENTRIES,
    .iput = iput_v14,
    .iputSignal = iput_signal_v14,
    .iget = srd_rma_net_get,
};
