#include "rogue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "srdtest.h"

#define FI_OK(call)                                                               \
  do {                                                                            \
    int rc_ = (int)(call);                                                        \
    ST_CHECK(rc_ == 0, "%s: %s", #call, fi_strerror(rc_ < 0 ? -rc_ : rc_));       \
  } while (0)

void rogue_open(struct rogue *r, const char *prov) {
  memset(r, 0, sizeof(*r));
  struct fi_info *h = fi_allocinfo();
  ST_CHECK(h, "fi_allocinfo");
  h->ep_attr->type = FI_EP_RDM;
  h->caps = FI_MSG | FI_RMA;
  h->mode = FI_CONTEXT | FI_CONTEXT2;
  h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  h->fabric_attr->prov_name = strdup(prov);
  FI_OK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &r->info));
  fi_freeinfo(h);
  ST_CHECK(!(r->info->domain_attr->mr_mode & FI_MR_LOCAL), "the rogue does not register local buffers");
  r->virt_addr = !!(r->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR);
  r->len_in_data = r->info->domain_attr->cq_data_size >= 8;
  FI_OK(fi_fabric(r->info->fabric_attr, &r->fabric, NULL));
  FI_OK(fi_domain(r->fabric, r->info, &r->domain, NULL));
  struct fi_av_attr av = {.type = FI_AV_TABLE};
  FI_OK(fi_av_open(r->domain, &av, &r->av, NULL));
  struct fi_cq_attr cq = {.format = FI_CQ_FORMAT_DATA, .size = 1024};
  FI_OK(fi_cq_open(r->domain, &cq, &r->cq, NULL));
  FI_OK(fi_endpoint(r->domain, r->info, &r->ep, NULL));
  if (!strcmp(prov, "shm")) {
    static int opened; /* a process's endpoints need names of their own: numbered as rails */
    char name[SRD_NAME_MAX];
    snprintf(name, sizeof(name), "srd-%010d-%016llx-%03d-%d", (int)getpid(), 0x0123456789abcdefULL, opened++, 0);
    FI_OK(fi_setname(&r->ep->fid, name, strlen(name) + 1));
  }
  FI_OK(fi_ep_bind(r->ep, &r->av->fid, 0));
  FI_OK(fi_ep_bind(r->ep, &r->cq->fid, FI_TRANSMIT | FI_RECV));
  FI_OK(fi_enable(r->ep));
  r->name_len = sizeof(r->name);
  FI_OK(fi_getname(&r->ep->fid, r->name, &r->name_len));
  r->send_buf = calloc(1, ROGUE_BUF);
  for (int i = 0; i < ROGUE_RECVS; i++) {
    r->recv_buf[i] = calloc(1, ROGUE_BUF);
    FI_OK(fi_recv(r->ep, r->recv_buf[i], ROGUE_BUF, NULL, FI_ADDR_UNSPEC, &r->recv_ctx[i]));
  }
}

void rogue_close(struct rogue *r) {
  fi_close(&r->ep->fid);
  fi_close(&r->cq->fid);
  fi_close(&r->av->fid);
  fi_close(&r->domain->fid);
  fi_close(&r->fabric->fid);
  fi_freeinfo(r->info);
  for (int i = 0; i < ROGUE_RECVS; i++) free(r->recv_buf[i]);
  free(r->send_buf);
}

fi_addr_t rogue_insert(struct rogue *r, const void *name) {
  fi_addr_t a = FI_ADDR_NOTAVAIL;
  ST_CHECK(fi_av_insert(r->av, name, 1, &a, 0, NULL) == 1, "rogue: fi_av_insert failed");
  return a;
}

/* Wait for the completion of ctx; received messages that come meanwhile are
 * reposted unread (the tests read messages only with rogue_recv). */
static int wait_for(struct rogue *r, void *ctx, int ms) {
  int64_t deadline = st_now_ms() + ms;
  while (st_now_ms() < deadline) {
    struct fi_cq_data_entry e;
    int n = (int)fi_cq_read(r->cq, &e, 1);
    if (n == -FI_EAVAIL) {
      struct fi_cq_err_entry err = {0};
      if (fi_cq_readerr(r->cq, &err, 0) == 1 && err.op_context == ctx) return err.err ? err.err : FI_EIO;
      continue;
    }
    if (n == 1 && e.op_context == ctx) return 0;
    if (n == 1)
      for (int i = 0; i < ROGUE_RECVS; i++)
        if (e.op_context == &r->recv_ctx[i])
          fi_recv(r->ep, r->recv_buf[i], ROGUE_BUF, NULL, FI_ADDR_UNSPEC, &r->recv_ctx[i]);
  }
  return -1;
}

/* Post with retries while the provider is busy; 0 or the error of the post. */
#define POST(r, ms, call)                                             \
  ({                                                                  \
    int64_t until_ = st_now_ms() + (ms);                              \
    int rc_;                                                          \
    while ((rc_ = (int)(call)) == -FI_EAGAIN && st_now_ms() < until_) \
      fi_cq_read((r)->cq, NULL, 0);                                   \
    rc_;                                                              \
  })

int rogue_read(struct rogue *r, fi_addr_t peer, void *buf, size_t len, uint64_t raddr, uint64_t key, int ms) {
  struct fi_context2 ctx;
  int rc = POST(r, ms, fi_read(r->ep, buf, len, NULL, peer, raddr, key, &ctx));
  if (rc) return rc == -FI_EAGAIN ? -1 : -rc;
  return wait_for(r, &ctx, ms);
}

