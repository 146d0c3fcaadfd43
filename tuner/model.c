/* Alpha-beta cost model of NCCL's ring, tree and PAT collectives over the
 * network, per protocol. Pure: no I/O, no globals, no environment.
 *
 * time = base(proto) + steps_net * hop_net(proto) + steps_intra * hop_intra(proto)
 *        + nbytes * traffic(coll, algo) / bandwidth(proto, algo)
 *
 * Bandwidth is the node's network bandwidth (rails x speed x efficiency): in a
 * ring every node sends and receives through its NICs exactly the bytes one
 * rank would send, so bus bandwidth equals the node's network bandwidth; the
 * intra-node links (NVLink, PCIe) are faster and leave the choice unchanged.
 * Latency is counted in hops: a network hop costs the provider's small-message
 * latency plus what the protocol adds on top; an intra-node hop costs what
 * NVLink/PCIe steps cost NCCL. Every term is affine in nbytes, so as sizes grow
 * the cheapest entry can only move to entries with a smaller per-byte cost:
 * the choice never flaps between neighbouring sizes. */
#include <string.h>

#include "srd/topo.h"
#include "srd/tuner.h"

/* ---- Provider classes ---------------------------------------------------------
 * hop_us: one small message from one proxy to the next, through the NIC.
 *  efa   15 us: SRD's one-way latency is ~10 us; NCCL's proxy adds its poll loop.
 *  tcp   40 us: kernel TCP on both ends plus ofi_rxm's rendezvous, 30-50 us
 *               between hosts on a 10-100 GbE network.
 *  tcp on loopback only, 10 us: no wire, only two kernel crossings; a 2-rank
 *               8-byte all_reduce takes ~26 us in total there (2 hops + launch).
 *  shm    2 us: a shared-memory queue, no kernel.
 * efficiency: large-transfer throughput over link speed; SRD reaches ~90% of
 * the line rate, kernel TCP ~75%, shm copies ~80% of memcpy speed.
 * Loopback and shm report no meaningful link speed: loopback TCP moves ~4 GB/s
 * per stream on the device host (32 Gbit/s), shm about 10 GB/s (80 Gbit/s). */
#define EFA_HOP_US 15.0
#define EFA_EFFICIENCY 0.90
#define TCP_HOP_US 40.0
#define TCP_EFFICIENCY 0.75
#define LOOPBACK_HOP_US 10.0
#define LOOPBACK_GBPS 32.0
#define SHM_HOP_US 2.0
#define SHM_EFFICIENCY 0.80
#define SHM_GBPS 80.0

/* ---- Protocols --------------------------------------------------------------
 * base: kernel launch and channel setup, paid once per collective (SIMPLE sets
 *   up more warps and a step FIFO).
 * hop_intra: one step over NVLink/PCIe inside a node: LL writes data and flag
 *   together, LL128 adds a warp-level sync, SIMPLE a FIFO handshake.
 * net_extra: added to the provider's hop: LL data carries its own flags, so
 *   the receiving GPU sees it as it lands; SIMPLE waits for the proxy to see
 *   the completion and update the step counter, and with GPU buffers first
 *   reads back a few bytes to flush PCIe writes.
 * efficiency: LL sends 8 bytes of flag with 8 of data; LL128 keeps 120 of 128.
 * LL_MAX_GBS: LL is limited by the GPU polling 8-byte lines long before the
 *   network: NCCL measures 20-45 GB/s across nodes. */
static const double base_us[SRD_PROTO_COUNT] = {6.0, 8.0, 10.0};
static const double hop_intra_us[SRD_PROTO_COUNT] = {0.6, 1.2, 3.5};
static const double net_extra_us[SRD_PROTO_COUNT] = {1.0, 1.5, 4.0};
static const double proto_efficiency[SRD_PROTO_COUNT] = {0.5, 120.0 / 128.0, 1.0};
#define GDR_FLUSH_US 3.0
#define LL_MAX_GBS 30.0

/* ---- Algorithms ---------------------------------------------------------------
 * Tree (all-reduce only): a double binary tree across nodes, chains inside; each
 *   node still moves ~2x the buffer through its NICs, and pipelining up and down
 *   the tree loses ~15% against a ring.
 * PAT (all-gather, reduce-scatter, one rank per node): log-depth network
 *   latency, a per-rank bookkeeping cost on the GPU, and 75% of ring bandwidth.
 * Several operations in one group pay the ring latency each time; trees batch
 *   up to 8 operations per launch. */
