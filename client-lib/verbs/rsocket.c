// SPDX-License-Identifier: MIT
/*
 * rsockets of libroshm-verbs' librdmacm.so.1: stream sockets over RC QPs on
 * roshm0, for rstream and for unmodified socket applications through
 * rdma-core's librspreload.so (LD_PRELOAD), which calls these r* entry
 * points.
 *
 * Built on the public calls only, as an application would be: an rsocket is
 * an rdma_cm_id (RDMA_PS_TCP) on an event channel of its own, whose fd is the
 * rsocket's descriptor, a PD, one CQ on a completion channel, an RC QP and
 * one registered buffer of send and receive slots. Both ends are this
 * library (rdma-core's own wire format is not spoken), so the protocol is
 * ours:
 *
 * - The connect's private data (REQ and REP) carries each side's data slot
 *   count and slot size ("RSR1", struct rs_hello).
 * - Every message is a SEND_WITH_IMM into one of the peer's posted RECVs.
 *   The immediate holds a type (DATA, CREDIT, FIN, IOMAP) and what its sender has
 *   posted again since it last said so: data credits (slots emptied by its
 *   application) and control credits (CREDIT / FIN messages it took in).
 * - Each side posts its data slots plus RS_CTRL more RECVs. DATA spends a
 *   data credit; CREDIT and FIN spend one of the RS_CTRL control credits,
 *   which come back with the peer's next message of any kind. So a side
 *   can always say what it owes, however full the peer's slots are with
 *   data it has not read (a half close with replies in both directions
 *   cannot deadlock). A receiver returns data credits with each message it
 *   sends, or in a CREDIT once it owes half its data slots.
 * - IOMAP (riomap, rsocket_iomap.c) and FIN leave the last control credit
 *   to CREDIT, which goes once 2 control credits are owed: two sides whose
 *   control messages cross can always give each other's back.
 * - FIN (shutdown(SHUT_WR), close) ends the byte stream (after it the peer
 *   may send only CREDIT): the peer reads 0
 *   once it has read all that came before. close waits (2 s at most) until
 *   every SEND of its own has completed, which on RC means it sits in a
 *   posted RECV of the peer, then disconnects.
 *
 * Everything the peer sends is checked before use: the type, the credits
 * (never beyond what this side can owe), the lengths (the verbs layer
 * bounds them by the slot), DATA beyond the data slots. A peer that breaks
 * the protocol gets the connection reset (EPROTO to our side), never memory
 * beyond a slot.
 *
 * Threads: each call holds its rsocket's mutex except while it sleeps.
 * A sleeper (rpoll, a blocking call) puts an eventfd of its own on the
 * rsocket's waiter list and sleeps on it beside the CQ's completion channel
 * and the CM channel; a call that takes in completions or changes the state
 * writes to every eventfd on the list. A descriptor is looked up with a
 * reference; rclose marks it closed (new calls get EBADF, rpoll POLLNVAL),
 * wakes the sleepers (their calls end with EBADF) and the last reference
 * takes it out of the table and frees it. A listener takes the CM's
 * connection requests in when polled, so POLLIN means one is there.
 *
 * A socket that is O_NONBLOCK connects synchronously all the same (connect
 * returns 0, which POSIX allows). raccept returns a connection once it has
 * answered the request; the peer's confirmation (RTU) comes later, and a
 * peer that never sends it sees its connection reset after the CM's
 * timeout. riomap / riowrite: rsocket_iomap.c. SOCK_DGRAM:
 * rsocket_dgram.c. The fork support is not provided (docs/verbs-compat.md).
 */
#define _GNU_SOURCE
#include "rsocket_int.h"

/* ------------------------------------------------------- descriptors */

#define RS_L1 1024
#define RS_L2 1024
static struct rs **rs_tab[RS_L1];
static pthread_mutex_t rs_tab_lock = PTHREAD_MUTEX_INITIALIZER;

static struct rs **rs_slot(int fd, bool make)
{
	struct rs **t;

	if (fd < 0 || fd >= RS_L1 * RS_L2)
		return NULL;
	t = rs_tab[fd / RS_L2];
	if (!t && make) {
		t = calloc(RS_L2, sizeof(*t));
		rs_tab[fd / RS_L2] = t;
	}
	return t ? &t[fd % RS_L2] : NULL;
}

