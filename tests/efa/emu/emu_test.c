/* The emulated EFA device's own tests, through verbs as the provider uses
 * them: sends (data, immediates, the MTU, the sender's identity,
 * reordering) and RNR here; RDMA, a vanished peer, several devices and the
 * case table in emu_test_rma.c.
 *   emu_test CASE   (tests/efa/emu-test.sh sets SYSFS_PATH and the profile)
 * Exit 0 pass, 1 fail, 77 when the case does not apply to the profile. */
#define _GNU_SOURCE
#include "emu_test.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static unsigned long knob(const char *name)
{
	const char *v = getenv(name);

	return v ? strtoul(v, NULL, 10) : 0;
}

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* ---- send: data, immediates, sizes, source identity, reordering ---- */

#define NSEND 64
static struct end E;

void send_child(void)
{
	static uint8_t buf[NSEND][MTU];
	struct addr me = { 0 }, peer;
	struct ibv_mr *mr;
	int order_breaks = 0, last = -1;
	struct ibv_ah *ah;

	open_end(&E, 0, 7, 0);
	mr = ibv_reg_mr(E.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	for (int i = 0; i < NSEND; i++)
		post_recv(&E, 1000 + (unsigned)i, buf[i], MTU, mr->lkey);
	me.gid = E.gid;
	me.qpn = E.qp->qp_num;
	xfer(&me, &peer, sizeof(me));
	for (int i = 0; i < NSEND; i++) {
		struct wc w = poll1(&E);
		unsigned k = w.imm, len = 1 + (k * 139) % MTU;

		CHECK(!w.status && w.opcode == IBV_WC_RECV, "recv %d: status %d", i, w.status);
		CHECK(k < NSEND && w.len == len, "imm %u len %u", k, w.len);
		CHECK(w.flags & IBV_WC_WITH_IMM, "no imm flag");
		CHECK(same(buf[w.wr_id - 1000], len, k), "data of message %u", k);
		/* No address handle for the sender: slid says so, sgid names it. */
		CHECK(w.slid == 0xffff && !w.sgid_rc &&
			      !memcmp(&w.sgid, &peer.gid, sizeof(w.sgid)) &&
			      w.src_qp == peer.qpn,
		      "source of message %u: slid %u", k, w.slid);
		if ((int)k < last)
			order_breaks++;
		last = (int)k;
	}
	CHECK(order_breaks > 0, "64 sends arrived in order with reordering on");
	ah = ah_to(&E, &peer.gid);
	struct efadv_ah_attr aa;
	CHECK(!efadv_query_ah(ah, &aa, sizeof(aa)), "query ah");
	post_recv(&E, 7, buf[0], MTU, mr->lkey);
	sync_peer();
	struct wc w = poll1(&E);
	CHECK(!w.status && w.slid == aa.ahn && w.sgid_rc == -ENOENT,
	      "with an AH slid is its number (%u, want %u), no sgid", w.slid, aa.ahn);
	sync_peer();
	ibv_destroy_ah(ah);
	ibv_dereg_mr(mr);
	close_end(&E);
}

void send_parent(void)
{
	static uint8_t buf[NSEND][MTU + 1];
	struct addr me = { 0 }, peer;
	struct srd_efa_emu_counters c;
	struct ibv_mr *mr;
	struct ibv_ah *ah;
	double t0;

	/* rnr_retry 7: the RNR knob's refusals are retried until taken. */
	open_end(&E, 0, 7, 0);
	mr = ibv_reg_mr(E.pd, buf, sizeof(buf), 0);
	me.gid = E.gid;
	me.qpn = E.qp->qp_num;
	xfer(&me, &peer, sizeof(me));
	ah = ah_to(&E, &peer.gid);
	t0 = now_ms();
	CHECK(post(&E, ah, &peer, 0, 1, buf[0], MTU + 1, mr->lkey, 0, 0, 0) == EINVAL,
	      "a send beyond the MTU was taken");
	for (unsigned i = 0; i < NSEND; i++) {
		unsigned len = 1 + (i * 139) % MTU;

		fill(buf[i], len, i);
		CHECK(!post(&E, ah, &peer, 0, i, buf[i], len, mr->lkey, i, 0, 0), "post %u", i);
	}
	for (int i = 0; i < NSEND; i++) {
		struct wc w = poll1(&E);

		CHECK(!w.status && w.opcode == IBV_WC_SEND, "send %d: %d/%u", i, w.status, w.vendor);
	}
	if (knob("SRD_EFA_EMU_DELAY_US"))
		CHECK(now_ms() - t0 >= knob("SRD_EFA_EMU_DELAY_US") / 1000,
		      "64 sends took %.1f ms with a delay of %lu us", now_ms() - t0,
		      knob("SRD_EFA_EMU_DELAY_US"));
	sync_peer();
	fill(buf[0], 10, 5);
	CHECK(!post(&E, ah, &peer, 0, 99, buf[0], 10, mr->lkey, 5, 0, 0), "post");
	CHECK(!poll1(&E).status, "send with AH");
	sync_peer();
	srd_efa_emu_qp_counters(E.qp, &c);
	/* Each RNR is a packet sent again; a drop is re-sent as one. */
	CHECK(c.tx_pkts == NSEND + 1 + c.rnr, "tx_pkts %llu, want %d + %llu RNRs",
	      (unsigned long long)c.tx_pkts, NSEND + 1, (unsigned long long)c.rnr);
	CHECK(!knob("SRD_EFA_EMU_DROP_PM") || c.drops > 0, "the drop knob dropped nothing");
	CHECK(!knob("SRD_EFA_EMU_RNR_PM") || c.rnr > 0, "the RNR knob refused nothing");
	CHECK(knob("SRD_EFA_EMU_RNR_PM") || !c.rnr, "%llu RNRs with receives posted",
	      (unsigned long long)c.rnr);
	ibv_destroy_ah(ah);
	ibv_dereg_mr(mr);
	close_end(&E);
}

/* ---- rnr: refused without a receive, as often as rnr_retry says ---- */

unsigned rnr_retry_arg;

void rnr_child(void)
{
	static uint8_t buf[MTU];
	struct addr me = { 0 }, peer;
	struct ibv_mr *mr;

	open_end(&E, 0, 3, 0);
	mr = ibv_reg_mr(E.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	me.gid = E.gid;
	me.qpn = E.qp->qp_num;
	xfer(&me, &peer, sizeof(me));
	sync_peer(); /* the parent's send with no retry failed */
	usleep(20000);
	post_recv(&E, 1, buf, MTU, mr->lkey);
	CHECK(!poll1(&E).status, "the retried send arrived");
	sync_peer();
	ibv_dereg_mr(mr);
	close_end(&E);
}

void rnr_parent(void)
{
	static uint8_t buf[64];
	struct addr me = { 0 }, peer;
	struct srd_efa_emu_counters c;
	struct ibv_mr *mr;
	struct ibv_ah *ah;
	struct wc w;
	struct ibv_qp_attr a = { .rnr_retry = 7 };

	open_end(&E, 0, rnr_retry_arg, 0);
	mr = ibv_reg_mr(E.pd, buf, sizeof(buf), 0);
	me.gid = E.gid;
	me.qpn = E.qp->qp_num;
	xfer(&me, &peer, sizeof(me));
	ah = ah_to(&E, &peer.gid);
	CHECK(!post(&E, ah, &peer, 0, 1, buf, 64, mr->lkey, 0, 0, 0), "post");
	w = poll1(&E);
	CHECK(w.status == IBV_WC_RNR_RETRY_EXC_ERR && w.vendor == 10,
	      "no receive posted: status %d vendor %u, want RNR (10)", w.status, w.vendor);
	srd_efa_emu_qp_counters(E.qp, &c);
	CHECK(c.rnr == rnr_retry_arg + 1, "%llu RNRs, want rnr_retry + 1 = %u",
	      (unsigned long long)c.rnr, rnr_retry_arg + 1);
	CHECK(!ibv_modify_qp(E.qp, &a, IBV_QP_RNR_RETRY), "rnr_retry 7");
	CHECK(!post(&E, ah, &peer, 0, 2, buf, 64, mr->lkey, 0, 0, 0), "post");
	sync_peer();
	w = poll1(&E);
	CHECK(!w.status && w.wr_id == 2, "rnr_retry 7 retries until a receive is posted: %d/%u",
	      w.status, w.vendor);
	sync_peer();
	ibv_destroy_ah(ah);
	ibv_dereg_mr(mr);
	close_end(&E);
}
