// SPDX-License-Identifier: MIT
/*
 * libroshm-verbs: UD QPs and address handles.
 *
 * A UD QP owns an inbound ring like any QP ("ibv-qp-<qpn>"), but with fixed
 * MTU-sized slots that any QP of the tenant may claim (layout in rv.h): a
 * datagram is a CAS that claims a free slot, then a WRITE of header and
 * payload and a CAS that marks the slot full, back to back on the same
 * region (roshmd executes them in order, as a fragment's WRITE and tag).
 * The receiver takes full slots into its RECVs, first the 40 bytes a NIC's
 * GRH takes, and frees them. Nothing answers a UD sender: a datagram that
 * finds no such QP, a wrong Q_Key or no room is lost and its WR still
 * completes as sent, as on a NIC.
 *
 * Trust: the ring's states and slots are written by any sender of the tenant
 * (roshmd lets them WRITE and CAS there, nothing else: they cannot read
 * other senders' datagrams). The owner copies each header once, checks it
 * (the state's token, the length, the opcode, the Q_Key) and uses only the
 * copy; payload bytes go straight into the RECV's buffers, bounded by the
 * copied length. A slot that stays claimed (its sender died between claim
 * and publish) is freed after RV_UD_STUCK_NS; a sender never writes a slot
 * later than RV_UD_LATE_NS after its claim, so the slot is not written
 * under its next owner.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "rv.h"

/* The owner's side (the ring, delivery into RECVs) is in ud_ring.c. */

#define RV_UD_WAIT_NS (200ull * 1000000)        /* a datagram waits this long for a slot */
#define RV_UD_GIVEUP_NS (2000ull * 1000000)     /* ... or this long, with the ring not yet gone round */
#define RV_UD_MISS_NS (2000ull * 1000000)       /* a QPN that names no UD QP: looked up again after */
#define RV_UD_LOOK_NS (20ull * 1000000)         /* between the first lookups of a QPN */
#define RV_UD_LOOKS 3                           /* first lookups (a registry may lag a little) */
#define RV_UD_FAST_TRIES 4                      /* claims of the next slots, then waits */

enum { UD_NEW, UD_LOOK, UD_PRE, UD_CLAIM, UD_CLAIMING, UD_CLAIMED, UD_FAILED, UD_LOST,
       UD_GROUP /* to a group: its members first */, UD_NEXT /* to a group: its next member */ };

/* ------------------------------------------------------------ address handles */

struct rv_ah {
	struct ibv_ah ah;
	struct ibv_ah_attr attr;
};

RV_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct rv_ah *a;

	if (!pd || !attr || attr->port_num != 1 || (attr->is_global && attr->grh.sgid_index)) {
		errno = EINVAL;
		return NULL;
	}
	a = calloc(1, sizeof(*a));
	if (!a) {
		errno = ENOMEM;
		return NULL;
	}
	a->ah.context = pd->context;
	a->ah.pd = pd;
	a->attr = *attr;
	return &a->ah;
}

RV_EXPORT int ibv_destroy_ah(struct ibv_ah *ah)
{
	free(ah);
	return 0;
}

RV_EXPORT int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num, struct ibv_wc *wc,
				  struct ibv_grh *grh, struct ibv_ah_attr *ah_attr)
{
	(void)context;
	if (port_num != 1 || !wc || !ah_attr || ((wc->wc_flags & IBV_WC_GRH) && !grh)) {
		errno = EINVAL;   /* 0, or -1 with errno, as libibverbs */
		return -1;
	}
	memset(ah_attr, 0, sizeof(*ah_attr));
	ah_attr->dlid = wc->slid;
	ah_attr->sl = wc->sl;
	ah_attr->src_path_bits = wc->dlid_path_bits;
	ah_attr->port_num = port_num;
	if (wc->wc_flags & IBV_WC_GRH) {
		ah_attr->is_global = 1;
		ah_attr->grh.dgid = grh->sgid;
		ah_attr->grh.sgid_index = 0;
		ah_attr->grh.hop_limit = 0xff;
		ah_attr->grh.traffic_class = (uint8_t)((be32toh(grh->version_tclass_flow) >> 20) & 0xff);
	}
	return 0;
}

