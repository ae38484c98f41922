// SPDX-License-Identifier: MIT
/*
 * Defect 1: the owner-side apply (txn.c apply_region) validates a committed
 * slot in place (slot_valid) and then applies it by reading nseg, seg[].off,
 * seg[].len again from the same shared memory, which the region's owner maps
 * and may write at any time.
 *
 * The attacker (tenant "a") is the owner: it writes a valid record straight
 * into its own log (seq, two segments, payload, the crc32c roshmd checks),
 * sets the state word to COMMITTED(seq) and advances txn_tail; one of its
 * threads watches the region's seqlock, and the moment roshmd's applier makes
 * it odd (validation done, copying begun) it rewrites, per test:
 *   test_flip_seg_off   seg[1].off  -> 16 TiB
 *   test_flip_seg_len   seg[1].len  -> 2 GiB
 *   test_flip_nseg      nseg        -> 16 (seg[2..15] come from the payload:
 *                                    16 TiB offsets)
 * seg[0] is 60000 bytes long, so the applier is still copying it when the
 * rewrite lands. Repeated up to 2000 times. Expected: roshmd stays up, every
 * applied transaction is exactly the validated record (both segments, nothing
 * else), tenant "b"'s client and canary region (checked byte for byte) are
 * unharmed.
 *
 * How it fails on today's code (main at ddc53d9), 5 of 5 runs for each test:
 *   "roshmd sec-df is gone: killed by signal 11 (Segmentation fault) after N
 *    transactions, 1 rewrites" - at the first rewrite that lands while
 *   roshmd applies (N was 0 to 34: earlier rewrites came too late).
 * The test fails, rather than passes, if fewer than 10 rewrites landed in
 * 2000 transactions (a machine too busy to run the attack); against a
 * roshmd that applies a private copy, 500 to 830 of them landed here.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "attack.h"

#define SLOTS 4
#define SLOT_SIZE 65536u
#define DATA (1u << 20)
#define L0 60000u                     /* long enough to be copying when the rewrite lands */
#define L1 64u
#define OFF1 65536u
#define HDR (sizeof(struct roshm_txn_slot) + 2 * sizeof(struct roshm_txn_seg))
#define ITERS 2000
#define FAR (1ull << 44)

enum flip { FLIP_OFF, FLIP_LEN, FLIP_NSEG };

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#else
#define cpu_relax() __asm__ volatile("" ::: "memory")
#endif

static struct th_daemon d;
static struct atk_bystander by;

struct flipper {
	struct roshm_region_hdr *h;
	enum flip what;
	volatile int stop;
	volatile int armed;           /* main -> flipper: seq below is committed */
	volatile uint64_t seq;
	volatile uint64_t hits;       /* rewrites done while roshmd applied */
};

static void *flipper_main(void *arg)
{
	struct flipper *f = arg;

	/* roshmd's poller runs on the second CPU of its affinity: stay on the first */
	atk_pin(0);
	while (!f->stop) {
		uint64_t sq = __atomic_load_n(&f->h->seqlock, __ATOMIC_ACQUIRE);

		if (!(sq & 1) || !__atomic_load_n(&f->armed, __ATOMIC_ACQUIRE)) {
			cpu_relax();
			continue;
		}
		struct roshm_txn_slot *sl = atk_slot(f->h, f->seq);

		switch (f->what) {
		case FLIP_OFF:
			__atomic_store_n(&sl->seg[1].off, FAR, __ATOMIC_RELAXED);
			break;
		case FLIP_LEN:
			__atomic_store_n(&sl->seg[1].len, 0x7fffffffu, __ATOMIC_RELAXED);
			break;
		case FLIP_NSEG:
			__atomic_store_n(&sl->nseg, ROSHM_TXN_MAX_SEGS, __ATOMIC_RELAXED);
			break;
		}
		f->hits++;
		__atomic_store_n(&f->armed, 0, __ATOMIC_RELEASE);
		while (!f->stop && __atomic_load_n(&f->h->seqlock, __ATOMIC_ACQUIRE) == sq)
			cpu_relax();
	}
	return NULL;
}

