// SPDX-License-Identifier: MIT
/*
 * libroshm-verbs: shared receive queues. An SRQ holds RECVs that any of its
 * QPs may take. Messages still arrive in each QP's own inbound ring
 * (recv.c); when a QP whose receive queue is an SRQ finds a fragment that
 * starts a message and holds no RECV, it takes the SRQ's oldest one into
 * its own one-entry queue (rv_srq_take) and delivers into it as into a
 * RECV of its own, until the message's last fragment completes it. So a
 * message that spans fragments keeps its RECV while other QPs of the SRQ
 * take theirs, and a QP that goes to the error state flushes only the RECV
 * it took (on a NIC the SRQ's other RECVs stay too); one reset flushes it
 * too. RECVs go to the QPs in the order they found a message (the SRQ's
 * line, rv_srq_take), one per QP per pass (rv_deliver_each), so that one
 * busy sender does not starve the others.
 * Each QP's ring is sized by rv_srq_ring_wr.
 *
 * An armed SRQ (srq_limit > 0) raises IBV_EVENT_SRQ_LIMIT_REACHED when a QP
 * takes a RECV and fewer than the limit remain, and is disarmed (async.c).
 * UD QPs may share an SRQ too (ud.c: a datagram takes its RECV the same way).
 * ibv_modify_srq resizes (IBV_SRQ_MAX_WR) to any size that holds the
 * RECVs posted. XRC SRQs (ibv_create_srq_ex) are these with a domain, a CQ
 * and a number (xrc.c); tag matching is not provided.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rv.h"

/*
 * The receive WRs to size the ring of the RC or UC QP that is about to use
 * @s by (rv_ring_create: 8 KiB each, 64 KiB to 4 MiB). The first QP gets
 * what an RC QP with the SRQ's max_wr would (at most 512 WRs: 4 MiB); the
 * one that comes when k QPs use it gets 1 / (k + 1) of that, rounded down
 * to a power of two. A sender's bytes in flight to a QP are bounded by its
 * ring (a full ring makes it wait for a credit round trip), so a QP alone
 * on an SRQ must not get less than an RC QP does; and an SRQ exists to save
 * memory on many QPs, so the rings shrink as QPs come: n QPs take about
 * (1 + log2(n) / 2) times the first one's ring until they reach the
 * smallest (64 KiB), then 64 KiB each (an SRQ of 512 WRs or more: 4 MiB
 * for one QP, 8 MiB for 4, 16 MiB for 64, 25 MiB for 200).
 * ROSHM_VERBS_RECV_RING, when set, sizes every ring alike.
 */
uint32_t rv_srq_ring_wr(const struct rv_srq *s)
{
	uint32_t wr = (s->max_wr < 512 ? s->max_wr : 512) / (s->nqps + 1), p = 1;

	while (p * 2 <= wr)
		p *= 2;
	return p;
}

/* An SRQ on @pd, not yet on the context's list (rv_srq_link). */
struct rv_srq *rv_srq_new(struct ibv_pd *pd, struct ibv_srq_init_attr *a)
{
	struct rv_srq *s;
	uint32_t n;

	if (!pd || !a || !a->attr.max_wr || a->attr.max_wr > RV_MAX_SRQ_WR || a->attr.max_sge > RV_MAX_SGE ||
	    a->attr.srq_limit > a->attr.max_wr) {
		errno = EINVAL;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	n = 1;
	while (n < a->attr.max_wr)
		n <<= 1;
	s->max_sge = a->attr.max_sge ? a->attr.max_sge : 1;
	s->rwr = calloc(n, sizeof(*s->rwr));
	s->rsge = calloc((size_t)n * s->max_sge, sizeof(*s->rsge));
	if (!s->rwr || !s->rsge) {
		free(s->rwr);
		free(s->rsge);
		free(s);
		errno = ENOMEM;
		return NULL;
	}
	s->mask = n - 1;
	s->max_wr = a->attr.max_wr;
	s->limit = 0;   /* srq_limit is ignored here (ibv_create_srq(3)): unarmed */
	s->srq.context = pd->context;
	s->srq.srq_context = a->srq_context;
	s->srq.pd = pd;
	pthread_mutex_init(&s->srq.mutex, NULL);
	pthread_cond_init(&s->srq.cond, NULL);
	a->attr.max_sge = s->max_sge;
	return s;
}

/* A whole SRQ on the context's list (lock held): the XRC code and
 * ibv_dealloc_pd (EBUSY while it lives) see it from now on. */
void rv_srq_link(struct rv_ctx *c, struct rv_srq *s)
{
	s->next = c->srqs;
	c->srqs = s;
}

/* Free an SRQ off the context's list (ibv_destroy_srq). */
void rv_srq_free(struct rv_srq *s)
{
	pthread_mutex_destroy(&s->srq.mutex);
	pthread_cond_destroy(&s->srq.cond);
	free(s->rwr);
	free(s->rsge);
	free(s);
}

RV_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *a)
{
	struct rv_srq *s = rv_srq_new(pd, a);
	struct rv_ctx *c;

	if (!s)
		return NULL;
	c = to_ctx(pd->context);
	rv_lock(c);
	rv_srq_link(c, s);
	rv_unlock(c);
	return &s->srq;
}

