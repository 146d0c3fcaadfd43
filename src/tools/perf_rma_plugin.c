/* srd-perf --rma, plugin half: the loaded plugin's ncclRmaPlugin_v14 table
 * driven as NCCL 2.30 drives it (init, listen, handles exchanged, connect
 * of both ranks, a context, collective regMrSym of host windows), except
 * that progress runs in the polling loop rather than a proxy thread: on a
 * shared core a second spinning thread would only steal the first's time.
 * A signal is NCCL's: ADD 1 to a word of a signal window registered at
 * connect, which the target reads. */
#include <dlfcn.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include <rdma/fabric.h>

#include "nccl/rma_v14.h"
#include "perf_ctrl.h"
#include "perf_log.h"
#include "perf_plugin.h"
#include "perf_rma.h"
#include "srd/topo.h"

#define SIGNAL_BYTES 4096

struct rma_plugin {
  struct perf_rma base;
  const ncclRma_v14_t *table;
  int dev;
  void *ctx, *coll, *rctx;
  uint32_t peer;
  uint64_t *signal; /* word 0: the peer's signals to us */
  void *signal_win;
};

static struct rma_plugin *as_rma_plugin(struct perf_rma *t) { return (struct rma_plugin *)t; }

/* The plugin's last message: an init that fails says why only in its log
 * (ours at INFO), which the error then quotes. */
static char last_log[1024];

__attribute__((format(printf, 5, 6))) static void remembering_logger(ncclDebugLogLevel level, unsigned long flags,
                                                                     const char *file, int line, const char *fmt,
                                                                     ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_log, sizeof(last_log), fmt, ap);
  va_end(ap);
  perf_plugin_logger(level, flags, file, line, "%s", last_log);
}

static int check(ncclResult_t rc, const char *call) {
  if (rc == ncclSuccess) return 0;
  perf_error("plugin RMA %s failed: ncclResult %d%s", call, (int)rc,
             rc == ncclRemoteError ? " (remote error: the peer failed or vanished)" : "");
  return -1;
}

static int plugin_connect(struct perf_rma *t, int fd, int is_client, int timeout_s) {
  struct rma_plugin *p = as_rma_plugin(t);
  const ncclRma_v14_t *r = p->table;
  int rank = is_client ? 0 : 1;
  char handles[2][NCCL_NET_HANDLE_MAXSIZE];
  void *hp[2] = {handles[0], handles[1]}, *listen = NULL;
  memset(handles, 0, sizeof(handles));
  p->peer = (uint32_t)(1 - rank);
  if (check(r->listen(p->ctx, p->dev, handles[rank], &listen), "listen")) return -1;
  int rc = perf_ctrl_send(fd, handles[rank], NCCL_NET_HANDLE_MAXSIZE, timeout_s, "the RMA handle") ||
           perf_ctrl_recv(fd, handles[1 - rank], NCCL_NET_HANDLE_MAXSIZE, timeout_s, "the RMA handle");
  /* NCCL 2.30 passes its net context here, not the RMA one: so do we. */
  int unrelated = 0;
  if (!rc) rc = check(r->connect(&unrelated, hp, 2, rank, listen, &p->coll), "connect");
  if (check(r->closeListen(listen), "closeListen")) rc = -1;
  if (rc) return -1;
  ncclRmaConfig_v14_t config = {.nContexts = 1, .trafficClass = -1, .rankStride = 1};
  if (check(r->createContext(p->coll, &config, &p->rctx), "createContext")) goto fail;
  p->signal = aligned_alloc(4096, SIGNAL_BYTES);
  if (!p->signal) goto fail;
  memset(p->signal, 0, SIGNAL_BYTES);
  if (check(r->regMrSym(p->coll, p->signal, SIGNAL_BYTES, NCCL_PTR_HOST, 0, &p->signal_win), "regMrSym (signals)"))
    goto fail;
  return 0;
fail:
  if (p->rctx) r->destroyContext(p->rctx);
  r->closeColl(p->coll);
  free(p->signal);
  p->rctx = p->coll = p->signal = NULL;
  return -1;
}

static int plugin_disconnect(struct perf_rma *t) {
  struct rma_plugin *p = as_rma_plugin(t);
  const ncclRma_v14_t *r = p->table;
  bool failed = false;
  int rc = check(r->queryLastError(p->rctx, &failed), "queryLastError");
  if (failed) {
    perf_error("plugin RMA: queryLastError reports a failed op");
    rc = -1;
  }
  if (check(r->deregMrSym(p->coll, p->signal_win), "deregMrSym (signals)")) rc = -1;
  if (check(r->destroyContext(p->rctx), "destroyContext")) rc = -1;
  if (check(r->closeColl(p->coll), "closeColl")) rc = -1;
  free(p->signal);
  p->rctx = p->coll = p->signal = p->signal_win = NULL;
  return rc;
}

static int plugin_reg(struct perf_rma *t, void *buf, size_t len, void **win) {
  struct rma_plugin *p = as_rma_plugin(t);
  return check(p->table->regMrSym(p->coll, buf, len, NCCL_PTR_HOST, 0, win), "regMrSym");
}

static int plugin_dereg(struct perf_rma *t, void *win) {
  struct rma_plugin *p = as_rma_plugin(t);
  return check(p->table->deregMrSym(p->coll, win), "deregMrSym");
}

