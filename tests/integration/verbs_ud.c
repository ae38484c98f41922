// SPDX-License-Identifier: MIT
/*
 * UD QPs through libroshm-verbs, between a server (node a) and a client
 * (node b) of check_verbs_perftest.sh, each checking what it receives:
 *  1. datagrams of 0 to 4096 bytes, SEND and SEND_WITH_IMM: each RECV holds
 *     a 40-byte GRH (sgid the sender's GID, dgid ours) and exactly the bytes
 *     sent; byte_len, src_qp, wc_flags and imm_data right;
 *  2. a datagram with a wrong Q_Key never arrives; one whose remote Q_Key
 *     has the high bit set uses the sender QP's own Q_Key and does;
 *  3. a datagram longer than the RECV: IBV_WC_LOC_LEN_ERR, and the QP stays
 *     usable (the next datagram arrives);
 *  4. a pod of the tenant with its own libroshm opens the server's ring: it
 *     may not READ it nor use an atomic on its slots (EACCES: no one reads
 *     another's datagrams), nor write the states or the header page; slots it fills with broken headers (too
 *     long, a token that is not the state's, an unknown opcode, a wrong
 *     Q_Key) or junk states are dropped, and the next datagram arrives
 *     intact; with every other slot claimed by the pod, the next datagram
 *     goes round the ring to the one left (its sender's claim ahead, too
 *     old to use, given back); slots it claims and never fills make a
 *     datagram lost (it
 *     still completes as sent) until the owner frees them, then the next
 *     one arrives;
 *  5. the server answers through ibv_create_ah_from_wc (the GRH it got);
 *  6. refused at the post: RDMA WRITE on UD, more than the MTU;
 *     IBV_QP_DEST_QPN on a UD QP; a datagram to a QPN nobody has
 *     completes as sent; an armed CQ's notifier sleeps after a lost one;
 *  7. a QP of another tenant (VERBS_CHECK_OTHER=TENANT:TOKEN in the
 *     server's environment) sends to the server's QP: nothing arrives;
 *  8. a pod of the tenant that learned two waiting datagrams' states by
 *     CAS marks their slots FULL again after the owner took them: nothing
 *     is delivered twice; publishing a header of its own there under the
 *     old token delivers zeros, not the old payload (the slot was wiped);
 *  9. the client posts a datagram to a QP it never sent to (a lookup, a
 *     claim, then the WRITE: steps a NIC takes alone) and then waits in
 *     read(2), polling nothing: the datagram must arrive all the same;
 * 10. two UD QPs of the server share an SRQ: datagrams to each take the
 *     SRQ's RECVs (each RECV once, on the QP the datagram was sent to, bytes
 *     right), an armed SRQ limit raises IBV_EVENT_SRQ_LIMIT_REACHED, a QP on
 *     it refuses ibv_post_recv, the SRQ cannot go while its QPs are there.
 *     First a third QP of the SRQ found a datagram while the SRQ was empty
 *     (first in the SRQ's line), which then became junk for it (its Q_Key
 *     changed): it must not hold the others' turn.
 * 11. a fresh QP of the server whose slots a pod of the tenant holds
 *     claimed, all but two: the client's datagram starts at the last slot
 *     (the test knob below), finds all others taken in a row and must go on
 *     to the free ones (it once went back to a taken slot and waited there
 *     until the datagram was dropped, with the ring not full);
 * 12. a datagram waiting for a slot whose MR is deregistered and unmapped
 *     fails with LOC_PROT_ERR and never arrives; its QP goes to SQE, as a
 *     NIC's (its RECV stays, a send is flushed), and sends again after RTS.
 *   verbs_ud server|client ADDR PORT
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "roshm.h"
#include "rv.h"   /* the UD ring's layout, for the hostile writer */
#define UD_PROG "verbs_ud"
#include "ud_common.h"

static const uint32_t lens[] = { 0, 1, 7, 64, 1000, 2048, 4095, 4096, 333, 3 };
#define NLENS (sizeof(lens) / sizeof(lens[0]))

struct uinfo {
	uint32_t qpn, qpn2, qpn3;
	uint8_t gid[16];
};

/* The next receive completion: datagram @seed of @len bytes from @src. */
static struct ibv_wc expect_dgram(struct ud *u, uint32_t len, uint32_t seed, bool imm, uint32_t src,
				  const uint8_t *sgid, int ms, const char *what)
{
	struct ibv_wc wc;
	const uint8_t *b;
	const struct ibv_grh *g;

	if (!next_wc(u->cq, &wc, ms)) {
		fprintf(stderr, "%s: nothing arrived\n", what);
		die("a datagram did not arrive");
	}
	b = u->buf + (size_t)wc.wr_id * RSZ;
	g = (const struct ibv_grh *)b;
	if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV ||
	    wc.byte_len != len + RV_UD_GRH || wc.src_qp != src || !(wc.wc_flags & IBV_WC_GRH) ||
	    !!(wc.wc_flags & IBV_WC_WITH_IMM) != imm || (imm && wc.imm_data != IMM(seed)) ||
	    memcmp(g->sgid.raw, sgid, 16) || memcmp(g->dgid.raw, u->gid.raw, 16) ||
	    !same(b + RV_UD_GRH, len, seed)) {
		fprintf(stderr, "%s: status %s byte_len %u (want %u) src_qp %06x (want %06x) flags %x "
			"imm %08x, sgid %s, dgid %s, bytes %s\n", what, ibv_wc_status_str(wc.status),
			wc.byte_len, len + RV_UD_GRH, wc.src_qp, src, wc.wc_flags, wc.imm_data,
			memcmp(g->sgid.raw, sgid, 16) ? "wrong" : "ok",
			memcmp(g->dgid.raw, u->gid.raw, 16) ? "wrong" : "ok",
			same(b + RV_UD_GRH, len, seed) ? "ok" : "wrong");
		die("a datagram is not the one sent");
	}
	if (b[RV_UD_GRH + len] != 0xee)
		die("a datagram wrote past its length");
	post_recv(u, u->qp, (uint32_t)wc.wr_id, RSZ);
	return wc;
}

/* ------------------------------------------------------------ server */

