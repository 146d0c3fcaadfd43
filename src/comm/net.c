/* The internal plugin API: global state (NIC list, devices), locking, and the
 * entry points the version shims call. */
#include "srd/net.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl/net_common.h"
#include "srd/comm.h"
#include "srd/cuda.h"
#include "srd/gdr.h"
#include "srd/log.h"
#include "srd/param.h"
#include "srd/stats.h"
#include "srd/sys.h"

static struct {
  pthread_mutex_t lock; /* init/fini and lazy device opening */
  int refs;
  struct srd_nic_list nics;
  struct srd_topo topo;
  int ndevs;
  struct srd_dev *devs;
} g = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Every entry from NCCL takes the device lock. A call about a comm that
 * carries large messages also wakes the lanes (their data arrives on them);
 * the other calls leave sleeping lanes alone. */
static void enter_dev(struct srd_dev *dev, bool kick) {
  if (kick) srd_dev_kick(dev);
#ifdef SRD_HOP_STATS
  SRD_STAT(SRD_STAT_LOCK);
  if (!pthread_mutex_trylock(&dev->lock)) return;
  SRD_STAT(SRD_STAT_LOCK_WAITED);
#endif
  pthread_mutex_lock(&dev->lock);
}

/* A lane waits for the device lock with completions in hand: a call that
 * NCCL repeats anyway (test, isend) lets it in first (src/proto/lanes.c). */
static bool lanes_first(struct srd_dev *dev) {
  return dev->threaded && atomic_load_explicit(&dev->lanes_waiting, memory_order_relaxed) > 0;
}

static int setup_devices(void) {
  if (srd_topo_discover(&g.nics)) return SRD_ERR_SYSTEM;
  int cap = (int)srd_param_int(SRD_PARAM_RAILS);
  srd_topo_group_or_all(&g.nics, cap, &g.topo);
  g.devs = calloc((size_t)g.topo.ngroups, sizeof(*g.devs));
  if (!g.devs) return SRD_ERR_SYSTEM;
  for (int d = 0; d < g.topo.ngroups; d++) {
    struct srd_dev *dev = &g.devs[d];
    /* GPU memory is decided (and logged) here, before NCCL asks for
     * properties; NCCL_SRD_GDR=1 without it fails init. */
    if (srd_gdr_device(&g.nics, &g.topo.groups[d], d, &dev->gdr)) return SRD_ERR_SYSTEM;
    g.ndevs = d + 1;
    srd_dev_init(dev, d, &srd_dispatch_handlers);
    dev->nics = &g.nics;
    dev->group = g.topo.groups[d];
    struct srd_mr_ops ops = {srd_dev_reg, srd_dev_dereg, dev};
    /* Page 1: registrations are exactly what NCCL asked for; a peer given a
     * receive buffer can reach nothing around it. */
    srd_mr_cache_init(&dev->mrs, &ops, 1);
  }
  SRD_INFO(NCCL_INIT | NCCL_NET, "provider %s (%s): %d NIC(s) in %d device(s)", g.nics.provider, g.nics.reason,
           g.nics.n, g.ndevs);
  return SRD_OK;
}

static void teardown_devices(void) {
  for (int d = 0; d < g.ndevs; d++) {
    srd_mr_cache_fini(&g.devs[d].mrs);
    srd_listener_pool_free(&g.devs[d]);
    srd_dev_fini(&g.devs[d]);
  }
  free(g.devs);
  g.devs = NULL;
  g.ndevs = 0;
  srd_topo_free(&g.nics);
}

/* The one place an internal result (enum srd_err) becomes NCCL's. */
static ncclResult_t to_nccl(int rc) {
  switch (rc) {
  case SRD_OK:
  case SRD_AGAIN: /* the comm or request pointer stays NULL: NCCL calls again */
    return ncclSuccess;
  case SRD_ERR_ARG:
    return ncclInvalidArgument;
  case SRD_ERR_USAGE:
    return ncclInvalidUsage;
  case SRD_ERR_SYSTEM:
    return ncclSystemError;
  case SRD_ERR_REMOTE:
    return ncclRemoteError;
  default:
    return ncclInternalError;
  }
}

