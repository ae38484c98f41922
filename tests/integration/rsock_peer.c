// SPDX-License-Identifier: MIT
/*
 * rsockets of libroshm-verbs (client-lib/verbs/rsocket.c) against peers
 * that break the protocol, for check_rsockets.sh. The hostile side is a raw
 * rdma_cm id with its own RC QP, which sends what it likes into the
 * rsocket's slots:
 * - a connect without our hello, or with one out of bounds: refused, and
 *   the listener still serves the next peer; a server that answers without
 *   a hello: rconnect fails with ECONNREFUSED;
 * - after good data: an unknown type, credits beyond the slots it has, a
 *   SEND without immediate data, a FIN with a payload, a message longer
 *   than a slot: the rsocket reads the good data, then gets an error (never
 *   a byte of the bad message), rpoll says POLLERR, rsend fails, rclose
 *   works;
 * - flow control: a peer with 2 slots that gives no credit back gets one
 *   DATA message and not a second (rsend says EAGAIN), then one more per
 *   credit it returns.
 *   rsock_peer ADDR PORT
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

#define RS_MAGIC 0x52535231u
#define T_DATA 0u
#define T_CREDIT 1u
#define T_FIN 2u
#define IMM(t, n) ((t) << 28 | (n))
#define SEG 4096

__attribute__((noreturn, format(printf, 1, 2))) static void fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "rsock_peer: FAIL: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

#define CHECK(c, ...) do { if (!(c)) fail(__VA_ARGS__); } while (0)

static const char *addr;
static int port;

static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

struct hello {
	uint32_t magic, slots, seg;
};

/* The raw peer: an id, a PD, a CQ, an RC QP and 64 KiB of buffer, RECVs
 * of SEG bytes posted in the first slots. */
struct raw {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf;
	int recvs;   /* RECV completions seen */
};

static struct rdma_cm_event *ev_wait(struct rdma_event_channel *ch, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;
	struct rdma_cm_event *e;

	for (;;) {
		struct pollfd p = { .fd = ch->fd, .events = POLLIN };

		if (!rdma_get_cm_event(ch, &e))
			return e;
		CHECK(errno == EAGAIN, "rdma_get_cm_event: %s", strerror(errno));
		if (now_ms() >= end)
			return NULL;
		poll(&p, 1, 20);
	}
}

static enum rdma_cm_event_type ev_take(struct rdma_event_channel *ch, int ms, void *pd, uint8_t *pdlen)
{
	struct rdma_cm_event *e = ev_wait(ch, ms);
	enum rdma_cm_event_type t;

	CHECK(e, "no CM event within %d ms", ms);
	t = e->event;
	if (pd && pdlen) {
		*pdlen = e->param.conn.private_data_len;
		if (*pdlen)
			memcpy(pd, e->param.conn.private_data, *pdlen);
	}
	rdma_ack_cm_event(e);
	return t;
}

static void raw_qp(struct raw *r, int recvs)
{
	struct ibv_qp_init_attr a;

	r->buf = aligned_alloc(4096, 65536);
	CHECK(r->buf, "alloc");
	memset(r->buf, 'x', 65536);
	r->cq = ibv_create_cq(r->id->verbs, 64, NULL, NULL, 0);
	CHECK(r->cq, "ibv_create_cq: %s", strerror(errno));
	memset(&a, 0, sizeof(a));
	a.send_cq = a.recv_cq = r->cq;
	a.qp_type = IBV_QPT_RC;
	a.sq_sig_all = 1;
	a.cap.max_send_wr = 16;
	a.cap.max_recv_wr = 16;
	a.cap.max_send_sge = a.cap.max_recv_sge = 1;
	CHECK(!rdma_create_qp(r->id, NULL, &a), "rdma_create_qp: %s", strerror(errno));
	r->mr = ibv_reg_mr(r->id->qp->pd, r->buf, 65536, IBV_ACCESS_LOCAL_WRITE);
	CHECK(r->mr, "ibv_reg_mr: %s", strerror(errno));
	for (int i = 0; i < recvs; i++) {
		struct ibv_sge s = { (uintptr_t)(r->buf + 32768 + i * SEG), SEG, r->mr->lkey };
		struct ibv_recv_wr w = { .wr_id = (uint64_t)i, .sg_list = &s, .num_sge = 1 }, *bad;

		CHECK(!ibv_post_recv(r->id->qp, &w, &bad), "ibv_post_recv");
	}
}

