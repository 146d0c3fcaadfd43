/* One tuner per communicator: rules first, then the model, then the edit of
 * NCCL's cost table. The version shims (api.c) only translate arguments. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srd/log.h"
#include "srd/param.h"
#include "srd/tuner.h"

#define SIZE_CLASSES 64

struct srd_tuner {
  struct srd_tuner_net net;
  struct srd_tuner_comm comm;
  struct srd_tuner_rules rules;
  int user_forced;                        /* NCCL_ALGO or NCCL_PROTO set: hands off */
  double margin;                          /* see SRD_TUNER_DEFAULT_MARGIN */
  int logged[SRD_COLL_COUNT][SIZE_CLASSES]; /* last decision logged per power-of-two size, 0: none */
  int logged_chunk[SRD_COLL_COUNT][SIZE_CLASSES];
};

static const int modeled_algos[] = {SRD_ALGO_TREE, SRD_ALGO_RING, SRD_ALGO_PAT};
#define N_MODELED ((int)(sizeof(modeled_algos) / sizeof(modeled_algos[0])))

static int is_modeled(int algo) {
  for (int i = 0; i < N_MODELED; i++)
    if (modeled_algos[i] == algo) return 1;
  return 0;
}

static int env_set(const char *name) {
  const char *v = getenv(name);
  return v && *v;
}

struct srd_tuner *srd_tuner_create_with(size_t nranks, size_t nnodes, int nvl_domains,
                                        const struct srd_tuner_net *net, const struct srd_tuner_rules *rules,
                                        int user_forced) {
  struct srd_tuner *t = calloc(1, sizeof(*t));
  if (!t) return NULL;
  if (net) t->net = *net;
  else srd_tuner_net_discover(&t->net);
  srd_tuner_comm_init(&t->comm, nranks, nnodes, nvl_domains);
  if (rules && rules->n > 0) {
    t->rules.rule = malloc((size_t)rules->n * sizeof(*rules->rule));
    if (!t->rules.rule) {
      free(t);
      return NULL;
    }
    memcpy(t->rules.rule, rules->rule, (size_t)rules->n * sizeof(*rules->rule));
    t->rules.n = rules->n;
  }
  t->margin = SRD_TUNER_DEFAULT_MARGIN;
  if (rules) {
    t->rules.cal = rules->cal;
    srd_rules_calibrate(rules, &t->net);
    if (rules->cal.has_margin) t->margin = rules->cal.margin;
  }
  t->user_forced = user_forced;
  return t;
}

struct srd_tuner *srd_tuner_create(size_t nranks, size_t nnodes, int nvl_domains, const struct srd_tuner_net *net) {
  struct srd_tuner_rules rules = {0};
  const char *path = srd_param_str(SRD_PARAM_TUNER_CONFIG);
  char err[256];
  if (path) {
    if (srd_rules_load(path, &rules, err, sizeof(err)))
      SRD_WARN("tuner: NCCL_SRD_TUNER_CONFIG=%s: %s; the file is ignored, the model decides alone", path, err);
    else
      SRD_INFO(NCCL_INIT | NCCL_TUNING, "tuner: %d rule(s) from %s", rules.n, path);
  }
  int forced = env_set("NCCL_ALGO") || env_set("NCCL_PROTO");
  struct srd_tuner *t = srd_tuner_create_with(nranks, nnodes, nvl_domains, net, &rules, forced);
  srd_rules_free(&rules);
  if (!t) return NULL;
  SRD_INFO(NCCL_INIT | NCCL_TUNING,
           "tuner: %d rank(s), %d node(s), %d behind the network; %s, %d rail(s)/GPU x %.0f Gbit/s, hop %.1f us%s",
           t->comm.nranks, t->comm.nnodes, t->comm.net_nodes, t->net.provider, t->net.rails_per_gpu,
           t->net.rail_gbps, t->net.hop_us,
           forced ? "; NCCL_ALGO/NCCL_PROTO set: NCCL's choices are left alone" : "");
  return t;
}

void srd_tuner_destroy(struct srd_tuner *t) {
  if (!t) return;
  srd_rules_free(&t->rules);
  free(t);
}

static int size_class(size_t n) {
  int c = 0;
  while (n > 1 && c < SIZE_CLASSES - 1) n >>= 1, c++;
  return c;
}

/* NCCL's cost of one entry; -1 when ignored or outside the table. */
static double nccl_cost(const struct srd_tuner_request *rq, int a, int p) {
  if (!rq->table || a >= rq->num_algo || p >= rq->num_proto) return -1.0;
  float c = rq->table[a * rq->num_proto + p];
  return c >= 0.0f ? c : -1.0; /* also rejects NaN */
}

/* What NCCL would run for this collective in v2, where no table is shown.
 * Only NCCL 2.21 loads v2, and it has no PAT (2.23 added it): naming PAT
 * there makes NCCL index past its algorithm tables. */
