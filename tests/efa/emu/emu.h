/* The emulated EFA device: what its files share.
 *
 * A test fixture, never shipped: libibverbs.so.1 and libefa.so.1 of our own
 * that libfabric's efa provider loads instead of rdma-core's.  Each device a
 * process opens is one "hardware" object: an AF_UNIX datagram socket in the
 * abstract namespace named after its GID (unique per process and device), a
 * QP table, and one event-loop thread that moves every packet of every QP on
 * it.  The target's loop checks keys and bounds and copies into its own
 * process's registered memory, so no process ever touches another's memory.
 */
#ifndef SRD_EFA_EMU_H
#define SRD_EFA_EMU_H

#include <infiniband/efadv.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define EMU_EXPORT __attribute__((visibility("default")))

/* Device limits.  QP numbers stay below EMU_MAX_QP, so the provider's table
 * (indexed by qpn & (roundup(max_qp) - 1)) never collides. */
#define EMU_MAX_QP 1024
#define EMU_MAX_AH 4096
#define EMU_MAX_SGE 2
#define EMU_INLINE 32
#define EMU_MTU 8928
#define EMU_MAX_RDMA (1u << 30)
#define EMU_MAX_WR 4096
/* Payload bytes of one datagram of a write or read response. */
#define EMU_CHUNK (256 * 1024)

/* Vendor error codes the provider decodes (prov/efa/src/efa_errno.h). */
enum emu_vendor_err {
	EMU_OK = 0,
	EMU_FLUSHED = 1,
	EMU_LOCAL_INVALID_LKEY = 5,
	EMU_LOCAL_BAD_LENGTH = 6,
	EMU_BAD_ADDRESS = 7,
	EMU_BAD_DEST_QPN = 9,
	EMU_RNR = 10,
	EMU_REMOTE_BAD_LENGTH = 11,
	EMU_UNKNOWN_PEER = 14,
	EMU_UNREACH_REMOTE = 15,
};

/* A device profile: the generations the provider tells apart. */
struct emu_profile {
	const char *name;
	uint32_t vendor_part_id;
	uint32_t caps;          /* EFADV_DEVICE_ATTR_CAPS_* */
	uint32_t max_rdma_size; /* 0 without RDMA read */
	bool write_in_order_128; /* ibv_query_qp_data_in_order for writes */
};

/* Test knobs, read once from the environment (SRD_EFA_EMU_*). */
struct emu_knobs {
	unsigned reorder_us;   /* ops held up to this long at random; 0 off */
	unsigned delay_us;     /* every op held this long */
	unsigned drop_pm;      /* per mille of ops lost once, re-sent later */
	unsigned rnr_pm;       /* per mille of arriving sends answered RNR */
	unsigned vanish_after; /* device goes silent after so many packets in */
	const char *counters;  /* file QP counters are appended to */
};

/* Per-QP counters (also readable in process: srd_efa_emu_qp_counters). */
struct srd_efa_emu_counters {
	uint64_t tx_pkts, tx_bytes, rx_pkts, rx_bytes;
	uint64_t rnr, reads, writes, drops;
};

struct emu_hw;
struct emu_resp;

struct emu_ctx {
	struct verbs_context vctx; /* must be first: ibv_context is its tail */
	struct emu_hw *hw;
};

struct emu_pd {
	struct ibv_pd pd;
};

struct emu_mr {
	struct ibv_mr mr;
	uint64_t iova; /* what remote addresses are relative to */
	unsigned access;
	struct emu_mr *next; /* hw->mrs */
};

struct emu_ah {
	struct ibv_ah ah;
	union ibv_gid gid;
	uint16_t ahn;
};

/* One completion as the loop produced it. */
struct emu_cqe {
	uint64_t wr_id;
	enum ibv_wc_status status;
	enum ibv_wc_opcode opcode;
	uint32_t vendor_err, byte_len, imm, qp_num, src_qp, slid;
	unsigned wc_flags;
	bool unsolicited;
	union ibv_gid sgid;
};

struct emu_cq {
	struct ibv_cq_ex ex;
	struct efadv_cq dv;
	pthread_mutex_t lock;
	struct emu_cqe *ring;
	size_t cap, head, count;
	struct emu_cqe cur;
	bool armed;
};

struct emu_comp_channel {
	struct ibv_comp_channel ch;
	int wake_w; /* ch.fd is the read end */
};

struct emu_recv {
	uint64_t wr_id;
	int nsge;
	struct ibv_sge sge[EMU_MAX_SGE];
};

enum emu_op_kind { EMU_OP_SEND, EMU_OP_WRITE, EMU_OP_READ };

/* A work request from post to completion.  The posting thread builds it; from
 * emu_hw_submit on only the device's loop touches it. */
struct emu_op {
	struct emu_op *next;      /* the list it is on */
	struct emu_op *hash_next; /* hw's id table, while in flight */
	struct emu_qp *qp;
	uint64_t id, wr_id;
	enum emu_op_kind kind;
	bool has_imm;
	uint32_t imm; /* network order, as the caller gave it */
	union ibv_gid dgid;
	uint32_t dqpn, qkey;
	uint32_t rkey;
	uint64_t raddr;
	int nsge;
	struct ibv_sge sge[EMU_MAX_SGE];
	bool is_inline;
	uint8_t inl[EMU_INLINE];
	uint64_t len;
	uint64_t sent, got; /* bytes emitted; read bytes received */
	uint64_t due_ns, emitted_ns;
	unsigned rnr_left; /* UINT32_MAX: retry forever */
	bool probed;
	uint32_t local_err; /* found at post: completes without sending */
};

