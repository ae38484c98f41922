// SPDX-License-Identifier: MIT
/*
 * The control socket's server: connections (read, deadlines, close; accept
 * and the cap on unattached ones are accept.c's), replies, and attaching a
 * client: HELLO
 * (tenant and token, sizes, quota), CHANNEL (the client's channel memfd,
 * the wakeup sockets), until its connection closes (detach).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "control/internal.h"
#include "poller/sqe.h"

#define RD_LOG_COMPONENT RD_LC_CONTROL

/* ---- replies ------------------------------------------------------------ */

void rd_reply_hdr(struct roshm_ctl_hdr *h, uint16_t type, size_t len, int status)
{
	h->magic = ROSHM_CTL_MAGIC;
	h->type = type;
	h->version = ROSHM_ABI_VERSION;
	h->len = (uint32_t)len;
	h->status = status;
}

int rd_send_reply(int fd, const void *buf, size_t len, const int *fds, int nfds)
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

int rd_send_status(int fd, uint16_t type, int status)
{
	struct roshm_ctl_hdr h;

	rd_reply_hdr(&h, type, sizeof(h), status);
	return rd_send_reply(fd, &h, sizeof(h), NULL, 0);
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
void rd_control_client_free(struct rd_control *ctl, struct rd_client *c)
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
			rd_handle_release(ctl, c, rd_handle_make(i, c->ctl_handles[i].gen), false);
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
		rd_control_client_free(ctl, c);
		return;
	}
	/* WRs in flight still use its arena: the poller hands it back after. */
	c->zombie = true;
	c->znext = ctl->zombie_clients;
	ctl->zombie_clients = c;
}

/* Whether a live client, or another connection on its way to being one,
 * has @key. */
static bool ckey_taken(const struct rd_control *ctl, const struct rd_conn *self, uint64_t key)
{
	for (const struct rd_client *c = ctl->clients; c; c = c->next)
		if (c->ckey == key)
			return true;
	for (const struct rd_conn *c = ctl->conns; c; c = c->next)
		if (c != self && c->hello && !c->client && c->ckey == key)
			return true;
	return false;
}

/*
 * HELLO: authenticate the tenant, grant ring and arena sizes within the
 * limits and the tenant's quota (reserved until CHANNEL or the connection
 * ends), and say how big the client's channel memfd must be.
 */
