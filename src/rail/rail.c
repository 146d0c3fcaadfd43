#include "config.h"

#include "srd/rail.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "srd/gdr.h"
#include "srd/log.h"
#include "srd/param.h"
#include "srd/stats.h"
#include "srd/sys.h"
#include "srd/topo.h"

#define RECV_BUFS_PER_EP 64
#define SEND_BUFS 128
#define MAX_HELD 64
/* At setup, fi_recv refused for lack of room this many times in a row, with
 * the CQ read between tries, means the endpoint is stuck: the rail does not
 * open. */
#define RECV_POST_TRIES 1000
/* An endpoint that could post none of its receive buffers for this long
 * receives nothing: its rail fails. */
#define RECV_STARVED_MS 2000
#define FLUSH_SCRATCH 64
#define FLUSH_READ_BYTES 4

int srd_rail_cq_size(const struct fi_info *info) {
  /* 0 takes the provider's own size: efa's is larger (efa-direct 12,288,
   * EFA_DEF_CQ_SIZE in efa_cq_open; efa's protocol at least its tx + rx
   * queues, efa_rdm_cq_open), and a full CQ there is an error. */
  return strcmp(info->fabric_attr->prov_name, "efa") ? SRD_RAIL_CQ_SIZE : 0;
}

/* The largest message one send may carry. efa-direct's sends are one MTU
 * while its fi_info, asked for FI_RMA, reports the larger RMA limit
 * (efa_prov_info_set_ep_attr); its endpoint answers FI_OPT_MAX_MSG_SIZE with
 * the MTU (efa_ep_getopt). Only efa is asked: shm 2.6's getopt reads state
 * that fi_enable makes (smr_ep_getopt), and the others' fi_info is right. */
static size_t send_limit(const struct fi_info *info, struct fid_ep *ep) {
  size_t limit = info->ep_attr->max_msg_size;
#if HAVE_DECL_FI_OPT_MAX_MSG_SIZE
  size_t v = 0, len = sizeof(v);
  if (!strcmp(info->fabric_attr->prov_name, "efa") &&
      fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_MAX_MSG_SIZE, &v, &len) == 0 && v && v < limit)
    limit = v;
#else
  (void)ep;
#endif
  return limit;
}

size_t srd_rail_write_limit(const struct fi_info *info) {
  /* One write of at most 64 MiB: larger ones are striped anyway. */
  return info->ep_attr->max_msg_size < SRD_RAIL_MAX_WRITE ? info->ep_attr->max_msg_size : SRD_RAIL_MAX_WRITE;
}

static size_t buf_stride(const struct srd_rail *rail) {
  return (sizeof(struct srd_rail_buf) + rail->buf_size + 63) & ~(size_t)63;
}

static struct srd_rail_buf *buf_at(struct srd_rail *rail, int i) {
  return (struct srd_rail_buf *)(rail->buf_mem + (size_t)i * buf_stride(rail));
}

static int recv_into(struct srd_rail *rail, struct srd_rail_buf *b) {
  SRD_STAT(SRD_STAT_FI_RECV);
  return (int)fi_recv(rail->ep[b->ep], b->data, rail->buf_size, rail->mr_local ? fi_mr_desc(rail->buf_mr) : NULL,
                      FI_ADDR_UNSPEC, &b->op.fi_ctx);
}

static int post_recv_buf(struct srd_rail *rail, struct srd_rail_buf *b) {
  int rc, tries = 0;
  do {
    rc = recv_into(rail, b);
    if (rc == -FI_EAGAIN) fi_cq_read(rail->cq, NULL, 0);
  } while (rc == -FI_EAGAIN && ++tries < RECV_POST_TRIES);
  if (rc) SRD_WARN("rail %s: fi_recv failed: %s", rail->name, fi_strerror(-rc));
  return rc;
}

