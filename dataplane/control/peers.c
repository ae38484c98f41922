// SPDX-License-Identifier: MIT
/*
 * Peers, whatever their provider: outbound connections to peer nodes (one
 * per node, made on first use through the provider that the endpoint's
 * scheme names, retried while regions need them), remote regions and their
 * revalidation against the registry. What is particular to tcp or verbs
 * (listeners, handshakes, QPs) is behind the provider's control ops.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sys/epoll.h>

#include "control/control.h"

#define RD_LOG_COMPONENT RD_LC_CONTROL

/* Reconnects back off from RETRY_MIN_NS to RETRY_MAX_NS, doubling while
 * they fail; a connection that comes up starts the next loss at the minimum. */
#define RETRY_MIN_NS (50000000ull)
#define RETRY_MAX_NS (1000000000ull)
/* Resets (a peer refused one WR) re-dial at once up to this many a second. */
#define RESETS_PER_SEC 8

static void retry_later(struct rd_peer *p, uint64_t now)
{
	if (p->backoff_ns < RETRY_MIN_NS)
		p->backoff_ns = RETRY_MIN_NS;
	p->retry_ns = now + p->backoff_ns;
	p->backoff_ns = p->backoff_ns * 2 > RETRY_MAX_NS ? RETRY_MAX_NS : p->backoff_ns * 2;
}

/* The provider that reaches @endpoint, if this node runs it. */
static struct rd_provider *reachable(const struct rd_control *ctl, const char *endpoint)
{
	struct rd_provider *pv = rd_provider_by_endpoint(endpoint);

	return pv && pv == ctl->poller->net ? pv : NULL;
}

static struct rd_peer *peer_get(struct rd_control *ctl, const char *node, const char *endpoint);
static int peer_connect(struct rd_control *ctl, struct rd_peer *p);
static void revalidate(struct rd_control *ctl, struct rd_region *rg, uint64_t now);
static void pause_peer_regions(struct rd_control *ctl, struct rd_peer *p);

/* The grants of a record, as one number (a change of them, a change of it). */
static uint64_t grants_hash(const struct rd_region_rec *rec)
{
	uint64_t h = 1469598103934665603ull ^ rec->ngrants;

	for (uint32_t i = 0; i < rec->ngrants && i < ROSHM_GRANTS_MAX; i++) {
		const struct rd_grant *g = &rec->grants[i];

		h = (h ^ g->gid) * 1099511628211ull;
		h = (h ^ g->lo) * 1099511628211ull;
		h = (h ^ g->hi) * 1099511628211ull;
		h = (h ^ g->access) * 1099511628211ull;
		h = (h ^ g->nic_rkey) * 1099511628211ull;
	}
	return h;
}

/* Atomics of this node's pods and transaction engine on its own regions must
 * be serialized with the peers' NIC atomics: when the provider says so
 * (rd_local_provider.atomics), they go through a peer that is ourselves (a
 * loopback QP), re-made like any peer. */
static int atomics_loopback(struct rd_control *ctl)
{
	struct rd_peer *self;
	int ret;

	if (!rd_local_provider.atomics)
		return 0;
	self = peer_get(ctl, ctl->cfg->node, ctl->endpoint);
	if (!self)
		return -ENOMEM;
	self->self = true;
	self->refs = 1; /* keep it connected */
	ctl->self = self;
	/* Until the loopback is up, local atomics on our regions wait in their
	 * rings (-EBUSY from the provider). */
	ret = peer_connect(ctl, self);
	if (ret) {
		RD_LOGC(self->prov->log_comp, ERR, "%s: loopback to ourselves (for atomics on our "
			"regions): %s", self->prov->name, strerror(-ret));
		return ret;
	}
	return 0;
}

int rd_peers_init(struct rd_control *ctl)
{
	struct rd_provider *pv = ctl->poller->net;
	int ret;

	if (!pv)
		return 0;
	ret = pv->cp->init(ctl, pv, ctl->endpoint, sizeof(ctl->endpoint));
	if (ret)
		return ret;
	return atomics_loopback(ctl);
}

void rd_peers_epoll_event(struct rd_control *ctl, void *tag, uint32_t events)
{
	struct rd_provider *pv = ctl->poller->net;

	if (pv && pv->cp->epoll_event)
		pv->cp->epoll_event(ctl, tag, events);
}

int rd_peers_reg_client(struct rd_control *ctl, struct rd_client *c)
{
	struct rd_provider *pv = ctl->poller->net;

	return pv && pv->cp->reg_client ? pv->cp->reg_client(ctl, c) : 0;
}

