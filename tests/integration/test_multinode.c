// SPDX-License-Identifier: MIT
/*
 * Three nodes in network namespaces (198.18.0.1-3, a bridge in a hub
 * namespace), one roshmd each with the tcp transport, pods as processes in
 * the namespaces. Runs with the file registry (shared directory) and with a
 * real etcd (Debian etcd-server) started in the hub namespace:
 * every opcode across nodes, FETCH_ADD from three nodes, a COMPARE_SWAP lock
 * across nodes, peers without the secret, forged keys, stale epochs,
 * out-of-bounds and malformed frames, and a node killed mid-stream.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "roshm.h"
#include "roshm/wire.h"
#include "harness.h"

#define NODES 3
#define PORT 7471
#define SECRET "roshm-test-cluster-secret-0123456789"

static char prefix[64];
static char workdir[200];
static char ns_name[NODES + 1][80];
static struct th_daemon rogue;              /* test_security's; stopped by teardown if a check fails */
static struct th_daemon nodes[NODES + 1];  /* 1..NODES */
static const char *backend;
static pid_t etcd_pid;
static char tag[16];                        /* region name suffix per configuration */

#define CHECK(cond) do { if (!(cond)) { fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); return 1; } } while (0)
#define CHECK_EQ(a, b) do { long long _a = (long long)(a), _b = (long long)(b); if (_a != _b) { fprintf(stderr, "%s:%d: %s = %lld, expected %lld\n", __FILE__, __LINE__, #a, _a, _b); return 1; } } while (0)

static struct roshm *attach_node(int n)
{
	return th_attach(nodes[n].sock);
}

static int open_retry(struct roshm *r, const char *name, uint32_t *h, uint64_t *size)
{
	int ret = -ENOENT;

	for (int i = 0; i < 300 && ret == -ENOENT; i++) {
		ret = roshm_region_open(r, name, h, size);
		if (ret == -ENOENT)
			usleep(10000);
	}
	return ret;
}

/* ---- every opcode: owner on node 1, user on node 2 ---- */

struct ops_ctx {
	struct th_chan ready, done;
	char name[64];
};

static int ops_owner(void *arg)
{
	struct ops_ctx *x = arg;
	struct roshm *r = attach_node(1);
	uint32_t h;
	uint8_t *d;

	CHECK(r);
	CHECK_EQ(roshm_region_create(r, x->name, 1 << 20, NULL, &h), 0);
	d = roshm_region_data(r, h, NULL);
	for (int i = 0; i < 4096; i++)
		d[8192 + i] = (uint8_t)(i * 3);
	th_chan_send(&x->ready, 1);
	CHECK_EQ(th_chan_recv(&x->done), 1);
	for (int i = 0; i < 1000; i++)
		CHECK_EQ(d[i], (uint8_t)(i ^ 0x5a));
	for (uint32_t i = 0; i < 512 * 1024; i += 997)
		CHECK_EQ(d[(1 << 19) + i], (uint8_t)(i * 13));
	CHECK_EQ(*(uint64_t *)(d + 16384), 10);
	CHECK_EQ(*(uint64_t *)(d + 16392), 7);
	roshm_close(r);
	return 0;
}

static int ops_user(void *arg)
{
	struct ops_ctx *x = arg;
	struct roshm *r = attach_node(2);
	struct roshm_sqe *sqe;
	struct roshm_cqe *cqe;
	char full[128];
	uint32_t h;
	uint64_t size, old;
	uint8_t *a;

	CHECK(r);
	CHECK_EQ(th_chan_recv(&x->ready), 1);
	snprintf(full, sizeof(full), "default/%s", x->name);
	CHECK_EQ(open_retry(r, full, &h, &size), 0);
	CHECK_EQ(size, 1 << 20);
	a = roshm_arena(r, NULL);
	CHECK_EQ(roshm_nop_sync(r), 0);
	for (int i = 0; i < 1000; i++)
		a[i] = (uint8_t)(i ^ 0x5a);
	CHECK_EQ(roshm_write_sync(r, h, 0, 0, 1000), 0);
	memset(a + 65536, 0, 4096);
	CHECK_EQ(roshm_read_sync(r, h, 8192, 65536, 4096), 0);
	for (int i = 0; i < 4096; i++)
		CHECK_EQ(a[65536 + i], (uint8_t)(i * 3));
	for (uint32_t i = 0; i < 512 * 1024; i++)
		a[1 << 20 | i] = (uint8_t)(i * 13);
	CHECK_EQ(roshm_write_sync(r, h, 1 << 19, 1 << 20, 512 * 1024), 0);
	/* read it back across the network too */
	CHECK_EQ(roshm_read_sync(r, h, 1 << 19, 2 << 20, 512 * 1024), 0);
	CHECK(memcmp(a + (1 << 20), a + (2 << 20), 512 * 1024) == 0);
	CHECK_EQ(roshm_fetch_add_sync(r, h, 16384, 5, &old), 0);
	CHECK_EQ(old, 0);
	CHECK_EQ(roshm_fetch_add_sync(r, h, 16384, 5, &old), 0);
	CHECK_EQ(old, 5);
	CHECK_EQ(roshm_cmp_swap_sync(r, h, 16392, 0, 7, &old), 0);
	CHECK_EQ(old, 0);
	CHECK_EQ(roshm_cmp_swap_sync(r, h, 16392, 0, 9, &old), 0);
	CHECK_EQ(old, 7);
	CHECK_EQ(roshm_write_sync(r, h, (1 << 20) - 7, 0, 8), -EFAULT);
	/* FENCE after a batch of writes completes after all of them */
	for (int i = 0; i < 8; i++) {
		sqe = roshm_get_sqe(r);
		CHECK(sqe);
		roshm_prep_write(sqe, h, 100000 + (uint64_t)i * 64, 0, 64);
		roshm_sqe_set_data(sqe, (uint64_t)i);
	}
	sqe = roshm_get_sqe(r);
	CHECK(sqe);
	roshm_prep_fence(sqe);
	roshm_sqe_set_data(sqe, 100);
	roshm_submit(r);
	for (int i = 0; i < 9; i++) {
		CHECK_EQ(roshm_wait_cqe_timeout(r, &cqe, 5000), 0);
		CHECK_EQ(cqe->status, 0);
		if (i == 8)
			CHECK_EQ(cqe->user_data, 100);
		roshm_cqe_seen(r, cqe);
	}
	th_chan_send(&x->done, 1);
	roshm_close(r);
	return 0;
}

static void test_every_opcode(void **state)
{
	struct ops_ctx x;

	(void)state;
	th_chan_init(&x.ready);
	th_chan_init(&x.done);
	snprintf(x.name, sizeof(x.name), "ops-%s", tag);
	pid_t a = th_spawn_ns(ns_name[1], ops_owner, &x), b = th_spawn_ns(ns_name[2], ops_user, &x);

	assert_int_equal(th_wait(b), 0);
	assert_int_equal(th_wait(a), 0);
}

/* ---- many WRITEs of mixed sizes in flight over one connection ---- */

/*
 * tcp sends each WRITE's payload from the arena (writev pieces that the
 * socket may take in part) and reads large payloads straight into place:
 * 96 WRITEs of sizes from 1 B to 1 MiB (11.5 MiB, more than the sockets
 * hold), up to 32 in flight, each from its own arena bytes to its own place
 * in the region, then every byte checked by the owner and read back, up to
 * 32 READs in flight.
 */
#define PW_REGION (16u << 20)
#define PW_N 96

static const uint32_t pw_sizes[] = { 1, 56, 4096, 16383, 16384, 20000, 65536, 200000, 1u << 20,
				     24, 9000, 131072 };

static uint8_t pw_byte(uint64_t off)
{
	return (uint8_t)((off * 2654435761u) >> 13 ^ off);
}

/* The region offset of WRITE @i (sizes rotate; places do not overlap). */
static void pw_place(int i, uint64_t *off, uint32_t *len)
{
	uint64_t o = 0;

	for (int k = 0; k < i; k++)
		o += pw_sizes[k % (int)(sizeof(pw_sizes) / sizeof(pw_sizes[0]))] + 8;
	*off = o;
	*len = pw_sizes[i % (int)(sizeof(pw_sizes) / sizeof(pw_sizes[0]))];
}

static int pw_owner(void *arg)
{
	struct ops_ctx *x = arg;
	struct roshm *r = attach_node(1);
	uint32_t h;
	uint8_t *d;

	CHECK(r);
	CHECK_EQ(roshm_region_create(r, x->name, PW_REGION, NULL, &h), 0);
	d = roshm_region_data(r, h, NULL);
	th_chan_send(&x->ready, 1);
	CHECK_EQ(th_chan_recv(&x->done), 1);
	for (int i = 0; i < PW_N; i++) {
		uint64_t off;
		uint32_t len;

		pw_place(i, &off, &len);
		for (uint32_t k = 0; k < len; k++)
			if (d[off + k] != pw_byte(off + k + (uint64_t)i)) {
				fprintf(stderr, "owner: WRITE %d (%u B at %llu): byte %u is %u, expected %u\n",
					i, len, (unsigned long long)off, k, d[off + k],
					pw_byte(off + k + (uint64_t)i));
				return 1;
			}
	}
	th_chan_send(&x->ready, 2);
	CHECK_EQ(th_chan_recv(&x->done), 2);
	roshm_close(r);
	return 0;
}

/* Submit @n operations (WRITE from arena slot, or READ into it), up to @depth in flight. */
static int pw_run(struct roshm *r, uint32_t h, bool wr, int first, int n, int depth)
{
	int sent = first, got = first;

	while (got < first + n) {
		struct roshm_sqe *sqe;
		struct roshm_cqe *cqe;

		while (sent < first + n && sent - got < depth && (sqe = roshm_get_sqe(r))) {
			uint64_t off;
			uint32_t len;

			pw_place(sent, &off, &len);
			/* arena slot: the region offset, plus PW_REGION for reads */
			if (wr)
				roshm_prep_write(sqe, h, off, off, len);
			else
				roshm_prep_read(sqe, h, off, PW_REGION + off, len);
			roshm_sqe_set_data(sqe, (uint64_t)sent);
			sent++;
		}
		roshm_submit(r);
		CHECK_EQ(roshm_wait_cqe_timeout(r, &cqe, 10000), 0);
		do {
			if (cqe->status)
				fprintf(stderr, "%s %llu: %d\n", wr ? "WRITE" : "READ",
					(unsigned long long)cqe->user_data, cqe->status);
			CHECK_EQ(cqe->status, 0);
			roshm_cqe_seen(r, cqe);
			got++;
		} while (roshm_peek_cqe(r, &cqe) == 0);
	}
	return 0;
}

