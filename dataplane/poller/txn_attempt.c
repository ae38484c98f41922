// SPDX-License-Identifier: MIT
/*
 * One transaction's attempts on the wire (txn.h has the protocol): a
 * reserve or a one-request commit, the staging WRITEs (in pieces of the
 * transport's message), the commit CAS, and the reads that find out an
 * outcome; each answer moves it on (rd_txn_advance). Poller thread only.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include <rte_cycles.h>

#include "poller/txn_int.h"

/*
 * A new attempt, with a new sequence: in one request where the region's
 * transport takes one (tcp: TXN_COMMIT, roshm/wire.h), else the reserve of
 * the two-round-trip protocol.
 */
void rd_txn_fresh_attempt(struct rd_txn *t)
{
	const struct rd_region *rg = t->region;

	t->have_seq = false;
	t->committing = false;
	t->again = false;
	t->stage_done = 0;
	if (rg->xport->txn_one && t->staged_len <= rg->xport->max_msg && !t->small) {
		t->id = rd_txn_new_id(t->e);
		t->lb = rg->txn_lb > rg->txn_hint ? rg->txn_lb : rg->txn_hint;
		t->state = T_ONE;
	} else {
		t->state = T_RESERVE;
	}
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
			rd_txn_fresh_attempt(t);
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

int rd_txn_step(struct rd_txn *t, int32_t *st, uint64_t *res)
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

		if (t->small && max > RD_TCP_MAX_MSG_MIN)
			max = RD_TCP_MAX_MSG_MIN;

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
	if (!t->small && t->staged_len > RD_TCP_MAX_MSG_MIN) {
		t->small = true;
		RD_STAT_ADD(t->e->p->stats.txn_replayed, 1);
		rd_txn_fresh_attempt(t);
		retry_later(t);
		return;
	}
	rd_txn_finish(t, -EMSGSIZE);
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
	case -EMSGSIZE:
		/* Nothing of this request ran (refused on its length before
		 * anything: tcp_rx.c). But when it asked after an attempt whose
		 * answer was lost (a node restarted with a smaller max_msg
		 * since), that attempt may have committed: unknowable, say so
		 * (a new attempt could apply it twice). */
		if (t->again) {
			rd_txn_finish(t, -EIO);
			return -1;
		}
		too_long(t);
		return t->state == T_FREE ? -1 : 0;
	case -ESTALE: case -EIO: case -EOPNOTSUPP: case -EACCES:
		rd_txn_finish(t, st); /* the owner's answer (EIO: the outcome is lost) */
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
		rd_txn_fresh_attempt(t);
		retry_later(t);
		return 0;
	}
	saw_seq(t->region, s);
	switch (ROSHM_TCP_TXN_KIND(res)) {
	case ROSHM_TCP_TXN_COMMITTED:
		t->seq = s;
		RD_STAT_ADD(t->e->p->stats.txn_committed, 1);
		RD_STAT_ADD(t->e->p->stats.txn_one, 1);
		rd_txn_finish(t, 0);
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
		rd_txn_fresh_attempt(t);
		return 1;
	default:
		rd_txn_finish(t, -EIO); /* no answer of the protocol */
		return -1;
	}
}

/* Advance with the result of the step that just completed. Steps that
 * complete at once (a local region) go on here, at most STEPS_PER_ROUND of
 * them: the rest waits for the next round (a log full of a hostile owner's
 * numbers cannot hold the poller). */
void rd_txn_advance(struct rd_txn *t, int32_t st, uint64_t res)
{
	for (unsigned steps = 0;; steps++) {
		uint64_t now = rte_get_timer_cycles();

		if (now >= t->deadline) {
			rd_txn_finish(t, -ETIMEDOUT);
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
				rd_txn_finish(t, st);
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
				rd_txn_fresh_attempt(t);
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
				rd_txn_finish(t, 0);
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
			rd_txn_fresh_attempt(t);
			break;
		case T_CHECK: {
			int o = check_outcome(t);

			if (o == 1) {
				RD_STAT_ADD(t->e->p->stats.txn_committed, 1);
				rd_txn_finish(t, 0);
				return;
			}
			if (o == -2) {
				rd_txn_finish(t, -EIO); /* unknowable: say so, never guess */
				return;
			}
			RD_STAT_ADD(t->e->p->stats.txn_replayed, 1);
			if (o == 0) {
				t->state = T_STAGE;
			} else {
				rd_txn_fresh_attempt(t);
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
		if (!rd_txn_step(t, &st, &res))
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
			rd_txn_advance(t, t->stage_err, 0);
		}
		return;
	}
	if (t->state == T_COMMIT && !t->cas_sent) {
		if (t->stage_err)
			rd_txn_advance(t, t->stage_err, 0);
		return; /* the tick sends the CAS */
	}
	if (!t->have_last)
		return;
	t->have_last = false;
	rd_txn_advance(t, t->last_st, t->last_res);
}
