// SPDX-License-Identifier: MIT
/*
 * libroshm-verbs: ibv_create_qp_ex and the work-request API of struct
 * ibv_qp_ex (ibv_wr_start, ibv_wr_send, ibv_wr_set_sge, ibv_wr_complete,
 * ...; man ibv_wr_post). Between ibv_wr_start and ibv_wr_complete the calls
 * build ordinary struct ibv_send_wr in storage of the QP's own (one per send
 * queue entry, its SGEs, its inline bytes); ibv_wr_complete posts them as
 * one chain through the same path as ibv_post_send (qp.c), with the same
 * checks. A builder call that cannot be honoured (an opcode roshm0 does not
 * have, more SGEs than the QP's max_send_sge, inline data over 256 bytes,
 * more WRs than the send queue holds) makes ibv_wr_complete return its
 * errno and post nothing; ibv_wr_abort drops what was built. As
 * ibv_post_send, ibv_wr_complete may post the WRs before one it refuses.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rv.h"

struct rv_qpx {
	struct ibv_send_wr *wr;
	struct ibv_sge *sge;    /* stride per WR */
	uint8_t *inl;           /* RV_MAX_INLINE per WR */
	uint32_t cap, stride, n;
	int err;
};

static struct rv_qp *xq(struct ibv_qp_ex *qx)
{
	return (struct rv_qp *)(void *)qx;   /* the union at offset 0 of struct rv_qp */
}

/* A new WR of @op at the end of the batch, or NULL (the batch failed). */
static struct ibv_send_wr *x_new(struct ibv_qp_ex *qx, enum ibv_wr_opcode op)
{
	struct rv_qpx *b = xq(qx)->x;
	struct ibv_send_wr *wr;

	if (b->err)
		return NULL;
	if (b->n >= b->cap) {
		b->err = ENOMEM;
		return NULL;
	}
	wr = &b->wr[b->n];
	memset(wr, 0, sizeof(*wr));
	wr->wr_id = qx->wr_id;
	wr->send_flags = qx->wr_flags;
	wr->opcode = op;
	wr->sg_list = &b->sge[(size_t)b->n * b->stride];
	if (b->n)
		b->wr[b->n - 1].next = wr;
	b->n++;
	return wr;
}

/* The WR the setters apply to: the last one built. */
static struct ibv_send_wr *x_last(struct ibv_qp_ex *qx)
{
	struct rv_qpx *b = xq(qx)->x;

	if (b->err)
		return NULL;
	if (!b->n) {
		b->err = EINVAL;
		return NULL;
	}
	return &b->wr[b->n - 1];
}

static void x_fail(struct ibv_qp_ex *qx, int err)
{
	struct rv_qpx *b = xq(qx)->x;

	if (!b->err)
		b->err = err;
}

static void x_cmp_swp(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t addr, uint64_t cmp, uint64_t swap)
{
	struct ibv_send_wr *wr = x_new(qx, IBV_WR_ATOMIC_CMP_AND_SWP);

	if (wr) {
		wr->wr.atomic.rkey = rkey;
		wr->wr.atomic.remote_addr = addr;
		wr->wr.atomic.compare_add = cmp;
		wr->wr.atomic.swap = swap;
	}
}

static void x_fetch_add(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t addr, uint64_t add)
{
	struct ibv_send_wr *wr = x_new(qx, IBV_WR_ATOMIC_FETCH_AND_ADD);

	if (wr) {
		wr->wr.atomic.rkey = rkey;
		wr->wr.atomic.remote_addr = addr;
		wr->wr.atomic.compare_add = add;
	}
}

static void x_rdma(struct ibv_qp_ex *qx, enum ibv_wr_opcode op, uint32_t rkey, uint64_t addr,
		   __be32 imm)
{
	struct ibv_send_wr *wr = x_new(qx, op);

	if (wr) {
		wr->wr.rdma.rkey = rkey;
		wr->wr.rdma.remote_addr = addr;
		wr->imm_data = imm;
	}
}

static void x_read(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t addr)
{
	x_rdma(qx, IBV_WR_RDMA_READ, rkey, addr, 0);
}

static void x_write(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t addr)
{
	x_rdma(qx, IBV_WR_RDMA_WRITE, rkey, addr, 0);
}

static void x_write_imm(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t addr, __be32 imm)
{
	x_rdma(qx, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, addr, imm);
}

static void x_send(struct ibv_qp_ex *qx)
{
	x_new(qx, IBV_WR_SEND);
}

static void x_send_imm(struct ibv_qp_ex *qx, __be32 imm)
{
	struct ibv_send_wr *wr = x_new(qx, IBV_WR_SEND_WITH_IMM);

	if (wr)
		wr->imm_data = imm;
}