static int pw_user(void *arg)
{
	struct ops_ctx *x = arg;
	struct roshm_params p = { .sock_path = nodes[2].sock, .arena_size = 2 * PW_REGION };
	int err;
	struct roshm *r = roshm_open(&p, &err);
	char full[128];
	uint32_t h;
	uint8_t *a;

	CHECK(r);
	CHECK_EQ(th_chan_recv(&x->ready), 1);
	snprintf(full, sizeof(full), "default/%s", x->name);
	CHECK_EQ(open_retry(r, full, &h, NULL), 0);
	a = roshm_arena(r, NULL);
	for (int k = 0; k < PW_N; k++) {
		uint64_t off;
		uint32_t len;

		pw_place(k, &off, &len);
		for (uint32_t j = 0; j < len; j++)
			a[off + j] = pw_byte(off + j + (uint64_t)k);
	}
	CHECK_EQ(pw_run(r, h, true, 0, PW_N, 32), 0);
	th_chan_send(&x->done, 1);
	CHECK_EQ(th_chan_recv(&x->ready), 2);
	/* and back, READs in flight together */
	memset(a + PW_REGION, 0, PW_REGION);
	CHECK_EQ(pw_run(r, h, false, 0, PW_N, 32), 0);
	for (int i = 0; i < PW_N; i++) {
		uint64_t off;
		uint32_t len;

		pw_place(i, &off, &len);
		CHECK(memcmp(a + PW_REGION + off, a + off, len) == 0);
	}
	th_chan_send(&x->done, 2);
	roshm_close(r);
	return 0;
}

static void test_pipelined_writes(void **state)
{
	struct ops_ctx x;

	(void)state;
	th_chan_init(&x.ready);
	th_chan_init(&x.done);
	snprintf(x.name, sizeof(x.name), "pw-%s", tag);
	pid_t a = th_spawn_ns(ns_name[1], pw_owner, &x), b = th_spawn_ns(ns_name[2], pw_user, &x);

	assert_int_equal(th_wait(b), 0);
	assert_int_equal(th_wait(a), 0);
}

/* ---- FETCH_ADD from three nodes ---- */

#define FA_N 4000
struct fa_ctx {
	int node;
	char name[64];
	uint32_t *seen;
};

static int fa_client(void *arg)
{
	struct fa_ctx *x = arg;
	struct roshm *r = attach_node(x->node);
	char full[128];
	uint32_t h;
	int sent = 0, got = 0;

	CHECK(r);
	snprintf(full, sizeof(full), "default/%s", x->name);
	CHECK_EQ(open_retry(r, full, &h, NULL), 0);
	while (got < FA_N) {
		struct roshm_sqe *sqe;
		struct roshm_cqe *cqe;

		while (sent < FA_N && sent - got < 32 && (sqe = roshm_get_sqe(r))) {
			roshm_prep_fetch_add(sqe, h, 0, 1);
			sent++;
		}
		roshm_submit(r);
		CHECK_EQ(roshm_wait_cqe_timeout(r, &cqe, 10000), 0);
		do {
			CHECK_EQ(cqe->status, 0);
			CHECK(cqe->result < NODES * FA_N);
			__atomic_fetch_add(&x->seen[cqe->result], 1, __ATOMIC_RELAXED);
			roshm_cqe_seen(r, cqe);
			got++;
		} while (roshm_peek_cqe(r, &cqe) == 0);
	}
	roshm_close(r);
	return 0;
}

