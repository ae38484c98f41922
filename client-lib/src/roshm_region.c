// SPDX-License-Identifier: MIT
/*
 * libroshm: regions. A region's memory is this process's own memfd,
 * handed to roshmd with the create (and kept, to hand it again after a
 * roshmd restart); opens are by name; every handle the application holds
 * maps to roshmd's value for it now (struct roshm_hmap).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "roshm.h"
#include "roshm_internal.h"

/*
 * Send a region create with the region's memory: with @fd >= 0 a re-attach
 * of a region we own (its memfd, contents kept); otherwise a new memfd that
 * we make and touch here (our pod's memory), which roshmd checks, seals and
 * initialises.
 */
int roshm__create_region(struct roshm *r, struct roshm_ctl_region_create *req, int fd,
			 struct roshm_owned **out, uint32_t *handle)
{
	struct roshm_ctl_region_reply rep;
	struct roshm_owned *o;
	uint64_t want;
	size_t mapped = 0;
	void *map = NULL;
	int mfd, ret;

	if (fd >= 0) {
		ret = roshm__ctl_call_fd(r->sock_fd, req, sizeof(*req), &rep, sizeof(rep), NULL, 0, NULL, fd);
		if (!ret && rep.hdr.status)
			ret = rep.hdr.status < 0 ? rep.hdr.status : -EPROTO;
		if (!ret && rep.hdr.len != sizeof(rep))
			ret = -EPROTO;
		if (!ret)
			*handle = rep.handle;
		return ret;
	}
	if (!req->size || req->size > (1ull << 40) || req->txn_slots > 65536 ||
	    req->slot_size > (1u << 20))
		return -EINVAL;
	want = roshm_region_map_size(req->size, req->txn_slots, req->slot_size);
	mfd = roshm__own_memory("roshm-region", want, false, &map, &mapped);
	if (mfd < 0)
		return mfd;
	ret = roshm__ctl_call_retry(r, req, sizeof(*req), &rep, sizeof(rep), NULL, 0, NULL, mfd);
	if (ret)
		goto err;
	if (rep.hdr.status) {
		ret = rep.hdr.status < 0 ? rep.hdr.status : -EPROTO;
		goto err;
	}
	const struct roshm_region_hdr *rh = map;

	/* roshmd wrote the header into our memory: check it all the same */
	if (rep.hdr.len != sizeof(rep) || rep.map_size != mapped || rep.data_size != req->size ||
	    rh->magic != ROSHM_REGION_MAGIC || rh->data_size != req->size ||
	    rh->data_off != roshm_region_data_off(req->txn_slots, req->slot_size)) {
		ret = -EPROTO;
		goto err;
	}
	o = calloc(1, sizeof(*o));
	if (!o) {
		ret = -ENOMEM;
		goto err;
	}
	o->handle = rep.handle;
	o->map = map;
	o->map_size = mapped;
	o->data = (uint8_t *)map + rh->data_off;
	o->data_size = req->size;
	o->fd = mfd;
	o->req = *req;
	o->owner = rep.owner;
	*out = o;
	*handle = rep.handle;
	return 0;
err:
	munmap(map, mapped);
	close(mfd);
	return ret;
}

int roshm_region_create(struct roshm *r, const char *name, uint64_t size,
			const struct roshm_region_opts *opts, uint32_t *handle)
{
	struct roshm_ctl_region_create req;
	struct roshm_owned *o;
	int ret;

	if (!name || !handle)
		return -EINVAL;
	memset(&req, 0, sizeof(req));
	roshm__ctl_hdr(&req.hdr, ROSHM_CTL_REGION_CREATE, sizeof(req));
	if (roshm__copy_name(req.name, sizeof(req.name), name))
		return -EINVAL;
	req.size = size;
	if (opts) {
		req.policy = opts->policy;
		req.ntenants = opts->ntenants;
		if (opts->ntenants > ROSHM_POLICY_TENANTS_MAX)
			return -EINVAL;
		for (uint32_t i = 0; i < opts->ntenants; i++)
			if (!opts->tenants[i] ||
			    roshm__copy_name(req.tenants[i], sizeof(req.tenants[i]), opts->tenants[i]))
				return -EINVAL;
		req.txn_slots = opts->txn_slots;
		req.slot_size = opts->slot_size;
		req.access = opts->access;
		req.win_off = opts->win_off;
		req.win_len = opts->win_len;
		req.va_base = opts->va_base;
	}
	ret = roshm__create_region(r, &req, -1, &o, handle);
	if (ret)
		return ret;
	/* A handle value the application will keep, even across reconnects. */
	if (r->remapped)
		for (uint32_t app = o->handle;; app += 1u << 16)
			if (!roshm__hmap_find(r, app)) {
				*handle = app;
				break;
			}
	ret = roshm__hmap_add(r, *handle, name, o);
	if (ret) {
		munmap(o->map, o->map_size);
		close(o->fd);
		free(o);
		return ret;
	}
	r->hmap[r->nhmap - 1].srv = o->handle;
	o->handle = *handle;
	o->next = r->owned;
	r->owned = o;
	return 0;
}

