// The cost model and the per-communicator decision, on synthetic transports:
// a table of decisions with the reason for each, and properties that must
// hold everywhere (no unsafe LL128, no flapping, ignored entries stay ignored).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

extern "C" {
#include "srd/topo.h"
#include "srd/tuner.h"
}

namespace {

struct Topo {
  const char *name;
  srd_tuner_net net;
  int ppn;  // GPUs (ranks) per node
};

srd_tuner_net make_net(const char *provider, int per_gpu, int per_node, double gbps, int ll128_probe, int loopback) {
  srd_tuner_net n;
  memset(&n, 0, sizeof(n));
  n.rails_per_gpu = per_gpu;
  n.rails_per_node = per_node;
  n.rail_gbps = gbps;
  srd_tuner_net_defaults(&n, provider, loopback, ll128_probe);
  return n;
}

// p5-like: 8 GPUs, 32 EFA NICs of 100 Gbit/s (4 per GPU), in-order 128-byte writes.
// p4d-like: 8 GPUs, 4 EFA NICs (one per GPU pair), probe refused: LL128 unsafe.
// one GPU with one 100 Gbit/s EFA NIC; tcp: one 25 GbE NIC, no ordering promise.
std::vector<Topo> topologies() {
  return {
      {"p5", make_net("efa", 4, 32, 100, 1, 0), 8},
      {"p4d", make_net("efa", 1, 4, 100, 0, 0), 8},
      {"single", make_net("efa", 1, 1, 100, 0, 0), 1},
      {"tcp", make_net("tcp;ofi_rxm", 1, 1, 25, 0, 0), 1},
  };
}

// A cost table as NCCL fills it when ring, tree and PAT are enabled: every
// modelled entry has a positive estimate, the rest are ignored (-1).
struct Table {
  float t[SRD_ALGO_COUNT][SRD_PROTO_COUNT];
  explicit Table(int coll, int nranks, int nnodes, bool ll128 = true) {
    for (auto &row : t)
      for (float &c : row) c = -1.0f;
    for (int p = 0; p < SRD_PROTO_COUNT; p++) {
      if (p == SRD_PROTO_LL128 && !ll128) continue;
      t[SRD_ALGO_RING][p] = 100.0f + p;
      if (coll == SRD_COLL_ALLREDUCE) t[SRD_ALGO_TREE][p] = 110.0f + p;
    }
    if ((coll == SRD_COLL_ALLGATHER || coll == SRD_COLL_REDUCESCATTER) && nranks == nnodes)
      t[SRD_ALGO_PAT][SRD_PROTO_SIMPLE] = 120.0f;
  }
  float *data() { return &t[0][0]; }
};

struct Pick {
  int algo, proto, channels;  // applied to the table
  int best_algo, best_proto;  // the model's best, even where NCCL's pick stands
};

// One decision through the same path the shims use, on a fresh tuner.
Pick decide(const srd_tuner_net &net, int nnodes, int ppn, int coll, size_t nbytes, Table *table,
            const srd_tuner_rules *rules = nullptr, int nvl_domains = 0, int forced = 0) {
  srd_tuner *t = srd_tuner_create_with((size_t)nnodes * ppn, nnodes, nvl_domains, &net, rules, forced);
  EXPECT_NE(t, nullptr);
  srd_tuner_request rq = {coll, nbytes, 1, table ? table->data() : nullptr, SRD_ALGO_COUNT, SRD_PROTO_COUNT, 0};
  srd_tuner_decision d;
  srd_tuner_decide(t, &rq, &d);
  srd_tuner_destroy(t);
  return {d.algo, d.proto, d.channels, d.best_algo, d.best_proto};
}

// The model's own choice over a full table (NCCL's pick may stand in the
// table; the model's best is what these tests judge).
Pick decide_full(const Topo &topo, int nnodes, int coll, size_t nbytes) {
  Table table(coll, nnodes * topo.ppn, nnodes);
  Pick p = decide(topo.net, nnodes, topo.ppn, coll, nbytes, &table);
  if (p.algo >= 0) {
    EXPECT_EQ(p.algo, p.best_algo);
    EXPECT_EQ(p.proto, p.best_proto);
  }
  p.algo = p.best_algo;
  p.proto = p.best_proto;
  return p;
}

std::string name(const Pick &p) { return std::string(srd_algo_name(p.algo)) + "/" + srd_proto_name(p.proto); }

const Topo &topo(const char *n) {
  static std::vector<Topo> all = topologies();
  for (const Topo &t : all)
    if (!strcmp(t.name, n)) return t;
  abort();
}

constexpr size_t KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB;

struct Expect {
  const char *topo;
  int nodes;
  int coll;
  size_t bytes;
  const char *pick;
  const char *why;
};

}  // namespace

