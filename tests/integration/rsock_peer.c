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
 * - more DATA than the slots the rsocket has, control credits it never
 *   gave: the same;
 * - flow control: a peer with 2 slots that gives no credit back gets two
 *   DATA messages and not a third (rsend says EAGAIN), then one more per
 *   credit it returns.
 * - and between two honest rsockets, what an adversarial review found: a
 *   half close with a reply bigger than the buffers in both directions; a
 *   writer blocked in rsend when its peer closes; a reader and a writer
 *   thread on one rsocket (4 slots) against an echo; a client that never
 *   confirms its connection (no RTU) does not hold up raccept, and when it
 *   leaves, the rsocket reads ECONNRESET; rclose while another thread sleeps
 *   in rrecv (that call ends with EBADF); and from a second review: rpoll
 *   and rclose while another thread's rconnect waits; rpoll on a closed
 *   rsocket (POLLNVAL); six sleepers on one rsocket, woken by something
 *   that is not theirs, sleep again (no spinning); EINTR stays EINTR; a bare
 *   TCP connection to a listener is not a connection request.
 *   rsock_peer ADDR PORT
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <endian.h>
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
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

#define RS_MAGIC 0x52535231u
#define T_DATA 0u
#define T_CREDIT 1u
#define T_FIN 2u
#define T_IOMAP 3u
#define IMM(t, n) ((t) << 28 | (n))          /* data credits n */
#define IMMC(t, c) ((t) << 28 | (c) << 24)    /* control credits c */
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
	int ctrl_back;   /* control credits they gave back */
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

/* A RECV completion of the raw peer: counted, its control credits too. */
static void raw_seen(struct raw *r, const struct ibv_wc *wc)
{
	r->recvs++;
	if (wc->status == IBV_WC_SUCCESS && (wc->wc_flags & IBV_WC_WITH_IMM))
		r->ctrl_back += (int)((ntohl(wc->imm_data) >> 24) & 0xf);
}

/* Send len bytes of b (NULL: of 'B'; none: num_sge 0) with imm (or
 * without), and wait for its completion; RECV completions on the way are
 * counted. */
static enum ibv_wc_status raw_send_bytes(struct raw *r, bool with_imm, uint32_t imm, const void *b,
					 uint32_t len)
{
	struct ibv_sge s = { (uintptr_t)r->buf, len, r->mr->lkey };
	struct ibv_send_wr w, *bad;
	uint64_t end = now_ms() + 10000;
	struct ibv_wc wc;

	if (b)
		memcpy(r->buf, b, len);
	else
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
			raw_seen(r, &wc);
		CHECK(now_ms() < end, "no completion for our SEND");
		usleep(100);
	}
}

static enum ibv_wc_status raw_send(struct raw *r, bool with_imm, uint32_t imm, uint32_t len)
{
	return raw_send_bytes(r, with_imm, imm, NULL, len);
}

/* An IOMAP message's bytes (network order) */
struct iomap {
	uint64_t off, addr;
	uint32_t len, rkey;
};

static enum ibv_wc_status raw_iomap(struct raw *r, uint64_t off, uint64_t a, uint32_t len, uint32_t rkey)
{
	struct iomap m = { htobe64(off), htobe64(a), htonl(len), htonl(rkey) };

	return raw_send_bytes(r, true, IMM(T_IOMAP, 0), &m, sizeof(m));
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
			raw_seen(r, &wc);
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
	/* good data after the bad message never joins the stream */
	raw_send(&r, true, IMM(T_DATA, 0), 4);
	expect_broken(fd, what);
	raw_free(&r);
}

/* GOOD, then IOMAP messages ms[0..n) (host order), the last one bad, then
 * more data: the rsocket reads GOOD, then fails */
static void bad_iomaps(int l, const char *what, const struct iomap *ms, int n)
{
	struct raw r;
	int fd = accept_raw(l, &r, 8, 8);

	CHECK(raw_send_bytes(&r, true, IMM(T_DATA, 0), "GOOD", 4) == IBV_WC_SUCCESS, "GOOD");
	for (int i = 0; i < n; i++)
		raw_iomap(&r, ms[i].off, ms[i].addr, ms[i].len, ms[i].rkey);
	raw_send(&r, true, IMM(T_DATA, 0), 4);
	expect_broken(fd, what);
	raw_free(&r);
}

/*
 * riowrite against a raw peer's maps: it lands at the map's address plus
 * the offset into it, only inside a map the peer gave (EINVAL past its end,
 * where there is none, after the peer's unmap); riomap's IOMAP message
 * names our buffer, and the peer's WRITE with its rkey lands there.
 */
