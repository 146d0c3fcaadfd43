#include "perf_report.h"

#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "json_writer.h"

static const char *memory_kind(const struct perf_opts *o) { return o->cuda ? "GPU" : "host"; }

/* --rma: what the columns mean for the op (doc/tools.md, "One-sided RMA"). */
static void rma_line(FILE *out, const struct perf_opts *o) {
  fprintf(out, "# one-sided %s, window %d, host memory, data checked at every size; latency: %s; bw: %s\n",
          o->rma == PERF_RMA_PUTSIG ? "put+signal" : perf_rma_op_name(o->rma), o->window,
          o->rma == PERF_RMA_PUTSIG ? "half the round trip of a put+signal ping-pong, each side waiting for its signal"
                                    : "post to completion at the initiator",
          o->rma == PERF_RMA_PUTSIG ? "until the target saw every signal" : "until every op completed at the initiator");
}

void perf_report_header(FILE *out, const struct perf_transport *t, const struct perf_opts *o) {
  fprintf(out, "# srd-perf %s: %s\n", PACKAGE_VERSION, t->description);
  fprintf(out, "# %s, provider %s\n", t->device, t->provider[0] ? t->provider : "unknown (not our plugin)");
  if (o->rma)
    rma_line(out, o);
  else
    fprintf(out, "# %d comm%s, window %d, group %d, %s memory%s; latency is half the round trip\n", o->comms,
            o->comms == 1 ? "" : "s", o->window, o->group, memory_kind(o), o->check ? ", data checked" : "");
  fprintf(out, "# latency: lower is better; bandwidth and message rate: higher is better%s\n",
          o->runs > 1 ? "; each row is the median of the runs" : "");
  fprintf(out, "%12s %7s", "size", "iters");
  if (o->tests & PERF_TEST_LAT) fprintf(out, " %11s %11s %11s", "lat_p50_us", "lat_avg_us", "lat_p99_us");
  if (o->tests & PERF_TEST_BW) fprintf(out, " %10s %12s", "bw_GB/s", "msg_rate_M/s");
  if (o->tests & PERF_TEST_BIBW) fprintf(out, " %10s", "bibw_GB/s");
  fputc('\n', out);
  fflush(out);
}

void perf_report_row(FILE *out, const struct perf_result *r, const struct perf_opts *o) {
  char size[32];
  perf_format_size(r->size, size, sizeof(size));
  fprintf(out, "%12s %7d", size, r->iters);
  if (o->tests & PERF_TEST_LAT) fprintf(out, " %11.2f %11.2f %11.2f", r->lat_us.p50, r->lat_us.avg, r->lat_us.p99);
  if (o->tests & PERF_TEST_BW) fprintf(out, " %10.3f %12.4f", r->bw_GBps, r->bw_msg_rate / 1e6);
  if (o->tests & PERF_TEST_BIBW) fprintf(out, " %10.3f", r->bibw_GBps);
  fputc('\n', out);
  fflush(out);
}

static double ratio(double plugin, double raw) { return raw > 0 ? plugin / raw : 0.0; }

static int by_lat(const void *a, const void *b) {
  double x = ((const struct perf_result *)a)->lat_us.p50, y = ((const struct perf_result *)b)->lat_us.p50;
  return (x > y) - (x < y);
}
static int by_bw(const void *a, const void *b) {
  double x = ((const struct perf_result *)a)->bw_GBps, y = ((const struct perf_result *)b)->bw_GBps;
  return (x > y) - (x < y);
}
static int by_bibw(const void *a, const void *b) {
  double x = ((const struct perf_result *)a)->bibw_GBps, y = ((const struct perf_result *)b)->bibw_GBps;
  return (x > y) - (x < y);
}

void perf_results_combine(struct perf_result *runs, int n, struct perf_result *out) {
  const int mid = (n - 1) / 2;
  qsort(runs, (size_t)n, sizeof(*runs), by_lat);
  *out = runs[mid];
  out->lat_p50_min = runs[0].lat_us.p50, out->lat_p50_max = runs[n - 1].lat_us.p50;
  qsort(runs, (size_t)n, sizeof(*runs), by_bw);
  out->bw_GBps = runs[mid].bw_GBps, out->bw_msg_rate = runs[mid].bw_msg_rate;
  out->bw_min = runs[0].bw_GBps, out->bw_max = runs[n - 1].bw_GBps;
  qsort(runs, (size_t)n, sizeof(*runs), by_bibw);
  out->bibw_GBps = runs[mid].bibw_GBps, out->bibw_msg_rate = runs[mid].bibw_msg_rate;
  out->bibw_min = runs[0].bibw_GBps, out->bibw_max = runs[n - 1].bibw_GBps;
  out->runs = n;
}