/* A repost; the test mode refuses every Nth. */
static int post_one(struct srd_rail *rail, struct srd_rail_buf *b) {
  if (rail->recv_refuse && ++rail->recv_reposts % (unsigned)rail->recv_refuse == 0) return -FI_ENOMEM;
  return recv_into(rail, b);
}

/* A receive buffer back to the provider after its message was handed on.
 * One the provider refuses is not lost: it waits on rail->unposted and is
 * offered again at every poll (repost_waiting). */
static void repost(struct srd_rail *rail, struct srd_rail_buf *b) {
  int rc = post_one(rail, b);
  if (!rc) return;
  b->next = rail->unposted;
  rail->unposted = b;
  int waiting = ++rail->unposted_on[b->ep];
  unsigned refusals = ++rail->recv_refusals;
  if (!(refusals & (refusals - 1)))
    SRD_WARN("rail %s: the provider refused to take a receive buffer back %u time(s) (%s); endpoint %d has %d waiting",
             rail->name, refusals, fi_strerror(-rc), b->ep, waiting);
}

/* The buffers the provider refused, offered again in turn; when it refuses
 * one, the rest wait for the next poll. An endpoint all of whose buffers
 * waited for RECV_STARVED_MS can receive nothing: the rail fails (its health
 * goes down: failover, or its comms fail), with the provider's answer in the
 * log. */
static void repost_waiting(struct srd_rail *rail) {
  while (rail->unposted) {
    struct srd_rail_buf *b = rail->unposted;
    int rc = post_one(rail, b);
    if (rc) {
      if (rail->unposted_on[b->ep] < RECV_BUFS_PER_EP || rail->failed) return;
      uint64_t now = srd_now_ms();
      if (!rail->starved_since_ms) rail->starved_since_ms = now;
      else if (now - rail->starved_since_ms > RECV_STARVED_MS) {
        SRD_WARN("rail %s: endpoint %d: the provider has taken none of its receive buffers back for %d ms (%s): "
                 "the rail fails", rail->name, b->ep, RECV_STARVED_MS, fi_strerror(-rc));
        rail->failed = 1;
      }
      return;
    }
    rail->unposted = b->next;
    rail->unposted_on[b->ep]--;
    rail->starved_since_ms = 0;
  }
}

static void send_buf_done(struct srd_op *op, int err, const char *errstr) {
  (void)err, (void)errstr;
  srd_rail_put_send_buf((struct srd_rail_buf *)op);
}

/* The control buffers, then FLUSH_SCRATCH bytes that flush reads land in
 * (hence FI_READ: the local side of an RMA read). */
static int setup_buffers(struct srd_rail *rail) {
  int nrecv = RECV_BUFS_PER_EP * rail->neps, total = nrecv + SEND_BUFS;
  size_t stride = buf_stride(rail), bytes = (size_t)total * stride + FLUSH_SCRATCH;
  rail->buf_mem = aligned_alloc(4096, (bytes + 4095) & ~(size_t)4095);
  if (!rail->buf_mem) return -FI_ENOMEM;
  memset(rail->buf_mem, 0, bytes);
  rail->flush_scratch = rail->buf_mem + (size_t)total * stride;
  /* Control buffers are only the local end of sends and receives: registered
   * only where the provider needs descriptors (FI_MR_LOCAL: efa), with local
   * access only. tcp;ofi_rxm 1.17 made a registration of them (key 0)
   * remotely readable: another peer's eager data and the cookie leaked. */
  int rc = 0;
  if (rail->mr_local &&
      (rc = srd_rail_reg(rail, rail->buf_mem, bytes, FI_SEND | FI_RECV | FI_READ, -1, -1, 0, &rail->buf_mr))) {
    SRD_WARN("rail %s: cannot register control buffers: %s", rail->name, fi_strerror(-rc));
    return rc;
  }
  for (int i = 0; i < total; i++) {
    struct srd_rail_buf *b = buf_at(rail, i);
    b->rail = rail;
    if (i < nrecv) {
      b->ep = i % rail->neps;
      if ((rc = post_recv_buf(rail, b))) return rc;
    } else {
      b->op.done = send_buf_done;
      srd_rail_put_send_buf(b);
    }
  }
  return 0;
}

