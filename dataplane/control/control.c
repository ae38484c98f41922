// SPDX-License-Identifier: MIT
/*
 * The control thread: UNIX socket server for attach, regions and admin
 * requests, registry updates, signals. It never touches a ring's data path;
 * every change the poller must see is a command (rd_poller_cmd) that is
 * applied before the control thread answers the client or frees anything.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <rte_log.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "control/control.h"
#include "control/metrics.h"
#include "poller/sqe.h"

#ifndef ROSHM_VERSION
#define ROSHM_VERSION "0"
#endif

/*
 * A control-socket connection: a client attaching (HELLO, then CHANNEL),
 * an attached client, or roshmctl with an admin request. Until it is
 * attached it counts against admin.max_pending and must finish (or send its
 * next request) within admin.hello_timeout_ms.
 */
struct rd_conn {
	struct rd_ep_tag tag;         /* RD_EP_CONN */
	int fd;
	pid_t pid;
	uid_t uid;
	struct rd_client *client;     /* after CHANNEL */
	/* after HELLO, until CHANNEL: what was granted (and reserved in the quota) */
	bool hello;
	int tidx;
	char tenant[ROSHM_NAME_MAX];
	char pod[ROSHM_NAME_MAX];
	uint32_t sq, cq;
	uint64_t arena;
	struct roshm_chan_layout lay;
	uint64_t deadline_ns;         /* not attached: closed then; 0 while a drain answers */
	/*
	 * A request that waits (the connection is not read meanwhile): an
	 * open for its region's node to be connected (park_peer) or for the
	 * registry to be read past its cache (W_FETCH), a create for its record
	 * to be in the registry (W_PUT). wait_id names it to the registry's
	 * completion, which may come after the connection is gone.
	 */
	enum { W_NONE, W_PEER, W_FETCH, W_PUT } wait;
	uint64_t wait_id;
	struct rd_peer *park_peer;
	struct roshm_ctl_region_open park_req;
	struct rd_region_rec *fetched; /* the record the fetch brought, for the open's rerun */
	int park_tries;
	struct rd_region *put_rg;     /* W_PUT: the new region and its owner handle */
	uint32_t put_hv;
	bool put_reattach;
	struct rd_conn *next, *prev;
};

/* epoll tags for the fds that are not connections */
static struct rd_ep_tag tag_listen = { RD_EP_LISTEN }, tag_sig = { RD_EP_SIG }, tag_ev = { RD_EP_EV };
/* the registry's event fd: its work runs from rd_control_run's dispatch */
static struct rd_ep_tag tag_reg = { RD_EP_EV };
/* the hole guard's: a region's owner punched a hole in it */
static struct rd_ep_tag tag_guard = { RD_EP_EV };

uint64_t rd_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void random_bytes(void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = getrandom(p, len, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			/* getrandom(2) cannot fail with a valid buffer on Linux >= 3.17. */
			abort();
		}
		p += n;
		len -= (size_t)n;
	}
}

int rd_control_cmd(struct rd_control *ctl, struct rd_cmd *cmd)
{
	return rd_poller_cmd(ctl->poller, cmd);
}

void rd_control_epoll_add(struct rd_control *ctl, int fd, void *tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = tag };

	epoll_ctl(ctl->epfd, EPOLL_CTL_ADD, fd, &ev);
}

void rd_control_epoll_del(struct rd_control *ctl, int fd)
{
	epoll_ctl(ctl->epfd, EPOLL_CTL_DEL, fd, NULL);
}

/* ---- replies ------------------------------------------------------------ */

static void reply_hdr(struct roshm_ctl_hdr *h, uint16_t type, size_t len, int status)
{
	h->magic = ROSHM_CTL_MAGIC;
	h->type = type;
	h->version = ROSHM_ABI_VERSION;
	h->len = (uint32_t)len;
	h->status = status;
}

static int send_reply(int fd, const void *buf, size_t len, const int *fds, int nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * ROSHM_CHANNEL_NFDS)];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (nfds > 0) {
		struct cmsghdr *c;

		memset(&u, 0, sizeof(u));
		msg.msg_control = u.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
	}
	do {
		n = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
	} while (n < 0 && errno == EINTR);
	return n == (ssize_t)len ? 0 : -EIO;
}

static int send_status(int fd, uint16_t type, int status)
{
	struct roshm_ctl_hdr h;

	reply_hdr(&h, type, sizeof(h), status);
	return send_reply(fd, &h, sizeof(h), NULL, 0);
}

/* ---- regions ------------------------------------------------------------- */

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

static struct rd_region *find_region(struct rd_control *ctl, const char *tenant, const char *name)
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
static void region_free(struct rd_control *ctl, struct rd_region *rg)
{
	if (rg->zombie) {
		for (struct rd_region **pp = &ctl->zombie_regions; *pp; pp = &(*pp)->znext)
			if (*pp == rg) {
				*pp = rg->znext;
				break;
			}
	}
	if (!rg->remote) {
		rd_peers_unreg_region(ctl, rg);
		rd_region_free(rg);
	}
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
		region_free(ctl, rg);
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
	rec->data_size = rg->data_size;
	rec->policy = rg->policy;
	rec->ntenants = rg->ntenants;
	memcpy(rec->tenants, rg->tenants, sizeof(rec->tenants));
	/* our own copies: the header is the owner's to scribble on */
	rec->txn_slots = rg->txn_slots;
	rec->slot_size = rg->slot_size;
}

/* The owner gives the region up: peers' handles now complete with -ESTALE. */
void rd_region_unpublish(struct rd_control *ctl, struct rd_region *rg)
{
	struct rd_cmd cmd = { .type = RD_CMD_REGION_DEAD, .region = rg };
	int ret;

	rd_poller_cmd(ctl->poller, &cmd);
	ret = rg->no_record ? 0 : ctl->reg.ops->del_region(&ctl->reg, rg->tenant, rg->name, NULL, NULL);
	if (ret && ret != -ENOENT)
		RD_LOG(WARNING, "registry: removing %s/%s: %s", rg->tenant, rg->name, strerror(-ret));
	RD_LOG(INFO, "region %s/%s closed by its owner (client %u)", rg->tenant, rg->name,
	       rg->owner ? rg->owner->id : 0);
	rg->owner = NULL;
}

/* ---- handles -------------------------------------------------------------- */

static int handle_alloc(struct rd_control *ctl, struct rd_client *c, struct rd_region *rg,
			uint32_t *handle)
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
				      .handle = hv };
		int ret = rd_poller_cmd(ctl->poller, &cmd);

		if (ret)
			return ret;
		h->region = rg;
		rg->refs++;
		c->handle_hint = i + 1;
		*handle = hv;
		return 0;
	}
	return -EMFILE;
}

static struct rd_handle *handle_lookup(struct rd_client *c, uint32_t hv)
{
	uint32_t idx = hv & 0xffffu;

	if (idx >= c->nhandles || !c->ctl_handles[idx].region ||
	    c->ctl_handles[idx].gen != (uint16_t)(hv >> 16))
		return NULL;
	return &c->ctl_handles[idx];
}

/* Drop one handle; @notify_poller is false when the client is already gone
 * from the poller (detach). */
