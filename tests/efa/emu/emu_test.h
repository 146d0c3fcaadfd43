/* What the emulated device's tests share (emu_test_util.c): two ends of
 * SRD queue pairs, an out-of-band channel between the forked processes,
 * polling, posting and data patterns. */
#ifndef SRD_EFA_EMU_TEST_H
#define SRD_EFA_EMU_TEST_H

#include <infiniband/efadv.h>
#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct srd_efa_emu_counters {
	uint64_t tx_pkts, tx_bytes, rx_pkts, rx_bytes;
	uint64_t rnr, reads, writes, drops;
};
void srd_efa_emu_qp_counters(struct ibv_qp *qp, struct srd_efa_emu_counters *out);

#define QKEY 0x1234
#define BIG (3u << 20) /* spans several of the emulator's chunks */
#define MTU 8928

void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
#define CHECK(c, ...) do { if (!(c)) fail(__VA_ARGS__); } while (0)

/* One SRD queue pair with its device, domain and completion queue. */
struct end {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq_ex *cq;
	struct ibv_qp *qp;
	struct ibv_qp_ex *qpx;
	union ibv_gid gid;
	struct efadv_device_attr dv;
};

/* What a peer needs to reach a QP and one of its buffers. */
struct addr {
	union ibv_gid gid;
	uint32_t qpn;
	uint32_t rkey;
	uint64_t addr, len;
};

/* One completion, every field the provider reads. */
struct wc {
	uint64_t wr_id;
	int status, opcode;
	uint32_t vendor, len, imm, src_qp, slid, flags;
	int sgid_rc;
	bool unsol;
	union ibv_gid sgid;
};

extern const char *who;
extern pid_t peer_pid;
extern bool peer_reaped;
void open_end(struct end *e, int dev, unsigned rnr_retry, uint16_t flags);
void close_end(struct end *e);
struct wc poll1(struct end *e);
struct ibv_ah *ah_to(struct end *e, const union ibv_gid *gid);
/* op: 0 send with immediate, 1 write, 2 write with immediate, 3 read */
int post(struct end *e, struct ibv_ah *ah, const struct addr *to, int op,
	 uint64_t wr_id, void *buf, uint32_t len, uint32_t lkey, uint32_t imm,
	 uint64_t raddr, uint32_t rkey);
void post_recv(struct end *e, uint64_t id, void *buf, uint32_t len, uint32_t lkey);
void fill(uint8_t *p, size_t n, unsigned seed);
bool same(const uint8_t *p, size_t n, unsigned seed);
/* Sends n bytes to the peer and reads n back. */
void xfer(void *out, void *in, size_t n);
void sync_peer(void);
/* Runs parent() here and child() in a forked process. */
int two(void (*parent)(void), void (*child)(void));
/* The peer closed its end of the channel and was reaped. */
void peer_gone(void);

void send_parent(void);
void send_child(void);
extern unsigned rnr_retry_arg;
void rnr_parent(void);
void rnr_child(void);

#endif
