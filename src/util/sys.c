#define _GNU_SOURCE /* sched_getaffinity */
#include "srd/sys.h"

#include <sched.h>
#include <sys/random.h>
#include <time.h>

uint64_t srd_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t srd_random64(void) {
  uint64_t v = 0;
  while (getrandom(&v, sizeof(v), 0) != sizeof(v) || v == 0) {
  }
  return v;
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