static int open_endpoint(struct srd_rail *rail, int i) {
  struct fid_ep *ep;
  int rc = fi_endpoint(rail->domain, rail->info, &ep, NULL);
  if (rc) return rc;
  rail->ep[i] = ep;
  if ((rc = srd_rail_name_shm_endpoint(rail, ep, i))) return rc;
  if ((rc = fi_ep_bind(ep, &rail->av->fid, 0))) return rc;
  if ((rc = fi_ep_bind(ep, &rail->cq->fid, FI_TRANSMIT | FI_RECV))) return rc;
  /* LL and LL128 across nodes are only safe with 128-byte ordered device
   * writes (srd_ll_rule_for): ask efa for them on every endpoint (the tuner
   * probes the same). */
  if (!strcmp(rail->info->fabric_attr->prov_name, "efa")) {
    rail->ordered_128 = (i == 0 || rail->ordered_128) && srd_efa_write_order_128(ep) == 1;
    rail->device_writes = (i == 0 || rail->device_writes) && srd_efa_device_writes(ep) == 1;
    rail->keys_fence_writes =
        srd_efa_rekey_fences(rail->device_writes, (int)srd_param_int(SRD_PARAM_FAILOVER_REKEY));
    /* Only the "efa" fabric emulates; the long-read protocol needs our
     * device to read too (efa_rdm_interop_rdma_read), unknown counts as may. */
    rail->sends_read = !strcmp(rail->info->fabric_attr->name, "efa") && srd_efa_device_reads(ep) != 0;
    if (srd_efa_forbid_shm(ep) == 0)
      SRD_INFO(NCCL_INIT | NCCL_NET, "efa endpoint %d: refused FI_OPT_SHARED_MEMORY_PERMITTED=false; host-local peers "
               "may go through its shm path", i);
  }
  /* GPU rails ask their provider for no CUDA calls of its own; where it
   * refuses, the device's GPU decision already knew (srd_gdr_device). */
  char why[200];
  if ((rail->info->caps & FI_HMEM) && srd_gdr_forbid_cuda_calls(ep, why, sizeof(why)) == 0)
    SRD_INFO(NCCL_INIT | NCCL_NET, "%s endpoint %d: %s", rail->info->fabric_attr->prov_name, i, why);
  if ((rc = fi_enable(ep))) return rc;
  size_t limit = send_limit(rail->info, ep);
  if (i == 0 || limit < rail->max_send) rail->max_send = limit;
  size_t len = SRD_EP_NAME_MAX;
  if ((rc = fi_getname(&ep->fid, rail->ep_name[i], &len))) return rc;
  rail->ep_name_len = len;
  srd_av_index_init(&rail->av_index, len); /* before any peer is inserted */
  return 0;
}