ncclResult_t srd_to_nccl(int rc) { return to_nccl(rc); }

ncclResult_t srd_net_init(ncclDebugLogger_t logger) {
  if (logger) srd_log_set_logger(logger);
  pthread_mutex_lock(&g.lock);
  int rc = g.devs ? SRD_OK : setup_devices();
  if (rc) {
    teardown_devices();
  } else {
    g.refs++;
    srd_host_procs_join(); /* counted by the other processes' lane sizing */
  }
  pthread_mutex_unlock(&g.lock);
  return to_nccl(rc);
}

/* Devices live as long as the process: NCCL creates and destroys
 * communicators (init/finalize) many times, and libfabric 1.17's tcp provider
 * has crashed in fi_close of an endpoint whose connections were reset with
 * operations in flight (close mid-transfer, a dead peer, a lost rail). The
 * shm regions are released when the library goes away (below). */
void srd_net_fini(void) {
  pthread_mutex_lock(&g.lock);
  if (g.refs > 0) g.refs--;
  pthread_mutex_unlock(&g.lock);
}

int srd_net_rma_gpu_check(char *why, size_t len) {
  const struct srd_cuda *cu = srd_cuda_get();
  for (int d = 0; d < g.ndevs; d++) {
    char w[512];
    if (srd_gdr_rma_windows(g.nics.provider, &g.devs[d].gdr, cu, w, sizeof(w))) {
      snprintf(why, len, "device %d: %s", d, w);
      return -1;
    }
  }
  return 0;
}

ncclResult_t srd_net_null_arg(const char *call, const char *what) {
  SRD_WARN("%s: no %s given (NULL)", call, what);
  return ncclInvalidArgument;
}

ncclResult_t srd_net_devices(int *ndev) {
  if (!ndev) return srd_net_null_arg("devices", "count to fill");
  *ndev = g.ndevs;
  return ncclSuccess;
}

/* Devices open on first use. A device that does not exist is a bad
 * argument; one whose rails do not open is a system error. */
static int open_dev(int d, struct srd_dev **out) {
  if (d < 0 || d >= g.ndevs) {
    SRD_WARN("device %d does not exist (%d devices)", d, g.ndevs);
    return SRD_ERR_ARG;
  }
  struct srd_dev *dev = &g.devs[d];
  pthread_mutex_lock(&g.lock);
  int rc = dev->open ? SRD_OK : srd_dev_open(dev);
  pthread_mutex_unlock(&g.lock);
  *out = rc ? NULL : dev;
  return rc;
}

ncclResult_t srd_net_get_properties(int d, struct srd_props *p) {
  if (d < 0 || d >= g.ndevs) return ncclInvalidArgument;
  const struct srd_device_group *grp = &g.devs[d].group;
  const struct srd_nic *nic = &g.nics.nics[grp->nics[0]];
  memset(p, 0, sizeof(*p));
  p->name = nic->name;
  p->pci_path = grp->pci_path[0] ? grp->pci_path : NULL;
  p->guid = nic->guid ? nic->guid : (uint64_t)d;
  const struct srd_gdr_decision *gdr = &g.devs[d].gdr;
  p->ptr_support = NCCL_PTR_HOST | (gdr->gpu ? NCCL_PTR_CUDA : 0) | (gdr->dmabuf ? NCCL_PTR_DMABUF : 0);
  p->force_flush = gdr->flush;
  p->speed_mbps = grp->speed_mbps;
  p->latency_us = 0;
  p->max_comms = SRD_MAX_COMMS - 1;
  p->max_recvs = SRD_MAX_RECVS;
  p->max_p2p_bytes = srd_rail_write_limit(nic->info) * SRD_MAX_STRIPES;
  p->rail_id = d;
  return ncclSuccess;
}

ncclResult_t srd_net_listen(int d, void *handle, void **listen_comm) {
  if (!handle || !listen_comm) return ncclInvalidArgument;
  struct srd_dev *dev;
  int rc = open_dev(d, &dev);
  if (rc) return to_nccl(rc);
  enter_dev(dev, false);
  rc = srd_listen(dev, handle, (struct srd_listener **)listen_comm);
  pthread_mutex_unlock(&dev->lock);
  return to_nccl(rc);
}

