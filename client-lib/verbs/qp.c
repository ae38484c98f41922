// SPDX-License-Identifier: MIT
/*
 * libroshm-verbs: the send engine (a QP's life is qp_state.c, what it finds
 * of its peers rkey.c).
 *
 * ibv_post_send (post.c) records each WR in the QP's software send queue (the
 * bytes of an inline WR are copied at once, everything else is checked); rv_qp_issue()
 * turns the queue into roshm SQEs in posting order as far as arena slots, the
 * SQ and the peer's ring credits allow, and rv_progress() (every poll and
 * post, and the notifier thread) reaps roshmd's completions and issues what
 * waited. WRs complete in posting order per QP, as on an RC QP.
 *
 * RDMA WRITE / READ / atomics are roshm WRITE / READ / FETCH_ADD / CMP_SWAP
 * on the region the rkey names; a WRITE's source and a READ's destination
 * are the local MR's own pages (ROSHM_SQE_F_LBUF: no copy), or an arena
 * slot for a WRITE of several SGEs or inline data (one copy, here). SEND, SEND_WITH_IMM and the notification of an
 * RDMA_WRITE_WITH_IMM are fragments in the inbound ring of the peer QP
 * (region "ibv-qp-<dest_qp_num>", layout in rv.h): a WRITE of header and
 * payload, then a CAS of the header's tag, back to back on the same
 * connection, which executes them in order, so the owner never sees the tag
 * before the bytes. A publication waits until every earlier RDMA WRITE and
 * atomic of the QP completed, so a receiver never sees a SEND or an
 * immediate ahead of data that did not land. Credits are the ring's consumer
 * index, READ from the peer when half the ring is in use or a fragment does
 * not fit (with them, how many RECVs wait at the owner); a ring that stays
 * full while none waits is RNR (rnr_retry, the peer's min_rnr_timer), as on
 * a NIC, and one full of messages that RECVs wait for only holds the sender
 * until the owner's library drains it into them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "rv.h"

/* ------------------------------------------------------------ resources */

enum ibv_wc_status rv_wc_status(int st)
{
	switch (st) {
	case 0:
		return IBV_WC_SUCCESS;
	case -EACCES: case -EPERM: case -ERANGE: case -EBADF: case -ESTALE: case -ENOENT:
	case -EFAULT:
		return IBV_WC_REM_ACCESS_ERR;
	case -EINVAL:
		return IBV_WC_REM_INV_REQ_ERR;
	case -EHOSTUNREACH: case -ECONNRESET: case -ETIMEDOUT: case -EIO:
		return IBV_WC_RETRY_EXC_ERR;
	default:
		return IBV_WC_REM_OP_ERR;
	}
}

/* A fragment or credit READ failed: the peer QP's ring is gone (destroyed,
 * its owner left) or unreachable, which a NIC sees as packets nobody answers. */
static enum ibv_wc_status ring_status(int st)
{
	switch (st) {
	case -ESTALE: case -ENOENT: case -EBADF: case -EACCES:
		return IBV_WC_RETRY_EXC_ERR;
	default:
		return rv_wc_status(st);
	}
}

/* A full ring whose owner has RECVs waiting: its credits are read again
 * after 100 us, then twice as long each time up to 5 ms; an owner whose
 * cons did not move for 1 s (stopped, stuck, or lying) is then answered
 * as one without RECVs, RNR by RNR. */
#define RV_RING_FULL_WAIT_NS 100000ull
#define RV_RING_FULL_WAIT_MAX_NS 5000000ull
#define RV_RING_FULL_STALL_NS 1000000000ull

/* min_rnr_timer (IB spec table) in units of 10 us; 0 is the longest. */
static uint64_t rnr_ns(uint8_t t)
{
	static const uint16_t u10[32] = {
		65535, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384,
		512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576,
		32768, 49152,
	};

	return (uint64_t)u10[t & 31] * 10000u;
}

static bool remote_status(enum ibv_wc_status st)
{
	return st == IBV_WC_REM_ACCESS_ERR || st == IBV_WC_REM_INV_REQ_ERR ||
	       st == IBV_WC_REM_OP_ERR || st == IBV_WC_RETRY_EXC_ERR ||
	       st == IBV_WC_RNR_RETRY_EXC_ERR;
}

