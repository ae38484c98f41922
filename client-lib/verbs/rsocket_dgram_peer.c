// SPDX-License-Identifier: MIT
/*
 * Datagram rsockets of libroshm-verbs: the peer table (the addresses we
 * send to, their claims and proofs), the proofs we owe, the tokens, and
 * the messages over UDP and UD, taken in by rs_dg_progress. The protocol:
 * rsocket_dgram.c.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>

#include "rsocket_dgram.h"

bool rs_dg_sa_eq(const struct sockaddr *a, const struct sockaddr *b)
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

int rs_dg_post_recv(struct rs *rs, uint32_t slot)
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

/* ------------------------------------------------------- addresses */

static uint64_t rs_dg_rand(void)
{
	uint64_t v = 0;

	while (!v)
		if (getrandom(&v, sizeof(v), 0) != sizeof(v))
			v = 0;
	return v;
}

/* An address as the UD header carries it (family, port, 16 bytes). */
static void rs_dg_canon(const struct sockaddr *a, struct rs_dg_ud *u)
{
	memset(&u->family, 0, sizeof(*u) - offsetof(struct rs_dg_ud, family));
	u->family = a->sa_family;
	if (a->sa_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a;

		u->port = ntohs(x->sin_port);
		memcpy(u->addr, &x->sin_addr, 4);
	} else {
		const struct sockaddr_in6 *x = (const void *)a;

		u->port = ntohs(x->sin6_port);
		memcpy(u->addr, &x->sin6_addr, 16);
	}
}

static socklen_t rs_dg_uncanon(const struct rs_dg_ud *u, struct sockaddr_storage *a)
{
	memset(a, 0, sizeof(*a));
	if (u->family == AF_INET) {
		struct sockaddr_in *x = (void *)a;

		x->sin_family = AF_INET;
		x->sin_port = htons(u->port);
		memcpy(&x->sin_addr, u->addr, 4);
		return sizeof(*x);
	}
	{
		struct sockaddr_in6 *x = (void *)a;

		x->sin6_family = AF_INET6;
		x->sin6_port = htons(u->port);
		memcpy(&x->sin6_addr, u->addr, 16);
		return sizeof(*x);
	}
}

/* The token we give address @u (host order fields) in epoch @e:
 * HMAC-SHA256 under our key of the epoch and the address (family, port,
 * 16 bytes); nobody else can make it, and it lapses with the epoch. */
static uint64_t rs_dg_token_at(const struct rs_dg *d, const struct rs_dg_ud *u, uint64_t e)
{
	uint8_t m[28], md[EVP_MAX_MD_SIZE];
	unsigned int ml = 0;
	uint64_t t = 0;

	e = htobe64(e);
	memcpy(m, &e, sizeof(e));
	m[8] = (uint8_t)(u->family >> 8), m[9] = (uint8_t)u->family;
	m[10] = (uint8_t)(u->port >> 8), m[11] = (uint8_t)u->port;
	memcpy(m + 12, u->addr, 16);
	if (HMAC(EVP_sha256(), d->key, sizeof(d->key), m, sizeof(m), md, &ml) && ml >= sizeof(t))
		memcpy(&t, md, sizeof(t));
	return t;
}

static uint64_t rs_dg_epoch(void)
{
	return rs_now_ns() / RS_DG_EPOCH_NS;
}

/* A token of this epoch or the one before: one given at most
 * 2 * RS_DG_EPOCH_NS ago, to an address (whoever holds it now has had
 * one of its own since, with the ADDRs that come every RS_DG_FRESH_NS). */
static bool rs_dg_token_ok(const struct rs_dg *d, const struct rs_dg_ud *u)
{
	uint64_t e = rs_dg_epoch();

	return u->token == rs_dg_token_at(d, u, e) || u->token == rs_dg_token_at(d, u, e - 1);
}

static uint64_t rs_dg_token_of(const struct rs_dg *d, const struct sockaddr *a)
{
	struct rs_dg_ud u;

	rs_dg_canon(a, &u);
	return rs_dg_token_at(d, &u, rs_dg_epoch());
}

struct rs_dg_peer *rs_dg_find(struct rs_dg *d, const struct sockaddr *a)
{
	for (int i = 0; i < RS_DG_PEERS; i++)
		if (d->peers[i].len && rs_dg_sa_eq((const struct sockaddr *)&d->peers[i].addr, a))
			return &d->peers[i];
	return NULL;
}

/* The entry of an address we send to, made (in the least recently used
 * one's place) when there is none. */
