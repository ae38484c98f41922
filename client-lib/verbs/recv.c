// SPDX-License-Identifier: MIT
/*
 * libroshm-verbs: the receive side. Every QP owns an inbound ring, a region
 * "ibv-qp-<qpn>" of its tenant (the QPN is drawn so that the name is free, so
 * the QPN an application exchanges out of band names the ring). The
 * connected peer fills it with fragments (qp.c); this side copies them into
 * the posted RECVs in order, when the application polls its receive CQ (or
 * the notifier thread does), and hands the slots back through the ring's
 * consumer index. A message for which no RECV is posted waits in the ring;
 * a sender finding the ring full is RNR-NAKed (qp.c).
 *
 * Everything in the ring but our own header is written by the peer and
 * untrusted: each fragment header is copied once, checked (its slots inside
 * the ring, its length inside its slots, the message's length inside the
 * RECV, the sender being the connected QP), and only the copy is used. A
 * fragment that breaks the rules fails the RECV (LOC_QP_OP_ERR) and the QP.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "rv.h"

#define RV_RING_MIN (64u * 1024)
#define RV_RING_MAX (4u << 20)
#define RV_RING_ENV_MAX (256u << 20)

/*
 * Create the QP's ring region and with it the QPN. Its size: $ROSHM_VERBS_RECV_RING
 * bytes of slots, or 8 KiB per receive WR between 64 KiB and 4 MiB; a QP
 * without a receive queue gets a header only (a peer's SEND to it then
 * fails with REM_INV_REQ_ERR, as on a NIC).
 */
int rv_ring_create(struct rv_ctx *c, struct rv_qp *q, uint32_t max_recv_wr)
{
	uint64_t bytes = 0;
	uint32_t qpn = 0, h = 0;
	int ret;

	if (max_recv_wr) {
		bytes = c->ring_bytes;
		if (!bytes) {
			bytes = (uint64_t)max_recv_wr * 8192;
			bytes = bytes < RV_RING_MIN ? RV_RING_MIN : bytes > RV_RING_MAX ? RV_RING_MAX : bytes;
		}
		/* at least 16 KiB: a UD QP's state region is 8 or 12 KiB with
		 * its header, and a sender tells the two kinds apart by size */
		bytes = rv_pow2(bytes < RV_SLOT * 256 ? RV_SLOT * 256 : bytes);
		if (bytes > RV_RING_ENV_MAX)
			bytes = RV_RING_ENV_MAX;
	}
	/* only the owner of the ring its QP connects to may send into it
	 * (rv_grant_connect) */
	ret = rv_create_named(c, "ibv-qp-", 6, RV_RING_SLOTS + bytes,
			      &(struct roshm_region_opts){ .policy = ROSHM_POLICY_GRANT }, &qpn, &h);
	if (ret)
		return ret;
	q->ring = roshm_region_data(c->r, h, NULL);
	if (!q->ring) {
		roshm_region_close(c->r, h);
		return -EIO;
	}
	q->ring->qpn = qpn;
	q->ring->qp_access = RV_QPACC_KNOWN;   /* none until INIT sets them */
	q->ring->nslots = (uint32_t)(bytes / RV_SLOT);
	q->ring->cons = 0;
	/* Release: a peer that finds the magic finds the rest (it reads through roshmd). */
	__atomic_store_n(&q->ring->magic, RV_RING_MAGIC, __ATOMIC_RELEASE);
	q->ring_handle = h;
	q->ring_n = (uint32_t)(bytes / RV_SLOT);
	q->ring_cons = 0;
	q->qp.qp_num = qpn;
	return 0;
}

/*
 * The QPs of this process, every context's, by QPN: librdmacm asks whether
 * a peer that gives our own GID names one of them (rc_peer_claim_ok), which
 * would connect two of our QPs to each other through our own port. Its own
 * lock, taken for a moment only (after a context's, never before one).
 */
static pthread_mutex_t qpns_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rv_qp *qpns;

