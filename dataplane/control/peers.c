// SPDX-License-Identifier: MIT
/*
 * Control side of the tcp transport: the listening socket and the
 * responder half of the handshake (non-blocking), outbound connections to
 * peer nodes (one per node, made on first use, retried while regions need
 * them), remote regions and their revalidation against the registry.
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

#define ACCEPT_TIMEOUT_NS (2000000000ull)
/* Reconnects back off from RETRY_MIN_NS to RETRY_MAX_NS, doubling while
 * they fail; a connection that comes up starts the next loss at the minimum. */
#define RETRY_MIN_NS (50000000ull)
#define RETRY_MAX_NS (1000000000ull)

static void retry_later(struct rd_peer *p, uint64_t now)
{
	if (p->backoff_ns < RETRY_MIN_NS)
		p->backoff_ns = RETRY_MIN_NS;
	p->retry_ns = now + p->backoff_ns;
	p->backoff_ns = p->backoff_ns * 2 > RETRY_MAX_NS ? RETRY_MAX_NS : p->backoff_ns * 2;
}

static bool is_verbs(const char *endpoint)
{
	return !strncmp(endpoint, "verbs:", 6);
}

/* Whether this node has the transport that @endpoint needs. */
static bool reachable(const struct rd_control *ctl, const char *endpoint)
{
	return is_verbs(endpoint) ? ctl->verbs != NULL
				  : ctl->cfg->tcp_enabled && !strncmp(endpoint, "tcp:", 4);
}

static struct rd_peer *peer_get(struct rd_control *ctl, const char *node, const char *endpoint);
static int peer_connect(struct rd_control *ctl, struct rd_peer *p);
static void dial_free(struct rd_control *ctl, struct rd_peer *p);
static void revalidate(struct rd_control *ctl, struct rd_region *rg, uint64_t now);

/* Atomics of this node's pods and transaction engine on its own regions must
 * be serialized with the peers' NIC atomics: unless the NIC's atomics are
 * atomic with the CPU's (IBV_ATOMIC_GLOB), they go through a loopback QP. */
static int verbs_loopback(struct rd_control *ctl)
{
	struct rd_peer *self;
	int ret;

	if (ctl->verbs->atomic_glob) {
		RD_LOG(INFO, "verbs: %s atomics are atomic with the CPU's (IBV_ATOMIC_GLOB): local "
		       "atomics run on the CPU", ctl->verbs->dev);
		return 0;
	}
	self = peer_get(ctl, ctl->cfg->node, ctl->endpoint);
	if (!self)
		return -ENOMEM;
	self->self = true;
	self->refs = 1; /* keep it connected */
	ctl->verbs->self = self;
	ctl->local.priv = ctl->poller->verbs;
	/* Until the loopback is up, local atomics on our regions wait in their
	 * rings (rd_verbs_submit_local); it is re-made like any peer. */
	ret = peer_connect(ctl, self);
	if (ret) {
		RD_LOG(ERR, "verbs: loopback QP to ourselves (for atomics on our regions): %s",
		       strerror(-ret));
		return ret;
	}
	RD_LOG(INFO, "verbs: %s atomics are not atomic with the CPU's: atomics on this node's regions "
	       "go through a loopback QP", ctl->verbs->dev);
	return 0;
}

int rd_peers_init(struct rd_control *ctl)
{
	static struct rd_ep_tag listen_tag = { RD_EP_TCP_LISTEN };
	static struct rd_ep_tag verbs_tag = { RD_EP_VERBS_CM };
	const struct rd_config *cfg = ctl->cfg;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)cfg->tcp_port) };
	char err[300];
	int fd, one = 1, ret;

	ctl->tcp_listen_fd = -1;
	if (cfg->verbs_enabled) {
		ret = rd_verbs_ctl_init(ctl, ctl->endpoint, sizeof(ctl->endpoint));
		if (ret)
			return ret;
		rd_control_epoll_add(ctl, ctl->verbs->ch->fd, &verbs_tag);
		return verbs_loopback(ctl);
	}
	if (!cfg->tcp_enabled)
		return 0;
	ret = rd_tcp_secret_load(&ctl->secret, cfg->tcp_secret_file, err, sizeof(err));
	if (ret) {
		RD_LOG(ERR, "%s", err);
		return ret;
	}
	inet_pton(AF_INET, cfg->tcp_listen, &sa.sin_addr);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0) {
		ret = -errno;
		RD_LOG(ERR, "tcp transport: listen on %s:%u: %s", cfg->tcp_listen, cfg->tcp_port,
		       strerror(errno));
		close(fd);
		return ret;
	}
	ctl->tcp_listen_fd = fd;
	snprintf(ctl->endpoint, sizeof(ctl->endpoint), "tcp:%s:%u", cfg->tcp_advertise,
		 cfg->tcp_port);
	rd_control_epoll_add(ctl, fd, &listen_tag);
	RD_LOG(INFO, "tcp transport: listening on %s:%u, peers reach us at %s", cfg->tcp_listen,
	       cfg->tcp_port, ctl->endpoint);
	return 0;
}

