// SPDX-License-Identifier: MIT
/*
 * A client that moves its CQ head back (client-written) while operations
 * are in flight. Their CQ slots are reserved (inflight); the poller's
 * client_round computed room = cq_entries - used - inflight in unsigned, so
 * once the client's head made used + inflight pass cq_entries (head moved
 * back, used still <= cq_entries: not caught as a corrupt head) room wrapped
 * to ~4G and the poller took a full burst of SQEs with no CQ room left,
 * posting their CQEs over ones the client had not read. Only the client's
 * own CQEs, but roshmd must not write past what its CQ holds: room is 0
 * there now.
 *
 * Two roshmd on 127.0.0.1 in a private network namespace. Node 2 owns a/far;
 * node 1's client (SQ and CQ of 64) opens it, node 2 is stopped (SIGSTOP: a
 * peer that never answers), and the client submits 8 READs of a/far (in
 * flight, 8 CQ slots held) and 56 NOPs (completed and reaped). Then it sets
 * its CQ head to tail - 64 (64 unread: in range) and submits 16 NOPs.
 * Expected: roshmd takes none of them and posts no CQE while the head stays
 * there; once the head is back they complete, node 2 resumed, the READs
 * complete too, and roshmd is alive throughout.
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
#include <unistd.h>
#include <cmocka.h>

#include "attack.h"

#define PORT1 7791
#define PORT2 7792
#define ENTRIES 64u
#define NREAD 8u
#define NNOP 16u

static struct th_daemon n1, n2;
static char workdir[256], secret[300];

static uint32_t load(const uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

/* Wait at most @ms for *@p == @want: whether it got there. */
static bool wait_eq(const uint32_t *p, uint32_t want, int ms)
{
	for (int i = 0; i < ms / 5; i++) {
		if (load(p) == want)
			return true;
		usleep(5000);
	}
	return load(p) == want;
}

static void test_cq_head_rewound(void **state)
{
	struct roshm_params p = { .sq_entries = ENTRIES, .cq_entries = ENTRIES };
	struct roshm *owner, *r;
	struct roshm_cqe cqe;
	uint32_t ho, h, tail, tail0, sq0, sq_head;
	int err, bad = 0;

	(void)state;
	owner = atk_open(&n2, "a", NULL, &err);
	assert_non_null(owner);
	assert_int_equal(roshm_region_create(owner, "far", 1 << 20, NULL, &ho), 0);
	r = atk_open(&n1, "a", &p, &err);
	assert_non_null(r);
	assert_int_equal(r->cq.entries, ENTRIES);
	assert_int_equal(r->sq.entries, ENTRIES);
	assert_int_equal(atk_open_retry(r, "a/far", &h), 0);
	assert_int_equal(roshm_read_sync(r, h, 0, 0, 4096), 0); /* the connection is up */
	kill(n2.pid, SIGSTOP);
	tail0 = load(r->cq.ktail);
	sq0 = load(r->sq.khead);

	/* 8 READs that stay in flight, then 56 NOPs: the CQ is full */
	for (uint32_t i = 0; i < NREAD; i++)
		roshm_prep_read(atk_sqe(r), h, 4096 * i, 0, 4096);
	for (uint32_t i = 0; i < ENTRIES - NREAD; i++)
		roshm_prep_nop(atk_sqe(r));
	assert_int_equal(roshm_submit(r), (int)ENTRIES);
	for (uint32_t i = 0; i < ENTRIES - NREAD; i++) {
		assert_int_equal(atk_reap(r, &cqe, 5000), 0);
		if (cqe.status)
			fail_msg("NOP %u: status %d (the READs must stay in flight: node 2 stopped)", i,
				 cqe.status);
	}
	tail = load(r->cq.ktail);
	assert_int_equal(tail - tail0, ENTRIES - NREAD);
	assert_int_equal(load(r->sq.khead) - sq0, ENTRIES);

	/* the head moved back: 64 unread, 8 in flight */
	__atomic_store_n(r->cq.khead, tail - ENTRIES, __ATOMIC_RELEASE);
	for (uint32_t i = 0; i < NNOP; i++)
		roshm_prep_nop(atk_sqe(r));
	assert_int_equal(roshm_submit(r), (int)NNOP);
	usleep(400000); /* the poller's rounds (and its 20 ms sleeps with a full CQ) */
	sq_head = load(r->sq.khead);
	if (load(r->cq.ktail) != tail || sq_head != sq0 + ENTRIES) {
		bad = 1;
		print_message("roshmd took %u SQEs and posted %u CQEs with no CQ room (head moved back "
			      "to tail - %u, %u operations in flight)\n",
			      sq_head - sq0 - ENTRIES, load(r->cq.ktail) - tail, ENTRIES, NREAD);
	}
	atk_assert_alive(&n1);

	/* the head back where it was: every CQE read, the NOPs go */
	__atomic_store_n(r->cq.khead, tail, __ATOMIC_RELEASE);
	if (bad) {
		roshm_close(r);
		roshm_close(owner);
		fail_msg("a client that moved its CQ head back while operations were in flight got "
			 "CQEs written past what its CQ holds (room wrapped around)");
	}
	if (!wait_eq(r->cq.ktail, tail + NNOP, 5000))
		fail_msg("the NOPs did not complete once the head was back (CQ tail %u, want %u)",
			 load(r->cq.ktail), tail + NNOP);
	kill(n2.pid, SIGCONT);
	/* every CQE: the 16 NOPs and, node 2 resumed, the 8 READs */
	for (uint32_t i = 0; i < NNOP + NREAD; i++) {
		err = atk_reap(r, &cqe, 10000);
		if (err)
			fail_msg("CQE %u of %u: %d", i, NNOP + NREAD, err);
	}
	atk_assert_alive(&n1);
	roshm_close(r);
	roshm_close(owner);
}

static int setup(void **state)
{
	(void)state;
	return atk_two_nodes(&n1, &n2, "cq-rewind", PORT1, PORT2, workdir, secret, NULL);
}

static int teardown(void **state)
{
	(void)state;
	kill(n2.pid, SIGCONT);
	atk_daemon_kill(&n1);
	atk_daemon_kill(&n2);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_cq_head_rewound, setup, teardown),
	};
	char ns[64];

	if (geteuid() != 0) {
		printf("cq_rewind: skipped: needs root for a network namespace\n");
		return 77;
	}
	th_cleanup_enable();
	if (atk_netns_enter_new(ns, sizeof(ns)) || atk_workdir(workdir, sizeof(workdir), secret,
							       sizeof(secret))) {
		printf("cq_rewind: cannot set up a network namespace and a work directory\n");
		return 1;
	}
	return cmocka_run_group_tests_name("cq_rewind", tests, NULL, NULL);
}
