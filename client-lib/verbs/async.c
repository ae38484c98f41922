// SPDX-License-Identifier: MIT
/*
 * libroshm-verbs: the device's asynchronous events (ibv_get_async_event,
 * ibv_ack_async_event) and the small helpers of libibverbs' public API that
 * need no device (strings, rates; fork support: fork.c).
 *
 * Events are queued on the context (under its lock, by the code that finds
 * the condition) and the context's async_fd, an eventfd in semaphore mode,
 * gets one count per event: it poll()s readable while an event waits, and
 * ibv_get_async_event blocks on it unless the application made it
 * non-blocking (then EAGAIN), as on the kernel's fd. What roshm0 raises:
 *   IBV_EVENT_QP_LAST_WQE_REACHED  a QP on an SRQ went to the error state
 *                                  (by ibv_modify_qp or by a failure): it
 *                                  takes no more RECVs from the SRQ
 *   IBV_EVENT_SRQ_LIMIT_REACHED    an armed SRQ (srq_limit > 0) holds fewer
 *                                  RECVs than its limit after one was taken;
 *                                  the limit goes back to 0 (disarmed)
 *   IBV_EVENT_QP_REQ_ERR           a fragment that breaks the ring's rules
 *                                  reached the QP (an invalid request): it
 *                                  goes to the error state
 *   IBV_EVENT_CQ_ERR               a CQ overran (more completions than it
 *                                  holds): ibv_poll_cq fails from then on
 * As with rdma-core, destroying a QP, SRQ or CQ waits until every event of
 * it that ibv_get_async_event returned is acked; events of it still queued
 * go with it. An event of an object that is still queued is not queued
 * again: the queue grows with the live objects, and drops nothing.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rv.h"

static bool qp_event(enum ibv_event_type t)
{
	switch (t) {
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		return true;
	default:
		return false;
	}
}

static bool srq_event(enum ibv_event_type t)
{
	return t == IBV_EVENT_SRQ_ERR || t == IBV_EVENT_SRQ_LIMIT_REACHED;
}

/* Queue event @t of @obj (a struct rv_qp, rv_srq or rv_cq as @t says).
 * Called with the context locked. The same event of the same object that
 * is still queued is not queued twice (so the queue holds at most a few
 * events per live object: it grows, nothing is dropped); one count on the
 * fd per queued event, always (the context's lock covers both). */
void rv_async_push(struct rv_ctx *c, enum ibv_event_type t, void *obj)
{
	uint32_t n = c->aev_tail - c->aev_head;
	uint64_t one = 1;
	ssize_t w;

	for (uint32_t i = c->aev_head; i != c->aev_tail; i++)
		if (c->aev[i & (c->aev_cap - 1)].obj == obj && c->aev[i & (c->aev_cap - 1)].type == t)
			return;
	if (n == c->aev_cap) {   /* full (or none yet): twice the room, in order */
		uint32_t cap = c->aev_cap ? 2 * c->aev_cap : 64;
		struct rv_aev *a = cap > c->aev_cap ? calloc(cap, sizeof(*a)) : NULL;

		if (!a) {
			if (getenv("ROSHM_VERBS_DEBUG"))
				fprintf(stderr, "roshm-verbs: async event %s lost: out of memory\n",
					ibv_event_type_str(t));
			return;
		}
		for (uint32_t i = 0; i < n; i++)
			a[i] = c->aev[(c->aev_head + i) & (c->aev_cap - 1)];
		free(c->aev);
		c->aev = a;
		c->aev_cap = cap;
		c->aev_head = 0;
		c->aev_tail = n;
	}
	c->aev[c->aev_tail++ & (c->aev_cap - 1)] = (struct rv_aev){ .type = t, .obj = obj };
	w = write(c->vc.context.async_fd, &one, sizeof(one));
	(void)w;   /* a semaphore eventfd holds far more counts than events can wait */
}

/* @obj is being destroyed: its queued events go, and their counts with
 * them (context locked: the fd holds one count per queued event, so these
 * reads find theirs at once). */
void rv_async_forget(struct rv_ctx *c, const void *obj)
{
	uint32_t to = c->aev_head;

	for (uint32_t i = c->aev_head; i != c->aev_tail; i++) {
		struct rv_aev e = c->aev[i & (c->aev_cap - 1)];

		if (e.obj != obj)
			c->aev[to++ & (c->aev_cap - 1)] = e;
		else
			rv_fd_take(c->vc.context.async_fd, &c->aev_owed);
	}
	c->aev_tail = to;
}

/* After the object left every list: wait until the application acked every
 * event ibv_get_async_event gave it (@done: the object's counter). */
void rv_async_settle(pthread_mutex_t *mu, pthread_cond_t *cv, const uint32_t *done,
		     uint32_t reported)
{
	pthread_mutex_lock(mu);
	while (*done != reported)
		pthread_cond_wait(cv, mu);
	pthread_mutex_unlock(mu);
}

