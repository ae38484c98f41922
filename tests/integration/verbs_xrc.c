// SPDX-License-Identifier: MIT
/*
 * XRC through libroshm-verbs (client-lib/verbs/xrc.c), between two nodes.
 * The server has an XRC domain X with two XRC SRQs (S1 on CQ1, S2 on CQ2,
 * both on PD1), a second domain Y with SRQ S3, and two XRC_RECV QPs of X
 * (T1, T2). The client's XRC_SEND QPs I1 -> T1 and I2 -> T2:
 * - SENDs name S1 or S2 (ibv_post_send's remote_srqn, and the extended
 *   API's ibv_wr_set_xrc_srqn): each RECV completes on its SRQ's CQ with
 *   T1's QPN and I1's as the source, the bytes as sent (4000 B, a 200 KB
 *   message in many fragments, an immediate);
 * - WRITE, READ, FETCH_ADD and CMP_AND_SWP on an MR of PD1 (the SRQs' PD)
 *   land and answer right;
 * - a WRITE to an MR of PD2 (no SRQ of X is on it) gets
 *   IBV_WC_REM_ACCESS_ERR and changes nothing;
 * - a SEND through I2 naming S3 (another domain's SRQ) takes no RECV of S3
 *   (nothing on CQ3) and puts T2 in the error state (IBV_EVENT_QP_REQ_ERR);
 * - on the server: opens of one file share a domain (O_EXCL: EEXIST), a
 *   domain with SRQs and a CQ of an SRQ cannot go (EBUSY), everything is
 *   released in order;
 * - S4 is destroyed while T3 holds a RECV of it (I3's 200 KB SEND, which
 *   T3's 64 KiB ring takes in parts): it goes (a peer cannot keep it), the
 *   RECV completes with IBV_WC_WR_FLUSH_ERR on S4's CQ, T3 goes to the
 *   error state and I3's SEND fails;
 * - ibv_dealloc_pd of a PD with an MR or SRQ: EBUSY; ibv_create_qp leaves
 *   the caller's CQs in its attributes.
 *   verbs_xrc server|client ADDR PORT
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define BUF (256u * 1024)
#define FOLLOW (52u * 4096)   /* in r1: the RECV for the SEND after S4's destroy */
#define BIG 200000u
#define CTR_OFF 8192u   /* in the server's PD1 buffer */
#define WR_OFF 4096u    /* a WRITE's bytes go here */

static const char *who = "verbs_xrc";

static int die(const char *what)
{
	fprintf(stderr, "%s: %s (errno %d)\n", who, what, errno);
	exit(1);
}

#include "rc_common.h"

struct info {
	uint64_t buf1, buf2;
	uint32_t qpn[3];        /* server: T1, T2, T3; client: I1, I2, I3 */
	uint32_t srqn[4];       /* S1, S2, S3, S4 */
	uint32_t rkey1, rkey2;
};

static uint8_t pat(uint32_t i, uint32_t seed)
{
	return (uint8_t)(i * 31u + seed * 7u + (i >> 8));
}

static void fill(uint8_t *p, uint32_t n, uint32_t seed)
{
	for (uint32_t i = 0; i < n; i++)
		p[i] = pat(i, seed);
}

static void check(const uint8_t *p, uint32_t n, uint32_t seed, const char *what)
{
	for (uint32_t i = 0; i < n; i++)
		if (p[i] != pat(i, seed)) {
			fprintf(stderr, "%s: %s: byte %u is %#x, want %#x\n", who, what, i, p[i],
				pat(i, seed));
			exit(1);
		}
}

static void sync_byte(int fd, char send_c, char want)
{
	char c;

	if (write(fd, &send_c, 1) != 1 || read(fd, &c, 1) != 1 || c != want)
		die("out-of-band sync");
}

static int oob(bool server, const char *addr, int port)
{
	int s = socket(AF_INET, SOCK_STREAM, 0), fd = rc_oob_connect(server, s, addr, port);

	if (server)
		close(s);
	return fd;
}