RV_EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc,
					       struct ibv_grh *grh, uint8_t port)
{
	struct ibv_ah_attr a;
	if (ibv_init_ah_from_wc(pd ? pd->context : NULL, port, wc, grh, &a))
		return NULL;
	return ibv_create_ah(pd, &a);
}

/* ------------------------------------------------------------ destinations */

static void udd_close(struct rv_ctx *c, struct rv_udd *d)
{
	if (d->open) {
		roshm_region_close(c->r, d->dhandle);
		roshm_region_close(c->r, d->handle);
	}
	memset(d, 0, sizeof(*d));
}

/*
 * One lookup of @d's QPN: its two regions, by name, through the registry;
 * never a sleep (the context's lock is held). A QPN looked up in vain is
 * tried RV_UD_LOOKS times RV_UD_LOOK_NS apart (the WRs for it wait), then
 * named nothing for RV_UD_MISS_NS (the WRs for it are lost), then tried
 * once more. Regions of other sizes than a UD QP's are no UD QP at all.
 */
static void udd_try(struct rv_ctx *c, struct rv_udd *d, uint64_t now)
{
	char name[ROSHM_NAME_MAX], dname[ROSHM_NAME_MAX];
	uint64_t size = 0, dsize = 0;
	uint32_t h = 0, dh = 0;
	int ret;

	snprintf(name, sizeof(name), "ibv-qp-%06" PRIx32, d->qpn);
	snprintf(dname, sizeof(dname), "ibv-qpd-%06" PRIx32, d->qpn);
	ret = roshm_region_open(c->r, name, &h, &size);
	if (!ret && (ret = roshm_region_open(c->r, dname, &dh, &dsize)))
		roshm_region_close(c->r, h);
	d->tries++;
	d->retry_ns = now + (d->tries < RV_UD_LOOKS ? RV_UD_LOOK_NS : RV_UD_MISS_NS);
	if (ret) {
		if (d->tries >= RV_UD_LOOKS && getenv("ROSHM_VERBS_DEBUG"))
			fprintf(stderr, "roshm-verbs: UD QPN %06x: %s: its datagrams are dropped\n",
				d->qpn, strerror(-ret));
		return;
	}
	for (uint32_t k = RV_UD_MIN_SLOTS; k <= RV_UD_MAX_SLOTS; k <<= 1)
		if (rv_ud_slots_size(k) == dsize && rv_ud_states_size(k) == size)
			d->n = k;
	if (!d->n) {   /* not a UD QP's: a datagram goes nowhere */
		roshm_region_close(c->r, dh);
		roshm_region_close(c->r, h);
		d->tries = RV_UD_LOOKS;
		d->retry_ns = now + RV_UD_MISS_NS;
		return;
	}
	d->handle = h;
	d->dhandle = dh;
	d->open = true;
	d->fails = 0;
	{
		uint32_t r = 0;

		if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
			r = (uint32_t)now;
		d->next = r & (d->n - 1);   /* senders spread over the ring */
		/* tests: the last slot first, so that a sender's next datagrams
		 * lie on both sides of where a fresh owner looks first */
		if (c->ud_first_last)
			d->next = d->n - 1;
	}
}

/* Is @d's lookup over (found, or given up for now)? Tries again when due. */
static bool udd_known(struct rv_ctx *c, struct rv_udd *d, uint64_t now)
{
	if (d->n)
		return true;
	if (now >= d->retry_ns) {
		if (d->tries >= RV_UD_LOOKS)
			d->tries = RV_UD_LOOKS - 1;   /* named nothing a while ago: one try */
		udd_try(c, d, now);
	}
	return d->n || d->tries >= RV_UD_LOOKS;
}

/* The cache entry of @qpn, a reference taken (its lookup may still be
 * under way: udd_known); -1 when every entry is in use (the WR waits). */
