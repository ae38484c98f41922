// SPDX-License-Identifier: MIT
/*
 * A pod moves to another node, with a peer's work held meanwhile. The owner
 * of region "mv" on node 1 drains it (roshmctl drain, as before a pod is
 * rescheduled) and closes it; the user on node 2 sees it drain and holds its
 * work; the owner's next incarnation creates "mv" on node 3, which node 2
 * has never talked to. Node 2 dials node 3 and, once connected, sends the
 * held work to the new instance: a WRITE lands there and a READ returns the
 * new instance's bytes (fresh: zeros), not the old one's.
 *
 * Three roshmd in network namespaces (tcp, shared file registry). Node 2
 * has registry.revalidate_ms and drain.timeout_ms both at a minute, so that
 * the held work goes on only if the end of the dial says so (the others'
 * are 200 ms: a drain waits two of them for peers to see it). Before the fix
 * (peers.c rd_peers_dial_done looked again only at regions already on the
 * dialed node), the held work waited for the next revalidation: a minute
 * here, and the wait of 20 s for its completions ran out.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "roshm.h"
#include "harness.h"

static struct th_daemon nodes[4];
static char prefix[64], workdir[256];

static struct roshm *attach(int n)
{
	return th_attach(nodes[n].sock);
}

static bool log_has(int n, const char *what)
{
	return th_sh("grep -q '%s' %s", what, nodes[n].log) == 0;
}

static void test_pod_moves(void **state)
{
	struct roshm *a = attach(1), *user = attach(2), *b = NULL;
	uint32_t ha, hu, hb;
	uint8_t *da, *db, *arena;
	struct roshm_sqe *sqe;
	struct roshm_cqe *cqe;
	char *json = NULL;
	int ret = -ENOENT;

	(void)state;
	assert_non_null(a);
	assert_non_null(user);
	assert_int_equal(roshm_region_create(a, "mv", 65536, NULL, &ha), 0);
	da = roshm_region_data(a, ha, NULL);
	memset(da, 0x11, 65536);
	for (int i = 0; i < 300 && ret == -ENOENT; i++)
		if ((ret = roshm_region_open(user, "default/mv", &hu, NULL)) == -ENOENT)
			usleep(10000);
	assert_int_equal(ret, 0);
	arena = roshm_arena(user, NULL);
	assert_int_equal(roshm_read_sync(user, hu, 0, 0, 64), 0);
	assert_int_equal(arena[0], 0x11);
	assert_int_equal(arena[63], 0x11);

	/* the owner drains before it moves: node 2 pauses the region */
	assert_int_equal(th_admin(&nodes[1], "drain region default/mv", &json), 0);
	assert_non_null(strstr(json, "\"drained\":1"));
	free(json);
	for (int i = 0; i < 100 && !log_has(2, "is draining: its work is paused"); i++)
		usleep(100000);
	assert_true(log_has(2, "is draining: its work is paused"));

	/* work submitted now is held */
	memset(arena, 0x77, 4096);
	memset(arena + 8192, 0xab, 256);
	if (!(sqe = roshm_get_sqe(user))) {
		fail_msg("no SQE");
		return;
	}
	roshm_prep_write(sqe, hu, 0, 0, 4096);
	roshm_sqe_set_data(sqe, 1);
	if (!(sqe = roshm_get_sqe(user))) {
		fail_msg("no SQE");
		return;
	}
	roshm_prep_read(sqe, hu, 8192, 8192, 256);
	roshm_sqe_set_data(sqe, 2);
	assert_int_equal(roshm_submit(user), 2);
	usleep(200000);
	if (roshm_peek_cqe(user, &cqe) == 0)
		fail_msg("op %llu completed while the region drains: %s",
			 (unsigned long long)cqe->user_data, roshm_strerror(cqe->status));

	/* the pod goes from node 1 and comes back on node 3 */
	assert_false(log_has(2, "connected to node node3"));
	assert_int_equal(roshm_region_close(a, ha), 0);
	roshm_close(a);
	b = attach(3);
	assert_non_null(b);
	ret = -EEXIST;
	for (int i = 0; i < 100 && ret == -EEXIST; i++)
		if ((ret = roshm_region_create(b, "mv", 65536, NULL, &hb)) == -EEXIST)
			usleep(100000);
	assert_int_equal(ret, 0);
	db = roshm_region_data(b, hb, NULL);

	/* the held work goes to the new instance once node 3 is connected */
	for (int k = 0; k < 2; k++) {
		ret = roshm_wait_cqe_timeout(user, &cqe, 20000);
		if (ret)
			fail_msg("held work: %s after 20 s (node 2 %s node 3)", roshm_strerror(ret),
				 log_has(2, "connected to node node3") ? "had connected to" :
									 "never connected to");
		if (cqe->status)
			fail_msg("held op %llu: %s", (unsigned long long)cqe->user_data,
				 roshm_strerror(cqe->status));
		roshm_cqe_seen(user, cqe);
	}
	for (int i = 0; i < 4096; i++)
		if (db[i] != 0x77)
			fail_msg("new instance byte %d: %#x, the held WRITE sent 0x77", i, db[i]);
	/* the new instance's memory is fresh: zeros where the old one had 0x11 */
	for (int i = 8192; i < 8192 + 256; i++)
		if (arena[i] != 0)
			fail_msg("held READ byte %d: %#x, the new instance has 0", i, arena[i]);
	assert_true(log_has(2, "resumes on node node3"));
	/* and new work goes there too */
	assert_int_equal(roshm_fetch_add_sync(user, hu, 16384, 5, NULL), 0);
	assert_int_equal(*(volatile uint64_t *)(db + 16384), 5);
	roshm_close(user);
	roshm_close(b);
}

static int setup(void **state)
{
	char extra[1024];

	(void)state;
	if (th_mkdtemp(workdir, sizeof(workdir), "move"))
		return -1;
	th_sh("echo roshm-move-test-secret-0123456789 > %s/secret", workdir);
	if (th_netns_up(prefix, sizeof(prefix), "mv", 3))
		return -1;
	for (int n = 1; n <= 3; n++) {
		char name[16], ns[80];

		snprintf(name, sizeof(name), "node%d", n);
		snprintf(ns, sizeof(ns), "%s-%d", prefix, n);
		snprintf(extra, sizeof(extra),
			 "transport: { tcp: { enabled = true; listen = \"198.18.0.%d\"; port = 7471;"
			 " secret_file = \"%s/secret\"; }; };\n"
			 "registry: { dir = \"%s/registry\"; revalidate_ms = %d; };\n"
			 "drain: { timeout_ms = 60000; };\n",
			 n, workdir, workdir, n == 2 ? 60000 : 200);
		if (th_daemon_start_ns(&nodes[n], name, ns, extra))
			return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	int bad;

	(void)state;
	bad = th_daemons_stop(nodes, 1, 3);
	th_netns_down(prefix);
	return bad ? -1 : 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pod_moves),
	};

	if (geteuid() != 0 || th_sh("command -v ip >/dev/null")) {
		printf("move: skipped: needs root and iproute2 for network namespaces\n");
		return 77;
	}
	return cmocka_run_group_tests_name("move", tests, setup, teardown) ? 1 : 0;
}
