// SPDX-License-Identifier: MIT
/*
 * libroshm-verbs' librdmacm driven the way applications drive it, each case
 * checking what rdma_cm promises (events, private data, conn_param, QP
 * states, addresses, errors), with data moved through the QPs it connects.
 *
 *   rdmacm_check server ADDR PORT   node a  \  together: the API between two
 *   rdmacm_check client ADDR PORT   node b  /  nodes (PORT .. PORT+2)
 *   rdmacm_check local PORT         one node: IPv6 and dual stack, migrate,
 *                                   rdma_establish, nonblocking channels,
 *                                   timeouts, hostile peers on both sides of
 *                                   the CM socket, unsupported calls
 *                                   (PORT .. PORT+5; helpers are this program)
 *   rdmacm_check probe              exit 0 when roshm0 takes RECVs and arms
 *                                   completion events, 2 when it does not
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>

#include "rdmacm_wire.h"

#define MAGIC 0x6d63726bu   /* what both sides put first in their private data */
#define LEN 10000
#define OFF 123
#define PLEN 3000
#define CTR 8195   /* buf is malloc + 5: 8-byte aligned for the atomics */

static const char *who = "rdmacm_check";

__attribute__((noreturn, format(printf, 1, 2))) static void fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "%s: FAIL: ", who);
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

#define CHECK(c, ...) do { if (!(c)) fail(__VA_ARGS__); } while (0)

__attribute__((noreturn)) static void die(const char *what)
{
	fail("%s", what);
}

#include "rc_common.h"

static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static const char *estr(int e)
{
	return rdma_event_str((enum rdma_cm_event_type)e);
}

/* The next event of @ch within @ms (NULL when none came). A blocking
 * channel blocks (the watchdog alarm bounds it). */
static struct rdma_cm_event *ev_next(struct rdma_event_channel *ch, int ms)
{
	struct rdma_cm_event *e;
	uint64_t end = now_ms() + (uint64_t)ms;
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };

	for (;;) {
		if (!rdma_get_cm_event(ch, &e))
			return e;
		CHECK(errno == EAGAIN, "rdma_get_cm_event: %s", strerror(errno));
		if (now_ms() >= end)
			return NULL;
		poll(&p, 1, end - now_ms() < 20 ? (int)(end - now_ms()) : 20);
	}
}

static struct rdma_cm_event *ev_expect(struct rdma_event_channel *ch, enum rdma_cm_event_type t,
				       int ms)
{
	struct rdma_cm_event *e = ev_next(ch, ms);

	CHECK(e, "expected %s within %d ms, nothing came", estr(t), ms);
	CHECK(e->event == t, "expected %s, got %s (status %d)", estr(t), estr(e->event), e->status);
	return e;
}

static void nonblock(struct rdma_event_channel *ch)
{
	CHECK(!fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK), "O_NONBLOCK");
}

static struct rdma_addrinfo *ai(const char *node, int port, bool passive)
{
	struct rdma_addrinfo h, *r;
	char svc[16];
	int ret;

	memset(&h, 0, sizeof(h));
	h.ai_port_space = RDMA_PS_TCP;
	h.ai_flags = passive ? RAI_PASSIVE : 0;
	snprintf(svc, sizeof(svc), "%d", port);
	ret = rdma_getaddrinfo(node, svc, &h, &r);
	CHECK(!ret, "rdma_getaddrinfo(%s, %s): %s", node ? node : "NULL", svc, gai_strerror(ret));
	return r;
}

static const char *addr_str(const struct sockaddr *sa, char *buf, size_t n)
{
	char a[INET6_ADDRSTRLEN] = "?";

	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, a, sizeof(a));
	else if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, a, sizeof(a));
	snprintf(buf, n, "%s port %u", a, ntohs(sa->sa_family == AF_INET ?
		((const struct sockaddr_in *)sa)->sin_port : ((const struct sockaddr_in6 *)sa)->sin6_port));
	return buf;
}

/* resolve address and route of a new id of port space @ps on @ch towards node:port */
static struct rdma_cm_id *resolve_ps(struct rdma_event_channel *ch, const char *node, int port,
				     enum rdma_port_space ps)
{
	struct rdma_addrinfo *r = ai(node, port, false);
	struct rdma_cm_id *id;
	struct rdma_cm_event *e;

	CHECK(!rdma_create_id(ch, &id, NULL, ps), "rdma_create_id: %s", strerror(errno));
	CHECK(!rdma_resolve_addr(id, NULL, r->ai_dst_addr, 2000), "rdma_resolve_addr: %s",
	      strerror(errno));
	e = ev_expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 5000);
	CHECK(e->id == id && !e->status, "ADDR_RESOLVED for another id or status %d", e->status);
	rdma_ack_cm_event(e);
	CHECK(id->verbs && !strcmp(ibv_get_device_name(id->verbs->device), "roshm0"),
	      "id->verbs is not roshm0");
	CHECK(ntohs(rdma_get_dst_port(id)) == port, "dst port %u, want %d", ntohs(rdma_get_dst_port(id)), port);
	CHECK(rdma_get_src_port(id) != 0, "no source port after ADDR_RESOLVED");
	CHECK(!rdma_resolve_route(id, 2000), "rdma_resolve_route: %s", strerror(errno));
	e = ev_expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 5000);
	rdma_ack_cm_event(e);
	CHECK(id->route.num_paths == 1 && id->route.path_rec, "route without a path record");
	rdma_freeaddrinfo(r);
	return id;
}

static struct rdma_cm_id *resolve(struct rdma_event_channel *ch, const char *node, int port)
{
	return resolve_ps(ch, node, port, RDMA_PS_TCP);
}

/* a QP through rdma_create_qp with CQs (and channels) made by librdmacm */
static void cm_qp(struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = 16;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_wr = 1;
	a.cap.max_recv_sge = 1;
	a.sq_sig_all = 1;
	CHECK(!rdma_create_qp(id, NULL, &a), "rdma_create_qp: %s", strerror(errno));
	CHECK(id->qp && id->send_cq && id->send_cq_channel && id->recv_cq && id->recv_cq_channel &&
	      id->pd == id->qp->pd,
	      "rdma_create_qp did not make the QP, its CQ and channel");
	CHECK(rc_state(id->qp) == IBV_QPS_INIT, "new QP not in INIT");
}

static void post(struct ibv_qp *qp, enum ibv_wr_opcode op, void *laddr, uint32_t len, uint32_t lkey,
		 uint64_t raddr, uint32_t rkey, uint64_t a, uint64_t b)
{
	struct ibv_wc wc;

	rc_post(qp, op, laddr, len, lkey, raddr, rkey, a, b, op);
	wc = wait_wc(qp->send_cq);
	CHECK(wc.status == IBV_WC_SUCCESS, "opcode %d completed with status %d", op, wc.status);
}

struct info {
	uint32_t magic;
	uint32_t rkey;
	uint64_t addr;
};

/* ============================================================ two nodes */

static int server(const char *addr, int port)
{
	struct rdma_event_channel *ch, *ch2;
	struct rdma_cm_id *lid, *lid2, *id;
	struct rdma_cm_event *e;
	struct rdma_addrinfo *r = ai(addr, port, true);
	struct rdma_conn_param cp;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qia;
	struct info ci, si;
	uint8_t zero[56] = { 0 }, *buf;
	char s[96];
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct pollfd p;

	who = "rdmacm_check server";
	ch = rdma_create_event_channel();
	CHECK(ch, "rdma_create_event_channel: %s", strerror(errno));
	CHECK(!rdma_create_id(ch, &lid, (void *)0x5eed, RDMA_PS_TCP), "rdma_create_id");
	CHECK(!rdma_bind_addr(lid, r->ai_src_addr), "rdma_bind_addr: %s", strerror(errno));
	CHECK(ntohs(rdma_get_src_port(lid)) == port, "bound port %u", ntohs(rdma_get_src_port(lid)));
	CHECK(!rdma_listen(lid, 4), "rdma_listen: %s", strerror(errno));
	/* a second listener on the same port is refused */
	CHECK(!rdma_create_id(ch, &lid2, NULL, RDMA_PS_TCP), "rdma_create_id");
	CHECK(rdma_bind_addr(lid2, r->ai_src_addr) && errno == EADDRINUSE,
	      "a second bind to a listening port: want EADDRINUSE, got %s", strerror(errno));
	rdma_destroy_id(lid2);
	printf("server: listening on %s\n", addr_str(r->ai_src_addr, s, sizeof(s)));
	fflush(stdout);

	/* 1: reject, with private data both ways */
	e = ev_expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 60000);
	CHECK(e->listen_id == lid && e->id != lid && e->id->context == (void *)0x5eed,
	      "CONNECT_REQUEST: listen_id %p (want %p), id %p, context %p", (void *)e->listen_id,
	      (void *)lid, (void *)e->id, e->id->context);
	CHECK(e->id->verbs && !strcmp(ibv_get_device_name(e->id->verbs->device), "roshm0"),
	      "new id's verbs is not roshm0");
	CHECK(e->param.conn.private_data_len == 56 && !memcmp(e->param.conn.private_data, "reject me", 10) &&
	      !memcmp((uint8_t *)e->param.conn.private_data + 10, zero, 46),
	      "REQ private data: len %u, want 56 = 'reject me' and zeros", e->param.conn.private_data_len);
	printf("server: request from %s\n", addr_str(rdma_get_peer_addr(e->id), s, sizeof(s)));
	CHECK(!rdma_reject(e->id, "no thanks", 10), "rdma_reject: %s", strerror(errno));
	id = e->id;
	rdma_ack_cm_event(e);
	rdma_destroy_id(id);

	/* 2: accept with a QP, data through it */
	e = ev_expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 30000);
	id = e->id;
	memcpy(&ci, e->param.conn.private_data, sizeof(ci));
	CHECK(ci.magic == MAGIC, "REQ private data magic %x", ci.magic);
	CHECK(e->param.conn.initiator_depth == 4 && e->param.conn.responder_resources == 2,
	      "REQ seen with initiator_depth %u responder_resources %u, want 4 and 2 (the client's 4/2 "
	      "from this side)", e->param.conn.initiator_depth, e->param.conn.responder_resources);
	pd = ibv_alloc_pd(id->verbs);
	CHECK(pd, "ibv_alloc_pd");
	{
		struct ibv_cq *cq = ibv_create_cq(id->verbs, 16, NULL, NULL, 0);
		struct ibv_qp_init_attr a = { .send_cq = cq, .qp_type = IBV_QPT_RC,
					      .cap = { .max_send_wr = 16, .max_send_sge = 1 } };
		struct ibv_srq_init_attr sa = { .attr = { .max_wr = 8, .max_sge = 1 } };
		struct ibv_qp_init_attr got;
		struct ibv_qp_attr ga;

		CHECK(cq, "ibv_create_cq");
		/* the id's SRQ, its receive CQ made by librdmacm; the QP takes both */
		CHECK(!rdma_create_srq(id, pd, &sa), "rdma_create_srq: %s", strerror(errno));
		CHECK(id->srq && id->recv_cq && id->recv_cq_channel && sa.attr.max_wr >= 8,
		      "rdma_create_srq made no SRQ, or no receive CQ for it");
		CHECK(!rdma_create_qp(id, pd, &a), "rdma_create_qp: %s", strerror(errno));
		CHECK(!id->send_cq && !id->send_cq_channel, "librdmacm made a CQ though one was given");
		CHECK(!ibv_query_qp(id->qp, &ga, IBV_QP_STATE, &got) && got.srq == id->srq &&
		      id->qp->recv_cq == id->recv_cq, "the QP is not on the id's SRQ and receive CQ");
	}
	buf = malloc(LEN + 64);
	CHECK(buf, "malloc");
	buf += 5;   /* unaligned on purpose */
	memset(buf, 0, LEN);
	*(uint64_t *)(buf + CTR) = 1000;
	mr = ibv_reg_mr(pd, buf, LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	CHECK(mr, "ibv_reg_mr: %s", strerror(errno));
	/* rdma_post_recv goes to the id's SRQ */
	memset(buf + 9000, 0xee, 256);
	CHECK(!rdma_post_recv(id, (void *)0x77, buf + 9000, 256, mr), "rdma_post_recv: %s", strerror(errno));
	si = (struct info){ .magic = MAGIC, .rkey = mr->rkey, .addr = (uintptr_t)buf };
	memset(&cp, 0, sizeof(cp));
	cp.private_data = &si;
	cp.private_data_len = sizeof(si);
	cp.responder_resources = RDMA_MAX_RESP_RES;
	cp.initiator_depth = RDMA_MAX_INIT_DEPTH;
	cp.rnr_retry_count = 7;
	CHECK(!rdma_accept(id, &cp), "rdma_accept: %s", strerror(errno));
	CHECK(!ibv_query_qp(id->qp, &qa, IBV_QP_STATE | IBV_QP_DEST_QPN, &qia), "ibv_query_qp");
	CHECK(qa.qp_state == IBV_QPS_RTS && qa.dest_qp_num == e->param.conn.qp_num,
	      "after rdma_accept: QP state %d dest_qp_num %06x, want RTS and the client's %06x",
	      qa.qp_state, qa.dest_qp_num, e->param.conn.qp_num);
	rdma_ack_cm_event(e);
	e = ev_expect(ch, RDMA_CM_EVENT_ESTABLISHED, 30000);
	CHECK(e->id == id, "ESTABLISHED for another id");
	rdma_ack_cm_event(e);
	{   /* the client's SEND, into the RECV of the SRQ */
		struct ibv_wc wc = wait_wc(id->recv_cq);

		CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 0x77 && wc.opcode == IBV_WC_RECV &&
		      wc.byte_len == 100 && wc.qp_num == id->qp->qp_num,
		      "the SEND through the SRQ: status %d wr_id %" PRIx64 " opcode %d len %u", wc.status,
		      wc.wr_id, wc.opcode, wc.byte_len);
		for (int k = 0; k < 256; k++)
			CHECK(buf[9000 + k] == (k < 100 ? (uint8_t)(k * 5 + 1) : 0xee),
			      "byte %d of the SEND in the SRQ's RECV: %u", k, buf[9000 + k]);
	}
	/* the client WRITEs, READs, adds and swaps, then disconnects */
	e = ev_expect(ch, RDMA_CM_EVENT_DISCONNECTED, 60000);
	CHECK(e->id == id, "DISCONNECTED for another id");
	rdma_ack_cm_event(e);
	for (int k = 0; k < PLEN; k++)
		CHECK(buf[OFF + k] == (uint8_t)(k * 7 + 3), "byte %d of the client's WRITE: %u", k, buf[OFF + k]);
	CHECK(*(uint64_t *)(buf + CTR) == 7, "counter %" PRIu64 ", want 1000 + 5, swapped to 7",
	      *(uint64_t *)(buf + CTR));
	CHECK(!rdma_disconnect(id), "rdma_disconnect after the peer's: %s", strerror(errno));
	{
		struct ibv_cq *cq = id->qp->send_cq;

		rdma_destroy_qp(id);
		ibv_destroy_cq(cq);
		rdma_destroy_srq(id);
		CHECK(!id->srq && !id->recv_cq, "rdma_destroy_srq left the SRQ or its CQ");
	}
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	free(buf - 5);
	rdma_destroy_id(id);
	printf("server: the client's WRITE, READ, FETCH_ADD and CMP_SWAP landed\n");

	/* 3: a pollable, nonblocking channel; a QP-less accept; we disconnect */
	ch2 = rdma_create_event_channel();
	nonblock(ch2);
	CHECK(rdma_get_cm_event(ch2, &e) && errno == EAGAIN, "an empty nonblocking channel: want EAGAIN");
	rdma_destroy_event_channel(ch2);
	nonblock(ch);
	p = (struct pollfd){ .fd = ch->fd, .events = POLLIN };
	CHECK(poll(&p, 1, 60000) == 1, "the channel's fd never polled readable");
	e = ev_expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 30000);
	id = e->id;
	CHECK(rdma_accept(id, NULL) && errno == EINVAL, "rdma_accept(NULL) without a QP: want EINVAL");
	memset(&cp, 0, sizeof(cp));
	cp.qp_num = 0x123456;
	CHECK(!rdma_accept(id, &cp), "rdma_accept with conn_param.qp_num: %s", strerror(errno));
	rdma_ack_cm_event(e);
	rdma_ack_cm_event(ev_expect(ch, RDMA_CM_EVENT_ESTABLISHED, 30000));
	CHECK(!rdma_disconnect(id), "rdma_disconnect: %s", strerror(errno));
	e = ev_expect(ch, RDMA_CM_EVENT_DISCONNECTED, 5000);
	CHECK(e->id == id, "DISCONNECTED for another id");
	rdma_ack_cm_event(e);
	CHECK(!rdma_disconnect(id), "a second rdma_disconnect: %s", strerror(errno));
	CHECK(!ev_next(ch, 200), "an event after the second rdma_disconnect");
	rdma_destroy_id(id);
	rdma_destroy_id(lid);
	rdma_destroy_event_channel(ch);
	rdma_freeaddrinfo(r);

	/* 4: synchronous endpoints (rdma_server's calls) on PORT+2 */
	{
		struct ibv_qp_init_attr a = { .qp_type = IBV_QPT_RC, .sq_sig_all = 1,
					      .cap = { .max_send_wr = 4, .max_send_sge = 1,
						  .max_recv_wr = 1, .max_recv_sge = 1 } };
		struct rdma_cm_id *lep, *cid;

		r = ai(addr, port + 2, true);
		CHECK(!rdma_create_ep(&lep, r, NULL, &a), "rdma_create_ep (passive): %s", strerror(errno));
		CHECK(!rdma_listen(lep, 0), "rdma_listen: %s", strerror(errno));
		CHECK(!rdma_get_request(lep, &cid), "rdma_get_request: %s", strerror(errno));
		CHECK(cid->qp && cid->event && cid->event->event == RDMA_CM_EVENT_CONNECT_REQUEST,
		      "rdma_get_request: no QP or no request event on the new id");
		CHECK(!memcmp(cid->event->param.conn.private_data, "sync+pd", 7),
		      "ai_connect and conn_param private data not both in the REQ");
		CHECK(!rdma_accept(cid, NULL), "rdma_accept (sync): %s", strerror(errno));
		CHECK(cid->event->event == RDMA_CM_EVENT_ESTABLISHED, "sync accept returned before ESTABLISHED");
		e = ev_expect(cid->channel, RDMA_CM_EVENT_DISCONNECTED, 30000);
		rdma_ack_cm_event(e);
		rdma_destroy_ep(cid);
		rdma_destroy_ep(lep);
		rdma_freeaddrinfo(r);
	}
	printf("rdmacm_check server: ok\n");
	return 0;
}

