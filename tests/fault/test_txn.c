// SPDX-License-Identifier: MIT
/*
 * Transactions through real roshmd processes, and what failures do to them.
 * Each writer streams transactions of three writes whose bytes carry
 * (writer, txn number): a record in two halves at a place of its own, and the
 * writer's high-water mark. Afterwards the owner's data must show:
 *   - every acknowledged transaction applied (nothing acknowledged is lost),
 *   - no record half-applied (all or nothing),
 *   - applied transactions == records present (none applied twice),
 *   - each writer's high-water mark == its last applied transaction (one order).
 * Configurations: one node (local transport), three nodes in network
 * namespaces (tcp transport), and a writer's roshmd killed mid-stream.
 */
#define _GNU_SOURCE
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

#define WRITERS 3
#define MAXTX 4000
#define REC 32
#define HWM_OFF ((uint64_t)WRITERS * MAXTX * REC)
#define DATA_SIZE (HWM_OFF + 4096)
#define MAGIC 0x7258ull

#define CHECK(cond) do { if (!(cond)) { fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); return 1; } } while (0)
#define CHECK_EQ(a, b) do { long long _a = (long long)(a), _b = (long long)(b); if (_a != _b) { fprintf(stderr, "%s:%d: %s = %lld, expected %lld\n", __FILE__, __LINE__, #a, _a, _b); return 1; } } while (0)

static struct th_daemon nodes[4];
static int nnodes;
static char prefix[64], workdir[256];

struct shared {
	uint8_t acked[WRITERS][MAXTX];
	int32_t last_err[WRITERS];
	volatile uint64_t done[WRITERS];
};
static struct shared *sh;

struct writer {
	int w, node, ntx;
	char region[128];
	const char *netns;
};

static struct roshm *attach(int node)
{
	struct roshm_params p = { .sock_path = nodes[node].sock, .reconnect_ms = 1000 };
	int err;

	return roshm_open(&p, &err);
}

/* @name opened, waiting up to 3 s for its record to reach this node: 0 or
 * the error */
static int open_wait(struct roshm *r, const char *name, uint32_t *h)
{
	int ret = -ENOENT;

	for (int i = 0; i < 300 && ret == -ENOENT; i++)
		if ((ret = roshm_region_open(r, name, h, NULL)) == -ENOENT)
			usleep(10000);
	return ret;
}

static int writer_main(void *arg)
{
	struct writer *x = arg;
	struct roshm *r = attach(x->node);
	uint32_t h;
	uint8_t *a;
	int ret = -ENOENT;

	CHECK(r);
	CHECK_EQ(open_wait(r, x->region, &h), 0);
	a = roshm_arena(r, NULL);
	for (int i = 0; i < x->ntx; i++) {
		uint64_t id = ((uint64_t)x->w << 32) | (uint64_t)i, off = ((uint64_t)x->w * MAXTX + (uint64_t)i) * REC;
		uint64_t *p = (uint64_t *)(void *)a;
		struct roshm_txn_write tw[3] = {
			{ .off = off, .arena_off = 0, .len = 16 },
			{ .off = off + 16, .arena_off = 16, .len = 16 },
			{ .off = HWM_OFF + (uint64_t)x->w * 8, .arena_off = 32, .len = 8 },
		};

		p[0] = MAGIC;
		p[1] = id;
		p[2] = ~id;
		p[3] = id ^ 0x5555555555555555ull;
		p[4] = (uint64_t)i + 1;
		ret = roshm_txn_sync(r, h, tw, 3, NULL);
		if (ret) {
			sh->last_err[x->w] = ret;
			break;
		}
		sh->acked[x->w][i] = 1;
		sh->done[x->w] = (uint64_t)i + 1;
	}
	roshm_close(r);
	return 0;
}

/* Check the invariants on the owner's mapping; @killed: writers allowed to
 * have one unacknowledged transaction applied (it died waiting). */
