/* The comm layer: the listen/connect/accept handshake, closing, and the
 * dispatch of incoming messages to the handshake or to the comm they name.
 * Every call is made with the device lock held. The facade (src/comm/net.c,
 * include/srd/net.h) takes the locks and translates results for NCCL. */
#ifndef SRD_COMM_H
#define SRD_COMM_H

#include "srd/proto.h"

/* A hello that waits for accept. */
struct srd_pending_hello {
  struct srd_pending_hello *next;
  struct srd_msg_peer peer;
  uint8_t names[];
};

#define SRD_LISTENER_ANSWERED 64

struct srd_listener {
  uint64_t magic;       /* SRD_LISTENER_MAGIC until closed */
  struct srd_dev *dev;
  struct srd_listener *next; /* on dev->listeners, or dev->free_listeners once closed */
  uint32_t id; /* its cookie derives from it (handshake.c) */
  struct srd_pending_hello *hellos;
  int nhellos;
  unsigned dropped_hellos;    /* over the cap: logged at 1, 2, 4, 8... */
  struct srd_comm *answering; /* answers not yet delivered (next_connecting links them) */
  int nanswering;
  uint64_t answered[SRD_LISTENER_ANSWERED]; /* tokens of the last hellos answered: later copies are dropped */
  unsigned nanswered;
};

/* Handshake (src/comm/handshake.c). */
int srd_listen(struct srd_dev *dev, void *handle, struct srd_listener **out);
/* *out stays NULL until the listener answered; call again. */
int srd_connect(struct srd_dev *dev, void *handle, struct srd_comm **out);
int srd_accept(struct srd_listener *l, struct srd_comm **out);
void srd_close_listen(struct srd_listener *l);
/* Free the closed listeners kept for reuse (device teardown). */
void srd_listener_pool_free(struct srd_dev *dev);
/* A hello or an answer arrived. */
void srd_handshake_on_message(struct srd_dev *dev, const struct srd_msg *m);

/* Dispatch (src/comm/dispatch.c): the handlers every rail of a device calls,
 * given to srd_dev_init. */
extern const struct srd_rail_handlers srd_dispatch_handlers;
/* Deliver messages that arrived before the comm was ready. */
void srd_comm_replay_early(struct srd_comm *c);

/* Close (src/comm/close.c). Fail what is still open, wait (bounded) for
 * operations the provider holds, then free. A comm whose operations outlive
 * the wait is retired: freed when they complete or when the device closes. */
void srd_comm_close(struct srd_comm *c);

/* One-sided RMA's contexts (init's and createContext's) carry this magic
 * first (src/comm/rma_init.c, src/comm/rma_net.c). */
#define SRD_RMA_CTX_MAGIC 0x5352444d41435431ull /* "SRDMACT1" */

#endif
