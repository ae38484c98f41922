// SPDX-License-Identifier: MIT
/*
 * librdmacm.so.1 of libroshm-verbs: the RDMA connection manager for
 * unmodified applications (perftest -R, rping, ucmatose, rdma_client /
 * rdma_server, qperf -cm1) on roshm0, where no kernel RDMA CM exists.
 *
 * The CM runs in the two application processes, over TCP between them: the
 * port of RDMA_PS_TCP is the TCP port, addresses come from getaddrinfo and
 * the routing table (IPv4 and IPv6). A connect sends REQ (QPN, PSN, GID,
 * LID, conn_param, private data), the listener's application answers with
 * rdma_accept (REP) or rdma_reject (REJ), the active side moves its QP to
 * RTR/RTS and sends RTU, either side's rdma_disconnect sends DREQ
 * (rdmacm_wire.h). QPs are driven through the public ibv_* calls of
 * libroshm-verbs' libibverbs, with the peer's QPN, PSN and GID.
 *
 * An event channel's fd is an epoll set over its ids' sockets, an eventfd
 * that is readable while events wait, and a timerfd for deadlines: it polls
 * readable exactly when rdma_get_cm_event has work, and the protocol moves
 * on inside rdma_get_cm_event (and inside the calls that send). Everything
 * read from a CM socket is a peer's: rdmacm_wire.c checks it, and a bad frame
 * ends that connection only.
 *
 * One process-wide mutex covers the CM state; no call blocks while it is
 * held. See docs/verbs-compat.md, "librdmacm".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "rdmacm_wire.h"

#define RC_EXPORT __attribute__((visibility("default")))
#define RC_DEVICE "roshm0"
#define RC_MAX_PENDING 64          /* accepted sockets still without a REQ, per listener */
#define RC_MAX_BACKLOG 1024        /* rdma_listen's backlog: CONNECT_REQUESTs not yet taken */
#define RC_TIMEOUT_MS 30000        /* REQ -> REP, REP -> RTU, accept -> REQ */
#define RC_REJ_CONSUMER 28         /* IB_CM_REJ_CONSUMER_DEFINED */
#define RC_REJ_NO_LISTENER 8       /* IB_CM_REJ_INVALID_SERVICE_ID */
#define RC_REJ_VENDOR 35           /* IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED */

_Static_assert(RC_WIRE_QPT_RC == IBV_QPT_RC, "wire qp type");

static int rc_err(int e)
{
	errno = e;
	return -1;
}

enum rc_state {
	RC_IDLE,
	RC_BOUND,
	RC_LISTEN,
	RC_ADDR_RESOLVED,
	RC_ROUTE_RESOLVED,
	RC_CONNECTING,     /* active: TCP connect in progress, REQ ready */
	RC_REQ_SENT,       /* active: waiting for REP */
	RC_REP_RCVD,       /* active without QP: CONNECT_RESPONSE given, waiting for rdma_establish */
	RC_HIDDEN,         /* passive: accepted socket, no whole REQ yet; the application does not know it */
	RC_REQ_RCVD,       /* passive: CONNECT_REQUEST given */
	RC_REP_SENT,       /* passive: accepted, waiting for RTU */
	RC_CONNECTED,
	RC_CLOSED,         /* disconnected or failed: nothing left on the wire */
};

/* What an entry of a channel's epoll set points at. */
enum rc_src_kind { RC_SRC_QUEUE, RC_SRC_TIMER, RC_SRC_ID };
struct rc_src {
	enum rc_src_kind kind;
};

struct rc_evt;
struct rc_id;

struct rc_chan {
	struct rdma_event_channel ch;   /* ch.fd: the epoll set */
	struct rc_src queue_src, timer_src;
	int efd;                        /* readable while events wait */
	int tfd;                        /* the earliest deadline of its ids */
	struct rc_evt *head, *tail;
	struct rc_id *ids;              /* every id on it, hidden ones too */
	bool dead;                      /* destroyed while ids remained: freed with the last */
};

struct rc_id {
	struct rdma_cm_id id;
	struct rc_src src;
	struct rc_id *cnext, *cprev;    /* the channel's list */
	struct rc_chan *ch;
	enum rc_state state;
	bool sync;                      /* created without a channel: calls wait for their event */
	bool destroyed;
	unsigned refs;                  /* the application's, and one per event naming it */
	int fd;                         /* listening or connection socket */
	uint32_t ep_events;             /* registered with the channel's epoll (0: not) */
	struct rc_id *listener;         /* while hidden: its listener */
	unsigned npending;              /* listener: hidden connections */
	unsigned backlog, nqueued;      /* listener: CONNECT_REQUESTs not yet taken, at most backlog */
	uint64_t deadline;              /* CLOCK_MONOTONIC ms, 0: none */
	uint32_t rlen;
	uint8_t rbuf[RC_WIRE_MAX];
	uint32_t txlen;                 /* REQ waiting for the TCP connect */
	uint8_t txbuf[RC_WIRE_MAX];
	struct rc_msg peer;             /* the peer's REQ or REP */
	bool have_peer;
	bool have_psn;
	uint32_t psn;
	uint8_t resp_res, init_depth, retry_count, rnr_retry_count;
	int sgid_index;
	uint8_t tos, ack_timeout;
	bool ack_timeout_set;
	int afonly;                     /* -1: not set */
	struct ibv_qp_init_attr *ep_attr;   /* rdma_create_ep, passive: QPs of rdma_get_request */
	uint8_t connect_len;
	uint8_t connect_pd[RC_PD_REQ];  /* rdma_addrinfo.ai_connect, sent before conn_param's */
	struct ibv_ece local_ece;
};

struct rc_evt {
	struct rdma_cm_event ev;
	struct rc_evt *next;
	struct rc_id *id, *listen;      /* each holds a reference */
	bool counted;                   /* a CONNECT_REQUEST in its listener's nqueued */
	uint8_t pd[RC_PD_REP];
};

static pthread_mutex_t rc_lock = PTHREAD_MUTEX_INITIALIZER;

/* The one device, opened on first need and kept for the process (like
 * librdmacm, which never closes its devices' contexts). */
static struct {
	struct ibv_context *verbs;
	struct ibv_pd *pd;
	uint8_t max_resp, max_init;
	uint16_t lid;
	uint8_t mtu;
	int gid_len;
} rc_dev;

static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* ROSHM_CM_TIMEOUT_MS: how long a connection may wait for its peer's next
 * CM message (docs/verbs-compat.md). */
static uint64_t rc_timeout(void)
{
	static uint64_t t;

	if (!t) {
		const char *e = getenv("ROSHM_CM_TIMEOUT_MS");
		char *end;
		unsigned long long v = e ? strtoull(e, &end, 10) : 0;

		t = e && *e && !*end && v >= 10 && v <= 3600000 ? v : RC_TIMEOUT_MS;
	}
	return t;
}

/* ------------------------------------------------------------- addresses */

static socklen_t sa_len(const struct sockaddr *sa)
{
	if (!sa)
		return 0;
	switch (sa->sa_family) {
	case AF_INET:
		return sizeof(struct sockaddr_in);
	case AF_INET6:
		return sizeof(struct sockaddr_in6);
	default:
		return 0;
	}
}

static uint16_t sa_port(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_port;
	if (sa->sa_family == AF_INET6)
		return ((const struct sockaddr_in6 *)sa)->sin6_port;
	return 0;
}

static bool sa_any(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_addr.s_addr == htonl(INADDR_ANY);
	return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)sa)->sin6_addr);
}

/* An IPv4 peer of a dual-stack socket shows as ::ffff:a.b.c.d: report it as
 * the IPv4 address it is, as the kernel CM does. */
static void sa_unmap(struct sockaddr_storage *ss)
{
	struct sockaddr_in6 s6;
	struct sockaddr_in s4;

	if (ss->ss_family != AF_INET6)
		return;
	memcpy(&s6, ss, sizeof(s6));
	if (!IN6_IS_ADDR_V4MAPPED(&s6.sin6_addr))
		return;
	memset(&s4, 0, sizeof(s4));
	s4.sin_family = AF_INET;
	s4.sin_port = s6.sin6_port;
	memcpy(&s4.sin_addr, &s6.sin6_addr.s6_addr[12], 4);
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, &s4, sizeof(s4));
}

/* The GID a RoCE port gives an address: IPv4-mapped, or the IPv6 address. */
static void sa_gid(const struct sockaddr *sa, union ibv_gid *g)
{
	memset(g, 0, sizeof(*g));
	if (sa->sa_family == AF_INET) {
		g->raw[10] = g->raw[11] = 0xff;
		memcpy(&g->raw[12], &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		memcpy(g->raw, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
	}
}

/* ---------------------------------------------------------------- device */

/* Open roshm0 once (lock held): 0 or an errno value. */
static int dev_get(void)
{
	struct ibv_device **list;
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	struct ibv_context *ctx = NULL;
	int n = 0, err = ENODEV;

	if (rc_dev.verbs)
		return 0;
	list = ibv_get_device_list(&n);
	if (!list)
		return errno ? errno : ENODEV;
	for (int i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), RC_DEVICE)) {
			ctx = ibv_open_device(list[i]);
			err = ctx ? 0 : (errno ? errno : ENODEV);
			break;
		}
	ibv_free_device_list(list);
	if (!ctx)
		return err;
	if (ibv_query_device(ctx, &da) || ibv_query_port(ctx, 1, &pa)) {
		ibv_close_device(ctx);
		return ENODEV;
	}
	rc_dev.pd = ibv_alloc_pd(ctx);
	if (!rc_dev.pd) {
		ibv_close_device(ctx);
		return ENOMEM;
	}
	rc_dev.max_resp = (uint8_t)(da.max_qp_rd_atom > 255 ? 255 : da.max_qp_rd_atom);
	rc_dev.max_init = (uint8_t)(da.max_qp_init_rd_atom > 255 ? 255 : da.max_qp_init_rd_atom);
	rc_dev.lid = pa.lid;
	rc_dev.mtu = (uint8_t)(pa.active_mtu >= IBV_MTU_256 && pa.active_mtu <= IBV_MTU_4096 ?
			       pa.active_mtu : IBV_MTU_1024);
	rc_dev.gid_len = pa.gid_tbl_len > 0 ? (pa.gid_tbl_len < 256 ? pa.gid_tbl_len : 256) : 1;
	rc_dev.verbs = ctx;
	return 0;
}

