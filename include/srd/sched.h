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
/* The n-th usable path after cursor (taking turns over usable paths); -1 when
 * usable names none of the npaths. */
int srd_sched_pick(int npaths, uint64_t usable, unsigned cursor);

#endif
