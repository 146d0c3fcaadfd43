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

#endif