static void raw_free(struct raw *r)
{
	if (r->id) {
		rdma_disconnect(r->id);
		if (r->id->qp)
			rdma_destroy_qp(r->id);
		if (r->mr)
			ibv_dereg_mr(r->mr);
		if (r->cq)
			ibv_destroy_cq(r->cq);
		rdma_destroy_id(r->id);
	}
	if (r->ch)
		rdma_destroy_event_channel(r->ch);
	free(r->buf);
	memset(r, 0, sizeof(*r));
}

/* Connect to ADDR:port with private data pd; the CM's answer. */
static enum rdma_cm_event_type raw_connect(struct raw *r, int p, const void *pd, uint8_t len,
					   int recvs)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)p) };
	struct rdma_conn_param cp;

	memset(r, 0, sizeof(*r));
	CHECK(inet_pton(AF_INET, addr, &sa.sin_addr) == 1, "address");
	r->ch = rdma_create_event_channel();
	CHECK(r->ch, "rdma_create_event_channel");
	CHECK(!fcntl(r->ch->fd, F_SETFL, O_NONBLOCK), "O_NONBLOCK");
	CHECK(!rdma_create_id(r->ch, &r->id, NULL, RDMA_PS_TCP), "rdma_create_id");
	CHECK(!rdma_resolve_addr(r->id, NULL, (struct sockaddr *)&sa, 2000), "rdma_resolve_addr: %s",
	      strerror(errno));
	CHECK(ev_take(r->ch, 5000, NULL, NULL) == RDMA_CM_EVENT_ADDR_RESOLVED, "ADDR_RESOLVED");
	CHECK(!rdma_resolve_route(r->id, 2000), "rdma_resolve_route");
	CHECK(ev_take(r->ch, 5000, NULL, NULL) == RDMA_CM_EVENT_ROUTE_RESOLVED, "ROUTE_RESOLVED");
	raw_qp(r, recvs);
	memset(&cp, 0, sizeof(cp));
	cp.private_data = pd;
	cp.private_data_len = len;
	cp.retry_count = 7;
	cp.rnr_retry_count = 7;
	CHECK(!rdma_connect(r->id, &cp), "rdma_connect: %s", strerror(errno));
	return ev_take(r->ch, 20000, NULL, NULL);
}

/* Send len bytes of 'B' (none: num_sge 0) with imm (or without), and wait
 * for its completion; RECV completions on the way are counted. */
static enum ibv_wc_status raw_send(struct raw *r, bool with_imm, uint32_t imm, uint32_t len)
{
	struct ibv_sge s = { (uintptr_t)r->buf, len, r->mr->lkey };
	struct ibv_send_wr w, *bad;
	uint64_t end = now_ms() + 10000;
	struct ibv_wc wc;

	memset(r->buf, 'B', len);
	memset(&w, 0, sizeof(w));
	w.wr_id = 1000;
	w.opcode = with_imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
	w.imm_data = htonl(imm);
	w.send_flags = IBV_SEND_SIGNALED;
	w.sg_list = len ? &s : NULL;
	w.num_sge = len ? 1 : 0;
	CHECK(!ibv_post_send(r->id->qp, &w, &bad), "ibv_post_send");
	for (;;) {
		int n = ibv_poll_cq(r->cq, 1, &wc);

		CHECK(n >= 0, "ibv_poll_cq");
		if (n && wc.wr_id == 1000)
			return wc.status;
		if (n)
			r->recvs++;
		CHECK(now_ms() < end, "no completion for our SEND");
		usleep(100);
	}
}

/* RECV completions within ms */
static int raw_recvs(struct raw *r, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;
	struct ibv_wc wc;

	while (now_ms() < end) {
		int n = ibv_poll_cq(r->cq, 1, &wc);

		CHECK(n >= 0, "ibv_poll_cq");
		if (n) {
			CHECK(wc.status == IBV_WC_SUCCESS, "RECV completion %s", ibv_wc_status_str(wc.status));
			r->recvs++;
		} else {
			usleep(200);
		}
	}
	return r->recvs;
}

