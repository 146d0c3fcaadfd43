/* Helpers shared by the version shims (and only by them). */
#ifndef SRD_API_H
#define SRD_API_H

#include "nccl/net.h"
#include "srd/net.h"

#define SRD_EXPORT __attribute__((visibility("default")))
#define SRD_NET_NAME "SRD"

/* Fields every ncclNetProperties version shares, from v8 on. */
#define SRD_FILL_PROPS(out, p)                    \
  do {                                            \
    memset((out), 0, sizeof(*(out)));             \
    (out)->name = (char *)(p).name;               \
    (out)->pciPath = (char *)(p).pci_path;        \
    (out)->guid = (p).guid;                       \
    (out)->ptrSupport = (p).ptr_support;          \
    (out)->regIsGlobal = 1;                       \
    (out)->speed = (p).speed_mbps;                \
    (out)->port = 0;                              \
    (out)->latency = (p).latency_us;              \
    (out)->maxComms = (p).max_comms;              \
    (out)->maxRecvs = (p).max_recvs;              \
    (out)->netDeviceType = NCCL_NET_DEVICE_HOST;  \
    (out)->netDeviceVersion = 0;                  \
  } while (0)

/* v9+ additions: no virtual devices of our own; forceFlush where the
 * device's received GPU data needs iflush. */
#define SRD_FILL_PROPS_V9(out, p)              \
  do {                                         \
    SRD_FILL_PROPS(out, p);                    \
    (out)->vProps.ndevs = 1;                   \
    (out)->vProps.devs[0] = dev;               \
    (out)->maxP2pBytes = (p).max_p2p_bytes;    \
    (out)->maxCollBytes = (p).max_p2p_bytes;   \
    (out)->forceFlush = (p).force_flush;       \
  } while (0)

/* Entries every ncclNet table from v8 on holds with the same meaning. */
#define SRD_NET_COMMON_ENTRIES                \
  .name = SRD_NET_NAME,                       \
  .devices = srd_net_devices,                 \
  .accept = srd_api_accept,                   \
  .regMr = srd_api_reg_mr,                    \
  .regMrDmaBuf = srd_api_reg_mr_dmabuf,       \
  .deregMr = srd_net_dereg_mr,                \
  .iflush = srd_api_iflush,                   \
  .test = srd_net_test,                       \
  .closeSend = srd_net_close_send,            \
  .closeRecv = srd_net_close_recv,            \
  .closeListen = srd_net_close_listen,        \
  .getDeviceMr = NULL,                        \
  .irecvConsumed = NULL

/* int-sized data path of v8. */
ncclResult_t srd_api_isend_int(void *comm, void *data, int size, int tag, void *mh, void **req);
ncclResult_t srd_api_irecv_int(void *comm, int n, void **data, int *sizes, int *tags, void **mh, void **req);
ncclResult_t srd_api_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle);
ncclResult_t srd_api_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset, int fd,
                                   void **mhandle);
ncclResult_t srd_api_irecv(void *comm, int n, void **data, size_t *sizes, int *tags, void **mh, void **req);
ncclResult_t srd_api_iflush(void *comm, int n, void **data, int *sizes, void **mh, void **req);
/* v10+: profiler handles are accepted and ignored. */
ncclResult_t srd_api_isend_p(void *comm, void *data, size_t size, int tag, void *mh, void *ph, void **req);
ncclResult_t srd_api_irecv_p(void *comm, int n, void **data, size_t *sizes, int *tags, void **mh, void **ph,
                             void **req);
/* v11+: per-communicator context from init(). */
ncclResult_t srd_api_init_ctx(void **ctx, uint64_t comm_id, int traffic_class, ncclDebugLogger_t logger);
ncclResult_t srd_api_finalize(void *ctx);
ncclResult_t srd_api_listen_ctx(void *ctx, int dev, void *handle, void **listen_comm);
ncclResult_t srd_api_connect_ctx(void *ctx, int dev, void *handle, void **send_comm, ncclNetDeviceHandle_v11_t **dc);
ncclResult_t srd_api_accept(void *listen_comm, void **recv_comm, ncclNetDeviceHandle_v8_t **dc);
ncclResult_t srd_api_connect(int dev, void *handle, void **send_comm, ncclNetDeviceHandle_v8_t **dc);
ncclResult_t srd_api_set_net_attr(void *ctx, ncclNetAttr_v11_t *attr);

#endif
