// SPDX-License-Identifier: MIT
/*
 * The control thread: UNIX socket server for attach, regions and admin
 * requests, registry updates, signals. It never touches a ring's data path;
 * every change the poller must see is a command (rd_poller_cmd) that is
 * applied before the control thread answers the client or frees anything.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
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

#include "control.h"
#include "metrics.h"
#include "sqe.h"

#ifndef ROSHM_VERSION
#define ROSHM_VERSION "0"
#endif

struct rd_conn {
	struct rd_ep_tag tag;         /* RD_EP_CONN */
	int fd;
	pid_t pid;
	uid_t uid;
	struct rd_client *client;     /* after HELLO */
	struct rd_conn *next;
};

/* epoll tags for the fds that are not connections */
static struct rd_ep_tag tag_listen = { RD_EP_LISTEN }, tag_sig = { RD_EP_SIG }, tag_ev = { RD_EP_EV };
/* the registry's event fd: its work runs from rd_control_run's dispatch */
static struct rd_ep_tag tag_reg = { RD_EP_EV };

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
		char buf[CMSG_SPACE(sizeof(int) * ROSHM_HELLO_NFDS)];
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

static struct rd_region *find_region(struct rd_control *ctl, const char *tenant, const char *name)
{
	for (struct rd_region *rg = ctl->regions; rg; rg = rg->next)
		if (!rg->remote && rg->owner && !strcmp(rg->tenant, tenant) && !strcmp(rg->name, name))
			return rg;
	return NULL;
}

static struct rd_region *find_region_id(struct rd_control *ctl, uint32_t id)
{
	return id && id <= ctl->cfg->max_regions ? ctl->slots[id] : NULL;
}

void rd_control_region_put(struct rd_control *ctl, struct rd_region *rg)
{
	struct rd_region **pp;

	if (--rg->refs)
		return;
	for (pp = &ctl->regions; *pp; pp = &(*pp)->next)
		if (*pp == rg) {
			*pp = rg->next;
			break;
		}
	if (rg->remote) {
		rd_peers_region_free(ctl, rg);
		free(rg);
		return;
	}
	if (ctl->slots[rg->id] == rg)
		ctl->slots[rg->id] = NULL;
	rd_verbs_unreg_region(rg);
	rd_region_free(rg);
	free(rg);
	ctl->nregions--;
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
	const struct roshm_region_hdr *h = rg->map;

	rec->txn_slots = h->txn_slots;
	rec->slot_size = h->slot_size;
}

