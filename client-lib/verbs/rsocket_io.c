// SPDX-License-Identifier: MIT
/*
 * rsockets of libroshm-verbs: the data path (messages, credits, completions,
 * the CM's news), rpoll / rselect and the send and receive calls. The
 * protocol and the threads: rsocket.c.
 */
#define _GNU_SOURCE
#include "rsocket_int.h"

/* ------------------------------------------------------- the data path */

void rs_break(struct rs *rs, int e)
{
	if (!rs->broken) {
		rs->broken = true;
		rs->err = e;
	}
}

/* A message: DATA from a send slot (@len bytes of @data copied there),
 * CREDIT and FIN empty, IOMAP inline (its struct, from the caller). */
int rs_post_send(struct rs *rs, uint32_t type, const void *data, uint32_t len)
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
	if (len && type == RS_T_IOMAP) {
		sge = (struct ibv_sge){ .addr = (uintptr_t)data, .length = len };
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.send_flags |= IBV_SEND_INLINE;
	} else if (len) {
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

/* A riowrite may go: a free slot (an RDMA WRITE takes no RECV of the peer). */
bool rs_can_write(const struct rs *rs)
{
	return rs->state == RS_CONN && !rs->broken && !rs->tx_shut && !rs->peer_gone &&
	       rs->tx_head - rs->tx_tail < rs->ntx && rs->sq_busy < rs->sq_max;
}

/* A DATA message may go: a data credit, a free slot. */
static bool rs_can_send(const struct rs *rs)
{
	return rs_can_write(rs) && rs->credits;
}

/* An IOMAP may go (riomap): a control credit beyond the one kept for
 * CREDIT. Were the last one spent on IOMAP or FIN, two sides whose
 * messages crossed could each owe the other all its credits and have none
 * left to say so with. */
bool rs_can_ctrl(const struct rs *rs)
{
	return rs->state == RS_CONN && !rs->broken && !rs->tx_shut && !rs->peer_gone &&
	       rs->ctrl_credits >= 2 && rs->sq_busy < rs->sq_max;
}

/* FIN when asked for (a credit beyond CREDIT's, as IOMAP), credits when
 * half the data slots are owed: on control credits, which the peer's slots
 * full of data do not hold up. */
static void rs_ctrl(struct rs *rs)
{
	if (rs->state != RS_CONN || rs->broken || rs->peer_gone || !rs->ctrl_credits ||
	    rs->sq_busy >= rs->sq_max)
		return;
	if (rs->tx_shut && !rs->fin_sent && rs->ctrl_credits >= 2) {
		/* after the DATA before it, which the QP keeps in order */
		if (!rs_post_send(rs, RS_T_FIN, NULL, 0))
			rs->fin_sent = true;
		if (!rs->ctrl_credits || rs->sq_busy >= rs->sq_max)
			return;
	}
	/* data credits, or control credits the peer may be waiting for (a
	 * peer that only riomaps sends nothing else that returns them) */
	if ((rs->owed && rs->owed >= rs->nrx / 2) || rs->ctrl_owed >= RS_CTRL / 2)
		rs_post_send(rs, RS_T_CREDIT, NULL, 0);
}

static void rs_wc(struct rs *rs, const struct ibv_wc *wc)
{
	bool send = wc->wr_id >= RS_WR_DATA;
	struct rs_room room;
	struct rs_msg m;
	uint32_t type;

	if (send) {
		if (rs->sq_busy)
			rs->sq_busy--;
		if (wc->wr_id == RS_WR_DATA && rs->tx_tail != rs->tx_head)
			rs->tx_tail++;
	}
	if (wc->status != IBV_WC_SUCCESS) {
		if (send && wc->wr_id == RS_WR_DATA && wc->status != IBV_WC_WR_FLUSH_ERR)
			rs->data_failed = true;   /* riowrite says so (rsocket_iomap.c) */
		/* flushed after the peer left or we disconnected: no news */
		rs_break(rs, rs->peer_gone || rs->rx_fin ? EPIPE : ECONNRESET);
		return;
	}
	if (send || rs->broken)
		return;   /* nothing after a break reaches the stream */
	if (wc->wr_id >= rs->nrq || wc->opcode != IBV_WC_RECV || !(wc->wc_flags & IBV_WC_WITH_IMM)) {
		rs_break(rs, EPROTO);
		return;
	}
	room = (struct rs_room){ .data = rs->peer_nrx - rs->credits,
				 .ctrl = RS_CTRL - rs->ctrl_credits, .seg = rs->seg,
				 .fin = rs->rx_fin,
				 .rx_full = rs->rx_tail - rs->rx_head >= rs->nrx,
				 .ctrl_full = rs->ctrl_owed >= RS_CTRL };
	if (rs_msg_parse(ntohl(wc->imm_data), wc->byte_len, &room, &m)) {
		rs_break(rs, EPROTO);
		return;
	}
	type = m.type;
	rs->credits += m.data;
	rs->ctrl_credits += m.ctrl;
	if (type == RS_T_IOMAP) {
		/* a private copy of the peer's bytes, checked, then applied */
		struct rs_iomap im;

		if (rs_iomap_parse(rs->buf + (size_t)(rs->ntx + wc->wr_id) * rs->seg, wc->byte_len,
				   &im) || rs_iomap_apply(rs->rmap, &rs->nrmap, &im)) {
			rs_break(rs, EPROTO);
			return;
		}
	}
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
void rs_progress(struct rs *rs, bool cm)
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
void rs_listen_pull(struct rs *ls)
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
	if (rs->dg)
		return rs_dg_revents(rs, events);
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
		if (rs_can_write(rs) || rs->broken || rs->tx_shut || rs->peer_gone)
			r |= RS_EV_WRITE;
		if (rs_can_ctrl(rs) || rs->broken || rs->tx_shut || rs->peer_gone)
			r |= RS_EV_CTRL;
		if (rs->broken && rs->err != EPIPE)
			r |= POLLERR;
		/* a hang-up once nothing is left to read, as TCP and
		 * rdma-core report it: a peer that sent its last bytes and
		 * left at once must not look like a reset to a poller that
		 * takes POLLHUP for an error (rstream -T a does) */
		if ((rs->peer_gone || (rs->rx_fin && rs->tx_shut)) && !rs_rx_ready(rs))
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
void rs_drain_events(struct rs *rs)
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
				if (wfd >= 0 && rs->state == RS_CONN && rs->cq)
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
			if (rs->dg) {
				np += (nfds_t)rs_dg_pollfds(rs, &pf[np]);
				pthread_mutex_unlock(&rs->lock);
				continue;
			}
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
int rs_wait(struct rs *rs, short events, int ms)
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

static bool rs_nonblock(const struct rs *rs, int flags)
{
	return (rs->fl & O_NONBLOCK) || (flags & MSG_DONTWAIT);
}

/* Why nothing more can be sent, or 0: EPIPE, as TCP's once the peer has
 * closed (we do not raise SIGPIPE, as rsockets do not), or the break's. */
int rs_tx_err(const struct rs *rs)
{
	if (!rs->broken && !rs->tx_shut && !rs->peer_gone)
		return 0;
	return rs->tx_shut || rs->peer_gone || !rs->err ? EPIPE : rs->err;
}

/* A send that cannot go on yet: EAGAIN when it may not block, else wait
 * for @events (0, or why the wait ended). */
int rs_block(struct rs *rs, int flags, short events)
{
	return rs_nonblock(rs, flags) ? EAGAIN : rs_wait(rs, events, -1);
}

RS_EXPORT ssize_t rsend(int s, const void *b, size_t n, int flags)
{
	struct rs *rs = rs_get(s);
	const uint8_t *p = b;
	size_t sent = 0;
	int e = 0;

	if (!rs)
		return -1;
	if (rs->dg) {
		struct iovec v = { .iov_base = (void *)b, .iov_len = n };
		ssize_t r = rs_dg_send(rs, &v, 1, flags, NULL, 0);   /* the connected peer's */

		rs_put(rs);
		return r;
	}
	if (flags & ~(MSG_DONTWAIT | MSG_NOSIGNAL | MSG_MORE | MSG_WAITALL))   /* WAITALL: a blocking send sends it all */
		return rs_put_fail(rs, EOPNOTSUPP);
	pthread_mutex_lock(&rs->lock);
	if (rs->state != RS_CONN) {
		pthread_mutex_unlock(&rs->lock);
		return rs_put_fail(rs, ENOTCONN);
	}
	while (sent < n) {
		rs_progress(rs, false);
		if ((e = rs_tx_err(rs)))
			break;
		if (rs_can_send(rs)) {
			uint32_t len = rs->seg < rs->peer_seg ? rs->seg : rs->peer_seg;

			if (n - sent < len)
				len = (uint32_t)(n - sent);
			if (rs_post_send(rs, RS_T_DATA, p + sent, len))
				continue;   /* broken now */
			sent += len;
			continue;
		}
		if ((e = rs_block(rs, flags, POLLOUT)))
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
	if (rs->dg) {
		struct iovec v = { .iov_base = b, .iov_len = n };
		ssize_t r = rs_dg_recv(rs, &v, 1, flags, NULL, NULL, NULL);

		rs_put(rs);
		return r;
	}
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

/* A datagram rsocket's send or receive of a whole iovec into *@ret: true
 * when s is one (or no rsocket at all: -1, EBADF), false for a stream
 * rsocket, which the caller serves. */
static bool rs_dg_io(int s, const struct iovec *v, size_t n, int f, struct msghdr *m,
		     const struct sockaddr *to, socklen_t tolen, bool in, ssize_t *ret)
{
	struct rs *rs = rs_get(s);
	ssize_t r;

	if (!rs) {
		*ret = -1;
		return true;
	}
	if (!rs->dg) {
		rs_put(rs);
		return false;
	}
	if (n > IOV_MAX) {
		*ret = rs_put_fail(rs, EMSGSIZE);
		return true;
	}
	if (in) {
		int mf = 0;

		r = rs_dg_recv(rs, v, (int)n, f, m ? m->msg_name : NULL, m ? &m->msg_namelen : NULL,
			       &mf);
		if (m && r >= 0) {
			m->msg_flags = mf;
			m->msg_controllen = 0;
		}
	} else {
		r = rs_dg_send(rs, v, (int)n, f, to, tolen);
	}
	rs_put(rs);
	*ret = r;
	return true;
}

RS_EXPORT ssize_t rrecvfrom(int s, void *b, size_t n, int f, struct sockaddr *a, socklen_t *l)
{
	struct iovec v = { .iov_base = b, .iov_len = n };
	struct msghdr m = { .msg_name = a, .msg_namelen = l ? *l : 0 };
	ssize_t ret;

	if (rs_dg_io(s, &v, 1, f, a && l ? &m : NULL, NULL, 0, true, &ret)) {
		if (ret >= 0 && a && l)
			*l = m.msg_namelen;
		return ret;
	}
	ret = rrecv(s, b, n, f);

	if (ret >= 0 && a && l)
		*l = 0;   /* a stream socket names no source */
	return ret;
}

RS_EXPORT ssize_t rsendto(int s, const void *b, size_t n, int f, const struct sockaddr *a,
			  socklen_t l)
{
	struct iovec v = { .iov_base = (void *)b, .iov_len = n };
	ssize_t ret;

	if (rs_dg_io(s, &v, 1, f, NULL, a, l, false, &ret))
		return ret;
	return rsend(s, b, n, f);   /* connected: the address is ignored, as TCP does */
}

/* The parts of an iovec in turn, up to the first that goes short; a
 * receive's first part may wait, the rest only take what is there. */
static ssize_t rs_iov(int s, const struct iovec *v, size_t n, int f, bool in)
{
	ssize_t total = 0;

	for (size_t i = 0; i < n; i++) {
		ssize_t r;

		if (!v[i].iov_len)
			continue;
		r = in ? rrecv(s, v[i].iov_base, v[i].iov_len,
			       total ? (f | MSG_DONTWAIT) & ~MSG_WAITALL : f)
		       : rsend(s, v[i].iov_base, v[i].iov_len, f);
		if (r < 0)
			return total ? total : r;
		total += r;
		if ((size_t)r < v[i].iov_len)
			break;
	}
	return total;
}

RS_EXPORT ssize_t rsendmsg(int s, const struct msghdr *m, int f)
{
	ssize_t ret;

	if (!m)
		return rs_fail(EINVAL);
	if (rs_dg_io(s, m->msg_iov, m->msg_iovlen, f, NULL, m->msg_name, m->msg_namelen, false, &ret))
		return ret;
	return rs_iov(s, m->msg_iov, m->msg_iovlen, f, false);
}

RS_EXPORT ssize_t rrecvmsg(int s, struct msghdr *m, int f)
{
	ssize_t total;

	if (!m)
		return rs_fail(EINVAL);
	if (rs_dg_io(s, m->msg_iov, m->msg_iovlen, f, m, NULL, 0, true, &total))
		return total;
	total = rs_iov(s, m->msg_iov, m->msg_iovlen, f, true);
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
