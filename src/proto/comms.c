/* The device's comm table and a comm's lifetime: allocation, the peer's
 * paths, failure, retirement and freeing. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srd/log.h"
#include "srd/proto.h"
#include "srd/sys.h"

int srd_dev_comms_init(struct srd_dev *dev) {
  dev->comms = calloc(SRD_MAX_COMMS, sizeof(*dev->comms));
  dev->by_write_id = calloc(SRD_MAX_COMMS, sizeof(*dev->by_write_id));
  dev->write_id_retired_s = calloc(SRD_MAX_COMMS, sizeof(*dev->write_id_retired_s));
  dev->gen = calloc(SRD_MAX_COMMS, sizeof(*dev->gen));
  dev->free_index = malloc(SRD_MAX_COMMS * sizeof(*dev->free_index));
  if (!dev->comms || !dev->by_write_id || !dev->write_id_retired_s || !dev->gen || !dev->free_index) {
    srd_dev_comms_fini(dev);
    return SRD_ERR_SYSTEM;
  }
  /* Lowest index on top: the scans stay short while few comms are open. */
  for (int i = 0; i < SRD_MAX_COMMS; i++) dev->free_index[i] = SRD_MAX_COMMS - 1 - (uint32_t)i;
  dev->nfree = SRD_MAX_COMMS;
  dev->comms_end = 0;
  return SRD_OK;
}

void srd_dev_comms_fini(struct srd_dev *dev) {
  free(dev->comms);
  free(dev->by_write_id);
  dev->by_write_id = NULL;
  free(dev->write_id_retired_s);
  dev->write_id_retired_s = NULL;
  free(dev->gen);
  free(dev->free_index);
  dev->comms = NULL;
  dev->gen = NULL;
  dev->free_index = NULL;
  dev->nfree = 0;
  srd_pools_free(dev);
}

struct srd_comm *srd_dev_comm_by_id(struct srd_dev *dev, uint32_t id) {
  struct srd_comm *c = dev->comms[id & (SRD_MAX_COMMS - 1)];
  return c && c->id == id ? c : NULL;
}

size_t srd_comm_size(bool is_send) {
  return is_send ? sizeof(struct srd_send_comm) : sizeof(struct srd_recv_comm);
}

/* A write id given back rests this long before a new comm draws it: a slow
 * peer's late write for its closed comm then names no comm (dropped) rather
 * than another peer's, which the dispatch would take for a guess and cut the
 * writer off for. */
#define WRITE_ID_REST_S 600

/* A random free write id, rested where one is (there are as many ids as
 * comm indexes, so one is free whenever an index is). */
static uint32_t draw_write_id(const struct srd_dev *dev) {
  uint32_t now_s = (uint32_t)(srd_now_ms() / 1000) + 1, w = (uint32_t)srd_random64() & (SRD_MAX_COMMS - 1);
  uint32_t free_id = UINT32_MAX;
  for (uint32_t k = 0; k < SRD_MAX_COMMS; k++, w = (w + 1) & (SRD_MAX_COMMS - 1)) {
    if (dev->by_write_id[w]) continue;
    uint32_t retired = dev->write_id_retired_s[w];
    if (!retired || now_s - retired >= WRITE_ID_REST_S) return w;
    if (free_id == UINT32_MAX) free_id = w;
  }
  return free_id;
}

struct srd_comm *srd_comm_alloc(struct srd_dev *dev, bool is_send) {
  if (dev->nfree == 0) {
    SRD_WARN("device %d: all %d comms in use", dev->index, SRD_MAX_COMMS);
    return NULL;
  }
  struct srd_comm *c = dev->free_comms[is_send];
  if (c) {
    dev->free_comms[is_send] = c->next_closed;
    memset(c, 0, srd_comm_size(is_send));
  } else if (!(c = calloc(1, srd_comm_size(is_send)))) {
    return NULL;
  }
  uint32_t idx = dev->free_index[--dev->nfree];
  c->magic = SRD_COMM_MAGIC;
  while (!(c->token = srd_random64())) {
  }
  c->dev = dev;
  c->is_send = is_send;
  /* The generation tells a message for a closed comm from one for the comm
   * that reuses its index; it is never 0, so no id is 0. */
  if (++dev->gen[idx] == 0) dev->gen[idx] = 1;
  c->id = idx | (uint32_t)dev->gen[idx] << SRD_COMM_INDEX_BITS;
  c->last_heard_ms = srd_now_ms();
  c->listener_addr = FI_ADDR_NOTAVAIL;
  dev->comms[idx] = c;
  if (!is_send) {
    uint32_t w = draw_write_id(dev);
    dev->by_write_id[w] = c;
    c->write_id = (uint16_t)w;
  }
  if ((int)idx >= dev->comms_end) dev->comms_end = (int)idx + 1;
  dev->ncomms++;
  return c;
}

static void detach(struct srd_comm *c) {
  struct srd_dev *dev = c->dev;
  uint32_t idx = c->id & (SRD_MAX_COMMS - 1);
  if (!dev->comms || dev->comms[idx] != c) return;
  dev->comms[idx] = NULL;
  if (!c->is_send) {
    dev->by_write_id[c->write_id] = NULL;
    dev->write_id_retired_s[c->write_id] = (uint32_t)(srd_now_ms() / 1000) + 1;
  }
  dev->free_index[dev->nfree++] = idx;
  while (dev->comms_end > 0 && !dev->comms[dev->comms_end - 1]) dev->comms_end--;
  dev->ncomms--;
}

