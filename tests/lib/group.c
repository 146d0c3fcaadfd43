/* Test processes: fork, the out-of-band socket mesh, bounded waits, and the
 * driver that runs every case over every provider. */
#define _GNU_SOURCE /* setns */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "srdtest.h"

#define ST_MAX_RANKS 16
#define GRACE_S 10 /* how long past its alarm a test process may take to end */

static char label[128] = "main";
static int oob[ST_MAX_RANKS]; /* this process's end of the channel to each rank */
static int my_rank = -1, group_size;

const char *st_label(void) { return label; }

/* SRD_TEST_STACKS=1 (CI sets it): a test process that fails, or whose
 * alarm fires, first prints every thread's stack through gdb, so that a
 * rare hang's cause is in the log of the run that hit it. */
static bool stacks_wanted(void) {
  const char *v = getenv("SRD_TEST_STACKS");
  return v && !strcmp(v, "1");
}

static void print_stacks(void) {
  char pid[24];
  snprintf(pid, sizeof pid, "%d", (int)getpid());
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0); /* Yama: let our child attach */
  pid_t p = fork();
  if (p == 0) {
    dup2(2, 1);
    execlp("gdb", "gdb", "-nx", "-batch", "-p", pid, "-ex", "thread apply all bt 30", (char *)NULL);
    static const char no_gdb[] = "SRD_TEST_STACKS: cannot run gdb\n";
    ssize_t n = write(2, no_gdb, sizeof no_gdb - 1);
    (void)n;
    _exit(127);
  }
  if (p > 0)
    while (waitpid(p, NULL, 0) < 0 && errno == EINTR) {
    }
}

static void on_alarm(int sig) {
  static const char msg[] = "its alarm fired (a hang): the stacks follow\n";
  ssize_t n = write(2, msg, sizeof msg - 1);
  (void)n;
  print_stacks();
  signal(sig, SIG_DFL);
  raise(sig);
}

void st_fail(const char *file, int line, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "[%s] FAIL %s:%d: %s\n", label, file, line, msg);
  fflush(stderr);
  if (stacks_wanted()) print_stacks();
  /* No atexit work: the failure is the report; a leak check would only add noise. */
  _exit(1);
}

void st_note(const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "[%s] %s\n", label, msg);
}

int64_t st_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void st_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) && errno == EINTR) {
  }
}

/* ---------- out-of-band channel ---------- */

int st_oob_fd(int peer) {
  ST_CHECK(peer >= 0 && peer < group_size && peer != my_rank, "no channel to rank %d", peer);
  return oob[peer];
}

