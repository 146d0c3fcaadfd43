/* The packets between emulated devices, and what the loop (loop.c) and the
 * receive side (rx.c) share.  Callers hold hw->lock. */
#ifndef SRD_EFA_EMU_WIRE_H
#define SRD_EFA_EMU_WIRE_H

#include "emu.h"

#include <sys/socket.h>
#include <sys/un.h>

enum { PK_SEND = 1, PK_WRITE, PK_READ_REQ, PK_READ_DATA, PK_ACK, PK_PING };

struct pkt {
	uint8_t type, has_imm;
	uint16_t status; /* PK_ACK: the vendor error */
	uint32_t src_qpn, dst_qpn, qkey, imm, rkey, len;
	union ibv_gid src;
	uint64_t op_id, raddr, total, offset;
};

/* An answer this device owes a peer: an ack, or a read's data. */
struct emu_resp {
	struct emu_resp *next;
	union ibv_gid to;
	struct pkt h;
	uint64_t sent;
};

socklen_t emu_addr_of(const union ibv_gid *gid, struct sockaddr_un *a);
/* Emits owed answers, then due ops; true when a full peer queue stopped it. */
bool emu_emit_all(struct emu_hw *hw, uint64_t now);
int emu_emit(struct emu_hw *hw, const union ibv_gid *to, struct pkt *h,
	     const void *payload);
void emu_complete(struct emu_op *op, uint32_t vendor);
void emu_inflight_remove(struct emu_hw *hw, struct emu_op *op);
struct emu_op *emu_inflight_find(struct emu_hw *hw, uint64_t id);
void emu_sched_append(struct emu_hw *hw, struct emu_op *op);
void emu_sge_copy(const struct ibv_sge *sge, int nsge, uint64_t off,
		  uint8_t *buf, uint64_t n, bool into_sge);
void emu_place(uint8_t *dst, const uint8_t *src, uint64_t n);
void emu_resp_push(struct emu_hw *hw, const union ibv_gid *to,
		   const struct pkt *h);
void emu_ack(struct emu_hw *hw, const struct pkt *in, uint16_t status);
/* rx.c: one packet that arrived */
void emu_rx(struct emu_hw *hw, const struct pkt *h, const uint8_t *payload,
	    uint64_t now);

#endif
