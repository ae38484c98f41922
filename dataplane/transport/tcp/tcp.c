// SPDX-License-Identifier: MIT
/*
 * `tcp` transport, poller side: software one-sided RDMA between roshmd
 * instances. Requests of every local client to one peer node share one
 * outbound connection; during a poll round each frame's header is built in
 * the connection's tx ring (private memory) and a WRITE's payload is queued
 * as a pointer to where it is (the client's arena, or a region of its own
 * with ROSHM_SQE_F_LBUF): the round's frames go out with one writev per
 * connection per round (the doorbell), the payloads copied once, by the
 * kernel, into the socket. What comes in (frames, answers, and the
 * responder side, which applies WRITE / READ / atomics to its own regions
 * after the checks a NIC makes: region id, epoch, key, bounds) is
 * tcp_rx.c and tcp_resp.c.
 *
 * Everything here is non-blocking; the only syscalls are epoll_wait(0),
 * read() on readable connections and writev() of pending tx.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/uio.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_log.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "guard.h"
#include "poller/txn.h"
#include "transport/tcp/tcp.h"

#define TX_IOV 1024                  /* iovecs per writev (IOV_MAX) */

static uint32_t pow2(uint32_t v)
{
	uint32_t p = 1;

	while (p < v)
		p <<= 1;
	return p;
}

int rd_tcp_conn_alloc(struct rd_tcp_conn *c, uint32_t max_msg, uint32_t max_inflight, bool inbound)
{
	memset(c, 0, sizeof(*c));
	c->fd = -1;
	c->inbound = inbound;
	/* Outbound: request headers only (a WRITE's payload is sent from
	 * where it is), one per operation in flight at most. Inbound: answers,
	 * a READ's bytes with them. */
	if (inbound) {
		c->tx_size = pow2(2 * (max_msg + (uint32_t)sizeof(struct roshm_tcp_resp)));
		c->seg_mask = 1; /* ring spans only: one segment */
	} else {
		c->tx_size = pow2(max_inflight * (uint32_t)sizeof(struct roshm_tcp_req));
		c->seg_mask = pow2(2 * max_inflight + 2) - 1; /* a header span and a payload each */
	}
	c->tx = malloc(c->tx_size);
	c->seg = malloc(sizeof(*c->seg) * (c->seg_mask + 1));
	c->rx_buf = malloc(RX_BUF);
	if (!inbound) {
		c->npend = max_inflight;
		c->pend = calloc(max_inflight, sizeof(*c->pend));
		c->free_ids = malloc(sizeof(uint32_t) * max_inflight);
	}
	if (!c->tx || !c->seg || !c->rx_buf || (!inbound && (!c->pend || !c->free_ids))) {
		rd_tcp_conn_free(c);
		return -ENOMEM;
	}
	if (!inbound)
		for (uint32_t i = 0; i < max_inflight; i++)
			c->free_ids[c->nfree++] = max_inflight - 1 - i;
	return 0;
}

void rd_tcp_conn_free(struct rd_tcp_conn *c)
{
	free(c->tx);
	free(c->seg);
	free(c->rx_buf);
	free(c->pend);
	free(c->free_ids);
	c->seg = NULL;
	c->tx = c->rx_buf = NULL;
	c->pend = NULL;
	c->free_ids = NULL;
}

static void tcp_fini(struct rd_provider *pv);

static int tcp_init(struct rd_provider *pv, struct rd_poller *p)
{
	struct rd_tcp *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	pv->priv = t;
	t->pv = pv;
	t->poller = p;
	t->epfd = -1;
	t->max_msg = p->cfg->tcp_max_msg;
	t->max_inflight = p->cfg->tcp_max_inflight;
	pv->max_msg = t->max_msg;
	t->nexported = p->cfg->max_regions + 1;
	t->exported = calloc(t->nexported, sizeof(*t->exported));
	t->scratch = malloc(RX_BUF);
	/* calloc'd: pages nobody writes, so reading them costs no memory */
	t->zeros = calloc(1, t->max_msg ? t->max_msg : 1);
	t->iov = malloc(sizeof(*t->iov) * TX_IOV);
	t->out = calloc(p->cfg->max_peers, sizeof(*t->out));
	t->max_in = 2 * p->cfg->max_peers;
	t->in = calloc(t->max_in, sizeof(*t->in));
	t->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (!t->exported || !t->scratch || !t->zeros || !t->iov || !t->out || !t->in || t->epfd < 0) {
		tcp_fini(pv);
		return -ENOMEM;
	}
	/* The poller sleeps on its own epfd with ours nested in it: traffic
	 * wakes it, and the round's epoll_wait(0) on ours takes the events. */
	pv->wake_fd = t->epfd;
	return 0;
}

