/* srd-perf: measure an ncclNet plugin (or raw libfabric) between two
 * processes: two local ones by default, or --server/--client across hosts. */
#define _GNU_SOURCE /* sched_setaffinity */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "perf_args.h"
#include "perf_bench.h"
#include "perf_ctrl.h"
#include "perf_log.h"
#include "perf_report.h"
#include "perf_rma.h"

#define WIRE_MAGIC 0x53525046u /* "SRPF" */
#define WIRE_VERSION 3 /* 3: runs */
#define MAX_SIZES 64

/* What the client asks for; the server follows the client's pattern options. */
struct wire_opts {
  uint32_t magic, version;
  int32_t raw, tests, factor, iters, warmup, comms, window, group, check, rma, runs;
  uint64_t min_size, max_size;
};

static int agree_options(int fd, struct perf_opts *o, int is_client) {
  struct wire_opts w;
  memset(&w, 0, sizeof(w));
  if (is_client) {
    w = (struct wire_opts){WIRE_MAGIC, WIRE_VERSION, o->raw, o->tests, o->factor, o->iters, o->warmup,
                           o->comms, o->window, o->group, o->check, (int32_t)o->rma, o->runs, o->min_size, o->max_size};
    return perf_ctrl_send(fd, &w, sizeof(w), o->timeout_s, "the options");
  }
  if (perf_ctrl_recv(fd, &w, sizeof(w), o->timeout_s, "the options")) return -1;
  if (w.magic != WIRE_MAGIC || w.version != WIRE_VERSION) {
    perf_error("the client is not a compatible srd-perf (or not srd-perf at all)");
    return -1;
  }
  if (w.raw != o->raw) {
    perf_error("the client runs %s but this server runs %s: give both the same --raw/--plugin", w.raw ? "--raw" : "a plugin",
               o->raw ? "--raw" : "a plugin");
    return -1;
  }
  o->tests = w.tests, o->factor = w.factor, o->iters = w.iters, o->warmup = w.warmup, o->comms = w.comms;
  o->window = w.window, o->group = w.group, o->check = w.check;
  if (w.rma < PERF_RMA_OFF || w.rma > PERF_RMA_GET) {
    perf_error("the client asks for an unknown --rma op");
    return -1;
  }
  o->rma = (enum perf_rma_op)w.rma;
  if (w.runs < 1 || w.runs > PERF_MAX_RUNS) {
    perf_error("the client asks for %d runs per size (1..%d)", w.runs, PERF_MAX_RUNS);
    return -1;
  }
  o->runs = w.runs;
  o->min_size = (size_t)w.min_size, o->max_size = (size_t)w.max_size;
  return 0;
}

/* Each side reports whether its transport opened, so that a missing plugin
 * is explained once, by the side that found it missing. */
static int swap_status(int fd, int mine, int timeout_s) {
  char out = mine ? 'k' : 'x', in;
  if (perf_ctrl_send(fd, &out, 1, timeout_s, "the start status")) return -1;
  if (!mine) return -1;
  if (perf_ctrl_recv(fd, &in, 1, timeout_s, "the start status")) return -1;
  return in == 'k' ? 0 : -1;
}

static void progress(const char *what, size_t done, size_t total, size_t size) {
  static int tty = -1;
  if (tty < 0) tty = isatty(STDERR_FILENO);
  if (!tty || total < 2) return;
  if (done == total) {
    fputs("\r\033[K", stderr);
    return;
  }
  char s[32];
  perf_format_size(size, s, sizeof(s));
  fprintf(stderr, "\r\033[Ksrd-perf: %s%s (%zu of %zu sizes)", what, s, done + 1, total);
}

static struct perf_transport *open_transport(const struct perf_opts *o) {
  if (o->rma) return o->raw ? perf_rma_raw_open(o->dev) : perf_rma_plugin_open(o->plugin, o->dev);
  return o->raw ? perf_raw_open(o->dev, o->cuda) : perf_plugin_open(o->plugin, o->net_version, o->dev, o->cuda);
}

/* The patterns: two-sided (perf_bench.c) or one-sided (--rma, perf_rma_bench.c). */
struct session {
  struct perf_session *two_sided;
  struct perf_rma_session *one_sided;
};

static int session_open(struct session *s, struct perf_transport *t, int fd, const struct perf_opts *o,
                        int is_client) {
  if (o->rma) return (s->one_sided = perf_rma_session_open(t, fd, o, is_client)) ? 0 : -1;
  return (s->two_sided = perf_session_open(t, fd, o, is_client)) ? 0 : -1;
}

static int session_run(struct session *s, size_t size, struct perf_result *res) {
  return s->one_sided ? perf_rma_session_run(s->one_sided, size, res) : perf_session_run(s->two_sided, size, res);
}

static int session_close(struct session *s) {
  return perf_rma_session_close(s->one_sided) | perf_session_close(s->two_sided);
}

/* One side of a run: open the transport, connect, run every size. The
 * client prints the table or JSON, or, given keep, keeps the results for the
 * side-by-side table instead. */
