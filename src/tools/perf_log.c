#include "perf_log.h"

#include <stdarg.h>
#include <stdio.h>

static char who[64] = "srd-perf";

void perf_log_set_name(const char *name) { snprintf(who, sizeof(who), "%s", name); }

void perf_error(const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  fprintf(stderr, "%s: error: %s\n", who, msg);
}
