// SPDX-License-Identifier: MIT
/*
 * libroshm-verbs: ibv_create_cq_ex and the polling API of struct ibv_cq_ex
 * (ibv_start_poll, ibv_next_poll, ibv_end_poll, ibv_wc_read_*; man
 * ibv_create_cq_ex). The CQ is an ordinary one of cq.c; each poll takes one
 * completion into the CQ's current entry, which the read calls answer from.
 * The standard fields, and completion timestamps: roshm0's clock
 * (hca_core_clock 1 GHz, ibv_query_rt_values_ex) is CLOCK_MONOTONIC in ns,
 * and a completion's time is when this library put it in the CQ (when it
 * took roshmd's completion or the datagram or message it completes, which
 * takes a call into the library or the notifier, not a NIC's clock);
 * IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK gives the same instant in
 * CLOCK_REALTIME ns. No flow tags, CVLAN, tag matching or parent domains.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rv.h"

static struct rv_cq *xc(struct ibv_cq_ex *cx)
{
	return (struct rv_cq *)(void *)cx;   /* the union at offset 0 of struct rv_cq */
}

static int x_next(struct ibv_cq_ex *cx)
{
	struct rv_cq *q = xc(cx);
	int n = rv_poll_cq_ts(&q->cq, 1, &q->xwc, &q->xts, true);

	if (n < 0)
		return EOVERFLOW;   /* the CQ overran (IBV_EVENT_CQ_ERR) */
	if (!n)
		return ENOENT;
	cx->status = q->xwc.status;
	cx->wr_id = q->xwc.wr_id;
	return 0;
}

/* The lock is held from a start that found a completion to the end, as
 * libibverbs' providers hold the CQ's: one poller at a time. */
static int x_start(struct ibv_cq_ex *cx, struct ibv_poll_cq_attr *attr)
{
	struct rv_cq *q = xc(cx);
	int ret;

	if (attr && attr->comp_mask)
		return EINVAL;
	pthread_mutex_lock(&q->xlock);
	ret = x_next(cx);
	if (ret)
		pthread_mutex_unlock(&q->xlock);
	return ret;
}

static void x_end(struct ibv_cq_ex *cx)
{
	rv_poll_cq_end(&xc(cx)->cq);
	pthread_mutex_unlock(&xc(cx)->xlock);
}

static enum ibv_wc_opcode x_opcode(struct ibv_cq_ex *cx)
{
	return xc(cx)->xwc.opcode;
}

static uint32_t x_vendor_err(struct ibv_cq_ex *cx)
{
	return xc(cx)->xwc.vendor_err;
}

static uint32_t x_byte_len(struct ibv_cq_ex *cx)
{
	return xc(cx)->xwc.byte_len;
}

static __be32 x_imm(struct ibv_cq_ex *cx)
{
	return xc(cx)->xwc.imm_data;
}

static uint32_t x_qp_num(struct ibv_cq_ex *cx)
{
	return xc(cx)->xwc.qp_num;
}

static uint32_t x_src_qp(struct ibv_cq_ex *cx)
{
	return xc(cx)->xwc.src_qp;
}

static unsigned int x_wc_flags(struct ibv_cq_ex *cx)
{
	return xc(cx)->xwc.wc_flags;
}

static uint32_t x_slid(struct ibv_cq_ex *cx)
{
	return xc(cx)->xwc.slid;
}

static uint8_t x_sl(struct ibv_cq_ex *cx)
{
	return xc(cx)->xwc.sl;
}

static uint8_t x_path_bits(struct ibv_cq_ex *cx)
{
	return xc(cx)->xwc.dlid_path_bits;
}

static uint64_t x_ts(struct ibv_cq_ex *cx)
{
	return xc(cx)->xts;
}

/* the same instant on CLOCK_REALTIME: the clocks' offset now */
static uint64_t x_wallclock(struct ibv_cq_ex *cx)
{
	struct timespec m, r;

	clock_gettime(CLOCK_MONOTONIC, &m);
	clock_gettime(CLOCK_REALTIME, &r);
	return xc(cx)->xts - ((uint64_t)m.tv_sec * 1000000000ull + (uint64_t)m.tv_nsec) +
	       (uint64_t)r.tv_sec * 1000000000ull + (uint64_t)r.tv_nsec;
}

#define RV_CQX_TS (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
#define RV_CQX_FLAGS (IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM | \
		      IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL | \
		      IBV_WC_EX_WITH_DLID_PATH_BITS | RV_CQX_TS)

/* The context's create_cq_ex (ibv_create_cq_ex is an inline of libibverbs). */
struct ibv_cq_ex *rv_create_cq_ex(struct ibv_context *ctx, struct ibv_cq_init_attr_ex *a)
{
	struct ibv_cq *cq;
	struct rv_cq *q;

	if ((a->wc_flags & ~(uint64_t)RV_CQX_FLAGS) ||
	    (a->comp_mask & ~(uint32_t)IBV_CQ_INIT_ATTR_MASK_FLAGS) ||
	    ((a->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
	     (a->flags & ~(uint32_t)IBV_CREATE_CQ_ATTR_SINGLE_THREADED))) {
		errno = EOPNOTSUPP;   /* flow tags, parent domains, ... */
		return NULL;
	}
	if (a->cqe > INT32_MAX) {
		errno = EINVAL;
		return NULL;
	}
	cq = ibv_create_cq(ctx, (int)a->cqe, a->cq_context, a->channel, (int)a->comp_vector);
	if (!cq)
		return NULL;
	q = (struct rv_cq *)cq;
	/* before any QP can fill it: no lock needed yet */
	if ((a->wc_flags & RV_CQX_TS) && !(q->ts = calloc((size_t)q->mask + 1, sizeof(*q->ts)))) {
		ibv_destroy_cq(cq);
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&q->xlock, NULL);
	q->cqx.comp_mask = 0;
	q->cqx.start_poll = x_start;
	q->cqx.next_poll = x_next;
	q->cqx.end_poll = x_end;
	q->cqx.read_opcode = x_opcode;
	q->cqx.read_vendor_err = x_vendor_err;
	q->cqx.read_byte_len = x_byte_len;
	q->cqx.read_imm_data = x_imm;
	q->cqx.read_qp_num = x_qp_num;
	q->cqx.read_src_qp = x_src_qp;
	q->cqx.read_wc_flags = x_wc_flags;
	q->cqx.read_slid = x_slid;
	q->cqx.read_sl = x_sl;
	q->cqx.read_dlid_path_bits = x_path_bits;
	q->cqx.read_completion_ts = x_ts;
	q->cqx.read_completion_wallclock_ns = x_wallclock;
	return &q->cqx;
}