bool rs_is(int fd)
{
	struct rs **p;
	bool yes;

	pthread_mutex_lock(&rs_tab_lock);
	p = rs_slot(fd, false);
	yes = p && *p;
	pthread_mutex_unlock(&rs_tab_lock);
	return yes;
}

/* The rsocket of fd with a reference, or NULL (errno EBADF); a closed one
 * too only when closed_too (rpoll reports it POLLNVAL). */
struct rs *rs_ref(int fd, bool closed_too)
{
	struct rs **p, *rs = NULL;

	pthread_mutex_lock(&rs_tab_lock);
	p = rs_slot(fd, false);
	if (p && *p && (closed_too || !__atomic_load_n(&(*p)->closed, __ATOMIC_ACQUIRE))) {
		rs = *p;
		__atomic_add_fetch(&rs->ref, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&rs_tab_lock);
	if (!rs)
		errno = EBADF;
	return rs;
}

struct rs *rs_get(int fd)
{
	return rs_ref(fd, false);
}

static void rs_free(struct rs *rs);

void rs_put(struct rs *rs)
{
	if (__atomic_sub_fetch(&rs->ref, 1, __ATOMIC_ACQ_REL) == 0)
		rs_free(rs);
}

int rs_publish(struct rs *rs)
{
	struct rs **p;

	pthread_mutex_lock(&rs_tab_lock);
	p = rs_slot(rs->fd, true);
	if (p)
		*p = rs;
	pthread_mutex_unlock(&rs_tab_lock);
	return p ? 0 : rs->fd < 0 || rs->fd >= RS_L1 * RS_L2 ? EMFILE : ENOMEM;
}

int rs_fail(int e)
{
	errno = e;
	return -1;
}

/* errno e for the call, its reference dropped */
int rs_put_fail(struct rs *rs, int e)
{
	rs_put(rs);
	return rs_fail(e);
}

uint64_t rs_now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void rs_nonblock_fd(int fd)
{
	int f = fcntl(fd, F_GETFL);

	if (f >= 0)
		fcntl(fd, F_SETFL, f | O_NONBLOCK);
}

/* Wake the sleepers of rs (its lock held): something changed. */
void rs_kick(struct rs *rs)
{
	uint64_t one = 1;

	for (struct rs_waiter *w = rs->wl; w; w = w->next)
		if (write(w->fd, &one, sizeof(one)) < 0) {
			/* the counter is full: readable all the same */
		}
}

/* ------------------------------------------------------- life cycle */

/* An rsocket with nothing yet (a datagram one's start) */
struct rs *rs_new(void)
{
	struct rs *rs = calloc(1, sizeof(*rs));

	if (!rs)
		return NULL;
	pthread_mutex_init(&rs->lock, NULL);
	rs->ref = 1;
	rs->fd = -1;
	rs->sndbuf = rs->rcvbuf = RS_BUF_DEFAULT;
	rs->nodelay = 1;
	rs->v6only = -1;
	return rs;
}

static struct rs *rs_alloc(void)
{
	struct rs *rs = rs_new();

