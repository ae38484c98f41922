// SPDX-License-Identifier: MIT
/*
 * libroshm-verbs: CQs and completion channels.
 *
 * A CQ is a ring of ibv_wc filled by the send engine (qp.c) and the receive
 * side (recv.c) when the application polls, posts, or the notifier runs.
 * ibv_req_notify_cq arms the CQ: the next completion added to it writes one
 * event into its channel (an eventfd in semaphore mode, so the channel's fd
 * polls readable while events are unread, and one read takes one event) and
 * queues the CQ for ibv_get_cq_event. solicited_only arms for every
 * completion (more events than asked, never fewer).
 *
 * Completions only come into being when this library runs, so while a CQ
 * is armed a notifier thread (one per context, started by the first
 * ibv_req_notify_cq or post, all signals blocked) drives progress for an
 * application that sleeps in ibv_get_cq_event or poll(): it sleeps on
 * roshmd's CQ wakeup (the channel's NEED_WAKEUP protocol, as in
 * roshm_wait_cqe) and, while an armed receive CQ has a RECV posted, looks at
 * the inbound rings every 20 us to 1 ms (backing off while nothing comes):
 * a peer's fragment lands by roshmd's WRITE, which wakes nobody.
 *
 * A NIC also moves posted work on while nobody polls: a datagram whose slot
 * is still to be claimed, a message waiting for room in the peer's ring, a
 * message arriving for a posted RECV. Here that takes a call into this
 * library, and an application may post and then wait elsewhere (fi_pingpong
 * injects its last datagram unsignaled and reads its control socket). So
 * while WRs are outstanding or RECVs posted, the notifier looks every
 * RV_GUARD_NS whether the application still polls (backing off to
 * RV_GUARD_MAX_NS while it does); when it has not since the last look, the
 * notifier drives progress itself as for an armed CQ until it polls again.
 * A polling application pays one wakeup of this thread per RV_GUARD_MAX_NS,
 * roshmd nothing.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rv.h"

#define RV_BACKOFF_MIN_NS 20000ull
#define RV_BACKOFF_MAX_NS 1000000ull
#define RV_IDLE_MAX_NS 100000000ull     /* a lost wakeup costs at most this */
#define RV_GUARD_NS 5000000ull          /* how often it looks whether the application polls */
#define RV_GUARD_MAX_NS 80000000ull     /* ... backing off to this while it does */

RV_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *ctx)
{
	struct rv_chan *ch = calloc(1, sizeof(*ch));

	if (!ch) {
		errno = ENOMEM;
		return NULL;
	}
	ch->ch.context = ctx;
	ch->ch.fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	if (ch->ch.fd < 0) {
		free(ch);
		return NULL;
	}
	pthread_mutex_init(&ch->lock, NULL);
	return &ch->ch;
}

RV_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct rv_chan *ch = (struct rv_chan *)channel;
	struct rv_ctx *c = to_ctx(channel->context);

	rv_lock(c);
	if (channel->refcnt) {
		rv_unlock(c);
		return EBUSY;   /* CQs still use it */
	}
	rv_unlock(c);
	close(channel->fd);
	pthread_mutex_destroy(&ch->lock);
	free(ch);
	return 0;
}

RV_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
				       struct ibv_comp_channel *channel, int comp_vector)
{
	struct rv_ctx *c = to_ctx(ctx);
	struct rv_cq *q;
	uint32_t n = 1024;

	(void)comp_vector;
	if (cqe < 1 || cqe > RV_MAX_CQE) {
		errno = EINVAL;
		return NULL;
	}
	while (n < 2u * (uint32_t)cqe)
		n <<= 1;
	q = calloc(1, sizeof(*q));
	if (q)
		q->wc = calloc(n, sizeof(*q->wc));
	if (!q || !q->wc) {
		free(q);
		errno = ENOMEM;
		return NULL;
	}
	q->mask = n - 1;
	q->cq.context = ctx;
	q->cq.channel = channel;
	q->cq.cq_context = cq_context;
	q->cq.cqe = cqe;
	pthread_mutex_init(&q->cq.mutex, NULL);
	pthread_cond_init(&q->cq.cond, NULL);
	rv_lock(c);
	if (channel)
		channel->refcnt++;
	q->next = c->cqs;
	c->cqs = q;
	rv_unlock(c);
	return &q->cq;
}

