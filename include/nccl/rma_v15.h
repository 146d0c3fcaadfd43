/* ncclRma v15 (NCCL 2.31): the v14 table with one more argument, optFlags,
 * on iput, iputSignal and iget, looked up as ncclRmaPlugin_v15 (NCCL prefers
 * it to v14). Declared from NCCL's public plugin ABI (rma_v15.h): member
 * order, types and constants must match it. */
#ifndef SRD_NCCL_RMA_V15_H
#define SRD_NCCL_RMA_V15_H

#include "nccl/rma_v14.h"

typedef ncclRmaConfig_v14_t ncclRmaConfig_v15_t;

/* optFlags bits: hints only, they never change an op's data or order. */
enum ncclRmaOptFlags {
  ncclRmaOptFlagsDefault = 0,
  ncclRmaOptFlagsAggregateRequests = 1 << 0, /* more ops to the same peer follow */
};

typedef struct {
  const char *name;
  ncclResult_t (*init)(void **ctx, uint64_t commId, ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int *ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v12_t *props);
  ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
  ncclResult_t (*connect)(void *ctx, void *handles[], int nranks, int rank, void *listenComm, void **collComm);
  ncclResult_t (*createContext)(void *collComm, ncclRmaConfig_v15_t *config, void **rmaCtx);
  ncclResult_t (*regMrSym)(void *collComm, void *data, size_t size, int type, uint64_t mrFlags, void **mhandle);
  ncclResult_t (*regMrSymDmaBuf)(void *collComm, void *data, size_t size, int type, uint64_t offset, int fd,
                                 uint64_t mrFlags, void **mhandle);
  ncclResult_t (*deregMrSym)(void *collComm, void *mhandle);
  ncclResult_t (*destroyContext)(void *rmaCtx);
  ncclResult_t (*closeColl)(void *collComm);
  ncclResult_t (*closeListen)(void *listenComm);
  ncclResult_t (*iput)(void *rmaCtx, int context, uint64_t srcOff, void *srcMhandle, size_t size, uint64_t dstOff,
                       void *dstMhandle, uint32_t rank, uint32_t optFlags, void **request);
  ncclResult_t (*iputSignal)(void *rmaCtx, int context, uint64_t srcOff, void *srcMhandle, size_t size,
                             uint64_t dstOff, void *dstMhandle, uint32_t rank, uint64_t signalOff,
                             void *signalMhandle, uint64_t signalValue, uint32_t signalOp, bool isStrongSignal,
                             uint32_t optFlags, void **request);
  ncclResult_t (*iget)(void *rmaCtx, int context, uint64_t remoteOff, void *remoteMhandle, size_t size,
                       uint64_t localOff, void *localMhandle, uint32_t rank, uint32_t optFlags, void **request);
  ncclResult_t (*iflush)(void *rmaCtx, int context, void *mhandle, uint32_t rank, void **request);
  ncclResult_t (*test)(void *collComm, void *request, int *done);
  ncclResult_t (*rmaProgress)(void *rmaCtx);
  ncclResult_t (*queryLastError)(void *rmaCtx, bool *hasError);
  ncclResult_t (*finalize)(void *ctx);
} ncclRma_v15_t;

#endif