/*
 * An event fd (async_fd, a completion channel's fd) is a semaphore eventfd
 * that holds one count per queued event: counts are added and taken under
 * the lock that covers the events, so the fd is readable exactly while an
 * event waits. A get with nothing queued blocks in read(2) on the fd itself,
 * outside the lock, so that a signal interrupts it as it would the kernel's
 * (EINTR, or a restart under SA_RESTART) and O_NONBLOCK gives EAGAIN. The
 * count that read takes goes back under the lock (rv_fd_back) unless a
 * taker found the fd empty meanwhile and noted it in @owed: then that read
 * stood for its take.
 */

/* Take one count off @fd for an event leaving the queue (caller holds the
 * lock); never blocks: an empty fd means a waiter's read has the count, or
 * the application read the fd itself. */
void rv_fd_take(int fd, uint32_t *owed)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	uint64_t v;

	if (poll(&p, 1, 0) == 1 && (p.revents & POLLIN) && read(fd, &v, sizeof(v)) == sizeof(v))
		return;
	(*owed)++;
}

/* A waiter's read took a count (caller holds the lock again): give it back,
 * or settle what a take found missing. */
void rv_fd_back(int fd, uint32_t *owed)
{
	uint64_t one = 1;

	if (*owed) {
		(*owed)--;
		return;
	}
	if (write(fd, &one, sizeof(one)) != sizeof(one))
		(*owed)++;   /* cannot happen with a count below the eventfd's limit */
}

/* No event queued (caller does not hold the lock): wait in read(2) until a
 * count arrives, 0; or -1 with the read's errno (EAGAIN, EINTR). The
 * caller then takes its lock and calls rv_fd_back. */
int rv_fd_wait(int fd)
{
	uint64_t v;
	ssize_t r = read(fd, &v, sizeof(v));

	if (r == sizeof(v))
		return 0;
	if (r >= 0)
		errno = EIO;
	return -1;
}

RV_EXPORT int ibv_get_async_event(struct ibv_context *ctx, struct ibv_async_event *ev)
{
	struct rv_ctx *c = to_ctx(ctx);

	for (;;) {
		struct rv_aev e;

		rv_lock(c);
		if (c->aev_head == c->aev_tail) {
			rv_unlock(c);
			if (rv_fd_wait(ctx->async_fd))
				return -1;
			rv_lock(c);
			rv_fd_back(ctx->async_fd, &c->aev_owed);
			rv_unlock(c);
			continue;
		}
		rv_fd_take(ctx->async_fd, &c->aev_owed);
		e = c->aev[c->aev_head++ & (c->aev_cap - 1)];
		memset(ev, 0, sizeof(*ev));
		ev->event_type = e.type;
		if (qp_event(e.type)) {
			((struct rv_qp *)e.obj)->aev_reported++;
			ev->element.qp = &((struct rv_qp *)e.obj)->qp;
		} else if (srq_event(e.type)) {
			((struct rv_srq *)e.obj)->aev_reported++;
			ev->element.srq = &((struct rv_srq *)e.obj)->srq;
		} else if (e.type == IBV_EVENT_CQ_ERR) {
			((struct rv_cq *)e.obj)->aev_reported++;
			ev->element.cq = &((struct rv_cq *)e.obj)->cq;
		} else {
			ev->element.port_num = 1;
		}
		rv_unlock(c);
		return 0;
	}
}

RV_EXPORT void ibv_ack_async_event(struct ibv_async_event *ev)
{
	pthread_mutex_t *mu;
	pthread_cond_t *cv;
	uint32_t *done;

	if (qp_event(ev->event_type)) {
		mu = &ev->element.qp->mutex, cv = &ev->element.qp->cond;
		done = &ev->element.qp->events_completed;
	} else if (srq_event(ev->event_type)) {
		mu = &ev->element.srq->mutex, cv = &ev->element.srq->cond;
		done = &ev->element.srq->events_completed;
	} else if (ev->event_type == IBV_EVENT_CQ_ERR) {
		mu = &ev->element.cq->mutex, cv = &ev->element.cq->cond;
		done = &ev->element.cq->async_events_completed;
	} else {
		return;   /* port and device events: nothing waits for them */
	}
	pthread_mutex_lock(mu);
	++*done;
	pthread_cond_signal(cv);
	pthread_mutex_unlock(mu);
}

/* ------------------------------------------------------------- strings */

