// SPDX-License-Identifier: MIT
/*
 * rsockets of libroshm-verbs' librdmacm.so.1: stream sockets over RC QPs on
 * roshm0, for rstream and for unmodified socket applications through
 * rdma-core's librspreload.so (LD_PRELOAD), which calls these r* entry
 * points.
 *
 * Built on the public calls only, as an application would be: an rsocket is
 * an rdma_cm_id (RDMA_PS_TCP) on an event channel of its own, whose fd is the
 * rsocket's descriptor, a PD, one CQ on a completion channel, an RC QP and
 * one registered buffer of send and receive slots. Both ends are this
 * library (there is no rsocket across implementations: rdma-core's own wire
 * format is not spoken), so the protocol is ours:
 *
 * - The connect's private data (REQ and REP) carries each side's receive
 *   slot count and slot size ("RSR1", struct rs_hello).
 * - Every message is a SEND_WITH_IMM into one of the peer's posted slots.
 *   The immediate holds a type (DATA, CREDIT, FIN) and the slots its sender
 *   has emptied and posted again since it last said so (credits).
 * - A sender spends one credit per message and keeps the last one for a
 *   CREDIT or FIN message, so neither side can run out of credits while the
 *   other owes it some. A receiver reports what it owes with its next DATA
 *   message, or alone once it owes half its slots.
 * - FIN (shutdown(SHUT_WR), close) ends the byte stream: the peer reads 0
 *   once it has read all that came before. close waits (2 s at most) until
 *   every SEND of its own has completed, which on RC means it sits in a
 *   posted slot of the peer, then disconnects.
 *
 * Everything the peer sends is checked before use: the type, the credits
 * (never above the slots the peer said it has), the lengths (the verbs layer
 * bounds them by the slot). A peer that breaks the protocol gets the
 * connection reset (EPROTO to our side), never memory beyond a slot.
 *
 * Blocking calls and rpoll sleep on the CQ's completion channel and the CM
 * channel (for the peer's disconnect) after a short spin. A socket that
 * is O_NONBLOCK connects synchronously all the same (connect returns 0,
 * which POSIX allows). SOCK_DGRAM, riomap / riowrite and the fork support
 * are not provided (docs/verbs-compat.md).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

#define RS_EXPORT __attribute__((visibility("default")))

#define RS_MAGIC 0x52535231u          /* "RSR1" */
#define RS_T_DATA 0u
#define RS_T_CREDIT 1u
#define RS_T_FIN 2u
#define RS_CREDIT_MASK 0xffffu
#define RS_SEG_MIN 64u
#define RS_SEG_MAX (1u << 20)
#define RS_SEG_DEFAULT (16u << 10)
#define RS_SLOTS_MIN 4u
#define RS_SLOTS_MAX 1024u
#define RS_BUF_DEFAULT (256u << 10)
#define RS_BUF_MAX (16u << 20)
#define RS_CTRL_WR 4u                 /* SQ entries beyond the data slots */
#define RS_WR_DATA (1ull << 32)
#define RS_WR_CTRL (2ull << 32)
#define RS_SPIN_NS 20000ull
#define RS_CLOSE_MS 2000
#define RS_CM_MS 60000

struct rs_hello {
	uint32_t magic, slots, seg;
};

enum rs_state { RS_NEW, RS_LISTEN, RS_CONN, RS_DEAD };

struct rs_rx {
	uint32_t slot, len;
};

struct rs {
	int fd;
	pthread_mutex_t lock;
	enum rs_state state;
	int fl;                       /* O_NONBLOCK */
	int err;                      /* why the connection broke (0: it did not) */
	bool broken, rx_fin, peer_gone, tx_shut, rd_shut, fin_sent;
	struct rdma_event_channel *cmch;
	struct rdma_cm_id *id;
	struct ibv_comp_channel *cch;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf;                 /* ntx send slots, then nrx receive slots */
	uint32_t seg, ntx, nrx;
	uint32_t peer_seg, peer_nrx;
	uint32_t credits, owed;
	uint32_t tx_head, tx_tail, sq_busy, sq_max;
	struct rs_rx *rx;             /* nrx entries: slots with data, in order */
	uint32_t rx_head, rx_tail, rx_off;
	/* options */
	int sndbuf, rcvbuf, sqsize, rqsize, inl, nodelay, keepalive, keepidle, reuse, v6only;
	struct linger linger;
};

/* ------------------------------------------------------- descriptors */

#define RS_L1 1024
#define RS_L2 1024
static struct rs **rs_tab[RS_L1];
static pthread_mutex_t rs_tab_lock = PTHREAD_MUTEX_INITIALIZER;

static struct rs *rs_get(int fd)
{
	struct rs **t;

	if (fd < 0 || fd >= RS_L1 * RS_L2)
		return NULL;
	t = __atomic_load_n(&rs_tab[fd / RS_L2], __ATOMIC_ACQUIRE);
	return t ? __atomic_load_n(&t[fd % RS_L2], __ATOMIC_ACQUIRE) : NULL;
}