/* The owner gives the region up: peers' handles now complete with -ESTALE. */
void rd_region_unpublish(struct rd_control *ctl, struct rd_region *rg)
{
	struct rd_cmd cmd = { .type = RD_CMD_REGION_DEAD, .region = rg };
	int ret;

	rd_poller_cmd(ctl->poller, &cmd);
	ret = ctl->reg.ops->del_region(&ctl->reg, rg->tenant, rg->name, NULL, NULL);
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
	for (uint32_t i = 0; i < c->nhandles; i++) {
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

static void client_free(struct rd_control *ctl, struct rd_client *c)
{
	rd_verbs_unreg_client(ctl, c);
	if (c->chan)
		munmap(c->chan, c->chan_size);
	if (c->chan_fd >= 0)
		close(c->chan_fd);
	if (c->sq_efd >= 0)
		close(c->sq_efd);
	if (c->cq_efd >= 0)
		close(c->cq_efd);
	free(c->ctl_handles);
	free(c->dp_handles);
	free(c);
}

static void client_detach(struct rd_control *ctl, struct rd_client *c, const char *why)
{
	struct rd_cmd cmd = { .type = RD_CMD_CLIENT_DEL, .client = c };
	struct rd_client **pp;

	rd_poller_cmd(ctl->poller, &cmd);
	epoll_ctl(ctl->poller->epfd, EPOLL_CTL_DEL, c->sq_efd, NULL);
	for (uint32_t i = 0; i < c->nhandles; i++)
		if (c->ctl_handles[i].region)
			handle_release(ctl, c, rd_handle_make(i, c->ctl_handles[i].gen), false);
	for (pp = &ctl->clients; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	ctl->nclients--;
	for (int t = 0; t < ctl->cfg->ntenants; t++)
		if (!strcmp(ctl->cfg->tenants[t].name, c->tenant))
			ctl->tenant_sqes_gone[t] += RD_STAT_GET(c->stats.sqes);
	RD_LOG(INFO, "client %u (pid %d, tenant %s) detached: %s", c->id, (int)c->pid, c->tenant,
	       why);
	client_free(ctl, c);
}

static int do_hello(struct rd_control *ctl, struct rd_conn *conn, const void *buf, size_t len)
{
	const struct roshm_ctl_hello *req = buf;
	const struct rd_config *cfg = ctl->cfg;
	struct roshm_ctl_hello_reply rep;
	const struct rd_tenant_cfg *t;
	struct rd_client *c = NULL;
	char tok[ROSHM_TOKEN_MAX];
	uint64_t arena, off;
	uint32_t sq, cq;
	size_t size;
	int ret;

	if (conn->client)
		return -EALREADY;
	if (len != sizeof(*req) || !memchr(req->tenant, 0, sizeof(req->tenant)) ||
	    !memchr(req->token, 0, sizeof(req->token)))
		return -EINVAL;
	t = rd_config_tenant(cfg, req->tenant);
	/* Compare the whole zero-padded buffers in constant time. */
	memset(tok, 0, sizeof(tok));
	if (t)
		memcpy(tok, t->token, sizeof(tok));
	if (!t || CRYPTO_memcmp(tok, req->token, sizeof(tok)) != 0) {
		RD_LOG(WARNING, "attach refused: pid %d uid %u, tenant '%.63s': bad tenant or token",
		       (int)conn->pid, (unsigned)conn->uid, req->tenant);
		return -EACCES;
	}
	if (ctl->nclients >= cfg->max_clients)
		return -EMFILE;
	sq = round_pow2(req->sq_entries ? req->sq_entries : cfg->sq_entries);
	cq = round_pow2(req->cq_entries ? req->cq_entries : cfg->cq_entries);
	if (cq < sq)
		cq = sq;
	arena = req->arena_size ? req->arena_size : cfg->arena_size;
	if (sq < 2 || sq > cfg->max_sq_entries || cq > 2 * cfg->max_sq_entries ||
	    arena > cfg->max_arena_size)
		return -EINVAL;
	arena = (arena + 4095) & ~4095ull;

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->chan_fd = c->sq_efd = c->cq_efd = -1;
	c->nhandles = cfg->max_handles;
	c->ctl_handles = calloc(c->nhandles, sizeof(*c->ctl_handles));
	c->dp_handles = calloc(c->nhandles, sizeof(*c->dp_handles));
	if (!c->ctl_handles || !c->dp_handles) {
		ret = -ENOMEM;
		goto err;
	}
	/* Layout: header | SQ idx | SQEs | CQ idx | CQEs | arena (page aligned). */
	off = ROSHM_CHAN_HDR_SIZE;
	uint64_t sq_idx_off = off;

	off += sizeof(struct roshm_ring_idx);
	uint64_t sq_off = off;

	off += (uint64_t)sq * sizeof(struct roshm_sqe);
	uint64_t cq_idx_off = off;

	off += sizeof(struct roshm_ring_idx);
	uint64_t cq_off = off;

	off += (uint64_t)cq * sizeof(struct roshm_cqe);
	off = (off + 4095) & ~4095ull;
	uint64_t arena_off = off;

	size = (size_t)(off + arena);
	c->chan_fd = rd_memfd_create("roshm-channel", &size, cfg->hugepages, &c->hugetlb);
	if (c->chan_fd < 0) {
		ret = c->chan_fd;
		goto err;
	}
	c->chan = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, c->chan_fd, 0);
	if (c->chan == MAP_FAILED) {
		c->chan = NULL;
		ret = -errno;
		goto err;
	}
	c->chan_size = size;
	c->id = ++ctl->next_client_id;
	c->sock = conn->fd;
	c->pid = conn->pid;
	c->uid = conn->uid;
	memcpy(c->tenant, req->tenant, sizeof(c->tenant));
	c->hdr = c->chan;
	c->hdr->magic = ROSHM_CHAN_MAGIC;
	c->hdr->abi_version = ROSHM_ABI_VERSION;
	c->hdr->client_id = c->id;
	c->hdr->total_size = size;
	c->hdr->sq_entries = sq;
	c->hdr->cq_entries = cq;
	c->hdr->sq_idx_off = sq_idx_off;
	c->hdr->sq_off = sq_off;
	c->hdr->cq_idx_off = cq_idx_off;
	c->hdr->cq_off = cq_off;
	c->hdr->arena_off = arena_off;
	c->hdr->arena_size = size - arena_off;
	struct roshm_ring_idx *sqi = (void *)((uint8_t *)c->chan + sq_idx_off);
	struct roshm_ring_idx *cqi = (void *)((uint8_t *)c->chan + cq_idx_off);

	c->sq_khead = &sqi->head;
	c->sq_ktail = &sqi->tail;
	c->sqes = (void *)((uint8_t *)c->chan + sq_off);
	c->sq_entries = sq;
	c->sq_mask = sq - 1;
	c->cq_khead = &cqi->head;
	c->cq_ktail = &cqi->tail;
	c->cqes = (void *)((uint8_t *)c->chan + cq_off);
	c->cq_entries = cq;
	c->cq_mask = cq - 1;
	c->arena = (uint8_t *)c->chan + arena_off;
	c->arena_size = size - arena_off;
	ret = rd_verbs_reg_client(ctl, c); /* READs land in the arena, WRITEs leave from it */
	if (ret)
		goto err;

	c->sq_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	c->cq_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->sq_efd < 0 || c->cq_efd < 0) {
		ret = -errno;
		goto err;
	}
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = c->sq_efd };

	if (epoll_ctl(ctl->poller->epfd, EPOLL_CTL_ADD, c->sq_efd, &ev) < 0) {
		ret = -errno;
		goto err;
	}
	struct rd_cmd cmd = { .type = RD_CMD_CLIENT_ADD, .client = c };

	ret = rd_poller_cmd(ctl->poller, &cmd);
	if (ret) {
		epoll_ctl(ctl->poller->epfd, EPOLL_CTL_DEL, c->sq_efd, NULL);
		goto err;
	}
	c->next = ctl->clients;
	ctl->clients = c;
	ctl->nclients++;
	conn->client = c;

	memset(&rep, 0, sizeof(rep));
	reply_hdr(&rep.hdr, ROSHM_CTL_HELLO, sizeof(rep), 0);
	rep.client_id = c->id;
	rep.chan_size = size;
	rep.instance = ctl->instance;
	snprintf(rep.node, sizeof(rep.node), "%s", cfg->node);
	int fds[ROSHM_HELLO_NFDS];

	fds[ROSHM_HELLO_FD_CHAN] = c->chan_fd;
	fds[ROSHM_HELLO_FD_SQ_EVENT] = c->sq_efd;
	fds[ROSHM_HELLO_FD_CQ_EVENT] = c->cq_efd;
	RD_LOG(INFO, "client %u attached: pid %d uid %u tenant %s sq %u cq %u arena %llu%s", c->id,
	       (int)c->pid, (unsigned)c->uid, c->tenant, sq, cq,
	       (unsigned long long)c->arena_size, c->hugetlb ? " hugetlb" : " (4k pages)");
	if (send_reply(conn->fd, &rep, sizeof(rep), fds, ROSHM_HELLO_NFDS))
		return -ECONNRESET; /* caller detaches */
	/* roshmd keeps its mapping; the fd itself is no longer needed. */
	close(c->chan_fd);
	c->chan_fd = -1;
	return 1; /* replied */
err:
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

static int region_create(struct rd_control *ctl, struct rd_conn *conn, const void *buf,
			 size_t len, int *adopt);

static int do_region_create(struct rd_control *ctl, struct rd_conn *conn, const void *buf,
			    size_t len, int adopt_fd)
{
	/* @adopt_fd (REATTACH) belongs to us: the region takes it, or we close it. */
	int ret = region_create(ctl, conn, buf, len, &adopt_fd);

	if (adopt_fd >= 0)
		close(adopt_fd);
	return ret;
}

static int region_create(struct rd_control *ctl, struct rd_conn *conn, const void *buf,
			 size_t len, int *adopt)
{
	int adopt_fd = *adopt;
	const struct roshm_ctl_region_create *req = buf;
	const struct rd_config *cfg = ctl->cfg;
	struct rd_client *c = conn->client;
	struct roshm_ctl_region_reply rep;
	struct rd_region_rec rec;
	struct rd_region *rg;
	uint32_t hv;
	int ret;

	if (!c)
		return -ENOTCONN;
	if (len != sizeof(*req) || !memchr(req->name, 0, sizeof(req->name)) ||
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
	if (ctl->nregions >= cfg->max_regions)
		return -ENOSPC;
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
	rg->id = id;
	snprintf(rg->node, sizeof(rg->node), "%s", cfg->node);
	do
		random_bytes(&rg->epoch, sizeof(rg->epoch));
	while (!rg->epoch);
	random_bytes(&rg->key, sizeof(rg->key));
	memcpy(rg->tenant, c->tenant, sizeof(rg->tenant));
	memcpy(rg->name, req->name, sizeof(rg->name));
	rg->policy = req->policy;
	rg->ntenants = req->ntenants;
	memcpy(rg->tenants, req->tenants, sizeof(rg->tenants));
	rg->xport = &ctl->local;
	if (adopt_fd >= 0) {
		ret = rd_region_adopt(rg, adopt_fd, req->size, req->txn_slots, req->slot_size);
		if (!ret)
			*adopt = -1; /* the region owns it now */
	} else
		ret = rd_region_alloc(rg, req->size, req->txn_slots, req->slot_size, cfg->hugepages);
	if (!ret) {
		ret = rd_verbs_reg_region(ctl, rg); /* peers' NICs reach it through its rkey */
		if (ret)
			rd_region_free(rg);
	}
	if (ret) {
		free(rg);
		return ret;
	}
	rg->owner = c;
	rg->next = ctl->regions;
	ctl->regions = rg;
	ctl->slots[id] = rg;
	ctl->nregions++;
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
	/* the backend reports a later failure (another node's name: EEXIST) in its log */
	ret = ctl->reg.ops->put_region(&ctl->reg, &rec, RD_REG_EXCL, NULL, NULL);
	if (ret) {
		RD_LOG(ERR, "registry: publishing %s/%s: %s", rg->tenant, rg->name, strerror(-ret));
		handle_release(ctl, c, hv, true);
		return ret;
	}
	memset(&rep, 0, sizeof(rep));
	reply_hdr(&rep.hdr, ROSHM_CTL_REGION_CREATE, sizeof(rep), 0);
	rep.handle = hv;
	rep.data_size = rg->data_size;
	rep.map_size = rg->map_size;
	rep.epoch = rg->epoch;
	RD_LOG(INFO, "region %s/%s %s by client %u: %llu bytes, epoch %016llx%s", rg->tenant,
	       rg->name, adopt_fd >= 0 ? "re-attached (contents kept)" : "created", c->id,
	       (unsigned long long)rg->data_size, (unsigned long long)rg->epoch,
	       rg->hugetlb ? ", hugetlb" : "");
	if (send_reply(conn->fd, &rep, sizeof(rep), &rg->fd, 1))
		return -ECONNRESET;
	return 1;
}

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
	ret = ctl->reg.ops->get_region(&ctl->reg, tenant, name, &rec);
	if (ret == -EBADMSG)
		RD_LOG(WARNING, "registry: malformed record for %s/%s ignored", tenant, name);
	if (ret)
		return ret == -EBADMSG ? -ENOENT : ret;
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
		ret = rd_peers_open_remote(ctl, &rec, &rg);
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

static bool admin_allowed(const struct rd_control *ctl, uid_t uid)
{
	if (uid == 0 || uid == getuid())
		return true;
	for (int i = 0; i < ctl->cfg->nadmin_uids; i++)
		if (ctl->cfg->admin_uids[i] == uid)
			return true;
	return false;
}

static void list_cb(const struct rd_region_rec *rec, void *arg)
{
	json_t *a = arg, *o = json_object();
	char buf[32];

	json_object_set_new(o, "name", json_sprintf("%s/%s", rec->tenant, rec->name));
	json_object_set_new(o, "node", json_string(rec->node));
	json_object_set_new(o, "state", json_string(rec->state));
	json_object_set_new(o, "size", json_integer((json_int_t)rec->data_size));
	snprintf(buf, sizeof(buf), "%016llx", (unsigned long long)rec->epoch);
	json_object_set_new(o, "epoch", json_string(buf));
	json_object_set_new(o, "policy", json_string(rec->policy == ROSHM_POLICY_OWNER ? "owner" :
						      rec->policy == ROSHM_POLICY_LIST ? "list" :
											 "tenant"));
	json_array_append_new(a, o);
}

json_t *rd_control_admin_json(struct rd_control *ctl, const char *cmd)
{
	const struct rd_poller_stats *ps = &ctl->poller->stats;
	json_t *o;

	if (!strcmp(cmd, "status")) {
		o = json_object();
		json_object_set_new(o, "node", json_string(ctl->cfg->node));
		json_object_set_new(o, "version", json_string(ROSHM_VERSION));
		json_object_set_new(o, "pid", json_integer(getpid()));
		json_object_set_new(o, "uptime_s",
				    json_integer((json_int_t)((rd_mono_ns() - ctl->start_ns) / 1000000000ull)));
		json_object_set_new(o, "clients", json_integer(ctl->nclients));
		json_object_set_new(o, "regions", json_integer(ctl->nregions));
		json_object_set_new(o, "registry", json_string(ctl->reg.ops->name));
		json_object_set_new(o, "registry_ready", json_boolean(ctl->reg.ops->ready(&ctl->reg)));
		json_object_set_new(o, "transports", json_string(ctl->poller->tcp ? "local,tcp" : ctl->poller->verbs ? "local,verbs" : "local"));
		if (ctl->endpoint[0])
			json_object_set_new(o, "endpoint", json_string(ctl->endpoint));
		json_object_set_new(o, "idle", json_string(ctl->cfg->idle == RD_IDLE_BUSY ? "busy" : "adaptive"));
		json_object_set_new(o, "socket", json_string(ctl->cfg->socket));
		return o;
	}
	if (!strcmp(cmd, "clients")) {
		o = json_array();
		for (struct rd_client *c = ctl->clients; c; c = c->next) {
			json_t *e = json_object();
			uint32_t nh = 0;

			for (uint32_t i = 0; i < c->nhandles; i++)
				nh += c->ctl_handles[i].region != NULL;
			json_object_set_new(e, "id", json_integer(c->id));
			json_object_set_new(e, "pid", json_integer(c->pid));
			json_object_set_new(e, "uid", json_integer(c->uid));
			json_object_set_new(e, "tenant", json_string(c->tenant));
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
	if (!strcmp(cmd, "peers"))
		return rd_peers_json(ctl);
	if (!strcmp(cmd, "regions")) {
		o = json_array();
		ctl->reg.ops->list_regions(&ctl->reg, list_cb, o);
		return o;
	}
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

static int do_admin(struct rd_control *ctl, struct rd_conn *conn, const void *buf, size_t len)
{
	const struct roshm_ctl_admin *req = buf;
	json_t *o;
	int ret;

	if (len != sizeof(*req) || !memchr(req->cmd, 0, sizeof(req->cmd)))
		return -EINVAL;
	if (!admin_allowed(ctl, conn->uid))
		return -EPERM;
	if (!strncmp(req->cmd, "drain", 5) && (req->cmd[5] == 0 || req->cmd[5] == ' ')) {
		/* "drain", "drain tenant T", "drain region T/N": the reply comes
		 * when the regions are drained (rd_drain_tick). */
		char what[16] = "", arg[2 * ROSHM_NAME_MAX] = "";

		if (req->cmd[5] && (sscanf(req->cmd + 6, "%15s %127s", what, arg) != 2 ||
				    (strcmp(what, "tenant") && strcmp(what, "region"))))
			return -EINVAL;
		ret = rd_drain_start(ctl, !strcmp(what, "tenant") ? arg : NULL,
				     !strcmp(what, "region") ? arg : NULL, conn->fd);
		return ret < 0 ? ret : 1;
	}
	o = rd_control_admin_json(ctl, req->cmd);
	if (!o)
		return -EINVAL;
	ret = rd_control_admin_reply(conn->fd, o);
	json_decref(o);
	return ret;
}

/* ---- connections -------------------------------------------------------------- */

static void conn_close(struct rd_control *ctl, struct rd_conn *conn, const char *why)
{
	struct rd_conn **pp;

	if (conn->client)
		client_detach(ctl, conn->client, why);
	rd_drain_forget_fd(ctl, conn->fd);
	epoll_ctl(ctl->epfd, EPOLL_CTL_DEL, conn->fd, NULL);
	close(conn->fd);
	for (pp = &ctl->conns; *pp; pp = &(*pp)->next)
		if (*pp == conn) {
			*pp = conn->next;
			break;
		}
	free(conn);
}

static void conn_accept(struct rd_control *ctl)
{
	struct ucred cr;
	socklen_t crl = sizeof(cr);
	struct rd_conn *conn;
	int fd = accept4(ctl->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd < 0)
		return;
	conn = calloc(1, sizeof(*conn));
	if (!conn || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crl) < 0) {
		free(conn);
		close(fd);
		return;
	}
	conn->tag.kind = RD_EP_CONN;
	conn->fd = fd;
	conn->pid = cr.pid;
	conn->uid = cr.uid;
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = conn };

	if (epoll_ctl(ctl->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		free(conn);
		close(fd);
		return;
	}
	conn->next = ctl->conns;
	ctl->conns = conn;
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
	/* Only REGION_REATTACH carries a descriptor (one); close any others. */
	int in_fd = -1, nfd = 0;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
				int fd = ((int *)CMSG_DATA(c))[i];

				if (nfd++ == 0 && n > 0 && (size_t)n >= sizeof(*h) &&
				    h->type == ROSHM_CTL_REGION_REATTACH)
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
		return;
	}
	switch (h->type) {
	case ROSHM_CTL_HELLO:
		ret = do_hello(ctl, conn, buf, (size_t)n);
		break;
	case ROSHM_CTL_REGION_CREATE:
		ret = do_region_create(ctl, conn, buf, (size_t)n, -1);
		break;
	case ROSHM_CTL_REGION_REATTACH:
		if (in_fd < 0) {
			ret = -EINVAL;
			break;
		}
		ret = do_region_create(ctl, conn, buf, (size_t)n, in_fd); /* takes in_fd */
		in_fd = -1;
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
	if (ret == -ECONNRESET) {
		conn_close(ctl, conn, "reply failed");
		return;
	}
	if (ret <= 0 && send_status(conn->fd, h->type, ret))
		conn_close(ctl, conn, "reply failed");
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
		for (struct rd_conn *conn = ctl->conns; conn; conn = conn->next) {
			if (conn->client && conn->client->id == ev.client_id) {
				ev.why[sizeof(ev.why) - 1] = 0;
				RD_LOG(WARNING, "client %u (pid %d): %s: disconnecting it",
				       ev.client_id, (int)conn->pid, ev.why);
				conn_close(ctl, conn, ev.why);
				break;
			}
		}
	}
}

/* ---- setup ---------------------------------------------------------------------- */

static int listen_socket(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char dir[sizeof(sa.sun_path)];
	int fd, probe;

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
	}
	/* Refuse to steal the socket of a live roshmd. */
	probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		close(probe);
		return -EADDRINUSE;
	}
	if (probe >= 0)
		close(probe);
	unlink(path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 128) < 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	/* Any local process may attach; tenants and tokens decide what it gets. */
	chmod(path, 0666);
	return fd;
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
	ctl->cfg = cfg;
	ctl->poller = p;
	ctl->listen_fd = ctl->epfd = ctl->sig_fd = -1;
	ctl->tcp_listen_fd = -1;
	ctl->metrics_fd = -1;
	ctl->local.ops = &rd_local_transport_ops;
	ctl->start_ns = rd_mono_ns();
	random_bytes(&ctl->instance, sizeof(ctl->instance));
	ctl->slots = calloc(cfg->max_regions + 1, sizeof(*ctl->slots));
	if (!ctl->slots)
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
	ret = listen_socket(cfg->socket);
	if (ret < 0) {
		RD_LOG(ERR, "socket %s: %s", cfg->socket, strerror(-ret));
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
	RD_LOG(INFO, "node %s listening on %s, registry %s:%s", cfg->node, cfg->socket,
	       ctl->reg.ops->name, cfg->registry_dir);
	return 0;
}

int rd_control_run(struct rd_control *ctl)
{
	struct epoll_event evs[64];

	while (!ctl->stop) {
		int n = epoll_wait(ctl->epfd, evs, 64, 100);

		for (int i = 0; i < n; i++) {
			void *tag = evs[i].data.ptr;
			enum rd_ep_kind kind = ((struct rd_ep_tag *)tag)->kind;

			if (kind == RD_EP_TCP_LISTEN) {
				rd_peers_accept(ctl);
			} else if (kind == RD_EP_TCP_ACCEPT) {
				if (rd_peers_acc_live(ctl, tag))
					rd_peers_accept_step(ctl, tag);
			} else if (kind == RD_EP_VERBS_CM) {
				rd_verbs_cm_events(ctl);
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
						rd_drain_start(ctl, NULL, NULL, -1);
					}
				}
			} else if (tag == &tag_ev) {
				poller_events(ctl);
			} else if (tag == &tag_reg) {
				/* dispatched below */
			} else {
				/* A connection may have been closed by an earlier
				 * event of this batch (poller_events): check it. */
				struct rd_conn *conn = tag;
				bool live = false;

				for (struct rd_conn *c = ctl->conns; c; c = c->next)
					live |= c == conn;
				if (live)
					conn_readable(ctl, conn);
			}
		}
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
	return 0;
}

void rd_control_fini(struct rd_control *ctl)
{
	/* The poller has stopped: close its connections before the peers
	 * (which own the outbound ones) are freed. */
	if (ctl->poller && ctl->poller->tcp)
		rd_tcp_close_all(ctl->poller->tcp);
	if (ctl->poller && ctl->poller->verbs)
		rd_verbs_close_all(ctl->poller->verbs);
	while (ctl->conns)
		conn_close(ctl, ctl->conns, "roshmd stopping");
	if (ctl->listen_fd >= 0) {
		close(ctl->listen_fd);
		unlink(ctl->cfg->socket);
	}
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
}
