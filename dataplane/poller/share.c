// SPDX-License-Identifier: MIT
/*
 * Tenants' shares of the poller (struct rd_share): a deficit round robin
 * credit per tenant per round, weighted, when more than one tenant has
 * clients, and optional token buckets of operations and bytes per second.
 * client_round charges what a client used (share_charge in poller.c);
 * a tenant whose bucket is empty is held until it refills, and an idle
 * poller sleeps no longer than that (rd_share_held_ms).
 */
#include <rte_cycles.h>

#include "roshmd.h"

static int64_t bucket_cap(uint64_t per_sec)
{
	/* 10 ms of the rate: short bursts pass, the average holds */
	return per_sec / 100 ? (int64_t)(per_sec / 100) : 1;
}

void rd_share_set(struct rd_poller *p, int t, const struct rd_quota *q)
{
	struct rd_share *sh = &p->share[t];

	sh->weight = q->weight ? q->weight : 1;
	sh->ops_per_sec = q->ops_per_sec;
	sh->bytes_per_sec = q->bytes_per_sec;
	sh->ops_tokens = bucket_cap(sh->ops_per_sec);
	sh->byte_tokens = bucket_cap(sh->bytes_per_sec);
	sh->ops_tsc = sh->byte_tsc = rte_get_timer_cycles();
	sh->held = false;
	p->limits_on = false;
	for (int i = 0; i < p->cfg->ntenants; i++)
		if (p->share[i].ops_per_sec || p->share[i].bytes_per_sec)
			p->limits_on = true;
}

/* Whole tokens for the time since *@tsc; *@tsc moves on by exactly the
 * time they stand for, so no fraction is lost however often it runs. */
static void refill(int64_t *tokens, uint64_t *tsc, uint64_t per_sec, uint64_t now, uint64_t hz)
{
	int64_t cap = bucket_cap(per_sec);
	uint64_t dt = now - *tsc;
	unsigned __int128 add;

	if (dt > hz) { /* a second idle: a full bucket at most anyway */
		dt = hz;
		*tsc = now - hz;
	}
	add = (unsigned __int128)dt * per_sec / hz;
	if (!add)
		return;
	*tsc += (uint64_t)(add * hz / per_sec);
	if (add >= (unsigned __int128)(cap - *tokens)) {
		*tokens = cap;
		*tsc = now;
	} else {
		*tokens += (int64_t)add;
	}
}

/* Once per round: every tenant's DRR credit, and its token buckets. */
void rd_share_round(struct rd_poller *p)
{
	int nt = p->cfg->ntenants;

	if (p->ntenants_on > 1) {
		for (int t = 0; t < nt; t++) {
			struct rd_share *sh = &p->share[t];
			int64_t q = (int64_t)p->cfg->share_quantum * sh->weight;

			if (sh->nclients)
				sh->credit = sh->credit < 0 ? sh->credit + q : q; /* a debt is paid first */
		}
	}
	if (!p->limits_on)
		return;
	uint64_t now = rte_get_timer_cycles(), hz = rte_get_timer_hz();

	for (int t = 0; t < nt; t++) {
		struct rd_share *sh = &p->share[t];

		if (sh->ops_per_sec)
			refill(&sh->ops_tokens, &sh->ops_tsc, sh->ops_per_sec, now, hz);
		if (sh->bytes_per_sec)
			refill(&sh->byte_tokens, &sh->byte_tsc, sh->bytes_per_sec, now, hz);
		sh->held = (sh->ops_per_sec && sh->ops_tokens <= 0) ||
			   (sh->bytes_per_sec && sh->byte_tokens <= 0);
	}
}

/* Milliseconds until a bucket at @tokens (<= 0) holds one again at
 * @per_sec: at least 1. */
static uint64_t refill_ms(int64_t tokens, uint64_t per_sec)
{
	unsigned __int128 need = (unsigned __int128)(1 - (uint64_t)tokens) * 1000;
	unsigned __int128 ms = (need + per_sec - 1) / per_sec;

	return ms > UINT64_MAX ? UINT64_MAX : ms ? (uint64_t)ms : 1;
}

/* How long the poller may sleep for the held tenants: until the first of
 * them has tokens in both its buckets again (a debt can last hours: a
 * wakeup every millisecond for it would be work for nothing). */
int rd_share_held_ms(const struct rd_poller *p)
{
	uint64_t ms = 3600000; /* an hour at most; a SIGHUP's SHARE_SET wakes us anyway */

	for (int t = 0; t < p->cfg->ntenants; t++) {
		const struct rd_share *sh = &p->share[t];
		uint64_t w = 1;

		if (!sh->held || !sh->nclients)
			continue;
		if (sh->ops_per_sec && sh->ops_tokens <= 0)
			w = refill_ms(sh->ops_tokens, sh->ops_per_sec);
		if (sh->bytes_per_sec && sh->byte_tokens <= 0) {
			uint64_t b = refill_ms(sh->byte_tokens, sh->bytes_per_sec);

			w = b > w ? b : w;
		}
		ms = w < ms ? w : ms;
	}
	return (int)ms;
}
