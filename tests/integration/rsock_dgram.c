// SPDX-License-Identifier: MIT
/*
 * Datagram rsockets (client-lib/verbs/rsocket_dgram.c) between two roshmd
 * nodes, for check_rsockets.sh.
 *   rsock_dgram server ADDR PORT     echo each datagram to its source until
 *                                    one says "QUIT"; print how many echoed
 *   rsock_dgram client ADDR PORT N [MYADDR]
 *                                    N datagrams of 1 to 4000 bytes, each
 *                                    with a pattern of its own, each echo
 *                                    checked byte for byte and by its source
 *                                    address; then the calls' edges; with
 *                                    MYADDR (ours) a kernel UDP socket of
 *                                    ours attacks: it claims the server's
 *                                    QP to us and ours to the server, which
 *                                    must not make us name the server's
 *                                    echoes by it, nor get its bytes
 *   rsock_dgram junk ADDR PORT       kernel UDP: garbage, a short header, a
 *                                    forged ADDR, to the server's port
 * A lost datagram is sent again after 1 s (at most 5 times: UDP may lose
 * one); the client prints its round trips' median and 99th percentile.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAXD 4000

static int fails, injected;

#define CHECK(c, ...)                                                                  \
	do {                                                                           \
		if (!(c)) {                                                            \
			fprintf(stderr, "rsock_dgram: FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                                  \
			fputc('\n', stderr);                                           \
			fails++;                                                       \
		}                                                                      \
	} while (0)

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static struct sockaddr_in addr_of(const char *ip, const char *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port)) };

	if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) {
		fprintf(stderr, "rsock_dgram: bad address %s\n", ip);
		exit(2);
	}
	return a;
}

static void fill(uint8_t *b, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		b[i] = (uint8_t)(seed >> 16);
	}
}

static int server(struct sockaddr_in *a)
{
	static uint8_t b[8192];
	unsigned long echoed = 0, loops = 0;
	int s = rsocket(AF_INET, SOCK_DGRAM, 0);

	if (s < 0 || rbind(s, (struct sockaddr *)a, sizeof(*a))) {
		perror("rsock_dgram server: rsocket/rbind");
		return 1;
	}
	for (;;) {
		struct sockaddr_storage from;
		socklen_t fl = sizeof(from);
		ssize_t n = rrecvfrom(s, b, sizeof(b), 0, (struct sockaddr *)&from, &fl);

		if (n < 0) {
			perror("rsock_dgram server: rrecvfrom");
			return 1;
		}
		if (n == 4 && !memcmp(b, "QUIT", 4))
			break;
		loops += n >= 4 && !memcmp(b, "LOOP", 4);
		if (rsendto(s, b, (size_t)n, 0, (struct sockaddr *)&from, fl) != n) {
			perror("rsock_dgram server: rsendto");
			return 1;
		}
		echoed++;
	}
	printf("server: echoed %lu, %lu of them LOOP\n", echoed, loops);
	rclose(s);
	return 0;
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

/* Send @n bytes of pattern @seq, wait for the echo with that pattern from
 * @a (others: stale copies of an earlier one, skipped), resend after 1 s. */
