// SPDX-License-Identifier: MIT
/*
 * A verbs program of our own, run through libroshm-verbs beside perftest: the
 * server registers a malloc'd, unaligned buffer; the client, on another node,
 * RDMA WRITEs a pattern into it, READs it back, does FETCH_ADD and CMP_SWAP,
 * then uses a forged rkey (REM_ACCESS_ERR, then the next WR flushes). The
 * server checks its own buffer holds exactly what the client sent. An MR
 * of a second PD of the server, which no QP of the client is connected to,
 * is not reachable with its real rkey (REM_ACCESS_ERR, MR unchanged), nor
 * is a live MR by a pod of the tenant that opens it by its rkey (EACCES).
 * Then two-sided: SEND (gathered, scattered), SEND_WITH_IMM, RDMA
 * WRITE_WITH_IMM, a SEND bigger than the receiver's ring, an inline SEND;
 * the server's RECVs must hold exactly the bytes sent, with the right
 * opcode, byte_len, imm_data, wc_flags and src_qp, the first arriving through
 * a completion channel whose fd poll()s readable. RNR: SENDs to a QP without
 * RECVs fill its ring, the next one gets IBV_WC_RNR_RETRY_EXC_ERR, and the
 * messages that waited arrive intact once RECVs are posted. A SEND to a QP
 * of another tenant fails (IBV_WC_RETRY_EXC_ERR) and reaches nothing.
 * Hostile: a writer of the tenant opens a QP's ring with libroshm and puts
 * fragments there that break the rules: the RECV fails (LOC_QP_OP_ERR, or
 * LOC_LEN_ERR for a message longer than it), the next is flushed, and no
 * byte around the RECV's buffer changes. Loopback: two QPs of the server
 * exchange SENDs, through a non-blocking channel, a reset and reconnect, and
 * the error state's flushes. Overlap: MRs that share pages (server3 below).
 *   verbs_check server|client ADDR PORT
 * The server sets ROSHM_VERBS_RECV_RING=65536 for itself (the RNR and ring
 * sizes below assume it). The tenant check runs when the server's
 * environment has VERBS_CHECK_OTHER=TENANT:TOKEN, a second tenant of its
 * roshmd (check_verbs_perftest.sh sets it and requires that line).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <sys/statfs.h>
#include <linux/magic.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "roshm.h"
#include "rv.h"   /* the ring layout, for the hostile writer */

#define LEN 10000
#define OFF 123
#define PLEN 3000
#define CTR 8192   /* 8-byte aligned offset from an 8-aligned base */

struct info {
	uint64_t addr;
	uint32_t rkey;
	uint32_t qpn;
};

static int die(const char *what)
{
	fprintf(stderr, "verbs_check: FAIL: %s\n", what);
	exit(1);
}

/* A completion that is not the one expected: say what it was. */
static int die_wc(const char *what, const struct ibv_wc *wc)
{
	fprintf(stderr, "verbs_check: FAIL: %s: wr_id %llu, status %s (%d), opcode %d\n", what,
		(unsigned long long)wc->wr_id, ibv_wc_status_str(wc->status), (int)wc->status,
		(int)wc->opcode);
	exit(1);
}

#include "rc_common.h"

/* ------------------------------------------------------------- two-sided */

#define RB 480000          /* the server's receive buffer (H_OFF + 2048 fits) */
#define WOFF 360000        /* where WRITE_WITH_IMM lands in it */
#define RNR_OFF 380000     /* RNR receives, 8192 apart */
#define BIG 300000         /* bigger than the server's 64 KiB ring */
#define RNR_LEN 8000       /* 126 slots: 8 fit a 1024-slot ring, the 9th does not */
#define RNR_FIT 8
#define IMM2 0x12345678u
#define IMM3 0xabcdef01u

struct info2 {
	uint64_t addr;
	uint32_t rkey;
	uint32_t qpn[3];   /* main, RNR, other tenant (client: its three) */
	uint64_t oaddr;    /* the other tenant's MR (remote write, read, atomic) */
	uint32_t orkey, srkey;
	uint64_t saddr;    /* our tenant's MR in a PD none of the peer's QPs is connected to */
};

static uint8_t pat(uint32_t i, uint32_t seed)
{
	return (uint8_t)(i * 31u + seed * 17u + 5u);
}

static void fill(uint8_t *p, uint32_t len, uint32_t from, uint32_t seed)
{
	for (uint32_t i = 0; i < len; i++)
		p[i] = pat(from + i, seed);
}

static void check_bytes(const uint8_t *p, uint32_t len, uint32_t from, uint32_t seed,
			const char *what)
{
	for (uint32_t i = 0; i < len; i++)
		if (p[i] != pat(from + i, seed)) {
			fprintf(stderr, "%s: byte %u: expected 0x%02x, found 0x%02x\n", what,
				from + i, pat(from + i, seed), p[i]);
			die("received bytes differ from the bytes sent");
		}
}

/* Whole pages of its own: no page shared with another MR. */
static uint8_t *pages(size_t len)
{
	void *p = NULL;

	if (posix_memalign(&p, 4096, (len + 4095) & ~(size_t)4095))
		die("posix_memalign");
	return p;
}

static struct ibv_qp *mkqp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
			   uint32_t sw, uint32_t rw, uint32_t rsge)
{
	struct ibv_qp_init_attr a = { .send_cq = scq, .recv_cq = rcq, .qp_type = IBV_QPT_RC,
				      .cap = { .max_send_wr = sw, .max_recv_wr = rw,
					       .max_send_sge = 4, .max_recv_sge = rsge } };
	struct ibv_qp *qp = ibv_create_qp(pd, &a);

	if (!qp)
		die("ibv_create_qp");
	return qp;
}

#define QP_ACC_ALL (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

static void init_qp_acc(struct ibv_qp *qp, int acc)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = acc };

	if (ibv_modify_qp(qp, &a, RC_INIT_MASK))
		die("modify_qp INIT");
}

static void init_qp(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = QP_ACC_ALL };

	if (ibv_modify_qp(qp, &a, RC_INIT_MASK))
		die("modify_qp INIT");
}

/* The GID of the peer process's node (the out-of-band exchange's). */
static union ibv_gid peer_gid;

/* INIT (unless it is there already), RTR to @dest at @gid (NULL: a QP of
 * our own node), RTS */
static void connect_qp_gid(struct ibv_qp *qp, uint32_t dest, const union ibv_gid *gid,
			   uint8_t min_rnr_timer, uint8_t rnr_retry)
{
	struct ibv_qp_attr a = { 0 };

	if (qp->state != IBV_QPS_INIT)
		init_qp(qp);
	a.qp_state = IBV_QPS_RTR;
	if (gid)
		rc_path_gid(&a, dest, gid);
	else
		rc_path(qp, &a, dest);
	a.min_rnr_timer = min_rnr_timer;
	if (ibv_modify_qp(qp, &a, RC_RTR_MASK))
		die("modify_qp RTR");
	a.qp_state = IBV_QPS_RTS;
	a.rnr_retry = rnr_retry;
	if (ibv_modify_qp(qp, &a, RC_RTS_MASK))
		die("modify_qp RTS");
}

/* The same to a QP of our node */
static void connect_qp(struct ibv_qp *qp, uint32_t dest, uint8_t min_rnr_timer, uint8_t rnr_retry)
{
	connect_qp_gid(qp, dest, NULL, min_rnr_timer, rnr_retry);
}

static void post_recv(struct ibv_qp *qp, uint64_t id, uint8_t *a, uint32_t alen, uint8_t *b,
		      uint32_t blen, uint32_t lkey)
{
	struct ibv_sge sg[2] = { { (uintptr_t)a, alen, lkey }, { (uintptr_t)b, blen, lkey } };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = sg, .num_sge = b ? 2 : 1 }, *bad;

	if (ibv_post_recv(qp, &wr, &bad))
		die("ibv_post_recv");
}

static void post2(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t id, struct ibv_sge *sg,
		  int nsge, uint32_t imm, unsigned flags, uint64_t raddr, uint32_t rkey)
{
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = sg, .num_sge = nsge, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED | flags,
				  .imm_data = htonl(imm) }, *bad;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	if (ibv_post_send(qp, &wr, &bad))
		die("ibv_post_send (two-sided)");
}

static void expect_recv(struct ibv_cq *cq, uint64_t id, enum ibv_wc_opcode op, uint32_t len,
			bool imm, uint32_t immv, uint32_t qpn, uint32_t src)
{
	struct ibv_wc wc = wait_wc(cq);

	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != id || wc.opcode != op ||
	    wc.byte_len != len || wc.qp_num != qpn || wc.src_qp != src ||
	    !!(wc.wc_flags & IBV_WC_WITH_IMM) != imm || (imm && wc.imm_data != htonl(immv))) {
		fprintf(stderr, "expected wr_id %" PRIu64 " status 0 opcode %d byte_len %u imm %d/0x%x "
			"qp %u src %u; got wr_id %" PRIu64 " status %d (%s) opcode %d byte_len %u "
			"flags 0x%x imm 0x%x qp %u src %u\n", id, op, len, imm, htonl(immv), qpn, src,
			wc.wr_id, wc.status, ibv_wc_status_str(wc.status), wc.opcode, wc.byte_len,
			wc.wc_flags, wc.imm_data, wc.qp_num, wc.src_qp);
		die_wc("receive completion", &wc);
	}
}

static void sync_byte(int fd, char send_c, char want)
{
	char got;

	if ((send_c && write(fd, &send_c, 1) != 1) || (want && (read(fd, &got, 1) != 1 || got != want)))
		die("exchange");
}

#define H_OFF 470000       /* the hostile cases' RECVs; guard bytes around them */

/* Write one fragment with a valid tag straight into @qpn's ring (no CAS, no
 * library: what the pod at the other end of the QP could do). */
static void hostile_write(struct roshm *r, uint32_t qpn, const struct rv_frag *f, uint32_t pay)
{
	char name[ROSHM_NAME_MAX];
	uint32_t h;
	uint8_t *arena = roshm_arena(r, NULL);
	int ret;

	snprintf(name, sizeof(name), "ibv-qp-%06x", qpn);
	if (roshm_region_open(r, name, &h, NULL))
		die("hostile: roshm_region_open of the ring of a QP connected to us");
	memcpy(arena, f, sizeof(*f));
	fill(arena + RV_SLOT, pay, 0, 77);
	ret = roshm_write_sync(r, h, RV_RING_SLOTS, 0, RV_SLOT + pay);
	if (ret)
		die("hostile: roshm_write_sync");
	roshm_region_close(r, h);
}

/* Open @part of "ibv-mr-<rkey>" as pod @r: 0 with *@h, or the status. */
static int open_mr_part(struct roshm *r, uint32_t rkey, uint64_t off, uint64_t len,
			uint32_t access, uint32_t *h)
{
	char name[ROSHM_NAME_MAX];

	snprintf(name, sizeof(name), "ibv-mr-%08x", rkey);
	return roshm_region_open_part(r, name, &(struct roshm_part){ off, len, access }, h, NULL);
}

static void expect_status(int got, int want, const char *what)
{
	if (got != want) {
		fprintf(stderr, "%s: expected %d, got %d\n", what, want, got);
		die("hostile peer: roshmd did not bound an MR by its bytes and access");
	}
}

/*
 * The pod a QP of ours is connected to, with its own library: roshmd lets
 * it open of our MRs only what a NIC lets an rkey reach (the metadata page
 * to read; the MR's bytes with its IBV_ACCESS_REMOTE_* flags) and bounds
 * every operation by that, whatever it asks. rmr: [rb, rb + RB) with
 * REMOTE_WRITE only, at data offset 4096 of its region (after its metadata
 * page). amr: 512 bytes at sbuf + 1024 in the page smr (another PD, not
 * connected) holds, REMOTE_WRITE.
 */
static void hostile_parts(struct roshm *r, struct ibv_pd *pd, struct ibv_cq *hcq,
			  struct ibv_mr *rmr, uint8_t *rb, struct ibv_mr *smr, struct ibv_mr *amr,
			  uint8_t *sbuf)
{
	const uint32_t R = ROSHM_ACCESS_READ, W = ROSHM_ACCESS_WRITE, A = ROSHM_ACCESS_ATOMIC;
	struct ibv_qp *q = mkqp(pd, hcq, hcq, 1, 1, 1);
	uint8_t *arena = roshm_arena(r, NULL);
	uint32_t hmeta, hw, hsw, hx;
	uint64_t old;
	struct rv_meta m;

	connect_qp(q, 0x123456, 1, 7);   /* we grant the pod our PD's MRs */
	expect_status(open_mr_part(r, rmr->rkey, 0, 0, 0, &hx), -EACCES, "all of an MR's region");
	expect_status(open_mr_part(r, rmr->rkey, 0, 4096, R | W, &hx), -EACCES,
		      "its metadata page to write");
	expect_status(open_mr_part(r, rmr->rkey, 4096, RB, R | W, &hx), -EACCES,
		      "a REMOTE_WRITE MR to read");
	expect_status(open_mr_part(r, rmr->rkey, 4096, RB + 1, W, &hx), -EACCES,
		      "a byte past the MR");
	expect_status(open_mr_part(r, rmr->rkey, 0, 4096, R, &hmeta), 0, "its metadata page");
	expect_status(roshm_read_sync(r, hmeta, 0, 0, sizeof(m)), 0, "reading the metadata");
	memcpy(&m, arena, sizeof(m));
	if (m.addr != (uintptr_t)rb || m.length != RB || m.seg[0].data_off != 4096)
		die("hostile peer: the metadata page is not what the test expects");
	memset(arena, 0x66, 64);
	expect_status(roshm_write_sync(r, hmeta, 0, 0, 8), -EACCES, "a WRITE to the metadata");
	expect_status(open_mr_part(r, rmr->rkey, 4096, RB, W, &hw), 0, "the MR's bytes to write");
	expect_status(roshm_read_sync(r, hw, 4096, 0, 8), -EACCES, "a READ of a REMOTE_WRITE MR");
	expect_status(roshm_fetch_add_sync(r, hw, 4096, 1, &old), -EACCES, "an atomic");
	expect_status(roshm_write_sync(r, hw, 4096 - 8, 0, 8), -EFAULT, "a WRITE before the MR");
	expect_status(roshm_write_sync(r, hw, 4096 + RB - 4, 0, 8), -EFAULT, "a WRITE past it");
	expect_status(roshm_write_sync(r, hw, 0, 0, 8), -EFAULT, "a WRITE over the metadata");
	/* amr's bytes in smr's page: reachable, and nothing else of the page */
	expect_status(open_mr_part(r, amr->rkey, 0, 4096, R, &hx), 0, "amr's metadata page");
	roshm_region_close(r, hx);
	expect_status(open_mr_part(r, smr->rkey, 0, 4096, R, &hx), -EACCES,
		      "the metadata of an MR of a PD with no QP");
	expect_status(open_mr_part(r, smr->rkey, 4096, 4096, W, &hx), -EACCES,
		      "the page of an MR of a PD with no QP");
	expect_status(open_mr_part(r, smr->rkey, 4096 + 1024, 512, W | A, &hx), -EACCES,
		      "an atomic on a REMOTE_WRITE MR");
	expect_status(open_mr_part(r, smr->rkey, 4096 + 1024, 512, W, &hsw), 0,
		      "amr's bytes in smr's page");
	expect_status(roshm_write_sync(r, hsw, 4096 + 1024 + 504, 0, 8), 0, "a WRITE to amr");
	if (memcmp(sbuf + 1024 + 504, arena, 8))
		die("hostile peer: a WRITE to amr's last bytes did not land");
	expect_status(roshm_write_sync(r, hsw, 4096 + 1024 + 508, 0, 8), -EFAULT,
		      "a WRITE past amr into smr's bytes");
	expect_status(roshm_write_sync(r, hsw, 4096, 0, 8), -EFAULT, "a WRITE to smr's bytes");
	memset(sbuf + 1024 + 504, 0xee, 8);
	for (int i = 0; i < 4096; i++)
		if (sbuf[i] != 0xee)
			die("hostile peer: smr's page changed");
	/* the QP goes to the error state: the pod loses it all, as a NIC's
	 * QP in that state answers nothing */
	{
		struct ibv_qp_attr err = { .qp_state = IBV_QPS_ERR };

		if (ibv_modify_qp(q, &err, IBV_QP_STATE))
			die("hostile peer: modify to ERR");
	}
	expect_status(roshm_write_sync(r, hw, 4096, 0, 8), -EBADF, "the MR after the QP's error");
	expect_status(roshm_write_sync(r, hsw, 4096 + 1024, 0, 8), -EBADF,
		      "amr after the QP's error");
	expect_status(roshm_read_sync(r, hmeta, 0, 0, 8), -EBADF, "the metadata after the error");
	expect_status(open_mr_part(r, rmr->rkey, 0, 4096, R, &hx), -EACCES,
		      "the metadata after the error");
	roshm_region_close(r, hw);
	roshm_region_close(r, hsw);
	roshm_region_close(r, hmeta);
	if (ibv_destroy_qp(q))
		die("destroy (hostile peer)");
	/* The QP's qp_access_flags bound the pod too, as a NIC's responder
	 * checks them before any rkey: through a QP that allows reads only,
	 * rmr (REMOTE_WRITE) is not writable; RTS -> RTS with REMOTE_WRITE
	 * grants it, and dropping it again takes it back. */
	{
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS };

		q = mkqp(pd, hcq, hcq, 1, 1, 1);
		init_qp_acc(q, IBV_ACCESS_REMOTE_READ);
		connect_qp(q, 0x123456, 1, 7);
		expect_status(open_mr_part(r, rmr->rkey, 0, 4096, R, &hmeta), 0,
			      "the metadata page through a QP that allows reads only");
		expect_status(open_mr_part(r, rmr->rkey, 4096, RB, W, &hx), -EACCES,
			      "a REMOTE_WRITE MR through a QP without REMOTE_WRITE");
		a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
		if (ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS))
			die("hostile peer: RTS -> RTS with REMOTE_WRITE");
		expect_status(open_mr_part(r, rmr->rkey, 4096, RB, W, &hw), 0,
			      "rmr once the QP allows REMOTE_WRITE");
		memset(arena, 0x5a, 8);
		expect_status(roshm_write_sync(r, hw, 4096, 0, 8), 0, "a WRITE once allowed");
		if (memcmp(rb, arena, 8))
			die("hostile peer: the WRITE allowed by the QP's flags did not land");
		a.qp_access_flags = IBV_ACCESS_REMOTE_READ;
		if (ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS))
			die("hostile peer: RTS -> RTS without REMOTE_WRITE");
		memset(arena, 0xa5, 8);
		expect_status(roshm_write_sync(r, hw, 4096, 0, 8), -EBADF,
			      "a WRITE after the QP dropped REMOTE_WRITE");
		expect_status(open_mr_part(r, rmr->rkey, 4096, RB, W, &hx), -EACCES,
			      "rmr after the QP dropped REMOTE_WRITE");
		if (rb[0] != 0x5a)
			die("hostile peer: a WRITE landed after the QP dropped REMOTE_WRITE");
		roshm_region_close(r, hw);
		roshm_region_close(r, hmeta);
		if (ibv_destroy_qp(q))
			die("destroy (hostile peer, access flags)");
	}
	printf("verbs_check server: the connected peer's own library reaches the metadata page "
	       "(read) and each MR's bytes with its access (amr's too, in a page of another PD's "
	       "MR) and nothing more: the rest -> EACCES / EFAULT; after the QP's error -> EBADF; "
	       "nothing the one QP's qp_access_flags leave out (granted and taken back as they "
	       "change)\n");
}

