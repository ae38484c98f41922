// SPDX-License-Identifier: MIT
/*
 * UD multicast through libroshm-verbs (client-lib/verbs/mcast.c), between a
 * server (node a) and a client (node b) of check_verbs_perftest.sh:
 *  1. ibv_attach_mcast refuses a GID that is no multicast one and a RC QP
 *     (EINVAL), takes a second attach of a member (0), and ibv_detach_mcast
 *     refuses a QP that is no member (EINVAL);
 *  2. the server's QPs m1 and m2 join group G, n1 joins G2, d1 joins G and
 *     leaves it; a QP of another tenant (VERBS_CHECK_OTHER=TENANT:TOKEN)
 *     joins G; a pod of the tenant forges a member record of G for n1 (a
 *     region named as ibv_attach_mcast names one); the client's QP sm joins
 *     G on its own node;
 *  3. the client's QP s sends K datagrams to G (QPN 0xFFFFFF, an AH whose
 *     GID is G): one completion each; m1, m2 and sm get each exactly once,
 *     bytes, immediate, src_qp, and a GRH whose sgid is the client's GID and
 *     whose dgid is G; n1 (forged record), d1 (left), and the other
 *     tenant's QP get nothing; a datagram to a group nobody joined
 *     completes as sent; the K datagrams are posted right behind one to
 *     each of 16 other groups (of a QP sh of the client), which in flight
 *     hold every group entry of the client's context: they wait for one
 *     (they were lost);
 *  4. m2 leaves G: the client's next datagram (its list of G's members is
 *     younger than a second: m2 is still on it) reaches m1 and sm, not m2;
 *     so does one sent after the list was renewed;
 *  5. once its QPs are gone and the forging pod closed, no member record
 *     of the server's tenant is left in the registry.
 *   verbs_mcast server|client ADDR PORT
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "roshm.h"
#include "rv.h"
#define UD_PROG "verbs_mcast"
#include "ud_common.h"

#define K 8
static const uint32_t lens[K] = { 0, 1, 64, 1000, 4096, 333, 2048, 7 };

/* G: ::ffff:239.7.7.7 (an IPv4 group as RoCE v2 maps it); G2: ff0e::db8:1;
 * G3: ::ffff:239.9.9.9, which nobody joins */
static const uint8_t G[16] = { [10] = 0xff, [11] = 0xff, 239, 7, 7, 7 };
static const uint8_t G2[16] = { 0xff, 0x0e, [12] = 0x0d, [13] = 0xb8, [15] = 1 };
static const uint8_t G3[16] = { [10] = 0xff, [11] = 0xff, 239, 9, 9, 9 };

struct minfo {
	uint32_t qpn;           /* the sender's */
	uint8_t gid[16];
};

static union ibv_gid gid_of(const uint8_t *raw)
{
	union ibv_gid g;

	memcpy(g.raw, raw, 16);
	return g;
}

static void xchg(int fd, const void *out, void *in, size_t len)
{
	if (write(fd, out, len) != (ssize_t)len || read(fd, in, len) != (ssize_t)len)
		die("exchange");
}

/*
 * Completions on @u's CQ, none more than @ms apart: every datagram must be
 * the group's, from @src, right; want[i] of them for QP qpn[i] (one to any
 * other QP fails), and @sends send completions. Each RECV was posted with
 * a buffer of its own (no reposting).
 */
static void collect(struct ud *u, int nq, const uint32_t *qpn, const uint32_t *want, uint32_t sends,
		    const struct minfo *src, int ms, const char *what)
{
	uint32_t got[8] = { 0 }, sent = 0;
	bool more = true;
	struct ibv_wc wc;

	while (more) {
		if (!next_wc(u->cq, &wc, ms)) {
			fprintf(stderr, "%s: %u of %u send completions;", what, sent, sends);
			for (int i = 0; i < nq; i++)
				fprintf(stderr, " QP %06x %u of %u;", qpn[i], got[i], want[i]);
			fprintf(stderr, "\n");
			die("a datagram did not arrive");
		}
		if (wc.opcode == IBV_WC_SEND) {
			if (wc.status != IBV_WC_SUCCESS || ++sent > sends)
				die("a send completion more, or not a success");
		} else {
			const uint8_t *b = u->buf + (size_t)wc.wr_id * RSZ;
			const struct ibv_grh *g = (const struct ibv_grh *)b;
			uint32_t seed = ntohl(wc.imm_data) - 0xabc00000u;
			int i = 0;

			while (i < nq && qpn[i] != wc.qp_num)
				i++;
			if (i == nq || ++got[i] > want[i]) {
				fprintf(stderr, "%s: QP %06x\n", what, wc.qp_num);
				die("a datagram reached a QP that is no member of its group, or twice");
			}
			if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV ||
			    !(wc.wc_flags & IBV_WC_WITH_IMM) || seed > K + 2 ||
			    wc.byte_len != lens[seed % K] + RV_UD_GRH || wc.src_qp != src->qpn ||
			    !(wc.wc_flags & IBV_WC_GRH) || memcmp(g->sgid.raw, src->gid, 16) ||
			    memcmp(g->dgid.raw, G, 16) || !same(b + RV_UD_GRH, lens[seed % K], seed)) {
				fprintf(stderr, "%s: status %s byte_len %u src_qp %06x (want %06x) "
					"seed %u, sgid %s, dgid %s\n", what, ibv_wc_status_str(wc.status),
					wc.byte_len, wc.src_qp, src->qpn, seed,
					memcmp(g->sgid.raw, src->gid, 16) ? "wrong" : "ok",
					memcmp(g->dgid.raw, G, 16) ? "wrong" : "ok");
				die("a datagram to the group is not the one sent");
			}
		}
		more = sent < sends;
		for (int i = 0; i < nq; i++)
			more |= got[i] < want[i];
	}
}

