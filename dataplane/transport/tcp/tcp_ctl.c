// SPDX-License-Identifier: MIT
/*
 * `tcp` transport, control side: the listening socket and the responder half
 * of the handshake, the requester's dial (both non-blocking, driven by the
 * control thread's epoll), per-peer buffers, and the peer's counters.
 * Everything provider-neutral about peers is in control/peers.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "control/control.h"
#include "transport/tcp/tcp.h"

#define RD_LOG_COMPONENT RD_LC_TCP

#define ACCEPT_TIMEOUT_NS (2000000000ull)

/* What a tcp fd in the control thread's epoll is (struct rd_acc, rd_dial:
 * their kind after the common tag). */
enum { TCP_TAG_LISTEN, TCP_TAG_ACCEPT, TCP_TAG_DIAL };

static struct {
	struct rd_ep_tag tag;
	int kind;
} listen_tag = { { RD_EP_PROVIDER }, TCP_TAG_LISTEN };

/* the control-side state (one control thread) */
#define TC ((struct rd_tcp_ctl *)rd_tcp_provider.ctl_priv)

static inline struct rd_tcp_peer *TP(const struct rd_peer *p)
{
	return p->priv;
}

static int tcp_cp_init(struct rd_control *ctl, struct rd_provider *pv, char *endpoint, size_t len)
{
	const struct rd_config *cfg = ctl->cfg;
	struct rd_addr la, adv;
	char err[300], ls[RD_ADDR_PORT_STRLEN], as[RD_ADDR_PORT_STRLEN];
	int fd, ret;

	pv->ctl_priv = calloc(1, sizeof(struct rd_tcp_ctl));
	if (!pv->ctl_priv)
		return -ENOMEM;
	TC->listen_fd = -1;
	ret = rd_tcp_secret_load(&TC->secret, cfg->tcp_secret_file, err, sizeof(err));
	if (ret) {
		RD_LOG(ERR, "%s", err);
		return ret;
	}
	/* names resolve here, once: what peers dial is always an address */
	ret = rd_addr_resolve(cfg->tcp_listen, (uint16_t)cfg->tcp_port, RD_ADDR_PASSIVE, &la, err,
			      sizeof(err));
	if (ret) {
		RD_LOG(ERR, "tcp transport: transport.tcp.listen: %s", err);
		return ret;
	}
	ret = rd_addr_resolve(cfg->tcp_advertise, (uint16_t)cfg->tcp_port, 0, &adv, err, sizeof(err));
	if (ret) {
		RD_LOG(ERR, "tcp transport: the address to advertise (transport.tcp.advertise or "
		       "ROSHM_ADVERTISE): %s", err);
		return ret;
	}
	rd_addr_str(&la, true, ls, sizeof(ls));
	rd_addr_str(&adv, true, as, sizeof(as));
	fd = rd_addr_listen(&la, 64);
	if (fd < 0) {
		RD_LOG(ERR, "tcp transport: listen on %s: %s", ls, strerror(-fd));
		return fd;
	}
	TC->listen_fd = fd;
	snprintf(endpoint, len, "tcp:%s", as);
	rd_control_epoll_add(ctl, fd, &listen_tag);
	RD_LOG(INFO, "tcp transport: listening on %s%s, peers reach us at %s", ls,
	       la.ss.ss_family == AF_INET6 && rd_addr_is_any(&la) ? " (IPv6 and IPv4)" : "", endpoint);
	return 0;
}

/* Free the handshakes evicted for newcomers: after the batch of events
 * that evicted them (tcp_timer runs after it), since another event of
 * that batch may still name one (its epoll tag: tcp_epoll_event then finds
 * it in no list and leaves it). */
static void acc_dead_free(void)
{
	while (TC->acc_dead) {
		struct rd_acc *a = TC->acc_dead;

		TC->acc_dead = a->next;
		free(a);
	}
}

/* The same for ended dials: the control loop reads an event's tag before
 * tcp_epoll_event looks it up, so a dial ended by an earlier event of the
 * batch (today only its own event or the timer ends one) must still be
 * memory then. */
static void dial_dead_free(void)
{
	while (TC->dial_dead) {
		struct rd_dial *d = TC->dial_dead;

		TC->dial_dead = d->next_dead;
		free(d);
	}
}

static void acc_unlink(struct rd_control *ctl, struct rd_acc *acc, bool close_fd);

