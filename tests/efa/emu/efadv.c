/* libefa.so.1 of the emulator: the efadv entry points the provider
 * imports, forwarded to libibverbs.so.1, which owns the device (rdma-core's
 * libefa likewise builds on libibverbs). */
#include "emu.h"

EMU_EXPORT int efadv_query_device(struct ibv_context *ctx,
				  struct efadv_device_attr *attr, uint32_t inlen)
{
	return srd_efa_emu_query_device(ctx, attr, inlen);
}

EMU_EXPORT int efadv_query_ah(struct ibv_ah *ah, struct efadv_ah_attr *attr,
			      uint32_t inlen)
{
	return srd_efa_emu_query_ah(ah, attr, inlen);
}

EMU_EXPORT struct ibv_qp *efadv_create_qp_ex(struct ibv_context *ctx,
					     struct ibv_qp_init_attr_ex *attr,
					     struct efadv_qp_init_attr *efa_attr,
					     uint32_t inlen)
{
	return srd_efa_emu_create_qp_ex(ctx, attr, efa_attr, inlen);
}

EMU_EXPORT struct ibv_cq_ex *efadv_create_cq(struct ibv_context *ctx,
					     struct ibv_cq_init_attr_ex *attr,
					     struct efadv_cq_init_attr *efa_attr,
					     uint32_t inlen)
{
	return srd_efa_emu_create_cq(ctx, attr, efa_attr, inlen);
}

EMU_EXPORT struct efadv_cq *efadv_cq_from_ibv_cq_ex(struct ibv_cq_ex *ex)
{
	return srd_efa_emu_cq_from_ibv_cq_ex(ex);
}

EMU_EXPORT int efadv_query_mr(struct ibv_mr *mr, struct efadv_mr_attr *attr,
			      uint32_t inlen)
{
	return srd_efa_emu_query_mr(mr, attr, inlen);
}