static void handle_release(struct rd_control *ctl, struct rd_client *c, uint32_t hv,
			   bool notify_poller)
{
	struct rd_handle *h = handle_lookup(c, hv);
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

/* ---- clients -------------------------------------------------------------- */

static uint32_t round_pow2(uint32_t v)
{
	uint32_t p = 1;

	while (p < v && p < (1u << 31))
		p <<= 1;
	return p;
}

/* Free a client the poller no longer touches (detach, or its graveyard). */
static void client_free(struct rd_control *ctl, struct rd_client *c)
{
	if (c->zombie) {
		for (struct rd_client **pp = &ctl->zombie_clients; *pp; pp = &(*pp)->znext)
			if (*pp == c) {
				*pp = c->znext;
				break;
			}
	}
	rd_peers_unreg_client(ctl, c);
	if (c->chan)
		munmap(c->chan, c->chan_size);
	if (c->sq_rfd >= 0)
		close(c->sq_rfd);
	if (c->cq_wfd >= 0)
		close(c->cq_wfd);
	free(c->ctl_handles);
	free(c->dp_handles);
	free(c);
}

static void client_detach(struct rd_control *ctl, struct rd_client *c, const char *why)
{
	struct rd_cmd cmd = { .type = RD_CMD_CLIENT_DEL, .client = c };
	struct rd_client **pp;
	int now;

	now = rd_poller_cmd(ctl->poller, &cmd); /* also takes sq_rfd out of its epoll */
	for (uint32_t i = 0; i < c->nhandles; i++)
		if (c->ctl_handles[i].region)
			handle_release(ctl, c, rd_handle_make(i, c->ctl_handles[i].gen), false);
	for (pp = &ctl->clients; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	ctl->nclients--;
	ctl->client_slots[c->id & 0xffffu] = NULL;
	ctl->tuse[c->tidx].clients--;
	ctl->tuse[c->tidx].bytes -= c->chan_size;
	ctl->tenant_sqes_gone[c->tidx] += RD_STAT_GET(c->stats.sqes);
	RD_LOG(INFO, "client %u (pid %d, tenant %s) detached: %s", c->id, (int)c->pid, c->tenant,
	       why);
	if (now == 1) {
		client_free(ctl, c);
		return;
	}
	/* WRs in flight still use its arena: the poller hands it back after. */
	c->zombie = true;
	c->znext = ctl->zombie_clients;
	ctl->zombie_clients = c;
}

/*
 * HELLO: authenticate the tenant, grant ring and arena sizes within the
 * limits and the tenant's quota (reserved until CHANNEL or the connection
 * ends), and say how big the client's channel memfd must be.
 */
static int do_hello(struct rd_control *ctl, struct rd_conn *conn, const void *buf, size_t len)
{
	const struct roshm_ctl_hello *req = buf;
	const struct rd_config *cfg = ctl->cfg;
	struct roshm_ctl_hello_reply rep;
	char tok[ROSHM_TOKEN_MAX];
	uint64_t arena;
	uint32_t sq, cq;
	int tidx;

	if (conn->client || conn->hello)
		return -EALREADY;
	if (len != sizeof(*req) || !memchr(req->tenant, 0, sizeof(req->tenant)) ||
	    !memchr(req->token, 0, sizeof(req->token)) || !memchr(req->pod, 0, sizeof(req->pod)) ||
	    (req->pod[0] && !rd_valid_name(req->pod)))
		return -EINVAL;
	tidx = rd_config_tenant_idx(cfg, req->tenant);
	/* Compare the whole zero-padded buffers in constant time. */
	memset(tok, 0, sizeof(tok));
	if (tidx >= 0)
		memcpy(tok, cfg->tenants[tidx].token, sizeof(tok));
	if (tidx < 0 || CRYPTO_memcmp(tok, req->token, sizeof(tok)) != 0) {
		RD_LOG(WARNING, "attach refused: pid %d uid %u, tenant '%.63s': bad tenant or token",
		       (int)conn->pid, (unsigned)conn->uid, req->tenant);
		return -EACCES;
	}
	sq = round_pow2(req->sq_entries ? req->sq_entries : cfg->sq_entries);
	cq = round_pow2(req->cq_entries ? req->cq_entries : cfg->cq_entries);
	if (cq < sq)
		cq = sq;
	arena = req->arena_size ? req->arena_size : cfg->arena_size;
	if (sq < 2 || sq > cfg->max_sq_entries || cq > 2 * cfg->max_sq_entries ||
	    arena > cfg->max_arena_size)
		return -EINVAL;
	arena = (arena + 4095) & ~4095ull;
	roshm_chan_layout(sq, cq, arena, &conn->lay);
	if (ctl->nclients >= cfg->max_clients)
		return -EMFILE;
	if (ctl->tuse[tidx].clients >= cfg->tenants[tidx].quota.clients ||
	    ctl->tuse[tidx].bytes + conn->lay.size > cfg->tenants[tidx].quota.bytes) {
		RD_LOG(NOTICE, "attach refused: pid %d, tenant %s: quota (clients %u, bytes %llu)",
		       (int)conn->pid, req->tenant, ctl->tuse[tidx].clients,
		       (unsigned long long)ctl->tuse[tidx].bytes);
		return -EDQUOT;
	}
	ctl->tuse[tidx].clients++;
	ctl->tuse[tidx].bytes += conn->lay.size;
	conn->hello = true;
	conn->tidx = tidx;
	conn->sq = sq;
	conn->cq = cq;
	conn->arena = arena;
	memcpy(conn->tenant, req->tenant, sizeof(conn->tenant));
	memcpy(conn->pod, req->pod, sizeof(conn->pod));
	memset(&rep, 0, sizeof(rep));
	reply_hdr(&rep.hdr, ROSHM_CTL_HELLO, sizeof(rep), 0);
	rep.client_id = 0;
	rep.flags = cfg->hugepages == RD_HUGE_OFF ? 0 :
		    cfg->hugepages == RD_HUGE_ON ? ROSHM_HELLO_F_HUGETLB_OK | ROSHM_HELLO_F_HUGETLB_REQ :
						   ROSHM_HELLO_F_HUGETLB_OK;
	rep.sq_entries = sq;
	rep.cq_entries = cq;
	rep.arena_size = arena;
	rep.chan_size = conn->lay.size;
	rep.instance = ctl->instance;
	snprintf(rep.node, sizeof(rep.node), "%s", cfg->node);
	if (send_reply(conn->fd, &rep, sizeof(rep), NULL, 0))
		return -ECONNRESET;
	/* The one extension an unattached connection gets: the CHANNEL, for
	 * which making and touching the channel takes the client time in
	 * proportion to its size (a 4 GiB arena: seconds). */
	conn->deadline_ns = rd_mono_ns() + (uint64_t)cfg->hello_timeout_ms * 1000000ull +
			    (conn->lay.size >> 20) * 4000000ull;
	return 1;
}

/* A free client slot (the low 16 bits of its id); the high bits count reuse. */
static int client_slot(struct rd_control *ctl, uint32_t *id)
{
	for (uint32_t i = 0; i < ctl->cfg->max_clients; i++) {
		uint32_t slot = (ctl->next_client_id + i) % ctl->cfg->max_clients;

		if (!ctl->client_slots[slot]) {
			ctl->next_client_id = slot + 1;
			*id = slot | (uint32_t)(++ctl->next_slot_gen) << 16;
			if (!*id)
				*id = slot | 1u << 16;
			return 0;
		}
	}
	return -EMFILE;
}

/* CHANNEL: take the client's channel memfd (@fd, ours to close). */
static int do_channel(struct rd_control *ctl, struct rd_conn *conn, const void *buf, size_t len,
		      int fd)
{
	const struct roshm_ctl_channel *req = buf;
	const struct rd_config *cfg = ctl->cfg;
	const struct roshm_chan_layout *l = &conn->lay;
	struct roshm_ctl_hdr rep;
	struct rd_client *c = NULL;
	unsigned flags = RD_MEM_NO_HOLES;
	int sq_sp[2] = { -1, -1 }, cq_sp[2] = { -1, -1 };
	int ret;

	if (!conn->hello || conn->client)
		return -EPROTO;
	if (len != sizeof(*req) || fd < 0)
		return -EINVAL;
	if (cfg->hugepages != RD_HUGE_OFF)
		flags |= RD_MEM_HUGE_OK;
	if (cfg->hugepages == RD_HUGE_ON)
		flags |= RD_MEM_HUGE_REQ;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->sq_rfd = c->cq_wfd = -1;
	c->defer.kind = RD_DEFER_CLIENT;
	c->nhandles = cfg->max_handles;
	c->ctl_handles = calloc(c->nhandles, sizeof(*c->ctl_handles));
	c->dp_handles = calloc(c->nhandles, sizeof(*c->dp_handles));
	if (!c->ctl_handles || !c->dp_handles) {
		ret = -ENOMEM;
		goto err;
	}
	ret = rd_memfd_take(fd, l->size, flags, &c->chan, &c->chan_size, &c->hugetlb);
	if (ret) {
		RD_LOG(NOTICE, "client pid %d: channel memory refused: %s", (int)conn->pid,
		       ret == -EFAULT ? "pages not all allocated (touch them first)" :
		       ret == -EINVAL ? "not a sealable memfd of the agreed size and kind" : strerror(-ret));
		goto err;
	}
	ret = client_slot(ctl, &c->id);
	if (ret)
		goto err;
	c->sock = conn->fd;
	c->pid = conn->pid;
	c->uid = conn->uid;
	c->tidx = conn->tidx;
	memcpy(c->tenant, conn->tenant, sizeof(c->tenant));
	memcpy(c->pod, conn->pod, sizeof(c->pod));
	/* The header is written once, here; roshmd keeps its own copy of every
	 * size and offset and never reads it back. */
	c->hdr = c->chan;
	memset(c->hdr, 0, sizeof(*c->hdr));
	c->hdr->magic = ROSHM_CHAN_MAGIC;
	c->hdr->abi_version = ROSHM_ABI_VERSION;
	c->hdr->client_id = c->id;
	c->hdr->total_size = l->size;
	c->hdr->sq_entries = conn->sq;
	c->hdr->cq_entries = conn->cq;
	c->hdr->sq_idx_off = l->sq_idx_off;
	c->hdr->sq_off = l->sq_off;
	c->hdr->cq_idx_off = l->cq_idx_off;
	c->hdr->cq_off = l->cq_off;
	c->hdr->arena_off = l->arena_off;
	c->hdr->arena_size = conn->arena;
	struct roshm_ring_idx *sqi = (void *)((uint8_t *)c->chan + l->sq_idx_off);
	struct roshm_ring_idx *cqi = (void *)((uint8_t *)c->chan + l->cq_idx_off);

	/* A fresh ring: whatever the client left in the indices is gone. */
	memset(sqi, 0, sizeof(*sqi));
	memset(cqi, 0, sizeof(*cqi));
	c->sq_khead = &sqi->head;
	c->sq_ktail = &sqi->tail;
	c->sqes = (void *)((uint8_t *)c->chan + l->sq_off);
	c->sq_entries = conn->sq;
	c->sq_mask = conn->sq - 1;
	c->cq_khead = &cqi->head;
	c->cq_ktail = &cqi->tail;
	c->cqes = (void *)((uint8_t *)c->chan + l->cq_off);
	c->cq_entries = conn->cq;
	c->cq_mask = conn->cq - 1;
	c->arena = (uint8_t *)c->chan + l->arena_off;
	c->arena_size = conn->arena;
	ret = rd_peers_reg_client(ctl, c); /* READs land in the arena, WRITEs leave from it */
	if (ret)
		goto err;
	/* Wakeups: a datagram socketpair per direction; the client's ends go
	 * out with the reply and are closed here then. Each side owns its own
	 * file description, so no flag the client sets can block the poller. */
	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sq_sp) < 0 ||
	    socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, cq_sp) < 0) {
		ret = -errno;
		goto err;
	}
	c->sq_rfd = sq_sp[0];
	c->cq_wfd = cq_sp[1];
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = c->sq_rfd };

	if (epoll_ctl(ctl->poller->epfd, EPOLL_CTL_ADD, c->sq_rfd, &ev) < 0) {
		ret = -errno;
		goto err;
	}
	struct rd_cmd cmd = { .type = RD_CMD_CLIENT_ADD, .client = c };

	ret = rd_poller_cmd(ctl->poller, &cmd);
	if (ret) {
		epoll_ctl(ctl->poller->epfd, EPOLL_CTL_DEL, c->sq_rfd, NULL);
		goto err;
	}
	/* The quota reserved at HELLO is the client's now. */
	ctl->tuse[c->tidx].bytes += c->chan_size - l->size;
	conn->hello = false;
	c->next = ctl->clients;
	ctl->clients = c;
	ctl->nclients++;
	ctl->client_slots[c->id & 0xffffu] = c;
	conn->client = c;
	c->conn = conn;
	conn->deadline_ns = 0;
	ctl->npending--;

	memset(&rep, 0, sizeof(rep));
	reply_hdr(&rep, ROSHM_CTL_CHANNEL, sizeof(rep), 0);
	int fds[ROSHM_CHANNEL_NFDS];

	fds[ROSHM_CHANNEL_FD_SQ_EVENT] = sq_sp[1];
	fds[ROSHM_CHANNEL_FD_CQ_EVENT] = cq_sp[0];
	RD_LOG(INFO, "client %u attached: pid %d uid %u tenant %s%s%s sq %u cq %u arena %llu%s", c->id,
	       (int)c->pid, (unsigned)c->uid, c->tenant, c->pod[0] ? " pod " : "", c->pod, c->sq_entries,
	       c->cq_entries, (unsigned long long)c->arena_size, c->hugetlb ? " hugetlb" : " (4k pages)");
	ret = send_reply(conn->fd, &rep, sizeof(rep), fds, ROSHM_CHANNEL_NFDS);
	close(sq_sp[1]);
	close(cq_sp[0]);
	if (ret)
		return -ECONNRESET; /* caller detaches */
	return 1;