TEST(TunerModel, DecisionTable) {
  const Expect table[] = {
      // Latency-bound: LL has the cheapest hop; with 8 GPUs per node the tree
      // walks 2x(1 network + 7 NVLink) hops against the ring's 2x(1 + 14).
      {"p5", 2, SRD_COLL_ALLREDUCE, 8, "Tree/LL", "fewest hops, cheapest hop"},
      // 1 GiB is bandwidth-bound: SIMPLE keeps every byte, the ring moves
      // 2(R-1)/R of the buffer per node against the tree's 2/0.85.
      {"p5", 2, SRD_COLL_ALLREDUCE, 1 * GiB, "Ring/Simple", "bandwidth: ring, full-efficiency protocol"},
      // In between, LL128 (safe on p5) keeps 94% of the bandwidth with LL-like hops.
      {"p5", 2, SRD_COLL_ALLREDUCE, 4 * MiB, "Tree/LL128", "in-order EFA: LL128 is allowed and cheapest"},
      {"p5", 8, SRD_COLL_ALLREDUCE, 64 * MiB, "Tree/LL128", "mid-size on p5: LL128"},
      // 1024 nodes: a ring pays 2x1023 network hops (~45 ms); the tree's log
      // depth wins even at 1 GiB.
      {"p5", 1024, SRD_COLL_ALLREDUCE, 1 * GiB, "Tree/Simple", "ring latency grows linearly with nodes"},
      // p4d: the in-order probe failed, so neither LL128 nor LL (efa places
      // a write's bytes in any order, maybe twice): SIMPLE at every size.
      {"p4d", 2, SRD_COLL_ALLREDUCE, 8, "Tree/Simple", "latency-bound, but no LL on efa without ordering"},
      {"p4d", 4, SRD_COLL_ALLREDUCE, 4 * MiB, "Tree/Simple", "no LL128 without the in-order guarantee"},
      {"p4d", 4, SRD_COLL_ALLREDUCE, 256 * MiB, "Ring/Simple", "bandwidth-bound at 4 nodes"},
      {"p4d", 16, SRD_COLL_ALLGATHER, 64 * MiB, "Ring/Simple", "AllGather: ring only (8 GPUs/node: no PAT)"},
      // Two nodes of one GPU: ring and tree have the same two hops, the ring
      // moves fewer bytes, so the ring wins at every size.
      {"single", 2, SRD_COLL_ALLREDUCE, 8, "Ring/Simple", "ring = tree in hops at 2 nodes; no LL (efa, unordered)"},
      {"single", 2, SRD_COLL_ALLREDUCE, 1 * GiB, "Ring/Simple", "bandwidth"},
      // One GPU per node: PAT's log-depth latency beats the ring for small gathers.
      {"single", 8, SRD_COLL_ALLGATHER, 8 * KiB, "PAT/Simple", "log2(8)=3 hops against 7"},
      {"single", 8, SRD_COLL_ALLGATHER, 1 * GiB, "Ring/Simple", "PAT gets 75% of ring bandwidth"},
      {"single", 64, SRD_COLL_REDUCESCATTER, 64 * KiB, "PAT/Simple", "log depth at 64 nodes"},
      // tcp: 40 us hops make latency dominate longer; no LL128 ever.
      {"tcp", 2, SRD_COLL_ALLREDUCE, 8, "Ring/LL", "two nodes: ring"},
      {"tcp", 8, SRD_COLL_ALLREDUCE, 8, "Tree/LL", "log hops"},
      {"tcp", 8, SRD_COLL_ALLREDUCE, 256 * KiB, "Tree/Simple", "LL's halved bandwidth costs more than its hops save"},
      {"tcp", 8, SRD_COLL_ALLREDUCE, 64 * MiB, "Ring/Simple", "bandwidth"},
      {"tcp", 4, SRD_COLL_ALLGATHER, 8, "PAT/Simple", "log hops"},
      {"tcp", 2, SRD_COLL_ALLGATHER, 8, "Ring/LL", "PAT has no advantage at 2 nodes"},
      // Broadcast and Reduce are rings in NCCL: only the protocol changes.
      {"tcp", 8, SRD_COLL_BROADCAST, 8, "Ring/LL", "latency"},
      {"tcp", 8, SRD_COLL_REDUCE, 1 * GiB, "Ring/Simple", "bandwidth"},
  };
  for (const Expect &e : table) {
    Pick p = decide_full(topo(e.topo), e.nodes, e.coll, e.bytes);
    EXPECT_EQ(name(p), e.pick) << e.topo << " " << srd_coll_name(e.coll) << " " << e.nodes << " nodes " << e.bytes
                               << " B: " << e.why;
    EXPECT_EQ(p.channels, 0) << "the model leaves the channel count to NCCL";
  }
}

// Sizes from 1 B to 4 GiB, dense enough to see every switch.
static std::vector<size_t> sizes() {
  std::vector<size_t> s;
  for (size_t n = 1; n <= 4 * GiB; n = n < 8 ? n + 1 : n + n / 8) s.push_back(n);
  return s;
}

static std::vector<int> node_counts() {
  std::vector<int> n;
  for (int i = 1; i <= 16; i++) n.push_back(i);
  for (int i = 24; i <= 1024; i = i * 3 / 2) n.push_back(i);
  n.push_back(1024);
  return n;
}

