/* Queue pairs: creation as the provider asks (efadv SRD, or UD for its dgram
 * endpoints), state changes, the extended post API (wr_start ..
 * wr_complete), receives, and the in-order query. */
#define _GNU_SOURCE
#include "emu.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static struct emu_qp *qp_of(struct ibv_qp_ex *ex)
{
	return (struct emu_qp *)ex;
}

static void wr_start(struct ibv_qp_ex *ex)
{
	struct emu_qp *qp = qp_of(ex);

	qp->batch = qp->batch_tail = NULL;
	qp->batch_bad = false;
}

/* Each wr_* opens a request; the setters that follow fill the newest. */
static struct emu_op *op_open(struct ibv_qp_ex *ex, enum emu_op_kind kind)
{
	struct emu_qp *qp = qp_of(ex);
	struct emu_op *op = calloc(1, sizeof(*op));

	if (!op) {
		qp->batch_bad = true;
		return NULL;
	}
	op->qp = qp;
	op->kind = kind;
	op->wr_id = ex->wr_id;
	op->rnr_left = qp->rnr_retry == 7 ? UINT32_MAX : qp->rnr_retry;
	if (qp->batch_tail)
		qp->batch_tail->next = op;
	else
		qp->batch = op;
	qp->batch_tail = op;
	return op;
}

static struct emu_op *cur(struct ibv_qp_ex *ex)
{
	return qp_of(ex)->batch_tail;
}

static void wr_send(struct ibv_qp_ex *ex)
{
	op_open(ex, EMU_OP_SEND);
}

static void wr_send_imm(struct ibv_qp_ex *ex, __be32 imm)
{
	struct emu_op *op = op_open(ex, EMU_OP_SEND);

	if (op) {
		op->has_imm = true;
		op->imm = imm;
	}
}

static void rdma(struct ibv_qp_ex *ex, enum emu_op_kind kind, uint32_t rkey,
		 uint64_t raddr, bool has_imm, __be32 imm)
{
	const struct emu_profile *p = emu_profile();
	uint32_t need = kind == EMU_OP_READ ? EFADV_DEVICE_ATTR_CAPS_RDMA_READ
					    : EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE;
	struct emu_op *op = op_open(ex, kind);

	if (!op)
		return;
	if (!(p->caps & need))
		qp_of(ex)->batch_bad = true;
	op->rkey = rkey;
	op->raddr = raddr;
	op->has_imm = has_imm;
	op->imm = imm;
}

static void wr_rdma_read(struct ibv_qp_ex *ex, uint32_t rkey, uint64_t raddr)
{
	rdma(ex, EMU_OP_READ, rkey, raddr, false, 0);
}

static void wr_rdma_write(struct ibv_qp_ex *ex, uint32_t rkey, uint64_t raddr)
{
	rdma(ex, EMU_OP_WRITE, rkey, raddr, false, 0);
}

static void wr_rdma_write_imm(struct ibv_qp_ex *ex, uint32_t rkey,
			      uint64_t raddr, __be32 imm)
{
	rdma(ex, EMU_OP_WRITE, rkey, raddr, true, imm);
}

static void wr_set_ud_addr(struct ibv_qp_ex *ex, struct ibv_ah *ah,
			   uint32_t remote_qpn, uint32_t remote_qkey)
{
	struct emu_op *op = cur(ex);

	if (!op)
		return;
	op->dgid = ((struct emu_ah *)ah)->gid;
	op->dqpn = remote_qpn;
	op->qkey = remote_qkey;
}

static void wr_set_sge_list(struct ibv_qp_ex *ex, size_t n,
			    const struct ibv_sge *sge)
{
	struct emu_op *op = cur(ex);

	if (!op)
		return;
	if (n > EMU_MAX_SGE) {
		qp_of(ex)->batch_bad = true;
		return;
	}
	op->nsge = (int)n;
	op->len = 0;
	for (size_t i = 0; i < n; i++) {
		op->sge[i] = sge[i];
		op->len += sge[i].length;
	}
}

static void wr_set_sge(struct ibv_qp_ex *ex, uint32_t lkey, uint64_t addr,
		       uint32_t length)
{
	struct ibv_sge s = { .addr = addr, .length = length, .lkey = lkey };

	wr_set_sge_list(ex, 1, &s);
}

/* Inline data is copied now: the caller may reuse its buffer at once. */
static void wr_set_inline_data_list(struct ibv_qp_ex *ex, size_t n,
				    const struct ibv_data_buf *buf)
{
	struct emu_op *op = cur(ex);
	size_t len = 0;

	if (!op)
		return;
	for (size_t i = 0; i < n; i++) {
		if (buf[i].length > EMU_INLINE - len) {
			qp_of(ex)->batch_bad = true;
			return;
		}
		memcpy(op->inl + len, buf[i].addr, buf[i].length);
		len += buf[i].length;
	}
	op->is_inline = true;
	op->len = len;
}

