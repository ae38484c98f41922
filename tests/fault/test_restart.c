// SPDX-License-Identifier: MIT
/*
 * kill -9 roshmd and start it again under two running pods: the owner keeps
 * its region's contents (libroshm re-attaches it from the memfd it holds,
 * under a new epoch) and the user's plain operations only see a delay
 * (libroshm resubmits what had no completion). A transaction or an atomic
 * whose outcome was lost in the crash completes with ECONNRESET, never twice.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "roshm.h"
#include "harness.h"

#define N 2000

static struct th_daemon d;

struct shared {
	volatile uint64_t progress, stop, stop_user, owner_ready;
	volatile uint64_t epoch_before, epoch_after;
	volatile int64_t txn_reset, txn_ok, errors;
	char why[256];
};
static struct shared *sh;

static struct roshm *attach(void)
{
	struct roshm_params p = { .sock_path = d.sock, .reconnect_ms = 15000 };
	int err;

	return roshm_open(&p, &err);
}

static int owner(void *arg)
{
	struct roshm *r = attach();
	struct roshm_region_opts o = { .txn_slots = 16, .slot_size = 512 };
	const struct roshm_region_hdr *h;
	uint32_t hd;
	uint8_t *data;

	(void)arg;
	if (!r || roshm_region_create(r, "keep", 65536, &o, &hd))
		return 2;
	data = roshm_region_data(r, hd, NULL);
	h = (const void *)(data - roshm_region_data_off(16, 512));
	memset(data, 0x5A, 4096);
	sh->epoch_before = h->epoch;
	sh->owner_ready = 1;
	/* an idle pod still notices the restart the next time it calls in */
	while (!sh->stop) {
		if (roshm_nop_sync(r)) {
			snprintf(sh->why, sizeof(sh->why), "owner nop failed");
			return 1;
		}
		usleep(20000);
	}
	sh->epoch_after = h->epoch;
	roshm_close(r);
	return 0;
}

static int user(void *arg)
{
	struct roshm *r = attach();
	uint32_t h;
	uint8_t *a;
	int ret = -ENOENT;

	(void)arg;
	if (!r)
		return 2;
	while (ret == -ENOENT)
		ret = roshm_region_open(r, "default/keep", &h, NULL);
	if (ret)
		return 3;
	a = roshm_arena(r, NULL);
	for (uint64_t i = 0; !sh->stop_user; i++) {
		memset(a, (int)(i & 0xff), 1024);
		memset(a + 4096, 0, 4096);
		if ((ret = roshm_write_sync(r, h, 8192, 0, 1024)) ||
		    (ret = roshm_read_sync(r, h, 8192, 4096, 1024)) ||
		    memcmp(a, a + 4096, 1024) ||
		    (ret = roshm_read_sync(r, h, 0, 4096, 4096)) || a[4096] != 0x5A || a[8191] != 0x5A) {
			snprintf(sh->why, sizeof(sh->why), "iteration %llu: %s",
				 (unsigned long long)i, ret ? roshm_strerror(ret) : "wrong bytes");
			sh->errors++;
			return 1;
		}
		if (i % 10 == 0) {
			struct roshm_txn_write tw = { .off = 16384, .arena_off = 0, .len = 64 };

			ret = roshm_txn_sync(r, h, &tw, 1, NULL);
			if (ret == -ECONNRESET)
				sh->txn_reset++;   /* lost in the crash: said so */
			else if (ret == 0)
				sh->txn_ok++;
			else {
				snprintf(sh->why, sizeof(sh->why), "txn: %s", roshm_strerror(ret));
				sh->errors++;
				return 1;
			}
		}
		sh->progress = i + 1;
	}
	roshm_close(r);
	return 0;
}