static int run(struct perf_opts *o, int fd, int is_client, struct perf_side *keep) {
  struct perf_transport *t = NULL;
  struct session s = {NULL, NULL};
  struct perf_result *results = NULL, *runs = NULL;
  int rc = 1;
  /* Both sides open at once (opening a provider takes a while). A failure
   * seen by both, such as a missing plugin, is printed once: by the server,
   * while the client holds its lines back until it knows. */
  if (!is_client) {
    if (agree_options(fd, o, 0)) return 1;
    /* In a local run the server speaks for both processes about the
     * transport: the user started no server. */
    if (o->role == PERF_ROLE_LOCAL) perf_log_set_name("srd-perf");
    t = open_transport(o);
    if (swap_status(fd, t != NULL, o->timeout_s)) goto out;
    if (o->role == PERF_ROLE_LOCAL) perf_log_set_name("srd-perf[server]");
  } else {
    char in;
    if (agree_options(fd, o, 1)) return 1;
    if (o->role == PERF_ROLE_LOCAL) perf_log_hold();
    t = open_transport(o);
    int got = perf_ctrl_recv(fd, &in, 1, o->timeout_s, "the server's start status") == 0;
    perf_log_release(!got || in == 'k' || t);
    if (!got) goto out;
    if (in != 'k') {
      if (o->role == PERF_ROLE_CLIENT) perf_error("the server could not open its transport (see its output)");
      goto out;
    }
    char out = t ? 'k' : 'x';
    if (perf_ctrl_send(fd, &out, 1, o->timeout_s, "the start status") || !t) goto out;
  }
  size_t sizes[MAX_SIZES];
  size_t nsizes = perf_sweep(o->min_size, o->max_size, o->factor, sizes, MAX_SIZES);
  results = calloc(nsizes, sizeof(*results));
  runs = calloc((size_t)o->runs, sizeof(*runs));
  if (!results || !runs || session_open(&s, t, fd, o, is_client)) goto out;
  const int table = is_client && !o->json && !keep;
  const char *what = keep ? (o->raw ? "raw: " : "plugin: ") : "";
  if (table) perf_report_header(stdout, t, o);
  for (size_t i = 0; i < nsizes; i++) {
    if (is_client) progress(what, i, nsizes, sizes[i]);
    /* Both sides run the same count (agreed in the options), in step. */
    for (int k = 0; k < o->runs; k++)
      if (session_run(&s, sizes[i], &runs[k])) {
        if (is_client) progress(what, nsizes, nsizes, 0);
        goto out;
      }
    perf_results_combine(runs, o->runs, &results[i]);
    if (table) {
      progress(what, nsizes, nsizes, 0);
      perf_report_row(stdout, &results[i], o);
    }
  }
  if (is_client) progress(what, nsizes, nsizes, 0);
  if (table) perf_report_footer(stdout, o, results, nsizes);
  if (perf_ctrl_barrier(fd, o->timeout_s, "the end of the run")) goto out;
  rc = 0;
  if (is_client && o->json && perf_report_json(stdout, t, o, results, nsizes)) rc = 1;
  if (is_client && keep) {
    snprintf(keep->description, sizeof(keep->description), "%s", t->description);
    snprintf(keep->device, sizeof(keep->device), "%s", t->device);
    snprintf(keep->provider, sizeof(keep->provider), "%s", t->provider);
    keep->results = results, keep->n = nsizes;
    results = NULL;
  }
out:
  if (session_close(&s)) rc = 1;
  if (t) t->ops->destroy(t);
  free(results);
  free(runs);
  return rc;
}

/* 1 when the child exited (status filled) within timeout_s, 0 when it is
 * still there (hung, or stopped). */
static int wait_child(pid_t child, int timeout_s, int *status) {
  for (int waited_ms = 0; waited_ms <= timeout_s * 1000; waited_ms += 10) {
    pid_t r = waitpid(child, status, WNOHANG);
    if (r == child || (r < 0 && errno != EINTR)) return 1;
    usleep(10 * 1000);
  }
  return 0;
}

/* --pin: the client takes the first CPU it may run on, the server the
 * second, so that neither waits for the other to be scheduled. allowed is
 * the set the run started with: the client is this process, pinned only for
 * its run (a second run's server, forked from it, would otherwise inherit
 * the one CPU and share it with the client). */
static void pin_to(int nth, const cpu_set_t *allowed) {
  cpu_set_t one;
  CPU_ZERO(&one);
  for (int cpu = 0, seen = 0; cpu < CPU_SETSIZE; cpu++)
    if (CPU_ISSET(cpu, allowed) && seen++ == nth) {
      CPU_SET(cpu, &one);
      if (sched_setaffinity(0, sizeof(one), &one)) perf_error("--pin: cannot pin to CPU %d", cpu);
      return;
    }
  perf_error("--pin: fewer than 2 CPUs available; not pinned");
}