err:
	if (sq_sp[1] >= 0)
		close(sq_sp[1]);
	if (cq_sp[0] >= 0)
		close(cq_sp[0]);
	if (c->sq_rfd < 0 && sq_sp[0] >= 0)
		close(sq_sp[0]);
	if (c->cq_wfd < 0 && cq_sp[1] >= 0)
		close(cq_sp[1]);
	if (c->chan)
		munmap(c->chan, c->chan_size);
	c->chan = NULL;
	client_free(ctl, c);
	return ret;
}

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

static bool policy_allows(const struct rd_region *rg, const struct rd_client *c)
{
	if (rg->policy == ROSHM_POLICY_OWNER)
		return rg->owner == c;
	return rd_policy_allows(rg->policy, rg->tenant, rg->ntenants, rg->tenants, c->tenant);
}

static void conn_close(struct rd_control *ctl, struct rd_conn *conn, const char *why);
static void handle_release(struct rd_control *ctl, struct rd_client *c, uint32_t hv,
			   bool notify_poller);

static void conn_wait(struct rd_control *ctl, struct rd_conn *conn, int kind)
{
	struct epoll_event ev = { .events = EPOLLRDHUP, .data.ptr = conn };

	conn->wait = kind;
	conn->wait_id = ++ctl->next_wait_id;
	epoll_ctl(ctl->epfd, EPOLL_CTL_MOD, conn->fd, &ev);
}

static void conn_park(struct rd_control *ctl, struct rd_conn *conn, struct rd_peer *peer,
		      const struct roshm_ctl_region_open *req)
{
	conn->park_peer = peer;
	conn->park_req = *req;
	conn_wait(ctl, conn, W_PEER);
}

static void conn_unpark(struct rd_control *ctl, struct rd_conn *conn)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = conn };

	conn->park_peer = NULL;
	conn->wait = W_NONE;
	conn->wait_id = 0;
	epoll_ctl(ctl->epfd, EPOLL_CTL_MOD, conn->fd, &ev);
}

/* What a registry completion carries: whom it is for. */
struct wait_ref {
	struct rd_control *ctl;
	uint64_t id;
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
	}
	return w;
}

static int do_region_open(struct rd_control *ctl, struct rd_conn *conn, const void *buf,
			  size_t len);

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
	conn_unpark(ctl, conn);
	if (status == 0) {
		conn->fetched = malloc(sizeof(*conn->fetched));
		if (conn->fetched)
			*conn->fetched = *rec;
		ret = conn->fetched ? do_region_open(ctl, conn, &req, sizeof(req)) : -ENOMEM;
		free(conn->fetched);
		conn->fetched = NULL;
	} else {
		ret = status == -ETIMEDOUT ? -EAGAIN : -ENOENT; /* the store did not answer: again */
	}
	if (ret <= 0 && ret != -ECONNRESET && send_status(conn->fd, ROSHM_CTL_REGION_OPEN, ret))
		ret = -ECONNRESET;
	if (ret == -ECONNRESET)
		conn_close(ctl, conn, "reply failed");
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
	conn_unpark(ctl, conn);
	if (status) {
		RD_LOG(NOTICE, "registry: publishing %s/%s: %s", rg->tenant, rg->name,
		       status == -EEXIST ? "another node holds the name" : strerror(-status));
		rg->no_record = true; /* whatever is under the name, it is not ours to delete */
		handle_release(ctl, conn->client, conn->put_hv, true);
		if (send_status(conn->fd, conn->put_reattach ? ROSHM_CTL_REGION_REATTACH :
				ROSHM_CTL_REGION_CREATE, status == -EEXIST ? -EEXIST : -EAGAIN))
			conn_close(ctl, conn, "reply failed");
		return;
	}
	memset(&rep, 0, sizeof(rep));
	reply_hdr(&rep.hdr, conn->put_reattach ? ROSHM_CTL_REGION_REATTACH : ROSHM_CTL_REGION_CREATE,
		  sizeof(rep), 0);
	rep.handle = conn->put_hv;
	rep.data_size = rg->data_size;
	rep.map_size = rg->map_size;
	rep.epoch = rg->epoch;
	RD_LOG(INFO, "region %s/%s %s by client %u: %llu bytes, epoch %016llx", rg->tenant,
	       rg->name, conn->put_reattach ? "re-attached (contents kept)" : "created",
	       conn->client->id, (unsigned long long)rg->data_size, (unsigned long long)rg->epoch);
	if (send_reply(conn->fd, &rep, sizeof(rep), NULL, 0))
		conn_close(ctl, conn, "reply failed");
}

/*
 * REGION_CREATE / REGION_REATTACH: the region's memory comes with the
 * request (@fd, the owner's memfd, ours to close): new, or kept from before
 * a roshmd restart (@reattach: its contents and log survive).
 */
