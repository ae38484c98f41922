// SPDX-License-Identifier: MIT
/*
 * libroshm-verbs: a QP's life. ibv_create_qp draws the QPN and creates the
 * QP's inbound ring ("ibv-qp-<qpn>", recv.c); ibv_modify_qp follows the
 * INIT/RTR/RTS transitions the application's own exchange drives (RTR
 * finds the peer QP's ring by dest_qp_num), RESET and ERR (what is posted
 * flushes); ibv_destroy_qp waits for what roshmd still does for it. The
 * send engine is qp.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rv.h"

/* ------------------------------------------------------------------ QPs */

static void qp_free(struct rv_qp *q)
{
	free(q->swr);
	free(q->sge);
	free(q->inl);
	free(q->rwr);
	free(q->rsge);
	free(q->ud_seen);
	free(q->ud_ord);
	free(q->ud_tmp);
	rv_qpx_free(q);
	free(q);
}

/*
 * A QP of @a's type on @pd, or (XRC_RECV) in XRC domain @xrcd. XRC_SEND:
 * an RC requester with no receive queue (no receive CQ, no SRQ); XRC_RECV:
 * a responder with neither queue nor PD nor CQ, whose messages go to the
 * SRQs of @xrcd (xrc.c).
 */
struct ibv_qp *rv_qp_create(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_xrcd *xrcd,
			    struct ibv_qp_init_attr *ua)
{
	struct rv_ctx *c = to_ctx(ctx);
	/* the caller's attributes: only cap is written back (an application
	 * may make its next QP with the same ones) */
	struct ibv_qp_init_attr ia = *ua, *a = &ia;
	struct rv_srq *srq = (struct rv_srq *)a->srq;
	/* XRC_RECV: no receive queue, but its max_recv_wr (perftest gives
	 * its SRQ's depth) sizes its ring as an RC QP's */
	uint32_t xring = ua->cap.max_recv_wr < RV_MAX_WR ? ua->cap.max_recv_wr : RV_MAX_WR;
	bool xsend = a->qp_type == IBV_QPT_XRC_SEND, xrecv = a->qp_type == IBV_QPT_XRC_RECV;
	struct rv_qp *q;
	uint32_t n, rn;
	int ret;

