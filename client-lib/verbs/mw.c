// SPDX-License-Identifier: MIT
/*
 * libroshm-verbs: memory windows (ibv_alloc_mw, ibv_bind_mw for type 1,
 * IBV_WR_BIND_MW for type 2, IBV_WR_LOCAL_INV, and the invalidation a
 * received SEND_WITH_INV asks for). A window bound to [addr, addr + length)
 * of an MR is what a later MR over the same bytes is (mr.c): a region
 * "ibv-mr-<rkey>" of one metadata page whose segments name the regions that
 * hold the MR's pages, granted to the peers (rkey.c) with the window's
 * access. No page moves and no byte is copied. A type 2 window is granted
 * only through the QP it was bound on. Its invalidation is a
 * deregistration: the metadata cleared, the parts taken back from every
 * peer, the region closed. See docs/verbs-compat.md, "Memory windows".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <infiniband/verbs.h>

#include "rv.h"

#define MW_ACCESS (IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)

static bool mw_live(const struct rv_ctx *c, const struct ibv_mw *mw)
{
	for (const struct rv_mw *w = c->mws; w; w = w->next)
		if (&w->mw == mw)
			return true;
	return false;
}

static bool mr_live(const struct rv_ctx *c, const struct rv_mr *mr)
{
	for (const struct rv_mr *m = c->mrs; m; m = m->next)
		if (m == mr)
			return !m->dead && !m->win_of;
	return false;
}

/* A window's entry goes: its rkey dies now, for every peer (lock held). */
static void entry_drop(struct rv_ctx *c, struct rv_mr *m)
{
	struct rv_mr **pp;
	struct rv_meta *meta;

	rv_grant_mr(c, m, false);
	m->dead = true;
	meta = roshm_region_data(c->r, m->handle, NULL);
	if (meta)
		__atomic_store_n(&meta->magic, 0, __ATOMIC_RELEASE);
	for (pp = &c->mrs; *pp && *pp != m; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = m->next;
	roshm_region_close(c->r, m->handle);
	rv_rkey_forget(c, m->mr.rkey);
	m->win_of->nmw--;
	free(m);
}

/* Unbind @w (lock held). */
static void win_drop(struct rv_ctx *c, struct rv_mw *w)
{
	if (w->win)
		entry_drop(c, w->win);
	w->win = NULL;
}

static struct ibv_mw *alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct rv_ctx *c = to_ctx(pd->context);
	struct rv_mw *w;
	uint32_t key = 0;

	if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2) {
		errno = EINVAL;
		return NULL;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		errno = ENOMEM;
		return NULL;
	}
	/* a free window's rkey names nothing; a type 2 window's binds keep
	 * its upper 24 bits (ibv_inc_rkey) */
	if (getrandom(&key, sizeof(key), 0) != sizeof(key))
		key = (uint32_t)rv_now_ns();
	w->mw.context = pd->context;
	w->mw.pd = pd;
	w->mw.type = type;
	w->mw.rkey = key;
	w->mw.handle = key;
	rv_lock(c);
	w->next = c->mws;
	c->mws = w;
	rv_unlock(c);
	return &w->mw;
}

static int dealloc_mw(struct ibv_mw *mw)
{
	struct rv_ctx *c;
	struct rv_mw **pp, *w;

	if (!mw || !mw->context)
		return EINVAL;
	c = to_ctx(mw->context);
	rv_lock(c);
	for (pp = &c->mws; *pp && &(*pp)->mw != mw; pp = &(*pp)->next)
		;
	w = *pp;
	if (!w) {
		rv_unlock(c);
		return EINVAL;
	}
	win_drop(c, w);
	*pp = w->next;
	rv_unlock(c);
	free(w);
	return 0;
}

/*
 * Bind @mw to @bi's bytes of @bi->mr with rkey @rkey (type 2: the one the
 * WR names; type 1: 0, we choose), through @q (lock held). The checks a NIC
 * makes, else IBV_WC_MW_BIND_ERR and nothing changes: a window of the QP's
 * PD, an MR of that PD registered with IBV_ACCESS_MW_BIND, the bytes inside
 * it, remote access only (no zero-based windows: remote addresses are the
 * owner's virtual addresses), REMOTE_WRITE and REMOTE_ATOMIC only over an
 * MR with LOCAL_WRITE; a type 2 window must be free and keep its rkey's
 * upper 24 bits. A type 1 window is rebound in place (unbound with a
 * length of 0).
 */
