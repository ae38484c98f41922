// SPDX-License-Identifier: MIT
/*
 * libroshm-verbs: XRC (extended reliable connected) transport. Three
 * objects, as rdma-core's API has them:
 *
 * - An XRC domain (ibv_open_xrcd): a list of XRC SRQs and XRC_RECV QPs.
 *   The opens of one file (its inode) in one context share one domain; with
 *   fd -1 each open makes a new one. Other processes that open the same file
 *   get domains of their own (a NIC shares it across processes through the
 *   kernel; here a domain's SRQs live in one process's memory), and
 *   ibv_open_qp is not provided.
 * - An XRC SRQ (ibv_create_srq_ex, IBV_SRQT_XRC): an SRQ with a CQ of its own
 *   and a number (ibv_get_srq_num) that senders name in each WR
 *   (wr.qp_type.xrc.remote_srqn, ibv_wr_set_xrc_srqn).
 * - An XRC_SEND QP: an RC requester (qp.c) without a receive queue; its
 *   SEND fragments carry the SRQ number (rv_frag.srqn). An XRC_RECV QP: an
 *   RC responder without a send queue, PD or CQs; its inbound ring (recv.c)
 *   takes each message's RECV from the SRQ of its domain that the message's
 *   first fragment names (rv_xrc_pick), and the RECV completes on that
 *   SRQ's CQ with the XRC_RECV QP's number. A message naming no SRQ of the
 *   domain fails the XRC_RECV QP (IBV_EVENT_QP_REQ_ERR), as a NIC NAKs it.
 *
 * Access: the XRC_SEND QP's peer reaches the MRs of the PDs of the domain's
 * SRQs (a NIC checks an XRC request's rkey against the named SRQ's PD), so
 * the XRC_RECV QP grants those (rkey.c, rv_xrc_has_pd); the XRC_SEND QP
 * grants nothing: nothing on the other side initiates through it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rv.h"

struct ibv_xrcd *rv_open_xrcd(struct ibv_context *ctx, struct ibv_xrcd_init_attr *a)
{
	struct rv_ctx *c = to_ctx(ctx);
	struct rv_xrcd *x;
	struct stat st;
	bool has_ino = false;

	if (!a || (a->comp_mask & ~(uint32_t)(IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS)) ||
	    !(a->comp_mask & IBV_XRCD_INIT_ATTR_FD) || !(a->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS) ||
	    (a->oflags & ~(O_CREAT | O_EXCL))) {
		errno = EINVAL;
		return NULL;
	}
	if (a->fd >= 0) {
		if (fstat(a->fd, &st))
			return NULL;   /* errno: EBADF */
		has_ino = true;
	} else if (!(a->oflags & O_CREAT)) {
		errno = EINVAL;   /* no file: only a new domain */
		return NULL;
	}
	rv_lock(c);
	for (x = c->xrcds; has_ino && x; x = x->next)
		if (x->has_ino && x->ino == (uint64_t)st.st_ino && x->dev == (uint64_t)st.st_dev) {
			if ((a->oflags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL)) {
				rv_unlock(c);
				errno = EEXIST;
				return NULL;
			}
			x->opens++;
			rv_unlock(c);
			return &x->xrcd;
		}
	if (!(a->oflags & O_CREAT)) {
		rv_unlock(c);
		errno = ENOENT;   /* no domain for that file yet */
		return NULL;
	}
	x = calloc(1, sizeof(*x));
	if (!x) {
		rv_unlock(c);
		errno = ENOMEM;
		return NULL;
	}
	x->xrcd.context = ctx;
	x->opens = 1;
	x->has_ino = has_ino;
	if (has_ino) {
		x->ino = (uint64_t)st.st_ino;
		x->dev = (uint64_t)st.st_dev;
	}
	x->next = c->xrcds;
	c->xrcds = x;
	rv_unlock(c);
	return &x->xrcd;
}