static int do_region_create(struct rd_control *ctl, struct rd_conn *conn, const void *buf,
			    size_t len, int fd, bool reattach)
{
	const struct roshm_ctl_region_create *req = buf;
	const struct rd_config *cfg = ctl->cfg;
	struct rd_client *c = conn->client;
	struct rd_region_rec rec;
	struct rd_region *rg;
	uint64_t map_size;
	uint32_t hv;
	int ret;

	if (!c)
		return -ENOTCONN;
	if (len != sizeof(*req) || fd < 0 || !memchr(req->name, 0, sizeof(req->name)) ||
	    !rd_valid_name(req->name) || req->size == 0 || req->size > cfg->max_region_size ||
	    req->policy > ROSHM_POLICY_LIST || req->ntenants > ROSHM_POLICY_TENANTS_MAX ||
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
	map_size = roshm_region_map_size(req->size, req->txn_slots, req->slot_size);
	if (ctl->nregions >= cfg->max_regions)
		return -ENOSPC;
	if (ctl->tuse[c->tidx].regions >= cfg->tenants[c->tidx].quota.regions ||
	    ctl->tuse[c->tidx].bytes + map_size > cfg->tenants[c->tidx].quota.bytes)
		return -EDQUOT;
	if (find_region(ctl, c->tenant, req->name))
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
		random_bytes(&rg->epoch, sizeof(rg->epoch));
	while (!rg->epoch);
	random_bytes(&rg->key, sizeof(rg->key));
	memcpy(rg->tenant, c->tenant, sizeof(rg->tenant));
	memcpy(rg->name, req->name, sizeof(rg->name));
	rg->tidx = c->tidx;
	rg->policy = req->policy;
	rg->ntenants = req->ntenants;
	memcpy(rg->tenants, req->tenants, sizeof(rg->tenants));
	rg->xport = ctl->poller->local;
	ret = rd_region_take(rg, &ctl->guard, fd, req->size, req->txn_slots, req->slot_size, reattach);
	if (ret) {
		RD_LOG(NOTICE, "region %s/%s from client %u refused: %s", c->tenant, req->name, c->id,
		       ret == -EFAULT ? "pages not all allocated (touch them first)" :
		       ret == -EINVAL ? "not a sealable memfd of the right size (or not the same region)" :
					strerror(-ret));
		free(rg);
		return ret;
	}
	ret = rd_peers_reg_region(ctl, rg); /* peers' NICs reach it through its rkey */
	if (ret) {
		rd_region_free(rg);
		free(rg);
		return ret;
	}
	rg->owner = c;
	rd_control_region_link(ctl, rg);
	ctl->slots[id] = rg;
	ctl->nregions++;
	ctl->tuse[rg->tidx].regions++;
	ctl->tuse[rg->tidx].bytes += rg->map_size;
	ret = handle_alloc(ctl, c, rg, &hv);
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
	conn_wait(ctl, conn, W_PUT);
	conn->put_rg = rg;
	conn->put_hv = hv;
	conn->put_reattach = reattach;
	struct wait_ref *w = wait_ref(ctl, conn);

	ret = w ? ctl->reg.ops->put_region(&ctl->reg, &rec, RD_REG_EXCL, create_published, w) : -ENOMEM;
	if (ret) {
		free(w);
		conn_unpark(ctl, conn);
		conn->put_rg = NULL;
		RD_LOG(ERR, "registry: publishing %s/%s: %s", rg->tenant, rg->name, strerror(-ret));
		handle_release(ctl, c, hv, true);
		return ret;
	}
	return 1;
}

static void conn_park(struct rd_control *ctl, struct rd_conn *conn, struct rd_peer *peer,
		      const struct roshm_ctl_region_open *req);
static void conn_close(struct rd_control *ctl, struct rd_conn *conn, const char *why);

static int do_region_open(struct rd_control *ctl, struct rd_conn *conn, const void *buf,
			  size_t len)
{
	const struct roshm_ctl_region_open *req = buf;
	struct rd_client *c = conn->client;
	struct roshm_ctl_region_reply rep;
	char tenant[ROSHM_NAME_MAX], name[ROSHM_NAME_MAX];
	struct rd_region_rec rec;
	struct rd_region *rg;
	const char *slash;
	uint32_t hv;
	int ret;

	if (!c)
		return -ENOTCONN;
	if (len != sizeof(*req) || !memchr(req->name, 0, sizeof(req->name)))
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
	if (!rd_valid_name(tenant) || !rd_valid_name(name))
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
		conn_wait(ctl, conn, W_FETCH);
		w = wait_ref(ctl, conn);
		ret = w ? ctl->reg.ops->fetch_region(&ctl->reg, tenant, name, open_fetched, w) : -ENOMEM;
		if (!ret)
			return 1;
		free(w);
		conn_unpark(ctl, conn);
		return -ENOENT;
	}
	if (ret)
		return ret == -EBADMSG || ret == -ENOENT ? -ENOENT : ret;
	if (strcmp(rec.node, ctl->cfg->node)) {
		/* Remote: the policy is checked here, by the requester's roshmd,
		 * which is the one that authenticated the client's tenant. */
		if (rec.policy == ROSHM_POLICY_OWNER ||
		    !rd_policy_allows(rec.policy, rec.tenant, rec.ntenants,
				      (const char (*)[ROSHM_NAME_MAX])rec.tenants, c->tenant)) {
			RD_LOG(NOTICE, "open %s/%s refused for client %u (tenant %s): policy", tenant,
			       name, c->id, c->tenant);
			return -EACCES;
		}
		if (strcmp(rec.state, RD_STATE_ACTIVE))
			return -EAGAIN;
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
	if (!policy_allows(rg, c)) {
		RD_LOG(NOTICE, "open %s/%s refused for client %u (tenant %s): policy", tenant, name,
		       c->id, c->tenant);
		return -EACCES;
	}
grant:
	ret = handle_alloc(ctl, c, rg, &hv);
	if (ret) {
		if (rg->remote && !rg->refs) {
			rg->refs = 1;
			rd_control_region_put(ctl, rg);
		}
		return ret;
	}
	memset(&rep, 0, sizeof(rep));
	reply_hdr(&rep.hdr, ROSHM_CTL_REGION_OPEN, sizeof(rep), 0);
	rep.handle = hv;
	rep.data_size = rg->data_size;
	rep.epoch = rg->epoch;
	if (send_reply(conn->fd, &rep, sizeof(rep), NULL, 0))
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
		conn_unpark(ctl, c);
		req = c->park_req;
		ret = status ? (status == -EACCES ? -EACCES : -EHOSTUNREACH)
			     : do_region_open(ctl, c, &req, sizeof(req));
		if (ret <= 0 && ret != -ECONNRESET) {
			c->park_tries = 0;
			if (send_status(c->fd, ROSHM_CTL_REGION_OPEN, ret))
				ret = -ECONNRESET;
		}
		if (ret == -ECONNRESET)
			conn_close(ctl, c, "reply failed");
		else if (ret == 1 && !c->park_peer)
			c->park_tries = 0;
	}
}

static int do_region_close(struct rd_control *ctl, struct rd_conn *conn, const void *buf,
			   size_t len)
{
	const struct roshm_ctl_region_close *req = buf;

	if (!conn->client)
		return -ENOTCONN;
	if (len != sizeof(*req))
		return -EINVAL;
	if (!handle_lookup(conn->client, req->handle))
		return -EBADF;
	handle_release(ctl, conn->client, req->handle, true);
	return 0;
}

/* ---- admin ------------------------------------------------------------------ */

/*
 * Who may administer: the holder of the node's admin token (a file that
 * roshmd's own container has and pods do not), roshmd's own uid when that
 * is not root, and admin.uids (never 0: pods often run as root). Returns
 * true for the node admin; false otherwise.
 */
static bool admin_by_credential(const struct rd_control *ctl, const struct rd_conn *conn,
				const struct roshm_ctl_admin *req)
{
	char want[ROSHM_ADMIN_TOKEN_MAX];

	if (ctl->admin_token[0]) {
		memset(want, 0, sizeof(want));
		memcpy(want, ctl->admin_token, sizeof(want));
		if (CRYPTO_memcmp(want, req->admin_token, sizeof(want)) == 0)
			return true;
	}
	if (conn->uid != 0 && conn->uid == geteuid())
		return true;
	for (int i = 0; i < ctl->cfg->nadmin_uids; i++)
		if (ctl->cfg->admin_uids[i] == conn->uid)
			return true;
	return false;
}

/* A tenant's own token (constant time over the zero-padded buffers). */
static bool tenant_by_token(const struct rd_control *ctl, const struct roshm_ctl_admin *req)
{
	const struct rd_tenant_cfg *t;
	char want[ROSHM_TOKEN_MAX];

	if (!req->tenant[0])
		return false;
	t = rd_config_tenant(ctl->cfg, req->tenant);
	memset(want, 0, sizeof(want));
	if (t)
		memcpy(want, t->token, sizeof(want));
	return CRYPTO_memcmp(want, req->token, sizeof(want)) == 0 && t;
}

struct list_ctx {
	json_t *a;
	const char *tenant;           /* NULL: every record */
};

