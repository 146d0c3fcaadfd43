#include <string.h>

#include "api.h"

static ncclResult_t init_v8(ncclDebugLogger_t logger) { return srd_net_init(logger); }

static ncclResult_t props_v8(int dev, ncclNetProperties_v8_t *out) {
  struct srd_props p;
  ncclResult_t rc = out ? srd_net_get_properties(dev, &p) : srd_net_null_arg("getProperties", "properties");
  if (rc == ncclSuccess) SRD_FILL_PROPS(out, p);
  return rc;
}

SRD_EXPORT const ncclNet_v8_t ncclNetPlugin_v8 = {
    SRD_NET_COMMON_ENTRIES,
    .init = init_v8,
    .getProperties = props_v8,
    .listen = srd_net_listen,
    .connect = srd_api_connect,
    .isend = srd_api_isend_int,
    .irecv = srd_api_irecv_int,
};
