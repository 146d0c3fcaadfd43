/* Completion queues as the provider reads them: the extended poll API
 * (start/next/end and the read_* accessors), efadv's source GID and
 * unsolicited flag, and completion channels for wait objects. */
#define _GNU_SOURCE
#include "emu.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct emu_cq *cq_of(struct ibv_cq_ex *ex)
{
	return (struct emu_cq *)ex;
}

/* Called by a device loop.  A full queue grows: the provider sizes its CQs
 * generously and a lost completion would be a hang, not a test. */
void emu_cq_push(struct emu_cq *cq, const struct emu_cqe *e)
{
	struct emu_comp_channel *ch;
	bool notify;

	pthread_mutex_lock(&cq->lock);
	if (cq->count == cq->cap) {
		size_t cap = cq->cap * 2;
		struct emu_cqe *n = malloc(cap * sizeof(*n));

		if (!n) {
			pthread_mutex_unlock(&cq->lock);
			abort(); /* a fixture out of memory cannot go on */
		}
		for (size_t i = 0; i < cq->count; i++)
			n[i] = cq->ring[(cq->head + i) % cq->cap];
		free(cq->ring);
		cq->ring = n;
		cq->cap = cap;
		cq->head = 0;
	}
	cq->ring[(cq->head + cq->count) % cq->cap] = *e;
	cq->count++;
	notify = cq->armed;
	cq->armed = false;
	pthread_mutex_unlock(&cq->lock);
	ch = (struct emu_comp_channel *)cq->ex.channel;
	if (notify && ch) {
		struct ibv_cq *c = ibv_cq_ex_to_cq(&cq->ex);

		if (write(ch->wake_w, &c, sizeof(c)) != sizeof(c))
			abort(); /* a pipe of pointers never fills this far */
	}
}

/* Takes the oldest completion; false when there is none. */
static bool take(struct emu_cq *cq)
{
	if (!cq->count)
		return false;
	cq->cur = cq->ring[cq->head];
	cq->head = (cq->head + 1) % cq->cap;
	cq->count--;
	cq->ex.status = cq->cur.status;
	cq->ex.wr_id = cq->cur.wr_id;
	return true;
}

/* The lock is held from a successful start_poll to end_poll, as libefa
 * does: the provider reads the current entry in between. */
static int start_poll(struct ibv_cq_ex *ex, struct ibv_poll_cq_attr *attr)
{
	struct emu_cq *cq = cq_of(ex);

	(void)attr;
	pthread_mutex_lock(&cq->lock);
	if (take(cq))
		return 0;
	pthread_mutex_unlock(&cq->lock);
	return ENOENT;
}

static int next_poll(struct ibv_cq_ex *ex)
{
	return take(cq_of(ex)) ? 0 : ENOENT;
}

static void end_poll(struct ibv_cq_ex *ex)
{
	pthread_mutex_unlock(&cq_of(ex)->lock);
}

static enum ibv_wc_opcode read_opcode(struct ibv_cq_ex *ex)
{
	return cq_of(ex)->cur.opcode;
}

static uint32_t read_vendor_err(struct ibv_cq_ex *ex)
{
	return cq_of(ex)->cur.vendor_err;
}

static uint32_t read_byte_len(struct ibv_cq_ex *ex)
{
	return cq_of(ex)->cur.byte_len;
}

static __be32 read_imm_data(struct ibv_cq_ex *ex)
{
	return cq_of(ex)->cur.imm;
}

static uint32_t read_qp_num(struct ibv_cq_ex *ex)
{
	return cq_of(ex)->cur.qp_num;
}

static uint32_t read_src_qp(struct ibv_cq_ex *ex)
{
	return cq_of(ex)->cur.src_qp;
}

static unsigned int read_wc_flags(struct ibv_cq_ex *ex)
{
	return cq_of(ex)->cur.wc_flags;
}

static uint32_t read_slid(struct ibv_cq_ex *ex)
{
	return cq_of(ex)->cur.slid;
}

static uint8_t read_sl(struct ibv_cq_ex *ex)
{
	(void)ex;
	return 0;
}

static uint8_t read_dlid_path_bits(struct ibv_cq_ex *ex)
{
	(void)ex;
	return 0;
}

static struct emu_cq *cq_of_dv(struct efadv_cq *dv)
{
	return (struct emu_cq *)((char *)dv - offsetof(struct emu_cq, dv));
}

/* The source GID only where the receiver has no address handle for the
 * sender (slid 0xffff); otherwise the provider must use slid. */
static int wc_read_sgid(struct efadv_cq *dv, union ibv_gid *sgid)
{
	struct emu_cq *cq = cq_of_dv(dv);

	if (cq->cur.slid != 0xffff)
		return -ENOENT;
	*sgid = cq->cur.sgid;
	return 0;
}

static bool wc_is_unsolicited(struct efadv_cq *dv)
{
	return cq_of_dv(dv)->cur.unsolicited;
}