static void wr_fail(struct rv_qp *q, struct rv_swr *w, enum ibv_wc_status st)
{
	/* UC: nothing answers its sender, so what fails at the peer (or on
	 * the way) is lost without a word, and the WR completes as sent */
	if ((q->qp.qp_type == IBV_QPT_UC || q->qp.qp_type == IBV_QPT_UD) && remote_status(st)) {
		w->drop = true;
		return;
	}
	if (w->status == IBV_WC_SUCCESS)
		w->status = st;
	q->broken = true;
}

/* The QP goes to the error state: posted receives are flushed now, the send
 * queue as its WRs come up (rv_qp_issue, qp_retire). */
void rv_qp_fail(struct rv_qp *q)
{
	/* on an SRQ: it takes no more of the SRQ's RECVs (async.c) */
	if (q->srq && q->qp.state != IBV_QPS_ERR)
		rv_async_push(to_ctx(q->qp.context), IBV_EVENT_QP_LAST_WQE_REACHED, q);
	q->qp.state = IBV_QPS_ERR;
	q->broken = true;
	rv_rq_flush(q);
	if (q->gr_ok)   /* a QP in the error state takes nothing from its peer */
		to_ctx(q->qp.context)->grant_drops = true;
	if (to_ctx(q->qp.context)->mws)
		rv_mw_qp_failed(to_ctx(q->qp.context), q);
}

void rv_backlog(struct rv_ctx *c, struct rv_qp *q, bool on)
{
	if (q->backlog_on == on)
		return;
	q->backlog_on = on;
	if (on)
		c->nbacklog++;
	else
		c->nbacklog--;
}

/*
 * A send WR failed. An RC QP goes to the error state. A UD or UC QP's send
 * queue does, alone (IBV_QPS_SQE): its receives go on, the send WRs behind
 * the failed one are flushed, and ibv_modify_qp to RTS resumes sending, as
 * on a NIC.
 */
static void send_failed(struct rv_qp *q, enum ibv_wc_status st)
{
	if (q->qp.qp_type != IBV_QPT_UD && q->qp.qp_type != IBV_QPT_UC) {
		rv_qp_fail(q);
		return;
	}
	/* one flushed in SQE that completes after the move back to RTS (it was
	 * in flight) failed with the send queue, not anew */
	if (st == IBV_WC_WR_FLUSH_ERR)
		return;
	if (q->qp.state == IBV_QPS_RTS)
		q->qp.state = IBV_QPS_SQE;
	q->broken = true;   /* (sends only: the receive paths look at the state) */
}

/* Report the QP's finished WRs in posting order. */
static void qp_retire(struct rv_qp *q)
{
	while (q->head != q->issue) {
		struct rv_swr *w = &q->swr[q->head & q->mask];
		struct ibv_wc wc;

		if (!w->issued || w->pending)
			break;
		/* A NIC reports the first failure and flushes every WR behind it,
		 * whatever their own fate was (they ran after the QP broke). */
		if (q->qp.state == IBV_QPS_ERR || q->qp.state == IBV_QPS_SQE)
			w->status = IBV_WC_WR_FLUSH_ERR;
		else if (w->status != IBV_WC_SUCCESS)
			send_failed(q, w->status);
		if (w->k) {
			w->k->refs--;
			w->k = NULL;
		}
		rv_ud_release(to_ctx(q->qp.context), w);
		if (!q->destroying && (w->signaled || w->status != IBV_WC_SUCCESS)) {
			memset(&wc, 0, sizeof(wc));
			wc.wr_id = w->wr_id;
			wc.status = w->status;
			wc.opcode = w->wc_op;
			wc.byte_len = (uint32_t)w->len;
			wc.qp_num = q->qp.qp_num;
			rv_cq_push(q->qp.send_cq, &wc);
		}
		q->head++;
	}
}

/* ------------------------------------------------------------ the engine */

/*
 * Are the WR's local SGEs still in live MRs of ours, as at its post? Only
 * looked at again when an MR was deregistered since (c->dereg_gen): a WR
 * whose MR went (the application may have freed the memory too) fails with
 * LOC_PROT_ERR, as a NIC's, and nothing is read from or written to where it
 * was. Inline data is ours.
 */
bool rv_sources_ok(struct rv_ctx *c, struct rv_qp *q, uint32_t widx, struct rv_swr *w)
{
	const struct ibv_sge *s = &q->sge[(size_t)(widx & q->mask) * q->sge_stride];
	bool into = w->op == IBV_WR_RDMA_READ || w->op == IBV_WR_ATOMIC_FETCH_AND_ADD ||
		    w->op == IBV_WR_ATOMIC_CMP_AND_SWP;

	if (w->inl || w->gen == c->dereg_gen)
		return true;
	for (uint16_t i = 0; i < w->nsge; i++)
		if (s[i].length && !rv_local_ok(c, &s[i], into))
			return false;
	w->gen = c->dereg_gen;
	return true;
}

