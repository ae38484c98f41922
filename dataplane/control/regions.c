// SPDX-License-Identifier: MIT
/*
 * Regions: create (and re-attach after a restart), open (local, or remote
 * through peers.c), close; the handles clients hold on them; who may open
 * what (policy); the region's record in the registry; the lists of regions
 * (every one, local ones by name, local ones by id). A request that waits
 * (for a peer to be connected, for the registry) parks its connection here.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "control/internal.h"
#include "poller/sqe.h"

#define RD_LOG_COMPONENT RD_LC_CONTROL

/* ---- the region lists: every region (O(1) unlink), local ones by name ---- */

static uint32_t name_hash(const char *tenant, const char *name)
{
	uint32_t h = 2166136261u; /* FNV-1a over "tenant/name" */

	for (const char *p = tenant; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	h = (h ^ '/') * 16777619u;
	for (const char *p = name; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	return h & (RD_NAME_BUCKETS - 1);
}

void rd_control_region_link(struct rd_control *ctl, struct rd_region *rg)
{
	rg->prev = NULL;
	rg->next = ctl->regions;
	if (ctl->regions)
		ctl->regions->prev = rg;
	ctl->regions = rg;
	if (!rg->remote) {
		uint32_t b = name_hash(rg->tenant, rg->name);

		rg->name_next = ctl->by_name[b];
		ctl->by_name[b] = rg;
	}
}

static void region_unlink(struct rd_control *ctl, struct rd_region *rg)
{
	if (rg->prev)
		rg->prev->next = rg->next;
	else if (ctl->regions == rg)
		ctl->regions = rg->next;
	if (rg->next)
		rg->next->prev = rg->prev;
	rg->next = rg->prev = NULL;
	if (!rg->remote)
		for (struct rd_region **pp = &ctl->by_name[name_hash(rg->tenant, rg->name)]; *pp;
		     pp = &(*pp)->name_next)
			if (*pp == rg) {
				*pp = rg->name_next;
				break;
			}
}

struct rd_region *rd_region_find(struct rd_control *ctl, const char *tenant, const char *name)
{
	for (struct rd_region *rg = ctl->by_name[name_hash(tenant, name)]; rg; rg = rg->name_next)
		if (rg->owner && !strcmp(rg->tenant, tenant) && !strcmp(rg->name, name))
			return rg;
	return NULL;
}

static struct rd_region *find_region_id(struct rd_control *ctl, uint32_t id)
{
	return id && id <= ctl->cfg->max_regions ? ctl->slots[id] : NULL;
}

/* Free a region the poller no longer touches (rd_control_region_put or the
 * poller's graveyard). */
void rd_control_region_free(struct rd_control *ctl, struct rd_region *rg)
{
	if (rg->zombie) {
		for (struct rd_region **pp = &ctl->zombie_regions; *pp; pp = &(*pp)->znext)
			if (*pp == rg) {
				*pp = rg->znext;
				break;
			}
	}
	if (!rg->remote) {
		for (uint32_t i = 0; i < rg->ngrants && rg->grant_nic; i++)
			rd_peers_unreg_grant(ctl, rg, i);
		rd_grants_defer_release(ctl, rg, 0);
		rd_peers_unreg_region(ctl, rg);
		rd_region_free(rg);
	}
	free(rg->grants);
	free(rg->grant_node);
	free(rg->grant_nic);
	free(rg->node_grants);
	free(rg->slot_owner);
	free(rg);
}

void rd_control_region_put(struct rd_control *ctl, struct rd_region *rg)
{
	struct rd_cmd cmd = { .type = RD_CMD_REGION_RELEASE, .region = rg };

	if (--rg->refs)
		return;
	region_unlink(ctl, rg);
	if (rg->remote) {
		rd_peers_region_free(ctl, rg);
	} else {
		if (ctl->slots[rg->id] == rg)
			ctl->slots[rg->id] = NULL;
		ctl->nregions--;
		ctl->tuse[rg->tidx].regions--;
		ctl->tuse[rg->tidx].bytes -= rg->map_size;
	}
	/* The data path may still hold it (a transaction, a WR in flight):
	 * then the poller hands it back when it lets go. */
	if (rd_poller_cmd(ctl->poller, &cmd) == 1) {
		rd_control_region_free(ctl, rg);
		return;
	}
	rg->zombie = true;
	rg->znext = ctl->zombie_regions;
	ctl->zombie_regions = rg;
}

void rd_region_to_rec(struct rd_control *ctl, const struct rd_region *rg,
			  struct rd_region_rec *rec, const char *state)
{
	memset(rec, 0, sizeof(*rec));
	snprintf(rec->node, sizeof(rec->node), "%s", ctl->cfg->node);
	memcpy(rec->tenant, rg->tenant, sizeof(rec->tenant));
	memcpy(rec->name, rg->name, sizeof(rec->name));
	snprintf(rec->state, sizeof(rec->state), "%s", state);
	if (ctl->endpoint[0])
		snprintf(rec->endpoint, sizeof(rec->endpoint), "%s", ctl->endpoint);
	else
		snprintf(rec->endpoint, sizeof(rec->endpoint), "local:%.100s", ctl->cfg->socket);
	rec->region_id = rg->id;
	rec->key = rg->key;
	rec->rkey = rg->rkey;
	rec->raddr = rg->raddr;
	rec->epoch = rg->epoch;
	rec->mem_id = rg->mem_id;
	rec->gid = rg->gid;
	rec->ogid = !rg->remote && rg->owner ? rg->owner->cgid : 0;
	rec->data_size = rg->data_size;
	rec->policy = rg->policy;
	rec->ntenants = rg->ntenants;
	memcpy(rec->tenants, rg->tenants, sizeof(rec->tenants));
	/* our own copies: the header is the owner's to scribble on */
	rec->txn_slots = rg->txn_slots;
	rec->slot_size = rg->slot_size;
	rec->access = rg->access;
	rec->win_lo = rg->win_lo;
	rec->win_hi = rg->win_hi;
	rec->va_base = rg->va_base;
	rec->ngrants = rg->ngrants;
	if (rg->ngrants)
		memcpy(rec->grants, rg->grants, rg->ngrants * sizeof(rec->grants[0]));
}

/* The owner gives the region up: peers' handles now complete with -ESTALE. */
void rd_region_unpublish(struct rd_control *ctl, struct rd_region *rg)
{
	struct rd_cmd cmd = { .type = RD_CMD_REGION_DEAD, .region = rg };
	int ret;

	rd_poller_cmd(ctl->poller, &cmd);
	ret = rg->no_record ? 0 : ctl->reg.ops->del_region(&ctl->reg, rg->tenant, rg->name, NULL, NULL);
	if (ret && ret != -ENOENT)
		RD_LOGC(RD_LC_REGISTRY, WARNING, "registry: removing %s/%s: %s", rg->tenant, rg->name,
			strerror(-ret));
	RD_LOG(INFO, "region %s/%s closed by its owner (client %u)", rg->tenant, rg->name,
	       rg->owner ? rg->owner->id : 0);
	rg->owner = NULL;
}

/* ---- handles -------------------------------------------------------------- */

/* A handle on @rg for @c: on all of it (@part NULL), or on the part
 * @part says (part, lo, hi, access). */
static int handle_alloc(struct rd_control *ctl, struct rd_client *c, struct rd_region *rg,
			const struct rd_handle *part, uint32_t *handle)
{
	/* Slots below the hint are taken: a client opening many handles
	 * costs a scan per open only past it. */
	for (uint32_t i = c->handle_hint; i < c->nhandles; i++) {
		struct rd_handle *h = &c->ctl_handles[i];

		if (h->region)
			continue;
		h->gen++;
		uint32_t hv = rd_handle_make(i, h->gen);
		struct rd_cmd cmd = { .type = RD_CMD_HANDLE_SET, .client = c, .region = rg,
				      .handle = hv, .own = !rg->remote && rg->owner == c,
				      .limits = part };
		int ret = rd_poller_cmd(ctl->poller, &cmd);

		if (ret)
			return ret;
		h->part = part && part->part;
		h->lo = h->part ? part->lo : 0;
		h->hi = h->part ? part->hi : rg->data_size;
		h->access = h->part ? part->access : ROSHM_ACCESS_ALL;
		h->nic_rkey = part && rg->remote ? part->nic_rkey : 0;
		h->region = rg;
		rg->refs++;
		c->handle_hint = i + 1;
		*handle = hv;
		return 0;
	}
	return -EMFILE;
}

struct rd_handle *rd_handle_lookup(struct rd_client *c, uint32_t hv)
{
	uint32_t idx = hv & 0xffffu;

	if (idx >= c->nhandles || !c->ctl_handles[idx].region ||
	    c->ctl_handles[idx].gen != (uint16_t)(hv >> 16))
		return NULL;
	return &c->ctl_handles[idx];
}

/* Drop one handle; @notify_poller is false when the client is already gone
 * from the poller (detach). */
void rd_handle_release(struct rd_control *ctl, struct rd_client *c, uint32_t hv,
		       bool notify_poller)
{
	struct rd_handle *h = rd_handle_lookup(c, hv);
	struct rd_region *rg;

	if (!h)
		return;
	rg = h->region;
	if (notify_poller) {
		struct rd_cmd cmd = { .type = RD_CMD_HANDLE_CLEAR, .client = c, .handle = hv };

		rd_poller_cmd(ctl->poller, &cmd);
	}
	h->region = NULL;
	if ((uint32_t)(h - c->ctl_handles) < c->handle_hint)
		c->handle_hint = (uint32_t)(h - c->ctl_handles);
	if (rg->owner == c && rg->owner_handle == hv)
		rd_region_unpublish(ctl, rg);
	rd_control_region_put(ctl, rg);
}

/* ---- policy ---------------------------------------------------------------- */

/* Tenant-level policy (the owner-only case is decided by the caller). */
bool rd_policy_allows(uint32_t policy, const char *owner_tenant, uint32_t ntenants,
		      const char (*tenants)[ROSHM_NAME_MAX], const char *tenant)
{
	if (!strcmp(owner_tenant, tenant))
		return true;
	if (policy != ROSHM_POLICY_LIST)
		return false;
	for (uint32_t i = 0; i < ntenants && i < ROSHM_POLICY_TENANTS_MAX; i++)
		if (!strcmp(tenants[i], tenant))
			return true;
	return false;
}

static bool policy_allows(const struct rd_region *rg, const struct rd_client *c,
			  const struct rd_handle *want)
{
	if (rg->policy == ROSHM_POLICY_OWNER)
		return rg->owner == c;
	if (rg->policy == ROSHM_POLICY_GRANT)
		return rg->owner == c ||
		       rd_client_granted(c, rg->tenant, rg->grants, rg->ngrants, want);
	return rd_policy_allows(rg->policy, rg->tenant, rg->ntenants, rg->tenants, c->tenant);
}

/* ---- requests that wait: for a peer, for the registry ------------------- */

void rd_conn_wait_for(struct rd_control *ctl, struct rd_conn *conn, enum rd_conn_wait kind)
{
	/* Only a hang-up (EPOLLHUP, always reported: the client closed its
	 * end) drops a waiting request; a half-close (the client sent its
	 * request, then shut its writing side, and reads) does not. */
	struct epoll_event ev = { .events = 0, .data.ptr = conn };

	conn->wait = kind;
	conn->wait_id = ++ctl->next_wait_id;
	epoll_ctl(ctl->epfd, EPOLL_CTL_MOD, conn->fd, &ev);
}

static void conn_park(struct rd_control *ctl, struct rd_conn *conn, struct rd_peer *peer,
		      const struct roshm_ctl_region_open *req)
{
	conn->park_peer = peer;
	conn->park_req = *req;
	rd_conn_wait_for(ctl, conn, RD_WAIT_PEER);
}

void rd_conn_unpark(struct rd_control *ctl, struct rd_conn *conn)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = conn };

	conn->park_peer = NULL;
	conn->wait = RD_WAIT_NONE;
	conn->wait_id = 0;
	epoll_ctl(ctl->epfd, EPOLL_CTL_MOD, conn->fd, &ev);
}