static int rs_set(int fd, struct rs *rs)
{
	struct rs **t;

	if (fd < 0 || fd >= RS_L1 * RS_L2)
		return EMFILE;
	pthread_mutex_lock(&rs_tab_lock);
	t = rs_tab[fd / RS_L2];
	if (!t) {
		t = calloc(RS_L2, sizeof(*t));
		if (!t) {
			pthread_mutex_unlock(&rs_tab_lock);
			return ENOMEM;
		}
		__atomic_store_n(&rs_tab[fd / RS_L2], t, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&t[fd % RS_L2], rs, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&rs_tab_lock);
	return 0;
}

static struct rs *rs_find(int fd)
{
	struct rs *rs = rs_get(fd);

	if (!rs)
		errno = EBADF;
	return rs;
}

static int rs_fail(int e)
{
	errno = e;
	return -1;
}

static uint64_t rs_now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void rs_nonblock_fd(int fd)
{
	int f = fcntl(fd, F_GETFL);

	if (f >= 0)
		fcntl(fd, F_SETFL, f | O_NONBLOCK);
}

/* ------------------------------------------------------- life cycle */

static struct rs *rs_alloc(void)
{
	struct rs *rs = calloc(1, sizeof(*rs));

	if (!rs)
		return NULL;
	pthread_mutex_init(&rs->lock, NULL);
	rs->fd = -1;
	rs->sndbuf = rs->rcvbuf = RS_BUF_DEFAULT;
	rs->nodelay = 1;
	rs->v6only = -1;
	rs->cmch = rdma_create_event_channel();
	if (!rs->cmch) {
		free(rs);
		return NULL;
	}
	/* the CM channel is only ever read when poll says so, or in a loop of
	 * our own that polls */
	rs_nonblock_fd(rs->cmch->fd);
	rs->fd = rs->cmch->fd;
	return rs;
}

static void rs_free_qp(struct rs *rs)
{
	if (rs->id && rs->id->qp)
		rdma_destroy_qp(rs->id);
	if (rs->cq)
		ibv_destroy_cq(rs->cq);
	if (rs->cch)
		ibv_destroy_comp_channel(rs->cch);
	if (rs->mr)
		ibv_dereg_mr(rs->mr);
	if (rs->pd)
		ibv_dealloc_pd(rs->pd);
	free(rs->buf);
	free(rs->rx);
	rs->cq = NULL;
	rs->cch = NULL;
	rs->mr = NULL;
	rs->pd = NULL;
	rs->buf = NULL;
	rs->rx = NULL;
}

static void rs_free(struct rs *rs)
{
	rs_free_qp(rs);
	if (rs->id)
		rdma_destroy_id(rs->id);
	if (rs->cmch)
		rdma_destroy_event_channel(rs->cmch);
	pthread_mutex_destroy(&rs->lock);
	free(rs);
}

static uint32_t rs_clamp(uint64_t v, uint32_t lo, uint32_t hi)
{
	return v < lo ? lo : v > hi ? hi : (uint32_t)v;
}

static int rs_post_recv(struct rs *rs, uint32_t slot)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(rs->buf + (size_t)(rs->ntx + slot) * rs->seg),
		.length = rs->seg,
		.lkey = rs->mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(rs->id->qp, &wr, &bad);
}

/* The PD, CQ, QP and slots of a connection, its RECVs posted. */
static int rs_setup(struct rs *rs)
{
	struct ibv_context *v = rs->id->verbs;
	struct ibv_qp_init_attr qa;
	size_t size;
	int ret;

	if (!v)
		return ENODEV;
	rs->seg = RS_SEG_DEFAULT;
	rs->ntx = rs->sqsize ? rs_clamp((uint64_t)rs->sqsize, RS_SLOTS_MIN, RS_SLOTS_MAX)
			     : rs_clamp((uint64_t)rs->sndbuf / rs->seg, RS_SLOTS_MIN, RS_SLOTS_MAX);
	rs->nrx = rs->rqsize ? rs_clamp((uint64_t)rs->rqsize, RS_SLOTS_MIN, RS_SLOTS_MAX)
			     : rs_clamp((uint64_t)rs->rcvbuf / rs->seg, RS_SLOTS_MIN, RS_SLOTS_MAX);
	size = (size_t)(rs->ntx + rs->nrx) * rs->seg;
	rs->buf = aligned_alloc(4096, size);
	rs->rx = calloc(rs->nrx, sizeof(*rs->rx));
	if (!rs->buf || !rs->rx)
		return ENOMEM;
	rs->pd = ibv_alloc_pd(v);
	if (!rs->pd)
		return errno ? errno : ENOMEM;
	rs->mr = ibv_reg_mr(rs->pd, rs->buf, size, IBV_ACCESS_LOCAL_WRITE);
	if (!rs->mr)
		return errno ? errno : ENOMEM;
	rs->cch = ibv_create_comp_channel(v);
	if (!rs->cch)
		return errno ? errno : ENOMEM;
	rs_nonblock_fd(rs->cch->fd);
	rs->sq_max = rs->ntx + RS_CTRL_WR;
	rs->cq = ibv_create_cq(v, (int)(rs->sq_max + rs->nrx), rs, rs->cch, 0);
	if (!rs->cq)
		return errno ? errno : ENOMEM;
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = rs->cq;
	qa.recv_cq = rs->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.sq_sig_all = 1;
	qa.cap.max_send_wr = rs->sq_max;
	qa.cap.max_recv_wr = rs->nrx;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	if (rdma_create_qp(rs->id, rs->pd, &qa))
		return errno ? errno : EIO;
	for (uint32_t i = 0; i < rs->nrx; i++) {
		ret = rs_post_recv(rs, i);
		if (ret)
			return ret;
	}
	return 0;
}

static void rs_hello(const struct rs *rs, struct rs_hello *h)
{
	h->magic = htonl(RS_MAGIC);
	h->slots = htonl(rs->nrx);
	h->seg = htonl(rs->seg);
}

/* The peer's hello, from private data the CM padded: checked, then kept. */
static int rs_peer_hello(struct rs *rs, const void *pd, uint8_t len)
{
	struct rs_hello h;
	uint32_t slots, seg;

	if (!pd || len < sizeof(h))
		return EPROTO;
	memcpy(&h, pd, sizeof(h));
	slots = ntohl(h.slots);
	seg = ntohl(h.seg);
	if (ntohl(h.magic) != RS_MAGIC || slots < 2 || slots > RS_SLOTS_MAX ||
	    seg < RS_SEG_MIN || seg > RS_SEG_MAX)
		return EPROTO;
	rs->peer_nrx = slots;
	rs->peer_seg = seg;
	rs->credits = slots;
	return 0;
}

/* Wait for the next CM event on rs's channel (up to ms), acked after copying
 * what the caller needs. */
