// SPDX-License-Identifier: MIT
/*
 * The owner's half of a tcp TXN_COMMIT (dataplane/poller/txn_owner.c) on a
 * region in plain memory: reserve, record, commit; and the look for an
 * attempt sent again (F_AGAIN) after its answer was lost, which must never
 * run a transaction that ran, and never say "unknown" when it can prove the
 * first attempt never ran:
 *   - outcomes recorded out of sequence order (records finish in any order)
 *     and then evicted must not make the record claim more than it holds
 *     (found by a review: the bound went backwards and a committed
 *     transaction was judged "never ran", then run again);
 *   - a look that proved "never ran" on a full log says NOT_RUN, so that
 *     the writer's next try needs no look (it used to get EAGAIN, look
 *     again later, and end with EIO once the log had moved on);
 *   - after a restart the record is refilled from the log;
 *   - past what the record and the log prove: EIO.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "roshmd.h"
#include "poller/txn.h"
#include "roshm/wire.h"

#define SLOT_SIZE 256u
#define LEN (sizeof(struct roshm_txn_slot) - ROSHM_TXN_STAGE_OFF + sizeof(struct roshm_txn_seg) + 8)

static struct rd_region rg;
static uint8_t *map;

static void region(uint32_t slots)
{
	size_t sz = ROSHM_REGION_HDR_SIZE + (size_t)slots * SLOT_SIZE + 4096;

	free(map);
	free(rg.txn_ids);
	memset(&rg, 0, sizeof(rg));
	map = calloc(1, sz);
	assert_non_null(map);
	rg.map = map;
	rg.txn_slots = slots;
	rg.slot_size = SLOT_SIZE;
	rg.data = map + ROSHM_REGION_HDR_SIZE + (size_t)slots * SLOT_SIZE;
	rg.data_size = 4096;
	for (uint32_t i = 0; i < slots; i++)
		((struct roshm_txn_slot *)(void *)(map + ROSHM_REGION_HDR_SIZE +
						   (size_t)i * SLOT_SIZE))->state =
			ROSHM_TXN_STATE(i, ROSHM_TXN_EMPTY);
	rg.txn_ids = calloc(1, sizeof(*rg.txn_ids));
	assert_non_null(rg.txn_ids);
}

static struct roshm_region_hdr *hdr(void)
{
	return (struct roshm_region_hdr *)(void *)map;
}

/* The record as the writer sends it, received into the slot of @seq. */
static void stage(uint64_t seq, uint64_t id)
{
	struct roshm_txn_slot *sl = (void *)(rd_txn_one_dst(&rg, seq) - ROSHM_TXN_STAGE_OFF);

	sl->seq = UINT64_MAX;
	sl->txn_id = id;
	sl->nseg = 1;
	sl->payload_len = 8;
	sl->seg[0].off = 0;
	sl->seg[0].len = 8;
	memcpy(&sl->seg[1], "XXXXXXXX", 8);
}

/* begin: 0 reserved (*seq), or 1 with *st and *res. */
static int begin(uint64_t id, uint64_t lb, bool again, uint64_t *seq, int32_t *st, uint64_t *res)
{
	*seq = UINT64_MAX;
	return rd_txn_one_begin(&rg, id, lb, again, LEN, seq, st, res);
}

/* A whole one-round-trip commit; returns its sequence. */
static uint64_t commit(uint64_t id, uint64_t lb)
{
	uint64_t seq, res;
	int32_t st;

	assert_int_equal(begin(id, lb, false, &seq, &st, &res), 0);
	stage(seq, id);
	res = rd_txn_one_end(&rg, id, seq, LEN);
	assert_int_equal(ROSHM_TCP_TXN_KIND(res), ROSHM_TCP_TXN_COMMITTED);
	assert_int_equal(ROSHM_TCP_TXN_SEQ(res), seq);
	return seq;
}

