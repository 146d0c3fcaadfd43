/* Load the built plugin as NCCL does (dlopen RTLD_NOW|RTLD_LOCAL) and find
 * ncclNetPlugin_v8 .. _v12, each named "SRD" with every function NCCL calls.
 * Each table is then initialized in its own process (NCCL uses one version
 * per process) and must report at least one device with sane properties. */
#include <stdio.h>
#include <string.h>

#include "srdtest.h"

#define FIRST 8
#define LAST 12

/* The functions NCCL calls unconditionally, by version. */
#define CHECK_COMMON(t)                                                                                  \
  do {                                                                                                   \
    ST_CHECK((t)->init && (t)->devices && (t)->getProperties && (t)->listen && (t)->connect &&          \
                 (t)->accept && (t)->regMr && (t)->regMrDmaBuf && (t)->deregMr && (t)->isend &&          \
                 (t)->irecv && (t)->iflush && (t)->test && (t)->closeSend && (t)->closeRecv &&           \
                 (t)->closeListen,                                                                       \
             "v%d: a required function is NULL", v);                                                     \
    ST_CHECK(!(t)->getDeviceMr && !(t)->irecvConsumed, "v%d: getDeviceMr/irecvConsumed are set (no device offload)", v); \
  } while (0)

static void check_table(int v, void *table) {
  const char *name = *(const char *const *)table; /* name is the first member in every version */
  ST_CHECK(name && strcmp(name, "SRD") == 0, "ncclNetPlugin_v%d is named \"%s\", not \"SRD\"", v, name ? name : "(null)");
  switch (v) {
  case 8: CHECK_COMMON((ncclNet_v8_t *)table); break;
  case 9: CHECK_COMMON((ncclNet_v9_t *)table); break;
  case 10: CHECK_COMMON((ncclNet_v10_t *)table); break;
  case 11:
    CHECK_COMMON((ncclNet_v11_t *)table);
    ST_CHECK(((ncclNet_v11_t *)table)->finalize, "v11: finalize is NULL");
    break;
  default:
    CHECK_COMMON((ncclNet_v12_t *)table);
    ST_CHECK(((ncclNet_v12_t *)table)->finalize, "v12: finalize is NULL");
    break;
  }
}

static int one_version(int rank, int nranks, void *arg) {
  const struct st_ctx *ctx = arg;
  int v = FIRST + rank;
  void *table = st_plugin_table(v);
  ST_CHECK(table, "ncclNetPlugin_v%d not found in %s", v, st_plugin_path());
  check_table(v, table);
  st_setup(ctx, v);
  int ndev = 0;
  ST_NCCL(st_net_devices(&ndev));
  ST_CHECK(ndev >= 1, "v%d: %d devices", v, ndev);
  for (int d = 0; d < ndev; d++) {
    struct st_props p;
    ST_NCCL(st_net_get_properties(d, &p));
    ST_CHECK(p.name && *p.name, "v%d dev %d: no name", v, d);
    ST_CHECK(p.ptr_support & NCCL_PTR_HOST, "v%d dev %d: ptrSupport 0x%x lacks NCCL_PTR_HOST", v, d, p.ptr_support);
    ST_CHECK(p.reg_is_global == 1, "v%d dev %d: regIsGlobal %d", v, d, p.reg_is_global);
    ST_CHECK(p.max_recvs == 8, "v%d dev %d: maxRecvs %d, expected 8", v, d, p.max_recvs);
    ST_CHECK(p.max_comms >= 1, "v%d dev %d: maxComms %d", v, d, p.max_comms);
    ST_CHECK(p.speed > 0, "v%d dev %d: speed %d", v, d, p.speed);
    ST_CHECK(p.latency >= 0, "v%d dev %d: latency %g", v, d, (double)p.latency);
    /* tests/netns/topo-netns.sh reads each version's speed from these lines. */
    st_note("v%d dev %d: %s pci %s speed %d Mbps latency %g us maxComms %d maxRecvs %d ptrSupport 0x%x", v, d, p.name,
            p.pci_path ? p.pci_path : "(none)", p.speed, (double)p.latency, p.max_comms, p.max_recvs, p.ptr_support);
  }
  ST_NCCL(st_net_finalize());
  return 0;
}

static int all_versions(const struct st_ctx *ctx) {
  char label[96];
  snprintf(label, sizeof label, "%s[%s]", ctx->test, ctx->provider);
  /* One process per version: rank r checks v(8 + r). */
  return st_group_run(label, LAST - FIRST + 1, one_version, (void *)ctx, NULL);
}

int main(int argc, char **argv) {
  static const struct st_case cases[] = {{"net-tables", all_versions}};
  return st_main(argc, argv, cases, 1);
}