static int rs_cm_wait(struct rs *rs, enum rdma_cm_event_type *type, int *status,
		      void *pd, uint8_t *pd_len, struct rdma_cm_id **nid, int ms)
{
	uint64_t end = rs_now_ns() + (uint64_t)ms * 1000000ull;
	struct rdma_cm_event *ev;

	for (;;) {
		if (!rdma_get_cm_event(rs->cmch, &ev))
			break;
		if (errno != EAGAIN && errno != EINTR)
			return errno;
		uint64_t now = rs_now_ns();
		if (now >= end)
			return ETIMEDOUT;
		struct pollfd p = { .fd = rs->cmch->fd, .events = POLLIN };
		int left = (int)((end - now) / 1000000ull) + 1;

		if (poll(&p, 1, left > 100 ? 100 : left) < 0 && errno != EINTR)
			return errno;
	}
	*type = ev->event;
	if (status)
		*status = ev->status;
	if (pd && pd_len) {
		uint8_t n = ev->param.conn.private_data_len;

		*pd_len = n;
		if (n && ev->param.conn.private_data)
			memcpy(pd, ev->param.conn.private_data, n);
	}
	if (nid)
		*nid = ev->id;
	rdma_ack_cm_event(ev);
	return 0;
}

/* ------------------------------------------------------- the data path */

static void rs_break(struct rs *rs, int e)
{
	if (!rs->broken) {
		rs->broken = true;
		rs->err = e;
	}
}

static int rs_post_send(struct rs *rs, uint32_t type, const void *data, uint32_t len)
{
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;
	uint32_t slot = rs->tx_head % rs->ntx;
	int ret;

	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_SEND_WITH_IMM;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htonl(type << 28 | (rs->owed & RS_CREDIT_MASK));
	wr.wr_id = len ? RS_WR_DATA : RS_WR_CTRL;
	if (len) {
		uint8_t *dst = rs->buf + (size_t)slot * rs->seg;

		memcpy(dst, data, len);
		sge = (struct ibv_sge){ .addr = (uintptr_t)dst, .length = len, .lkey = rs->mr->lkey };
		wr.sg_list = &sge;
		wr.num_sge = 1;
	}
	ret = ibv_post_send(rs->id->qp, &wr, &bad);
	if (ret) {
		rs_break(rs, ret);
		return ret;
	}
	rs->owed = 0;
	rs->credits--;
	rs->sq_busy++;
	if (len)
		rs->tx_head++;
	return 0;
}

/* A DATA message may go: a free slot, two credits (the last one is kept for
 * CREDIT and FIN) and room in the SQ beside the control messages. */
static bool rs_can_send(const struct rs *rs)
{
	return rs->state == RS_CONN && !rs->broken && !rs->tx_shut && rs->credits >= 2 &&
	       rs->tx_head - rs->tx_tail < rs->ntx && rs->sq_busy + 2 <= rs->sq_max;
}

/* FIN when asked for, credits when half the slots are owed. */
static void rs_ctrl(struct rs *rs)
{
	if (rs->state != RS_CONN || rs->broken || !rs->credits || rs->sq_busy >= rs->sq_max)
		return;
	if (rs->tx_shut && !rs->fin_sent) {
		/* after the DATA before it, which the QP keeps in order */
		if (!rs_post_send(rs, RS_T_FIN, NULL, 0))
			rs->fin_sent = true;
		return;
	}
	if (rs->owed && rs->owed >= rs->nrx / 2)
		rs_post_send(rs, RS_T_CREDIT, NULL, 0);
}

static void rs_wc(struct rs *rs, const struct ibv_wc *wc)
{
	bool send = wc->wr_id >= RS_WR_DATA;
	uint32_t imm, type, n;

	if (send) {
		if (rs->sq_busy)
			rs->sq_busy--;
		if (wc->wr_id == RS_WR_DATA && rs->tx_tail != rs->tx_head)
			rs->tx_tail++;
	}
	if (wc->status != IBV_WC_SUCCESS) {
		/* flushed after the peer left or we disconnected: no news */
		rs_break(rs, rs->peer_gone || rs->rx_fin ? EPIPE : ECONNRESET);
		return;
	}
	if (send)
		return;
	if (wc->wr_id >= rs->nrx || wc->opcode != IBV_WC_RECV || !(wc->wc_flags & IBV_WC_WITH_IMM)) {
		rs_break(rs, EPROTO);
		return;
	}
	imm = ntohl(wc->imm_data);
	type = imm >> 28;
	n = imm & RS_CREDIT_MASK;
	if ((imm & 0x0fff0000u) || type > RS_T_FIN || n > rs->peer_nrx - rs->credits ||
	    wc->byte_len > rs->seg || (type != RS_T_DATA && wc->byte_len)) {
		rs_break(rs, EPROTO);
		return;
	}
	rs->credits += n;
	if (type == RS_T_DATA && wc->byte_len) {
		/* in the order the RECVs complete; nrx of them at most */
		rs->rx[rs->rx_tail % rs->nrx] = (struct rs_rx){ .slot = (uint32_t)wc->wr_id,
							        .len = wc->byte_len };
		rs->rx_tail++;
		return;
	}
	if (type == RS_T_FIN)
		rs->rx_fin = true;
	if (rs_post_recv(rs, (uint32_t)wc->wr_id))
		rs_break(rs, EIO);
	else
		rs->owed++;
}

/* Take in what completed; with cm, also the CM's news (the peer's
 * disconnect). */
static void rs_progress(struct rs *rs, bool cm)
{
	struct ibv_wc wc[16];
	int n;

	if (rs->state != RS_CONN)
		return;
	while ((n = ibv_poll_cq(rs->cq, 16, wc)) > 0)
		for (int i = 0; i < n; i++)
			rs_wc(rs, &wc[i]);
	if (n < 0)
		rs_break(rs, EIO);
	if (cm) {
		struct rdma_cm_event *ev;

		while (!rdma_get_cm_event(rs->cmch, &ev)) {
			if (ev->event == RDMA_CM_EVENT_DISCONNECTED ||
			    ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL ||
			    ev->event == RDMA_CM_EVENT_TIMEWAIT_EXIT)
				rs->peer_gone = true;
			rdma_ack_cm_event(ev);
		}
		if (rs->peer_gone) {
			/* what the peer sent before it left is in our slots by
			 * now (it waits for its SENDs before disconnecting) */
			while ((n = ibv_poll_cq(rs->cq, 16, wc)) > 0)
				for (int i = 0; i < n; i++)
					rs_wc(rs, &wc[i]);
		}
	}
	rs_ctrl(rs);
}

static bool rs_rx_ready(const struct rs *rs)
{
	return rs->rx_head != rs->rx_tail;
}

