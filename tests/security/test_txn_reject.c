// SPDX-License-Identifier: MIT
/*
 * Defect 15: a TXN_COMMIT that roshmd rejects before it reaches the
 * transaction engine (-EBADF bad handle, -EINVAL reserved field,
 * -EOPNOTSUPP region without a log, -EAGAIN region draining) leaves the
 * client's staged transaction in place: its writes ride along in the
 * client's NEXT transaction (all-or-nothing broken), or poison it. Each test
 * stages a write, has its commit rejected, then runs a valid transaction and
 * asserts that it succeeds and applies only its own write. A client of
 * tenant "b" works beside it throughout and must never see a difference.
 *
 * How it fails on today's code (main at ddc53d9), 5 of 5 runs:
 *   test_reject_bad_handle          "the rejected transaction's write landed at
 *                                    0 (0x58 ...) inside the next transaction"
 *   test_reject_reserved_field      the same, for the -EINVAL commit
 *   test_reject_region_without_log  the same, for the -EOPNOTSUPP commit
 *   test_reject_draining            "next transaction: status -22 (invalid
 *                                    argument or SQE field), expected 0" (the
 *                                    write staged for the draining region
 *                                    poisons it)
 *   test_sync_on_region_without_log "roshm_txn_sync on a region with a log
 *                                    after one on a region without: -95
 *                                    (operation not supported by this roshmd)"
 *   test_bystander_unharmed passes: this defect stays inside one client.
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

#define SLOTS 8
#define SLOT_SIZE 512
#define DATA 65536

static struct th_daemon d;
static struct atk_bystander by;

struct logged {
	struct roshm *r;
	uint32_t h;
	uint8_t *data;
	struct roshm_region_hdr *hdr;
};

/* A fresh client of tenant "a" that owns a region with a log. */
static void logged_open(struct logged *l, const char *name)
{
	struct roshm_region_opts o = { .txn_slots = SLOTS, .slot_size = SLOT_SIZE };
	int err;

	l->r = atk_open(&d, "a", NULL, &err);
	assert_non_null(l->r);
	assert_int_equal(roshm_region_create(l->r, name, DATA, &o, &l->h), 0);
	l->data = roshm_region_data(l->r, l->h, NULL);
	l->hdr = atk_region_hdr(l->r, l->h, SLOTS, SLOT_SIZE);
	assert_int_equal(l->hdr->magic, ROSHM_REGION_MAGIC);
}

/* TXN_WRITE @len bytes of @fill from the arena at @arena_off to @off of @wh,
 * then TXN_COMMIT on @ch (with a reserved field set if @rsvd): the commit's status. */
static int txn(struct roshm *r, uint32_t wh, uint64_t off, uint64_t arena_off, uint8_t fill,
	       uint32_t ch, bool rsvd)
{
	struct roshm_sqe *s;
	struct roshm_cqe c;
	uint8_t *a = roshm_arena(r, NULL);

	memset(a + arena_off, fill, 64);
	s = atk_sqe(r);
	roshm_prep_txn_write(s, wh, off, arena_off, 64);
	s = atk_sqe(r);
	roshm_prep_txn_commit(s, ch);
	if (rsvd)
		s->rsvd2 = 1;
	roshm_sqe_set_data(s, 0xc0ffee);
	roshm_submit(r);
	assert_int_equal(atk_reap(r, &c, 5000), 0);
	assert_int_equal(c.user_data, 0xc0ffee);
	return c.status;
}

static void wait_applied(const struct roshm_region_hdr *h)
{
	for (int i = 0; i < 500; i++) {
		if (__atomic_load_n(&h->txn_applied, __ATOMIC_ACQUIRE) ==
		    __atomic_load_n(&h->txn_tail, __ATOMIC_ACQUIRE))
			return;
		usleep(10000);
	}
	fail_msg("log not applied: %llu of %llu", (unsigned long long)h->txn_applied,
		 (unsigned long long)h->txn_tail);
}

static void expect_bytes(const uint8_t *p, uint8_t v, const char *what)
{
	for (int i = 0; i < 64; i++)
		if (p[i] != v)
			fail_msg("%s: byte %d is %#x, expected %#x", what, i, p[i], v);
}

/* After a rejected commit of a write of 'X' to offset 0, a valid transaction
 * writes 'Y' at 1024: it must succeed and bring 'Y' alone. */
static void next_txn_alone(struct logged *l)
{
	int st = txn(l->r, l->h, 1024, 64, 'Y', l->h, false);

	if (st)
		fail_msg("next transaction: status %d (%s), expected 0", st, roshm_strerror(st));
	wait_applied(l->hdr);
	expect_bytes(l->data + 1024, 'Y', "the next transaction's own write");
	for (int i = 0; i < 64; i++)
		if (l->data[i] != 0)
			fail_msg("the rejected transaction's write landed at %d (%#x ...) inside the next "
				 "transaction", i, l->data[i]);
}

