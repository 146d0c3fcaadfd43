#include <ctype.h>
#include <stdbool.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>

#include "srd/log.h"
#include "srd/param.h"
#include "srd/topo.h"

static void read_sysfs_line(const char *path, char *buf, size_t len) {
  buf[0] = 0;
  FILE *f = fopen(path, "r");
  if (!f) return;
  if (!fgets(buf, (int)len, f)) buf[0] = 0;
  fclose(f);
  buf[strcspn(buf, "\n")] = 0;
}

static int is_pci_address(const char *s, size_t len) {
  unsigned dom, bus, dev, fn;
  char tail;
  char buf[32];
  if (len >= sizeof(buf)) return 0;
  memcpy(buf, s, len);
  buf[len] = 0;
  return sscanf(buf, "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &tail) == 4;
}

/* Cut a sysfs device path after its last PCI address component: a virtio
 * NIC's path ends in ".../0000:00:03.0/virtio2", and the PCI device is what
 * hwloc and NCCL place. Returns 0 when no component is a PCI address. */
static int pci_device_of(char *path) {
  char *end = path + strlen(path);
  while (end > path) {
    char *start = end;
    while (start > path && start[-1] != '/') start--;
    if (is_pci_address(start, (size_t)(end - start))) {
      *end = 0;
      return 1;
    }
    end = start > path ? start - 1 : path;
  }
  return 0;
}

/* Fill PCI placement and speed from libfabric's NIC attributes, falling back
 * to sysfs for kernel interfaces (tcp) that libfabric does not describe. */
static void describe_nic(struct srd_nic *nic, const struct fi_info *info) {
  char path[PATH_MAX], line[64];
  nic->numa = -1;
  const struct fid_nic *fnic = info->nic;
  if (fnic && fnic->bus_attr && fnic->bus_attr->bus_type == FI_BUS_PCI) {
    const struct fi_pci_attr *p = &fnic->bus_attr->attr.pci;
    snprintf(nic->pci_bus_id, sizeof(nic->pci_bus_id), "%04x:%02x:%02x.%x", p->domain_id, p->bus_id, p->device_id,
             p->function_id);
    snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s", nic->pci_bus_id);
  } else {
    snprintf(path, sizeof(path), "/sys/class/net/%s/device", nic->name);
  }
  char real[PATH_MAX];
  if (realpath(path, real) && strstr(real, "/pci") && pci_device_of(real)) {
    snprintf(nic->pci_path, sizeof(nic->pci_path), "%s", real);
    if (!nic->pci_bus_id[0]) {
      const char *base = strrchr(real, '/');
      snprintf(nic->pci_bus_id, sizeof(nic->pci_bus_id), "%s", base + 1);
    }
    snprintf(path, sizeof(path), "%s/numa_node", real);
    read_sysfs_line(path, line, sizeof(line));
    if (line[0]) nic->numa = atoi(line);
  }
  if (fnic && fnic->link_attr && fnic->link_attr->speed) nic->speed_mbps = (int)(fnic->link_attr->speed / 1000000);
  if (nic->speed_mbps <= 0) {
    snprintf(path, sizeof(path), "/sys/class/net/%s/speed", nic->name);
    read_sysfs_line(path, line, sizeof(line));
    nic->speed_mbps = atoi(line);
  }
  if (nic->speed_mbps <= 0) nic->speed_mbps = SRD_DEFAULT_SPEED_MBPS;
  if (fnic && fnic->device_attr && fnic->device_attr->device_id)
    nic->guid = strtoull(fnic->device_attr->device_id, NULL, 0);
}

/* tcp lists a domain once per address family; IPv4 sorts first, so keep the
 * first entry of each domain. */
static int seen_domain(const struct srd_nic_list *l, const char *name) {
  for (int i = 0; i < l->n; i++)
    if (!strcmp(l->nics[i].name, name)) return 1;
  return 0;
}

static int is_loopback(const char *name) { return !strcmp(name, "lo"); }

static int collect(struct srd_nic_list *out, struct fi_info *infos, int skip_loopback) {
  const char *ifspec = srd_param_str(SRD_PARAM_IFNAME);
  for (struct fi_info *i = infos; i; i = i->next) {
    const char *name = i->domain_attr->name;
    if (!name || seen_domain(out, name)) continue;
    if (skip_loopback && is_loopback(name)) continue;
    if (!srd_ifname_match(ifspec, name)) continue;
    if (out->n == SRD_MAX_NICS) {
      SRD_WARN("more than %d NICs; using the first %d", SRD_MAX_NICS, SRD_MAX_NICS);
      break;
    }
    struct srd_nic *nic = &out->nics[out->n];
    memset(nic, 0, sizeof(*nic));
    nic->info = fi_dupinfo(i);
    if (!nic->info) return -1;
    snprintf(nic->name, sizeof(nic->name), "%s", name);
    describe_nic(nic, i);
    out->n++;
  }
  return 0;
}

/* Natural order (va2 before va10), so rail numbers follow interface and
 * device numbers whatever order the provider lists them in. */
static int cmp_nic_name(const void *pa, const void *pb) {
  const char *a = ((const struct srd_nic *)pa)->name, *b = ((const struct srd_nic *)pb)->name;
  while (*a && *b) {
    if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
      char *ea, *eb;
      unsigned long long na = strtoull(a, &ea, 10), nb = strtoull(b, &eb, 10);
      if (na != nb) return na < nb ? -1 : 1;
      a = ea, b = eb;
    } else {
      if (*a != *b) return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
      a++, b++;
    }
  }
  return (unsigned char)*a - (unsigned char)*b;
}

