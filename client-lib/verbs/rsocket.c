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
 * library (rdma-core's own wire format is not spoken), so the protocol is
 * ours:
 *
 * - The connect's private data (REQ and REP) carries each side's data slot
 *   count and slot size ("RSR1", struct rs_hello).
 * - Every message is a SEND_WITH_IMM into one of the peer's posted RECVs.
 *   The immediate holds a type (DATA, CREDIT, FIN) and what its sender has
 *   posted again since it last said so: data credits (slots emptied by its
 *   application) and control credits (CREDIT / FIN messages it took in).
 * - Each side posts its data slots plus RS_CTRL more RECVs. DATA spends a
 *   data credit; CREDIT and FIN spend one of the RS_CTRL control credits,
 *   which come back with the peer's next message of any kind. So a side
 *   can always say what it owes, however full the peer's slots are with
 *   data it has not read (a half close with replies in both directions
 *   cannot deadlock). A receiver returns data credits with each message it
 *   sends, or in a CREDIT once it owes half its data slots.
 * - FIN (shutdown(SHUT_WR), close) ends the byte stream: the peer reads 0
 *   once it has read all that came before. close waits (2 s at most) until
 *   every SEND of its own has completed, which on RC means it sits in a
 *   posted RECV of the peer, then disconnects.
 *
 * Everything the peer sends is checked before use: the type, the credits
 * (never beyond what this side can owe), the lengths (the verbs layer
 * bounds them by the slot), DATA beyond the data slots. A peer that breaks
 * the protocol gets the connection reset (EPROTO to our side), never memory
 * beyond a slot.
 *
 * Threads: each call holds its rsocket's mutex except while it sleeps.
 * A sleeper (rpoll, a blocking call) puts an eventfd of its own on the
 * rsocket's waiter list and sleeps on it beside the CQ's completion channel
 * and the CM channel; a call that takes in completions or changes the state
 * writes to every eventfd on the list. A descriptor is looked up with a
 * reference; rclose marks it closed (new calls get EBADF, rpoll POLLNVAL),
 * wakes the sleepers (their calls end with EBADF) and the last reference
 * takes it out of the table and frees it. A listener takes the CM's
 * connection requests in when polled, so POLLIN means one is there.
 *
 * A socket that is O_NONBLOCK connects synchronously all the same (connect
 * returns 0, which POSIX allows). raccept returns a connection once it has
 * answered the request; the peer's confirmation (RTU) comes later, and a
 * peer that never sends it sees its connection reset after the CM's
 * timeout. SOCK_DGRAM, riomap / riowrite and the fork support are not
 * provided (docs/verbs-compat.md).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
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
/* the immediate: type << 28 | control credits << 24 | data credits */
#define RS_IMM(t, c, n) ((t) << 28 | (c) << 24 | (n))
#define RS_IMM_RSVD 0x00ff0000u
#define RS_CREDIT_MASK 0xffffu
#define RS_CTRL 4u                    /* control RECVs and credits, each way */
#define RS_SEG_MIN 64u
#define RS_SEG_MAX (1u << 20)
#define RS_SEG_DEFAULT (16u << 10)
#define RS_SLOTS_MIN 4u
#define RS_SLOTS_MAX 1024u
#define RS_BUF_DEFAULT (256u << 10)
#define RS_BUF_MAX (16u << 20)
#define RS_WR_DATA (1ull << 32)
#define RS_WR_CTRL (2ull << 32)
#define RS_SPIN_NS 20000ull
#define RS_CLOSE_MS 2000
#define RS_CM_MS 60000
#define RS_POLL_BATCHES 8             /* x 16 completions per look: a flood cannot hold a caller */

struct rs_hello {
	uint32_t magic, slots, seg;
};

enum rs_state { RS_NEW, RS_CONNECTING, RS_LISTEN, RS_CONN, RS_DEAD };

struct rs_rx {
	uint32_t slot, len;
};

/* a sleeper's eventfd, on the list of each rsocket it sleeps on */
struct rs_waiter {
	int fd;
	struct rs_waiter *next;
};

/* a connection request a listener took in, for raccept */
#define RS_REQS 32
struct rs_req {
	struct rdma_cm_id *id;
	uint8_t pd_len;
	uint8_t pd[64];
};

struct rs {
	int fd;
	int ref;                      /* the table's, and each call's */
	pthread_mutex_t lock;
	enum rs_state state;
	int fl;                       /* O_NONBLOCK */
	int err;                      /* why the connection broke (0: it did not) */
	bool broken, rx_fin, peer_gone, tx_shut, rd_shut, fin_sent, closed;
	struct rs_waiter *wl;
	struct rs_req *reqs;          /* a listener's, RS_REQS of them */
	uint32_t req_head, req_tail;
	struct rdma_event_channel *cmch;
	struct rdma_cm_id *id;
	struct ibv_comp_channel *cch;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf;                 /* ntx send slots, then nrq receive slots */
	uint32_t seg, ntx, nrx, nrq;  /* nrq = nrx data + RS_CTRL control RECVs */
	uint32_t peer_seg, peer_nrx;
	uint32_t credits, ctrl_credits, owed, ctrl_owed;
	uint32_t tx_head, tx_tail, sq_busy, sq_max;
	struct rs_rx *rx;             /* nrq entries: slots with data, in order */
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

static struct rs **rs_slot(int fd, bool make)
{
	struct rs **t;

	if (fd < 0 || fd >= RS_L1 * RS_L2)
		return NULL;
	t = rs_tab[fd / RS_L2];
	if (!t && make) {
		t = calloc(RS_L2, sizeof(*t));
		rs_tab[fd / RS_L2] = t;
	}
	return t ? &t[fd % RS_L2] : NULL;
}

static bool rs_is(int fd)
{
	struct rs **p;
	bool yes;

	pthread_mutex_lock(&rs_tab_lock);
	p = rs_slot(fd, false);
	yes = p && *p;
	pthread_mutex_unlock(&rs_tab_lock);
	return yes;
}

/* The rsocket of fd with a reference, or NULL (errno EBADF); a closed one
 * too only when closed_too (rpoll reports it POLLNVAL). */
static struct rs *rs_ref(int fd, bool closed_too)
{
	struct rs **p, *rs = NULL;

	pthread_mutex_lock(&rs_tab_lock);
	p = rs_slot(fd, false);
	if (p && *p && (closed_too || !__atomic_load_n(&(*p)->closed, __ATOMIC_ACQUIRE))) {
		rs = *p;
		__atomic_add_fetch(&rs->ref, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&rs_tab_lock);
	if (!rs)
		errno = EBADF;
	return rs;
}

static struct rs *rs_get(int fd)
{
	return rs_ref(fd, false);
}

static void rs_free(struct rs *rs);

static void rs_put(struct rs *rs)
{
	if (__atomic_sub_fetch(&rs->ref, 1, __ATOMIC_ACQ_REL) == 0)
		rs_free(rs);
}

static int rs_publish(struct rs *rs)
{
	struct rs **p;

	pthread_mutex_lock(&rs_tab_lock);
	p = rs_slot(rs->fd, true);
	if (p)
		*p = rs;
	pthread_mutex_unlock(&rs_tab_lock);
	return p ? 0 : rs->fd < 0 || rs->fd >= RS_L1 * RS_L2 ? EMFILE : ENOMEM;
}

static int rs_fail(int e)
{
	errno = e;
	return -1;
}

/* errno e for the call, its reference dropped */
static int rs_put_fail(struct rs *rs, int e)
{
	rs_put(rs);
	return rs_fail(e);
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

/* Wake the sleepers of rs (its lock held): something changed. */
static void rs_kick(struct rs *rs)
{
	uint64_t one = 1;

	for (struct rs_waiter *w = rs->wl; w; w = w->next)
		if (write(w->fd, &one, sizeof(one)) < 0) {
			/* the counter is full: readable all the same */
		}
}

/* ------------------------------------------------------- life cycle */

static struct rs *rs_alloc(void)
{
	struct rs *rs = calloc(1, sizeof(*rs));

	if (!rs)
		return NULL;
	pthread_mutex_init(&rs->lock, NULL);
	rs->ref = 1;
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

static void rs_drain_events(struct rs *rs);

/* The last reference: out of the table (if it is there), then gone. */
static void rs_free(struct rs *rs)
{
	struct rs **p;

	pthread_mutex_lock(&rs_tab_lock);
	p = rs_slot(rs->fd, false);
	if (p && *p == rs)
		*p = NULL;
	pthread_mutex_unlock(&rs_tab_lock);
	rs_drain_events(rs);
	rs_free_qp(rs);
	for (; rs->reqs && rs->req_head != rs->req_tail; rs->req_head++) {
		struct rdma_cm_id *id = rs->reqs[rs->req_head % RS_REQS].id;

		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
	}
	free(rs->reqs);
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
	rs->nrq = rs->nrx + RS_CTRL;
	size = (size_t)(rs->ntx + rs->nrq) * rs->seg;
	rs->buf = aligned_alloc(4096, size);
	rs->rx = calloc(rs->nrq, sizeof(*rs->rx));
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
	rs->sq_max = rs->ntx + RS_CTRL;
	rs->cq = ibv_create_cq(v, (int)(rs->sq_max + rs->nrq), rs, rs->cch, 0);
	if (!rs->cq)
		return errno ? errno : ENOMEM;
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = rs->cq;
	qa.recv_cq = rs->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.sq_sig_all = 1;
	qa.cap.max_send_wr = rs->sq_max;
	qa.cap.max_recv_wr = rs->nrq;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	if (rdma_create_qp(rs->id, rs->pd, &qa))
		return errno ? errno : EIO;
	for (uint32_t i = 0; i < rs->nrq; i++) {
		ret = rs_post_recv(rs, i);
		if (ret)
			return ret;
	}
	rs->ctrl_credits = RS_CTRL;
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
 * what the caller needs; an rsocket closed meanwhile ends it (EBADF). */
static int rs_cm_wait(struct rs *rs, enum rdma_cm_event_type *type, int *status,
		      void *pd, uint8_t *pd_len, struct rdma_cm_id **nid, int ms)
{
	uint64_t end = rs_now_ns() + (uint64_t)ms * 1000000ull;
	struct rdma_cm_event *ev;

	for (;;) {
		if (__atomic_load_n(&rs->closed, __ATOMIC_ACQUIRE))
			return EBADF;
		if (!rdma_get_cm_event(rs->cmch, &ev))
			break;
		if (errno != EAGAIN && errno != EINTR)
			return errno;
		uint64_t now = rs_now_ns();
		if (now >= end)
			return ETIMEDOUT;
		/* rclose is seen within 100 ms */
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
	wr.imm_data = htonl(RS_IMM(type, rs->ctrl_owed, rs->owed & RS_CREDIT_MASK));
	wr.wr_id = type == RS_T_DATA ? RS_WR_DATA : RS_WR_CTRL;
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
	rs->ctrl_owed = 0;
	rs->sq_busy++;
	if (type == RS_T_DATA) {
		rs->credits--;
		rs->tx_head++;
	} else {
		rs->ctrl_credits--;
	}
	return 0;
}

/* A DATA message may go: a data credit, a free slot. */
static bool rs_can_send(const struct rs *rs)
{
	return rs->state == RS_CONN && !rs->broken && !rs->tx_shut && !rs->peer_gone &&
	       rs->credits && rs->tx_head - rs->tx_tail < rs->ntx && rs->sq_busy < rs->sq_max;
}

/* FIN when asked for, credits when half the data slots are owed: on
 * control credits, which the peer's slots full of data do not hold up. */
static void rs_ctrl(struct rs *rs)
{
	if (rs->state != RS_CONN || rs->broken || rs->peer_gone || !rs->ctrl_credits ||
	    rs->sq_busy >= rs->sq_max)
		return;
	if (rs->tx_shut && !rs->fin_sent) {
		/* after the DATA before it, which the QP keeps in order */
		if (!rs_post_send(rs, RS_T_FIN, NULL, 0))
			rs->fin_sent = true;
		if (!rs->ctrl_credits || rs->sq_busy >= rs->sq_max)
			return;
	}
	if (rs->owed && rs->owed >= rs->nrx / 2)
		rs_post_send(rs, RS_T_CREDIT, NULL, 0);
}

static void rs_wc(struct rs *rs, const struct ibv_wc *wc)
{
	bool send = wc->wr_id >= RS_WR_DATA;
	uint32_t imm, type, n, c;

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
	if (wc->wr_id >= rs->nrq || wc->opcode != IBV_WC_RECV || !(wc->wc_flags & IBV_WC_WITH_IMM)) {
		rs_break(rs, EPROTO);
		return;
	}
	imm = ntohl(wc->imm_data);
	type = imm >> 28;
	c = (imm >> 24) & 0xfu;
	n = imm & RS_CREDIT_MASK;
	/* credits beyond what we can be owed, DATA beyond the data slots
	 * (sent on a control credit), a control message beyond them */
	if ((imm & RS_IMM_RSVD) || type > RS_T_FIN || n > rs->peer_nrx - rs->credits ||
	    c > RS_CTRL - rs->ctrl_credits || wc->byte_len > rs->seg ||
	    (type != RS_T_DATA && wc->byte_len) ||
	    (type == RS_T_DATA && wc->byte_len && rs->rx_tail - rs->rx_head >= rs->nrx) ||
	    (type != RS_T_DATA && rs->ctrl_owed >= RS_CTRL)) {
		rs_break(rs, EPROTO);
		return;
	}
	rs->credits += n;
	rs->ctrl_credits += c;
	if (type == RS_T_DATA && wc->byte_len) {
		/* in the order the RECVs complete */
		rs->rx[rs->rx_tail % rs->nrq] = (struct rs_rx){ .slot = (uint32_t)wc->wr_id,
							        .len = wc->byte_len };
		rs->rx_tail++;
		return;
	}
	if (type == RS_T_FIN)
		rs->rx_fin = true;
	if (rs_post_recv(rs, (uint32_t)wc->wr_id)) {
		rs_break(rs, EIO);
	} else if (type == RS_T_DATA) {
		rs->owed++;   /* an empty DATA: a data slot, back at once */
	} else {
		rs->ctrl_owed++;
	}
}

/* Take in what completed (a bounded number: a peer's flood cannot hold the
 * caller) and the CM's news (the peer's disconnect, or an accepted
 * connection that never got its RTU); kick the sleepers on news. */
static void rs_progress(struct rs *rs, bool cm)
{
	struct ibv_wc wc[16];
	bool news = false;
	int n = 0;

	if (rs->state != RS_CONN)
		return;
	for (int b = 0; b < RS_POLL_BATCHES; b++) {
		n = ibv_poll_cq(rs->cq, 16, wc);
		for (int i = 0; i < n; i++)
			rs_wc(rs, &wc[i]);
		news |= n > 0;
		if (n < 16)
			break;
	}
	if (n < 0)
		rs_break(rs, EIO);
	if (cm) {
		struct rdma_cm_event *ev;

		while (!rdma_get_cm_event(rs->cmch, &ev)) {
			switch (ev->event) {
			case RDMA_CM_EVENT_ESTABLISHED:
				break;
			case RDMA_CM_EVENT_DISCONNECTED:
			case RDMA_CM_EVENT_TIMEWAIT_EXIT:
				rs->peer_gone = true;   /* the end of the stream */
				break;
			default:   /* CONNECT_ERROR, DEVICE_REMOVAL, ...: a reset */
				rs_break(rs, ECONNRESET);
				break;
			}
			news = true;
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
	if (news)
		rs_kick(rs);
}

static bool rs_rx_ready(const struct rs *rs)
{
	return rs->rx_head != rs->rx_tail;
}

/* A listener takes in the CM's connection requests (its lock held), up to
 * RS_REQS; other events of its channel are dropped. */
static void rs_listen_pull(struct rs *ls)
{
	struct rdma_cm_event *ev;

	if (!ls->reqs)
		ls->reqs = calloc(RS_REQS, sizeof(*ls->reqs));
	while (ls->reqs && ls->req_tail - ls->req_head < RS_REQS && !rdma_get_cm_event(ls->cmch, &ev)) {
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
			struct rs_req *q = &ls->reqs[ls->req_tail++ % RS_REQS];
			uint8_t n = ev->param.conn.private_data_len;

			q->id = ev->id;
			q->pd_len = n < sizeof(q->pd) ? n : sizeof(q->pd);
			if (q->pd_len && ev->param.conn.private_data)
				memcpy(q->pd, ev->param.conn.private_data, q->pd_len);
		}
		rdma_ack_cm_event(ev);
	}
}

static short rs_revents(struct rs *rs, short events)
{
	short r = 0;

	if (rs->closed)
		return POLLNVAL;
	switch (rs->state) {
	case RS_LISTEN:
		rs_listen_pull(rs);
		if (rs->req_head != rs->req_tail)
			r |= POLLIN | (events & POLLRDNORM);
		break;
	case RS_CONNECTING:
		break;
	case RS_CONN:
		rs_progress(rs, true);
		if (rs_rx_ready(rs) || rs->rx_fin || rs->peer_gone || rs->broken || rs->rd_shut)
			r |= POLLIN | (events & POLLRDNORM);
		if (rs_can_send(rs) || rs->broken || rs->tx_shut || rs->peer_gone)
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

	if (!rs->cch || rs->state != RS_CONN)
		return;
	while (!ibv_get_cq_event(rs->cch, &cq, &ctx))
		ibv_ack_cq_events(cq, 1);
}

/* ------------------------------------------------------- poll */

/* Poll over fds; rsv[i] is the rsocket of fds[i] (or NULL), pf has room
 * for 2 * nfds + 1 entries, wv for nfds. */
static int rs_poll_set(struct pollfd *fds, struct rs **rsv, struct pollfd *pf,
		       struct rs_waiter *wv, nfds_t nfds, int timeout)
{
	uint64_t start = rs_now_ns(), end = timeout < 0 ? UINT64_MAX
					      : start + (uint64_t)timeout * 1000000ull;
	int wfd = -1, ret = -1, err = 0;
	nfds_t np;

	for (;;) {
		int n = 0;
		uint64_t now;

		/* the rsockets as they are (armed once we sleep: the arm and
		 * the waiter come before this look), the others without waiting */
		np = 0;
		for (nfds_t i = 0; i < nfds; i++) {
			struct rs *rs = rsv[i];

			if (rs) {
				pthread_mutex_lock(&rs->lock);
				if (wfd >= 0 && rs->state == RS_CONN)
					ibv_req_notify_cq(rs->cq, 0);
				fds[i].revents = rs_revents(rs, fds[i].events);
				pthread_mutex_unlock(&rs->lock);
			} else {
				fds[i].revents = 0;
				pf[np++] = fds[i];
			}
		}
		if (np && poll(pf, np, 0) < 0) {
			err = errno;
			goto out;
		}
		np = 0;
		for (nfds_t i = 0; i < nfds; i++) {
			if (!rsv[i])
				fds[i].revents = pf[np++].revents;
			n += fds[i].revents != 0;
		}
		now = rs_now_ns();
		if (n || now >= end) {
			ret = n;
			goto out;
		}
		if (wfd < 0) {
			/* spin a little: a reply is often that close */
			if (now - start < RS_SPIN_NS) {
				sched_yield();
				continue;
			}
			/* then an eventfd of ours on each rsocket's list, and
			 * one more look before we sleep */
			wfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
			if (wfd < 0) {
				err = errno;
				goto out;
			}
			for (nfds_t i = 0; i < nfds; i++) {
				struct rs *rs = rsv[i];

				if (!rs)
					continue;
				pthread_mutex_lock(&rs->lock);
				wv[i] = (struct rs_waiter){ .fd = wfd, .next = rs->wl };
				rs->wl = &wv[i];
				pthread_mutex_unlock(&rs->lock);
			}
			continue;
		}
		/* sleep on each rsocket's completion and CM channels and our
		 * eventfd, beside the other descriptors */
		np = 0;
		for (nfds_t i = 0; i < nfds; i++) {
			struct rs *rs = rsv[i];

			if (!rs) {
				pf[np++] = fds[i];
				continue;
			}
			pthread_mutex_lock(&rs->lock);
			pf[np++] = (struct pollfd){ .fd = rs->cmch->fd, .events = POLLIN };
			if (rs->state == RS_CONN)
				pf[np++] = (struct pollfd){ .fd = rs->cch->fd, .events = POLLIN };
			pthread_mutex_unlock(&rs->lock);
		}
		pf[np++] = (struct pollfd){ .fd = wfd, .events = POLLIN };
		uint64_t left = end == UINT64_MAX ? 0 : (end - now + 999999ull) / 1000000ull;

		if (poll(pf, np, end == UINT64_MAX ? -1 : (int)(left > INT_MAX ? INT_MAX : left)) < 0) {
			err = errno;   /* EINTR too, as poll(2) */
			goto out;
		}
		{
			uint64_t v;

			if (read(wfd, &v, sizeof(v)) < 0) {
				/* nobody kicked */
			}
		}
		for (nfds_t i = 0; i < nfds; i++) {
			struct rs *rs = rsv[i];

			if (!rs)
				continue;
			pthread_mutex_lock(&rs->lock);
			rs_drain_events(rs);
			pthread_mutex_unlock(&rs->lock);
		}
	}
out:
	if (wfd >= 0) {
		for (nfds_t i = 0; i < nfds; i++) {
			struct rs *rs = rsv[i];

			if (!rs)
				continue;
			pthread_mutex_lock(&rs->lock);
			for (struct rs_waiter **pp = &rs->wl; *pp; pp = &(*pp)->next)
				if (*pp == &wv[i]) {
					*pp = wv[i].next;
					break;
				}
			pthread_mutex_unlock(&rs->lock);
		}
		close(wfd);
	}
	if (ret < 0)
		errno = err;
	return ret;
}

RS_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	struct rs_waiter *wv;
	struct pollfd *pf;
	struct rs **rsv;
	bool any = false;
	int ret, e;

	for (nfds_t i = 0; i < nfds && !any; i++)
		any = rs_is(fds[i].fd);
	if (!any)
		return poll(fds, nfds, timeout);
	/* the rsockets among fds (a closed one too: POLLNVAL), each with a
	 * reference for the whole call */
	rsv = calloc(nfds, sizeof(*rsv));
	wv = calloc(nfds, sizeof(*wv));
	pf = calloc(2 * nfds + 1, sizeof(*pf));
	if (!rsv || !wv || !pf) {
		free(rsv);
		free(wv);
		free(pf);
		return rs_fail(ENOMEM);
	}
	for (nfds_t i = 0; i < nfds; i++)
		rsv[i] = rs_ref(fds[i].fd, true);
	ret = rs_poll_set(fds, rsv, pf, wv, nfds, timeout);
	e = errno;
	for (nfds_t i = 0; i < nfds; i++)
		if (rsv[i])
			rs_put(rsv[i]);
	free(rsv);
	free(wv);
	free(pf);
	errno = e;
	return ret;
}

/* Wait until rs has one of events (the lock held on entry and return);
 * EBADF once it is closed. */
static int rs_wait(struct rs *rs, short events, int ms)
{
	struct pollfd p = { .fd = rs->fd, .events = events }, pf[3];
	struct rs_waiter w;
	int ret;

	pthread_mutex_unlock(&rs->lock);
	ret = rs_poll_set(&p, &rs, pf, &w, 1, ms);
	pthread_mutex_lock(&rs->lock);
	if (rs->closed)
		return EBADF;
	return ret < 0 ? errno : 0;
}

RS_EXPORT int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds,
		      struct timeval *timeout)
{
	struct pollfd *p;
	int n = 0, ret, ms;

	if (nfds < 0 || nfds > FD_SETSIZE)
		return rs_fail(EINVAL);
	if (timeout && (timeout->tv_sec < 0 || timeout->tv_usec < 0))
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
	if (timeout) {
		uint64_t t = (uint64_t)timeout->tv_sec * 1000u + ((uint64_t)timeout->tv_usec + 999) / 1000;

		ms = t > INT_MAX ? INT_MAX : (int)t;
	} else {
		ms = -1;
	}
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
	ret = rs_publish(rs);
	if (ret) {
		rs_free(rs);
		return rs_fail(ret);
	}
	return rs->fd;
}

RS_EXPORT int rbind(int s, const struct sockaddr *a, socklen_t l)
{
	struct rs *rs = rs_get(s);
	int ret;

	if (!rs)
		return -1;
	if (!a || (a->sa_family == AF_INET && l < sizeof(struct sockaddr_in)) ||
	    (a->sa_family == AF_INET6 && l < sizeof(struct sockaddr_in6)) || rs->state != RS_NEW)
		return rs_put_fail(rs, EINVAL);
	if (rs->v6only >= 0)
		rdma_set_option(rs->id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &rs->v6only,
				sizeof(rs->v6only));
	ret = rdma_bind_addr(rs->id, (struct sockaddr *)a);
	if (ret)
		return rs_put_fail(rs, errno);
	rs_put(rs);
	return 0;
}

RS_EXPORT int rlisten(int s, int backlog)
{
	struct rs *rs = rs_get(s);

	if (!rs)
		return -1;
	if (rs->state == RS_NEW) {
		if (rdma_listen(rs->id, backlog > 0 ? backlog : 1))
			return rs_put_fail(rs, errno);
		rs->state = RS_LISTEN;
	} else if (rs->state != RS_LISTEN) {
		return rs_put_fail(rs, EINVAL);
	}
	rs_put(rs);
	return 0;
}

/* The active side: resolve, set up, connect, wait for the answer. */
RS_EXPORT int rconnect(int s, const struct sockaddr *a, socklen_t l)
{
	struct rs *rs = rs_get(s);
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
		return rs_put_fail(rs, a ? EAFNOSUPPORT : EINVAL);
	pthread_mutex_lock(&rs->lock);
	if (rs->state != RS_NEW) {
		ret = rs->state == RS_CONN ? EISCONN : rs->state == RS_CONNECTING ? EALREADY : EINVAL;
		pthread_mutex_unlock(&rs->lock);
		return rs_put_fail(rs, ret);
	}
	/* the CM's exchange without the lock: the other calls see
	 * RS_CONNECTING (nothing to poll, ENOTCONN), rclose is seen within
	 * 100 ms (rs_cm_wait) */
	rs->state = RS_CONNECTING;
	pthread_mutex_unlock(&rs->lock);
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
	pthread_mutex_lock(&rs->lock);
	if (rs->closed) {
		pthread_mutex_unlock(&rs->lock);
		ret = EBADF;
		goto fail;
	}
	rs->state = RS_CONN;
	rs_kick(rs);
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return 0;
fail:
	/* the socket cannot be used again, as after a failed TCP connect */
	pthread_mutex_lock(&rs->lock);
	rs_free_qp(rs);
	rs->state = RS_DEAD;
	rs->err = ret;
	rs_kick(rs);
	pthread_mutex_unlock(&rs->lock);
	return rs_put_fail(rs, ret);
}

/* The next connection request on ls answered: a new rsocket in RS_CONN (its
 * RTU still to come), NULL and *err when none could be. */
static struct rs *rs_take_request(struct rs *ls, int *err)
{
	struct rdma_conn_param cp;
	struct rdma_cm_id *nid;
	struct rs_hello h;
	uint8_t pd[64], pd_len;
	struct rs *rs;
	int ret;

	for (;;) {
		/* a request the listener has taken in, else wait for one */
		pthread_mutex_lock(&ls->lock);
		rs_listen_pull(ls);
		if (ls->req_head == ls->req_tail) {
			bool nb = ls->fl & O_NONBLOCK;
			struct pollfd p = { .fd = ls->cmch->fd, .events = POLLIN };

			pthread_mutex_unlock(&ls->lock);
			if (nb) {
				*err = EAGAIN;
				return NULL;
			}
			if (__atomic_load_n(&ls->closed, __ATOMIC_ACQUIRE)) {
				*err = EBADF;
				return NULL;
			}
			if (poll(&p, 1, 100) < 0 && errno != EINTR) {   /* rclose seen within 100 ms */
				*err = errno;
				return NULL;
			}
			continue;
		}
		{
			struct rs_req *q = &ls->reqs[ls->req_head++ % RS_REQS];

			nid = q->id;
			pd_len = q->pd_len;
			memcpy(pd, q->pd, pd_len);
		}
		pthread_mutex_unlock(&ls->lock);
		rs = rs_alloc();
		if (!rs) {
			rdma_reject(nid, NULL, 0);
			rdma_destroy_id(nid);
			*err = ENOMEM;
			return NULL;
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
		/* the QP is ready to send and receive; ESTABLISHED (or the
		 * CM's CONNECT_ERROR for a peer that never confirms) comes on
		 * the new channel, taken in by rs_progress */
		rs->state = RS_CONN;
		return rs;
	}
}

RS_EXPORT int raccept(int s, struct sockaddr *a, socklen_t *l)
{
	struct rs *ls = rs_get(s), *rs;
	int ret = 0;

	if (!ls)
		return -1;
	if (ls->state != RS_LISTEN)
		return rs_put_fail(ls, EINVAL);
	rs = rs_take_request(ls, &ret);
	rs_put(ls);
	if (!rs)
		return rs_fail(ret);
	ret = rs_publish(rs);
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

static bool rs_nonblock(const struct rs *rs, int flags)
{
	return (rs->fl & O_NONBLOCK) || (flags & MSG_DONTWAIT);
}

RS_EXPORT ssize_t rsend(int s, const void *b, size_t n, int flags)
{
	struct rs *rs = rs_get(s);
	const uint8_t *p = b;
	size_t sent = 0;
	int e = 0;

	if (!rs)
		return -1;
	if (flags & ~(MSG_DONTWAIT | MSG_NOSIGNAL | MSG_MORE))
		return rs_put_fail(rs, EOPNOTSUPP);
	pthread_mutex_lock(&rs->lock);
	if (rs->state != RS_CONN) {
		pthread_mutex_unlock(&rs->lock);
		return rs_put_fail(rs, ENOTCONN);
	}
	while (sent < n) {
		rs_progress(rs, false);
		if (rs->broken || rs->tx_shut || rs->peer_gone) {
			/* EPIPE, as TCP's once the peer has closed (we do not
			 * raise SIGPIPE, as rsockets do not) */
			e = rs->tx_shut || rs->peer_gone || !rs->err ? EPIPE : rs->err;
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
	rs_put(rs);
	if (sent || !n)
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
		const struct rs_rx *x = &rs->rx[head % rs->nrq];
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
	struct rs *rs = rs_get(s);
	size_t got = 0;
	int e = 0;

	if (!rs)
		return -1;
	if (flags & ~(MSG_DONTWAIT | MSG_PEEK | MSG_WAITALL | MSG_NOSIGNAL))
		return rs_put_fail(rs, EOPNOTSUPP);
	pthread_mutex_lock(&rs->lock);
	if (rs->state != RS_CONN) {
		pthread_mutex_unlock(&rs->lock);
		return rs_put_fail(rs, ENOTCONN);
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
			/* a reset is an error; the peer's disconnect (with or
			 * without FIN, its flushes) the end of the stream */
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
	rs_put(rs);
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
	struct rs *rs = rs_get(s);

	if (!rs)
		return -1;
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
		return rs_put_fail(rs, EINVAL);
	pthread_mutex_lock(&rs->lock);
	if (rs->state != RS_CONN) {
		pthread_mutex_unlock(&rs->lock);
		return rs_put_fail(rs, ENOTCONN);
	}
	if (how != SHUT_WR)
		rs->rd_shut = true;
	if (how != SHUT_RD) {
		rs->tx_shut = true;
		rs_progress(rs, false);   /* FIN now if a credit is there, else later */
	}
	rs_kick(rs);   /* a reader gets its 0, a writer its EPIPE */
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return 0;
}

RS_EXPORT int rclose(int s)
{
	struct rs **p, *rs;

	/* marked closed: no new call takes it (EBADF, rpoll POLLNVAL), the
	 * calls inside end; the number stays in the table, and its
	 * descriptor open, until the last reference frees it */
	pthread_mutex_lock(&rs_tab_lock);
	p = rs_slot(s, false);
	rs = p ? *p : NULL;
	if (rs && __atomic_exchange_n(&rs->closed, true, __ATOMIC_ACQ_REL))
		rs = NULL;   /* closed already */
	if (rs)
		__atomic_add_fetch(&rs->ref, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&rs_tab_lock);
	if (!rs)
		return rs_fail(EBADF);
	pthread_mutex_lock(&rs->lock);
	rs_kick(rs);
	if (rs->state == RS_CONN) {
		uint64_t end = rs_now_ns() + RS_CLOSE_MS * 1000000ull;

		/* FIN after all we sent, and every SEND complete (in the
		 * peer's RECVs) before the QP goes */
		rs->tx_shut = true;
		for (;;) {
			rs_progress(rs, true);
			if (rs->broken || rs->peer_gone || (rs->fin_sent && !rs->sq_busy) ||
			    rs_now_ns() >= end)
				break;
			ibv_req_notify_cq(rs->cq, 0);
			rs_progress(rs, false);
			if (rs->fin_sent && !rs->sq_busy)
				break;
			pthread_mutex_unlock(&rs->lock);
			struct pollfd pw[2] = { { .fd = rs->cch->fd, .events = POLLIN },
						{ .fd = rs->cmch->fd, .events = POLLIN } };
			poll(pw, 2, 10);
			pthread_mutex_lock(&rs->lock);
			rs_drain_events(rs);
		}
		rdma_disconnect(rs->id);
	}
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);   /* ours */
	rs_put(rs);   /* the table's: the last call out frees it */
	return 0;
}

static struct sockaddr *rs_addr(struct rs *rs, bool peer)
{
	return peer ? rdma_get_peer_addr(rs->id) : rdma_get_local_addr(rs->id);
}

static int rs_name(int s, struct sockaddr *a, socklen_t *l, bool peer)
{
	struct rs *rs = rs_get(s);
	struct sockaddr *sa;
	socklen_t n;

	if (!rs)
		return -1;
	if (!l || (!a && *l))
		return rs_put_fail(rs, EFAULT);
	if (peer && rs->state != RS_CONN)
		return rs_put_fail(rs, ENOTCONN);
	sa = rs_addr(rs, peer);
	n = sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
	if (a)   /* librspreload asks the size alone (NULL, 0) */
		memcpy(a, sa, *l < n ? *l : n);
	*l = n;
	rs_put(rs);
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
	struct rs *rs = rs_get(s);
	int *o;

	if (!rs)
		return -1;
	if (level == SOL_SOCKET && name == SO_LINGER) {
		if (!v || l < sizeof(struct linger))
			return rs_put_fail(rs, EINVAL);
		memcpy(&rs->linger, v, sizeof(rs->linger));
		rs_put(rs);
		return 0;
	}
	o = rs_opt(rs, level, name);
	if (!o)
		return rs_put_fail(rs, ENOTSUP);
	if (!v || l < sizeof(int))
		return rs_put_fail(rs, EINVAL);
	pthread_mutex_lock(&rs->lock);
	memcpy(o, v, sizeof(int));
	if ((o == &rs->sndbuf || o == &rs->rcvbuf) && (*o < 0 || (unsigned)*o > RS_BUF_MAX))
		*o = *o < 0 ? 0 : (int)RS_BUF_MAX;
	if ((o == &rs->sqsize || o == &rs->rqsize) && (*o < 0 || (unsigned)*o > RS_SLOTS_MAX))
		*o = *o < 0 ? 0 : (int)RS_SLOTS_MAX;
	/* sizes count once the connection is set up; later ones are kept
	 * for getsockopt only */
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return 0;
}

RS_EXPORT int rgetsockopt(int s, int level, int name, void *v, socklen_t *l)
{
	struct rs *rs = rs_get(s);
	int val, *o;

	if (!rs)
		return -1;
	if (!v || !l)
		return rs_put_fail(rs, EFAULT);
	if (level == SOL_SOCKET && name == SO_LINGER) {
		if (*l < sizeof(struct linger))
			return rs_put_fail(rs, EINVAL);
		memcpy(v, &rs->linger, sizeof(rs->linger));
		*l = sizeof(struct linger);
		rs_put(rs);
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
		return rs_put_fail(rs, ENOTSUP);
	}
	pthread_mutex_unlock(&rs->lock);
	if (*l < sizeof(int))
		return rs_put_fail(rs, EINVAL);
	memcpy(v, &val, sizeof(int));
	*l = sizeof(int);
	rs_put(rs);
	return 0;
}

RS_EXPORT int rfcntl(int s, int cmd, ...)
{
	struct rs *rs = rs_get(s);
	va_list ap;
	int arg = 0, ret;

	if (!rs)
		return -1;
	if (cmd == F_SETFD || cmd == F_SETFL) {
		va_start(ap, cmd);
		arg = va_arg(ap, int);
		va_end(ap);
	}
	switch (cmd) {
	case F_GETFD:   /* close-on-exec: the descriptor's own */
		ret = fcntl(rs->fd, F_GETFD);
		break;
	case F_SETFD:
		ret = fcntl(rs->fd, F_SETFD, arg);
		break;
	case F_GETFL:
		ret = O_RDWR | rs->fl;
		break;
	case F_SETFL:
		rs->fl = arg & O_NONBLOCK;
		ret = 0;
		break;
	default:
		return rs_put_fail(rs, ENOTSUP);
	}
	rs_put(rs);
	return ret;
}

/* s is an rsocket, not closed (else errno EBADF) */
static bool rs_open(int s)
{
	struct rs *rs = rs_get(s);

	if (rs)
		rs_put(rs);
	return rs;
}

RS_EXPORT off_t riomap(int s, void *b, size_t n, int prot, int flags, off_t off)
{
	(void)b, (void)n, (void)prot, (void)flags, (void)off;
	return rs_open(s) ? rs_fail(ENOSYS) : -1;
}

RS_EXPORT int riounmap(int s, void *b, size_t n)
{
	(void)b, (void)n;
	return rs_open(s) ? rs_fail(EINVAL) : -1;
}

RS_EXPORT size_t riowrite(int s, const void *b, size_t n, off_t off, int flags)
{
	(void)b, (void)n, (void)off, (void)flags;
	errno = rs_open(s) ? ENOSYS : EBADF;
	return 0;
}