int srd_rail_open(struct srd_rail *rail, int index, const struct fi_info *info, int neps, size_t buf_size,
                  bool thread_safe, const struct srd_rail_handlers *h) {
  memset(rail, 0, sizeof(*rail));
  rail->index = index;
  rail->h = *h;
  rail->neps = neps;
  rail->buf_size = buf_size;
  rail->reorder = (int)srd_param_int(SRD_PARAM_TEST_REORDER);
  rail->recv_refuse = (int)srd_param_int(SRD_PARAM_TEST_RECV_REFUSE);
  snprintf(rail->name, sizeof(rail->name), "%s", info->domain_attr->name);
  const char *step = "fi_dupinfo";
  int rc = -FI_ENOMEM;
  if (!(rail->info = fi_dupinfo(info))) goto fail;
  if (thread_safe) {
    rail->info->domain_attr->threading = FI_THREAD_SAFE;
    rail->thread_safe = true;
    pthread_mutex_init(&rail->cq_lock, NULL);
    pthread_mutex_init(&rail->post_lock, NULL);
  }
  rail->virt_addr = !!(info->domain_attr->mr_mode & FI_MR_VIRT_ADDR);
  rail->mr_local = !!(info->domain_attr->mr_mode & FI_MR_LOCAL);
  rail->max_write = srd_rail_write_limit(info);
  rail->len_in_data = info->domain_attr->cq_data_size >= 8;
  rail->source = !!(info->caps & FI_SOURCE);
  rail->write_source = rail->source && !strstr(info->fabric_attr->prov_name, "ofi_rxm");
  rail->keep_av = !strcmp(info->fabric_attr->prov_name, "shm") || !strcmp(info->fabric_attr->prov_name, "efa");
  step = "fi_fabric";
  if ((rc = fi_fabric(info->fabric_attr, &rail->fabric, NULL))) goto fail;
  step = "fi_domain";
  if ((rc = fi_domain(rail->fabric, rail->info, &rail->domain, NULL))) goto fail;
  struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
  step = "fi_av_open";
  if ((rc = fi_av_open(rail->domain, &av_attr, &rail->av, NULL))) goto fail;
  struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_NONE,
                               .size = (size_t)srd_rail_cq_size(info)};
  step = "fi_cq_open";
  if ((rc = fi_cq_open(rail->domain, &cq_attr, &rail->cq, NULL))) goto fail;
  step = "endpoint";
  for (int i = 0; i < neps; i++)
    if ((rc = open_endpoint(rail, i))) goto fail;
  step = "control buffers";
  if ((rc = setup_buffers(rail))) goto fail;
  if (rail->reorder && (!(rail->held = calloc(MAX_HELD, sizeof(*rail->held))) ||
                        !(rail->held_src = calloc(MAX_HELD, sizeof(*rail->held_src)))))
    goto fail;
  return 0;
fail:
  SRD_WARN("rail %s: %s failed: %s (%d)", rail->name, step, fi_strerror(rc < 0 ? -rc : rc), rc);
  srd_rail_close(rail);
  return rc ? rc : -FI_ENOMEM;
}

void srd_rail_close(struct srd_rail *rail) {
  for (int i = 0; i < SRD_MAX_EPS_PER_RAIL; i++)
    if (rail->ep[i]) fi_close(&rail->ep[i]->fid);
  if (rail->buf_mr) fi_close(&rail->buf_mr->fid);
  if (rail->cq) fi_close(&rail->cq->fid);
  if (rail->av) fi_close(&rail->av->fid);
  if (rail->domain) fi_close(&rail->domain->fid);
  if (rail->fabric) fi_close(&rail->fabric->fid);
  if (rail->info) fi_freeinfo(rail->info);
  free(rail->buf_mem);
  srd_av_index_free(&rail->av_index);
  free(rail->held);
  free(rail->held_src);
  srd_rail_listen_checks_free(rail);
  if (rail->thread_safe) {
    pthread_mutex_destroy(&rail->cq_lock);
    pthread_mutex_destroy(&rail->post_lock);
  }
  memset(rail, 0, sizeof(*rail));
}

/* Reject an address that cannot be one of this provider's (a corrupt handle,
 * a forged hello) before the provider sees it: some providers' AVs misbehave
 * afterwards. */
static bool plausible_address(const struct srd_rail *rail, const void *name) {
  sa_family_t family;
  memcpy(&family, name, sizeof(family));
  switch (rail->info->addr_format) {
  case FI_SOCKADDR_IN:
    return family == AF_INET;
  case FI_SOCKADDR_IN6:
    return family == AF_INET6;
  case FI_SOCKADDR:
    return family == AF_INET || family == AF_INET6;
  default:
    return true;
  }
}

