// SPDX-License-Identifier: MIT
/*
 * Region grants (ROSHM_POLICY_GRANT): REGION_GRANT, by which a region's
 * owner lets the owner of another region of its tenant open it, or takes
 * that back; who a grant lets in (rd_client_granted, used by the open's
 * policy check in regions.c); and closing the handles a revoke no longer
 * lets in. A grant names a region by its grant id (rd_grant_id: node,
 * tenant, name and the region's secret grant_key).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/internal.h"
#include "poller/sqe.h"

#define RD_LOG_COMPONENT RD_LC_CONTROL

/*
 * ROSHM_POLICY_GRANT: which grant of @grants lets @c (of the region's
 * @tenant) open @want (data offsets [lo, hi), the operations in access):
 * one that names @c (its cgid: ROSHM_GRANT_ADD_OWNER) or a region @c owns
 * here on this node. What a grant names is that region's identity
 * (rd_grant_id: node, tenant, name and its secret key), so a region made
 * later under the same name does not pass.
 *
 * Which grants name a client is found once per client (the list's gids
 * sorted, a binary search for its cgid and each of its regions' gids), so
 * that a revoke checks each of its handles against those grants alone: a
 * revoke's work is, per client, its handle table once plus its handles on
 * the region times the grants that name it, not (as it was) its handles on
 * the region times its whole table times the list for each region it owns.
 * A gid names one client (its own, or that of the one region's owner), so
 * the grants that name the clients add up to the list at most: a revoke
 * compares at most limits.max_handles times the list, and reads each
 * client's table once.
 */
/* Of two grants that both cover a handle, the narrower: fewer bytes, then
 * fewer operations (its own MR is the one a narrowing revoke keeps); of
 * two as narrow, the first in the list. */
static const struct rd_grant *narrower(const struct rd_grant *best, const struct rd_grant *g)
{
	if (!best || g->hi - g->lo < best->hi - best->lo)
		return g;
	if (g->hi - g->lo == best->hi - best->lo &&
	    __builtin_popcount(g->access) < __builtin_popcount(best->access))
		return g;
	return best;
}

uint64_t rd_grant_checks;   /* internal.h */

/* A grant's gid and its place in its list. */
struct gid_at {
	uint64_t gid;
	uint32_t j;
};

/* A grant list's gids, sorted. */
struct grant_index {
	const struct rd_grant *grants;
	uint32_t n;
	struct gid_at by[ROSHM_GRANTS_MAX];
};

/* The grants of a list that name one client, in the list's order. */
struct grant_match {
	uint32_t n;
	uint16_t j[ROSHM_GRANTS_MAX];
	bool hit[ROSHM_GRANTS_MAX];
};

static int gid_cmp(const void *a, const void *b)
{
	uint64_t x = ((const struct gid_at *)a)->gid, y = ((const struct gid_at *)b)->gid;

	return (x > y) - (x < y);
}

static void grant_index_init(struct grant_index *ix, const struct rd_grant *grants, uint32_t n)
{
	ix->grants = grants;
	ix->n = n < ROSHM_GRANTS_MAX ? n : ROSHM_GRANTS_MAX;
	for (uint32_t j = 0; j < ix->n; j++) {
		ix->by[j].gid = grants[j].gid;
		ix->by[j].j = j;
	}
	qsort(ix->by, ix->n, sizeof(ix->by[0]), gid_cmp);
}