	if (!rs)
		return NULL;
	rs->cmch = rdma_create_event_channel();
	if (!rs->cmch) {
		free(rs);
		return NULL;
	}
	/* the CM channel is only ever read when poll says so, or in a loop of
	 * our own that polls */
	rs_nonblock_fd(rs->cmch->fd);
	rs->fd = rs->cmch->fd;
	return rs;
}

static void rs_free_qp(struct rs *rs)
{
	if (rs->id && rs->id->qp)
		rdma_destroy_qp(rs->id);
	if (rs->cq)
		ibv_destroy_cq(rs->cq);
	if (rs->cch)
		ibv_destroy_comp_channel(rs->cch);
	if (rs->mr)
		ibv_dereg_mr(rs->mr);
	for (; rs->nlmap; rs->nlmap--)
		ibv_dereg_mr(rs->lmap[rs->nlmap - 1].mr);
	rs->nrmap = 0;
	if (rs->pd)
		ibv_dealloc_pd(rs->pd);
	free(rs->buf);
	free(rs->rx);
	rs->cq = NULL;
	rs->cch = NULL;
	rs->mr = NULL;
	rs->pd = NULL;
	rs->buf = NULL;
	rs->rx = NULL;
}


/* The last reference: out of the table (if it is there), then gone. */
static void rs_free(struct rs *rs)
{
	struct rs **p;

	pthread_mutex_lock(&rs_tab_lock);
	p = rs_slot(rs->fd, false);
	if (p && *p == rs)
		*p = NULL;
	pthread_mutex_unlock(&rs_tab_lock);
	rs_drain_events(rs);
	rs_dg_free(rs);
	rs_free_qp(rs);
	for (; rs->reqs && rs->req_head != rs->req_tail; rs->req_head++) {
		struct rdma_cm_id *id = rs->reqs[rs->req_head % RS_REQS].id;

		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
	}
	free(rs->reqs);
	if (rs->id)
		rdma_destroy_id(rs->id);
	if (rs->cmch)
		rdma_destroy_event_channel(rs->cmch);
	pthread_mutex_destroy(&rs->lock);
	free(rs);
}

static uint32_t rs_clamp(uint64_t v, uint32_t lo, uint32_t hi)
{
	return v < lo ? lo : v > hi ? hi : (uint32_t)v;
}

int rs_post_recv(struct rs *rs, uint32_t slot)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(rs->buf + (size_t)(rs->ntx + slot) * rs->seg),
		.length = rs->seg,
		.lkey = rs->mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(rs->id->qp, &wr, &bad);
}

/* The PD, rs->buf (@size bytes) registered, a completion channel (not
 * blocking) and a CQ of @cqe entries on it: 0 or an errno. */
int rs_verbs_bufs(struct rs *rs, struct ibv_context *v, size_t size, int cqe)
{
	rs->pd = ibv_alloc_pd(v);
	if (!rs->pd)
		return errno ? errno : ENOMEM;
	rs->mr = ibv_reg_mr(rs->pd, rs->buf, size, IBV_ACCESS_LOCAL_WRITE);
	if (!rs->mr)
		return errno ? errno : ENOMEM;
	rs->cch = ibv_create_comp_channel(v);
	if (!rs->cch)
		return errno ? errno : ENOMEM;
	rs_nonblock_fd(rs->cch->fd);
	rs->cq = ibv_create_cq(v, cqe, rs, rs->cch, 0);
	if (!rs->cq)
		return errno ? errno : ENOMEM;
	return 0;
}

/* The PD, CQ, QP and slots of a connection, its RECVs posted. */
static int rs_setup(struct rs *rs)
{
	struct ibv_context *v = rs->id->verbs;
	struct ibv_qp_init_attr qa;
	size_t size;
	int ret;

	if (!v)
		return ENODEV;
	rs->seg = RS_SEG_DEFAULT;
	rs->ntx = rs->sqsize ? rs_clamp((uint64_t)rs->sqsize, RS_SLOTS_MIN, RS_SLOTS_MAX)
			     : rs_clamp((uint64_t)rs->sndbuf / rs->seg, RS_SLOTS_MIN, RS_SLOTS_MAX);
	rs->nrx = rs->rqsize ? rs_clamp((uint64_t)rs->rqsize, RS_SLOTS_MIN, RS_SLOTS_MAX)
			     : rs_clamp((uint64_t)rs->rcvbuf / rs->seg, RS_SLOTS_MIN, RS_SLOTS_MAX);
	rs->nrq = rs->nrx + RS_CTRL;
	size = (size_t)(rs->ntx + rs->nrq) * rs->seg;
	rs->buf = aligned_alloc(4096, size);
	rs->rx = calloc(rs->nrq, sizeof(*rs->rx));
	if (!rs->buf || !rs->rx)
		return ENOMEM;
	rs->sq_max = rs->ntx + RS_CTRL;
	ret = rs_verbs_bufs(rs, v, size, (int)(rs->sq_max + rs->nrq));
	if (ret)
		return ret;
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = rs->cq;
	qa.recv_cq = rs->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.sq_sig_all = 1;
	qa.cap.max_send_wr = rs->sq_max;
	qa.cap.max_recv_wr = rs->nrq;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	qa.cap.max_inline_data = sizeof(struct rs_iomap);   /* IOMAP goes inline */
	if (rdma_create_qp(rs->id, rs->pd, &qa))
		return errno ? errno : EIO;
	for (uint32_t i = 0; i < rs->nrq; i++) {
		ret = rs_post_recv(rs, i);
		if (ret)
			return ret;
	}
	rs->ctrl_credits = RS_CTRL;
	return 0;
}

