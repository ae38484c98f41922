// SPDX-License-Identifier: MIT
/*
 * Transaction tests that fail when the engine is mutated in ways the rest
 * of the suite would miss (issue 10, "tests that can fail where they must"):
 *  - a committed record whose crc32c is wrong is never applied (a roshmd that
 *    skips the crc check applies it: the data area changes);
 *  - with a log of one slot, every transaction waits for the one before it
 *    to be applied: a txn_applied that lags, or is published late, makes the
 *    writers wait past their deadline instead of finishing;
 * both with exact counts of what was applied (txn_applied - txn_aborted).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "attack.h"

static struct th_daemon d;

#define SLOTS 4
#define SLOT_SIZE 512u

/* The owner writes a committed record of 8 bytes at data offset 0 into its
 * own log, with its crc right or wrong by one bit. */
static void craft(struct roshm_region_hdr *h, uint64_t seq, uint8_t fill, bool good_crc)
{
	struct roshm_txn_slot *sl = atk_slot(h, seq);
	uint8_t *payload = (uint8_t *)&sl->seg[1];
	uint32_t staged = (uint32_t)(sizeof(*sl) + sizeof(sl->seg[0]) + 8 - ROSHM_TXN_STAGE_OFF);

	sl->seq = seq;
	sl->txn_id = 0x1234;
	sl->nseg = 1;
	sl->payload_len = 8;
	sl->rsvd = 0;
	sl->seg[0].off = 0;
	sl->seg[0].len = 8;
	sl->seg[0].rsvd = 0;
	memset(payload, fill, 8);
	sl->crc = 0;
	sl->crc = atk_staged_crc((uint8_t *)sl + ROSHM_TXN_STAGE_OFF, staged) ^ (good_crc ? 0 : 1);
	__atomic_store_n(&sl->state, ROSHM_TXN_STATE(seq, ROSHM_TXN_COMMITTED), __ATOMIC_RELEASE);
	__atomic_store_n(&h->txn_tail, seq + 1, __ATOMIC_RELEASE);
}

static void wait_applied(struct roshm *r, struct roshm_region_hdr *h, uint64_t n)
{
	/* a NOP wakes a sleeping poller; the applier runs on its rounds */
	assert_int_equal(roshm_nop_sync(r), 0);
	for (int i = 0; i < 500 && __atomic_load_n(&h->txn_applied, __ATOMIC_ACQUIRE) < n; i++)
		usleep(10000);
	assert_int_equal(__atomic_load_n(&h->txn_applied, __ATOMIC_ACQUIRE), n);
}

static void test_bad_crc_never_applied(void **state)
{
	struct roshm_region_opts o = { .txn_slots = SLOTS, .slot_size = SLOT_SIZE };
	struct roshm_region_hdr *h;
	struct roshm *a;
	uint8_t *data;
	uint32_t hl;
	int err;

	(void)state;
	a = atk_open(&d, "a", NULL, &err);
	assert_non_null(a);
	assert_int_equal(roshm_region_create(a, "crc", 4096, &o, &hl), 0);
	data = roshm_region_data(a, hl, NULL);
	h = atk_region_hdr(a, hl, SLOTS, SLOT_SIZE);
	/* a record with a wrong crc: recycled as aborted, the data untouched */
	craft(h, 0, 0xaa, false);
	wait_applied(a, h, 1);
	for (int i = 0; i < 8; i++)
		assert_int_equal(data[i], 0);
	assert_int_equal(h->txn_aborted, 1);
	assert_int_equal(atk_slot(h, 0)->history[0], ROSHM_TXN_STATE(0, ROSHM_TXN_ABORTED));
	/* the same record with its crc right is applied: the check is what tells */
	craft(h, 1, 0xbb, true);
	wait_applied(a, h, 2);
	for (int i = 0; i < 8; i++)
		assert_int_equal(data[i], 0xbb);
	assert_int_equal(h->txn_aborted, 1);
	assert_int_equal(atk_slot(h, 1)->history[0], ROSHM_TXN_STATE(1, ROSHM_TXN_APPLIED));
	roshm_close(a);
	atk_assert_alive(&d);
}

