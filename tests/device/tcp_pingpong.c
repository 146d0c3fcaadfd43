/* The floor under every transport here: a ping-pong over one loopback TCP
 * connection with plain socket calls (TCP_NODELAY, non-blocking receives
 * polled in a loop, as NCCL's Socket transport and our plugin both poll).
 * Prints, per size, the p50 and p90 of half the round trip in microseconds.
 * Built and run on the device machine by tests/device/floor.sh:
 *
 *   tcp_pingpong [ITERS] [SIZES...]      e.g. tcp_pingpong 20000 8 512 8192 131072
 *
 * The server is a forked child; each side may be pinned with taskset. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what) {
  perror(what);
  exit(1);
}

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static void send_all(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t k = send(fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (k < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (k <= 0) die("send");
    p += k;
    n -= (size_t)k;
  }
}

static void recv_all(int fd, char *p, size_t n) {
  while (n) {
    ssize_t k = recv(fd, p, n, MSG_DONTWAIT);
    if (k < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (k <= 0) die("recv");
    p += k;
    n -= (size_t)k;
  }
}

static void nodelay(int fd) {
  int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one))) die("TCP_NODELAY");
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 20000;
  size_t sizes[32] = {8, 512, 8192, 32768, 131072};
  int nsizes = 5;
  if (argc > 2) {
    nsizes = 0;
    for (int i = 2; i < argc && nsizes < 32; i++) sizes[nsizes++] = strtoul(argv[i], NULL, 0);
  }
  if (iters < 1) iters = 1;
  size_t max = 0;
  for (int i = 0; i < nsizes; i++) max = sizes[i] > max ? sizes[i] : max;

  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t alen = sizeof(a);
  if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 1) ||
      getsockname(lfd, (struct sockaddr *)&a, &alen))
    die("listen");
  char *buf = malloc(max);
  if (!buf) die("malloc");
  memset(buf, 1, max);
  pid_t child = fork();
  if (child < 0) die("fork");
  if (child == 0) { /* server: echo every message back */
    int fd = accept(lfd, NULL, NULL);
    if (fd < 0) die("accept");
    nodelay(fd);
    for (int s = 0; s < nsizes; s++)
      for (int i = 0; i < iters + iters / 10; i++) {
        recv_all(fd, buf, sizes[s]);
        send_all(fd, buf, sizes[s]);
      }
    _exit(0);
  }
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a))) die("connect");
  nodelay(fd);
  double *t = malloc(sizeof(double) * (size_t)iters);
  if (!t) die("malloc");
  printf("# loopback TCP ping-pong, %d iterations per size after %d warm-up; half the round trip (us)\n", iters,
         iters / 10);
  printf("%10s %10s %10s\n", "bytes", "p50", "p90");
  for (int s = 0; s < nsizes; s++) {
    for (int i = 0; i < iters + iters / 10; i++) {
      double t0 = now_us();
      send_all(fd, buf, sizes[s]);
      recv_all(fd, buf, sizes[s]);
      if (i >= iters / 10) t[i - iters / 10] = (now_us() - t0) / 2;
    }
    qsort(t, (size_t)iters, sizeof(double), cmp);
    printf("%10zu %10.2f %10.2f\n", sizes[s], t[iters / 2], t[iters * 9 / 10]);
  }
  int status = 0;
  waitpid(child, &status, 0);
  free(t);
  free(buf);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