/* The GID index whose GID is @src's RoCE GID, else 0 (an IB-style table). */
static int sgid_for(const struct sockaddr *src)
{
	union ibv_gid want, g;

	sa_gid(src, &want);
	for (int i = 0; i < rc_dev.gid_len; i++)
		if (!ibv_query_gid(rc_dev.verbs, 1, i, &g) && !memcmp(&g, &want, sizeof(g)))
			return i;
	return 0;
}

/* Give @i the device (lock held): 0 or an errno value. */
static int id_attach(struct rc_id *i)
{
	int err = dev_get();

	if (err)
		return err;
	i->id.verbs = rc_dev.verbs;
	if (!i->id.pd)
		i->id.pd = rc_dev.pd;
	i->id.port_num = 1;
	i->sgid_index = sgid_for(&i->id.route.addr.src_addr);
	if (ibv_query_gid(rc_dev.verbs, 1, i->sgid_index, &i->id.route.addr.addr.ibaddr.sgid))
		memset(&i->id.route.addr.addr.ibaddr.sgid, 0, sizeof(union ibv_gid));
	i->id.route.addr.addr.ibaddr.pkey = htobe16(0xffff);
	return 0;
}

/* ---------------------------------------------------------- event channels */

static void chan_free(struct rc_chan *c)
{
	if (c->ch.fd >= 0)
		close(c->ch.fd);
	if (c->efd >= 0)
		close(c->efd);
	if (c->tfd >= 0)
		close(c->tfd);
	free(c);
}

static struct rc_chan *chan_new(void)
{
	struct rc_chan *c = calloc(1, sizeof(*c));
	struct epoll_event ev = { .events = EPOLLIN };

	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	c->queue_src.kind = RC_SRC_QUEUE;
	c->timer_src.kind = RC_SRC_TIMER;
	c->ch.fd = epoll_create1(EPOLL_CLOEXEC);
	c->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	c->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (c->ch.fd < 0 || c->efd < 0 || c->tfd < 0)
		goto err;
	ev.data.ptr = &c->queue_src;
	if (epoll_ctl(c->ch.fd, EPOLL_CTL_ADD, c->efd, &ev))
		goto err;
	ev.data.ptr = &c->timer_src;
	if (epoll_ctl(c->ch.fd, EPOLL_CTL_ADD, c->tfd, &ev))
		goto err;
	return c;
err: {
	int e = errno;

	chan_free(c);
	errno = e;
	return NULL;
}
}

static inline struct rc_chan *to_chan(struct rdma_event_channel *ch)
{
	return (struct rc_chan *)ch;
}

static inline struct rc_id *to_id(struct rdma_cm_id *id)
{
	return (struct rc_id *)id;
}

static void chan_link(struct rc_chan *c, struct rc_id *i)
{
	i->ch = c;
	i->id.channel = &c->ch;
	i->cprev = NULL;
	i->cnext = c->ids;
	if (c->ids)
		c->ids->cprev = i;
	c->ids = i;
}

static void chan_unlink(struct rc_id *i)
{
	struct rc_chan *c = i->ch;

	if (!c)
		return;
	if (i->cprev)
		i->cprev->cnext = i->cnext;
	else
		c->ids = i->cnext;
	if (i->cnext)
		i->cnext->cprev = i->cprev;
	i->cnext = i->cprev = NULL;
	i->ch = NULL;
}

/* A destroyed channel goes with its last id: true when it went. */
static bool chan_reap(struct rc_chan *c)
{
	if (!c->dead || c->ids)
		return false;
	chan_free(c);
	return true;
}

