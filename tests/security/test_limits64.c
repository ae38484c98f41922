// SPDX-License-Identifier: MIT
/*
 * Defect 14: two hidden limits of 64.
 *   - A drain (roshmctl drain, SIGTERM) holds at most 64 regions
 *     (dataplane/control/drain.c): the others are never marked stale, never drained
 *     and never leave the registry, so peers keep using them as if nothing
 *     happened. test_drain_100_regions drains tenant "a" with 100 regions
 *     while tenant "b" works beside it: every one of a's records must leave
 *     the registry (a directory of JSON files), the reply must count 100,
 *     b's records stay.
 *   - libroshm's reconnect() moves at most 64 prepared-but-unsubmitted SQEs
 *     to the new channel and silently drops the rest.
 *     test_reconnect_100_unsubmitted prepares 100 NOPs, kills roshmd and
 *     starts it again, makes the library reconnect (a region open), submits:
 *     all 100 must complete, in order. No bystander here: a roshmd restart
 *     disturbs every client by design (its FETCH_ADDs in flight fail).
 *
 * How it fails on today's code (main at ddc53d9), 5 of 5 runs:
 *   test_drain_100_regions         "36 of tenant a's 100 records are still in
 *                                   the registry after the drain (reply:
 *                                   {"drained":64,"timed_out":0})"
 *   test_reconnect_100_unsubmitted "completion 65 of the 100 SQEs prepared
 *                                   before the reconnect: timed out
 *                                   (roshm_submit published 64 after it)"
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
#include <jansson.h>

#include "attack.h"

#define NREG 100

static struct th_daemon d;
static struct atk_bystander by;
static char regdir[512];

static void test_drain_100_regions(void **state)
{
	struct roshm *a;
	char *json = NULL, name[32];
	json_t *o;
	int err, left, st;
	long drained;

	(void)state;
	a = atk_open(&d, "a", NULL, &err);
	assert_non_null(a);
	for (int i = 0; i < NREG; i++) {
		uint32_t h;

		snprintf(name, sizeof(name), "r%03d", i);
		assert_int_equal(roshm_region_create(a, name, 4096, NULL, &h), 0);
	}
	assert_int_equal(atk_record_count(regdir, "a"), NREG);
	st = atk_admin(d.sock, "drain tenant a", 60000, &json);
	if (st)
		fail_msg("drain tenant a: %s", roshm_strerror(st));
	o = json_loads(json, 0, NULL);
	assert_non_null(o);
	drained = (long)json_integer_value(json_object_get(o, "drained"));
	json_decref(o);
	left = atk_record_count(regdir, "a");
	if (left)
		fail_msg("%d of tenant a's %d records are still in the registry after the drain "
			 "(reply: %s)", left, NREG, json);
	if (drained != NREG)
		fail_msg("the drain reply counts %ld regions drained of %d (%s)", drained, NREG, json);
	free(json);
	/* tenant b was not drained */
	assert_true(atk_record_count(regdir, "b") >= 2);
	roshm_close(a);
	atk_assert_alive(&d);
	atk_bystander_check(&by);
}

static void test_reconnect_100_unsubmitted(void **state)
{
	struct roshm_params p = { .sq_entries = 128, .cq_entries = 256, .reconnect_ms = 10000 };
	struct roshm *r;
	struct roshm_cqe c;
	uint32_t h;
	int err, n;

	(void)state;
	r = atk_open(&d, "a", &p, &err);
	assert_non_null(r);
	assert_int_equal(roshm_nop_sync(r), 0);
	for (int i = 0; i < NREG; i++) {
		struct roshm_sqe *s = atk_sqe(r);

		roshm_prep_nop(s);
		roshm_sqe_set_data(s, (uint64_t)i);
	}
	th_daemon_kill(&d);
	assert_int_equal(th_daemon_restart(&d), 0);
	/* any call that talks to roshmd makes the library re-attach */
	assert_int_equal(roshm_region_open(r, "a/nothing-here", &h, NULL), -ENOENT);
	/* what the library publishes now is its business; that each prepared
	 * SQE completes once, in order, is the contract */
	n = roshm_submit(r);
	for (int i = 0; i < NREG; i++) {
		int st = atk_reap(r, &c, 3000);

		if (st)
			fail_msg("completion %d of the %d SQEs prepared before the reconnect: %s "
				 "(roshm_submit published %d after it)", i + 1, NREG, roshm_strerror(st), n);
		assert_int_equal(c.status, 0);
		assert_int_equal(c.user_data, (uint64_t)i);
	}
	roshm_close(r);
	atk_assert_alive(&d);
}

static int start(bool bystander)
{
	th_cleanup_enable();
	if (th_daemon_start(&d, "sec-64", ATK_TENANTS "channel: { hugepages = \"off\"; };\n"))
		return -1;
	snprintf(regdir, sizeof(regdir), "%s/registry", d.dir);
	return bystander && atk_bystander_start(&by, &d, "b", "by-64") ? -1 : 0;
}

static int setup_by(void **state)
{
	(void)state;
	return start(true);
}

static int setup_alone(void **state)
{
	(void)state;
	return start(false);
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
		cmocka_unit_test_setup_teardown(test_drain_100_regions, setup_by, teardown),
		cmocka_unit_test_setup_teardown(test_reconnect_100_unsubmitted, setup_alone, teardown),
	};

	return cmocka_run_group_tests_name("limits64", tests, NULL, NULL);
}
