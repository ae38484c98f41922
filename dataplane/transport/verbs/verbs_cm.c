// SPDX-License-Identifier: MIT
/*
 * `verbs` transport, control side: device and GID selection, the PD and
 * every MR (client channels, regions, the transaction engine's buffers),
 * and connection setup with librdmacm. The requester connects in two CM
 * exchanges that carry a mutual HMAC challenge in the private data (see
 * roshm/wire.h); the responder (verbs_resp.c) accepts them, and its QPs
 * are passive: nothing is ever posted on them, the NIC serves the peer's
 * one-sided operations.
 *
 * Everything runs on the control thread and nothing here waits: the event
 * channel is non-blocking and in the control thread's epoll, and an outbound
 * connect is a state machine per QP that each CM event moves on (its
 * rdma_cm_id's context is the QP); the peer's dial deadline is kept by
 * peers.c.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <sys/epoll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "control/control.h"
#include "poller/txn.h"
#include "transport/verbs/verbs.h"
#include "transport/verbs/verbs_pdata.h"

#define RD_LOG_COMPONENT RD_LC_VERBS

/* the control-side state (one control thread) */
#define VCTL ((struct rd_verbs_ctl *)rd_verbs_provider.ctl_priv)


void rd_verbs_vmac(const struct rd_tcp_secret *sec, const char *label, const uint8_t *nonce_r,
		   const uint8_t *nonce_s, const char *node_r, const char *node_s, uint8_t *out)
{
	rd_peer_mac(sec, label, nonce_r, nonce_s, ROSHM_VERBS_NONCE, node_r, ROSHM_VERBS_ID, node_s,
		    ROSHM_NAME_MAX, out);
}

void rd_verbs_rnd(void *p, size_t n)
{
	if (getrandom(p, n, 0) != (ssize_t)n)
		abort(); /* no entropy: nothing safe to do */
}

static const char *gid_type_str(uint32_t t)
{
	return t == IBV_GID_TYPE_ROCE_V2 ? "RoCE v2" : t == IBV_GID_TYPE_ROCE_V1 ? "RoCE v1" : "IB";
}

/*
 * The IP address a RoCE v2 GID stands for: IPv4 (a v4-mapped GID) or IPv6
 * (not link-local: that one is not routable, and every port has one).
 */
static bool gid_addr(const union ibv_gid *g, uint16_t port, struct rd_addr *a)
{
	static const uint8_t pfx[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	struct in6_addr x;

	memset(a, 0, sizeof(*a));
	if (!memcmp(g->raw, pfx, sizeof(pfx))) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&a->ss;

		s4->sin_family = AF_INET;
		memcpy(&s4->sin_addr, g->raw + 12, 4);
		a->len = sizeof(*s4);
	} else {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&a->ss;

		memcpy(&x, g->raw, sizeof(x));
		if (IN6_IS_ADDR_UNSPECIFIED(&x) || IN6_IS_ADDR_LINKLOCAL(&x))
			return false;
		s6->sin6_family = AF_INET6;
		s6->sin6_addr = x;
		a->len = sizeof(*s6);
	}
	rd_addr_set_port(a, port);
	return true;
}

/*
 * Pick device, port and GID: a RoCE v2 GID with an IP address on an active
 * Ethernet port, filtered by the configured device name, netdev, GID index
 * and listen address; without a listen address an IPv4 GID first, else an
 * IPv6 one. Sets v->ctx, port, gid_index, addr.
 */
