/* srd-info --check: the expectations a cluster must meet, each a line that
 * says ok, warn or FAIL and why. System files are read under
 * SRD_INFO_SYSROOT when set (tests seed misconfigurations there). */
#ifndef SRD_TOOLS_INFO_DOCTOR_H
#define SRD_TOOLS_INFO_DOCTOR_H

#include "info_probe.h"

enum { INFO_EXPECT_EFA = 1, INFO_EXPECT_GDR = 2 };
enum info_verdict { INFO_OK, INFO_WARN, INFO_FAIL };

#define INFO_MAX_CHECKS 48

struct info_check {
  enum info_verdict verdict;
  char name[16];
  char text[480];
};

struct info_checks {
  int n, failed;
  struct info_check c[INFO_MAX_CHECKS];
};

/* expect: INFO_EXPECT_* bits. */
void info_doctor(const struct info_report *r, int expect, struct info_checks *out);
const char *info_verdict_name(enum info_verdict v);
/* The GPU peer-memory kernel modules loaded (efa_nv_peermem, nvidia_peermem,
 * nv_peer_mem), comma-separated into loaded; 1 when any is. */
int info_peermem(char *loaded, size_t len);

#endif
