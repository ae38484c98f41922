// SPDX-License-Identifier: MIT
/*
 * libroshm-verbs: a UD QP's inbound ring, the owner's side (the senders'
 * side, address handles and destinations are in ud.c, which says how a
 * datagram is claimed, written and published, and whom the owner trusts
 * for what). The owner copies each header once, checks it and uses only
 * the copy; a slot that stays claimed is freed after RV_UD_STUCK_NS.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rv.h"

#define RV_UD_SWEEP_NS (500ull * 1000000)       /* how often the owner looks for those */

/* ------------------------------------------------------------ the ring */

/* The UD QP's ring (and QPN): a slot per receive WR, 16 to 1024 of them
 * ($ROSHM_VERBS_RECV_RING bytes of slots instead, when set). The QPN is
 * drawn until both names are free. */
int rv_ud_ring_create(struct rv_ctx *c, struct rv_qp *q, uint32_t max_recv_wr)
{
	uint32_t n, qpn = 0, h = 0, dh = 0;
	uint64_t want = c->ring_bytes ? c->ring_bytes / RV_UD_STRIDE : max_recv_wr;
	int ret = -EEXIST;

	want = want < RV_UD_MIN_SLOTS ? RV_UD_MIN_SLOTS : want > RV_UD_MAX_SLOTS ? RV_UD_MAX_SLOTS : want;
	n = (uint32_t)rv_pow2((uint32_t)want);
	q->ud_seen = calloc(n, sizeof(*q->ud_seen));
	q->ud_ord = calloc(n, sizeof(*q->ud_ord));
	q->ud_tmp = calloc(n, sizeof(*q->ud_tmp));
	if (!q->ud_seen || !q->ud_ord || !q->ud_tmp)
		return -ENOMEM;   /* freed with the QP (qp_free) */
	for (int tries = 0; ret == -EEXIST && tries < 20; tries++) {
		char name[ROSHM_NAME_MAX];

		/* others CAS the state words, nothing else (not the header) */
		ret = rv_create_named(c, "ibv-qp-", 6, rv_ud_states_size(n),
				      &(struct roshm_region_opts){ .policy = ROSHM_POLICY_TENANT,
								   .access = ROSHM_ACCESS_ATOMIC,
								   .win_off = RV_UD_STATES,
								   .win_len = rv_ud_states_size(n) -
									      RV_UD_STATES },
				      &qpn, &h);
		if (ret)
			return ret;
		/* and only WRITE the slots: no READ, no atomic (its old value) */
		snprintf(name, sizeof(name), "ibv-qpd-%06" PRIx32, qpn);
		ret = rv_create(c, name, rv_ud_slots_size(n),
				&(struct roshm_region_opts){ .policy = ROSHM_POLICY_TENANT,
							     .access = ROSHM_ACCESS_WRITE },
				&dh);
		if (ret)
			roshm_region_close(c->r, h);
	}
	if (ret)
		return ret;
	q->ring = roshm_region_data(c->r, h, NULL);
	q->ud_data = roshm_region_data(c->r, dh, NULL);
	if (!q->ring || !q->ud_data) {
		roshm_region_close(c->r, dh);
		roshm_region_close(c->r, h);
		return -EIO;
	}
	q->ring->qpn = qpn;
	q->ring->nslots = n;
	__atomic_store_n(&q->ring->magic, RV_UD_MAGIC, __ATOMIC_RELEASE);
	q->ring_handle = h;
	q->ud_dhandle = dh;
	q->ring_n = n;
	q->ud_cur = 0;
	q->qp.qp_num = qpn;
	return 0;
}

void rv_ud_ring_close(struct rv_ctx *c, struct rv_qp *q)
{
	roshm_region_close(c->r, q->ud_dhandle);
}

static uint64_t *ud_states(const struct rv_qp *q)
{
	return (uint64_t *)(void *)((uint8_t *)q->ring + RV_UD_STATES);
}

static uint8_t *ud_slot(const struct rv_qp *q, uint32_t at)
{
	return q->ud_data + (uint64_t)at * RV_UD_STRIDE;
}

/*
 * Give slot @at back: its bytes are wiped first (a pod of the tenant learns
 * a FULL state's token by CAS, and could mark the slot FULL again after us
 * to have the same datagram delivered twice), then its state goes from @v
 * to 0. Release: the copy and the wipe happen before a sender claims it.
 */
