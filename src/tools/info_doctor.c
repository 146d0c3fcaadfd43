#include "info_doctor.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <rdma/fabric.h>

#include "config.h"
#include "srd/param.h"
#include "srd/tuner.h"

#define MIB (1024ULL * 1024)

__attribute__((format(printf, 4, 5))) static void add(struct info_checks *o, enum info_verdict v, const char *name,
                                                      const char *fmt, ...) {
  if (o->n == INFO_MAX_CHECKS) return;
  struct info_check *c = &o->c[o->n++];
  c->verdict = v;
  snprintf(c->name, sizeof(c->name), "%s", name);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->text, sizeof(c->text), fmt, ap);
  va_end(ap);
  if (v == INFO_FAIL) o->failed++;
}

const char *info_verdict_name(enum info_verdict v) { return v == INFO_OK ? "ok" : v == INFO_WARN ? "warn" : "FAIL"; }

/* path under SRD_INFO_SYSROOT (tests), else as it is. */
static const char *sys_path(char *buf, size_t len, const char *path) {
  const char *root = getenv("SRD_INFO_SYSROOT");
  snprintf(buf, len, "%s%s", root ? root : "", path);
  return buf;
}

int info_peermem(char *loaded, size_t len) {
  static const char *const modules[] = {"efa_nv_peermem", "nvidia_peermem", "nv_peer_mem"};
  char rel[128], path[4096];
  size_t n = 0;
  loaded[0] = 0;
  for (size_t i = 0; i < sizeof(modules) / sizeof(modules[0]); i++) {
    snprintf(rel, sizeof(rel), "/sys/module/%s", modules[i]);
    if (access(sys_path(path, sizeof(path), rel), F_OK) == 0 && n < len)
      n += (size_t)snprintf(loaded + n, len - n, "%s%s", n ? ", " : "", modules[i]);
  }
  return n > 0;
}

/* A "Key:   N" line of /proc/meminfo; -1 when absent. */
static long long meminfo(const char *key) {
  char path[4096], line[256];
  FILE *f = fopen(sys_path(path, sizeof(path), "/proc/meminfo"), "r");
  if (!f) return -1;
  long long v = -1;
  size_t n = strlen(key);
  while (v < 0 && fgets(line, sizeof(line), f))
    if (!strncmp(line, key, n) && line[n] == ':') v = atoll(line + n + 1);
  fclose(f);
  return v;
}

static void check_variables(struct info_checks *o) {
  int set = 0, bad = 0;
  for (int p = 0; p < SRD_PARAM_COUNT; p++) {
    const char *name = srd_param_info((enum srd_param)p)->name, *v = getenv(name);
    char why[160], def[64];
    if (!v || !*v) continue;
    set++;
    if (!srd_param_check((enum srd_param)p, v, why, sizeof(why))) continue;
    bad++;
    srd_param_default_text((enum srd_param)p, def, sizeof(def));
    add(o, INFO_FAIL, "variables", "%s=%s %s; the plugin uses %s", name, v, why, def);
  }
  if (!bad) add(o, INFO_OK, "variables", "%d NCCL_SRD_* variable(s) set, all valid", set);
}

/* A readable rule file can still be malformed: the tuner would then ignore it
 * with one warning in NCCL's log, which is easy to miss. */
static void check_tuner_config(struct info_checks *o) {
  const char *path = srd_param_str(SRD_PARAM_TUNER_CONFIG);
  if (!path) return; /* unset, or unreadable: check_variables said so */
  struct srd_tuner_rules rules;
  char err[256];
  if (srd_rules_load(path, &rules, err, sizeof(err))) {
    add(o, INFO_FAIL, "tuner", "NCCL_SRD_TUNER_CONFIG=%s: %s; the tuner ignores the file", path, err);
    return;
  }
  add(o, INFO_OK, "tuner", "NCCL_SRD_TUNER_CONFIG=%s: %d rule(s)", path, rules.n);
  srd_rules_free(&rules);
}

