/* srd-info: what our plugin would run on here, and what will go wrong. */
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "info_doctor.h"
#include "info_probe.h"
#include "json_writer.h"
#include "srd/cuda.h"
#include "srd/gdr.h"
#include "srd/param.h"

static const char usage[] =
    "Usage: srd-info [--json] [--check] [--expect efa|gdr]... [-h|--help]\n"
    "Show the libfabric in use, the provider and NICs the SRD plugin chooses and why, how the NICs group\n"
    "around GPUs into NCCL devices, the provider's capabilities, the NCCL_SRD_* settings in force, and\n"
    "warnings about what would break or slow a job. Exits 1 when the plugin would not start here.\n"
    "  --check        check this machine instead: one line per check (ok, warn, FAIL and why); exits 1\n"
    "                 when any check fails\n"
    "  --expect efa   (implies --check) fail unless efa is chosen, with what efa needs (memlock, huge\n"
    "                 pages, /dev/infiniband)\n"
    "  --expect gdr   (implies --check) fail unless every device offers GPU memory, with why not\n";

static const char *yes_no(int v) { return v < 0 ? "unknown" : v ? "yes" : "no"; }
static const char *protocol_text(int ok) { return ok < 0 ? "unknown" : ok ? "allowed" : "unsafe: the tuner never picks it"; }

/* A rail whose link is down takes no stripes (rail failover); "n/a" for NICs
 * that are no kernel interface. */
static const char *link_text(const char *name) {
  int down = srd_nic_link_down(name);
  return down < 0 ? "n/a" : down ? "down" : "up";
}

static void mr_mode_text(uint64_t mode, char *buf, size_t len) {
  static const struct {
    uint64_t bit;
    const char *name;
  } names[] = {{FI_MR_LOCAL, "local"},         {FI_MR_VIRT_ADDR, "virt_addr"}, {FI_MR_ALLOCATED, "allocated"},
               {FI_MR_PROV_KEY, "prov_key"},   {FI_MR_RAW, "raw"},             {FI_MR_HMEM, "hmem"},
               {FI_MR_ENDPOINT, "endpoint"}};
  buf[0] = 0;
  size_t n = 0;
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && n < len; i++)
    if (mode & names[i].bit) n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? "," : "", names[i].name);
  if (!buf[0]) snprintf(buf, len, "none");
}

/* *state: 0 unset, 1 set and in force, -1 set but rejected (the default is
 * in force; the plugin warns with the same words, srd_param_check). */
static void param_value(enum srd_param p, char *buf, size_t len, int *state, char *why, size_t why_len) {
  const struct srd_param_desc *d = srd_param_info(p);
  const char *env = getenv(d->name);
  *state = !env || !*env ? 0 : srd_param_check(p, env, why, why_len) ? -1 : 1;
  if (d->is_string) snprintf(buf, len, "%s", srd_param_str(p) ? srd_param_str(p) : "");
  else snprintf(buf, len, "%lld", (long long)srd_param_int(p));
}

static const char *param_state_text(const struct srd_param_desc *d, int state, const char *why, char *buf,
                                    size_t len) {
  if (state == 0) return "(default)";
  if (state == 1) return "(set)";
  snprintf(buf, len, "(invalid %s=%s: %s; default in force)", d->name, getenv(d->name), why);
  return buf;
}

/* JSON numbers are doubles to most readers: above 2^53 write the exact
 * decimal as a string instead (max_msg_size is often SIZE_MAX). */
static void json_size(struct json_writer *w, const char *key, uint64_t v) {
  if (v <= (UINT64_C(1) << 53)) {
    json_uint(w, key, v);
    return;
  }
  char text[32];
  snprintf(text, sizeof(text), "%llu", (unsigned long long)v);
  json_string(w, key, text);
}

/* The GPU memory decision of one device and why. */
static void print_gdr(const struct srd_gdr_decision *d) {
  printf("         GPU memory: %s: %s\n", d->gpu ? "offered" : "not offered", d->why);
  if (!d->gpu) return;
  printf("         dma-buf: %s: %s\n", d->dmabuf ? "offered" : "not offered", d->dmabuf_why);
  printf("         flush: %s: %s\n", d->flush ? "needed" : "not needed", d->flush_why);
}

static void json_gdr(struct json_writer *w, const struct srd_gdr_decision *d) {
  json_begin_object(w, "gpu_memory");
  json_bool(w, "offered", d->gpu);
  json_string(w, "reason", d->why);
  json_bool(w, "dmabuf", d->dmabuf);
  json_string(w, "dmabuf_reason", d->dmabuf_why);
  json_bool(w, "flush", d->flush);
  json_string(w, "flush_reason", d->flush_why);
  json_end_object(w);
}