RV_EXPORT int ibv_destroy_srq(struct ibv_srq *srq)
{
	struct rv_ctx *c = to_ctx(srq->context);
	struct rv_srq *s = (struct rv_srq *)srq, **pp;

	rv_lock(c);
	if (s->xrcd)   /* XRC_RECV QPs let it go (xrc.c) */
		rv_xrc_srq_gone(c, s);
	if (s->nqps) {
		rv_unlock(c);
		return EBUSY;   /* a QP still uses it, as on a NIC */
	}
	for (pp = &c->srqs; *pp && *pp != s; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = s->next;
	if (s->xrcd) {
		s->xrcd->nsrq--;
		/* its PD's MRs: not for the domain's peers any more, unless
		 * another of its SRQs is on that PD */
		rv_grant_xrc_pd(c, s->xrcd, s->srq.pd, false);
	}
	rv_async_forget(c, s);
	rv_unlock(c);
	rv_async_settle(&srq->mutex, &srq->cond, &srq->events_completed, s->aev_reported);
	rv_srq_free(s);
	return 0;
}

/* IBV_SRQ_MAX_WR: the RECVs it holds move, in order, to arrays of the new
 * size (any that holds them, up to the device's max_srq_wr). */
static int srq_resize(struct rv_srq *s, uint32_t max_wr)
{
	uint32_t held = s->tail - s->head, n = 1;
	struct ibv_sge *rsge;
	struct rv_rwr *rwr;

	if (!max_wr || max_wr > RV_MAX_SRQ_WR || max_wr < held)
		return EINVAL;
	while (n < max_wr)
		n <<= 1;
	rwr = calloc(n, sizeof(*rwr));
	rsge = calloc((size_t)n * s->max_sge, sizeof(*rsge));
	if (!rwr || !rsge) {
		free(rwr);
		free(rsge);
		return ENOMEM;
	}
	for (uint32_t i = 0; i < held; i++) {
		uint32_t from = (s->head + i) & s->mask;

		rwr[i] = s->rwr[from];
		memcpy(&rsge[(size_t)i * s->max_sge], &s->rsge[(size_t)from * s->max_sge],
		       s->max_sge * sizeof(*rsge));
	}
	free(s->rwr);
	free(s->rsge);
	s->rwr = rwr;
	s->rsge = rsge;
	s->mask = n - 1;
	s->head = 0;
	s->tail = held;
	s->max_wr = max_wr;
	return 0;
}

RV_EXPORT int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *a, int mask)
{
	struct rv_ctx *c = to_ctx(srq->context);
	struct rv_srq *s = (struct rv_srq *)srq;
	int ret = 0;

	if (!a || (mask & ~(IBV_SRQ_LIMIT | IBV_SRQ_MAX_WR)))
		return EINVAL;
	rv_lock(c);
	if ((mask & IBV_SRQ_LIMIT) &&
	    a->srq_limit > ((mask & IBV_SRQ_MAX_WR) ? a->max_wr : s->max_wr))
		ret = EINVAL;
	if (!ret && (mask & IBV_SRQ_MAX_WR))
		ret = srq_resize(s, a->max_wr);
	if (!ret && (mask & IBV_SRQ_LIMIT))
		s->limit = a->srq_limit;
	rv_unlock(c);
	return ret;
}

RV_EXPORT int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *a)
{
	struct rv_ctx *c = to_ctx(srq->context);
	struct rv_srq *s = (struct rv_srq *)srq;

	rv_lock(c);
	a->max_wr = s->max_wr;
	a->max_sge = s->max_sge;
	a->srq_limit = s->limit;
	rv_unlock(c);
	return 0;
}

int rv_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct rv_ctx *c = to_ctx(srq->context);
	struct rv_srq *s = (struct rv_srq *)srq;
	int ret = 0;

	rv_lock(c);
	for (; wr; wr = wr->next) {
		uint32_t at = s->tail & s->mask;
		struct rv_rwr *r = &s->rwr[at];
		struct ibv_sge *sg = &s->rsge[(size_t)at * s->max_sge];

		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > s->max_sge) {
			ret = EINVAL;
			break;
		}
		if (s->tail - s->head >= s->max_wr) {
			ret = ENOMEM;
			break;
		}
		rv_rwr_set(c, r, sg, wr);
		s->tail++;
	}
	if (ret)
		*bad = wr;
	/* messages that waited in the rings of its QPs */
	rv_deliver_each(c, NULL, s);
	for (struct rv_qp *q = c->qps; q; q = q->next)
		if (q->srq == s || (s->xrcd && q->xrcd == s->xrcd))
			rv_notify_recv(c, q);
	rv_guard(c);
	rv_grant_drops(c);   /* a delivery failed one: its peer goes now */
	rv_unlock(c);
	return ret;
}

