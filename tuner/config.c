/* NCCL_SRD_TUNER_CONFIG: a rule file that overrides the model.
 *
 * One rule per line, fields key=value in any order, '#' to end of line is a
 * comment. The first rule that matches a collective wins:
 *   coll=allreduce size=0-64K nodes=2-* algo=tree proto=ll
 *   coll=allgather,reducescatter size=1M-* proto=simple channels=8
 *   model hop_us=12 rail_gbps=25
 * Matching keys (default: everything): coll (list or *), size (bytes, NCCL's
 * nBytes), nodes, ranks, each a range "A", "A-B", "A-", "A-*", "-B" or "*";
 * numbers are decimal with an optional K, M or G (powers of 1024).
 * Actions (at least one): algo (ring, tree, pat, *), proto (ll, ll128,
 * simple, *), channels (1-64), chunk (bytes, NCCL 2.30+). A '*' or a missing
 * algo/proto lets the model choose within what the rule fixes.
 * "model" lines recalibrate the model: hop_us (one network hop, us), rail_gbps
 * (one NIC's speed), efficiency (0-1], margin (0-10: how much faster the
 * model's choice must look before NCCL's own is replaced; default 0.1).
 * Any error rejects the whole file. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srd/tuner.h"

#define LINE_MAX_BYTES 1024
#define MAX_CHANNELS 64
#define MAX_CHUNK (1ULL << 30)
#define ALL_COLLS ((1u << SRD_COLL_COUNT) - 1)

struct parser {
  int line;
  char *err;
  size_t errlen;
};

__attribute__((format(printf, 2, 3))) static int fail(struct parser *ps, const char *fmt, ...) {
  int n = snprintf(ps->err, ps->errlen, "line %d: ", ps->line);
  if (n < 0 || (size_t)n >= ps->errlen) return -1;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ps->err + n, ps->errlen - (size_t)n, fmt, ap);
  va_end(ap);
  return -1;
}

/* Decimal with an optional K/M/G suffix; no sign, no overflow. */
static int parse_count(const char *s, unsigned long long *out) {
  if (!isdigit((unsigned char)*s)) return -1;
  unsigned long long v = 0;
  for (; isdigit((unsigned char)*s); s++) {
    unsigned d = (unsigned)(*s - '0');
    if (v > (~0ULL - d) / 10) return -1;
    v = v * 10 + d;
  }
  unsigned long long mult = 1;
  switch (*s) {
  case 'k': case 'K': mult = 1ULL << 10; s++; break;
  case 'm': case 'M': mult = 1ULL << 20; s++; break;
  case 'g': case 'G': mult = 1ULL << 30; s++; break;
  default: break;
  }
  if (*s || (v && v > ~0ULL / mult)) return -1;
  *out = v * mult;
  return 0;
}

static int parse_range(struct parser *ps, const char *key, const char *v, struct srd_range *r) {
  r->lo = 0;
  r->hi = ~0ULL;
  if (!strcmp(v, "*")) return 0;
  char buf[64];
  if (strlen(v) >= sizeof(buf)) return fail(ps, "%s=%.20s...: too long", key, v);
  strcpy(buf, v);
  char *dash = strchr(buf, '-');
  if (!dash) {
    if (parse_count(buf, &r->lo)) return fail(ps, "%s=%s: not a number (digits with optional K, M, G)", key, v);
    r->hi = r->lo;
    return 0;
  }
  *dash = 0;
  const char *lo = buf, *hi = dash + 1;
  if (*lo && parse_count(lo, &r->lo)) return fail(ps, "%s=%s: bad lower bound '%s'", key, v, lo);
  if (*hi && strcmp(hi, "*") && parse_count(hi, &r->hi)) return fail(ps, "%s=%s: bad upper bound '%s'", key, v, hi);
  if (!*lo && (!*hi || !strcmp(hi, "*"))) return fail(ps, "%s=%s: a range needs at least one bound", key, v);
  if (r->lo > r->hi) return fail(ps, "%s=%s: empty range (lower bound above upper)", key, v);
  return 0;
}

static int lookup(const char *v, const char *const *names, int n) {
  for (int i = 0; i < n; i++)
    if (names[i] && !strcasecmp(v, names[i])) return i;
  return -1;
}

