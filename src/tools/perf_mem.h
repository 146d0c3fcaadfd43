/* srd-perf's buffers: host memory, or GPU memory with --cuda through the
 * CUDA driver that src/util/cuda.c loads at run time (never linked: srd-perf
 * runs on hosts without a GPU). --check data goes through a host copy. */
#ifndef SRD_TOOLS_PERF_MEM_H
#define SRD_TOOLS_PERF_MEM_H

#include <stddef.h>

struct perf_mem;

/* cuda 0: host memory; 1: GPU memory on CUDA device 0 (its primary context
 * becomes the calling thread's). NULL after printing why. */
struct perf_mem *perf_mem_open(int cuda);
void perf_mem_close(struct perf_mem *m);
int perf_mem_is_cuda(const struct perf_mem *m);
/* Page-aligned and zeroed (page faults stay out of the timings). */
void *perf_mem_alloc(struct perf_mem *m, size_t size);
void perf_mem_free(struct perf_mem *m, void *p);
/* Copy between host memory and a buffer of m: 0, or -1 after printing why. */
int perf_mem_put(struct perf_mem *m, void *dst, const void *src, size_t size);
int perf_mem_get(struct perf_mem *m, void *dst, const void *src, size_t size);

#endif
