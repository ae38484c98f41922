// SPDX-License-Identifier: MIT
/*
 * Found by the adversarial review of the seams redesign (d9b2dcc): the tcp
 * transport held a client (dp_refs) for every operation it queued
 * (rd_pend_start), and tcp_client_gone no longer dropped it. Fixed: tcp lets
 * go at client_gone (rd_pend_forget_client), as it did before. A client that detaches while
 * it has an operation queued to a peer that never answers therefore stays a
 * zombie - its whole channel memfd (rings + arena) stays mapped in roshmd -
 * until that peer answers, which a hostile peer never does (the tcp
 * transport has no per-operation timeout; only a lost connection or the
 * node's record leaving the registry fails them). Detach gave the tenant's
 * quota back already (client_detach: tuse.bytes -= chan_size), so the memory
 * counts against nobody.
 *
 * Before the redesign (4333809) tcp_client_gone cleared pd->client and the
 * client was freed at once.
 *
 * Two nodes (netns), file registry (no lease: a stopped roshmd keeps its
 * node record, like a hostile node that keeps its record fresh). Node 2
 * owns region "far". A first client of node 1 opens it (the peer connection
 * comes up), then node 2's roshmd is stopped (SIGSTOP: its kernel accepts
 * our frames, nobody answers). N clients of node 1 (tenant quota.bytes =
 * 48 MiB, arena 16 MiB each) each open "far", submit one READ and exit.
 * Expected: after they left, node 1's roshmd maps no "roshm-channel" memfd
 * beyond the quota; found: it maps all N.
 *
 * The same for WRITEs, since tcp sends a WRITE's payload straight from the
 * client's arena (an iovec into it, held until the bytes are in the
 * socket): with node 2 stopped, N writers each queue 2 MiB of 64 KiB
 * WRITEs and exit; the first fill the socket, the payloads of the rest stay
 * queued, pointing into their arenas. Expected: once they left, node 1
 * maps no more than the quota (their unsent WRITEs became WRITEs of no
 * bytes, or send zeros for the rest of a payload already started), and
 * after node 2 resumes the connection still frames correctly: a new
 * client's WRITE reads back, and neither node logged a malformed frame or
 * a failed write.
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
#define ARENA (16u << 20)
#define NCLIENTS 8

static char prefix[32], workdir[128], ns_name[NODES + 1][48];
static struct th_daemon nodes[NODES + 1];

struct shared {
	struct th_chan ready, done;
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
	th_chan_recv(&s->done);
	th_chan_recv(&s->done);
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

/* Brings node 1's connection to node 2 up (one READ that is answered). */
static int warm(void *arg)
{
	struct roshm_params p = { .sock_path = nodes[1].sock, .arena_size = 1 << 20 };
	struct roshm *r;
	uint32_t h;
	int err;

	(void)arg;
	r = roshm_open(&p, &err);
	if (!r || open_retry(r, "default/far", &h))
		return 2;
	err = roshm_read_sync(r, h, 0, 0, 4096);
	roshm_close(r);
	return err ? 3 : 0;
}

/* Node 2 is stopped: one READ that is never answered, then leave. */
static int victim(void *arg)
{
	struct roshm_params p = { .sock_path = nodes[1].sock, .arena_size = ARENA };
	struct roshm *r;
	struct roshm_sqe *sqe;
	uint32_t h;
	int err;

	(void)arg;
	r = roshm_open(&p, &err);
	if (!r) {
		fprintf(stderr, "victim: roshm_open %d\n", err);
		return 2;
	}
	err = roshm_region_open(r, "default/far", &h, NULL);
	if (err) {
		fprintf(stderr, "victim: open %d\n", err);
		return 3;
	}
	sqe = roshm_get_sqe(r);
	if (!sqe)
		return 4;
	roshm_prep_read(sqe, h, 0, 0, 4096);
	roshm_submit(r);
	usleep(200000); /* roshmd sent it */
	_exit(0);       /* the pod goes away (detach) */
}