static int run_local(struct perf_opts *o, struct perf_side *keep) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds)) {
    perf_error("socketpair: %s", strerror(errno));
    return 1;
  }
  cpu_set_t allowed;
  bool pin = o->pin && !sched_getaffinity(0, sizeof(allowed), &allowed);
  fflush(stdout);
  pid_t child = fork();
  if (child < 0) {
    perf_error("fork: %s", strerror(errno));
    return 1;
  }
  if (child == 0) {
    close(fds[0]);
    perf_log_set_name("srd-perf[server]");
    if (pin) pin_to(1, &allowed);
    int rc = run(o, fds[1], 0, NULL);
    close(fds[1]);
    exit(rc); /* stdout was flushed before fork: nothing is written twice */
  }
  close(fds[1]);
  perf_log_set_name("srd-perf[client]");
  if (pin) pin_to(0, &allowed);
  int rc = run(o, fds[0], 1, keep);
  if (pin && sched_setaffinity(0, sizeof(allowed), &allowed)) perf_error("--pin: cannot restore the CPU set");
  close(fds[0]); /* a server still waiting on us sees the channel close */
  int status = 0;
  if (!wait_child(child, o->timeout_s, &status)) {
    perf_error("the server process did not exit within %d s of the end; killed it", o->timeout_s);
    kill(child, SIGKILL);
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    return 1;
  }
  if (WIFSIGNALED(status)) {
    perf_error("the server process died of signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    rc = 1;
  } else if (WEXITSTATUS(status) && !rc) {
    rc = 1;
  }
  return rc;
}

/* One half of the side-by-side run in a child of its own, its results sent
 * back over the control channel's helpers: CUDA does not survive fork, so
 * the raw half's server, forked from a client in which the plugin half had
 * initialised CUDA, could not connect (seen with --cuda on the GPU machine).
 * The results (a few KiB) fit the socket's buffer, so the child sends them
 * and exits before they are read; were they larger, its send would time out
 * with an error instead of hanging. */
static int run_local_isolated(struct perf_opts *o, struct perf_side *keep) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds)) {
    perf_error("socketpair: %s", strerror(errno));
    return 1;
  }
  fflush(stdout);
  pid_t child = fork();
  if (child < 0) {
    perf_error("fork: %s", strerror(errno));
    close(fds[0]);
    close(fds[1]);
    return 1;
  }
  if (child == 0) {
    close(fds[0]);
    int rc = run_local(o, keep);
    if (!rc && (perf_ctrl_send(fds[1], keep, sizeof(*keep), o->timeout_s, "the results") ||
                perf_ctrl_send(fds[1], keep->results, keep->n * sizeof(*keep->results), o->timeout_s, "the results")))
      rc = 1;
    free(keep->results);
    close(fds[1]);
    exit(rc);
  }
  close(fds[1]);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  /* A failed half said why itself: nothing to read then. */
  int rc = !WIFEXITED(status) || WEXITSTATUS(status) ||
           perf_ctrl_recv(fds[0], keep, sizeof(*keep), o->timeout_s, "the results");
  keep->results = NULL; /* the child's pointer */
  if (!rc && (keep->n > MAX_SIZES || !(keep->results = calloc(keep->n ? keep->n : 1, sizeof(*keep->results))) ||
              perf_ctrl_recv(fds[0], keep->results, keep->n * sizeof(*keep->results), o->timeout_s, "the results")))
    rc = 1;
  close(fds[0]);
  if (rc) {
    free(keep->results);
    memset(keep, 0, sizeof(*keep));
  }
  return rc;
}

/* The default run: what our plugin reaches against what libfabric itself
 * reaches on the same provider and NICs, so a new user sees at once what is
 * good. */
static int run_compare(struct perf_opts *o) {
  struct perf_side plugin, raw;
  memset(&plugin, 0, sizeof(plugin));
  memset(&raw, 0, sizeof(raw));
  int rc = run_local_isolated(o, &plugin);
  if (!rc) {
    o->raw = 1;
    rc = run_local_isolated(o, &raw);
    o->raw = 0;
  }
  if (!rc) perf_report_compare(stdout, o, &plugin, &raw);
  free(plugin.results);
  free(raw.results);
  return rc;
}

int main(int argc, char **argv) {
  struct perf_opts o;
  char err[512];
  switch (perf_args_parse(argc, argv, &o, err, sizeof(err))) {
  case PERF_ARGS_HELP: fputs(perf_usage, stdout); return 0;
  case PERF_ARGS_ERROR: fprintf(stderr, "srd-perf: %s\n", err); return 2;
  case PERF_ARGS_OK: break;
  }
  if (o.compare) return run_compare(&o);
  if (o.role == PERF_ROLE_LOCAL) return run_local(&o, NULL);
  int fd = o.role == PERF_ROLE_SERVER ? perf_ctrl_serve(o.port, o.timeout_s)
                                      : perf_ctrl_connect(o.host, o.port, o.timeout_s);
  if (fd < 0) return 1;
  int rc = run(&o, fd, o.role == PERF_ROLE_CLIENT, NULL);
  close(fd);
  return rc;
}