/* The owner applied everything up to the tail: slots free again. */
static void apply_all(void)
{
	uint64_t tail = hdr()->txn_tail;

	for (uint64_t q = rg.applied; q < tail; q++) {
		struct roshm_txn_slot *sl = (void *)(rd_txn_one_dst(&rg, q) - ROSHM_TXN_STAGE_OFF);
		uint32_t k = ROSHM_TXN_KIND(sl->state) == ROSHM_TXN_COMMITTED ? ROSHM_TXN_APPLIED
									      : ROSHM_TXN_ABORTED;

		memmove(&sl->history[1], &sl->history[0], sizeof(sl->history[0]) * 2);
		sl->history[0] = ROSHM_TXN_STATE(q, k);
		sl->state = ROSHM_TXN_STATE(q + rg.txn_slots, ROSHM_TXN_EMPTY);
	}
	rg.applied = tail;
	hdr()->txn_applied = tail;
}

static void test_commit_and_found(void **state)
{
	uint64_t seq, res;
	int32_t st;

	(void)state;
	region(16);
	assert_int_equal(commit(0x11, 0), 0);
	assert_int_equal(commit(0x12, 1), 1);
	struct roshm_txn_slot *sl = (void *)(rd_txn_one_dst(&rg, 1) - ROSHM_TXN_STAGE_OFF);

	assert_int_equal(sl->seq, 1); /* filled in by the owner */
	assert_int_equal(sl->state, ROSHM_TXN_STATE(1, ROSHM_TXN_COMMITTED));
	/* sent again: found, not run again */
	assert_int_equal(begin(0x12, 1, true, &seq, &st, &res), 1);
	assert_int_equal(st, 0);
	assert_int_equal(ROSHM_TCP_TXN_KIND(res), ROSHM_TCP_TXN_COMMITTED);
	assert_int_equal(ROSHM_TCP_TXN_SEQ(res), 1);
	assert_int_equal(hdr()->txn_tail, 2);
	/* an attempt that never ran (the record proves it): runs as new */
	assert_int_equal(begin(0x13, 2, true, &seq, &st, &res), 0);
	assert_int_equal(seq, 2);
}

static void test_out_of_order_eviction(void **state)
{
	uint64_t seq, res, s_slow, s_w;
	int32_t st;

	(void)state;
	region(2048);
	/* a big record reserves 0 and is still coming in */
	assert_int_equal(begin(0xA, 0, false, &s_slow, &st, &res), 0);
	/* writer W: 1 committed and answered (its bound is now 2), then 2
	 * committed with its answer lost */
	assert_int_equal(commit(0xC, 0), 1);
	s_w = commit(0xB, 2);
	assert_int_equal(s_w, 2);
	/* the big record finishes */
	stage(s_slow, 0xA);
	res = rd_txn_one_end(&rg, 0xA, s_slow, LEN);
	assert_int_equal(ROSHM_TCP_TXN_KIND(res), ROSHM_TCP_TXN_COMMITTED);
	/* RD_TXN_IDS more: 1, 2 and then 0 fall out of the record */
	for (uint64_t i = 0; i < RD_TXN_IDS; i++)
		commit(0x1000 + i, 0);
	assert_true(rg.txn_ids->evicted >= 3);
	/* W sends 2 again: the record no longer has it and does not cover its
	 * bound (513 sequences back, more than one look reads of the log):
	 * never run again; "unknown", or found committed */
	assert_int_equal(begin(0xB, 2, true, &seq, &st, &res), 1);
	if (st != -EIO) {
		assert_int_equal(st, 0);
		assert_int_equal(ROSHM_TCP_TXN_KIND(res), ROSHM_TCP_TXN_COMMITTED);
		assert_int_equal(ROSHM_TCP_TXN_SEQ(res), 2);
	}
	assert_int_equal(hdr()->txn_tail, 3 + RD_TXN_IDS);
}