void rv_qpn_add(struct rv_qp *q)
{
	pthread_mutex_lock(&qpns_lock);
	q->pprev = NULL;
	q->pnext = qpns;
	if (qpns)
		qpns->pprev = q;
	qpns = q;
	pthread_mutex_unlock(&qpns_lock);
}

void rv_qpn_del(struct rv_qp *q)
{
	pthread_mutex_lock(&qpns_lock);
	if (q->pprev)
		q->pprev->pnext = q->pnext;
	else if (qpns == q)
		qpns = q->pnext;
	if (q->pnext)
		q->pnext->pprev = q->pprev;
	q->pnext = q->pprev = NULL;
	pthread_mutex_unlock(&qpns_lock);
}

/* Is @qpn a QP of this process? Then @dest: the QP it is connected to (0:
 * none yet). Exported for our librdmacm (libibverbs.map). */
RV_EXPORT bool roshm_verbs_qpn_ours(uint32_t qpn, uint32_t *dest)
{
	bool found = false;

	pthread_mutex_lock(&qpns_lock);
	for (const struct rv_qp *q = qpns; q && !found; q = q->pnext)
		if ((q->qp.qp_num & 0xffffff) == (qpn & 0xffffff)) {
			found = true;
			*dest = __atomic_load_n(&q->dest_qp_num, __ATOMIC_RELAXED) & 0xffffff;
		}
	pthread_mutex_unlock(&qpns_lock);
	return found;
}

/* fork(): held across it (after the contexts' list lock: it is a leaf
 * lock), so that the child's list is whole; the child makes it anew */
void rv_qpn_fork_prepare(void)
{
	pthread_mutex_lock(&qpns_lock);
}

void rv_qpn_fork_parent(void)
{
	pthread_mutex_unlock(&qpns_lock);
}

void rv_qpn_fork_child(void)
{
	pthread_mutex_init(&qpns_lock, NULL);
}

void rv_ring_set_rnr_timer(struct rv_qp *q, uint8_t timer)
{
	if (q->ring)
		__atomic_store_n(&q->ring->rnr_timer, timer & 31u, __ATOMIC_RELAXED);
}

void rv_ring_set_access(struct rv_qp *q, uint32_t acc)
{
	if (q->ring)
		__atomic_store_n(&q->ring->qp_access, RV_QPACC_KNOWN | acc, __ATOMIC_RELAXED);
}

/* The QP is connected to @dest_qpn (RTR), or to nothing (0: reset). */
void rv_ring_set_peer(struct rv_qp *q, uint32_t dest_qpn)
{
	if (q->ring)
		__atomic_store_n(&q->ring->peer, dest_qpn ? RV_RING_PEER | dest_qpn : 0,
				 __ATOMIC_RELAXED);
}

/*
 * Tell the connected peer how many RECVs wait here (its credit READ takes
 * this word with cons): a ring that is full while RECVs wait for its
 * messages is drained into them by this library soon (the application's
 * next poll, or the notifier), as a NIC would place them at once, so the
 * peer waits for room instead of counting an RNR NAK. An SRQ's QP and XRC
 * QPs say nothing (0): their RECVs are the SRQ's. The peer's word is never
 * trusted beyond that wait (qp.c, credit_done).
 */
void rv_ring_rq(struct rv_qp *q)
{
	if (q->ring && !q->srq)
		__atomic_store_n(&q->ring->rq, (uint64_t)q->rq_head << 32 | q->rq_tail,
				 __ATOMIC_RELAXED);
}

/* @frag_op: the message's RV_FRAG_* (its immediate, or the rkey it
 * invalidated), or 0 */