static void wr_set_inline_data(struct ibv_qp_ex *ex, void *addr, size_t len)
{
	struct ibv_data_buf b = { .addr = addr, .length = len };

	wr_set_inline_data_list(ex, 1, &b);
}

static void batch_free(struct emu_qp *qp)
{
	while (qp->batch) {
		struct emu_op *n = qp->batch->next;

		free(qp->batch);
		qp->batch = n;
	}
	qp->batch_tail = NULL;
}

static void wr_abort(struct ibv_qp_ex *ex)
{
	batch_free(qp_of(ex));
}

/* Sizes are refused here, as the device refuses the work request: a send
 * beyond the MTU, RDMA beyond max_rdma_size. */
static int wr_complete(struct ibv_qp_ex *ex)
{
	struct emu_qp *qp = qp_of(ex);
	struct emu_op *op;
	int err = qp->batch_bad ? EINVAL : 0;

	for (op = qp->batch; op && !err; op = op->next) {
		uint64_t max = op->kind == EMU_OP_SEND ? EMU_MTU
						       : emu_profile()->max_rdma_size;

		if (op->len > max || (op->kind != EMU_OP_SEND && op->is_inline))
			err = EINVAL;
	}
	if (err || !qp->batch) {
		batch_free(qp);
		return err;
	}
	pthread_mutex_lock(&qp->hw->lock);
	for (op = qp->batch; op; op = op->next)
		if (!op->is_inline && !emu_lkey_ok(qp->hw, op->sge, op->nsge))
			op->local_err = EMU_LOCAL_INVALID_LKEY;
	emu_hw_submit(qp->hw, qp->batch, qp->batch_tail);
	pthread_mutex_unlock(&qp->hw->lock);
	qp->batch = qp->batch_tail = NULL;
	return 0;
}

int emu_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		  struct ibv_recv_wr **bad)
{
	struct emu_qp *qp = (struct emu_qp *)ibqp;
	int err = 0;

	pthread_mutex_lock(&qp->rq_lock);
	for (; wr; wr = wr->next) {
		struct emu_recv *r;

		if (wr->num_sge < 0 || wr->num_sge > EMU_MAX_SGE) {
			err = EINVAL;
			break;
		}
		if (qp->rq_count == qp->rq_cap) {
			err = ENOMEM;
			break;
		}
		r = &qp->rq[(qp->rq_head + qp->rq_count) % qp->rq_cap];
		r->wr_id = wr->wr_id;
		r->nsge = wr->num_sge;
		memcpy(r->sge, wr->sg_list, (size_t)wr->num_sge * sizeof(r->sge[0]));
		qp->rq_count++;
	}
	pthread_mutex_unlock(&qp->rq_lock);
	if (err)
		*bad = wr;
	return err;
}

bool emu_rq_pop(struct emu_qp *qp, struct emu_recv *out)
{
	bool got;

	pthread_mutex_lock(&qp->rq_lock);
	got = qp->rq_count > 0;
	if (got) {
		*out = qp->rq[qp->rq_head];
		qp->rq_head = (qp->rq_head + 1) % qp->rq_cap;
		qp->rq_count--;
	}
	pthread_mutex_unlock(&qp->rq_lock);
	return got;
}

static struct ibv_qp *create(struct ibv_context *ctx,
			     struct ibv_qp_init_attr_ex *attr, uint16_t efa_flags)
{
	struct emu_hw *hw = emu_hw_of(ctx);
	struct emu_qp *qp;
	int err;

