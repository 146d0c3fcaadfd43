#include "info_probe.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <stdlib.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_ext.h>

#include "config.h"
#include "info_doctor.h"
#include "srd/log.h"
#include "srd/param.h"

__attribute__((format(printf, 2, 3))) static void warn(struct info_report *r, const char *fmt, ...) {
  if (r->nwarnings == INFO_MAX_WARNINGS) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->warnings[r->nwarnings++], sizeof(r->warnings[0]), fmt, ap);
  va_end(ap);
}

static void add_provider(struct info_report *r, const char *name, int rdm) {
  for (int i = 0; i < r->nproviders; i++)
    if (!strcmp(r->providers[i].name, name)) {
      r->providers[i].rdm |= rdm;
      return;
    }
  if (r->nproviders == INFO_MAX_PROVIDERS) return;
  snprintf(r->providers[r->nproviders].name, sizeof(r->providers[0].name), "%s", name);
  r->providers[r->nproviders++].rdm = rdm;
}

/* Every provider libfabric offers, and which of them do reliable datagrams. */
static void list_providers(struct info_report *r) {
  struct fi_info *all = NULL;
  if (fi_getinfo(srd_fi_api_version(), NULL, NULL, 0, NULL, &all) == 0) {
    for (struct fi_info *i = all; i; i = i->next)
      add_provider(r, i->fabric_attr->prov_name, i->ep_attr && i->ep_attr->type == FI_EP_RDM);
    fi_freeinfo(all);
  }
}

/* What efa's endpoints promise, on every NIC: 0 if one refuses, -1 if one
 * cannot say, 1 if all do. */
static int worst(int all, int one) { return one == 0 || all == 0 ? 0 : one < 0 || all < 0 ? -1 : 1; }

static void probe_efa(struct info_report *r) {
  struct info_caps *c = &r->caps;
  c->write_order_128 = c->device_writes = 1;
  for (int i = 0; i < r->nics.n; i++) {
    int ordered, device_writes;
    srd_efa_probe(r->nics.nics[i].info, &ordered, &device_writes);
    c->write_order_128 = worst(c->write_order_128, ordered);
    c->device_writes = worst(c->device_writes, device_writes);
  }
}

static void probe_caps(struct info_report *r) {
  struct info_caps *c = &r->caps;
  c->dmabuf_built = HAVE_DECL_FI_MR_DMABUF;
  c->write_order_128_built = HAVE_DECL_FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES;
  c->rma = c->hmem = c->write_order_128 = c->device_writes = c->data_progress_auto = -1;
  c->ll = c->ll128 = -1;
  c->ll_why = "no provider";
  if (!r->discovered) return;
  const struct fi_info *info = r->nics.nics[0].info;
  c->rma = (info->caps & FI_RMA) && (info->caps & FI_WRITE) && (info->caps & FI_REMOTE_WRITE);
  c->cq_data_size = info->domain_attr->cq_data_size;
  c->max_msg_size = info->ep_attr->max_msg_size;
  c->inject_size = info->tx_attr->inject_size;
  c->mr_mode = (uint64_t)info->domain_attr->mr_mode;
  c->data_progress_auto = info->domain_attr->data_progress == FI_PROGRESS_AUTO;
  struct fi_info *hmem = srd_gdr_hmem_info(info);
  c->hmem = hmem != NULL;
  fi_freeinfo(hmem);
  if (!strncmp(r->nics.provider, "efa", 3)) probe_efa(r);
  struct srd_ll_rule rule;
  srd_ll_rule_for(r->nics.provider, c->write_order_128, c->device_writes, &rule);
  c->ll = rule.ll;
  c->ll128 = rule.ll128;
  c->ll_why = rule.why;
}

/* efa is on the machine but lacks what we need (RDMA write): we then fell
 * back to another provider, which is rarely what the user wants on AWS. */
static void check_efa_without_rdma(struct info_report *r) {
  struct fi_info *hints = fi_allocinfo(), *out = NULL;
  if (!hints) return;
  hints->ep_attr->type = FI_EP_RDM;
  hints->fabric_attr->prov_name = strdup("efa");
  if (fi_getinfo(srd_fi_api_version(), NULL, NULL, 0, hints, &out) == 0) {
    int rdma = (out->caps & FI_RMA) && (out->caps & FI_REMOTE_WRITE);
    if (!rdma)
      warn(r, "efa is present but offers no RDMA write (older instance type or EFA driver without RDMA); "
              "the data path needs it");
    else if (r->discovered && strcmp(r->nics.provider, "efa"))
      warn(r, "efa offers RDMA write but provider %s was chosen (%s)", r->nics.provider, r->nics.reason);
    fi_freeinfo(out);
  }
  fi_freeinfo(hints);
}

/* A GPU without a NIC behind its PCIe switch sends every byte across the
 * host bridge (and perhaps the CPU interconnect): the grouping still gives it
 * rails, so only a warning says so. */