static void rq_complete(struct rv_qp *q, enum ibv_wc_status st, enum ibv_wc_opcode op,
			uint32_t len, uint32_t imm, uint8_t frag_op)
{
	struct rv_rwr *r = &q->rwr[q->rq_head & q->rq_mask];
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	wc.wr_id = r->wr_id;
	wc.status = st;
	wc.opcode = op;
	wc.byte_len = len;
	wc.qp_num = q->qp.qp_num;
	wc.src_qp = q->dest_qp_num;
	if (frag_op == RV_FRAG_SEND_IMM || frag_op == RV_FRAG_WRITE_IMM) {
		wc.imm_data = imm;
		wc.wc_flags = IBV_WC_WITH_IMM;
	} else if (frag_op == RV_FRAG_SEND_INV && st == IBV_WC_SUCCESS) {
		wc.invalidated_rkey = imm;
		wc.wc_flags = IBV_WC_WITH_INV;
	}
	q->rq_head++;
	rv_ring_rq(q);
	rv_cq_push(rv_qp_rcq(q), &wc);
}

/* Every posted RECV completes with WR_FLUSH_ERR (the QP is in error). */
void rv_rq_flush(struct rv_qp *q)
{
	q->rm.in_msg = false;
	while (q->rq_head != q->rq_tail)
		rq_complete(q, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0, 0, 0);
}

/* A posted RECV into its slot @r and SGEs @sg (room for wr->num_sge, checked). */
void rv_rwr_set(struct rv_ctx *c, struct rv_rwr *r, struct ibv_sge *sg, const struct ibv_recv_wr *wr)
{
	r->wr_id = wr->wr_id;
	r->nsge = (uint16_t)wr->num_sge;
	r->len = 0;
	r->bad = false;
	for (int i = 0; i < wr->num_sge; i++) {
		sg[i] = wr->sg_list[i];
		r->len += sg[i].length;
		if (sg[i].length && !rv_local_ok(c, &sg[i], true))
			r->bad = true;   /* LOC_PROT_ERR when a message uses it */
	}
}

/* The RECV at @ra of @q: is every SGE still inside a live MR? */
void rv_rwr_recheck(struct rv_ctx *c, struct rv_qp *q, uint32_t ra)
{
	struct rv_rwr *r = &q->rwr[ra];
	const struct ibv_sge *sg = &q->rsge[(size_t)ra * q->rsge_stride];

	for (uint16_t i = 0; i < r->nsge && !r->bad; i++)
		if (sg[i].length && !rv_local_ok(c, &sg[i], true))
			r->bad = true;
}

int rv_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct rv_ctx *c = to_ctx(qp->context);
	struct rv_qp *q = (struct rv_qp *)qp;
	int ret = 0;

	rv_lock(c);
	/* an SRQ's QP: ibv_post_srq_recv; XRC QPs have no receive queue */
	if (qp->state == IBV_QPS_RESET || q->srq || qp->qp_type == IBV_QPT_XRC_SEND ||
	    qp->qp_type == IBV_QPT_XRC_RECV) {
		*bad = wr;
		rv_unlock(c);
		return EINVAL;
	}
	for (; wr; wr = wr->next) {
		uint32_t at = q->rq_tail & q->rq_mask;
		struct rv_rwr *r = &q->rwr[at];
		struct ibv_sge *sg = &q->rsge[(size_t)at * q->rsge_stride];

		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > q->rsge_stride) {
			ret = EINVAL;
			break;
		}
		if (q->rq_tail - q->rq_head >= q->cap.max_recv_wr) {
			ret = ENOMEM;
			break;
		}
		rv_rwr_set(c, r, sg, wr);
		q->rq_tail++;
	}
	rv_ring_rq(q);
	if (ret)
		*bad = wr;
	if (qp->state == IBV_QPS_ERR) {
		rv_rq_flush(q);
	} else {
		rv_deliver(c, q);
		rv_notify_recv(c, q);
		rv_guard(c);
	}
	rv_grant_drops(c);   /* the delivery failed it: its peer goes now */
	rv_unlock(c);
	return ret;
}