static void iomap_check(int l)
{
	static uint8_t mine[8192];
	uint8_t *win = aligned_alloc(4096, 16384);
	struct raw r;
	int fd = accept_raw(l, &r, 8, 8);
	struct ibv_mr *wmr = win ? ibv_reg_mr(r.id->qp->pd, win, 16384,
					      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) : NULL;
	struct iomap got;
	struct ibv_wc wc;
	uint64_t end;
	off_t at;

	CHECK(wmr, "the raw peer's window: %s", strerror(errno));
	memset(win, 0, 16384);
	CHECK(raw_iomap(&r, 4096, (uintptr_t)win, 8192, wmr->rkey) == IBV_WC_SUCCESS, "IOMAP");
	CHECK(riowrite(fd, "riowrite!", 9, 4096 + 10, 0) == 9, "riowrite into the peer's map: %s",
	      strerror(errno));
	for (end = now_ms() + 10000; memcmp(win + 10, "riowrite!", 9); usleep(1000))
		CHECK(now_ms() < end, "riowrite's bytes did not land at the map's address + 10");
	CHECK(!win[9] && !win[19], "riowrite wrote outside its bytes");
	CHECK(riowrite(fd, "x", 2, 4096 + 8191, 0) == 0 && errno == EINVAL, "riowrite past the map's end");
	CHECK(riowrite(fd, "x", 1, 0, 0) == 0 && errno == EINVAL, "riowrite where no map is");
	CHECK(raw_iomap(&r, 4096, 0, 0, 0) == IBV_WC_SUCCESS, "IOMAP unmap");
	for (end = now_ms() + 10000; riowrite(fd, "x", 1, 4096, 0) == 1; usleep(1000))
		CHECK(now_ms() < end, "riowrite after the peer's unmap: taken for 10 s");
	CHECK(errno == EINVAL, "riowrite after the peer's unmap: %s", strerror(errno));
	/* ours: the IOMAP names mine, the peer writes there with its rkey */
	at = riomap(fd, mine, sizeof(mine), PROT_WRITE, 0, -1);
	CHECK(at == 0, "riomap: %s", strerror(errno));
	CHECK(riomap(fd, mine, 10, PROT_WRITE, 0, 100) < 0 && errno == EINVAL, "an overlapping riomap");
	CHECK(riomap(fd, mine, 10, PROT_READ, 0, -1) < 0 && errno == EINVAL, "a riomap for reading");
	for (end = now_ms() + 10000;; usleep(1000)) {
		int n = ibv_poll_cq(r.cq, 1, &wc);

		CHECK(n >= 0 && now_ms() < end, "no IOMAP message from riomap");
		if (n && wc.opcode == IBV_WC_RECV && (ntohl(wc.imm_data) >> 28 != T_CREDIT ||
						      wc.status != IBV_WC_SUCCESS))
			break;   /* not the CREDIT that gives our two IOMAPs' credits back */
	}
	CHECK(wc.status == IBV_WC_SUCCESS && (wc.wc_flags & IBV_WC_WITH_IMM) &&
	      ntohl(wc.imm_data) >> 28 == T_IOMAP && wc.byte_len == sizeof(got), "the IOMAP message");
	memcpy(&got, r.buf + 32768 + wc.wr_id * SEG, sizeof(got));
	CHECK(!got.off && be64toh(got.addr) == (uintptr_t)mine && ntohl(got.len) == sizeof(mine),
	      "the IOMAP names off 0, our buffer, its length");
	{
		struct ibv_sge sg = { (uintptr_t)r.buf, 5, r.mr->lkey };
		struct ibv_send_wr w = { .wr_id = 7, .sg_list = &sg, .num_sge = 1,
					 .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED },
				   *bad;

		memcpy(r.buf, "hello", 5);
		w.wr.rdma.remote_addr = be64toh(got.addr) + 100;
		w.wr.rdma.rkey = ntohl(got.rkey);
		CHECK(!ibv_post_send(r.id->qp, &w, &bad), "the peer's WRITE");
		for (end = now_ms() + 10000; memcmp(mine + 100, "hello", 5); usleep(1000))
			CHECK(now_ms() < end, "the peer's WRITE into our riomap did not land");
	}
	CHECK(!riounmap(fd, mine, sizeof(mine)), "riounmap: %s", strerror(errno));
	CHECK(riounmap(fd, mine, sizeof(mine)) < 0 && errno == EINVAL, "a second riounmap");
	CHECK(!rclose(fd), "rclose");
	raw_free(&r);
	ibv_dereg_mr(wmr);
	free(win);
	printf("rsock_peer: ok: riowrite lands in the peer's map at its offset, never past it or after "
	       "its unmap; riomap's IOMAP names our buffer and the peer's WRITE lands there\n");
}

/* riomap in a thread */
struct mapjob {
	pthread_t t;
	int fd, err;
	void *b;
	off_t off, ret;
};

static void *job_map(void *arg)
{
	struct mapjob *j = arg;

	j->ret = riomap(j->fd, j->b, 4096, PROT_WRITE, 0, j->off);
	j->err = errno;
	return NULL;
}

/* The immediate of the next RECV of type t the raw peer gets within ms
 * (others are counted and skipped); 0 if none came. */
