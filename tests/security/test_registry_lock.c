// SPDX-License-Identifier: MIT
/*
 * Whoever can write the file registry's directory stops roshmd's control
 * thread for as long as it likes. file_put_region
 * (dataplane/registry/file.c) takes flock(tenant directory, LOCK_EX),
 * blocking, in the control thread, to make its EEXIST check and rename one
 * step against other roshmd of the host. Any process that can open that
 * directory can hold the same lock; roshmd's next region create (or drain)
 * of that tenant then waits in flock(2), and with it every attach, open,
 * close, admin request and timer of the node: `roshmctl status`, the
 * DaemonSet's liveness probe, stops answering. Deleting or replaying
 * records is the registry writer's expected power; hanging the daemon is
 * more than that.
 *
 * roshmd with the default file registry. The attacker opens
 * <registry>/regions/b (made by a first region of tenant "b") and holds
 * flock(LOCK_EX) on it. Tenant b creates another region (in a child, it may
 * hang). Expected: tenant a attaches and completes a NOP within 3 s, and
 * the admin's "status" answers within 3 s, while the lock is held.
 *
 * How it fails on today's code (adv at 02924eb), 5 of 5 runs:
 *   "while a registry writer held the lock of regions/b: tenant a could not
 *    attach and complete a NOP within 3 s (timed out); "status": -62 (Timer
 *    expired)"
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
#include <sys/file.h>
#include <unistd.h>
#include <cmocka.h>

#include "attack.h"

static struct th_daemon d;

static int attach_a(void *arg)
{
	int err;
	struct roshm *r = atk_open(arg, "a", NULL, &err);

	if (!r)
		return 1;
	err = roshm_nop_sync(r);
	roshm_close(r);
	return err ? 2 : 0;
}

static int create_b(void *arg)
{
	uint32_t h;
	int err;
	struct roshm *r = atk_open(arg, "b", NULL, &err);

	if (!r)
		return 1;
	err = roshm_region_create(r, "second", 4096, NULL, &h);
	roshm_close(r);
	return err ? 2 : 0;
}

static void test_held_tenant_lock(void **state)
{
	struct roshm *b;
	char path[600], *json = NULL, why[512] = "";
	size_t wl = 0;
	uint32_t h;
	int err, fd, st;
	pid_t pid;

	(void)state;
	b = atk_open(&d, "b", NULL, &err);
	assert_non_null(b);
	assert_int_equal(roshm_region_create(b, "first", 4096, NULL, &h), 0);
	/* the registry writer holds the tenant directory's lock */
	snprintf(path, sizeof(path), "%s/registry/regions/b", d.dir);
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
	/* tenant b creates a region: roshmd publishes it */
	pid = th_spawn(create_b, &d);
	assert_true(pid > 0);
	usleep(300000);
	st = atk_run_bounded(attach_a, &d, 3000);
	if (st)
		wl += (size_t)snprintf(why + wl, sizeof(why) - wl,
				       "tenant a could not attach and complete a NOP within 3 s (%s); ",
				       st == -ETIME ? "timed out" : "failed");
	st = atk_admin(d.sock, "status", 3000, &json);
	if (st)
		wl += (size_t)snprintf(why + wl, sizeof(why) - wl, "\"status\": %d (%s); ", st,
				       strerror(-st));
	free(json);
	/* the writer lets go */
	flock(fd, LOCK_UN);
	close(fd);
	atk_wait_child(pid, 5000);
	roshm_close(b);
	atk_assert_alive(&d);
	if (wl)
		fail_msg("while a registry writer held the lock of regions/b: %s", why);
}

static int setup(void **state)
{
	(void)state;
	th_cleanup_enable();
	return th_daemon_start(&d, "sec-rlock", ATK_TENANTS "channel: { hugepages = \"off\"; };\n");
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
		cmocka_unit_test(test_held_tenant_lock),
	};

	return cmocka_run_group_tests_name("registry_lock", tests, setup, teardown);
}
