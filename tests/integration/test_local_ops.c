// SPDX-License-Identifier: MIT
/*
 * Two pods on one node through a real roshmd: every opcode, concurrent
 * FETCH_ADD, COMPARE_SWAP lock contention, access policy, region close.
 * Each pod is its own process. Runs once per configuration: 4 KiB pages,
 * and hugetlb pages when the machine has them reserved.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "roshm.h"
#include "harness.h"

static struct th_daemon daemon_;
static const char *cfg_name;

#define REGION_SIZE (1u << 20)

static struct roshm *attach(const char *tenant, const char *token)
{
	struct roshm_params p = { .sock_path = daemon_.sock, .tenant = tenant, .token = token };
	int err;
	struct roshm *r = roshm_open(&p, &err);

	if (!r)
		fprintf(stderr, "attach as %s: %s\n", tenant, roshm_strerror(err));
	return r;
}

#define CHECK(cond) do { if (!(cond)) { fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); return 1; } } while (0)
#define CHECK_EQ(a, b) do { long long _a = (long long)(a), _b = (long long)(b); if (_a != _b) { fprintf(stderr, "%s:%d: %s = %lld, expected %lld\n", __FILE__, __LINE__, #a, _a, _b); return 1; } } while (0)

/* ---- every opcode: owner A, user B ---- */

struct ops_ctx {
	struct th_chan a_ready, b_done;
	char name[64];
};

static int owner_a(void *arg)
{
	struct ops_ctx *x = arg;
	struct roshm *r = attach("default", "");
	uint32_t h;
	uint64_t size;
	uint8_t *d;

	CHECK(r);
	CHECK_EQ(roshm_region_create(r, x->name, REGION_SIZE, NULL, &h), 0);
	d = roshm_region_data(r, h, &size);
	CHECK(d);
	CHECK_EQ(size, REGION_SIZE);
	for (int i = 0; i < 4096; i++)
		d[8192 + i] = (uint8_t)(0xA5 ^ i);
	th_chan_send(&x->a_ready, 1);
	CHECK_EQ(th_chan_recv(&x->b_done), 1);
	/* B's writes are visible through our own mapping. */
	for (int i = 0; i < 1000; i++)
		CHECK_EQ(d[i], (uint8_t)(i * 7));
	for (uint32_t i = 0; i < 512 * 1024; i += 4096)
		CHECK_EQ(d[REGION_SIZE / 2 + i], (uint8_t)(i >> 12));
	CHECK_EQ(*(uint64_t *)(d + 16384), 10);
	CHECK_EQ(*(uint64_t *)(d + 16392), 7);
	roshm_close(r);
	return 0;
}

static int user_b(void *arg)
{
	struct ops_ctx *x = arg;
	struct roshm *r = attach("default", "");
	struct roshm_sqe *sqe;
	struct roshm_cqe *cqe;
	uint32_t h;
	uint64_t size, old;
	uint8_t *arena;
	char full[160];

	CHECK(r);
	CHECK_EQ(th_chan_recv(&x->a_ready), 1);
	snprintf(full, sizeof(full), "default/%s", x->name);
	CHECK_EQ(roshm_region_open(r, full, &h, &size), 0);
	CHECK_EQ(size, REGION_SIZE);
	arena = roshm_arena(r, NULL);

	/* NOP and FENCE */
	CHECK_EQ(roshm_nop_sync(r), 0);
	sqe = roshm_get_sqe(r);
	CHECK(sqe);
	roshm_prep_fence(sqe);
	roshm_sqe_set_data(sqe, 77);
	CHECK_EQ(roshm_submit(r), 1);
	CHECK_EQ(roshm_wait_cqe(r, &cqe), 0);
	CHECK_EQ(cqe->user_data, 77);
	CHECK_EQ(cqe->status, 0);
	roshm_cqe_seen(r, cqe);

	/* WRITE 1000 bytes */
	for (int i = 0; i < 1000; i++)
		arena[i] = (uint8_t)(i * 7);
	CHECK_EQ(roshm_write_sync(r, h, 0, 0, 1000), 0);
	/* READ what A put there */
	memset(arena + 65536, 0, 4096);
	CHECK_EQ(roshm_read_sync(r, h, 8192, 65536, 4096), 0);
	for (int i = 0; i < 4096; i++)
		CHECK_EQ(arena[65536 + i], (uint8_t)(0xA5 ^ i));
	/* A 512 KiB WRITE */
	for (uint32_t i = 0; i < 512 * 1024; i++)
		arena[1048576 + i] = (uint8_t)(i >> 12);
	CHECK_EQ(roshm_write_sync(r, h, REGION_SIZE / 2, 1048576, 512 * 1024), 0);
	/* FETCH_ADD returns the old value */
	CHECK_EQ(roshm_fetch_add_sync(r, h, 16384, 5, &old), 0);
	CHECK_EQ(old, 0);
	CHECK_EQ(roshm_fetch_add_sync(r, h, 16384, 5, &old), 0);
	CHECK_EQ(old, 5);
	/* COMPARE_SWAP: succeeds once, then fails and reports the current value */
	CHECK_EQ(roshm_cmp_swap_sync(r, h, 16392, 0, 7, &old), 0);
	CHECK_EQ(old, 0);
	CHECK_EQ(roshm_cmp_swap_sync(r, h, 16392, 0, 9, &old), 0);
	CHECK_EQ(old, 7);
	/* The last bytes of the region are reachable, one past is not */
	CHECK_EQ(roshm_write_sync(r, h, REGION_SIZE - 8, 0, 8), 0);
	CHECK_EQ(roshm_write_sync(r, h, REGION_SIZE - 7, 0, 8), -EFAULT);
	/* Transactions are not served yet on this node: a clear status */
	sqe = roshm_get_sqe(r);
	CHECK(sqe);
	roshm_prep_txn_commit(sqe, h);
	roshm_submit(r);
	CHECK_EQ(roshm_wait_cqe(r, &cqe), 0);
	CHECK_EQ(cqe->status, -EOPNOTSUPP);
	roshm_cqe_seen(r, cqe);
	th_chan_send(&x->b_done, 1);
	roshm_close(r);
	return 0;
}

