// SPDX-License-Identifier: MIT
/*
 * A pod moves its memory onto roshmd's bill. Regions stay punchable
 * (dataplane/shm.c: F_SEAL_SEAL only, no F_SEAL_FUTURE_WRITE), and
 * docs/security.md says a hole "only makes roshmd's next touch refault a
 * zero page of shmem (no SIGBUS), costs the owner its own data, and is
 * bounded by the region's size". It is not a zero page: a write fault on a
 * shmem hole allocates a page, and the page is charged to the memory cgroup
 * of the process that faulted it, roshmd. The charge stays with the page,
 * and the page lives as long as anything holds the memfd: the pod, after
 * roshmd has unmapped the region and given the tenant its quota back.
 *
 * The attacker, a pod of tenant "a" in a memory cgroup limited to 64 MiB
 * (its byte quota is 64 MiB too), repeats 8 times: make a 32 MiB region
 * memfd and touch it (charged to the pod), create the region with it, punch
 * the whole data area out (the pod's charge goes away), WRITE it back
 * through roshmd (roshmd faults every page in), close the region (its quota
 * comes back), keep the memfd. roshmd runs in a memory cgroup of its own.
 * Expected: roshmd's cgroup grows by less than one region's pages (24 MiB:
 * one rewritten region that stayed charged is 32 MiB; 0 MiB measured in the
 * plain build, 13 to 16 MiB under ASan, which is ASan's own memory in
 * roshmd: its shadow and its quarantine of freed blocks); the pod cannot
 * hold more than its limit. Needs root and the memory cgroup (else skipped).
 *
 * Now roshmd's mappings of regions are watched by the hole guard
 * (dataplane/guard.h): the first touch of a hole disconnects the owner and
 * closes the region, and the region's memory is punched out by roshmd once
 * it lets go of it. So the attacker has to re-attach every round, and each
 * round costs it its connection (counted: every round must be caught).
 *
 * How it failed before the guard (adv at 02924eb), 5 of 5 runs:
 *   "roshmd's memory cgroup grew by 256 MiB while the attacking pod peaked
 *    at 33 MiB of its 64 MiB limit (tenant a's byte quota: 64 MiB): the
 *    pages of 8 punched and rewritten regions are charged to roshmd and
 *    stay, held by the pod's memfds, after the regions were closed"
 * Repeated, this reaches roshmd's own limit (it is OOM-killed and every
 * tenant of the node loses service) or the node's memory.
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
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "attack.h"

#define ROUNDS 8
#define REGION (32u << 20)
#define ARENA (1u << 20)
#define POD_LIMIT (64ull << 20)

static struct th_daemon d;
static char cg_root[256], cg_pod[300], cg_dm[300], cg_home[300];

/* ---- the memory cgroup (v1 controller, or v2) ---- */

static bool cg_v2;

static bool cg_init(void)
{
	struct stat st;
	char line[512];
	FILE *f;

	if (stat("/sys/fs/cgroup/memory/cgroup.procs", &st) == 0) {
		snprintf(cg_root, sizeof(cg_root), "/sys/fs/cgroup/memory");
		cg_v2 = false;
	} else if (stat("/sys/fs/cgroup/cgroup.controllers", &st) == 0) {
		snprintf(cg_root, sizeof(cg_root), "/sys/fs/cgroup");
		cg_v2 = true;
	} else {
		return false;
	}
	/* where roshmd goes back to: our own group */
	snprintf(cg_home, sizeof(cg_home), "%s", cg_root);
	f = fopen("/proc/self/cgroup", "r");
	while (f && fgets(line, sizeof(line), f)) {
		char *p = strchr(line, ':'), *q = p ? strchr(p + 1, ':') : NULL;

		if (!q)
			continue;
		*q = 0;
		q[strcspn(q + 1, "\n") + 1] = 0;
		if ((!cg_v2 && strstr(p + 1, "memory")) || (cg_v2 && line[0] == '0' && p[1] == 0))
			snprintf(cg_home, sizeof(cg_home), "%s%s", cg_root, q + 1);
	}
	if (f)
		fclose(f);
	return true;
}

