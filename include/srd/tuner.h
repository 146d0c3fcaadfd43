/* The tuner: an alpha-beta cost model of NCCL's collectives over our
 * transport, optional user rules, and the per-communicator decision that the
 * ncclTuner shims (tuner/api.c) turn into cost-table edits. Nothing here knows
 * an NCCL ABI version; algorithm and protocol numbers are NCCL's table indexes. */
#ifndef SRD_TUNER_H
#define SRD_TUNER_H

#include <stddef.h>

enum srd_coll { /* NCCL's ncclFunc_t numbering */
  SRD_COLL_BROADCAST = 0,
  SRD_COLL_REDUCE = 1,
  SRD_COLL_ALLGATHER = 2,
  SRD_COLL_REDUCESCATTER = 3,
  SRD_COLL_ALLREDUCE = 4,
  SRD_COLL_COUNT
};

enum srd_algo { /* rows of NCCL's cost table */
  SRD_ALGO_TREE = 0,
  SRD_ALGO_RING = 1,
  SRD_ALGO_COLLNET_DIRECT = 2,
  SRD_ALGO_COLLNET_CHAIN = 3,
  SRD_ALGO_NVLS = 4,
  SRD_ALGO_NVLS_TREE = 5,
  SRD_ALGO_PAT = 6,
  SRD_ALGO_COUNT
};

enum srd_proto { /* columns of NCCL's cost table */
  SRD_PROTO_LL = 0,
  SRD_PROTO_LL128 = 1,
  SRD_PROTO_SIMPLE = 2,
  SRD_PROTO_COUNT
};

const char *srd_coll_name(int coll);
const char *srd_algo_name(int algo);
const char *srd_proto_name(int proto);

/* ---- Model input ---------------------------------------------------------- */

/* What the transport offers, from topo/ (or synthetic in tests). */
struct srd_tuner_net {
  char provider[32];
  int rails_per_gpu;     /* NICs in one GPU's device group */
  int rails_per_node;    /* NICs in the whole node */
  double rail_gbps;      /* link speed of one rail, Gbit/s */
  double hop_us;         /* one small message across the network, proxy to proxy */
  double efficiency;     /* fraction of the link speed a large transfer reaches */
  int gdr_flush;         /* SIMPLE receives into GPU memory pay a flush per step */
  int ll128_in_order;    /* 128-byte aligned writes land whole and in order */
  int ll_safe;           /* LL's flagged 8-byte lines land whole (srd_ll_rule_for) */
};

/* Fill hop_us, efficiency, gdr_flush, ll128_in_order and ll_safe from the
 * provider's class (see model.c for the constants and why); ordered_ok: efa's
 * endpoints all granted 128-byte ordered device writes. The caller sets the
 * rails. */
void srd_tuner_net_defaults(struct srd_tuner_net *net, const char *provider, int loopback, int ordered_ok);

/* The communicator as the model sees it. */
struct srd_tuner_comm {
  int nranks;
  int nnodes;
  int net_nodes;         /* groups joined only by the network: nodes, or NVLink domains when fewer */
};

/* net_nodes from nNodes and NCCL's NVLink-domain count (0: unknown). */
void srd_tuner_comm_init(struct srd_tuner_comm *comm, size_t nranks, size_t nnodes, int nvl_domains);

/* ---- Model ------------------------------------------------------------------ */

/* Estimated time in microseconds of every (algorithm, protocol) the model
 * covers (ring, tree, PAT x LL, LL128, SIMPLE); other entries get -1. Every
 * entry is latency + bytes / bandwidth with constants independent of nbytes,
 * so along growing sizes the winner only moves towards higher bandwidth. */
void srd_model_costs(const struct srd_tuner_net *net, const struct srd_tuner_comm *comm, int coll, size_t nbytes,
                     int npipe, double cost[SRD_ALGO_COUNT][SRD_PROTO_COUNT]);

/* Network crossings on the critical path of one collective (ring: 2(N-1) for
 * all-reduce, N-1 otherwise; tree: 2 log2 N; PAT: log2 N), or -1 where the
 * model does not cover the algorithm for this collective. */
int srd_model_net_steps(const struct srd_tuner_comm *comm, int coll, int algo);

/* LL128 is safe across the network only with in-order 128-byte writes. */
int srd_model_ll128_safe(const struct srd_tuner_net *net, const struct srd_tuner_comm *comm);
/* LL across the network: not on efa without them (srd_ll_rule_for). */
int srd_model_ll_safe(const struct srd_tuner_net *net, const struct srd_tuner_comm *comm);

