// SPDX-License-Identifier: MIT
/*
 * Peers (issue 10, items 11 and 13, and a transport's immediate error).
 * Three nodes in network namespaces with the tcp transport and a file
 * registry:
 *  - a node whose roshmd is stopped (SIGSTOP: its kernel still accepts the
 *    connection, nobody answers the handshake) does not stall the control
 *    thread of a node that connects to it: other clients attach, open,
 *    operate and administer meanwhile, and the open answers once its
 *    connect times out;
 *  - limits.max_peers bounds the peer nodes one roshmd keeps (a clear error
 *    past it, no overflow of any table);
 *  - a WRITE bigger than the tcp transport carries completes with -EMSGSIZE.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <setjmp.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "roshm.h"
#include "harness.h"

#define NODES 3
#define SECRET "roshm-test-cluster-secret-0123456789"

static char prefix[32], workdir[128], ns_name[NODES + 1][48];
static struct th_daemon nodes[NODES + 1];

static struct roshm *attach_node(int n)
{
	struct roshm_params p = { .sock_path = nodes[n].sock, .arena_size = 1 << 20 };
	int err;

	return roshm_open(&p, &err);
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

struct owner {
	int node;
	const char *name;
	struct th_chan ready, done;
};

static int owner_main(void *arg)
{
	struct owner *o = arg;
	struct roshm *r = attach_node(o->node);
	uint32_t h;

	if (!r || roshm_region_create(r, o->name, 1 << 20, NULL, &h))
		return 2;
	th_chan_send(&o->ready, 1);
	th_chan_recv(&o->done);
	roshm_close(r);
	return 0;
}

static pid_t start_owner(struct owner *o, int node, const char *name)
{
	o->node = node;
	o->name = name;
	th_chan_init(&o->ready);
	th_chan_init(&o->done);
	return th_spawn_ns(ns_name[node], owner_main, o);
}

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* shared between the processes: when each finished (a sequence number) */
struct order {
	volatile uint64_t seq;
	volatile uint64_t open_done, other_done;
	volatile int open_ret, other_ret;
};

static int slow_open(void *arg)
{
	struct order *o = arg;
	struct roshm *r = attach_node(1);
	uint32_t h;

	if (!r)
		return 2;
	o->open_ret = roshm_region_open(r, "default/on-stopped", &h, NULL);
	o->open_done = __atomic_add_fetch(&o->seq, 1, __ATOMIC_SEQ_CST);
	roshm_close(r);
	return 0;
}

static int other_client(void *arg)
{
	struct order *o = arg;
	struct roshm *r = attach_node(1);
	uint32_t h;
	char *json = NULL;
	int ret;

	if (!r)
		return 2;
	/* attach, open a region of a live node, operate, ask the admin side */
	ret = open_retry(r, "default/on-live", &h);
	if (!ret)
		ret = roshm_write_sync(r, h, 0, 0, 4096);
	if (!ret)
		ret = th_admin(&nodes[1], "status", &json);
	free(json);
	o->other_ret = ret;
	o->other_done = __atomic_add_fetch(&o->seq, 1, __ATOMIC_SEQ_CST);
	roshm_close(r);
	return 0;
}

/* While node 1 tries to connect to a node that never answers, its control
 * thread serves everyone else: they finish before the open does. */
static void test_connect_does_not_block(void **state)
{
	struct owner live, stopped;
	struct order *o = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pid_t pl, ps, pa, pb;
	uint64_t t0;

	(void)state;
	pl = start_owner(&live, 2, "on-live");
	ps = start_owner(&stopped, 3, "on-stopped");
	assert_int_equal(th_chan_recv(&live.ready), 1);
	assert_int_equal(th_chan_recv(&stopped.ready), 1);
	kill(nodes[3].pid, SIGSTOP);
	t0 = now_us();
	pa = th_spawn_ns(ns_name[1], slow_open, o);
	usleep(300000); /* its open is under way */
	pb = th_spawn_ns(ns_name[1], other_client, o);
	assert_int_equal(th_wait(pb), 0);
	assert_int_equal(th_wait(pa), 0);
	kill(nodes[3].pid, SIGCONT);
	print_message("other client done as #%llu (%d), open done as #%llu (%d) after %llu ms\n",
		      (unsigned long long)o->other_done, o->other_ret,
		      (unsigned long long)o->open_done, o->open_ret,
		      (unsigned long long)((now_us() - t0) / 1000));
	assert_int_equal(o->other_ret, 0);
	assert_true(o->other_done < o->open_done);
	/* the open to the silent node fails clearly once its connect gives up */
	assert_int_equal(o->open_ret, -EHOSTUNREACH);
	th_chan_send(&live.done, 1);
	th_chan_send(&stopped.done, 1);
	assert_int_equal(th_wait(pl), 0);
	assert_int_equal(th_wait(ps), 0);
	munmap(o, 4096);
}

/* Node 1 keeps at most limits.max_peers = 1 peer node: a second one is a
 * clear error; its first peer keeps working. */
struct peers_ctx {
	volatile int second, first_again;
};

static int two_peers(void *arg)
{
	struct peers_ctx *x = arg;
	struct roshm *r = attach_node(1);
	uint32_t h2, h3;

	if (!r)
		return 2;
	if (open_retry(r, "default/peer-2", &h2))
		return 3;
	if (roshm_write_sync(r, h2, 0, 0, 64))
		return 4;
	x->second = open_retry(r, "default/peer-3", &h3);
	x->first_again = roshm_write_sync(r, h2, 64, 0, 64);
	roshm_close(r);
	return 0;
}

