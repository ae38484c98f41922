// SPDX-License-Identifier: MIT
/*
 * libroshm-verbs' asynchronous events and the small calls around them, in
 * one process of a roshm node (check_verbs_perftest.sh runs it):
 *  - an SRQ armed with ibv_modify_srq(srq_limit 3) raises
 *    IBV_EVENT_SRQ_LIMIT_REACHED once fewer than 3 RECVs remain, and only
 *    once (the limit reads 0 after it); the async fd poll()s readable then,
 *    not before, and a non-blocking ibv_get_async_event says EAGAIN when
 *    nothing waits;
 *  - a QP on the SRQ that goes to the error state raises
 *    IBV_EVENT_QP_LAST_WQE_REACHED, and ibv_destroy_qp waits until that
 *    event is acked (a thread destroys it; it must not return before the
 *    ack); a QP destroyed with its event still queued takes the event along;
 *  - a CQ that overruns raises IBV_EVENT_CQ_ERR and ibv_poll_cq fails;
 *  - ibv_resize_cq keeps what the CQ holds;
 *  - the string and rate calls: the same answers as the system's
 *    libibverbs (rdma-core, loaded beside ours with dlmopen);
 *  - a child of fork() has its own copy of registered pages;
 *  - ibv_create_qp_ex's work-request API (ibv_wr_*): a batch of an RDMA
 *    WRITE, an inline SEND_WITH_IMM and a FETCH_ADD lands as posted; a batch
 *    with an operation roshm0 lacks posts nothing (EOPNOTSUPP); send
 *    operations it lacks are refused at creation;
 *  - ibv_create_cq_ex's polling API (ibv_start_poll, ibv_wc_read_*) gives
 *    what ibv_poll_cq would; completion timestamps (ibv_query_device_ex
 *    says 1 GHz, 64 bits) lie between ibv_query_rt_values_ex's readings
 *    before the post and after the poll, their wall-clock form between
 *    CLOCK_REALTIME's (flow tags are refused: EOPNOTSUPP);
 *  - CQs sharing a completion channel: every completion into an armed CQ
 *    fires and no event is withdrawn (an event of one CQ may be the token
 *    for a poll of another: perftest 4.5 -e); a CQ alone on its channel: a
 *    poll that empties it withdraws its untaken event (ibv_rc_pingpong -t
 *    -e never wakes to an empty CQ);
 *  - an MR over the registering thread's own stack, ibv_reg_mr's frames
 *    inside it: the thread's locals keep their values, a READ and a WRITE
 *    through the MR act on the bytes the thread sees;
 *  - a blocking ibv_get_cq_event / ibv_get_async_event sleeps through
 *    signals whose handler has SA_RESTART and returns the event that comes
 *    after them, and fails with EINTR on a signal without it (the kernel's
 *    read(2) of the uverbs fds does the same).
 *   verbs_events
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

__attribute__((noreturn)) static void die(const char *what)
{
	fprintf(stderr, "verbs_events: FAIL: %s (errno %s)\n", what, strerror(errno));
	exit(1);
}

#include "rc_common.h"

/* @n completions of @cq, all successful, within 30 s */
static void reap(struct ibv_cq *cq, int n)
{
	time_t t0 = time(NULL);
	struct ibv_wc wc;

	while (n > 0) {
		int k = ibv_poll_cq(cq, 1, &wc);

		if (k < 0)
			die("ibv_poll_cq");
		if (k && wc.status != IBV_WC_SUCCESS) {
			fprintf(stderr, "completion: %s\n", ibv_wc_status_str(wc.status));
			die("a completion failed");
		}
		n -= k;
		if (time(NULL) - t0 > 30)
			die("no completion within 30 s");
	}
}

static bool readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

/* Do @n events wait on the channel's eventfd within @ms? (its count, as
 * /proc/self/fdinfo shows it: nothing is taken) */
static bool queued_events(int fd, unsigned long long n, int ms)
{
	char path[64], line[128];
	unsigned long long count = 0;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	for (int t = 0; t <= ms; t += 10) {
		FILE *f = fopen(path, "r");

		if (!f)
			die("fdinfo");
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "eventfd-count: %llx", &count) == 1)
				break;
		fclose(f);
		if (count >= n)
			return count == n;
		usleep(10000);
	}
	return false;
}

/* The next event, within 10 s (the fd is non-blocking). */
static struct ibv_async_event next_event(struct ibv_context *ctx, const char *what)
{
	struct ibv_async_event ev;

	if (!readable(ctx->async_fd, 10000))
		die(what);
	if (ibv_get_async_event(ctx, &ev))
		die(what);
	return ev;
}

static void no_event(struct ibv_context *ctx, const char *what)
{
	struct ibv_async_event ev;

	errno = 0;
	if (ibv_get_async_event(ctx, &ev) != -1 || errno != EAGAIN) {
		fprintf(stderr, "unexpected event %s\n", ibv_event_type_str(ev.event_type));
		die(what);
	}
}

struct destroyer {
	struct ibv_qp *qp;
	int ret;
	volatile bool done;
};

static void *destroy_thread(void *arg)
{
	struct destroyer *d = arg;

	d->ret = ibv_destroy_qp(d->qp);
	d->done = true;
	return NULL;
}