/* Copy @n bytes of the WR's message, from byte @off on, to @dst. */
void rv_gather(struct rv_qp *q, uint32_t widx, const struct rv_swr *w, uint64_t off,
	       uint8_t *dst, uint64_t n)
{
	const struct ibv_sge *s = &q->sge[(size_t)(widx & q->mask) * q->sge_stride];

	if (w->inl) {
		memcpy(dst, w->inl + off, n);
		return;
	}
	for (uint16_t i = 0; i < w->nsge && n; i++) {
		uint64_t take;

		if (off >= s[i].length) {
			off -= s[i].length;
			continue;
		}
		take = s[i].length - off;
		if (take > n)
			take = n;
		rv_dma_copy(dst, (const uint8_t *)(uintptr_t)s[i].addr + off, take);
		dst += take;
		n -= take;
		off = 0;
	}
}

/* Ask the peer how far it consumed its ring (one READ in flight at most). */
static void credit_request(struct rv_ctx *c, struct rv_qp *q)
{
	uint32_t slot;
	struct roshm_sqe *sqe;

	if (q->credit_inflight || !q->peer_ok)
		return;
	if (q->rnr_next_ns) {
		if (rv_now_ns() < q->rnr_next_ns)
			return;
		q->rnr_next_ns = 0;
	}
	if (!rv_room(c, &sqe, 1))
		return;
	slot = rv_take_slot(c);
	roshm_prep_read(sqe, q->peer_handle, RV_RING_CREDIT, slot * c->slot_size, RV_RING_CREDIT_LEN);
	roshm_sqe_set_data(sqe, slot);
	c->ops[slot] = (struct rv_op){ .qp = q, .len = RV_RING_CREDIT_LEN, .kind = RV_OP_CREDIT,
				       .refs = 1 };
	q->inflight++;
	q->credit_inflight = true;
}

/*
 * The ring is full. True when the owner says @waiting RECVs wait for its
 * messages and its cons moved (@moved) within RV_RING_FULL_STALL_NS of the
 * wait's start or of its last move: the credits are read again after a
 * delay that backs off. False: answer it as an RNR NAK, and so on until its
 * cons moves. A read that finds no RECV waiting any more reads once again
 * before the RNR (its cons may be older than its count: the 24 bytes are
 * not read at once); a count that comes back continues the wait, it does
 * not start one.
 */
static bool full_wait(struct rv_qp *q, uint32_t waiting, bool moved)
{
	struct rv_full *f = &q->full;
	uint64_t now = rv_now_ns();
	bool some = waiting && waiting <= RV_MAX_WR;

	if (!f->since_ns && !some)
		return false;
	if (!f->since_ns || moved) {    /* a wait starts, or the owner took messages */
		*f = (struct rv_full){ .since_ns = now, .wait_ns = RV_RING_FULL_WAIT_NS };
		q->rnr_count = 0;
	}
	if (f->stalled || now - f->since_ns >= RV_RING_FULL_STALL_NS) {
		f->stalled = true;
		return false;
	}
	if (!some) {
		if (f->ended)
			return false;
		f->ended = true;
		q->rnr_next_ns = now + RV_RING_FULL_WAIT_NS;
		return true;
	}
	f->ended = false;
	q->rnr_next_ns = now + f->wait_ns;
	f->wait_ns = f->wait_ns * 2 < RV_RING_FULL_WAIT_MAX_NS ? f->wait_ns * 2 : RV_RING_FULL_WAIT_MAX_NS;
	return true;
}

