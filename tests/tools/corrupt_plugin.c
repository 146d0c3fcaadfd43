/* A test ncclNet plugin that wraps another (SRD_TEST_WRAPPED_PLUGIN, its v8
 * table) and, unless SRD_TEST_CORRUPT=0, flips one byte of every non-empty
 * message it receives before test() reports it done: srd-perf --check must
 * notice (tests/tools/srd-perf-corrupt.sh). Everything else passes through. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl/net.h"

#define MAX_RECVS 4096 /* receives in flight that we remember */

struct recv_rec {
  void *request;
  char *data;
  int size;
};

static ncclNet_v8_t inner;
static struct recv_rec recs[MAX_RECVS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int corrupt = 1;
static char load_error[512];

static ncclResult_t wrap_init(ncclDebugLogger_t logger) {
  if (!inner.init) {
    fprintf(stderr, "corrupt_plugin: %s\n", load_error);
    return ncclInternalError;
  }
  return inner.init(logger);
}

static ncclResult_t wrap_irecv(void *comm, int n, void **data, int *sizes, int *tags, void **mhandles, void **request) {
  ncclResult_t rc = inner.irecv(comm, n, data, sizes, tags, mhandles, request);
  if (rc != ncclSuccess || !*request || !corrupt) return rc;
  pthread_mutex_lock(&lock);
  int i = 0;
  while (i < MAX_RECVS && recs[i].request) i++;
  if (i < MAX_RECVS) recs[i] = (struct recv_rec){*request, data[0], sizes[0]};
  pthread_mutex_unlock(&lock);
  if (i == MAX_RECVS) {
    fprintf(stderr, "corrupt_plugin: more than %d receives in flight\n", MAX_RECVS);
    return ncclInternalError;
  }
  return rc;
}

static ncclResult_t wrap_test(void *request, int *done, int *sizes) {
  int got[1] = {-1};
  ncclResult_t rc = inner.test(request, done, sizes ? sizes : got);
  if (rc != ncclSuccess || !*done || !corrupt) return rc;
  int size = sizes ? sizes[0] : got[0];
  pthread_mutex_lock(&lock);
  for (int i = 0; i < MAX_RECVS; i++)
    if (recs[i].request == request) {
      if (size > 0) recs[i].data[size / 2] ^= 0x5a;
      recs[i].request = NULL;
      break;
    }
  pthread_mutex_unlock(&lock);
  return rc;
}

ncclNet_v8_t ncclNetPlugin_v8 __attribute__((visibility("default")));

__attribute__((constructor)) static void load_inner(void) {
  const char *path = getenv("SRD_TEST_WRAPPED_PLUGIN"), *c = getenv("SRD_TEST_CORRUPT");
  corrupt = !c || strcmp(c, "0") != 0;
  ncclNetPlugin_v8 = (ncclNet_v8_t){.name = "corrupt", .init = wrap_init};
  void *lib = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
  const ncclNet_v8_t *table = lib ? dlsym(lib, "ncclNetPlugin_v8") : NULL;
  if (!table) {
    snprintf(load_error, sizeof(load_error), "cannot load the plugin to wrap (SRD_TEST_WRAPPED_PLUGIN=%s): %s",
             path ? path : "(unset)", path ? dlerror() : "set it");
    return;
  }
  inner = *table;
  ncclNetPlugin_v8 = inner;
  ncclNetPlugin_v8.name = "corrupt";
  ncclNetPlugin_v8.init = wrap_init;
  ncclNetPlugin_v8.irecv = wrap_irecv;
  ncclNetPlugin_v8.test = wrap_test;
}
