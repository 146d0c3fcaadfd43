/* One NIC, or one progress lane of a NIC: fabric, domain, address vector,
 * completion queue and its endpoints. Posting and polling only; what a
 * completion means is decided by the layer above through the callbacks it
 * installs.
 *
 * Locking: the owner (one device) serializes every call with its lock, with
 * one exception. A rail opened thread-safe (FI_THREAD_SAFE domain) may be
 * reaped (srd_rail_reap: fi_cq_read/fi_cq_readerr into a caller's batch) by
 * one thread without the owner's lock, while others post under it; the
 * batch is then dispatched under the lock. Reaping touches only the provider
 * and fields fixed at open. Remote writes may likewise be queued (under the
 * owner's lock) and posted by the reaping thread (srd_rail_post_queued,
 * without it); post_lock guards only the queue and is taken last. Such a
 * rail's cq_lock keeps address-vector
 * changes out of the provider's progress (shm 1.17 unmaps a removed peer's
 * region while its progress may still answer that peer); it is taken under
 * the owner's lock, never the other way round. */
#ifndef SRD_RAIL_H
#define SRD_RAIL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_eq.h>

/* A rail is one NIC opened once (one lane of it: fabric, domain, AV, CQ); a
 * path is a rail and one of its endpoints. */
#define SRD_MAX_RAILS 32 /* rails of one device: its NICs x progress lanes */
#define SRD_MAX_EPS_PER_RAIL 8
#define SRD_EP_NAME_MAX 64
#define SRD_RAIL_BATCH 16
#define SRD_RAIL_ERRSTR_MAX 400
/* With 8 bytes of CQ data the upper half carries the write's length. */
#define SRD_RAIL_MAX_WRITE ((size_t)1 << 26)

struct srd_rail;

/* Context of every operation we post. The provider owns fi_ctx while the
 * operation is in flight (FI_CONTEXT2 mode), so it comes first. */
struct srd_op {
  struct fi_context2 fi_ctx;
  void (*done)(struct srd_op *op, int err, const char *errstr);
  void *owner;
  void *aux;
};

/* A remote write handed to the thread that reaps its rail, which posts it
 * (thread-safe rails): the provider's socket copy of a send then happens on
 * that thread too. */
struct srd_rail_write {
  struct srd_op op;             /* first: the completion names the op */
  struct srd_rail_write *next;  /* in the rail's post queue */
  int ep;
  const void *src;
  void *dst;                    /* set: a get's stripe, an RMA read into dst (src unused) */
  size_t len;
  void *desc;
  uint32_t imm;
  fi_addr_t dest;
  uint64_t raddr, key;
  const int *owner_result;      /* nonzero once what it serves failed: a lane that cannot post it drops it then */
  int err;                      /* why the post failed (failed list) */
};

/* src, in the handlers: the sender's address in this rail's AV where the
 * provider tells it (rail->source, FI_SOURCE); otherwise, or when the sender
 * is not in the AV, FI_ADDR_NOTAVAIL. */
struct srd_rail_handlers {
  /* A control message landed in one of the rail's receive buffers. */
  void (*on_message)(void *arg, struct srd_rail *rail, const void *buf, size_t len, fi_addr_t src);
  /* A remote write with immediate data finished in our memory. */
  void (*on_remote_write)(void *arg, struct srd_rail *rail, uint32_t imm, size_t len, fi_addr_t src);
  /* A completion error with no operation of ours to blame. */
  void (*on_rail_error)(void *arg, struct srd_rail *rail, int err, const char *errstr);
  void *arg;
};

struct srd_av_entry {
  uint8_t name[SRD_EP_NAME_MAX];
  fi_addr_t addr;
  int refs;                /* 0: free, on the free chain */
  int next_free;
  bool kept; /* no comm uses it; it stays in the provider's AV (keep_av), refs held at 1 by the rail */
};

/* Inserted peer addresses by name and by fi_addr, O(1) each
 * (src/rail/av_index.c). */
struct srd_av_index {
  struct srd_av_entry *e;
  int cap, used, free_head; /* used: live entries; free_head: -1 when none */
  int *by_name, *by_addr;   /* open-addressing tables of entry indexes, -1 empty */
  unsigned mask;            /* buckets - 1 */
  size_t name_len;
};
void srd_av_index_init(struct srd_av_index *x, size_t name_len);
void srd_av_index_free(struct srd_av_index *x);
/* The entry's index, or -1. */
int srd_av_index_find_name(const struct srd_av_index *x, const void *name);
int srd_av_index_find_addr(const struct srd_av_index *x, fi_addr_t addr);
/* A new entry of one reference: its index, or -FI_ENOMEM. */
int srd_av_index_add(struct srd_av_index *x, const void *name, fi_addr_t addr);
void srd_av_index_del(struct srd_av_index *x, int i);