int rogue_write(struct rogue *r, fi_addr_t peer, const void *buf, size_t len, uint64_t raddr, uint64_t key,
                uint32_t imm, int ms) {
  return rogue_write_claiming(r, peer, buf, len, raddr, key, imm, len, ms);
}

int rogue_write_claiming(struct rogue *r, fi_addr_t peer, const void *buf, size_t len, uint64_t raddr, uint64_t key,
                         uint32_t imm, uint32_t claimed, int ms) {
  struct fi_context2 ctx;
  uint64_t data = r->len_in_data ? (uint64_t)claimed << 32 | imm : imm;
  int rc = POST(r, ms, fi_writedata(r->ep, buf, len, NULL, data, peer, raddr, key, &ctx));
  if (rc) return rc == -FI_EAGAIN ? -1 : -rc;
  return wait_for(r, &ctx, ms);
}

int rogue_send(struct rogue *r, fi_addr_t peer, const void *buf, size_t len, int ms) {
  struct fi_context2 ctx;
  memcpy(r->send_buf, buf, len);
  int rc = POST(r, ms, fi_send(r->ep, r->send_buf, len, NULL, peer, &ctx));
  if (rc) return rc == -FI_EAGAIN ? -1 : -rc;
  return wait_for(r, &ctx, ms);
}

int rogue_recv(struct rogue *r, struct srd_msg *m, int ms) {
  static char copy[ROGUE_BUF];
  int64_t deadline = st_now_ms() + ms;
  while (st_now_ms() < deadline) {
    struct fi_cq_data_entry e;
    int n = (int)fi_cq_read(r->cq, &e, 1);
    if (n == -FI_EAVAIL) {
      struct fi_cq_err_entry err = {0};
      fi_cq_readerr(r->cq, &err, 0);
      continue;
    }
    if (n != 1) continue;
    for (int i = 0; i < ROGUE_RECVS; i++) {
      if (e.op_context != &r->recv_ctx[i]) continue;
      size_t len = e.len < ROGUE_BUF ? e.len : ROGUE_BUF;
      memcpy(copy, r->recv_buf[i], len);
      fi_recv(r->ep, r->recv_buf[i], ROGUE_BUF, NULL, FI_ADDR_UNSPEC, &r->recv_ctx[i]);
      const char *why;
      if (srd_msg_decode(copy, len, m, &why) == 0) return 0;
    }
  }
  return -1;
}

size_t rogue_hello(struct rogue *r, void *buf, const struct srd_handle *h, uint32_t src_comm, const void *name,
                   uint8_t name_len) {
  /* Each hello its own connect: a listener takes hellos with one token and
   * comm id for copies of one (a resend). */
  static uint64_t hellos;
  struct srd_msg_peer p = {.cookie = h->cookie,
                           .token = 0x5eed0000 + ++hellos,
                           .listener_id = h->listener_id,
                           .src_comm = src_comm,
                           .pid = (uint32_t)getpid(),
                           .nrails = 1,
                           .neps = 1,
                           .name_len = name_len,
                           .names = name ? name : (const void *)r->name};
  return srd_msg_encode_peer(buf, ROGUE_BUF, SRD_MSG_HELLO, 0, &p);
}

void rogue_decode_handle(const char *handle, struct srd_handle *h) {
  const char *why;
  ST_CHECK(srd_handle_decode(handle, h, &why) == 0, "handle: %s", why);
}

void rogue_join(struct rogue *r, const char *handle, struct rogue_peer *p) {
  struct srd_handle h;
  rogue_decode_handle(handle, &h);
  p->victim = rogue_insert(r, h.name);
  char msg[ROGUE_BUF];
  size_t len = rogue_hello(r, msg, &h, 0x777, NULL, (uint8_t)r->name_len);
  ST_CHECK(rogue_send(r, p->victim, msg, len, 3000) == 0, "rogue: hello not sent");
  struct srd_msg m;
  do ST_CHECK(rogue_recv(r, &m, SETUP_MS) == 0, "rogue: no answer to its hello");
  while (m.type != SRD_MSG_ACCEPT);
  p->comm = m.u.peer.src_comm;
  p->token = m.u.peer.token;
  p->write_id = m.u.peer.write_id;
}

void rogue_start(struct rogue *r, const char *prov, struct rogue_peer *p, struct srd_handle *h) {
  rogue_open(r, prov);
  char handle[HSIZE];
  st_oob_recv(0, handle, HSIZE, SETUP_MS);
  rogue_join(r, handle, p);
  if (h) rogue_decode_handle(handle, h);
}

void rogue_wait_cts(struct rogue *r, struct srd_msg *m) {
  do ST_CHECK(rogue_recv(r, m, SETUP_MS) == 0, "rogue: no clear-to-send");
  while (m->type != SRD_MSG_CTS);
}

void *victim_listen(char *handle, int to1, int to2) {
  void *lcomm = NULL;
  ST_NCCL(st_net_listen(0, handle, &lcomm));
  if (to1 >= 0) st_oob_send(to1, handle, HSIZE);
  if (to2 >= 0) st_oob_send(to2, handle, HSIZE);
  return lcomm;
}
