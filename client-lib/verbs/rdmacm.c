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
#include <sys/random.h>

#include "rdmacm_int.h"

int rc_err(int e)
{
	errno = e;
	return -1;
}

pthread_mutex_t rc_lock = PTHREAD_MUTEX_INITIALIZER;
struct rc_dev rc_dev;

/*
 * The QPNs our active ids named in their REQs. A REP that names one of
 * them comes from a peer that gives our own QP (or another of ours that is
 * connecting out) as its own: our QP would be looped back to us, and our
 * RDMA to "its" buffer land in our own MRs, since the address vector's GID
 * is the peer's word here (no path resolution). A loopback to a listener
 * of ours names the passive id's QP, never one of these.
 */
static struct rc_id *rc_active_head;

void rc_active_add(struct rc_id *i, uint32_t qpn)
{
	i->req_qpn = qpn;
	i->loop_qpn = 0;
	if (i->active_listed || !qpn)
		return;
	if (getrandom(&i->cookie, sizeof(i->cookie), 0) != sizeof(i->cookie) || !i->cookie)
		i->cookie = (((uint64_t)rc_new_psn() << 32) ^ rc_new_psn() ^ (uintptr_t)i) | 1;
	i->active_listed = true;
	i->aprev = NULL;
	i->anext = rc_active_head;
	if (rc_active_head)
		rc_active_head->aprev = i;
	rc_active_head = i;
}

void rc_active_del(struct rc_id *i)
{
	if (!i->active_listed)
		return;
	if (i->aprev)
		i->aprev->anext = i->anext;
	else
		rc_active_head = i->anext;
	if (i->anext)
		i->anext->aprev = i->aprev;
	i->active_listed = false;
}

bool rc_active_qpn(uint32_t qpn)
{
	for (const struct rc_id *i = rc_active_head; i; i = i->anext)
		if (i->req_qpn == qpn)
			return true;
	return false;
}

/* @a and @b the same endpoint (a v4-mapped address as its IPv4 one)? */
static bool sa_same(struct sockaddr_storage *a, struct sockaddr_storage *b)
{
	rc_sa_unmap(a);
	rc_sa_unmap(b);
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;

		return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	if (a->ss_family == AF_INET6) {
		const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;

		return x->sin6_port == y->sin6_port && x->sin6_scope_id == y->sin6_scope_id &&
		       !memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr));
	}
	return false;
}

/* The active id of ours that named @qpn in its REQ and whose TCP
 * connection is the one on @fd (accepted by a listener of ours): both ends
 * the same, as one network namespace has one connection of a pair of
 * endpoints (one end alone another socket could bind with SO_REUSEADDR). */
static struct rc_id *active_loop(uint32_t qpn, int fd)
{
	struct sockaddr_storage fpeer, fself;
	socklen_t pl = sizeof(fpeer), sl = sizeof(fself);

	if (getpeername(fd, (struct sockaddr *)&fpeer, &pl) ||
	    getsockname(fd, (struct sockaddr *)&fself, &sl))
		return NULL;
	for (struct rc_id *x = rc_active_head; x; x = x->anext) {
		struct sockaddr_storage xpeer, xself, a = fpeer, b = fself;
		socklen_t xl = sizeof(xself), yl = sizeof(xpeer);

		if ((x->req_qpn & 0xffffff) == qpn && x->fd >= 0 &&
		    !getsockname(x->fd, (struct sockaddr *)&xself, &xl) &&
		    !getpeername(x->fd, (struct sockaddr *)&xpeer, &yl) &&
		    sa_same(&a, &xself) && sa_same(&b, &xpeer))
			return x;
	}
	return NULL;
}

/*
 * May the peer of @i name @m's QPN, in a REQ (@rep false) or a REP? Not one
 * of this process's QPs (any context's), unless it is our own loopback. A
 * QPN is unique in the tenant (its ring's name), so an honest peer
 * elsewhere, on our node or another, never names one of ours; a peer that
 * does would connect our QPs to each other: with our own GID in the address
 * vector (here the peer's word: no path resolution, where a NIC's CM takes
 * it from the packet's GRH), our QP may use a ring of our own client (rkey.c,
 * av_is_ours) and its RDMA lands in our own MRs. Review found the way: a
 * REQ to our listener naming the QP our active id connects to the peer
 * with, then a REP to that id naming the passive QP we accepted with. Our
 * own loopback is a REQ that our active id of that QPN sent over this very
 * connection (@i then remembers that id), and a REP to that id naming the
 * QP our passive id answered it with (rc_loop_rep).
 */
