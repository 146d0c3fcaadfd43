/* ncclTuner v6 (introduced in NCCL 2.30): v5 plus an optional chunk-size override. */
#ifndef SRD_NCCL_TUNER_V6_H
#define SRD_NCCL_TUNER_V6_H

#include "nccl/tuner_v5.h"

typedef ncclNvlDomainInfo_v5_t ncclNvlDomainInfo_v6_t;
typedef ncclTunerConstants_v5_t ncclTunerConstants_v6_t;

typedef struct {
  const char *name;
  ncclResult_t (*init)(void **context, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction,
                       ncclNvlDomainInfo_v6_t *nvlDomainInfo, ncclTunerConstants_v6_t *constants);
  ncclResult_t (*getCollInfo)(void *context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float **collCostTable, int numAlgo, int numProto, int regBuff, int *nChannels);
  ncclResult_t (*finalize)(void *context);
  /* May be NULL. *chunkSize holds NCCL's value on entry; NCCL clamps what comes back. */
  ncclResult_t (*getChunkSize)(void *context, ncclFunc_t collType, size_t nBytes, int algo, int proto, int nChannels,
                               size_t *chunkSize);
} ncclTuner_v6_t;

#endif
