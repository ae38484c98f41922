// SPDX-License-Identifier: MIT
/*
 * Memory windows through libroshm-verbs (client-lib/verbs/mw.c), between
 * two nodes. The server's MR allows remote READ only (plus MW_BIND); its
 * windows give a peer what the MR does not:
 * - a type 1 window (ibv_bind_mw) over 1000 bytes, remote WRITE and READ:
 *   the client WRITEs and READs them through it; a byte past the window,
 *   an atomic (not allowed) and a WRITE through the MR's own rkey get
 *   IBV_WC_REM_ACCESS_ERR, and the server's bytes around the window and
 *   under the refused WRs do not change;
 * - a type 2 window (IBV_WR_BIND_MW) over a counter, remote atomic: the
 *   client's FETCH_ADD through the QP it was bound on works, through
 *   another QP of the same client connected to the same PD it does not;
 * - after IBV_WR_LOCAL_INV of the type 2 window and an unbind of the type
 *   1 window (length 0), the client's WRs through the old rkeys fail;
 * - a SEND_WITH_INV from the client invalidates a third (type 2) window:
 *   the server's RECV completes with IBV_WC_WITH_INV and the rkey, and the
 *   window can be bound again (a bound type 2 window cannot);
 * - the server's bind errors (IBV_WC_MW_BIND_ERR, the QP in the error
 *   state): an rkey that changes the window's upper 24 bits, bytes past
 *   the MR, an MR without IBV_ACCESS_MW_BIND, remote WRITE over an MR
 *   without LOCAL_WRITE, zero-based access, a bound type 2 window; a
 *   LOCAL_INV of an rkey no window of the QP has (IBV_WC_LOC_PROT_ERR);
 *   ibv_dereg_mr of an MR with a window bound (EBUSY); on one node, the
 *   extended API (ibv_wr_bind_mw, ibv_wr_local_inv) with a WRITE through
 *   the window before and after the invalidation; a SEND_WITH_INV naming
 *   no window fails the receiver's RECV (IBV_WC_LOC_PROT_ERR).
 *   verbs_mw server|client ADDR PORT
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define BUF 16384
#define W1_OFF 100
#define W1_LEN 1000
#define CTR_OFF 8192
#define W3_OFF 4096
#define W3_LEN 512
#define MSG 64

struct info {
	uint64_t buf;
	uint32_t qpn[2];        /* server: qs, qs2; client: c1, c2 */
	uint32_t mr_rkey, mw1, mw2, mw3;
};

static const char *who = "verbs_mw";

static int die(const char *what)
{
	fprintf(stderr, "%s: FAIL: %s\n", who, what);
	exit(1);
}

static void ok(const char *what)
{
	printf("%s: ok: %s\n", who, what);
	fflush(stdout);
}

#include "rc_common.h"

static void expect(struct ibv_cq *cq, uint64_t id, enum ibv_wc_status st, int opcode,
		   const char *what)
{
	struct ibv_wc wc = wait_wc(cq);

	if (wc.wr_id != id || wc.status != st || (opcode >= 0 && (int)wc.opcode != opcode)) {
		fprintf(stderr, "%s: %s: expected wr_id %" PRIu64 " status %s opcode %d, got wr_id %"
			PRIu64 " status %s opcode %d\n", who, what, id, ibv_wc_status_str(st), opcode,
			wc.wr_id, ibv_wc_status_str(wc.status), (int)wc.opcode);
		die(what);
	}
}

static uint8_t pat(uint32_t i, uint32_t seed)
{
	return (uint8_t)(i * 29u + seed * 13u + 7u);
}

static struct ibv_qp *mkqp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr a = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				      .cap = { .max_send_wr = 32, .max_recv_wr = 8,
					       .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *qp = ibv_create_qp(pd, &a);

	if (!qp)
		die("ibv_create_qp");
	return qp;
}