void *roshm_region_data(struct roshm *r, uint32_t handle, uint64_t *size)
{
	for (struct roshm_owned *o = r->owned; o; o = o->next)
		if (o->handle == handle) {
			if (size)
				*size = o->data_size;
			return o->data;
		}
	return NULL;
}

int roshm_region_fd(struct roshm *r, uint32_t handle, uint64_t *data_off)
{
	for (struct roshm_owned *o = r->owned; o; o = o->next)
		if (o->handle == handle) {
			int fd = fcntl(o->fd, F_DUPFD_CLOEXEC, 0);

			if (fd < 0)
				return -errno;
			if (data_off)
				*data_off = (uint64_t)(o->data - (uint8_t *)o->map);
			return fd;
		}
	return -EBADF;
}

int roshm__open_region(struct roshm *r, const char *name, const struct roshm_part *part,
		       uint32_t *handle, uint64_t *size, uint64_t *owner)
{
	struct roshm_ctl_region_open req;
	struct roshm_ctl_region_reply rep;
	int ret;

	memset(&req, 0, sizeof(req));
	roshm__ctl_hdr(&req.hdr, ROSHM_CTL_REGION_OPEN, sizeof(req));
	if (roshm__copy_name(req.name, sizeof(req.name), name))
		return -EINVAL;
	if (part) {
		req.win_off = part->off;
		req.win_len = part->len;
		req.access = part->access;
	}
	ret = roshm__ctl_call(r->sock_fd, &req, sizeof(req), &rep, sizeof(rep), NULL, 0, NULL);
	if (ret)
		return ret;
	if (rep.hdr.status)
		return rep.hdr.status < 0 ? rep.hdr.status : -EPROTO;
	if (rep.hdr.len != sizeof(rep))
		return -EPROTO;
	*handle = rep.handle;
	if (size)
		*size = rep.data_size;
	if (owner)
		*owner = rep.owner;
	return 0;
}

int roshm_region_open_part(struct roshm *r, const char *name, const struct roshm_part *part,
			   uint32_t *handle, uint64_t *size)
{
	struct roshm_part all = { 0 };
	uint64_t owner = 0;
	uint32_t srv;
	int ret;

	if (!name || !handle)
		return -EINVAL;
	if (!part)
		part = &all;
	ret = roshm__ensure_attached(r);
	if (ret)
		return ret;
	ret = roshm__open_region(r, name, part, &srv, size, &owner);
	if ((ret == -ECONNRESET || ret == -EPIPE) && !(ret = roshm__reconnect(r)))
		ret = roshm__open_region(r, name, part, &srv, size, &owner);
	if (ret)
		return ret;
	*handle = srv;
	if (r->remapped)
		for (uint32_t app = srv;; app += 1u << 16)
			if (!roshm__hmap_find(r, app)) {
				*handle = app;
				break;
			}
	ret = roshm__hmap_add(r, *handle, name, NULL);
	if (ret)
		return ret;
	r->hmap[r->nhmap - 1].srv = srv;
	r->hmap[r->nhmap - 1].part = *part;
	r->hmap[r->nhmap - 1].owner = owner;
	return 0;
}

int roshm_region_owner(struct roshm *r, uint32_t handle, uint64_t *owner)
{
	const struct roshm_hmap *m = roshm__hmap_find(r, handle);

	if (!m || !owner)
		return -EBADF;
	*owner = m->owned ? m->owned->owner : m->owner;
	return 0;
}

int roshm_region_open(struct roshm *r, const char *name, uint32_t *handle, uint64_t *size)
{
	return roshm_region_open_part(r, name, NULL, handle, size);
}