void st_oob_send(int peer, const void *buf, size_t len) {
  int fd = st_oob_fd(peer);
  const char *p = buf;
  while (len) {
    ssize_t n = write(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    ST_CHECK(n > 0, "write to rank %d: %s", peer, n < 0 ? strerror(errno) : "closed");
    p += n;
    len -= (size_t)n;
  }
}

void st_oob_recv(int peer, void *buf, size_t len, int timeout_ms) {
  int fd = st_oob_fd(peer);
  int64_t deadline = st_now_ms() + timeout_ms;
  char *p = buf;
  while (len) {
    int64_t left = deadline - st_now_ms();
    ST_CHECK(left > 0, "no message from rank %d within %d ms", peer, timeout_ms);
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int r = poll(&pfd, 1, (int)left);
    if (r < 0 && errno == EINTR) continue;
    ST_CHECK(r >= 0, "poll: %s", strerror(errno));
    if (r == 0) continue;
    ssize_t n = read(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    ST_CHECK(n > 0, "read from rank %d: %s", peer, n < 0 ? strerror(errno) : "rank ended");
    p += n;
    len -= (size_t)n;
  }
}

int st_oob_ready(int peer) {
  struct pollfd pfd = {.fd = st_oob_fd(peer), .events = POLLIN};
  return poll(&pfd, 1, 0) > 0;
}

void st_barrier(int timeout_ms) {
  char token = 'b';
  for (int r = 0; r < group_size; r++)
    if (r != my_rank) st_oob_send(r, &token, 1);
  for (int r = 0; r < group_size; r++) {
    if (r == my_rank) continue;
    st_oob_recv(r, &token, 1, timeout_ms);
    ST_CHECK(token == 'b', "rank %d sent '%c' where a barrier was expected", r, token);
  }
}

/* ---------- process groups ---------- */

/* SRD_TEST_NETNS="nsA,nsB,...": rank i enters network namespace i (ranks past
 * the list stay put), so the ranks are two "hosts" joined by the veth rails
 * of tests/netns/netns.sh. Like `ip netns exec`, it mounts a sysfs of that
 * namespace in a private mount namespace, so /sys/class/net (link state)
 * shows the namespace's interfaces. Runs before the rank loads the plugin. */
static void enter_netns(int rank) {
  const char *list = getenv("SRD_TEST_NETNS");
  if (!list || !*list) return;
  for (int i = 0; i < rank && list; i++) {
    list = strchr(list, ',');
    if (list) list++;
  }
  if (!list || !*list || *list == ',') return;
  char path[320];
  snprintf(path, sizeof path, "/var/run/netns/%.*s", (int)strcspn(list, ","), list);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  ST_CHECK(fd >= 0, "SRD_TEST_NETNS: open %s: %s", path, strerror(errno));
  ST_CHECK(setns(fd, CLONE_NEWNET) == 0, "SRD_TEST_NETNS: setns %s: %s", path, strerror(errno));
  close(fd);
  ST_CHECK(unshare(CLONE_NEWNS) == 0, "SRD_TEST_NETNS: unshare(CLONE_NEWNS): %s", strerror(errno));
  ST_CHECK(mount(NULL, "/", NULL, MS_SLAVE | MS_REC, NULL) == 0, "SRD_TEST_NETNS: making / a slave mount: %s",
           strerror(errno));
  umount2("/sys", MNT_DETACH);
  ST_CHECK(mount("sysfs", "/sys", "sysfs", 0, NULL) == 0, "SRD_TEST_NETNS: mounting sysfs: %s", strerror(errno));
}

static void describe(int status, char *out, size_t outlen) {
  if (WIFEXITED(status))
    snprintf(out, outlen, "exit status %d", WEXITSTATUS(status));
  else if (WIFSIGNALED(status))
    snprintf(out, outlen, "killed by signal %d (%s)%s", WTERMSIG(status), strsignal(WTERMSIG(status)),
             WTERMSIG(status) == SIGALRM ? ": its alarm fired, a hang" : "");
  else
    snprintf(out, outlen, "status 0x%x", status);
}

int st_group_run(const char *lbl, int nranks, st_rank_fn fn, void *arg, const struct st_group_opts *opts) {
  int timeout_s = opts && opts->timeout_s ? opts->timeout_s : ST_CASE_HANG_S;
  unsigned killed_mask = opts ? opts->killed_mask : 0;
  if (nranks < 1 || nranks > ST_MAX_RANKS) {
    fprintf(stderr, "[%s] bad group size %d\n", lbl, nranks);
    return 1;
  }
  int pair[ST_MAX_RANKS][ST_MAX_RANKS][2];
  for (int a = 0; a < nranks; a++)
    for (int b = a + 1; b < nranks; b++)
      if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair[a][b])) {
        perror("socketpair");
        return 1;
      }
  fflush(stdout);
  fflush(stderr);
  pid_t pids[ST_MAX_RANKS];
  for (int r = 0; r < nranks; r++) {
    pids[r] = fork();
    if (pids[r] < 0) {
      perror("fork");
      for (int k = 0; k < r; k++) kill(pids[k], SIGKILL);
      for (int k = 0; k < r; k++) waitpid(pids[k], NULL, 0);
      return 1;
    }
    if (pids[r] == 0) {
      my_rank = r;
      group_size = nranks;
      snprintf(label, sizeof label, "%s r%d", lbl, r);
      for (int a = 0; a < nranks; a++)
        for (int b = a + 1; b < nranks; b++) {
          if (a == r) oob[b] = pair[a][b][0];
          else close(pair[a][b][0]);
          if (b == r) oob[a] = pair[a][b][1];
          else close(pair[a][b][1]);
        }
      if (stacks_wanted()) signal(SIGALRM, on_alarm);
      alarm((unsigned)timeout_s);
      enter_netns(r);
      int rc = fn(r, nranks, arg);
      fflush(stdout);
      fflush(stderr);
      exit(rc);
    }
  }
  for (int a = 0; a < nranks; a++)
    for (int b = a + 1; b < nranks; b++) close(pair[a][b][0]), close(pair[a][b][1]);

  /* The children's alarms end a hang; this deadline covers a child that
   * blocks SIGALRM or hangs in exit. */
  int64_t deadline = st_now_ms() + (int64_t)(timeout_s + GRACE_S) * 1000;
  int status[ST_MAX_RANKS], reaped = 0, failed = 0;
  int done[ST_MAX_RANKS] = {0};
  while (reaped < nranks) {
    for (int r = 0; r < nranks; r++) {
      if (done[r]) continue;
      pid_t p = waitpid(pids[r], &status[r], WNOHANG);
      if (p == pids[r]) done[r] = 1, reaped++;
    }
    if (reaped == nranks) break;
    if (st_now_ms() > deadline) {
      for (int r = 0; r < nranks; r++)
        if (!done[r]) {
          fprintf(stderr, "[%s r%d] FAIL still running %d s after its alarm: killed\n", lbl, r, GRACE_S);
          kill(pids[r], SIGKILL);
          waitpid(pids[r], &status[r], 0);
          done[r] = 1;
          failed = 1;
          status[r] = -1;
        }
      break;
    }
    st_sleep_ms(5);
  }
  for (int r = 0; r < nranks; r++) {
    if (status[r] == -1) continue;
    int expect_kill = (killed_mask >> r) & 1;
    int ok = expect_kill ? WIFSIGNALED(status[r]) && WTERMSIG(status[r]) == SIGKILL
                         : WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0;
    if (!ok) {
      char why[256];
      describe(status[r], why, sizeof why);
      fprintf(stderr, "[%s r%d] FAIL %s%s\n", lbl, r, why, expect_kill ? " (expected SIGKILL)" : "");
      failed = 1;
    }
  }
  return failed;
}