static int client(const char *addr, int port)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct rdma_cm_event *e;
	struct rdma_conn_param cp;
	struct ibv_qp_attr qa;
	struct info ci, si;
	uint8_t *buf, big[57] = { 0 };
	char s[96];
	struct ibv_mr *mr;
	int tries;

	who = "rdmacm_check client";
	ch = rdma_create_event_channel();
	CHECK(ch, "rdma_create_event_channel: %s", strerror(errno));

	/* 0: nobody listens on PORT+1: REJECTED (IB CM's invalid service id), QP in error */
	id = resolve(ch, addr, port + 1);
	printf("client: from %s\n", addr_str(rdma_get_local_addr(id), s, sizeof(s)));
	cm_qp(id);
	memset(&cp, 0, sizeof(cp));
	CHECK(!rdma_connect(id, &cp), "rdma_connect: %s", strerror(errno));
	e = ev_expect(ch, RDMA_CM_EVENT_REJECTED, 10000);
	CHECK(e->status == 8, "REJECTED status %d, want 8", e->status);
	rdma_ack_cm_event(e);
	CHECK(rc_state(id->qp) == IBV_QPS_ERR, "QP not in error after REJECTED");
	rdma_destroy_qp(id);
	rdma_destroy_id(id);

	/* 1: private data too long for a REQ; then rejected with private data */
	for (tries = 0;; tries++) {
		id = resolve(ch, addr, port);
		cm_qp(id);
		memset(&cp, 0, sizeof(cp));
		cp.private_data = big;
		cp.private_data_len = sizeof(big);
		CHECK(rdma_connect(id, &cp) && errno == EINVAL, "57 bytes of REQ private data: want EINVAL");
		cp.private_data = "reject me";
		cp.private_data_len = 10;
		CHECK(!rdma_connect(id, &cp), "rdma_connect: %s", strerror(errno));
		e = ev_next(ch, 10000);
		CHECK(e, "no answer to a connect");
		if (e->event == RDMA_CM_EVENT_REJECTED && e->status == 8 && tries < 100) {
			/* the server is not listening yet */
			rdma_ack_cm_event(e);
			rdma_destroy_qp(id);
			rdma_destroy_id(id);
			usleep(100000);
			continue;
		}
		break;
	}
	CHECK(e->event == RDMA_CM_EVENT_REJECTED && e->status == 28,
	      "want REJECTED 28 (consumer), got %s %d", estr(e->event), e->status);
	CHECK(e->param.conn.private_data_len == 148 && !memcmp(e->param.conn.private_data, "no thanks", 10),
	      "REJ private data: len %u", e->param.conn.private_data_len);
	rdma_ack_cm_event(e);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);

	/* 2: connect, then RDMA through the QP librdmacm moved to RTS */
	id = resolve(ch, addr, port);
	{
		struct ibv_cq *cq = ibv_create_cq(id->verbs, 16, NULL, NULL, 0);
		struct ibv_qp_init_attr a = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
					      .cap = { .max_send_wr = 16, .max_send_sge = 1 } };

		CHECK(cq, "ibv_create_cq");
		CHECK(!rdma_create_qp(id, NULL, &a), "rdma_create_qp: %s", strerror(errno));
	}
	buf = malloc(LEN);
	CHECK(buf, "malloc");
	mr = ibv_reg_mr(id->pd, buf, LEN, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr, "ibv_reg_mr");
	ci = (struct info){ .magic = MAGIC };
	memset(&cp, 0, sizeof(cp));
	cp.private_data = &ci;
	cp.private_data_len = sizeof(ci);
	cp.responder_resources = 4;
	cp.initiator_depth = 2;
	cp.retry_count = 7;
	cp.rnr_retry_count = 7;
	CHECK(!rdma_connect(id, &cp), "rdma_connect: %s", strerror(errno));
	e = ev_expect(ch, RDMA_CM_EVENT_ESTABLISHED, 30000);
	CHECK(e->param.conn.private_data_len == 196, "REP private data len %u, want 196",
	      e->param.conn.private_data_len);
	memcpy(&si, e->param.conn.private_data, sizeof(si));
	CHECK(si.magic == MAGIC, "REP private data magic %x", si.magic);
	{
		struct ibv_qp_init_attr qia;
		struct ibv_qp_attr ra;
		int mask;

		CHECK(!ibv_query_qp(id->qp, &qa, IBV_QP_STATE | IBV_QP_DEST_QPN, &qia), "ibv_query_qp");
		CHECK(qa.qp_state == IBV_QPS_RTS && qa.dest_qp_num == e->param.conn.qp_num,
		      "after ESTABLISHED: QP state %d dest %06x, want RTS and the server's %06x",
		      qa.qp_state, qa.dest_qp_num, e->param.conn.qp_num);
		ra.qp_state = IBV_QPS_RTR;
		CHECK(!rdma_init_qp_attr(id, &ra, &mask) && (mask & IBV_QP_DEST_QPN) &&
		      ra.dest_qp_num == e->param.conn.qp_num && ra.ah_attr.is_global,
		      "rdma_init_qp_attr(RTR) does not give the peer's QPN and GID");
	}
	rdma_ack_cm_event(e);
	for (int k = 0; k < 100; k++)   /* a SEND: the server took an SRQ from rdma_create_srq */
		buf[9000 + k] = (uint8_t)(k * 5 + 1);
	post(id->qp, IBV_WR_SEND, buf + 9000, 100, mr->lkey, 0, 0, 0, 0);
	for (int k = 0; k < PLEN; k++)
		buf[k] = (uint8_t)(k * 7 + 3);
	post(id->qp, IBV_WR_RDMA_WRITE, buf, PLEN, mr->lkey, si.addr + OFF, si.rkey, 0, 0);
	memset(buf, 0, LEN);
	post(id->qp, IBV_WR_RDMA_READ, buf + 4096, PLEN, mr->lkey, si.addr + OFF, si.rkey, 0, 0);
	for (int k = 0; k < PLEN; k++)
		CHECK(buf[4096 + k] == (uint8_t)(k * 7 + 3), "READ byte %d: %u", k, buf[4096 + k]);
	post(id->qp, IBV_WR_ATOMIC_FETCH_AND_ADD, buf, 8, mr->lkey, si.addr + CTR, si.rkey, 5, 0);
	CHECK(*(uint64_t *)buf == 1000, "FETCH_ADD old value %" PRIu64, *(uint64_t *)buf);
	post(id->qp, IBV_WR_ATOMIC_CMP_AND_SWP, buf, 8, mr->lkey, si.addr + CTR, si.rkey, 1005, 7);
	CHECK(*(uint64_t *)buf == 1005, "CMP_SWAP old value %" PRIu64, *(uint64_t *)buf);
	CHECK(!rdma_disconnect(id), "rdma_disconnect: %s", strerror(errno));
	e = ev_expect(ch, RDMA_CM_EVENT_DISCONNECTED, 5000);
	rdma_ack_cm_event(e);
	CHECK(rc_state(id->qp) == IBV_QPS_ERR, "QP not in error after rdma_disconnect");
	{
		struct ibv_cq *cq = id->qp->send_cq;

		ibv_dereg_mr(mr);
		rdma_destroy_qp(id);
		ibv_destroy_cq(cq);
		free(buf);
	}
	rdma_destroy_id(id);
	printf("client: WRITE, READ, FETCH_ADD and CMP_SWAP through the CM's QP\n");

	/* 3: the server accepts without a QP of its own and disconnects us */
	id = resolve(ch, addr, port);
	cm_qp(id);
	CHECK(!rdma_connect(id, NULL), "rdma_connect(NULL) with a QP: %s", strerror(errno));
	e = ev_expect(ch, RDMA_CM_EVENT_ESTABLISHED, 30000);
	CHECK(e->param.conn.qp_num == 0x123456, "the server's conn_param.qp_num: %06x", e->param.conn.qp_num);
	rdma_ack_cm_event(e);
	e = ev_expect(ch, RDMA_CM_EVENT_DISCONNECTED, 30000);
	rdma_ack_cm_event(e);
	CHECK(!rdma_disconnect(id), "rdma_disconnect after the peer's: %s", strerror(errno));
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);

	/* 4: synchronous endpoints (rdma_client's calls), with ai_connect */
	{
		struct ibv_qp_init_attr a = { .qp_type = IBV_QPT_RC, .sq_sig_all = 1,
					      .cap = { .max_send_wr = 4, .max_send_sge = 1,
						  .max_recv_wr = 1, .max_recv_sge = 1 } };
		struct rdma_addrinfo *r = ai(addr, port + 2, false);
		int ret;

		r->ai_connect = malloc(4);
		memcpy(r->ai_connect, "sync", 4);
		r->ai_connect_len = 4;
		memset(&cp, 0, sizeof(cp));
		cp.private_data = "+pd";
		cp.private_data_len = 3;
		for (tries = 0;; tries++) {
			struct ibv_qp_init_attr a2 = a;   /* rdma_create_qp writes its CQs back */

			CHECK(!rdma_create_ep(&id, r, NULL, &a2), "rdma_create_ep: %s", strerror(errno));
			CHECK(id->qp && id->send_cq, "rdma_create_ep made no QP");
			ret = rdma_connect(id, &cp);
			if (!ret || errno != ECONNREFUSED || tries > 100)
				break;
			rdma_destroy_ep(id);
			usleep(100000);
		}
		CHECK(!ret, "rdma_connect (sync): %s", strerror(errno));
		CHECK(id->event && id->event->event == RDMA_CM_EVENT_ESTABLISHED,
		      "sync connect returned before ESTABLISHED");
		CHECK(!rdma_disconnect(id), "rdma_disconnect (sync): %s", strerror(errno));
		rdma_destroy_ep(id);
		rdma_freeaddrinfo(r);
	}
	printf("rdmacm_check client: ok\n");
	return 0;
}

/* =============================================================== local */

static char *self;

static pid_t spawn(const char *mode, const char *a1, const char *a2, const char *a3)
{
	pid_t p = fork();

	CHECK(p >= 0, "fork");
	if (!p) {
		execl(self, "rdmacm_check", mode, a1, a2, a3, (char *)NULL);
		_exit(127);
	}
	return p;
}

static void reap(pid_t p, const char *what)
{
	int st;

	CHECK(waitpid(p, &st, 0) == p, "waitpid");
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: helper exited %d", what,
	      WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

/* h-passive ADDR PORT FAMILIES: accept connections (no QP here: conn_param
 * qp_num), check each peer's address family ("4,6"), wait for their end. */
static int h_passive(const char *addr, int port, const char *fams)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_addrinfo *r = ai(addr, port, true);
	struct rdma_cm_id *lid;
	struct rdma_cm_event *e;

	who = "rdmacm_check h-passive";
	CHECK(ch && !rdma_create_id(ch, &lid, NULL, RDMA_PS_TCP), "create");
	CHECK(!rdma_bind_addr(lid, r->ai_src_addr) && !rdma_listen(lid, 0), "bind/listen: %s", strerror(errno));
	for (const char *f = fams; *f; f++) {
		struct rdma_conn_param cp = { .qp_num = 0x77 };
		struct rdma_cm_id *id;
		int fam = *f == '6' ? AF_INET6 : AF_INET;

		if (*f == ',')
			continue;
		e = ev_expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 30000);
		id = e->id;
		CHECK(rdma_get_peer_addr(id)->sa_family == fam && rdma_get_local_addr(id)->sa_family == fam,
		      "a connection over IPv%c shows family %d", *f, rdma_get_peer_addr(id)->sa_family);
		CHECK(!rdma_accept(id, &cp), "rdma_accept: %s", strerror(errno));
		rdma_ack_cm_event(e);
		rdma_ack_cm_event(ev_expect(ch, RDMA_CM_EVENT_ESTABLISHED, 10000));
		rdma_ack_cm_event(ev_expect(ch, RDMA_CM_EVENT_DISCONNECTED, 10000));
		rdma_destroy_id(id);
	}
	rdma_destroy_id(lid);
	rdma_destroy_event_channel(ch);
	rdma_freeaddrinfo(r);
	return 0;
}

/* h-migrate ADDR PORT: the listener moves to a second channel before any
 * request; the request comes there; our own QP, moved with
 * rdma_init_qp_attr and ibv_modify_qp (rping -q's way). */
static int h_migrate(const char *addr, int port)
{
	struct rdma_event_channel *c1 = rdma_create_event_channel(), *c2 = rdma_create_event_channel();
	struct rdma_addrinfo *r = ai(addr, port, true);
	struct rdma_cm_id *lid, *id;
	struct rdma_cm_event *e, *x;
	struct rdma_conn_param cp;
	struct ibv_qp_init_attr qa;
	struct ibv_qp_attr a;
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	struct ibv_pd *pd;
	const enum ibv_qp_state states[] = { IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS };
	int mask;

	who = "rdmacm_check h-migrate";
	CHECK(c1 && c2 && !rdma_create_id(c1, &lid, NULL, RDMA_PS_TCP), "create");
	nonblock(c1);
	nonblock(c2);
	CHECK(!rdma_bind_addr(lid, r->ai_src_addr) && !rdma_listen(lid, 0), "bind/listen: %s", strerror(errno));
	CHECK(!rdma_migrate_id(lid, c2), "rdma_migrate_id: %s", strerror(errno));
	CHECK(lid->channel == c2, "id->channel after rdma_migrate_id");
	e = ev_expect(c2, RDMA_CM_EVENT_CONNECT_REQUEST, 30000);
	CHECK(rdma_get_cm_event(c1, &x) && errno == EAGAIN, "an event on the channel the listener left");
	id = e->id;
	CHECK(id->channel == c2, "the new id is not on the listener's channel");
	pd = ibv_alloc_pd(id->verbs);
	cq = ibv_create_cq(id->verbs, 4, NULL, NULL, 0);
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = 4;
	qa.cap.max_send_sge = 1;
	CHECK(pd && cq && (qp = ibv_create_qp(pd, &qa)), "our own QP: %s", strerror(errno));
	for (int k = 0; k < 3; k++) {
		a.qp_state = states[k];
		CHECK(!rdma_init_qp_attr(id, &a, &mask), "rdma_init_qp_attr(%d): %s", states[k], strerror(errno));
		CHECK(states[k] != IBV_QPS_RTR || a.dest_qp_num == e->param.conn.qp_num,
		      "RTR attributes name QP %06x, the request came from %06x", a.dest_qp_num,
		      e->param.conn.qp_num);
		CHECK(!ibv_modify_qp(qp, &a, mask), "ibv_modify_qp to %d", states[k]);
	}
	memset(&cp, 0, sizeof(cp));
	cp.qp_num = qp->qp_num;
	cp.responder_resources = cp.initiator_depth = 1;
	CHECK(!rdma_accept(id, &cp), "rdma_accept: %s", strerror(errno));
	rdma_ack_cm_event(e);
	rdma_ack_cm_event(ev_expect(c2, RDMA_CM_EVENT_ESTABLISHED, 10000));
	rdma_ack_cm_event(ev_expect(c2, RDMA_CM_EVENT_DISCONNECTED, 10000));
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	rdma_destroy_id(id);
	rdma_destroy_id(lid);
	rdma_destroy_event_channel(c1);
	rdma_destroy_event_channel(c2);
	rdma_freeaddrinfo(r);
	return 0;
}