int roshm__grant_call(struct roshm *r, uint32_t srv_handle, uint32_t srv_peer, uint32_t op,
		      uint64_t gid, const char *name, const struct roshm_part *part,
		      uint64_t *gid_out)
{
	struct roshm_ctl_region_grant req;
	struct roshm_ctl_region_grant_reply rep;
	int ret;

	memset(&req, 0, sizeof(req));
	roshm__ctl_hdr(&req.hdr, ROSHM_CTL_REGION_GRANT, sizeof(req));
	req.handle = srv_handle;
	req.peer = srv_peer;
	req.op = op;
	req.gid = gid;
	if (part) {
		req.win_off = part->off;
		req.win_len = part->len;
		req.access = part->access;
	}
	if (name && roshm__copy_name(req.name, sizeof(req.name), name))
		return -EINVAL;
	memset(&rep, 0, sizeof(rep));
	ret = roshm__ctl_call(r->sock_fd, &req, sizeof(req), &rep, sizeof(rep), NULL, 0, NULL);
	if (ret)
		return ret;
	if (rep.hdr.status > 0)
		return -EPROTO;
	if (rep.hdr.len == sizeof(rep)) {
		if (gid_out)
			*gid_out = rep.gid;
	} else if (rep.hdr.len != sizeof(rep.hdr) || !rep.hdr.status) {
		return -EPROTO;
	}
	return rep.hdr.status;
}

static struct roshm_owned *owned_find(struct roshm *r, uint32_t handle)
{
	for (struct roshm_owned *o = r->owned; o; o = o->next)
		if (o->handle == handle)
			return o;
	return NULL;
}

/* Drop grant @i of @o; roshmd's goes too unless another of ours names the
 * same region. A roshmd that went away took it along: never wait for one. */
static int grant_forget(struct roshm *r, struct roshm_owned *o, uint32_t i)
{
	struct roshm_grant g = o->grants[i];
	int ret = 0;

	o->grants[i] = o->grants[--o->ngrants];
	for (uint32_t j = 0; j < o->ngrants; j++)
		if (roshm__grant_same(&o->grants[j], &g))
			return 0;
	if (r->sock_fd >= 0)
		ret = roshm__grant_call(r, roshm__srv_handle(r, o->handle), 0, ROSHM_GRANT_REMOVE,
					g.gid, NULL, &g.part, NULL);
	return ret == -ECONNRESET || ret == -EPIPE ? 0 : ret;
}

/* What was granted through @peer ends with the handle (roshm_region_close). */
void roshm__grants_forget_peer(struct roshm *r, uint32_t peer)
{
	for (struct roshm_owned *o = r->owned; o; o = o->next)
		for (uint32_t i = o->ngrants; i-- > 0;)
			if (o->grants[i].peer == peer)
				grant_forget(r, o, i);
}

/* @part in the one form roshmd keeps: all of it as zeroes. */
static struct roshm_part part_norm(const struct roshm_owned *o, const struct roshm_part *p)
{
	struct roshm_part n = p ? *p : (struct roshm_part){ 0 };

	if (!n.off && n.len == o->data_size)
		n.len = 0;
	if (n.access == ROSHM_ACCESS_ALL)
		n.access = 0;
	return n;
}

static int grant_add(struct roshm *r, uint32_t handle, uint32_t peer, const char *name,
		     const struct roshm_part *part, bool owner)
{
	struct roshm_owned *o = owned_find(r, handle);
	struct roshm_hmap *m = roshm__hmap_find(r, handle);
	struct roshm_grant g = { .peer = peer };
	uint32_t op = peer ? ROSHM_GRANT_ADD : owner ? ROSHM_GRANT_ADD_OWNER : ROSHM_GRANT_ADD_NAME;
	int ret;

	if (!m || (peer && !roshm__hmap_find(r, peer)))
		return -EBADF;
	if (!o)
		return -EACCES;
	if (name && roshm__copy_name(g.name, sizeof(g.name), name))
		return -EINVAL;
	g.part = part_norm(o, part);
	ret = roshm__ensure_attached(r);
	if (ret)
		return ret;
	ret = roshm__grant_call(r, m->srv, peer ? roshm__srv_handle(r, peer) : 0, op, 0,
				name ? g.name : NULL, &g.part, &g.gid);
	if ((ret == -ECONNRESET || ret == -EPIPE) && !(ret = roshm__reconnect(r)))
		ret = roshm__grant_call(r, roshm__srv_handle(r, handle),
					peer ? roshm__srv_handle(r, peer) : 0, op, 0,
					name ? g.name : NULL, &g.part, &g.gid);
	if ((ret && ret != -EAGAIN) || !g.gid)
		return ret;
	/* made (with -EAGAIN too: roshmd keeps it): ours to give again and take
	 * back. A part is counted (each grant of it wants its revoke), the
	 * rest is not. */
	for (uint32_t i = 0; i < o->ngrants && !part && !owner; i++)
		if (roshm__grant_same(&o->grants[i], &g) && o->grants[i].peer == g.peer &&
		    !strcmp(o->grants[i].name, g.name))
			return ret;
	if (!(o->ngrants % 8)) {
		struct roshm_grant *n = realloc(o->grants, (o->ngrants + 8) * sizeof(*n));

		if (!n)
			return ret; /* made; not given again after a restart */
		o->grants = n;
	}
	o->grants[o->ngrants++] = g;
	return ret;
}