	/* UC: the RC engine, without READ and atomics, and what fails at the
	 * peer completes as sent (qp.c): nothing answers a UC sender */
	if (a->qp_type != IBV_QPT_RC && a->qp_type != IBV_QPT_UC && a->qp_type != IBV_QPT_UD &&
	    !xsend && !xrecv) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (xrecv ? !xrcd || xrcd->context != ctx : !pd || pd->context != ctx || xrcd) {
		errno = EINVAL;
		return NULL;
	}
	if (xsend || xrecv) {
		if (srq || (xsend && !a->send_cq)) {
			errno = EINVAL;
			return NULL;
		}
		/* no receive queue (XRC_SEND), no queue at all (XRC_RECV) */
		a->recv_cq = NULL;
		a->cap.max_recv_wr = 0;
		a->cap.max_recv_sge = 0;
		if (xrecv) {
			a->send_cq = NULL;
			a->cap.max_send_wr = 0;
			a->cap.max_send_sge = 0;
			a->cap.max_inline_data = 0;
		}
	}
	if (srq) {   /* its receive queue: the SRQ's (srq.c) */
		if (srq->srq.context != ctx || srq->xrcd) {
			errno = EINVAL;
			return NULL;
		}
		a->cap.max_recv_wr = 0;
		a->cap.max_recv_sge = 0;
	}
	if ((!xrecv && !a->send_cq) || (!xsend && !xrecv && !a->recv_cq) ||
	    a->cap.max_send_wr > RV_MAX_WR ||
	    a->cap.max_recv_wr > RV_MAX_WR || a->cap.max_send_sge > RV_MAX_SGE ||
	    a->cap.max_recv_sge > RV_MAX_SGE || a->cap.max_inline_data > RV_MAX_INLINE) {
		if (getenv("ROSHM_VERBS_DEBUG"))
			fprintf(stderr, "roshm-verbs: create_qp: caps beyond the device's: send_wr %u "
				"recv_wr %u (max %u), send_sge %u recv_sge %u (max %u), inline %u "
				"(max %u)\n", a->cap.max_send_wr, a->cap.max_recv_wr, RV_MAX_WR,
				a->cap.max_send_sge, a->cap.max_recv_sge, RV_MAX_SGE,
				a->cap.max_inline_data, RV_MAX_INLINE);
		errno = EINVAL;
		return NULL;
	}
	n = (uint32_t)rv_pow2(a->cap.max_send_wr ? a->cap.max_send_wr : 1);
	rn = srq || xrecv ? 1 : (uint32_t)rv_pow2(a->cap.max_recv_wr ? a->cap.max_recv_wr : 1);
	q = calloc(1, sizeof(*q));
	if (!q) {
		errno = ENOMEM;
		return NULL;
	}
	q->sge_stride = a->cap.max_send_sge ? a->cap.max_send_sge : 1;
	/* XRC_RECV: room for any SRQ's RECV (rv_xrc_pick sets the stride) */
	q->rsge_stride = xrecv ? RV_MAX_SGE : srq ? srq->max_sge :
			 a->cap.max_recv_sge ? a->cap.max_recv_sge : 1;
	q->swr = calloc(n, sizeof(*q->swr));
	q->sge = calloc((size_t)n * q->sge_stride, sizeof(*q->sge));
	q->inl = malloc((size_t)n * RV_MAX_INLINE);
	q->rwr = calloc(rn, sizeof(*q->rwr));
	q->rsge = calloc((size_t)rn * q->rsge_stride, sizeof(*q->rsge));
	if (!q->swr || !q->sge || !q->inl || !q->rwr || !q->rsge) {
		qp_free(q);
		errno = ENOMEM;
		return NULL;
	}
	q->mask = n - 1;
	q->rq_mask = rn - 1;
	q->max_send_wr = a->cap.max_send_wr ? a->cap.max_send_wr : 1;
	q->sq_sig_all = a->sq_sig_all;
	q->cap = a->cap;
	q->cap.max_inline_data = xrecv ? 0 : RV_MAX_INLINE;
	ua->cap = q->cap;
	q->qp.context = ctx;
	q->qp.qp_context = a->qp_context;
	q->qp.pd = pd;
	q->qp.send_cq = a->send_cq;
	q->qp.recv_cq = a->recv_cq;
	q->qp.state = IBV_QPS_RESET;
	q->qp.qp_type = a->qp_type;
	/* UC has no RNR NAK: a sender waits for room in the peer's ring, as
	 * long as it takes (dropping would be allowed, waiting is kinder) */
	q->rnr_retry = a->qp_type == IBV_QPT_UC ? 7 : 0;
	pthread_mutex_init(&q->qp.mutex, NULL);
	pthread_cond_init(&q->qp.cond, NULL);
	rv_lock(c);
	/* also draws the QPN; RC/UC on an SRQ: rv_srq_ring_wr; UD on an SRQ:
	 * a slot per SRQ RECV (up to 1024, ud.c), as every RECV may go to this
	 * QP's datagrams; XRC_RECV: by the max_recv_wr asked for, as RC (else
	 * the smallest) */
	ret = a->qp_type == IBV_QPT_UD ? rv_ud_ring_create(c, q, srq ? srq->max_wr : a->cap.max_recv_wr) :
	      rv_ring_create(c, q, srq ? rv_srq_ring_wr(srq) : xrecv ? (xring ? xring : 1) : a->cap.max_recv_wr);
	if (ret) {
		rv_unlock(c);
		qp_free(q);
		if (getenv("ROSHM_VERBS_DEBUG"))
			fprintf(stderr, "roshm-verbs: create_qp: %s\n", strerror(-ret));
		errno = ret == -EDQUOT || ret == -ENOSPC ? ENOMEM : -ret;
		return NULL;
	}
	q->srq = srq;
	q->qp.srq = a->srq;
	if (srq)
		srq->nqps++;
	if (xrecv) {
		q->xrcd = (struct rv_xrcd *)xrcd;
		q->xrcd->nqps++;
	}
	q->next = c->qps;
	c->qps = q;
	rv_qpn_add(q);
	rv_unlock(c);
	return &q->qp;
}