static void check_gpu_locality(struct info_report *r) {
  for (int gpu = 0; gpu < r->topo.ngpus; gpu++) {
    /* Without a PCI NIC the grouping gives one device of every rail and no GPU. */
    int locality = SRD_LOCALITY_NO_GPU;
    for (int g = 0; g < r->topo.ngroups; g++)
      if (r->topo.groups[g].gpu == gpu) locality = r->topo.groups[g].locality;
    if (locality == SRD_LOCALITY_SWITCH) continue;
    warn(r, "GPU %d has no NIC behind its PCIe switch: its traffic crosses the host bridge (%s)", gpu,
         locality == SRD_LOCALITY_NO_GPU ? "no NIC of ours is a PCI device in the topology"
                                         : srd_locality_name(locality));
  }
}

/* The one minimum (configure's, from m4/srd_libfabric.m4): a binary can
 * still meet an older library at run time. */
int info_fi_too_old(const struct info_report *r) {
  unsigned major = FI_MAJOR(r->fi_runtime), minor = FI_MINOR(r->fi_runtime);
  return major < SRD_FI_MIN_MAJOR || (major == SRD_FI_MIN_MAJOR && minor < SRD_FI_MIN_MINOR);
}

static void check_warnings(struct info_report *r) {
  unsigned major = FI_MAJOR(r->fi_runtime), minor = FI_MINOR(r->fi_runtime);
  if (info_fi_too_old(r))
    warn(r, "libfabric %u.%u is older than %d.%d, the oldest nccl-srd supports (the oldest release CI tests)", major,
         minor, SRD_FI_MIN_MAJOR, SRD_FI_MIN_MINOR);
  check_efa_without_rdma(r);
  char why[400];
  if (r->discovered && !strcmp(r->nics.provider, "efa") &&
      srd_efa_version_check(r->fi_runtime, r->fi_api, why, sizeof(why)) == 0)
    warn(r, "efa: %s", why);
  if (!r->discovered) {
    warn(r, "no usable NIC: no provider offers RDM endpoints with messages, RMA and remote CQ data on a selected "
            "interface (check FI_PROVIDER, NCCL_SRD_PROVIDER, NCCL_SRD_IFNAME)");
    return;
  }
  int ngpus = r->grouped ? r->topo.ngpus : 0;
  if (ngpus > 0 && r->nics.n < ngpus)
    warn(r, "%d NIC(s) for %d GPUs: GPUs share NICs, so per-GPU bandwidth is lower", r->nics.n, ngpus);
  if (ngpus > 0) {
    check_gpu_locality(r);
    for (int g = 0; g < r->topo.ngroups; g++)
      if (!r->gdr[g].gpu)
        warn(r, "GPUs are present but GPU memory cannot be registered on device %d (%s): NCCL will stage through "
                "host memory", g, r->gdr[g].why);
  }
}

/* The plugin's own warnings, in its words: srd-info runs the plugin's code
 * (variables, provider, topology, GPU memory) and shows what it would log. */
static struct info_report *capturing;

static void capture(ncclDebugLogLevel level, unsigned long flags, const char *file, int line, const char *fmt, ...) {
  (void)flags, (void)file, (void)line;
  if (level != NCCL_LOG_WARN || !capturing) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  const char *prefix = "NET/SRD ";
  warn(capturing, "%s", strncmp(msg, prefix, strlen(prefix)) ? msg : msg + strlen(prefix));
}

void info_gather(struct info_report *r) {
  memset(r, 0, sizeof(*r));
  capturing = r;
  srd_log_set_logger(capture);
  srd_param_reload();
  r->fi_runtime = fi_version();
  r->fi_built = SRD_FI_BUILT_VERSION;
  r->fi_api = srd_fi_api_version();
  list_providers(r);
  r->discovered = srd_topo_discover(&r->nics) == 0;
  if (r->discovered) {
    srd_transport_name(r->nics.nics[0].info, r->transport, sizeof(r->transport));
    srd_topo_group_or_all(&r->nics, (int)srd_param_int(SRD_PARAM_RAILS), &r->topo);
    r->grouped = 1;
  }
  char loaded[96];
  r->gpu_peer_mem = info_peermem(loaded, sizeof(loaded));
  for (int g = 0; r->grouped && g < r->topo.ngroups; g++)
    r->init_fails |= srd_gdr_device(&r->nics, &r->topo.groups[g], g, &r->gdr[g]) != 0;
  probe_caps(r);
  check_warnings(r);
  srd_log_set_logger(NULL);
  capturing = NULL;
}

void info_release(struct info_report *r) {
  if (r->discovered) srd_topo_free(&r->nics);
  r->discovered = 0;
}

int info_usable(const struct info_report *r) { return r->discovered && r->nics.n > 0 && !r->init_fails; }
