// SPDX-License-Identifier: MIT
/*
 * A pod tries to stop roshmd's poller, and with it the whole node, through
 * its wakeup descriptors.
 *
 * Before: CHANNEL's reply handed the client roshmd's own eventfds, one open
 * file description shared by both, and O_NONBLOCK is a flag of the
 * description. The client cleared it with fcntl(F_SETFL), filled the CQ
 * eventfd's counter to 0xfffffffffffffffe, asked for a wakeup and submitted
 * a NOP: the poller's kick then slept in write(2) for as long as the attacker
 * liked ("tenant b's NOP: no completion within 3000 ms (timed out); a new
 * client of tenant b could not attach and complete a NOP within 5 s").
 *
 * Now the wakeups are socketpairs and roshmd keeps its own ends. The attack
 * does everything a client can do to its ends: clears O_NONBLOCK on both,
 * fills the SQ wakeup queue towards roshmd, fills the CQ wakeup queue towards
 * itself (asks for a wakeup on every NOP and never reads), and sends
 * datagrams into its CQ end. Expected: while it does (3 s), tenant b's client
 * completes a NOP and a new client of b attaches; the bystander is unharmed.
 *
 * The attacker is tenant "a"; tenant "b"'s bystander runs throughout.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "attack.h"

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

static void test_cq_eventfd_blocks_poller(void **state)
{
	struct roshm *a, *b;
	struct roshm_sqe *s;
	struct roshm_cqe c;
	char why[1024] = "", one = 1;
	size_t wl = 0;
	int err, st, fl, sent = 0, nops = 0;

	(void)state;
	b = atk_open(&d, "b", NULL, &err);
	assert_non_null(b);
	assert_int_equal(roshm_nop_sync(b), 0);
	a = atk_open(&d, "a", NULL, &err);
	assert_non_null(a);
	assert_int_equal(roshm_nop_sync(a), 0);

	/* both of our ends blocking: whatever that does, it is ours */
	fl = fcntl(a->cq_event_fd, F_GETFL);
	assert_true(fl >= 0);
	assert_int_equal(fcntl(a->cq_event_fd, F_SETFL, fl & ~O_NONBLOCK), 0);
	fl = fcntl(a->sq_event_fd, F_GETFL);
	assert_true(fl >= 0);
	assert_int_equal(fcntl(a->sq_event_fd, F_SETFL, fl & ~O_NONBLOCK), 0);
	/* what filled an eventfd's counter (and blocked the poller's next
	 * write to it when the descriptions were shared) */
	uint64_t full = 0xfffffffffffffffeull;

	assert_int_equal(write(a->cq_event_fd, &full, sizeof(full)), (ssize_t)sizeof(full));
	/* roshmd's SQ wakeup queue full, and datagrams into our CQ end */
	while (send(a->sq_event_fd, &one, 1, MSG_DONTWAIT) == 1 && sent < 100000)
		sent++;
	for (int i = 0; i < 1000 && send(a->cq_event_fd, &one, 1, MSG_DONTWAIT) == 1; i++)
		sent++;
	/* "I sleep: wake me" on every NOP, never reading the wakeups: the CQ
	 * wakeup queue fills and roshmd's sends find it full */
	for (uint64_t t0 = atk_now_ms(); atk_now_ms() - t0 < 1000; nops++) {
		__atomic_store_n(a->cq.kflags, ROSHM_CQ_NEED_WAKEUP, __ATOMIC_SEQ_CST);
		s = atk_sqe(a);
		roshm_prep_nop(s);
		roshm_submit(a);
		if (atk_reap(a, &c, 1000))
			break;
	}
	__atomic_store_n(a->cq.kflags, ROSHM_CQ_NEED_WAKEUP, __ATOMIC_SEQ_CST);
	s = atk_sqe(a);
	roshm_prep_nop(s);
	roshm_submit(a);
	usleep(200000);
	print_message("attacker: %d datagrams sent, %d NOPs asking for a wakeup\n", sent, nops);

	/* another tenant's client: a NOP completes */
	s = atk_sqe(b);
	roshm_prep_nop(s);
	roshm_submit(b);
	st = atk_reap(b, &c, 3000);
	if (st || c.status)
		wl += (size_t)snprintf(why + wl, sizeof(why) - wl,
				       "tenant b's NOP: no completion within 3000 ms (%s); ",
				       st == -ETIME ? "timed out" : roshm_strerror(st ? st : c.status));
	/* a new client attaches */
	st = atk_run_bounded(attach_b, &d, 5000);
	if (st)
		wl += (size_t)snprintf(why + wl, sizeof(why) - wl,
				       "a new client of tenant b could not attach and complete a NOP "
				       "within 5 s (%s); ", st == -ETIME ? "timed out" : "failed");
	if (wl)
		(void)atk_reap(b, &c, 5000); /* the late NOP */
	roshm_close(a);
	roshm_close(b);
	atk_assert_alive(&d);
	if (wl)
		fail_msg("while tenant a held its wakeup queues full: %s", why);
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
	if (th_daemon_start(&d, "sec-efd", ATK_TENANTS "channel: { hugepages = \"off\"; };\n"))
		return -1;
	return atk_bystander_start(&by, &d, "b", "by-efd") ? -1 : 0;
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
		cmocka_unit_test(test_cq_eventfd_blocks_poller),
		cmocka_unit_test(test_bystander_unharmed),
	};

	return cmocka_run_group_tests_name("eventfd_block", tests, setup, teardown);
}
