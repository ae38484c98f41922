// SPDX-License-Identifier: MIT
/*
 * `verbs` transport: the device's asynchronous events (ibv_get_async_event)
 * on the control thread. The NIC tells us here what no completion says: its
 * port going down or up, its GID table changing, a QP or CQ it broke, the
 * device failing. Each event is read, counted, logged with what it concerns
 * (the port, the QP's peer node) and acknowledged at once, so that nothing
 * that destroys a QP or CQ waits for an unacknowledged event.
 *
 * What roshmd does about them is what it does anyway: a QP the NIC broke
 * fails its WRs (poller, verbs.c) and the peer is connected again; a port
 * that is down makes WRs fail after transport.verbs.retry_count retries and
 * dials fail until it is up. The events make the cause visible to the
 * operator (the log and `roshmctl status`).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>

#include <jansson.h>

#include "control/control.h"
#include "transport/verbs/verbs.h"

#define RD_LOG_COMPONENT RD_LC_VERBS

#define VCTL ((struct rd_verbs_ctl *)rd_verbs_provider.ctl_priv)

static struct rd_ep_tag cm_tag = { RD_EP_PROVIDER }, async_tag = { RD_EP_PROVIDER };

int rd_verbs_events_init(struct rd_control *ctl)
{
	struct rd_verbs_ctl *v = VCTL;
	int fl = fcntl(v->ctx->async_fd, F_GETFL);
	struct ibv_port_attr pa;
	int ret;

	if (fl < 0 || fcntl(v->ctx->async_fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	/* both answer an errno value (ibv_query_gid -1 at times): not errno */
	if (ibv_query_gid(v->ctx, v->port, v->gid_index, &v->gid))
		return -EIO;
	if ((ret = ibv_query_port(v->ctx, v->port, &pa)))
		return ret > 0 ? -ret : -EIO;
	v->port_down = pa.state != IBV_PORT_ACTIVE;
	rd_control_epoll_add(ctl, v->ch->fd, &cm_tag);
	rd_control_epoll_add(ctl, v->ctx->async_fd, &async_tag);
	return 0;
}

/* Which node a QP of ours talks to: an inbound QP (a peer's connection to
 * us) or one of our outbound QPs. */
static const char *qp_node(struct rd_control *ctl, struct rd_verbs_ctl *v, const struct ibv_qp *qp,
			   const char **dir)
{
	for (struct rd_vin *in = v->inbound; in; in = in->next)
		if (in->id && in->id->qp == qp) {
			*dir = "inbound, from node";
			return in->node;
		}
	for (struct rd_peer *p = ctl->peers; p; p = p->next) {
		if (p->prov != &rd_verbs_provider || !p->priv)
			continue;
		for (uint32_t i = 0; i < rd_vpeer(p)->nvq; i++)
			if (rd_vpeer(p)->vq[i] && rd_vpeer(p)->vq[i]->qp == qp) {
				*dir = "to node";
				return p->node;
			}
	}
	*dir = "of";
	return "no peer now";
}

