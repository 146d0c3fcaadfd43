#include "perf_args.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srd/param.h"

const char perf_usage[] =
    "Usage: srd-perf [options]\n"
    "Measure an ncclNet plugin (ours by default) the way NCCL drives it, or libfabric itself (--raw).\n"
    "Without --server/--client it runs its own two local processes. With none of --raw, --plugin,\n"
    "--net-version, --json, that local run measures our plugin, then raw libfabric on the same provider\n"
    "and NICs (the baseline), and prints both side by side with their ratio.\n"
    "\n"
    "Transport:\n"
    "  --plugin PATH        ncclNet plugin library (default: libnccl-net-srd.so beside srd-perf, then the\n"
    "                       library path); the highest ncclNetPlugin_v12..v8 table it exports is used\n"
    "  --raw                libfabric itself (fi_writedata), same provider, NICs and lanes (the baseline)\n"
    "  --net-version N      drive ncclNetPlugin_vN (8..12) instead of the highest, as an older NCCL would\n"
    "  --dev N              NCCL device (plugin) or NIC group (raw) to use (default 0)\n"
    "  --cuda               buffers in GPU memory (CUDA device 0; CUDA_VISIBLE_DEVICES picks), on this side\n"
    "\n"
    "Processes:\n"
    "  --server             wait for one --client (two machines)\n"
    "  --client HOST        connect to a --server on HOST\n"
    "  --port N             TCP port of the handle exchange (default 18515)\n"
    "  --timeout SEC        give up on a silent peer after SEC seconds (default 15)\n"
    "  --pin                local run: pin the two processes to two different CPUs (steadier numbers)\n"
    "  --runs N             time every size N times (1..100; default 3 in the side-by-side run, else 1);\n"
    "                       the table shows the median run and the runs' spread (min-max)\n"
    "\n"
    "Patterns:\n"
    "  -t, --test LIST      comma list of lat, bw, bibw, all (default lat,bw; all = lat,bw,bibw)\n"
    "  -b, --min-size SIZE  smallest message (default 8; K, M, G suffixes)\n"
    "  -e, --max-size SIZE  largest message (default 64M)\n"
    "  -f, --factor N       size multiplier between points (default 4)\n"
    "  -n, --iters N        timed iterations per size (default: by size)\n"
    "  -w, --warmup N       untimed iterations first (default: by size)\n"
    "  -c, --comms N        connections in parallel, like NCCL channels (default 1, max 256)\n"
    "  -W, --window N       requests in flight per connection (default 8, max 32)\n"
    "  -g, --group N        buffers per grouped receive, each with its own tag (default 1, max 8)\n"
    "  --check              fill and verify every byte (separate buffers per request)\n"
    "  --rma OP             one-sided RMA instead of send/recv: put, putsig (put+signal) or get, through the\n"
    "                       plugin's ncclRmaPlugin_v14 table (raw: fi_write, fi_writedata, fi_read); lat and\n"
    "                       bw only, one connection, host memory; the data is checked once per size.\n"
    "                       lat: put and get from post to completion at the initiator; putsig a ping-pong,\n"
    "                       each side waiting for its signal before it answers (half the round trip).\n"
    "                       bw: a window of ops in flight (putsig: until the target saw every signal).\n"
    "                       Our plugin offers RMA with NCCL_SRD_RMA=host, which srd-perf sets when unset.\n"
    "\n"
    "Output:\n"
    "  --json               one JSON document on stdout instead of the table (bandwidths in GB/s: 1e9 B/s)\n"
    "  -h, --help           this text\n"
    "\n"
    "Environment: NCCL_SRD_* and FI_PROVIDER select the provider and NICs (see srd-info).\n";

void perf_args_defaults(struct perf_opts *o) {
  memset(o, 0, sizeof(*o));
  o->role = PERF_ROLE_LOCAL;
  o->port = PERF_DEFAULT_PORT;
  o->tests = PERF_TEST_LAT | PERF_TEST_BW;
  o->min_size = 8;
  o->max_size = 64u << 20;
  o->factor = 4;
  o->warmup = -1;
  o->comms = 1;
  o->window = 8;
  o->group = 1;
  o->timeout_s = 15;
}

