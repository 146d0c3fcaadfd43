#include "perf_stats.h"

#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double perf_percentile_sorted(const double *sorted, size_t n, double p) {
  if (n == 0) return 0;
  if (p <= 0) return sorted[0];
  if (p >= 100) return sorted[n - 1];
  double pos = p / 100.0 * (double)(n - 1);
  size_t lo = (size_t)pos;
  double frac = pos - (double)lo;
  if (lo + 1 >= n) return sorted[n - 1];
  return sorted[lo] + (sorted[lo + 1] - sorted[lo]) * frac;
}

void perf_stats_compute(double *samples, size_t n, struct perf_stats *out) {
  memset(out, 0, sizeof(*out));
  if (n == 0) return;
  qsort(samples, n, sizeof(*samples), cmp_double);
  double sum = 0;
  for (size_t i = 0; i < n; i++) sum += samples[i];
  out->n = n;
  out->min = samples[0];
  out->max = samples[n - 1];
  out->avg = sum / (double)n;
  out->p50 = perf_percentile_sorted(samples, n, 50);
  out->p90 = perf_percentile_sorted(samples, n, 90);
  out->p99 = perf_percentile_sorted(samples, n, 99);
}
