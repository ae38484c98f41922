// SPDX-License-Identifier: MIT
/*
 * How fast one tenant's clients may make this roshmd use the registry
 * (quota.registry_ops_per_sec). The registry is every tenant's and every
 * node's: without a bound, one pod that creates and closes regions, grants
 * and revokes, or opens names nobody published, in a loop, makes its
 * roshmd write (or read past its cache) as fast as etcd answers.
 *
 * A token bucket per tenant, one second deep. A request that may use the
 * registry (REGION_CREATE, REGION_REATTACH, REGION_GRANT, REGION_OPEN)
 * takes what it used after it ran: a create 2 (its record now, its removal
 * later, whether by a close or by the client's exit), a grant 1 and 1 more
 * for each 64 grants its region's record then holds (grants.c), an open 1
 * when it read the store past the cache; a tenant's drain (admin) 1 per
 * region it marks. While the bucket is empty, or other requests of the
 * tenant already wait, such a request is left unread in its connection's
 * socket (its header is only peeked at) and the connection joins the
 * tenant's queue (RD_WAIT_RATE: only a hang-up is watched, a half-close is
 * not one). A tenant's listing of its regions (admin "regions [PREFIX]",
 * as libroshm-verbs' multicast senders call it) takes 1 too, but does not
 * wait: with the bucket empty or requests in its queue it is refused with
 * EAGAIN (rd_reg_rate_try), and the caller lists again later. The queue is served first come, first served: as tokens come
 * back its head alone is let read, and once its request ran the next. The
 * client's call takes longer, nothing fails, and other tenants' requests
 * go on at once. Requests that use no registry (close, admin) never wait.
 */
#define _GNU_SOURCE
#include <string.h>
#include <sys/socket.h>

#include "control/internal.h"

#define RD_LOG_COMPONENT RD_LC_CONTROL
#define NS 1000000000ull

static uint32_t rate_of(const struct rd_control *ctl, int tidx)
{
	return tidx >= 0 && tidx < ctl->cfg->ntenants && tidx < RD_TENANTS_MAX ?
	       ctl->cfg->tenants[tidx].quota.registry_ops_per_sec : 0;
}

/* Add what @rate earned since the last refill; the bucket holds one second.
 * A debt (a drain charges a tenant at once) is paid by all the time that
 * passed, idle or not. */
static void refill(struct rd_reg_bucket *b, uint32_t rate, uint64_t now)
{
	int64_t cap = rate;
	uint64_t gap, secs, add;

	if (!b->last_ns) {
		b->tokens = cap;
		b->last_ns = now;
		return;
	}
	gap = now - b->last_ns;
	secs = gap / NS;
	if (b->tokens >= cap || secs > (uint64_t)(cap - b->tokens) / rate) {
		b->tokens = cap;  /* full: the time past it is not kept */
		b->last_ns = now;
		return;
	}
	/* less than the debt plus a second: no overflow below */
	add = secs * rate + (gap % NS) * rate / NS;
	if (!add)
		return;
	b->last_ns += secs * NS + ((gap % NS) * rate / NS) * NS / rate;
	b->tokens = b->tokens + (int64_t)add > cap ? cap : b->tokens + (int64_t)add;
	if (b->tokens == cap)
		b->last_ns = now;
}

static bool uses_registry(uint16_t type)
{
	return type == ROSHM_CTL_REGION_CREATE || type == ROSHM_CTL_REGION_REATTACH ||
	       type == ROSHM_CTL_REGION_GRANT || type == ROSHM_CTL_REGION_OPEN;
}

static void dequeue(struct rd_reg_bucket *b, struct rd_conn *conn)
{
	struct rd_conn **pp = &b->q_head, *prev = NULL;

	while (*pp && *pp != conn) {
		prev = *pp;
		pp = &(*pp)->rate_next;
	}
	if (*pp) {
		*pp = conn->rate_next;
		if (b->q_tail == conn)
			b->q_tail = prev;
	}
	conn->rate_next = NULL;
	conn->rate_queued = false;
}

/* Let the head of tenant @tidx's queue read its request, if its turn came. */
static void kick(struct rd_control *ctl, int tidx, uint64_t now)
{
	struct rd_reg_bucket *b;
	struct rd_conn *head;
	uint32_t rate;

	if (tidx < 0 || tidx >= RD_TENANTS_MAX)
		return;
	b = &ctl->reg_bucket[tidx];
	head = b->q_head;
	rate = rate_of(ctl, tidx);
	if (!head || head->wait != RD_WAIT_RATE)
		return;
	if (rate) {
		refill(b, rate, now);
		if (b->tokens <= 0)
			return;
	}
	rd_conn_unpark(ctl, head); /* its request runs next (rd_reg_rate_hold) */
}