static void print_text(const struct info_report *r) {
  printf("srd-info %s\n\n", PACKAGE_VERSION);
  printf("libfabric        %u.%u (built against %u.%u, API %u.%u asked for, oldest supported %d.%d)\n",
         FI_MAJOR(r->fi_runtime), FI_MINOR(r->fi_runtime), FI_MAJOR(r->fi_built), FI_MINOR(r->fi_built),
         FI_MAJOR(r->fi_api), FI_MINOR(r->fi_api), SRD_FI_MIN_MAJOR, SRD_FI_MIN_MINOR);
  printf("providers       ");
  for (int i = 0; i < r->nproviders; i++) printf(" %s%s", r->providers[i].name, r->providers[i].rdm ? "" : "(no RDM)");
  printf("\n");
  if (r->discovered) printf("chosen provider  %s: %s\n", r->nics.provider, r->nics.reason);
  else printf("chosen provider  none\n");
  if (r->discovered) printf("transport        %s (peers must use the same)\n", r->transport);

  if (r->discovered) {
    printf("\nNICs (%d)\n", r->nics.n);
    for (int i = 0; i < r->nics.n; i++) {
      const struct srd_nic *n = &r->nics.nics[i];
      printf("  %-2d %-16s pci %-14s numa %-3d %6d Mbps  link %-4s %s\n", i, n->name,
             n->pci_bus_id[0] ? n->pci_bus_id : "none", n->numa, n->speed_mbps, link_text(n->name),
             n->pci_path[0] ? n->pci_path : "");
    }
  }
  if (r->grouped) {
    printf("\nNCCL devices (%d GPU%s found)\n", r->topo.ngpus, r->topo.ngpus == 1 ? "" : "s");
    for (int g = 0; g < r->topo.ngroups; g++) {
      const struct srd_device_group *grp = &r->topo.groups[g];
      char gpu[64];
      if (grp->gpu < 0) snprintf(gpu, sizeof(gpu), "none");
      else snprintf(gpu, sizeof(gpu), "%d (rails: %s)", grp->gpu, srd_locality_name(grp->locality));
      printf("  dev %d  nearest GPU %s, numa %d, %d Mbps, %d rail%s, pci %s\n", g, gpu, grp->numa, grp->speed_mbps,
             grp->nnics, grp->nnics == 1 ? "" : "s", grp->pci_path[0] ? grp->pci_path : "none");
      for (int k = 0; k < grp->nnics; k++) {
        const struct srd_nic *n = &r->nics.nics[grp->nics[k]];
        printf("         rail %d: %-16s pci %-14s numa %-3d %6d Mbps\n", k, n->name,
               n->pci_bus_id[0] ? n->pci_bus_id : "none", n->numa, n->speed_mbps);
      }
      print_gdr(&r->gdr[g]);
    }
  }

  const struct info_caps *c = &r->caps;
  char mr[128];
  mr_mode_text(c->mr_mode, mr, sizeof(mr));
  printf("\ncapabilities\n");
  printf("  RMA write with remote CQ data  %s (%zu bytes of CQ data)\n", yes_no(c->rma), c->cq_data_size);
  printf("  FI_HMEM (GPU memory)           %s\n", yes_no(c->hmem));
  printf("  dmabuf registration built      %s\n", yes_no(c->dmabuf_built));
  printf("  nvidia-peermem loaded          %s\n", yes_no(r->gpu_peer_mem));
  printf("  128-byte write ordering        %s%s\n", yes_no(c->write_order_128),
         c->write_order_128_built ? "" : " (option not in these libfabric headers)");
  printf("  device writes (not emulated)   %s\n", yes_no(c->device_writes));
  printf("  NCCL LL across nodes           %s\n", protocol_text(c->ll));
  printf("  NCCL LL128 across nodes        %s\n", protocol_text(c->ll128));
  printf("    why                          %s\n", c->ll_why);
  printf("  max message size               %zu\n", c->max_msg_size);
  printf("  inject size                    %zu\n", c->inject_size);
  printf("  memory registration mode       %s\n", mr);
  printf("  data progress                  %s\n",
         c->data_progress_auto < 0 ? "unknown" : c->data_progress_auto ? "auto" : "manual");
  const char *rma_why;
  int rma = srd_param_rma_offered(&rma_why);
  /* NCCL_SRD_RMA=gpu: init refuses unless every device can take GPU windows. */
  char gpu_why[512];
  int refused = -1;
  for (int g = 0; rma == SRD_RMA_GPU && r->grouped && g < r->topo.ngroups && refused < 0; g++)
    if (srd_gdr_rma_windows(r->nics.provider, &r->gdr[g], srd_cuda_get(), gpu_why, sizeof(gpu_why)))
      refused = g;
  printf("  one-sided RMA (ncclRma v14)    %s: %s\n", rma && refused < 0 ? "offered" : "not offered", rma_why);
  if (refused >= 0)
    printf("    why not                      device %d: %s\n", refused, gpu_why);
  else if (rma == SRD_RMA_GPU)
    printf("    GPU signals                  by a CUDA stream (shm: NCCL 2.30.7 put+signal checked on one GPU)\n");

  printf("\nsettings (NCCL_SRD_*)\n");
  for (int p = 0; p < SRD_PARAM_COUNT; p++) {
    const struct srd_param_desc *d = srd_param_info((enum srd_param)p);
    char v[256], why[160], state_text[512];
    int state;
    param_value((enum srd_param)p, v, sizeof(v), &state, why, sizeof(why));
    printf("  %-28s %-12s %s\n", d->name, v[0] ? v : "(unset)",
           param_state_text(d, state, why, state_text, sizeof(state_text)));
  }

  printf("\n");
  if (!r->nwarnings) printf("no warnings\n");
  for (int i = 0; i < r->nwarnings; i++) printf("WARNING: %s\n", r->warnings[i]);
}