static struct ibv_cq_ex *create_cq(struct ibv_context *ctx,
				   struct ibv_cq_init_attr_ex *attr,
				   uint64_t efa_wc_flags)
{
	struct emu_cq *cq;

	if (attr->cqe <= 0 || (efa_wc_flags & EFADV_WC_EX_WITH_IS_UNSOLICITED &&
			       !(emu_profile()->caps &
				 EFADV_DEVICE_ATTR_CAPS_UNSOLICITED_WRITE_RECV))) {
		errno = EINVAL;
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		goto nomem;
	cq->cap = 1024;
	cq->ring = malloc(cq->cap * sizeof(*cq->ring));
	if (!cq->ring)
		goto nomem;
	pthread_mutex_init(&cq->lock, NULL);
	cq->ex.context = ctx;
	cq->ex.channel = attr->channel;
	cq->ex.cq_context = attr->cq_context;
	cq->ex.cqe = (int)attr->cqe;
	pthread_mutex_init(&cq->ex.mutex, NULL);
	pthread_cond_init(&cq->ex.cond, NULL);
	cq->ex.start_poll = start_poll;
	cq->ex.next_poll = next_poll;
	cq->ex.end_poll = end_poll;
	cq->ex.read_opcode = read_opcode;
	cq->ex.read_vendor_err = read_vendor_err;
	cq->ex.read_byte_len = read_byte_len;
	cq->ex.read_imm_data = read_imm_data;
	cq->ex.read_qp_num = read_qp_num;
	cq->ex.read_src_qp = read_src_qp;
	cq->ex.read_wc_flags = read_wc_flags;
	cq->ex.read_slid = read_slid;
	cq->ex.read_sl = read_sl;
	cq->ex.read_dlid_path_bits = read_dlid_path_bits;
	cq->dv.wc_read_sgid = wc_read_sgid;
	cq->dv.wc_is_unsolicited = wc_is_unsolicited;
	return &cq->ex;
nomem:
	if (cq)
		free(cq->ring);
	free(cq);
	errno = ENOMEM;
	return NULL;
}

struct ibv_cq_ex *emu_create_cq_ex(struct ibv_context *ctx,
				   struct ibv_cq_init_attr_ex *attr)
{
	return create_cq(ctx, attr, 0);
}

EMU_EXPORT struct ibv_cq_ex *srd_efa_emu_create_cq(struct ibv_context *ctx,
					     struct ibv_cq_init_attr_ex *attr,
					     struct efadv_cq_init_attr *efa_attr,
					     uint32_t inlen)
{
	uint64_t flags = inlen >= offsetof(struct efadv_cq_init_attr, wc_flags) +
					  sizeof(efa_attr->wc_flags)
				 ? efa_attr->wc_flags
				 : 0;

	return create_cq(ctx, attr, flags);
}

EMU_EXPORT struct efadv_cq *srd_efa_emu_cq_from_ibv_cq_ex(struct ibv_cq_ex *ex)
{
	return &cq_of(ex)->dv;
}

EMU_EXPORT int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct emu_cq *cq = (struct emu_cq *)ibcq;

	pthread_mutex_destroy(&cq->lock);
	pthread_mutex_destroy(&cq->ex.mutex);
	pthread_cond_destroy(&cq->ex.cond);
	free(cq->ring);
	free(cq);
	return 0;
}

int emu_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct emu_cq *cq = (struct emu_cq *)ibcq;
	struct emu_comp_channel *ch =
		(struct emu_comp_channel *)cq->ex.channel;
	bool now;

	(void)solicited_only;
	pthread_mutex_lock(&cq->lock);
	/* An event for what is already queued: the caller re-polls either
	 * way, and a missed one would be a hang. */
	now = cq->count > 0;
	cq->armed = !now;
	pthread_mutex_unlock(&cq->lock);
	if (now && ch && write(ch->wake_w, &ibcq, sizeof(ibcq)) != sizeof(ibcq))
		return EIO;
	return 0;
}

EMU_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *ctx)
{
	struct emu_comp_channel *ch = calloc(1, sizeof(*ch));
	int fds[2];

	if (!ch || pipe2(fds, O_CLOEXEC)) {
		free(ch);
		errno = ENOMEM;
		return NULL;
	}
	ch->ch.context = ctx;
	ch->ch.fd = fds[0];
	ch->wake_w = fds[1];
	return &ch->ch;
}

EMU_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *ibch)
{
	struct emu_comp_channel *ch = (struct emu_comp_channel *)ibch;

	close(ch->ch.fd);
	close(ch->wake_w);
	free(ch);
	return 0;
}

/* Blocks unless the caller made the fd non-blocking, as the kernel does. */
EMU_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq,
				void **cq_context)
{
	struct ibv_cq *c;

	if (read(ch->fd, &c, sizeof(c)) != sizeof(c))
		return -1;
	*cq = c;
	*cq_context = c->cq_context;
	return 0;
}

EMU_EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	(void)cq, (void)nevents;
}
