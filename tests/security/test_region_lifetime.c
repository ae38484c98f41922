// SPDX-License-Identifier: MIT
/*
 * Defect 2: a transaction in flight keeps a raw pointer to its region, while
 * the control thread frees the region as soon as its last handle is closed;
 * a remote region gets no poller command at all when that happens. When the
 * transaction's operations answer (or fail) later, the engine runs on freed
 * memory.
 *
 * Two roshmd with the tcp transport in a private network namespace (root
 * needed, else skipped): tenant "a" owns a region with a log on node 2; a
 * client of "a" on node 1 opens it. Node 2 is stopped (SIGSTOP), the client
 * commits 8 transactions (their reservations wait in the connection), then
 * closes its handle (test_close_handle) or detaches altogether
 * (test_detach), and node 2 resumes. Repeated 5 times. Expected: both roshmd
 * alive, tenant "b"'s client on node 1 unharmed, and node 1 still serves
 * transactions to the region.
 *
 * How it fails on today's code (main at ddc53d9), 5 of 5 runs, both tests:
 * node 1 is killed by signal 11 (Segmentation fault) once node 2 answers the
 * reservations of the freed region:
 *   test_close_handle  "roshmd sec-life1 is gone: killed by signal 11
 *                       (Segmentation fault) after round 1"
 *   test_detach        the same "after round 2" (every run: the first round
 *                       survives; use after free is undefined, not prompt)
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "attack.h"

#define SLOTS 16
#define SLOT_SIZE 512
#define NTXN 8
#define ROUNDS 5

static struct th_daemon n1, n2;
static struct atk_bystander by;
static char workdir[256], secret[300];

static int open_retry(struct roshm *r, const char *name, uint32_t *h)
{
	int ret = -ENOENT;

	for (int i = 0; i < 300 && (ret == -ENOENT || ret == -EAGAIN); i++) {
		ret = roshm_region_open(r, name, h, NULL);
		if (ret == -ENOENT || ret == -EAGAIN)
			usleep(10000);
	}
	return ret;
}

static void run(bool detach)
{
	struct roshm_region_opts o = { .txn_slots = SLOTS, .slot_size = SLOT_SIZE };
	struct roshm_txn_write w = { .off = 0, .arena_off = 0, .len = 64 };
	struct roshm *owner;
	uint32_t ho;
	int err, round;

	owner = atk_open(&n2, "a", NULL, &err);
	assert_non_null(owner);
	assert_int_equal(roshm_region_create(owner, "life", 65536, &o, &ho), 0);
	for (round = 1; round <= ROUNDS; round++) {
		struct roshm *wr = atk_open(&n1, "a", NULL, &err);
		uint32_t h;

		assert_non_null(wr);
		assert_int_equal(open_retry(wr, "a/life", &h), 0);
		/* the region works across the nodes */
		assert_int_equal(roshm_txn_sync(wr, h, &w, 1, NULL), 0);
		kill(n2.pid, SIGSTOP);
		for (int i = 0; i < NTXN; i++) {
			struct roshm_sqe *s = atk_sqe(wr);

			roshm_prep_txn_write(s, h, (uint64_t)i * 64, 0, 64);
			s = atk_sqe(wr);
			roshm_prep_txn_commit(s, h);
		}
		roshm_submit(wr);
		usleep(100000); /* node 1 sends the reservations; node 2 cannot answer */
		if (detach) {
			roshm_close(wr); /* the client goes: every handle with it */
			wr = NULL;
		} else {
			assert_int_equal(roshm_region_close(wr, h), 0);
		}
		kill(n2.pid, SIGCONT);
		/* node 2 answers; node 1's engine carries on with what it holds */
		usleep(500000);
		if (wr) {
			/* whatever became of them, each commit completes once */
			struct roshm_cqe c;

			for (int i = 0; i < NTXN && atk_alive(&n1); i++)
				if (atk_reap(wr, &c, 15000))
					fail_msg("round %d: commit %d of the closed handle never completed", round, i);
			roshm_close(wr);
		}
		if (!atk_alive(&n1) || !atk_alive(&n2))
			break;
	}
	if (!atk_alive(&n1) || !atk_alive(&n2)) {
		struct th_daemon *x = atk_alive(&n1) ? &n2 : &n1;

		atk_log_tail(x, 10);
		fail_msg("roshmd %s is gone: %s after round %d", x->name, atk_how(x), round);
	}
	/* node 1 still serves the region */
	{
		struct roshm *wr = atk_open(&n1, "a", NULL, &err);
		uint32_t h;

		assert_non_null(wr);
		assert_int_equal(open_retry(wr, "a/life", &h), 0);
		assert_int_equal(roshm_txn_sync(wr, h, &w, 1, NULL), 0);
		roshm_close(wr);
	}
	roshm_close(owner);
	atk_bystander_check(&by);
	atk_assert_alive(&n1);
	atk_assert_alive(&n2);
}

static void test_close_handle(void **state)
{
	(void)state;
	run(false);
}

static void test_detach(void **state)
{
	(void)state;
	run(true);
}

static int setup(void **state)
{
	(void)state;
	if (atk_two_nodes(&n1, &n2, "sec-life", 7471, 7472, workdir, secret, NULL))
		return -1;
	return atk_bystander_start(&by, &n1, "b", "by-life") ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	atk_bystander_stop(&by);
	atk_daemon_kill(&n1);
	atk_daemon_kill(&n2);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_close_handle, setup, teardown),
		cmocka_unit_test_setup_teardown(test_detach, setup, teardown),
	};
	char ns[64];

	if (geteuid() != 0) {
		printf("region_lifetime: skipped: needs root for a network namespace\n");
		return 77;
	}
	th_cleanup_enable();
	if (atk_netns_enter_new(ns, sizeof(ns)) || atk_workdir(workdir, sizeof(workdir), secret,
							       sizeof(secret))) {
		printf("region_lifetime: cannot set up a network namespace and a work directory\n");
		return 1;
	}
	return cmocka_run_group_tests_name("region_lifetime", tests, NULL, NULL);
}