struct rs_dg_peer *rs_dg_peer(struct rs_dg *d, const struct sockaddr *a, socklen_t len)
{
	struct rs_dg_peer *p = rs_dg_find(d, a);

	if (p)
		return p;
	p = &d->peers[0];
	for (int i = 0; i < RS_DG_PEERS; i++) {
		if (!d->peers[i].len) {
			p = &d->peers[i];
			break;
		}
		if (d->peers[i].used_ns < p->used_ns)
			p = &d->peers[i];
	}
	if (p->ah)
		ibv_destroy_ah(p->ah);
	memset(p, 0, sizeof(*p));
	if (len > sizeof(p->addr))
		len = sizeof(p->addr);
	memcpy(&p->addr, a, len);
	p->len = len;
	p->used_ns = rs_now_ns();
	return p;
}

bool rs_dg_confirmed(const struct rs_dg_peer *p, uint64_t now)
{
	return p->state == RS_DG_CONFIRMED && now - p->confirmed_ns < RS_DG_FRESH_NS;
}

bool rs_dg_can_send(const struct rs_dg *d)
{
	return d->tx_head - d->tx_tail < d->ntx;
}

/* ------------------------------------------------------- messages */

/* @len bytes of @v (its @n parts) to @dst */
static size_t iov_gather(uint8_t *dst, const struct iovec *v, int n, size_t len)
{
	size_t at = 0;

	for (int i = 0; i < n && at < len; i++) {
		size_t k = v[i].iov_len < len - at ? v[i].iov_len : len - at;

		memcpy(dst + at, v[i].iov_base, k);
		at += k;
	}
	return at;
}

/* A UDP message: our header (@op), then its arguments or (DATA) @len
 * bytes of @v, gathered in the scratch buffer. 0 or an errno. */