/* A credit READ came back. */
static void credit_done(struct rv_qp *q, int status, const uint8_t *buf)
{
	struct rv_swr *w = &q->swr[q->issue & q->mask];
	uint64_t cons, rq;
	uint32_t timer, waiting;
	bool moved;

	q->credit_inflight = false;
	if (status) {
		/* the peer QP is gone, or its node: what still waits fails */
		q->peer_status = ring_status(status);
		if (q->want && q->issue != q->tail) {
			wr_fail(q, w, q->peer_status);
			w->issued = true;
			q->want = 0;
		}
		return;
	}
	memcpy(&cons, buf, 8);
	memcpy(&timer, buf + 8, 4);
	memcpy(&rq, buf + 16, 8);
	/* Untrusted: the owner can only ever have consumed what we produced. */
	moved = cons > q->cons_known && cons <= q->prod;
	if (moved)
		q->cons_known = cons;
	q->peer_rnr_timer = (uint8_t)(timer & 31);
	if (!q->want || q->issue == q->tail)
		return;
	/* RECVs posted and not yet taken at the owner (its word, trusted for
	 * RV_RING_FULL_STALL_NS without its cons moving at most) */
	waiting = (uint32_t)rq - (uint32_t)(rq >> 32);
	if (q->prod + q->want - q->cons_known <= q->peer_n) {
		q->rnr_count = 0;
		q->full = (struct rv_full){ 0 };
	} else if (full_wait(q, waiting, moved)) {
		/* full, but its RECVs wait for what is in it: the owner's
		 * library drains it into them soon; not an RNR NAK */
	} else if (q->rnr_retry < 7 && q->rnr_count >= q->rnr_retry) {
		/* the ring stayed full through every retry: receiver not ready */
		wr_fail(q, w, IBV_WC_RNR_RETRY_EXC_ERR);
		w->issued = true;
		q->want = 0;
		q->rnr_count = 0;
	} else {
		q->rnr_count++;
		q->rnr_next_ns = rv_now_ns() + rnr_ns(q->peer_rnr_timer);
	}
}

/*
 * RDMA WRITE data (also of WRITE_WITH_IMM), in arena-slot-sized chunks: from
 * the MR's pages themselves when the WR has one SGE (roshmd reads them, as a
 * NIC would), else gathered into the chunk's arena slot.
 */
static bool issue_write(struct rv_ctx *c, struct rv_qp *q, uint32_t widx, struct rv_swr *w)
{
	const struct ibv_sge *s = &q->sge[(size_t)(widx & q->mask) * q->sge_stride];

	while (w->done < w->len) {
		uint64_t chunk = w->len - w->done < c->slot_size ? w->len - w->done : c->slot_size;
		uint64_t off, seg_room, loff, lroom;
		struct roshm_sqe *sqe;
		uint32_t slot, h, lh;

		if (!rv_sources_ok(c, q, widx, w)) {
			wr_fail(q, w, IBV_WC_LOC_PROT_ERR);
			w->done = w->len;   /* what is in flight completes; no more goes */
			break;
		}
		if (!rv_room(c, &sqe, 1))
			return false;
		h = rv_rkey_at(w->k, w->raddr + w->done, &off, &seg_room);
		if (chunk > seg_room)
			chunk = seg_room;
		slot = rv_take_slot(c);
		if (!w->inl && w->nsge == 1 &&
		    rv_lbuf(c, s->lkey, s->addr + w->done, &lh, &loff, &lroom)) {
			/* from the MR's own pages: roshmd (or its NIC) reads them */
			if (chunk > lroom)
				chunk = lroom;
			roshm_prep_write(sqe, h, off, 0, (uint32_t)chunk);
			roshm_sqe_set_lbuf(sqe, lh, loff);
		} else {
			rv_gather(q, widx, w, w->done, c->arena + slot * c->slot_size, chunk);
			roshm_prep_write(sqe, h, off, slot * c->slot_size, (uint32_t)chunk);
		}
		roshm_sqe_set_data(sqe, slot);
		c->ops[slot] = (struct rv_op){ .qp = q, .widx = widx, .len = (uint32_t)chunk,
					       .kind = RV_OP_WRITE, .refs = 1 };
		w->pending++;
		w->nsqe++;
		q->inflight++;
		q->data_inflight++;
		w->done += chunk;
	}
	return true;
}

/* The local SGE holding byte @off of the WR's message: its address there,
 * and how many bytes of that SGE are left from it (a READ scatters). */
static const struct ibv_sge *sge_at(const struct ibv_sge *s, uint16_t nsge, uint64_t off,
				    uint64_t *addr, uint64_t *room)
{
	for (uint16_t i = 0; i < nsge; i++) {
		if (off < s[i].length) {
			*addr = s[i].addr + off;
			*room = s[i].length - off;
			return &s[i];
		}
		off -= s[i].length;
	}
	return NULL;   /* not reached: w->len is the sum of the lengths */
}

/*
 * RDMA READ, in chunks of at most an arena slot, each into the pages of the
 * MR its local SGE names (roshmd writes them, as a NIC would): a chunk
 * never spans two SGEs nor two segments. An MR deregistered since the post
 * (the post checked it) fails the WR with LOC_PROT_ERR, as a NIC's missing
 * MR does, and nothing is written where it was.
 */
