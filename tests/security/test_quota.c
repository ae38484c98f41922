// SPDX-License-Identifier: MIT
/*
 * Quotas and the control socket's limits (issue 10, item 9): what one
 * tenant may hold on a node (clients, regions, bytes of memory) is bounded
 * by its quota and never takes another tenant's share; connections that do
 * not attach are capped in number and closed after admin.hello_timeout_ms.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <setjmp.h>
#include <unistd.h>
#include <cmocka.h>

#include "roshm.h"
#include "harness.h"

static struct th_daemon d;

static struct roshm *as(const char *tenant, const char *token, int *err)
{
	struct roshm_params p = { .sock_path = d.sock, .tenant = tenant, .token = token,
				  .arena_size = 1 << 20, .hugepages = ROSHM_HUGEPAGES_OFF };

	return roshm_open(&p, err);
}

static void test_clients_and_regions(void **state)
{
	struct roshm *a1, *a2, *a3, *b[3];
	uint32_t h;
	int err;

	(void)state;
	/* tenant a: two clients at most */
	a1 = as("a", "token-a", &err);
	assert_non_null(a1);
	a2 = as("a", "token-a", &err);
	assert_non_null(a2);
	a3 = as("a", "token-a", &err);
	assert_null(a3);
	assert_int_equal(err, -EDQUOT);
	/* tenant b is not a's quota: three of its own */
	for (int i = 0; i < 3; i++) {
		b[i] = as("b", "token-b", &err);
		assert_non_null(b[i]);
	}
	/* a: two regions at most, and 4 MiB of memory with its channels */
	assert_int_equal(roshm_region_create(a1, "r1", 4096, NULL, &h), 0);
	assert_int_equal(roshm_region_create(a1, "r2", 4096, NULL, &h), 0);
	assert_int_equal(roshm_region_create(a2, "r3", 4096, NULL, &h), -EDQUOT);
	assert_int_equal(roshm_region_close(a1, h), 0); /* r2 goes: room again */
	assert_int_equal(roshm_region_create(a2, "big", 8 << 20, NULL, &h), -EDQUOT);
	assert_int_equal(roshm_region_create(a2, "r3", 4096, NULL, &h), 0);
	/* b creates what a cannot */
	assert_int_equal(roshm_region_create(b[0], "big", 8 << 20, NULL, &h), 0);
	/* a client that leaves gives its share back (once roshmd has seen it go) */
	roshm_close(a2);
	a3 = NULL;
	for (int i = 0; i < 100 && !a3; i++) {
		a3 = as("a", "token-a", &err);
		if (!a3)
			usleep(10000);
	}
	assert_non_null(a3);
	roshm_close(a3);
	roshm_close(a1);
	for (int i = 0; i < 3; i++)
		roshm_close(b[i]);
}

static int raw_connect(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);

	strcpy(sa.sun_path, d.sock);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* 1 when roshmd closed @fd within @ms, 0 if it is still open */
static int closed_within(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char b[64];

	if (poll(&p, 1, ms) != 1)
		return 0;
	return recv(fd, b, sizeof(b), MSG_DONTWAIT) == 0;
}

static void test_pending_connections(void **state)
{
	int fds[8], extra, err;
	struct roshm *r;

	(void)state;
	/* admin.max_pending = 4 connections that have not attached */
	for (int i = 0; i < 4; i++)
		fds[i] = raw_connect();
	/* the fifth is closed at once */
	extra = raw_connect();
	assert_int_equal(closed_within(extra, 2000), 1);
	close(extra);
	/* the silent four go after admin.hello_timeout_ms (500 ms) */
	for (int i = 0; i < 4; i++) {
		assert_int_equal(closed_within(fds[i], 3000), 1);
		close(fds[i]);
	}
	/* and clients attach as before */
	r = as("b", "token-b", &err);
	assert_non_null(r);
	assert_int_equal(roshm_nop_sync(r), 0);
	/* an attached client is not pending: it stays past the timeout */
	usleep(800000);
	assert_int_equal(roshm_nop_sync(r), 0);
	roshm_close(r);
}

static int setup(void **state)
{
	(void)state;
	return th_daemon_start(&d, "quota",
			       "admin: { token_file = \"\"; max_pending = 4; hello_timeout_ms = 500; };\n"
			       "tenants = ( { name = \"a\"; token = \"token-a\";\n"
			       "              quota = { clients = 2; regions = 2; bytes = 4194304; }; },\n"
			       "            { name = \"b\"; token = \"token-b\"; } );");
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
		cmocka_unit_test(test_clients_and_regions),
		cmocka_unit_test(test_pending_connections),
	};

	return cmocka_run_group_tests_name("quota", tests, setup, teardown);
}