int srd_rail_av_insert(struct srd_rail *rail, const void *name, fi_addr_t *addr) {
  /* A name already in the AV was checked when it came in, and shm 1.17 may
   * have removed its owner's region file since (the owner lives on; peers
   * that mapped the region keep it): only new names are checked. */
  int known = srd_av_index_find_name(&rail->av_index, name);
  if (known >= 0) {
    struct srd_av_entry *e = &rail->av_index.e[known];
    if (e->kept)
      e->kept = false; /* the comm takes over the rail's reference */
    else
      e->refs++;
    *addr = e->addr;
    return 0;
  }
  if (!strcmp(rail->info->fabric_attr->prov_name, "shm")) {
    int rc = srd_rail_shm_name_check(rail, name);
    if (rc) {
      SRD_WARN("rail %s: peer address refused: %s", rail->name,
               rc == -FI_EHOSTDOWN ? "its process is gone" : "not one of ours (shape, owner, or our own)");
      return rc;
    }
  } else if (!plausible_address(rail, name)) {
    SRD_WARN("rail %s: peer address is not of this provider's format", rail->name);
    return -FI_EINVAL;
  }
  fi_addr_t a = FI_ADDR_NOTAVAIL;
  srd_rail_cq_lock(rail);
  int n = fi_av_insert(rail->av, name, 1, &a, 0, NULL);
  srd_rail_cq_unlock(rail);
  if (n != 1) {
    SRD_WARN("rail %s: fi_av_insert failed (%d)", rail->name, n);
    return n < 0 ? n : -FI_EINVAL;
  }
  int i = srd_av_index_add(&rail->av_index, name, a);
  if (i < 0) {
    srd_rail_cq_lock(rail);
    fi_av_remove(rail->av, &a, 1, 0);
    srd_rail_cq_unlock(rail);
    return i;
  }
  *addr = a;
  return 0;
}

void srd_rail_av_remove(struct srd_rail *rail, fi_addr_t addr) {
  int i = srd_av_index_find_addr(&rail->av_index, addr);
  if (i < 0) return;
  struct srd_av_entry *e = &rail->av_index.e[i];
  if (e->kept || --e->refs > 0) return;
  if (rail->keep_av) {
    e->refs = 1;
    e->kept = true;
    return;
  }
  srd_av_index_del(&rail->av_index, i);
  srd_rail_cq_lock(rail);
  fi_av_remove(rail->av, &addr, 1, 0);
  srd_rail_cq_unlock(rail);
}

struct srd_rail_buf *srd_rail_get_send_buf(struct srd_rail *rail) {
  struct srd_rail_buf *b = rail->free_send;
  if (!b) return NULL;
  rail->free_send = b->next;
  rail->nfree_send--;
  b->op.owner = NULL;
  return b;
}

void srd_rail_put_send_buf(struct srd_rail_buf *buf) {
  struct srd_rail *rail = buf->rail;
  buf->op.done = send_buf_done;
  buf->next = rail->free_send;
  rail->free_send = buf;
  rail->nfree_send++;
}

int srd_rail_send(struct srd_rail *rail, int ep, struct srd_rail_buf *buf, size_t len, fi_addr_t dest) {
  SRD_STAT(SRD_STAT_FI_SEND);
  return (int)fi_send(rail->ep[ep], buf->data, len, rail->mr_local ? fi_mr_desc(rail->buf_mr) : NULL, dest,
                      &buf->op.fi_ctx);
}

/* Endpoint 0 in our own AV, inserted at the first loopback operation; our
 * own name needs none of a peer's checks (shm refuses it as a peer's). */
static int rail_self(struct srd_rail *rail) {
  if (rail->has_self) return 0;
  srd_rail_cq_lock(rail);
  int n = fi_av_insert(rail->av, rail->ep_name[0], 1, &rail->self, 0, NULL);
  srd_rail_cq_unlock(rail);
  if (n != 1) return n < 0 ? n : -FI_EINVAL;
  rail->has_self = true;
  return 0;
}