struct srd_rail_buf {
  struct srd_op op;
  struct srd_rail *rail;
  struct srd_rail_buf *next;
  int ep;
  size_t len;              /* of the message in data: set by the sender, for a re-send */
  char data[];
};

struct srd_rail {
  int index;
  char name[64];
  struct fi_info *info;
  struct fid_fabric *fabric;
  struct fid_domain *domain;
  struct fid_av *av;
  struct fid_cq *cq;
  int neps;
  struct fid_ep *ep[SRD_MAX_EPS_PER_RAIL];
  char ep_name[SRD_MAX_EPS_PER_RAIL][SRD_EP_NAME_MAX];
  size_t ep_name_len;
  int virt_addr;           /* remote addresses are virtual addresses */
  int mr_local;            /* local buffers need descriptors */
  size_t max_write;        /* largest single RMA write */
  /* Not every provider reports the length of a remote write (tcp does not);
   * with 8 bytes of CQ data the writer sends it in the upper half. With 4
   * (efa) the completion's len is used, which efa fills in. */
  int len_in_data;
  int ordered_128;         /* efa promised 128-byte ordered writes */
  bool device_writes;      /* efa: FI_OPT_EFA_EMULATED_WRITE reads false on every endpoint */
  /* A registration closed under a write in flight stops the rest of it: the
   * NIC checks the key of every packet it places. Not promised by efa: only
   * where the device writes and the user vouches (srd_efa_rekey_fences).
   * tcp, and efa emulating writes, check it once, at the write's start. */
  bool keys_fence_writes;
  /* The peer may read our send buffers: efa's "efa" fabric emulates a write
   * it cannot make with the device (a peer without RDMA write, or unsolicited
   * write receive on one side only: efa_rdm_rma_should_write_using_rdma) by
   * the long-read protocol, where the target RDMA-reads the source under our
   * registration's key (efa_rdm_rma_post_write), and efa_mr_ofi_to_ibv_access
   * grants that read for FI_WRITE only when our own device cannot write. */
  bool sends_read;
  size_t max_send;         /* largest message one send may carry (FI_OPT_MAX_MSG_SIZE where answered) */
  /* Writes complete only once their data landed at the target (not when the
   * socket took them): what failover re-sends is then exactly what is
   * missing there. Set by the owner. */
  bool delivery_complete;
  struct srd_rail_handlers h;
  /* control buffers: receive side always posted, send side a free list */
  size_t buf_size;
  char *buf_mem;
  struct fid_mr *buf_mr;
  char *flush_scratch;     /* where flush reads land, in buf_mem */
  bool has_self;           /* self: endpoint 0 in our own AV, for flush reads */
  fi_addr_t self;
  struct srd_rail_buf *free_send;
  int nfree_send;
  int reorder;             /* test mode: shuffle and delay completions */
  int recv_refuse;         /* test mode: refuse every Nth repost (recv_reposts counts them) */
  unsigned recv_reposts;
  /* Receive buffers the provider would not take back, offered again at every
   * poll; by endpoint, how many wait (all of one endpoint's: the rail fails). */
  struct srd_rail_buf *unposted;
  int unposted_on[SRD_MAX_EPS_PER_RAIL];
  unsigned recv_refusals;  /* in all: logged at powers of two */
  uint64_t starved_since_ms; /* an endpoint has had every buffer waiting since (0: none has) */
  /* Peers' addresses, each inserted once and reference counted: several comms
   * to one peer share an entry, and some providers return the same fi_addr
   * for a repeated insert, so removing it for one comm would break another. */
  struct srd_av_index av_index;
  /* shm and efa: a peer's address is never removed from the AV while the
   * rail lives (DESIGN, "Addresses stay in the AV"). shm: removing it
   * unmaps the peer's region (smr_av_remove -> smr_map_del ->
   * smr_unmap_region) while 2.6 may still hold an unexpected message as a
   * pointer into it (smr_unexp_iov): SIGSEGV. efa: a re-inserted peer
   * restarts its message ids, which the peer has processed: it aborts. The
   * entry is reused when the peer comes back; shm's AV holds SMR_MAX_PEERS (256). */
  bool keep_av;
  struct fi_cq_data_entry *held;
  fi_addr_t *held_src;
  int nheld;
  int failed;
  bool thread_safe;
  bool source;             /* the provider reports completions' source addresses (FI_SOURCE) */
  /* ... and names the writer of a remote write too: shm (the peer's map
   * entry), tcp 2.x (the connection's peer), efa (the sender's QP, stamped by
   * the device). Not tcp;ofi_rxm: 2.6 reports FI_ADDR_NOTAVAIL for every
   * remote write (rxm_handle_remote_write) and 1.17 a stale address. */
  bool write_source;
  pthread_mutex_t cq_lock; /* thread_safe rails: CQ reads and posts vs. AV changes */
  pthread_mutex_t post_lock; /* thread_safe rails: the post queue */
  struct srd_rail_write *postq_head, *postq_tail;
  struct srd_listen_check *listen_checks; /* tcp peers' listeners (rail_listen.c), allocated on first use */
};