static int ping(int s, const struct sockaddr_in *a, bool connected, uint32_t seq, size_t n,
		uint64_t *rtt, int *resent)
{
	static uint8_t out[MAXD], in[MAXD + 16];
	uint64_t t0 = now_ns();

	fill(out, n, seq);
	memcpy(out, &seq, n < 4 ? n : 4);
	for (int tries = 0; tries < 5; tries++) {
		ssize_t w = connected ? rsend(s, out, n, 0)
				      : rsendto(s, out, n, 0, (const struct sockaddr *)a, sizeof(*a));

		CHECK(w == (ssize_t)n, "send %u: %zd (%s)", seq, w, strerror(errno));
		for (;;) {
			struct pollfd p = { .fd = s, .events = POLLIN };
			struct sockaddr_in from;
			socklen_t fl = sizeof(from);
			int k = rpoll(&p, 1, 1000);
			ssize_t r;

			if (k == 0)
				break;   /* lost: again */
			CHECK(k == 1 && (p.revents & POLLIN), "rpoll %d revents %x", k, p.revents);
			r = connected ? rrecv(s, in, sizeof(in), MSG_DONTWAIT)
				      : rrecvfrom(s, in, sizeof(in), MSG_DONTWAIT, (struct sockaddr *)&from,
						  &fl);
			if (r < 0 && errno == EAGAIN)
				continue;
			CHECK(r >= 0, "recv: %s", strerror(errno));
			if (r < 0)
				return -1;
			if (!connected) {
				CHECK(fl == sizeof(from) && from.sin_family == AF_INET &&
					      from.sin_port == a->sin_port &&
					      from.sin_addr.s_addr == a->sin_addr.s_addr,
				      "datagram %u: the source is not the server", seq);
			}
			if (r >= 8 && !memcmp(in, "INJECTED", 8))
				injected++;
			if ((size_t)r != n || memcmp(in, out, n < 4 ? n : 4))
				continue;   /* an echo of a copy sent before */
			CHECK(!memcmp(in, out, n), "datagram %u (%zu bytes): the echo differs", seq, n);
			*rtt = now_ns() - t0;
			return 0;
		}
		(*resent)++;
	}
	CHECK(0, "datagram %u: no echo in 5 tries", seq);
	return -1;
}

struct dg_hdr {   /* client-lib/verbs/rsocket_wire.h's, as a stranger writes it */
	uint32_t magic;
	uint8_t op, rsvd[3];
	uint32_t qpn;
	uint8_t gid[16];
	uint64_t arg;
} __attribute__((packed));

static void dg_make(struct dg_hdr *h, uint8_t op, uint32_t qpn, const uint8_t *gid, uint64_t arg)
{
	memset(h, 0, sizeof(*h));
	h->magic = htonl(0x52534431);
	h->op = op;
	h->qpn = htonl(qpn);
	if (gid)
		memcpy(h->gid, gid, 16);
	h->arg = arg;
}

/* Read UDP messages at k for up to @ms: the first of op @op from @from
 * (any source when NULL) into @h, or -1. */
static int dg_wait(int k, uint8_t op, const struct sockaddr_in *from, struct dg_hdr *h, int ms,
		   const char *want)
{
	uint64_t end = now_ns() + (uint64_t)ms * 1000000ull;
	uint8_t b[8192];

	while (now_ns() < end) {
		struct pollfd p = { .fd = k, .events = POLLIN };
		struct sockaddr_in f;
		socklen_t fl = sizeof(f);
		ssize_t r;

		if (poll(&p, 1, 50) != 1)
			continue;
		r = recvfrom(k, b, sizeof(b), 0, (struct sockaddr *)&f, &fl);
		if (r < 28 || b[4] != op ||
		    (from && (f.sin_port != from->sin_port || f.sin_addr.s_addr != from->sin_addr.s_addr)) ||
		    (want && ((size_t)r < 28 + strlen(want) || memcmp(b + 28, want, strlen(want)))))
			continue;
		memset(h, 0, sizeof(*h));
		memcpy(h, b, (size_t)r < sizeof(*h) ? (size_t)r : sizeof(*h));
		return 0;
	}
	return -1;
}

/* The attacks an adversarial review found (each worked before the QP
 * claims were proven): a kernel UDP socket of ours (k) learns the server's
 * QP from its ADDR and tells it to us, unasked; learns ours from a DATA we
 * send it and claims it to the server in DATA with "INJECTED" bytes, which
 * the server echoes to its source. Our pings must still name the server's
 * echoes by the server, and no "INJECTED" may reach us. */
