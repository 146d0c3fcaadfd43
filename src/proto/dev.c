/* Device lifetime (its rails, opened from the NIC group) and the progress
 * step every entry point runs. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include "srd/log.h"
#include "srd/param.h"
#include "srd/proto.h"
#include "srd/stats.h"
#include "srd/sys.h"

#define POLL_BUDGET 64
#define SCAN_INTERVAL_MS 100

/* The largest control message other than eager data: a hello naming every
 * path, or a clear-to-send of every buffer with every rail's key. */
static size_t ctrl_fixed_size(void) {
  size_t hello = 56 + (size_t)SRD_MAX_PATHS * SRD_NAME_MAX;
  size_t cts = 24 + (size_t)SRD_MAX_RECVS * (20 + 8 * SRD_MAX_RAILS);
  return hello > cts ? hello : cts;
}

static size_t ctrl_buf_size(const struct srd_dev *dev) {
  size_t eager = SRD_EAGER_HEADER + dev->eager_max;
  return ctrl_fixed_size() > eager ? ctrl_fixed_size() : eager;
}

size_t srd_dev_eager_fit(size_t eager_max, size_t max_send) {
  if (max_send < ctrl_fixed_size()) return SIZE_MAX;
  return SRD_EAGER_HEADER + eager_max > max_send ? max_send - SRD_EAGER_HEADER : eager_max;
}

/* Every control message within one send of every rail (efa-direct: one MTU),
 * eager data cut to fit. */
static int fit_ctrl_to_rails(struct srd_dev *dev) {
  size_t max_send = SIZE_MAX;
  for (int i = 0; i < dev->nrails; i++)
    if (dev->rails[i].max_send < max_send) max_send = dev->rails[i].max_send;
  size_t fit = srd_dev_eager_fit(dev->eager_max, max_send);
  if (fit == SIZE_MAX) {
    SRD_WARN("device %d: provider %s sends at most %zu bytes, less than our %zu-byte hello and clear-to-send",
             dev->index, dev->rails[0].info->fabric_attr->prov_name, max_send, ctrl_fixed_size());
    return -1;
  }
  if (fit != dev->eager_max)
    SRD_WARN("device %d: NCCL_SRD_EAGER_MAX=%zu with its %d-byte header exceeds the largest send of %s (%zu bytes): "
             "eager messages carry at most %zu bytes", dev->index, dev->eager_max, SRD_EAGER_HEADER, dev->transport,
             max_send, fit);
  dev->eager_max = fit;
  return 0;
}

const struct srd_rail_ops srd_rail_ops_fabric = {
    srd_rail_av_insert, srd_rail_av_remove, srd_rail_get_send_buf, srd_rail_put_send_buf, srd_rail_send,
    srd_rail_write,     srd_rail_queue_write, srd_rail_mr_desc,    srd_rail_mr_key,       srd_rail_reg,
    srd_rail_mr_close,  srd_rail_poll,        srd_rail_link_down,  srd_rail_flush_read,   srd_rail_peer_refused,
    srd_rail_read,      srd_rail_loopback_read, srd_rail_loopback_write,
};

void srd_dev_init(struct srd_dev *dev, int index, const struct srd_rail_handlers *h) {
  dev->index = index;
  dev->rail_ops = &srd_rail_ops_fabric;
  dev->handlers = *h;
  dev->handlers.arg = dev;
  pthread_mutex_init(&dev->lock, NULL);
  pthread_mutex_init(&dev->wake_lock, NULL);
  pthread_cond_init(&dev->wake, NULL);
  atomic_init(&dev->stop, false);
  atomic_init(&dev->activity, 0);
  atomic_init(&dev->sleepers, 0);
  atomic_init(&dev->lanes_waiting, 0);
}

/* Lanes per NIC within what a hello (paths) and a clear-to-send (keys per
 * rail) can name. */
static int lanes_that_fit(int want, int nnics, int neps) {
  int lanes = want;
  if (lanes * nnics > SRD_MAX_RAILS) lanes = SRD_MAX_RAILS / nnics;
  if (lanes * nnics * neps > SRD_MAX_PATHS) lanes = SRD_MAX_PATHS / (nnics * neps);
  return lanes < 1 ? 1 : lanes;
}

static void close_rails(struct srd_dev *dev) {
  for (int i = 0; i < dev->nrails; i++) srd_rail_close(&dev->rails[i]);
  free(dev->rails);
  dev->rails = NULL;
  dev->nrails = 0;
}

/* Rail i is lane i / nnics of NIC i % nnics: a peer with another lane count
 * maps rail i to its rail i mod n, which is then on the same NIC index (and
 * our lane 0 on its lane 0). Lane 0 is only ever polled under dev->lock; the
 * other lanes are reaped by their threads beside it (thread-safe domains). */
