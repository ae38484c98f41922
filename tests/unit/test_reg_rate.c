// SPDX-License-Identifier: MIT
/*
 * reg_rate.c (quota.registry_ops_per_sec) on its own: its bucket
 * arithmetic, driven through rd_reg_rate_take and rd_reg_rate_timer with a
 * clock of our own, and the order in which a tenant's waiting connections
 * are let read. No roshmd, no EAL: a control struct with a config, and
 * connections over socketpairs (epfd -1: epoll_ctl fails quietly, we look
 * at conn.wait).
 *
 * debt_forgiven (adversary review of 32b71ed): a second or more after the
 *   last refill, the bucket was set full whatever it owed. A create takes 2
 *   from a bucket of 1 (-1): at 1 a second the next request waited 1 s,
 *   not 2, and creates ran at twice the rate.
 * big_rate: 1000000 a second, steps just under a second and of 1 us: no
 *   overflow, no drift.
 * debt_frozen_while_idle: a debt is paid by all the time that passed, idle
 *   or not (see the test).
 * fifo: three connections of a tenant wait; each refill lets only the
 *   first read, and the next only once that one's request ran.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "control/internal.h"
#include "roshm/ctl.h"

#define NS 1000000000ull
#define NCONN 3

struct rig {
	struct rd_config cfg;
	struct rd_control *ctl;
	struct rd_client client;
	struct rd_conn conn[NCONN];
	int sv[NCONN][2];
};

static void rig_init(struct rig *r, uint32_t rate)
{
	memset(r, 0, sizeof(*r));
	r->cfg.ntenants = 1;
	strcpy(r->cfg.tenants[0].name, "a");
	r->cfg.tenants[0].quota.registry_ops_per_sec = rate;
	r->ctl = calloc(1, sizeof(*r->ctl));
	assert_non_null(r->ctl);
	r->ctl->cfg = &r->cfg;
	r->ctl->epfd = -1;
	r->client.tidx = 0;
	strcpy(r->client.tenant, "a");
	for (int i = 0; i < NCONN; i++) {
		assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, r->sv[i]), 0);
		r->conn[i].fd = r->sv[i][0];
		r->conn[i].client = &r->client;
	}
}

static void rig_fini(struct rig *r)
{
	for (int i = 0; i < NCONN; i++) {
		close(r->sv[i][0]);
		close(r->sv[i][1]);
	}
	free(r->ctl);
}

/* Connection @i sends a REGION_OPEN (a request that waits for the rate). */
static void ask(struct rig *r, int i)
{
	struct roshm_ctl_region_open o;

	memset(&o, 0, sizeof(o));
	o.hdr.magic = ROSHM_CTL_MAGIC;
	o.hdr.version = ROSHM_ABI_VERSION;
	o.hdr.type = ROSHM_CTL_REGION_OPEN;
	o.hdr.len = sizeof(o);
	assert_int_equal(send(r->sv[i][1], &o, sizeof(o), 0), (ssize_t)sizeof(o));
}

/* Connection 0 waits, alone in the queue; does the timer at @now let it read? */
static bool unparked_at(struct rig *r, uint64_t now)
{
	struct rd_reg_bucket *b = &r->ctl->reg_bucket[0];

	r->conn[0].wait = RD_WAIT_RATE;
	r->conn[0].rate_queued = true;
	b->q_head = b->q_tail = &r->conn[0];
	rd_reg_rate_timer(r->ctl, now);
	return r->conn[0].wait == RD_WAIT_NONE;
}

static void test_debt_forgiven(void **st)
{
	struct rig r;
	struct rd_reg_bucket *b;
	const uint64_t t0 = 1000 * NS;

	(void)st;
	rig_init(&r, 1);
	b = &r.ctl->reg_bucket[0];
	/* a full bucket (1 token) at t0, and a create that took 2 */
	b->tokens = 1;
	b->last_ns = t0;
	rd_reg_rate_take(r.ctl, 0, 2);
	assert_int_equal(b->tokens, -1);
	/* 1 s later: the balance is 0, the debt not paid yet */
	assert_false(unparked_at(&r, t0 + NS));
	assert_int_equal(b->tokens, 0);
	assert_true(unparked_at(&r, t0 + 2 * NS));
	rig_fini(&r);
}

static void test_big_rate(void **st)
{
	struct rig r;
	struct rd_reg_bucket *b;
	const uint64_t t0 = 5 * NS;

	(void)st;
	rig_init(&r, 1000000);
	b = &r.ctl->reg_bucket[0];
	b->tokens = -1;
	b->last_ns = t0;
	/* 1 ns short of a second: 999999 tokens earned, no overflow */
	assert_true(unparked_at(&r, t0 + NS - 1));
	assert_int_equal(b->tokens, 999998);
	/* tiny steps: 1 us earns 1 token each time, exactly */
	b->tokens = -5;
	b->last_ns = t0;
	assert_false(unparked_at(&r, t0 + 2000));
	assert_int_equal(b->tokens, -3);
	assert_false(unparked_at(&r, t0 + 5999));
	assert_int_equal(b->tokens, 0);
	assert_true(unparked_at(&r, t0 + 6000));
	assert_int_equal(b->tokens, 1);
	rig_fini(&r);
}

