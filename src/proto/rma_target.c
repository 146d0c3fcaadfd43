/* One-sided RMA, the target's side and the windows: stripes counted per op,
 * signals applied in op order, acknowledgements (include/srd/rma.h). */
#include <stdlib.h>
#include <string.h>

#include "srd/log.h"
#include "srd/param.h"
#include "srd/rma.h"
#include "srd/sys.h"

int srd_rma_win_new(struct srd_rma_coll *coll, void *base, size_t len, int cuda_dev, unsigned flags, int dmabuf_fd,
                    uint64_t offset, struct srd_rma_win **out, struct srd_rma_remote *mine) {
  struct srd_dev *dev = coll->dev;
  struct srd_rma_win *w = calloc(1, sizeof(*w));
  if (w) w->remote = calloc((size_t)coll->nranks, sizeof(*w->remote));
  if (!w || !w->remote) {
    free(w);
    return SRD_ERR_SYSTEM;
  }
  /* Registered on its own, never shared with another registration: the
   * keys peers get reach exactly this window. */
  void *handle;
  int rc = srd_dev_reg(dev, base, len, 0 /* the type: cuda_dev says it */, cuda_dev, SRD_MR_RMA, dmabuf_fd, offset, &handle);
  if (rc) {
    SRD_WARN("RMA window of %zu bytes at %p: registration failed (%d)", len, base, rc);
    free(w->remote);
    free(w);
    return SRD_ERR_SYSTEM;
  }
  w->mrs = handle;
  w->coll = coll;
  w->base = base;
  w->len = len;
  w->cuda_dev = cuda_dev;
  w->flags = flags;
  w->nic_signals = (cuda_dev >= 0 && dev->gdr.nic_writes) || srd_param_int(SRD_PARAM_TEST_NIC_SIGNALS);
  memset(mine, 0, sizeof(*mine));
  mine->addr = dev->rails[0].virt_addr ? (uint64_t)(uintptr_t)base : 0;
  mine->len = len;
  mine->nkeys = dev->nrails;
  for (int l = 0; l < dev->nrails; l++) mine->key[l] = dev->rail_ops->mr_key(w->mrs->mr[l]);
  pthread_mutex_lock(&dev->lock);
  /* Peers may stripe gets of this window over our lanes: reads make no
   * completion here, so nothing else would start the threads that progress
   * those endpoints (tcp serves a read only when its endpoint is polled). */
  if (len >= dev->sched.threshold) srd_dev_want_lanes(dev);
  rc = cuda_dev >= 0 ? srd_rma_gpu_win(coll, w) : SRD_OK;
  if (!rc && coll->nwins == coll->cap_wins) {
    int cap = coll->cap_wins ? 2 * coll->cap_wins : 16;
    struct srd_rma_win **wins = realloc(coll->wins, (size_t)cap * sizeof(*wins));
    if (wins) {
      coll->wins = wins;
      coll->cap_wins = cap;
    } else {
      rc = SRD_ERR_SYSTEM;
    }
  }
  if (rc) {
    pthread_mutex_unlock(&dev->lock);
    srd_dev_dereg(dev, handle);
    free(w->remote);
    free(w);
    return rc;
  }
  w->index = (uint32_t)coll->nwins;
  coll->wins[coll->nwins++] = w;
  w->remote[coll->rank] = *mine;
  w->magic = SRD_RMA_COLL_MAGIC;
  pthread_mutex_unlock(&dev->lock);
  *out = w;
  return SRD_OK;
}

int srd_rma_win_set_remote(struct srd_rma_win *w, int rank, const struct srd_rma_remote *r) {
  struct srd_rma_coll *coll = w->coll;
  if (r->nkeys < 1 || r->nkeys > SRD_MAX_RAILS) {
    SRD_WARN("RMA window %u: rank %d describes its copy with %d keys", w->index, rank, r->nkeys);
    return SRD_ERR_REMOTE;
  }
  pthread_mutex_lock(&coll->dev->lock);
  w->remote[rank] = *r;
  pthread_mutex_unlock(&coll->dev->lock);
  return SRD_OK;
}

int srd_rma_win_free(struct srd_rma_win *w) {
  struct srd_dev *dev = w->coll->dev;
  pthread_mutex_lock(&dev->lock);
  w->coll->wins[w->index] = NULL;
  w->magic = 0;
  pthread_mutex_unlock(&dev->lock);
  /* Signals and self copies queued into the window land before the
   * registration (and maybe the memory) goes. Out of the lock: nothing new
   * is queued into a window no longer listed, and progress must not wait on
   * the GPU. A loopback signal op in flight into it is waited for, bounded:
   * its key must stay valid until it completes. */
  int rc = srd_rma_gpu_sync(w);
  pthread_mutex_lock(&dev->lock);
  if (!srd_rma_nic_settle(w->coll, w->index)) {
    SRD_WARN("RMA window %u: deregistered with a loopback signal op into it still in flight", w->index);
    rc = SRD_ERR_SYSTEM;
  }
  pthread_mutex_unlock(&dev->lock);
  srd_dev_dereg(dev, w->mrs);
  free(w->shadow);
  free(w->pending);
  free(w->queued);
  free(w->remote);
  free(w);
  return rc;
}

bool srd_rma_win_valid(const struct srd_rma_coll *coll, const void *h) {
  for (int i = 0; i < coll->nwins; i++)
    if (coll->wins[i] && coll->wins[i] == h) return true;
  return false;
}