static void rs_hello(const struct rs *rs, struct rs_hello *h)
{
	rs_hello_make(rs->nrx, rs->seg, h);
}

/* The peer's hello, from private data the CM padded: checked, then kept. */
static int rs_peer_hello(struct rs *rs, const void *pd, uint8_t len)
{
	uint32_t slots, seg;

	if (rs_hello_parse(pd, len, &slots, &seg))
		return EPROTO;
	rs->peer_nrx = slots;
	rs->peer_seg = seg;
	rs->credits = slots;
	return 0;
}

/* Wait for the next CM event on rs's channel (up to ms), acked after copying
 * what the caller needs; an rsocket closed meanwhile ends it (EBADF). */
static int rs_cm_wait(struct rs *rs, enum rdma_cm_event_type *type, int *status,
		      void *pd, uint8_t *pd_len, struct rdma_cm_id **nid, int ms)
{
	uint64_t end = rs_now_ns() + (uint64_t)ms * 1000000ull;
	struct rdma_cm_event *ev;

	for (;;) {
		if (__atomic_load_n(&rs->closed, __ATOMIC_ACQUIRE))
			return EBADF;
		if (!rdma_get_cm_event(rs->cmch, &ev))
			break;
		if (errno != EAGAIN && errno != EINTR)
			return errno;
		uint64_t now = rs_now_ns();
		if (now >= end)
			return ETIMEDOUT;
		/* rclose is seen within 100 ms */
		struct pollfd p = { .fd = rs->cmch->fd, .events = POLLIN };
		int left = (int)((end - now) / 1000000ull) + 1;

		if (poll(&p, 1, left > 100 ? 100 : left) < 0 && errno != EINTR)
			return errno;
	}
	*type = ev->event;
	if (status)
		*status = ev->status;
	if (pd && pd_len) {
		uint8_t n = ev->param.conn.private_data_len;

		*pd_len = n;
		if (n && ev->param.conn.private_data)
			memcpy(pd, ev->param.conn.private_data, n);
	}
	if (nid)
		*nid = ev->id;
	rdma_ack_cm_event(ev);
	return 0;
}

/* ------------------------------------------------------- sockets */

RS_EXPORT int rsocket(int domain, int type, int protocol)
{
	struct rs *rs;
	int ret;

	if (domain != AF_INET && domain != AF_INET6)
		return rs_fail(EAFNOSUPPORT);
	if ((type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) == SOCK_DGRAM &&
	    (!protocol || protocol == IPPROTO_UDP)) {
		const char *e = getenv("ROSHM_RSOCKET_DGRAM");

		/* "0": none, so librspreload leaves UDP to the kernel */
		if (e && !strcmp(e, "0"))
			return rs_fail(EPROTONOSUPPORT);
		return rs_dg_socket(domain, type);   /* rsocket_dgram.c */
	}
	if ((type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) != SOCK_STREAM ||
	    (protocol && protocol != IPPROTO_TCP))
		return rs_fail(EPROTONOSUPPORT);
	rs = rs_alloc();
	if (!rs)
		return rs_fail(errno ? errno : ENOMEM);
	if (rdma_create_id(rs->cmch, &rs->id, rs, RDMA_PS_TCP)) {
		ret = errno;
		rs_free(rs);
		return rs_fail(ret);
	}
	if (type & SOCK_NONBLOCK)
		rs->fl |= O_NONBLOCK;
	ret = rs_publish(rs);
	if (ret) {
		rs_free(rs);
		return rs_fail(ret);
	}
	return rs->fd;
}