static int print_json(const struct info_report *r) {
  struct json_writer w;
  char buf[256];
  json_init(&w, stdout);
  json_begin_object(&w, NULL);
  json_string(&w, "tool", "srd-info");
  json_string(&w, "version", PACKAGE_VERSION);
  json_begin_object(&w, "libfabric");
  snprintf(buf, sizeof(buf), "%u.%u", FI_MAJOR(r->fi_runtime), FI_MINOR(r->fi_runtime));
  json_string(&w, "version", buf);
  snprintf(buf, sizeof(buf), "%u.%u", FI_MAJOR(r->fi_built), FI_MINOR(r->fi_built));
  json_string(&w, "built_against", buf);
  snprintf(buf, sizeof(buf), "%u.%u", FI_MAJOR(r->fi_api), FI_MINOR(r->fi_api));
  json_string(&w, "api_asked", buf);
  snprintf(buf, sizeof(buf), "%d.%d", SRD_FI_MIN_MAJOR, SRD_FI_MIN_MINOR);
  json_string(&w, "oldest_supported", buf);
  json_begin_array(&w, "providers");
  for (int i = 0; i < r->nproviders; i++) {
    json_begin_object(&w, NULL);
    json_string(&w, "name", r->providers[i].name);
    json_bool(&w, "rdm", r->providers[i].rdm);
    json_end_object(&w);
  }
  json_end_array(&w);
  json_end_object(&w);
  json_begin_object(&w, "provider");
  json_string(&w, "name", r->discovered ? r->nics.provider : NULL);
  json_string(&w, "reason", r->discovered ? r->nics.reason : NULL);
  json_string(&w, "transport", r->discovered ? r->transport : NULL);
  json_end_object(&w);
  json_begin_array(&w, "nics");
  for (int i = 0; r->discovered && i < r->nics.n; i++) {
    const struct srd_nic *n = &r->nics.nics[i];
    json_begin_object(&w, NULL);
    json_string(&w, "name", n->name);
    json_string(&w, "pci_bus_id", n->pci_bus_id[0] ? n->pci_bus_id : NULL);
    json_string(&w, "pci_path", n->pci_path[0] ? n->pci_path : NULL);
    json_int(&w, "numa", n->numa);
    json_int(&w, "speed_mbps", n->speed_mbps);
    json_string(&w, "link", link_text(n->name));
    json_end_object(&w);
  }
  json_end_array(&w);
  json_int(&w, "gpus", r->grouped ? r->topo.ngpus : 0);
  json_begin_array(&w, "devices");
  for (int g = 0; r->grouped && g < r->topo.ngroups; g++) {
    const struct srd_device_group *grp = &r->topo.groups[g];
    json_begin_object(&w, NULL);
    json_int(&w, "index", g);
    if (grp->gpu >= 0) json_int(&w, "gpu", grp->gpu);
    else json_null(&w, "gpu");
    if (grp->gpu >= 0) json_string(&w, "locality", srd_locality_name(grp->locality));
    else json_null(&w, "locality");
    json_int(&w, "numa", grp->numa);
    json_int(&w, "speed_mbps", grp->speed_mbps);
    json_string(&w, "pci_path", grp->pci_path[0] ? grp->pci_path : NULL);
    json_begin_array(&w, "rails");
    for (int k = 0; k < grp->nnics; k++) json_string(&w, NULL, r->nics.nics[grp->nics[k]].name);
    json_end_array(&w);
    json_gdr(&w, &r->gdr[g]);
    json_end_object(&w);
  }
  json_end_array(&w);
  const struct info_caps *c = &r->caps;
  json_begin_object(&w, "capabilities");
#define TRI(key, v) ((v) < 0 ? json_null(&w, key) : json_bool(&w, key, v))
  TRI("rma", c->rma);
  json_uint(&w, "cq_data_size", c->cq_data_size);
  TRI("hmem", c->hmem);
  json_bool(&w, "dmabuf_built", c->dmabuf_built);
  json_bool(&w, "gpu_peer_mem", r->gpu_peer_mem);
  TRI("write_order_128", c->write_order_128);
  json_bool(&w, "write_order_128_built", c->write_order_128_built);
  TRI("device_writes", c->device_writes);
  TRI("ll_across_nodes", c->ll);
  TRI("ll128_across_nodes", c->ll128);
  json_string(&w, "ll_why", c->ll_why);
  json_size(&w, "max_msg_size", c->max_msg_size);
  json_size(&w, "inject_size", c->inject_size);
  mr_mode_text(c->mr_mode, buf, sizeof(buf));
  json_string(&w, "mr_mode", buf);
  TRI("data_progress_auto", c->data_progress_auto);
#undef TRI
  json_end_object(&w);
  json_begin_array(&w, "settings");
  for (int p = 0; p < SRD_PARAM_COUNT; p++) {
    const struct srd_param_desc *d = srd_param_info((enum srd_param)p);
    char why[160];
    int state;
    param_value((enum srd_param)p, buf, sizeof(buf), &state, why, sizeof(why));
    json_begin_object(&w, NULL);
    json_string(&w, "name", d->name);
    if (d->is_string) json_string(&w, "value", buf[0] ? buf : NULL);
    else json_int(&w, "value", srd_param_int((enum srd_param)p));
    json_bool(&w, "set", state != 0);
    json_bool(&w, "valid", state >= 0);
    if (state < 0) json_string(&w, "invalid_reason", why);
    json_string(&w, "doc", d->doc);
    json_end_object(&w);
  }
  json_end_array(&w);
  json_bool(&w, "usable", info_usable(r));
  json_begin_array(&w, "warnings");
  for (int i = 0; i < r->nwarnings; i++) json_string(&w, NULL, r->warnings[i]);
  json_end_array(&w);
  json_end_object(&w);
  return json_finish(&w);
}