/* A CQ of another size: it must still hold what it holds (else EINVAL). */
RV_EXPORT int ibv_resize_cq(struct ibv_cq *cq, int cqe)
{
	struct rv_cq *q = (struct rv_cq *)cq;
	struct rv_ctx *c = to_ctx(cq->context);
	struct ibv_wc *wc;
	uint64_t *ts = NULL;
	uint32_t n = 1024, held;

	if (cqe < 1 || cqe > RV_MAX_CQE)
		return EINVAL;
	while (n < 2u * (uint32_t)cqe)
		n <<= 1;
	wc = calloc(n, sizeof(*wc));
	if (wc && q->ts && !(ts = calloc(n, sizeof(*ts)))) {
		free(wc);
		wc = NULL;
	}
	if (!wc)
		return ENOMEM;
	rv_lock(c);
	held = q->tail - q->head;
	if (held > (uint32_t)cqe) {
		rv_unlock(c);
		free(wc);
		free(ts);
		return EINVAL;
	}
	for (uint32_t i = 0; i < held; i++) {
		wc[i] = q->wc[(q->head + i) & q->mask];
		if (ts)
			ts[i] = q->ts[(q->head + i) & q->mask];
	}
	free(q->wc);
	q->wc = wc;
	if (ts) {
		free(q->ts);
		q->ts = ts;
	}
	q->mask = n - 1;
	q->head = 0;
	q->tail = held;
	cq->cqe = cqe;
	rv_unlock(c);
	return 0;
}

/* Take @q off its channel's queue with its untaken events, and their counts
 * on the fd; whether it had any. Channel lock held. */
static bool unqueue(struct rv_chan *ch, struct rv_cq *q)
{
	struct rv_cq **ep;
	bool any = q->ev_pending;

	for (ep = &ch->first; *ep && *ep != q; ep = &(*ep)->ev_next)
		;
	if (!*ep)
		return false;
	*ep = q->ev_next;
	if (ch->last == q) {
		ch->last = NULL;
		for (struct rv_cq *e = ch->first; e; e = e->ev_next)
			ch->last = e;
	}
	for (; q->ev_pending; q->ev_pending--)
		rv_fd_take(ch->ch.fd, &ch->owed);
	q->queued = false;
	q->ev_next = NULL;
	return any;
}

