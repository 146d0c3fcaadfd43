/* The emulated EFA device as verbs shows it: discovery from a private sysfs
 * tree, contexts, queries, protection domains, memory regions and address
 * handles. */
#define _GNU_SOURCE
#include "emu.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EMU_MAX_DEVICES 64

static struct ibv_device devices[EMU_MAX_DEVICES];
static struct ibv_device *device_ptrs[EMU_MAX_DEVICES + 1];
static int ndevices;
static pthread_once_t discover_once = PTHREAD_ONCE_INIT;

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct ibv_device *)a)->name,
		      ((const struct ibv_device *)b)->name);
}

/* Devices are the entries of $SYSFS_PATH/class/infiniband (made by
 * tests/efa/emu/sysfs.sh).  Without SYSFS_PATH there are none: the real /sys
 * names hardware this library does not drive. */
static void discover(void)
{
	const char *root = getenv("SYSFS_PATH");
	char dir[200];
	struct dirent *e;
	DIR *d;

	if (!root || !*root || !emu_profile())
		return;
	snprintf(dir, sizeof(dir), "%s/class/infiniband", root);
	d = opendir(dir);
	if (!d)
		return;
	while ((e = readdir(d)) && ndevices < EMU_MAX_DEVICES) {
		struct ibv_device *dev = &devices[ndevices];

		if (e->d_name[0] == '.' || strlen(e->d_name) >= sizeof(dev->name))
			continue;
		dev->node_type = IBV_NODE_UNSPECIFIED;
		dev->transport_type = IBV_TRANSPORT_UNSPECIFIED;
		snprintf(dev->name, sizeof(dev->name), "%s", e->d_name);
		snprintf(dev->dev_name, sizeof(dev->dev_name), "uverbs%d", ndevices);
		snprintf(dev->dev_path, sizeof(dev->dev_path),
			 "%s/class/infiniband_verbs/uverbs%d", root, ndevices);
		snprintf(dev->ibdev_path, sizeof(dev->ibdev_path), "%s/%s", dir,
			 e->d_name);
		ndevices++;
	}
	closedir(d);
	qsort(devices, (size_t)ndevices, sizeof(devices[0]), by_name);
	for (int i = 0; i < ndevices; i++)
		device_ptrs[i] = &devices[i];
}

EMU_EXPORT struct ibv_device **ibv_get_device_list(int *num)
{
	struct ibv_device **list;

	pthread_once(&discover_once, discover);
	list = calloc((size_t)ndevices + 1, sizeof(*list));
	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	memcpy(list, device_ptrs, (size_t)ndevices * sizeof(*list));
	if (num)
		*num = ndevices;
	return list;
}

EMU_EXPORT void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

static int query_port(struct ibv_context *ctx, uint8_t port,
		      struct ibv_port_attr *attr, size_t len)
{
	struct ibv_port_attr a = { 0 };

	(void)ctx;
	if (port != 1)
		return EINVAL;
	a.state = IBV_PORT_ACTIVE;
	a.max_mtu = IBV_MTU_4096;
	a.active_mtu = IBV_MTU_4096;
	a.gid_tbl_len = 1;
	a.max_msg_sz = EMU_MTU;
	a.pkey_tbl_len = 1;
	a.active_width = 1;
	a.active_speed = 1;
	a.phys_state = 5; /* link up */
	a.link_layer = IBV_LINK_LAYER_UNSPECIFIED;
	memcpy(attr, &a, len < sizeof(a) ? len : sizeof(a));
	return 0;
}

