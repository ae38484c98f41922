// SPDX-License-Identifier: MIT
/*
 * rd_sqe_check (dataplane/poller/sqe.c) on a 64-byte SQE, as a client writes it
 * into shared memory, against a fixed handle table: regions of different
 * sizes, with and without a transaction log, a dead one, empty slots and
 * stale generations, regions whose owner limits the others (an access mask,
 * a window, offsets as addresses from va_base) opened by the owner and by
 * others, and the client's own regions as the local buffers of
 * ROSHM_SQE_F_LBUF WRITEs and READs. Beyond not crashing, every verdict, and the data offset a
 * va_base region's address becomes, is checked against an independent
 * model of the rules (128-bit bounds arithmetic).
 *
 * Input: 64 bytes of SQE, then optionally one byte choosing the arena size.
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "poller/sqe.h"

static struct rd_region regions[] = {
	{ .data_size = 4096 },
	{ .data_size = 1u << 20, .txn_slots = 16, .slot_size = 4096 },
	{ .data_size = 8, .txn_slots = 1, .slot_size = 64 },
	{ .data_size = 4096, .dead = true },
	{ .data_size = 0 },
	{ .data_size = UINT64_MAX - 7 },    /* bounds arithmetic at the top */
	/* limited for others: read + atomics in [24, 4000), addresses from 2^47 */
	{ .data_size = 8192, .restricted = true, .access = ROSHM_ACCESS_READ | ROSHM_ACCESS_ATOMIC,
	  .win_lo = 24, .win_hi = 4000, .va_base = 1ull << 47 },
	/* write only, the whole area, addresses near the top of the space */
	{ .data_size = 1u << 20, .txn_slots = 16, .slot_size = 4096, .restricted = true,
	  .access = ROSHM_ACCESS_WRITE, .win_lo = 0, .win_hi = 1u << 20,
	  .va_base = UINT64_MAX - (1u << 20) },
	/* everything, a window, offsets */
	{ .data_size = 4096, .restricted = true, .access = ROSHM_ACCESS_ALL, .win_lo = 64,
	  .win_hi = 128 },
	/* remote: never a client's own in roshmd, but the rule must hold anyway */
	{ .data_size = 4096, .remote = true },
};
static struct rd_handle handles[] = {
	{ NULL, 0 },
	{ &regions[0], 1 },
	{ &regions[1], 2 },
	{ &regions[2], 0xffff },
	{ &regions[3], 0 },
	{ NULL, 7 },        /* closed slot that had generation 7 */
	{ &regions[4], 3 },
	{ &regions[5], 9 },
	{ &regions[6], 4 },
	{ &regions[6], 5, true },   /* its owner */
	{ &regions[7], 6 },
	{ &regions[7], 7, true },
	{ &regions[8], 8 },
	/* the client's own regions, its ROSHM_SQE_F_LBUF buffers */
	{ &regions[0], 10, true },
	{ &regions[3], 11, true },  /* closed */
	{ &regions[5], 12, true },
	{ &regions[9], 13, true },  /* a remote region marked own: never a buffer */
	/* opened for a part (ABI 6): data offsets [lo, hi), those operations */
	{ .region = &regions[0], .gen = 14, .part = true, .access = ROSHM_ACCESS_READ,
	  .lo = 100, .hi = 150 },
	{ .region = &regions[6], .gen = 15, .part = true,
	  .access = ROSHM_ACCESS_ATOMIC | ROSHM_ACCESS_WRITE, .lo = 64, .hi = 96 },
	{ .region = &regions[7], .gen = 16, .own = true, .part = true,
	  .access = ROSHM_ACCESS_WRITE, .lo = 0, .hi = 4096 },
	{ .region = &regions[5], .gen = 17, .part = true, .access = ROSHM_ACCESS_ALL,
	  .lo = 4000, .hi = UINT64_MAX },
};
#define NHANDLES (sizeof(handles) / sizeof(handles[0]))
static const uint64_t arenas[] = { 1u << 16, 0, 4096, 1u << 22, UINT64_MAX };

static int fits(uint64_t off, uint64_t len, uint64_t size)
{
	return (unsigned __int128)off + len <= size;
}

/* What rd_sqe_check must return, from the contract in sqe.h; *off: the
 * data offset it must leave in the SQE. */