static bool cg_make(char *path, size_t cap, const char *what)
{
	snprintf(path, cap, "%s/roshm-hole-%d-%s", cg_root, (int)getpid(), what);
	if (mkdir(path, 0755) && errno != EEXIST)
		return false;
	th_cleanup_sh("rmdir %s 2>/dev/null", path);
	return true;
}

static bool cg_write(const char *dir, const char *file, long long v)
{
	char p[400];
	FILE *f;
	bool ok;

	snprintf(p, sizeof(p), "%s/%s", dir, file);
	f = fopen(p, "w");
	if (!f)
		return false;
	ok = fprintf(f, "%lld\n", v) > 0;
	return fclose(f) == 0 && ok;
}

static long long cg_read(const char *dir, const char *file)
{
	char p[400];
	long long v = -1;
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, file);
	f = fopen(p, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

static long long cg_usage(const char *dir)
{
	return cg_read(dir, cg_v2 ? "memory.current" : "memory.usage_in_bytes");
}

/* ---- the attacking pod ---- */

struct report {
	volatile int phase;           /* 1: done, -1: failed */
	int rounds;                   /* regions punched and written back */
	int kicked;                   /* rounds whose owner roshmd disconnected */
	int punch_err;                /* the first fallocate error (0: none) */
	int write_err;                /* the first WRITE error */
	char msg[160];
};

static int pod_fail(struct report *rep, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(rep->msg, sizeof(rep->msg), fmt, ap);
	va_end(ap);
	rep->phase = -1;
	pause();
	return 1;
}

static int pod(void *arg)
{
	struct report *rep = arg;
	struct roshm_params p = { .arena_size = ARENA, .hugepages = ROSHM_HUGEPAGES_OFF };
	uint64_t size = roshm_region_map_size(REGION, 0, 0), data_off = roshm_region_data_off(0, 0);
	struct roshm_ctl_region_create rc;
	struct roshm_ctl_region_reply rr;
	struct roshm_ctl_region_close cl;
	struct roshm *w;
	int own = -1, err;

	if (!cg_write(cg_pod, "cgroup.procs", getpid()))
		return pod_fail(rep, "could not join the pod's cgroup");
	/* a client of its tenant writes through roshmd */
	w = atk_open(&d, "a", &p, &err);
	if (!w)
		return pod_fail(rep, "attach: %d", err);
	memset(roshm_arena(w, NULL), 0x5a, ARENA);
	for (int i = 0; i < ROUNDS; i++) {
		void *map;
		int fd = atk_memfd(size, &map);
		uint32_t h;
		ssize_t n;

		if (fd < 0)
			return pod_fail(rep, "round %d: memfd: %d", i, fd);
		/* the owner holds its memfds itself (raw control messages); a
		 * new connection each round (roshmd drops the last one) */
		if (own >= 0)
			close(own);
		own = atk_raw_attach(d.sock, "a", 2, 4096);
		if (own < 0)
			return pod_fail(rep, "round %d: raw attach: %d", i, own);
		memset(&rc, 0, sizeof(rc));
		atk_ctl_hdr(&rc.hdr, ROSHM_CTL_REGION_CREATE, sizeof(rc));
		snprintf(rc.name, sizeof(rc.name), "hole%d", i);
		rc.size = REGION;
		n = atk_ctl_call(own, &rc, sizeof(rc), fd, &rr, sizeof(rr), 5000);
		if (n != (ssize_t)sizeof(rr) || rr.hdr.status)
			return pod_fail(rep, "round %d: create: %zd / %d", i, n, rr.hdr.status);
		/* our own mapping goes; the memfd stays */
		munmap(map, size);
		if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)data_off, REGION) &&
		    !rep->punch_err)
			rep->punch_err = -errno;
		snprintf(rc.name, sizeof(rc.name), "a/hole%d", i);
		err = roshm_region_open(w, rc.name, &h, NULL);
		if (err)
			return pod_fail(rep, "round %d: open: %d", i, err);
		for (uint32_t off = 0; off < REGION; off += ARENA) {
			err = roshm_write_sync(w, h, off, 0, ARENA);
			if (err && !rep->write_err)
				rep->write_err = err;
		}
		/* what roshmd wrote lands in the memfd as long as it can */
		roshm_region_close(w, h);
		memset(&cl, 0, sizeof(cl));
		atk_ctl_hdr(&cl.hdr, ROSHM_CTL_REGION_CLOSE, sizeof(cl));
		cl.handle = rr.handle;
		n = atk_ctl_call(own, &cl, sizeof(cl), -1, &rc.hdr, sizeof(rc.hdr), 5000);
		if (n == -EPIPE || n == -ECONNRESET || n == 0)
			rep->kicked++; /* roshmd disconnected the owner for the hole */
		else if (n != (ssize_t)sizeof(rc.hdr) || rc.hdr.status)
			return pod_fail(rep, "round %d: close: %zd / %d", i, n, rc.hdr.status);
		rep->rounds++;
		/* fd stays open: the pages it holds are not the pod's any more */
	}
	rep->phase = 1;
	pause();
	return 0;
}

