#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include "config.h"
#include "srd/log.h"
#include "srd/param.h"
#include "srd/topo.h"

#define REQUIRED_CAPS (FI_MSG | FI_RMA | FI_WRITE | FI_REMOTE_WRITE | FI_READ | FI_REMOTE_READ)

static struct fi_info *base_hints(const char *prov) {
  struct fi_info *h = fi_allocinfo();
  if (!h) return NULL;
  h->ep_attr->type = FI_EP_RDM;
  h->caps = REQUIRED_CAPS;
  /* Every operation context starts with room for the provider's context. */
  h->mode = FI_CONTEXT | FI_CONTEXT2;
  /* FI_RX_CQ_DATA stays out of mode: with it efa-direct would consume a
   * posted receive for every write with data (efa_user_info_alter_direct),
   * and our writes land without one. */
  h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  h->domain_attr->threading = FI_THREAD_DOMAIN;
  h->domain_attr->control_progress = FI_PROGRESS_UNSPEC;
  h->domain_attr->data_progress = FI_PROGRESS_UNSPEC;
  /* No ordering asked for (FI_ORDER_NONE, deprecated in libfabric 2.x, is 0). */
  h->tx_attr->msg_order = 0;
  h->rx_attr->msg_order = 0;
  if (prov) h->fabric_attr->prov_name = strdup(prov);
  return h;
}

static const struct {
  uint64_t cap;
  const char *name;
} cap_names[] = {
    {FI_MSG, "FI_MSG"}, {FI_RMA, "FI_RMA"}, {FI_WRITE, "FI_WRITE"}, {FI_REMOTE_WRITE, "FI_REMOTE_WRITE"},
    {FI_READ, "FI_READ"}, {FI_REMOTE_READ, "FI_REMOTE_READ"},
};

/* Say precisely what the provider lacks, so a misconfigured cluster is
 * diagnosed by its first log line. */
static void explain_rejection(const char *prov) {
  struct fi_info *h = fi_allocinfo(), *infos = NULL;
  if (!h) return;
  h->ep_attr->type = FI_EP_RDM;
  if (prov) h->fabric_attr->prov_name = strdup(prov);
  int rc = fi_getinfo(srd_fi_api_version(), NULL, NULL, 0, h, &infos);
  if (rc) {
    SRD_INFO(NCCL_INIT | NCCL_NET, "provider %s: no FI_EP_RDM endpoint through libfabric %u.%u's API %u.%u (%s)",
             prov ? prov : "(any)", FI_MAJOR(fi_version()), FI_MINOR(fi_version()),
             FI_MAJOR(srd_fi_api_version()), FI_MINOR(srd_fi_api_version()), fi_strerror(-rc));
  } else {
    char missing[128] = "";
    for (size_t i = 0; i < sizeof(cap_names) / sizeof(cap_names[0]); i++)
      if (!(infos->caps & cap_names[i].cap))
        snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing), " %s", cap_names[i].name);
    if (infos->domain_attr->cq_data_size < 4)
      snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing), " remote CQ data (4 bytes)");
    SRD_WARN("provider %s lacks capabilities the data path needs:%s", infos->fabric_attr->prov_name,
             missing[0] ? missing : " (none missing alone; the combination or mode is refused)");
    fi_freeinfo(infos);
  }
  fi_freeinfo(h);
}

const char *srd_efa_fabric(void) {
  /* srd_param_check let only efa or efa-direct through. */
  const char *v = srd_param_str(SRD_PARAM_EFA_FABRIC);
  if (!v || strcmp(v, "efa-direct")) return SRD_EFA_FABRIC_DEFAULT;
  /* efa-direct's sends are one MTU while its fi_info, with FI_RMA, reports
   * the RMA limit (efa_prov_info_set_ep_attr): only the endpoint tells. */
  if (!HAVE_DECL_FI_OPT_MAX_MSG_SIZE) {
    SRD_WARN("NCCL_SRD_EFA_FABRIC=efa-direct needs FI_OPT_MAX_MSG_SIZE to size its sends, which the libfabric "
             "headers of this build lack; using %s", SRD_EFA_FABRIC_DEFAULT);
    return SRD_EFA_FABRIC_DEFAULT;
  }
  return "efa-direct";
}