static void check_provider(const struct info_report *r, struct info_checks *o) {
  const char *forced = srd_param_str(SRD_PARAM_PROVIDER), *from = "NCCL_SRD_PROVIDER";
  const char *filter = getenv("FI_PROVIDER");
  if (!forced) forced = filter, from = "FI_PROVIDER";
  char why[256];
  if (r->discovered)
    add(o, INFO_OK, "provider", "%s chosen (%s), %d NIC(s)", r->nics.provider, r->nics.reason, r->nics.n);
  else if (forced && *forced && srd_fabric_filtered(forced, why, sizeof(why)))
    add(o, INFO_FAIL, "provider", "%s=%s is not usable: %s", from, forced, why);
  else if (forced && *forced)
    add(o, INFO_FAIL, "provider", "%s=%s is not usable (see the warnings of plain srd-info)", from, forced);
  else
    add(o, INFO_FAIL, "provider", "no provider offers RDM endpoints with RMA and remote CQ data");
  if (filter && *filter)
    add(o, INFO_WARN, "FI_PROVIDER", "FI_PROVIDER=%s limits libfabric to what it names (container images set it); "
        "unset it or include the provider you want", filter);
}

/* ofi_rxm (1.x's tcp) sends eagerly only what fits its eager buffers; NCCL's
 * 16-32 KiB steps then wait for clear-to-sends (BENCHMARKS.md, "Eager size"). */
static void check_eager(const struct info_report *r, struct info_checks *o) {
  if (!r->discovered || !r->nics.n || !strstr(r->nics.provider, "ofi_rxm")) return;
  int64_t set = srd_param_int(SRD_PARAM_EAGER_MAX);
  size_t eager = srd_eager_default(r->nics.nics[0].info), buffer = srd_rxm_buffer_size();
  if (set >= 0 && (size_t)set + SRD_EAGER_HEADER > buffer)
    add(o, INFO_WARN, "eager", "NCCL_SRD_EAGER_MAX=%lld with its %d-byte header exceeds ofi_rxm's %zu-byte eager "
        "buffers: those messages go by rxm's own rendezvous (slower); set FI_OFI_RXM_BUFFER_SIZE=%lld", (long long)set,
        SRD_EAGER_HEADER, buffer, (long long)set + SRD_EAGER_HEADER);
  else if (set >= 0)
    add(o, INFO_OK, "eager", "NCCL_SRD_EAGER_MAX=%lld within ofi_rxm's %zu-byte eager buffers", (long long)set, buffer);
  else if (srd_rxm_buffer_short(r->nics.nics[0].info))
    add(o, INFO_WARN, "eager", "ofi_rxm's %zu-byte eager buffers hold eager messages up to %zu bytes, and NCCL's "
        "16-32 KiB steps wait for clear-to-sends; FI_OFI_RXM_BUFFER_SIZE=%d sends them eagerly (rxm keeps "
        "FI_OFI_RXM_MSG_RX_SIZE buffers of that size per connection)", buffer, eager, SRD_RXM_BUFFER_ADVISED);
  else
    add(o, INFO_OK, "eager", "eager messages up to %zu bytes in ofi_rxm's %zu-byte buffers", eager, buffer);
}

static void check_init(const struct info_report *r, struct info_checks *o) {
  for (int g = 0; r->grouped && g < r->topo.ngroups; g++)
    if (r->gdr[g].fail)
      add(o, INFO_FAIL, "init", "NCCL_SRD_GDR=1 but device %d cannot offer GPU memory (%s): the plugin's init fails",
          g, r->gdr[g].why);
}

static int efa_relevant(const struct info_report *r, int expect) {
  return (expect & INFO_EXPECT_EFA) || (r->discovered && !strcmp(r->nics.provider, "efa"));
}