static void attack(int s, const struct sockaddr_in *a, const char *myaddr)
{
	struct sockaddr_in ka = { .sin_family = AF_INET }, me;
	socklen_t l = sizeof(ka);
	struct dg_hdr h, srv, mine;
	int k = socket(AF_INET, SOCK_DGRAM, 0), resent = 0;
	uint8_t b[64];

	CHECK(k >= 0 && inet_pton(AF_INET, myaddr, &ka.sin_addr) == 1 &&
		      !bind(k, (struct sockaddr *)&ka, sizeof(ka)) &&
		      !getsockname(k, (struct sockaddr *)&ka, &l),
	      "attacker socket: %s", strerror(errno));
	l = sizeof(me);
	CHECK(!rgetsockname(s, (struct sockaddr *)&me, &l), "rgetsockname");
	me.sin_addr = ka.sin_addr;   /* bound to any address: reach it at ours */
	/* the server's QP and a token, from its ADDR to our DATA */
	dg_make(&h, 1, 0x424242, NULL, 0);
	memcpy(b, &h, 28);
	memcpy(b + 28, "hi", 2);
	sendto(k, b, 30, 0, (const struct sockaddr *)a, sizeof(*a));
	CHECK(!dg_wait(k, 2, a, &srv, 2000, NULL), "no ADDR from the server to a stranger's DATA");
	/* to the server: "I am at your own QP" (with the token it gave us), the
	 * proof halves it sends us relayed back, then a datagram to echo: it
	 * must reach the server as often as it is sent (3 times), not loop */
	dg_make(&h, 2, ntohl(srv.qpn), srv.gid, srv.arg);
	sendto(k, &h, sizeof(h), 0, (const struct sockaddr *)a, sizeof(*a));
	for (uint64_t end = now_ns() + 300000000ull; now_ns() < end;) {
		struct pollfd p = { .fd = k, .events = POLLIN };
		uint8_t r[128];
		ssize_t n;

		if (poll(&p, 1, 20) != 1)
			continue;
		n = recv(k, r, sizeof(r), 0);
		if (n >= 28 && (r[4] == 3 || r[4] == 4))   /* PROOF, CHALLENGE: back */
			sendto(k, r, (size_t)n, 0, (const struct sockaddr *)a, sizeof(*a));
	}
	dg_make(&h, 1, 0x424242, NULL, 0);
	memcpy(b, &h, 28);
	memcpy(b + 28, "LOOP", 4);
	for (int i = 0; i < 3; i++)
		sendto(k, b, 32, 0, (const struct sockaddr *)a, sizeof(*a));
	/* unasked, to us: "the server's QP is mine" */
	dg_make(&h, 2, ntohl(srv.qpn), srv.gid, srv.arg);
	for (int i = 0; i < 5; i++)
		sendto(k, &h, sizeof(h), 0, (struct sockaddr *)&me, sizeof(me));
	/* a PROOF nobody asked for (two nonces) */
	dg_make(&h, 3, ntohl(srv.qpn), srv.gid, 12345);
	memcpy(b, &h, sizeof(h));
	memset(b + sizeof(h), 7, 8);
	sendto(k, b, sizeof(h) + 8, 0, (struct sockaddr *)&me, sizeof(me));
	/* our QP, from a DATA of ours */
	CHECK(rsendto(s, "to a stranger", 13, 0, (struct sockaddr *)&ka, sizeof(ka)) == 13,
	      "rsendto the stranger: %s", strerror(errno));
	/* straight from us: not through the server's QP, which the stranger
	 * claimed to us (the server would echo it to the stranger) */
	CHECK(!dg_wait(k, 1, &me, &mine, 2000, "to a stranger"),
	      "our DATA did not reach the stranger from us");
	CHECK(dg_wait(k, 1, a, &h, 300, "to a stranger"), "our DATA to the stranger went to the server");
	/* to the server: "our QP is the stranger's", with bytes to echo, and
	 * the same in ADDRs answering the server's echoes */
	dg_make(&h, 1, ntohl(mine.qpn), mine.gid, 0);
	memcpy(b, &h, 28);
	memcpy(b + 28, "INJECTED by a stranger", 22);
	for (int i = 0; i < 20; i++) {
		struct dg_hdr ad;

		sendto(k, b, 50, 0, (const struct sockaddr *)a, sizeof(*a));
		dg_make(&ad, 2, ntohl(mine.qpn), mine.gid, (uint64_t)i * 7919 + 1);
		sendto(k, &ad, sizeof(ad), 0, (const struct sockaddr *)a, sizeof(*a));
		usleep(2000);
	}
	for (int i = 0; i < 100; i++) {
		uint64_t r;

		if (ping(s, a, false, 200000u + (uint32_t)i, 100, &r, &resent))
			break;
	}
	CHECK(!injected, "%d datagrams of the stranger's reached us", injected);
	printf("client: a stranger's claims changed nothing (100 echoes named by the server, "
	       "none of its bytes here, %d sent again)\n", resent);
	close(k);
}