/* Runs that differ by more than this fraction of their median are called
 * unreliable: on a busy 2-core host three runs differed by 2x. */
#define PERF_DISAGREE 0.20
/* The plugin counts as beating raw only beyond raw's best run by this much. */
#define PERF_BEATEN 0.05

struct cell_counts {
  int disagree, beaten;
};

/* One metric of one size: plugin and raw medians with their spreads, the
 * ratio, and its marks: '!' where either side's runs disagree, '^' where the
 * plugin beat raw's best run (lower_better: latency). */
static void cell(FILE *out, double p, double pmin, double pmax, double r, double rmin, double rmax,
                 int lower_better, struct cell_counts *c) {
  char ps[48], rs[48], q[24], mark[3] = "";
  int m = 0;
  if ((p > 0 && (pmax - pmin) > PERF_DISAGREE * p) || (r > 0 && (rmax - rmin) > PERF_DISAGREE * r)) {
    mark[m++] = '!';
    c->disagree++;
  }
  if (lower_better ? p < rmin * (1 - PERF_BEATEN) : p > rmax * (1 + PERF_BEATEN)) {
    mark[m++] = '^';
    c->beaten++;
  }
  mark[m] = 0;
  /* Latency in us with 2 decimals; bandwidth in GB/s with 4 (8 B moves
   * well under 0.01 GB/s). */
  const int d = lower_better ? 2 : 4;
  snprintf(ps, sizeof(ps), "%.*f-%.*f", d, pmin, d, pmax);
  snprintf(rs, sizeof(rs), "%.*f-%.*f", d, rmin, d, rmax);
  snprintf(q, sizeof(q), "%.2f%s", ratio(p, r), mark);
  fprintf(out, " %9.*f %15s %9.*f %15s %7s", d, p, ps, d, r, rs, q);
}

static int apart(double median, double lo, double hi) { return median > 0 && hi - lo > PERF_DISAGREE * median; }

void perf_report_footer(FILE *out, const struct perf_opts *o, const struct perf_result *results, size_t n) {
  if (o->runs < 2) return;
  char sizes[512] = "", size[32];
  int bad = 0;
  size_t used = 0;
  for (size_t i = 0; i < n; i++) {
    const struct perf_result *r = &results[i];
    if (!apart(r->lat_us.p50, r->lat_p50_min, r->lat_p50_max) && !apart(r->bw_GBps, r->bw_min, r->bw_max) &&
        !apart(r->bibw_GBps, r->bibw_min, r->bibw_max))
      continue;
    perf_format_size(r->size, size, sizeof(size));
    if (used < sizeof(sizes)) used += (size_t)snprintf(sizes + used, sizeof(sizes) - used, "%s%s", bad ? ", " : "", size);
    bad++;
  }
  if (bad)
    fprintf(out, "# WARNING: at %d size(s) (%s) the %d runs were more than %d%% apart: this host was busy or its "
                 "clock moved; rerun on an idle host before reading those rows\n",
            bad, sizes, o->runs, (int)(PERF_DISAGREE * 100));
  fflush(out);
}

static void column_head(FILE *out, const char *metric) {
  fprintf(out, " %9s %15s %9s %15s %7s", metric, "runs", "raw", "runs", "ratio");
}