/* The timerfd fires at the earliest deadline of the channel's ids. */
static void chan_arm(struct rc_chan *c)
{
	struct itimerspec its = { 0 };
	uint64_t d = 0;

	if (!c || c->dead)
		return;
	for (struct rc_id *i = c->ids; i; i = i->cnext)
		if (i->deadline && (!d || i->deadline < d))
			d = i->deadline;
	if (d) {
		its.it_value.tv_sec = (time_t)(d / 1000);
		its.it_value.tv_nsec = (long)(d % 1000) * 1000000;
	}
	timerfd_settime(c->tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void evt_free(struct rc_evt *e);

/* The queue's eventfd is readable exactly while events wait. */
static void efd_set(int fd)
{
	uint64_t one = 1;
	ssize_t r = write(fd, &one, sizeof(one));   /* at most 1: never overflows */

	(void)r;
}

static void efd_clear(int fd)
{
	uint64_t v;
	ssize_t r = read(fd, &v, sizeof(v));        /* EAGAIN when it was clear */

	(void)r;
}

static void chan_push(struct rc_chan *c, struct rc_evt *e)
{
	if (!c || c->dead) {
		evt_free(e);
		return;
	}
	e->next = NULL;
	if (c->tail)
		c->tail->next = e;
	else
		c->head = e;
	c->tail = e;
	if (c->head == e)
		efd_set(c->efd);
}

static struct rc_evt *chan_pop(struct rc_chan *c)
{
	struct rc_evt *e = c->head;

	if (!e)
		return NULL;
	c->head = e->next;
	if (!c->head) {
		c->tail = NULL;
		efd_clear(c->efd);
	}
	e->next = NULL;
	return e;
}

/* ------------------------------------------------------------------ ids */

static void id_put(struct rc_id *i)
{
	if (--i->refs)
		return;
	free(i->id.route.path_rec);
	free(i->ep_attr);
	free(i);
}

static void evt_free(struct rc_evt *e)
{
	if (e->counted && e->listen)
		e->listen->nqueued--;
	if (e->id)
		id_put(e->id);
	if (e->listen)
		id_put(e->listen);
	free(e);
}

static struct rc_id *id_new(struct rc_chan *c, void *context, enum rdma_port_space ps,
			    enum ibv_qp_type qp_type)
{
	struct rc_id *i = calloc(1, sizeof(*i));

	if (!i)
		return NULL;
	i->id.context = context;
	i->id.ps = ps;
	i->id.qp_type = qp_type;
	i->src.kind = RC_SRC_ID;
	i->fd = -1;
	i->afonly = -1;
	i->refs = 1;
	chan_link(c, i);
	return i;
}

static void id_watch(struct rc_id *i, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = &i->src };
	int op;

	if (i->fd < 0 || events == i->ep_events || !i->ch)
		return;
	op = !i->ep_events ? EPOLL_CTL_ADD : !events ? EPOLL_CTL_DEL : EPOLL_CTL_MOD;
	if (!epoll_ctl(i->ch->ch.fd, op, i->fd, &ev) || op == EPOLL_CTL_DEL)
		i->ep_events = events;
}

/* Close the socket; the state is the caller's. */
static void id_close_fd(struct rc_id *i)
{
	id_watch(i, 0);
	if (i->fd >= 0)
		close(i->fd);
	i->fd = -1;
	i->rlen = 0;
	i->txlen = 0;
	i->deadline = 0;
}

static struct rc_evt *evt_new(struct rc_id *i, enum rdma_cm_event_type type, int status)
{
	struct rc_evt *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->ev.id = &i->id;
	e->ev.event = type;
	e->ev.status = status;
	e->id = i;
	i->refs++;
	return e;
}

/* Queue an event for @i on its channel (an allocation failure loses it:
 * the application then waits, nothing breaks). */
static void queue_evt(struct rc_id *i, enum rdma_cm_event_type type, int status)
{
	struct rc_evt *e = evt_new(i, type, status);

	if (e)
		chan_push(i->ch, e);
}

/* The conn_param a peer's message gives an event, from the receiver's side
 * (its responder resources are the sender's initiator depth), with the
 * private data zero-padded to the message's full size as rdma_cm reports. */
static void evt_conn(struct rc_evt *e, const struct rc_msg *m, uint8_t report_len)
{
	struct rdma_conn_param *p = &e->ev.param.conn;

	memset(e->pd, 0, sizeof(e->pd));
	memcpy(e->pd, m->pd, m->pd_len);
	p->private_data = report_len ? e->pd : NULL;
	p->private_data_len = report_len;
	p->responder_resources = m->initiator_depth;
	p->initiator_depth = m->responder_resources;
	p->flow_control = m->flow_control;
	p->retry_count = m->retry_count;
	p->rnr_retry_count = m->rnr_retry_count;
	p->srq = m->srq;
	p->qp_num = m->qpn;
}

static int id_send(struct rc_id *i, const struct rc_msg *m)
{
	uint8_t buf[RC_WIRE_MAX];
	int n = rc_wire_encode(m, buf, sizeof(buf));
	ssize_t s;

	if (n < 0)
		return n;
	if (i->fd < 0)
		return -ENOTCONN;
	do
		s = send(i->fd, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (s < 0 && errno == EINTR);
	if (s < 0)
		return -errno;
	/* a handful of small messages per connection: a fresh socket's buffer
	 * takes each whole, or the peer is not reading and the connection fails */
	return s == n ? 0 : -EIO;
}

static void send_simple(struct rc_id *i, uint8_t type, uint32_t reason)
{
	struct rc_msg m;

	memset(&m, 0, sizeof(m));
	m.type = type;
	m.reason = reason;
	id_send(i, &m);
}

static void qp_to_err(struct rc_id *i)
{
	struct ibv_qp_attr a;

	if (!i->id.qp)
		return;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	ibv_modify_qp(i->id.qp, &a, IBV_QP_STATE);
}

/* The connection failed or ended: no more CM traffic on it. */
static void conn_end(struct rc_id *i, enum rdma_cm_event_type type, int status)
{
	id_close_fd(i);
	i->state = RC_CLOSED;
	if (type != RDMA_CM_EVENT_DISCONNECTED)
		qp_to_err(i);
	queue_evt(i, type, status);
}

static void id_destroy(struct rc_id *i);

/* A hidden connection goes away unseen. */
static void hidden_drop(struct rc_id *i)
{
	if (i->listener)
		i->listener->npending--;
	i->listener = NULL;
	id_destroy(i);
}

/* ---------------------------------------------------------- QP attributes */

static int init_qp_attr(struct rc_id *i, struct ibv_qp_attr *a, int *mask)
{
	enum ibv_qp_state want = a->qp_state;

	memset(a, 0, sizeof(*a));
	switch (want) {
	case IBV_QPS_INIT:
		a->qp_state = IBV_QPS_INIT;
		a->pkey_index = 0;
		a->port_num = i->id.port_num ? i->id.port_num : 1;
		a->qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				     IBV_ACCESS_REMOTE_ATOMIC;
		*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
		return 0;
	case IBV_QPS_RTR:
		if (!i->have_peer)
			return EINVAL;
		a->qp_state = IBV_QPS_RTR;
		a->path_mtu = (enum ibv_mtu)(i->peer.mtu < rc_dev.mtu ? i->peer.mtu : rc_dev.mtu);
		a->dest_qp_num = i->peer.qpn;
		a->rq_psn = i->peer.psn;
		a->max_dest_rd_atomic = i->resp_res;
		a->min_rnr_timer = 12;
		a->ah_attr.dlid = i->peer.lid;
		a->ah_attr.port_num = i->id.port_num ? i->id.port_num : 1;
		a->ah_attr.is_global = 1;
		memcpy(a->ah_attr.grh.dgid.raw, i->peer.gid, 16);
		a->ah_attr.grh.sgid_index = (uint8_t)i->sgid_index;
		a->ah_attr.grh.hop_limit = 64;
		a->ah_attr.grh.traffic_class = i->tos;
		*mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		return 0;
	case IBV_QPS_RTS:
		if (!i->have_psn)
			return EINVAL;
		a->qp_state = IBV_QPS_RTS;
		a->timeout = i->ack_timeout_set ? i->ack_timeout : 14;
		a->retry_cnt = i->retry_count;
		a->rnr_retry = i->rnr_retry_count;
		a->sq_psn = i->psn;
		a->max_rd_atomic = i->init_depth;
		*mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
		return 0;
	default:
		return EINVAL;
	}
}

static int qp_move(struct rc_id *i, enum ibv_qp_state s)
{
	struct ibv_qp_attr a;
	int mask, ret;

	a.qp_state = s;
	ret = init_qp_attr(i, &a, &mask);
	return ret ? ret : ibv_modify_qp(i->id.qp, &a, mask);
}

/* INIT (again, as librdmacm does), RTR and RTS with the peer's numbers. */
static int qp_connect(struct rc_id *i)
{
	int ret;

	if (!i->id.qp)
		return 0;
	ret = qp_move(i, IBV_QPS_INIT);
	if (!ret)
		ret = qp_move(i, IBV_QPS_RTR);
	if (!ret)
		ret = qp_move(i, IBV_QPS_RTS);
	return ret;
}

static uint32_t new_psn(void)
{
	uint32_t v = 0;

	if (getrandom(&v, sizeof(v), 0) != sizeof(v))
		v = (uint32_t)now_ms() * 2654435761u;
	return v & 0xffffff;
}

/* Our side of a REQ or REP. */
static void local_conn(struct rc_id *i, struct rc_msg *m, uint8_t type, uint32_t qpn, uint8_t srq)
{
	memset(m, 0, sizeof(*m));
	m->type = type;
	m->qpn = qpn & 0xffffff;
	m->psn = i->psn;
	if (rc_dev.verbs) {
		union ibv_gid g;

		if (!ibv_query_gid(rc_dev.verbs, 1, i->sgid_index, &g))
			memcpy(m->gid, g.raw, sizeof(m->gid));
	}
	m->lid = rc_dev.lid;
	m->mtu = rc_dev.mtu;
	m->responder_resources = i->resp_res;
	m->initiator_depth = i->init_depth;
	m->retry_count = i->retry_count & 7;
	m->rnr_retry_count = i->rnr_retry_count & 7;
	m->srq = srq ? 1 : 0;
	m->qp_type = IBV_QPT_RC;
}

/* ------------------------------------------------------ the protocol, in */

static bool rx_hidden_req(struct rc_id *i, const struct rc_msg *m)
{
	struct rc_id *l = i->listener;
	struct rc_evt *e;

	if (m->type != RC_MSG_REQ)
		return false;
	/* as the kernel CM with its listen backlog: requests the application
	 * has not taken yet are bounded; one more is rejected */
	if (l->nqueued >= l->backlog || id_attach(i)) {
		send_simple(i, RC_MSG_REJ, RC_REJ_CONSUMER);
		hidden_drop(i);
		return true;
	}
	e = evt_new(i, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
	if (!e) {
		send_simple(i, RC_MSG_REJ, RC_REJ_CONSUMER);
		hidden_drop(i);
		return true;
	}
	i->peer = *m;
	i->have_peer = true;
	memcpy(i->id.route.addr.addr.ibaddr.dgid.raw, m->gid, 16);
	i->psn = new_psn();
	i->have_psn = true;
	/* what the peer offers, from our side; rdma_accept may lower it */
	i->resp_res = m->initiator_depth;
	i->init_depth = m->responder_resources;
	i->retry_count = m->retry_count;
	i->rnr_retry_count = m->rnr_retry_count;
	l->npending--;
	i->listener = NULL;
	i->state = RC_REQ_RCVD;
	i->deadline = 0;
	e->listen = l;
	l->refs++;
	e->counted = true;
	l->nqueued++;
	e->ev.listen_id = &l->id;
	evt_conn(e, m, RC_PD_REQ);
	chan_push(i->ch, e);
	return false;
}

static bool rx_rep(struct rc_id *i, const struct rc_msg *m)
{
	struct rc_evt *e;
	int ret;

	i->peer = *m;
	i->have_peer = true;
	memcpy(i->id.route.addr.addr.ibaddr.dgid.raw, m->gid, 16);
	i->deadline = 0;
	if (!i->id.qp) {
		/* the application moves its own QP, then calls rdma_establish */
		i->state = RC_REP_RCVD;
		e = evt_new(i, RDMA_CM_EVENT_CONNECT_RESPONSE, 0);
		if (e) {
			evt_conn(e, m, RC_PD_REP);
			chan_push(i->ch, e);
		}
		return false;
	}
	ret = qp_connect(i);
	if (!ret)
		ret = -id_send(i, &(struct rc_msg){ .type = RC_MSG_RTU });
	if (ret) {
		send_simple(i, RC_MSG_REJ, RC_REJ_CONSUMER);
		conn_end(i, RDMA_CM_EVENT_CONNECT_ERROR, -ret);
		return true;
	}
	i->state = RC_CONNECTED;
	e = evt_new(i, RDMA_CM_EVENT_ESTABLISHED, 0);
	if (e) {
		evt_conn(e, m, RC_PD_REP);
		chan_push(i->ch, e);
	}
	return false;
}

static bool rx_rej(struct rc_id *i, const struct rc_msg *m)
{
	struct rc_evt *e;

	id_close_fd(i);
	i->state = RC_CLOSED;
	qp_to_err(i);
	e = evt_new(i, RDMA_CM_EVENT_REJECTED, (int)(m->reason > INT32_MAX ? INT32_MAX : m->reason));
	if (e) {
		evt_conn(e, m, RC_PD_REJ);
		e->ev.param.conn.qp_num = 0;
		chan_push(i->ch, e);
	}
	return true;
}

/* A whole message for @i: true when the connection is gone (stop reading). */
static bool rx_msg(struct rc_id *i, const struct rc_msg *m)
{
	switch (i->state) {
	case RC_HIDDEN:
		if (rx_hidden_req(i, m))
			return true;
		if (m->type == RC_MSG_REQ)
			return false;
		break;
	case RC_REQ_RCVD:
		/* the active side gave up before the application answered */
		if (m->type == RC_MSG_REJ || m->type == RC_MSG_DREQ) {
			conn_end(i, RDMA_CM_EVENT_CONNECT_ERROR, -ECONNRESET);
			return true;
		}
		break;
	case RC_REQ_SENT:
		if (m->type == RC_MSG_REP)
			return rx_rep(i, m);
		if (m->type == RC_MSG_REJ)
			return rx_rej(i, m);
		break;
	case RC_REP_SENT:
		if (m->type == RC_MSG_RTU) {
			i->state = RC_CONNECTED;
			i->deadline = 0;
			queue_evt(i, RDMA_CM_EVENT_ESTABLISHED, 0);
			return false;
		}
		if (m->type == RC_MSG_REJ)
			return rx_rej(i, m);
		break;
	case RC_REP_RCVD:
		if (m->type == RC_MSG_REJ)
			return rx_rej(i, m);
		if (m->type == RC_MSG_DREQ) {
			conn_end(i, RDMA_CM_EVENT_DISCONNECTED, 0);
			return true;
		}
		break;
	case RC_CONNECTED:
		if (m->type == RC_MSG_DREQ) {
			conn_end(i, RDMA_CM_EVENT_DISCONNECTED, 0);
			return true;
		}
		break;
	default:
		break;
	}
	/* a message this state has no use for: the peer is broken or hostile */
	if (i->state == RC_HIDDEN)
		hidden_drop(i);
	else if (i->state == RC_CONNECTED || i->state == RC_REP_RCVD)
		conn_end(i, RDMA_CM_EVENT_DISCONNECTED, 0);
	else
		conn_end(i, RDMA_CM_EVENT_CONNECT_ERROR, -EPROTO);
	return true;
}

/* The peer closed (err 0) or the socket failed, or sent no valid frame
 * (err EPROTO). */
static void rx_gone(struct rc_id *i, int err)
{
	switch (i->state) {
	case RC_HIDDEN:
		hidden_drop(i);
		return;
	case RC_CONNECTED:
	case RC_REP_RCVD:
		conn_end(i, RDMA_CM_EVENT_DISCONNECTED, 0);
		return;
	case RC_REQ_SENT:
		if (err != EPROTO) {
			conn_end(i, RDMA_CM_EVENT_UNREACHABLE, -(err ? err : ECONNRESET));
			return;
		}
		/* fallthrough */
	default:
		conn_end(i, RDMA_CM_EVENT_CONNECT_ERROR, -(err ? err : ECONNRESET));
	}
}

static void rx(struct rc_id *i)
{
	for (;;) {
		ssize_t r = recv(i->fd, i->rbuf + i->rlen, sizeof(i->rbuf) - i->rlen, MSG_DONTWAIT);

		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
			rx_gone(i, r ? errno : 0);
			return;
		}
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		i->rlen += (uint32_t)r;
		for (;;) {
			struct rc_msg m;
			int n = rc_wire_decode(i->rbuf, i->rlen, &m);

			if (!n)
				break;
			if (n < 0) {
				rx_gone(i, EPROTO);
				return;
			}
			i->rlen -= (uint32_t)n;
			memmove(i->rbuf, i->rbuf + n, i->rlen);
			if (rx_msg(i, &m))
				return;
		}
	}
}

/* The TCP connect of an active id finished: send the REQ. */
static void tx_connected(struct rc_id *i)
{
	int err = 0;
	socklen_t len = sizeof(err);
	ssize_t s;

	if (getsockopt(i->fd, SOL_SOCKET, SO_ERROR, &err, &len))
		err = errno;
	if (!err) {
		do
			s = send(i->fd, i->txbuf, i->txlen, MSG_NOSIGNAL | MSG_DONTWAIT);
		while (s < 0 && errno == EINTR);
		err = s == (ssize_t)i->txlen ? 0 : s < 0 ? errno : EIO;
	}
	if (err == ECONNREFUSED) {
		/* nobody listens on that port: what IB CM says for an unknown service */
		conn_end(i, RDMA_CM_EVENT_REJECTED, RC_REJ_NO_LISTENER);
		return;
	}
	if (err) {
		conn_end(i, RDMA_CM_EVENT_UNREACHABLE, -err);
		return;
	}
	i->txlen = 0;
	i->state = RC_REQ_SENT;
	id_watch(i, EPOLLIN);
}

static void tx_accept(struct rc_id *l)
{
	for (;;) {
		struct sockaddr_storage a;
		socklen_t alen = sizeof(a);
		struct rc_id *c;
		int one = 1;
		int fd = accept4(l->fd, (struct sockaddr *)&a, &alen, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				/* out of descriptors: look again in a moment, not in a spin */
				id_watch(l, 0);
				l->deadline = now_ms() + 100;
			}
			return;
		}
		if (l->npending >= RC_MAX_PENDING || !(c = id_new(l->ch, l->id.context, l->id.ps,
								  l->id.qp_type))) {
			close(fd);
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c->fd = fd;
		c->state = RC_HIDDEN;
		c->listener = l;
		l->npending++;
		c->deadline = now_ms() + rc_timeout();
		memcpy(&c->id.route.addr.dst_storage, &a, alen < sizeof(a) ? alen : sizeof(a));
		sa_unmap(&c->id.route.addr.dst_storage);
		alen = sizeof(c->id.route.addr.src_storage);
		getsockname(fd, &c->id.route.addr.src_addr, &alen);
		sa_unmap(&c->id.route.addr.src_storage);
		id_watch(c, EPOLLIN);
	}
}

static void id_io(struct rc_id *i, uint32_t events)
{
	switch (i->state) {
	case RC_LISTEN:
		tx_accept(i);
		break;
	case RC_CONNECTING:
		if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
			tx_connected(i);
		break;
	default:
		if (i->fd >= 0)
			rx(i);
	}
}

static void chan_timeouts(struct rc_chan *c)
{
	uint64_t now = now_ms();
	struct rc_id *next;

	for (struct rc_id *i = c->ids; i; i = next) {
		next = i->cnext;
		if (!i->deadline || i->deadline > now)
			continue;
		i->deadline = 0;
		switch (i->state) {
		case RC_LISTEN:
			id_watch(i, EPOLLIN);
			break;
		case RC_HIDDEN:
			hidden_drop(i);
			break;
		case RC_CONNECTING:
		case RC_REQ_SENT:
			send_simple(i, RC_MSG_DREQ, 0);
			conn_end(i, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
			break;
		case RC_REP_SENT:
			send_simple(i, RC_MSG_REJ, RC_REJ_CONSUMER);
			conn_end(i, RDMA_CM_EVENT_CONNECT_ERROR, -ETIMEDOUT);
			break;
		default:
			break;
		}
	}
}

/* Move the protocol of every socket of @c on (lock held, never blocks). */
static void chan_process(struct rc_chan *c)
{
	struct epoll_event evs[32];
	struct rc_id *ids[32];

	for (int round = 0; round < 16; round++) {
		int n = epoll_wait(c->ch.fd, evs, 32, 0);
		int nid = 0;

		if (n <= 0)
			break;
		/* hold every id of this batch: handling one may end another */
		for (int k = 0; k < n; k++) {
			struct rc_src *s = evs[k].data.ptr;

			ids[k] = NULL;
			if (s->kind == RC_SRC_ID) {
				ids[k] = (struct rc_id *)((char *)s - offsetof(struct rc_id, src));
				ids[k]->refs++;
				nid++;
			} else if (s->kind == RC_SRC_TIMER) {
				efd_clear(c->tfd);   /* the expiry count; deadlines are checked below */
			}
		}
		for (int k = 0; k < n; k++)
			if (ids[k] && !ids[k]->destroyed && ids[k]->ch == c)
				id_io(ids[k], evs[k].events);
		for (int k = 0; k < n; k++)
			if (ids[k])
				id_put(ids[k]);
		/* again while sockets had something: a listener's new connections
		 * may hold their REQ already (the queue's eventfd stays readable
		 * while events wait, so it alone does not count) */
		if (!nid || c->dead)
			break;
	}
	chan_timeouts(c);
	chan_arm(c);
}

/* ----------------------------------------------------- channels, events */

RC_EXPORT struct rdma_event_channel *rdma_create_event_channel(void)
{
	struct ibv_device **list;
	struct rc_chan *c;
	int n = 0;
	bool found = false;

	/* like librdmacm: no device, no channel (ENODEV) */
	list = ibv_get_device_list(&n);
	for (int k = 0; list && k < n; k++)
		found |= !strcmp(ibv_get_device_name(list[k]), RC_DEVICE);
	if (list)
		ibv_free_device_list(list);
	if (!found) {
		errno = ENODEV;
		return NULL;
	}
	c = chan_new();
	return c ? &c->ch : NULL;
}

static void id_destroy(struct rc_id *i);

/* Drop the queued events that name @i (lock held). A CONNECT_REQUEST that
 * never reached the application takes its new id with it. */
static void chan_purge(struct rc_chan *c, struct rc_id *i)
{
	struct rc_evt **pp = &c->head, *e, *last = NULL, *gone = NULL;

	/* unhook them first: destroying a new id purges the queue again */
	while ((e = *pp)) {
		if (e->id != i && e->listen != i) {
			last = e;
			pp = &e->next;
			continue;
		}
		*pp = e->next;
		e->next = gone;
		gone = e;
	}
	c->tail = last;
	if (!c->head && gone)
		efd_clear(c->efd);
	while ((e = gone)) {
		gone = e->next;
		if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST && e->id != i && !e->id->destroyed)
			id_destroy(e->id);
		evt_free(e);
	}
}

RC_EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	struct rc_chan *c = to_chan(channel);
	struct rc_evt *e;

	if (!channel)
		return;
	pthread_mutex_lock(&rc_lock);
	while ((e = chan_pop(c))) {
		if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST && e->id && !e->id->destroyed)
			id_destroy(e->id);
		evt_free(e);
	}
	/* ids still on it keep it until they go (librdmacm's rule is that they
	 * are gone first; a late one must not touch freed memory) */
	if (c->ids)
		c->dead = true;
	else
		chan_free(c);
	pthread_mutex_unlock(&rc_lock);
}