/* h-active ADDR PORT: one well-behaved connection (retried while nobody
 * listens), then its end. */
static int h_active(const char *addr, int port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_event *e;
	struct rdma_cm_id *id;

	who = "rdmacm_check h-active";
	CHECK(ch, "rdma_create_event_channel");
	for (int tries = 0;; tries++) {
		id = resolve(ch, addr, port);
		cm_qp(id);
		CHECK(!rdma_connect(id, NULL), "rdma_connect: %s", strerror(errno));
		e = ev_next(ch, 20000);
		CHECK(e, "no answer to a connect");
		if (e->event == RDMA_CM_EVENT_ESTABLISHED)
			break;
		CHECK(tries < 100, "never established: last %s %d", estr(e->event), e->status);
		rdma_ack_cm_event(e);
		rdma_destroy_qp(id);
		rdma_destroy_id(id);
		usleep(100000);
	}
	rdma_ack_cm_event(e);
	CHECK(!rdma_disconnect(id), "rdma_disconnect: %s", strerror(errno));
	rdma_ack_cm_event(ev_expect(ch, RDMA_CM_EVENT_DISCONNECTED, 5000));
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return 0;
}

static void misc(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	struct ibv_context **dl;
	struct sockaddr_in far = { .sin_family = AF_INET, .sin_port = htons(1) };
	struct sockaddr sa_ib = { .sa_family = AF_IB };
	struct rdma_addrinfo h, *r;
	uint8_t t = 1;
	int v = 1, n = 0, pfd[2];
	char c;

	CHECK(ch, "rdma_create_event_channel: %s", strerror(errno));
	{
		/* datagram rsockets are check_rsockets' (rsock_dgram); here only
		 * that one opens and closes, and a raw one is refused */
		int ds = rsocket(AF_INET, SOCK_DGRAM, 0);

		CHECK(ds >= 0 && !rclose(ds), "a datagram rsocket: %s", strerror(errno));
		CHECK(rsocket(AF_INET, SOCK_RAW, 0) < 0 && errno == EPROTONOSUPPORT,
		      "a raw rsocket: want EPROTONOSUPPORT");
	}
	CHECK(rread(0, &c, 1) < 0 && errno == EBADF, "rread on a plain descriptor: want EBADF");
	CHECK(!pipe(pfd) && write(pfd[1], "x", 1) == 1, "pipe");
	{
		struct pollfd p = { .fd = pfd[0], .events = POLLIN };

		CHECK(rpoll(&p, 1, 1000) == 1 && (p.revents & POLLIN), "rpoll on a pipe");
	}
	close(pfd[0]);
	close(pfd[1]);
	CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_IPOIB) && errno == EOPNOTSUPP,
	      "rdma_create_id(RDMA_PS_IPOIB): want EOPNOTSUPP");
	CHECK(!rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), "rdma_create_id");
	CHECK(rdma_resolve_route(id, 100) && errno == EINVAL, "rdma_resolve_route before an address");
	CHECK(rdma_connect(id, NULL) && errno == EINVAL, "rdma_connect of an idle id");
	CHECK(rdma_accept(id, NULL) && errno == EINVAL, "rdma_accept of an idle id");
	CHECK(rdma_establish(id) && errno == EINVAL, "rdma_establish of an idle id");
	CHECK(rdma_disconnect(id) && errno == EINVAL, "rdma_disconnect of an idle id");
	CHECK(rdma_join_multicast(id, (struct sockaddr *)&far, NULL) && errno == EINVAL,
	      "rdma_join_multicast of an address that is no group: want EINVAL");
	CHECK(rdma_create_srq(id, NULL, NULL) && errno == EINVAL, "rdma_create_srq without attributes: want EINVAL");
	CHECK(rdma_set_option(id, RDMA_OPTION_ID, 99, &v, sizeof(v)) && errno == ENOSYS,
	      "an unknown option: want ENOSYS");
	CHECK(rdma_set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, &v, sizeof(v)) && errno == EOPNOTSUPP,
	      "RDMA_OPTION_IB_PATH: want EOPNOTSUPP");
	CHECK(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &v, sizeof(v)) && errno == EINVAL,
	      "TOS with an int: want EINVAL");
	CHECK(!rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &t, 1) &&
	      !rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &t, 1) &&
	      !rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &v, sizeof(v)) &&
	      !rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &v, sizeof(v)),
	      "TOS, ACK_TIMEOUT, REUSEADDR, AFONLY: %s", strerror(errno));
	CHECK(rdma_bind_addr(id, &sa_ib) && errno == EAFNOSUPPORT, "AF_IB bind: want EAFNOSUPPORT");
	far.sin_addr.s_addr = inet_addr("203.0.113.1");
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&far, 100) && errno == ENETUNREACH,
	      "an address without a route: want ENETUNREACH, got %s", strerror(errno));
	CHECK(!strcmp(rdma_event_str(RDMA_CM_EVENT_ESTABLISHED), "RDMA_CM_EVENT_ESTABLISHED") &&
	      !strcmp(rdma_event_str((enum rdma_cm_event_type)99), "UNKNOWN EVENT"), "rdma_event_str");
	CHECK(rdma_ack_cm_event(NULL) && errno == EINVAL, "rdma_ack_cm_event(NULL)");
	memset(&h, 0, sizeof(h));
	h.ai_flags = RAI_NUMERICHOST;
	CHECK(rdma_getaddrinfo("256.1.1.1", "1", &h, &r), "rdma_getaddrinfo of a bad address succeeded");
	h.ai_family = AF_IB;
	CHECK(rdma_getaddrinfo("::1", "1", &h, &r) == EAI_FAMILY, "AF_IB hints: want EAI_FAMILY");
	dl = rdma_get_devices(&n);
	CHECK(dl && n == 1 && dl[0] && !dl[1] && !strcmp(ibv_get_device_name(dl[0]->device), "roshm0"),
	      "rdma_get_devices: want roshm0 only");
	rdma_free_devices(dl);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	printf("local: unsupported and out-of-order calls fail with their errno\n");
}

/* A dual-stack listener: one connection over IPv4, one over IPv6 (::1). */
static void dual_stack(int port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	char ps[16];
	pid_t p;

	snprintf(ps, sizeof(ps), "%d", port);
	p = spawn("h-passive", "::", ps, "4,6");
	for (int k = 0; k < 2; k++) {
		const char *to = k ? "::1" : "127.0.0.1";
		struct rdma_cm_event *e;
		struct rdma_cm_id *id;

		for (int tries = 0;; tries++) {
			id = resolve(ch, to, port);
			cm_qp(id);
			CHECK(!rdma_connect(id, NULL), "rdma_connect: %s", strerror(errno));
			e = ev_next(ch, 20000);
			CHECK(e, "no answer from the dual-stack listener");
			if (e->event == RDMA_CM_EVENT_ESTABLISHED)
				break;
			CHECK(tries < 100, "to %s: %s %d", to, estr(e->event), e->status);
			rdma_ack_cm_event(e);
			rdma_destroy_qp(id);
			rdma_destroy_id(id);
			usleep(100000);
		}
		CHECK(e->param.conn.qp_num == 0x77, "the listener's conn_param.qp_num");
		rdma_ack_cm_event(e);
		CHECK(rdma_get_local_addr(id)->sa_family == (k ? AF_INET6 : AF_INET),
		      "local address family over %s", to);
		if (k)
			CHECK(IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)rdma_get_local_addr(id))->sin6_addr),
			      "source of a connection to ::1 is not ::1");
		CHECK(!rdma_disconnect(id), "rdma_disconnect");
		rdma_ack_cm_event(ev_expect(ch, RDMA_CM_EVENT_DISCONNECTED, 5000));
		rdma_destroy_qp(id);
		rdma_destroy_id(id);
	}
	reap(p, "dual-stack listener");
	rdma_destroy_event_channel(ch);
	printf("local: IPv4 and IPv6 to one dual-stack listener\n");
}

/* Our id without a QP: CONNECT_RESPONSE, our own QP moved with
 * rdma_init_qp_attr, rdma_establish; the peer's listener migrated. */
static void migrate_establish(int port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_conn_param cp;
	struct rdma_cm_event *e;
	struct rdma_cm_id *id;
	struct ibv_qp_init_attr qa;
	struct ibv_qp_attr a;
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	struct ibv_pd *pd;
	const enum ibv_qp_state states[] = { IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS };
	char ps[16];
	int mask;
	pid_t p;

	snprintf(ps, sizeof(ps), "%d", port);
	p = spawn("h-migrate", "127.0.0.1", ps, NULL);
	for (int tries = 0;; tries++) {
		id = resolve(ch, "127.0.0.1", port);
		pd = ibv_alloc_pd(id->verbs);
		cq = ibv_create_cq(id->verbs, 4, NULL, NULL, 0);
		memset(&qa, 0, sizeof(qa));
		qa.send_cq = qa.recv_cq = cq;
		qa.qp_type = IBV_QPT_RC;
		qa.cap.max_send_wr = 4;
		qa.cap.max_send_sge = 1;
		CHECK(pd && cq && (qp = ibv_create_qp(pd, &qa)), "our own QP");
		CHECK(rdma_connect(id, NULL) && errno == EINVAL, "rdma_connect(NULL) without a QP: want EINVAL");
		memset(&cp, 0, sizeof(cp));
		cp.qp_num = qp->qp_num;
		cp.responder_resources = cp.initiator_depth = 1;
		CHECK(!rdma_connect(id, &cp), "rdma_connect: %s", strerror(errno));
		e = ev_next(ch, 20000);
		CHECK(e, "no answer");
		if (e->event == RDMA_CM_EVENT_CONNECT_RESPONSE)
			break;
		CHECK(tries < 100, "want CONNECT_RESPONSE, got %s %d", estr(e->event), e->status);
		rdma_ack_cm_event(e);
		ibv_destroy_qp(qp);
		ibv_destroy_cq(cq);
		ibv_dealloc_pd(pd);
		rdma_destroy_id(id);
		usleep(100000);
	}
	for (int k = 0; k < 3; k++) {
		a.qp_state = states[k];
		CHECK(!rdma_init_qp_attr(id, &a, &mask), "rdma_init_qp_attr(%d)", states[k]);
		CHECK(states[k] != IBV_QPS_RTR || a.dest_qp_num == e->param.conn.qp_num,
		      "RTR names %06x, the REP %06x", a.dest_qp_num, e->param.conn.qp_num);
		CHECK(!ibv_modify_qp(qp, &a, mask), "ibv_modify_qp");
	}
	rdma_ack_cm_event(e);
	CHECK(!rdma_establish(id), "rdma_establish: %s", strerror(errno));
	CHECK(rdma_establish(id) && errno == EINVAL, "a second rdma_establish: want EINVAL");
	CHECK(!rdma_disconnect(id), "rdma_disconnect");
	rdma_ack_cm_event(ev_expect(ch, RDMA_CM_EVENT_DISCONNECTED, 5000));
	reap(p, "migrating listener");
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	printf("local: migrate, CONNECT_RESPONSE, rdma_init_qp_attr and rdma_establish\n");
}

static int raw_listener(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	CHECK(fd >= 0 && !bind(fd, (struct sockaddr *)&a, sizeof(a)) && !listen(fd, 200),
	      "raw listener on %d: %s", port, strerror(errno));
	return fd;
}

static int raw_connect(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(fd >= 0 && !connect(fd, (struct sockaddr *)&a, sizeof(a)), "raw connect to %d: %s", port,
	      strerror(errno));
	return fd;
}

static int frame(struct rc_msg *m, uint8_t *buf)
{
	int n = rc_wire_encode(m, buf, RC_WIRE_MAX);

	CHECK(n > 0, "rc_wire_encode");
	return n;
}

static struct rc_msg conn_msg(uint8_t type, uint32_t qpn)
{
	struct rc_msg m;

	memset(&m, 0, sizeof(m));
	m.type = type;
	m.qpn = qpn;
	m.psn = 7;
	for (int k = 0; k < 16; k++)
		m.gid[k] = (uint8_t)(k + 1);
	m.lid = 3;
	m.mtu = 3;
	m.responder_resources = m.initiator_depth = 1;
	m.retry_count = m.rnr_retry_count = 7;
	m.qp_type = IBV_QPT_RC;
	return m;
}

/* The REQ our id sends on raw connection @c; it goes out as @ch is
 * driven, and no event may come meanwhile. */
static struct rc_msg accept_req(struct rdma_event_channel *ch, int c)
{
	uint8_t rb[RC_WIRE_MAX];
	struct rc_msg m;
	size_t got = 0;

	for (int n = 0; n <= 0;) {
		struct pollfd pf = { .fd = c, .events = POLLIN };

		CHECK(!ev_next(ch, 10), "an event before any answer");
		if (poll(&pf, 1, 10) == 1) {
			ssize_t r = recv(c, rb + got, sizeof(rb) - got, 0);

			CHECK(r > 0, "the REQ did not come");
			got += (size_t)r;
		}
		n = rc_wire_decode(rb, got, &m);
		CHECK(n >= 0, "our own REQ does not decode");
	}
	return m;
}

/* A peer's listener that answers our REQ with each thing a broken or
 * hostile one could: the active side ends with the right event. */