static void test_punched_regions_charged_to_roshmd(void **state)
{
	struct report *rep;
	long long d_before, d_after, pod_peak;
	pid_t pid;

	(void)state;
	if (!cg_init() || !cg_make(cg_pod, sizeof(cg_pod), "pod") ||
	    !cg_make(cg_dm, sizeof(cg_dm), "roshmd")) {
		print_message("skipped: no memory cgroup to make\n");
		skip();
	}
	assert_true(cg_write(cg_pod, cg_v2 ? "memory.max" : "memory.limit_in_bytes", POD_LIMIT));
	assert_true(cg_write(cg_dm, "cgroup.procs", d.pid));
	rep = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(rep != MAP_FAILED);
	d_before = cg_usage(cg_dm);
	pid = th_spawn(pod, rep);
	assert_true(pid > 0);
	for (int i = 0; i < 6000 && !rep->phase; i++)
		usleep(10000);
	d_after = cg_usage(cg_dm);
	pod_peak = cg_read(cg_pod, cg_v2 ? "memory.peak" : "memory.max_usage_in_bytes");
	kill(pid, SIGKILL);
	atk_wait_child(pid, 5000);
	/* roshmd back where it was before the groups go */
	cg_write(cg_home, "cgroup.procs", d.pid);
	atk_assert_alive(&d);
	if (rep->phase != 1)
		fail_msg("the attack did not run: %s", rep->phase ? rep->msg : "timed out");
	print_message("%d regions punched (first fallocate error %d) and written back (first "
		      "WRITE error %d), %d owners disconnected for it; roshmd's cgroup %+lld MiB, "
		      "the pod's peak %lld MiB\n",
		      rep->rounds, rep->punch_err, rep->write_err, rep->kicked,
		      (d_after - d_before) >> 20, pod_peak >> 20);
	if (rep->kicked != rep->rounds)
		fail_msg("%d of %d owners that punched holes in their regions kept their connection",
			 rep->rounds - rep->kicked, rep->rounds);
	if (d_after - d_before >= (24ll << 20))
		fail_msg("roshmd's memory cgroup grew by %lld MiB while the attacking pod peaked at "
			 "%lld MiB of its %llu MiB limit (tenant a's byte quota: 64 MiB): the pages "
			 "of %d punched and rewritten regions are charged to roshmd and stay, held by "
			 "the pod's memfds, after the regions were closed",
			 (d_after - d_before) >> 20, pod_peak >> 20, POD_LIMIT >> 20, rep->rounds);
	munmap(rep, 4096);
}

static int setup(void **state)
{
	(void)state;
	th_cleanup_enable();
	return th_daemon_start(&d, "sec-hole",
			       "channel: { max_arena_size = 16777216; };\n"
			       "tenants = ( { name = \"a\"; token = \"ta\";\n"
			       "              quota = { bytes = 67108864; }; },\n"
			       "            { name = \"b\"; token = \"tb\"; } );");
}

static int teardown(void **state)
{
	(void)state;
	if (atk_alive(&d) && th_daemon_stop(&d)) {
		th_daemon_dump_log(&d);
		return -1;
	}
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_punched_regions_charged_to_roshmd),
	};

	return cmocka_run_group_tests_name("region_hole_charge", tests, setup, teardown);
}