static void send1(struct ibv_qp *qp, struct ibv_mr *mr, void *buf)
{
	struct ibv_sge sg = { (uintptr_t)buf, 64, mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	if (ibv_post_send(qp, &wr, &bad))
		die("ibv_post_send SEND");
}

/* Post the SRQ's RECV @id (one of pages 4 to 7 of @buf); its errno. */
static int srq_post(struct ibv_srq *srq, struct ibv_mr *mr, uint8_t *buf, uint64_t id)
{
	struct ibv_sge sg = { (uintptr_t)(buf + (size_t)(4 + id % 4) * 4096), 4096, mr->lkey };
	struct ibv_recv_wr rw = { .wr_id = id, .sg_list = &sg, .num_sge = 1 }, *bad;

	return ibv_post_srq_recv(srq, &rw, &bad);
}

/*
 * ibv_modify_srq(IBV_SRQ_MAX_WR) with RECV 103 left of srq_events and 7
 * more (8 of max_wr 8): not below what it holds, nor a limit above the new
 * size; to 20, after which 12 more fit and a 21st does not, and the next
 * message takes RECV 103, the oldest, posted before the resize.
 */
static void srq_resize(struct ibv_srq *srq, struct ibv_cq *cq, struct ibv_qp *snd, struct ibv_mr *mr,
		       uint8_t *buf)
{
	struct ibv_device_attr da;
	struct ibv_srq_attr at = { .max_wr = 4 };
	uint64_t id = 104;
	bool recv = false;

	if (ibv_query_device(srq->context, &da) || !(da.device_cap_flags & IBV_DEVICE_SRQ_RESIZE))
		die("srq resize: no IBV_DEVICE_SRQ_RESIZE");
	for (; id < 111; id++)
		if (srq_post(srq, mr, buf, id))
			die("srq resize: 8 RECVs in an SRQ of 8");
	if (srq_post(srq, mr, buf, id) != ENOMEM)
		die("srq resize: a 9th RECV in an SRQ of 8");
	if (ibv_modify_srq(srq, &at, IBV_SRQ_MAX_WR) != EINVAL)
		die("srq resize: to 4 with 8 RECVs posted");
	at = (struct ibv_srq_attr){ .max_wr = 20, .srq_limit = 21 };
	if (ibv_modify_srq(srq, &at, IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT) != EINVAL)
		die("srq resize: to 20 with a limit of 21");
	at.srq_limit = 0;
	if (ibv_modify_srq(srq, &at, IBV_SRQ_MAX_WR) || ibv_query_srq(srq, &at) || at.max_wr != 20)
		die("srq resize: to 20");
	for (; id < 123; id++)
		if (srq_post(srq, mr, buf, id))
			die("srq resize: 20 RECVs in an SRQ of 20");
	if (srq_post(srq, mr, buf, id) != ENOMEM)
		die("srq resize: a 21st RECV in an SRQ of 20");
	send1(snd, mr, buf);
	for (int n = 0; n < 2;) {
		struct ibv_wc wc;
		int k = ibv_poll_cq(cq, 1, &wc);

		if (k < 0 || (k && wc.status != IBV_WC_SUCCESS))
			die("srq resize: a completion");
		if (k && wc.opcode == IBV_WC_RECV) {
			if (wc.wr_id != 103)
				die("srq resize: the message did not take the oldest RECV");
			recv = true;
		}
		n += k;
	}
	if (!recv)
		die("srq resize: no RECV completion");
	printf("verbs_events: SRQ resized from 8 to 20 with 8 RECVs held: not below them, nor with a "
	       "limit above the size; 20 fit then, and the next message takes the oldest\n");
}

static void srq_events(struct ibv_context *ctx, struct ibv_pd *pd)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 8, .max_sge = 1, .srq_limit = 4 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);
	struct ibv_srq_attr at = { .srq_limit = 3 };
	uint8_t *buf = aligned_alloc(4096, 8 * 4096);
	struct ibv_mr *mr = buf ? ibv_reg_mr(pd, buf, 8 * 4096, IBV_ACCESS_LOCAL_WRITE) : NULL;
	struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .srq = srq, .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 4, .max_send_sge = 1 } };
	struct ibv_qp_init_attr sia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
					.cap = { .max_send_wr = 8, .max_send_sge = 1,
						 .max_recv_wr = 1, .max_recv_sge = 1 } };
	struct ibv_qp_attr err = { .qp_state = IBV_QPS_ERR };
	struct ibv_qp *r[2], *snd[2];
	struct ibv_async_event ev;
	struct destroyer d;
	pthread_t th;

	if (!cq || !srq || !mr)
		die("srq: cq, srq or mr");
	if (ibv_query_srq(srq, &at) || at.srq_limit != 0)
		die("ibv_create_srq armed the SRQ (srq_limit is ignored there)");
	at.srq_limit = 3;
	for (int i = 0; i < 2; i++) {
		if (!(r[i] = ibv_create_qp(pd, &ia)) || !(snd[i] = ibv_create_qp(pd, &sia)))
			die("srq: ibv_create_qp");
		rc_connect(snd[i], r[i]->qp_num);
		rc_connect(r[i], snd[i]->qp_num);
	}
	for (int i = 0; i < 4; i++) {
		struct ibv_sge sg = { (uintptr_t)(buf + (size_t)(4 + i) * 4096), 4096, mr->lkey };
		struct ibv_recv_wr rw = { .wr_id = 100 + (uint64_t)i, .sg_list = &sg, .num_sge = 1 }, *bad;

		if (ibv_post_srq_recv(srq, &rw, &bad))
			die("ibv_post_srq_recv");
	}
	if (ibv_modify_srq(srq, &at, IBV_SRQ_LIMIT))
		die("ibv_modify_srq limit 3");
	if (readable(ctx->async_fd, 0))
		die("the async fd is readable with no event");
	no_event(ctx, "an event before any RECV was taken");

	send1(snd[0], mr, buf);   /* 4 -> 3 RECVs: not fewer than the limit */
	reap(cq, 2);
	no_event(ctx, "SRQ limit event with 3 RECVs left, limit 3");
	send1(snd[1], mr, buf);   /* 3 -> 2 */
	reap(cq, 2);
	ev = next_event(ctx, "no event once 2 RECVs were left (limit 3)");
	if (ev.event_type != IBV_EVENT_SRQ_LIMIT_REACHED || ev.element.srq != srq)
		die("not IBV_EVENT_SRQ_LIMIT_REACHED of our SRQ");
	ibv_ack_async_event(&ev);
	if (ibv_query_srq(srq, &at) || at.srq_limit != 0)
		die("the SRQ is still armed after its limit event");
	send1(snd[0], mr, buf);   /* 2 -> 1: disarmed, no event */
	reap(cq, 2);
	no_event(ctx, "a second SRQ limit event without arming again");
	printf("verbs_events: SRQ limit 3: IBV_EVENT_SRQ_LIMIT_REACHED when 2 RECVs were left, once\n");
	srq_resize(srq, cq, snd[0], mr, buf);

	/* r[0] to the error state: its last WQE; destroy waits for the ack */
	if (ibv_modify_qp(r[0], &err, IBV_QP_STATE))
		die("modify_qp ERR");
	ev = next_event(ctx, "no event for a QP of an SRQ in the error state");
	if (ev.event_type != IBV_EVENT_QP_LAST_WQE_REACHED || ev.element.qp != r[0])
		die("not IBV_EVENT_QP_LAST_WQE_REACHED of the QP");
	d = (struct destroyer){ .qp = r[0] };
	if (pthread_create(&th, NULL, destroy_thread, &d))
		die("pthread_create");
	usleep(300000);
	if (d.done)
		die("ibv_destroy_qp returned before its event was acked");
	ibv_ack_async_event(&ev);
	pthread_join(th, NULL);
	if (d.ret)
		die("ibv_destroy_qp after the ack");
	printf("verbs_events: QP of an SRQ in error: IBV_EVENT_QP_LAST_WQE_REACHED; "
	       "ibv_destroy_qp waited for its ack\n");

	/* the same event of a QP, still queued, is not queued twice; an event
	 * still queued goes with its QP, and the fd is not readable after */
	for (int k = 0; k < 3; k++) {
		struct ibv_qp_attr rst = { .qp_state = IBV_QPS_RESET };

		if (ibv_modify_qp(r[1], &err, IBV_QP_STATE) || ibv_modify_qp(r[1], &rst, IBV_QP_STATE))
			die("modify_qp ERR, RESET (2)");
	}
	ev = next_event(ctx, "no event for the second QP in error");
	if (ev.event_type != IBV_EVENT_QP_LAST_WQE_REACHED || ev.element.qp != r[1])
		die("not IBV_EVENT_QP_LAST_WQE_REACHED of the second QP");
	ibv_ack_async_event(&ev);
	no_event(ctx, "one QP's event queued three times");
	if (ibv_modify_qp(r[1], &err, IBV_QP_STATE))
		die("modify_qp ERR (3)");
	if (!readable(ctx->async_fd, 10000))
		die("no event for the second QP in error again");
	if (ibv_destroy_qp(r[1]))
		die("ibv_destroy_qp with its event queued");
	if (readable(ctx->async_fd, 0))
		die("the async fd is readable after the only event went with its QP");
	no_event(ctx, "an event of a destroyed QP");
	printf("verbs_events: one QP's event raised 3 times before it was taken: once; a queued "
	       "event of a destroyed QP went with it (fd not readable)\n");

	for (int i = 0; i < 2; i++)
		if (ibv_destroy_qp(snd[i]))
			die("destroy sender");
	if (ibv_destroy_srq(srq) || ibv_destroy_cq(cq) || ibv_dereg_mr(mr))
		die("srq: release");
	free(buf);
}

/* More completions than a CQ holds: IBV_EVENT_CQ_ERR, ibv_poll_cq fails. */
static void cq_overrun(struct ibv_context *ctx, struct ibv_pd *pd)
{
	struct ibv_cq *small = ibv_create_cq(ctx, 1, NULL, NULL, 0);
	struct ibv_cq *other = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	uint8_t *buf = aligned_alloc(4096, 4096);
	struct ibv_mr *mr = buf ? ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE |
					     IBV_ACCESS_REMOTE_WRITE) : NULL;
	struct ibv_qp_init_attr ia = { .send_cq = small, .recv_cq = other, .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 4096, .max_send_sge = 1,
						.max_recv_wr = 1, .max_recv_sge = 1 } };
	struct ibv_qp *a, *b;
	struct ibv_async_event ev;
	struct ibv_wc wc;
	int posted = 0, ret;
	time_t t0;

	if (!small || !other || !mr)
		die("cq_overrun: cq or mr");
	ia.send_cq = small;
	if (!(a = ibv_create_qp(pd, &ia)))
		die("cq_overrun: qp");
	ia.send_cq = other;
	if (!(b = ibv_create_qp(pd, &ia)))
		die("cq_overrun: qp b");
	rc_connect(a, b->qp_num);
	rc_connect(b, a->qp_num);
	/* 4096 signaled WRITEs: completions past what the small CQ holds */
	for (; posted < 4096; posted++) {
		struct ibv_sge sg = { (uintptr_t)buf, 8, mr->lkey };
		struct ibv_send_wr wr = { .wr_id = (uint64_t)posted, .sg_list = &sg, .num_sge = 1,
					  .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED },
				   *bad;

		wr.wr.rdma.remote_addr = (uintptr_t)buf + 8;
		wr.wr.rdma.rkey = mr->rkey;
		if (ibv_post_send(a, &wr, &bad))
			die("cq_overrun: ibv_post_send");
	}
	for (t0 = time(NULL); !readable(ctx->async_fd, 0); ) {
		if (ibv_poll_cq(other, 1, &wc) < 0)   /* drives the QPs on */
			die("cq_overrun: poll of the other CQ");
		if (time(NULL) - t0 > 60)
			die("cq_overrun: no event within 60 s");
	}
	ev = next_event(ctx, "cq_overrun: event");
	if (ev.event_type != IBV_EVENT_CQ_ERR || ev.element.cq != small)
		die("not IBV_EVENT_CQ_ERR of the CQ that overran");
	ibv_ack_async_event(&ev);
	ret = ibv_poll_cq(small, 1, &wc);
	while (ret > 0)
		ret = ibv_poll_cq(small, 1, &wc);
	if (ret != -1)
		die("ibv_poll_cq of an overrun CQ did not fail");
	printf("verbs_events: CQ overrun: IBV_EVENT_CQ_ERR, then ibv_poll_cq fails\n");
	if (ibv_destroy_qp(a) || ibv_destroy_qp(b) || ibv_destroy_cq(small) || ibv_destroy_cq(other) ||
	    ibv_dereg_mr(mr))
		die("cq_overrun: release");
	free(buf);
}

