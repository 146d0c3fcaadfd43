/* What srd-perf's patterns drive: the ncclNet calls NCCL makes, behind one
 * version-free interface. Two implementations: an ncclNet plugin loaded with
 * dlopen (perf_plugin.c) and libfabric itself (perf_raw.c, the baseline).
 * Every call returns 0 or -1 after printing what went wrong. */
#ifndef SRD_TOOLS_PERF_TRANSPORT_H
#define SRD_TOOLS_PERF_TRANSPORT_H

#include <stddef.h>

#define PERF_HANDLE_SIZE 128 /* NCCL_NET_HANDLE_MAXSIZE */
#define PERF_TEST_SIZES 8    /* room in test()'s sizes: NCCL's largest grouped receive */

struct perf_transport;

struct perf_transport_ops {
  int (*listen)(struct perf_transport *t, void *handle, void **listen_comm);
  /* Non-blocking like NCCL's: 0 with *comm NULL means "call again". */
  int (*connect)(struct perf_transport *t, void *handle, void **send_comm);
  int (*accept)(struct perf_transport *t, void *listen_comm, void **recv_comm);
  int (*reg)(struct perf_transport *t, void *comm, void *buf, size_t size, void **mhandle);
  int (*dereg)(struct perf_transport *t, void *comm, void *mhandle);
  /* 0 with *request NULL: not accepted yet, call again (NCCL's contract). */
  int (*isend)(struct perf_transport *t, void *send_comm, void *buf, size_t size, int tag, void *mhandle,
               void **request);
  int (*irecv)(struct perf_transport *t, void *recv_comm, int n, void **bufs, size_t *sizes, int *tags,
               void **mhandles, void **request);
  /* sizes (PERF_TEST_SIZES entries) gets the bytes received per buffer, or
   * sent, once *done. */
  int (*test)(struct perf_transport *t, void *request, int *done, size_t *sizes);
  int (*close_send)(struct perf_transport *t, void *send_comm);
  int (*close_recv)(struct perf_transport *t, void *recv_comm);
  int (*close_listen)(struct perf_transport *t, void *listen_comm);
  void (*destroy)(struct perf_transport *t);
};

struct perf_transport {
  const struct perf_transport_ops *ops;
  char kind[16];         /* "plugin" or "raw" */
  char description[512]; /* what is measured, for the report */
  char provider[64];     /* libfabric provider, "" when the plugin does not say */
  char device[512];      /* the device or NIC names used */
  int max_recvs;         /* largest grouped receive */
  int net_version;       /* ncclNet ABI version driven; 0 for raw */
  int cuda;              /* buffers are GPU memory (--cuda): registered as such */
};

/* dlopen path ("" for our own plugin, found beside the executable or on the
 * library path) and initialise its ncclNetPlugin_v<version> table (0: the
 * highest it exports) for dev; cuda: the device must take NCCL_PTR_CUDA. */
struct perf_transport *perf_plugin_open(const char *path, int version, int dev, int cuda);
/* libfabric directly, on the provider and NIC group srd_topo_* choose; with
 * cuda, domains with FI_HMEM and registrations of CUDA memory. */
struct perf_transport *perf_raw_open(int dev, int cuda);

#endif