/* What a registry completion carries: whom it is for. */
struct wait_ref {
	struct rd_control *ctl;
	uint64_t id;
	rd_put_done_fn done;          /* rd_conn_put_wait */
	uint64_t arg;
};

static struct rd_conn *conn_by_wait(struct rd_control *ctl, uint64_t id)
{
	for (struct rd_conn *c = ctl->conns; c; c = c->next)
		if (c->wait_id == id && c->fd >= 0)
			return c;
	return NULL; /* it went away meanwhile */
}

static struct wait_ref *wait_ref(struct rd_control *ctl, struct rd_conn *conn)
{
	struct wait_ref *w = malloc(sizeof(*w));

	if (w) {
		w->ctl = ctl;
		w->id = conn->wait_id;
		w->done = NULL;
		w->arg = 0;
	}
	return w;
}

static void put_done(void *arg, int status)
{
	struct wait_ref *w = arg;
	struct rd_control *ctl = w->ctl;
	struct rd_conn *conn = conn_by_wait(ctl, w->id);
	rd_put_done_fn done = w->done;
	uint64_t a = w->arg;

	free(w);
	if (!conn)
		return; /* it went away meanwhile */
	rd_conn_unpark(ctl, conn);
	done(ctl, conn, status, a);
}

/*
 * Put @rec in the registry and answer @conn's request once the store did:
 * @done runs then with its status and @arg (not if the connection went
 * meanwhile). 0, or -errno (then @done never runs).
 */
