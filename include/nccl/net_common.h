/* Constants and device-offload types common to ncclNet v8..v12. */
#ifndef SRD_NCCL_NET_COMMON_H
#define SRD_NCCL_NET_COMMON_H

#include "nccl/types.h"

#define NCCL_NET_HANDLE_MAXSIZE 128
#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4
#define NCCL_NET_MAX_REQUESTS 32
#define NCCL_NET_MAX_DEVS_PER_NIC_V9 4
#define NCCL_NET_MAX_DEVS_PER_NIC_V12 8
/* ncclRma (2.30+): regMrSym's mrFlags and iputSignal's signalOp. */
#define NCCL_NET_MR_FLAG_FORCE_SO (1 << 0)           /* strong ordering asked for this window */
#define NCCL_NET_MR_FLAG_SIGNAL_NEVER_RESET (1 << 1) /* a signal window whose words only grow */
#define NCCL_NET_SIGNAL_OP_INC 0x1
#define NCCL_NET_SIGNAL_OP_ADD 0x2

typedef enum {
  NCCL_NET_DEVICE_HOST = 0,
  NCCL_NET_DEVICE_UNPACK = 1,
  NCCL_NET_DEVICE_GIN_PROXY = 2, /* ncclRma v14: NCCL's GIN proxy runs on the table */
} ncclNetDeviceType;

/* The same layout in every version from v7 to v12. */
typedef struct {
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  void *handle;
  size_t size;
  int needsProxyProgress;
} ncclNetDeviceHandle_v8_t;
typedef ncclNetDeviceHandle_v8_t ncclNetDeviceHandle_v9_t;
typedef ncclNetDeviceHandle_v8_t ncclNetDeviceHandle_v10_t;
typedef ncclNetDeviceHandle_v8_t ncclNetDeviceHandle_v11_t;
typedef ncclNetDeviceHandle_v8_t ncclNetDeviceHandle_v12_t;

#endif
