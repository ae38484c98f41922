// SPDX-License-Identifier: MIT
/*
 * libroshm-verbs unloaded with a context still open, as Open MPI's
 * MPI_Finalize does (it dlcloses its components, libfabric with them and
 * libibverbs with that): the library's notifier thread must not outlive it.
 * The program dlopens our libibverbs.so.1 (LD_LIBRARY_PATH), connects two
 * QPs of one context to each other, posts RECVs on both (which keeps the
 * notifier looking at the rings), exchanges one SEND, then dlcloses the
 * library without closing anything and lives on for 300 ms: a notifier
 * left running would run unmapped code (SIGSEGV).
 *   verbs_unload    (ROSHM_SOCK: a roshmd)
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

static void *lib;

static int die(const char *what)
{
	fprintf(stderr, "verbs_unload: FAIL: %s\n", what);
	exit(1);
}

static void *sym(const char *name)
{
	void *p = dlsym(lib, name);

	if (!p)
		die(name);
	return p;
}

int main(void)
{
	struct ibv_device **(*get_list)(int *);
	struct ibv_context *(*open_dev)(struct ibv_device *);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *);
	struct ibv_cq *(*create_cq)(struct ibv_context *, int, void *, struct ibv_comp_channel *, int);
	struct ibv_qp *(*create_qp)(struct ibv_pd *, struct ibv_qp_init_attr *);
	int (*modify_qp)(struct ibv_qp *, struct ibv_qp_attr *, int);
	int (*query_gid)(struct ibv_context *, uint8_t, int, union ibv_gid *);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *, void *, size_t, int);
	struct ibv_device **dl;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *q[2];
	struct ibv_mr *mr;
	char *buf = malloc(3 * 4096);
	int got = 0;

	lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib || !buf)
		die("dlopen libibverbs.so.1");
	get_list = sym("ibv_get_device_list");
	open_dev = sym("ibv_open_device");
	alloc_pd = sym("ibv_alloc_pd");
	create_cq = sym("ibv_create_cq");
	create_qp = sym("ibv_create_qp");
	modify_qp = sym("ibv_modify_qp");
	query_gid = sym("ibv_query_gid");
	reg_mr = sym("ibv_reg_mr");
	dl = get_list(NULL);
	if (!dl || !dl[0] || strcmp(dl[0]->name, "roshm0"))
		die("not our library (roshm0 not listed)");
	ctx = open_dev(dl[0]);
	pd = ctx ? alloc_pd(ctx) : NULL;
	cq = pd ? create_cq(ctx, 16, NULL, NULL, 0) : NULL;
	mr = cq ? reg_mr(pd, buf, 3 * 4096, IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!mr)
		die("context, pd, cq, mr");
	for (int i = 0; i < 2; i++) {
		struct ibv_qp_init_attr a = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
					      .cap = { .max_send_wr = 4, .max_recv_wr = 4,
						       .max_send_sge = 1, .max_recv_sge = 1 } };

		if (!(q[i] = create_qp(pd, &a)))
			die("create_qp");
	}
	for (int i = 0; i < 2; i++) {
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
		struct ibv_sge sg = { (uintptr_t)buf + 4096 * (unsigned)i, 4096, mr->lkey };
		struct ibv_recv_wr r = { .wr_id = (uint64_t)i, .sg_list = &sg, .num_sge = 1 }, *bad;

		if (modify_qp(q[i], &a, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX))
			die("INIT");
		a.qp_state = IBV_QPS_RTR;
		a.dest_qp_num = q[1 - i]->qp_num;
		a.path_mtu = IBV_MTU_4096;
		a.ah_attr.port_num = 1;
		a.ah_attr.is_global = 1;   /* to our own port (a loopback) */
		a.ah_attr.grh.hop_limit = 64;
		if (query_gid(ctx, 1, 0, &a.ah_attr.grh.dgid))
			die("ibv_query_gid");
		if (modify_qp(q[i], &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
			die("RTR");
		a.qp_state = IBV_QPS_RTS;
		a.timeout = 14;
		a.retry_cnt = 7;
		if (modify_qp(q[i], &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			      IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
			die("RTS");
		if (ibv_post_recv(q[i], &r, &bad) || ibv_post_recv(q[i], &r, &bad))
			die("post_recv");
	}
	{
		struct ibv_sge sg = { (uintptr_t)buf + 8192, 64, mr->lkey };
		struct ibv_send_wr w = { .wr_id = 9, .sg_list = &sg, .num_sge = 1,
					 .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;
		struct ibv_wc wc;

		memset(buf + 8192, 0x5a, 64);
		if (ibv_post_send(q[0], &w, &bad))
			die("post_send");
		for (int k = 0; k < 2000000 && got < 2; k++) {
			int n = ibv_poll_cq(cq, 1, &wc);

			if (n < 0 || (n && wc.status != IBV_WC_SUCCESS))
				die("a completion failed");
			got += n;
			if (!n)
				usleep(10);
		}
		if (got < 2)
			die("the SEND and its RECV did not complete");
	}
	/* one RECV posted on each QP and the rings connected: the notifier
	 * has something to look at every few ms */
	usleep(20000);
	((void (*)(struct ibv_device **))sym("ibv_free_device_list"))(dl);
	if (dlclose(lib))
		die("dlclose");
	usleep(300000);   /* a notifier left behind runs unmapped code by now */
	printf("verbs_unload: the library was unloaded with a context open and two QPs with "
	       "RECVs posted; no thread of it ran on\n");
	free(buf);
	return 0;
}