static void other_tenant(struct ud *u, int fd, const struct uinfo *peer)
{
	char *other = getenv("VERBS_CHECK_OTHER"), *tok;
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1 };
	struct ud o;
	struct ibv_ah *ah;

	if (!other || !(tok = strchr(other, ':')))
		return;
	*tok++ = 0;
	setenv("ROSHM_TENANT", other, 1);
	setenv("ROSHM_TOKEN", tok, 1);
	memset(&o, 0, sizeof(o));
	ud_open(&o);
	unsetenv("ROSHM_TENANT");
	unsetenv("ROSHM_TOKEN");
	aa.grh.dgid = u->gid;
	if (!(ah = ibv_create_ah(o.pd, &aa)) || send_ud(&o, o.qp, ah, u->qp->qp_num, QK, 17, 17, false,
							 IBV_WR_SEND))
		die("other tenant: ah / send");
	sent_ok(&o, "a datagram of another tenant");
	sync_byte(fd, '7');
	expect_dgram(u, 18, 18, false, peer->qpn, peer->gid, 10000,
		     "phase 7: the next datagram (not the other tenant's)");
	if (ibv_destroy_ah(ah) || ibv_destroy_qp(o.qp) || ibv_dereg_mr(o.mr) || ibv_destroy_cq(o.cq) ||
	    ibv_dealloc_pd(o.pd) || ibv_close_device(o.ctx))
		die("other tenant: release");
	free(o.buf);
	printf("verbs_ud: a QP of another tenant sent to ours: nothing arrived\n");
}

/* 10: datagrams 23..26 (to QPs a, a, b, b; 24 and 26 with an immediate)
 * land in the RECVs of the SRQ the two share */
static void srq_phase(struct ud *u, int fd, const struct uinfo *peer)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 8, .max_sge = 1 } };
	struct ibv_srq_attr lim = { .srq_limit = 2 };
	struct ibv_recv_wr *bad;
	struct ibv_async_event ev;
	struct pollfd pfd = { .fd = u->ctx->async_fd, .events = POLLIN };
	struct ibv_srq *srq = ibv_create_srq(u->pd, &sa);
	struct ibv_qp *qa = NULL, *qb = NULL, *qc = NULL;
	struct ibv_qp_attr qk = { .qkey = QK + 7 };
	uint32_t qpns[3], taken = 0;
	struct ibv_wc wc;
	struct ibv_mr *mr;
	uint8_t *buf;

	if (posix_memalign((void **)&buf, 4096, 4 * (size_t)RSZ))
		die("posix_memalign");
	memset(buf, 0xee, 4 * (size_t)RSZ);
	if (!srq || !(qa = ud_qp(u, 0, srq)) || !(qb = ud_qp(u, 0, srq)) || !(qc = ud_qp(u, 0, srq)) ||
	    !(mr = ibv_reg_mr(u->pd, buf, 4 * (size_t)RSZ, IBV_ACCESS_LOCAL_WRITE)))
		die("phase 10: an SRQ, three UD QPs on it, an MR");
	qpns[0] = qa->qp_num;
	qpns[1] = qb->qp_num;
	qpns[2] = qc->qp_num;
	sync_byte(fd, 'S');
	if (write(fd, qpns, sizeof(qpns)) != sizeof(qpns))
		die("exchange");
	/* the client's datagram to qc, the SRQ empty: our polls find it (qc
	 * first in the SRQ's line), then a new Q_Key makes it junk for qc */
	sync_byte(fd, 'h');
	nothing(u, 500, "phase 10: a datagram while the SRQ is empty");
	if (ibv_modify_qp(qc, &qk, IBV_QP_QKEY))
		die("phase 10: a new Q_Key for qc");
	for (uint32_t i = 0; i < 4; i++) {
		struct ibv_sge sg = { (uintptr_t)(buf + (size_t)i * RSZ), RSZ, mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sg, .num_sge = 1 };

		if (ibv_post_srq_recv(srq, &wr, &bad))
			die("phase 10: ibv_post_srq_recv");
	}
	{
		struct ibv_sge sg = { (uintptr_t)buf, RSZ, mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = 99, .sg_list = &sg, .num_sge = 1 };

		if (ibv_post_recv(qa, &wr, &bad) != EINVAL)
			die("phase 10: ibv_post_recv on a QP of an SRQ was taken");
	}
	if (ibv_modify_srq(srq, &lim, IBV_SRQ_LIMIT))
		die("phase 10: arm the SRQ limit");
	sync_byte(fd, 'i');   /* the client sends 23 .. 26 */
	for (int k = 0; k < 4; k++) {
		uint32_t len, seed;
		const uint8_t *b;

		if (!next_wc(u->cq, &wc, 10000))
			die("phase 10: a datagram to a QP of the SRQ did not arrive (held behind a QP "
			    "whose datagram became junk?)");
		len = wc.byte_len - RV_UD_GRH;
		seed = len;
		if (wc.wr_id > 3)
			die("phase 10: a completion with a wr_id never posted");
		b = buf + (size_t)wc.wr_id * RSZ;
		if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV || len < 23 || len > 26 ||
		    (taken & (1u << wc.wr_id)) ||
		    wc.qp_num != qpns[len >= 25] || wc.src_qp != peer->qpn ||
		    !!(wc.wc_flags & IBV_WC_WITH_IMM) != !(len & 1) ||
		    (!(len & 1) && wc.imm_data != IMM(seed)) || !same(b + RV_UD_GRH, len, seed) ||
		    b[RV_UD_GRH + len] != 0xee) {
			fprintf(stderr, "phase 10: status %s byte_len %u wr_id %llu qp_num %06x (a %06x, "
				"b %06x) src_qp %06x\n", ibv_wc_status_str(wc.status), wc.byte_len,
				(unsigned long long)wc.wr_id, wc.qp_num, qpns[0], qpns[1], wc.src_qp);
			die("phase 10: a datagram through the SRQ is not the one sent, or its RECV "
			    "twice, or on the wrong QP");
		}
		taken |= 1u << wc.wr_id;
	}
	if (write(fd, "g", 1) != 1)
		die("exchange");
	/* 4 RECVs, limit 2: the third one taken left 1 */
	if (poll(&pfd, 1, 5000) != 1 || ibv_get_async_event(u->ctx, &ev))
		die("phase 10: no async event after the SRQ went below its limit");
	if (ev.event_type != IBV_EVENT_SRQ_LIMIT_REACHED || ev.element.srq != srq)
		die("phase 10: an async event other than the SRQ's limit");
	ibv_ack_async_event(&ev);
	if (ibv_destroy_srq(srq) != EBUSY)
		die("phase 10: an SRQ with QPs on it was destroyed");
	if (ibv_destroy_qp(qa) || ibv_destroy_qp(qb) || ibv_destroy_qp(qc) || ibv_destroy_srq(srq) ||
	    ibv_dereg_mr(mr))
		die("phase 10: release");
	free(buf);
	printf("verbs_ud: two UD QPs on one SRQ: 4 datagrams took its 4 RECVs once each, on the QP "
	       "each was sent to (a third QP's datagram turned junk held nobody's turn); SRQ limit "
	       "event; post_recv on its QPs refused\n");
}