static void hostile_passive(int port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	int lfd = raw_listener(port);
	uint8_t b[RC_WIRE_MAX + 64];

	nonblock(ch);
	for (int kind = 0; kind < 7; kind++) {
		struct rdma_cm_id *id = resolve(ch, "127.0.0.1", port);
		struct rc_msg m;
		struct rdma_cm_event *e;
		uint8_t rb[RC_WIRE_MAX];
		size_t got = 0;
		int c, n;

		cm_qp(id);
		CHECK(!rdma_connect(id, NULL), "rdma_connect: %s", strerror(errno));
		c = accept(lfd, NULL, NULL);
		CHECK(c >= 0, "accept");
		m = accept_req(ch, c);
		CHECK(m.type == RC_MSG_REQ && m.qpn == id->qp->qp_num && m.qp_type == IBV_QPT_RC,
		      "REQ: type %u qpn %06x (QP %06x)", m.type, m.qpn, id->qp->qp_num);
		switch (kind) {
		case 0:   /* garbage */
			CHECK(send(c, "HELLO, this is not a REP at all", 31, 0) == 31, "send");
			e = ev_expect(ch, RDMA_CM_EVENT_CONNECT_ERROR, 5000);
			CHECK(e->status == -EPROTO, "garbage for a REP: status %d, want -EPROTO", e->status);
			break;
		case 1:   /* a REP with an MTU that does not exist */
			m = conn_msg(RC_MSG_REP, 0x42);
			n = frame(&m, b);
			b[RC_WIRE_HDR + 26] = 9;
			CHECK(send(c, b, (size_t)n, 0) == n, "send");
			e = ev_expect(ch, RDMA_CM_EVENT_CONNECT_ERROR, 5000);
			CHECK(e->status == -EPROTO, "REP with mtu 9: status %d", e->status);
			break;
		case 2:   /* a REJ claiming 200 bytes of private data */
			memset(b, 0, sizeof(b));
			b[0] = 'R', b[1] = 'C', b[2] = 'M', b[3] = '1', b[4] = 1, b[5] = RC_MSG_REJ;
			b[6] = 0, b[7] = 208;
			b[RC_WIRE_HDR + 4] = 200;
			CHECK(send(c, b, RC_WIRE_HDR + 208, 0) == RC_WIRE_HDR + 208, "send");
			e = ev_expect(ch, RDMA_CM_EVENT_CONNECT_ERROR, 5000);
			CHECK(e->status == -EPROTO, "REJ with 200 bytes: status %d", e->status);
			break;
		case 3:   /* the peer goes away */
			close(c);
			c = -1;
			e = ev_expect(ch, RDMA_CM_EVENT_UNREACHABLE, 5000);
			CHECK(e->status == -ECONNRESET, "peer closed: status %d", e->status);
			break;
		case 4:   /* the peer never answers (ROSHM_CM_TIMEOUT_MS=1000) */
			e = ev_expect(ch, RDMA_CM_EVENT_UNREACHABLE, 10000);
			CHECK(e->status == -ETIMEDOUT, "silent peer: status %d", e->status);
			break;
		case 5:   /* a proper REJ */
			memset(&m, 0, sizeof(m));
			m.type = RC_MSG_REJ;
			m.reason = 28;
			m.pd_len = 1;
			m.pd[0] = 'x';
			n = frame(&m, b);
			CHECK(send(c, b, (size_t)n, 0) == n, "send");
			e = ev_expect(ch, RDMA_CM_EVENT_REJECTED, 5000);
			CHECK(e->status == 28 && e->param.conn.private_data_len == 148 &&
			      ((const uint8_t *)e->param.conn.private_data)[0] == 'x', "REJ: status %d len %u",
			      e->status, e->param.conn.private_data_len);
			break;
		case 6:   /* a proper REP, a byte at a time; RTU back; then DREQ */
			m = conn_msg(RC_MSG_REP, 0x42);
			n = frame(&m, b);
			for (int k = 0; k < n; k++) {
				CHECK(send(c, b + k, 1, 0) == 1, "send");
				if (k + 1 < n)
					CHECK(!ev_next(ch, 2), "an event from part of a REP");
			}
			e = ev_expect(ch, RDMA_CM_EVENT_ESTABLISHED, 5000);
			CHECK(e->param.conn.qp_num == 0x42, "REP qp_num %06x", e->param.conn.qp_num);
			{
				struct ibv_qp_attr qa;
				struct ibv_qp_init_attr qia;

				CHECK(!ibv_query_qp(id->qp, &qa, IBV_QP_DEST_QPN | IBV_QP_RQ_PSN, &qia) &&
				      qa.dest_qp_num == 0x42 && qa.rq_psn == 7, "QP dest %06x psn %u",
				      qa.dest_qp_num, qa.rq_psn);
			}
			got = 0;
			for (n = 0; !n;) {
				ssize_t r = recv(c, rb + got, sizeof(rb) - got, 0);

				CHECK(r > 0, "no RTU");
				got += (size_t)r;
				n = rc_wire_decode(rb, got, &m);
			}
			CHECK(n > 0 && m.type == RC_MSG_RTU, "want RTU, got %d type %u", n, m.type);
			memset(&m, 0, sizeof(m));
			m.type = RC_MSG_DREQ;
			n = frame(&m, b);
			CHECK(send(c, b, (size_t)n, 0) == n, "send");
			rdma_ack_cm_event(e);
			e = ev_expect(ch, RDMA_CM_EVENT_DISCONNECTED, 5000);
			break;
		}
		rdma_ack_cm_event(e);
		if (kind != 6)
			CHECK(rc_state(id->qp) == IBV_QPS_ERR, "case %d: QP not in error", kind);
		if (c >= 0)
			close(c);
		rdma_destroy_qp(id);
		rdma_destroy_id(id);
	}
	close(lfd);
	rdma_destroy_event_channel(ch);
	printf("local: garbage, bad REP, bad REJ, close, silence, REJ and a dribbled REP from the peer\n");
}

/* Pump @L until @fd's peer (our listener) closes it; no event may come. */
static void wait_dropped(struct rdma_event_channel *L, int fd, const char *what)
{
	uint64_t end = now_ms() + 5000;
	uint8_t junk[256];

	while (now_ms() < end) {
		struct rdma_cm_event *e = ev_next(L, 10);
		struct pollfd p = { .fd = fd, .events = POLLIN };

		CHECK(!e, "%s: the listener gave %s", what, e ? estr(e->event) : "");
		if (poll(&p, 1, 0) == 1) {
			ssize_t r = recv(fd, junk, sizeof(junk), MSG_DONTWAIT);

			if (r == 0 || (r < 0 && errno == ECONNRESET))
				return;
			CHECK(r < 0 && errno == EAGAIN, "%s: the listener answered %zd bytes", what, r);
		}
	}
	fail("%s: the listener kept the connection", what);
}

/* Broken and hostile connections to one listener; it stays up and serves
 * a good connection afterwards. */
static void hostile_active(int port)
{
	struct rdma_event_channel *L = rdma_create_event_channel();
	struct rdma_addrinfo *r = ai("127.0.0.1", port, true);
	struct rdma_cm_id *lid, *id;
	struct rdma_cm_event *e;
	struct rc_msg m = conn_msg(RC_MSG_REQ, 0x99);
	uint8_t req[RC_WIRE_MAX], b[4096];
	int nreq, n, fds[100], dropped = 0;
	char ps[16];
	pid_t p;

	nonblock(L);
	CHECK(!rdma_create_id(L, &lid, NULL, RDMA_PS_TCP) && !rdma_bind_addr(lid, r->ai_src_addr) &&
	      !rdma_listen(lid, 0), "listener: %s", strerror(errno));
	memcpy(m.pd, "dribble", 8);
	m.pd_len = 8;
	nreq = frame(&m, req);
	for (int kind = 0; kind < 12; kind++) {
		static const char *const names[] = {
			"4 KiB of random bytes", "an HTTP request", "version 2", "message type 9",
			"a REQ of 60000 bytes", "a REQ with 57 bytes of private data",
			"a REQ whose lengths disagree", "a REQ for a UD QP", "a REQ with a 25-bit QPN",
			"a REP to a listener", "an RTU to a listener", "a DREQ to a listener" };
		int fd = raw_connect(port);

		memset(b, 0, sizeof(b));
		memcpy(b, req, (size_t)nreq);
		n = nreq;
		switch (kind) {
		case 0:
			CHECK(getrandom(b, 4096, 0) == 4096, "getrandom");
			b[0] = 'X';   /* never our magic by chance */
			n = 4096;
			break;
		case 1:
			n = sprintf((char *)b, "GET / HTTP/1.0\r\n\r\n");
			break;
		case 2:
			b[4] = 2;
			break;
		case 3:
			b[5] = 9;
			break;
		case 4:
			b[6] = 0xea, b[7] = 0x60;
			break;
		case 5:
			b[RC_WIRE_HDR + 34] = 57;
			b[7] = RC_WIRE_CONN + 57;
			n = RC_WIRE_HDR + RC_WIRE_CONN + 57;
			break;
		case 6:
			b[7] += 10;
			n += 10;
			break;
		case 7:
			b[RC_WIRE_HDR + 33] = IBV_QPT_UD;
			break;
		case 8:
			b[RC_WIRE_HDR + 0] = 1;
			break;
		case 9:
			b[5] = RC_MSG_REP;
			break;
		case 10:
		case 11:
			memset(b, 0, RC_WIRE_HDR);
			memcpy(b, "RCM1", 4);
			b[4] = 1;
			b[5] = kind == 10 ? RC_MSG_RTU : RC_MSG_DREQ;
			n = RC_WIRE_HDR;
			break;
		}
		CHECK(send(fd, b, (size_t)n, MSG_NOSIGNAL) == n || kind == 0, "send: %s", strerror(errno));
		wait_dropped(L, fd, names[kind]);
		close(fd);
	}
	/* half a REQ, then the peer goes: nothing for the application */
	{
		int fd = raw_connect(port);

		CHECK(send(fd, req, 20, 0) == 20, "send");
		CHECK(!ev_next(L, 100), "an event from half a REQ");
		close(fd);
		CHECK(!ev_next(L, 100), "an event from half a REQ and a close");
	}
	/* a good REQ a byte at a time: CONNECT_REQUEST; then garbage from that
	 * peer ends it (CONNECT_ERROR) and the id can no longer be accepted */
	for (int kind = 0; kind < 2; kind++) {
		int fd = raw_connect(port);

		for (int k = 0; k < nreq; k++) {
			CHECK(send(fd, req + k, 1, 0) == 1, "send");
			if (k + 1 < nreq)
				CHECK(!ev_next(L, 2), "an event from part of a REQ");
		}
		e = ev_expect(L, RDMA_CM_EVENT_CONNECT_REQUEST, 5000);
		id = e->id;
		CHECK(e->param.conn.qp_num == 0x99 && !memcmp(e->param.conn.private_data, "dribble", 8),
		      "the dribbled REQ: qp %06x", e->param.conn.qp_num);
		rdma_ack_cm_event(e);
		if (kind == 0)
			CHECK(send(fd, "garbage!", 8, 0) == 8, "send");
		close(fd);
		e = ev_expect(L, RDMA_CM_EVENT_CONNECT_ERROR, 5000);
		CHECK(e->id == id && e->status == (kind ? -ECONNRESET : -EPROTO),
		      "CONNECT_ERROR status %d", e->status);
		rdma_ack_cm_event(e);
		CHECK(rdma_accept(id, &(struct rdma_conn_param){ .qp_num = 1 }) && errno == EINVAL,
		      "rdma_accept of a failed request: want EINVAL");
		rdma_destroy_id(id);
	}
	/* backlog 2: a third request the application has not taken yet is
	 * rejected (reason 28), as the kernel CM does */
	{
		struct rdma_event_channel *L2 = rdma_create_event_channel();
		struct rdma_addrinfo *r2 = ai("127.0.0.1", port + 1, true);
		struct rdma_cm_id *l2, *got[2];
		int f[3], rejected = 0;

		nonblock(L2);
		CHECK(!rdma_create_id(L2, &l2, NULL, RDMA_PS_TCP) && !rdma_bind_addr(l2, r2->ai_src_addr) &&
		      !rdma_listen(l2, 2), "listener with backlog 2: %s", strerror(errno));
		for (int k = 0; k < 3; k++) {
			f[k] = raw_connect(port + 1);
			CHECK(send(f[k], req, (size_t)nreq, 0) == nreq, "send");
		}
		for (int k = 0; k < 2; k++) {
			e = ev_expect(L2, RDMA_CM_EVENT_CONNECT_REQUEST, 5000);
			got[k] = e->id;
			rdma_ack_cm_event(e);
		}
		CHECK(!ev_next(L2, 200), "a CONNECT_REQUEST beyond the backlog");
		for (int k = 0; k < 3; k++) {
			uint8_t rb[RC_WIRE_MAX];
			size_t have = 0;
			struct pollfd pf = { .fd = f[k], .events = POLLIN };
			struct rc_msg rm;

			while (poll(&pf, 1, 300) == 1) {
				ssize_t rr = recv(f[k], rb + have, sizeof(rb) - have, 0);

				if (rr <= 0)
					break;
				have += (size_t)rr;
			}
			if (rc_wire_decode(rb, have, &rm) > 0 && rm.type == RC_MSG_REJ && rm.reason == 28)
				rejected++;
			close(f[k]);
		}
		CHECK(rejected == 1, "%d of 3 requests to a backlog of 2 were rejected, want 1", rejected);
		rdma_destroy_id(got[0]);
		rdma_destroy_id(got[1]);
		rdma_destroy_id(l2);
		rdma_destroy_event_channel(L2);
		rdma_freeaddrinfo(r2);
	}
	/* 100 connections that say nothing: beyond 64 pending the listener
	 * closes them at once; ROSHM_CM_TIMEOUT_MS later the rest */
	for (int k = 0; k < 100; k++)
		fds[k] = raw_connect(port);
	for (uint64_t end = now_ms() + 10000; now_ms() < end && dropped < 100;) {
		CHECK(!ev_next(L, 10), "an event from a silent connection");
		dropped = 0;
		for (int k = 0; k < 100; k++) {
			struct pollfd pf = { .fd = fds[k], .events = POLLIN };

			dropped += poll(&pf, 1, 0) == 1;
		}
	}
	CHECK(dropped == 100, "%d of 100 silent connections were closed", dropped);
	for (int k = 0; k < 100; k++)
		close(fds[k]);
	/* and it still serves */
	snprintf(ps, sizeof(ps), "%d", port);
	p = spawn("h-active", "127.0.0.1", ps, NULL);
	e = ev_expect(L, RDMA_CM_EVENT_CONNECT_REQUEST, 20000);
	id = e->id;
	CHECK(!rdma_accept(id, &(struct rdma_conn_param){ .qp_num = 5 }), "rdma_accept: %s", strerror(errno));
	rdma_ack_cm_event(e);
	rdma_ack_cm_event(ev_expect(L, RDMA_CM_EVENT_ESTABLISHED, 10000));
	rdma_ack_cm_event(ev_expect(L, RDMA_CM_EVENT_DISCONNECTED, 10000));
	reap(p, "good client after the attacks");
	rdma_destroy_id(id);
	rdma_destroy_id(lid);
	rdma_destroy_event_channel(L);
	rdma_freeaddrinfo(r);
	printf("local: the listener dropped 12 kinds of bad requests, half a REQ, 100 silent "
	       "connections, rejected a request beyond its backlog, and served a good one after\n");
}

static int count_fds(void)
{
	char p[64];
	int n = 0;

	for (int fd = 0; fd < 1024; fd++) {
		snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
		n += !access(p, F_OK);
	}
	return n;
}

/* h-udconnect ADDR PORT STATUS: a UD connect that must end UNREACHABLE
 * with STATUS (retried while nobody listens yet: status 1). */
static int h_udconnect(const char *addr, int port, int want)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();

	who = "rdmacm_check h-udconnect";
	CHECK(ch, "rdma_create_event_channel");
	nonblock(ch);
	for (int tries = 0;; tries++) {
		struct rdma_cm_id *id = resolve_ps(ch, addr, port, RDMA_PS_UDP);
		struct rdma_cm_event *e;
		int st;

		CHECK(!rdma_connect(id, NULL), "rdma_connect: %s", strerror(errno));
		e = ev_expect(ch, RDMA_CM_EVENT_UNREACHABLE, 20000);
		st = e->status;
		rdma_ack_cm_event(e);
		rdma_destroy_id(id);
		if (st == want)
			break;
		CHECK(st == 1 && tries < 100, "UNREACHABLE status %d, want %d", st, want);
		usleep(100000);
	}
	rdma_destroy_event_channel(ch);
	return 0;
}

/* a UD QP through rdma_create_qp: ready to send at once, with UDP's Q_Key */
static void ud_qp(struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr a;
	struct ibv_qp_attr qa;

	memset(&a, 0, sizeof(a));
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = a.cap.max_recv_wr = 8;
	a.cap.max_send_sge = a.cap.max_recv_sge = 1;
	a.sq_sig_all = 1;
	CHECK(rdma_create_qp(id, NULL, &a) && errno == EINVAL, "an RC QP on a UD id: want EINVAL");
	a.qp_type = IBV_QPT_UD;
	CHECK(!rdma_create_qp(id, NULL, &a), "rdma_create_qp (UD): %s", strerror(errno));
	CHECK(!ibv_query_qp(id->qp, &qa, IBV_QP_STATE | IBV_QP_QKEY, &a) && qa.qp_state == IBV_QPS_RTS &&
	      qa.qkey == RDMA_UDP_QKEY, "UD QP: state %d, Q_Key %#x; want RTS and RDMA_UDP_QKEY",
	      qa.qp_state, qa.qkey);
}

/* RDMA_PS_UDP: what IB CM's SIDR gives (rdma_ud_param), its errors, then
 * datagrams both ways through the QPs and address it set up. */
