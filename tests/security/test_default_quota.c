// SPDX-License-Identifier: MIT
/*
 * With the shipped defaults, one tenant takes the whole node. The quotas
 * (docs/security.md: "Quotas per tenant ... clients, regions, bytes") default
 * to the node's own limits (dataplane/config.c: quota.clients = 256 =
 * limits.max_clients, quota.regions = 4096 = limits.max_regions), and a
 * tenant's use is checked only against its own quota: nothing keeps a share
 * for the other tenants, and nothing checks that the quotas of all tenants
 * fit in the limits. config/roshmd.conf does not mention `quota` at all, so
 * an operator who follows it runs with these defaults.
 *
 * roshmd with the default config and two tenants. Tenant "b" attaches one
 * client. Tenant "a" attaches clients until roshmd refuses, then creates
 * 4 KiB regions until roshmd refuses (raw control messages, on the next
 * client when one has used its limits.max_handles; each region's memfd is
 * closed after, roshmd keeps the mapping). Expected: tenant b can
 * still attach a second client and create a region.
 *
 * How it fails on today's code (adv at 02924eb), 5 of 5 runs:
 *   "with the default quotas tenant a alone took 255 of the node's clients
 *    (stopped by -24) and 4096 regions (stopped by -28): tenant b's second
 *    client: -24 (Too many open files); tenant b's region: -28 (No space
 *    left on device)"
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "attack.h"

#define MAX_TRY 5000

static struct th_daemon d;

/* One 4 KiB region of tenant a on control connection @sock: 0 or -errno. */
static int a_region(int sock, int i)
{
	uint64_t size = roshm_region_map_size(4096, 0, 0);
	struct roshm_ctl_region_create rc;
	struct roshm_ctl_region_reply rr;
	void *map;
	int fd = atk_memfd(size, &map);
	ssize_t n;

	if (fd < 0)
		return fd;
	memset(&rc, 0, sizeof(rc));
	atk_ctl_hdr(&rc.hdr, ROSHM_CTL_REGION_CREATE, sizeof(rc));
	snprintf(rc.name, sizeof(rc.name), "take%d", i);
	rc.size = 4096;
	memset(&rr, 0, sizeof(rr));
	n = atk_ctl_call(sock, &rc, sizeof(rc), fd, &rr, sizeof(rr), 5000);
	munmap(map, size);
	close(fd);
	if (n < 0)
		return (int)n;
	return n >= (ssize_t)sizeof(rr.hdr) ? rr.hdr.status : -EPROTO;
}

static void test_one_tenant_takes_the_node(void **state)
{
	struct roshm_params p = { .arena_size = 4096, .sq_entries = 2 };
	static int socks[MAX_TRY];
	struct roshm *b1, *b2;
	int nclients = 0, nregions = 0, cerr = 0, rerr = 0, err2 = 0, rb;
	uint32_t h;

	(void)state;
	b1 = atk_open(&d, "b", &p, &rb);
	assert_non_null(b1);
	while (nclients < MAX_TRY) {
		int s = atk_raw_attach(d.sock, "a", 2, 4096);

		if (s < 0) {
			cerr = s;
			break;
		}
		socks[nclients++] = s;
	}
	assert_true(nclients > 0);
	/* a client holds limits.max_handles (1024) handles: use the next one */
	for (int s = 0; s < nclients && nregions < MAX_TRY;) {
		int ret = a_region(socks[s], nregions);

		if (ret == -EMFILE) {
			s++;
			continue;
		}
		if (ret) {
			rerr = ret;
			break;
		}
		nregions++;
	}
	print_message("tenant a: %d clients (stopped by %d), %d regions (stopped by %d)\n",
		      nclients, cerr, nregions, rerr);
	b2 = atk_open(&d, "b", &p, &err2);
	rb = roshm_region_create(b1, "mine", 4096, NULL, &h);
	if (b2)
		roshm_close(b2);
	roshm_close(b1);
	for (int i = 0; i < nclients; i++)
		close(socks[i]);
	atk_assert_alive(&d);
	if (!b2 || rb)
		fail_msg("with the default quotas tenant a alone took %d of the node's clients (stopped by "
			 "%d) and %d regions (stopped by %d): tenant b's second client: %d (%s); tenant "
			 "b's region: %d (%s)", nclients, cerr, nregions, rerr, b2 ? 0 : err2,
			 b2 ? "attached" : strerror(-err2), rb, rb ? strerror(-rb) : "created");
}

static int setup(void **state)
{
	(void)state;
	th_cleanup_enable();
	/* the defaults: no limits, no quotas, just two tenants */
	return th_daemon_start(&d, "sec-dquota", ATK_TENANTS);
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
		cmocka_unit_test(test_one_tenant_takes_the_node),
	};

	return cmocka_run_group_tests_name("default_quota", tests, setup, teardown);
}