static short rs_revents(struct rs *rs, short events)
{
	short r = 0;

	switch (rs->state) {
	case RS_LISTEN: {
		struct pollfd p = { .fd = rs->cmch->fd, .events = POLLIN };

		if (poll(&p, 1, 0) > 0 && (p.revents & POLLIN))
			r |= POLLIN;
		break;
	}
	case RS_CONN:
		rs_progress(rs, !rs_rx_ready(rs));
		if (rs_rx_ready(rs) || rs->rx_fin || rs->peer_gone || rs->broken || rs->rd_shut)
			r |= POLLIN | (events & POLLRDNORM);
		if (rs_can_send(rs) || rs->broken || rs->tx_shut)
			r |= POLLOUT | (events & POLLWRNORM);
		if (rs->broken && rs->err != EPIPE)
			r |= POLLERR;
		if (rs->peer_gone || (rs->rx_fin && rs->tx_shut))
			r |= POLLHUP;
		break;
	case RS_NEW:
		r = POLLOUT | POLLHUP;
		break;
	default:
		r = POLLHUP | POLLERR;
		break;
	}
	return r & (events | POLLERR | POLLHUP | POLLNVAL);
}

/* Completion channel events are only a doorbell: take and ack them all. */
static void rs_drain_events(struct rs *rs)
{
	struct ibv_cq *cq;
	void *ctx;

	if (!rs->cch)
		return;
	while (!ibv_get_cq_event(rs->cch, &cq, &ctx))
		ibv_ack_cq_events(cq, 1);
}

/* ------------------------------------------------------- poll */

RS_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	uint64_t start = rs_now_ns(), end = timeout < 0 ? UINT64_MAX
					      : start + (uint64_t)timeout * 1000000ull;
	struct pollfd *pf = NULL;
	nfds_t nrs = 0, np;
	int ret;

	for (nfds_t i = 0; i < nfds; i++)
		if (rs_get(fds[i].fd))
			nrs++;
	if (!nrs)
		return poll(fds, nfds, timeout);
	pf = calloc(nfds + nrs, sizeof(*pf));
	if (!pf)
		return rs_fail(ENOMEM);
	for (bool armed = false;;) {
		int n = 0;
		uint64_t now;

		/* the rsockets as they are, the others without waiting */
		np = 0;
		for (nfds_t i = 0; i < nfds; i++) {
			struct rs *rs = rs_get(fds[i].fd);

			if (rs) {
				pthread_mutex_lock(&rs->lock);
				if (armed && rs->cq)
					ibv_req_notify_cq(rs->cq, 0);
				fds[i].revents = rs_revents(rs, fds[i].events);
				pthread_mutex_unlock(&rs->lock);
			} else {
				fds[i].revents = 0;
				pf[np++] = fds[i];
			}
		}
		if (np && poll(pf, np, 0) < 0) {
			ret = -1;
			goto out;
		}
		np = 0;
		for (nfds_t i = 0; i < nfds; i++) {
			if (!rs_get(fds[i].fd))
				fds[i].revents = pf[np++].revents;
			n += fds[i].revents != 0;
		}
		now = rs_now_ns();
		if (n || now >= end) {
			ret = n;
			goto out;
		}
		if (!armed) {
			/* spin a little: a reply is often that close */
			if (now - start < RS_SPIN_NS) {
				sched_yield();
				continue;
			}
			armed = true;   /* arm, look again, then sleep */
			continue;
		}
		/* sleep on the doorbells: each rsocket's completion channel and
		 * CM channel (or a listener's), and the other descriptors */
		np = 0;
		for (nfds_t i = 0; i < nfds; i++) {
			struct rs *rs = rs_get(fds[i].fd);

			if (!rs) {
				pf[np++] = fds[i];
				continue;
			}
			pf[np++] = (struct pollfd){ .fd = rs->cmch->fd, .events = POLLIN };
			if (rs->cch)
				pf[np++] = (struct pollfd){ .fd = rs->cch->fd, .events = POLLIN };
		}
		uint64_t left = end == UINT64_MAX ? 0 : (end - now + 999999ull) / 1000000ull;

		ret = poll(pf, np, end == UINT64_MAX ? -1 : (int)(left > INT32_MAX ? INT32_MAX : left));
		if (ret < 0 && errno != EINTR)
			goto out;
		if (ret < 0) {
			ret = -1;
			goto out;
		}
		for (nfds_t i = 0; i < nfds; i++) {
			struct rs *rs = rs_get(fds[i].fd);

			if (rs) {
				pthread_mutex_lock(&rs->lock);
				rs_drain_events(rs);
				pthread_mutex_unlock(&rs->lock);
			}
		}
	}
out:
	free(pf);
	return ret;
}

/* Wait until rs has one of events (the lock held on entry and return). */
static int rs_wait(struct rs *rs, short events, int ms)
{
	struct pollfd p = { .fd = rs->fd, .events = events };
	int ret;

	pthread_mutex_unlock(&rs->lock);
	ret = rpoll(&p, 1, ms);
	pthread_mutex_lock(&rs->lock);
	return ret < 0 ? errno : 0;
}

RS_EXPORT int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds,
		      struct timeval *timeout)
{
	struct pollfd *p;
	int n = 0, ret, ms;

	if (nfds < 0 || nfds > FD_SETSIZE)
		return rs_fail(EINVAL);
	p = calloc(nfds ? (size_t)nfds : 1, sizeof(*p));
	if (!p)
		return rs_fail(ENOMEM);
	for (int fd = 0; fd < nfds; fd++) {
		short ev = 0;

		if (readfds && FD_ISSET(fd, readfds))
			ev |= POLLIN;
		if (writefds && FD_ISSET(fd, writefds))
			ev |= POLLOUT;
		if (exceptfds && FD_ISSET(fd, exceptfds))
			ev |= POLLPRI;
		if (ev)
			p[n++] = (struct pollfd){ .fd = fd, .events = ev };
	}
	ms = timeout ? (int)(timeout->tv_sec * 1000 + (timeout->tv_usec + 999) / 1000) : -1;
	ret = rpoll(p, (nfds_t)n, ms);
	if (ret >= 0) {
		ret = 0;
		if (readfds)
			FD_ZERO(readfds);
		if (writefds)
			FD_ZERO(writefds);
		if (exceptfds)
			FD_ZERO(exceptfds);
		for (int i = 0; i < n; i++) {
			if (readfds && (p[i].revents & (POLLIN | POLLHUP | POLLERR))) {
				FD_SET(p[i].fd, readfds);
				ret++;
			}
			if (writefds && (p[i].revents & (POLLOUT | POLLERR))) {
				FD_SET(p[i].fd, writefds);
				ret++;
			}
			if (exceptfds && (p[i].revents & POLLPRI)) {
				FD_SET(p[i].fd, exceptfds);
				ret++;
			}
		}
	}
	free(p);
	return ret;
}

