// SPDX-License-Identifier: MIT
/*
 * Datagram rsockets of libroshm-verbs: the peer table (addresses, tokens,
 * claims and their proofs) and the messages over UDP and UD that fill it,
 * taken in by rs_dg_progress. The protocol: rsocket_dgram.c.
 */
#define _GNU_SOURCE
#include <endian.h>
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

struct rs_dg_peer *rs_dg_find(struct rs_dg *d, const struct sockaddr *a)
{
	for (int i = 0; i < RS_DG_PEERS; i++)
		if (d->peers[i].len && rs_dg_sa_eq((const struct sockaddr *)&d->peers[i].addr, a))
			return &d->peers[i];
	return NULL;
}

/* The entry of @a, made (in the least recently used one's place) when
 * there is none: a token of its own. */
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
	p->my_token = rs_dg_rand();
	p->used_ns = rs_now_ns();
	return p;
}

/* The address we gave @token to, or NULL. */
struct rs_dg_peer *rs_dg_by_token(struct rs_dg *d, uint64_t token)
{
	for (int i = 0; i < RS_DG_PEERS; i++)
		if (d->peers[i].len && d->peers[i].my_token == token)
			return &d->peers[i];
	return NULL;
}

bool rs_dg_confirmed(const struct rs_dg_peer *p, uint64_t now)
{
	return p->state == RS_DG_CONFIRMED && now - p->confirmed_ns < RS_DG_FRESH_NS;
}

/* ------------------------------------------------------- progress */

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

/* A UDP message: our header (@op), then @arg (ADDR, PROOF) or @len bytes
 * of @v (DATA), gathered in the scratch buffer. 0 or an errno. */
int rs_dg_send_udp(struct rs *rs, uint8_t op, uint64_t arg, const struct iovec *v, int n,
			  size_t len, const struct sockaddr *to, socklen_t tolen)
{
	struct rs_dg *d = rs->dg;
	uint8_t *b = d->scratch;
	size_t at = sizeof(struct rs_dg_hdr);

	rs_dg_make(op, d->qp->qp_num, d->gid, (struct rs_dg_hdr *)b);
	if (op != RS_DG_DATA) {
		arg = htobe64(arg);
		memcpy(b + at, &arg, sizeof(arg));
		at += sizeof(arg);
	} else {
		at += iov_gather(b + at, v, n, len);
	}
	if (sendto(rs->fd, b, at, MSG_DONTWAIT | MSG_NOSIGNAL, to, tolen) < 0)
		return errno;
	return 0;
}

/* A UD datagram to @p's QP under its token: @kind, then @len bytes of @v
 * (DATA) or @arg (PROBE), from a send slot. The caller saw a slot free. */
int rs_dg_send_ud(struct rs *rs, struct rs_dg_peer *p, uint32_t kind, uint64_t arg,
			 const struct iovec *v, int n, size_t len)
{
	struct rs_dg *d = rs->dg;
	uint8_t *dst = rs->buf + (size_t)(d->tx_head % d->ntx) * d->stride;
	struct rs_dg_ud h = { .token = htobe64(p->token), .kind = htonl(kind) };
	struct ibv_sge sge = { .addr = (uintptr_t)dst, .lkey = rs->mr->lkey };
	struct ibv_send_wr wr, *bad;
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

/* Probe @p's claimed QP (at most one per address per RS_DG_PROBE_NS,
 * RS_DG_PROBES in all), when a send slot is free. */
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
	p->nonce = rs_dg_rand();
	p->probe_ns = now;
	rs_dg_send_ud(rs, p, RS_DG_UD_PROBE, p->nonce, NULL, 0, 0);
}

/* Read the UDP messages waiting (a bounded batch, while there is room for
 * their datagrams): DATA is kept and answered with an ADDR, an ADDR makes
 * a claim to probe, a PROOF confirms one. */
