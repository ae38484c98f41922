/* SPDX-License-Identifier: MIT */
/*
 * What verbs_ud.c and verbs_mcast.c share: a context with a CQ, a UD QP
 * and one MR (NRECV receive buffers of RSZ bytes, then a send buffer),
 * datagrams of a pattern, and waiting for completions. Include once, after
 * defining UD_PROG (the program's name in failure messages).
 */
#ifndef UD_COMMON_H
#define UD_COMMON_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "rv.h"   /* RV_UD_MTU, RV_UD_GRH */

#define QK 0x11223344u
#define NRECV 32
#define RSZ (RV_UD_MTU + RV_UD_GRH)
#define IMM(i) htonl(0xabc00000u + (i))

struct ud {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;           /* NRECV receive buffers of RSZ, then a send buffer */
	union ibv_gid gid;
};

__attribute__((noreturn)) static int die(const char *what)
{
	fprintf(stderr, UD_PROG ": FAIL: %s (errno %s)\n", what, strerror(errno));
	exit(1);
}

static inline uint8_t pat(uint32_t i, uint32_t seed)
{
	return (uint8_t)(i * 31u + seed * 17u + 5u);
}

static inline void fill(uint8_t *p, uint32_t len, uint32_t seed)
{
	for (uint32_t i = 0; i < len; i++)
		p[i] = pat(i, seed);
}

static inline bool same(const uint8_t *p, uint32_t len, uint32_t seed)
{
	for (uint32_t i = 0; i < len; i++)
		if (p[i] != pat(i, seed))
			return false;
	return true;
}

static inline void sync_byte(int fd, char c)
{
	char got;

	if (write(fd, &c, 1) != 1 || read(fd, &got, 1) != 1 || got != c)
		die("exchange");
}

static inline struct ibv_qp *ud_qp(struct ud *u, uint32_t nrecv, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr ia = { .send_cq = u->cq, .recv_cq = u->cq, .srq = srq,
				       .qp_type = IBV_QPT_UD,
				       .cap = { .max_send_wr = 32, .max_send_sge = 1,
						.max_recv_wr = nrecv, .max_recv_sge = 1 } };
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
				 .qkey = QK };
	struct ibv_qp *qp = ibv_create_qp(u->pd, &ia);

	if (!qp)
		return NULL;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		die("modify_qp INIT");
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		die("modify_qp RTR");
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		die("modify_qp RTS");
	return qp;
}

static inline void ud_open(struct ud *u)
{
	struct ibv_device **dl = ibv_get_device_list(NULL);

	if (!dl || !dl[0] || !(u->ctx = ibv_open_device(dl[0])))
		die("ibv_open_device");
	ibv_free_device_list(dl);
	u->pd = ibv_alloc_pd(u->ctx);
	u->cq = u->pd ? ibv_create_cq(u->ctx, 256, NULL, NULL, 0) : NULL;
	if (!u->cq || ibv_query_gid(u->ctx, 1, 0, &u->gid))
		die("pd/cq/gid");
	if (posix_memalign((void **)&u->buf, 4096, (NRECV + 1) * (size_t)RSZ))
		die("posix_memalign");
	memset(u->buf, 0xee, (NRECV + 1) * (size_t)RSZ);
	u->mr = ibv_reg_mr(u->pd, u->buf, (NRECV + 1) * (size_t)RSZ, IBV_ACCESS_LOCAL_WRITE);
	if (!u->mr || !(u->qp = ud_qp(u, NRECV, NULL)))
		die("mr/qp");
}

static inline void post_recv(struct ud *u, struct ibv_qp *qp, uint32_t i, uint32_t len)
{
	struct ibv_sge sg = { (uintptr_t)(u->buf + (size_t)i * RSZ), len, u->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sg, .num_sge = 1 }, *bad;

	memset(u->buf + (size_t)i * RSZ, 0xee, RSZ);
	if (ibv_post_recv(qp, &wr, &bad))
		die("ibv_post_recv");
}

/* Post a datagram of @len bytes (pattern @seed) from the send buffer. */
static inline int send_ud(struct ud *u, struct ibv_qp *qp, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey,
		   uint32_t len, uint32_t seed, bool imm, enum ibv_wr_opcode op)
{
	uint8_t *s = u->buf + (size_t)NRECV * RSZ;
	struct ibv_sge sg = { (uintptr_t)s, len, u->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1000 + seed, .sg_list = &sg, .num_sge = 1,
				  .opcode = op, .send_flags = IBV_SEND_SIGNALED }, *bad;

	if (len <= RSZ)
		fill(s, len, seed);
	if (imm) {
		wr.opcode = IBV_WR_SEND_WITH_IMM;
		wr.imm_data = IMM(seed);
	}
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qpn;
	wr.wr.ud.remote_qkey = qkey;
	return ibv_post_send(qp, &wr, &bad);
}

/* The next completion within @ms, or false. */
static inline bool next_wc(struct ibv_cq *cq, struct ibv_wc *wc, int ms)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n < 0)
			die("ibv_poll_cq");
		if (n)
			return true;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
	return false;
}

static inline void sent_ok(struct ud *u, const char *what)
{
	struct ibv_wc wc;

	if (!next_wc(u->cq, &wc, 10000) || wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_SEND) {
		fprintf(stderr, "%s: %s\n", what, ibv_wc_status_str(wc.status));
		die("a UD send did not complete as sent");
	}
}

static inline void nothing(struct ud *u, int ms, const char *what)
{
	struct ibv_wc wc;

	if (next_wc(u->cq, &wc, ms)) {
		fprintf(stderr, "%s: got status %s byte_len %u\n", what, ibv_wc_status_str(wc.status),
			wc.byte_len);
		die("a datagram arrived that must not");
	}
}

/* PROG server|client ADDR PORT: the server accepts the client's TCP
 * connection, and each runs its part over it. */
static inline int ud_main(int argc, char **argv, void (*server)(int), void (*client)(int))
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int s, fd, one = 1;

	if (argc != 4)
		return 2;
	sa.sin_port = htons((uint16_t)atoi(argv[3]));
	inet_pton(AF_INET, argv[2], &sa.sin_addr);
	s = socket(AF_INET, SOCK_STREAM, 0);
	if (!strcmp(argv[1], "server")) {
		setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) || listen(s, 1) ||
		    (fd = accept(s, NULL, NULL)) < 0)
			die("listen");
		server(fd);
		close(fd);
	} else {
		if (connect(s, (struct sockaddr *)&sa, sizeof(sa)))
			die("connect");
		client(s);
	}
	close(s);
	return 0;
}

#endif