static int migrate(struct rc_id *i, struct rc_chan *nc, bool sync);

RC_EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
	struct rc_chan *c = to_chan(channel);
	struct epoll_event ev;
	struct rc_evt *e;

	if (!channel || !event)
		return rc_err(EINVAL);
	pthread_mutex_lock(&rc_lock);
	for (;;) {
		chan_process(c);
		e = chan_pop(c);
		if (e)
			break;
		if (fcntl(c->ch.fd, F_GETFL) & O_NONBLOCK) {
			pthread_mutex_unlock(&rc_lock);
			return rc_err(EAGAIN);
		}
		pthread_mutex_unlock(&rc_lock);
		/* sleep until a socket, the queue or the timer has something;
		 * level-triggered, so chan_process sees it again under the lock */
		if (epoll_wait(c->ch.fd, &ev, 1, -1) < 0 && errno != EINTR)
			return -1;
		pthread_mutex_lock(&rc_lock);
	}
	if (e->counted) {
		e->counted = false;
		e->listen->nqueued--;
	}
	/* a sync listener's new id gets a private channel of its own */
	if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST && e->listen && e->listen->sync) {
		struct rc_chan *nc = chan_new();

		if (nc)
			migrate(e->id, nc, true);
	}
	pthread_mutex_unlock(&rc_lock);
	*event = &e->ev;
	return 0;
}

