// SPDX-License-Identifier: MIT
/*
 * The poller's share per tenant (struct rd_share, issue 13): with clients
 * of several tenants attached, every round gives each tenant
 * dataplane.share_quantum x quota.weight of work, and quota.ops_per_sec /
 * quota.bytes_per_sec cap what a tenant gets through at all.
 *
 * - ops_cap: tenant a (ops_per_sec = 2000) keeps 32 NOPs in flight for a
 *   second; it completes no more than the limit lets through (the bucket's
 *   10 ms and one round's burst on top), yet keeps going, and a client of
 *   tenant b, unlimited, completes its own NOPs meanwhile.
 * - bytes_cap: the same with 64 KiB WRITEs and bytes_per_sec = 8 MiB.
 * - weights: tenants c (weight 3) and d (weight 1) both keep 16 WRITEs of
 *   4 MiB in flight into their own regions for a second: c moves about
 *   three times d's bytes (asserted: between 1.8 and 5 times), and
 *   roshm_tenant_throttled_total says d's work was held back by its share.
 *   Bulk against bulk: no copy steps aside (roshm_copy_yields_total).
 * - small_first: tenant b keeps 16 WRITEs of 4 MiB in flight (each a
 *   pattern of its own) while tenant a sends 64 B WRITEs one at a time: b's
 *   copies step aside for a's operations (roshm_copy_yields_total rises),
 *   both go on, and b's region holds b's last pattern byte for byte (a copy
 *   done in pieces, resumed in later passes and rounds).
 *
 * The caps are upper bounds on what got through in the time the test
 * measured itself (the machine's speed only makes the counts smaller); the
 * weights are a ratio of two clients measured over the same second.
 * Before the shares (main at 1263dd5) roshmd refused the quota keys; with
 * them ignored, tenant a completes NOPs as fast as b (600k in the second
 * here) and c and d move the same bytes (a client each, round robin).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "attack.h"

static struct th_daemon d;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct flood {
	struct roshm *r;
	uint32_t handle;              /* 0: NOPs */
	uint32_t len;
	unsigned depth;
	double seconds;
	/* out */
	uint64_t ops, bytes;
	double elapsed;
	int err;
};

/* Keep @depth operations in flight for @seconds; count what completed. */
static void *flood_run(void *arg)
{
	struct flood *f = arg;
	unsigned inflight = 0;
	double t0 = now_s(), end = t0 + f->seconds;

	for (;;) {
		bool more = now_s() < end;

		while (more && inflight < f->depth) {
			struct roshm_sqe *s = roshm_get_sqe(f->r);

			if (!s)
				break;
			if (f->handle)
				roshm_prep_write(s, f->handle, 0, 0, f->len);
			else
				roshm_prep_nop(s);
			inflight++;
		}
		if (more && roshm_submit(f->r) < 0) {
			f->err = -1;
			break;
		}
		if (!inflight)
			break;
		struct roshm_cqe c;
		int st = atk_reap(f->r, &c, 30000);

		if (st || c.status) {
			f->err = st ? st : c.status;
			break;
		}
		inflight--;
		if (now_s() <= end) {
			f->ops++;
			f->bytes += f->handle ? f->len : 0;
		}
	}
	f->elapsed = now_s() - t0;
	if (f->elapsed > f->seconds)
		f->elapsed = f->seconds;
	return NULL;
}

static struct roshm *open_tenant(const char *t, uint64_t arena)
{
	struct roshm_params p = { .arena_size = arena, .sq_entries = 64, .cq_entries = 64 };
	int err;
	struct roshm *r = atk_open(&d, t, &p, &err);

	if (!r)
		fail_msg("attach as %s: %s", t, roshm_strerror(err));
	return r;
}

static void test_ops_cap(void **state)
{
	struct roshm *a = open_tenant("a", 1 << 20), *b = open_tenant("b", 1 << 20);
	struct flood fa = { .r = a, .depth = 32, .seconds = 1.0 };
	struct flood fb = { .r = b, .depth = 8, .seconds = 1.0 };
	pthread_t ta, tb;

	(void)state;
	pthread_create(&ta, NULL, flood_run, &fa);
	pthread_create(&tb, NULL, flood_run, &fb);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	assert_int_equal(fa.err, 0);
	assert_int_equal(fb.err, 0);
	double limit = 2000 * fa.elapsed + 20 + 32 + 2000 * 0.01;

	print_message("tenant a (2000 ops/s): %llu NOPs in %.2f s (at most %.0f); tenant b: %llu\n",
		      (unsigned long long)fa.ops, fa.elapsed, limit, (unsigned long long)fb.ops);
	if ((double)fa.ops > limit)
		fail_msg("tenant a completed %llu NOPs in %.2f s, over its 2000/s limit",
			 (unsigned long long)fa.ops, fa.elapsed);
	assert_true(fa.ops > 0);
	assert_true(fb.ops > 0);
	roshm_close(a);
	roshm_close(b);
	atk_assert_alive(&d);
}

