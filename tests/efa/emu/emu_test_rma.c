/* The emulated device's tests of RDMA (write, write with immediate,
 * unsolicited receive, read; keys and bounds checked at the target), of a
 * vanished peer, of several devices in one process, and the case table. */
#include "emu_test.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct end E;
static uint8_t *region;

/* The target: a region of BIG bytes with a guard of 4 KiB either side that
 * no failed access may touch. */
static void target(uint16_t qp_flags, unsigned access, bool imm_recv)
{
	static uint8_t rbuf[64];
	struct addr me = { 0 }, peer;
	struct ibv_mr *mr, *rmr;
	uint8_t *all = malloc(BIG + 8192);

	CHECK(all, "malloc");
	region = all + 4096;
	open_end(&E, 1, 3, qp_flags);
	memset(all, 0xee, BIG + 8192);
	fill(region, BIG, 3);
	mr = ibv_reg_mr(E.pd, region, BIG, access | IBV_ACCESS_LOCAL_WRITE);
	rmr = ibv_reg_mr(E.pd, rbuf, sizeof(rbuf), IBV_ACCESS_LOCAL_WRITE);
	if (imm_recv)
		post_recv(&E, 42, rbuf, sizeof(rbuf), rmr->lkey);
	me.gid = E.gid;
	me.qpn = E.qp->qp_num;
	me.rkey = mr->rkey;
	me.addr = (uintptr_t)region;
	me.len = BIG;
	xfer(&me, &peer, sizeof(me));
	if (qp_flags || imm_recv) {
		struct wc w = poll1(&E);

		CHECK(!w.status && w.opcode == IBV_WC_RECV_RDMA_WITH_IMM && w.imm == 77 &&
			      w.len == BIG,
		      "write with immediate: status %d opcode %d imm %u len %u", w.status,
		      w.opcode, w.imm, w.len);
		CHECK(qp_flags ? w.unsol : (!w.unsol && w.wr_id == 42),
		      "unsolicited %d wr_id %llu", w.unsol, (unsigned long long)w.wr_id);
	}
	sync_peer(); /* the initiator is done */
	if (access & IBV_ACCESS_REMOTE_WRITE)
		CHECK(same(region, BIG, 9), "written data");
	for (int i = 0; i < 4096; i++)
		CHECK(all[i] == 0xee && all[BIG + 4096 + i] == 0xee,
		      "a refused access wrote outside the region");
	sync_peer();
	ibv_dereg_mr(rmr);
	ibv_dereg_mr(mr);
	close_end(&E);
	free(all);
}

static void init_side(struct addr *peer, struct ibv_ah **ah, struct ibv_mr **mr,
		      uint8_t **buf)
{
	struct addr me = { 0 };

	*buf = malloc(BIG);
	CHECK(*buf, "malloc");
	open_end(&E, 2, 3, 0);
	*mr = ibv_reg_mr(E.pd, *buf, BIG, IBV_ACCESS_LOCAL_WRITE);
	me.gid = E.gid;
	me.qpn = E.qp->qp_num;
	xfer(&me, peer, sizeof(me));
	*ah = ah_to(&E, &peer->gid);
}

static void expect(uint32_t vendor, const char *what)
{
	struct wc w = poll1(&E);

	CHECK(w.vendor == vendor && (vendor ? w.status != 0 : w.status == 0),
	      "%s: status %d vendor %u, want vendor %u", what, w.status, w.vendor, vendor);
}

static void writer(bool imm)
{
	struct addr peer;
	struct ibv_ah *ah;
	struct ibv_mr *mr;
	uint8_t *buf;
	struct srd_efa_emu_counters c;

	init_side(&peer, &ah, &mr, &buf);
	fill(buf, BIG, 9);
	/* Refused by the target, which writes nothing: a wrong key, one byte
	 * past the end, one byte before the start. */
	CHECK(!post(&E, ah, &peer, 1, 1, buf, 64, mr->lkey, 0, peer.addr, peer.rkey ^ 0x100),
	      "post");
	expect(7, "write with a wrong key");
	CHECK(!post(&E, ah, &peer, 1, 2, buf, 64, mr->lkey, 0, peer.addr + BIG - 63, peer.rkey),
	      "post");
	expect(7, "write past the end");
	CHECK(!post(&E, ah, &peer, 1, 3, buf, 64, mr->lkey, 0, peer.addr - 1, peer.rkey), "post");
	expect(7, "write before the start");
	/* The region grants remote write only. */
	CHECK(!post(&E, ah, &peer, 3, 5, buf, 64, mr->lkey, 0, peer.addr, peer.rkey), "post");
	expect(7, "read of a region without remote read");
	CHECK(!post(&E, ah, &peer, imm ? 2 : 1, 4, buf, BIG, mr->lkey, 77, peer.addr, peer.rkey),
	      "post");
	expect(0, "write");
	srd_efa_emu_qp_counters(E.qp, &c);
	CHECK(c.writes == 4 && c.tx_bytes >= BIG, "counters: writes %llu bytes %llu",
	      (unsigned long long)c.writes, (unsigned long long)c.tx_bytes);
	sync_peer();
	sync_peer();
	ibv_destroy_ah(ah);
	ibv_dereg_mr(mr);
	close_end(&E);
	free(buf);
}

