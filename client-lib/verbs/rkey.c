// SPDX-License-Identifier: MIT
/*
 * libroshm-verbs: what a QP finds of its peers, by name, through roshmd:
 * remote MRs (rkeys: "ibv-mr-<rkey>" and its metadata page, cached) and the
 * inbound ring of the peer QP ("ibv-qp-<qpn>"), each read once with a
 * synchronous READ into private memory and checked before use.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rv.h"

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

/*
 * Open @part of "ibv-mr-<key>" into k->handles[]: its index, or -1.
 * An rkey a peer sent us may not be usable at once, where a NIC's is: the
 * owner's grant to us is published by its roshmd after the registration
 * or the connection (-EACCES meanwhile: a file registry's fsync on a loaded
 * node has taken over half a second), the record may not be active yet
 * (-EAGAIN), or the owner's node not reached yet (-EHOSTUNREACH). Those are
 * tried again for RV_RKEY_WAIT_NS; a name that does not exist (-ENOENT: a
 * guessed rkey, another tenant's) fails at once.
 */
static int rkey_open(struct rv_ctx *c, struct rv_rkey *k, uint32_t key,
		     const struct roshm_part *part, uint64_t *size)
{
	char name[ROSHM_NAME_MAX];
	uint64_t t0 = rv_now_ns(), until = t0 + RV_RKEY_WAIT_NS;
	unsigned bad = RV_RKEY_BAD;

	if (k->nh == RV_MR_SEGS + 1)
		return -1;
	/* one budget for all the lookups of a post (a chain of WRs to rkeys
	 * never granted to us waits once, not once per WR) */
	if (c->rkey_until && c->rkey_until < until)
		until = c->rkey_until;
	for (unsigned i = 0; i < RV_RKEY_BAD; i++)
		if (c->rkey_bad[i].key == key && c->rkey_bad[i].until) {
			bad = i;
			if (t0 < c->rkey_bad[i].until)
				until = t0;   /* waited for in vain lately: one try */
		}
	snprintf(name, sizeof(name), "ibv-mr-%08" PRIx32, key);
	for (;;) {
		int ret = roshm_region_open_part(c->r, name, part, &k->handles[k->nh], size);
		bool again = ret == -EACCES || ret == -EAGAIN || ret == -EHOSTUNREACH;
		uint64_t now = rv_now_ns();

		if (!ret) {
			if (bad < RV_RKEY_BAD)
				c->rkey_bad[bad].until = 0;   /* granted now */
			return (int)k->nh++;
		}
		if (!again || now >= until) {
			if (again) {   /* the next lookups of it try once, for a while */
				if (bad == RV_RKEY_BAD)
					bad = c->rkey_bad_next++ % RV_RKEY_BAD;
				c->rkey_bad[bad].key = key;
				c->rkey_bad[bad].until = now + RV_RKEY_WAIT_NS;
			}
			if (getenv("ROSHM_VERBS_DEBUG"))
				fprintf(stderr, "roshm-verbs: %s: %s (after %llu ms)\n", name,
					strerror(-ret), (unsigned long long)((now - t0) / 1000000));
			return -1;
		}
		usleep(until - now < 50000000ull ? (useconds_t)((until - now) / 1000) : 50000);
	}
}

/* Is the region behind k->handles[@i] the peer's (@owner), as roshmd says?
 * A hostile peer's MR metadata may name a region of ours, or of a third
 * process that granted its MRs to us: only the peer's own are taken. */
static bool rkey_owned_by(struct rv_ctx *c, const struct rv_rkey *k, uint32_t i, uint32_t rkey,
			  uint64_t owner)
{
	uint64_t o = 0;

	if (roshm_region_owner(c->r, k->handles[i], &o) || o != owner) {
		if (getenv("ROSHM_VERBS_DEBUG"))
			fprintf(stderr, "roshm-verbs: rkey %08x: a region of %s, not the peer QP's "
				"owner's\n", rkey, o ? "another client" : "an unknown owner");
		return false;
	}
	return true;
}

/*
 * The remote MR behind @rkey: open the metadata page of "ibv-mr-<rkey>"
 * (the part its owner granted us: READ), read it once into private memory
 * and check it (segments contiguous from the first page of [addr, addr +
 * length) to past its end, each inside the region that holds it, behind
 * that region's metadata page), and open, in the regions its segments
 * name, the parts that hold the MR's bytes with the MR's remote access
 * within @mask (IBV_ACCESS_REMOTE_*: what the peer QP's qp_access_flags
 * let through): what the owner granted, and all roshmd lets these handles
 * touch. Cached
 * while WRs use it; a failed lookup caches nothing.
 */