/* Copy @n bytes to the RECV's buffers from message byte @off on (bounds checked by the caller). */
void rv_scatter(struct rv_qp *q, uint32_t at, uint64_t off, const uint8_t *src, uint64_t n)
{
	const struct rv_rwr *r = &q->rwr[at];
	const struct ibv_sge *s = &q->rsge[(size_t)at * q->rsge_stride];

	for (uint16_t i = 0; i < r->nsge && n; i++) {
		uint64_t take;

		if (off >= s[i].length) {
			off -= s[i].length;
			continue;
		}
		take = s[i].length - off;
		if (take > n)
			take = n;
		rv_dma_copy((uint8_t *)(uintptr_t)s[i].addr + off, src, take);
		src += take;
		n -= take;
		off = 0;
	}
}

/*
 * Move the ring's complete fragments into posted RECVs, in order. A QP on an
 * SRQ takes at most one RECV from it per call, in its turn (srq.c), and
 * returns true when it took one: its callers give every QP of the SRQ its
 * turn, then call again, so that one busy sender does not take every RECV.
 */
bool rv_deliver(struct rv_ctx *c, struct rv_qp *q)
{
	struct rv_frag *slots;
	uint32_t n = q->ring_n;
	bool took = false, waits = false;

	if (q->qp.qp_type == IBV_QPT_UD)
		return rv_ud_deliver(c, q);
	if (!n || q->qp.state < IBV_QPS_RTR || q->qp.state == IBV_QPS_ERR)
		return false;
	slots = (struct rv_frag *)(void *)((uint8_t *)q->ring + RV_RING_SLOTS);
	/* on an SRQ: look even when it is empty, to take a place in its line;
	 * XRC_RECV: to find the SRQ its next message names */
	while (q->rq_head != q->rq_tail || q->srq || q->xrcd) {
		uint32_t at = (uint32_t)(q->ring_cons & (n - 1));
		uint32_t ra = q->rq_head & q->rq_mask;
		struct rv_rwr *r = &q->rwr[ra];
		struct rv_frag f;
		uint64_t off;

		/* Acquire pairs with the sender's CAS, which roshmd executes
		 * after the fragment's WRITE (same connection, in order). */
		if (__atomic_load_n(&slots[at].tag, __ATOMIC_ACQUIRE) != q->ring_cons + 1)
			break;
		memcpy(&f, &slots[at], sizeof(f));
		__asm__ volatile("" ::: "memory");   /* one fetch: only the copy is used */
		if (!rv_frag_ok(&q->rm, n, q->dest_qp_num, &f, at)) {
			if (q->rq_head != q->rq_tail)   /* none taken from an SRQ for it */
				rq_complete(q, IBV_WC_LOC_QP_OP_ERR, IBV_WC_RECV, 0, 0, 0);
			rv_async_push(c, IBV_EVENT_QP_REQ_ERR, q);   /* an invalid request */
			rv_qp_fail(q);
			return false;
		}
		/* XRC_RECV: a message's first fragment names its SRQ; one
		 * that is not of the QP's domain fails the QP, as a NIC NAKs
		 * it (the sender's QP sees its ring no more) */
		if (q->xrcd && (f.flags & RV_FRAG_FIRST) && q->rq_head == q->rq_tail && !rv_xrc_pick(q, &f)) {
			rv_async_push(c, IBV_EVENT_QP_REQ_ERR, q);
			rv_qp_fail(q);
			return false;
		}
		/* a sound fragment is here: a QP on an SRQ takes a RECV for it
		 * now, not before (the others' messages may need them) */
		if (!rv_srq_turn(q, &took, &waits)) {
			if (!waits)
				return true;
			break;
		}
		off = rv_frag_take(&q->rm, &f);
		if (f.flags & RV_FRAG_FIRST)
			q->rm.lenerr = f.opcode != RV_FRAG_WRITE_IMM && f.total > r->len;
		/* its MRs again: one deregistered since the post fails the
		 * RECV (LOC_PROT_ERR), as on a NIC, and is written no more */
		if (f.len)
			rv_rwr_recheck(c, q, ra);
		if (f.len && !q->rm.lenerr && !r->bad)
			rv_scatter(q, ra, off, (const uint8_t *)&slots[at] + RV_SLOT, f.len);
		/* Clear every tag word of the fragment's slots (payload bytes of
		 * this lap must never read as a tag in the next one). */
		for (uint32_t j = 0; j < f.nslots; j++)
			__atomic_store_n(&slots[at + j].tag, 0, __ATOMIC_RELAXED);
		q->ring_cons += f.nslots;
		/* Release: our copy and the cleared tags happen before the
		 * sender, reading cons through roshmd, reuses the slots. */
		__atomic_store_n(&q->ring->cons, q->ring_cons, __ATOMIC_RELEASE);
		if (f.flags & RV_FRAG_LAST) {
			enum ibv_wc_status st = r->bad ? IBV_WC_LOC_PROT_ERR :
						q->rm.lenerr ? IBV_WC_LOC_LEN_ERR : IBV_WC_SUCCESS;

			/* SEND_WITH_INV: the type 2 window of ours bound through
			 * this QP with that rkey is invalidated before the RECV
			 * completes; none such fails the RECV and the QP (mw.c) */
			if (st == IBV_WC_SUCCESS && q->rm.op == RV_FRAG_SEND_INV)
				st = rv_mw_invalidate(c, q, q->rm.imm);
			rq_complete(q, st, q->rm.op == RV_FRAG_WRITE_IMM ? IBV_WC_RECV_RDMA_WITH_IMM :
				    IBV_WC_RECV, q->rm.total, q->rm.imm, q->rm.op);
			if (st != IBV_WC_SUCCESS) {
				rv_qp_fail(q);
				return false;
			}
		}
	}
	/* no fragment waits for a RECV (the one that put it in line is gone:
	 * its peer took its tag back): out of the SRQ's line, else it would
	 * hold every other QP's turn */
	if (q->srq && !waits)
		rv_srq_unwait(q);
	return took;
}