/* Mark the grants whose gid is @gid (0 names nothing). */
static void grant_match_gid(const struct grant_index *ix, struct grant_match *m, uint64_t gid)
{
	uint32_t lo = 0, hi = ix->n;

	if (!gid)
		return;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (ix->by[mid].gid < gid)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* none, or marked already (all of a gid's are, at once) */
	if (lo == ix->n || ix->by[lo].gid != gid || m->hit[ix->by[lo].j])
		return;
	for (; lo < ix->n && ix->by[lo].gid == gid; lo++)
		m->hit[ix->by[lo].j] = true;
}

/* The grants of @ix that name @c (of @tenant): its cgid, or a region it
 * owns here. */
static void grant_match_find(const struct grant_index *ix, const struct rd_client *c,
			     const char *tenant, struct grant_match *m)
{
	m->n = 0;
	if (!ix->n || strcmp(c->tenant, tenant))
		return;
	memset(m->hit, 0, ix->n * sizeof(m->hit[0]));
	grant_match_gid(ix, m, c->cgid);
	for (uint32_t i = 0; i < c->nhandles; i++) {
		const struct rd_region *rg = c->ctl_handles[i].region;

		if (rg && !rg->remote && rg->owner == c)
			grant_match_gid(ix, m, rg->gid);
	}
	for (uint32_t j = 0; j < ix->n; j++)
		if (m->hit[j])
			m->j[m->n++] = (uint16_t)j;
}

/* Of the grants @m found, the narrowest that covers @want, or NULL. */
static const struct rd_grant *grant_match_best(const struct grant_index *ix,
					       const struct grant_match *m,
					       const struct rd_handle *want)
{
	const struct rd_grant *best = NULL;

	rd_grant_checks += m->n;
	for (uint32_t k = 0; k < m->n; k++) {
		const struct rd_grant *g = &ix->grants[m->j[k]];

		if (g->lo <= want->lo && want->hi <= g->hi && !(want->access & ~g->access))
			best = narrower(best, g);
	}
	return best;
}

const struct rd_grant *rd_client_grant(const struct rd_client *c, const char *tenant,
				       const struct rd_grant *grants, uint32_t n,
				       const struct rd_handle *want)
{
	struct grant_index ix;
	struct grant_match m;

	if (!n || strcmp(c->tenant, tenant))
		return NULL;
	grant_index_init(&ix, grants, n);
	grant_match_find(&ix, c, tenant, &m);
	return grant_match_best(&ix, &m, want);
}

/* A remote region's handles take the region's own key (its new instance
 * has no grants to name, or another policy). */
void rd_control_handles_unkey(struct rd_control *ctl, struct rd_region *rg)
{
	for (struct rd_client *c = ctl->clients; c; c = c->next)
		for (uint32_t i = 0; i < c->nhandles; i++) {
			struct rd_handle *h = &c->ctl_handles[i];
			struct rd_cmd cmd = { .type = RD_CMD_HANDLE_SET, .client = c, .region = rg,
					      .handle = rd_handle_make(i, h->gen), .limits = h };

			if (h->region != rg || !h->nic_rkey)
				continue;
			h->nic_rkey = 0;
			rd_poller_cmd(ctl->poller, &cmd);
		}
}

/*
 * Grants taken back: close the handles of clients that @grants (the
 * region's list now) no longer lets in, as a NIC ends access with the QP.
 * Their next operation on the handle completes with -EBADF. The owner's
 * handle stays. A remote region's handle that is still let in takes the
 * NIC key of the grant that lets it in now (it may be another grant).
 */
void rd_control_grants_enforce(struct rd_control *ctl, struct rd_region *rg, const char *tenant,
			       const struct rd_grant *grants, uint32_t n)
{
	struct grant_index ix;
	struct grant_match m;

	grant_index_init(&ix, grants, n);
	rg->refs++; /* a release below may drop the last of the others */
	for (struct rd_client *c = ctl->clients; c; c = c->next) {
		bool found = false;   /* m: the grants that name c */

		for (uint32_t i = 0; i < c->nhandles; i++) {
			struct rd_handle *h = &c->ctl_handles[i];
			const struct rd_grant *g;

			if (h->region != rg || (!rg->remote && rg->owner == c))
				continue;
			/* what c owns does not change below: a release closes
			 * only handles on rg, which c does not own */
			if (!found) {
				grant_match_find(&ix, c, tenant, &m);
				found = true;
			}
			g = grant_match_best(&ix, &m, h);
			if (g && rg->remote && g->nic_rkey != h->nic_rkey) {
				struct rd_cmd cmd = { .type = RD_CMD_HANDLE_SET, .client = c,
						      .region = rg, .handle = rd_handle_make(i, h->gen),
						      .limits = h };

				h->nic_rkey = g->nic_rkey;
				rd_poller_cmd(ctl->poller, &cmd);
			}
			if (g)
				continue;
			RD_LOG(INFO, "region %s/%s: client %u is no longer granted it: handle closed",
			       rg->tenant, rg->name, c->id);
			rd_handle_release(ctl, c, rd_handle_make(i, h->gen), true);
		}
	}
	rd_control_region_put(ctl, rg);
}

/* Whether a grant of @rg lets the grantee of @g in to all @g did. */
static bool grant_covered(const struct rd_region *rg, const struct rd_grant *g)
{
	for (uint32_t j = 0; j < rg->ngrants; j++) {
		const struct rd_grant *o = &rg->grants[j];

		if (o->gid == g->gid && o->lo <= g->lo && g->hi <= o->hi && !(g->access & ~o->access))
			return true;
	}
	return false;
}

/*
 * A revoked grant's MR whose grantee another grant still lets in: kept
 * for twice the registry's revalidation and a second more, so that the
 * grantee's node reads the record (and moves the handles to the other
 * grant's key) before the NIC refuses this one. Released by
 * rd_grants_timer, or with its region.
 */
struct rd_grant_defer {
	struct rd_grant_defer *next;
	struct rd_region *rg;
	void *nic;
	struct rd_grant g;          /* the revoked grant */
	uint64_t at_ns;
};

static void grant_nic_defer(struct rd_control *ctl, struct rd_region *rg, void *nic,
			    const struct rd_grant *g)
{
	struct rd_grant_defer *d = malloc(sizeof(*d));

	if (!d) {   /* no memory to wait: at once */
		rd_peers_unreg_nic(ctl, rg, nic, g->hi - g->lo);
		return;
	}
	*d = (struct rd_grant_defer){ ctl->grant_defer, rg, nic, *g,
				      rd_mono_ns() + (2ull * ctl->cfg->revalidate_ms + 1000) *
						     1000000ull };
	ctl->grant_defer = d;
}

/*
 * Release the deferred MRs that are due (@rg NULL), or all of @rg's (it
 * is freed: @now 0), or those of @rg that its grants no longer cover (a
 * revoke of the grant that covered one: @now 1), at once.
 */
void rd_grants_defer_release(struct rd_control *ctl, const struct rd_region *rg, uint64_t now)
{
	for (struct rd_grant_defer **pp = &ctl->grant_defer; *pp;) {
		struct rd_grant_defer *d = *pp;

		if (rg ? d->rg != rg || (now == 1 && grant_covered(rg, &d->g)) : now < d->at_ns) {
			pp = &d->next;
			continue;
		}
		*pp = d->next;
		rd_peers_unreg_nic(ctl, d->rg, d->nic, d->g.hi - d->g.lo);
		free(d);
	}
}

static int grant_reply(int fd, int status, uint64_t gid)
{
	struct roshm_ctl_region_grant_reply rep;

	memset(&rep, 0, sizeof(rep));
	rd_reply_hdr(&rep.hdr, ROSHM_CTL_REGION_GRANT, sizeof(rep), status);
	rep.gid = gid;
	return rd_send_reply(fd, &rep, sizeof(rep), NULL, 0);
}

/* The registry's answer to a grant's record. */
static void grant_published(struct rd_control *ctl, struct rd_conn *conn, int status, uint64_t gid)
{
	struct rd_region *rg = conn->put_rg;   /* its owner's: alive while the request is */

	/* The change stands either way: the record is our desired state, and
	 * a write that failed is made again (rd_grants_timer). */
	conn->put_rg = NULL;
	if (rg)
		rg->rec_dirty = status != 0;
	if (grant_reply(conn->fd, status ? -EAGAIN : 0, gid))
		rd_conn_close(ctl, conn, "reply failed");
}

static void grant_ids_nodes(struct rd_control *ctl, const char *tenant, const uint64_t *ids,
			    uint64_t *nodes, uint32_t n);
static void node_grants_publish(struct rd_control *ctl, struct rd_region *rg,
				struct rd_node_grants *ng);

/*
 * A grant region with grants by id whose node no record named yet: look
 * again, 1 s after the grant, then twice as long each time up to a minute
 * (each look reads the tenant's records); what is found goes to the
 * poller's list at once.
 */
static void grants_resolve(struct rd_control *ctl, struct rd_region *rg, uint64_t now)
{
	uint64_t *ids = calloc(rg->ngrants + 1, sizeof(*ids));
	uint64_t *nodes = calloc(rg->ngrants + 1, sizeof(*nodes));
	struct rd_node_grants *ng = malloc(sizeof(*ng) + (rg->ngrants + 1) * sizeof(ng->e[0]));
	uint32_t found = 0, unknown = 0;

	if (ids && nodes && ng) {
		for (uint32_t i = 0; i < rg->ngrants; i++)
			if (!rg->grant_node[i])
				ids[i] = rg->grants[i].gid;
		grant_ids_nodes(ctl, rg->tenant, ids, nodes, rg->ngrants);
		for (uint32_t i = 0; i < rg->ngrants; i++) {
			if (rg->grant_node[i])
				continue;
			if (nodes[i]) {
				rg->grant_node[i] = nodes[i];
				found++;
				if (rd_peers_reg_grant(ctl, rg, i))
					rg->rec_dirty = true; /* its MR's key: written below */
			} else {
				unknown++;
			}
		}
		if (found) {
			node_grants_publish(ctl, rg, ng);
			ng = NULL;
		}
		rg->grants_unknown = unknown != 0;
	}
	free(ng);
	free(ids);
	free(nodes);
	rg->grants_resolve_ms = rg->grants_resolve_ms ? 2 * rg->grants_resolve_ms : 1000;
	if (rg->grants_resolve_ms > 60000)
		rg->grants_resolve_ms = 60000;
	rg->grants_resolve_ns = now + (uint64_t)rg->grants_resolve_ms * 1000000ull;
}

struct retry_ref {
	struct rd_control *ctl;
	uint32_t id;
	uint64_t epoch;
};

static void retry_done(void *arg, int status)
{
	struct retry_ref *w = arg;
	struct rd_region *rg = w->ctl->slots[w->id];

	if (status && rg && rg->epoch == w->epoch)
		rg->rec_dirty = true;   /* the next tick tries again */
	free(w);
}

/*
 * Every 100 ms at most: write again the records of our grant regions whose
 * last grant write failed (a file registry's directory another roshmd held
 * too long, a store that did not answer), so that a grant answered -EAGAIN
 * reaches the other nodes without another call.
 */
void rd_grants_timer(struct rd_control *ctl, uint64_t now)
{
	struct rd_region_rec rec;

	if (now - ctl->grants_retry_ns < 100000000ull)
		return;
	ctl->grants_retry_ns = now;
	if (ctl->grant_defer)
		rd_grants_defer_release(ctl, NULL, now);
	for (struct rd_region *rg = ctl->regions; rg; rg = rg->next) {
		struct retry_ref *w;

		if (!rg->remote && rg->owner && !rg->ctl_dead && rg->grants_unknown &&
		    now >= rg->grants_resolve_ns)
			grants_resolve(ctl, rg, now);

		if (rg->remote || !rg->rec_dirty || !rg->owner || rg->ctl_dead || rg->no_record)
			continue;
		w = malloc(sizeof(*w));
		if (!w)
			return;
		*w = (struct retry_ref){ ctl, rg->id, rg->epoch };
		rg->rec_dirty = false;
		rd_region_to_rec(ctl, rg, &rec, rg->ctl_draining ? RD_STATE_STALE : RD_STATE_ACTIVE);
		if (ctl->reg.ops->put_region(&ctl->reg, &rec, 0, retry_done, w)) {
			free(w);
			rg->rec_dirty = true;
		}
	}
}

/*
 * The grant id of the region published as @name in @c's tenant, or (@owner)
 * that of the client that owns it: a live region of ours, or another node's
 * record (its "ogid": that record's word, see docs/security.md on replays).
 * -ENOENT when there is none (yet: the caller may ask again).
 */
static int grant_resolve(struct rd_control *ctl, const struct rd_client *c, const char *name,
			 bool owner, uint64_t *id, uint64_t *node)
{
	struct rd_region_rec rec;
	struct rd_region *rg;

	rg = rd_region_find(ctl, c->tenant, name);
	if (rg) {   /* ours (its owner attached) */
		*id = owner ? rg->owner->cgid : rg->gid;
		*node = rd_node_hash(ctl->cfg->node);
		return 0;
	}
	if (ctl->reg.ops->get_region(&ctl->reg, c->tenant, name, &rec) ||
	    !strcmp(rec.node, ctl->cfg->node) || !rec.gid || (owner && !rec.ogid))
		return -ENOENT;   /* none, or left over from an earlier instance of ours */
	*id = owner ? rec.ogid : rec.gid;
	*node = rd_node_hash(rec.node);
	return 0;
}

struct id_find {
	const char *tenant;
	const uint64_t *ids;
	uint64_t *nodes;              /* per id: rd_node_hash of the first record that has it */
	uint32_t n;
};

static void id_find_cb(const struct rd_region_rec *rec, void *arg)
{
	struct id_find *f = arg;

	if (strcmp(rec->tenant, f->tenant))
		return;
	for (uint32_t i = 0; i < f->n; i++)
		if (!f->nodes[i] && f->ids[i] && (rec->gid == f->ids[i] || rec->ogid == f->ids[i]))
			f->nodes[i] = rd_node_hash(rec->node);
}

/*
 * Grants by id (ROSHM_GRANT_ADD_ID): the nodes @n ids live on, for the
 * owner's check (rd_node_granted): ours for a region or client of ours,
 * else that of the record of @tenant that names it (its region's or its
 * owner client's id), else 0 (unknown: any node passes that check). Fills
 * only the @nodes that are 0; one look at the tenant's records in all.
 */
static void grant_ids_nodes(struct rd_control *ctl, const char *tenant, const uint64_t *ids,
			    uint64_t *nodes, uint32_t n)
{
	struct id_find f = { tenant, ids, nodes, n };
	uint64_t self = rd_node_hash(ctl->cfg->node);
	uint32_t left = 0;

	for (uint32_t i = 0; i < n; i++) {
		if (nodes[i] || !ids[i])
			continue;
		for (struct rd_region *rg = ctl->regions; rg && !nodes[i]; rg = rg->next)
			if (!rg->remote && rg->gid == ids[i])
				nodes[i] = self;
		for (struct rd_client *o = ctl->clients; o && !nodes[i]; o = o->next)
			if (o->cgid == ids[i])
				nodes[i] = self;
		left += !nodes[i];
	}
	if (!left)
		return;
	if (ctl->reg.ops->list_prefix)
		ctl->reg.ops->list_prefix(&ctl->reg, tenant, "", UINT_MAX, id_find_cb, &f);
	else
		ctl->reg.ops->list_regions(&ctl->reg, id_find_cb, &f);
}

/*
 * The poller's copy of what @rg's grants let other nodes do (struct
 * rd_node_grants), from rg->grants and rg->grant_node as they are now; in
 * place before the caller answers, so that a revoke holds for the other
 * nodes' requests before its record reaches them. @ng: room for
 * rg->ngrants entries, taken (and the old list freed).
 */
static void node_grants_publish(struct rd_control *ctl, struct rd_region *rg,
				struct rd_node_grants *ng)
{
	uint64_t self = rd_node_hash(ctl->cfg->node);
	struct rd_cmd cmd = { .type = RD_CMD_NODE_GRANTS, .region = rg };

	ng->any = false;
	ng->n = 0;
	for (uint32_t i = 0; i < rg->ngrants; i++) {
		const struct rd_grant *g = &rg->grants[i];

		if (!rg->grant_node[i])
			ng->any = true;
		else if (rg->grant_node[i] != self)
			ng->e[ng->n++] = (struct rd_node_grant){ rg->grant_node[i], g->lo, g->hi,
								 g->access };
	}
	cmd.ngrants = ng;
	rd_poller_cmd(ctl->poller, &cmd);
	free(cmd.ngrants);   /* the old list: the poller let go of it */
}

/*
 * REGION_GRANT: the owner of a ROSHM_POLICY_GRANT region lets the owner of
 * another region of its tenant open it (or takes that back). The answer
 * waits for the record.
 */
int rd_msg_region_grant(struct rd_control *ctl, struct rd_conn *conn, const void *msg, int fd)
{
	const struct roshm_ctl_region_grant *req = msg;
	struct rd_client *c = conn->client;
	bool add = req->op != ROSHM_GRANT_REMOVE;
	struct rd_grant g = { 0 };
	struct rd_region_rec rec;
	struct rd_node_grants *ng;
	struct rd_region *rg;
	struct rd_handle *h;
	uint64_t id = 0, node = 0;
	uint32_t i;
	int ret;
	bool by_name = req->op == ROSHM_GRANT_ADD_NAME || req->op == ROSHM_GRANT_ADD_OWNER;

	(void)fd;
	if (!req->op || req->op > ROSHM_GRANT_ADD_OWNER || (req->access & ~ROSHM_ACCESS_ALL) ||
	    (!req->win_len && req->win_off) ||
	    (req->op == ROSHM_GRANT_ADD) != (req->peer != 0) ||
	    by_name != (req->name[0] != 0) ||
	    (req->op == ROSHM_GRANT_REMOVE || req->op == ROSHM_GRANT_ADD_ID) != (req->gid != 0) ||
	    (req->name[0] && (!memchr(req->name, 0, sizeof(req->name)) ||
			      !rd_valid_name(req->name))))
		return -EINVAL;
	h = rd_handle_lookup(c, req->handle);
	if (!h)
		return -EBADF;
	rg = h->region;
	if (rg->remote || rg->owner != c)
		return -EACCES;             /* only its owner grants */
	if (rg->policy != ROSHM_POLICY_GRANT)
		return -EINVAL;
	if (req->win_len && (req->win_off > rg->data_size ||
			     req->win_len > rg->data_size - req->win_off))
		return -EINVAL;
	/* one form for "all of it": the whole data area, every operation */
	g.lo = req->win_len ? req->win_off : 0;
	g.hi = req->win_len ? req->win_off + req->win_len : rg->data_size;
	g.access = req->access ? req->access : ROSHM_ACCESS_ALL;
	switch (req->op) {
	case ROSHM_GRANT_ADD: {
		struct rd_handle *p = rd_handle_lookup(c, req->peer);
		struct rd_region *pr;

		if (!p)
			return -EBADF;
		pr = p->region;
		if (strcmp(pr->tenant, c->tenant))
			return -EACCES;     /* grants stay within the tenant */
		if (pr->remote ? pr->ctl_dead : !pr->owner)
			return -ESTALE;
		id = pr->gid;
		node = rd_node_hash(pr->remote ? pr->node : ctl->cfg->node);
		break;
	}
	case ROSHM_GRANT_ADD_NAME:
	case ROSHM_GRANT_ADD_OWNER:
		ret = grant_resolve(ctl, c, req->name, req->op == ROSHM_GRANT_ADD_OWNER, &id, &node);
		if (ret)
			return ret;
		break;
	default: /* ADD_ID, REMOVE: the owner's word; it can only open its own region wider */
		id = req->gid;
		if (req->op == ROSHM_GRANT_ADD_ID)
			grant_ids_nodes(ctl, c->tenant, &id, &node, 1);
		break;
	}
	if (!id)
		return -ENOENT;
	g.gid = id;
	for (i = 0; i < rg->ngrants && !rd_grant_same(&rg->grants[i], &g); i++)
		;
	ng = malloc(sizeof(*ng) + (rg->ngrants + 1) * sizeof(ng->e[0]));
	if (!ng)
		return -ENOMEM;
	if (add && i < rg->ngrants && node && !rg->grant_node[i]) {
		/* made by id (after a restart), now by name or handle: the
		 * record stays, the owner's check learns the grantee's node */
		rg->grant_node[i] = node;
		node_grants_publish(ctl, rg, ng);
		ng = NULL;
		if (rd_peers_reg_grant(ctl, rg, i))
			rg->rec_dirty = true;   /* its MR's key, to the record (rd_grants_timer) */
	}
	if (add ? i < rg->ngrants : i == rg->ngrants) {
		free(ng);
		return grant_reply(conn->fd, 0, id) ? -ECONNRESET : 1; /* nothing changes */
	}
	if (add) {
		if (rg->ngrants >= ctl->cfg->max_grants) {
			RD_LOG(NOTICE, "region %s/%s: %u grants, no more (client %u; "
			       "limits.max_grants)", rg->tenant, rg->name, rg->ngrants, c->id);
			free(ng);
			return -ENOSPC;
		}
		if (rg->ngrants == rg->grants_cap) {
			uint32_t cap = rg->grants_cap ? 2 * rg->grants_cap : 8;
			struct rd_grant *n;
			uint64_t *nn;
			void **nk;

			if (cap > ctl->cfg->max_grants)
				cap = ctl->cfg->max_grants;
			n = realloc(rg->grants, cap * sizeof(*n));
			if (n)
				rg->grants = n;
			nn = n ? realloc(rg->grant_node, cap * sizeof(*nn)) : NULL;
			if (nn)
				rg->grant_node = nn;
			nk = nn ? realloc(rg->grant_nic, cap * sizeof(*nk)) : NULL;
			if (!nk) {
				free(ng);
				return -ENOMEM;
			}
			rg->grant_nic = nk;
			rg->grants_cap = cap;
		}
		rg->grant_node[rg->ngrants] = node;
		rg->grants[rg->ngrants] = g;
		rg->grant_nic[rg->ngrants] = NULL;
		/* its own MR (verbs), so that its revoke holds at the NIC */
		rd_peers_reg_grant(ctl, rg, rg->ngrants);
		rg->ngrants++;
		if (!node && !rg->grants_unknown) {   /* look again later (rd_grants_timer) */
			rg->grants_unknown = true;
			rg->grants_resolve_ms = 0;
			rg->grants_resolve_ns = rd_mono_ns() + 1000000000ull;
		}
		/* before the record: no other node reads a grant its owner refuses */
		node_grants_publish(ctl, rg, ng);
	} else {
		void *nic = rg->grant_nic[i];
		struct rd_grant gone = rg->grants[i];

		memmove(&rg->grants[i], &rg->grants[i + 1],
			(rg->ngrants - i - 1) * sizeof(rg->grants[0]));
		memmove(&rg->grant_node[i], &rg->grant_node[i + 1],
			(rg->ngrants - i - 1) * sizeof(rg->grant_node[0]));
		memmove(&rg->grant_nic[i], &rg->grant_nic[i + 1],
			(rg->ngrants - i - 1) * sizeof(rg->grant_nic[0]));
		rg->ngrants--;
		node_grants_publish(ctl, rg, ng);
		/* and at the NIC (verbs): the grantee's next WR with its rkey
		 * is refused there, whatever its node still believes; unless
		 * another grant to the same grantee still covers all it let
		 * in (a grant made wider or moved: add, then revoke), whose
		 * handles keep working until their node reads the record */
		if (nic && grant_covered(rg, &gone))
			grant_nic_defer(ctl, rg, nic, &gone);
		else
			rd_peers_unreg_nic(ctl, rg, nic, gone.hi - gone.lo);
		/* and the MRs kept for grants this one covered, at once */
		if (ctl->grant_defer)
			rd_grants_defer_release(ctl, rg, 1);
		rd_control_grants_enforce(ctl, rg, rg->tenant, rg->grants, rg->ngrants);
	}
	/* The record is written again whole: past the 1 every grant takes
	 * (rd_reg_rate_charge), 1 for each 64 grants it holds (about 4 KiB), so
	 * that the registry_ops_per_sec a tenant has bounds the bytes too. */
	rd_reg_rate_take(ctl, c->tidx, rg->ngrants / 64);
	rd_region_to_rec(ctl, rg, &rec, rg->ctl_draining ? RD_STATE_STALE : RD_STATE_ACTIVE);
	conn->put_rg = rg;
	ret = rd_conn_put_wait(ctl, conn, &rec, grant_published, id);
	if (ret) {
		conn->put_rg = NULL;
		rg->rec_dirty = true;
		RD_LOGC(RD_LC_REGISTRY, ERR, "registry: publishing %s/%s: %s", rg->tenant, rg->name,
			strerror(-ret));
		return grant_reply(conn->fd, -EAGAIN, id) ? -ECONNRESET : 1;
	}
	RD_LOG(DEBUG, "region %s/%s [%llu, %llu) access %u: %s %016llx", rg->tenant, rg->name,
	       (unsigned long long)g.lo, (unsigned long long)g.hi, g.access,
	       add ? "granted to" : "no longer granted to", (unsigned long long)id);
	return 1;
}