/* Take (and ack) every async event waiting: did @qp's IBV_EVENT_QP_REQ_ERR come? */
static bool async_req_err(struct ibv_context *ctx, struct ibv_qp *qp)
{
	int fl = fcntl(ctx->async_fd, F_GETFL);
	struct ibv_async_event ev;
	bool got = false;

	if (fl < 0 || fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK))
		die("async fd flags");
	while (!ibv_get_async_event(ctx, &ev)) {
		got |= ev.event_type == IBV_EVENT_QP_REQ_ERR && ev.element.qp == qp;
		ibv_ack_async_event(&ev);
	}
	if (errno != EAGAIN || fcntl(ctx->async_fd, F_SETFL, fl))
		die("ibv_get_async_event (non-blocking)");
	return got;
}

/* Pod @r opens the region named @fmt with @id: it must get -EACCES. */
static void expect_refused(struct roshm *r, const char *fmt, uint32_t id, const char *what)
{
	char name[ROSHM_NAME_MAX];
	uint32_t h;
	int ret;

	snprintf(name, sizeof(name), fmt, id);
	ret = roshm_region_open(r, name, &h, NULL);
	if (ret != -EACCES) {
		fprintf(stderr, "open of %s: %d, not -EACCES\n", name, ret);
		die(what);
	}
}

static void hostile(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_mr *rmr, uint8_t *rb,
		    uint32_t rqpn, struct ibv_mr *smr, struct ibv_mr *amr, uint8_t *sbuf)
{
	struct roshm_params p;
	uint32_t fake_ring;
	struct roshm *r;
	struct ibv_cq *hcq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	int err = 0;
	static const struct { uint32_t nslots, len, total; enum ibv_wc_status want; const char *what; }
	cases[] = {
		{ 5000, 100, 100, IBV_WC_LOC_QP_OP_ERR, "slots beyond the ring" },
		{ 2, 500, 500, IBV_WC_LOC_QP_OP_ERR, "payload beyond its slots" },
		{ 17, 1000, 1000, IBV_WC_LOC_LEN_ERR, "a message longer than its RECV" },
	};

	memset(&p, 0, sizeof(p));
	r = roshm_open(&p, &err);
	if (!r || !hcq)
		die("hostile: roshm_open / cq");
	{
		/* a pod of the tenant that knows (or guesses) a live rkey: the MR
		 * is granted to the owners of the rings our PD's QPs connect to */
		expect_refused(r, "ibv-mr-%08x", rmr->rkey,
			       "hostile: a pod of the tenant opened a live MR by its rkey");
		/* nor a live QP's ring by its QPN */
		expect_refused(r, "ibv-qp-%06x", rqpn,
			       "hostile: a pod of the tenant opened a live QP's ring by its QPN");
		printf("verbs_check server: a pod of the tenant that opens a live MR by its rkey, "
		       "or a live QP's ring by its QPN -> EACCES\n");
		/* From here on the pod is the one the test QPs connect to
		 * (0x123456): it owns that ring name, so they grant it theirs. */
		if (roshm_region_create(r, "ibv-qp-123456", 4096, NULL, &fake_ring))
			die("hostile: the fake peer's ring");
	}
	hostile_parts(r, pd, hcq, rmr, rb, smr, amr, sbuf);
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct ibv_qp *h = mkqp(pd, hcq, hcq, 1, 2, 1);
		struct rv_frag f;
		struct ibv_wc wc;

		connect_qp(h, 0x123456, 1, 7);
		memset(rb + H_OFF - 1024, 0xee, 3072);
		post_recv(h, 1, rb + H_OFF, 256, NULL, 0, rmr->lkey);
		post_recv(h, 2, rb + H_OFF + 512, 256, NULL, 0, rmr->lkey);
		memset(&f, 0, sizeof(f));
		f.tag = 1;   /* slot 0, the one the owner waits for */
		f.nslots = cases[i].nslots;
		f.len = cases[i].len;
		f.total = cases[i].total;
		f.src_qp = 0x123456;
		f.opcode = RV_FRAG_SEND;
		f.flags = RV_FRAG_FIRST | RV_FRAG_LAST;
		hostile_write(r, h->qp_num, &f, cases[i].len);
		wc = wait_wc(hcq);
		if (wc.wr_id != 1 || wc.status != cases[i].want) {
			fprintf(stderr, "hostile fragment (%s): expected %s, got wr_id %" PRIu64 " %s\n",
				cases[i].what, ibv_wc_status_str(cases[i].want), wc.wr_id,
				ibv_wc_status_str(wc.status));
			die("a hostile fragment was not refused");
		}
		/* the poll that failed the QP took its grants back before it
		 * returned: the pod's next fragment, say, has no ring to land
		 * in (it did until the next poll) */
		expect_refused(r, "ibv-qp-%06x", h->qp_num,
			       "a QP failed by a poll still granted its ring after it");
		wc = wait_wc(hcq);
		if (wc.wr_id != 2 || wc.status != IBV_WC_WR_FLUSH_ERR)
			die("the RECV after a hostile fragment was not flushed");
		for (int j = 0; j < 3072; j++)
			if (rb[H_OFF - 1024 + j] != 0xee)
				die("a hostile fragment changed bytes of the receiver");
		/* a fragment that breaks the rules is an invalid request: the
		 * QP's IBV_EVENT_QP_REQ_ERR (a long message is not: its RECV's
		 * error is all); every event taken is acked */
		if (async_req_err(ctx, h) != (cases[i].want == IBV_WC_LOC_QP_OP_ERR))
			die("hostile: IBV_EVENT_QP_REQ_ERR missing, or raised for a long message");
		if (ibv_destroy_qp(h))
			die("destroy (hostile)");
	}
	roshm_region_close(r, fake_ring);
	roshm_close(r);
	if (ibv_destroy_cq(hcq))
		die("destroy cq (hostile)");
	printf("verbs_check server: hostile fragments (slots beyond the ring, payload beyond its "
	       "slots, longer than the RECV) refused, nothing written around the RECVs, "
	       "IBV_EVENT_QP_REQ_ERR for the first two, the ring no longer granted when the "
	       "poll returns\n");
}

/*
 * Two QPs of one process, connected to each other (the local transport):
 * a SEND and its RECV, a non-blocking completion channel (EAGAIN, then
 * readable), both QPs reset and connected again (the ring picks up where it
 * stands), then one moved to the error state (its RECVs and a later SEND
 * are flushed).
 */
/*
 * ibv_query_qp gives back what ibv_modify_qp set, as a NIC's does: a QP
 * taken through INIT, RTR and RTS with every attribute perftest and qperf
 * set (an address vector with a GID, access flags, MTU, timeouts, read
 * depths), then the state, the PSNs and the peer.
 */
static void query_qp_check(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp *qp = mkqp(pd, cq, cq, 4, 4, 1);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .pkey_index = 0,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ };
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr got;

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("query_qp: INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = qp->qp_num;
	a.rq_psn = 0x1234;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.grh.traffic_class = 96;
	a.ah_attr.grh.sgid_index = 0;
	if (ibv_query_gid(pd->context, 1, 0, &a.ah_attr.grh.dgid))
		die("query_qp: ibv_query_gid");
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("query_qp: RTR");
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0x5678;
	a.max_rd_atomic = 4;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("query_qp: RTS");
	memset(&got, 0xff, sizeof(got));
	if (ibv_query_qp(qp, &got, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_ACCESS_FLAGS |
			 IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
			 IBV_QP_RQ_PSN | IBV_QP_DEST_QPN | IBV_QP_MAX_QP_RD_ATOMIC |
			 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER | IBV_QP_PORT, &init))
		die("query_qp: ibv_query_qp");
	if (got.qp_state != IBV_QPS_RTS || got.path_mtu != IBV_MTU_1024 ||
	    got.qp_access_flags != (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ) ||
	    got.timeout != 14 || got.retry_cnt != 7 || got.rnr_retry != 7 || got.sq_psn != 0x5678 ||
	    got.rq_psn != 0x1234 || got.dest_qp_num != qp->qp_num || got.max_rd_atomic != 4 ||
	    got.max_dest_rd_atomic != 4 || got.min_rnr_timer != 12 || got.port_num != 1 ||
	    !got.ah_attr.is_global || got.ah_attr.grh.hop_limit != 64 ||
	    got.ah_attr.grh.traffic_class != 96 ||
	    memcmp(&got.ah_attr.grh.dgid, &a.ah_attr.grh.dgid, sizeof(a.ah_attr.grh.dgid)) ||
	    init.qp_type != IBV_QPT_RC || init.cap.max_send_wr < 4) {
		fprintf(stderr, "state %d mtu %d access %#x timeout %u retry %u rnr %u sq_psn %#x "
			"rq_psn %#x dest %#x rd %u/%u rnr_timer %u port %u global %u hop %u tc %u\n",
			got.qp_state, got.path_mtu, got.qp_access_flags, got.timeout, got.retry_cnt,
			got.rnr_retry, got.sq_psn, got.rq_psn, got.dest_qp_num, got.max_rd_atomic,
			got.max_dest_rd_atomic, got.min_rnr_timer, got.port_num, got.ah_attr.is_global,
			got.ah_attr.grh.hop_limit, got.ah_attr.grh.traffic_class);
		die("query_qp: ibv_query_qp did not give back what ibv_modify_qp set");
	}
	/* roshm0 has one port, MTU 4096: another is refused and changes nothing */
	a.port_num = 2;
	a.path_mtu = 6;
	if (ibv_modify_qp(qp, &a, IBV_QP_PORT) != EINVAL || ibv_modify_qp(qp, &a, IBV_QP_PATH_MTU) != EINVAL ||
	    ibv_query_qp(qp, &got, IBV_QP_PORT | IBV_QP_PATH_MTU, &init) || got.port_num != 1 ||
	    got.path_mtu != IBV_MTU_1024)
		die("query_qp: port 2 or MTU 6 was not refused with EINVAL, or changed the QP");
	/* RESET: nothing of the old connection is reported */
	a.qp_state = IBV_QPS_RESET;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE) || ibv_query_qp(qp, &got, IBV_QP_STATE | IBV_QP_AV, &init) ||
	    got.qp_state != IBV_QPS_RESET || got.qp_access_flags || got.timeout || got.ah_attr.is_global)
		die("query_qp: a QP in RESET still reports its old attributes");
	/* transitions a NIC refuses (the IB spec's table, which the kernel
	 * checks for every device): EINVAL, and the QP stays where it was */
	struct {
		enum ibv_qp_state to;
		int mask;
		const char *what;
	} bad[] = {
		{ IBV_QPS_RTR, RC_RTR_MASK, "RESET -> RTR" },
		{ IBV_QPS_INIT, RC_INIT_MASK & ~IBV_QP_ACCESS_FLAGS, "INIT without access flags" },
		{ IBV_QPS_INIT, RC_INIT_MASK | IBV_QP_SQ_PSN, "INIT with an RTS attribute" },
		{ IBV_QPS_INIT, RC_INIT_MASK, NULL },
		{ IBV_QPS_RTR, RC_RTR_MASK & ~IBV_QP_DEST_QPN, "RTR without a dest QPN" },
		{ IBV_QPS_RTR, RC_RTR_MASK | IBV_QP_TIMEOUT, "RTR with an RTS attribute" },
		{ IBV_QPS_RTS, RC_RTS_MASK, "INIT -> RTS" },
		{ IBV_QPS_RTR, RC_RTR_MASK, NULL },
		{ IBV_QPS_RTR, IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER, "RTR -> RTR" },
		{ IBV_QPS_RTS, RC_RTS_MASK & ~IBV_QP_SQ_PSN, "RTS without an SQ PSN" },
		{ IBV_QPS_RTS, RC_RTS_MASK, NULL },
		{ IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_DEST_QPN, "RTS -> RTS with a new dest QPN" },
		{ IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_MAX_QP_RD_ATOMIC, "RTS -> RTS with read depths" },
		{ IBV_QPS_ERR, IBV_QP_STATE, NULL },
		{ IBV_QPS_RTS, IBV_QP_STATE, "ERR -> RTS" },
		{ IBV_QPS_ERR, IBV_QP_STATE | IBV_QP_QKEY, "ERR with a Q_Key" },
		{ IBV_QPS_RESET, IBV_QP_STATE, NULL },
	};
	memset(&a, 0, sizeof(a));
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	rc_path(qp, &a, qp->qp_num);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		enum ibv_qp_state was = qp->state;
		int ret;

		a.qp_state = bad[i].to;
		ret = ibv_modify_qp(qp, &a, bad[i].mask);
		if ((!bad[i].what && ret) || (bad[i].what && (ret != EINVAL || qp->state != was))) {
			fprintf(stderr, "step %zu (%s): to %d gave %d, state %d (was %d)\n", i,
				bad[i].what ? bad[i].what : "a good transition", bad[i].to, ret,
				qp->state, was);
			die("query_qp: a transition a NIC refuses was taken, or a good one refused");
		}
	}
	/* read depths past the device's (max_qp_rd_atom, max_qp_init_rd_atom) */
	struct ibv_device_attr da;

	if (ibv_query_device(qp->context, &da))
		die("query_qp: ibv_query_device");
	a.qp_state = IBV_QPS_INIT;
	if (ibv_modify_qp(qp, &a, RC_INIT_MASK))
		die("query_qp: INIT again");
	a.qp_state = IBV_QPS_RTR;
	a.max_dest_rd_atomic = (uint8_t)(da.max_qp_rd_atom + 1);
	if (ibv_modify_qp(qp, &a, RC_RTR_MASK) != EINVAL || qp->state != IBV_QPS_INIT)
		die("query_qp: max_dest_rd_atomic past the device's max_qp_rd_atom was not refused");
	a.max_dest_rd_atomic = (uint8_t)da.max_qp_rd_atom;
	if (ibv_modify_qp(qp, &a, RC_RTR_MASK))
		die("query_qp: RTR with the device's read depth");
	a.qp_state = IBV_QPS_RTS;
	a.max_rd_atomic = (uint8_t)(da.max_qp_init_rd_atom + 1);
	if (ibv_modify_qp(qp, &a, RC_RTS_MASK) != EINVAL || qp->state != IBV_QPS_RTR)
		die("query_qp: max_rd_atomic past the device's max_qp_init_rd_atom was not refused");
	if (ibv_destroy_qp(qp))
		die("query_qp: destroy");
}

static void loopback(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_mr *rmr, uint8_t *rb)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *cq = ch ? ibv_create_cq(ctx, 16, NULL, ch, 0) : NULL, *ecq;
	struct ibv_qp *x, *y;
	struct ibv_qp_attr reset = { .qp_state = IBV_QPS_RESET };
	struct ibv_sge sg;
	struct ibv_wc wc;
	uint8_t *src = rb + H_OFF, *dst = rb + H_OFF + 1024;
	void *ectx;

	if (!cq)
		die("loopback: channel/cq");
	x = mkqp(pd, cq, cq, 4, 4, 1);
	y = mkqp(pd, cq, cq, 4, 4, 1);
	for (int round = 0; round < 2; round++) {
		connect_qp(x, y->qp_num, 1, 7);
		connect_qp(y, x->qp_num, 1, 7);
		memset(dst, 0xee, 512);
		fill(src, 300, 0, 50 + round);
		post_recv(y, 10 + round, dst, 512, NULL, 0, rmr->lkey);
		sg = (struct ibv_sge){ (uintptr_t)src, 300, rmr->lkey };
		if (round == 0) {
			if (fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK) ||
			    ibv_get_cq_event(ch, &ecq, &ectx) != -1 || errno != EAGAIN)
				die("loopback: a non-blocking channel without events did not say EAGAIN");
			if (ibv_req_notify_cq(cq, 0))
				die("loopback: ibv_req_notify_cq");
		}
		post2(x, IBV_WR_SEND, 20 + round, &sg, 1, 0, 0, 0, 0);
		if (round == 0) {
			struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };

			if (poll(&pfd, 1, 20000) != 1 || ibv_get_cq_event(ch, &ecq, &ectx) || ecq != cq)
				die("loopback: no event on the non-blocking channel");
			ibv_ack_cq_events(ecq, 1);
		}
		for (int n = 0; n < 2; n++) {   /* the SEND's and the RECV's, in either order */
			wc = wait_wc(cq);
			if (wc.status != IBV_WC_SUCCESS ||
			    (wc.wr_id != (uint64_t)(10 + round) && wc.wr_id != (uint64_t)(20 + round)))
				die_wc("loopback: completion", &wc);
			if (wc.wr_id == (uint64_t)(10 + round) &&
			    (wc.opcode != IBV_WC_RECV || wc.byte_len != 300 || wc.src_qp != x->qp_num))
				die_wc("loopback: RECV completion", &wc);
		}
		check_bytes(dst, 300, 0, 50 + round, "loopback SEND");
		if (dst[300] != 0xee)
			die("loopback: RECV wrote past the message");
		if (ibv_modify_qp(x, &reset, IBV_QP_STATE) || ibv_modify_qp(y, &reset, IBV_QP_STATE))
			die("loopback: modify_qp RESET");
	}
	/* the error state flushes what is posted and what comes */
	struct ibv_qp_attr err = { .qp_state = IBV_QPS_ERR };

	connect_qp(x, y->qp_num, 1, 7);
	post_recv(x, 30, dst, 64, NULL, 0, rmr->lkey);
	if (ibv_modify_qp(x, &err, IBV_QP_STATE))
		die("loopback: modify_qp ERR");
	wc = wait_wc(cq);
	if (wc.wr_id != 30 || wc.status != IBV_WC_WR_FLUSH_ERR)
		die("loopback: a posted RECV was not flushed by the error state");
	post2(x, IBV_WR_SEND, 31, &sg, 1, 0, 0, 0, 0);
	wc = wait_wc(cq);
	if (wc.wr_id != 31 || wc.status != IBV_WC_WR_FLUSH_ERR)
		die("loopback: a SEND on a QP in error was not flushed");
	query_qp_check(pd, cq);
	if (ibv_destroy_qp(x) || ibv_destroy_qp(y) || ibv_destroy_cq(cq) || ibv_destroy_comp_channel(ch))
		die("loopback: release");
	printf("verbs_check server: loopback SEND/RECV, non-blocking channel, reset and reconnect, "
	       "error state flushes; ibv_query_qp gives back what ibv_modify_qp set\n");
}