/* A raw UD QP of ours on roshm0, as a pod of the tenant that writes UD
 * datagrams as it likes (the datagram rsocket's header: token, kind 0,
 * the address it names, then bytes). */
struct raw_ud {
	struct ibv_context *c;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_ah *ah;
	uint8_t buf[256];
};

static int raw_open(struct raw_ud *r, const uint8_t *gid)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_UD, .sq_sig_all = 1,
				       .cap = { .max_send_wr = 4, .max_recv_wr = 1,
						.max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x01234567 };
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1 };

	memset(r, 0, sizeof(*r));
	r->c = l && l[0] ? ibv_open_device(l[0]) : NULL;
	if (l)
		ibv_free_device_list(l);
	if (!r->c || !(r->pd = ibv_alloc_pd(r->c)) || !(r->cq = ibv_create_cq(r->c, 8, NULL, NULL, 0)))
		return -1;
	qa.send_cq = qa.recv_cq = r->cq;
	if (!(r->qp = ibv_create_qp(r->pd, &qa)) ||
	    ibv_modify_qp(r->qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		return -1;
	at.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(r->qp, &at, IBV_QP_STATE))
		return -1;
	at.qp_state = IBV_QPS_RTS;
	if (ibv_modify_qp(r->qp, &at, IBV_QP_STATE | IBV_QP_SQ_PSN))
		return -1;
	memcpy(aa.grh.dgid.raw, gid, 16);
	aa.grh.hop_limit = 64;
	if (!(r->mr = ibv_reg_mr(r->pd, r->buf, sizeof(r->buf), 0)) || !(r->ah = ibv_create_ah(r->pd, &aa)))
		return -1;
	return 0;
}

/* One UD datagram to @qpn under @token, naming @who, with @text. */
static int raw_send(struct raw_ud *r, uint32_t qpn, uint64_t token, const struct sockaddr_in *who,
		    const char *text)
{
	struct ibv_sge sge = { .addr = (uintptr_t)r->buf, .lkey = r->mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND }, *bad;
	uint16_t fam = htons(AF_INET);
	struct ibv_wc wc;
	uint64_t t = htobe64(token);

	memset(r->buf, 0, 32);
	memcpy(r->buf, &t, 8);
	memcpy(r->buf + 12, &fam, 2);
	memcpy(r->buf + 14, &who->sin_port, 2);
	memcpy(r->buf + 16, &who->sin_addr, 4);
	memcpy(r->buf + 32, text, strlen(text));
	sge.length = 32 + (uint32_t)strlen(text);
	wr.wr.ud.ah = r->ah;
	wr.wr.ud.remote_qpn = qpn;
	wr.wr.ud.remote_qkey = 0x01234567;
	if (ibv_post_send(r->qp, &wr, &bad))
		return -1;
	for (uint64_t end = now_ns() + 5000000000ull; now_ns() < end;)
		if (ibv_poll_cq(r->cq, 1, &wc) == 1)
			return wc.status == IBV_WC_SUCCESS ? 0 : -1;
	return -1;
}