enum ibv_wc_status rv_mw_bind(struct rv_ctx *c, struct rv_qp *q, struct ibv_mw *mw, uint32_t rkey,
			      const struct ibv_mw_bind_info *bi)
{
	struct rv_mw *w = (struct rv_mw *)mw;
	struct rv_mr *mr = bi ? (struct rv_mr *)bi->mr : NULL, *m;
	unsigned int acc = bi ? bi->mw_access_flags : 0;
	uintptr_t pstart, pend;
	struct rv_meta *meta;
	uint32_t handle = 0, key = rkey, n = 0;
	int ret;

	if (!mw || !mw_live(c, mw) || mw->pd != q->qp.pd)
		return IBV_WC_MW_BIND_ERR;
	if (mw->type == IBV_MW_TYPE_1 && (!bi || !bi->length)) {
		if (!mr && bi && bi->addr)
			return IBV_WC_MW_BIND_ERR;
		win_drop(c, w);   /* a length of 0: unbind */
		return IBV_WC_SUCCESS;
	}
	if (!mr || !mr_live(c, mr) || mr->mr.pd != q->qp.pd ||
	    !(mr->mr_access & IBV_ACCESS_MW_BIND) || !bi->length || (acc & ~MW_ACCESS) ||
	    ((acc & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	     !(mr->mr_access & IBV_ACCESS_LOCAL_WRITE)) ||
	    bi->addr < (uintptr_t)mr->mr.addr || bi->length > mr->mr.length ||
	    bi->addr - (uintptr_t)mr->mr.addr > mr->mr.length - bi->length)
		return IBV_WC_MW_BIND_ERR;
	if (mw->type == IBV_MW_TYPE_2 && (w->win || (rkey ^ mw->rkey) >> 8))
		return IBV_WC_MW_BIND_ERR;
	m = calloc(1, sizeof(*m));
	if (!m)
		return IBV_WC_MW_BIND_ERR;
	/* the MR's segments over the window's pages, in order */
	pstart = bi->addr & ~(uintptr_t)(RV_PAGE - 1);
	pend = (bi->addr + bi->length + RV_PAGE - 1) & ~(uintptr_t)(RV_PAGE - 1);
	for (uint32_t i = 0; i < mr->nseg; i++) {
		const struct rv_seg *g = &mr->seg[i];
		uintptr_t a = g->va > pstart ? g->va : pstart;
		uintptr_t b = g->va + g->len < pend ? g->va + g->len : pend;

		if (a >= b)
			continue;
		m->seg[n] = (struct rv_seg){ .va = a, .len = b - a, .key = g->key,
					     .data_off = g->data_off + (a - g->va) };
		m->seg_handle[n++] = mr->seg_handle[i];
	}
	if (mw->type == IBV_MW_TYPE_2) {
		char name[ROSHM_NAME_MAX];

		snprintf(name, sizeof(name), "ibv-mr-%08x", rkey);
		ret = rv_create(c, name, RV_PAGE,
				&(struct roshm_region_opts){ .policy = ROSHM_POLICY_GRANT }, &handle);
	} else {
		ret = rv_create_named(c, "ibv-mr-", 8, RV_PAGE,
				      &(struct roshm_region_opts){ .policy = ROSHM_POLICY_GRANT }, &key,
				      &handle);
	}
	meta = ret ? NULL : roshm_region_data(c->r, handle, NULL);
	if (!meta) {
		if (getenv("ROSHM_VERBS_DEBUG"))
			fprintf(stderr, "roshm-verbs: bind of window %08x (rkey %08x): %s\n", mw->rkey,
				rkey, ret ? strerror(-ret) : "no metadata page");
		if (!ret)
			roshm_region_close(c->r, handle);
		free(m);
		return IBV_WC_MW_BIND_ERR;
	}
	*meta = (struct rv_meta){ .magic = RV_META_MAGIC, .addr = bi->addr, .length = bi->length,
				  .access = acc, .rkey = key, .nseg = n,
				  .qpn = mw->type == IBV_MW_TYPE_2 ? q->dest_qp_num : 0 };
	memcpy(meta->seg, m->seg, n * sizeof(m->seg[0]));
	m->nseg = n;
	m->mr.context = mw->context;
	m->mr.pd = mw->pd;
	m->mr.addr = (void *)(uintptr_t)bi->addr;
	m->mr.length = bi->length;
	m->mr.handle = handle;
	m->mr.rkey = key;
	m->mr_access = (int)acc;
	m->handle = handle;
	m->refs = 1;
	m->win_of = mr;
	m->win_qp = mw->type == IBV_MW_TYPE_2 ? q : NULL;
	mr->nmw++;
	m->next = c->mrs;
	c->mrs = m;
	if (rv_grant_mr(c, m, true)) {
		/* a connected peer could not be let in (limits.max_grants):
		 * the new binding goes, the old one (type 1) stays */
		entry_drop(c, m);
		return IBV_WC_MW_BIND_ERR;
	}
	/* a type 1 window bound again: the old binding ends once the new
	 * one stands */
	win_drop(c, w);
	w->win = m;
	mw->rkey = key;
	return IBV_WC_SUCCESS;
}

/*
 * Invalidate the type 2 window of rkey @rkey bound through @q (IBV_WR_LOCAL_INV,
 * or a SEND_WITH_INV @q received). Anything else (no such window, a type 1
 * window, one bound through another QP) is IBV_WC_LOC_PROT_ERR, and nothing
 * changes (lock held).
 */
enum ibv_wc_status rv_mw_invalidate(struct rv_ctx *c, struct rv_qp *q, uint32_t rkey)
{
	for (struct rv_mw *w = c->mws; w; w = w->next)
		if (w->win && w->mw.type == IBV_MW_TYPE_2 && w->win->mr.rkey == rkey &&
		    w->win->win_qp == q) {
			win_drop(c, w);
			return IBV_WC_SUCCESS;
		}
	return IBV_WC_LOC_PROT_ERR;
}

/* ibv_bind_mw (type 1; verbs.h checked the type and the PD): a WR on @qp. */
static int bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *b)
{
	struct ibv_send_wr wr = { .wr_id = b->wr_id, .opcode = IBV_WR_BIND_MW,
				  .send_flags = b->send_flags }, *bad;

	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = 0;
	wr.bind_mw.bind_info = b->bind_info;
	return rv_post_send(qp, &wr, &bad);
}