static void test_fifo(void **st)
{
	struct rig r;
	struct rd_reg_bucket *b;

	(void)st;
	rig_init(&r, 1000);
	b = &r.ctl->reg_bucket[0];
	b->tokens = 0;
	b->last_ns = rd_mono_ns();
	/* 0, 1, 2 ask in that order with an empty bucket: each waits */
	for (int i = 0; i < NCONN; i++) {
		ask(&r, i);
		assert_true(rd_reg_rate_hold(r.ctl, &r.conn[i]));
		assert_int_equal(r.conn[i].wait, RD_WAIT_RATE);
	}
	assert_int_equal(b->held, NCONN);
	b->tokens = 100; /* plenty: still one at a time, in order */
	for (int i = 0; i < NCONN; i++) {
		rd_reg_rate_timer(r.ctl, rd_mono_ns());
		for (int j = 0; j < NCONN; j++)
			assert_int_equal(r.conn[j].wait, j == i ? RD_WAIT_NONE :
					 j > i ? RD_WAIT_RATE : RD_WAIT_NONE);
		/* a later one that became readable some other way waits its turn */
		if (i + 1 < NCONN) {
			r.conn[i + 1].wait = RD_WAIT_NONE;
			assert_true(rd_reg_rate_hold(r.ctl, &r.conn[i + 1]));
		}
		/* its turn: it reads (not held), runs, and is charged */
		assert_false(rd_reg_rate_hold(r.ctl, &r.conn[i]));
		assert_false(r.conn[i].rate_queued);
		if (i + 1 < NCONN)
			assert_int_equal(r.conn[i + 1].wait, RD_WAIT_RATE);
		rd_reg_rate_charge(r.ctl, 0, ROSHM_CTL_REGION_GRANT);
		/* the charge let the next one read at once */
		if (i + 1 < NCONN)
			assert_int_equal(r.conn[i + 1].wait, RD_WAIT_NONE);
	}
	assert_null(b->q_head);
	assert_null(b->q_tail);
	assert_int_equal(b->held, NCONN); /* counted once each */
	/* a newcomer with tokens and nobody waiting is not held */
	ask(&r, 0);
	assert_false(rd_reg_rate_hold(r.ctl, &r.conn[0]));
	/* a waiting connection that closes gives its turn to the next */
	b->tokens = 0;
	ask(&r, 1);
	ask(&r, 2);
	assert_true(rd_reg_rate_hold(r.ctl, &r.conn[1]));
	assert_true(rd_reg_rate_hold(r.ctl, &r.conn[2]));
	b->tokens = 5;
	rd_reg_rate_forget(r.ctl, &r.conn[1]);
	assert_false(r.conn[1].rate_queued);
	assert_int_equal(r.conn[2].wait, RD_WAIT_NONE);
	assert_ptr_equal(b->q_head, &r.conn[2]);
	assert_false(rd_reg_rate_hold(r.ctl, &r.conn[2]));
	assert_null(b->q_head);
	rig_fini(&r);
}

/*
 * debt_frozen_while_idle (adversary review of ce28ed1): a tenant's own
 * drain charges 1 per region at once (drain.c), so its bucket can owe far
 * more than a second. refill() adds one second's worth for any gap of a
 * second or more, and the timer refills only while someone waits: an hour
 * of idleness repays 1 s of debt. 100 owed at 10/s, idle an hour: the
 * next request must run at once (it waited 9 s more).
 */
static void test_debt_frozen_while_idle(void **st)
{
	struct rig r;
	struct rd_reg_bucket *b;
	const uint64_t t0 = 1000 * NS;

	(void)st;
	rig_init(&r, 10);
	b = &r.ctl->reg_bucket[0];
	b->tokens = 10;
	b->last_ns = t0;
	rd_reg_rate_take(r.ctl, 0, 110);   /* a drain of 110 regions */
	assert_int_equal(b->tokens, -100);
	/* nobody waits for an hour: the timer does not touch the bucket */
	rd_reg_rate_timer(r.ctl, t0 + 1800 * NS);
	/* then a request: 3600 s earned 36000, capped at 10 */
	assert_true(unparked_at(&r, t0 + 3600 * NS));
	assert_int_equal(b->tokens, 10);
	rig_fini(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_debt_forgiven),
		cmocka_unit_test(test_big_rate),
		cmocka_unit_test(test_fifo),
		cmocka_unit_test(test_debt_frozen_while_idle),
	};

	return cmocka_run_group_tests_name("reg_rate", tests, NULL, NULL);
}