static struct hello hello(uint32_t slots, uint32_t seg)
{
	return (struct hello){ htonl(RS_MAGIC), htonl(slots), htonl(seg) };
}

/* raccept in a thread: the raw peer's CM must run at the same time */
struct acc {
	pthread_t t;
	int l, fd, err;
};

static void *acc_run(void *arg)
{
	struct acc *a = arg;

	a->fd = raccept(a->l, NULL, NULL);
	a->err = errno;
	return NULL;
}

static int listener(int p)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)p) };
	int l = rsocket(AF_INET, SOCK_STREAM, 0), one = 1;

	CHECK(l >= 0, "rsocket: %s", strerror(errno));
	CHECK(inet_pton(AF_INET, addr, &sa.sin_addr) == 1, "address");
	CHECK(!rsetsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)), "SO_REUSEADDR");
	CHECK(!rbind(l, (struct sockaddr *)&sa, sizeof(sa)), "rbind: %s", strerror(errno));
	CHECK(!rlisten(l, 4), "rlisten: %s", strerror(errno));
	return l;
}

/* A raw peer with a good hello, connected to the rsocket listener l: the
 * accepted rsocket's descriptor. */
static int accept_raw(int l, struct raw *r, uint32_t slots, int recvs)
{
	struct hello h = hello(slots, SEG);
	struct acc a = { .l = l, .fd = -1 };

	CHECK(!pthread_create(&a.t, NULL, acc_run, &a), "pthread_create");
	CHECK(raw_connect(r, port, &h, sizeof(h), recvs) == RDMA_CM_EVENT_ESTABLISHED,
	      "a raw peer with a good hello was not accepted");
	pthread_join(a.t, NULL);
	CHECK(a.fd >= 0, "raccept: %s", strerror(a.err));
	return a.fd;
}

/* The rsocket reads "GOOD" and then fails; it never sees a 'B'. */
static void expect_broken(int fd, const char *what)
{
	char b[8192];
	struct pollfd p = { .fd = fd, .events = POLLIN | POLLOUT };
	ssize_t n = rrecv(fd, b, sizeof(b), 0);
	int e;

	CHECK(n == 4 && !memcmp(b, "GOOD", 4), "%s: the good data before it: got %zd", what, n);
	n = rrecv(fd, b, sizeof(b), 0);
	e = errno;
	CHECK(n < 0 && (e == EPROTO || e == ECONNRESET),
	      "%s: rrecv after it: want EPROTO or ECONNRESET, got %zd (%s)", what, n,
	      n < 0 ? strerror(e) : "data");
	CHECK(rpoll(&p, 1, 1000) == 1 && (p.revents & POLLERR), "%s: rpoll: no POLLERR (0x%x)", what,
	      p.revents);
	CHECK(rsend(fd, "x", 1, 0) < 0, "%s: rsend on a broken rsocket succeeded", what);
	CHECK(!rclose(fd), "%s: rclose", what);
	printf("rsock_peer: ok: %s: good data read, then %s\n", what, strerror(e));
}

static void bad_message(int l, const char *what, bool with_imm, uint32_t imm, uint32_t len)
{
	struct raw r;
	int fd = accept_raw(l, &r, 8, 8);

	memcpy(r.buf, "GOOD", 4);
	{
		struct ibv_sge s = { (uintptr_t)r.buf, 4, r.mr->lkey };
		struct ibv_send_wr w = { .wr_id = 1000, .sg_list = &s, .num_sge = 1,
					 .opcode = IBV_WR_SEND_WITH_IMM, .send_flags = IBV_SEND_SIGNALED,
					 .imm_data = htonl(IMM(T_DATA, 0)) }, *bad;
		struct ibv_wc wc;
		uint64_t end = now_ms() + 10000;

		CHECK(!ibv_post_send(r.id->qp, &w, &bad), "post GOOD");
		while (ibv_poll_cq(r.cq, 1, &wc) == 0)
			CHECK(now_ms() < end, "GOOD not completed");
		CHECK(wc.status == IBV_WC_SUCCESS, "GOOD: %s", ibv_wc_status_str(wc.status));
	}
	raw_send(&r, with_imm, imm, len);   /* may fail at the rsocket's end: its business */
	expect_broken(fd, what);
	raw_free(&r);
}