bool rc_peer_claim_ok(struct rc_id *i, const struct rc_msg *m, bool rep)
{
	uint32_t qpn = m->qpn & 0xffffff, dest;
	struct rc_id *x;

	if (!roshm_verbs_qpn_ours(qpn, &dest))
		return true;
	if (rep)
		return i->loop_qpn && (i->loop_qpn & 0xffffff) == qpn;
	x = active_loop(qpn, i->fd);
	if (!x)
		return false;
	i->loop_cookie = x->cookie;
	return true;
}

/* May @i connect a QP to the QPN of its peer's REQ or REP: not one of this
 * process's, or our own loopback (a passive id that took our active id's
 * REQ; an active id whose REP named the QP our passive id answered with). */
bool rc_loop_ok(const struct rc_id *i)
{
	uint32_t qpn = i->peer.qpn & 0xffffff, dest;

	if (!roshm_verbs_qpn_ours(qpn, &dest))
		return true;
	return i->loop_cookie || (i->loop_qpn && (i->loop_qpn & 0xffffff) == qpn);
}

/* Passive id @i answers with a REP naming @qpn: when its REQ was our own
 * active id's (a loopback), that id may take a REP naming @qpn. */
void rc_loop_rep(const struct rc_id *i, uint32_t qpn)
{
	if (!i->loop_cookie)
		return;
	for (struct rc_id *x = rc_active_head; x; x = x->anext)
		if (x->cookie == i->loop_cookie)
			x->loop_qpn = qpn & 0xffffff;
}

uint64_t rc_now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* ROSHM_CM_TIMEOUT_MS: how long a connection may wait for its peer's next
 * CM message (docs/verbs-compat.md). */
uint64_t rc_timeout(void)
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

socklen_t rc_sa_len(const struct sockaddr *sa)
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

uint16_t rc_sa_port(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_port;
	if (sa->sa_family == AF_INET6)
		return ((const struct sockaddr_in6 *)sa)->sin6_port;
	return 0;
}

bool rc_sa_any(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_addr.s_addr == htonl(INADDR_ANY);
	return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)sa)->sin6_addr);
}

/* 127/8, ::1 or ::ffff:127/8: an address no RDMA port has */
bool rc_sa_loopback(const struct sockaddr *sa)
{
	const struct in6_addr *a6;

	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
	return IN6_IS_ADDR_LOOPBACK(a6) || (IN6_IS_ADDR_V4MAPPED(a6) && a6->s6_addr[12] == 127);
}

/* An IPv4 peer of a dual-stack socket shows as ::ffff:a.b.c.d: report it as
 * the IPv4 address it is, as the kernel CM does. */
void rc_sa_unmap(struct sockaddr_storage *ss)
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
bool rc_sa_mc(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return IN_MULTICAST(ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr));
	return sa->sa_family == AF_INET6 &&
	       IN6_IS_ADDR_MULTICAST(&((const struct sockaddr_in6 *)sa)->sin6_addr);
}

void rc_sa_gid(const struct sockaddr *sa, union ibv_gid *g)
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
int rc_dev_get(void)
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

/* The device's XRC domain, opened on first need (lock held), as librdmacm
 * gives the XRC QPs and SRQs of its ids one per device: NULL with errno. */
struct ibv_xrcd *rc_dev_xrcd(void)
{
	struct ibv_xrcd_init_attr a = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.fd = -1,
		.oflags = O_CREAT,
	};

	if (!rc_dev.xrcd && rc_dev.verbs)
		rc_dev.xrcd = ibv_open_xrcd(rc_dev.verbs, &a);
	else if (!rc_dev.verbs)
		errno = ENODEV;
	return rc_dev.xrcd;
}

/* The GID index whose GID is @src's RoCE GID, else 0 (an IB-style table). */
static int sgid_for(const struct sockaddr *src)
{
	union ibv_gid want, g;

	rc_sa_gid(src, &want);
	for (int i = 0; i < rc_dev.gid_len; i++)
		if (!ibv_query_gid(rc_dev.verbs, 1, i, &g) && !memcmp(&g, &want, sizeof(g)))
			return i;
	return 0;
}

/* Give @i the device (lock held): 0 or an errno value. */
int rc_id_attach(struct rc_id *i)
{
	int err = rc_dev_get();

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

void rc_chan_free(struct rc_chan *c)
{
	if (c->ch.fd >= 0)
		close(c->ch.fd);
	if (c->efd >= 0)
		close(c->efd);
	if (c->tfd >= 0)
		close(c->tfd);
	free(c);
}

struct rc_chan *rc_chan_new(void)
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

	rc_chan_free(c);
	errno = e;
	return NULL;
}
}

struct rc_chan *rc_to_chan(struct rdma_event_channel *ch)
{
	return (struct rc_chan *)ch;
}

struct rc_id *rc_to_id(struct rdma_cm_id *id)
{
	return (struct rc_id *)id;
}