/* @q went to the error state in the data path: its type 2 windows' rkeys
 * stop resolving now (their metadata cleared, no call to roshmd); the
 * rest of their invalidation, grants and regions, comes with the QP's
 * grants at the application's next call (rv_progress) (lock held). */
void rv_mw_qp_failed(struct rv_ctx *c, struct rv_qp *q)
{
	for (struct rv_mw *w = c->mws; w; w = w->next)
		if (w->win && w->win->win_qp == q) {
			struct rv_meta *meta = roshm_region_data(c->r, w->win->handle, NULL);

			if (meta)
				__atomic_store_n(&meta->magic, 0, __ATOMIC_RELEASE);
			rv_rkey_forget(c, w->win->mr.rkey);
		}
}

/* A QP that loses its connection (reset, another peer, the error state,
 * destroyed): the type 2 windows bound through it could be reached through
 * that connection only, so they are invalidated (their rkeys die). */
void rv_mw_qp_gone(struct rv_ctx *c, struct rv_qp *q)
{
	for (struct rv_mw *w = c->mws; w; w = w->next)
		if (w->win && w->win->win_qp == q)
			win_drop(c, w);
}

void rv_mw_ops(struct rv_ctx *c)
{
	c->vc.context.ops.alloc_mw = alloc_mw;
	c->vc.context.ops.dealloc_mw = dealloc_mw;
	c->vc.context.ops.bind_mw = bind_mw;
}

/* ibv_close_device: roshm_close closed their regions already. */
void rv_mw_free_all(struct rv_ctx *c)
{
	while (c->mws) {
		struct rv_mw *w = c->mws;

		c->mws = w->next;
		free(w);
	}
}