/* ------------------------------------------------------- sockets */

RS_EXPORT int rsocket(int domain, int type, int protocol)
{
	struct rs *rs;
	int ret;

	if (domain != AF_INET && domain != AF_INET6)
		return rs_fail(EAFNOSUPPORT);
	if ((type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) != SOCK_STREAM ||
	    (protocol && protocol != IPPROTO_TCP))
		return rs_fail(EPROTONOSUPPORT);   /* no datagram rsockets */
	rs = rs_alloc();
	if (!rs)
		return rs_fail(errno ? errno : ENOMEM);
	if (rdma_create_id(rs->cmch, &rs->id, rs, RDMA_PS_TCP)) {
		ret = errno;
		rs_free(rs);
		return rs_fail(ret);
	}
	if (type & SOCK_NONBLOCK)
		rs->fl |= O_NONBLOCK;
	ret = rs_set(rs->fd, rs);
	if (ret) {
		rs_free(rs);
		return rs_fail(ret);
	}
	return rs->fd;
}

RS_EXPORT int rbind(int s, const struct sockaddr *a, socklen_t l)
{
	struct rs *rs = rs_find(s);

	if (!rs)
		return -1;
	if (!a || (a->sa_family == AF_INET && l < sizeof(struct sockaddr_in)) ||
	    (a->sa_family == AF_INET6 && l < sizeof(struct sockaddr_in6)))
		return rs_fail(EINVAL);
	if (rs->state != RS_NEW)
		return rs_fail(EINVAL);
	if (rs->v6only >= 0)
		rdma_set_option(rs->id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &rs->v6only,
				sizeof(rs->v6only));
	return rdma_bind_addr(rs->id, (struct sockaddr *)a);
}

RS_EXPORT int rlisten(int s, int backlog)
{
	struct rs *rs = rs_find(s);

	if (!rs)
		return -1;
	if (rs->state == RS_LISTEN)
		return 0;
	if (rs->state != RS_NEW)
		return rs_fail(EINVAL);
	if (rdma_listen(rs->id, backlog > 0 ? backlog : 1))
		return -1;
	rs->state = RS_LISTEN;
	return 0;
}

/* The active side: resolve, set up, connect, wait for the answer. */
RS_EXPORT int rconnect(int s, const struct sockaddr *a, socklen_t l)
{
	struct rs *rs = rs_find(s);
	struct rdma_conn_param cp;
	enum rdma_cm_event_type t;
	struct rs_hello h;
	uint8_t pd[256], pd_len = 0;
	int ret, st;

	if (!rs)
		return -1;
	if (!a || (a->sa_family != AF_INET && a->sa_family != AF_INET6) ||
	    (a->sa_family == AF_INET && l < sizeof(struct sockaddr_in)) ||
	    (a->sa_family == AF_INET6 && l < sizeof(struct sockaddr_in6)))
		return rs_fail(a ? EAFNOSUPPORT : EINVAL);
	pthread_mutex_lock(&rs->lock);
	if (rs->state != RS_NEW) {
		pthread_mutex_unlock(&rs->lock);
		return rs_fail(rs->state == RS_CONN ? EISCONN : EINVAL);
	}
	if (rdma_resolve_addr(rs->id, NULL, (struct sockaddr *)a, 2000)) {
		ret = errno;
		goto fail;
	}
	ret = rs_cm_wait(rs, &t, &st, NULL, NULL, NULL, RS_CM_MS);
	if (!ret && t != RDMA_CM_EVENT_ADDR_RESOLVED)
		ret = EHOSTUNREACH;
	if (ret)
		goto fail;
	if (rdma_resolve_route(rs->id, 2000)) {
		ret = errno;
		goto fail;
	}
	ret = rs_cm_wait(rs, &t, &st, NULL, NULL, NULL, RS_CM_MS);
	if (!ret && t != RDMA_CM_EVENT_ROUTE_RESOLVED)
		ret = EHOSTUNREACH;
	if (ret)
		goto fail;
	ret = rs_setup(rs);
	if (ret)
		goto fail;
	rs_hello(rs, &h);
	memset(&cp, 0, sizeof(cp));
	cp.private_data = &h;
	cp.private_data_len = sizeof(h);
	cp.retry_count = 7;
	cp.rnr_retry_count = 7;
	if (rdma_connect(rs->id, &cp)) {
		ret = errno;
		goto fail;
	}
	ret = rs_cm_wait(rs, &t, &st, pd, &pd_len, NULL, RS_CM_MS);
	if (!ret && t != RDMA_CM_EVENT_ESTABLISHED)
		ret = t == RDMA_CM_EVENT_REJECTED || t == RDMA_CM_EVENT_UNREACHABLE ? ECONNREFUSED
										  : ETIMEDOUT;
	if (!ret) {
		ret = rs_peer_hello(rs, pd, pd_len);
		if (ret) {
			rdma_disconnect(rs->id);
			ret = ECONNREFUSED;   /* not an rsocket of ours there */
		}
	}
	if (ret)
		goto fail;
	rs->state = RS_CONN;
	pthread_mutex_unlock(&rs->lock);
	return 0;
fail:
	/* the socket cannot be used again, as after a failed TCP connect */
	rs_free_qp(rs);
	rs->state = RS_DEAD;
	rs->err = ret;
	pthread_mutex_unlock(&rs->lock);
	return rs_fail(ret);
}