int srd_fabric_fits(const struct fi_info *info, const char *efa_fabric) {
  if (strcmp(info->fabric_attr->prov_name, "efa")) return 1;
  return info->fabric_attr->name && !strcmp(info->fabric_attr->name, efa_fabric);
}

void srd_fabric_keep(struct fi_info **infos, const char *efa_fabric) {
  for (struct fi_info **p = infos; *p;) {
    struct fi_info *i = *p;
    if (srd_fabric_fits(i, efa_fabric)) {
      p = &i->next;
      continue;
    }
    *p = i->next;
    i->next = NULL;
    fi_freeinfo(i);
  }
}

void srd_transport_name(const struct fi_info *info, char *out, size_t len) {
  const char *prov = info->fabric_attr->prov_name;
  /* efa's fabrics do not talk to each other; tcp's fabric names are subnets,
   * which may differ between nodes that talk. */
  snprintf(out, len, "%s", !strcmp(prov, "efa") && info->fabric_attr->name ? info->fabric_attr->name : prov);
}

/* Parsed as libfabric parses a size parameter (strtol, base 0: var.c); rxm
 * takes a value it cannot use as its smallest buffer (rxm_init_infos). */
size_t srd_rxm_buffer_size(void) {
  const char *v = getenv("FI_OFI_RXM_BUFFER_SIZE");
  if (!v) return 16 * 1024;
  long n = strtol(v, NULL, 0);
  return n > 0 ? (size_t)n : 0;
}

/* On libfabric 2.x's native tcp a send of any size goes straight into the
 * posted buffer, and mid-size messages (NCCL's 16-64 KiB Simple steps at 2-4
 * ranks) are faster eagerly than behind a clear-to-send. ofi_rxm (1.17's tcp)
 * sends a message above its eager buffers by a rendezvous of its own, slower
 * still (BENCHMARKS.md, "Eager size"): there eager messages are the largest
 * power of two (NCCL's step sizes) that fits those buffers with our header,
 * 8 KiB at rxm's default. efa and shm keep 8 KiB. */
size_t srd_eager_default(const struct fi_info *info) {
  const char *prov = info->fabric_attr->prov_name;
  if (!strcmp(prov, "tcp")) return SRD_EAGER_MID;
  if (!strstr(prov, "ofi_rxm")) return 8 * 1024;
  size_t fit = srd_rxm_buffer_size(), eager = SRD_EAGER_MID;
  while (eager && eager + SRD_EAGER_HEADER > fit) eager /= 2;
  return eager;
}

int srd_rxm_buffer_short(const struct fi_info *info) {
  return strstr(info->fabric_attr->prov_name, "ofi_rxm") && srd_eager_default(info) < SRD_EAGER_MID;
}

/* efa at a libfabric version it is refused on is not usable; one it is warned
 * on is, with the warning. */
static int efa_version_usable(void) {
  char why[400];
  int v = srd_efa_version_check(fi_version(), srd_fi_api_version(), why, sizeof(why));
  if (v < 0) SRD_WARN("provider efa is not used: %s", why);
  else if (v == 0) SRD_WARN("provider efa: %s", why);
  return v >= 0;
}

static int try_provider(const char *prov, struct fi_info **infos) {
  if (!srd_fi_api_version()) return -1;
  struct fi_info *h = base_hints(prov);
  if (!h) return -1;
  /* With FI_SOURCE every completion names its sender, and the comm layer
   * drops what does not come from the comm's peer; a provider without it is
   * taken as it is (then only the token binds a message to its comm, and
   * only holders of a key can produce write completions). */
  h->caps |= FI_SOURCE;
  int rc = fi_getinfo(srd_fi_api_version(), NULL, NULL, 0, h, infos);
  if (rc) {
    h->caps &= ~(uint64_t)FI_SOURCE;
    rc = fi_getinfo(srd_fi_api_version(), NULL, NULL, 0, h, infos);
  }
  fi_freeinfo(h);
  if (rc) return -1;
  if (!strcmp(prov, "efa")) {
    /* efa lists efa-direct first (efa_util_prov_initialize), and NIC
     * discovery keeps a domain's first entry: keep only the chosen fabric. */
    const char *fabric = srd_efa_fabric();
    srd_fabric_keep(infos, fabric);
    if (!*infos) {
      SRD_WARN("provider efa offers no \"%s\" fabric for our endpoints (NCCL_SRD_EFA_FABRIC)%s", fabric,
               strcmp(fabric, "efa-direct") ? ""
               : ": efa-direct needs libfabric 2.1 or later and a device with RDMA read, write and unsolicited "
                 "write receive");
      return -1;
    }
    if (!efa_version_usable()) {
      fi_freeinfo(*infos);
      *infos = NULL;
      return -1;
    }
  }
  /* Immediate data carries the completion protocol: 4 bytes are required. */
  if ((*infos)->domain_attr->cq_data_size < 4) {
    SRD_WARN("provider %s carries only %zu bytes of remote CQ data; 4 are required", (*infos)->fabric_attr->prov_name,
             (*infos)->domain_attr->cq_data_size);
    fi_freeinfo(*infos);
    *infos = NULL;
    return -1;
  }
  return 0;
}