static void test_fetch_add_three_nodes(void **state)
{
	struct fa_ctx x[NODES + 1];
	uint32_t *seen = mmap(NULL, NODES * FA_N * 4, PROT_READ | PROT_WRITE,
			      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct roshm *owner = attach_node(1);
	pid_t pids[NODES + 1];
	uint32_t h;
	uint64_t *d;

	(void)state;
	assert_non_null(owner);
	for (int n = 1; n <= NODES; n++) {
		x[n].node = n;
		x[n].seen = seen;
		snprintf(x[n].name, sizeof(x[n].name), "fa-%s", tag);
	}
	assert_int_equal(roshm_region_create(owner, x[1].name, 4096, NULL, &h), 0);
	d = roshm_region_data(owner, h, NULL);
	for (int n = 1; n <= NODES; n++)
		pids[n] = th_spawn_ns(ns_name[n], fa_client, &x[n]);
	for (int n = 1; n <= NODES; n++)
		assert_int_equal(th_wait(pids[n]), 0);
	assert_int_equal(d[0], NODES * FA_N);
	for (int i = 0; i < NODES * FA_N; i++)
		if (seen[i] != 1)
			fail_msg("old value %d came back %u times", i, seen[i]);
	roshm_close(owner);
	munmap(seen, NODES * FA_N * 4);
}

/* ---- COMPARE_SWAP lock across nodes ---- */

#define LOCK_N 100
struct lock_ctx {
	int node;
	uint64_t id;
	char name[64];
};

static int lock_client(void *arg)
{
	struct lock_ctx *x = arg;
	struct roshm *r = attach_node(x->node);
	char full[128];
	uint64_t old;
	uint32_t h;
	uint8_t *a;

	CHECK(r);
	a = roshm_arena(r, NULL);
	snprintf(full, sizeof(full), "default/%s", x->name);
	CHECK_EQ(open_retry(r, full, &h, NULL), 0);
	for (int i = 0; i < LOCK_N; i++) {
		do
			CHECK_EQ(roshm_cmp_swap_sync(r, h, 0, 0, x->id, &old), 0);
		while (old);
		CHECK_EQ(roshm_read_sync(r, h, 8, 0, 8), 0);
		(*(uint64_t *)a)++;
		CHECK_EQ(roshm_write_sync(r, h, 8, 0, 8), 0);
		CHECK_EQ(roshm_cmp_swap_sync(r, h, 0, x->id, 0, &old), 0);
		CHECK_EQ(old, x->id);
	}
	roshm_close(r);
	return 0;
}

static void test_cmp_swap_lock(void **state)
{
	struct lock_ctx x[NODES + 1];
	struct roshm *owner = attach_node(3);
	pid_t pids[NODES + 1];
	uint32_t h;
	uint64_t *d;

	(void)state;
	assert_non_null(owner);
	for (int n = 1; n <= NODES; n++) {
		x[n].node = n;
		x[n].id = 1000 + (uint64_t)n;
		snprintf(x[n].name, sizeof(x[n].name), "lock-%s", tag);
	}
	assert_int_equal(roshm_region_create(owner, x[1].name, 4096, NULL, &h), 0);
	d = roshm_region_data(owner, h, NULL);
	for (int n = 1; n <= NODES; n++)
		pids[n] = th_spawn_ns(ns_name[n], lock_client, &x[n]);
	for (int n = 1; n <= NODES; n++)
		assert_int_equal(th_wait(pids[n]), 0);
	assert_int_equal(d[1], NODES * LOCK_N);
	assert_int_equal(d[0], 0);
	roshm_close(owner);
}

/* ---- policy across nodes ---- */

/*
 * A region whose owner limits the others (roshm_region_opts: an RDMA MR's
 * access flags, its bytes, addresses from va_base), opened by a client of
 * the same tenant on another node (tcp) and on the owner's node (local):
 * what is not given fails and changes nothing; what is, works on exactly
 * those bytes; the owner's own handle is not limited.
 */
static int window_probe(struct roshm *r, const char *full, uint8_t *owner_data)
{
	const uint64_t va = 0x7f1234560000ull;
	uint8_t *a = roshm_arena(r, NULL);
	uint64_t old;
	uint32_t h;

	CHECK_EQ(open_retry(r, full, &h, NULL), 0);
	/* READ in the window, by address */
	CHECK_EQ(roshm_read_sync(r, h, va + 1000, 0, 100), 0);
	for (int i = 0; i < 100; i++)
		if (i < 88 || i >= 96) /* 1088: the atomics' counter */
			CHECK_EQ(a[i], (uint8_t)(1000 + i));
	/* one byte beyond it at either end, data offsets, below va_base */
	CHECK_EQ(roshm_read_sync(r, h, va + 999, 0, 2), -EFAULT);
	CHECK_EQ(roshm_read_sync(r, h, va + 1000, 0, 101), -EFAULT);
	CHECK_EQ(roshm_read_sync(r, h, 1000, 0, 8), -EFAULT);
	CHECK_EQ(roshm_read_sync(r, h, va - 4096, 0, 8), -EFAULT);
	/* no WRITE given: refused, nothing changes */
	memset(a, 0xee, 64);
	CHECK_EQ(roshm_write_sync(r, h, va + 1000, 0, 64), -EACCES);
	CHECK_EQ(roshm_write_sync(r, h, 1000, 0, 64), -EACCES);
	for (int i = 0; i < 100; i++)
		if (i < 88 || i >= 96)
			CHECK_EQ(owner_data[1000 + i], (uint8_t)(1000 + i));
	/* atomics given: in the window only */
	CHECK_EQ(roshm_fetch_add_sync(r, h, va + 1088, 1, &old), 0);
	CHECK_EQ(roshm_fetch_add_sync(r, h, va + 1096, 1, &old), -EFAULT);
	CHECK_EQ(roshm_fetch_add_sync(r, h, va + 4096, 1, &old), -EFAULT);
	CHECK_EQ(roshm_region_close(r, h), 0);
	return 0;
}

static void test_window_across_nodes(void **state)
{
	struct roshm *a = attach_node(1), *b = attach_node(2), *c = attach_node(1);
	struct roshm_region_opts lim = { .access = ROSHM_ACCESS_READ | ROSHM_ACCESS_ATOMIC,
					 .win_off = 1000, .win_len = 100,
					 .va_base = 0x7f1234560000ull };
	struct roshm_region_opts bad = lim;
	char name[64], full[128];
	uint8_t *d, *arena;
	uint64_t before;
	uint32_t h;

	(void)state;
	assert_non_null(a);
	assert_non_null(b);
	assert_non_null(c);
	snprintf(name, sizeof(name), "mr-%s", tag);
	/* limits that do not fit the region are refused */
	bad.win_len = 4000;
	bad.win_off = 200;
	assert_int_equal(roshm_region_create(a, name, 4096, &bad, &h), -EINVAL);
	bad = lim;
	bad.access = 1u << 7;
	assert_int_equal(roshm_region_create(a, name, 4096, &bad, &h), -EINVAL);
	bad = lim;
	bad.win_len = 0;
	assert_int_equal(roshm_region_create(a, name, 4096, &bad, &h), -EINVAL);
	assert_int_equal(roshm_region_create(a, name, 4096, &lim, &h), 0);
	d = roshm_region_data(a, h, NULL);
	for (int i = 0; i < 4096; i++)
		d[i] = (uint8_t)i;
	*(uint64_t *)(d + 1088) = 0;
	before = *(uint64_t *)(d + 2048);
	snprintf(full, sizeof(full), "default/%s", name);
	assert_int_equal(window_probe(b, full, d), 0); /* tcp */
	assert_int_equal(*(uint64_t *)(d + 1088), 1);
	assert_int_equal(window_probe(c, full, d), 0); /* local */
	assert_int_equal(*(uint64_t *)(d + 1088), 2);
	assert_int_equal(*(uint64_t *)(d + 2048), before);
	/* the owner's handle: data offsets, the whole area, every opcode */
	arena = roshm_arena(a, NULL);
	memset(arena, 0x77, 16);
	assert_int_equal(roshm_write_sync(a, h, 4080, 0, 16), 0);
	assert_int_equal(d[4095], 0x77);
	roshm_close(c);
	roshm_close(b);
	roshm_close(a);
}

/*
 * ROSHM_SQE_F_LBUF over tcp: node 2's client WRITEs from and READs into a
 * region of its own (no arena), small and big; a region it only opened is
 * refused as its buffer; its own region closed right after a big WRITE was
 * submitted: the WRITE completes whole, or fails (-EBADF: never started;
 * -ESTALE: cut short, the rest of its payload sent as zeros).
 */
static int lbuf_submit(struct roshm *r, uint8_t op, uint32_t h, uint64_t off, uint32_t lh,
		       uint64_t loff, uint32_t len)
{
	struct roshm_sqe *sqe = roshm_get_sqe(r);

	assert_non_null(sqe);
	if (!sqe)
		return -1;
	roshm_prep_rw(sqe, op, h, off, 0, len);
	roshm_sqe_set_lbuf(sqe, lh, loff);
	roshm_sqe_set_data(sqe, 99);
	return roshm_submit(r);
}

static int lbuf_wait(struct roshm *r)
{
	struct roshm_cqe *cqe;
	int st;

	assert_int_equal(roshm_wait_cqe(r, &cqe), 0);
	assert_int_equal(cqe->user_data, 99);
	st = cqe->status;
	roshm_cqe_seen(r, cqe);
	return st;
}

static void test_lbuf_across_nodes(void **state)
{
	struct roshm *a = attach_node(1), *b = attach_node(2);
	const uint32_t size = 1u << 20, big = 600000;
	char name[64], full[128];
	uint32_t ht, hbt, hl;
	uint8_t *t, *l, *ref;
	int st;

	(void)state;
	assert_non_null(a);
	assert_non_null(b);
	snprintf(name, sizeof(name), "lbuf-%s", tag);
	assert_int_equal(roshm_region_create(a, name, size, NULL, &ht), 0);
	snprintf(full, sizeof(full), "default/%s", name);
	assert_int_equal(open_retry(b, full, &hbt, NULL), 0);
	snprintf(name, sizeof(name), "lbuf-own-%s", tag);
	assert_int_equal(roshm_region_create(b, name, size, NULL, &hl), 0);
	t = roshm_region_data(a, ht, NULL);
	l = roshm_region_data(b, hl, NULL);
	ref = malloc(size);
	assert_non_null(ref);
	for (uint32_t i = 0; i < size; i++)
		l[i] = (uint8_t)(i * 29 + 11);
	assert_int_equal(lbuf_submit(b, ROSHM_OP_WRITE, hbt, 33, hl, 4000, 5000), 1);
	assert_int_equal(lbuf_wait(b), 0);
	assert_memory_equal(t + 33, l + 4000, 5000);
	assert_int_equal(lbuf_submit(b, ROSHM_OP_WRITE, hbt, 100000, hl, 1, big), 1);
	assert_int_equal(lbuf_wait(b), 0);
	assert_memory_equal(t + 100000, l + 1, big);
	for (uint32_t i = 0; i < size; i++)
		t[i] = (uint8_t)(i * 3 + 7);
	assert_int_equal(lbuf_submit(b, ROSHM_OP_READ, hbt, 5, hl, 300, 4096), 1);
	assert_int_equal(lbuf_wait(b), 0);
	assert_memory_equal(l + 300, t + 5, 4096);
	assert_int_equal(lbuf_submit(b, ROSHM_OP_READ, hbt, 1000, hl, 200000, big), 1);
	assert_int_equal(lbuf_wait(b), 0);
	assert_memory_equal(l + 200000, t + 1000, big);
	/* the opened region is not b's buffer: a's bytes neither leave nor change */
	memcpy(ref, t, size);
	assert_int_equal(lbuf_submit(b, ROSHM_OP_READ, hl, 0, hbt, 0, 4096), 1);
	assert_int_equal(lbuf_wait(b), -EACCES);
	assert_int_equal(lbuf_submit(b, ROSHM_OP_WRITE, hbt, 0, hbt, 8192, 4096), 1);
	assert_int_equal(lbuf_wait(b), -EACCES);
	assert_memory_equal(t, ref, size);
	/* its region closed while the big WRITE from it may be in flight */
	memcpy(ref + 300000, l + 50000, big);
	memset(t + 300000, 0, big);
	assert_int_equal(lbuf_submit(b, ROSHM_OP_WRITE, hbt, 300000, hl, 50000, big), 1);
	assert_int_equal(roshm_region_close(b, hl), 0);
	st = lbuf_wait(b);
	if (st == 0) {
		assert_memory_equal(t + 300000, ref + 300000, big);
	} else {
		/* never started (-EBADF), or cut short (-ESTALE): what landed
		 * is what its region held, then zeros for the rest */
		uint32_t i = 0;

		assert_true(st == -EBADF || st == -ESTALE);
		while (i < big && t[300000 + i] == ref[300000 + i])
			i++;
		for (; i < big; i++)
			assert_int_equal(t[300000 + i], 0);
	}
	free(ref);
	roshm_close(b);
	roshm_close(a);
	assert_true(th_daemon_alive(&nodes[1]) && th_daemon_alive(&nodes[2]));
}

static void test_policy_across_nodes(void **state)
{
	struct roshm *a = attach_node(1), *b = attach_node(2);
	struct roshm_region_opts own = { .policy = ROSHM_POLICY_OWNER };
	char name[64], full[128];
	uint32_t h, hb;

	(void)state;
	assert_non_null(a);
	assert_non_null(b);
	snprintf(name, sizeof(name), "own-%s", tag);
	assert_int_equal(roshm_region_create(a, name, 4096, &own, &h), 0);
	snprintf(full, sizeof(full), "default/%s", name);
	/* (etcd: node 2 learns of the record through its watch, a moment later) */
	assert_int_equal(open_retry(b, full, &hb, NULL), -EACCES);
	/* closing a region: remote users see ESTALE after revalidation */
	snprintf(name, sizeof(name), "gone-%s", tag);
	assert_int_equal(roshm_region_create(a, name, 4096, NULL, &h), 0);
	snprintf(full, sizeof(full), "default/%s", name);
	assert_int_equal(open_retry(b, full, &hb, NULL), 0);
	assert_int_equal(roshm_write_sync(b, hb, 0, 0, 8), 0);
	assert_int_equal(roshm_region_close(a, h), 0);
	/* the owner's node answers ESTALE at once for the unexported region */
	assert_int_equal(roshm_write_sync(b, hb, 0, 0, 8), -ESTALE);
	roshm_close(b);
	roshm_close(a);
}

/*
 * ROSHM_POLICY_GRANT across nodes: the opener's roshmd checks that its
 * client owns the region the owner granted to (its node, name, memory).
 * A grant is seen at once by an open that follows it (a refused open reads
 * the record past the cache); a revoke, by new opens once the record got
 * there (etcd: the watch).
 */
static void test_grant_across_nodes(void **state)
{
	struct roshm *a = attach_node(1), *b = attach_node(2), *b2 = attach_node(2),
		     *c = attach_node(3);
	struct roshm_region_opts grant = { .policy = ROSHM_POLICY_GRANT };
	char mem[64], ring[64], full[128];
	uint32_t hm, hr, hring, hx, hc;
	uint64_t word = 0x0102030405060708ull, got = 0;
	int ret = 0;

	(void)state;
	assert_non_null(a);
	assert_non_null(b);
	assert_non_null(b2);
	assert_non_null(c);
	snprintf(mem, sizeof(mem), "gmem-%s", tag);
	snprintf(ring, sizeof(ring), "gring-%s", tag);
	assert_int_equal(roshm_region_create(a, mem, 4096, &grant, &hm), 0);
	assert_int_equal(roshm_region_create(b, ring, 4096, NULL, &hr), 0);
	snprintf(full, sizeof(full), "default/%s", mem);
	assert_int_equal(open_retry(b, full, &hx, NULL), -EACCES);
	snprintf(full, sizeof(full), "default/%s", ring);
	assert_int_equal(open_retry(a, full, &hring, NULL), 0);
	assert_int_equal(roshm_region_grant(a, hm, hring), 0);
	/* at once, though node 2 may have had the record without the grant */
	snprintf(full, sizeof(full), "default/%s", mem);
	assert_int_equal(roshm_region_open(b, full, &hx, NULL), 0);
	memcpy(roshm_arena(b, NULL), &word, 8);
	assert_int_equal(roshm_write_sync(b, hx, 128, 0, 8), 0);
	memcpy(&got, (uint8_t *)roshm_region_data(a, hm, NULL) + 128, 8);
	assert_true(got == word);
	/* another client of node 2, and one of node 3, own no granted region */
	assert_int_equal(roshm_region_open(b2, full, &hx, NULL), -EACCES);
	assert_int_equal(open_retry(c, full, &hc, NULL), -EACCES);
	/* node 3 cannot make a region of its own under the granted name */
	assert_int_equal(roshm_region_create(c, ring, 4096, NULL, &hc), -EEXIST);
	/* a part, across nodes: node 2's roshmd opens only what the record's
	 * grant covers, and bounds every operation by it */
	{
		const struct roshm_part part = { .off = 256, .len = 64, .access = ROSHM_ACCESS_READ };
		const struct roshm_part p0 = { .off = 0, .len = 64, .access = ROSHM_ACCESS_READ };
		const struct roshm_part wide = { .off = 256, .len = 65, .access = ROSHM_ACCESS_READ };
		uint32_t hp, hp0, hq;

		assert_int_equal(roshm_region_grant_part(a, hm, ring, &part), 0);
		assert_int_equal(roshm_region_grant_part(a, hm, ring, &p0), 0);
		assert_int_equal(roshm_region_open_part(b, full, &wide, &hp, NULL), 0);
		roshm_region_close(b, hp);   /* the whole grant still stands */
		assert_int_equal(roshm_region_revoke(a, hm, hring), 0);   /* the whole one goes */
		for (int i = 0; i < 500; i++) {
			ret = roshm_region_open_part(b, full, &wide, &hp, NULL);
			if (ret != 0)
				break;
			roshm_region_close(b, hp);
			usleep(10000);
		}
		assert_int_equal(ret, -EACCES);
		assert_int_equal(roshm_region_open_part(b, full,
							&(struct roshm_part){ 256, 64,
									      ROSHM_ACCESS_WRITE },
							&hp, NULL), -EACCES);
		assert_int_equal(roshm_region_open_part(b, full, &part, &hp, NULL), 0);
		assert_int_equal(roshm_region_open_part(b, full, &p0, &hp0, NULL), 0);
		memcpy((uint8_t *)roshm_region_data(a, hm, NULL) + 256, &word, 8);
		assert_int_equal(roshm_read_sync(b, hp, 256, 8, 8), 0);
		assert_memory_equal((uint8_t *)roshm_arena(b, NULL) + 8, &word, 8);
		assert_int_equal(roshm_read_sync(b, hp, 316, 0, 8), -EFAULT);
		assert_int_equal(roshm_write_sync(b, hp, 256, 0, 8), -EACCES);
		assert_int_equal(roshm_region_revoke_part(a, hm, ring, &part), 0);
		/* node 1 refuses node 2 at once (-EACCES), before node 2 reads
		 * the record and closes the handle (-EBADF) */
		ret = roshm_read_sync(b, hp, 256, 0, 8);
		assert_true(ret == -EACCES || ret == -EBADF);
		for (int i = 0; i < 1000 && ret == -EACCES; i++) {
			usleep(10000);
			ret = roshm_read_sync(b, hp, 256, 0, 8);
		}
		assert_int_equal(ret, -EBADF);
		/* granted, opened and taken back between two looks of node 2 at
		 * the record (which then finds the list it had before): the
		 * handle is closed all the same */
		assert_int_equal(roshm_region_grant_part(a, hm, ring, &part), 0);
		assert_int_equal(roshm_region_open_part(b, full, &part, &hq, NULL), 0);
		assert_int_equal(roshm_region_revoke_part(a, hm, ring, &part), 0);
		ret = roshm_read_sync(b, hq, 256, 0, 8);
		assert_true(ret == -EACCES || ret == -EBADF);
		for (int i = 0; i < 1000 && ret == -EACCES; i++) {
			usleep(10000);
			ret = roshm_read_sync(b, hq, 256, 0, 8);
		}
		assert_int_equal(ret, -EBADF);
		assert_int_equal(roshm_read_sync(b, hp0, 0, 0, 8), 0);   /* the other part stays */
		assert_int_equal(roshm_region_revoke_part(a, hm, ring, &p0), 0);
		roshm_region_close(b, hp);
		roshm_region_close(b, hq);
		roshm_region_close(b, hp0);
		assert_int_equal(roshm_region_grant(a, hm, hring), 0);
	}
	/* revoked: new opens are refused once node 2 has the record, and the
	 * handle b holds is closed at node 2's next look at it */
	assert_int_equal(roshm_region_revoke(a, hm, hring), 0);
	for (int i = 0; i < 500; i++) {
		uint32_t h2;

		ret = roshm_region_open(b, full, &h2, NULL);
		if (ret != 0)
			break;
		roshm_region_close(b, h2);
		usleep(10000);
	}
	assert_int_equal(ret, -EACCES);
	for (int i = 0; i < 1000; i++) {
		ret = roshm_write_sync(b, hx, 128, 0, 8);
		if (ret != 0 && ret != -EACCES)   /* node 1's refusal, until node 2 closes it */
			break;
		assert_int_equal(ret, -EACCES);   /* never written after the revoke */
		usleep(10000);
	}
	assert_int_equal(ret, -EBADF);
	roshm_close(c);
	roshm_close(b2);
	roshm_close(b);
	roshm_close(a);
}

/* ---- security: peers without the secret, forged keys, stale epochs ---- */

static void mac(const char *secret, const char *label, const uint8_t *n1, const uint8_t *n2,
		const char *node1, const char *node2, uint8_t *out)
{
	uint8_t msg[16 + 2 * ROSHM_TCP_NONCE + 2 * ROSHM_NAME_MAX];
	unsigned int len;

	memset(msg, 0, sizeof(msg));
	memcpy(msg, label, strlen(label));
	memcpy(msg + 16, n1, ROSHM_TCP_NONCE);
	memcpy(msg + 16 + ROSHM_TCP_NONCE, n2, ROSHM_TCP_NONCE);
	memcpy(msg + 16 + 2 * ROSHM_TCP_NONCE, node1, strnlen(node1, ROSHM_NAME_MAX - 1));
	memcpy(msg + 16 + 2 * ROSHM_TCP_NONCE + ROSHM_NAME_MAX, node2, strnlen(node2, ROSHM_NAME_MAX - 1));
	HMAC(EVP_sha256(), secret, (int)strlen(secret), msg, sizeof(msg), out, &len);
}

static int read_full(int fd, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		struct pollfd p = { .fd = fd, .events = POLLIN };

		if (poll(&p, 1, 5000) != 1)
			return -1;
		ssize_t n = read(fd, (char *)buf + got, len - got);

		if (n <= 0)
			return (int)n;
		got += (size_t)n;
	}
	return 1;
}

