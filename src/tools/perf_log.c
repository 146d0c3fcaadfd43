#include "perf_log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static char who[64] = "srd-perf";
static int holding;
static char held[8192];
static size_t held_len;

void perf_log_set_name(const char *name) { snprintf(who, sizeof(who), "%s", name); }

void perf_log_line(const char *line) {
  if (!holding) {
    fprintf(stderr, "%s\n", line);
    return;
  }
  size_t len = strlen(line);
  if (held_len + len + 2 > sizeof(held)) return; /* the first lines say what went wrong */
  memcpy(held + held_len, line, len);
  held_len += len;
  held[held_len++] = '\n';
  held[held_len] = 0;
}

void perf_log_hold(void) { holding = 1; }

void perf_log_release(int print) {
  if (print && held_len) fputs(held, stderr);
  holding = 0;
  held_len = 0;
}

void perf_error(const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  char line[1200];
  snprintf(line, sizeof(line), "%s: error: %s", who, msg);
  perf_log_line(line);
}
