// SPDX-License-Identifier: MIT
/*
 * libroshm-verbs: a remote MR's metadata page as a peer reads it (a private
 * copy of bytes the MR's owner wrote): its checks and the lookup of a remote
 * address in its segments. No libroshm call here: tests/fuzz/fuzz_verbs_meta.c
 * drives it with any bytes.
 */
#include <errno.h>

#include <infiniband/verbs.h>

#include "rv.h"

int rv_meta_check(const struct rv_meta *m, uint32_t rkey)
{
	uint64_t va;

	if (m->magic != RV_META_MAGIC || m->rkey != rkey || !m->nseg || m->nseg > RV_MR_SEGS ||
	    m->addr + m->length < m->addr)
		return -EINVAL;
	va = m->addr & ~(RV_PAGE - 1);
	for (uint32_t i = 0; i < m->nseg; i++) {
		const struct rv_seg *g = &m->seg[i];

		if (g->va != va || !g->len || g->len & (RV_PAGE - 1) || va + g->len < va ||
		    g->data_off < RV_PAGE || g->data_off & (RV_PAGE - 1) ||
		    g->data_off + g->len < g->data_off)
			return -EINVAL;
		va += g->len;
	}
	return va < m->addr + m->length ? -EINVAL : 0;
}

uint32_t rv_meta_at(const struct rv_meta *m, uint64_t va, uint64_t *off, uint64_t *room)
{
	uint32_t i = 0;

	while (i + 1 < m->nseg && va >= m->seg[i + 1].va)
		i++;
	*off = m->seg[i].data_off + (va - m->seg[i].va);
	*room = m->seg[i].va + m->seg[i].len - va;
	return i;
}

bool rv_seg_part(uint64_t addr, uint64_t length, const struct rv_seg *g, struct roshm_part *p)
{
	uint64_t lo = addr > g->va ? addr : g->va;
	uint64_t end = addr + length, gend = g->va + g->len;
	uint64_t hi = end < gend ? end : gend;

	if (lo >= hi)
		return false;
	p->off = g->data_off + (lo - g->va);
	p->len = hi - lo;
	return true;
}

uint32_t rv_roshm_access(uint32_t a)
{
	return (a & IBV_ACCESS_REMOTE_READ ? ROSHM_ACCESS_READ : 0) |
	       (a & IBV_ACCESS_REMOTE_WRITE ? ROSHM_ACCESS_WRITE : 0) |
	       (a & IBV_ACCESS_REMOTE_ATOMIC ? ROSHM_ACCESS_ATOMIC : 0);
}