static void raw_close(struct raw_ud *r)
{
	if (r->ah)
		ibv_destroy_ah(r->ah);
	if (r->qp)
		ibv_destroy_qp(r->qp);
	if (r->mr)
		ibv_dereg_mr(r->mr);
	if (r->cq)
		ibv_destroy_cq(r->cq);
	if (r->pd)
		ibv_dealloc_pd(r->pd);
	if (r->c)
		ibv_close_device(r->c);
}

/* Tokens, as a pod of the tenant with a raw UD QP tries them on the
 * server: the token the server gave k's address, naming that address,
 * is taken (the server echoes the bytes to k, over UDP); the same token
 * with one bit flipped, or naming another address (k2), is not; nor is
 * the good one after @stale_s seconds (tokens lapse within 20 s). */
static void forge(const struct sockaddr_in *a, const char *myaddr, int stale_s)
{
	struct sockaddr_in ka = { .sin_family = AF_INET }, kb = { .sin_family = AF_INET };
	socklen_t l = sizeof(ka);
	int k = socket(AF_INET, SOCK_DGRAM, 0), k2 = socket(AF_INET, SOCK_DGRAM, 0);
	struct dg_hdr h, srv;
	struct raw_ud r;
	uint8_t b[64];
	uint32_t q;

	CHECK(k >= 0 && k2 >= 0 && inet_pton(AF_INET, myaddr, &ka.sin_addr) == 1 &&
		      !bind(k, (struct sockaddr *)&ka, sizeof(ka)) &&
		      !getsockname(k, (struct sockaddr *)&ka, &l),
	      "forger's sockets: %s", strerror(errno));
	kb.sin_addr = ka.sin_addr;
	l = sizeof(kb);
	CHECK(!bind(k2, (struct sockaddr *)&kb, sizeof(kb)) &&
		      !getsockname(k2, (struct sockaddr *)&kb, &l), "k2: %s", strerror(errno));
	dg_make(&h, 1, 0x424242, NULL, 0);
	memcpy(b, &h, 28);
	memcpy(b + 28, "hi", 2);
	sendto(k, b, 30, 0, (const struct sockaddr *)a, sizeof(*a));
	if (dg_wait(k, 2, a, &srv, 2000, NULL)) {
		CHECK(0, "no ADDR from the server");
		return;
	}
	q = ntohl(srv.qpn);
	if (raw_open(&r, srv.gid)) {
		CHECK(0, "a raw UD QP on roshm0: %s", strerror(errno));
		raw_close(&r);
		return;
	}
	CHECK(!raw_send(&r, q, be64toh(srv.arg), &ka, "FORGED-GOOD"), "raw UD send");
	CHECK(!dg_wait(k, 1, a, &h, 3000, "FORGED-GOOD"),
	      "the token the server gave an address, naming it, was not taken");
	CHECK(!raw_send(&r, q, be64toh(srv.arg) ^ 1, &ka, "FORGED-BAD1"), "raw UD send");
	CHECK(!raw_send(&r, q, be64toh(srv.arg), &kb, "FORGED-BAD2"), "raw UD send");
	CHECK(dg_wait(k, 1, a, &h, 1000, "FORGED-BAD1"), "a token with a bit flipped was taken");
	CHECK(dg_wait(k2, 1, a, &h, 200, "FORGED-BAD2"), "a token naming another address was taken");
	if (stale_s > 0) {
		sleep((unsigned)stale_s);
		CHECK(!raw_send(&r, q, be64toh(srv.arg), &ka, "FORGED-OLD"), "raw UD send");
		CHECK(dg_wait(k, 1, a, &h, 1000, "FORGED-OLD"), "a token %d s old was taken", stale_s);
	}
	printf("client: tokens: the right one taken, a wrong one, another address's%s refused\n",
	       stale_s > 0 ? ", a lapsed one" : "");
	raw_close(&r);
	close(k);
	close(k2);
}