TEST(TunerModel, NoLL128WhereUnsafe) {
  for (const Topo &t : topologies()) {
    for (int nodes : node_counts()) {
      srd_tuner_comm comm;
      srd_tuner_comm_init(&comm, (size_t)nodes * t.ppn, nodes, 0);
      bool safe = srd_model_ll128_safe(&t.net, &comm);
      // Only EFA with the in-order option, or no network at all, is safe.
      EXPECT_EQ(safe, nodes == 1 || !strcmp(t.name, "p5")) << t.name << " " << nodes;
      for (int coll = 0; coll < SRD_COLL_COUNT; coll++)
        for (size_t n : {size_t(8), 64 * KiB, 1 * MiB, 16 * MiB, 1 * GiB}) {
          Pick p = decide_full(t, nodes, coll, n);
          if (!safe) {
            EXPECT_NE(p.proto, SRD_PROTO_LL128) << t.name << " " << nodes << " " << coll << " " << n;
          }
        }
    }
  }
}

// LL's flags sit beside every 8 bytes: on efa, whose writes land in any
// order and perhaps twice unless the 128-byte option was granted, LL across
// the network is as unsafe as LL128.
TEST(TunerModel, NoLLOnEfaWithoutOrderedWrites) {
  for (const Topo &t : topologies()) {
    bool efa = !strncmp(t.net.provider, "efa", 3);
    for (int nodes : {1, 2, 4, 16, 128}) {
      srd_tuner_comm comm;
      srd_tuner_comm_init(&comm, (size_t)nodes * t.ppn, nodes, 0);
      bool safe = srd_model_ll_safe(&t.net, &comm);
      EXPECT_EQ(safe, nodes == 1 || !efa || t.net.ll128_in_order) << t.name << " " << nodes;
      for (int coll = 0; coll < SRD_COLL_COUNT; coll++)
        for (size_t n : {size_t(8), 4 * KiB, 64 * KiB, 1 * MiB}) {
          Pick p = decide_full(t, nodes, coll, n);
          if (!safe) {
            EXPECT_NE(p.proto, SRD_PROTO_LL) << t.name << " " << nodes << " " << coll << " " << n;
          }
        }
    }
  }
}

// The rule the tuner, the plugin and srd-info share (src/topo/efa.c).
TEST(LLRule, EfaNeedsOrderedDeviceWrites) {
  struct srd_ll_rule r;
  srd_ll_rule_for("efa", 1, 1, &r);
  EXPECT_TRUE(r.ll && r.ll128) << r.why;
  srd_ll_rule_for("efa", 0, 1, &r);
  EXPECT_FALSE(r.ll || r.ll128) << "option refused (p5en): " << r.why;
  srd_ll_rule_for("efa", -1, 1, &r);
  EXPECT_FALSE(r.ll || r.ll128) << "option not in the headers: " << r.why;
  srd_ll_rule_for("efa", 1, 0, &r);
  EXPECT_FALSE(r.ll || r.ll128) << "emulated writes never consult the option: " << r.why;
  srd_ll_rule_for("efa-direct", 0, 1, &r);
  EXPECT_FALSE(r.ll || r.ll128) << "efa-direct: the same device, the same promise: " << r.why;
  srd_ll_rule_for("tcp", -1, -1, &r);
  EXPECT_TRUE(r.ll && !r.ll128) << r.why;
}

TEST(TunerModel, NoFlappingAcrossSizes) {
  for (const Topo &t : topologies())
    for (int nodes : node_counts()) {
      if (nodes == 1) continue;
      for (int coll = 0; coll < SRD_COLL_COUNT; coll++) {
        std::vector<std::string> seen;
        for (size_t n : sizes()) {
          std::string pick = name(decide_full(t, nodes, coll, n));
          if (!seen.empty() && seen.back() == pick) continue;
          for (const std::string &old : seen)
            ASSERT_NE(old, pick) << t.name << " " << srd_coll_name(coll) << " " << nodes << " nodes: " << pick
                                 << " comes back at " << n << " B";
          seen.push_back(pick);
        }
        // Latency-bound first, bandwidth-bound last: at most one switch per entry.
        EXPECT_LE(seen.size(), 6u);
      }
    }
}