bool rd_reg_rate_hold(struct rd_control *ctl, struct rd_conn *conn)
{
	struct roshm_ctl_hdr h;
	struct rd_reg_bucket *b;
	uint64_t now;
	uint32_t rate;
	int tidx;

	if (!conn->client)
		return false;
	tidx = conn->client->tidx;
	if (tidx < 0 || tidx >= RD_TENANTS_MAX)
		return false;
	b = &ctl->reg_bucket[tidx];
	rate = rate_of(ctl, tidx);
	now = rd_mono_ns();
	if (rate)
		refill(b, rate, now);
	if (conn->rate_queued) {
		if (b->q_head == conn && (!rate || b->tokens > 0)) {
			dequeue(b, conn);
			return false;     /* its turn: the request it peeked at runs */
		}
		rd_conn_wait_for(ctl, conn, RD_WAIT_RATE);
		return true;
	}
	if (!rate || (b->tokens > 0 && !b->q_head))
		return false;
	/* SOCK_SEQPACKET: a peek leaves the message, and any descriptor it
	 * carries, where it is. Anything short is the usual path's to refuse. */
	if (recv(conn->fd, &h, sizeof(h), MSG_PEEK | MSG_DONTWAIT) != (ssize_t)sizeof(h) ||
	    !uses_registry(h.type))
		return false;
	conn->rate_queued = true;
	conn->rate_tidx = tidx;
	conn->rate_next = NULL;
	if (b->q_tail)
		b->q_tail->rate_next = conn;
	else
		b->q_head = conn;
	b->q_tail = conn;
	if (!b->held++ || now - b->logged_ns > 10 * NS) {
		b->logged_ns = now;
		RD_LOG(NOTICE, "tenant %s: more registry operations than its "
		       "quota.registry_ops_per_sec (%u): its requests wait (%llu so far)",
		       conn->client->tenant, rate, (unsigned long long)b->held);
	}
	rd_conn_wait_for(ctl, conn, RD_WAIT_RATE);
	return true;
}

void rd_reg_rate_forget(struct rd_control *ctl, struct rd_conn *conn)
{
	if (!conn->rate_queued)
		return;
	dequeue(&ctl->reg_bucket[conn->rate_tidx], conn);
	kick(ctl, conn->rate_tidx, rd_mono_ns());
}

void rd_reg_rate_take(struct rd_control *ctl, int tidx, unsigned n)
{
	uint32_t rate = rate_of(ctl, tidx);

	if (!rate)
		return;
	if (!ctl->reg_bucket[tidx].last_ns) /* start it: a debt taken first is kept */
		refill(&ctl->reg_bucket[tidx], rate, rd_mono_ns());
	ctl->reg_bucket[tidx].tokens -= n;
}

static int tidx_of(const struct rd_control *ctl, const char *tenant)
{
	for (int t = 0; t < ctl->cfg->ntenants && t < RD_TENANTS_MAX; t++)
		if (!strcmp(ctl->cfg->tenants[t].name, tenant))
			return t;
	return -1;
}

bool rd_reg_rate_try(struct rd_control *ctl, const char *tenant, unsigned n)
{
	int tidx = tidx_of(ctl, tenant);
	struct rd_reg_bucket *b;
	uint32_t rate;
	uint64_t now;

	if (tidx < 0 || !(rate = rate_of(ctl, tidx)))
		return true;
	b = &ctl->reg_bucket[tidx];
	now = rd_mono_ns();
	refill(b, rate, now);
	if (b->tokens > 0 && !b->q_head) {
		b->tokens -= n;
		return true;
	}
	if (!b->held++ || now - b->logged_ns > 10 * NS) {
		b->logged_ns = now;
		RD_LOG(NOTICE, "tenant %s: more registry operations than its "
		       "quota.registry_ops_per_sec (%u): a listing of its regions refused "
		       "(%llu held so far)", tenant, rate, (unsigned long long)b->held);
	}
	return false;
}

void rd_reg_rate_take_tenant(struct rd_control *ctl, const char *tenant, unsigned n)
{
	int t = tidx_of(ctl, tenant);

	if (t >= 0)
		rd_reg_rate_take(ctl, t, n);
}

void rd_reg_rate_charge(struct rd_control *ctl, int tidx, uint16_t type)
{
	if (tidx < 0 || tidx >= RD_TENANTS_MAX)
		return;
	if (type == ROSHM_CTL_REGION_CREATE || type == ROSHM_CTL_REGION_REATTACH)
		rd_reg_rate_take(ctl, tidx, 2);
	else if (type == ROSHM_CTL_REGION_GRANT)
		rd_reg_rate_take(ctl, tidx, 1);
	/* an open takes its 1 where it reads the store (regions.c) */
	kick(ctl, tidx, rd_mono_ns()); /* the next in line, if there are tokens */
}

void rd_reg_rate_timer(struct rd_control *ctl, uint64_t now)
{
	for (int t = 0; t < ctl->cfg->ntenants && t < RD_TENANTS_MAX; t++)
		kick(ctl, t, now);
}
