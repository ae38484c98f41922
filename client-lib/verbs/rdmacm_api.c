// SPDX-License-Identifier: MIT
/*
 * libroshm-verbs' RDMA CM (rdmacm.c): event channels and events as the
 * application sees them, QPs (rdma_create_qp and friends), the rest of
 * librdmacm's interface, and the synchronous endpoints (rdma_create_ep).
 */
#define _GNU_SOURCE
#include "rdmacm_int.h"

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
	c = rc_chan_new();
	return c ? &c->ch : NULL;
}


/* Drop the queued events that name @i (lock held). A CONNECT_REQUEST that
 * never reached the application takes its new id with it. */
void rc_chan_purge(struct rc_chan *c, struct rc_id *i)
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
		rc_efd_clear(c->efd);
	while ((e = gone)) {
		gone = e->next;
		if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST && e->id != i && !e->id->destroyed)
			rc_id_destroy(e->id);
		rc_evt_free(e);
	}
}

RC_EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	struct rc_chan *c = rc_to_chan(channel);
	struct rc_evt *e;

	if (!channel)
		return;
	pthread_mutex_lock(&rc_lock);
	while ((e = rc_chan_pop(c))) {
		if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST && e->id && !e->id->destroyed)
			rc_id_destroy(e->id);
		rc_evt_free(e);
	}
	/* ids still on it keep it until they go (librdmacm's rule is that they
	 * are gone first; a late one must not touch freed memory) */
	if (c->ids)
		c->dead = true;
	else
		rc_chan_free(c);
	pthread_mutex_unlock(&rc_lock);
}

static int migrate(struct rc_id *i, struct rc_chan *nc, bool sync);

RC_EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
	struct rc_chan *c = rc_to_chan(channel);
	struct epoll_event ev;
	struct rc_evt *e;

	if (!channel || !event)
		return rc_err(EINVAL);
	pthread_mutex_lock(&rc_lock);
	for (;;) {
		rc_chan_process(c);
		e = rc_chan_pop(c);
		if (e)
			break;
		if (fcntl(c->ch.fd, F_GETFL) & O_NONBLOCK) {
			pthread_mutex_unlock(&rc_lock);
			return rc_err(EAGAIN);
		}
		pthread_mutex_unlock(&rc_lock);
		/* sleep until a socket, the queue or the timer has something;
		 * level-triggered, so rc_chan_process sees it again under the lock */
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
		struct rc_chan *nc = rc_chan_new();

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
	rc_evt_free((struct rc_evt *)event);
	pthread_mutex_unlock(&rc_lock);
	return 0;
}

/* A sync id's call waits for its event, as librdmacm's ucma_complete. */
int rc_id_complete(struct rc_id *i)
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

/* --------------------------------------------------------------- QPs */

/* A CQ of @id's (@cq): one the other field (@other) names too goes once,
 * when both are dropped (@both), else stays with the other; one something
 * still uses (EBUSY: an XRC SRQ, a QP) stays on the id. */
static void drop_cq(struct ibv_cq **cq, struct ibv_cq **other, bool both)
{
	if (!*cq)
		return;
	if (*cq == *other && !both) {
		*cq = NULL;
		return;
	}
	if (ibv_destroy_cq(*cq))
		return;
	if (*other == *cq)
		*other = NULL;
	*cq = NULL;
}

/* A channel of @id's (@ch), as drop_cq, once no CQ left on the id uses it. */
static void drop_chan(struct rdma_cm_id *id, struct ibv_comp_channel **ch,
		      struct ibv_comp_channel **other, bool both)
{
	if (!*ch || (id->recv_cq && id->recv_cq->channel == *ch) ||
	    (id->send_cq && id->send_cq->channel == *ch))
		return;
	if (*ch == *other && !both) {
		*ch = NULL;
		return;
	}
	if (ibv_destroy_comp_channel(*ch))
		return;
	if (*other == *ch)
		*other = NULL;
	*ch = NULL;
}

#define RC_MADE_RECV 1u
#define RC_MADE_SEND 2u