RS_EXPORT int raccept(int s, struct sockaddr *a, socklen_t *l)
{
	struct rs *ls = rs_find(s), *rs;
	enum rdma_cm_event_type t;
	struct rdma_conn_param cp;
	struct rdma_cm_id *nid;
	struct rs_hello h;
	uint8_t pd[256], pd_len;
	int ret;

	if (!ls)
		return -1;
	if (ls->state != RS_LISTEN)
		return rs_fail(EINVAL);
	for (;;) {
		ret = rs_cm_wait(ls, &t, NULL, pd, &pd_len, &nid,
				 ls->fl & O_NONBLOCK ? 0 : INT32_MAX / 2);
		if (ret == ETIMEDOUT)
			return rs_fail(EAGAIN);
		if (ret)
			return rs_fail(ret);
		if (t != RDMA_CM_EVENT_CONNECT_REQUEST)
			continue;
		rs = rs_alloc();
		if (!rs) {
			rdma_reject(nid, NULL, 0);
			rdma_destroy_id(nid);
			return rs_fail(ENOMEM);
		}
		rs->id = nid;
		nid->context = rs;
		rs->sndbuf = ls->sndbuf;
		rs->rcvbuf = ls->rcvbuf;
		rs->sqsize = ls->sqsize;
		rs->rqsize = ls->rqsize;
		rs->inl = ls->inl;
		rs->nodelay = ls->nodelay;
		ret = rs_peer_hello(rs, pd, pd_len);
		if (!ret && rdma_migrate_id(nid, rs->cmch))
			ret = errno ? errno : EIO;
		if (!ret)
			ret = rs_setup(rs);
		if (ret) {
			rdma_reject(nid, NULL, 0);
			rs_free(rs);
			continue;   /* that peer is not one we can serve; the next */
		}
		rs_hello(rs, &h);
		memset(&cp, 0, sizeof(cp));
		cp.private_data = &h;
		cp.private_data_len = sizeof(h);
		cp.retry_count = 7;
		cp.rnr_retry_count = 7;
		if (rdma_accept(nid, &cp)) {
			rs_free(rs);
			continue;
		}
		ret = rs_cm_wait(rs, &t, NULL, NULL, NULL, NULL, RS_CM_MS);
		if (ret || t != RDMA_CM_EVENT_ESTABLISHED) {
			rs_free(rs);
			continue;
		}
		rs->state = RS_CONN;
		ret = rs_set(rs->fd, rs);
		if (ret) {
			rdma_disconnect(rs->id);
			rs_free(rs);
			return rs_fail(ret);
		}
		if (a && l) {
			struct sockaddr *pa = rdma_get_peer_addr(rs->id);
			socklen_t n = pa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
							      : sizeof(struct sockaddr_in);

			memcpy(a, pa, *l < n ? *l : n);
			*l = n;
		}
		return rs->fd;
	}
}

static bool rs_nonblock(const struct rs *rs, int flags)
{
	return (rs->fl & O_NONBLOCK) || (flags & MSG_DONTWAIT);
}

RS_EXPORT ssize_t rsend(int s, const void *b, size_t n, int flags)
{
	struct rs *rs = rs_find(s);
	const uint8_t *p = b;
	size_t sent = 0;
	int e = 0;

	if (!rs)
		return -1;
	if (flags & ~(MSG_DONTWAIT | MSG_NOSIGNAL | MSG_MORE))
		return rs_fail(EOPNOTSUPP);
	pthread_mutex_lock(&rs->lock);
	if (rs->state != RS_CONN) {
		pthread_mutex_unlock(&rs->lock);
		return rs_fail(ENOTCONN);
	}
	while (sent < n) {
		rs_progress(rs, false);
		if (rs->broken || rs->tx_shut) {
			e = rs->tx_shut || !rs->err ? EPIPE : rs->err;
			break;
		}
		if (rs_can_send(rs)) {
			uint32_t len = rs->seg < rs->peer_seg ? rs->seg : rs->peer_seg;

			if (n - sent < len)
				len = (uint32_t)(n - sent);
			if (rs_post_send(rs, RS_T_DATA, p + sent, len))
				continue;   /* broken now */
			sent += len;
			continue;
		}
		if (rs_nonblock(rs, flags)) {
			e = EAGAIN;
			break;
		}
		e = rs_wait(rs, POLLOUT, -1);
		if (e)
			break;
	}
	pthread_mutex_unlock(&rs->lock);
	if (sent)
		return (ssize_t)sent;
	return rs_fail(e);
}

/* Copy out up to n bytes (the slots emptied go back to the peer); peek
 * leaves them. */
static size_t rs_copy_out(struct rs *rs, uint8_t *dst, size_t n, bool peek)
{
	uint32_t head = rs->rx_head, off = rs->rx_off;
	size_t got = 0;

	while (got < n && head != rs->rx_tail) {
		const struct rs_rx *x = &rs->rx[head % rs->nrx];
		const uint8_t *src = rs->buf + (size_t)(rs->ntx + x->slot) * rs->seg;
		size_t k = x->len - off;

		if (k > n - got)
			k = n - got;
		memcpy(dst + got, src + off, k);
		got += k;
		off += (uint32_t)k;
		if (off == x->len) {
			if (!peek) {
				if (rs_post_recv(rs, x->slot))
					rs_break(rs, EIO);
				else
					rs->owed++;
			}
			head++;
			off = 0;
		}
	}
	if (!peek) {
		rs->rx_head = head;
		rs->rx_off = off;
	}
	return got;
}

RS_EXPORT ssize_t rrecv(int s, void *b, size_t n, int flags)
{
	struct rs *rs = rs_find(s);
	size_t got = 0;
	int e = 0;

	if (!rs)
		return -1;
	if (flags & ~(MSG_DONTWAIT | MSG_PEEK | MSG_WAITALL | MSG_NOSIGNAL))
		return rs_fail(EOPNOTSUPP);
	pthread_mutex_lock(&rs->lock);
	if (rs->state != RS_CONN) {
		pthread_mutex_unlock(&rs->lock);
		return rs_fail(ENOTCONN);
	}
	for (;;) {
		rs_progress(rs, false);
		if (rs_rx_ready(rs) && !rs->rd_shut) {
			got += rs_copy_out(rs, (uint8_t *)b + got, n - got, flags & MSG_PEEK);
			rs_ctrl(rs);   /* credits owed go back */
			if (got == n || !(flags & MSG_WAITALL) || (flags & MSG_PEEK))
				break;
			continue;
		}
		if (!n || rs->rx_fin || rs->rd_shut)
			break;   /* the end of the stream */
		rs_progress(rs, true);
		if (rs_rx_ready(rs))
			continue;
		if (rs->peer_gone || rs->broken) {
			if (!got && rs->broken && rs->err != EPIPE && !rs->peer_gone)
				e = rs->err;
			break;
		}
		if (rs_nonblock(rs, flags)) {
			if (!got)
				e = EAGAIN;
			break;
		}
		e = rs_wait(rs, POLLIN, -1);
		if (e)
			break;
	}
	pthread_mutex_unlock(&rs->lock);
	if (got || !e)
		return (ssize_t)got;
	return rs_fail(e);
}