static int pick_gid(struct rd_control *ctl, struct rd_verbs_ctl *v)
{
	const struct rd_config *cfg = ctl->cfg;
	struct ibv_context **devs;
	unsigned int want_if = 0;
	struct rd_addr want;
	bool have_want = false;
	char seen[512] = "", why[256];
	size_t sl = 0;
	int n = 0;

	if (cfg->verbs_netdev[0] && !(want_if = if_nametoindex(cfg->verbs_netdev))) {
		RD_LOG(ERR, "verbs: netdev %s: no such interface", cfg->verbs_netdev);
		return -ENODEV;
	}
	if (cfg->verbs_listen[0] && !rd_host_is_any(cfg->verbs_listen)) {
		if (rd_addr_resolve(cfg->verbs_listen, (uint16_t)cfg->verbs_port, RD_ADDR_NUMERIC, &want,
				    why, sizeof(why))) {
			RD_LOG(ERR, "verbs: transport.verbs.listen: %s", why);
			return -EINVAL;
		}
		have_want = true;
	}
	devs = rdma_get_devices(&n);
	if (!devs || n <= 0) {
		RD_LOG(ERR, "verbs: no RDMA device (for Soft-RoCE: modprobe rdma_rxe; "
		       "rdma link add rxe0 type rxe netdev eth0)");
		if (devs)
			rdma_free_devices(devs);
		return -ENODEV;
	}
	/* pass 0: IPv4 GIDs (and the list of every GID for the error), 1: IPv6 */
	for (int pass = 0; pass < 2; pass++) {
		int fam = pass ? AF_INET6 : AF_INET;

		if (pass && have_want && want.ss.ss_family != AF_INET6)
			break;
		for (int d = 0; d < n; d++) {
			struct ibv_context *ctx = devs[d];
			const char *name = ibv_get_device_name(ctx->device);
			struct ibv_device_attr da;

			if (cfg->verbs_device[0] && strcmp(name, cfg->verbs_device))
				continue;
			if (ibv_query_device(ctx, &da))
				continue;
			for (uint8_t port = 1; port <= da.phys_port_cnt; port++) {
				struct ibv_port_attr pa;

				if (ibv_query_port(ctx, port, &pa) ||
				    pa.link_layer != IBV_LINK_LAYER_ETHERNET)
					continue;
				for (int gi = 0; gi < pa.gid_tbl_len; gi++) {
					struct ibv_gid_entry ge;
					struct rd_addr a;
					char as[RD_ADDR_STRLEN], ifn[IF_NAMESIZE] = "?";

					if (ibv_query_gid_ex(ctx, port, (uint32_t)gi, &ge, 0))
						continue;
					if (!gid_addr(&ge.gid, (uint16_t)cfg->verbs_port, &a))
						continue;
					rd_addr_str(&a, false, as, sizeof(as));
					if_indextoname(ge.ndev_ifindex, ifn);
					if (!pass && sl < sizeof(seen) - 1)
						sl += (size_t)snprintf(seen + sl, sizeof(seen) - sl,
								       " %s/%u/%d=%s(%s,%s)", name, port, gi,
								       as, gid_type_str(ge.gid_type), ifn);
					if (a.ss.ss_family != fam || ge.gid_type != IBV_GID_TYPE_ROCE_V2)
						continue;
					if (want_if && ge.ndev_ifindex != want_if)
						continue;
					if (cfg->verbs_gid_index >= 0 && gi != cfg->verbs_gid_index)
						continue;
					if (have_want && !rd_addr_same_host(&want, &a))
						continue;
					if (pa.state != IBV_PORT_ACTIVE)
						RD_LOG(WARNING, "verbs: %s port %u is not active (state %d)",
						       name, port, pa.state);
					v->ctx = ctx;
					v->port = port;
					v->gid_index = gi;
					v->max_msg = pa.max_msg_sz;
					v->max_qp_rd_atom = (uint32_t)da.max_qp_rd_atom;
					v->max_qp_init_rd_atom = (uint32_t)da.max_qp_init_rd_atom;
					v->atomic_glob = da.atomic_cap == IBV_ATOMIC_GLOB;
					snprintf(v->dev, sizeof(v->dev), "%s", name);
					v->addr = a;
					RD_LOG(INFO, "verbs: device %s port %u GID index %d (RoCE v2, %s) on "
					       "netdev %s", name, port, gi, as, ifn);
					rdma_free_devices(devs);
					return 0;
				}
			}
		}
	}
	rdma_free_devices(devs);
	RD_LOG(ERR, "verbs: no RoCE v2 GID with an IP address matches device='%s' netdev='%s' "
	       "gid_index=%d listen='%s'; GIDs seen (dev/port/index=addr(type,netdev)):%s",
	       cfg->verbs_device, cfg->verbs_netdev, cfg->verbs_gid_index, cfg->verbs_listen,
	       sl ? seen : " none");
	return -ENODEV;
}