int perf_parse_size(const char *text, size_t *out) {
  uint64_t v;
  if (srd_parse_size(text, &v) || v > SIZE_MAX) return -1;
  *out = (size_t)v;
  return 0;
}

void perf_format_size(size_t bytes, char *buf, size_t len) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  size_t v = bytes;
  while (u < 3 && v >= 1024 && v % 1024 == 0) v /= 1024, u++;
  snprintf(buf, len, "%zu %s", v, units[u]);
}

size_t perf_sweep(size_t min_size, size_t max_size, int factor, size_t *sizes, size_t cap) {
  size_t n = 0;
  size_t s = min_size;
  while (n < cap && s < max_size) {
    sizes[n++] = s;
    if (s == 0) s = 1;
    else if (s > max_size / (size_t)factor) break;
    else s *= (size_t)factor;
  }
  if (n < cap && (n == 0 || sizes[n - 1] != max_size)) sizes[n++] = max_size;
  return n;
}

void perf_iters_for(const struct perf_opts *o, size_t size, int *iters, int *warmup) {
  const size_t budget = 32u << 20;
  size_t n = size ? budget / size : 1000;
  if (n < 4) n = 4;
  if (n > 1000) n = 1000;
  *iters = o->iters > 0 ? o->iters : (int)n;
  /* Small sizes warm up at least 1,024 times: each of the raw
   * baseline's posted receives (up to 512) is slow the first time it is used
   * (a round trip of 25 us instead of 10 on 1.17 tcp;ofi_rxm), and a shorter
   * warmup timed that instead of the steady state. */
  int least = n == 1000 ? 1024 : 0, tenth = *iters / 10 + 1;
  *warmup = o->warmup >= 0 ? o->warmup : tenth > least ? tenth : least;
}

static int parse_int(const char *text, long lo, long hi, int *out) {
  if (!text || !*text) return -1;
  errno = 0;
  char *end;
  long v = strtol(text, &end, 10);
  if (errno || *end || v < lo || v > hi) return -1;
  *out = (int)v;
  return 0;
}

const char *perf_rma_op_name(enum perf_rma_op op) {
  switch (op) {
  case PERF_RMA_PUT: return "put";
  case PERF_RMA_PUTSIG: return "putsig";
  case PERF_RMA_GET: return "get";
  default: return NULL;
  }
}

static int parse_rma_op(const char *text, enum perf_rma_op *out) {
  for (enum perf_rma_op op = PERF_RMA_PUT; op <= PERF_RMA_GET; op++)
    if (!strcmp(text, perf_rma_op_name(op))) {
      *out = op;
      return 0;
    }
  return -1;
}

static int parse_tests(const char *text, int *out) {
  int bits = 0;
  while (*text) {
    size_t len = strcspn(text, ",");
    if (len == 3 && !strncmp(text, "lat", 3)) bits |= PERF_TEST_LAT;
    else if (len == 2 && !strncmp(text, "bw", 2)) bits |= PERF_TEST_BW;
    else if (len == 4 && !strncmp(text, "bibw", 4)) bits |= PERF_TEST_BIBW;
    else if (len == 3 && !strncmp(text, "all", 3)) bits |= PERF_TEST_LAT | PERF_TEST_BW | PERF_TEST_BIBW;
    else return -1;
    text += len;
    if (*text == ',') text++;
  }
  if (!bits) return -1;
  *out = bits;
  return 0;
}

/* One option: its spellings, whether it takes a value and, for an integer,
 * its range (lo < hi), which a bad value's error names. */
struct opt_spec {
  const char *long_name;
  char short_name;
  int has_value;
  long lo, hi;
};

enum opt_id {
  OPT_PLUGIN, OPT_NET_VERSION, OPT_RAW, OPT_DEV, OPT_CUDA, OPT_SERVER, OPT_CLIENT, OPT_PORT, OPT_TIMEOUT, OPT_TEST, OPT_MIN, OPT_MAX,
  OPT_FACTOR, OPT_ITERS, OPT_WARMUP, OPT_COMMS, OPT_WINDOW, OPT_GROUP, OPT_CHECK, OPT_PIN, OPT_JSON, OPT_RMA, OPT_RUNS, OPT_HELP,
  OPT_COUNT
};

