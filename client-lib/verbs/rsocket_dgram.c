// SPDX-License-Identifier: MIT
/*
 * Datagram rsockets (SOCK_DGRAM) of libroshm-verbs: UDP semantics over a UD
 * QP on roshm0, for udpong and for UDP applications under librspreload.
 *
 * Each datagram rsocket is a kernel UDP socket (its descriptor is the
 * rsocket's, bind and connect are the socket's own, so the addresses are
 * the pod's) beside a UD QP. A UD QP is named by its GID and QPN, a
 * datagram by an IP address and port; the UDP socket, whose source
 * addresses the kernel vouches for, ties one to the other:
 * - Tokens: the token a socket gives address A is HMAC-SHA256 of A under
 *   a random key of the socket's (rsocket_dgram_peer.c). A UD datagram
 *   names its sender's address and carries the token the receiver gave
 *   that address; the receiver takes it as coming from there only when the
 *   token is right, and drops it otherwise. Naming needs no table, so no
 *   flood of strangers can make a socket forget a peer.
 * - A datagram to an address not confirmed yet goes over UDP (DATA). The
 *   receiver delivers it and answers (ADDR) with its QP and the token it
 *   gives the sender's address; the sender learns its own address as that
 *   peer reaches it from where the ADDR arrived (IP_PKTINFO).
 * - An ADDR is a claim, not a proof (anybody may claim any QP in one): an
 *   ADDR from an address we sent no DATA to, or naming our own QP, is
 *   ignored, and a claim is probed: a PROBE over UD to the claimed QP
 *   (nonce 1, under the token, naming our address) and a CHALLENGE over
 *   UDP to the claimed address (nonce 2). Only the QP's owner reads nonce
 *   1, and only if the token is the one it gave our address; only the
 *   address's owner reads nonce 2 (unless it is on the path). The owner of
 *   both answers a PROOF with both nonces, over UDP, to the address the
 *   token names. A PROOF from the claimed address with both nonces of the
 *   current claim's probe confirms it: from then on datagrams to that
 *   address go over UD, with the token, through roshmd like any verbs
 *   traffic. A relay cannot help a stranger: the QP's owner answers only
 *   the address its token names, which is the prober's.
 * - A confirmation holds RS_DG_FRESH_NS, then the next datagram goes over
 *   UDP again and the exchange repeats (a peer that closed and bound again
 *   is found within that time; until then datagrams to it are lost, as UDP
 *   may lose them). Probes: one per address per RS_DG_PROBE_NS whatever it
 *   claims, at most RS_DG_PROBES per period in all (a probe to a QPN that
 *   names no QP holds the send queue while the verbs layer looks it up);
 *   a new claim's probe has new nonces.
 * - Both ends must be this library, and pods of one tenant (roshmd carries
 *   UD datagrams within a tenant only; across tenants nothing confirms,
 *   and datagrams keep going over UDP).
 *
 * Trust: every message, UDP or UD, is copied once, checked (rs_dg_parse,
 * rs_dg_ud_parse) and used from the copy. The table of addresses we send
 * to holds RS_DG_PEERS (least recently used first out: a forgotten peer's
 * datagrams go over UDP again, none is lost for it); proofs owed wait in
 * RS_DG_PEND entries. Datagrams are at most the port's MTU less the UD
 * header (EMSGSIZE beyond); a receive shorter than the datagram truncates
 * it (MSG_TRUNC), as UDP does.
 */
#define _GNU_SOURCE
#include <sys/random.h>

