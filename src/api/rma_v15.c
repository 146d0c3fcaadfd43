/* ncclRmaPlugin_v15 (NCCL 2.31): v14 with optFlags on the three ops. Its
 * one flag, AggregateRequests, allows batching the doorbells of ops to one
 * peer; every op here is posted as it comes and has its own request, which
 * the flag permits, so the flags are read and need nothing. */
#include "api.h"

static ncclResult_t iput_v15(void *rctx, int context, uint64_t src_off, void *src_mh, size_t size, uint64_t dst_off,
                             void *dst_mh, uint32_t rank, uint32_t opt_flags, void **req) {
  (void)opt_flags;
  return srd_rma_net_put(rctx, context, src_off, src_mh, size, dst_off, dst_mh, rank, 0, NULL, 0, 0, req);
}

static ncclResult_t iput_signal_v15(void *rctx, int context, uint64_t src_off, void *src_mh, size_t size,
                                    uint64_t dst_off, void *dst_mh, uint32_t rank, uint64_t sig_off, void *sig_mh,
                                    uint64_t sig_value, uint32_t sig_op, bool strong, uint32_t opt_flags,
                                    void **req) {
  (void)strong, (void)opt_flags;
  return srd_api_rma_put_signal(rctx, context, src_off, src_mh, size, dst_off, dst_mh, rank, sig_off, sig_mh,
                                sig_value, sig_op, req);
}

static ncclResult_t iget_v15(void *rctx, int context, uint64_t remote_off, void *remote_mh, size_t size,
                             uint64_t local_off, void *local_mh, uint32_t rank, uint32_t opt_flags, void **req) {
  (void)opt_flags;
  return srd_rma_net_get(rctx, context, remote_off, remote_mh, size, local_off, local_mh, rank, req);
}

SRD_EXPORT const ncclRma_v15_t ncclRmaPlugin_v15 = {
    SRD_RMA_COMMON_ENTRIES,
    .iput = iput_v15,
    .iputSignal = iput_signal_v15,
    .iget = iget_v15,
};
