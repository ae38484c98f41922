// SPDX-License-Identifier: MIT
/*
 * libroshm-verbs: the fragment headers a connected peer writes into an RC
 * QP's inbound ring (client-lib/verbs/frag.c, used by recv.c). Input: the
 * ring's size (1 byte: 1 << (b % 13) slots), the connected QPN (4 bytes),
 * then fragment headers of 32 bytes each (struct rv_frag up to rsvd1), read
 * in turn at the ring position the accepted ones reached, as rv_deliver
 * reads them; the first refused one ends the stream (the QP fails).
 * Properties: rv_frag_ok accepts exactly what a reference written here (in
 * 128-bit arithmetic, with its own message state) accepts; an accepted
 * fragment's slots lie inside the ring and its payload inside its slots;
 * its payload goes to message bytes [off, off + len) inside the message's
 * total, which is at most RV_MSG_MAX; a LAST fragment ends the message at
 * exactly its total; a message's fragments keep its opcode and total.
 */
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "rv.h"

typedef unsigned __int128 u128;

struct ref {
	bool open;
	unsigned op;
	u128 total, off;
};

static bool reference(const struct ref *s, uint32_t n, uint32_t qpn, const struct rv_frag *f, uint32_t at)
{
	bool first = f->flags & 1, last = f->flags & 2;
	u128 total = first ? f->total : s->total, off = first ? 0 : s->off;
	unsigned op = first ? f->opcode : s->op;

	if (f->nslots == 0 || (u128)at + f->nslots > n || (u128)f->len + RV_SLOT > (u128)f->nslots * RV_SLOT)
		return false;
	if (f->opcode == 0 || f->opcode > 4 || f->flags > 3 || f->src_qp != qpn)
		return false;
	if (first == s->open || f->opcode != op || f->total != total || total > (1u << 30))
		return false;
	if (op == 3)   /* WRITE_WITH_IMM: one notice, no payload */
		return first && last && f->len == 0;
	if (off + f->len > total)
		return false;
	return !last || off + f->len == total;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rv_rmsg m = { 0 };
	struct ref s = { 0 };
	uint32_t n, qpn;
	uint64_t cons = 0;

	if (size < 5)
		return 0;
	n = 1u << (data[0] % 13);
	memcpy(&qpn, data + 1, 4);
	for (size_t p = 5; p + 32 <= size; p += 32) {
		struct rv_frag f;
		uint32_t at = (uint32_t)(cons & (n - 1));
		uint64_t off;
		bool ok;

		memset(&f, 0, sizeof(f));
		memcpy(&f, data + p, 32);
		ok = rv_frag_ok(&m, n, qpn, &f, at);
		if (ok != reference(&s, n, qpn, &f, at))
			fuzz_fail("rv_frag_ok says %s, the reference %s", ok ? "ok" : "no", ok ? "no" : "ok");
		if (!ok)
			return 0;   /* the QP fails: nothing more is read */
		if ((uint64_t)at + f.nslots > n || f.len > (uint64_t)(f.nslots - 1) * RV_SLOT)
			fuzz_fail("fragment at %u of %u slots: %u slots, %u bytes", at, n, f.nslots, f.len);
		off = rv_frag_take(&m, &f);
		if (f.flags & RV_FRAG_FIRST)
			s = (struct ref){ .open = true, .op = f.opcode, .total = f.total, .off = 0 };
		if (off != s.off || m.op != s.op || m.total != s.total || m.total > RV_MSG_MAX)
			fuzz_fail("message state: off %llu, op %u, total %u",
				  (unsigned long long)off, m.op, m.total);
		if (m.op != RV_FRAG_WRITE_IMM && off + f.len > m.total)
			fuzz_fail("payload [%llu, +%u) past the message's %u bytes",
				  (unsigned long long)off, f.len, m.total);
		s.off += f.len;
		s.open = !(f.flags & RV_FRAG_LAST);
		if (m.in_msg != s.open || m.off != s.off)
			fuzz_fail("message open %d, offset %llu", m.in_msg, (unsigned long long)m.off);
		if (!s.open && m.op != RV_FRAG_WRITE_IMM && m.off != m.total)
			fuzz_fail("LAST at %llu of %u", (unsigned long long)m.off, m.total);
		cons += f.nslots;
	}
	return 0;
}