static int plugin_put(struct perf_rma *t, void *src, size_t src_off, void *dst, size_t dst_off, size_t size,
                      int signal, void **req) {
  struct rma_plugin *p = as_rma_plugin(t);
  if (!signal) return check(p->table->iput(p->rctx, 0, src_off, src, size, dst_off, dst, p->peer, req), "iput");
  return check(p->table->iputSignal(p->rctx, 0, src_off, src, size, dst_off, dst, p->peer, 0, p->signal_win, 1,
                                    NCCL_NET_SIGNAL_OP_ADD, true, req),
               "iputSignal");
}

static int plugin_get(struct perf_rma *t, void *local, size_t local_off, void *remote, size_t remote_off,
                      size_t size, void **req) {
  struct rma_plugin *p = as_rma_plugin(t);
  return check(p->table->iget(p->rctx, 0, remote_off, remote, size, local_off, local, p->peer, req), "iget");
}

static int plugin_test(struct perf_rma *t, void *req, int *done) {
  struct rma_plugin *p = as_rma_plugin(t);
  *done = 0;
  return check(p->table->test(p->coll, req, done), "test");
}

static int plugin_signals(struct perf_rma *t, uint64_t *count) {
  struct rma_plugin *p = as_rma_plugin(t);
  if (check(p->table->rmaProgress(p->rctx), "rmaProgress")) return -1;
  *count = __atomic_load_n(&p->signal[0], __ATOMIC_ACQUIRE);
  return 0;
}

static void plugin_destroy(struct perf_transport *t) {
  struct rma_plugin *p = (struct rma_plugin *)t;
  if (p->ctx) check(p->table->finalize(p->ctx), "finalize");
  free(p);
}

static const struct perf_transport_ops destroy_only = {.destroy = plugin_destroy};

static const struct perf_rma_ops plugin_rma_ops = {
    .connect = plugin_connect,
    .reg = plugin_reg,
    .dereg = plugin_dereg,
    .put = plugin_put,
    .get = plugin_get,
    .test = plugin_test,
    .signals = plugin_signals,
    .disconnect = plugin_disconnect,
};

static int describe(struct rma_plugin *p, const char *found) {
  const ncclRma_v14_t *r = p->table;
  int ndev = 0;
  if (check(r->devices(&ndev), "devices")) return -1;
  if (p->dev >= ndev) {
    perf_error("--dev %d: the plugin offers RMA on %d device%s", p->dev, ndev, ndev == 1 ? "" : "s");
    return -1;
  }
  ncclNetProperties_v12_t props;
  memset(&props, 0, sizeof(props));
  if (check(r->getProperties(p->dev, &props), "getProperties")) return -1;
  if (!(props.ptrSupport & NCCL_PTR_HOST)) {
    perf_error("--rma: RMA device %d takes no host windows (ptrSupport 0x%x)", p->dev, (unsigned)props.ptrSupport);
    return -1;
  }
  snprintf(p->base.base.device, sizeof(p->base.base.device), "dev %d of %d: %s, %d Mbps, pci %s", p->dev, ndev,
           props.name ? props.name : "?", props.speed, props.pciPath ? props.pciPath : "none");
  snprintf(p->base.base.description, sizeof(p->base.base.description), "plugin %s (ncclRma v14) %s",
           r->name ? r->name : "?", found);
  /* Ours chooses its provider with this process's code and environment. */
  struct fi_info *infos = NULL;
  char reason[160];
  if (r->name && !strcmp(r->name, "SRD") &&
      !srd_fabric_choose(&infos, p->base.base.provider, sizeof(p->base.base.provider), reason, sizeof(reason)))
    fi_freeinfo(infos);
  return 0;
}

struct perf_transport *perf_rma_plugin_open(const char *path, int dev) {
  /* Our plugin offers RMA only when asked; a user's setting wins. */
  setenv("NCCL_SRD_RMA", "host", 0);
  struct rma_plugin *p = calloc(1, sizeof(*p));
  if (!p) return NULL;
  p->base.base.ops = &destroy_only;
  p->base.rma = &plugin_rma_ops;
  p->dev = dev;
  snprintf(p->base.base.kind, sizeof(p->base.base.kind), "plugin");
  char found[PATH_MAX] = "";
  void *lib = perf_plugin_load(path, found, sizeof(found));
  if (!lib) goto fail;
  p->table = dlsym(lib, "ncclRmaPlugin_v14");
  if (!p->table || !p->table->init || !p->table->iput || !p->table->iputSignal || !p->table->iget) {
    perf_error("--rma: %s exports no usable ncclRmaPlugin_v14 table: it offers NCCL no one-sided RMA", found);
    goto fail;
  }
  struct timeval tv;
  gettimeofday(&tv, NULL);
  last_log[0] = 0;
  if (p->table->init(&p->ctx, ((uint64_t)getpid() << 32) ^ (uint64_t)tv.tv_usec, remembering_logger) != ncclSuccess) {
    perf_error("--rma: the plugin's RMA init failed%s%s", last_log[0] ? ": " : " (it logged no reason)", last_log);
    p->ctx = NULL;
    goto fail;
  }
  if (describe(p, found)) goto fail;
  return &p->base.base;
fail:
  plugin_destroy(&p->base.base);
  return NULL;
}
