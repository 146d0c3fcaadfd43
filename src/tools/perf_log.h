/* Messages of the tools themselves (not of a plugin): "srd-perf[client]: ..."
 * on stderr, so two local processes can be told apart. */
#ifndef SRD_TOOLS_PERF_LOG_H
#define SRD_TOOLS_PERF_LOG_H

void perf_log_set_name(const char *name);
void perf_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A finished line for stderr (the plugin's own log lines come here too). */
void perf_log_line(const char *line);
/* Hold lines back until perf_log_release; then print them, or drop them
 * when the peer already explained the same failure. */
void perf_log_hold(void);
void perf_log_release(int print);

#endif