int rd_verbs_ctl_init(struct rd_control *ctl, char *endpoint, size_t eplen)
{
	const struct rd_config *cfg = ctl->cfg;
	struct rd_verbs_ctl *v = calloc(1, sizeof(*v));
	struct rd_verbs *pv = rd_verbs_provider.priv;
	char err[300], as[RD_ADDR_PORT_STRLEN];
	struct rd_addr adv;
	int ret;

	if (!v)
		return -ENOMEM;
	rd_verbs_provider.ctl_priv = v;
	ret = rd_tcp_secret_load(&v->secret, cfg->verbs_secret_file, err, sizeof(err));
	if (ret) {
		RD_LOG(ERR, "verbs: %s", err);
		return ret;
	}
	ret = pick_gid(ctl, v);
	if (ret)
		return ret;
	v->ch = rdma_create_event_channel();
	if (!v->ch) {
		RD_LOG(ERR, "verbs: rdma_create_event_channel: %s", strerror(errno));
		return -errno;
	}
	fcntl(v->ch->fd, F_SETFL, fcntl(v->ch->fd, F_GETFL) | O_NONBLOCK);
	if (rdma_create_id(v->ch, &v->listen, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(v->listen, (struct sockaddr *)&v->addr.ss) || rdma_listen(v->listen, 64)) {
		ret = -errno;
		rd_addr_str(&v->addr, true, as, sizeof(as));
		RD_LOG(ERR, "verbs: listening on %s: %s", as, strerror(errno));
		return ret;
	}
	rd_addr_str(&v->addr, false, as, sizeof(as));
	if (v->listen->verbs != v->ctx) {
		RD_LOG(ERR, "verbs: %s belongs to device %s, not %s", as,
		       v->listen->verbs ? ibv_get_device_name(v->listen->verbs->device) : "(none)",
		       v->dev);
		return -ENODEV;
	}
	v->pd = ibv_alloc_pd(v->ctx);
	if (!v->pd)
		return -errno;
	for (int i = 0; i < 2; i++) {
		uint8_t *base;
		size_t len;

		rd_txn_mem(ctl->poller, i, &base, &len);
		v->mem_mr[i] = ibv_reg_mr(v->pd, base, len, IBV_ACCESS_LOCAL_WRITE);
		if (!v->mem_mr[i]) {
			RD_LOG(ERR, "verbs: registering %zu bytes: %s", len, strerror(errno));
			return -errno;
		}
		pv->mem[i].base = base;
		pv->mem[i].len = len;
		pv->mem[i].lkey = v->mem_mr[i]->lkey;
	}
	pv->max_msg = v->max_msg;
	rd_verbs_provider.max_msg = v->max_msg;
	/* Completion events let an adaptive poller sleep while WRs fly. */
	v->comp = ibv_create_comp_channel(v->ctx);
	if (!v->comp)
		return -errno;
	fcntl(v->comp->fd, F_SETFL, fcntl(v->comp->fd, F_GETFL) | O_NONBLOCK);
	ret = rd_poller_watch(ctl->poller, v->comp->fd);
	if (ret)
		return ret;
	pv->comp = v->comp;
	rd_verbs_provider.wake_fd = v->comp->fd;
	/* a name resolves here, once: the record carries an address */
	adv = v->addr;
	if (cfg->verbs_advertise[0] &&
	    rd_addr_resolve(cfg->verbs_advertise, (uint16_t)cfg->verbs_port, 0, &adv, err, sizeof(err))) {
		RD_LOG(ERR, "verbs: the address to advertise (transport.verbs.advertise or "
		       "ROSHM_ADVERTISE): %s", err);
		return -EINVAL;
	}
	rd_addr_str(&adv, true, err, sizeof(err));
	snprintf(endpoint, eplen, "verbs:%s", err);
	rd_addr_str(&v->addr, true, as, sizeof(as));
	RD_LOG(INFO, "verbs transport: listening on %s (%s), peers reach us at %s, %u QP(s) per "
	       "peer, sq_depth %u, signal every %u", as, v->dev, endpoint,
	       cfg->verbs_qps_per_peer, cfg->verbs_sq_depth, cfg->verbs_signal_every);
	return 0;
}

/* Destroy the QP, its id and CQ; the structure stays (the poller may look
 * at q->up at any time, and sees false). */
static void attempt_undo(struct rd_vqp *q);

static void qp_teardown(struct rd_vqp *q)
{
	attempt_undo(q);
	if (q->cq)
		ibv_destroy_cq(q->cq);
	q->cq = NULL;
}

static void qp_free(struct rd_vqp *q)
{
	if (!q)
		return;
	qp_teardown(q);
	if (q->res_mr)
		ibv_dereg_mr(q->res_mr);
	free(q->res);
	free(q->pend);
	free(q->wr);
	free(q->sge);
	free(q);
}

void rd_verbs_vin_free(struct rd_vin *in)
{
	if (in->id) {
		if (in->id->qp)
			rdma_destroy_qp(in->id);
		rdma_destroy_id(in->id);
	}
	if (in->cq)
		ibv_destroy_cq(in->cq);
	free(in);
}

void rd_verbs_peer_release(struct rd_control *ctl, struct rd_peer *p)
{
	(void)ctl;
	for (uint32_t i = 0; i < rd_vpeer(p)->nvq; i++) {
		if (rd_vpeer(p)->vq[i]->id)
			rdma_disconnect(rd_vpeer(p)->vq[i]->id);
		qp_teardown(rd_vpeer(p)->vq[i]);
	}
}

void rd_verbs_peer_free(struct rd_control *ctl, struct rd_peer *p)
{
	rd_verbs_peer_release(ctl, p);
	for (uint32_t i = 0; i < rd_vpeer(p)->nvq; i++) {
		qp_free(rd_vpeer(p)->vq[i]);
		rd_vpeer(p)->vq[i] = NULL;
	}
	rd_vpeer(p)->nvq = 0;
}

void rd_verbs_ctl_fini(struct rd_control *ctl)
{
	struct rd_verbs_ctl *v = VCTL;

	(void)ctl;
	if (!v)
		return;
	while (v->inbound) {
		struct rd_vin *in = v->inbound;

		v->inbound = in->next;
		rdma_disconnect(in->id);
		rd_verbs_vin_free(in);
	}
	if (v->listen)
		rdma_destroy_id(v->listen);
	for (int i = 0; i < 2; i++)
		if (v->mem_mr[i])
			ibv_dereg_mr(v->mem_mr[i]);
	/* The PD goes with the process: regions and clients may still hold MRs. */
	if (v->ch)
		rdma_destroy_event_channel(v->ch);
	/* v->comp stays: CQs of peers may outlive us until exit */
	free(v);
	rd_verbs_provider.ctl_priv = NULL;
}

/* ---- responder ---- */

static void dial_event(struct rd_control *ctl, struct rd_vqp *q, struct rdma_cm_event *ev);

/* One CM event. Acks it. */
static void dispatch(struct rd_control *ctl, struct rdma_cm_event *ev)
{
	struct rd_verbs_ctl *v = VCTL;
	struct rdma_cm_id *id = ev->id;
	enum rdma_cm_event_type type = ev->event;
	struct rd_vin **pp, *in = NULL;
	struct rd_vqp *q;

	if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
		bool keep = rd_verbs_on_request(ctl, id, ev->param.conn.private_data,
				       ev->param.conn.private_data_len, ev->param.conn.initiator_depth);

		rdma_ack_cm_event(ev);
		if (!keep)
			rdma_destroy_id(id);
		return;
	}
	/* Our own (requester) ids carry their QP; accepted ones do not. */
	q = id->context;
	if (q && q->dstate != VD_IDLE) {
		dial_event(ctl, q, ev); /* acks it */
		return;
	}
	for (pp = &v->inbound; *pp; pp = &(*pp)->next)
		if ((*pp)->id == id) {
			in = *pp;
			break;
		}
	rdma_ack_cm_event(ev);
	switch (type) {
	case RDMA_CM_EVENT_ESTABLISHED:
		if (in)
			RD_LOG(INFO, "verbs: node %s connected to us", in->node);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		if (type == RDMA_CM_EVENT_DEVICE_REMOVAL)
			RD_LOG(ERR, "verbs: device %s removed", v->dev);
		if (in) {
			RD_LOG(INFO, "verbs: node %s disconnected from us", in->node);
			*pp = in->next;
			rd_verbs_vin_free(in);
		} else if (q && q->peer->ctl_up) {
			/* The peer went away: fail what is in flight now rather than
			 * at the next completion error; the event that the poller
			 * posts releases the QPs and schedules the reconnect. */
			struct rd_cmd cmd = { .type = RD_CMD_PEER_DOWN, .peer = q->peer,
					      .status = -ECONNRESET, .why = "peer disconnected" };

			rd_control_cmd(ctl, &cmd);
		}
		break;
	default:
		break;
	}
}