/* What a build against these headers can do with GPU memory on efa. */
static void check_libfabric(const struct info_report *r, int expect, struct info_checks *o) {
  unsigned major = FI_MAJOR(r->fi_runtime), minor = FI_MINOR(r->fi_runtime);
  if (info_fi_too_old(r))
    add(o, INFO_FAIL, "libfabric", "%u.%u is older than %d.%d, the oldest supported", major, minor, SRD_FI_MIN_MAJOR,
        SRD_FI_MIN_MINOR);
  else
    add(o, INFO_OK, "libfabric", "%u.%u (built against %u.%u)", major, minor, FI_MAJOR(r->fi_built),
        FI_MINOR(r->fi_built));
  char missing[160] = "";
  if (!HAVE_DECL_FI_OPT_CUDA_API_PERMITTED) strcat(missing, " FI_OPT_CUDA_API_PERMITTED");
  if (!HAVE_DECL_FI_MR_DMABUF) strcat(missing, " FI_MR_DMABUF");
  if (!HAVE_DECL_FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES) strcat(missing, " 128-byte-write-ordering");
  if (!missing[0]) {
    add(o, INFO_OK, "build", "libfabric headers had every GPU-memory option efa needs");
    return;
  }
  enum info_verdict v = (expect & INFO_EXPECT_GDR) && efa_relevant(r, expect) ? INFO_FAIL
                        : efa_relevant(r, expect)                           ? INFO_WARN
                                                                            : INFO_OK;
  add(o, v, "build", "built against libfabric %u.%u headers without%s: cannot offer GPU memory on efa (p5); "
      "build against the EFA installer's libfabric (/opt/amazon/efa)", FI_MAJOR(r->fi_built), FI_MINOR(r->fi_built),
      missing);
}

static void check_efa(const struct info_report *r, struct info_checks *o) {
  char why[256], path[4096];
  if (r->discovered && !strcmp(r->nics.provider, "efa")) {
    add(o, INFO_OK, "efa", "efa chosen, %d NIC(s)", r->nics.n);
    return;
  }
  int listed = 0;
  for (int i = 0; i < r->nproviders; i++) listed |= !strcmp(r->providers[i].name, "efa");
  const char *forced = srd_param_str(SRD_PARAM_PROVIDER);
  if (srd_fabric_filtered("efa", why, sizeof(why)))
    add(o, INFO_FAIL, "efa", "not chosen: %s", why);
  else if (forced && strcmp(forced, "efa"))
    add(o, INFO_FAIL, "efa", "not chosen: NCCL_SRD_PROVIDER=%s asks for another provider", forced);
  else if (access(sys_path(path, sizeof(path), "/dev/infiniband"), F_OK))
    add(o, INFO_FAIL, "efa", "not chosen: no %s (no EFA device here: the instance has none attached, the efa kernel "
        "module is not loaded, or the container was not given one: request vpc.amazonaws.com/efa)", path);
  else if (!listed)
    add(o, INFO_FAIL, "efa", "not chosen: libfabric %u.%u offers no efa provider (built without it? use the EFA "
        "installer's, /opt/amazon/efa/lib)", FI_MAJOR(r->fi_runtime), FI_MINOR(r->fi_runtime));
  else
    add(o, INFO_FAIL, "efa", "not chosen: efa is listed but unusable (no RDMA write, or no access to %s: see "
        "the warnings of plain srd-info)", path);
}

static void check_memlock(const struct info_report *r, int expect, struct info_checks *o) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_MEMLOCK, &rl)) return;
  if (rl.rlim_cur == RLIM_INFINITY) {
    add(o, INFO_OK, "memlock", "unlimited");
    return;
  }
  if (efa_relevant(r, expect))
    add(o, INFO_FAIL, "memlock", "%llu KiB: efa pins every buffer it registers; make it unlimited (ulimit -l "
        "unlimited; docker --ulimit memlock=-1)", (unsigned long long)(rl.rlim_cur / 1024));
  else
    add(o, INFO_OK, "memlock", "%llu KiB (%s pins no memory; efa needs unlimited)",
        (unsigned long long)(rl.rlim_cur / 1024), r->discovered ? r->nics.provider : "the provider");
}