int srd_rail_flush_read(struct srd_rail *rail, uint64_t raddr, uint64_t key, struct srd_op *op) {
  int rc = rail_self(rail);
  return rc ? rc : srd_rail_loopback_read(rail, rail->flush_scratch, FLUSH_READ_BYTES,
                                          rail->mr_local ? fi_mr_desc(rail->buf_mr) : NULL, raddr, key, op);
}

int srd_rail_loopback_read(struct srd_rail *rail, void *dst, size_t len, void *desc, uint64_t raddr, uint64_t key,
                           struct srd_op *op) {
  int rc = rail_self(rail);
  return rc ? rc : (int)fi_read(rail->ep[0], dst, len, desc, rail->self, raddr, key, &op->fi_ctx);
}

int srd_rail_loopback_write(struct srd_rail *rail, const void *src, size_t len, void *desc, uint64_t raddr,
                            uint64_t key, struct srd_op *op) {
  int rc = rail_self(rail);
  if (rc) return rc;
  /* Completed means placed: the next loopback write is posted only then. */
  struct iovec iov = {(void *)src, len};
  struct fi_rma_iov rma = {raddr, len, key};
  struct fi_msg_rma msg = {.msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = rail->self, .rma_iov = &rma,
                           .rma_iov_count = 1, .context = &op->fi_ctx};
  return (int)fi_writemsg(rail->ep[0], &msg, FI_COMPLETION | FI_DELIVERY_COMPLETE);
}

static int is_recv_buf(const struct srd_rail *rail, const void *ctx) {
  const char *p = ctx;
  return p >= rail->buf_mem && p < rail->buf_mem + (size_t)RECV_BUFS_PER_EP * rail->neps * buf_stride(rail);
}

static void dispatch(struct srd_rail *rail, const struct fi_cq_data_entry *e, fi_addr_t src) {
  if (e->flags & FI_REMOTE_CQ_DATA && (e->flags & FI_RMA || !e->op_context)) {
    size_t len = rail->len_in_data ? (size_t)(e->data >> 32) : e->len;
    rail->h.on_remote_write(rail->h.arg, rail, (uint32_t)e->data, len, src);
    return;
  }
  if (!e->op_context) return;
  if (is_recv_buf(rail, e->op_context)) {
    struct srd_rail_buf *b = (struct srd_rail_buf *)e->op_context;
    rail->h.on_message(rail->h.arg, rail, b->data, e->len, src);
    repost(rail, b);
    return;
  }
  struct srd_op *op = e->op_context;
  op->done(op, 0, NULL);
}

static void dispatch_error(struct srd_rail *rail, const struct srd_rail_batch *b) {
  if (b->err_context && is_recv_buf(rail, b->err_context)) {
    /* A receive buffer failed: keep it posted unless the rail is gone. */
    SRD_WARN("%s", b->errstr);
    if (b->err != FI_ECANCELED) repost(rail, (struct srd_rail_buf *)b->err_context);
  } else if (b->err_context) {
    struct srd_op *op = b->err_context;
    op->done(op, b->err ? -b->err : -FI_EIO, b->errstr);
  } else {
    rail->h.on_rail_error(rail->h.arg, rail, -b->err, b->errstr);
  }
}

/* Test mode: release completions in a shuffled order, holding some back for
 * a later poll, as an unordered transport may. */
