// SPDX-License-Identifier: MIT
/*
 * One peer takes every inbound connection slot of a node. After the HMAC
 * challenge an inbound tcp connection went to the poller with no limit per
 * node name or per address, only the table's size (2 x limits.max_peers),
 * and an authenticated connection was never closed for being idle. A peer
 * holding the cluster secret opened that many connections under names of
 * its choosing and sent nothing: every other node's connection was refused
 * ("inbound connection from node X dropped: Too many open files"), and no pod
 * of any node could reach this node's regions. It failed 5 of 5 runs at
 * 02924eb with "open 0, WRITE -113 (peer node unreachable)".
 *
 * Now (dataplane/control/peers.c node_refusal, tcp.c rd_tcp_inbound_add) a
 * connection gets a slot only for a node with a valid record in the
 * registry, from the address of that record; one per node (a new one
 * replaces the old); and when the slots are full the one quiet longest makes
 * room.
 *
 * Two roshmd (node 1 and node 2) on loopback with the tcp transport and a
 * shared file registry, limits.max_peers = 2 (4 inbound slots). Tenant "b"
 * owns a region on node 2. Expected, each time: tenant b's client on node 1
 * opens the region and a WRITE into it completes (3 tries, 5 s).
 *   test_names_without_records: 4 connections as "intruder0".."intruder3",
 *     names with no node record: refused.
 *   test_one_name_many_times: the registry secret too, one record
 *     "intruder" at 127.0.0.1, 4 connections under it: one slot.
 *   test_records_for_every_slot: records "intruder0".."intruder3" at
 *     127.0.0.1 (the attacker holds the registry's secret too), 4 idle
 *     connections: node 1's connection evicts the quietest.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
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

/* Hold SLOTS_IN connections to node 2 named by @name (with %d: numbered),
 * then tenant b on node 1 must reach its region on node 2. */
static void slots_attack(const char *name_fmt, bool publish)
{
	struct roshm *owner, *b;
	int fds[SLOTS_IN], err, open_st = -1, write_st = -1;
	uint32_t ho, h;
	char regdir[300];

	snprintf(regdir, sizeof(regdir), "%s/registry", workdir);
	owner = atk_open(&n2, "b", NULL, &err);
	assert_non_null(owner);
	assert_int_equal(roshm_region_create(owner, "far", 65536, NULL, &ho), 0);
	/* the peer takes the slots and says nothing more */
	for (int i = 0; i < SLOTS_IN; i++) {
		char name[32];

		snprintf(name, sizeof(name), name_fmt, i);
		if (publish)
			assert_int_equal(atk_publish_node(regdir, secret, name, "tcp:127.0.0.1:7999"), 0);
		fds[i] = atk_peer_connect("127.0.0.1", PORT2, ATK_SECRET, name);
		/* refused after the challenge: the handshake itself may pass */
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
		if (fds[i] >= 0)
			close(fds[i]);
	roshm_close(b);
	roshm_close(owner);
	atk_assert_alive(&n1);
	atk_assert_alive(&n2);
	if (open_st || write_st) {
		atk_log_tail(&n2, 8);
		fail_msg("with %d idle authenticated connections (%s) of one peer held on node 2, "
			 "tenant b's client on node 1 cannot reach its region there: open %d, WRITE %d (%s)",
			 SLOTS_IN, name_fmt, open_st, write_st,
			 roshm_strerror(open_st ? open_st : write_st));
	}
}

static void test_names_without_records(void **state)
{
	(void)state;
	slots_attack("intruder%d", false);
}

static void test_one_name_many_times(void **state)
{
	(void)state;
	slots_attack("intruder", true);
}

static void test_records_for_every_slot(void **state)
{
	(void)state;
	slots_attack("intruder%d", true);
}

static int setup(void **state)
{
	(void)state;
	return atk_two_nodes(&n1, &n2, "sec-slot", PORT1, PORT2, workdir, secret,
			     ATK_TENANTS "limits: { max_peers = 2; };\n");
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
		cmocka_unit_test_setup_teardown(test_names_without_records, setup, teardown),
		cmocka_unit_test_setup_teardown(test_one_name_many_times, setup, teardown),
		cmocka_unit_test_setup_teardown(test_records_for_every_slot, setup, teardown),
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
