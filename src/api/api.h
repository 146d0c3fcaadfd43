/* Helpers shared by the version shims (and only by them). */
#ifndef SRD_API_H
#define SRD_API_H

#include "nccl/net.h"
#include "nccl/rma_v15.h"
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

/* One-sided RMA: what ncclRmaPlugin_v14 and _v15 share (rma_common.c). */
ncclResult_t srd_api_rma_init(void **ctx, uint64_t comm_id, ncclDebugLogger_t logger);
ncclResult_t srd_api_rma_props(int dev, ncclNetProperties_v12_t *out);
ncclResult_t srd_api_rma_connect(void *ctx, void *handles[], int nranks, int rank, void *listen_comm, void **coll);
ncclResult_t srd_api_rma_create_context(void *coll, ncclRmaConfig_v14_t *config, void **rctx);
ncclResult_t srd_api_rma_reg(void *coll, void *data, size_t size, int type, uint64_t flags, void **mh);
ncclResult_t srd_api_rma_reg_dmabuf(void *coll, void *data, size_t size, int type, uint64_t offset, int fd,
                                    uint64_t flags, void **mh);
ncclResult_t srd_api_rma_put_signal(void *rctx, int context, uint64_t src_off, void *src_mh, size_t size,
                                    uint64_t dst_off, void *dst_mh, uint32_t rank, uint64_t sig_off, void *sig_mh,
                                    uint64_t sig_value, uint32_t sig_op, void **req);
ncclResult_t srd_api_rma_last_error(void *rctx, bool *has_error);

#define SRD_RMA_COMMON_ENTRIES                   \
  .name = SRD_NET_NAME,                          \
  .init = srd_api_rma_init,                      \
  .devices = srd_net_devices,                    \
  .getProperties = srd_api_rma_props,            \
  .listen = srd_rma_net_listen,                  \
  .connect = srd_api_rma_connect,                \
  .createContext = srd_api_rma_create_context,   \
  .regMrSym = srd_api_rma_reg,                   \
  .regMrSymDmaBuf = srd_api_rma_reg_dmabuf,      \
  .deregMrSym = srd_rma_net_dereg,               \
  .destroyContext = srd_rma_net_destroy_context, \
  .closeColl = srd_rma_net_close,                \
  .closeListen = srd_net_close_listen,           \
  .iflush = srd_rma_net_flush,                   \
  .test = srd_rma_net_test,                      \
  .rmaProgress = srd_rma_net_progress,           \
  .queryLastError = srd_api_rma_last_error,      \
  .finalize = srd_rma_net_finalize

#endif
