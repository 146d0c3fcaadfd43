#define _GNU_SOURCE /* sched_getaffinity */
#include "srd/sys.h"

#include "srd/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

uint64_t srd_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* getrandom may be interrupted, or (early in boot) not ready; after a few
 * tries the clock and the process id make a value that still differs between
 * processes and calls. */
uint64_t srd_random64(void) {
  uint64_t v = 0;
  for (int tries = 0; tries < 8; tries++)
    if (getrandom(&v, sizeof(v), GRND_NONBLOCK) == sizeof(v) && v) return v;
  SRD_WARN("getrandom gives no random bytes; cookies and ids come from the clock and the process id");
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  v = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^ (uint64_t)getpid() << 40;
  v *= 0x9e3779b97f4a7c15ull; /* spread the bits */
  return v ? v : 1;
}

uint64_t srd_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

struct timespec srd_deadline_in_us(long us) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += us / 1000000;
  until.tv_nsec += us % 1000000 * 1000L;
  if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
  return until;
}

int srd_cpus_available(void) {
  cpu_set_t set;
  return sched_getaffinity(0, sizeof(set), &set) ? 0 : CPU_COUNT(&set);
}

uint32_t srd_pid_ns_tag(void) {
  struct stat st;
  return stat("/proc/self/ns/pid", &st) ? 0 : (uint32_t)st.st_ino;
}

int srd_cpus_online(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 0;
}

static pid_t joined_pid;
static char joined_path[128];

void srd_host_procs_join(void) {
  if (joined_pid == getpid()) return;
  snprintf(joined_path, sizeof(joined_path), "%s/%s%u.%08x.%d", SRD_HOST_PROCS_DIR, SRD_HOST_PROCS_PREFIX,
           (unsigned)getuid(), srd_pid_ns_tag(), (int)getpid());
  int fd = open(joined_path, O_CREAT | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    SRD_INFO(NCCL_INIT, "cannot create %s (%s): other processes will not count this one when sizing lanes",
             joined_path, strerror(errno));
    return;
  }
  close(fd);
  joined_pid = getpid();
}

/* A forked child has the parent's joined_pid: only the process that made
 * the file removes it. */
__attribute__((destructor)) static void host_procs_leave(void) {
  if (joined_pid && joined_pid == getpid()) unlink(joined_path);
}

int srd_host_procs_count_in(const char *dir) {
  char prefix[64];
  int plen = snprintf(prefix, sizeof(prefix), "%s%u.", SRD_HOST_PROCS_PREFIX, (unsigned)getuid());
  DIR *d = opendir(dir);
  if (!d) return 1;
  int live = 0;
  uint32_t ns = srd_pid_ns_tag();
  for (struct dirent *e; (e = readdir(d));) {
    if (strncmp(e->d_name, prefix, (size_t)plen)) continue;
    char *end;
    unsigned long tag = strtoul(e->d_name + plen, &end, 16);
    if (end != e->d_name + plen + 8 || *end != '.') continue;
    long pid = strtol(end + 1, &end, 10);
    if (*end || pid <= 0 || pid > 0x7fffffff) continue;
    if ((uint32_t)tag != ns || kill((pid_t)pid, 0) == 0 || errno == EPERM) {
      live++;
      continue;
    }
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    unlink(path); /* its process died without removing it */
  }
  closedir(d);
  return live > 0 ? live : 1;
}

int srd_host_procs_count(void) { return srd_host_procs_count_in(SRD_HOST_PROCS_DIR); }

int srd_lanes_auto(int cpus, int online, int procs) {
  if (procs < 1) procs = 1;
  int share = online > 0 ? online / procs : cpus;
  if (cpus > 0 && cpus < share) share = cpus;
  int t = share - 2;
  return t < 0 ? 0 : t > SRD_AUTO_LANES_MAX ? SRD_AUTO_LANES_MAX : t;
}

/* One step of a spin wait: tells the core (x86: pause), so that its sibling
 * thread and the lock's holder run meanwhile. */
static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

void srd_mutex_lock_spin(pthread_mutex_t *m) {
  uint64_t until = srd_now_us() + SRD_LOCK_SPIN_US;
  while (pthread_mutex_trylock(m)) {
    if (srd_now_us() >= until) {
      pthread_mutex_lock(m);
      return;
    }
    cpu_relax();
  }
}