static void acc_free(struct rd_control *ctl, struct rd_acc *acc, bool close_fd)
{
	struct rd_acc **pp;

	rd_control_epoll_del(ctl, acc->a.fd);
	if (close_fd)
		close(acc->a.fd);
	for (pp = &ctl->accepting; *pp; pp = &(*pp)->next)
		if (*pp == acc) {
			*pp = acc->next;
			break;
		}
	free(acc);
}

bool rd_peers_acc_live(struct rd_control *ctl, struct rd_acc *acc)
{
	for (struct rd_acc *a = ctl->accepting; a; a = a->next)
		if (a == acc)
			return true;
	return false;
}

void rd_peers_fini(struct rd_control *ctl)
{
	while (ctl->accepting)
		acc_free(ctl, ctl->accepting, true);
	if (ctl->tcp_listen_fd >= 0)
		close(ctl->tcp_listen_fd);
	ctl->tcp_listen_fd = -1;
	while (ctl->peers) {
		struct rd_peer *p = ctl->peers;

		ctl->peers = p->next;
		if (p->dial) {
			int fd = p->dial->d.fd;

			dial_free(ctl, p);
			close(fd);
		}
		if (p->verbs)
			rd_verbs_peer_free(ctl, p);
		else
			rd_tcp_conn_free(&p->conn);
		free(p);
	}
	rd_verbs_ctl_fini(ctl);
}

/*
 * Handshakes in progress are bounded: ACCEPT_MAX in all, ACCEPT_PER_ADDR
 * from one address, each ACCEPT_TIMEOUT_NS at most. A connection that comes
 * past them is closed at once: unauthenticated peers cannot pile up state.
 */
#define ACCEPT_MAX 64
#define ACCEPT_PER_ADDR 8