/* A signaled WRITE of 8 bytes to the other QP of chan_check, not polled. */
static void chan_write(struct ibv_qp *qp, struct ibv_mr *mr, uint8_t *buf)
{
	struct ibv_sge sg = { (uintptr_t)buf, 8, mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sg, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED },
			   *bad;

	wr.wr.rdma.remote_addr = (uintptr_t)buf + 64;
	wr.wr.rdma.rkey = mr->rkey;
	if (ibv_post_send(qp, &wr, &bad))
		die("chan: post");
}

/* The next event of @ch (non-blocking fd), within 10 s: its CQ, acked. */
static struct ibv_cq *chan_next(struct ibv_comp_channel *ch, const char *what)
{
	struct ibv_cq *got = NULL;
	void *cctx = NULL;

	if (!readable(ch->fd, 10000) || ibv_get_cq_event(ch, &got, &cctx))
		die(what);
	if (cctx != got->cq_context)
		die("chan: the event's context is not its CQ's");
	ibv_ack_cq_events(got, 1);
	return got;
}

/*
 * One completion channel, two CQs (perftest 4.5's latency tests with -e:
 * one channel for the send and the receive CQ, each event taken as the
 * token for one poll of the CQ the loop waits on, whichever CQ it names):
 *  - every completion into an armed CQ fires, and a poll that empties a CQ
 *    leaves its untaken event queued: take cq X's event, re-arm X, poll the
 *    other CQ Y dry, and Y's event still waits for the next get, which then
 *    finds X's completion (a withdrawn event left it with none: both sides
 *    of ib_send_lat -e slept for good);
 *  - a completion that the application's own poll adds to an armed CQ fires
 *    too;
 *  - the CQ whose event is not taken is destroyed: the other's event is the
 *    one left, and then the channel's fd is not readable and a
 *    non-blocking get says EAGAIN.
 * A CQ alone on its channel (a QP connected to itself): a poll that empties
 * it withdraws its untaken event and arms it again, so that the application
 * never wakes to an empty CQ (ibv_rc_pingpong -t -e); the next completion
 * fires.
 */
static void chan_check(struct ibv_context *ctx, struct ibv_pd *pd)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_comp_channel *ch1 = ibv_create_comp_channel(ctx);
	struct ibv_cq *cq[2], *got, *x, *y, *c1;
	struct ibv_qp *qp[2], *q1;
	struct ibv_qp_init_attr ia = { .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 4, .max_send_sge = 1,
						.max_recv_wr = 1, .max_recv_sge = 1 } };
	uint8_t *buf = aligned_alloc(4096, 4096);
	struct ibv_mr *mr = buf ? ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE |
					     IBV_ACCESS_REMOTE_WRITE) : NULL;
	struct ibv_wc wc;
	void *cctx;
	int n;

	if (!ch || !ch1 || !mr || fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK) ||
	    fcntl(ch1->fd, F_SETFL, fcntl(ch1->fd, F_GETFL) | O_NONBLOCK))
		die("chan: channel or mr");
	for (int i = 0; i < 2; i++) {
		if (!(cq[i] = ibv_create_cq(ctx, 8, (void *)(uintptr_t)(i + 1), ch, 0)))
			die("chan: cq");
		ia.send_cq = ia.recv_cq = cq[i];
		if (!(qp[i] = ibv_create_qp(pd, &ia)))
			die("chan: qp");
	}
	rc_connect(qp[0], qp[1]->qp_num);
	rc_connect(qp[1], qp[0]->qp_num);
	for (int i = 0; i < 2; i++)
		if (ibv_req_notify_cq(cq[i], 0))
			die("chan: arm");
	for (int i = 0; i < 2; i++)
		chan_write(qp[i], mr, buf);
	/* each completion fires its armed CQ's event (the notifier takes
	 * both in: nobody polls here) */
	if (!queued_events(ch->fd, 2, 10000))
		die("chan: not two events after two armed completions");
	x = chan_next(ch, "chan: the first event");
	y = x == cq[0] ? cq[1] : cq[0];
	if (ibv_req_notify_cq(x, 0))
		die("chan: re-arm");
	reap(y, 1);
	if (!queued_events(ch->fd, 1, 0))
		die("chan: a poll that emptied a CQ sharing its channel withdrew its event");
	if (chan_next(ch, "chan: the event left after the other CQ's poll") != y)
		die("chan: the event left is not the polled CQ's");
	if (ibv_req_notify_cq(y, 0))
		die("chan: re-arm");
	reap(x, 1);
	if (!queued_events(ch->fd, 0, 0))
		die("chan: an event without a completion");
	/* a completion the application's own poll adds to an armed CQ
	 * sharing its channel fires too */
	chan_write(qp[0], mr, buf);
	reap(cq[0], 1);
	if (!queued_events(ch->fd, 1, 10000) || chan_next(ch, "chan: the polled completion's") != cq[0])
		die("chan: no event for a completion the poll handed over");
	if (ibv_req_notify_cq(cq[0], 0))
		die("chan: re-arm");
	/* both armed: an event each, the first CQ destroyed with its own */
	for (int i = 0; i < 2; i++)
		chan_write(qp[i], mr, buf);
	if (!queued_events(ch->fd, 2, 10000))
		die("chan: not two events after two armed completions");
	if (ibv_destroy_qp(qp[0]) || ibv_destroy_cq(cq[0]))
		die("chan: destroy the CQ whose event waits");
	if (ibv_get_cq_event(ch, &got, &cctx) || got != cq[1] || cctx != (void *)2)
		die("chan: the other CQ's event is not the one left");
	ibv_ack_cq_events(got, 1);
	if (readable(ch->fd, 0))
		die("chan: the channel's fd is readable with no event left");
	errno = 0;
	if (ibv_get_cq_event(ch, &got, &cctx) != -1 || errno != EAGAIN)
		die("chan: a non-blocking get with no event did not say EAGAIN");
	if (ibv_destroy_qp(qp[1]) || ibv_destroy_cq(cq[1]) || ibv_destroy_comp_channel(ch))
		die("chan: release");

	/* a CQ alone on its channel */
	if (!(c1 = ibv_create_cq(ctx, 8, (void *)3, ch1, 0)))
		die("chan: cq");
	ia.send_cq = ia.recv_cq = c1;
	if (!(q1 = ibv_create_qp(pd, &ia)))
		die("chan: qp");
	rc_connect(q1, q1->qp_num);
	if (ibv_req_notify_cq(c1, 0))
		die("chan: arm");
	chan_write(q1, mr, buf);
	if (!queued_events(ch1->fd, 1, 10000))
		die("chan: no event for an armed completion");
	reap(c1, 1);
	if (!queued_events(ch1->fd, 0, 0))
		die("chan: a poll that emptied a CQ alone on its channel left its event queued");
	chan_write(q1, mr, buf);
	if (!queued_events(ch1->fd, 1, 10000))
		die("chan: no event for a completion after a poll withdrew the last one");
	if (chan_next(ch1, "chan: the alone CQ's event") != c1)
		die("chan: another CQ's event");
	n = ibv_poll_cq(c1, 1, &wc);
	if (n != 1 || wc.status != IBV_WC_SUCCESS)
		die("chan: the event's completion");
	if (ibv_destroy_qp(q1) || ibv_destroy_cq(c1) || ibv_destroy_comp_channel(ch1) ||
	    ibv_dereg_mr(mr))
		die("chan: release");
	free(buf);
	printf("verbs_events: CQs sharing a channel: every armed completion fires and no event "
	       "is withdrawn (one CQ's event, the other CQ polled dry, that CQ's event still "
	       "there); a destroyed CQ's untaken event went with it: the channel gives the "
	       "other's, then EAGAIN, fd not readable; a CQ alone on its channel: a poll that "
	       "empties it withdraws its untaken event and arms it again\n");
}

