// SPDX-License-Identifier: MIT
/* Transaction engine: see txn.h for the protocol. Poller thread only. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <rte_cycles.h>

#include "poller/txn_int.h"

int rd_txn_init(struct rd_poller *p)
{
	const struct rd_config *cfg = p->cfg;
	struct rd_txn_engine *e = calloc(1, sizeof(*e));

	if (!e)
		return -ENOMEM;
	e->p = p;
	e->n = cfg->txn_max_inflight;
	e->max_slot = cfg->txn_max_slot_size;
	e->pool = calloc(e->n, sizeof(*e->pool));
	e->bufs = malloc((size_t)e->n * e->max_slot);
	e->maxowned = cfg->max_regions;
	e->owned = calloc(e->maxowned, sizeof(*e->owned));
	e->apply_buf = malloc(e->max_slot);
	e->hz = rte_get_timer_hz();
	if (!e->pool || !e->bufs || !e->owned || !e->apply_buf) {
		free(e->pool);
		free(e->bufs);
		free(e->owned);
		free(e->apply_buf);
		free(e);
		return -ENOMEM;
	}
	for (uint32_t i = e->n; i-- > 0;) {
		e->pool[i].e = e;
		e->pool[i].img = e->bufs + (size_t)i * e->max_slot;
		e->pool[i].next_free = e->free;
		e->free = &e->pool[i];
	}
	/* Transaction ids: unique across restarts and nodes (an attempt is
	 * found by its id in the log after its answer was lost). */
	if (getrandom(&e->id_seed, sizeof(e->id_seed), 0) != sizeof(e->id_seed))
		e->id_seed = rte_rdtsc() ^ ((uint64_t)getpid() << 32);
	p->txn = e;
	return 0;
}

void rd_txn_mem(const struct rd_poller *p, int i, uint8_t **base, size_t *len)
{
	const struct rd_txn_engine *e = p->txn;

	*base = i ? (uint8_t *)e->pool : e->bufs;
	*len = i ? (size_t)e->n * sizeof(*e->pool) : (size_t)e->n * e->max_slot;
}

void rd_txn_fini(struct rd_poller *p)
{
	struct rd_txn_engine *e = p->txn;

	if (!e)
		return;
	free(e->pool);
	free(e->bufs);
	free(e->owned);
	free(e->apply_buf);
	free(e);
	p->txn = NULL;
}

/* A new transaction id: the seed's counter through splitmix64's finalizer,
 * a bijection, so one engine never repeats one and two engines collide as
 * two random 64-bit numbers do. */
uint64_t rd_txn_new_id(struct rd_txn_engine *e)
{
	uint64_t z = e->id_seed + ++e->id_count * 0x9e3779b97f4a7c15ull;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}
/* Give a context back: its quota counts, its hold on the region. */
static void txn_free(struct rd_txn *t)
{
	struct rd_txn_engine *e = t->e;

	if (t->state != T_BUILD && t->state != T_FREE)
		e->active--;
	if (t->state != T_FREE) {
		e->tenant_active[t->tidx]--;
		if (t->client)
			t->client->txn_active--;
		if (t->region)
			rd_region_unhold(e->p, t->region);
	}
	t->region = NULL;
	t->state = T_FREE;
	t->next_free = e->free;
	e->free = t;
}

/* The client's one completion, counted with the commit's latency. */
void rd_txn_finish(struct rd_txn *t, int32_t status)
{
	if (t->client) {
		struct rd_poller *p = t->e->p;
		unsigned xp = t->region ? t->region->xport->xp : RD_XP_NONE;

		if (!status)
			rd_lat_record(p, xp, ROSHM_OP_TXN_COMMIT, t->t0, rte_rdtsc());
		rd_op_complete(p, t->client, xp, ROSHM_OP_TXN_COMMIT, t->user_data, status,
			       status ? 0 : t->seq);
	}
	txn_free(t);
}
/* A context for client @c's new transaction on @rg, within the pool, the
 * client's share (txn.max_per_client) and its tenant's (quota.txn). */
static struct rd_txn *txn_get(struct rd_poller *p, struct rd_client *c, struct rd_region *rg)
{
	struct rd_txn_engine *e = p->txn;
	struct rd_txn *t = e->free;

	if (e->tenant_active[c->tidx] >= p->cfg->tenants[c->tidx].quota.txn) {
		RD_STAT_ADD(p->stats.tenant_txn_refused[c->tidx], 1);
		return NULL;
	}
	if (!t || c->txn_active >= p->cfg->txn_max_per_client)
		return NULL;
	e->free = t->next_free;
	memset(t->img, 0, sizeof(struct roshm_txn_slot));
	t->state = T_BUILD;
	t->client = c;
	t->tidx = c->tidx;
	t->region = rg;
	rd_region_hold(rg);
	c->txn_active++;
	e->tenant_active[c->tidx]++;
	t->staged_len = sizeof(struct roshm_txn_slot) - ROSHM_TXN_STAGE_OFF;
	t->stage_done = 0;
	t->small = false;
	return t;
}