TEST(TunerModel, CostsAreAffineInSize) {
  srd_tuner_comm comm;
  srd_tuner_comm_init(&comm, 64, 8, 0);
  const srd_tuner_net &net = topo("p5").net;
  double c0[SRD_ALGO_COUNT][SRD_PROTO_COUNT], c1[SRD_ALGO_COUNT][SRD_PROTO_COUNT], c2[SRD_ALGO_COUNT][SRD_PROTO_COUNT];
  srd_model_costs(&net, &comm, SRD_COLL_ALLREDUCE, 0, 1, c0);
  srd_model_costs(&net, &comm, SRD_COLL_ALLREDUCE, 1 * MiB, 1, c1);
  srd_model_costs(&net, &comm, SRD_COLL_ALLREDUCE, 2 * MiB, 1, c2);
  for (int a = 0; a < SRD_ALGO_COUNT; a++)
    for (int p = 0; p < SRD_PROTO_COUNT; p++) {
      if (c0[a][p] < 0) continue;
      EXPECT_GT(c0[a][p], 0) << "every entry has a latency";
      EXPECT_NEAR(c2[a][p] - c1[a][p], c1[a][p] - c0[a][p], 1e-6 * c2[a][p]);
    }
  // What the model does not cover stays negative.
  EXPECT_LT(c0[SRD_ALGO_NVLS][SRD_PROTO_SIMPLE], 0);
  EXPECT_LT(c0[SRD_ALGO_COLLNET_DIRECT][SRD_PROTO_SIMPLE], 0);
  // PAT only for gathers with one rank per node.
  EXPECT_LT(c0[SRD_ALGO_PAT][SRD_PROTO_SIMPLE], 0);
}

TEST(TunerModel, IgnoredEntriesStayIgnored) {
  std::mt19937 rng(42);
  const std::vector<Topo> all = topologies();
  for (int iter = 0; iter < 3000; iter++) {
    const Topo &t = all[rng() % all.size()];
    int nodes = 1 + rng() % 64, coll = rng() % SRD_COLL_COUNT;
    size_t n = size_t(1) << (rng() % 32);
    Table table(coll, nodes * t.ppn, nodes);
    for (auto &row : table.t)
      for (float &c : row)
        if (rng() % 3 == 0) c = -1.0f;
        else if (c < 0 && rng() % 4 == 0) c = 50.0f + rng() % 100;  // NCCL may enable anything
    Table before = table;
    Pick p = decide(t.net, nodes, t.ppn, coll, n, &table);
    int changed = 0;
    for (int a = 0; a < SRD_ALGO_COUNT; a++)
      for (int pr = 0; pr < SRD_PROTO_COUNT; pr++) {
        if (before.t[a][pr] < 0) {
          ASSERT_EQ(table.t[a][pr], -1.0f) << "re-enabled " << a << "/" << pr;
        }
        if (table.t[a][pr] != before.t[a][pr]) {
          changed++;
          EXPECT_EQ(table.t[a][pr], 0.0f);
          EXPECT_EQ(a, p.algo);
          EXPECT_EQ(pr, p.proto);
        }
      }
    EXPECT_LE(changed, 1);
    if (p.algo >= 0) {
      EXPECT_EQ(changed, 1);
      // The winner is now NCCL's cheapest entry.
      for (auto &row : table.t)
        for (float c : row)
          if (c >= 0) {
            EXPECT_GE(c, table.t[p.algo][p.proto]);
          }
    }
  }
}

// Odd inputs through the decision path: NaN and infinite costs, wider or
// narrower tables than today's NCCL, huge sizes and group counts.
TEST(TunerModel, OddTablesNeverBreakTheDecision) {
  std::mt19937 rng(3);
  const std::vector<Topo> all = topologies();
  const float odd[] = {-1.0f, 0.0f, 1.0f, 1e30f, -5.0f, std::numeric_limits<float>::quiet_NaN(),
                       std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()};
  for (int iter = 0; iter < 3000; iter++) {
    const Topo &t = all[rng() % all.size()];
    int num_algo = 1 + rng() % 9, num_proto = 1 + rng() % 4;
    std::vector<float> table((size_t)num_algo * num_proto);
    for (float &c : table) c = odd[rng() % (sizeof(odd) / sizeof(odd[0]))];
    std::vector<float> before = table;
    int nodes = 1 + rng() % 2048, ppn = 1 + rng() % 8;
    srd_tuner *tu = srd_tuner_create_with((size_t)nodes * ppn, nodes, (int)(rng() % 3) - 1, &t.net, nullptr, 0);
    ASSERT_NE(tu, nullptr);
    size_t n = rng() % 2 ? rng() : ~size_t(0) >> (rng() % 64);
    srd_tuner_request rq = {(int)(rng() % 8) - 1, n, (int)(rng() % 1000) - 10, table.data(), num_algo, num_proto, 0};
    srd_tuner_decision d;
    srd_tuner_decide(tu, &rq, &d);
    for (size_t i = 0; i < table.size(); i++) {
      if (table[i] == before[i] || (std::isnan(table[i]) && std::isnan(before[i]))) continue;
      // The only edit: the chosen entry, which NCCL had enabled (>= 0), to 0.0.
      EXPECT_EQ(table[i], 0.0f);
      EXPECT_GE(before[i], 0.0f);
      EXPECT_EQ((int)i, d.algo * num_proto + d.proto);
    }
    srd_tuner_destroy(tu);
  }
}

