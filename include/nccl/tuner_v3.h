/* ncclTuner v3 (introduced in NCCL 2.22): the plugin edits NCCL's cost table
 * (float[numAlgo][numProto], passed as float**). */
#ifndef SRD_NCCL_TUNER_V3_H
#define SRD_NCCL_TUNER_V3_H

#include "nccl/tuner_common.h"

typedef struct {
  const char *name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void **context);
  ncclResult_t (*getCollInfo)(void *context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float **collCostTable, int numAlgo, int numProto, int *nChannels);
  ncclResult_t (*destroy)(void *context);
} ncclTuner_v3_t;

#endif