static void verify(const uint8_t *d, const struct roshm_region_hdr *hdr, int nw, const int *ntx)
{
	uint64_t present = 0;

	for (int w = 0; w < nw; w++) {
		int64_t last = -1;

		for (int i = 0; i < MAXTX; i++) {
			const uint64_t *p = (const uint64_t *)(const void *)(d + ((uint64_t)w * MAXTX + (uint64_t)i) * REC);
			uint64_t id = ((uint64_t)w << 32) | (uint64_t)i;
			bool first = p[0] == MAGIC && p[1] == id, second = p[2] == ~id &&
					p[3] == (id ^ 0x5555555555555555ull);

			if (first != second)
				fail_msg("writer %d txn %d applied partially (%d/%d)", w, i, first, second);
			if (!first && (p[0] || p[1] || p[2] || p[3]))
				fail_msg("writer %d txn %d: garbage in its record", w, i);
			if (sh->acked[w][i] && !first)
				fail_msg("writer %d txn %d acknowledged but not applied", w, i);
			if (first) {
				present++;
				if (i >= ntx[w])
					fail_msg("writer %d txn %d applied but never issued", w, i);
				if (!sh->acked[w][i] && i != (int)sh->done[w])
					fail_msg("writer %d txn %d applied, not acknowledged, not its last", w, i);
				last = i;
			}
		}
		uint64_t hwm = *(const uint64_t *)(const void *)(d + HWM_OFF + (uint64_t)w * 8);

		if (hwm != (uint64_t)(last + 1))
			fail_msg("writer %d: high-water mark %llu, last applied txn %lld: out of order", w,
				 (unsigned long long)hwm, (long long)last);
	}
	uint64_t applied = hdr->txn_applied - hdr->txn_aborted;

	if (applied != present)
		fail_msg("%llu transactions applied, %llu records present: some applied twice",
			 (unsigned long long)applied, (unsigned long long)present);
	print_message("%llu transactions applied exactly once, %llu holes aborted, log sequence %llu\n",
		      (unsigned long long)present, (unsigned long long)hdr->txn_aborted,
		      (unsigned long long)hdr->txn_applied);
}

static struct roshm *make_region(int node, const char *name, uint32_t *h, uint8_t **d,
				 struct roshm_region_hdr **hdr, uint32_t slots)
{
	struct roshm *r = attach(node);
	struct roshm_region_opts o = { .txn_slots = slots, .slot_size = 512 };

	assert_non_null(r);
	assert_int_equal(roshm_region_create(r, name, DATA_SIZE, &o, h), 0);
	*d = roshm_region_data(r, *h, NULL);
	/* the header is at the start of the mapping, the data area after the log */
	*hdr = (struct roshm_region_hdr *)(void *)(*d - roshm_region_data_off(slots, 512));
	assert_int_equal((*hdr)->magic, ROSHM_REGION_MAGIC);
	return r;
}

static void wait_applied(const struct roshm_region_hdr *hdr)
{
	for (int i = 0; i < 500; i++) {
		if (__atomic_load_n(&hdr->txn_applied, __ATOMIC_ACQUIRE) ==
		    __atomic_load_n(&hdr->txn_tail, __ATOMIC_ACQUIRE))
			return;
		usleep(10000);
	}
	fail_msg("log not drained: applied %llu of %llu", (unsigned long long)hdr->txn_applied,
		 (unsigned long long)hdr->txn_tail);
}

/* ---- one node ---- */

static void test_local_api(void **state)
{
	struct roshm *owner, *u;
	struct roshm_region_hdr *hdr;
	uint32_t h, hu, hplain;
	uint8_t *d, *a, buf[64];
	uint64_t seq;

	(void)state;
	owner = make_region(1, "txn-api", &h, &d, &hdr, 8);
	u = attach(1);
	assert_non_null(u);
	assert_int_equal(roshm_region_open(u, "default/txn-api", &hu, NULL), 0);
	a = roshm_arena(u, NULL);
	memset(a, 0xAB, 64);
	struct roshm_txn_write tw = { .off = 100, .arena_off = 0, .len = 64 };

	/* more transactions than slots: the log wraps */
	for (int i = 0; i < 50; i++) {
		assert_int_equal(roshm_txn_sync(u, hu, &tw, 1, &seq), 0);
		assert_int_equal(seq, i);
	}
	wait_applied(hdr);
	assert_int_equal(roshm_region_read_consistent(owner, h, 100, buf, 64), 0);
	for (int i = 0; i < 64; i++)
		assert_int_equal(buf[i], 0xAB);
	/* too big for a slot; region without a log; out of bounds */
	tw.len = 1024;
	assert_int_equal(roshm_txn_sync(u, hu, &tw, 1, NULL), -EMSGSIZE);
	tw.len = 64;
	tw.off = DATA_SIZE - 8;
	assert_int_equal(roshm_txn_sync(u, hu, &tw, 1, NULL), -EFAULT);
	assert_int_equal(roshm_region_create(owner, "txn-plain", 4096, NULL, &hplain), 0);
	assert_int_equal(roshm_region_open(u, "default/txn-plain", &hplain, NULL), 0);
	tw.off = 0;
	assert_int_equal(roshm_txn_sync(u, hplain, &tw, 1, NULL), -EOPNOTSUPP);
	/* and plain operations still work beside transactions */
	assert_int_equal(roshm_nop_sync(u), 0);
	roshm_close(u);
	roshm_close(owner);
}

