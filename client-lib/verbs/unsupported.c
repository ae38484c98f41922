// SPDX-License-Identifier: MIT
/*
 * libibverbs entry points that applications (or librdmacm, which Debian's
 * perftest links and which binds every symbol it imports at load time) name
 * but that roshm0 does not provide in this slice. Each fails the way
 * libibverbs fails for a device without the feature: NULL with errno, or
 * an errno value, never a pretended success. docs/verbs-compat.md lists them.
 */
#include <errno.h>
#include <stddef.h>

#include <infiniband/verbs.h>
#include <infiniband/sa.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>

#define RV_EXPORT __attribute__((visibility("default")))

/* UD address handles: only RC QPs exist. */
RV_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	(void)pd, (void)attr;
	errno = EOPNOTSUPP;
	return NULL;
}

RV_EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc,
					       struct ibv_grh *grh, uint8_t port)
{
	(void)pd, (void)wc, (void)grh, (void)port;
	errno = EOPNOTSUPP;
	return NULL;
}

RV_EXPORT int ibv_destroy_ah(struct ibv_ah *ah)
{
	(void)ah;
	return EOPNOTSUPP;
}

/* Shared receive queues: no receive side in this slice. */
RV_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *a)
{
	(void)pd, (void)a;
	errno = EOPNOTSUPP;
	return NULL;
}

RV_EXPORT int ibv_destroy_srq(struct ibv_srq *srq)
{
	(void)srq;
	return EOPNOTSUPP;
}

RV_EXPORT int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	(void)qp, (void)gid, (void)lid;
	return EOPNOTSUPP;
}

RV_EXPORT int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	(void)qp, (void)gid, (void)lid;
	return EOPNOTSUPP;
}

RV_EXPORT int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp, (void)ece;
	return EOPNOTSUPP;
}

RV_EXPORT int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp, (void)ece;
	return EOPNOTSUPP;
}

/* roshm0 has no sysfs node (that is the point): there is nothing to read. */
RV_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
	(void)dir, (void)file, (void)buf, (void)size;
	errno = ENOENT;
	return -1;
}

RV_EXPORT const char *ibv_get_sysfs_path(void)
{
	return "/sys";
}

/* Kernel-ABI converters (used by librdmacm's kernel CM path, which cannot
 * reach roshm0). They are plain field copies in libibverbs; here the
 * kernel structs never come, so they leave the destination untouched. */
RV_EXPORT void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src)
{
	(void)dst, (void)src;
}

RV_EXPORT void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src)
{
	(void)dst, (void)src;
}

RV_EXPORT void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst,
					   struct ib_user_path_rec *src)
{
	(void)dst, (void)src;
}