static void print_checks(const struct info_checks *c) {
  for (int i = 0; i < c->n; i++)
    printf("%-4s  %-15s %s\n", info_verdict_name(c->c[i].verdict), c->c[i].name, c->c[i].text);
  printf("srd-info --check: %d of %d check(s) failed\n", c->failed, c->n);
}

static void json_checks(struct json_writer *w, const struct info_checks *c) {
  json_begin_array(w, "checks");
  for (int i = 0; i < c->n; i++) {
    json_begin_object(w, NULL);
    json_string(w, "verdict", info_verdict_name(c->c[i].verdict));
    json_string(w, "name", c->c[i].name);
    json_string(w, "text", c->c[i].text);
    json_end_object(w);
  }
  json_end_array(w);
  json_uint(w, "failed", (uint64_t)c->failed);
}

static int expectation(const char *what) {
  return !strcmp(what, "efa") ? INFO_EXPECT_EFA : !strcmp(what, "gdr") ? INFO_EXPECT_GDR : 0;
}

int main(int argc, char **argv) {
  int json = 0, check = 0, expect = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) json = 1;
    else if (!strcmp(argv[i], "--check")) check = 1;
    else if (!strcmp(argv[i], "--expect") && i + 1 < argc && expectation(argv[i + 1]))
      check = 1, expect |= expectation(argv[++i]);
    else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      fputs(usage, stdout);
      return 0;
    } else {
      fprintf(stderr, "srd-info: unknown option '%s'%s (see --help)\n", argv[i],
              !strcmp(argv[i], "--expect") ? " (--expect takes efa or gdr)" : "");
      return 2;
    }
  }
  struct info_report *r = malloc(sizeof(*r));
  struct info_checks *c = check ? malloc(sizeof(*c)) : NULL;
  if (!r || (check && !c)) {
    free(r);
    fprintf(stderr, "srd-info: out of memory\n");
    return 1;
  }
  info_gather(r);
  int rc;
  if (check) {
    info_doctor(r, expect, c);
    rc = c->failed > 0;
    if (json) {
      struct json_writer w;
      json_init(&w, stdout);
      json_begin_object(&w, NULL);
      json_string(&w, "tool", "srd-info");
      json_checks(&w, c);
      json_end_object(&w);
      rc |= json_finish(&w);
    } else {
      print_checks(c);
    }
  } else {
    rc = json ? print_json(r) : (print_text(r), 0);
    rc |= !info_usable(r);
  }
  info_release(r);
  free(r);
  free(c);
  return rc ? 1 : 0;
}
