/* Logging through NCCL's logger when we have one, else to stderr (tools, tests).
 * Every message carries the "NET/SRD" prefix. */
#ifndef SRD_LOG_H
#define SRD_LOG_H

#include "nccl/types.h"

void srd_log_set_logger(ncclDebugLogger_t logger);
/* The stderr fallback prints WARN always and INFO/TRACE when NCCL_DEBUG asks. */
void srd_log(ncclDebugLogLevel level, unsigned long flags, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#define SRD_WARN(...) srd_log(NCCL_LOG_WARN, NCCL_ALL, __FILE__, __LINE__, __VA_ARGS__)
#define SRD_INFO(flags, ...) srd_log(NCCL_LOG_INFO, (flags), __FILE__, __LINE__, __VA_ARGS__)
#define SRD_TRACE(flags, ...) srd_log(NCCL_LOG_TRACE, (flags), __FILE__, __LINE__, __VA_ARGS__)

/* Warnings a stranger or a peer can cause at will (forged, malformed or
 * foreign messages): one limiter lets SRD_LOG_BURST of them through per
 * SRD_LOG_WINDOW_MS and, when the next window opens, logs how many it left
 * out. Its owner serializes the calls (a device's limiter: under its lock). */
#define SRD_LOG_BURST 10
#define SRD_LOG_WINDOW_MS 10000
struct srd_log_limit {
  unsigned long long window_start_ms;
  unsigned logged;
  unsigned long long left_out;
};
/* Nonzero: log this one. */
int srd_log_limit_pass(struct srd_log_limit *l);
#define SRD_WARN_LIMITED(limit, ...)                      \
  do {                                                    \
    if (srd_log_limit_pass(limit)) SRD_WARN(__VA_ARGS__); \
  } while (0)

#endif