/* Completions reaped from the CQ and not yet dispatched: the successful
 * ones in CQ order, then at most one error entry (the CQ reports an error
 * only once the entries before it are read). */
struct srd_rail_batch {
  int n;
  struct fi_cq_data_entry e[SRD_RAIL_BATCH];
  fi_addr_t src[SRD_RAIL_BATCH]; /* see struct srd_rail_handlers */
  bool has_err;
  int err;                /* positive FI_* errno of the error entry */
  void *err_context;
  char errstr[SRD_RAIL_ERRSTR_MAX];
};

/* A thread-safe rail's CQ reads and posts exclude changes of its AV. */
static inline void srd_rail_cq_lock(struct srd_rail *rail) {
  if (rail->thread_safe) pthread_mutex_lock(&rail->cq_lock);
}
static inline void srd_rail_cq_unlock(struct srd_rail *rail) {
  if (rail->thread_safe) pthread_mutex_unlock(&rail->cq_lock);
}

/* Open the rail's resources from a provider info (one domain). buf_size is the
 * largest control message. thread_safe asks the provider for FI_THREAD_SAFE,
 * so that srd_rail_reap may run beside posting. Returns 0 or a negative
 * libfabric error (logged). */
int srd_rail_open(struct srd_rail *rail, int index, const struct fi_info *info, int neps, size_t buf_size,
                  bool thread_safe, const struct srd_rail_handlers *h);
void srd_rail_close(struct srd_rail *rail);
/* The CQ size a rail of this provider info asks for: SRD_RAIL_CQ_SIZE, or 0
 * (the provider's own) where that is larger (efa). */
#define SRD_RAIL_CQ_SIZE 4096
int srd_rail_cq_size(const struct fi_info *info);
/* The largest single write a rail of this provider info makes. */
size_t srd_rail_write_limit(const struct fi_info *info);

/* shm: remove the regions in /dev/shm that processes of ours (our name shape,
 * our user, our pid namespace) left when they died without closing; best
 * effort. */
void srd_rail_remove_dead_regions(void);
/* Inside the rail module (src/rail/shm_names.c): name endpoint i of an shm
 * rail (other providers: nothing to do), and judge a peer's shm name: 0,
 * -FI_EHOSTDOWN (its region is gone or its process exited), or -FI_EINVAL. */
int srd_rail_name_shm_endpoint(struct srd_rail *rail, struct fid_ep *ep, int i);
int srd_rail_shm_name_check(const struct srd_rail *rail, const char *name);

/* Refuses (logged) a name that cannot be a peer of this provider: -FI_EINVAL
 * for a wrong family, or on shm a name not of our shape, of a foreign region
 * or one of our own endpoints; -FI_EHOSTDOWN on shm for a missing region or
 * a dead process. */
int srd_rail_av_insert(struct srd_rail *rail, const void *name, fi_addr_t *addr);
void srd_rail_av_remove(struct srd_rail *rail, fi_addr_t addr);

/* Memory registration on this rail's domain. access: FI_* access flags. */
int srd_rail_reg(struct srd_rail *rail, void *base, size_t len, uint64_t access, int cuda_dev, int dmabuf_fd,
                 uint64_t dmabuf_offset, struct fid_mr **mr);
/* fi_mr_dmabuf.base_addr for the buffer at base, which lies offset bytes into
 * its dma-buf (what NCCL's regMrDmaBuf passes). */
void *srd_rail_dmabuf_base(void *base, uint64_t offset);
/* NULL for no registration (providers without FI_MR_LOCAL). */
void *srd_rail_mr_desc(struct fid_mr *mr);
uint64_t srd_rail_mr_key(struct fid_mr *mr);
void srd_rail_mr_close(struct fid_mr *mr);

