/* Summary statistics of timing samples: pure functions, unit-tested. */
#ifndef SRD_TOOLS_PERF_STATS_H
#define SRD_TOOLS_PERF_STATS_H

#include <stddef.h>

struct perf_stats {
  size_t n;
  double min, max, avg;
  double p50, p90, p99;
};

/* Percentile p (0..100) of sorted[0..n), interpolating linearly between the
 * two nearest ranks; 0 when n is 0. */
double perf_percentile_sorted(const double *sorted, size_t n, double p);
/* Sorts samples in place and summarises them; all fields 0 when n is 0. */
void perf_stats_compute(double *samples, size_t n, struct perf_stats *out);

#endif
