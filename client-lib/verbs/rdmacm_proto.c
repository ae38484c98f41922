// SPDX-License-Identifier: MIT
/*
 * libroshm-verbs' RDMA CM (rdmacm.c): the protocol as it comes in on an
 * id's socket (rdmacm_wire.h): a listener's REQs become CONNECT_REQUESTs,
 * REP, REJ, RTU and DREQ move a connection on; a deadline missed or a bad
 * frame ends that connection only.
 */
#define _GNU_SOURCE
#include "rdmacm_int.h"

/* ------------------------------------------------------ the protocol, in */

static bool rx_hidden_req(struct rc_id *i, const struct rc_msg *m)
{
	struct rc_id *l = i->listener;
	bool ud = l->id.qp_type == IBV_QPT_UD, xrc;
	struct rc_evt *e;

	if (m->type != RC_MSG_REQ && m->type != RC_MSG_SIDR_REQ)
		return false;
	/* the port spaces share TCP's ports: a request for the other one finds
	 * no listener, as on a fabric */
	if ((m->type == RC_MSG_SIDR_REQ) != ud) {
		rc_send_simple(i, RC_MSG_REJ, RC_REJ_NO_LISTENER);
		rc_hidden_drop(i);
		return true;
	}
	/* XRC: an XRC_SEND's request goes to an XRC_RECV listener (made by
	 * rdma_create_ep), an RC one to an RC listener; the other kind is
	 * refused unseen, as the kernel's CM does. The new id is of its
	 * listener's kind (rc_id_new). */
	xrc = m->qp_type == RC_WIRE_QPT_XRC_SEND;
	if (!ud && xrc != (l->id.qp_type == IBV_QPT_XRC_RECV)) {
		rc_send_simple(i, RC_MSG_REJ, RC_REJ_TRANSPORT);
		rc_hidden_drop(i);
		return true;
	}
	/* a QPN of ours, not our own loopback (rc_peer_claim_ok): refused
	 * unseen */
	if (!ud && !rc_peer_claim_ok(i, m, false)) {
		rc_send_simple(i, RC_MSG_REJ, RC_REJ_CONSUMER);
		rc_hidden_drop(i);
		return true;
	}
	/* as the kernel CM with its listen backlog: requests the application
	 * has not taken yet are bounded; one more is rejected */
	if (l->nqueued >= l->backlog || rc_id_attach(i)) {
		rc_send_simple(i, RC_MSG_REJ, RC_REJ_CONSUMER);
		rc_hidden_drop(i);
		return true;
	}
	e = rc_evt_new(i, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
	if (!e) {
		rc_send_simple(i, RC_MSG_REJ, RC_REJ_CONSUMER);
		rc_hidden_drop(i);
		return true;
	}
	i->peer = *m;
	i->have_peer = true;
	memcpy(i->id.route.addr.addr.ibaddr.dgid.raw, m->gid, 16);
	i->psn = rc_new_psn();
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
	if (ud) {
		/* rdma_cm gives a SIDR REQ's private data only */
		memset(e->pd, 0, sizeof(e->pd));
		memcpy(e->pd, m->pd, m->pd_len);
		e->ev.param.ud.private_data = e->pd;
		e->ev.param.ud.private_data_len = RC_PD_SIDR_REQ;
	} else {
		rc_evt_conn(e, m, RC_PD_REQ);
	}
	rc_chan_push(i->ch, e);
	return false;
}

/* SIDR REP: the active UD id has what it needs; the exchange is over. */
static bool rx_sidr_rep(struct rc_id *i, const struct rc_msg *m)
{
	struct rc_evt *e;

	/* RDMA_PS_UDP's Q_Key is fixed: rdma_cm refuses any other */
	if (m->qkey != RDMA_UDP_QKEY) {
		rc_conn_end(i, RDMA_CM_EVENT_ADDR_ERROR, -EINVAL);
		return true;
	}
	rc_id_close_fd(i);
	i->peer = *m;
	i->have_peer = true;
	memcpy(i->id.route.addr.addr.ibaddr.dgid.raw, m->gid, 16);
	i->state = RC_CLOSED;
	e = rc_evt_new(i, RDMA_CM_EVENT_ESTABLISHED, 0);
	if (e) {
		rc_evt_ud(e, i, m);
		rc_chan_push(i->ch, e);
	}
	return true;
}

static bool rx_rep(struct rc_id *i, const struct rc_msg *m)
{
	struct rc_evt *e;
	int ret;

	/* an XRC_SEND QP connects to an XRC_RECV QP, an RC QP to an RC QP */
	if (m->qp_type != (i->id.qp_type == IBV_QPT_XRC_SEND ? RC_WIRE_QPT_XRC_RECV : RC_WIRE_QPT_RC)) {
		rc_send_simple(i, RC_MSG_REJ, RC_REJ_TRANSPORT);
		rc_conn_end(i, RDMA_CM_EVENT_CONNECT_ERROR, -EPROTO);
		return true;
	}
	/* a REP naming our own QP, or another QP of ours that is connecting
	 * out: a peer looping us back to ourselves (rc_active_qpn); or any
	 * other QP of ours than the one our own listener answered this id's
	 * REQ with (rc_peer_claim_ok) */
	if (rc_active_qpn(m->qpn) || !rc_peer_claim_ok(i, m, true)) {
		rc_send_simple(i, RC_MSG_REJ, RC_REJ_CONSUMER);
		rc_conn_end(i, RDMA_CM_EVENT_CONNECT_ERROR, -EPROTO);
		return true;
	}
	i->peer = *m;
	i->have_peer = true;
	memcpy(i->id.route.addr.addr.ibaddr.dgid.raw, m->gid, 16);
	i->deadline = 0;
	if (!i->id.qp) {
		/* the application moves its own QP, then calls rdma_establish */
		i->state = RC_REP_RCVD;
		e = rc_evt_new(i, RDMA_CM_EVENT_CONNECT_RESPONSE, 0);
		if (e) {
			rc_evt_conn(e, m, RC_PD_REP);
			rc_chan_push(i->ch, e);
		}
		return false;
	}
	ret = rc_qp_connect(i);
	if (!ret)
		ret = -rc_id_send(i, &(struct rc_msg){ .type = RC_MSG_RTU });
	if (ret) {
		rc_send_simple(i, RC_MSG_REJ, RC_REJ_CONSUMER);
		rc_conn_end(i, RDMA_CM_EVENT_CONNECT_ERROR, -ret);
		return true;
	}
	i->state = RC_CONNECTED;
	e = rc_evt_new(i, RDMA_CM_EVENT_ESTABLISHED, 0);
	if (e) {
		rc_evt_conn(e, m, RC_PD_REP);
		rc_chan_push(i->ch, e);
	}
	return false;
}

static bool rx_rej(struct rc_id *i, const struct rc_msg *m)
{
	struct rc_evt *e;

	if (i->id.qp_type == IBV_QPT_UD) {
		/* a SIDR REP with a status: UNREACHABLE with its private data, as
		 * rdma_cm reports it; the UD QP stays as it is */
		rc_id_close_fd(i);
		i->state = RC_CLOSED;
		e = rc_evt_new(i, RDMA_CM_EVENT_UNREACHABLE,
			       m->reason == RC_REJ_NO_LISTENER ? RC_SIDR_UNSUPPORTED : RC_SIDR_REJECT);
		if (e) {
			memset(e->pd, 0, sizeof(e->pd));
			memcpy(e->pd, m->pd, m->pd_len < RC_PD_SIDR_REP ? m->pd_len : RC_PD_SIDR_REP);
			e->ev.param.ud.private_data = e->pd;
			e->ev.param.ud.private_data_len = RC_PD_SIDR_REP;
			rc_chan_push(i->ch, e);
		}
		return true;
	}
	rc_id_close_fd(i);
	i->state = RC_CLOSED;
	rc_qp_to_err(i);
	e = rc_evt_new(i, RDMA_CM_EVENT_REJECTED, (int)(m->reason > INT32_MAX ? INT32_MAX : m->reason));
	if (e) {
		rc_evt_conn(e, m, RC_PD_REJ);
		e->ev.param.conn.qp_num = 0;
		rc_chan_push(i->ch, e);
	}
	return true;
}

/* A whole message for @i: true when the connection is gone (stop reading). */
static bool rx_msg(struct rc_id *i, const struct rc_msg *m)
{
	/* SIDR: nothing follows a request, so whatever comes (or the active
	 * side leaving) changes nothing for the passive id: the application's
	 * answer goes nowhere, as a SIDR REP to a vanished peer would */
	if (i->state == RC_REQ_RCVD && i->id.qp_type == IBV_QPT_UD) {
		rc_id_close_fd(i);
		return true;
	}
	switch (i->state) {
	case RC_HIDDEN:
		if (rx_hidden_req(i, m))
			return true;
		if (m->type == RC_MSG_REQ || m->type == RC_MSG_SIDR_REQ)
			return false;
		break;
	case RC_REQ_RCVD:
		/* the active side gave up before the application answered */
		if (m->type == RC_MSG_REJ || m->type == RC_MSG_DREQ) {
			rc_conn_end(i, RDMA_CM_EVENT_CONNECT_ERROR, -ECONNRESET);
			return true;
		}
		break;
	case RC_REQ_SENT:
		if (i->id.qp_type == IBV_QPT_UD ? m->type == RC_MSG_SIDR_REP : m->type == RC_MSG_REP)
			return i->id.qp_type == IBV_QPT_UD ? rx_sidr_rep(i, m) : rx_rep(i, m);
		if (m->type == RC_MSG_REJ)
			return rx_rej(i, m);
		break;
	case RC_REP_SENT:
		if (m->type == RC_MSG_RTU) {
			i->state = RC_CONNECTED;
			i->deadline = 0;
			rc_queue_evt(i, RDMA_CM_EVENT_ESTABLISHED, 0);
			return false;
		}
		if (m->type == RC_MSG_REJ)
			return rx_rej(i, m);
		break;
	case RC_REP_RCVD:
		if (m->type == RC_MSG_REJ)
			return rx_rej(i, m);
		if (m->type == RC_MSG_DREQ) {
			rc_conn_end(i, RDMA_CM_EVENT_DISCONNECTED, 0);
			return true;
		}
		break;
	case RC_CONNECTED:
		if (m->type == RC_MSG_DREQ) {
			rc_conn_end(i, RDMA_CM_EVENT_DISCONNECTED, 0);
			return true;
		}
		break;
	default:
		break;
	}
	/* a message this state has no use for: the peer is broken or hostile */
	if (i->state == RC_HIDDEN)
		rc_hidden_drop(i);
	else if (i->state == RC_CONNECTED || i->state == RC_REP_RCVD)
		rc_conn_end(i, RDMA_CM_EVENT_DISCONNECTED, 0);
	else
		rc_conn_end(i, RDMA_CM_EVENT_CONNECT_ERROR, -EPROTO);
	return true;
}

/* The peer closed (err 0) or the socket failed, or sent no valid frame
 * (err EPROTO). */
static void rx_gone(struct rc_id *i, int err)
{
	if (i->state == RC_REQ_RCVD && i->id.qp_type == IBV_QPT_UD) {
		rc_id_close_fd(i);   /* as in rx_msg: no event */
		return;
	}
	switch (i->state) {
	case RC_HIDDEN:
		rc_hidden_drop(i);
		return;
	case RC_CONNECTED:
	case RC_REP_RCVD:
		rc_conn_end(i, RDMA_CM_EVENT_DISCONNECTED, 0);
		return;
	case RC_REQ_SENT:
		if (err != EPROTO) {
			rc_conn_end(i, RDMA_CM_EVENT_UNREACHABLE, -(err ? err : ECONNRESET));
			return;
		}
		/* fallthrough */
	default:
		rc_conn_end(i, RDMA_CM_EVENT_CONNECT_ERROR, -(err ? err : ECONNRESET));
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
		rc_refused(i);
		return;
	}
	if (err) {
		rc_conn_end(i, RDMA_CM_EVENT_UNREACHABLE, -err);
		return;
	}
	i->txlen = 0;
	i->state = RC_REQ_SENT;
	rc_id_watch(i, EPOLLIN);
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
				rc_id_watch(l, 0);
				l->deadline = rc_now_ms() + 100;
			}
			return;
		}
		if (l->npending >= RC_MAX_PENDING || !(c = rc_id_new(l->ch, l->id.context, l->id.ps,
								  l->id.qp_type))) {
			close(fd);
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c->fd = fd;
		c->state = RC_HIDDEN;
		c->listener = l;
		l->npending++;
		c->deadline = rc_now_ms() + rc_timeout();
		memcpy(&c->id.route.addr.dst_storage, &a, alen < sizeof(a) ? alen : sizeof(a));
		rc_sa_unmap(&c->id.route.addr.dst_storage);
		alen = sizeof(c->id.route.addr.src_storage);
		getsockname(fd, &c->id.route.addr.src_addr, &alen);
		rc_sa_unmap(&c->id.route.addr.src_storage);
		rc_id_watch(c, EPOLLIN);
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
	uint64_t now = rc_now_ms();
	struct rc_id *next;

	for (struct rc_id *i = c->ids; i; i = next) {
		next = i->cnext;
		if (!i->deadline || i->deadline > now)
			continue;
		i->deadline = 0;
		switch (i->state) {
		case RC_LISTEN:
			rc_id_watch(i, EPOLLIN);
			break;
		case RC_HIDDEN:
			rc_hidden_drop(i);
			break;
		case RC_CONNECTING:
		case RC_REQ_SENT:
			rc_send_simple(i, RC_MSG_DREQ, 0);
			rc_conn_end(i, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
			break;
		case RC_REP_SENT:
			rc_send_simple(i, RC_MSG_REJ, RC_REJ_CONSUMER);
			rc_conn_end(i, RDMA_CM_EVENT_CONNECT_ERROR, -ETIMEDOUT);
			break;
		default:
			break;
		}
	}
}

/* Move the protocol of every socket of @c on (lock held, never blocks). */
void rc_chan_process(struct rc_chan *c)
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
				rc_efd_clear(c->tfd);   /* the expiry count; deadlines are checked below */
			}
		}
		for (int k = 0; k < n; k++)
			if (ids[k] && !ids[k]->destroyed && ids[k]->ch == c)
				id_io(ids[k], evs[k].events);
		for (int k = 0; k < n; k++)
			if (ids[k])
				rc_id_put(ids[k]);
		/* again while sockets had something: a listener's new connections
		 * may hold their REQ already (the queue's eventfd stays readable
		 * while events wait, so it alone does not count) */
		if (!nid || c->dead)
			break;
	}
	chan_timeouts(c);
	rc_chan_arm(c);
}