static void post_bind2(struct ibv_qp *qp, struct ibv_mw *mw, uint32_t rkey, struct ibv_mr *mr,
		       uint64_t addr, uint64_t len, unsigned acc, uint64_t id)
{
	struct ibv_send_wr wr = { .wr_id = id, .opcode = IBV_WR_BIND_MW,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = rkey;
	wr.bind_mw.bind_info = (struct ibv_mw_bind_info){ .mr = mr, .addr = addr, .length = len,
							  .mw_access_flags = acc };
	if (ibv_post_send(qp, &wr, &bad))
		die("ibv_post_send (BIND_MW)");
}

static void post_inv(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t rkey, void *l, uint32_t len,
		     uint32_t lkey, uint64_t id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)l, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = { .wr_id = id, .opcode = op, .sg_list = l ? &sge : NULL,
				  .num_sge = l ? 1 : 0, .send_flags = IBV_SEND_SIGNALED,
				  .invalidate_rkey = rkey }, *bad;

	if (ibv_post_send(qp, &wr, &bad))
		die("ibv_post_send (LOCAL_INV / SEND_WITH_INV)");
}

/* The GID of the peer process's node (the out-of-band exchange's). */
static union ibv_gid peer_gid;

static void xfer(int fd, void *p, size_t n, bool out)
{
	if ((out ? write(fd, p, n) : recv(fd, p, n, MSG_WAITALL)) != (ssize_t)n)
		die("exchange");
}

/* --------------------------------------------------------------- server */

struct srv {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	uint8_t *buf;
	struct ibv_mr *mr, *mr_nobind, *mr_nolw;
};

/* A loopback pair of the server's: @*a connected to @*b and back. */
static void pair(struct srv *s, struct ibv_qp **a, struct ibv_qp **b)
{
	*a = mkqp(s->pd, s->cq);
	*b = mkqp(s->pd, s->cq);
	rc_connect(*a, (*b)->qp_num);
	rc_connect(*b, (*a)->qp_num);
}

/* A bind (or invalidation) that must fail: its status, the QP in error. */
static void bind_err(struct srv *s, struct ibv_mw *mw, uint32_t rkey, struct ibv_mr *mr,
		     uint64_t addr, uint64_t len, unsigned acc, const char *what)
{
	struct ibv_qp *a, *b;

	pair(s, &a, &b);
	post_bind2(a, mw, rkey, mr, addr, len, acc, 900);
	expect(s->cq, 900, IBV_WC_MW_BIND_ERR, -1, what);
	if (rc_state(a) != IBV_QPS_ERR)
		die("a failed bind left its QP out of the error state");
	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
}

static void bind_errors(struct srv *s, struct ibv_mw *mw2)
{
	uint64_t base = (uintptr_t)s->buf;
	struct ibv_qp *a, *b;

	bind_err(s, mw2, mw2->rkey ^ 0x100, s->mr, base, 64, IBV_ACCESS_REMOTE_READ,
		 "type 2 bind with other upper 24 bits");
	bind_err(s, mw2, ibv_inc_rkey(mw2->rkey), s->mr, base + BUF - 10, 20, IBV_ACCESS_REMOTE_READ,
		 "bind past the MR's end");
	bind_err(s, mw2, ibv_inc_rkey(mw2->rkey), s->mr_nobind, (uintptr_t)s->mr_nobind->addr, 64,
		 IBV_ACCESS_REMOTE_READ, "bind to an MR without MW_BIND");
	bind_err(s, mw2, ibv_inc_rkey(mw2->rkey), s->mr_nolw, (uintptr_t)s->mr_nolw->addr, 64,
		 IBV_ACCESS_REMOTE_WRITE, "remote WRITE over an MR without LOCAL_WRITE");
	bind_err(s, mw2, ibv_inc_rkey(mw2->rkey), s->mr, base, 64,
		 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_ZERO_BASED, "zero-based window");
	pair(s, &a, &b);
	post_inv(a, IBV_WR_LOCAL_INV, s->mr->rkey, NULL, 0, 0, 901);
	expect(s->cq, 901, IBV_WC_LOC_PROT_ERR, -1, "LOCAL_INV of an MR's rkey");
	if (rc_state(a) != IBV_QPS_ERR)
		die("a failed LOCAL_INV left its QP out of the error state");
	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	ok("bind errors: other upper bits, past the MR, no MW_BIND, WRITE without LOCAL_WRITE, "
	   "zero-based; LOCAL_INV of no window");
}

