// SPDX-License-Identifier: MIT
/*
 * An operation the transport cannot take keeps the adaptive poller at 100%
 * of a core. rd_poller_submit answers -EBUSY when the tcp provider has no
 * room for an operation (quota.peer_inflight of the tenant reached, the
 * connection's request ids or its tx buffer full, a paused region): the SQE
 * stays in the client's ring "for the next round". work_pending then sees
 * an SQ that is not empty, a CQ with room and no FENCE, and calls it work:
 * the poller never sleeps, for as long as the peer does not answer (a
 * hostile or stopped peer: for ever; tcp has no per-operation timeout).
 *
 * Two nodes (netns), tcp, file registry; node 1's tenants have
 * quota.peer_inflight = 4. Node 2 owns region "far"; a client of node 1
 * reads it once (the connection comes up), node 2's roshmd is stopped
 * (SIGSTOP: its kernel still takes our frames), and the client submits 5
 * READs: 4 go out and are never answered, the 5th waits in its SQ.
 * Expected: node 1's roshmd uses less than a third of a core over the next
 * 2 s (the threshold of sec_poller_spin), and once node 2 resumes all 5
 * READs complete. Found at 5f67941: "node 1's roshmd used 68% of a core for
 * 2 s (idle: 0%)" (the rest of the core went to the other processes of a
 * busy 2-core machine).
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
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "roshm.h"
#include "harness.h"

#define NODES 2
#define SECRET "roshm-test-cluster-secret-0123456789"

static char prefix[32], workdir[128], ns_name[NODES + 1][48];
static struct th_daemon nodes[NODES + 1];

struct shared {
	struct th_chan ready, go, done;
	volatile int ret;
};

static int owner_main(void *arg)
{
	struct shared *s = arg;
	struct roshm_params p = { .sock_path = nodes[2].sock, .arena_size = 1 << 20 };
	struct roshm *r;
	uint32_t h;
	int err;

	r = roshm_open(&p, &err);
	if (!r || roshm_region_create(r, "far", 1 << 20, NULL, &h))
		return 2;
	th_chan_send(&s->ready, 1);
	while (th_chan_recv(&s->done) == UINT64_MAX)
		;
	roshm_close(r);
	return 0;
}

static int open_retry(struct roshm *r, const char *name, uint32_t *h)
{
	int ret = -ENOENT;

	for (int i = 0; i < 300 && ret == -ENOENT; i++) {
		ret = roshm_region_open(r, name, h, NULL);
		if (ret == -ENOENT)
			usleep(10000);
	}
	return ret;
}

/* Node 1's client: one READ answered, then (node 2 stopped) 5 more. */
static int reader_main(void *arg)
{
	struct shared *s = arg;
	struct roshm_params p = { .sock_path = nodes[1].sock, .arena_size = 1 << 20 };
	struct roshm *r;
	uint32_t h;
	int err;

	r = roshm_open(&p, &err);
	if (!r || open_retry(r, "default/far", &h))
		return 2;
	if (roshm_read_sync(r, h, 0, 0, 4096))
		return 3;
	th_chan_send(&s->ready, 1);
	if (th_chan_recv(&s->go) != 1)
		return 4;
	for (int i = 0; i < 5; i++) {
		struct roshm_sqe *sqe = roshm_get_sqe(r);

		if (!sqe)
			return 5;
		roshm_prep_read(sqe, h, 0, 4096 * (uint64_t)i, 4096);
	}
	roshm_submit(r);
	th_chan_send(&s->ready, 2);
	/* node 2 resumed: all 5 complete, the one that waited too */
	if (th_chan_recv(&s->go) != 2)
		return 6;
	for (int i = 0; i < 5; i++) {
		struct roshm_cqe *c;

		if (roshm_wait_cqe_timeout(r, &c, 3000))
			return 7;
		if (c->status) {
			s->ret = c->status;
			return 8;
		}
		roshm_cqe_seen(r, c);
	}
	roshm_close(r);
	return 0;
}

/* @pid's CPU time so far, in clock ticks (utime + stime of every thread). */
static long long cpu_ticks(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut, st;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	p = fgets(buf, sizeof(buf), f);
	fclose(f);
	if (!p || !(p = strrchr(buf, ')')))
		return -1;
	if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -1;
	return (long long)(ut + st);
}

