#include <string.h>

#include "api.h"

static ncclResult_t init_v12(void **ctx, uint64_t comm_id, ncclNetCommConfig_v12_t *config,
                             ncclDebugLogger_t logger, ncclProfilerCallback_t prof) {
  (void)prof;
  return srd_api_init_ctx(ctx, comm_id, config ? config->trafficClass : -1, logger);
}

static ncclResult_t props_v12(int dev, ncclNetProperties_v12_t *out) {
  struct srd_props p;
  ncclResult_t rc = out ? srd_net_get_properties(dev, &p) : srd_net_null_arg("getProperties", "properties");
  if (rc != ncclSuccess) return rc;
  SRD_FILL_PROPS_V9(out, p);
  out->maxMultiRequestSize = 1;
  out->railId = (int16_t)p.rail_id;
  out->planeId = 0;
  return rc;
}

SRD_EXPORT const ncclNet_v12_t ncclNetPlugin_v12 = {
    SRD_NET_COMMON_ENTRIES,
    .init = init_v12,
    .getProperties = props_v12,
    .listen = srd_api_listen_ctx,
    .connect = srd_api_connect_ctx,
    .isend = srd_api_isend_p,
    .irecv = srd_api_irecv_p,
    .makeVDevice = NULL,
    .finalize = srd_api_finalize,
    .setNetAttr = srd_api_set_net_attr,
};