int rd_conn_put_wait(struct rd_control *ctl, struct rd_conn *conn, const struct rd_region_rec *rec,
		     rd_put_done_fn done, uint64_t arg)
{
	struct wait_ref *w;
	int ret;

	rd_conn_wait_for(ctl, conn, RD_WAIT_PUT);
	w = wait_ref(ctl, conn);
	if (w) {
		w->done = done;
		w->arg = arg;
	}
	ret = w ? ctl->reg.ops->put_region(&ctl->reg, rec, 0, put_done, w) : -ENOMEM;
	if (ret) {
		free(w);
		rd_conn_unpark(ctl, conn);
	}
	return ret;
}

static int region_open(struct rd_control *ctl, struct rd_conn *conn,
		       const struct roshm_ctl_region_open *req);

/* The registry's answer to an open's read past its cache. */
static void open_fetched(void *arg, int status, const struct rd_region_rec *rec)
{
	struct wait_ref *w = arg;
	struct rd_control *ctl = w->ctl;
	struct rd_conn *conn = conn_by_wait(ctl, w->id);
	struct roshm_ctl_region_open req;
	int ret;

	free(w);
	if (!conn)
		return;
	req = conn->park_req;
	rd_conn_unpark(ctl, conn);
	if (status == 0) {
		conn->fetched = malloc(sizeof(*conn->fetched));
		if (conn->fetched)
			*conn->fetched = *rec;
		ret = conn->fetched ? region_open(ctl, conn, &req) : -ENOMEM;
		free(conn->fetched);
		conn->fetched = NULL;
	} else {
		ret = status == -ETIMEDOUT ? -EAGAIN : -ENOENT; /* the store did not answer: again */
	}
	if (ret <= 0 && ret != -ECONNRESET && rd_send_status(conn->fd, ROSHM_CTL_REGION_OPEN, ret))
		ret = -ECONNRESET;
	if (ret == -ECONNRESET)
		rd_conn_close(ctl, conn, "reply failed");
}