static int udd_get(struct rv_ctx *c, uint32_t qpn)
{
	struct rv_udd *d;
	int at = -1;

	for (int i = 0; i < RV_UDD; i++) {
		struct rv_udd *e = &c->udd[i];

		if (e->used && e->qpn == qpn && !e->stale) {
			e->refs++;
			return i;
		}
	}
	/* a free entry, else one nobody uses (round robin) */
	for (int i = 0; i < RV_UDD && at < 0; i++)
		if (!c->udd[i].used)
			at = i;
	for (uint32_t i = 0; i < RV_UDD && at < 0; i++) {
		uint32_t k = (c->udd_next + i) % RV_UDD;

		if (!c->udd[k].refs)
			at = (int)k;
	}
	if (at < 0)
		return -1;
	c->udd_next = ((uint32_t)at + 1) % RV_UDD;
	d = &c->udd[at];
	if (d->used)
		udd_close(c, d);
	d->used = true;
	d->qpn = qpn & 0xffffff;
	d->refs = 1;
	d->retry_ns = 0;   /* the first lookup at once */
	return at;
}

/* The WR lets go of its destination's entry. */
static void udd_release(struct rv_ctx *c, struct rv_swr *w)
{
	struct rv_udd *d;

	if (w->udd < 0)
		return;
	d = &c->udd[w->udd];
	w->udd = -1;
	if (d->refs)
		d->refs--;
	if (!d->refs && d->stale)
		udd_close(c, d);
}

/* The WR is over: its destination's entry and its group's go. */
void rv_ud_release(struct rv_ctx *c, struct rv_swr *w)
{
	udd_release(c, w);
	rv_mc_put(c, w->mcg);
	w->mcg = -1;
	w->mc_left = 0;
}

/* ------------------------------------------------------------ sending */

/* Checks of a UD send WR at the post (before it is queued). */
int rv_ud_post(struct rv_ctx *c, struct rv_qp *q, const struct ibv_send_wr *wr, uint64_t len)
{
	(void)q;
	if (wr->opcode != IBV_WR_SEND && wr->opcode != IBV_WR_SEND_WITH_IMM)
		return EINVAL;
	if (len > RV_UD_MTU || !wr->wr.ud.ah || wr->wr.ud.ah->context != &c->vc.context)
		return EINVAL;
	return 0;
}

void rv_ud_prep(struct rv_qp *q, struct rv_swr *w, const struct ibv_send_wr *wr)
{
	const struct rv_ah *a = (const struct rv_ah *)wr->wr.ud.ah;
	uint32_t own_qkey = q->qkey;

	w->udd = -1;
	w->mcg = -1;
	w->mc_left = 0;
	w->ud_phase = UD_NEW;
	w->ud_qpn = wr->wr.ud.remote_qpn & 0xffffff;
	/* to a group (QPN 0xFFFFFF, a multicast GID): its members, listed
	 * when it is issued (UD_GROUP), one after the other */
	w->ud_mc = w->ud_qpn == 0xffffff && a->attr.is_global && rv_gid_is_mc(&a->attr.grh.dgid);
	if (w->ud_mc) {
		w->mc_gid = a->attr.grh.dgid;
		w->ud_phase = UD_GROUP;
	}
	/* the posting order, per sending QP (the owner sorts by sender and
	 * this): a WR whose claim has to wait keeps its place */
	w->ud_seq = q->ud_seq++;
	/* a remote Q_Key with the high bit set means the QP's own (IB 10.2.5) */
	w->ud_qkey = (wr->wr.ud.remote_qkey & 0x80000000u) ? own_qkey : wr->wr.ud.remote_qkey;
}

/*
 * A UD WR leaves the in-order issue of its QP once its claim is out (it is
 * "parked"): the next WRs claim their slots meanwhile, and rv_ud_advance
 * takes each parked WR on as its claim completes. WRs still complete in
 * posting order (qp_retire).
 */
#define RV_UD_PIPE 32   /* parked WRs per QP */

static bool ud_park(struct rv_qp *q, struct rv_swr *w)
{
	if (!w->ud_bg) {
		w->ud_bg = true;
		q->ud_open++;
	}
	return true;
}