int srd_fabric_choose(struct fi_info **infos, char *provider, size_t provider_len, char *reason, size_t reason_len) {
  if (!srd_fi_api_version()) {
    SRD_WARN("libfabric %u.%u at run time is older than %d.%d, the oldest nccl-srd supports",
             FI_MAJOR(fi_version()), FI_MINOR(fi_version()), SRD_FI_MIN_MAJOR, SRD_FI_MIN_MINOR);
    return -1;
  }
  const char *forced = srd_param_str(SRD_PARAM_PROVIDER);
  const char *why = "NCCL_SRD_PROVIDER";
  if (!forced) forced = getenv("FI_PROVIDER"), why = "FI_PROVIDER";
  if (forced && !*forced) forced = NULL;
  if (forced) {
    if (try_provider(forced, infos)) {
      char filtered[256];
      if (srd_fabric_filtered(forced, filtered, sizeof(filtered))) {
        SRD_WARN("provider \"%s\" (from %s) is not usable: %s", forced, why, filtered);
        return -1;
      }
      SRD_WARN("provider \"%s\" (from %s) is not usable", forced, why);
      explain_rejection(forced);
      return -1;
    }
    if (!strcmp(forced, "efa"))
      snprintf(reason, reason_len, "requested by %s=%s; fabric %s (NCCL_SRD_EFA_FABRIC)", why, forced,
               (*infos)->fabric_attr->name);
    else
      snprintf(reason, reason_len, "requested by %s=%s", why, forced);
  } else {
    /* libfabric 2.x's tcp provider is RDM itself; its ofi_rxm crashes in its
     * own error path (rxm_handle_comp_error) when a peer dies, so on 2.x the
     * native provider comes first. 1.x has no RDM tcp: "tcp" is rxm there. */
    const bool v2 = FI_MAJOR(fi_version()) >= 2;
    static const char *const order_v1[] = {"efa", "tcp;ofi_rxm", "shm"};
    static const char *const order_v2[] = {"efa", "tcp", "tcp;ofi_rxm", "shm"};
    const char *const *order = v2 ? order_v2 : order_v1;
    const size_t n = v2 ? sizeof(order_v2) / sizeof(order_v2[0]) : sizeof(order_v1) / sizeof(order_v1[0]);
    const char *tried = v2 ? "efa, tcp, tcp;ofi_rxm, shm" : "efa, tcp;ofi_rxm, shm";
    size_t i;
    for (i = 0; i < n; i++)
      if (!try_provider(order[i], infos)) break;
    if (i == n) {
      SRD_WARN("no libfabric provider offers RDM endpoints with messages, RMA and remote CQ data (tried %s)", tried);
      explain_rejection(NULL);
      return -1;
    }
    if (i == 0)
      snprintf(reason, reason_len, "efa is preferred when present; fabric %s (NCCL_SRD_EFA_FABRIC)",
               (*infos)->fabric_attr->name);
    else if (v2 && !strcmp(order[i], "tcp"))
      snprintf(reason, reason_len,
               "first usable of %s; libfabric %u.%u: native tcp before tcp;ofi_rxm, whose error path crashes", tried,
               FI_MAJOR(fi_version()), FI_MINOR(fi_version()));
    else
      snprintf(reason, reason_len, "first usable of %s", tried);
  }
  snprintf(provider, provider_len, "%s", (*infos)->fabric_attr->prov_name);
  if (!strcmp(provider, "efa")) srd_efa_check_process();
  return 0;
}