static void test_reject_bad_handle(void **state)
{
	struct logged l;
	int st;

	(void)state;
	logged_open(&l, "rej-badf");
	st = txn(l.r, l.h, 0, 0, 'X', 0x7fff, false);
	assert_int_equal(st, -EBADF);
	next_txn_alone(&l);
	roshm_close(l.r);
}

static void test_reject_reserved_field(void **state)
{
	struct logged l;
	int st;

	(void)state;
	logged_open(&l, "rej-inval");
	st = txn(l.r, l.h, 0, 0, 'X', l.h, true);
	assert_int_equal(st, -EINVAL);
	next_txn_alone(&l);
	roshm_close(l.r);
}

static void test_reject_region_without_log(void **state)
{
	struct logged l;
	uint32_t plain;
	int st;

	(void)state;
	logged_open(&l, "rej-nolog");
	assert_int_equal(roshm_region_create(l.r, "rej-nolog-plain", DATA, NULL, &plain), 0);
	st = txn(l.r, l.h, 0, 0, 'X', plain, false);
	assert_int_equal(st, -EOPNOTSUPP);
	next_txn_alone(&l);
	roshm_close(l.r);
}

static void test_reject_draining(void **state)
{
	struct logged l;
	struct roshm_region_opts o = { .txn_slots = SLOTS, .slot_size = SLOT_SIZE };
	struct roshm_region_hdr *dh;
	uint32_t dr;
	uint8_t *dd;
	int fd, st = 0;

	(void)state;
	logged_open(&l, "rej-again");
	assert_int_equal(roshm_region_create(l.r, "rej-again-drain", DATA, &o, &dr), 0);
	dd = roshm_region_data(l.r, dr, NULL);
	dh = atk_region_hdr(l.r, dr, SLOTS, SLOT_SIZE);
	/* A reserved sequence nobody commits (its owner may write its own
	 * header): the drain waits for it, so the region stays draining. */
	__atomic_store_n(&dh->txn_tail, 1, __ATOMIC_RELEASE);
	fd = atk_admin_send(d.sock, "drain region a/rej-again-drain");
	assert_true(fd >= 0);
	/* draining once a plain WRITE to it is refused with -EAGAIN */
	for (int i = 0; i < 200 && st != -EAGAIN; i++) {
		st = roshm_write_sync(l.r, dr, 0, 0, 8);
		if (st != -EAGAIN)
			usleep(10000);
	}
	assert_int_equal(st, -EAGAIN);
	st = txn(l.r, dr, 0, 0, 'X', dr, false);
	assert_int_equal(st, -EAGAIN);
	next_txn_alone(&l);
	/* let the drain finish: the hole goes away */
	__atomic_store_n(&dh->txn_tail, dh->txn_applied, __ATOMIC_RELEASE);
	close(fd);
	for (int i = 0; i < 64; i++)
		if (dd[i] != 0)
			fail_msg("the rejected write reached the draining region (byte %d = %#x)", i, dd[i]);
	roshm_close(l.r);
}

static void test_sync_on_region_without_log(void **state)
{
	struct logged l;
	uint32_t plain;
	uint8_t *a;
	int st;

	(void)state;
	logged_open(&l, "rej-sync");
	assert_int_equal(roshm_region_create(l.r, "rej-sync-plain", DATA, NULL, &plain), 0);
	a = roshm_arena(l.r, NULL);
	memset(a, 'X', 64);
	memset(a + 64, 'Y', 64);
	struct roshm_txn_write w0 = { .off = 0, .arena_off = 0, .len = 64 };
	struct roshm_txn_write w1 = { .off = 1024, .arena_off = 64, .len = 64 };

	assert_int_equal(roshm_txn_sync(l.r, plain, &w0, 1, NULL), -EOPNOTSUPP);
	st = roshm_txn_sync(l.r, l.h, &w1, 1, NULL);
	if (st)
		fail_msg("roshm_txn_sync on a region with a log after one on a region without: %d (%s)",
			 st, roshm_strerror(st));
	wait_applied(l.hdr);
	expect_bytes(l.data + 1024, 'Y', "the second transaction's write");
	expect_bytes(l.data, 0, "bytes nobody wrote");
	roshm_close(l.r);
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
	if (th_daemon_start(&d, "sec-reject",
			    ATK_TENANTS
			    "channel: { hugepages = \"off\"; };\n"
			    /* holes stay holes for the draining test: nothing aborts them */
			    "txn: { abort_ms = 60000; };\n"
			    "drain: { timeout_ms = 60000; };\n"))
		return -1;
	return atk_bystander_start(&by, &d, "b", "by-reject") ? -1 : 0;
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
		cmocka_unit_test(test_reject_bad_handle),
		cmocka_unit_test(test_reject_reserved_field),
		cmocka_unit_test(test_reject_region_without_log),
		cmocka_unit_test(test_reject_draining),
		cmocka_unit_test(test_sync_on_region_without_log),
		cmocka_unit_test(test_bystander_unharmed),
	};

	return cmocka_run_group_tests_name("txn_reject", tests, setup, teardown);
}
