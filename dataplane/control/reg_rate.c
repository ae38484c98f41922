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
 * later, whether by a close or by the client's exit), a grant 1, an open 1
 * when it read the store past the cache. While the bucket is empty, such a
 * request is left unread in its connection's socket (its header is only
 * peeked at) and the connection waits (RD_WAIT_RATE): the client's call
 * takes longer, nothing fails, and other tenants' requests go on at once.
 * rd_reg_rate_timer lets the connection be read again as the bucket
 * refills. Requests that use no registry (close, admin) are never held.
 */
#define _GNU_SOURCE
#include <sys/socket.h>

#include "control/internal.h"

#define RD_LOG_COMPONENT RD_LC_CONTROL
#define NS 1000000000ull

static uint32_t rate_of(const struct rd_control *ctl, int tidx)
{
	return tidx >= 0 && tidx < ctl->cfg->ntenants ?
	       ctl->cfg->tenants[tidx].quota.registry_ops_per_sec : 0;
}

/* Add what @rate earned since the last refill (the bucket holds one second). */
static void refill(struct rd_reg_bucket *b, uint32_t rate, uint64_t now)
{
	int64_t cap = rate;
	uint64_t add;

	if (!b->last_ns || now - b->last_ns >= NS) {
		b->tokens = cap;
		b->last_ns = now;
		return;
	}
	add = (now - b->last_ns) * rate / NS;
	if (!add)
		return;
	b->last_ns += add * NS / rate;
	b->tokens = b->tokens + (int64_t)add > cap ? cap : b->tokens + (int64_t)add;
	if (b->tokens == cap)
		b->last_ns = now;
}

static bool uses_registry(uint16_t type)
{
	return type == ROSHM_CTL_REGION_CREATE || type == ROSHM_CTL_REGION_REATTACH ||
	       type == ROSHM_CTL_REGION_GRANT || type == ROSHM_CTL_REGION_OPEN;
}

bool rd_reg_rate_hold(struct rd_control *ctl, struct rd_conn *conn)
{
	struct roshm_ctl_hdr h;
	struct rd_reg_bucket *b;
	uint32_t rate;

	if (!conn->client)
		return false;
	rate = rate_of(ctl, conn->client->tidx);
	if (!rate)
		return false;
	b = &ctl->reg_bucket[conn->client->tidx];
	refill(b, rate, rd_mono_ns());
	if (b->tokens > 0)
		return false;
	/* SOCK_SEQPACKET: a peek leaves the message, and any descriptor it
	 * carries, where it is. Anything short is the usual path's to refuse. */
	if (recv(conn->fd, &h, sizeof(h), MSG_PEEK | MSG_DONTWAIT) != (ssize_t)sizeof(h) ||
	    !uses_registry(h.type))
		return false;
	if (!b->held++ || rd_mono_ns() - b->logged_ns > 10 * NS) {
		b->logged_ns = rd_mono_ns();
		RD_LOG(NOTICE, "tenant %s: more registry operations than its "
		       "quota.registry_ops_per_sec (%u): its requests wait (%llu so far)",
		       conn->client->tenant, rate, (unsigned long long)b->held);
	}
	rd_conn_wait_for(ctl, conn, RD_WAIT_RATE);
	return true;
}

void rd_reg_rate_take(struct rd_control *ctl, int tidx, unsigned n)
{
	if (rate_of(ctl, tidx))
		ctl->reg_bucket[tidx].tokens -= n;
}

void rd_reg_rate_charge(struct rd_control *ctl, int tidx, uint16_t type)
{
	if (type == ROSHM_CTL_REGION_CREATE || type == ROSHM_CTL_REGION_REATTACH)
		rd_reg_rate_take(ctl, tidx, 2);
	else if (type == ROSHM_CTL_REGION_GRANT)
		rd_reg_rate_take(ctl, tidx, 1);
	/* an open takes its 1 where it reads the store (regions.c) */
}

void rd_reg_rate_timer(struct rd_control *ctl, uint64_t now)
{
	for (struct rd_conn *conn = ctl->conns; conn; conn = conn->next) {
		struct rd_reg_bucket *b;

		if (conn->wait != RD_WAIT_RATE || conn->fd < 0 || !conn->client)
			continue;
		b = &ctl->reg_bucket[conn->client->tidx];
		if (rate_of(ctl, conn->client->tidx))
			refill(b, rate_of(ctl, conn->client->tidx), now);
		else
			b->tokens = 1;    /* no limit any more (a reload) */
		if (b->tokens > 0)
			rd_conn_unpark(ctl, conn); /* read again: its request runs, or waits again */
	}
}
