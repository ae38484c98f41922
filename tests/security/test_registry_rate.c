// SPDX-License-Identifier: MIT
/*
 * A pod that makes its roshmd use the registry in a loop (grants and
 * revokes, region creates and closes, opens of names nobody published)
 * against one real roshmd with a file registry. quota.registry_ops_per_sec
 * bounds what its tenant causes: its requests wait (none fails, none is
 * lost), while another tenant's requests go on at once.
 *
 * Tenant "a" has 20 registry operations a second (a bucket of 20); "b" has
 * the default (500). Each loop below needs about 80 of a's operations, so
 * without the limit it ends in well under a second, and with it not before
 * 3 s: the check is a lower bound (a slow machine only makes it longer),
 * plus what roshmd logs and counts, plus the order: b's work, started
 * after a's flood, ends before it. A tenant's listings of its regions are
 * bounded by the same bucket (test_listings).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "attack.h"

static struct th_daemon d;

#define RATE 20
#define HELD_LOG "tenant a: more registry operations than its quota.registry_ops_per_sec"

static struct roshm *cl(const char *tenant)
{
	int err;
	struct roshm *r = atk_open(&d, tenant, NULL, &err);

	assert_non_null(r);
	return r;
}

/* A granter and a grantee of @tenant: @g (ROSHM_POLICY_GRANT) and the
 * granter's handle on the grantee's region. */
struct pair {
	struct roshm *granter, *grantee;
	uint32_t g, peer, ring;
};

static void pair_make(struct pair *p, const char *tenant, const char *tag)
{
	struct roshm_region_opts grant = { .policy = ROSHM_POLICY_GRANT };
	char gn[64], rn[64];

	snprintf(gn, sizeof(gn), "mem-%s", tag);
	snprintf(rn, sizeof(rn), "ring-%s", tag);
	p->granter = cl(tenant);
	p->grantee = cl(tenant);
	assert_int_equal(roshm_region_create(p->granter, gn, 4096, &grant, &p->g), 0);
	assert_int_equal(roshm_region_create(p->grantee, rn, 4096, NULL, &p->ring), 0);
	assert_int_equal(roshm_region_open(p->granter, rn, &p->peer, NULL), 0);
}

static void pair_free(struct pair *p)
{
	roshm_close(p->granter);
	roshm_close(p->grantee);
}

struct flood {
	struct pair *p;
	int rounds;
	int failed;              /* the first call that did not answer 0 */
	atomic_int done;
	double elapsed;
};

static void *grant_flood(void *arg)
{
	struct flood *f = arg;
	double t0 = atk_now_s();

	for (int i = 0; i < f->rounds && !f->failed; i++) {
		int ret = roshm_region_grant(f->p->granter, f->p->g, f->p->peer);

		if (!ret)
			ret = roshm_region_revoke(f->p->granter, f->p->g, f->p->peer);
		if (ret)
			f->failed = ret;
	}
	f->elapsed = atk_now_s() - t0;
	atomic_store(&f->done, 1);
	return NULL;
}

/*
 * a grants and revokes 40 times (80 record writes) in one thread; b, after
 * a's flood has begun, makes its own pair and grants 20 times. Every call
 * answers 0; b ends before a; a takes at least 3 s; the last grant stands
 * (the grantee opens the region).
 */
static void test_grants(void **st)
{
	struct pair a, b;
	struct flood fa = { .p = &a, .rounds = 40 };
	struct flood fb = { .p = &b, .rounds = 10 };
	pthread_t ta;
	uint32_t h;

	(void)st;
	pair_make(&a, "a", "ga");
	assert_int_equal(pthread_create(&ta, NULL, grant_flood, &fa), 0);
	usleep(1500 * 1000); /* a's bucket is empty by now */
	pair_make(&b, "b", "gb");
	grant_flood(&fb);
	fprintf(stderr, "b: 10 grants and revokes in %.3f s (a done: %d)\n", fb.elapsed,
		atomic_load(&fa.done));
	assert_int_equal(fb.failed, 0);
	assert_int_equal(atomic_load(&fa.done), 0);  /* b was not held behind a */
	pthread_join(ta, NULL);
	fprintf(stderr, "a: 40 grants and revokes in %.3f s (limit %d/s)\n", fa.elapsed, RATE);
	assert_int_equal(fa.failed, 0);
	assert_true(fa.elapsed >= 3.0);
	/* nothing lost: the last change stands, and the next one too */
	assert_int_equal(roshm_region_open(a.grantee, "mem-ga", &h, NULL), -EACCES);
	assert_int_equal(roshm_region_grant(a.granter, a.g, a.peer), 0);
	assert_int_equal(roshm_region_open(a.grantee, "mem-ga", &h, NULL), 0);
	assert_true(atk_log_count(&d, HELD_LOG) >= 1);
	assert_int_equal(atk_log_count(&d, "tenant b: more registry operations"), 0);
	pair_free(&a);
	pair_free(&b);
	atk_assert_alive(&d);
}

