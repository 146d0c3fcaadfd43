/* ncclTuner v4 (introduced in NCCL 2.24): v3 plus whether the user buffers are registered. */
#ifndef SRD_NCCL_TUNER_V4_H
#define SRD_NCCL_TUNER_V4_H

#include "nccl/tuner_common.h"

typedef struct {
  const char *name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void **context);
  ncclResult_t (*getCollInfo)(void *context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float **collCostTable, int numAlgo, int numProto, int regBuff, int *nChannels);
  ncclResult_t (*destroy)(void *context);
} ncclTuner_v4_t;

#endif