RV_EXPORT int ibv_destroy_cq(struct ibv_cq *cq)
{
	struct rv_cq *q = (struct rv_cq *)cq, **pp;
	struct rv_ctx *c = to_ctx(cq->context);
	struct rv_chan *ch = (struct rv_chan *)cq->channel;
	uint32_t reported;

	rv_lock(c);
	for (struct rv_qp *qp = c->qps; qp; qp = qp->next)
		if (qp->qp.send_cq == cq || qp->qp.recv_cq == cq) {
			rv_unlock(c);
			return EBUSY;
		}
	for (struct rv_srq *s = c->srqs; s; s = s->next)
		if (s->cq == cq) {   /* an XRC SRQ's (xrc.c) */
			rv_unlock(c);
			return EBUSY;
		}
	for (pp = &c->cqs; *pp && *pp != q; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = q->next;
	if (ch) {
		pthread_mutex_lock(&ch->lock);
		unqueue(ch, q);   /* its untaken events go */
		pthread_mutex_unlock(&ch->lock);
		ch->ch.refcnt--;
	}
	rv_async_forget(c, q);
	rv_unlock(c);
	/* as rdma-core: every event given out acked first, completion events
	 * (ibv_ack_cq_events) and async ones */
	if (ch) {
		pthread_mutex_lock(&ch->lock);
		reported = q->ev_reported;
		pthread_mutex_unlock(&ch->lock);
		rv_async_settle(&cq->mutex, &cq->cond, &cq->comp_events_completed, reported);
	}
	rv_async_settle(&cq->mutex, &cq->cond, &cq->async_events_completed, q->aev_reported);
	pthread_cond_destroy(&cq->cond);
	pthread_mutex_destroy(&cq->mutex);
	free(q->wc);
	free(q->ts);
	free(q);
	return 0;
}

/* One event for an armed CQ: queue it on its channel, make the fd readable. */
static void fire(struct rv_cq *q)
{
	struct rv_chan *ch = (struct rv_chan *)q->cq.channel;
	uint64_t one = 1;
	ssize_t w;

	if (!ch)
		return;
	pthread_mutex_lock(&ch->lock);
	q->ev_pending++;
	if (!q->queued) {
		q->queued = true;
		q->ev_next = NULL;
		if (ch->last)
			ch->last->ev_next = q;
		else
			ch->first = q;
		ch->last = q;
	}
	/* under the lock: the fd counts exactly the events queued */
	w = write(ch->ch.fd, &one, sizeof(one));
	(void)w;   /* an eventfd counter does not overflow at our rates */
	pthread_mutex_unlock(&ch->lock);
}

/* Other CQs use @q's channel too (refcnt: its CQs; context lock held). */
static bool chan_shared(const struct rv_cq *q)
{
	return q->cq.channel && q->cq.channel->refcnt > 1;
}

void rv_cq_push(struct ibv_cq *cq, const struct ibv_wc *wc)
{
	struct rv_cq *q = (struct rv_cq *)cq;

	if (q->tail - q->head > q->mask) {
		if (!q->overrun)
			rv_async_push(to_ctx(cq->context), IBV_EVENT_CQ_ERR, q);
		q->overrun = true;
		return;
	}
	if (q->ts)
		q->ts[q->tail & q->mask] = rv_now_ns();
	q->wc[q->tail++ & q->mask] = *wc;
	to_ctx(cq->context)->pushes++;
	if (q->armed) {
		if (q->in_poll && !chan_shared(q)) {
			q->deferred = true;   /* the poll may hand it over: settled at its end */
		} else {
			q->armed = false;
			fire(q);
		}
	}
}

/*
 * The end of an application's poll. An event for completions the
 * application now has in hand would wake it to an empty CQ (which
 * ibv_rc_pingpong -t -e takes for a failure; on a NIC it takes a completion
 * between the re-arm and the poll, here the notifier adds completions while
 * the application polls). So, for a CQ alone on its channel: completions
 * this poll added to it while armed fire their event only if some are still
 * in the CQ; and when the poll leaves the CQ empty, events still queued for
 * it (nobody took them yet) are withdrawn and the CQ is armed again, as if
 * its completions had come in this poll.
 *
 * Not when other CQs share the channel (chan_shared): there an application
 * may take any CQ's event as the token for a poll of another, as perftest
 * 4.5's latency tests do with -e (one channel for the send and the receive
 * CQ: take an event, re-arm its CQ, poll the receive CQ once; likewise for
 * the send CQ). Were the send CQ's event withdrawn (or never fired) after
 * the receive CQ's event was taken for the send CQ's poll, the receive CQ's
 * completion would wait with no event left for it and both sides would
 * sleep for good. So every completion into an armed CQ fires, as on a NIC.
 * Context lock held.
 */
static void poll_settle(struct rv_cq *q)
{
	struct rv_chan *ch = (struct rv_chan *)q->cq.channel;
	bool deferred = q->deferred;

	q->deferred = false;
	/* deferred from before another CQ came onto the channel: fire */
	if (deferred && q->armed && (q->head != q->tail || chan_shared(q))) {
		q->armed = false;
		fire(q);
		return;
	}
	if (q->head != q->tail || q->armed || !ch || chan_shared(q))
		return;
	pthread_mutex_lock(&ch->lock);
	if (q->queued && unqueue(ch, q))
		q->armed = true;
	pthread_mutex_unlock(&ch->lock);
}

void rv_poll_cq_end(struct ibv_cq *cq)
{
	struct rv_ctx *c = to_ctx(cq->context);

	rv_lock(c);
	poll_settle((struct rv_cq *)cq);
	rv_unlock(c);
}

/* ibv_poll_cq; with @ts, at most one, and its timestamp (cq_ex.c); @hold:
 * the poll goes on (ibv_start_poll to ibv_end_poll), rv_poll_cq_end
 * settles its events unless the CQ is empty now */
int rv_poll_cq_ts(struct ibv_cq *cq, int n, struct ibv_wc *wc, uint64_t *ts, bool hold)
{
	struct rv_cq *q = (struct rv_cq *)cq;
	struct rv_ctx *c = to_ctx(cq->context);
	int got = 0;

	rv_lock(c);
	q->polls++;
	q->in_poll = true;
	rv_progress(c);
	rv_deliver_each(c, cq, NULL);
	rv_grant_drops(c);
	q->in_poll = false;
	if (q->overrun && q->head == q->tail) {
		poll_settle(q);
		rv_unlock(c);
		return -1;
	}
	if (ts && q->head != q->tail) {
		*ts = q->ts ? q->ts[q->head & q->mask] : 0;
		n = 1;
	}
	while (got < n && q->head != q->tail)
		wc[got++] = q->wc[q->head++ & q->mask];
	if (!hold || q->head == q->tail)
		poll_settle(q);
	rv_unlock(c);
	if (!got && c->yield)
		sched_yield();
	return got;
}

int rv_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	return rv_poll_cq_ts(cq, n, wc, NULL, false);
}