/*
 * RESET: what the ring holds now belongs to the old connection; hand its
 * slots back (at most one lap: a sender that keeps writing does not keep
 * us here), so that the next connection starts at an empty ring (its
 * sender starts at our cons, rkey.c).
 */
void rv_ring_discard(struct rv_qp *q)
{
	struct rv_frag *slots;
	uint32_t n = q->ring_n, done = 0;

	if (q->qp.qp_type == IBV_QPT_UD) {
		rv_ud_discard(q);
		return;
	}
	if (!n)
		return;
	slots = (struct rv_frag *)(void *)((uint8_t *)q->ring + RV_RING_SLOTS);
	while (done < n) {
		uint32_t at = (uint32_t)(q->ring_cons & (n - 1)), k;

		if (__atomic_load_n(&slots[at].tag, __ATOMIC_ACQUIRE) != q->ring_cons + 1)
			break;
		k = __atomic_load_n(&slots[at].nslots, __ATOMIC_RELAXED);   /* one read */
		if (k < 1 || k > n - at || k > n - done)
			k = 1;   /* not a sound fragment: one slot at a time */
		for (uint32_t j = 0; j < k; j++)
			__atomic_store_n(&slots[at + j].tag, 0, __ATOMIC_RELAXED);
		q->ring_cons += k;
		done += k;
	}
	__atomic_store_n(&q->ring->cons, q->ring_cons, __ATOMIC_RELEASE);
}

/* Could a message arriving now complete a RECV of this QP? (notifier) */
bool rv_ring_ready(const struct rv_qp *q)
{
	return q->ring_n && (q->rq_head != q->rq_tail || (q->srq && q->srq->head != q->srq->tail) ||
			     (q->xrcd && rv_xrc_recvs(q))) &&
	       q->qp.state >= IBV_QPS_RTR &&
	       q->qp.state != IBV_QPS_ERR;
}