/* The registry's answer to a new region's record: only now is it created. */
static void create_published(void *arg, int status)
{
	struct wait_ref *w = arg;
	struct rd_control *ctl = w->ctl;
	struct rd_conn *conn = conn_by_wait(ctl, w->id);
	struct roshm_ctl_region_reply rep;
	struct rd_region *rg;

	free(w);
	if (!conn)
		return; /* its client went: the handle went with it, and the record */
	rg = conn->put_rg;
	conn->put_rg = NULL;
	rd_conn_unpark(ctl, conn);
	if (status) {
		RD_LOGC(RD_LC_REGISTRY, NOTICE, "registry: publishing %s/%s: %s", rg->tenant, rg->name,
			status == -EEXIST ? "another node holds the name" : strerror(-status));
		rg->no_record = true; /* whatever is under the name, it is not ours to delete */
		rd_handle_release(ctl, conn->client, conn->put_hv, true);
		if (rd_send_status(conn->fd, conn->put_reattach ? ROSHM_CTL_REGION_REATTACH :
				ROSHM_CTL_REGION_CREATE, status == -EEXIST ? -EEXIST : -EAGAIN))
			rd_conn_close(ctl, conn, "reply failed");
		return;
	}
	memset(&rep, 0, sizeof(rep));
	rd_reply_hdr(&rep.hdr, conn->put_reattach ? ROSHM_CTL_REGION_REATTACH : ROSHM_CTL_REGION_CREATE,
		  sizeof(rep), 0);
	rep.handle = conn->put_hv;
	rep.data_size = rg->data_size;
	rep.map_size = rg->map_size;
	rep.epoch = rg->epoch;
	rep.owner = conn->client->cgid;
	RD_LOG(INFO, "region %s/%s %s by client %u: %llu bytes, epoch %016llx", rg->tenant,
	       rg->name, conn->put_reattach ? "re-attached (contents kept)" : "created",
	       conn->client->id, (unsigned long long)rg->data_size, (unsigned long long)rg->epoch);
	if (rd_send_reply(conn->fd, &rep, sizeof(rep), NULL, 0))
		rd_conn_close(ctl, conn, "reply failed");
}