static void *notifier(void *arg);

/* Start the notifier with every signal blocked: an application's signals
 * (qperf's SIGALRM ends a test) must reach its own threads. */
static int notifier_start(struct rv_ctx *c)
{
	sigset_t all, old;
	int ret;

	c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->wake_fd < 0)
		return errno;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = pthread_create(&c->thr, NULL, notifier, c);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret) {
		close(c->wake_fd);
		c->wake_fd = -1;
		return ret;
	}
	c->thr_on = true;
	return 0;
}

static void kick(struct rv_ctx *c)
{
	uint64_t one = 1;
	ssize_t w = write(c->wake_fd, &one, sizeof(one));

	(void)w;
}

/* A RECV was posted or the QP connected: if the notifier sleeps without a
 * timer, or without watching the rings while this QP's receive CQ is armed,
 * it must look (RECVs are often posted before the QP reaches RTR). */
void rv_notify_recv(struct rv_ctx *c, struct rv_qp *q)
{
	if (!c->thr_on || !rv_ring_ready(q))
		return;
	const struct rv_cq *rq = (const struct rv_cq *)q->qp.recv_cq;

	/* XRC_RECV: the CQs of its domain's SRQs */
	if (c->idle_sleep || (!c->watching && (q->xrcd ? rv_xrc_watch(q, true) : rq && rq->armed))) {
		c->idle_sleep = false;
		kick(c);
	}
}

/*
 * fork(): the child gets each context's lock as the parent's threads left
 * it (the notifier may hold one), and no notifier. The child re-makes the
 * locks and forgets the thread; should it use a context, a post starts a
 * notifier of its own. Only the list's lock is held across fork (nothing
 * waits for another lock while holding it); taking the contexts' locks
 * there could wait on a thread that waits on another library's fork lock.
 */
static struct rv_ctx *live;
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t live_once = PTHREAD_ONCE_INIT;

static void live_prepare(void)
{
	pthread_mutex_lock(&live_lock);
	rv_qpn_fork_prepare();
}

static void live_parent(void)
{
	rv_qpn_fork_parent();
	pthread_mutex_unlock(&live_lock);
}

static void live_child(void)
{
	for (struct rv_ctx *c = live; c; c = c->live_next) {
		if (c->thr_on) {   /* the thread stayed with the parent */
			close(c->wake_fd);
			c->wake_fd = -1;
			c->thr_on = false;
		}
		c->stop = false;
		c->idle_sleep = false;
		c->watching = false;
		pthread_mutex_init(&c->lock, NULL);
	}
	pthread_mutex_init(&live_lock, NULL);
	rv_qpn_fork_child();
}

static void live_install(void)
{
	pthread_atfork(live_prepare, live_parent, live_child);
}

/*
 * Unloaded (dlclose: Open MPI closes its components at MPI_Finalize, and
 * libfabric with them, and this library with it, contexts still open) or
 * exit(): no notifier may run this library's code any more. Each is told
 * to stop and joined without taking a context's lock (exit() may come from
 * a signal handler of a thread that holds one: the notifier leaves
 * without it), waiting at most 1 s; none starts again.
 */
