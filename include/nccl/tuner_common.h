/* Enums and constants shared by every ncclTuner ABI version (v2..v6).
 * Numeric values must match NCCL: they index its cost table. */
#ifndef SRD_NCCL_TUNER_COMMON_H
#define SRD_NCCL_TUNER_COMMON_H

#include "nccl/types.h"

/* Collective kinds as NCCL numbers them; the tuner only ever sees the first five. */
typedef enum {
  ncclFuncBroadcast = 0,
  ncclFuncReduce = 1,
  ncclFuncAllGather = 2,
  ncclFuncReduceScatter = 3,
  ncclFuncAllReduce = 4,
  ncclFuncSendRecv = 5,
  ncclFuncSend = 6,
  ncclFuncRecv = 7,
  ncclFuncAlltoAll = 8,
  ncclFuncScatter = 9,
  ncclFuncGather = 10,
  ncclFuncAllGatherV = 11,
  ncclFuncPutSignal = 12,
  ncclFuncSignal = 13,
  ncclFuncWaitSignal = 14,
  ncclNumFuncs = 15
} ncclFunc_t;

/* Rows of the cost table. */
#define NCCL_ALGO_UNDEF (-1)
#define NCCL_ALGO_TREE 0
#define NCCL_ALGO_RING 1
#define NCCL_ALGO_COLLNET_DIRECT 2
#define NCCL_ALGO_COLLNET_CHAIN 3
#define NCCL_ALGO_NVLS 4
#define NCCL_ALGO_NVLS_TREE 5
#define NCCL_ALGO_PAT 6
#define NCCL_NUM_ALGORITHMS 7

/* Columns of the cost table. */
#define NCCL_PROTO_UNDEF (-1)
#define NCCL_PROTO_LL 0
#define NCCL_PROTO_LL128 1
#define NCCL_PROTO_SIMPLE 2
#define NCCL_NUM_PROTOCOLS 3

/* Cost NCCL writes into entries that must not be chosen. */
#define NCCL_ALGO_PROTO_IGNORE (-1.0f)

/* Dimensions of the tuner constants (v5+). */
#define NCCL_NUM_HW_LINKS 3
#define NCCL_NUM_COMPCAPS 4
#define NCCL_NUM_TUNING_SCALES 3

#endif
