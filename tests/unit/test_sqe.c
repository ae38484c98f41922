// SPDX-License-Identifier: MIT
/* SQE validation: one case per invalid field. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "roshm.h"
#include "poller/sqe.h"

#define ARENA 65536u
static struct rd_region rg = { .data_size = 4096 };
static struct rd_region dead = { .data_size = 4096, .dead = true };
/* regions of the client's own (ROSHM_SQE_F_LBUF buffers): open, and closed */
static struct rd_region own = { .data_size = 8192 };
static struct rd_region own_dead = { .data_size = 8192, .dead = true };
static struct rd_handle handles[6] = { { NULL, 0 }, { &rg, 3 }, { &dead, 0 }, { NULL, 5 },
				       { &own, 7, true }, { &own_dead, 1, true } };
static const uint32_t H = (3u << 16) | 1; /* index 1, generation 3 */
static const uint32_t OWN = (7u << 16) | 4;
static struct rd_region *lbuf_out;

static int check(const struct roshm_sqe *s0)
{
	struct rd_region *out = (void *)1;
	struct roshm_sqe c = *s0, *s = &c;
	int ret = rd_sqe_check(s, handles, 6, ARENA, &out, &lbuf_out);

	if (ret == 0 && s->opcode != ROSHM_OP_NOP && s->opcode != ROSHM_OP_FENCE)
		assert_ptr_equal(out, &rg);
	if (ret == 0 && !(s->flags & ROSHM_SQE_F_LBUF))
		assert_null(lbuf_out);
	return ret;
}

static void test_valid(void **st)
{
	struct roshm_sqe s;

	(void)st;
	roshm_prep_nop(&s);
	assert_int_equal(check(&s), 0);
	roshm_prep_fence(&s);
	assert_int_equal(check(&s), 0);
	roshm_prep_write(&s, H, 0, 0, 4096);
	assert_int_equal(check(&s), 0);
	roshm_prep_read(&s, H, 4095, ARENA - 1, 1);
	assert_int_equal(check(&s), 0);
	roshm_prep_write(&s, H, 4096, 0, 0); /* empty at the end: allowed */
	assert_int_equal(check(&s), 0);
	roshm_prep_fetch_add(&s, H, 4088, 1);
	assert_int_equal(check(&s), 0);
	roshm_prep_cmp_swap(&s, H, 0, 1, 2);
	s.flags = ROSHM_SQE_F_FENCE;
	assert_int_equal(check(&s), 0);
}

static void test_opcode(void **st)
{
	struct roshm_sqe s;

	(void)st;
	roshm_prep_write(&s, H, 0, 0, 8);
	s.opcode = ROSHM_OP__MAX;
	assert_int_equal(check(&s), -EINVAL);
	s.opcode = 255;
	assert_int_equal(check(&s), -EINVAL);
	roshm_prep_txn_commit(&s, H);
	assert_int_equal(check(&s), -EOPNOTSUPP);
}

static void test_flags_and_reserved(void **st)
{
	struct roshm_sqe s;

	(void)st;
	roshm_prep_write(&s, H, 0, 0, 8);
	s.flags = 0x40;
	assert_int_equal(check(&s), -EINVAL);
	roshm_prep_write(&s, H, 0, 0, 8);
	s.rsvd0 = 1;
	assert_int_equal(check(&s), -EINVAL);
	roshm_prep_write(&s, H, 0, 0, 8);
	s.lbuf_handle = OWN; /* without ROSHM_SQE_F_LBUF: a reserved field */
	assert_int_equal(check(&s), -EINVAL);
	roshm_prep_nop(&s);
	s.rsvd2 = 1;
	assert_int_equal(check(&s), -EINVAL);
}

static void test_handle(void **st)
{
	struct roshm_sqe s;

	(void)st;
	roshm_prep_write(&s, 0, 0, 0, 8);                 /* empty slot */
	assert_int_equal(check(&s), -EBADF);
	roshm_prep_write(&s, 1, 0, 0, 8);                 /* wrong generation */
	assert_int_equal(check(&s), -EBADF);
	roshm_prep_write(&s, (3u << 16) | 4, 0, 0, 8);    /* index past table */
	assert_int_equal(check(&s), -EBADF);
	roshm_prep_write(&s, 0xffffffffu, 0, 0, 8);
	assert_int_equal(check(&s), -EBADF);
	roshm_prep_write(&s, (5u << 16) | 3, 0, 0, 8);    /* closed slot, old gen */
	assert_int_equal(check(&s), -EBADF);
	roshm_prep_write(&s, 2, 0, 0, 8);                 /* region closed by owner */
	assert_int_equal(check(&s), -ESTALE);
}