static bool issue_read(struct rv_ctx *c, struct rv_qp *q, uint32_t widx, struct rv_swr *w)
{
	const struct ibv_sge *sgl = &q->sge[(size_t)(widx & q->mask) * q->sge_stride];

	while (w->done < w->len) {
		uint64_t chunk = w->len - w->done < c->slot_size ? w->len - w->done : c->slot_size;
		uint64_t off, seg_room, loff, lroom, la, sroom;
		const struct ibv_sge *s;
		struct roshm_sqe *sqe;
		uint32_t slot, h, lh;

		s = sge_at(sgl, w->nsge, w->done, &la, &sroom);
		if (!s || !rv_lbuf(c, s->lkey, la, &lh, &loff, &lroom)) {
			wr_fail(q, w, IBV_WC_LOC_PROT_ERR);
			w->done = w->len;   /* what is in flight completes; no more goes */
			break;
		}
		if (!rv_room(c, &sqe, 1))
			return false;
		h = rv_rkey_at(w->k, w->raddr + w->done, &off, &seg_room);
		if (chunk > seg_room)
			chunk = seg_room;
		if (chunk > sroom)   /* one chunk lands in one SGE */
			chunk = sroom;
		if (chunk > lroom)
			chunk = lroom;
		slot = rv_take_slot(c);
		roshm_prep_read(sqe, h, off, 0, (uint32_t)chunk);
		roshm_sqe_set_lbuf(sqe, lh, loff);
		roshm_sqe_set_data(sqe, slot);
		c->ops[slot] = (struct rv_op){ .qp = q, .widx = widx, .len = (uint32_t)chunk,
					       .kind = RV_OP_READ,  .refs = 1 };
		w->pending++;
		w->nsqe++;
		q->inflight++;
		w->done += chunk;
	}
	return true;
}

static bool issue_atomic(struct rv_ctx *c, struct rv_qp *q, uint32_t widx, struct rv_swr *w)
{
	const struct ibv_sge *s = &q->sge[(size_t)(widx & q->mask) * q->sge_stride];
	uint64_t off, seg_room;
	struct roshm_sqe *sqe;
	uint32_t slot, h;

	if (!rv_sources_ok(c, q, widx, w)) {
		wr_fail(q, w, IBV_WC_LOC_PROT_ERR);   /* its MR went: nothing changes remotely */
		return true;
	}
	if (!rv_room(c, &sqe, 1))
		return false;
	h = rv_rkey_at(w->k, w->raddr, &off, &seg_room);  /* 8 aligned bytes: one page */
	slot = rv_take_slot(c);
	if (w->op == IBV_WR_ATOMIC_FETCH_AND_ADD)
		roshm_prep_fetch_add(sqe, h, off, w->cmp);
	else
		roshm_prep_cmp_swap(sqe, h, off, w->cmp, w->swap);
	roshm_sqe_set_data(sqe, slot);
	c->ops[slot] = (struct rv_op){ .qp = q, .widx = widx, .len = 8, .kind = RV_OP_ATOMIC,
				       .refs = 1, .dst = (void *)(uintptr_t)s->addr };
	w->pending++;
	w->nsqe++;
	q->inflight++;
	q->data_inflight++;
	return true;
}

/* Payload bytes the fragment starting at slot sequence @pos may carry. */
static uint64_t frag_max(const struct rv_ctx *c, uint32_t n, uint64_t pos)
{
	uint32_t to_end = n - (uint32_t)(pos & (n - 1));
	uint64_t max = c->slot_size - RV_SLOT;

	if (max > (uint64_t)(n / 2 - 1) * RV_SLOT)
		max = (uint64_t)(n / 2 - 1) * RV_SLOT;
	if (max > (uint64_t)(to_end - 1) * RV_SLOT)
		max = (uint64_t)(to_end - 1) * RV_SLOT;
	return max;
}

/* Slots a message of @left bytes takes from @pos on (stops counting past the ring). */
static uint64_t msg_slots(const struct rv_ctx *c, uint32_t n, uint64_t pos, uint64_t left)
{
	uint64_t total = 0;

	do {
		uint64_t max = frag_max(c, n, pos), pay = left < max ? left : max;
		uint64_t k = 1 + (pay + RV_SLOT - 1) / RV_SLOT;

		total += k;
		pos += k;
		left -= pay;
	} while (left && total <= n);
	return total;
}