/*
 * rv_deliver for every QP of the context (of @cq's, when given, and every QP
 * in an SRQ's line, whatever its CQ: the first in line must get its turn; of
 * @srq's line, when given: the QPs with a message for its RECVs), in passes:
 * a QP on an SRQ takes at most one RECV per pass, then waits in line again.
 * A pass in which none took one is the last. QPs on an SRQ that are not in
 * its line have nothing that waits for its RECVs, or have not looked yet:
 * their own CQ's poll or the notifier looks (a UD QP's look scans its whole
 * ring, up to 1024 slots: every poll of any CQ would pay it).
 */
void rv_deliver_each(struct rv_ctx *c, const struct ibv_cq *cq, const struct rv_srq *srq)
{
	bool more;

	do {
		more = false;
		for (struct rv_qp *q = c->qps; q; q = q->next) {
			bool in_line = q->srq && q->srq_waiting;

			/* XRC_RECV: its messages' CQ is the SRQ's each names */
			if (srq ? q->srq == srq && in_line :
				  !cq || q->qp.recv_cq == cq || in_line || (q->xrcd && rv_xrc_on_cq(q, cq)))
				more |= rv_deliver(c, q);
		}
	} while (more);
}

/* @q has a message and no RECV: in its SRQ's line, after those before it. */
void rv_srq_wait(struct rv_qp *q)
{
	struct rv_srq *s = q->srq;

	if (q->srq_waiting)
		return;
	q->srq_waiting = true;
	q->srq_wnext = NULL;
	if (s->wait_tail)
		s->wait_tail->srq_wnext = q;
	else
		s->wait_head = q;
	s->wait_tail = q;
}

/* Out of the line: it took its RECV, or it is reset, in error or destroyed. */
void rv_srq_unwait(struct rv_qp *q)
{
	struct rv_srq *s = q->srq;
	struct rv_qp **pp, *prev = NULL;

	if (!q->srq_waiting)
		return;
	for (pp = &s->wait_head; *pp && *pp != q; pp = &(*pp)->srq_wnext)
		prev = *pp;
	if (*pp)
		*pp = q->srq_wnext;
	if (s->wait_tail == q)
		s->wait_tail = prev;
	q->srq_waiting = false;
	q->srq_wnext = NULL;
}

/*
 * @q found a sound fragment and holds no RECV: it joins the SRQ's line and
 * takes the SRQ's oldest RECV into its own one-entry queue when it is first
 * in line, so that RECVs go to messages in the order their QPs found them,
 * as a NIC hands them out in arrival order. false: not its turn, or the SRQ
 * is empty (it stays in line).
 */
bool rv_srq_take(struct rv_qp *q)
{
	struct rv_srq *s = q->srq;
	uint32_t from, to;

	rv_srq_wait(q);
	/* those that can take nothing any more leave the line */
	while (s->wait_head && s->wait_head != q &&
	       (s->wait_head->qp.state < IBV_QPS_RTR || s->wait_head->qp.state == IBV_QPS_ERR))
		rv_srq_unwait(s->wait_head);
	if (s->head == s->tail || s->wait_head != q)
		return false;
	rv_srq_unwait(q);
	from = s->head & s->mask;
	to = q->rq_tail & q->rq_mask;
	q->rwr[to] = s->rwr[from];
	memcpy(&q->rsge[(size_t)to * q->rsge_stride], &s->rsge[(size_t)from * s->max_sge],
	       (size_t)s->rwr[from].nsge * sizeof(struct ibv_sge));
	s->head++;
	q->rq_tail++;
	/* armed, and fewer RECVs than the limit now: the event, disarmed */
	if (s->limit && s->tail - s->head < s->limit) {
		s->limit = 0;
		rv_async_push(to_ctx(s->srq.context), IBV_EVENT_SRQ_LIMIT_REACHED, s);
	}
	return true;
}

/*
 * A delivery pass of @q found a sound message: has it a RECV for it? true
 * when it holds one, or it is first in its SRQ's line and takes one (*@took:
 * one taken in this pass already). false: the pass ends, and *@waits says
 * why: the SRQ is empty or others come first (true), or @q took a RECV in
 * this pass and queues behind the others for the next (false: there may be
 * more to do).
 */
bool rv_srq_turn(struct rv_qp *q, bool *took, bool *waits)
{
	if (q->rq_head != q->rq_tail)
		return true;
	if (*took) {
		rv_srq_wait(q);   /* in line behind the others */
		*waits = false;
		return false;
	}
	if (!rv_srq_take(q)) {
		*waits = true;
		return false;
	}
	*took = true;
	return true;
}