__attribute__((destructor)) static void live_unload(void)
{
	bool held = false;

	for (int i = 0; i < 100 && !(held = !pthread_mutex_trylock(&live_lock)); i++)
		usleep(1000);   /* held across an open, a close or a fork: not for long */
	for (struct rv_ctx *c = live; c; c = c->live_next) {
		struct timespec t;

		__atomic_store_n(&c->no_thread, true, __ATOMIC_RELAXED);
		if (!__atomic_load_n(&c->thr_on, __ATOMIC_ACQUIRE))
			continue;
		__atomic_store_n(&c->stop, true, __ATOMIC_RELEASE);
		kick(c);
		clock_gettime(CLOCK_REALTIME, &t);
		t.tv_sec += 1;
		if (!pthread_timedjoin_np(c->thr, NULL, &t)) {
			close(c->wake_fd);
			c->wake_fd = -1;
			c->thr_on = false;
		}
	}
	if (held)
		pthread_mutex_unlock(&live_lock);
}

void rv_ctx_track(struct rv_ctx *c)
{
	pthread_once(&live_once, live_install);
	pthread_mutex_lock(&live_lock);
	c->live_next = live;
	live = c;
	pthread_mutex_unlock(&live_lock);
}

void rv_ctx_untrack(struct rv_ctx *c)
{
	pthread_mutex_lock(&live_lock);
	for (struct rv_ctx **pp = &live; *pp; pp = &(*pp)->live_next)
		if (*pp == c) {
			*pp = c->live_next;
			break;
		}
	pthread_mutex_unlock(&live_lock);
}

/* Work was posted: the notifier must be there to move it on should the
 * application stop calling in. Started at the first post (a failure to
 * start leaves progress to the application, as before); kicked only out of
 * a sleep without a timer, once. */
void rv_guard(struct rv_ctx *c)
{
	if (!c->thr_on) {
		if (!c->no_thread && notifier_start(c))
			c->no_thread = true;
		return;
	}
	if (c->idle_sleep) {
		c->idle_sleep = false;
		kick(c);
	}
}

int rv_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	struct rv_cq *q = (struct rv_cq *)cq;
	struct rv_ctx *c = to_ctx(cq->context);
	int ret = 0;

	(void)solicited_only;
	rv_lock(c);
	if (!c->thr_on)
		ret = c->no_thread ? EIO : notifier_start(c);
	if (!ret) {
		/* "an event for the next completion added": what is done by
		 * now (in roshmd, in the rings) is added first, without one,
		 * as a NIC would have added it already */
		rv_progress(c);
		rv_deliver_each(c, cq, NULL);
		rv_grant_drops(c);
		q->armed = true;
		kick(c);
	}
	rv_unlock(c);
	return ret;
}

void rv_notifier_stop(struct rv_ctx *c)
{
	rv_lock(c);
	if (!c->thr_on) {
		rv_unlock(c);
		return;
	}
	__atomic_store_n(&c->stop, true, __ATOMIC_RELEASE);
	kick(c);
	rv_unlock(c);
	pthread_join(c->thr, NULL);
	rv_lock(c);
	close(c->wake_fd);
	c->wake_fd = -1;
	c->thr_on = false;
	c->stop = false;
	rv_unlock(c);
}

RV_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq,
			       void **cq_context)
{
	struct rv_chan *ch = (struct rv_chan *)channel;
	struct rv_cq *q;

	/* The count is read with its event, under the channel's lock (a
	 * destroyed CQ's untaken events took theirs). Without one: wait in
	 * read(2) on the fd (rv_fd_wait): EAGAIN when the application made it
	 * non-blocking, EINTR on a signal unless its handler has SA_RESTART,
	 * as the kernel's channel does. */
	for (;;) {
		pthread_mutex_lock(&ch->lock);
		if (ch->first)
			break;
		pthread_mutex_unlock(&ch->lock);
		if (rv_fd_wait(channel->fd))
			return -1;
		pthread_mutex_lock(&ch->lock);
		rv_fd_back(channel->fd, &ch->owed);
		pthread_mutex_unlock(&ch->lock);
	}
	rv_fd_take(channel->fd, &ch->owed);
	q = ch->first;
	q->ev_reported++;
	if (!--q->ev_pending) {
		ch->first = q->ev_next;
		if (!ch->first)
			ch->last = NULL;
		q->queued = false;
		q->ev_next = NULL;
	}
	pthread_mutex_unlock(&ch->lock);
	*cq = &q->cq;
	*cq_context = q->cq.cq_context;
	return 0;
}

RV_EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_signal(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}