struct rv_rkey *rv_rkey_resolve(struct rv_ctx *c, uint32_t rkey, uint32_t mask, uint64_t owner)
{
	const struct roshm_part meta = { .off = 0, .len = RV_PAGE, .access = ROSHM_ACCESS_READ };
	struct rv_rkey *k = NULL;
	uint64_t size = 0;
	uint32_t access;
	int idx;

	if (!owner)
		return NULL;   /* the peer QP's owner is not known: nobody's MR */
	for (unsigned i = 0; i < RV_RKEY_CACHE; i++)
		if (c->rkeys[i].valid && !c->rkeys[i].stale && c->rkeys[i].rkey == rkey &&
		    c->rkeys[i].mask == mask)
			/* an MR of another client than the peer QP's: ours, or a
			 * third process's that granted it to us (a NIC's
			 * responder knows only its own MRs) */
			return c->rkeys[i].owner == owner ? &c->rkeys[i] : NULL;
	/* an rkey of one of our own MRs or windows (their names are ours in
	 * the tenant: no other process has one of that rkey) while the peer
	 * is another client: refused here, with no region opened and no round
	 * trip to roshmd for each such WR a lying peer asks of us */
	if (c->self_owner && owner != c->self_owner)
		for (const struct rv_mr *m = c->mrs; m; m = m->next)
			if (m->mr.rkey == rkey)
				return NULL;
	/* an empty entry first (a failed lookup leaves its entry empty: a run
	 * of them does not push out rkeys in use), else one no WR uses */
	for (unsigned i = 0; i < RV_RKEY_CACHE && !k; i++)
		if (!c->rkeys[i].valid)
			k = &c->rkeys[i];
	for (unsigned i = 0; i < RV_RKEY_CACHE && !k; i++) {
		struct rv_rkey *e = &c->rkeys[c->rkey_next++ % RV_RKEY_CACHE];

		if (!e->refs)
			k = e;
	}
	if (!k)
		return NULL;   /* 64 remote MRs in use by WRs in flight */
	if (k->valid)
		rkey_close(c, k);
	k->stale = false;
	if (rkey_open(c, k, rkey, &meta, &size) != 0)
		return NULL;
	if (!rkey_owned_by(c, k, 0, rkey, owner))
		goto err;
	if (rv_sync_read(c, k->handles[0], 0, sizeof(k->m), &k->m))
		goto err;
	if (rv_meta_check(&k->m, rkey))
		goto err;
	/* what the MR allows and the peer QP lets through (its
	 * qp_access_flags): what its owner granted us */
	access = rv_roshm_access(k->m.access & mask);
	if (!access)
		goto err;   /* no remote access at all */
	for (uint32_t i = 0; i < k->m.nseg; i++) {
		const struct rv_seg *g = &k->m.seg[i];
		struct roshm_part p = { .access = access };

		if (!rv_seg_part(k->m.addr, k->m.length, g, &p))
			goto err;
		idx = rkey_open(c, k, g->key, &p, &size);
		if (idx < 0 || !rkey_owned_by(c, k, (uint32_t)idx, rkey, owner))
			goto err;
		if (g->data_off > size || g->len > size - g->data_off)
			goto err;
		k->seg_h[i] = (uint8_t)idx;
	}
	k->rkey = rkey;
	k->mask = mask;
	k->owner = owner;
	k->refs = 0;
	k->valid = true;
	return k;
err:
	rkey_close(c, k);
	return NULL;
}

/* The MR or window of ours @rkey is gone: our own QPs look it up again
 * (where roshmd takes a grant back, it closes the peer's handles; an
 * owner's handles on its own regions it does not) (lock held). */
void rv_rkey_forget(struct rv_ctx *c, uint32_t rkey)
{
	for (unsigned i = 0; i < RV_RKEY_CACHE; i++)
		if (c->rkeys[i].valid && c->rkeys[i].rkey == rkey)
			c->rkeys[i].stale = true;
}

/* Our own client's identity as roshmd gives it (the owner of our QP's
 * ring): 0 when not known. */
