/* The cases of tests/security/rogue that need no rogue endpoint: a killed
 * process's shm region, and misuse of the plugin's API. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rogue.h"
#include "srdtest.h"

/* ---------- regions of killed processes ---------- */

static int region_of(long pid, char *path, size_t cap) {
  DIR *d = opendir("/dev/shm");
  ST_CHECK(d, "opendir /dev/shm");
  char prefix[32];
  snprintf(prefix, sizeof prefix, "srd-%010ld-", pid);
  int found = 0;
  for (struct dirent *e; (e = readdir(d));)
    if (!strncmp(e->d_name, prefix, strlen(prefix))) {
      snprintf(path, cap, "/dev/shm/%s", e->d_name);
      found = 1;
    }
  closedir(d);
  return found;
}

/* The victim: a process that opened the plugin (and so made its region)
 * and was killed, forked and reaped by rank 1 at rank 0's word. Rank 0 then
 * expects the region there, and gone once its own plugin opens. Any process
 * of ours that opens the plugin meanwhile (make check runs tests side by
 * side) cleans it up as well: then a new victim, a few times. */
#define VICTIMS 5

static long killed_victim(void *arg) {
  int fds[2];
  ST_CHECK(pipe(fds) == 0, "pipe failed");
  pid_t child = fork();
  ST_CHECK(child >= 0, "fork failed");
  if (child == 0) {
    close(fds[0]);
    st_setup(arg, st_version(VERSION));
    char handle[HSIZE];
    victim_listen(handle, -1, -1);
    long me = getpid();
    if (write(fds[1], &me, sizeof me) != (ssize_t)sizeof me) _exit(1);
    kill(getpid(), SIGKILL);
  }
  close(fds[1]);
  long pid = 0;
  ssize_t n = read(fds[0], &pid, sizeof pid);
  close(fds[0]);
  int status = 0;
  ST_CHECK(waitpid(child, &status, 0) == child, "waitpid failed");
  ST_CHECK(n == (ssize_t)sizeof pid && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
           "the victim did not listen and die by SIGKILL");
  return pid;
}

int victim_killed_region(int rank, int nranks, void *arg) {
  (void)nranks;
  char path[300];
  if (rank == 1) {
    for (char word;;) {
      st_oob_recv(0, &word, 1, SETUP_MS);
      if (word != 'v') return 0;
      long pid = killed_victim(arg);
      st_oob_send(0, &pid, sizeof pid);
    }
  }
  for (int i = 0; i < VICTIMS; i++) {
    char word = 'v';
    st_oob_send(1, &word, 1);
    long pid;
    st_oob_recv(1, &pid, sizeof pid, SETUP_MS);
    if (!region_of(pid, path, sizeof path)) {
      st_note("victim %d (pid %ld): its region was gone before we looked (cleaned by another process?)", i, pid);
      continue;
    }
    word = 'd';
    st_oob_send(1, &word, 1);
    st_setup(arg, st_version(VERSION));
    char handle[HSIZE];
    void *l = victim_listen(handle, -1, -1);
    ST_CHECK(!region_of(pid, path, sizeof path), "the killed process's region %s is still there", path);
    ST_NCCL(st_net_close_listen(l));
    ST_NCCL(st_net_finalize());
    return 0;
  }
  ST_CHECK(0, "no killed process's region stayed until we looked, in %d tries", VICTIMS);
  return 1;
}

/* ---------- misuse of the API ---------- */

int api_misuse(int rank, int nranks, void *arg) {
  (void)nranks;
  st_setup(arg, st_version(VERSION));
  if (rank == 1) {
    void *s = st_pair_comm(rank, 0, 1, SETUP_MS);
    st_send_one(s, 4096, 1, 0, SETUP_MS);
    st_barrier(SETUP_MS);
    ST_NCCL(st_net_close_send(s));
    ST_CHECK(st_net_close_send(s) == ncclInvalidArgument, "second closeSend");
    char b[64];
    void *req = NULL;
    ST_CHECK(st_net_isend(s, b, 0, 0, NULL, &req) == ncclInvalidArgument, "isend after closeSend");
    ST_NCCL(st_net_finalize());
    ST_CHECK(st_net_finalize() == ncclInvalidArgument, "second finalize");
    return 0;
  }
  char handle[HSIZE];
  void *lcomm = victim_listen(handle, 1, -1), *rc = NULL;
  ncclResult_t err;
  ST_CHECK(st_accept_wait(lcomm, &rc, SETUP_MS, &err) == ST_DONE, "accept");
  ST_NCCL(st_net_close_listen(lcomm));
  void *x = NULL;
  ST_CHECK(st_net_accept(lcomm, &x) == ncclInvalidArgument && !x, "accept after closeListen");
  ST_CHECK(st_net_close_listen(lcomm) == ncclInvalidArgument, "second closeListen");
  size_t size = 4096;
  char *buf = st_alloc(size);
  void *mh = NULL, *req = NULL, *data = buf;
  int tag = 0, done = 0;
  /* What NCCL never passes, a wrapper might (issue 60): errors, not crashes. */
  ST_CHECK(st_net_devices(NULL) == ncclInvalidArgument, "devices(NULL)");
  ST_CHECK(st_net_reg_mr(rc, NULL, size, &mh) == ncclInvalidArgument, "regMr of NULL");
  ST_CHECK(st_net_reg_mr(rc, buf, (size_t)1 << 62, &mh) == ncclInvalidArgument, "regMr of 2^62 bytes");
  ST_CHECK(st_net_reg_mr(rc, (void *)(UINTPTR_MAX - 4095), 8192, &mh) == ncclInvalidArgument,
           "regMr of a range past the end of the address space");
  ST_NCCL(st_net_reg_mr(rc, buf, size, &mh));
  ST_CHECK(st_irecv_wait(rc, 1, &data, &size, &tag, &mh, &req, SETUP_MS, &err) == ST_DONE, "irecv");
  ST_CHECK(st_net_test(req, NULL, NULL) == ncclInvalidArgument, "test with no done flag");
  ST_CHECK(st_net_test(NULL, &done, NULL) == ncclInvalidArgument, "test of NULL");
  ST_CHECK(st_test_wait(req, NULL, SETUP_MS, &err) == ST_DONE, "receive");
  ST_CHECK(st_net_test(req, &done, NULL) == ncclInvalidArgument, "test of a request already reported done");
  ST_NCCL(st_net_dereg_mr(rc, mh));
  ST_CHECK(st_net_dereg_mr(rc, mh) == ncclInvalidArgument, "second deregMr");
  ST_CHECK(st_net_irecv(rc, 1, &data, &size, &tag, &mh, &req) == ncclInvalidArgument, "irecv on a deregistered handle");
  ST_NCCL(st_net_reg_mr(rc, buf, size, &mh));
  ST_CHECK(st_irecv_wait(rc, 1, &data, &size, &tag, &mh, &req, SETUP_MS, &err) == ST_DONE, "irecv");
  st_barrier(SETUP_MS);
  ST_NCCL(st_net_dereg_mr(rc, mh));
  ST_NCCL(st_net_close_recv(rc));
  ST_CHECK(st_net_test(req, &done, NULL) == ncclInvalidArgument, "test after closeRecv");
  ST_CHECK(st_net_close_recv(rc) == ncclInvalidArgument, "second closeRecv");
  ST_NCCL(st_net_finalize());
  ST_CHECK(st_net_finalize() == ncclInvalidArgument, "second finalize");
  return 0;
}