/*
 * An MR over the registering thread's own stack (UCX's registration cache
 * widens a range over a local buffer to whole ranges; MPI_Gather's buffer
 * is a local): a thread on a stack of ours registers everything from the
 * stack's bottom to the page of its own frame, so ibv_reg_mr's frames lie
 * in the range while it copies and remaps it (a store between the copy and
 * the remap was lost: SIGSEGV in mpich-rma). The thread's locals keep
 * their values, an RDMA READ through the MR takes what the thread stored on
 * its stack afterwards, a WRITE lands where the thread reads it.
 */
struct stk {
	struct ibv_pd *pd;
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	struct ibv_mr *hmr;
	uint8_t *heap;
	uint8_t *lo;
	const char *err;
};

/* not instrumented: under ASan's use-after-return checks its locals would
 * live in fake frames off this stack */
__attribute__((noinline, no_sanitize("address"))) static void *stack_thread(void *arg)
{
	struct stk *t = arg;
	volatile uint64_t canary[16];
	volatile uint8_t local[512];
	uintptr_t hi;
	struct ibv_mr *mr;
	struct ibv_wc wc;

	for (int i = 0; i < 16; i++)
		canary[i] = 0x5a17c0de00000000ull + (uint64_t)i;
	/* up to the page that holds the end of the higher of the two */
	hi = (uintptr_t)&local[512] > (uintptr_t)&canary[16] ? (uintptr_t)&local[512] :
	     (uintptr_t)&canary[16];
	hi = (hi + 4095) & ~4095ul;
	if ((uintptr_t)&local[0] < (uintptr_t)t->lo || (uintptr_t)&canary[0] < (uintptr_t)t->lo) {
		t->err = "stack: the thread's locals are not on its stack";
		return NULL;
	}
	mr = ibv_reg_mr(t->pd, t->lo, hi - (uintptr_t)t->lo,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
	if (!mr) {
		t->err = "ibv_reg_mr over the thread's own stack";
		return NULL;
	}
	for (int i = 0; i < 16; i++)
		if (canary[i] != 0x5a17c0de00000000ull + (uint64_t)i) {
			t->err = "a local changed across ibv_reg_mr over its stack";
			return NULL;
		}
	for (int i = 0; i < 512; i++)
		local[i] = (uint8_t)(i * 7 + 3);
	memset(t->heap, 0, 512);
	rc_post(t->qp, IBV_WR_RDMA_READ, t->heap, 512, t->hmr->lkey, (uintptr_t)&local[0],
		mr->rkey, 0, 0, 1);
	wc = wait_wc(t->cq);
	if (wc.status != IBV_WC_SUCCESS) {
		t->err = "READ from the stack's MR";
		return NULL;
	}
	for (int i = 0; i < 512; i++)
		if (t->heap[i] != (uint8_t)(i * 7 + 3)) {
			t->err = "a READ through the MR did not take what the thread stored";
			return NULL;
		}
	memset(t->heap, 0xa5, 512);
	rc_post(t->qp, IBV_WR_RDMA_WRITE, t->heap, 512, t->hmr->lkey, (uintptr_t)&local[0],
		mr->rkey, 0, 0, 2);
	wc = wait_wc(t->cq);
	if (wc.status != IBV_WC_SUCCESS) {
		t->err = "WRITE to the stack's MR";
		return NULL;
	}
	for (int i = 0; i < 512; i++)
		if (local[i] != 0xa5) {
			t->err = "a WRITE through the MR is not where the thread reads";
			return NULL;
		}
	if (ibv_dereg_mr(mr))
		t->err = "ibv_dereg_mr";
	return NULL;
}

static void stack_mr(struct ibv_context *ctx, struct ibv_pd *pd)
{
	size_t sz = 1u << 20;
	struct ibv_qp_init_attr ia = { .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 4, .max_send_sge = 1,
						.max_recv_wr = 1, .max_recv_sge = 1 } };
	struct stk t = { .pd = pd };
	pthread_attr_t at;
	pthread_t th;
	void *stack = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	t.heap = aligned_alloc(4096, 4096);
	if (stack == MAP_FAILED || !t.heap ||
	    !(t.hmr = ibv_reg_mr(pd, t.heap, 4096, IBV_ACCESS_LOCAL_WRITE)) ||
	    !(t.cq = ibv_create_cq(ctx, 8, NULL, NULL, 0)))
		die("stack: set-up");
	ia.send_cq = ia.recv_cq = t.cq;
	if (!(t.qp = ibv_create_qp(pd, &ia)))
		die("stack: qp");
	rc_connect(t.qp, t.qp->qp_num);
	t.lo = stack;
	if (pthread_attr_init(&at) || pthread_attr_setstack(&at, stack, sz) ||
	    pthread_create(&th, &at, stack_thread, &t) || pthread_join(th, NULL))
		die("stack: thread");
	pthread_attr_destroy(&at);
	if (t.err)
		die(t.err);
	if (ibv_destroy_qp(t.qp) || ibv_destroy_cq(t.cq) || ibv_dereg_mr(t.hmr))
		die("stack: release");
	munmap(stack, sz);
	free(t.heap);
	printf("verbs_events: an MR over the registering thread's own stack, its frames "
	       "included: locals kept, a READ takes what it stored after, a WRITE lands where "
	       "it reads\n");
}

/*
 * Another thread's stores to the pages ibv_reg_mr moves: a thread
 * increments counters on every page of a buffer (as a heap neighbour of a
 * registered buffer is written) while this one registers and deregisters
 * it, each registration moving its pages again; every 20th time, each
 * page was first an MR of its own (registered and deregistered): the next
 * registration's run has 72 parts, each of another memfd. No increment is
 * lost: a store between the copy and the remap waits for the new pages
 * (wbar.c) instead of landing in the old page.
 */
#define RACE_PAGES 72
#define RACE_STEP 64   /* bytes between two counters */

struct race {
	volatile uint64_t *buf;
	atomic_bool stop;
	uint64_t done[RACE_PAGES * 4096 / RACE_STEP];
};

static void *race_thread(void *arg)
{
	struct race *r = arg;
	size_t n = RACE_PAGES * 4096 / RACE_STEP;

	while (!atomic_load(&r->stop))
		for (size_t i = 0; i < n; i++) {
			r->buf[i * (RACE_STEP / 8)]++;
			r->done[i]++;
		}
	return NULL;
}

static void race_mr(struct ibv_pd *pd)
{
	size_t len = RACE_PAGES * 4096, n = len / RACE_STEP;
	struct race *r = calloc(1, sizeof(*r));
	pthread_t th;
	uint64_t lost = 0;
	int regs = 0;

	if (!r || !(r->buf = aligned_alloc(4096, len)))
		die("race: alloc");
	memset((void *)r->buf, 0, len);
	if (pthread_create(&th, NULL, race_thread, r))
		die("race: thread");
	for (; regs < 60; regs++) {
		struct ibv_mr *mr;

		for (int i = 0; !(regs % 20) && i < RACE_PAGES; i++)
			if (!(mr = ibv_reg_mr(pd, (uint8_t *)r->buf + i * 4096, 4096,
					      IBV_ACCESS_LOCAL_WRITE)) ||
			    ibv_dereg_mr(mr))
				die("race: ibv_reg_mr / ibv_dereg_mr of one page");
		mr = ibv_reg_mr(pd, (void *)r->buf, len, IBV_ACCESS_LOCAL_WRITE);
		if (!mr || ibv_dereg_mr(mr))
			die("race: ibv_reg_mr / ibv_dereg_mr while another thread writes the pages");
	}
	atomic_store(&r->stop, true);
	if (pthread_join(th, NULL))
		die("race: join");
	for (size_t i = 0; i < n; i++)
		lost += r->done[i] - r->buf[i * (RACE_STEP / 8)];
	if (lost) {
		fprintf(stderr, "verbs_events: %llu of a thread's increments lost across %d "
			"registrations of their pages\n", (unsigned long long)lost, regs);
		die("race: stores of another thread lost during ibv_reg_mr");
	}
	free((void *)r->buf);
	free(r);
	printf("verbs_events: another thread's stores during %d registrations of their pages: "
	       "none lost\n", regs);
}