void srd_comm_retire(struct srd_comm *c) {
  detach(c);
  c->next_closed = c->dev->closed;
  c->dev->closed = c;
}

void srd_dev_free_closed(struct srd_dev *dev, bool all) {
  for (struct srd_comm **p = &dev->closed; *p;) {
    struct srd_comm *c = *p;
    if (all || c->ops_in_flight == 0) {
      *p = c->next_closed;
      srd_comm_free(c);
    } else {
      p = &c->next_closed;
    }
  }
}

void srd_comm_free(struct srd_comm *c) {
  struct srd_dev *dev = c->dev;
  if (c->listener_addr != FI_ADDR_NOTAVAIL) dev->rail_ops->av_remove(&dev->rails[0], c->listener_addr);
  if (c->inserted)
    for (int i = 0; i < dev->nrails * c->remote_rails * c->remote_eps; i++)
      if (c->inserted[i] != FI_ADDR_NOTAVAIL)
        dev->rail_ops->av_remove(&dev->rails[i / (c->remote_rails * c->remote_eps)], c->inserted[i]);
  while (c->early) {
    struct srd_early_msg *e = c->early;
    c->early = e->next;
    free(e);
  }
  if (c->is_send) {
    struct srd_send_comm *s = srd_send_comm(c);
    for (int i = 0; i < SRD_CTS_RECORDS; i++)
      if (s->cts[i]) {
        s->cts[i]->next_free = dev->free_cts;
        dev->free_cts = s->cts[i];
      }
  } else {
    struct srd_recv_comm *r = srd_recv_comm(c);
    while (r->unexpected) {
      struct srd_unexpected *u = r->unexpected;
      r->unexpected = u->next;
      free(u);
    }
  }
  srd_req_put_all(c);
  detach(c);
  free(c->peer);
  free(c->inserted);
  c->peer = NULL;
  c->inserted = NULL;
  c->magic = 0;
  c->next_closed = dev->free_comms[c->is_send];
  dev->free_comms[c->is_send] = c;
}

bool srd_comm_usable(const struct srd_comm *c, bool is_send) {
  if (c && c->magic == SRD_COMM_MAGIC && c->is_send == is_send) return true;
  SRD_WARN("%s comm %p is %s", is_send ? "send" : "recv", (const void *)c,
           !c ? "NULL" : c->magic != SRD_COMM_MAGIC ? "closed (or not a comm)" : "of the other direction");
  return false;
}

void srd_comm_fail(struct srd_comm *c, int result, const char *fmt, ...) {
  if (c->result) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->error, sizeof(c->error), fmt, ap);
  va_end(ap);
  c->result = result;
  SRD_WARN("%s comm %#x: %s", c->is_send ? "send" : "recv", c->id, c->error);
}

/* Local rail i talks to remote rail i mod R. A remote rail r also writes into
 * local rail r mod L, and SRD accepts traffic only from addresses in the AV,
 * so each local rail inserts both its target and the rails that target it. */
static bool rail_needs(int local, int nlocal, int remote, int nremote) {
  return remote == local % nremote || remote % nlocal == local;
}

int srd_comm_set_peer(struct srd_comm *c, const struct srd_msg_peer *p) {
  struct srd_dev *dev = c->dev;
  int rpaths = p->nrails * p->neps;
  if (p->name_len != dev->rails[0].ep_name_len) {
    srd_comm_fail(c, SRD_ERR_SYSTEM, "peer address length %d differs from ours (%zu): different providers on the two sides?",
                  p->name_len, dev->rails[0].ep_name_len);
    return c->result;
  }
  c->remote_rails = p->nrails;
  c->remote_eps = p->neps;
  c->peer = calloc((size_t)dev->npaths, sizeof(*c->peer));
  c->inserted = malloc((size_t)dev->nrails * rpaths * sizeof(*c->inserted));
  if (!c->peer || !c->inserted) {
    srd_comm_fail(c, SRD_ERR_SYSTEM, "out of memory");
    return c->result;
  }
  for (int i = 0; i < dev->nrails * rpaths; i++) c->inserted[i] = FI_ADDR_NOTAVAIL;
  for (int l = 0; l < dev->nrails; l++)
    for (int r = 0; r < p->nrails; r++) {
      if (!rail_needs(l, dev->nrails, r, p->nrails)) continue;
      for (int e = 0; e < p->neps; e++) {
        const uint8_t *name = p->names + (size_t)(r * p->neps + e) * p->name_len;
        fi_addr_t *slot = &c->inserted[l * rpaths + r * p->neps + e];
        int rc = dev->rail_ops->av_insert(&dev->rails[l], name, slot);
        if (rc) {
          srd_comm_fail(c, rc == -FI_EHOSTDOWN ? SRD_ERR_REMOTE : SRD_ERR_SYSTEM, "cannot insert the peer's rail %d into the address vector of rail %s", r,
                        dev->rails[l].name);
          return c->result;
        }
      }
    }
  for (int path = 0; path < dev->npaths; path++) {
    int l = path / dev->neps, e = path % dev->neps;
    int r = l % p->nrails, re = e % p->neps;
    c->peer[path] = c->inserted[l * rpaths + r * p->neps + re];
  }
  return SRD_OK;
}
