/* Drive any ncclNet plugin exactly as NCCL does. This file is the only place
 * in the tools that knows ABI versions: it picks the highest
 * ncclNetPlugin_vN table the library exports and adapts its calls (int sizes
 * in v8, profiler handles from v10, per-communicator context from v11). */
#include <dlfcn.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <unistd.h>

#include <rdma/fabric.h>

#include "nccl/net.h"
#include "perf_log.h"
#include "perf_plugin.h"
#include "srd/cuda.h"
#include "srd/topo.h"
#include "perf_transport.h"

#define OUR_PLUGIN "libnccl-net-srd.so"

struct plugin {
  struct perf_transport base;
  void *lib;
  int dev;
  void *ctx; /* v11+: from init(), passed to listen/connect */
  union {
    ncclNet_v8_t *v8;
    ncclNet_v9_t *v9;
    ncclNet_v10_t *v10;
    ncclNet_v11_t *v11;
    ncclNet_v12_t *v12;
  } net;
};

static struct plugin *as_plugin(struct perf_transport *t) { return (struct plugin *)t; }

/* NCCL's logger, for the plugin's messages. */
void perf_plugin_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line, const char *fmt,
                        ...) {
  static int max_level = -1;
  if (max_level < 0) {
    const char *v = getenv("NCCL_DEBUG");
    max_level = !v ? NCCL_LOG_WARN
                : !strcasecmp(v, "TRACE") ? NCCL_LOG_TRACE
                : !strcasecmp(v, "INFO") ? NCCL_LOG_INFO
                : !strcasecmp(v, "NONE") ? NCCL_LOG_NONE
                                          : NCCL_LOG_WARN;
  }
  if (level == NCCL_LOG_NONE || (int)level > max_level) return;
  char msg[1024], text[1100];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  snprintf(text, sizeof(text), "%s %s", level == NCCL_LOG_WARN ? "NCCL WARN" : "NCCL INFO", msg);
  perf_log_line(text);
}

static int check(ncclResult_t rc, const char *call) {
  if (rc == ncclSuccess) return 0;
  perf_error("plugin %s failed: ncclResult %d%s", call, (int)rc,
             rc == ncclRemoteError ? " (remote error: the peer failed or vanished)"
             : rc == ncclSystemError ? " (system error)"
                                     : "");
  return -1;
}

/* For the calls whose signature is the same in every version. */
#define CALL(p, fn, ...)                                                                                               \
  ((p)->base.net_version == 12   ? (p)->net.v12->fn(__VA_ARGS__)                                                       \
   : (p)->base.net_version == 11 ? (p)->net.v11->fn(__VA_ARGS__)                                                       \
   : (p)->base.net_version == 10 ? (p)->net.v10->fn(__VA_ARGS__)                                                       \
   : (p)->base.net_version == 9  ? (p)->net.v9->fn(__VA_ARGS__)                                                        \
                                 : (p)->net.v8->fn(__VA_ARGS__))

static int plugin_listen(struct perf_transport *t, void *handle, void **listen_comm) {
  struct plugin *p = as_plugin(t);
  ncclResult_t rc;
  switch (t->net_version) {
  case 12: rc = p->net.v12->listen(p->ctx, p->dev, handle, listen_comm); break;
  case 11: rc = p->net.v11->listen(p->ctx, p->dev, handle, listen_comm); break;
  case 10: rc = p->net.v10->listen(p->dev, handle, listen_comm); break;
  case 9: rc = p->net.v9->listen(p->dev, handle, listen_comm); break;
  default: rc = p->net.v8->listen(p->dev, handle, listen_comm); break;
  }
  return check(rc, "listen");
}

static int plugin_connect(struct perf_transport *t, void *handle, void **send_comm) {
  struct plugin *p = as_plugin(t);
  ncclNetDeviceHandle_v8_t *dev_comm = NULL;
  ncclNetCommConfig_v10_t config = {.trafficClass = -1};
  ncclResult_t rc;
  switch (t->net_version) {
  case 12: rc = p->net.v12->connect(p->ctx, p->dev, handle, send_comm, &dev_comm); break;
  case 11: rc = p->net.v11->connect(p->ctx, p->dev, handle, send_comm, &dev_comm); break;
  case 10: rc = p->net.v10->connect(p->dev, &config, handle, send_comm, &dev_comm); break;
  case 9: rc = p->net.v9->connect(p->dev, handle, send_comm, &dev_comm); break;
  default: rc = p->net.v8->connect(p->dev, handle, send_comm, &dev_comm); break;
  }
  return check(rc, "connect");
}