static void run_writers(struct writer *ws, int nw)
{
	pid_t pids[WRITERS];

	for (int i = 0; i < nw; i++)
		pids[i] = th_spawn_ns(ws[i].netns, writer_main, &ws[i]);
	for (int i = 0; i < nw; i++)
		assert_int_equal(th_wait(pids[i]), 0);
}

static void test_local_stream(void **state)
{
	struct roshm *owner;
	struct roshm_region_hdr *hdr;
	uint32_t h;
	uint8_t *d;
	struct writer ws[2];
	int ntx[WRITERS] = { 0 };

	(void)state;
	memset(sh, 0, sizeof(*sh));
	owner = make_region(1, "txn-local", &h, &d, &hdr, 16);
	for (int i = 0; i < 2; i++) {
		ws[i] = (struct writer){ .w = i, .node = 1, .ntx = 2000, .netns = NULL };
		snprintf(ws[i].region, sizeof(ws[i].region), "default/txn-local");
		ntx[i] = 2000;
	}
	run_writers(ws, 2);
	for (int i = 0; i < 2; i++)
		assert_int_equal(sh->done[i], 2000);
	wait_applied(hdr);
	verify(d, hdr, 2, ntx);
	roshm_close(owner);
}

/* ---- three nodes ---- */

static void test_remote_stream(void **state)
{
	struct roshm *owner;
	struct roshm_region_hdr *hdr;
	uint32_t h;
	uint8_t *d;
	struct writer ws[WRITERS];
	int ntx[WRITERS];

	(void)state;
	memset(sh, 0, sizeof(*sh));
	owner = make_region(1, "txn-remote", &h, &d, &hdr, 16);
	for (int i = 0; i < WRITERS; i++) {
		ws[i] = (struct writer){ .w = i, .node = i + 1, .ntx = 1500, .netns = nodes[i + 1].netns };
		snprintf(ws[i].region, sizeof(ws[i].region), "default/txn-remote");
		ntx[i] = 1500;
	}
	run_writers(ws, WRITERS);
	for (int i = 0; i < WRITERS; i++)
		assert_int_equal(sh->done[i], 1500);
	wait_applied(hdr);
	verify(d, hdr, WRITERS, ntx);
	assert_int_equal(hdr->txn_aborted, 0);
	roshm_close(owner);
}

/*
 * Records longer than the tcp transport's message (transport.tcp.max_msg is
 * 4096 on nodes 1 and 2): the writer's roshmd stages them in pieces under the
 * slot's sequence, and each commits whole, once. Before, the one staging
 * WRITE got -EMSGSIZE on every attempt, each commit CAS marked a slot whose
 * record never came, and roshm_txn_sync gave -ETIMEDOUT after deadline_ms.
 * A record within max_msg (the one-request commit) is the control.
 */
#define BIG_SLOT 16384
static const uint32_t big_len[] = { 3000, 6000, 12000 };

static uint8_t big_pat(uint32_t i, uint32_t k)
{
	return (uint8_t)(i * 13 + k * 7 + 1);
}