static uint32_t raw_wait_type(struct raw *r, uint32_t t, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;
	struct ibv_wc wc;

	while (now_ms() < end) {
		int n = ibv_poll_cq(r->cq, 1, &wc);

		CHECK(n >= 0, "ibv_poll_cq");
		if (!n) {
			usleep(1000);
			continue;
		}
		if (wc.opcode != IBV_WC_RECV)
			continue;
		raw_seen(r, &wc);
		if (wc.status == IBV_WC_SUCCESS && ntohl(wc.imm_data) >> 28 == t)
			return ntohl(wc.imm_data);
	}
	return 0;
}

/*
 * Control messages that cross: our riomaps and the peer's 3 IOMAPs (it too
 * keeps its last credit for CREDIT), each sent before its sender took in
 * any of the other's (no credits in them). A 4th riomap waits: we keep a
 * control credit for CREDIT, so we still give the peer its credits back;
 * once it returns ours, the 4th goes. (With the last credit
 * spent on an IOMAP, both sides owed each other all their credits and
 * neither could say so: riomap and FIN hung for good.) Then a peer that
 * sends DATA or an IOMAP after its FIN breaks the connection.
 */
static void ctrl_check(int l)
{
	static uint8_t b[4][4096];
	struct pollfd p;
	struct raw r;
	int fd = accept_raw(l, &r, 8, 12);

	struct mapjob j = { .fd = fd, .b = b[3], .off = 3 << 20 };

	for (int i = 0; i < 3; i++)
		CHECK(riomap(fd, b[i], sizeof(b[i]), PROT_WRITE, 0, (off_t)i << 20) == (off_t)i << 20,
		      "riomap %d: %s", i, strerror(errno));
	/* a 4th, which waits for a credit: the last one is CREDIT's */
	CHECK(!pthread_create(&j.t, NULL, job_map, &j), "pthread_create");
	for (int i = 0; i < 3; i++)
		CHECK(raw_iomap(&r, (uint64_t)i << 20, (uintptr_t)r.buf, 4096, r.mr->lkey) == IBV_WC_SUCCESS,
		      "the peer's IOMAP %d", i);
	p = (struct pollfd){ .fd = fd, .events = POLLOUT };
	rpoll(&p, 1, 0);   /* takes the peer's IOMAPs in (so does the waiting riomap) */
	/* a CREDIT on our last credit once 2 are owed (with every credit
	 * spent on IOMAPs, none could come) */
	for (uint64_t end = now_ms() + 5000; r.ctrl_back < 2 && now_ms() < end;)
		raw_wait_type(&r, T_CREDIT, 100);
	CHECK(r.ctrl_back >= 2, "the peer got %d of its 3 control credits back", r.ctrl_back);
	/* ours back: 3 IOMAPs and the CREDIT */
	CHECK(raw_send(&r, true, IMMC(T_CREDIT, 4u), 0) == IBV_WC_SUCCESS, "the peer's CREDIT");
	pthread_join(j.t, NULL);
	CHECK(j.ret == 3 << 20, "the 4th riomap: %s", strerror(j.err));
	CHECK(!rclose(fd), "rclose");
	raw_free(&r);
	printf("rsock_peer: ok: control messages that cross: a CREDIT still gives the peer its credits "
	       "back, and the next riomap goes\n");
	for (int k = 0; k < 2; k++) {
		char buf[64];
		ssize_t n;

		fd = accept_raw(l, &r, 8, 8);
		CHECK(raw_send_bytes(&r, true, IMM(T_DATA, 0), "GOOD", 4) == IBV_WC_SUCCESS, "GOOD");
		CHECK(raw_send(&r, true, IMM(T_FIN, 0), 0) == IBV_WC_SUCCESS, "FIN");
		if (k)
			raw_iomap(&r, 0, (uintptr_t)r.buf, 4096, r.mr->lkey);
		else
			raw_send_bytes(&r, true, IMM(T_DATA, 0), "EVIL", 4);
		n = rrecv(fd, buf, sizeof(buf), 0);
		CHECK(n == 4 && !memcmp(buf, "GOOD", 4), "after FIN: the data before it: got %zd", n);
		/* the stream ended at the FIN (EOF, or the break's EPROTO):
		 * nothing after it joins, and the connection is broken */
		n = rrecv(fd, buf, sizeof(buf), 0);
		CHECK(n == 0 || (n < 0 && errno == EPROTO), "%s after FIN: want EOF or EPROTO, got %zd (%s)",
		      k ? "IOMAP" : "DATA", n, n < 0 ? strerror(errno) : "data");
		p = (struct pollfd){ .fd = fd, .events = POLLIN };
		CHECK(rpoll(&p, 1, 1000) == 1 && (p.revents & POLLERR), "%s after FIN: no POLLERR (0x%x)",
		      k ? "IOMAP" : "DATA", p.revents);
		CHECK(!rclose(fd), "rclose");
		raw_free(&r);
	}
	printf("rsock_peer: ok: DATA or an IOMAP after the peer's FIN: the data before it, the end of "
	       "the stream, POLLERR\n");
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


/* an honest pair through listener l: *c the client's end, the server's
 * returned; RDMA_RQSIZE rq on both when not 0 */
static int pair_up(int l, int *c, int rq)
{
	struct sockaddr_in la = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct acc a = { .l = l, .fd = -1 };

	CHECK(!rsetsockopt(l, SOL_RDMA, RDMA_RQSIZE, &rq, sizeof(rq)), "RDMA_RQSIZE");
	*c = rsocket(AF_INET, SOCK_STREAM, 0);
	CHECK(*c >= 0 && inet_pton(AF_INET, addr, &la.sin_addr) == 1, "rsocket");
	CHECK(!rsetsockopt(*c, SOL_RDMA, RDMA_RQSIZE, &rq, sizeof(rq)), "RDMA_RQSIZE");
	CHECK(!pthread_create(&a.t, NULL, acc_run, &a), "pthread_create");
	CHECK(!rconnect(*c, (struct sockaddr *)&la, sizeof(la)), "rconnect: %s", strerror(errno));
	pthread_join(a.t, NULL);
	CHECK(a.fd >= 0, "raccept: %s", strerror(a.err));
	return a.fd;
}

/* read n bytes, each 'A' + its offset % 26; fail after 20 s of nothing */
static void read_all(int fd, size_t n, const char *what)
{
	static __thread char b[65536];
	size_t got = 0;

	while (got < n) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t k;

		CHECK(rpoll(&p, 1, 20000) == 1, "%s: nothing for 20 s after %zu of %zu bytes", what, got, n);
		k = rrecv(fd, b, n - got < sizeof(b) ? n - got : sizeof(b), MSG_DONTWAIT);
		if (k < 0 && errno == EAGAIN)
			continue;
		CHECK(k > 0, "%s: rrecv %zd (%s) after %zu of %zu bytes", what, k, k ? strerror(errno) : "EOF",
		      got, n);
		for (ssize_t i = 0; i < k; i++)
			CHECK(b[i] == 'A' + (char)((got + (size_t)i) % 26), "%s: byte %zu wrong", what,
			      got + (size_t)i);
		got += (size_t)k;
	}
}