static struct ibv_context *open_dev(void)
{
	struct ibv_device **dl = ibv_get_device_list(NULL);
	struct ibv_context *ctx;

	if (!dl || !dl[0] || strcmp(ibv_get_device_name(dl[0]), "roshm0"))
		die("device roshm0 not listed");
	ctx = ibv_open_device(dl[0]);
	ibv_free_device_list(dl);
	if (!ctx)
		die("ibv_open_device");
	return ctx;
}

/* INIT, RTR to @dest at @gid, and for an XRC_SEND QP RTS (RNR retried for
 * good). */
static void xrc_connect(struct ibv_qp *qp, uint32_t dest, const union ibv_gid *gid)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
						    IBV_ACCESS_REMOTE_ATOMIC };

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("modify_qp INIT");
	a.qp_state = IBV_QPS_RTR;
	a.dest_qp_num = dest;
	a.min_rnr_timer = 1;
	a.path_mtu = IBV_MTU_4096;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.hop_limit = 64;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_DEST_QPN | IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MTU |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_AV))
		die("modify_qp RTR");
	if (qp->qp_type != IBV_QPT_XRC_SEND)
		return;
	a.qp_state = IBV_QPS_RTS;
	a.rnr_retry = 7;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			  IBV_QP_RETRY_CNT | IBV_QP_MAX_QP_RD_ATOMIC))
		die("modify_qp RTS");
}

static struct ibv_srq *xsrq(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_xrcd *x,
			    struct ibv_cq *cq)
{
	struct ibv_srq_init_attr_ex a = {
		.attr = { .max_wr = 8, .max_sge = 2 },
		.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ |
			     IBV_SRQ_INIT_ATTR_PD,
		.srq_type = IBV_SRQT_XRC, .pd = pd, .xrcd = x, .cq = cq,
	};
	struct ibv_srq *s = ibv_create_srq_ex(ctx, &a);

	if (!s)
		die("ibv_create_srq_ex (XRC)");
	return s;
}

static void srq_recv(struct ibv_srq *s, uint64_t id, uint8_t *p, uint32_t len, uint32_t lkey)
{
	/* two SGEs: the scatter crosses them */
	struct ibv_sge sg[2] = { { (uintptr_t)p, 1000, lkey }, { (uintptr_t)p + 1000, len - 1000, lkey } };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = sg, .num_sge = 2 }, *bad;

	if (ibv_post_srq_recv(s, &wr, &bad))
		die("ibv_post_srq_recv");
}

static void expect_recv(struct ibv_cq *cq, uint64_t id, uint32_t len, uint32_t qpn, uint32_t src,
			const char *what)
{
	struct ibv_wc wc = wait_wc(cq);

	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != id || wc.opcode != IBV_WC_RECV ||
	    wc.byte_len != len || wc.qp_num != qpn || wc.src_qp != src) {
		fprintf(stderr, "%s: %s: status %d wr_id %" PRIu64 " opcode %d len %u qp %#x src %#x, "
			"want wr_id %" PRIu64 " len %u qp %#x src %#x\n", who, what, wc.status, wc.wr_id,
			wc.opcode, wc.byte_len, wc.qp_num, wc.src_qp, id, len, qpn, src);
		exit(1);
	}
}

