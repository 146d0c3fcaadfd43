#include "perf_ctrl.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "perf_log.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Wait for events on fd until the deadline; 1 ready, 0 timed out, -1 error. */
static int wait_fd(int fd, short events, double deadline) {
  for (;;) {
    double left = deadline - now_s();
    if (left <= 0) return 0;
    struct pollfd p = {.fd = fd, .events = events};
    int rc = poll(&p, 1, (int)(left * 1000) + 1);
    if (rc > 0) return 1;
    if (rc < 0 && errno != EINTR) return -1;
  }
}

static void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int perf_ctrl_serve(int port, int timeout_s) {
  int fd = socket(AF_INET6, SOCK_STREAM, 0);
  int v6 = fd >= 0;
  if (!v6) fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    perf_error("socket: %s", strerror(errno));
    return -1;
  }
  int one = 1, zero = 0;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  int rc;
  if (v6) {
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port), .sin6_addr = in6addr_any};
    rc = bind(fd, (struct sockaddr *)&a, sizeof(a));
  } else {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = INADDR_ANY};
    rc = bind(fd, (struct sockaddr *)&a, sizeof(a));
  }
  if (rc || listen(fd, 1)) {
    perf_error("cannot listen on port %d: %s (another srd-perf --server? use --port)", port, strerror(errno));
    close(fd);
    return -1;
  }
  fprintf(stderr, "srd-perf: server waiting on port %d for a --client (up to %d s)\n", port, timeout_s);
  int ready = wait_fd(fd, POLLIN, now_s() + timeout_s);
  int conn = ready > 0 ? accept(fd, NULL, NULL) : -1;
  if (conn < 0) perf_error("no client connected to port %d within %d s", port, timeout_s);
  else set_nodelay(conn);
  close(fd);
  return conn;
}

int perf_ctrl_connect(const char *host, int port, int timeout_s) {
  char service[16];
  snprintf(service, sizeof(service), "%d", port);
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
  int rc = getaddrinfo(host, service, &hints, &res);
  if (rc) {
    perf_error("cannot resolve %s: %s", host, gai_strerror(rc));
    return -1;
  }
  double deadline = now_s() + timeout_s;
  int last_errno = 0;
  /* The server may start a moment later: retry refused connections. */
  while (now_s() < deadline) {
    for (struct addrinfo *a = res; a; a = a->ai_next) {
      int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
      if (fd < 0) continue;
      if (!connect(fd, a->ai_addr, a->ai_addrlen)) {
        freeaddrinfo(res);
        set_nodelay(fd);
        return fd;
      }
      last_errno = errno;
      close(fd);
    }
    usleep(200 * 1000);
  }
  freeaddrinfo(res);
  perf_error("no srd-perf --server answered at %s port %d within %d s (%s)", host, port, timeout_s,
             last_errno ? strerror(last_errno) : "timeout");
  return -1;
}

int perf_ctrl_send(int fd, const void *buf, size_t len, int timeout_s, const char *what) {
  const char *p = buf;
  double deadline = now_s() + timeout_s;
  while (len) {
    int ready = wait_fd(fd, POLLOUT, deadline);
    if (ready <= 0) {
      perf_error("peer did not take %s within %d s", what, timeout_s);
      return -1;
    }
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) {
      perf_error("peer closed the connection while sending %s (%s)", what, n < 0 ? strerror(errno) : "EOF");
      return -1;
    }
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

int perf_ctrl_recv(int fd, void *buf, size_t len, int timeout_s, const char *what) {
  char *p = buf;
  double deadline = now_s() + timeout_s;
  while (len) {
    int ready = wait_fd(fd, POLLIN, deadline);
    if (ready <= 0) {
      perf_error("peer did not send %s within %d s", what, timeout_s);
      return -1;
    }
    ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) {
      perf_error("peer closed the connection before sending %s (it exited or failed)", what);
      return -1;
    }
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

int perf_ctrl_barrier(int fd, int timeout_s, const char *what) {
  char token = 'b';
  if (perf_ctrl_send(fd, &token, 1, timeout_s, what) || perf_ctrl_recv(fd, &token, 1, timeout_s, what)) return -1;
  if (token != 'b') {
    perf_error("out of step with the peer at %s", what);
    return -1;
  }
  return 0;
}

int perf_ctrl_peer_gone(int fd) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  if (poll(&p, 1, 0) <= 0) return 0;
  if (p.revents & (POLLHUP | POLLERR)) return 1;
  char c;
  ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0;
}

int perf_ctrl_pending(int fd) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR));
}
