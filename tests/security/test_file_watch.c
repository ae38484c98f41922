// SPDX-License-Identifier: MIT
/*
 * The file registry's inotify (dataplane/registry/file.c take_changes)
 * against a registry writer, from an adversarial review of it. Two
 * registries on one directory, as two roshmd of a host: "a" writes, "b" is
 * told through its changed() callback, which here does what a remote
 * region's revalidation does (get_region); b's tenants, as roshmd's
 * wants_tenant says, are "t" and "late". Each case failed before its fix:
 *  1. flood: a writer that only opens and closes a record for writing
 *     (IN_CLOSE_WRITE, no MAC needed) kept b's dispatch() in take_changes
 *     as long as it liked, a revalidation per event. Now one dispatch reads
 *     FILE_READS_MAX times at most and tells each name once (32 at most).
 *  2. exhaust: 1100 empty tenant directories took every watch slot, and a
 *     tenant directory made later was never watched. Now only our tenants'
 *     directories are watched.
 *  3. recycle: the same with one directory made and removed 1100 times
 *     (slots never given back). Now IN_IGNORED gives the slot back.
 *  4. swap: a directory renamed into regions/t kept the name of its first
 *     watch: a change under regions/t was told as x's. Now the watch goes
 *     with the name.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "config.h"
#include "registry/registry.h"

#define SECRET "file-watch-cluster-secret-0123456789"

static char dir[128];

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

struct seen {
	struct rd_registry *r;
	int calls;
	char tenant[ROSHM_NAME_MAX], name[ROSHM_NAME_MAX];
	int hits; /* calls for t/r */
};

static void on_changed(void *arg, const char *tenant, const char *name)
{
	struct seen *s = arg;
	struct rd_region_rec rec;

	s->calls++;
	snprintf(s->tenant, sizeof(s->tenant), "%s", tenant);
	snprintf(s->name, sizeof(s->name), "%s", name);
	/* what revalidate() does for a remote region of that name */
	if (!strcmp(name, "r")) /* the one remote region open here */
		s->r->ops->get_region(s->r, tenant, name, &rec);
}

static void region(struct rd_region_rec *r, const char *tenant, const char *name, uint64_t epoch)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->node, sizeof(r->node), "node-a");
	snprintf(r->tenant, sizeof(r->tenant), "%s", tenant);
	snprintf(r->name, sizeof(r->name), "%s", name);
	strcpy(r->state, RD_STATE_ACTIVE);
	snprintf(r->endpoint, sizeof(r->endpoint), "tcp:127.0.0.1:7471");
	r->region_id = 3;
	r->key = 0x1234;
	r->epoch = epoch;
	r->mem_id = 5;
	r->data_size = 4096;
	r->policy = ROSHM_POLICY_TENANT;
}

static void put(struct rd_registry *a, const char *tenant, const char *name, uint64_t epoch)
{
	struct rd_region_rec rec;

	region(&rec, tenant, name, epoch);
	assert_int_equal(a->ops->put_region(a, &rec, 0, NULL, NULL), 0);
	a->ops->dispatch(a);
}

/* roshmd's: only its configured tenants' directories */
static bool wants(void *arg, const char *tenant)
{
	(void)arg;
	return !strcmp(tenant, "t") || !strcmp(tenant, "late");
}

static void open_pair(const char *sub, struct rd_registry *a, struct rd_registry *b, struct seen *s)
{
	char rdir[300];

	snprintf(rdir, sizeof(rdir), "%s/%s", dir, sub);
	assert_int_equal(rd_registry_file_open(a, rdir, "node-a", (const uint8_t *)SECRET,
					       strlen(SECRET)), 0);
	assert_int_equal(rd_registry_file_open(b, rdir, "node-b", (const uint8_t *)SECRET,
					       strlen(SECRET)), 0);
	memset(s, 0, sizeof(*s));
	s->r = b;
	b->changed = on_changed;
	b->wants_tenant = wants;
	b->changed_arg = s;
}

/* b told of t/r within @ms? */
static bool told(struct rd_registry *b, struct seen *s, const char *tenant, const char *name, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;

	do {
		b->ops->dispatch(b);
		if (s->calls && !strcmp(s->tenant, tenant) && !strcmp(s->name, name))
			return true;
		usleep(10000);
	} while (now_ms() < end);
	return false;
}

