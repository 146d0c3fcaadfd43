/* What a device does with a packet that arrived: the target's checks and
 * placements (sends into posted receives, writes into registered memory,
 * reads served) and the initiator's side of answers (acks, read data, RNR).
 * Called by the loop with hw->lock held. */
#define _GNU_SOURCE
#include "emu.h"
#include "wire.h"

#include <string.h>

#define RNR_BACKOFF_NS 100000ull /* the device's own RNR retry timer */

static struct emu_qp *target_qp(struct emu_hw *hw, const struct pkt *h)
{
	struct emu_qp *qp = h->dst_qpn < EMU_MAX_QP ? hw->qps[h->dst_qpn] : NULL;

	/* A QP not yet ready to receive, or the wrong qkey, is no QP. */
	if (qp && (qp->ex.qp_base.state < IBV_QPS_RTR || qp->qkey != h->qkey))
		return NULL;
	return qp;
}

static void recv_cqe(struct emu_hw *hw, struct emu_qp *qp, const struct pkt *h,
		     struct emu_cqe *e)
{
	int ahn = emu_ahn_of(hw, &h->src);

	e->qp_num = qp->ex.qp_base.qp_num;
	e->src_qp = h->src_qpn;
	e->slid = ahn < 0 ? 0xffff : (uint32_t)ahn;
	e->sgid = h->src;
	e->imm = h->imm;
	if (h->has_imm)
		e->wc_flags |= IBV_WC_WITH_IMM;
	emu_done_add(hw, qp, qp->rcq, e);
}

/* Sends land in the oldest posted receive, or are refused (RNR) when none is
 * posted or the RNR knob says so. */
static void rx_send(struct emu_hw *hw, const struct pkt *h, const uint8_t *data)
{
	struct emu_qp *qp = target_qp(hw, h);
	struct emu_cqe e = { .opcode = IBV_WC_RECV, .byte_len = h->len };
	struct emu_recv r;
	uint64_t room = 0;

	if (!qp) {
		emu_ack(hw, h, EMU_BAD_DEST_QPN);
		return;
	}
	qp->cnt.rx_pkts++;
	qp->cnt.rx_bytes += h->len;
	if ((emu_knobs()->rnr_pm && emu_rand(1000) < emu_knobs()->rnr_pm) ||
	    !emu_rq_pop(qp, &r)) {
		emu_ack(hw, h, EMU_RNR);
		return;
	}
	for (int i = 0; i < r.nsge; i++)
		room += r.sge[i].length;
	e.wr_id = r.wr_id;
	if (room < h->len) {
		e.status = IBV_WC_LOC_LEN_ERR;
		e.vendor_err = EMU_LOCAL_BAD_LENGTH;
		recv_cqe(hw, qp, h, &e);
		emu_ack(hw, h, EMU_REMOTE_BAD_LENGTH);
		return;
	}
	if (!emu_lkey_ok(hw, r.sge, r.nsge)) {
		e.status = IBV_WC_LOC_PROT_ERR;
		e.vendor_err = EMU_LOCAL_INVALID_LKEY;
		recv_cqe(hw, qp, h, &e);
		emu_ack(hw, h, 12); /* REMOTE_ERROR_BAD_STATUS */
		return;
	}
	emu_sge_copy(r.sge, r.nsge, 0, (uint8_t *)data, h->len, true);
	recv_cqe(hw, qp, h, &e);
	emu_ack(hw, h, EMU_OK);
}

/* Every chunk is checked against the whole write's range, so all chunks of
 * a write share one verdict; the last one answers. */
