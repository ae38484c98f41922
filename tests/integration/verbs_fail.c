// SPDX-License-Identifier: MIT
/*
 * Failures under a stream of RDMA WRITEs through libroshm-verbs, as a NIC
 * reports them: the client keeps 16 signaled 64-byte WRITEs in flight to the
 * server's MR until one fails; every WR before it succeeded, the failing one
 * has the status of the failure, every WR still outstanding and every WR
 * posted after it completes with IBV_WC_WR_FLUSH_ERR (none is lost, none
 * hangs), and the QP is in the error state.
 *   verbs_fail server dereg|hold ADDR PORT
 *     dereg: deregister the MR 300 ms after the client starts (a region
 *     withdrawn); hold: keep it until killed (the script kills this process,
 *     or its node's roshmd)
 *   verbs_fail client ADDR PORT STATUS[,STATUS...]
 *     the statuses the first failure may have (REM_ACCESS_ERR, RETRY_EXC_ERR, ...)
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

struct info {
	uint64_t addr;
	uint32_t rkey;
	uint32_t qpn;
	union ibv_gid gid;   /* of its node: a RoCE address vector's GRH names it */
};

static void die(const char *what)
{
	fprintf(stderr, "verbs_fail: FAIL: %s\n", what);
	exit(1);
}

/* INIT, RTR with the peer's QPN and GID, RTS: as any RC application
 * connects. */
static void connect_rc(struct ibv_qp *qp, uint32_t dest, const union ibv_gid *gid)
{
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				  .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
						     IBV_ACCESS_REMOTE_ATOMIC };

	if (ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("modify_qp INIT");
	at.qp_state = IBV_QPS_RTR;
	at.dest_qp_num = dest;
	at.path_mtu = IBV_MTU_4096;
	at.ah_attr.port_num = 1;
	at.ah_attr.is_global = 1;
	at.ah_attr.grh.dgid = *gid;
	at.ah_attr.grh.hop_limit = 64;
	if (ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("modify_qp RTR");
	at.qp_state = IBV_QPS_RTS;
	at.timeout = 14;
	at.retry_cnt = 7;
	if (ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("modify_qp RTS");
}

static void post_write(struct ibv_qp *qp, void *src, uint32_t lkey, const struct info *to,
		       uint64_t id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)src, .length = 64, .lkey = lkey };
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED }, *bad;

	wr.wr.rdma.remote_addr = to->addr + (id % 64) * 64;
	wr.wr.rdma.rkey = to->rkey;
	if (ibv_post_send(qp, &wr, &bad))
		die("ibv_post_send");
}

/* The enum's name (ibv_wc_status_str gives prose) of the statuses a remote failure may have. */
static const char *stname(enum ibv_wc_status st)
{
	switch (st) {
	case IBV_WC_SUCCESS: return "SUCCESS";
	case IBV_WC_REM_ACCESS_ERR: return "REM_ACCESS_ERR";
	case IBV_WC_RETRY_EXC_ERR: return "RETRY_EXC_ERR";
	case IBV_WC_REM_INV_REQ_ERR: return "REM_INV_REQ_ERR";
	case IBV_WC_REM_OP_ERR: return "REM_OP_ERR";
	case IBV_WC_WR_FLUSH_ERR: return "WR_FLUSH_ERR";
	default: return ibv_wc_status_str(st);
	}
}

static bool status_in(enum ibv_wc_status st, const char *list)
{
	char buf[256], *save = NULL;

	snprintf(buf, sizeof(buf), "%s", list);
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
		if (!strcmp(t, stname(st)))
			return true;
	return false;
}

