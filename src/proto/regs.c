/* A device's registrations: every buffer NCCL registered, on every rail that
 * needs it (the registration cache's reg/dereg), kept on a list so that one
 * rail's registrations can be made again under new keys (rail failover:
 * writes cut off on a rail that must not land when its link returns). */
#include <stdlib.h>

#include <rdma/fi_errno.h>

#include "srd/log.h"
#include "srd/proto.h"

static void unlink_reg(struct srd_dev *dev, struct srd_rail_mrs *m) {
  if (m->prev) m->prev->next = m->next;
  else if (dev->regs == m) dev->regs = m->next;
  if (m->next) m->next->prev = m->prev;
}

void srd_dev_dereg(void *arg, void *handle) {
  struct srd_dev *dev = arg;
  struct srd_rail_mrs *m = handle;
  pthread_mutex_lock(&dev->lock);
  unlink_reg(dev, m);
  for (int i = 0; i < m->nrails; i++)
    if (m->mr[i]) dev->rail_ops->mr_close(m->mr[i]);
  pthread_mutex_unlock(&dev->lock);
  free(m);
}

static int reg_on(struct srd_dev *dev, const struct srd_rail_mrs *m, int l, int dmabuf_fd, uint64_t offset,
                  struct fid_mr **mr) {
  struct srd_rail *rail = &dev->rails[l];
  uint64_t fi_access = srd_mr_rail_access(m->access, m->cuda_dev, rail->mr_local, dev->gdr.flush, rail->sends_read);
  *mr = NULL;
  return fi_access ? dev->rail_ops->reg(rail, m->base, m->len, fi_access, m->cuda_dev, dmabuf_fd, offset, mr) : 0;
}

/* Least privilege: a receive buffer is only ever written by the peer
 * (FI_REMOTE_WRITE, nothing else); a send buffer is only the local source of
 * our writes, registered only where the provider needs a descriptor for it
 * (FI_MR_LOCAL: efa; GPU memory everywhere), and then without any remote
 * access. tcp;ofi_rxm and shm (1.17 and 2.6) do not ask for FI_MR_LOCAL:
 * their host send buffers are not registered at all, so no key can reach
 * them (srd_mr_rail_access). */
int srd_dev_reg(void *arg, void *base, size_t len, int type, int cuda_dev, unsigned access, int dmabuf_fd,
                uint64_t offset, void **handle) {
  (void)type; /* cuda_dev says it all: the cache keys by both */
  struct srd_dev *dev = arg;
  struct srd_rail_mrs *m = calloc(1, sizeof(*m));
  if (!m) return -FI_ENOMEM;
  m->base = base;
  m->len = len;
  m->access = access;
  m->cuda_dev = cuda_dev;
  m->dmabuf = dmabuf_fd >= 0;
  int rc = 0;
  pthread_mutex_lock(&dev->lock);
  for (int i = 0; i < dev->nrails && !rc; i++) {
    m->nrails++;
    rc = reg_on(dev, m, i, dmabuf_fd, offset, &m->mr[i]);
  }
  m->next = dev->regs;
  if (m->next) m->next->prev = m;
  dev->regs = m;
  pthread_mutex_unlock(&dev->lock);
  if (rc) {
    srd_dev_dereg(dev, m);
    return rc;
  }
  *handle = m;
  return 0;
}

int srd_dev_rekey_rail(struct srd_dev *dev, int l) {
  /* NCCL may close a dma-buf's fd once it is registered: such a buffer cannot
   * be registered again. Checked first, so that nothing changes then. */
  for (struct srd_rail_mrs *m = dev->regs; m; m = m->next)
    if (m->dmabuf && m->mr[l]) {
      SRD_WARN("device %d: rail %d (%s): a dma-buf registration cannot be made again under a new key", dev->index, l,
               dev->rails[l].name);
      return SRD_ERR_SYSTEM;
    }
  int n = 0;
  for (struct srd_rail_mrs *m = dev->regs; m; m = m->next) {
    if (!m->mr[l]) continue;
    struct fid_mr *fresh;
    if (reg_on(dev, m, l, -1, 0, &fresh)) return SRD_ERR_SYSTEM; /* logged by the rail */
    dev->rail_ops->mr_close(m->mr[l]);
    m->mr[l] = fresh;
    n++;
  }
  SRD_INFO(NCCL_NET, "device %d: rail %d (%s): %d registration(s) made again under new keys", dev->index, l,
           dev->rails[l].name, n);
  return SRD_OK;
}
