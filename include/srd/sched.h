/* Which paths (rail x endpoint) carry which bytes of a message. A pure
 * function: same input, same stripes; unit-tested on its own. */
#ifndef SRD_SCHED_H
#define SRD_SCHED_H

#include <stddef.h>
#include <stdint.h>

#define SRD_STRIPE_ALIGN 128

struct srd_stripe {
  int path;
  size_t offset;
  size_t len;
};

struct srd_sched_params {
  int npaths;
  size_t threshold;  /* below it a message goes whole to one path */
  size_t min_stripe; /* no stripe of a split message is smaller (except the last) */
  size_t max_write;  /* provider's largest single write */
};

/* Split size bytes into at most max_out stripes, every byte covered once, in
 * offset order; *cursor rotates the starting path across calls. Returns the
 * stripe count, or -1 when the message needs more than max_out stripes. */
int srd_sched_split(const struct srd_sched_params *p, size_t size, unsigned *cursor, struct srd_stripe *out,
                    int max_out);
/* The same over the paths whose bit is set in usable (path i: bit i; rail
 * failover leaves out the paths of dead rails): as many stripes as usable
 * paths, in turn over them. usable 0 counts as every path. */
int srd_sched_split_over(const struct srd_sched_params *p, size_t size, uint64_t usable, unsigned *cursor,
                         struct srd_stripe *out, int max_out);
/* The paths a message of size bytes takes, as a usable mask for
 * srd_sched_split_over: below the threshold only the first inline_paths
 * (lane 0's, which the caller polls: a small message never waits on a lane
 * thread); at or above it only the others (the lanes, when npaths counts
 * them: a stripe on lane 0 would have the caller's thread copy bulk data
 * between its other work). Within usable (0: every path); usable itself when
 * none of the wanted paths is usable. */
uint64_t srd_sched_paths_for(const struct srd_sched_params *p, size_t size, int inline_paths, uint64_t usable);
/* The n-th usable path after cursor (taking turns over usable paths); -1 when
 * usable names none of the npaths. */
int srd_sched_pick(int npaths, uint64_t usable, unsigned cursor);

#endif
