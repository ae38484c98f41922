// SPDX-License-Identifier: MIT
/*
 * libroshm-verbs: a remote MR's metadata page, written by the MR's owner and
 * read by a peer (client-lib/verbs/mr_meta.c). Input: the rkey the peer
 * resolved (4 bytes), an address to look up (8 bytes), then the page's bytes
 * (zero-padded). Properties: rv_meta_check accepts exactly what a reference
 * written here in 128-bit arithmetic accepts; for an accepted page, every
 * address in [addr, addr + length) lies in the segment rv_meta_at names, at
 * the offset and with the room that segment gives, never past its end.
 */
#include <string.h>

#include "fuzz.h"
#include "rv.h"

typedef unsigned __int128 u128;

static int reference(const struct rv_meta *m, uint32_t rkey)
{
	u128 va, end = (u128)m->addr + m->length;

	if (m->magic != RV_META_MAGIC || m->rkey != rkey || m->nseg < 1 || m->nseg > RV_MR_SEGS ||
	    end > UINT64_MAX)
		return 0;
	va = m->addr - m->addr % RV_PAGE;
	for (uint32_t i = 0; i < m->nseg; i++) {
		const struct rv_seg *g = &m->seg[i];

		if (g->va != va || g->len == 0 || g->len % RV_PAGE || va + g->len > UINT64_MAX ||
		    g->data_off < RV_PAGE || g->data_off % RV_PAGE ||
		    (u128)g->data_off + g->len > UINT64_MAX)
			return 0;
		va += g->len;
	}
	return va >= end;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rv_meta m;
	uint32_t rkey;
	uint64_t probe, off, room;
	int ok;

	if (size < 12)
		return 0;
	memcpy(&rkey, data, 4);
	memcpy(&probe, data + 4, 8);
	memset(&m, 0, sizeof(m));
	memcpy(&m, data + 12, size - 12 < sizeof(m) ? size - 12 : sizeof(m));
	ok = rv_meta_check(&m, rkey) == 0;
	if (ok != reference(&m, rkey))
		fuzz_fail("rv_meta_check says %s, the reference %s", ok ? "ok" : "no",
			  ok ? "no" : "ok");
	if (!ok || !m.length)
		return 0;
	/* three addresses: the probe's, the first and the last byte */
	uint64_t vas[3] = { m.addr + probe % m.length, m.addr, m.addr + m.length - 1 };

	for (int j = 0; j < 3; j++) {
		uint32_t i = rv_meta_at(&m, vas[j], &off, &room);
		const struct rv_seg *g = &m.seg[i];

		if (i >= m.nseg || vas[j] < g->va || vas[j] - g->va >= g->len)
			fuzz_fail("address %#llx: segment %u does not hold it", (unsigned long long)vas[j], i);
		if (off != g->data_off + (vas[j] - g->va) || room != g->len - (vas[j] - g->va) || !room)
			fuzz_fail("address %#llx: offset or room wrong", (unsigned long long)vas[j]);
	}
	return 0;
}