int rs_dg_send_udp(struct rs *rs, uint8_t op, uint64_t a1, uint64_t a2, const struct iovec *v,
		   int n, size_t len, const struct sockaddr *to, socklen_t tolen,
		   const struct sockaddr_storage *from)
{
	struct rs_dg *d = rs->dg;
	uint8_t *b = d->scratch;
	size_t at = sizeof(struct rs_dg_hdr);
	union {
		struct cmsghdr c;
		uint8_t b[CMSG_SPACE(sizeof(struct in6_pktinfo))];
	} cb;
	struct iovec iv;
	struct msghdr m = { .msg_name = (void *)to, .msg_namelen = tolen, .msg_iov = &iv,
			    .msg_iovlen = 1 };

	rs_dg_make(op, d->qp->qp_num, d->gid, (struct rs_dg_hdr *)b);
	if (op == RS_DG_DATA) {
		at += iov_gather(b + at, v, n, len);
	} else {
		a1 = htobe64(a1);
		memcpy(b + at, &a1, sizeof(a1));
		at += sizeof(a1);
		if (op == RS_DG_PROOF) {
			a2 = htobe64(a2);
			memcpy(b + at, &a2, sizeof(a2));
			at += sizeof(a2);
		}
	}
	iv = (struct iovec){ .iov_base = b, .iov_len = at };
	/* an answer leaves from the address its question came to (a socket
	 * bound to any address may have several) */
	memset(&cb, 0, sizeof(cb));
	if (from && from->ss_family == AF_INET && d->family == AF_INET) {
		struct in_pktinfo pi = { .ipi_spec_dst = ((const struct sockaddr_in *)from)->sin_addr };

		m.msg_control = &cb;
		m.msg_controllen = CMSG_SPACE(sizeof(pi));
		cb.c.cmsg_level = IPPROTO_IP;
		cb.c.cmsg_type = IP_PKTINFO;
		cb.c.cmsg_len = CMSG_LEN(sizeof(pi));
		memcpy(CMSG_DATA(&cb.c), &pi, sizeof(pi));
	} else if (from && from->ss_family == AF_INET6 && d->family == AF_INET6) {
		struct in6_pktinfo pi = { .ipi6_addr = ((const struct sockaddr_in6 *)from)->sin6_addr };

		m.msg_control = &cb;
		m.msg_controllen = CMSG_SPACE(sizeof(pi));
		cb.c.cmsg_level = IPPROTO_IPV6;
		cb.c.cmsg_type = IPV6_PKTINFO;
		cb.c.cmsg_len = CMSG_LEN(sizeof(pi));
		memcpy(CMSG_DATA(&cb.c), &pi, sizeof(pi));
	}
	if (sendmsg(rs->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		return errno;
	return 0;
}

/* A UD datagram to @p's QP, under its token and naming our address as @p
 * sees it: @kind, then @len bytes of @v (DATA) or @arg (PROBE), from a
 * send slot. The caller saw a slot free. */
int rs_dg_send_ud(struct rs *rs, struct rs_dg_peer *p, uint32_t kind, uint64_t arg,
		  const struct iovec *v, int n, size_t len)
{
	struct rs_dg *d = rs->dg;
	uint8_t *dst = rs->buf + (size_t)(d->tx_head % d->ntx) * d->stride;
	struct ibv_sge sge = { .addr = (uintptr_t)dst, .lkey = rs->mr->lkey };
	struct ibv_send_wr wr, *bad;
	struct rs_dg_ud h;
	size_t at = sizeof(h);
	int ret;

	if (!p->ah) {
		struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1 };

		memcpy(aa.grh.dgid.raw, p->gid, 16);
		aa.grh.hop_limit = 64;
		p->ah = ibv_create_ah(rs->pd, &aa);
		if (!p->ah)
			return errno ? errno : ENOMEM;
	}
	rs_dg_canon((struct sockaddr *)&p->me, &h);
	h.token = htobe64(p->token);
	h.kind = htonl(kind);
	h.family = htons(h.family);
	h.port = htons(h.port);
	memcpy(dst, &h, sizeof(h));
	if (kind == RS_DG_UD_PROBE) {
		arg = htobe64(arg);
		memcpy(dst + at, &arg, sizeof(arg));
		at += sizeof(arg);
	} else {
		at += iov_gather(dst + at, v, n, len);
	}
	sge.length = (uint32_t)at;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = RS_WR_DATA;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.wr.ud.ah = p->ah;
	wr.wr.ud.remote_qpn = p->qpn;
	wr.wr.ud.remote_qkey = RS_DG_QKEY;
	ret = ibv_post_send(d->qp, &wr, &bad);
	if (ret) {
		rs_break(rs, ret);
		return ret;
	}
	d->tx_head++;
	return 0;
}

/* Probe @p's claim: a PROBE over UD to the claimed QP and a CHALLENGE over
 * UDP to its address, each with a nonce of its own; the PROOF must bring
 * both back from that address. At most one per address per
 * RS_DG_PROBE_NS (whatever it claims), RS_DG_PROBES in all. */
static void rs_dg_probe(struct rs *rs, struct rs_dg_peer *p, uint64_t now)
{
	struct rs_dg *d = rs->dg;

	if (p->state != RS_DG_CLAIMED || (p->probe_ns && now - p->probe_ns < RS_DG_PROBE_NS) ||
	    !rs_dg_can_send(d))
		return;
	if (now - d->probe_period_ns >= RS_DG_PROBE_NS) {
		d->probe_period_ns = now;
		d->probes = 0;
	}
	if (d->probes >= RS_DG_PROBES)
		return;
	d->probes++;
	p->n1 = rs_dg_rand();
	p->n2 = rs_dg_rand();
	p->probe_ns = now;
	if (rs_dg_send_ud(rs, p, RS_DG_UD_PROBE, p->n1, NULL, 0, 0) ||
	    rs_dg_send_udp(rs, RS_DG_CHALLENGE, p->n2, 0, NULL, 0, 0, (struct sockaddr *)&p->addr,
			   p->len, NULL))
		p->n1 = p->n2 = 0;
}

/* Half of a proof we owe @a (the PROBE's nonce when @probe, else the
 * CHALLENGE's); once both halves are in, the PROOF goes to @a. */
static void rs_dg_owe(struct rs *rs, const struct sockaddr *a, socklen_t len, bool probe,
		      uint64_t nonce, const struct sockaddr_storage *local)
{
	struct rs_dg *d = rs->dg;
	struct rs_dg_pend *q = NULL, *old = &d->pend[0];

	for (int i = 0; i < RS_DG_PEND && !q; i++) {
		if (d->pend[i].len && rs_dg_sa_eq((struct sockaddr *)&d->pend[i].addr, a))
			q = &d->pend[i];
		else if (old->len && (!d->pend[i].len || d->pend[i].t < old->t))
			old = &d->pend[i];   /* a free one, else the oldest */
	}
	if (!q) {
		q = old;
		memset(q, 0, sizeof(*q));
		memcpy(&q->addr, a, len > sizeof(q->addr) ? sizeof(q->addr) : len);
		q->len = len;
	}
	q->t = rs_now_ns();
	if (probe) {
		q->n1 = nonce;
	} else {
		q->n2 = nonce;
		q->local = *local;   /* the PROOF leaves from where the CHALLENGE came in */
	}
	if (q->n1 && q->n2) {
		rs_dg_send_udp(rs, RS_DG_PROOF, q->n1, q->n2, NULL, 0, 0, a, len, &q->local);
		memset(q, 0, sizeof(*q));
	}
}

/* Where a UDP message arrived (IP_PKTINFO), the port 0. */
static void rs_dg_arrived(const struct rs_dg *d, struct msghdr *m, struct sockaddr_storage *at)
{
	memset(at, 0, sizeof(*at));
	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
		if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO &&
		    d->family == AF_INET) {
			struct in_pktinfo pi;
			struct sockaddr_in *x = (void *)at;

			memcpy(&pi, CMSG_DATA(c), sizeof(pi));
			x->sin_family = AF_INET;
			x->sin_addr = pi.ipi_addr;
		} else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO &&
			   d->family == AF_INET6) {
			struct in6_pktinfo pi;
			struct sockaddr_in6 *x = (void *)at;

			memcpy(&pi, CMSG_DATA(c), sizeof(pi));
			x->sin6_family = AF_INET6;
			x->sin6_addr = pi.ipi6_addr;
		}
	}
}