static void rs_dg_udp_in(struct rs *rs)
{
	struct rs_dg *d = rs->dg;

	for (int k = 0; k < RS_DG_UDP_BATCH && d->uq_tail - d->uq_head < RS_DG_UQ; k++) {
		struct sockaddr_storage from;
		struct sockaddr *fa = (struct sockaddr *)&from;
		socklen_t fl = sizeof(from);
		uint8_t op, gid[16];
		uint32_t qpn;
		uint64_t arg, now;
		struct rs_dg_peer *p;
		ssize_t n = recvfrom(rs->fd, d->scratch, sizeof(struct rs_dg_hdr) + d->mtu + 1,
				     MSG_DONTWAIT, fa, &fl);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				d->soerr = errno;   /* an ICMP error of a send: the next call's */
			break;
		}
		if (fl > sizeof(from) ||
		    rs_dg_parse(d->scratch, (size_t)n, d->mtu, &op, &qpn, gid, &arg))
			continue;   /* not ours: dropped */
		if (d->connected && !rs_dg_sa_eq(fa, (struct sockaddr *)&d->peer))
			continue;
		now = rs_now_ns();
		if (op == RS_DG_DATA) {
			struct rs_dg_udp *u = &d->uq[d->uq_tail % RS_DG_UQ];

			p = rs_dg_peer(d, fa, fl);
			p->used_ns = now;
			u->from = from;
			u->fromlen = fl;
			u->len = (uint32_t)((size_t)n - sizeof(struct rs_dg_hdr));
			memcpy(u->data, d->scratch + sizeof(struct rs_dg_hdr), u->len);
			d->uq_tail++;
			rs_dg_send_udp(rs, RS_DG_ADDR, p->my_token, NULL, 0, 0, fa, fl);
			continue;
		}
		p = rs_dg_find(d, fa);
		if (!p || !p->asked)
			continue;   /* nothing we asked for */
		if (op == RS_DG_ADDR) {
			if (p->state == RS_DG_NONE || p->qpn != qpn || p->token != arg ||
			    memcmp(p->gid, gid, 16)) {
				if (p->ah && memcmp(p->gid, gid, 16)) {
					ibv_destroy_ah(p->ah);
					p->ah = NULL;
				}
				p->qpn = qpn;
				p->token = arg;
				memcpy(p->gid, gid, 16);
				p->state = RS_DG_CLAIMED;
				p->probe_ns = 0;
			} else if (p->state == RS_DG_CONFIRMED && !rs_dg_confirmed(p, now)) {
				p->state = RS_DG_CLAIMED;   /* stale: prove it again */
				p->probe_ns = 0;
			}
			rs_dg_probe(rs, p, now);
		} else if (p->state == RS_DG_CLAIMED && p->nonce && arg == p->nonce) {
			p->state = RS_DG_CONFIRMED;   /* PROOF: the QP's owner is at fa */
			p->confirmed_ns = now;
			p->nonce = 0;
		}
	}
}

/* Completions: sends free their slots; a RECV with a PROBE is answered
 * and posted again, one with a datagram joins the queue to be read. */
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
			uint32_t slot = (uint32_t)wc[i].wr_id, len = wc[i].byte_len - RS_GRH, kind;
			uint64_t token, arg;
			struct rs_dg_peer *p;
			uint8_t h[sizeof(struct rs_dg_ud) + sizeof(uint64_t)];

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
			if (wc[i].byte_len >= RS_GRH && wc[i].byte_len - RS_GRH <= d->stride - RS_GRH)
				memcpy(h, rs->buf + (size_t)(d->ntx + slot) * d->stride + RS_GRH,
				       len < sizeof(h) ? len : sizeof(h));
			if (wc[i].byte_len < RS_GRH || len > d->stride - RS_GRH ||
			    rs_dg_ud_parse(h, len < sizeof(h) ? len : sizeof(h), d->mtu, &token, &kind,
					   &arg) ||
			    (kind == RS_DG_UD_DATA && len - RS_DG_UDH > d->mtu) ||
			    !(p = rs_dg_by_token(d, token)) ||
			    (d->connected && !rs_dg_sa_eq((struct sockaddr *)&p->addr,
						    (struct sockaddr *)&d->peer))) {
				if (rs_dg_post_recv(rs, slot))   /* dropped */
					rs_break(rs, EIO);
				continue;
			}
			if (kind == RS_DG_UD_PROBE) {
				rs_dg_send_udp(rs, RS_DG_PROOF, arg, NULL, 0, 0,
					       (struct sockaddr *)&p->addr, p->len);
				if (rs_dg_post_recv(rs, slot))
					rs_break(rs, EIO);
				continue;
			}
			p->used_ns = rs_now_ns();
			d->rq[d->rq_tail % d->nrx] = (struct rs_dg_rx){ .slot = slot, .len = len,
									 .token = token };
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

bool rs_dg_can_send(const struct rs_dg *d)
{
	return d->tx_head - d->tx_tail < d->ntx;
}