void rd_verbs_cm_events(struct rd_control *ctl)
{
	struct rdma_cm_event *ev;

	while (VCTL && rdma_get_cm_event(VCTL->ch, &ev) == 0)
		dispatch(ctl, ev);
}

/* ---- requester: a state machine per QP, moved on by CM events ---- */

static struct rd_vqp *qp_new(struct rd_control *ctl, struct rd_peer *p, uint32_t index)
{
	const struct rd_config *cfg = ctl->cfg;
	struct rd_verbs_ctl *v = VCTL;
	struct rd_vqp *q = calloc(1, sizeof(*q));

	if (!q)
		return NULL;
	q->peer = p;
	q->index = index;
	q->depth = cfg->verbs_sq_depth;
	q->mask = q->depth - 1;
	q->res = aligned_alloc(64, (size_t)q->depth * sizeof(uint64_t));
	q->pend = calloc(q->depth, sizeof(*q->pend));
	q->wr = calloc(q->depth, sizeof(*q->wr));
	q->sge = calloc(q->depth, sizeof(*q->sge));
	if (!q->res || !q->pend || !q->wr || !q->sge)
		goto fail;
	q->res_mr = ibv_reg_mr(v->pd, q->res, (size_t)q->depth * sizeof(uint64_t),
			       IBV_ACCESS_LOCAL_WRITE);
	if (!q->res_mr)
		goto fail;
	return q;
fail:
	qp_free(q);
	return NULL;
}