static int v2_enabled(int coll, int a) {
  if (coll == SRD_COLL_ALLREDUCE) return a == SRD_ALGO_RING || a == SRD_ALGO_TREE;
  return a == SRD_ALGO_RING;
}

static int fill_allowed(const struct srd_tuner *t, const struct srd_tuner_request *rq,
                        const struct srd_tuner_rule *rule, int allowed[SRD_ALGO_COUNT][SRD_PROTO_COUNT]) {
  int n = 0;
  memset(allowed, 0, sizeof(int) * SRD_ALGO_COUNT * SRD_PROTO_COUNT);
  for (int i = 0; i < N_MODELED; i++) {
    int a = modeled_algos[i];
    for (int p = 0; p < SRD_PROTO_COUNT; p++) {
      int ok = rq->table ? nccl_cost(rq, a, p) >= 0 : v2_enabled(rq->coll, a);
      if (p == SRD_PROTO_LL128 && !srd_model_ll128_safe(&t->net, &t->comm)) ok = 0;
      if (p == SRD_PROTO_LL && !srd_model_ll_safe(&t->net, &t->comm)) ok = 0;
      if (rule && rule->algo != SRD_RULE_ANY && rule->algo != a) ok = 0;
      if (rule && rule->proto != SRD_RULE_ANY && rule->proto != p) ok = 0;
      allowed[a][p] = ok;
      n += ok;
    }
  }
  return n;
}

static void log_decision(struct srd_tuner *t, const struct srd_tuner_request *rq, const struct srd_tuner_decision *d,
                         double cost, const char *source, int nccl_a, int nccl_p, double nccl_c,
                         const struct srd_tuner_rule *rule, int dropped_line, const char *why) {
  int cls = size_class(rq->nbytes);
  int code = (((d->algo + 2) * 8 + (d->proto + 2)) * 128 + d->channels) * 2 + (why != NULL);
  if (t->logged[rq->coll][cls] == code) return;
  t->logged[rq->coll][cls] = code;
  char rule_text[64] = "";
  if (rule) snprintf(rule_text, sizeof(rule_text), " [rule line %d]", rule->line);
  else if (dropped_line)
    snprintf(rule_text, sizeof(rule_text), " [rule line %d allows nothing enabled here]", dropped_line);
  char nccl_text[80] = "";
  if (nccl_a >= 0)
    snprintf(nccl_text, sizeof(nccl_text), "; NCCL's estimate %s/%s %.1f us", srd_algo_name(nccl_a),
             srd_proto_name(nccl_p), nccl_c);
  char channels[32] = "";
  if (d->channels) snprintf(channels, sizeof(channels), ", %d channel(s)", d->channels);
  if (d->algo >= 0)
    SRD_INFO(NCCL_TUNING, "tuner: %s %zu B (%d nodes, %d ranks): %s/%s %.1f us (%s)%s%s%s",
             srd_coll_name(rq->coll), rq->nbytes, t->comm.nnodes, t->comm.nranks, srd_algo_name(d->algo),
             srd_proto_name(d->proto), cost, source, channels, rule_text, nccl_text);
  else
    SRD_INFO(NCCL_TUNING, "tuner: %s %zu B (%d nodes, %d ranks): NCCL's choice kept: %s%s%s%s",
             srd_coll_name(rq->coll), rq->nbytes, t->comm.nnodes, t->comm.nranks, why ? why : "no candidate",
             channels, rule_text, nccl_text);
}

