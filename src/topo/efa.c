/* efa's promise that 128-byte aligned writes land in order (what LL128 needs
 * across nodes): only an endpoint can be asked. Asked by the rail for every
 * efa endpoint it opens and by srd-info's probe. */
#include "config.h"

#include <stdbool.h>

#include <rdma/fabric.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_ext.h>

#include "srd/topo.h"

int srd_efa_write_order_128(struct fid_ep *ep) {
#if HAVE_DECL_FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES
  bool on = true;
  return fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES, &on, sizeof(on)) == 0;
#else
  (void)ep;
  return -1;
#endif
}