static bool ud_done(struct rv_qp *q, struct rv_swr *w)
{
	if (w->mc_left) {   /* to a group: this member's datagram is out, or lost */
		w->ud_phase = UD_NEXT;
		return true;
	}
	w->issued = true;
	if (w->ud_bg) {
		w->ud_bg = false;
		q->ud_open--;
	}
	return true;
}

/* Lost (no such QP, no room, too late): completes as sent, since nothing
 * answers a UD sender. */
static bool ud_lost(struct rv_qp *q, struct rv_swr *w, const char *why)
{
	if (getenv("ROSHM_VERBS_DEBUG"))
		fprintf(stderr, "roshm-verbs: a datagram to UD QPN %06x is lost: %s (%u failed claims)\n",
			w->ud_qpn, why, w->ud_tries);
	w->ud_phase = UD_LOST;
	return ud_done(q, w);
}

/* Its MR went while it waited (ibv_dereg_mr): it fails with LOC_PROT_ERR, as
 * a NIC's, and goes to no later member of its group. */
static bool ud_mr_gone(struct rv_qp *q, struct rv_swr *w)
{
	w->status = IBV_WC_LOC_PROT_ERR;
	w->mc_left = 0;
	return ud_lost(q, w, "its MR was deregistered");
}

/* Issue the claim of the destination's next slot; false without resources. */
static bool ud_claim(struct rv_ctx *c, struct rv_qp *q, uint32_t widx, struct rv_swr *w, uint64_t now)
{
	struct rv_udd *d = &c->udd[w->udd];
	struct roshm_sqe *sqe;
	uint32_t slot;

	if (!rv_room(c, &sqe, 1))
		return false;
	if (getrandom(&w->ud_token, sizeof(w->ud_token), GRND_NONBLOCK) != sizeof(w->ud_token))
		w->ud_token = now ^ ((uint64_t)widx << 40);
	w->ud_token &= (1ull << 62) - 1;
	w->ud_slot = d->next;
	d->claims++;   /* a claim ahead older than this one is out of order now */
	w->ud_at = now;   /* before the claim runs: the owner's 3 s count from after it */
	d->next = (d->next + 1) & (d->n - 1);
	slot = rv_take_slot(c);
	roshm_prep_cmp_swap(sqe, d->handle, RV_UD_STATES + (uint64_t)w->ud_slot * 8, 0,
			    (w->ud_token << 2) | RV_UD_CLAIMED);
	roshm_sqe_set_data(sqe, slot);
	c->ops[slot] = (struct rv_op){ .qp = q, .widx = widx, .len = 8, .kind = RV_OP_UD_CLAIM,
				       .refs = 1 };
	w->ud_phase = UD_CLAIMING;
	w->pending++;
	w->nsqe++;
	q->inflight++;
	return true;
}

/*
 * Claim the destination's next slot ahead, for its next datagram (one
 * round trip instead of two), on the SQE @sqe: issued right behind a
 * datagram to it. The reservation holds a reference on the entry while in
 * flight; one left unused for RV_UD_LATE_NS / 2 is given up (the owner
 * frees the slot after RV_UD_STUCK_NS).
 */
static void ud_preclaim(struct rv_ctx *c, struct rv_qp *q, int at, struct roshm_sqe *sqe)
{
	struct rv_udd *d = &c->udd[at];
	uint32_t slot = rv_take_slot(c);

	if (getrandom(&d->pre_token, sizeof(d->pre_token), GRND_NONBLOCK) != sizeof(d->pre_token))
		d->pre_token = rv_now_ns() ^ ((uint64_t)at << 48);
	d->pre_token &= (1ull << 62) - 1;
	d->pre_slot = d->next;
	d->pre_seq = ++d->claims;
	d->pre_at = rv_now_ns();
	d->next = (d->next + 1) & (d->n - 1);
	d->pre = RV_PRE_PENDING;
	d->refs++;
	roshm_prep_cmp_swap(sqe, d->handle, RV_UD_STATES + (uint64_t)d->pre_slot * 8, 0,
			    (d->pre_token << 2) | RV_UD_CLAIMED);
	roshm_sqe_set_data(sqe, slot);
	c->ops[slot] = (struct rv_op){ .qp = q, .widx = (uint32_t)at, .len = 8,
				       .kind = RV_OP_UD_PRECLAIM, .refs = 1 };
	q->inflight++;
}

