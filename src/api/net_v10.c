#include <string.h>

#include "api.h"

static ncclResult_t init_v10(ncclDebugLogger_t logger, ncclProfilerCallback_t prof) {
  (void)prof;
  return srd_net_init(logger);
}

static ncclResult_t props_v10(int dev, ncclNetProperties_v10_t *out) {
  struct srd_props p;
  ncclResult_t rc = out ? srd_net_get_properties(dev, &p) : srd_net_null_arg("getProperties", "properties");
  if (rc == ncclSuccess) SRD_FILL_PROPS_V9(out, p);
  return rc;
}

static ncclResult_t connect_v10(int dev, ncclNetCommConfig_v10_t *config, void *handle, void **send_comm,
                                ncclNetDeviceHandle_v10_t **dc) {
  (void)config;
  return srd_api_connect(dev, handle, send_comm, dc);
}

SRD_EXPORT const ncclNet_v10_t ncclNetPlugin_v10 = {
    SRD_NET_COMMON_ENTRIES,
    .init = init_v10,
    .getProperties = props_v10,
    .listen = srd_net_listen,
    .connect = connect_v10,
    .isend = srd_api_isend_p,
    .irecv = srd_api_irecv_p,
    .makeVDevice = NULL,
};