static void client(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *mr, const struct info *to,
		   const char *allowed, int s)
{
	uint64_t posted = 0, done = 0, ok = 0, flushed = 0, err_id = 0;
	enum ibv_wc_status first = IBV_WC_SUCCESS;
	bool failed = false, extra = false;
	time_t t0 = time(NULL);
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (write(s, "r", 1) != 1)
		die("exchange");
	while (!failed || !extra || done < posted) {
		struct ibv_wc wc[16];
		int n;

		if (time(NULL) - t0 > 60) {
			fprintf(stderr, "posted %" PRIu64 " done %" PRIu64 " ok %" PRIu64 " failed %d\n",
				posted, done, ok, failed);
			die(failed ? "WRs after the failure did not all complete within 60 s"
				   : "no failure within 60 s");
		}
		while (!failed && posted - done < 16)
			post_write(qp, mr->addr, mr->lkey, to, posted++);
		if (failed && !extra) {   /* posted to a QP in the error state: flushed */
			for (int i = 0; i < 4; i++)
				post_write(qp, mr->addr, mr->lkey, to, posted++);
			extra = true;
		}
		n = ibv_poll_cq(cq, 16, wc);
		if (n < 0)
			die("ibv_poll_cq");
		for (int i = 0; i < n; i++) {
			if (wc[i].wr_id != done) {
				fprintf(stderr, "completion of wr %" PRIu64 ", expected %" PRIu64 "\n",
					wc[i].wr_id, done);
				die("completions out of posting order");
			}
			done++;
			if (!failed && wc[i].status == IBV_WC_SUCCESS) {
				ok++;
			} else if (!failed) {
				failed = true;
				first = wc[i].status;
				err_id = wc[i].wr_id;
			} else if (wc[i].status == IBV_WC_WR_FLUSH_ERR) {
				flushed++;
			} else {
				fprintf(stderr, "wr %" PRIu64 " after the failure: %s\n", wc[i].wr_id,
					stname(wc[i].status));
				die("a WR after the failure did not flush");
			}
		}
	}
	if (!ok)
		die("no WRITE succeeded before the failure");
	if (!status_in(first, allowed)) {
		fprintf(stderr, "first failure: %s, expected one of %s\n", stname(first), allowed);
		die("the failure's status");
	}
	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia) || a.qp_state != IBV_QPS_ERR)
		die("the QP is not in the error state after the failure");
	printf("verbs_fail client: %" PRIu64 " WRITEs ok, then %s (wr %" PRIu64 "), %" PRIu64
	       " flushed (4 posted after it); QP in the error state\n", ok, stname(first),
	       err_id, flushed);
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 64, .max_send_sge = 1 } };
	struct ibv_device **dl;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct info me, peer;
	bool server;
	void *buf = NULL;
	int s, fd;
	char c;

	server = argc == 5 && !strcmp(argv[1], "server");
	if (!server && !(argc == 5 && !strcmp(argv[1], "client")))
		return 2;
	sa.sin_port = htons((uint16_t)atoi(argv[server ? 4 : 3]));
	inet_pton(AF_INET, argv[server ? 3 : 2], &sa.sin_addr);
	dl = ibv_get_device_list(NULL);
	if (!dl || !dl[0])
		die("no device");
	ctx = ibv_open_device(dl[0]);
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	cq = ctx ? ibv_create_cq(ctx, 128, NULL, NULL, 0) : NULL;
	qa.send_cq = qa.recv_cq = cq;
	qp = pd && cq ? ibv_create_qp(pd, &qa) : NULL;
	if (!qp || posix_memalign(&buf, 4096, 4096))
		die("device, pd, cq, qp or buffer");
	memset(buf, 0x11, 4096);
	mr = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!mr)
		die("ibv_reg_mr");
	me = (struct info){ (uintptr_t)buf, mr->rkey, qp->qp_num, { { 0 } } };
	if (ibv_query_gid(ctx, 1, 0, &me.gid))
		die("ibv_query_gid");
	s = socket(AF_INET, SOCK_STREAM, 0);
	if (server) {
		int one = 1;

		setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) || listen(s, 1))
			die("listen");
		fd = accept(s, NULL, NULL);
		if (fd < 0 || write(fd, &me, sizeof(me)) != sizeof(me) ||
		    read(fd, &peer, sizeof(peer)) != sizeof(peer))
			die("exchange");
		/* connected to the client's QP: its owner may use our MR */
		connect_rc(qp, peer.qpn, &peer.gid);
		if (write(fd, "k", 1) != 1 || read(fd, &c, 1) != 1)
			die("exchange");
		if (!strcmp(argv[2], "dereg")) {
			usleep(300000);
			if (ibv_dereg_mr(mr))
				die("ibv_dereg_mr");
			mr = NULL;
			printf("verbs_fail server: MR deregistered under the client's WRITEs\n");
		} else {
			printf("verbs_fail server: serving until killed\n");
		}
		fflush(stdout);
		while (read(fd, &c, 1) > 0)   /* until the client is done */
			;
		/* release (its roshmd may be gone: the calls may fail, nothing leaks) */
		ibv_destroy_qp(qp);
		if (mr)
			ibv_dereg_mr(mr);
		ibv_destroy_cq(cq);
		ibv_dealloc_pd(pd);
		ibv_close_device(ctx);
		ibv_free_device_list(dl);
		free(buf);
		close(fd);
		close(s);
		return 0;
	}
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) ||
	    read(s, &peer, sizeof(peer)) != sizeof(peer) || write(s, &me, sizeof(me)) != sizeof(me))
		die("exchange");
	connect_rc(qp, peer.qpn, &peer.gid);
	if (read(s, &c, 1) != 1)   /* the server's QP is connected to ours */
		die("exchange (connected)");
	client(qp, cq, mr, &peer, argv[4], s);
	if (ibv_destroy_qp(qp) || ibv_dereg_mr(mr) || ibv_destroy_cq(cq) || ibv_dealloc_pd(pd) ||
	    ibv_close_device(ctx))
		die("release");
	ibv_free_device_list(dl);
	free(buf);
	close(s);
	return 0;
}