static void list_cb(const struct rd_region_rec *rec, void *arg)
{
	struct list_ctx *lc = arg;
	json_t *o;
	char buf[32];

	if (lc->tenant && strcmp(rec->tenant, lc->tenant))
		return;
	o = json_object();
	json_object_set_new(o, "name", json_sprintf("%s/%s", rec->tenant, rec->name));
	json_object_set_new(o, "node", json_string(rec->node));
	json_object_set_new(o, "state", json_string(rec->state));
	json_object_set_new(o, "size", json_integer((json_int_t)rec->data_size));
	snprintf(buf, sizeof(buf), "%016llx", (unsigned long long)rec->epoch);
	json_object_set_new(o, "epoch", json_string(buf));
	json_object_set_new(o, "policy", json_string(rec->policy == ROSHM_POLICY_OWNER ? "owner" :
						      rec->policy == ROSHM_POLICY_LIST ? "list" :
											 "tenant"));
	json_array_append_new(lc->a, o);
}

json_t *rd_control_admin_json(struct rd_control *ctl, const char *cmd, const char *tenant)
{
	const struct rd_poller_stats *ps = &ctl->poller->stats;
	int tidx = tenant ? rd_config_tenant_idx(ctl->cfg, tenant) : -1;
	json_t *o;

	if (tenant && tidx < 0)
		return NULL;
	if (!strcmp(cmd, "status")) {
		o = json_object();
		json_object_set_new(o, "node", json_string(ctl->cfg->node));
		json_object_set_new(o, "version", json_string(ROSHM_VERSION));
		json_object_set_new(o, "pid", json_integer(getpid()));
		json_object_set_new(o, "uptime_s",
				    json_integer((json_int_t)((rd_mono_ns() - ctl->start_ns) / 1000000000ull)));
		json_object_set_new(o, "clients", json_integer(tenant ? ctl->tuse[tidx].clients : ctl->nclients));
		json_object_set_new(o, "regions", json_integer(tenant ? ctl->tuse[tidx].regions : ctl->nregions));
		if (tenant)
			json_object_set_new(o, "tenant", json_string(tenant));
		json_object_set_new(o, "registry", json_string(ctl->reg.ops->name));
		json_object_set_new(o, "registry_ready", json_boolean(ctl->reg.ops->ready(&ctl->reg)));
		json_object_set_new(o, "transports", json_string(!ctl->poller->net ? "local" :
			ctl->poller->net == &rd_tcp_provider ? "local,tcp" : "local,verbs"));
		if (ctl->endpoint[0])
			json_object_set_new(o, "endpoint", json_string(ctl->endpoint));
		json_object_set_new(o, "idle", json_string(ctl->cfg->idle == RD_IDLE_BUSY ? "busy" : "adaptive"));
		json_object_set_new(o, "socket", json_string(ctl->cfg->socket));
		return o;
	}
	if (!strcmp(cmd, "clients")) {
		o = json_array();
		for (struct rd_client *c = ctl->clients; c; c = c->next) {
			if (tenant && c->tidx != tidx)
				continue;
			json_t *e = json_object();
			uint32_t nh = 0;

			for (uint32_t i = 0; i < c->nhandles; i++)
				nh += c->ctl_handles[i].region != NULL;
			json_object_set_new(e, "id", json_integer(c->id));
			json_object_set_new(e, "pid", json_integer(c->pid));
			json_object_set_new(e, "uid", json_integer(c->uid));
			json_object_set_new(e, "tenant", json_string(c->tenant));
			json_object_set_new(e, "pod", json_string(c->pod));
			json_object_set_new(e, "sq_entries", json_integer(c->sq_entries));
			json_object_set_new(e, "cq_entries", json_integer(c->cq_entries));
			json_object_set_new(e, "arena_size", json_integer((json_int_t)c->arena_size));
			json_object_set_new(e, "hugetlb", json_boolean(c->hugetlb));
			json_object_set_new(e, "handles", json_integer(nh));
			json_object_set_new(e, "sqes", json_integer((json_int_t)RD_STAT_GET(c->stats.sqes)));
			json_object_set_new(e, "errors", json_integer((json_int_t)RD_STAT_GET(c->stats.errors)));
			json_object_set_new(e, "bytes", json_integer((json_int_t)RD_STAT_GET(c->stats.bytes)));
			json_array_append_new(o, e);
		}
		return o;
	}
	if (!strcmp(cmd, "regions")) {
		struct list_ctx lc = { .a = json_array(), .tenant = tenant };

		ctl->reg.ops->list_regions(&ctl->reg, list_cb, &lc);
		return lc.a;
	}
	if (tenant)
		return NULL; /* the node's peers and counters are the admin's */
	if (!strcmp(cmd, "peers"))
		return rd_peers_json(ctl);
	if (!strcmp(cmd, "stats")) {
		json_t *h = json_array();

		o = json_object();
		json_object_set_new(o, "rounds", json_integer((json_int_t)RD_STAT_GET(ps->rounds)));
		json_object_set_new(o, "busy_rounds", json_integer((json_int_t)RD_STAT_GET(ps->busy_rounds)));
		json_object_set_new(o, "sleeps", json_integer((json_int_t)RD_STAT_GET(ps->sleeps)));
		json_object_set_new(o, "sqes", json_integer((json_int_t)RD_STAT_GET(ps->sqes)));
		json_object_set_new(o, "errors", json_integer((json_int_t)RD_STAT_GET(ps->errors)));
		json_object_set_new(o, "corrupt_clients",
				    json_integer((json_int_t)RD_STAT_GET(ps->corrupt_clients)));
		json_object_set_new(o, "regions_tampered", json_integer((json_int_t)ctl->tampered_regions));
		json_object_set_new(o, "events_lost", json_integer((json_int_t)RD_STAT_GET(ps->events_lost)));
		json_object_set_new(o, "hole_guard", json_boolean(ctl->guard.uffd >= 0));
		json_object_set_new(o, "hole_faults",
				    json_integer((json_int_t)__atomic_load_n(&ctl->guard.faults, __ATOMIC_RELAXED)));
		json_object_set_new(o, "txn_committed", json_integer((json_int_t)RD_STAT_GET(ps->txn_committed)));
		json_object_set_new(o, "txn_replayed", json_integer((json_int_t)RD_STAT_GET(ps->txn_replayed)));
		json_object_set_new(o, "txn_log_full", json_integer((json_int_t)RD_STAT_GET(ps->txn_log_full)));
		json_object_set_new(o, "txn_applied", json_integer((json_int_t)RD_STAT_GET(ps->txn_applied)));
		json_object_set_new(o, "txn_aborted", json_integer((json_int_t)RD_STAT_GET(ps->txn_aborted)));
		json_object_set_new(o, "txn_invalid", json_integer((json_int_t)RD_STAT_GET(ps->txn_invalid)));
		for (int i = 0; i < RD_BATCH_BUCKETS; i++)
			json_array_append_new(h, json_integer((json_int_t)RD_STAT_GET(ps->batch_hist[i])));
		json_object_set_new(o, "batch_log2_hist", h);
		return o;
	}
	return NULL;
}

int rd_control_admin_reply(int fd, json_t *o)
{
	char *text = json_dumps(o, JSON_COMPACT), *out;
	size_t tl;
	int ret;

	if (!text)
		return -ENOMEM;
	tl = strlen(text) + 1;
	if (tl + sizeof(struct roshm_ctl_hdr) > ROSHM_CTL_MSG_MAX) {
		free(text);
		return -EMSGSIZE;
	}
	out = malloc(sizeof(struct roshm_ctl_hdr) + tl);
	if (!out) {
		free(text);
		return -ENOMEM;
	}
	reply_hdr((void *)out, ROSHM_CTL_ADMIN, sizeof(struct roshm_ctl_hdr) + tl, 0);
	memcpy(out + sizeof(struct roshm_ctl_hdr), text, tl);
	ret = send_reply(fd, out, sizeof(struct roshm_ctl_hdr) + tl, NULL, 0);
	free(out);
	free(text);
	return ret ? -ECONNRESET : 1;
}

static bool known_admin_cmd(const char *cmd)
{
	static const char *const cmds[] = { "status", "clients", "regions", "peers", "stats" };

	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(cmd, cmds[i]))
			return true;
	return false;
}

/*
 * An admin request. The node admin may do everything; a tenant with its
 * token may see its own clients and regions and drain its own regions:
 * "drain tenant T" for its own T, "drain region T/N" in its own T, "drain pod
 * P" (its regions whose owners attached with pod P). Nobody else anything.
 */
