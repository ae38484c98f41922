// SPDX-License-Identifier: MIT
/*
 * Defect 8: the poller takes up to `burst` (32) SQEs per client per round
 * with no byte budget, and a local WRITE is one memcpy of up to the arena's
 * size. A client with a 256 MiB arena that submits 32 arena-sized WRITEs
 * holds the only data-path thread for 8 GiB of copying before any other
 * client of the node is looked at again.
 *
 * The flooder (tenant "a") submits 32 WRITEs of ~256 MiB into its own region;
 * WRITE i copies from arena offset i * 4096, whose page holds the byte i + 1,
 * so the region's first byte tells how far the poller has got. Once the
 * copying has begun, tenant "b" submits a NOP. Asserted: when b's NOP
 * completes, the poller has not started the flood's last WRITE (ordering,
 * not time: the NOP must not wait for the whole flood). The flood must then
 * complete too, without an error. Needs about 600 MiB of memory.
 *
 * The marker byte, not the flooder's CQ tail, is the measure: b may be served
 * in the flood's own round (after its 32 copies) and published before the
 * flooder, so the tail can still read 0 when b's NOP arrives.
 *
 * How it fails on today's code (main at ddc53d9), 5 of 5 runs:
 *   "tenant b's NOP completed after the poller had started all 32 flood
 *    WRITEs (32 of them posted to the flooder by then)" (once "0 of them
 *    posted": the case above)
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

#define ARENA (256u << 20)
#define NFLOOD 32                     /* the default burst */

static struct th_daemon d;
static struct atk_bystander by;

static void test_flood_then_nop(void **state)
{
	struct roshm_params pf = { .arena_size = ARENA, .sq_entries = 64, .cq_entries = 128 };
	struct roshm *f, *b;
	struct roshm_sqe *s;
	struct roshm_cqe c;
	volatile uint8_t *region;
	uint8_t *arena;
	uint32_t h, tail0, posted;
	int err, st, started;

	(void)state;
	b = atk_open(&d, "b", NULL, &err);
	assert_non_null(b);
	assert_int_equal(roshm_nop_sync(b), 0);
	f = atk_open(&d, "a", &pf, &err);
	if (!f)
		fail_msg("flooder attach with a 256 MiB arena: %s", roshm_strerror(err));
	assert_int_equal(roshm_region_create(f, "flood", ARENA, NULL, &h), 0);
	region = roshm_region_data(f, h, NULL);
	arena = roshm_arena(f, NULL);
	for (int i = 0; i < NFLOOD; i++)
		memset(arena + (size_t)i * 4096, i + 1, 4096);
	tail0 = __atomic_load_n(f->cq.ktail, __ATOMIC_ACQUIRE);
	for (int i = 0; i < NFLOOD; i++) {
		s = atk_sqe(f);
		roshm_prep_write(s, h, 0, (uint64_t)i * 4096, ARENA - (uint32_t)i * 4096);
		roshm_sqe_set_data(s, (uint64_t)i);
	}
	roshm_submit(f);
	/* the poller is copying */
	for (int i = 0; i < 30000 && !region[0]; i++)
		usleep(1000);
	assert_int_not_equal(region[0], 0);
	s = atk_sqe(b);
	roshm_prep_nop(s);
	roshm_submit(b);
	st = atk_reap(b, &c, 120000);
	/* how far the flood had got when the victim's NOP completed */
	started = region[0];
	posted = __atomic_load_n(f->cq.ktail, __ATOMIC_ACQUIRE) - tail0;
	if (st)
		fail_msg("tenant b's NOP did not complete within 120 s: %s", roshm_strerror(st));
	assert_int_equal(c.status, 0);
	print_message("tenant b's NOP completed with flood WRITE %d of %d under way, %u posted\n",
		      started, NFLOOD, posted);
	if (started >= NFLOOD)
		fail_msg("tenant b's NOP completed after the poller had started all %d flood WRITEs "
			 "(%u of them posted to the flooder by then)", NFLOOD, posted);
	/* the flood itself completes, in order, without an error */
	for (int i = 0; i < NFLOOD; i++) {
		st = atk_reap(f, &c, 120000);
		if (st)
			fail_msg("flood WRITE %d: no completion: %s", i, roshm_strerror(st));
		assert_int_equal(c.status, 0);
		assert_int_equal(c.user_data, (uint64_t)i);
	}
	roshm_close(f);
	roshm_close(b);
	atk_assert_alive(&d);
	atk_bystander_check(&by);
}

static int setup(void **state)
{
	(void)state;
	th_cleanup_enable();
	if (th_daemon_start(&d, "sec-flood",
			    ATK_TENANTS
			    "channel: { hugepages = \"off\"; max_arena_size = 268435456; };\n"
			    "limits: { max_region_size = 268435456; };\n"))
		return -1;
	return atk_bystander_start(&by, &d, "b", "by-flood") ? -1 : 0;
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
		cmocka_unit_test(test_flood_then_nop),
	};

	return cmocka_run_group_tests_name("poller_budget", tests, setup, teardown);
}
