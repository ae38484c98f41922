// SPDX-License-Identifier: MIT
/*
 * libmlx5.so.1 and libefa.so.1 stand-ins: perftest links the mlx5 and EFA
 * direct-verbs libraries, and Debian's real ones bind rdma-core's private
 * provider ABI at load time (IBVERBS_PRIVATE_34), which libroshm-verbs does
 * not offer. Beside our libibverbs.so.1 these take their place. Their entry
 * points are only used on an mlx5 or EFA device, which roshm0 is not: each
 * fails with EOPNOTSUPP. Built twice, once per soname (-DRV_MLX5 / -DRV_EFA).
 */
#include <errno.h>
#include <stddef.h>

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
#endif