#define WRITE_LEN (64u << 10)
#define WRITES 32  /* 2 MiB per writer */

/* Node 2 is stopped: queue WRITES WRITEs that do not all fit in the socket, then leave. */
static int writer(void *arg)
{
	struct roshm_params p = { .sock_path = nodes[1].sock, .arena_size = ARENA };
	struct roshm *r;
	size_t asz;
	uint8_t *arena;
	uint32_t h;
	int err, n = 0;

	(void)arg;
	r = roshm_open(&p, &err);
	if (!r) {
		fprintf(stderr, "writer: roshm_open %d\n", err);
		return 2;
	}
	err = roshm_region_open(r, "default/far", &h, NULL);
	if (err) {
		fprintf(stderr, "writer: open %d\n", err);
		return 3;
	}
	arena = roshm_arena(r, &asz);
	memset(arena, 0xa5, (size_t)WRITES * WRITE_LEN);
	for (int i = 0; i < WRITES; i++) {
		struct roshm_sqe *sqe = roshm_get_sqe(r);

		if (!sqe)
			break;
		roshm_prep_write(sqe, h, (uint64_t)(i % 16) * WRITE_LEN, (uint64_t)i * WRITE_LEN,
				 WRITE_LEN);
		n++;
	}
	roshm_submit(r);
	usleep(200000); /* roshmd took them */
	/* what it leaves behind is being sent: its bytes may change under it */
	memset(arena, 0x5a, (size_t)WRITES * WRITE_LEN);
	_exit(n == WRITES ? 0 : 4);
}

/* After node 2 resumed: a new client's WRITE over the same connection reads back. */
static int checker(void *arg)
{
	struct roshm_params p = { .sock_path = nodes[1].sock, .arena_size = 1 << 20 };
	struct roshm *r;
	size_t asz;
	uint8_t *arena;
	uint32_t h;
	int err;

	(void)arg;
	r = roshm_open(&p, &err);
	if (!r || open_retry(r, "default/far", &h))
		return 2;
	arena = roshm_arena(r, &asz);
	for (uint32_t i = 0; i < 8192; i++)
		arena[i] = (uint8_t)(i * 7 + 1);
	err = roshm_write_sync(r, h, 4096, 0, 8192);
	if (!err) {
		memset(arena + 65536, 0, 8192);
		err = roshm_read_sync(r, h, 4096, 65536, 8192);
	}
	if (err) {
		fprintf(stderr, "checker: %d\n", err);
		roshm_close(r);
		return 3;
	}
	err = memcmp(arena, arena + 65536, 8192) ? 4 : 0;
	roshm_close(r);
	return err;
}

static bool log_has(const struct th_daemon *d, const char *what)
{
	return th_sh("grep -q '%s' %s", what, d->log) == 0;
}

/* Bytes of "roshm-channel" memfd mappings in @pid. */
static unsigned long long channel_bytes(pid_t pid, int *count)
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

		if (!strstr(line, "memfd:roshm-channel"))
			continue;
		if (sscanf(line, "%llx-%llx", &a, &b) == 2) {
			sum += b - a;
			(*count)++;
		}
	}
	fclose(f);
	return sum;
}

