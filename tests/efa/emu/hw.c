/* A device's per-process state: its GID, QP table, memory regions and
 * address handles.  Callers of the table functions hold hw->lock. */
#define _GNU_SOURCE
#include "emu.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t devices_lock = PTHREAD_MUTEX_INITIALIZER;
static struct emu_hw *hws[64];

/* A GID per process and device: the provider takes a peer whose GID is one
 * of its own devices' for a local one and would move its traffic to shm. */
static void gid_of(int index, union ibv_gid *gid)
{
	uint32_t pid = (uint32_t)getpid();

	memset(gid, 0, sizeof(*gid));
	gid->raw[0] = 0xfe;
	gid->raw[1] = 0x80;
	gid->raw[8] = 0x5e; /* "SRD emulated" */
	gid->raw[9] = 0xfa;
	gid->raw[10] = (uint8_t)(pid >> 24);
	gid->raw[11] = (uint8_t)(pid >> 16);
	gid->raw[12] = (uint8_t)(pid >> 8);
	gid->raw[13] = (uint8_t)pid;
	gid->raw[14] = (uint8_t)(index >> 8);
	gid->raw[15] = (uint8_t)index;
}

struct emu_hw *emu_hw_get(int index)
{
	struct emu_hw *hw;

	if (index < 0 || index >= (int)(sizeof(hws) / sizeof(hws[0]))) {
		errno = ENODEV;
		return NULL;
	}
	pthread_mutex_lock(&devices_lock);
	hw = hws[index];
	if (hw) {
		hw->refs++;
		pthread_mutex_unlock(&devices_lock);
		return hw;
	}
	hw = calloc(1, sizeof(*hw));
	if (!hw) {
		pthread_mutex_unlock(&devices_lock);
		errno = ENOMEM;
		return NULL;
	}
	hw->index = index;
	hw->refs = 1;
	hw->next_qpn = 1;
	hw->next_ahn = 1;
	gid_of(index, &hw->gid);
	pthread_mutex_init(&hw->lock, NULL);
	pthread_mutex_init(&hw->flush_lock, NULL);
	if (emu_loop_start(hw)) {
		int err = errno;

		pthread_mutex_destroy(&hw->flush_lock);
		pthread_mutex_destroy(&hw->lock);
		free(hw);
		pthread_mutex_unlock(&devices_lock);
		errno = err;
		return NULL;
	}
	hws[index] = hw;
	pthread_mutex_unlock(&devices_lock);
	return hw;
}

void emu_hw_put(struct emu_hw *hw)
{
	pthread_mutex_lock(&devices_lock);
	if (--hw->refs > 0) {
		pthread_mutex_unlock(&devices_lock);
		return;
	}
	hws[hw->index] = NULL;
	pthread_mutex_unlock(&devices_lock);
	emu_loop_stop(hw);
	free(hw->ahs);
	pthread_mutex_destroy(&hw->flush_lock);
	pthread_mutex_destroy(&hw->lock);
	free(hw);
}

/* QP numbers are 16-bit on EFA and below max_qp here, so that the
 * provider's table slot (qpn & (roundup(max_qp) - 1)) is the number. */
int emu_hw_add_qp(struct emu_hw *hw, struct emu_qp *qp)
{
	for (uint32_t i = 0; i < EMU_MAX_QP - 1; i++) {
		uint32_t n = hw->next_qpn;

		hw->next_qpn = n + 1 >= EMU_MAX_QP ? 1 : n + 1;
		if (!hw->qps[n]) {
			hw->qps[n] = qp;
			qp->ex.qp_base.qp_num = n;
			return 0;
		}
	}
	return ENOMEM;
}

void emu_hw_remove_qp(struct emu_hw *hw, struct emu_qp *qp)
{
	if (hw->qps[qp->ex.qp_base.qp_num] == qp)
		hw->qps[qp->ex.qp_base.qp_num] = NULL;
}

/* The checks the target's device makes: the key names a region of this
 * device that covers [addr, addr + len) and grants the access. */
struct emu_mr *emu_mr_find(struct emu_hw *hw, uint32_t key, uint64_t addr,
			   uint64_t len, unsigned access)
{
	for (struct emu_mr *m = hw->mrs; m; m = m->next) {
		if (m->mr.rkey != key)
			continue;
		if ((m->access & access) != access || addr < m->iova ||
		    len > m->mr.length || addr - m->iova > m->mr.length - len)
			return NULL;
		return m;
	}
	return NULL;
}

bool emu_lkey_ok(struct emu_hw *hw, const struct ibv_sge *sge, int nsge)
{
	for (int i = 0; i < nsge; i++) {
		struct emu_mr *m = hw->mrs;

		for (; m; m = m->next)
			if (m->mr.lkey == sge[i].lkey)
				break;
		if (!m || sge[i].addr < m->iova ||
		    sge[i].length > m->mr.length ||
		    sge[i].addr - m->iova > m->mr.length - sge[i].length)
			return false;
	}
	return true;
}

/* The receiver's own address-handle number for a sender's GID, which a
 * completion reports as slid; -1 when it has none (slid 0xffff). */
int emu_ahn_of(struct emu_hw *hw, const union ibv_gid *gid)
{
	for (size_t i = 0; i < hw->nah; i++)
		if (!memcmp(hw->ahs[i].gid.raw, gid->raw, sizeof(gid->raw)))
			return hw->ahs[i].ahn;
	return -1;
}

uint16_t emu_ah_add(struct emu_hw *hw, const union ibv_gid *gid)
{
	if (hw->nah == hw->ah_cap) {
		size_t cap = hw->ah_cap ? 2 * hw->ah_cap : 64;
		struct emu_ah_ent *n = realloc(hw->ahs, cap * sizeof(*n));

		if (!n || hw->nah >= EMU_MAX_AH)
			return 0;
		hw->ahs = n;
		hw->ah_cap = cap;
	}
	/* Numbers are 16-bit and never 0 or 0xffff (0xffff is "no AH"). */
	if (hw->next_ahn >= 0xffff)
		hw->next_ahn = 1;
	hw->ahs[hw->nah].gid = *gid;
	hw->ahs[hw->nah].ahn = (uint16_t)hw->next_ahn++;
	return hw->ahs[hw->nah++].ahn;
}

void emu_ah_remove(struct emu_hw *hw, uint16_t ahn)
{
	for (size_t i = 0; i < hw->nah; i++)
		if (hw->ahs[i].ahn == ahn) {
			hw->ahs[i] = hw->ahs[--hw->nah];
			return;
		}
}

/* One line per QP when it is destroyed, for tests that count packets. */
void emu_counters_dump(struct emu_qp *qp)
{
	const char *path = emu_knobs()->counters;
	const struct srd_efa_emu_counters *c = &qp->cnt;
	FILE *f;

	if (!path || !*path)
		return;
	f = fopen(path, "a");
	if (!f)
		return;
	fprintf(f,
		"pid=%d dev=%d qpn=%u tx_pkts=%llu tx_bytes=%llu rx_pkts=%llu rx_bytes=%llu rnr=%llu reads=%llu writes=%llu drops=%llu\n",
		(int)getpid(), qp->hw->index, qp->ex.qp_base.qp_num,
		(unsigned long long)c->tx_pkts, (unsigned long long)c->tx_bytes,
		(unsigned long long)c->rx_pkts, (unsigned long long)c->rx_bytes,
		(unsigned long long)c->rnr, (unsigned long long)c->reads,
		(unsigned long long)c->writes, (unsigned long long)c->drops);
	fclose(f);
}