/* A new UD QP of ours (@nrecv RECVs) for one phase: its QPN to the client
 * after @c, then the client's datagram of @len bytes (seed @len) must
 * arrive in its RECV; then 'g' to the client and the QP goes. */
static void fresh_qp(struct ud *u, int fd, uint32_t nrecv, char c, uint32_t len, const char *what)
{
	struct ibv_qp *q = ud_qp(u, nrecv, NULL);
	struct ibv_wc wc;
	uint32_t qpn;

	if (!q)
		die("a UD QP for a phase");
	post_recv(u, q, 2, RSZ);
	qpn = q->qp_num;
	sync_byte(fd, c);
	if (write(fd, &qpn, sizeof(qpn)) != sizeof(qpn))
		die("exchange");
	if (!next_wc(u->cq, &wc, 10000) || wc.status != IBV_WC_SUCCESS || wc.qp_num != qpn ||
	    wc.byte_len != len + RV_UD_GRH || !same(u->buf + 2 * (size_t)RSZ + RV_UD_GRH, len, len)) {
		fprintf(stderr, "%s: did not arrive\n", what);
		die("a datagram to a new QP");
	}
	if (write(fd, "g", 1) != 1 || ibv_destroy_qp(q))
		die("exchange / destroy");
}

static void server(int fd)
{
	struct ud u;
	struct uinfo me, peer;
	struct ibv_qp *qs, *q3;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	struct ibv_wc wc;
	struct ibv_ah *ah;
	int seen[NLENS] = { 0 };

	memset(&u, 0, sizeof(u));
	ud_open(&u);
	for (uint32_t i = 0; i < NRECV - 2; i++)
		post_recv(&u, u.qp, i, RSZ);
	if (!(qs = ud_qp(&u, 4, NULL)))
		die("second UD QP");
	post_recv(&u, qs, NRECV - 2, 100);
	post_recv(&u, qs, NRECV - 1, 100);
	if (!(q3 = ud_qp(&u, 4, NULL)))   /* phase 8: no RECVs posted at first */
		die("third UD QP");
	me.qpn = u.qp->qp_num;
	me.qpn2 = qs->qp_num;
	me.qpn3 = q3->qp_num;
	memcpy(me.gid, u.gid.raw, 16);
	if (write(fd, &me, sizeof(me)) != sizeof(me) || read(fd, &peer, sizeof(peer)) != sizeof(peer))
		die("exchange");
	/* 1: every size, in whatever order they come */
	for (uint32_t k = 0; k < NLENS; k++) {
		uint32_t i;

		if (!next_wc(u.cq, &wc, 10000))
			die("phase 1: a datagram did not arrive");
		for (i = 0; i < NLENS && lens[i] + RV_UD_GRH != wc.byte_len; i++)
			;
		if (i == NLENS || seen[i]++)
			die("phase 1: a datagram of a length not sent, or twice");
		if (wc.status != IBV_WC_SUCCESS || wc.src_qp != peer.qpn ||
		    !!(wc.wc_flags & IBV_WC_WITH_IMM) != (i & 1) || ((i & 1) && wc.imm_data != IMM(i)) ||
		    memcmp(((struct ibv_grh *)(u.buf + (size_t)wc.wr_id * RSZ))->sgid.raw, peer.gid, 16) ||
		    !same(u.buf + (size_t)wc.wr_id * RSZ + RV_UD_GRH, lens[i], i))
			die("phase 1: a datagram is not the one sent");
		post_recv(&u, u.qp, (uint32_t)wc.wr_id, RSZ);
	}
	printf("verbs_ud: %zu datagrams of 0 to 4096 bytes arrived whole, GRH, src_qp and immediates "
	       "right\n", NLENS);
	/* 2: the wrong Q_Key's never comes; the own-Q_Key one does */
	sync_byte(fd, '2');
	expect_dgram(&u, 12, 12, false, peer.qpn, peer.gid, 10000, "phase 2");
	nothing(&u, 300, "phase 2: the datagram with a wrong Q_Key");
	printf("verbs_ud: a wrong Q_Key is dropped; a remote Q_Key with the high bit set means the "
	       "sender's own\n");
	/* 3: too long for the RECV, then one that fits: the QP lives on */
	sync_byte(fd, '3');
	if (!next_wc(u.cq, &wc, 10000)) {
		die("phase 3: a datagram longer than its RECV: no completion in 10 s");
	} else if (wc.status != IBV_WC_LOC_LEN_ERR || wc.wr_id != NRECV - 2) {
		fprintf(stderr, "phase 3: got %s, wr_id %" PRIu64 ", byte_len %u, QPN %06x\n",
			ibv_wc_status_str(wc.status), wc.wr_id, wc.byte_len, wc.qp_num);
		die("phase 3: a datagram longer than its RECV did not give LOC_LEN_ERR");
	}
	if (!next_wc(u.cq, &wc, 10000) || wc.status != IBV_WC_SUCCESS || wc.byte_len != 50 + RV_UD_GRH ||
	    !same(u.buf + (size_t)(NRECV - 1) * RSZ + RV_UD_GRH, 50, 32))
		die("phase 3: the datagram after LOC_LEN_ERR");
	if (ibv_query_qp(qs, &qa, IBV_QP_STATE | IBV_QP_QKEY, &qi) || qa.qp_state != IBV_QPS_RTS ||
	    qa.qkey != QK || qi.qp_type != IBV_QPT_UD)
		die("phase 3: the QP is not in RTS with its Q_Key after LOC_LEN_ERR");
	printf("verbs_ud: a datagram longer than its RECV: LOC_LEN_ERR, and the QP stays in RTS\n");
	/* 4: the hostile pod's slots, then a datagram */
	sync_byte(fd, '4');
	expect_dgram(&u, 13, 13, false, peer.qpn, peer.gid, 10000, "phase 4: after the junk slots");
	nothing(&u, 300, "phase 4: junk slots");
	sync_byte(fd, 'd');   /* we looked at every slot: the pod claims the free ones */
	/* the client's next datagram went to the one slot left: its own claim
	 * ahead, which it gave back (too old) */
	expect_dgram(&u, 14, 14, false, peer.qpn, peer.gid, 10000,
		     "phase 4: into the slot the sender claimed ahead");
	sync_byte(fd, 'c');   /* the pod claimed that one too; a datagram is lost */
	/* polling meanwhile: we free slots that stay claimed 3 s */
	nothing(&u, 5000, "phase 4: a datagram while every slot is claimed");
	sync_byte(fd, 'f');   /* freed since: the next one arrives */
	wc = expect_dgram(&u, 15, 15, false, peer.qpn, peer.gid, 10000, "phase 4: after the claims");
	printf("verbs_ud: a pod of the tenant cannot read the ring or write its header; its broken "
	       "slots are dropped; slots it claimed are freed and datagrams arrive again\n");
	/* 5: an answer through the AH of the received GRH */
	ah = ibv_create_ah_from_wc(u.pd, &wc, (struct ibv_grh *)(u.buf + (size_t)wc.wr_id * RSZ), 1);
	if (!ah || send_ud(&u, u.qp, ah, wc.src_qp, QK, 16, 16, true, IBV_WR_SEND))
		die("phase 5: ibv_create_ah_from_wc / send");
	sent_ok(&u, "phase 5");
	sync_byte(fd, '5');
	other_tenant(&u, fd, &peer);
	/* 8: two datagrams wait in q3's ring while the pod learns their states */
	sync_byte(fd, '8');
	sync_byte(fd, '9');
	post_recv(&u, q3, 0, RSZ);
	post_recv(&u, q3, 1, RSZ);
	for (int k = 0; k < 2; k++)
		if (!next_wc(u.cq, &wc, 10000) || wc.status != IBV_WC_SUCCESS || wc.qp_num != q3->qp_num ||
		    (wc.byte_len != 21 + RV_UD_GRH && wc.byte_len != 22 + RV_UD_GRH))
			die("phase 8: the two datagrams");
	post_recv(&u, q3, 0, RSZ);
	post_recv(&u, q3, 1, RSZ);
	sync_byte(fd, 'a');   /* the pod marks their freed slots FULL again */
	sync_byte(fd, 'b');
	nothing(&u, 500, "phase 8: a datagram marked FULL again by a pod of the tenant");
	/* a header of its own for the old token, published properly: the
	 * slot's payload must be gone (the owner wiped the whole slot), not
	 * the datagram delivered before */
	sync_byte(fd, 'w');
	if (!next_wc(u.cq, &wc, 10000) || wc.status != IBV_WC_SUCCESS || wc.qp_num != q3->qp_num ||
	    wc.byte_len != 10 + RV_UD_GRH)
		die("phase 8: the pod's own header for an old token");
	for (uint32_t i = 0; i < 10; i++)
		if (u.buf[(size_t)wc.wr_id * RSZ + RV_UD_GRH + i])
			die("phase 8: a slot delivered before was not wiped: its payload came again");
	printf("verbs_ud: slots a pod of the tenant marked FULL again with a datagram's old token "
	       "delivered nothing; under a header of its own, nothing of the old payload\n");
	/* 9: a datagram whose sender polls nothing after the post */
	fresh_qp(&u, fd, 4, 'n', 19, "phase 9: a datagram whose sender stopped polling after the post");
	printf("verbs_ud: a datagram to a new destination arrived while its sender polled nothing "
	       "after the post\n");
	/* 11: the client's datagram past a run of taken slots */
	fresh_qp(&u, fd, RV_UD_MIN_SLOTS, 'k', 27,
		 "phase 11: a datagram to a ring with 2 free slots past all the others taken");
	printf("verbs_ud: a datagram went past the slots a pod of the tenant held to the 2 free "
	       "ones\n");
	/* 12: a datagram whose MR went while it waited for a slot */
	fresh_qp(&u, fd, RV_UD_MIN_SLOTS, 'm', 29,
		 "phase 12: the datagram after one whose MR was deregistered while it waited");
	printf("verbs_ud: nothing of a datagram whose MR went while it waited arrived\n");
	srq_phase(&u, fd, &peer);
	sync_byte(fd, 'e');
	if (ibv_destroy_ah(ah) || ibv_destroy_qp(q3) || ibv_destroy_qp(qs) || ibv_destroy_qp(u.qp) || ibv_dereg_mr(u.mr) ||
	    ibv_destroy_cq(u.cq) || ibv_dealloc_pd(u.pd) || ibv_close_device(u.ctx))
		die("release");
	free(u.buf);
	printf("verbs_ud server: ok\n");
}