static void test_offset_and_length(void **st)
{
	struct roshm_sqe s;

	(void)st;
	roshm_prep_write(&s, H, 4097, 0, 0);
	assert_int_equal(check(&s), -EFAULT);
	roshm_prep_write(&s, H, 4000, 0, 97);
	assert_int_equal(check(&s), -EFAULT);
	roshm_prep_read(&s, H, 0, 0, 4097);
	assert_int_equal(check(&s), -EFAULT);
	roshm_prep_read(&s, H, 0, ARENA - 8, 9);
	assert_int_equal(check(&s), -EFAULT);
	roshm_prep_read(&s, H, 0, ARENA + 1, 0);
	assert_int_equal(check(&s), -EFAULT);
}

static void test_overflow(void **st)
{
	struct roshm_sqe s;

	(void)st;
	/* off + len wraps to a small number: must still be rejected */
	roshm_prep_write(&s, H, UINT64_MAX - 7, 0, 16);
	assert_int_equal(check(&s), -EFAULT);
	roshm_prep_write(&s, H, 0, UINT64_MAX - 7, 16);
	assert_int_equal(check(&s), -EFAULT);
	roshm_prep_fetch_add(&s, H, 0xfffffffffffffff8ull, 1);
	assert_int_equal(check(&s), -EFAULT);
}

static void test_alignment(void **st)
{
	struct roshm_sqe s;

	(void)st;
	for (uint64_t off = 1; off < 8; off++) {
		roshm_prep_fetch_add(&s, H, off, 1);
		assert_int_equal(check(&s), -EINVAL);
		roshm_prep_cmp_swap(&s, H, 64 + off, 1, 2);
		assert_int_equal(check(&s), -EINVAL);
	}
	roshm_prep_fetch_add(&s, H, 0, 1);
	s.len = 4;
	assert_int_equal(check(&s), -EINVAL);
	roshm_prep_fetch_add(&s, H, 4096, 1); /* aligned but past the end */
	assert_int_equal(check(&s), -EFAULT);
}

/*
 * ROSHM_SQE_F_LBUF: the local buffer is a region the client created, never
 * one it only opened, never the arena's bounds.
 */
static void test_lbuf(void **st)
{
	struct roshm_sqe s;

	(void)st;
	/* its own region, the whole data area (past the arena's size) */
	roshm_prep_write(&s, H, 0, 0, 4096);
	roshm_sqe_set_lbuf(&s, OWN, 8192 - 4096);
	assert_int_equal(check(&s), 0);
	assert_ptr_equal(lbuf_out, &own);
	roshm_prep_read(&s, H, 4000, 0, 96);
	roshm_sqe_set_lbuf(&s, OWN, 8096);
	assert_int_equal(check(&s), 0);
	assert_ptr_equal(lbuf_out, &own);
	/* out of its data area, or wrapping */
	roshm_prep_write(&s, H, 0, 0, 97);
	roshm_sqe_set_lbuf(&s, OWN, 8096);
	assert_int_equal(check(&s), -EFAULT);
	roshm_prep_read(&s, H, 0, 0, 16);
	roshm_sqe_set_lbuf(&s, OWN, UINT64_MAX - 7);
	assert_int_equal(check(&s), -EFAULT);
	/* a region it opened, not created: the target's handle as the buffer */
	roshm_prep_write(&s, H, 0, 0, 8);
	roshm_sqe_set_lbuf(&s, H, 0);
	assert_int_equal(check(&s), -EACCES);
	/* no such handle, a stale generation, past the table, closed */
	roshm_prep_write(&s, H, 0, 0, 8);
	roshm_sqe_set_lbuf(&s, 0, 0);
	assert_int_equal(check(&s), -EBADF);
	roshm_sqe_set_lbuf(&s, (6u << 16) | 4, 0);
	assert_int_equal(check(&s), -EBADF);
	roshm_sqe_set_lbuf(&s, (7u << 16) | 6, 0);
	assert_int_equal(check(&s), -EBADF);
	roshm_sqe_set_lbuf(&s, (1u << 16) | 5, 0);
	assert_int_equal(check(&s), -ESTALE);
	/* only WRITE and READ take it */
	roshm_prep_fetch_add(&s, H, 0, 1);
	roshm_sqe_set_lbuf(&s, OWN, 0);
	assert_int_equal(check(&s), -EINVAL);
	roshm_prep_txn_write(&s, H, 0, 0, 8);
	roshm_sqe_set_lbuf(&s, OWN, 0);
	assert_int_equal(check(&s), -EINVAL);
	roshm_prep_nop(&s);
	roshm_sqe_set_lbuf(&s, OWN, 0);
	assert_int_equal(check(&s), -EINVAL);
	/* the target's checks come first: a bad target is its own error */
	roshm_prep_write(&s, H, 4090, 0, 8);
	roshm_sqe_set_lbuf(&s, OWN, 0);
	assert_int_equal(check(&s), -EFAULT);
	roshm_prep_write(&s, 2, 0, 0, 8);
	roshm_sqe_set_lbuf(&s, OWN, 0);
	assert_int_equal(check(&s), -ESTALE);
}