static void test_bytes_cap(void **state)
{
	struct roshm *a = open_tenant("e", 4 << 20);
	struct flood fa = { .r = a, .len = 65536, .depth = 32, .seconds = 1.0 };
	struct roshm *b = open_tenant("b", 1 << 20);
	const double rate = 8 << 20;

	(void)state;
	assert_int_equal(roshm_region_create(a, "bytes", 1 << 20, NULL, &fa.handle), 0);
	/* tenant b attached: a share applies as well, which must not matter */
	flood_run(&fa);
	assert_int_equal(fa.err, 0);
	double limit = rate * fa.elapsed + rate / 100 + (256 << 10) + 65536 + rate * 0.01;

	print_message("tenant e (8 MiB/s): %.2f MiB in %.2f s (at most %.2f MiB)\n",
		      (double)fa.bytes / (1 << 20), fa.elapsed, limit / (1 << 20));
	if ((double)fa.bytes > limit)
		fail_msg("tenant e moved %llu bytes in %.2f s, over its 8 MiB/s limit",
			 (unsigned long long)fa.bytes, fa.elapsed);
	assert_true(fa.ops > 0);
	roshm_close(a);
	roshm_close(b);
	atk_assert_alive(&d);
}

/* roshm_tenant_throttled_total, as the admin "stats" answer carries it */
static uint64_t throttled(const char *tenant, const char *reason)
{
	char *json = NULL, key[96];
	uint64_t v = 0;

	if (th_admin(&d, "stats", &json) || !json)
		fail_msg("admin stats failed");
	snprintf(key, sizeof(key), "\"%s\":{\"rate\":", tenant);
	char *at = strstr(json, "\"tenant_throttled\"");

	at = at ? strstr(at, key) : NULL;
	if (!at)
		fail_msg("no tenant_throttled for %s in %s", tenant, json);
	if (!strcmp(reason, "share"))
		at = strstr(at, "\"share\":");
	v = at ? strtoull(strchr(at, ':') + 1, NULL, 10) : 0;
	free(json);
	return v;
}

/* A poller counter of the admin "stats" answer. */
static uint64_t stat_u64(const char *name)
{
	char *json = NULL, key[64];
	uint64_t v = 0;

	if (th_admin(&d, "stats", &json) || !json)
		fail_msg("admin stats failed");
	snprintf(key, sizeof(key), "\"%s\":", name);
	char *at = strstr(json, key);

	if (!at)
		fail_msg("no %s in %s", name, json);
	v = strtoull(at + strlen(key), NULL, 10);
	free(json);
	return v;
}

static void test_weights(void **state)
{
	struct roshm *c = open_tenant("c", 8 << 20), *dd = open_tenant("d", 8 << 20);
	/* big WRITEs: the poller, not the clients' core, is what limits them */
	struct flood fc = { .r = c, .len = 4 << 20, .depth = 16, .seconds = 1.0 };
	struct flood fd = { .r = dd, .len = 4 << 20, .depth = 16, .seconds = 1.0 };
	pthread_t tc, td;

	(void)state;
	assert_int_equal(roshm_region_create(c, "wc", 4 << 20, NULL, &fc.handle), 0);
	assert_int_equal(roshm_region_create(dd, "wd", 4 << 20, NULL, &fd.handle), 0);
	uint64_t held0 = throttled("d", "share"), y0 = stat_u64("copy_yields");

	pthread_create(&tc, NULL, flood_run, &fc);
	pthread_create(&td, NULL, flood_run, &fd);
	pthread_join(tc, NULL);
	pthread_join(td, NULL);
	assert_int_equal(fc.err, 0);
	assert_int_equal(fd.err, 0);
	double ratio = fd.bytes ? (double)fc.bytes / (double)fd.bytes : 1e9;
	uint64_t held = throttled("d", "share") - held0;

	print_message("weight 3: %.1f MiB, weight 1: %.1f MiB in the same second: %.2f; "
		      "d held back %llu times\n", (double)fc.bytes / (1 << 20),
		      (double)fd.bytes / (1 << 20), ratio, (unsigned long long)held);
	if (ratio < 1.8 || ratio > 5)
		fail_msg("weights 3 and 1 moved %.2f times the bytes of one another, not about 3",
			 ratio);
	assert_true(held > 0);
	assert_int_equal(stat_u64("copy_yields") - y0, 0); /* bulk against bulk: whole turns */
	roshm_close(c);
	roshm_close(dd);
	atk_assert_alive(&d);
}