RC_EXPORT int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	if (!event)
		return rc_err(EINVAL);
	pthread_mutex_lock(&rc_lock);
	evt_free((struct rc_evt *)event);
	pthread_mutex_unlock(&rc_lock);
	return 0;
}

/* A sync id's call waits for its event, as librdmacm's ucma_complete. */
static int id_complete(struct rc_id *i)
{
	struct rdma_cm_event *ev;
	int st;

	if (!i->sync)
		return 0;
	if (i->id.event) {
		rdma_ack_cm_event(i->id.event);
		i->id.event = NULL;
	}
	if (rdma_get_cm_event(i->id.channel, &ev))
		return -1;
	i->id.event = ev;
	st = ev->status;
	if (!st)
		return 0;
	if (ev->event == RDMA_CM_EVENT_REJECTED)
		return rc_err(ECONNREFUSED);
	return rc_err(st < 0 ? -st : st);
}

RC_EXPORT const char *rdma_event_str(enum rdma_cm_event_type event)
{
	static const char *const names[] = {
		[RDMA_CM_EVENT_ADDR_RESOLVED] = "RDMA_CM_EVENT_ADDR_RESOLVED",
		[RDMA_CM_EVENT_ADDR_ERROR] = "RDMA_CM_EVENT_ADDR_ERROR",
		[RDMA_CM_EVENT_ROUTE_RESOLVED] = "RDMA_CM_EVENT_ROUTE_RESOLVED",
		[RDMA_CM_EVENT_ROUTE_ERROR] = "RDMA_CM_EVENT_ROUTE_ERROR",
		[RDMA_CM_EVENT_CONNECT_REQUEST] = "RDMA_CM_EVENT_CONNECT_REQUEST",
		[RDMA_CM_EVENT_CONNECT_RESPONSE] = "RDMA_CM_EVENT_CONNECT_RESPONSE",
		[RDMA_CM_EVENT_CONNECT_ERROR] = "RDMA_CM_EVENT_CONNECT_ERROR",
		[RDMA_CM_EVENT_UNREACHABLE] = "RDMA_CM_EVENT_UNREACHABLE",
		[RDMA_CM_EVENT_REJECTED] = "RDMA_CM_EVENT_REJECTED",
		[RDMA_CM_EVENT_ESTABLISHED] = "RDMA_CM_EVENT_ESTABLISHED",
		[RDMA_CM_EVENT_DISCONNECTED] = "RDMA_CM_EVENT_DISCONNECTED",
		[RDMA_CM_EVENT_DEVICE_REMOVAL] = "RDMA_CM_EVENT_DEVICE_REMOVAL",
		[RDMA_CM_EVENT_MULTICAST_JOIN] = "RDMA_CM_EVENT_MULTICAST_JOIN",
		[RDMA_CM_EVENT_MULTICAST_ERROR] = "RDMA_CM_EVENT_MULTICAST_ERROR",
		[RDMA_CM_EVENT_ADDR_CHANGE] = "RDMA_CM_EVENT_ADDR_CHANGE",
		[RDMA_CM_EVENT_TIMEWAIT_EXIT] = "RDMA_CM_EVENT_TIMEWAIT_EXIT",
	};

	if ((unsigned)event < sizeof(names) / sizeof(names[0]) && names[event])
		return names[event];
	return "UNKNOWN EVENT";
}

/* ------------------------------------------------------------------ ids */

RC_EXPORT int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id,
			     void *context, enum rdma_port_space ps)
{
	struct rc_chan *c;
	struct rc_id *i;

	if (!id)
		return rc_err(EINVAL);
	/* roshm0 offers RC only: the UD port spaces have nothing to carry */
	if (ps != RDMA_PS_TCP && ps != RDMA_PS_IB)
		return rc_err(ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB ? EOPNOTSUPP : EINVAL);
	pthread_mutex_lock(&rc_lock);
	c = channel ? to_chan(channel) : chan_new();
	i = c ? id_new(c, context, ps, IBV_QPT_RC) : NULL;
	if (!i) {
		if (c && !channel)
			chan_free(c);
		pthread_mutex_unlock(&rc_lock);
		return rc_err(ENOMEM);
	}
	i->sync = !channel;
	pthread_mutex_unlock(&rc_lock);
	*id = &i->id;
	return 0;
}

/* Everything of @i but its memory, which the last reference frees (lock held). */
static void id_destroy(struct rc_id *i)
{
	struct rc_chan *c = i->ch;

	if (i->destroyed)
		return;
	i->destroyed = true;
	if (c)
		chan_purge(c, i);
	/* the active side of a request nobody answered learns it now */
	if (i->state == RC_REQ_RCVD)
		send_simple(i, RC_MSG_REJ, RC_REJ_CONSUMER);
	else if (i->state == RC_CONNECTED || i->state == RC_REP_SENT || i->state == RC_REP_RCVD ||
		 i->state == RC_REQ_SENT)
		send_simple(i, RC_MSG_DREQ, 0);
	if (i->state == RC_LISTEN && c) {
		struct rc_id *next;

		for (struct rc_id *h = c->ids; h; h = next) {
			next = h->cnext;
			if (h->state == RC_HIDDEN && h->listener == i)
				hidden_drop(h);
		}
	}
	if (i->listener)
		i->listener->npending--;
	i->listener = NULL;
	id_close_fd(i);
	i->state = RC_CLOSED;
	chan_unlink(i);
	if (c) {
		if (i->sync)
			c->dead = true;     /* its private channel */
		if (!chan_reap(c))
			chan_arm(c);
	}
	id_put(i);
}

RC_EXPORT int rdma_destroy_id(struct rdma_cm_id *id)
{
	struct rc_id *i = to_id(id);

	if (!id)
		return rc_err(EINVAL);
	pthread_mutex_lock(&rc_lock);
	if (i->id.event) {
		evt_free((struct rc_evt *)i->id.event);
		i->id.event = NULL;
	}
	id_destroy(i);
	pthread_mutex_unlock(&rc_lock);
	return 0;
}

/* RDMA_OPTION_ID_TOS marks the CM's own packets too */
static void sock_tos(int fd, int family, uint8_t tos)
{
	int v = tos;

	if (fd >= 0 && tos)
		setsockopt(fd, family == AF_INET6 ? IPPROTO_IPV6 : IPPROTO_IP,
			   family == AF_INET6 ? IPV6_TCLASS : IP_TOS, &v, sizeof(v));
}

static int id_socket(struct rc_id *i, int family)
{
	int one = 1, v6only = i->afonly > 0;
	int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	/* A listener may take the port again while a connection accepted on it
	 * lives (perftest -R does: its control listener, then the data one),
	 * which the CM's port space allows. Two listeners still cannot share it. */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (family == AF_INET6 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only))) {
		int e = errno;

		close(fd);
		return -e;
	}
	sock_tos(fd, family, i->tos);
	return fd;
}

/* Bind @i's socket to @addr (lock held): 0 or an errno value. */
static int id_bind(struct rc_id *i, const struct sockaddr *addr)
{
	socklen_t len = sa_len(addr);
	int fd, err;

	fd = id_socket(i, addr->sa_family);
	if (fd < 0)
		return -fd;
	if (bind(fd, addr, len)) {
		err = errno;
		close(fd);
		return err;
	}
	i->fd = fd;
	len = sizeof(i->id.route.addr.src_storage);
	getsockname(fd, &i->id.route.addr.src_addr, &len);
	i->state = RC_BOUND;
	return 0;
}

RC_EXPORT int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct rc_id *i = to_id(id);
	int err;

	if (!id || !addr)
		return rc_err(EINVAL);
	if (!sa_len(addr))
		return rc_err(addr->sa_family == AF_IB ? EAFNOSUPPORT : EINVAL);
	pthread_mutex_lock(&rc_lock);
	err = i->state != RC_IDLE ? EINVAL : id_bind(i, addr);
	/* an address of this host: the device is the id's now (a wildcard
	 * leaves it to the connections, as rdma_cm does) */
	if (!err && !sa_any(addr)) {
		err = id_attach(i);
		if (err) {
			id_close_fd(i);
			i->state = RC_IDLE;
			memset(&i->id.route.addr.src_storage, 0, sizeof(i->id.route.addr.src_storage));
		}
	}
	pthread_mutex_unlock(&rc_lock);
	return err ? rc_err(err) : 0;
}

/* The address this host sends from towards @dst (the routing table's
 * choice), port 0. */
static int route_src(const struct sockaddr *dst, struct sockaddr_storage *src)
{
	struct sockaddr_storage d;
	socklen_t len = sa_len(dst);
	int fd = socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0), err = 0;

	if (fd < 0)
		return errno;
	memcpy(&d, dst, len);
	if (d.ss_family == AF_INET)
		((struct sockaddr_in *)&d)->sin_port = htons(9);
	else
		((struct sockaddr_in6 *)&d)->sin6_port = htons(9);
	len = sizeof(*src);
	if (connect(fd, (struct sockaddr *)&d, sa_len(dst)) ||
	    getsockname(fd, (struct sockaddr *)src, &len))
		err = errno;
	close(fd);
	if (!err) {
		if (src->ss_family == AF_INET)
			((struct sockaddr_in *)src)->sin_port = 0;
		else
			((struct sockaddr_in6 *)src)->sin6_port = 0;
	}
	return err;
}

