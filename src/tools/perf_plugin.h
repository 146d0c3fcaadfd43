/* Loading an ncclNet plugin library and logging for it, shared by the
 * two-sided (perf_plugin.c) and one-sided (perf_rma_plugin.c) transports. */
#ifndef SRD_TOOLS_PERF_PLUGIN_H
#define SRD_TOOLS_PERF_PLUGIN_H

#include <stddef.h>

#include "nccl/types.h"

/* dlopen path, or ours when path is "" (its path into found); NULL after
 * printing why. The library stays loaded for the process: plugins may keep
 * threads or atexit handlers. */
void *perf_plugin_load(const char *path, char *found, size_t found_len);
/* NCCL's logger for a plugin: WARN always, INFO and TRACE by NCCL_DEBUG. */
__attribute__((format(printf, 5, 6))) void perf_plugin_logger(ncclDebugLogLevel level, unsigned long flags,
                                                             const char *file, int line, const char *fmt, ...);

#endif