/* Two QPs on @srq (r), each connected to a sender of its own (snd, @depth WRs). */
static void srq_pairs(struct ibv_pd *pd, struct ibv_cq *cq, struct ibv_srq *srq, uint32_t depth,
		      struct ibv_qp *r[2], struct ibv_qp *snd[2])
{
	struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .srq = srq, .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 4, .max_send_sge = 1 } };

	for (int i = 0; i < 2; i++) {
		if (!(r[i] = ibv_create_qp(pd, &ia)))
			die("srq: ibv_create_qp on an SRQ");
		if (ia.cap.max_recv_wr || ia.cap.max_recv_sge)
			die("srq: a QP on an SRQ reported a receive queue of its own");
		snd[i] = mkqp(pd, cq, cq, depth, 1, 1);
		connect_qp(snd[i], r[i]->qp_num, 1, 7);
		connect_qp(r[i], snd[i]->qp_num, 1, 7);
	}
}

/*
 * A shared receive queue (srq.c) in one process: two senders, each connected
 * to its own receiver QP on one SRQ, send a message at once (150000 bytes:
 * fragments, through 64 KiB rings); each takes one RECV of the SRQ (two
 * SGEs) whole, whatever the other does meanwhile, and completes on its own
 * QP. A receiver in the
 * error state leaves the SRQ's other RECVs to the other QP. Plus the calls
 * that must refuse: ibv_post_recv on an SRQ's QP, destroying a used SRQ,
 * resizing it, a limit above max_wr.
 */
static void srq_check(struct ibv_context *ctx, struct ibv_pd *pd)
{
	const uint32_t len = 150000, half = 1000, bsz = 262144;   /* fragments: the rings hold 64 KiB */
	struct ibv_cq *cq = ibv_create_cq(ctx, 32, NULL, NULL, 0);
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 8, .max_sge = 2 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);
	uint8_t *buf = pages(6 * (size_t)bsz);   /* 2 send buffers, 4 receive buffers */
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 6 * (size_t)bsz, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_qp *r[2], *snd[2];
	struct ibv_qp_attr err = { .qp_state = IBV_QPS_ERR };
	struct ibv_recv_wr rw, *bad;
	struct ibv_srq_attr qa;
	struct ibv_sge sg[2];
	struct ibv_wc wc;
	int got[2] = { 0, 0 }, n;

	if (!cq || !srq || !mr)
		die("srq: cq, srq or mr");
	srq_pairs(pd, cq, srq, 4, r, snd);
	for (int i = 0; i < 2; i++)
		fill(buf + (size_t)i * bsz, len, 0, 70 + i);
	sg[0] = (struct ibv_sge){ (uintptr_t)(buf + 2 * bsz), half, mr->lkey };
	rw = (struct ibv_recv_wr){ .wr_id = 1, .sg_list = sg, .num_sge = 1 };
	if (ibv_post_recv(r[0], &rw, &bad) != EINVAL)
		die("srq: ibv_post_recv on a QP of an SRQ did not fail with EINVAL");
	for (int i = 0; i < 3; i++) {   /* RECVs 100..102: 1000 bytes, then the rest */
		uint8_t *b = buf + (size_t)(2 + i) * bsz;

		memset(b, 0xee, bsz);
		sg[0] = (struct ibv_sge){ (uintptr_t)b, half, mr->lkey };
		sg[1] = (struct ibv_sge){ (uintptr_t)(b + half), bsz - half, mr->lkey };
		rw = (struct ibv_recv_wr){ .wr_id = 100 + (uint64_t)i, .sg_list = sg, .num_sge = 2 };
		if (ibv_post_srq_recv(srq, &rw, &bad))
			die("srq: ibv_post_srq_recv");
	}
	for (int i = 0; i < 2; i++) {
		sg[0] = (struct ibv_sge){ (uintptr_t)(buf + (size_t)i * bsz), len, mr->lkey };
		post2(snd[i], IBV_WR_SEND, 10 + (uint64_t)i, sg, 1, 0, 0, 0, 0);
	}
	for (n = 0; n < 4; n++) {   /* 2 SENDs, 2 RECVs, in any order */
		wc = wait_wc(cq);
		if (wc.status != IBV_WC_SUCCESS)
			die_wc("srq: completion", &wc);
		if (wc.wr_id == 10 || wc.wr_id == 11)
			continue;
		int who = wc.qp_num == r[0]->qp_num ? 0 : wc.qp_num == r[1]->qp_num ? 1 : -1;

		if (wc.wr_id < 100 || wc.wr_id > 101 || who < 0 || got[who] || wc.opcode != IBV_WC_RECV ||
		    wc.byte_len != len || wc.src_qp != snd[who]->qp_num)
			die_wc("srq: RECV completion (wr_id 100 or 101, on the QP its sender is connected to)", &wc);
		got[who] = 1;
		check_bytes(buf + (size_t)(2 + wc.wr_id - 100) * bsz, len, 0, 70 + (uint32_t)who,
			    "srq: a message in an SRQ's RECV");
	}
	if (ibv_query_srq(srq, &qa) || qa.max_wr < 8 || qa.max_sge != 2 || qa.srq_limit)
		die("srq: ibv_query_srq");
	qa.srq_limit = 2;
	if (ibv_modify_srq(srq, &qa, IBV_SRQ_LIMIT) || ibv_query_srq(srq, &qa) || qa.srq_limit != 2)
		die("srq: ibv_modify_srq (limit)");
	qa.srq_limit = 9;
	if (ibv_modify_srq(srq, &qa, IBV_SRQ_LIMIT) != EINVAL)
		die("srq: a limit above max_wr was taken");
	/* a resize keeps the limit and RECV 102, which r[1] takes below */
	qa.max_wr = 16;
	if (ibv_modify_srq(srq, &qa, IBV_SRQ_MAX_WR) || ibv_query_srq(srq, &qa) || qa.max_wr != 16 ||
	    qa.srq_limit != 2)
		die("srq: ibv_modify_srq (max_wr 16)");
	qa.max_wr = 0;
	if (ibv_modify_srq(srq, &qa, IBV_SRQ_MAX_WR) != EINVAL)
		die("srq: a resize to 0 was taken");
	qa.max_wr = 16385;
	if (ibv_modify_srq(srq, &qa, IBV_SRQ_MAX_WR) != EINVAL)
		die("srq: a resize above max_srq_wr was taken");
	if (ibv_destroy_srq(srq) != EBUSY)
		die("srq: an SRQ that QPs use was destroyed");
	/* r[0] in error flushes nothing of the SRQ: RECV 102 goes to r[1] */
	if (ibv_modify_qp(r[0], &err, IBV_QP_STATE))
		die("srq: modify_qp ERR");
	if (ibv_poll_cq(cq, 1, &wc) != 0)
		die_wc("srq: a completion after a QP of the SRQ went to the error state", &wc);
	sg[0] = (struct ibv_sge){ (uintptr_t)(buf + bsz), len, mr->lkey };
	post2(snd[1], IBV_WR_SEND, 12, sg, 1, 0, 0, 0, 0);
	for (n = 0; n < 2; n++) {
		wc = wait_wc(cq);
		if (wc.status != IBV_WC_SUCCESS || (wc.wr_id != 12 && (wc.wr_id != 102 ||
		    wc.qp_num != r[1]->qp_num || wc.byte_len != len)))
			die_wc("srq: the SRQ's last RECV, on the QP still connected", &wc);
	}
	check_bytes(buf + 4 * (size_t)bsz, len, 0, 71, "srq: the message after the other QP's error");
	for (int i = 0; i < 2; i++)
		if (ibv_destroy_qp(r[i]) || ibv_destroy_qp(snd[i]))
			die("srq: destroy_qp");
	if (ibv_destroy_srq(srq) || ibv_dereg_mr(mr) || ibv_destroy_cq(cq))
		die("srq: release");
	free(buf);
	printf("verbs_check server: an SRQ shared by two QPs: two fragmented messages at once, "
	       "each whole in its RECV and on its QP; a QP in error leaves the SRQ's RECVs; "
	       "post_recv, destroy in use, a resize to 0 or above max_srq_wr and a limit above "
	       "max_wr refused; a resize keeps what the SRQ holds\n");
}

/*
 * The rings of QPs on one SRQ (srq.c, rv_srq_ring_wr): what each QP's
 * senders may have in flight, measured as the 8000-byte SENDs (126 slots of
 * 64 bytes with the fragment's header) that land in its ring while the SRQ
 * holds no RECV, before the next one fails with IBV_WC_RNR_RETRY_EXC_ERR
 * (rnr_retry 0). On an SRQ of 64 WRs the first QP's ring is an RC QP's
 * with 64 receive WRs (512 KiB: 65 fit), the second's half of it (32), the
 * third's a quarter (16: 64 / 3 rounded down to a power of two); on an SRQ
 * of 8 WRs the smallest (64 KiB: 8). (Few SENDs: it runs between the
 * Soft-RoCE VMs too.)
 * A ring's end that cannot hold a whole message is skipped, so one fewer
 * may fit. Then RECVs posted on the SRQ take every SEND that waited, in
 * order and intact.
 */
static void srq_ring_check(struct ibv_device *dev)
{
	enum { SR_LEN = 8000, SR_NQ = 4, SR_DEPTH = 64 };
	const uint32_t srq_wr[SR_NQ] = { 64, 64, 64, 8 }, fit[SR_NQ] = { 65, 32, 16, 8 };
	/* a context of its own, with the rings the library sizes (the server's
	 * is opened with ROSHM_VERBS_RECV_RING set) */
	char *env = getenv("ROSHM_VERBS_RECV_RING");
	char *keep = env ? strdup(env) : NULL;
	struct ibv_context *ctx = (unsetenv("ROSHM_VERBS_RECV_RING"), ibv_open_device(dev));
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 256, NULL, NULL, 0) : NULL;
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 64, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);
	struct ibv_srq_init_attr sa8 = { .attr = { .max_wr = 8, .max_sge = 1 } };
	struct ibv_srq *srq8 = ibv_create_srq(pd, &sa8);
	uint8_t *buf = pages(2 * 8192);   /* the message sent, one receive buffer */
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 2 * 8192, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_qp *r[SR_NQ], *snd[SR_NQ];
	struct ibv_sge sg;
	struct ibv_wc wc;

	if (!cq || !srq || !srq8 || !mr)
		die("srq_ring: cq, srq or mr");
	fill(buf, SR_LEN, 0, 90);
	for (int q = 0; q < SR_NQ; q++) {
		struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq,
					       .srq = srq_wr[q] == 8 ? srq8 : srq, .qp_type = IBV_QPT_RC,
					       .cap = { .max_send_wr = 1, .max_send_sge = 1 } };
		uint32_t ok = 0, posted = 0, out = 0;
		bool rnr = false;

		if (!(r[q] = ibv_create_qp(pd, &ia)))
			die("srq_ring: ibv_create_qp on an SRQ");
		snd[q] = mkqp(pd, cq, cq, SR_DEPTH, 1, 1);
		connect_qp(snd[q], r[q]->qp_num, 1, 0);   /* rnr_retry 0: a full ring fails at once */
		connect_qp(r[q], snd[q]->qp_num, 1, 0);
		sg = (struct ibv_sge){ (uintptr_t)buf, SR_LEN, mr->lkey };
		while (!rnr || out) {
			while (!rnr && out < SR_DEPTH && posted < fit[q] + SR_DEPTH) {
				post2(snd[q], IBV_WR_SEND, posted++, &sg, 1, 0, 0, 0, 0);
				out++;
			}
			wc = wait_wc(cq);
			out--;
			if (wc.status == IBV_WC_SUCCESS && !rnr && wc.wr_id == ok)
				ok++;
			else if (wc.status == IBV_WC_RNR_RETRY_EXC_ERR && !rnr && wc.wr_id == ok)
				rnr = true;
			else if (wc.status != IBV_WC_WR_FLUSH_ERR || !rnr)
				die_wc("srq_ring: a SEND into a ring with no RECV (success, then one RNR "
				       "error, then flushes, in order)", &wc);
			if (!rnr && posted >= fit[q] + SR_DEPTH && !out)
				die("srq_ring: more SENDs fit a QP's ring on an SRQ than it should hold");
		}
		printf("verbs_check server: srq_ring: QP %d on an SRQ of %u WRs: %u SENDs of %u bytes "
		       "waited in its ring (%u expected), the next got RNR\n", q, srq_wr[q], ok, SR_LEN, fit[q]);
		if (ok > fit[q] || ok + 1 < fit[q])
			die("srq_ring: a QP on an SRQ got a ring of another size than rv_srq_ring_wr gives");
		/* what waited is delivered whole, in order */
		for (uint32_t i = 0; i < ok; i++) {
			struct ibv_recv_wr rw = { .wr_id = 1000 + i, .sg_list = &sg, .num_sge = 1 }, *bad;

			sg = (struct ibv_sge){ (uintptr_t)(buf + 8192), 8192, mr->lkey };
			memset(buf + 8192, 0xee, 8192);
			if (ibv_post_srq_recv(ia.srq, &rw, &bad))
				die("srq_ring: ibv_post_srq_recv");
			expect_recv(cq, 1000 + i, IBV_WC_RECV, SR_LEN, false, 0, r[q]->qp_num, snd[q]->qp_num);
			check_bytes(buf + 8192, SR_LEN, 0, 90, "srq_ring: a SEND that waited in a ring of an SRQ's QP");
		}
	}
	for (int q = 0; q < SR_NQ; q++)
		if (ibv_destroy_qp(r[q]) || ibv_destroy_qp(snd[q]))
			die("srq_ring: destroy_qp");
	if (ibv_destroy_srq(srq) || ibv_destroy_srq(srq8) || ibv_dereg_mr(mr) || ibv_destroy_cq(cq) ||
	    ibv_dealloc_pd(pd) || ibv_close_device(ctx))
		die("srq_ring: release");
	free(buf);
	if (keep)
		setenv("ROSHM_VERBS_RECV_RING", keep, 1);
	free(keep);
}

/*
 * Two senders that never stop, each to its own QP on one SRQ of 4 RECVs
 * that the receiver posts again as each completes: the RECVs must go to
 * both QPs in turn (a NIC hands them out in arrival order), not all to one
 * while the other's sender waits (RNR). 2000 messages, 16 SENDs of each
 * sender in flight; each QP must get at least a quarter (without the
 * SRQ's line in srq.c: 181-232 against 2006-2059). `verbs_check srq-fair`,
 * a process of its own: run after the server's other checks in one
 * process, both QPs got exactly half even without the line.
 */
static void srq_fair(struct ibv_device *dev)
{
	const uint32_t msg = 4096, total = 2000, depth = 16;
	/* 1 MiB rings: every message of both senders waits in the rings, so
	 * each RECV posted finds both QPs wanting it */
	struct ibv_context *ctx = (setenv("ROSHM_VERBS_RECV_RING", "1048576", 1), ibv_open_device(dev));
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 128, NULL, NULL, 0) : NULL;
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);
	uint8_t *buf = pages(6 * (size_t)msg);   /* 2 send buffers, 4 receive buffers */
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 6 * (size_t)msg, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_qp *r[2], *snd[2];
	uint32_t got[2] = { 0, 0 }, n = 0, out = 0;
	struct ibv_recv_wr rw, *bad;
	struct ibv_wc wcs[32];
	struct ibv_sge sg;
	time_t t0;

	if (!cq || !srq || !mr)
		die("srq_fair: context, cq, srq or mr");
	srq_pairs(pd, cq, srq, depth, r, snd);
	for (uint32_t k = 0; k < depth; k++)
		for (int i = 0; i < 2; i++, out++) {
			sg = (struct ibv_sge){ (uintptr_t)(buf + (size_t)i * msg), msg, mr->lkey };
			post2(snd[i], IBV_WR_SEND, 10 + (uint64_t)i, &sg, 1, 0, 0, 0, 0);
		}
	/* every message in the rings before the first RECV (a SEND completes
	 * once it is in the receiver's ring): then each RECV finds both QPs
	 * with a message, whatever the timing */
	for (uint32_t k = 0; k < 2 * depth; k++) {
		struct ibv_wc wc = wait_wc(cq);

		if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_SEND)
			die_wc("srq_fair: a SEND into the ring", &wc);
	}
	for (uint32_t k = 0; k < depth; k++)   /* and again: the senders stay 16 ahead */
		for (int i = 0; i < 2; i++) {
			sg = (struct ibv_sge){ (uintptr_t)(buf + (size_t)i * msg), msg, mr->lkey };
			post2(snd[i], IBV_WR_SEND, 10 + (uint64_t)i, &sg, 1, 0, 0, 0, 0);
		}
	for (int i = 0; i < 4; i++) {
		sg = (struct ibv_sge){ (uintptr_t)(buf + (size_t)(2 + i) * msg), msg, mr->lkey };
		rw = (struct ibv_recv_wr){ .wr_id = 100 + (uint64_t)i, .sg_list = &sg, .num_sge = 1 };
		if (ibv_post_srq_recv(srq, &rw, &bad))
			die("srq_fair: ibv_post_srq_recv");
	}
	/* past `total` messages the senders stop; then the last RECVs come */
	for (t0 = time(NULL); (out || n < total) && time(NULL) - t0 < 60;) {
		int k = ibv_poll_cq(cq, 32, wcs);

		if (k < 0)
			die("srq_fair: ibv_poll_cq");
		for (int j = 0; j < k; j++) {
			struct ibv_wc *wc = &wcs[j];

			if (wc->status != IBV_WC_SUCCESS)
				die_wc("srq_fair: completion", wc);
			if (wc->opcode == IBV_WC_SEND) {
				out--;
				if (n + out < total) {
					sg = (struct ibv_sge){ (uintptr_t)(buf + (wc->wr_id - 10) * msg), msg, mr->lkey };
					post2(snd[wc->wr_id - 10], IBV_WR_SEND, wc->wr_id, &sg, 1, 0, 0, 0, 0);
					out++;
				}
				continue;
			}
			got[wc->qp_num == r[1]->qp_num]++;
			n++;
			sg = (struct ibv_sge){ (uintptr_t)(buf + (size_t)(2 + wc->wr_id - 100) * msg), msg, mr->lkey };
			rw = (struct ibv_recv_wr){ .wr_id = wc->wr_id, .sg_list = &sg, .num_sge = 1 };
			if (ibv_post_srq_recv(srq, &rw, &bad))
				die("srq_fair: ibv_post_srq_recv again");
		}
	}
	printf("verbs_check server: srq_fair: %u messages on one SRQ from two senders: %u and %u\n",
	       n, got[0], got[1]);
	if (n < total)
		die("srq_fair: not every message arrived within 60 s");
	if (got[0] < total / 4 || got[1] < total / 4)
		die("srq_fair: one QP of the SRQ took the RECVs, the other's sender waited");
	for (int i = 0; i < 2; i++)
		if (ibv_destroy_qp(r[i]) || ibv_destroy_qp(snd[i]))
			die("srq_fair: destroy_qp");
	if (ibv_destroy_srq(srq) || ibv_dereg_mr(mr) || ibv_destroy_cq(cq) || ibv_dealloc_pd(pd) ||
	    ibv_close_device(ctx))
		die("srq_fair: release");
	free(buf);
}