static void test_every_opcode(void **state)
{
	struct ops_ctx x;

	(void)state;
	th_chan_init(&x.a_ready);
	th_chan_init(&x.b_done);
	snprintf(x.name, sizeof(x.name), "ops-%s", cfg_name);
	pid_t a = th_spawn(owner_a, &x), b = th_spawn(user_b, &x);

	assert_int_equal(th_wait(b), 0);
	assert_int_equal(th_wait(a), 0);
	assert_true(th_daemon_alive(&daemon_));
}

/* ---- concurrent FETCH_ADD from two clients ---- */

#define FA_PER_CLIENT 20000
struct fa_ctx {
	struct th_chan ready;
	uint32_t *seen;     /* shared: how often each old value came back */
	char name[64];
};

static int fa_client(void *arg)
{
	struct fa_ctx *x = arg;
	struct roshm *r = attach("default", "");
	uint32_t h;
	int sent = 0, got = 0;
	char full[160];

	CHECK(r);
	snprintf(full, sizeof(full), "default/%s", x->name);
	CHECK_EQ(roshm_region_open(r, full, &h, NULL), 0);
	while (got < FA_PER_CLIENT) {
		struct roshm_sqe *sqe;
		struct roshm_cqe *cqe;

		while (sent < FA_PER_CLIENT && sent - got < 64 && (sqe = roshm_get_sqe(r))) {
			roshm_prep_fetch_add(sqe, h, 64, 1);
			roshm_sqe_set_data(sqe, (uint64_t)sent++);
		}
		roshm_submit(r);
		CHECK_EQ(roshm_wait_cqe(r, &cqe), 0);
		do {
			CHECK_EQ(cqe->status, 0);
			CHECK(cqe->result < 2 * FA_PER_CLIENT);
			__atomic_fetch_add(&x->seen[cqe->result], 1, __ATOMIC_RELAXED);
			roshm_cqe_seen(r, cqe);
			got++;
		} while (roshm_peek_cqe(r, &cqe) == 0);
	}
	roshm_close(r);
	return 0;
}