static void rx_write(struct emu_hw *hw, const struct pkt *h, const uint8_t *data)
{
	struct emu_qp *qp = target_qp(hw, h);
	struct emu_mr *m = emu_mr_find(hw, h->rkey, h->raddr, h->total,
				       IBV_ACCESS_REMOTE_WRITE);
	struct emu_cqe e = { .opcode = IBV_WC_RECV_RDMA_WITH_IMM,
			     .byte_len = (uint32_t)h->total };
	struct emu_recv r;

	if (qp) {
		qp->cnt.rx_pkts++;
		qp->cnt.rx_bytes += h->len;
	}
	if (qp && m)
		emu_place((uint8_t *)m->mr.addr + (h->raddr - m->iova) + h->offset,
			  data, h->len);
	if (h->offset + h->len < h->total)
		return;
	if (!qp) {
		emu_ack(hw, h, EMU_BAD_DEST_QPN);
		return;
	}
	if (!m) {
		emu_ack(hw, h, EMU_BAD_ADDRESS);
		return;
	}
	if (h->has_imm) {
		if (qp->unsolicited_write_recv) {
			e.unsolicited = true;
		} else if (!emu_rq_pop(qp, &r)) {
			/* The data is in place; the retry writes it again. */
			emu_ack(hw, h, EMU_RNR);
			return;
		} else {
			e.wr_id = r.wr_id;
		}
		recv_cqe(hw, qp, h, &e);
	}
	emu_ack(hw, h, EMU_OK);
}

static void rx_read_req(struct emu_hw *hw, const struct pkt *h)
{
	struct emu_qp *qp = target_qp(hw, h);
	struct pkt d = *h;

	if (!qp) {
		emu_ack(hw, h, EMU_BAD_DEST_QPN);
		return;
	}
	qp->cnt.rx_pkts++;
	if (!emu_mr_find(hw, h->rkey, h->raddr, h->total, IBV_ACCESS_REMOTE_READ)) {
		emu_ack(hw, h, EMU_BAD_ADDRESS);
		return;
	}
	d.type = PK_READ_DATA;
	d.len = 0;
	emu_resp_push(hw, &h->src, &d);
}

static void rx_read_data(struct emu_hw *hw, const struct pkt *h,
			 const uint8_t *data)
{
	struct emu_op *op = emu_inflight_find(hw, h->op_id);

	if (!op || op->kind != EMU_OP_READ || h->offset + h->len > op->len)
		return; /* late data of an op its QP's destruction forgot */
	op->qp->cnt.rx_pkts++;
	op->qp->cnt.rx_bytes += h->len;
	/* The destination is checked as the data lands: it may have been
	 * deregistered (and freed) since the post. */
	if (!emu_lkey_ok(hw, op->sge, op->nsge)) {
		emu_inflight_remove(hw, op);
		emu_complete(op, EMU_LOCAL_INVALID_LKEY);
		return;
	}
	emu_sge_copy(op->sge, op->nsge, h->offset, (uint8_t *)data, h->len, true);
	op->got += h->len;
	if (op->got >= op->len) {
		emu_inflight_remove(hw, op);
		emu_complete(op, EMU_OK);
	}
}

/* RNR is retried by the device as often as the QP's rnr_retry says (7:
 * forever), then reported. */
static void rx_ack(struct emu_hw *hw, const struct pkt *h, uint64_t now)
{
	struct emu_op *op = emu_inflight_find(hw, h->op_id);

	if (!op)
		return;
	emu_inflight_remove(hw, op);
	if (h->status != EMU_RNR) {
		emu_complete(op, h->status);
		return;
	}
	op->qp->cnt.rnr++;
	if (!op->rnr_left) {
		emu_complete(op, EMU_RNR);
		return;
	}
	if (op->rnr_left != UINT32_MAX)
		op->rnr_left--;
	op->sent = 0;
	op->due_ns = now + RNR_BACKOFF_NS;
	emu_sched_append(hw, op);
}

void emu_rx(struct emu_hw *hw, const struct pkt *h, const uint8_t *payload,
	    uint64_t now)
{
	switch (h->type) {
	case PK_SEND:
		if (h->len <= EMU_MTU)
			rx_send(hw, h, payload);
		break;
	case PK_WRITE:
		rx_write(hw, h, payload);
		break;
	case PK_READ_REQ:
		rx_read_req(hw, h);
		break;
	case PK_READ_DATA:
		rx_read_data(hw, h, payload);
		break;
	case PK_ACK:
		rx_ack(hw, h, now);
		break;
	default: /* PK_PING: its arrival was the answer */
		break;
	}
}
