/* Prints doc/variables.md from the parameter table itself (src/util/param.c):
 * names, defaults, accepted values and meanings come from srd_param_info,
 * srd_param_default_text and srd_param_check, so the page cannot drift from
 * what the plugin reads. tests/doc/variables.sh compares or rewrites it. */
#include <stdio.h>
#include <string.h>

#include "srd/param.h"

/* What a string variable accepts, from the words its check rejects a value
 * with ("is not auto, 0 or 1" -> "auto, 0 or 1"). */
static void accepted(enum srd_param p, char *buf, size_t len) {
  const struct srd_param_desc *d = srd_param_info(p);
  char why[256] = "";
  if (!d->is_string) {
    snprintf(buf, len, "%lld..%lld", (long long)d->min, (long long)d->max);
    return;
  }
  /* A value no check accepts: not a word, not a readable file. */
  if (!srd_param_check(p, "\x01/nonexistent", why, sizeof(why))) snprintf(buf, len, "any text");
  else if (!strncmp(why, "is not ", 7)) snprintf(buf, len, "%s", why + 7);
  else if (!strncmp(why, "is neither ", 11)) {
    const char *nor = strstr(why, " nor ");
    snprintf(buf, len, "%.*s or %s", nor ? (int)(nor - why - 11) : 0, why + 11, nor ? nor + 5 : why);
  } else if (!strncmp(why, "cannot be read", 14)) snprintf(buf, len, "a readable file");
  else snprintf(buf, len, "see meaning");
}

static void row(enum srd_param p) {
  const struct srd_param_desc *d = srd_param_info(p);
  char def[128], acc[256];
  srd_param_default_text(p, def, sizeof(def));
  accepted(p, acc, sizeof(acc));
  printf("| `%s` | %s | %s | ", d->name, def, acc);
  for (const char *c = d->doc; *c; c++) fputs(*c == '|' ? "\\|" : (char[]){*c, 0}, stdout);
  printf(" |\n");
}

static int is_test(enum srd_param p) { return strncmp(srd_param_info(p)->name, "NCCL_SRD_TEST_", 14) == 0; }

static void table(int tests) {
  printf("| variable | default | accepted | meaning |\n|---|---|---|---|\n");
  for (int p = 0; p < SRD_PARAM_COUNT; p++)
    if (is_test((enum srd_param)p) == tests) row((enum srd_param)p);
}

int main(void) {
  printf("# NCCL_SRD_* variables\n\n"
         "For users and operators who tune the plugin. Generated from the parameter table\n"
         "(`src/util/param.c`) by `tests/doc/variables.sh --write BUILDDIR`; `make check`\n"
         "fails when this page and the table differ. Do not edit it by hand.\n\n"
         "Each variable is read once, at init. A malformed or out-of-range value is\n"
         "reported (in the plugin's log and by `srd-info`, in the same words) and the\n"
         "default is used; `srd-info --check` fails on it. Numbers are decimal or 0x hex,\n"
         "with an optional `K`, `M` or `G` suffix (powers of 1024). The plugin never sets\n"
         "environment variables.\n\n");
  table(0);
  printf("\n## Test mode\n\n"
         "For the test suite (CONTRIBUTING.md); a job never sets these.\n\n");
  table(1);
  return 0;
}
