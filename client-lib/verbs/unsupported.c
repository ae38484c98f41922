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
#include <string.h>

#include <infiniband/verbs.h>
#include <infiniband/sa.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>

#define RV_EXPORT __attribute__((visibility("default")))

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

/* Kernel-ABI converters, used by librdmacm: field-by-field copies. */
RV_EXPORT void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src)
{
	memcpy(dst->grh.dgid.raw, src->grh.dgid, sizeof(dst->grh.dgid));
	dst->grh.flow_label = src->grh.flow_label;
	dst->grh.sgid_index = src->grh.sgid_index;
	dst->grh.hop_limit = src->grh.hop_limit;
	dst->grh.traffic_class = src->grh.traffic_class;
	dst->dlid = src->dlid;
	dst->sl = src->sl;
	dst->src_path_bits = src->src_path_bits;
	dst->static_rate = src->static_rate;
	dst->is_global = src->is_global;
	dst->port_num = src->port_num;
}

RV_EXPORT void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src)
{
	dst->cur_qp_state = src->cur_qp_state;
	dst->path_mtu = src->path_mtu;
	dst->path_mig_state = src->path_mig_state;
	dst->qkey = src->qkey;
	dst->rq_psn = src->rq_psn;
	dst->sq_psn = src->sq_psn;
	dst->dest_qp_num = src->dest_qp_num;
	dst->qp_access_flags = src->qp_access_flags;
	dst->cap.max_send_wr = src->max_send_wr;
	dst->cap.max_recv_wr = src->max_recv_wr;
	dst->cap.max_send_sge = src->max_send_sge;
	dst->cap.max_recv_sge = src->max_recv_sge;
	dst->cap.max_inline_data = src->max_inline_data;
	ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
	ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);
	dst->pkey_index = src->pkey_index;
	dst->alt_pkey_index = src->alt_pkey_index;
	dst->en_sqd_async_notify = src->en_sqd_async_notify;
	dst->sq_draining = src->sq_draining;
	dst->max_rd_atomic = src->max_rd_atomic;
	dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
	dst->min_rnr_timer = src->min_rnr_timer;
	dst->port_num = src->port_num;
	dst->timeout = src->timeout;
	dst->retry_cnt = src->retry_cnt;
	dst->rnr_retry = src->rnr_retry;
	dst->alt_port_num = src->alt_port_num;
	dst->alt_timeout = src->alt_timeout;
}

RV_EXPORT void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst,
					   struct ib_user_path_rec *src)
{
	memcpy(dst->dgid.raw, src->dgid, sizeof(dst->dgid));
	memcpy(dst->sgid.raw, src->sgid, sizeof(dst->sgid));
	dst->dlid = src->dlid;
	dst->slid = src->slid;
	dst->raw_traffic = (int)src->raw_traffic;
	dst->flow_label = src->flow_label;
	dst->reversible = (int)src->reversible;
	dst->mtu = (uint8_t)src->mtu;
	dst->pkey = src->pkey;
	dst->hop_limit = src->hop_limit;
	dst->traffic_class = src->traffic_class;
	dst->numb_path = src->numb_path;
	dst->sl = src->sl;
	dst->mtu_selector = src->mtu_selector;
	dst->rate_selector = src->rate_selector;
	dst->rate = src->rate;
	dst->packet_life_time_selector = src->packet_life_time_selector;
	dst->packet_life_time = src->packet_life_time;
	dst->preference = src->preference;
}

RV_EXPORT void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst,
					 struct ibv_sa_path_rec *src)
{
	memcpy(dst->dgid, src->dgid.raw, sizeof(dst->dgid));
	memcpy(dst->sgid, src->sgid.raw, sizeof(dst->sgid));
	dst->dlid = src->dlid;
	dst->slid = src->slid;
	dst->raw_traffic = src->raw_traffic ? 1 : 0;
	dst->flow_label = src->flow_label;
	dst->reversible = src->reversible ? 1 : 0;
	dst->mtu = src->mtu;
	dst->pkey = src->pkey;
	dst->hop_limit = src->hop_limit;
	dst->traffic_class = src->traffic_class;
	dst->numb_path = src->numb_path;
	dst->sl = src->sl;
	dst->mtu_selector = src->mtu_selector;
	dst->rate_selector = src->rate_selector;
	dst->rate = src->rate;
	dst->packet_life_time_selector = src->packet_life_time_selector;
	dst->packet_life_time = src->packet_life_time;
	dst->preference = src->preference;
}

/* UD: the address of a received datagram's sender. Only RC QPs exist. */

/* The MAC of a RoCE peer: roshm addresses nodes by name, not by MAC. */
int ibv_resolve_eth_l2_from_gid(struct ibv_context *context, struct ibv_ah_attr *attr,
				uint8_t eth_mac[6], uint16_t *vid);
RV_EXPORT int ibv_resolve_eth_l2_from_gid(struct ibv_context *context, struct ibv_ah_attr *attr,
					  uint8_t eth_mac[6], uint16_t *vid)
{
	(void)context, (void)attr, (void)eth_mac, (void)vid;
	return EOPNOTSUPP;
}

/* Changing an MR in place (its pages, PD or access) keeping its keys: peers
 * hold its metadata; deregister and register again instead. */
RV_EXPORT int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr,
			   size_t length, int access)
{
	(void)mr, (void)flags, (void)pd, (void)addr, (void)length, (void)access;
	errno = EOPNOTSUPP;
	return IBV_REREG_MR_ERR_INPUT;
}

/* dma-buf memory (GPU, accelerators): roshmd reaches only a pod's memfds. */
RV_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
					   uint64_t iova, int fd, int access)
{
	(void)pd, (void)offset, (void)length, (void)iova, (void)fd, (void)access;
	errno = EOPNOTSUPP;
	return NULL;
}

/* Sharing a context's objects between processes through its command fd:
 * roshm0 has no command fd (cmd_fd is -1). */
RV_EXPORT struct ibv_context *ibv_import_device(int cmd_fd)
{
	(void)cmd_fd;
	errno = EOPNOTSUPP;
	return NULL;
}

RV_EXPORT struct ibv_pd *ibv_import_pd(struct ibv_context *context, uint32_t pd_handle)
{
	(void)context, (void)pd_handle;
	errno = EOPNOTSUPP;
	return NULL;
}

RV_EXPORT void ibv_unimport_pd(struct ibv_pd *pd)
{
	(void)pd;
}

RV_EXPORT struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	(void)pd, (void)mr_handle;
	errno = EOPNOTSUPP;
	return NULL;
}

RV_EXPORT void ibv_unimport_mr(struct ibv_mr *mr)
{
	(void)mr;
}

RV_EXPORT struct ibv_dm *ibv_import_dm(struct ibv_context *context, uint32_t dm_handle)
{
	(void)context, (void)dm_handle;
	errno = EOPNOTSUPP;
	return NULL;
}

RV_EXPORT void ibv_unimport_dm(struct ibv_dm *dm)
{
	(void)dm;
}
