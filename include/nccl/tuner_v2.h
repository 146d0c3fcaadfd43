/* ncclTuner v2 (introduced in NCCL 2.21): the plugin names one algorithm and protocol. */
#ifndef SRD_NCCL_TUNER_V2_H
#define SRD_NCCL_TUNER_V2_H

#include "nccl/tuner_common.h"

typedef struct {
  const char *name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void **context);
  /* algorithm/protocol: both set or both left alone; nChannels: 0 leaves NCCL's count. */
  ncclResult_t (*getCollInfo)(void *context, ncclFunc_t collType, size_t nBytes, int collNetSupport, int nvlsSupport,
                              int numPipeOps, int *algorithm, int *protocol, int *nChannels);
  ncclResult_t (*destroy)(void *context);
} ncclTuner_v2_t;

#endif