static int server(const char *addr, int port)
{
	struct ibv_context *ctx = open_dev();
	struct ibv_pd *pd1 = ibv_alloc_pd(ctx), *pd2 = ibv_alloc_pd(ctx);
	struct ibv_cq *cq1 = ibv_create_cq(ctx, 16, NULL, NULL, 0), *cq2 = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_cq *cq3 = ibv_create_cq(ctx, 16, NULL, NULL, 0), *cq4 = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	uint8_t *b1 = aligned_alloc(4096, BUF), *b2 = aligned_alloc(4096, 4096);
	uint8_t *r1 = aligned_alloc(4096, BUF), *r2 = aligned_alloc(4096, 4096), *r3 = aligned_alloc(4096, 4096);
	const int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			IBV_ACCESS_REMOTE_ATOMIC;
	struct ibv_mr *m1, *m2, *mr1, *mr2, *mr3;
	char tmpl[] = "/tmp/verbs_xrc.XXXXXX", tmpl2[] = "/run/verbs_xrc.XXXXXX";
	char *path = tmpl;
	int ffd = mkstemp(tmpl);   /* a file for the domain ... */
	struct ibv_xrcd_init_attr xa = { .comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
					 .oflags = O_CREAT };
	struct ibv_xrcd *x, *x_again, *y;
	struct ibv_srq *s1, *s2, *s3, *s4;
	struct ibv_qp *t[3];
	struct ibv_qp_init_attr_ex qa;
	struct info me, peer;
	union ibv_gid pgid;
	struct ibv_async_event ev;
	uint32_t n;
	int fd;

	if (ffd < 0)   /* ... in /run where /tmp is read-only (the Soft-RoCE VMs) */
		ffd = mkstemp(path = tmpl2);
	if (!pd1 || !pd2 || !cq1 || !cq2 || !cq3 || !cq4 || !b1 || !b2 || !r1 || !r2 || !r3 || ffd < 0)
		die("pd, cq, buffer or file");
	unlink(path);
	xa.fd = ffd;
	memset(b1, 0, BUF);
	memset(b2, 0x5a, 4096);
	m1 = ibv_reg_mr(pd1, b1, BUF, acc);
	m2 = ibv_reg_mr(pd2, b2, 4096, acc);
	mr1 = ibv_reg_mr(pd1, r1, BUF, IBV_ACCESS_LOCAL_WRITE);
	mr2 = ibv_reg_mr(pd1, r2, 4096, IBV_ACCESS_LOCAL_WRITE);
	mr3 = ibv_reg_mr(pd1, r3, 4096, IBV_ACCESS_LOCAL_WRITE);
	if (!m1 || !m2 || !mr1 || !mr2 || !mr3)
		die("ibv_reg_mr");
	/* domains: one file, one domain; O_EXCL on it: EEXIST; fd -1: a new one */
	x = ibv_open_xrcd(ctx, &xa);
	x_again = ibv_open_xrcd(ctx, &xa);
	if (!x || x_again != x)
		die("ibv_open_xrcd: two opens of one file, one domain");
	xa.oflags = O_CREAT | O_EXCL;
	if (ibv_open_xrcd(ctx, &xa) || errno != EEXIST)
		die("ibv_open_xrcd O_EXCL on an open domain's file: not EEXIST");
	if (ibv_close_xrcd(x_again))
		die("ibv_close_xrcd of the second open");
	xa.fd = -1;
	xa.oflags = O_CREAT;
	y = ibv_open_xrcd(ctx, &xa);
	if (!y || y == x)
		die("ibv_open_xrcd fd -1: a new domain");
	s1 = xsrq(ctx, pd1, x, cq1);
	s2 = xsrq(ctx, pd1, x, cq2);
	s3 = xsrq(ctx, pd1, y, cq3);
	s4 = xsrq(ctx, pd1, x, cq4);
	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_XRC_RECV;
	qa.comp_mask = IBV_QP_INIT_ATTR_XRCD;
	qa.xrcd = x;
	t[0] = ibv_create_qp_ex(ctx, &qa);
	t[1] = ibv_create_qp_ex(ctx, &qa);
	t[2] = ibv_create_qp_ex(ctx, &qa);
	if (!t[0] || !t[1] || !t[2] || t[0]->pd || t[0]->recv_cq || t[0]->send_cq)
		die("ibv_create_qp_ex XRC_RECV");
	memset(&me, 0, sizeof(me));
	me.buf1 = (uintptr_t)b1;
	me.buf2 = (uintptr_t)b2;
	me.qpn[0] = t[0]->qp_num;
	me.qpn[1] = t[1]->qp_num;
	me.qpn[2] = t[2]->qp_num;
	if (ibv_get_srq_num(s1, &me.srqn[0]) || ibv_get_srq_num(s2, &me.srqn[1]) ||
	    ibv_get_srq_num(s3, &me.srqn[2]) || ibv_get_srq_num(s4, &me.srqn[3]))
		die("ibv_get_srq_num");
	if (me.srqn[0] == me.srqn[1] || me.srqn[0] == me.srqn[2] || me.srqn[1] == me.srqn[2])
		die("ibv_get_srq_num: two SRQs with one number");
	me.rkey1 = m1->rkey;
	me.rkey2 = m2->rkey;
	srq_recv(s1, 1, r1, 4000, mr1->lkey);
	srq_recv(s1, 3, r1 + 8192, BIG, mr1->lkey);
	srq_recv(s2, 2, r2, 4096, mr2->lkey);
	srq_recv(s3, 9, r3, 4096, mr3->lkey);
	/* S4: two RECVs, armed at 2: the event says T3 took one */
	srq_recv(s4, 10, r1 + 8192, BIG, mr1->lkey);
	srq_recv(s4, 11, r1 + 8192, BIG, mr1->lkey);
	{
		struct ibv_srq_attr sa = { .srq_limit = 2 };

		if (ibv_modify_srq(s4, &sa, IBV_SRQ_LIMIT))
			die("ibv_modify_srq limit");
	}
	fd = oob(true, addr, port);
	if (write(fd, &me, sizeof(me)) != sizeof(me) || read(fd, &peer, sizeof(peer)) != sizeof(peer))
		die("exchange");
	pgid = rc_xchg_gid(fd, ctx);
	xrc_connect(t[0], peer.qpn[0], &pgid);
	xrc_connect(t[1], peer.qpn[1], &pgid);
	xrc_connect(t[2], peer.qpn[2], &pgid);
	sync_byte(fd, 'c', 'c');   /* all connected */

	/* the SENDs: on the CQ of the SRQ each named */
	expect_recv(cq1, 1, 4000, t[0]->qp_num, peer.qpn[0], "SEND to S1");
	check(r1, 4000, 1, "SEND to S1");
	{
		struct ibv_wc wc = wait_wc(cq2);

		if (wc.status != IBV_WC_SUCCESS || wc.wr_id != 2 || wc.byte_len != 3000 ||
		    !(wc.wc_flags & IBV_WC_WITH_IMM) || ntohl(wc.imm_data) != 0xabcd ||
		    wc.qp_num != t[0]->qp_num)
			die("SEND_WITH_IMM to S2 (extended API): wrong completion");
		check(r2, 3000, 2, "SEND_WITH_IMM to S2");
	}
	expect_recv(cq1, 3, BIG, t[0]->qp_num, peer.qpn[0], "200 KB SEND to S1");
	check(r1 + 8192, BIG, 3, "200 KB SEND to S1");
	printf("%s server: SENDs naming S1 and S2 completed on their SRQs' CQs with T1's QPN, "
	       "bytes as sent (4000 B, 3000 B with an immediate, 200000 B)\n", who);
	sync_byte(fd, 's', 'r');   /* the client's one-sided WRs are done */
	check(b1 + WR_OFF, 1000, 4, "WRITE to PD1's MR");
	if (*(uint64_t *)(void *)(b1 + CTR_OFF) != 1000 + 5 + 77)
		die("FETCH_ADD and CMP_AND_SWP on PD1's MR: wrong counter");
	for (uint32_t i = 0; i < 4096; i++)
		if (b2[i] != 0x5a)
			die("a WRITE to PD2's MR (no SRQ of the domain on PD2) changed it");
	printf("%s server: WRITE, READ, FETCH_ADD, CMP_AND_SWP on PD1's MR landed; PD2's MR "
	       "(no SRQ of the domain on it) unchanged\n", who);
	sync_byte(fd, 'h', 'H');   /* the client sent to S3 through T2 */
	{
		struct ibv_wc wc;
		time_t t0 = time(NULL);
		bool err = false;

		while (!err && time(NULL) - t0 < 10) {
			if (ibv_poll_cq(cq3, 1, &wc) || ibv_poll_cq(cq1, 1, &wc) || ibv_poll_cq(cq2, 1, &wc))
				die("a SEND naming another domain's SRQ completed a RECV");
			err = rc_state(t[1]) == IBV_QPS_ERR;
			usleep(10000);
		}
		if (!err)
			die("T2 did not go to the error state after a SEND naming another domain's SRQ");
		if (ibv_get_async_event(ctx, &ev))
			die("ibv_get_async_event");
		if (ev.event_type != IBV_EVENT_QP_REQ_ERR || ev.element.qp != t[1])
			die("not IBV_EVENT_QP_REQ_ERR on T2");
		ibv_ack_async_event(&ev);
		if (ibv_poll_cq(cq3, 1, &wc))
			die("S3's RECV was taken");
	}
	printf("%s server: a SEND naming another domain's SRQ took no RECV and put T2 in the "
	       "error state (IBV_EVENT_QP_REQ_ERR)\n", who);
	sync_byte(fd, 'g', 'G');   /* I3's 200 KB SEND to S4 is posted */
	char whole = 'e';          /* what the RECV S4's destroy held got */
	{
		struct ibv_wc wc;
		time_t t0 = time(NULL);
		bool took = false;
		int r;

		/* deliver (a poll of S4's CQ) until T3 took a RECV of S4 */
		while (!took && time(NULL) - t0 < 20) {
			if (ibv_poll_cq(cq4, 1, &wc))
				die("the 200 KB SEND through a 64 KiB ring completed at once");
			struct pollfd pf = { .fd = ctx->async_fd, .events = POLLIN };

			if (poll(&pf, 1, 10) == 1) {
				if (ibv_get_async_event(ctx, &ev))
					die("ibv_get_async_event");
				took = ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED && ev.element.srq == s4;
				ibv_ack_async_event(&ev);
			}
		}
		if (!took)
			die("T3 took no RECV of S4");
		r = ibv_destroy_srq(s4);
		if (r)
			die("ibv_destroy_srq of an SRQ whose RECV an XRC_RECV QP holds mid-message: not 0");
		wc = wait_wc(cq4);
		if (wc.wr_id != 10 || wc.qp_num != t[2]->qp_num)
			die("the RECV T3 held did not complete on S4's CQ");
		/* The destroy races the sender's last fragments: the RECV
		 * flushes and T3 fails ('e'); or it has the whole message,
		 * taken at the destroy's second look, after T3's grants went
		 * ('w': T3 fails too), or before the destroy ('W': T3 goes
		 * on). The client checks that its SEND agrees, and that a
		 * SEND after it passes exactly when T3 goes on. */
		if (wc.status == IBV_WC_SUCCESS) {
			if (wc.byte_len != BIG)
				die("the held RECV completed with a part of the message");
			check(r1 + 8192, BIG, 12, "the 200 KB SEND whose SRQ went as it ended");
			whole = rc_state(t[2]) == IBV_QPS_ERR ? 'w' : 'W';
		} else if (wc.status != IBV_WC_WR_FLUSH_ERR) {
			die("the RECV T3 held neither flushed nor completed");
		}
		if (ibv_poll_cq(cq4, 1, &wc))
			die("more than the held RECV completed");
		if (whole == 'e' && rc_state(t[2]) != IBV_QPS_ERR)
			die("T3 is not in the error state");
	}
	printf("%s server: an SRQ whose RECV an XRC_RECV QP held mid-message was destroyed: %s\n",
	       who, whole == 'w' ? "the RECV had the whole message (its last fragments landed "
				   "as the grants went), the QP in the error state"
	       : whole == 'W' ? "the RECV had the whole message before the destroy, the QP goes on"
			      : "the RECV flushed to its CQ, the QP in the error state");
	srq_recv(s1, 20, r1 + FOLLOW, 2000, mr1->lkey);
	sync_byte(fd, whole, 'E');
	sync_byte(fd, 'f', 'F');   /* the client's SEND to S1 through I3 completed */
	if (whole == 'W') {
		expect_recv(cq1, 20, 64, t[2]->qp_num, peer.qpn[2], "the SEND through T3 after S4 went");
		check(r1 + FOLLOW, 64, 13, "the SEND through T3 after S4 went");
	} else {
		struct ibv_wc wc;

		if (ibv_poll_cq(cq1, 1, &wc))
			die("a SEND reached S1 through T3 in the error state");
	}
	/* teardown in order, and what may not go yet */
	if (ibv_close_xrcd(x) != EBUSY || ibv_destroy_cq(cq1) != EBUSY)
		die("a domain with SRQs, or an SRQ's CQ, went");
	if (ibv_dealloc_pd(pd1) != EBUSY || ibv_dealloc_pd(pd2) != EBUSY)
		die("ibv_dealloc_pd of a PD with an SRQ or MR: not EBUSY");
	n = 0;
	n += !ibv_destroy_qp(t[0]) && !ibv_destroy_qp(t[1]) && !ibv_destroy_qp(t[2]);
	n += !ibv_destroy_srq(s1) && !ibv_destroy_srq(s2) && !ibv_destroy_srq(s3);
	n += !ibv_close_xrcd(x) && !ibv_close_xrcd(y);
	n += !ibv_destroy_cq(cq1) && !ibv_destroy_cq(cq2) && !ibv_destroy_cq(cq3) && !ibv_destroy_cq(cq4);
	n += !ibv_dereg_mr(m1) && !ibv_dereg_mr(m2) && !ibv_dereg_mr(mr1) && !ibv_dereg_mr(mr2) &&
	     !ibv_dereg_mr(mr3);
	n += !ibv_dealloc_pd(pd1) && !ibv_dealloc_pd(pd2) && !ibv_close_device(ctx);
	if (n != 6)
		die("release");
	close(ffd);
	close(fd);
	free(b1);
	free(b2);
	free(r1);
	free(r2);
	free(r3);
	printf("%s server: ok\n", who);
	return 0;
}