/* Post @n RECVs on @qp, buffers *@next on. */
static void recvs(struct ud *u, struct ibv_qp *qp, uint32_t n, uint32_t *next)
{
	for (uint32_t i = 0; i < n; i++)
		post_recv(u, qp, (*next)++, RSZ);
}

static void attach(struct ibv_qp *qp, const uint8_t *g, const char *what)
{
	union ibv_gid gg = gid_of(g);
	int ret = ibv_attach_mcast(qp, &gg, 0);

	if (ret) {
		errno = ret;
		die(what);
	}
}

/* ------------------------------------------------------------ server */

/* The other tenant's QP in G (VERBS_CHECK_OTHER=TENANT:TOKEN), or none. */
static bool other_open(struct ud *o)
{
	char *other = getenv("VERBS_CHECK_OTHER"), *tok;

	if (!other || !(tok = strchr(other, ':')))
		return false;
	*tok++ = 0;
	setenv("ROSHM_TENANT", other, 1);
	setenv("ROSHM_TOKEN", tok, 1);
	memset(o, 0, sizeof(*o));
	ud_open(o);
	unsetenv("ROSHM_TENANT");
	unsetenv("ROSHM_TOKEN");
	for (uint32_t i = 0; i < 4; i++)
		post_recv(o, o->qp, i, RSZ);
	attach(o->qp, G, "the other tenant's QP joins G");
	return true;
}

static void refusals(struct ud *u, struct ibv_qp *m1)
{
	union ibv_gid uni = u->gid, g = gid_of(G);
	struct ibv_qp_init_attr ia = { .send_cq = u->cq, .recv_cq = u->cq, .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1,
						.max_recv_sge = 1 } };
	struct ibv_qp *rc = ibv_create_qp(u->pd, &ia);

	if (ibv_attach_mcast(m1, &uni, 0) != EINVAL)
		die("phase 1: a unicast GID was taken as a group");
	if (!rc || ibv_attach_mcast(rc, &g, 0) != EINVAL || ibv_destroy_qp(rc))
		die("phase 1: a RC QP joined a group");
	if (ibv_attach_mcast(m1, &g, 0))
		die("phase 1: a second attach of a member");
	g = gid_of(G3);
	if (ibv_detach_mcast(m1, &g, 0) != EINVAL)
		die("phase 1: a QP left a group it never joined");
	printf("verbs_mcast: refused: a unicast GID, a RC QP, leaving a group not joined\n");
}

/* Member records in the registry (of any group) of the QPNs @qpn[0..n). */
static size_t records(struct roshm *r, const uint32_t *qpn, int n)
{
	char *json = NULL, tail[16];
	size_t k = 0;

	if (roshm_region_list(r, "ibv-mc-", &json))
		die("roshm_region_list");
	for (int i = 0; i < n; i++) {
		snprintf(tail, sizeof(tail), "-%06x\"", qpn[i]);
		for (const char *p = json; (p = strstr(p, tail)); p++)
			k++;
	}
	free(json);
	return k;
}

