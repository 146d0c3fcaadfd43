/* Emission: packets out of a device's socket, each op's or answer's in
 * order, never blocking (a full peer queue is retried by the loop). */
#define _GNU_SOURCE
#include "emu.h"
#include "wire.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>

socklen_t emu_addr_of(const union ibv_gid *gid, struct sockaddr_un *a)
{
	int n;

	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "srd-efa-emu/");
	for (int i = 0; i < 16; i++)
		n += snprintf(a->sun_path + 1 + n, sizeof(a->sun_path) - 1 - (size_t)n,
			      "%02x", gid->raw[i]);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

int emu_emit(struct emu_hw *hw, const union ibv_gid *to, struct pkt *h,
		const void *payload)
{
	struct sockaddr_un a;
	struct iovec iov[2] = { { h, sizeof(*h) }, { (void *)payload, h->len } };
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = payload ? 2 : 1 };

	if (hw->sock < 0)
		return ENOTCONN;
	m.msg_name = &a;
	m.msg_namelen = emu_addr_of(to, &a);
	h->src = hw->gid;
	if (sendmsg(hw->sock, &m, MSG_DONTWAIT) >= 0)
		return 0;
	return errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS
		       ? EAGAIN
		       : errno;
}

void emu_sge_copy(const struct ibv_sge *sge, int nsge, uint64_t off,
		     uint8_t *buf, uint64_t n, bool into_sge)
{
	for (int i = 0; i < nsge && n; i++) {
		uint64_t l = sge[i].length, take;
		uint8_t *p = (uint8_t *)(uintptr_t)sge[i].addr;

		if (off >= l) {
			off -= l;
			continue;
		}
		take = l - off < n ? l - off : n;
		if (into_sge)
			memcpy(p + off, buf, take);
		else
			memcpy(buf, p + off, take);
		buf += take;
		n -= take;
		off = 0;
	}
}

void emu_place(uint8_t *dst, const uint8_t *src, uint64_t n)
{
	while (n) {
		uint64_t block = 128 - ((uintptr_t)dst & 127);
		uint64_t take = block < n ? block : n;

		memcpy(dst, src, take);
		__atomic_signal_fence(__ATOMIC_RELEASE);
		dst += take;
		src += take;
		n -= take;
	}
}

static int emit_op(struct emu_hw *hw, struct emu_op *op)
{
	struct pkt h = { .src_qpn = op->qp->ex.qp_base.qp_num,
			 .dst_qpn = op->dqpn, .qkey = op->qkey,
			 .has_imm = op->has_imm, .imm = op->imm,
			 .rkey = op->rkey, .raddr = op->raddr,
			 .total = op->len, .op_id = op->id };
	uint8_t *buf = hw->txbuf;
	int err;

	if (op->kind == EMU_OP_READ) {
		h.type = PK_READ_REQ;
		if ((err = emu_emit(hw, &op->dgid, &h, NULL)))
			return err == EAGAIN ? EAGAIN : EMU_UNREACH_REMOTE;
		op->qp->cnt.tx_pkts++;
		op->sent = op->len;
		return 0;
	}
	h.type = op->kind == EMU_OP_SEND ? PK_SEND : PK_WRITE;
	/* The source is read now, as a device reads it: a region deregistered
	 * since the post fails the op (its memory may be gone). */
	if (!op->is_inline && !emu_lkey_ok(hw, op->sge, op->nsge))
		return EMU_LOCAL_INVALID_LKEY;
	do {
		uint64_t n = op->len - op->sent;

		if (n > EMU_CHUNK)
			n = EMU_CHUNK;
		h.offset = op->sent;
		h.len = (uint32_t)n;
		if (op->is_inline)
			memcpy(buf, op->inl, n);
		else
			emu_sge_copy(op->sge, op->nsge, op->sent, buf, n, false);
		if ((err = emu_emit(hw, &op->dgid, &h, buf)))
			return err == EAGAIN ? EAGAIN : EMU_UNREACH_REMOTE;
		op->qp->cnt.tx_pkts++;
		op->qp->cnt.tx_bytes += n;
		op->sent += n;
	} while (op->sent < op->len);
	return 0;
}

void emu_resp_push(struct emu_hw *hw, const union ibv_gid *to,
		      const struct pkt *h)
{
	struct emu_resp *r = calloc(1, sizeof(*r));

	if (!r)
		return; /* the peer's probe finds the op unanswered */
	r->to = *to;
	r->h = *h;
	if (hw->resp_tail)
		hw->resp_tail->next = r;
	else
		hw->resp = r;
	hw->resp_tail = r;
}

void emu_ack(struct emu_hw *hw, const struct pkt *in, uint16_t status)
{
	struct pkt h = { .type = PK_ACK, .status = status, .op_id = in->op_id };

	emu_resp_push(hw, &in->src, &h);
}

static int emit_resp(struct emu_hw *hw, struct emu_resp *r)
{
	uint8_t *buf = hw->txbuf;
	struct emu_mr *m;
	int err;

	if (r->h.type != PK_READ_DATA)
		return emu_emit(hw, &r->to, &r->h, NULL);
	m = emu_mr_find(hw, r->h.rkey, r->h.raddr, r->h.total,
			IBV_ACCESS_REMOTE_READ);
	if (!m) {
		struct pkt h = { .type = PK_ACK, .status = EMU_BAD_ADDRESS,
				 .op_id = r->h.op_id };

		return emu_emit(hw, &r->to, &h, NULL);
	}
	do {
		uint64_t n = r->h.total - r->sent;
		struct pkt h = r->h;

		if (n > EMU_CHUNK)
			n = EMU_CHUNK;
		memcpy(buf, (uint8_t *)m->mr.addr + (r->h.raddr - m->iova) + r->sent, n);
		h.offset = r->sent;
		h.len = (uint32_t)n;
		if ((err = emu_emit(hw, &r->to, &h, buf)))
			return err;
		r->sent += n;
	} while (r->sent < r->h.total);
	return 0;
}

bool emu_emit_all(struct emu_hw *hw, uint64_t now)
{
	while (hw->resp) {
		struct emu_resp *r = hw->resp;

		if (emit_resp(hw, r) == EAGAIN)
			return true;
		/* sent, or the peer is gone and wants nothing */
		hw->resp = r->next;
		if (!hw->resp)
			hw->resp_tail = NULL;
		free(r);
	}
	for (struct emu_op **pp = &hw->sched, *prev = NULL; *pp;) {
		struct emu_op *op = *pp;
		int err;

		if (op->due_ns > now) {
			prev = op;
			pp = &op->next;
			continue;
		}
		if (!op->sent && !op->emitted_ns) {
			if (op->kind == EMU_OP_READ)
				op->qp->cnt.reads++;
			else if (op->kind == EMU_OP_WRITE)
				op->qp->cnt.writes++;
		}
		err = emit_op(hw, op);
		if (err == EAGAIN)
			return true;
		*pp = op->next;
		if (hw->sched_tail == op)
			hw->sched_tail = prev;
		if (err) {
			emu_complete(op, (uint32_t)err);
			continue;
		}
		op->emitted_ns = now;
		op->hash_next = hw->inflight[op->id & 255];
		hw->inflight[op->id & 255] = op;
	}
	return false;
}