static void drain(int fd, bool sock)
{
	char buf[64];
	ssize_t n;

	do
		n = sock ? recv(fd, buf, sizeof(buf), MSG_DONTWAIT) : read(fd, buf, sizeof(buf));
	while (n > 0 && sock);
}

/*
 * The notifier: while some CQ is armed, or the application has stopped
 * polling with work outstanding, do what a poll would (reap, issue,
 * deliver), then sleep until roshmd posts a completion, the application
 * arms or stops, an RNR timer runs out, or (a ring with RECVs whose receive
 * CQ is armed or not polled) the next look at the rings is due. While the
 * application polls with work outstanding, it only looks every RV_GUARD_NS
 * (backing off to RV_GUARD_MAX_NS) whether it still does. With nothing to do it sleeps until it is kicked.
 */
static void *notifier(void *arg)
{
	struct rv_ctx *c = arg;
	uint64_t backoff = RV_BACKOFF_MIN_NS, look_ns = 0, guard = RV_GUARD_NS;
	bool was_armed = false;

	rv_lock(c);
	while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) {
		bool armed = false, polling = false, watch = false, pending = false, wake;
		uint64_t now = rv_now_ns(), wait_ns = RV_IDLE_MAX_NS, rnr_at = 0, pushes;
		bool fresh = now - look_ns >= guard;
		struct pollfd pfd[2];
		struct timespec ts;
		struct roshm *r = c->r;

		/* which CQs the application polled, judged once per guard
		 * period (RV_GUARD_NS, backing off to RV_GUARD_MAX_NS while it
		 * polls all it needs to; a poll reaps and issues for every QP, but
		 * delivers only to the QPs whose receive CQ it polls); a new
		 * CQ counts as polled until then */
		if (fresh)
			look_ns = now;
		for (struct rv_cq *q = c->cqs; q; q = q->next) {
			armed |= q->armed;
			if (fresh || !q->looked) {
				q->served = q->polls != q->polls_seen || !q->looked;
				q->polls_seen = q->polls;
				q->looked = true;
			}
			polling |= q->served;
		}
		if (armed && !was_armed)
			backoff = RV_BACKOFF_MIN_NS;   /* a waiter now: look soon */
		was_armed = armed;
		for (struct rv_qp *q = c->qps; q; q = q->next) {
			const struct rv_cq *rq = (const struct rv_cq *)q->qp.recv_cq;
			bool ready = rv_ring_ready(q);

			/* XRC_RECV: the CQs of its domain's SRQs */
			if (ready && (q->xrcd ? rv_xrc_watch(q, false) : rq && (rq->armed || !rq->served)))
				watch = true;   /* nobody else looks at its ring */
			if (ready || q->head != q->tail)
				pending = true;
		}
		/* sends: reap and issue when nobody polls; receives: deliver
		 * to the rings nobody polls for */
		wake = armed || (pending && !polling);
		/* the application polls all it needs to: look less often (its
		 * wakeups cost it a CPU switch each); else soon again */
		if (wake || watch || !pending)
			guard = RV_GUARD_NS;
		else if (fresh)
			guard = guard * 2 > RV_GUARD_MAX_NS ? RV_GUARD_MAX_NS : guard * 2;
		pushes = c->pushes;
		if (wake || watch) {
			rv_progress(c);
			rv_deliver_each(c, NULL, NULL);
			rv_grant_drops(c);
		}
		if (c->pushes != pushes)
			backoff = RV_BACKOFF_MIN_NS;   /* completions of ours: more may come */
		/* the RNR and UD deadlines as they are after that progress (it
		 * sets them: a message parked for credits, a datagram for its
		 * lookup) */
		for (struct rv_qp *q = c->qps; q; q = q->next)
			if (q->want && q->rnr_next_ns && (!rnr_at || q->rnr_next_ns < rnr_at))
				rnr_at = q->rnr_next_ns;
		now = rv_now_ns();
		c->watching = watch;
		/* no timer of its own for posted work (none was pending): the
		 * next post kicks it, armed or not (a WR parked at its post,
		 * for ring credits or a lookup, wakes nobody in roshmd) */
		c->idle_sleep = !pending;
		pfd[0] = (struct pollfd){ .fd = c->wake_fd, .events = POLLIN };
		pfd[1] = (struct pollfd){ .fd = r->cq_event_fd, .events = POLLIN };
		if (pending)
			wait_ns = guard;   /* then look again whether the application polls */
		if (wake) {
			/* roshmd's next completion wakes us: W2 of
			 * roshm_wait_cqe: flag, full fence, one more look */
			__atomic_store_n(r->cq.kflags, ROSHM_CQ_NEED_WAKEUP, __ATOMIC_RELAXED);
			__atomic_thread_fence(__ATOMIC_SEQ_CST);
			if (__atomic_load_n(r->cq.ktail, __ATOMIC_ACQUIRE) != *r->cq.khead) {
				__atomic_store_n(r->cq.kflags, 0, __ATOMIC_RELAXED);
				/* let a caller that waits for the lock in */
				rv_unlock(c);
				sched_yield();
				rv_lock(c);
				continue;
			}
			if (rnr_at)
				wait_ns = rnr_at <= now ? 0 : rnr_at - now < wait_ns ? rnr_at - now : wait_ns;
		}
		if (watch) {
			/* a peer's fragment lands by roshmd's WRITE, which wakes
			 * nobody: look again, backing off to 1 ms for an armed
			 * CQ's waiter, to the guard's period otherwise */
			uint64_t most = armed ? RV_BACKOFF_MAX_NS : RV_GUARD_NS;

			if (backoff < wait_ns)
				wait_ns = backoff;
			backoff = backoff * 2 > most ? most : backoff * 2;
		}
		ts.tv_sec = (time_t)(wait_ns / 1000000000ull);
		ts.tv_nsec = (long)(wait_ns % 1000000000ull);
		rv_unlock(c);
		if (ppoll(pfd, wake ? 2 : 1, wake || watch || pending ? &ts : NULL, NULL) > 0) {
			if (pfd[0].revents & POLLIN)
				drain(c->wake_fd, false);
			if (wake && (pfd[1].revents & POLLIN))
				drain(pfd[1].fd, true);
		}
		if (__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE))
			return NULL;   /* the lock may be held for good (live_unload) */
		rv_lock(c);
		c->idle_sleep = false;
		__atomic_store_n(r->cq.kflags, 0, __ATOMIC_RELAXED);
	}
	rv_unlock(c);
	return NULL;
}

