#include "perf_report.h"

#include <string.h>

#include "config.h"
#include "json_writer.h"

static const char *memory_kind(const struct perf_opts *o) { return o->cuda ? "GPU" : "host"; }

/* --rma: what the columns mean for the op (README, srd-perf). */
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
  if (o->rma) {
    rma_line(out, o);
    fprintf(out, "# latency: p50; ratio = plugin / raw\n");
  } else {
    fprintf(out, "# %d comm%s, window %d, group %d, %s memory%s; latency: p50 of half the round trip;"
                 " ratio = plugin / raw\n",
            o->comms, o->comms == 1 ? "" : "s", o->window, o->group, memory_kind(o), o->check ? ", data checked" : "");
  }
  fprintf(out, "%12s", "size");
  if (o->tests & PERF_TEST_LAT) fprintf(out, " %14s %9s %6s", "lat_us:plugin", "raw", "ratio");
  if (o->tests & PERF_TEST_BW) fprintf(out, " %15s %9s %6s", "bw_GB/s:plugin", "raw", "ratio");
  if (o->tests & PERF_TEST_BIBW) fprintf(out, " %17s %9s %6s", "bibw_GB/s:plugin", "raw", "ratio");
  fputc('\n', out);
  for (size_t i = 0; i < plugin->n && i < raw->n; i++) {
    const struct perf_result *p = &plugin->results[i], *r = &raw->results[i];
    char size[32];
    perf_format_size(p->size, size, sizeof(size));
    fprintf(out, "%12s", size);
    if (o->tests & PERF_TEST_LAT)
      fprintf(out, " %14.2f %9.2f %6.2f", p->lat_us.p50, r->lat_us.p50, ratio(p->lat_us.p50, r->lat_us.p50));
    if (o->tests & PERF_TEST_BW)
      fprintf(out, " %15.4f %9.4f %6.2f", p->bw_GBps, r->bw_GBps, ratio(p->bw_GBps, r->bw_GBps));
    if (o->tests & PERF_TEST_BIBW)
      fprintf(out, " %17.4f %9.4f %6.2f", p->bibw_GBps, r->bibw_GBps, ratio(p->bibw_GBps, r->bibw_GBps));
    fputc('\n', out);
  }
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
    json_end_object(&w);
  }
  json_end_array(&w);
  json_end_object(&w);
  return json_finish(&w);
}
