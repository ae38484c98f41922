// SPDX-License-Identifier: MIT
/*
 * Holes a pod punches in its own region, met by the kernel on roshmd's tcp
 * path. Regions stay punchable (guard.h); the hole guard catches roshmd's
 * user-mode touches of a hole, but a kernel-mode touch (the copy inside a
 * writev or readv) fails with EFAULT. A WRITE with ROSHM_SQE_F_LBUF is sent
 * straight from the pod's region and a big READ's answer received straight
 * into it; a WRITE from a peer lands straight in the owner's region.
 *
 * Two roshmd on 127.0.0.1 in a private network namespace. Tenant a's pod on
 * node 1 punches a hole in its region (MADV_REMOVE) and sends LBUF WRITEs
 * from it, or LBUF READs into it, to a region on node 2; then, apart, node
 * 2's owner punches its own region under 1 MiB WRITEs from node 1. Each
 * time: the faulting operation fails alone (its payload's rest goes as
 * zeros, or is discarded), the owner of the holed region is disconnected
 * (the guard's report), and the connection between the nodes stays up:
 * tenant b's bystander on the same connection sees no error and neither
 * node logs "write failed" or "read failed". Before, each one took the
 * shared connection down.
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

#define PORT1 7581
#define PORT2 7582
#define SIZE (2u << 20)

static struct th_daemon n1, n2;
static char workdir[256], secret[300];

struct by_report {
	volatile int ready, stop, done;
	volatile int ops, errors, first_err;
};

/* tenant b on node 1: WRITE/READ 4 KiB to its own region on node 2, forever */
static int bystander(void *arg)
{
	struct by_report *r = arg;
	struct roshm *b;
	uint32_t h;
	int err;

	b = atk_open(&n1, "b", NULL, &err);
	if (!b || atk_open_retry(b, "b/bfar", &h))
		return 2;
	r->ready = 1;
	while (!r->stop) {
		int st = roshm_write_sync(b, h, 0, 0, 4096);

		if (!st)
			st = roshm_read_sync(b, h, 0, 4096, 4096);
		r->ops++;
		if (st) {
			if (!r->errors)
				r->first_err = st;
			r->errors++;
		}
	}
	r->done = 1;
	return 0;
}

static int lbuf_op(struct roshm *r, uint8_t op, uint32_t h, uint64_t off, uint32_t lh,
		   uint64_t loff, uint32_t len)
{
	struct roshm_sqe *sqe = atk_sqe(r);
	struct roshm_cqe *cqe;
	int st;

	roshm_prep_rw(sqe, op, h, off, 0, len);
	roshm_sqe_set_lbuf(sqe, lh, loff);
	roshm_sqe_set_data(sqe, 7);
	roshm_submit(r);
	st = roshm_wait_cqe_timeout(r, &cqe, 5000);
	if (st)
		return st;
	st = cqe->status;
	roshm_cqe_seen(r, cqe);
	return st;
}

static void run(uint8_t opcode, uint32_t len, const char *needle)
{
	struct by_report *rep;
	struct roshm *o2a, *o2b, *atk;
	uint32_t hfar, hbfar, hl, hf;
	uint8_t *l;
	int err, rounds = 5, sts[5];
	int before = atk_log_count(&n1, needle);
	pid_t pid;

	o2a = atk_open(&n2, "a", NULL, &err);
	o2b = atk_open(&n2, "b", NULL, &err);
	assert_non_null(o2a);
	assert_non_null(o2b);
	assert_int_equal(roshm_region_create(o2a, "far", SIZE, NULL, &hfar), 0);
	assert_int_equal(roshm_region_create(o2b, "bfar", 1 << 20, NULL, &hbfar), 0);

	rep = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(rep != MAP_FAILED);
	memset(rep, 0, sizeof(*rep));
	pid = th_spawn(bystander, rep);
	assert_true(pid > 0);
	for (int i = 0; i < 500 && !rep->ready; i++)
		usleep(10000);
	assert_true(rep->ready);
	usleep(200000);
	int ops0 = rep->ops;

	/* the attacking pod: its own region with a hole */
	atk = atk_open(&n1, "a", NULL, &err);
	assert_non_null(atk);
	assert_int_equal(roshm_region_create(atk, "L", SIZE, NULL, &hl), 0);
	assert_int_equal(atk_open_retry(atk, "a/far", &hf), 0);
	l = roshm_region_data(atk, hl, NULL);
	assert_non_null(l);
	/* sanity: the same op from untouched pages works */
	assert_int_equal(lbuf_op(atk, opcode, hf, 0, hl, SIZE / 2, len), 0);
	assert_int_equal(madvise(l, SIZE / 2, MADV_REMOVE), 0);
	for (int i = 0; i < rounds; i++) {
		sts[i] = lbuf_op(atk, opcode, hf, 0, hl, 0, len);
		usleep(300000);
	}
	rep->stop = 1;
	for (int i = 0; i < 300 && !rep->done; i++)
		usleep(10000);
	kill(pid, SIGKILL);
	atk_wait_child(pid, 5000);
	atk_assert_alive(&n1);
	atk_assert_alive(&n2);
	int after = atk_log_count(&n1, needle);
	int reported = atk_log_count(&n1, "punched a hole in the region");

	print_message("%s of %u B from a punched LBUF region, 5 rounds: statuses %d %d %d %d %d; "
		      "node 1 logged \"%s\" %d times; bystander (tenant b): %d ops, %d errors "
		      "(first %d)\n",
		      opcode == ROSHM_OP_WRITE ? "WRITE" : "READ", len, sts[0], sts[1], sts[2],
		      sts[3], sts[4], needle, after - before, rep->ops - ops0, rep->errors,
		      rep->first_err);
	roshm_close(atk);
	roshm_close(o2a);
	roshm_close(o2b);
	if (!reported)
		fail_msg("the hole met by the kernel was not reported: its owner stayed attached");
	if (after > before || rep->errors)
		fail_msg("a pod's LBUF %s from/into a hole it punched in its own region took node 1's "
			 "shared connection to node 2 down %d times; tenant b's bystander got %d "
			 "errors (first %s)",
			 opcode == ROSHM_OP_WRITE ? "WRITE" : "READ", after - before, rep->errors,
			 roshm_strerror(rep->first_err));
	munmap(rep, 4096);
}

