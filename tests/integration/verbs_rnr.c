// SPDX-License-Identifier: MIT
/*
 * A full inbound ring is not "receiver not ready" while RECVs wait for its
 * messages (docs/verbs-compat.md, "Two-sided operations"). On a NIC a SEND
 * is RNR-NAKed only when no RECV is posted: with RECVs posted the NIC places
 * each message at once. Under libroshm-verbs messages wait in the
 * receiver's ring until its library moves them into the RECVs (the
 * application's next poll, or the notifier thread), so a ring can be full
 * while RECVs wait; the sender must then wait for room, not count an RNR
 * NAK. fio's rdma engine in send mode connects with rnr_retry 0 and failed
 * so ("RNR retry counter exceeded").
 *
 * Two processes of one node (fork): the receiver (64 KiB ring: 8 messages
 * of 8000 bytes fit) posts 3 * 8 RECVs and then sleeps without polling; the
 * sender, whose QP has rnr_retry 0, SENDs 24 messages of 8000 bytes. Every
 * SEND must succeed and every RECV hold its message, in order. Then the
 * receiver posts no more RECVs and the sender fills the ring again: the
 * SEND that does not fit gets IBV_WC_RNR_RETRY_EXC_ERR, as on a NIC. Last,
 * the receiver posts RECVs and is stopped (SIGSTOP): an owner that takes
 * nothing for 1 s is answered as one without RECVs, so the SEND that does
 * not fit is RNR after that second, and what fitted arrives once it runs.
 *   verbs_rnr    (ROSHM_SOCK: a roshmd; LD_LIBRARY_PATH: libroshm-verbs)
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

static const char *who = "verbs_rnr";
static pid_t stopped;   /* the receiver, while the sender holds it stopped */

static void die(const char *what)
{
	fprintf(stderr, "%s: FAIL: %s\n", who, what);
	if (stopped)
		kill(stopped, SIGCONT);
	exit(1);
}

#include "rc_common.h"

#define MSG 8000        /* 126 slots of 64 bytes with its header */
#define FIT 8           /* in a ring of 1024 slots */
#define N (3 * FIT)
#define STRIDE 8192

struct end {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
};

static void end_open(struct end *e, size_t bytes)
{
	struct ibv_device **dl = ibv_get_device_list(NULL);
	struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = N + FIT + 2, .max_recv_wr = N,
						.max_send_sge = 1, .max_recv_sge = 1 } };

	if (!dl || !dl[0] || !(e->ctx = ibv_open_device(dl[0])))
		die("ibv_open_device");
	ibv_free_device_list(dl);
	e->pd = ibv_alloc_pd(e->ctx);
	e->cq = e->pd ? ibv_create_cq(e->ctx, 2 * N + FIT + 2, NULL, NULL, 0) : NULL;
	if (!e->cq)
		die("ibv_alloc_pd / ibv_create_cq");
	qa.send_cq = qa.recv_cq = e->cq;
	e->qp = ibv_create_qp(e->pd, &qa);
	e->buf = malloc(bytes);
	if (!e->qp || !e->buf)
		die("ibv_create_qp");
	e->mr = ibv_reg_mr(e->pd, e->buf, bytes, IBV_ACCESS_LOCAL_WRITE);
	if (!e->mr)
		die("ibv_reg_mr");
}

/* One QPN and GID each way over the pipes. */
static void xchg(int wfd, int rfd, struct end *e, uint32_t *peer_qpn, union ibv_gid *peer_gid)
{
	union ibv_gid g = rc_gid(e->ctx);
	uint32_t qpn = e->qp->qp_num;

	if (write(wfd, &qpn, 4) != 4 || write(wfd, g.raw, 16) != 16 ||
	    read(rfd, peer_qpn, 4) != 4 || read(rfd, peer_gid->raw, 16) != 16)
		die("exchange");
}

static void sync_pipe(int wfd, int rfd, char say, char want)
{
	char c = 0;

	if ((say && write(wfd, &say, 1) != 1) || (want && (read(rfd, &c, 1) != 1 || c != want)))
		die("sync");
}