void rd_peers_unreg_client(struct rd_control *ctl, struct rd_client *c)
{
	struct rd_provider *pv = ctl->poller->net;

	if (pv && pv->cp->unreg_client)
		pv->cp->unreg_client(ctl, c);
}

int rd_peers_reg_region(struct rd_control *ctl, struct rd_region *rg)
{
	struct rd_provider *pv = ctl->poller->net;

	return pv && pv->cp->reg_region ? pv->cp->reg_region(ctl, rg) : 0;
}

void rd_peers_unreg_region(struct rd_control *ctl, struct rd_region *rg)
{
	struct rd_provider *pv = ctl->poller->net;

	if (pv && pv->cp->unreg_region)
		pv->cp->unreg_region(ctl, rg);
}

/*
 * Grant @i of local region @rg gets an MR of its own at the NIC when its
 * grantee is known to live on another node (a grant to one of ours, or to
 * an id no record names yet, takes none: the latter gets one when its node
 * is found, rd_grants_timer). Past its tenant's quota.grant_mrs, or past
 * quota.bytes of such MRs, or when the NIC refuses, the grant goes through
 * the region's key: its revoke then reaches the grantee's node with the
 * record, as before per-grant MRs (logged, at most once a minute per
 * tenant). Returns whether it has one now.
 */
bool rd_peers_reg_grant(struct rd_control *ctl, struct rd_region *rg, uint32_t i)
{
	struct rd_provider *pv = ctl->poller->net;
	const struct rd_grant *g = &rg->grants[i];
	struct rd_tenant_use *u;
	const char *why = NULL;
	uint64_t now;

	if (rg->grant_nic[i])
		return true;
	rg->grants[i].nic_rkey = 0;
	if (!pv || !pv->cp->reg_grant || rg->tidx < 0 || !rg->grant_node[i] ||
	    rg->grant_node[i] == rd_node_hash(ctl->cfg->node))
		return false;
	u = &ctl->tuse[rg->tidx];
	if (u->grant_mrs >= ctl->cfg->tenants[rg->tidx].quota.grant_mrs)
		why = "quota.grant_mrs";
	else if (u->grant_mr_bytes + (g->hi - g->lo) > ctl->cfg->tenants[rg->tidx].quota.bytes)
		why = "quota.bytes of grant MRs";
	else if (pv->cp->reg_grant(ctl, rg, &rg->grants[i], &rg->grant_nic[i]) ||
		 !rg->grant_nic[i])
		why = "the NIC refused its MR";
	if (why) {
		rg->grant_nic[i] = NULL;
		rg->grants[i].nic_rkey = 0;
		u->grants_no_mr++;
		now = rd_mono_ns();
		if (!u->grant_mrs_logged || now - u->grant_mrs_logged > 60000000000ull) {
			u->grant_mrs_logged = now;
			RD_LOG(NOTICE, "region %s/%s: tenant %s has %u grant MRs (%llu bytes): %s: "
			       "this grant goes through the region's key, its revoke at the "
			       "registry's pace", rg->tenant, rg->name, rg->tenant, u->grant_mrs,
			       (unsigned long long)u->grant_mr_bytes, why);
		}
		return false;
	}
	u->grant_mrs++;
	u->grant_mr_bytes += g->hi - g->lo;
	return true;
}

/* Release @nic, the MR of a grant of @rg over @bytes bytes. */
void rd_peers_unreg_nic(struct rd_control *ctl, struct rd_region *rg, void *nic, uint64_t bytes)
{
	struct rd_provider *pv = ctl->poller->net;

	if (!nic || !pv || !pv->cp->unreg_grant)
		return;
	pv->cp->unreg_grant(ctl, nic);
	if (rg->tidx >= 0) {
		struct rd_tenant_use *u = &ctl->tuse[rg->tidx];

		u->grant_mrs -= u->grant_mrs ? 1 : 0;
		u->grant_mr_bytes -= u->grant_mr_bytes >= bytes ? bytes : u->grant_mr_bytes;
	}
}

void rd_peers_unreg_grant(struct rd_control *ctl, struct rd_region *rg, uint32_t i)
{
	rd_peers_unreg_nic(ctl, rg, rg->grant_nic[i], rg->grants[i].hi - rg->grants[i].lo);
	rg->grant_nic[i] = NULL;
	rg->grants[i].nic_rkey = 0;
}

static void peer_free(struct rd_control *ctl, struct rd_peer *p)
{
	if (p->prov->cp->peer_free)
		p->prov->cp->peer_free(ctl, p);
	free(p);
}