RS_EXPORT int rbind(int s, const struct sockaddr *a, socklen_t l)
{
	struct rs *rs = rs_get(s);
	int ret;

	if (!rs)
		return -1;
	if (rs->dg) {
		ret = rs_dg_bind(rs, a, l);
		return ret ? rs_put_fail(rs, ret) : (rs_put(rs), 0);
	}
	if (!a || (a->sa_family == AF_INET && l < sizeof(struct sockaddr_in)) ||
	    (a->sa_family == AF_INET6 && l < sizeof(struct sockaddr_in6)) || rs->state != RS_NEW)
		return rs_put_fail(rs, EINVAL);
	if (rs->v6only >= 0)
		rdma_set_option(rs->id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &rs->v6only,
				sizeof(rs->v6only));
	ret = rdma_bind_addr(rs->id, (struct sockaddr *)a);
	if (ret)
		return rs_put_fail(rs, errno);
	rs_put(rs);
	return 0;
}

RS_EXPORT int rlisten(int s, int backlog)
{
	struct rs *rs = rs_get(s);

	if (!rs)
		return -1;
	if (rs->dg)
		return rs_put_fail(rs, EOPNOTSUPP);   /* as UDP's listen */
	if (rs->state == RS_NEW) {
		if (rdma_listen(rs->id, backlog > 0 ? backlog : 1))
			return rs_put_fail(rs, errno);
		rs->state = RS_LISTEN;
	} else if (rs->state != RS_LISTEN) {
		return rs_put_fail(rs, EINVAL);
	}
	rs_put(rs);
	return 0;
}

/* The active side: resolve, set up, connect, wait for the answer. */
RS_EXPORT int rconnect(int s, const struct sockaddr *a, socklen_t l)
{
	struct rs *rs = rs_get(s);
	struct rdma_conn_param cp;
	enum rdma_cm_event_type t;
	struct rs_hello h;
	uint8_t pd[256], pd_len = 0;
	int ret, st;

	if (!rs)
		return -1;
	if (rs->dg) {
		pthread_mutex_lock(&rs->lock);
		ret = rs_dg_connect(rs, a, l);
		pthread_mutex_unlock(&rs->lock);
		return ret ? rs_put_fail(rs, ret) : (rs_put(rs), 0);
	}
	if (!a || (a->sa_family != AF_INET && a->sa_family != AF_INET6) ||
	    (a->sa_family == AF_INET && l < sizeof(struct sockaddr_in)) ||
	    (a->sa_family == AF_INET6 && l < sizeof(struct sockaddr_in6)))
		return rs_put_fail(rs, a ? EAFNOSUPPORT : EINVAL);
	pthread_mutex_lock(&rs->lock);
	if (rs->state != RS_NEW) {
		ret = rs->state == RS_CONN ? EISCONN : rs->state == RS_CONNECTING ? EALREADY : EINVAL;
		pthread_mutex_unlock(&rs->lock);
		return rs_put_fail(rs, ret);
	}
	/* the CM's exchange without the lock: the other calls see
	 * RS_CONNECTING (nothing to poll, ENOTCONN), rclose is seen within
	 * 100 ms (rs_cm_wait) */
	rs->state = RS_CONNECTING;
	pthread_mutex_unlock(&rs->lock);
	if (rdma_resolve_addr(rs->id, NULL, (struct sockaddr *)a, 2000)) {
		ret = errno;
		goto fail;
	}
	ret = rs_cm_wait(rs, &t, &st, NULL, NULL, NULL, RS_CM_MS);
	if (!ret && t != RDMA_CM_EVENT_ADDR_RESOLVED)
		ret = EHOSTUNREACH;
	if (ret)
		goto fail;
	if (rdma_resolve_route(rs->id, 2000)) {
		ret = errno;
		goto fail;
	}
	ret = rs_cm_wait(rs, &t, &st, NULL, NULL, NULL, RS_CM_MS);
	if (!ret && t != RDMA_CM_EVENT_ROUTE_RESOLVED)
		ret = EHOSTUNREACH;
	if (ret)
		goto fail;
	ret = rs_setup(rs);
	if (ret)
		goto fail;
	rs_hello(rs, &h);
	memset(&cp, 0, sizeof(cp));
	cp.private_data = &h;
	cp.private_data_len = sizeof(h);
	cp.retry_count = 7;
	cp.rnr_retry_count = 7;
	if (rdma_connect(rs->id, &cp)) {
		ret = errno;
		goto fail;
	}
	ret = rs_cm_wait(rs, &t, &st, pd, &pd_len, NULL, RS_CM_MS);
	if (!ret && t != RDMA_CM_EVENT_ESTABLISHED)
		ret = t == RDMA_CM_EVENT_REJECTED || t == RDMA_CM_EVENT_UNREACHABLE ? ECONNREFUSED
										  : ETIMEDOUT;
	if (!ret) {
		ret = rs_peer_hello(rs, pd, pd_len);
		if (ret) {
			rdma_disconnect(rs->id);
			ret = ECONNREFUSED;   /* not an rsocket of ours there */
		}
	}
	if (ret)
		goto fail;
	pthread_mutex_lock(&rs->lock);
	if (rs->closed) {
		pthread_mutex_unlock(&rs->lock);
		ret = EBADF;
		goto fail;
	}
	rs->state = RS_CONN;
	rs_kick(rs);
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return 0;
fail:
	/* the socket cannot be used again, as after a failed TCP connect */
	pthread_mutex_lock(&rs->lock);
	rs_free_qp(rs);
	rs->state = RS_DEAD;
	rs->err = ret;
	rs_kick(rs);
	pthread_mutex_unlock(&rs->lock);
	return rs_put_fail(rs, ret);
}