/* ------------------------------------------------------------ client */

static uint32_t token(uint32_t i)
{
	return 0x5eed00u + i;
}

/* The pod's claims of every slot of a ring still free, never to be filled:
 * how many it got; *last: the last slot it got. */
static uint32_t claim_free(struct roshm *r, uint32_t h, uint32_t n, uint32_t tok, uint32_t *last)
{
	uint32_t claimed = 0;
	uint64_t old;

	for (uint32_t i = 0; i < n; i++) {
		if (roshm_cmp_swap_sync(r, h, RV_UD_STATES + 8ull * i, 0,
					((uint64_t)token(tok + i) << 2) | RV_UD_CLAIMED, &old))
			die("hostile: claiming");
		if (!old) {
			claimed++;
			*last = i;
		}
	}
	return claimed;
}

/* The pod of the tenant, with its own libroshm: the server's ring. */
static void hostile(struct ud *u, struct ibv_ah *ah, const struct uinfo *peer, int fd)
{
	struct roshm_params p;
	struct roshm *r;
	uint8_t *arena;
	uint32_t h, dh, n = 0, claimed = 0, last = 0;
	uint64_t size = 0, dsize = 0, old;
	char name[ROSHM_NAME_MAX], dname[ROSHM_NAME_MAX];
	int err = 0, ret;
	struct { uint64_t tok, state; uint32_t len, qkey; uint8_t op; } junk[] = {
		{ token(0), ((uint64_t)token(0) << 2) | RV_UD_FULL, 5000, QK, 1 },     /* too long */
		{ token(1), ((uint64_t)token(9) << 2) | RV_UD_FULL, 10, QK, 1 },       /* not the state's */
		{ token(2), ((uint64_t)token(2) << 2) | RV_UD_FULL, 10, QK, 9 },       /* opcode */
		{ token(3), ((uint64_t)token(3) << 2) | RV_UD_FULL, 10, QK + 5, 1 },   /* Q_Key */
		{ token(4), ((uint64_t)token(4) << 2) | 3, 10, QK, 1 },                /* junk state */
	};

	memset(&p, 0, sizeof(p));
	if (!(r = roshm_open(&p, &err)))
		die("hostile: roshm_open");
	arena = roshm_arena(r, NULL);
	snprintf(name, sizeof(name), "ibv-qp-%06x", peer->qpn);
	snprintf(dname, sizeof(dname), "ibv-qpd-%06x", peer->qpn);
	if (roshm_region_open(r, name, &h, &size) || roshm_region_open(r, dname, &dh, &dsize))
		die("hostile: a UD QP's ring is open to the tenant");
	for (uint32_t k = RV_UD_MIN_SLOTS; k <= RV_UD_MAX_SLOTS; k <<= 1)
		if (rv_ud_slots_size(k) == dsize && rv_ud_states_size(k) == size)
			n = k;
	if (!n)
		die("hostile: the ring's size is no UD ring's");
	/* no READ of either; no atomic on the slots (its old value reads them,
	 * as a CAS that cannot match would); no WRITE of the states or of the
	 * header page */
	if ((ret = roshm_read_sync(r, h, RV_UD_STATES, 0, 64)) != -EACCES) {
		fprintf(stderr, "READ of the states: %d\n", ret);
		die("hostile: a pod of the tenant READ a UD ring");
	}
	if ((ret = roshm_read_sync(r, dh, 0, 0, 64)) != -EACCES)
		die("hostile: a pod of the tenant READ a UD ring's slot");
	if ((ret = roshm_cmp_swap_sync(r, dh, RV_UD_HDR, 0x5eed, 0x5eed, &old)) != -EACCES ||
	    (ret = roshm_fetch_add_sync(r, dh, RV_UD_HDR, 0, &old)) != -EACCES) {
		fprintf(stderr, "atomic on a slot: %d\n", ret);
		die("hostile: a pod of the tenant read a UD ring's slot with an atomic");
	}
	memset(arena, 0, 64);
	if ((ret = roshm_write_sync(r, h, RV_UD_STATES, 0, 64)) != -EACCES)
		die("hostile: a pod of the tenant wrote a UD ring's states");
	if ((ret = roshm_cmp_swap_sync(r, h, 0, 0, 1, &old)) != -EFAULT) {
		fprintf(stderr, "header page: %d\n", ret);
		die("hostile: a pod of the tenant wrote a UD ring's header page");
	}
	/* broken slots, published the way a sender does (claim, write, mark);
	 * slots not free (the client's own slot claimed ahead) are skipped */
	for (uint32_t i = 0, at = 0; i < sizeof(junk) / sizeof(junk[0]); at++) {
		struct rv_udh hd = { .token = junk[i].tok, .len = junk[i].len, .qkey = junk[i].qkey,
				     .src_qp = 0x123456, .opcode = junk[i].op };
		uint64_t cl = ((uint64_t)token(50 + i) << 2) | RV_UD_CLAIMED;

		if (at >= n || roshm_cmp_swap_sync(r, h, RV_UD_STATES + 8ull * at, 0, cl, &old))
			die("hostile: claiming a slot");
		if (old)
			continue;
		memcpy(arena, &hd, sizeof(hd));
		memset(arena + RV_UD_HDR, 0x77, 64);
		if (roshm_write_sync(r, dh, (uint64_t)at * RV_UD_STRIDE, 0, RV_UD_HDR + 64) ||
		    roshm_cmp_swap_sync(r, h, RV_UD_STATES + 8ull * at, cl, junk[i].state, &old) ||
		    old != cl)
			die("hostile: filling a slot");
		i++;
	}
	sync_byte(fd, '4');
	if (send_ud(u, u->qp, ah, peer->qpn, QK, 13, 13, false, IBV_WR_SEND))
		die("phase 4: send");
	sent_ok(u, "phase 4");
	sync_byte(fd, 'd');
	/* every free slot claimed, never filled */
	claimed = claim_free(r, h, n, 100, &last);
	if (claimed < n - 2)   /* the junk state, and the client's slot claimed ahead */
		die("hostile: the slots were not free");
	if (claimed == n - 1) {   /* no claim ahead (its slot was not free): one slot back */
		uint64_t cl = ((uint64_t)token(100 + last) << 2) | RV_UD_CLAIMED;

		if (roshm_cmp_swap_sync(r, h, RV_UD_STATES + 8ull * last, cl, 0, &old) || old != cl)
			die("hostile: giving a claim back");
	}
	usleep(600000);   /* the client's slot claimed ahead is too old to use now */
	/* so the next datagram gives that slot back, finds every other one
	 * taken and goes on round the ring to it: the only free one */
	if (send_ud(u, u->qp, ah, peer->qpn, QK, 14, 14, false, IBV_WR_SEND))
		die("phase 4: send into the slot claimed ahead");
	sent_ok(u, "phase 4: into the slot claimed ahead");
	sync_byte(fd, 'c');   /* the server has it: the owner freed its slot */
	if (claim_free(r, h, n, 150, &last) < 1)
		die("hostile: the slot of the datagram delivered was not free");
	/* an armed CQ: the notifier thread runs; after the lost datagram it
	 * must sleep (it spun on the pause between claims before) */
	struct ibv_comp_channel *ch = ibv_create_comp_channel(u->ctx);
	struct ibv_cq *acq = ch ? ibv_create_cq(u->ctx, 4, NULL, ch, 0) : NULL;
	struct rusage ru0, ru1;

	if (!acq || ibv_req_notify_cq(acq, 0))
		die("phase 4: an armed CQ");
	if (send_ud(u, u->qp, ah, peer->qpn, QK, 24, 24, false, IBV_WR_SEND))
		die("phase 4: send while claimed");
	sent_ok(u, "phase 4: a datagram with no slot to go to");   /* lost, and says so nowhere */
	getrusage(RUSAGE_SELF, &ru0);
	sync_byte(fd, 'f');   /* 5 s on: the owner freed them */
	getrusage(RUSAGE_SELF, &ru1);
	{
		double cpu = (double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec +
				      ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) +
			     (ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec +
			      ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec) / 1e6;

		printf("verbs_ud: %.2f s of CPU while waiting 5 s with an armed CQ\n", cpu);
		if (cpu > 2.0)
			die("phase 4: the notifier spins after a datagram was lost");
	}
	if (ibv_destroy_cq(acq) || ibv_destroy_comp_channel(ch))
		die("phase 4: release the armed CQ");
	if (send_ud(u, u->qp, ah, peer->qpn, QK, 15, 15, false, IBV_WR_SEND))
		die("phase 4: send after");
	sent_ok(u, "phase 4: after");
	roshm_region_close(r, dh);
	roshm_region_close(r, h);
	roshm_close(r);
}