static void attempt_undo(struct rd_vqp *q)
{
	if (q->id) {
		if (q->id->qp)
			rdma_destroy_qp(q->id);
		rdma_destroy_id(q->id);
	}
	q->id = NULL;
	q->qp = NULL;
	q->dstate = VD_IDLE;
}

static int ms_left(const struct rd_peer *p)
{
	uint64_t now = rd_mono_ns();

	return now >= p->dial_deadline_ns ? 1 : (int)((p->dial_deadline_ns - now) / 1000000ull) + 1;
}

/* One connect attempt of @q's current phase: a fresh id, resolve the
 * address; the route, the QP and the connect follow as events come. */
static int attempt_start(struct rd_control *ctl, struct rd_vqp *q)
{
	struct rd_verbs_ctl *v = VCTL;
	struct rd_addr src = v->addr;

	(void)ctl;
	rd_addr_set_port(&src, 0);
	if (src.ss.ss_family != q->dst.ss.ss_family) {
		RD_LOG(WARNING, "verbs: node %s is at %s, an address of the other IP family than our "
		       "GID's", q->peer->node, q->peer->endpoint);
		return -EAFNOSUPPORT;
	}
	if (rdma_create_id(v->ch, &q->id, q, RDMA_PS_TCP))
		return -errno;
	q->dstate = VD_ADDR;
	if (rdma_resolve_addr(q->id, (struct sockaddr *)&src.ss, (struct sockaddr *)&q->dst.ss,
			      ms_left(q->peer)))
		return -errno;
	return 0;
}

/* Route resolved: make the QP and send the connect request of this phase. */
static int attempt_connect(struct rd_control *ctl, struct rd_vqp *q)
{
	const struct rd_config *cfg = ctl->cfg;
	struct rd_verbs_ctl *v = VCTL;
	struct ibv_qp_init_attr qa = { 0 };
	struct rdma_conn_param cp = { 0 };
	struct roshm_verbs_proof pr = { .magic = ROSHM_VERBS_MAGIC, .kind = ROSHM_VERBS_PROOF,
					.version = ROSHM_VERBS_VERSION, .qp_index = (uint16_t)q->index };
	uint8_t tmo = (uint8_t)cfg->verbs_ack_timeout;

	if (q->id->verbs != v->ctx) {
		char ds[RD_ADDR_STRLEN];

		rd_addr_str(&q->dst, false, ds, sizeof(ds));
		RD_LOG(WARNING, "verbs: the route to %s goes through device %s, not %s",
		       ds, ibv_get_device_name(q->id->verbs->device), v->dev);
		return -EHOSTUNREACH;
	}
	rdma_set_option(q->id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &tmo, sizeof(tmo));
	qa.send_cq = qa.recv_cq = q->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.sq_sig_all = 0;
	qa.cap.max_send_wr = q->depth;
	qa.cap.max_recv_wr = 1;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	qa.cap.max_inline_data = cfg->verbs_max_inline;
	while (rdma_create_qp(q->id, v->pd, &qa)) {
		if (qa.cap.max_inline_data == 0)
			return -errno;
		qa.cap.max_inline_data /= 2; /* more than the device can inline */
	}
	q->max_inline = qa.cap.max_inline_data;
	q->qp = q->id->qp;
	if (q->phase == 1) {
		cp.private_data = &q->hello;
		cp.private_data_len = sizeof(q->hello);
	} else {
		memcpy(pr.nonce, q->chal.nonce, sizeof(pr.nonce));
		rd_verbs_vmac(&v->secret, "roshm-vreq", q->hello.nonce, q->chal.nonce, q->hello.node, q->chal.node,
		     pr.mac);
		/* the proof is copied into the request: it need not outlive this call */
		cp.private_data = &pr;
		cp.private_data_len = sizeof(pr);
	}
	cp.initiator_depth = v->max_qp_init_rd_atom < 16 ? (uint8_t)v->max_qp_init_rd_atom : 16;
	cp.responder_resources = 0; /* nobody reads from our QP */
	cp.retry_count = (uint8_t)cfg->verbs_retry_count;
	cp.rnr_retry_count = 7;
	q->dstate = VD_CONN;
	return rdma_connect(q->id, &cp) ? -errno : 0;
}