/* ---- messages: REGION_CREATE, REGION_REATTACH, REGION_OPEN, REGION_CLOSE ---- */

/*
 * REGION_CREATE / REGION_REATTACH: the region's memory comes with the
 * request (@fd, the owner's memfd; the caller closes it): new, or kept from
 * before a roshmd restart (@reattach: its contents and log survive).
 */
static int region_create(struct rd_control *ctl, struct rd_conn *conn,
			 const struct roshm_ctl_region_create *req, int fd, bool reattach)
{
	const struct rd_config *cfg = ctl->cfg;
	struct rd_client *c = conn->client;
	struct rd_region_rec rec;
	struct rd_region *rg;
	uint64_t map_size;
	uint32_t hv;
	int ret;

	if (!memchr(req->name, 0, sizeof(req->name)) ||
	    !rd_valid_name(req->name) || req->size == 0 || req->size > cfg->max_region_size ||
	    req->policy > ROSHM_POLICY_GRANT || req->ntenants > ROSHM_POLICY_TENANTS_MAX ||
	    (req->policy != ROSHM_POLICY_LIST && req->ntenants))
		return -EINVAL;
	for (uint32_t i = 0; i < req->ntenants; i++)
		if (!memchr(req->tenants[i], 0, ROSHM_NAME_MAX) || !rd_valid_name(req->tenants[i]))
			return -EINVAL;
	if (req->txn_slots || req->slot_size) {
		if (!req->txn_slots || req->txn_slots > 65536 ||
		    (req->txn_slots & (req->txn_slots - 1)) || req->slot_size < ROSHM_TXN_SLOT_MIN ||
		    req->slot_size > cfg->txn_max_slot_size || req->slot_size % 64)
			return -EINVAL;
	}
	if (req->rsvd || (req->access & ~ROSHM_ACCESS_ALL) ||
	    (!req->win_len && req->win_off) ||
	    (req->win_len && (req->win_off > req->size || req->win_len > req->size - req->win_off)) ||
	    req->va_base > UINT64_MAX - req->size)
		return -EINVAL;
	map_size = roshm_region_map_size(req->size, req->txn_slots, req->slot_size);
	if (ctl->nregions >= cfg->max_regions)
		return -ENOSPC;
	if (ctl->tuse[c->tidx].regions >= cfg->tenants[c->tidx].quota.regions ||
	    ctl->tuse[c->tidx].bytes + map_size > cfg->tenants[c->tidx].quota.bytes) {
		ctl->tenant_region_refused[c->tidx]++;
		return -EDQUOT;
	}
	if (rd_region_find(ctl, c->tenant, req->name))
		return -EEXIST;
	ret = ctl->reg.ops->get_region(&ctl->reg, c->tenant, req->name, &rec);
	if (ret == 0 && strcmp(rec.node, cfg->node))
		return -EEXIST; /* published by another node */

	uint32_t id = 0;

	for (uint32_t i = 1; i <= cfg->max_regions && !id; i++)
		if (!ctl->slots[(ctl->next_region_id + i - 1) % cfg->max_regions + 1])
			id = (ctl->next_region_id + i - 1) % cfg->max_regions + 1;
	if (!id)
		return -ENOSPC;
	ctl->next_region_id = id; /* next search starts after it: ids are not reused at once */
	rg = calloc(1, sizeof(*rg));
	if (!rg)
		return -ENOMEM;
	rg->fd = -1;
	rg->defer.kind = RD_DEFER_REGION;
	rg->id = id;
	snprintf(rg->node, sizeof(rg->node), "%s", cfg->node);
	do
		rd_random_bytes(&rg->epoch, sizeof(rg->epoch));
	while (!rg->epoch);
	rd_random_bytes(&rg->key, sizeof(rg->key));
	memcpy(rg->tenant, c->tenant, sizeof(rg->tenant));
	memcpy(rg->name, req->name, sizeof(rg->name));
	rg->tidx = c->tidx;
	rg->policy = req->policy;
	rg->ntenants = req->ntenants;
	memcpy(rg->tenants, req->tenants, sizeof(rg->tenants));
	rg->xport = ctl->poller->local;
	rg->access = req->access ? req->access : ROSHM_ACCESS_ALL;
	rg->win_lo = req->win_len ? req->win_off : 0;
	rg->win_hi = req->win_len ? req->win_off + req->win_len : req->size;
	rg->va_base = req->va_base;
	rg->restricted = rd_region_restricted(rg->access, rg->win_lo, rg->win_hi, req->size,
					      rg->va_base);
	ret = rd_region_take(rg, &ctl->guard, fd, req->size, req->txn_slots, req->slot_size, reattach);
	if (ret) {
		RD_LOG(NOTICE, "region %s/%s from client %u refused: %s", c->tenant, req->name, c->id,
		       ret == -EFAULT ? "a page before its end is not allocated (write every page first)" :
		       ret == -EINVAL ? "not a sealable memfd of the right size (or not the same region)" :
					strerror(-ret));
		free(rg);
		return ret;
	}
	rg->gid = rd_grant_id(cfg->node, rg->tenant, rg->name, rg->grant_key);
	if (rg->policy == ROSHM_POLICY_GRANT && rg->txn_slots) {
		rg->nres = rg->txn_slots < RD_TXN_RES_NODES ? rg->txn_slots : RD_TXN_RES_NODES;
		rg->slot_owner = calloc((size_t)rg->txn_slots + rg->nres, sizeof(*rg->slot_owner));
		if (!rg->slot_owner) {
			rd_region_free(rg);
			free(rg);
			return -ENOMEM;
		}
		rg->node_res = rg->slot_owner + rg->txn_slots;
		for (uint32_t i = 0; i < rg->nres; i++)
			rg->node_res[i].seq = UINT64_MAX; /* none */
	}
	ret = rd_peers_reg_region(ctl, rg); /* peers' NICs reach it through its rkey */
	if (ret) {
		rd_region_free(rg);
		free(rg->slot_owner);
		free(rg);
		return ret;
	}
	rg->owner = c;
	rd_control_region_link(ctl, rg);
	ctl->slots[id] = rg;
	ctl->nregions++;
	ctl->tuse[rg->tidx].regions++;
	ctl->tuse[rg->tidx].bytes += rg->map_size;
	ret = handle_alloc(ctl, c, rg, NULL, &hv);
	if (ret) {
		rg->owner = NULL;
		rg->refs = 1;
		rd_control_region_put(ctl, rg);
		return ret;
	}
	rg->owner_handle = hv;
	{
		/* peers may reach it (tcp) and its log is applied by our poller */
		struct rd_cmd ex = { .type = RD_CMD_REGION_EXPORT, .region = rg };

		rd_poller_cmd(ctl->poller, &ex);
	}
	rd_region_to_rec(ctl, rg, &rec, RD_STATE_ACTIVE);
	/* The answer waits for the record: a region another node may open
	 * the moment its creator says so, and a name another node holds
	 * (EEXIST) is refused, not taken. */
	rd_conn_wait_for(ctl, conn, RD_WAIT_PUT);
	conn->put_rg = rg;
	conn->put_hv = hv;
	conn->put_reattach = reattach;
	struct wait_ref *w = wait_ref(ctl, conn);

	ret = w ? ctl->reg.ops->put_region(&ctl->reg, &rec, RD_REG_EXCL, create_published, w) : -ENOMEM;
	if (ret) {
		free(w);
		rd_conn_unpark(ctl, conn);
		conn->put_rg = NULL;
		RD_LOGC(RD_LC_REGISTRY, ERR, "registry: publishing %s/%s: %s", rg->tenant, rg->name,
			strerror(-ret));
		rd_handle_release(ctl, c, hv, true);
		return ret;
	}
	return 1;
}