TEST(TunerModel, LeavesNcclAloneWithoutNetworkOrWhenForced) {
  const Topo &t = topo("p5");
  // One node: the network is not involved, NCCL knows NVLink better.
  Table one(SRD_COLL_ALLREDUCE, 8, 1);
  Table copy = one;
  EXPECT_EQ(decide(t.net, 1, 8, SRD_COLL_ALLREDUCE, 1 * MiB, &one).algo, -1);
  EXPECT_EQ(memcmp(one.t, copy.t, sizeof(one.t)), 0);
  // Four nodes in one NVLink domain: no network either.
  Table mnnvl(SRD_COLL_ALLREDUCE, 32, 4);
  EXPECT_EQ(decide(t.net, 4, 8, SRD_COLL_ALLREDUCE, 1 * MiB, &mnnvl, nullptr, 1).algo, -1);
  // Eight nodes in two NVLink domains: the model runs for two network nodes,
  // where every algorithm crosses the network equally often: NCCL's pick stands.
  Table two(SRD_COLL_ALLREDUCE, 64, 8);
  Pick p2 = decide(t.net, 8, 8, SRD_COLL_ALLREDUCE, 1 * MiB, &two, nullptr, 2);
  EXPECT_GE(p2.best_algo, 0);
  EXPECT_EQ(p2.algo, -1);
  // NCCL_ALGO or NCCL_PROTO set: nothing changes.
  Table forced(SRD_COLL_ALLREDUCE, 32, 4);
  copy = forced;
  EXPECT_EQ(decide(t.net, 4, 8, SRD_COLL_ALLREDUCE, 1 * MiB, &forced, nullptr, 0, 1).algo, -1);
  EXPECT_EQ(memcmp(forced.t, copy.t, sizeof(forced.t)), 0);
  // Collectives the tuner does not know (send/recv and later ones): nothing.
  Table other(SRD_COLL_ALLREDUCE, 32, 4);
  copy = other;
  EXPECT_EQ(decide(t.net, 4, 8, 5, 1 * MiB, &other).algo, -1);
  EXPECT_EQ(memcmp(other.t, copy.t, sizeof(other.t)), 0);
}

TEST(TunerModel, DefersToAlgorithmsItDoesNotModel) {
  const Topo &t = topo("p5");
  Table table(SRD_COLL_ALLREDUCE, 32, 4);
  table.t[SRD_ALGO_NVLS_TREE][SRD_PROTO_SIMPLE] = 5.0f;  // NCCL's cheapest
  Table copy = table;
  EXPECT_EQ(decide(t.net, 4, 8, SRD_COLL_ALLREDUCE, 64 * MiB, &table).algo, -1);
  EXPECT_EQ(memcmp(table.t, copy.t, sizeof(table.t)), 0);
  // When NVLS is enabled but not NCCL's favourite, the model chooses.
  table.t[SRD_ALGO_NVLS_TREE][SRD_PROTO_SIMPLE] = 500.0f;
  EXPECT_GE(decide(t.net, 4, 8, SRD_COLL_ALLREDUCE, 64 * MiB, &table).algo, 0);
}

TEST(TunerModel, NcclsPickStandsWithinTheMargin) {
  const Topo &t = topo("tcp");
  // 8 nodes, 8 B: the model's best is Tree/LL. NCCL picking Ring/LL (14 hops
  // against 6) is far off: replaced. NCCL picking Tree/LL: left as it is.
  Table table(SRD_COLL_ALLREDUCE, 8, 8);
  table.t[SRD_ALGO_RING][SRD_PROTO_LL] = 1.0f;
  EXPECT_EQ(name(decide(t.net, 8, 1, SRD_COLL_ALLREDUCE, 8, &table)), "Tree/LL");
  EXPECT_EQ(table.t[SRD_ALGO_TREE][SRD_PROTO_LL], 0.0f);
  Table agree(SRD_COLL_ALLREDUCE, 8, 8);
  agree.t[SRD_ALGO_TREE][SRD_PROTO_LL] = 1.0f;
  Table copy = agree;
  EXPECT_EQ(decide(t.net, 8, 1, SRD_COLL_ALLREDUCE, 8, &agree).algo, -1);
  EXPECT_EQ(memcmp(agree.t, copy.t, sizeof(agree.t)), 0);
  // Near the model's LL/SIMPLE crossover both are within 10%: NCCL's stays.
  srd_tuner_comm comm;
  srd_tuner_comm_init(&comm, 8, 8, 0);
  size_t cross = 0;
  for (size_t n = 1024; n < 64 * MiB && !cross; n += n / 16) {
    double c[SRD_ALGO_COUNT][SRD_PROTO_COUNT];
    srd_model_costs(&t.net, &comm, SRD_COLL_ALLREDUCE, n, 1, c);
    if (c[SRD_ALGO_TREE][SRD_PROTO_SIMPLE] < c[SRD_ALGO_TREE][SRD_PROTO_LL]) cross = n;
  }
  ASSERT_GT(cross, 0u);
  Table near(SRD_COLL_ALLREDUCE, 8, 8);
  near.t[SRD_ALGO_TREE][SRD_PROTO_LL] = 1.0f;
  EXPECT_EQ(decide(t.net, 8, 1, SRD_COLL_ALLREDUCE, cross, &near).algo, -1);
  // An unsafe LL128 pick is always replaced, margin or not.
  Table unsafe(SRD_COLL_ALLREDUCE, 8, 8);
  unsafe.t[SRD_ALGO_TREE][SRD_PROTO_LL128] = 1.0f;
  Pick p = decide(t.net, 8, 1, SRD_COLL_ALLREDUCE, cross, &unsafe);
  EXPECT_GE(p.algo, 0);
  EXPECT_NE(p.proto, SRD_PROTO_LL128);
}