/* 8: a pod of the tenant learns the FULL states of two datagrams waiting
 * in q3 by CASes that cannot match, and once the owner took them, marks
 * their slots FULL again with the same tokens */
static void replay(struct ud *u, struct ibv_ah *ah, const struct uinfo *peer, int fd)
{
	struct roshm_params p;
	struct roshm *r;
	uint32_t h, n = 16, nfull = 0, at[16];
	uint64_t old, full[16];
	char name[ROSHM_NAME_MAX];
	int err = 0;

	if (send_ud(u, u->qp, ah, peer->qpn3, QK, 21, 21, false, IBV_WR_SEND) ||
	    send_ud(u, u->qp, ah, peer->qpn3, QK, 22, 22, false, IBV_WR_SEND))
		die("phase 8: send");
	sent_ok(u, "phase 8");
	sent_ok(u, "phase 8");
	memset(&p, 0, sizeof(p));
	if (!(r = roshm_open(&p, &err)))
		die("phase 8: roshm_open");
	snprintf(name, sizeof(name), "ibv-qp-%06x", peer->qpn3);
	if (roshm_region_open(r, name, &h, NULL))
		die("phase 8: open q3's states");
	for (uint32_t i = 0; i < n; i++) {
		if (roshm_cmp_swap_sync(r, h, RV_UD_STATES + 8ull * i, 1, 1, &old))
			die("phase 8: CAS");
		if ((old & 3) == RV_UD_FULL && nfull < 16) {
			at[nfull] = i;
			full[nfull++] = old;
		}
	}
	if (nfull != 2)
		die("phase 8: the pod did not find the two FULL states");
	sync_byte(fd, '9');
	sync_byte(fd, 'a');   /* the owner took them */
	for (uint32_t k = 0; k < nfull; k++)
		if (roshm_cmp_swap_sync(r, h, RV_UD_STATES + 8ull * at[k], 0, full[k], &old) || old)
			die("phase 8: marking a freed slot FULL again");
	sync_byte(fd, 'b');
	/* the owner dropped them (their headers wiped): the slot is free, and
	 * the pod publishes a 10-byte header of its own there, under the old
	 * token, over whatever payload the slot still holds */
	sync_byte(fd, 'w');
	{
		uint64_t tok = full[0] >> 2, cl = ((uint64_t)token(300) << 2) | RV_UD_CLAIMED;
		struct rv_udh hd = { .token = tok, .len = 10, .qkey = QK, .src_qp = u->qp->qp_num,
				     .opcode = RV_FRAG_SEND };
		uint32_t dh;
		uint8_t *arena = roshm_arena(r, NULL);

		snprintf(name, sizeof(name), "ibv-qpd-%06x", peer->qpn3);
		if (roshm_region_open(r, name, &dh, NULL))
			die("phase 8: open q3's slots");
		memcpy(arena, &hd, sizeof(hd));
		if (roshm_cmp_swap_sync(r, h, RV_UD_STATES + 8ull * at[0], 0, cl, &old) || old ||
		    roshm_write_sync(r, dh, (uint64_t)at[0] * RV_UD_STRIDE, 0, RV_UD_HDR) ||
		    roshm_cmp_swap_sync(r, h, RV_UD_STATES + 8ull * at[0], cl, full[0], &old) ||
		    old != cl)
			die("phase 8: publishing a header of its own in a freed slot");
		roshm_region_close(r, dh);
	}
	roshm_region_close(r, h);
	roshm_close(r);
}