RV_EXPORT const char *ibv_event_type_str(enum ibv_event_type t)
{
	static const char *const s[] = {
		[IBV_EVENT_CQ_ERR] = "CQ error",
		[IBV_EVENT_QP_FATAL] = "local work queue catastrophic error",
		[IBV_EVENT_QP_REQ_ERR] = "invalid request local work queue error",
		[IBV_EVENT_QP_ACCESS_ERR] = "local access violation work queue error",
		[IBV_EVENT_COMM_EST] = "communication established",
		[IBV_EVENT_SQ_DRAINED] = "send queue drained",
		[IBV_EVENT_PATH_MIG] = "path migrated",
		[IBV_EVENT_PATH_MIG_ERR] = "path migration request error",
		[IBV_EVENT_DEVICE_FATAL] = "local catastrophic error",
		[IBV_EVENT_PORT_ACTIVE] = "port active",
		[IBV_EVENT_PORT_ERR] = "port error",
		[IBV_EVENT_LID_CHANGE] = "LID change",
		[IBV_EVENT_PKEY_CHANGE] = "P_Key change",
		[IBV_EVENT_SM_CHANGE] = "SM change",
		[IBV_EVENT_SRQ_ERR] = "SRQ catastrophic error",
		[IBV_EVENT_SRQ_LIMIT_REACHED] = "SRQ limit reached",
		[IBV_EVENT_QP_LAST_WQE_REACHED] = "last WQE reached",
		[IBV_EVENT_CLIENT_REREGISTER] = "client reregistration",
		[IBV_EVENT_GID_CHANGE] = "GID table change",
		[IBV_EVENT_WQ_FATAL] = "WQ fatal",
	};

	return (unsigned)t < sizeof(s) / sizeof(s[0]) && s[t] ? s[t] : "unknown";
}

RV_EXPORT const char *ibv_node_type_str(enum ibv_node_type t)
{
	static const char *const s[] = {
		[IBV_NODE_CA] = "InfiniBand channel adapter",
		[IBV_NODE_SWITCH] = "InfiniBand switch",
		[IBV_NODE_ROUTER] = "InfiniBand router",
		[IBV_NODE_RNIC] = "iWARP NIC",
		[IBV_NODE_USNIC] = "usNIC",
		[IBV_NODE_USNIC_UDP] = "usNIC UDP",
		[IBV_NODE_UNSPECIFIED] = "unspecified",
	};

	return (unsigned)t < sizeof(s) / sizeof(s[0]) && s[t] ? s[t] : "unknown";
}

RV_EXPORT const char *ibv_port_state_str(enum ibv_port_state st)
{
	static const char *const s[] = {
		[IBV_PORT_NOP] = "no state change (NOP)",
		[IBV_PORT_DOWN] = "down",
		[IBV_PORT_INIT] = "init",
		[IBV_PORT_ARMED] = "armed",
		[IBV_PORT_ACTIVE] = "active",
		[IBV_PORT_ACTIVE_DEFER] = "active defer",
	};

	return (unsigned)st < sizeof(s) / sizeof(s[0]) ? s[st] : "unknown";
}

/* --------------------------------------------------------------- rates */

/* Each rate: its multiple of 2.5 Gb/s, rounded down (0: none) and its Mb/s. */
static const struct {
	enum ibv_rate rate;
	int mult, mbps;
} rates[] = {
	{ IBV_RATE_2_5_GBPS, 1, 2500 },     { IBV_RATE_5_GBPS, 2, 5000 },
	{ IBV_RATE_10_GBPS, 4, 10000 },     { IBV_RATE_20_GBPS, 8, 20000 },
	{ IBV_RATE_30_GBPS, 12, 30000 },    { IBV_RATE_40_GBPS, 16, 40000 },
	{ IBV_RATE_60_GBPS, 24, 60000 },    { IBV_RATE_80_GBPS, 32, 80000 },
	{ IBV_RATE_120_GBPS, 48, 120000 },  { IBV_RATE_14_GBPS, 0, 14062 },
	{ IBV_RATE_56_GBPS, 0, 56250 },     { IBV_RATE_112_GBPS, 0, 112500 },
	{ IBV_RATE_168_GBPS, 0, 168750 },   { IBV_RATE_25_GBPS, 0, 25781 },
	{ IBV_RATE_100_GBPS, 0, 103125 },   { IBV_RATE_200_GBPS, 0, 206250 },
	{ IBV_RATE_300_GBPS, 0, 309375 },   { IBV_RATE_28_GBPS, 11, 28125 },
	{ IBV_RATE_50_GBPS, 20, 53125 },     { IBV_RATE_400_GBPS, 160, 425000 },
	{ IBV_RATE_600_GBPS, 240, 637500 },   { IBV_RATE_800_GBPS, 320, 850000 },
	{ IBV_RATE_1200_GBPS, 480, 1275000 },
};
#define NRATES (sizeof(rates) / sizeof(rates[0]))

RV_EXPORT int ibv_rate_to_mult(enum ibv_rate rate)
{
	for (size_t i = 0; i < NRATES; i++)
		if (rates[i].rate == rate && rates[i].mult)
			return rates[i].mult;
	return -1;
}

RV_EXPORT enum ibv_rate mult_to_ibv_rate(int mult)
{
	for (size_t i = 0; i < NRATES; i++)
		if (rates[i].mult && rates[i].mult == mult)
			return rates[i].rate;
	return IBV_RATE_MAX;
}

RV_EXPORT int ibv_rate_to_mbps(enum ibv_rate rate)
{
	for (size_t i = 0; i < NRATES; i++)
		if (rates[i].rate == rate)
			return rates[i].mbps;
	return -1;
}

RV_EXPORT enum ibv_rate mbps_to_ibv_rate(int mbps)
{
	for (size_t i = 0; i < NRATES; i++)
		if (rates[i].mbps == mbps)
			return rates[i].rate;
	return IBV_RATE_MAX;
}