static int big_main(void *arg)
{
	const char *region = arg;
	struct roshm *r = attach(2);
	uint32_t h;
	uint8_t *a;
	int ret = -ENOENT;

	CHECK(r);
	CHECK_EQ(open_wait(r, region, &h), 0);
	a = roshm_arena(r, NULL);
	for (uint32_t k = 0; k < sizeof(big_len) / sizeof(big_len[0]); k++) {
		struct roshm_txn_write tw = { .off = (uint64_t)k * BIG_SLOT, .arena_off = 0,
					      .len = big_len[k] };

		for (uint32_t i = 0; i < big_len[k]; i++)
			a[i] = big_pat(i, k);
		ret = roshm_txn_sync(r, h, &tw, 1, NULL);
		if (ret)
			fprintf(stderr, "a record of %u bytes through tcp (max_msg 4096): %s\n",
				big_len[k], strerror(-ret));
		CHECK_EQ(ret, 0);
	}
	roshm_close(r);
	return 0;
}

/* A region of 8 slots of BIG_SLOT on node 1 (this process, its owner), @fn
 * run in node @node's namespace with the region's name, its log drained. */
static struct roshm *big_region(const char *name, int node, int (*fn)(void *), uint8_t **d,
				struct roshm_region_hdr **hdr)
{
	struct roshm_region_opts o = { .txn_slots = 8, .slot_size = BIG_SLOT };
	struct roshm *owner = attach(1);
	char full[128];
	uint32_t h;

	assert_non_null(owner);
	assert_int_equal(roshm_region_create(owner, name, DATA_SIZE, &o, &h), 0);
	*d = roshm_region_data(owner, h, NULL);
	*hdr = (struct roshm_region_hdr *)(void *)(*d - roshm_region_data_off(8, BIG_SLOT));
	snprintf(full, sizeof(full), "default/%s", name);
	assert_int_equal(th_wait(th_spawn_ns(nodes[node].netns, fn, full)), 0);
	wait_applied(*hdr);
	return owner;
}

static void test_remote_big_record(void **state)
{
	struct roshm_region_hdr *hdr;
	struct roshm *owner;
	uint8_t *d;

	(void)state;
	owner = big_region("txn-big", 2, big_main, &d, &hdr);
	for (uint32_t k = 0; k < sizeof(big_len) / sizeof(big_len[0]); k++)
		for (uint32_t i = 0; i < big_len[k]; i++)
			if (d[(uint64_t)k * BIG_SLOT + i] != big_pat(i, k))
				fail_msg("record %u (%u bytes): byte %u is 0x%02x, not 0x%02x", k,
					 big_len[k], i, d[(uint64_t)k * BIG_SLOT + i], big_pat(i, k));
	print_message("records of 3000, 6000 and 12000 bytes (max_msg 4096): applied whole, "
		      "log sequence %llu, %llu aborted\n", (unsigned long long)hdr->txn_applied,
		      (unsigned long long)hdr->txn_aborted);
	assert_int_equal(hdr->txn_applied, 3);
	assert_int_equal(hdr->txn_aborted, 0);
	roshm_close(owner);
}

/*
 * Nodes 1 and 2 run transport.tcp.max_msg 4096, node 3 8192. What node 3
 * sends node 1 beyond 4096 bytes (a WRITE, a READ) is refused alone with
 * -EMSGSIZE, and the connection carries on: the operations after it
 * succeed. Before, node 1 took such a frame for a protocol violation and
 * reset the connection, failing all that was in flight on it, again at each
 * retry. Transactions' records of 6000 bytes (refused so in one request)
 * and 12000 (staged in pieces of 8192, refused so) go again through the log
 * in pieces of 4096 (the least max_msg any node has) and commit, once each.
 */
static int mixed_main(void *arg)
{
	const char *region = arg;
	struct roshm *r = attach(3);
	struct roshm_txn_write tw = { .off = 0, .arena_off = 0, .len = 6000 };
	uint32_t h;
	uint8_t *a;

	CHECK(r);
	CHECK_EQ(open_wait(r, region, &h), 0);
	a = roshm_arena(r, NULL);
	for (uint32_t i = 0; i < 12000; i++)
		a[i] = big_pat(i, 9);
	CHECK_EQ(roshm_write_sync(r, h, 0, 0, 8192), -EMSGSIZE);
	CHECK_EQ(roshm_read_sync(r, h, 0, 16384, 8192), -EMSGSIZE);
	tw.off = 8192;
	CHECK_EQ(roshm_txn_sync(r, h, &tw, 1, NULL), 0);
	tw.off = 16384;
	tw.len = 12000;
	CHECK_EQ(roshm_txn_sync(r, h, &tw, 1, NULL), 0);
	/* the same connection, on */
	CHECK_EQ(roshm_write_sync(r, h, 0, 0, 4096), 0);
	memset(a + 16384, 0, 4096);
	CHECK_EQ(roshm_read_sync(r, h, 0, 16384, 4096), 0);
	CHECK(!memcmp(a, a + 16384, 4096));
	tw.off = 4096;
	tw.len = 3000;
	CHECK_EQ(roshm_txn_sync(r, h, &tw, 1, NULL), 0);
	roshm_close(r);
	return 0;
}