/* a raw server: accepts one connection with no private data at all */
struct srv {
	pthread_t t;
	struct rdma_event_channel *ch;
	struct raw r;
};

static void *srv_run(void *arg)
{
	struct srv *sv = arg;
	struct rdma_cm_event *e = ev_wait(sv->ch, 20000);

	CHECK(e && e->event == RDMA_CM_EVENT_CONNECT_REQUEST, "no CONNECT_REQUEST");
	sv->r.id = e->id;
	rdma_ack_cm_event(e);
	raw_qp(&sv->r, 4);
	CHECK(!rdma_accept(sv->r.id, NULL), "rdma_accept: %s", strerror(errno));
	e = ev_wait(sv->ch, 3000);   /* ESTABLISHED, then the DISCONNECTED */
	if (e)
		rdma_ack_cm_event(e);
	return NULL;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct hello h;
	struct raw r;
	char b[SEG * 4];
	int l, fd, c;

	if (argc != 3) {
		fprintf(stderr, "usage: rsock_peer ADDR PORT\n");
		return 2;
	}
	addr = argv[1];
	port = atoi(argv[2]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	alarm(120);
	CHECK(rsocket(AF_INET, SOCK_DGRAM, 0) < 0 && errno == EPROTONOSUPPORT,
	      "a datagram rsocket: want EPROTONOSUPPORT");
	CHECK(rsocket(AF_UNIX, SOCK_STREAM, 0) < 0 && errno == EAFNOSUPPORT,
	      "an AF_UNIX rsocket: want EAFNOSUPPORT");
	CHECK(rrecv(0, b, 1, 0) < 0 && errno == EBADF, "rrecv on a plain descriptor: want EBADF");
	l = listener(port);
	CHECK(!rfcntl(l, F_SETFL, O_NONBLOCK), "rfcntl");

	/* 1. no hello, a hello out of bounds: refused; the listener goes on
	 * (its raccept, in a thread, turns them away and waits for the next) */
	CHECK(raccept(l, NULL, NULL) < 0 && errno == EAGAIN, "a non-blocking raccept with nobody there");
	CHECK(!rfcntl(l, F_SETFL, 0), "rfcntl");
	{
		struct acc a = { .l = l, .fd = -1 };
		struct sockaddr_in la = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };

		CHECK(!pthread_create(&a.t, NULL, acc_run, &a), "pthread_create");
		CHECK(raw_connect(&r, port, "junk", 4, 0) == RDMA_CM_EVENT_REJECTED, "no hello: not rejected");
		raw_free(&r);
		h = hello(1, SEG);
		CHECK(raw_connect(&r, port, &h, sizeof(h), 0) == RDMA_CM_EVENT_REJECTED, "1 slot: not rejected");
		raw_free(&r);
		h = hello(8, 1u << 30);
		CHECK(raw_connect(&r, port, &h, sizeof(h), 0) == RDMA_CM_EVENT_REJECTED,
		      "1 GiB slots: not rejected");
		raw_free(&r);
		c = rsocket(AF_INET, SOCK_STREAM, 0);
		CHECK(c >= 0 && inet_pton(AF_INET, addr, &la.sin_addr) == 1, "rsocket");
		CHECK(!rconnect(c, (struct sockaddr *)&la, sizeof(la)), "rconnect: %s", strerror(errno));
		pthread_join(a.t, NULL);
		CHECK(a.fd >= 0, "raccept: %s", strerror(a.err));
		CHECK(rsend(c, "ping", 4, 0) == 4 && rrecv(a.fd, b, 4, MSG_WAITALL) == 4 &&
		      !memcmp(b, "ping", 4), "ping after the refused peers");
		CHECK(!rclose(c) && rrecv(a.fd, b, sizeof(b), 0) == 0, "EOF after the peer's rclose");
		CHECK(!rclose(a.fd), "rclose");
	}
	printf("rsock_peer: ok: peers without a good hello are refused, the listener goes on\n");

	/* 2. bad messages after good data */
	bad_message(l, "unknown type", true, IMM(7u, 0), 0);
	bad_message(l, "credits beyond the slots", true, IMM(T_CREDIT, 0xffffu), 0);
	bad_message(l, "bits outside type and credits", true, IMM(T_CREDIT, 0) | 0x00100000u, 0);
	bad_message(l, "SEND without immediate data", false, 0, 16);
	bad_message(l, "FIN with a payload", true, IMM(T_FIN, 0), 16);
	bad_message(l, "a message longer than a slot", true, IMM(T_DATA, 0), 20000);

	/* 3. flow control: 2 slots, no credit back: one DATA message, no more */
	fd = accept_raw(l, &r, 2, 2);
	CHECK(!rfcntl(fd, F_SETFL, O_NONBLOCK), "rfcntl");
	memset(b, 'D', sizeof(b));
	CHECK(rsend(fd, b, 100, 0) == 100, "first DATA: %s", strerror(errno));
	CHECK(rsend(fd, b, 100, 0) < 0 && errno == EAGAIN, "a second DATA without credit: want EAGAIN");
	CHECK(raw_recvs(&r, 300) == 1, "the peer got %d messages, want 1", r.recvs);
	{
		struct pollfd p = { .fd = fd, .events = POLLOUT };

		CHECK(rpoll(&p, 1, 100) == 0, "rpoll says POLLOUT without credit");
	}
	/* one slot back (the RECV reposted), one credit given */
	{
		struct ibv_sge s = { (uintptr_t)(r.buf + 32768), SEG, r.mr->lkey };
		struct ibv_recv_wr w = { .wr_id = 0, .sg_list = &s, .num_sge = 1 }, *bad;
		struct pollfd p = { .fd = fd, .events = POLLOUT };

		CHECK(!ibv_post_recv(r.id->qp, &w, &bad), "repost");
		CHECK(raw_send(&r, true, IMM(T_CREDIT, 1), 0) == IBV_WC_SUCCESS, "CREDIT");
		CHECK(rpoll(&p, 1, 5000) == 1 && (p.revents & POLLOUT), "no POLLOUT after a credit");
	}
	CHECK(rsend(fd, b, 100, 0) == 100, "DATA after a credit: %s", strerror(errno));
	CHECK(rsend(fd, b, 100, 0) < 0 && errno == EAGAIN, "DATA beyond the credit: want EAGAIN");
	CHECK(raw_recvs(&r, 300) == 2, "the peer got %d messages, want 2", r.recvs);
	CHECK(!rclose(fd), "rclose");
	raw_free(&r);
	printf("rsock_peer: ok: flow control: never more messages than the peer's credits\n");

	/* 4. a server that is not an rsocket (no hello in its answer) */
	{
		struct rdma_event_channel *ch = rdma_create_event_channel();
		struct rdma_cm_id *lid;
		CHECK(ch && !fcntl(ch->fd, F_SETFL, O_NONBLOCK) && !rdma_create_id(ch, &lid, NULL, RDMA_PS_TCP), "raw listener id");
		sa.sin_port = htons((uint16_t)(port + 1));
		CHECK(inet_pton(AF_INET, addr, &sa.sin_addr) == 1, "address");
		CHECK(!rdma_bind_addr(lid, (struct sockaddr *)&sa) && !rdma_listen(lid, 4), "raw listen");
		c = rsocket(AF_INET, SOCK_STREAM, 0);
		CHECK(c >= 0, "rsocket");
		{
			struct srv sv = { .ch = ch };

			CHECK(!pthread_create(&sv.t, NULL, srv_run, &sv), "pthread_create");
			CHECK(rconnect(c, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno == ECONNREFUSED,
			      "rconnect to a server without a hello: want ECONNREFUSED, got %s",
			      strerror(errno));
			pthread_join(sv.t, NULL);
			raw_free(&sv.r);
		}
		CHECK(!rclose(c), "rclose");
		rdma_destroy_id(lid);
		rdma_destroy_event_channel(ch);
	}
	printf("rsock_peer: ok: a server that answers without a hello: ECONNREFUSED\n");
	CHECK(!rclose(l), "rclose listener");
	printf("rsock_peer: ok\n");
	return 0;
}