/* ---------- test programs ---------- */

void st_setup(const struct st_ctx *ctx, int v) {
  if (setenv("NCCL_SRD_PROVIDER", ctx->provider, 1)) st_fail(__FILE__, __LINE__, "setenv failed");
  st_net_load(v);
}

int st_version(int def) {
  const char *v = getenv("SRD_TEST_NET_VERSION");
  return v && *v ? atoi(v) : def;
}

int st_skip(const struct st_ctx *ctx, const char *why) {
  printf("%s [%s] does not apply: %s\n", ctx->test, ctx->provider, why);
  return ST_SKIP;
}

/* Is name one of the comma-separated names in list? */
static bool listed(const char *list, const char *name) {
  size_t n = strlen(name);
  for (const char *p = list; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
    if (!strncmp(p, name, n) && (p[n] == ',' || p[n] == '\0')) return true;
  return false;
}

int st_main(int argc, char **argv, const struct st_case *cases, int ncases) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char *list = argc > 1 && argv[1][0] ? argv[1] : getenv("SRD_TEST_PROVIDERS");
  /* "tcp" is what users get: tcp;ofi_rxm on libfabric 1.x, native RDM tcp on 2.x. */
  if (!list || !*list) list = "tcp,shm";
  const char *only = argc > 2 ? argv[2] : NULL;
  char *providers = strdup(list);
  if (!providers) return 99;
  int failures = 0, skipped = 0, ran = 0;
  char *save = NULL;
  for (char *prov = strtok_r(providers, ",", &save); prov; prov = strtok_r(NULL, ",", &save)) {
    for (int i = 0; i < ncases; i++) {
      if (only && !listed(only, cases[i].name)) continue;
      struct st_ctx ctx = {.provider = prov, .test = cases[i].name};
      int64_t t0 = st_now_ms();
      int rc = cases[i].run(&ctx);
      const char *verdict = rc == ST_SKIP ? "SKIP" : rc ? "FAIL" : "PASS";
      printf("%s: %s [%s] (%.1f s)\n", verdict, cases[i].name, prov, (st_now_ms() - t0) / 1000.0);
      failures += rc != 0 && rc != ST_SKIP;
      skipped += rc == ST_SKIP;
      ran++;
    }
  }
  free(providers);
  if (!ran) {
    fprintf(stderr, "no test case named %s\n", only ? only : "(none)");
    return 99;
  }
  return failures ? 1 : skipped == ran ? ST_SKIP : 0;
}

/* ---------- data ---------- */

static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

void st_pattern_fill(void *buf, size_t size, uint64_t seed) {
  unsigned char *p = buf;
  uint64_t base = mix(seed);
  size_t words = size / 8;
  for (size_t w = 0; w < words; w++) {
    uint64_t v = mix(base ^ w);
    memcpy(p + w * 8, &v, 8);
  }
  uint64_t tail = mix(base ^ words);
  memcpy(p + words * 8, &tail, size % 8);
}

size_t st_pattern_check(const void *buf, size_t size, uint64_t seed) {
  const unsigned char *p = buf;
  uint64_t base = mix(seed);
  size_t words = size / 8;
  for (size_t w = 0; w < words; w++) {
    uint64_t v = mix(base ^ w);
    if (memcmp(p + w * 8, &v, 8)) {
      const unsigned char *e = (const unsigned char *)&v;
      for (size_t k = 0; k < 8; k++)
        if (p[w * 8 + k] != e[k]) return w * 8 + k;
    }
  }
  uint64_t tail = mix(base ^ words);
  const unsigned char *e = (const unsigned char *)&tail;
  for (size_t k = 0; k < size % 8; k++)
    if (p[words * 8 + k] != e[k]) return words * 8 + k;
  return SIZE_MAX;
}

void *st_alloc(size_t size) {
  void *p = mmap(NULL, size ? size : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ST_CHECK(p != MAP_FAILED, "mmap of %zu bytes: %s", size, strerror(errno));
  return p;
}

void st_free(void *buf, size_t size) {
  if (buf) munmap(buf, size ? size : 1);
}

/* By blocks against memcmp (vectorised): tests check hundreds of MiB of
 * guard bytes, which a byte loop made a large share of the suite's CPU. */
size_t st_check_byte(const void *buf, size_t size, uint8_t byte) {
  enum { BLOCK = 4096 };
  unsigned char want[BLOCK];
  memset(want, byte, sizeof want);
  const unsigned char *p = buf;
  for (size_t off = 0; off < size; off += BLOCK) {
    size_t n = size - off < BLOCK ? size - off : BLOCK;
    if (!memcmp(p + off, want, n)) continue;
    for (size_t i = 0; i < n; i++)
      if (p[off + i] != byte) return off + i;
  }
  return SIZE_MAX;
}