static void reader(void)
{
	struct addr peer;
	struct ibv_ah *ah;
	struct ibv_mr *mr;
	uint8_t *buf;

	init_side(&peer, &ah, &mr, &buf);
	memset(buf, 0, BIG);
	CHECK(!post(&E, ah, &peer, 3, 1, buf, 64, mr->lkey, 0, peer.addr + BIG - 1, peer.rkey),
	      "post");
	expect(7, "read past the end");
	CHECK(!post(&E, ah, &peer, 3, 2, buf, BIG, mr->lkey, 0, peer.addr, peer.rkey), "post");
	expect(0, "read");
	CHECK(same(buf, BIG, 3), "read data");
	sync_peer();
	sync_peer();
	ibv_destroy_ah(ah);
	ibv_dereg_mr(mr);
	close_end(&E);
	free(buf);
}

static bool has(uint32_t cap)
{
	struct end e;

	open_end(&e, 0, 3, 0);
	close_end(&e);
	return e.dv.device_caps & cap;
}

/* A profile without the operation refuses it at post. */
static int refused(int op)
{
	struct addr peer = { .qpn = 1 };
	struct ibv_ah *ah;
	static uint8_t buf[64];
	struct ibv_mr *mr;
	int rc;

	open_end(&E, 0, 3, 0);
	mr = ibv_reg_mr(E.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	ah = ah_to(&E, &E.gid);
	rc = post(&E, ah, &peer, op, 1, buf, sizeof(buf), mr->lkey, 0, 0, 1);
	CHECK(rc == EINVAL, "an operation the profile lacks was taken (%d)", rc);
	ibv_destroy_ah(ah);
	ibv_dereg_mr(mr);
	close_end(&E);
	return 77;
}

static void w_target(void) { target(0, IBV_ACCESS_REMOTE_WRITE, false); }
static void wi_target(void) { target(0, IBV_ACCESS_REMOTE_WRITE, true); }
static void wu_target(void) { target(EFADV_QP_FLAGS_UNSOLICITED_WRITE_RECV, IBV_ACCESS_REMOTE_WRITE, false); }
static void r_target(void) { target(0, IBV_ACCESS_REMOTE_READ, false); }
static void w_init(void) { writer(false); }
static void wi_init(void) { writer(true); }

/* ---- vanish: a peer whose process is gone is unreachable ---- */

static void vanish_child(void)
{
	struct addr me = { 0 }, peer;

	open_end(&E, 0, 3, 0);
	me.gid = E.gid;
	me.qpn = E.qp->qp_num;
	xfer(&me, &peer, sizeof(me));
	_exit(0); /* no clean-up: as if killed */
}

static void vanish_parent(void)
{
	struct addr me = { 0 }, peer;
	static uint8_t buf[64];
	struct ibv_mr *mr;
	struct ibv_ah *ah;

	open_end(&E, 0, 3, 0);
	mr = ibv_reg_mr(E.pd, buf, sizeof(buf), 0);
	me.gid = E.gid;
	me.qpn = E.qp->qp_num;
	xfer(&me, &peer, sizeof(me));
	peer_gone();
	ah = ah_to(&E, &peer.gid);
	CHECK(!post(&E, ah, &peer, 0, 1, buf, 64, mr->lkey, 0, 0, 0), "post");
	expect(15, "send to a vanished peer");
	ibv_destroy_ah(ah);
	ibv_dereg_mr(mr);
	close_end(&E);
}

/* ---- dark: a device that stops answering (SRD_EFA_EMU_VANISH_AFTER=1)
 * in a live process is unreachable too ---- */

static void dark_child(void)
{
	static uint8_t buf[64];
	struct addr me = { 0 }, peer;
	struct ibv_mr *mr;

	open_end(&E, 0, 3, 0);
	mr = ibv_reg_mr(E.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	post_recv(&E, 1, buf, sizeof(buf), mr->lkey);
	me.gid = E.gid;
	me.qpn = E.qp->qp_num;
	xfer(&me, &peer, sizeof(me));
	CHECK(!poll1(&E).status, "the last packet before going dark");
	sync_peer();
	ibv_dereg_mr(mr);
	close_end(&E);
}

static void dark_parent(void)
{
	struct addr me = { 0 }, peer;
	static uint8_t buf[64];
	struct ibv_mr *mr;
	struct ibv_ah *ah;

	open_end(&E, 0, 3, 0);
	mr = ibv_reg_mr(E.pd, buf, sizeof(buf), 0);
	me.gid = E.gid;
	me.qpn = E.qp->qp_num;
	xfer(&me, &peer, sizeof(me));
	ah = ah_to(&E, &peer.gid);
	CHECK(!post(&E, ah, &peer, 0, 1, buf, 64, mr->lkey, 0, 0, 0), "post");
	expect(15, "send to a device gone dark");
	sync_peer();
	ibv_destroy_ah(ah);
	ibv_dereg_mr(mr);
	close_end(&E);
}

/* ---- devices: several per process, one loop thread each ---- */

/* The emulator's loop threads in this process (named efa-emu-N). */
static int threads(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/task");

	for (struct dirent *e; d && (e = readdir(d));) {
		char path[300], comm[32] = "";
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		f = fopen(path, "r");
		if (f && fgets(comm, sizeof(comm), f) && !strncmp(comm, "efa-emu-", 8))
			n++;
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
	return n;
}

static int devices(void)
{
	struct end e[4], extra[4];
	static uint8_t buf[2][64];
	struct addr to;
	struct ibv_mr *mr[2];
	struct ibv_ah *ah;
	int base = threads();

	CHECK(base == 0, "%d loops before any device is open", base);
	for (int i = 0; i < 4; i++)
		open_end(&e[i], i, 3, 0);
	for (int i = 0; i < 4; i++)
		open_end(&extra[i], i, 3, 0); /* a second QP on each device */
	CHECK(threads() == base + 4, "%d threads for 4 devices and 8 QPs, want %d",
	      threads(), base + 4);
	for (int i = 0; i < 4; i++)
		CHECK(memcmp(&e[i].gid, &extra[i].gid, sizeof(e[i].gid)) == 0 &&
			      (i == 0 || memcmp(&e[i].gid, &e[0].gid, sizeof(e[i].gid))),
		      "a GID per device");
	/* Device 0 to device 3 of the same process. */
	mr[0] = ibv_reg_mr(e[0].pd, buf[0], 64, 0);
	mr[1] = ibv_reg_mr(e[3].pd, buf[1], 64, IBV_ACCESS_LOCAL_WRITE);
	post_recv(&e[3], 5, buf[1], 64, mr[1]->lkey);
	to.gid = e[3].gid;
	to.qpn = e[3].qp->qp_num;
	ah = ah_to(&e[0], &to.gid);
	fill(buf[0], 64, 1);
	CHECK(!post(&e[0], ah, &to, 0, 1, buf[0], 64, mr[0]->lkey, 0, 0, 0), "post");
	CHECK(!poll1(&e[0]).status && !poll1(&e[3]).status && same(buf[1], 64, 1),
	      "device 0 to device 3");
	ibv_destroy_ah(ah);
	ibv_dereg_mr(mr[0]);
	ibv_dereg_mr(mr[1]);
	for (int i = 0; i < 4; i++) {
		close_end(&extra[i]);
		close_end(&e[i]);
	}
	CHECK(threads() == base, "loops left after close: %d threads", threads());
	return 0;
}

int main(int argc, char **argv)
{
	const char *c = argc > 1 ? argv[1] : "";
	bool rd = false, wr = false, un = false;

	if (!strcmp(c, "devices"))
		return devices();
	rd = has(EFADV_DEVICE_ATTR_CAPS_RDMA_READ);
	wr = has(EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE);
	un = has(EFADV_DEVICE_ATTR_CAPS_UNSOLICITED_WRITE_RECV);
	if (!strcmp(c, "send"))
		return two(send_parent, send_child);
	if (!strcmp(c, "rnr0") || !strcmp(c, "rnr3")) {
		rnr_retry_arg = c[3] - '0';
		return two(rnr_parent, rnr_child);
	}
	if (!strcmp(c, "write"))
		return wr ? two(w_target, w_init) : refused(1);
	if (!strcmp(c, "write-imm"))
		return wr ? two(wi_target, wi_init) : refused(2);
	if (!strcmp(c, "unsolicited"))
		return un ? two(wu_target, wi_init) : 77;
	if (!strcmp(c, "read"))
		return rd ? two(r_target, reader) : refused(3);
	if (!strcmp(c, "vanish"))
		return two(vanish_parent, vanish_child);
	if (!strcmp(c, "dark"))
		return getenv("SRD_EFA_EMU_VANISH_AFTER") ? two(dark_parent, dark_child) : 77;
	fprintf(stderr, "usage: %s send|rnr0|rnr3|write|write-imm|unsolicited|read|vanish|dark|devices\n",
		argv[0]);
	return 2;
}
