/* SPDX-License-Identifier: MIT */
#ifndef RD_SQE_H
#define RD_SQE_H

#include "roshmd.h"

/*
 * Validate an SQE that was already copied out of shared memory. Returns 0
 * and the target region in *rg (NULL for NOP/FENCE), or the -errno the
 * client gets in its CQE:
 *   -EINVAL      unknown opcode, unknown flag, reserved field set, bad length
 *                or misaligned atomic offset
 *   -EBADF       handle not open in this client's table (or stale generation)
 *   -ESTALE      the region was closed by its owner
 *   -EFAULT      offset/length outside the region's data area or the arena
 *   -EOPNOTSUPP  transaction opcode on a region without a staging log
 *   -EACCES      the region's owner did not give others this operation
 *                (ROSHM_ACCESS_*; the owner's own handle is not limited)
 * On a region with a window or va_base (roshm_region_opts), an opener's
 * offset must lie in the window (-EFAULT) and, with va_base, is an address:
 * *s's off is then rewritten to the data offset.
 * A TXN_WRITE with an invalid handle still yields *rg == NULL.
 * A WRITE/READ with ROSHM_SQE_F_LBUF names its local buffer in a region of
 * the client's own (lbuf_handle; arena_off is then its data offset),
 * returned in *lbuf (else NULL): -EBADF (no such handle), -EACCES (not one
 * the client created), -ESTALE (closed), -EFAULT (outside its data area);
 * the flag on another opcode, or lbuf_handle without it: -EINVAL.
 */
int rd_sqe_check(struct roshm_sqe *s, const struct rd_handle *handles,
		 uint32_t nhandles, uint64_t arena_size, struct rd_region **rg,
		 struct rd_region **lbuf);

/* Handles: index in the low 16 bits, generation in the high 16. */
static inline uint32_t rd_handle_make(uint32_t idx, uint16_t gen)
{
	return idx | ((uint32_t)gen << 16);
}

#endif