static uint8_t pat(int msg, int i)
{
	return (uint8_t)(msg * 31 + i * 7 + 1);
}

/* RECVs @first.. (@n of them) into buffer slots @slot.. */
static void post_recvs(struct end *e, int first, int n, int slot)
{
	for (int k = 0; k < n; k++) {
		struct ibv_sge sge = { (uintptr_t)e->buf + (size_t)(slot + k) * STRIDE, STRIDE,
				       e->mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = (uint64_t)(first + k), .sg_list = &sge, .num_sge = 1 },
				   *bad;

		if (ibv_post_recv(e->qp, &wr, &bad))
			die("ibv_post_recv");
	}
}

/* @n RECV completions, wr_id @first.. in slots @slot.., holding messages @msg.. */
static void expect_recvs(struct end *e, int first, int n, int slot, int msg)
{
	for (int k = 0; k < n; k++) {
		struct ibv_wc wc = wait_wc(e->cq);
		const uint8_t *b = e->buf + (size_t)(slot + k) * STRIDE;

		if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV ||
		    wc.wr_id != (uint64_t)(first + k) || wc.byte_len != MSG) {
			fprintf(stderr, "RECV %d: wr_id %" PRIu64 " %s opcode %d byte_len %u\n", first + k,
				wc.wr_id, ibv_wc_status_str(wc.status), wc.opcode, wc.byte_len);
			die("a RECV");
		}
		for (int i = 0; i < STRIDE; i++)
			if (b[i] != (i < MSG ? pat(msg + k, i) : 0xee))
				die("a RECV's bytes are not the message");
	}
}

static void receiver(int wfd, int rfd)
{
	struct end e;
	uint32_t peer;
	union ibv_gid pg;

	who = "verbs_rnr receiver";
	setenv("ROSHM_VERBS_RECV_RING", "65536", 1);
	end_open(&e, (size_t)(N + 2 * FIT) * STRIDE);
	memset(e.buf, 0xee, (size_t)(N + 2 * FIT) * STRIDE);
	xchg(wfd, rfd, &e, &peer, &pg);
	rc_connect_rnr(e.qp, peer, &pg, 7);
	post_recvs(&e, 0, N, 0);
	sync_pipe(wfd, rfd, 'r', 0);
	/* the library moves the ring into the RECVs meanwhile; we poll nothing */
	usleep(300000);
	expect_recvs(&e, 0, N, 0, 0);
	printf("verbs_rnr: %d SENDs through a ring of %d, RECVs waiting, all arrived in order\n",
	       N, FIT);
	/* no RECV posted now: the sender's ring fills and the next SEND is RNR */
	sync_pipe(wfd, rfd, 'n', 'd');
	/* the FIT messages that waited, then FIT RECVs left waiting while the
	 * sender stops us (SIGSTOP) and fills the ring again */
	post_recvs(&e, 100, 2 * FIT, N);
	expect_recvs(&e, 100, FIT, N, N);
	sync_pipe(wfd, rfd, 's', 'c');
	expect_recvs(&e, 100 + FIT, FIT, N + FIT, N + FIT + 1);
	printf("verbs_rnr: after the stop, the %d SENDs that fitted arrived\n", FIT);
}

static int send_batch(struct end *e, int from, int n)
{
	for (int m = from; m < from + n; m++)
		rc_post(e->qp, IBV_WR_SEND, e->buf + (size_t)m * STRIDE, MSG, e->mr->lkey, 0, 0, 0, 0,
			(uint64_t)m);
	return from + n;
}

