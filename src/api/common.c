/* Calls that several ncclNet versions share with the same meaning. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "srd/log.h"

ncclResult_t srd_api_isend_int(void *comm, void *data, int size, int tag, void *mh, void **req) {
  if (size < 0) {
    SRD_WARN("isend of a negative size (%d)", size);
    return ncclInvalidArgument;
  }
  return srd_net_isend(comm, data, (size_t)size, tag, mh, req);
}

ncclResult_t srd_api_irecv_int(void *comm, int n, void **data, int *sizes, int *tags, void **mh, void **req) {
  size_t s[NCCL_NET_MAX_REQUESTS];
  if (n < 1 || n > NCCL_NET_MAX_REQUESTS || !sizes) return srd_net_irecv(comm, n, data, NULL, tags, mh, req);
  for (int i = 0; i < n; i++) {
    if (sizes[i] < 0) return ncclInvalidArgument;
    s[i] = (size_t)sizes[i];
  }
  return srd_net_irecv(comm, n, data, s, tags, mh, req);
}

ncclResult_t srd_api_irecv(void *comm, int n, void **data, size_t *sizes, int *tags, void **mh, void **req) {
  return srd_net_irecv(comm, n, data, sizes, tags, mh, req);
}

ncclResult_t srd_api_isend_p(void *comm, void *data, size_t size, int tag, void *mh, void *ph, void **req) {
  (void)ph;
  return srd_net_isend(comm, data, size, tag, mh, req);
}

ncclResult_t srd_api_irecv_p(void *comm, int n, void **data, size_t *sizes, int *tags, void **mh, void **ph,
                             void **req) {
  (void)ph;
  return srd_net_irecv(comm, n, data, sizes, tags, mh, req);
}

ncclResult_t srd_api_iflush(void *comm, int n, void **data, int *sizes, void **mh, void **req) {
  return srd_net_iflush(comm, n, data, sizes, mh, req);
}

ncclResult_t srd_api_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle) {
  return srd_net_reg_mr(comm, data, size, type, -1, 0, mhandle);
}

ncclResult_t srd_api_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset, int fd,
                                   void **mhandle) {
  return srd_net_reg_mr(comm, data, size, type, fd, offset, mhandle);
}

ncclResult_t srd_api_connect(int dev, void *handle, void **send_comm, ncclNetDeviceHandle_v8_t **dc) {
  if (dc) *dc = NULL;
  return srd_net_connect(dev, handle, send_comm);
}

ncclResult_t srd_api_accept(void *listen_comm, void **recv_comm, ncclNetDeviceHandle_v8_t **dc) {
  if (dc) *dc = NULL;
  return srd_net_accept(listen_comm, recv_comm);
}

/* The context of v11+ is one per NCCL communicator: it holds a reference on
 * the plugin, released by finalize(). Live contexts are listed, so that a
 * second finalize of one is refused instead of freeing it twice. */
struct api_ctx {
  uint64_t comm_id;
  int traffic_class;
  struct api_ctx *next;
};

static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static struct api_ctx *live_ctxs;

/* Take ctx off the live list; false if it is not there. */
static bool unlist_ctx(struct api_ctx *ctx) {
  pthread_mutex_lock(&ctx_lock);
  struct api_ctx **p = &live_ctxs;
  while (*p && *p != ctx) p = &(*p)->next;
  bool found = *p != NULL;
  if (found) *p = ctx->next;
  pthread_mutex_unlock(&ctx_lock);
  return found;
}

ncclResult_t srd_api_init_ctx(void **ctx, uint64_t comm_id, int traffic_class, ncclDebugLogger_t logger) {
  if (!ctx) return ncclInvalidArgument;
  struct api_ctx *c = calloc(1, sizeof(*c));
  if (!c) return ncclSystemError;
  ncclResult_t rc = srd_net_init(logger);
  if (rc != ncclSuccess) {
    free(c);
    return rc;
  }
  c->comm_id = comm_id;
  c->traffic_class = traffic_class;
  pthread_mutex_lock(&ctx_lock);
  c->next = live_ctxs;
  live_ctxs = c;
  pthread_mutex_unlock(&ctx_lock);
  *ctx = c;
  return ncclSuccess;
}

ncclResult_t srd_api_finalize(void *ctx) {
  if (!ctx) return ncclInvalidArgument;
  if (!unlist_ctx(ctx)) {
    SRD_WARN("finalize of context %p, which is not initialized (finalized twice?)", ctx);
    return ncclInvalidArgument;
  }
  free(ctx);
  srd_net_fini();
  return ncclSuccess;
}

ncclResult_t srd_api_listen_ctx(void *ctx, int dev, void *handle, void **listen_comm) {
  (void)ctx;
  return srd_net_listen(dev, handle, listen_comm);
}

ncclResult_t srd_api_connect_ctx(void *ctx, int dev, void *handle, void **send_comm, ncclNetDeviceHandle_v11_t **dc) {
  (void)ctx;
  return srd_api_connect(dev, handle, send_comm, dc);
}

ncclResult_t srd_api_set_net_attr(void *ctx, ncclNetAttr_v11_t *attr) {
  /* Scheduling hints about peers and flows: our paths are fixed per device. */
  (void)ctx, (void)attr;
  return ncclSuccess;
}
