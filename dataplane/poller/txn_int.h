/* SPDX-License-Identifier: MIT */
/*
 * The transaction engine's insides, shared by txn.c (the contexts, the
 * clients' TXN_WRITE and TXN_COMMIT, the tick) and txn_attempt.c (an
 * attempt's steps on the wire: reserve or one request, stage, commit,
 * check). Poller thread only.
 */
#ifndef RD_TXN_INT_H
#define RD_TXN_INT_H

#include <stdbool.h>
#include <stdint.h>

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
	bool small;                   /* the owner's node took no TXN_COMMIT this long: pieces of RD_TCP_MAX_MSG_MIN */
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
/* Steps one transaction may take in one call when they complete at once
 * (local regions): a hostile owner's header must not keep the poller. */
#define STEPS_PER_ROUND 8
/* Staged bytes the owner side applies per poll round, over all regions. */
#define APPLY_BUDGET (1u << 20)

static inline uint64_t us_to_cycles(const struct rd_txn_engine *e, uint64_t us)
{
	return e->hz / 1000000 * us;
}

/* A lower bound of the region's txn_tail seen from here: @seq was reserved. */
static inline void saw_seq(struct rd_region *rg, uint64_t seq)
{
	if (seq + 1 > rg->txn_lb)
		rg->txn_lb = seq + 1;
}

static inline uint64_t slot_off(const struct rd_txn *t)
{
	return ROSHM_REGION_HDR_SIZE + (t->seq % t->region->txn_slots) * t->region->slot_size;
}

uint64_t rd_txn_new_id(struct rd_txn_engine *e);
void rd_txn_finish(struct rd_txn *t, int32_t status);
void rd_txn_fresh_attempt(struct rd_txn *t);
int rd_txn_step(struct rd_txn *t, int32_t *st, uint64_t *res);
void rd_txn_advance(struct rd_txn *t, int32_t st, uint64_t res);

#endif