/* ibv_create_qp_ex and the ibv_wr_* batch API, on a QP connected to itself */
static void qpx_check(struct ibv_context *ctx, struct ibv_pd *pd)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	uint8_t *buf = aligned_alloc(4096, 4096);
	struct ibv_mr *mr = buf ? ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE |
					     IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC) : NULL;
	struct ibv_qp_init_attr_ex ia = {
		.qp_type = IBV_QPT_RC, .send_cq = cq, .recv_cq = cq, .pd = pd,
		.cap = { .max_send_wr = 8, .max_send_sge = 1, .max_recv_wr = 4, .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND_WITH_IMM |
				  IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD };
	struct ibv_sge rs = { 0, 64, 0 };
	struct ibv_recv_wr rwr = { .wr_id = 9, .sg_list = &rs, .num_sge = 1 }, *rbad;
	struct ibv_qp *qp, *plain;
	struct ibv_qp_ex *qx;
	struct ibv_wc wc[4];
	uint64_t ctr;
	int got = 0;

	if (!cq || !mr || !(qp = ibv_create_qp_ex(ctx, &ia)) || !(qx = ibv_qp_to_qp_ex(qp)))
		die("qpx: ibv_create_qp_ex with the work-request API");
	ia.send_ops_flags |= IBV_QP_EX_WITH_ATOMIC_WRITE;
	errno = 0;
	if (ibv_create_qp_ex(ctx, &ia) || errno != EOPNOTSUPP)
		die("qpx: a send operation roshm0 lacks was not refused at creation");
	plain = ibv_create_qp(pd, &(struct ibv_qp_init_attr){ .qp_type = IBV_QPT_RC, .send_cq = cq,
							       .recv_cq = cq, .cap = { .max_send_wr = 1 } });
	if (!plain || ibv_qp_to_qp_ex(plain) || ibv_destroy_qp(plain))
		die("qpx: a QP of ibv_create_qp has the work-request API");
	rc_connect(qp, qp->qp_num);
	memset(buf, 0, 4096);
	memcpy(buf, "source-bytes", 12);
	rs.addr = (uintptr_t)buf + 2048;
	rs.lkey = mr->lkey;
	if (ibv_post_recv(qp, &rwr, &rbad))
		die("qpx: post_recv");
	ibv_wr_start(qx);
	qx->wr_id = 1;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(qx, mr->rkey, (uintptr_t)buf + 1024);
	ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)buf, 12);
	qx->wr_id = 2;
	ibv_wr_send_imm(qx, htonl(0x5a5a));
	ibv_wr_set_inline_data(qx, "inline!", 7);
	qx->wr_id = 3;
	ibv_wr_atomic_fetch_add(qx, mr->rkey, (uintptr_t)buf + 3072, 5);
	ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)buf + 3080, 8);
	if (ibv_wr_complete(qx))
		die("qpx: ibv_wr_complete");
	for (time_t t0 = time(NULL); got < 4 && time(NULL) - t0 < 30;) {
		int n = ibv_poll_cq(cq, 4 - got, wc + got);

		if (n < 0)
			die("qpx: poll");
		got += n;
	}
	memcpy(&ctr, buf + 3072, 8);
	for (int i = 0; i < got; i++)
		if (wc[i].status != IBV_WC_SUCCESS)
			die("qpx: a completion failed");
	if (got != 4 || memcmp(buf + 1024, "source-bytes", 12) || memcmp(buf + 2048, "inline!", 7) ||
	    ctr != 5)
		die("qpx: the batch did not land as built");
	/* an operation roshm0 lacks fails the whole batch: nothing posted */
	ibv_wr_start(qx);
	qx->wr_id = 4;
	ibv_wr_rdma_write(qx, mr->rkey, (uintptr_t)buf + 1024);
	ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)buf + 100, 12);
	ibv_wr_atomic_write(qx, mr->rkey, (uintptr_t)buf + 3072, "12345678");
	if (ibv_wr_complete(qx) != EOPNOTSUPP)
		die("qpx: a batch with an atomic write was not refused");
	usleep(100000);
	if (ibv_poll_cq(cq, 1, wc) != 0 || memcmp(buf + 1024, "source-bytes", 12))
		die("qpx: a refused batch posted something");
	if (ibv_destroy_qp(qp) || ibv_dereg_mr(mr) || ibv_destroy_cq(cq))
		die("qpx: release");
	free(buf);
	printf("verbs_events: ibv_create_qp_ex: a WRITE, an inline SEND_WITH_IMM and a FETCH_ADD "
	       "batch landed; a batch with an atomic write posted nothing (EOPNOTSUPP)\n");
}

/* ibv_create_cq_ex: a SEND_WITH_IMM and a WRITE on a QP connected to itself,
 * polled with ibv_start_poll / ibv_next_poll and read with ibv_wc_read_* */
static void cqx_check(struct ibv_context *ctx, struct ibv_pd *pd)
{
	struct ibv_cq_init_attr_ex ca = { .cqe = 16, .wc_flags = IBV_WC_STANDARD_FLAGS |
						IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
						IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK };
	struct ibv_cq_ex *cx = ibv_create_cq_ex(ctx, &ca), *bad;
	struct ibv_cq *cq = cx ? ibv_cq_ex_to_cq(cx) : NULL;
	uint8_t *buf = aligned_alloc(4096, 4096);
	struct ibv_mr *mr = buf ? ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE |
					     IBV_ACCESS_REMOTE_WRITE) : NULL;
	struct ibv_qp_init_attr ia = { .qp_type = IBV_QPT_RC, .send_cq = cq, .recv_cq = cq,
				       .cap = { .max_send_wr = 4, .max_send_sge = 1,
						.max_recv_wr = 2, .max_recv_sge = 1 } };
	struct ibv_sge sg = { 0, 100, 0 }, rs = { 0, 200, 0 };
	struct ibv_recv_wr rwr = { .wr_id = 7, .sg_list = &rs, .num_sge = 1 }, *rbad;
	struct ibv_send_wr wr = { .wr_id = 5, .sg_list = &sg, .num_sge = 1,
				  .opcode = IBV_WR_SEND_WITH_IMM, .send_flags = IBV_SEND_SIGNALED,
				  .imm_data = htonl(0xfeed) }, *sbad;
	struct ibv_poll_cq_attr pa = { 0 };
	struct ibv_device_attr_ex dx;
	struct ibv_values_ex rt0 = { .comp_mask = IBV_VALUES_MASK_RAW_CLOCK }, rt1 = rt0;
	struct timespec w0, w1;
	uint64_t ts[2], wall[2];
	struct ibv_qp *qp;
	bool send = false, recv = false;
	int ret;

	if (ibv_query_device_ex(ctx, NULL, &dx) || !dx.completion_timestamp_mask ||
	    dx.hca_core_clock != 1000000 || dx.orig_attr.max_qp_wr <= 0)
		die("cqx: ibv_query_device_ex: no timestamp clock of 1 GHz");
	ca.wc_flags |= IBV_WC_EX_WITH_FLOW_TAG;
	errno = 0;
	bad = ibv_create_cq_ex(ctx, &ca);
	if (bad || errno != EOPNOTSUPP)
		die("cqx: flow tags were not refused");
	if (!cq || !mr || !(qp = ibv_create_qp(pd, &ia)))
		die("cqx: ibv_create_cq_ex / mr / qp");
	if (ibv_query_rt_values_ex(ctx, &rt0) || rt0.comp_mask != IBV_VALUES_MASK_RAW_CLOCK)
		die("cqx: ibv_query_rt_values_ex");
	clock_gettime(CLOCK_REALTIME, &w0);
	rc_connect(qp, qp->qp_num);
	sg.addr = (uintptr_t)buf;
	sg.lkey = rs.lkey = mr->lkey;
	rs.addr = (uintptr_t)buf + 1024;
	if (ibv_post_recv(qp, &rwr, &rbad) || ibv_post_send(qp, &wr, &sbad))
		die("cqx: post");
	for (time_t t0 = time(NULL); !(send && recv) && time(NULL) - t0 < 30;) {
		ret = ibv_start_poll(cx, &pa);
		if (ret == ENOENT)
			continue;
		if (ret)
			die("cqx: ibv_start_poll");
		do {
			if (cx->status != IBV_WC_SUCCESS)
				die("cqx: a completion failed");
			if (cx->wr_id == 5 && ibv_wc_read_opcode(cx) == IBV_WC_SEND &&
			    ibv_wc_read_qp_num(cx) == qp->qp_num)
				send = true;
			else if (cx->wr_id == 7 && ibv_wc_read_opcode(cx) == IBV_WC_RECV &&
				 ibv_wc_read_byte_len(cx) == 100 &&
				 (ibv_wc_read_wc_flags(cx) & IBV_WC_WITH_IMM) &&
				 ibv_wc_read_imm_data(cx) == htonl(0xfeed) &&
				 ibv_wc_read_src_qp(cx) == qp->qp_num)
				recv = true;
			else
				die("cqx: a completion not as posted");
			ts[cx->wr_id == 7] = ibv_wc_read_completion_ts(cx);
			wall[cx->wr_id == 7] = ibv_wc_read_completion_wallclock_ns(cx);
		} while (ibv_next_poll(cx) == 0);
		ibv_end_poll(cx);
	}
	if (!send || !recv)
		die("cqx: the completions did not come");
	if (ibv_query_rt_values_ex(ctx, &rt1))
		die("cqx: ibv_query_rt_values_ex");
	clock_gettime(CLOCK_REALTIME, &w1);
	for (int i = 0; i < 2; i++) {
		/* the wall clock's form is converted at the read: 1 ms of slack
		 * for the two clocks' offset moving meanwhile */
		uint64_t lo = (uint64_t)w0.tv_sec * 1000000000ull + (uint64_t)w0.tv_nsec - 1000000,
			 hi = (uint64_t)w1.tv_sec * 1000000000ull + (uint64_t)w1.tv_nsec + 1000000;

		if (ts[i] < (uint64_t)rt0.raw_clock.tv_nsec || ts[i] > (uint64_t)rt1.raw_clock.tv_nsec ||
		    wall[i] < lo || wall[i] > hi) {
			fprintf(stderr, "cqx: %s: timestamp %llu not within %ld .. %ld, or wall clock "
				"%llu not within %llu .. %llu\n", i ? "RECV" : "SEND",
				(unsigned long long)ts[i], rt0.raw_clock.tv_nsec, rt1.raw_clock.tv_nsec,
				(unsigned long long)wall[i], (unsigned long long)lo, (unsigned long long)hi);
			die("cqx: a completion timestamp outside the post .. poll interval");
		}
	}
	if (ibv_destroy_qp(qp) || ibv_dereg_mr(mr) || ibv_destroy_cq(cq))
		die("cqx: release");
	free(buf);
	printf("verbs_events: ibv_create_cq_ex: a SEND_WITH_IMM's two completions read back "
	       "through ibv_start_poll and ibv_wc_read_*, their timestamps between the post and "
	       "the poll; flow tags refused\n");
}