static const char *const coll_keys[SRD_COLL_COUNT] = {"broadcast", "reduce", "allgather", "reducescatter", "allreduce"};
static const char *const algo_keys[SRD_ALGO_COUNT] = {"tree", "ring", NULL, NULL, NULL, NULL, "pat"};
static const char *const proto_keys[SRD_PROTO_COUNT] = {"ll", "ll128", "simple"};

static int parse_colls(struct parser *ps, const char *v, unsigned *mask) {
  if (!strcmp(v, "*")) {
    *mask = ALL_COLLS;
    return 0;
  }
  char buf[LINE_MAX_BYTES];
  snprintf(buf, sizeof(buf), "%s", v);
  *mask = 0;
  char *save = NULL;
  for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    int c = lookup(t, coll_keys, SRD_COLL_COUNT);
    if (c < 0) return fail(ps, "coll=%s: unknown collective '%s' (allreduce, allgather, reducescatter, broadcast, reduce)", v, t);
    *mask |= 1u << c;
  }
  if (!*mask) return fail(ps, "coll=%s: no collective named", v);
  return 0;
}

static int parse_choice(struct parser *ps, const char *key, const char *v, const char *const *names, int n,
                        const char *expect, int *out) {
  if (!strcmp(v, "*")) {
    *out = SRD_RULE_ANY;
    return 0;
  }
  *out = lookup(v, names, n);
  if (*out < 0) return fail(ps, "%s=%s: expected one of %s", key, v, expect);
  return 0;
}

/* A number in (lo, hi], or [lo, hi] with lo_inclusive. */
static int parse_double(struct parser *ps, const char *key, const char *v, double lo, double hi, int lo_inclusive,
                        double *out) {
  char *end;
  errno = 0;
  double d = strtod(v, &end);
  int above = lo_inclusive ? d >= lo : d > lo;
  if (errno || end == v || *end || !(above && d <= hi))
    return fail(ps, "%s=%s: expected a number in %c%g, %g]", key, v, lo_inclusive ? '[' : '(', lo, hi);
  *out = d;
  return 0;
}

static int parse_model_line(struct parser *ps, char **tok, int ntok, struct srd_tuner_calibration *cal) {
  if (ntok < 2) return fail(ps, "'model' needs at least one of hop_us, rail_gbps, efficiency, margin");
  unsigned seen = 0;
  for (int i = 1; i < ntok; i++) {
    char *eq = strchr(tok[i], '=');
    if (!eq || eq == tok[i] || !eq[1]) return fail(ps, "'%s': expected key=value", tok[i]);
    *eq = 0;
    const char *k = tok[i], *v = eq + 1;
    unsigned bit;
    int rc;
    if (!strcmp(k, "hop_us")) bit = 1, rc = parse_double(ps, k, v, 0, 1e6, 0, &cal->hop_us);
    else if (!strcmp(k, "rail_gbps")) bit = 2, rc = parse_double(ps, k, v, 0, 1e6, 0, &cal->rail_gbps);
    else if (!strcmp(k, "efficiency")) bit = 4, rc = parse_double(ps, k, v, 0, 1, 0, &cal->efficiency);
    else if (!strcmp(k, "margin")) bit = 8, rc = parse_double(ps, k, v, 0, 10, 1, &cal->margin), cal->has_margin = 1;
    else return fail(ps, "model: unknown key '%s' (hop_us, rail_gbps, efficiency, margin)", k);
    if (rc) return rc;
    if (seen & bit) return fail(ps, "model: '%s' given twice", k);
    seen |= bit;
  }
  return 0;
}

enum { K_COLL = 1, K_SIZE = 2, K_NODES = 4, K_RANKS = 8, K_ALGO = 16, K_PROTO = 32, K_CHANNELS = 64, K_CHUNK = 128 };