/* The transaction being gathered failed: remember the first error for its
 * commit and let its context go at once. */
static void build_fail(struct rd_client *c, int32_t err)
{
	if (c->txn_build) {
		txn_free(c->txn_build);
		c->txn_build = NULL;
	}
	if (!c->txn_err)
		c->txn_err = err;
}

uint64_t rd_txn_write(struct rd_poller *p, struct rd_client *c, const struct roshm_sqe *s,
		      struct rd_region *rg, int status)
{
	struct rd_txn_engine *e = p->txn;
	struct rd_txn *t = c->txn_build;
	struct roshm_txn_slot *sl;

	if (c->txn_err)
		return 0; /* already failed: its commit says why */
	if (status) {
		build_fail(c, status);
		return 0;
	}
	if (!t) {
		t = txn_get(p, c, rg);
		if (!t) {
			/* No context within this client's or tenant's share: the
			 * commit fails with EBUSY; the ring is never held up. */
			build_fail(c, -EBUSY);
			return 0;
		}
		t->handle = s->handle;
		c->txn_build = t;
	}
	sl = (void *)t->img;
	if (s->handle != t->handle) {
		build_fail(c, -EINVAL); /* one transaction, one region */
		return 0;
	}
	/* Segment table first, payload after it: move the payload when a
	 * segment is added (at most ROSHM_TXN_MAX_SEGS, bytes already here).
	 * 64-bit sums: a length can be close to 4 GiB. */
	uint64_t hdr_old = sizeof(*sl) + (uint64_t)sl->nseg * sizeof(struct roshm_txn_seg);
	uint64_t hdr_new = hdr_old + sizeof(struct roshm_txn_seg);
	uint64_t total = hdr_new + sl->payload_len + (uint64_t)s->len;

	if (sl->nseg >= ROSHM_TXN_MAX_SEGS || total > rg->slot_size || total > e->max_slot) {
		build_fail(c, -EMSGSIZE);
		return 0;
	}
	/* what this costs the poller: the move and the copy (a write of 0
	 * bytes still moves everything gathered before it) */
	uint64_t work = (uint64_t)sl->payload_len + s->len;

	memmove(t->img + hdr_new, t->img + hdr_old, sl->payload_len);
	sl->seg[sl->nseg].off = s->off;
	sl->seg[sl->nseg].len = s->len;
	sl->seg[sl->nseg].rsvd = 0;
	memcpy(t->img + hdr_new + sl->payload_len, c->arena + s->arena_off, s->len);
	sl->nseg++;
	sl->payload_len += s->len;
	t->staged_len = (uint32_t)(total - ROSHM_TXN_STAGE_OFF);
	return work;
}

int rd_txn_commit(struct rd_poller *p, struct rd_client *c, const struct roshm_sqe *s,
		  struct rd_region *rg, int status)
{
	struct rd_txn_engine *e = p->txn;
	struct rd_txn *t = c->txn_build;
	int32_t err = c->txn_err, st;
	uint64_t res;

	/* Whatever happens to this commit, what was gathered is used now or
	 * never: a rejected commit never leaves writes for the next one. */
	c->txn_build = NULL;
	c->txn_err = 0;
	if (!status && rg && rg->draining)
		status = -EAGAIN; /* nothing new starts on a draining region */
	if (!status && err)
		status = err;
	if (!status && !t)
		status = -EINVAL; /* nothing staged */
	if (!status && (s->handle != t->handle || rg != t->region))
		status = -EINVAL;
	if (status) {
		if (t)
			txn_free(t);
		return status;
	}
	((struct roshm_txn_slot *)t->img)->txn_id = rd_txn_new_id(e);
	t->t0 = rte_rdtsc();
	t->user_data = s->user_data;
	t->outstanding = 0;
	t->have_last = false;
	t->retry_at = 0;
	t->deadline = rte_get_timer_cycles() + us_to_cycles(e, (uint64_t)p->cfg->txn_deadline_ms * 1000);
	t->gen = t->region->gen;
	rd_txn_fresh_attempt(t);
	e->active++;
	if (rd_txn_step(t, &st, &res))
		rd_txn_advance(t, st, res);
	return 0;
}

/* Handle @hv was closed (a revoke, a close): what was gathered through it
 * is never committed, not even through a later handle of the same value. */
void rd_txn_handle_gone(struct rd_client *c, uint32_t hv)
{
	if (c->txn_build && c->txn_build->handle == hv)
		build_fail(c, -EBADF);
}