struct emu_qp {
	struct ibv_qp_ex ex;
	struct emu_hw *hw;
	struct emu_cq *scq, *rcq;
	bool unsolicited_write_recv;
	unsigned rnr_retry;
	uint32_t qkey;
	/* posts between wr_start and wr_complete */
	struct emu_op *batch, *batch_tail;
	bool batch_bad;
	/* receive queue, a ring; the loop consumes it */
	pthread_mutex_t rq_lock;
	struct emu_recv *rq;
	size_t rq_cap, rq_head, rq_count;
	struct srd_efa_emu_counters cnt;
};

/* A device as one process sees it: shared by every context that opened it. */
struct emu_hw {
	int index;
	union ibv_gid gid;
	int refs; /* contexts open; under the global device lock */
	pthread_mutex_t lock; /* everything below */
	pthread_t thread;
	bool stop, dark;
	int sock, wake; /* the datagram socket; an eventfd for posts */
	struct emu_qp *qps[EMU_MAX_QP];
	uint32_t next_qpn;
	struct emu_mr *mrs;
	uint32_t next_key;
	struct emu_ah_ent {
		union ibv_gid gid;
		uint16_t ahn;
	} *ahs;
	size_t nah, ah_cap;
	uint32_t next_ahn;
	struct emu_op *submit, *submit_tail; /* posted, not yet seen by the loop */
	struct emu_op *sched, *sched_tail;   /* the loop's: to emit when due */
	struct emu_op *inflight[256];       /* emitted, by id: awaiting answer */
	struct emu_resp *resp, *resp_tail;   /* answers to emit, in order */
	uint64_t next_op_id, pkts_in;
	uint8_t *rxbuf, *txbuf;
	/* Completions made under hw->lock, pushed to their CQs after it is
	 * released (flush_lock held): a poller posts while it holds a CQ's
	 * lock, so the loop must never take a CQ's lock under hw->lock. */
	struct emu_done {
		struct emu_qp *qp;
		struct emu_cq *cq;
		struct emu_cqe e;
	} *done;
	size_t ndone, done_cap;
	pthread_mutex_t flush_lock;
};

/* profile.c */
const struct emu_profile *emu_profile(void);
const struct emu_knobs *emu_knobs(void);
uint64_t emu_now_ns(void);
unsigned emu_rand(unsigned below);

/* hw.c: devices, their tables (callers hold hw->lock) */
struct emu_hw *emu_hw_get(int index);
void emu_hw_put(struct emu_hw *hw);
int emu_hw_add_qp(struct emu_hw *hw, struct emu_qp *qp);
void emu_hw_remove_qp(struct emu_hw *hw, struct emu_qp *qp);
struct emu_mr *emu_mr_find(struct emu_hw *hw, uint32_t key, uint64_t addr,
			   uint64_t len, unsigned access);
bool emu_lkey_ok(struct emu_hw *hw, const struct ibv_sge *sge, int nsge);
int emu_ahn_of(struct emu_hw *hw, const union ibv_gid *gid);
uint16_t emu_ah_add(struct emu_hw *hw, const union ibv_gid *gid);
void emu_ah_remove(struct emu_hw *hw, uint16_t ahn);
void emu_counters_dump(struct emu_qp *qp);

/* loop.c: the device's socket and event loop */
int emu_loop_start(struct emu_hw *hw);
void emu_loop_stop(struct emu_hw *hw);
void emu_hw_submit(struct emu_hw *hw, struct emu_op *first, struct emu_op *last);
void emu_loop_forget_qp(struct emu_hw *hw, struct emu_qp *qp);
/* A completion for cq, delivered once the loop releases hw->lock. */
void emu_done_add(struct emu_hw *hw, struct emu_qp *qp, struct emu_cq *cq,
		  const struct emu_cqe *e);
/* Waits until completions being delivered (none of qp's after forget) are. */
void emu_loop_flush_wait(struct emu_hw *hw);

/* cq.c */
void emu_cq_push(struct emu_cq *cq, const struct emu_cqe *e);
struct ibv_cq_ex *emu_create_cq_ex(struct ibv_context *ctx,
				   struct ibv_cq_init_attr_ex *attr);
int emu_req_notify_cq(struct ibv_cq *cq, int solicited_only);

/* qp.c */
struct ibv_qp *emu_create_qp_ex(struct ibv_context *ctx,
				struct ibv_qp_init_attr_ex *attr);
int emu_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
		  struct ibv_recv_wr **bad);
/* The receive the loop fills next, or false when none is posted. */
bool emu_rq_pop(struct emu_qp *qp, struct emu_recv *out);

/* libibverbs.so.1 implements efadv too; libefa.so.1 (efadv.c) forwards
 * to these, exported under a private version as rdma-core does. */
int srd_efa_emu_query_device(struct ibv_context *ctx,
			     struct efadv_device_attr *attr, uint32_t inlen);
int srd_efa_emu_query_ah(struct ibv_ah *ah, struct efadv_ah_attr *attr,
			 uint32_t inlen);
struct ibv_qp *srd_efa_emu_create_qp_ex(struct ibv_context *ctx,
					struct ibv_qp_init_attr_ex *attr,
					struct efadv_qp_init_attr *efa_attr,
					uint32_t inlen);
struct ibv_cq_ex *srd_efa_emu_create_cq(struct ibv_context *ctx,
					struct ibv_cq_init_attr_ex *attr,
					struct efadv_cq_init_attr *efa_attr,
					uint32_t inlen);
struct efadv_cq *srd_efa_emu_cq_from_ibv_cq_ex(struct ibv_cq_ex *ex);
int srd_efa_emu_query_mr(struct ibv_mr *mr, struct efadv_mr_attr *attr,
			 uint32_t inlen);

static inline struct emu_hw *emu_hw_of(struct ibv_context *c)
{
	return ((struct emu_ctx *)verbs_get_ctx(c))->hw;
}

#endif