/* REGION_OPEN, also run again when what it waited for came (@conn->fetched). */
static int region_open(struct rd_control *ctl, struct rd_conn *conn,
		       const struct roshm_ctl_region_open *req)
{
	struct rd_client *c = conn->client;
	struct roshm_ctl_region_reply rep;
	char tenant[ROSHM_NAME_MAX], name[ROSHM_NAME_MAX];
	struct rd_handle want = { 0 };
	struct rd_region_rec rec;
	struct rd_region *rg;
	const char *slash;
	uint32_t hv;
	int ret;

	if (!memchr(req->name, 0, sizeof(req->name)))
		return -EINVAL;
	slash = strchr(req->name, '/');
	if (slash) {
		size_t tl = (size_t)(slash - req->name);

		if (tl >= sizeof(tenant) || strlen(slash + 1) >= sizeof(name))
			return -EINVAL;
		memcpy(tenant, req->name, tl);
		tenant[tl] = 0;
		strcpy(name, slash + 1);
	} else {
		if (strlen(req->name) >= sizeof(name))
			return -EINVAL;
		memcpy(tenant, c->tenant, sizeof(tenant));
		strcpy(name, req->name);
	}
	if (!rd_valid_name(tenant) || !rd_valid_name(name) || req->rsvd ||
	    (req->access & ~ROSHM_ACCESS_ALL) || (!req->win_len && req->win_off) ||
	    req->win_off > UINT64_MAX - req->win_len)
		return -EINVAL;
	if (conn->fetched && !strcmp(conn->fetched->tenant, tenant) &&
	    !strcmp(conn->fetched->name, name)) {
		rec = *conn->fetched; /* what the registry just said, past its cache */
		ret = 0;
	} else {
		ret = ctl->reg.ops->get_region(&ctl->reg, tenant, name, &rec);
	}
	if (ret == -ENOENT && !conn->fetched && ctl->reg.ops->fetch_region) {
		/* Not in the cache: it may have been created a moment ago on
		 * another node. Ask the store; the answer comes later. */
		struct wait_ref *w;

		conn->park_req = *req;
		rd_conn_wait_for(ctl, conn, RD_WAIT_FETCH);
		w = wait_ref(ctl, conn);
		ret = w ? ctl->reg.ops->fetch_region(&ctl->reg, tenant, name, open_fetched, w) : -ENOMEM;
		if (!ret) {
			rd_reg_rate_take(ctl, c->tidx, 1);
			return 1;
		}
		free(w);
		rd_conn_unpark(ctl, conn);
		return -ENOENT;
	}
	if (ret)
		return ret == -EBADMSG || ret == -ENOENT ? -ENOENT : ret;
	/* The part asked for (all of it: the whole data area, every operation) */
	want.part = req->win_len || (req->access && req->access != ROSHM_ACCESS_ALL);
	want.lo = req->win_len ? req->win_off : 0;
	want.hi = req->win_len ? req->win_off + req->win_len : rec.data_size;
	want.access = req->access ? req->access : ROSHM_ACCESS_ALL;
	if (want.hi > rec.data_size)
		return -EINVAL;
	if (strcmp(rec.node, ctl->cfg->node)) {
		/* Remote: the policy is checked here, by the requester's roshmd,
		 * which is the one that authenticated the client's tenant. */
		const struct rd_grant *g = rec.policy == ROSHM_POLICY_GRANT ?
			  rd_client_grant(c, rec.tenant, rec.grants, rec.ngrants, &want) : NULL;
		bool ok = rec.policy == ROSHM_POLICY_GRANT ? g != NULL :
			  rec.policy != ROSHM_POLICY_OWNER &&
			  rd_policy_allows(rec.policy, rec.tenant, rec.ntenants,
					   (const char (*)[ROSHM_NAME_MAX])rec.tenants, c->tenant);

		if (!ok && rec.policy == ROSHM_POLICY_GRANT && !conn->fetched &&
		    !strcmp(c->tenant, rec.tenant) && ctl->reg.ops->fetch_region) {
			/* The grant may be newer than our cache: ask the store. */
			struct wait_ref *w;

			conn->park_req = *req;
			rd_conn_wait_for(ctl, conn, RD_WAIT_FETCH);
			w = wait_ref(ctl, conn);
			ret = w ? ctl->reg.ops->fetch_region(&ctl->reg, tenant, name, open_fetched, w) :
				  -ENOMEM;
			if (!ret) {
				rd_reg_rate_take(ctl, c->tidx, 1);
				return 1;
			}
			free(w);
			rd_conn_unpark(ctl, conn);
		}
		if (!ok) {
			RD_LOG(NOTICE, "open %s/%s refused for client %u (tenant %s): policy", tenant,
			       name, c->id, c->tenant);
			return -EACCES;
		}
		if (strcmp(rec.state, RD_STATE_ACTIVE))
			return -EAGAIN;
		/* verbs: the owner's MR for that grant alone, whose revoke
		 * holds at its NIC */
		want.nic_rkey = g ? g->nic_rkey : 0;
		struct rd_peer *peer = NULL;

		ret = rd_peers_open_remote(ctl, &rec, &rg, &peer);
		if (ret == -EINPROGRESS) {
			/* its node is being connected: the answer comes when
			 * that is done (rd_control_peer_ready) */
			if (conn->park_tries++ >= 2)
				return -EHOSTUNREACH; /* the node keeps going away */
			conn_park(ctl, conn, peer, req);
			return 1;
		}
		if (ret)
			return ret;
		goto grant;
	}
	rg = find_region_id(ctl, rec.region_id);
	if (!rg || !rg->owner || rg->epoch != rec.epoch || strcmp(rg->tenant, tenant) ||
	    strcmp(rg->name, name))
		return -ENOENT; /* record left over from an earlier instance */
	if (want.hi > rg->data_size)
		return -EINVAL;
	if (!policy_allows(rg, c, &want)) {
		RD_LOG(NOTICE, "open %s/%s refused for client %u (tenant %s): policy", tenant, name,
		       c->id, c->tenant);
		return -EACCES;
	}
grant:
	if (want.hi > rg->data_size)
		want.part = true;   /* the record was larger than the region: never more */
	ret = handle_alloc(ctl, c, rg, &want, &hv);
	if (ret) {
		if (rg->remote && !rg->refs) {
			rg->refs = 1;
			rd_control_region_put(ctl, rg);
		}
		return ret;
	}
	memset(&rep, 0, sizeof(rep));
	rd_reply_hdr(&rep.hdr, ROSHM_CTL_REGION_OPEN, sizeof(rep), 0);
	rep.handle = hv;
	rep.data_size = rg->data_size;
	rep.epoch = rg->epoch;
	/* who owns it: libroshm-verbs holds an rkey to the MRs of the process
	 * at the other end of its QP (a remote region's record says it, under
	 * its node's MAC) */
	rep.owner = rg->remote ? rec.ogid : rg->owner->cgid;
	if (rd_send_reply(conn->fd, &rep, sizeof(rep), NULL, 0))
		return -ECONNRESET;
	return 1;
}