/*
 * Publish the WR's message (SEND, SEND_WITH_IMM) or the notification of an
 * RDMA WRITE_WITH_IMM into the peer's ring, one fragment at a time as
 * credits allow. Fragments never wrap; one is at most an arena slot and half
 * the ring. A message that fits the ring goes in only once all of it fits,
 * so an RNR never leaves half a message behind; a bigger one streams.
 */
static bool issue_frags(struct rv_ctx *c, struct rv_qp *q, uint32_t widx, struct rv_swr *w)
{
	bool imm_write = w->op == IBV_WR_RDMA_WRITE_WITH_IMM;
	enum ibv_wc_status st;

	if (!q->peer_ok && q->peer_status == IBV_WC_SUCCESS &&
	    (st = rv_peer_resolve(c, q, 10)) != IBV_WC_SUCCESS)
		q->peer_status = st;
	if (q->peer_status != IBV_WC_SUCCESS) {
		wr_fail(q, w, q->peer_status);
		w->issued = true;
		return true;
	}
	for (;;) {
		uint32_t n = q->peer_n;
		uint64_t pos = q->prod;
		uint64_t left = imm_write ? 0 : w->len - w->sent;
		uint64_t max = frag_max(c, n, pos), pay = left < max ? left : max;
		uint64_t need = 1 + (pay + RV_SLOT - 1) / RV_SLOT;
		uint32_t k = (uint32_t)need, slot;
		struct rv_frag f;
		struct roshm_sqe *sqe[2];
		uint64_t off;
		uint8_t *buf;

		if (!w->frags) {
			uint64_t all = msg_slots(c, n, pos, left);

			if (all <= n)
				need = all;
		}
		if (pos + need - q->cons_known > n) {
			q->want = (uint32_t)need;
			credit_request(c, q);
			return false;
		}
		if (!imm_write && !rv_sources_ok(c, q, widx, w)) {
			wr_fail(q, w, IBV_WC_LOC_PROT_ERR);   /* its MR went while it waited */
			q->want = 0;
			w->issued = true;
			return true;
		}
		if (!rv_room(c, sqe, 2))
			return false;
		q->want = 0;
		q->rnr_count = 0;
		slot = rv_take_slot(c);
		buf = c->arena + slot * c->slot_size;
		memset(&f, 0, sizeof(f));
		f.len = (uint32_t)pay;
		f.nslots = k;
		f.total = (uint32_t)w->len;
		f.imm = w->imm;
		f.src_qp = q->qp.qp_num;
		f.srqn = w->xsrqn;
		f.opcode = imm_write ? RV_FRAG_WRITE_IMM :
			   w->op == IBV_WR_SEND_WITH_IMM ? RV_FRAG_SEND_IMM :
			   w->op == IBV_WR_SEND_WITH_INV ? RV_FRAG_SEND_INV : RV_FRAG_SEND;
		f.flags = (uint8_t)((w->frags ? 0 : RV_FRAG_FIRST) | (pay == left ? RV_FRAG_LAST : 0));
		memcpy(buf, &f, sizeof(f));
		rv_gather(q, widx, w, w->sent, buf + RV_SLOT, pay);
		off = RV_RING_SLOTS + (pos & (n - 1)) * RV_SLOT;
		/* WRITE then CAS on the same region: one connection, in order */
		roshm_prep_write(sqe[0], q->peer_handle, off, slot * c->slot_size,
				 (uint32_t)(RV_SLOT + pay));
		roshm_sqe_set_data(sqe[0], slot);
		roshm_prep_cmp_swap(sqe[1], q->peer_handle, off, 0, pos + 1);
		roshm_sqe_set_data(sqe[1], slot | RV_UD_PUBLISH);
		c->ops[slot] = (struct rv_op){ .qp = q, .widx = widx, .len = (uint32_t)(RV_SLOT + pay),
					       .kind = RV_OP_FRAG, .refs = 2 };
		w->pending += 2;
		w->nsqe += 2;
		w->frags++;
		q->inflight += 2;
		q->prod += k;
		w->sent += pay;
		/* keep credits coming before the ring looks full */
		if (q->prod - q->cons_known > n / 2)
			credit_request(c, q);
		if (pay == left)
			break;
	}
	w->issued = true;
	return true;
}

/* Issue what the WR still needs; false when it waits for resources. */
/*
 * A zero-length RDMA WRITE or READ touches no memory, but on a NIC it still
 * needs the peer QP's answer: an application that flushes or checks a
 * connection with one (UCX's keepalive) learns of a dead peer by its
 * failure. Here it READs the peer's ring credit words (the peer QP, as a
 * SEND would find it), after every WR before it on the same connection.
 */
