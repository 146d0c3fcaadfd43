#include "srd/mr.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "srd/log.h"

/* Overlapping registrations are legal (a buffer registered inside a larger
 * one that was released meanwhile, or different types); a lookup scans back
 * this far from the binary-search position. */
#define LOOKBACK 8

void srd_mr_cache_init(struct srd_mr_cache *c, const struct srd_mr_ops *ops, size_t page) {
  memset(c, 0, sizeof(*c));
  pthread_mutex_init(&c->lock, NULL);
  c->ops = *ops;
  c->page = page ? page : 4096;
}

void srd_mr_cache_fini(struct srd_mr_cache *c) {
  while (c->refs) {
    struct srd_mr_ref *r = c->refs;
    c->refs = r->next;
    free(r);
  }
  for (int i = 0; i < c->n; i++) {
    c->ops.dereg(c->ops.arg, c->sorted[i]->handle);
    free(c->sorted[i]);
  }
  free(c->sorted);
  pthread_mutex_destroy(&c->lock);
  c->sorted = NULL;
  c->n = c->cap = 0;
}

/* First index whose base is greater than addr. */
static int upper_bound(const struct srd_mr_cache *c, uintptr_t addr) {
  int lo = 0, hi = c->n;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (c->sorted[mid]->base <= addr) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static struct srd_mr *lookup(const struct srd_mr_cache *c, void *addr, size_t len, int type, int device) {
  int i = upper_bound(c, (uintptr_t)addr);
  for (int k = i - 1; k >= 0 && k >= i - LOOKBACK; k--) {
    struct srd_mr *m = c->sorted[k];
    uintptr_t a = (uintptr_t)addr;
    if (m->type == type && m->device == device && !m->dmabuf && a >= m->base && len <= m->len && a - m->base <= m->len - len) return m;
  }
  return NULL;
}

static int insert(struct srd_mr_cache *c, struct srd_mr *m) {
  if (c->n == c->cap) {
    int cap = c->cap ? c->cap * 2 : 16;
    struct srd_mr **s = realloc(c->sorted, (size_t)cap * sizeof(*s));
    if (!s) return -ENOMEM;
    c->sorted = s;
    c->cap = cap;
  }
  int i = upper_bound(c, m->base);
  memmove(&c->sorted[i + 1], &c->sorted[i], (size_t)(c->n - i) * sizeof(*c->sorted));
  c->sorted[i] = m;
  c->n++;
  return 0;
}

static int acquire_entry(struct srd_mr_cache *c, void *addr, size_t len, int type, int device, int dmabuf_fd,
                         uint64_t dmabuf_offset, struct srd_mr **out) {
  struct srd_mr *m = dmabuf_fd < 0 ? lookup(c, addr, len, type, device) : NULL;
  if (m) {
    m->refs++;
    *out = m;
    return 0;
  }
  int rc = -ENOMEM;
  if (!(m = calloc(1, sizeof(*m)))) goto out;
  uintptr_t start = (uintptr_t)addr, end = start + (len ? len : 1);
  if (dmabuf_fd < 0 && device < 0) {
    /* Whole pages: NCCL's next buffer in the same pages then hits the cache. */
    start &= ~(uintptr_t)(c->page - 1);
    end = (end + c->page - 1) & ~(uintptr_t)(c->page - 1);
  }
  m->base = start;
  m->len = end - start;
  m->type = type;
  m->device = device;
  m->dmabuf = dmabuf_fd >= 0;
  m->refs = 1;
  uint64_t off = dmabuf_offset;
  if ((rc = c->ops.reg(c->ops.arg, (void *)m->base, m->len, type, device, dmabuf_fd, off, &m->handle))) goto out;
  if ((rc = insert(c, m))) {
    c->ops.dereg(c->ops.arg, m->handle);
    goto out;
  }
  *out = m;
  m = NULL;
out:
  free(m);
  return rc;
}

static void drop_entry(struct srd_mr_cache *c, struct srd_mr *mr) {
  if (--mr->refs) return;
  for (int k = 0; k < c->n; k++)
    if (c->sorted[k] == mr) {
      memmove(&c->sorted[k], &c->sorted[k + 1], (size_t)(c->n - k - 1) * sizeof(*c->sorted));
      c->n--;
      break;
    }
  c->ops.dereg(c->ops.arg, mr->handle);
  free(mr);
}

int srd_mr_acquire(struct srd_mr_cache *c, void *addr, size_t len, int type, int device, int dmabuf_fd,
                   uint64_t dmabuf_offset, struct srd_mr_ref **out) {
  if (!addr && len) return -EINVAL;
  if (len > UINTPTR_MAX - c->page || (uintptr_t)addr > UINTPTR_MAX - len - c->page) return -EINVAL;
  struct srd_mr_ref *ref = calloc(1, sizeof(*ref));
  if (!ref) return -ENOMEM;
  pthread_mutex_lock(&c->lock);
  int rc = acquire_entry(c, addr, len, type, device, dmabuf_fd, dmabuf_offset, &ref->mr);
  if (rc == 0) {
    ref->addr = (uintptr_t)addr;
    ref->len = len;
    ref->next = c->refs;
    if (c->refs) c->refs->prev = ref;
    c->refs = ref;
    *out = ref;
    ref = NULL;
  }
  pthread_mutex_unlock(&c->lock);
  free(ref);
  return rc;
}

int srd_mr_release(struct srd_mr_cache *c, struct srd_mr_ref *ref) {
  pthread_mutex_lock(&c->lock);
  /* Walk the handles we gave out rather than trust ref: a stale or foreign
   * pointer is rejected without being dereferenced. Deregistration is rare. */
  struct srd_mr_ref *r = c->refs;
  while (r && r != ref) r = r->next;
  if (!r) {
    pthread_mutex_unlock(&c->lock);
    return -1;
  }
  if (r->prev) r->prev->next = r->next;
  else c->refs = r->next;
  if (r->next) r->next->prev = r->prev;
  drop_entry(c, r->mr);
  pthread_mutex_unlock(&c->lock);
  free(r);
  return 0;
}