static void test_flood(void **st)
{
	struct rd_registry a, b;
	struct seen s;
	char path[400], other[400];
	uint64_t t0, took;
	pid_t pid;

	(void)st;
	open_pair("flood", &a, &b, &s);
	put(&a, "t", "r", 1);
	b.ops->dispatch(&b);
	snprintf(path, sizeof(path), "%s/flood/regions/t/r.json", dir);
	snprintf(other, sizeof(other), "%s/flood/regions/t/z.json", dir);
	close(open(other, O_WRONLY | O_CREAT, 0600));
	pid = fork();
	if (pid == 0) {
		uint64_t end = now_ms() + 6000;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		while (now_ms() < end)
			for (int i = 0; i < 1000; i++) {
				/* IN_CLOSE_WRITE, the record unchanged; alternating
				 * with another name, so inotify merges none */
				close(open(path, O_WRONLY));
				close(open(other, O_WRONLY));
			}
		_exit(0);
	}
	usleep(200000);
	t0 = now_ms();
	b.ops->dispatch(&b); /* one pass of roshmd's control loop */
	took = now_ms() - t0;
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	print_message("one dispatch() took %llu ms, %d change callbacks\n", (unsigned long long)took,
		      s.calls);
	a.ops->close(&a);
	b.ops->close(&b);
	/* bounded work per call, whatever the writer does: each name once */
	if (s.calls > 32)
		fail_msg("a registry writer that opens and closes t/r.json made one dispatch() (the "
			 "control thread) revalidate %d times (%llu ms)", s.calls,
			 (unsigned long long)took);
}

static void exhaust(bool recycle)
{
	struct rd_registry a, b;
	struct seen s;
	char path[400];
	const char *sub = recycle ? "recycle" : "exhaust";

	open_pair(sub, &a, &b, &s);
	for (int i = 0; i < 1100; i++) {
		snprintf(path, sizeof(path), "%s/%s/regions/junk%d", dir, sub, recycle ? 0 : i);
		assert_int_equal(mkdir(path, 0700), 0);
		b.ops->dispatch(&b); /* the watch is taken */
		if (recycle)
			assert_int_equal(rmdir(path), 0);
	}
	b.ops->dispatch(&b);
	/* a tenant's first region, then its record changes (a revoke, a close) */
	put(&a, "late", "r", 1);
	told(&b, &s, "late", "r", 200);
	s.calls = 0;
	put(&a, "late", "r", 2);
	bool ok = told(&b, &s, "late", "r", 2000);

	a.ops->close(&a);
	b.ops->close(&b);
	if (!ok)
		fail_msg("after the writer %s 1100 tenant directories, a change of late/r (a tenant "
			 "directory made afterwards) is not told", recycle ? "made and removed" : "made");
}

static void test_exhaust(void **st)
{
	(void)st;
	exhaust(false);
}

static void test_recycle(void **st)
{
	(void)st;
	exhaust(true);
}

static void test_swap(void **st)
{
	struct rd_registry a, b;
	struct seen s;
	char p1[400], p2[400];

	(void)st;
	open_pair("swap", &a, &b, &s);
	put(&a, "t", "r", 1);
	snprintf(p1, sizeof(p1), "%s/swap/regions/x", dir);
	assert_int_equal(mkdir(p1, 0700), 0);
	b.ops->dispatch(&b); /* x watched as "x" */
	/* the writer swaps: t -> old, x -> t (records copied in: replays) */
	snprintf(p1, sizeof(p1), "%s/swap/regions/t", dir);
	snprintf(p2, sizeof(p2), "%s/swap/regions/old", dir);
	assert_int_equal(rename(p1, p2), 0);
	snprintf(p1, sizeof(p1), "%s/swap/regions/x", dir);
	snprintf(p2, sizeof(p2), "%s/swap/regions/t", dir);
	assert_int_equal(rename(p1, p2), 0);
	b.ops->dispatch(&b);
	s.calls = 0;
	put(&a, "t", "r", 2); /* the owner's revoke / close lands in regions/t */
	bool ok = told(&b, &s, "t", "r", 2000);

	print_message("last change told: %s/%s\n", s.tenant, s.name);
	a.ops->close(&a);
	b.ops->close(&b);
	if (!ok)
		fail_msg("after regions/x was renamed to regions/t, a change of t/r is told as %s/%s",
			 s.tenant, s.name);
}

static int setup(void **st)
{
	(void)st;
	snprintf(dir, sizeof(dir), "/tmp/roshm-fwatch-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **st)
{
	char cmd[200];

	(void)st;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_flood),
		cmocka_unit_test(test_exhaust),
		cmocka_unit_test(test_recycle),
		cmocka_unit_test(test_swap),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
