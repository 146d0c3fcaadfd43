/* NCCL's iflush: before its kernel reads a GPU receive buffer, data a NIC
 * wrote there over PCIe must have reached GPU memory. A read issued after
 * those writes cannot pass them on the PCIe path, so a 4-byte loopback RDMA
 * read of the buffer on every rail that may have carried its stripes flushes
 * them (what NCCL's IB transport does). Only devices whose decision says so
 * (srd_gdr_decision.flush: efa without the driver's ordering promise) do
 * anything; providers that copy into GPU memory themselves need nothing. */
#include <rdma/fi_errno.h>

#include "srd/cuda.h"
#include "srd/log.h"
#include "srd/proto.h"

static void flush_read_done(struct srd_op *op, int err, const char *errstr) {
  struct srd_req *r = op->owner;
  struct srd_comm *c = r->comm;
  c->ops_in_flight--;
  if (err) {
    srd_comm_fail(c, SRD_ERR_SYSTEM, "flush read failed: %s", errstr ? errstr : fi_strerror(-err));
    srd_req_finish(r, SRD_ERR_SYSTEM);
  } else if (++r->completed == r->nstripes) {
    srd_req_finish(r, SRD_OK);
  }
  srd_req_op_done(r);
}

/* No loopback read could be posted (no request slot, the provider full or
 * refusing): the driver's own flush (cuFlushGPUDirectRDMAWrites, for the
 * calling thread's context, which NCCL's proxy thread has) serves instead,
 * synchronously. iflush cannot say "try again": NCCL reads a NULL request as
 * "nothing to flush". */
static int flush_by_driver(struct srd_comm *c, const char *read_err) {
  char why[200];
  if (!srd_cuda_flush_rdma_writes(srd_cuda_get(), why, sizeof(why))) return SRD_OK;
  srd_comm_fail(c, SRD_ERR_SYSTEM, "flush: no loopback read (%s) and the driver's flush failed: %s", read_err, why);
  return c->result;
}

int srd_proto_iflush(struct srd_comm *c, int n, void **data, const int *sizes, struct srd_mr_ref **mrs,
                     struct srd_req **out) {
  *out = NULL;
  if (c->result) return c->result;
  struct srd_dev *dev = c->dev;
  if (!dev->gdr.flush) return SRD_OK;
  /* Any GPU buffer that received bytes will do: one read per rail flushes
   * every write that rail completed before it. Host buffers need none. */
  int i = n - 1;
  while (i >= 0 && (!sizes || sizes[i] <= 0 || !data[i] || !mrs[i] || mrs[i]->mr->device < 0)) i--;
  if (i < 0) return SRD_OK;
  if (!srd_mr_covers(mrs[i], data[i], 1)) {
    SRD_WARN("iflush: buffer %p is outside its registration", data[i]);
    return SRD_ERR_ARG;
  }
  struct srd_req *r = srd_req_get(c, SRD_REQ_FLUSH);
  if (!r) return flush_by_driver(c, "no free request");
  const struct srd_rail_mrs *m = mrs[i]->mr->handle;
  uintptr_t a = (uintptr_t)data[i];
  r->nstripes = dev->nrails;
  for (int l = 0; l < dev->nrails; l++) {
    struct srd_rail *rail = &dev->rails[l];
    struct srd_op *op = &r->ops[l].op;
    op->done = flush_read_done;
    op->owner = r;
    uint64_t raddr = rail->virt_addr ? a : a - mrs[i]->mr->base;
    int rc = dev->rail_ops->flush_read(rail, raddr, dev->rail_ops->mr_key(m->mr[l]), op);
    if (rc) {
      /* The driver flushes what this rail (and any later one) wrote; reads
       * already posted on earlier rails still complete the request. */
      int frc = flush_by_driver(c, fi_strerror(-rc));
      r->nstripes = l;
      if (l == 0 || frc) {
        srd_req_finish(r, frc);
        if (l == 0) {
          srd_req_release(r);
          return frc;
        }
      }
      break;
    }
    r->outstanding++;
    r->posted++;
    c->ops_in_flight++;
  }
  *out = r;
  return SRD_OK;
}