static void server(int fd)
{
	struct ud u, o;
	struct ibv_qp *m1, *m2, *n1, *d1;
	struct minfo me, peer;
	union ibv_gid g;
	uint32_t next = 0, qpn[2], want[2], mine[4];
	char name[ROSHM_NAME_MAX];
	struct roshm *pod;
	uint32_t h;
	bool other;
	int err;

	memset(&u, 0, sizeof(u));
	ud_open(&u);
	m1 = u.qp;
	if (!(m2 = ud_qp(&u, K + 2, NULL)) || !(n1 = ud_qp(&u, 2, NULL)) || !(d1 = ud_qp(&u, 2, NULL)))
		die("UD QPs");
	recvs(&u, m1, K + 2, &next);
	recvs(&u, m2, K + 2, &next);
	recvs(&u, n1, 2, &next);
	recvs(&u, d1, 2, &next);
	attach(m1, G, "m1 joins G");
	refusals(&u, m1);
	attach(m2, G, "m2 joins G");
	attach(n1, G2, "n1 joins G2");
	attach(d1, G, "d1 joins G");
	g = gid_of(G);
	if (ibv_detach_mcast(d1, &g, 0))
		die("d1 leaves G");
	other = other_open(&o);
	/* a pod of the tenant forges a member record of G for n1 */
	if (!(pod = roshm_open(NULL, &err)))
		die("the pod: roshm_open");
	snprintf(name, sizeof(name), "ibv-mc-00000000000000000000ffffef070707-%06x", n1->qp_num);
	if (roshm_region_create(pod, name, 4096, NULL, &h))
		die("the pod: a forged member record");
	mine[0] = m1->qp_num, mine[1] = m2->qp_num, mine[2] = n1->qp_num, mine[3] = d1->qp_num;
	if (records(pod, mine, 4) != 4)   /* m1, m2 (G), n1 (G2), the forged one */
		die("phase 2: the registry does not hold the members' records");
	me.qpn = m1->qp_num;
	memcpy(me.gid, u.gid.raw, 16);
	xchg(fd, &me, &peer, sizeof(me));
	sync_byte(fd, 'a');   /* the client's sm joined G */
	/* 3 */
	qpn[0] = m1->qp_num, qpn[1] = m2->qp_num;
	want[0] = want[1] = K;
	collect(&u, 2, qpn, want, 0, &peer, 10000, "phase 3");
	nothing(&u, 500, "phase 3: n1 (forged record), d1 (left G)");
	if (other) {
		nothing(&o, 200, "phase 3: the other tenant's member of G");
		printf("verbs_mcast: another tenant's member of G got nothing\n");
	}
	printf("verbs_mcast: %d datagrams to G: each once at m1 and m2, none at n1 (a forged record) "
	       "or d1 (left)\n", K);
	/* 4 */
	if (ibv_detach_mcast(m2, &g, 0))
		die("m2 leaves G");
	sync_byte(fd, 'b');
	want[0] = 1, want[1] = 0;
	collect(&u, 2, qpn, want, 0, &peer, 10000, "phase 4: after m2 left");
	nothing(&u, 500, "phase 4: m2 left G");
	sync_byte(fd, 'c');
	collect(&u, 2, qpn, want, 0, &peer, 10000, "phase 4: a renewed list");
	nothing(&u, 500, "phase 4: m2 left G (renewed list)");
	printf("verbs_mcast: after m2 left G: the next datagrams reached m1 only\n");
	sync_byte(fd, 'e');
	/* 5 */
	if (ibv_destroy_qp(m2) || ibv_destroy_qp(n1) || ibv_destroy_qp(d1) || ibv_destroy_qp(m1))
		die("destroy QPs");
	if (records(pod, mine, 4) != 1)   /* the forged one */
		die("phase 5: a member record outlived its QP");
	if (other && (ibv_destroy_qp(o.qp) || ibv_dereg_mr(o.mr) || ibv_destroy_cq(o.cq) ||
		      ibv_dealloc_pd(o.pd) || ibv_close_device(o.ctx)))
		die("the other tenant: release");
	roshm_close(pod);
	if (!(pod = roshm_open(NULL, &err)) || records(pod, mine, 4) != 0)
		die("phase 5: member records left behind");
	roshm_close(pod);
	if (ibv_dereg_mr(u.mr) || ibv_destroy_cq(u.cq) || ibv_dealloc_pd(u.pd) || ibv_close_device(u.ctx))
		die("release");
	free(u.buf);
	if (other)
		free(o.buf);
	printf("verbs_mcast: no member record left\n");
	printf("verbs_mcast server: ok\n");
}

/* ------------------------------------------------------------ client */

/* Datagram @seed to the group of @ah from a buffer of its own (K + 2 on:
 * the RECVs of sm have the first ones), as sends in flight need: into
 * @wr and @sg, to post (alone, or in a chain). */
static void group_wr(struct ud *u, struct ibv_ah *ah, uint32_t seed, struct ibv_send_wr *wr,
		     struct ibv_sge *sg)
{
	uint8_t *b = u->buf + (size_t)(K + 2 + seed) * RSZ;

	fill(b, lens[seed % K], seed);
	*sg = (struct ibv_sge){ (uintptr_t)b, lens[seed % K], u->mr->lkey };
	*wr = (struct ibv_send_wr){ .wr_id = 1000 + seed, .sg_list = sg, .num_sge = 1,
				    .opcode = IBV_WR_SEND_WITH_IMM, .send_flags = IBV_SEND_SIGNALED,
				    .imm_data = IMM(seed) };
	wr->wr.ud.ah = ah;
	wr->wr.ud.remote_qpn = 0xffffff;
	wr->wr.ud.remote_qkey = QK;
}