/* efa's internal buffers use huge pages unless FI_EFA_USE_HUGE_PAGE=0
 * (fi_efa.7; prov/efa/src/rdm/efa_rdm_ep_fiops.c). Where the host has them
 * but this cgroup may take none, the kernel's hugetlb controller answers the
 * first touch with SIGBUS instead of letting the mmap fail. */
static void check_huge_pages(const struct info_report *r, int expect, struct info_checks *o) {
  long long total = meminfo("HugePages_Total"), free_pages = meminfo("HugePages_Free");
  long long size_kib = meminfo("Hugepagesize");
  const char *use = getenv("FI_EFA_USE_HUGE_PAGE");
  int off = use && (!strcmp(use, "0") || !strcasecmp(use, "false") || !strcasecmp(use, "off") ||
                    !strcasecmp(use, "no"));
  if (!efa_relevant(r, expect)) {
    add(o, INFO_OK, "hugepages", "%lld free of %lld (efa's buffers would use them; %s does not)", free_pages, total,
        r->discovered ? r->nics.provider : "the provider");
    return;
  }
  if (off) {
    add(o, INFO_OK, "hugepages", "FI_EFA_USE_HUGE_PAGE=%s: efa uses ordinary pages", use);
    return;
  }
  char rel[96], path[4096], limit[64] = "";
  snprintf(rel, sizeof(rel), "/sys/fs/cgroup/hugetlb.%lldMB.max", size_kib > 0 ? size_kib / 1024 : 2);
  FILE *f = fopen(sys_path(path, sizeof(path), rel), "r");
  if (f) {
    if (!fgets(limit, sizeof(limit), f)) limit[0] = 0;
    fclose(f);
    limit[strcspn(limit, "\n")] = 0;
  }
  if (free_pages > 0 && !strcmp(limit, "0"))
    add(o, INFO_FAIL, "hugepages", "%lld huge pages free on the host but this cgroup may use none (%s is 0): efa's "
        "buffers would fault (SIGBUS); request hugepages-2Mi for the pod or set FI_EFA_USE_HUGE_PAGE=0", free_pages,
        rel);
  else
    add(o, INFO_OK, "hugepages", "%lld free of %lld%s%s (efa falls back to ordinary pages when none are free)",
        free_pages, total, limit[0] ? ", cgroup limit " : "", limit);
}

/* NCCL keeps its intra-node (SHM transport) buffers in /dev/shm, and shm and
 * efa's local peers too; container runtimes default it to 64 MiB. */
static void check_dev_shm(struct info_checks *o) {
  char path[4096];
  struct statvfs sv;
  if (statvfs(sys_path(path, sizeof(path), "/dev/shm"), &sv)) {
    add(o, INFO_FAIL, "/dev/shm", "%s: %s (NCCL and the shm provider need it)", path, strerror(errno));
    return;
  }
  unsigned long long size = (unsigned long long)sv.f_blocks * sv.f_frsize;
  enum info_verdict v = size < 256 * MIB ? INFO_FAIL : size < 1024 * MIB ? INFO_WARN : INFO_OK;
  add(o, v, "/dev/shm", "%llu MiB%s", size / MIB,
      v == INFO_OK ? "" : ": NCCL's intra-node buffers live there; give at least 1 GiB (docker --shm-size=1g; "
                          "Kubernetes: an emptyDir of medium Memory on /dev/shm)");
}