/*
 * A grant is charged by the record it writes again (1 for each 64 grants it
 * holds, past its own 1): tenant "c" (100 a second) fills a region with 128
 * grants (parts of it, to one name), then grants and revokes a 129th 20
 * times: 40 writes of a record of 128-129 grants, 3 each. Without the
 * charge they cost 40 and end in about 0.4 s; with it, 120: not before
 * 0.8 s (the bucket is empty after the filling, which waited for it).
 */
#define C_RATE 100
static void test_grant_bytes(void **st)
{
	struct roshm_region_opts grant = { .policy = ROSHM_POLICY_GRANT };
	struct roshm *a = cl("c"), *b = cl("c");
	struct roshm_part p = { .len = 8, .access = ROSHM_ACCESS_READ };
	uint32_t g, ring, h;
	double t0, el;

	(void)st;
	assert_int_equal(roshm_region_create(a, "gb-mem", 4096, &grant, &g), 0);
	assert_int_equal(roshm_region_create(b, "gb-ring", 4096, NULL, &ring), 0);
	for (int i = 0; i < 128; i++) {
		p.off = 8 * (uint64_t)i;
		assert_int_equal(roshm_region_grant_part(a, g, "gb-ring", &p), 0);
	}
	p.off = 8 * 128;
	t0 = atk_now_s();
	for (int i = 0; i < 20; i++) {
		assert_int_equal(roshm_region_grant_part(a, g, "gb-ring", &p), 0);
		assert_int_equal(roshm_region_revoke_part(a, g, "gb-ring", &p), 0);
	}
	el = atk_now_s() - t0;
	fprintf(stderr, "c: 20 grants and revokes on a region of 128 grants in %.3f s (limit %d/s)\n",
		el, C_RATE);
	assert_true(el >= 0.8);
	/* nothing lost: the grantee opens one of the 128 parts, not the 129th */
	assert_int_equal(roshm_region_open_part(b, "gb-mem", &(struct roshm_part){ .off = 0, .len = 8,
				.access = ROSHM_ACCESS_READ }, &h, NULL), 0);
	assert_int_equal(roshm_region_open_part(b, "gb-mem", &p, &h, NULL), -EACCES);
	roshm_close(a);
	roshm_close(b);
	atk_assert_alive(&d);
}

/* Region creates and closes (a record each way), and opens of names nobody
 * published (a read of the store past the cache each): 40 of each, about
 * 80 + 40 operations, after a second's rest that filled a's bucket again. */
static void test_creates_and_opens(void **st)
{
	struct roshm *r = cl("a");
	uint32_t h;
	double t0;

	(void)st;
	sleep(1);
	t0 = atk_now_s();
	for (int i = 0; i < 40; i++) {
		char name[32];

		snprintf(name, sizeof(name), "churn-%d", i);
		assert_int_equal(roshm_region_create(r, name, 4096, NULL, &h), 0);
		assert_int_equal(roshm_region_close(r, h), 0);
		snprintf(name, sizeof(name), "nobody-%d", i);
		assert_int_equal(roshm_region_open(r, name, &h, NULL), -ENOENT);
	}
	fprintf(stderr, "a: 40 creates, closes and missed opens in %.3f s\n", atk_now_s() - t0);
	assert_true(atk_now_s() - t0 >= 4.0);
	roshm_close(r);
	atk_assert_alive(&d);
}

/*
 * Listings of a tenant's regions (admin "regions PREFIX", which
 * libroshm-verbs' multicast senders call) take 1 each and are refused with
 * EAGAIN, not queued, once a's bucket is empty: a lists in a loop until
 * the first refusal (at 20 a second that comes within the first few dozen
 * calls; 2000 would take a client 100 s to dodge it). Every answer is 0 or
 * -EAGAIN; what was listed is a's record and never b's of the same name;
 * b lists at once meanwhile; a's next create waits and works, and after a
 * rest a lists again.
 */
