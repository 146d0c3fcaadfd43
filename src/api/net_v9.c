#include <string.h>

#include "api.h"

static ncclResult_t init_v9(ncclDebugLogger_t logger) { return srd_net_init(logger); }

static ncclResult_t props_v9(int dev, ncclNetProperties_v9_t *out) {
  struct srd_props p;
  ncclResult_t rc = srd_net_get_properties(dev, &p);
  if (rc == ncclSuccess) SRD_FILL_PROPS_V9(out, p);
  return rc;
}

SRD_EXPORT const ncclNet_v9_t ncclNetPlugin_v9 = {
    .name = SRD_NET_NAME,
    .init = init_v9,
    .devices = srd_net_devices,
    .getProperties = props_v9,
    .listen = srd_net_listen,
    .connect = srd_api_connect,
    .accept = srd_api_accept,
    .regMr = srd_api_reg_mr,
    .regMrDmaBuf = srd_api_reg_mr_dmabuf,
    .deregMr = srd_net_dereg_mr,
    .isend = srd_api_isend,
    .irecv = srd_api_irecv,
    .iflush = srd_api_iflush,
    .test = srd_net_test,
    .closeSend = srd_net_close_send,
    .closeRecv = srd_net_close_recv,
    .closeListen = srd_net_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = NULL,
};