static const struct opt_spec specs[OPT_COUNT] = {
    [OPT_PLUGIN] = {"plugin", 0, 1, 0, 0},
    [OPT_NET_VERSION] = {"net-version", 0, 1, 8, 12},
    [OPT_RAW] = {"raw", 0, 0, 0, 0},
    [OPT_DEV] = {"dev", 0, 1, 0, 1023},
    [OPT_CUDA] = {"cuda", 0, 0, 0, 0},
    [OPT_SERVER] = {"server", 0, 0, 0, 0},
    [OPT_CLIENT] = {"client", 0, 1, 0, 0},
    [OPT_PORT] = {"port", 0, 1, 1, 65535},
    [OPT_TIMEOUT] = {"timeout", 0, 1, 1, 3600},
    [OPT_TEST] = {"test", 't', 1, 0, 0},
    [OPT_MIN] = {"min-size", 'b', 1, 0, 0},
    [OPT_MAX] = {"max-size", 'e', 1, 0, 0},
    [OPT_FACTOR] = {"factor", 'f', 1, 2, 1024},
    [OPT_ITERS] = {"iters", 'n', 1, 1, 100000000},
    [OPT_WARMUP] = {"warmup", 'w', 1, 0, 100000000},
    [OPT_COMMS] = {"comms", 'c', 1, 1, PERF_MAX_COMMS},
    [OPT_WINDOW] = {"window", 'W', 1, 1, PERF_MAX_WINDOW},
    [OPT_GROUP] = {"group", 'g', 1, 1, PERF_MAX_GROUP},
    [OPT_CHECK] = {"check", 0, 0, 0, 0},
    [OPT_PIN] = {"pin", 0, 0, 0, 0},
    [OPT_JSON] = {"json", 0, 0, 0, 0},
    [OPT_RMA] = {"rma", 0, 1, 0, 0},
    [OPT_RUNS] = {"runs", 0, 1, 1, PERF_MAX_RUNS},
    [OPT_HELP] = {"help", 'h', 0, 0, 0},
};

/* Match argv[i] against the table; *inline_value points after '=' when the
 * value was given as --name=value. */
static int find_opt(const char *arg, const char **inline_value) {
  *inline_value = NULL;
  if (arg[0] == '-' && arg[1] == '-') {
    const char *name = arg + 2;
    size_t len = strcspn(name, "=");
    for (int i = 0; i < OPT_COUNT; i++)
      if (strlen(specs[i].long_name) == len && !strncmp(specs[i].long_name, name, len)) {
        if (name[len] == '=') *inline_value = name + len + 1;
        return i;
      }
  } else if (arg[0] == '-' && arg[1] && !arg[2]) {
    for (int i = 0; i < OPT_COUNT; i++)
      if (specs[i].short_name == arg[1]) return i;
  }
  return -1;
}

static int apply(struct perf_opts *o, int id, const char *v) {
  const long lo = specs[id].lo, hi = specs[id].hi;
  switch (id) {
  case OPT_PLUGIN: return snprintf(o->plugin, sizeof(o->plugin), "%s", v) >= (int)sizeof(o->plugin) || !*v ? -1 : 0;
  case OPT_NET_VERSION: return parse_int(v, lo, hi, &o->net_version);
  case OPT_RAW: o->raw = 1; return 0;
  case OPT_DEV: return parse_int(v, lo, hi, &o->dev);
  case OPT_CUDA: o->cuda = 1; return 0;
  case OPT_SERVER: o->role = PERF_ROLE_SERVER; return 0;
  case OPT_CLIENT:
    o->role = PERF_ROLE_CLIENT;
    return snprintf(o->host, sizeof(o->host), "%s", v) >= (int)sizeof(o->host) || !*v ? -1 : 0;
  case OPT_PORT: return parse_int(v, lo, hi, &o->port);
  case OPT_TIMEOUT: return parse_int(v, lo, hi, &o->timeout_s);
  case OPT_TEST: return parse_tests(v, &o->tests);
  case OPT_MIN: return perf_parse_size(v, &o->min_size);
  case OPT_MAX: return perf_parse_size(v, &o->max_size);
  case OPT_FACTOR: return parse_int(v, lo, hi, &o->factor);
  case OPT_ITERS: return parse_int(v, lo, hi, &o->iters);
  case OPT_WARMUP: return parse_int(v, lo, hi, &o->warmup);
  case OPT_COMMS: return parse_int(v, lo, hi, &o->comms);
  case OPT_WINDOW: return parse_int(v, lo, hi, &o->window);
  case OPT_GROUP: return parse_int(v, lo, hi, &o->group);
  case OPT_CHECK: o->check = 1; return 0;
  case OPT_PIN: o->pin = 1; return 0;
  case OPT_JSON: o->json = 1; return 0;
  case OPT_RMA: return parse_rma_op(v, &o->rma);
  case OPT_RUNS: return parse_int(v, lo, hi, &o->runs);
  default: return -1;
  }
}