/*
 * A claim ahead that will not be used (too old, or a later claim went to the
 * destination first) goes back at once (CAS to 0), rather than hold its slot
 * until the owner's sweep; without an SQE and an arena slot to spare, the
 * sweep frees it. The entry keeps a reference until the CAS comes back.
 */
static void ud_unclaim(struct rv_ctx *c, struct rv_qp *q, int at)
{
	struct rv_udd *d = &c->udd[at];
	struct roshm_sqe *sqe;
	uint32_t slot;

	if (!d->open || d->stale || !rv_room(c, &sqe, 1))
		return;
	slot = rv_take_slot(c);
	d->refs++;
	roshm_prep_cmp_swap(sqe, d->handle, RV_UD_STATES + (uint64_t)d->pre_slot * 8,
			    (d->pre_token << 2) | RV_UD_CLAIMED, 0);
	roshm_sqe_set_data(sqe, slot);
	c->ops[slot] = (struct rv_op){ .qp = q, .widx = (uint32_t)at, .len = 8,
				       .kind = RV_OP_UD_UNCLAIM, .refs = 1 };
	q->inflight++;
}

/* A claim came back: a lap of failed ones (d->fails >= d->n) with none
 * that worked means the ring is full. */
static void ud_count(struct rv_udd *d, bool worked)
{
	if (worked)
		d->fails = 0;
	else if (d->fails < UINT32_MAX)
		d->fails++;
}

/* A claim ahead, or its giving back, came back. */
void rv_ud_opcqe(struct rv_ctx *c, const struct rv_op *op, const struct roshm_cqe *e)
{
	struct rv_udd *d = &c->udd[op->widx];

	if (op->kind == RV_OP_UD_PRECLAIM) {
		d->pre = !e->status && !e->result ? RV_PRE_READY : RV_PRE_NONE;
		if (!e->status)
			ud_count(d, !e->result);
	}
	if (e->status && (e->status == -EBADF || e->status == -ESTALE || e->status == -ENOENT ||
			  e->status == -EACCES))
		d->stale = true;
	if (d->refs)
		d->refs--;
	if (!d->refs && d->stale)
		udd_close(c, d);
}