static int client(struct sockaddr_in *a, int count, const char *myaddr)
{
	static uint64_t rtt[100000];
	int s = rsocket(AF_INET, SOCK_DGRAM, 0), resent = 0, t, val;
	struct sockaddr_in me;
	socklen_t l = sizeof(me);
	static uint8_t big[8192];
	uint8_t small[16];
	struct iovec v[3];
	struct msghdr m;

	if (count < 1 || count > 100000)
		return 2;
	if (s < 0) {
		perror("rsock_dgram client: rsocket");
		return 1;
	}
	l = sizeof(val);
	CHECK(!rgetsockopt(s, SOL_SOCKET, SO_TYPE, &val, &l) && val == SOCK_DGRAM, "SO_TYPE");
	CHECK(rsend(s, "x", 1, 0) < 0 && errno == EDESTADDRREQ, "rsend unconnected: %s",
	      strerror(errno));
	CHECK(rlisten(s, 1) < 0 && errno == EOPNOTSUPP, "rlisten: %s", strerror(errno));
	/* unconnected: rsendto / rrecvfrom, sizes 1 .. MAXD */
	for (int i = 0; i < count; i++) {
		size_t n = 1 + (size_t)((uint64_t)i * 2654435761u % MAXD);

		if (ping(s, a, false, (uint32_t)i, n, &rtt[i], &resent))
			return 1;
	}
	l = sizeof(me);
	CHECK(!rgetsockname(s, (struct sockaddr *)&me, &l) && me.sin_port, "rgetsockname");
	if (myaddr) {
		attack(s, a, myaddr);
		forge(a, myaddr, getenv("RSOCK_DGRAM_STALE_S") ? atoi(getenv("RSOCK_DGRAM_STALE_S")) : 0);
	}
	/* too big for one datagram */
	/* one datagram holds 4064 bytes (the port's 4096 less our UD header) */
	CHECK(rsendto(s, big, 4064, 0, (struct sockaddr *)a, sizeof(*a)) == 4064, "4064 bytes: %s",
	      strerror(errno));
	CHECK(rsendto(s, big, 4065, 0, (struct sockaddr *)a, sizeof(*a)) < 0 && errno == EMSGSIZE,
	      "4065 bytes: %s", strerror(errno));
	/* an iovec whose lengths wrap, one with bytes and no address */
	{
		struct iovec w[2] = { { big, (size_t)1 << 63 }, { big, ((size_t)1 << 63) + 8 } };
		struct msghdr wm = { .msg_name = a, .msg_namelen = sizeof(*a), .msg_iov = w,
				     .msg_iovlen = 2 };

		CHECK(rsendmsg(s, &wm, 0) < 0 && errno == EINVAL, "wrapping iovec: %s",
		      strerror(errno));
		w[0] = (struct iovec){ NULL, 8 };
		wm.msg_iovlen = 1;
		CHECK(rsendmsg(s, &wm, 0) < 0 && errno == EFAULT, "NULL iovec: %s", strerror(errno));
	}
	/* connected: rsend / rrecv, and rsendmsg / rrecvmsg of three parts */
	CHECK(!rconnect(s, (struct sockaddr *)a, sizeof(*a)), "rconnect: %s", strerror(errno));
	l = sizeof(me);
	CHECK(!rgetpeername(s, (struct sockaddr *)&me, &l) && me.sin_port == a->sin_port,
	      "rgetpeername");
	for (int i = 0; i < 20; i++) {
		uint64_t r;

		if (ping(s, a, true, 100000u + (uint32_t)i, 64 + (size_t)i * 100, &r, &resent))
			return 1;
	}
	fill(big, 3000, 7);
	memcpy(big, "TRNC", 4);
	v[0] = (struct iovec){ big, 1000 };
	v[1] = (struct iovec){ big + 1000, 1500 };
	v[2] = (struct iovec){ big + 2500, 500 };
	m = (struct msghdr){ .msg_iov = v, .msg_iovlen = 3 };
	for (t = 0; t < 5; t++) {
		struct pollfd p = { .fd = s, .events = POLLIN };

		CHECK(rsendmsg(s, &m, 0) == 3000, "rsendmsg: %s", strerror(errno));
		if (rpoll(&p, 1, 1000) == 1)
			break;
	}
	{
		struct sockaddr_in from;
		struct iovec iv = { small, sizeof(small) };
		struct msghdr mm = { .msg_name = &from, .msg_namelen = sizeof(from), .msg_iov = &iv,
				     .msg_iovlen = 1 };
		ssize_t r = rrecvmsg(s, &mm, MSG_DONTWAIT);

		/* a receive shorter than the datagram: the rest is gone */
		CHECK(r == (ssize_t)sizeof(small) && (mm.msg_flags & MSG_TRUNC) &&
			      !memcmp(small, big, sizeof(small)) && mm.msg_namelen == sizeof(from) &&
			      from.sin_port == a->sin_port,
		      "rrecvmsg of a truncated datagram: %zd flags %x", r, mm.msg_flags);
		CHECK(rrecv(s, small, sizeof(small), MSG_DONTWAIT) < 0 && errno == EAGAIN,
		      "the rest of a truncated datagram came: %s", strerror(errno));
	}
	qsort(rtt, (size_t)count, sizeof(*rtt), cmp_u64);
	printf("client: %d datagrams echoed and checked, %d sent again; round trip median %.1f us, "
	       "p99 %.1f us\n",
	       count, resent, rtt[count / 2] / 1e3, rtt[count * 99 / 100] / 1e3);
	for (t = 0; t < 3; t++)
		rsend(s, "QUIT", 4, 0);
	rclose(s);
	return fails ? 1 : 0;
}