static void test_small_first(void **state)
{
	struct roshm *a = open_tenant("a2", 1 << 20), *b = open_tenant("b", 8 << 20);
	const uint32_t len = 4 << 20;
	uint8_t *arena = roshm_arena(b, NULL);
	uint32_t ha, hb;
	uint64_t seq = 0, got = 0, small = 0, y0 = stat_u64("copy_yields");
	double end = now_s() + 1.0;

	(void)state;
	assert_int_equal(roshm_region_create(a, "small", 4096, NULL, &ha), 0);
	assert_int_equal(roshm_region_create(b, "bulk", len, NULL, &hb), 0);
	/* b: two halves of its arena, each 4 MiB WRITE from the half it was
	 * written into, a pattern per WRITE; a: one 64 B WRITE at a time */
	while (now_s() < end || got < seq) {
		struct roshm_sqe *s;
		struct roshm_cqe c;

		while (now_s() < end && seq - got < 2 && (s = roshm_get_sqe(b))) {
			uint8_t *src = arena + (seq & 1) * len;

			memset(src, (int)(seq * 7 + 1), len);
			roshm_prep_write(s, hb, 0, (seq & 1) * len, len);
			seq++;
		}
		roshm_submit(b);
		if (now_s() < end) {
			s = roshm_get_sqe(a);
			if (!s) {
				fail_msg("tenant a: no SQE with nothing in flight");
				return;
			}
			roshm_prep_write(s, ha, 0, 0, 64);
			roshm_submit(a);
			assert_int_equal(atk_reap(a, &c, 30000), 0);
			assert_int_equal(c.status, 0);
			small++;
		}
		struct roshm_cqe *pc;

		while (got < seq && roshm_peek_cqe(b, &pc) == 0) {
			assert_int_equal(atk_reap(b, &c, 30000), 0);
			assert_int_equal(c.status, 0);
			got++;
		}
		if (now_s() >= end && got < seq) {
			assert_int_equal(atk_reap(b, &c, 30000), 0);
			assert_int_equal(c.status, 0);
			got++;
		}
	}
	uint64_t yields = stat_u64("copy_yields") - y0;
	const uint8_t *data = roshm_region_data(b, hb, NULL);
	uint8_t last = (uint8_t)((seq - 1) * 7 + 1);

	print_message("tenant b: %llu WRITEs of 4 MiB; tenant a: %llu of 64 B meanwhile; b's copies "
		      "stepped aside %llu times\n", (unsigned long long)seq,
		      (unsigned long long)small, (unsigned long long)yields);
	assert_true(seq > 1 && small > 0);
	assert_true(yields > 0);
	for (uint32_t i = 0; i < len; i++)
		if (data[i] != last)
			fail_msg("bulk region byte %u: %u, expected %u (the last WRITE's)", i, data[i], last);
	roshm_close(a);
	roshm_close(b);
	atk_assert_alive(&d);
}

static int setup(void **state)
{
	(void)state;
	th_cleanup_enable();
	return th_daemon_start(&d, "sec-share",
			       "tenants = ( { name = \"a\"; token = \"ta\"; quota = { ops_per_sec = 2000; }; },\n"
			       "  { name = \"b\"; token = \"tb\"; },\n"
			       "  { name = \"c\"; token = \"tc\"; quota = { weight = 3; }; },\n"
			       "  { name = \"d\"; token = \"td\"; },\n"
			       "  { name = \"a2\"; token = \"ta2\"; },\n"
			       "  { name = \"e\"; token = \"te\"; quota = { bytes_per_sec = 8388608; }; } );\n"
			       "channel: { hugepages = \"off\"; max_arena_size = 16777216; };\n") ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	atk_daemon_kill(&d);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ops_cap),
		cmocka_unit_test(test_bytes_cap),
		cmocka_unit_test(test_weights),
		cmocka_unit_test(test_small_first),
	};

	return cmocka_run_group_tests_name("fair_share", tests, setup, teardown);
}