static void test_roshmd_restart(void **state)
{
	pid_t o, u;
	char *json = NULL;

	(void)state;
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	memset(sh, 0, sizeof(*sh));
	o = th_spawn(owner, NULL);
	for (int i = 0; i < 500 && !sh->owner_ready; i++)
		usleep(10000);
	assert_true(sh->owner_ready);
	u = th_spawn(user, NULL);
	for (int i = 0; i < 1000 && sh->progress < 300; i++)
		usleep(10000);
	assert_true(sh->progress >= 300);
	th_daemon_kill(&d);
	uint64_t at_kill = sh->progress;

	usleep(200000);
	assert_int_equal(th_daemon_restart(&d), 0);
	/* the user carries on: N more iterations after the restart */
	for (int i = 0; i < 3000 && sh->progress < at_kill + N && !sh->errors; i++)
		usleep(10000);
	sh->stop_user = 1;
	int st = th_wait(u);

	if (st)
		fail_msg("user failed (exit %d): %s", st, sh->why);
	assert_true(sh->progress >= at_kill + N);
	/* the region is published again by the new roshmd */
	assert_int_equal(th_admin(&d, "regions", &json), 0);
	if (!strstr(json, "default/keep")) {
		th_daemon_dump_log(&d);
		fail_msg("regions after the restart: %s", json);
	}
	free(json);
	sh->stop = 1;
	assert_int_equal(th_wait(o), 0);
	assert_int_not_equal(sh->epoch_before, sh->epoch_after); /* a new instance */
	print_message("killed at iteration %llu, %llu iterations in all, %lld transactions committed, "
		      "%lld reported lost (ECONNRESET)\n", (unsigned long long)at_kill,
		      (unsigned long long)sh->progress, (long long)sh->txn_ok, (long long)sh->txn_reset);
}

/*
 * roshmd gone for longer than reconnect_ms: roshm_wait_cqe says so once
 * (-ECONNRESET), every operation that had no CQE then completes with
 * -ECONNRESET (its user_data given back), and the blocking helpers and the
 * control calls keep trying to re-attach on each call (-ECONNRESET; never
 * -EBUSY because of a helper's own lost operation, never -EBADF for want of
 * a socket) until roshmd is back, then work again.
 */
static void test_roshmd_gone(void **state)
{
	struct roshm_params p = { .sock_path = d.sock, .reconnect_ms = 300 };
	struct roshm_sqe *sqe;
	struct roshm_cqe *cqe;
	uint64_t old = 0, seen = 0;
	uint32_t h, h2;
	int err;

	(void)state;
	struct roshm *r = roshm_open(&p, &err);

	assert_non_null(r);
	assert_int_equal(roshm_region_create(r, "gone", 4096, NULL, &h), 0);
	assert_int_equal(roshm_fetch_add_sync(r, h, 0, 1, &old), 0);
	th_daemon_kill(&d);
	/* published into a ring nobody serves any more */
	sqe = roshm_get_sqe(r);
	if (!sqe) {
		fail_msg("SQ full");
		return;
	}
	roshm_prep_nop(sqe);
	roshm_sqe_set_data(sqe, 11);
	sqe = roshm_get_sqe(r);
	if (!sqe) {
		fail_msg("SQ full");
		return;
	}
	roshm_prep_fetch_add(sqe, h, 0, 1);
	roshm_sqe_set_data(sqe, 12);
	assert_int_equal(roshm_submit(r), 2);
	assert_int_equal(roshm_wait_cqe(r, &cqe), -ECONNRESET);
	assert_int_equal(roshm_inflight(r), 2);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(roshm_peek_cqe(r, &cqe), 0);
		assert_int_equal(cqe->status, -ECONNRESET);
		seen |= 1ull << cqe->user_data;
		roshm_cqe_seen(r, cqe);
	}
	assert_int_equal(seen, (1ull << 11) | (1ull << 12));
	assert_int_equal(roshm_peek_cqe(r, &cqe), -EAGAIN);
	assert_int_equal(roshm_inflight(r), 0);
	/* each call tries again, control calls too */
	assert_int_equal(roshm_nop_sync(r), -ECONNRESET);
	assert_int_equal(roshm_fetch_add_sync(r, h, 0, 1, &old), -ECONNRESET);
	assert_int_equal(roshm_inflight(r), 0);
	assert_int_equal(roshm_region_open(r, "default/gone", &h2, NULL), -ECONNRESET);
	assert_int_equal(th_daemon_restart(&d), 0);
	/* a control call is the first to find it back: it re-attaches */
	assert_int_equal(roshm_region_open(r, "default/gone", &h2, NULL), 0);
	assert_int_equal(roshm_region_close(r, h2), 0);
	assert_int_equal(roshm_nop_sync(r), 0);
	/* our region came back with its contents: 1 (the FETCH_ADDs after
	 * the kill never reached a roshmd) */
	assert_int_equal(roshm_fetch_add_sync(r, h, 0, 1, &old), 0);
	assert_int_equal(old, 1);
	roshm_close(r);
}

static int setup(void **state)
{
	(void)state;
	return th_daemon_start(&d, "restart", "txn: { abort_ms = 300; };") ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	if (th_daemon_stop(&d)) {
		th_daemon_dump_log(&d);
		return -1;
	}
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roshmd_restart),
		cmocka_unit_test(test_roshmd_gone),
	};

	return cmocka_run_group_tests_name("restart", tests, setup, teardown);
}