RC_EXPORT int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr,
				struct sockaddr *dst_addr, int timeout_ms)
{
	struct rc_id *i = to_id(id);
	struct sockaddr_storage src;
	socklen_t dlen = sa_len(dst_addr);
	int err = 0;

	(void)timeout_ms;  /* resolution is local and immediate */
	if (!id || !dlen)
		return rc_err(dst_addr && dst_addr->sa_family == AF_IB ? EAFNOSUPPORT : EINVAL);
	if (src_addr && (!sa_len(src_addr) || src_addr->sa_family != dst_addr->sa_family))
		return rc_err(EINVAL);
	pthread_mutex_lock(&rc_lock);
	if (i->state != RC_IDLE && i->state != RC_BOUND) {
		err = EINVAL;
		goto out;
	}
	if (i->state == RC_BOUND && i->id.route.addr.src_addr.sa_family != dst_addr->sa_family) {
		err = EINVAL;
		goto out;
	}
	err = route_src(dst_addr, &src);
	if (err)
		goto out;   /* no route: rdma_cm says so at once */
	if (i->state == RC_IDLE) {
		if (src_addr && !sa_any(src_addr)) {
			memcpy(&src, src_addr, sa_len(src_addr));
		} else if (src_addr && sa_port(src_addr)) {
			if (src.ss_family == AF_INET)
				((struct sockaddr_in *)&src)->sin_port = sa_port(src_addr);
			else
				((struct sockaddr_in6 *)&src)->sin6_port = sa_port(src_addr);
		}
		err = id_bind(i, (struct sockaddr *)&src);
		if (err)
			goto out;
	} else {
		/* bound before, maybe to a wildcard: show the address in use */
		uint16_t port = sa_port(&i->id.route.addr.src_addr);

		if (sa_any(&i->id.route.addr.src_addr) && src.ss_family == i->id.route.addr.src_addr.sa_family) {
			memcpy(&i->id.route.addr.src_storage, &src, sizeof(src));
			if (src.ss_family == AF_INET)
				i->id.route.addr.src_sin.sin_port = port;
			else
				i->id.route.addr.src_sin6.sin6_port = port;
		}
	}
	memset(&i->id.route.addr.dst_storage, 0, sizeof(i->id.route.addr.dst_storage));
	memcpy(&i->id.route.addr.dst_storage, dst_addr, dlen);
	err = id_attach(i);
	if (err) {
		/* no device behind the address: an event, as from rdma_cm */
		queue_evt(i, RDMA_CM_EVENT_ADDR_ERROR, -err);
		err = 0;
		goto out;
	}
	sa_gid(dst_addr, &i->id.route.addr.addr.ibaddr.dgid);
	i->state = RC_ADDR_RESOLVED;
	queue_evt(i, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
out:
	pthread_mutex_unlock(&rc_lock);
	if (err)
		return rc_err(err);
	return id_complete(i);
}

RC_EXPORT int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	struct rc_id *i = to_id(id);
	struct ibv_sa_path_rec *p;

	(void)timeout_ms;
	if (!id)
		return rc_err(EINVAL);
	pthread_mutex_lock(&rc_lock);
	if (i->state != RC_ADDR_RESOLVED) {
		pthread_mutex_unlock(&rc_lock);
		return rc_err(EINVAL);
	}
	p = i->id.route.path_rec ? i->id.route.path_rec : calloc(1, sizeof(*p));
	if (!p) {
		pthread_mutex_unlock(&rc_lock);
		return rc_err(ENOMEM);
	}
	memset(p, 0, sizeof(*p));
	p->sgid = i->id.route.addr.addr.ibaddr.sgid;
	p->dgid = i->id.route.addr.addr.ibaddr.dgid;
	p->slid = htobe16(rc_dev.lid);
	p->reversible = 1;
	p->numb_path = 1;
	p->pkey = htobe16(0xffff);
	p->hop_limit = 64;
	p->traffic_class = i->tos;
	p->mtu_selector = 2;    /* exactly */
	p->mtu = rc_dev.mtu;
	p->rate_selector = 2;
	p->rate = 16;           /* 100 Gb/s, as good a figure as any for memory */
	p->packet_life_time_selector = 2;
	p->packet_life_time = 14;
	i->id.route.path_rec = p;
	i->id.route.num_paths = 1;
	i->state = RC_ROUTE_RESOLVED;
	queue_evt(i, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
	pthread_mutex_unlock(&rc_lock);
	return id_complete(i);
}

RC_EXPORT int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	struct rc_id *i = to_id(id);
	socklen_t len;
	int err = 0;

	if (!id)
		return rc_err(EINVAL);
	pthread_mutex_lock(&rc_lock);
	if (i->state == RC_IDLE) {
		/* rdma_cm binds an unbound listener to the IPv4 wildcard */
		struct sockaddr_in any = { .sin_family = AF_INET };

		err = id_bind(i, (struct sockaddr *)&any);
	} else if (i->state != RC_BOUND) {
		err = EINVAL;
	}
	if (!err && listen(i->fd, backlog > 0 && backlog < SOMAXCONN ? backlog : SOMAXCONN))
		err = errno;
	if (!err) {
		len = sizeof(i->id.route.addr.src_storage);
		getsockname(i->fd, &i->id.route.addr.src_addr, &len);
		/* 0: the kernel CM's default (its max_backlog) */
		i->backlog = backlog > 0 && backlog < RC_MAX_BACKLOG ? (unsigned)backlog : RC_MAX_BACKLOG;
		i->state = RC_LISTEN;
		id_watch(i, EPOLLIN);
	}
	pthread_mutex_unlock(&rc_lock);
	return err ? rc_err(err) : 0;
}

/* conn_param's responder resources / initiator depth within the device's. */
static bool param_ok(struct rc_id *i, const struct rdma_conn_param *p)
{
	if (!i->id.qp && !p)
		return false;
	if (!p)
		return true;
	return (p->responder_resources == RDMA_MAX_RESP_RES || p->responder_resources <= rc_dev.max_resp) &&
	       (p->initiator_depth == RDMA_MAX_INIT_DEPTH || p->initiator_depth <= rc_dev.max_init);
}

RC_EXPORT int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *p)
{
	struct rc_id *i = to_id(id);
	struct rc_msg m;
	int n, err = 0;
	uint8_t plen;

	if (!id)
		return rc_err(EINVAL);
	pthread_mutex_lock(&rc_lock);
	plen = p && p->private_data ? p->private_data_len : 0;
	if (i->state != RC_ROUTE_RESOLVED || !param_ok(i, p) ||
	    (unsigned)i->connect_len + plen > RC_PD_REQ) {
		err = EINVAL;
		goto out;
	}
	i->init_depth = p && p->initiator_depth != RDMA_MAX_INIT_DEPTH ? p->initiator_depth : rc_dev.max_init;
	i->resp_res = p && p->responder_resources != RDMA_MAX_RESP_RES ? p->responder_resources : rc_dev.max_resp;
	i->retry_count = p ? (p->retry_count > 7 ? 7 : p->retry_count) : 7;
	i->rnr_retry_count = p ? (p->rnr_retry_count > 7 ? 7 : p->rnr_retry_count) : 7;
	i->psn = new_psn();
	i->have_psn = true;
	local_conn(i, &m, RC_MSG_REQ, i->id.qp ? i->id.qp->qp_num : (p ? p->qp_num : 0),
		   i->id.qp ? !!i->id.qp->srq : (p ? p->srq : 0));
	m.flow_control = p && p->flow_control ? 1 : 0;
	memcpy(m.pd, i->connect_pd, i->connect_len);
	if (plen)
		memcpy(m.pd + i->connect_len, p->private_data, plen);
	m.pd_len = (uint8_t)(i->connect_len + plen);
	n = rc_wire_encode(&m, i->txbuf, sizeof(i->txbuf));
	if (n < 0) {
		err = EINVAL;
		goto out;
	}
	i->txlen = (uint32_t)n;
	i->connect_len = 0;
	i->state = RC_CONNECTING;
	i->deadline = now_ms() + rc_timeout();
	if (connect(i->fd, &i->id.route.addr.dst_addr, sa_len(&i->id.route.addr.dst_addr)) == 0 ||
	    errno == EINPROGRESS) {
		id_watch(i, EPOLLOUT);
	} else if (errno == ECONNREFUSED) {
		conn_end(i, RDMA_CM_EVENT_REJECTED, RC_REJ_NO_LISTENER);
	} else {
		conn_end(i, RDMA_CM_EVENT_UNREACHABLE, -errno);
	}
	chan_arm(i->ch);
out:
	pthread_mutex_unlock(&rc_lock);
	if (err)
		return rc_err(err);
	return id_complete(i);
}

