// SPDX-License-Identifier: MIT
/*
 * A TXN_WRITE staged through a part handle dies with that handle (a
 * revoke closes it): found by an adversarial review of ABI 6. Before the
 * fix, once the handle's 16-bit generation wrapped, a handle on another,
 * smaller part got the same value, and its TXN_COMMIT committed the write
 * into the part taken back.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "attack.h"
#include "roshm/ctl.h"

static struct th_daemon d;

static struct roshm *cl(void)
{
	int err;
	struct roshm *r = atk_open(&d, "a", NULL, &err);

	assert_non_null(r);
	return r;
}

static void test_txn_after_revoke(void **st)
{
	struct roshm_region_opts o = { .policy = ROSHM_POLICY_GRANT, .txn_slots = 4,
				       .slot_size = 4096 };
	const struct roshm_part p1 = { .off = 0, .len = 64, .access = ROSHM_ACCESS_WRITE };
	const struct roshm_part p2 = { .off = 4096, .len = 64, .access = ROSHM_ACCESS_WRITE };
	struct roshm *v = cl(), *a = cl();
	uint32_t hm, hring, h2, hx;
	struct roshm_cqe cqe;
	uint8_t *mem, *arena;
	unsigned long tries = 0;

	(void)st;
	assert_int_equal(roshm_region_create(v, "pt-mem", 8192, &o, &hm), 0);
	mem = roshm_region_data(v, hm, NULL);
	memset(mem, 0, 8192);
	assert_int_equal(roshm_region_create(a, "pt-ring", 4096, NULL, &hring), 0);
	assert_int_equal(roshm_region_grant_part(v, hm, "pt-ring", &p1), 0);
	assert_int_equal(roshm_region_grant_part(v, hm, "pt-ring", &p2), 0);

	/* while granted p2: stage a write there, no commit */
	assert_int_equal(roshm_region_open_part(a, "pt-mem", &p2, &h2, NULL), 0);
	arena = roshm_arena(a, NULL);
	memset(arena, 0x41, 8);
	roshm_prep_txn_write(atk_sqe(a), h2, 4096, 0, 8);
	assert_int_equal(roshm_submit(a), 1);
	assert_int_equal(roshm_nop_sync(a), 0); /* the TXN_WRITE was consumed */

	/* the owner takes p2 back: h2 is closed, p2 cannot be opened */
	assert_int_equal(roshm_region_revoke_part(v, hm, "pt-ring", &p2), 0);
	assert_int_equal(roshm_read_sync(a, h2, 4096, 0, 8), -EBADF);
	assert_int_equal(roshm_region_open_part(a, "pt-mem", &p2, &hx, NULL), -EACCES);

	/* open/close p1 until its handle has h2's value (16-bit generation) */
	for (;;) {
		assert_int_equal(roshm_region_open_part(a, "pt-mem", &p1, &hx, NULL), 0);
		tries++;
		if (hx == h2)
			break;
		assert_int_equal(roshm_region_close(a, hx), 0);
		assert_true(tries < 200000);
	}
	fprintf(stderr, "handle 0x%08x again after %lu opens\n", h2, tries);
	/* the p1 handle cannot touch p2 ... */
	assert_int_equal(roshm_write_sync(a, hx, 4096, 0, 8), -EFAULT);
	/* ... but its TXN_COMMIT commits the write staged into p2 */
	roshm_prep_txn_commit(atk_sqe(a), hx);
	assert_int_equal(roshm_submit(a), 1);
	assert_int_equal(atk_reap(a, &cqe, 5000), 0);
	fprintf(stderr, "commit status %d\n", cqe.status);
	assert_true(cqe.status < 0);   /* nothing staged through this handle */
	usleep(200 * 1000); /* the owner side applies it */
	fprintf(stderr, "mem[4096] = 0x%02x (0x41: written outside the granted part after revoke)\n",
		mem[4096]);
	assert_int_not_equal(mem[4096], 0x41);
	roshm_close(a);
	roshm_close(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_txn_after_revoke),
	};
	int fails;

	th_cleanup_enable();
	if (th_daemon_start(&d, "secparttxn", ATK_TENANTS "channel: { hugepages = \"off\"; };\n"))
		return 1;
	fails = cmocka_run_group_tests_name("security_part_txn", tests, NULL, NULL);
	if (fails)
		atk_log_tail(&d, 30);
	atk_daemon_kill(&d);
	return fails;
}