/* @n completions from @from on: @ok SUCCESS, then @last */
static void expect_sends(struct end *e, int from, int n, int ok, enum ibv_wc_status last,
			 const char *what)
{
	for (int m = from; m < from + n; m++) {
		struct ibv_wc wc = wait_wc(e->cq);
		enum ibv_wc_status want = m < from + ok ? IBV_WC_SUCCESS : last;

		if (wc.status != want || wc.wr_id != (uint64_t)m) {
			fprintf(stderr, "SEND %d: wr_id %" PRIu64 " %s, expected %s\n", m, wc.wr_id,
				ibv_wc_status_str(wc.status), ibv_wc_status_str(want));
			die(what);
		}
	}
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* until process @pid is stopped (/proc/PID/stat state T) */
static void wait_stopped(pid_t pid)
{
	char path[64], st[512];

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	for (int i = 0; i < 500; i++) {
		FILE *f = fopen(path, "r");
		char *p = f && fgets(st, sizeof(st), f) ? strrchr(st, ')') : NULL;

		if (f)
			fclose(f);
		if (p && p[1] == ' ' && p[2] == 'T')
			return;
		usleep(10000);
	}
	die("the receiver did not stop");
}

static void sender(int wfd, int rfd)
{
	struct end e;
	uint32_t peer;
	union ibv_gid pg;
	int m;
	double t0, waited;

	who = "verbs_rnr sender";
	end_open(&e, (size_t)(N + 2 * (FIT + 1)) * STRIDE);
	xchg(wfd, rfd, &e, &peer, &pg);
	/* rnr_retry 0, as fio connects: the first RNR NAK fails the SEND */
	rc_connect_rnr(e.qp, peer, &pg, 0);
	for (m = 0; m < N + 2 * (FIT + 1); m++)
		for (int i = 0; i < MSG; i++)
			e.buf[(size_t)m * STRIDE + i] = pat(m, i);
	sync_pipe(wfd, rfd, 0, 'r');
	m = send_batch(&e, 0, N);
	expect_sends(&e, 0, N, N, IBV_WC_SUCCESS, "a SEND into a full ring whose owner has RECVs waiting");
	sync_pipe(wfd, rfd, 0, 'n');
	m = send_batch(&e, m, FIT + 1);
	expect_sends(&e, N, FIT + 1, FIT, IBV_WC_RNR_RETRY_EXC_ERR,
		     "a SEND into a full ring with no RECV waiting");
	printf("verbs_rnr: with no RECV waiting, %d SENDs filled the ring and the next got "
	       "RNR_RETRY_EXC_ERR\n", FIT);
	/* A receiver with RECVs waiting that takes nothing (stopped): after
	 * 1 s without progress the SEND that does not fit is RNR. */
	sync_pipe(wfd, rfd, 'd', 's');
	rc_connect_rnr(e.qp, peer, &pg, 0);   /* out of the error state */
	stopped = getppid();
	kill(stopped, SIGSTOP);
	wait_stopped(stopped);
	t0 = now_s();
	send_batch(&e, m, FIT + 1);
	expect_sends(&e, m, FIT + 1, FIT, IBV_WC_RNR_RETRY_EXC_ERR,
		     "a SEND into the full ring of a stopped receiver with RECVs waiting");
	waited = now_s() - t0;
	kill(stopped, SIGCONT);
	stopped = 0;
	if (waited < 0.9 || waited > 20)
		die("the stopped receiver's RNR did not come after its 1 s without progress");
	printf("verbs_rnr: a stopped receiver with RECVs waiting: RNR_RETRY_EXC_ERR after %.1f s\n",
	       waited);
	sync_pipe(wfd, rfd, 'c', 0);
}

int main(void)
{
	int to_snd[2], to_rcv[2], st;
	pid_t pid;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (pipe(to_snd) || pipe(to_rcv))
		die("pipe");
	pid = fork();
	if (pid < 0)
		die("fork");
	/* each keeps its own ends only: a side that dies ends the other's read */
	if (pid == 0) {
		close(to_snd[1]);
		close(to_rcv[0]);
		sender(to_rcv[1], to_snd[0]);
		return 0;
	}
	close(to_snd[0]);
	close(to_rcv[1]);
	receiver(to_snd[1], to_rcv[0]);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
		die("the sender failed");
	printf("verbs_rnr: ok\n");
	return 0;
}