static int plugin_accept(struct perf_transport *t, void *listen_comm, void **recv_comm) {
  struct plugin *p = as_plugin(t);
  ncclNetDeviceHandle_v8_t *dev_comm = NULL;
  return check(CALL(p, accept, listen_comm, recv_comm, &dev_comm), "accept");
}

static int plugin_reg(struct perf_transport *t, void *comm, void *buf, size_t size, void **mhandle) {
  struct plugin *p = as_plugin(t);
  return check(CALL(p, regMr, comm, buf, size, t->cuda ? NCCL_PTR_CUDA : NCCL_PTR_HOST, mhandle), "regMr");
}

static int plugin_dereg(struct perf_transport *t, void *comm, void *mhandle) {
  struct plugin *p = as_plugin(t);
  return check(CALL(p, deregMr, comm, mhandle), "deregMr");
}

static int plugin_isend(struct perf_transport *t, void *send_comm, void *buf, size_t size, int tag, void *mhandle,
                        void **request) {
  struct plugin *p = as_plugin(t);
  ncclResult_t rc;
  switch (t->net_version) {
  case 12: rc = p->net.v12->isend(send_comm, buf, size, tag, mhandle, NULL, request); break;
  case 11: rc = p->net.v11->isend(send_comm, buf, size, tag, mhandle, NULL, request); break;
  case 10: rc = p->net.v10->isend(send_comm, buf, size, tag, mhandle, NULL, request); break;
  case 9: rc = p->net.v9->isend(send_comm, buf, size, tag, mhandle, request); break;
  default:
    if (size > INT_MAX) {
      perf_error("ncclNet v8 carries sizes in an int: %zu bytes is too large", size);
      return -1;
    }
    rc = p->net.v8->isend(send_comm, buf, (int)size, tag, mhandle, request);
    break;
  }
  return check(rc, "isend");
}

static int plugin_irecv(struct perf_transport *t, void *recv_comm, int n, void **bufs, size_t *sizes, int *tags,
                        void **mhandles, void **request) {
  struct plugin *p = as_plugin(t);
  ncclResult_t rc;
  switch (t->net_version) {
  case 12: rc = p->net.v12->irecv(recv_comm, n, bufs, sizes, tags, mhandles, NULL, request); break;
  case 11: rc = p->net.v11->irecv(recv_comm, n, bufs, sizes, tags, mhandles, NULL, request); break;
  case 10: rc = p->net.v10->irecv(recv_comm, n, bufs, sizes, tags, mhandles, NULL, request); break;
  case 9: rc = p->net.v9->irecv(recv_comm, n, bufs, sizes, tags, mhandles, request); break;
  default: {
    int isizes[NCCL_NET_MAX_REQUESTS];
    for (int i = 0; i < n; i++) {
      if (sizes[i] > INT_MAX) {
        perf_error("ncclNet v8 carries sizes in an int: %zu bytes is too large", sizes[i]);
        return -1;
      }
      isizes[i] = (int)sizes[i];
    }
    rc = p->net.v8->irecv(recv_comm, n, bufs, isizes, tags, mhandles, request);
    break;
  }
  }
  return check(rc, "irecv");
}

static int plugin_test(struct perf_transport *t, void *request, int *done, size_t *sizes) {
  struct plugin *p = as_plugin(t);
  int isizes[PERF_TEST_SIZES];
  for (int i = 0; i < PERF_TEST_SIZES; i++) isizes[i] = -1;
  *done = 0;
  if (check(CALL(p, test, request, done, isizes), "test")) return -1;
  if (*done)
    for (int i = 0; i < PERF_TEST_SIZES; i++) sizes[i] = isizes[i] < 0 ? 0 : (size_t)isizes[i];
  return 0;
}

static int plugin_close_send(struct perf_transport *t, void *comm) {
  return check(CALL(as_plugin(t), closeSend, comm), "closeSend");
}
static int plugin_close_recv(struct perf_transport *t, void *comm) {
  return check(CALL(as_plugin(t), closeRecv, comm), "closeRecv");
}
static int plugin_close_listen(struct perf_transport *t, void *comm) {
  return check(CALL(as_plugin(t), closeListen, comm), "closeListen");
}

static void plugin_destroy(struct perf_transport *t) {
  struct plugin *p = as_plugin(t);
  if (p->ctx && t->net_version >= 11) {
    ncclResult_t rc = t->net_version == 12 ? p->net.v12->finalize(p->ctx) : p->net.v11->finalize(p->ctx);
    check(rc, "finalize");
  }
  /* The library stays loaded: plugins may keep threads or atexit handlers. */
  free(p);
}