/* 11: a pod of the tenant claims the last slot of the server's fresh
 * ring and the ones from 0 on, all but two, then we send: our first slot
 * there is the last one (ROSHM_VERBS_UD_FIRST=last) */
/* The pod (its own libroshm, @*r) opens the ring of the server's QP @qpn:
 * its states in @*h, its slots in @*dh; how many slots it has. */
static uint32_t pod_ring(struct roshm **r, uint32_t qpn, uint32_t *h, uint32_t *dh)
{
	struct roshm_params p;
	uint64_t size = 0, dsize = 0;
	char name[ROSHM_NAME_MAX], dname[ROSHM_NAME_MAX];
	uint32_t n = 0;
	int err = 0;

	memset(&p, 0, sizeof(p));
	if (!(*r = roshm_open(&p, &err)))
		die("pod: roshm_open");
	snprintf(name, sizeof(name), "ibv-qp-%06x", qpn);
	snprintf(dname, sizeof(dname), "ibv-qpd-%06x", qpn);
	if (roshm_region_open(*r, name, h, &size) || roshm_region_open(*r, dname, dh, &dsize))
		die("pod: open a fresh QP's ring");
	/* the states are whole pages: the slots tell the size */
	for (uint32_t k = RV_UD_MIN_SLOTS; k <= RV_UD_MAX_SLOTS; k <<= 1)
		if (rv_ud_states_size(k) == size && rv_ud_slots_size(k) == dsize)
			n = k;
	if (!n)
		die("pod: the fresh QP's ring is no UD ring");
	return n;
}

/* A pod phase's end: the datagram of @len bytes (pattern @len) the server
 * expects first, from @qp to @qpn; the server's go; the pod lets go. */
static void pod_phase_end(struct ud *u, struct ibv_qp *qp, struct ibv_ah *ah, uint32_t qpn,
			  uint32_t len, int fd, struct roshm *r, uint32_t h, uint32_t dh,
			  const char *what)
{
	char g;

	if (send_ud(u, qp, ah, qpn, QK, len, len, false, IBV_WR_SEND))
		die(what);
	sent_ok(u, what);
	if (read(fd, &g, 1) != 1 || g != 'g')
		die(what);
	roshm_region_close(r, dh);
	roshm_region_close(r, h);
	roshm_close(r);
}

static void past_taken(struct ud *u, struct ibv_ah *ah, int fd)
{
	struct roshm *r;
	uint32_t h, dh, qpn5, n;
	uint64_t old;

	if (read(fd, &qpn5, sizeof(qpn5)) != sizeof(qpn5))
		die("exchange");
	n = pod_ring(&r, qpn5, &h, &dh);
	for (uint32_t i = 0; i < n - 2; i++) {
		uint32_t at = (i + n - 1) % n;   /* n-1, 0, 1, ..., n-4 */

		if (roshm_cmp_swap_sync(r, h, RV_UD_STATES + 8ull * at, 0,
					((uint64_t)token(200 + i) << 2) | RV_UD_CLAIMED, &old) || old)
			die("phase 11: claiming a slot of the fresh ring");
	}
	printf("verbs_ud: phase 11: %u of the fresh ring's %u slots claimed by the pod\n", n - 2, n);
	pod_phase_end(u, u->qp, ah, qpn5, 27, fd, r, h, dh, "phase 11");
}

/*
 * 12: a datagram waits for a slot (the pod holds them all claimed) and its MR
 * is deregistered and unmapped meanwhile; then the pod frees one. The
 * datagram must fail with IBV_WC_LOC_PROT_ERR, as a NIC's, and nothing of
 * it reach the server (without the check: SIGSEGV in the library, reading
 * the unmapped page). A datagram waits for a slot RV_UD_WAIT_NS (200 ms)
 * once every slot refused it, then it is dropped (completes as sent): an
 * attempt that took longer than that is tried again on a fresh QP.
 */