static void ud_cm(int port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_addrinfo *r = ai("127.0.0.1", port, true), *r1 = ai("127.0.0.1", port + 1, true);
	struct rdma_cm_id *lid, *tid, *id, *sid;
	struct rdma_cm_event *e;
	struct rdma_conn_param cp;
	struct ibv_mr *cmr, *smr;
	struct ibv_ah *cah, *sah = NULL;
	uint32_t up_qpn, up_qkey, wc_src = 0;
	static uint8_t cbuf[4096 + 40], sbuf[4096 + 40], pd[181], pd_zero[136];
	union ibv_gid sgid;

	nonblock(ch);
	for (int k = 0; k < (int)sizeof(pd); k++)
		pd[k] = (uint8_t)(k * 7 + 1);
	/* nobody listens: SIDR's "unsupported" (1) */
	id = resolve_ps(ch, "127.0.0.1", port, RDMA_PS_UDP);
	CHECK(id->qp_type == IBV_QPT_UD, "a RDMA_PS_UDP id's qp_type is %d", id->qp_type);
	ud_qp(id);
	memset(&cp, 0, sizeof(cp));
	cp.private_data = pd;
	cp.private_data_len = 181;
	CHECK(rdma_connect(id, &cp) && errno == EINVAL, "181 bytes of SIDR REQ private data: want EINVAL");
	CHECK(!rdma_connect(id, NULL), "rdma_connect (UD, no conn_param): %s", strerror(errno));
	e = ev_expect(ch, RDMA_CM_EVENT_UNREACHABLE, 5000);
	CHECK(e->status == 1, "no listener: UNREACHABLE status %d, want 1", e->status);
	rdma_ack_cm_event(e);
	CHECK(rc_state(id->qp) == IBV_QPS_RTS, "a failed SIDR moved the UD QP");
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	/* the port spaces: a RC listener on PORT has nothing for UD, a UD
	 * listener on PORT+1 nothing for RC */
	CHECK(!rdma_create_id(ch, &tid, NULL, RDMA_PS_TCP) && !rdma_bind_addr(tid, r->ai_src_addr) &&
	      !rdma_listen(tid, 0), "RC listener: %s", strerror(errno));
	CHECK(!rdma_create_id(ch, &lid, NULL, RDMA_PS_UDP) && !rdma_bind_addr(lid, r1->ai_src_addr) &&
	      !rdma_listen(lid, 0), "UD listener: %s", strerror(errno));
	id = resolve_ps(ch, "127.0.0.1", port, RDMA_PS_UDP);
	CHECK(!rdma_connect(id, NULL), "rdma_connect: %s", strerror(errno));
	e = ev_expect(ch, RDMA_CM_EVENT_UNREACHABLE, 5000);
	CHECK(e->status == 1 && e->id == id, "UD to a RC listener: status %d, want 1", e->status);
	rdma_ack_cm_event(e);
	rdma_destroy_id(id);
	id = resolve(ch, "127.0.0.1", port + 1);
	cm_qp(id);
	CHECK(!rdma_connect(id, NULL), "rdma_connect: %s", strerror(errno));
	e = ev_expect(ch, RDMA_CM_EVENT_REJECTED, 5000);
	CHECK(e->status == 8 && e->id == id, "RC to a UD listener: status %d, want 8", e->status);
	rdma_ack_cm_event(e);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	rdma_destroy_id(tid);
	/* rejected: SIDR's "reject" (2) */
	id = resolve_ps(ch, "127.0.0.1", port + 1, RDMA_PS_UDP);
	CHECK(!rdma_connect(id, NULL), "rdma_connect: %s", strerror(errno));
	e = ev_expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 5000);
	CHECK(e->listen_id == lid && e->id->qp_type == IBV_QPT_UD, "the request's ids");
	CHECK(rdma_reject(e->id, pd, 137) && errno == EINVAL, "137 bytes of SIDR REP private data: want EINVAL");
	CHECK(!rdma_reject(e->id, "no", 2), "rdma_reject: %s", strerror(errno));
	sid = e->id;
	rdma_ack_cm_event(e);
	rdma_destroy_id(sid);
	e = ev_expect(ch, RDMA_CM_EVENT_UNREACHABLE, 5000);
	CHECK(e->status == 2 && e->id == id, "rejected: status %d, want 2", e->status);
	CHECK(e->param.ud.private_data_len == 136 && !memcmp(e->param.ud.private_data, "no", 2) &&
	      !memcmp((const uint8_t *)e->param.ud.private_data + 2, pd_zero, 134),
	      "rejected: %u bytes of private data, or not the reject's", e->param.ud.private_data_len);
	rdma_ack_cm_event(e);
	rdma_destroy_id(id);

	/* an active side that leaves before the answer: the listener's id gets
	 * no event and its accept succeeds (a SIDR REP that goes nowhere) */
	id = resolve_ps(ch, "127.0.0.1", port + 1, RDMA_PS_UDP);
	CHECK(!rdma_connect(id, NULL), "rdma_connect: %s", strerror(errno));
	e = ev_expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 5000);
	sid = e->id;
	rdma_ack_cm_event(e);
	rdma_destroy_id(id);
	CHECK(!ev_next(ch, 300), "an event after the UD requester left");
	cp.qp_num = 0x42;
	cp.private_data = NULL;
	cp.private_data_len = 0;
	CHECK(!rdma_accept(sid, &cp), "rdma_accept to a requester that left: %s", strerror(errno));
	CHECK(!ev_next(ch, 200), "an event after accepting a requester that left");
	rdma_destroy_id(sid);
	cp.private_data = pd;

	/* accepted: the request's private data (180 bytes reported), the REP's
	 * QPN, Q_Key, address and private data (136 bytes reported) */
	id = resolve_ps(ch, "127.0.0.1", port + 1, RDMA_PS_UDP);
	ud_qp(id);
	cp.private_data_len = 180;
	CHECK(!rdma_connect(id, &cp), "rdma_connect (180 bytes): %s", strerror(errno));
	e = ev_expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 5000);
	sid = e->id;
	CHECK(e->param.ud.private_data_len == 180 && !memcmp(e->param.ud.private_data, pd, 180),
	      "CONNECT_REQUEST: %u bytes of private data, or not the ones sent", e->param.ud.private_data_len);
	rdma_ack_cm_event(e);
	ud_qp(sid);
	CHECK(!rdma_accept(sid, NULL), "rdma_accept (UD): %s", strerror(errno));
	e = ev_expect(ch, RDMA_CM_EVENT_ESTABLISHED, 5000);
	CHECK(e->id == id && e->param.ud.qp_num == sid->qp->qp_num && e->param.ud.qkey == RDMA_UDP_QKEY &&
	      e->param.ud.private_data_len == 136,
	      "ESTABLISHED: QPN %#x (want %#x), Q_Key %#x, %u bytes of private data", e->param.ud.qp_num,
	      sid->qp->qp_num, e->param.ud.qkey, e->param.ud.private_data_len);
	CHECK(!ibv_query_gid(sid->verbs, 1, 0, &sgid) && e->param.ud.ah_attr.is_global &&
	      !memcmp(&e->param.ud.ah_attr.grh.dgid, &sgid, 16), "ESTABLISHED: the AH is not the listener's node");
	up_qpn = e->param.ud.qp_num;
	up_qkey = e->param.ud.qkey;
	cah = ibv_create_ah(id->pd, &e->param.ud.ah_attr);
	CHECK(cah, "ibv_create_ah from the event: %s", strerror(errno));
	rdma_ack_cm_event(e);
	CHECK(!ev_next(ch, 200), "an event after a UD accept");
	CHECK(rdma_accept(sid, NULL) && errno == EINVAL, "a second rdma_accept: want EINVAL");

	/* datagrams: the client's to the listener's QP, the answer through
	 * ibv_create_ah_from_wc */
	cmr = ibv_reg_mr(id->pd, cbuf, sizeof(cbuf), IBV_ACCESS_LOCAL_WRITE);
	smr = ibv_reg_mr(sid->pd, sbuf, sizeof(sbuf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(cmr && smr, "ibv_reg_mr");
	for (int round = 0; round < 2; round++) {
		struct rdma_cm_id *to = round ? id : sid, *from = round ? sid : id;
		uint8_t *tb = round ? cbuf : sbuf, *fb = round ? sbuf + 40 : cbuf + 40;
		struct ibv_mr *tm = round ? cmr : smr, *fm = round ? smr : cmr;
		struct ibv_sge rs = { .addr = (uintptr_t)tb, .length = 40 + 1000, .lkey = tm->lkey };
		struct ibv_recv_wr rw = { .wr_id = 7, .sg_list = &rs, .num_sge = 1 }, *rbad;
		struct ibv_sge ss = { .addr = (uintptr_t)fb, .length = 1000, .lkey = fm->lkey };
		struct ibv_send_wr sw = { .wr_id = 8, .sg_list = &ss, .num_sge = 1,
					  .opcode = IBV_WR_SEND_WITH_IMM, .send_flags = IBV_SEND_SIGNALED }, *sbad;
		struct ibv_wc wc;

		for (int k = 0; k < 1000; k++)
			fb[k] = (uint8_t)(k * 13 + round + 5);
		memset(tb, 0, 1040);
		CHECK(!ibv_post_recv(to->qp, &rw, &rbad), "ibv_post_recv");
		sw.imm_data = htonl(0x5eed0000u + round);
		sw.wr.ud.ah = round ? sah : cah;
		sw.wr.ud.remote_qpn = round ? wc_src : up_qpn;
		sw.wr.ud.remote_qkey = up_qkey;
		CHECK(!ibv_post_send(from->qp, &sw, &sbad), "ibv_post_send (UD)");
		wc = wait_wc(from->send_cq);
		CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 8, "UD send: status %d", wc.status);
		wc = wait_wc(to->recv_cq);
		CHECK(wc.status == IBV_WC_SUCCESS && wc.byte_len == 1040 && (wc.wc_flags & IBV_WC_GRH) &&
		      (wc.wc_flags & IBV_WC_WITH_IMM) && wc.imm_data == htonl(0x5eed0000u + round) &&
		      wc.src_qp == from->qp->qp_num,
		      "round %d: status %d, %u bytes, flags %#x, src_qp %#x (want %#x)", round, wc.status,
		      wc.byte_len, wc.wc_flags, wc.src_qp, from->qp->qp_num);
		CHECK(!memcmp(tb + 40, fb, 1000), "round %d: the datagram's bytes differ", round);
		if (!round) {
			sah = ibv_create_ah_from_wc(sid->pd, &wc, (struct ibv_grh *)sbuf, 1);
			CHECK(sah, "ibv_create_ah_from_wc: %s", strerror(errno));
			wc_src = wc.src_qp;
		}
	}
	/* a listener whose SIDR REP names another Q_Key: ADDR_ERROR -EINVAL,
	 * as rdma_cm refuses it; the QP stays as it was */
	{
		int lfd = raw_listener(port + 2), c;
		struct rdma_cm_id *hid = resolve_ps(ch, "127.0.0.1", port + 2, RDMA_PS_UDP);
		struct rc_msg m;
		uint8_t b[RC_WIRE_MAX];
		size_t got = 0;
		int n;

		ud_qp(hid);
		CHECK(!rdma_connect(hid, NULL), "rdma_connect: %s", strerror(errno));
		c = accept(lfd, NULL, NULL);
		CHECK(c >= 0, "raw accept");
		/* the REQ goes out as our channel moves on: process it meanwhile */
		for (int k = 0; (n = rc_wire_decode(b, got, &m)) == 0; k++) {
			ssize_t rn;

			CHECK(k < 500, "the SIDR_REQ did not come whole");
			CHECK(!ev_next(ch, 10), "an event before the SIDR_REP");
			rn = recv(c, b + got, sizeof(b) - got, MSG_DONTWAIT);
			CHECK(rn > 0 || (rn < 0 && errno == EAGAIN), "the SIDR_REQ's connection: %s",
			      rn ? strerror(errno) : "closed");
			if (rn > 0)
				got += (size_t)rn;
		}
		CHECK(n > 0 && m.type == RC_MSG_SIDR_REQ && m.qpn == hid->qp->qp_num,
		      "a UD connect sent no SIDR_REQ with its QPN");
		m = conn_msg(RC_MSG_SIDR_REP, 0x4321);
		m.psn = 0;
		m.qp_type = IBV_QPT_UD;
		m.qkey = 0xdeadbeef;
		n = frame(&m, b);
		CHECK(send(c, b, (size_t)n, 0) == n, "send SIDR_REP");
		e = ev_expect(ch, RDMA_CM_EVENT_ADDR_ERROR, 5000);
		CHECK(e->id == hid && e->status == -EINVAL, "a foreign Q_Key: status %d, want -EINVAL", e->status);
		rdma_ack_cm_event(e);
		CHECK(rc_state(hid->qp) == IBV_QPS_RTS, "a refused SIDR REP moved the UD QP");
		close(c);
		close(lfd);
		rdma_destroy_qp(hid);
		rdma_destroy_id(hid);
	}
	/* rdma_get_request whose QP cannot be made: the request is refused
	 * (UNREACHABLE 2 at the requester, a helper process) and nothing of it
	 * stays in the listener's process */
	{
		struct rdma_addrinfo h, *ru;
		struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_UD,
					       .cap = { .max_send_wr = 1u << 30, .max_recv_wr = 1,
						       .max_send_sge = 1, .max_recv_sge = 1 } };
		struct rdma_cm_id *lep, *cid = NULL;
		char ps[16];
		int fds0, fds1;
		pid_t hp;

		memset(&h, 0, sizeof(h));
		h.ai_port_space = RDMA_PS_UDP;
		h.ai_qp_type = IBV_QPT_UD;
		h.ai_flags = RAI_PASSIVE;
		snprintf(ps, sizeof(ps), "%d", port + 3);
		CHECK(!rdma_getaddrinfo("127.0.0.1", ps, &h, &ru), "rdma_getaddrinfo (UDP)");
		CHECK(!rdma_create_ep(&lep, ru, NULL, &qa) && !rdma_listen(lep, 0),
		      "rdma_create_ep (passive, UD): %s", strerror(errno));
		fds0 = count_fds();
		hp = spawn("h-udconnect", "127.0.0.1", ps, "2");
		CHECK(rdma_get_request(lep, &cid) && cid == NULL, "rdma_get_request with an impossible QP succeeded");
		reap(hp, "UD requester refused by rdma_get_request");
		fds1 = count_fds();
		CHECK(fds1 == fds0, "rdma_get_request's failure left %d descriptors", fds1 - fds0);
		rdma_destroy_ep(lep);
		rdma_freeaddrinfo(ru);
	}

	/* rdma_disconnect of a UD id: its QP stops, no event */
	CHECK(!rdma_disconnect(id) && rc_state(id->qp) == IBV_QPS_ERR, "rdma_disconnect (UD)");
	CHECK(!ev_next(ch, 200), "an event after a UD rdma_disconnect");
	ibv_destroy_ah(cah);
	ibv_destroy_ah(sah);
	ibv_dereg_mr(cmr);
	ibv_dereg_mr(smr);
	rdma_destroy_qp(id);
	rdma_destroy_qp(sid);
	rdma_destroy_id(id);
	rdma_destroy_id(sid);
	rdma_destroy_id(lid);
	rdma_freeaddrinfo(r);
	rdma_freeaddrinfo(r1);
	rdma_destroy_event_channel(ch);
	printf("local: RDMA_PS_UDP: SIDR's errors, rdma_ud_param, datagrams both ways\n");
}

/* rdma_disconnect from another thread (an application's timeout) while a
 * synchronous rdma_connect waits for the answer of a listener that does
 * not accept: the connect returns, failing with ECONNABORTED. */
static void *abort_later(void *id)
{
	usleep(300000);
	CHECK(!rdma_disconnect(id), "rdma_disconnect of a connecting id: %s", strerror(errno));
	return NULL;
}

static void sync_abort(int port)
{
	struct rdma_event_channel *lch = rdma_create_event_channel();
	struct rdma_addrinfo *r = ai("127.0.0.1", port, false);
	struct rdma_conn_param cp;
	struct rdma_cm_event *e;
	struct rdma_cm_id *l, *id;
	pthread_t t;
	uint64_t t0;

	CHECK(lch && !rdma_create_id(lch, &l, NULL, RDMA_PS_TCP) && !rdma_bind_addr(l, r->ai_dst_addr) &&
	      !rdma_listen(l, 4), "a listener: %s", strerror(errno));
	nonblock(lch);
	CHECK(!rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP), "a synchronous id: %s", strerror(errno));
	CHECK(!rdma_resolve_addr(id, NULL, r->ai_dst_addr, 2000) && !rdma_resolve_route(id, 2000),
	      "synchronous resolve: %s", strerror(errno));
	cm_qp(id);
	memset(&cp, 0, sizeof(cp));
	cp.responder_resources = cp.initiator_depth = 1;
	CHECK(!pthread_create(&t, NULL, abort_later, id), "pthread_create");
	t0 = now_ms();
	CHECK(rdma_connect(id, &cp) && errno == ECONNABORTED,
	      "a synchronous rdma_connect aborted by rdma_disconnect: want ECONNABORTED, got %s",
	      strerror(errno));
	CHECK(now_ms() - t0 < 5000, "the aborted connect took %" PRIu64 " ms", now_ms() - t0);
	pthread_join(t, NULL);
	CHECK(id->qp && id->qp->state == IBV_QPS_ERR, "the aborted id's QP is not in the error state");
	/* the listener got the request; nobody answers it: let it go */
	while ((e = ev_next(lch, 500))) {
		struct rdma_cm_id *pid = e->event == RDMA_CM_EVENT_CONNECT_REQUEST ? e->id : NULL;

		rdma_ack_cm_event(e);
		if (pid)
			rdma_destroy_id(pid);
	}
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(lch);
	rdma_freeaddrinfo(r);
	printf("local: rdma_disconnect from another thread ends a synchronous rdma_connect "
	       "(ECONNABORTED)\n");
}