static void test_listings(void **st)
{
	struct roshm *a = cl("a"), *b = cl("b");
	uint32_t ha, hb, h;
	int ok = 0, refused = 0;
	double t0, el;
	char *text;

	(void)st;
	assert_int_equal(roshm_region_create(a, "lst-x", 4096, NULL, &ha), 0);
	assert_int_equal(roshm_region_create(b, "lst-x", 4096, NULL, &hb), 0);
	sleep(1);
	t0 = atk_now_s();
	for (int i = 0; i < 2000 && !refused; i++) {
		int ret = roshm_region_list(a, "lst-", &text);

		if (ret == -EAGAIN) {
			refused++;
			continue;
		}
		assert_int_equal(ret, 0);
		assert_non_null(strstr(text, "\"a/lst-x\""));
		assert_null(strstr(text, "b/"));
		free(text);
		ok++;
	}
	el = atk_now_s() - t0;
	fprintf(stderr, "a: %d listings in %.3f s before the first refusal (limit %d/s)\n", ok, el,
		RATE);
	assert_int_equal(refused, 1);
	assert_true(ok >= 1 && ok <= RATE + 1 + (int)(el * RATE));
	/* another tenant is not held by a's listings */
	for (int i = 0; i < 30; i++) {
		assert_int_equal(roshm_region_list(b, "lst-", &text), 0);
		assert_non_null(strstr(text, "\"b/lst-x\""));
		assert_null(strstr(text, "a/"));
		free(text);
	}
	/* a's registry work waits for the bucket, as before, and is done */
	assert_int_equal(roshm_region_create(a, "lst-y", 4096, NULL, &h), 0);
	sleep(1);
	assert_int_equal(roshm_region_list(a, "lst-y", &text), 0);
	assert_non_null(strstr(text, "\"a/lst-y\""));
	free(text);
	assert_true(atk_log_count(&d, "tenant a: more registry operations than its "
				  "quota.registry_ops_per_sec (20): a listing of its regions refused") >= 1);
	assert_int_equal(atk_log_count(&d, "tenant b: more registry operations"), 0);
	roshm_close(a);
	roshm_close(b);
	atk_assert_alive(&d);
}

/*
 * A listing is charged by the records it read too (1 more for each 32):
 * tenant "c" (100 a second) holds 130 regions named "many-*", and lists
 * them in a loop until the first refusal: each listing costs 5, so about
 * 20 pass (100 without the charge). Then its bucket refills.
 */
static void test_listing_cost(void **st)
{
	struct roshm *r = cl("c");
	uint32_t h;
	int ok = 0, refused = 0;
	double t0, el;
	char *text;

	(void)st;
	for (int i = 0; i < 130; i++) {
		char name[32];

		snprintf(name, sizeof(name), "many-%d", i);
		assert_int_equal(roshm_region_create(r, name, 4096, NULL, &h), 0);
	}
	sleep(2);
	t0 = atk_now_s();
	for (int i = 0; i < 2000 && !refused; i++) {
		int ret = roshm_region_list(r, "many-", &text);

		if (ret == -EAGAIN) {
			refused++;
			continue;
		}
		assert_int_equal(ret, 0);
		assert_non_null(strstr(text, "\"c/many-129\""));
		free(text);
		ok++;
	}
	el = atk_now_s() - t0;
	fprintf(stderr, "c: %d listings of 130 records in %.3f s before the first refusal "
		"(limit %d/s, 5 each)\n", ok, el, C_RATE);
	assert_int_equal(refused, 1);
	assert_true(ok >= 1 && ok <= C_RATE / 5 + 2 + (int)(el * C_RATE / 5));
	roshm_close(r);
	atk_assert_alive(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grants),
		cmocka_unit_test(test_creates_and_opens),
		cmocka_unit_test(test_grant_bytes),
		cmocka_unit_test(test_listings),
		cmocka_unit_test(test_listing_cost),
	};
	char conf[1024];
	int fails;

	th_cleanup_enable();
	snprintf(conf, sizeof(conf),
		 "tenants = ( { name = \"a\"; token = \"ta\"; quota = { registry_ops_per_sec = %d; }; },\n"
		 "            { name = \"b\"; token = \"tb\"; },\n"
		 "            { name = \"c\"; token = \"tc\"; quota = { registry_ops_per_sec = %d; }; } );\n"
		 "channel: { hugepages = \"off\"; };\n", RATE, C_RATE);
	if (th_daemon_start(&d, "secregrate", conf))
		return 1;
	fails = cmocka_run_group_tests_name("security_registry_rate", tests, NULL, NULL);
	if (fails)
		atk_log_tail(&d, 30);
	atk_daemon_kill(&d);
	return fails;
}