RV_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
	return rv_qp_create(pd->context, pd, NULL, a);
}

/* Wait (bounded) until roshmd has no SQE of this QP left. */
static bool qp_drain(struct rv_ctx *c, struct rv_qp *q)
{
	uint64_t t0 = rv_now_ns();

	while (q->inflight && rv_now_ns() - t0 < RV_SYNC_NS) {
		roshm_submit(c->r);
		rv_reap(c);
		if (q->inflight)
			sched_yield();
	}
	return !q->inflight;
}

/* RESET: the queues are emptied without completions. */
static int qp_reset(struct rv_ctx *c, struct rv_qp *q)
{
	q->destroying = true;   /* nothing issues or reports meanwhile */
	if (!qp_drain(c, q)) {
		q->destroying = false;
		return EBUSY;
	}
	q->destroying = false;
	memset(&q->set, 0, sizeof(q->set));   /* as a NIC's QP in RESET reports */
	for (uint32_t i = q->head; i != q->tail; i++) {
		if (q->swr[i & q->mask].k)
			q->swr[i & q->mask].k->refs--;
		rv_ud_release(c, &q->swr[i & q->mask]);
	}
	q->head = q->issue = q->tail = 0;
	q->data_inflight = 0;
	q->ud_open = 0;
	q->want = 0;            /* no timer of the notifier's left for it */
	q->rnr_next_ns = 0;
	q->full = (struct rv_full){ 0 };
	q->broken = false;
	q->xrc_last = false;    /* a new connection takes messages again */
	if (q->srq && q->rq_head != q->rq_tail)
		rv_rq_flush(q);   /* a RECV it took from the SRQ goes back to the application */
	if (q->srq)
		rv_srq_unwait(q);
	q->rq_head = q->rq_tail = 0;
	rv_ring_rq(q);
	q->rm.in_msg = false;
	rv_ring_discard(q);   /* the old connection's fragments */
	rv_ring_set_peer(q, 0);
	rv_backlog(c, q, false);
	rv_peer_drop(c, q);
	rv_grant_drop(c, q);
	q->peer_status = IBV_WC_SUCCESS;
	return 0;
}

/* The attributes a NIC acts on and roshm only reports back. */
static void keep_set(struct rv_qp *q, const struct ibv_qp_attr *a, int mask)
{
	struct ibv_qp_attr *k = &q->set;

	if (mask & IBV_QP_ACCESS_FLAGS)
		k->qp_access_flags = a->qp_access_flags;
	if (mask & IBV_QP_PKEY_INDEX)
		k->pkey_index = a->pkey_index;
	if (mask & IBV_QP_PORT)
		k->port_num = a->port_num;
	if (mask & IBV_QP_AV)
		k->ah_attr = a->ah_attr;
	if (mask & IBV_QP_PATH_MTU)
		k->path_mtu = a->path_mtu;
	if (mask & IBV_QP_TIMEOUT)
		k->timeout = a->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		k->retry_cnt = a->retry_cnt;
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		k->max_rd_atomic = a->max_rd_atomic;
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		k->max_dest_rd_atomic = a->max_dest_rd_atomic;
	if (mask & IBV_QP_ALT_PATH) {
		k->alt_ah_attr = a->alt_ah_attr;
		k->alt_pkey_index = a->alt_pkey_index;
		k->alt_port_num = a->alt_port_num;
		k->alt_timeout = a->alt_timeout;
	}
	if (mask & IBV_QP_PATH_MIG_STATE)
		k->path_mig_state = a->path_mig_state;
	if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY)
		k->en_sqd_async_notify = a->en_sqd_async_notify;
}