// Device measurements (BENCHMARKS.md): overrides that crossed the network as
// often as NCCL's pick lost 20-55%; those with fewer crossings won 10-57%.
TEST(TunerModel, OverridesOnlyWithFewerNetworkCrossings) {
  const Topo &t = topo("tcp");
  srd_tuner_comm c2, c4, c8;
  srd_tuner_comm_init(&c2, 2, 2, 0);
  srd_tuner_comm_init(&c4, 4, 4, 0);
  srd_tuner_comm_init(&c8, 8, 8, 0);
  EXPECT_EQ(srd_model_net_steps(&c8, SRD_COLL_ALLREDUCE, SRD_ALGO_RING), 14);
  EXPECT_EQ(srd_model_net_steps(&c8, SRD_COLL_ALLREDUCE, SRD_ALGO_TREE), 6);
  EXPECT_EQ(srd_model_net_steps(&c8, SRD_COLL_ALLGATHER, SRD_ALGO_PAT), 3);
  EXPECT_EQ(srd_model_net_steps(&c8, SRD_COLL_ALLGATHER, SRD_ALGO_TREE), -1);
  EXPECT_EQ(srd_model_net_steps(&c2, SRD_COLL_REDUCESCATTER, SRD_ALGO_RING),
            srd_model_net_steps(&c2, SRD_COLL_REDUCESCATTER, SRD_ALGO_PAT));

  // 2 nodes, 32 KiB all-gather: NCCL's PAT and the model's ring cross once each.
  Table pat(SRD_COLL_ALLGATHER, 2, 2);
  pat.t[SRD_ALGO_PAT][SRD_PROTO_SIMPLE] = 1.0f;
  Table copy = pat;
  Pick p = decide(t.net, 2, 1, SRD_COLL_ALLGATHER, 32 * KiB, &pat);
  EXPECT_EQ(p.algo, -1);
  EXPECT_EQ(memcmp(pat.t, copy.t, sizeof(pat.t)), 0);
  // A protocol change alone (Ring/LL to Ring/Simple at 2 nodes) stays NCCL's.
  Table ll(SRD_COLL_ALLREDUCE, 2, 2);
  ll.t[SRD_ALGO_RING][SRD_PROTO_LL] = 1.0f;
  p = decide(t.net, 2, 1, SRD_COLL_ALLREDUCE, 32 * KiB, &ll);
  EXPECT_EQ(p.algo, -1);
  EXPECT_EQ(p.best_algo, SRD_ALGO_RING);
  // 8 nodes, 64 KiB all-reduce: NCCL's ring crosses 14 times, the tree 6: replaced.
  Table ring(SRD_COLL_ALLREDUCE, 8, 8);
  ring.t[SRD_ALGO_RING][SRD_PROTO_LL] = 1.0f;
  EXPECT_EQ(decide(t.net, 8, 1, SRD_COLL_ALLREDUCE, 64 * KiB, &ring).algo, SRD_ALGO_TREE);
  // 4 nodes, 1 KiB all-gather: NCCL's ring (3 crossings) gives way to PAT (2).
  Table ag(SRD_COLL_ALLGATHER, 4, 4);
  ag.t[SRD_ALGO_RING][SRD_PROTO_LL] = 1.0f;
  EXPECT_EQ(name(decide(t.net, 4, 1, SRD_COLL_ALLGATHER, 1 * KiB, &ag)), "PAT/Simple");
  // The other way round (NCCL's tree, the model's ring at 1 GiB): NCCL's stands.
  Table tree(SRD_COLL_ALLREDUCE, 8, 8);
  tree.t[SRD_ALGO_TREE][SRD_PROTO_SIMPLE] = 1.0f;
  p = decide(t.net, 8, 1, SRD_COLL_ALLREDUCE, 1 * GiB, &tree);
  EXPECT_EQ(p.best_algo, SRD_ALGO_RING);
  EXPECT_EQ(p.algo, -1);
}

TEST(TunerModel, V2WithoutTable) {
  const Topo &t = topo("tcp");
  Pick p = decide(t.net, 8, 1, SRD_COLL_ALLREDUCE, 8, nullptr);
  EXPECT_EQ(name(p), "Tree/LL");
  // v2 is NCCL 2.21's, which has no PAT: even where the table form picks
  // PAT (one rank per node, 8 bytes), v2 gets the ring.
  p = decide(t.net, 8, 1, SRD_COLL_ALLGATHER, 8, nullptr);
  EXPECT_EQ(p.algo, SRD_ALGO_RING);
  p = decide(topo("p4d").net, 8, 8, SRD_COLL_ALLGATHER, 8, nullptr);
  EXPECT_EQ(p.algo, SRD_ALGO_RING);
  // CollNet/NVLS on offer: v2 cannot see NCCL's estimate, so it stays out.
  srd_tuner *tu = srd_tuner_create_with(8, 8, 0, &t.net, nullptr, 0);
  srd_tuner_request rq = {SRD_COLL_ALLREDUCE, 8, 1, nullptr, 0, 0, 1};
  srd_tuner_decision d;
  srd_tuner_decide(tu, &rq, &d);
  EXPECT_EQ(d.algo, -1);
  srd_tuner_destroy(tu);
}