static int model(const struct roshm_sqe *s0, uint64_t arena, const struct rd_region **want,
		 const struct rd_region **want_lbuf, uint64_t *off)
{
	const struct rd_handle *h;
	struct roshm_sqe sc = *s0, *s = &sc;
	uint32_t idx = s->handle & 0xffff;

	*want = NULL;
	*want_lbuf = NULL;
	*off = s->off;
	if (s->opcode >= ROSHM_OP__MAX || (s->flags & ~ROSHM_SQE_F_VALID_MASK) || s->rsvd0 ||
	    s->rsvd2)
		return -EINVAL;
	if ((s->flags & ROSHM_SQE_F_LBUF) ? s->opcode != ROSHM_OP_WRITE && s->opcode != ROSHM_OP_READ
					  : s->lbuf_handle != 0)
		return -EINVAL;
	if (s->opcode == ROSHM_OP_NOP || s->opcode == ROSHM_OP_FENCE)
		return 0;
	if (idx >= NHANDLES || !handles[idx].region || handles[idx].gen != s->handle >> 16)
		return -EBADF;
	h = &handles[idx];
	if (h->region->dead)
		return -ESTALE;
	if (h->region->restricted && !h->own) {
		const struct rd_region *r = h->region;
		uint32_t need = s->opcode == ROSHM_OP_READ ? ROSHM_ACCESS_READ :
				s->opcode == ROSHM_OP_FETCH_ADD || s->opcode == ROSHM_OP_CMP_SWAP ?
				ROSHM_ACCESS_ATOMIC : ROSHM_ACCESS_WRITE;
		unsigned __int128 a = s->off, len = s->len;

		if (!(r->access & need))
			return -EACCES;
		if (s->opcode != ROSHM_OP_TXN_COMMIT) {
			if (s->opcode == ROSHM_OP_FETCH_ADD || s->opcode == ROSHM_OP_CMP_SWAP)
				len = 8;
			if (a < r->va_base)
				return -EFAULT;
			a -= r->va_base;
			if (a < r->win_lo || a + len > r->win_hi)
				return -EFAULT;
			s->off = (uint64_t)a;
			*off = s->off;
		}
	} else if (h->region->restricted && s->opcode == ROSHM_OP_TXN_WRITE &&
		   ((unsigned __int128)s->off < h->region->win_lo ||
		    (unsigned __int128)s->off + s->len > h->region->win_hi)) {
		return -EFAULT; /* the owner's transactions stay in the window */
	}
	if (h->part && s->opcode <= ROSHM_OP_TXN_COMMIT) {
		uint32_t need = s->opcode == ROSHM_OP_READ ? ROSHM_ACCESS_READ :
				s->opcode == ROSHM_OP_FETCH_ADD || s->opcode == ROSHM_OP_CMP_SWAP ?
				ROSHM_ACCESS_ATOMIC : ROSHM_ACCESS_WRITE;
		unsigned __int128 len = s->len;

		if (!(h->access & need))
			return -EACCES;
		if (s->opcode != ROSHM_OP_TXN_COMMIT) {
			if (s->opcode == ROSHM_OP_FETCH_ADD || s->opcode == ROSHM_OP_CMP_SWAP)
				len = 8;
			if (s->off < h->lo || (unsigned __int128)s->off + len > h->hi)
				return -EFAULT;
		}
	}
	switch (s->opcode) {
	case ROSHM_OP_WRITE:
	case ROSHM_OP_READ:
		if (!fits(s->off, s->len, h->region->data_size))
			return -EFAULT;
		if (s->flags & ROSHM_SQE_F_LBUF) {
			uint32_t li = s->lbuf_handle & 0xffff;
			const struct rd_handle *l = li < NHANDLES ? &handles[li] : NULL;

			if (!l || !l->region || l->gen != s->lbuf_handle >> 16)
				return -EBADF;
			if (!l->own || l->region->remote)
				return -EACCES;
			if (l->region->dead)
				return -ESTALE;
			if (!fits(s->arena_off, s->len, l->region->data_size))
				return -EFAULT;
			*want_lbuf = l->region;
		} else if (!fits(s->arena_off, s->len, arena)) {
			return -EFAULT;
		}
		break;
	case ROSHM_OP_FETCH_ADD:
	case ROSHM_OP_CMP_SWAP:
		if (s->len != 8 || s->off % 8)
			return -EINVAL;
		if (!fits(s->off, 8, h->region->data_size))
			return -EFAULT;
		break;
	case ROSHM_OP_TXN_WRITE:
		if (!h->region->txn_slots)
			return -EOPNOTSUPP;
		if (!fits(s->off, s->len, h->region->data_size) || !fits(s->arena_off, s->len, arena))
			return -EFAULT;
		break;
	case ROSHM_OP_TXN_COMMIT:
		if (!h->region->txn_slots)
			return -EOPNOTSUPP;
		break;
	}
	*want = h->region;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct roshm_sqe s, orig;
	const struct rd_region *want, *want_lbuf;
	uint64_t off;
	struct rd_region *rg = (struct rd_region *)&regions[0]; /* must be overwritten */
	struct rd_region *lbuf = (struct rd_region *)&regions[0];
	uint64_t arena;
	int ret, exp;

	if (size < sizeof(s))
		return 0;
	/* the poller's own copy: shared memory is read once */
	memcpy(&s, data, sizeof(s));
	orig = s;
	arena = size > sizeof(s) ? arenas[data[sizeof(s)] % (sizeof(arenas) / sizeof(arenas[0]))] : arenas[0];
	ret = rd_sqe_check(&s, handles, NHANDLES, arena, &rg, &lbuf);
	exp = model(&orig, arena, &want, &want_lbuf, &off);
	if (ret != exp)
		fuzz_fail("opcode %u flags %#x handle %#x off %llu arena_off %llu len %u arena %llu: "
			  "rd_sqe_check %d, the rules say %d", orig.opcode, orig.flags, orig.handle,
			  (unsigned long long)orig.off, (unsigned long long)orig.arena_off, orig.len,
			  (unsigned long long)arena, ret, exp);
	if (!ret && s.off != off)
		fuzz_fail("opcode %u handle %#x off %llu: data offset %llu, the rules say %llu",
			  orig.opcode, orig.handle, (unsigned long long)orig.off,
			  (unsigned long long)s.off, (unsigned long long)off);
	if (rg != want)
		fuzz_fail("opcode %u handle %#x: region %p, expected %p", s.opcode, s.handle, (void *)rg,
			  (const void *)want);
	if (lbuf != (ret ? NULL : want_lbuf))
		fuzz_fail("opcode %u flags %#x lbuf_handle %#x: buffer region %p, expected %p",
			  orig.opcode, orig.flags, orig.lbuf_handle, (void *)lbuf,
			  (const void *)want_lbuf);
	return 0;
}