/*
 * Which attributes a transition needs and which it may take, per QP type,
 * as the IB spec's modify-QP table has them (the kernel checks the same for
 * every NIC, rxe included): an application that passes a mask a NIC would
 * refuse gets EINVAL here too, not a QP that works on roshm0 only (@mask
 * trimmed by qp_mask_trim first). Returns false for a transition the table
 * does not have
 * (RESET -> RTR, ERR -> RTS, RTR -> RTR, ...).
 */
enum {
	QPT_RC, QPT_UC, QPT_UD, QPT_XI, QPT_XT, QPT_N
};

static int qpt_index(enum ibv_qp_type t)
{
	switch (t) {
	case IBV_QPT_RC: return QPT_RC;
	case IBV_QPT_UC: return QPT_UC;
	case IBV_QPT_UD: return QPT_UD;
	case IBV_QPT_XRC_SEND: return QPT_XI;
	case IBV_QPT_XRC_RECV: return QPT_XT;
	default: return -1;
	}
}

#define M_PATH (IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN)
#define M_RESP (IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)
#define M_REQ (IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | \
	       IBV_QP_MAX_QP_RD_ATOMIC)
#define M_INIT_C (IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)
#define M_INIT_D (IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY)
#define M_MOVE (IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PATH_MIG_STATE)

/* What uverbs drops from an XRC QP's mask before anything looks at it:
 * the responder's read attributes of an initiator, the requester's of a
 * target (applications set both on both). */
static int qp_mask_trim(enum ibv_qp_type type, int mask)
{
	if (type == IBV_QPT_XRC_SEND)
		return mask & ~M_RESP;
	if (type == IBV_QPT_XRC_RECV)
		return mask & ~(IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY);
	return mask;
}

static bool qp_transition_ok(enum ibv_qp_type type, enum ibv_qp_state cur, enum ibv_qp_state next,
			     int mask)
{
	int t = qpt_index(type), req = 0, opt = 0;
	bool conn = t != QPT_UD, resp = t == QPT_RC || t == QPT_XT;

	if (t < 0)
		return false;
	if ((mask & IBV_QP_CUR_STATE) && cur != IBV_QPS_RTR && cur != IBV_QPS_RTS &&
	    cur != IBV_QPS_SQD && cur != IBV_QPS_SQE)
		return false;
	if (next == IBV_QPS_RESET || next == IBV_QPS_ERR) {
		req = opt = 0; /* from anywhere, with nothing else */
	} else if (cur == IBV_QPS_RESET && next == IBV_QPS_INIT) {
		req = conn ? M_INIT_C : M_INIT_D;
	} else if (cur == IBV_QPS_INIT && next == IBV_QPS_INIT) {
		opt = conn ? M_INIT_C : M_INIT_D;
	} else if (cur == IBV_QPS_INIT && next == IBV_QPS_RTR) {
		req = conn ? M_PATH | (resp ? M_RESP : 0) : 0;
		opt = conn ? IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX
			   : IBV_QP_PKEY_INDEX | IBV_QP_QKEY;
	} else if (cur == IBV_QPS_RTR && next == IBV_QPS_RTS) {
		req = t == QPT_RC || t == QPT_XI ? M_REQ
		    : t == QPT_XT ? IBV_QP_TIMEOUT | IBV_QP_SQ_PSN : IBV_QP_SQ_PSN;
		opt = conn ? M_MOVE | (resp ? IBV_QP_MIN_RNR_TIMER : 0) : IBV_QP_CUR_STATE | IBV_QP_QKEY;
	} else if ((cur == IBV_QPS_RTS || cur == IBV_QPS_SQD) && next == IBV_QPS_RTS) {
		opt = conn ? M_MOVE | (resp ? IBV_QP_MIN_RNR_TIMER : 0) : IBV_QP_CUR_STATE | IBV_QP_QKEY;
	} else if (cur == IBV_QPS_RTS && next == IBV_QPS_SQD) {
		opt = IBV_QP_EN_SQD_ASYNC_NOTIFY;
	} else if (cur == IBV_QPS_SQD && next == IBV_QPS_SQD) {
		opt = t == QPT_UD ? IBV_QP_PKEY_INDEX | IBV_QP_QKEY
		    : t == QPT_UC ? IBV_QP_AV | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
				    IBV_QP_PKEY_INDEX | IBV_QP_PATH_MIG_STATE
		    : IBV_QP_PORT | IBV_QP_AV | IBV_QP_TIMEOUT | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
		      IBV_QP_PKEY_INDEX | IBV_QP_PATH_MIG_STATE |
		      (t != QPT_XT ? IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC : 0) |
		      (resp ? M_RESP : 0);
	} else if (cur == IBV_QPS_SQE && next == IBV_QPS_RTS && (t == QPT_UD || t == QPT_UC)) {
		opt = IBV_QP_CUR_STATE | (t == QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS);
	} else {
		return false;
	}
	return (mask & req) == req && !(mask & ~(req | opt | IBV_QP_STATE));
}

