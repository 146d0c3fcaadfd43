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

static void free_refs(struct srd_mr_ref *r) {
  while (r) {
    struct srd_mr_ref *next = r->next;
    free(r);
    r = next;
  }
}

void srd_mr_cache_fini(struct srd_mr_cache *c) {
  free_refs(c->refs);
  free_refs(c->free_head);
  c->refs = c->free_head = c->free_tail = NULL;
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

/* An owned entry (owner != 0: one a peer can reach) serves only its owner
 * and exactly its range: a larger one would hand the owner's peer a key to
 * memory outside the buffer, and another owner's to that owner's peer. */
static struct srd_mr *lookup(const struct srd_mr_cache *c, void *addr, size_t len, int type, int device,
                             unsigned access, uint64_t owner) {
  int i = upper_bound(c, (uintptr_t)addr);
  for (int k = i - 1; k >= 0 && k >= i - LOOKBACK; k--) {
    struct srd_mr *m = c->sorted[k];
    uintptr_t a = (uintptr_t)addr;
    if (m->type != type || m->device != device || m->access != access || m->owner != owner || m->dmabuf) continue;
    if (owner ? a == m->base && len == m->len : a >= m->base && len <= m->len && a - m->base <= m->len - len) return m;
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

static int acquire_entry(struct srd_mr_cache *c, void *addr, size_t len, int type, int device, unsigned access,
                         uint64_t owner, int dmabuf_fd, uint64_t dmabuf_offset, struct srd_mr **out) {
  struct srd_mr *m = dmabuf_fd < 0 ? lookup(c, addr, len, type, device, access, owner) : NULL;
  if (m) {
    m->refs++;
    *out = m;
    return 0;
  }
  int rc = -ENOMEM;
  if (!(m = calloc(1, sizeof(*m)))) goto out;
  uintptr_t start = (uintptr_t)addr, end = start + (len ? len : 1);
  if (dmabuf_fd < 0 && device < 0 && !owner) {
    /* Whole pages when the owner asks for them (page > 1): NCCL's next buffer
     * in the same pages then hits the cache. */
    start &= ~(uintptr_t)(c->page - 1);
    end = (end + c->page - 1) & ~(uintptr_t)(c->page - 1);
  }
  m->base = start;
  m->len = end - start;
  m->type = type;
  m->device = device;
  m->access = access;
  m->owner = owner;
  m->dmabuf = dmabuf_fd >= 0;
  m->refs = 1;
  uint64_t off = dmabuf_offset;
  if ((rc = c->ops.reg(c->ops.arg, (void *)m->base, m->len, type, device, access, dmabuf_fd, off, &m->handle))) goto out;
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

/* A released handle (oldest first, so that a stale one stays dead as long as
 * possible), else a new one. Lock held. */
static struct srd_mr_ref *take_ref(struct srd_mr_cache *c) {
  struct srd_mr_ref *r = c->free_head;
  if (!r) return calloc(1, sizeof(*r));
  c->free_head = r->next;
  if (!c->free_head) c->free_tail = NULL;
  memset(r, 0, sizeof(*r));
  return r;
}

static void keep_ref(struct srd_mr_cache *c, struct srd_mr_ref *r) {
  r->mr = NULL;
  r->alt = NULL;
  r->prev = NULL;
  r->next = NULL;
  if (c->free_tail) c->free_tail->next = r;
  else c->free_head = r;
  c->free_tail = r;
}

int srd_mr_acquire(struct srd_mr_cache *c, void *addr, size_t len, int type, int device, unsigned access,
                   uint64_t owner, int dmabuf_fd, uint64_t dmabuf_offset, struct srd_mr_ref **out) {
  if (!addr && len) return -EINVAL;
  if (len > UINTPTR_MAX - c->page || (uintptr_t)addr > UINTPTR_MAX - len - c->page) return -EINVAL;
  pthread_mutex_lock(&c->lock);
  struct srd_mr_ref *ref = take_ref(c);
  int rc = ref ? acquire_entry(c, addr, len, type, device, access, owner, dmabuf_fd, dmabuf_offset, &ref->mr) : -ENOMEM;
  if (rc == 0) {
    ref->addr = (uintptr_t)addr;
    ref->len = len;
    ref->next = c->refs;
    if (c->refs) c->refs->prev = ref;
    c->refs = ref;
    *out = ref;
  } else if (ref) {
    keep_ref(c, ref);
  }
  pthread_mutex_unlock(&c->lock);
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
  if (r->alt) drop_entry(c, r->alt);
  keep_ref(c, r);
  pthread_mutex_unlock(&c->lock);
  return 0;
}

int srd_mr_entry_for(struct srd_mr_cache *c, struct srd_mr_ref *ref, unsigned access, uint64_t owner,
                     struct srd_mr **out) {
  pthread_mutex_lock(&c->lock);
  int rc = 0;
  if (!ref->mr) rc = -EINVAL;
  else if (ref->mr->access == access) *out = ref->mr;
  else if (ref->alt && ref->alt->access == access) *out = ref->alt;
  else if (ref->alt || ref->mr->dmabuf) rc = -ENOTSUP; /* a third class, or no fd to register again */
  else if (!(rc = acquire_entry(c, (void *)ref->addr, ref->len, ref->mr->type, ref->mr->device, access, owner, -1, 0,
                                &ref->alt)))
    *out = ref->alt;
  pthread_mutex_unlock(&c->lock);
  return rc;
}