static void check_gdr(const struct info_report *r, int expect, struct info_checks *o) {
  char loaded[96];
  info_peermem(loaded, sizeof(loaded));
  int ngpus = r->grouped ? r->topo.ngpus : 0, dmabuf = 0;
  for (int g = 0; r->grouped && g < r->topo.ngroups; g++) dmabuf |= r->gdr[g].dmabuf;
  /* A NIC that writes GPU memory itself (efa, also when expected but not
   * chosen) needs dma-buf or a peermem module. */
  int nic_writes = (expect & INFO_EXPECT_EFA) || (r->discovered && !srd_gdr_provider_copies(r->nics.provider));
  enum info_verdict v = INFO_OK;
  if (!loaded[0] && !dmabuf && nic_writes && ngpus > 0) v = (expect & INFO_EXPECT_GDR) ? INFO_FAIL : INFO_WARN;
  add(o, v, "peermem", "%s%s", loaded[0] ? loaded : "none of efa_nv_peermem, nvidia_peermem, nv_peer_mem loaded",
      v == INFO_OK ? ""
                   : " and no dma-buf: the NIC cannot reach GPU memory (load efa_nv_peermem, or use a kernel and "
                     "CUDA driver with dma-buf)");
  if (!(expect & INFO_EXPECT_GDR)) return;
  if (ngpus == 0) {
    add(o, INFO_FAIL, "gdr", "no GPU found (NVIDIA display/3D controllers on PCI)");
    return;
  }
  for (int g = 0; g < r->topo.ngroups; g++)
    add(o, r->gdr[g].gpu ? INFO_OK : INFO_FAIL, "gdr", "device %d: GPU memory %s: %s", g,
        r->gdr[g].gpu ? "offered" : "not offered", r->gdr[g].why);
}

/* NCCL opens NCCL_NET_PLUGIN as given, then as libnccl-net-NAME.so; unset,
 * libnccl-net.so (the name aws-ofi-nccl installs). NCCL_NET=SRD makes a
 * failed load an error instead of a quiet fallback to NCCL's Socket. */
static void check_nccl(struct info_checks *o) {
  const char *name = getenv("NCCL_NET_PLUGIN"), *net = getenv("NCCL_NET");
  if (!name || !*name) {
    add(o, INFO_WARN, "NCCL_NET_PLUGIN", "unset: NCCL loads libnccl-net.so if the library path has one, not this "
        "plugin; set NCCL_NET_PLUGIN=srd");
  } else {
    char lib[4096], found[4096] = "";
    void *h = dlopen(name, RTLD_LAZY | RTLD_LOCAL);
    if (h) snprintf(found, sizeof(found), "%s", name);
    else {
      snprintf(lib, sizeof(lib), "libnccl-net-%s.so", name);
      if ((h = dlopen(lib, RTLD_LAZY | RTLD_LOCAL))) snprintf(found, sizeof(found), "%s", lib);
    }
    /* name is the first member of every ncclNet table. */
    const char *const *table = h ? dlsym(h, "ncclNetPlugin_v8") : NULL;
    if (!h)
      add(o, INFO_FAIL, "NCCL_NET_PLUGIN", "%s: neither %s nor libnccl-net-%s.so can be loaded from the library "
          "path (LD_LIBRARY_PATH, ld.so.conf.d): NCCL would run without it", name, name, name);
    else if (!table || !*table || strcmp(*table, "SRD"))
      add(o, INFO_WARN, "NCCL_NET_PLUGIN", "%s loads %s, which is not this plugin (net %s)", name, found,
          table && *table ? *table : "unknown");
    else
      add(o, INFO_OK, "NCCL_NET_PLUGIN", "%s loads %s (net SRD)", name, found);
    if (h) dlclose(h);
  }
  if (!net || strcmp(net, "SRD"))
    add(o, INFO_WARN, "NCCL_NET", "%s%s: set NCCL_NET=SRD so that NCCL fails when the plugin does not load instead "
        "of falling back to its Socket transport", net ? "NCCL_NET=" : "unset", net ? net : "");
  else
    add(o, INFO_OK, "NCCL_NET", "SRD");
}

void info_doctor(const struct info_report *r, int expect, struct info_checks *o) {
  memset(o, 0, sizeof(*o));
  check_variables(o);
  check_tuner_config(o);
  check_provider(r, o);
  check_eager(r, o);
  check_init(r, o);
  check_libfabric(r, expect, o);
  if (expect & INFO_EXPECT_EFA) check_efa(r, o);
  check_memlock(r, expect, o);
  check_huge_pages(r, expect, o);
  check_dev_shm(o);
  check_gdr(r, expect, o);
  check_nccl(o);
}