ncclResult_t srd_net_connect(int d, void *handle, void **send_comm) {
  if (!send_comm) return ncclInvalidArgument;
  *send_comm = NULL;
  if (!handle) return ncclInvalidArgument;
  struct srd_dev *dev;
  int rc = open_dev(d, &dev);
  if (rc) return to_nccl(rc);
  enter_dev(dev, false);
  rc = srd_connect(dev, handle, (struct srd_comm **)send_comm);
  pthread_mutex_unlock(&dev->lock);
  return to_nccl(rc);
}

ncclResult_t srd_net_accept(void *listen_comm, void **recv_comm) {
  struct srd_listener *l = listen_comm;
  if (!l || !recv_comm) return ncclInvalidArgument;
  *recv_comm = NULL;
  enter_dev(l->dev, false);
  if (l->magic != SRD_LISTENER_MAGIC) {
    pthread_mutex_unlock(&l->dev->lock);
    SRD_WARN("accept on listener %p, which is closed", listen_comm);
    return ncclInvalidArgument;
  }
  int rc = srd_accept(l, (struct srd_comm **)recv_comm);
  pthread_mutex_unlock(&l->dev->lock);
  return to_nccl(rc);
}

/* A receive buffer's key goes to the comm's peer: its registration is the
 * comm's own (the cache then shares it with no other comm, nor a larger
 * range with this one). A send buffer has no remote access: shared. */
static uint64_t mr_owner(const struct srd_comm *c, unsigned access) { return access == SRD_MR_RECV ? c->id : 0; }

#define REG_MAX_SIZE ((size_t)1 << 48)

ncclResult_t srd_net_reg_mr(void *comm, void *data, size_t size, int type, int dmabuf_fd, uint64_t offset,
                            void **mhandle) {
  struct srd_comm *c = comm;
  if (!c || !mhandle || !srd_comm_usable(c, c->is_send)) return ncclInvalidArgument;
  /* NCCL registers buffers it allocated: no NULL, and no size beyond what a
   * process can map (48-bit virtual addresses); the provider may take either
   * without touching the memory and fail only the first write into it. */
  if (!data || size > REG_MAX_SIZE || (uintptr_t)data > UINTPTR_MAX - size) {
    SRD_WARN("regMr: %zu bytes at %p cannot be memory of this process", size, data);
    return ncclInvalidArgument;
  }
  const struct srd_gdr_decision *gdr = &c->dev->gdr;
  int cuda_dev = -1;
  if (type == NCCL_PTR_CUDA && gdr->gpu) {
    char why[200];
    if (srd_cuda_pointer_device(srd_cuda_get(), data, &cuda_dev, why, sizeof(why))) {
      SRD_WARN("regMr: %p is not GPU memory: %s", data, why);
      return ncclInvalidArgument;
    }
  } else if (type != NCCL_PTR_HOST) {
    SRD_WARN("cannot register memory of type %d on device %d: %s", type, c->dev->index,
             type == NCCL_PTR_CUDA ? gdr->why : "unknown memory type");
    return ncclInvalidArgument;
  }
  /* A dma-buf is used only where the device offers it (NCCL passes one only
   * then); otherwise the address alone registers. */
  if (!gdr->dmabuf || cuda_dev < 0) dmabuf_fd = -1, offset = 0;
  struct srd_mr_ref *mr;
  unsigned access = c->is_send ? SRD_MR_SEND : SRD_MR_RECV;
  int rc = srd_mr_acquire(&c->dev->mrs, data, size, type, cuda_dev, access, mr_owner(c, access), dmabuf_fd, offset, &mr);
  if (rc) {
    SRD_WARN("registration of %zu bytes at %p failed (%d)", size, data, rc);
    return ncclSystemError;
  }
  *mhandle = mr;
  return ncclSuccess;
}