/* The next connection request on ls answered: a new rsocket in RS_CONN (its
 * RTU still to come), NULL and *err when none could be. */
static struct rs *rs_take_request(struct rs *ls, int *err)
{
	struct rdma_conn_param cp;
	struct rdma_cm_id *nid;
	struct rs_hello h;
	uint8_t pd[64], pd_len;
	struct rs *rs;
	int ret;

	for (;;) {
		/* a request the listener has taken in, else wait for one */
		pthread_mutex_lock(&ls->lock);
		rs_listen_pull(ls);
		if (ls->req_head == ls->req_tail) {
			bool nb = ls->fl & O_NONBLOCK;
			struct pollfd p = { .fd = ls->cmch->fd, .events = POLLIN };

			pthread_mutex_unlock(&ls->lock);
			if (nb) {
				*err = EAGAIN;
				return NULL;
			}
			if (__atomic_load_n(&ls->closed, __ATOMIC_ACQUIRE)) {
				*err = EBADF;
				return NULL;
			}
			if (poll(&p, 1, 100) < 0 && errno != EINTR) {   /* rclose seen within 100 ms */
				*err = errno;
				return NULL;
			}
			continue;
		}
		{
			struct rs_req *q = &ls->reqs[ls->req_head++ % RS_REQS];

			nid = q->id;
			pd_len = q->pd_len;
			memcpy(pd, q->pd, pd_len);
		}
		pthread_mutex_unlock(&ls->lock);
		rs = rs_alloc();
		if (!rs) {
			rdma_reject(nid, NULL, 0);
			rdma_destroy_id(nid);
			*err = ENOMEM;
			return NULL;
		}
		rs->id = nid;
		nid->context = rs;
		rs->sndbuf = ls->sndbuf;
		rs->rcvbuf = ls->rcvbuf;
		rs->sqsize = ls->sqsize;
		rs->rqsize = ls->rqsize;
		rs->inl = ls->inl;
		rs->nodelay = ls->nodelay;
		ret = rs_peer_hello(rs, pd, pd_len);
		if (!ret && rdma_migrate_id(nid, rs->cmch))
			ret = errno ? errno : EIO;
		if (!ret)
			ret = rs_setup(rs);
		if (ret) {
			rdma_reject(nid, NULL, 0);
			rs_free(rs);
			continue;   /* that peer is not one we can serve; the next */
		}
		rs_hello(rs, &h);
		memset(&cp, 0, sizeof(cp));
		cp.private_data = &h;
		cp.private_data_len = sizeof(h);
		cp.retry_count = 7;
		cp.rnr_retry_count = 7;
		if (rdma_accept(nid, &cp)) {
			rs_free(rs);
			continue;
		}
		/* the QP is ready to send and receive; ESTABLISHED (or the
		 * CM's CONNECT_ERROR for a peer that never confirms) comes on
		 * the new channel, taken in by rs_progress */
		rs->state = RS_CONN;
		return rs;
	}
}