/* A hand-made peer: handshake with @secret; returns the fd or -1. */
static int raw_peer(const char *secret)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(PORT) };
	struct roshm_tcp_hello1 h1 = { .magic = ROSHM_TCP_MAGIC, .version = ROSHM_TCP_VERSION };
	struct roshm_tcp_hello2 h2;
	struct roshm_tcp_hello3 h3 = { .magic = ROSHM_TCP_MAGIC, .version = ROSHM_TCP_VERSION };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	inet_pton(AF_INET, "198.18.0.1", &sa.sin_addr);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -1;
	if (getrandom(h1.nonce, sizeof(h1.nonce), 0) != sizeof(h1.nonce))
		return -1;
	/* A peer with the cluster secret, on node 3's address, as node 3: the
	 * only way in (node 1 gives an inbound slot to a node with a record,
	 * from the record's address). It replaces node 3's own connection. */
	strcpy(h1.node, "node3");
	if (write(fd, &h1, sizeof(h1)) != sizeof(h1) || read_full(fd, &h2, sizeof(h2)) != 1)
		return -1;
	mac(secret, "roshm-req", h2.nonce, h1.nonce, h2.node, h1.node, h3.mac);
	if (write(fd, &h3, sizeof(h3)) != sizeof(h3))
		return -1;
	return fd;
}

static bool closed_by_peer(int fd)
{
	char b[64];
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 5000) == 1 && read(fd, b, sizeof(b)) <= 0;
}

struct sec_ctx {
	char name[64];
	uint32_t id, key;
	uint64_t epoch;
	int result;
};

static int send_req(int fd, uint8_t op, uint32_t id, uint32_t key, uint64_t epoch, uint64_t off,
		    uint32_t len, const void *payload, struct roshm_tcp_resp *resp)
{
	struct roshm_tcp_req q = { .opcode = op, .len = len, .region_id = id, .key = key,
				   .epoch = epoch, .off = off, .tag = 42 };

	if (write(fd, &q, sizeof(q)) != sizeof(q))
		return -1;
	if (payload && write(fd, payload, len) != (ssize_t)len)
		return -1;
	return read_full(fd, resp, sizeof(*resp)) == 1 ? 0 : -1;
}

static int security_probe(void *arg)
{
	struct sec_ctx *x = arg;
	struct roshm_tcp_resp r;
	uint8_t junk[64];
	int fd;

	memset(junk, 0xEE, sizeof(junk));
	/* wrong secret: the responder hangs up after our hello3 */
	fd = raw_peer("not-the-cluster-secret-at-all!!");
	CHECK(fd >= 0);
	CHECK(closed_by_peer(fd));
	close(fd);
	/* the right secret, then forged requests */
	fd = raw_peer(SECRET);
	CHECK(fd >= 0);
	CHECK_EQ(send_req(fd, ROSHM_OP_WRITE, x->id, x->key ^ 1, x->epoch, 0, 64, junk, &r), 0);
	CHECK_EQ(r.status, -EACCES);                      /* forged key */
	CHECK_EQ(send_req(fd, ROSHM_OP_WRITE, x->id, x->key, x->epoch + 1, 0, 64, junk, &r), 0);
	CHECK_EQ(r.status, -ESTALE);                      /* stale epoch */
	CHECK_EQ(send_req(fd, ROSHM_OP_WRITE, x->id, x->key, x->epoch, 4090, 64, junk, &r), 0);
	CHECK_EQ(r.status, -EFAULT);                      /* out of bounds */
	CHECK_EQ(send_req(fd, ROSHM_OP_WRITE, x->id + 1000, x->key, x->epoch, 0, 64, junk, &r), 0);
	CHECK_EQ(r.status, -ESTALE);                      /* no such region */
	CHECK_EQ(send_req(fd, ROSHM_OP_FETCH_ADD, x->id, x->key ^ 7, x->epoch, 0, 8, NULL, &r), 0);
	CHECK_EQ(r.status, -EACCES);
	CHECK_EQ(send_req(fd, ROSHM_OP_READ, x->id, x->key, x->epoch, 0, 64, NULL, &r), 0);
	CHECK_EQ(r.status, 0);                            /* the real key works */
	CHECK(read_full(fd, junk, 64) == 1);
	/* malformed frame: unknown opcode -> disconnected */
	struct roshm_tcp_req q = { .opcode = 99, .len = 8, .region_id = x->id, .key = x->key,
				   .epoch = x->epoch };

	CHECK(write(fd, &q, sizeof(q)) == sizeof(q));
	CHECK(closed_by_peer(fd));
	close(fd);
	/* longer than the node's transport.tcp.max_msg (1 MiB), as from a node
	 * configured with more: refused alone (-EMSGSIZE, a WRITE's payload
	 * dropped), and the connection goes on */
	uint8_t before[64], after[64], *big = malloc((1u << 20) + 1);

	CHECK(big);
	memset(big, 0xEE, (1u << 20) + 1);
	fd = raw_peer(SECRET);
	CHECK(fd >= 0);
	CHECK_EQ(send_req(fd, ROSHM_OP_READ, x->id, x->key, x->epoch, 0, 64, NULL, &r), 0);
	CHECK_EQ(r.status, 0);
	CHECK(read_full(fd, before, 64) == 1);
	CHECK_EQ(send_req(fd, ROSHM_OP_READ, x->id, x->key, x->epoch, 0, 512u << 20, NULL, &r), 0);
	CHECK_EQ(r.status, -EMSGSIZE);
	CHECK_EQ(r.len, 0);
	CHECK_EQ(send_req(fd, ROSHM_OP_WRITE, x->id, x->key, x->epoch, 0, (1u << 20) + 1, big, &r), 0);
	CHECK_EQ(r.status, -EMSGSIZE);
	CHECK_EQ(send_req(fd, ROSHM_OP_READ, x->id, x->key, x->epoch, 0, 64, NULL, &r), 0);
	CHECK_EQ(r.status, 0);
	CHECK(read_full(fd, after, 64) == 1);
	CHECK(!memcmp(before, after, 64));   /* none of the refused WRITE landed */
	free(big);
	close(fd);
	return 0;
}

/* A TXN_COMMIT of one 8-byte write of 0x77 at data offset @off: its status. */
static int txn_commit(int fd, const struct sec_ctx *x, uint64_t off, uint64_t txn_id)
{
	struct {
		uint64_t seq, txn_id;
		uint32_t nseg, payload_len, crc, rsvd;
		struct roshm_txn_seg seg;
		uint8_t data[8];
	} __attribute__((packed)) rec = { 0, txn_id, 1, 8, 0, 0, { off, 8, 0 },
					   { 0x77, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77 } };
	struct roshm_tcp_req q = { .opcode = ROSHM_OP_TXN_COMMIT, .len = sizeof(rec),
				   .region_id = x->id, .key = x->key, .epoch = x->epoch,
				   .operand1 = txn_id, .tag = 7 };
	struct roshm_tcp_resp r;

	if (write(fd, &q, sizeof(q)) != sizeof(q) || write(fd, &rec, sizeof(rec)) != sizeof(rec) ||
	    read_full(fd, &r, sizeof(r)) != 1)
		return 1;
	return r.status;
}

static int raw_req(int fd, uint8_t op, uint8_t flags, const struct sec_ctx *x, uint64_t off,
		   uint32_t len, uint64_t op1, uint64_t op2, const void *payload,
		   struct roshm_tcp_resp *resp)
{
	struct roshm_tcp_req q = { .opcode = op, .flags = flags, .len = len, .region_id = x->id,
				   .key = x->key, .epoch = x->epoch, .off = off, .operand1 = op1,
				   .operand2 = op2, .tag = 9 };

