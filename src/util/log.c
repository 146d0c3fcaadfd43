#include "srd/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static _Atomic(ncclDebugLogger_t) nccl_logger;

void srd_log_set_logger(ncclDebugLogger_t logger) { atomic_store(&nccl_logger, logger); }

static int stderr_level(void) {
  const char *v = getenv("NCCL_DEBUG");
  if (!v) return NCCL_LOG_WARN;
  if (!strcasecmp(v, "TRACE")) return NCCL_LOG_TRACE;
  if (!strcasecmp(v, "INFO")) return NCCL_LOG_INFO;
  if (!strcasecmp(v, "NONE")) return NCCL_LOG_NONE;
  return NCCL_LOG_WARN;
}

void srd_log(ncclDebugLogLevel level, unsigned long flags, const char *file, int line, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = snprintf(msg, sizeof(msg), "NET/SRD ");
  vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
  va_end(ap);
  ncclDebugLogger_t logger = atomic_load(&nccl_logger);
  if (logger) {
    logger(level, flags, file, line, "%s", msg);
    return;
  }
  static int max_level = -1;
  if (max_level < 0) max_level = stderr_level();
  if ((int)level > max_level) return;
  fprintf(stderr, "%s %s\n", level == NCCL_LOG_WARN ? "WARN" : "INFO", msg);
}

int srd_log_limit_pass(struct srd_log_limit *l) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  unsigned long long now = (unsigned long long)ts.tv_sec * 1000ull + (unsigned long long)ts.tv_nsec / 1000000ull;
  if (!l->window_start_ms || now - l->window_start_ms >= SRD_LOG_WINDOW_MS) {
    if (l->left_out)
      SRD_WARN("%llu more warnings like the ones above were left out in %d s (rate limit)", l->left_out,
               SRD_LOG_WINDOW_MS / 1000);
    l->window_start_ms = now ? now : 1;
    l->logged = 0;
    l->left_out = 0;
  }
  if (l->logged < SRD_LOG_BURST) {
    l->logged++;
    return 1;
  }
  l->left_out++;
  return 0;
}