EMU_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *dev)
{
	int index = (int)(dev - devices);
	struct emu_ctx *c;

	if (index < 0 || index >= ndevices) {
		errno = ENODEV;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	c->hw = emu_hw_get(index);
	if (!c->hw) {
		free(c);
		return NULL;
	}
	c->vctx.sz = sizeof(c->vctx);
	c->vctx.query_port = query_port;
	c->vctx.create_cq_ex = emu_create_cq_ex;
	c->vctx.create_qp_ex = emu_create_qp_ex;
	c->vctx.context.device = dev;
	c->vctx.context.cmd_fd = -1;
	c->vctx.context.async_fd = -1;
	c->vctx.context.num_comp_vectors = 1;
	c->vctx.context.abi_compat = __VERBS_ABI_IS_EXTENDED;
	c->vctx.context.ops.post_recv = emu_post_recv;
	c->vctx.context.ops.req_notify_cq = emu_req_notify_cq;
	pthread_mutex_init(&c->vctx.context.mutex, NULL);
	return &c->vctx.context;
}

EMU_EXPORT int ibv_close_device(struct ibv_context *ctx)
{
	struct emu_ctx *c = (struct emu_ctx *)verbs_get_ctx(ctx);

	emu_hw_put(c->hw);
	pthread_mutex_destroy(&ctx->mutex);
	free(c);
	return 0;
}

EMU_EXPORT int ibv_query_device(struct ibv_context *ctx,
				struct ibv_device_attr *attr)
{
	const struct emu_profile *p = emu_profile();
	struct emu_hw *hw = emu_hw_of(ctx);

	memset(attr, 0, sizeof(*attr));
	snprintf(attr->fw_ver, sizeof(attr->fw_ver), "0.0.0 (emulated %s)",
		 p->name);
	memcpy(&attr->node_guid, hw->gid.raw + 8, 8);
	attr->sys_image_guid = attr->node_guid;
	attr->max_mr_size = 1ull << 40;
	attr->page_size_cap = 4096;
	attr->vendor_id = 0x1d0f;
	attr->vendor_part_id = p->vendor_part_id;
	attr->max_qp = EMU_MAX_QP;
	attr->max_qp_wr = EMU_MAX_WR;
	attr->max_sge = EMU_MAX_SGE;
	attr->max_cq = EMU_MAX_QP;
	attr->max_cqe = 1 << 20;
	attr->max_mr = 1 << 20;
	attr->max_pd = 256;
	attr->max_ah = EMU_MAX_AH;
	attr->phys_port_cnt = 1;
	return 0;
}

/* The exported symbol takes the old, shorter port attributes; the provider
 * reaches query_port through the context, this is the fallback. */
#undef ibv_query_port
EMU_EXPORT int ibv_query_port(struct ibv_context *ctx, uint8_t port,
			      struct _compat_ibv_port_attr *attr)
{
	return query_port(ctx, port, (struct ibv_port_attr *)attr,
			  offsetof(struct ibv_port_attr, port_cap_flags2));
}

EMU_EXPORT int ibv_query_gid(struct ibv_context *ctx, uint8_t port, int index,
			     union ibv_gid *gid)
{
	if (port != 1 || index != 0)
		return -1;
	*gid = emu_hw_of(ctx)->gid;
	return 0;
}

EMU_EXPORT int srd_efa_emu_query_device(struct ibv_context *ctx,
				  struct efadv_device_attr *attr, uint32_t inlen)
{
	const struct emu_profile *p = emu_profile();
	struct efadv_device_attr a = { 0 };

	(void)ctx;
	a.max_sq_wr = EMU_MAX_WR;
	a.max_rq_wr = EMU_MAX_WR;
	a.max_sq_sge = EMU_MAX_SGE;
	a.max_rq_sge = EMU_MAX_SGE;
	a.inline_buf_size = EMU_INLINE;
	a.device_caps = p->caps;
	a.max_rdma_size = p->max_rdma_size;
	memcpy(attr, &a, inlen < sizeof(a) ? inlen : sizeof(a));
	return 0;
}

EMU_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *ctx)
{
	struct emu_pd *pd = calloc(1, sizeof(*pd));

	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	pd->pd.context = ctx;
	return &pd->pd;
}

EMU_EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
{
	free(pd);
	return 0;
}

