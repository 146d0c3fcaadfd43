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
/* Returns 0 when the document was well formed. */
int perf_report_json(FILE *out, const struct perf_transport *t, const struct perf_opts *o,
                     const struct perf_result *results, size_t n);

#endif