static srd_tuner_rules parse(const char *text) {
  srd_tuner_rules r;
  char err[256];
  EXPECT_EQ(srd_rules_parse(text, strlen(text), &r, err, sizeof(err)), 0) << err;
  return r;
}

TEST(TunerModel, RulesOverrideTheModel) {
  const Topo &t = topo("tcp");
  srd_tuner_rules r = parse(
      "coll=allreduce size=0-64K nodes=8 algo=ring proto=simple channels=2\n"
      "coll=allreduce size=1G-* proto=ll\n"
      "coll=allgather algo=ring proto=ll128\n"
      "coll=broadcast channels=3\n");
  Table table(SRD_COLL_ALLREDUCE, 8, 8);
  Pick p = decide(t.net, 8, 1, SRD_COLL_ALLREDUCE, 1 * KiB, &table, &r);
  EXPECT_EQ(name(p), "Ring/Simple");
  EXPECT_EQ(p.channels, 2);
  EXPECT_EQ(table.t[SRD_ALGO_RING][SRD_PROTO_SIMPLE], 0.0f);
  // Outside the node range: the model again.
  Table t4(SRD_COLL_ALLREDUCE, 4, 4);
  EXPECT_EQ(name(decide(t.net, 4, 1, SRD_COLL_ALLREDUCE, 1 * KiB, &t4, &r)), "Tree/LL");
  // proto only: the model picks the algorithm among LL entries.
  Table big(SRD_COLL_ALLREDUCE, 8, 8);
  p = decide(t.net, 8, 1, SRD_COLL_ALLREDUCE, 2 * GiB, &big, &r);
  EXPECT_EQ(p.proto, SRD_PROTO_LL);
  // LL128 across tcp is never allowed, not even by a rule: the model decides.
  Table ag(SRD_COLL_ALLGATHER, 8, 8);
  p = decide(t.net, 8, 1, SRD_COLL_ALLGATHER, 1 * MiB, &ag, &r);
  EXPECT_NE(p.proto, SRD_PROTO_LL128);
  EXPECT_GE(p.algo, 0);
  // A rule that forces only channels keeps the model's choice.
  Table bc(SRD_COLL_BROADCAST, 8, 8);
  p = decide(t.net, 8, 1, SRD_COLL_BROADCAST, 1 * GiB, &bc, &r);
  EXPECT_EQ(name(p), "Ring/Simple");
  EXPECT_EQ(p.channels, 3);
  // A rule's entry that NCCL ignores is not re-enabled.
  Table off(SRD_COLL_ALLREDUCE, 8, 8);
  off.t[SRD_ALGO_RING][SRD_PROTO_SIMPLE] = -1.0f;
  p = decide(t.net, 8, 1, SRD_COLL_ALLREDUCE, 1 * KiB, &off, &r);
  EXPECT_EQ(off.t[SRD_ALGO_RING][SRD_PROTO_SIMPLE], -1.0f);
  EXPECT_FALSE(p.algo == SRD_ALGO_RING && p.proto == SRD_PROTO_SIMPLE);
  srd_rules_free(&r);
}

TEST(TunerModel, RulesOnOneNodeRankByNcclsEstimates) {
  srd_tuner_rules r = parse("coll=allreduce proto=simple\n");
  Table table(SRD_COLL_ALLREDUCE, 8, 1);
  table.t[SRD_ALGO_TREE][SRD_PROTO_SIMPLE] = 7.0f;
  table.t[SRD_ALGO_RING][SRD_PROTO_SIMPLE] = 9.0f;
  EXPECT_EQ(name(decide(topo("p5").net, 1, 8, SRD_COLL_ALLREDUCE, 1 * MiB, &table, &r)), "Tree/Simple");
  srd_rules_free(&r);
}