void rd_txn_client_gone(struct rd_poller *p, struct rd_client *c)
{
	struct rd_txn_engine *e = p->txn;

	if (!e)
		return;
	if (c->txn_build) {
		txn_free(c->txn_build);
		c->txn_build = NULL;
	}
	c->txn_err = 0;
	/* Transactions already committing run to the end: the log must not be
	 * left with a hole we could have filled. Nobody hears the outcome. */
	for (uint32_t i = 0; i < e->n; i++)
		if (e->pool[i].client == c && e->pool[i].state != T_FREE)
			e->pool[i].client = NULL;
}

void rd_txn_region_add(struct rd_poller *p, struct rd_region *rg, bool on)
{
	struct rd_txn_engine *e = p->txn;

	if (!e || !rg->txn_slots)
		return;
	for (uint32_t i = 0; i < e->nowned; i++)
		if (e->owned[i] == rg) {
			if (!on)
				e->owned[i] = e->owned[--e->nowned];
			return;
		}
	if (on && e->nowned < e->maxowned) {
		/* rg->applied came from rd_region_take (0, or the re-attached
		 * memory's own count); never from the header again */
		rg->hole_since = 0;
		e->owned[e->nowned++] = rg;
	}
}

unsigned rd_txn_tick(struct rd_poller *p)
{
	struct rd_txn_engine *e = p->txn;
	uint64_t now;
	unsigned n = 0;

	if (!e || (!e->active && !e->nowned))
		return 0;
	now = rte_get_timer_cycles();
	if (e->active) {
		for (uint32_t i = 0; i < e->n; i++) {
			struct rd_txn *t = &e->pool[i];
			int32_t st;
			uint64_t res;

			if (t->state <= T_BUILD || t->outstanding || !t->retry_at || now < t->retry_at)
				continue;
			t->retry_at = 0;
			if (now >= t->deadline) {
				rd_txn_finish(t, -ETIMEDOUT);
				continue;
			}
			if (rd_txn_step(t, &st, &res))
				rd_txn_advance(t, st, res);
			n++;
		}
	}
	uint64_t abort = us_to_cycles(e, (uint64_t)p->cfg->txn_abort_ms * 1000);
	uint32_t budget = APPLY_BUDGET;

	/* A bounded amount of copying per round, shared out: the region after
	 * the last one served goes first next time. */
	for (uint32_t i = 0; i < e->nowned && budget; i++)
		n += rd_txn_apply_region(p, e->owned[(e->apply_next + i) % e->nowned], e->apply_buf,
					 e->max_slot, now, abort, &budget);
	if (e->nowned)
		e->apply_next = (e->apply_next + 1) % e->nowned;
	return n;
}

bool rd_txn_busy(const struct rd_poller *p)
{
	const struct rd_txn_engine *e = p->txn;
	uint64_t now;

	if (!e)
		return false;
	/* Work we can do now; waiting for a peer's answer is not: the poller
	 * may sleep, its connections wake it (it shares cores with others). */
	now = rte_get_timer_cycles();
	for (uint32_t i = 0; e->active && i < e->n; i++) {
		const struct rd_txn *t = &e->pool[i];

		if (t->state > T_BUILD && !t->outstanding && t->retry_at && now >= t->retry_at)
			return true;
	}
	for (uint32_t i = 0; i < e->nowned; i++) {
		const struct rd_region *rg = e->owned[i];
		const struct roshm_txn_slot *sl = (const void *)((const uint8_t *)rg->map +
			ROSHM_REGION_HDR_SIZE + (rg->applied % rg->txn_slots) * rg->slot_size);
		uint64_t st = __atomic_load_n(&sl->state, __ATOMIC_ACQUIRE);

		/* what apply_region acts on; any other word (the owner's
		 * scribbles) is not ours to judge, and no work (a hole is
		 * timed by rd_txn_sleep_ms) */
		if (st == ROSHM_TXN_STATE(rg->applied, ROSHM_TXN_COMMITTED) ||
		    st == ROSHM_TXN_STATE(rg->applied, ROSHM_TXN_ABORTED))
			return true;
	}
	return false;
}

int rd_txn_sleep_ms(const struct rd_poller *p)
{
	const struct rd_txn_engine *e = p->txn;

	if (!e)
		return 200;
	/* Retries and hole timeouts are checked every millisecond while they exist. */
	for (uint32_t i = 0; e->active && i < e->n; i++)
		if (e->pool[i].state > T_BUILD && e->pool[i].retry_at)
			return 1;
	for (uint32_t i = 0; i < e->nowned; i++) {
		const struct roshm_region_hdr *h = e->owned[i]->map;

		if (__atomic_load_n(&h->txn_tail, __ATOMIC_RELAXED) > e->owned[i]->applied)
			return 1;
	}
	return 200;
}