void srd_tuner_decide(struct srd_tuner *t, const struct srd_tuner_request *rq, struct srd_tuner_decision *out) {
  out->algo = out->proto = out->best_algo = out->best_proto = -1;
  out->channels = 0;
  if (!t || t->user_forced || rq->coll < 0 || rq->coll >= SRD_COLL_COUNT) return;

  /* NCCL's own pick, for the log and to recognise algorithms we do not model. */
  int nccl_a = -1, nccl_p = -1;
  double nccl_c = 0;
  for (int a = 0; rq->table && a < rq->num_algo; a++)
    for (int p = 0; p < rq->num_proto; p++) {
      double c = nccl_cost(rq, a, p);
      if (c >= 0 && (nccl_a < 0 || c < nccl_c)) nccl_a = a, nccl_p = p, nccl_c = c;
    }

  const struct srd_tuner_rule *rule =
      srd_rules_match(&t->rules, rq->coll, rq->nbytes, t->comm.nnodes, t->comm.nranks);
  int allowed[SRD_ALGO_COUNT][SRD_PROTO_COUNT];
  int dropped_line = 0;
  if (rule && !fill_allowed(t, rq, rule, allowed)) {
    dropped_line = rule->line;
    rule = NULL;
  }
  const char *why = NULL;
  if (!rule) fill_allowed(t, rq, NULL, allowed);
  if (rule) out->channels = rule->channels;

  const int model_active = t->comm.net_nodes > 1;
  const int rule_algo = rule && rule->algo != SRD_RULE_ANY;
  const int rule_pair = rule_algo && rule->proto != SRD_RULE_ANY;
  double cost[SRD_ALGO_COUNT][SRD_PROTO_COUNT];
  const char *source = "model";
  if (!rule_algo && nccl_a >= 0 && !is_modeled(nccl_a)) {
    why = "NCCL prefers an algorithm the model does not cover";
    out->channels = 0;
  } else if (!rule_algo && !rq->table && rq->v2_offload) {
    why = "NCCL offers CollNet/NVLS, which the model does not cover";
    out->channels = 0;
  } else if (model_active) {
    srd_model_costs(&t->net, &t->comm, rq->coll, rq->nbytes, rq->npipe, cost);
  } else if (rule && rq->table) {
    /* No network inside the communicator: rank the rule's candidates by NCCL's own estimates. */
    source = "NCCL's estimate";
    for (int a = 0; a < SRD_ALGO_COUNT; a++)
      for (int p = 0; p < SRD_PROTO_COUNT; p++) cost[a][p] = nccl_cost(rq, a, p);
  } else if (rule_pair) {
    source = "rule";
    for (int a = 0; a < SRD_ALGO_COUNT; a++)
      for (int p = 0; p < SRD_PROTO_COUNT; p++) cost[a][p] = (a == rule->algo && p == rule->proto) ? 0.0 : -1.0;
  } else if (!why) {
    why = "no network in this communicator";
  }

  double best = -1;
  if (!why) {
    for (int a = 0; a < SRD_ALGO_COUNT; a++)
      for (int p = 0; p < SRD_PROTO_COUNT; p++)
        if (allowed[a][p] && cost[a][p] >= 0 && (out->algo < 0 || cost[a][p] < best))
          out->algo = a, out->proto = p, best = cost[a][p];
  }
  out->best_algo = out->algo;
  out->best_proto = out->proto;
  /* Without a rule, NCCL's pick stands unless the model clearly beats it by
   * crossing the network fewer times. NCCL knows its own algorithms and
   * protocols better than the model; what it gets wrong is the cost of one
   * network hop (a few us in its table, 20-40 us over tcp). So where both
   * picks cross the network equally often (any two at 2 nodes, or a protocol
   * change alone), the model's constants are no better than NCCL's: measured
   * on the device, such overrides lost 20-55%. An unsafe LL or LL128 pick is never
   * allowed, so it is always replaced. */
  char margin_note[128];
  if (out->algo >= 0 && !rule && model_active && nccl_a >= 0 && nccl_a < SRD_ALGO_COUNT && nccl_p >= 0 &&
      nccl_p < SRD_PROTO_COUNT && allowed[nccl_a][nccl_p] && cost[nccl_a][nccl_p] >= 0) {
    int keep = 1;
    if (out->algo == nccl_a && out->proto == nccl_p) {
      why = "the model agrees";
    } else if (srd_model_net_steps(&t->comm, rq->coll, out->algo) >= srd_model_net_steps(&t->comm, rq->coll, nccl_a)) {
      snprintf(margin_note, sizeof(margin_note), "the model's best %s/%s %.1f us crosses the network as often",
               srd_algo_name(out->algo), srd_proto_name(out->proto), best);
      why = margin_note;
    } else if (cost[nccl_a][nccl_p] <= best * (1.0 + t->margin)) {
      snprintf(margin_note, sizeof(margin_note), "within %.0f%% of the model's best %s/%s %.1f us", t->margin * 100,
               srd_algo_name(out->algo), srd_proto_name(out->proto), best);
      why = margin_note;
    } else {
      keep = 0;
    }
    if (keep) out->algo = out->proto = -1;
  }
  /* The winner costs nothing, so NCCL's minimum search picks it. */
  if (out->algo >= 0 && rq->table) rq->table[out->algo * rq->num_proto + out->proto] = 0.0f;
  log_decision(t, rq, out, best, source, nccl_a, nccl_p, nccl_c, rule, dropped_line, out->algo >= 0 ? NULL : why);
}

void srd_tuner_chunk(struct srd_tuner *t, int coll, size_t nbytes, int algo, int proto, size_t *chunk) {
  if (!t || t->user_forced || !chunk) return;
  const struct srd_tuner_rule *r = srd_rules_match(&t->rules, coll, nbytes, t->comm.nnodes, t->comm.nranks);
  if (!r || !r->chunk || (r->algo != SRD_RULE_ANY && r->algo != algo) || (r->proto != SRD_RULE_ANY && r->proto != proto))
    return;
  int cls = size_class(nbytes);
  if (!t->logged_chunk[coll][cls]) {
    t->logged_chunk[coll][cls] = 1;
    SRD_INFO(NCCL_TUNING, "tuner: %s %zu B %s/%s: chunk %zu B instead of %zu [rule line %d]", srd_coll_name(coll),
             nbytes, srd_algo_name(algo), srd_proto_name(proto), r->chunk, *chunk, r->line);
  }
  *chunk = r->chunk;
}
