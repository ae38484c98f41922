// SPDX-License-Identifier: MIT
/*
 * Datagram rsockets (SOCK_DGRAM) of libroshm-verbs: UDP semantics over a UD
 * QP on roshm0, for udpong and for UDP applications under librspreload.
 *
 * Each datagram rsocket is a kernel UDP socket (its descriptor is the
 * rsocket's, bind and connect are the socket's own, so the addresses are
 * the pod's) beside a UD QP. A UD QP is named by its GID and QPN, a
 * datagram by an IP address and port: the UDP socket tells one from the
 * other.
 * - A datagram to an address whose QP this rsocket does not know goes over
 *   the UDP socket, behind a header that names our QP (DATA). The receiver
 *   delivers it, learns the sender's address -> QP, and answers with its
 *   own QP (ADDR, never answered). Then datagrams go over the UD QPs, with
 *   no header: the receiver names their source by looking its QP up among
 *   the addresses it learned, and drops one it cannot name.
 * - A learned QP is used for RS_DG_FRESH_NS, then the next datagram goes
 *   over UDP again, which tells the receiver again (a peer that closed and
 *   bound again is found within that time; until then datagrams to its old
 *   QP are lost, as UDP may lose them).
 * - Both ends must be this library, and pods of one tenant (roshmd carries
 *   UD datagrams within a tenant only; across tenants they are lost).
 *
 * Trust: a UDP message is copied once, checked (rs_dg_parse) and used from
 * the copy; its source address is the kernel's. A UD datagram's source QP
 * and GID are what its sender wrote (ud.c), so a pod of the tenant can
 * claim another's QP as a UDP sender can forge a source address; it can
 * never read what is not sent to it, nor reach another tenant. Datagrams
 * are at most the port's MTU (EMSGSIZE beyond); a receive shorter than the
 * datagram truncates it (MSG_TRUNC), as UDP does.
 */
#define _GNU_SOURCE
#include "rsocket_int.h"

#define RS_DG_FRESH_NS (5000ull * 1000000)      /* how long a learned QP is used */
#define RS_DG_PEERS 64                          /* addresses known, least recently learned go */
#define RS_DG_UQ 16                             /* UDP datagrams taken in, not yet read */
#define RS_DG_UDP_BATCH 32                      /* UDP messages read per look */
#define RS_DG_TX_MIN 4u
#define RS_DG_RX_MIN 16u
#define RS_DG_SLOTS_MAX 1024u
#define RS_DG_LINGER_NS (200ull * 1000000)      /* close waits this long for sends */
#define RS_DG_QKEY 0x01234567u                  /* rdma_cm's RDMA_UDP_QKEY */
#define RS_GRH 40u

struct rs_dg_peer {
	struct sockaddr_storage addr;
	socklen_t len;
	uint8_t gid[16];
	uint32_t qpn;
	struct ibv_ah *ah;
	uint64_t learned;
};

struct rs_dg_ud {             /* a UD RECV that completed, not yet read */
	uint32_t slot, len, qpn;
};

struct rs_dg_udp {            /* a datagram that came over UDP, not yet read */
	struct sockaddr_storage from;
	socklen_t fromlen;
	uint32_t len;
	uint8_t *data;
};

struct rs_dg {
	int family;
	bool ready, connected;
	struct sockaddr_storage peer;           /* rconnect's */
	socklen_t peerlen;
	struct ibv_context *ctx;
	struct ibv_qp *qp;
	uint32_t mtu, ntx, nrx, stride;
	uint32_t tx_head, tx_tail;              /* sends posted, completed */
	uint8_t gid[16];
	struct rs_dg_ud *rq;                    /* nrx entries */
	uint32_t rq_head, rq_tail;
	struct rs_dg_udp uq[RS_DG_UQ];
	uint32_t uq_head, uq_tail;
	uint8_t *scratch;                       /* one UDP message */
	struct rs_dg_peer peers[RS_DG_PEERS];
	uint64_t lost;                          /* datagrams from QPs we cannot name */
};

