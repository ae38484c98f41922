/* SPDX-License-Identifier: MIT */
/*
 * What the RC verbs test programs share (verbs_check.c, verbs_events.c,
 * verbs_mw.c, verbs_xrc.c, verbs_rnr.c): waiting for a completion, connecting a QP to a
 * peer QPN, reading its state, the out-of-band connection. Include after defining die(const char *what), which
 * does not return.
 */
#ifndef RC_COMMON_H
#define RC_COMMON_H

#include <arpa/inet.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

/* The next completion of @cq, within 30 s. */
static inline struct ibv_wc wait_wc(struct ibv_cq *cq)
{
	struct ibv_wc wc;
	time_t t0 = time(NULL);
	int n;

	while (time(NULL) - t0 < 30) {
		n = ibv_poll_cq(cq, 1, &wc);
		if (n < 0)
			die("ibv_poll_cq");
		if (n)
			return wc;
	}
	die("no completion within 30 s");
	return wc;
}

/* The attributes each transition of an RC QP needs, no fewer: a NIC's
 * ibv_modify_qp, and roshm0's, refuses a mask without them. */
#define RC_INIT_MASK (IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)
#define RC_RTR_MASK (IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | \
		     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)
#define RC_RTS_MASK (IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | \
		     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)

/* The GID of @ctx's port 1 (roshm0: its node's), which a peer's GRH names. */
static inline union ibv_gid rc_gid(struct ibv_context *ctx)
{
	union ibv_gid g;

	if (ibv_query_gid(ctx, 1, 0, &g))
		die("ibv_query_gid");
	return g;
}

/* @a's fields for RTR to @dest at @gid (a RoCE address vector has a GRH)
 * and RTS, beside what the caller set (the state, min_rnr_timer,
 * rnr_retry). */
static inline void rc_path_gid(struct ibv_qp_attr *a, uint32_t dest, const union ibv_gid *gid)
{
	a->dest_qp_num = dest;
	a->path_mtu = IBV_MTU_4096;
	a->ah_attr.port_num = 1;
	a->ah_attr.is_global = 1;
	a->ah_attr.grh.dgid = *gid;
	a->ah_attr.grh.hop_limit = 64;
	a->max_dest_rd_atomic = 1;
	a->max_rd_atomic = 1;
	a->timeout = 14;
	a->retry_cnt = 7;
}

/* The same to @dest on @qp's own port: a QP of our node. */
static inline void rc_path(struct ibv_qp *qp, struct ibv_qp_attr *a, uint32_t dest)
{
	union ibv_gid g = rc_gid(qp->context);

	rc_path_gid(a, dest, &g);
}

/* RESET (unless it is there), INIT, RTR to @dest at @gid, RTS: remote
 * WRITE, READ and atomics allowed, RNR retried @rnr_retry times (7: for
 * good). */
static inline void rc_connect_rnr(struct ibv_qp *qp, uint32_t dest, const union ibv_gid *gid,
				  uint8_t rnr_retry)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };

	if (qp->state != IBV_QPS_RESET && ibv_modify_qp(qp, &a, IBV_QP_STATE))
		die("modify_qp RESET");
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_INIT, .port_num = 1,
				  .qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
						     IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC };
	if (ibv_modify_qp(qp, &a, RC_INIT_MASK))
		die("modify_qp INIT");
	a.qp_state = IBV_QPS_RTR;
	rc_path_gid(&a, dest, gid);
	a.min_rnr_timer = 1;
	/* a UC QP has neither responder resources nor retries */
	if (ibv_modify_qp(qp, &a, qp->qp_type == IBV_QPT_UC ? RC_RTR_MASK & ~(IBV_QP_MAX_DEST_RD_ATOMIC |
									   IBV_QP_MIN_RNR_TIMER)
							    : RC_RTR_MASK))
		die("modify_qp RTR");
	a.qp_state = IBV_QPS_RTS;
	a.rnr_retry = rnr_retry;
	if (ibv_modify_qp(qp, &a, qp->qp_type == IBV_QPT_UC ? IBV_QP_STATE | IBV_QP_SQ_PSN : RC_RTS_MASK))
		die("modify_qp RTS");
}

/* The same, RNR retried for good. */
static inline void rc_connect_gid(struct ibv_qp *qp, uint32_t dest, const union ibv_gid *gid)
{
	rc_connect_rnr(qp, dest, gid, 7);
}

/* The same to a QP of our own node (ours, or another pod's there). */
static inline void rc_connect(struct ibv_qp *qp, uint32_t dest)
{
	union ibv_gid g = rc_gid(qp->context);

	rc_connect_gid(qp, dest, &g);
}

/* One signaled WR of @op from @len bytes at @laddr (@lkey) to @raddr
 * (@rkey); an atomic's compare_add @a and swap @b. */
static inline void rc_post(struct ibv_qp *qp, enum ibv_wr_opcode op, void *laddr,
			   uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey, uint64_t a,
			   uint64_t b, uint64_t id)
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

/* The out-of-band connection of a two-process check on TCP socket @s: the
 * server listens on @addr:@port and returns the accepted socket, the
 * client connects (for 5 s while nobody listens yet) and returns @s. */
static inline int rc_oob_connect(bool server, int s, const char *addr, int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int one = 1, fd = s;

	inet_pton(AF_INET, addr, &sa.sin_addr);
	if (server) {
		setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) || listen(s, 1) ||
		    (fd = accept(s, NULL, NULL)) < 0)
			die("out-of-band listen");
		return fd;
	}
	for (int i = 0; connect(s, (struct sockaddr *)&sa, sizeof(sa)); i++) {
		if (i == 50)
			die("out-of-band connect");
		usleep(100000);
	}
	return fd;
}

/* Our GID to the peer at the other end of out-of-band socket @fd, and its
 * GID back (@ctx: our device; both sides call it at the same point). */
static inline union ibv_gid rc_xchg_gid(int fd, struct ibv_context *ctx)
{
	union ibv_gid ours = rc_gid(ctx), theirs;
	size_t got = 0;
	ssize_t n;

	if (write(fd, ours.raw, sizeof(ours.raw)) != (ssize_t)sizeof(ours.raw))
		die("out-of-band: sending our GID");
	while (got < sizeof(theirs.raw)) {
		n = read(fd, theirs.raw + got, sizeof(theirs.raw) - got);
		if (n <= 0)
			die("out-of-band: the peer's GID");
		got += (size_t)n;
	}
	return theirs;
}

/* @qp's state as ibv_query_qp answers it. */
static inline enum ibv_qp_state rc_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
		die("ibv_query_qp");
	return a.qp_state;
}

#endif