/* On one node, the extended API: bind a type 2 window with ibv_wr_bind_mw
 * through A, WRITE into it from B (its peer), invalidate it with
 * ibv_wr_local_inv: B's next WRITE through it fails and changes nothing. */
static void ex_api(struct srv *s)
{
	struct ibv_qp_init_attr_ex ia = {
		.send_cq = s->cq, .recv_cq = s->cq, .qp_type = IBV_QPT_RC, .pd = s->pd,
		.cap = { .max_send_wr = 16, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.send_ops_flags = IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV |
				  IBV_QP_EX_WITH_RDMA_WRITE,
	};
	struct ibv_qp *a = ibv_create_qp_ex(s->ctx, &ia), *b;
	struct ibv_qp_ex *ax = a ? ibv_qp_to_qp_ex(a) : NULL;
	struct ibv_mw *mw = ibv_alloc_mw(s->pd, IBV_MW_TYPE_2);
	uint8_t *src = s->buf + 12288, *dst = s->buf + 13000;
	uint32_t rkey;

	if (!ax || !mw)
		die("ibv_create_qp_ex with BIND_MW / ibv_alloc_mw");
	b = mkqp(s->pd, s->cq);
	rc_connect(a, b->qp_num);
	rc_connect(b, a->qp_num);
	rkey = ibv_inc_rkey(mw->rkey);
	ibv_wr_start(ax);
	ax->wr_id = 40;
	ax->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(ax, mw, rkey, &(struct ibv_mw_bind_info){ .mr = s->mr, .addr = (uintptr_t)dst,
			.length = 64, .mw_access_flags = IBV_ACCESS_REMOTE_WRITE });
	if (ibv_wr_complete(ax))
		die("ibv_wr_complete (bind)");
	expect(s->cq, 40, IBV_WC_SUCCESS, IBV_WC_BIND_MW, "ibv_wr_bind_mw");
	if (mw->rkey != rkey)
		die("the type 2 window's rkey is not the bound one");
	for (int i = 0; i < 64; i++)
		src[i] = pat((uint32_t)i, 9);
	memset(dst, 0, 128);
	rc_post(b, IBV_WR_RDMA_WRITE, src, 64, s->mr->lkey, (uintptr_t)dst, rkey, 0, 0, 41);
	expect(s->cq, 41, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, "WRITE through a window (one node)");
	for (int i = 0; i < 64; i++)
		if (dst[i] != pat((uint32_t)i, 9))
			die("WRITE through a window: bytes differ");
	ibv_wr_start(ax);
	ax->wr_id = 42;
	ax->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_local_inv(ax, rkey);
	if (ibv_wr_complete(ax))
		die("ibv_wr_complete (local_inv)");
	expect(s->cq, 42, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV, "ibv_wr_local_inv");
	for (int i = 0; i < 64; i++)
		src[i] = pat((uint32_t)i, 10);
	rc_post(b, IBV_WR_RDMA_WRITE, src, 64, s->mr->lkey, (uintptr_t)dst, rkey, 0, 0, 43);
	expect(s->cq, 43, IBV_WC_REM_ACCESS_ERR, -1, "WRITE through an invalidated window (one node)");
	for (int i = 0; i < 64; i++)
		if (dst[i] != pat((uint32_t)i, 9))
			die("a WRITE through an invalidated window changed bytes");
	ibv_destroy_qp(b);
	ibv_destroy_qp(a);
	if (ibv_dealloc_mw(mw))
		die("ibv_dealloc_mw");
	memset(s->buf + 12288, 0x5a, BUF - 12288);
	ok("extended API on one node: ibv_wr_bind_mw, a WRITE through the window, "
	   "ibv_wr_local_inv, the next WRITE refused (REM_ACCESS_ERR) and nothing changed");
}

static void check_buf(const uint8_t *b, uint64_t ctr, const char *when)
{
	uint64_t v;

	for (uint32_t i = 0; i < BUF; i++) {
		bool in = i >= W1_OFF && i < W1_OFF + W1_LEN;
		uint8_t want = in ? pat(i, 1) : 0x5a;

		if (i >= CTR_OFF && i < CTR_OFF + 8)
			continue;
		if (b[i] != want) {
			fprintf(stderr, "%s: %s: byte %u is 0x%02x, not 0x%02x\n", who, when, i, b[i], want);
			die("the server's bytes are not what the client may have written");
		}
	}
	memcpy(&v, b + CTR_OFF, 8);
	if (v != ctr) {
		fprintf(stderr, "%s: %s: counter %" PRIu64 ", not %" PRIu64 "\n", who, when, v, ctr);
		die("the counter is not what the client's atomics made it");
	}
}

static int server(const char *addr, int port)
{
	int nd, ls, fd, one = 1;
	struct ibv_device **dl = ibv_get_device_list(&nd);
	struct ibv_device_attr da;
	struct srv s = { 0 };
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct ibv_qp *qs, *qs2;
	struct ibv_mw *mw1, *mw2, *mw3;
	struct ibv_mr *rmr;
	struct info me, peer;
	uint32_t old1, old2, rk;
	uint8_t *rb, c;
	uint64_t ctr = 1000;
	struct ibv_wc wc;

	who = "verbs_mw server";
	if (!dl || nd < 1 || !(s.ctx = ibv_open_device(dl[0])))
		die("ibv_open_device");
	if (ibv_query_device(s.ctx, &da) || !(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW) ||
	    !(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) || da.max_mw < 1)
		die("ibv_query_device: no memory windows");
	s.pd = ibv_alloc_pd(s.ctx);
	s.cq = ibv_create_cq(s.ctx, 256, NULL, NULL, 0);
	if (!s.pd || !s.cq || posix_memalign((void **)&s.buf, 4096, BUF) ||
	    posix_memalign((void **)&rb, 4096, 3 * 4096))
		die("setup");
	memset(s.buf, 0x5a, BUF);
	memcpy(s.buf + CTR_OFF, &ctr, 8);
	memset(rb, 0, 3 * 4096);
	/* remote READ only: WRITEs and atomics come through windows */
	s.mr = ibv_reg_mr(s.pd, s.buf, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
					     IBV_ACCESS_MW_BIND);
	s.mr_nobind = ibv_reg_mr(s.pd, rb + 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
	s.mr_nolw = ibv_reg_mr(s.pd, rb + 8192, 4096, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND);
	mw1 = ibv_alloc_mw(s.pd, IBV_MW_TYPE_1);
	mw2 = ibv_alloc_mw(s.pd, IBV_MW_TYPE_2);
	mw3 = ibv_alloc_mw(s.pd, IBV_MW_TYPE_2);
	if (!s.mr || !s.mr_nobind || !s.mr_nolw || !mw1 || !mw2 || !mw3)
		die("ibv_reg_mr / ibv_alloc_mw");
	if (ibv_alloc_mw(s.pd, (enum ibv_mw_type)3) || errno != EINVAL)
		die("ibv_alloc_mw of an unknown type");
	bind_errors(&s, mw2);
	ex_api(&s);
	qs = mkqp(s.pd, s.cq);
	qs2 = mkqp(s.pd, s.cq);

	ls = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	inet_pton(AF_INET, addr, &sa.sin_addr);
	if (bind(ls, (struct sockaddr *)&sa, sizeof(sa)) || listen(ls, 1))
		die("listen");
	fd = accept(ls, NULL, NULL);
	if (fd < 0)
		die("accept");
	xfer(fd, &peer, sizeof(peer), false);
	peer_gid = rc_xchg_gid(fd, s.ctx);
	rc_connect_gid(qs, peer.qpn[0], &peer_gid);
	rc_connect_gid(qs2, peer.qpn[1], &peer_gid);

	/* a type 1 window: WRITE and READ over 1000 bytes */
	old1 = mw1->rkey;
	if (ibv_bind_mw(qs, mw1, &(struct ibv_mw_bind){ .wr_id = 11, .send_flags = IBV_SEND_SIGNALED,
			.bind_info = { .mr = s.mr, .addr = (uintptr_t)s.buf + W1_OFF, .length = W1_LEN,
				       .mw_access_flags = IBV_ACCESS_REMOTE_WRITE |
							  IBV_ACCESS_REMOTE_READ } }))
		die("ibv_bind_mw");
	expect(s.cq, 11, IBV_WC_SUCCESS, IBV_WC_BIND_MW, "ibv_bind_mw (type 1)");
	if (mw1->rkey == old1)
		die("ibv_bind_mw left the window's rkey as it was");
	/* a type 2 window: atomics on the counter, through qs only */
	rk = ibv_inc_rkey(mw2->rkey);
	post_bind2(qs, mw2, rk, s.mr, (uintptr_t)s.buf + CTR_OFF, 8,
		   IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_REMOTE_READ, 12);
	expect(s.cq, 12, IBV_WC_SUCCESS, IBV_WC_BIND_MW, "IBV_WR_BIND_MW (type 2)");
	if (mw2->rkey != rk)
		die("IBV_WR_BIND_MW: the window's rkey is not the bound one");
	/* bound already: a type 2 window is bound again only once free */
	bind_err(&s, mw2, ibv_inc_rkey(rk), s.mr, (uintptr_t)s.buf, 64, IBV_ACCESS_REMOTE_READ,
		 "bind of a bound type 2 window");
	if (ibv_dereg_mr(s.mr) != EBUSY)
		die("ibv_dereg_mr of an MR with windows bound is not EBUSY");
	ok("type 1 window bound (ibv_bind_mw), type 2 bound (IBV_WR_BIND_MW); a bound type 2 "
	   "window refused; dereg of their MR EBUSY");
	me = (struct info){ .buf = (uintptr_t)s.buf, .qpn = { qs->qp_num, qs2->qp_num },
			    .mr_rkey = s.mr->rkey, .mw1 = mw1->rkey, .mw2 = mw2->rkey };
	xfer(fd, &me, sizeof(me), true);

	/* the client's WRs through them (phase 1) */
	xfer(fd, &c, 1, false);
	if (c != 'A')
		die("client phase 1");
	check_buf(s.buf, ctr + 5, "after phase 1");
	ok("the client's WRITE through the type 1 window landed, its FETCH_ADD through the type 2 "
	   "one counted once, and nothing else changed");

	/* invalidate both, bind a third for SEND_WITH_INV */
	old1 = mw1->rkey;
	old2 = mw2->rkey;
	post_inv(qs, IBV_WR_LOCAL_INV, old2, NULL, 0, 0, 21);
	expect(s.cq, 21, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV, "LOCAL_INV of the type 2 window");
	if (ibv_bind_mw(qs, mw1, &(struct ibv_mw_bind){ .wr_id = 22, .send_flags = IBV_SEND_SIGNALED }))
		die("ibv_bind_mw (unbind)");
	expect(s.cq, 22, IBV_WC_SUCCESS, IBV_WC_BIND_MW, "unbind of the type 1 window");
	rk = ibv_inc_rkey(mw3->rkey);
	post_bind2(qs, mw3, rk, s.mr, (uintptr_t)s.buf + W3_OFF, W3_LEN, IBV_ACCESS_REMOTE_WRITE, 23);
	expect(s.cq, 23, IBV_WC_SUCCESS, IBV_WC_BIND_MW, "IBV_WR_BIND_MW (third window)");
	rmr = ibv_reg_mr(s.pd, rb, 4096, IBV_ACCESS_LOCAL_WRITE);
	{
		struct ibv_sge sg = { (uintptr_t)rb, MSG, 0 };
		struct ibv_recv_wr rw = { .sg_list = &sg, .num_sge = 1 }, *bad;

		if (!rmr)
			die("ibv_reg_mr (receive buffer)");
		sg.lkey = rmr->lkey;
		rw.wr_id = 30;
		if (ibv_post_recv(qs, &rw, &bad))
			die("ibv_post_recv");
		sg.addr = (uintptr_t)rb + 1024;
		rw.wr_id = 31;
		if (ibv_post_recv(qs, &rw, &bad))
			die("ibv_post_recv");
	}
	me.mw1 = old1;
	me.mw2 = old2;
	me.mw3 = rk;
	xfer(fd, &me, sizeof(me), true);

	/* phase 2: the old rkeys refused, then a SEND_WITH_INV of the third */
	wc = wait_wc(s.cq);
	if (wc.wr_id != 30 || wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV ||
	    wc.byte_len != MSG || !(wc.wc_flags & IBV_WC_WITH_INV) || (wc.wc_flags & IBV_WC_WITH_IMM) ||
	    wc.invalidated_rkey != rk) {
		fprintf(stderr, "%s: RECV of SEND_WITH_INV: wr_id %" PRIu64 " status %s opcode %d len %u "
			"flags 0x%x rkey %08x (want %08x)\n", who, wc.wr_id, ibv_wc_status_str(wc.status),
			wc.opcode, wc.byte_len, wc.wc_flags, wc.invalidated_rkey, rk);
		die("the RECV of a SEND_WITH_INV");
	}
	for (uint32_t i = 0; i < MSG; i++)
		if (rb[i] != pat(i, 3))
			die("the SEND_WITH_INV's bytes");
	/* it is free again: a type 2 bind takes it */
	post_bind2(qs, mw3, ibv_inc_rkey(rk), s.mr, (uintptr_t)s.buf + W3_OFF, W3_LEN,
		   IBV_ACCESS_REMOTE_WRITE, 24);
	expect(s.cq, 24, IBV_WC_SUCCESS, IBV_WC_BIND_MW, "bind of the window SEND_WITH_INV freed");
	ok("SEND_WITH_INV: the RECV has IBV_WC_WITH_INV and the rkey; the window is free again");
	xfer(fd, &c, 1, false);
	if (c != 'B')
		die("client phase 2");
	check_buf(s.buf, ctr + 5, "after phase 2");
	ok("WRs through the invalidated and the unbound window changed nothing");
	/* a SEND_WITH_INV naming no window of ours: the RECV fails */
	c = 'C';
	xfer(fd, &c, 1, true);
	wc = wait_wc(s.cq);
	if (wc.wr_id != 31 || wc.status != IBV_WC_LOC_PROT_ERR)
		die("a SEND_WITH_INV naming no window did not fail the RECV with LOC_PROT_ERR");
	if (rc_state(qs) != IBV_QPS_ERR)
		die("a bad SEND_WITH_INV left the receiver's QP out of the error state");
	ok("a SEND_WITH_INV naming no window fails the RECV (LOC_PROT_ERR), the QP in error");
	xfer(fd, &c, 1, false);
	ibv_destroy_qp(qs);
	ibv_destroy_qp(qs2);
	if (ibv_dealloc_mw(mw1) || ibv_dealloc_mw(mw2) || ibv_dealloc_mw(mw3))
		die("ibv_dealloc_mw");
	if (ibv_dereg_mr(s.mr))
		die("ibv_dereg_mr once no window is bound");
	if (ibv_dereg_mr(rmr) || ibv_dereg_mr(s.mr_nobind) || ibv_dereg_mr(s.mr_nolw) ||
	    ibv_destroy_cq(s.cq) || ibv_dealloc_pd(s.pd) || ibv_close_device(s.ctx))
		die("release");
	ibv_free_device_list(dl);
	free(s.buf);
	free(rb);
	close(fd);
	close(ls);
	printf("verbs_mw server: ok\n");
	return 0;
}

/* --------------------------------------------------------------- client */

/* A WR that must fail with REM_ACCESS_ERR; then @qp is connected again. */
static void refused(struct ibv_qp *qp, struct ibv_cq *cq, uint32_t dest, enum ibv_wr_opcode op,
		    void *l, uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey, const char *what)
{
	rc_post(qp, op, l, len, lkey, raddr, rkey, 1, 0, 77);
	expect(cq, 77, IBV_WC_REM_ACCESS_ERR, -1, what);
	rc_connect_gid(qp, dest, &peer_gid);
}

/*
 * A WR through an rkey the server invalidated must fail. The owner's node
 * takes its grants back at once; our node learns it at its next look at the
 * record (docs/verbs-compat.md), so a WR may still pass meanwhile: tries
 * for 5 s, each one writing what is there already (the bytes may not
 * change), and says how many passed.
 */
static void refused_soon(struct ibv_qp *qp, struct ibv_cq *cq, uint32_t dest, enum ibv_wr_opcode op,
			 void *l, uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey,
			 const char *what)
{
	time_t t0 = time(NULL);
	int passed = 0;

	for (;;) {
		struct ibv_wc wc;

		rc_post(qp, op, l, len, lkey, raddr, rkey, 0, 0, 78);
		wc = wait_wc(cq);
		if (wc.wr_id != 78)
			die("unexpected completion");
		if (wc.status == IBV_WC_REM_ACCESS_ERR)
			break;
		if (wc.status != IBV_WC_SUCCESS || time(NULL) - t0 > 5)
			die(what);
		passed++;
		usleep(10000);
	}
	rc_connect_gid(qp, dest, &peer_gid);
	printf("%s: ok: %s: refused (%d passed before)\n", who, what, passed);
}

static int client(const char *addr, int port)
{
	int nd, fd = -1;
	struct ibv_device **dl = ibv_get_device_list(&nd);
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *c1, *c2;
	struct ibv_mr *lm;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct info me = { 0 }, s;
	uint8_t *l, c;
	uint64_t v;
	struct ibv_wc wc;

	who = "verbs_mw client";
	if (!dl || nd < 1 || !(ctx = ibv_open_device(dl[0])))
		die("ibv_open_device");
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	if (!pd || !cq || posix_memalign((void **)&l, 4096, 8192))
		die("setup");
	memset(l, 0, 8192);
	lm = ibv_reg_mr(pd, l, 8192, IBV_ACCESS_LOCAL_WRITE);
	if (!lm)
		die("ibv_reg_mr");
	c1 = mkqp(pd, cq);
	c2 = mkqp(pd, cq);
	inet_pton(AF_INET, addr, &sa.sin_addr);
	for (int i = 0; i < 100; i++) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (!connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
			break;
		close(fd);
		fd = -1;
		usleep(100000);
	}
	if (fd < 0)
		die("connect to the server");
	me.qpn[0] = c1->qp_num;
	me.qpn[1] = c2->qp_num;
	xfer(fd, &me, sizeof(me), true);
	peer_gid = rc_xchg_gid(fd, c1->context);
	xfer(fd, &s, sizeof(s), false);
	rc_connect_gid(c1, s.qpn[0], &peer_gid);
	rc_connect_gid(c2, s.qpn[1], &peer_gid);

	/* phase 1 */
	for (uint32_t i = 0; i < W1_LEN; i++)
		l[i] = pat(W1_OFF + i, 1);
	rc_post(c1, IBV_WR_RDMA_WRITE, l, W1_LEN, lm->lkey, s.buf + W1_OFF, s.mw1, 0, 0, 1);
	expect(cq, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, "WRITE through the type 1 window");
	rc_post(c1, IBV_WR_RDMA_READ, l + 4096, W1_LEN, lm->lkey, s.buf + W1_OFF, s.mw1, 0, 0, 2);
	expect(cq, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, "READ through the type 1 window");
	if (memcmp(l, l + 4096, W1_LEN))
		die("READ through the window: not the bytes written");
	rc_post(c1, IBV_WR_ATOMIC_FETCH_AND_ADD, l + 2048, 8, lm->lkey, s.buf + CTR_OFF, s.mw2, 5, 0, 3);
	expect(cq, 3, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD, "FETCH_ADD through the type 2 window");
	memcpy(&v, l + 2048, 8);
	if (v != 1000)
		die("FETCH_ADD through the window: not the counter's value");
	rc_post(c1, IBV_WR_RDMA_READ, l + 2048, 8, lm->lkey, s.buf + CTR_OFF, s.mr_rkey, 0, 0, 4);
	expect(cq, 4, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, "READ through the MR");
	memcpy(&v, l + 2048, 8);
	if (v != 1005)
		die("READ through the MR: the counter is not 1005");
	printf("%s: ok: WRITE and READ through the type 1 window, FETCH_ADD through the type 2 "
	       "window, READ through the MR\n", who);
	refused(c2, cq, s.qpn[1], IBV_WR_ATOMIC_FETCH_AND_ADD, l + 2048, 8, lm->lkey, s.buf + CTR_OFF,
		s.mw2, "FETCH_ADD through the type 2 window over another QP");
	refused(c1, cq, s.qpn[0], IBV_WR_RDMA_WRITE, l + 3000, 8, lm->lkey, s.buf + W1_OFF, s.mr_rkey,
		"WRITE through an MR that allows READ only");
	refused(c1, cq, s.qpn[0], IBV_WR_RDMA_WRITE, l + 3000, 8, lm->lkey, s.buf + W1_OFF + W1_LEN - 4,
		s.mw1, "WRITE past the type 1 window");
	refused(c1, cq, s.qpn[0], IBV_WR_ATOMIC_FETCH_AND_ADD, l + 2048, 8, lm->lkey, s.buf + 104,
		s.mw1, "FETCH_ADD through the type 1 window (no REMOTE_ATOMIC)");
	refused(c1, cq, s.qpn[0], IBV_WR_RDMA_READ, l + 3000, 8, lm->lkey, s.buf + CTR_OFF - 8,
		s.mw2, "READ past the type 2 window");
	printf("%s: ok: another QP, the MR's rkey for WRITE, past a window, an operation a window "
	       "does not allow: REM_ACCESS_ERR\n", who);
	c = 'A';
	xfer(fd, &c, 1, true);

	/* phase 2: the old rkeys die; a SEND_WITH_INV frees the third */
	xfer(fd, &s, sizeof(s), false);
	for (uint32_t i = 0; i < W1_LEN; i++)
		l[i] = pat(W1_OFF + i, 1);   /* what is there: a WR that still passes changes nothing */
	refused_soon(c1, cq, s.qpn[0], IBV_WR_RDMA_WRITE, l, W1_LEN, lm->lkey, s.buf + W1_OFF, s.mw1,
		     "WRITE through the unbound type 1 window");
	refused_soon(c1, cq, s.qpn[0], IBV_WR_RDMA_READ, l + 4096, 8, lm->lkey, s.buf + CTR_OFF, s.mw2,
		     "READ through the invalidated type 2 window");
	for (uint32_t i = 0; i < MSG; i++)
		l[i] = pat(i, 3);
	post_inv(c1, IBV_WR_SEND_WITH_INV, s.mw3, l, MSG, lm->lkey, 5);
	expect(cq, 5, IBV_WC_SUCCESS, IBV_WC_SEND, "SEND_WITH_INV");
	c = 'B';
	xfer(fd, &c, 1, true);
	xfer(fd, &c, 1, false);
	post_inv(c1, IBV_WR_SEND_WITH_INV, s.mr_rkey, l, MSG, lm->lkey, 6);
	wc = wait_wc(cq);
	if (wc.wr_id != 6)
		die("SEND_WITH_INV naming no window: no completion");
	c = 'D';
	xfer(fd, &c, 1, true);
	ibv_destroy_qp(c1);
	ibv_destroy_qp(c2);
	if (ibv_dereg_mr(lm) || ibv_destroy_cq(cq) || ibv_dealloc_pd(pd) || ibv_close_device(ctx))
		die("release");
	ibv_free_device_list(dl);
	free(l);
	close(fd);
	printf("verbs_mw client: ok\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 4)
		return fprintf(stderr, "usage: verbs_mw server|client ADDR PORT\n"), 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(argv[1], "server"))
		return server(argv[2], atoi(argv[3]));
	if (!strcmp(argv[1], "client"))
		return client(argv[2], atoi(argv[3]));
	return 2;
}