static uint64_t rv_self_owner(struct rv_ctx *c, const struct rv_qp *q)
{
	uint64_t o = 0;

	if (!c->self_owner && q->ring && !roshm_region_owner(c->r, q->ring_handle, &o))
		c->self_owner = o;
	return c->self_owner;
}

/* Does @q's address vector name our own port: a GRH to our GID? One
 * without a GRH names no port here (roshm0 takes it for the sake of
 * applications written for InfiniBand, as qperf without -cm1, where a RoCE
 * NIC refuses it): a loopback needs our GID. */
static bool av_is_ours(const struct rv_ctx *c, const struct rv_qp *q)
{
	const struct ibv_ah_attr *ah = &q->set.ah_attr;
	union ibv_gid ours;

	return ah->is_global && !ibv_query_gid((struct ibv_context *)&c->vc.context, 1, 0, &ours) &&
	       !memcmp(ah->grh.dgid.raw, ours.raw, sizeof(ours.raw));
}

/*
 * Find the inbound ring of the peer QP (dest_qp_num) in our tenant and read
 * its header: IBV_WC_SUCCESS, or the status a WR to that QP gets. @tries
 * attempts 100 ms apart while the region is not found (a registry may lag)
 * or its header does not name our QP as its peer yet (its owner connects
 * it at its RTR, which may come after ours). A ring whose QP is connected
 * to another QP is not ours to use, as a NIC drops what a QP connected
 * elsewhere receives: a peer that gives another process's QPN as its own
 * does not get our QP to that process's ring, nor to its MRs.
 */
enum ibv_wc_status rv_peer_resolve(struct rv_ctx *c, struct rv_qp *q, int tries)
{
	char name[ROSHM_NAME_MAX];
	struct rv_ring_hdr h;
	uint64_t size = 0, owner = 0;
	uint32_t handle = 0;
	int ret = -ENOENT;

	snprintf(name, sizeof(name), "ibv-qp-%06" PRIx32, q->dest_qp_num & 0xffffff);
	/* -EACCES: its owner has not connected it to us (yet); -EXDEV: its
	 * header does not say so (yet) */
	for (int i = 0; i < tries && (ret == -ENOENT || ret == -EAGAIN || ret == -EACCES ||
				      ret == -EXDEV); i++) {
		if (i)
			usleep(100000);
		ret = roshm_region_open(c->r, name, &handle, &size);
		if (ret)
			continue;
		ret = rv_sync_read(c, handle, 0, sizeof(h), &h);
		if (ret) {
			if (getenv("ROSHM_VERBS_DEBUG"))
				fprintf(stderr, "roshm-verbs: qp %06x: reading the ring header of peer QP "
					"%06x: %s\n", q->qp.qp_num, q->dest_qp_num, strerror(-ret));
			roshm_region_close(c->r, handle);
			return rv_wc_status(ret);
		}
		if (h.magic == RV_RING_MAGIC && h.qpn == q->dest_qp_num &&
		    h.peer != (RV_RING_PEER | q->qp.qp_num)) {
			roshm_region_close(c->r, handle);
			ret = -EXDEV;
		}
	}
	if (ret) {  /* no such QP in our tenant, or not ours: as a NIC whose packets nobody answers */
		if (getenv("ROSHM_VERBS_DEBUG"))
			fprintf(stderr, "roshm-verbs: qp %06x: the ring of peer QP %06x: %s (%d tries)\n",
				q->qp.qp_num, q->dest_qp_num, ret == -EXDEV ?
				"connected to another QP than ours" : strerror(-ret), tries);
		return IBV_WC_RETRY_EXC_ERR;
	}
	if (h.magic != RV_RING_MAGIC || h.qpn != q->dest_qp_num ||
	    (h.nslots && (h.nslots & (h.nslots - 1) || h.nslots < 64 || h.nslots > (1u << 24) ||
			  RV_RING_SLOTS + (uint64_t)h.nslots * RV_SLOT > size))) {
		roshm_region_close(c->r, handle);
		return IBV_WC_REM_OP_ERR;
	}
	/* the process at the other end: our RDMA reaches its MRs only */
	if (roshm_region_owner(c->r, handle, &owner))
		owner = 0;
	if (owner && owner == rv_self_owner(c, q) && !av_is_ours(c, q)) {
		/* a QP of our own: a loopback, which a NIC makes only when the
		 * address vector names our own port (a peer that gives our own
		 * QPN as its own does not get our RDMA onto our own MRs) */
		if (getenv("ROSHM_VERBS_DEBUG"))
			fprintf(stderr, "roshm-verbs: qp %06x: peer QP %06x is ours, but the address "
				"vector names another port\n", q->qp.qp_num, q->dest_qp_num);
		roshm_region_close(c->r, handle);
		return IBV_WC_RETRY_EXC_ERR;
	}
	q->peer_owner = owner;
	/* what it lets our RDMA and atomics do (its owner's word: roshmd
	 * holds it to its grants whatever it says) */
	q->peer_acc = h.qp_access & RV_QPACC_KNOWN ? h.qp_access & RV_REMOTE_ACCESS : RV_REMOTE_ACCESS;
	q->peer_acc_known = true;
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
	q->full = (struct rv_full){ 0 };
	return IBV_WC_SUCCESS;
}