/* One datagram from @from's QP through @ah to QPN 0xFFFFFF; arrives at
 * @to's (NULL: nowhere within 300 ms), its GRH's dgid the group @g. */
static void mc_dgram(struct rdma_cm_id *from, struct rdma_cm_id *to, struct ibv_ah *ah,
		     const union ibv_gid *g, uint8_t *buf, struct ibv_mr *mr, uint8_t seed)
{
	struct ibv_sge rs = { .addr = (uintptr_t)buf, .length = 40 + 100, .lkey = mr->lkey };
	struct ibv_recv_wr rw = { .wr_id = 9, .sg_list = &rs, .num_sge = 1 }, *rbad;
	struct ibv_sge ss = { .addr = (uintptr_t)buf + 200, .length = 100, .lkey = mr->lkey };
	struct ibv_send_wr sw = { .wr_id = 10, .sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *sbad;
	struct ibv_wc wc;

	memset(buf, 0, 140);
	memset(buf + 200, seed, 100);
	/* nowhere: a RECV on the sender's QP all the same, which would show
	 * a datagram that came back to it */
	CHECK(!ibv_post_recv((to ? to : from)->qp, &rw, &rbad), "ibv_post_recv");
	sw.wr.ud.ah = ah;
	sw.wr.ud.remote_qpn = 0xffffff;
	sw.wr.ud.remote_qkey = RDMA_UDP_QKEY;
	CHECK(!ibv_post_send(from->qp, &sw, &sbad), "ibv_post_send to a group");
	wc = wait_wc(from->send_cq);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 10, "a send to a group: status %d", wc.status);
	if (!to) {
		usleep(300000);
		CHECK(ibv_poll_cq(from->recv_cq, 1, &wc) == 0, "a datagram to a group with no member arrived");
		return;
	}
	wc = wait_wc(to->recv_cq);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.byte_len == 140 && wc.src_qp == from->qp->qp_num &&
	      (wc.wc_flags & IBV_WC_GRH) && !memcmp(((struct ibv_grh *)buf)->dgid.raw, g->raw, 16) &&
	      buf[40] == seed && buf[139] == seed,
	      "a datagram to the group: status %d, %u bytes, src_qp %#x, or its GRH or bytes wrong",
	      wc.status, wc.byte_len, wc.src_qp);
}

/* Multicast on UD ids: a group from a bound loopback address (no route to
 * it), the join's event, a datagram through the event's AH to the id's own
 * QP (a member), the join's errors, a send-only join (no member: nothing
 * arrives), leaving. */
static void mcast_cm(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in lo = { .sin_family = AF_INET }, grp = { .sin_family = AF_INET },
			   grp2 = { .sin_family = AF_INET };
	struct rdma_cm_id *id, *rc;
	struct rdma_cm_event *e;
	struct ibv_ah *ah, *ah2;
	struct ibv_mr *mr;
	static uint8_t buf[512];
	struct rdma_cm_join_mc_attr_ex jx = { .comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS |
							    RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS,
					      .join_flags = RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER };
	union ibv_gid g = { .raw = { [10] = 0xff, [11] = 0xff, 239, 1, 2, 4 } }, g2;
	int ctx_tag;

	nonblock(ch);
	lo.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	grp.sin_addr.s_addr = inet_addr("239.1.2.4");
	grp2.sin_addr.s_addr = inet_addr("239.1.2.5");
	g2 = g;
	g2.raw[15] = 5;
	CHECK(!rdma_create_id(ch, &rc, NULL, RDMA_PS_TCP), "rdma_create_id");
	CHECK(rdma_join_multicast(rc, (struct sockaddr *)&grp, NULL) && errno == ENODEV,
	      "a join of an id bound to no device: want ENODEV, got %s", strerror(errno));
	CHECK(!rdma_resolve_addr(rc, (struct sockaddr *)&lo, (struct sockaddr *)&grp, 2000),
	      "rdma_resolve_addr (RC) to a group: %s", strerror(errno));
	rdma_ack_cm_event(ev_expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 5000));
	CHECK(rdma_join_multicast(rc, (struct sockaddr *)&grp, NULL) && errno == EINVAL,
	      "a RC id joined a group: want EINVAL, got %s", strerror(errno));
	rdma_destroy_id(rc);
	CHECK(!rdma_create_id(ch, &id, NULL, RDMA_PS_UDP), "rdma_create_id (UDP)");
	CHECK(!rdma_resolve_addr(id, (struct sockaddr *)&lo, (struct sockaddr *)&grp, 2000),
	      "rdma_resolve_addr to a group from 127.0.0.1: %s", strerror(errno));
	rdma_ack_cm_event(ev_expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 5000));
	ud_qp(id);
	CHECK(!rdma_join_multicast(id, (struct sockaddr *)&grp, &ctx_tag), "rdma_join_multicast: %s",
	      strerror(errno));
	e = ev_expect(ch, RDMA_CM_EVENT_MULTICAST_JOIN, 5000);
	CHECK(e->id == id && !e->status && e->param.ud.private_data == &ctx_tag &&
	      e->param.ud.qp_num == 0xffffff && e->param.ud.qkey == RDMA_UDP_QKEY &&
	      e->param.ud.ah_attr.is_global && !memcmp(&e->param.ud.ah_attr.grh.dgid, &g, 16),
	      "MULTICAST_JOIN: status %d, context, QPN %#x, Q_Key %#x or its AH's GID wrong", e->status,
	      e->param.ud.qp_num, e->param.ud.qkey);
	ah = ibv_create_ah(id->pd, &e->param.ud.ah_attr);
	CHECK(ah, "ibv_create_ah from MULTICAST_JOIN: %s", strerror(errno));
	rdma_ack_cm_event(e);
	CHECK(rdma_join_multicast(id, (struct sockaddr *)&grp, NULL) && errno == EADDRINUSE,
	      "a second join of a group: want EADDRINUSE, got %s", strerror(errno));
	mr = ibv_reg_mr(id->pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr, "ibv_reg_mr");
	mc_dgram(id, id, ah, &g, buf, mr, 0x5a);
	/* send-only: the event, no membership */
	jx.addr = (struct sockaddr *)&grp2;
	CHECK(!rdma_join_multicast_ex(id, &jx, NULL), "a send-only join: %s", strerror(errno));
	e = ev_expect(ch, RDMA_CM_EVENT_MULTICAST_JOIN, 5000);
	ah2 = ibv_create_ah(id->pd, &e->param.ud.ah_attr);
	CHECK(ah2, "ibv_create_ah (send-only)");
	rdma_ack_cm_event(e);
	mc_dgram(id, NULL, ah2, &g2, buf, mr, 0x5b);
	/* left: nothing comes (a list renewed after 1 s, and the ring's check) */
	CHECK(!rdma_leave_multicast(id, (struct sockaddr *)&grp), "rdma_leave_multicast: %s", strerror(errno));
	CHECK(rdma_leave_multicast(id, (struct sockaddr *)&grp) && errno == EADDRNOTAVAIL,
	      "leaving a group not joined: want EADDRNOTAVAIL, got %s", strerror(errno));
	mc_dgram(id, NULL, ah, &g, buf, mr, 0x5c);
	CHECK(!rdma_leave_multicast(id, (struct sockaddr *)&grp2), "leaving a send-only group: %s",
	      strerror(errno));
	ibv_destroy_ah(ah);
	ibv_destroy_ah(ah2);
	ibv_dereg_mr(mr);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	printf("local: multicast: a join's event and AH, a datagram to the group at its member, "
	       "send-only joins and leaving (nothing arrives), the join's errors\n");
}

/* ================================================================= XRC */

struct xinfo {
	uint32_t magic;
	uint32_t srqn;
	uint32_t rkey;
	uint32_t pad;
	uint64_t addr;
};

#define XLEN 3000   /* the first SEND's bytes */
#define XWOFF 5000  /* where the WRITE lands in the server's buffer */
#define XWLEN 100

static uint8_t xbyte(size_t k, unsigned salt)
{
	return (uint8_t)(k * 31 + salt);
}

/* h-xserver ADDR PORT: what rdma_xserver does, checked. Listener A (PORT)
 * is rdma_create_ep's XRC_RECV kind, on a PD of ours: an RC request must
 * never reach it; its XRC connection's id keeps that PD and gets an XRC SRQ
 * on it from rdma_create_srq, two RECVs and an MR of it the peer WRITEs
 * into, all checked. Listener B (PORT+1) is an RC one with a QP: an XRC
 * request must never reach it; an RC one is taken. */
static int h_xserver(const char *addr, int port)
{
	struct rdma_addrinfo h, *ra, *rb;
	struct rdma_cm_id *la, *lb, *id;
	struct ibv_qp_init_attr qa;
	struct ibv_srq_init_attr sa;
	struct ibv_context **dl = rdma_get_devices(NULL);
	struct ibv_pd *pd = dl && dl[0] ? ibv_alloc_pd(dl[0]) : NULL;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	struct rdma_conn_param cp;
	struct xinfo xi;
	uint8_t *buf;
	char svc[16];
	int fds;

	who = "rdmacm_check h-xserver";
	CHECK(pd, "a PD of roshm0: %s", strerror(errno));
	memset(&h, 0, sizeof(h));
	h.ai_flags = RAI_PASSIVE;
	h.ai_port_space = RDMA_PS_IB;
	h.ai_qp_type = IBV_QPT_XRC_RECV;
	snprintf(svc, sizeof(svc), "%d", port);
	CHECK(!rdma_getaddrinfo(addr, svc, &h, &ra), "rdma_getaddrinfo");
	h.ai_port_space = RDMA_PS_TCP;
	h.ai_qp_type = IBV_QPT_RC;
	snprintf(svc, sizeof(svc), "%d", port + 1);
	CHECK(!rdma_getaddrinfo(addr, svc, &h, &rb), "rdma_getaddrinfo");
	memset(&qa, 0, sizeof(qa));
	qa.cap.max_recv_wr = 4;
	qa.cap.max_recv_sge = 1;
	CHECK(!rdma_create_ep(&la, ra, pd, &qa), "rdma_create_ep (XRC_RECV): %s", strerror(errno));
	CHECK(la->qp_type == IBV_QPT_XRC_RECV, "XRC listener's qp_type %d", la->qp_type);

	qa.cap.max_send_wr = 4;
	qa.cap.max_send_sge = 1;
	CHECK(!rdma_create_ep(&lb, rb, NULL, &qa), "rdma_create_ep (RC): %s", strerror(errno));
	CHECK(!rdma_listen(la, 4) && !rdma_listen(lb, 4), "rdma_listen: %s", strerror(errno));

	/* A: the RC request is refused unseen; the XRC one comes */
	CHECK(!rdma_get_request(la, &id), "rdma_get_request (XRC): %s", strerror(errno));
	CHECK(id->qp_type == IBV_QPT_XRC_RECV && id->qp && id->qp->qp_type == IBV_QPT_XRC_RECV &&
	      id->pd == pd, "the request's id: qp_type %d, QP %p of type %d, PD %p (ours %p)",
	      id->qp_type, (void *)id->qp, id->qp ? (int)id->qp->qp_type : -1, (void *)id->pd,
	      (void *)pd);
	CHECK(id->event && id->event->param.conn.qp_num, "CONNECT_REQUEST without the peer's QPN");
	/* the QP again, as an application may make its own before it accepts:
	 * the SRQ first, then (its CQ and channel stay, what a failed
	 * rdma_create_qp made goes) a QP beyond the device's limits, then a
	 * good one, on the id's PD (ours) */
	rdma_destroy_qp(id);
	CHECK(!id->qp && !id->recv_cq && !id->recv_cq_channel, "rdma_destroy_qp left its CQ");
	fds = count_fds();
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 4;
	sa.attr.max_sge = 1;
	CHECK(!rdma_create_srq(id, NULL, &sa), "rdma_create_srq (XRC): %s", strerror(errno));
	CHECK(id->srq && id->recv_cq && id->srq->pd == pd && count_fds() > fds,
	      "no SRQ, no CQ and channel for it, or not on our PD");
	fds = count_fds();
	qa = (struct ibv_qp_init_attr){ .qp_type = IBV_QPT_XRC_RECV,
					.cap = { .max_send_wr = 1u << 30, .max_send_sge = 1,
						 .max_recv_wr = 4, .max_recv_sge = 1 } };
	CHECK(rdma_create_qp(id, NULL, &qa) && !id->qp && !id->send_cq && id->recv_cq &&
	      count_fds() == fds, "a failed rdma_create_qp: qp %p send_cq %p recv_cq %p, fds %d then %d",
	      (void *)id->qp, (void *)id->send_cq, (void *)id->recv_cq, fds, count_fds());
	qa.cap.max_send_wr = 0;
	qa.cap.max_send_sge = 0;
	CHECK(!rdma_create_qp(id, NULL, &qa) && id->qp && id->qp->qp_type == IBV_QPT_XRC_RECV &&
	      id->pd == pd, "rdma_create_qp (XRC_RECV): %s", strerror(errno));
	CHECK(!ibv_get_srq_num(id->srq, &xi.srqn), "ibv_get_srq_num: %s", strerror(errno));
	buf = calloc(1, 8192);
	mr = buf ? ibv_reg_mr(id->pd, buf, 8192, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) : NULL;
	CHECK(mr, "ibv_reg_mr: %s", strerror(errno));
	CHECK(!rdma_post_recv(id, (void *)1, buf, 4000, mr) &&
	      !rdma_post_recv(id, (void *)2, buf + 4000, 16, mr), "rdma_post_recv: %s", strerror(errno));
	xi.magic = MAGIC;
	xi.rkey = mr->rkey;
	xi.addr = (uintptr_t)buf;
	xi.pad = 0;
	memset(&cp, 0, sizeof(cp));
	cp.private_data = &xi;
	cp.private_data_len = sizeof(xi);
	CHECK(!rdma_accept(id, &cp), "rdma_accept: %s", strerror(errno));
	CHECK(rc_state(id->qp) == IBV_QPS_RTS, "accepted XRC_RECV QP in state %d", rc_state(id->qp));
	for (int k = 1; k <= 2; k++) {
		CHECK(rdma_get_recv_comp(id, &wc) == 1, "rdma_get_recv_comp: %s", strerror(errno));
		CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV && wc.wr_id == (uint64_t)k &&
		      wc.qp_num == id->qp->qp_num && wc.byte_len == (k == 1 ? XLEN : 16),
		      "RECV %d: status %d opcode %d wr_id %" PRIu64 " qp_num %06x (QP %06x) len %u", k,
		      wc.status, wc.opcode, wc.wr_id, wc.qp_num, id->qp->qp_num, wc.byte_len);
	}
	for (size_t k = 0; k < XLEN; k++)
		CHECK(buf[k] == xbyte(k, 1), "SEND byte %zu: %u", k, buf[k]);
	for (size_t k = 0; k < XWLEN; k++)
		CHECK(buf[XWOFF + k] == xbyte(k, 2), "WRITE byte %zu: %u", k, buf[XWOFF + k]);
	CHECK(!memcmp(buf + 4000, "xrc, the fence..", 16), "the second SEND's bytes");
	CHECK(!rdma_disconnect(id), "rdma_disconnect: %s", strerror(errno));
	rdma_dereg_mr(mr);
	free(buf);
	rdma_destroy_ep(id);   /* QP, XRC SRQ and its CQ, id */

	/* B: the XRC request is refused unseen; the RC one comes */
	CHECK(!rdma_get_request(lb, &id), "rdma_get_request (RC): %s", strerror(errno));
	CHECK(id->qp_type == IBV_QPT_RC && id->qp && id->qp->qp_type == IBV_QPT_RC,
	      "RC listener's request: qp_type %d", id->qp_type);
	CHECK(!rdma_accept(id, NULL), "rdma_accept (RC): %s", strerror(errno));
	CHECK(!rdma_disconnect(id), "rdma_disconnect: %s", strerror(errno));
	rdma_destroy_ep(id);
	rdma_destroy_ep(la);
	rdma_destroy_ep(lb);
	rdma_freeaddrinfo(ra);
	rdma_freeaddrinfo(rb);
	CHECK(!ibv_dealloc_pd(pd), "our PD: %s", strerror(errno));
	rdma_free_devices(dl);
	return 0;
}

