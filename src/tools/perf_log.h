/* Messages of the tools themselves (not of a plugin): "srd-perf[client]: ..."
 * on stderr, so two local processes can be told apart. */
#ifndef SRD_TOOLS_PERF_LOG_H
#define SRD_TOOLS_PERF_LOG_H

void perf_log_set_name(const char *name);
void perf_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