RC_EXPORT int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *p)
{
	struct rc_id *i = to_id(id);
	struct rc_msg m;
	int err = 0;
	uint8_t plen;

	if (!id)
		return rc_err(EINVAL);
	pthread_mutex_lock(&rc_lock);
	plen = p && p->private_data ? p->private_data_len : 0;
	if (i->state != RC_REQ_RCVD || !param_ok(i, p) || plen > RC_PD_REP) {
		err = EINVAL;
		goto out;
	}
	if (!p || p->initiator_depth == RDMA_MAX_INIT_DEPTH)
		i->init_depth = i->init_depth < rc_dev.max_init ? i->init_depth : rc_dev.max_init;
	else
		i->init_depth = p->initiator_depth;
	if (!p || p->responder_resources == RDMA_MAX_RESP_RES)
		i->resp_res = i->resp_res < rc_dev.max_resp ? i->resp_res : rc_dev.max_resp;
	else
		i->resp_res = p->responder_resources;
	i->rnr_retry_count = p ? (p->rnr_retry_count > 7 ? 7 : p->rnr_retry_count) : 7;
	err = qp_connect(i);
	if (err)
		goto out;
	local_conn(i, &m, RC_MSG_REP, i->id.qp ? i->id.qp->qp_num : (p ? p->qp_num : 0),
		   i->id.qp ? !!i->id.qp->srq : (p ? p->srq : 0));
	m.flow_control = p && p->flow_control ? 1 : 0;
	if (plen)
		memcpy(m.pd, p->private_data, plen);
	m.pd_len = plen;
	err = -id_send(i, &m);
	if (err) {
		/* the active side is gone: this connection is over */
		conn_end(i, RDMA_CM_EVENT_CONNECT_ERROR, -err);
		goto out;
	}
	i->state = RC_REP_SENT;
	i->deadline = now_ms() + rc_timeout();
	chan_arm(i->ch);
out:
	pthread_mutex_unlock(&rc_lock);
	if (err)
		return rc_err(err);
	return id_complete(i);
}

static int reject(struct rdma_cm_id *id, const void *pd, uint8_t len, uint32_t reason)
{
	struct rc_id *i = to_id(id);
	struct rc_msg m;
	int err = 0;

	if (!id)
		return rc_err(EINVAL);
	pthread_mutex_lock(&rc_lock);
	if ((i->state != RC_REQ_RCVD && i->state != RC_REP_RCVD) || (pd && len > RC_PD_REJ)) {
		err = EINVAL;
	} else {
		memset(&m, 0, sizeof(m));
		m.type = RC_MSG_REJ;
		m.reason = reason;
		if (pd && len) {
			memcpy(m.pd, pd, len);
			m.pd_len = len;
		}
		id_send(i, &m);
		id_close_fd(i);
		i->state = RC_CLOSED;
	}
	pthread_mutex_unlock(&rc_lock);
	return err ? rc_err(err) : 0;
}

RC_EXPORT int rdma_reject(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len)
{
	return reject(id, private_data, private_data_len, RC_REJ_CONSUMER);
}

RC_EXPORT int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data,
			      uint8_t private_data_len)
{
	return reject(id, private_data, private_data_len, RC_REJ_VENDOR);
}

RC_EXPORT int rdma_establish(struct rdma_cm_id *id)
{
	struct rc_id *i = to_id(id);
	int err = 0;

	if (!id)
		return rc_err(EINVAL);
	pthread_mutex_lock(&rc_lock);
	if (i->id.qp || i->state != RC_REP_RCVD) {
		err = EINVAL;
	} else {
		err = -id_send(i, &(struct rc_msg){ .type = RC_MSG_RTU });
		if (err)
			conn_end(i, RDMA_CM_EVENT_CONNECT_ERROR, -err);
		else
			i->state = RC_CONNECTED;
	}
	pthread_mutex_unlock(&rc_lock);
	return err ? rc_err(err) : 0;
}

RC_EXPORT int rdma_disconnect(struct rdma_cm_id *id)
{
	struct rc_id *i = to_id(id);
	bool wait = false;
	int err = 0;

	if (!id)
		return rc_err(EINVAL);
	pthread_mutex_lock(&rc_lock);
	if (!i->id.verbs) {
		err = EINVAL;
		goto out;
	}
	switch (i->state) {
	case RC_CONNECTED:
	case RC_REP_SENT:
	case RC_REP_RCVD:
		qp_to_err(i);
		send_simple(i, RC_MSG_DREQ, 0);
		/* the kernel CM reports DISCONNECTED to the side that asked too */
		conn_end(i, RDMA_CM_EVENT_DISCONNECTED, 0);
		wait = true;
		break;
	case RC_CONNECTING:
	case RC_REQ_SENT:
		qp_to_err(i);
		send_simple(i, RC_MSG_DREQ, 0);
		id_close_fd(i);
		i->state = RC_CLOSED;
		break;
	case RC_REQ_RCVD:
		send_simple(i, RC_MSG_REJ, RC_REJ_CONSUMER);
		id_close_fd(i);
		i->state = RC_CLOSED;
		break;
	case RC_CLOSED:
		qp_to_err(i);
		break;      /* the peer ended it first: nothing more to say */
	default:
		err = EINVAL;
	}
out:
	pthread_mutex_unlock(&rc_lock);
	if (err)
		return rc_err(err);
	return wait ? id_complete(i) : 0;
}

RC_EXPORT int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
	struct rc_id *l = to_id(listen);
	struct rdma_cm_event *ev;
	int ret = 0;

	if (!listen || !id || !l->sync)
		return rc_err(EINVAL);
	if (listen->event) {
		rdma_ack_cm_event(listen->event);
		listen->event = NULL;
	}
	if (rdma_get_cm_event(listen->channel, &ev))
		return -1;
	if (ev->event == RDMA_CM_EVENT_REJECTED)
		ret = rc_err(ECONNREFUSED);
	else if (ev->status)
		ret = rc_err(ev->status < 0 ? -ev->status : ev->status);
	else if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST)
		ret = rc_err(EINVAL);
	if (!ret && l->ep_attr) {
		struct ibv_qp_init_attr a = *l->ep_attr;

		ret = rdma_create_qp(ev->id, listen->pd, &a);
	}
	if (ret) {
		listen->event = ev;
		return ret;
	}
	*id = ev->id;
	ev->id->event = ev;
	return 0;
}

/* --------------------------------------------------------------- QPs */

static void destroy_cqs(struct rdma_cm_id *id)
{
	if (id->recv_cq) {
		ibv_destroy_cq(id->recv_cq);
		if (id->send_cq && id->send_cq != id->recv_cq)
			ibv_destroy_cq(id->send_cq);
	} else if (id->send_cq) {
		ibv_destroy_cq(id->send_cq);
	}
	id->recv_cq = id->send_cq = NULL;
	if (id->recv_cq_channel) {
		ibv_destroy_comp_channel(id->recv_cq_channel);
		if (id->send_cq_channel && id->send_cq_channel != id->recv_cq_channel)
			ibv_destroy_comp_channel(id->send_cq_channel);
	} else if (id->send_cq_channel) {
		ibv_destroy_comp_channel(id->send_cq_channel);
	}
	id->recv_cq_channel = id->send_cq_channel = NULL;
}

/* CQs (with completion channels) for the queues the caller gave none. */
static int create_cqs(struct rdma_cm_id *id, uint32_t send_size, uint32_t recv_size)
{
	if (recv_size) {
		id->recv_cq_channel = ibv_create_comp_channel(id->verbs);
		if (!id->recv_cq_channel)
			goto err;
		id->recv_cq = ibv_create_cq(id->verbs, (int)recv_size, id, id->recv_cq_channel, 0);
		if (!id->recv_cq)
			goto err;
	}
	if (send_size) {
		id->send_cq_channel = ibv_create_comp_channel(id->verbs);
		if (!id->send_cq_channel)
			goto err;
		id->send_cq = ibv_create_cq(id->verbs, (int)send_size, id, id->send_cq_channel, 0);
		if (!id->send_cq)
			goto err;
	}
	return 0;
err: {
	int e = errno;

	destroy_cqs(id);
	errno = e ? e : ENOMEM;
	return -1;
}
}

RC_EXPORT int rdma_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *attr)
{
	struct rc_id *i = to_id(id);
	struct ibv_qp *qp;
	int ret;

	if (!id || !attr || id->qp || !id->verbs)
		return rc_err(EINVAL);
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
		attr->pd = id->pd;
	} else if (attr->pd->context != id->verbs) {
		return rc_err(EINVAL);
	}
	if ((id->recv_cq && attr->recv_cq && id->recv_cq != attr->recv_cq) ||
	    (id->send_cq && attr->send_cq && id->send_cq != attr->send_cq))
		return rc_err(EINVAL);
	if (create_cqs(id, attr->send_cq || id->send_cq ? 0 : attr->cap.max_send_wr,
		       attr->recv_cq || id->recv_cq ? 0 : attr->cap.max_recv_wr))
		return -1;
	if (!attr->send_cq)
		attr->send_cq = id->send_cq;
	if (!attr->recv_cq)
		attr->recv_cq = id->recv_cq;
	if (id->srq && !attr->srq)
		attr->srq = id->srq;
	qp = ibv_create_qp_ex(id->verbs, attr);
	if (!qp)
		goto err;
	pthread_mutex_lock(&rc_lock);
	{
		struct ibv_qp_attr a;
		int mask;

		a.qp_state = IBV_QPS_INIT;
		init_qp_attr(i, &a, &mask);
		ret = ibv_modify_qp(qp, &a, mask);
	}
	pthread_mutex_unlock(&rc_lock);
	if (ret) {
		ibv_destroy_qp(qp);
		errno = ret;
		goto err;
	}
	id->pd = qp->pd;
	id->qp = qp;
	return 0;
err: {
	int e = errno;

	destroy_cqs(id);
	return rc_err(e ? e : ENOMEM);
}
}

RC_EXPORT int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd,
			     struct ibv_qp_init_attr *qp_init_attr)
{
	struct ibv_qp_init_attr_ex a;
	int ret;

