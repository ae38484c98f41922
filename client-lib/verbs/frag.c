// SPDX-License-Identifier: MIT
/*
 * libroshm-verbs: the checks of an RC QP's inbound fragments (recv.c). A
 * fragment header is written by the connected peer into our ring; the
 * receiver copies it once and asks rv_frag_ok whether the protocol allows
 * it now, then rv_frag_take accounts it. No libroshm call here:
 * tests/fuzz/fuzz_verbs_frag.c drives both with any stream of headers.
 */
#include <infiniband/verbs.h>

#include "rv.h"

/*
 * May the copied fragment @f, at slot index @at of a ring of @ring_n slots,
 * come now to a QP connected to @dest_qp, with message state @m? Its slots
 * lie inside the ring, its payload inside its slots, its opcode and flags
 * are known, it comes from the connected QP, it starts a message exactly
 * when none is open and continues the open one otherwise (same opcode and
 * total), and its payload stays inside the message's total (a LAST one
 * ends exactly there). A WRITE_WITH_IMM notice is one payload-less fragment.
 */
bool rv_frag_ok(const struct rv_rmsg *m, uint32_t ring_n, uint32_t dest_qp, const struct rv_frag *f,
		uint32_t at)
{
	bool first = f->flags & RV_FRAG_FIRST, last = f->flags & RV_FRAG_LAST;
	uint32_t total = first ? f->total : m->total;
	uint8_t op = first ? f->opcode : m->op;
	uint64_t off = first ? 0 : m->off;

	if (at >= ring_n || f->nslots < 1 || f->nslots > ring_n - at ||
	    f->len > (uint64_t)(f->nslots - 1) * RV_SLOT)
		return false;
	if (f->opcode < RV_FRAG_SEND || f->opcode > RV_FRAG_SEND_INV ||
	    (f->flags & ~(RV_FRAG_FIRST | RV_FRAG_LAST)) || f->src_qp != dest_qp)
		return false;
	if (first == m->in_msg || f->opcode != op || f->total != total || total > RV_MSG_MAX)
		return false;
	if (op == RV_FRAG_WRITE_IMM)
		return f->len == 0 && first && last;
	if (f->len > total - off)
		return false;
	return !last || off + f->len == total;
}

/*
 * Account a fragment rv_frag_ok allowed: a FIRST one opens the message
 * (opcode, total, immediate), a LAST one closes it. Returns the message
 * offset its payload goes to.
 */
uint64_t rv_frag_take(struct rv_rmsg *m, const struct rv_frag *f)
{
	uint64_t at;

	if (f->flags & RV_FRAG_FIRST) {
		m->off = 0;
		m->op = f->opcode;
		m->total = f->total;
		m->imm = f->imm;
		m->lenerr = false;
	}
	at = m->off;
	m->off += f->len;
	m->in_msg = !(f->flags & RV_FRAG_LAST);
	return at;
}