RS_EXPORT int raccept(int s, struct sockaddr *a, socklen_t *l)
{
	struct rs *ls = rs_get(s), *rs;
	int ret = 0;

	if (!ls)
		return -1;
	if (ls->dg)
		return rs_put_fail(ls, EOPNOTSUPP);
	if (ls->state != RS_LISTEN)
		return rs_put_fail(ls, EINVAL);
	rs = rs_take_request(ls, &ret);
	rs_put(ls);
	if (!rs)
		return rs_fail(ret);
	ret = rs_publish(rs);
	if (ret) {
		rdma_disconnect(rs->id);
		rs_free(rs);
		return rs_fail(ret);
	}
	if (a && l) {
		struct sockaddr *pa = rdma_get_peer_addr(rs->id);
		socklen_t n = pa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
						      : sizeof(struct sockaddr_in);

		memcpy(a, pa, *l < n ? *l : n);
		*l = n;
	}
	return rs->fd;
}

RS_EXPORT int rshutdown(int s, int how)
{
	struct rs *rs = rs_get(s);

	if (!rs)
		return -1;
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
		return rs_put_fail(rs, EINVAL);
	if (rs->dg) {
		int e = rs_dg_shutdown(rs, how);

		return e ? rs_put_fail(rs, e) : (rs_put(rs), 0);
	}
	pthread_mutex_lock(&rs->lock);
	if (rs->state != RS_CONN) {
		pthread_mutex_unlock(&rs->lock);
		return rs_put_fail(rs, ENOTCONN);
	}
	if (how != SHUT_WR)
		rs->rd_shut = true;
	if (how != SHUT_RD) {
		rs->tx_shut = true;
		rs_progress(rs, false);   /* FIN now if a credit is there, else later */
	}
	rs_kick(rs);   /* a reader gets its 0, a writer its EPIPE */
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return 0;
}

RS_EXPORT int rclose(int s)
{
	struct rs **p, *rs;

	/* marked closed: no new call takes it (EBADF, rpoll POLLNVAL), the
	 * calls inside end; the number stays in the table, and its
	 * descriptor open, until the last reference frees it */
	pthread_mutex_lock(&rs_tab_lock);
	p = rs_slot(s, false);
	rs = p ? *p : NULL;
	if (rs && __atomic_exchange_n(&rs->closed, true, __ATOMIC_ACQ_REL))
		rs = NULL;   /* closed already */
	if (rs)
		__atomic_add_fetch(&rs->ref, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&rs_tab_lock);
	if (!rs)
		return rs_fail(EBADF);
	pthread_mutex_lock(&rs->lock);
	rs_kick(rs);
	if (rs->dg) {
		rs_dg_close(rs);
	} else if (rs->state == RS_CONN) {
		uint64_t end = rs_now_ns() + RS_CLOSE_MS * 1000000ull;

		/* FIN after all we sent, and every SEND complete (in the
		 * peer's RECVs) before the QP goes */
		rs->tx_shut = true;
		for (;;) {
			rs_progress(rs, true);
			if (rs->broken || rs->peer_gone || (rs->fin_sent && !rs->sq_busy) ||
			    rs_now_ns() >= end)
				break;
			ibv_req_notify_cq(rs->cq, 0);
			rs_progress(rs, false);
			if (rs->fin_sent && !rs->sq_busy)
				break;
			pthread_mutex_unlock(&rs->lock);
			struct pollfd pw[2] = { { .fd = rs->cch->fd, .events = POLLIN },
						{ .fd = rs->cmch->fd, .events = POLLIN } };
			poll(pw, 2, 10);
			pthread_mutex_lock(&rs->lock);
			rs_drain_events(rs);
		}
		rdma_disconnect(rs->id);
	}
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);   /* ours */
	rs_put(rs);   /* the table's: the last call out frees it */
	return 0;
}