/* Memory windows (mw.c): a type 2 window's bind, an invalidation */
static void x_bind_mw(struct ibv_qp_ex *qx, struct ibv_mw *mw, uint32_t rkey,
		      const struct ibv_mw_bind_info *bi)
{
	struct ibv_send_wr *wr = x_new(qx, IBV_WR_BIND_MW);

	if (wr) {
		wr->bind_mw.mw = mw;
		wr->bind_mw.rkey = rkey;
		if (bi)
			wr->bind_mw.bind_info = *bi;
	}
}

static void x_local_inv(struct ibv_qp_ex *qx, uint32_t rkey)
{
	struct ibv_send_wr *wr = x_new(qx, IBV_WR_LOCAL_INV);

	if (wr)
		wr->invalidate_rkey = rkey;
}

static void x_send_inv(struct ibv_qp_ex *qx, uint32_t rkey)
{
	struct ibv_send_wr *wr = x_new(qx, IBV_WR_SEND_WITH_INV);

	if (wr)
		wr->invalidate_rkey = rkey;
}

/* What roshm0 does not have (TSO, atomic write): the batch fails
 * with EOPNOTSUPP. */

static void x_tso(struct ibv_qp_ex *qx, void *hdr, uint16_t hdr_sz, uint16_t mss)
{
	(void)hdr, (void)hdr_sz, (void)mss;
	x_fail(qx, EOPNOTSUPP);
}


static void x_atomic_write(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t addr, const void *v)
{
	(void)rkey, (void)addr, (void)v;
	x_fail(qx, EOPNOTSUPP);
}

static void x_ud_addr(struct ibv_qp_ex *qx, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey)
{
	struct ibv_send_wr *wr = x_last(qx);

	if (wr) {
		wr->wr.ud.ah = ah;
		wr->wr.ud.remote_qpn = qpn;
		wr->wr.ud.remote_qkey = qkey;
	}
}

/* XRC_SEND (xrc.c): the SRQ of the receiver's domain */
static void x_xrc(struct ibv_qp_ex *qx, uint32_t srqn)
{
	struct ibv_send_wr *wr = x_last(qx);

	if (wr)
		wr->qp_type.xrc.remote_srqn = srqn;
}

static void x_sge_list(struct ibv_qp_ex *qx, size_t n, const struct ibv_sge *sg)
{
	struct ibv_send_wr *wr = x_last(qx);
	struct rv_qpx *b = xq(qx)->x;

	if (!wr)
		return;
	if (n > b->stride) {
		x_fail(qx, EINVAL);
		return;
	}
	if (n)
		memcpy(wr->sg_list, sg, n * sizeof(*sg));
	wr->num_sge = (int)n;
	wr->send_flags &= ~(unsigned int)IBV_SEND_INLINE;
}

static void x_sge(struct ibv_qp_ex *qx, uint32_t lkey, uint64_t addr, uint32_t len)
{
	struct ibv_sge sg = { .addr = addr, .length = len, .lkey = lkey };

	x_sge_list(qx, 1, &sg);
}

/* Inline: the bytes are copied now, into the WR's own buffer. */
static void x_inline_list(struct ibv_qp_ex *qx, size_t n, const struct ibv_data_buf *buf)
{
	struct ibv_send_wr *wr = x_last(qx);
	struct rv_qpx *b = xq(qx)->x;
	uint8_t *d;
	size_t len = 0;

	if (!wr)
		return;
	d = b->inl + (size_t)(wr - b->wr) * RV_MAX_INLINE;
	for (size_t i = 0; i < n; i++) {
		if (buf[i].length > RV_MAX_INLINE - len) {
			x_fail(qx, EINVAL);
			return;
		}
		if (buf[i].length)   /* an empty one's address may be NULL */
			memcpy(d + len, buf[i].addr, buf[i].length);
		len += buf[i].length;
	}
	wr->sg_list[0] = (struct ibv_sge){ .addr = (uintptr_t)d, .length = (uint32_t)len };
	wr->num_sge = 1;
	wr->send_flags |= IBV_SEND_INLINE;
}

static void x_inline(struct ibv_qp_ex *qx, void *addr, size_t len)
{
	struct ibv_data_buf b = { .addr = addr, .length = len };

	x_inline_list(qx, 1, &b);
}

static void x_start(struct ibv_qp_ex *qx)
{
	struct rv_qpx *b = xq(qx)->x;

	b->n = 0;
	b->err = 0;
}

