/* srd-perf output: an aligned table streamed as sizes finish, or one JSON
 * document at the end (--json). */
#ifndef SRD_TOOLS_PERF_REPORT_H
#define SRD_TOOLS_PERF_REPORT_H

#include <stdio.h>

#include "perf_args.h"
#include "perf_bench.h"
#include "perf_transport.h"

void perf_report_header(FILE *out, const struct perf_transport *t, const struct perf_opts *o);
void perf_report_row(FILE *out, const struct perf_result *r, const struct perf_opts *o);
/* The runs of one size (runs[0..n), n >= 1) as one result: each metric from
 * its median run (the lower middle of an even count), with the runs' min and
 * max. runs is reordered. */
void perf_results_combine(struct perf_result *runs, int n, struct perf_result *out);
/* After the single table of a run with --runs > 1: a warning naming the sizes
 * whose runs were more than 20% apart (the table shows only medians). */
void perf_report_footer(FILE *out, const struct perf_opts *o, const struct perf_result *results, size_t n);
/* One finished sweep, kept for the side-by-side table. */
struct perf_side {
  char description[512], device[512], provider[64];
  struct perf_result *results;
  size_t n;
};

/* The default run: our plugin and raw libfabric on the same provider and
 * NICs (the ceiling) at the same sizes, with plugin/raw ratios. */
void perf_report_compare(FILE *out, const struct perf_opts *o, const struct perf_side *plugin,
                         const struct perf_side *raw);
/* Returns 0 when the document was well formed. */
int perf_report_json(FILE *out, const struct perf_transport *t, const struct perf_opts *o,
                     const struct perf_result *results, size_t n);

#endif
