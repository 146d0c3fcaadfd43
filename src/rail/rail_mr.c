#include "config.h"

#include "srd/rail.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include "srd/log.h"
#include "srd/sys.h"

/* Without FI_MR_PROV_KEY (tcp;ofi_rxm, shm) the keys are ours to choose:
 * random, so that a process that never said hello cannot guess one (they were
 * 1, 2, 3...). efa (FI_MR_PROV_KEY) picks its own. */
static uint64_t random_key(const struct srd_rail *rail) {
  uint64_t k = srd_random64();
  size_t bits = rail->info->domain_attr->mr_key_size * 8;
  if (bits && bits < 64) k &= (1ULL << bits) - 1;
  return k ? k : 1;
}

#define KEY_TRIES 8

/* base_addr is the address the dma-buf's first byte has (fi_mr(3)): the
 * buffer at base lies offset bytes into it, and efa registers the range at
 * base_addr + offset (efa_mr_reg_ibv_mr, ibv_reg_dmabuf_mr's iova), which
 * must be base, the address peers write to (FI_MR_VIRT_ADDR). */
void *srd_rail_dmabuf_base(void *base, uint64_t offset) { return (char *)base - offset; }

int srd_rail_reg(struct srd_rail *rail, void *base, size_t len, uint64_t access, int cuda_dev, int dmabuf_fd,
                 uint64_t dmabuf_offset, struct fid_mr **mr) {
  struct iovec iov = {.iov_base = base, .iov_len = len};
  struct fi_mr_attr attr = {.mr_iov = &iov, .iov_count = 1, .access = access};
  uint64_t flags = 0;
  if (cuda_dev >= 0) {
    attr.iface = FI_HMEM_CUDA;
    attr.device.cuda = cuda_dev;
  }
#if HAVE_DECL_FI_MR_DMABUF
  struct fi_mr_dmabuf dmabuf = {
      .fd = dmabuf_fd, .offset = dmabuf_offset, .len = len, .base_addr = srd_rail_dmabuf_base(base, dmabuf_offset)};
  if (dmabuf_fd >= 0) {
    attr.dmabuf = &dmabuf;
    attr.iov_count = 1;
    flags |= FI_MR_DMABUF;
  }
#else
  (void)dmabuf_offset;
  if (dmabuf_fd >= 0) return -FI_ENOSYS;
#endif
  bool prov_key = rail->info->domain_attr->mr_mode & FI_MR_PROV_KEY;
  int rc = -FI_ENOKEY;
  for (int t = 0; t < KEY_TRIES && rc == -FI_ENOKEY; t++) { /* a key already in use: draw again */
    if (!prov_key) attr.requested_key = random_key(rail);
    rc = fi_mr_regattr(rail->domain, &attr, flags, mr);
  }
  if (rc) SRD_WARN("rail %s: registration of %zu bytes at %p failed: %s", rail->name, len, base, fi_strerror(-rc));
  return rc;
}

void *srd_rail_mr_desc(struct fid_mr *mr) { return mr ? fi_mr_desc(mr) : NULL; }
uint64_t srd_rail_mr_key(struct fid_mr *mr) { return fi_mr_key(mr); }
void srd_rail_mr_close(struct fid_mr *mr) { fi_close(&mr->fid); }