	if (write(fd, &q, sizeof(q)) != sizeof(q))
		return -1;
	if (payload && write(fd, payload, len) != (ssize_t)len)
		return -1;
	return read_full(fd, resp, sizeof(*resp)) == 1 ? 0 : -1;
}

/*
 * The raw way of a transaction (as the verbs transport's writer does it):
 * reserve a sequence on txn_tail, stage a record of one write of 0x77 at
 * data offset @off in its slot, and commit it with a FETCH_ADD of 1 on the
 * slot's state word (EMPTY + 1 = COMMITTED). The commit's status; a refused
 * one is then given up on (CAS to ABORTED, which a node may always do).
 */
static int raw_txn(int fd, const struct sec_ctx *x, uint64_t off)
{
	struct {
		uint64_t seq, txn_id;
		uint32_t nseg, payload_len, crc, rsvd;
		struct roshm_txn_seg seg;
		uint8_t data[8];
	} __attribute__((packed)) rec = { 0, 0x7a20, 1, 8, 0, 0, { off, 8, 0 },
					   { 0x77, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77 } };
	struct roshm_tcp_resp r;
	uint64_t seq, slot;

	if (raw_req(fd, ROSHM_OP_FETCH_ADD, ROSHM_TCP_F_RAW, x,
		    offsetof(struct roshm_region_hdr, txn_tail), 8, 1, 0, NULL, &r) || r.status)
		return 100;
	seq = r.result;
	slot = ROSHM_REGION_HDR_SIZE + (seq % 8) * 128;
	rec.seq = seq;
	if (raw_req(fd, ROSHM_OP_WRITE, ROSHM_TCP_F_RAW | ROSHM_TCP_F_SEQ, x,
		    slot + ROSHM_TXN_STAGE_OFF, sizeof(rec), seq, 0, &rec, &r) || r.status)
		return 101;
	if (raw_req(fd, ROSHM_OP_FETCH_ADD, ROSHM_TCP_F_RAW, x, slot, 8, 1, 0, NULL, &r))
		return 102;
	if (r.status) {
		struct roshm_tcp_resp a;

		if (raw_req(fd, ROSHM_OP_CMP_SWAP, ROSHM_TCP_F_RAW, x, slot, 8,
			    ROSHM_TXN_STATE(seq, ROSHM_TXN_EMPTY),
			    ROSHM_TXN_STATE(seq, ROSHM_TXN_ABORTED), NULL, &a) || a.status ||
		    a.result != ROSHM_TXN_STATE(seq, ROSHM_TXN_EMPTY))
			return 103;
	}
	return r.status;
}

/*
 * ROSHM_POLICY_GRANT at the owner's node: a peer node with the cluster
 * secret and the region's key (from the record) reaches only what a grant
 * to a grantee on that node allows, as the grants are now (x->result: the
 * phase), transactions' writes too. We are node 3 here.
 */
static int grant_probe(void *arg)
{
	struct sec_ctx *x = arg;
	struct roshm_tcp_resp r;
	uint8_t buf[64];
	int fd = raw_peer(SECRET);

	CHECK(fd >= 0);
	memset(buf, 0x33, sizeof(buf));
	switch (x->result) {
	case 0: /* granted to a region of node 2 only */
	case 2: /* node 3's grant taken back a moment ago */
		CHECK_EQ(send_req(fd, ROSHM_OP_WRITE, x->id, x->key, x->epoch, 0, 64, buf, &r), 0);
		CHECK_EQ(r.status, -EACCES);
		CHECK_EQ(send_req(fd, ROSHM_OP_READ, x->id, x->key, x->epoch, 0, 64, NULL, &r), 0);
		CHECK_EQ(r.status, -EACCES);
		CHECK_EQ(txn_commit(fd, x, 16, 0x7a11), -EACCES);
		break;
	case 3: /* what node 3 gets now, as the exit status: 0 refused, 10 written */
		CHECK_EQ(send_req(fd, ROSHM_OP_WRITE, x->id, x->key, x->epoch, 0, 64, buf, &r), 0);
		close(fd);
		return r.status == -EACCES ? 0 : r.status == 0 ? 10 : 20;
	case 1: { /* node 3 holds a WRITE grant of [0, 64) */
		/* the log is new: slot 3 waits for sequence 3, which node 3
		 * did not reserve: it neither stages nor gives it up there,
		 * and reads only its state and history */
		const uint64_t s3 = ROSHM_REGION_HDR_SIZE + 3 * 128;
		uint64_t w;

		CHECK_EQ(raw_req(fd, ROSHM_OP_READ, ROSHM_TCP_F_RAW, x, s3, 8, 0, 0, NULL, &r), 0);
		CHECK_EQ(r.status, 0);
		CHECK(read_full(fd, &w, 8) == 1);
		CHECK_EQ(w, ROSHM_TXN_STATE(3, ROSHM_TXN_EMPTY));
		CHECK_EQ(raw_req(fd, ROSHM_OP_WRITE, ROSHM_TCP_F_RAW | ROSHM_TCP_F_SEQ, x,
				 s3 + ROSHM_TXN_STAGE_OFF, 8, 3, 0, buf, &r), 0);
		CHECK_EQ(r.status, -EACCES);
		CHECK_EQ(raw_req(fd, ROSHM_OP_CMP_SWAP, ROSHM_TCP_F_RAW, x, s3, 8,
				 ROSHM_TXN_STATE(3, ROSHM_TXN_EMPTY), ROSHM_TXN_STATE(3, ROSHM_TXN_ABORTED),
				 NULL, &r), 0);
		CHECK_EQ(r.status, -EACCES);
		CHECK_EQ(raw_req(fd, ROSHM_OP_READ, ROSHM_TCP_F_RAW, x, s3, 64, 0, 0, NULL, &r), 0);
		CHECK_EQ(r.status, -EACCES);                  /* the staged part is others' */
		CHECK_EQ(send_req(fd, ROSHM_OP_WRITE, x->id, x->key, x->epoch, 0, 64, buf, &r), 0);
		CHECK_EQ(r.status, 0);
		memset(buf, 0x44, sizeof(buf));
		CHECK_EQ(send_req(fd, ROSHM_OP_WRITE, x->id, x->key, x->epoch, 32, 64, buf, &r), 0);
		CHECK_EQ(r.status, -EACCES);                  /* past the part */
		CHECK_EQ(send_req(fd, ROSHM_OP_READ, x->id, x->key, x->epoch, 0, 64, NULL, &r), 0);
		CHECK_EQ(r.status, -EACCES);                  /* not an operation it allows */
		CHECK_EQ(send_req(fd, ROSHM_OP_FETCH_ADD, x->id, x->key, x->epoch, 0, 8, NULL, &r), 0);
		CHECK_EQ(r.status, -EACCES);
		/* a transaction writes only inside the part as well */
		CHECK_EQ(txn_commit(fd, x, 2048, 0x7a01), -EACCES);
		CHECK_EQ(txn_commit(fd, x, 60, 0x7a02), -EACCES);   /* across its end */
		CHECK_EQ(txn_commit(fd, x, 16, 0x7a03), 0);
		CHECK_EQ(raw_txn(fd, x, 2048), -EACCES);
		break;
	}
	}
	close(fd);
	return 0;
}

static int read_record(const char *name, struct sec_ctx *x)
{
	char path[512];
	json_t *o;
	json_error_t e;

	snprintf(path, sizeof(path), "%s/registry/regions/default/%s.json", workdir, name);
	o = json_load_file(path, 0, &e);
	if (!o)
		return -1;
	x->id = (uint32_t)json_integer_value(json_object_get(o, "region_id"));
	x->key = (uint32_t)json_integer_value(json_object_get(o, "key"));
	x->epoch = strtoull(json_string_value(json_object_get(o, "epoch")), NULL, 10);
	json_decref(o);
	return 0;
}

