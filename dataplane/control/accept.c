// SPDX-License-Identifier: MIT
/*
 * The control socket's newcomers: accept, a bounded number per turn of the
 * loop, and the cap on connections that have not attached
 * (admin.max_pending): which one a newcomer closes when every slot is
 * taken (a flooding pod's own first), or when accepting pauses
 * (docs/security.md).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "control/internal.h"

#define RD_LOG_COMPONENT RD_LC_CONTROL

/* A pending slot may be free now, or a connection has passed HELLO (the
 * newcomer may close one of its tenant's): while accepting is paused, look
 * again (rd_conn_accept pauses once more if nothing changed). */
void rd_conn_pending_changed(struct rd_control *ctl)
{
	if (ctl->accept_paused && ctl->listen_fd >= 0) {
		ctl->accept_paused = false;
		ctl->accept_resume_ns = 0;
		rd_control_listen_arm(ctl, true);
	}
}

/* @conn at the head of the connections (the newest). */
void rd_conn_link(struct rd_control *ctl, struct rd_conn *conn)
{
	conn->prev = NULL;
	conn->next = ctl->conns;
	if (ctl->conns)
		ctl->conns->prev = conn;
	else
		ctl->conns_tail = conn;
	ctl->conns = conn;
}

/* A message waits on the connection (SOCK_SEQPACKET: a whole one). */
static bool conn_has_request(int fd)
{
	char b;

	return recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

/*
 * Connections by where they come from: the network namespace of the peer's
 * socket (SO_NETNS_COOKIE of the accepted one, which the kernel makes in the
 * connecting socket's namespace). Every pod has its own (tenant pods may
 * not use the host's: k8s/policy), so a pod that floods the socket is one
 * source, whatever its processes, uids and pids. 0: unknown (a kernel
 * before 5.14), not counted.
 */
static uint64_t conn_source(int fd)
{
#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71
#endif
	uint64_t cookie = 0;
	socklen_t len = sizeof(cookie);

	if (getsockopt(fd, SOL_SOCKET, SO_NETNS_COOKIE, &cookie, &len) < 0 || len != sizeof(cookie))
		return 0;
	return cookie;
}

/* @src's entry in ctl->src_tab for this evictable() call (counted from 0),
 * or NULL when the table has no room (it holds twice the pending count). */
static struct rd_src_count *src_count(struct rd_control *ctl, uint64_t src)
{
	uint32_t mask = ctl->src_cap - 1, i = (uint32_t)((src * 0x9e3779b97f4a7c15ull) >> 32) & mask;

	for (uint32_t k = 0; k < ctl->src_cap; k++, i = (i + 1) & mask) {
		struct rd_src_count *e = &ctl->src_tab[i];

		if (e->gen != ctl->evict_gen) {
			e->gen = ctl->evict_gen;
			e->src = src;
			e->n = 0;
			return e;
		}
		if (e->src == src)
			return e;
	}
	return NULL;
}

/* ctl->src_tab with room for twice @n sources: false if it cannot grow. */
static bool src_tab_fit(struct rd_control *ctl, uint32_t n)
{
	uint32_t cap = 16;

	while (cap < 2 * n && cap < (1u << 30))
		cap <<= 1;
	if (ctl->src_cap >= cap)
		return true;
	struct rd_src_count *t = calloc(cap, sizeof(*t));

	if (!t)
		return false;
	free(ctl->src_tab);
	ctl->src_tab = t;
	ctl->src_cap = cap;  /* zeroed: every entry stale (evict_gen only grows, from 1) */
	return true;
}

/* A connection that has not attached, HELLO not passed, no drain answered. */
static bool pre_hello(const struct rd_conn *c)
{
	return !c->client && !c->hello && c->deadline_ns && c->fd >= 0;
}

/* @c (pre_hello) has no request waiting. A request seen once per
 * rd_conn_accept call (peek_gen) stays so until it is read: not looked at
 * again for that call's other newcomers. */
static bool conn_idle(struct rd_control *ctl, struct rd_conn *c)
{
	if (c->peek_gen == ctl->accept_gen)
		return false;
	if (!conn_has_request(c->fd))
		return true;
	c->peek_gen = ctl->accept_gen;
	return false;
}

/*
 * The pending connection a newcomer closes when every slot is taken, or
 * NULL: then the newcomer waits in the backlog, until a slot changes or
 * (*@resume_ns, not 0) until then. Among the connections that have not
 * passed HELLO and have no request waiting (idle):
 * - the oldest once it has had its grace to send
 *   (admin.pending_grace_ms, hello_timeout_ms / 4 at most: a flood of
 *   reconnects must not close a slow client's connection before its one
 *   message, an admin's "status" or a HELLO);
 * - else the oldest of the source (conn_source) that holds the most
 *   connections before HELLO, max_pending / 4 or more and two at least,
 *   once it has had a quarter of the grace: a pod that floods connects
 *   makes room with its own, four times as fast, and holds nobody else's
 *   newcomers back for their grace; a client in the flooding pod's
 *   namespace (or, on one host without pods, any local process) keeps a
 *   quarter of it. A flood spread over namespaces that each hold fewer
 *   meets the grace, as before.
 * One whose request waits is answered when it is read (this batch or the
 * next) and stays: that frees its slot or passes HELLO, and accepting
 * resumes (rd_conn_pending_changed). When every slot has passed HELLO (a
 * good token, waiting for its CHANNEL), the oldest of the tenant that
 * holds the most of them, two or more: a tenant cannot hold every slot
 * with HELLOs of its own (up to its quota.clients).
 *
 * Cost per newcomer: the connections are in accept order, so those past
 * their grace are a prefix, looked at (MSG_PEEK) up to the first idle one;
 * the count by source is a walk without system calls; then the chosen
 * source's connections are looked at up to its first idle one.
 */
static struct rd_conn *evictable(struct rd_control *ctl, uint64_t *resume_ns)
{
	uint64_t grace = (uint64_t)ctl->cfg->hello_timeout_ms * 1000000ull / 4, now = rd_mono_ns();
	uint32_t held[RD_TENANTS_MAX] = { 0 }, need = ctl->cfg->max_pending_conns / 4, npre = 0;
	struct rd_src_count *most = NULL;
	struct rd_conn *c;
	bool count;
	int top = -1;

	if (grace > (uint64_t)ctl->cfg->pending_grace_ms * 1000000ull)
		grace = (uint64_t)ctl->cfg->pending_grace_ms * 1000000ull;
	if (need < 2)
		need = 2;
	*resume_ns = 0;
	for (c = ctl->conns_tail; c; c = c->prev) {
		if (!pre_hello(c))
			continue;
		if (now - c->accept_ns < grace) {
			*resume_ns = c->accept_ns + grace;  /* the oldest young one's */
			break;
		}
		if (conn_idle(ctl, c))
			return c;
	}
	count = src_tab_fit(ctl, ctl->npending);
	ctl->evict_gen++;
	for (c = ctl->conns_tail; c; c = c->prev) {
		struct rd_src_count *e;

		if (!pre_hello(c))
			continue;
		npre++;
		if (count && c->src && (e = src_count(ctl, c->src)) && ++e->n >= need &&
		    (!most || e->n > most->n))
			most = e;
	}
	for (c = ctl->conns_tail; most && c; c = c->prev) {
		if (!pre_hello(c) || c->src != most->src)
			continue;
		if (now - c->accept_ns < grace / 4) {
			if (!*resume_ns || c->accept_ns + grace / 4 < *resume_ns)
				*resume_ns = c->accept_ns + grace / 4;
			break;
		}
		if (conn_idle(ctl, c))
			return c;
	}
	if (npre)
		return NULL;  /* young ones (*resume_ns), or requests waiting */
	for (c = ctl->conns_tail; c; c = c->prev)
		if (!c->client && c->hello && c->deadline_ns && c->fd >= 0 && c->tidx >= 0 &&
		    c->tidx < RD_TENANTS_MAX && ++held[c->tidx] >= 2 &&
		    (top < 0 || held[c->tidx] > held[top]))
			top = c->tidx;
	for (c = ctl->conns_tail; top >= 0 && c; c = c->prev)
		if (!c->client && c->hello && c->deadline_ns && c->fd >= 0 && c->tidx == top &&
		    !conn_has_request(c->fd))
			return c;
	return NULL;
}

/* Newcomers taken per readiness of the control socket: the batch's other
 * events (requests, the timers) are not held up by a flood of connects. */
#define RD_ACCEPT_BATCH 16

void rd_conn_accept(struct rd_control *ctl)
{
	struct ucred cr;
	socklen_t crl = sizeof(cr);
	struct rd_conn *conn;
	int fd;

	ctl->accept_gen++;
	for (int n = 0; n < RD_ACCEPT_BATCH; n++) {
		if (ctl->npending >= ctl->cfg->max_pending_conns) {
			/* Unauthenticated connections cannot pile up (attached
			 * clients are counted by their tenants' quotas): one
			 * that is idle makes room (evictable()), so that holding
			 * every slot takes a steady flood rather than a few idle
			 * sockets. When none may go, newcomers wait in the
			 * backlog, in order, until a slot frees (rather than be
			 * refused: the next may be the admin's "status"). A
			 * drain's connection is not counted
			 * (rd_conn_drain_wait). */
			struct pollfd p = { .fd = ctl->listen_fd, .events = POLLIN };
			struct rd_conn *old;
			uint64_t resume;

			if (poll(&p, 1, 0) != 1)
				return; /* nobody waits */
			old = evictable(ctl, &resume);
			if (!old) {
				rd_control_listen_arm(ctl, false);
				ctl->accept_paused = true;
				ctl->accept_resume_ns = resume;
				return;
			}
			ctl->refused_conns++;
			rd_conn_close(ctl, old, "evicted: too many connections not attached");
		}
		fd = accept4(ctl->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0) {
			/* out of descriptors or memory: not again at every turn
			 * of the loop, but when a connection goes, or in a
			 * second (what freed them may not be one of ours) */
			if (errno == EMFILE || errno == ENFILE || errno == ENOMEM || errno == ENOBUFS) {
				RD_LOG(WARNING, "control socket: accept: %s: newcomers wait until a "
				       "connection closes", strerror(errno));
				rd_control_listen_arm(ctl, false);
				ctl->accept_paused = true;
				ctl->accept_resume_ns = rd_mono_ns() + 1000000000ull;
			}
			return;
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
		conn->src = conn_source(fd);
		conn->accept_ns = rd_mono_ns();
		conn->deadline_ns = rd_mono_ns() + (uint64_t)ctl->cfg->hello_timeout_ms * 1000000ull;
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = conn };

		if (epoll_ctl(ctl->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			free(conn);
			close(fd);
			continue;
		}
		rd_conn_link(ctl, conn);
		ctl->npending++;
	}
}
