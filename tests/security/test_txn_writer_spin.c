// SPDX-License-Identifier: MIT
/*
 * Defect 16: the owner of a region with a log writes its own header (it maps
 * it): a huge txn_applied and a txn_tail past the slots. A transaction into
 * that region then never leaves the writer-side loop (txn.c advance): every
 * reservation looks free (txn_hint is huge), every commit CAS fails (the
 * slot's state is tagged with another sequence), and each replay completes at
 * once on the local transport, so the loop spins inside one poll round until
 * txn.deadline_ms. Meanwhile no client of the node gets a completion, an
 * attach blocks the control thread in rd_poller_cmd, `status` stops
 * answering, and the command the control thread gave up on is later applied
 * by the poller from a dead stack frame.
 *
 * Asserted while the hostile transaction is retrying, each with a bound on
 * waiting (never a measured latency): another tenant's client completes a
 * NOP, a new client attaches, "status" answers; at the end roshmd is alive
 * and the bystander of tenant "b" was never harmed.
 *
 * Three hostile transactions back to back keep the poller in that loop for
 * 3 x txn.deadline_ms (30 s by default).
 *
 * How it fails on today's code (main at ddc53d9), 5 of 5 runs:
 *   test_huge_txn_applied    "tenant b's NOP: no completion within 3000 ms
 *                             (timed out; hostile txn_tail now ~3e7); a new
 *                             client of tenant b could not attach and complete a
 *                             NOP within 5 s (timed out); "status" did not answer
 *                             within 3 s (timed out)"
 *   test_bystander_unharmed  "bystander by-spin (another tenant) was harmed after
 *                             N rounds: iteration N: WRITE: timed out" (its bound
 *                             is 20 s)
 * roshmd itself survives these 30 s: the control thread's rd_poller_cmd waits
 * 500000 x nanosleep(20 us), which is about 39 s here, not the 10 s it logs.
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

#define SLOTS 4
#define SLOT_SIZE 128
#define HOSTILE 3

static struct th_daemon d;
static struct atk_bystander by;

static int attach_b(void *arg)
{
	int err;
	struct roshm *r = atk_open(arg, "b", NULL, &err);

	if (!r)
		return 1;
	err = roshm_nop_sync(r);
	roshm_close(r);
	return err ? 2 : 0;
}

static void test_huge_txn_applied(void **state)
{
	struct roshm_region_opts o = { .txn_slots = SLOTS, .slot_size = SLOT_SIZE };
	struct roshm *a, *b;
	struct roshm_region_hdr *h;
	struct roshm_sqe *s;
	struct roshm_cqe c;
	char *json = NULL;
	uint32_t hl;
	int err, st;

	(void)state;
	/* the victim is attached before the attack starts */
	b = atk_open(&d, "b", NULL, &err);
	assert_non_null(b);
	assert_int_equal(roshm_nop_sync(b), 0);

	a = atk_open(&d, "a", NULL, &err);
	assert_non_null(a);
	assert_int_equal(roshm_region_create(a, "spin", 4096, &o, &hl), 0);
	h = atk_region_hdr(a, hl, SLOTS, SLOT_SIZE);
	assert_int_equal(h->magic, ROSHM_REGION_MAGIC);
	/* The owner's own header: a sequence far past the slots' tags and an
	 * applied count that says every reservation is free. */
	__atomic_store_n(&h->txn_tail, 1000, __ATOMIC_RELEASE);
	__atomic_store_n(&h->txn_applied, 1ull << 40, __ATOMIC_RELEASE);
	/* Three transactions back to back: as each ends at its deadline the
	 * next one starts, so the attack lasts longer than any bound below. */
	for (int i = 0; i < HOSTILE; i++) {
		s = atk_sqe(a);
		roshm_prep_txn_write(s, hl, 0, 0, 8);
		s = atk_sqe(a);
		roshm_prep_txn_commit(s, hl);
	}
	roshm_submit(a);
	/* the transaction has started (reserved at least once) or is over */
	for (int i = 0; i < 200 && __atomic_load_n(&h->txn_tail, __ATOMIC_ACQUIRE) == 1000 &&
			roshm_peek_cqe(a, &(struct roshm_cqe *){ NULL }) == -EAGAIN; i++)
		usleep(10000);
	print_message("hostile transaction under way: txn_tail %llu\n",
		      (unsigned long long)__atomic_load_n(&h->txn_tail, __ATOMIC_ACQUIRE));

	/* Each check runs whatever the one before found, so that one run
	 * tells which of them hold. */
	char why[1024] = "";
	size_t wl = 0;

	/* another tenant's client: a NOP completes */
	s = atk_sqe(b);
	roshm_prep_nop(s);
	roshm_submit(b);
	st = atk_reap(b, &c, 3000);
	if (st || c.status)
		wl += (size_t)snprintf(why + wl, sizeof(why) - wl,
				       "tenant b's NOP: no completion within 3000 ms (%s; hostile txn_tail "
				       "now %llu); ", roshm_strerror(st ? st : c.status),
				       (unsigned long long)h->txn_tail);
	/* a new client attaches */
	st = atk_run_bounded(attach_b, &d, 5000);
	if (st)
		wl += (size_t)snprintf(why + wl, sizeof(why) - wl,
				       "a new client of tenant b could not attach and complete a NOP "
				       "within 5 s (%s); ", st == -ETIME ? "timed out" : "failed");
	/* the admin socket answers */
	st = atk_admin(d.sock, "status", 3000, &json);
	if (st)
		wl += (size_t)snprintf(why + wl, sizeof(why) - wl,
				       "\"status\" did not answer within 3 s (%s); ", roshm_strerror(st));
	free(json);
	/* The attack is over once the attacker's transactions completed (each
	 * at txn.deadline_ms at the latest); then the node must be whole. */
	for (int i = 0; i < HOSTILE; i++)
		if (atk_reap(a, &c, 40000))
			break;
	if (wl)
		(void)atk_reap(b, &c, 5000); /* the late NOP, if it comes */
	st = atk_alive(&d) ? roshm_nop_sync(b) : -ECONNRESET;
	if (st)
		wl += (size_t)snprintf(why + wl, sizeof(why) - wl, "afterwards a NOP failed (%s); ",
				       roshm_strerror(st));
	if (!atk_alive(&d)) {
		atk_log_tail(&d, 25);
		wl += (size_t)snprintf(why + wl, sizeof(why) - wl, "roshmd %s; ", atk_how(&d));
	}
	roshm_close(a);
	roshm_close(b);
	if (wl)
		fail_msg("%s", why);
}

static void test_bystander_unharmed(void **state)
{
	(void)state;
	atk_assert_alive(&d);
	atk_bystander_check(&by);
	atk_assert_alive(&d);
}

static int setup(void **state)
{
	(void)state;
	th_cleanup_enable();
	if (th_daemon_start(&d, "sec-spin", ATK_TENANTS "channel: { hugepages = \"off\"; };\n"))
		return -1;
	return atk_bystander_start(&by, &d, "b", "by-spin") ? -1 : 0;
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
		cmocka_unit_test(test_huge_txn_applied),
		cmocka_unit_test(test_bystander_unharmed),
	};

	return cmocka_run_group_tests_name("txn_writer_spin", tests, setup, teardown);
}
