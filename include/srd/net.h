/* The plugin in one internal vocabulary. src/api/ maps every ncclNet version
 * onto these calls; nothing below src/api/ knows NCCL versions. Results are
 * ncclResult_t values. */
#ifndef SRD_NET_H
#define SRD_NET_H

#include <stddef.h>
#include <stdint.h>

#include "nccl/types.h"

struct srd_props {
  const char *name;
  const char *pci_path; /* NULL when not PCI */
  uint64_t guid;
  int ptr_support;      /* NCCL_PTR_* */
  int speed_mbps;
  float latency_us;
  int max_comms;
  int max_recvs;
  size_t max_p2p_bytes;
  int rail_id;
  int force_flush;      /* received GPU data needs iflush (v9+ forceFlush) */
};

ncclResult_t srd_net_init(ncclDebugLogger_t logger);
/* Drop one reference taken by init; the last one releases every device. */
void srd_net_fini(void);
ncclResult_t srd_net_devices(int *ndev);
ncclResult_t srd_net_get_properties(int dev, struct srd_props *props);
ncclResult_t srd_net_listen(int dev, void *handle, void **listen_comm);
ncclResult_t srd_net_connect(int dev, void *handle, void **send_comm);
ncclResult_t srd_net_accept(void *listen_comm, void **recv_comm);
ncclResult_t srd_net_reg_mr(void *comm, void *data, size_t size, int type, int dmabuf_fd, uint64_t offset,
                            void **mhandle);
ncclResult_t srd_net_dereg_mr(void *comm, void *mhandle);
ncclResult_t srd_net_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle, void **request);
ncclResult_t srd_net_irecv(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags, void **mhandles,
                           void **request);
ncclResult_t srd_net_iflush(void *recv_comm, int n, void **data, const int *sizes, void **mhandles, void **request);
/* sizes: one per buffer of the request (may be NULL); every ncclNet version
 * reports int sizes here. */
ncclResult_t srd_net_test(void *request, int *done, int *sizes);
ncclResult_t srd_net_close_send(void *send_comm);
ncclResult_t srd_net_close_recv(void *recv_comm);
ncclResult_t srd_net_close_listen(void *listen_comm);

#endif