static int x_complete(struct ibv_qp_ex *qx)
{
	struct rv_qp *q = xq(qx);
	struct rv_qpx *b = q->x;
	struct ibv_send_wr *bad;
	int ret = b->err;

	if (!ret && b->n)
		ret = rv_post_send(&q->qp, b->wr, &bad);
	b->n = 0;
	b->err = 0;
	return ret;
}

static void x_abort(struct ibv_qp_ex *qx)
{
	struct rv_qpx *b = xq(qx)->x;

	b->n = 0;
	b->err = 0;
}

void rv_qpx_free(struct rv_qp *q)
{
	if (!q->x)
		return;
	free(q->x->wr);
	free(q->x->sge);
	free(q->x->inl);
	free(q->x);
	q->x = NULL;
}

#define RV_QPX_OPS (IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | \
		    IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ | \
		    IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | \
		    IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND_WITH_INV)

/* The context's create_qp_ex (ibv_create_qp_ex is an inline of libibverbs
 * that calls it): a PD (an XRC domain for XRC_RECV, xrc.c), and the
 * work-request API for the send operations roshm0 has; RSS, TSO and
 * creation flags are not provided. */
struct ibv_qp *rv_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;
	struct rv_qp *q;
	struct rv_qpx *b;

	bool xrecv = a->qp_type == IBV_QPT_XRC_RECV;

	/* a PD, or (XRC_RECV) an XRC domain (xrc.c) */
	if (xrecv ? !(a->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !a->xrcd || a->xrcd->context != ctx :
		    !(a->comp_mask & IBV_QP_INIT_ATTR_PD) || !a->pd || a->pd->context != ctx) {
		errno = EINVAL;
		return NULL;
	}
	if ((a->comp_mask & ~(uint32_t)(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS |
					IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_XRCD)) ||
	    (xrecv && (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)) ||
	    ((a->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && a->create_flags) ||
	    ((a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) && (a->send_ops_flags & ~(uint64_t)RV_QPX_OPS))) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	memset(&ia, 0, sizeof(ia));
	ia.qp_context = a->qp_context;
	ia.send_cq = a->send_cq;
	ia.recv_cq = a->recv_cq;
	ia.srq = a->srq;
	ia.cap = a->cap;
	ia.qp_type = a->qp_type;
	ia.sq_sig_all = a->sq_sig_all;
	qp = rv_qp_create(ctx, xrecv ? NULL : a->pd, xrecv ? a->xrcd : NULL, &ia);
	if (!qp)
		return NULL;
	a->cap = ia.cap;
	if (!(a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS))
		return qp;
	q = (struct rv_qp *)qp;
	b = calloc(1, sizeof(*b));
	if (b) {
		b->cap = q->max_send_wr;
		b->stride = q->sge_stride;
		b->wr = calloc(b->cap, sizeof(*b->wr));
		b->sge = calloc((size_t)b->cap * b->stride, sizeof(*b->sge));
		b->inl = malloc((size_t)b->cap * RV_MAX_INLINE);
	}
	q->x = b;
	if (!b || !b->wr || !b->sge || !b->inl) {
		ibv_destroy_qp(qp);   /* frees b too */
		errno = ENOMEM;
		return NULL;
	}
	q->qpx.comp_mask = 0;
	q->qpx.wr_atomic_cmp_swp = x_cmp_swp;
	q->qpx.wr_atomic_fetch_add = x_fetch_add;
	q->qpx.wr_bind_mw = x_bind_mw;
	q->qpx.wr_local_inv = x_local_inv;
	q->qpx.wr_rdma_read = x_read;
	q->qpx.wr_rdma_write = x_write;
	q->qpx.wr_rdma_write_imm = x_write_imm;
	q->qpx.wr_send = x_send;
	q->qpx.wr_send_imm = x_send_imm;
	q->qpx.wr_send_inv = x_send_inv;
	q->qpx.wr_send_tso = x_tso;
	q->qpx.wr_set_ud_addr = x_ud_addr;
	q->qpx.wr_set_xrc_srqn = x_xrc;
	q->qpx.wr_set_inline_data = x_inline;
	q->qpx.wr_set_inline_data_list = x_inline_list;
	q->qpx.wr_set_sge = x_sge;
	q->qpx.wr_set_sge_list = x_sge_list;
	q->qpx.wr_start = x_start;
	q->qpx.wr_complete = x_complete;
	q->qpx.wr_abort = x_abort;
	q->qpx.wr_atomic_write = x_atomic_write;
	return qp;
}

/* Only a QP made by ibv_create_qp_ex with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS
 * has the work-request API, as in libibverbs. */
RV_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	struct rv_qp *q = (struct rv_qp *)qp;

	return q->x ? &q->qpx : NULL;
}
