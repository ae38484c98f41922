// SPDX-License-Identifier: MIT
/*
 * An rkey reaches the MRs of the process at the other end of the QP only,
 * as a NIC's responder knows only its own MRs. Three processes of one
 * tenant: the victim V (node a), a hostile peer B and an honest peer C
 * (node b). V registers a private buffer (for its peers to WRITE into) and
 * has an RC QP to C, so C's MR is granted to V's process. B then tells V,
 * as any peer tells its buffer out of band, that "its" buffer is:
 *   - V's own MR: V's WRITE and READ on its QPs to B must fail with
 *     IBV_WC_REM_ACCESS_ERR and leave V's bytes as they were (before the
 *     fix, V wrote into its own memory and read it back as B's);
 *   - C's MR: V's WRITE on its QP to B must fail and C's bytes stay (before,
 *     C's buffer took the bytes meant for B);
 *   - B's own MR: V's WRITE and READ succeed (B sees the bytes).
 * V's WRITE on its QP to C, with C's rkey, succeeds: C's MR was reachable
 * by V, so the refusal above is the peer check's. And when B gives C's QPN
 * as its own, V's QP "to B" is connected to C's QP, which is connected to
 * V's other QP: a WRITE on it fails with IBV_WC_RETRY_EXC_ERR (before, it
 * overwrote C's buffer), as a NIC's QP drops what it gets from a QP it is
 * not connected to. Nor when B gives V's own QPN (and its own GID): a QP
 * of V's connected to itself through another node's GID fails so, while a
 * loopback through V's own GID works; nor without a GRH (an address vector
 * that names no port). The three exchange QPNs, addresses, rkeys and
 * their nodes' GIDs through files in DIR.
 *   verbs_rkey_peer v|b|c DIR
 */
#include <infiniband/verbs.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NB 4   /* V's QPs to B: own MR WRITE, own MR READ, C's MR WRITE, B's MR */
#define ACC (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

static const char *dir, *role;

static void die(const char *m)
{
	fprintf(stderr, "verbs_rkey_peer %s: FAIL: %s\n", role, m);
	exit(1);
}

static void put(const char *name, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void put(const char *name, const char *fmt, ...)
{
	char p[512], t[520];
	va_list ap;
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	snprintf(t, sizeof(t), "%s.tmp", p);
	f = fopen(t, "w");
	if (!f)
		die("writing an info file");
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fclose(f);
	if (rename(t, p))
		die("renaming an info file");
}

/* Wait (60 s at most) for DIR/@name and read @n unsigned numbers from it. */
static void get(const char *name, int n, uint64_t *v)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	for (int i = 0; i < 1200; i++) {
		FILE *f = fopen(p, "r");
		int k = 0;

		if (f) {
			while (k < n && fscanf(f, "%" SCNu64, &v[k]) == 1)
				k++;
			fclose(f);
			if (k == n)
				return;
		}
		usleep(50000);
	}
	fprintf(stderr, "verbs_rkey_peer %s: FAIL: no %s\n", role, name);
	exit(1);
}

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;

static struct ibv_qp *qp_new(void)
{
	struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = ACC };
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);

	if (!qp || ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				 IBV_QP_ACCESS_FLAGS))
		die("creating a QP");
	return qp;
}

/* RTR and RTS to @dest through a GRH to @gid (NULL: none, as on InfiniBand) */
static void qp_connect_gid(struct ibv_qp *qp, uint32_t dest, const union ibv_gid *gid)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024,
				 .dest_qp_num = dest, .max_dest_rd_atomic = 1, .min_rnr_timer = 12,
				 .ah_attr = { .port_num = 1 } };

	if (gid) {
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = *gid;
		a.ah_attr.grh.hop_limit = 64;
	}
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("RTS");
}

/* Our GID (our node's) to the others, in file "g" ROLE. */
static void put_gid(void)
{
	union ibv_gid g;
	uint64_t h[2];
	char name[8];

	if (ibv_query_gid(ctx, 1, 0, &g))
		die("ibv_query_gid");
	memcpy(h, g.raw, 16);
	snprintf(name, sizeof(name), "g%s", role);
	put(name, "%" PRIu64 " %" PRIu64 "\n", h[0], h[1]);
}

/* RTR and RTS to @dest, a QP of process @who (its node's GID in the GRH) */
static void qp_connect(struct ibv_qp *qp, uint32_t dest, char who)
{
	char name[8] = { 'g', who, 0 };
	union ibv_gid g;
	uint64_t h[2];

	get(name, 2, h);
	memcpy(g.raw, h, 16);
	qp_connect_gid(qp, dest, &g);
}

/* One signaled RDMA WR of 16 bytes between @buf (@mr) and (@raddr, @rkey);
 * its completion status. */
