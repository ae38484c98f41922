// SPDX-License-Identifier: MIT
/*
 * One peer takes every inbound connection slot of a node. After the HMAC
 * challenge, an inbound tcp connection goes to the poller
 * (peers.c rd_peers_accept_step -> tcp.c rd_tcp_inbound_add) with no limit
 * per node name or per address: only the table's size, 2 x
 * limits.max_peers, bounds them, and an authenticated connection is never
 * closed for being idle. The handshake caps (64 in all, 8 per address,
 * 2 s each) cover handshakes in progress only. A peer that holds the
 * cluster secret (docs/security.md: peers may "send any frame, at any rate,
 * on an authenticated connection") opens that many connections, each under
 * a node name of its choosing, and sends nothing: every other node's
 * connection is refused from then on ("inbound connection from node X
 * dropped: Too many open files"), and no pod of any node can reach this
 * node's regions. Each slot also costs roshmd a tx ring of 2 x
 * (transport.tcp.max_msg + 56) bytes rounded up to a power of two (4 MiB by
 * default) and a 256 KiB rx buffer.
 *
 * Two roshmd (node 1 and node 2) in a private network namespace with the
 * tcp transport and a shared file registry, limits.max_peers = 2 (4
 * inbound slots). Tenant "b" owns a region on node 2. The attacker opens 4
 * authenticated connections to node 2 as "intruder0".."intruder3" and
 * holds them. Expected: tenant b's client on node 1 opens the region and a
 * WRITE into it completes (3 tries, 5 s).
 *
 * How it fails on today's code (adv at 02924eb), 5 of 5 runs:
 *   "with 4 idle authenticated connections of one peer held on node 2,
 *    tenant b's client on node 1 cannot reach its region there: open 0,
 *    WRITE -113 (peer node unreachable)" (2 of 5: WRITE -104, the
 *    connection was lost) and node 2's log says "tcp: inbound connection
 *    from node sec-slot1 dropped: Too many open files". Node 1 believes the
 *    connection is up (its side of the handshake succeeded), so the open
 *    succeeds and the WRITE fails.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "attack.h"

#define PORT1 7481
#define PORT2 7482
#define SLOTS_IN 4                    /* 2 x limits.max_peers */

static struct th_daemon n1, n2;
static char workdir[256], secret[300];

static void test_idle_connections_take_every_slot(void **state)
{
	struct roshm *owner, *b;
	int fds[SLOTS_IN], err, open_st = -1, write_st = -1;
	uint32_t ho, h;

	(void)state;
	owner = atk_open(&n2, "b", NULL, &err);
	assert_non_null(owner);
	assert_int_equal(roshm_region_create(owner, "far", 65536, NULL, &ho), 0);
	/* the peer takes the slots and says nothing more */
	for (int i = 0; i < SLOTS_IN; i++) {
		char name[32];

		snprintf(name, sizeof(name), "intruder%d", i);
		fds[i] = atk_peer_connect("127.0.0.1", PORT2, ATK_SECRET, name);
		if (fds[i] < 0)
			fail_msg("peer handshake %d: %s", i, roshm_strerror(fds[i]));
	}
	usleep(300000);
	b = atk_open(&n1, "b", NULL, &err);
	assert_non_null(b);
	for (int t = 0; t < 3 && (open_st || write_st); t++) {
		uint64_t end = atk_now_ms() + 5000;

		open_st = -ENOENT;
		while (atk_now_ms() < end) {
			open_st = roshm_region_open(b, "b/far", &h, NULL);
			if (open_st != -ENOENT && open_st != -EAGAIN && open_st != -EHOSTUNREACH)
				break;
			usleep(50000);
		}
		if (open_st)
			continue;
		write_st = roshm_write_sync(b, h, 0, 0, 64);
		if (write_st)
			roshm_region_close(b, h);
		usleep(300000);
	}
	for (int i = 0; i < SLOTS_IN; i++)
		close(fds[i]);
	roshm_close(b);
	roshm_close(owner);
	atk_assert_alive(&n1);
	atk_assert_alive(&n2);
	if (open_st || write_st) {
		atk_log_tail(&n2, 8);
		fail_msg("with %d idle authenticated connections of one peer held on node 2, tenant b's "
			 "client on node 1 cannot reach its region there: open %d, WRITE %d (%s)",
			 SLOTS_IN, open_st, write_st,
			 roshm_strerror(open_st ? open_st : write_st));
	}
}

static int setup(void **state)
{
	char extra[1024];

	(void)state;
	for (int n = 1; n <= 2; n++) {
		char name[32];

		snprintf(name, sizeof(name), "sec-slot%d", n);
		snprintf(extra, sizeof(extra),
			 ATK_TENANTS
			 "channel: { hugepages = \"off\"; };\n"
			 "limits: { max_peers = 2; };\n"
			 "transport: { tcp: { enabled = true; listen = \"127.0.0.1\"; port = %d;"
			 " secret_file = \"%s\"; }; };\n"
			 "registry: { dir = \"%s/registry\"; revalidate_ms = 200; };\n",
			 n == 1 ? PORT1 : PORT2, secret, workdir);
		if (th_daemon_start(n == 1 ? &n1 : &n2, name, extra))
			return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	atk_daemon_kill(&n1);
	atk_daemon_kill(&n2);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_idle_connections_take_every_slot, setup, teardown),
	};
	char ns[64];

	if (geteuid() != 0) {
		printf("peer_slots: skipped: needs root for a network namespace\n");
		return 77;
	}
	th_cleanup_enable();
	if (atk_netns_enter_new(ns, sizeof(ns)) || atk_workdir(workdir, sizeof(workdir), secret,
							       sizeof(secret))) {
		printf("peer_slots: cannot set up a network namespace and a work directory\n");
		return 1;
	}
	return cmocka_run_group_tests_name("peer_slots", tests, NULL, NULL);
}