/* @id's receive and/or send CQ, then their channels. */
static void drop_cqs(struct rdma_cm_id *id, bool recv, bool send)
{
	if (recv)
		drop_cq(&id->recv_cq, &id->send_cq, send);
	if (send)
		drop_cq(&id->send_cq, &id->recv_cq, recv);
	if (recv)
		drop_chan(id, &id->recv_cq_channel, &id->send_cq_channel, send);
	if (send)
		drop_chan(id, &id->send_cq_channel, &id->recv_cq_channel, recv);
	if (!id->recv_cq)
		rc_to_id(id)->made_cqs &= ~RC_MADE_RECV;
	if (!id->send_cq)
		rc_to_id(id)->made_cqs &= ~RC_MADE_SEND;
}

static void destroy_cqs(struct rdma_cm_id *id)
{
	/* an XRC SRQ's CQ goes with the SRQ (rdma_destroy_srq) */
	if (id->qp_type == IBV_QPT_XRC_RECV && id->srq)
		return;
	drop_cqs(id, true, true);
}

/* What one create_cqs made (@made), as an error undoes it: nothing the id
 * had before. */
static void undo_cqs(struct rdma_cm_id *id, unsigned made)
{
	drop_cqs(id, made & RC_MADE_RECV, made & RC_MADE_SEND);
}

/* CQs (with completion channels) for the queues the caller gave none;
 * *@made says which this call made. */
static int create_cqs(struct rdma_cm_id *id, uint32_t send_size, uint32_t recv_size,
		      unsigned *made)
{
	*made = 0;
	if (recv_size) {
		*made |= RC_MADE_RECV;
		id->recv_cq_channel = ibv_create_comp_channel(id->verbs);
		if (!id->recv_cq_channel)
			goto err;
		id->recv_cq = ibv_create_cq(id->verbs, (int)recv_size, id, id->recv_cq_channel, 0);
		if (!id->recv_cq)
			goto err;
	}
	if (send_size) {
		*made |= RC_MADE_SEND;
		id->send_cq_channel = ibv_create_comp_channel(id->verbs);
		if (!id->send_cq_channel)
			goto err;
		id->send_cq = ibv_create_cq(id->verbs, (int)send_size, id, id->send_cq_channel, 0);
		if (!id->send_cq)
			goto err;
	}
	rc_to_id(id)->made_cqs |= *made;
	return 0;
err: {
	int e = errno;

	undo_cqs(id, *made);
	*made = 0;
	errno = e ? e : ENOMEM;
	return -1;
}
}

/* May @i's RC id take an XRC_SEND QP, and be an XRC_SEND id while it lives
 * (lock held)? Only as an active id that has resolved and not yet connected
 * (a listener's requests must stay of its kind). */
static bool resolved_only(const struct rc_id *i)
{
	return i->state == RC_ADDR_RESOLVED || i->state == RC_ROUTE_RESOLVED;
}

static bool xsend_may(const struct rc_id *i)
{
	return i->id.qp_type == IBV_QPT_RC && resolved_only(i);
}

static bool xsend_ok(const struct rc_id *i)
{
	bool ok;

	pthread_mutex_lock(&rc_lock);
	ok = xsend_may(i);
	pthread_mutex_unlock(&rc_lock);
	return ok;
}