static bool ud_send(struct rv_ctx *c, struct rv_qp *q, uint32_t widx, struct rv_swr *w)
{
	struct rv_udd *d = &c->udd[w->udd];
	struct roshm_sqe *sqe[3];
	/* a claim ahead only for a QP with nothing else to send (a datagram at
	 * a time: what a ping-pong does); a stream claims as it goes */
	bool pre = d->pre == RV_PRE_NONE && !d->stale && q->tail - q->head == 1;
	union ibv_gid gid;
	struct rv_udh h;
	uint32_t slot;
	uint64_t off, state = w->ud_token << 2;
	uint8_t *buf;

	if (rv_now_ns() - w->ud_at > RV_UD_LATE_NS) {
		/* too late (1 s since the claim was issued, the owner frees a
		 * slot 3 s after it saw it claimed): the slot may be another's */
		return ud_lost(q, w, "1 s since its claim was issued");
	}
	if (!rv_sources_ok(c, q, widx, w)) /* since its claim: the claimed slot is
					    * freed by its owner, as a lost datagram's */
		return ud_mr_gone(q, w);
	/* the claim ahead only with an arena slot and an SQE to spare (rv_room
	 * takes all its SQEs or none) */
	if (pre && (c->nfree < 2 || !rv_room(c, sqe, 3)))
		pre = false;
	if (!pre && !rv_room(c, sqe, 2))
		return false;
	slot = rv_take_slot(c);
	buf = c->arena + slot * c->slot_size;
	memset(&h, 0, sizeof(h));
	h.token = w->ud_token;
	h.len = (uint32_t)w->len;
	h.qkey = w->ud_qkey;
	h.src_qp = q->qp.qp_num;
	h.imm = w->imm;
	h.opcode = w->op == IBV_WR_SEND_WITH_IMM ? RV_FRAG_SEND_IMM : RV_FRAG_SEND;
	h.seq = w->ud_seq;
	ibv_query_gid(&c->vc.context, 1, 0, &gid);
	memcpy(h.sgid, gid.raw, 16);
	if (w->mcg >= 0) {
		h.flags = RV_UDH_MC;
		memcpy(h.mgid, c->mcg[w->mcg].gid.raw, 16);
	}
	memcpy(buf, &h, sizeof(h));
	rv_gather(q, widx, w, 0, buf + RV_UD_HDR, w->len);
	off = (uint64_t)w->ud_slot * RV_UD_STRIDE;
	/* WRITE then CAS, both to the owner's node: executed in order */
	roshm_prep_write(sqe[0], d->dhandle, off, slot * c->slot_size, (uint32_t)(RV_UD_HDR + w->len));
	roshm_sqe_set_data(sqe[0], slot);
	roshm_prep_cmp_swap(sqe[1], d->handle, RV_UD_STATES + (uint64_t)w->ud_slot * 8,
			    state | RV_UD_CLAIMED, state | RV_UD_FULL);
	roshm_sqe_set_data(sqe[1], slot | RV_UD_PUBLISH);
	c->ops[slot] = (struct rv_op){ .qp = q, .widx = widx, .len = (uint32_t)(RV_UD_HDR + w->len),
				       .kind = RV_OP_UD_SEND, .refs = 2 };
	w->pending += 2;
	w->nsqe += 2;
	q->inflight += 2;
	if (pre)
		ud_preclaim(c, q, w->udd, sqe[2]);
	return ud_done(q, w);
}

/* Take the UD WR as far as it goes now. False: it holds its QP's issue
 * (no resources, or too many parked); true: it is out of the way (done, or
 * parked until its claim completes or its pause ends). */
