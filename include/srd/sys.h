/* What the operating system tells us: time, randomness, CPUs. */
#ifndef SRD_SYS_H
#define SRD_SYS_H

#include <stdint.h>

/* Monotonic milliseconds and microseconds. */
uint64_t srd_now_ms(void);
uint64_t srd_now_us(void);
/* A nonzero random value for cookies and ids. */
uint64_t srd_random64(void);
/* CPUs this process may run on, 0 when unknown. */
int srd_cpus_available(void);

#endif