RC_EXPORT int rdma_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *attr)
{
	struct rc_id *i = rc_to_id(id);
	struct ibv_qp *qp;
	unsigned made = 0;
	int ret;

	if (!id || !attr || id->qp || !id->verbs)
		return rc_err(EINVAL);
	/* a UD QP on RDMA_PS_UDP's ids, and only there */
	if ((id->qp_type == IBV_QPT_UD) != (attr->qp_type == IBV_QPT_UD))
		return rc_err(EINVAL);
	/* XRC (docs/verbs-compat.md "XRC"): an XRC_RECV QP on an id of that
	 * type (the request ids of an rdma_create_ep XRC_RECV listener); an
	 * XRC_SEND QP on an id of that type, or on an RC id before it connects
	 * (rdma_create_id has no QP type: its id is an XRC_SEND one while the
	 * QP lives) */
	if ((attr->qp_type == IBV_QPT_XRC_RECV) != (id->qp_type == IBV_QPT_XRC_RECV) ||
	    (id->qp_type == IBV_QPT_XRC_SEND && attr->qp_type != IBV_QPT_XRC_SEND) ||
	    (attr->qp_type == IBV_QPT_XRC_SEND && id->qp_type != IBV_QPT_XRC_SEND &&
	     !xsend_ok(i)))
		return rc_err(EINVAL);
	if (attr->qp_type == IBV_QPT_XRC_RECV &&
	    (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd)) {
		pthread_mutex_lock(&rc_lock);
		attr->xrcd = rc_dev_xrcd();
		pthread_mutex_unlock(&rc_lock);
		if (!attr->xrcd)
			return -1;
		attr->comp_mask |= IBV_QP_INIT_ATTR_XRCD;
	}
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
		       attr->recv_cq || id->recv_cq ? 0 : attr->cap.max_recv_wr, &made))
		return -1;
	if (!attr->send_cq)
		attr->send_cq = id->send_cq;
	if (!attr->recv_cq)
		attr->recv_cq = id->recv_cq;
	/* an XRC QP has no SRQ of its own: its SENDs name the receiver's */
	if (id->srq && !attr->srq && attr->qp_type != IBV_QPT_XRC_SEND &&
	    attr->qp_type != IBV_QPT_XRC_RECV)
		attr->srq = id->srq;
	qp = ibv_create_qp_ex(id->verbs, attr);
	if (!qp)
		goto err;
	pthread_mutex_lock(&rc_lock);
	{
		struct ibv_qp_attr a;
		int mask;

		a.qp_state = IBV_QPS_INIT;
		rc_init_qp_attr(i, &a, &mask);
		ret = ibv_modify_qp(qp, &a, mask);
		/* rdma_cm's UD QP is ready to send at once */
		for (enum ibv_qp_state s = IBV_QPS_RTR; !ret && id->qp_type == IBV_QPT_UD && s <= IBV_QPS_RTS; s++) {
			a.qp_state = s;
			rc_init_qp_attr(i, &a, &mask);
			ret = ibv_modify_qp(qp, &a, mask);
		}
	}
	pthread_mutex_unlock(&rc_lock);
	if (ret) {
		ibv_destroy_qp(qp);
		errno = ret;
		goto err;
	}
	if (attr->qp_type == IBV_QPT_XRC_SEND && id->qp_type != IBV_QPT_XRC_SEND) {
		/* again, with the flip, under the lock: another thread may have
		 * moved the id on meanwhile */
		pthread_mutex_lock(&rc_lock);
		ret = xsend_may(i) ? 0 : EINVAL;
		if (!ret) {
			id->qp_type = IBV_QPT_XRC_SEND;
			i->xsend_flip = true;
		}
		pthread_mutex_unlock(&rc_lock);
		if (ret) {
			ibv_destroy_qp(qp);
			errno = ret;
			goto err;
		}
	}
	/* an XRC_RECV QP has no PD: the id takes the one given (or its own)
	 * for its MRs and its SRQ, as for any QP */
	id->pd = qp->pd ? qp->pd : attr->pd;
	id->qp = qp;
	return 0;
err: {
	int e = errno;

	/* the caller's attributes name no CQ that is gone */
	if (made & RC_MADE_SEND)
		attr->send_cq = NULL;
	if (made & RC_MADE_RECV)
		attr->recv_cq = NULL;
	undo_cqs(id, made);
	return rc_err(e ? e : ENOMEM);
}
}

/*
 * The id's SRQ on the PD given or the id's, with a receive CQ (and its
 * channel) made for it unless the caller gives one: a basic SRQ, which
 * rdma_create_qp puts the id's QP on, or, on an XRC_RECV id and only there,
 * an XRC SRQ of the device's XRC domain unless the caller gives one, whose
 * CQ its RECVs complete on (the id's receive CQ). Tag matching: EOPNOTSUPP.
 */