void rd_peers_fini(struct rd_control *ctl)
{
	struct rd_provider *pv = ctl->poller ? ctl->poller->net : NULL;

	while (ctl->peers) {
		struct rd_peer *p = ctl->peers;

		ctl->peers = p->next;
		peer_free(ctl, p);
	}
	if (pv && pv->cp->fini)
		pv->cp->fini(ctl, pv);
}

/*
 * The table is full: forget one peer that nothing needs any more (no
 * region points at it, it is down and not being dialed, no open waits for
 * it), such as a node that left the cluster. The poller holds nothing of a
 * peer that is down (its connection left the poller's list when it went
 * down). A provider may keep its peers (verbs: the QPs stay the poller's).
 * 1 if one went.
 */
static int peer_forget_one(struct rd_control *ctl)
{
	for (struct rd_peer **pp = &ctl->peers; *pp; pp = &(*pp)->next) {
		struct rd_peer *p = *pp;

		if (p->prov->keep_peers || p->self || p->refs || p->ctl_up || p->dialing ||
		    rd_control_peer_waited(ctl, p))
			continue;
		*pp = p->next;
		ctl->npeers--;
		RD_LOG(INFO, "node %s: forgotten (down, unused; the peer table was full)", p->node);
		peer_free(ctl, p);
		return 1;
	}
	return 0;
}

static struct rd_peer *peer_get(struct rd_control *ctl, const char *node, const char *endpoint)
{
	struct rd_peer *p;

	for (p = ctl->peers; p; p = p->next)
		if (!strcmp(p->node, node)) {
			if (!p->ctl_up && strcmp(p->endpoint, endpoint))
				snprintf(p->endpoint, sizeof(p->endpoint), "%s", endpoint);
			return p;
		}
	if (ctl->npeers >= ctl->cfg->max_peers && !peer_forget_one(ctl)) {
		RD_LOG(WARNING, "node %s: already %u peer nodes (limits.max_peers)", node, ctl->npeers);
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->prov = reachable(ctl, endpoint);
	if (!p->prov || (p->prov->cp->peer_alloc && p->prov->cp->peer_alloc(ctl, p))) {
		free(p);
		return NULL;
	}
	snprintf(p->node, sizeof(p->node), "%s", node);
	snprintf(p->endpoint, sizeof(p->endpoint), "%s", endpoint);
	p->next = ctl->peers;
	ctl->peers = p;
	ctl->npeers++;
	return p;
}

/*
 * A connect to a peer finished (tcp dial or verbs CM): @fd is the
 * authenticated tcp connection (-1 for verbs), or @err says why not. The
 * opens that waited for it go on (rd_control_peer_ready).
 */
void rd_peers_dial_done(struct rd_control *ctl, struct rd_peer *p, int fd, int err, const char *node)
{
	p->dialing = false;
	if (!err && strcmp(node, p->node)) {
		RD_LOG(WARNING, "%s answered as node %s, expected %s", p->endpoint, node, p->node);
		err = -EHOSTUNREACH; /* someone else listens there now */
	}
	if (!err) {
		struct rd_cmd cmd = { .type = RD_CMD_PEER_UP, .peer = p, .fd = fd };

		err = rd_control_cmd(ctl, &cmd);
	}
	if (err && p->resetting) {
		/* The poller holds the work of a reset for this reconnect:
		 * it failed, so that work fails and the peer is down. */
		struct rd_cmd cmd = { .type = RD_CMD_PEER_DOWN, .peer = p, .status = -ECONNRESET,
				      .why = "reconnecting after a refused operation failed" };

		p->resetting = false;
		rd_control_cmd(ctl, &cmd);
		pause_peer_regions(ctl, p);
	}
	if (err) {
		if (err != p->last_err)
			RD_LOGC(p->prov->log_comp, WARNING, "%s: connecting to node %s at %s: %s",
				p->prov->name, p->node, p->endpoint,
				err == -EACCES ? "peer failed the cluster-secret challenge" :
				err == -EPROTONOSUPPORT ? "a roshmd of another tcp protocol version (every "
							  "node of a cluster runs the same roshm version)" :
							  strerror(-err));
		p->last_err = err;
		retry_later(p, rd_mono_ns());
		if (fd >= 0)
			close(fd);
		if (p->prov->cp->release)
			p->prov->cp->release(ctl, p);
		rd_control_peer_ready(ctl, p, err);
		return;
	}
	p->ctl_up = true;
	p->resetting = false;
	p->last_err = 0;
	p->backoff_ns = RETRY_MIN_NS;
	RD_LOGC(p->prov->log_comp, INFO, "%s: connected to node %s at %s", p->prov->name, p->node,
		p->endpoint);
	rd_control_peer_ready(ctl, p, 0);
	/* Its regions that waited for it go on now, not at the next
	 * revalidation: their records say whether they are still the same. So
	 * do paused regions whose next instance is on a node we were dialing
	 * (a pod that moved): their retarget waited for a connection. */
	for (struct rd_region *rg = ctl->regions, *next; rg; rg = next) {
		next = rg->next; /* (revalidate may free it) */
		if (rg->remote && rg->ctl_paused && !rg->ctl_dead &&
		    (rg->peer == p || (rg->retarget_wait && !strcmp(rg->retarget_node, p->node))))
			revalidate(ctl, rg, rd_mono_ns());
	}
}

/*
 * Start connecting to @p unless that is under way: 0 started (or already
 * dialing; rd_peers_dial_done reports), -errno could not start (reported
 * too). Never waits: the control thread goes on serving.
 */
static int peer_connect(struct rd_control *ctl, struct rd_peer *p)
{
	int ret;

	if (p->ctl_up || p->dialing)
		return 0;
	p->dialing = true;
	/* the provider sets p->dial_deadline_ns */
	ret = p->prov->cp->connect(ctl, p);
	if (ret)
		rd_peers_dial_done(ctl, p, -1, ret, "");
	return ret;
}

/* Dials past their deadline fail. */
static void dials_timer(struct rd_control *ctl, uint64_t now)
{
	for (struct rd_peer *p = ctl->peers; p; p = p->next) {
		if (!p->dialing || now < p->dial_deadline_ns)
			continue;
		if (p->prov->cp->dial_abort)
			p->prov->cp->dial_abort(ctl, p);
		rd_peers_dial_done(ctl, p, -1, -ETIMEDOUT, "");
	}
}

int rd_peers_open_remote(struct rd_control *ctl, const struct rd_region_rec *rec,
			 struct rd_region **out, struct rd_peer **peer)
{
	struct rd_peer *p;
	struct rd_region *rg;
	int ret;