/* Evict @acc: closed now, freed after this batch of events (acc_dead_free). */
static void acc_evict(struct rd_control *ctl, struct rd_acc *acc)
{
	acc_unlink(ctl, acc, true);
	acc->next = TC->acc_dead;
	TC->acc_dead = acc;
}

static void acc_free(struct rd_control *ctl, struct rd_acc *acc, bool close_fd)
{
	acc_unlink(ctl, acc, close_fd);
	free(acc);
}

static void acc_unlink(struct rd_control *ctl, struct rd_acc *acc, bool close_fd)
{
	rd_control_epoll_del(ctl, acc->a.fd);
	if (close_fd)
		close(acc->a.fd);
	if (acc->prev)
		acc->prev->next = acc->next;
	else
		TC->accepting = acc->next;
	if (acc->next)
		acc->next->prev = acc->prev;
	else
		TC->acc_oldest = acc->prev;
	TC->naccepting--;
	acc->src->n--;
}

static void tcp_cp_fini(struct rd_control *ctl, struct rd_provider *pv)
{
	if (!TC)
		return;
	while (TC->accepting)
		acc_free(ctl, TC->accepting, true);
	acc_dead_free();
	dial_dead_free();
	if (TC->listen_fd >= 0)
		close(TC->listen_fd);
	OPENSSL_cleanse(&TC->secret, sizeof(TC->secret));
	free(pv->ctl_priv);
	pv->ctl_priv = NULL;
}

/*
 * Handshakes in progress are bounded: RD_TCP_ACCEPT_MAX in all,
 * ACCEPT_PER_SRC from one source (an IPv4 address, or an IPv6 /64: one
 * host, or one network, may hold any number of addresses of its /64), each
 * ACCEPT_TIMEOUT_NS at most, and its peer's hello1 (sent at connect) due
 * within a quarter of transport.tcp.connect_timeout_ms (hello_wait_ns).
 * Unauthenticated peers cannot pile up state, nor hold every slot: when a
 * newcomer finds them taken, it closes (evicts) a handshake that has not
 * passed the cluster-secret challenge, the oldest of the source that holds
 * the most handshakes (of its own source when that is at its cap), so
 * that a flood of connects from a few sources makes room with its own
 * and an honest peer gets in. A handshake that passed the challenge (it
 * waits for its node record) is never evicted; when nothing else is left
 * to close, the newcomer is.
 */
#define ACCEPT_PER_SRC 8

/* The peer's hello1 (its first bytes, sent as soon as it is connected) is
 * due this long after the accept: a quarter of the time the dialing node
 * gives its whole dial (transport.tcp.connect_timeout_ms, 2 s by default:
 * 500 ms), and never more than the handshake's own deadline. */
static uint64_t hello_wait_ns(const struct rd_control *ctl)
{
	uint64_t ns = (uint64_t)ctl->cfg->tcp_connect_timeout_ms * 1000000ull / 4;

	/* 250 ms at least, whatever a small connect_timeout_ms says */
	if (ns < 250000000ull)
		ns = 250000000ull;
	return ns < ACCEPT_TIMEOUT_NS ? ns : ACCEPT_TIMEOUT_NS;
}

/* @a's source (struct rd_acc_src) as its key. */
static void src_key(const struct rd_addr *a, uint8_t key[16])
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	rd_addr_key(a, key);
	if (memcmp(key, v4mapped, sizeof(v4mapped)))
		memset(key + 8, 0, 8);  /* IPv6: its /64 */
}

/* The entry of the source with @key, or NULL when none is pending from it. */
static struct rd_acc_src *src_find(const uint8_t key[16])
{
	for (uint32_t i = 0; i < RD_TCP_ACCEPT_MAX; i++)
		if (TC->srcs[i].n && !memcmp(TC->srcs[i].key, key, 16))
			return &TC->srcs[i];
	return NULL;
}

/* An unused entry for @key (there is one while naccepting < the cap). */
static struct rd_acc_src *src_new(const uint8_t key[16])
{
	for (uint32_t i = 0; i < RD_TCP_ACCEPT_MAX; i++)
		if (!TC->srcs[i].n) {
			memcpy(TC->srcs[i].key, key, 16);
			return &TC->srcs[i];
		}
	return NULL;
}