#include "rsocket_dgram.h"

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

	int one = 1;

	fd = socket(domain, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	/* where each UDP message arrived: our address as its sender reaches us */
	if (domain == AF_INET ? setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one))
			      : setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof(one))) {
		close(fd);
		return -1;
	}
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
	int n = 0, e;

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
	d->stride = pa.active_mtu >= IBV_MTU_256 && pa.active_mtu <= IBV_MTU_4096
			    ? 128u << pa.active_mtu : 1024u;
	d->mtu = d->stride - RS_DG_UDH;   /* a datagram's payload */
	memcpy(d->gid, gid.raw, sizeof(d->gid));
	d->stride += RS_GRH;
	if (getrandom(d->key, sizeof(d->key), 0) != sizeof(d->key))
		return EIO;
	d->ntx = rs->sqsize ? rs_dg_slots(rs->sqsize * (int)d->mtu, d->mtu, RS_DG_TX_MIN)
			    : rs_dg_slots(rs->sndbuf, d->mtu, RS_DG_TX_MIN);
	d->nrx = rs->rqsize ? rs_dg_slots(rs->rqsize * (int)d->mtu, d->mtu, RS_DG_RX_MIN)
			    : rs_dg_slots(rs->rcvbuf, d->mtu, RS_DG_RX_MIN);
	size = (size_t)(d->ntx + d->nrx) * d->stride;
	rs->buf = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);
	d->rq = calloc(d->nrx, sizeof(*d->rq));
	d->scratch = malloc(sizeof(struct rs_dg_hdr) + d->mtu + 1);   /* + 1: too long is seen */
	for (int i = 0; i < RS_DG_UQ; i++)
		if (!(d->uq[i].data = malloc(d->mtu)))
			return ENOMEM;
	if (!rs->buf || !d->rq || !d->scratch)
		return ENOMEM;
	e = rs_verbs_bufs(rs, d->ctx, size, (int)(d->ntx + d->nrx));
	if (e)
		return e;
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
	/* the options that shape a bind are the UDP socket's */
	if (rs->reuse)
		setsockopt(rs->fd, SOL_SOCKET, SO_REUSEADDR, &rs->reuse, sizeof(rs->reuse));
	if (rs->v6only >= 0 && rs->dg->family == AF_INET6)
		setsockopt(rs->fd, IPPROTO_IPV6, IPV6_V6ONLY, &rs->v6only, sizeof(rs->v6only));
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
	d->connected = true;   /* what others sent before is dropped when read */
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

/* The bytes of an iovec: -EINVAL when they pass SSIZE_MAX, -EFAULT for a
 * part with bytes and no address (as the kernel's checks) */