/* An id of @ps with an RC or XRC_SEND QP connects to 127.0.0.1:@port
 * (again while nobody listens): the first answer that is not "nobody
 * listens" is returned with the id. */
static struct rdma_cm_event *x_connect(struct rdma_event_channel *ch, int port, bool xrc,
				       struct rdma_cm_id **out)
{
	for (int tries = 0;; tries++) {
		struct rdma_cm_id *id = resolve_ps(ch, "127.0.0.1", port, RDMA_PS_IB);
		struct ibv_qp_init_attr a;
		struct rdma_cm_event *e;

		if (xrc) {
			memset(&a, 0, sizeof(a));
			a.qp_type = IBV_QPT_XRC_SEND;
			a.cap.max_send_wr = 8;
			a.cap.max_send_sge = 1;
			a.sq_sig_all = 1;
			CHECK(!rdma_create_qp(id, NULL, &a), "rdma_create_qp (XRC_SEND): %s", strerror(errno));
			CHECK(id->qp_type == IBV_QPT_XRC_SEND && id->qp->qp_type == IBV_QPT_XRC_SEND &&
			      id->send_cq && !id->recv_cq, "XRC_SEND id: qp_type %d, CQs %p %p", id->qp_type,
			      (void *)id->send_cq, (void *)id->recv_cq);
		} else {
			cm_qp(id);
		}
		CHECK(!rdma_connect(id, NULL), "rdma_connect: %s", strerror(errno));
		e = ev_next(ch, 20000);
		CHECK(e, "no answer to a connect");
		if (e->event != RDMA_CM_EVENT_REJECTED || e->status != 8) {
			*out = id;
			return e;
		}
		CHECK(tries < 100, "nobody listens on %d", port);
		rdma_ack_cm_event(e);
		rdma_destroy_qp(id);
		rdma_destroy_id(id);
		usleep(100000);
	}
}

static void x_post(struct rdma_cm_id *id, enum ibv_wr_opcode op, void *b, uint32_t len,
		   struct ibv_mr *mr, uint32_t srqn, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)b, .length = len, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = op, .sg_list = &sge, .num_sge = 1, .opcode = op }, *bad;
	struct ibv_wc wc;

	wr.qp_type.xrc.remote_srqn = srqn;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	CHECK(!ibv_post_send(id->qp, &wr, &bad), "ibv_post_send: %s", strerror(errno));
	CHECK(rdma_get_send_comp(id, &wc) == 1 && wc.status == IBV_WC_SUCCESS,
	      "opcode %d over XRC: status %d", op, wc.status);
}

/* A raw peer answers our XRC REQ with an RC REP, and our RC REQ with an
 * XRC_RECV REP: neither connects. */
static void xrc_hostile(struct rdma_event_channel *ch, int port)
{
	int lfd = raw_listener(port);

	for (int xrc = 0; xrc < 2; xrc++) {
		struct rdma_cm_id *id = resolve_ps(ch, "127.0.0.1", port, RDMA_PS_IB);
		struct ibv_qp_init_attr a = { .qp_type = IBV_QPT_XRC_SEND,
					      .cap = { .max_send_wr = 1, .max_send_sge = 1 } };
		struct rc_msg m;
		struct rdma_cm_event *e;
		uint8_t b[RC_WIRE_MAX];
		int c, n;

		if (xrc)
			CHECK(!rdma_create_qp(id, NULL, &a), "rdma_create_qp: %s", strerror(errno));
		else
			cm_qp(id);
		CHECK(!rdma_connect(id, NULL), "rdma_connect: %s", strerror(errno));
		c = accept(lfd, NULL, NULL);
		CHECK(c >= 0, "accept");
		m = accept_req(ch, c);
		CHECK(m.type == RC_MSG_REQ && m.qp_type == (xrc ? RC_WIRE_QPT_XRC_SEND : RC_WIRE_QPT_RC),
		      "REQ of an %s QP names QP type %u", xrc ? "XRC_SEND" : "RC", m.qp_type);
		m = conn_msg(RC_MSG_REP, 0x42);
		m.qp_type = xrc ? RC_WIRE_QPT_RC : RC_WIRE_QPT_XRC_RECV;
		n = frame(&m, b);
		CHECK(send(c, b, (size_t)n, 0) == n, "send");
		e = ev_expect(ch, RDMA_CM_EVENT_CONNECT_ERROR, 5000);
		CHECK(e->status == -EPROTO, "REP of the other kind: status %d", e->status);
		rdma_ack_cm_event(e);
		CHECK(rc_state(id->qp) == IBV_QPS_ERR, "QP not in error after a REP of the other kind");
		close(c);
		rdma_destroy_qp(id);
		rdma_destroy_id(id);
	}
	close(lfd);
}

/* The CQs librdmacm makes for an id, through failures and sharing (the
 * second XRC review): what a failed rdma_create_qp made is gone and the
 * caller's attributes do not name it; a CQ the application named twice
 * goes once with its channel; a CQ still busy at rdma_destroy_qp stays on
 * the id and goes with rdma_destroy_ep, which leaves alone the CQs an
 * application put on an id without queues. On resolved ids of @ch to
 * @port. */
static void cm_cqs(struct rdma_event_channel *ch, int port)
{
	int base = count_fds();
	struct rdma_cm_id *id = resolve_ps(ch, "127.0.0.1", port, RDMA_PS_TCP);
	struct ibv_qp_init_attr a = { .qp_type = IBV_QPT_RC,
				      .cap = { .max_send_wr = 2, .max_send_sge = 1000,
					       .max_recv_wr = 2, .max_recv_sge = 1 } };
	struct ibv_comp_channel *cc;
	struct ibv_cq *own;
	struct ibv_qp *qp2;
	int fds = count_fds();

	CHECK(rdma_create_qp(id, NULL, &a) && !id->qp && !a.send_cq && !a.recv_cq && !id->send_cq &&
	      !id->recv_cq && !id->send_cq_channel && !id->recv_cq_channel && count_fds() == fds,
	      "a failed rdma_create_qp: attr's CQs %p %p, the id's %p %p, fds %d then %d",
	      (void *)a.send_cq, (void *)a.recv_cq, (void *)id->send_cq, (void *)id->recv_cq, fds,
	      count_fds());
	/* one CQ for both, its channel named once */
	cc = ibv_create_comp_channel(id->verbs);
	CHECK(cc, "ibv_create_comp_channel");
	id->recv_cq_channel = cc;
	id->recv_cq = id->send_cq = ibv_create_cq(id->verbs, 8, NULL, cc, 0);
	CHECK(id->recv_cq, "ibv_create_cq");
	a.cap.max_send_sge = 1;
	a.send_cq = a.recv_cq = NULL;
	CHECK(!rdma_create_qp(id, NULL, &a), "rdma_create_qp on the id's one CQ: %s", strerror(errno));
	rdma_destroy_qp(id);
	CHECK(!id->recv_cq && !id->send_cq && !id->recv_cq_channel && count_fds() == fds,
	      "a CQ named twice: CQs %p %p, channel %p, fds %d then %d", (void *)id->recv_cq,
	      (void *)id->send_cq, (void *)id->recv_cq_channel, fds, count_fds());
	/* a CQ still in use at rdma_destroy_qp */
	a.send_cq = a.recv_cq = NULL;
	CHECK(!rdma_create_qp(id, NULL, &a), "rdma_create_qp: %s", strerror(errno));
	a.send_cq = id->send_cq;
	a.recv_cq = id->recv_cq;
	qp2 = ibv_create_qp(id->pd, &a);
	CHECK(qp2, "a QP of ours on the id's CQs: %s", strerror(errno));
	rdma_destroy_qp(id);
	CHECK(id->send_cq && id->recv_cq && id->send_cq_channel && id->recv_cq_channel,
	      "CQs still in use left the id");
	CHECK(!ibv_destroy_qp(qp2), "ibv_destroy_qp");
	rdma_destroy_ep(id);
	CHECK(count_fds() == base, "rdma_destroy_ep left %d descriptors", count_fds() - base);
	/* CQs an application put on an id without queues stay its own */
	id = resolve_ps(ch, "127.0.0.1", port, RDMA_PS_TCP);
	cc = ibv_create_comp_channel(id->verbs);
	CHECK(cc, "ibv_create_comp_channel");
	own = ibv_create_cq(id->verbs, 4, NULL, cc, 0);
	CHECK(own, "ibv_create_cq");
	id->recv_cq = own;
	id->recv_cq_channel = cc;
	rdma_destroy_ep(id);
	CHECK(!ibv_destroy_cq(own) && !ibv_destroy_comp_channel(cc),
	      "the application's CQ on an id without queues went with rdma_destroy_ep");
}

/* XRC through librdmacm (docs/verbs-compat.md "XRC"), against h-xserver
 * on @port and @port+1, a raw peer on @port+2, a listener of ours on
 * @port+3. */
static void xrc_cm(int port, const char *addr)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_event *e;
	struct rdma_cm_id *id;
	struct ibv_qp_init_attr a;
	struct xinfo xi;
	uint32_t srqn, rkey;
	uint64_t raddr;
	struct ibv_mr *mr;
	uint8_t *b;
	char ps[16];
	pid_t p;

	CHECK(ch, "rdma_create_event_channel");
	nonblock(ch);
	cm_cqs(ch, port);
	/* an XRC_SEND QP only on an id that has resolved (not on a bound one,
	 * which may still listen): with a device, so not on loopback */
	if (addr) {
		struct rdma_addrinfo *r = ai(addr, port + 4, true);
		struct ibv_qp_init_attr x = { .qp_type = IBV_QPT_XRC_SEND,
					      .cap = { .max_send_wr = 1, .max_send_sge = 1 } };

		CHECK(!rdma_create_id(ch, &id, NULL, RDMA_PS_IB) && !rdma_bind_addr(id, r->ai_src_addr) &&
		      id->verbs, "an id bound to %s: %s", addr, strerror(errno));
		CHECK(rdma_create_qp(id, NULL, &x) && errno == EINVAL && !id->qp &&
		      id->qp_type == IBV_QPT_RC, "XRC_SEND QP on a bound id: want EINVAL, got %s",
		      strerror(errno));
		cm_qp(id);
		rdma_destroy_qp(id);
		rdma_destroy_id(id);
		rdma_freeaddrinfo(r);
	}
	/* rdma_create_qp refuses XRC_RECV on an id no XRC request made, and
	 * rdma_create_srq an XRC SRQ there */
	id = resolve_ps(ch, "127.0.0.1", port, RDMA_PS_IB);
	memset(&a, 0, sizeof(a));
	a.qp_type = IBV_QPT_XRC_RECV;
	a.cap.max_recv_wr = 1;
	CHECK(rdma_create_qp(id, NULL, &a) && errno == EINVAL && !id->qp,
	      "XRC_RECV QP on an RC id: want EINVAL, got %s", strerror(errno));
	{
		struct ibv_srq_init_attr_ex sx = { .attr = { .max_wr = 1, .max_sge = 1 },
						   .comp_mask = IBV_SRQ_INIT_ATTR_TYPE,
						   .srq_type = IBV_SRQT_XRC };

		CHECK(rdma_create_srq_ex(id, &sx) && errno == EINVAL && !id->srq && !id->recv_cq,
		      "XRC SRQ on an RC id: want EINVAL, got %s", strerror(errno));
	}
	/* an XRC_SEND QP makes the id an XRC_SEND one while it lives */
	a.qp_type = IBV_QPT_XRC_SEND;
	a.cap.max_send_wr = 1;
	a.cap.max_send_sge = 1;
	CHECK(!rdma_create_qp(id, NULL, &a) && id->qp_type == IBV_QPT_XRC_SEND,
	      "XRC_SEND QP on an unconnected RC id: %s", strerror(errno));
	rdma_destroy_qp(id);
	CHECK(id->qp_type == IBV_QPT_RC, "after rdma_destroy_qp the id is of type %d", id->qp_type);
	cm_qp(id);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	/* a listener of rdma_create_id is an RC one: an XRC request is refused
	 * unseen (the listener shares our channel, so waiting drives it) */
	{
		struct rdma_addrinfo *r = ai("127.0.0.1", port + 3, true);
		struct rdma_cm_id *l;

		CHECK(!rdma_create_id(ch, &l, NULL, RDMA_PS_IB) && !rdma_bind_addr(l, r->ai_src_addr) &&
		      !rdma_listen(l, 4), "rdma_create_id listener: %s", strerror(errno));
		e = x_connect(ch, port + 3, true, &id);
		CHECK(e->event == RDMA_CM_EVENT_REJECTED && e->status == 9 && e->id == id,
		      "XRC request to an rdma_create_id listener: %s status %d, want REJECTED 9",
		      estr(e->event), e->status);
		rdma_ack_cm_event(e);
		rdma_destroy_qp(id);
		rdma_destroy_id(id);
		rdma_destroy_id(l);
		rdma_freeaddrinfo(r);
	}

	snprintf(ps, sizeof(ps), "%d", port);
	p = spawn("h-xserver", "127.0.0.1", ps, NULL);
	e = x_connect(ch, port, false, &id);
	CHECK(e->event == RDMA_CM_EVENT_REJECTED && e->status == 9,
	      "RC request to an XRC listener: %s status %d, want REJECTED 9", estr(e->event), e->status);
	rdma_ack_cm_event(e);
	rdma_destroy_qp(id);
	/* XRC_SEND on an RC id that has been connecting: EINVAL */
	memset(&a, 0, sizeof(a));
	a.qp_type = IBV_QPT_XRC_SEND;
	a.cap.max_send_wr = 1;
	a.cap.max_send_sge = 1;
	CHECK(rdma_create_qp(id, NULL, &a) && errno == EINVAL && !id->qp,
	      "XRC_SEND QP on an RC id after its connect: want EINVAL, got %s", strerror(errno));
	rdma_destroy_id(id);

	e = x_connect(ch, port, true, &id);
	CHECK(e->event == RDMA_CM_EVENT_ESTABLISHED, "XRC connect: %s status %d", estr(e->event),
	      e->status);
	CHECK(e->param.conn.private_data_len >= sizeof(xi), "REP's private data: %u bytes",
	      e->param.conn.private_data_len);
	/* private data has no alignment to speak of */
	memcpy(&xi, e->param.conn.private_data, sizeof(xi));
	CHECK(xi.magic == MAGIC, "REP's private data is not the server's");
	srqn = xi.srqn;
	rkey = xi.rkey;
	raddr = xi.addr;
	rdma_ack_cm_event(e);
	CHECK(rc_state(id->qp) == IBV_QPS_RTS, "XRC_SEND QP in state %d", rc_state(id->qp));
	b = malloc(4096);
	mr = b ? ibv_reg_mr(id->pd, b, 4096, IBV_ACCESS_LOCAL_WRITE) : NULL;
	CHECK(mr, "ibv_reg_mr");
	for (size_t k = 0; k < XLEN; k++)
		b[k] = xbyte(k, 1);
	x_post(id, IBV_WR_SEND, b, XLEN, mr, srqn, 0, 0);
	for (size_t k = 0; k < XWLEN; k++)
		b[k] = xbyte(k, 2);
	x_post(id, IBV_WR_RDMA_WRITE, b, XWLEN, mr, 0, raddr + XWOFF, rkey);
	memcpy(b, "xrc, the fence..", 16);
	x_post(id, IBV_WR_SEND, b, 16, mr, srqn, 0, 0);
	rdma_ack_cm_event(ev_expect(ch, RDMA_CM_EVENT_DISCONNECTED, 20000));
	ibv_dereg_mr(mr);
	free(b);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);

	e = x_connect(ch, port + 1, true, &id);
	CHECK(e->event == RDMA_CM_EVENT_REJECTED && e->status == 9,
	      "XRC request to an RC listener: %s status %d, want REJECTED 9", estr(e->event), e->status);
	rdma_ack_cm_event(e);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	e = x_connect(ch, port + 1, false, &id);
	CHECK(e->event == RDMA_CM_EVENT_ESTABLISHED, "RC connect to the RC listener: %s status %d",
	      estr(e->event), e->status);
	rdma_ack_cm_event(e);
	rdma_ack_cm_event(ev_expect(ch, RDMA_CM_EVENT_DISCONNECTED, 20000));
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	reap(p, "h-xserver");

	xrc_hostile(ch, port + 2);
	rdma_destroy_event_channel(ch);
	printf("local: XRC: rdma_create_ep's XRC_RECV listener, rdma_create_srq's XRC SRQ, SENDs and a "
	       "WRITE from an XRC_SEND QP of rdma_create_qp; RC and XRC refused by the other kind; REPs "
	       "of the other kind\n");
}