static void peer_ring_name(const struct rv_qp *q, char *name, size_t cap)
{
	snprintf(name, cap, "ibv-qp-%06" PRIx32, q->dest_qp_num & 0xffffff);
}

/*
 * Let the owner of @q's peer ring, the process (roshm_region_grant_owner:
 * one grant in roshmd however many of its QPs connect to our PD), or not
 * (@add) reach @m: the metadata
 * page of its region (READ), and in each region that holds its pages (its
 * own, or an earlier MR's) the MR's bytes only, with the operations its
 * IBV_ACCESS_REMOTE_* flags and @q's qp_access_flags (@qp_acc) allow:
 * roshmd bounds every operation of the
 * peer by that, as a NIC bounds an rkey by its MR. An MR of another PD
 * than @q's is not granted. A grant that fails leaves the peer's WRs to
 * that MR with IBV_WC_REM_ACCESS_ERR, as a NIC whose MR is not the QP's
 * PD's.
 */
static int grant_mr_any(struct rv_ctx *c, struct rv_qp *q, struct rv_mr *m, const char *name,
			bool add, uint32_t qp_acc)
{
	int (*fn)(struct roshm *, uint32_t, const char *, const struct roshm_part *) =
		add ? roshm_region_grant_owner : roshm_region_revoke_part;
	const struct roshm_part meta = { .off = 0, .len = RV_PAGE, .access = ROSHM_ACCESS_READ };
	/* what the MR allows and the QP lets through (its qp_access_flags,
	 * as a NIC's responder checks both) */
	uint32_t access = rv_roshm_access((uint32_t)m->mr_access & qp_acc);
	int ret, first = 0;

	if ((add && m->dead) || (m->win_qp && m->win_qp != q))
		return 0;   /* a type 2 window: only through the QP it was bound on */
	ret = fn(c->r, m->handle, name, &meta);
	first = ret == -EAGAIN ? 0 : ret;   /* -EAGAIN: made, its record written later */
	for (uint32_t i = 0; access && i < m->nseg; i++) {
		struct roshm_part p = { .access = access };

		if (rv_seg_part((uintptr_t)m->mr.addr, m->mr.length, &m->seg[i], &p)) {
			ret = fn(c->r, m->seg_handle[i], name, &p);
			if (!first && ret != -EAGAIN)
				first = ret;
		}
	}
	return first;
}

/* ... when it is of a PD @q's peer may reach (its own; an XRC_RECV QP's:
 * those of its domain's SRQs, xrc.c) */
static int grant_mr(struct rv_ctx *c, struct rv_qp *q, struct rv_mr *m, const char *name,
		    bool add, uint32_t qp_acc)
{
	return rv_xrc_has_pd(q, m->mr.pd) ? grant_mr_any(c, q, m, name, add, qp_acc) : 0;
}

/*
 * An XRC SRQ on @pd was made in domain @x (@add) or destroyed: the MRs of
 * @pd are granted to, or taken back from, the peers of the domain's
 * connected XRC_RECV QPs, unless another SRQ of the domain is on @pd (they
 * have them already, or keep them). A grant roshmd refuses leaves the
 * peer's WRs to that MR with IBV_WC_REM_ACCESS_ERR.
 */