TEST(TunerModel, ChunkFromRules) {
  srd_tuner_rules r = parse("coll=allreduce algo=ring proto=simple chunk=512K\n");
  srd_tuner *t = srd_tuner_create_with(8, 8, 0, &topo("tcp").net, &r, 0);
  size_t chunk = 128 * KiB;
  srd_tuner_chunk(t, SRD_COLL_ALLREDUCE, 1 * MiB, SRD_ALGO_TREE, SRD_PROTO_SIMPLE, &chunk);
  EXPECT_EQ(chunk, 128 * KiB) << "another algorithm: NCCL's chunk";
  srd_tuner_chunk(t, SRD_COLL_ALLREDUCE, 1 * MiB, SRD_ALGO_RING, SRD_PROTO_SIMPLE, &chunk);
  EXPECT_EQ(chunk, 512 * KiB);
  chunk = 128 * KiB;
  srd_tuner_chunk(t, 99, 1 * MiB, SRD_ALGO_RING, SRD_PROTO_SIMPLE, &chunk);
  EXPECT_EQ(chunk, 128 * KiB) << "a collective the rules do not name: NCCL's chunk";
  srd_tuner_destroy(t);
  srd_rules_free(&r);
  // A rule for every collective still names only the ones we know.
  r = parse("coll=* algo=ring proto=simple chunk=512K\n");
  t = srd_tuner_create_with(8, 8, 0, &topo("tcp").net, &r, 0);
  srd_tuner_chunk(t, SRD_COLL_ALLREDUCE, 1 * MiB, SRD_ALGO_RING, SRD_PROTO_SIMPLE, &chunk);
  EXPECT_EQ(chunk, 512 * KiB);
  chunk = 128 * KiB;
  srd_tuner_chunk(t, 99, 1 * MiB, SRD_ALGO_RING, SRD_PROTO_SIMPLE, &chunk);
  EXPECT_EQ(chunk, 128 * KiB) << "an unknown collective (99): NCCL's chunk";
  srd_tuner_chunk(t, -1, 1 * MiB, SRD_ALGO_RING, SRD_PROTO_SIMPLE, &chunk);
  EXPECT_EQ(chunk, 128 * KiB) << "an unknown collective (-1): NCCL's chunk";
  srd_tuner_destroy(t);
  srd_rules_free(&r);
}

// A rule limited to one protocol changes that protocol's choices alone: its
// chunk size applies to that protocol under every algorithm and to no other
// protocol, and the decision it makes stays within that protocol.
TEST(TunerModel, ProtocolRulesChangeOnlyTheirProtocol) {
  const char *keys[SRD_PROTO_COUNT] = {"ll", "ll128", "simple"};
  for (int proto = 0; proto < SRD_PROTO_COUNT; proto++) {
    SCOPED_TRACE(keys[proto]);
    std::string text = std::string("coll=allreduce proto=") + keys[proto] + " chunk=64K\n";
    srd_tuner_rules r = parse(text.c_str());
    srd_tuner *t = srd_tuner_create_with(16, 2, 0, &topo("p5").net, &r, 0);
    for (int a : {SRD_ALGO_RING, SRD_ALGO_TREE})
      for (int p = 0; p < SRD_PROTO_COUNT; p++) {
        size_t chunk = 128 * KiB;
        srd_tuner_chunk(t, SRD_COLL_ALLREDUCE, 1 * MiB, a, p, &chunk);
        EXPECT_EQ(chunk, p == proto ? 64 * KiB : 128 * KiB) << srd_algo_name(a) << "/" << srd_proto_name(p);
      }
    srd_tuner_destroy(t);
    for (size_t bytes : {1 * KiB, 1 * MiB, 1 * GiB}) {
      Table table(SRD_COLL_ALLREDUCE, 16, 2);
      Pick pick = decide(topo("p5").net, 2, 8, SRD_COLL_ALLREDUCE, bytes, &table, &r);
      EXPECT_EQ(pick.proto, proto) << bytes << " B: " << name(pick);
      for (int a = 0; a < SRD_ALGO_COUNT; a++)
        for (int p = 0; p < SRD_PROTO_COUNT; p++)
          if (p != proto) {
            EXPECT_NE(table.t[a][p], 0.0f) << "another protocol was made the winner";
          }
    }
    srd_rules_free(&r);
  }
}

TEST(TunerModel, CalibrationLinesChangeTheModel) {
  srd_tuner_rules r = parse("model hop_us=1 rail_gbps=400 efficiency=0.5\n");
  srd_tuner_net net = topo("tcp").net;
  srd_rules_calibrate(&r, &net);
  EXPECT_DOUBLE_EQ(net.hop_us, 1.0);
  EXPECT_DOUBLE_EQ(net.rail_gbps, 400.0);
  EXPECT_DOUBLE_EQ(net.efficiency, 0.5);
  srd_rules_free(&r);
}

TEST(TunerModel, ProviderClasses) {
  srd_tuner_net efa = make_net("efa", 1, 1, 100, 1, 0), tcp = make_net("tcp;ofi_rxm", 1, 1, 25, 1, 0);
  srd_tuner_net shm = make_net("shm", 1, 1, 10, 1, 0), lo = make_net("tcp;ofi_rxm", 1, 1, 10, 0, 1);
  EXPECT_TRUE(efa.ll128_in_order);
  EXPECT_FALSE(tcp.ll128_in_order) << "only EFA promises in-order 128-byte writes";
  EXPECT_FALSE(shm.ll128_in_order);
  EXPECT_LT(shm.hop_us, efa.hop_us);
  EXPECT_LT(efa.hop_us, tcp.hop_us);
  EXPECT_LT(lo.hop_us, tcp.hop_us);
  EXPECT_GT(lo.rail_gbps, 10.0) << "loopback's reported speed means nothing";
}