RS_EXPORT ssize_t rrecvfrom(int s, void *b, size_t n, int f, struct sockaddr *a, socklen_t *l)
{
	ssize_t ret = rrecv(s, b, n, f);

	if (ret >= 0 && a && l)
		*l = 0;   /* a stream socket names no source */
	return ret;
}

RS_EXPORT ssize_t rsendto(int s, const void *b, size_t n, int f, const struct sockaddr *a,
			  socklen_t l)
{
	(void)a, (void)l;
	return rsend(s, b, n, f);   /* connected: the address is ignored, as TCP does */
}

RS_EXPORT ssize_t rsendmsg(int s, const struct msghdr *m, int f)
{
	ssize_t total = 0;

	if (!m)
		return rs_fail(EINVAL);
	for (size_t i = 0; i < m->msg_iovlen; i++) {
		ssize_t r;

		if (!m->msg_iov[i].iov_len)
			continue;
		r = rsend(s, m->msg_iov[i].iov_base, m->msg_iov[i].iov_len, f);
		if (r < 0)
			return total ? total : r;
		total += r;
		if ((size_t)r < m->msg_iov[i].iov_len)
			break;
	}
	return total;
}

RS_EXPORT ssize_t rrecvmsg(int s, struct msghdr *m, int f)
{
	ssize_t total = 0;

	if (!m)
		return rs_fail(EINVAL);
	for (size_t i = 0; i < m->msg_iovlen; i++) {
		ssize_t r;

		if (!m->msg_iov[i].iov_len)
			continue;
		/* the first part may wait, the rest only takes what is there */
		r = rrecv(s, m->msg_iov[i].iov_base, m->msg_iov[i].iov_len,
			  total ? (f | MSG_DONTWAIT) & ~MSG_WAITALL : f);
		if (r < 0)
			return total ? total : r;
		total += r;
		if ((size_t)r < m->msg_iov[i].iov_len)
			break;
	}
	m->msg_flags = 0;
	m->msg_controllen = 0;
	return total;
}

RS_EXPORT ssize_t rread(int s, void *b, size_t n)
{
	return rrecv(s, b, n, 0);
}

RS_EXPORT ssize_t rreadv(int s, const struct iovec *v, int n)
{
	struct msghdr m = { .msg_iov = (struct iovec *)v, .msg_iovlen = n > 0 ? (size_t)n : 0 };

	return n < 0 ? rs_fail(EINVAL) : rrecvmsg(s, &m, 0);
}

RS_EXPORT ssize_t rwrite(int s, const void *b, size_t n)
{
	return rsend(s, b, n, 0);
}

RS_EXPORT ssize_t rwritev(int s, const struct iovec *v, int n)
{
	struct msghdr m = { .msg_iov = (struct iovec *)v, .msg_iovlen = n > 0 ? (size_t)n : 0 };

	return n < 0 ? rs_fail(EINVAL) : rsendmsg(s, &m, 0);
}

RS_EXPORT int rshutdown(int s, int how)
{
	struct rs *rs = rs_find(s);

	if (!rs)
		return -1;
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
		return rs_fail(EINVAL);
	pthread_mutex_lock(&rs->lock);
	if (rs->state != RS_CONN) {
		pthread_mutex_unlock(&rs->lock);
		return rs_fail(ENOTCONN);
	}
	if (how != SHUT_WR)
		rs->rd_shut = true;
	if (how != SHUT_RD) {
		rs->tx_shut = true;
		rs_progress(rs, false);   /* FIN now if a credit is there, else later */
	}
	pthread_mutex_unlock(&rs->lock);
	return 0;
}

RS_EXPORT int rclose(int s)
{
	struct rs *rs = rs_find(s);

	if (!rs)
		return -1;
	rs_set(s, NULL);
	pthread_mutex_lock(&rs->lock);
	if (rs->state == RS_CONN) {
		uint64_t end = rs_now_ns() + RS_CLOSE_MS * 1000000ull;

		/* FIN after all we sent, and every SEND complete (in the
		 * peer's slots) before the QP goes */
		rs->tx_shut = true;
		for (;;) {
			rs_progress(rs, true);
			if (rs->broken || rs->peer_gone || (rs->fin_sent && !rs->sq_busy) ||
			    rs_now_ns() >= end)
				break;
			if (rs->cq)
				ibv_req_notify_cq(rs->cq, 0);
			rs_progress(rs, false);
			if (rs->fin_sent && !rs->sq_busy)
				break;
			pthread_mutex_unlock(&rs->lock);
			struct pollfd p[2] = { { .fd = rs->cch->fd, .events = POLLIN },
					       { .fd = rs->cmch->fd, .events = POLLIN } };
			poll(p, 2, 10);
			pthread_mutex_lock(&rs->lock);
			rs_drain_events(rs);
		}
		rdma_disconnect(rs->id);
	}
	rs_drain_events(rs);
	pthread_mutex_unlock(&rs->lock);
	rs_free(rs);
	return 0;
}

static struct sockaddr *rs_addr(struct rs *rs, bool peer)
{
	return peer ? rdma_get_peer_addr(rs->id) : rdma_get_local_addr(rs->id);
}

static int rs_name(int s, struct sockaddr *a, socklen_t *l, bool peer)
{
	struct rs *rs = rs_find(s);
	struct sockaddr *sa;
	socklen_t n;

	if (!rs)
		return -1;
	if (!l || (!a && *l))
		return rs_fail(EFAULT);
	if (peer && rs->state != RS_CONN)
		return rs_fail(ENOTCONN);
	sa = rs_addr(rs, peer);
	n = sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
	if (a)   /* librspreload asks the size alone (NULL, 0) */
		memcpy(a, sa, *l < n ? *l : n);
	*l = n;
	return 0;
}