static bool issue_probe(struct rv_ctx *c, struct rv_qp *q, uint32_t widx, struct rv_swr *w)
{
	struct roshm_sqe *sqe;
	enum ibv_wc_status st;
	uint32_t slot;

	if (!q->peer_ok && q->peer_status == IBV_WC_SUCCESS &&
	    (st = rv_peer_resolve(c, q, 10)) != IBV_WC_SUCCESS)
		q->peer_status = st;
	if (q->peer_status != IBV_WC_SUCCESS) {
		wr_fail(q, w, q->peer_status);
		return true;
	}
	if (!rv_room(c, &sqe, 1))
		return false;
	slot = rv_take_slot(c);
	roshm_prep_read(sqe, q->peer_handle, RV_RING_CREDIT, slot * c->slot_size, 16);
	roshm_sqe_set_data(sqe, slot);
	c->ops[slot] = (struct rv_op){ .qp = q, .widx = widx, .len = 16, .kind = RV_OP_PROBE,
				       .refs = 1 };
	w->pending++;
	w->nsqe++;
	q->inflight++;
	return true;
}

static bool issue_wr(struct rv_ctx *c, struct rv_qp *q, uint32_t widx, struct rv_swr *w)
{
	if (w->drop) {   /* UC, refused at the post: nothing goes out */
		w->issued = true;
		return true;
	}
	if (q->qp.qp_type == IBV_QPT_UD)
		return rv_ud_issue(c, q, widx, w);
	if (!w->len && (w->op == IBV_WR_RDMA_WRITE || w->op == IBV_WR_RDMA_READ)) {
		if (!issue_probe(c, q, widx, w))
			return false;
		w->issued = true;
		return true;
	}
	switch (w->op) {
	case IBV_WR_RDMA_WRITE:
		if (!issue_write(c, q, widx, w))
			return false;
		w->issued = true;
		return true;
	case IBV_WR_RDMA_READ:
		if (!issue_read(c, q, widx, w))
			return false;
		w->issued = true;
		return true;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		if (!issue_atomic(c, q, widx, w))
			return false;
		w->issued = true;
		return true;
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		if (!issue_write(c, q, widx, w))
			return false;
		/* the immediate only once the data (and all data before) landed */
		if (q->data_inflight)
			return false;
		if (w->status != IBV_WC_SUCCESS) {
			w->issued = true;
			return true;
		}
		return issue_frags(c, q, widx, w);
	default: /* SEND, SEND_WITH_IMM */
		if (!w->frags && q->data_inflight)
			return false;   /* earlier RDMA WRITEs and atomics land first */
		return issue_frags(c, q, widx, w);
	}
}

void rv_qp_issue(struct rv_ctx *c, struct rv_qp *q)
{
	if (q->destroying)
		return;
	if (q->ud_open)
		rv_ud_advance(c, q);
	while (q->issue != q->tail) {
		struct rv_swr *w = &q->swr[q->issue & q->mask];

		if (q->broken || q->qp.state == IBV_QPS_ERR || q->qp.state == IBV_QPS_SQE) {
			if (w->status == IBV_WC_SUCCESS)
				w->status = IBV_WC_WR_FLUSH_ERR;
			w->issued = true;
		} else if (!w->issued && w->status != IBV_WC_SUCCESS) {
			w->issued = true;   /* failed when posted */
			q->broken = true;
		} else if (!w->issued && !issue_wr(c, q, q->issue, w)) {
			break;
		}
		q->issue++;
	}
	rv_backlog(c, q, q->issue != q->tail || q->ud_open);
	qp_retire(q);
}