#define WRITERS 2
#define PER_WRITER 300

struct writer_arg {
	int w;
};

/* Tenant b's writer: PER_WRITER transactions of two writes each, into a
 * region whose log has one slot. Each writes its own record and its own
 * high-water mark. */
static int writer_main(void *arg)
{
	struct writer_arg *wa = arg;
	struct roshm *r;
	uint32_t h;
	uint64_t *a;
	int err;

	r = atk_open(&d, "b", NULL, &err);
	if (!r || roshm_region_open(r, "a/one", &h, NULL))
		return 2;
	a = roshm_arena(r, NULL);
	for (int i = 0; i < PER_WRITER; i++) {
		struct roshm_txn_write tw[2] = {
			{ .off = ((uint64_t)wa->w * PER_WRITER + (uint64_t)i) * 16, .arena_off = 0, .len = 16 },
			{ .off = 65536 + (uint64_t)wa->w * 8, .arena_off = 16, .len = 8 },
		};

		a[0] = 0x5245434f52440000ull | (uint64_t)wa->w; /* "RECORD" | writer */
		a[1] = (uint64_t)i + 1;
		a[2] = (uint64_t)i + 1;
		err = roshm_txn_sync(r, h, tw, 2, NULL);
		if (err) {
			fprintf(stderr, "writer %d: transaction %d: %s\n", wa->w, i, roshm_strerror(err));
			return 3;
		}
	}
	roshm_close(r);
	return 0;
}

static void test_one_slot_log(void **state)
{
	struct roshm_region_opts o = { .policy = ROSHM_POLICY_LIST, .ntenants = 1, .tenants = { "b" },
				       .txn_slots = 1, .slot_size = SLOT_SIZE };
	struct writer_arg wa[WRITERS];
	struct roshm_region_hdr *h;
	struct roshm *a;
	uint64_t *data;
	pid_t pid[WRITERS];
	uint32_t hl;
	int err;

	(void)state;
	a = atk_open(&d, "a", NULL, &err);
	assert_non_null(a);
	assert_int_equal(roshm_region_create(a, "one", 1 << 17, &o, &hl), 0);
	data = roshm_region_data(a, hl, NULL);
	h = atk_region_hdr(a, hl, 1, SLOT_SIZE);
	for (int w = 0; w < WRITERS; w++) {
		wa[w].w = w;
		pid[w] = th_spawn(writer_main, &wa[w]);
	}
	for (int w = 0; w < WRITERS; w++)
		assert_int_equal(atk_wait_child(pid[w], 120000), 0);
	wait_applied(a, h, WRITERS * PER_WRITER);
	/* exactly once: as many applied as acknowledged, each record there once */
	assert_int_equal(h->txn_tail, WRITERS * PER_WRITER);
	assert_int_equal(h->txn_aborted, 0);
	for (int w = 0; w < WRITERS; w++) {
		for (int i = 0; i < PER_WRITER; i++) {
			uint64_t *rec = data + ((uint64_t)w * PER_WRITER + (uint64_t)i) * 2;

			if (rec[0] != (0x5245434f52440000ull | (uint64_t)w) || rec[1] != (uint64_t)i + 1)
				fail_msg("writer %d transaction %d: record %#llx %llu", w, i,
					 (unsigned long long)rec[0], (unsigned long long)rec[1]);
		}
		assert_int_equal(data[65536 / 8 + w], PER_WRITER);
	}
	roshm_close(a);
	atk_assert_alive(&d);
}

static int setup(void **state)
{
	(void)state;
	th_cleanup_enable();
	return th_daemon_start(&d, "sec-mut", ATK_TENANTS "channel: { hugepages = \"off\"; };\n"
			       "txn: { deadline_ms = 20000; };\n");
}

static int teardown(void **state)
{
	(void)state;
	if (th_daemon_stop(&d)) {
		th_daemon_dump_log(&d);
		return -1;
	}
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_crc_never_applied),
		cmocka_unit_test(test_one_slot_log),
	};

	return cmocka_run_group_tests_name("txn_mutations", tests, setup, teardown);
}