/* ---- Rules (NCCL_SRD_TUNER_CONFIG) -------------------------------------------- */

#define SRD_RULE_ANY (-1)

struct srd_range {
  unsigned long long lo, hi; /* inclusive */
};

struct srd_tuner_rule {
  int line;
  unsigned coll_mask;        /* bit per srd_coll */
  struct srd_range size, nodes, ranks;
  int algo;                  /* srd_algo or SRD_RULE_ANY */
  int proto;                 /* srd_proto or SRD_RULE_ANY */
  int channels;              /* 0: leave NCCL's */
  size_t chunk;              /* 0: leave NCCL's (v6 only) */
};

/* "model" lines recalibrate the model; 0 leaves a value as measured. */
struct srd_tuner_calibration {
  double hop_us;
  double rail_gbps;
  double efficiency;
  int has_margin;
  double margin;
};

/* NCCL's own pick stands unless the model expects it to be this much slower
 * than the model's best: where the model is nearly indifferent, its errors
 * would decide, and NCCL's choice costs nothing against NCCL. */
#define SRD_TUNER_DEFAULT_MARGIN 0.10

struct srd_tuner_rules {
  int n;
  struct srd_tuner_rule *rule;
  struct srd_tuner_calibration cal;
};

#define SRD_RULES_MAX 4096
#define SRD_RULES_MAX_FILE (1 << 20)

/* Parse a rule file's text (any bytes; len need not end in NUL). Returns 0, or
 * -1 with err = "line N: reason" and *out empty. */
int srd_rules_parse(const char *text, size_t len, struct srd_tuner_rules *out, char *err, size_t errlen);
/* Read and parse a file; err names the problem like srd_rules_parse. */
int srd_rules_load(const char *path, struct srd_tuner_rules *out, char *err, size_t errlen);
void srd_rules_free(struct srd_tuner_rules *rules);
/* First rule that matches, or NULL. */
const struct srd_tuner_rule *srd_rules_match(const struct srd_tuner_rules *rules, int coll, size_t nbytes, int nnodes,
                                             int nranks);
void srd_rules_calibrate(const struct srd_tuner_rules *rules, struct srd_tuner_net *net);

/* ---- Topology input ------------------------------------------------------------- */

/* The transport as topo/ sees it, discovered once per process. Never fails:
 * without a usable provider it describes one tcp-like rail and says so. */
void srd_tuner_net_discover(struct srd_tuner_net *out);

/* ---- Per-communicator decisions ---------------------------------------------------- */

struct srd_tuner;

/* net NULL: discover. Rules come from NCCL_SRD_TUNER_CONFIG; a bad file is
 * reported and ignored. Returns NULL only when out of memory. */
struct srd_tuner *srd_tuner_create(size_t nranks, size_t nnodes, int nvl_domains, const struct srd_tuner_net *net);
/* The same with rules given by the caller (tests); rules are copied. */
struct srd_tuner *srd_tuner_create_with(size_t nranks, size_t nnodes, int nvl_domains,
                                        const struct srd_tuner_net *net, const struct srd_tuner_rules *rules,
                                        int user_forced);
void srd_tuner_destroy(struct srd_tuner *t);

struct srd_tuner_request {
  int coll;             /* ncclFunc_t value; others are left alone */
  size_t nbytes;
  int npipe;
  /* NCCL's cost table (float[numAlgo][numProto]), edited in place; NULL for
   * v2, which then gets the choice in the decision only. */
  float *table;
  int num_algo, num_proto;
  int v2_offload;       /* v2 only: NCCL offers CollNet or NVLS */
};

struct srd_tuner_decision {
  int algo, proto;      /* -1: NCCL keeps its own choice */
  int channels;         /* 0: NCCL's count */
  int best_algo, best_proto; /* the best candidate found, even when NCCL's pick stands; -1: none */
};

/* Decide, log the decision once per size class, and for a table make the
 * winner the cheapest entry (0.0). Never re-enables an ignored (-1) entry. */
void srd_tuner_decide(struct srd_tuner *t, const struct srd_tuner_request *rq, struct srd_tuner_decision *out);
/* v6 chunk size: a matching rule's chunk, else NCCL's value. */
void srd_tuner_chunk(struct srd_tuner *t, int coll, size_t nbytes, int algo, int proto, size_t *chunk);

#endif