static int do_admin(struct rd_control *ctl, struct rd_conn *conn, const void *buf, size_t len)
{
	const struct roshm_ctl_admin *req = buf;
	const char *tenant = NULL;
	json_t *o;
	int ret;

	if (len != sizeof(*req) || !memchr(req->cmd, 0, sizeof(req->cmd)) ||
	    !memchr(req->tenant, 0, sizeof(req->tenant)) || !memchr(req->token, 0, sizeof(req->token)) ||
	    !memchr(req->admin_token, 0, sizeof(req->admin_token)))
		return -EINVAL;
	if (!admin_by_credential(ctl, conn, req)) {
		if (!tenant_by_token(ctl, req)) {
			RD_LOG(NOTICE, "admin '%.32s' refused: pid %d uid %u has no admin token and no "
			       "tenant token", req->cmd, (int)conn->pid, (unsigned)conn->uid);
			return -EPERM;
		}
		tenant = req->tenant;
	}
	if (!strncmp(req->cmd, "drain", 5) && (req->cmd[5] == 0 || req->cmd[5] == ' ')) {
		/* The reply comes when the regions are drained (rd_drain_tick). */
		char what[16] = "", arg[2 * ROSHM_NAME_MAX] = "", extra[2];
		struct rd_drain_match m = { 0 };

		if (req->cmd[5] && (sscanf(req->cmd + 6, "%15s %127s %1s", what, arg, extra) != 2 ||
				    (strcmp(what, "tenant") && strcmp(what, "region") && strcmp(what, "pod"))))
			return -EINVAL;
		if (!strcmp(what, "tenant"))
			m.tenant = arg;
		else if (!strcmp(what, "region"))
			m.region = arg;
		else if (!strcmp(what, "pod"))
			m.pod = arg;
		if (tenant) {
			size_t tl = strlen(tenant);

			/* a tenant drains only what it owns */
			if ((!m.tenant && !m.region && !m.pod) || (m.tenant && strcmp(m.tenant, tenant)) ||
			    (m.region && (strncmp(m.region, tenant, tl) || m.region[tl] != '/')))
				return -EPERM;
			m.owner_tenant = tenant;
		}
		ret = rd_drain_start(ctl, &m, conn->fd);
		if (ret >= 0)
			conn->deadline_ns = 0; /* the answer may take drain.timeout_ms */
		return ret < 0 ? ret : 1;
	}
	if (!known_admin_cmd(req->cmd))
		return -EINVAL;
	o = rd_control_admin_json(ctl, req->cmd, tenant);
	if (!o)
		return -EPERM;
	ret = rd_control_admin_reply(conn->fd, o);
	json_decref(o);
	return ret;
}

/* ---- connections -------------------------------------------------------------- */

/*
 * Close a connection. Its memory goes after the current epoll batch (an
 * event of the same batch may point at it: it sees fd == -1).
 */
static void conn_close(struct rd_control *ctl, struct rd_conn *conn, const char *why)
{
	if (conn->fd < 0)
		return;
	if (conn->client)
		client_detach(ctl, conn->client, why);
	else
		ctl->npending--;
	if (conn->hello) { /* the quota HELLO reserved goes back */
		ctl->tuse[conn->tidx].clients--;
		ctl->tuse[conn->tidx].bytes -= conn->lay.size;
	}
	rd_drain_forget_fd(ctl, conn->fd);
	epoll_ctl(ctl->epfd, EPOLL_CTL_DEL, conn->fd, NULL);
	close(conn->fd);
	conn->fd = -1;
	if (conn->prev)
		conn->prev->next = conn->next;
	else
		ctl->conns = conn->next;
	if (conn->next)
		conn->next->prev = conn->prev;
	conn->next = ctl->dead_conns;
	ctl->dead_conns = conn;
}

static void conns_reap(struct rd_control *ctl)
{
	while (ctl->dead_conns) {
		struct rd_conn *c = ctl->dead_conns;

		ctl->dead_conns = c->next;
		free(c);
	}
}

/* Connections that are not attached: they must make progress, and only so
 * many may wait (a HELLO deadline and admin.max_pending). */
static void conns_timer(struct rd_control *ctl, uint64_t now)
{
	for (struct rd_conn *c = ctl->conns, *next; c; c = next) {
		next = c->next;
		if (!c->client && c->deadline_ns && now >= c->deadline_ns) {
			RD_LOG(NOTICE, "control connection of pid %d idle past %u ms: closed", (int)c->pid,
			       ctl->cfg->hello_timeout_ms);
			conn_close(ctl, c, "idle");
		}
	}
	conns_reap(ctl);
}

/* A drain answered on this connection: its idle clock runs again. */
void rd_control_conn_rearm(struct rd_control *ctl, int fd)
{
	for (struct rd_conn *c = ctl->conns; c; c = c->next)
		if (c->fd == fd && !c->client)
			c->deadline_ns = rd_mono_ns() + (uint64_t)ctl->cfg->hello_timeout_ms * 1000000ull;
}

static void conn_accept(struct rd_control *ctl)
{
	struct ucred cr;
	socklen_t crl = sizeof(cr);
	struct rd_conn *conn;
	int fd;

	while ((fd = accept4(ctl->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0) {
		if (ctl->npending >= ctl->cfg->max_pending_conns) {
			/* Unauthenticated connections cannot pile up (attached
			 * clients are counted by their tenants' quotas): the
			 * oldest one that has not even passed HELLO makes room,
			 * so that holding every slot takes a steady flood rather
			 * than a few idle sockets; when all of them did (or wait
			 * for a drain), the newcomer is refused. */
			struct rd_conn *old = NULL;

			for (struct rd_conn *c = ctl->conns; c; c = c->next)
				if (!c->client && !c->hello && c->deadline_ns && c->fd >= 0)
					old = c; /* the list is newest first */
			if (!old) {
				close(fd);
				ctl->refused_conns++;
				continue;
			}
			ctl->refused_conns++;
			conn_close(ctl, old, "evicted: too many connections not attached");
		}
		conn = calloc(1, sizeof(*conn));
		if (!conn || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crl) < 0) {
			free(conn);
			close(fd);
			continue;
		}
		conn->tag.kind = RD_EP_CONN;
		conn->fd = fd;
		conn->pid = cr.pid;
		conn->uid = cr.uid;
		conn->deadline_ns = rd_mono_ns() + (uint64_t)ctl->cfg->hello_timeout_ms * 1000000ull;
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = conn };

		if (epoll_ctl(ctl->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			free(conn);
			close(fd);
			continue;
		}
		conn->next = ctl->conns;
		if (ctl->conns)
			ctl->conns->prev = conn;
		ctl->conns = conn;
		ctl->npending++;
	}
}

static void conn_readable(struct rd_control *ctl, struct rd_conn *conn)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 16)];
		struct cmsghdr align;
	} u;
	_Alignas(8) char buf[4096];
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			      .msg_controllen = sizeof(u.buf) };
	const struct roshm_ctl_hdr *h = (void *)buf;
	ssize_t n;
	int ret;

	n = recvmsg(conn->fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	/* CHANNEL, REGION_CREATE and REGION_REATTACH carry one descriptor;
	 * every other one is closed at once, and two end the connection. */
	int in_fd = -1, nfd = 0;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
				int fd = ((int *)CMSG_DATA(c))[i];

				if (nfd++ == 0 && n > 0 && (size_t)n >= sizeof(*h) &&
				    (h->type == ROSHM_CTL_REGION_REATTACH || h->type == ROSHM_CTL_REGION_CREATE ||
				     h->type == ROSHM_CTL_CHANNEL))
					in_fd = fd;
				else
					close(fd);
			}
	if (nfd > 1 || (msg.msg_flags & MSG_CTRUNC)) {
		if (in_fd >= 0)
			close(in_fd);
		conn_close(ctl, conn, "too many descriptors");
		return;
	}
	if (n <= 0) {
		if (in_fd >= 0)
			close(in_fd);
		conn_close(ctl, conn, n == 0 ? "socket closed" : "socket error");
		return;
	}
	if ((size_t)n < sizeof(*h) || h->magic != ROSHM_CTL_MAGIC || h->len != (uint32_t)n ||
	    (msg.msg_flags & MSG_TRUNC)) {
		if (in_fd >= 0)
			close(in_fd);
		RD_LOG(NOTICE, "malformed control message from pid %d: disconnected", (int)conn->pid);
		conn_close(ctl, conn, "malformed control message");
		return;
	}
	if (h->version != ROSHM_ABI_VERSION) {
		if (in_fd >= 0)
			close(in_fd);
		RD_LOG(NOTICE, "pid %d speaks ABI %u, this roshmd %u", (int)conn->pid, h->version,
		       ROSHM_ABI_VERSION);
		send_status(conn->fd, h->type, -EPROTO);
		if (!conn->client)
			conn_close(ctl, conn, "ABI version mismatch");
		return;
	}
	/* An unattached connection's deadline runs from accept: no message
	 * moves it, but a HELLO that succeeds (do_hello) for its CHANNEL. */
	switch (h->type) {
	case ROSHM_CTL_HELLO:
		ret = do_hello(ctl, conn, buf, (size_t)n);
		break;
	case ROSHM_CTL_CHANNEL:
		ret = do_channel(ctl, conn, buf, (size_t)n, in_fd);
		break;
	case ROSHM_CTL_REGION_CREATE:
	case ROSHM_CTL_REGION_REATTACH:
		ret = do_region_create(ctl, conn, buf, (size_t)n, in_fd,
				       h->type == ROSHM_CTL_REGION_REATTACH);
		break;
	case ROSHM_CTL_REGION_OPEN:
		ret = do_region_open(ctl, conn, buf, (size_t)n);
		break;
	case ROSHM_CTL_REGION_CLOSE:
		ret = do_region_close(ctl, conn, buf, (size_t)n);
		break;
	case ROSHM_CTL_ADMIN:
		ret = do_admin(ctl, conn, buf, (size_t)n);
		break;
	default:
		ret = -EOPNOTSUPP;
		break;
	}
	/* Whoever took the memory mapped it; the descriptor is not kept. */
	if (in_fd >= 0)
		close(in_fd);
	if (ret == -ECONNRESET) {
		conn_close(ctl, conn, "reply failed");
		return;
	}
	if (ret <= 0 && send_status(conn->fd, h->type, ret)) {
		conn_close(ctl, conn, "reply failed");
		return;
	}
	/* Before HELLO a connection gets one answer: a refusal (a wrong token,
	 * an unknown request) or an admin answer ends it, so nobody holds a
	 * pending slot by talking (a drain that is still answering has no
	 * deadline and stays). After HELLO the tenant's quota holds the slot,
	 * and the deadline still runs. */
	if (!conn->client && !conn->hello && conn->deadline_ns &&
	    (ret < 0 || h->type == ROSHM_CTL_ADMIN))
		conn_close(ctl, conn, ret < 0 ? "refused before attach" : "admin request answered");
}