static bool ud_issue(struct rv_ctx *c, struct rv_qp *q, uint32_t widx, struct rv_swr *w)
{
	for (;;) {
		switch (w->ud_phase) {
		case UD_GROUP: {
			/* the group's members as listed (mcast.c); without an
			 * entry free it waits, as for a destination's entry */
			const struct rv_mcg *g;
			int i = rv_mc_get(c, &w->mc_gid);

			if (i < 0)
				return false;
			w->mcg = (int8_t)i;
			g = &c->mcg[i];
			if (!g->n)
				return ud_lost(q, w, "a group with no member");
			w->ud_qpn = g->qpn[0];   /* then the others (rv_ud_issue) */
			w->mc_left = (uint8_t)(g->n - 1);
			w->mc_t0 = rv_now_ns();
			w->ud_phase = UD_NEW;
			break;
		}
		case UD_NEW: {
			int i;

			if (!rv_sources_ok(c, q, widx, w))   /* before it claims a slot */
				return ud_mr_gone(q, w);
			i = udd_get(c, w->ud_qpn);
			if (i < 0)
				return false;   /* every cached destination busy */
			w->udd = (int16_t)i;
			w->ud_phase = UD_LOOK;
			break;
		}
		case UD_LOOK: {
			struct rv_udd *d = &c->udd[w->udd];
			uint64_t now = rv_now_ns();

			if (!udd_known(c, d, now)) {   /* the next lookup later */
				if (w->ud_mc && now - w->mc_t0 > RV_UD_WAIT_NS)
					return ud_lost(q, w, "its group's time is up (not found yet)");
				q->want = 1;
				if (!q->rnr_next_ns || d->retry_ns < q->rnr_next_ns)
					q->rnr_next_ns = d->retry_ns;
				return ud_park(q, w);
			}
			if (!d->n)
				return ud_lost(q, w, "no UD QP there");
			w->ud_t0 = 0;   /* no claim failed yet */
			w->ud_tries = 0;
			w->ud_at = 0;
			w->ud_phase = UD_PRE;
			break;
		}
		case UD_PRE: {
			/* the slot claimed ahead for this destination, if fresh
			 * and no later claim went to it (the owner takes slots in
			 * ring order); one on its way is waited for, which is no
			 * slower than a claim of our own */
			struct rv_udd *d = &c->udd[w->udd];

			if (d->pre == RV_PRE_PENDING && d->pre_seq == d->claims && !w->ud_bg)
				return false;
			w->ud_phase = UD_CLAIM;
			if (d->pre == RV_PRE_READY) {
				d->pre = RV_PRE_NONE;
				if (d->pre_seq == d->claims && rv_now_ns() - d->pre_at < RV_UD_LATE_NS / 2) {
					w->ud_slot = d->pre_slot;
					w->ud_token = d->pre_token;
					w->ud_at = d->pre_at;
					w->ud_phase = UD_CLAIMED;
				} else {
					ud_unclaim(c, q, w->udd);
				}
			}
			break;
		}
		case UD_CLAIM: {
			struct rv_udd *d = &c->udd[w->udd];
			uint64_t now = rv_now_ns();

			if (w->ud_t0 && ((now - w->ud_t0 > RV_UD_WAIT_NS && d->fails >= d->n) ||
					 now - w->ud_t0 > RV_UD_GIVEUP_NS)) {
				/* no room for it: its claims failed for RV_UD_WAIT_NS
				 * (counted from the first failure, not from the post:
				 * a slow link or a wait for an SQE is no full ring)
				 * and the claims to this ring (any WR's) went round
				 * it without one that worked (claim round trips
				 * slower than the pauses do not make a ring full),
				 * or for RV_UD_GIVEUP_NS; the next ones to this QP
				 * get one claim for a while (the ring is full, as a
				 * NIC's RQ without RECVs: the others go on) */
				d->full_until = now + RV_UD_WAIT_NS;
				return ud_lost(q, w, d->fails >= d->n ? "no free slot in a lap of the ring"
								     : "no free slot in 2 s");
			}
			if (w->ud_at > now) {   /* pausing (the notifier's timer) */
				q->want = 1;
				if (!q->rnr_next_ns || w->ud_at < q->rnr_next_ns)
					q->rnr_next_ns = w->ud_at;
				return ud_park(q, w);
			}
			if (!w->ud_bg && q->ud_open >= RV_UD_PIPE)
				return false;
			if (!ud_claim(c, q, widx, w, now))
				return w->ud_bg;   /* no resources: a new WR holds the issue */
			return ud_park(q, w);
		}
		case UD_CLAIMING:
			return ud_park(q, w);
		case UD_CLAIMED:
			if (!ud_send(c, q, widx, w))
				return w->ud_bg;
			return true;
		case UD_FAILED: {
			/* the slot was taken: the next slots at once, then
			 * the ones after with pauses of 100 us up to 6.4 ms.
			 * Always on to the next slot, never back to one that
			 * failed: the owner frees slots sender by sender, not
			 * in ring order, and another sender's backlog must not
			 * hide the free slots after it. The pauses are shorter
			 * for a large ring, so that this QP's waiting WRs
			 * together take about RV_UD_WAIT_NS for a lap of
			 * the ring (a WR's claims still come no closer than
			 * its pause: on a small ring a held ring costs each
			 * waiting WR a claim per 6.4 ms at most). */
			struct rv_udd *d = &c->udd[w->udd];

			if (rv_now_ns() < d->full_until)
				return ud_lost(q, w, "its ring was full a moment ago");
			/* to a group: RV_UD_WAIT_NS for all its members together,
			 * then a member whose claim fails gets no other (members
			 * with rings held full, forged by a pod of the tenant,
			 * would hold the datagram RV_UD_WAIT_NS each) */
			if (w->ud_mc && rv_now_ns() - w->mc_t0 > RV_UD_WAIT_NS)
				return ud_lost(q, w, "its group's time is up (no free slot)");
			if (!w->ud_tries)
				w->ud_t0 = rv_now_ns();   /* the first failure */
			if (w->ud_tries < UINT8_MAX)
				w->ud_tries++;
			if (w->ud_tries > RV_UD_FAST_TRIES) {
				uint32_t k = w->ud_tries - RV_UD_FAST_TRIES;
				uint64_t pause = 50000ull << (k < 7 ? k : 7);
				uint64_t lap = RV_UD_WAIT_NS * (q->ud_open ? q->ud_open : 1) / d->n;

				if (pause > lap)
					pause = lap > 50000 ? lap : 50000;
				w->ud_at = rv_now_ns() + pause;
			}
			w->ud_phase = UD_CLAIM;
			break;
		}
		default:   /* UD_LOST */
			return ud_done(q, w);
		}
	}
}

