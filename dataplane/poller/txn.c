// SPDX-License-Identifier: MIT
/* Transaction engine: see txn.h for the protocol. Poller thread only. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <rte_cycles.h>

#include "poller/txn.h"
#include "roshm/wire.h"
#include "transport/transport.h"

enum txn_state {
	T_FREE,
	T_BUILD,      /* gathering TXN_WRITEs */
	T_RESERVE,
	T_ONE,        /* TXN_COMMIT: reserve, stage and commit in one request (tcp) */
	T_WAIT,       /* reading txn_applied until slot s is free (log full) */
	T_STAGE,      /* staging WRITE and commit CAS go out back to back */
	T_COMMIT,     /* waiting for them */
	T_CHECK,      /* outcome unknown after an error: read the slot */
};

struct rd_txn {
	struct rd_txn_engine *e;
	enum txn_state state;
	struct rd_client *client;     /* NULL once it detached: finish quietly */
	int tidx;                     /* its tenant (quota.txn) */
	uint64_t user_data;
	struct rd_region *region;
	uint32_t handle;
	uint64_t seq;
	bool have_seq;
	bool committing;              /* a commit CAS was sent: outcome may be unknown */
	int32_t error;                /* first TXN_WRITE error */
	uint64_t deadline;
	uint64_t t0;                  /* TSC when its commit was consumed (latency) */
	uint64_t retry_at;            /* 0: not waiting */
	uint32_t outstanding;         /* our operations in flight */
	bool cas_sent;                /* the commit CAS of this attempt went out */
	int32_t stage_err;            /* the staging WRITE failed */
	uint32_t stage_done;          /* T_STAGE: bytes of the record sent so far */
	bool small;                   /* the owner's node took no TXN_COMMIT this long: pieces of TCP_MSG_FLOOR */
	bool have_last;
	int32_t last_st;              /* the answer that drives the next step */
	uint64_t last_res;
	uint32_t gen;                 /* region->gen when it started */
	uint64_t id;                  /* T_ONE: this attempt's txn_id */
	uint64_t lb;                  /* T_ONE: a lower bound of txn_tail before it was sent */
	bool again;                   /* T_ONE: an attempt's outcome was lost: look for it */
	bool sync;                    /* the last operation completed in its submit (never left) */
	uint32_t staged_len;          /* bytes from ROSHM_TXN_STAGE_OFF */
	uint8_t *img;                 /* slot image (struct roshm_txn_slot + segs + payload) */
	uint64_t rd[1 + ROSHM_TXN_HISTORY]; /* CHECK: state + history */
	struct rd_txn *next_free;
};

struct rd_txn_engine {
	struct rd_txn *pool;
	uint8_t *bufs;
	uint32_t n, max_slot;
	struct rd_txn *free;
	uint32_t active;
	uint64_t id_seed, id_count;   /* txn ids: 64 random bits each (txn_owner.c finds them) */
	uint64_t hz;
	struct rd_region **owned;     /* local regions with a log, applied by us */
	uint32_t nowned, maxowned;
	uint32_t apply_next;          /* the owned region the apply budget starts with */
	struct rd_poller *p;
	uint32_t tenant_active[RD_TENANTS_MAX]; /* contexts each tenant holds */
	uint8_t *apply_buf;           /* the private copy of a slot being applied */
};

#define RETRY_US 200
/* The least transport.tcp.max_msg a node may have (config_schema.h): every
 * node takes frames of this length. */
#define TCP_MSG_FLOOR 4096u
/* Steps one transaction may take in one call when they complete at once
 * (local regions): a hostile owner's header must not keep the poller. */
#define STEPS_PER_ROUND 8
/* Staged bytes the owner side applies per poll round, over all regions. */
#define APPLY_BUDGET (1u << 20)

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

static uint64_t us_to_cycles(const struct rd_txn_engine *e, uint64_t us)
{
	return e->hz / 1000000 * us;
}

/* A new transaction id: the seed's counter through splitmix64's finalizer,
 * a bijection, so one engine never repeats one and two engines collide as
 * two random 64-bit numbers do. */