/* Log which GID the connected QP uses: it must be RoCE v2. */
static void log_qp_gid(struct rd_control *ctl, struct rd_peer *p, struct rd_vqp *q)
{
	struct rd_verbs_ctl *v = VCTL;
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	struct ibv_gid_entry ge;

	(void)ctl;
	if (ibv_query_qp(q->qp, &a, IBV_QP_AV, &ia) ||
	    ibv_query_gid_ex(v->ctx, v->port, a.ah_attr.grh.sgid_index, &ge, 0))
		return;
	if (ge.gid_type != IBV_GID_TYPE_ROCE_V2)
		RD_LOG(WARNING, "verbs: QP %u to node %s uses GID index %u (%s), not RoCE v2: check the "
		       "port's default RoCE mode (configfs rdma_cm default_roce_mode)", q->qp->qp_num,
		       p->node, a.ah_attr.grh.sgid_index, gid_type_str(ge.gid_type));
	else
		RD_LOG(INFO, "verbs: QP %u to node %s: GID index %u (RoCE v2), inline %u, depth %u",
		       q->qp->qp_num, p->node, a.ah_attr.grh.sgid_index, q->max_inline, q->depth);
}

/* Connect @p's QP number @i: a new CQ (the old one may hold the old QP's
 * flushed completions), then the hello. */
static int qp_dial(struct rd_control *ctl, struct rd_peer *p, uint32_t i)
{
	struct rd_vqp *q = rd_vpeer(p)->vq[i];

	q->cq = ibv_create_cq(VCTL->ctx, (int)q->depth, q, VCTL->comp, 0);
	if (!q->cq)
		return -errno;
	memset(&q->hello, 0, sizeof(q->hello));
	q->hello.magic = ROSHM_VERBS_MAGIC;
	q->hello.kind = ROSHM_VERBS_HELLO;
	q->hello.version = ROSHM_VERBS_VERSION;
	q->hello.qp_index = (uint16_t)q->index;
	rd_verbs_rnd(q->hello.nonce, sizeof(q->hello.nonce));
	memcpy(q->hello.node, ctl->cfg->node, strnlen(ctl->cfg->node, ROSHM_VERBS_ID - 1));
	q->phase = 1;
	return attempt_start(ctl, q);
}

