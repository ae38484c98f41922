// SPDX-License-Identifier: MIT
/*
 * libroshm-verbs: ibv_post_send. Each WR is checked and recorded in the
 * QP's software send queue (the bytes of an inline WR are copied at once:
 * the application may reuse its buffer when the call returns), its remote
 * key resolved and checked against the MR's bounds and access; then the
 * send engine (qp.c, rv_qp_issue) turns what it can into roshm SQEs, and
 * one doorbell goes for the chain.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rv.h"

static int post_one(struct rv_ctx *c, struct rv_qp *q, struct ibv_send_wr *wr)
{
	uint32_t widx = q->tail;
	struct rv_swr *w;
	struct ibv_sge *sg;
	uint64_t len = 0;
	uint32_t access = 0;
	enum ibv_wc_opcode wop;
	bool rdma = false, atomic = false, local = false;

	switch (wr->opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		wop = IBV_WC_RDMA_WRITE, access = IBV_ACCESS_REMOTE_WRITE, rdma = true;
		break;
	case IBV_WR_RDMA_READ:
		wop = IBV_WC_RDMA_READ, access = IBV_ACCESS_REMOTE_READ, rdma = true;
		break;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		wop = IBV_WC_FETCH_ADD, access = IBV_ACCESS_REMOTE_ATOMIC, atomic = true;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		wop = IBV_WC_COMP_SWAP, access = IBV_ACCESS_REMOTE_ATOMIC, atomic = true;
		break;
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
		wop = IBV_WC_SEND;
		break;
	case IBV_WR_SEND_WITH_INV:   /* RC only (mw.c: the receiver's window) */
		if (q->qp.qp_type != IBV_QPT_RC)
			return EINVAL;
		wop = IBV_WC_SEND;
		break;
	case IBV_WR_BIND_MW:         /* memory windows (mw.c): RC and UC */
		wop = IBV_WC_BIND_MW, local = true;
		break;
	case IBV_WR_LOCAL_INV:
		wop = IBV_WC_LOCAL_INV, local = true;
		break;
	default:
		return EOPNOTSUPP;
	}
	if (local && q->qp.qp_type != IBV_QPT_RC && q->qp.qp_type != IBV_QPT_UC)
		return EINVAL;
	if (!local && (wr->num_sge < 0 || (uint32_t)wr->num_sge > q->sge_stride))
		return EINVAL;
	if (q->qp.qp_type == IBV_QPT_UC && (atomic || wr->opcode == IBV_WR_RDMA_READ))
		return EINVAL;    /* UC: SEND and RDMA WRITE only */
	if (atomic && (wr->num_sge != 1 || wr->sg_list[0].length != 8))
		return EINVAL;
	for (int i = 0; !local && i < wr->num_sge; i++)
		len += wr->sg_list[i].length;
	if (len > RV_MSG_MAX)
		return EINVAL;    /* max_msg_sz */
	if (q->qp.qp_type == IBV_QPT_UD && rv_ud_post(c, q, wr, len))
		return EINVAL;    /* UD: SEND only, at most the MTU, to an AH of ours */
	if ((wr->send_flags & IBV_SEND_INLINE) && (atomic || local || wr->opcode == IBV_WR_RDMA_READ ||
						   len > RV_MAX_INLINE))
		return EINVAL;
	if (q->tail - q->head >= q->max_send_wr)
		return ENOMEM;
	w = &q->swr[widx & q->mask];
	memset(w, 0, sizeof(*w));
	w->wr_id = wr->wr_id;
	w->op = wr->opcode;
	w->wc_op = wop;
	w->len = atomic ? 8 : len;
	w->imm = wr->opcode == IBV_WR_SEND_WITH_IMM || wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM ?
		 wr->imm_data : wr->opcode == IBV_WR_SEND_WITH_INV ? wr->invalidate_rkey : 0;
	/* XRC_SEND: the receiver's SRQ; 0 is no SRQ's number (xrc.c) */
	w->xsrqn = q->qp.qp_type == IBV_QPT_XRC_SEND ? wr->qp_type.xrc.remote_srqn & 0xffffff : 0;
	w->signaled = q->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
	w->status = IBV_WC_SUCCESS;
	w->gen = c->dereg_gen;
	w->udd = -1;
	w->mcg = -1;
	if (q->qp.qp_type == IBV_QPT_UD)
		rv_ud_prep(q, w, wr);
	q->tail++;
	if (q->broken || q->qp.state == IBV_QPS_ERR || q->qp.state == IBV_QPS_SQE)
		return 0;         /* flushed in order by rv_qp_issue */
	if (local) {
		/* done now, under the lock, before any later WR of this QP
		 * issues; reported in its turn (a failure puts the QP in the
		 * error state then, as a NIC's) */
		w->status = wr->opcode == IBV_WR_BIND_MW ?
			    rv_mw_bind(c, q, wr->bind_mw.mw, wr->bind_mw.rkey, &wr->bind_mw.bind_info) :
			    rv_mw_invalidate(c, q, wr->invalidate_rkey);
		w->issued = w->status == IBV_WC_SUCCESS;
		return 0;
	}
	sg = &q->sge[(size_t)(widx & q->mask) * q->sge_stride];
	if (wr->send_flags & IBV_SEND_INLINE) {
		/* the application may reuse its buffer as soon as we return */
		uint8_t *d = q->inl + (size_t)(widx & q->mask) * RV_MAX_INLINE;

		w->inl = d;
		for (int i = 0; i < wr->num_sge; i++) {
			if (!wr->sg_list[i].length)
				continue;   /* its address may be anything, even NULL (UCX's) */
			memcpy(d, (const void *)(uintptr_t)wr->sg_list[i].addr, wr->sg_list[i].length);
			d += wr->sg_list[i].length;
		}
	} else {
		/* a READ's and an atomic's SGEs are written into */
		bool into = atomic || wr->opcode == IBV_WR_RDMA_READ;

		for (int i = 0; i < wr->num_sge; i++) {
			sg[i] = wr->sg_list[i];
			if (sg[i].length && !rv_local_ok(c, &sg[i], into))
				w->status = IBV_WC_LOC_PROT_ERR;
		}
		w->nsge = (uint16_t)wr->num_sge;
		if (w->status != IBV_WC_SUCCESS)
			return 0;
	}
	/* A zero-length RDMA WRITE or READ touches no memory: a NIC checks
	 * neither its rkey nor its address (UCX's flush posts one with rkey 0),
	 * only that the peer QP answers (issue_probe). */
	if ((rdma && w->len) || atomic) {
		uint64_t raddr = atomic ? wr->wr.atomic.remote_addr : wr->wr.rdma.remote_addr;
		uint32_t rkey = atomic ? wr->wr.atomic.rkey : wr->wr.rdma.rkey;
		uint64_t rlen = w->len;
		/* the peer QP's qp_access_flags first: a NIC's responder
		 * refuses an operation they leave out (rxe: an invalid
		 * request), whatever the MR allows */
		uint32_t allowed = rv_peer_access(c, q, access);
		struct rv_rkey *k;

		if (!(allowed & access)) {
			if (getenv("ROSHM_VERBS_DEBUG"))
				fprintf(stderr, "roshm-verbs: QP %#x: the peer QP's access flags %#x "
					"leave out %#x\n", q->qp.qp_num, allowed, access);
			if (q->qp.qp_type == IBV_QPT_UC)
				w->drop = true;
			else
				w->status = IBV_WC_REM_INV_REQ_ERR;
			return 0;
		}
		if (!rv_peer_owner(c, q)) {
			/* no peer QP to answer: as a NIC's packets nobody acknowledges */
			if (q->qp.qp_type == IBV_QPT_UC)
				w->drop = true;
			else
				w->status = IBV_WC_RETRY_EXC_ERR;
			return 0;
		}
		/* the peer's MRs only: never ours, nor a third process's */
		k = rv_rkey_resolve(c, rkey, allowed, q->peer_owner);

		/* k->m.qpn: a type 2 window, for one QP of ours only */
		if (!k || !(k->m.access & access) || (k->m.qpn && k->m.qpn != q->qp.qp_num) ||
		    raddr < k->m.addr || rlen > k->m.length ||
		    raddr - k->m.addr > k->m.length - rlen || (atomic && (raddr & 7))) {
			if (getenv("ROSHM_VERBS_DEBUG"))
				fprintf(stderr, "roshm-verbs: QP %#x: rkey %08x [%#llx, +%llu): %s\n",
					q->qp.qp_num, rkey, (unsigned long long)raddr,
					(unsigned long long)rlen, k ? "outside the MR or its access" :
					"not resolved");
			if (q->qp.qp_type == IBV_QPT_UC)
				w->drop = true;   /* the peer drops it; we never hear */
			else
				w->status = IBV_WC_REM_ACCESS_ERR;
			return 0;
		}
		k->refs++;
		w->k = k;
		w->raddr = raddr;
		w->cmp = wr->wr.atomic.compare_add;
		w->swap = wr->wr.atomic.swap;
	}
	return 0;
}

int rv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct rv_ctx *c = to_ctx(qp->context);
	struct rv_qp *q = (struct rv_qp *)qp;
	int ret = 0;
	bool few;

	rv_lock(c);
	if ((qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_ERR && qp->state != IBV_QPS_SQE) ||
	    qp->qp_type == IBV_QPT_XRC_RECV) {
		*bad = wr;
		rv_unlock(c);
		return EINVAL;
	}
	c->rkey_until = rv_now_ns() + RV_RKEY_WAIT_NS;
	for (; wr; wr = wr->next) {
		ret = post_one(c, q, wr);
		if (ret) {
			*bad = wr;
			break;
		}
	}
	c->rkey_until = 0;
	rv_qp_issue(c, q);
	roshm_submit(c->r);   /* one doorbell for the chain */
	rv_guard(c);
	rv_grant_drops(c);    /* a flag test, unless a QP failed */
	/* (ROSHM_VERBS_YIELD) the poller takes a post at once when the QP has
	 * little in flight (a ping-pong); a stream of posts goes on and yields
	 * at its empty poll, so the poller takes the batch in one turn */
	few = q->tail - q->head <= 2;
	rv_unlock(c);
	if (c->yield && few)
		sched_yield();
	return ret;
}