/* Our address as a peer reaches us: where its message arrived, and our
 * port. */
static void rs_dg_me(struct rs *rs, const struct sockaddr_storage *at, struct sockaddr_storage *me)
{
	struct sockaddr_storage b;
	socklen_t bl = sizeof(b);

	memset(me, 0, sizeof(*me));
	if (!at->ss_family || getsockname(rs->fd, (struct sockaddr *)&b, &bl) ||
	    b.ss_family != at->ss_family)
		return;
	*me = *at;
	if (at->ss_family == AF_INET)
		((struct sockaddr_in *)me)->sin_port = ((struct sockaddr_in *)&b)->sin_port;
	else
		((struct sockaddr_in6 *)me)->sin6_port = ((struct sockaddr_in6 *)&b)->sin6_port;
}

/* ------------------------------------------------------- progress */

/* Read the UDP messages waiting (a bounded batch, while there is room for
 * their datagrams): DATA is kept and answered with an ADDR; an ADDR to a
 * DATA of ours is a claim to probe; a CHALLENGE is half a proof we owe; a
 * PROOF with both nonces of the claim's probe confirms it. */
static void rs_dg_udp_in(struct rs *rs)
{
	struct rs_dg *d = rs->dg;

	for (int k = 0; k < RS_DG_UDP_BATCH && d->uq_tail - d->uq_head < RS_DG_UQ; k++) {
		struct sockaddr_storage from;
		struct sockaddr *fa = (struct sockaddr *)&from;
		union {
			struct cmsghdr c;
			uint8_t b[CMSG_SPACE(sizeof(struct in6_pktinfo))];
		} cb;
		struct iovec iv = { .iov_base = d->scratch,
				    .iov_len = sizeof(struct rs_dg_hdr) + d->mtu + 1 };
		struct msghdr m = { .msg_name = &from, .msg_namelen = sizeof(from), .msg_iov = &iv,
				    .msg_iovlen = 1, .msg_control = &cb, .msg_controllen = sizeof(cb) };
		uint8_t op, gid[16];
		uint32_t qpn;
		uint64_t a1, a2, now;
		struct sockaddr_storage local;
		struct rs_dg_peer *p;
		ssize_t n = recvmsg(rs->fd, &m, MSG_DONTWAIT);
		socklen_t fl = m.msg_namelen;

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				d->soerr = errno;   /* an ICMP error of a send: the next call's */
			break;
		}
		if (fl > sizeof(from) || (m.msg_flags & MSG_CTRUNC) ||
		    rs_dg_parse(d->scratch, (size_t)n, d->mtu, &op, &qpn, gid, &a1, &a2))
			continue;   /* not ours: dropped */
		if (d->connected && !rs_dg_sa_eq(fa, (struct sockaddr *)&d->peer))
			continue;
		now = rs_now_ns();
		rs_dg_arrived(d, &m, &local);
		switch (op) {
		case RS_DG_DATA: {
			struct rs_dg_udp *u = &d->uq[d->uq_tail % RS_DG_UQ];

			u->from = from;
			u->fromlen = fl;
			u->len = (uint32_t)((size_t)n - sizeof(struct rs_dg_hdr));
			memcpy(u->data, d->scratch + sizeof(struct rs_dg_hdr), u->len);
			d->uq_tail++;
			rs_dg_send_udp(rs, RS_DG_ADDR, rs_dg_token_of(d, fa), 0, NULL, 0, 0, fa, fl,
				       &local);
			break;
		}
		case RS_DG_CHALLENGE:
			rs_dg_owe(rs, fa, fl, false, a1, &local);
			break;
		case RS_DG_ADDR:
			p = rs_dg_find(d, fa);
			if (!p || !p->asked || qpn == d->qp->qp_num)   /* QPNs are the cluster's */
				break;   /* nothing we asked for, or our own QP */
			if (p->state == RS_DG_NONE || p->qpn != qpn || p->token != a1 ||
			    memcmp(p->gid, gid, 16)) {
				if (p->ah && memcmp(p->gid, gid, 16)) {
					ibv_destroy_ah(p->ah);
					p->ah = NULL;
				}
				p->qpn = qpn;
				p->token = a1;
				memcpy(p->gid, gid, 16);
				p->state = RS_DG_CLAIMED;
				p->n1 = p->n2 = 0;   /* a new claim: no earlier proof counts */
			} else if (p->state == RS_DG_CONFIRMED && !rs_dg_confirmed(p, now)) {
				p->state = RS_DG_CLAIMED;   /* stale: prove it again */
				p->n1 = p->n2 = 0;
			}
			rs_dg_me(rs, &local, &p->me);
			if (p->me.ss_family == d->family)
				rs_dg_probe(rs, p, now);
			break;
		case RS_DG_PROOF:
			p = rs_dg_find(d, fa);
			if (p && p->state == RS_DG_CLAIMED && p->n1 && a1 == p->n1 && a2 == p->n2) {
				p->state = RS_DG_CONFIRMED;   /* the QP's owner is at fa */
				p->confirmed_ns = now;
				p->n1 = p->n2 = 0;
			}
			break;
		}
	}
}

