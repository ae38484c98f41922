// SPDX-License-Identifier: MIT
/*
 * libroshm-verbs' RDMA CM (rdmacm.c): the rdma_cm_id calls, from
 * rdma_create_id to rdma_destroy_id.
 */
#define _GNU_SOURCE
#include "rdmacm_int.h"

/* ------------------------------------------------------------------ ids */

RC_EXPORT int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id,
			     void *context, enum rdma_port_space ps)
{
	struct rc_chan *c;
	struct rc_id *i;

	if (!id)
		return rc_err(EINVAL);
	/* RC over RDMA_PS_TCP / _IB, UD over RDMA_PS_UDP; IPoIB's port space
	 * needs IPoIB's Q_Key and multicast groups, which roshm0 lacks */
	if (ps != RDMA_PS_TCP && ps != RDMA_PS_IB && ps != RDMA_PS_UDP)
		return rc_err(ps == RDMA_PS_IPOIB ? EOPNOTSUPP : EINVAL);
	pthread_mutex_lock(&rc_lock);
	c = channel ? rc_to_chan(channel) : rc_chan_new();
	i = c ? rc_id_new(c, context, ps, ps == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC) : NULL;
	if (!i) {
		if (c && !channel)
			rc_chan_free(c);
		pthread_mutex_unlock(&rc_lock);
		return rc_err(ENOMEM);
	}
	i->sync = !channel;
	pthread_mutex_unlock(&rc_lock);
	*id = &i->id;
	return 0;
}

/* Everything of @i but its memory, which the last reference frees (lock held). */
void rc_id_destroy(struct rc_id *i)
{
	struct rc_chan *c = i->ch;

	if (i->destroyed)
		return;
	i->destroyed = true;
	rc_active_del(i);
	if (c)
		rc_chan_purge(c, i);
	/* the active side of a request nobody answered learns it now */
	if (i->state == RC_REQ_RCVD)
		rc_send_simple(i, RC_MSG_REJ, RC_REJ_CONSUMER);
	else if (i->state == RC_CONNECTED || i->state == RC_REP_SENT || i->state == RC_REP_RCVD ||
		 i->state == RC_REQ_SENT)
		rc_send_simple(i, RC_MSG_DREQ, 0);
	if (i->state == RC_LISTEN && c) {
		struct rc_id *next;

		for (struct rc_id *h = c->ids; h; h = next) {
			next = h->cnext;
			if (h->state == RC_HIDDEN && h->listener == i)
				rc_hidden_drop(h);
		}
	}
	if (i->listener)
		i->listener->npending--;
	i->listener = NULL;
	while (i->nmc)
		rc_mc_leave(i, i->nmc - 1);
	rc_id_close_fd(i);
	i->state = RC_CLOSED;
	rc_chan_unlink(i);
	if (c) {
		if (i->sync)
			c->dead = true;     /* its private channel */
		if (!rc_chan_reap(c))
			rc_chan_arm(c);
	}
	rc_id_put(i);
}

RC_EXPORT int rdma_destroy_id(struct rdma_cm_id *id)
{
	struct rc_id *i = rc_to_id(id);

	if (!id)
		return rc_err(EINVAL);
	pthread_mutex_lock(&rc_lock);
	if (i->id.event) {
		rc_evt_free((struct rc_evt *)i->id.event);
		i->id.event = NULL;
	}
	rc_id_destroy(i);
	pthread_mutex_unlock(&rc_lock);
	return 0;
}

/* RDMA_OPTION_ID_TOS marks the CM's own packets too */
void rc_sock_tos(int fd, int family, uint8_t tos)
{
	int v = tos;

	if (fd >= 0 && tos)
		setsockopt(fd, family == AF_INET6 ? IPPROTO_IPV6 : IPPROTO_IP,
			   family == AF_INET6 ? IPV6_TCLASS : IP_TOS, &v, sizeof(v));
}

int rc_id_socket(struct rc_id *i, int family)
{
	int one = 1, v6only = i->afonly > 0;
	int fd = rc_socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC);

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
	rc_sock_tos(fd, family, i->tos);
	return fd;
}