RC_EXPORT int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr)
{
	struct ibv_srq_init_attr_ex x;
	unsigned made = 0;
	struct ibv_pd *pd;
	bool xrc;

	if (!id || !attr || id->srq || !id->verbs)
		return rc_err(EINVAL);
	if (attr->comp_mask & ~(uint32_t)(IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE |
					  IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_XRCD))
		return rc_err(EOPNOTSUPP);
	/* no type given: the id's kind (an XRC_RECV id's SRQ is an XRC one) */
	xrc = (attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) ? attr->srq_type == IBV_SRQT_XRC :
							    id->qp_type == IBV_QPT_XRC_RECV;
	if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && attr->srq_type != IBV_SRQT_BASIC && !xrc)
		return rc_err(EOPNOTSUPP);
	if (xrc != (id->qp_type == IBV_QPT_XRC_RECV))
		return rc_err(EINVAL);
	pd = (attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) && attr->pd ? attr->pd : id->pd;
	if (!pd || pd->context != id->verbs)
		return rc_err(EINVAL);
	x = (struct ibv_srq_init_attr_ex){ .srq_context = attr->srq_context, .attr = attr->attr,
					   .pd = pd };
	x.cq = (attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) ? attr->cq : NULL;
	if (!x.cq && !id->recv_cq && create_cqs(id, 0, attr->attr.max_wr, &made))
		return -1;
	if (!x.cq)
		x.cq = id->recv_cq;
	if (xrc) {
		x.xrcd = (attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) ? attr->xrcd : NULL;
		if (!x.xrcd) {
			pthread_mutex_lock(&rc_lock);
			x.xrcd = rc_dev_xrcd();
			pthread_mutex_unlock(&rc_lock);
		}
		x.srq_type = IBV_SRQT_XRC;
		x.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
			      IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
		id->srq = x.xrcd ? ibv_create_srq_ex(id->verbs, &x) : NULL;
	} else {
		struct ibv_srq_init_attr a = { .srq_context = x.srq_context, .attr = x.attr };

		id->srq = ibv_create_srq(pd, &a);
		x.attr = a.attr;
	}
	if (!id->srq) {
		int e = errno;

		undo_cqs(id, made);
		return rc_err(e ? e : ENOMEM);
	}
	attr->attr = x.attr;
	attr->pd = pd;
	attr->cq = x.cq;
	attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_CQ;
	if (xrc) {
		attr->srq_type = IBV_SRQT_XRC;
		attr->comp_mask |= IBV_SRQ_INIT_ATTR_TYPE;
		attr->xrcd = x.xrcd;
		attr->comp_mask |= IBV_SRQ_INIT_ATTR_XRCD;
	}
	return 0;
}

RC_EXPORT int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd,
			      struct ibv_srq_init_attr *attr)
{
	struct ibv_srq_init_attr_ex a;
	int ret;

	if (!id || !attr)
		return rc_err(EINVAL);
	memset(&a, 0, sizeof(a));
	a.srq_context = attr->srq_context;
	a.attr = attr->attr;
	a.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
	/* librdmacm: an XRC_RECV id's SRQ is an XRC SRQ */
	a.srq_type = id->qp_type == IBV_QPT_XRC_RECV ? IBV_SRQT_XRC : IBV_SRQT_BASIC;
	a.pd = pd ? pd : id->pd;
	ret = rdma_create_srq_ex(id, &a);
	if (!ret)
		attr->attr = a.attr;
	return ret;
}

RC_EXPORT void rdma_destroy_srq(struct rdma_cm_id *id)
{
	if (!id || !id->srq)
		return;
	if (ibv_destroy_srq(id->srq))
		return;
	id->srq = NULL;
	/* an XRC_RECV QP uses no CQ: its SRQ's CQ goes with the SRQ */
	if (!id->qp || id->qp_type == IBV_QPT_XRC_RECV)
		destroy_cqs(id);
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
	/* an rdma_create_id id that took an XRC_SEND QP is an RC one again
	 * while it has not connected */
	pthread_mutex_lock(&rc_lock);
	rc_active_del(rc_to_id(id));   /* its QPN may be drawn again */
	if (rc_to_id(id)->xsend_flip && resolved_only(rc_to_id(id))) {
		id->qp_type = IBV_QPT_RC;
		rc_to_id(id)->xsend_flip = false;
	}
	pthread_mutex_unlock(&rc_lock);
}

RC_EXPORT int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr,
				int *qp_attr_mask)
{
	int ret;

	if (!id || !qp_attr || !qp_attr_mask)
		return rc_err(EINVAL);
	pthread_mutex_lock(&rc_lock);
	ret = rc_init_qp_attr(rc_to_id(id), qp_attr, qp_attr_mask);
	pthread_mutex_unlock(&rc_lock);
	return ret ? rc_err(ret) : 0;
}