static void ud_free(uint64_t *st, uint32_t at, uint64_t v, uint8_t *slot)
{
	/* the whole slot: a pod that knows the token can shrink the header's
	 * length after the honest sender wrote its payload, and what the
	 * length no longer covers would be delivered again under a header
	 * of its own (an adversarial review) */
	memset(slot, 0, RV_UD_STRIDE);
	__atomic_compare_exchange_n(&st[at], &v, 0, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

/* RESET: what the ring holds belongs to before; claimed slots stay theirs
 * until they are published or stuck. */
void rv_ud_discard(struct rv_qp *q)
{
	uint64_t *st = ud_states(q);

	for (uint32_t i = 0; i < q->ring_n; i++) {
		uint64_t v = __atomic_load_n(&st[i], __ATOMIC_ACQUIRE);

		if ((v & 3) == RV_UD_FULL)
			ud_free(st, i, v, ud_slot(q, i));
	}
	q->ud_pos = q->ud_m = 0;   /* the look's list is stale */
}

/* Free what stayed claimed (or holds junk) for RV_UD_STUCK_NS. */
static void ud_sweep(struct rv_qp *q, uint64_t now)
{
	uint64_t *st = ud_states(q);

	q->ud_sweep_ns = now;
	for (uint32_t i = 0; i < q->ring_n; i++) {
		uint64_t v = __atomic_load_n(&st[i], __ATOMIC_ACQUIRE);
		struct rv_udseen *s = &q->ud_seen[i];

		if (!v || (v & 3) == RV_UD_FULL) {
			s->v = 0;
		} else if (s->v != v) {
			s->v = v;
			s->since = now;
		} else if (now - s->since >= RV_UD_STUCK_NS) {
			ud_free(st, i, v, ud_slot(q, i));
			s->v = 0;
		}
	}
}

static void ud_complete(struct rv_qp *q, enum ibv_wc_status st, const struct rv_udh *h)
{
	struct rv_rwr *r = &q->rwr[q->rq_head & q->rq_mask];
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	wc.wr_id = r->wr_id;
	wc.status = st;
	wc.opcode = IBV_WC_RECV;
	wc.byte_len = h->len + RV_UD_GRH;
	wc.qp_num = q->qp.qp_num;
	wc.src_qp = h->src_qp & 0xffffff;
	wc.wc_flags = IBV_WC_GRH;
	if (h->opcode == RV_FRAG_SEND_IMM) {
		wc.imm_data = h->imm;
		wc.wc_flags |= IBV_WC_WITH_IMM;
	}
	q->rq_head++;
	rv_cq_push(q->qp.recv_cq, &wc);
}

/* A header the owner can use: its state's token, a length that fits a slot,
 * a SEND, our Q_Key. */
static bool ud_sound(const struct rv_qp *q, const struct rv_udh *h, uint64_t v)
{
	return h->token == v >> 2 && h->len <= RV_UD_MTU &&
	       (h->opcode == RV_FRAG_SEND || h->opcode == RV_FRAG_SEND_IMM) && h->qkey == q->qkey &&
	       (!(h->flags & RV_UDH_MC) || rv_mc_member(q, h->mgid));   /* a group's: still in it */
}

/* Which sender a header names (its QPN and GID), as a 32-bit FNV-1a hash:
 * only for the order of delivery, so a collision merely interleaves two
 * senders by their counts. */
static uint32_t ud_sender(const struct rv_udh *h)
{
	uint32_t x = 2166136261u;

	for (int i = 0; i < 4; i++)
		x = (x ^ ((h->src_qp >> (8 * i)) & 0xff)) * 16777619u;
	for (int i = 0; i < 16; i++)
		x = (x ^ h->sgid[i]) * 16777619u;
	return x;
}

static bool ud_before(const struct rv_udord *a, const struct rv_udord *b)
{
	return a->key != b->key ? a->key < b->key : (int32_t)(a->seq - b->seq) < 0;
}

/* Stable bottom-up merge sort of @a[0..m) by sender, then count; @t has m
 * entries of room. No allocation: both arrays are the QP's. */
static void ud_sort(struct rv_udord *a, struct rv_udord *t, uint32_t m)
{
	struct rv_udord *src = a, *dst = t;

	for (uint32_t w = 1; w < m; w *= 2) {
		for (uint32_t lo = 0; lo < m; lo += 2 * w) {
			uint32_t mid = lo + w < m ? lo + w : m, hi = lo + 2 * w < m ? lo + 2 * w : m;
			uint32_t i = lo, j = mid, k = lo;

			while (i < mid && j < hi)
				dst[k++] = ud_before(&src[j], &src[i]) ? src[j++] : src[i++];
			while (i < mid)
				dst[k++] = src[i++];
			while (j < hi)
				dst[k++] = src[j++];
		}
		struct rv_udord *x = src;

		src = dst;
		dst = x;
	}
	if (src != a)
		memcpy(a, src, (size_t)m * sizeof(*a));
}

/*
 * One look at the ring: its sound FULL slots from the cursor on, into
 * q->ud_ord in the order they go into RECVs (sender by sender, each in its
 * count's order; the sender of the first one first). Junk is freed.
 */
static void ud_look(struct rv_qp *q)
{
	uint32_t n = q->ring_n, at = q->ud_cur, m = 0, first = 0, key0 = 0;
	uint64_t *st = ud_states(q);
	struct rv_udord *x;

	for (uint32_t i = 0; i < n; i++, at = (at + 1) & (n - 1)) {
		/* Acquire pairs with the sender's publishing CAS, which
		 * roshmd executes after its WRITE. */
		uint64_t v = __atomic_load_n(&st[at], __ATOMIC_ACQUIRE);
		uint8_t *slot = ud_slot(q, at);
		struct rv_udh h;

		if ((v & 3) != RV_UD_FULL)
			continue;
		memcpy(&h, slot, sizeof(h));
		__asm__ volatile("" ::: "memory");   /* one fetch: only the copy is used */
		if (!ud_sound(q, &h, v)) {
			ud_free(st, at, v, slot);
			continue;   /* junk, or not for our Q_Key: dropped, as a NIC does */
		}
		q->ud_ord[m] = (struct rv_udord){ .v = v, .at = at, .seq = h.seq, .key = ud_sender(&h) };
		if (!m)
			key0 = q->ud_ord[0].key;
		m++;
	}
	ud_sort(q->ud_ord, q->ud_tmp, m);
	while (first < m && q->ud_ord[first].key != key0)
		first++;
	for (uint32_t k = 0; k < m; k++)
		q->ud_tmp[k] = q->ud_ord[(first + k) % m];
	x = q->ud_ord;
	q->ud_ord = q->ud_tmp;
	q->ud_tmp = x;
	q->ud_pos = 0;
	q->ud_m = m;
}

/*
 * Full slots into posted RECVs, as long as RECVs last, in the order of a
 * look (ud_look): a sender's next slots can lie on both sides of the
 * cursor (its first slot is a random one), and a NIC keeps one sender's
 * order. The look's list is used up before the next look (what came
 * since is later than all of it), so a call costs a scan of the ring only
 * when the list is empty. A slot without a sound header, or for another
 * Q_Key, is dropped. A too-short RECV completes with LOC_LEN_ERR and the QP
 * stays usable (one datagram is not a connection). On an SRQ a QP takes a
 * RECV for a sound datagram only, at most one per call, in its turn
 * (srq.c, as rv_deliver): true when it took one.
 */
bool rv_ud_deliver(struct rv_ctx *c, struct rv_qp *q)
{
	uint32_t n = q->ring_n;
	uint64_t *st = ud_states(q), now = rv_now_ns();
	bool took = false, waits = false;

	if (q->qp.state < IBV_QPS_RTR || q->qp.state == IBV_QPS_ERR)
		return false;
	if (now - q->ud_sweep_ns >= RV_UD_SWEEP_NS)
		ud_sweep(q, now);
	if (q->rq_head == q->rq_tail && !q->srq)
		return false;
	if (q->ud_pos >= q->ud_m)
		ud_look(q);
	while (q->ud_pos < q->ud_m && (q->rq_head != q->rq_tail || q->srq)) {
		const struct rv_udord *o = &q->ud_ord[q->ud_pos];
		uint8_t *slot = ud_slot(q, o->at);
		enum ibv_wc_status s = IBV_WC_SUCCESS;
		struct rv_rwr *r;
		struct rv_udh h;
		uint32_t ra;

		/* freed since the look, or a sender of the tenant wrote the slot
		 * again: a new copy, checked again, against the same state */
		if (__atomic_load_n(&st[o->at], __ATOMIC_ACQUIRE) != o->v) {
			q->ud_pos++;
			continue;
		}
		memcpy(&h, slot, sizeof(h));
		__asm__ volatile("" ::: "memory");   /* one fetch: only the copy is used */
		if (!ud_sound(q, &h, o->v)) {
			ud_free(st, o->at, o->v, slot);
			q->ud_pos++;
			continue;
		}
		/* a sound datagram: a QP on an SRQ takes a RECV for it now
		 * (the slot stays full, and next, until it has one) */
		if (!rv_srq_turn(q, &took, &waits)) {
			if (!waits)
				return true;
			break;
		}
		q->ud_pos++;
		q->ud_cur = (o->at + 1) & (n - 1);
		ra = q->rq_head & q->rq_mask;
		r = &q->rwr[ra];
		rv_rwr_recheck(c, q, ra);
		if (r->bad) {
			s = IBV_WC_LOC_PROT_ERR;
		} else if (r->len < (uint64_t)h.len + RV_UD_GRH) {
			s = IBV_WC_LOC_LEN_ERR;
		} else {
			struct ibv_grh g;

			memset(&g, 0, sizeof(g));
			g.version_tclass_flow = htobe32(6u << 28);
			g.paylen = htobe16((uint16_t)(h.len > 0xffff ? 0xffff : h.len));
			g.next_hdr = 0x1b;   /* as RoCE v2 carries BTH */
			g.hop_limit = 64;
			memcpy(g.sgid.raw, h.sgid, 16);
			if (h.flags & RV_UDH_MC)
				memcpy(g.dgid.raw, h.mgid, 16);
			else
				ibv_query_gid(&c->vc.context, 1, 0, &g.dgid);
			rv_scatter(q, ra, 0, (const uint8_t *)&g, RV_UD_GRH);
			rv_scatter(q, ra, RV_UD_GRH, slot + RV_UD_HDR, h.len);
		}
		ud_free(st, o->at, o->v, slot);
		ud_complete(q, s, &h);
	}
	/* no sound datagram waits for a RECV (the one that put it in line was
	 * spoiled by a pod of the tenant, or is for another Q_Key now): out of
	 * the SRQ's line, else it would hold every other QP's turn */
	if (q->srq && !waits)
		rv_srq_unwait(q);
	return took;
}
