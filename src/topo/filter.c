/* libfabric's own provider filter, FI_PROVIDER: a provider it leaves out is
 * never offered, whatever NCCL_SRD_PROVIDER asks for. Container images often
 * set it; the plugin and srd-info name it as the cause. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srd/topo.h"

/* NAME of length n is one of the comma-separated entries of list. */
static int listed(const char *list, const char *name, size_t n) {
  for (const char *e = list; *e;) {
    size_t len = strcspn(e, ",");
    if (len == n && !strncmp(e, name, n)) return 1;
    e += len;
    if (*e) e++;
  }
  return 0;
}

/* As libfabric's post filter (src/fabric.c, ofi_apply_prov_post_filter): an
 * entry matches the provider's full name ("tcp;ofi_rxm") or its core ("tcp");
 * a leading '^' turns the list into exclusions. */
int srd_fabric_filtered(const char *provider, char *why, size_t len) {
  const char *filter = getenv("FI_PROVIDER");
  if (!filter || !*filter || !provider || !*provider) return 0;
  int negated = filter[0] == '^';
  const char *list = filter + negated;
  int match = listed(list, provider, strlen(provider)) || listed(list, provider, strcspn(provider, ";"));
  if (negated == !match) return 0;
  snprintf(why, len, "FI_PROVIDER=%s %s %s, so libfabric never offers it", filter,
           negated ? "excludes" : "does not name", provider);
  return 1;
}