static void test_mixed_max_msg(void **state)
{
	struct roshm_region_hdr *hdr;
	struct roshm *owner;
	uint8_t *d;

	(void)state;
	owner = big_region("txn-mixed", 3, mixed_main, &d, &hdr);
	/* where each write put arena bytes 0.. (the WRITE, then the records) */
	static const uint32_t at[][2] = { { 0, 4096 }, { 4096, 3000 }, { 8192, 6000 }, { 16384, 12000 } };

	for (uint32_t k = 0; k < 4; k++)
		for (uint32_t i = 0; i < at[k][1]; i++)
			if (d[at[k][0] + i] != big_pat(i, 9))
				fail_msg("byte %u is 0x%02x after the refused operations and the ones "
					 "after them", at[k][0] + i, d[at[k][0] + i]);
	print_message("records of 6000 and 12000 bytes from a node of max_msg 8192 to one of "
		      "4096: log sequence %llu, %llu aborted\n", (unsigned long long)hdr->txn_applied,
		      (unsigned long long)hdr->txn_aborted);
	assert_int_equal(hdr->txn_applied - hdr->txn_aborted, 3);
	assert_true(hdr->txn_aborted <= 1);
	roshm_close(owner);
}

/*
 * The two-writer scenarios: the owner (this process) on node 1, writer 0 on
 * node 2 and writer 1 on node 3 streaming into @name, until writer 0 has
 * @progress acknowledged; then the scenario injects its failure.
 */
struct stream {
	struct roshm *owner;
	struct roshm_region_hdr *hdr;
	uint32_t h;
	uint8_t *d;
	struct writer ws[2];
	pid_t pids[2];
	int ntx[WRITERS];
};

static void stream_start(struct stream *x, const char *name, int ntx0, int ntx1, uint64_t progress)
{
	memset(sh, 0, sizeof(*sh));
	memset(x, 0, sizeof(*x));
	x->owner = make_region(1, name, &x->h, &x->d, &x->hdr, 16);
	x->ntx[0] = ntx0;
	x->ntx[1] = ntx1;
	for (int i = 0; i < 2; i++) {
		x->ws[i] = (struct writer){ .w = i, .node = i + 2, .ntx = x->ntx[i],
					    .netns = nodes[i + 2].netns };
		snprintf(x->ws[i].region, sizeof(x->ws[i].region), "default/%s", name);
		x->pids[i] = th_spawn_ns(x->ws[i].netns, writer_main, &x->ws[i]);
	}
	for (int i = 0; i < 500 && sh->done[0] < progress; i++)
		usleep(10000);
	if (sh->done[0] < progress)
		fail_msg("writer 0 at %llu (err %d), writer 1 at %llu (err %d)",
			 (unsigned long long)sh->done[0], sh->last_err[0],
			 (unsigned long long)sh->done[1], sh->last_err[1]);
}

static void stream_join(struct stream *x)
{
	assert_int_equal(th_wait(x->pids[0]), 0);
	assert_int_equal(th_wait(x->pids[1]), 0);
}

/* Both writers got every transaction acknowledged. */
static void stream_expect_all(const char *what)
{
	if (sh->done[0] != 1500 || sh->done[1] != 1500)
		fail_msg("writers %s: %llu (status %d), %llu (status %d)", what,
			 (unsigned long long)sh->done[0], sh->last_err[0],
			 (unsigned long long)sh->done[1], sh->last_err[1]);
}