static int open_rails(struct srd_dev *dev, int lanes) {
  dev->nrails = dev->nnics * lanes;
  dev->rails = calloc((size_t)dev->nrails, sizeof(*dev->rails));
  if (!dev->rails) return -FI_ENOMEM;
  for (int i = 0; i < dev->nrails; i++) {
    const struct srd_nic *nic = &dev->nics->nics[dev->group.nics[i % dev->nnics]];
    /* GPU registrations need a domain opened with FI_HMEM (the rail keeps
     * its own copy of the info). */
    struct fi_info *hmem = dev->gdr.gpu ? srd_gdr_hmem_info(nic->info) : NULL;
    int rc = -FI_ENODATA;
    if (dev->gdr.gpu && !hmem)
      SRD_WARN("device %d: %s no longer offers FI_HMEM", dev->index, nic->name);
    else
      rc = srd_rail_open(&dev->rails[i], i, hmem ? hmem : nic->info, dev->neps, ctrl_buf_size(dev),
                         i >= dev->nnics, &dev->handlers);
    if (hmem) fi_freeinfo(hmem);
    if (rc) {
      dev->nrails = i;
      close_rails(dev);
      return rc;
    }
    SRD_INFO(NCCL_INIT | NCCL_NET, "device %d rail %d: %s lane %d (%d Mbps, PCI %s, NUMA %d), %d endpoint(s)%s%s",
             dev->index, i, nic->name, i / dev->nnics, nic->speed_mbps, nic->pci_bus_id[0] ? nic->pci_bus_id : "none",
             nic->numa, dev->neps, i >= dev->nnics ? ", thread-safe domain" : "", dev->gdr.gpu ? ", FI_HMEM" : "");
  }
  dev->lanes_per_nic = lanes;
  return 0;
}

/* Threads per NIC with NCCL_SRD_PROGRESS_THREADS unset. efa needs none:
 * the NIC moves the data. The count of our processes is read here, when NCCL
 * first listens or connects: every local rank loaded the plugin (and joined
 * the count, srd_net_init) before NCCL's bootstrap let any of them go on. */
static int auto_threads(const struct srd_dev *dev) {
  if (!strcmp(dev->nics->nics[dev->group.nics[0]].info->fabric_attr->prov_name, "efa")) return 0;
  int fake = (int)srd_param_int(SRD_PARAM_TEST_CPUS);
  int cpus = fake ? fake : srd_cpus_available(), online = fake ? fake : srd_cpus_online();
  int procs = srd_host_procs_count();
  int t = srd_lanes_auto(cpus, online, procs);
  SRD_INFO(NCCL_INIT | NCCL_NET, "device %d: %d CPU(s) usable, %d online, %d process(es) of ours on the host: "
           "%d progress thread(s) per NIC, started on the first message they carry", dev->index, cpus, online, procs,
           t);
  return t;
}

/* NCCL's LL and LL128 across nodes (srd_ll_rule_for): the srd tuner keeps
 * them out of collectives where they are unsafe. Point-to-point LL over a
 * network plugin runs only where the user had NCCL allocate LL buffers for it
 * (NCCL_ALLOC_P2P_NET_LL_BUFFERS=1, or NCCL_NET_SHARED_BUFFERS=0: net.cc), and
 * no tuner sees it; another tuner does not know the rule. Say so, with the
 * remedy: we set no one's variables. */
static void check_ll(const struct srd_dev *dev) {
  int ordered = 1, device_writes = 1;
  for (int i = 0; i < dev->nrails; i++) {
    ordered &= dev->rails[i].ordered_128;
    device_writes &= dev->rails[i].device_writes;
  }
  struct srd_ll_rule rule;
  srd_ll_rule_for(dev->rails[0].info->fabric_attr->prov_name, ordered, device_writes, &rule);
  if (rule.ll) return;
  SRD_INFO(NCCL_INIT | NCCL_NET, "device %d: NCCL's LL and LL128 across nodes are unsafe here (%s); the srd tuner "
           "never picks them", dev->index, rule.why);
  const char *p2p_ll = getenv("NCCL_ALLOC_P2P_NET_LL_BUFFERS"), *shared = getenv("NCCL_NET_SHARED_BUFFERS");
  const char *tuner = getenv("NCCL_TUNER_PLUGIN"), *proto = getenv("NCCL_PROTO");
  const char *p2p = p2p_ll && !strcmp(p2p_ll, "1")   ? "NCCL_ALLOC_P2P_NET_LL_BUFFERS=1"
                    : shared && !strcmp(shared, "0") ? "NCCL_NET_SHARED_BUFFERS=0"
                                                     : NULL;
  if (p2p)
    SRD_WARN("device %d: %s has NCCL send small point-to-point messages with LL over the network, which is unsafe "
             "here (%s): unset it, or set NCCL_PROTO=Simple", dev->index, p2p, rule.why);
  if (tuner && *tuner && !strstr(tuner, "srd") && !proto)
    SRD_WARN("device %d: NCCL_TUNER_PLUGIN=%s replaces the srd tuner, which keeps LL and LL128 off here (%s): set "
             "NCCL_PROTO=Simple", dev->index, tuner, rule.why);
}

