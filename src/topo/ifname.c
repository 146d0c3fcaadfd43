#include <stdbool.h>
#include <string.h>

#include "srd/topo.h"

static bool item_matches(const char *item, size_t len, const char *name, bool exact) {
  if (exact) return strlen(name) == len && !strncmp(item, name, len);
  return !strncmp(item, name, len);
}

int srd_ifname_match(const char *spec, const char *name) {
  if (!spec || !*spec) return 1;
  bool exclude = false, exact = false;
  if (*spec == '^') exclude = true, spec++;
  if (*spec == '=') exact = true, spec++;
  bool found = false;
  while (*spec && !found) {
    size_t len = strcspn(spec, ",");
    if (len && item_matches(spec, len, name, exact)) found = true;
    spec += len;
    if (*spec == ',') spec++;
  }
  return exclude ? !found : found;
}