/* Signals for a blocked get: SIGUSR1 to @main every 50 ms until it returns
 * (at most @nsig, then the event), or the event after @nsig of them. */
struct sigger {
	pthread_t main;
	int nsig;
	void (*fire)(void *);
	void *arg;
	volatile bool back;
};

static volatile sig_atomic_t nsigs;

static void on_usr1(int s)
{
	(void)s;
	nsigs++;
}

static void *sig_thread(void *arg)
{
	struct sigger *g = arg;

	for (int i = 0; i < g->nsig && !g->back; i++) {
		usleep(50000);
		pthread_kill(g->main, SIGUSR1);
	}
	usleep(50000);
	if (!g->back)
		g->fire(g->arg);
	return NULL;
}

static void handler(bool restart)
{
	struct sigaction sa = { .sa_handler = on_usr1, .sa_flags = restart ? SA_RESTART : 0 };

	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL))
		die("sigaction");
	nsigs = 0;
}

struct wfire {
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
};

static void fire_write(void *arg)
{
	struct wfire *w = arg;
	struct ibv_sge sg = { (uintptr_t)w->buf, 8, w->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 7, .sg_list = &sg, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED }, *bad;

	wr.wr.rdma.remote_addr = (uintptr_t)w->buf + 64;
	wr.wr.rdma.rkey = w->mr->rkey;
	if (ibv_post_send(w->qp, &wr, &bad))
		die("restart: post");
}

static void fire_err(void *arg)
{
	struct ibv_qp_attr err = { .qp_state = IBV_QPS_ERR };

	if (ibv_modify_qp(arg, &err, IBV_QP_STATE))
		die("restart: modify_qp ERR");
}

/* a blocking get run against @g's signals; its return value and errno */
static int blocked_get(struct sigger *g, int (*get)(void *), void *arg, int *err)
{
	pthread_t th;
	int r;

	g->main = pthread_self();
	g->back = false;
	if (pthread_create(&th, NULL, sig_thread, g))
		die("pthread_create");
	errno = 0;
	r = get(arg);
	*err = errno;
	g->back = true;
	pthread_join(th, NULL);
	return r;
}

struct cq_get {
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
};

static int get_cq(void *arg)
{
	struct cq_get *c = arg;
	void *cctx;

	return ibv_get_cq_event(c->ch, &c->cq, &cctx);
}

struct async_get {
	struct ibv_context *ctx;
	struct ibv_async_event ev;
};

static int get_async(void *arg)
{
	struct async_get *a = arg;

	return ibv_get_async_event(a->ctx, &a->ev);
}

static void restart_check(struct ibv_context *ctx, struct ibv_pd *pd)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	uint8_t *buf = aligned_alloc(4096, 4096);
	struct ibv_mr *mr = buf ? ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE |
					     IBV_ACCESS_REMOTE_WRITE) : NULL;
	struct ibv_cq *cq = ch ? ibv_create_cq(ctx, 8, NULL, ch, 0) : NULL;
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);
	struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 4, .max_send_sge = 1,
						.max_recv_wr = 1, .max_recv_sge = 1 } };
	struct ibv_qp *qp, *sq;
	struct wfire w;
	struct sigger g = { .nsig = 3, .fire = fire_write, .arg = &w };
	struct cq_get cg = { .ch = ch };
	struct async_get ag = { .ctx = ctx };
	int fl = fcntl(ctx->async_fd, F_GETFL), r, err;

	if (!mr || !cq || !srq || !(qp = ibv_create_qp(pd, &ia)))
		die("restart: channel, mr, cq, srq or qp");
	ia.srq = srq;
	ia.cap.max_recv_wr = 0;
	if (!(sq = ibv_create_qp(pd, &ia)))
		die("restart: qp on the srq");
	rc_connect(qp, qp->qp_num);
	w = (struct wfire){ qp, mr, buf };
	if (ibv_req_notify_cq(cq, 0))
		die("restart: arm");
	/* the channel: three SA_RESTART signals, then the completion's event */
	handler(true);
	r = blocked_get(&g, get_cq, &cg, &err);
	if (r || cg.cq != cq || nsigs != 3) {
		fprintf(stderr, "get %d errno %s after %d signals\n", r, strerror(err), (int)nsigs);
		die("restart: ibv_get_cq_event did not sleep through SA_RESTART signals");
	}
	ibv_ack_cq_events(cq, 1);
	reap(cq, 1);
	/* without SA_RESTART: EINTR (the thread fires nothing: one signal) */
	handler(false);
	g.nsig = 100;
	r = blocked_get(&g, get_cq, &cg, &err);
	if (r != -1 || err != EINTR || nsigs < 1)
		die("restart: ibv_get_cq_event did not fail with EINTR on a plain signal");
	/* the async fd, blocking for this: the same two */
	if (fl < 0 || fcntl(ctx->async_fd, F_SETFL, fl & ~O_NONBLOCK))
		die("restart: fcntl");
	r = blocked_get(&g, get_async, &ag, &err);
	if (r != -1 || err != EINTR)
		die("restart: ibv_get_async_event did not fail with EINTR on a plain signal");
	handler(true);
	g = (struct sigger){ .nsig = 3, .fire = fire_err, .arg = sq };
	r = blocked_get(&g, get_async, &ag, &err);
	if (r || nsigs != 3 || ag.ev.event_type != IBV_EVENT_QP_LAST_WQE_REACHED ||
	    ag.ev.element.qp != sq) {
		fprintf(stderr, "get %d errno %s after %d signals\n", r, strerror(err), (int)nsigs);
		die("restart: ibv_get_async_event did not sleep through SA_RESTART signals");
	}
	ibv_ack_async_event(&ag.ev);
	if (fcntl(ctx->async_fd, F_SETFL, fl) || readable(ch->fd, 0) || readable(ctx->async_fd, 0))
		die("restart: an fd is readable with no event left");
	signal(SIGUSR1, SIG_DFL);
	if (ibv_destroy_qp(sq) || ibv_destroy_qp(qp) || ibv_destroy_srq(srq) || ibv_destroy_cq(cq) ||
	    ibv_destroy_comp_channel(ch) || ibv_dereg_mr(mr))
		die("restart: release");
	free(buf);
	printf("verbs_events: blocking gets sleep through SA_RESTART signals (3 each) and return "
	       "the event; a plain signal gives EINTR\n");
}

/* UC: READ and atomics refused at the post; a SEND or WRITE that the peer
 * cannot take (no such QP, a forged rkey) completes as sent, since
 * nothing answers a UC sender, and the QP stays usable. */