static void test_writer_roshmd_killed(void **state)
{
	struct stream x;

	(void)state;
	stream_start(&x, "txn-kill", 3000, 1500, 300);
	th_daemon_kill(&nodes[2]); /* kill -9 writer 0's roshmd mid-stream */
	stream_join(&x);
	assert_int_not_equal(sh->last_err[0], 0); /* it was told, clearly */
	assert_int_equal(sh->done[1], 1500);      /* the other writer went on */
	wait_applied(x.hdr);                     /* holes were aborted */
	print_message("writer 0 stopped after %llu acknowledged (status %d)\n",
		      (unsigned long long)sh->done[0], sh->last_err[0]);
	verify(x.d, x.hdr, 2, x.ntx);
	roshm_close(x.owner);
}

static void test_link_cut(void **state)
{
	struct stream x;
	char *json = NULL;

	(void)state;
	stream_start(&x, "txn-cut", 1500, 1500, 200);
	/* Cut node 2 off for 2 s mid-stream: its reservations become holes
	 * that node 1 aborts, its commits then fail and it replays them. */
	assert_int_equal(th_sh("ip -n %s link set eth0 down", nodes[2].netns), 0);
	sleep(2);
	assert_int_equal(th_sh("ip -n %s link set eth0 up", nodes[2].netns), 0);
	stream_join(&x);
	stream_expect_all("stopped early");
	wait_applied(x.hdr);
	verify(x.d, x.hdr, 2, x.ntx);
	assert_int_equal(th_admin(&nodes[2], "stats", &json), 0);
	print_message("node 2 writer stats after the cut: %s\n", json);
	free(json);
	roshm_close(x.owner);
}

/* A counter of @d's `roshmctl stats`; -1 when it cannot be had. */
static long long stat_of(struct th_daemon *d, const char *name)
{
	char *json = NULL, key[64], *at;
	long long v = -1;

	snprintf(key, sizeof(key), "\"%s\":", name);
	if (!th_admin(d, "stats", &json) && json && (at = strstr(json, key)))
		v = strtoll(at + strlen(key), NULL, 10);
	free(json);
	return v;
}

/*
 * The answer to a one-round-trip commit lost with its connection. The
 * owner's roshmd (node 1) is stopped, so that node 2's next commit waits in
 * node 1's socket; node 2's link goes down; node 1 resumes, runs the commit
 * and answers into the void; node 2's connection is destroyed (ss -K) and
 * its link comes back. Node 2 sends the commit again over its next
 * connection and node 1 looks for it: found, it had run (txn_found); not
 * found, it never ran and runs now. Nothing acknowledged is lost, nothing
 * applied twice, and an attempt that had run was found.
 */
static void test_answer_lost(void **state)
{
	struct stream x;
	long long again, found, one;

	(void)state;
	stream_start(&x, "txn-lost", 1500, 1500, 200);
	for (int i = 0; i < 8; i++) {
		uint64_t before = sh->done[0];

		kill(nodes[1].pid, SIGSTOP);
		usleep(30000);
		th_sh("ip -n %s link set eth0 down", nodes[2].netns);
		kill(nodes[1].pid, SIGCONT);
		usleep(50000);
		th_sh("ip netns exec %s ss -K dst 198.18.0.1 dport = 7471 >/dev/null", nodes[2].netns);
		th_sh("ip -n %s link set eth0 up", nodes[2].netns);
		/* until writer 0 is past the commit that was cut */
		for (int k = 0; k < 300 && sh->done[0] < before + 2 && sh->done[0] < 1500; k++)
			usleep(10000);
	}
	stream_join(&x);
	stream_expect_all("stopped");
	wait_applied(x.hdr);
	verify(x.d, x.hdr, 2, x.ntx);
	again = stat_of(&nodes[2], "txn_again");
	one = stat_of(&nodes[2], "txn_one");
	found = stat_of(&nodes[1], "txn_found");
	print_message("node 2: %lld commits in one round trip, %lld sent again; node 1 found %lld "
		      "of them in its log\n", one, again, found);
	assert_true(one > 0);
	assert_true(again > 0);
	assert_true(found > 0);
	roshm_close(x.owner);
}

/* Two instances of one region (before and after a drain): every transaction
 * in exactly one of them, whole, and acknowledged ones in one for sure. */