static int only_loopback(struct fi_info *infos) {
  for (struct fi_info *i = infos; i; i = i->next)
    if (i->domain_attr->name && !is_loopback(i->domain_attr->name)) return 0;
  return 1;
}

int srd_topo_discover(struct srd_nic_list *out) {
  memset(out, 0, sizeof(*out));
  struct fi_info *infos = NULL;
  if (srd_fabric_choose(&infos, out->provider, sizeof(out->provider), out->reason, sizeof(out->reason))) return -1;
  out->nics = calloc(SRD_MAX_NICS, sizeof(*out->nics));
  int rc = out->nics ? collect(out, infos, !only_loopback(infos)) : -1;
  fi_freeinfo(infos);
  if (rc) {
    srd_topo_free(out);
    SRD_WARN("out of memory listing NICs");
    return -1;
  }
  qsort(out->nics, out->n, sizeof(*out->nics), cmp_nic_name);
  if (out->n == 0) {
    const char *spec = srd_param_str(SRD_PARAM_IFNAME);
    SRD_WARN("provider %s offers no NIC that NCCL_SRD_IFNAME=%s selects", out->provider, spec ? spec : "");
    srd_topo_free(out);
    return -1;
  }
  return 0;
}

void srd_topo_free(struct srd_nic_list *list) {
  if (list->nics)
    for (int i = 0; i < list->n; i++)
      if (list->nics[i].info) fi_freeinfo(list->nics[i].info); /* NULL in lists that tests build */
  free(list->nics);
  list->nics = NULL;
  list->n = 0;
}

/* The first line of /sys/class/net/<name>/<attr>; false when unreadable. */
static bool read_net_attr(const char *name, const char *attr, char *out, int len) {
  char path[128];
  snprintf(path, sizeof(path), "/sys/class/net/%s/%s", name, attr);
  out[0] = 0;
  FILE *f = fopen(path, "r");
  if (!f) return false;
  if (!fgets(out, len, f)) out[0] = 0;
  fclose(f);
  return true;
}

int srd_nic_link_down(const char *ifname) {
  char state[32], carrier[8];
  if (!read_net_attr(ifname, "operstate", state, sizeof(state))) return -1;
  /* "unknown" is what loopback and some virtual links report while working. */
  if (strncmp(state, "up", 2) && strncmp(state, "unknown", 7) && state[0]) return 1;
  /* The kernel updates operstate up to a second after the carrier changes
   * (linkwatch); carrier itself is current (unreadable while admin-down). */
  read_net_attr(ifname, "carrier", carrier, sizeof(carrier));
  return carrier[0] == '0';
}