RV_EXPORT int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	struct rv_ctx *c = to_ctx(qp->context);
	struct rv_qp *q = (struct rv_qp *)qp;
	int ret = 0;

	mask = qp_mask_trim(qp->qp_type, mask);
	rv_lock(c);
	/* roshm0 has one port, whose MTU is 4096 */
	/* (only the QP itself enters SQE: a UD or UC send that failed) */
	if (((mask & IBV_QP_STATE) && (a->qp_state > IBV_QPS_ERR || a->qp_state == IBV_QPS_SQE)) ||
	    ((mask & IBV_QP_CUR_STATE) && a->cur_qp_state > IBV_QPS_ERR) ||
	    !qp_transition_ok(qp->qp_type, qp->state, (mask & IBV_QP_STATE) ? a->qp_state : qp->state,
			      mask) ||
	    ((mask & IBV_QP_PORT) && a->port_num != 1) ||
	    ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a->max_rd_atomic > RV_MAX_RD_ATOM) ||
	    ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a->max_dest_rd_atomic > RV_MAX_RD_ATOM) ||
	    ((mask & IBV_QP_PATH_MTU) && (a->path_mtu < IBV_MTU_256 || a->path_mtu > IBV_MTU_4096))) {
		ret = EINVAL;
		goto out;
	}
	uint32_t acc_was = q->acc;

	if (mask & IBV_QP_ACCESS_FLAGS) {
		/* what its peer may do to our PD's MRs through it: in its
		 * grants (connected: granted anew now), and the ring's header
		 * tells the peer's library */
		uint32_t acc = (uint32_t)a->qp_access_flags & RV_REMOTE_ACCESS;

		if (rv_grant_access(c, q, acc)) {
			ret = ENOMEM;   /* limits.max_grants: nothing changed */
			goto out;
		}
		q->acc = acc;
		rv_ring_set_access(q, acc);
	}
	/* a UD QP has no peer (a NIC's driver refuses the attribute too): it
	 * must never grant our MRs to whatever ring a QPN names */
	if (qp->qp_type == IBV_QPT_UD && (mask & IBV_QP_DEST_QPN)) {
		ret = EINVAL;
		goto out;
	}
	/* UD: datagrams that came before RTR are dropped there, as on a NIC */
	if (qp->qp_type == IBV_QPT_UD && (mask & IBV_QP_STATE) && a->qp_state == IBV_QPS_RTR &&
	    qp->state < IBV_QPS_RTR)
		rv_ud_discard(q);
	if ((mask & IBV_QP_STATE) && a->qp_state == IBV_QPS_RESET && qp->state != IBV_QPS_RESET) {
		ret = qp_reset(c, q);
		if (ret)
			goto out;
	}
	if ((mask & IBV_QP_DEST_QPN) && a->dest_qp_num != q->dest_qp_num) {
		rv_peer_drop(c, q);
		rv_grant_drop(c, q);
		q->peer_status = IBV_WC_SUCCESS;
		__atomic_store_n(&q->dest_qp_num, a->dest_qp_num, __ATOMIC_RELAXED);   /* roshm_verbs_qpn_ours reads it */
	}
	/* our ring's header says whom we are connected to (rv_peer_resolve) */
	if (mask & IBV_QP_DEST_QPN)
		rv_ring_set_peer(q, a->dest_qp_num);
	/* the address vector before the peer's ring is looked up below (a
	 * loopback must name our own port); keep_set keeps the rest */
	if (mask & IBV_QP_AV)
		q->set.ah_attr = a->ah_attr;
	if (mask & IBV_QP_QKEY)
		q->qkey = a->qkey;
	if (mask & IBV_QP_RQ_PSN)
		q->rq_psn = a->rq_psn;
	if (mask & IBV_QP_SQ_PSN)
		q->sq_psn = a->sq_psn;
	if (mask & IBV_QP_MIN_RNR_TIMER)
		rv_ring_set_rnr_timer(q, a->min_rnr_timer);

	if ((mask & IBV_QP_RNR_RETRY) && (qp->qp_type == IBV_QPT_RC || qp->qp_type == IBV_QPT_XRC_SEND))
		q->rnr_retry = a->rnr_retry & 7;
	enum ibv_qp_state was = qp->state;

	if (mask & IBV_QP_STATE) {
		if (a->qp_state == IBV_QPS_ERR) {
			rv_qp_fail(q);   /* from the state it was in (its events) */
			rv_qp_issue(c, q);
			/* a QP in the error state takes nothing from its peer */
			rv_grant_drop(c, q);
		} else if (qp->state == IBV_QPS_SQE && a->qp_state == IBV_QPS_RTS) {
			/* the send queue resumes: what was posted before is
			 * flushed (in order, as it comes up), also what is
			 * still in flight (it was behind the failed WR) */
			rv_qp_issue(c, q);
			for (uint32_t i = q->head; i != q->issue; i++)
				q->swr[i & q->mask].status = IBV_WC_WR_FLUSH_ERR;
			q->broken = false;
			qp->state = IBV_QPS_RTS;
		} else {
			qp->state = a->qp_state;
		}
	}
	/* Connected: its peer may use our PD's MRs from now on. */
	if ((mask & IBV_QP_STATE) && (a->qp_state == IBV_QPS_RTR || a->qp_state == IBV_QPS_RTS) &&
	    rv_grant_connect(c, q)) {
		/* roshmd could not let the peer in (limits.max_grants grants on
		 * one of our PD's regions): out of resources, as a NIC says it,
		 * and the QP stays where it was */
		qp->state = was;
		if (q->acc != acc_was) {
			q->acc = acc_was;
			rv_ring_set_access(q, acc_was);
		}
		ret = ENOMEM;
		goto out;
	}
	/* Connected: find the peer's ring now (one try), not on the first SEND. */
	if ((mask & IBV_QP_STATE) && (a->qp_state == IBV_QPS_RTR || a->qp_state == IBV_QPS_RTS) &&
	    !q->peer_ok && q->peer_status == IBV_WC_SUCCESS && q->dest_qp_num &&
	    qp->qp_type != IBV_QPT_XRC_RECV)
		rv_peer_resolve(c, q, 1);
	rv_deliver(c, q);
	rv_notify_recv(c, q);
	rv_grant_drops(c);   /* the delivery failed it: its peer goes now */
	keep_set(q, a, mask);