static void mr_gone(struct ud *u, struct ibv_ah *ah, int fd)
{
	struct roshm *r;
	uint32_t h, dh, qpn6, n, last = 0, tries;
	uint64_t old;
	struct ibv_wc wc;
	bool failed = false;
	struct ibv_qp *q = NULL;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qia;

	if (read(fd, &qpn6, sizeof(qpn6)) != sizeof(qpn6))
		die("exchange");
	n = pod_ring(&r, qpn6, &h, &dh);
	for (tries = 0; tries < 5 && !failed; tries++) {
		uint32_t tok = 400 + tries * n;
		uint8_t *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				     -1, 0);
		struct ibv_mr *mr = page != MAP_FAILED ? ibv_reg_mr(u->pd, page, 4096, 0) : NULL;
		struct ibv_sge sg = { (uintptr_t)page, 30, mr ? mr->lkey : 0 };
		struct ibv_send_wr wr = { .wr_id = 12, .sg_list = &sg, .num_sge = 1,
					  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
					  .wr = { .ud = { .ah = ah, .remote_qpn = qpn6,
							  .remote_qkey = QK } } }, *bad;

		/* a RECV of its own, which must not be flushed when its send
		 * queue fails (below) */
		if (!(q = ud_qp(u, 1, NULL)) || !mr)
			die("phase 12: a QP, an MR");
		post_recv(u, q, 5, RSZ);
		fill(page, 30, 30);
		/* every slot; the owner frees a slot an earlier attempt's
		 * datagram claimed 3 s on (a lost one's): claim until all are
		 * the pod's, 10 s at most */
		for (uint32_t got = 0, k = 0; got < n; k++) {
			if (k == 200)
				die("phase 12: the pod could not claim every slot in 10 s");
			if (k)
				usleep(50000);
			got += claim_free(r, h, n, tok, &last);
		}
		if (ibv_post_send(q, &wr, &bad))
			die("phase 12: ibv_post_send");
		/* its claims go round the ring and fail */
		if (next_wc(u->cq, &wc, 20))
			die("phase 12: the datagram completed while every slot was taken");
		if (ibv_dereg_mr(mr) || munmap(page, 4096))
			die("phase 12: ibv_dereg_mr/munmap");
		if (roshm_cmp_swap_sync(r, h, RV_UD_STATES + 8ull * last,
					((uint64_t)token(tok + last) << 2) | RV_UD_CLAIMED, 0, &old) ||
		    old != (((uint64_t)token(tok + last) << 2) | RV_UD_CLAIMED))
			die("phase 12: the pod frees a slot");
		if (!next_wc(u->cq, &wc, 10000) || wc.wr_id != 12)
			die("phase 12: no completion of the datagram");
		if (wc.status == IBV_WC_LOC_PROT_ERR)
			failed = true;
		else if (wc.status != IBV_WC_SUCCESS)
			die("phase 12: the datagram failed with another status than LOC_PROT_ERR");
		else
			printf("verbs_ud: phase 12: the datagram was dropped before the pod freed "
			       "a slot (attempt %u took over 200 ms): again\n", tries + 1);
		/* (a drop marks the destination full for 200 ms: the next
		 * attempt's datagram would be dropped at its first refusal) */
		if (!failed) {
			usleep(300000);
			if (ibv_destroy_qp(q))
				die("phase 12: ibv_destroy_qp");
		}
		/* the pod lets go of the rest (the owner frees the datagram's
		 * claimed slot 3 s on, as a lost one's) */
		for (uint32_t i = 0; i < n; i++)
			if (i != last && roshm_cmp_swap_sync(r, h, RV_UD_STATES + 8ull * i,
							     ((uint64_t)token(tok + i) << 2) |
								     RV_UD_CLAIMED, 0, &old))
				die("phase 12: the pod frees its slots");
	}
	if (!failed)
		die("phase 12: 5 attempts, each over 200 ms: no datagram waited for a slot long "
		    "enough");
	printf("verbs_ud: phase 12: a datagram waiting for a slot whose MR was deregistered and "
	       "unmapped failed with LOC_PROT_ERR (attempt %u)\n", tries);
	/* as a NIC's: the send queue alone is in error (SQE), its RECV stays
	 * posted, a send posted now is flushed, and RTS resumes sending */
	if (ibv_query_qp(q, &qa, IBV_QP_STATE, &qia) || qa.qp_state != IBV_QPS_SQE)
		die("phase 12: the QP is not in SQE after its send failed");
	nothing(u, 50, "phase 12: a RECV of the QP in SQE was flushed");
	/* ... and takes a datagram (from our main QP): completions of the
	 * send and of the RECV, in either order */
	if (send_ud(u, u->qp, ah, q->qp_num, QK, 26, 26, false, IBV_WR_SEND))
		die("phase 12: a send to the QP in SQE");
	for (int k = 0, got = 0; k < 2; k++) {
		if (!next_wc(u->cq, &wc, 10000) || wc.status != IBV_WC_SUCCESS)
			die("phase 12: a datagram to the QP in SQE: no completion, or an error");
		if (wc.opcode == IBV_WC_SEND && !(got & 1))
			got |= 1;
		else if (wc.opcode == IBV_WC_RECV && wc.qp_num == q->qp_num && wc.wr_id == 5 &&
			 wc.byte_len == 26 + RV_UD_GRH && same(u->buf + 5 * (size_t)RSZ + RV_UD_GRH, 26, 26) &&
			 !(got & 2))
			got |= 2;
		else
			die("phase 12: a datagram to the QP in SQE did not arrive as sent");
	}
	if (send_ud(u, q, ah, qpn6, QK, 28, 28, false, IBV_WR_SEND))
		die("phase 12: a send posted in SQE was refused");
	if (!next_wc(u->cq, &wc, 10000) || wc.status != IBV_WC_WR_FLUSH_ERR || wc.qp_num != q->qp_num)
		die("phase 12: a send posted in SQE was not flushed");
	qa.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(q, &qa, IBV_QP_STATE) != EINVAL)
		die("phase 12: SQE to RTR was taken");
	qa.qp_state = IBV_QPS_RTS;
	if (ibv_modify_qp(q, &qa, IBV_QP_STATE) || ibv_query_qp(q, &qa, IBV_QP_STATE, &qia) ||
	    qa.qp_state != IBV_QPS_RTS)
		die("phase 12: SQE to RTS");
	/* the server's first datagram is this one, not the failed or the
	 * flushed one */
	pod_phase_end(u, q, ah, qpn6, 29, fd, r, h, dh, "phase 12");
	printf("verbs_ud: phase 12: the QP went to SQE (its RECV kept and took a datagram, a send "
	       "flushed) and sent again after RTS\n");
	if (ibv_destroy_qp(q))
		die("phase 12: ibv_destroy_qp");
}