/* Take back what was granted through @peer or under @name: every part,
 * or (@part) that one. */
static int grant_remove(struct roshm *r, uint32_t handle, uint32_t peer, const char *name,
			const struct roshm_part *part)
{
	struct roshm_owned *o = owned_find(r, handle);
	char n[ROSHM_NAME_MAX] = "";
	struct roshm_grant want;
	int ret = 0, e;

	if (!roshm__hmap_find(r, handle))
		return -EBADF;
	if (!o)
		return -EACCES;
	if (name && roshm__copy_name(n, sizeof(n), name))
		return -EINVAL;
	want.part = part_norm(o, part);
	for (uint32_t i = o->ngrants; i-- > 0;) {
		want.gid = o->grants[i].gid;
		if ((name ? !strcmp(o->grants[i].name, n) : o->grants[i].peer == peer) &&
		    (!part || roshm__grant_same(&o->grants[i], &want))) {
			if ((e = grant_forget(r, o, i)) && !ret)
				ret = e;
			if (part)
				break;   /* one grant of it */
		}
	}
	return ret;
}

int roshm_region_grant(struct roshm *r, uint32_t handle, uint32_t peer)
{
	return peer ? grant_add(r, handle, peer, NULL, NULL, false) : -EBADF;
}

int roshm_region_revoke(struct roshm *r, uint32_t handle, uint32_t peer)
{
	return peer ? grant_remove(r, handle, peer, NULL, NULL) : -EBADF;
}

int roshm_region_grant_name(struct roshm *r, uint32_t handle, const char *name)
{
	return name ? grant_add(r, handle, 0, name, NULL, false) : -EINVAL;
}

int roshm_region_revoke_name(struct roshm *r, uint32_t handle, const char *name)
{
	return name ? grant_remove(r, handle, 0, name, NULL) : -EINVAL;
}

int roshm_region_grant_part(struct roshm *r, uint32_t handle, const char *name,
			    const struct roshm_part *part)
{
	return name && part ? grant_add(r, handle, 0, name, part, false) : -EINVAL;
}

int roshm_region_grant_owner(struct roshm *r, uint32_t handle, const char *name,
			     const struct roshm_part *part)
{
	static const struct roshm_part all;

	return name ? grant_add(r, handle, 0, name, part ? part : &all, true) : -EINVAL;
}

int roshm_region_revoke_part(struct roshm *r, uint32_t handle, const char *name,
			     const struct roshm_part *part)
{
	return name && part ? grant_remove(r, handle, 0, name, part) : -EINVAL;
}

int roshm_region_close(struct roshm *r, uint32_t handle)
{
	struct roshm_ctl_region_close req;
	struct roshm_ctl_region_reply rep;
	struct roshm_owned **pp;
	struct roshm_hmap *m = roshm__hmap_find(r, handle);
	int ret;

	if (!m)
		return -EBADF;
	ret = roshm__ensure_attached(r);
	if (ret)
		return ret;
	/* What was granted to the owner of this region ends with our handle. */
	roshm__grants_forget_peer(r, handle);
	memset(&req, 0, sizeof(req));
	roshm__ctl_hdr(&req.hdr, ROSHM_CTL_REGION_CLOSE, sizeof(req));
	req.handle = m->srv;
	ret = roshm__ctl_call(r->sock_fd, &req, sizeof(req), &rep, sizeof(rep), NULL, 0, NULL);
	if (ret)
		return ret;
	/* -EBADF: roshmd closed it already (a grant taken back): it is gone */
	if (rep.hdr.status && rep.hdr.status != -EBADF)
		return rep.hdr.status < 0 ? rep.hdr.status : -EPROTO;
	for (pp = &r->owned; *pp; pp = &(*pp)->next) {
		if ((*pp)->handle == handle) {
			struct roshm_owned *o = *pp;

			*pp = o->next;
			munmap(o->map, o->map_size);
			close(o->fd);
			free(o->grants);
			free(o);
			break;
		}
	}
	*m = r->hmap[--r->nhmap];
	return 0;
}
