#include <string.h>

#include "api.h"

static ncclResult_t init_v9(ncclDebugLogger_t logger) { return srd_net_init(logger); }

static ncclResult_t props_v9(int dev, ncclNetProperties_v9_t *out) {
  struct srd_props p;
  ncclResult_t rc = out ? srd_net_get_properties(dev, &p) : srd_net_null_arg("getProperties", "properties");
  if (rc == ncclSuccess) SRD_FILL_PROPS_V9(out, p);
  return rc;
}

SRD_EXPORT const ncclNet_v9_t ncclNetPlugin_v9 = {
    SRD_NET_COMMON_ENTRIES,
    .init = init_v9,
    .getProperties = props_v9,
    .listen = srd_net_listen,
    .connect = srd_api_connect,
    .isend = srd_net_isend,
    .irecv = srd_api_irecv,
    .makeVDevice = NULL,
};