/*
 * The hole guard found a hole that a region's owner punched (guard.h): the
 * owner is disconnected (its regions close), and the region's memory is
 * punched out by region.c when the poller has let go of it.
 */
static void guard_events(struct rd_control *ctl)
{
	uint64_t v;
	bool again = true;

	if (read(ctl->guard.efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return;
	while (again) {
		again = false;
		for (struct rd_region *rg = ctl->regions; rg; rg = rg->next) {
			if (rg->remote || rg->tamper_seen ||
			    !__atomic_load_n(&rg->tampered, __ATOMIC_ACQUIRE))
				continue;
			rg->tamper_seen = true;
			ctl->tampered_regions++;
			RD_LOG(WARNING, "region %s/%s: its owner punched a hole in the region's memory: "
			       "owner (client %u) disconnected, region closed",
			       rg->tenant, rg->name, rg->owner ? rg->owner->id : 0);
			if (rg->owner && rg->owner->conn) {
				conn_close(ctl, rg->owner->conn, "punched a hole in its region");
				again = true; /* the list changed under us */
				break;
			}
		}
	}
}

static void poller_events(struct rd_control *ctl)
{
	struct rd_event ev;
	uint64_t v;
	ssize_t r = read(ctl->poller->ev_efd, &v, sizeof(v));

	(void)r;
	while (rte_ring_sc_dequeue_elem(ctl->poller->ev_ring, &ev, sizeof(ev)) == 0) {
		if (ev.type != RD_EV_CLIENT_CORRUPT) {
			rd_peers_event(ctl, &ev);
			continue;
		}
		struct rd_client *c = ctl->client_slots[ev.client_id & 0xffffu];

		if (c && c->id == ev.client_id) {
			ev.why[sizeof(ev.why) - 1] = 0;
			RD_LOG(WARNING, "client %u (pid %d): %s: disconnecting it", ev.client_id,
			       (int)c->pid, ev.why);
			conn_close(ctl, c->conn, ev.why);
		}
	}
	/* What the poller let go of since: free it now. */
	for (struct rd_defer *d = rd_poller_graveyard(ctl->poller), *next; d; d = next) {
		next = d->next;
		if (d->kind == RD_DEFER_REGION)
			region_free(ctl, container_of(d, struct rd_region, defer));
		else
			client_free(ctl, container_of(d, struct rd_client, defer));
	}
}

/* ---- setup ---------------------------------------------------------------------- */

/*
 * The control socket. Whether another roshmd serves it is decided by a lock
 * on "<socket>.lock", not by connecting: a stale socket file, or a process
 * that took over the path and answers, must not keep roshmd from starting.
 * The directory is created 0755: pods get it mounted read-only, so none of
 * them can replace the socket (libroshm also checks the server's uid).
 */
static int listen_socket(struct rd_control *ctl, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char dir[sizeof(sa.sun_path)], lock[sizeof(sa.sun_path) + 8];
	struct stat st;
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');

	if (slash && slash != dir) {
		*slash = 0;
		for (char *p = dir + 1; *p; p++)
			if (*p == '/') {
				*p = 0;
				mkdir(dir, 0755);
				*p = '/';
			}
		mkdir(dir, 0755);
		if (stat(dir, &st) == 0 && (st.st_mode & 022) && !(st.st_mode & S_ISVTX))
			RD_LOG(WARNING, "socket directory %s is writable by others (mode %03o): anyone "
			       "who can write it can put another socket in roshmd's place",
			       dir, (unsigned)(st.st_mode & 0777));
	}
	snprintf(lock, sizeof(lock), "%s.lock", path);
	ctl->lock_fd = open(lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (ctl->lock_fd < 0)
		return -errno;
	if (flock(ctl->lock_fd, LOCK_EX | LOCK_NB) < 0)
		return errno == EWOULDBLOCK ? -EADDRINUSE : -errno;
	/* Ours now: whatever sits at the path is stale or an impostor. */
	unlink(path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	/* Any local process may attach; tenants and tokens decide what it gets.
	 * The mode comes from the umask at bind (no chmod by path after it,
	 * which would follow whatever was put there meanwhile). */
	mode_t old = umask(0111);
	int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));

	umask(old);
	if (r < 0 || listen(fd, 128) < 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	return fd;
}

/*
 * The node's admin token: the file's first line, or a new random one that
 * roshmd writes there (0600, in a directory of its own that pods do not
 * mount); roshmctl in roshmd's container reads the same file.
 */
static int admin_token_load(struct rd_control *ctl)
{
	const char *path = ctl->cfg->admin_token_file;
	char dir[RD_PATH_MAX], buf[ROSHM_ADMIN_TOKEN_MAX];
	uint8_t raw[32];
	ssize_t n;
	int fd;

	ctl->admin_token[0] = 0;
	if (!path[0])
		return 0;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		snprintf(dir, sizeof(dir), "%s", path);
		char *slash = strrchr(dir, '/');

		if (slash && slash != dir) {
			*slash = 0;
			mkdir(dir, 0700);
		}
		random_bytes(raw, sizeof(raw));
		for (size_t i = 0; i < sizeof(raw); i++)
			snprintf(buf + 2 * i, 3, "%02x", raw[i]);
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0 || write(fd, buf, 64) != 64 || write(fd, "\n", 1) != 1) {
			/* e.g. not root, or a read-only root: run without one */
			RD_LOG(WARNING, "admin token %s: cannot create it (%s): no admin token; only "
			       "roshmd's own uid (if not root) and admin.uids may administer it",
			       path, strerror(errno ? errno : EIO));
			if (fd >= 0) {
				close(fd);
				unlink(path);
			}
			return 0;
		}
		close(fd);
		snprintf(ctl->admin_token, sizeof(ctl->admin_token), "%.64s", buf);
		RD_LOG(INFO, "admin token created in %s (roshmctl reads it there)", path);
		return 0;
	}
	if (fd < 0) {
		RD_LOG(ERR, "admin token %s: %s", path, strerror(errno));
		return -errno;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	buf[strcspn(buf, "\r\n")] = 0;
	if (strlen(buf) < 16) {
		RD_LOG(ERR, "admin token %s: shorter than 16 characters", path);
		return -EINVAL;
	}
	snprintf(ctl->admin_token, sizeof(ctl->admin_token), "%s", buf);
	return 0;
}

static int publish_node(struct rd_control *ctl)
{
	struct rd_node_rec n = { .pid = (uint32_t)getpid() };

	snprintf(n.node, sizeof(n.node), "%s", ctl->cfg->node);
	snprintf(n.endpoint, sizeof(n.endpoint), "%s", ctl->endpoint);
	return ctl->reg.ops->put_node(&ctl->reg, &n, NULL, NULL);
}

static void forget_own_records(const struct rd_region_rec *rec, void *arg)
{
	struct rd_control *ctl = arg;

	if (!strcmp(rec->node, ctl->cfg->node)) {
		RD_LOG(INFO, "registry: removing %s/%s left by an earlier roshmd on this node",
		       rec->tenant, rec->name);
		ctl->reg.ops->del_region(&ctl->reg, rec->tenant, rec->name, NULL, NULL);
	}
}

int rd_control_init(struct rd_control *ctl, const struct rd_config *cfg, struct rd_poller *p)
{
	struct epoll_event ev = { .events = EPOLLIN };
	sigset_t set;
	int ret;

	memset(ctl, 0, sizeof(*ctl));
	rd_guard_init(&ctl->guard);
	ctl->cfg = cfg;
	ctl->poller = p;
	ctl->listen_fd = ctl->epfd = ctl->sig_fd = ctl->lock_fd = -1;
	ctl->tcp_listen_fd = -1;
	ctl->metrics_fd = -1;
	ctl->start_ns = rd_mono_ns();
	random_bytes(&ctl->instance, sizeof(ctl->instance));
	ctl->slots = calloc(cfg->max_regions + 1, sizeof(*ctl->slots));
	ctl->client_slots = calloc(cfg->max_clients, sizeof(*ctl->client_slots));
	if (!ctl->slots || !ctl->client_slots)
		return -ENOMEM;
	ctl->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (ctl->epfd < 0)
		return -errno;
	ret = rd_registry_open(&ctl->reg, cfg);
	if (ret)
		return ret;
	ctl->reg.ops->list_regions(&ctl->reg, forget_own_records, ctl);
	ret = rd_peers_init(ctl);
	if (ret)
		return ret;
	ret = rd_metrics_init(ctl);
	if (ret)
		return ret;
	ret = rd_telemetry_init(ctl);
	if (ret)
		RD_LOG(WARNING, "telemetry commands /roshm/* not registered: %s", strerror(-ret));
	ret = publish_node(ctl);
	if (ret) {
		RD_LOG(ERR, "registry: publishing node %s: %s", cfg->node, strerror(-ret));
		return ret;
	}
	for (int i = 0; i < cfg->ntenants; i++)
		if (!cfg->tenants[i].token[0])
			RD_LOG(WARNING, "tenant '%s' has no token: any local process may attach as it",
			       cfg->tenants[i].name);
	ret = admin_token_load(ctl);
	if (ret)
		return ret;
	ret = listen_socket(ctl, cfg->socket);
	if (ret < 0) {
		RD_LOG(ERR, "socket %s: %s", cfg->socket,
		       ret == -EADDRINUSE ? "another roshmd holds its lock file" : strerror(-ret));
		return ret;
	}
	ctl->listen_fd = ret;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	ctl->sig_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (ctl->sig_fd < 0)
		return -errno;
	ev.data.ptr = &tag_listen;
	epoll_ctl(ctl->epfd, EPOLL_CTL_ADD, ctl->listen_fd, &ev);
	ev.data.ptr = &tag_sig;
	epoll_ctl(ctl->epfd, EPOLL_CTL_ADD, ctl->sig_fd, &ev);
	ev.data.ptr = &tag_ev;
	epoll_ctl(ctl->epfd, EPOLL_CTL_ADD, p->ev_efd, &ev);
	ev.data.ptr = &tag_reg;
	epoll_ctl(ctl->epfd, EPOLL_CTL_ADD, ctl->reg.ops->event_fd(&ctl->reg), &ev);
	if (ctl->guard.uffd >= 0) {
		ev.data.ptr = &tag_guard;
		epoll_ctl(ctl->epfd, EPOLL_CTL_ADD, ctl->guard.efd, &ev);
	} else {
		RD_LOG(WARNING, "no hole guard (%s): a region owner that punches holes in its memory "
		       "can make roshmd allocate pages charged to roshmd (docs/security.md)",
		       ctl->guard.reason);
	}
	RD_LOG(INFO, "node %s listening on %s, registry %s:%s", cfg->node, cfg->socket,
	       ctl->reg.ops->name, cfg->registry_dir);
	return 0;
}

int rd_control_run(struct rd_control *ctl)
{
	while (!ctl->stop)
		rd_control_step(ctl, 100);
	return 0;
}

void rd_control_step(struct rd_control *ctl, int timeout_ms)
{
	struct epoll_event evs[64];

	{
		int n = epoll_wait(ctl->epfd, evs, 64, timeout_ms);

		for (int i = 0; i < n; i++) {
			void *tag = evs[i].data.ptr;
			enum rd_ep_kind kind = ((struct rd_ep_tag *)tag)->kind;

			if (kind == RD_EP_PROVIDER) {
				rd_peers_epoll_event(ctl, tag, evs[i].events);
			} else if (kind == RD_EP_METRICS) {
				rd_metrics_accept(ctl);
			} else if (kind == RD_EP_METRICS_CONN) {
				if (rd_metrics_conn_live(ctl, tag))
					rd_metrics_readable(ctl, tag);
			} else if (tag == &tag_listen) {
				conn_accept(ctl);
			} else if (tag == &tag_sig) {
				struct signalfd_siginfo si;

				if (read(ctl->sig_fd, &si, sizeof(si)) == sizeof(si) &&
				    si.ssi_signo != SIGHUP) {
					if (ctl->stopping) {
						RD_LOG(INFO, "signal %u again: stopping now", si.ssi_signo);
						ctl->stop = 1;
					} else {
						/* preStop / SIGTERM: drain every region, then exit */
						RD_LOG(INFO, "signal %u: draining, then stopping", si.ssi_signo);
						ctl->stopping = 1;
						struct rd_drain_match all = { 0 };

						rd_drain_start(ctl, &all, -1);
					}
				}
			} else if (tag == &tag_ev) {
				poller_events(ctl);
			} else if (tag == &tag_reg) {
				/* dispatched below */
			} else if (tag == &tag_guard) {
				guard_events(ctl);
			} else {
				/* A connection may have been closed by an earlier
				 * event of this batch (poller_events): check it. */
				struct rd_conn *conn = tag;

				if (conn->fd < 0)
					continue;
				/* a request waiting: only a hang-up matters */
				if (conn->wait != W_NONE && !(evs[i].events & EPOLLIN)) {
					if (evs[i].events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
						conn_close(ctl, conn, "closed while waiting");
					continue;
				}
				conn_readable(ctl, conn);
			}
		}
		conns_reap(ctl);
		conns_timer(ctl, rd_mono_ns());
		unsigned rs = ctl->reg.ops->dispatch(&ctl->reg);

		if (rs & RD_REG_REPUBLISHED)
			RD_LOG(NOTICE, "registry: node %s and its regions published again", ctl->cfg->node);
		rd_peers_timer(ctl, rs & RD_REG_CHANGED);
		rd_drain_tick(ctl);
		rd_metrics_timer(ctl);
		rd_telemetry_refresh(ctl);
		if (ctl->stopping && rd_drain_idle(ctl))
			ctl->stop = 1;
	}
}

int rd_control_adopt_conn(struct rd_control *ctl, int fd, pid_t pid, uid_t uid)
{
	struct rd_conn *conn = calloc(1, sizeof(*conn));
	struct epoll_event ev = { .events = EPOLLIN };

	if (!conn)
		return -ENOMEM;
	conn->tag.kind = RD_EP_CONN;
	conn->fd = fd;
	conn->pid = pid;
	conn->uid = uid;
	conn->deadline_ns = rd_mono_ns() + (uint64_t)ctl->cfg->hello_timeout_ms * 1000000ull;
	ev.data.ptr = conn;
	if (epoll_ctl(ctl->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		free(conn);
		return -errno;
	}
	conn->next = ctl->conns;
	if (ctl->conns)
		ctl->conns->prev = conn;
	ctl->conns = conn;
	ctl->npending++;
	return 0;
}

void rd_control_fini(struct rd_control *ctl)
{
	/* The poller has stopped: close its connections before the peers
	 * (which own the outbound ones) are freed. */
	if (ctl->poller && ctl->poller->net && ctl->poller->net->dp->close_all)
		ctl->poller->net->dp->close_all(ctl->poller->net);
	while (ctl->conns)
		conn_close(ctl, ctl->conns, "roshmd stopping");
	conns_reap(ctl);
	/* The poller has stopped: what it still held is ours to free. */
	poller_events(ctl);
	while (ctl->zombie_regions)
		region_free(ctl, ctl->zombie_regions);
	while (ctl->zombie_clients)
		client_free(ctl, ctl->zombie_clients);
	if (ctl->listen_fd >= 0) {
		close(ctl->listen_fd);
		unlink(ctl->cfg->socket);
	}
	if (ctl->lock_fd >= 0)
		close(ctl->lock_fd);
	if (ctl->sig_fd >= 0)
		close(ctl->sig_fd);
	if (ctl->epfd >= 0)
		close(ctl->epfd);
	rd_peers_fini(ctl);
	rd_metrics_fini(ctl);
	if (ctl->reg.ops) {
		ctl->reg.ops->del_node(&ctl->reg, ctl->cfg->node, NULL, NULL);
		ctl->reg.ops->close(&ctl->reg);
	}
	free(ctl->slots);
	free(ctl->client_slots);
	rd_guard_fini(&ctl->guard); /* every mapping it watched is gone */
}