/* @q to RTS with @dest; 0, or ibv_modify_qp's error at RTR. */
static int rts_to(struct ibv_qp *q, uint32_t dest)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = QP_ACC_ALL };
	int ret;

	if (ibv_modify_qp(q, &a, RC_INIT_MASK))
		die("many_qps: modify_qp INIT");
	a.qp_state = IBV_QPS_RTR;
	rc_path(q, &a, dest);
	if ((ret = ibv_modify_qp(q, &a, RC_RTR_MASK)))
		return ret;
	a.qp_state = IBV_QPS_RTS;
	if (ibv_modify_qp(q, &a, RC_RTS_MASK))
		die("many_qps: modify_qp RTS");
	return 0;
}

/*
 * An RDMA op that the responder QP's qp_access_flags leave out fails with
 * IBV_WC_REM_INV_REQ_ERR and changes nothing, whatever the MR allows, as
 * on a NIC (rxe's responder: an invalid request); what they allow works;
 * flags widened RTS -> RTS count for the QP already connected to it.
 */
static void qp_access(struct ibv_context *ctx, struct ibv_pd *pd)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	uint8_t *b = pages(2 * 4096);
	struct ibv_mr *m = ibv_reg_mr(pd, b, 2 * 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				      IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	struct ibv_qp *resp, *req, *resp2, *req2;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS };
	struct ibv_wc wc;

	if (!cq || !m)
		die("qp_access: cq / mr");
	resp = mkqp(pd, cq, cq, 4, 4, 1);
	req = mkqp(pd, cq, cq, 4, 4, 1);
	init_qp_acc(resp, IBV_ACCESS_REMOTE_READ);
	connect_qp(resp, req->qp_num, 1, 7);
	connect_qp(req, resp->qp_num, 1, 7);
	memset(b, 0x11, 64);
	memset(b + 4096, 0x22, 64);
	rc_post(req, IBV_WR_RDMA_READ, b, 64, m->lkey, (uintptr_t)b + 4096, m->rkey, 0, 0, 1);
	wc = wait_wc(cq);
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != 1 || b[0] != 0x22)
		die_wc("qp_access: a READ through a QP that allows reads", &wc);
	memset(b, 0x33, 64);
	rc_post(req, IBV_WR_RDMA_WRITE, b, 64, m->lkey, (uintptr_t)b + 4096, m->rkey, 0, 0, 2);
	wc = wait_wc(cq);
	if (wc.status != IBV_WC_REM_INV_REQ_ERR || wc.wr_id != 2)
		die_wc("qp_access: a WRITE through a QP that allows reads only", &wc);
	rc_post(req, IBV_WR_ATOMIC_FETCH_AND_ADD, b, 8, m->lkey, (uintptr_t)b + 4096, m->rkey, 1, 0, 3);
	wc = wait_wc(cq);
	if (wc.status != IBV_WC_WR_FLUSH_ERR || wc.wr_id != 3)
		die_wc("qp_access: the WR after the refused one is not flushed", &wc);
	for (int i = 0; i < 64; i++)
		if (b[4096 + i] != 0x22)
			die("qp_access: a WRITE the responder QP's flags leave out changed the MR");
	/* a responder without a receive queue that allows nothing at first
	 * (as an application that sets the flags at RTS only) and then
	 * REMOTE_WRITE: the requester, connected meanwhile, reads them anew */
	resp2 = mkqp(pd, cq, cq, 4, 0, 1);
	req2 = mkqp(pd, cq, cq, 4, 4, 1);
	init_qp_acc(resp2, 0);
	connect_qp(resp2, req2->qp_num, 1, 7);
	connect_qp(req2, resp2->qp_num, 1, 7);
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	if (ibv_modify_qp(resp2, &a, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS))
		die("qp_access: RTS -> RTS with REMOTE_WRITE");
	memset(b, 0x44, 64);
	rc_post(req2, IBV_WR_RDMA_WRITE, b, 64, m->lkey, (uintptr_t)b + 4096, m->rkey, 0, 0, 4);
	wc = wait_wc(cq);
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != 4 || memcmp(b, b + 4096, 64))
		die_wc("qp_access: a WRITE once the responder QP allows it", &wc);
	if (ibv_destroy_qp(req2) || ibv_destroy_qp(resp2) || ibv_destroy_qp(req) ||
	    ibv_destroy_qp(resp) || ibv_dereg_mr(m) || ibv_destroy_cq(cq))
		die("qp_access: release");
	free(b);
	printf("verbs_check server: an RDMA WRITE the responder QP's qp_access_flags leave out -> "
	       "IBV_WC_REM_INV_REQ_ERR, MR unchanged; a READ they allow works; widened RTS -> RTS, "
	       "the connected requester's WRITE works\n");
}

/* One WRITE of 64 bytes over @q from @b into @b + 4096 (both in @m), checked. */
static void write_check(struct ibv_qp *q, struct ibv_cq *cq, uint8_t *b, struct ibv_mr *m,
			uint8_t seed, const char *what)
{
	struct ibv_wc wc;

	for (int i = 0; i < 64; i++)
		b[i] = (uint8_t)(i * 3 + seed);
	memset(b + 4096, 0, 64);
	rc_post(q, IBV_WR_RDMA_WRITE, b, 64, m->lkey, (uintptr_t)b + 4096, m->rkey, 0, 0, 501);
	wc = wait_wc(cq);
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != 501)
		die_wc(what, &wc);
	if (memcmp(b, b + 4096, 64))
		die("many_qps: the WRITE's bytes are not in the MR");
}

/*
 * Many connected QPs on one PD. An MR's region holds roshmd's
 * limits.max_grants grants (VERBS_CHECK_MAX_GRANTS: what the test gave
 * roshmd, 80), and each peer *process* takes two of them (the MR's metadata
 * page and its bytes, roshm_region_grant_owner), whatever number of its QPs
 * connect to the PD:
 * - 2 * MANY QPs of one process (this one: loopback pairs) all connect, and
 *   the last pair's WRITE lands (before: the 33rd QP was refused);
 * - QPs of max_grants / 2 + 1 other processes (contexts: each its own
 *   libroshm client) to QPs of our PD: all but the last connect (40 of them
 *   at 80: past the 32 of the fixed 64 grants before), the last process's is
 *   refused at RTR with ENOMEM, as a NIC out of resources refuses, and stays
 *   in INIT; an MR over the full region's pages is refused with ENOMEM, one
 *   of its own pages fits; once a peer's QP is destroyed (its grants go), the
 *   refused one connects.
 */
#define MANY 40
#define NPEER_MAX 129
static void many_qps(struct ibv_context *ctx, struct ibv_device *dev)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	uint8_t *b = aligned_alloc(4096, 8192);
	struct ibv_qp *q[2 * MANY], *s[NPEER_MAX], *p[NPEER_MAX];
	struct ibv_context *pc[NPEER_MAX];
	struct ibv_pd *ppd[NPEER_MAX];
	struct ibv_cq *pcq[NPEER_MAX];
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	struct ibv_mr *m;
	const char *mg = getenv("VERBS_CHECK_MAX_GRANTS");
	int refused = -1, ret = 0, NPEER = mg ? atoi(mg) / 2 + 1 : 0;

	if (NPEER < 2 || NPEER > NPEER_MAX)
		die("many_qps: VERBS_CHECK_MAX_GRANTS (roshmd's limits.max_grants, 2-256) not set");
	if (!pd || !cq || !b)
		die("many_qps: pd/cq/buffer");
	m = ibv_reg_mr(pd, b, 8192, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!m)
		die("many_qps: reg_mr");
	for (int i = 0; i < 2 * MANY; i++)
		q[i] = mkqp(pd, cq, cq, 4, 4, 1);
	for (int i = 0; i < 2 * MANY; i++)
		if ((ret = rts_to(q[i], q[i ^ 1]->qp_num))) {
			fprintf(stderr, "verbs_check: many_qps: QP %d of %d refused with %d\n", i + 1,
				2 * MANY, ret);
			die("many_qps: QPs of one process refused");
		}
	write_check(q[2 * MANY - 2], cq, b, m, 7, "many_qps: WRITE on the last pair");
	for (int i = 0; i < 2 * MANY; i++)
		if (ibv_destroy_qp(q[i]))
			die("many_qps: destroy");

	/* peer processes: each context is a client of its own */
	for (int k = 0; k < NPEER; k++) {
		pc[k] = ibv_open_device(dev);
		ppd[k] = pc[k] ? ibv_alloc_pd(pc[k]) : NULL;
		pcq[k] = pc[k] ? ibv_create_cq(pc[k], 4, NULL, NULL, 0) : NULL;
		if (!ppd[k] || !pcq[k])
			die("many_qps: a peer context");
		p[k] = mkqp(ppd[k], pcq[k], pcq[k], 4, 4, 1);
		s[k] = mkqp(pd, cq, cq, 4, 4, 1);
		if (rts_to(p[k], s[k]->qp_num))
			die("many_qps: a peer's QP refused");
	}
	for (int k = 0; k < NPEER && refused < 0; k++)
		if ((ret = rts_to(s[k], p[k]->qp_num)))
			refused = k;
	if (refused != NPEER - 1 || ret != ENOMEM) {
		fprintf(stderr, "verbs_check: many_qps: peer %d of %d refused with %d\n", refused + 1,
			NPEER, ret);
		die("many_qps: no ENOMEM at RTR for the last peer process, or one before it");
	}
	if (ibv_query_qp(s[refused], &a, IBV_QP_STATE, &ia) || a.qp_state != IBV_QPS_INIT)
		die("many_qps: the refused QP left INIT");
	/* a new MR over the same pages needs a grant per connected peer in the
	 * full region: refused (ENOMEM), nothing kept; one over pages of its
	 * own fits (its region is new) */
	errno = 0;
	if (ibv_reg_mr(pd, b + 4096, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) ||
	    errno != ENOMEM)
		die("many_qps: an MR over the full region's pages was not refused with ENOMEM");
	{
		uint8_t *b2 = aligned_alloc(4096, 4096);
		struct ibv_mr *m2 = b2 ? ibv_reg_mr(pd, b2, 4096, IBV_ACCESS_LOCAL_WRITE |
						    IBV_ACCESS_REMOTE_WRITE) : NULL;

		if (!m2 || ibv_dereg_mr(m2))
			die("many_qps: an MR of its own pages was refused");
		free(b2);
	}
	/* a peer process's QP goes: its grants with it; the refused one connects */
	if (ibv_destroy_qp(p[0]) || ibv_destroy_qp(s[0]))
		die("many_qps: destroy");
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTR };
	rc_path(s[refused], &a, p[refused]->qp_num);
	if ((ret = ibv_modify_qp(s[refused], &a, RC_RTR_MASK)))
		die("many_qps: RTR refused after a peer's QP was destroyed");
	for (int k = 1; k < NPEER; k++)
		if (ibv_destroy_qp(p[k]) || ibv_destroy_qp(s[k]))
			die("many_qps: destroy");
	for (int k = 0; k < NPEER; k++)
		if (ibv_destroy_cq(pcq[k]) || ibv_dealloc_pd(ppd[k]) || ibv_close_device(pc[k]))
			die("many_qps: a peer context's release");
	if (ibv_dereg_mr(m) || ibv_destroy_cq(cq) || ibv_dealloc_pd(pd))
		die("many_qps: release");
	free(b);
	printf("verbs_check server: %d QPs of one process on one PD all connect; the QP of peer "
	       "process %d refused at RTR with ENOMEM (its MR's grants full), and it connects "
	       "once another's is gone; an MR over the full region's pages refused with ENOMEM\n",
	       2 * MANY, refused + 1);
}

/*
 * No copy through the arena: an RDMA READ lands in the MR's own pages, where
 * roshmd puts the bytes itself, so they are there before any verbs call of
 * ours reaps its completion (through the arena, the library would copy them
 * in at ibv_poll_cq). Then a WRITE from those pages into another MR, with
 * its bytes checked, and READ/WRITE ranges that cross an MR's page boundary.
 */
/*
 * One RDMA READ of b's bytes scattered over four SGEs (max_sge_rd): 1000
 * bytes into a, none into an empty SGE, 3500 across a page boundary of
 * another MR, 700 into a again; nothing lands around them. Then a READ into
 * an MR registered without IBV_ACCESS_LOCAL_WRITE fails with LOC_PROT_ERR,
 * as on a NIC, and leaves that MR as it was (the QP is in error after it).
 * Registering REMOTE_WRITE without LOCAL_WRITE is EINVAL.
 */