static void dispatch_reordered(struct srd_rail *rail, struct fi_cq_data_entry *e, fi_addr_t *src, int n) {
  for (int i = n - 1; i > 0; i--) {
    int j = rand() % (i + 1);
    struct fi_cq_data_entry t = e[i];
    fi_addr_t ts = src[i];
    e[i] = e[j], e[j] = t;
    src[i] = src[j], src[j] = ts;
  }
  for (int i = 0; i < n; i++) {
    if (rail->nheld < MAX_HELD && rand() % 2) {
      rail->held_src[rail->nheld] = src[i];
      rail->held[rail->nheld++] = e[i];
      continue;
    }
    dispatch(rail, &e[i], src[i]);
  }
  int release = rail->nheld ? 1 + rand() % rail->nheld : 0;
  while (release-- > 0) {
    int k = rand() % rail->nheld;
    struct fi_cq_data_entry x = rail->held[k];
    fi_addr_t xs = rail->held_src[k];
    rail->nheld--;
    rail->held[k] = rail->held[rail->nheld];
    rail->held_src[k] = rail->held_src[rail->nheld];
    dispatch(rail, &x, xs);
  }
}

static int reap_error(struct srd_rail *rail, struct srd_rail_batch *b) {
  struct fi_cq_err_entry err = {0};
  char prov_msg[256] = "";
  int rc = (int)fi_cq_readerr(rail->cq, &err, 0);
  if (rc < 0) return rc == -FI_EAGAIN ? 0 : rc;
  const char *pstr = fi_cq_strerror(rail->cq, err.prov_errno, err.err_data, prov_msg, sizeof(prov_msg));
  snprintf(b->errstr, sizeof(b->errstr), "rail %s: %s (provider errno %d: %s)", rail->name, fi_strerror(err.err),
           err.prov_errno, pstr ? pstr : "");
  b->has_err = true;
  b->err = err.err;
  b->err_context = err.op_context;
  return 1;
}

int srd_rail_reap(struct srd_rail *rail, struct srd_rail_batch *b) {
  b->n = 0;
  b->has_err = false;
  srd_rail_cq_lock(rail);
  /* Where the provider has FI_SOURCE, every completion says who sent it;
   * the comm layer checks it against the comm's peer. */
  int n = rail->source ? (int)fi_cq_readfrom(rail->cq, b->e, SRD_RAIL_BATCH, b->src)
                       : (int)fi_cq_read(rail->cq, b->e, SRD_RAIL_BATCH);
  if (n == -FI_EAVAIL) n = reap_error(rail, b);
  srd_rail_cq_unlock(rail);
  SRD_STAT(SRD_STAT_CQ_READ);
  if (n == -FI_EAGAIN) SRD_STAT(SRD_STAT_CQ_EMPTY);
  if (n == -FI_EAGAIN) return 0;
  if (b->has_err) return n;
  if (n < 0) {
    SRD_WARN("rail %s: fi_cq_read failed: %s", rail->name, fi_strerror(-n));
    return n;
  }
  if (!rail->source)
    for (int i = 0; i < n; i++) b->src[i] = FI_ADDR_NOTAVAIL;
  b->n = n;
  return n;
}

void srd_rail_dispatch(struct srd_rail *rail, struct srd_rail_batch *b) {
  if (rail->reorder) dispatch_reordered(rail, b->e, b->src, b->n);
  else
    for (int i = 0; i < b->n; i++) dispatch(rail, &b->e[i], b->src[i]);
  if (b->has_err) dispatch_error(rail, b);
  if (rail->unposted) repost_waiting(rail);
}

int srd_rail_poll(struct srd_rail *rail, int max) {
  struct srd_rail_batch b;
  int total = 0;
  if (rail->unposted) repost_waiting(rail);
  while (total < max) {
    int n = srd_rail_reap(rail, &b);
    if (n < 0) return n;
    if (n == 0) break;
    srd_rail_dispatch(rail, &b);
    total += n;
    if (!b.has_err && n < SRD_RAIL_BATCH) break;
  }
  if (rail->reorder && total == 0 && rail->nheld) {
    b.n = 0;
    b.has_err = false;
    srd_rail_dispatch(rail, &b);
  }
  return total;
}

/* Never down where the name is no kernel interface (efa, shm): there only
 * the CQ tells (srd_dev_open says so once per device). */
int srd_rail_link_down(const struct srd_rail *rail) { return srd_nic_link_down(rail->name) == 1; }
