/* A device's socket and its one event loop.
 *
 * Every device of a process owns an AF_UNIX datagram socket in the abstract
 * namespace, named after its GID (so it vanishes with the process, and a
 * peer's send then fails as unreachable).  One thread per device emits the
 * packets of every QP on it and serves what arrives: it delivers sends into
 * posted receives, performs writes into this process's registered memory
 * after checking key and bounds, answers reads, and turns answers into
 * completions.  Between two sockets datagrams keep their order, so a write's
 * last chunk arrives after the others; reordering between operations is the
 * knob's (emu_knobs). */
#define _GNU_SOURCE
#include "emu.h"
#include "wire.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define RETRANSMIT_NS 2000000ull /* a dropped op is re-sent after 2 ms */
#define PROBE_NS 200000000ull /* an unanswered op asks if its peer lives */
#define BLOCKED_NS 20000ull   /* retry after a full peer queue */

/* 0 sent, EAGAIN the peer's queue is full, anything else: no such peer. */
static enum ibv_wc_status status_of(uint32_t vendor)
{
	switch (vendor) {
	case EMU_OK: return IBV_WC_SUCCESS;
	case EMU_FLUSHED: return IBV_WC_WR_FLUSH_ERR;
	case EMU_LOCAL_INVALID_LKEY: return IBV_WC_LOC_PROT_ERR;
	case EMU_LOCAL_BAD_LENGTH: return IBV_WC_LOC_LEN_ERR;
	case EMU_BAD_ADDRESS: return IBV_WC_REM_ACCESS_ERR;
	case EMU_RNR: return IBV_WC_RNR_RETRY_EXC_ERR;
	case EMU_BAD_DEST_QPN:
	case EMU_REMOTE_BAD_LENGTH: return IBV_WC_REM_INV_REQ_ERR;
	default: return IBV_WC_RETRY_EXC_ERR;
	}
}

void emu_inflight_remove(struct emu_hw *hw, struct emu_op *op)
{
	struct emu_op **pp = &hw->inflight[op->id & 255];

	for (; *pp; pp = &(*pp)->hash_next)
		if (*pp == op) {
			*pp = op->hash_next;
			return;
		}
}

struct emu_op *emu_inflight_find(struct emu_hw *hw, uint64_t id)
{
	for (struct emu_op *op = hw->inflight[id & 255]; op; op = op->hash_next)
		if (op->id == id)
			return op;
	return NULL;
}

/* The op leaves every list before this (or was never on one). */
void emu_complete(struct emu_op *op, uint32_t vendor)
{
	static const enum ibv_wc_opcode opc[] = { IBV_WC_SEND, IBV_WC_RDMA_WRITE,
						  IBV_WC_RDMA_READ };
	struct emu_cqe e = { .wr_id = op->wr_id,
			     .status = status_of(vendor),
			     .opcode = opc[op->kind],
			     .vendor_err = vendor,
			     .byte_len = (uint32_t)op->len,
			     .qp_num = op->qp->ex.qp_base.qp_num };

	emu_done_add(op->qp->hw, op->qp, op->qp->scq, &e);
	free(op);
}

void emu_sched_append(struct emu_hw *hw, struct emu_op *op)
{
	op->next = NULL;
	if (hw->sched_tail)
		hw->sched_tail->next = op;
	else
		hw->sched = op;
	hw->sched_tail = op;
}

/* When an op may go: the knobs' delay, reordering and loss act here, on
 * whole operations (a retransmission is the same op sent again). */
static void schedule(struct emu_hw *hw, struct emu_op *op, uint64_t now)
{
	const struct emu_knobs *k = emu_knobs();

	if (op->local_err) {
		emu_complete(op, op->local_err);
		return;
	}
	op->id = ++hw->next_op_id;
	op->due_ns = now + (uint64_t)k->delay_us * 1000u;
	if (k->drop_pm && emu_rand(1000) < k->drop_pm) {
		op->qp->cnt.drops++;
		op->due_ns += RETRANSMIT_NS;
	}
	/* Half the ops overtake whatever waits and are held a random while:
	 * the first reorders ops due together, the second ops posted apart. */
	if (k->reorder_us && emu_rand(2)) {
		op->due_ns += (uint64_t)emu_rand(k->reorder_us + 1) * 1000u;
		op->next = hw->sched;
		hw->sched = op;
		if (!hw->sched_tail)
			hw->sched_tail = op;
		return;
	}
	emu_sched_append(hw, op);
}

/* Copies [off, off + n) of a scatter list to or from buf. */
/* Writes land in 128-byte-aligned blocks, lowest address first, each block
 * copied whole: the order ibv_query_qp_data_in_order promises. */
/* Emits what is left of an op; 0 once all of it is out. */
/* A read's data, chunk by chunk, from the region it was checked against
 * (looked up again: it may have been deregistered since). */