int rv_close_xrcd(struct ibv_xrcd *xrcd)
{
	struct rv_ctx *c = to_ctx(xrcd->context);
	struct rv_xrcd *x = (struct rv_xrcd *)xrcd, **pp;

	rv_lock(c);
	if (x->opens > 1) {
		x->opens--;
		rv_unlock(c);
		return 0;
	}
	if (x->nsrq || x->nqps) {
		rv_unlock(c);
		return EBUSY;   /* its SRQs and QPs first, as on a NIC */
	}
	for (pp = &c->xrcds; *pp && *pp != x; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = x->next;
	rv_unlock(c);
	free(x);
	return 0;
}

/* The context's create_srq_ex (ibv_create_srq_ex calls it for all but a
 * basic SRQ on a PD): XRC SRQs, with their domain, CQ and PD. */
struct ibv_srq *rv_create_srq_ex(struct ibv_context *ctx, struct ibv_srq_init_attr_ex *a)
{
	const uint32_t need = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD |
			      IBV_SRQ_INIT_ATTR_CQ;
	struct rv_ctx *c = to_ctx(ctx);
	struct ibv_srq_init_attr ia;
	struct rv_srq *s;

	if (!a) {
		errno = EINVAL;
		return NULL;
	}
	/* a basic SRQ with a CQ named (which it has no use for) */
	if ((a->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && a->srq_type == IBV_SRQT_BASIC &&
	    !(a->comp_mask & ~(uint32_t)(IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_CQ)) &&
	    (a->comp_mask & IBV_SRQ_INIT_ATTR_PD) && a->pd && a->pd->context == ctx)
		return ibv_create_srq(a->pd, (struct ibv_srq_init_attr *)a);
	if ((a->comp_mask & ~need) || (a->comp_mask & need) != need || a->srq_type != IBV_SRQT_XRC) {
		errno = EOPNOTSUPP;   /* tag matching; what ibv_create_srq_ex did not pass on */
		return NULL;
	}
	if (!a->pd || a->pd->context != ctx || !a->xrcd || a->xrcd->context != ctx || !a->cq ||
	    a->cq->context != ctx) {
		errno = EINVAL;
		return NULL;
	}
	memset(&ia, 0, sizeof(ia));
	ia.srq_context = a->srq_context;
	ia.attr = a->attr;
	s = rv_srq_new(a->pd, &ia);
	if (!s)
		return NULL;
	a->attr = ia.attr;
	s->xrcd = (struct rv_xrcd *)a->xrcd;
	s->cq = a->cq;
	rv_lock(c);
	/* numbers are never reused within a context: a late message that
	 * names a destroyed SRQ's number finds none */
	s->srqn = ++c->xsrqn_next & 0xffffff;
	if (!s->srqn)
		s->srqn = ++c->xsrqn_next & 0xffffff;
	/* whole before anyone sees it (one lock hold: two made at once on
	 * one PD count each other right) */
	rv_srq_link(c, s);
	s->xrcd->nsrq++;
	/* a PD the domain's connected XRC_RECV QPs did not grant yet */
	rv_grant_xrc_pd(c, s->xrcd, a->pd, true);
	rv_unlock(c);
	return &s->srq;
}

int rv_get_srq_num(struct ibv_srq *srq, uint32_t *srqn)
{
	struct rv_srq *s = (struct rv_srq *)srq;

	if (!s->xrcd)
		return EINVAL;   /* a basic SRQ has none */
	*srqn = s->srqn;
	return 0;
}

/* May @q's peer reach MRs of @pd? An XRC_RECV QP: when an SRQ of its
 * domain is on @pd; another QP: when it is its own PD. */
bool rv_xrc_has_pd(const struct rv_qp *q, const struct ibv_pd *pd)
{
	const struct rv_ctx *c;

	if (q->qp.qp_type != IBV_QPT_XRC_RECV)
		return q->qp.qp_type != IBV_QPT_XRC_SEND && q->qp.pd == pd;
	c = to_ctx(q->qp.context);
	for (const struct rv_srq *s = c->srqs; s; s = s->next)
		if (s->xrcd == q->xrcd && s->srq.pd == pd)
			return true;
	return false;
}

/* Has an SRQ of XRC_RECV QP @q's domain a RECV posted? (the notifier) */
bool rv_xrc_recvs(const struct rv_qp *q)
{
	const struct rv_ctx *c = to_ctx(q->qp.context);

	for (const struct rv_srq *s = c->srqs; s; s = s->next)
		if (s->xrcd == q->xrcd && s->head != s->tail)
			return true;
	return false;
}

/*
 * The first fragment @f of a message came to XRC_RECV QP @q, which holds no
 * RECV: its SRQ becomes the one @f names, when it is one of @q's domain.
 * false: it names none (the caller fails @q).
 */
bool rv_xrc_pick(struct rv_qp *q, const struct rv_frag *f)
{
	struct rv_ctx *c = to_ctx(q->qp.context);
	struct rv_srq *s;

	if (q->xrc_last)
		return false;   /* its SRQ goes: the next message fails it */
	for (s = c->srqs; s; s = s->next)
		if (s->srqn == f->srqn && s->xrcd == q->xrcd && !s->dying)
			break;
	if (!s)
		return false;
	if (s == q->srq)
		return true;
	if (q->srq) {
		rv_srq_unwait(q);
		q->srq->nqps--;
	}
	q->srq = s;
	q->rsge_stride = s->max_sge;
	s->nqps++;
	return true;
}

/*
 * ibv_destroy_srq of XRC SRQ @s (lock held): the XRC_RECV QPs whose last
 * message it took let it go. One that holds a RECV of it first takes what
 * its ring holds of that message (one whole there completes, as on a
 * NIC); if the message is still not whole (its sender gone, slow or
 * hostile) the QP fails: the RECV completes with IBV_WC_WR_FLUSH_ERR on the
 * SRQ's CQ, and the rest of the message, which has nowhere to go, puts the
 * QP in the error state (IBV_EVENT_QP_REQ_ERR), as a NIC NAKs it; its
 * grants go at once. So a peer cannot keep an SRQ of ours, and with it its
 * CQ, domain and PD, from going.
 */
void rv_xrc_srq_gone(struct rv_ctx *c, struct rv_srq *s)
{
	s->dying = true;   /* a message that names it now fails its QP, as on a NIC */
	for (struct rv_qp *q = c->qps; q; q = q->next) {
		if (q->qp.qp_type != IBV_QPT_XRC_RECV || q->srq != s)
			continue;
		/* what its ring holds of the message first: one whole there
		 * completes as on a NIC */
		if (q->rq_head != q->rq_tail || q->rm.in_msg)
			rv_deliver(c, q);
		if (q->srq == s && (q->rq_head != q->rq_tail || q->rm.in_msg)) {
			/* Its grants go first: once roshmd answers, nothing
			 * more of the sender's lands (its poller applied every
			 * fragment it took before), so what the ring holds now
			 * is final and the sender's SEND completes as it does
			 * here. Taking them after the look let a last fragment
			 * land between: the sender's SEND succeeded while the
			 * RECV flushed (CI, verbs_xrc). */
			rv_grant_drop(c, q);
			q->xrc_last = true;   /* the held message, and nothing after it */
			rv_deliver(c, q);
			/* whole now or not, the QP has lost its peer */
			rv_async_push(c, IBV_EVENT_QP_REQ_ERR, q);
			rv_qp_fail(q);
		}
		if (q->srq != s)
			continue;
		rv_srq_unwait(q);
		q->srq = NULL;
		s->nqps--;
	}
}

/* Does a poll of @cq deliver to XRC_RECV QP @q: is it the CQ of an SRQ of
 * its domain? */
bool rv_xrc_on_cq(const struct rv_qp *q, const struct ibv_cq *cq)
{
	const struct rv_ctx *c = to_ctx(q->qp.context);

	for (const struct rv_srq *s = c->srqs; s; s = s->next)
		if (s->xrcd == q->xrcd && s->cq == cq)
			return true;
	return false;
}

/* The notifier and XRC_RECV QP @q: is the CQ of an SRQ of its domain that
 * holds RECVs armed (or, @armed_only false, also: not polled lately)? */
bool rv_xrc_watch(const struct rv_qp *q, bool armed_only)
{
	const struct rv_ctx *c = to_ctx(q->qp.context);

	if (q->rq_head != q->rq_tail && q->srq) {   /* the RECV it holds completes there */
		const struct rv_cq *cq = (const struct rv_cq *)q->srq->cq;

		if (cq->armed || (!armed_only && !cq->served))
			return true;
	}
	for (const struct rv_srq *s = c->srqs; s; s = s->next) {
		const struct rv_cq *cq = (const struct rv_cq *)s->cq;

		if (s->xrcd == q->xrcd && s->head != s->tail && (cq->armed || (!armed_only && !cq->served)))
			return true;
	}
	return false;
}
