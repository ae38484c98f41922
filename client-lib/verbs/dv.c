// SPDX-License-Identifier: MIT
/*
 * libmlx5.so.1 and libefa.so.1 stand-ins: perftest links the mlx5 and EFA
 * direct-verbs libraries, and Debian's real ones bind rdma-core's private
 * provider ABI at load time (IBVERBS_PRIVATE_34), of which libroshm-verbs
 * offers only the one call ibv_devinfo imports. Beside our libibverbs.so.1 these take their place. Their entry
 * points are only used on an mlx5 or EFA device, which roshm0 is not: each
 * fails with EOPNOTSUPP. Built twice, once per soname (-DRV_MLX5 / -DRV_EFA).
 */
#include <errno.h>
#include <stddef.h>
#include <sys/types.h>

#define RV_EXPORT __attribute__((visibility("default")))

#ifdef RV_MLX5
#include <infiniband/mlx5dv.h>

RV_EXPORT bool mlx5dv_is_supported(struct ibv_device *device)
{
	(void)device;
	return false;
}

RV_EXPORT struct ibv_context *mlx5dv_open_device(struct ibv_device *device,
						 struct mlx5dv_context_attr *attr)
{
	(void)device, (void)attr;
	errno = EOPNOTSUPP;
	return NULL;
}

RV_EXPORT struct ibv_qp *mlx5dv_create_qp(struct ibv_context *context,
					  struct ibv_qp_init_attr_ex *qp_attr,
					  struct mlx5dv_qp_init_attr *mlx5_qp_attr)
{
	(void)context, (void)qp_attr, (void)mlx5_qp_attr;
	errno = EOPNOTSUPP;
	return NULL;
}

RV_EXPORT struct mlx5dv_qp_ex *mlx5dv_qp_ex_from_ibv_qp_ex(struct ibv_qp_ex *qp)
{
	(void)qp;
	errno = EOPNOTSUPP;
	return NULL;
}

RV_EXPORT struct mlx5dv_mkey *mlx5dv_create_mkey(struct mlx5dv_mkey_init_attr *mkey_init_attr)
{
	(void)mkey_init_attr;
	errno = EOPNOTSUPP;
	return NULL;
}

RV_EXPORT int mlx5dv_destroy_mkey(struct mlx5dv_mkey *mkey)
{
	(void)mkey;
	return EOPNOTSUPP;
}

RV_EXPORT int mlx5dv_devx_general_cmd(struct ibv_context *context, const void *in, size_t inlen,
				      void *out, size_t outlen)
{
	(void)context, (void)in, (void)inlen, (void)out, (void)outlen;
	return EOPNOTSUPP;
}

RV_EXPORT int mlx5dv_crypto_login(struct ibv_context *context,
				  struct mlx5dv_crypto_login_attr *login_attr)
{
	(void)context, (void)login_attr;
	return EOPNOTSUPP;
}

RV_EXPORT struct mlx5dv_dek *mlx5dv_dek_create(struct ibv_context *context,
					       struct mlx5dv_dek_init_attr *init_attr)
{
	(void)context, (void)init_attr;
	errno = EOPNOTSUPP;
	return NULL;
}

RV_EXPORT int mlx5dv_dek_destroy(struct mlx5dv_dek *dek)
{
	(void)dek;
	return EOPNOTSUPP;
}

/* What UCX's libuct_ib imports: it loads only if every one is here, then
 * asks mlx5dv_is_supported and takes the plain verbs path on roshm0. */
RV_EXPORT struct ibv_cq_ex *mlx5dv_create_cq(struct ibv_context *context,
					     struct ibv_cq_init_attr_ex *cq_attr,
					     struct mlx5dv_cq_init_attr *mlx5_cq_attr)
{
	(void)context, (void)cq_attr, (void)mlx5_cq_attr;
	errno = EOPNOTSUPP;
	return NULL;
}

RV_EXPORT int mlx5dv_init_obj(struct mlx5dv_obj *obj, uint64_t obj_type)
{
	(void)obj, (void)obj_type;
	return EOPNOTSUPP;
}

RV_EXPORT struct mlx5dv_devx_uar *mlx5dv_devx_alloc_uar(struct ibv_context *context, uint32_t flags)
{
	(void)context, (void)flags;
	errno = EOPNOTSUPP;
	return NULL;
}

RV_EXPORT void mlx5dv_devx_free_uar(struct mlx5dv_devx_uar *devx_uar)
{
	(void)devx_uar;
}

RV_EXPORT struct mlx5dv_devx_obj *mlx5dv_devx_obj_create(struct ibv_context *context, const void *in,
							 size_t inlen, void *out, size_t outlen)
{
	(void)context, (void)in, (void)inlen, (void)out, (void)outlen;
	errno = EOPNOTSUPP;
	return NULL;
}