static void test_not_run_on_full_log(void **state)
{
	uint64_t seq, res;
	int32_t st;

	(void)state;
	region(4);
	for (uint64_t i = 0; i < 4; i++)
		commit(0x20 + i, i);
	/* full: a new attempt waits (EAGAIN) */
	assert_int_equal(begin(0x30, 4, false, &seq, &st, &res), 1);
	assert_int_equal(st, -EAGAIN);
	/* an attempt sent again that never ran: NOT_RUN, nothing reserved */
	assert_int_equal(begin(0x31, 4, true, &seq, &st, &res), 1);
	assert_int_equal(st, 0);
	assert_int_equal(ROSHM_TCP_TXN_KIND(res), ROSHM_TCP_TXN_NOT_RUN);
	assert_int_equal(hdr()->txn_tail, 4);
	/* draining: the same */
	apply_all();
	rg.draining = true;
	assert_int_equal(begin(0x32, 4, true, &seq, &st, &res), 1);
	assert_int_equal(ROSHM_TCP_TXN_KIND(res), ROSHM_TCP_TXN_NOT_RUN);
	assert_int_equal(begin(0x33, 4, false, &seq, &st, &res), 1);
	assert_int_equal(st, -EAGAIN);
	/* but one that ran is still found */
	assert_int_equal(begin(0x23, 3, true, &seq, &st, &res), 1);
	assert_int_equal(st, 0);
	assert_int_equal(ROSHM_TCP_TXN_KIND(res), ROSHM_TCP_TXN_COMMITTED);
	assert_int_equal(ROSHM_TCP_TXN_SEQ(res), 3);
}

static void test_refilled_after_restart(void **state)
{
	uint64_t seq, res, tail;
	int32_t st;

	(void)state;
	region(8);
	for (uint64_t i = 0; i < 6; i++)
		commit(0x40 + i, i);
	apply_all();
	commit(0x46, 6); /* committed, not applied yet */
	/* 7: reserved, its record half in, roshmd killed before the commit */
	assert_int_equal(begin(0x47, 7, false, &seq, &st, &res), 0);
	stage(seq, 0x47);
	/* roshmd restarts: the record of outcomes is gone, refilled from the log */
	tail = hdr()->txn_tail;
	memset(rg.txn_ids, 0, sizeof(*rg.txn_ids));
	rd_txn_ids_from_log(&rg, tail);
	/* applied (history) and committed ones are found */
	assert_int_equal(begin(0x43, 3, true, &seq, &st, &res), 1);
	assert_int_equal(ROSHM_TCP_TXN_KIND(res), ROSHM_TCP_TXN_COMMITTED);
	assert_int_equal(ROSHM_TCP_TXN_SEQ(res), 3);
	assert_int_equal(begin(0x46, 6, true, &seq, &st, &res), 1);
	assert_int_equal(ROSHM_TCP_TXN_KIND(res), ROSHM_TCP_TXN_COMMITTED);
	assert_int_equal(ROSHM_TCP_TXN_SEQ(res), 6);
	/* the one cut before its commit never ran: not found, runs as new */
	assert_int_equal(begin(0x47, 7, true, &seq, &st, &res), 0);
	assert_int_equal(seq, 8);
}

static void test_unknowable(void **state)
{
	uint64_t seq, res;
	int32_t st;

	(void)state;
	region(4);
	for (uint64_t i = 0; i < 3; i++) {
		commit(0x50 + i, i);
		apply_all();
	}
	/* the record forgets everything before 3 (a restart with nothing in
	 * the log to refill it from), and the log was recycled past 0 */
	for (uint64_t i = 3; i < 9; i++) {
		commit(0x60 + i, i);
		apply_all();
	}
	memset(rg.txn_ids, 0, sizeof(*rg.txn_ids));
	rg.txn_ids->since = hdr()->txn_tail;
	/* an attempt with bound 0: neither the record nor the log can tell */
	assert_int_equal(begin(0x99, 0, true, &seq, &st, &res), 1);
	assert_int_equal(st, -EIO);
	/* a bound the log still covers: proved absent, runs */
	assert_int_equal(begin(0x98, 6, true, &seq, &st, &res), 0);
	assert_int_equal(seq, 9);
}

static int teardown(void **state)
{
	(void)state;
	free(map);
	free(rg.txn_ids);
	map = NULL;
	rg.txn_ids = NULL;
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_commit_and_found),
		cmocka_unit_test(test_out_of_order_eviction),
		cmocka_unit_test(test_not_run_on_full_log),
		cmocka_unit_test(test_refilled_after_restart),
		cmocka_unit_test(test_unknowable),
	};

	return cmocka_run_group_tests_name("txn_one", tests, NULL, teardown);
}