	if (!id || !qp_init_attr)
		return rc_err(EINVAL);
	memset(&a, 0, sizeof(a));
	memcpy(&a, qp_init_attr, sizeof(*qp_init_attr));
	a.comp_mask = IBV_QP_INIT_ATTR_PD;
	a.pd = pd ? pd : id->pd;
	ret = rdma_create_qp_ex(id, &a);
	memcpy(qp_init_attr, &a, sizeof(*qp_init_attr));
	return ret;
}

RC_EXPORT void rdma_destroy_qp(struct rdma_cm_id *id)
{
	if (!id)
		return;
	if (id->qp)
		ibv_destroy_qp(id->qp);
	id->qp = NULL;
	destroy_cqs(id);
}

RC_EXPORT int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr,
				int *qp_attr_mask)
{
	int ret;

	if (!id || !qp_attr || !qp_attr_mask)
		return rc_err(EINVAL);
	pthread_mutex_lock(&rc_lock);
	ret = init_qp_attr(to_id(id), qp_attr, qp_attr_mask);
	pthread_mutex_unlock(&rc_lock);
	return ret ? rc_err(ret) : 0;
}

/* ------------------------------------------------------------ the rest */

RC_EXPORT int rdma_set_option(struct rdma_cm_id *id, int level, int optname, void *optval,
			      size_t optlen)
{
	struct rc_id *i = to_id(id);
	int err = 0;

	if (!id || !optval)
		return rc_err(EINVAL);
	pthread_mutex_lock(&rc_lock);
	if (level == RDMA_OPTION_ID) {
		switch (optname) {
		case RDMA_OPTION_ID_TOS:
			if (optlen != sizeof(uint8_t))
				err = EINVAL;
			else
				i->tos = *(uint8_t *)optval;
			sock_tos(i->fd, i->id.route.addr.src_addr.sa_family, i->tos);
			break;
		case RDMA_OPTION_ID_REUSEADDR:
			/* listeners reuse their port already (id_socket) */
			err = optlen != sizeof(int) ? EINVAL : 0;
			break;
		case RDMA_OPTION_ID_AFONLY:
			if (optlen != sizeof(int) || i->state != RC_IDLE)
				err = EINVAL;
			else
				i->afonly = *(int *)optval ? 1 : 0;
			break;
		case RDMA_OPTION_ID_ACK_TIMEOUT:
			if (optlen != sizeof(uint8_t) || *(uint8_t *)optval > 31) {
				err = EINVAL;
			} else {
				i->ack_timeout = *(uint8_t *)optval;
				i->ack_timeout_set = true;
			}
			break;
		default:
			err = ENOSYS;
		}
	} else if (level == RDMA_OPTION_IB && optname == RDMA_OPTION_IB_PATH) {
		err = EOPNOTSUPP;   /* no IB subnet administrator: routes are IP's */
	} else {
		err = ENOSYS;
	}
	pthread_mutex_unlock(&rc_lock);
	return err ? rc_err(err) : 0;
}

RC_EXPORT int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)
{
	struct rc_id *i = to_id(id);
	struct rc_chan *nc;
	int ret;

	if (!id || (i->sync && !channel))
		return rc_err(EINVAL);
	pthread_mutex_lock(&rc_lock);
	nc = channel ? to_chan(channel) : chan_new();
	ret = nc ? migrate(i, nc, !channel) : -1;
	pthread_mutex_unlock(&rc_lock);
	return ret;
}

/* Move one id (and what hangs on it) from its channel to @nc. */
static void move_one(struct rc_id *i, struct rc_chan *nc)
{
	uint32_t ev = i->ep_events;

	id_watch(i, 0);
	chan_unlink(i);
	chan_link(nc, i);
	id_watch(i, ev);
}

static int migrate(struct rc_id *i, struct rc_chan *nc, bool sync)
{
	struct rc_chan *oc = i->ch;
	struct rc_evt *moved = NULL, **mt = &moved, **pp, *e, *last = NULL, *next;
	struct rc_id *h, *hnext;
	bool was_sync = i->sync;

	if (!oc)
		return rc_err(EINVAL);
	if (oc == nc) {
		i->sync = sync;
		return 0;
	}
	/* its queued events (and the new ids of its CONNECT_REQUESTs) go along */
	for (pp = &oc->head; (e = *pp);) {
		if (e->id != i && e->listen != i) {
			last = e;
			pp = &e->next;
			continue;
		}
		*pp = e->next;
		e->next = NULL;
		*mt = e;
		mt = &e->next;
		if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST && e->id != i && e->id->ch == oc)
			move_one(e->id, nc);
	}
	oc->tail = last;
	if (!oc->head && moved)
		efd_clear(oc->efd);
	if (i->state == RC_LISTEN)
		for (h = oc->ids; h; h = hnext) {
			hnext = h->cnext;
			if (h->state == RC_HIDDEN && h->listener == i)
				move_one(h, nc);
		}
	if (was_sync && i->id.event) {
		evt_free((struct rc_evt *)i->id.event);
		i->id.event = NULL;
	}
	if (was_sync)
		oc->dead = true;    /* its private channel */
	move_one(i, nc);
	i->sync = sync;
	for (e = moved; e; e = next) {
		next = e->next;
		chan_push(nc, e);
	}
	if (!chan_reap(oc))
		chan_arm(oc);
	chan_arm(nc);
	return 0;
}

RC_EXPORT __be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	return id ? sa_port(&id->route.addr.src_addr) : 0;
}

RC_EXPORT __be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	return id ? sa_port(&id->route.addr.dst_addr) : 0;
}

RC_EXPORT struct ibv_context **rdma_get_devices(int *num_devices)
{
	struct ibv_context **l;
	int err;

	pthread_mutex_lock(&rc_lock);
	err = dev_get();
	pthread_mutex_unlock(&rc_lock);
	if (err) {
		errno = err;
		return NULL;
	}
	l = calloc(2, sizeof(*l));
	if (!l) {
		errno = ENOMEM;
		return NULL;
	}
	l[0] = rc_dev.verbs;
	if (num_devices)
		*num_devices = 1;
	return l;
}

RC_EXPORT void rdma_free_devices(struct ibv_context **list)
{
	free(list);
}

/* rdma_notify tells the CM that the QP saw its first packet, so that a lost
 * RTU cannot hold the connection: RTU travels over TCP here and is not lost. */
RC_EXPORT int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	(void)event;
	return id ? 0 : rc_err(EINVAL);
}

/* ECE (vendor options): kept as librdmacm keeps them; roshm0 has none to
 * offer, so a peer's are never seen (vendor_id 0, as from a device without). */
RC_EXPORT int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	if (!id || id->qp || !ece || !ece->vendor_id || ece->comp_mask)
		return rc_err(EINVAL);
	pthread_mutex_lock(&rc_lock);
	to_id(id)->local_ece = *ece;
	pthread_mutex_unlock(&rc_lock);
	return 0;
}

RC_EXPORT int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	if (!id || id->qp || !ece)
		return rc_err(EINVAL);
	memset(ece, 0, sizeof(*ece));
	return 0;
}

/* ---------------------------------------------------- endpoints (sync) */

RC_EXPORT void rdma_destroy_ep(struct rdma_cm_id *id);

RC_EXPORT int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res, struct ibv_pd *pd,
		   struct ibv_qp_init_attr *qp_init_attr)
{
	struct rdma_cm_id *cm;
	struct rc_id *i;
	int ret;

	if (!id || !res)
		return rc_err(EINVAL);
	if (res->ai_qp_type && res->ai_qp_type != IBV_QPT_RC)
		return rc_err(EOPNOTSUPP);
	ret = rdma_create_id(NULL, &cm, NULL, (enum rdma_port_space)res->ai_port_space);
	if (ret)
		return ret;
	i = to_id(cm);
	if (res->ai_flags & RAI_PASSIVE) {
		if (!res->ai_src_addr) {
			ret = rc_err(EINVAL);
			goto err;
		}
		ret = rdma_bind_addr(cm, res->ai_src_addr);
		if (ret)
			goto err;
		if (pd)
			cm->pd = pd;
		if (qp_init_attr) {
			i->ep_attr = malloc(sizeof(*i->ep_attr));
			if (!i->ep_attr) {
				ret = rc_err(ENOMEM);
				goto err;
			}
			*i->ep_attr = *qp_init_attr;
			i->ep_attr->qp_type = IBV_QPT_RC;
		}
		*id = cm;
		return 0;
	}
	ret = rdma_resolve_addr(cm, res->ai_src_addr, res->ai_dst_addr, 2000);
	if (ret)
		goto err;
	if (res->ai_route_len) {
		ret = rdma_set_option(cm, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, res->ai_route,
				      res->ai_route_len);
		if (ret)
			goto err;
	} else {
		ret = rdma_resolve_route(cm, 2000);
		if (ret)
			goto err;
	}
	if (qp_init_attr) {
		qp_init_attr->qp_type = IBV_QPT_RC;
		ret = rdma_create_qp(cm, pd, qp_init_attr);
		if (ret)
			goto err;
	}
	if (res->ai_connect_len) {
		if (res->ai_connect_len > RC_PD_REQ || !res->ai_connect) {
			ret = rc_err(EINVAL);
			goto err;
		}
		memcpy(i->connect_pd, res->ai_connect, res->ai_connect_len);
		i->connect_len = (uint8_t)res->ai_connect_len;
	}
	*id = cm;
	return 0;
err: {
	int e = errno;

	rdma_destroy_ep(cm);
	errno = e;
	return ret;
}
}

RC_EXPORT void rdma_destroy_ep(struct rdma_cm_id *id)
{
	if (!id)
		return;
	if (id->qp)
		rdma_destroy_qp(id);
	if (id->srq) {
		ibv_destroy_srq(id->srq);
		id->srq = NULL;
	}
	rdma_destroy_id(id);
}