RV_EXPORT int mlx5dv_devx_obj_query(struct mlx5dv_devx_obj *obj, const void *in, size_t inlen,
				    void *out, size_t outlen)
{
	(void)obj, (void)in, (void)inlen, (void)out, (void)outlen;
	return EOPNOTSUPP;
}

RV_EXPORT int mlx5dv_devx_obj_modify(struct mlx5dv_devx_obj *obj, const void *in, size_t inlen,
				     void *out, size_t outlen)
{
	(void)obj, (void)in, (void)inlen, (void)out, (void)outlen;
	return EOPNOTSUPP;
}

RV_EXPORT int mlx5dv_devx_obj_destroy(struct mlx5dv_devx_obj *obj)
{
	(void)obj;
	return EOPNOTSUPP;
}

RV_EXPORT struct mlx5dv_devx_umem *mlx5dv_devx_umem_reg(struct ibv_context *ctx, void *addr,
							size_t size, uint32_t access)
{
	(void)ctx, (void)addr, (void)size, (void)access;
	errno = EOPNOTSUPP;
	return NULL;
}

RV_EXPORT int mlx5dv_devx_umem_dereg(struct mlx5dv_devx_umem *umem)
{
	(void)umem;
	return EOPNOTSUPP;
}

RV_EXPORT int mlx5dv_devx_qp_query(struct ibv_qp *qp, const void *in, size_t inlen, void *out,
				   size_t outlen)
{
	(void)qp, (void)in, (void)inlen, (void)out, (void)outlen;
	return EOPNOTSUPP;
}

RV_EXPORT int mlx5dv_devx_qp_modify(struct ibv_qp *qp, const void *in, size_t inlen, void *out,
				    size_t outlen)
{
	(void)qp, (void)in, (void)inlen, (void)out, (void)outlen;
	return EOPNOTSUPP;
}

RV_EXPORT struct mlx5dv_devx_event_channel *
mlx5dv_devx_create_event_channel(struct ibv_context *context,
				 enum mlx5dv_devx_create_event_channel_flags flags)
{
	(void)context, (void)flags;
	errno = EOPNOTSUPP;
	return NULL;
}

RV_EXPORT void mlx5dv_devx_destroy_event_channel(struct mlx5dv_devx_event_channel *event_channel)
{
	(void)event_channel;
}

RV_EXPORT int mlx5dv_devx_subscribe_devx_event(struct mlx5dv_devx_event_channel *event_channel,
					       struct mlx5dv_devx_obj *obj, uint16_t events_sz,
					       uint16_t events_num[], uint64_t cookie)
{
	(void)event_channel, (void)obj, (void)events_sz, (void)events_num, (void)cookie;
	return EOPNOTSUPP;
}

RV_EXPORT ssize_t mlx5dv_devx_get_event(struct mlx5dv_devx_event_channel *event_channel,
					struct mlx5dv_devx_async_event_hdr *event_data,
					size_t event_resp_len)
{
	(void)event_channel, (void)event_data, (void)event_resp_len;
	errno = EOPNOTSUPP;
	return -1;
}
#endif

#ifdef RV_EFA
#include <infiniband/efadv.h>

RV_EXPORT struct ibv_qp *efadv_create_qp_ex(struct ibv_context *ibvctx,
					    struct ibv_qp_init_attr_ex *attr_ex,
					    struct efadv_qp_init_attr *efa_attr,
					    uint32_t inlen)
{
	(void)ibvctx, (void)attr_ex, (void)efa_attr, (void)inlen;
	errno = EOPNOTSUPP;
	return NULL;
}

RV_EXPORT int efadv_query_device(struct ibv_context *ibvctx, struct efadv_device_attr *attr,
				 uint32_t inlen)
{
	(void)ibvctx, (void)attr, (void)inlen;
	return EOPNOTSUPP;
}

RV_EXPORT int efadv_query_ah(struct ibv_ah *ibvah, struct efadv_ah_attr *attr, uint32_t inlen)
{
	(void)ibvah, (void)attr, (void)inlen;
	return EOPNOTSUPP;
}

/* EFA_1.2 (libfabric's efa provider imports these at load time) */
RV_EXPORT struct ibv_cq_ex *efadv_create_cq(struct ibv_context *ibvctx,
					    struct ibv_cq_init_attr_ex *attr_ex,
					    struct efadv_cq_init_attr *efa_attr, uint32_t inlen)
{
	(void)ibvctx, (void)attr_ex, (void)efa_attr, (void)inlen;
	errno = EOPNOTSUPP;
	return NULL;
}

RV_EXPORT struct efadv_cq *efadv_cq_from_ibv_cq_ex(struct ibv_cq_ex *ibvcqx)
{
	(void)ibvcqx;
	return NULL;   /* no CQ of ours is an EFA one */
}
#endif