static void test_security(void **state)
{
	struct roshm *a = attach_node(1);
	struct sec_ctx x;
	char extra[1024], secret2[300];
	uint32_t h;
	uint8_t *d;

	(void)state;
	if (strcmp(backend, "file")) {
		/* The checks are the transport's; one registry is enough to reach them. */
		print_message("security probes run with the file registry only\n");
		roshm_close(a);
		return;
	}
	assert_non_null(a);
	snprintf(x.name, sizeof(x.name), "sec-%s", tag);
	assert_int_equal(roshm_region_create(a, x.name, 4096, NULL, &h), 0);
	d = roshm_region_data(a, h, NULL);
	memset(d, 0x11, 4096);
	assert_int_equal(read_record(x.name, &x), 0);
	pid_t p = th_spawn_ns(ns_name[3], security_probe, &x);

	assert_int_equal(th_wait(p), 0);
	for (int i = 0; i < 4096; i++)
		if (d[i] != 0x11)
			fail_msg("byte %d changed to %#x by an unauthorized peer", i, d[i]);

	/* A whole roshmd with another cluster secret cannot open our region:
	 * it does not even believe the region's record (its MAC is not one of
	 * its secret's), so the region does not exist for it. */
	snprintf(secret2, sizeof(secret2), "%s/other.secret", workdir);
	th_sh("echo wrong-secret-wrong-secret-wrong > %s", secret2);
	snprintf(extra, sizeof(extra),
		 "transport: { tcp: { enabled = true; listen = \"198.18.0.3\"; port = 7472;"
		 " secret_file = \"%s\"; }; };\n"
		 "registry: { dir = \"%s/registry\"; };\n", secret2, workdir);
	struct roshm_params rp = { 0 };
	int err;
	char full[128];

	snprintf(full, sizeof(full), "default/%s", x.name);
	assert_int_equal(th_daemon_start_ns(&rogue, "rogue", ns_name[3], extra), 0);
	rp.sock_path = rogue.sock;
	struct roshm *r = roshm_open(&rp, &err);

	assert_non_null(r);
	assert_int_equal(roshm_region_open(r, full, &h, NULL), -ENOENT);
	roshm_close(r);
	assert_int_equal(th_daemon_stop(&rogue), 0);
	/* One that can read the registry but lacks the transport's secret is
	 * refused by the owner's node when it connects. */
	snprintf(extra, sizeof(extra),
		 "transport: { tcp: { enabled = true; listen = \"198.18.0.3\"; port = 7472;"
		 " secret_file = \"%s\"; }; };\n"
		 "registry: { dir = \"%s/registry\"; secret_file = \"%s/cluster.secret\"; };\n",
		 secret2, workdir, workdir);
	assert_int_equal(th_daemon_start_ns(&rogue, "rogue", ns_name[3], extra), 0);
	rp.sock_path = rogue.sock;
	r = roshm_open(&rp, &err);
	assert_non_null(r);
	assert_int_equal(roshm_region_open(r, full, &h, NULL), -EACCES);
	roshm_close(r);
	assert_int_equal(th_daemon_stop(&rogue), 0);
	for (int i = 0; i < 4096; i++)
		assert_int_equal(d[i], 0x11);

	/* A region only its grants open: node 1 holds node 3's requests to
	 * node 3's grants, as they stand when each request arrives. */
	{
		struct roshm *b = attach_node(2), *c = attach_node(3);
		struct roshm_region_opts grant = { .policy = ROSHM_POLICY_GRANT, .txn_slots = 8,
						   .slot_size = 128 };
		const struct roshm_part part = { .off = 0, .len = 64, .access = ROSHM_ACCESS_WRITE };
		char ring2[64], ring3[64];
		uint32_t hg, h2, h3;

		assert_non_null(b);
		assert_non_null(c);
		snprintf(x.name, sizeof(x.name), "gsec-%s", tag);
		snprintf(ring2, sizeof(ring2), "gsec2-%s", tag);
		snprintf(ring3, sizeof(ring3), "gsec3-%s", tag);
		assert_int_equal(roshm_region_create(a, x.name, 4096, &grant, &hg), 0);
		d = roshm_region_data(a, hg, NULL);
		memset(d, 0x22, 4096);
		assert_int_equal(roshm_region_create(b, ring2, 4096, NULL, &h2), 0);
		assert_int_equal(roshm_region_create(c, ring3, 4096, NULL, &h3), 0);
		assert_int_equal(roshm_region_grant_part(a, hg, ring2,
							 &(struct roshm_part){ 0, 4096, ROSHM_ACCESS_ALL }),
				 0);
		assert_int_equal(read_record(x.name, &x), 0);
		x.result = 0;
		assert_int_equal(th_wait(th_spawn_ns(ns_name[3], grant_probe, &x)), 0);
		assert_int_equal(roshm_region_grant_part(a, hg, ring3, &part), 0);
		x.result = 1;
		assert_int_equal(th_wait(th_spawn_ns(ns_name[3], grant_probe, &x)), 0);
		for (int i = 0; i < 200 && ((volatile uint8_t *)d)[16] != 0x77; i++)
			usleep(10000);   /* the committed transaction is applied by node 1's poller */
		/* node 3's own library: a transaction inside its part commits */
		{
			const struct roshm_txn_write tw = { .off = 40, .arena_off = 0, .len = 8 };
			char gname[128];
			uint32_t hp;
			int ret = -1;

			snprintf(gname, sizeof(gname), "default/%s", x.name);
			assert_int_equal(roshm_region_open_part(c, gname, &part, &hp, NULL), 0);
			memset(roshm_arena(c, NULL), 0x66, 8);
			for (int i = 0; i < 50 && (ret = roshm_txn_sync(c, hp, &tw, 1, NULL)) == -EAGAIN; i++)
				usleep(20000);
			assert_int_equal(ret, 0);
			for (int i = 0; i < 200 && ((volatile uint8_t *)d)[40] != 0x66; i++)
				usleep(10000);
			roshm_region_close(c, hp);
		}
		assert_int_equal(roshm_region_revoke_part(a, hg, ring3, &part), 0);
		x.result = 2;
		assert_int_equal(th_wait(th_spawn_ns(ns_name[3], grant_probe, &x)), 0);
		usleep(100000);
		for (int i = 0; i < 4096; i++)
			if (d[i] != (i >= 16 && i < 24 ? 0x77 : i >= 40 && i < 48 ? 0x66 :
				     i < 64 ? 0x33 : 0x22))
				fail_msg("byte %d of the granted region is %#x", i, d[i]);
		/* node 1's roshmd restarts: the library makes its grant again
		 * by id, and node 1 finds the node that id lives on (node 2),
		 * so node 3 is still refused and node 2 still reaches it */
		th_daemon_kill(&nodes[1]);
		assert_int_equal(th_daemon_restart(&nodes[1]), 0);
		assert_int_equal(roshm_region_open(a, "default/none-here", &h, NULL), -ENOENT);
		{
			struct sec_ctx y = x;
			uint64_t w = 0x5555555555555555ull;
			char gfull[128];
			uint32_t hb;
			int ret = -1;

			for (int i = 0; i < 200 && (read_record(x.name, &y) || y.epoch == x.epoch); i++)
				usleep(20000);
			assert_int_not_equal(y.epoch, x.epoch);
			y.result = 0;
			assert_int_equal(th_wait(th_spawn_ns(ns_name[3], grant_probe, &y)), 0);
			snprintf(gfull, sizeof(gfull), "default/%s", x.name);
			for (int i = 0; i < 200 && ret; i++) {
				ret = roshm_region_open(b, gfull, &hb, NULL);
				if (!ret) {
					memcpy(roshm_arena(b, NULL), &w, 8);
					ret = roshm_write_sync(b, hb, 1024, 0, 8);
					if (ret)
						roshm_region_close(b, hb);
				}
				if (ret)
					usleep(20000);
			}
			assert_int_equal(ret, 0);
			assert_memory_equal(d + 1024, &w, 8);
			roshm_region_close(b, hb);

			/* Node 1 restarts while node 2's records are gone (its
			 * roshmd restarted, b not back yet): the grant by id
			 * names no node then. Once b is back, node 1 finds its
			 * node on a later look (rd_grants_timer), and node 3 is
			 * refused again. */
			char path[512];
			struct sec_ctx z = y;
			int st = -1;

			snprintf(path, sizeof(path), "%s/registry/regions/default/%s.json", workdir, ring2);
			th_daemon_kill(&nodes[2]);
			assert_int_equal(th_daemon_restart(&nodes[2]), 0);
			for (int i = 0; i < 250 && access(path, F_OK) == 0; i++)
				usleep(20000);
			assert_int_not_equal(access(path, F_OK), 0);
			th_daemon_kill(&nodes[1]);
			assert_int_equal(th_daemon_restart(&nodes[1]), 0);
			assert_int_equal(roshm_region_open(a, "default/none-here", &h, NULL), -ENOENT);
			for (int i = 0; i < 200 && (read_record(x.name, &z) || z.epoch == y.epoch); i++)
				usleep(20000);
			assert_int_not_equal(z.epoch, y.epoch);
			assert_int_equal(roshm_region_open(b, "default/none-here", &hb, NULL), -ENOENT);
			for (int i = 0; i < 250 && access(path, F_OK); i++)
				usleep(20000);
			assert_int_equal(access(path, F_OK), 0);
			z.result = 3;
			for (int i = 0; i < 60 && st; i++) {
				st = th_wait(th_spawn_ns(ns_name[3], grant_probe, &z));
				if (st)
					usleep(250000);
			}
			assert_int_equal(st, 0);
		}
		roshm_region_close(c, h3);
		roshm_region_close(b, h2);
		roshm_region_close(a, hg);
		roshm_close(c);
		roshm_close(b);
	}
	roshm_close(a);
}

/* ---- etcd: a node that loses its lease publishes itself again ---- */

static int etcd_has(const char *key)
{
	return th_sh("ip netns exec %s-hub curl -sf -X POST http://198.18.0.254:2379/v3/kv/range"
		     " -d '{\"key\":\"'$(printf %s | base64 -w0)'\"}' | grep -q kvs", prefix, key) == 0;
}

/* A region's record reaches etcd a moment after its creation returned. */
static int etcd_wait_has(const char *key)
{
	for (int i = 0; i < 30; i++) {
		if (etcd_has(key))
			return 1;
		usleep(100000);
	}
	return 0;
}

static void test_lease_lost(void **state)
{
	struct roshm *a = attach_node(1);
	char name[64], key[128];
	uint32_t h;

	(void)state;
	if (strcmp(backend, "etcd")) {
		print_message("lease loss is an etcd matter: skipped with the file registry\n");
		roshm_close(a);
		return;
	}
	assert_non_null(a);
	snprintf(name, sizeof(name), "lease-%s", tag);
	assert_int_equal(roshm_region_create(a, name, 4096, NULL, &h), 0);
	snprintf(key, sizeof(key), "/roshm/v1/regions/default/%s", name);
	assert_true(etcd_wait_has(key));
	/* Revoke node1's lease behind its back: its records vanish at once
	 * (and node 1's watch sees that: it may put them back before we look). */
	assert_int_equal(th_sh("L=$(ip netns exec %s-hub curl -sf -X POST http://198.18.0.254:2379/v3/kv/range"
			       " -d '{\"key\":\"'$(printf /roshm/v1/nodes/node1 | base64 -w0)'\"}'"
			       " | sed -n 's/.*\"lease\":\"\\([0-9]*\\)\".*/\\1/p');"
			       " echo $L > %s/lease1;"
			       " [ -n \"$L\" ] && ip netns exec %s-hub curl -sf -X POST"
			       " http://198.18.0.254:2379/v3/lease/revoke -d '{\"ID\":\"'$L'\"}' >/dev/null",
			       prefix, workdir, prefix), 0);
	/* Node 1 notices (watch, or its next keepalive) and publishes again,
	 * under a new lease. */
	bool back = false;

	for (int i = 0; i < 50 && !back; i++) {
		usleep(100000);
		back = etcd_has(key) && etcd_has("/roshm/v1/nodes/node1") &&
		       th_sh("L=$(ip netns exec %s-hub curl -sf -X POST http://198.18.0.254:2379/v3/kv/range"
			     " -d '{\"key\":\"'$(printf /roshm/v1/nodes/node1 | base64 -w0)'\"}'"
			     " | sed -n 's/.*\"lease\":\"\\([0-9]*\\)\".*/\\1/p');"
			     " [ -n \"$L\" ] && [ \"$L\" != \"$(cat %s/lease1)\" ]", prefix, workdir) == 0;
	}
	assert_true(back);
	/* and the region is usable from another node again */
	struct roshm *b = attach_node(2);
	char full[128];
	uint32_t hb;

	assert_non_null(b);
	snprintf(full, sizeof(full), "default/%s", name);
	assert_int_equal(open_retry(b, full, &hb, NULL), 0);
	assert_int_equal(roshm_fetch_add_sync(b, hb, 0, 1, NULL), 0);
	roshm_close(b);
	roshm_close(a);
}

/* ---- etcd: a stopped node's regions go, and come back when it resumes ---- */

/*
 * A second roshmd under node1's name (a socket of its own, no transport: a
 * copied configuration) is refused before it touches the registry (file:
 * the lock in the directory's nodes/; etcd: the lock in the admin token's
 * directory); node1 keeps its records and serves its clients.
 * Before the fix (4e9e29a) it started and removed node1's records as its
 * own leftovers.
 */
/* The pid in node1's node record in etcd is node1's. */
static bool node1_record_is_node1s(void)
{
	return th_sh("ip netns exec %s-hub curl -sf -X POST http://198.18.0.254:2379/v3/kv/range"
		     " -d '{\"key\":\"'$(printf /roshm/v1/nodes/node1 | base64 -w0)'\"}'"
		     " | sed -n 's/.*\"value\":\"\\([^\"]*\\)\".*/\\1/p' | base64 -d"
		     " | grep -q '\"pid\": *%d[,}]'", prefix, (int)nodes[1].pid) == 0;
}

/*
 * A roshmd of another host under node1's name, of the same cluster (its
 * secret: it reads node1's records as valid), with etcd: an admin
 * directory of its own (no lock in common) and another boot_id, a file
 * mounted over /proc/sys/kernel/random/boot_id in a mount namespace of its
 * own. th_daemon_start_ns's answer.
 */