void perf_report_compare(FILE *out, const struct perf_opts *o, const struct perf_side *plugin,
                         const struct perf_side *raw) {
  fprintf(out, "# srd-perf %s: %s\n#   against %s, the baseline\n", PACKAGE_VERSION, plugin->description,
          raw->description);
  if (strcmp(plugin->provider, raw->provider))
    fprintf(out, "# provider %s (plugin), %s (raw)\n", plugin->provider[0] ? plugin->provider : "unknown",
            raw->provider);
  else
    fprintf(out, "# provider %s\n", raw->provider);
  fprintf(out, "# plugin %s; raw %s\n", plugin->device, raw->device);
  if (o->rma)
    rma_line(out, o);
  else
    fprintf(out, "# %d comm%s, window %d, group %d, %s memory%s; latency: p50 of half the round trip\n", o->comms,
            o->comms == 1 ? "" : "s", o->window, o->group, memory_kind(o), o->check ? ", data checked" : "");
  fprintf(out, "# each value: the median of %d run%s, then the runs' min-max; ratio = plugin / raw\n", o->runs,
          o->runs == 1 ? "" : "s");
  fprintf(out, "# lat_us: lower is better (ratio < 1: plugin faster); bw: higher is better (ratio > 1: plugin faster)\n");
  fprintf(out, "%12s", "size");
  if (o->tests & PERF_TEST_LAT) column_head(out, "lat_us");
  if (o->tests & PERF_TEST_BW) column_head(out, "bw_GB/s");
  if (o->tests & PERF_TEST_BIBW) column_head(out, "bibw_GB/s");
  fputc('\n', out);
  struct cell_counts c = {0, 0};
  for (size_t i = 0; i < plugin->n && i < raw->n; i++) {
    const struct perf_result *p = &plugin->results[i], *r = &raw->results[i];
    char size[32];
    perf_format_size(p->size, size, sizeof(size));
    fprintf(out, "%12s", size);
    if (o->tests & PERF_TEST_LAT)
      cell(out, p->lat_us.p50, p->lat_p50_min, p->lat_p50_max, r->lat_us.p50, r->lat_p50_min, r->lat_p50_max, 1, &c);
    if (o->tests & PERF_TEST_BW)
      cell(out, p->bw_GBps, p->bw_min, p->bw_max, r->bw_GBps, r->bw_min, r->bw_max, 0, &c);
    if (o->tests & PERF_TEST_BIBW)
      cell(out, p->bibw_GBps, p->bibw_min, p->bibw_max, r->bibw_GBps, r->bibw_min, r->bibw_max, 0, &c);
    fputc('\n', out);
  }
  if (o->runs == 1)
    fprintf(out, "# one run per size: nothing shows whether the numbers settled (--runs 3 does)\n");
  if (c.disagree)
    fprintf(out, "# WARNING: %d value(s) marked ! come from runs more than %d%% apart: something else on this "
                 "host took CPU or the clock moved, so those medians and ratios can be off by as much; rerun on "
                 "an idle host (--pin, more --runs) before reading them\n",
            c.disagree, (int)(PERF_DISAGREE * 100));
  if (c.beaten)
    fprintf(out, "# NOTE: %d value(s) marked ^ beat raw's best run: raw is one plain way to drive libfabric, not "
                 "a ceiling; where the plugin beats it, its way (eager size, lanes, threads) suits that size "
                 "better, or (with !) noise decided\n",
            c.beaten);
  fflush(out);
}

int perf_report_json(FILE *out, const struct perf_transport *t, const struct perf_opts *o,
                     const struct perf_result *results, size_t n) {
  struct json_writer w;
  json_init(&w, out);
  json_begin_object(&w, NULL);
  json_string(&w, "tool", "srd-perf");
  json_string(&w, "version", PACKAGE_VERSION);
  json_string(&w, "transport", t->kind);
  json_string(&w, "description", t->description);
  json_string(&w, "device", t->device);
  json_string(&w, "provider", t->provider[0] ? t->provider : NULL);
  if (t->net_version) json_int(&w, "net_version", t->net_version);
  json_int(&w, "comms", o->comms);
  json_int(&w, "window", o->window);
  json_int(&w, "group", o->group);
  json_bool(&w, "check", o->check);
  json_string(&w, "memory", o->cuda ? "gpu" : "host");
  if (o->rma) json_string(&w, "rma", perf_rma_op_name(o->rma));
  json_int(&w, "runs", o->runs);
  json_begin_array(&w, "results");
  for (size_t i = 0; i < n; i++) {
    const struct perf_result *r = &results[i];
    json_begin_object(&w, NULL);
    json_uint(&w, "size", r->size);
    json_int(&w, "iters", r->iters);
    json_int(&w, "warmup", r->warmup);
    if (r->have_lat) {
      json_begin_object(&w, "latency_us");
      json_double(&w, "p50", r->lat_us.p50);
      json_double(&w, "avg", r->lat_us.avg);
      json_double(&w, "min", r->lat_us.min);
      json_double(&w, "p90", r->lat_us.p90);
      json_double(&w, "p99", r->lat_us.p99);
      json_double(&w, "max", r->lat_us.max);
      json_end_object(&w);
    }
    if (r->have_bw) {
      json_double(&w, "bw_GBps", r->bw_GBps);
      json_double(&w, "msg_rate", r->bw_msg_rate);
    }
    if (r->have_bibw) {
      json_double(&w, "bibw_GBps", r->bibw_GBps);
      json_double(&w, "bibw_msg_rate", r->bibw_msg_rate);
    }
    /* The runs' spread beside the median run's values above (added keys:
     * readers of the older document find what they read before). */
    json_begin_object(&w, "runs_spread");
    if (r->have_lat) {
      json_double(&w, "lat_p50_us_min", r->lat_p50_min);
      json_double(&w, "lat_p50_us_max", r->lat_p50_max);
    }
    if (r->have_bw) {
      json_double(&w, "bw_GBps_min", r->bw_min);
      json_double(&w, "bw_GBps_max", r->bw_max);
    }
    if (r->have_bibw) {
      json_double(&w, "bibw_GBps_min", r->bibw_min);
      json_double(&w, "bibw_GBps_max", r->bibw_max);
    }
    json_end_object(&w);
    json_end_object(&w);
  }
  json_end_array(&w);
  json_end_object(&w);
  return json_finish(&w);
}