static void one_event(struct rd_control *ctl, struct rd_verbs_ctl *v, const struct ibv_async_event *ev)
{
	const char *what = ibv_event_type_str(ev->event_type);
	const char *dir, *node;
	struct ibv_gid_entry ge;

	v->async_events++;
	switch (ev->event_type) {
	case IBV_EVENT_PORT_ERR:
		if ((uint32_t)ev->element.port_num != v->port) {
			RD_LOG(INFO, "verbs: %s port %d (not ours) is down (%s)", v->dev,
			       ev->element.port_num, what);
			break;
		}
		v->port_down = true;
		v->port_downs++;
		RD_LOG(WARNING, "verbs: %s port %d is down (%s): WRs to peers fail after "
		       "transport.verbs.retry_count retries, connections wait until it is up",
		       v->dev, ev->element.port_num, what);
		break;
	case IBV_EVENT_PORT_ACTIVE:
		if ((uint32_t)ev->element.port_num == v->port)
			v->port_down = false;
		RD_LOG(NOTICE, "verbs: %s port %d is up (%s)", v->dev, ev->element.port_num, what);
		break;
	case IBV_EVENT_GID_CHANGE:
		/* Connections resolve their GID through the CM each time; the
		 * address peers dial is the one we listen on. */
		if ((uint32_t)ev->element.port_num == v->port &&
		    (ibv_query_gid_ex(v->ctx, v->port, (uint32_t)v->gid_index, &ge, 0) ||
		     ge.gid_type != IBV_GID_TYPE_ROCE_V2 || memcmp(&ge.gid, &v->gid, sizeof(ge.gid))))
			RD_LOG(WARNING, "verbs: %s port %d: the GID table changed and index %d no longer "
			       "holds our RoCE v2 address: peers may not reach us until roshmd restarts",
			       v->dev, ev->element.port_num, v->gid_index);
		else
			RD_LOG(INFO, "verbs: %s port %d: the GID table changed (%s)", v->dev,
			       ev->element.port_num, what);
		break;
	case IBV_EVENT_DEVICE_FATAL:
		v->device_fatal = true;
		RD_LOG(ERR, "verbs: %s failed (%s): every QP on it is lost; restart roshmd", v->dev, what);
		break;
	case IBV_EVENT_CQ_ERR:
		v->qp_errors++;
		RD_LOG(ERR, "verbs: %s: a CQ overran (%s): its QPs are in the error state", v->dev, what);
		break;
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
		v->qp_errors++;
		node = qp_node(ctl, v, ev->element.qp, &dir);
		RD_LOG(WARNING, "verbs: %s: QP %u (%s %s): %s: the NIC moved it to the error state",
		       v->dev, ev->element.qp->qp_num, dir, node, what);
		break;
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		node = qp_node(ctl, v, ev->element.qp, &dir);
		RD_LOG(DEBUG, "verbs: %s: QP %u (%s %s): %s", v->dev, ev->element.qp->qp_num, dir, node,
		       what);
		break;
	default:
		RD_LOG(INFO, "verbs: %s: %s", v->dev, what);
		break;
	}
}

static void async_events(struct rd_control *ctl, uint32_t events)
{
	struct rd_verbs_ctl *v = VCTL;
	struct ibv_async_event ev;
	int i;

	if (!v)
		return;
	/* a bounded batch: the control thread has other fds to serve; the fd
	 * stays readable for what is left */
	for (i = 0; i < 64; i++) {
		if (ibv_get_async_event(v->ctx, &ev)) {
			/* A device gone for good may leave the fd readable (or
			 * hung up) with nothing to read: stop watching it rather
			 * than spin the control thread on it. */
			if ((errno != EAGAIN && errno != EWOULDBLOCK) ||
			    (!i && (events & (EPOLLERR | EPOLLHUP)))) {
				RD_LOG(ERR, "verbs: %s: reading its async events: %s; no more are read",
				       v->dev, errno == EAGAIN ? "hung up" : strerror(errno));
				rd_control_epoll_del(ctl, v->ctx->async_fd);
			}
			return;
		}
		one_event(ctl, v, &ev);
		ibv_ack_async_event(&ev);
	}
}

void rd_verbs_epoll_event(struct rd_control *ctl, void *tag, uint32_t events)
{
	if (tag == &async_tag)
		async_events(ctl, events);
	else
		rd_verbs_cm_events(ctl);
}

/* admin "status": the device as its events left it */
void rd_verbs_status_json(struct rd_control *ctl, struct json_t *o)
{
	struct rd_verbs_ctl *v = VCTL;
	json_t *d;

	(void)ctl;
	if (!v || !(d = json_object()))
		return;
	json_object_set_new(d, "device", json_string(v->dev));
	json_object_set_new(d, "port", json_integer(v->port));
	json_object_set_new(d, "port_state", json_string(v->device_fatal ? "fatal" : v->port_down ? "down" : "up"));
	json_object_set_new(d, "async_events", json_integer((json_int_t)v->async_events));
	json_object_set_new(d, "port_downs", json_integer((json_int_t)v->port_downs));
	json_object_set_new(d, "qp_errors", json_integer((json_int_t)v->qp_errors));
	json_object_set_new(o, "verbs", d);
}
