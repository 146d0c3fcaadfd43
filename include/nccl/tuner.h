/* Every ncclTuner ABI version we export. Only tuner/api.c and tests include
 * this; the rest of the tuner speaks include/srd/tuner.h. */
#ifndef SRD_NCCL_TUNER_H
#define SRD_NCCL_TUNER_H

#include "nccl/tuner_v2.h"
#include "nccl/tuner_v3.h"
#include "nccl/tuner_v4.h"
#include "nccl/tuner_v5.h"
#include "nccl/tuner_v6.h"

#endif