/* ------------------------------------------------------------ the rest */

RC_EXPORT int rdma_set_option(struct rdma_cm_id *id, int level, int optname, void *optval,
			      size_t optlen)
{
	struct rc_id *i = rc_to_id(id);
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
			rc_sock_tos(i->fd, i->id.route.addr.src_addr.sa_family, i->tos);
			break;
		case RDMA_OPTION_ID_REUSEADDR:
			/* listeners reuse their port already (rc_id_socket) */
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
	struct rc_id *i = rc_to_id(id);
	struct rc_chan *nc;
	int ret;

	if (!id || (i->sync && !channel))
		return rc_err(EINVAL);
	pthread_mutex_lock(&rc_lock);
	nc = channel ? rc_to_chan(channel) : rc_chan_new();
	ret = nc ? migrate(i, nc, !channel) : -1;
	pthread_mutex_unlock(&rc_lock);
	return ret;
}

/* Move one id (and what hangs on it) from its channel to @nc. */
static void move_one(struct rc_id *i, struct rc_chan *nc)
{
	uint32_t ev = i->ep_events;

	rc_id_watch(i, 0);
	rc_chan_unlink(i);
	rc_chan_link(nc, i);
	rc_id_watch(i, ev);
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
		rc_efd_clear(oc->efd);
	if (i->state == RC_LISTEN)
		for (h = oc->ids; h; h = hnext) {
			hnext = h->cnext;
			if (h->state == RC_HIDDEN && h->listener == i)
				move_one(h, nc);
		}
	if (was_sync && i->id.event) {
		rc_evt_free((struct rc_evt *)i->id.event);
		i->id.event = NULL;
	}
	if (was_sync)
		oc->dead = true;    /* its private channel */
	move_one(i, nc);
	i->sync = sync;
	for (e = moved; e; e = next) {
		next = e->next;
		rc_chan_push(nc, e);
	}
	if (!rc_chan_reap(oc))
		rc_chan_arm(oc);
	rc_chan_arm(nc);
	return 0;
}

RC_EXPORT __be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	return id ? rc_sa_port(&id->route.addr.src_addr) : 0;
}

RC_EXPORT __be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	return id ? rc_sa_port(&id->route.addr.dst_addr) : 0;
}

RC_EXPORT struct ibv_context **rdma_get_devices(int *num_devices)
{
	struct ibv_context **l;
	int err;

	pthread_mutex_lock(&rc_lock);
	err = rc_dev_get();
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
	rc_to_id(id)->local_ece = *ece;
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
	enum ibv_qp_type t = IBV_QPT_RC;
	int ret;

	if (!id || !res)
		return rc_err(EINVAL);
	/* UD on RDMA_PS_UDP; XRC (an XRC_RECV listener, an XRC_SEND
	 * requester) on the connected port spaces, as RC */
	if (res->ai_port_space == RDMA_PS_UDP)
		t = IBV_QPT_UD;
	else if (res->ai_qp_type == IBV_QPT_XRC_SEND || res->ai_qp_type == IBV_QPT_XRC_RECV)
		t = (enum ibv_qp_type)res->ai_qp_type;
	if (res->ai_qp_type && res->ai_qp_type != (int)t)
		return rc_err(EOPNOTSUPP);
	if ((t == IBV_QPT_XRC_RECV && !(res->ai_flags & RAI_PASSIVE)) ||
	    (t == IBV_QPT_XRC_SEND && (res->ai_flags & RAI_PASSIVE)))
		return rc_err(EINVAL);
	ret = rdma_create_id(NULL, &cm, NULL, (enum rdma_port_space)res->ai_port_space);
	if (ret)
		return ret;
	cm->qp_type = t;
	i = rc_to_id(cm);
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
			i->ep_attr->qp_type = t;
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
		qp_init_attr->qp_type = t;
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
	if (id->srq)
		rdma_destroy_srq(id);
	/* and what those left of the CQs we made (one busy at
	 * rdma_destroy_qp); CQs the application put on the id stay its own */
	undo_cqs(id, rc_to_id(id)->made_cqs);
	rdma_destroy_id(id);
}