static void post_xsend(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t srqn, uint8_t *p,
		       uint32_t len, uint32_t lkey, uint64_t id)
{
	struct ibv_sge sg = { (uintptr_t)p, len, lkey };
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = &sg, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	wr.qp_type.xrc.remote_srqn = srqn;
	if (ibv_post_send(qp, &wr, &bad))
		die("ibv_post_send (XRC)");
}

static void expect_ok(struct ibv_cq *cq, uint64_t id, const char *what)
{
	struct ibv_wc wc = wait_wc(cq);

	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != id) {
		fprintf(stderr, "%s: %s: status %d wr_id %" PRIu64 "\n", who, what, wc.status, wc.wr_id);
		exit(1);
	}
}

static int client(const char *addr, int port)
{
	struct ibv_context *ctx = open_dev();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	uint8_t *b = aligned_alloc(4096, BUF);
	struct ibv_mr *m = b && pd ? ibv_reg_mr(pd, b, BUF, IBV_ACCESS_LOCAL_WRITE) : NULL;
	struct ibv_qp_init_attr_ex qa;
	struct ibv_qp *q[3];
	struct ibv_qp_init_attr ia;
	struct ibv_qp_ex *qx;
	struct info me, peer;
	union ibv_gid pgid;
	struct ibv_wc wc;
	int fd;

	if (!cq || !m)
		die("pd, cq or mr");
	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_XRC_SEND;
	qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	qa.pd = pd;
	qa.send_cq = cq;
	qa.cap.max_send_wr = 16;
	qa.cap.max_send_sge = 1;
	qa.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
	q[0] = ibv_create_qp_ex(ctx, &qa);
	qa.comp_mask = IBV_QP_INIT_ATTR_PD;
	q[1] = ibv_create_qp_ex(ctx, &qa);
	/* ibv_create_qp: the caller's CQs stay in its attributes */
	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_XRC_SEND;
	ia.send_cq = ia.recv_cq = cq;
	ia.cap.max_send_wr = 4;
	ia.cap.max_send_sge = 1;
	q[2] = ibv_create_qp(pd, &ia);
	if (!q[2] || ia.recv_cq != cq || ia.send_cq != cq || q[2]->recv_cq)
		die("ibv_create_qp XRC_SEND: the caller's attributes changed");
	if (!q[0] || !q[1] || q[0]->recv_cq || !(qx = ibv_qp_to_qp_ex(q[0])))
		die("ibv_create_qp_ex XRC_SEND");
	memset(&me, 0, sizeof(me));
	me.qpn[0] = q[0]->qp_num;
	me.qpn[1] = q[1]->qp_num;
	me.qpn[2] = q[2]->qp_num;
	fd = oob(false, addr, port);
	if (write(fd, &me, sizeof(me)) != sizeof(me) || read(fd, &peer, sizeof(peer)) != sizeof(peer))
		die("exchange");
	pgid = rc_xchg_gid(fd, ctx);
	xrc_connect(q[0], peer.qpn[0], &pgid);
	xrc_connect(q[1], peer.qpn[1], &pgid);
	xrc_connect(q[2], peer.qpn[2], &pgid);
	sync_byte(fd, 'c', 'c');
	fill(b, 4000, 1);
	post_xsend(q[0], IBV_WR_SEND, peer.srqn[0], b, 4000, m->lkey, 1);
	expect_ok(cq, 1, "SEND to S1");
	/* the extended API: ibv_wr_set_xrc_srqn */
	fill(b + 4096, 3000, 2);
	ibv_wr_start(qx);
	qx->wr_id = 2;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send_imm(qx, htonl(0xabcd));
	ibv_wr_set_xrc_srqn(qx, peer.srqn[1]);
	ibv_wr_set_sge(qx, m->lkey, (uintptr_t)b + 4096, 3000);
	if (ibv_wr_complete(qx))
		die("ibv_wr_complete");
	expect_ok(cq, 2, "SEND_WITH_IMM to S2 (extended API)");
	fill(b + 8192, BIG, 3);
	post_xsend(q[0], IBV_WR_SEND, peer.srqn[0], b + 8192, BIG, m->lkey, 3);
	expect_ok(cq, 3, "200 KB SEND to S1");
	/* one-sided, on the MR of PD1 (the SRQs' PD) */
	fill(b, 1000, 4);
	rc_post(q[0], IBV_WR_RDMA_WRITE, b, 1000, m->lkey, peer.buf1 + WR_OFF, peer.rkey1, 0, 0, 4);
	expect_ok(cq, 4, "WRITE to PD1's MR");
	memset(b + 4096, 0, 1000);
	rc_post(q[0], IBV_WR_RDMA_READ, b + 4096, 1000, m->lkey, peer.buf1 + WR_OFF, peer.rkey1, 0, 0, 5);
	expect_ok(cq, 5, "READ of PD1's MR");
	check(b + 4096, 1000, 4, "READ back what was written");
	rc_post(q[0], IBV_WR_ATOMIC_FETCH_AND_ADD, b, 8, m->lkey, peer.buf1 + CTR_OFF, peer.rkey1, 1000,
		0, 6);
	expect_ok(cq, 6, "FETCH_ADD");
	if (*(uint64_t *)(void *)b != 0)
		die("FETCH_ADD: the old value is not 0");
	rc_post(q[0], IBV_WR_ATOMIC_CMP_AND_SWP, b, 8, m->lkey, peer.buf1 + CTR_OFF, peer.rkey1, 1000,
		1000 + 5 + 77, 7);
	expect_ok(cq, 7, "CMP_AND_SWP");
	if (*(uint64_t *)(void *)b != 1000)
		die("CMP_AND_SWP: the old value is not 1000");
	/* an MR of a PD no SRQ of the domain is on */
	rc_post(q[0], IBV_WR_RDMA_WRITE, b, 64, m->lkey, peer.buf2, peer.rkey2, 0, 0, 8);
	wc = wait_wc(cq);
	if (wc.wr_id != 8 || wc.status != IBV_WC_REM_ACCESS_ERR)
		die("a WRITE to an MR of PD2 did not fail with IBV_WC_REM_ACCESS_ERR");
	printf("%s client: WRITE, READ, FETCH_ADD, CMP_AND_SWP to PD1's MR completed; "
	       "a WRITE to PD2's MR -> REM_ACCESS_ERR\n", who);
	sync_byte(fd, 'r', 's');
	/* another domain's SRQ, through T2 */
	post_xsend(q[1], IBV_WR_SEND, peer.srqn[2], b, 64, m->lkey, 9);
	wc = wait_wc(cq);   /* whatever it says: the server checks its side */
	printf("%s client: a SEND naming another domain's SRQ completed with status %d\n", who,
	       wc.status);
	sync_byte(fd, 'H', 'h');
	/* 200 KB to S4 through I3: the server destroys S4 mid-message */
	fill(b + 8192, BIG, 12);
	post_xsend(q[2], IBV_WR_SEND, peer.srqn[3], b + 8192, BIG, m->lkey, 12);
	sync_byte(fd, 'G', 'g');
	wc = wait_wc(cq);
	{
		char got;

		/* the server's word: its RECV flushed ('e') or had it all ('w') */
		if (write(fd, "E", 1) != 1 || read(fd, &got, 1) != 1 ||
		    (got != 'e' && got != 'w' && got != 'W'))
			die("out-of-band sync");
		if (wc.wr_id != 12 || (got == 'e') != (wc.status != IBV_WC_SUCCESS))
			die(got == 'e' ? "a SEND whose SRQ went mid-message did not fail while the "
					 "server's RECV flushed"
				       : "a SEND the server received whole failed");
		printf("%s client: a SEND whose SRQ was destroyed mid-message %s (status %d)\n", who,
		       got == 'e' ? "failed, its RECV flushed" : "ended first: received whole",
		       wc.status);
		/* the next SEND through I3 (to S1) passes exactly when T3 went on */
		fill(b, 64, 13);
		post_xsend(q[2], IBV_WR_SEND, peer.srqn[0], b, 64, m->lkey, 13);
		wc = wait_wc(cq);
		if (wc.wr_id != 13 || (got == 'W') != (wc.status == IBV_WC_SUCCESS))
			die(got == 'W' ? "a SEND through I3 failed while T3 went on"
				       : "a SEND through I3 passed while T3 was in the error state");
		sync_byte(fd, 'F', 'f');
	}
	if (ibv_destroy_qp(q[0]) || ibv_destroy_qp(q[1]) || ibv_destroy_qp(q[2]) || ibv_dereg_mr(m) || ibv_destroy_cq(cq) ||
	    ibv_dealloc_pd(pd) || ibv_close_device(ctx))
		die("release");
	close(fd);
	free(b);
	printf("%s client: ok\n", who);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 4)
		return fprintf(stderr, "usage: verbs_xrc server|client ADDR PORT\n"), 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(argv[1], "server"))
		return server(argv[2], atoi(argv[3]));
	if (!strcmp(argv[1], "client"))
		return client(argv[2], atoi(argv[3]));
	return 2;
}