static void to_group(struct ud *u, struct ibv_ah *ah, uint32_t seed)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sg;

	group_wr(u, ah, seed, &wr, &sg);
	if (ibv_post_send(u->qp, &wr, &bad))
		die("send to the group");
}

static void client(int fd)
{
	struct ud u;
	struct ibv_qp *sm, *sh;
	struct ibv_ah *ah, *ah3, *ahs[RV_MCG];
	struct ibv_send_wr chain[RV_MCG + K], *bad;
	struct ibv_sge sgs[RV_MCG + K];
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1 };
	struct minfo me, peer;
	uint32_t next = 0, qpn, want;
	union ibv_gid g = gid_of(G);

	memset(&u, 0, sizeof(u));
	ud_open(&u);
	if (!(sm = ud_qp(&u, K + 2, NULL)) || !(sh = ud_qp(&u, RV_MCG, NULL)))
		die("UD QP");
	recvs(&u, sm, K + 2, &next);
	attach(sm, G, "sm joins G");
	aa.grh.dgid = g;
	ah = ibv_create_ah(u.pd, &aa);
	aa.grh.dgid = gid_of(G3);
	ah3 = ibv_create_ah(u.pd, &aa);
	if (!ah || !ah3)
		die("ibv_create_ah");
	me.qpn = u.qp->qp_num;
	memcpy(me.gid, u.gid.raw, 16);
	xchg(fd, &me, &peer, sizeof(me));
	sync_byte(fd, 'a');
	/* 3: first one to each of RV_MCG groups of sh and then the K to G,
	 * posted at once: the first ones in flight hold every group entry of
	 * the context, and the datagrams to G wait for one (they were lost);
	 * then one to G3 (nobody's): K + 1 + RV_MCG completions, K at sm (sh
	 * has no RECV: its datagrams stay in its ring) */
	for (uint32_t i = 0; i < RV_MCG; i++) {
		aa.grh.dgid = gid_of(G3);
		aa.grh.dgid.raw[14] = (uint8_t)(i + 1);   /* ::ffff:239.9.(i+1).9 */
		attach(sh, aa.grh.dgid.raw, "sh joins a group");
		if (!(ahs[i] = ibv_create_ah(u.pd, &aa)))
			die("ibv_create_ah");
		chain[i] = (struct ibv_send_wr){ .wr_id = 2000 + i, .sg_list = &sgs[i], .num_sge = 1,
						 .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
						 .next = &chain[i + 1] };
		sgs[i] = (struct ibv_sge){ (uintptr_t)u.buf, 8, u.mr->lkey };
		chain[i].wr.ud.ah = ahs[i];
		chain[i].wr.ud.remote_qpn = 0xffffff;
		chain[i].wr.ud.remote_qkey = QK;
	}
	for (uint32_t i = 0; i < K; i++) {
		group_wr(&u, ah, i, &chain[RV_MCG + i], &sgs[RV_MCG + i]);
		chain[RV_MCG + i].next = i + 1 < K ? &chain[RV_MCG + i + 1] : NULL;
	}
	if (ibv_post_send(u.qp, chain, &bad))
		die("the chain of sends to groups");
	to_group(&u, ah3, K + 2);   /* nobody's */
	qpn = sm->qp_num;
	want = K;
	collect(&u, 1, &qpn, &want, K + 1 + RV_MCG, &me, 10000, "phase 3 (sm)");
	for (uint32_t i = 0; i < RV_MCG; i++)
		if (ibv_destroy_ah(ahs[i]))
			die("ibv_destroy_ah");
	/* 4 */
	sync_byte(fd, 'b');
	to_group(&u, ah, K);
	want = 1;
	collect(&u, 1, &qpn, &want, 1, &me, 10000, "phase 4 (sm)");
	usleep(1100 * 1000);   /* the list of G's members is renewed */
	sync_byte(fd, 'c');
	to_group(&u, ah, K + 1);
	collect(&u, 1, &qpn, &want, 1, &me, 10000, "phase 4 (sm), a renewed list");
	sync_byte(fd, 'e');
	if (ibv_destroy_ah(ah) || ibv_destroy_ah(ah3) || ibv_destroy_qp(sm) || ibv_destroy_qp(sh) ||
	    ibv_destroy_qp(u.qp) ||
	    ibv_dereg_mr(u.mr) || ibv_destroy_cq(u.cq) || ibv_dealloc_pd(u.pd) || ibv_close_device(u.ctx))
		die("release");
	free(u.buf);
	printf("verbs_mcast client: ok\n");
}

int main(int argc, char **argv)
{
	return ud_main(argc, argv, server, client);
}