static void write_all(int fd, size_t n, const char *what)
{
	static __thread char b[65536];
	size_t sent = 0;

	while (sent < n) {
		size_t k = n - sent < sizeof(b) ? n - sent : sizeof(b);
		ssize_t w;

		for (size_t i = 0; i < k; i++)
			b[i] = 'A' + (char)((sent + i) % 26);
		w = rsend(fd, b, k, 0);
		CHECK(w > 0, "%s: rsend: %s after %zu of %zu bytes", what, strerror(errno), sent, n);
		sent += (size_t)w;
	}
}

struct job {
	pthread_t t;
	int fd;
	size_t n;
	ssize_t ret;
	int err;
	uint64_t took_ms;
};

static void *job_reply(void *arg)   /* a 1 MiB reply first, then the request to EOF */
{
	struct job *j = arg;
	char b[64];

	write_all(j->fd, 1 << 20, "reply");
	read_all(j->fd, j->n, "request");
	CHECK(rrecv(j->fd, b, sizeof(b), 0) == 0, "request: no EOF after it");
	CHECK(!rshutdown(j->fd, SHUT_WR), "rshutdown");
	return NULL;
}

static void *job_echo(void *arg)
{
	struct job *j = arg;
	static char b[8192];
	ssize_t k;

	while ((k = rrecv(j->fd, b, sizeof(b), 0)) > 0)
		for (ssize_t off = 0; off < k;) {
			ssize_t w = rsend(j->fd, b + off, (size_t)(k - off), 0);

			CHECK(w > 0, "echo: rsend: %s", strerror(errno));
			off += w;
		}
	return NULL;
}

static void *job_write(void *arg)
{
	struct job *j = arg;

	write_all(j->fd, j->n, "writer");
	return NULL;
}

static void *job_close(void *arg)   /* rclose after 300 ms */
{
	struct job *j = arg;

	usleep(300000);
	j->ret = rclose(j->fd);
	return NULL;
}

static void *job_recv(void *arg)   /* one rrecv, however it ends */
{
	struct job *j = arg;
	char b[64];
	uint64_t t0 = now_ms();

	j->ret = rrecv(j->fd, b, sizeof(b), 0);
	j->err = errno;
	j->took_ms = now_ms() - t0;
	return NULL;
}

/* the silent client's CM runs (REQ out, REP in) but it never confirms */
static volatile int silent_stop;

static void *job_silent(void *arg)
{
	struct rdma_event_channel *ch = arg;
	struct rdma_cm_event *e;

	while (!silent_stop) {
		if (!rdma_get_cm_event(ch, &e))
			rdma_ack_cm_event(e);   /* CONNECT_RESPONSE: no rdma_establish */
		else
			usleep(5000);
	}
	return NULL;
}