/* Largest message: the v8 ABI carries sizes in an int. */
#define PERF_MAX_SIZE ((size_t)INT32_MAX)

enum perf_args_result perf_args_parse(int argc, char *const argv[], struct perf_opts *o, char *err, size_t errlen) {
  perf_args_defaults(o);
  err[0] = 0;
  int role_seen = 0;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i], *value;
    int id = find_opt(arg, &value);
    if (id < 0) {
      snprintf(err, errlen, "unknown option '%s' (see --help)", arg);
      return PERF_ARGS_ERROR;
    }
    if (id == OPT_HELP) return PERF_ARGS_HELP;
    if (specs[id].has_value && !value) {
      if (i + 1 >= argc) {
        snprintf(err, errlen, "option '%s' needs a value", arg);
        return PERF_ARGS_ERROR;
      }
      value = argv[++i];
    } else if (!specs[id].has_value && value) {
      snprintf(err, errlen, "option '--%s' takes no value", specs[id].long_name);
      return PERF_ARGS_ERROR;
    }
    if (id == OPT_SERVER || id == OPT_CLIENT) {
      if (role_seen++) {
        snprintf(err, errlen, "--server and --client exclude each other and appear once");
        return PERF_ARGS_ERROR;
      }
    }
    if (apply(o, id, value)) {
      if (specs[id].lo < specs[id].hi)
        snprintf(err, errlen, "bad value '%s' for '%s': an integer from %ld to %ld", value ? value : "", arg,
                 specs[id].lo, specs[id].hi);
      else
        snprintf(err, errlen, "bad value '%s' for '%s'", value ? value : "", arg);
      return PERF_ARGS_ERROR;
    }
  }
  if (o->raw && (o->plugin[0] || o->net_version)) {
    snprintf(err, errlen, "--raw excludes --plugin and --net-version");
    return PERF_ARGS_ERROR;
  }
  if (o->min_size > o->max_size) {
    snprintf(err, errlen, "--min-size (%zu) is larger than --max-size (%zu)", o->min_size, o->max_size);
    return PERF_ARGS_ERROR;
  }
  if (o->max_size > PERF_MAX_SIZE) {
    snprintf(err, errlen, "--max-size %zu exceeds the largest message NCCL posts (%zu)", o->max_size, PERF_MAX_SIZE);
    return PERF_ARGS_ERROR;
  }
  if (o->pin && o->role != PERF_ROLE_LOCAL) {
    snprintf(err, errlen, "--pin is for the local run (use taskset with --server/--client)");
    return PERF_ARGS_ERROR;
  }
  if (o->rma && ((o->tests & PERF_TEST_BIBW) || o->comms != 1 || o->group != 1 || o->cuda || o->net_version)) {
    snprintf(err, errlen, "--rma times lat and bw over one connection in host memory: it excludes -t bibw, "
                          "--comms, --group, --cuda and --net-version");
    return PERF_ARGS_ERROR;
  }
  o->compare = o->role == PERF_ROLE_LOCAL && !o->raw && !o->plugin[0] && !o->net_version && !o->json;
  /* The side-by-side run is the one read as a verdict: three runs show
   * whether the host let the numbers settle. */
  if (!o->runs) o->runs = o->compare ? 3 : 1;
  return PERF_ARGS_OK;
}