EMU_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr,
					   size_t length, uint64_t iova,
					   unsigned int access)
{
	struct emu_hw *hw = emu_hw_of(pd->context);
	struct emu_mr *m;

	if (!addr && length) {
		errno = EFAULT;
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		errno = ENOMEM;
		return NULL;
	}
	m->mr.context = pd->context;
	m->mr.pd = pd;
	m->mr.addr = addr;
	m->mr.length = length;
	m->iova = iova;
	m->access = access;
	pthread_mutex_lock(&hw->lock);
	/* Keys are per device; the low byte varies so a stale key from
	 * another device rarely matches by accident. */
	m->mr.lkey = m->mr.rkey = (++hw->next_key << 8) | (uint32_t)hw->index;
	m->next = hw->mrs;
	hw->mrs = m;
	pthread_mutex_unlock(&hw->lock);
	return &m->mr;
}

#undef ibv_reg_mr
EMU_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr,
				     size_t length, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr,
				(unsigned)access);
}

/* dma-buf registration is not emulated: EOPNOTSUPP makes the provider
 * register by address instead. */
EMU_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset,
					    size_t length, uint64_t iova,
					    int fd, int access)
{
	(void)pd, (void)offset, (void)length, (void)iova, (void)fd,
		(void)access;
	errno = EOPNOTSUPP;
	return NULL;
}

EMU_EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
{
	struct emu_hw *hw = emu_hw_of(mr->context);
	struct emu_mr **pp;

	pthread_mutex_lock(&hw->lock);
	for (pp = &hw->mrs; *pp; pp = &(*pp)->next)
		if (&(*pp)->mr == mr) {
			*pp = (*pp)->next;
			break;
		}
	pthread_mutex_unlock(&hw->lock);
	free(mr);
	return 0;
}

EMU_EXPORT int srd_efa_emu_query_mr(struct ibv_mr *mr, struct efadv_mr_attr *attr,
			      uint32_t inlen)
{
	struct efadv_mr_attr a = { 0 };

	(void)mr;
	/* One interconnect: every path the provider asks about is id 0. */
	a.ic_id_validity = EFADV_MR_ATTR_VALIDITY_RECV_IC_ID |
			   EFADV_MR_ATTR_VALIDITY_RDMA_READ_IC_ID |
			   EFADV_MR_ATTR_VALIDITY_RDMA_RECV_IC_ID;
	memcpy(attr, &a, inlen < sizeof(a) ? inlen : sizeof(a));
	return 0;
}

EMU_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd,
					struct ibv_ah_attr *attr)
{
	struct emu_hw *hw = emu_hw_of(pd->context);
	struct emu_ah *ah;

	if (!attr->is_global) {
		errno = EINVAL;
		return NULL;
	}
	ah = calloc(1, sizeof(*ah));
	if (!ah) {
		errno = ENOMEM;
		return NULL;
	}
	ah->ah.context = pd->context;
	ah->ah.pd = pd;
	ah->gid = attr->grh.dgid;
	pthread_mutex_lock(&hw->lock);
	ah->ahn = emu_ah_add(hw, &ah->gid);
	pthread_mutex_unlock(&hw->lock);
	if (!ah->ahn) {
		free(ah);
		errno = ENOMEM;
		return NULL;
	}
	return &ah->ah;
}

EMU_EXPORT int ibv_destroy_ah(struct ibv_ah *ibah)
{
	struct emu_ah *ah = (struct emu_ah *)ibah;
	struct emu_hw *hw = emu_hw_of(ibah->context);

	pthread_mutex_lock(&hw->lock);
	emu_ah_remove(hw, ah->ahn);
	pthread_mutex_unlock(&hw->lock);
	free(ah);
	return 0;
}

EMU_EXPORT int srd_efa_emu_query_ah(struct ibv_ah *ibah, struct efadv_ah_attr *attr,
			      uint32_t inlen)
{
	struct efadv_ah_attr a = { 0 };

	a.ahn = ((struct emu_ah *)ibah)->ahn;
	memcpy(attr, &a, inlen < sizeof(a) ? inlen : sizeof(a));
	return 0;
}

/* No pages are pinned, so fork needs nothing. */
EMU_EXPORT int ibv_fork_init(void)
{
	return 0;
}

EMU_EXPORT enum ibv_fork_status ibv_is_fork_initialized(void)
{
	return IBV_FORK_UNNEEDED;
}