bool rv_ud_issue(struct rv_ctx *c, struct rv_qp *q, uint32_t widx, struct rv_swr *w)
{
	for (;;) {
		bool ret = ud_issue(c, q, widx, w);

		if (w->ud_phase != UD_NEXT)
			return ret;
		/* to a group: its next member, at once (what the last one has in
		 * flight still completes against the WR) */
		const struct rv_mcg *g = &c->mcg[w->mcg];

		udd_release(c, w);
		w->ud_qpn = g->qpn[g->n - w->mc_left];
		w->mc_left--;
		w->ud_phase = UD_NEW;
	}
}

/* The parked WRs of @q, on from where they stand (every issue pass). A QP
 * in the error state flushes them (what they have in flight still comes
 * back before they complete). */
void rv_ud_advance(struct rv_ctx *c, struct rv_qp *q)
{
	q->want = 0;
	q->rnr_next_ns = 0;
	for (uint32_t i = q->head; i != q->issue && q->ud_open; i++) {
		struct rv_swr *w = &q->swr[i & q->mask];

		if (!w->ud_bg)
			continue;
		/* (by the state, not q->broken: a datagram parked ahead of one
		 * that failed goes out, as on a NIC; the queue is in error once
		 * the failed one is reported) */
		if (q->qp.state == IBV_QPS_ERR || q->qp.state == IBV_QPS_SQE) {
			if (w->status == IBV_WC_SUCCESS)
				w->status = IBV_WC_WR_FLUSH_ERR;
			w->mc_left = 0;   /* a group's other members too */
			ud_done(q, w);
			continue;
		}
		rv_ud_issue(c, q, i, w);
	}
}

/* A completion of a UD WR's claim or publication. */
void rv_ud_cqe(struct rv_ctx *c, struct rv_swr *w, const struct rv_op *op, const struct roshm_cqe *e,
	       bool publish)
{
	struct rv_udd *d = w->udd >= 0 ? &c->udd[w->udd] : NULL;

	if (e->status) {
		/* the ring is gone (its QP destroyed) or out of reach: this
		 * datagram is lost, and the next one looks the QPN up again */
		if (d && (op->kind == RV_OP_UD_CLAIM || !w->ud_mc) &&
		    (e->status == -EBADF || e->status == -ESTALE || e->status == -ENOENT ||
		     e->status == -EACCES))
			d->stale = true;   /* (a group's publication may be a member's before) */
		if (getenv("ROSHM_VERBS_DEBUG"))
			fprintf(stderr, "roshm-verbs: a datagram to UD QPN %06x: its %s failed: %s\n",
				w->ud_qpn, op->kind == RV_OP_UD_CLAIM ? "claim" : "publication",
				strerror(-e->status));
		if (op->kind == RV_OP_UD_CLAIM)
			w->ud_phase = UD_LOST;
		return;
	}
	if (op->kind == RV_OP_UD_CLAIM) {
		if (d)
			ud_count(d, !e->result);
		if (!e->result) {
			if (d)
				d->full_until = 0;
			w->ud_phase = UD_CLAIMED;   /* ud_at: when the claim was issued */
			w->ud_tries = 0;
		} else {
			w->ud_phase = UD_FAILED;
		}
	}
	(void)publish;   /* a publication that finds the slot freed: lost, not an error */
}