static void *job_connect(void *arg)   /* rconnect to the port in n */
{
	struct job *j = arg;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)j->n) };
	uint64_t t0 = now_ms();

	inet_pton(AF_INET, addr, &sa.sin_addr);
	j->ret = rconnect(j->fd, (struct sockaddr *)&sa, sizeof(sa));
	j->err = errno;
	j->took_ms = now_ms() - t0;
	return NULL;
}

static void *job_poll_in(void *arg)   /* rpoll POLLIN for 3 s, the fd twice */
{
	struct job *j = arg;
	struct pollfd p[2] = { { .fd = j->fd, .events = POLLIN }, { .fd = j->fd, .events = POLLIN } };

	j->ret = rpoll(p, 2, 3000);
	return NULL;
}

static void on_alarm(int sig)
{
	(void)sig;
}

static double cpu_s(void)
{
	struct rusage u;

	getrusage(RUSAGE_SELF, &u);
	return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec / 1e6 +
	       (double)u.ru_stime.tv_sec + (double)u.ru_stime.tv_usec / 1e6;
}

static void second_review(int l)
{
	struct job jv[6], j;
	struct pollfd p;
	uint64_t t0;
	double cpu;
	int c, s, n;
	char b[64];

	/* rpoll and rclose while another thread's rconnect waits for a
	 * listener that never answers (a raw id that takes no events) */
	{
		struct rdma_event_channel *ch = rdma_create_event_channel();
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)(port + 2)) };
		struct rdma_cm_id *lid;

		CHECK(ch && !rdma_create_id(ch, &lid, NULL, RDMA_PS_TCP) &&
		      inet_pton(AF_INET, addr, &sa.sin_addr) == 1 &&
		      !rdma_bind_addr(lid, (struct sockaddr *)&sa) && !rdma_listen(lid, 4), "mute listener");
		j = (struct job){ .fd = rsocket(AF_INET, SOCK_STREAM, 0), .n = (size_t)port + 2 };
		CHECK(j.fd >= 0, "rsocket");
		CHECK(!pthread_create(&j.t, NULL, job_connect, &j), "pthread_create");
		usleep(300000);
		p = (struct pollfd){ .fd = j.fd, .events = POLLIN | POLLOUT };
		t0 = now_ms();
		CHECK(rpoll(&p, 1, 0) == 0 && now_ms() - t0 < 2000, "rpoll during rconnect: %llu ms",
		      (unsigned long long)(now_ms() - t0));
		t0 = now_ms();
		CHECK(!rclose(j.fd) && now_ms() - t0 < 2000, "rclose during rconnect: %llu ms",
		      (unsigned long long)(now_ms() - t0));
		pthread_join(j.t, NULL);
		CHECK(j.ret < 0 && j.err == EBADF && j.took_ms < 5000, "rconnect across rclose: %zd (%s) after %llu ms",
		      j.ret, strerror(j.err), (unsigned long long)j.took_ms);
		p = (struct pollfd){ .fd = j.fd, .events = POLLIN };
		CHECK(rpoll(&p, 1, 5000) == 1 && (p.revents & POLLNVAL), "rpoll on a closed rsocket: no POLLNVAL");
		rdma_destroy_id(lid);
		rdma_destroy_event_channel(ch);
	}
	printf("rsock_peer: ok: rpoll and rclose do not wait for another thread's rconnect; a closed rsocket polls POLLNVAL\n");

	/* six sleepers on one rsocket (each with it twice in its set); a
	 * shutdown of the other direction wakes them, not for them: they
	 * sleep again and do not spin */
	s = pair_up(l, &c, 16);
	for (int i = 0; i < 6; i++) {
		jv[i] = (struct job){ .fd = c };
		CHECK(!pthread_create(&jv[i].t, NULL, job_poll_in, &jv[i]), "pthread_create");
	}
	usleep(500000);
	cpu = cpu_s();
	CHECK(!rshutdown(c, SHUT_WR), "rshutdown");   /* FIN to s: nothing for c to read */
	for (int i = 0; i < 6; i++)
		pthread_join(jv[i].t, NULL);
	cpu = cpu_s() - cpu;
	for (int i = 0; i < 6; i++)
		CHECK(jv[i].ret == 0, "sleeper %d: rpoll %zd, want 0 (timeout)", i, jv[i].ret);
	CHECK(cpu < 1.5, "six sleepers used %.2f s of CPU in 2.5 s after a kick not for them", cpu);
	CHECK(rrecv(s, b, sizeof(b), 0) == 0, "the FIN");
	CHECK(!rclose(c) && !rclose(s), "rclose");
	printf("rsock_peer: ok: six sleepers woken for nothing sleep again (%.2f s of CPU in 2.5 s)\n", cpu);

	/* EINTR from a signal without SA_RESTART stays EINTR */
	{
		struct sigaction sa = { .sa_handler = on_alarm };
		struct itimerval it = { .it_value = { 0, 200000 } };

		CHECK(!sigaction(SIGALRM, &sa, NULL), "sigaction");
		s = pair_up(l, &c, 16);
		CHECK(!setitimer(ITIMER_REAL, &it, NULL), "setitimer");
		n = (int)rrecv(c, b, sizeof(b), 0);
		CHECK(n < 0 && errno == EINTR, "rrecv interrupted: %d (%s), want EINTR", n, strerror(errno));
		CHECK(!rclose(c) && !rclose(s), "rclose");
		signal(SIGALRM, SIG_DFL);
	}
	printf("rsock_peer: ok: a signal interrupts a blocking rrecv with EINTR\n");

	/* a bare TCP connection to the listener's port is no request: rpoll
	 * does not say POLLIN, and a real request after it does */
	{
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
		int t = socket(AF_INET, SOCK_STREAM, 0);

		CHECK(t >= 0 && inet_pton(AF_INET, addr, &sa.sin_addr) == 1 &&
		      !connect(t, (struct sockaddr *)&sa, sizeof(sa)), "TCP connect: %s", strerror(errno));
		p = (struct pollfd){ .fd = l, .events = POLLIN };
		CHECK(rpoll(&p, 1, 500) == 0, "rpoll on the listener after a bare TCP connect: POLLIN");
		s = pair_up(l, &c, 16);
		CHECK(!rclose(c) && !rclose(s), "rclose");
		close(t);
	}
	printf("rsock_peer: ok: a bare TCP connection is not a request\n");
}