/* A CM event of a QP being connected (acked here). */
static void dial_event(struct rd_control *ctl, struct rd_vqp *q, struct rdma_cm_event *ev)
{
	struct rd_verbs_ctl *v = VCTL;
	struct rd_peer *p = q->peer;
	enum rdma_cm_event_type type = ev->event;
	struct rd_vpd c;
	uint8_t expect[32];
	int ret = 0, cd = -EPROTO;

	memset(&c, 0, sizeof(c));
	/* the responder's bytes, decoded and checked once (verbs_pdata.c) */
	if (type == RDMA_CM_EVENT_REJECTED && ev->param.conn.private_data)
		cd = rd_verbs_pdata_decode(ev->param.conn.private_data,
					   ev->param.conn.private_data_len, RD_VPD_REJECT, &c);
	rdma_ack_cm_event(ev); /* before any rdma_destroy_id of it */
	switch (q->dstate) {
	case VD_ADDR:
		if (type != RDMA_CM_EVENT_ADDR_RESOLVED) {
			ret = -EHOSTUNREACH;
			break;
		}
		q->dstate = VD_ROUTE;
		ret = rdma_resolve_route(q->id, ms_left(p)) ? -errno : 0;
		break;
	case VD_ROUTE:
		ret = type == RDMA_CM_EVENT_ROUTE_RESOLVED ? attempt_connect(ctl, q) : -EHOSTUNREACH;
		break;
	case VD_CONN:
		if (q->phase == 1) {
			/* the hello is answered by a challenge in a reject */
			if (type != RDMA_CM_EVENT_REJECTED) {
				ret = type == RDMA_CM_EVENT_UNREACHABLE ? -EHOSTUNREACH : -EPROTO;
				break;
			}
			if (cd == -EPROTO) {
				ret = -ECONNREFUSED; /* nobody listening, or not roshm */
				break;
			}
			if (cd || c.kind != ROSHM_VERBS_CHALLENGE) {
				ret = -EACCES; /* denied, or malformed */
				break;
			}
			rd_verbs_vmac(&v->secret, "roshm-vsrv", q->hello.nonce, c.nonce, q->hello.node, c.node, expect);
			if (CRYPTO_memcmp(expect, c.mac, sizeof(expect))) {
				ret = -EACCES;
				break;
			}
			if (strcmp(c.node, p->node)) {
				ret = -EHOSTUNREACH; /* someone else listens there now */
				break;
			}
			q->chal = c;
			attempt_undo(q);
			q->phase = 2; /* the proof, on the QP we keep */
			ret = attempt_start(ctl, q);
			break;
		}
		if (type != RDMA_CM_EVENT_ESTABLISHED) {
			ret = type == RDMA_CM_EVENT_REJECTED ? -EACCES : -EPROTO;
			break;
		}
		q->dstate = VD_IDLE;
		log_qp_gid(ctl, p, q);
		if (q->index + 1 < rd_vpeer(p)->nvq) {
			ret = qp_dial(ctl, p, q->index + 1);
			break;
		}
		rd_peers_dial_done(ctl, p, -1, 0, q->chal.node);
		return;
	default:
		return;
	}
	if (ret) {
		rd_verbs_dial_abort(ctl, p);
		rd_peers_dial_done(ctl, p, -1, ret, "");
	}
}

int rd_verbs_dial(struct rd_control *ctl, struct rd_peer *p)
{
	int ret;

	if (!VCTL)
		return -EHOSTUNREACH;
	/* The structures are made once and kept: the poller may read them. */
	while (rd_vpeer(p)->nvq < ctl->cfg->verbs_qps_per_peer) {
		struct rd_vqp *q = qp_new(ctl, p, rd_vpeer(p)->nvq);

		if (!q)
			return -ENOMEM;
		rd_vpeer(p)->vq[rd_vpeer(p)->nvq++] = q;
	}
	rd_verbs_peer_release(ctl, p); /* an earlier, failed set */
	for (uint32_t i = 0; i < rd_vpeer(p)->nvq; i++) {
		ret = rd_parse_endpoint(p->endpoint, "verbs", &rd_vpeer(p)->vq[i]->dst);
		if (ret)
			return ret;
	}
	ret = qp_dial(ctl, p, 0);
	if (ret)
		rd_verbs_peer_release(ctl, p);
	return ret;
}

void rd_verbs_dial_abort(struct rd_control *ctl, struct rd_peer *p)
{
	rd_verbs_peer_release(ctl, p);
}

/* ---- the provider's control ops ---- */

static int verbs_cp_init(struct rd_control *ctl, struct rd_provider *pv, char *endpoint, size_t len)
{
	int ret = rd_verbs_ctl_init(ctl, endpoint, len);

	if (ret || (ret = rd_verbs_events_init(ctl)))
		return ret;
	/* Atomics of this node's pods and transaction engine on its own
	 * regions must be serialized with the peers' NIC atomics: unless the
	 * NIC's atomics are atomic with the CPU's (IBV_ATOMIC_GLOB), they go
	 * through a loopback QP (peers.c makes it). */
	if (VCTL->atomic_glob) {
		RD_LOG(INFO, "verbs: %s atomics are atomic with the CPU's (IBV_ATOMIC_GLOB): local "
		       "atomics run on the CPU", VCTL->dev);
		rd_local_provider.atomics = NULL;
	} else {
		RD_LOG(INFO, "verbs: %s atomics are not atomic with the CPU's: atomics on this node's "
		       "regions go through a loopback QP", VCTL->dev);
		rd_local_provider.atomics = pv;
	}
	return 0;
}

