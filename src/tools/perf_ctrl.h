/* srd-perf's out-of-band channel between its two processes: handles, option
 * agreement, barriers and results travel over a socketpair (local run) or a
 * TCP connection (--server/--client). Every wait is bounded. */
#ifndef SRD_TOOLS_PERF_CTRL_H
#define SRD_TOOLS_PERF_CTRL_H

#include <stddef.h>

/* --server: wait up to timeout_s for one client on port; returns the fd or -1. */
int perf_ctrl_serve(int port, int timeout_s);
/* --client: connect to host:port, retrying until timeout_s; fd or -1. */
int perf_ctrl_connect(const char *host, int port, int timeout_s);
/* Exactly len bytes, or -1 with an error naming what: the peer closed the
 * channel, or was silent for timeout_s. */
int perf_ctrl_send(int fd, const void *buf, size_t len, int timeout_s, const char *what);
int perf_ctrl_recv(int fd, void *buf, size_t len, int timeout_s, const char *what);
/* Both sides meet; -1 when the peer is gone or silent. */
int perf_ctrl_barrier(int fd, int timeout_s, const char *what);
/* Non-blocking: 1 when the peer has closed its end (it exited or crashed). */
int perf_ctrl_peer_gone(int fd);
/* Non-blocking: 1 when a receive would not block (a message, or the peer gone). */
int perf_ctrl_pending(int fd);

#endif