static enum ibv_wc_status rdma(struct ibv_qp *qp, bool read, void *buf, struct ibv_mr *mr,
			       uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sg = { .addr = (uintptr_t)buf, .length = 16, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 7, .sg_list = &sg, .num_sge = 1,
				  .opcode = read ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;
	int n = 0;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	if (ibv_post_send(qp, &wr, &bad))
		die("ibv_post_send");
	for (int i = 0; i < 60000 && (n = ibv_poll_cq(cq, 1, &wc)) == 0; i++)
		usleep(1000);
	if (n != 1 || wc.wr_id != 7)
		die("no completion within 60 s");
	return wc.status;
}

static void expect(const char *what, enum ibv_wc_status got, enum ibv_wc_status want)
{
	printf("verbs_rkey_peer %s: %s: %s\n", role, what, ibv_wc_status_str(got));
	if (got != want) {
		fprintf(stderr, "verbs_rkey_peer %s: FAIL: %s: %s, not %s\n", role, what,
			ibv_wc_status_str(got), ibv_wc_status_str(want));
		exit(1);
	}
}

static int victim(void)
{
	char *mine = aligned_alloc(4096, 4096), *src = aligned_alloc(4096, 4096);
	struct ibv_qp *qb[NB], *qc = qp_new();
	struct ibv_mr *mm, *sm;
	uint64_t b[NB + 2], c[3];

	memset(mine, 0, 4096);
	strcpy(mine, "VICTIM-PRIVATE!");
	memset(src, 0, 4096);
	strcpy(src, "BYTES-FOR-PEER!");
	mm = ibv_reg_mr(pd, mine, 4096, ACC);
	sm = ibv_reg_mr(pd, src, 4096, ACC);
	if (!mm || !sm)
		die("ibv_reg_mr");
	for (int i = 0; i < NB; i++)
		qb[i] = qp_new();
	/* our buffer, as a peer would be told it, and our QPNs */
	put("v", "%" PRIu64 " %u %u %u %u %u %u\n", (uint64_t)(uintptr_t)mine, mm->rkey,
	    qb[0]->qp_num, qb[1]->qp_num, qb[2]->qp_num, qb[3]->qp_num, qc->qp_num);
	get("c", 3, c);   /* C's QPN, its buffer's address and rkey */
	qp_connect(qc, (uint32_t)c[0], 'c');
	get("b", NB + 2, b);   /* B's QPNs, and the (addr, rkey) it says is its buffer */
	for (int i = 0; i < NB; i++)
		qp_connect(qb[i], (uint32_t)b[i], 'b');
	get("b.ready", 1, b + NB);   /* B's QPs connected too */
	get("b", NB + 2, b);

	/* C's MR is ours to reach on our QP to C */
	memcpy(src, "V-TO-C-THROUGH-C", 16);
	expect("WRITE to C's MR on the QP to C", rdma(qc, false, src, sm, c[1], (uint32_t)c[2]),
	       IBV_WC_SUCCESS);
	/* B says "my buffer" and names our own MR */
	memcpy(src, "B-GOT-INTO-V-MR", 16);
	expect("WRITE to our own MR on a QP to B", rdma(qb[0], false, src, sm,
	       (uintptr_t)mine, mm->rkey), IBV_WC_REM_ACCESS_ERR);
	if (strcmp(mine, "VICTIM-PRIVATE!"))
		die("our own MR changed by a WRITE on the QP to B");
	memset(src, 0, 16);
	expect("READ of our own MR on a QP to B", rdma(qb[1], true, src, sm, (uintptr_t)mine,
	       mm->rkey), IBV_WC_REM_ACCESS_ERR);
	if (!memcmp(src, "VICTIM-PRIVATE!", 15))
		die("a READ on the QP to B returned our own MR's bytes");
	/* B names C's MR */
	memcpy(src, "B-GOT-INTO-C-MR", 16);
	expect("WRITE to C's MR on a QP to B", rdma(qb[2], false, src, sm, c[1], (uint32_t)c[2]),
	       IBV_WC_REM_ACCESS_ERR);
	/* B's own MR works as ever */
	memcpy(src, "V-TO-B-OWN-MR!!", 16);
	expect("WRITE to B's own MR on a QP to B", rdma(qb[3], false, src, sm, b[NB], (uint32_t)b[NB + 1]),
	       IBV_WC_SUCCESS);
	memset(src, 0, 16);
	expect("READ of B's own MR on a QP to B", rdma(qb[3], true, src, sm, b[NB], (uint32_t)b[NB + 1]),
	       IBV_WC_SUCCESS);
	if (memcmp(src, "V-TO-B-OWN-MR!!", 16))
		die("READ of B's own MR did not return what we wrote there");
	/* B gives C's QPN as its own: our QP "to B" is then connected to C's
	 * QP, which is connected to our other QP, not to this one (on a NIC,
	 * C's QP drops what it gets from a QP it is not connected to) */
	struct ibv_qp *qx = qp_new();

	qp_connect(qx, (uint32_t)c[0], 'c');
	memcpy(src, "B-VIA-C-QPN!!!!", 16);
	expect("WRITE to C's MR on a QP connected to C's QPN (C's QP is connected to our other QP)",
	       rdma(qx, false, src, sm, c[1], (uint32_t)c[2]), IBV_WC_RETRY_EXC_ERR);
	/* B gives our QP's own QPN as its own (and its GID, another node's):
	 * a loopback to another port, which a NIC would not make; a loopback
	 * through our own GID works as on a NIC */
	union ibv_gid ours, other;
	struct ibv_qp *qy = qp_new(), *qz = qp_new();

	if (ibv_query_gid(ctx, 1, 0, &ours))
		die("ibv_query_gid");
	other = ours;
	other.raw[15] ^= 1;
	qp_connect_gid(qy, qy->qp_num, &other);
	memcpy(src, "B-LOOPED-US-BACK", 16);
	expect("WRITE to our own MR on a QP connected to itself through another node's GID",
	       rdma(qy, false, src, sm, (uintptr_t)mine, mm->rkey), IBV_WC_RETRY_EXC_ERR);
	if (strcmp(mine, "VICTIM-PRIVATE!"))
		die("our own MR changed by a WRITE on a QP looped back through another node's GID");
	qp_connect_gid(qz, qz->qp_num, &ours);
	memcpy(src, "OUR-OWN-LOOPBACK", 16);
	expect("WRITE to our own MR on a QP connected to itself through our own GID",
	       rdma(qz, false, src, sm, (uintptr_t)mine, mm->rkey), IBV_WC_SUCCESS);
	if (memcmp(mine, "OUR-OWN-LOOPBACK", 16))
		die("a loopback WRITE through our own GID did not land");
	/* B gives our own QPN and tells us to connect without a GRH: roshm0
	 * takes such an address vector (as written for InfiniBand; a RoCE NIC
	 * refuses it), but it names no port, so it is no loopback either
	 * (before, it was one, onto our own MRs) */
	struct ibv_qp *qn = qp_new();

	qp_connect_gid(qn, qn->qp_num, NULL);
	memcpy(src, "B-NO-GRH-LOOPED!", 16);
	expect("WRITE to our own MR on a QP connected to itself without a GRH",
	       rdma(qn, false, src, sm, (uintptr_t)mine, mm->rkey), IBV_WC_RETRY_EXC_ERR);
	if (memcmp(mine, "OUR-OWN-LOOPBACK", 16))
		die("our own MR changed by a WRITE on a QP looped back without a GRH");
	put("v.done", "1\n");
	printf("verbs_rkey_peer v: ok\n");
	return 0;
}

static int peer(bool hostile)
{
	char *buf = aligned_alloc(4096, 4096);
	struct ibv_qp *q[NB];
	struct ibv_mr *mr;
	uint64_t v[7], done;
	int n = hostile ? NB : 1;

	memset(buf, 0, 4096);
	strcpy(buf, hostile ? "B-OWN-BUFFER!!!" : "C-PRIVATE-BUF!!");
	mr = ibv_reg_mr(pd, buf, 4096, ACC);
	if (!mr)
		die("ibv_reg_mr");
	for (int i = 0; i < n; i++)
		q[i] = qp_new();
	if (!hostile)
		put("c", "%u %" PRIu64 " %u\n", q[0]->qp_num, (uint64_t)(uintptr_t)buf, mr->rkey);
	get("v", 7, v);
	if (hostile) {
		uint64_t c[3];

		get("c", 3, c);
		/* its QPNs and its own buffer; V plays the lies (V's own MR,
		 * C's MR as "B's buffer") on its first three QPs to B */
		put("b", "%u %u %u %u %" PRIu64 " %u\n", q[0]->qp_num, q[1]->qp_num, q[2]->qp_num,
		    q[3]->qp_num, (uint64_t)(uintptr_t)buf, mr->rkey);
		for (int i = 0; i < NB; i++)
			qp_connect(q[i], (uint32_t)v[2 + i], 'v');
		put("b.ready", "1\n");
	} else {
		qp_connect(q[0], (uint32_t)v[6], 'v');
	}
	get("v.done", 1, &done);
	if (hostile ? memcmp(buf, "V-TO-B-OWN-MR!!", 16) : memcmp(buf, "V-TO-C-THROUGH-C", 16)) {
		fprintf(stderr, "verbs_rkey_peer %s: FAIL: our buffer holds \"%.16s\"\n", role, buf);
		return 1;
	}
	printf("verbs_rkey_peer %s: ok (our buffer: \"%.16s\")\n", role, buf);
	return 0;
}

int main(int argc, char **argv)
{
	struct ibv_device **dl;

	if (argc != 3 || !strchr("vbc", argv[1][0]) || argv[1][1])
		return 2;
	role = argv[1];
	dir = argv[2];
	dl = ibv_get_device_list(NULL);
	if (!dl || !dl[0] || !(ctx = ibv_open_device(dl[0])))
		die("no device");
	ibv_free_device_list(dl);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!pd || !cq)
		die("PD or CQ");
	put_gid();
	return role[0] == 'v' ? victim() : peer(role[0] == 'b');
}