/*
 * A REGION_OPEN that waits for its region's node to be connected. The
 * connection is not read meanwhile (the client waits for this answer; a
 * hang-up still ends it); the open runs again when the connect is done.
 */
bool rd_control_peer_waited(const struct rd_control *ctl, const struct rd_peer *p)
{
	for (const struct rd_conn *c = ctl->conns; c; c = c->next)
		if (c->park_peer == p)
			return true;
	return false;
}

void rd_control_peer_ready(struct rd_control *ctl, struct rd_peer *p, int status)
{
	for (struct rd_conn *c = ctl->conns, *next; c; c = next) {
		struct roshm_ctl_region_open req;
		int ret;

		next = c->next;
		if (c->park_peer != p || c->fd < 0)
			continue;
		rd_conn_unpark(ctl, c);
		req = c->park_req;
		ret = status ? (status == -EACCES ? -EACCES : -EHOSTUNREACH)
			     : region_open(ctl, c, &req);
		if (ret <= 0 && ret != -ECONNRESET) {
			c->park_tries = 0;
			if (rd_send_status(c->fd, ROSHM_CTL_REGION_OPEN, ret))
				ret = -ECONNRESET;
		}
		if (ret == -ECONNRESET)
			rd_conn_close(ctl, c, "reply failed");
		else if (ret == 1 && !c->park_peer)
			c->park_tries = 0;
	}
}

int rd_msg_region_create(struct rd_control *ctl, struct rd_conn *conn, const void *msg, int fd)
{
	return region_create(ctl, conn, msg, fd, false);
}

int rd_msg_region_reattach(struct rd_control *ctl, struct rd_conn *conn, const void *msg, int fd)
{
	return region_create(ctl, conn, msg, fd, true);
}

int rd_msg_region_open(struct rd_control *ctl, struct rd_conn *conn, const void *msg, int fd)
{
	(void)fd;
	return region_open(ctl, conn, msg);
}

int rd_msg_region_close(struct rd_control *ctl, struct rd_conn *conn, const void *msg, int fd)
{
	const struct roshm_ctl_region_close *req = msg;

	(void)fd;
	if (!rd_handle_lookup(conn->client, req->handle))
		return -EBADF;
	rd_handle_release(ctl, conn->client, req->handle, true);
	return 0;
}
