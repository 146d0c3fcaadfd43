/* LD_PRELOAD shim: libfabric's fi_version() reports the version named by
 * SRD_TEST_FI_VERSION ("2.4"), everything else is the real library. It lets
 * CI run a plugin built against 2.6 headers as on an older 2.x runtime (the
 * EFA installer 1.47 ships 2.4) without building libfabric a second time:
 * the plugin's API choice reads fi_version() alone. */
#include <rdma/fabric.h>
#include <stdio.h>
#include <stdlib.h>

__attribute__((visibility("default"))) uint32_t fi_version(void)
{
  unsigned major = 0, minor = 0;
  const char *v = getenv("SRD_TEST_FI_VERSION");
  if (!v || sscanf(v, "%u.%u", &major, &minor) != 2) {
    fprintf(stderr, "fi_version_as: SRD_TEST_FI_VERSION must be MAJOR.MINOR (got '%s')\n", v ? v : "");
    abort();
  }
  return FI_VERSION(major, minor);
}