static int start_other_host(struct th_daemon *dup)
{
	char boot[300], wrap[800], extra[512];
	FILE *f;
	int r;

	snprintf(boot, sizeof(boot), "%s/other-host.boot_id", workdir);
	f = fopen(boot, "w");
	assert_non_null(f);
	fprintf(f, "0123abcd-0000-4000-8000-%012x\n", (unsigned)getpid());
	fclose(f);
	snprintf(wrap, sizeof(wrap),
		 "exec unshare -m sh -c 'mount --make-rprivate / && mount --bind %s "
		 "/proc/sys/kernel/random/boot_id && exec \"$@\"' sh \"$@\"", boot);
	snprintf(extra, sizeof(extra),
		 "registry: { backend = \"etcd\"; endpoints = \"http://198.18.0.254:2379\";"
		 " lease_ttl = 2; secret_file = \"%s/cluster.secret\"; };\n", workdir);
	memset(dup, 0, sizeof(*dup));
	th_daemon_wrap = wrap;
	r = th_daemon_start_ns(dup, "node1", ns_name[1], extra);
	th_daemon_wrap = NULL;
	return r;
}

/*
 * etcd: a roshmd of another host under node1's name is refused once it has
 * seen node1's lease kept alive (up to its TTL, 2 s, and 1 s more), before
 * it writes or removes anything. Before the fix (161dc9f) it started,
 * removed node1's region @name as its own leftover and put its node record
 * over node1's: "a roshmd of another host named node1: started; node1's
 * region record and node record not kept; the refusal naming node1's
 * record (pid N) not logged".
 */
static void other_host_refused(const char *name)
{
	struct th_daemon dup;
	char key[128];
	int r;

	assert_true(node1_record_is_node1s());
	r = start_other_host(&dup);
	snprintf(key, sizeof(key), "/roshm/v1/regions/default/%s", name);
	bool kept = etcd_has(key) && node1_record_is_node1s();

	if (!r)
		th_daemon_stop(&dup);
	if (!r || !kept ||
	    th_sh("grep -q 'a roshmd of another host holds it (its record: host [0-9a-f-]*, pid %d' %s",
		  (int)nodes[1].pid, dup.log)) {
		th_daemon_dump_log(&dup);
		fail_msg("a roshmd of another host named node1: %s; node1's region record and node "
			 "record %s; the refusal naming node1's record (pid %d) %s", r ? "not started" :
			 "started", kept ? "kept" : "not kept", (int)nodes[1].pid,
			 th_sh("grep -q 'another host holds it' %s", dup.log) ? "not logged" : "logged");
	}
}

/*
 * etcd: node1 stopped past its lease, its records gone, a roshmd of another
 * host takes the name; node1, continued, takes a new lease, finds the name
 * held by a lease kept alive, and stops (exit status 1) without writing
 * its records over the other's. Before the fix (5a7a189) node1 put its
 * records back, and the two rewrote the node record in turn.
 */
static void other_host_while_stopped(void)
{
	struct th_daemon dup;
	bool gone = false, stopped = false;
	int r;

	assert_int_equal(kill(nodes[1].pid, SIGSTOP), 0);
	for (int i = 0; i < 100 && !gone; i++) {
		usleep(100000);
		gone = !etcd_has("/roshm/v1/nodes/node1");
	}
	r = gone ? start_other_host(&dup) : -1;
	kill(nodes[1].pid, SIGCONT);
	for (int i = 0; !r && i < 150 && !stopped; i++) {
		usleep(100000);
		stopped = !th_daemon_alive(&nodes[1]);
	}
	bool others = !r && etcd_has("/roshm/v1/nodes/node1") &&
		      th_sh("ip netns exec %s-hub curl -sf -X POST http://198.18.0.254:2379/v3/kv/range"
			    " -d '{\"key\":\"'$(printf /roshm/v1/nodes/node1 | base64 -w0)'\"}'"
			    " | sed -n 's/.*\"value\":\"\\([^\"]*\\)\".*/\\1/p' | base64 -d"
			    " | grep -q 0123abcd-0000-4000-8000", prefix) == 0;
	int st = stopped ? th_daemon_stop(&nodes[1]) : -1;

	if (!r)
		th_daemon_stop(&dup);
	if (!gone || r || !stopped || st != 1 || !others ||
	    th_sh("grep -q 'a roshmd of another host holds it' %s", nodes[1].log)) {
		th_daemon_dump_log(&nodes[1]);
		fail_msg("node1 stopped past its lease (records %s), another host's roshmd under its "
			 "name %s; node1 continued: %s (status %d), the node record %s", gone ? "gone" :
			 "kept", r ? "not started" : "started", stopped ? "stopped" : "still running", st,
			 others ? "the other's" : "not the other's");
	}
	if (th_daemon_alive(&nodes[1]))
		th_daemon_stop(&nodes[1]);
	assert_int_equal(th_daemon_restart(&nodes[1]), 0);
}

/*
 * etcd: a node record of another boot does not hold the name when nothing
 * keeps it alive. node1 is killed (a host that went down, or this one
 * before a reboot) and its record put under a lease of 4 s: the roshmd of
 * "another host" waits for that lease, sees it run out, and starts. Then node1's record is put back
 * without a lease (a copy replayed by a registry writer): it starts at
 * once and writes its own. node1 then starts again.
 * Before the fix (5a7a189): the first start was refused ("another host
 * holds it") although node1 was gone, and so was the second, for good.
 */
static void other_host_takes_over(void)
{
	char saved[300];
	struct th_daemon dup;
	int r;

	snprintf(saved, sizeof(saved), "%s/node1.rec", workdir);
	assert_int_equal(th_sh("ip netns exec %s-hub curl -sf -X POST http://198.18.0.254:2379/v3/kv/range"
			       " -d '{\"key\":\"'$(printf /roshm/v1/nodes/node1 | base64 -w0)'\"}'"
			       " | sed -n 's/.*\"value\":\"\\([^\"]*\\)\".*/\\1/p' > %s && test -s %s",
			       prefix, saved, saved), 0);
	th_daemon_kill(&nodes[1]);
	/* node1's record under a lease of 4 s that nothing keeps alive, so
	 * that the other host finds it however long its start takes (node1's
	 * own lease, 2 s, may be gone by then) */
	assert_int_equal(th_sh("L=$(ip netns exec %s-hub curl -sf -X POST http://198.18.0.254:2379/v3/lease/grant"
			       " -d '{\"TTL\":4}' | sed -n 's/.*\"ID\":\"\\([0-9]*\\)\".*/\\1/p') &&"
			       " [ -n \"$L\" ] && ip netns exec %s-hub curl -sf -X POST"
			       " http://198.18.0.254:2379/v3/kv/put -d '{\"key\":\"'$(printf /roshm/v1/nodes/node1"
			       " | base64 -w0)'\",\"value\":\"'$(cat %s)'\",\"lease\":\"'$L'\"}' > /dev/null",
			       prefix, prefix, saved), 0);
	r = start_other_host(&dup);
	if (r || th_sh("grep -q 'waiting to see whether it is kept alive' %s", dup.log) ||
	    th_sh("grep -q \"the other boot's lease ran out\" %s", dup.log)) {
		th_daemon_dump_log(&dup);
		fail_msg("node1 killed: the roshmd of another host %s (expected: it waits for node1's "
			 "lease, then starts)", r ? "did not start" : "started without the wait");
	}
	assert_int_equal(th_daemon_stop(&dup), 0);
	assert_int_equal(th_sh("ip netns exec %s-hub curl -sf -X POST http://198.18.0.254:2379/v3/kv/put"
			       " -d '{\"key\":\"'$(printf /roshm/v1/nodes/node1 | base64 -w0)'\","
			       "\"value\":\"'$(cat %s)'\"}' > /dev/null", prefix, saved), 0);
	r = start_other_host(&dup);
	if (r || !th_sh("grep -q 'waiting to see whether it is kept alive' %s", dup.log)) {
		th_daemon_dump_log(&dup);
		fail_msg("node1's record put back without a lease: the roshmd of another host %s",
			 r ? "did not start" : "waited for a lease");
	}
	assert_int_equal(th_daemon_stop(&dup), 0);
	assert_int_equal(th_daemon_restart(&nodes[1]), 0);
	other_host_while_stopped();
}

static void test_node_name_taken(void **state)
{
	struct roshm *a = attach_node(1), *b;
	struct th_daemon dup;
	char extra[512], name[64];
	uint32_t h, hb;

	(void)state;
	assert_non_null(a);
	snprintf(name, sizeof(name), "taken-%s", tag);
	assert_int_equal(roshm_region_create(a, name, 4096, NULL, &h), 0);
	/* (etcd: the lock is in the admin token's directory, which roshmd
	 * instances of a host share by default: node1's here) */
	if (!strcmp(backend, "file"))
		snprintf(extra, sizeof(extra), "registry: { dir = \"%s/registry\"; };\n", workdir);
	else
		snprintf(extra, sizeof(extra),
			 "registry: { backend = \"etcd\"; endpoints = \"http://198.18.0.254:2379\"; };\n"
			 "admin: { token_file = \"%s\"; };\n", nodes[1].admin_token_file);
	memset(&dup, 0, sizeof(dup));
	assert_int_not_equal(th_daemon_start_ns(&dup, "node1", ns_name[1], extra), 0);
	if (th_sh("grep -q 'another roshmd of this host uses it' %s", dup.log)) {
		th_daemon_dump_log(&dup);
		fail_msg("a second roshmd named node1 was not refused for its name");
	}
	if (strcmp(backend, "file"))
		other_host_refused(name);
	b = attach_node(1);
	assert_non_null(b);
	assert_int_equal(roshm_region_open(b, name, &hb, NULL), 0);
	assert_int_equal(roshm_fetch_add_sync(b, hb, 0, 1, NULL), 0);
	roshm_close(b);
	assert_int_equal(roshm_region_close(a, h), 0);
	roshm_close(a);
	if (strcmp(backend, "file"))
		other_host_takes_over();
}

static void test_node_stopped(void **state)
{
	struct roshm *a = attach_node(2), *b = attach_node(3);
	char name[64], key[128], full[128];
	uint32_t h, hb;
	bool gone = false, back = false;

	(void)state;
	if (strcmp(backend, "etcd")) {
		print_message("leases are an etcd matter: skipped with the file registry\n");
		roshm_close(a);
		roshm_close(b);
		return;
	}
	assert_non_null(a);
	assert_non_null(b);
	snprintf(name, sizeof(name), "stop-%s", tag);
	snprintf(key, sizeof(key), "/roshm/v1/regions/default/%s", name);
	snprintf(full, sizeof(full), "default/%s", name);
	assert_int_equal(roshm_region_create(a, name, 4096, NULL, &h), 0);
	assert_int_equal(open_retry(b, full, &hb, NULL), 0);
	assert_int_equal(roshm_fetch_add_sync(b, hb, 0, 1, NULL), 0);
	kill(nodes[2].pid, SIGSTOP);
	/* TTL 2 s: the lease runs out and the records go */
	for (int i = 0; i < 60 && !gone; i++) {
		usleep(100000);
		gone = !etcd_has(key) && !etcd_has("/roshm/v1/nodes/node2");
	}
	if (!gone)
		kill(nodes[2].pid, SIGCONT);
	assert_true(gone);
	/* the peer notices: its handle fails clearly instead of hanging */
	usleep(500000);
	int st = roshm_fetch_add_sync(b, hb, 0, 1, NULL);

	assert_true(st == -ESTALE || st == -EHOSTUNREACH);
	kill(nodes[2].pid, SIGCONT);
	for (int i = 0; i < 60 && !back; i++) {
		usleep(100000);
		back = etcd_has(key) && etcd_has("/roshm/v1/nodes/node2");
	}
	assert_true(back);
	/* and the region is reachable again */
	for (int i = 0; i < 30; i++) {
		st = roshm_region_open(b, full, &hb, NULL);
		if (st == 0 && (st = roshm_fetch_add_sync(b, hb, 0, 1, NULL)) == 0)
			break;
		usleep(100000);
	}
	assert_int_equal(st, 0);
	roshm_close(b);
	roshm_close(a);
}