static int parse_rule_line(struct parser *ps, char **tok, int ntok, struct srd_tuner_rule *r) {
  memset(r, 0, sizeof(*r));
  r->line = ps->line;
  r->coll_mask = ALL_COLLS;
  r->size.hi = r->nodes.hi = r->ranks.hi = ~0ULL;
  r->algo = r->proto = SRD_RULE_ANY;
  unsigned seen = 0;
  for (int i = 0; i < ntok; i++) {
    char *eq = strchr(tok[i], '=');
    if (!eq || eq == tok[i] || !eq[1]) return fail(ps, "'%s': expected key=value", tok[i]);
    *eq = 0;
    const char *k = tok[i], *v = eq + 1;
    unsigned bit;
    int rc;
    unsigned long long n = 0;
    if (!strcmp(k, "coll")) bit = K_COLL, rc = parse_colls(ps, v, &r->coll_mask);
    else if (!strcmp(k, "size")) bit = K_SIZE, rc = parse_range(ps, k, v, &r->size);
    else if (!strcmp(k, "nodes")) bit = K_NODES, rc = parse_range(ps, k, v, &r->nodes);
    else if (!strcmp(k, "ranks")) bit = K_RANKS, rc = parse_range(ps, k, v, &r->ranks);
    else if (!strcmp(k, "algo"))
      bit = K_ALGO, rc = parse_choice(ps, k, v, algo_keys, SRD_ALGO_COUNT, "ring, tree, pat, *", &r->algo);
    else if (!strcmp(k, "proto"))
      bit = K_PROTO, rc = parse_choice(ps, k, v, proto_keys, SRD_PROTO_COUNT, "ll, ll128, simple, *", &r->proto);
    else if (!strcmp(k, "channels")) {
      bit = K_CHANNELS;
      rc = parse_count(v, &n) || n < 1 || n > MAX_CHANNELS ? fail(ps, "channels=%s: expected 1-%d", v, MAX_CHANNELS) : 0;
      r->channels = (int)n;
    } else if (!strcmp(k, "chunk")) {
      bit = K_CHUNK;
      rc = parse_count(v, &n) || n < 1 || n > MAX_CHUNK ? fail(ps, "chunk=%s: expected 1 to 1G bytes", v) : 0;
      r->chunk = (size_t)n;
    } else {
      return fail(ps, "unknown key '%s' (coll, size, nodes, ranks, algo, proto, channels, chunk)", k);
    }
    if (rc) return rc;
    if (seen & bit) return fail(ps, "'%s' given twice", k);
    seen |= bit;
  }
  if (!(seen & (K_ALGO | K_PROTO | K_CHANNELS | K_CHUNK)))
    return fail(ps, "the rule sets nothing: give algo, proto, channels or chunk");
  const unsigned gathers = (1u << SRD_COLL_ALLGATHER) | (1u << SRD_COLL_REDUCESCATTER);
  if (r->algo == SRD_ALGO_TREE && (r->coll_mask & ~(1u << SRD_COLL_ALLREDUCE)))
    return fail(ps, "algo=tree serves only allreduce: add coll=allreduce");
  if (r->algo == SRD_ALGO_PAT && (r->coll_mask & ~gathers))
    return fail(ps, "algo=pat serves only allgather and reducescatter: add coll=allgather,reducescatter");
  if (r->algo == SRD_ALGO_PAT && r->proto != SRD_RULE_ANY && r->proto != SRD_PROTO_SIMPLE)
    return fail(ps, "algo=pat runs only with proto=simple");
  return 0;
}

/* Split one line (comment removed) into tokens, in place. */
static int tokenize(struct parser *ps, char *s, char **tok, int max, int *ntok) {
  *ntok = 0;
  for (char *p = s; *p;) {
    while (*p == ' ' || *p == '\t' || *p == '\r') p++;
    if (!*p) break;
    if (*ntok == max) return fail(ps, "more than %d fields", max);
    tok[(*ntok)++] = p;
    while (*p && *p != ' ' && *p != '\t' && *p != '\r') {
      unsigned char c = (unsigned char)*p;
      if (c < 0x21 || c > 0x7e) return fail(ps, "unexpected byte 0x%02x (rules are plain ASCII)", c);
      p++;
    }
    if (*p) *p++ = 0;
  }
  return 0;
}

