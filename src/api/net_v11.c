#include <string.h>

#include "api.h"

static ncclResult_t init_v11(void **ctx, uint64_t comm_id, ncclNetCommConfig_v11_t *config,
                             ncclDebugLogger_t logger, ncclProfilerCallback_t prof) {
  (void)prof;
  return srd_api_init_ctx(ctx, comm_id, config ? config->trafficClass : -1, logger);
}

static ncclResult_t props_v11(int dev, ncclNetProperties_v11_t *out) {
  struct srd_props p;
  ncclResult_t rc = out ? srd_net_get_properties(dev, &p) : srd_net_null_arg("getProperties", "properties");
  if (rc != ncclSuccess) return rc;
  SRD_FILL_PROPS_V9(out, p);
  out->maxMultiRequestSize = 1;
  return rc;
}

SRD_EXPORT const ncclNet_v11_t ncclNetPlugin_v11 = {
    SRD_NET_COMMON_ENTRIES,
    .init = init_v11,
    .getProperties = props_v11,
    .listen = srd_api_listen_ctx,
    .connect = srd_api_connect_ctx,
    .isend = srd_api_isend_p,
    .irecv = srd_api_irecv_p,
    .makeVDevice = NULL,
    .finalize = srd_api_finalize,
    .setNetAttr = srd_api_set_net_attr,
};