	if (!reachable(ctl, rec->endpoint)) {
		RD_LOG(INFO, "open %s/%s: region is on node %s (%s), no transport to it", rec->tenant,
		       rec->name, rec->node, rec->endpoint);
		return -EHOSTUNREACH;
	}
	p = peer_get(ctl, rec->node, rec->endpoint);
	if (!p)
		return -EHOSTUNREACH;
	*peer = p;
	if (!p->ctl_up) {
		/* the open waits for the connect; the control thread does not */
		ret = peer_connect(ctl, p);
		if (ret)
			return ret == -EACCES ? -EACCES : -EHOSTUNREACH;
		return -EINPROGRESS;
	}
	if (p->prov != rd_provider_by_endpoint(rec->endpoint))
		return -EHOSTUNREACH; /* the node switched transports: not supported live */
	for (rg = ctl->regions; rg; rg = rg->next)
		if (rg->remote && !rg->ctl_dead && rg->peer == p && rg->id == rec->region_id &&
		    rg->epoch == rec->epoch)
			break;
	if (rg && rec->policy == ROSHM_POLICY_GRANT && grants_hash(rec) != rg->grants_seen) {
		/* The open rests on grants the revalidation has not enforced
		 * (a record read past the cache): enforce them now, so that a
		 * later look that finds the earlier list again sees the change
		 * back and closes what it no longer covers. */
		rg->grants_seen = grants_hash(rec);
		rg->refs++; /* not freed here: the caller's handle takes it */
		rd_control_grants_enforce(ctl, rg, rec->tenant, rec->grants, rec->ngrants);
		rg->refs--;
	}
	if (!rg) {
		rg = calloc(1, sizeof(*rg));
		if (!rg)
			return -ENOMEM;
		rg->fd = -1;
		rg->defer.kind = RD_DEFER_REGION;
		rg->remote = true;
		rg->peer = p;
		rg->id = rec->region_id;
		rg->epoch = rec->epoch;
		rg->key = rec->key;
		rg->rkey = rec->rkey;
		rg->raddr = rec->raddr;
		rg->mem_id = rec->mem_id;
		rg->gid = rec->gid;
		rg->grants_seen = grants_hash(rec);
		rg->data_size = rec->data_size;
		rg->policy = rec->policy;
		rg->txn_slots = rec->txn_slots;
		rg->slot_size = rec->slot_size;
		rg->data_off = roshm_region_data_off(rec->txn_slots, rec->slot_size);
		rg->access = rec->access;
		rg->win_lo = rec->win_lo;
		rg->win_hi = rec->win_hi;
		rg->va_base = rec->va_base;
		rg->restricted = rd_region_restricted(rec->access, rec->win_lo, rec->win_hi,
						      rec->data_size, rec->va_base);
		memcpy(rg->tenant, rec->tenant, sizeof(rg->tenant));
		memcpy(rg->name, rec->name, sizeof(rg->name));
		memcpy(rg->node, rec->node, sizeof(rg->node));
		rg->xport = p->prov;
		rg->tidx = -1;
		rd_control_region_link(ctl, rg);
		p->refs++;
	}
	*out = rg;
	return 0;
}

void rd_peers_region_free(struct rd_control *ctl, struct rd_region *rg)
{
	(void)ctl;
	if (rg->peer)
		rg->peer->refs--;
}

/* A peer went down: hold the work for its regions and wait for them to come
 * back (same epoch when the node returns, a new one when its roshmd
 * restarted), for at most drain.timeout_ms. */
static void pause_due(struct rd_control *ctl, uint64_t since)
{
	uint64_t due = since + (uint64_t)ctl->cfg->drain_timeout_ms * 1000000ull + 1;

	if (!ctl->pause_due_ns || due < ctl->pause_due_ns)
		ctl->pause_due_ns = due;
}

static void pause_peer_regions(struct rd_control *ctl, struct rd_peer *p)
{
	for (struct rd_region *rg = ctl->regions; rg; rg = rg->next) {
		if (!rg->remote || rg->peer != p || rg->ctl_dead || rg->ctl_paused)
			continue;
		struct rd_cmd cmd = { .type = RD_CMD_REGION_PAUSE, .region = rg, .fd = 1 };

		rd_control_cmd(ctl, &cmd);
		rg->ctl_paused = true;
		rg->paused_since = rd_mono_ns();
		rg->pause_looked = false;
		pause_due(ctl, rg->paused_since);
	}
}

static void region_gone(struct rd_control *ctl, struct rd_region *rg, const char *why)
{
	struct rd_cmd cmd = { .type = RD_CMD_REGION_DEAD, .region = rg };

	rd_control_cmd(ctl, &cmd);
	rg->ctl_dead = true;
	RD_LOG(INFO, "remote region %s/%s on node %s: %s; its handles now fail with ESTALE",
	       rg->tenant, rg->name, rg->node, why);
}

/* A paused region came back as a new instance: send its held work there. */
static void retarget(struct rd_control *ctl, struct rd_region *rg, const struct rd_region_rec *rec)
{
	struct rd_region t = { 0 };
	struct rd_peer *p = peer_get(ctl, rec->node, rec->endpoint);

	if (!p || !reachable(ctl, rec->endpoint) || p->prov != reachable(ctl, rec->endpoint))
		return; /* not reachable: try again at the next revalidation */
	if (!p->ctl_up) {
		/* connect meanwhile: the retarget happens when the dial succeeds
		 * (rd_peers_dial_done), or at the next revalidation if it fails */
		rg->retarget_wait = true;
		memcpy(rg->retarget_node, p->node, sizeof(rg->retarget_node));
		ctl->retarget_waits++;
		peer_connect(ctl, p);
		return;
	}
	t.id = rec->region_id;
	t.epoch = rec->epoch;
	t.key = rec->key;
	t.rkey = rec->rkey;
	t.raddr = rec->raddr;
	t.mem_id = rec->mem_id;
	t.data_size = rec->data_size;
	t.txn_slots = rec->txn_slots;
	t.slot_size = rec->slot_size;
	t.data_off = roshm_region_data_off(rec->txn_slots, rec->slot_size);
	t.access = rec->access;
	t.win_lo = rec->win_lo;
	t.win_hi = rec->win_hi;
	t.va_base = rec->va_base;
	t.restricted = rd_region_restricted(rec->access, rec->win_lo, rec->win_hi, rec->data_size,
					    rec->va_base);
	t.peer = p;
	struct rd_cmd cmd = { .type = RD_CMD_REGION_RETARGET, .region = rg, .target = &t };
	struct rd_peer *old = rg->peer;

	/* Before its held work goes out (the retarget resumes it): each
	 * handle takes the new instance's NIC key of its grant, or lets go,
	 * or (another policy) the region's key. */
	rg->refs++;
	if (rec->policy == ROSHM_POLICY_GRANT) {
		rg->grants_seen = grants_hash(rec);
		rd_control_grants_enforce(ctl, rg, rec->tenant, rec->grants, rec->ngrants);
	} else {
		rd_control_handles_unkey(ctl, rg);
	}
	if (rg->refs == 1) {   /* no handle left: nothing to resume */
		rd_control_region_put(ctl, rg);
		return;
	}
	rg->refs--;
	rd_control_cmd(ctl, &cmd); /* the poller switches rg->peer too */
	if (old != p) {
		old->refs--;
		p->refs++;
	}
	memcpy(rg->node, rec->node, sizeof(rg->node));
	rg->gid = rec->gid;
	rg->ctl_paused = false;
	RD_LOG(INFO, "remote region %s/%s resumes on node %s, epoch %016llx", rg->tenant, rg->name,
	       rg->node, (unsigned long long)rg->epoch);
}

/*
 * Check a remote region against its record: gone, re-created, draining,
 * back after its node was down (resume), or moved to a new instance
 * (retarget). A paused region that stays paused past drain.timeout_ms is
 * given up.
 */
static void revalidate(struct rd_control *ctl, struct rd_region *rg, uint64_t now)
{
	struct rd_region_rec rec;

	rg->retarget_wait = false; /* retarget() sets it again if it still waits */

	int ret = ctl->reg.ops->get_region(&ctl->reg, rg->tenant, rg->name, &rec);
	bool same = ret == 0 && rec.epoch == rg->epoch && rec.region_id == rg->id &&
		    !strcmp(rec.node, rg->node);

	if (rg->ctl_paused &&
	    now - rg->paused_since > (uint64_t)ctl->cfg->drain_timeout_ms * 1000000ull &&
	    !(ret == 0 && !same && !strcmp(rec.state, RD_STATE_ACTIVE))) {
		region_gone(ctl, rg, "did not come back in time");
	} else if (same && !strcmp(rec.state, RD_STATE_ACTIVE) && rg->ctl_paused &&
		   rg->peer->ctl_up) {
		/* its node is back, same instance: release the held work, under
		 * the grants as they are now (keys revoked meanwhile) */
		struct rd_cmd cmd = { .type = RD_CMD_REGION_PAUSE, .region = rg, .fd = 0 };

		if (rec.policy == ROSHM_POLICY_GRANT && grants_hash(&rec) != rg->grants_seen) {
			rg->refs++;
			rg->grants_seen = grants_hash(&rec);
			rd_control_grants_enforce(ctl, rg, rec.tenant, rec.grants, rec.ngrants);
			if (rg->refs == 1) {   /* no handle left */
				rd_control_region_put(ctl, rg);
				return;
			}
			rg->refs--;
		}

		rd_control_cmd(ctl, &cmd);
		rg->ctl_paused = false;
		RD_LOG(INFO, "remote region %s/%s on node %s: back, work resumes", rg->tenant,
		       rg->name, rg->node);
	} else if (same && !strcmp(rec.state, RD_STATE_STALE) && !rg->ctl_paused) {
		/* its owner drains it: hold our work, wait for the next epoch */
		struct rd_cmd cmd = { .type = RD_CMD_REGION_PAUSE, .region = rg, .fd = 1 };

		rd_control_cmd(ctl, &cmd);
		rg->ctl_paused = true;
		rg->paused_since = now;
		rg->pause_looked = false;
		pause_due(ctl, now);
		RD_LOG(INFO, "remote region %s/%s on node %s is draining: its work is paused",
		       rg->tenant, rg->name, rg->node);
	} else if (ret == 0 && !same && rg->ctl_paused && !strcmp(rec.state, RD_STATE_ACTIVE)) {
		retarget(ctl, rg, &rec);
	} else if (ret == -ENOENT && rg->ctl_paused) {
		/* drained and gone: the next instance may still come */
	} else if (ret == -ENOENT) {
		region_gone(ctl, rg, "record removed");
	} else if (ret == 0 && !same) {
		region_gone(ctl, rg, "re-created with a new epoch");
	} else if (ret == 0 && rec.policy == ROSHM_POLICY_GRANT &&
		   grants_hash(&rec) != rg->grants_seen) {
		/* its owner took grants back: our clients it no longer lets in let go */
		rg->grants_seen = grants_hash(&rec);
		rd_control_grants_enforce(ctl, rg, rec.tenant, rec.grants, rec.ngrants);
	}
}

/*
 * The store says the record of @tenant/@name changed (file registry:
 * inotify): our remote regions of that name are looked at again at the
 * next rd_peers_timer, as etcd's watch makes them be (a revoke closes the
 * handles it no longer lets in, a closed region goes stale), not at the
 * next revalidate_ms. A region is looked at 100 times a second at most,
 * however often a registry writer touches its record.
 */
void rd_peers_record_changed(void *arg, const char *tenant, const char *name)
{
	struct rd_control *ctl = arg;

	for (struct rd_region *rg = ctl->regions; rg; rg = rg->next)
		if (rg->remote && !rg->ctl_dead && !strcmp(rg->name, name) &&
		    !strcmp(rg->tenant, tenant)) {
			rg->recheck = true;
			ctl->recheck_pending = true;
		}
}

/* Only our tenants' records can be those of our remote regions. */
bool rd_peers_wants_tenant(void *arg, const char *tenant)
{
	struct rd_control *ctl = arg;

	return rd_config_tenant_idx(ctl->cfg, tenant) >= 0;
}

/* The remote regions rd_peers_record_changed marked, when due. */
static void rechecks(struct rd_control *ctl, uint64_t now)
{
	bool left = false;

	if (!ctl->recheck_pending)
		return;
	for (struct rd_region *rg = ctl->regions, *next; rg; rg = next) {
		next = rg->next; /* revalidate may free it */
		if (!rg->remote || !rg->recheck)
			continue;
		if (now < rg->recheck_ns) {
			left = true;
			continue;
		}
		rg->recheck = false;
		rg->recheck_ns = now + 10000000ull;
		if (!rg->ctl_dead)
			revalidate(ctl, rg, now);
	}
	ctl->recheck_pending = left;
}

/*
 * Paused regions whose drain.timeout_ms ran out are looked at then, not at
 * the next revalidate_ms, which may be much later (a minute, with a
 * registry that says what changes): given up, or retargeted if their
 * record names a new instance. One whose new instance cannot be reached
 * yet stays paused, and is looked at again at each revalidate_ms as before
 * (not here: its node is dialled at its own pace).
 */
static void pauses_due(struct rd_control *ctl, uint64_t now)
{
	uint64_t limit = (uint64_t)ctl->cfg->drain_timeout_ms * 1000000ull;

	if (!ctl->pause_due_ns || now < ctl->pause_due_ns)
		return;
	ctl->pause_due_ns = 0;
	for (struct rd_region *rg = ctl->regions, *next; rg; rg = next) {
		next = rg->next; /* revalidate may free it */
		if (rg->remote && !rg->ctl_dead && rg->ctl_paused && now - rg->paused_since > limit &&
		    !rg->pause_looked) {
			rg->pause_looked = true;
			revalidate(ctl, rg, now);
		}
	}
	/* the next deadline among those paused that have not had their look */
	for (struct rd_region *rg = ctl->regions; rg; rg = rg->next)
		if (rg->remote && !rg->ctl_dead && rg->ctl_paused && !rg->pause_looked)
			pause_due(ctl, rg->paused_since);
}

/*
 * The nodes that paused regions' next instances are on (retarget() dials
 * them) are dialed again at their backoff after a failed dial, as peers in
 * use are; a region stops waiting at its next look (revalidate). Walks the
 * regions only while some wait: the count is made anew at each walk.
 */
static void redial_awaited(struct rd_control *ctl, uint64_t now)
{
	uint32_t waits = 0;

	/* a walk per 10 ms at most (this runs at every control step; a dial's
	 * backoff starts at 50 ms) */
	if (!ctl->retarget_waits || now < ctl->redial_ns)
		return;
	ctl->redial_ns = now + 10000000ull;
	for (struct rd_region *rg = ctl->regions; rg; rg = rg->next) {
		struct rd_peer *p;

		if (!rg->remote || !rg->retarget_wait || !rg->ctl_paused || rg->ctl_dead)
			continue;
		waits++;
		for (p = ctl->peers; p && strcmp(p->node, rg->retarget_node); p = p->next)
			;
		/* (a dial reports success later, never from within: nothing
		 * frees a region under this walk) */
		if (p && !p->ctl_up && !p->dialing && now >= p->retry_ns)
			peer_connect(ctl, p);
	}
	ctl->retarget_waits = waits;
}

void rd_peers_timer(struct rd_control *ctl, bool registry_changed)
{
	uint64_t now = rd_mono_ns();
	struct rd_node_rec nrec;

	if (ctl->poller->net && ctl->poller->net->cp->timer)
		ctl->poller->net->cp->timer(ctl, now);
	dials_timer(ctl, now);
	rechecks(ctl, now);
	pauses_due(ctl, now);
	if (!registry_changed && now < ctl->next_revalidate_ns)
		goto reconnect;
	ctl->next_revalidate_ns = now + (uint64_t)ctl->cfg->revalidate_ms * 1000000ull;
	/* Remote regions whose record went away or changed epoch are stale. */
	for (struct rd_region *rg = ctl->regions, *next; rg; rg = next) {
		next = rg->next; /* revalidate may close its last handle, and free it */
		if (rg->remote && !rg->ctl_dead)
			revalidate(ctl, rg, now);
	}
	/* A peer whose node record is gone (lease expired) is down, even if
	 * its TCP connection has not noticed yet (a stopped process). */
	for (struct rd_peer *p = ctl->peers; p; p = p->next) {
		if (!p->ctl_up || !ctl->reg.ops->get_node || p->self)
			continue;
		if (ctl->reg.ops->get_node(&ctl->reg, p->node, &nrec) == -ENOENT) {
			struct rd_cmd cmd = { .type = RD_CMD_PEER_DOWN, .peer = p };

			RD_LOG(WARNING, "node %s left the registry: failing its operations", p->node);
			rd_control_cmd(ctl, &cmd);
			p->ctl_up = false;
			pause_peer_regions(ctl, p);
			retry_later(p, now);
		}
	}
reconnect:
	redial_awaited(ctl, now);
	for (struct rd_peer *p = ctl->peers; p; p = p->next)
		if (!p->ctl_up && (p->refs || p->resetting) && now >= p->retry_ns) {
			/* Re-read the endpoint: a restarted node may listen elsewhere. */
			if (p->dialing)
				continue;
			if (ctl->reg.ops->get_node && ctl->reg.ops->get_node(&ctl->reg, p->node, &nrec) == 0 &&
			    nrec.endpoint[0])
				snprintf(p->endpoint, sizeof(p->endpoint), "%s", nrec.endpoint);
			peer_connect(ctl, p);
		}
}

void rd_peers_event(struct rd_control *ctl, const struct rd_event *ev)
{
	if (ev->type == RD_EV_INBOUND_DOWN) {
		RD_LOGC(ctl->poller->net ? ctl->poller->net->log_comp : RD_LC_CONTROL, INFO,
			"%s: inbound connection from node %.63s closed: %.63s",
			ctl->poller->net ? ctl->poller->net->name : "?", ev->node, ev->why);
		return;
	}
	for (struct rd_peer *p = ctl->peers; p; p = p->next)
		if (p == ev->peer && ev->type == RD_EV_PEER_RESET) {
			/* One operation was refused (a stale rkey: its region went
			 * away under it). The QPs are in error on both ends: make
			 * them again at once; the poller holds the work of the
			 * other clients that was in flight and posts it again. */
			uint64_t now = rd_mono_ns();

			RD_LOGC(p->prov->log_comp, WARNING, "%s: node %s refused an operation (%.63s): "
				"re-making the connection; other clients' operations in flight are "
				"posted again", p->prov->name, p->node, ev->why);
			ctl->next_revalidate_ns = 0; /* the stale region: its handles fail at once */
			p->resetting = true;
			if (!p->ctl_up)
				continue; /* down meanwhile (registry, CM): its own path reconnects */
			p->ctl_up = false;
			if (p->prov->cp->release)
				p->prov->cp->release(ctl, p);
			if (now - p->reset_window_ns > 1000000000ull) {
				p->reset_window_ns = now;
				p->resets_in_window = 0;
			}
			if (++p->resets_in_window > RESETS_PER_SEC) {
				/* refusals one after another (regions made and withdrawn
				 * under their users): each costs every pod of this peer a
				 * wait, so the re-dial backs off; the work stays held */
				retry_later(p, now);
				continue;
			}
			peer_connect(ctl, p); /* a failure fails the held work (dial_done) */
		} else if (p == ev->peer) {
			if (p->ctl_up)
				RD_LOGC(p->prov->log_comp, WARNING, "%s: connection to node %s lost: "
					"%.63s; operations in flight failed", p->prov->name, p->node,
					ev->why);
			p->ctl_up = false;
			retry_later(p, rd_mono_ns());
			pause_peer_regions(ctl, p);
			if (p->prov->cp->release)
				p->prov->cp->release(ctl, p); /* the poller let go of it */
		}
}

struct json_t *rd_peers_json(struct rd_control *ctl)
{
	json_t *a = json_array();

	for (struct rd_peer *p = ctl->peers; p; p = p->next) {
		json_t *o = json_object();

		json_object_set_new(o, "node", json_string(p->node));
		json_object_set_new(o, "endpoint", json_string(p->endpoint));
		json_object_set_new(o, "transport", json_string(rd_peer_transport_name(p)));
		json_object_set_new(o, "up", json_boolean(p->ctl_up));
		json_object_set_new(o, "regions", json_integer(p->refs));
		if (p->prov->cp->peer_json)
			p->prov->cp->peer_json(ctl, p, o);
		json_array_append_new(a, o);
	}
	return a;
}

const char *rd_peer_transport_name(const struct rd_peer *p)
{
	return p->self && p->prov->loopback_name ? p->prov->loopback_name : p->prov->name;
}