/*
 * A region whose owner limits the others (roshm_region_opts): READ and
 * atomics only, the window [1000, 1100) of an 8192-byte data area, offsets
 * are addresses from 0x7f0000000000. The owner's handle is not limited.
 */
static struct rd_region mr = { .data_size = 8192, .restricted = true,
			       .access = ROSHM_ACCESS_READ | ROSHM_ACCESS_ATOMIC,
			       .win_lo = 1000, .win_hi = 1100, .va_base = 0x7f0000000000ull };
static struct rd_handle mhandles[2] = { { &mr, 1, false }, { &mr, 2, true } };

static int mcheck(struct roshm_sqe *s, uint32_t idx)
{
	struct rd_region *out = NULL, *lbuf = NULL;

	s->handle = (mhandles[idx].gen << 16) | idx;
	return rd_sqe_check(s, mhandles, 2, ARENA, &out, &lbuf);
}

static void test_window_and_access(void **st)
{
	const uint64_t va = 0x7f0000000000ull;
	struct roshm_sqe s;

	(void)st;
	/* an opener: an address in the window reads, and becomes the data offset */
	roshm_prep_read(&s, 0, va + 1000, 0, 100);
	assert_int_equal(mcheck(&s, 0), 0);
	assert_int_equal(s.off, 1000);
	/* one byte out of the window at either end, or below va_base */
	roshm_prep_read(&s, 0, va + 999, 0, 10);
	assert_int_equal(mcheck(&s, 0), -EFAULT);
	roshm_prep_read(&s, 0, va + 1000, 0, 101);
	assert_int_equal(mcheck(&s, 0), -EFAULT);
	roshm_prep_read(&s, 0, 1000, 0, 8);
	assert_int_equal(mcheck(&s, 0), -EFAULT);
	roshm_prep_read(&s, 0, UINT64_MAX - 3, 0, 8); /* no wrap past the window */
	assert_int_equal(mcheck(&s, 0), -EFAULT);
	/* data offsets are not addresses here: inside the data area, still refused */
	roshm_prep_read(&s, 0, 1000, 0, 8);
	assert_int_equal(mcheck(&s, 0), -EFAULT);
	/* WRITE was not given: refused whatever the offset */
	roshm_prep_write(&s, 0, va + 1000, 0, 8);
	assert_int_equal(mcheck(&s, 0), -EACCES);
	roshm_prep_txn_commit(&s, 0);
	assert_int_equal(mcheck(&s, 0), -EACCES);
	/* atomics were: in the window, aligned */
	roshm_prep_fetch_add(&s, 0, va + 1088, 1);
	assert_int_equal(mcheck(&s, 0), 0);
	assert_int_equal(s.off, 1088);
	roshm_prep_fetch_add(&s, 0, va + 1096, 1); /* 8 bytes past 1100 */
	assert_int_equal(mcheck(&s, 0), -EFAULT);
	roshm_prep_cmp_swap(&s, 0, va + 1083, 0, 1); /* in the window, misaligned */
	assert_int_equal(mcheck(&s, 0), -EINVAL);
	/* the owner: plain data offsets over the whole data area, every opcode */
	roshm_prep_write(&s, 0, 0, 0, 8192);
	assert_int_equal(mcheck(&s, 1), 0);
	assert_int_equal(s.off, 0);
	roshm_prep_write(&s, 0, va + 1000, 0, 8);
	assert_int_equal(mcheck(&s, 1), -EFAULT);
	/* ... but its transactions stay in the window (the owner-side apply
	 * cannot tell its log records from a peer's): out of it -EFAULT, in
	 * it on to the next check (this region has no log) */
	roshm_prep_txn_write(&s, 0, 0, 0, 8);
	assert_int_equal(mcheck(&s, 1), -EFAULT);
	roshm_prep_txn_write(&s, 0, 1096, 0, 8);
	assert_int_equal(mcheck(&s, 1), -EFAULT);
	roshm_prep_txn_write(&s, 0, 1000, 0, 100);
	assert_int_equal(mcheck(&s, 1), -EOPNOTSUPP);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid),
		cmocka_unit_test(test_opcode),
		cmocka_unit_test(test_flags_and_reserved),
		cmocka_unit_test(test_handle),
		cmocka_unit_test(test_offset_and_length),
		cmocka_unit_test(test_overflow),
		cmocka_unit_test(test_alignment),
		cmocka_unit_test(test_window_and_access),
		cmocka_unit_test(test_lbuf),
	};

	return cmocka_run_group_tests_name("sqe_validation", tests, NULL, NULL);
}