/* Kernel UDP to the server's rsocket: nothing of it may reach the echo. */
static int junk(struct sockaddr_in *a)
{
	int k = socket(AF_INET, SOCK_DGRAM, 0);
	uint8_t b[64];
	const char *lines[] = { "hello", "RSD1" };

	if (k < 0)
		return 1;
	for (unsigned i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
		sendto(k, lines[i], strlen(lines[i]), 0, (struct sockaddr *)a, sizeof(*a));
	/* an ADDR with trailing bytes, a DATA with QPN 0, an unknown op */
	memset(b, 0, sizeof(b));
	b[0] = 'R', b[1] = 'S', b[2] = 'D', b[3] = '1', b[4] = 2;
	b[11] = 9;
	sendto(k, b, 40, 0, (struct sockaddr *)a, sizeof(*a));
	b[4] = 1;
	b[11] = 0;
	sendto(k, b, 28, 0, (struct sockaddr *)a, sizeof(*a));
	b[4] = 7;
	b[11] = 9;
	sendto(k, b, 28, 0, (struct sockaddr *)a, sizeof(*a));
	/* a well-formed DATA naming a QP that is not ours: the server learns
	 * it for our address and echoes to it over UD (lost there) */
	b[4] = 1;
	b[10] = 0x12;
	sendto(k, b, 28 + 5, 0, (struct sockaddr *)a, sizeof(*a));
	close(k);
	return 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a;

	if (argc < 4)
		return 2;
	a = addr_of(argv[2], argv[3]);
	if (!strcmp(argv[1], "server"))
		return server(&a);
	if (!strcmp(argv[1], "client") && (argc == 5 || argc == 6))
		return client(&a, atoi(argv[4]), argc == 6 ? argv[5] : NULL);
	if (!strcmp(argv[1], "junk"))
		return junk(&a);
	return 2;
}