static void verify_two(const uint8_t *d0, const struct roshm_region_hdr *h0, const uint8_t *d1,
		       const struct roshm_region_hdr *h1, int nw)
{
	uint64_t present[2] = { 0, 0 };
	const uint8_t *d[2] = { d0, d1 };

	for (int w = 0; w < nw; w++)
		for (int i = 0; i < MAXTX; i++) {
			uint64_t id = ((uint64_t)w << 32) | (uint64_t)i;
			int where = 0;

			for (int k = 0; k < 2; k++) {
				const uint64_t *p = (const uint64_t *)(const void *)(d[k] +
					((uint64_t)w * MAXTX + (uint64_t)i) * REC);
				bool first = p[0] == MAGIC && p[1] == id;
				bool second = p[2] == ~id && p[3] == (id ^ 0x5555555555555555ull);

				if (first != second)
					fail_msg("writer %d txn %d applied partially in instance %d", w, i, k);
				if (first) {
					present[k]++;
					where |= 1 << k;
				}
			}
			if (where == 3)
				fail_msg("writer %d txn %d applied in both instances", w, i);
			if (sh->acked[w][i] && !where)
				fail_msg("writer %d txn %d acknowledged but applied nowhere", w, i);
		}
	if (h0->txn_applied - h0->txn_aborted != present[0] ||
	    h1->txn_applied - h1->txn_aborted != present[1])
		fail_msg("applied %llu/%llu, present %llu/%llu: some applied twice",
			 (unsigned long long)(h0->txn_applied - h0->txn_aborted),
			 (unsigned long long)(h1->txn_applied - h1->txn_aborted),
			 (unsigned long long)present[0], (unsigned long long)present[1]);
	print_message("%llu transactions in the drained instance, %llu in the next, none twice\n",
		      (unsigned long long)present[0], (unsigned long long)present[1]);
}

static void test_drain_under_load(void **state)
{
	struct stream x;
	struct roshm_region_hdr *h1;
	uint32_t hnew;
	uint8_t *d1;
	char *json = NULL;

	(void)state;
	stream_start(&x, "txn-drain", 1500, 1500, 200);
	/* roshmctl drain --region: returns once everything committed is applied */
	assert_int_equal(th_admin(&nodes[1], "drain region default/txn-drain", &json), 0);
	assert_non_null(strstr(json, "\"drained\":1"));
	free(json);
	uint64_t at_drain = sh->done[0] + sh->done[1];

	assert_int_equal(x.hdr->txn_applied, x.hdr->txn_tail);
	/* the pod comes back: the region again, a new instance (new epoch) */
	usleep(300000);
	struct roshm_region_opts o = { .txn_slots = 16, .slot_size = 512 };

	assert_int_equal(roshm_region_create(x.owner, "txn-drain", DATA_SIZE, &o, &hnew), 0);
	d1 = roshm_region_data(x.owner, hnew, NULL);
	h1 = (struct roshm_region_hdr *)(void *)(d1 - roshm_region_data_off(16, 512));
	stream_join(&x);
	stream_expect_all("did not resume");
	wait_applied(h1);
	print_message("%llu acknowledged before the drain, all 3000 after the new epoch\n",
		      (unsigned long long)at_drain);
	verify_two(x.d, x.hdr, d1, h1, 2);
	/* the peers paused (they saw stale) rather than failing */
	assert_int_equal(th_sh("grep -q 'is draining: its work is paused' %s", nodes[2].log), 0);
	assert_int_equal(th_sh("grep -q 'resumes on node txnode1' %s", nodes[2].log), 0);
	roshm_close(x.owner);
}

static void test_owner_roshmd_restarted(void **state)
{
	struct stream x;
	uint64_t epoch;
	int st = -1;

	(void)state;
	stream_start(&x, "txn-restart", 1500, 1500, 200);
	epoch = x.hdr->epoch;
	/* kill -9 the owner's roshmd and start it again */
	th_daemon_kill(&nodes[1]);
	usleep(300000);
	assert_int_equal(th_daemon_restart(&nodes[1]), 0);
	/* the owner pod notices on its next call and re-attaches its region
	 * (same memory, new epoch); the writers' nodes follow it there */
	for (int i = 0; i < 100 && st; i++) {
		st = roshm_nop_sync(x.owner);
		if (st)
			usleep(50000);
	}
	assert_int_equal(st, 0);
	assert_int_not_equal(x.hdr->epoch, epoch);
	stream_join(&x);
	stream_expect_all("stopped");
	wait_applied(x.hdr);
	verify(x.d, x.hdr, 2, x.ntx);
	roshm_close(x.owner);
}