static void honest(int l)
{
	static char big[4 << 20];
	struct job j = { 0 }, w = { 0 };
	struct raw r;
	uint64_t t0;
	ssize_t k;
	int c, s;
	char b[64];

	/* a half close, the reply bigger than the buffers both ways: the
	 * client's request fills the server's slots; its FIN and the server's
	 * 1 MiB reply must still get through while nobody reads the request */
	s = pair_up(l, &c, 16);
	j = (struct job){ .fd = s, .n = 15 * 16384 };
	CHECK(!pthread_create(&j.t, NULL, job_reply, &j), "pthread_create");
	write_all(c, j.n, "request");
	CHECK(!rshutdown(c, SHUT_WR), "rshutdown");
	read_all(c, 1 << 20, "reply");
	CHECK(rrecv(c, b, sizeof(b), 0) == 0, "reply: no EOF after it");
	pthread_join(j.t, NULL);
	CHECK(!rclose(c) && !rclose(s), "rclose");
	printf("rsock_peer: ok: half close, 1 MiB reply while the request sits unread\n");

	/* the peer sends its last bytes and leaves at once: what it sent is
	 * readable, and POLLHUP comes only once it is read (rstream -T a
	 * takes POLLHUP for an error: it failed on a fast peer's goodbye) */
	{
		struct pollfd p = { .events = POLLIN };
		uint64_t t1;

		s = pair_up(l, &c, 16);
		write_all(s, 30000, "last words");
		CHECK(!rclose(s), "rclose");
		usleep(500000);   /* its disconnect arrives first */
		p.fd = c;
		CHECK(rpoll(&p, 1, 5000) == 1 && (p.revents & POLLIN) && !(p.revents & (POLLHUP | POLLERR)),
		      "bytes left by a peer that closed: revents %#x, want POLLIN alone", (unsigned)p.revents);
		read_all(c, 30000, "last words");
		t1 = now_ms();
		do {
			p.revents = 0;
			CHECK(rpoll(&p, 1, 1000) >= 0, "rpoll");
		} while (!(p.revents & POLLHUP) && now_ms() - t1 < 5000);
		CHECK(p.revents & POLLHUP, "no POLLHUP once the closed peer's bytes were read: %#x",
		      (unsigned)p.revents);
		CHECK(rrecv(c, b, sizeof(b), 0) == 0, "no EOF after the closed peer's bytes");
		CHECK(!rclose(c), "rclose");
	}
	printf("rsock_peer: ok: a peer's last bytes before it leaves read without POLLHUP, then POLLHUP and EOF\n");

	/* a writer blocked in rsend; its peer closes without reading */
	s = pair_up(l, &c, 16);
	j = (struct job){ .fd = s };
	CHECK(!pthread_create(&j.t, NULL, job_close, &j), "pthread_create");
	t0 = now_ms();
	k = rsend(c, big, sizeof(big), 0);
	CHECK(now_ms() - t0 < 10000, "rsend went on %llu ms after the peer closed",
	      (unsigned long long)(now_ms() - t0));
	CHECK(k < (ssize_t)sizeof(big), "rsend of 4 MiB to a peer that reads nothing succeeded");
	pthread_join(j.t, NULL);
	CHECK(rsend(c, big, 1, 0) < 0 && errno == EPIPE, "rsend after the peer closed: want EPIPE, got %s",
	      strerror(errno));
	CHECK(!rclose(c), "rclose");
	printf("rsock_peer: ok: a writer blocked in rsend returns when its peer closes (%zd bytes, then EPIPE)\n", k);

	/* a reader and a writer thread on one rsocket, 4 slots each way, an
	 * echo at the other end */
	s = pair_up(l, &c, 4);
	j = (struct job){ .fd = s };
	w = (struct job){ .fd = c, .n = 8 << 20 };
	CHECK(!pthread_create(&j.t, NULL, job_echo, &j), "pthread_create");
	CHECK(!pthread_create(&w.t, NULL, job_write, &w), "pthread_create");
	read_all(c, w.n, "echo");
	pthread_join(w.t, NULL);
	CHECK(!rshutdown(c, SHUT_WR), "rshutdown");
	pthread_join(j.t, NULL);
	CHECK(!rclose(c) && !rclose(s), "rclose");
	printf("rsock_peer: ok: 8 MiB through an echo, reader and writer threads on one rsocket\n");

	/* a client that never confirms (no QP, no rdma_establish: no RTU)
	 * does not hold up raccept, and an honest one comes in after it */
	{
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
		struct hello h = hello(8, SEG);
		struct rdma_conn_param cp = { .private_data = &h, .private_data_len = sizeof(h) };
		int silent;

		memset(&r, 0, sizeof(r));
		CHECK(inet_pton(AF_INET, addr, &sa.sin_addr) == 1, "address");
		r.ch = rdma_create_event_channel();
		CHECK(r.ch && !fcntl(r.ch->fd, F_SETFL, O_NONBLOCK) &&
		      !rdma_create_id(r.ch, &r.id, NULL, RDMA_PS_TCP), "silent id");
		CHECK(!rdma_resolve_addr(r.id, NULL, (struct sockaddr *)&sa, 2000) &&
		      ev_take(r.ch, 5000, NULL, NULL) == RDMA_CM_EVENT_ADDR_RESOLVED &&
		      !rdma_resolve_route(r.id, 2000) &&
		      ev_take(r.ch, 5000, NULL, NULL) == RDMA_CM_EVENT_ROUTE_RESOLVED, "silent resolve");
		CHECK(!rdma_connect(r.id, &cp), "silent rdma_connect: %s", strerror(errno));
		CHECK(!pthread_create(&j.t, NULL, job_silent, r.ch), "pthread_create");
		t0 = now_ms();
		silent = raccept(l, NULL, NULL);
		CHECK(silent >= 0 && now_ms() - t0 < 5000, "raccept of a silent client: %d after %llu ms",
		      silent, (unsigned long long)(now_ms() - t0));
		s = pair_up(l, &c, 16);
		CHECK(rsend(c, "ping", 4, 0) == 4 && rrecv(s, b, 4, MSG_WAITALL) == 4, "ping");
		CHECK(!rclose(c) && !rclose(s), "rclose");
		silent_stop = 1;
		pthread_join(j.t, NULL);
		raw_free(&r);   /* it leaves before confirming: a reset */
		CHECK(rrecv(silent, b, sizeof(b), 0) < 0 && errno == ECONNRESET,
		      "the silent client left: rrecv wants ECONNRESET, got %s", strerror(errno));
		CHECK(!rclose(silent), "rclose");
	}
	printf("rsock_peer: ok: a client that never confirms does not hold up raccept; when it leaves: ECONNRESET\n");

	/* rclose while another thread sleeps in rrecv */
	s = pair_up(l, &c, 16);
	j = (struct job){ .fd = c };
	CHECK(!pthread_create(&j.t, NULL, job_recv, &j), "pthread_create");
	usleep(200000);
	CHECK(!rclose(c), "rclose");
	pthread_join(j.t, NULL);
	CHECK(j.ret < 0 && j.err == EBADF && j.took_ms < 5000, "rrecv across rclose: %zd (%s) after %llu ms",
	      j.ret, strerror(j.err), (unsigned long long)j.took_ms);
	CHECK(!rclose(s), "rclose");
	printf("rsock_peer: ok: rclose ends another thread's rrecv (EBADF)\n");
	second_review(l);
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
	CHECK(rsocket(AF_INET, SOCK_DGRAM, IPPROTO_TCP) < 0 && errno == EPROTONOSUPPORT,
	      "a datagram rsocket over TCP: want EPROTONOSUPPORT");
	CHECK(rsocket(AF_INET, SOCK_RAW, 0) < 0 && errno == EPROTONOSUPPORT,
	      "a raw rsocket: want EPROTONOSUPPORT");
	setenv("ROSHM_RSOCKET_DGRAM", "0", 1);   /* librspreload then keeps kernel UDP */
	CHECK(rsocket(AF_INET, SOCK_DGRAM, 0) < 0 && errno == EPROTONOSUPPORT,
	      "ROSHM_RSOCKET_DGRAM=0: want EPROTONOSUPPORT for a datagram rsocket");
	unsetenv("ROSHM_RSOCKET_DGRAM");
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
		{
			/* the iovec forms: an empty part skipped, a receive's
			 * first part waits, the rest takes what is there */
			struct iovec wv[3] = { { "ab", 2 }, { NULL, 0 }, { "cdef", 4 } }, rv[2];
			char x[3], y[8];
			struct msghdr mh = { .msg_iov = rv, .msg_iovlen = 2, .msg_flags = 123 };
			ssize_t got;

			rv[0] = (struct iovec){ x, sizeof(x) };
			rv[1] = (struct iovec){ y, sizeof(y) };
			CHECK(rwritev(c, wv, 3) == 6, "rwritev: %s", strerror(errno));
			got = rrecvmsg(a.fd, &mh, MSG_WAITALL);
			CHECK(got >= 3 && got <= 6 && !memcmp(x, "abc", 3) && !memcmp(y, "def", (size_t)got - 3) &&
			      !mh.msg_flags, "rrecvmsg: got %zd", got);
			CHECK(got == 6 || rrecv(a.fd, y + got - 3, (size_t)(6 - got), MSG_WAITALL) == 6 - got,
			      "the rest after rrecvmsg");
			CHECK(!memcmp(y, "def", 3), "the bytes after rrecvmsg");
			wv[0] = (struct iovec){ "gh", 2 };
			mh = (struct msghdr){ .msg_iov = wv, .msg_iovlen = 1 };
			rv[0] = (struct iovec){ x, 2 };
			CHECK(rsendmsg(c, &mh, 0) == 2 && rreadv(a.fd, rv, 1) == 2 && !memcmp(x, "gh", 2),
			      "rsendmsg / rreadv");
		}
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

	bad_message(l, "control credits never given", true, IMMC(T_CREDIT, 5u), 0);
	/* riomap's messages: the length, the fields, the maps they make */
	bad_message(l, "an IOMAP of 23 bytes", true, IMM(T_IOMAP, 0), 23);
	bad_message(l, "an IOMAP of 25 bytes", true, IMM(T_IOMAP, 0), 25);
	{
		const struct iomap ovl[] = { { 0, 4096, 100, 1 }, { 50, 8192, 100, 2 } },
				   unk[] = { { 0, 4096, 100, 1 }, { 7, 0, 0, 0 } },
				   wrap[] = { { (uint64_t)INT64_MAX - 10, 4096, 100, 1 } },
				   awrap[] = { { 0, UINT64_MAX - 10, 100, 1 } };

		bad_iomaps(l, "a second IOMAP that overlaps the first", ovl, 2);
		bad_iomaps(l, "an unmap of no map", unk, 2);
		bad_iomaps(l, "an IOMAP past the largest offset", wrap, 1);
		bad_iomaps(l, "an IOMAP whose address wraps", awrap, 1);
	}
	iomap_check(l);
	ctrl_check(l);
	/* DATA beyond the rsocket's data slots (its RECVs for control
	 * messages taken for data): 16 slots (256 KiB of 16 KiB), a 17th */
	{
		int n;

		fd = accept_raw(l, &r, 8, 8);
		for (n = 0; n < 17; n++)   /* 4 bytes of 'B' each */
			CHECK(raw_send(&r, true, IMM(T_DATA, 0), 4) == IBV_WC_SUCCESS, "DATA %d", n);
		n = (int)rrecv(fd, b, sizeof(b), 0);
		CHECK(n == 64 && b[0] == 'B' && b[63] == 'B', "the 16 slots' data before it: got %d", n);
		CHECK(rrecv(fd, b, sizeof(b), 0) < 0 && errno == EPROTO, "a 17th DATA: want EPROTO, got %s",
		      strerror(errno));
		CHECK(!rclose(fd), "rclose");
		raw_free(&r);
		printf("rsock_peer: ok: DATA beyond the data slots: their data read, then EPROTO\n");
	}

	/* 3. flow control: 2 slots, no credit back: two DATA messages, no more */
	fd = accept_raw(l, &r, 2, 2);
	CHECK(!rfcntl(fd, F_SETFL, O_NONBLOCK), "rfcntl");
	memset(b, 'D', sizeof(b));
	CHECK(rsend(fd, b, 100, 0) == 100 && rsend(fd, b, 100, 0) == 100, "two DATA: %s", strerror(errno));
	CHECK(rsend(fd, b, 100, 0) < 0 && errno == EAGAIN, "a third DATA without credit: want EAGAIN");
	CHECK(raw_recvs(&r, 300) == 2, "the peer got %d messages, want 2", r.recvs);
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
	CHECK(raw_recvs(&r, 300) == 3, "the peer got %d messages, want 3", r.recvs);
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
	honest(l);
	CHECK(!rclose(l), "rclose listener");
	printf("rsock_peer: ok\n");
	return 0;
}
