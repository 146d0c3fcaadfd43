/* Registration cache. NCCL registers the same buffers again and again (and
 * regIsGlobal lets it share them across comms), so each address range is
 * registered once per device (per owner, for memory a peer may reach) and
 * reference counted. The cache knows nothing
 * of libfabric: its owner supplies the register/deregister calls. */
#ifndef SRD_MR_H
#define SRD_MR_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct srd_mr_ops {
  /* Register [base, base+len) of memory type (NCCL_PTR_*) on GPU device
   * (CUDA ordinal, -1 for host memory) for the owner's access class; *handle
   * on success. */
  int (*reg)(void *arg, void *base, size_t len, int type, int device, unsigned access, int dmabuf_fd,
             uint64_t dmabuf_offset,
             void **handle);
  void (*dereg)(void *arg, void *handle);
  void *arg;
};

struct srd_mr {
  uintptr_t base;
  size_t len;
  int type;
  int device;      /* CUDA ordinal, -1 for host memory: part of the key with type */
  unsigned access; /* the owner's access class: entries of different classes never share */
  uint64_t owner;  /* 0: shared by every covering range; else only its owner's exact range */
  int refs;
  int dmabuf;    /* registered from a dmabuf fd: never shared */
  void *handle;  /* the owner's per-rail registration */
};

/* What NCCL holds: the exact range it registered, backed by a shared entry.
 * Bounds checks use the exact range, not the page-rounded entry. A released
 * handle is not freed but kept (mr NULL) for reuse: a caller that uses it
 * after deregistering gets an error from a plain field check, never freed
 * memory, at no cost to the data path. */
struct srd_mr_ref {
  struct srd_mr *mr;        /* NULL once released */
  struct srd_mr *alt;       /* the same range in another access class, made on first need */
  uintptr_t addr;
  size_t len;
  struct srd_mr_ref *prev, *next;
};

struct srd_mr_cache {
  pthread_mutex_t lock;
  struct srd_mr_ref *refs; /* every handle given out, to reject foreign ones */
  struct srd_mr_ref *free_head, *free_tail; /* released handles, reused oldest first */
  struct srd_mr_ops ops;
  size_t page;
  int n, cap;
  struct srd_mr **sorted; /* by base, then by len */
};

/* page 1: every registration is exactly the range asked for. */
void srd_mr_cache_init(struct srd_mr_cache *c, const struct srd_mr_ops *ops, size_t page);
/* Deregisters whatever is still cached. */
void srd_mr_cache_fini(struct srd_mr_cache *c);

/* Find a cached registration covering [addr, addr+len) of the same type,
 * device and access class, or register: host memory at the cache's page
 * granularity, GPU memory exactly (a rounded range may reach outside the
 * allocation, which the driver refuses to pin). owner != 0 (memory a peer may
 * reach: one comm's receive buffers) shares nothing but the same owner's
 * exact range, registered exactly. dmabuf_fd < 0 for ordinary memory (a
 * dmabuf registration is never shared). Returns 0 and *out, or an error. */
int srd_mr_acquire(struct srd_mr_cache *c, void *addr, size_t len, int type, int device, unsigned access,
                   uint64_t owner, int dmabuf_fd, uint64_t dmabuf_offset, struct srd_mr_ref **out);
/* The registration of ref's exact range in access class `access`: ref's own
 * entry, or one acquired the first time it is asked for (NCCL, told that
 * registrations are global, may use a handle made on a send comm for a
 * receive). Call without the owner's registration lock held. */
int srd_mr_entry_for(struct srd_mr_cache *c, struct srd_mr_ref *ref, unsigned access, uint64_t owner,
                     struct srd_mr **out);
/* What srd_mr_entry_for found before (NULL if never asked): for the data path. */
static inline struct srd_mr *srd_mr_entry(const struct srd_mr_ref *ref, unsigned access) {
  return ref->mr->access == access ? ref->mr : ref->alt && ref->alt->access == access ? ref->alt : NULL;
}
/* Drop one reference; the last one deregisters. -1 if ref is not one of ours. */
int srd_mr_release(struct srd_mr_cache *c, struct srd_mr_ref *ref);

/* Is ref a registration not yet released? (ref must be one of ours, released
 * or not: handles are never freed before srd_mr_cache_fini.) */
static inline int srd_mr_live(const struct srd_mr_ref *ref) { return ref->mr != NULL; }

/* Does the registration NCCL made cover [addr, addr+len)? */
static inline int srd_mr_covers(const struct srd_mr_ref *ref, const void *addr, size_t len) {
  uintptr_t a = (uintptr_t)addr;
  return a >= ref->addr && len <= ref->len && a - ref->addr <= ref->len - len;
}

#endif
