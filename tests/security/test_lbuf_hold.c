// SPDX-License-Identifier: MIT
/*
 * The tcp transport's hold on a ROSHM_SQE_F_LBUF region must not outlive
 * the client or the region: a peer that never answers must not keep a
 * detached pod's memory mapped past its tenant's quota (as sec_tcp_hold for
 * arenas). An LBUF operation holds the client's own region until it is
 * done; the region's close gives the tenant its quota back at once.
 *
 * Two roshmd on 127.0.0.1 in a private network namespace. Node 2 owns a/far;
 * node 1's connection to it is up, then node 2 is stopped (SIGSTOP: a peer
 * that never answers). NCLIENTS pods of tenant a (quota.bytes 48 MiB) on
 * node 1 each create a 16 MiB region, submit one 4 KiB LBUF READ from a/far
 * into it, close the region and exit. Node 1 must map no more region memory
 * than the quota (tcp_client_gone and the region's unexport let go of it).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "attack.h"

#define PORT1 7591
#define PORT2 7592
#define NCLIENTS 8
#define LSIZE (16u << 20)

static struct th_daemon n1, n2;
static char workdir[256], secret[300];

static unsigned long long region_bytes(pid_t pid, int *count)
{
	char path[64], line[512];
	unsigned long long sum = 0;
	FILE *f;

	*count = 0;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long a, b;

		if (!strstr(line, "memfd:roshm-region"))
			continue;
		if (sscanf(line, "%llx-%llx", &a, &b) == 2) {
			sum += b - a;
			(*count)++;
		}
	}
	fclose(f);
	return sum;
}

static int warm(void *arg)
{
	struct roshm *r;
	uint32_t h;
	int err;

	(void)arg;
	r = atk_open(&n1, "a", NULL, &err);
	if (!r || atk_open_retry(r, "a/far", &h))
		return 2;
	err = roshm_read_sync(r, h, 0, 0, 4096);
	roshm_close(r);
	return err ? 3 : 0;
}

static int victim(void *arg)
{
	struct roshm *r;
	struct roshm_sqe *sqe;
	uint32_t h, hl;
	char name[32];
	int err;

	snprintf(name, sizeof(name), "L%d", (int)(intptr_t)arg);
	r = atk_open(&n1, "a", NULL, &err);
	if (!r)
		return 2;
	if (roshm_region_create(r, name, LSIZE, NULL, &hl))
		return 3;
	if (roshm_region_open(r, "a/far", &h, NULL))
		return 4;
	sqe = roshm_get_sqe(r);
	if (!sqe)
		return 5;
	roshm_prep_read(sqe, h, 0, 0, 4096);
	roshm_sqe_set_lbuf(sqe, hl, 0);
	roshm_submit(r);
	usleep(200000); /* roshmd sent it */
	if (roshm_region_close(r, hl))
		return 6;
	_exit(0);
}

static void test_lbuf_hold_outlives_client(void **state)
{
	struct roshm *owner;
	unsigned long long bytes, b2;
	int n, nn, ok = 0, err;
	uint32_t ho;
	pid_t pw;

	(void)state;
	owner = atk_open(&n2, "a", NULL, &err);
	assert_non_null(owner);
	assert_int_equal(roshm_region_create(owner, "far", 1 << 20, NULL, &ho), 0);
	pw = th_spawn(warm, NULL);
	assert_int_equal(th_wait(pw), 0);
	kill(n2.pid, SIGSTOP);
	for (int i = 0; i < NCLIENTS; i++) {
		pid_t pv = th_spawn(victim, (void *)(intptr_t)i);
		int st = th_wait(pv);

		if (st == 0)
			ok++;
		else
			print_message("victim %d: %d\n", i, st);
	}
	usleep(500000);
	bytes = region_bytes(n1.pid, &n);
	kill(n2.pid, SIGCONT);
	usleep(800000);
	b2 = region_bytes(n1.pid, &nn);
	print_message("%d pods created a %u MiB region, LBUF-READ into it, closed it and left; "
		      "with node 2 stopped node 1 still maps %d roshm-region memfds (%llu MiB, "
		      "tenant quota 48 MiB); after node 2 resumed: %d (%llu MiB)\n",
		      ok, LSIZE >> 20, n, bytes >> 20, nn, b2 >> 20);
	roshm_close(owner);
	assert_int_equal(ok, NCLIENTS);
	if (bytes > (48ull << 20))
		fail_msg("node 1 keeps %llu MiB of closed regions of detached pods mapped for a "
			 "peer that does not answer (tenant quota 48 MiB)", bytes >> 20);
}

static int setup(void **state)
{
	(void)state;
	/* tenant a: 48 MiB of memory */
	return atk_two_nodes(&n1, &n2, "lbuf-hold", PORT1, PORT2, workdir, secret,
			     "tenants = ( { name = \"a\"; token = \"ta\"; quota = { bytes = 50331648; }; },"
			     " { name = \"b\"; token = \"tb\"; } );\n");
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
		cmocka_unit_test_setup_teardown(test_lbuf_hold_outlives_client, setup, teardown),
	};
	char ns[64];

	if (geteuid() != 0) {
		printf("lbuf_tcp_hold: skipped: needs root for a network namespace\n");
		return 77;
	}
	th_cleanup_enable();
	if (atk_netns_enter_new(ns, sizeof(ns)) || atk_workdir(workdir, sizeof(workdir), secret,
							       sizeof(secret))) {
		printf("lbuf_tcp_hold: cannot set up a network namespace and a work directory\n");
		return 1;
	}
	return cmocka_run_group_tests_name("lbuf_tcp_hold", tests, NULL, NULL);
}