RV_EXPORT const char *ibv_wc_status_str(enum ibv_wc_status status)
{
	static const char *const str[] = {
		[IBV_WC_SUCCESS] = "success",
		[IBV_WC_LOC_LEN_ERR] = "local length error",
		[IBV_WC_LOC_QP_OP_ERR] = "local QP operation error",
		[IBV_WC_LOC_EEC_OP_ERR] = "local EE context operation error",
		[IBV_WC_LOC_PROT_ERR] = "local protection error",
		[IBV_WC_WR_FLUSH_ERR] = "Work Request Flushed Error",
		[IBV_WC_MW_BIND_ERR] = "memory management operation error",
		[IBV_WC_BAD_RESP_ERR] = "bad response error",
		[IBV_WC_LOC_ACCESS_ERR] = "local access error",
		[IBV_WC_REM_INV_REQ_ERR] = "remote invalid request error",
		[IBV_WC_REM_ACCESS_ERR] = "remote access error",
		[IBV_WC_REM_OP_ERR] = "remote operation error",
		[IBV_WC_RETRY_EXC_ERR] = "transport retry counter exceeded",
		[IBV_WC_RNR_RETRY_EXC_ERR] = "RNR retry counter exceeded",
		[IBV_WC_LOC_RDD_VIOL_ERR] = "local RDD violation error",
		[IBV_WC_REM_INV_RD_REQ_ERR] = "remote invalid RD request",
		[IBV_WC_REM_ABORT_ERR] = "aborted error",
		[IBV_WC_INV_EECN_ERR] = "invalid EE context number",
		[IBV_WC_INV_EEC_STATE_ERR] = "invalid EE context state",
		[IBV_WC_FATAL_ERR] = "fatal error",
		[IBV_WC_RESP_TIMEOUT_ERR] = "response timeout error",
		[IBV_WC_GENERAL_ERR] = "general error",
		[IBV_WC_TM_ERR] = "TM error",
		[IBV_WC_TM_RNDV_INCOMPLETE] = "TM software rendezvous",
	};

	if ((unsigned)status < sizeof(str) / sizeof(str[0]) && str[status])
		return str[status];
	return "unknown";
}