static ssize_t iov_len(const struct iovec *v, int n)
{
	size_t t = 0;

	for (int i = 0; i < n; i++) {
		if (v[i].iov_len > (size_t)SSIZE_MAX - t)
			return -EINVAL;
		if (v[i].iov_len && !v[i].iov_base)
			return -EFAULT;
		t += v[i].iov_len;
	}
	return (ssize_t)t;
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

/* An ICMP error a connected socket's earlier send drew: this call's. */
static int rs_dg_soerr(struct rs_dg *d)
{
	int e = d->connected ? d->soerr : 0;

	d->soerr = 0;
	return e;
}

/* One datagram to @to (or the connected peer): over UD when that address
 * is confirmed, else over UDP. The lock is held. */
static ssize_t rs_dg_sendv(struct rs *rs, const struct iovec *v, int n, int flags,
			   const struct sockaddr *to, socklen_t tolen)
{
	struct rs_dg *d = rs->dg;
	ssize_t len = iov_len(v, n);
	struct rs_dg_peer *p;
	uint64_t now;
	int e;

	if (flags & ~(MSG_DONTWAIT | MSG_NOSIGNAL | MSG_MORE | MSG_CONFIRM))
		return -EOPNOTSUPP;
	if (len < 0)
		return len;
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
	if ((size_t)len > d->mtu)
		return -EMSGSIZE;
	for (;;) {
		rs_dg_progress(rs);
		if (rs->broken)
			return -(rs->err ? rs->err : EIO);
		if ((e = rs_dg_soerr(d)))
			return -e;
		now = rs_now_ns();
		p = rs_dg_peer(d, to, tolen);
		p->used_ns = now;
		if (!rs_dg_confirmed(p, now)) {
			p->asked = true;
			e = rs_dg_send_udp(rs, RS_DG_DATA, 0, 0, v, n, (size_t)len, to, tolen, NULL);
			/* a full socket buffer loses the datagram, as UDP
			 * may; a refused one is the caller's to know */
			return e && e != EAGAIN && e != EWOULDBLOCK && e != ENOBUFS ? -e : len;
		}
		if (rs_dg_can_send(d))
			break;
		if (rs_dg_nonblock(rs, flags))
			return -EAGAIN;
		if ((e = rs_wait(rs, POLLOUT, -1)))
			return -e;
	}
	e = rs_dg_send_ud(rs, p, RS_DG_UD_DATA, 0, v, n, (size_t)len);
	return e ? -e : len;
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

/* The next datagram, from UDP or UD in turn, into @v; its source into
 * @a / @l; MSG_TRUNC in @mflags when it did not fit. The lock is held. */
static ssize_t rs_dg_recvv(struct rs *rs, const struct iovec *v, int n, int flags,
			   struct sockaddr *a, socklen_t *l, int *mflags)
{
	struct rs_dg *d = rs->dg;
	ssize_t room = iov_len(v, n);
	int e;

	if (flags & ~(MSG_DONTWAIT | MSG_PEEK | MSG_TRUNC | MSG_NOSIGNAL | MSG_WAITALL))
		return -EOPNOTSUPP;
	if (room < 0)
		return room;
	if ((e = rs_dg_ready(rs)))
		return -e;
	for (;;) {
		rs_dg_progress(rs);
		if ((e = rs_dg_soerr(d)))
			return -e;
		/* UDP and UD take turns: a flood of one does not starve the other */
		for (int turn = 0; turn < 2; turn++) {
			bool udp = d->udp_first != (turn == 1);

			if (udp && d->uq_head != d->uq_tail) {
				struct rs_dg_udp *u = &d->uq[d->uq_head % RS_DG_UQ];
				size_t got;

				if (d->connected &&
				    !rs_dg_sa_eq((struct sockaddr *)&u->from, (struct sockaddr *)&d->peer)) {
					d->uq_head++;   /* came before the connect */
					turn--;
					continue;
				}
				got = iov_copy_out(v, n, u->data, u->len);
				rs_dg_name_out((struct sockaddr *)&u->from, u->fromlen, a, l);
				if (u->len > (size_t)room && mflags)
					*mflags |= MSG_TRUNC;
				if (!(flags & MSG_PEEK)) {
					d->uq_head++;
					d->udp_first = false;
				}
				return (flags & MSG_TRUNC) ? (ssize_t)u->len : (ssize_t)got;
			}
			if (!udp && d->rq_head != d->rq_tail) {
				struct rs_dg_rx x = d->rq[d->rq_head % d->nrx];
				const uint8_t *b = rs->buf + (size_t)(d->ntx + x.slot) * d->stride +
						   RS_GRH + RS_DG_UDH;
				uint32_t dl = x.len;
				size_t got;

				if (d->connected && !rs_dg_sa_eq((struct sockaddr *)&x.from,
								 (struct sockaddr *)&d->peer)) {
					/* came before we connected */
					d->rq_head++;
					if (rs_dg_post_recv(rs, x.slot))
						rs_break(rs, EIO);
					turn--;
					continue;
				}
				got = iov_copy_out(v, n, b, dl);
				rs_dg_name_out((struct sockaddr *)&x.from, x.fromlen, a, l);
				if (dl > (size_t)room && mflags)
					*mflags |= MSG_TRUNC;
				if (!(flags & MSG_PEEK)) {
					d->rq_head++;
					d->udp_first = true;
					if (rs_dg_post_recv(rs, x.slot))
						rs_break(rs, EIO);
				}
				return (flags & MSG_TRUNC) ? (ssize_t)dl : (ssize_t)got;
			}
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