static int push_rule(struct parser *ps, struct srd_tuner_rules *out, int *cap, const struct srd_tuner_rule *r) {
  if (out->n == SRD_RULES_MAX) return fail(ps, "more than %d rules", SRD_RULES_MAX);
  if (out->n == *cap) {
    int ncap = *cap ? 2 * *cap : 16;
    struct srd_tuner_rule *g = realloc(out->rule, (size_t)ncap * sizeof(*g));
    if (!g) return fail(ps, "out of memory");
    out->rule = g;
    *cap = ncap;
  }
  out->rule[out->n++] = *r;
  return 0;
}

int srd_rules_parse(const char *text, size_t len, struct srd_tuner_rules *out, char *err, size_t errlen) {
  memset(out, 0, sizeof(*out));
  struct parser ps = {0, err, errlen};
  if (errlen) err[0] = 0;
  int cap = 0;
  char line[LINE_MAX_BYTES + 1];
  size_t pos = 0;
  while (pos < len) {
    ps.line++;
    size_t end = pos;
    while (end < len && text[end] != '\n') end++;
    size_t n = end - pos;
    const char *hash = memchr(text + pos, '#', n);
    if (hash) n = (size_t)(hash - (text + pos));
    if (n > LINE_MAX_BYTES) {
      fail(&ps, "longer than %d bytes", LINE_MAX_BYTES);
      goto error;
    }
    if (memchr(text + pos, 0, n)) {
      fail(&ps, "unexpected byte 0x00 (rules are plain ASCII)");
      goto error;
    }
    memcpy(line, text + pos, n);
    line[n] = 0;
    pos = end + 1;

    char *tok[16];
    int ntok;
    if (tokenize(&ps, line, tok, 16, &ntok)) goto error;
    if (ntok == 0) continue;
    if (!strcmp(tok[0], "model")) {
      if (parse_model_line(&ps, tok, ntok, &out->cal)) goto error;
      continue;
    }
    struct srd_tuner_rule r;
    if (parse_rule_line(&ps, tok, ntok, &r) || push_rule(&ps, out, &cap, &r)) goto error;
  }
  return 0;
error:
  srd_rules_free(out);
  return -1;
}

int srd_rules_load(const char *path, struct srd_tuner_rules *out, char *err, size_t errlen) {
  memset(out, 0, sizeof(*out));
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "cannot open: %s", strerror(errno));
    return -1;
  }
  char *buf = malloc(SRD_RULES_MAX_FILE + 1);
  if (!buf) {
    fclose(f);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  size_t len = fread(buf, 1, SRD_RULES_MAX_FILE + 1, f);
  int bad_read = ferror(f);
  fclose(f);
  int rc = -1;
  if (bad_read) snprintf(err, errlen, "read error");
  else if (len > SRD_RULES_MAX_FILE) snprintf(err, errlen, "larger than %d bytes", SRD_RULES_MAX_FILE);
  else rc = srd_rules_parse(buf, len, out, err, errlen);
  free(buf);
  return rc;
}

void srd_rules_free(struct srd_tuner_rules *rules) {
  free(rules->rule);
  memset(rules, 0, sizeof(*rules));
}

static int in_range(const struct srd_range *r, unsigned long long v) { return v >= r->lo && v <= r->hi; }

const struct srd_tuner_rule *srd_rules_match(const struct srd_tuner_rules *rules, int coll, size_t nbytes, int nnodes,
                                             int nranks) {
  if (!rules || coll < 0 || coll >= SRD_COLL_COUNT) return NULL;
  for (int i = 0; i < rules->n; i++) {
    const struct srd_tuner_rule *r = &rules->rule[i];
    if ((r->coll_mask & (1u << coll)) && in_range(&r->size, nbytes) && in_range(&r->nodes, (unsigned)nnodes) &&
        in_range(&r->ranks, (unsigned)nranks))
      return r;
  }
  return NULL;
}

void srd_rules_calibrate(const struct srd_tuner_rules *rules, struct srd_tuner_net *net) {
  if (rules->cal.hop_us > 0) net->hop_us = rules->cal.hop_us;
  if (rules->cal.rail_gbps > 0) net->rail_gbps = rules->cal.rail_gbps;
  if (rules->cal.efficiency > 0) net->efficiency = rules->cal.efficiency;
}
