// SPDX-License-Identifier: MIT
/*
 * A pod closes the region an LBUF READ of its lands in while the READ's
 * answer is still to come over tcp, and stays attached: the operation lets
 * go of the region at once (lbuf_let_go), and its answer must then be
 * discarded, not written through the old pointer into memory roshmd has
 * unmapped (a crash) or mapped since for another tenant's region.
 *
 * Two roshmd on 127.0.0.1 in a private network namespace. reuse: node 2
 * stopped, tenant a's pod sends a 4 KiB LBUF READ into its region L and
 * closes L, tenant b creates a region V of the same size (roshmd maps it
 * where L was), node 2 resumes: none of a/far's bytes (0x5A) may land in V,
 * the READ fails with -ESTALE. crash: the same without V: node 1 lives.
 * race: no stopped peer; the READ waits behind 200 x 1 MiB READs of the
 * pod's own and L is closed 3 ms later: node 1 lives (it died 3 of 3 runs
 * before the fix).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "attack.h"

#define PORT1 7681
#define PORT2 7682
#define LSIZE (1u << 20)
#define RLEN 4096u

static struct th_daemon n1, n2;
static char workdir[256], secret[300];

/* One try; false when the READ's answer came before the close (a loaded
 * machine: node 2 not stopped in time), which proves nothing either way. */
static bool run(bool reuse)
{
	struct roshm *owner, *atk, *vic = NULL;
	struct roshm_cqe *cqe;
	struct roshm_sqe *sqe;
	uint32_t ho, hl, hf, hv;
	uint8_t *far, *v;
	int err, st, hits = 0;

	owner = atk_open(&n2, "a", NULL, &err);
	assert_non_null(owner);
	assert_int_equal(roshm_region_create(owner, "far", 1 << 20, NULL, &ho), 0);
	far = roshm_region_data(owner, ho, NULL);
	memset(far, 0x5A, 1 << 20);

	atk = atk_open(&n1, "a", NULL, &err);
	assert_non_null(atk);
	assert_int_equal(roshm_region_create(atk, "L", LSIZE, NULL, &hl), 0);
	assert_int_equal(atk_open_retry(atk, "a/far", &hf), 0);
	assert_int_equal(roshm_read_sync(atk, hf, 0, 0, 4096), 0); /* connection up */

	kill(n2.pid, SIGSTOP);
	sqe = atk_sqe(atk);
	roshm_prep_read(sqe, hf, 0, 0, RLEN);
	roshm_sqe_set_lbuf(sqe, hl, 0);
	roshm_sqe_set_data(sqe, 77);
	roshm_submit(atk);
	usleep(200000); /* in node 1's socket to node 2 */
	assert_int_equal(roshm_region_close(atk, hl), 0); /* tcp_export(L, false): hold let go */
	usleep(100000);
	if (reuse) {
		vic = atk_open(&n1, "b", NULL, &err);
		assert_non_null(vic);
		assert_int_equal(roshm_region_create(vic, "V", LSIZE, NULL, &hv), 0);
		v = roshm_region_data(vic, hv, NULL);
		memset(v, 0, LSIZE);
	}
	kill(n2.pid, SIGCONT);
	st = roshm_wait_cqe_timeout(atk, &cqe, 3000);
	int status = st ? 0 : cqe->status;

	print_message("the pod's LBUF READ: wait %d, status %d\n", st, status);
	usleep(300000);
	bool alive = atk_alive(&n1);
	print_message("node 1 after the READ answer: %s\n", atk_how(&n1));
	if (reuse) {
		for (uint32_t i = 0; i < LSIZE; i++)
			hits += v[i] == 0x5A;
		print_message("tenant b's fresh region V: %d bytes of 0x5A (node 2's a/far) in it\n", hits);
	}
	if (!alive)
		atk_log_tail(&n1, 15);
	if (!alive || hits)
		fail_msg("READ answer for a closed LBUF region written through stale pd->dst: "
			 "node 1 %s, %d bytes landed in tenant b's region", atk_how(&n1), hits);
	assert_int_equal(st, 0);
	roshm_close(atk);
	roshm_close(owner);
	if (vic)
		roshm_close(vic);
	if (!status) {
		print_message("the READ was answered before its region was closed: again\n");
		return false;
	}
	assert_int_equal(status, -ESTALE);
	return true;
}

/* run() until the close comes first (3 tries). */
static void runs(bool reuse)
{
	for (int i = 0; i < 3; i++)
		if (run(reuse))
			return;
	fail_msg("the READ was answered before the close in 3 tries");
}

static void test_reuse(void **state) { (void)state; runs(true); }

/* No stopped peer: the attacker alone delays its own READ's answer behind
 * 200 x 1 MiB arena READs, and closes its region at once. */
static void test_race(void **state)
{
	struct roshm *owner, *atk;
	uint32_t ho, hl, hf;
	int err, got = 0;

	(void)state;
	owner = atk_open(&n2, "a", NULL, &err);
	assert_non_null(owner);
	assert_int_equal(roshm_region_create(owner, "far", 1 << 20, NULL, &ho), 0);
	memset(roshm_region_data(owner, ho, NULL), 0x5A, 1 << 20);
	atk = atk_open(&n1, "a", NULL, &err);
	assert_non_null(atk);
	assert_int_equal(roshm_region_create(atk, "L", LSIZE, NULL, &hl), 0);
	assert_int_equal(atk_open_retry(atk, "a/far", &hf), 0);
	assert_int_equal(roshm_read_sync(atk, hf, 0, 0, 4096), 0);
	for (int i = 0; i < 200; i++)
		roshm_prep_read(atk_sqe(atk), hf, 0, 0, 1u << 20);
	roshm_submit(atk);
	usleep(20000);
	struct roshm_sqe *sqe = atk_sqe(atk);
	roshm_prep_read(sqe, hf, 0, 0, RLEN);
	roshm_sqe_set_lbuf(sqe, hl, 0);
	roshm_sqe_set_data(sqe, 77);
	roshm_submit(atk);
	usleep(3000);
	assert_int_equal(roshm_region_close(atk, hl), 0);
	for (int i = 0; i < 201; i++) {
		struct roshm_cqe c;

		if (atk_reap(atk, &c, 3000))
			break;
		if (c.user_data == 77)
			print_message("LBUF READ status %d after %d others\n", c.status, got);
		got++;
	}
	usleep(300000);
	print_message("race: %d CQEs; node 1: %s\n", got, atk_how(&n1));
	if (!atk_alive(&n1)) {
		atk_log_tail(&n1, 5);
		fail_msg("node 1 died: %s", atk_how(&n1));
	}
	roshm_close(atk);
	roshm_close(owner);
}
static void test_crash(void **state) { (void)state; runs(false); }

static int setup(void **state)
{
	(void)state;
	return atk_two_nodes(&n1, &n2, "lbuf-stale", PORT1, PORT2, workdir, secret, NULL);
}

static int teardown(void **state)
{
	(void)state;
	atk_daemon_kill(&n1);
	atk_daemon_kill(&n2);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_reuse, setup, teardown),
		cmocka_unit_test_setup_teardown(test_crash, setup, teardown),
		cmocka_unit_test_setup_teardown(test_race, setup, teardown),
	};
	char ns[64];

	th_cleanup_enable();
	if (atk_netns_enter_new(ns, sizeof(ns)) || atk_workdir(workdir, sizeof(workdir), secret,
							       sizeof(secret)))
		return 1;
	return cmocka_run_group_tests_name("lbuf_stale_dst", tests, NULL, NULL);
}
