#include "srd/sched.h"

static size_t div_up(size_t a, size_t b) { return a / b + (a % b != 0); }

static uint64_t paths_below(int n) { return n <= 0 ? 0 : n >= 64 ? ~0ull : (1ull << n) - 1; }

uint64_t srd_sched_paths_for(const struct srd_sched_params *p, size_t size, int inline_paths, uint64_t usable) {
  uint64_t all = paths_below(p->npaths), inl = paths_below(inline_paths) & all;
  uint64_t want = size < p->threshold ? inl : all & ~inl;
  uint64_t m = (usable ? usable : all) & want;
  return m ? m : usable;
}

int srd_sched_pick(int npaths, uint64_t usable, unsigned cursor) {
  int n = 0, paths[64];
  for (int i = 0; i < npaths && i < 64; i++)
    if (usable >> i & 1) paths[n++] = i;
  return n ? paths[cursor % (unsigned)n] : -1;
}

int srd_sched_split(const struct srd_sched_params *p, size_t size, unsigned *cursor, struct srd_stripe *out,
                    int max_out) {
  return srd_sched_split_over(p, size, 0, cursor, out, max_out);
}

int srd_sched_split_over(const struct srd_sched_params *p, size_t size, uint64_t usable, unsigned *cursor,
                         struct srd_stripe *out, int max_out) {
  int all = p->npaths > 0 ? p->npaths : 1, npaths = 0, paths[64];
  for (int i = 0; i < all && i < 64; i++)
    if (!usable || usable >> i & 1) paths[npaths++] = i;
  if (!npaths) return -1;
  size_t max_write = p->max_write ? p->max_write : size;
  size_t min_stripe = p->min_stripe < SRD_STRIPE_ALIGN ? SRD_STRIPE_ALIGN : p->min_stripe;
  size_t want = 1;
  if (size >= p->threshold && npaths > 1) {
    want = size / min_stripe;
    if (want > (size_t)npaths) want = (size_t)npaths;
    if (want > (size_t)max_out) want = (size_t)max_out;
    if (want < 1) want = 1;
  }
  if (max_write && div_up(size, max_write) > want) want = div_up(size, max_write);
  if (want > (size_t)max_out) return -1;
  size_t stripe = div_up(size, want);
  if (want > 1) stripe = div_up(stripe, SRD_STRIPE_ALIGN) * SRD_STRIPE_ALIGN;
  /* Alignment may overshoot the write limit: then take whole aligned units
   * of it instead. */
  if (stripe > max_write) stripe = max_write / SRD_STRIPE_ALIGN * SRD_STRIPE_ALIGN;
  if (!stripe) stripe = size ? size : 1;
  int n = 0;
  unsigned start = *cursor;
  size_t off = 0;
  do {
    if (n == max_out) return -1;
    size_t len = size - off < stripe ? size - off : stripe;
    out[n].path = paths[(start + (unsigned)n) % (unsigned)npaths];
    out[n].offset = off;
    out[n].len = len;
    off += len;
    n++;
  } while (off < size);
  *cursor = start + (unsigned)n;
  return n;
}