/* Emits owed answers first, in order, then every op that is due; stops at
 * the first full peer queue so a peer sees one device's packets in order.
 * Returns true when it stopped there. */
/* An op long unanswered asks whether its peer's device still exists: a
 * process that died took its socket with it.  A live but stopped peer is
 * waited for (see DESIGN, where the emulator differs). */
static void probe(struct emu_hw *hw, uint64_t now)
{
	for (int b = 0; b < 256; b++)
		for (struct emu_op **pp = &hw->inflight[b]; *pp;) {
			struct emu_op *op = *pp;
			struct pkt h = { .type = PK_PING };
			int err;

			if (now - op->emitted_ns < PROBE_NS) {
				pp = &op->hash_next;
				continue;
			}
			op->emitted_ns = now;
			err = emu_emit(hw, &op->dgid, &h, NULL);
			if (!err || err == EAGAIN) {
				pp = &op->hash_next;
				continue;
			}
			*pp = op->hash_next;
			emu_complete(op, EMU_UNREACH_REMOTE);
		}
}

static bool any_inflight(struct emu_hw *hw)
{
	for (int b = 0; b < 256; b++)
		if (hw->inflight[b])
			return true;
	return false;
}

/* How long the loop may sleep: until the next op is due, a retry after a
 * full queue, or the next probe; -1 forever. */
static int64_t sleep_ns(struct emu_hw *hw, bool blocked, uint64_t now)
{
	int64_t t = -1;

	if (blocked)
		return (int64_t)BLOCKED_NS;
	for (struct emu_op *op = hw->sched; op; op = op->next) {
		int64_t d = op->due_ns > now ? (int64_t)(op->due_ns - now) : 0;

		if (t < 0 || d < t)
			t = d;
	}
	if (any_inflight(hw) && (t < 0 || t > (int64_t)PROBE_NS))
		t = (int64_t)PROBE_NS;
	return t;
}

static void receive(struct emu_hw *hw, uint64_t now)
{
	const struct emu_knobs *k = emu_knobs();

	/* A bounded batch, so emission is not starved by a busy peer. */
	for (int i = 0; i < 64 && hw->sock >= 0; i++) {
		ssize_t n = recv(hw->sock, hw->rxbuf, sizeof(struct pkt) + EMU_CHUNK,
			     MSG_DONTWAIT);
		const struct pkt *h = (const struct pkt *)hw->rxbuf;

		if (n < 0)
			return;
		if ((size_t)n < sizeof(*h) || (size_t)n != sizeof(*h) + h->len)
			continue; /* not ours */
		hw->pkts_in++;
		emu_rx(hw, h, hw->rxbuf + sizeof(*h), now);
		if (k->vanish_after && hw->pkts_in >= k->vanish_after) {
			/* The device goes dark: peers find it unreachable. */
			close(hw->sock);
			hw->sock = -1;
			hw->dark = true;
		}
	}
}

void emu_done_add(struct emu_hw *hw, struct emu_qp *qp, struct emu_cq *cq,
		  const struct emu_cqe *e)
{
	if (hw->ndone == hw->done_cap) {
		size_t cap = hw->done_cap ? 2 * hw->done_cap : 256;
		struct emu_done *n = realloc(hw->done, cap * sizeof(*n));

		if (!n)
			abort(); /* a lost completion would be a hang, not a test */
		hw->done = n;
		hw->done_cap = cap;
	}
	hw->done[hw->ndone++] = (struct emu_done){ qp, cq, *e };
}

/* Pushes the completions made so far with hw->lock released; flush_lock
 * keeps a destroyed QP's CQ alive until they are in (emu_loop_flush_wait). */
static void deliver(struct emu_hw *hw)
{
	struct emu_done *batch = hw->done;
	size_t n = hw->ndone;

	if (!n)
		return;
	hw->done = NULL;
	hw->ndone = hw->done_cap = 0;
	pthread_mutex_lock(&hw->flush_lock);
	pthread_mutex_unlock(&hw->lock);
	for (size_t i = 0; i < n; i++)
		emu_cq_push(batch[i].cq, &batch[i].e);
	pthread_mutex_unlock(&hw->flush_lock);
	free(batch);
	pthread_mutex_lock(&hw->lock);
}

void emu_loop_flush_wait(struct emu_hw *hw)
{
	pthread_mutex_lock(&hw->flush_lock);
	pthread_mutex_unlock(&hw->flush_lock);
}