static void test_detached_clients_let_go(void **state)
{
	struct shared *s = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	unsigned long long bytes;
	char *json = NULL;
	pid_t po, pw;
	int n, ok = 0;

	(void)state;
	th_chan_init(&s->ready);
	th_chan_init(&s->done);
	po = th_spawn_ns(ns_name[2], owner_main, s);
	assert_int_equal(th_chan_recv(&s->ready), 1);
	pw = th_spawn_ns(ns_name[1], warm, NULL);
	assert_int_equal(th_wait(pw), 0);
	kill(nodes[2].pid, SIGSTOP);
	for (int i = 0; i < NCLIENTS; i++) {
		pid_t pv = th_spawn_ns(ns_name[1], victim, NULL);

		if (th_wait(pv) == 0)
			ok++;
	}
	usleep(500000);
	bytes = channel_bytes(nodes[1].pid, &n);
	th_admin(&nodes[1], "status", &json);
	print_message("%d clients attached, read and left; node 1's roshmd (pid %d) still maps "
		      "%d roshm-channel memfds, %llu MiB; status: %s\n",
		      ok, (int)nodes[1].pid, n, bytes >> 20, json ? json : "?");
	free(json);
	kill(nodes[2].pid, SIGCONT);
	usleep(500000);
	{
		int n2;
		unsigned long long b2 = channel_bytes(nodes[1].pid, &n2);

		print_message("after node 2 resumed: %d mappings, %llu MiB\n", n2, b2 >> 20);
	}
	th_chan_send(&s->done, 1);
	th_chan_send(&s->done, 1);
	th_wait(po);
	assert_int_equal(ok, NCLIENTS);
	/* quota.bytes is 48 MiB: more than that mapped for nobody is the bug */
	assert_true(bytes <= (48ull << 20));
}

static void test_detached_writers_let_go(void **state)
{
	struct shared *s = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	unsigned long long bytes;
	pid_t po, pw;
	int n, ok = 0, check;

	(void)state;
	th_chan_init(&s->ready);
	th_chan_init(&s->done);
	po = th_spawn_ns(ns_name[2], owner_main, s);
	assert_int_equal(th_chan_recv(&s->ready), 1);
	pw = th_spawn_ns(ns_name[1], warm, NULL);
	assert_int_equal(th_wait(pw), 0);
	kill(nodes[2].pid, SIGSTOP);
	for (int i = 0; i < NCLIENTS; i++) {
		pid_t pv = th_spawn_ns(ns_name[1], writer, NULL);

		if (th_wait(pv) == 0)
			ok++;
	}
	usleep(500000);
	bytes = channel_bytes(nodes[1].pid, &n);
	print_message("%d writers queued %u x %u KiB each and left; node 1 still maps %d "
		      "roshm-channel memfds, %llu MiB\n", ok, WRITES, WRITE_LEN >> 10, n, bytes >> 20);
	kill(nodes[2].pid, SIGCONT);
	pw = th_spawn_ns(ns_name[1], checker, NULL);
	check = th_wait(pw);
	th_chan_send(&s->done, 1);
	th_chan_send(&s->done, 1);
	th_wait(po);
	assert_int_equal(ok, NCLIENTS);
	/* quota.bytes is 48 MiB: more than that mapped for nobody is the bug */
	assert_true(bytes <= (48ull << 20));
	if (check)
		fprintf(stderr, "the checker's WRITE over the connection did not read back (%d)\n", check);
	assert_int_equal(check, 0);
	assert_false(log_has(&nodes[2], "malformed"));
	assert_false(log_has(&nodes[1], "write failed"));
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
			 "quota: { bytes = 50331648L; };\n"
			 "channel: { max_arena_size = 33554432L; };\n",
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
		cmocka_unit_test(test_detached_clients_let_go),
		cmocka_unit_test(test_detached_writers_let_go),
	};
	int fails;

	if (geteuid() != 0) {
		printf("tcp_hold: skipped: needs root\n");
		return 77;
	}
	snprintf(prefix, sizeof(prefix), "rsh%d", (int)getpid() % 100000);
	snprintf(workdir, sizeof(workdir), "/tmp/roshm-test-hold-%s", prefix);
	mkdir(workdir, 0755);
	th_sh("echo %s > %s/cluster.secret", SECRET, workdir);
	for (int n = 1; n <= NODES; n++)
		snprintf(ns_name[n], sizeof(ns_name[n]), "%s-%d", prefix, n);
	if (th_sh("%s up %s %d", NETNS_SH, prefix, NODES)) {
		th_sh("%s down %s %d", NETNS_SH, prefix, NODES);
		return 1;
	}
	fails = cmocka_run_group_tests_name("tcp_hold", tests, setup, teardown);
	th_sh("%s down %s %d", NETNS_SH, prefix, NODES);
	th_sh("rm -rf %s", workdir);
	return fails ? 1 : 0;
}