static void uc_check(struct ibv_context *ctx, struct ibv_pd *pd)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	uint8_t *buf = aligned_alloc(4096, 4096);
	struct ibv_mr *mr = buf ? ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE) : NULL;
	struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UC,
				       .cap = { .max_send_wr = 8, .max_send_sge = 1,
						.max_recv_wr = 1, .max_recv_sge = 1 } };
	struct ibv_qp *qp = cq && mr ? ibv_create_qp(pd, &ia) : NULL;
	struct ibv_sge sg = { (uintptr_t)buf, 8, 0 };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sg, .num_sge = 1,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr got;

	if (!qp || ibv_query_qp(qp, &qa, IBV_QP_STATE, &got) || got.qp_type != IBV_QPT_UC)
		die("uc: a UC QP");
	sg.lkey = mr->lkey;
	rc_connect(qp, 0xabcde);   /* no such QP */
	wr.opcode = IBV_WR_RDMA_READ;
	if (ibv_post_send(qp, &wr, &bad) != EINVAL)
		die("uc: an RDMA READ on a UC QP was not refused with EINVAL");
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	if (ibv_post_send(qp, &wr, &bad) != EINVAL)
		die("uc: an atomic on a UC QP was not refused with EINVAL");
	wr.opcode = IBV_WR_SEND;   /* to no QP */
	if (ibv_post_send(qp, &wr, &bad))
		die("uc: post SEND");
	reap(cq, 1);
	wr.opcode = IBV_WR_RDMA_WRITE;   /* a forged rkey */
	wr.wr.rdma.remote_addr = 0x1000;
	wr.wr.rdma.rkey = 0x12345678;
	if (ibv_post_send(qp, &wr, &bad))
		die("uc: post WRITE");
	reap(cq, 1);
	if (ibv_query_qp(qp, &qa, IBV_QP_STATE, &got) || qa.qp_state != IBV_QPS_RTS)
		die("uc: the QP left RTS");
	if (ibv_destroy_qp(qp) || ibv_destroy_cq(cq) || ibv_dereg_mr(mr))
		die("uc: release");
	free(buf);
	printf("verbs_events: UC: READ and atomics refused (EINVAL); a SEND to no QP and a WRITE "
	       "with a forged rkey complete as sent, the QP stays in RTS\n");
}

/* A zero-length RDMA WRITE or READ checks no rkey (UCX's flush: rkey 0)
 * but needs the peer QP: to a live one it succeeds, to no QP it fails with
 * IBV_WC_RETRY_EXC_ERR as on a NIC (UCX's keepalive learns so). */
static void zero_len(struct ibv_context *ctx, struct ibv_pd *pd)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 8, .max_send_sge = 1,
						.max_recv_wr = 1, .max_recv_sge = 1 } };
	struct ibv_qp *a = cq ? ibv_create_qp(pd, &ia) : NULL, *b = cq ? ibv_create_qp(pd, &ia) : NULL;
	struct ibv_qp *lone = cq ? ibv_create_qp(pd, &ia) : NULL;
	struct ibv_send_wr wr = { .wr_id = 5, .num_sge = 0, .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;
	time_t t0;
	int n = 0;

	if (!a || !b || !lone)
		die("zero: qps");
	rc_connect(a, b->qp_num);
	rc_connect(b, a->qp_num);
	rc_connect(lone, 0xabcde);   /* no such QP */
	wr.opcode = IBV_WR_RDMA_WRITE;
	if (ibv_post_send(a, &wr, &bad))
		die("zero: post WRITE");
	wr.opcode = IBV_WR_RDMA_READ;
	if (ibv_post_send(a, &wr, &bad))
		die("zero: post READ");
	reap(cq, 2);
	wr.opcode = IBV_WR_RDMA_WRITE;
	if (ibv_post_send(lone, &wr, &bad))
		die("zero: post WRITE to no QP");
	for (t0 = time(NULL); !n && time(NULL) - t0 < 30;)
		if ((n = ibv_poll_cq(cq, 1, &wc)) < 0)
			die("zero: poll");
	if (!n || wc.status != IBV_WC_RETRY_EXC_ERR)
		die("zero: a zero-length WRITE to no QP did not fail with IBV_WC_RETRY_EXC_ERR");
	if (ibv_destroy_qp(a) || ibv_destroy_qp(b) || ibv_destroy_qp(lone) || ibv_destroy_cq(cq))
		die("zero: release");
	printf("verbs_events: zero-length WRITE and READ with rkey 0 to a live QP succeed; to no "
	       "QP: IBV_WC_RETRY_EXC_ERR\n");
}

/* ibv_resize_cq keeps the completions the CQ holds. */
static void resize(struct ibv_context *ctx, struct ibv_pd *pd)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	uint8_t *buf = aligned_alloc(4096, 4096);
	struct ibv_mr *mr = buf ? ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE |
					     IBV_ACCESS_REMOTE_WRITE) : NULL;
	struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 8, .max_send_sge = 1,
						.max_recv_wr = 1, .max_recv_sge = 1 } };
	struct ibv_qp *a = ibv_create_qp(pd, &ia), *b = ibv_create_qp(pd, &ia);
	struct ibv_wc wc[8];
	int got = 0;
	time_t t0;

	if (!cq || !mr || !a || !b)
		die("resize: cq, mr or qp");
	rc_connect(a, b->qp_num);
	rc_connect(b, a->qp_num);
	for (uint64_t i = 0; i < 3; i++) {
		struct ibv_sge sg = { (uintptr_t)buf, 8, mr->lkey };
		struct ibv_send_wr wr = { .wr_id = 40 + i, .sg_list = &sg, .num_sge = 1,
					  .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED },
				   *bad;

		wr.wr.rdma.remote_addr = (uintptr_t)buf + 64;
		wr.wr.rdma.rkey = mr->rkey;
		if (ibv_post_send(a, &wr, &bad))
			die("resize: ibv_post_send");
	}
	/* one completion out, so that the others wait in the CQ */
	for (t0 = time(NULL); !got; got = ibv_poll_cq(cq, 1, wc))
		if (time(NULL) - t0 > 30)
			die("resize: no completion");
	usleep(200000);
	if (ibv_resize_cq(cq, 4000) || cq->cqe != 4000)
		die("ibv_resize_cq to 4000");
	for (t0 = time(NULL); got < 3 && time(NULL) - t0 < 30;) {
		int k = ibv_poll_cq(cq, 8, wc + got);

		if (k < 0)
			die("resize: poll");
		got += k;
	}
	if (got != 3 || wc[0].wr_id != 40 || wc[1].wr_id != 41 || wc[2].wr_id != 42)
		die("resize: completions lost or out of order");
	if (ibv_resize_cq(cq, 0) != EINVAL)
		die("ibv_resize_cq to 0 did not fail with EINVAL");
	printf("verbs_events: ibv_resize_cq 8 -> 4000 kept the completions in order\n");
	if (ibv_destroy_qp(a) || ibv_destroy_qp(b) || ibv_destroy_cq(cq) || ibv_dereg_mr(mr))
		die("resize: release");
	free(buf);
}

/* Pure calls: the same answers as rdma-core's own libibverbs. */
static void same_as_rdma_core(void)
{
	void *h = dlmopen(LM_ID_NEWLM, "/usr/lib/x86_64-linux-gnu/libibverbs.so.1", RTLD_NOW);
	const char *(*ev_str)(int), *(*node_str)(int), *(*port_str)(int);
	int (*to_mult)(int), (*from_mult)(int), (*to_mbps)(int), (*from_mbps)(int);
	int n = 0;

	if (!h) {
		printf("verbs_events: rdma-core's libibverbs not found (%s): strings and rates "
		       "not compared\n", dlerror());
		return;
	}
	ev_str = (const char *(*)(int))dlsym(h, "ibv_event_type_str");
	node_str = (const char *(*)(int))dlsym(h, "ibv_node_type_str");
	port_str = (const char *(*)(int))dlsym(h, "ibv_port_state_str");
	to_mult = (int (*)(int))dlsym(h, "ibv_rate_to_mult");
	from_mult = (int (*)(int))dlsym(h, "mult_to_ibv_rate");
	to_mbps = (int (*)(int))dlsym(h, "ibv_rate_to_mbps");
	from_mbps = (int (*)(int))dlsym(h, "mbps_to_ibv_rate");
	if (!ev_str || !node_str || !port_str || !to_mult || !from_mult || !to_mbps || !from_mbps)
		die("a call missing from rdma-core's libibverbs");
	for (int i = -1; i < 40; i++, n += 3) {
		if (strcmp(ev_str(i), ibv_event_type_str((enum ibv_event_type)i)) ||
		    strcmp(node_str(i), ibv_node_type_str((enum ibv_node_type)i)) ||
		    strcmp(port_str(i), ibv_port_state_str((enum ibv_port_state)i))) {
			fprintf(stderr, "value %d: \"%s\" \"%s\" \"%s\" (rdma-core) vs ours\n", i,
				ev_str(i), node_str(i), port_str(i));
			die("a string differs from rdma-core's");
		}
		if (to_mult(i) != ibv_rate_to_mult((enum ibv_rate)i) ||
		    to_mbps(i) != ibv_rate_to_mbps((enum ibv_rate)i)) {
			fprintf(stderr, "rate %d: mult %d mbps %d (rdma-core)\n", i, to_mult(i), to_mbps(i));
			die("a rate conversion differs from rdma-core's");
		}
		n += 2;
	}
	for (int i = 0; i < 130; i++, n++)
		if (from_mult(i) != (int)mult_to_ibv_rate(i))
			die("mult_to_ibv_rate differs from rdma-core's");
	for (int i = 0; i < 40; i++, n++) {
		int m = to_mbps(i);

		if (m > 0 && from_mbps(m) != (int)mbps_to_ibv_rate(m))
			die("mbps_to_ibv_rate differs from rdma-core's");
	}
	if (from_mbps(12345) != (int)mbps_to_ibv_rate(12345))
		die("mbps_to_ibv_rate of no rate differs from rdma-core's");
	printf("verbs_events: strings and rate conversions: %d answers, all rdma-core's\n", n);
}