/*
 * The handshake a newcomer from @src (NULL: none pending from there) closes
 * to make room, NULL when it needs none or none may go (then the newcomer
 * is refused). Only handshakes that have not passed the challenge
 * (!wait_record) may go: with @src at its cap, that source's oldest; with
 * every slot taken, the oldest of those whose source holds the most
 * handshakes. A walk of at most RD_TCP_ACCEPT_MAX entries, oldest first,
 * without system calls.
 */
static struct rd_acc *evictable(const struct rd_acc_src *src, bool *full)
{
	struct rd_acc *best = NULL;

	*full = true;
	if (src && src->n >= ACCEPT_PER_SRC) {
		for (struct rd_acc *a = TC->acc_oldest; a; a = a->prev)
			if (a->src == src && !a->wait_record)
				return a;
		return NULL;
	}
	if (TC->naccepting < RD_TCP_ACCEPT_MAX) {
		*full = false;
		return NULL;
	}
	for (struct rd_acc *a = TC->acc_oldest; a; a = a->prev)
		if (!a->wait_record && (!best || a->src->n > best->src->n))
			best = a;
	return best;
}

static void tcp_accept(struct rd_control *ctl)
{
	struct rd_addr sa;
	struct rd_acc *acc, *old;
	uint8_t key[16];
	uint64_t now;
	bool full;
	int fd;

	sa.len = sizeof(sa.ss);
	while ((fd = accept4(TC->listen_fd, (struct sockaddr *)&sa.ss, &sa.len,
			     SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0) {
		struct rd_acc_src *src;

		/* its source: a.b.c.d and ::ffff:a.b.c.d are one, IPv6 counts by /64 */
		src_key(&sa, key);
		src = src_find(key);
		old = evictable(src, &full);
		if (old) {
			RD_LOG(DEBUG, "tcp: connection from %s closed: handshake evicted for a newcomer "
			       "from %s (%u in progress from its source)", old->addr,
			       old->src == src ? "the same source" : "another source", old->src->n);
			TC->refused_peers++;
			acc_evict(ctl, old);
		} else if (full) {
			close(fd);
			TC->refused_peers++;
			sa.len = sizeof(sa.ss);
			continue;
		}
		src = src_find(key);  /* the eviction may have emptied it */
		if (!src)
			src = src_new(key);
		acc = src ? calloc(1, sizeof(*acc)) : NULL;
		if (!acc) {
			close(fd);
			sa.len = sizeof(sa.ss);
			continue;
		}
		acc->tag.kind = RD_EP_PROVIDER;
		acc->kind = TCP_TAG_ACCEPT;
		acc->a.fd = fd;
		now = rd_mono_ns();
		acc->a.deadline_ns = now + ACCEPT_TIMEOUT_NS;
		acc->hello_deadline_ns = now + hello_wait_ns(ctl);
		acc->from = sa;
		acc->src = src;
		src->n++;
		rd_addr_str(&sa, true, acc->addr, sizeof(acc->addr));
		acc->next = TC->accepting;
		if (acc->next)
			acc->next->prev = acc;
		else
			TC->acc_oldest = acc;
		TC->accepting = acc;
		TC->naccepting++;
		rd_control_epoll_add(ctl, fd, acc);
		RD_LOG(DEBUG, "tcp: connection from %s: handshake", acc->addr);
		sa.len = sizeof(sa.ss);
	}
}

/* node_refusal's answer for a node the registry has no record of (yet) */
static const char NO_RECORD[] = "no valid node record of that name in the registry";

/* Why node @node, connecting from @from, may not have an inbound slot;
 * NULL when it may. */
static const char *node_refusal(struct rd_control *ctl, const char *node, const struct rd_addr *from)
{
	struct rd_node_rec nr;
	struct rd_addr a;

	if (!strcmp(node, ctl->cfg->node))
		return "that is our own name";
	if (ctl->reg.ops->get_node(&ctl->reg, node, &nr))
		return NO_RECORD;
	if (!ctl->cfg->tcp_check_peer_addr)
		return NULL;
	if (rd_parse_endpoint(nr.endpoint, "tcp", &a) && rd_parse_endpoint(nr.endpoint, "verbs", &a))
		return "its node record has no address";
	/* a dual-stack listener sees an IPv4 peer as ::ffff:a.b.c.d */
	if (!rd_addr_same_host(&a, from))
		return "not from the address of its node record "
		       "(transport.tcp.check_peer_address = false allows that)";
	return NULL;
}

/* @acc passed the handshake as @node and the registry's checks: it becomes
 * an inbound connection of the poller. */
static void accept_finish(struct rd_control *ctl, struct rd_acc *acc, const char *node_in)
{
	char node[ROSHM_NAME_MAX];
	int fd = acc->a.fd, ret;

	snprintf(node, sizeof(node), "%s", node_in); /* @node_in may be in @acc */
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

static void accept_step(struct rd_control *ctl, struct rd_acc *acc)
{
	char node[ROSHM_NAME_MAX];
	int ret = rd_tcp_accept_step(&acc->a, ctl->cfg->node, &TC->secret, node);

	if (ret == 0)
		return;
	if (ret < 0) {
		RD_LOG(WARNING, "tcp: connection from %s refused: %s", acc->addr,
		       ret == -EACCES ? "peer failed the cluster-secret challenge" :
		       ret == -EPROTO ? "not a roshm peer" :
		       ret == -EPROTONOSUPPORT ? "a roshmd of another tcp protocol version (every "
						 "node of a cluster runs the same roshm version)" :
		       strerror(-ret));
		acc_free(ctl, acc, true);
		return;
	}
	/* The secret says it is a roshm peer; the registry says which: only a
	 * node with a valid record gets an inbound slot, and (unless
	 * transport.tcp.check_peer_address = false, for multi-homed nodes)
	 * only from the address that record advertises. One slot per node
	 * (tcp.c replaces an older one). */
	const char *why = node_refusal(ctl, node, &acc->from);

	if (why == NO_RECORD) {
		/* A node that has just started: its record may not have
		 * reached our registry yet (etcd's watch). Ask again on each
		 * timer tick until the handshake's deadline; nothing of it is
		 * read meanwhile. */
		rd_control_epoll_del(ctl, acc->a.fd);
		acc->wait_record = true;
		snprintf(acc->node, sizeof(acc->node), "%s", node);
		RD_LOG(INFO, "tcp: connection from %s as node %s: waiting for its node record",
		       acc->addr, node);
		return;
	}
	if (why) {
		RD_LOG(WARNING, "tcp: connection from %s as node %s refused: %s", acc->addr, node, why);
		TC->refused_peers++;
		acc_free(ctl, acc, true);
		return;
	}
	accept_finish(ctl, acc, node);
}

static void dial_free(struct rd_control *ctl, struct rd_peer *p)
{
	struct rd_dial *d = TP(p)->dial;

	if (!d)
		return;
	rd_control_epoll_del(ctl, d->d.fd);
	d->peer = NULL;
	d->next_dead = TC->dial_dead;
	TC->dial_dead = d;
	TP(p)->dial = NULL;
}

static void dial_want(struct rd_control *ctl, struct rd_dial *d)
{
	struct epoll_event ev = { .events = d->d.want_out ? EPOLLOUT : EPOLLIN, .data.ptr = d };

	epoll_ctl(ctl->epfd, EPOLL_CTL_MOD, d->d.fd, &ev);
}

/* The tcp dial's fd is ready: one more step of the handshake. */
static void dial_step(struct rd_control *ctl, struct rd_dial *d)
{
	struct rd_peer *p = d->peer;
	char node[ROSHM_NAME_MAX] = "";
	int ret = rd_tcp_dial_step(&d->d, &TC->secret, node);
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

static int tcp_peer_alloc(struct rd_control *ctl, struct rd_peer *p)
{
	struct rd_tcp_peer *tp = calloc(1, sizeof(*tp));

	if (!tp)
		return -ENOMEM;
	if (rd_tcp_conn_alloc(&tp->conn, ctl->cfg->tcp_max_msg, ctl->cfg->tcp_max_inflight, false)) {
		free(tp);
		return -ENOMEM;
	}
	p->priv = tp;
	return 0;
}

static void tcp_peer_free(struct rd_control *ctl, struct rd_peer *p)
{
	struct rd_tcp_peer *tp = p->priv;

	if (!tp)
		return;
	if (tp->dial) {
		int fd = tp->dial->d.fd;

		dial_free(ctl, p);
		close(fd);
	}
	rd_tcp_conn_free(&tp->conn);
	free(tp);
	p->priv = NULL;
}

/* Start the dial: rd_peers_dial_done() reports how it ended. 0 or -errno. */
static int tcp_connect(struct rd_control *ctl, struct rd_peer *p)
{
	struct rd_dial *d = calloc(1, sizeof(*d));
	int ret;

	if (!d)
		return -ENOMEM;
	d->tag.kind = RD_EP_PROVIDER;
	d->kind = TCP_TAG_DIAL;
	d->peer = p;
	ret = rd_tcp_dial_start(&d->d, p->endpoint, ctl->cfg->node);
	if (ret) {
		free(d);
		return ret;
	}
	TP(p)->dial = d;
	RD_LOG(DEBUG, "tcp: dialing node %s at %s", p->node, p->endpoint);
	p->dial_deadline_ns = rd_mono_ns() + (uint64_t)ctl->cfg->tcp_connect_timeout_ms * 1000000ull;
	struct epoll_event ev = { .events = EPOLLOUT, .data.ptr = d };

	epoll_ctl(ctl->epfd, EPOLL_CTL_ADD, d->d.fd, &ev);
	return 0;
}

static void tcp_dial_abort(struct rd_control *ctl, struct rd_peer *p)
{
	int fd = TP(p)->dial ? TP(p)->dial->d.fd : -1;

	dial_free(ctl, p);
	if (fd >= 0)
		close(fd);
}

static void tcp_epoll_event(struct rd_control *ctl, void *tag, uint32_t events)
{
	int kind = tag == &listen_tag ? TCP_TAG_LISTEN : -1;

	(void)events;
	if (kind < 0) {
		/* an accept or dial that an earlier event of this batch ended is
		 * on no list (its memory waits for the timer): look it up before
		 * acting on it */
		for (struct rd_acc *a = TC->accepting; a; a = a->next)
			if ((void *)a == tag)
				kind = TCP_TAG_ACCEPT;
		if (kind < 0)
			for (struct rd_peer *p = ctl->peers; p; p = p->next)
				if (p->prov == &rd_tcp_provider && p->priv && (void *)TP(p)->dial == tag)
					kind = TCP_TAG_DIAL;
	}
	switch (kind) {
	case TCP_TAG_LISTEN:
		tcp_accept(ctl);
		break;
	case TCP_TAG_ACCEPT:
		accept_step(ctl, tag);
		break;
	case TCP_TAG_DIAL:
		dial_step(ctl, tag);
		break;
	default:
		break;
	}
}

static void tcp_timer(struct rd_control *ctl, uint64_t now)
{
	acc_dead_free();   /* after the batch that evicted them */
	dial_dead_free();
	for (struct rd_acc *a = TC->accepting, *next; a; a = next) {
		next = a->next;
		if (a->wait_record) {
			const char *why = node_refusal(ctl, a->node, &a->from);

			if (!why) {
				accept_finish(ctl, a, a->node);
			} else if (why != NO_RECORD || now >= a->a.deadline_ns) {
				RD_LOG(WARNING, "tcp: connection from %s as node %s refused: %s", a->addr,
				       a->node, why);
				TC->refused_peers++;
				acc_free(ctl, a, true);
			}
			continue;
		}
		if (now >= a->a.deadline_ns) {
			RD_LOG(WARNING, "tcp: connection from %s: handshake timed out", a->addr);
			acc_free(ctl, a, true);
		} else if (a->a.state == 0 && now >= a->hello_deadline_ns) {
			RD_LOG(WARNING, "tcp: connection from %s: no hello within %llu ms of the "
			       "connect: closed", a->addr,
			       (unsigned long long)(hello_wait_ns(ctl) / 1000000ull));
			acc_free(ctl, a, true);
		}
	}
}

static void tcp_peer_json(struct rd_control *ctl, const struct rd_peer *p, json_t *o)
{
	const struct rd_tcp_conn *c = &TP(p)->conn;

	(void)ctl;
	json_object_set_new(o, "frames_tx", json_integer((json_int_t)RD_STAT_GET(c->frames_tx)));
	json_object_set_new(o, "frames_rx", json_integer((json_int_t)RD_STAT_GET(c->frames_rx)));
}

static void tcp_peer_stats(const struct rd_peer *p, struct rd_peer_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->ops = RD_STAT_GET(TP(p)->conn.frames_tx);
}

const struct rd_provider_cp_ops rd_tcp_cp_ops = {
	.init = tcp_cp_init,
	.fini = tcp_cp_fini,
	.peer_alloc = tcp_peer_alloc,
	.peer_free = tcp_peer_free,
	.connect = tcp_connect,
	.dial_abort = tcp_dial_abort,
	.epoll_event = tcp_epoll_event,
	.timer = tcp_timer,
	.peer_json = tcp_peer_json,
	.peer_stats = tcp_peer_stats,
};