static bool sa_eq(const struct sockaddr *a, const struct sockaddr *b)
{
	if (a->sa_family != b->sa_family)
		return false;
	if (a->sa_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;

		return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	if (a->sa_family == AF_INET6) {
		const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;

		return x->sin6_port == y->sin6_port &&
		       !memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr));
	}
	return false;
}

/* A destination the caller gave: of our family, whole. */
static int rs_dg_check_addr(const struct rs_dg *d, const struct sockaddr *a, socklen_t l)
{
	if (!a)
		return EDESTADDRREQ;
	if (l < sizeof(sa_family_t))
		return EINVAL;
	if (a->sa_family != AF_INET && a->sa_family != AF_INET6)
		return EAFNOSUPPORT;
	if (a->sa_family != d->family)
		return EAFNOSUPPORT;
	if (l < (a->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6)))
		return EINVAL;
	return 0;
}

int rs_dg_socket(int domain, int type)
{
	struct rs *rs;
	int fd, ret;

	fd = socket(domain, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	rs = rs_new();
	if (!rs) {
		close(fd);
		return rs_fail(ENOMEM);
	}
	rs->dg = calloc(1, sizeof(*rs->dg));
	if (!rs->dg) {
		close(fd);
		rs_put(rs);
		return rs_fail(ENOMEM);
	}
	rs->dg->family = domain;
	rs->fd = fd;
	rs->state = RS_CONN;   /* nothing to connect: data calls go */
	if (type & SOCK_NONBLOCK)
		rs->fl |= O_NONBLOCK;
	ret = rs_publish(rs);
	if (ret) {
		rs_put(rs);   /* closes fd */
		return rs_fail(ret);
	}
	return fd;
}

void rs_dg_free(struct rs *rs)
{
	struct rs_dg *d = rs->dg;

	if (!d)
		return;
	if (d->qp)
		ibv_destroy_qp(d->qp);
	for (int i = 0; i < RS_DG_PEERS; i++)
		if (d->peers[i].ah)
			ibv_destroy_ah(d->peers[i].ah);
	if (rs->cq)
		ibv_destroy_cq(rs->cq);
	if (rs->cch)
		ibv_destroy_comp_channel(rs->cch);
	if (rs->mr)
		ibv_dereg_mr(rs->mr);
	if (rs->pd)
		ibv_dealloc_pd(rs->pd);
	rs->cq = NULL;
	rs->cch = NULL;
	rs->mr = NULL;
	rs->pd = NULL;
	if (d->ctx)
		ibv_close_device(d->ctx);
	for (int i = 0; i < RS_DG_UQ; i++)
		free(d->uq[i].data);
	free(rs->buf);
	rs->buf = NULL;
	free(d->rq);
	free(d->scratch);
	if (rs->fd >= 0)
		close(rs->fd);
	free(d);
	rs->dg = NULL;
}

static int rs_dg_post_recv(struct rs *rs, uint32_t slot)
{
	struct rs_dg *d = rs->dg;
	struct ibv_sge sge = {
		.addr = (uintptr_t)(rs->buf + (size_t)(d->ntx + slot) * d->stride),
		.length = d->stride,
		.lkey = rs->mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(d->qp, &wr, &bad);
}

static uint32_t rs_dg_slots(int bytes, uint32_t mtu, uint32_t lo)
{
	uint64_t n = bytes > 0 ? (uint64_t)bytes / mtu : 0;

	return n < lo ? lo : n > RS_DG_SLOTS_MAX ? RS_DG_SLOTS_MAX : (uint32_t)n;
}

/* The UD QP, its CQ and slots, RECVs posted: at the first call that needs
 * them (the buffer sizes set before count). 0 or an errno. */
static int rs_dg_setup(struct rs *rs)
{
	struct rs_dg *d = rs->dg;
	struct ibv_device **l;
	struct ibv_port_attr pa;
	struct ibv_qp_init_attr qa;
	struct ibv_qp_attr a;
	union ibv_gid gid;
	size_t size;
	int n = 0;

	if (d->ready)
		return 0;
	if (rs->broken)
		return rs->err;
	l = ibv_get_device_list(&n);
	if (l && n > 0)
		d->ctx = ibv_open_device(l[0]);
	if (l)
		ibv_free_device_list(l);
	if (!d->ctx)
		return ENODEV;
	if (ibv_query_port(d->ctx, 1, &pa) || ibv_query_gid(d->ctx, 1, 0, &gid))
		return EIO;
	d->mtu = pa.active_mtu >= IBV_MTU_256 && pa.active_mtu <= IBV_MTU_4096
			 ? 128u << pa.active_mtu : 1024u;
	memcpy(d->gid, gid.raw, sizeof(d->gid));
	d->stride = RS_GRH + d->mtu;
	d->ntx = rs->sqsize ? rs_dg_slots(rs->sqsize * (int)d->mtu, d->mtu, RS_DG_TX_MIN)
			    : rs_dg_slots(rs->sndbuf, d->mtu, RS_DG_TX_MIN);
	d->nrx = rs->rqsize ? rs_dg_slots(rs->rqsize * (int)d->mtu, d->mtu, RS_DG_RX_MIN)
			    : rs_dg_slots(rs->rcvbuf, d->mtu, RS_DG_RX_MIN);
	size = (size_t)(d->ntx + d->nrx) * d->stride;
	rs->buf = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);
	d->rq = calloc(d->nrx, sizeof(*d->rq));
	d->scratch = malloc(sizeof(struct rs_dg_hdr) + d->mtu + 1);
	for (int i = 0; i < RS_DG_UQ; i++)
		if (!(d->uq[i].data = malloc(d->mtu)))
			return ENOMEM;
	if (!rs->buf || !d->rq || !d->scratch)
		return ENOMEM;
	rs->pd = ibv_alloc_pd(d->ctx);
	if (!rs->pd)
		return errno ? errno : ENOMEM;
	rs->mr = ibv_reg_mr(rs->pd, rs->buf, size, IBV_ACCESS_LOCAL_WRITE);
	if (!rs->mr)
		return errno ? errno : ENOMEM;
	rs->cch = ibv_create_comp_channel(d->ctx);
	if (!rs->cch)
		return errno ? errno : ENOMEM;
	{
		int f = fcntl(rs->cch->fd, F_GETFL);

		if (f >= 0)
			fcntl(rs->cch->fd, F_SETFL, f | O_NONBLOCK);
	}
	rs->cq = ibv_create_cq(d->ctx, (int)(d->ntx + d->nrx), rs, rs->cch, 0);
	if (!rs->cq)
		return errno ? errno : ENOMEM;
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = rs->cq;
	qa.recv_cq = rs->cq;
	qa.qp_type = IBV_QPT_UD;
	qa.sq_sig_all = 1;
	qa.cap.max_send_wr = d->ntx;
	qa.cap.max_recv_wr = d->nrx;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	d->qp = ibv_create_qp(rs->pd, &qa);
	if (!d->qp)
		return errno ? errno : EIO;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qkey = RS_DG_QKEY;
	if (ibv_modify_qp(d->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		return errno ? errno : EIO;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(d->qp, &a, IBV_QP_STATE))
		return errno ? errno : EIO;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if (ibv_modify_qp(d->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		return errno ? errno : EIO;
	for (uint32_t i = 0; i < d->nrx; i++)
		if (rs_dg_post_recv(rs, i))
			return EIO;
	d->ready = true;
	return 0;
}

/* Set up, or the socket is broken for good with why. */
static int rs_dg_ready(struct rs *rs)
{
	int e = rs_dg_setup(rs);

	if (e)
		rs_break(rs, e);
	return e;
}

/* ------------------------------------------------------- addresses */

static struct rs_dg_peer *rs_dg_find(struct rs_dg *d, const struct sockaddr *a)
{
	for (int i = 0; i < RS_DG_PEERS; i++)
		if (d->peers[i].len && sa_eq((const struct sockaddr *)&d->peers[i].addr, a))
			return &d->peers[i];
	return NULL;
}

/* The address a datagram from (gid, qpn) came from: the one that said so
 * last over UDP, or NULL. */
static struct rs_dg_peer *rs_dg_named(struct rs_dg *d, const uint8_t *gid, uint32_t qpn)
{
	struct rs_dg_peer *best = NULL;

	for (int i = 0; i < RS_DG_PEERS; i++) {
		struct rs_dg_peer *p = &d->peers[i];

		if (p->len && p->qpn == qpn && !memcmp(p->gid, gid, 16) &&
		    (!best || p->learned > best->learned))
			best = p;
	}
	return best;
}

/* What a UDP message from @from said of its sender's QP. */
static void rs_dg_learn(struct rs *rs, const struct sockaddr *from, socklen_t len,
			const uint8_t gid[16], uint32_t qpn)
{
	struct rs_dg *d = rs->dg;
	struct rs_dg_peer *p = rs_dg_find(d, from);

	if (!p) {
		p = &d->peers[0];
		for (int i = 0; i < RS_DG_PEERS; i++) {
			if (!d->peers[i].len) {
				p = &d->peers[i];
				break;
			}
			if (d->peers[i].learned < p->learned)
				p = &d->peers[i];
		}
	}
	if (p->len && (p->qpn != qpn || memcmp(p->gid, gid, 16))) {
		if (p->ah)
			ibv_destroy_ah(p->ah);
		p->ah = NULL;
	}
	if (len > sizeof(p->addr))
		len = sizeof(p->addr);
	memcpy(&p->addr, from, len);
	p->len = len;
	memcpy(p->gid, gid, 16);
	p->qpn = qpn;
	p->learned = rs_now_ns();
}

/* ------------------------------------------------------- progress */

static void rs_dg_send_udp(struct rs *rs, uint8_t op, const struct iovec *v, int n,
			   const struct sockaddr *to, socklen_t tolen, int *err)
{
	struct rs_dg *d = rs->dg;
	struct rs_dg_hdr h;
	struct iovec iov[1 + IOV_MAX];
	struct msghdr m = { .msg_name = (void *)to, .msg_namelen = tolen, .msg_iov = iov };

	rs_dg_make(op, d->qp->qp_num, d->gid, &h);
	iov[0] = (struct iovec){ .iov_base = &h, .iov_len = sizeof(h) };
	for (int i = 0; i < n && i < IOV_MAX; i++)
		iov[1 + i] = v[i];
	m.msg_iovlen = 1 + (size_t)(n < IOV_MAX ? n : IOV_MAX);
	if (sendmsg(rs->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && err)
		*err = errno;
}

/* Read the UDP messages waiting (a bounded batch, while there is room for
 * their datagrams): learn, answer, keep the datagrams. */
static void rs_dg_udp_in(struct rs *rs)
{
	struct rs_dg *d = rs->dg;

	for (int k = 0; k < RS_DG_UDP_BATCH && d->uq_tail - d->uq_head < RS_DG_UQ; k++) {
		struct sockaddr_storage from;
		socklen_t fl = sizeof(from);
		uint8_t op, gid[16];
		uint32_t qpn;
		ssize_t n = recvfrom(rs->fd, d->scratch, sizeof(struct rs_dg_hdr) + d->mtu + 1,
				     MSG_DONTWAIT, (struct sockaddr *)&from, &fl);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;   /* EAGAIN; an ICMP error of an earlier send is no datagram */
		}
		if (fl > sizeof(from) || rs_dg_parse(d->scratch, (size_t)n, d->mtu, &op, &qpn, gid))
			continue;   /* not ours: dropped */
		if (d->connected && !sa_eq((struct sockaddr *)&from, (struct sockaddr *)&d->peer))
			continue;
		rs_dg_learn(rs, (struct sockaddr *)&from, fl, gid, qpn);
		if (op == RS_DG_DATA) {
			struct rs_dg_udp *u = &d->uq[d->uq_tail % RS_DG_UQ];

			u->from = from;
			u->fromlen = fl;
			u->len = (uint32_t)((size_t)n - sizeof(struct rs_dg_hdr));
			memcpy(u->data, d->scratch + sizeof(struct rs_dg_hdr), u->len);
			d->uq_tail++;
			rs_dg_send_udp(rs, RS_DG_ADDR, NULL, 0, (struct sockaddr *)&from, fl, NULL);
		}
	}
}

/* Completions: sends free their slots, RECVs join the queue to be read. */
static void rs_dg_cq(struct rs *rs)
{
	struct rs_dg *d = rs->dg;
	struct ibv_wc wc[16];

	for (int b = 0; b < RS_POLL_BATCHES; b++) {
		int n = ibv_poll_cq(rs->cq, 16, wc);

		if (n <= 0) {
			if (n < 0)
				rs_break(rs, EIO);
			return;
		}
		for (int i = 0; i < n; i++) {
			if (wc[i].wr_id == RS_WR_DATA) {
				d->tx_tail++;
				if (wc[i].status == IBV_WC_WR_FLUSH_ERR)
					rs_break(rs, EIO);
				continue;
			}
			if (wc[i].wr_id >= d->nrx)
				continue;
			if (wc[i].status != IBV_WC_SUCCESS) {
				if (wc[i].status == IBV_WC_WR_FLUSH_ERR)
					rs_break(rs, EIO);
				else if (rs_dg_post_recv(rs, (uint32_t)wc[i].wr_id))
					rs_break(rs, EIO);
				continue;
			}
			d->rq[d->rq_tail % d->nrx] = (struct rs_dg_ud){
				.slot = (uint32_t)wc[i].wr_id, .len = wc[i].byte_len,
				.qpn = wc[i].src_qp };
			d->rq_tail++;
		}
		if (n < 16)
			return;
	}
}

static void rs_dg_progress(struct rs *rs)
{
	if (!rs->dg->ready)
		return;
	rs_dg_cq(rs);
	rs_dg_udp_in(rs);
}

static bool rs_dg_can_send(const struct rs_dg *d)
{
	return d->tx_head - d->tx_tail < d->ntx;
}

short rs_dg_revents(struct rs *rs, short events)
{
	struct rs_dg *d = rs->dg;
	short r = 0;

	if (rs->closed)
		return POLLNVAL;
	if (!rs->broken)
		rs_dg_ready(rs);   /* a poll before any datagram: now the QP can take them */
	rs_dg_progress(rs);
	if (rs->broken)
		return (POLLERR | POLLIN | POLLOUT) & (events | POLLERR);
	if (d->rq_head != d->rq_tail || d->uq_head != d->uq_tail || rs->rd_shut)
		r |= POLLIN | (events & POLLRDNORM);
	if (rs_dg_can_send(d) || rs->tx_shut)
		r |= POLLOUT | (events & POLLWRNORM);
	return r & (events | POLLERR | POLLHUP | POLLNVAL);
}

/* What a sleeper of rs sleeps on: the UDP socket (while there is room for
 * what it brings) and the completion channel; the CQ armed. */
int rs_dg_pollfds(struct rs *rs, struct pollfd *pf)
{
	struct rs_dg *d = rs->dg;
	int n = 0;

	if (!d->ready || d->uq_tail - d->uq_head < RS_DG_UQ)
		pf[n++] = (struct pollfd){ .fd = rs->fd, .events = POLLIN };
	if (d->ready && rs->cch)
		pf[n++] = (struct pollfd){ .fd = rs->cch->fd, .events = POLLIN };
	return n;
}

/* ------------------------------------------------------- calls */

int rs_dg_bind(struct rs *rs, const struct sockaddr *a, socklen_t l)
{
	if (bind(rs->fd, a, l))
		return errno;
	return 0;
}

int rs_dg_connect(struct rs *rs, const struct sockaddr *a, socklen_t l)
{
	struct rs_dg *d = rs->dg;
	int e;

	if (a && l >= sizeof(sa_family_t) && a->sa_family == AF_UNSPEC) {
		if (connect(rs->fd, a, l))
			return errno;
		d->connected = false;
		return 0;
	}
	e = rs_dg_check_addr(d, a, l);
	if (e)
		return e == EDESTADDRREQ ? EINVAL : e;
	if (connect(rs->fd, a, l))
		return errno;
	memset(&d->peer, 0, sizeof(d->peer));
	memcpy(&d->peer, a, l > sizeof(d->peer) ? sizeof(d->peer) : l);
	d->peerlen = l > sizeof(d->peer) ? sizeof(d->peer) : l;
	d->connected = true;
	/* what came from others before is not for this socket any more */
	while (d->uq_head != d->uq_tail &&
	       !sa_eq((struct sockaddr *)&d->uq[d->uq_head % RS_DG_UQ].from, a))
		d->uq_head++;
	return 0;
}

int rs_dg_name(struct rs *rs, struct sockaddr *a, socklen_t *l, bool peer)
{
	struct rs_dg *d = rs->dg;

	if (!peer)
		return getsockname(rs->fd, a, l) ? errno : 0;
	if (!d->connected)
		return ENOTCONN;
	if (a)
		memcpy(a, &d->peer, *l < d->peerlen ? *l : d->peerlen);
	*l = d->peerlen;
	return 0;
}

static size_t iov_len(const struct iovec *v, int n)
{
	size_t t = 0;

	for (int i = 0; i < n; i++)
		t += v[i].iov_len;
	return t;
}

static size_t iov_copy_in(uint8_t *dst, const struct iovec *v, int n)
{
	size_t t = 0;

	for (int i = 0; i < n; i++) {
		memcpy(dst + t, v[i].iov_base, v[i].iov_len);
		t += v[i].iov_len;
	}
	return t;
}

static size_t iov_copy_out(const struct iovec *v, int n, const uint8_t *src, size_t len)
{
	size_t t = 0;

	for (int i = 0; i < n && t < len; i++) {
		size_t k = v[i].iov_len < len - t ? v[i].iov_len : len - t;

		memcpy(v[i].iov_base, src + t, k);
		t += k;
	}
	return t;
}

static bool rs_dg_nonblock(const struct rs *rs, int flags)
{
	return (rs->fl & O_NONBLOCK) || (flags & MSG_DONTWAIT);
}

/* One datagram to @to (or the connected peer): over the UD QP when its QP
 * is known and fresh, else over UDP. The lock is held. */
static ssize_t rs_dg_sendv(struct rs *rs, const struct iovec *v, int n, int flags,
			   const struct sockaddr *to, socklen_t tolen)
{
	struct rs_dg *d = rs->dg;
	size_t len = iov_len(v, n);
	struct rs_dg_peer *p;
	int e;

	if (flags & ~(MSG_DONTWAIT | MSG_NOSIGNAL | MSG_MORE | MSG_CONFIRM))
		return -EOPNOTSUPP;
	if (rs->tx_shut)
		return -EPIPE;
	if (!to && d->connected) {   /* an address given goes first, as UDP's */
		to = (struct sockaddr *)&d->peer;
		tolen = d->peerlen;
	}
	e = rs_dg_check_addr(d, to, tolen);
	if (e)
		return -e;
	if ((e = rs_dg_ready(rs)))
		return -e;
	if (len > d->mtu)
		return -EMSGSIZE;
	for (;;) {
		rs_dg_progress(rs);
		if (rs->broken)
			return -(rs->err ? rs->err : EIO);
		p = rs_dg_find(d, to);
		if (!p || rs_now_ns() - p->learned >= RS_DG_FRESH_NS) {
			e = 0;
			rs_dg_send_udp(rs, RS_DG_DATA, v, n, to, tolen, &e);
			/* a full socket buffer loses the datagram, as UDP
			 * may; a refused one is the caller's to know */
			return e && e != EAGAIN && e != ENOBUFS ? -e : (ssize_t)len;
		}
		if (rs_dg_can_send(d))
			break;
		if (rs_dg_nonblock(rs, flags))
			return -EAGAIN;
		if ((e = rs_wait(rs, POLLOUT, -1)))
			return -e;
	}
	if (!p->ah) {
		struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1 };

		memcpy(aa.grh.dgid.raw, p->gid, 16);
		aa.grh.hop_limit = 64;
		p->ah = ibv_create_ah(rs->pd, &aa);
		if (!p->ah)
			return -(errno ? errno : ENOMEM);
	}
	{
		uint8_t *dst = rs->buf + (size_t)(d->tx_head % d->ntx) * d->stride;
		struct ibv_sge sge = { .addr = (uintptr_t)dst, .length = (uint32_t)len,
				       .lkey = rs->mr->lkey };
		struct ibv_send_wr wr, *bad;
		int ret;

		iov_copy_in(dst, v, n);
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = RS_WR_DATA;
		wr.opcode = IBV_WR_SEND;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.sg_list = len ? &sge : NULL;
		wr.num_sge = len ? 1 : 0;
		wr.wr.ud.ah = p->ah;
		wr.wr.ud.remote_qpn = p->qpn;
		wr.wr.ud.remote_qkey = RS_DG_QKEY;
		ret = ibv_post_send(d->qp, &wr, &bad);
		if (ret) {
			rs_break(rs, ret);
			return -ret;
		}
		d->tx_head++;
	}
	return (ssize_t)len;
}

static void rs_dg_name_out(const struct sockaddr *sa, socklen_t sl, struct sockaddr *a,
			   socklen_t *l)
{
	if (a && l) {
		memcpy(a, sa, *l < sl ? *l : sl);
		*l = sl;
	} else if (l) {
		*l = sl;
	}
}

/* The next datagram, from the UD QP or UDP, into @v; its source into
 * @a / @l; MSG_TRUNC in @mflags when it did not fit. The lock is held. */
static ssize_t rs_dg_recvv(struct rs *rs, const struct iovec *v, int n, int flags,
			   struct sockaddr *a, socklen_t *l, int *mflags)
{
	struct rs_dg *d = rs->dg;
	size_t room = iov_len(v, n);
	int e;

	if (flags & ~(MSG_DONTWAIT | MSG_PEEK | MSG_TRUNC | MSG_NOSIGNAL | MSG_WAITALL))
		return -EOPNOTSUPP;
	if ((e = rs_dg_ready(rs)))
		return -e;
	for (;;) {
		rs_dg_progress(rs);
		if (d->uq_head != d->uq_tail) {
			struct rs_dg_udp *u = &d->uq[d->uq_head % RS_DG_UQ];
			size_t got = iov_copy_out(v, n, u->data, u->len);

			rs_dg_name_out((struct sockaddr *)&u->from, u->fromlen, a, l);
			if (u->len > room && mflags)
				*mflags |= MSG_TRUNC;
			if (!(flags & MSG_PEEK))
				d->uq_head++;
			return (flags & MSG_TRUNC) ? (ssize_t)u->len : (ssize_t)got;
		}
		while (d->rq_head != d->rq_tail) {
			struct rs_dg_ud x = d->rq[d->rq_head % d->nrx];
			const uint8_t *slot = rs->buf + (size_t)(d->ntx + x.slot) * d->stride;
			struct rs_dg_peer *p;
			struct ibv_grh g;
			uint32_t len;

			/* the GRH and length are the verbs layer's, from
			 * what the sender wrote: checked, from a copy */
			memcpy(&g, slot, sizeof(g));
			len = x.len >= RS_GRH && x.len - RS_GRH <= d->mtu ? x.len - RS_GRH : UINT32_MAX;
			p = len == UINT32_MAX ? NULL : rs_dg_named(d, g.sgid.raw, x.qpn);
			if (p && d->connected &&
			    !sa_eq((struct sockaddr *)&p->addr, (struct sockaddr *)&d->peer))
				p = NULL;
			if (!p) {
				d->lost++;   /* a source we cannot name: dropped */
				d->rq_head++;
				if (rs_dg_post_recv(rs, x.slot))
					rs_break(rs, EIO);
				continue;
			}
			size_t got = iov_copy_out(v, n, slot + RS_GRH, len);

			rs_dg_name_out((struct sockaddr *)&p->addr, p->len, a, l);
			if (len > room && mflags)
				*mflags |= MSG_TRUNC;
			if (!(flags & MSG_PEEK)) {
				d->rq_head++;
				if (rs_dg_post_recv(rs, x.slot))
					rs_break(rs, EIO);
			}
			return (flags & MSG_TRUNC) ? (ssize_t)len : (ssize_t)got;
		}
		if (rs->broken)
			return -(rs->err ? rs->err : EIO);
		if (rs->rd_shut)
			return 0;
		if (rs_dg_nonblock(rs, flags))
			return -EAGAIN;
		if ((e = rs_wait(rs, POLLIN, -1)))
			return -e;
	}
}

ssize_t rs_dg_send(struct rs *rs, const struct iovec *v, int n, int flags,
		   const struct sockaddr *to, socklen_t tolen)
{
	ssize_t r;

	pthread_mutex_lock(&rs->lock);
	r = rs_dg_sendv(rs, v, n, flags, to, tolen);   /* no SIGPIPE: rsockets raise none */
	pthread_mutex_unlock(&rs->lock);
	return r < 0 ? rs_fail((int)-r) : r;
}

ssize_t rs_dg_recv(struct rs *rs, const struct iovec *v, int n, int flags, struct sockaddr *a,
		   socklen_t *l, int *mflags)
{
	ssize_t r;

	pthread_mutex_lock(&rs->lock);
	r = rs_dg_recvv(rs, v, n, flags, a, l, mflags);
	pthread_mutex_unlock(&rs->lock);
	return r < 0 ? rs_fail((int)-r) : r;
}

int rs_dg_shutdown(struct rs *rs, int how)
{
	struct rs_dg *d = rs->dg;

	if (!d->connected)
		return ENOTCONN;
	pthread_mutex_lock(&rs->lock);
	if (how != SHUT_WR)
		rs->rd_shut = true;
	if (how != SHUT_RD)
		rs->tx_shut = true;
	rs_kick(rs);
	pthread_mutex_unlock(&rs->lock);
	return 0;
}

/* close: the datagrams posted leave first (RS_DG_LINGER_NS at most), as
 * a UDP socket's close sends what it queued. The lock is held. */
void rs_dg_close(struct rs *rs)
{
	struct rs_dg *d = rs->dg;
	uint64_t end = rs_now_ns() + RS_DG_LINGER_NS;

	while (d->ready && !rs->broken && d->tx_head != d->tx_tail && rs_now_ns() < end) {
		rs_dg_cq(rs);
		if (d->tx_head == d->tx_tail)
			break;
		pthread_mutex_unlock(&rs->lock);
		usleep(200);
		pthread_mutex_lock(&rs->lock);
	}
}