/* Bind @i's socket to @addr (lock held): 0 or an errno value. */
static int id_bind(struct rc_id *i, const struct sockaddr *addr)
{
	socklen_t len = rc_sa_len(addr);
	int fd, err;

	fd = rc_id_socket(i, addr->sa_family);
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
	struct rc_id *i = rc_to_id(id);
	int err;

	if (!id || !addr)
		return rc_err(EINVAL);
	if (!rc_sa_len(addr))
		return rc_err(addr->sa_family == AF_IB ? EAFNOSUPPORT : EINVAL);
	pthread_mutex_lock(&rc_lock);
	err = i->state != RC_IDLE ? EINVAL : id_bind(i, addr);
	/* an address of this host: the device is the id's now (a wildcard
	 * leaves it to the connections, as rdma_cm does, and so does a
	 * loopback address, which no RDMA port has: rdma_cm leaves id->verbs
	 * NULL there, and libfabric's verbs provider then takes the device's
	 * own addresses instead of 127.0.0.1 for its endpoints) */
	if (!err && !rc_sa_any(addr) && !rc_sa_loopback(addr)) {
		err = rc_id_attach(i);
		if (err) {
			rc_id_close_fd(i);
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
	socklen_t len = rc_sa_len(dst);
	int fd = rc_socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC), err = 0;

	if (fd < 0)
		return errno;
	memcpy(&d, dst, len);
	if (d.ss_family == AF_INET)
		((struct sockaddr_in *)&d)->sin_port = htons(9);
	else
		((struct sockaddr_in6 *)&d)->sin6_port = htons(9);
	len = sizeof(*src);
	if (connect(fd, (struct sockaddr *)&d, rc_sa_len(dst)) ||
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
	struct rc_id *i = rc_to_id(id);
	struct sockaddr_storage src;
	socklen_t dlen = rc_sa_len(dst_addr);
	int err = 0;

	(void)timeout_ms;  /* resolution is local and immediate */
	if (!id || !dlen)
		return rc_err(dst_addr && dst_addr->sa_family == AF_IB ? EAFNOSUPPORT : EINVAL);
	if (src_addr && (!rc_sa_len(src_addr) || src_addr->sa_family != dst_addr->sa_family))
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
	/* a group from a given address: that address's device (rdma_cm's
	 * too), with no route to the group needed */
	if (rc_sa_mc(dst_addr) && src_addr && !rc_sa_any(src_addr))
		memcpy(&src, src_addr, rc_sa_len(src_addr));
	else if (rc_sa_mc(dst_addr) && i->state == RC_BOUND && !rc_sa_any(&i->id.route.addr.src_addr))
		memcpy(&src, &i->id.route.addr.src_storage, sizeof(src));
	else
		err = route_src(dst_addr, &src);
	if (err)
		goto out;   /* no route: rdma_cm says so at once */
	if (i->state == RC_IDLE) {
		if (src_addr && !rc_sa_any(src_addr)) {
			memcpy(&src, src_addr, rc_sa_len(src_addr));
		} else if (src_addr && rc_sa_port(src_addr)) {
			if (src.ss_family == AF_INET)
				((struct sockaddr_in *)&src)->sin_port = rc_sa_port(src_addr);
			else
				((struct sockaddr_in6 *)&src)->sin6_port = rc_sa_port(src_addr);
		}
		err = id_bind(i, (struct sockaddr *)&src);
		if (err)
			goto out;
	} else {
		/* bound before, maybe to a wildcard: show the address in use */
		uint16_t port = rc_sa_port(&i->id.route.addr.src_addr);

		if (rc_sa_any(&i->id.route.addr.src_addr) && src.ss_family == i->id.route.addr.src_addr.sa_family) {
			memcpy(&i->id.route.addr.src_storage, &src, sizeof(src));
			if (src.ss_family == AF_INET)
				i->id.route.addr.src_sin.sin_port = port;
			else
				i->id.route.addr.src_sin6.sin6_port = port;
		}
	}
	memset(&i->id.route.addr.dst_storage, 0, sizeof(i->id.route.addr.dst_storage));
	memcpy(&i->id.route.addr.dst_storage, dst_addr, dlen);
	err = rc_id_attach(i);
	if (err) {
		/* no device behind the address: an event, as from rdma_cm */
		rc_queue_evt(i, RDMA_CM_EVENT_ADDR_ERROR, -err);
		err = 0;
		goto out;
	}
	rc_sa_gid(dst_addr, &i->id.route.addr.addr.ibaddr.dgid);
	i->state = RC_ADDR_RESOLVED;
	rc_queue_evt(i, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
out:
	pthread_mutex_unlock(&rc_lock);
	if (err)
		return rc_err(err);
	return rc_id_complete(i);
}

RC_EXPORT int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	struct rc_id *i = rc_to_id(id);
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
	rc_queue_evt(i, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
	pthread_mutex_unlock(&rc_lock);
	return rc_id_complete(i);
}

RC_EXPORT int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	struct rc_id *i = rc_to_id(id);
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
		rc_id_watch(i, EPOLLIN);
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
	struct rc_id *i = rc_to_id(id);
	struct rc_msg m;
	int n, err = 0;
	uint8_t plen;
	bool ud;

	if (!id)
		return rc_err(EINVAL);
	pthread_mutex_lock(&rc_lock);
	ud = i->id.qp_type == IBV_QPT_UD;
	plen = p && p->private_data ? p->private_data_len : 0;
	/* UD (SIDR): only the QPN and the private data count */
	if (i->state != RC_ROUTE_RESOLVED || (!ud && !param_ok(i, p)) ||
	    (unsigned)i->connect_len + plen > (ud ? RC_PD_SIDR_REQ : RC_PD_REQ)) {
		err = EINVAL;
		goto out;
	}
	i->init_depth = p && p->initiator_depth != RDMA_MAX_INIT_DEPTH ? p->initiator_depth : rc_dev.max_init;
	i->resp_res = p && p->responder_resources != RDMA_MAX_RESP_RES ? p->responder_resources : rc_dev.max_resp;
	i->retry_count = p ? (p->retry_count > 7 ? 7 : p->retry_count) : 7;
	i->rnr_retry_count = p ? (p->rnr_retry_count > 7 ? 7 : p->rnr_retry_count) : 7;
	i->psn = rc_new_psn();
	i->have_psn = true;
	rc_local_conn(i, &m, ud ? RC_MSG_SIDR_REQ : RC_MSG_REQ,
		      i->id.qp ? i->id.qp->qp_num : (p ? p->qp_num : 0),
		      ud ? 0 : i->id.qp ? !!i->id.qp->srq : (p ? p->srq : 0));
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
	if (!ud)
		rc_active_add(i, m.qpn);
	i->deadline = rc_now_ms() + rc_timeout();
	if (connect(i->fd, &i->id.route.addr.dst_addr, rc_sa_len(&i->id.route.addr.dst_addr)) == 0 ||
	    errno == EINPROGRESS) {
		rc_id_watch(i, EPOLLOUT);
	} else if (errno == ECONNREFUSED) {
		rc_refused(i);
	} else {
		rc_conn_end(i, RDMA_CM_EVENT_UNREACHABLE, -errno);
	}
	rc_chan_arm(i->ch);
out:
	pthread_mutex_unlock(&rc_lock);
	if (err)
		return rc_err(err);
	return rc_id_complete(i);
}

/*
 * A UD id's accept is IB CM's SIDR REP: the QPN (the id's QP's, else
 * conn_param's) and the port space's Q_Key; its QP was made ready by
 * rdma_create_qp. Nothing follows on the wire, no event comes, and a
 * synchronous id does not wait (lock held).
 */
static int accept_ud(struct rc_id *i, const struct rdma_conn_param *p, uint8_t plen)
{
	struct rc_msg m;

	if (i->state != RC_REQ_RCVD || (!i->id.qp && !p) || plen > RC_PD_SIDR_REP)
		return EINVAL;
	rc_local_conn(i, &m, RC_MSG_SIDR_REP, i->id.qp ? i->id.qp->qp_num : p->qp_num, 0);
	if (plen)
		memcpy(m.pd, p->private_data, plen);
	m.pd_len = plen;
	/* to an active side that left, the REP goes nowhere: no error, as
	 * with rdma_cm's SIDR */
	rc_id_send(i, &m);
	rc_id_close_fd(i);
	i->state = RC_CLOSED;
	return 0;
}

RC_EXPORT int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *p)
{
	struct rc_id *i = rc_to_id(id);
	struct rc_msg m;
	int err = 0;
	uint8_t plen;

	if (!id)
		return rc_err(EINVAL);
	pthread_mutex_lock(&rc_lock);
	plen = p && p->private_data ? p->private_data_len : 0;
	if (i->id.qp_type == IBV_QPT_UD) {
		err = accept_ud(i, p, plen);
		pthread_mutex_unlock(&rc_lock);
		return err ? rc_err(err) : 0;
	}
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
	err = rc_qp_connect(i);
	if (err)
		goto out;
	rc_local_conn(i, &m, RC_MSG_REP, i->id.qp ? i->id.qp->qp_num : (p ? p->qp_num : 0),
		   i->id.qp ? !!i->id.qp->srq : (p ? p->srq : 0));
	rc_loop_rep(i, m.qpn);   /* our own active id's REQ: its REP names this QP */
	m.flow_control = p && p->flow_control ? 1 : 0;
	if (plen)
		memcpy(m.pd, p->private_data, plen);
	m.pd_len = plen;
	err = -rc_id_send(i, &m);
	if (err) {
		/* the active side is gone: this connection is over */
		rc_conn_end(i, RDMA_CM_EVENT_CONNECT_ERROR, -err);
		goto out;
	}
	i->state = RC_REP_SENT;
	i->deadline = rc_now_ms() + rc_timeout();
	rc_chan_arm(i->ch);
out:
	pthread_mutex_unlock(&rc_lock);
	if (err)
		return rc_err(err);
	return rc_id_complete(i);
}

static int reject(struct rdma_cm_id *id, const void *pd, uint8_t len, uint32_t reason)
{
	struct rc_id *i = rc_to_id(id);
	struct rc_msg m;
	int err = 0;

	if (!id)
		return rc_err(EINVAL);
	pthread_mutex_lock(&rc_lock);
	if ((i->state != RC_REQ_RCVD && i->state != RC_REP_RCVD) ||
	    (pd && len > (i->id.qp_type == IBV_QPT_UD ? RC_PD_SIDR_REP : RC_PD_REJ))) {
		err = EINVAL;
	} else {
		memset(&m, 0, sizeof(m));
		m.type = RC_MSG_REJ;
		m.reason = reason;
		if (pd && len) {
			memcpy(m.pd, pd, len);
			m.pd_len = len;
		}
		rc_id_send(i, &m);
		rc_id_close_fd(i);
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
	struct rc_id *i = rc_to_id(id);
	int err = 0;

	if (!id)
		return rc_err(EINVAL);
	pthread_mutex_lock(&rc_lock);
	if (i->id.qp || i->state != RC_REP_RCVD) {
		err = EINVAL;
	} else {
		err = -rc_id_send(i, &(struct rc_msg){ .type = RC_MSG_RTU });
		if (err)
			rc_conn_end(i, RDMA_CM_EVENT_CONNECT_ERROR, -err);
		else
			i->state = RC_CONNECTED;
	}
	pthread_mutex_unlock(&rc_lock);
	return err ? rc_err(err) : 0;
}

RC_EXPORT int rdma_disconnect(struct rdma_cm_id *id)
{
	struct rc_id *i = rc_to_id(id);
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
		rc_qp_to_err(i);
		rc_send_simple(i, RC_MSG_DREQ, 0);
		/* the kernel CM reports DISCONNECTED to the side that asked too */
		rc_conn_end(i, RDMA_CM_EVENT_DISCONNECTED, 0);
		wait = true;
		break;
	case RC_CONNECTING:
	case RC_REQ_SENT:
		/* the attempt ends here, and says so: a synchronous
		 * rdma_connect waiting in another thread returns (rdma_cm's
		 * attempt would end in an error event too, later) */
		rc_send_simple(i, RC_MSG_DREQ, 0);
		rc_conn_end(i, i->id.qp_type == IBV_QPT_UD ? RDMA_CM_EVENT_UNREACHABLE :
			    RDMA_CM_EVENT_CONNECT_ERROR, -ECONNABORTED);
		break;
	case RC_REQ_RCVD:
		rc_send_simple(i, RC_MSG_REJ, RC_REJ_CONSUMER);
		rc_id_close_fd(i);
		i->state = RC_CLOSED;
		break;
	case RC_CLOSED:
		rc_qp_to_err(i);
		break;      /* the peer ended it first: nothing more to say */
	default:
		err = EINVAL;
	}
out:
	pthread_mutex_unlock(&rc_lock);
	if (err)
		return rc_err(err);
	return wait ? rc_id_complete(i) : 0;
}

RC_EXPORT int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
	struct rc_id *l = rc_to_id(listen);
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
		if (ret) {
			/* no QP for it: the request is refused and nothing of it
			 * stays (the id, its private channel, its socket) */
			int e = errno;
			struct rdma_cm_id *nid = ev->id;

			rdma_reject(nid, NULL, 0);
			rdma_ack_cm_event(ev);
			rdma_destroy_id(nid);
			errno = e;
			return ret;
		}
	}
	if (ret) {
		listen->event = ev;
		return ret;
	}
	*id = ev->id;
	ev->id->event = ev;
	return 0;
}