static void scatter_read(struct ibv_qp *x, struct ibv_cq *cq, uint8_t *a, struct ibv_mr *ma,
			 uint8_t *b, struct ibv_mr *mb)
{
	uint8_t *c = pages(3 * 4096);
	struct ibv_mr *mc = ibv_reg_mr(x->pd, c, 3 * 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *mro = ibv_reg_mr(x->pd, c + 2 * 4096, 4096, IBV_ACCESS_REMOTE_READ);
	struct ibv_sge sg[4] = {
		{ (uintptr_t)(a + 100), 1000, ma->lkey },
		{ (uintptr_t)(a + 1100), 0, 0 },
		{ (uintptr_t)(c + 6000), 3500, mc ? mc->lkey : 0 },
		{ (uintptr_t)(a + 9000), 700, ma->lkey },
	};
	struct ibv_send_wr wr = { .wr_id = 3, .sg_list = sg, .num_sge = 4,
				  .opcode = IBV_WR_RDMA_READ, .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_device_attr da;
	struct ibv_wc wc;
	void *none;

	if (!mc || !mro)
		die("scatter_read: ibv_reg_mr");
	if (ibv_query_device(x->context, &da) || da.max_sge_rd < 4)
		die("scatter_read: max_sge_rd below 4");
	memset(a, 0xa5, 3 * 4096);
	memset(c, 0x5a, 3 * 4096);
	fill(b + 2000, 5200, 0, 93);
	wr.wr.rdma.remote_addr = (uintptr_t)(b + 2000);
	wr.wr.rdma.rkey = mb->rkey;
	if (ibv_post_send(x, &wr, &bad))
		die("scatter_read: ibv_post_send of a 4-SGE READ");
	wc = wait_wc(cq);
	if (wc.wr_id != 3 || wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RDMA_READ ||
	    wc.byte_len != 5200)
		die_wc("scatter_read: READ completion", &wc);
	check_bytes(a + 100, 1000, 0, 93, "scatter READ, SGE 0");
	check_bytes(c + 6000, 3500, 1000, 93, "scatter READ, SGE 2");
	check_bytes(a + 9000, 700, 4500, 93, "scatter READ, SGE 3");
	if (a[99] != 0xa5 || a[1100] != 0xa5 || a[8999] != 0xa5 || a[9700] != 0xa5 ||
	    c[5999] != 0x5a || c[9500] != 0x5a)
		die("scatter_read: the READ wrote outside its SGEs");
	/* a NIC writes no MR without LOCAL_WRITE */
	none = ibv_reg_mr(x->pd, c, 4096, IBV_ACCESS_REMOTE_WRITE);
	if (none || errno != EINVAL)
		die("scatter_read: an MR with REMOTE_WRITE but no LOCAL_WRITE was not refused with EINVAL");
	rc_post(x, IBV_WR_RDMA_READ, c + 10000, 64, mro->lkey, (uintptr_t)(b + 2000), mb->rkey,
		0, 0, 4);
	wc = wait_wc(cq);
	if (wc.wr_id != 4 || wc.status != IBV_WC_LOC_PROT_ERR)
		die_wc("scatter_read: a READ into an MR without LOCAL_WRITE", &wc);
	for (int i = 9500; i < 3 * 4096; i++)
		if (c[i] != 0x5a)
			die("scatter_read: a refused READ changed its destination");
	if (ibv_dereg_mr(mro) || ibv_dereg_mr(mc))
		die("scatter_read: release");
	free(c);
}

/*
 * The same for a SEND and a gathering WRITE whose source MR is deregistered
 * and its memory unmapped while they wait: the SEND fails with
 * LOC_PROT_ERR (nothing is read where the memory was: that would be
 * SIGSEGV), the QP goes to the error state, the WRITE behind it is flushed.
 */
static void send_after_dereg(struct ibv_pd *pd, struct ibv_cq *cq, uint8_t *a, struct ibv_mr *ma)
{
	struct ibv_qp *x = mkqp(pd, cq, cq, 16, 1, 1), *y = mkqp(pd, cq, cq, 4, 16, 1);
	uint8_t *e = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *me = e != MAP_FAILED ? ibv_reg_mr(pd, e, 3 * 4096, IBV_ACCESS_LOCAL_WRITE) : NULL;
	struct ibv_mr *mr2 = ibv_reg_mr(pd, a + 8192, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	struct ibv_sge sg = { (uintptr_t)a, 8000, ma->lkey };
	struct ibv_sge two[2];
	bool seen[3] = { false, false, false };
	int recvs = 0;
	struct ibv_wc wc;

	if (!me || !mr2)
		die("send_after_dereg: mmap/ibv_reg_mr");
	connect_qp(x, y->qp_num, 1, 7);
	connect_qp(y, x->qp_num, 1, 7);
	for (int i = 0; i < RNR_FIT; i++)
		post2(x, IBV_WR_SEND, 50 + i, &sg, 1, 0, 0, 0, 0);
	for (int i = 0; i < RNR_FIT; i++) {
		wc = wait_wc(cq);
		if (wc.wr_id != (uint64_t)(50 + i) || wc.status != IBV_WC_SUCCESS)
			die_wc("send_after_dereg: a SEND that fits the ring", &wc);
	}
	memset(e, 5, 3 * 4096);
	sg = (struct ibv_sge){ (uintptr_t)e, 8000, me->lkey };
	post2(x, IBV_WR_SEND, 80, &sg, 1, 0, 0, 0, 0);   /* waits: the ring is full */
	two[0] = (struct ibv_sge){ (uintptr_t)e, 100, me->lkey };
	two[1] = (struct ibv_sge){ (uintptr_t)e + 5000, 100, me->lkey };
	post2(x, IBV_WR_RDMA_WRITE, 81, two, 2, 0, 0, (uintptr_t)(a + 8192), mr2->rkey);
	if (ibv_dereg_mr(me) || munmap(e, 3 * 4096))
		die("send_after_dereg: ibv_dereg_mr/munmap");
	for (int i = 0; i < RNR_FIT; i++)
		post_recv(y, 90 + i, a + 4096, 8000, NULL, 0, ma->lkey);
	while (recvs < RNR_FIT || !seen[0] || !seen[1]) {
		wc = wait_wc(cq);
		if (wc.wr_id >= 90 && wc.wr_id < 90 + RNR_FIT && wc.status == IBV_WC_SUCCESS)
			recvs++;
		else if (wc.wr_id == 80 && wc.status == IBV_WC_LOC_PROT_ERR && !seen[0])
			seen[0] = true;
		else if (wc.wr_id == 81 && wc.status == IBV_WC_WR_FLUSH_ERR && seen[0] && !seen[1])
			seen[1] = true;
		else
			die_wc("send_after_dereg: a SEND from a deregistered MR (LOC_PROT_ERR expected), "
			       "then a flushed WRITE", &wc);
	}
	if (ibv_destroy_qp(x) || ibv_destroy_qp(y) || ibv_dereg_mr(mr2))
		die("send_after_dereg: release");
}

/*
 * A READ whose MR is deregistered between its post and its issue (it waits
 * behind a SEND that waits for room in the peer's ring: 8 of 8000 bytes fit
 * its 1024 slots, the 9th does not) fails with LOC_PROT_ERR and writes
 * nothing where the MR was, as a NIC's READ into a missing MR; the SEND
 * before it goes once the peer receives.
 */
static void read_after_dereg(struct ibv_pd *pd, struct ibv_cq *cq, uint8_t *a, struct ibv_mr *ma,
			     uint8_t *b, struct ibv_mr *mb)
{
	struct ibv_qp *x = mkqp(pd, cq, cq, 16, 1, 1), *y = mkqp(pd, cq, cq, 4, 16, 1);
	uint8_t *d = pages(4096);
	struct ibv_mr *md = ibv_reg_mr(pd, d, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_sge sg = { (uintptr_t)a, 8000, ma->lkey };
	bool read_done = false, send_done = false;
	int recvs = 0;
	struct ibv_wc wc;

	if (!md)
		die("read_after_dereg: ibv_reg_mr");
	connect_qp(x, y->qp_num, 1, 7);
	connect_qp(y, x->qp_num, 1, 7);
	for (int i = 0; i < RNR_FIT + 1; i++)
		post2(x, IBV_WR_SEND, 50 + i, &sg, 1, 0, 0, 0, 0);
	for (int i = 0; i < RNR_FIT; i++) {
		wc = wait_wc(cq);
		if (wc.wr_id != (uint64_t)(50 + i) || wc.status != IBV_WC_SUCCESS)
			die_wc("read_after_dereg: a SEND that fits the ring", &wc);
	}
	memset(d, 0x77, 4096);
	rc_post(x, IBV_WR_RDMA_READ, d + 100, 64, md->lkey, (uintptr_t)(b + 2000), mb->rkey, 0, 0, 60);
	if (ibv_dereg_mr(md))
		die("read_after_dereg: ibv_dereg_mr");
	for (int i = 0; i < RNR_FIT + 1; i++)
		post_recv(y, 70 + i, a + 4096, 8000, NULL, 0, ma->lkey);
	while (!read_done || !send_done || recvs < RNR_FIT + 1) {
		wc = wait_wc(cq);
		if (wc.wr_id >= 70 && wc.wr_id < 70 + RNR_FIT + 1 && wc.status == IBV_WC_SUCCESS)
			recvs++;
		else if (wc.wr_id == 50 + RNR_FIT && wc.status == IBV_WC_SUCCESS && !send_done)
			send_done = true;
		else if (wc.wr_id == 60 && wc.status == IBV_WC_LOC_PROT_ERR && !read_done)
			read_done = true;
		else
			die_wc("read_after_dereg: a READ into a deregistered MR (LOC_PROT_ERR expected)", &wc);
	}
	for (int i = 0; i < 4096; i++)
		if (d[i] != 0x77)
			die("read_after_dereg: a READ wrote into an MR deregistered before it went out");
	if (ibv_destroy_qp(x) || ibv_destroy_qp(y))
		die("read_after_dereg: release");
	free(d);
	send_after_dereg(pd, cq, a, ma);
}

static void zero_copy(struct ibv_pd *pd)
{
	struct ibv_cq *cq = ibv_create_cq(pd->context, 16, NULL, NULL, 0);
	uint8_t *a = pages(3 * 4096), *b = pages(3 * 4096);
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	struct ibv_mr *ma = ibv_reg_mr(pd, a, 3 * 4096, acc), *mb = ibv_reg_mr(pd, b, 3 * 4096, acc);
	struct ibv_qp_attr reset = { .qp_state = IBV_QPS_RESET };
	struct ibv_qp *x, *y;
	struct timespec t0, t;
	struct ibv_wc wc;
	int seen = 0;

	if (!cq || !ma || !mb)
		die("zero_copy: cq/mr");
	x = mkqp(pd, cq, cq, 4, 1, 1);
	y = mkqp(pd, cq, cq, 4, 1, 1);
	connect_qp(x, y->qp_num, 1, 7);
	connect_qp(y, x->qp_num, 1, 7);
	fill(b + 1000, 5000, 0, 91);
	memset(a, 0, 3 * 4096);
	rc_post(x, IBV_WR_RDMA_READ, a + 3000, 5000, ma->lkey, (uintptr_t)(b + 1000), mb->rkey, 0, 0, 1);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {   /* no verbs call here: only roshmd can bring the bytes */
		seen = 1;
		for (uint32_t i = 0; i < 5000 && seen; i++)
			seen = __atomic_load_n(&a[3000 + i], __ATOMIC_RELAXED) == pat(i, 91);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (!seen && t.tv_sec - t0.tv_sec < 30);
	if (!seen)
		die("zero_copy: an RDMA READ's bytes reached the MR only through ibv_poll_cq "
		    "(copied through the arena)");
	wc = wait_wc(cq);
	if (wc.wr_id != 1 || wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RDMA_READ)
		die_wc("zero_copy: READ completion", &wc);
	if (a[2999] || a[8000])
		die("zero_copy: the READ wrote outside its SGE");
	/* back: from a's pages into b (a page boundary on both sides) */
	fill(a + 4000, 6000, 0, 92);
	rc_post(x, IBV_WR_RDMA_WRITE, a + 4000, 6000, ma->lkey, (uintptr_t)(b + 100), mb->rkey, 0, 0, 2);
	wc = wait_wc(cq);
	if (wc.wr_id != 2 || wc.status != IBV_WC_SUCCESS)
		die_wc("zero_copy: WRITE completion", &wc);
	check_bytes(b + 100, 6000, 0, 92, "zero_copy WRITE");
	scatter_read(x, cq, a, ma, b, mb);
	read_after_dereg(pd, cq, a, ma, b, mb);
	if (ibv_modify_qp(x, &reset, IBV_QP_STATE) || ibv_modify_qp(y, &reset, IBV_QP_STATE) ||
	    ibv_destroy_qp(x) || ibv_destroy_qp(y) || ibv_dereg_mr(ma) || ibv_dereg_mr(mb) ||
	    ibv_destroy_cq(cq))
		die("zero_copy: release");
	free(a);
	free(b);
	printf("verbs_check server: RDMA READ lands in the MR's pages with no library copy; "
	       "WRITE from an MR's pages; a READ scatters over SGEs of two MRs; a READ into an "
	       "MR without LOCAL_WRITE, or deregistered since its post, is LOC_PROT_ERR, and so is a SEND "
	       "from one\n");
}

/*
 * MRs on huge pages (mr.c, huge_span): an anonymous MAP_HUGETLB mapping and
 * a SysV SHM_HUGETLB segment (perftest --use_hugepages, UCX's default
 * buffers), each of two 2 MiB pages, with an MR across the boundary that
 * starts and ends inside a huge page. Registration moves both huge pages
 * whole; the bytes around the MR (on both pages) stay what the application
 * wrote; a loopback RDMA WRITE into the MR lands in the application's view,
 * and a READ of it brings back what the application wrote there after the
 * registration; the bytes stay after ibv_dereg_mr. Without huge pages reserved (or no
 * SysV shared memory): said, and not run.
 */
static void huge_mr(struct ibv_pd *pd)
{
	const size_t H = 2u << 20, sz = 2 * H, off = H - 8192, len = 16384;
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	struct ibv_cq *cq = ibv_create_cq(pd->context, 16, NULL, NULL, 0);
	uint8_t *b = pages(len);
	struct ibv_mr *mb = ibv_reg_mr(pd, b, len, acc);
	struct ibv_qp *x, *y;

	if (!cq || !mb)
		die("huge_mr: cq/mr");
	x = mkqp(pd, cq, cq, 4, 1, 1);
	y = mkqp(pd, cq, cq, 4, 1, 1);
	connect_qp(x, y->qp_num, 1, 7);
	connect_qp(y, x->qp_num, 1, 7);
	for (int kind = 0; kind < 2; kind++) {
		const char *what = kind ? "SysV SHM_HUGETLB" : "MAP_HUGETLB";
		uint8_t *h = MAP_FAILED;
		struct ibv_mr *mh;
		struct ibv_wc wc;
		int id = -1;

		if (!kind) {
			h = mmap(NULL, sz, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
		} else if ((id = shmget(IPC_PRIVATE, sz, SHM_HUGETLB | IPC_CREAT | 0600)) >= 0) {
			h = shmat(id, NULL, 0);
			if (h == (void *)-1)
				h = MAP_FAILED;
			shmctl(id, IPC_RMID, NULL);
		}
		if (h == MAP_FAILED) {
			printf("verbs_check server: huge_mr: %s not run: %s (no huge pages reserved?)\n",
			       what, strerror(errno));
			continue;
		}
		fill(h, (uint32_t)sz, 0, 60);   /* every byte, the MR's and its neighbours' */
		mh = ibv_reg_mr(pd, h + off, len, acc);
		if (!mh)
			die("huge_mr: ibv_reg_mr across two huge pages");
		check_bytes(h, (uint32_t)sz, 0, 60, "huge_mr: the huge pages' bytes after the registration");
		fill(b, len, 0, 61);
		rc_post(x, IBV_WR_RDMA_WRITE, b, len, mb->lkey, (uintptr_t)(h + off), mh->rkey, 0, 0, 1);
		wc = wait_wc(cq);
		if (wc.wr_id != 1 || wc.status != IBV_WC_SUCCESS)
			die_wc("huge_mr: WRITE into the huge pages' MR", &wc);
		check_bytes(h + off, len, 0, 61, "huge_mr: a WRITE into an MR on huge pages");
		check_bytes(h, (uint32_t)off, 0, 60, "huge_mr: the first huge page around the MR");
		check_bytes(h + off + len, (uint32_t)(sz - off - len), off + len, 60,
			    "huge_mr: the second huge page around the MR");
		fill(h + off, len, 0, 62);   /* the application's store, read by the peer */
		rc_post(x, IBV_WR_RDMA_READ, b, len, mb->lkey, (uintptr_t)(h + off), mh->rkey, 0, 0, 2);
		wc = wait_wc(cq);
		if (wc.wr_id != 2 || wc.status != IBV_WC_SUCCESS)
			die_wc("huge_mr: READ of the huge pages' MR", &wc);
		check_bytes(b, len, 0, 62, "huge_mr: a READ of what the application wrote in its MR");
		if (ibv_dereg_mr(mh))
			die("huge_mr: ibv_dereg_mr");
		/* its pages stay the application's, bytes and all */
		check_bytes(h + off, len, 0, 62, "huge_mr: the MR's bytes after ibv_dereg_mr");
		munmap(h, sz);   /* a segment's pages are the region's now: shmdt no longer finds it */
		printf("verbs_check server: huge_mr: an MR across two %s pages: WRITE and READ, "
		       "the bytes around it kept\n", what);
	}
	if (ibv_destroy_qp(x) || ibv_destroy_qp(y) || ibv_dereg_mr(mb) || ibv_destroy_cq(cq))
		die("huge_mr: release");
	free(b);
}

/* An MR over @p+100 (5000 bytes): refused with EOPNOTSUPP (@refused), or
 * taken, with the bytes there kept (@seed). */
static void shared_try(struct ibv_pd *pd, uint8_t *p, bool refused, uint32_t seed, const char *what)
{
	struct ibv_mr *mr;

	fill(p, 2 * 4096, 0, seed);
	errno = 0;
	mr = ibv_reg_mr(pd, p + 100, 5000, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (refused && (mr || errno != EOPNOTSUPP)) {
		fprintf(stderr, "verbs_check: FAIL: file_mr: %s\n", what);
		die("file_mr: an MR over shared memory that others may map by its name was not refused "
		    "with EOPNOTSUPP");
	}
	if (!refused && (!mr || ibv_dereg_mr(mr))) {
		fprintf(stderr, "verbs_check: FAIL: file_mr: %s\n", what);
		die("file_mr: an MR over shared memory nobody can open any more was refused");
	}
	check_bytes(p, 2 * 4096, 0, seed, what);
}

/*
 * Shared memory that other processes may map by its name cannot be an MR
 * (mr.c, shared_by_name): its pages would move into the MR's region, and
 * the application's stores would reach neither the file nor the others
 * mapping it. ibv_reg_mr refuses it (EOPNOTSUPP) and leaves it mapped as it
 * was: a store after the refusal reaches the file. So: a file off tmpfs
 * (/var/tmp, else the working directory), POSIX shm while it has its name,
 * a SysV segment with a key. Taken: a private mapping of the file, the
 * POSIX shm object once unlinked, shared anonymous memory.
 */
static void file_mr(struct ibv_pd *pd)
{
	const char *dirs[] = { "/var/tmp", "." };
	char path[4096] = "", name[64];
	struct statfs sf;
	uint8_t *p, *q, c = 0;
	int fd = -1, id;
	key_t key;

	for (unsigned i = 0; i < 2 && fd < 0; i++) {
		if (statfs(dirs[i], &sf) || sf.f_type == TMPFS_MAGIC)
			continue;
		snprintf(path, sizeof(path), "%s/verbs_check_file.XXXXXX", dirs[i]);
		fd = mkstemp(path);
	}
	if (fd < 0) {
		printf("verbs_check server: file_mr: no directory off tmpfs to write in: the file part "
		       "not run\n");
	} else {
		if (ftruncate(fd, 2 * 4096))
			die("file_mr: ftruncate");
		p = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		q = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
		if (p == MAP_FAILED || q == MAP_FAILED)
			die("file_mr: mmap");
		shared_try(pd, p, true, 63, "a shared mapping of a file on disk");
		p[4200] = 0x5a;   /* still the file's page */
		if (pread(fd, &c, 1, 4200) != 1 || c != 0x5a)
			die("file_mr: the refused registration took the mapping from the file");
		shared_try(pd, q, false, 64, "a private mapping of a file on disk");
		munmap(p, 2 * 4096);
		/* an MR over an anonymous page that another MR holds and the file
		 * after it (the file is checked whether or not an MR is there) */
		p = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED || mmap(p + 4096, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
					    fd, 0) == MAP_FAILED)
			die("file_mr: mmap anonymous, then the file after it");
		{
			struct ibv_mr *m1 = ibv_reg_mr(pd, p, 100, IBV_ACCESS_LOCAL_WRITE), *m2;

			errno = 0;
			m2 = ibv_reg_mr(pd, p, 8192, IBV_ACCESS_LOCAL_WRITE);
			if (!m1 || m2 || errno != EOPNOTSUPP)
				die("file_mr: an MR over an earlier MR's page and a file after it was not "
				    "refused with EOPNOTSUPP");
			p[4096 + 10] = 0x6b;
			if (pread(fd, &c, 1, 10) != 1 || c != 0x6b || ibv_dereg_mr(m1))
				die("file_mr: the refused registration took the file's page");
		}
		munmap(p, 2 * 4096);
		munmap(q, 2 * 4096);
		close(fd);
		unlink(path);
	}
	snprintf(name, sizeof(name), "/verbs_check_%d", (int)getpid());
	shm_unlink(name);   /* a run killed before it unlinked its own */
	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0 || ftruncate(fd, 2 * 4096) ||
	    (p = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED)
		die("file_mr: shm_open");
	shared_try(pd, p, true, 65, "POSIX shm with its name");
	shm_unlink(name);
	close(fd);
	shared_try(pd, p, false, 66, "POSIX shm once unlinked");
	munmap(p, 2 * 4096);
	key = (key_t)(0x5600000 | (getpid() & 0xfffff));
	id = shmget(key, 2 * 4096, IPC_CREAT | IPC_EXCL | 0600);
	p = id >= 0 ? shmat(id, NULL, 0) : (void *)-1;
	if (p == (void *)-1)
		die("file_mr: shmget with a key");
	shared_try(pd, p, true, 67, "a SysV segment that others may find by its key");
	shmctl(id, IPC_RMID, NULL);
	shared_try(pd, p, false, 68, "a SysV segment removed, attached by this process alone");
	shmdt(p);   /* EINVAL: its pages are the region's (not checked) */
	/* one in the middle of a removed segment splits its mapping in three
	 * (/proc/sysvipc/shm then counts 3 attaches, all this process's): an MR
	 * on its first page is still taken */
	id = shmget(IPC_PRIVATE, 3 * 4096, IPC_CREAT | 0600);
	p = id >= 0 ? shmat(id, NULL, 0) : (void *)-1;
	if (p == (void *)-1)
		die("file_mr: shmget of 3 pages");
	shmctl(id, IPC_RMID, NULL);
	{
		struct ibv_mr *m1 = ibv_reg_mr(pd, p + 4096 + 10, 100, IBV_ACCESS_LOCAL_WRITE);
		struct ibv_mr *m2 = m1 ? ibv_reg_mr(pd, p + 10, 100, IBV_ACCESS_LOCAL_WRITE) : NULL;

		if (!m1 || !m2 || ibv_dereg_mr(m2) || ibv_dereg_mr(m1))
			die("file_mr: two MRs on one removed SysV segment of this process (the first "
			    "split its mapping)");
	}
	shmdt(p);
	id = shmget(IPC_PRIVATE, 2 * 4096, IPC_CREAT | 0600);
	p = id >= 0 ? shmat(id, NULL, 0) : (void *)-1;
	if (p == (void *)-1)
		die("file_mr: shmget IPC_PRIVATE");
	shared_try(pd, p, true, 69, "a SysV segment not removed (others may attach it by its id)");
	shmctl(id, IPC_RMID, NULL);
	shmdt(p);
	/* a memfd mapped twice, back to back (a ring buffer): copies of it would
	 * no longer be one */
	fd = memfd_create("verbs_check_ring", 0);
	p = mmap(NULL, 2 * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (fd < 0 || ftruncate(fd, 4096) || p == MAP_FAILED ||
	    mmap(p, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED ||
	    mmap(p + 4096, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED)
		die("file_mr: a memfd mapped twice");
	errno = 0;
	if (ibv_reg_mr(pd, p, 100, IBV_ACCESS_LOCAL_WRITE) || errno != EOPNOTSUPP)
		die("file_mr: an MR over a memfd that the process maps twice was not refused");
	*(volatile uint8_t *)&p[10] = 0x42;   /* the two addresses are one byte */
	if (*(volatile uint8_t *)&p[4096 + 10] != 0x42)
		die("file_mr: the refused registration split a memfd mapped twice");
	munmap(p, 2 * 4096);
	close(fd);
	/* shared anonymous memory, registered, then a child of fork(): it
	 * shares the pages with its parent as before (fork.c), where a private
	 * page registered beside gets a copy */
	p = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("file_mr: mmap shared anonymous");
	shared_try(pd, p, false, 70, "shared anonymous memory");
	{
		uint8_t *pr = pages(4096);
		struct ibv_mr *ms = ibv_reg_mr(pd, p, 2 * 4096, IBV_ACCESS_LOCAL_WRITE);
		struct ibv_mr *mp = ibv_reg_mr(pd, pr, 4096, IBV_ACCESS_LOCAL_WRITE);
		int status = -1;
		pid_t child;

		if (!ms || !mp)
			die("file_mr: MRs over shared anonymous memory and a private page");
		pr[5] = 1;
		child = fork();
		if (child == 0) {
			p[50] = 0x77;
			p[4096 + 50] = 0x78;
			pr[5] = 2;
			_exit(0);
		}
		if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
		    WEXITSTATUS(status))
			die("file_mr: fork");
		if (*(volatile uint8_t *)&p[50] != 0x77 || *(volatile uint8_t *)&p[4096 + 50] != 0x78)
			die("file_mr: a child's store to registered shared anonymous memory did not reach "
			    "its parent");
		if (*(volatile uint8_t *)&pr[5] != 1)
			die("file_mr: a child's store to a registered private page reached its parent");
		if (ibv_dereg_mr(ms) || ibv_dereg_mr(mp))
			die("file_mr: dereg");
		free(pr);
	}
	munmap(p, 2 * 4096);
	printf("verbs_check server: file_mr: MRs over a shared mapping of a file, POSIX shm with its "
	       "name, a SysV segment with a key or not removed, a memfd mapped twice refused "
	       "(EOPNOTSUPP), the memory as it was; over a private mapping of the file, unlinked POSIX "
	       "shm, a removed SysV segment (twice, the first MR splitting it), shared anonymous memory taken, the last still shared "
	       "with a child of fork() (a private page beside copied)\n");
}

/* The permissions /proc/self/maps gives the page at @a ("rw-p", ...), or "". */
static const char *maps_perm(const void *a)
{
	static char perm[5];
	char line[512];
	FILE *f = fopen("/proc/self/maps", "re");

	perm[0] = 0;
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long s, e;
		char p[5];

		if (sscanf(line, "%lx-%lx %4s", &s, &e, p) == 3 && s <= (uintptr_t)a && (uintptr_t)a < e) {
			memcpy(perm, p, 5);
			break;
		}
	}
	if (f)
		fclose(f);
	return perm;
}

/*
 * Memory an MR cannot be, as a NIC's registration, which pins the pages,
 * says (mr.c, vma_check): a range with a PROT_NONE page or a hole is
 * refused with EFAULT (before, ibv_reg_mr read the page and the application
 * died of SIGSEGV), and the bytes around stay; read-only memory is an MR
 * without write access only (EFAULT with IBV_ACCESS_LOCAL_WRITE), stays
 * read-only in the application (before, its pages came back writable),
 * and a loopback RDMA READ of it brings its bytes.
 */
static void prot_mr(struct ibv_pd *pd)
{
	const size_t P = 4096;
	struct ibv_cq *cq = ibv_create_cq(pd->context, 4, NULL, NULL, 0);
	uint8_t *p = mmap(NULL, 4 * P, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t *b = pages(P);
	struct ibv_mr *mr, *mb = ibv_reg_mr(pd, b, P, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_qp *x, *y;
	struct ibv_wc wc;

	if (!cq || p == MAP_FAILED || !mb)
		die("prot_mr: cq, mmap or mr");
	fill(p, 4 * P, 0, 80);
	if (mprotect(p + P, P, PROT_NONE))
		die("prot_mr: mprotect");
	errno = 0;
	if (ibv_reg_mr(pd, p + 100, 2 * P, IBV_ACCESS_LOCAL_WRITE) || errno != EFAULT)
		die("prot_mr: an MR over a PROT_NONE page was not refused with EFAULT");
	if (munmap(p + P, P))
		die("prot_mr: munmap");
	errno = 0;
	if (ibv_reg_mr(pd, p + 100, 2 * P, IBV_ACCESS_LOCAL_WRITE) || errno != EFAULT)
		die("prot_mr: an MR over an unmapped page was not refused with EFAULT");
	check_bytes(p, P, 0, 80, "prot_mr: the page before the refused range");
	check_bytes(p + 2 * P, 2 * P, 2 * P, 80, "prot_mr: the pages after the refused range");
	if (mprotect(p + 2 * P, 2 * P, PROT_READ))
		die("prot_mr: mprotect read-only");
	errno = 0;
	if (ibv_reg_mr(pd, p + 2 * P, 2 * P, IBV_ACCESS_LOCAL_WRITE) || errno != EFAULT)
		die("prot_mr: a writable MR over read-only memory was not refused with EFAULT");
	mr = ibv_reg_mr(pd, p + 2 * P + 10, 5000, IBV_ACCESS_REMOTE_READ);
	if (!mr)
		die("prot_mr: an MR (remote read) over read-only memory");
	if (strncmp(maps_perm(p + 2 * P), "r--", 3) || strncmp(maps_perm(p + 3 * P), "r--", 3))
		die("prot_mr: read-only memory came back from ibv_reg_mr writable");
	x = mkqp(pd, cq, cq, 4, 1, 1);
	y = mkqp(pd, cq, cq, 4, 1, 1);
	connect_qp(x, y->qp_num, 1, 7);
	connect_qp(y, x->qp_num, 1, 7);
	rc_post(x, IBV_WR_RDMA_READ, b, 3000, mb->lkey, (uintptr_t)(p + 2 * P + 1000), mr->rkey, 0, 0, 1);
	wc = wait_wc(cq);
	if (wc.wr_id != 1 || wc.status != IBV_WC_SUCCESS)
		die_wc("prot_mr: READ of a read-only MR", &wc);
	check_bytes(b, 3000, 2 * P + 1000, 80, "prot_mr: a READ of read-only memory");
	if (ibv_destroy_qp(x) || ibv_destroy_qp(y) || ibv_dereg_mr(mr) || ibv_dereg_mr(mb) ||
	    ibv_destroy_cq(cq))
		die("prot_mr: release");
	munmap(p, 4 * P);
	free(b);
	printf("verbs_check server: prot_mr: a PROT_NONE page and a hole refused (EFAULT), the bytes "
	       "around kept; read-only memory an MR without write access, still read-only, READ "
	       "from it\n");
}

static void server2(struct ibv_context *ctx, struct ibv_pd *pd, int fd)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *rcq = ch ? ibv_create_cq(ctx, 64, (void *)0x5eed, ch, 0) : NULL;
	struct ibv_cq *scq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	struct ibv_context *octx = NULL;
	struct ibv_device **dl = NULL;
	struct ibv_pd *opd = NULL;
	struct ibv_cq *ocq = NULL, *ecq;
	struct ibv_qp *qa, *qr, *qt = NULL;
	struct ibv_mr *rmr, *omr = NULL, *smr, *amr;
	struct ibv_pd *spd = ibv_alloc_pd(ctx);
	uint8_t *sbuf = pages(4096);
	struct info2 me, peer;
	char *other = getenv("VERBS_CHECK_OTHER"), *tok;
	uint8_t *rb = pages(RB), *tb = pages(4096);
	struct ibv_wc wc;
	void *ectx;

	if (!rcq || !scq)
		die("channel/cq");
	qa = mkqp(pd, scq, rcq, 8, 8, 2);
	qr = mkqp(pd, scq, rcq, 4, 16, 1);
	/* the same process, attached as another tenant */
	if (other && (tok = strchr(other, ':'))) {
		*tok++ = 0;
		setenv("ROSHM_TENANT", other, 1);
		setenv("ROSHM_TOKEN", tok, 1);
		dl = ibv_get_device_list(NULL);
		octx = dl ? ibv_open_device(dl[0]) : NULL;
		unsetenv("ROSHM_TENANT");
		unsetenv("ROSHM_TOKEN");
		if (!octx)
			die("ibv_open_device as the other tenant");
		opd = ibv_alloc_pd(octx);
		ocq = ibv_create_cq(octx, 16, NULL, NULL, 0);
		if (!opd || !ocq)
			die("other tenant's pd/cq");
		qt = mkqp(opd, ocq, ocq, 4, 4, 1);
		memset(tb, 0xee, 4096);
		omr = ibv_reg_mr(opd, tb, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
		if (!omr)
			die("ibv_reg_mr (the other tenant's buffer)");
	}
	memset(rb, 0xee, RB);
	rmr = ibv_reg_mr(pd, rb, RB, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!rmr)
		die("ibv_reg_mr (receive buffers)");
	/* a second PD of ours, with no QP: on a NIC its rkey works through no
	 * QP of the client's */
	memset(sbuf, 0xee, 4096);
	smr = spd ? ibv_reg_mr(spd, sbuf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC) : NULL;
	/* an MR of the connected PD over a part of smr's page: the page is
	 * smr's (its region), and must not open smr to the client */
	amr = smr ? ibv_reg_mr(pd, sbuf + 1024, 512, IBV_ACCESS_LOCAL_WRITE |
			       IBV_ACCESS_REMOTE_WRITE) : NULL;
	if (!smr || !amr)
		die("ibv_reg_mr (a second PD)");
	me = (struct info2){ (uintptr_t)rb, rmr->rkey,
			     { qa->qp_num, qr->qp_num, qt ? qt->qp_num : 0 },
			     (uintptr_t)tb, omr ? omr->rkey : 0, smr->rkey, (uintptr_t)sbuf };
	if (write(fd, &me, sizeof(me)) != sizeof(me) || read(fd, &peer, sizeof(peer)) != sizeof(peer))
		die("exchange");
	connect_qp_gid(qa, peer.qpn[0], &peer_gid, 1, 7);
	connect_qp_gid(qr, peer.qpn[1], &peer_gid, 1, 7);   /* min_rnr_timer 1: 10 us */
	if (qt)
		connect_qp_gid(qt, peer.qpn[2], &peer_gid, 1, 7);
	/* gathered by the sender from 1500 + 1500, scattered here into 1000 + 2000 */
	post_recv(qa, 1, rb, 1000, rb + 5000, 2000, rmr->lkey);
	post_recv(qa, 2, rb + 10000, 4096, NULL, 0, rmr->lkey);
	post_recv(qa, 3, rb + 20000, 16, NULL, 0, rmr->lkey);   /* consumed by WRITE_WITH_IMM */
	post_recv(qa, 4, rb + 32768, BIG, NULL, 0, rmr->lkey);
	post_recv(qa, 5, rb + 340000, 64, NULL, 0, rmr->lkey);
	if (qt)
		post_recv(qt, 9, tb, 4096, NULL, 0, omr->lkey);
	if (ibv_req_notify_cq(rcq, 0))
		die("ibv_req_notify_cq");
	sync_byte(fd, 'g', 0);
	/* the first message makes the channel's fd readable */
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };

	if (poll(&pfd, 1, 20000) != 1 || !(pfd.revents & POLLIN))
		die("the completion channel's fd did not become readable");
	if (ibv_get_cq_event(ch, &ecq, &ectx) || ecq != rcq || ectx != (void *)0x5eed)
		die("ibv_get_cq_event did not return the receive CQ and its context");
	ibv_ack_cq_events(ecq, 1);
	expect_recv(rcq, 1, IBV_WC_RECV, 3000, false, 0, qa->qp_num, peer.qpn[0]);
	check_bytes(rb, 1000, 0, 1, "SEND (first SGE)");
	check_bytes(rb + 5000, 2000, 1000, 1, "SEND (second SGE)");
	if (rb[1000] != 0xee || rb[5000 + 2000] != 0xee)
		die("a RECV wrote past its SGEs");
	expect_recv(rcq, 2, IBV_WC_RECV, 100, true, IMM2, qa->qp_num, peer.qpn[0]);
	check_bytes(rb + 10000, 100, 0, 2, "SEND_WITH_IMM");
	expect_recv(rcq, 3, IBV_WC_RECV_RDMA_WITH_IMM, 4096, true, IMM3, qa->qp_num, peer.qpn[0]);
	/* the write's data is in place when its immediate is delivered */
	check_bytes(rb + WOFF, 4096, 0, 3, "RDMA WRITE_WITH_IMM data");
	if (rb[20000] != 0xee)
		die("WRITE_WITH_IMM wrote into its RECV's buffer");
	expect_recv(rcq, 4, IBV_WC_RECV, BIG, false, 0, qa->qp_num, peer.qpn[0]);
	check_bytes(rb + 32768, BIG, 0, 4, "SEND bigger than the ring");
	expect_recv(rcq, 5, IBV_WC_RECV, 64, false, 0, qa->qp_num, peer.qpn[0]);
	check_bytes(rb + 340000, 64, 0, 5, "inline SEND");
	printf("verbs_check server: SEND, SEND_WITH_IMM, WRITE_WITH_IMM, a %d-byte SEND through "
	       "a 64 KiB ring and an inline SEND arrived intact, the first through the channel\n", BIG);

	/* RNR: the client filled qr's ring and got RNR; what waited is delivered now */
	sync_byte(fd, 0, 'r');
	for (int i = 0; i <= RNR_FIT; i++)
		post_recv(qr, 100 + i, rb + RNR_OFF + i * 8192, 8192, NULL, 0, rmr->lkey);
	for (int i = 0; i < RNR_FIT; i++) {
		expect_recv(rcq, 100 + i, IBV_WC_RECV, RNR_LEN, false, 0, qr->qp_num, peer.qpn[1]);
		check_bytes(rb + RNR_OFF + i * 8192, RNR_LEN, 0, 100 + i, "a SEND that waited in the ring");
	}
	printf("verbs_check server: the %d SENDs that waited for RECVs arrived intact\n", RNR_FIT);

	/* Progress nobody polls for, as on a NIC: the client posts a SEND
	 * bigger than our ring and waits in read(2) until it arrived here whole;
	 * then we post a RECV and wait in read(2) until the client's SEND
	 * completed (it needs us to empty the ring as it goes). */
	post_recv(qa, 6, rb + 32768, BIG, NULL, 0, rmr->lkey);
	sync_byte(fd, 'n', 0);
	expect_recv(rcq, 6, IBV_WC_RECV, BIG, false, 0, qa->qp_num, peer.qpn[0]);
	check_bytes(rb + 32768, BIG, 0, 6, "a SEND whose sender polled nothing after the post");
	post_recv(qa, 7, rb + 32768, BIG, NULL, 0, rmr->lkey);
	sync_byte(fd, 'o', 'p');   /* in read(2) here while it goes */
	expect_recv(rcq, 7, IBV_WC_RECV, BIG, false, 0, qa->qp_num, peer.qpn[0]);
	check_bytes(rb + 32768, BIG, 0, 7, "a SEND that arrived while we polled nothing");
	printf("verbs_check server: a %d-byte SEND arrived while its sender polled nothing, and "
	       "another while we polled nothing\n", BIG);

	/* the other tenant's QP received nothing */
	sync_byte(fd, 0, 't');
	for (int i = 0; i < 4096; i++)
		if (sbuf[i] != 0xee)
			die("an MR of a PD the client's QPs are not connected to was written");
	printf("verbs_check server: an MR of our second PD (no QP) was not written through the "
	       "client's QP, though an MR of the connected PD shares its page\n");
	if (qt) {
		if (ibv_poll_cq(ocq, 1, &wc) != 0)
			die("a QP of another tenant completed a RECV");
		for (int i = 0; i < 4096; i++)
			if (tb[i] != 0xee)
				die("a QP or an MR of another tenant had its buffer written");
		printf("verbs_check server: the QP of another tenant received nothing, its MR "
		       "(remote write allowed) was not written\n");
	} else {
		printf("verbs_check server: tenant check not run (VERBS_CHECK_OTHER not set)\n");
	}
	hostile(ctx, pd, rmr, rb, qa->qp_num, smr, amr, sbuf);
	loopback(ctx, pd, rmr, rb);
	qp_access(ctx, pd);
	srq_check(ctx, pd);
	srq_ring_check(ctx->device);
	zero_copy(pd);
	huge_mr(pd);
	file_mr(pd);
	prot_mr(pd);
	sync_byte(fd, 'x', 0);
	if (ibv_destroy_qp(qa) || ibv_destroy_qp(qr) || ibv_dereg_mr(rmr) ||
	    ibv_destroy_cq(rcq) || ibv_destroy_cq(scq) || ibv_destroy_comp_channel(ch))
		die("release (two-sided)");
	if (qt && (ibv_destroy_qp(qt) || ibv_dereg_mr(omr) || ibv_destroy_cq(ocq) ||
		   ibv_dealloc_pd(opd) || ibv_close_device(octx)))
		die("release (other tenant)");
	if (ibv_dereg_mr(amr) || ibv_dereg_mr(smr) || ibv_dealloc_pd(spd))
		die("release (second PD)");
	if (dl)
		ibv_free_device_list(dl);
	free(rb);
	free(tb);
	free(sbuf);
}

static void client2(struct ibv_context *ctx, struct ibv_pd *pd, int s)
{
	struct ibv_cq *scq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	struct ibv_cq *rcq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	struct ibv_qp *qa, *qr, *qt;
	struct ibv_mr *mr;
	struct info2 me, peer;
	uint8_t *sb = pages(RB);
	struct ibv_sge sg[2];
	struct ibv_wc wc;
	static const enum ibv_wc_opcode ops[5] = { IBV_WC_SEND, IBV_WC_SEND, IBV_WC_RDMA_WRITE,
						    IBV_WC_SEND, IBV_WC_SEND };

	if (!scq || !rcq)
		die("cq");
	qa = mkqp(pd, scq, rcq, 8, 0, 1);
	qr = mkqp(pd, scq, rcq, 16, 0, 1);
	qt = mkqp(pd, scq, rcq, 4, 0, 1);
	mr = ibv_reg_mr(pd, sb, RB, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		die("ibv_reg_mr (send buffer)");
	if (read(s, &peer, sizeof(peer)) != sizeof(peer))
		die("exchange");
	me = (struct info2){ 0, 0, { qa->qp_num, qr->qp_num, qt->qp_num } };
	if (write(s, &me, sizeof(me)) != sizeof(me))
		die("exchange");
	connect_qp_gid(qa, peer.qpn[0], &peer_gid, 1, 7);
	connect_qp_gid(qr, peer.qpn[1], &peer_gid, 1, 1);   /* one RNR retry, then RNR_RETRY_EXC_ERR */
	if (peer.qpn[2])
		connect_qp_gid(qt, peer.qpn[2], &peer_gid, 1, 7);
	fill(sb, 1500, 0, 1);
	fill(sb + 8192, 1500, 1500, 1);
	fill(sb + 16384, 100, 0, 2);
	fill(sb + 20480, 4096, 0, 3);
	fill(sb + 32768, BIG, 0, 4);
	fill(sb + 340000, 64, 0, 5);
	sync_byte(s, 0, 'g');
	sg[0] = (struct ibv_sge){ (uintptr_t)sb, 1500, mr->lkey };
	sg[1] = (struct ibv_sge){ (uintptr_t)sb + 8192, 1500, mr->lkey };
	post2(qa, IBV_WR_SEND, 1, sg, 2, 0, 0, 0, 0);
	sg[0] = (struct ibv_sge){ (uintptr_t)sb + 16384, 100, mr->lkey };
	post2(qa, IBV_WR_SEND_WITH_IMM, 2, sg, 1, IMM2, 0, 0, 0);
	sg[0] = (struct ibv_sge){ (uintptr_t)sb + 20480, 4096, mr->lkey };
	post2(qa, IBV_WR_RDMA_WRITE_WITH_IMM, 3, sg, 1, IMM3, 0, peer.addr + WOFF, peer.rkey);
	sg[0] = (struct ibv_sge){ (uintptr_t)sb + 32768, BIG, mr->lkey };
	post2(qa, IBV_WR_SEND, 4, sg, 1, 0, 0, 0, 0);
	sg[0] = (struct ibv_sge){ (uintptr_t)sb + 340000, 64, 0 /* inline: no lkey */ };
	post2(qa, IBV_WR_SEND, 5, sg, 1, 0, IBV_SEND_INLINE, 0, 0);
	memset(sb + 340000, 0, 64);   /* an inline SEND's buffer is ours again at once */
	for (uint64_t i = 1; i <= 5; i++) {
		wc = wait_wc(scq);
		if (wc.status != IBV_WC_SUCCESS || wc.wr_id != i || wc.opcode != ops[i - 1]) {
			fprintf(stderr, "WR %" PRIu64 ": status %s wr_id %" PRIu64 " opcode %d\n", i,
				ibv_wc_status_str(wc.status), wc.wr_id, wc.opcode);
			die("send completion (two-sided)");
		}
	}
	/* RNR: the server posts no RECV on qr until we are done */
	for (int i = 0; i < RNR_FIT + 2; i++) {
		fill(sb + RNR_OFF + i * 8192, RNR_LEN, 0, 100 + i);
		sg[0] = (struct ibv_sge){ (uintptr_t)sb + RNR_OFF + i * 8192, RNR_LEN, mr->lkey };
		post2(qr, IBV_WR_SEND, 100 + i, sg, 1, 0, 0, 0, 0);
	}
	for (int i = 0; i < RNR_FIT + 2; i++) {
		enum ibv_wc_status want = i < RNR_FIT ? IBV_WC_SUCCESS : i == RNR_FIT ?
					  IBV_WC_RNR_RETRY_EXC_ERR : IBV_WC_WR_FLUSH_ERR;

		wc = wait_wc(scq);
		if (wc.wr_id != (uint64_t)(100 + i) || wc.status != want) {
			fprintf(stderr, "RNR SEND %d: expected %s, got wr_id %" PRIu64 " %s\n", i,
				ibv_wc_status_str(want), wc.wr_id, ibv_wc_status_str(wc.status));
			die("RNR");
		}
	}
	sync_byte(s, 'r', 0);
	/* progress nobody polls for (the server's side says what) */
	fill(sb + 32768, BIG, 0, 6);
	sync_byte(s, 0, 'n');
	sg[0] = (struct ibv_sge){ (uintptr_t)sb + 32768, BIG, mr->lkey };
	post2(qa, IBV_WR_SEND, 6, sg, 1, 0, 0, 0, 0);
	sync_byte(s, 0, 'o');   /* in read(2) while it goes */
	wc = wait_wc(scq);
	if (wc.wr_id != 6 || wc.status != IBV_WC_SUCCESS)
		die_wc("a SEND posted before we stopped polling", &wc);
	fill(sb + 32768, BIG, 0, 7);
	post2(qa, IBV_WR_SEND, 7, sg, 1, 0, 0, 0, 0);
	wc = wait_wc(scq);
	if (wc.wr_id != 7 || wc.status != IBV_WC_SUCCESS)
		die_wc("a SEND to a receiver that polls nothing", &wc);
	sync_byte(s, 'p', 0);
	/* an MR of the server's other PD, by its real rkey and address: no QP of
	 * ours is connected to a QP of that PD */
	{
		struct ibv_qp_attr reset = { .qp_state = IBV_QPS_RESET };

		sg[0] = (struct ibv_sge){ (uintptr_t)sb, 16, mr->lkey };
		post2(qa, IBV_WR_RDMA_WRITE, 202, sg, 1, 0, 0, peer.saddr, peer.srkey);
		wc = wait_wc(scq);
		if (wc.wr_id != 202 || wc.status != IBV_WC_REM_ACCESS_ERR) {
			fprintf(stderr, "WRITE to an MR of another PD: got %s\n",
				ibv_wc_status_str(wc.status));
			die("an RDMA WRITE to an MR of a PD we are not connected to did not fail "
			    "with IBV_WC_REM_ACCESS_ERR");
		}
		if (ibv_modify_qp(qa, &reset, IBV_QP_STATE))
			die("modify_qp RESET");
		connect_qp_gid(qa, peer.qpn[0], &peer_gid, 1, 7);
		printf("verbs_check client: WRITE to an MR of a PD of the server that our QPs are "
		       "not connected to -> REM_ACCESS_ERR\n");
	}
	/* a QP of another tenant is not reachable by its QPN */
	if (peer.qpn[2]) {
		sg[0] = (struct ibv_sge){ (uintptr_t)sb, 16, mr->lkey };
		post2(qt, IBV_WR_SEND, 200, sg, 1, 0, 0, 0, 0);
		wc = wait_wc(scq);
		if (wc.wr_id != 200 || wc.status != IBV_WC_RETRY_EXC_ERR) {
			fprintf(stderr, "SEND to another tenant's QP: got %s\n",
				ibv_wc_status_str(wc.status));
			die("a SEND to a QP of another tenant did not fail with IBV_WC_RETRY_EXC_ERR");
		}
		/* its MR, named by its real rkey and address: not ours to reach */
		sg[0] = (struct ibv_sge){ (uintptr_t)sb, 16, mr->lkey };
		post2(qa, IBV_WR_RDMA_WRITE, 201, sg, 1, 0, 0, peer.oaddr, peer.orkey);
		wc = wait_wc(scq);
		if (wc.wr_id != 201 || wc.status != IBV_WC_REM_ACCESS_ERR) {
			fprintf(stderr, "WRITE to another tenant's MR: got %s\n",
				ibv_wc_status_str(wc.status));
			die("an RDMA WRITE to an MR of another tenant did not fail with IBV_WC_REM_ACCESS_ERR");
		}
		printf("verbs_check client: SEND to another tenant's QP -> RETRY_EXC_ERR, WRITE to "
		       "its MR -> REM_ACCESS_ERR\n");
	}
	sync_byte(s, 't', 'x');
	printf("verbs_check client: SEND, SEND_WITH_IMM, WRITE_WITH_IMM, big and inline SENDs "
	       "completed; %d SENDs fit the ring, the next -> RNR_RETRY_EXC_ERR, then "
	       "WR_FLUSH_ERR\n", RNR_FIT);
	if (ibv_destroy_qp(qa) || ibv_destroy_qp(qr) || ibv_destroy_qp(qt) || ibv_dereg_mr(mr) ||
	    ibv_destroy_cq(scq) || ibv_destroy_cq(rcq))
		die("release (two-sided)");
	free(sb);
}

/* ------------------------------------------------------- overlapping MRs */

/*
 * Registrations that share pages, as a NIC allows (ucmatose -c 2 and rping
 * register buffers on one page): the server registers page 0 twice (two
 * keys, one the same bytes again), a read-only MR on page 2, and one MR over
 * pages 0..4 that uses both, then deregisters the first. The client WRITEs
 * across the whole span (pieces in three regions), READs it back, READs
 * through the read-only key, adds to a word of page 2 through the span's key;
 * a WRITE with the read-only key and any use of the deregistered key fail
 * with REM_ACCESS_ERR. The server checks every byte of its five pages.
 */
#define OV_LEN (5 * 4096)
#define OV_OFF 50
#define OV_SPAN (4 * 4096)
#define OV_MID (2 * 4096 + 10)
#define OV_CTR (2 * 4096 + 16)

struct info3 {
	uint64_t addr;
	uint32_t dead, span, ro, qpn;
	uint64_t remap_addr;   /* pages mapped anew under a dead MR */
	uint32_t remap, rsvd;
};

static void server3(struct ibv_context *ctx, struct ibv_pd *pd, int fd)
{
	const int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			IBV_ACCESS_REMOTE_ATOMIC;
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	struct ibv_mr *small, *again, *ro, *span;
	struct ibv_qp *qp;
	uint8_t *ov = pages(OV_LEN);
	struct info3 me;
	uint32_t qpn = 0;
	uint64_t ctr, want;

	if (!cq)
		die("cq (overlap)");
	qp = mkqp(pd, cq, cq, 4, 0, 1);
	memset(ov, 0x33, OV_LEN);
	small = ibv_reg_mr(pd, ov + 100, 200, acc);
	ro = ibv_reg_mr(pd, ov + OV_MID, 100, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	again = ibv_reg_mr(pd, ov + 100, 200, acc);
	span = ibv_reg_mr(pd, ov + OV_OFF, OV_SPAN, acc);
	if (!small || !ro || !again || !span)
		die("ibv_reg_mr of buffers sharing pages with earlier MRs");
	if (again->rkey == small->rkey || span->rkey == small->rkey || span->rkey == ro->rkey)
		die("overlapping MRs share an rkey");
	for (int i = 0; i < OV_LEN; i++)
		if (ov[i] != 0x33)
			die("overlapping registrations changed the buffer's contents");
	/* Pages an MR held, unmapped and mapped anew by the application (as a
	 * heap trims and grows) while a dead MR's region is kept for another
	 * MR: a new MR over them must reach the new pages, not the old ones. */
	uint8_t *rm = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *ra, *rz, *rb;

	if (rm == MAP_FAILED)
		die("mmap");
	memset(rm, 0x11, 3 * 4096);
	ra = ibv_reg_mr(pd, rm, 3 * 4096, acc);
	rz = ibv_reg_mr(pd, rm + 2 * 4096 + 100, 100, acc);
	if (!ra || !rz || ibv_dereg_mr(ra))
		die("ibv_reg_mr / dereg (remapped pages)");
	if (mmap(rm, 2 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != rm)
		die("mmap MAP_FIXED");
	memset(rm, 0x5a, 2 * 4096);
	rb = ibv_reg_mr(pd, rm, 2 * 4096, acc);
	if (!rb)
		die("ibv_reg_mr over pages mapped anew");
	me = (struct info3){ (uintptr_t)ov, small->rkey, span->rkey, ro->rkey, qp->qp_num,
			     (uintptr_t)rm, rb->rkey, 0 };
	if (ibv_dereg_mr(small))
		die("dereg of an MR whose page another MR uses");
	if (ibv_dereg_mr(small) != EINVAL)
		die("a second dereg of one MR did not give EINVAL");
	if (write(fd, &me, sizeof(me)) != sizeof(me) || read(fd, &qpn, sizeof(qpn)) != sizeof(qpn))
		die("exchange (overlap)");
	connect_qp_gid(qp, qpn, &peer_gid, 1, 7);
	sync_byte(fd, 0, 'o');
	for (int i = 0; i < OV_LEN; i++) {
		bool in = i >= OV_OFF && i < OV_OFF + OV_SPAN;
		uint8_t w = in ? pat((uint32_t)(i - OV_OFF), 9) : 0x33;

		if (i >= OV_CTR && i < OV_CTR + 8)
			continue;
		if (ov[i] != w) {
			fprintf(stderr, "page %d byte %d: expected 0x%02x, found 0x%02x\n", i / 4096,
				i % 4096, w, ov[i]);
			die("the owner's pages do not hold what was written through overlapping MRs");
		}
	}
	want = 0;
	for (int b = 7; b >= 0; b--)
		want = want << 8 | pat((uint32_t)(OV_CTR - OV_OFF + b), 9);
	memcpy(&ctr, ov + OV_CTR, 8);
	if (ctr != want + 5)
		die("FETCH_ADD through the spanning MR's key did not land on page 2");
	for (int i = 0; i < 2 * 4096; i++)
		if (rm[i] != (i >= 10 && i < 110 ? pat((uint32_t)i, 11) : 0x5a)) {
			fprintf(stderr, "byte %d: 0x%02x\n", i, rm[i]);
			die("a WRITE through the MR over pages mapped anew did not reach them");
		}
	if (ibv_dereg_mr(rb) || ibv_dereg_mr(rz))
		die("dereg (remapped pages)");
	munmap(rm, 3 * 4096);
	if (ibv_dereg_mr(span) || ibv_dereg_mr(ro) || ibv_dereg_mr(again))
		die("dereg (overlap)");
	if (ov[OV_OFF] != pat(0, 9))
		die("deregistration lost the buffer's contents (overlap)");
	sync_byte(fd, 'O', 0);
	printf("verbs_check server: 4 MRs sharing pages (one deregistered early): every byte of "
	       "the 5 pages right; an MR over pages mapped anew reaches the new pages\n");
	if (ibv_destroy_qp(qp) || ibv_destroy_cq(cq))
		die("release (overlap)");
	free(ov);
}

static void expect_wc(struct ibv_cq *cq, uint64_t id, enum ibv_wc_status st, const char *what)
{
	struct ibv_wc wc = wait_wc(cq);

	if (wc.wr_id != id || wc.status != st) {
		fprintf(stderr, "%s: expected wr_id %" PRIu64 " %s, got wr_id %" PRIu64 " %s\n", what,
			id, ibv_wc_status_str(st), wc.wr_id, ibv_wc_status_str(wc.status));
		die(what);
	}
}

static void client3(struct ibv_context *ctx, struct ibv_pd *pd, int s)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp *q[3];
	uint8_t *lb = pages(3 * OV_SPAN);
	uint8_t *back = lb + OV_SPAN, *old = lb + 2 * OV_SPAN;
	struct ibv_mr *mr;
	struct info3 peer;
	uint64_t v, want = 0;

	if (!cq)
		die("cq (overlap)");
	mr = ibv_reg_mr(pd, lb, 3 * OV_SPAN, IBV_ACCESS_LOCAL_WRITE);
	if (!mr || read(s, &peer, sizeof(peer)) != sizeof(peer))
		die("exchange (overlap)");
	for (int i = 0; i < 3; i++) {
		q[i] = mkqp(pd, cq, cq, 8, 0, 1);
		connect_qp_gid(q[i], peer.qpn, &peer_gid, 1, 7);
	}
	if (write(s, &q[0]->qp_num, 4) != 4)
		die("exchange (overlap)");
	fill(lb, OV_SPAN, 0, 9);
	rc_post(q[0], IBV_WR_RDMA_WRITE, lb, OV_SPAN, mr->lkey, peer.addr + OV_OFF, peer.span, 0, 0, 1);
	expect_wc(cq, 1, IBV_WC_SUCCESS, "WRITE across MRs sharing pages");
	memset(back, 0, OV_SPAN);
	rc_post(q[0], IBV_WR_RDMA_READ, back, OV_SPAN, mr->lkey, peer.addr + OV_OFF, peer.span, 0, 0, 2);
	expect_wc(cq, 2, IBV_WC_SUCCESS, "READ across MRs sharing pages");
	check_bytes(back, OV_SPAN, 0, 9, "READ back through the spanning MR");
	memset(back, 0, 100);
	rc_post(q[0], IBV_WR_RDMA_READ, back, 100, mr->lkey, peer.addr + OV_MID, peer.ro, 0, 0, 3);
	expect_wc(cq, 3, IBV_WC_SUCCESS, "READ through the read-only MR");
	check_bytes(back, 100, OV_MID - OV_OFF, 9, "READ through the read-only MR");
	rc_post(q[0], IBV_WR_ATOMIC_FETCH_AND_ADD, old, 8, mr->lkey, peer.addr + OV_CTR, peer.span, 5, 0,
	     4);
	expect_wc(cq, 4, IBV_WC_SUCCESS, "FETCH_ADD through the spanning MR");
	for (int b = 7; b >= 0; b--)
		want = want << 8 | pat((uint32_t)(OV_CTR - OV_OFF + b), 9);
	memcpy(&v, old, 8);
	if (v != want)
		die("FETCH_ADD's old value is not the bytes the WRITE put there");
	/* the MR over pages mapped anew: their new bytes, and a WRITE lands there */
	memset(back, 0, 2 * 4096);
	rc_post(q[0], IBV_WR_RDMA_READ, back, 2 * 4096, mr->lkey, peer.remap_addr, peer.remap, 0, 0, 40);
	expect_wc(cq, 40, IBV_WC_SUCCESS, "READ through the MR over pages mapped anew");
	for (int i = 0; i < 2 * 4096; i++)
		if (back[i] != 0x5a)
			die("a READ through the MR over pages mapped anew returned the old pages' bytes");
	fill(lb, 100, 10, 11);
	rc_post(q[0], IBV_WR_RDMA_WRITE, lb, 100, mr->lkey, peer.remap_addr + 10, peer.remap, 0, 0, 41);
	expect_wc(cq, 41, IBV_WC_SUCCESS, "WRITE through the MR over pages mapped anew");
	/* each on the QP the server's is connected to (a QP it is not
	 * connected to gets RETRY_EXC_ERR, as on a NIC), reset and connected
	 * again after the error */
	rc_post(q[0], IBV_WR_RDMA_WRITE, lb, 8, mr->lkey, peer.addr + OV_MID, peer.ro, 0, 0, 5);
	expect_wc(cq, 5, IBV_WC_REM_ACCESS_ERR, "a WRITE with a read-only MR's key");
	if (ibv_modify_qp(q[0], &(struct ibv_qp_attr){ .qp_state = IBV_QPS_RESET }, IBV_QP_STATE))
		die("reset (overlap)");
	connect_qp_gid(q[0], peer.qpn, &peer_gid, 1, 7);
	rc_post(q[0], IBV_WR_RDMA_READ, back, 8, mr->lkey, peer.addr + 100, peer.dead, 0, 0, 6);
	expect_wc(cq, 6, IBV_WC_REM_ACCESS_ERR, "a READ with a deregistered MR's key");
	rc_post(q[1], IBV_WR_RDMA_READ, back, 8, mr->lkey, peer.addr + OV_MID, peer.ro, 0, 0, 7);
	expect_wc(cq, 7, IBV_WC_RETRY_EXC_ERR, "a READ on a QP the server's QP is not connected to");
	sync_byte(s, 'o', 'O');
	printf("verbs_check client: WRITE/READ/FETCH_ADD across MRs sharing pages right; read-only "
	       "key WRITE and deregistered key -> REM_ACCESS_ERR; a QP the server's is not connected "
	       "to -> RETRY_EXC_ERR\n");
	for (int i = 0; i < 3; i++)
		if (ibv_destroy_qp(q[i]))
			die("release (overlap)");
	if (ibv_dereg_mr(mr) || ibv_destroy_cq(cq))
		die("release (overlap)");
	free(lb);
}

/* The out-of-band TCP connection of a two-process check: the server
 * listens on @s and returns the accepted socket, the client connects @s. */
/* The end of a two-process check (unpolled, lategrant): its sockets, its
 * verbs objects, its buffer. */
static int release_one(bool server, int fd, int s, struct ibv_qp *qp, struct ibv_mr *mr,
		       struct ibv_cq *cq, struct ibv_pd *pd, struct ibv_context *ctx,
		       struct ibv_device **dl, uint8_t *b)
{
	if (server)
		close(fd);
	close(s);
	if (ibv_destroy_qp(qp) || ibv_dereg_mr(mr) || ibv_destroy_cq(cq) || ibv_dealloc_pd(pd) ||
	    ibv_close_device(ctx))
		die("release");
	ibv_free_device_list(dl);
	free(b);
	return 0;
}

/* ------------------------------------------- progress nobody polls for */

/*
 * A process of its own on each side, with nothing else going on: the
 * server posts its RECV while its QP is in INIT (as ibv_rc_pingpong and
 * rdma_server do), connects, then waits in read(2) polling nothing; the
 * client sends BIG through the server's 64 KiB ring and must see its SEND
 * complete, which takes the server's library emptying the ring.
 *   verbs_check unpolled-server|unpolled-client ADDR PORT
 */
static int unpolled(bool server, const char *addr, int port)
{
	struct ibv_device **dl = ibv_get_device_list(NULL);
	struct ibv_context *ctx = dl && dl[0] ? ibv_open_device(dl[0]) : NULL;
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
	struct ibv_qp *qp = cq ? mkqp(pd, cq, cq, 4, 4, 1) : NULL;
	uint8_t *b = pages(BIG);
	struct ibv_mr *mr = qp ? ibv_reg_mr(pd, b, BIG, IBV_ACCESS_LOCAL_WRITE) : NULL;
	uint32_t me, peer = 0;
	int s = socket(AF_INET, SOCK_STREAM, 0), fd = s;
	struct ibv_sge sg = { (uintptr_t)b, BIG, mr ? mr->lkey : 0 };
	struct ibv_wc wc;
	char c;

	if (!mr)
		die("unpolled: device, pd, cq, qp or mr");
	me = qp->qp_num;
	if (server) {
		memset(b, 0xee, BIG);
		init_qp(qp);
		post_recv(qp, 1, b, BIG, NULL, 0, mr->lkey);   /* before RTR */
	}
	fd = rc_oob_connect(server, s, addr, port);
	if (write(fd, &me, sizeof(me)) != sizeof(me) || read(fd, &peer, sizeof(peer)) != sizeof(peer))
		die("unpolled: exchange");
	peer_gid = rc_xchg_gid(fd, ctx);
	connect_qp_gid(qp, peer, &peer_gid, 1, 7);
	if (server) {
		/* connected: in read(2) until the client's SEND completed */
		if (write(fd, "g", 1) != 1 || read(fd, &c, 1) != 1 || c != 'd')
			die("unpolled: the client's SEND did not complete while we polled nothing");
		expect_recv(cq, 1, IBV_WC_RECV, BIG, false, 0, qp->qp_num, peer);
		check_bytes(b, BIG, 0, 9, "a SEND received while we polled nothing");
		printf("verbs_check unpolled: a %d-byte SEND through our 64 KiB ring completed while "
		       "we polled nothing (RECV posted before RTR), and arrived intact\n", BIG);
	} else {
		fill(b, BIG, 0, 9);
		if (read(fd, &c, 1) != 1 || c != 'g')
			die("unpolled: exchange");
		post2(qp, IBV_WR_SEND, 2, &sg, 1, 0, 0, 0, 0);
		wc = wait_wc(cq);
		if (wc.wr_id != 2 || wc.status != IBV_WC_SUCCESS)
			die_wc("unpolled: a SEND to a receiver that polls nothing", &wc);
		if (write(fd, "d", 1) != 1)
			die("unpolled: exchange");
	}
	return release_one(server, fd, s, qp, mr, cq, pd, ctx, dl, b);
}

/* ------------------------------------------------- a grant published late */

/*
 * An rkey whose grant reaches the registry late: the server registers its MR,
 * then holds the file registry's lock on its tenant directory
 * ($VERBS_CHECK_REGDIR, as another roshmd of the host may hold it, or a slow
 * fsync would) while it connects its QP, so that the grant's record fails
 * to be written and its roshmd writes it again only after LATE_MS (within
 * 100 ms: rd_grants_timer). The client's WRITE to that rkey, posted at
 * once, must wait for the grant and land, not fail with REM_ACCESS_ERR as
 * it did when the requester gave up after 0.5 s (riostream then hung).
 *   verbs_check lategrant-server|lategrant-client ADDR PORT
 */
#define LATE_MS 1000
static int lategrant(bool server, const char *addr, int port)
{
	struct ibv_device **dl = ibv_get_device_list(NULL);
	struct ibv_context *ctx = dl && dl[0] ? ibv_open_device(dl[0]) : NULL;
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
	struct ibv_qp *qp = cq ? mkqp(pd, cq, cq, 4, 0, 1) : NULL;
	uint8_t *b = pages(4096);
	struct ibv_mr *mr = qp ? ibv_reg_mr(pd, b, 4096, IBV_ACCESS_LOCAL_WRITE |
					    IBV_ACCESS_REMOTE_WRITE) : NULL;
	struct { uint32_t qpn, rkey; uint64_t addr; } me, peer;
	int s = socket(AF_INET, SOCK_STREAM, 0), fd = s, lock = -1;
	struct ibv_sge sg = { (uintptr_t)b, 64, mr ? mr->lkey : 0 };
	const char *regdir = getenv("VERBS_CHECK_REGDIR");
	struct timespec t0, t1;
	struct ibv_wc wc;
	char c;

	if (!mr)
		die("lategrant: device, pd, cq, qp or mr");
	memset(&peer, 0, sizeof(peer));
	me.qpn = qp->qp_num;
	me.rkey = mr->rkey;
	me.addr = (uintptr_t)b;
	if (server) {
		if (!regdir || (lock = open(regdir, O_RDONLY | O_DIRECTORY)) < 0)
			die("lategrant: VERBS_CHECK_REGDIR (the tenant's directory of the file registry)");
		memset(b, 0, 4096);
	}
	fd = rc_oob_connect(server, s, addr, port);
	/* both QPs (and their rings' records) exist before the lock is taken */
	if (write(fd, &me, sizeof(me)) != sizeof(me) || read(fd, &peer, sizeof(peer)) != sizeof(peer))
		die("lategrant: exchange");
	peer_gid = rc_xchg_gid(fd, ctx);
	if (server) {
		if (flock(lock, LOCK_EX))
			die("lategrant: flock");
		connect_qp_gid(qp, peer.qpn, &peer_gid, 1, 7);   /* its grant to the client: not written */
		if (write(fd, "g", 1) != 1)
			die("lategrant: exchange");
		usleep(LATE_MS * 1000);
		flock(lock, LOCK_UN);
		close(lock);
		if (read(fd, &c, 1) != 1 || c != 'd')
			die("lategrant: the client's WRITE did not complete");
		check_bytes(b, 64, 0, 11, "a WRITE through a late grant");
		printf("verbs_check lategrant: a WRITE to an rkey whose grant reached the registry "
		       "%d ms late waited for it and landed\n", LATE_MS);
	} else {
		connect_qp_gid(qp, peer.qpn, &peer_gid, 1, 7);
		fill(b, 64, 0, 11);
		if (read(fd, &c, 1) != 1 || c != 'g')
			die("lategrant: exchange");
		clock_gettime(CLOCK_MONOTONIC, &t0);
		post2(qp, IBV_WR_RDMA_WRITE, 3, &sg, 1, 0, 0, peer.addr, peer.rkey);
		wc = wait_wc(cq);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (wc.wr_id != 3 || wc.status != IBV_WC_SUCCESS)
			die_wc("lategrant: a WRITE to an rkey whose grant is late", &wc);
		printf("verbs_check lategrant: the WRITE completed after %ld ms\n",
		       (long)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000));
		if (write(fd, "d", 1) != 1)
			die("lategrant: exchange");
	}
	return release_one(server, fd, s, qp, mr, cq, pd, ctx, dl, b);
}

int main(int argc, char **argv)
{
	struct ibv_device **dl;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 16, .max_send_sge = 1 } };
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct info me, peer;
	int s, fd, server;
	uint8_t *buf;

	if (argc == 2 && !strcmp(argv[1], "srq-fair")) {   /* a process of its own */
		dl = ibv_get_device_list(NULL);
		if (!dl || !dl[0])
			die("device roshm0 not listed");
		srq_fair(dl[0]);
		ibv_free_device_list(dl);
		return 0;
	}
	if (argc != 4)
		return 2;
	if (!strcmp(argv[1], "unpolled-server")) {
		setenv("ROSHM_VERBS_RECV_RING", "65536", 1);
		return unpolled(true, argv[2], atoi(argv[3]));
	}
	if (!strcmp(argv[1], "unpolled-client"))
		return unpolled(false, argv[2], atoi(argv[3]));
	if (!strcmp(argv[1], "lategrant-server") || !strcmp(argv[1], "lategrant-client"))
		return lategrant(!strcmp(argv[1], "lategrant-server"), argv[2], atoi(argv[3]));
	server = !strcmp(argv[1], "server");
	if (server)   /* read by ibv_open_device: the rings of the two-sided checks */
		setenv("ROSHM_VERBS_RECV_RING", "65536", 1);
	sa.sin_port = htons((uint16_t)atoi(argv[3]));
	inet_pton(AF_INET, argv[2], &sa.sin_addr);
	dl = ibv_get_device_list(NULL);
	if (!dl || !dl[0] || strcmp(ibv_get_device_name(dl[0]), "roshm0"))
		die("device roshm0 not listed");
	ctx = ibv_open_device(dl[0]);
	if (!ctx)
		die("ibv_open_device");
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	qa.send_cq = qa.recv_cq = cq;
	qp = pd && cq ? ibv_create_qp(pd, &qa) : NULL;
	if (!qp)
		die("pd/cq/qp");
	/* an ordinary heap buffer, not page aligned, with bytes already in it */
	buf = malloc(LEN + 64);
	if (!buf)
		die("malloc");
	buf += 8;
	memset(buf, 0x5a, LEN);
	memset(buf + CTR, 0, 8);
	mr = ibv_reg_mr(pd, buf, LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	if (!mr)
		die("ibv_reg_mr");
	if (buf[0] != 0x5a || buf[LEN - 1] != 0x5a)
		die("registration changed the buffer's contents");
	me = (struct info){ (uintptr_t)buf, mr->rkey, qp->qp_num };
	s = socket(AF_INET, SOCK_STREAM, 0);
	if (server) {
		int one = 1;
		char done;

		setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) || listen(s, 1))
			die("listen");
		fd = accept(s, NULL, NULL);
		if (fd < 0 || write(fd, &me, sizeof(me)) != sizeof(me) ||
		    read(fd, &peer, sizeof(peer)) != sizeof(peer))
			die("exchange");
		peer_gid = rc_xchg_gid(fd, ctx);
		/* connected to the client's QP: from now on its owner may use our MR */
		connect_qp_gid(qp, peer.qpn, &peer_gid, 1, 7);
		if (write(fd, "c", 1) != 1 || read(fd, &done, 1) != 1)
			die("exchange");
		for (int i = 0; i < LEN; i++) {
			uint8_t want = i >= OFF && i < OFF + PLEN ? (uint8_t)(i * 7 + 1) : 0x5a;

			if (i >= CTR && i < CTR + 8)
				continue;
			if (buf[i] != want) {
				fprintf(stderr, "byte %d: expected 0x%02x, found 0x%02x\n", i, want, buf[i]);
				die("the owner's buffer does not hold what was written");
			}
		}
		uint64_t ctr;

		memcpy(&ctr, buf + CTR, 8);
		if (ctr != 1000)
			die("counter is not 1000 after FETCH_ADD 42 and CMP_SWAP 42 -> 1000");
		printf("verbs_check server: %d written bytes and the atomic counter are right in the owner's buffer\n",
		       PLEN);
		server2(ctx, pd, fd);
		server3(ctx, pd, fd);
		many_qps(ctx, dl[0]);
		if (ibv_dereg_mr(mr))
			die("dereg");
		if (buf[OFF] != 1 * (uint8_t)(OFF * 7 + 1))
			die("deregistration lost the buffer's contents");
		/* everything goes back, as an application must (leak-checked) */
		if (ibv_destroy_qp(qp) || ibv_destroy_cq(cq) || ibv_dealloc_pd(pd) ||
		    ibv_close_device(ctx))
			die("release");
		ibv_free_device_list(dl);
		free(buf - 8);
		close(s);
		return 0;
	}
	char connected;

	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) ||
	    read(s, &peer, sizeof(peer)) != sizeof(peer) || write(s, &me, sizeof(me)) != sizeof(me))
		die("exchange");
	peer_gid = rc_xchg_gid(s, ctx);
	connect_qp_gid(qp, peer.qpn, &peer_gid, 1, 7);
	if (read(s, &connected, 1) != 1)
		die("exchange (connected)");
	uint8_t *src = buf, *back = buf + 4096;
	uint64_t old = 0;
	struct ibv_wc wc;

	for (int i = 0; i < PLEN; i++)
		src[i] = (uint8_t)((OFF + i) * 7 + 1);
	rc_post(qp, IBV_WR_RDMA_WRITE, src, PLEN, mr->lkey, peer.addr + OFF, peer.rkey, 0, 0, 1);
	wc = wait_wc(cq);
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != 1 || wc.opcode != IBV_WC_RDMA_WRITE)
		die_wc("WRITE completion", &wc);
	memset(back, 0, PLEN);
	rc_post(qp, IBV_WR_RDMA_READ, back, PLEN, mr->lkey, peer.addr + OFF, peer.rkey, 0, 0, 2);
	wc = wait_wc(cq);
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != 2 || memcmp(back, src, PLEN))
		die("READ back differs from what was written");
	rc_post(qp, IBV_WR_ATOMIC_FETCH_AND_ADD, buf + 8000, 8, mr->lkey, peer.addr + CTR, peer.rkey,
	     42, 0, 3);
	wc = wait_wc(cq);
	memcpy(&old, buf + 8000, 8);
	if (wc.status != IBV_WC_SUCCESS || old != 0)
		die("FETCH_ADD");
	rc_post(qp, IBV_WR_ATOMIC_CMP_AND_SWP, buf + 8000, 8, mr->lkey, peer.addr + CTR, peer.rkey,
	     42, 1000, 4);
	wc = wait_wc(cq);
	memcpy(&old, buf + 8000, 8);
	if (wc.status != IBV_WC_SUCCESS || old != 42)
		die("CMP_SWAP");
	/* a forged rkey: remote access error, and the QP flushes what follows */
	rc_post(qp, IBV_WR_RDMA_WRITE, src, 8, mr->lkey, peer.addr + OFF, peer.rkey ^ 0x5a5a, 0, 0, 5);
	rc_post(qp, IBV_WR_RDMA_WRITE, src, 8, mr->lkey, peer.addr + OFF, peer.rkey, 0, 0, 6);
	wc = wait_wc(cq);
	if (wc.status != IBV_WC_REM_ACCESS_ERR || wc.wr_id != 5)
		die("a forged rkey did not give IBV_WC_REM_ACCESS_ERR");
	wc = wait_wc(cq);
	if (wc.status != IBV_WC_WR_FLUSH_ERR || wc.wr_id != 6)
		die("the WR after an error did not flush");
	if (write(s, "d", 1) != 1)
		die("exchange");
	printf("verbs_check client: WRITE, READ back, FETCH_ADD, CMP_SWAP right; forged rkey -> "
	       "REM_ACCESS_ERR, next WR -> WR_FLUSH_ERR\n");
	client2(ctx, pd, s);
	client3(ctx, pd, s);
	if (ibv_destroy_qp(qp) || ibv_dereg_mr(mr) || ibv_destroy_cq(cq) || ibv_dealloc_pd(pd) ||
	    ibv_close_device(ctx))
		die("release");
	ibv_free_device_list(dl);
	free(buf - 8);
	close(s);
	return 0;
}