static void test_writer_roshmd_stopped(void **state)
{
	struct stream x;

	(void)state;
	stream_start(&x, "txn-stop", 1500, 1500, 200);
	/* stop writer 0's roshmd well past txn.abort_ms: its reservation (if
	 * any) is aborted as a hole, the other writer goes on; then resume it */
	kill(nodes[2].pid, SIGSTOP);
	uint64_t other = sh->done[1];

	usleep(1500000);
	kill(nodes[2].pid, SIGCONT);
	assert_true(sh->done[1] > other); /* not blocked by the stopped node */
	stream_join(&x);
	stream_expect_all("stopped");
	wait_applied(x.hdr);
	verify(x.d, x.hdr, 2, x.ntx);
	roshm_close(x.owner);
}

static const char *txn_conf = "txn: { abort_ms = 300; deadline_ms = 5000; };\n";

static int setup_local(void **state)
{
	(void)state;
	nnodes = 1;
	return th_daemon_start(&nodes[1], "txn1", txn_conf) ? -1 : 0;
}

static int teardown(void **state)
{
	int bad = 0;

	(void)state;
	for (int n = 1; n <= nnodes; n++)
		if (nodes[n].pid && th_daemon_stop(&nodes[n])) {
			th_daemon_dump_log(&nodes[n]);
			bad = 1;
		}
	return bad ? -1 : 0;
}

static int setup_multi(void **state)
{
	char extra[1024];

	(void)state;
	if (geteuid() != 0 || th_sh("command -v ip >/dev/null"))
		return -1;
	if (th_mkdtemp(workdir, sizeof(workdir), "txn"))
		return -1;
	th_sh("echo roshm-txn-test-secret-0123456789 > %s/secret", workdir);
	if (th_netns_up(prefix, sizeof(prefix), "tx", 3))
		return -1;
	nnodes = 3;
	for (int n = 1; n <= 3; n++) {
		char name[16], ns[80];

		snprintf(name, sizeof(name), "txnode%d", n);
		snprintf(ns, sizeof(ns), "%s-%d", prefix, n);
		snprintf(extra, sizeof(extra),
			 "%stransport: { tcp: { enabled = true; listen = \"198.18.0.%d\"; port = 7471;"
			 " secret_file = \"%s/secret\";%s }; };\n"
			 "registry: { dir = \"%s/registry\"; revalidate_ms = 200; };\n",
			 txn_conf, n, workdir, n < 3 ? " max_msg = 4096;" : " max_msg = 8192;", workdir);
		if (th_daemon_start_ns(&nodes[n], name, ns, extra))
			return -1;
	}
	return 0;
}

static int teardown_multi(void **state)
{
	int ret = teardown(state);

	/* before the next group's namespaces; the directory goes at exit */
	th_netns_down(prefix);
	return ret;
}

int main(void)
{
	const struct CMUnitTest local[] = {
		cmocka_unit_test(test_local_api),
		cmocka_unit_test(test_local_stream),
	};
	const struct CMUnitTest multi[] = {
		cmocka_unit_test(test_remote_stream),
		cmocka_unit_test(test_remote_big_record),
		cmocka_unit_test(test_mixed_max_msg),
		cmocka_unit_test(test_link_cut),
		cmocka_unit_test(test_answer_lost),
		cmocka_unit_test(test_drain_under_load),
		cmocka_unit_test(test_owner_roshmd_restarted),
		cmocka_unit_test(test_writer_roshmd_stopped),
		cmocka_unit_test(test_writer_roshmd_killed),
	};
	int fails;

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	fails = cmocka_run_group_tests_name("txn_one_node", local, setup_local, teardown);
	if (geteuid() != 0) {
		printf("txn_three_nodes: skipped: needs root for network namespaces\n");
		return fails ? 1 : 77;
	}
	fails += cmocka_run_group_tests_name("txn_three_nodes_tcp", multi, setup_multi, teardown_multi);
	return fails ? 1 : 0;
}