#define TREE_EFFICIENCY 0.85
#define PAT_EFFICIENCY 0.75
#define PAT_PER_RANK_US 2.0
#define TREE_BATCH 8

static int ceil_log2(int n) {
  int l = 0;
  while ((1 << l) < n && l < 30) l++;
  return l;
}

static int has_prefix(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

void srd_tuner_net_defaults(struct srd_tuner_net *net, const char *provider, int loopback, int ordered_ok) {
  if (provider) {
    size_t n = strlen(provider);
    if (n >= sizeof(net->provider)) n = sizeof(net->provider) - 1;
    memcpy(net->provider, provider, n);
    net->provider[n] = 0;
  } else {
    net->provider[0] = 0;
  }
  net->gdr_flush = 0;
  struct srd_ll_rule rule;
  srd_ll_rule_for(provider, ordered_ok ? 1 : 0, ordered_ok ? 1 : 0, &rule);
  net->ll128_in_order = rule.ll128;
  net->ll_safe = rule.ll;
  if (provider && has_prefix(provider, "efa")) {
    net->hop_us = EFA_HOP_US;
    net->efficiency = EFA_EFFICIENCY;
    net->gdr_flush = 1;
  } else if (provider && has_prefix(provider, "shm")) {
    net->hop_us = SHM_HOP_US;
    net->efficiency = SHM_EFFICIENCY;
    net->rail_gbps = SHM_GBPS;
  } else if (loopback) {
    net->hop_us = LOOPBACK_HOP_US;
    net->efficiency = TCP_EFFICIENCY;
    net->rail_gbps = LOOPBACK_GBPS;
  } else {
    /* tcp, sockets and anything unknown: assume a kernel network stack. */
    net->hop_us = TCP_HOP_US;
    net->efficiency = TCP_EFFICIENCY;
  }
}

void srd_tuner_comm_init(struct srd_tuner_comm *comm, size_t nranks, size_t nnodes, int nvl_domains) {
  comm->nranks = nranks > 0 && nranks < (1u << 30) ? (int)nranks : 1;
  comm->nnodes = nnodes > 0 && nnodes <= nranks && nnodes < (1u << 30) ? (int)nnodes : 1;
  comm->net_nodes = comm->nnodes;
  /* Nodes inside one NVLink domain talk over NVLink, not over our NICs. */
  if (nvl_domains >= 1 && nvl_domains < comm->nnodes) comm->net_nodes = nvl_domains;
}

int srd_model_ll128_safe(const struct srd_tuner_net *net, const struct srd_tuner_comm *comm) {
  return comm->net_nodes <= 1 || net->ll128_in_order;
}

int srd_model_ll_safe(const struct srd_tuner_net *net, const struct srd_tuner_comm *comm) {
  return comm->net_nodes <= 1 || net->ll_safe;
}

/* Network bytes per microsecond the node sustains for one protocol. */
static double node_bytes_per_us(const struct srd_tuner_net *net, const struct srd_tuner_comm *comm, int proto) {
  int ppn = (comm->nranks + comm->net_nodes - 1) / comm->net_nodes;
  int per_gpu = net->rails_per_gpu > 0 ? net->rails_per_gpu : 1;
  int per_node = net->rails_per_node > 0 ? net->rails_per_node : per_gpu;
  /* Ranks that share the node share its NICs; a few ranks reach only theirs. */
  double rails = (double)ppn * per_gpu < per_node ? (double)ppn * per_gpu : per_node;
  double gbs = rails * (net->rail_gbps > 0 ? net->rail_gbps : 1.0) / 8.0;
  gbs *= net->efficiency > 0 ? net->efficiency : 1.0;
  gbs *= proto_efficiency[proto];
  if (proto == SRD_PROTO_LL && gbs > LL_MAX_GBS) gbs = LL_MAX_GBS;
  return gbs * 1e3; /* GB/s = 1e3 bytes per microsecond */
}

static double hop_net_us(const struct srd_tuner_net *net, int proto) {
  double us = net->hop_us + net_extra_us[proto];
  if (proto == SRD_PROTO_SIMPLE && net->gdr_flush) us += GDR_FLUSH_US;
  return us;
}

int srd_model_net_steps(const struct srd_tuner_comm *comm, int coll, int algo) {
  const int N = comm->net_nodes;
  const int is_allreduce = coll == SRD_COLL_ALLREDUCE;
  const int is_gather = coll == SRD_COLL_ALLGATHER || coll == SRD_COLL_REDUCESCATTER;
  if (coll < 0 || coll >= SRD_COLL_COUNT) return -1;
  switch (algo) {
  /* Ring: all-reduce is a reduce-scatter then an all-gather; broadcast/reduce
   * are one pipelined chain. */
  case SRD_ALGO_RING: return is_allreduce ? 2 * (N - 1) : N - 1;
  case SRD_ALGO_TREE: return is_allreduce ? 2 * ceil_log2(N) : -1; /* up and down */
  case SRD_ALGO_PAT: return is_gather && comm->nnodes == comm->nranks ? ceil_log2(N) : -1;
  default: return -1;
  }
}

void srd_model_costs(const struct srd_tuner_net *net, const struct srd_tuner_comm *comm, int coll, size_t nbytes,
                     int npipe, double cost[SRD_ALGO_COUNT][SRD_PROTO_COUNT]) {
  for (int a = 0; a < SRD_ALGO_COUNT; a++)
    for (int p = 0; p < SRD_PROTO_COUNT; p++) cost[a][p] = -1.0;
  if (coll < 0 || coll >= SRD_COLL_COUNT) return;

  const int R = comm->nranks, N = comm->net_nodes;
  const int ppn = (R + N - 1) / N;
  const double n = (double)nbytes;
  const int pipes = npipe > 0 ? npipe : 1;
  const int tree_pipes = (pipes + TREE_BATCH - 1) / TREE_BATCH;
  const int is_allreduce = coll == SRD_COLL_ALLREDUCE;
  const int is_gather = coll == SRD_COLL_ALLGATHER || coll == SRD_COLL_REDUCESCATTER;
  const int ring_steps = srd_model_net_steps(comm, coll, SRD_ALGO_RING);
  const int tree_steps = srd_model_net_steps(comm, coll, SRD_ALGO_TREE);
  const int pat_steps = srd_model_net_steps(comm, coll, SRD_ALGO_PAT);

  for (int p = 0; p < SRD_PROTO_COUNT; p++) {
    const double bw = node_bytes_per_us(net, comm, p);
    const double hop_net = hop_net_us(net, p), hop_intra = hop_intra_us[p];

    /* Ring: 2(R-1) steps for all-reduce of which 2(N-1) cross the network. */
    int intra_steps = is_allreduce ? 2 * (R - N) : R - N;
    double traffic = is_allreduce ? 2.0 * (R - 1) / R : is_gather ? (double)(R - 1) / R : 1.0;
    double lat = base_us[p] + ring_steps * hop_net + intra_steps * hop_intra;
    cost[SRD_ALGO_RING][p] = lat * pipes + n * traffic / bw;

    if (tree_steps >= 0) {
      lat = base_us[p] + tree_steps * hop_net + 2.0 * (ppn - 1) * hop_intra;
      cost[SRD_ALGO_TREE][p] = lat * tree_pipes + n * 2.0 / (bw * TREE_EFFICIENCY);
    }
    if (pat_steps >= 0 && p == SRD_PROTO_SIMPLE) { /* NCCL's PAT: one rank per node, SIMPLE only */
      lat = base_us[p] + pat_steps * hop_net + R * PAT_PER_RANK_US;
      cost[SRD_ALGO_PAT][p] = lat * pipes + n * traffic / (bw * PAT_EFFICIENCY);
    }
  }
}

const char *srd_coll_name(int coll) {
  static const char *names[SRD_COLL_COUNT] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"};
  return coll >= 0 && coll < SRD_COLL_COUNT ? names[coll] : "other";
}

const char *srd_algo_name(int algo) {
  static const char *names[SRD_ALGO_COUNT] = {"Tree", "Ring", "CollNetDirect", "CollNetChain",
                                              "NVLS", "NVLSTree", "PAT"};
  return algo >= 0 && algo < SRD_ALGO_COUNT ? names[algo] : "default";
}

const char *srd_proto_name(int proto) {
  static const char *names[SRD_PROTO_COUNT] = {"LL", "LL128", "Simple"};
  return proto >= 0 && proto < SRD_PROTO_COUNT ? names[proto] : "default";
}
