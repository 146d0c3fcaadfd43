/* Plumbing of the emulated device's tests (emu_test.h). */
#define _GNU_SOURCE
#include "emu_test.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

void fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "FAIL [%s]: ", who);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}




void open_end(struct end *e, int dev, unsigned rnr_retry, uint16_t flags)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_cq_init_attr_ex ca = { .cqe = 4096, .wc_flags = IBV_WC_STANDARD_FLAGS };
	struct efadv_cq_init_attr ea = { .wc_flags = EFADV_WC_EX_WITH_SGID };
	struct ibv_qp_init_attr_ex qa = { 0 };
	struct efadv_qp_init_attr eq = { .driver_qp_type = EFADV_QP_DRIVER_TYPE_SRD,
					 .flags = flags };
	struct ibv_qp_attr a = { 0 };

	CHECK(list && n > dev, "device %d of %d", dev, n);
	e->ctx = ibv_open_device(list[dev]);
	ibv_free_device_list(list);
	CHECK(e->ctx, "open");
	CHECK(!efadv_query_device(e->ctx, &e->dv, sizeof(e->dv)), "efadv_query_device");
	CHECK(!ibv_query_gid(e->ctx, 1, 0, &e->gid), "gid");
	e->pd = ibv_alloc_pd(e->ctx);
	if (flags)
		ea.wc_flags |= EFADV_WC_EX_WITH_IS_UNSOLICITED;
	e->cq = efadv_create_cq(e->ctx, &ca, &ea, sizeof(ea));
	CHECK(e->pd && e->cq, "pd/cq");
	qa.qp_type = IBV_QPT_DRIVER;
	qa.send_cq = qa.recv_cq = ibv_cq_ex_to_cq(e->cq);
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 256;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 2;
	qa.cap.max_inline_data = 32;
	qa.pd = e->pd;
	qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	qa.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
			    IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_RDMA_WRITE |
			    IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
	e->qp = efadv_create_qp_ex(e->ctx, &qa, &eq, sizeof(eq));
	if (!e->qp && flags)
		exit(77); /* the profile has no unsolicited write receive */
	CHECK(e->qp, "create qp: %s", strerror(errno));
	e->qpx = ibv_qp_to_qp_ex(e->qp);
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qkey = QKEY;
	CHECK(!ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_QKEY), "init");
	a.qp_state = IBV_QPS_RTR;
	CHECK(!ibv_modify_qp(e->qp, &a, IBV_QP_STATE), "rtr");
	a.qp_state = IBV_QPS_RTS;
	a.rnr_retry = (uint8_t)rnr_retry;
	CHECK(!ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_RNR_RETRY), "rts");
}

void close_end(struct end *e)
{
	ibv_destroy_qp(e->qp);
	ibv_destroy_cq(ibv_cq_ex_to_cq(e->cq));
	ibv_dealloc_pd(e->pd);
	ibv_close_device(e->ctx);
}


struct wc poll1(struct end *e)
{
	struct ibv_poll_cq_attr pa = { 0 };
	struct efadv_cq *dv = efadv_cq_from_ibv_cq_ex(e->cq);
	struct wc w = { 0 };

	while (ibv_start_poll(e->cq, &pa) == ENOENT)
		usleep(10);
	w.wr_id = e->cq->wr_id;
	w.status = e->cq->status;
	w.opcode = ibv_wc_read_opcode(e->cq);
	w.vendor = ibv_wc_read_vendor_err(e->cq);
	w.len = ibv_wc_read_byte_len(e->cq);
	w.imm = ntohl(ibv_wc_read_imm_data(e->cq));
	w.src_qp = ibv_wc_read_src_qp(e->cq);
	w.slid = ibv_wc_read_slid(e->cq);
	w.flags = ibv_wc_read_wc_flags(e->cq);
	w.sgid_rc = efadv_wc_read_sgid(dv, &w.sgid);
	w.unsol = dv->wc_is_unsolicited ? efadv_wc_is_unsolicited(dv) : false;
	ibv_end_poll(e->cq);
	return w;
}

struct ibv_ah *ah_to(struct end *e, const union ibv_gid *gid)
{
	struct ibv_ah_attr a = { .is_global = 1, .port_num = 1 };

	a.grh.dgid = *gid;
	return ibv_create_ah(e->pd, &a);
}

int post(struct end *e, struct ibv_ah *ah, const struct addr *to, int op,
		uint64_t wr_id, void *buf, uint32_t len, uint32_t lkey, uint32_t imm,
		uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge s = { (uintptr_t)buf, len, lkey };

	ibv_wr_start(e->qpx);
	e->qpx->wr_id = wr_id;
	switch (op) {
	case 0: ibv_wr_send_imm(e->qpx, htonl(imm)); break;
	case 1: ibv_wr_rdma_write(e->qpx, rkey, raddr); break;
	case 2: ibv_wr_rdma_write_imm(e->qpx, rkey, raddr, htonl(imm)); break;
	default: ibv_wr_rdma_read(e->qpx, rkey, raddr); break;
	}
	ibv_wr_set_ud_addr(e->qpx, ah, to->qpn, QKEY);
	ibv_wr_set_sge_list(e->qpx, 1, &s);
	return ibv_wr_complete(e->qpx);
}

void post_recv(struct end *e, uint64_t id, void *buf, uint32_t len, uint32_t lkey)
{
	struct ibv_sge s = { (uintptr_t)buf, len, lkey };
	struct ibv_recv_wr w = { .wr_id = id, .sg_list = &s, .num_sge = 1 }, *bad;

	CHECK(!ibv_post_recv(e->qp, &w, &bad), "post_recv");
}

void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 9));
}

bool same(const uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (uint8_t)(seed * 131 + i * 7 + (i >> 9)))
			return false;
	return true;
}

static int chan[2];
const char *who = "parent";
pid_t peer_pid;
bool peer_reaped;

void xfer(void *out, void *in, size_t n)
{
	int fd = chan[strcmp(who, "parent") ? 1 : 0];

	CHECK(write(fd, out, n) == (ssize_t)n, "oob write");
	CHECK(read(fd, in, n) == (ssize_t)n, "oob read");
}

void sync_peer(void)
{
	char a = 1, b;

	xfer(&a, &b, 1);
}

/* Runs child() in a forked process; returns after both are done. */
int two(void (*parent)(void), void (*child)(void))
{
	int st;
	pid_t pid;

	CHECK(!socketpair(AF_UNIX, SOCK_STREAM, 0, chan), "socketpair");
	pid = peer_pid = fork();
	if (!pid) {
		who = "child";
		close(chan[0]);
		alarm(120);
		child();
		exit(0);
	}
	close(chan[1]);
	alarm(120);
	parent();
	if (peer_reaped)
		return 0;
	CHECK(waitpid(pid, &st, 0) == pid, "wait");
	if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
		return 77;
	CHECK(WIFEXITED(st) && !WEXITSTATUS(st), "child failed (status %d)", st);
	return 0;
}


void peer_gone(void)
{
	char b;
	int st;

	CHECK(read(chan[0], &b, 1) == 0, "the peer wrote instead of exiting");
	CHECK(waitpid(peer_pid, &st, 0) == peer_pid, "wait");
	peer_reaped = true;
}