out:
	rv_unlock(c);
	return ret;
}

RV_EXPORT int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask,
			   struct ibv_qp_init_attr *init)
{
	struct rv_ctx *c = to_ctx(qp->context);
	struct rv_qp *q = (struct rv_qp *)qp;

	(void)mask;
	rv_lock(c);
	*a = q->set;
	a->qp_state = qp->state;
	a->cur_qp_state = qp->state;
	if (!a->path_mtu)
		a->path_mtu = IBV_MTU_4096;
	a->dest_qp_num = q->dest_qp_num;
	a->qkey = q->qkey;
	if (!a->port_num)
		a->port_num = 1;
	a->rq_psn = q->rq_psn;
	a->sq_psn = q->sq_psn;
	a->rnr_retry = q->rnr_retry;
	a->min_rnr_timer = q->ring ? (uint8_t)q->ring->rnr_timer : 0;
	a->cap = q->cap;
	if (init) {
		memset(init, 0, sizeof(*init));
		init->qp_context = qp->qp_context;
		init->send_cq = qp->send_cq;
		init->recv_cq = qp->recv_cq;
		init->cap = q->cap;
		init->qp_type = qp->qp_type;
		init->sq_sig_all = q->sq_sig_all;
		init->srq = qp->srq;
	}
	rv_unlock(c);
	return 0;
}