int srd_rma_signal_target(struct srd_rma_coll *coll, const struct srd_msg_rma_signal *m, int rank, char **word,
                          struct srd_log_limit *limit) {
  struct srd_rma_win *w = m->window < (uint32_t)coll->nwins ? coll->wins[m->window] : NULL;
  uint64_t len = w ? w->remote[rank].len : 0;
  const char *why = NULL;
  if (!w) why = "no such window";
  else if (m->offset % 8) why = "not 8-byte aligned";
  else if (m->offset >= len || len - m->offset < 8) why = "outside the window";
  if (why) {
    if (!limit || srd_log_limit_pass(limit))
      SRD_WARN("RMA signal at offset %llu of window %u of rank %d: %s", (unsigned long long)m->offset, m->window, rank,
               why);
    return SRD_ERR_ARG;
  }
  if (rank == coll->rank) *word = w->base + m->offset;
  return SRD_OK;
}

/* Apply, in order, every op of the peer whose stripes and signal are all in. */
static void apply_ready(struct srd_rma_peer *p) {
  for (;;) {
    struct srd_rma_slot *s = &p->slots[p->next_apply % SRD_RMA_SEQ_WINDOW];
    if (!s->known || (s->signal && !s->signal_in) || (uint32_t)__builtin_popcount(s->mask) != s->nstripes) break;
    if (s->signal) {
      struct srd_rma_coll *coll = p->coll;
      char *word = NULL;
      int rc = srd_rma_signal_target(coll, &s->sig, coll->rank, &word, &coll->dev->foreign_log)
                   ? SRD_OK /* logged: a forged signal fails nothing */
                   : srd_rma_apply(coll->wins[s->sig.window], word, s->sig.op, s->sig.value);
      if (rc) srd_rma_coll_fail(coll, rc);
    }
    memset(s, 0, sizeof(*s));
    p->next_apply++;
    if (p->next_apply - p->acked_sent >= SRD_RMA_ACK_EVERY) srd_rma_send_ack(p);
  }
}

/* The slot of an op whose sequence (mod window) is seq7 or full: ops the
 * origin may send lie within the window after the next one to apply. */
static struct srd_rma_slot *slot_of(struct srd_rma_peer *p, uint32_t full) {
  return &p->slots[full % SRD_RMA_SEQ_WINDOW];
}

static bool shape_agrees(struct srd_comm *c, struct srd_rma_slot *s, uint32_t seq, unsigned nstripes, bool signal) {
  if (!s->known) {
    s->known = true;
    s->nstripes = (uint8_t)nstripes;
    s->signal = signal;
    return true;
  }
  if (s->nstripes == nstripes && s->signal == signal) return true;
  SRD_WARN_LIMITED(&c->dev->foreign_log,
                   "comm %#x: RMA op %u arrives as %u stripe(s)%s, earlier as %u%s: dropped (forged?)", c->id, seq,
                   nstripes, signal ? " with a signal" : "", s->nstripes, s->signal ? " with a signal" : "");
  return false;
}

void srd_rma_on_write(struct srd_comm *c, uint32_t imm, size_t len) {
  struct srd_rma_peer *p = c->rma;
  struct srd_rma_imm v;
  (void)len; /* the key and its exact range bound where a write lands */
  c->writes_done++;
  if (srd_rma_imm_unpack(imm, &v)) {
    SRD_WARN_LIMITED(&c->dev->foreign_log,
                     "comm %#x: RMA write with immediate data %#x naming no stripe: dropped (forged?)", c->id, imm);
    return;
  }
  uint32_t seq = p->next_apply + ((v.seq - p->next_apply) & (SRD_RMA_SEQ_WINDOW - 1));
  struct srd_rma_slot *s = slot_of(p, seq);
  if (!shape_agrees(c, s, seq, v.nstripes, v.signal)) return;
  if (s->mask >> v.stripe & 1) {
    SRD_WARN_LIMITED(&c->dev->foreign_log, "comm %#x: RMA op %u stripe %u landed twice: dropped", c->id, seq, v.stripe);
    return;
  }
  s->mask |= 1u << v.stripe;
  apply_ready(p);
}

void srd_rma_on_signal(struct srd_comm *c, const struct srd_msg_rma_signal *m) {
  struct srd_rma_peer *p = c->rma;
  if (m->seq - p->next_apply >= SRD_RMA_SEQ_WINDOW) {
    SRD_WARN_LIMITED(&c->dev->foreign_log, "comm %#x: RMA signal of op %u outside the ops expected (%u..%u): dropped",
                     c->id, m->seq, p->next_apply, p->next_apply + SRD_RMA_SEQ_WINDOW - 1);
    return;
  }
  struct srd_rma_slot *s = slot_of(p, m->seq);
  char *word;
  if (srd_rma_signal_target(p->coll, m, p->coll->rank, &word, &c->dev->foreign_log)) return; /* logged */
  if (!shape_agrees(c, s, m->seq, m->nstripes, true)) return;
  if (s->signal_in) {
    SRD_WARN_LIMITED(&c->dev->foreign_log, "comm %#x: RMA op %u signalled twice: dropped", c->id, m->seq);
    return;
  }
  s->signal_in = true;
  s->sig = *m;
  apply_ready(p);
}