void rd_peers_accept(struct rd_control *ctl)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	struct rd_acc *acc;
	int fd;

	while ((fd = accept4(ctl->tcp_listen_fd, (struct sockaddr *)&sa, &sl,
			     SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0) {
		uint32_t all = 0, same = 0;

		sl = sizeof(sa);
		for (struct rd_acc *a = ctl->accepting; a; a = a->next) {
			all++;
			same += a->from == sa.sin_addr.s_addr;
		}
		if (all >= ACCEPT_MAX || same >= ACCEPT_PER_ADDR) {
			close(fd);
			ctl->refused_peers++;
			continue;
		}
		acc = calloc(1, sizeof(*acc));
		if (!acc) {
			close(fd);
			continue;
		}
		acc->tag.kind = RD_EP_TCP_ACCEPT;
		acc->a.fd = fd;
		acc->a.deadline_ns = rd_mono_ns() + ACCEPT_TIMEOUT_NS;
		acc->from = sa.sin_addr.s_addr;
		snprintf(acc->addr, sizeof(acc->addr), "%s:%u", inet_ntoa(sa.sin_addr),
			 ntohs(sa.sin_port));
		acc->next = ctl->accepting;
		ctl->accepting = acc;
		rd_control_epoll_add(ctl, fd, acc);
	}
}

/* Why node @node, connecting from IPv4 @from, may not have an inbound
 * slot; NULL when it may. */
static const char *node_refusal(struct rd_control *ctl, const char *node, uint32_t from)
{
	struct rd_node_rec nr;
	struct in_addr a;
	char host[64];
	const char *p, *colon;

	if (!strcmp(node, ctl->cfg->node))
		return "that is our own name";
	if (ctl->reg.ops->get_node(&ctl->reg, node, &nr))
		return "no valid node record of that name in the registry";
	if (!ctl->cfg->tcp_check_peer_addr)
		return NULL;
	p = !strncmp(nr.endpoint, "tcp:", 4) ? nr.endpoint + 4 :
	    !strncmp(nr.endpoint, "verbs:", 6) ? nr.endpoint + 6 : NULL;
	colon = p ? strrchr(p, ':') : NULL;
	if (!colon || (size_t)(colon - p) >= sizeof(host))
		return "its node record has no address";
	memcpy(host, p, (size_t)(colon - p));
	host[colon - p] = 0;
	if (inet_pton(AF_INET, host, &a) != 1 || a.s_addr != from)
		return "not from the address of its node record "
		       "(transport.tcp.check_peer_address = false allows that)";
	return NULL;
}

void rd_peers_accept_step(struct rd_control *ctl, struct rd_acc *acc)
{
	char node[ROSHM_NAME_MAX];
	int ret = rd_tcp_accept_step(&acc->a, ctl->cfg->node, &ctl->secret, node);

	if (ret == 0)
		return;
	if (ret < 0) {
		RD_LOG(WARNING, "tcp: connection from %s refused: %s", acc->addr,
		       ret == -EACCES ? "peer failed the cluster-secret challenge" :
		       ret == -EPROTO ? "not a roshm peer" : strerror(-ret));
		acc_free(ctl, acc, true);
		return;
	}
	/* The secret says it is a roshm peer; the registry says which: only a
	 * node with a valid record gets an inbound slot, and (unless
	 * transport.tcp.check_peer_address = false, for multi-homed nodes)
	 * only from the address that record advertises. One slot per node
	 * (tcp.c replaces an older one). */
	const char *why = node_refusal(ctl, node, acc->from);

	if (why) {
		RD_LOG(WARNING, "tcp: connection from %s as node %s refused: %s", acc->addr, node, why);
		ctl->refused_peers++;
		acc_free(ctl, acc, true);
		return;
	}
	int fd = acc->a.fd;
	struct rd_cmd cmd = { .type = RD_CMD_INBOUND_ADD, .fd = fd, .node = node };

	acc_free(ctl, acc, false);
	ret = rd_control_cmd(ctl, &cmd);
	if (ret) {
		RD_LOG(WARNING, "tcp: inbound connection from node %s dropped: %s", node, strerror(-ret));
		close(fd);
		return;
	}
	RD_LOG(INFO, "tcp: node %s connected to us", node);
}

/*
 * The table is full: forget one tcp peer that nothing needs any more (no
 * region points at it, it is down and not being dialed, no open waits for
 * it), such as a node that left the cluster. The poller holds nothing of a
 * peer that is down (its connection left the poller's list when it went
 * down). Verbs peers stay (their QPs are the poller's). 1 if one went.
 */
static int peer_forget_one(struct rd_control *ctl)
{
	for (struct rd_peer **pp = &ctl->peers; *pp; pp = &(*pp)->next) {
		struct rd_peer *p = *pp;

		if (p->verbs || p->self || p->refs || p->ctl_up || p->dialing || p->dial ||
		    rd_control_peer_waited(ctl, p))
			continue;
		*pp = p->next;
		ctl->npeers--;
		RD_LOG(INFO, "node %s: forgotten (down, unused; the peer table was full)", p->node);
		rd_tcp_conn_free(&p->conn);
		free(p);
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
	p->verbs = is_verbs(endpoint);
	if (!p->verbs &&
	    rd_tcp_conn_alloc(&p->conn, ctl->cfg->tcp_max_msg, ctl->cfg->tcp_max_inflight, false)) {
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
	if (err) {
		if (err != p->last_err)
			RD_LOG(WARNING, "%s: connecting to node %s at %s: %s", p->verbs ? "verbs" : "tcp",
			       p->node, p->endpoint,
			       err == -EACCES ? "peer failed the cluster-secret challenge" : strerror(-err));
		p->last_err = err;
		retry_later(p, rd_mono_ns());
		if (p->verbs)
			rd_verbs_peer_release(ctl, p);
		else if (fd >= 0)
			close(fd);
		rd_control_peer_ready(ctl, p, err);
		return;
	}
	p->ctl_up = true;
	p->last_err = 0;
	p->backoff_ns = RETRY_MIN_NS;
	RD_LOG(INFO, "%s: connected to node %s at %s", p->verbs ? "verbs" : "tcp", p->node,
	       p->endpoint);
	rd_control_peer_ready(ctl, p, 0);
	/* Its regions that waited for it go on now, not at the next
	 * revalidation: their records say whether they are still the same. */
	for (struct rd_region *rg = ctl->regions; rg; rg = rg->next)
		if (rg->remote && rg->peer == p && rg->ctl_paused && !rg->ctl_dead)
			revalidate(ctl, rg, rd_mono_ns());
}

static void dial_free(struct rd_control *ctl, struct rd_peer *p)
{
	struct rd_dial *d = p->dial;

	if (!d)
		return;
	rd_control_epoll_del(ctl, d->d.fd);
	free(d);
	p->dial = NULL;
}

static void dial_want(struct rd_control *ctl, struct rd_dial *d)
{
	struct epoll_event ev = { .events = d->d.want_out ? EPOLLOUT : EPOLLIN, .data.ptr = d };

	epoll_ctl(ctl->epfd, EPOLL_CTL_MOD, d->d.fd, &ev);
}

/* The tcp dial's fd is ready: one more step of the handshake. */
void rd_peers_dial_step(struct rd_control *ctl, struct rd_dial *d)
{
	struct rd_peer *p = d->peer;
	char node[ROSHM_NAME_MAX] = "";
	int ret = rd_tcp_dial_step(&d->d, &ctl->secret, node);
	int fd = d->d.fd;

	if (ret == 0) {
		dial_want(ctl, d);
		return;
	}
	dial_free(ctl, p);
	if (ret < 0) {
		close(fd);
		rd_peers_dial_done(ctl, p, -1, ret, "");
		return;
	}
	rd_peers_dial_done(ctl, p, fd, 0, node);
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
	if (p->verbs) {
		p->dial_deadline_ns = rd_mono_ns() + (uint64_t)ctl->cfg->verbs_connect_timeout_ms * 1000000ull;
		ret = rd_verbs_dial(ctl, p);
		if (ret)
			rd_peers_dial_done(ctl, p, -1, ret, "");
		return ret;
	}
	struct rd_dial *d = calloc(1, sizeof(*d));

	if (!d) {
		rd_peers_dial_done(ctl, p, -1, -ENOMEM, "");
		return -ENOMEM;
	}
	d->tag.kind = RD_EP_TCP_DIAL;
	d->peer = p;
	ret = rd_tcp_dial_start(&d->d, p->endpoint, ctl->cfg->node);
	if (ret) {
		free(d);
		rd_peers_dial_done(ctl, p, -1, ret, "");
		return ret;
	}
	p->dial = d;
	p->dial_deadline_ns = rd_mono_ns() + (uint64_t)ctl->cfg->tcp_connect_timeout_ms * 1000000ull;
	struct epoll_event ev = { .events = EPOLLOUT, .data.ptr = d };

	epoll_ctl(ctl->epfd, EPOLL_CTL_ADD, d->d.fd, &ev);
	return 0;
}

/* Dials past their deadline fail. */
static void dials_timer(struct rd_control *ctl, uint64_t now)
{
	for (struct rd_peer *p = ctl->peers; p; p = p->next) {
		if (!p->dialing || now < p->dial_deadline_ns)
			continue;
		if (p->verbs) {
			rd_verbs_dial_abort(ctl, p);
		} else {
			int fd = p->dial ? p->dial->d.fd : -1;

			dial_free(ctl, p);
			if (fd >= 0)
				close(fd);
		}
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
	if (p->verbs != is_verbs(rec->endpoint))
		return -EHOSTUNREACH; /* the node switched transports: not supported live */
	for (rg = ctl->regions; rg; rg = rg->next)
		if (rg->remote && !rg->ctl_dead && rg->peer == p && rg->id == rec->region_id &&
		    rg->epoch == rec->epoch)
			break;
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
		rg->data_size = rec->data_size;
		rg->policy = rec->policy;
		rg->txn_slots = rec->txn_slots;
		rg->slot_size = rec->slot_size;
		rg->data_off = roshm_region_data_off(rec->txn_slots, rec->slot_size);
		memcpy(rg->tenant, rec->tenant, sizeof(rg->tenant));
		memcpy(rg->name, rec->name, sizeof(rg->name));
		memcpy(rg->node, rec->node, sizeof(rg->node));
		rg->xport = p->verbs ? &ctl->poller->verbs->base : &ctl->poller->tcp->base;
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
static void pause_peer_regions(struct rd_control *ctl, struct rd_peer *p)
{
	for (struct rd_region *rg = ctl->regions; rg; rg = rg->next) {
		if (!rg->remote || rg->peer != p || rg->ctl_dead || rg->ctl_paused)
			continue;
		struct rd_cmd cmd = { .type = RD_CMD_REGION_PAUSE, .region = rg, .fd = 1 };

		rd_control_cmd(ctl, &cmd);
		rg->ctl_paused = true;
		rg->paused_since = rd_mono_ns();
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

	if (!p || !reachable(ctl, rec->endpoint) || p->verbs != is_verbs(rec->endpoint))
		return; /* not reachable: try again at the next revalidation */
	if (!p->ctl_up) {
		/* connect meanwhile; the next revalidation retargets */
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
	t.peer = p;
	struct rd_cmd cmd = { .type = RD_CMD_REGION_RETARGET, .region = rg, .target = &t };
	struct rd_peer *old = rg->peer;

	rd_control_cmd(ctl, &cmd); /* the poller switches rg->peer too */
	if (old != p) {
		old->refs--;
		p->refs++;
	}
	memcpy(rg->node, rec->node, sizeof(rg->node));
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

	int ret = ctl->reg.ops->get_region(&ctl->reg, rg->tenant, rg->name, &rec);
	bool same = ret == 0 && rec.epoch == rg->epoch && rec.region_id == rg->id &&
		    !strcmp(rec.node, rg->node);

	if (rg->ctl_paused &&
	    now - rg->paused_since > (uint64_t)ctl->cfg->drain_timeout_ms * 1000000ull &&
	    !(ret == 0 && !same && !strcmp(rec.state, RD_STATE_ACTIVE))) {
		region_gone(ctl, rg, "did not come back in time");
	} else if (same && !strcmp(rec.state, RD_STATE_ACTIVE) && rg->ctl_paused &&
		   rg->peer->ctl_up) {
		/* its node is back, same instance: release the held work */
		struct rd_cmd cmd = { .type = RD_CMD_REGION_PAUSE, .region = rg, .fd = 0 };

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
	}
}

void rd_peers_timer(struct rd_control *ctl, bool registry_changed)
{
	uint64_t now = rd_mono_ns();
	struct rd_node_rec nrec;

	for (struct rd_acc *a = ctl->accepting, *next; a; a = next) {
		next = a->next;
		if (now >= a->a.deadline_ns) {
			RD_LOG(WARNING, "tcp: connection from %s: handshake timed out", a->addr);
			acc_free(ctl, a, true);
		}
	}
	dials_timer(ctl, now);
	if (!registry_changed && now < ctl->next_revalidate_ns)
		goto reconnect;
	ctl->next_revalidate_ns = now + (uint64_t)ctl->cfg->revalidate_ms * 1000000ull;
	/* Remote regions whose record went away or changed epoch are stale. */
	for (struct rd_region *rg = ctl->regions; rg; rg = rg->next)
		if (rg->remote && !rg->ctl_dead)
			revalidate(ctl, rg, now);
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
	for (struct rd_peer *p = ctl->peers; p; p = p->next)
		if (!p->ctl_up && p->refs && now >= p->retry_ns) {
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
		RD_LOG(INFO, "tcp: inbound connection from node %.63s closed: %.63s", ev->node, ev->why);
		return;
	}
	for (struct rd_peer *p = ctl->peers; p; p = p->next)
		if (p == ev->peer) {
			if (p->ctl_up)
				RD_LOG(WARNING, "%s: connection to node %s lost: %.63s; operations in "
				       "flight failed", p->verbs ? "verbs" : "tcp", p->node, ev->why);
			p->ctl_up = false;
			retry_later(p, rd_mono_ns());
			pause_peer_regions(ctl, p);
			if (p->verbs)
				rd_verbs_peer_release(ctl, p); /* the poller let go of its QPs */
		}
}

struct json_t *rd_peers_json(struct rd_control *ctl)
{
	json_t *a = json_array();

	for (struct rd_peer *p = ctl->peers; p; p = p->next) {
		json_t *o = json_object();

		json_object_set_new(o, "node", json_string(p->node));
		json_object_set_new(o, "endpoint", json_string(p->endpoint));
		json_object_set_new(o, "transport", json_string(p->self ? "verbs-loopback" :
								p->verbs ? "verbs" : "tcp"));
		json_object_set_new(o, "up", json_boolean(p->ctl_up));
		json_object_set_new(o, "regions", json_integer(p->refs));
		if (p->verbs) {
			uint64_t wrs = 0, posts = 0, cqes = 0, errs = 0;

			for (uint32_t i = 0; i < p->nvq; i++) {
				wrs += RD_STAT_GET(p->vq[i]->wrs);
				posts += RD_STAT_GET(p->vq[i]->posts);
				cqes += RD_STAT_GET(p->vq[i]->cqes);
				errs += RD_STAT_GET(p->vq[i]->errors);
			}
			json_object_set_new(o, "qps", json_integer(p->nvq));
			json_object_set_new(o, "wrs", json_integer((json_int_t)wrs));
			json_object_set_new(o, "doorbells", json_integer((json_int_t)posts));
			json_object_set_new(o, "cqes", json_integer((json_int_t)cqes));
			json_object_set_new(o, "wc_errors", json_integer((json_int_t)errs));
		} else {
			json_object_set_new(o, "frames_tx", json_integer((json_int_t)RD_STAT_GET(p->conn.frames_tx)));
			json_object_set_new(o, "frames_rx", json_integer((json_int_t)RD_STAT_GET(p->conn.frames_rx)));
		}
		json_array_append_new(a, o);
	}
	return a;
}
