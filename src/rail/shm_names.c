/* shm endpoint names: how we name our endpoints, which peer names we let
 * into an address vector, and the sweep of regions dead processes left. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>

#include "srd/log.h"
#include "srd/rail.h"
#include "srd/sys.h"

/* Containers may share /dev/shm without sharing pid numbers: a name says
 * in which pid namespace its pid means something (srd_pid_ns_tag), so that
 * only regions of our namespace are judged by their pid. */
static uint32_t pid_ns_tag(void) { return srd_pid_ns_tag(); }

/* shm names its shared-memory region after the process id unless told
 * otherwise; a region left by a killed process then blocks a later process
 * that gets the same pid. A random name cannot collide. Fixed-width fields:
 * both sides' names must have one length (pids of 4 and 5 digits). */
int srd_rail_name_shm_endpoint(struct srd_rail *rail, struct fid_ep *ep, int i) {
  if (strcmp(rail->info->fabric_attr->prov_name, "shm")) return 0;
  uint32_t r = (uint32_t)srd_random64();
  char name[SRD_EP_NAME_MAX];
  snprintf(name, sizeof(name), "srd-%010d-%08x%08x-%03d-%d", (int)getpid(), pid_ns_tag(), r, rail->index, i);
  return fi_setname(&ep->fid, name, strlen(name) + 1);
}

/* "srd-", 10 digits, "-", 16 hex digits, "-", 3 digits, "-", 1 digit, NUL: the
 * names srd_rail_name_shm_endpoint gives. Returns the pid, or -1. */
static long host_local_pid(const char *name, size_t len) {
  static const char shape[] = "srd-##########-****************-###-#"; /* #: digit, *: hex digit */
  if (len < sizeof(shape)) return -1;
  for (size_t i = 0; i < sizeof(shape); i++) {
    char c = name[i], want = shape[i];
    bool ok = want == '#' ? c >= '0' && c <= '9' : want == '*' ? (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')
                                                                : c == want;
    if (!ok) return -1;
  }
  return strtol(name + 4, NULL, 10);
}

static bool pid_alive(long pid) { return pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM); }

/* Is the name's pid one of our pid namespace (see pid_ns_tag)? */
static bool same_pid_ns(const char *name) {
  char tag[9];
  memcpy(tag, name + 15, 8); /* after "srd-" and the pid's 10 digits and "-" */
  tag[8] = 0;
  return (uint32_t)strtoul(tag, NULL, 16) == pid_ns_tag();
}

/* shm maps the region a name points to and trusts what it finds there: a
 * peer name is accepted only if it is of our shape, its region exists, is
 * ours (our user's: processes of the same user can reach our memory anyway)
 * and belongs to a live process (where its pid is one of our namespace), and
 * it is not one of our own endpoints (a
 * self address removed from the AV crashed shm 1.17's peer). */
int srd_rail_shm_name_check(const struct srd_rail *rail, const char *name) {
  long pid = host_local_pid(name, rail->ep_name_len);
  if (pid < 0) return -FI_EINVAL;
  for (int i = 0; i < rail->neps; i++)
    if (!memcmp(name, rail->ep_name[i], rail->ep_name_len)) return -FI_EINVAL;
  char path[SRD_EP_NAME_MAX + 16];
  snprintf(path, sizeof(path), "/dev/shm/%s", name);
  struct stat st;
  if (lstat(path, &st)) return -FI_EHOSTDOWN; /* its process closed or was swept */
  if (!S_ISREG(st.st_mode) || st.st_uid != geteuid()) return -FI_EINVAL;
  return !same_pid_ns(name) || pid_alive(pid) ? 0 : -FI_EHOSTDOWN;
}

void srd_rail_remove_dead_regions(void) {
  DIR *d = opendir("/dev/shm");
  if (!d) return;
  int removed = 0;
  for (struct dirent *e; (e = readdir(d));) {
    long pid = host_local_pid(e->d_name, strlen(e->d_name) + 1);
    struct stat st;
    if (pid < 0 || !same_pid_ns(e->d_name) || pid_alive(pid) ||
        fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode) || st.st_uid != geteuid())
      continue;
    if (unlinkat(dirfd(d), e->d_name, 0) == 0) removed++;
  }
  closedir(d);
  if (removed) SRD_INFO(NCCL_INIT | NCCL_NET, "removed %d shared-memory region(s) of exited processes", removed);
}
