/* What the operating system tells us: time, randomness, CPUs. */
#ifndef SRD_SYS_H
#define SRD_SYS_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* Monotonic milliseconds and microseconds. */
uint64_t srd_now_ms(void);
uint64_t srd_now_us(void);
/* CLOCK_REALTIME us from now: a pthread_cond_timedwait deadline. */
struct timespec srd_deadline_in_us(long us);
/* A nonzero random value for cookies and ids. */
uint64_t srd_random64(void);
/* CPUs this process may run on, 0 when unknown. */
int srd_cpus_available(void);
/* 32 bits of our pid namespace's inode (0 when unknown): names in a /dev/shm
 * that containers may share say in which namespace their pid means something. */
uint32_t srd_pid_ns_tag(void);
/* CPUs of the host that are online, 0 when unknown. */
int srd_cpus_online(void);

/* Processes of this user on this host that loaded the plugin, so that each
 * can size its progress lanes to its share of the cores (the plugin sets no
 * environment). Each process keeps an empty file, SRD_HOST_PROCS_DIR/
 * SRD_HOST_PROCS_PREFIX<uid>.<pid namespace tag>.<pid>, from
 * srd_host_procs_join until it exits; files of our namespace's processes that
 * died are removed by the next count (another namespace's count as live). */
#define SRD_HOST_PROCS_DIR "/dev/shm"
#define SRD_HOST_PROCS_PREFIX "nccl-srd-proc."
void srd_host_procs_join(void);
/* Live processes counted in SRD_HOST_PROCS_DIR, at least 1. */
int srd_host_procs_count(void);
/* The same in dir (tests). */
int srd_host_procs_count_in(const char *dir);

/* Progress threads per NIC when NCCL_SRD_PROGRESS_THREADS is unset: each of
 * procs processes of ours on a host of online CPUs gets its share of them (at
 * most the cpus it may run on); NCCL's proxy thread and the rank's own thread
 * keep two, the rest become lanes, at most SRD_AUTO_LANES_MAX. srd-perf's
 * raw half sizes its lanes with it too. */
#define SRD_AUTO_LANES_MAX 4
int srd_lanes_auto(int cpus, int online, int procs);

/* Take m for a progress thread that found it taken: try again for up to
 * SRD_LOCK_SPIN_US, then sleep in the kernel. The other holders' steps are
 * short, and a wake-up from the kernel costs more than they do (measured:
 * DESIGN.md, "Locking"). srd-perf's raw lanes wait the same way. */
#define SRD_LOCK_SPIN_US 20
void srd_mutex_lock_spin(pthread_mutex_t *m);

#endif