/* One roshm completion. */
static void complete(struct rv_ctx *c, const struct roshm_cqe *e)
{
	uint64_t ud = e->user_data;
	uint32_t slot = (uint32_t)ud;
	struct rv_op *op;
	struct rv_qp *q;
	struct rv_swr *w;

	if ((ud >> 62) == (RV_UD_SYNC >> 62)) {
		if ((uint32_t)ud == c->sync_seq) {
			c->sync_done = true;
			c->sync_status = e->status;
		}
		return;
	}
	if (slot >= c->nslots)
		return;
	op = &c->ops[slot];
	q = op->qp;
	q->inflight--;
	if (op->kind == RV_OP_CREDIT) {
		credit_done(q, e->status, c->arena + slot * c->slot_size);
		rv_put_slot(c, slot);
		return;
	}
	if (op->kind == RV_OP_UD_PRECLAIM || op->kind == RV_OP_UD_UNCLAIM) {   /* no WR */
		rv_ud_opcqe(c, op, e);
		rv_put_slot(c, slot);
		return;
	}
	w = &q->swr[op->widx & q->mask];
	if (op->kind == RV_OP_UD_CLAIM || op->kind == RV_OP_UD_SEND) {
		rv_ud_cqe(c, w, op, e, ud & RV_UD_PUBLISH);
	} else if (e->status) {
		/* the handle was closed under us (a grant taken back): the next
		 * WR to that rkey looks it up again */
		if (w->k && (e->status == -EBADF || e->status == -ESTALE))
			w->k->stale = true;
		wr_fail(q, w, op->kind == RV_OP_FRAG || op->kind == RV_OP_PROBE ? ring_status(e->status) :
			rv_wc_status(e->status));
		if (getenv("ROSHM_VERBS_DEBUG"))
			fprintf(stderr, "roshm-verbs: qp %06x: WR %llu (opcode %d, %s) failed in roshmd: "
				"%s -> %s\n", q->qp.qp_num, (unsigned long long)w->wr_id, (int)w->op,
				op->kind == RV_OP_FRAG ? "into the peer's ring" :
				op->kind == RV_OP_PROBE ? "the peer's ring (zero length)" : "RDMA",
				strerror(-e->status), ibv_wc_status_str(w->status));
	} else if (op->kind == RV_OP_ATOMIC) {
		/* the old value goes where the WR said, if an MR is still there
		 * (deregistered since the post: LOC_PROT_ERR, nothing written) */
		if (rv_sources_ok(c, q, op->widx, w))
			rv_dma_copy(op->dst, &e->result, 8);
		else
			wr_fail(q, w, IBV_WC_LOC_PROT_ERR);
	} else if (op->kind == RV_OP_FRAG && (ud & RV_UD_PUBLISH) && e->result) {
		wr_fail(q, w, IBV_WC_REM_OP_ERR);   /* the slot was not free: a broken ring */
	}
	if (op->kind == RV_OP_WRITE || op->kind == RV_OP_ATOMIC)
		q->data_inflight--;
	if (!--op->refs)
		rv_put_slot(c, slot);
	w->pending--;
	if (!w->pending && w->issued)
		qp_retire(q);
}

/* Reap roshmd's completions. Issues nothing (safe inside a synchronous wait). */
void rv_reap(struct rv_ctx *c)
{
	struct roshm_cqe *cqes[32];
	unsigned n;
	bool any = false;

	while ((n = roshm_peek_batch_cqe(c->r, cqes, 32))) {
		for (unsigned i = 0; i < n; i++)
			complete(c, cqes[i]);
		roshm_cq_advance(c->r, n);
		any = true;
		if (n < 32)
			break;
	}
	/* roshmd leaves SQEs in the ring while our CQ is full, and reaping does
	 * not wake it: wake it if it sleeps on untaken SQEs. */
	if (any && __atomic_load_n(c->r->sq.khead, __ATOMIC_ACQUIRE) != c->r->sq.sqe_head &&
	    (__atomic_load_n(c->r->sq.kflags, __ATOMIC_RELAXED) & ROSHM_SQ_NEED_WAKEUP)) {
		char one = 1;
		ssize_t s = send(c->r->sq_event_fd, &one, 1, MSG_DONTWAIT | MSG_NOSIGNAL);

		(void)s;
	}
}

/* Reap, then issue what waited, then ring the doorbell once. */
void rv_progress(struct rv_ctx *c)
{
	rv_reap(c);
	if (c->nbacklog)
		for (struct rv_qp *q = c->qps; q; q = q->next)
			if (q->backlog_on)
				rv_qp_issue(c, q);
	roshm_submit(c->r);
	rv_grant_drops(c);
}

/* The QPs that went to the error state since the last look give their
 * grants back (control calls, once per QP that failed: off the fast
 * path). After each delivery too, so that a QP a poll failed lets go of
 * its peer before that poll returns. */
void rv_grant_drops(struct rv_ctx *c)
{
	if (!c->grant_drops)
		return;
	c->grant_drops = false;
	for (struct rv_qp *q = c->qps; q; q = q->next)
		if (q->qp.state == IBV_QPS_ERR)
			rv_grant_drop(c, q);
}
