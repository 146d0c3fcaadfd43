#include "srd/param.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "srd/log.h"

#define KIB 1024LL
#define MIB (1024LL * 1024)

static const struct srd_param_desc table[SRD_PARAM_COUNT] = {
    [SRD_PARAM_PROVIDER] = {"NCCL_SRD_PROVIDER", 1, 0, 0, 0,
                            "libfabric provider (else FI_PROVIDER, else the first usable of efa, tcp on libfabric "
                            "2.x, tcp;ofi_rxm, shm); tcp means tcp;ofi_rxm on libfabric 1.x"},
    [SRD_PARAM_IFNAME] = {"NCCL_SRD_IFNAME", 1, 0, 0, 0,
                          "interfaces to use as rails: prefixes, ^ to exclude, = for exact names"},
    [SRD_PARAM_RAILS] = {"NCCL_SRD_RAILS", 0, 0, 0, 64, "most rails per device (0: every local NIC)"},
    [SRD_PARAM_EPS_PER_RAIL] = {"NCCL_SRD_EPS_PER_RAIL", 0, 1, 1, 8, "endpoints per rail"},
    [SRD_PARAM_EAGER_MAX] = {"NCCL_SRD_EAGER_MAX", 0, -1, -1, 64 * KIB,
                             "largest message sent eagerly, before the receiver's clear-to-send (-1: 32 KiB on "
                             "libfabric 2.x's native tcp; on tcp;ofi_rxm the largest power of two that fits "
                             "FI_OFI_RXM_BUFFER_SIZE less a 40-byte header, 8 KiB by default and 32 KiB with "
                             "FI_OFI_RXM_BUFFER_SIZE=32808; 8 KiB on other providers). Cut to what one send of the "
                             "provider carries; two ranks that differ use the smaller"},
    /* -1: the eager size. A message that does not go eagerly then goes to
     * the progress threads, so NCCL's thread makes no bulk socket copy of
     * its own (NCCL's Simple steps over tcp are 16-64 KiB: BENCHMARKS.md,
     * "Stripe threshold"). */
    [SRD_PARAM_STRIPE_THRESHOLD] = {"NCCL_SRD_STRIPE_THRESHOLD", 0, -1, -1, 1024 * MIB,
                                    "smallest message carried by progress threads and split across rails "
                                    "(-1: the eager size)"},
    [SRD_PARAM_MIN_STRIPE] = {"NCCL_SRD_MIN_STRIPE", 0, 64 * KIB, 128, 1024 * MIB,
                              "smallest stripe of a split message (rounded to 128 bytes)"},
    [SRD_PARAM_CONNECT_TIMEOUT_MS] = {"NCCL_SRD_CONNECT_TIMEOUT_MS", 0, 30000, 100, 3600000,
                                      "how long connect waits for the listener's answer"},
    [SRD_PARAM_KEEPALIVE_MS] = {"NCCL_SRD_KEEPALIVE_MS", 0, 1000, 10, 600000,
                                "silence after which a comm with requests in flight probes its peer (a probe "
                                "that comes back failed, like any failed operation, means the peer is gone; "
                                "one the provider refuses is tried again)"},
    [SRD_PARAM_SILENT_WARN_MS] = {"NCCL_SRD_SILENT_WARN_MS", 0, 30000, 10, 3600000,
                                  "silence after which a comm with requests in flight logs that it still waits "
                                  "(again after twice as long each time, while the silence lasts)"},
    /* A slow or paused peer is not a dead one: by default the job's own
     * watchdog (PyTorch's, NCCL's RAS) decides when a wait is a hang. */
    [SRD_PARAM_PEER_TIMEOUT_MS] = {"NCCL_SRD_PEER_TIMEOUT_MS", 0, 0, 0, 86400000,
                                   "silence after which a comm with requests in flight fails (0: never; a dead "
                                   "peer is found by evidence, not by silence)"},
    [SRD_PARAM_CLOSE_TIMEOUT_MS] = {"NCCL_SRD_CLOSE_TIMEOUT_MS", 0, 5000, 0, 600000,
                                    "how long close waits for operations already handed to the NIC, writes the peer was "
                                    "cleared to do, and a send comm's receiver saying it took everything"},
    [SRD_PARAM_FAILOVER] = {"NCCL_SRD_FAILOVER", 0, 1, 0, 1,
                            "1: a failed rail's stripes move to the others and only the last rail's loss fails comms; "
                            "0: any failed rail fails every comm of its device"},
    [SRD_PARAM_RAIL_HOLDDOWN_MS] = {"NCCL_SRD_RAIL_HOLDDOWN_MS", 0, 1000, 0, 600000,
                                    "how long a failed rail's link must be up again before a probe lets it rejoin"},
    [SRD_PARAM_FAILOVER_REKEY] = {"NCCL_SRD_FAILOVER_REKEY", 0, 0, 0, 1,
                                  "1: on efa with device writes, a cut rail rejoins after its registrations are made "
                                  "again under new keys (you vouch that every peer's device writes and that the NIC "
                                  "checks every packet's key: efa does not say); 0: a cut rail stays out"},
    [SRD_PARAM_TEST_REORDER] = {"NCCL_SRD_TEST_REORDER", 0, 0, 0, 1,
                                "test mode: delay and shuffle completions to prove order independence"},
    [SRD_PARAM_TEST_RECV_REFUSE] = {"NCCL_SRD_TEST_RECV_REFUSE", 0, 0, 0, 1000000,
                                    "test mode: refuse every Nth repost of a receive buffer, as a provider short "
                                    "of memory may (0: never)"},
    [SRD_PARAM_TOPO_FILE] = {"NCCL_SRD_TOPO_FILE", 1, 0, 0, 0,
                             "hwloc XML topology to group NICs with, instead of the live machine"},
    [SRD_PARAM_TUNER_CONFIG] = {"NCCL_SRD_TUNER_CONFIG", 1, 0, 0, 0, "tuner rule file overriding the model"},
    [SRD_PARAM_PROGRESS_THREADS] = {"NCCL_SRD_PROGRESS_THREADS", 0, -1, -1, 16,
                                    "progress threads per NIC, each on a lane of its own (-1: sized from the CPUs "
                                    "this process may use and the plugin's processes on the host, started on the "
                                    "first large message; 0: none)"},
    [SRD_PARAM_GDR] = {"NCCL_SRD_GDR", 1, 0, 0, 0,
                       "GPU memory (GPUDirect RDMA): auto (when provider and CUDA allow), 0 (host only), 1 (required)"},
    [SRD_PARAM_TEST_CPUS] = {"NCCL_SRD_TEST_CPUS", 0, 0, 0, 4096,
                             "test mode: CPUs (online and usable) the automatic progress-thread count assumes"},
    [SRD_PARAM_EFA_FABRIC] = {"NCCL_SRD_EFA_FABRIC", 1, 0, 0, 0,
                              "efa's fabric: efa (the provider's protocol: any EFA device, emulation where the "
                              "device lacks RDMA) or efa-direct (the device alone); every node must choose the same"},
    [SRD_PARAM_RMA] = {"NCCL_SRD_RMA", 1, 0, 0, 0,
                       "one-sided RMA for NCCL 2.30+: auto (off until GPU windows work by default), 0 (off), host (host "
                       "windows only), gpu (host and GPU windows where every rail is efa, or shm with FI_HMEM)"},
    [SRD_PARAM_TEST_NIC_SIGNALS] = {"NCCL_SRD_TEST_NIC_SIGNALS", 0, 0, 0, 1,
                                    "test mode: host windows take their signals by loopback RDMA writes, as GPU "
                                    "windows on efa do"},
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int loaded;
static int64_t ints[SRD_PARAM_COUNT];
static char *strs[SRD_PARAM_COUNT];

/* units: the suffix may be spelled KiB or KB too (the tools' arguments). */
static int parse_scaled(const char *text, int units, int64_t *out) {
  if (!text || !*text) return -1;
  errno = 0;
  char *end;
  long long v = strtoll(text, &end, 0);
  if (errno || end == text) return -1;
  long long mult = 1;
  if (*end == 'k' || *end == 'K') mult = KIB, end++;
  else if (*end == 'm' || *end == 'M') mult = MIB, end++;
  else if (*end == 'g' || *end == 'G') mult = 1024 * MIB, end++;
  if (units && mult > 1 && (*end == 'i' || *end == 'I')) end++;
  if (units && mult > 1 && (*end == 'b' || *end == 'B')) end++;
  if (*end) return -1;
  if (v > LLONG_MAX / mult || v < LLONG_MIN / mult) return -1;
  *out = v * mult;
  return 0;
}

int srd_param_parse_int(const char *text, int64_t *out) { return parse_scaled(text, 0, out); }

int srd_parse_size(const char *text, uint64_t *out) {
  int64_t v;
  if (!text || *text < '0' || *text > '9' || parse_scaled(text, 1, &v) || v < 0) return -1;
  *out = (uint64_t)v;
  return 0;
}

int srd_param_check(enum srd_param p, const char *value, char *why, size_t len) {
  const struct srd_param_desc *d = &table[p];
  if (!value || !*value) return 0;
  if (p == SRD_PARAM_GDR) {
    if (!strcasecmp(value, "auto") || !strcmp(value, "0") || !strcmp(value, "1")) return 0;
    snprintf(why, len, "is not auto, 0 or 1");
    return -1;
  }
  if (p == SRD_PARAM_RMA) {
    if (!strcasecmp(value, "auto") || !strcmp(value, "0") || !strcmp(value, "host") || !strcmp(value, "gpu"))
      return 0;
    snprintf(why, len, "is not auto, 0, host or gpu");
    return -1;
  }
  if (p == SRD_PARAM_EFA_FABRIC) {
    if (!strcmp(value, "efa") || !strcmp(value, "efa-direct")) return 0;
    snprintf(why, len, "is neither efa nor efa-direct");
    return -1;
  }
  /* A file named but unreadable is a mistake to report, not an unset
   * variable to pass over silently (the tuner would run without its rules). */
  if (p == SRD_PARAM_TOPO_FILE || p == SRD_PARAM_TUNER_CONFIG) {
    if (!access(value, R_OK)) return 0;
    snprintf(why, len, "cannot be read (%s)", strerror(errno));
    return -1;
  }
  if (d->is_string) return 0;
  int64_t n;
  if (srd_param_parse_int(value, &n)) {
    snprintf(why, len, "is not a number (decimal or 0x hex, with an optional K, M or G suffix)");
    return -1;
  }
  if (n < d->min || n > d->max) {
    snprintf(why, len, "is out of range [%lld, %lld]", (long long)d->min, (long long)d->max);
    return -1;
  }
  return 0;
}

void srd_param_default_text(enum srd_param p, char *buf, size_t len) {
  if (p == SRD_PARAM_GDR || p == SRD_PARAM_RMA) snprintf(buf, len, "auto");
  else if (p == SRD_PARAM_EFA_FABRIC) snprintf(buf, len, "efa");
  else if (p == SRD_PARAM_TOPO_FILE) snprintf(buf, len, "the live machine's topology");
  else if (p == SRD_PARAM_TUNER_CONFIG) snprintf(buf, len, "the tuner's model alone");
  else if (table[p].is_string) snprintf(buf, len, "unset");
  else snprintf(buf, len, "%lld", (long long)table[p].def);
}

static void load_locked(void) {
  for (int i = 0; i < SRD_PARAM_COUNT; i++) {
    const struct srd_param_desc *d = &table[i];
    const char *v = getenv(d->name);
    free(strs[i]);
    strs[i] = NULL;
    ints[i] = d->def;
    char why[160], def[64];
    if (srd_param_check((enum srd_param)i, v, why, sizeof(why))) {
      srd_param_default_text((enum srd_param)i, def, sizeof(def));
      SRD_WARN("%s=%s %s; using %s", d->name, v, why, def);
      continue;
    }
    if (!v || !*v) continue;
    if (d->is_string) strs[i] = strdup(v);
    else srd_param_parse_int(v, &ints[i]);
  }
  loaded = 1;
}

const struct srd_param_desc *srd_param_info(enum srd_param p) { return &table[p]; }

int64_t srd_param_int(enum srd_param p) {
  pthread_mutex_lock(&lock);
  if (!loaded) load_locked();
  int64_t v = ints[p];
  pthread_mutex_unlock(&lock);
  return v;
}

const char *srd_param_str(enum srd_param p) {
  pthread_mutex_lock(&lock);
  if (!loaded) load_locked();
  const char *v = strs[p];
  pthread_mutex_unlock(&lock);
  return v;
}

void srd_param_reload(void) {
  pthread_mutex_lock(&lock);
  load_locked();
  pthread_mutex_unlock(&lock);
}

int srd_param_rma_offered(const char **why) {
  const char *mode = srd_param_str(SRD_PARAM_RMA);
  if (mode && strcmp(mode, "host") == 0) {
    *why = "host windows only (NCCL_SRD_RMA=host)";
    return SRD_RMA_HOST;
  }
  if (mode && strcmp(mode, "gpu") == 0) {
    *why = "host and GPU windows (NCCL_SRD_RMA=gpu), where every rail is efa (its NIC writes GPU memory and the "
           "signals) or shm with FI_HMEM, and CUDA can write 64-bit stream memory";
    return SRD_RMA_GPU;
  }
  /* NCCL registers its signal words in GPU memory. Signals into it work on
   * efa by construction, never run on EFA hardware yet, and on shm, whose
   * target copies run on CUDA's legacy default stream (the hang DESIGN.md
   * records for two-sided shm): an opt-in, not a default. */
  *why = mode && strcmp(mode, "0") == 0
             ? "off (NCCL_SRD_RMA=0)"
             : "signals into GPU memory are offered with NCCL_SRD_RMA=gpu only: on efa (not yet run on EFA "
               "hardware) and on shm with FI_HMEM (a trial: shm's copies use CUDA's legacy stream); "
               "NCCL_SRD_RMA=host offers host windows only";
  return SRD_RMA_OFF;
}