/*
 * A UD QP destroyed right after its sends were posted (mckey's sender does
 * it): a NIC has sent them by then, so they go out first, for a second at
 * most (a datagram takes a claim and a publication per destination here,
 * one per member of a group). Lock held.
 */
#define RV_UD_FLUSH_NS (1000ull * 1000000)
static void ud_send_out(struct rv_ctx *c, struct rv_qp *q)
{
	uint64_t t0 = rv_now_ns();

	while ((q->issue != q->tail || q->ud_open) && !q->broken && q->qp.state == IBV_QPS_RTS &&
	       rv_now_ns() - t0 < RV_UD_FLUSH_NS) {
		rv_qp_issue(c, q);
		roshm_submit(c->r);
		rv_reap(c);
		if (q->issue != q->tail || q->ud_open)
			sched_yield();
	}
}

RV_EXPORT int ibv_destroy_qp(struct ibv_qp *qp)
{
	struct rv_qp *q = (struct rv_qp *)qp, **pp;
	struct rv_ctx *c = to_ctx(qp->context);

	rv_lock(c);
	if (qp->qp_type == IBV_QPT_UD)
		ud_send_out(c, q);
	/* SQEs still in roshmd name this QP: let them drain first; what was
	 * not issued is dropped (no completions after destroy). */
	q->destroying = true;
	if (!qp_drain(c, q)) {
		q->destroying = false;
		rv_unlock(c);
		return EBUSY;
	}
	for (uint32_t i = q->head; i != q->tail; i++) {
		if (q->swr[i & q->mask].k)
			q->swr[i & q->mask].k->refs--;
		rv_ud_release(c, &q->swr[i & q->mask]);
	}
	rv_backlog(c, q, false);
	for (pp = &c->qps; *pp && *pp != q; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = q->next;
	rv_qpn_del(q);
	rv_peer_drop(c, q);
	rv_grant_drop(c, q);
	roshm_region_close(c->r, q->ring_handle);   /* peers' SENDs now fail (ESTALE) */
	if (qp->qp_type == IBV_QPT_UD) {
		rv_mc_leave_all(c, q);
		rv_ud_ring_close(c, q);
	}
	if (q->srq) {
		rv_srq_unwait(q);
		q->srq->nqps--;   /* a RECV it took and did not complete is gone with it */
	}
	if (q->xrcd)
		q->xrcd->nqps--;
	rv_async_forget(c, q);
	rv_unlock(c);
	rv_async_settle(&qp->mutex, &qp->cond, &qp->events_completed, q->aev_reported);
	qp_free(q);
	return 0;
}

/* Whether a receiver sees a WRITE's bytes in order: roshm makes no such
 * promise (a WRITE may travel as several of roshmd's operations). */
RV_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
{
	(void)qp, (void)op, (void)flags;
	return 0;
}
