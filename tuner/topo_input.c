/* The model's view of the transport, from the same topo/ code the net plugin
 * uses: which provider, how many rails per GPU and per node, how fast, and
 * whether EFA will keep 128-byte writes in order. Discovered once per process
 * (every communicator's init asks; hwloc and fi_getinfo are not free). */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <rdma/fabric.h>

#include "srd/gdr.h"
#include "srd/log.h"
#include "srd/param.h"
#include "srd/topo.h"
#include "srd/tuner.h"

/* efa: every NIC's endpoint granted 128-byte ordered writes and writes with
 * its device (srd_ll_rule_for); the net plugin asks the same of its endpoints. */
static int probe_ordered(const struct srd_nic_list *nics) {
  if (strncmp(nics->provider, "efa", 3) || nics->n == 0) return 0;
  for (int i = 0; i < nics->n; i++) {
    int ordered, device_writes;
    srd_efa_probe(nics->nics[i].info, &ordered, &device_writes);
    if (ordered != 1 || device_writes != 1) return 0;
  }
  return 1;
}

static struct srd_tuner_net discovered;
static pthread_once_t discover_once = PTHREAD_ONCE_INIT;

static void describe_fallback(struct srd_tuner_net *net) {
  memset(net, 0, sizeof(*net));
  net->rails_per_gpu = net->rails_per_node = 1;
  net->rail_gbps = SRD_DEFAULT_SPEED_MBPS / 1000.0;
  srd_tuner_net_defaults(net, "unknown", 0, 0);
}

static void discover(void) {
  struct srd_tuner_net *net = &discovered;
  struct srd_nic_list nics;
  if (srd_topo_discover(&nics)) {
    describe_fallback(net);
    SRD_INFO(NCCL_INIT | NCCL_TUNING, "tuner: no usable libfabric provider; modelling one tcp-like rail");
    return;
  }
  memset(net, 0, sizeof(*net));
  long long total_mbps = 0;
  int loopback = 1;
  for (int i = 0; i < nics.n; i++) {
    total_mbps += nics.nics[i].speed_mbps;
    if (strcmp(nics.nics[i].name, "lo")) loopback = 0;
  }
  net->rails_per_node = nics.n;
  net->rails_per_gpu = nics.n;
  net->rail_gbps = (double)total_mbps / nics.n / 1000.0;

  struct srd_topo topo;
  int grouped = srd_topo_group(&nics, NULL, (int)srd_param_int(SRD_PARAM_RAILS), &topo) == 0 && topo.ngroups > 0;
  if (grouped) {
    int rails = 0;
    for (int g = 0; g < topo.ngroups; g++) rails += topo.groups[g].nnics;
    net->rails_per_gpu = (rails + topo.ngroups - 1) / topo.ngroups;
  }
  srd_tuner_net_defaults(net, nics.provider, loopback, probe_ordered(&nics));
  /* The flush is paid only where the net plugin's own GPU decision asks for
   * one: same inputs, same rule (src/topo/gdr.c). */
  if (grouped) {
    struct srd_gdr_inputs in;
    struct srd_gdr_decision dec;
    srd_gdr_gather(&nics, &topo.groups[0], srd_gdr_mode(), &in);
    srd_gdr_decide(&in, &dec);
    net->gdr_flush = dec.gpu && dec.flush;
  }
  SRD_INFO(NCCL_INIT | NCCL_TUNING,
           "tuner: provider %s%s, %d NIC(s) per node, %d per GPU, %.0f Gbit/s each; hop %.0f us; LL over the "
           "network %s; LL128 over the network %s; GPU receive flush %s",
           net->provider, loopback ? " (loopback)" : "", net->rails_per_node, net->rails_per_gpu, net->rail_gbps,
           net->hop_us, net->ll_safe ? "allowed" : "unsafe: never chosen",
           net->ll128_in_order ? "safe (in-order 128-byte writes)" : "unsafe: never chosen",
           net->gdr_flush ? "modelled" : "none");
  srd_topo_free(&nics);
}

void srd_tuner_net_discover(struct srd_tuner_net *out) {
  pthread_once(&discover_once, discover);
  *out = discovered;
}
