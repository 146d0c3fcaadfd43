/* A rogue peer for the security tests: a bare libfabric endpoint of the
 * provider under test that speaks our wire format (include/srd/wire.h) but
 * none of our rules. Every wait is bounded. */
#ifndef SRD_ROGUE_H
#define SRD_ROGUE_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <stdint.h>

#include <rdma/fabric.h>

#include "srd/wire.h"

#include "srdtest.h"

#define VERSION 11
#define HSIZE NCCL_NET_HANDLE_MAXSIZE
#define SETUP_MS ST_HANG_MS
#define OP_MS 3000

#define ROGUE_RECVS 16
#define ROGUE_BUF 65536

struct rogue {
  struct fi_info *info;
  struct fid_fabric *fabric;
  struct fid_domain *domain;
  struct fid_av *av;
  struct fid_cq *cq;
  struct fid_ep *ep;
  char name[SRD_NAME_MAX];
  size_t name_len;
  int virt_addr, len_in_data;
  char *recv_buf[ROGUE_RECVS];
  struct fi_context2 recv_ctx[ROGUE_RECVS];
  char *send_buf;
};

/* Open an endpoint of provider prov (shm: named as our plugin names its
 * endpoints, so that a victim takes it for one of its own kind). */
void rogue_open(struct rogue *r, const char *prov);
void rogue_close(struct rogue *r);
fi_addr_t rogue_insert(struct rogue *r, const void *name);

/* One operation, waited for: 0 on success, the positive error of its failed
 * completion, or -1 when nothing completed within ms. */
int rogue_read(struct rogue *r, fi_addr_t peer, void *buf, size_t len, uint64_t raddr, uint64_t key, int ms);
int rogue_write(struct rogue *r, fi_addr_t peer, const void *buf, size_t len, uint64_t raddr, uint64_t key,
                uint32_t imm, int ms);
/* ... one claiming `claimed` bytes where the length travels in the CQ data
 * (len_in_data: tcp, shm), as a forger may. */
int rogue_write_claiming(struct rogue *r, fi_addr_t peer, const void *buf, size_t len, uint64_t raddr, uint64_t key,
                         uint32_t imm, uint32_t claimed, int ms);
int rogue_send(struct rogue *r, fi_addr_t peer, const void *buf, size_t len, int ms);
/* Next control message that decodes, into *m (pointing into a buffer valid
 * until the next call); 0, or -1 on timeout. */
int rogue_recv(struct rogue *r, struct srd_msg *m, int ms);

/* What a rogue that said hello as a sender learns from the victim's answer:
 * a peer inside the job (it has the listen handle) gets all of it. */
struct rogue_peer {
  fi_addr_t victim;
  uint32_t comm;     /* the victim's receive comm id */
  uint64_t token;    /* ... and its token */
  uint16_t write_id; /* what writes into it carry */
};
void rogue_join(struct rogue *r, const char *handle, struct rogue_peer *p);
/* Opened, given rank 0's listen handle (decoded into h unless NULL) and
 * joined as above. */
void rogue_start(struct rogue *r, const char *prov, struct rogue_peer *p, struct srd_handle *h);
/* A listen handle, decoded (the test fails on a bad one). */
void rogue_decode_handle(const char *handle, struct srd_handle *h);
/* The next clear-to-send, waited for (others skipped). */
void rogue_wait_cts(struct rogue *r, struct srd_msg *m);

/* A hello from the rogue's own address for a listener handle. */
size_t rogue_hello(struct rogue *r, void *buf, const struct srd_handle *h, uint32_t src_comm, const void *name,
                   uint8_t name_len);

static inline bool is_shm(const struct st_ctx *ctx) { return !strcmp(ctx->provider, "shm"); }

/* Victim side: listen on device 0 and send the handle to ranks to1 and to2
 * (-1: none). */
void *victim_listen(char *handle, int to1, int to2);

/* Cases without a rogue endpoint (misuse.c). */
int victim_killed_region(int rank, int nranks, void *arg);
int api_misuse(int rank, int nranks, void *arg);
int unexpected_cap(int rank, int nranks, void *arg);
/* Floods from a joined peer (floods.c). */
int flood_caps(int rank, int nranks, void *arg);
/* Hellos naming closed ports against a legitimate peer (places.c). */
int hello_places(int rank, int nranks, void *arg);

/* A peer inside the job against other comms (insider.c, issue 23). */
int insider_fuzz(int rank, int nranks, void *arg);
int insider_nested(int rank, int nranks, void *arg);
int insider_closed_peer(int rank, int nranks, void *arg);
int insider_sweep(int rank, int nranks, void *arg);

#endif
