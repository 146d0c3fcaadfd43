/* Every ncclNet ABI version we export. Only src/api/ and tools that drive
 * plugins include this; the rest of the code speaks include/srd/. */
#ifndef SRD_NCCL_NET_H
#define SRD_NCCL_NET_H

#include "nccl/net_v8.h"
#include "nccl/net_v9.h"
#include "nccl/net_v10.h"
#include "nccl/net_v11.h"
#include "nccl/net_v12.h"

#endif