/* ---- a node dies with work in flight ---- */

struct kill_ctx {
	char name[64];
	struct th_chan streaming;
	volatile uint64_t *shared;        /* [0] ok completions, [1] error completions */
};

static int kill_reader(void *arg)
{
	struct kill_ctx *x = arg;
	struct roshm *r = attach_node(1);
	char full[128];
	uint32_t h;
	unsigned inflight = 0;
	bool told = false;

	CHECK(r);
	snprintf(full, sizeof(full), "default/%s", x->name);
	CHECK_EQ(open_retry(r, full, &h, NULL), 0);
	/* Stream READs until errors arrive; every SQE must complete. */
	for (int round = 0; round < 200000; round++) {
		struct roshm_sqe *sqe;
		struct roshm_cqe *cqe;

		while (!x->shared[1] && inflight < 16 && (sqe = roshm_get_sqe(r))) {
			/* READs and FETCH_ADDs: the adds must land at most once each */
			if (inflight & 1) {
				roshm_prep_fetch_add(sqe, h, 32768, 1);
				roshm_sqe_set_data(sqe, 1);
			} else {
				roshm_prep_read(sqe, h, 0, 0, 16384);
				roshm_sqe_set_data(sqe, 0);
			}
			inflight++;
		}
		roshm_submit(r);
		if (!inflight)
			break;
		int ret = roshm_wait_cqe_timeout(r, &cqe, 10000);

		if (ret) {
			fprintf(stderr, "kill_reader: wait: %s with %u in flight\n", roshm_strerror(ret),
				inflight);
			return 1;
		}
		if (cqe->status == 0) {
			x->shared[0]++;
			if (cqe->user_data == 1)
				x->shared[2]++;         /* adds known applied */
		} else if (cqe->status == -ECONNRESET || cqe->status == -EHOSTUNREACH) {
			x->shared[1]++;
			if (cqe->user_data == 1)
				x->shared[3]++;         /* adds whose fate is unknown */
		}
		else {
			fprintf(stderr, "kill_reader: unexpected status %d\n", cqe->status);
			return 1;
		}
		roshm_cqe_seen(r, cqe);
		inflight--;
		if (!told && x->shared[0] > 200) {
			th_chan_send(&x->streaming, 1);
			told = true;
		}
	}
	CHECK_EQ(inflight, 0);
	/* New work to the dead node fails clearly: at once, or (held while its
	 * region is paused) after drain.timeout_ms (1.5 s), not at the next
	 * revalidation (a minute with the file registry: it took that before
	 * paused regions were looked at when their time ran out). */
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	int st = roshm_read_sync(r, h, 0, 0, 64);

	clock_gettime(CLOCK_MONOTONIC, &t1);
	CHECK(st == -EHOSTUNREACH || st == -ESTALE);
	CHECK(t1.tv_sec - t0.tv_sec < 30);
	roshm_close(r);
	return 0;
}

static void test_node_killed(void **state)
{
	struct kill_ctx x;
	struct roshm *owner = attach_node(2);
	uint32_t h;

	(void)state;
	assert_non_null(owner);
	x.shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	th_chan_init(&x.streaming);
	snprintf(x.name, sizeof(x.name), "kill-%s", tag);
	assert_int_equal(roshm_region_create(owner, x.name, 65536, NULL, &h), 0);
	pid_t p = th_spawn_ns(ns_name[1], kill_reader, &x);

	assert_int_equal(th_chan_recv(&x.streaming), 1);
	th_daemon_kill(&nodes[2]);
	assert_int_equal(th_wait(p), 0);
	assert_true(x.shared[1] >= 1);
	/* The owner pod still maps its region (its roshmd died, not it): every
	 * acknowledged add is there, failed ones at most once, none twice. */
	uint64_t counter = *(volatile uint64_t *)((uint8_t *)roshm_region_data(owner, h, NULL) + 32768);

	if (counter < x.shared[2] || counter > x.shared[2] + x.shared[3])
		fail_msg("counter %llu: %llu adds acknowledged, %llu failed",
			 (unsigned long long)counter, (unsigned long long)x.shared[2],
			 (unsigned long long)x.shared[3]);
	print_message("node 2 killed: %llu operations completed before, %llu failed with a clear status\n",
		      (unsigned long long)x.shared[0], (unsigned long long)x.shared[1]);
	roshm_close(owner);
	if (!strcmp(backend, "etcd")) {
		/* Its lease (TTL 2 s) runs out and its records go with it. */
		int gone = 1;

		for (int i = 0; i < 100 && gone; i++) {
			gone = th_sh("ip netns exec %s-hub curl -sf -X POST http://198.18.0.254:2379/v3/kv/range"
				     " -d '{\"key\":\"'$(printf /roshm/v1/regions/default/%s | base64 -w0)'\"}'"
				     " | grep -q kvs", prefix, x.name) == 0;
			if (gone)
				usleep(100000);
		}
		assert_false(gone);
		assert_int_equal(th_sh("ip netns exec %s-hub curl -sf -X POST http://198.18.0.254:2379/v3/kv/range"
				       " -d '{\"key\":\"'$(printf /roshm/v1/nodes/node2 | base64 -w0)'\"}'"
				       " | grep -q kvs", prefix), 1);
	}
	munmap((void *)x.shared, 4096);
}

/* ---- setup ---- */

static int start_nodes(void)
{
	char extra[1024], secret[300];

	snprintf(secret, sizeof(secret), "%s/cluster.secret", workdir);
	for (int n = 1; n <= NODES; n++) {
		char name[16];

		snprintf(name, sizeof(name), "node%d", n);
		if (!strcmp(backend, "file"))
			snprintf(extra, sizeof(extra),
				 "transport: { tcp: { enabled = true; listen = \"198.18.0.%d\"; port = %d;"
				 " secret_file = \"%s\"; }; };\n"
				 /* a minute: what these tests see at once, inotify tells
				  * (as the etcd watch does for etcd) */
				 "registry: { dir = \"%s/registry\"; revalidate_ms = 60000; };\n"
				 "drain: { timeout_ms = 1500; };\n",
				 n, PORT, secret, workdir);
		else
			snprintf(extra, sizeof(extra),
				 "transport: { tcp: { enabled = true; listen = \"198.18.0.%d\"; port = %d;"
				 " secret_file = \"%s\"; }; };\n"
				 "registry: { backend = \"etcd\"; endpoints = \"http://198.18.0.254:2379\";"
				 " lease_ttl = 2; revalidate_ms = 200; };\n"
				 "drain: { timeout_ms = 1500; };\n",
				 n, PORT, secret);
		if (th_daemon_start_ns(&nodes[n], name, ns_name[n], extra))
			return -1;
	}
	return 0;
}

static int stop_nodes(void)
{
	if (rogue.pid)
		th_daemon_stop(&rogue);
	return th_daemons_stop(nodes, 1, NODES);
}

static int setup_file(void **state)
{
	(void)state;
	backend = "file";
	snprintf(tag, sizeof(tag), "f");
	return start_nodes();
}

static int setup_etcd(void **state)
{
	(void)state;
	backend = "etcd";
	snprintf(tag, sizeof(tag), "e");
	etcd_pid = fork();
	if (etcd_pid == 0) {
		char dir[300], log[300];

		snprintf(dir, sizeof(dir), "%s/etcd", workdir);
		snprintf(log, sizeof(log), "%s/etcd.log", workdir);
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		dup2(fd, 1);
		dup2(fd, 2);
		char hub[80];

		snprintf(hub, sizeof(hub), "%s-hub", prefix);
		if (th_enter_netns(hub))
			_exit(98);
		execlp("etcd", "etcd", "--data-dir", dir, "--listen-client-urls", "http://198.18.0.254:2379",
		       "--advertise-client-urls", "http://198.18.0.254:2379", "--listen-peer-urls",
		       "http://127.0.0.1:2380", (char *)NULL);
		_exit(127);
	}
	if (etcd_pid > 0)
		th_track_pid(etcd_pid);
	for (int i = 0; i < 100; i++) {
		if (th_sh("ip netns exec %s-hub curl -sf http://198.18.0.254:2379/health >/dev/null", prefix) == 0)
			return start_nodes();
		usleep(100000);
	}
	fprintf(stderr, "etcd did not come up\n");
	return -1;
}

static int teardown(void **state)
{
	(void)state;
	int bad = stop_nodes();

	if (etcd_pid > 0) {
		kill(etcd_pid, SIGTERM);
		waitpid(etcd_pid, NULL, 0);
		th_untrack_pid(etcd_pid);
		etcd_pid = 0;
	}
	return bad ? -1 : 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_opcode),
		cmocka_unit_test(test_pipelined_writes),
		cmocka_unit_test(test_fetch_add_three_nodes),
		cmocka_unit_test(test_cmp_swap_lock),
		cmocka_unit_test(test_policy_across_nodes),
		cmocka_unit_test(test_grant_across_nodes),
		cmocka_unit_test(test_window_across_nodes),
		cmocka_unit_test(test_lbuf_across_nodes),
		cmocka_unit_test(test_security),
		cmocka_unit_test(test_lease_lost),
		cmocka_unit_test(test_node_name_taken),
		cmocka_unit_test(test_node_stopped),
		cmocka_unit_test(test_node_killed),
	};
	int fails;

	if (geteuid() != 0) {
		printf("multinode: skipped: needs root to create network namespaces\n");
		return 77;
	}
	if (th_sh("command -v ip >/dev/null && command -v etcd >/dev/null && command -v curl >/dev/null")) {
		printf("multinode: skipped: needs iproute2, etcd-server and curl (make deps installs them)\n");
		return 77;
	}
	if (th_mkdtemp(workdir, sizeof(workdir), "multinode")) {
		printf("multinode: cannot create a directory in /tmp\n");
		return 1;
	}
	th_sh("echo %s > %s/cluster.secret", SECRET, workdir);
	if (th_netns_up(prefix, sizeof(prefix), "mn", NODES)) {
		printf("multinode: cannot create network namespaces\n");
		return 1;
	}
	for (int n = 1; n <= NODES; n++)
		snprintf(ns_name[n], sizeof(ns_name[n]), "%s-%d", prefix, n);
	fails = cmocka_run_group_tests_name("multinode_file_registry", tests, setup_file, teardown);
	fails += cmocka_run_group_tests_name("multinode_etcd_registry", tests, setup_etcd, teardown);
	/* the namespaces and the directory go at exit (harness), pass or fail */
	return fails ? 1 : 0;
}