static void reap_dead(struct rd_tcp *t)
{
	while (t->dead) {
		struct rd_tcp_conn *c = t->dead;

		t->dead = c->next_dead;
		rd_tcp_conn_free(c);
		free(c);
	}
}

static void tcp_fini(struct rd_provider *pv)
{
	struct rd_tcp *t = pv->priv;

	if (!t)
		return;
	reap_dead(t);
	free(t->exported);
	free(t->scratch);
	free((void *)t->zeros);
	free(t->iov);
	free(t->out);
	free(t->in);
	if (t->epfd >= 0)
		close(t->epfd);
	free(t);
	pv->priv = NULL;
	pv->wake_fd = -1;
}

/* An outbound operation is over: the host finishes it, its slot comes back. */
void rd_tcp_pend_done(struct rd_tcp *t, struct rd_tcp_conn *c, uint32_t id, int32_t status,
		      uint64_t result)
{
	struct rd_tcp_pend *pd = &c->pend[id];

	pd->used = false;
	c->free_ids[c->nfree++] = id;
	if (pd->fail) {
		status = pd->fail;
		result = 0;
	}
	t->pv->done(t->pv, &pd->h, status, result);
}

/* ---- connection lifecycle ---- */

/*
 * What a connection waits for: input unless it is blocked (its peer does
 * not read our answers: what it sends stays in the socket, and a readable
 * fd must not keep the poller awake), output while the socket is full.
 * Changed only on those transitions, never per frame.
 */
void rd_tcp_conn_events(struct rd_tcp *t, struct rd_tcp_conn *c)
{
	uint32_t want = (c->blocked ? 0 : EPOLLIN) | (c->tx_full ? EPOLLOUT : 0);

	if (c->up && want != c->ev_mask) {
		struct epoll_event ev = { .events = want, .data.ptr = c };

		epoll_ctl(t->epfd, EPOLL_CTL_MOD, c->fd, &ev);
		c->ev_mask = want;
	}
}

static void conn_install(struct rd_tcp *t, struct rd_tcp_conn *c, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };

	c->fd = fd;
	c->up = true;
	c->blocked = false;
	c->tx_full = false;
	c->ev_mask = EPOLLIN;
	c->rx_start = c->rx_end = 0;
	c->rx_state = 0;
	c->tx_head = c->tx_tail = 0;
	c->seg_head = c->seg_tail = c->seg_off = 0;
	c->last_rx = rte_get_timer_cycles();
	epoll_ctl(t->epfd, EPOLL_CTL_ADD, fd, &ev);
}

static void list_del(struct rd_tcp_conn **list, uint32_t *n, struct rd_tcp_conn *c)
{
	for (uint32_t i = 0; i < *n; i++)
		if (list[i] == c) {
			list[i] = list[--*n];
			return;
		}
}

