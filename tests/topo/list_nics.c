/* Prints the rails srd_topo_discover finds and how srd_topo_group groups
 * them: one "nic" line per rail, one "group" line per device. Exits 1 when
 * discovery fails. */
#include <stdio.h>

#include "srd/param.h"
#include "srd/topo.h"

int main(void) {
  struct srd_nic_list nics;
  if (srd_topo_discover(&nics)) return 1;
  printf("provider %s (%s)\n", nics.provider, nics.reason);
  for (int i = 0; i < nics.n; i++) {
    const struct srd_nic *n = &nics.nics[i];
    printf("nic %d %s pci=%s numa=%d speed=%d\n", i, n->name, n->pci_bus_id[0] ? n->pci_bus_id : "-", n->numa,
           n->speed_mbps);
  }
  struct srd_topo topo;
  int rc = srd_topo_group(&nics, NULL, (int)srd_param_int(SRD_PARAM_RAILS), &topo);
  for (int g = 0; rc == 0 && g < topo.ngroups; g++) {
    const struct srd_device_group *grp = &topo.groups[g];
    printf("group %d gpu=%d rails=", g, grp->gpu);
    for (int r = 0; r < grp->nnics; r++) printf("%s%s", r ? "," : "", nics.nics[grp->nics[r]].name);
    printf(" speed=%d numa=%d pci_path=%s\n", grp->speed_mbps, grp->numa, grp->pci_path[0] ? grp->pci_path : "-");
  }
  srd_topo_free(&nics);
  return rc ? 1 : 0;
}