static int cpu_percent(pid_t pid, int ms)
{
	long long t0 = cpu_ticks(pid), t1;
	long hz = sysconf(_SC_CLK_TCK);

	usleep((useconds_t)ms * 1000);
	t1 = cpu_ticks(pid);
	if (t0 < 0 || t1 < 0)
		return -1;
	return (int)((t1 - t0) * 100 * 1000 / hz / ms);
}

static void test_busy_op_spins(void **state)
{
	struct shared *s = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int idle, busy;
	pid_t po, pr;

	(void)state;
	th_chan_init(&s->ready);
	th_chan_init(&s->go);
	th_chan_init(&s->done);
	po = th_spawn_ns(ns_name[2], owner_main, s);
	assert_int_equal(th_chan_recv(&s->ready), 1);
	pr = th_spawn_ns(ns_name[1], reader_main, s);
	assert_int_equal(th_chan_recv(&s->ready), 1);
	usleep(300000);
	idle = cpu_percent(nodes[1].pid, 1000);
	kill(nodes[2].pid, SIGSTOP);
	th_chan_send(&s->go, 1);
	assert_int_equal(th_chan_recv(&s->ready), 2);
	usleep(200000);
	busy = cpu_percent(nodes[1].pid, 2000);
	print_message("node 1's roshmd: %d%% of a core idle, %d%% with 4 READs unanswered and "
		      "a 5th over quota.peer_inflight in the SQ\n", idle, busy);
	kill(nodes[2].pid, SIGCONT);
	th_chan_send(&s->go, 2);
	int rr = th_wait(pr);

	th_chan_send(&s->done, 1);
	th_wait(po);
	assert_true(idle >= 0 && busy >= 0);
	if (rr)
		fail_msg("node 1's client: its READs did not all complete once node 2 resumed "
			 "(exit %d, status %d)", rr, s->ret);
	if (busy >= 33)
		fail_msg("node 1's roshmd used %d%% of a core for 2 s (idle: %d%%) with nothing it "
			 "can do: one READ over quota.peer_inflight to a peer that does not answer",
			 busy, idle);
}

static int setup(void **state)
{
	char extra[1024], secret[300];

	(void)state;
	snprintf(secret, sizeof(secret), "%s/cluster.secret", workdir);
	for (int n = 1; n <= NODES; n++) {
		char name[16];

		snprintf(name, sizeof(name), "node%d", n);
		snprintf(extra, sizeof(extra),
			 "transport: { tcp: { enabled = true; listen = \"198.18.0.%d\"; port = 7471;"
			 " secret_file = \"%s\"; max_msg = 65536; }; };\n"
			 "registry: { dir = \"%s/registry\"; revalidate_ms = 200; };\n"
			 "quota: { peer_inflight = 4; };\n"
			 "channel: { hugepages = \"off\"; };\n",
			 n, secret, workdir);
		if (th_daemon_start_ns(&nodes[n], name, ns_name[n], extra))
			return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	for (int n = 1; n <= NODES; n++) {
		if (!nodes[n].pid)
			continue;
		kill(nodes[n].pid, SIGCONT);
		if (th_daemon_stop(&nodes[n]))
			th_daemon_dump_log(&nodes[n]);
	}
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_busy_op_spins),
	};
	int fails;

	if (geteuid() != 0) {
		printf("tcp_busy_spin: skipped: needs root\n");
		return 77;
	}
	snprintf(prefix, sizeof(prefix), "rbs%d", (int)getpid() % 100000);
	snprintf(workdir, sizeof(workdir), "/tmp/roshm-test-busy-%s", prefix);
	mkdir(workdir, 0755);
	th_sh("echo %s > %s/cluster.secret", SECRET, workdir);
	for (int n = 1; n <= NODES; n++)
		snprintf(ns_name[n], sizeof(ns_name[n]), "%s-%d", prefix, n);
	if (th_sh("%s up %s %d", NETNS_SH, prefix, NODES)) {
		th_sh("%s down %s %d", NETNS_SH, prefix, NODES);
		return 1;
	}
	fails = cmocka_run_group_tests_name("tcp_busy_spin", tests, setup, teardown);
	th_sh("%s down %s %d", NETNS_SH, prefix, NODES);
	th_sh("rm -rf %s", workdir);
	return fails ? 1 : 0;
}