static uint8_t pat(uint64_t seq, uint32_t i)
{
	return (uint8_t)(seq * 7 + i * 13 + 1);
}

/* One committed record for @seq written by the owner itself; @p0/@p1 get
 * the payload it carries. */
static void craft(struct roshm_region_hdr *h, uint64_t seq, enum flip what, uint8_t *p0,
		  uint8_t *p1)
{
	struct roshm_txn_slot *sl = atk_slot(h, seq);
	uint8_t *payload = (uint8_t *)sl + HDR;

	for (uint32_t i = 0; i < L0; i++)
		p0[i] = pat(seq, i);
	for (uint32_t i = 0; i < L1; i++)
		p1[i] = pat(seq, i + 99);
	if (what == FLIP_NSEG) {
		/* what seg[2..15] read as once nseg says 16: far away */
		struct roshm_txn_seg fake = { .off = FAR, .len = 64 };

		for (int k = 0; k < ROSHM_TXN_MAX_SEGS - 2; k++)
			memcpy(p0 + k * sizeof(fake), &fake, sizeof(fake));
	}
	sl->seq = seq;
	sl->txn_id = 0x5ec0000000000000ull | seq;
	sl->nseg = 2;
	sl->payload_len = L0 + L1;
	sl->crc = 0;
	sl->rsvd = 0;
	sl->seg[0] = (struct roshm_txn_seg){ .off = 0, .len = L0 };
	sl->seg[1] = (struct roshm_txn_seg){ .off = OFF1, .len = L1 };
	memcpy(payload, p0, L0);
	memcpy(payload + L0, p1, L1);
	sl->crc = atk_staged_crc((uint8_t *)sl + ROSHM_TXN_STAGE_OFF,
				 (uint32_t)(HDR + L0 + L1 - ROSHM_TXN_STAGE_OFF));
}