static int msg_hello(struct rd_control *ctl, struct rd_conn *conn, const void *msg, int fd)
{
	const struct roshm_ctl_hello *req = msg;
	const struct rd_config *cfg = ctl->cfg;
	struct roshm_ctl_hello_reply rep;
	char tok[ROSHM_TOKEN_MAX];
	uint64_t arena, key;
	uint32_t sq, cq;
	int tidx;

	(void)fd;
	if (!memchr(req->tenant, 0, sizeof(req->tenant)) ||
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
	/* Its key: the one it brings back (a restart of ours), unless a live
	 * client has it; else a new one. A guess of another's is a 64-bit
	 * secret guessed; one the client chose itself only names itself. */
	key = req->client_key;
	while (!key || ckey_taken(ctl, conn, key))
		if (getrandom(&key, sizeof(key), GRND_NONBLOCK) != sizeof(key)) {
			/* no guessable key instead: the key is the client's identity */
			RD_LOG(WARNING, "attach refused: pid %d: getrandom: %s", (int)conn->pid,
			       strerror(errno));
			return -EAGAIN;
		}
	if (ctl->tuse[tidx].clients >= cfg->tenants[tidx].quota.clients ||
	    ctl->tuse[tidx].bytes + conn->lay.size > cfg->tenants[tidx].quota.bytes) {
		RD_LOG(NOTICE, "attach refused: pid %d, tenant %s: quota (clients %u, bytes %llu)",
		       (int)conn->pid, req->tenant, ctl->tuse[tidx].clients,
		       (unsigned long long)ctl->tuse[tidx].bytes);
		ctl->tenant_attach_refused[tidx]++;
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
	conn->ckey = key;
	memset(&rep, 0, sizeof(rep));
	rd_reply_hdr(&rep.hdr, ROSHM_CTL_HELLO, sizeof(rep), 0);
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
	rep.client_key = conn->ckey;
	rep.max_handles = cfg->max_handles;
	if (rd_send_reply(conn->fd, &rep, sizeof(rep), NULL, 0))
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

/* CHANNEL: take the client's channel memfd (@fd; the caller closes it). */
static int msg_channel(struct rd_control *ctl, struct rd_conn *conn, const void *msg, int fd)
{
	const struct rd_config *cfg = ctl->cfg;
	const struct roshm_chan_layout *l = &conn->lay;
	struct roshm_ctl_hdr rep;
	struct rd_client *c = NULL;
	unsigned flags = RD_MEM_NO_HOLES;
	int sq_sp[2] = { -1, -1 }, cq_sp[2] = { -1, -1 };
	int ret;

	(void)msg; /* its size field is the client's word: rd_memfd_take checks the memfd */
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
		       ret == -EFAULT ? "a page before its end is not allocated (write every page first)" :
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
	c->ckey = conn->ckey;
	c->cgid = rd_grant_id(cfg->node, c->tenant, "", c->ckey);   /* 0 (no digest): no grant names it */
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
	rd_reply_hdr(&rep, ROSHM_CTL_CHANNEL, sizeof(rep), 0);
	int fds[ROSHM_CHANNEL_NFDS];

	fds[ROSHM_CHANNEL_FD_SQ_EVENT] = sq_sp[1];
	fds[ROSHM_CHANNEL_FD_CQ_EVENT] = cq_sp[0];
	RD_LOG(INFO, "client %u attached: pid %d uid %u tenant %s%s%s sq %u cq %u arena %llu%s", c->id,
	       (int)c->pid, (unsigned)c->uid, c->tenant, c->pod[0] ? " pod " : "", c->pod, c->sq_entries,
	       c->cq_entries, (unsigned long long)c->arena_size, c->hugetlb ? " hugetlb" : " (4k pages)");
	ret = rd_send_reply(conn->fd, &rep, sizeof(rep), fds, ROSHM_CHANNEL_NFDS);
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
	rd_control_client_free(ctl, c);
	return ret;
}

/* ---- connections -------------------------------------------------------------- */

/*
 * Close a connection. Its memory goes after the current epoll batch (an
 * event of the same batch may point at it: it sees fd == -1).
 */
void rd_conn_close(struct rd_control *ctl, struct rd_conn *conn, const char *why)
{
	if (conn->fd < 0)
		return;
	if (conn->client)
		client_detach(ctl, conn->client, why);
	else if (conn->wait != RD_WAIT_DRAIN)
		ctl->npending--;
	else if (conn->drain_tidx >= 0)
		ctl->tuse[conn->drain_tidx].drains--;
	if (conn->hello) { /* the quota HELLO reserved goes back */
		ctl->tuse[conn->tidx].clients--;
		ctl->tuse[conn->tidx].bytes -= conn->lay.size;
	}
	rd_drain_forget_fd(ctl, conn->fd);
	epoll_ctl(ctl->epfd, EPOLL_CTL_DEL, conn->fd, NULL);
	close(conn->fd);
	conn->fd = -1;
	rd_reg_rate_forget(ctl, conn); /* after the close: the next in line may read now */
	if (conn->prev)
		conn->prev->next = conn->next;
	else
		ctl->conns = conn->next;
	if (conn->next)
		conn->next->prev = conn->prev;
	else
		ctl->conns_tail = conn->prev;
	conn->next = ctl->dead_conns;
	ctl->dead_conns = conn;
	rd_conn_pending_changed(ctl);
}

void rd_conns_reap(struct rd_control *ctl)
{
	while (ctl->dead_conns) {
		struct rd_conn *c = ctl->dead_conns;

		ctl->dead_conns = c->next;
		free(c);
	}
}

/* Connections that are not attached: they must make progress, and only so
 * many may wait (a HELLO deadline and admin.max_pending). */
void rd_conns_timer(struct rd_control *ctl, uint64_t now)
{
	for (struct rd_conn *c = ctl->conns, *next; c; c = next) {
		next = c->next;
		if (!c->client && c->deadline_ns && now >= c->deadline_ns) {
			RD_LOG(NOTICE, "control connection of pid %d idle past %u ms: closed", (int)c->pid,
			       ctl->cfg->hello_timeout_ms);
			rd_conn_close(ctl, c, "idle");
		}
	}
	/* a newcomer waited for a connection's grace to end (evictable) */
	if (ctl->accept_paused && ctl->accept_resume_ns && now >= ctl->accept_resume_ns)
		rd_conn_pending_changed(ctl);
	rd_conns_reap(ctl);
}

/* A drain answered on this connection: one not attached has had its one
 * answer and goes (an attached client's stays). */
void rd_control_drain_answered(struct rd_control *ctl, int fd)
{
	for (struct rd_conn *c = ctl->conns; c; c = c->next)
		if (c->fd == fd && c->wait == RD_WAIT_DRAIN) {
			rd_conn_close(ctl, c, "drain answered");
			return;
		}
}

/* Whether tenant @tidx (-1: an admin) may start one more drain that a
 * connection not attached waits for: as many as its client quota. */
bool rd_conn_drain_room(const struct rd_control *ctl, int tidx)
{
	uint32_t max = tidx >= 0 ? ctl->cfg->tenants[tidx].quota.clients : 0;

	return tidx < 0 || ctl->tuse[tidx].drains < (max ? max : 1);
}

/* A drain started for @conn, which is not attached: it no longer holds a
 * pending slot (it has shown a credential and waits for roshmd, up to
 * drain.timeout_ms) and is not read until it is answered. */
void rd_conn_drain_wait(struct rd_control *ctl, struct rd_conn *conn, int tidx)
{
	if (tidx >= 0)
		ctl->tuse[tidx].drains++;
	conn->drain_tidx = tidx;
	conn->deadline_ns = 0;
	ctl->npending--;
	rd_conn_wait_for(ctl, conn, RD_WAIT_DRAIN);
}

/* ---- control messages ------------------------------------------------------ */

/* Where a connection must be for a message, and the status when it is not. */
enum msg_state {
	MSG_ANY,                      /* any connection (admin requests) */
	MSG_FRESH,                    /* before HELLO: else -EALREADY */
	MSG_HELLO,                    /* after HELLO, before CHANNEL: else -EPROTO */
	MSG_ATTACHED,                 /* attached (after CHANNEL): else -ENOTCONN */
};

/*
 * The control messages, vhost-user style. Before a handler runs, the
 * dispatcher checks the connection's state, then the length (exact: every
 * message has a fixed size) and the descriptor (nfds 1: it must come);
 * either of those is -EINVAL. The handler checks the contents. It returns 1
 * when it answered (or the answer comes later), 0 or -errno for the
 * dispatcher to answer with that status, -ECONNRESET to close the
 * connection. Its @fd is the descriptor that came with the message (-1 when
 * nfds is 0); the dispatcher closes it after.
 */
static const struct msg_handler {
	uint16_t type;
	int (*handler)(struct rd_control *ctl, struct rd_conn *conn, const void *msg, int fd);
	size_t size;
	uint8_t nfds;
	enum msg_state state;
} handlers[] = {
	{ ROSHM_CTL_HELLO, msg_hello, sizeof(struct roshm_ctl_hello), 0, MSG_FRESH },
	{ ROSHM_CTL_CHANNEL, msg_channel, sizeof(struct roshm_ctl_channel), 1, MSG_HELLO },
	{ ROSHM_CTL_REGION_CREATE, rd_msg_region_create, sizeof(struct roshm_ctl_region_create), 1,
	  MSG_ATTACHED },
	{ ROSHM_CTL_REGION_REATTACH, rd_msg_region_reattach, sizeof(struct roshm_ctl_region_create),
	  1, MSG_ATTACHED },
	{ ROSHM_CTL_REGION_OPEN, rd_msg_region_open, sizeof(struct roshm_ctl_region_open), 0,
	  MSG_ATTACHED },
	{ ROSHM_CTL_REGION_CLOSE, rd_msg_region_close, sizeof(struct roshm_ctl_region_close), 0,
	  MSG_ATTACHED },
	{ ROSHM_CTL_REGION_GRANT, rd_msg_region_grant, sizeof(struct roshm_ctl_region_grant), 0,
	  MSG_ATTACHED },
	{ ROSHM_CTL_ADMIN, rd_msg_admin, sizeof(struct roshm_ctl_admin), 0, MSG_ANY },
};

/* The most descriptors any message takes (nfds above); more end the connection. */
#define MSG_FDS_MAX 1

static const struct msg_handler *msg_handler(uint16_t type)
{
	for (size_t i = 0; i < sizeof(handlers) / sizeof(handlers[0]); i++)
		if (handlers[i].type == type)
			return &handlers[i];
	return NULL;
}

/* What every message of its type needs: 0, or the status it is refused with. */
static int msg_check(const struct msg_handler *mh, const struct rd_conn *conn, size_t len, int fd)
{
	switch (mh->state) {
	case MSG_ANY:
		break;
	case MSG_FRESH:
		if (conn->client || conn->hello)
			return -EALREADY;
		break;
	case MSG_HELLO:
		if (!conn->hello || conn->client)
			return -EPROTO;
		break;
	case MSG_ATTACHED:
		if (!conn->client)
			return -ENOTCONN;
		break;
	}
	if (len != mh->size || (mh->nfds && fd < 0))
		return -EINVAL;
	return 0;
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
	const struct msg_handler *mh = NULL;
	bool was_pending = !conn->client;
	ssize_t n;
	int ret;

	if (rd_reg_rate_hold(ctl, conn))
		return; /* its tenant's registry operations: read when they refill */
	n = recvmsg(conn->fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n > 0 && (size_t)n >= sizeof(*h))
		mh = msg_handler(h->type);
	/* A message that takes a descriptor (CHANNEL, REGION_CREATE and
	 * REGION_REATTACH) keeps the first; every other one is closed at once,
	 * and more than MSG_FDS_MAX end the connection. */
	int in_fd = -1, nfd = 0;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
				int fd = ((int *)CMSG_DATA(c))[i];

				if (nfd++ == 0 && mh && mh->nfds)
					in_fd = fd;
				else
					close(fd);
			}
	if (nfd > MSG_FDS_MAX || (msg.msg_flags & MSG_CTRUNC)) {
		if (in_fd >= 0)
			close(in_fd);
		rd_conn_close(ctl, conn, "too many descriptors");
		return;
	}
	if (n <= 0) {
		if (in_fd >= 0)
			close(in_fd);
		rd_conn_close(ctl, conn, n == 0 ? "socket closed" : "socket error");
		return;
	}
	if ((size_t)n < sizeof(*h) || h->magic != ROSHM_CTL_MAGIC || h->len != (uint32_t)n ||
	    (msg.msg_flags & MSG_TRUNC)) {
		if (in_fd >= 0)
			close(in_fd);
		RD_LOG(NOTICE, "malformed control message from pid %d: disconnected", (int)conn->pid);
		rd_conn_close(ctl, conn, "malformed control message");
		return;
	}
	if (h->version != ROSHM_ABI_VERSION) {
		if (in_fd >= 0)
			close(in_fd);
		RD_LOG(NOTICE, "pid %d speaks ABI %u, this roshmd %u", (int)conn->pid, h->version,
		       ROSHM_ABI_VERSION);
		rd_send_status(conn->fd, h->type, -EPROTO);
		if (!conn->client)
			rd_conn_close(ctl, conn, "ABI version mismatch");
		return;
	}
	/* An unattached connection's deadline runs from accept: no message
	 * moves it, but a HELLO that succeeds (msg_hello) for its CHANNEL. */
	if (!mh)
		ret = -EOPNOTSUPP;
	else if (!(ret = msg_check(mh, conn, (size_t)n, in_fd))) {
		int tidx = conn->client ? conn->client->tidx : -1;

		ret = mh->handler(ctl, conn, buf, in_fd);
		rd_reg_rate_charge(ctl, tidx, h->type);
	}
	/* Whoever took the memory mapped it; the descriptor is not kept. */
	if (in_fd >= 0)
		close(in_fd);
	if (ret == -ECONNRESET) {
		rd_conn_close(ctl, conn, "reply failed");
		return;
	}
	if (ret <= 0 && rd_send_status(conn->fd, h->type, ret)) {
		rd_conn_close(ctl, conn, "reply failed");
		return;
	}
	/* Before it attaches a connection gets one answer but the HELLO's: a
	 * refusal (a wrong token, an unknown request, anything but CHANNEL
	 * after HELLO) or an admin answer ends it, so nobody holds a pending
	 * slot by talking, nor keeps a request always waiting there to be
	 * passed over by evictable() (a drain's connection waits, unread,
	 * outside the slots). */
	if (!conn->client && conn->deadline_ns && (ret < 0 || h->type == ROSHM_CTL_ADMIN))
		rd_conn_close(ctl, conn, ret < 0 ? "refused before attach" : "admin request answered");
	else if (was_pending)
		rd_conn_pending_changed(ctl); /* (it may have passed HELLO, attached, or be draining) */
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
	conn->accept_ns = rd_mono_ns();
	conn->deadline_ns = conn->accept_ns + (uint64_t)ctl->cfg->hello_timeout_ms * 1000000ull;
	ev.data.ptr = conn;
	if (epoll_ctl(ctl->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		free(conn);
		return -errno;
	}
	rd_conn_link(ctl, conn);
	ctl->npending++;
	return 0;
}

void rd_conn_event(struct rd_control *ctl, struct rd_conn *conn, uint32_t events)
{
	/* A connection may have been closed by an earlier event of this
	 * batch (the poller's events): check it. */
	if (conn->fd < 0)
		return;
	/* a request waiting: only a hang-up matters */
	if (conn->wait != RD_WAIT_NONE && !(events & EPOLLIN)) {
		if (events & (EPOLLHUP | EPOLLERR))
			rd_conn_close(ctl, conn, "closed while waiting");
		return;
	}
	conn_readable(ctl, conn);
}