static const struct perf_transport_ops plugin_ops = {
    .listen = plugin_listen,
    .connect = plugin_connect,
    .accept = plugin_accept,
    .reg = plugin_reg,
    .dereg = plugin_dereg,
    .isend = plugin_isend,
    .irecv = plugin_irecv,
    .test = plugin_test,
    .close_send = plugin_close_send,
    .close_recv = plugin_close_recv,
    .close_listen = plugin_close_listen,
    .destroy = plugin_destroy,
};

/* Our plugin installed beside the tool (bin/../lib), in a libtool build tree
 * (.libs beside the binary), else whatever the library path finds. */
static void *load_default(char *found, size_t found_len, char *tried, size_t tried_len) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  tried[0] = 0;
  if (n > 0) {
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    static const char *const rel[] = {"../lib/", ".libs/", "../.libs/"};
    for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
      char path[PATH_MAX + 64];
      snprintf(path, sizeof(path), "%s/%s" OUR_PLUGIN, exe, rel[i]);
      if (access(path, R_OK)) {
        snprintf(tried + strlen(tried), tried_len - strlen(tried), "%s%s", tried[0] ? ", " : "", path);
        continue;
      }
      void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
      if (lib) {
        char real[PATH_MAX];
        snprintf(found, found_len, "%s", realpath(path, real) ? real : path);
        return lib;
      }
      perf_error("cannot load %s: %s", path, dlerror());
      return NULL;
    }
  }
  snprintf(tried + strlen(tried), tried_len - strlen(tried), "%s%s (library path)", tried[0] ? ", " : "", OUR_PLUGIN);
  snprintf(found, found_len, "%s", OUR_PLUGIN);
  return dlopen(OUR_PLUGIN, RTLD_NOW | RTLD_LOCAL);
}

static int pick_table(struct plugin *p, const char *path, int version) {
  static const char *const symbols[] = {"ncclNetPlugin_v12", "ncclNetPlugin_v11", "ncclNetPlugin_v10",
                                        "ncclNetPlugin_v9", "ncclNetPlugin_v8"};
  for (int i = 0; i < 5; i++) {
    if (version && version != 12 - i) continue;
    void *sym = dlsym(p->lib, symbols[i]);
    if (!sym) continue;
    p->base.net_version = 12 - i;
    switch (p->base.net_version) {
    case 12: p->net.v12 = sym; break;
    case 11: p->net.v11 = sym; break;
    case 10: p->net.v10 = sym; break;
    case 9: p->net.v9 = sym; break;
    case 8: p->net.v8 = sym; break;
    default: break;
    }
    return 0;
  }
  if (version) {
    perf_error("%s does not export ncclNetPlugin_v%d (--net-version)", path, version);
    return -1;
  }
  perf_error("%s exports none of ncclNetPlugin_v12 .. ncclNetPlugin_v8: not an ncclNet plugin of NCCL 2.20 or later",
             path);
  return -1;
}

static int plugin_init(struct plugin *p) {
  ncclResult_t rc;
  switch (p->base.net_version) {
  case 12:
  case 11: {
    ncclNetCommConfig_v10_t config = {.trafficClass = -1};
    struct timeval tv;
    gettimeofday(&tv, NULL);
    uint64_t comm_id = ((uint64_t)getpid() << 32) ^ (uint64_t)tv.tv_usec;
    rc = p->base.net_version == 12 ? p->net.v12->init(&p->ctx, comm_id, &config, perf_plugin_logger, NULL)
                                   : p->net.v11->init(&p->ctx, comm_id, &config, perf_plugin_logger, NULL);
    break;
  }
  case 10: rc = p->net.v10->init(perf_plugin_logger, NULL); break;
  case 9: rc = p->net.v9->init(perf_plugin_logger); break;
  default: rc = p->net.v8->init(perf_plugin_logger); break;
  }
  return check(rc, "init");
}

/* The fields srd-perf needs, whatever the version's layout (v9 inserted
 * forceFlush before speed, so v8 is not a prefix of the later ones). */
struct dev_props {
  const char *name, *pci_path;
  int ptr_support, speed, max_recvs;
};

#define TAKE_PROPS(out, in)                                                                                            \
  ((out)->name = (in).name, (out)->pci_path = (in).pciPath, (out)->ptr_support = (in).ptrSupport,                      \
   (out)->speed = (in).speed, (out)->max_recvs = (in).maxRecvs)