/*
 * ibv_query_device's max_mr is what roshmd lets the context hold
 * (limits.max_handles, from HELLO's reply): MRs of a page each until
 * ibv_reg_mr fails, which it does with ENOMEM, at no more than max_mr and
 * not far below it (the context's own QPs hold a few handles).
 */
static void max_mr_check(struct ibv_context *ctx, struct ibv_pd *pd)
{
	struct ibv_device_attr da;
	struct ibv_mr **mr;
	uint8_t *p;
	int n = 0;

	if (ibv_query_device(ctx, &da) || da.max_mr < 1 || da.max_mr > 4096 ||
	    da.max_qp != (da.max_mr / 2 ? da.max_mr / 2 : 1) || da.max_mw != da.max_mr)
		die("max_mr: ibv_query_device");
	p = mmap(NULL, (size_t)(da.max_mr + 1) * 4096, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	mr = calloc((size_t)da.max_mr + 1, sizeof(*mr));
	if (p == MAP_FAILED || !mr)
		die("max_mr: alloc");
	for (; n <= da.max_mr; n++)
		if (!(mr[n] = ibv_reg_mr(pd, p + (size_t)n * 4096, 4096, IBV_ACCESS_LOCAL_WRITE)))
			break;
	if (n > da.max_mr || errno != ENOMEM || n < da.max_mr - 16) {
		fprintf(stderr, "verbs_events: max_mr %d, %d MRs registered, then %s\n", da.max_mr, n,
			strerror(errno));
		die("max_mr: the MRs a context can hold are not max_mr");
	}
	while (n--)
		if (ibv_dereg_mr(mr[n]))
			die("max_mr: ibv_dereg_mr");
	free(mr);
	munmap(p, (size_t)(da.max_mr + 1) * 4096);
	printf("verbs_events: max_mr %d (max_qp %d): MRs registered up to it, then ENOMEM\n",
	       da.max_mr, da.max_qp);
}

/* fork() in a child: @fn runs there; its exit status */
static int in_child(void (*fn)(void *), void *arg)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		die("fork");
	if (!pid) {
		fn(arg);
		_exit(0);
	}
	if (waitpid(pid, &st, 0) != pid)
		die("waitpid");
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/*
 * Faults the write barrier (wbar.c) is not for still end as before: a store
 * to a read-only page of a registered range (the barrier's run: let through
 * once, then on to the default) and a SIGSEGV sent by kill kill the child.
 */
#if defined(__SANITIZE_ADDRESS__)
#define VE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VE_ASAN 1
#endif
#endif
#ifndef VE_ASAN
static void ro_store(void *arg)
{
	struct rlimit no = { 0, 0 };

	setrlimit(RLIMIT_CORE, &no);
	((volatile uint8_t *)arg)[4096 + 8] = 1;
}

static void sent_segv(void *arg)
{
	struct rlimit no = { 0, 0 };

	(void)arg;
	setrlimit(RLIMIT_CORE, &no);
	kill(getpid(), SIGSEGV);
	pause();
}
#endif

static void fault_check(struct ibv_pd *pd)
{
#ifdef VE_ASAN
	(void)pd;
	printf("verbs_events: faults beside the write barrier: not checked under ASan (its own "
	       "handler reports them)\n");
#else
	uint8_t *p = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *mr;
	int st;

	if (p == MAP_FAILED)
		die("fault: mmap");
	memset(p, 7, 8192);
	if (mprotect(p + 4096, 4096, PROT_READ))
		die("fault: mprotect");
	/* a read-only MR over a writable and a read-only page: one run */
	if (!(mr = ibv_reg_mr(pd, p, 8192, 0)))
		die("fault: ibv_reg_mr");
	p[8] = 9;   /* the writable page is writable */
	if ((st = in_child(ro_store, p)) != 128 + SIGSEGV)
		die("fault: a store to a registered read-only page did not end in SIGSEGV");
	if ((st = in_child(sent_segv, NULL)) != 128 + SIGSEGV)
		die("fault: a SIGSEGV sent by kill did not kill");
	if (ibv_dereg_mr(mr) || p[8] != 9 || p[4096 + 8] != 7)
		die("fault: release");
	munmap(p, 8192);
	printf("verbs_events: faults beside the write barrier: a store to a registered read-only "
	       "page and a sent SIGSEGV kill as before\n");
#endif
}

static void child_page(void *arg)
{
	volatile uint8_t *p = arg;

	if (p[200] != 0x33)
		_exit(2);   /* not the parent's bytes at fork() */
	p[100] = 0x5a;
}

static void child_heap(void *arg)
{
	char *q = arg;
	void *x = malloc(100);

	strcpy(q, "child");
	free(x);
}

/*
 * A child of fork() gets its own copy of registered pages, as on a kernel
 * with copy-on-fork (IBV_FORK_UNNEEDED): it sees the parent's bytes, and
 * its stores (to the buffer, to a heap object on the same page, after
 * deregistration too) do not reach the parent.
 */
static void fork_check(struct ibv_pd *pd)
{
	uint8_t *a = aligned_alloc(4096, 4096);
	char *p = malloc(200), *q = malloc(200);
	struct ibv_mr *ma, *mp;
	int st;

	if (ibv_is_fork_initialized() != IBV_FORK_UNNEEDED || ibv_fork_init())
		die("fork: not IBV_FORK_UNNEEDED, or ibv_fork_init failed");
	memset(a, 0, 4096);
	a[200] = 0x33;
	strcpy(q, "parent");
	if (!(ma = ibv_reg_mr(pd, a, 4096, IBV_ACCESS_LOCAL_WRITE)) ||
	    !(mp = ibv_reg_mr(pd, p, 200, IBV_ACCESS_LOCAL_WRITE)))
		die("fork: reg_mr");
	if ((st = in_child(child_page, a)) || a[100] != 0)
		die("fork: the child did not see the page, or its store reached the parent");
	if ((st = in_child(child_heap, q)) || strcmp(q, "parent"))
		die("fork: the child's heap store on a registered page reached the parent");
	if (ibv_dereg_mr(ma) || ibv_dereg_mr(mp))
		die("fork: dereg");
	if ((st = in_child(child_page, a)) || a[100] != 0)
		die("fork: after deregistration the child's store reached the parent");
	free(a);
	free(p);
	free(q);
	printf("verbs_events: fork: the child has its own copy of registered pages (the "
	       "parent's bytes; its stores, a heap neighbour's too, stay its own), also after "
	       "deregistration\n");
}

int main(void)
{
	struct ibv_device **dl;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	int fl;

	dl = ibv_get_device_list(NULL);

	if (!dl || !dl[0])
		die("device roshm0 not listed");
	if (!(ctx = ibv_open_device(dl[0])) || !(pd = ibv_alloc_pd(ctx)))
		die("ibv_open_device / ibv_alloc_pd");
	fl = fcntl(ctx->async_fd, F_GETFL);
	if (fl < 0 || (fl & O_NONBLOCK))
		die("the async fd is not blocking at first (as the kernel's)");
	if (fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK))
		die("fcntl O_NONBLOCK");
	same_as_rdma_core();
	srq_events(ctx, pd);
	cq_overrun(ctx, pd);
	resize(ctx, pd);
	chan_check(ctx, pd);
	stack_mr(ctx, pd);
	race_mr(pd);
	restart_check(ctx, pd);
	qpx_check(ctx, pd);
	cqx_check(ctx, pd);
	uc_check(ctx, pd);
	zero_len(ctx, pd);
	fork_check(pd);
	fault_check(pd);
	max_mr_check(ctx, pd);
	no_event(ctx, "an event left over");
	if (ibv_dealloc_pd(pd) || ibv_close_device(ctx))
		die("release");
	ibv_free_device_list(dl);
	printf("verbs_events: ok\n");
	return 0;
}
