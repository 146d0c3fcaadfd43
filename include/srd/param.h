/* Every NCCL_SRD_* variable lives in one table (src/util/param.c). Values are
 * read once, validated, and cached; a bad value is reported and replaced by
 * the default. The plugin only reads the environment, never writes it. */
#ifndef SRD_PARAM_H
#define SRD_PARAM_H

#include <stddef.h>
#include <stdint.h>

enum srd_param {
  SRD_PARAM_PROVIDER,         /* string: libfabric provider to use */
  SRD_PARAM_IFNAME,           /* string: interface selection, NCCL syntax */
  SRD_PARAM_RAILS,            /* int: cap on rails per device (0: all) */
  SRD_PARAM_EPS_PER_RAIL,     /* int: endpoints per rail */
  SRD_PARAM_EAGER_MAX,        /* size: largest eager message */
  SRD_PARAM_STRIPE_THRESHOLD, /* size: smallest message striped over rails */
  SRD_PARAM_MIN_STRIPE,       /* size: smallest stripe */
  SRD_PARAM_CONNECT_TIMEOUT_MS, /* int: bound on a connect without answer */
  SRD_PARAM_KEEPALIVE_MS,     /* int: silence before a busy comm probes its peer */
  SRD_PARAM_SILENT_WARN_MS,   /* int: silence before a busy comm's wait is logged as a warning */
  SRD_PARAM_PEER_TIMEOUT_MS,  /* int: silence after which a busy comm fails (0: never) */
  SRD_PARAM_CLOSE_TIMEOUT_MS, /* int: how long close waits for in-flight operations */
  SRD_PARAM_FAILOVER,         /* bool: a failed rail's work moves to the others */
  SRD_PARAM_RAIL_HOLDDOWN_MS, /* int: link up this long before a failed rail is probed to rejoin */
  SRD_PARAM_FAILOVER_REKEY,   /* bool: on efa, a cut rail rejoins under new keys (the user vouches for the NIC) */
  SRD_PARAM_TEST_REORDER,     /* bool: shuffle and delay completions (tests) */
  SRD_PARAM_TEST_RECV_REFUSE, /* int: refuse every Nth repost of a receive buffer (tests; 0: never) */
  SRD_PARAM_TOPO_FILE,        /* string: hwloc XML to use instead of the machine */
  SRD_PARAM_TUNER_CONFIG,     /* string: tuner rule file */
  SRD_PARAM_PROGRESS_THREADS, /* int: progress threads per NIC (-1: automatic; 0: NCCL's thread polls) */
  SRD_PARAM_GDR,              /* string: GPU memory: auto, 0 (host only) or 1 (required) */
  SRD_PARAM_TEST_CPUS,        /* int: CPUs the automatic lane count assumes (tests; 0: the machine's) */
  SRD_PARAM_EFA_FABRIC,       /* string: efa's RDM fabric: efa (default) or efa-direct */
  SRD_PARAM_RMA,              /* string: one-sided RMA (ncclRma): auto, 0 (off), host (host windows only) or gpu */
  SRD_PARAM_TEST_NIC_SIGNALS, /* bool: host windows take signals by loopback writes, as GPU windows on efa (tests) */
  SRD_PARAM_COUNT
};

struct srd_param_desc {
  const char *name;    /* full variable name */
  int is_string;
  int64_t def;         /* default for numbers */
  int64_t min, max;    /* accepted range for numbers */
  const char *doc;
};

const struct srd_param_desc *srd_param_info(enum srd_param p);
int64_t srd_param_int(enum srd_param p);
/* NULL when unset or empty. */
const char *srd_param_str(enum srd_param p);
/* The one validation of every variable, shared by the plugin (which warns and
 * uses the default) and srd-info: 0 when VALUE (unset or empty included) is
 * accepted for P; else WHY completes "NAME=VALUE ..." ("is out of range
 * [10, 600000]"). A rejected NCCL_SRD_GDR or NCCL_SRD_TOPO_FILE reads as unset. */
int srd_param_check(enum srd_param p, const char *value, char *why, size_t len);
/* What is in force while P is unset or rejected: "8192", "auto", ... */
void srd_param_default_text(enum srd_param p, char *buf, size_t len);
/* Re-read the environment (tests and tools only). */
void srd_param_reload(void);
/* The one parser of scaled numbers: decimal (or hex with 0x) with an optional
 * K/M/G suffix, powers of 1024; 0 on success. srd_param_parse_int reads the
 * variables; srd_parse_size the tools' size arguments: no sign, and the
 * suffix may be spelled KiB or KB too. */
int srd_param_parse_int(const char *text, int64_t *out);
/* Does NCCL_SRD_RMA let ncclRma's init succeed, and why (or why not)? The
 * one reading of it, for the plugin and srd-info: SRD_RMA_GPU still depends
 * on the devices (srd_gdr_rma_windows). */
enum srd_rma_mode { SRD_RMA_OFF = 0, SRD_RMA_HOST = 1, SRD_RMA_GPU = 2 };
int srd_param_rma_offered(const char **why);
int srd_parse_size(const char *text, uint64_t *out);

#endif