static void run(enum flip what)
{
	struct roshm_region_opts o = { .txn_slots = SLOTS, .slot_size = SLOT_SIZE };
	static uint8_t p0[L0], p1[L1];
	struct roshm_region_hdr *h;
	struct flipper f = { .what = what };
	pthread_t th;
	struct roshm *a;
	uint8_t *data;
	uint32_t hl;
	int err, applied = 0, aborted = 0, iters = 0;

	a = atk_open(&d, "a", NULL, &err);
	assert_non_null(a);
	assert_int_equal(roshm_region_create(a, "df", DATA, &o, &hl), 0);
	data = roshm_region_data(a, hl, NULL);
	h = atk_region_hdr(a, hl, SLOTS, SLOT_SIZE);
	assert_int_equal(h->magic, ROSHM_REGION_MAGIC);

	/* Our crc is roshmd's: a transaction of its own leaves its record in the slot. */
	{
		struct roshm_txn_write w = { .off = 0, .arena_off = 0, .len = 64 };
		struct roshm_txn_slot *sl = atk_slot(h, 0);

		memset(roshm_arena(a, NULL), 0x3c, 64);
		assert_int_equal(roshm_txn_sync(a, hl, &w, 1, NULL), 0);
		for (int i = 0; i < 500 && h->txn_applied < 1; i++)
			usleep(10000);
		assert_int_equal(h->txn_applied, 1);
		assert_int_equal(atk_staged_crc((uint8_t *)sl + ROSHM_TXN_STAGE_OFF,
						(uint32_t)(sizeof(*sl) + sizeof(sl->seg[0]) + 64 -
							   ROSHM_TXN_STAGE_OFF)), sl->crc);
	}

	f.h = h;
	assert_int_equal(pthread_create(&th, NULL, flipper_main, &f), 0);
	/* No fail_msg while the flipper runs: note the first failure, stop it, then fail. */
	char why[256] = "";

	for (; iters < ITERS && atk_alive(&d) && !why[0]; iters++) {
		uint64_t seq = __atomic_load_n(&h->txn_applied, __ATOMIC_ACQUIRE);
		struct roshm_txn_slot *sl = atk_slot(h, seq);
		uint64_t st = __atomic_load_n(&sl->state, __ATOMIC_ACQUIRE);

		if (st != ROSHM_TXN_STATE(seq, ROSHM_TXN_EMPTY)) {
			snprintf(why, sizeof(why), "slot of sequence %llu is in state %#llx, not EMPTY",
				 (unsigned long long)seq, (unsigned long long)st);
			break;
		}
		craft(h, seq, what, p0, p1);
		f.seq = seq;
		__atomic_store_n(&f.armed, 1, __ATOMIC_RELEASE);
		__atomic_store_n(&sl->state, ROSHM_TXN_STATE(seq, ROSHM_TXN_COMMITTED), __ATOMIC_RELEASE);
		if (__atomic_load_n(&h->txn_tail, __ATOMIC_ACQUIRE) <= seq)
			__atomic_store_n(&h->txn_tail, seq + 1, __ATOMIC_RELEASE);
		/* wake the poller if it sleeps; it applies on its next rounds */
		if (roshm_nop_sync(a))
			break;
		for (int i = 0; i < 10000 && __atomic_load_n(&h->txn_applied, __ATOMIC_ACQUIRE) <= seq &&
				atk_alive(&d); i++)
			usleep(200);
		__atomic_store_n(&f.armed, 0, __ATOMIC_RELEASE);
		if (!atk_alive(&d))
			break;
		if (__atomic_load_n(&h->txn_applied, __ATOMIC_ACQUIRE) <= seq) {
			snprintf(why, sizeof(why), "transaction %llu was never applied nor aborted",
				 (unsigned long long)seq);
			break;
		}
		uint64_t out = sl->history[0];

		if (out == ROSHM_TXN_STATE(seq, ROSHM_TXN_APPLIED)) {
			/* exactly the record that was validated */
			if (memcmp(data, p0, L0) || memcmp(data + OFF1, p1, L1))
				snprintf(why, sizeof(why), "transaction %llu: the bytes applied are not "
					 "the validated record's", (unsigned long long)seq);
			for (uint32_t i = OFF1 + L1; i < OFF1 + L1 + 4096 && !why[0]; i++)
				if (data[i])
					snprintf(why, sizeof(why), "transaction %llu wrote past its "
						 "segments (byte %u)", (unsigned long long)seq, i);
			applied++;
		} else if (out == ROSHM_TXN_STATE(seq, ROSHM_TXN_ABORTED)) {
			aborted++;
		} else {
			snprintf(why, sizeof(why), "transaction %llu: outcome %#llx in the slot's history",
				 (unsigned long long)seq, (unsigned long long)out);
		}
	}
	f.stop = 1;
	pthread_join(th, NULL);
	print_message("%d transactions: %d applied, %d aborted, %llu rewrites while applying\n", iters,
		      applied, aborted, (unsigned long long)f.hits);
	if (!atk_alive(&d)) {
		atk_log_tail(&d, 10);
		fail_msg("roshmd %s is gone: %s after %d transactions, %llu rewrites", d.name, atk_how(&d),
			 iters, (unsigned long long)f.hits);
	}
	if (why[0])
		fail_msg("%s", why);
	/* the attack must actually have happened for the test to mean anything */
	if (f.hits < 10)
		fail_msg("only %llu rewrites landed while roshmd applied: the machine is too busy to "
			 "tell", (unsigned long long)f.hits);
	roshm_close(a);
	atk_bystander_check(&by);
	atk_assert_alive(&d);
}

static void test_flip_seg_off(void **state)
{
	(void)state;
	run(FLIP_OFF);
}

static void test_flip_seg_len(void **state)
{
	(void)state;
	run(FLIP_LEN);
}

static void test_flip_nseg(void **state)
{
	(void)state;
	run(FLIP_NSEG);
}

static int setup(void **state)
{
	(void)state;
	th_cleanup_enable();
	if (th_daemon_start(&d, "sec-df", ATK_TENANTS "channel: { hugepages = \"off\"; };\n"))
		return -1;
	return atk_bystander_start(&by, &d, "b", "by-df") ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	atk_bystander_stop(&by);
	atk_daemon_kill(&d);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_flip_seg_off, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flip_seg_len, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flip_nseg, setup, teardown),
	};

	return cmocka_run_group_tests_name("txn_double_fetch", tests, NULL, NULL);
}
