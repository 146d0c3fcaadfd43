/* Device profiles and test knobs of the emulated EFA device.
 *
 * SRD_EFA_EMU_PROFILE picks the generation the provider sees (gen1, p4d, p5,
 * p5en; default p5).  The knobs are test-only and read once per process. */
#define _GNU_SOURCE
#include "emu.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* vendor_part_id 0xefa0 is what the provider treats as first generation. */
static const struct emu_profile profiles[] = {
	{ "gen1", 0xefa0, 0, 0, false },
	{ "p4d", 0xefa1,
	  EFADV_DEVICE_ATTR_CAPS_RDMA_READ | EFADV_DEVICE_ATTR_CAPS_RNR_RETRY |
		  EFADV_DEVICE_ATTR_CAPS_CQ_WITH_SGID,
	  EMU_MAX_RDMA, false },
	{ "p5", 0xefa2,
	  EFADV_DEVICE_ATTR_CAPS_RDMA_READ | EFADV_DEVICE_ATTR_CAPS_RNR_RETRY |
		  EFADV_DEVICE_ATTR_CAPS_CQ_WITH_SGID |
		  EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE,
	  EMU_MAX_RDMA, true },
	{ "p5en", 0xefa3,
	  EFADV_DEVICE_ATTR_CAPS_RDMA_READ | EFADV_DEVICE_ATTR_CAPS_RNR_RETRY |
		  EFADV_DEVICE_ATTR_CAPS_CQ_WITH_SGID |
		  EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE |
		  EFADV_DEVICE_ATTR_CAPS_UNSOLICITED_WRITE_RECV,
	  EMU_MAX_RDMA, true },
};

static const struct emu_profile *chosen;
static struct emu_knobs knobs;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* A knob is a decimal number; anything else is a test's mistake, said once
 * and read as 0 so the run is not silently shaped by a typo. */
static unsigned knob(const char *name, unsigned dflt, unsigned max)
{
	const char *v = getenv(name);
	char *end;
	unsigned long n;

	if (!v || !*v)
		return dflt;
	n = strtoul(v, &end, 10);
	if (*end || n > max) {
		fprintf(stderr, "srd-efa-emu: %s=%s is not 0..%u; using 0\n",
			name, v, max);
		return 0;
	}
	return (unsigned)n;
}

static void read_env(void)
{
	const char *p = getenv("SRD_EFA_EMU_PROFILE");

	chosen = &profiles[2];
	if (p && *p) {
		chosen = NULL;
		for (size_t i = 0; i < sizeof(profiles) / sizeof(profiles[0]); i++)
			if (!strcmp(p, profiles[i].name))
				chosen = &profiles[i];
		if (!chosen)
			fprintf(stderr,
				"srd-efa-emu: SRD_EFA_EMU_PROFILE=%s is not gen1, p4d, p5 or p5en: no devices\n",
				p);
	}
	/* Reordering is on unless a test turns it off: the provider must not
	 * rely on an order SRD does not give. */
	knobs.reorder_us = knob("SRD_EFA_EMU_REORDER_US", 50, 1000000);
	knobs.delay_us = knob("SRD_EFA_EMU_DELAY_US", 0, 10000000);
	knobs.drop_pm = knob("SRD_EFA_EMU_DROP_PM", 0, 1000);
	knobs.rnr_pm = knob("SRD_EFA_EMU_RNR_PM", 0, 1000);
	knobs.vanish_after = knob("SRD_EFA_EMU_VANISH_AFTER", 0, 4000000000u);
	knobs.counters = getenv("SRD_EFA_EMU_COUNTERS");
}

const struct emu_profile *emu_profile(void)
{
	pthread_once(&once, read_env);
	return chosen;
}

const struct emu_knobs *emu_knobs(void)
{
	pthread_once(&once, read_env);
	return &knobs;
}

uint64_t emu_now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Only the loops draw, each under its device's lock; a shared generator
 * needs its own lock across devices. */
unsigned emu_rand(unsigned below)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static uint64_t state = 0x9e3779b97f4a7c15u;
	uint64_t x;

	if (below <= 1)
		return 0;
	pthread_mutex_lock(&lock);
	state ^= state << 13;
	state ^= state >> 7;
	state ^= state << 17;
	x = state;
	pthread_mutex_unlock(&lock);
	return (unsigned)(x % below);
}
