// SPDX-License-Identifier: MIT
/*
 * libroshm-verbs: QPs and the send engine.
 *
 * ibv_post_send records each WR in the QP's software send queue (the bytes
 * of an inline WR are copied at once, everything else is checked); qp_issue()
 * turns the queue into roshm SQEs in posting order as far as arena slots, the
 * SQ and the peer's ring credits allow, and rv_progress() (every poll and
 * post, and the notifier thread) reaps roshmd's completions and issues what
 * waited. WRs complete in posting order per QP, as on an RC QP.
 *
 * RDMA WRITE / READ / atomics are roshm WRITE / READ / FETCH_ADD / CMP_SWAP
 * on the region the rkey names, through an arena slot (one copy, on the
 * requester). SEND, SEND_WITH_IMM and the notification of an
 * RDMA_WRITE_WITH_IMM are fragments in the inbound ring of the peer QP
 * (region "ibv-qp-<dest_qp_num>", layout in rv.h): a WRITE of header and
 * payload, then a CAS of the header's tag, back to back on the same
 * connection, which executes them in order, so the owner never sees the tag
 * before the bytes. A publication waits until every earlier RDMA WRITE and
 * atomic of the QP completed, so a receiver never sees a SEND or an
 * immediate ahead of data that did not land. Credits are the ring's consumer
 * index, READ from the peer when half the ring is in use or a fragment does
 * not fit; a ring that stays full is RNR (rnr_retry, the peer's
 * min_rnr_timer), as on a NIC.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rv.h"

#define RV_SYNC_NS (10ull * 1000000000ull)

/* ------------------------------------------------------------ resources */

static uint32_t sq_room(struct roshm *r)
{
	/* Acquire pairs with roshmd's release of the SQ head (poller R1). */
	uint32_t head = __atomic_load_n(r->sq.khead, __ATOMIC_ACQUIRE);

	return r->sq.entries - (r->sq.sqe_tail - head);
}

/*
 * An arena slot free and @n SQEs (into @s)? If not, ring the doorbell so that
 * roshmd takes what is queued; the caller retries on a later progress. Only
 * the context's lock holder produces SQEs, so the room checked is the room
 * taken.
 */
static bool room(struct rv_ctx *c, struct roshm_sqe **s, uint32_t n)
{
	if (!c->nfree || sq_room(c->r) < n) {
		roshm_submit(c->r);
		return false;
	}
	for (uint32_t i = 0; i < n; i++)
		if (!(s[i] = roshm_get_sqe(c->r)))
			return false;
	return true;
}

static uint32_t take_slot(struct rv_ctx *c)
{
	return c->free_slots[--c->nfree];
}

static void put_slot(struct rv_ctx *c, uint32_t slot)
{
	c->free_slots[c->nfree++] = slot;
}

static enum ibv_wc_status wc_status(int st)
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
		return wc_status(st);
	}
}

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

static void wr_fail(struct rv_qp *q, struct rv_swr *w, enum ibv_wc_status st)
{
	if (w->status == IBV_WC_SUCCESS)
		w->status = st;
	q->broken = true;
}

/* The QP goes to the error state: posted receives are flushed now, the send
 * queue as its WRs come up (qp_issue, qp_retire). */
void rv_qp_fail(struct rv_qp *q)
{
	q->qp.state = IBV_QPS_ERR;
	q->broken = true;
	rv_rq_flush(q);
}