static uint64_t new_id(struct rd_txn_engine *e)
{
	uint64_t z = e->id_seed + ++e->id_count * 0x9e3779b97f4a7c15ull;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* A lower bound of the region's txn_tail seen from here: @seq was reserved. */
static inline void saw_seq(struct rd_region *rg, uint64_t seq)
{
	if (seq + 1 > rg->txn_lb)
		rg->txn_lb = seq + 1;
}

/*
 * A new attempt, with a new sequence: in one request where the region's
 * transport takes one (tcp: TXN_COMMIT, roshm/wire.h), else the reserve of
 * the two-round-trip protocol.
 */
static void fresh_attempt(struct rd_txn *t)
{
	const struct rd_region *rg = t->region;

	t->have_seq = false;
	t->committing = false;
	t->again = false;
	t->stage_done = 0;
	if (rg->xport->txn_one && t->staged_len <= rg->xport->max_msg && !t->small) {
		t->id = new_id(t->e);
		t->lb = rg->txn_lb > rg->txn_hint ? rg->txn_lb : rg->txn_hint;
		t->state = T_ONE;
	} else {
		t->state = T_RESERVE;
	}
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
static void txn_finish(struct rd_txn *t, int32_t status)
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

static inline uint64_t slot_off(const struct rd_txn *t)
{
	return ROSHM_REGION_HDR_SIZE + (t->seq % t->region->txn_slots) * t->region->slot_size;
}

/* Issue one operation; returns 1, with the status and result filled in, if it completed at once. */
static int issue(struct rd_txn *t, uint8_t opcode, uint64_t off, uint32_t len, uint64_t op1,
		 uint64_t op2, const void *src, void *dst, int32_t *st, uint64_t *res)
{
	struct rd_op op;
	int r;

	memset(&op, 0, sizeof(op));
	op.region = t->region;
	op.txn = t;
	op.raw = true;
	op.src = src;
	op.dst = dst;
	op.sqe.opcode = opcode;
	op.sqe.off = off;
	op.sqe.len = len;
	op.sqe.operand1 = op1;
	op.sqe.operand2 = op2;
	op.again = opcode == ROSHM_OP_TXN_COMMIT && t->again;
	r = rd_poller_submit(t->e->p, &op);
	t->sync = r == 1;
	if (r == 1) {
		*st = op.status;
		*res = op.result;
		return 1;
	}
	if (r == 0) {
		t->outstanding++;
		return 0;
	}
	/* transport full: try again next round */
	t->retry_at = rte_get_timer_cycles();
	return 0;
}

static void retry_later(struct rd_txn *t)
{
	t->retry_at = rte_get_timer_cycles() + us_to_cycles(t->e, RETRY_US);
}

/* Start (or restart) the current step. Returns 1, with status and result
 * filled in, when the step's deciding operation completed at once (local). */
/*
 * Whether the current step may go out at all; 1 (status in @st) when not.
 * Checked before any slot offset is computed: a region retargeted to an
 * instance with another log layout (or none: txn_slots 0) must not be
 * touched with the old sequence number.
 */
static int gate(struct rd_txn *t, int32_t *st, uint64_t *res)
{
	const struct rd_region *rg = t->region;

	*res = 0;
	if (rg->dead) {
		*st = -ESTALE;
		return 1;
	}
	if (rg->gen != t->gen && rg->keep_log) {
		/* Same memory and log layout under a new epoch (its roshmd
		 * restarted): the log survived, every step stays valid. */
		t->gen = rg->gen;
	}
	if (rg->gen != t->gen) {
		/* Retargeted to a new instance of the region: the old one applied
		 * everything committed before it drained, and aborted the rest. */
		*st = t->committing ? -EIO : -EAGAIN;
		if (!t->committing) {
			t->gen = rg->gen;
			fresh_attempt(t);
		}
		return 1;
	}
	if (!rg->txn_slots || !rg->slot_size) {
		*st = -EOPNOTSUPP; /* defensive: no log to write into */
		return 1;
	}
	if (rg->paused || (rg->draining && (t->state == T_RESERVE || (t->state == T_ONE && !t->again)))) {
		*st = -EAGAIN; /* stale or draining: wait, do not start */
		return 1;
	}
	return 0;
}

static int step_issue(struct rd_txn *t, int32_t *st, uint64_t *res)
{
	if (t->state >= T_RESERVE && t->state <= T_CHECK && gate(t, st, res))
		return 1;
	switch (t->state) {
	case T_RESERVE:
		return issue(t, ROSHM_OP_FETCH_ADD, offsetof(struct roshm_region_hdr, txn_tail), 8, 1, 0,
			     NULL, NULL, st, res);
	case T_ONE: {
		struct roshm_txn_slot *sl = (void *)t->img;

		/* The owner fills in seq and crc (it picks s); a seq that is
		 * no sequence until then, so that a half-received record is
		 * never taken for one (txn_owner.c). */
		sl->seq = UINT64_MAX;
		sl->crc = 0;
		sl->txn_id = t->id;
		t->committing = t->again;
		if (t->again)
			RD_STAT_ADD(t->e->p->stats.txn_again, 1);
		return issue(t, ROSHM_OP_TXN_COMMIT, 0, t->staged_len, t->id, t->lb,
			     t->img + ROSHM_TXN_STAGE_OFF, NULL, st, res);
	}
	case T_WAIT:
		return issue(t, ROSHM_OP_READ, offsetof(struct roshm_region_hdr, txn_applied), 8, 0, 0,
			     NULL, t->rd, st, res);
	case T_STAGE: {
		struct roshm_txn_slot *sl = (void *)t->img;
		uint8_t *staged = t->img + ROSHM_TXN_STAGE_OFF;
		int32_t wst;
		uint64_t wres;

		uint32_t max = t->region->xport->max_msg;

		if (t->small && max > TCP_MSG_FLOOR)
			max = TCP_MSG_FLOOR;

		if (!t->stage_done) {
			sl->seq = t->seq;
			sl->crc = 0;
			sl->crc = rd_txn_staged_crc(staged, t->staged_len);
			t->stage_err = 0;
			t->cas_sent = false;
			t->have_last = false;
		}
		/* The staging WRITEs and the commit CAS go out together: the
		 * transport executes one connection's requests in order (as an RC
		 * QP does), so the CAS runs after the record is in place. A
		 * record longer than the transport's message (tcp's max_msg)
		 * goes in pieces, each under the slot's sequence (the owner
		 * refuses a piece for a slot that is no longer EMPTY(s)). */
		while (t->stage_done < t->staged_len && !t->stage_err) {
			uint32_t n = t->staged_len - t->stage_done;

			if (max && n > max)
				n = max;
			if (issue(t, ROSHM_OP_WRITE, slot_off(t) + ROSHM_TXN_STAGE_OFF + t->stage_done, n,
				  t->seq, 0, staged + t->stage_done, NULL, &wst, &wres) && wst)
				t->stage_err = wst;
			if (t->retry_at)
				return 0; /* the transport was full: the rest next round */
			t->stage_done += n;
		}
		t->stage_done = 0;
		t->state = T_COMMIT;
	}
		/* fall through */
	case T_COMMIT:
		if (t->retry_at)
			return 0; /* the transport was full: the tick sends the CAS */
		t->committing = true;
		t->cas_sent = true;
		return issue(t, ROSHM_OP_CMP_SWAP, slot_off(t), 8,
			     ROSHM_TXN_STATE(t->seq, ROSHM_TXN_EMPTY),
			     ROSHM_TXN_STATE(t->seq, ROSHM_TXN_COMMITTED), NULL, NULL, st, res);
	case T_CHECK:
		return issue(t, ROSHM_OP_READ, slot_off(t), sizeof(t->rd), 0, 0, NULL, t->rd, st, res);
	default:
		return 0;
	}
}

/* Outcome of sequence s in a slot image read back: 1 done, 0 not committed, -1 aborted. */
static int check_outcome(const struct rd_txn *t)
{
	uint64_t s = t->seq;

	if (t->rd[0] == ROSHM_TXN_STATE(s, ROSHM_TXN_COMMITTED))
		return 1;
	if (t->rd[0] == ROSHM_TXN_STATE(s, ROSHM_TXN_EMPTY))
		return 0;
	for (int i = 0; i < ROSHM_TXN_HISTORY; i++) {
		if (t->rd[1 + i] == ROSHM_TXN_STATE(s, ROSHM_TXN_APPLIED))
			return 1;
		if (t->rd[1 + i] == ROSHM_TXN_STATE(s, ROSHM_TXN_ABORTED))
			return -1;
	}
	/* Recycled past our history: it cannot have been left committed
	 * without being applied, but we can no longer tell which; treat it
	 * as aborted only if we never sent the commit. */
	return t->committing ? -2 : -1;
}

/* Slot s is free once s - slots was applied; the last txn_applied we saw
 * usually proves it without asking. */
static inline enum txn_state stage_or_wait(const struct rd_txn *t)
{
	return t->seq < t->region->txn_hint + t->region->txn_slots ? T_STAGE : T_WAIT;
}

/*
 * The answer to a TXN_COMMIT (T_ONE): 1 the next step is set (issue it), 0
 * wait (a retry is set), -1 finished.
 */
/*
 * The owner's node refused a frame of this attempt as longer than it takes
 * (its transport.tcp.max_msg is smaller than ours; the record fits the
 * slot, the writer checked): a one-request commit, or a staging piece. Once,
 * again through the log in pieces every node takes; then -EMSGSIZE.
 * (A CAS sent behind a refused piece committed a slot whose record never
 * came: the owner gives that sequence up.)
 */
static void too_long(struct rd_txn *t)
{
	if (!t->small && t->staged_len > TCP_MSG_FLOOR) {
		t->small = true;
		RD_STAT_ADD(t->e->p->stats.txn_replayed, 1);
		fresh_attempt(t);
		retry_later(t);
		return;
	}
	txn_finish(t, -EMSGSIZE);
}

static int one_answer(struct rd_txn *t, int32_t st, uint64_t res)
{
	uint64_t s = ROSHM_TCP_TXN_SEQ(res);

	switch (st) {
	case 0:
		break;
	case -EAGAIN: /* nothing happened: log full or draining */
		retry_later(t);
		return 0;
	case -EMSGSIZE:   /* nothing ran */
		too_long(t);
		return t->state == T_FREE ? -1 : 0;
	case -ESTALE: case -EIO: case -EOPNOTSUPP: case -EACCES:
		txn_finish(t, st); /* the owner's answer (EIO: the outcome is lost) */
		return -1;
	default:
		/* The answer was lost with its connection: the next attempt asks
		 * the owner to look for this one. Refused before it left (the
		 * peer down in the poller's view): as it was. */
		if (!t->sync) {
			t->again = true;
			t->committing = true;
		}
		retry_later(t);
		return 0;
	}
	if (ROSHM_TCP_TXN_KIND(res) == ROSHM_TCP_TXN_NOT_RUN) {
		/* the lost attempt never ran; nothing started: a new one */
		fresh_attempt(t);
		retry_later(t);
		return 0;
	}
	saw_seq(t->region, s);
	switch (ROSHM_TCP_TXN_KIND(res)) {
	case ROSHM_TCP_TXN_COMMITTED:
		t->seq = s;
		RD_STAT_ADD(t->e->p->stats.txn_committed, 1);
		RD_STAT_ADD(t->e->p->stats.txn_one, 1);
		txn_finish(t, 0);
		return -1;
	case ROSHM_TCP_TXN_RESERVED: /* s is ours; the log was full */
		t->seq = s;
		t->have_seq = true;
		t->committing = false;
		t->again = false;
		t->state = stage_or_wait(t);
		return 1;
	case ROSHM_TCP_TXN_ABORTED: /* its slot was given up on before the record was in */
		RD_STAT_ADD(t->e->p->stats.txn_replayed, 1);
		fresh_attempt(t);
		return 1;
	default:
		txn_finish(t, -EIO); /* no answer of the protocol */
		return -1;
	}
}

/* Advance with the result of the step that just completed. Steps that
 * complete at once (a local region) go on here, at most STEPS_PER_ROUND of
 * them: the rest waits for the next round (a log full of a hostile owner's
 * numbers cannot hold the poller). */
static void advance(struct rd_txn *t, int32_t st, uint64_t res)
{
	for (unsigned steps = 0;; steps++) {
		uint64_t now = rte_get_timer_cycles();

		if (now >= t->deadline) {
			txn_finish(t, -ETIMEDOUT);
			return;
		}
		if (t->state == T_ONE) {
			int r = one_answer(t, st, res);

			if (r <= 0)
				return;
		} else if (st) {
			/* Connection lost, peer down, region gone: the outcome of a
			 * sent commit is unknown; find out once the peer is back. */
			if (st == -EMSGSIZE && t->state == T_COMMIT && !t->committing) {
				too_long(t);   /* a staging piece, the CAS not sent */
				return;
			}
			if (st == -ESTALE || st == -EIO || st == -EOPNOTSUPP || st == -EMSGSIZE) {
				txn_finish(t, st);
				return;
			}
			if (st == -EAGAIN) {  /* paused or draining: nothing happened */
				if (t->state == T_COMMIT && !t->committing)
					t->state = T_STAGE;
				retry_later(t);
				return;
			}
			if (st == -ECANCELED && t->state == T_COMMIT && !t->committing) {
				/* The staging WRITE came after the slot was given up
				 * on (slower than txn.abort_ms): replay. */
				RD_STAT_ADD(t->e->p->stats.txn_replayed, 1);
				fresh_attempt(t);
				retry_later(t);
				return;
			}
			if (t->state == T_COMMIT)
				t->state = t->committing ? T_CHECK : T_STAGE;
			retry_later(t); /* RESERVE, WAIT, CHECK: ask again */
			return;
		} else switch (t->state) {
		case T_RESERVE:
			saw_seq(t->region, res);
			t->seq = res;
			t->have_seq = true;
			t->committing = false;
			t->state = stage_or_wait(t);
			break;
		case T_WAIT:
			/* an answer of the instance it was asked of (a retarget
			 * between must not give the new log the old one's count) */
			if (t->region->gen == t->gen && t->rd[0] > t->region->txn_hint)
				t->region->txn_hint = t->rd[0];
			if (t->seq >= t->rd[0] + t->region->txn_slots) {
				/* log full: the owner has not applied s - slots yet */
				RD_STAT_ADD(t->e->p->stats.txn_log_full, 1);
				retry_later(t);
				return;
			}
			t->state = T_STAGE;
			break;
		case T_COMMIT:
			if (t->stage_err == -EMSGSIZE) {
				too_long(t);   /* a staging piece, the CAS sent behind it */
				return;
			}
			if (!t->stage_err && res == ROSHM_TXN_STATE(t->seq, ROSHM_TXN_EMPTY)) {
				RD_STAT_ADD(t->e->p->stats.txn_committed, 1);
				txn_finish(t, 0);
				return;
			}
			if (ROSHM_TXN_SEQ(res) < t->seq) {
				/* The slot still holds an earlier sequence: s is
				 * ours, staged too early (refused: -ECANCELED over
				 * tcp). Wait for the slot, then stage again. */
				t->committing = false;
				t->state = T_WAIT;
				break;
			}
			/* Aborted as a hole (we were too slow), or the record did not
			 * land (the owner rejects a committed bad record): replay
			 * with a new sequence. */
			RD_STAT_ADD(t->e->p->stats.txn_replayed, 1);
			fresh_attempt(t);
			break;
		case T_CHECK: {
			int o = check_outcome(t);

			if (o == 1) {
				RD_STAT_ADD(t->e->p->stats.txn_committed, 1);
				txn_finish(t, 0);
				return;
			}
			if (o == -2) {
				txn_finish(t, -EIO); /* unknowable: say so, never guess */
				return;
			}
			RD_STAT_ADD(t->e->p->stats.txn_replayed, 1);
			if (o == 0) {
				t->state = T_STAGE;
			} else {
				fresh_attempt(t);
			}
			break;
		}
		default:
			return;
		}
		if (steps >= STEPS_PER_ROUND) {
			t->retry_at = now; /* the tick issues the step next round */
			return;
		}
		if (!step_issue(t, &st, &res))
			return;
	}
}

void rd_txn_complete(struct rd_txn *t, uint8_t opcode, int32_t status, uint64_t result)
{
	t->outstanding--;
	if (opcode == ROSHM_OP_WRITE && (t->state == T_COMMIT || t->state == T_STAGE)) {
		if (status && !t->stage_err)
			t->stage_err = status; /* a staging write */
	} else {
		t->have_last = true;
		t->last_st = status;
		t->last_res = result;
	}
	/* Act once everything of this step has answered (a lost connection
	 * fails them in any order). */
	if (t->outstanding)
		return;
	if (t->state == T_STAGE) {
		/* pieces of a record sent before the transport filled up: the
		 * tick sends the rest, unless one failed (then as a failed
		 * staging write, the CAS not sent) */
		if (t->stage_err) {
			t->stage_done = 0;
			t->state = T_COMMIT;
			advance(t, t->stage_err, 0);
		}
		return;
	}
	if (t->state == T_COMMIT && !t->cas_sent) {
		if (t->stage_err)
			advance(t, t->stage_err, 0);
		return; /* the tick sends the CAS */
	}
	if (!t->have_last)
		return;
	t->have_last = false;
	advance(t, t->last_st, t->last_res);
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
	((struct roshm_txn_slot *)t->img)->txn_id = new_id(e);
	t->t0 = rte_rdtsc();
	t->user_data = s->user_data;
	t->outstanding = 0;
	t->have_last = false;
	t->retry_at = 0;
	t->deadline = rte_get_timer_cycles() + us_to_cycles(e, (uint64_t)p->cfg->txn_deadline_ms * 1000);
	t->gen = t->region->gen;
	fresh_attempt(t);
	e->active++;
	if (step_issue(t, &st, &res))
		advance(t, st, res);
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
				txn_finish(t, -ETIMEDOUT);
				continue;
			}
			if (step_issue(t, &st, &res))
				advance(t, st, res);
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