static void client(int fd)
{
	struct ud u;
	struct uinfo me, peer;
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1 };
	struct ibv_ah *ah;

	memset(&u, 0, sizeof(u));
	/* our first datagram to each of the server's QPs goes to its ring's
	 * last slot, the next ones to slots 0, 1, ...: the server looks at
	 * slot 0 first, and must still hand our datagrams over in the order we
	 * sent them (phases 1 and 3 check it) */
	setenv("ROSHM_VERBS_UD_FIRST", "last", 1);
	ud_open(&u);
	post_recv(&u, u.qp, 0, RSZ);
	me.qpn = u.qp->qp_num;
	me.qpn2 = 0;
	memcpy(me.gid, u.gid.raw, 16);
	if (read(fd, &peer, sizeof(peer)) != sizeof(peer) || write(fd, &me, sizeof(me)) != sizeof(me))
		die("exchange");
	memcpy(aa.grh.dgid.raw, peer.gid, 16);
	if (!(ah = ibv_create_ah(u.pd, &aa)))
		die("ibv_create_ah");
	/* 1 */
	for (uint32_t i = 0; i < NLENS; i++) {
		if (send_ud(&u, u.qp, ah, peer.qpn, QK, lens[i], i, i & 1, IBV_WR_SEND))
			die("phase 1: ibv_post_send");
		sent_ok(&u, "phase 1");
	}
	/* 2: the own Q_Key is QK too */
	sync_byte(fd, '2');
	if (send_ud(&u, u.qp, ah, peer.qpn, QK + 1, 11, 11, false, IBV_WR_SEND) ||
	    send_ud(&u, u.qp, ah, peer.qpn, 0x80000000u, 12, 12, false, IBV_WR_SEND))
		die("phase 2: send");
	sent_ok(&u, "phase 2: a wrong Q_Key");
	sent_ok(&u, "phase 2");
	/* 3 */
	sync_byte(fd, '3');
	if (send_ud(&u, u.qp, ah, peer.qpn2, QK, 200, 31, false, IBV_WR_SEND) ||
	    send_ud(&u, u.qp, ah, peer.qpn2, QK, 50, 32, false, IBV_WR_SEND))
		die("phase 3: send");
	sent_ok(&u, "phase 3: too long");
	sent_ok(&u, "phase 3");
	/* 4 */
	hostile(&u, ah, &peer, fd);
	/* 5 */
	sync_byte(fd, '5');
	expect_dgram(&u, 16, 16, true, peer.qpn, peer.gid, 10000, "phase 5: the server's answer");
	/* 6 */
	errno = 0;
	if (send_ud(&u, u.qp, ah, peer.qpn, QK, 8, 1, false, IBV_WR_RDMA_WRITE) != EINVAL ||
	    send_ud(&u, u.qp, ah, peer.qpn, QK, RV_UD_MTU + 1, 1, false, IBV_WR_SEND) != EINVAL)
		die("phase 6: an RDMA WRITE on UD, or a datagram over the MTU, was posted");
	{
		/* a UD QP has no peer: a QPN to connect to is refused (it would
		 * grant our MRs to that ring's owner) */
		struct ibv_qp_attr qa = { .dest_qp_num = peer.qpn };

		if (ibv_modify_qp(u.qp, &qa, IBV_QP_DEST_QPN) != EINVAL)
			die("phase 6: IBV_QP_DEST_QPN on a UD QP was taken");
	}
	if (send_ud(&u, u.qp, ah, 0xfffffe, QK, 8, 1, false, IBV_WR_SEND))
		die("phase 6: send to nobody");
	sent_ok(&u, "phase 6: a datagram to a QPN nobody has");
	printf("verbs_ud: refused: RDMA on UD, over the MTU, a UD QP's dest_qp_num; a datagram to "
	       "no QP completes as sent\n");
	/* 7 (when the server runs it), 8 */
	for (char c = 0; c != 'e';) {
		if (read(fd, &c, 1) != 1 || write(fd, &c, 1) != 1)
			die("exchange");
		if (c == '7') {
			if (send_ud(&u, u.qp, ah, peer.qpn, QK, 18, 18, false, IBV_WR_SEND))
				die("phase 7: send");
			sent_ok(&u, "phase 7");
		} else if (c == '8') {
			replay(&u, ah, &peer, fd);
		} else if (c == 'n') {
			/* 9: post, then wait in read(2) with no poll until the
			 * server has the datagram */
			uint32_t qpn4;
			char g;

			if (read(fd, &qpn4, sizeof(qpn4)) != sizeof(qpn4) ||
			    send_ud(&u, u.qp, ah, qpn4, QK, 19, 19, false, IBV_WR_SEND) ||
			    read(fd, &g, 1) != 1 || g != 'g')
				die("phase 9: send, then wait unpolled");
			sent_ok(&u, "phase 9");
		} else if (c == 'k') {
			past_taken(&u, ah, fd);
		} else if (c == 'm') {
			mr_gone(&u, ah, fd);
		} else if (c == 'S') {
			/* 10: two datagrams to each of qa, qb of the server's
			 * SRQ, after one to qc ('h') that turns junk */
			uint32_t qpns[3];
			char g;

			if (read(fd, qpns, sizeof(qpns)) != sizeof(qpns))
				die("exchange");
			/* in qc's ring (sent) before the server looks */
			if (read(fd, &g, 1) != 1 || g != 'h' ||
			    send_ud(&u, u.qp, ah, qpns[2], QK, 22, 22, false, IBV_WR_SEND))
				die("phase 10: exchange / send to qc");
			sent_ok(&u, "phase 10: to qc");
			if (write(fd, &g, 1) != 1)
				die("phase 10: exchange");
			if (read(fd, &g, 1) != 1 || g != 'i' || write(fd, &g, 1) != 1)
				die("phase 10: exchange");
			for (uint32_t l = 23; l <= 26; l++) {
				if (send_ud(&u, u.qp, ah, qpns[l >= 25], QK, l, l, !(l & 1), IBV_WR_SEND))
					die("phase 10: send");
				sent_ok(&u, "phase 10");
			}
			if (read(fd, &g, 1) != 1 || g != 'g')
				die("phase 10: exchange");
		}
	}
	if (ibv_destroy_ah(ah) || ibv_destroy_qp(u.qp) || ibv_dereg_mr(u.mr) || ibv_destroy_cq(u.cq) ||
	    ibv_dealloc_pd(u.pd) || ibv_close_device(u.ctx))
		die("release");
	free(u.buf);
	printf("verbs_ud client: ok\n");
}

int main(int argc, char **argv)
{
	return ud_main(argc, argv, server, client);
}