static int get_props(struct plugin *p, struct dev_props *out) {
  ncclResult_t rc;
  switch (p->base.net_version) {
  case 12: {
    ncclNetProperties_v12_t v;
    memset(&v, 0, sizeof(v));
    rc = p->net.v12->getProperties(p->dev, &v);
    TAKE_PROPS(out, v);
    break;
  }
  case 11: {
    ncclNetProperties_v11_t v;
    memset(&v, 0, sizeof(v));
    rc = p->net.v11->getProperties(p->dev, &v);
    TAKE_PROPS(out, v);
    break;
  }
  case 10:
  case 9: {
    ncclNetProperties_v9_t v;
    memset(&v, 0, sizeof(v));
    rc = p->base.net_version == 10 ? p->net.v10->getProperties(p->dev, &v) : p->net.v9->getProperties(p->dev, &v);
    TAKE_PROPS(out, v);
    break;
  }
  default: {
    ncclNetProperties_v8_t v;
    memset(&v, 0, sizeof(v));
    rc = p->net.v8->getProperties(p->dev, &v);
    TAKE_PROPS(out, v);
    break;
  }
  }
  return check(rc, "getProperties");
}

static int describe_device(struct plugin *p) {
  int ndev = 0;
  if (check(CALL(p, devices, &ndev), "devices")) return -1;
  if (p->dev >= ndev) {
    perf_error("--dev %d: the plugin has %d device%s", p->dev, ndev, ndev == 1 ? "" : "s");
    return -1;
  }
  struct dev_props props;
  if (get_props(p, &props)) return -1;
  if (!p->base.cuda && !(props.ptr_support & NCCL_PTR_HOST)) {
    perf_error("device %d does not accept host memory (ptrSupport 0x%x)", p->dev, props.ptr_support);
    return -1;
  }
  if (p->base.cuda && !(props.ptr_support & NCCL_PTR_CUDA)) {
    /* Without a GPU the plugin's ptrSupport says only "host": name the
     * cause the user can act on instead. */
    const struct srd_cuda *cu = srd_cuda_get();
    if (!cu->usable) {
      perf_error("--cuda: no usable GPU on this host (%s)", cu->reason);
      return -1;
    }
    perf_error("--cuda: device %d does not accept GPU memory (ptrSupport 0x%x; srd-info says why for our plugin)",
               p->dev, props.ptr_support);
    return -1;
  }
  p->base.max_recvs = props.max_recvs > 0 ? props.max_recvs : 1;
  snprintf(p->base.device, sizeof(p->base.device), "dev %d of %d: %s, %d Mbps, pci %s", p->dev, ndev,
           props.name ? props.name : "?", props.speed, props.pci_path ? props.pci_path : "none");
  return 0;
}

void *perf_plugin_load(const char *path, char *found, size_t found_len) {
  void *lib;
  if (path && *path) {
    snprintf(found, found_len, "%s", path);
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) perf_error("cannot load plugin %s: %s", path, dlerror());
    return lib;
  }
  char tried[4 * PATH_MAX];
  lib = load_default(found, found_len, tried, sizeof(tried));
  if (!lib)
    perf_error("cannot find our plugin " OUR_PLUGIN " (tried %s): %s; build it, give --plugin PATH, or use --raw", tried,
               dlerror());
  return lib;
}

struct perf_transport *perf_plugin_open(const char *path, int version, int dev, int cuda) {
  struct plugin *p = calloc(1, sizeof(*p));
  if (!p) return NULL;
  p->base.ops = &plugin_ops;
  p->dev = dev;
  p->base.cuda = cuda;
  snprintf(p->base.kind, sizeof(p->base.kind), "plugin");
  char found[PATH_MAX] = "";
  p->lib = perf_plugin_load(path, found, sizeof(found));
  if (!p->lib || pick_table(p, found, version) || plugin_init(p) || describe_device(p)) {
    plugin_destroy(&p->base); /* finalizes what init made; the library stays loaded */
    return NULL;
  }
  const char *name = p->net.v8->name; /* name is the first member in every version */
  /* Our plugin chooses its provider with the same code and environment as
   * this process; another plugin's provider is not known ("" in the table,
   * null in JSON). */
  struct fi_info *infos = NULL;
  char reason[160];
  if (name && !strcmp(name, "SRD") &&
      !srd_fabric_choose(&infos, p->base.provider, sizeof(p->base.provider), reason, sizeof(reason)))
    fi_freeinfo(infos);
  snprintf(p->base.description, sizeof(p->base.description), "plugin %s (ncclNet v%d) %s", name ? name : "?",
           p->base.net_version, found);
  return &p->base;
}
