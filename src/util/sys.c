#define _GNU_SOURCE /* sched_getaffinity */
#include "srd/sys.h"

#include "srd/log.h"

#include <sched.h>
#include <sys/random.h>
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

int srd_cpus_available(void) {
  cpu_set_t set;
  return sched_getaffinity(0, sizeof(set), &set) ? 0 : CPU_COUNT(&set);
}