void rc_chan_link(struct rc_chan *c, struct rc_id *i)
{
	i->ch = c;
	i->id.channel = &c->ch;
	i->cprev = NULL;
	i->cnext = c->ids;
	if (c->ids)
		c->ids->cprev = i;
	c->ids = i;
}

void rc_chan_unlink(struct rc_id *i)
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
bool rc_chan_reap(struct rc_chan *c)
{
	if (!c->dead || c->ids)
		return false;
	rc_chan_free(c);
	return true;
}

/* The timerfd fires at the earliest deadline of the channel's ids. */
void rc_chan_arm(struct rc_chan *c)
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


/* The queue's eventfd is readable exactly while events wait. */
static void efd_set(int fd)
{
	uint64_t one = 1;
	ssize_t r = write(fd, &one, sizeof(one));   /* at most 1: never overflows */

	(void)r;
}

void rc_efd_clear(int fd)
{
	uint64_t v;
	ssize_t r = read(fd, &v, sizeof(v));        /* EAGAIN when it was clear */

	(void)r;
}

void rc_chan_push(struct rc_chan *c, struct rc_evt *e)
{
	if (!c || c->dead) {
		rc_evt_free(e);
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

struct rc_evt *rc_chan_pop(struct rc_chan *c)
{
	struct rc_evt *e = c->head;

	if (!e)
		return NULL;
	c->head = e->next;
	if (!c->head) {
		c->tail = NULL;
		rc_efd_clear(c->efd);
	}
	e->next = NULL;
	return e;
}

/* ------------------------------------------------------------------ ids */

void rc_id_put(struct rc_id *i)
{
	if (--i->refs)
		return;
	free(i->id.route.path_rec);
	free(i->ep_attr);
	free(i);
}

void rc_evt_free(struct rc_evt *e)
{
	if (e->counted && e->listen)
		e->listen->nqueued--;
	if (e->id)
		rc_id_put(e->id);
	if (e->listen)
		rc_id_put(e->listen);
	free(e);
}

struct rc_id *rc_id_new(struct rc_chan *c, void *context, enum rdma_port_space ps,
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
	rc_chan_link(c, i);
	return i;
}

void rc_id_watch(struct rc_id *i, uint32_t events)
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
void rc_id_close_fd(struct rc_id *i)
{
	rc_id_watch(i, 0);
	if (i->fd >= 0)
		close(i->fd);
	i->fd = -1;
	i->rlen = 0;
	i->txlen = 0;
	i->deadline = 0;
}

struct rc_evt *rc_evt_new(struct rc_id *i, enum rdma_cm_event_type type, int status)
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
void rc_queue_evt(struct rc_id *i, enum rdma_cm_event_type type, int status)
{
	struct rc_evt *e = rc_evt_new(i, type, status);

	if (e)
		rc_chan_push(i->ch, e);
}

/* The conn_param a peer's message gives an event, from the receiver's side
 * (its responder resources are the sender's initiator depth), with the
 * private data zero-padded to the message's full size as rdma_cm reports. */
void rc_evt_conn(struct rc_evt *e, const struct rc_msg *m, uint8_t report_len)
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

int rc_id_send(struct rc_id *i, const struct rc_msg *m)
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

void rc_send_simple(struct rc_id *i, uint8_t type, uint32_t reason)
{
	struct rc_msg m;

	memset(&m, 0, sizeof(m));
	m.type = type;
	m.reason = reason;
	rc_id_send(i, &m);
}

void rc_qp_to_err(struct rc_id *i)
{
	struct ibv_qp_attr a;

	if (!i->id.qp)
		return;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	ibv_modify_qp(i->id.qp, &a, IBV_QP_STATE);
}

/* The connection failed or ended: no more CM traffic on it. */
void rc_conn_end(struct rc_id *i, enum rdma_cm_event_type type, int status)
{
	rc_id_close_fd(i);
	i->state = RC_CLOSED;
	/* rdma_cm leaves a UD QP alone when its SIDR exchange fails */
	if (type != RDMA_CM_EVENT_DISCONNECTED && i->id.qp_type != IBV_QPT_UD)
		rc_qp_to_err(i);
	rc_queue_evt(i, type, status);
}

/* Nobody listens on the peer's port: IB CM's answer for an unknown service
 * (SIDR's, for a UD id). */
void rc_refused(struct rc_id *i)
{
	if (i->id.qp_type == IBV_QPT_UD)
		rc_conn_end(i, RDMA_CM_EVENT_UNREACHABLE, RC_SIDR_UNSUPPORTED);
	else
		rc_conn_end(i, RDMA_CM_EVENT_REJECTED, RC_REJ_NO_LISTENER);
}


/* A hidden connection goes away unseen. */
void rc_hidden_drop(struct rc_id *i)
{
	if (i->listener)
		i->listener->npending--;
	i->listener = NULL;
	rc_id_destroy(i);
}

/* ---------------------------------------------------------- QP attributes */

/* A UD id's QP, as rdma_cm's: INIT with the port space's Q_Key, then RTR
 * and RTS with nothing from a peer (rdma_create_qp moves it at once). */
static int ud_qp_attr(struct rc_id *i, enum ibv_qp_state want, struct ibv_qp_attr *a, int *mask)
{
	a->qp_state = want;
	switch (want) {
	case IBV_QPS_INIT:
		a->pkey_index = 0;
		a->port_num = i->id.port_num ? i->id.port_num : 1;
		a->qkey = RDMA_UDP_QKEY;
		*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
		return 0;
	case IBV_QPS_RTR:
		*mask = IBV_QP_STATE;
		return 0;
	case IBV_QPS_RTS:
		a->sq_psn = 0;
		*mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
		return 0;
	default:
		return EINVAL;
	}
}

int rc_init_qp_attr(struct rc_id *i, struct ibv_qp_attr *a, int *mask)
{
	enum ibv_qp_state want = a->qp_state;
	bool uc = (i->id.qp ? i->id.qp->qp_type : i->id.qp_type) == IBV_QPT_UC;

	memset(a, 0, sizeof(*a));
	if (i->id.qp_type == IBV_QPT_UD)
		return ud_qp_attr(i, want, a, mask);
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
		/* the peer's QPN is one of ours now, though it was not when its
		 * REQ or REP came (a QP made since drew it): our own loopback
		 * only, as there (rc_peer_claim_ok) */
		if (!rc_loop_ok(i))
			return EPROTO;
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
		*mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		if (!uc) /* a UC QP has no responder resources (ibv_modify_qp refuses them) */
			*mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
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
		*mask = uc ? IBV_QP_STATE | IBV_QP_SQ_PSN
			   : IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
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
	ret = rc_init_qp_attr(i, &a, &mask);
	return ret ? ret : ibv_modify_qp(i->id.qp, &a, mask);
}

/* INIT (again, as librdmacm does), RTR and RTS with the peer's numbers. */
int rc_qp_connect(struct rc_id *i)
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

uint32_t rc_new_psn(void)
{
	uint32_t v = 0;

	if (getrandom(&v, sizeof(v), 0) != sizeof(v))
		v = (uint32_t)rc_now_ms() * 2654435761u;
	return v & 0xffffff;
}

/* Our side of a REQ or REP (SIDR_REQ, SIDR_REP: what of it applies). */
void rc_local_conn(struct rc_id *i, struct rc_msg *m, uint8_t type, uint32_t qpn, uint8_t srq)
{
	bool sidr = type == RC_MSG_SIDR_REQ || type == RC_MSG_SIDR_REP;

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
	/* XRC: the requester's XRC_SEND QP, the responder's XRC_RECV QP */
	if (sidr)
		m->qp_type = RC_WIRE_QPT_UD;
	else if (type == RC_MSG_REQ && i->id.qp_type == IBV_QPT_XRC_SEND)
		m->qp_type = RC_WIRE_QPT_XRC_SEND;
	else if (type == RC_MSG_REP && i->id.qp_type == IBV_QPT_XRC_RECV)
		m->qp_type = RC_WIRE_QPT_XRC_RECV;
	else
		m->qp_type = RC_WIRE_QPT_RC;
	if (sidr) {
		m->psn = 0;
		m->qkey = type == RC_MSG_SIDR_REP ? RDMA_UDP_QKEY : 0;
	}
}

/* What a SIDR REP tells the active side (rdma_ud_param): the address of
 * the passive side's node, its QPN and Q_Key, and its private data
 * zero-padded to SIDR REP's size. */
void rc_evt_ud(struct rc_evt *e, struct rc_id *i, const struct rc_msg *m)
{
	struct rdma_ud_param *u = &e->ev.param.ud;

	memset(e->pd, 0, sizeof(e->pd));
	memcpy(e->pd, m->pd, m->pd_len);
	u->private_data = e->pd;
	u->private_data_len = RC_PD_SIDR_REP;
	u->ah_attr.dlid = m->lid;
	u->ah_attr.port_num = i->id.port_num ? i->id.port_num : 1;
	u->ah_attr.is_global = 1;
	memcpy(u->ah_attr.grh.dgid.raw, m->gid, 16);
	u->ah_attr.grh.sgid_index = (uint8_t)i->sgid_index;
	u->ah_attr.grh.hop_limit = 64;
	u->ah_attr.grh.traffic_class = i->tos;
	u->qp_num = m->qpn;
	u->qkey = m->qkey;
}