static void test_concurrent_fetch_add(void **state)
{
	struct fa_ctx x;
	struct roshm *owner;
	uint32_t h;
	uint64_t *d;

	(void)state;
	x.seen = mmap(NULL, 2 * FA_PER_CLIENT * sizeof(uint32_t), PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_ptr_not_equal(x.seen, MAP_FAILED);
	snprintf(x.name, sizeof(x.name), "fa-%s", cfg_name);
	owner = attach("default", "");
	assert_non_null(owner);
	assert_int_equal(roshm_region_create(owner, x.name, 4096, NULL, &h), 0);
	d = roshm_region_data(owner, h, NULL);
	pid_t p1 = th_spawn(fa_client, &x), p2 = th_spawn(fa_client, &x);

	assert_int_equal(th_wait(p1), 0);
	assert_int_equal(th_wait(p2), 0);
	assert_int_equal(d[8], 2 * FA_PER_CLIENT);
	/* Every old value 0 .. 2N-1 came back exactly once: the adds were atomic. */
	for (int i = 0; i < 2 * FA_PER_CLIENT; i++)
		if (x.seen[i] != 1)
			fail_msg("old value %d returned %u times", i, x.seen[i]);
	roshm_close(owner);
	munmap(x.seen, 2 * FA_PER_CLIENT * sizeof(uint32_t));
}

/* ---- COMPARE_SWAP spin lock protecting a read-modify-write ---- */

#define LOCK_ITERS 300
struct lock_ctx {
	char name[64];
	uint64_t id;
};

static int lock_client(void *arg)
{
	struct lock_ctx *x = arg;
	struct roshm *r = attach("default", "");
	uint8_t *arena;
	uint32_t h;
	uint64_t old;
	char full[160];

	CHECK(r);
	arena = roshm_arena(r, NULL);
	snprintf(full, sizeof(full), "default/%s", x->name);
	CHECK_EQ(roshm_region_open(r, full, &h, NULL), 0);
	for (int i = 0; i < LOCK_ITERS; i++) {
		do
			CHECK_EQ(roshm_cmp_swap_sync(r, h, 0, 0, x->id, &old), 0);
		while (old != 0);
		/* critical section: non-atomic read-modify-write of the counter */
		CHECK_EQ(roshm_read_sync(r, h, 8, 0, 8), 0);
		(*(uint64_t *)arena)++;
		CHECK_EQ(roshm_write_sync(r, h, 8, 0, 8), 0);
		CHECK_EQ(roshm_cmp_swap_sync(r, h, 0, x->id, 0, &old), 0);
		CHECK_EQ(old, x->id); /* nobody else held it */
	}
	roshm_close(r);
	return 0;
}

static void test_cmp_swap_lock(void **state)
{
	struct lock_ctx x1, x2;
	struct roshm *owner;
	uint32_t h;
	uint64_t *d;

	(void)state;
	owner = attach("default", "");
	assert_non_null(owner);
	snprintf(x1.name, sizeof(x1.name), "lock-%s", cfg_name);
	x2 = x1;
	x1.id = 101;
	x2.id = 202;
	assert_int_equal(roshm_region_create(owner, x1.name, 4096, NULL, &h), 0);
	d = roshm_region_data(owner, h, NULL);
	pid_t p1 = th_spawn(lock_client, &x1), p2 = th_spawn(lock_client, &x2);

	assert_int_equal(th_wait(p1), 0);
	assert_int_equal(th_wait(p2), 0);
	assert_int_equal(d[1], 2 * LOCK_ITERS); /* no lost update */
	assert_int_equal(d[0], 0);
	roshm_close(owner);
}

/* ---- access policy ---- */

static void test_access_policy(void **state)
{
	struct roshm *a, *a2, *b, *bad;
	struct roshm_region_opts own = { .policy = ROSHM_POLICY_OWNER };
	struct roshm_region_opts list = { .policy = ROSHM_POLICY_LIST, .ntenants = 1,
					  .tenants = { "blue" } };
	struct roshm_params p = { .sock_path = daemon_.sock, .tenant = "blue", .token = "wrong" };
	uint32_t h1, h2, h3, hx;
	int err;

	(void)state;
	a = attach("default", "");
	a2 = attach("default", "");
	b = attach("blue", "blue-secret");
	assert_non_null(a);
	assert_non_null(a2);
	assert_non_null(b);
	bad = roshm_open(&p, &err);
	assert_null(bad);
	assert_int_equal(err, -EACCES);
	p.tenant = "nosuch";
	p.token = "";
	assert_null(roshm_open(&p, &err));
	assert_int_equal(err, -EACCES);

	assert_int_equal(roshm_region_create(a, "pol-tenant", 4096, NULL, &h1), 0);
	assert_int_equal(roshm_region_create(a, "pol-owner", 4096, &own, &h2), 0);
	assert_int_equal(roshm_region_create(a, "pol-list", 4096, &list, &h3), 0);
	assert_int_equal(roshm_region_create(a, "pol-tenant", 4096, NULL, &hx), -EEXIST);
	assert_int_equal(roshm_region_create(a, "../etc", 4096, NULL, &hx), -EINVAL);
	assert_int_equal(roshm_region_create(a, "zero", 0, NULL, &hx), -EINVAL);

	/* same tenant, other client */
	assert_int_equal(roshm_region_open(a2, "default/pol-tenant", &hx, NULL), 0);
	assert_int_equal(roshm_region_open(a2, "pol-tenant", &hx, NULL), 0);
	assert_int_equal(roshm_region_open(a2, "default/pol-owner", &hx, NULL), -EACCES);
	assert_int_equal(roshm_region_open(a, "default/pol-owner", &hx, NULL), 0);
	/* other tenant */
	assert_int_equal(roshm_region_open(b, "default/pol-tenant", &hx, NULL), -EACCES);
	assert_int_equal(roshm_region_open(b, "default/pol-owner", &hx, NULL), -EACCES);
	assert_int_equal(roshm_region_open(b, "default/pol-list", &hx, NULL), 0);
	assert_int_equal(roshm_region_open(b, "default/nosuch", &hx, NULL), -ENOENT);
	/* "blue" sees its own namespace: pol-tenant does not exist there */
	assert_int_equal(roshm_region_open(b, "pol-tenant", &hx, NULL), -ENOENT);
	roshm_close(b);
	roshm_close(a2);
	roshm_close(a);
}

/* ---- owner closes: users get -ESTALE, name disappears ---- */

static void test_region_close(void **state)
{
	struct roshm *a = attach("default", ""), *b = attach("default", "");
	uint32_t ha, hb;

	(void)state;
	assert_non_null(a);
	assert_non_null(b);
	assert_int_equal(roshm_region_create(a, "closing", 8192, NULL, &ha), 0);
	assert_int_equal(roshm_region_open(b, "default/closing", &hb, NULL), 0);
	assert_int_equal(roshm_write_sync(b, hb, 0, 0, 64), 0);
	assert_int_equal(roshm_region_close(a, ha), 0);
	assert_int_equal(roshm_write_sync(b, hb, 0, 0, 64), -ESTALE);
	assert_int_equal(roshm_region_open(b, "default/closing", &hb, NULL), -ENOENT);
	assert_int_equal(roshm_region_close(a, ha), -EBADF);
	/* the name can be created again, with a new epoch */
	assert_int_equal(roshm_region_create(a, "closing", 8192, NULL, &ha), 0);
	roshm_close(b);
	roshm_close(a);
}

/* ---- a local buffer in a region of the client's own (ROSHM_SQE_F_LBUF) ---- */

static int lbuf_op(struct roshm *r, uint8_t op, uint32_t h, uint64_t off, uint32_t lh,
		   uint64_t loff, uint32_t len)
{
	struct roshm_sqe *sqe = roshm_get_sqe(r);
	struct roshm_cqe *cqe;
	int st;

	assert_non_null(sqe);
	if (!sqe)
		return -1;
	if (op == ROSHM_OP_FETCH_ADD) {
		roshm_prep_fetch_add(sqe, h, off, 1);
	} else {
		roshm_prep_rw(sqe, op, h, off, 0, len);
	}
	roshm_sqe_set_lbuf(sqe, lh, loff);
	roshm_sqe_set_data(sqe, 4242);
	assert_int_equal(roshm_submit(r), 1);
	assert_int_equal(roshm_wait_cqe(r, &cqe), 0);
	assert_int_equal(cqe->user_data, 4242);
	st = cqe->status;
	if (!st && op != ROSHM_OP_FETCH_ADD)
		assert_int_equal(cqe->result, len);
	roshm_cqe_seen(r, cqe);
	return st;
}

static void test_lbuf(void **state)
{
	struct roshm *a = attach("default", ""), *b = attach("default", "");
	const uint32_t big = 768 * 1024;   /* past the poller's one-turn copy */
	uint32_t ht, hl, hbt, hx;
	uint8_t *t, *l, *ref;

	(void)state;
	assert_non_null(a);
	assert_non_null(b);
	assert_int_equal(roshm_region_create(a, "lbuf-target", REGION_SIZE, NULL, &ht), 0);
	assert_int_equal(roshm_region_create(b, "lbuf-own", REGION_SIZE, NULL, &hl), 0);
	assert_int_equal(roshm_region_open(b, "default/lbuf-target", &hbt, NULL), 0);
	t = roshm_region_data(a, ht, NULL);
	l = roshm_region_data(b, hl, NULL);
	ref = malloc(REGION_SIZE);
	assert_non_null(t);
	assert_non_null(l);
	assert_non_null(ref);
	/* WRITE from b's own region, small and big: the bytes of its region */
	for (uint32_t i = 0; i < REGION_SIZE; i++)
		l[i] = (uint8_t)(i * 13 + 1);
	assert_int_equal(lbuf_op(b, ROSHM_OP_WRITE, hbt, 100, hl, 5000, 3000), 0);
	assert_memory_equal(t + 100, l + 5000, 3000);
	assert_int_equal(lbuf_op(b, ROSHM_OP_WRITE, hbt, 200000, hl, 7, big), 0);
	assert_memory_equal(t + 200000, l + 7, big);
	/* READ into it, small and big */
	for (uint32_t i = 0; i < REGION_SIZE; i++)
		t[i] = (uint8_t)(i * 7 + 3);
	assert_int_equal(lbuf_op(b, ROSHM_OP_READ, hbt, 64, hl, 9000, 4000), 0);
	assert_memory_equal(l + 9000, t + 64, 4000);
	assert_int_equal(lbuf_op(b, ROSHM_OP_READ, hbt, 1000, hl, 100000, big), 0);
	assert_memory_equal(l + 100000, t + 1000, big);
	/* source and target in one region, overlapping, small and big: what
	 * lands is undefined (as with a NIC), but it is done, and only there */
	memcpy(ref, l, REGION_SIZE);
	assert_int_equal(lbuf_op(b, ROSHM_OP_WRITE, hl, 1000, hl, 0, 5000), 0);
	assert_int_equal(lbuf_op(b, ROSHM_OP_WRITE, hl, 100000, hl, 99000, big), 0);
	assert_memory_equal(l, ref, 1000);
	assert_memory_equal(l + 6000, ref + 6000, 100000 - 6000);
	assert_memory_equal(l + 100000 + big, ref + 100000 + big, REGION_SIZE - 100000 - big);
	/* refused, and nothing changes: a region it only opened as its buffer
	 * (a's memory would be the source or the destination), out of bounds,
	 * an atomic, a closed region */
	memcpy(ref, t, REGION_SIZE);
	assert_int_equal(lbuf_op(b, ROSHM_OP_READ, hl, 0, hbt, 0, 4096), -EACCES);
	assert_int_equal(lbuf_op(b, ROSHM_OP_WRITE, hbt, 0, hbt, 4096, 4096), -EACCES);
	assert_int_equal(lbuf_op(b, ROSHM_OP_WRITE, hbt, 0, hl, REGION_SIZE - 100, 101), -EFAULT);
	assert_int_equal(lbuf_op(b, ROSHM_OP_READ, hbt, 0, hl, UINT64_MAX - 10, 64), -EFAULT);
	assert_int_equal(lbuf_op(b, ROSHM_OP_FETCH_ADD, hbt, 0, hl, 0, 8), -EINVAL);
	assert_int_equal(roshm_region_create(b, "lbuf-gone", 8192, NULL, &hx), 0);
	assert_int_equal(roshm_region_close(b, hx), 0);
	assert_int_equal(lbuf_op(b, ROSHM_OP_WRITE, hbt, 0, hx, 0, 64), -EBADF);
	assert_memory_equal(t, ref, REGION_SIZE);
	free(ref);
	roshm_close(b);
	roshm_close(a);
	assert_true(th_daemon_alive(&daemon_));
}

/*
 * ROSHM_POLICY_GRANT: only the owner, and a client of the tenant that owns
 * a region the owner granted it to (that very region: a new one under the
 * same name does not pass), may open it. Revoke, and closing the handle
 * the grant was made through, take it back.
 */
/*
 * A grant of a part (roshm_region_grant_part): its grantee opens that part
 * or less, and roshmd bounds every operation by it, whatever the library.
 */
static void test_grant_parts(void **state)
{
	struct roshm *a = attach("default", ""), *a2 = attach("default", ""),
		     *a3 = attach("default", "");
	struct roshm_region_opts grant = { .policy = ROSHM_POLICY_GRANT };
	const struct roshm_part rd = { .off = 0, .len = 64, .access = ROSHM_ACCESS_READ };
	const struct roshm_part bytes = { .off = 100, .len = 50,
					  .access = ROSHM_ACCESS_READ | ROSHM_ACCESS_ATOMIC };
	uint32_t hm, hr, hx, hmeta, hb, ht;
	uint64_t v = 0, size = 0;
	uint8_t *mem, *arena;

	(void)state;
	assert_non_null(a);
	assert_non_null(a2);
	assert_non_null(a3);
	assert_int_equal(roshm_region_create(a, "gp-mem", 8192, &grant, &hm), 0);
	assert_int_equal(roshm_region_create(a2, "gp-ring", 4096, NULL, &hr), 0);
	mem = roshm_region_data(a, hm, NULL);
	for (int i = 0; i < 8192; i++)
		mem[i] = (uint8_t)i;
	/* malformed parts; a part past the end */
	assert_int_equal(roshm_region_grant_part(a, hm, "gp-ring",
						 &(struct roshm_part){ .off = 8, .len = 0 }), -EINVAL);
	assert_int_equal(roshm_region_grant_part(a, hm, "gp-ring",
						 &(struct roshm_part){ .off = 8000, .len = 200 }),
			 -EINVAL);
	assert_int_equal(roshm_region_grant_part(a, hm, "gp-ring",
						 &(struct roshm_part){ .len = 8, .access = 8 }),
			 -EINVAL);
	assert_int_equal(roshm_region_grant_part(a, hm, "gp-ring", &rd), 0);
	assert_int_equal(roshm_region_grant_part(a, hm, "gp-ring", &bytes), 0);
	/* not all of it, nor more than a part, nor other operations */
	assert_int_equal(roshm_region_open(a2, "gp-mem", &hx, NULL), -EACCES);
	assert_int_equal(roshm_region_open_part(a2, "gp-mem",
						&(struct roshm_part){ .off = 0, .len = 65,
								      .access = ROSHM_ACCESS_READ },
						&hx, NULL), -EACCES);
	assert_int_equal(roshm_region_open_part(a2, "gp-mem",
						&(struct roshm_part){ .off = 0, .len = 64,
								      .access = ROSHM_ACCESS_WRITE },
						&hx, NULL), -EACCES);
	assert_int_equal(roshm_region_open_part(a2, "gp-mem",
						&(struct roshm_part){ .off = 0, .len = 64 }, &hx,
						NULL), -EACCES);   /* access 0: all of them */
	assert_int_equal(roshm_region_open_part(a2, "gp-mem",
						&(struct roshm_part){ .off = 90, .len = 30,
								      .access = ROSHM_ACCESS_READ },
						&hx, NULL), -EACCES);   /* across two parts */
	assert_int_equal(roshm_region_open_part(a2, "gp-mem",
						&(struct roshm_part){ .off = 8190, .len = 4 }, &hx,
						NULL), -EINVAL);
	/* a client that does not own gp-ring gets nothing */
	assert_int_equal(roshm_region_open_part(a3, "gp-mem", &rd, &hx, NULL), -EACCES);
	/* the granted part, or less */
	assert_int_equal(roshm_region_open_part(a2, "gp-mem", &rd, &hmeta, &size), 0);
	assert_int_equal(size, 8192);
	assert_int_equal(roshm_region_open_part(a2, "gp-mem",
						&(struct roshm_part){ .off = 104, .len = 8,
								      .access = ROSHM_ACCESS_ATOMIC },
						&ht, NULL), 0);
	assert_int_equal(roshm_region_open_part(a2, "gp-mem", &bytes, &hb, NULL), 0);
	arena = roshm_arena(a2, NULL);
	assert_int_equal(roshm_read_sync(a2, hmeta, 0, 0, 64), 0);
	assert_memory_equal(arena, mem, 64);
	/* and roshmd bounds each operation by it */
	assert_int_equal(roshm_read_sync(a2, hmeta, 1, 0, 64), -EFAULT);
	assert_int_equal(roshm_read_sync(a2, hmeta, 64, 0, 1), -EFAULT);
	assert_int_equal(roshm_read_sync(a2, hmeta, 4096, 0, 8), -EFAULT);
	memset(arena, 0xee, 64);
	assert_int_equal(roshm_write_sync(a2, hmeta, 0, 0, 8), -EACCES);
	assert_int_equal(roshm_fetch_add_sync(a2, hmeta, 0, 1, &v), -EACCES);
	assert_int_equal(roshm_read_sync(a2, hb, 100, 0, 50), 0);
	assert_memory_equal(arena, mem + 100, 50);
	assert_int_equal(roshm_read_sync(a2, hb, 99, 0, 2), -EFAULT);
	assert_int_equal(roshm_read_sync(a2, hb, 149, 0, 2), -EFAULT);
	assert_int_equal(roshm_write_sync(a2, hb, 104, 0, 8), -EACCES);
	assert_int_equal(roshm_fetch_add_sync(a2, hb, 104, 1, &v), 0);
	assert_int_equal(roshm_fetch_add_sync(a2, hb, 144, 1, &v), -EFAULT);  /* 144 + 8 > 150 */
	assert_int_equal(roshm_fetch_add_sync(a2, ht, 112, 1, &v), -EFAULT);
	assert_int_equal(roshm_read_sync(a2, ht, 104, 0, 8), -EACCES);
	assert_int_equal(mem[104], 104 + 1);
	for (int i = 0; i < 8192; i++)
		if (i < 104 || i >= 112)
			assert_int_equal(mem[i], (uint8_t)i);
	/* taking one part back closes the handles that rested on it only */
	assert_int_equal(roshm_region_revoke_part(a, hm, "gp-ring", &bytes), 0);
	assert_int_equal(roshm_read_sync(a2, hb, 100, 0, 8), -EBADF);
	assert_int_equal(roshm_fetch_add_sync(a2, ht, 104, 1, &v), -EBADF);
	assert_int_equal(roshm_read_sync(a2, hmeta, 0, 0, 8), 0);
	assert_int_equal(roshm_region_open_part(a2, "gp-mem", &bytes, &hx, NULL), -EACCES);
	/* a part granted twice stays until its second revoke */
	assert_int_equal(roshm_region_grant_part(a, hm, "gp-ring", &rd), 0);
	assert_int_equal(roshm_region_revoke_part(a, hm, "gp-ring", &rd), 0);
	assert_int_equal(roshm_read_sync(a2, hmeta, 0, 0, 8), 0);
	assert_int_equal(roshm_region_grant_part(a, hm, "gp-ring", &rd), 0);
	/* and revoking by name, every part */
	assert_int_equal(roshm_region_revoke_name(a, hm, "gp-ring"), 0);
	assert_int_equal(roshm_read_sync(a2, hmeta, 0, 0, 8), -EBADF);
	assert_int_equal(roshm_region_open_part(a2, "gp-mem", &rd, &hx, NULL), -EACCES);
	/* on a region of another policy a part is the opener's own limit */
	assert_int_equal(roshm_region_close(a2, hr), 0);
	assert_int_equal(roshm_region_create(a2, "gp-tenant", 4096, NULL, &hr), 0);
	assert_int_equal(roshm_region_open_part(a, "gp-tenant", &rd, &hx, NULL), 0);
	assert_int_equal(roshm_write_sync(a, hx, 0, 0, 8), -EACCES);
	assert_int_equal(roshm_read_sync(a, hx, 64, 0, 8), -EFAULT);
	assert_int_equal(roshm_read_sync(a, hx, 0, 0, 64), 0);
	roshm_close(a3);
	roshm_close(a2);
	roshm_close(a);
}

static void test_grant_policy(void **state)
{
	struct roshm *a = attach("default", ""), *a2 = attach("default", ""),
		     *a3 = attach("default", ""), *b = attach("blue", "blue-secret");
	struct roshm_region_opts grant = { .policy = ROSHM_POLICY_GRANT };
	struct roshm_region_opts to_default = { .policy = ROSHM_POLICY_LIST, .ntenants = 1,
						.tenants = { "default" } };
	uint32_t hm, hmo, hr, hring, hring2, hx, hb, hbring, ht;
	uint64_t word = 0x1122334455667788ull, got = 0;
	uint8_t *arena;

	(void)state;
	assert_non_null(a);
	assert_non_null(a2);
	assert_non_null(a3);
	assert_non_null(b);
	assert_int_equal(roshm_region_create(a, "gr-mem", 4096, &grant, &hm), 0);
	assert_int_equal(roshm_region_create(a, "gr-tenant", 4096, NULL, &ht), 0);
	assert_int_equal(roshm_region_create(a2, "gr-ring", 4096, NULL, &hr), 0);
	/* before any grant: the owner only */
	assert_int_equal(roshm_region_open(a2, "gr-mem", &hx, NULL), -EACCES);
	assert_int_equal(roshm_region_open(b, "default/gr-mem", &hx, NULL), -EACCES);
	assert_int_equal(roshm_region_open(a, "gr-mem", &hx, NULL), 0);
	assert_int_equal(roshm_region_close(a, hx), 0);
	/* granted to the owner of gr-ring (a2), through a's handle on it */
	assert_int_equal(roshm_region_open(a, "gr-ring", &hring, NULL), 0);
	assert_int_equal(roshm_region_grant(a, hm, hring), 0);
	assert_int_equal(roshm_region_grant(a, hm, hring), 0); /* again: nothing changes */
	assert_int_equal(roshm_region_open(a2, "gr-mem", &hmo, NULL), 0);
	arena = roshm_arena(a2, NULL);
	memcpy(arena, &word, 8);
	assert_int_equal(roshm_write_sync(a2, hmo, 64, 0, 8), 0);
	memcpy(&got, (uint8_t *)roshm_region_data(a, hm, NULL) + 64, 8);
	assert_true(got == word);
	/* a client of the tenant that only opened gr-ring does not own it */
	assert_int_equal(roshm_region_open(a3, "gr-ring", &hx, NULL), 0);
	assert_int_equal(roshm_region_open(a3, "gr-mem", &hx, NULL), -EACCES);
	/* what cannot be granted */
	assert_int_equal(roshm_region_grant(a, ht, hring), -EINVAL);      /* not a grant region */
	assert_int_equal(roshm_region_grant(a2, hr, hr), -EINVAL);         /* a2's, not a grant region */
	assert_int_equal(roshm_region_grant(a2, hmo, hr), -EACCES);        /* opened, not owned */
	assert_int_equal(roshm_region_grant(a, hm, 0x7777), -EBADF);
	assert_int_equal(roshm_region_create(b, "blue-ring", 4096, &to_default, &hbring), 0);
	assert_int_equal(roshm_region_open(a, "blue/blue-ring", &hb, NULL), 0);
	assert_int_equal(roshm_region_grant(a, hm, hb), -EACCES);          /* another tenant's */
	assert_int_equal(roshm_region_open(b, "default/gr-mem", &hx, NULL), -EACCES);
	/* revoke: new opens are refused, and the handle a2 holds is closed */
	assert_int_equal(roshm_region_revoke(a, hm, hring), 0);
	assert_int_equal(roshm_region_open(a2, "gr-mem", &hx, NULL), -EACCES);
	assert_int_equal(roshm_write_sync(a2, hmo, 64, 0, 8), -EBADF);
	assert_int_equal(roshm_region_close(a2, hmo), 0);
	/* closing the handle the grant went through takes it back */
	assert_int_equal(roshm_region_grant(a, hm, hring), 0);
	assert_int_equal(roshm_region_open(a2, "gr-mem", &hx, NULL), 0);
	assert_int_equal(roshm_region_close(a, hring), 0);
	assert_int_equal(roshm_region_open(a2, "gr-mem", &hx, NULL), -EACCES);
	/* a region made again under the granted name is another region */
	assert_int_equal(roshm_region_open(a, "gr-ring", &hring, NULL), 0);
	assert_int_equal(roshm_region_grant(a, hm, hring), 0);
	assert_int_equal(roshm_region_close(a2, hr), 0);
	assert_int_equal(roshm_region_grant(a, hm, hring), -ESTALE);       /* its owner closed it */
	assert_int_equal(roshm_region_create(a3, "gr-ring", 4096, NULL, &hring2), 0);
	assert_int_equal(roshm_region_open(a3, "gr-mem", &hx, NULL), -EACCES);
	assert_int_equal(roshm_region_close(a3, hring2), 0);
	assert_int_equal(roshm_region_close(a, hring), 0); /* and its grant with it */
	/* at most limits.max_grants: 64 in "4k" (the 65th is refused), the
	 * default (ROSHM_GRANTS_MAX) in "busy", where 100 fit (4 KiB pages
	 * only: a region each) */
	if (!strcmp(cfg_name, "4k") || !strcmp(cfg_name, "busy")) {
		enum { N = 100 };
		int lim = !strcmp(cfg_name, "4k") ? 64 : ROSHM_GRANTS_MAX, n = lim < N ? lim + 1 : N;
		uint32_t hs[N], ho[N];
		char name[32];

		for (int i = 0; i < n; i++) {
			snprintf(name, sizeof(name), "gr-many-%d", i);
			assert_int_equal(roshm_region_create(a2, name, 4096, NULL, &hs[i]), 0);
			assert_int_equal(roshm_region_open(a, name, &ho[i], NULL), 0);
			assert_int_equal(roshm_region_grant(a, hm, ho[i]), i < lim ? 0 : -ENOSPC);
		}
		assert_int_equal(roshm_region_open(a2, "gr-mem", &hx, NULL), 0);
		for (int i = 0; i < n; i++) {
			assert_int_equal(roshm_region_close(a, ho[i]), 0);
			assert_int_equal(roshm_region_close(a2, hs[i]), 0);
		}
	}
	roshm_close(b);
	roshm_close(a3);
	roshm_close(a2);
	roshm_close(a);
	assert_true(th_daemon_alive(&daemon_));
}

static const char *tenants_conf =
	"tenants = ( { name = \"default\"; token = \"\"; },\n"
	"            { name = \"blue\"; token = \"blue-secret\"; } );\n";

static int setup_4k(void **state)
{
	char extra[512];

	(void)state;
	cfg_name = "4k";
	snprintf(extra, sizeof(extra), "%schannel: { hugepages = \"off\"; };\n"
		 "limits: { max_grants = 64; };\n", tenants_conf);
	return th_daemon_start(&daemon_, "ops4k", extra) ? -1 : 0;
}

static int setup_huge(void **state)
{
	char extra[512];

	(void)state;
	cfg_name = "huge";
	snprintf(extra, sizeof(extra), "%schannel: { hugepages = \"on\"; arena_size = 2097152; };\n",
		 tenants_conf);
	return th_daemon_start(&daemon_, "opshuge", extra) ? -1 : 0;
}

static int setup_busy(void **state)
{
	char extra[512];

	(void)state;
	cfg_name = "busy";
	snprintf(extra, sizeof(extra), "%schannel: { hugepages = \"off\"; };\n"
		 "dataplane: { idle = \"busy\"; burst = 4; };\n", tenants_conf);
	return th_daemon_start(&daemon_, "opsbusy", extra) ? -1 : 0;
}

static int teardown(void **state)
{
	int st;

	(void)state;
	st = th_daemon_stop(&daemon_);
	if (st != 0) {
		fprintf(stderr, "roshmd exit status %d, expected 0\n", st);
		th_daemon_dump_log(&daemon_);
		return -1;
	}
	return 0;
}

static long free_hugepages(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	long n = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "HugePages_Free: %ld", &n) == 1)
			break;
	fclose(f);
	return n;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_opcode),
		cmocka_unit_test(test_concurrent_fetch_add),
		cmocka_unit_test(test_cmp_swap_lock),
		cmocka_unit_test(test_access_policy),
		cmocka_unit_test(test_region_close),
		cmocka_unit_test(test_lbuf),
		cmocka_unit_test(test_grant_policy),
		cmocka_unit_test(test_grant_parts),
	};
	int fails = cmocka_run_group_tests_name("local_ops_4k_pages", tests, setup_4k, teardown);

	/* busy polling with a small burst: round-robin across clients matters */
	fails += cmocka_run_group_tests_name("local_ops_busy_burst4", tests, setup_busy, teardown);

	/* Each client channel is 2 huge pages with a 2 MiB arena, each region one. */
	if (free_hugepages() >= 32)
		fails += cmocka_run_group_tests_name("local_ops_hugetlb", tests, setup_huge, teardown);
	else
		printf("local_ops_hugetlb: skipped: fewer than 32 free 2 MiB huge pages "
		       "(echo 256 > /proc/sys/vm/nr_hugepages as root to run it)\n");
	return fails ? 1 : 0;
}