ncclResult_t srd_net_dereg_mr(void *comm, void *mhandle) {
  struct srd_comm *c = comm;
  if (!c || !mhandle) return ncclInvalidArgument;
  /* NCCL frees the buffer next, before it closes the comm: writes into it
   * must be over first. */
  enter_dev(c->dev, true);
  bool idle = srd_proto_quiesce(c->dev, mhandle);
  pthread_mutex_unlock(&c->dev->lock);
  if (!idle) return ncclSuccess; /* kept open: the provider still reads it (warned) */
  if (srd_mr_release(&c->dev->mrs, mhandle)) {
    SRD_WARN("deregMr: %p is not a registration of this device", mhandle);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

/* A handle NCCL already deregistered is refused (handles are never freed, so
 * this reads no freed memory); one made on a comm of the other direction
 * gets a registration of this direction's class the first time. Called
 * without the device lock: registering takes it. */
static int usable_mr(struct srd_comm *c, void *mhandle, unsigned access) {
  struct srd_mr_ref *ref = mhandle;
  if (!ref) return 0;
  if (!srd_mr_live(ref)) {
    SRD_WARN("%s comm %#x: memory handle %p was deregistered", c->is_send ? "send" : "recv", c->id, mhandle);
    return -1;
  }
  struct srd_mr *entry;
  if (srd_mr_entry(ref, access)) return 0;
  if (srd_mr_entry_for(&c->dev->mrs, ref, access, mr_owner(c, access), &entry)) {
    SRD_WARN("%s comm %#x: cannot register %zu bytes at %#lx for this direction", c->is_send ? "send" : "recv", c->id,
             ref->len, (unsigned long)ref->addr);
    return -1;
  }
  return 0;
}

ncclResult_t srd_net_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle, void **request) {
  struct srd_comm *c = send_comm;
  if (!c || !request || !srd_comm_usable(c, true) || usable_mr(c, mhandle, SRD_MR_SEND)) return ncclInvalidArgument;
  SRD_STAT(SRD_STAT_ISEND);
  *request = NULL;
  if (lanes_first(c->dev)) return ncclSuccess;
  SRD_STAT_T0(t0);
  enter_dev(c->dev, atomic_load_explicit(&c->large, memory_order_relaxed));
  int rc = srd_proto_isend(c, data, size, tag, mhandle, (struct srd_req **)request);
  if (rc == SRD_AGAIN) {
    /* No clear-to-send yet: reap what arrived and look once more. */
    srd_dev_progress(c->dev);
    rc = srd_proto_isend(c, data, size, tag, mhandle, (struct srd_req **)request);
  }
  pthread_mutex_unlock(&c->dev->lock);
  SRD_STAT_SINCE(SRD_STAT_NS_IN_CALLS, t0);
  return to_nccl(rc);
}

ncclResult_t srd_net_irecv(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags, void **mhandles,
                           void **request) {
  struct srd_comm *c = recv_comm;
  if (!c || !request || !data || !sizes || !mhandles || !srd_comm_usable(c, false)) return ncclInvalidArgument;
  for (int i = 0; i < n && i < SRD_MAX_RECVS; i++)
    if (usable_mr(c, mhandles[i], SRD_MR_RECV)) return ncclInvalidArgument;
  SRD_STAT(SRD_STAT_IRECV);
  SRD_STAT_T0(t0);
  enter_dev(c->dev, atomic_load_explicit(&c->large, memory_order_relaxed));
  int rc = srd_proto_irecv(c, n, data, sizes, tags, (struct srd_mr_ref **)mhandles, (struct srd_req **)request);
  pthread_mutex_unlock(&c->dev->lock);
  SRD_STAT_SINCE(SRD_STAT_NS_IN_CALLS, t0);
  return to_nccl(rc);
}

ncclResult_t srd_net_iflush(void *recv_comm, int n, void **data, const int *sizes, void **mhandles, void **request) {
  struct srd_comm *c = recv_comm;
  if (!c || c->is_send || !request || (n > 0 && (!data || !mhandles))) return ncclInvalidArgument;
  *request = NULL;
  if (n < 1 || n > SRD_MAX_RECVS) return n == 0 ? ncclSuccess : ncclInvalidArgument;
  enter_dev(c->dev, atomic_load_explicit(&c->large, memory_order_relaxed));
  int rc = srd_proto_iflush(c, n, data, sizes, (struct srd_mr_ref **)mhandles, (struct srd_req **)request);
  pthread_mutex_unlock(&c->dev->lock);
  return to_nccl(rc);
}

static int clamp_int(size_t v) { return v > INT_MAX ? INT_MAX : (int)v; }

ncclResult_t srd_net_test(void *request, int *done, int *sizes) {
  struct srd_req *r = request;
  if (!r || !done) return srd_net_null_arg("test", !r ? "request" : "done flag");
  if (!r->in_use || r->released || r->comm->magic != SRD_COMM_MAGIC) {
    SRD_WARN("test of request %p, which is done or whose comm is closed", request);
    return ncclInvalidArgument;
  }
  struct srd_comm *c = r->comm;
  struct srd_dev *dev = c->dev;
  SRD_STAT(SRD_STAT_TEST);
  SRD_STAT_T0(t0);
  if (dev->threaded) {
    /* r->done is the lanes' to write: not read before the lock is ours. */
    if (atomic_load_explicit(&c->large, memory_order_relaxed)) srd_dev_kick(dev);
    /* A lane holds the lock while it delivers completions: this request's
     * answer can wait for the next call instead of this thread. */
    if (lanes_first(dev) || pthread_mutex_trylock(&dev->lock)) {
      SRD_STAT(SRD_STAT_TEST_BUSY);
      *done = 0;
      return ncclSuccess;
    }
  } else {
    pthread_mutex_lock(&dev->lock);
  }
  /* Lane 0 (control messages, small messages) is polled here, by NCCL's
   * thread, whether lane threads run or not. */
  if (!r->done) srd_dev_progress(dev);
  if (!r->done && c->result) srd_req_finish(r, c->result);
  *done = r->done;
  int rc = SRD_OK;
  if (r->done) {
    rc = r->result;
    if (sizes) {
      if (r->kind == SRD_REQ_RECV)
        for (int i = 0; i < r->n; i++) sizes[i] = clamp_int(r->e[i].got);
      else
        sizes[0] = clamp_int(r->size);
    }
    srd_req_release(r);
    SRD_STAT(SRD_STAT_TEST_DONE);
  }
  pthread_mutex_unlock(&dev->lock);
  SRD_STAT_SINCE(SRD_STAT_NS_IN_CALLS, t0);
  return to_nccl(rc);
}

static ncclResult_t close_comm(struct srd_comm *c, bool is_send) {
  if (!c) return ncclInvalidArgument;
  struct srd_dev *dev = c->dev;
  pthread_mutex_lock(&dev->lock);
  bool ok = srd_comm_usable(c, is_send);
  if (ok) srd_comm_close(c);
  pthread_mutex_unlock(&dev->lock);
  return ok ? ncclSuccess : ncclInvalidArgument;
}

ncclResult_t srd_net_close_send(void *send_comm) { return close_comm(send_comm, true); }
ncclResult_t srd_net_close_recv(void *recv_comm) { return close_comm(recv_comm, false); }

ncclResult_t srd_net_close_listen(void *listen_comm) {
  struct srd_listener *l = listen_comm;
  if (!l) return ncclInvalidArgument;
  struct srd_dev *dev = l->dev;
  pthread_mutex_lock(&dev->lock);
  bool ok = l->magic == SRD_LISTENER_MAGIC;
  if (ok) srd_close_listen(l);
  pthread_mutex_unlock(&dev->lock);
  if (!ok) SRD_WARN("closeListen of listener %p, which is already closed", listen_comm);
  return ok ? ncclSuccess : ncclInvalidArgument;
}

/* When the library goes away (unload or exit), the progress threads end
 * first: libfabric's own teardown follows ours. NCCL before 2.28 never calls
 * finalize, and the shm provider removes its region from /dev/shm only when
 * the endpoint closes: close host-local rails then too. A thread still inside
 * the device keeps it open (trylock); one that comes later waits on the lock
 * we keep. */
__attribute__((destructor)) static void stop_devices(void) {
  for (int d = 0; d < g.ndevs; d++) {
    struct srd_dev *dev = &g.devs[d];
    if (!dev->open || !srd_dev_stop_lanes(dev)) continue;
    if (!dev->host_local || pthread_mutex_trylock(&dev->lock)) continue;
    for (int i = 0; i < dev->nrails; i++) srd_rail_close(&dev->rails[i]);
  }
}