int srd_dev_open(struct srd_dev *dev) {
  dev->neps = (int)srd_param_int(SRD_PARAM_EPS_PER_RAIL);
  int64_t eager = srd_param_int(SRD_PARAM_EAGER_MAX);
  dev->eager_max = eager >= 0 ? (size_t)eager : srd_eager_default(dev->nics->nics[dev->group.nics[0]].info);
  dev->nnics = dev->group.nnics;
  int set = (int)srd_param_int(SRD_PARAM_PROGRESS_THREADS);
  int want = set >= 0 ? set : auto_threads(dev);
  int lanes = want ? lanes_that_fit(want + 1, dev->nnics, dev->neps) : 1;
  if (lanes != want + 1)
    SRD_WARN("device %d: %d progress thread(s) per NIC with %d NIC(s) x %d endpoint(s) exceed %d rails or %d paths; "
             "using %d lane(s) per NIC", dev->index, want, dev->nnics, dev->neps, SRD_MAX_RAILS, SRD_MAX_PATHS, lanes);
  if (srd_dev_comms_init(dev)) return SRD_ERR_SYSTEM;
  int rc = open_rails(dev, lanes);
  if (rc && lanes > 1) {
    SRD_WARN("device %d: cannot open %d lane(s) per NIC (%s); progress threads off", dev->index, lanes,
             fi_strerror(-rc));
    rc = open_rails(dev, 1);
  }
  if (!rc) srd_transport_name(dev->rails[0].info, dev->transport, sizeof(dev->transport));
  /* efa's domains (rdmap16s27-rdm) are no kernel interfaces: no link state
   * to poll there, so only CQ errors take its rails down. */
  dev->no_link_state = !rc && srd_nic_link_down(dev->rails[0].name) < 0;
  if (dev->no_link_state)
    SRD_INFO(NCCL_INIT | NCCL_NET, "device %d: %s is not a kernel network interface: its rails fail on completion "
             "errors only (no link-state polling)", dev->index, dev->rails[0].name);
  if (!rc && fit_ctrl_to_rails(dev)) {
    close_rails(dev);
    rc = -FI_EMSGSIZE;
  }
  if (rc) {
    srd_dev_comms_fini(dev);
    return SRD_ERR_SYSTEM;
  }
  size_t max_write = SIZE_MAX;
  for (int i = 0; i < dev->nrails; i++)
    if (dev->rails[i].max_write < max_write) max_write = dev->rails[i].max_write;
  dev->npaths = dev->nrails * dev->neps;
  dev->inline_paths = dev->nnics * dev->neps;
  dev->host_local = !strcmp(dev->rails[0].info->fabric_attr->prov_name, "shm");
  if (dev->host_local) srd_rail_remove_dead_regions();
  /* Until lane threads run, stripes stay on lane 0 (the other lanes are
   * polled only now and then). */
  dev->sched.npaths = dev->inline_paths;
  int64_t threshold = srd_param_int(SRD_PARAM_STRIPE_THRESHOLD);
  dev->sched.threshold = threshold >= 0 ? (size_t)threshold : dev->eager_max;
  dev->sched.min_stripe = (size_t)srd_param_int(SRD_PARAM_MIN_STRIPE);
  dev->sched.max_write = max_write;
  dev->next_listener_id = (uint32_t)srd_random64();
  dev->listener_key = srd_random64();
  srd_dev_failover_init(dev);
  check_ll(dev);
  /* Asked for explicitly: the threads run from the start. */
  if (set > 0 && dev->lanes_per_nic > 1) srd_dev_start_lanes(dev, false);
  SRD_INFO(NCCL_INIT | NCCL_NET, "device %d: %d NIC(s) x %d lane(s) = %d rail(s), %d endpoint(s) each, %d path(s); "
           "eager messages up to %zu bytes (%s); split and on the other lanes from %zu bytes; completions polled by %s",
           dev->index, dev->nnics, dev->lanes_per_nic, dev->nrails, dev->neps, dev->npaths, dev->eager_max,
           srd_param_int(SRD_PARAM_EAGER_MAX) >= 0 ? "NCCL_SRD_EAGER_MAX" : dev->rails[0].info->fabric_attr->prov_name,
           dev->sched.threshold,
           dev->threaded ? "the caller's thread on lane 0 and one thread per other lane"
           : dev->lanes_per_nic > 1 ? "the caller's thread until the first large message" : "the caller's thread");
  if (eager < 0 && srd_rxm_buffer_short(dev->rails[0].info))
    SRD_INFO(NCCL_INIT | NCCL_NET, "device %d: ofi_rxm's %zu-byte eager buffers (FI_OFI_RXM_BUFFER_SIZE) hold eager "
             "messages up to %zu bytes; FI_OFI_RXM_BUFFER_SIZE=%d on every node sends NCCL's 16-32 KiB steps eagerly",
             dev->index, srd_rxm_buffer_size(), dev->eager_max, SRD_RXM_BUFFER_ADVISED);
  dev->open = true;
  return SRD_OK;
}