void rv_grant_xrc_pd(struct rv_ctx *c, struct rv_xrcd *x, struct ibv_pd *pd, bool add)
{
	char name[ROSHM_NAME_MAX];
	uint32_t n = 0;

	for (const struct rv_srq *s = c->srqs; s; s = s->next)
		n += s->xrcd == x && s->srq.pd == pd;
	if (n != (add ? 1u : 0u))
		return;
	for (struct rv_qp *q = c->qps; q; q = q->next) {
		if (q->xrcd != x || !q->gr_ok)
			continue;
		peer_ring_name(q, name, sizeof(name));
		for (struct rv_mr *m = c->mrs; m; m = m->next)
			if (m->mr.pd == pd)
				grant_mr_any(c, q, m, name, add, q->gr_acc);
	}
}

/*
 * Connected (RTR): the owner of the peer QP's ring (the process that made
 * that QP) may now open our ring, to send to us, and our PD's MRs. Up to 4
 * tries 50 ms apart while that ring is not found (a registry may lag).
 * 0, also when there is no such QP in our tenant (nothing to grant to: its
 * WRs to us fail, as a NIC's from a QP that does not exist); or the error
 * of a grant roshmd refused (-ENOSPC: a region of ours holds
 * limits.max_grants grants), and then nothing is granted.
 */
int rv_grant_connect(struct rv_ctx *c, struct rv_qp *q)
{
	char name[ROSHM_NAME_MAX];
	int ret = -ENOENT;

	/* XRC_SEND: nothing on the other side initiates through it */
	if (q->gr_ok || !q->dest_qp_num || q->qp.qp_type == IBV_QPT_XRC_SEND)
		return 0;
	peer_ring_name(q, name, sizeof(name));
	for (int i = 0; i < 4 && ret == -ENOENT; i++) {
		if (i)
			usleep(50000);
		ret = roshm_region_grant_name(c->r, q->ring_handle, name);
	}
	if (ret == -ENOENT)
		return 0;
	q->gr_ok = true;
	q->gr_acc = q->acc;
	if (ret == -EAGAIN)
		ret = 0;
	for (struct rv_mr *m = c->mrs; m && !ret; m = m->next)
		ret = grant_mr(c, q, m, name, true, q->gr_acc);
	if (ret)
		rv_grant_drop(c, q);
	return ret;
}

/* Disconnected (reset, another dest_qp_num, the error state, destroyed):
 * take it back. */
void rv_grant_drop(struct rv_ctx *c, struct rv_qp *q)
{
	char name[ROSHM_NAME_MAX];

	/* the type 2 windows bound through it die with its connection */
	rv_mw_qp_gone(c, q);
	if (!q->gr_ok)
		return;
	peer_ring_name(q, name, sizeof(name));
	roshm_region_revoke_name(c->r, q->ring_handle, name);
	for (struct rv_mr *m = c->mrs; m; m = m->next)
		grant_mr(c, q, m, name, false, q->gr_acc);
	q->gr_ok = false;
}

/*
 * @q's qp_access_flags changed to @acc (IBV_ACCESS_REMOTE_*) while it is
 * connected: its peer gets our PD's MRs with those from now on. Granted
 * anew first, then the old grants taken back: roshmd closes the peer's
 * handles those let in, so after a narrowing its next WR to such an MR
 * fails once with IBV_WC_REM_ACCESS_ERR (docs/verbs-compat.md). 0, or the
 * first grant roshmd refused (-ENOSPC: limits.max_grants), and then the
 * new grants are taken back and the old ones stay.
 */
int rv_grant_access(struct rv_ctx *c, struct rv_qp *q, uint32_t acc)
{
	char name[ROSHM_NAME_MAX];
	uint32_t old = q->gr_acc;
	struct rv_mr *m, *failed = NULL;
	int ret = 0;

	if (!q->gr_ok || acc == old)
		return 0;
	peer_ring_name(q, name, sizeof(name));
	for (m = c->mrs; m; m = m->next) {
		ret = grant_mr(c, q, m, name, true, acc);
		if (ret) {
			failed = m;
			break;
		}
	}
	if (ret) {
		/* the new ones back, up to the one refused (a part refused is
		 * one this peer had from no other QP of ours: taking it back
		 * with the rest takes nobody else's) */
		for (m = c->mrs; m; m = m->next) {
			grant_mr(c, q, m, name, false, acc);
			if (m == failed)
				break;
		}
		return ret;
	}
	for (m = c->mrs; m; m = m->next)
		grant_mr(c, q, m, name, false, old);
	q->gr_acc = acc;
	return 0;
}

/* The peer QP's flags read again, at most every RV_PEER_ACC_NS (a WR they
 * refuse, on a UC QP say, does not cost a READ each). */