/* Completions: sends free their slots; a RECV with a PROBE is half a
 * proof we owe, one with a datagram joins the queue to be read, each
 * under a token we gave the address it names; the rest are dropped. */
void rs_dg_cq(struct rs *rs)
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
			uint32_t slot = (uint32_t)wc[i].wr_id, len;
			uint8_t h[sizeof(struct rs_dg_ud) + sizeof(uint64_t)];
			struct sockaddr_storage from;
			struct rs_dg_ud u;
			socklen_t fl;
			uint64_t arg;

			if (wc[i].wr_id == RS_WR_DATA) {
				d->tx_tail++;
				if (wc[i].status == IBV_WC_WR_FLUSH_ERR)
					rs_break(rs, EIO);
				continue;
			}
			if (wc[i].wr_id >= d->nrx)
				continue;
			if (wc[i].status != IBV_WC_SUCCESS) {
				if (wc[i].status == IBV_WC_WR_FLUSH_ERR || rs_dg_post_recv(rs, slot))
					rs_break(rs, EIO);
				continue;
			}
			/* the header (and a PROBE's nonce) from a copy, checked */
			len = wc[i].byte_len >= RS_GRH && wc[i].byte_len - RS_GRH <= d->stride - RS_GRH
				      ? wc[i].byte_len - RS_GRH : 0;
			memcpy(h, rs->buf + (size_t)(d->ntx + slot) * d->stride + RS_GRH,
			       len < sizeof(h) ? len : sizeof(h));
			/* (the parser reads no more than a PROBE's bytes: h) */
			if (rs_dg_ud_parse(h, len, d->mtu, &u, &arg) || u.family != d->family ||
			    !rs_dg_token_ok(d, &u)) {
				if (rs_dg_post_recv(rs, slot))   /* dropped */
					rs_break(rs, EIO);
				continue;
			}
			fl = rs_dg_uncanon(&u, &from);
			if (u.kind == RS_DG_UD_PROBE || (d->connected &&
			    !rs_dg_sa_eq((struct sockaddr *)&from, (struct sockaddr *)&d->peer))) {
				if (u.kind == RS_DG_UD_PROBE)
					rs_dg_owe(rs, (struct sockaddr *)&from, fl, true, arg, NULL);
				if (rs_dg_post_recv(rs, slot))
					rs_break(rs, EIO);
				continue;
			}
			d->rq[d->rq_tail % d->nrx] = (struct rs_dg_rx){
				.slot = slot, .len = len - RS_DG_UDH, .from = from, .fromlen = fl };
			d->rq_tail++;
		}
		if (n < 16)
			return;
	}
}

void rs_dg_progress(struct rs *rs)
{
	if (!rs->dg->ready)
		return;
	rs_dg_cq(rs);
	rs_dg_udp_in(rs);
}