static void test_lbuf_write_from_hole(void **state)
{
	(void)state;
	run(ROSHM_OP_WRITE, 64u << 10, "write failed");
}

static void test_lbuf_read_into_hole(void **state)
{
	(void)state;
	run(ROSHM_OP_READ, 1u << 20, "read failed");
}

/* Not LBUF: the owner on node 2 punches its own region and big WRITEs from
 * node 1 land in it through node 2's direct readv. */
static void test_responder_hole(void **state)
{
	struct by_report *rep;
	struct roshm *o2a, *o2b, *atk;
	uint32_t hfar, hbfar, hf;
	uint8_t *far;
	int err, sts[5];
	int before = atk_log_count(&n2, "read failed");
	pid_t pid;

	(void)state;
	o2a = atk_open(&n2, "a", NULL, &err);
	o2b = atk_open(&n2, "b", NULL, &err);
	assert_non_null(o2a);
	assert_non_null(o2b);
	assert_int_equal(roshm_region_create(o2a, "far", SIZE, NULL, &hfar), 0);
	assert_int_equal(roshm_region_create(o2b, "bfar", 1 << 20, NULL, &hbfar), 0);
	rep = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	memset(rep, 0, sizeof(*rep));
	pid = th_spawn(bystander, rep);
	for (int i = 0; i < 500 && !rep->ready; i++)
		usleep(10000);
	assert_true(rep->ready);
	atk = atk_open(&n1, "a", NULL, &err);
	assert_non_null(atk);
	assert_int_equal(atk_open_retry(atk, "a/far", &hf), 0);
	far = roshm_region_data(o2a, hfar, NULL);
	assert_int_equal(madvise(far, SIZE, MADV_REMOVE), 0);
	for (int i = 0; i < 5; i++) {
		sts[i] = roshm_write_sync(atk, hf, 0, 0, 1u << 20);
		usleep(300000);
	}
	rep->stop = 1;
	for (int i = 0; i < 300 && !rep->done; i++)
		usleep(10000);
	kill(pid, SIGKILL);
	atk_wait_child(pid, 5000);
	int after = atk_log_count(&n2, "read failed");

	print_message("1 MiB WRITEs from node 1 into a region its owner punched: %d %d %d %d %d; "
		      "node 2 logged read failed %d times; bystander %d errors (first %d)\n", sts[0],
		      sts[1], sts[2], sts[3], sts[4], after - before, rep->errors, rep->first_err);
	atk_assert_alive(&n1);
	atk_assert_alive(&n2);
	roshm_close(atk);
	roshm_close(o2a);
	roshm_close(o2b);
	int errors = rep->errors;

	munmap(rep, 4096);
	if (after > before || errors)
		fail_msg("WRITEs into a region its owner punched took node 2's inbound connection "
			 "down %d times; tenant b's bystander got %d errors", after - before, errors);
	if (!atk_log_count(&n2, "punched a hole in the region"))
		fail_msg("the hole met by the kernel was not reported: its owner stayed attached");
}

static int setup(void **state)
{
	(void)state;
	return atk_two_nodes(&n1, &n2, "lbuf-hole", PORT1, PORT2, workdir, secret, NULL);
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
		cmocka_unit_test_setup_teardown(test_lbuf_write_from_hole, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lbuf_read_into_hole, setup, teardown),
		cmocka_unit_test_setup_teardown(test_responder_hole, setup, teardown),
	};
	char ns[64];

	if (geteuid() != 0) {
		printf("lbuf_hole: skipped: needs root for a network namespace\n");
		return 77;
	}
	th_cleanup_enable();
	if (atk_netns_enter_new(ns, sizeof(ns)) || atk_workdir(workdir, sizeof(workdir), secret,
							       sizeof(secret))) {
		printf("lbuf_hole: cannot set up a network namespace and a work directory\n");
		return 1;
	}
	return cmocka_run_group_tests_name("lbuf_hole", tests, NULL, NULL);
}
