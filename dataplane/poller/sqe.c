// SPDX-License-Identifier: MIT
/* SQE validation: everything in an SQE is untrusted client input. */
#include <errno.h>

#include "poller/sqe.h"

/* off + len <= size without overflow */
static inline bool in_bounds(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

/* What an opcode needs of a region's ROSHM_ACCESS_* */
static uint32_t access_needed(uint8_t opcode)
{
	switch (opcode) {
	case ROSHM_OP_READ:
		return ROSHM_ACCESS_READ;
	case ROSHM_OP_FETCH_ADD:
	case ROSHM_OP_CMP_SWAP:
		return ROSHM_ACCESS_ATOMIC;
	default:
		return ROSHM_ACCESS_WRITE; /* WRITE, TXN_WRITE, TXN_COMMIT */
	}
}

/*
 * Limits on a client's operations: the opcode's access flag in @access,
 * then the offset (an address when @va_base is set: translated here, in
 * the private copy) within data offsets [lo, hi); 8 bytes for an atomic,
 * none for TXN_COMMIT. A region's limits on clients other than its owner,
 * and a handle's part. Bounds against the data area follow in the
 * caller's switch.
 */
static int limits(struct roshm_sqe *s, uint32_t access, uint64_t va_base, uint64_t lo,
		  uint64_t hi)
{
	uint32_t need = access_needed(s->opcode);
	uint64_t off = s->off, len = s->len;

	if ((access & need) != need)
		return -EACCES;
	if (s->opcode == ROSHM_OP_TXN_COMMIT)
		return 0;
	if (va_base) {
		if (off < va_base)
			return -EFAULT;
		off -= va_base;
	}
	if (s->opcode == ROSHM_OP_FETCH_ADD || s->opcode == ROSHM_OP_CMP_SWAP)
		len = 8;
	if (off < lo || off > hi || len > hi - off)
		return -EFAULT;
	s->off = off;
	return 0;
}

/*
 * The local buffer of a WRITE/READ with ROSHM_SQE_F_LBUF: a region this
 * client created (its own handle), open, with [arena_off, +len) inside its
 * data area.
 */
static int lbuf_check(const struct roshm_sqe *s, const struct rd_handle *handles,
		      uint32_t nhandles, struct rd_region **lbuf)
{
	uint32_t idx = s->lbuf_handle & 0xffffu;
	const struct rd_handle *h;

	if (idx >= nhandles)
		return -EBADF;
	h = &handles[idx];
	if (!h->region || h->gen != (uint16_t)(s->lbuf_handle >> 16))
		return -EBADF;
	if (!h->own || h->region->remote)
		return -EACCES;
	if (h->region->dead)
		return -ESTALE;
	if (!in_bounds(s->arena_off, s->len, h->region->data_size))
		return -EFAULT;
	*lbuf = h->region;
	return 0;
}

int rd_sqe_check(struct roshm_sqe *s, const struct rd_handle *handles,
		 uint32_t nhandles, uint64_t arena_size, struct rd_region **rg,
		 struct rd_region **lbuf)
{
	const struct rd_handle *h;
	uint32_t idx;
	int ret;

	*rg = NULL;
	*lbuf = NULL;
	if (s->opcode >= ROSHM_OP__MAX || (s->flags & ~ROSHM_SQE_F_VALID_MASK) ||
	    s->rsvd0 || s->rsvd2)
		return -EINVAL;
	if (s->flags & ROSHM_SQE_F_LBUF) {
		if (s->opcode != ROSHM_OP_WRITE && s->opcode != ROSHM_OP_READ)
			return -EINVAL;
	} else if (s->lbuf_handle) {
		return -EINVAL;
	}
	if (s->opcode == ROSHM_OP_NOP || s->opcode == ROSHM_OP_FENCE)
		return 0;

	idx = s->handle & 0xffffu;
	if (idx >= nhandles)
		return -EBADF;
	h = &handles[idx];
	if (!h->region || h->gen != (uint16_t)(s->handle >> 16))
		return -EBADF;
	if (h->region->dead)
		return -ESTALE;
	if (h->region->restricted && !h->own && s->opcode <= ROSHM_OP_TXN_COMMIT &&
	    (ret = limits(s, h->region->access, h->region->va_base, h->region->win_lo,
			  h->region->win_hi)))
		return ret;
	/* A handle opened for a part: its operations and offsets (data
	 * offsets now, after the region's own translation above). */
	if (h->part && s->opcode <= ROSHM_OP_TXN_COMMIT &&
	    (ret = limits(s, h->access, 0, h->lo, h->hi)))
		return ret;
	/* The owner's transactions too stay in the window: the owner-side
	 * apply cannot tell its records from a peer's (txn.c slot_copy). */
	if (h->region->restricted && h->own && s->opcode == ROSHM_OP_TXN_WRITE &&
	    (s->off < h->region->win_lo || s->off > h->region->win_hi ||
	     s->len > h->region->win_hi - s->off))
		return -EFAULT;

	switch (s->opcode) {
	case ROSHM_OP_WRITE:
	case ROSHM_OP_READ:
		if (!in_bounds(s->off, s->len, h->region->data_size))
			return -EFAULT;
		if (s->flags & ROSHM_SQE_F_LBUF) {
			if ((ret = lbuf_check(s, handles, nhandles, lbuf)))
				return ret;
		} else if (!in_bounds(s->arena_off, s->len, arena_size)) {
			return -EFAULT;
		}
		break;
	case ROSHM_OP_FETCH_ADD:
	case ROSHM_OP_CMP_SWAP:
		if (s->len != 8 || (s->off & 7))
			return -EINVAL;
		if (!in_bounds(s->off, 8, h->region->data_size))
			return -EFAULT;
		break;
	case ROSHM_OP_TXN_WRITE:
		if (!h->region->txn_slots)
			return -EOPNOTSUPP;
		if (!in_bounds(s->off, s->len, h->region->data_size) ||
		    !in_bounds(s->arena_off, s->len, arena_size))
			return -EFAULT;
		break;
	case ROSHM_OP_TXN_COMMIT:
		if (!h->region->txn_slots)
			return -EOPNOTSUPP;
		break;
	default:
		return -EINVAL;
	}
	*rg = h->region;
	return 0;
}