	if (!attr->send_cq || !attr->recv_cq || !attr->pd ||
	    attr->cap.max_send_sge > EMU_MAX_SGE ||
	    attr->cap.max_recv_sge > EMU_MAX_SGE ||
	    attr->cap.max_inline_data > EMU_INLINE ||
	    attr->cap.max_send_wr > EMU_MAX_WR ||
	    attr->cap.max_recv_wr > EMU_MAX_WR) {
		errno = EINVAL;
		return NULL;
	}
	if (efa_flags & EFADV_QP_FLAGS_UNSOLICITED_WRITE_RECV &&
	    !(emu_profile()->caps & EFADV_DEVICE_ATTR_CAPS_UNSOLICITED_WRITE_RECV)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	qp->rq_cap = attr->cap.max_recv_wr ? attr->cap.max_recv_wr : 1;
	qp->rq = calloc(qp->rq_cap, sizeof(*qp->rq));
	if (!qp->rq) {
		free(qp);
		errno = ENOMEM;
		return NULL;
	}
	qp->hw = hw;
	qp->scq = (struct emu_cq *)attr->send_cq;
	qp->rcq = (struct emu_cq *)attr->recv_cq;
	qp->unsolicited_write_recv =
		efa_flags & EFADV_QP_FLAGS_UNSOLICITED_WRITE_RECV;
	pthread_mutex_init(&qp->rq_lock, NULL);
	qp->ex.qp_base.context = ctx;
	qp->ex.qp_base.qp_context = attr->qp_context;
	qp->ex.qp_base.pd = attr->pd;
	qp->ex.qp_base.send_cq = attr->send_cq;
	qp->ex.qp_base.recv_cq = attr->recv_cq;
	qp->ex.qp_base.state = IBV_QPS_RESET;
	qp->ex.qp_base.qp_type = attr->qp_type;
	pthread_mutex_init(&qp->ex.qp_base.mutex, NULL);
	pthread_cond_init(&qp->ex.qp_base.cond, NULL);
	qp->ex.wr_start = wr_start;
	qp->ex.wr_send = wr_send;
	qp->ex.wr_send_imm = wr_send_imm;
	qp->ex.wr_rdma_read = wr_rdma_read;
	qp->ex.wr_rdma_write = wr_rdma_write;
	qp->ex.wr_rdma_write_imm = wr_rdma_write_imm;
	qp->ex.wr_set_ud_addr = wr_set_ud_addr;
	qp->ex.wr_set_sge = wr_set_sge;
	qp->ex.wr_set_sge_list = wr_set_sge_list;
	qp->ex.wr_set_inline_data = wr_set_inline_data;
	qp->ex.wr_set_inline_data_list = wr_set_inline_data_list;
	qp->ex.wr_complete = wr_complete;
	qp->ex.wr_abort = wr_abort;
	pthread_mutex_lock(&hw->lock);
	err = emu_hw_add_qp(hw, qp);
	pthread_mutex_unlock(&hw->lock);
	if (err) {
		free(qp->rq);
		free(qp);
		errno = err;
		return NULL;
	}
	return &qp->ex.qp_base;
}

struct ibv_qp *emu_create_qp_ex(struct ibv_context *ctx,
				struct ibv_qp_init_attr_ex *attr)
{
	if (attr->qp_type != IBV_QPT_UD) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	return create(ctx, attr, 0);
}

EMU_EXPORT struct ibv_qp *srd_efa_emu_create_qp_ex(struct ibv_context *ctx,
					     struct ibv_qp_init_attr_ex *attr,
					     struct efadv_qp_init_attr *efa_attr,
					     uint32_t inlen)
{
	if (attr->qp_type != IBV_QPT_DRIVER ||
	    inlen < offsetof(struct efadv_qp_init_attr, flags) + sizeof(uint16_t) ||
	    efa_attr->driver_qp_type != EFADV_QP_DRIVER_TYPE_SRD) {
		errno = EINVAL;
		return NULL;
	}
	return create(ctx, attr, efa_attr->flags);
}

EMU_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	return &((struct emu_qp *)qp)->ex;
}

EMU_EXPORT int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
			     int mask)
{
	struct emu_qp *qp = (struct emu_qp *)ibqp;

	pthread_mutex_lock(&qp->hw->lock);
	if (mask & IBV_QP_STATE)
		ibqp->state = attr->qp_state;
	if (mask & IBV_QP_QKEY)
		qp->qkey = attr->qkey;
	if (mask & IBV_QP_RNR_RETRY)
		qp->rnr_retry = attr->rnr_retry;
	pthread_mutex_unlock(&qp->hw->lock);
	return 0;
}

EMU_EXPORT int ibv_destroy_qp(struct ibv_qp *ibqp)
{
	struct emu_qp *qp = (struct emu_qp *)ibqp;

	pthread_mutex_lock(&qp->hw->lock);
	emu_hw_remove_qp(qp->hw, qp);
	emu_loop_forget_qp(qp->hw, qp);
	pthread_mutex_unlock(&qp->hw->lock);
	emu_loop_flush_wait(qp->hw);
	emu_counters_dump(qp);
	pthread_mutex_destroy(&qp->rq_lock);
	pthread_mutex_destroy(&ibqp->mutex);
	pthread_cond_destroy(&ibqp->cond);
	free(qp->rq);
	free(qp);
	return 0;
}

/* Writes land in 128-byte-aligned blocks in order on p5-like profiles
 * (loop.c copies them block by block). */
EMU_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *qp,
					  enum ibv_wr_opcode op, uint32_t flags)
{
	(void)qp, (void)flags;
	if ((op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_WRITE_WITH_IMM) &&
	    emu_profile()->write_in_order_128)
		return IBV_QUERY_QP_DATA_IN_ORDER_ALIGNED_128_BYTES;
	return 0;
}

/* For tests: a QP's counters, read in the process that owns it. */
EMU_EXPORT void srd_efa_emu_qp_counters(struct ibv_qp *ibqp,
					struct srd_efa_emu_counters *out)
{
	struct emu_qp *qp = (struct emu_qp *)ibqp;

	pthread_mutex_lock(&qp->hw->lock);
	*out = qp->cnt;
	pthread_mutex_unlock(&qp->hw->lock);
}
