/* A rail's inserted peer addresses, found by name (an insert of a name the AV
 * already holds) and by fi_addr (a comm's removal) in O(1): at thousands of
 * peers a scan per connect and per close was quadratic. Two open-addressing
 * tables of entry indexes, linear probing, deletion by backward shift (no
 * tombstones to pile up as peers come and go); at most half full. */
#include "srd/rail.h"

#include <rdma/fi_errno.h>
#include <stdlib.h>
#include <string.h>

#define FIRST_CAP 32

static unsigned hash_name(const void *name, size_t len) {
  const unsigned char *p = name;
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (size_t i = 0; i < len; i++) h = (h ^ p[i]) * 1099511628211ull;
  return (unsigned)(h ^ h >> 32);
}

static unsigned hash_addr(fi_addr_t a) {
  uint64_t h = (uint64_t)a * 0x9e3779b97f4a7c15ull;
  return (unsigned)(h >> 32);
}

static unsigned home(const struct srd_av_index *x, const int *table, int i) {
  const struct srd_av_entry *e = &x->e[i];
  return (table == x->by_name ? hash_name(e->name, x->name_len) : hash_addr(e->addr)) & x->mask;
}

static void table_put(const struct srd_av_index *x, int *table, int i) {
  unsigned b = home(x, table, i);
  while (table[b] >= 0) b = (b + 1) & x->mask;
  table[b] = i;
}

/* Remove entry i; the entries after it in its run move back to where a probe
 * from their home finds them. */
static void table_del(const struct srd_av_index *x, int *table, int i) {
  unsigned b = home(x, table, i);
  while (table[b] != i) b = (b + 1) & x->mask;
  unsigned hole = b;
  for (unsigned n = (hole + 1) & x->mask; table[n] >= 0; n = (n + 1) & x->mask) {
    unsigned h = home(x, table, table[n]);
    /* n's entry may fill the hole unless its home lies cyclically in (hole, n]. */
    if (((n - h) & x->mask) >= ((n - hole) & x->mask)) {
      table[hole] = table[n];
      hole = n;
    }
  }
  table[hole] = -1;
}

static int grow(struct srd_av_index *x) {
  int cap = x->cap ? 2 * x->cap : FIRST_CAP;
  unsigned buckets = 2u * (unsigned)cap;
  struct srd_av_entry *e = realloc(x->e, (size_t)cap * sizeof(*e));
  if (!e) return -FI_ENOMEM;
  x->e = e;
  int *by_name = malloc(buckets * sizeof(int)), *by_addr = malloc(buckets * sizeof(int));
  if (!by_name || !by_addr) {
    free(by_name);
    free(by_addr);
    return -FI_ENOMEM;
  }
  memset(by_name, 0xff, buckets * sizeof(int));
  memset(by_addr, 0xff, buckets * sizeof(int));
  free(x->by_name);
  free(x->by_addr);
  x->by_name = by_name;
  x->by_addr = by_addr;
  x->mask = buckets - 1;
  for (int i = 0; i < x->cap; i++)
    if (e[i].refs) {
      table_put(x, by_name, i);
      table_put(x, by_addr, i);
    }
  /* Every old entry is in use: the free chain is the new ones, in order. */
  for (int i = x->cap; i < cap; i++) {
    e[i].refs = 0;
    e[i].next_free = i + 1 < cap ? i + 1 : -1;
  }
  x->free_head = x->cap;
  x->cap = cap;
  return 0;
}

void srd_av_index_init(struct srd_av_index *x, size_t name_len) {
  memset(x, 0, sizeof(*x));
  x->name_len = name_len;
  x->free_head = -1;
}

void srd_av_index_free(struct srd_av_index *x) {
  free(x->e);
  free(x->by_name);
  free(x->by_addr);
  srd_av_index_init(x, x->name_len);
}

int srd_av_index_find_name(const struct srd_av_index *x, const void *name) {
  if (!x->cap) return -1;
  for (unsigned b = hash_name(name, x->name_len) & x->mask; x->by_name[b] >= 0; b = (b + 1) & x->mask)
    if (!memcmp(x->e[x->by_name[b]].name, name, x->name_len)) return x->by_name[b];
  return -1;
}

int srd_av_index_find_addr(const struct srd_av_index *x, fi_addr_t addr) {
  if (!x->cap) return -1;
  for (unsigned b = hash_addr(addr) & x->mask; x->by_addr[b] >= 0; b = (b + 1) & x->mask)
    if (x->e[x->by_addr[b]].addr == addr) return x->by_addr[b];
  return -1;
}

int srd_av_index_add(struct srd_av_index *x, const void *name, fi_addr_t addr) {
  if (x->used == x->cap) {
    int rc = grow(x);
    if (rc) return rc;
  }
  int i = x->free_head;
  struct srd_av_entry *e = &x->e[i];
  x->free_head = e->next_free;
  memcpy(e->name, name, x->name_len);
  e->addr = addr;
  e->refs = 1;
  e->kept = false;
  table_put(x, x->by_name, i);
  table_put(x, x->by_addr, i);
  x->used++;
  return i;
}

void srd_av_index_del(struct srd_av_index *x, int i) {
  table_del(x, x->by_name, i);
  table_del(x, x->by_addr, i);
  x->e[i].refs = 0;
  x->e[i].next_free = x->free_head;
  x->free_head = i;
  x->used--;
}