#define RV_PEER_ACC_NS 10000000ull

/*
 * What our RDMA and atomics through @q may do at its peer
 * (IBV_ACCESS_REMOTE_*): the peer QP's qp_access_flags, from its ring's
 * header. Looked up while not known, and read again when they leave @want
 * out (the peer may have set or widened them since: it may have been in
 * RESET when we connected). Never found: all, and the MR's own access
 * decides.
 */
uint32_t rv_peer_access(struct rv_ctx *c, struct rv_qp *q, uint32_t want)
{
	struct rv_ring_hdr h;
	uint64_t now;

	if (q->peer_acc_known && (q->peer_acc & want))
		return q->peer_acc;
	now = rv_now_ns();
	if (q->peer_acc_ns && now - q->peer_acc_ns < RV_PEER_ACC_NS)
		return q->peer_acc_known ? q->peer_acc : RV_REMOTE_ACCESS;
	q->peer_acc_ns = now;
	if (q->peer_ok) {
		if (!rv_sync_read(c, q->peer_handle, 0, sizeof(h), &h) && h.magic == RV_RING_MAGIC &&
		    (h.qp_access & RV_QPACC_KNOWN))
			q->peer_acc = h.qp_access & RV_REMOTE_ACCESS;
	} else if (q->dest_qp_num && q->peer_status == IBV_WC_SUCCESS &&
		   (!q->peer_acc_known || q->peer_acc_tries < 8)) {
		/* not found yet (a few tries), or found without a receive
		 * queue (then its header is read anew, a few times) */
		if (!q->peer_acc_known && q->peer_acc_tries >= 3)
			return RV_REMOTE_ACCESS;
		q->peer_acc_tries++;
		rv_peer_resolve(c, q, 1);
	}
	return q->peer_acc_known ? q->peer_acc : RV_REMOTE_ACCESS;
}

/*
 * A new MR (@add): grant it to the peers of its PD's connected QPs; or
 * deregistered: its peers lose it now (its region may live on for others),
 * every one of them, also past a revoke roshmd refused. 0, or (@add) the
 * first grant roshmd refused (-ENOSPC: limits.max_grants on a region the
 * MR's bytes lie in); the caller takes the rest back.
 */
int rv_grant_mr(struct rv_ctx *c, struct rv_mr *m, bool add)
{
	char name[ROSHM_NAME_MAX];
	int ret = 0;

	for (struct rv_qp *q = c->qps; q && !(add && ret); q = q->next)
		if (q->gr_ok) {
			peer_ring_name(q, name, sizeof(name));
			ret = grant_mr(c, q, m, name, add, q->gr_acc);
		}
	return add ? ret : 0;
}

void rv_peer_drop(struct rv_ctx *c, struct rv_qp *q)
{
	if (q->peer_ok)
		roshm_region_close(c->r, q->peer_handle);
	q->peer_ok = false;
	q->peer_acc_known = false;
	q->peer_acc_tries = 0;
	q->peer_acc_ns = 0;
	q->peer_owner = 0;
	q->peer_owner_tried = false;
	q->peer_owner_ns = 0;
}

/*
 * The owner of the peer QP's ring known? (The ring is opened at RTR; where
 * that failed, its owner's grant to us late as an rkey's may be, or its QP
 * not connected to ours yet, looked up here: tries 100 ms apart within the
 * post's rkey budget, RV_RKEY_WAIT_NS, the first time, then one try per
 * post, 100 ms apart at most.) An RDMA WRITE, READ or atomic goes to that
 * client's MRs only.
 */
bool rv_peer_owner(struct rv_ctx *c, struct rv_qp *q)
{
	uint64_t now;
	int tries = 1;

	/* (a ring open with no owner roshmd knew: nobody's MRs; not again) */
	if (q->peer_owner || !q->dest_qp_num || q->peer_ok)
		return q->peer_owner != 0;
	now = rv_now_ns();
	if (q->peer_owner_tried && now - q->peer_owner_ns < 100000000ull)
		return false;
	if (!q->peer_owner_tried && c->rkey_until > now)
		tries = (int)((c->rkey_until - now) / 100000000ull) + 1;
	q->peer_owner_tried = true;
	rv_peer_resolve(c, q, tries);
	q->peer_owner_ns = rv_now_ns();
	return q->peer_owner != 0;
}