static void verbs_cp_fini(struct rd_control *ctl, struct rd_provider *pv)
{
	(void)pv;
	rd_verbs_ctl_fini(ctl);
}

static int verbs_peer_alloc(struct rd_control *ctl, struct rd_peer *p)
{
	(void)ctl;
	p->priv = calloc(1, sizeof(struct rd_verbs_peer));
	return p->priv ? 0 : -ENOMEM;
}

static void verbs_peer_free(struct rd_control *ctl, struct rd_peer *p)
{
	if (!p->priv)
		return;
	rd_verbs_peer_free(ctl, p);
	free(p->priv);
	p->priv = NULL;
}

static int verbs_connect(struct rd_control *ctl, struct rd_peer *p)
{
	p->dial_deadline_ns = rd_mono_ns() + (uint64_t)ctl->cfg->verbs_connect_timeout_ms * 1000000ull;
	return rd_verbs_dial(ctl, p);
}

static void verbs_peer_json(struct rd_control *ctl, const struct rd_peer *p, json_t *o)
{
	const struct rd_verbs_peer *vp = rd_vpeer(p);
	uint64_t wrs = 0, posts = 0, cqes = 0, errs = 0;

	(void)ctl;
	for (uint32_t i = 0; i < vp->nvq; i++) {
		wrs += RD_STAT_GET(vp->vq[i]->wrs);
		posts += RD_STAT_GET(vp->vq[i]->posts);
		cqes += RD_STAT_GET(vp->vq[i]->cqes);
		errs += RD_STAT_GET(vp->vq[i]->errors);
	}
	json_object_set_new(o, "qps", json_integer(vp->nvq));
	json_object_set_new(o, "wrs", json_integer((json_int_t)wrs));
	json_object_set_new(o, "doorbells", json_integer((json_int_t)posts));
	json_object_set_new(o, "cqes", json_integer((json_int_t)cqes));
	json_object_set_new(o, "wc_errors", json_integer((json_int_t)errs));
	/* refused WRs that reset the QPs; the other clients' WRs posted again */
	json_object_set_new(o, "resets", json_integer((json_int_t)RD_STAT_GET(vp->resets)));
	json_object_set_new(o, "reposted", json_integer((json_int_t)RD_STAT_GET(vp->reposted)));
}

static void verbs_peer_stats(const struct rd_peer *p, struct rd_peer_stats *st)
{
	const struct rd_verbs_peer *vp = rd_vpeer(p);

	memset(st, 0, sizeof(*st));
	st->nic = true;
	for (uint32_t i = 0; i < vp->nvq; i++) {
		st->ops += RD_STAT_GET(vp->vq[i]->wrs);
		st->doorbells += RD_STAT_GET(vp->vq[i]->posts);
		st->errors += RD_STAT_GET(vp->vq[i]->errors);
	}
	st->resets = RD_STAT_GET(vp->resets);
	st->reposted = RD_STAT_GET(vp->reposted);
}

const struct rd_provider_cp_ops rd_verbs_cp_ops = {
	.init = verbs_cp_init,
	.fini = verbs_cp_fini,
	.peer_alloc = verbs_peer_alloc,
	.peer_free = verbs_peer_free,
	.connect = verbs_connect,
	.dial_abort = rd_verbs_dial_abort,
	.release = rd_verbs_peer_release,
	.reg_client = rd_verbs_reg_client,
	.unreg_client = rd_verbs_unreg_client,
	.reg_region = rd_verbs_reg_region,
	.unreg_region = rd_verbs_unreg_region_op,
	.reg_grant = rd_verbs_reg_grant,
	.unreg_grant = rd_verbs_unreg_grant,
	.epoll_event = rd_verbs_epoll_event,
	.status_json = rd_verbs_status_json,
	.peer_json = verbs_peer_json,
	.peer_stats = verbs_peer_stats,
};