void rd_tcp_conn_down(struct rd_tcp *t, struct rd_tcp_conn *c, int status, const char *why)
{
	struct rd_event ev = { 0 };

	if (!c->up)
		return;
	epoll_ctl(t->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	c->fd = -1;
	c->up = false;
	/* nothing queued is sent any more: no payload of a client that the
	 * failures below let go of is pointed at after this */
	c->tx_head = c->tx_tail;
	c->seg_head = c->seg_tail;
	c->seg_off = 0;
	snprintf(ev.node, sizeof(ev.node), "%s", c->node);
	snprintf(ev.why, sizeof(ev.why), "%s", why);
	if (c->inbound) {
		list_del(t->in, &t->nin, c);
		ev.type = RD_EV_INBOUND_DOWN;
		t->pv->event(t->pv, &ev);
		/* freed after this poll: an event of the same batch may name it */
		c->next_dead = t->dead;
		t->dead = c;
		return;
	}
	/* Every operation in flight on it fails to its client, exactly once. */
	for (uint32_t i = 0; i < c->npend; i++)
		if (c->pend[i].used)
			rd_tcp_pend_done(t, c, i, status, 0);
	list_del(t->out, &t->nout, c);
	ev.type = RD_EV_PEER_DOWN;
	ev.peer = c->peer;
	t->pv->event(t->pv, &ev);
}

static int tcp_peer_up(struct rd_provider *pv, struct rd_peer *peer, int fd)
{
	struct rd_tcp *t = pv->priv;
	struct rd_tcp_conn *c = rd_tcp_peer_conn(peer);

	if (t->nout >= t->poller->cfg->max_peers)
		return -ENOSPC; /* peers.c keeps to max_peers: this is a bug, not load */
	c->peer = peer;
	snprintf(c->node, sizeof(c->node), "%s", peer->node);
	conn_install(t, c, fd);
	t->out[t->nout++] = c;
	return 0;
}

static void tcp_peer_down(struct rd_provider *pv, struct rd_peer *peer, int status, const char *why)
{
	rd_tcp_conn_down(pv->priv, rd_tcp_peer_conn(peer), status, why);
}

static int tcp_inbound(struct rd_provider *pv, int fd, const char *node)
{
	struct rd_tcp *t = pv->priv;
	struct rd_tcp_conn *c;

	/* One inbound connection per node: a node that connects again (it
	 * restarted, or lost the old one without our noticing) replaces it,
	 * and nobody holds slots by connecting many times under one name. */
	for (uint32_t i = 0; i < t->nin; i++)
		if (!strcmp(t->in[i]->node, node)) {
			rd_tcp_conn_down(t, t->in[i], -ECONNRESET, "replaced by a new connection of the node");
			break;
		}
	if (t->nin >= t->max_in) {
		/* Full (of nodes with valid records, from their addresses): the
		 * one that has been quiet longest makes room; a node that needs
		 * it connects again. */
		struct rd_tcp_conn *q = NULL;

		for (uint32_t i = 0; i < t->nin; i++)
			if (!t->in[i]->rx_state && (!q || t->in[i]->last_rx < q->last_rx))
				q = t->in[i];
		if (q)
			rd_tcp_conn_down(t, q, -ECONNRESET, "evicted: inbound slots full, quiet longest");
	}
	if (t->nin >= t->max_in)
		return -EMFILE;
	c = malloc(sizeof(*c));
	if (!c || rd_tcp_conn_alloc(c, t->max_msg, 0, true)) {
		free(c);
		return -ENOMEM;
	}
	snprintf(c->node, sizeof(c->node), "%s", node);
	c->node_h = rd_node_hash(c->node);
	conn_install(t, c, fd);
	t->in[t->nin++] = c;
	return 0;
}

/*
 * Nothing more is read from the memory of outbound operation @pd's payload:
 * a WRITE whose request has not started to go out becomes a WRITE of no
 * bytes; one whose header is (partly) on the wire sends zeros for the rest
 * of its payload, as if its buffer had been cleared while it was sent.
 */
static void payload_let_go(struct rd_tcp *t, struct rd_tcp_conn *c, struct rd_tcp_pend *pd)
{
	struct rd_tcp_seg *sg = &c->seg[pd->seg & c->seg_mask];

	if (!pd->unsent)
		return;
	if (c->tx_head <= pd->hdr_pos) {
		uint32_t zero = 0;

		ring_write(c, pd->hdr_pos + offsetof(struct roshm_tcp_req, len), &zero, sizeof(zero));
		sg->len = 0;
	} else {
		sg->ext = t->zeros;
	}
}

/* A READ answer being received into [@lo, @hi) goes nowhere from here on. */
static void rx_let_go(struct rd_tcp_conn *c, const uint8_t *lo, const uint8_t *hi)
{
	if (c->rx_state == 1 && c->rx_dst >= lo && c->rx_dst < hi)
		c->rx_dst = NULL;
}

/* Outbound operation @pd lets go of its ROSHM_SQE_F_LBUF region now, not
 * at its answer (which a peer may never send). */
static void lbuf_let_go(struct rd_tcp *t, struct rd_tcp_conn *c, struct rd_tcp_pend *pd)
{
	struct rd_region *rg = pd->h.lbuf;

	payload_let_go(t, c, pd);
	rx_let_go(c, rg->data, rg->data + rg->data_size);
	pd->dst = NULL; /* its answer, still to come, is discarded */
	pd->h.lbuf = NULL;
	rd_region_unhold(t->poller, rg);
}

static void tcp_client_gone(struct rd_provider *pv, struct rd_client *cl)
{
	struct rd_tcp *t = pv->priv;

	/* Nothing more is written into its arena or read from it (nor from a
	 * region of its own it named, ROSHM_SQE_F_LBUF), and its operations
	 * waiting for an answer let go of it now (a peer that never answers,
	 * or never reads, must not keep a detached client's memory mapped);
	 * their answers are discarded. */
	for (uint32_t k = 0; k < t->nout; k++) {
		struct rd_tcp_conn *c = t->out[k];

		rx_let_go(c, cl->arena, cl->arena + cl->arena_size);
		for (uint32_t i = 0; i < c->npend; i++) {
			struct rd_tcp_pend *pd = &c->pend[i];

			if (!pd->used || pd->h.client != cl)
				continue;
			payload_let_go(t, c, pd);
			if (pd->h.lbuf)
				lbuf_let_go(t, c, pd);
			if (!pd->h.txn)
				pd->dst = NULL;
			rd_pend_forget_client(pv, &pd->h);
		}
	}
}

static void tcp_export(struct rd_provider *pv, struct rd_region *rg, bool on)
{
	struct rd_tcp *t = pv->priv;

	if (rg->id < t->nexported && (on || t->exported[rg->id] == rg))
		t->exported[rg->id] = on ? rg : NULL;
	if (on)
		return;
	/* Our clients' operations that send from it or receive into it as
	 * their own buffer (ROSHM_SQE_F_LBUF) let go of it now, and fail. */
	for (uint32_t k = 0; k < t->nout; k++) {
		struct rd_tcp_conn *c = t->out[k];

		for (uint32_t i = 0; i < c->npend; i++) {
			struct rd_tcp_pend *pd = &c->pend[i];

			if (pd->used && pd->h.lbuf == rg) {
				lbuf_let_go(t, c, pd);
				if (!pd->fail)
					pd->fail = -ESTALE;
			}
		}
	}
	/* A WRITE payload streaming into this region (data area or log) is
	 * discarded from here on, and answered ESTALE: the region's memory is
	 * freed once nothing of ours points into it. */
	for (uint32_t k = 0; k < t->nin; k++) {
		struct rd_tcp_conn *c = t->in[k];

		if (c->rx_rg == rg) {
			c->rx_dst = NULL;
			c->rx_rg = NULL;
			c->rx_status = -ESTALE;
		}
	}
}

static void tcp_close_all(struct rd_provider *pv)
{
	struct rd_tcp *t = pv->priv;

	if (!t)
		return;
	while (t->nin)
		rd_tcp_conn_down(t, t->in[0], -ECONNRESET, "roshmd stopping");
	while (t->nout)
		rd_tcp_conn_down(t, t->out[0], -ECONNRESET, "roshmd stopping");
	reap_dead(t);
}

/* ---- requester: submit ---- */

static int tcp_submit(struct rd_provider *pv, struct rd_op *op)
{
	struct rd_tcp *t = pv->priv;
	struct rd_region *rg = op->region;
	struct rd_tcp_conn *c = rd_tcp_peer_conn(rg->peer);
	const struct roshm_sqe *s = &op->sqe;
	uint32_t payload = s->opcode == ROSHM_OP_WRITE || s->opcode == ROSHM_OP_TXN_COMMIT ? s->len : 0;
	struct roshm_tcp_req req;
	struct rd_tcp_pend *pd;
	uint32_t id;

	if (!c->up) { /* the poller's view lags ours by nothing, but never queue on a dead one */
		op->status = -EHOSTUNREACH;
		return RD_OP_DONE;
	}
	if (!c->nfree || tx_space(c) < sizeof(req) || seg_room(c) < 2 ||
	    !rd_peer_inflight_ok(t->poller, rg->peer, op->client))
		return -EBUSY;
	id = c->free_ids[--c->nfree];
	pd = &c->pend[id];
	pd->used = true;
	pd->gen++;
	pd->fail = 0;
	rd_pend_start(&pd->h, op, rg->peer, rte_rdtsc());
	/* the arena offset (or the client's own region's, ROSHM_SQE_F_LBUF)
	 * was checked at validation; the holds keep it mapped */
	pd->dst = op->dst ? op->dst : op->client ? op->client->arena + s->arena_off : NULL;
	memset(&req, 0, sizeof(req));
	req.opcode = s->opcode;
	if (s->opcode == ROSHM_OP_TXN_COMMIT)
		req.flags = op->again ? ROSHM_TCP_F_AGAIN : 0;
	else if (op->raw && s->opcode == ROSHM_OP_WRITE)
		req.flags = ROSHM_TCP_F_RAW | ROSHM_TCP_F_SEQ; /* staging: operand1 is its seq */
	else
		req.flags = op->raw ? ROSHM_TCP_F_RAW : 0;
	req.len = s->len;
	req.region_id = rg->id;
	req.key = rg->key;
	req.epoch = rg->epoch;
	req.off = s->off;
	req.operand1 = s->operand1;
	req.operand2 = s->operand2;
	req.tag = (uint64_t)id | ((uint64_t)pd->gen << 32);
	pd->hdr_pos = c->tx_tail;
	tx_put(c, &req, sizeof(req));
	/* The payload goes out from where it is, held until it is in the
	 * socket: the client by the operation's hold (rd_pend_start), the
	 * engine's record until its operation completes. The client may
	 * change its bytes meanwhile: that is its data, never our framing. */
	pd->unsent = payload != 0;
	if (payload)
		pd->seg = tx_ext(c, op->src ? op->src : op->client->arena + s->arena_off, payload, id);
	RD_STAT_ADD(c->frames_tx, 1);
	return RD_OP_QUEUED;
}

/* ---- flush: one writev per connection per round ---- */

/* @w bytes went into the socket: consume them from the segments. */
static void tx_consumed(struct rd_tcp_conn *c, size_t w)
{
	while (tx_pending(c)) {
		struct rd_tcp_seg *sg = &c->seg[c->seg_head & c->seg_mask];
		uint32_t rem = sg->len - c->seg_off;

		if (w < rem) {
			c->seg_off += (uint32_t)w;
			if (!sg->ext)
				c->tx_head += w;
			return;
		}
		w -= rem;
		if (!sg->ext)
			c->tx_head += rem;
		else
			c->pend[sg->pend].unsent = false; /* its memory may go from here */
		c->seg_head++;
		c->seg_off = 0;
	}
}

/*
 * writev said EFAULT. Ring spans are private memory, arenas are sealed
 * against holes and the transaction engine's records are ours: only a WRITE
 * payload sent in place from a client's own region (ROSHM_SQE_F_LBUF) can
 * fault, where its owner punched a hole that the kernel, not our code,
 * touched (the hole guard sees only our own touches). Send the pieces one
 * by one from the head until one faults: that payload sends zeros for the
 * rest (what a hole reads as; the frame stays whole, the connection up),
 * its operation fails with -EFAULT, and its region is reported as the
 * guard reports a hole (its owner is disconnected). False: the fault is in
 * nothing of that kind, and the connection goes down.
 */
static bool payload_fault(struct rd_tcp *t, struct rd_tcp_conn *c)
{
	while (tx_pending(c)) {
		struct rd_tcp_seg *sg = &c->seg[c->seg_head & c->seg_mask];
		uint32_t l = sg->len - c->seg_off;
		const uint8_t *p;
		ssize_t w;

		if (!l) {
			tx_consumed(c, 0);
			continue;
		}
		if (sg->ext) {
			p = sg->ext + c->seg_off;
		} else {
			uint32_t pos = (uint32_t)c->tx_head & (c->tx_size - 1);

			p = c->tx + pos;
			if (l > c->tx_size - pos)
				l = c->tx_size - pos;
		}
		w = write(c->fd, p, l);
		if (w > 0) {
			tx_consumed(c, (size_t)w);
			RD_STAT_ADD(c->bytes_tx, (uint64_t)w);
			return true;
		}
		if (w < 0 && (errno == EAGAIN || errno == EINTR))
			return true; /* the caller's writev says so again */
		if (w < 0 && errno == EFAULT && sg->ext && c->pend[sg->pend].h.lbuf) {
			struct rd_tcp_pend *pd = &c->pend[sg->pend];
			struct rd_region *rg = pd->h.lbuf;

			sg->ext = t->zeros; /* + seg_off stays inside: len <= max_msg */
			pd->fail = -EFAULT;
			rd_guard_report(rg->guard, &rg->tampered); /* control logs it */
			return true;
		}
		return false;
	}
	return true;
}

static void conn_flush(struct rd_tcp *t, struct rd_tcp_conn *c)
{
	while (c->up && tx_pending(c)) {
		struct iovec *iov = t->iov;
		uint64_t r = c->tx_head;
		size_t len = 0;
		int n = 0;

		/* Every frame ready, up to TX_IOV pieces: ring spans (split
		 * where the ring wraps) and payloads in place. */
		for (uint32_t i = c->seg_head; i != c->seg_tail && n < TX_IOV - 1; i++) {
			const struct rd_tcp_seg *sg = &c->seg[i & c->seg_mask];
			uint32_t off = i == c->seg_head ? c->seg_off : 0, l = sg->len - off;

			if (!l)
				continue;
			if (sg->ext) {
				iov[n].iov_base = (void *)(uintptr_t)(sg->ext + off);
				iov[n++].iov_len = l;
			} else {
				uint32_t pos = (uint32_t)r & (c->tx_size - 1);
				uint32_t first = c->tx_size - pos < l ? c->tx_size - pos : l;

				iov[n].iov_base = c->tx + pos;
				iov[n++].iov_len = first;
				if (first < l) {
					iov[n].iov_base = c->tx;
					iov[n++].iov_len = l - first;
				}
				r += l;
			}
			len += l;
		}
		ssize_t w = n ? writev(c->fd, iov, n) : 0;

		if (w < 0) {
			if (errno == EINTR)
				return;
			if (errno == EAGAIN) {
				c->tx_full = true; /* EPOLLOUT says when to go on */
				rd_tcp_conn_events(t, c);
				return;
			}
			if (errno == EFAULT && payload_fault(t, c))
				continue;
			rd_tcp_conn_down(t, c, -ECONNRESET, "write failed");
			return;
		}
		tx_consumed(c, (size_t)w);
		RD_STAT_ADD(c->bytes_tx, (uint64_t)w);
		if ((size_t)w < len) {
			c->tx_full = true;
			rd_tcp_conn_events(t, c);
			return;
		}
	}
	if (c->tx_full) {
		c->tx_full = false;
		rd_tcp_conn_events(t, c);
	}
}

static void tcp_flush(struct rd_provider *pv)
{
	struct rd_tcp *t = pv->priv;

	for (uint32_t i = 0; i < t->nout; i++)
		conn_flush(t, t->out[i]);
	for (uint32_t i = 0; i < t->nin; i++)
		conn_flush(t, t->in[i]);
}

static unsigned tcp_poll(struct rd_provider *pv, unsigned budget)
{
	struct rd_tcp *t = pv->priv;
	struct epoll_event evs[64];
	int n;

	(void)budget;
	if (!t->nin && !t->nout)
		return 0;
	/* Inbound connections blocked on tx space resume once flush made room. */
	for (uint32_t i = 0; i < t->nin; i++)
		if (t->in[i]->blocked)
			rd_tcp_conn_rx(t, t->in[i]);
	n = epoll_wait(t->epfd, evs, 64, 0);
	for (int i = 0; i < n; i++) {
		struct rd_tcp_conn *c = evs[i].data.ptr;

		/* A connection that went down earlier in this batch is not up;
		 * inbound ones are freed only after the batch (reap_dead). */
		if (c->up && (evs[i].events & EPOLLOUT) && c->tx_full) {
			c->tx_full = false; /* flush (every round) tries again */
			rd_tcp_conn_events(t, c);
		}
		if (c->up && !c->blocked && (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
			rd_tcp_conn_rx(t, c);
	}
	reap_dead(t);
	return (unsigned)(n > 0 ? n : 0);
}

/* Work that can go on now: a socket that is full (its peer does not read)
 * wakes us through EPOLLOUT, not by our spinning on it. */
static bool tcp_busy(struct rd_provider *pv)
{
	struct rd_tcp *t = pv->priv;

	for (uint32_t i = 0; i < t->nout; i++) {
		const struct rd_tcp_conn *c = t->out[i];

		if (tx_pending(c) && !c->tx_full)
			return true;
	}
	for (uint32_t i = 0; i < t->nin; i++) {
		const struct rd_tcp_conn *c = t->in[i];

		if ((tx_pending(c) || c->blocked) && !c->tx_full)
			return true;
	}
	return false;
}

static const struct rd_provider_dp_ops tcp_dp_ops = {
	.init = tcp_init,
	.fini = tcp_fini,
	.submit = tcp_submit,
	.flush = tcp_flush,
	.poll = tcp_poll,
	.busy = tcp_busy,
	.peer_up = tcp_peer_up,
	.peer_down = tcp_peer_down,
	.inbound = tcp_inbound,
	.client_gone = tcp_client_gone,
	.export = tcp_export,
	.close_all = tcp_close_all,
};

extern const struct rd_provider_cp_ops rd_tcp_cp_ops;

struct rd_provider rd_tcp_provider = {
	.name = "tcp",
	.scheme = "tcp:",
	.dp = &tcp_dp_ops,
	.cp = &rd_tcp_cp_ops,
	.xp = RD_XP_TCP,
	.log_comp = RD_LC_TCP,
	.wake_fd = -1,
	.txn_one = true,
};