/* Control send buffers: NULL when none is free (the caller retries later). */
struct srd_rail_buf *srd_rail_get_send_buf(struct srd_rail *rail);
void srd_rail_put_send_buf(struct srd_rail_buf *buf);
/* Send buf->data[0..len) to dest from endpoint ep; on success the buffer is
 * returned to the pool after op.done runs. -FI_EAGAIN: nothing was posted. */
int srd_rail_send(struct srd_rail *rail, int ep, struct srd_rail_buf *buf, size_t len, fi_addr_t dest);
int srd_rail_write(struct srd_rail *rail, int ep, const void *src, size_t len, void *desc, uint32_t imm,
                   fi_addr_t dest, uint64_t raddr, uint64_t key, struct srd_op *op);
/* Flush: read a few bytes of our own registered memory at raddr (key) back
 * from endpoint 0 to itself into the rail's scratch buffer. The read reaches
 * the memory behind every write the NIC completed before it, so once it
 * completes those writes are visible there (GPU memory written over PCIe).
 * -FI_EAGAIN: nothing was posted. */
int srd_rail_flush_read(struct srd_rail *rail, uint64_t raddr, uint64_t key, struct srd_op *op);
/* RMA from endpoint 0 to itself: read [raddr, raddr+len) (key) of our own
 * registered memory into dst, or write src there (completing once placed,
 * FI_DELIVERY_COMPLETE). desc: the local buffer's. -FI_EAGAIN: nothing was
 * posted. */
int srd_rail_loopback_read(struct srd_rail *rail, void *dst, size_t len, void *desc, uint64_t raddr, uint64_t key,
                           struct srd_op *op);
int srd_rail_loopback_write(struct srd_rail *rail, const void *src, size_t len, void *desc, uint64_t raddr,
                            uint64_t key, struct srd_op *op);

/* RMA read of [raddr, raddr+len) (key) at src into dst. -FI_EAGAIN: nothing
 * was posted. */
int srd_rail_read(struct srd_rail *rail, int ep, void *dst, size_t len, void *desc, fi_addr_t src, uint64_t raddr,
                  uint64_t key, struct srd_op *op);
/* Queue w (its fields filled in; dst set: a read) for srd_rail_post_queued. Never fails. */
void srd_rail_queue_write(struct srd_rail *rail, struct srd_rail_write *w);
/* Post queued writes and reads in order until the provider pushes back. Returns how
 * many were posted; *failed lists those the provider refused (w->err), for
 * the caller to complete under the owner's lock; *more: some still wait. */
int srd_rail_post_queued(struct srd_rail *rail, struct srd_rail_write **failed, bool *more);
/* Take the queued writes for which abandon(w) is true out of the queue;
 * returns them as a list (owner's lock held). */
struct srd_rail_write *srd_rail_drop_queued(struct srd_rail *rail, bool (*abandon)(const struct srd_rail_write *w));

/* Is the rail's kernel interface (tcp) without a link? Always 0 for NICs
 * that are not kernel interfaces (efa, shm): those report failures through
 * their completion queues. */
int srd_rail_link_down(const struct srd_rail *rail);

/* Has a TCP connect to the listening address of the peer at addr (tcp
 * providers) been refused, i.e. is its endpoint gone? Starts or finishes a
 * non-blocking check; every_ms spaces the first checks of a peer that still
 * listens (later ones further, doubling) and is how long a refusal stays
 * evidence. Always false where addresses are not socket addresses (efa,
 * shm). */
bool srd_rail_peer_refused(struct srd_rail *rail, fi_addr_t addr, uint64_t now_ms, uint64_t every_ms);
void srd_rail_listen_checks_free(struct srd_rail *rail);

/* Reap up to max completions and dispatch them; returns how many, or a
 * negative error for a CQ that cannot be read. */
int srd_rail_poll(struct srd_rail *rail, int max);
/* Read one batch from the CQ without dispatching it: the entries read, 0 for
 * none, or a negative error for a CQ that cannot be read. See the locking note
 * above. */
int srd_rail_reap(struct srd_rail *rail, struct srd_rail_batch *b);
/* Run the handlers of a reaped batch (the owner's lock held). In the reorder
 * test mode an empty batch releases completions held back earlier. */
void srd_rail_dispatch(struct srd_rail *rail, struct srd_rail_batch *b);

#endif