static void test_max_peers(void **state)
{
	struct owner a, b;
	struct peers_ctx *x = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pid_t pa, pb, pc;

	(void)state;
	pa = start_owner(&a, 2, "peer-2");
	pb = start_owner(&b, 3, "peer-3");
	assert_int_equal(th_chan_recv(&a.ready), 1);
	assert_int_equal(th_chan_recv(&b.ready), 1);
	pc = th_spawn_ns(ns_name[1], two_peers, x);
	assert_int_equal(th_wait(pc), 0);
	assert_int_equal(x->second, -EHOSTUNREACH);
	assert_int_equal(x->first_again, 0);
	th_chan_send(&a.done, 1);
	th_chan_send(&b.done, 1);
	assert_int_equal(th_wait(pa), 0);
	assert_int_equal(th_wait(pb), 0);
	assert_true(th_daemon_alive(&nodes[1]));
	munmap(x, 4096);
}

/* A WRITE larger than transport.tcp.max_msg: -EMSGSIZE, never success. */
static int too_big(void *arg)
{
	int *ret = arg;
	struct roshm *r = attach_node(1);
	uint32_t h;

	if (!r)
		return 2;
	if (open_retry(r, "default/peer-2b", &h))
		return 3;
	ret[0] = roshm_write_sync(r, h, 0, 0, 65536 + 4096);
	ret[1] = roshm_read_sync(r, h, 0, 0, 65536 + 4096);
	ret[2] = roshm_write_sync(r, h, 0, 0, 65536);
	roshm_close(r);
	return 0;
}

static void test_too_big_for_tcp(void **state)
{
	struct owner a;
	int *ret = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pid_t pa, pc;

	(void)state;
	pa = start_owner(&a, 2, "peer-2b");
	assert_int_equal(th_chan_recv(&a.ready), 1);
	pc = th_spawn_ns(ns_name[1], too_big, ret);
	assert_int_equal(th_wait(pc), 0);
	assert_int_equal(ret[0], -EMSGSIZE);
	assert_int_equal(ret[1], -EMSGSIZE);
	assert_int_equal(ret[2], 0);
	th_chan_send(&a.done, 1);
	assert_int_equal(th_wait(pa), 0);
	munmap(ret, 4096);
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
			 " secret_file = \"%s\"; max_msg = 65536; connect_timeout_ms = 2500; }; };\n"
			 "registry: { dir = \"%s/registry\"; revalidate_ms = 200; };\n"
			 "limits: { max_peers = %d; };\n",
			 n, secret, workdir, n == 1 ? 2 : 4);
		if (th_daemon_start_ns(&nodes[n], name, ns_name[n], extra))
			return -1;
	}
	return 0;
}

/* max_peers = 1 on node 1 for the limits case */
static int setup_one_peer(void **state)
{
	char extra[1024], secret[300];
	int st;

	(void)state;
	st = th_daemon_stop(&nodes[1]);
	if (st)
		return -1;
	snprintf(secret, sizeof(secret), "%s/cluster.secret", workdir);
	snprintf(extra, sizeof(extra),
		 "transport: { tcp: { enabled = true; listen = \"198.18.0.1\"; port = 7471;"
		 " secret_file = \"%s\"; max_msg = 65536; }; };\n"
		 "registry: { dir = \"%s/registry\"; revalidate_ms = 200; };\n"
		 "limits: { max_peers = 1; };\n", secret, workdir);
	return th_daemon_start_ns(&nodes[1], "node1b", ns_name[1], extra);
}

static int teardown(void **state)
{
	int bad = 0;

	(void)state;
	for (int n = 1; n <= NODES; n++) {
		if (!nodes[n].pid)
			continue;
		kill(nodes[n].pid, SIGCONT);
		if (th_daemon_stop(&nodes[n])) {
			th_daemon_dump_log(&nodes[n]);
			bad = 1;
		}
	}
	return bad ? -1 : 0;
}

int main(void)
{
	const struct CMUnitTest first[] = {
		cmocka_unit_test(test_connect_does_not_block),
		cmocka_unit_test(test_too_big_for_tcp),
	};
	const struct CMUnitTest second[] = {
		cmocka_unit_test_setup(test_max_peers, setup_one_peer),
	};
	int fails;

	if (geteuid() != 0) {
		printf("security_peers: skipped: needs root to create network namespaces\n");
		return 77;
	}
	if (th_sh("command -v ip >/dev/null")) {
		printf("security_peers: skipped: needs iproute2 (make deps installs it)\n");
		return 77;
	}
	snprintf(prefix, sizeof(prefix), "rsp%d", (int)getpid() % 100000);
	snprintf(workdir, sizeof(workdir), "/tmp/roshm-test-peers-%s", prefix);
	mkdir(workdir, 0755);
	th_sh("echo %s > %s/cluster.secret", SECRET, workdir);
	for (int n = 1; n <= NODES; n++)
		snprintf(ns_name[n], sizeof(ns_name[n]), "%s-%d", prefix, n);
	if (th_sh("%s up %s %d", NETNS_SH, prefix, NODES)) {
		th_sh("%s down %s %d", NETNS_SH, prefix, NODES);
		printf("security_peers: cannot create network namespaces\n");
		return 1;
	}
	fails = cmocka_run_group_tests_name("peers", first, setup, NULL);
	fails += cmocka_run_group_tests_name("peers_limit", second, NULL, teardown);
	th_sh("%s down %s %d", NETNS_SH, prefix, NODES);
	th_sh("rm -rf %s", workdir);
	return fails ? 1 : 0;
}
