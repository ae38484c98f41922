// SPDX-License-Identifier: MIT
/*
 * A verbs program of our own, run through libroshm-verbs beside perftest: the
 * server registers a malloc'd, unaligned buffer; the client, on another node,
 * RDMA WRITEs a pattern into it, READs it back, does FETCH_ADD and CMP_SWAP,
 * then uses a forged rkey (REM_ACCESS_ERR, then the next WR flushes). The
 * server checks its own buffer holds exactly what the client sent.
 *   verbs_check server|client ADDR PORT
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <infiniband/verbs.h>

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

static struct ibv_wc wait_wc(struct ibv_cq *cq)
{
	struct ibv_wc wc;
	int n;

	for (long i = 0; i < 2000000000L; i++) {
		n = ibv_poll_cq(cq, 1, &wc);
		if (n < 0)
			die("ibv_poll_cq");
		if (n)
			return wc;
	}
	die("no completion");
	return wc;
}

static void post(struct ibv_qp *qp, enum ibv_wr_opcode op, void *laddr, uint32_t len,
		 uint32_t lkey, uint64_t raddr, uint32_t rkey, uint64_t a, uint64_t b, uint64_t id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)laddr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD || op == IBV_WR_ATOMIC_CMP_AND_SWP) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = a;
		wr.wr.atomic.swap = b;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	if (ibv_post_send(qp, &wr, &bad))
		die("ibv_post_send");
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
	struct ibv_qp_attr at = { 0 };
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct info me, peer;
	int s, fd, server;
	uint8_t *buf;

	if (argc != 4)
		return 2;
	server = !strcmp(argv[1], "server");
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
	at.qp_state = IBV_QPS_INIT;
	ibv_modify_qp(qp, &at, IBV_QP_STATE);
	at.qp_state = IBV_QPS_RTR;
	ibv_modify_qp(qp, &at, IBV_QP_STATE);
	at.qp_state = IBV_QPS_RTS;
	if (ibv_modify_qp(qp, &at, IBV_QP_STATE))
		die("modify_qp RTS");
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
		    read(fd, &done, 1) != 1)
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
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) ||
	    read(s, &peer, sizeof(peer)) != sizeof(peer))
		die("exchange");
	uint8_t *src = buf, *back = buf + 4096;
	uint64_t old = 0;
	struct ibv_wc wc;

	for (int i = 0; i < PLEN; i++)
		src[i] = (uint8_t)((OFF + i) * 7 + 1);
	post(qp, IBV_WR_RDMA_WRITE, src, PLEN, mr->lkey, peer.addr + OFF, peer.rkey, 0, 0, 1);
	wc = wait_wc(cq);
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != 1 || wc.opcode != IBV_WC_RDMA_WRITE)
		die("WRITE completion");
	memset(back, 0, PLEN);
	post(qp, IBV_WR_RDMA_READ, back, PLEN, mr->lkey, peer.addr + OFF, peer.rkey, 0, 0, 2);
	wc = wait_wc(cq);
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != 2 || memcmp(back, src, PLEN))
		die("READ back differs from what was written");
	post(qp, IBV_WR_ATOMIC_FETCH_AND_ADD, buf + 8000, 8, mr->lkey, peer.addr + CTR, peer.rkey,
	     42, 0, 3);
	wc = wait_wc(cq);
	memcpy(&old, buf + 8000, 8);
	if (wc.status != IBV_WC_SUCCESS || old != 0)
		die("FETCH_ADD");
	post(qp, IBV_WR_ATOMIC_CMP_AND_SWP, buf + 8000, 8, mr->lkey, peer.addr + CTR, peer.rkey,
	     42, 1000, 4);
	wc = wait_wc(cq);
	memcpy(&old, buf + 8000, 8);
	if (wc.status != IBV_WC_SUCCESS || old != 42)
		die("CMP_SWAP");
	/* a forged rkey: remote access error, and the QP flushes what follows */
	post(qp, IBV_WR_RDMA_WRITE, src, 8, mr->lkey, peer.addr + OFF, peer.rkey ^ 0x5a5a, 0, 0, 5);
	post(qp, IBV_WR_RDMA_WRITE, src, 8, mr->lkey, peer.addr + OFF, peer.rkey, 0, 0, 6);
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
	if (ibv_destroy_qp(qp) || ibv_dereg_mr(mr) || ibv_destroy_cq(cq) || ibv_dealloc_pd(pd) ||
	    ibv_close_device(ctx))
		die("release");
	ibv_free_device_list(dl);
	free(buf - 8);
	close(s);
	return 0;
}
