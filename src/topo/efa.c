/* What only an efa endpoint can be asked: its promise that 128-byte aligned
 * writes land in order (what LL128 needs across nodes; asked by the rail for
 * every efa endpoint it opens and by srd-info's probe), and whether its
 * device writes (or the provider emulates writes with sends). */
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

int srd_efa_device_writes(struct fid_ep *ep) {
#if HAVE_DECL_FI_OPT_EFA_EMULATED_WRITE
  bool emulated = true;
  size_t len = sizeof(emulated);
  if (fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_EFA_EMULATED_WRITE, &emulated, &len)) return -1;
  return !emulated;
#else
  (void)ep;
  return -1;
#endif
}