RS_EXPORT int rgetpeername(int s, struct sockaddr *a, socklen_t *l)
{
	return rs_name(s, a, l, true);
}

RS_EXPORT int rgetsockname(int s, struct sockaddr *a, socklen_t *l)
{
	return rs_name(s, a, l, false);
}

static int *rs_opt(struct rs *rs, int level, int name)
{
	switch (level) {
	case SOL_SOCKET:
		switch (name) {
		case SO_REUSEADDR:
			return &rs->reuse;
		case SO_KEEPALIVE:
			return &rs->keepalive;
		case SO_SNDBUF:
			return &rs->sndbuf;
		case SO_RCVBUF:
			return &rs->rcvbuf;
		}
		break;
	case IPPROTO_TCP:
		switch (name) {
		case TCP_NODELAY:
			return &rs->nodelay;
		case TCP_KEEPIDLE:
			return &rs->keepidle;
		}
		break;
	case IPPROTO_IPV6:
		if (name == IPV6_V6ONLY)
			return &rs->v6only;
		break;
	case SOL_RDMA:
		switch (name) {
		case RDMA_SQSIZE:
			return &rs->sqsize;
		case RDMA_RQSIZE:
			return &rs->rqsize;
		case RDMA_INLINE:
			return &rs->inl;
		}
		break;
	}
	return NULL;
}

RS_EXPORT int rsetsockopt(int s, int level, int name, const void *v, socklen_t l)
{
	struct rs *rs = rs_find(s);
	int *o;

	if (!rs)
		return -1;
	if (level == SOL_SOCKET && name == SO_LINGER) {
		if (!v || l < sizeof(struct linger))
			return rs_fail(EINVAL);
		memcpy(&rs->linger, v, sizeof(rs->linger));
		return 0;
	}
	o = rs_opt(rs, level, name);
	if (!o)
		return rs_fail(ENOTSUP);
	if (!v || l < sizeof(int))
		return rs_fail(EINVAL);
	pthread_mutex_lock(&rs->lock);
	memcpy(o, v, sizeof(int));
	if ((o == &rs->sndbuf || o == &rs->rcvbuf) && (*o < 0 || (unsigned)*o > RS_BUF_MAX))
		*o = *o < 0 ? 0 : (int)RS_BUF_MAX;
	if ((o == &rs->sqsize || o == &rs->rqsize) && (*o < 0 || (unsigned)*o > RS_SLOTS_MAX))
		*o = *o < 0 ? 0 : (int)RS_SLOTS_MAX;
	/* sizes count once the connection is set up; later ones are kept
	 * for getsockopt only */
	pthread_mutex_unlock(&rs->lock);
	return 0;
}

RS_EXPORT int rgetsockopt(int s, int level, int name, void *v, socklen_t *l)
{
	struct rs *rs = rs_find(s);
	int val, *o;

	if (!rs)
		return -1;
	if (!v || !l)
		return rs_fail(EFAULT);
	if (level == SOL_SOCKET && name == SO_LINGER) {
		if (*l < sizeof(struct linger))
			return rs_fail(EINVAL);
		memcpy(v, &rs->linger, sizeof(rs->linger));
		*l = sizeof(struct linger);
		return 0;
	}
	pthread_mutex_lock(&rs->lock);
	if (level == SOL_SOCKET && name == SO_ERROR) {
		val = rs->broken && rs->err != EPIPE ? rs->err : rs->state == RS_DEAD ? rs->err : 0;
		if (rs->state == RS_DEAD)
			rs->err = 0;
	} else if (level == SOL_SOCKET && name == SO_TYPE) {
		val = SOCK_STREAM;
	} else if (level == IPPROTO_TCP && name == TCP_MAXSEG) {
		val = (int)(rs->seg ? rs->seg : RS_SEG_DEFAULT);
	} else if ((o = rs_opt(rs, level, name))) {
		val = *o;
		if (rs->state == RS_CONN && o == &rs->sndbuf)
			val = (int)(rs->ntx * rs->seg);
		else if (rs->state == RS_CONN && o == &rs->rcvbuf)
			val = (int)(rs->nrx * rs->seg);
		else if (o == &rs->v6only && val < 0)
			val = 0;
	} else {
		pthread_mutex_unlock(&rs->lock);
		return rs_fail(ENOTSUP);
	}
	pthread_mutex_unlock(&rs->lock);
	if (*l < sizeof(int))
		return rs_fail(EINVAL);
	memcpy(v, &val, sizeof(int));
	*l = sizeof(int);
	return 0;
}

RS_EXPORT int rfcntl(int s, int cmd, ...)
{
	struct rs *rs = rs_find(s);
	va_list ap;
	int arg;

	if (!rs)
		return -1;
	switch (cmd) {
	case F_GETFD:   /* close-on-exec: the descriptor's own */
		return fcntl(rs->fd, F_GETFD);
	case F_SETFD:
		va_start(ap, cmd);
		arg = va_arg(ap, int);
		va_end(ap);
		return fcntl(rs->fd, F_SETFD, arg);
	case F_GETFL:
		return O_RDWR | rs->fl;
	case F_SETFL:
		va_start(ap, cmd);
		arg = va_arg(ap, int);
		va_end(ap);
		rs->fl = arg & O_NONBLOCK;
		return 0;
	default:
		return rs_fail(ENOTSUP);
	}
}

RS_EXPORT off_t riomap(int s, void *b, size_t n, int prot, int flags, off_t off)
{
	(void)b, (void)n, (void)prot, (void)flags, (void)off;
	return rs_find(s) ? rs_fail(ENOSYS) : -1;
}

RS_EXPORT int riounmap(int s, void *b, size_t n)
{
	(void)b, (void)n;
	return rs_find(s) ? rs_fail(EINVAL) : -1;
}

RS_EXPORT size_t riowrite(int s, const void *b, size_t n, off_t off, int flags)
{
	(void)b, (void)n, (void)off, (void)flags;
	errno = rs_get(s) ? ENOSYS : EBADF;
	return 0;
}