static void *loop(void *arg)
{
	struct emu_hw *hw = arg;
	bool blocked = false;

	pthread_mutex_lock(&hw->lock);
	while (!hw->stop) {
		uint64_t now = emu_now_ns();
		int64_t wait = sleep_ns(hw, blocked, now);
		struct pollfd fds[2] = { { hw->sock, POLLIN, 0 },
					 { hw->wake, POLLIN, 0 } };
		struct timespec ts = { (time_t)(wait / 1000000000),
				       (long)(wait % 1000000000) };
		uint64_t v;

		pthread_mutex_unlock(&hw->lock);
		ppoll(fds, 2, wait < 0 ? NULL : &ts, NULL);
		pthread_mutex_lock(&hw->lock);
		if (read(hw->wake, &v, sizeof(v)) < 0 && errno != EAGAIN)
			break;
		now = emu_now_ns();
		while (hw->submit) {
			struct emu_op *op = hw->submit;

			hw->submit = op->next;
			schedule(hw, op, now);
		}
		hw->submit_tail = NULL;
		receive(hw, now);
		blocked = emu_emit_all(hw, emu_now_ns());
		probe(hw, now);
		deliver(hw);
	}
	pthread_mutex_unlock(&hw->lock);
	return NULL;
}

int emu_loop_start(struct emu_hw *hw)
{
	struct sockaddr_un a;
	socklen_t len = emu_addr_of(&hw->gid, &a);
	int buf = 4 << 20;
	char name[16];

	hw->rxbuf = malloc(sizeof(struct pkt) + EMU_CHUNK);
	hw->txbuf = malloc(EMU_CHUNK);
	hw->sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	hw->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (!hw->rxbuf || !hw->txbuf || hw->sock < 0 || hw->wake < 0 ||
	    bind(hw->sock, (struct sockaddr *)&a, len))
		goto fail;
	/* A datagram must fit the sender's buffer: a chunk and its header. */
	setsockopt(hw->sock, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	if (pthread_create(&hw->thread, NULL, loop, hw))
		goto fail;
	/* Named, so tests can count the loops (one per device). */
	snprintf(name, sizeof(name), "efa-emu-%d", hw->index);
	pthread_setname_np(hw->thread, name);
	return 0;
fail:
	if (hw->sock >= 0)
		close(hw->sock);
	if (hw->wake >= 0)
		close(hw->wake);
	free(hw->rxbuf);
	free(hw->txbuf);
	return -1;
}

static void free_ops(struct emu_op *op)
{
	while (op) {
		struct emu_op *n = op->next;

		free(op);
		op = n;
	}
}

void emu_loop_stop(struct emu_hw *hw)
{
	uint64_t one = 1;

	pthread_mutex_lock(&hw->lock);
	hw->stop = true;
	pthread_mutex_unlock(&hw->lock);
	if (write(hw->wake, &one, sizeof(one)) < 0)
		abort(); /* an eventfd below its maximum always takes it */
	pthread_join(hw->thread, NULL);
	if (hw->sock >= 0)
		close(hw->sock);
	close(hw->wake);
	free(hw->rxbuf);
	free(hw->txbuf);
	/* QPs were destroyed first (the verbs contract), so these are none
	 * in a well-behaved caller. */
	free_ops(hw->submit);
	free_ops(hw->sched);
	for (int b = 0; b < 256; b++)
		while (hw->inflight[b]) {
			struct emu_op *op = hw->inflight[b];

			hw->inflight[b] = op->hash_next;
			free(op);
		}
	while (hw->resp) {
		struct emu_resp *r = hw->resp;

		hw->resp = r->next;
		free(r);
	}
	free(hw->done);
}

void emu_hw_submit(struct emu_hw *hw, struct emu_op *first, struct emu_op *last)
{
	uint64_t one = 1;

	if (hw->submit_tail)
		hw->submit_tail->next = first;
	else
		hw->submit = first;
	hw->submit_tail = last;
	if (write(hw->wake, &one, sizeof(one)) < 0)
		abort(); /* an eventfd below its maximum always takes it */
}

static struct emu_op *drop_qp_ops(struct emu_op *list, struct emu_qp *qp,
				  struct emu_op **tail)
{
	struct emu_op **pp = &list;

	*tail = NULL;
	while (*pp) {
		struct emu_op *op = *pp;

		if (op->qp == qp) {
			*pp = op->next;
			free(op);
			continue;
		}
		*tail = op;
		pp = &op->next;
	}
	return list;
}

/* A destroyed QP's work requests vanish without completions, as the
 * provider expects after ibv_destroy_qp. */
void emu_loop_forget_qp(struct emu_hw *hw, struct emu_qp *qp)
{
	size_t kept = 0;

	for (size_t i = 0; i < hw->ndone; i++)
		if (hw->done[i].qp != qp)
			hw->done[kept++] = hw->done[i];
	hw->ndone = kept;
	hw->submit = drop_qp_ops(hw->submit, qp, &hw->submit_tail);
	hw->sched = drop_qp_ops(hw->sched, qp, &hw->sched_tail);
	for (int b = 0; b < 256; b++)
		for (struct emu_op **pp = &hw->inflight[b]; *pp;) {
			struct emu_op *op = *pp;

			if (op->qp == qp) {
				*pp = op->hash_next;
				free(op);
			} else {
				pp = &op->hash_next;
			}
		}
}