static void backlog(struct rv_ctx *c, struct rv_qp *q, bool on)
{
	if (q->backlog_on == on)
		return;
	q->backlog_on = on;
	if (on)
		c->nbacklog++;
	else
		c->nbacklog--;
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
		if (q->qp.state == IBV_QPS_ERR)
			w->status = IBV_WC_WR_FLUSH_ERR;
		else if (w->status != IBV_WC_SUCCESS)
			rv_qp_fail(q);
		if (w->k) {
			w->k->refs--;
			w->k = NULL;
		}
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

/* ------------------------------------------------------ synchronous reads */

/* READ @len bytes at @off of region @handle into @out and wait (10 s at most). */
int rv_sync_read(struct rv_ctx *c, uint32_t handle, uint64_t off, uint32_t len, void *out)
{
	struct roshm_sqe *sqe;
	uint64_t t0 = rv_now_ns();
	uint32_t seq = ++c->sync_seq;

	if (len > RV_META_SIZE)
		return -EINVAL;
	while (!(sqe = roshm_get_sqe(c->r))) {
		roshm_submit(c->r);
		rv_reap(c);
		if (rv_now_ns() - t0 > RV_SYNC_NS)
			return -ETIMEDOUT;
		sched_yield();
	}
	roshm_prep_read(sqe, handle, off, c->meta_off, len);
	roshm_sqe_set_data(sqe, RV_UD_SYNC | seq);
	c->sync_done = false;
	roshm_submit(c->r);
	while (!c->sync_done) {
		rv_reap(c);
		if (c->sync_done)
			break;
		if (rv_now_ns() - t0 > RV_SYNC_NS)
			return -ETIMEDOUT;
		sched_yield();
	}
	if (c->sync_status)
		return c->sync_status;
	memcpy(out, c->arena + c->meta_off, len);
	return 0;
}

static void rkey_close(struct rv_ctx *c, struct rv_rkey *k)
{
	for (uint32_t i = 0; i < k->nh; i++)
		roshm_region_close(c->r, k->handles[i]);
	k->nh = 0;
	k->valid = false;
}

/* Open "ibv-mr-<key>" into k->handles[] (once per key): its index, or -1. */
static int rkey_open(struct rv_ctx *c, struct rv_rkey *k, uint32_t key, const uint32_t *keys,
		     uint64_t *sizes)
{
	char name[ROSHM_NAME_MAX];

	for (uint32_t i = 0; i < k->nh; i++)
		if (keys[i] == key)
			return (int)i;
	if (k->nh == RV_MR_KEYS)
		return -1;
	snprintf(name, sizeof(name), "ibv-mr-%08" PRIx32, key);
	if (roshm_region_open(c->r, name, &k->handles[k->nh], &sizes[k->nh]))
		return -1;
	return (int)k->nh++;
}

/*
 * The remote MR behind @rkey: open "ibv-mr-<rkey>" in our tenant, read its
 * metadata page once into private memory and check it (segments contiguous
 * from the first page of [addr, addr + length) to past its end, each inside
 * the region that holds it, behind that region's metadata page), and open
 * the regions its segments name. Cached while WRs use it; a failed lookup
 * caches nothing.
 */
static struct rv_rkey *resolve(struct rv_ctx *c, uint32_t rkey)
{
	uint32_t keys[RV_MR_KEYS];
	uint64_t sizes[RV_MR_KEYS];
	struct rv_rkey *k = NULL;
	int idx;

	for (unsigned i = 0; i < RV_RKEY_CACHE; i++)
		if (c->rkeys[i].valid && c->rkeys[i].rkey == rkey)
			return &c->rkeys[i];
	for (unsigned i = 0; i < RV_RKEY_CACHE && !k; i++) {
		struct rv_rkey *e = &c->rkeys[c->rkey_next++ % RV_RKEY_CACHE];

		if (!e->valid || !e->refs)
			k = e;
	}
	if (!k)
		return NULL;   /* 64 remote MRs in use by WRs in flight */
	if (k->valid)
		rkey_close(c, k);
	if (rkey_open(c, k, rkey, keys, sizes) != 0)
		return NULL;
	keys[0] = rkey;
	if (rv_sync_read(c, k->handles[0], 0, sizeof(k->m), &k->m))
		goto err;
	if (rv_meta_check(&k->m, rkey))
		goto err;
	for (uint32_t i = 0; i < k->m.nseg; i++) {
		const struct rv_seg *g = &k->m.seg[i];

		idx = rkey_open(c, k, g->key, keys, sizes);
		if (idx < 0)
			goto err;
		keys[idx] = g->key;
		if (g->data_off > sizes[idx] || g->len > sizes[idx] - g->data_off)
			goto err;
		k->seg_h[i] = (uint8_t)idx;
	}
	k->rkey = rkey;
	k->refs = 0;
	k->valid = true;
	return k;
err:
	rkey_close(c, k);
	return NULL;
}

/* Where remote address @va of @k lives: the region handle (returned), the
 * data offset in *off, and in *room the bytes from there to its segment's end. */
static uint32_t rkey_at(const struct rv_rkey *k, uint64_t va, uint64_t *off, uint64_t *room)
{
	return k->handles[k->seg_h[rv_meta_at(&k->m, va, off, room)]];
}

/*
 * Find the inbound ring of the peer QP (dest_qp_num) in our tenant and read
 * its header: IBV_WC_SUCCESS, or the status a WR to that QP gets. @tries
 * attempts 100 ms apart while the region is not found (a registry may lag).
 */
static enum ibv_wc_status peer_resolve(struct rv_ctx *c, struct rv_qp *q, int tries)
{
	char name[ROSHM_NAME_MAX];
	struct rv_ring_hdr h;
	uint64_t size = 0;
	uint32_t handle = 0;
	int ret = -ENOENT;

	snprintf(name, sizeof(name), "ibv-qp-%06" PRIx32, q->dest_qp_num & 0xffffff);
	for (int i = 0; i < tries && (ret == -ENOENT || ret == -EAGAIN); i++) {
		if (i)
			usleep(100000);
		ret = roshm_region_open(c->r, name, &handle, &size);
	}
	if (ret)  /* no such QP in our tenant: as a NIC whose packets nobody answers */
		return IBV_WC_RETRY_EXC_ERR;
	ret = rv_sync_read(c, handle, 0, sizeof(h), &h);
	if (ret) {
		roshm_region_close(c->r, handle);
		return wc_status(ret);
	}
	if (h.magic != RV_RING_MAGIC || h.qpn != q->dest_qp_num ||
	    (h.nslots && (h.nslots & (h.nslots - 1) || h.nslots < 64 || h.nslots > (1u << 24) ||
			  RV_RING_SLOTS + (uint64_t)h.nslots * RV_SLOT > size))) {
		roshm_region_close(c->r, handle);
		return IBV_WC_REM_OP_ERR;
	}
	if (!h.nslots) {  /* a QP without a receive queue */
		roshm_region_close(c->r, handle);
		return IBV_WC_REM_INV_REQ_ERR;
	}
	q->peer_handle = handle;
	q->peer_n = h.nslots;
	/* Start where the owner's consumer is: a QP that was reset and
	 * connected again picks the ring up where it stands. */
	q->prod = q->cons_known = h.cons;
	q->peer_rnr_timer = (uint8_t)(h.rnr_timer & 31);
	q->peer_ok = true;
	q->peer_status = IBV_WC_SUCCESS;
	q->credit_inflight = false;
	q->want = 0;
	q->rnr_count = 0;
	q->rnr_next_ns = 0;
	return IBV_WC_SUCCESS;
}

static void peer_drop(struct rv_ctx *c, struct rv_qp *q)
{
	if (q->peer_ok)
		roshm_region_close(c->r, q->peer_handle);
	q->peer_ok = false;
}

/* ------------------------------------------------------------ the engine */

/* Copy @n bytes of the WR's message, from byte @off on, to @dst. */
static void gather(struct rv_qp *q, uint32_t widx, const struct rv_swr *w, uint64_t off,
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
	if (!room(c, &sqe, 1))
		return;
	slot = take_slot(c);
	roshm_prep_read(sqe, q->peer_handle, RV_RING_CREDIT, slot * c->slot_size, 16);
	roshm_sqe_set_data(sqe, slot);
	c->ops[slot] = (struct rv_op){ .qp = q, .len = 16, .kind = RV_OP_CREDIT, .refs = 1 };
	q->inflight++;
	q->credit_inflight = true;
}

/* A credit READ came back. */
static void credit_done(struct rv_qp *q, int status, const uint8_t *buf)
{
	struct rv_swr *w = &q->swr[q->issue & q->mask];
	uint64_t cons;
	uint32_t timer;

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
	/* Untrusted: the owner can only ever have consumed what we produced. */
	if (cons > q->cons_known && cons <= q->prod)
		q->cons_known = cons;
	q->peer_rnr_timer = (uint8_t)(timer & 31);
	if (!q->want || q->issue == q->tail)
		return;
	if (q->prod + q->want - q->cons_known <= q->peer_n) {
		q->rnr_count = 0;
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

		if (!room(c, &sqe, 1))
			return false;
		h = rkey_at(w->k, w->raddr + w->done, &off, &seg_room);
		if (chunk > seg_room)
			chunk = seg_room;
		slot = take_slot(c);
		if (!w->inl && w->nsge == 1 &&
		    rv_lbuf(c, s->lkey, s->addr + w->done, &lh, &loff, &lroom)) {
			/* from the MR's own pages: roshmd (or its NIC) reads them */
			if (chunk > lroom)
				chunk = lroom;
			roshm_prep_write(sqe, h, off, 0, (uint32_t)chunk);
			roshm_sqe_set_lbuf(sqe, lh, loff);
		} else {
			gather(q, widx, w, w->done, c->arena + slot * c->slot_size, chunk);
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

static bool issue_read(struct rv_ctx *c, struct rv_qp *q, uint32_t widx, struct rv_swr *w)
{
	const struct ibv_sge *s = &q->sge[(size_t)(widx & q->mask) * q->sge_stride];

	while (w->done < w->len) {
		uint64_t chunk = w->len - w->done < c->slot_size ? w->len - w->done : c->slot_size;
		uint64_t off, seg_room, loff, lroom;
		struct roshm_sqe *sqe;
		uint32_t slot, h, lh;
		void *dst = NULL;

		if (!room(c, &sqe, 1))
			return false;
		h = rkey_at(w->k, w->raddr + w->done, &off, &seg_room);
		if (chunk > seg_room)
			chunk = seg_room;
		slot = take_slot(c);
		if (rv_lbuf(c, s->lkey, s->addr + w->done, &lh, &loff, &lroom)) {
			/* into the MR's pages themselves: nothing to copy after */
			if (chunk > lroom)
				chunk = lroom;
			roshm_prep_read(sqe, h, off, 0, (uint32_t)chunk);
			roshm_sqe_set_lbuf(sqe, lh, loff);
		} else {
			roshm_prep_read(sqe, h, off, slot * c->slot_size, (uint32_t)chunk);
			dst = (void *)(uintptr_t)(s->addr + w->done);
		}
		roshm_sqe_set_data(sqe, slot);
		c->ops[slot] = (struct rv_op){ .qp = q, .widx = widx, .len = (uint32_t)chunk,
					       .kind = RV_OP_READ,  .refs = 1, .dst = dst };
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

	if (!room(c, &sqe, 1))
		return false;
	h = rkey_at(w->k, w->raddr, &off, &seg_room);  /* 8 aligned bytes: one page */
	slot = take_slot(c);
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
	    (st = peer_resolve(c, q, 10)) != IBV_WC_SUCCESS)
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
		if (!room(c, sqe, 2))
			return false;
		q->want = 0;
		q->rnr_count = 0;
		slot = take_slot(c);
		buf = c->arena + slot * c->slot_size;
		memset(&f, 0, sizeof(f));
		f.len = (uint32_t)pay;
		f.nslots = k;
		f.total = (uint32_t)w->len;
		f.imm = w->imm;
		f.src_qp = q->qp.qp_num;
		f.opcode = imm_write ? RV_FRAG_WRITE_IMM :
			   w->op == IBV_WR_SEND_WITH_IMM ? RV_FRAG_SEND_IMM : RV_FRAG_SEND;
		f.flags = (uint8_t)((w->frags ? 0 : RV_FRAG_FIRST) | (pay == left ? RV_FRAG_LAST : 0));
		memcpy(buf, &f, sizeof(f));
		gather(q, widx, w, w->sent, buf + RV_SLOT, pay);
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
static bool issue_wr(struct rv_ctx *c, struct rv_qp *q, uint32_t widx, struct rv_swr *w)
{
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

static void qp_issue(struct rv_ctx *c, struct rv_qp *q)
{
	if (q->destroying)
		return;
	while (q->issue != q->tail) {
		struct rv_swr *w = &q->swr[q->issue & q->mask];

		if (q->broken || q->qp.state == IBV_QPS_ERR) {
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
	backlog(c, q, q->issue != q->tail);
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
		put_slot(c, slot);
		return;
	}
	w = &q->swr[op->widx & q->mask];
	if (e->status) {
		wr_fail(q, w, op->kind == RV_OP_FRAG ? ring_status(e->status) : wc_status(e->status));
	} else if (op->kind == RV_OP_READ && op->dst) {   /* NULL: it landed in the MR */
		rv_dma_copy(op->dst, c->arena + slot * c->slot_size, op->len);
	} else if (op->kind == RV_OP_ATOMIC) {
		rv_dma_copy(op->dst, &e->result, 8);
	} else if (op->kind == RV_OP_FRAG && (ud & RV_UD_PUBLISH) && e->result) {
		wr_fail(q, w, IBV_WC_REM_OP_ERR);   /* the slot was not free: a broken ring */
	}
	if (op->kind == RV_OP_WRITE || op->kind == RV_OP_ATOMIC)
		q->data_inflight--;
	if (!--op->refs)
		put_slot(c, slot);
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
				qp_issue(c, q);
	roshm_submit(c->r);
}

/* ------------------------------------------------------------ post_send */

static int post_one(struct rv_ctx *c, struct rv_qp *q, struct ibv_send_wr *wr)
{
	uint32_t widx = q->tail;
	struct rv_swr *w;
	struct ibv_sge *sg;
	uint64_t len = 0;
	uint32_t access = 0;
	enum ibv_wc_opcode wop;
	bool rdma = false, atomic = false;

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
	default:
		return EOPNOTSUPP;
	}
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > q->sge_stride)
		return EINVAL;
	if (atomic && (wr->num_sge != 1 || wr->sg_list[0].length != 8))
		return EINVAL;
	if (wr->opcode == IBV_WR_RDMA_READ && wr->num_sge > 1)
		return EINVAL;    /* scatter of one READ: one SGE */
	for (int i = 0; i < wr->num_sge; i++)
		len += wr->sg_list[i].length;
	if (len > 1u << 30)
		return EINVAL;    /* max_msg_sz */
	if ((wr->send_flags & IBV_SEND_INLINE) && (atomic || wr->opcode == IBV_WR_RDMA_READ ||
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
		 wr->imm_data : 0;
	w->signaled = q->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
	w->status = IBV_WC_SUCCESS;
	q->tail++;
	if (q->broken || q->qp.state == IBV_QPS_ERR)
		return 0;         /* flushed in order by qp_issue */
	sg = &q->sge[(size_t)(widx & q->mask) * q->sge_stride];
	if (wr->send_flags & IBV_SEND_INLINE) {
		/* the application may reuse its buffer as soon as we return */
		uint8_t *d = q->inl + (size_t)(widx & q->mask) * RV_MAX_INLINE;

		w->inl = d;
		for (int i = 0; i < wr->num_sge; i++) {
			memcpy(d, (const void *)(uintptr_t)wr->sg_list[i].addr, wr->sg_list[i].length);
			d += wr->sg_list[i].length;
		}
	} else {
		for (int i = 0; i < wr->num_sge; i++) {
			sg[i] = wr->sg_list[i];
			if (sg[i].length && !rv_local_ok(c, &sg[i]))
				w->status = IBV_WC_LOC_PROT_ERR;
		}
		w->nsge = (uint16_t)wr->num_sge;
		if (w->status != IBV_WC_SUCCESS)
			return 0;
	}
	if (rdma || atomic) {
		uint64_t raddr = atomic ? wr->wr.atomic.remote_addr : wr->wr.rdma.remote_addr;
		uint32_t rkey = atomic ? wr->wr.atomic.rkey : wr->wr.rdma.rkey;
		uint64_t rlen = w->len;
		struct rv_rkey *k = resolve(c, rkey);

		if (!k || !(k->m.access & access) || raddr < k->m.addr || rlen > k->m.length ||
		    raddr - k->m.addr > k->m.length - rlen || (atomic && (raddr & 7))) {
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

	rv_lock(c);
	if (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_ERR) {
		*bad = wr;
		rv_unlock(c);
		return EINVAL;
	}
	for (; wr; wr = wr->next) {
		ret = post_one(c, q, wr);
		if (ret) {
			*bad = wr;
			break;
		}
	}
	qp_issue(c, q);
	roshm_submit(c->r);   /* one doorbell for the chain */
	rv_unlock(c);
	return ret;
}

/* ------------------------------------------------------------------ QPs */

static uint32_t pow2(uint32_t v)
{
	uint32_t n = 1;

	while (n < v)
		n <<= 1;
	return n;
}

static void qp_free(struct rv_qp *q)
{
	free(q->swr);
	free(q->sge);
	free(q->inl);
	free(q->rwr);
	free(q->rsge);
	free(q);
}

RV_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
	struct rv_ctx *c = to_ctx(pd->context);
	struct rv_qp *q;
	uint32_t n, rn;
	int ret;

	if (a->qp_type != IBV_QPT_RC || a->srq) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!a->send_cq || !a->recv_cq || a->cap.max_send_wr > RV_MAX_WR ||
	    a->cap.max_recv_wr > RV_MAX_WR || a->cap.max_send_sge > RV_MAX_SGE ||
	    a->cap.max_recv_sge > RV_MAX_SGE || a->cap.max_inline_data > RV_MAX_INLINE) {
		errno = EINVAL;
		return NULL;
	}
	n = pow2(a->cap.max_send_wr ? a->cap.max_send_wr : 1);
	rn = pow2(a->cap.max_recv_wr ? a->cap.max_recv_wr : 1);
	q = calloc(1, sizeof(*q));
	if (!q) {
		errno = ENOMEM;
		return NULL;
	}
	q->sge_stride = a->cap.max_send_sge ? a->cap.max_send_sge : 1;
	q->rsge_stride = a->cap.max_recv_sge ? a->cap.max_recv_sge : 1;
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
	q->cap.max_inline_data = RV_MAX_INLINE;
	a->cap = q->cap;
	q->qp.context = pd->context;
	q->qp.qp_context = a->qp_context;
	q->qp.pd = pd;
	q->qp.send_cq = a->send_cq;
	q->qp.recv_cq = a->recv_cq;
	q->qp.state = IBV_QPS_RESET;
	q->qp.qp_type = IBV_QPT_RC;
	pthread_mutex_init(&q->qp.mutex, NULL);
	pthread_cond_init(&q->qp.cond, NULL);
	rv_lock(c);
	ret = rv_ring_create(c, q, a->cap.max_recv_wr);   /* also draws the QPN */
	if (ret) {
		rv_unlock(c);
		qp_free(q);
		if (getenv("ROSHM_VERBS_DEBUG"))
			fprintf(stderr, "roshm-verbs: create_qp: %s\n", strerror(-ret));
		errno = ret == -EDQUOT || ret == -ENOSPC ? ENOMEM : -ret;
		return NULL;
	}
	q->next = c->qps;
	c->qps = q;
	rv_unlock(c);
	return &q->qp;
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
	for (uint32_t i = q->head; i != q->tail; i++)
		if (q->swr[i & q->mask].k)
			q->swr[i & q->mask].k->refs--;
	q->head = q->issue = q->tail = 0;
	q->data_inflight = 0;
	q->broken = false;
	q->rq_head = q->rq_tail = 0;
	q->in_msg = false;
	backlog(c, q, false);
	peer_drop(c, q);
	q->peer_status = IBV_WC_SUCCESS;
	return 0;
}

RV_EXPORT int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	struct rv_ctx *c = to_ctx(qp->context);
	struct rv_qp *q = (struct rv_qp *)qp;
	int ret = 0;

	rv_lock(c);
	if ((mask & IBV_QP_STATE) && a->qp_state > IBV_QPS_ERR) {
		ret = EINVAL;
		goto out;
	}
	if ((mask & IBV_QP_STATE) && a->qp_state == IBV_QPS_RESET && qp->state != IBV_QPS_RESET) {
		ret = qp_reset(c, q);
		if (ret)
			goto out;
	}
	if ((mask & IBV_QP_DEST_QPN) && a->dest_qp_num != q->dest_qp_num) {
		peer_drop(c, q);
		q->peer_status = IBV_WC_SUCCESS;
		q->dest_qp_num = a->dest_qp_num;
	}
	if (mask & IBV_QP_RQ_PSN)
		q->rq_psn = a->rq_psn;
	if (mask & IBV_QP_SQ_PSN)
		q->sq_psn = a->sq_psn;
	if (mask & IBV_QP_MIN_RNR_TIMER)
		rv_ring_set_rnr_timer(q, a->min_rnr_timer);
	if (mask & IBV_QP_RNR_RETRY)
		q->rnr_retry = a->rnr_retry & 7;
	if (mask & IBV_QP_STATE) {
		qp->state = a->qp_state;
		if (a->qp_state == IBV_QPS_ERR) {
			rv_qp_fail(q);
			qp_issue(c, q);
		}
	}
	/* Connected: find the peer's ring now (one try), not on the first SEND. */
	if ((mask & IBV_QP_STATE) && (a->qp_state == IBV_QPS_RTR || a->qp_state == IBV_QPS_RTS) &&
	    !q->peer_ok && q->peer_status == IBV_WC_SUCCESS && q->dest_qp_num)
		peer_resolve(c, q, 1);
	rv_deliver(c, q);
	rv_notify_recv(c, q);
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
	memset(a, 0, sizeof(*a));
	a->qp_state = qp->state;
	a->cur_qp_state = qp->state;
	a->path_mtu = IBV_MTU_4096;
	a->dest_qp_num = q->dest_qp_num;
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
		init->qp_type = IBV_QPT_RC;
		init->sq_sig_all = q->sq_sig_all;
	}
	rv_unlock(c);
	return 0;
}

RV_EXPORT int ibv_destroy_qp(struct ibv_qp *qp)
{
	struct rv_qp *q = (struct rv_qp *)qp, **pp;
	struct rv_ctx *c = to_ctx(qp->context);

	rv_lock(c);
	/* SQEs still in roshmd name this QP: let them drain first; what was
	 * not issued is dropped (no completions after destroy). */
	q->destroying = true;
	if (!qp_drain(c, q)) {
		q->destroying = false;
		rv_unlock(c);
		return EBUSY;
	}
	for (uint32_t i = q->head; i != q->tail; i++)
		if (q->swr[i & q->mask].k)
			q->swr[i & q->mask].k->refs--;
	backlog(c, q, false);
	for (pp = &c->qps; *pp && *pp != q; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = q->next;
	peer_drop(c, q);
	roshm_region_close(c->r, q->ring_handle);   /* peers' SENDs now fail (ESTALE) */
	rv_unlock(c);
	qp_free(q);
	return 0;
}

RV_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	(void)qp;
	return NULL;   /* QPs are not created with ibv_create_qp_ex: no new post API */
}