/*
 * A hostile listener answers a connect with the client's own QPN as its
 * QP's (rdma_accept on an id without a QP, conn_param.qp_num from the
 * CONNECT_REQUEST): the client's QP would be connected to itself and its
 * RDMA to "the server's buffer" land in its own MRs (the GID in the REP
 * is the server's word). The client must refuse the REP: CONNECT_ERROR,
 * not ESTABLISHED (it was ESTABLISHED before the check).
 */
static void loop_rep(int port)
{
	struct rdma_event_channel *L = rdma_create_event_channel(), *C = rdma_create_event_channel();
	struct rdma_addrinfo *r = ai("127.0.0.1", port, true);
	struct rdma_conn_param p = { .responder_resources = 1, .initiator_depth = 1,
				     .retry_count = 7, .rnr_retry_count = 7 };
	struct rdma_cm_id *lid, *id, *sid;
	struct rdma_cm_event *e;

	CHECK(L && C, "rdma_create_event_channel");
	nonblock(L);
	nonblock(C);
	CHECK(!rdma_create_id(L, &lid, NULL, RDMA_PS_TCP) && !rdma_bind_addr(lid, r->ai_src_addr) &&
	      !rdma_listen(lid, 4), "listener: %s", strerror(errno));
	id = resolve(C, "127.0.0.1", port);
	cm_qp(id);
	CHECK(!rdma_connect(id, NULL), "rdma_connect: %s", strerror(errno));
	/* both channels by turns: the client's sends its REQ once the TCP
	 * connect is done */
	for (int k = 0;; k++) {
		CHECK(k < 250, "no CONNECT_REQUEST within 5 s");
		if ((e = ev_next(L, 10)))
			break;
		e = ev_next(C, 10);
		CHECK(!e, "the client got %s before any answer", e ? estr(e->event) : "");
	}
	CHECK(e->event == RDMA_CM_EVENT_CONNECT_REQUEST, "the listener got %s, not CONNECT_REQUEST",
	      estr(e->event));
	sid = e->id;
	CHECK(e->param.conn.qp_num == id->qp->qp_num, "the REQ's QPN %06x, not the client's %06x",
	      e->param.conn.qp_num, id->qp->qp_num);
	p.qp_num = e->param.conn.qp_num;   /* "ours": the client's own */
	rdma_ack_cm_event(e);
	CHECK(!rdma_accept(sid, &p), "rdma_accept: %s", strerror(errno));
	e = ev_next(C, 5000);
	CHECK(e, "the client got no answer to a REP naming its own QP");
	CHECK(e->event == RDMA_CM_EVENT_CONNECT_ERROR,
	      "a REP naming the client's own QP: %s (status %d), not CONNECT_ERROR", estr(e->event),
	      e->status);
	rdma_ack_cm_event(e);
	printf("rdmacm_check local: a REP naming the client's own QP -> CONNECT_ERROR\n");
	/* the server learns of it (a REJ), whatever it says */
	if ((e = ev_next(L, 2000)))
		rdma_ack_cm_event(e);
	rdma_destroy_id(sid);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	rdma_destroy_id(lid);
	rdma_destroy_event_channel(C);
	rdma_destroy_event_channel(L);
	rdma_freeaddrinfo(r);
}

/*
 * A peer on another node (P, node b: plain TCP speaking the CM's wire
 * format) that gives our own GID (node a's) with our own QPNs: V (node a)
 * has a listener on ADDR_A:PORT and an active id X connecting to P at
 * ADDR_B:PORT+1. P learns X's QPN and V's GID from X's REQ, and
 *   1. sends V's listener a REQ naming X's QPN with V's GID: refused unseen
 *      (a REJ to P, no CONNECT_REQUEST at V). Before, V's accept made a QP
 *      Y connected to X whose address vector named V's own port, and P's
 *      REP to X naming Y connected two of V's QPs to each other: X's RDMA
 *      WRITE to "P's buffer" landed in V's own MR; and the same with P's
 *      own GID (then P's REP to X gives V's);
 *   2. sends the same REQ with another GID and a QPN not V's (private data
 *      "ctrl"): it comes to V as a CONNECT_REQUEST, which V accepts with a
 *      QP Z (connected to that QPN); P reads Z's QPN from the REP;
 *   3. answers X's REQ with a REP naming Z with V's GID: X gets
 *      CONNECT_ERROR, not ESTABLISHED (Z is V's, and connected elsewhere).
 * A REQ or REP with V's GID that names no QP of V's (another pod of node a)
 * still connects: check_rdmacm's run of server and client as two pods of
 * node a in different network namespaces.
 *   rdmacm_check gid-v PORT ADDR_A ADDR_B   (node a)
 *   rdmacm_check gid-p PORT ADDR_A ADDR_B   (node b)
 */
static int tcp_to(const char *addr, int port, bool listen_)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	CHECK(fd >= 0 && inet_pton(AF_INET, addr, &a.sin_addr) == 1, "socket or address %s", addr);
	if (listen_) {
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		CHECK(!bind(fd, (struct sockaddr *)&a, sizeof(a)) && !listen(fd, 4), "listen on %s:%d: %s",
		      addr, port, strerror(errno));
		return fd;
	}
	for (int i = 0; connect(fd, (struct sockaddr *)&a, sizeof(a)); i++) {
		CHECK(i < 100, "connect to %s:%d: %s", addr, port, strerror(errno));
		usleep(100000);
	}
	return fd;
}

/* The next CM message on raw socket @fd within 5 s (type 0: the peer closed) */
static struct rc_msg raw_next(int fd)
{
	uint8_t rb[RC_WIRE_MAX];
	struct rc_msg m;
	size_t got = 0;

	memset(&m, 0, sizeof(m));
	for (int n = 0; n <= 0;) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		ssize_t r;

		CHECK(poll(&pf, 1, 5000) == 1, "no answer within 5 s");
		r = recv(fd, rb + got, sizeof(rb) - got, 0);
		if (r <= 0) {
			m.type = 0;
			return m;
		}
		got += (size_t)r;
		n = rc_wire_decode(rb, got, &m);
		CHECK(n >= 0, "an answer that does not decode");
	}
	return m;
}

static int gid_p(int port, const char *addr_a, const char *addr_b)
{
	int lf = tcp_to(addr_b, port + 1, true), xc, vc, n;
	struct rc_msg reqx, m, a;
	uint8_t b[RC_WIRE_MAX + 64];

	who = "gid-p";
	xc = accept(lf, NULL, NULL);
	CHECK(xc >= 0, "accept X");
	reqx = raw_next(xc);
	CHECK(reqx.type == RC_MSG_REQ, "X sent %u, not a REQ", reqx.type);
	/* 1: X's QPN, V's GID */
	vc = tcp_to(addr_a, port, false);
	m = conn_msg(RC_MSG_REQ, reqx.qpn);
	memcpy(m.gid, reqx.gid, 16);
	memcpy(m.pd, "forged", 7);
	m.pd_len = 7;
	n = frame(&m, b);
	CHECK(send(vc, b, (size_t)n, 0) == n, "send the forged REQ");
	a = raw_next(vc);
	printf("gid-p: a REQ with V's own GID from node b: answered %u (REJ is %u)\n", a.type,
	       RC_MSG_REJ);
	CHECK(a.type == RC_MSG_REJ || a.type == 0, "a REQ with V's own GID from node b: answered %u, "
	      "not refused", a.type);
	close(vc);
	/* 1b: X's QPN with another GID (P's): V's QP accepted with it would be
	 * connected to X, and a REP to X naming that QP with V's GID would
	 * connect X to it (a review found it past the first version of the
	 * check, which looked at the GID only) */
	vc = tcp_to(addr_a, port, false);
	m.gid[15] ^= 1;
	memcpy(m.pd, "forge2", 7);
	n = frame(&m, b);
	CHECK(send(vc, b, (size_t)n, 0) == n, "send the forged REQ with P's GID");
	a = raw_next(vc);
	printf("gid-p: a REQ naming X's QPN with another GID: answered %u\n", a.type);
	CHECK(a.type == RC_MSG_REJ || a.type == 0, "a REQ naming X's QPN with another GID: answered "
	      "%u, not refused", a.type);
	close(vc);
	/* 2: another GID, a QPN not V's */
	vc = tcp_to(addr_a, port, false);
	m = conn_msg(RC_MSG_REQ, 0x123456);
	memcpy(m.gid, reqx.gid, 16);
	m.gid[15] ^= 1;
	memcpy(m.pd, "ctrl", 5);
	m.pd_len = 5;
	n = frame(&m, b);
	CHECK(send(vc, b, (size_t)n, 0) == n, "send the control REQ");
	a = raw_next(vc);
	CHECK(a.type == RC_MSG_REP, "the control REQ: answered %u, not V's REP", a.type);
	/* 3: a REP to X naming V's QP Z (a.qpn) with V's GID */
	m = conn_msg(RC_MSG_REP, a.qpn);
	memcpy(m.gid, reqx.gid, 16);
	n = frame(&m, b);
	CHECK(send(xc, b, (size_t)n, 0) == n, "send the REP");
	a = raw_next(xc);
	CHECK(a.type == RC_MSG_REJ || a.type == 0, "a REP with V's own GID: answered %u", a.type);
	close(vc);
	printf("gid-p: ok\n");
	return 0;
}

static int gid_v(int port, const char *addr_a, const char *addr_b)
{
	struct rdma_event_channel *L = rdma_create_event_channel(), *C = rdma_create_event_channel();
	struct rdma_addrinfo *r = ai(addr_a, port, true);
	struct rdma_cm_id *lid, *x, *z = NULL;
	struct rdma_cm_event *e;

	who = "gid-v";
	nonblock(L);
	nonblock(C);
	CHECK(!rdma_create_id(L, &lid, NULL, RDMA_PS_TCP) && !rdma_bind_addr(lid, r->ai_src_addr) &&
	      !rdma_listen(lid, 4), "listener: %s", strerror(errno));
	rdma_freeaddrinfo(r);
	x = resolve(C, addr_b, port + 1);
	cm_qp(x);
	CHECK(!rdma_connect(x, NULL), "rdma_connect: %s", strerror(errno));
	/* both channels driven (X's REQ goes out as C is): the listener's
	 * only request is the control one (2); X's answer is P's REP (3) */
	bool ctrl = false, xdone = false;

	for (uint64_t end = now_ms() + 30000; (!ctrl || !xdone) && now_ms() < end;) {
		if (!ctrl && (e = ev_next(L, 10))) {
			CHECK(e->event == RDMA_CM_EVENT_CONNECT_REQUEST, "listener: %s", estr(e->event));
			CHECK(e->param.conn.private_data_len >= 5 &&
			      !memcmp(e->param.conn.private_data, "ctrl", 5),
			      "a REQ from node b naming our active id's QP came as a CONNECT_REQUEST "
			      "(\"%.6s\")", (const char *)e->param.conn.private_data);
			z = e->id;
			rdma_ack_cm_event(e);
			cm_qp(z);
			CHECK(!rdma_accept(z, &(struct rdma_conn_param){ .responder_resources = 1,
				.initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7 }),
			      "rdma_accept: %s", strerror(errno));
			ctrl = true;
		}
		if ((e = ev_next(C, 10))) {
			printf("gid-v: X after a REP with our own GID from node b: %s (status %d)\n",
			       estr(e->event), e->status);
			CHECK(e->event != RDMA_CM_EVENT_ESTABLISHED, "X ESTABLISHED by a REP with our own "
			      "GID from node b");
			rdma_ack_cm_event(e);
			xdone = true;
		}
	}
	CHECK(ctrl && xdone, "within 30 s: the control request %s, X's answer %s", ctrl ? "came" :
	      "did not come", xdone ? "came" : "did not come");
	printf("gid-v: ok\n");
	return 0;
}

static int local(int port, const char *addr)
{
	who = "rdmacm_check local";
	misc();
	dual_stack(port);
	migrate_establish(port + 1);
	hostile_passive(port + 2);
	hostile_active(port + 3);
	ud_cm(port + 4);
	mcast_cm();
	sync_abort(port + 5);
	xrc_cm(port + 6, addr);
	loop_rep(port + 7);
	printf("rdmacm_check local: ok\n");
	return 0;
}

/* Does roshm0 take a RECV and arm a CQ for an event? (what rping,
 * rdma_client / rdma_server, ucmatose's messages and perftest -R need) */
static int probe(void)
{
	struct ibv_device **dl = ibv_get_device_list(NULL);
	struct ibv_context *ctx = dl && dl[0] ? ibv_open_device(dl[0]) : NULL;
	struct ibv_comp_channel *cc;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_qp_init_attr qa;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_LOCAL_WRITE };
	static uint8_t buf[4096];
	struct ibv_sge sge;
	struct ibv_recv_wr wr, *bad;
	int recv, notify;

	who = "rdmacm_check probe";
	CHECK(ctx, "no roshm0 (ROSHM_SOCK?)");
	pd = ibv_alloc_pd(ctx);
	cc = ibv_create_comp_channel(ctx);
	cq = ibv_create_cq(ctx, 4, NULL, cc, 0);
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 1;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	CHECK(pd && cc && cq && (qp = ibv_create_qp(pd, &qa)), "QP");
	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
	      "INIT");
	mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr, "ibv_reg_mr");
	sge = (struct ibv_sge){ .addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey };
	wr = (struct ibv_recv_wr){ .wr_id = 1, .sg_list = &sge, .num_sge = 1 };
	recv = ibv_post_recv(qp, &wr, &bad);
	notify = ibv_req_notify_cq(cq, 0);
	printf("probe: ibv_post_recv: %s, ibv_req_notify_cq: %s\n", recv ? strerror(recv) : "ok",
	       notify ? strerror(notify) : "ok");
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_destroy_comp_channel(cc);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(dl);
	return recv || notify ? 2 : 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: rdmacm_check server|client ADDR PORT | local PORT [NODE_ADDR] | probe\n");
	exit(2);
}

int main(int argc, char **argv)
{
	self = argv[0];
	alarm(240);   /* a watchdog: nothing here waits forever */
	signal(SIGPIPE, SIG_IGN);   /* a peer that closed shows as EPIPE */
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 4 && !strcmp(argv[1], "server"))
		return server(argv[2], atoi(argv[3]));
	if (argc == 4 && !strcmp(argv[1], "client"))
		return client(argv[2], atoi(argv[3]));
	if ((argc == 3 || argc == 4) && !strcmp(argv[1], "local")) {
		/* before the first CM call: short CM timeouts for the silent peers */
		setenv("ROSHM_CM_TIMEOUT_MS", "1000", 1);
		return local(atoi(argv[2]), argc == 4 ? argv[3] : NULL);
	}
	if (argc == 2 && !strcmp(argv[1], "probe"))
		return probe();
	if (argc == 5 && !strcmp(argv[1], "gid-v"))
		return gid_v(atoi(argv[2]), argv[3], argv[4]);
	if (argc == 5 && !strcmp(argv[1], "gid-p"))
		return gid_p(atoi(argv[2]), argv[3], argv[4]);
	if (argc == 5 && !strcmp(argv[1], "h-passive"))
		return h_passive(argv[2], atoi(argv[3]), argv[4]);
	if (argc == 4 && !strcmp(argv[1], "h-migrate"))
		return h_migrate(argv[2], atoi(argv[3]));
	if (argc == 5 && !strcmp(argv[1], "h-udconnect"))
		return h_udconnect(argv[2], atoi(argv[3]), atoi(argv[4]));
	if (argc == 4 && !strcmp(argv[1], "h-xserver"))
		return h_xserver(argv[2], atoi(argv[3]));
	if (argc == 4 && !strcmp(argv[1], "h-active"))
		return h_active(argv[2], atoi(argv[3]));
	usage();
	return 2;
}