void srd_dev_close(struct srd_dev *dev) {
  if (!dev->open) return;
  if (!srd_dev_stop_lanes(dev)) return;
  /* Rails first: no completion can name a closed comm afterwards. */
  for (int i = 0; i < dev->nrails; i++) srd_rail_close(&dev->rails[i]);
  srd_dev_free_closed(dev, true);
  srd_dev_free_resends(dev);
  close_rails(dev);
  srd_dev_comms_fini(dev);
  dev->open = false;
}

void srd_dev_fini(struct srd_dev *dev) {
  srd_dev_close(dev);
  if (dev->open) return; /* a lane still runs: its locks stay */
  pthread_cond_destroy(&dev->wake);
  pthread_mutex_destroy(&dev->wake_lock);
  pthread_mutex_destroy(&dev->lock);
}

void srd_dev_want_lanes(struct srd_dev *dev) {
  if (!dev->threaded && !dev->lanes_failed && dev->lanes_per_nic > 1) dev->want_lanes = true;
}

void srd_dev_progress_without_cqs(struct srd_dev *dev) {
  /* Here, not where the large message was seen: no thread may start on a
   * rail the caller is still reaping. */
  if (dev->want_lanes) {
    dev->want_lanes = false;
    if (!dev->threaded) srd_dev_start_lanes(dev, true);
  }
  if (dev->pending) srd_proto_post_pending(dev);
  uint64_t now = srd_now_ms();
  if (now - dev->last_scan_ms >= SCAN_INTERVAL_MS) {
    dev->last_scan_ms = now;
    srd_dev_check_rails(dev, now);
    srd_dev_probe_silent_peers(dev, now);
    if (dev->closed) srd_dev_free_closed(dev, false);
  }
}

/* Lanes whose threads have not started carry nothing of ours; a peer whose
 * threads run may stripe onto them, so the caller looks at them every
 * LANE_POLL_EVERY steps, and what it finds there starts the threads. */
#define LANE_POLL_EVERY 32

/* In the reorder test mode the last reap also lets go of what the rail
 * held back. */
#define DRAIN_POLLS 64

void srd_dev_drain_rail(struct srd_dev *dev, int l) {
  dev->health[l].drain = false;
  if (!dev->no_link_state && !dev->rail_ops->link_down(&dev->rails[l])) return;
  struct srd_rail *rail = &dev->rails[l];
  int total = 0;
  for (int i = 0; i < DRAIN_POLLS; i++) {
    int n = dev->rail_ops->poll(rail, POLL_BUDGET);
    if (n < 0) break;
    total += n;
    if (n == 0 && !(rail->reorder && rail->nheld)) break;
  }
  if (total)
    SRD_INFO(NCCL_NET, "device %d: rail %d (%s) went down with %d completion(s) not read yet: delivered", dev->index,
             l, rail->name, total);
}

void srd_dev_progress(struct srd_dev *dev) {
  if (dev->threaded) srd_dev_deliver_lanes(dev);
  bool lanes_too = !dev->threaded && dev->nrails > dev->nnics && dev->lane_polls++ % LANE_POLL_EVERY == 0;
  int end = lanes_too ? dev->nrails : dev->nnics;
  for (int i = 0; i < end; i++) {
    if (!srd_rail_polled(dev, i)) {
      if (dev->health[i].drain) srd_dev_drain_rail(dev, i);
      continue;
    }
    SRD_STAT(SRD_STAT_CQ_BY_CALLER);
    int rc = dev->rail_ops->poll(&dev->rails[i], POLL_BUDGET);
    if (rc < 0) dev->rails[i].failed = 1;
    else if (rc > 0 && i >= dev->nnics) srd_dev_want_lanes(dev);
  }
  srd_dev_progress_without_cqs(dev);
}

