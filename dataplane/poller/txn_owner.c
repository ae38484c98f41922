// SPDX-License-Identifier: MIT
/*
 * Transactions, the owner's side (txn.h): the apply of committed records of
 * this node's logs, holes aborted, and a transaction in one round trip, the
 * owner's half of a tcp TXN_COMMIT (client-lib/include/roshm/wire.h has the
 * protocol). The tcp transport's
 * responder calls it on the owner's poller, the thread that also applies the
 * log (txn.c), so a request's reserve, stage and commit are one step of the
 * log's only CPU writer; peers' TXN_COMMITs, FETCH_ADDs and CMP_SWAPs on the
 * same log are CPU atomics of the same poller (a node runs tcp or verbs, not
 * both).
 *
 * Exactly once: the writer learns s only from the answer. When the answer
 * is lost with its connection, the writer sends the same record again with
 * ROSHM_TCP_F_AGAIN over its next connection, which replaced the old one at
 * this node before its first frame (tcp_inbound): nothing of the first
 * attempt runs after this look. The writer's bound @lb <= the s the first
 * attempt got, if it ran. The owner looks in two places:
 *   - its private record of its last RD_TXN_IDS outcomes (rd_txn_ids),
 *     which holds every one-round-trip commit since @since but those that
 *     fell out: when it holds all sequences from @lb on, not finding the id
 *     there proves the attempt never ran;
 *   - else (roshmd restarted, or RD_TXN_IDS commits went by since) the log:
 *     the record carries the attempt's txn_id, and its slot is overwritten
 *     only once s + txn_slots is reserved, so while txn_tail <= lb +
 *     txn_slots a record that ran is still there and not finding it proves
 *     the same.
 * Past both the outcome is unknowable: -EIO, never a guess.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include <rte_hash_crc.h>

#include "poller/txn.h"
#include "roshm/wire.h"
#include "transport/transport.h"

/* CRC32C of @len bytes at any alignment (rte_hash_crc loads through
 * uint64_t pointers, which needs 8-byte aligned data). */
static uint32_t crc_bytes(const uint8_t *p, uint32_t len, uint32_t crc)
{
	uint64_t v8;

	for (; len >= 8; p += 8, len -= 8) {
		memcpy(&v8, p, 8);
		crc = rte_hash_crc_8byte(v8, crc);
	}
	for (; len; p++, len--)
		crc = rte_hash_crc_1byte(*p, crc);
	return crc;
}

uint32_t rd_txn_staged_crc(const uint8_t *staged, uint32_t len)
{
	/* Everything staged except the crc word itself (bytes 24..27 of the staged part). */
	uint32_t crc = crc_bytes(staged, 24, 0xffffffffu);

	return crc_bytes(staged + 28, len - 28, crc);
}

/*
 * Copy the staged part of slot @sl (sequence @seq) out of the region, which
 * its owner and its peers' NICs can write, into @buf (the engine's private
 * buffer of max_slot bytes), and check the copy: every field that is used
 * later is read from the copy only, once. Returns the copy's total length
 * (from the slot start), or 0 when the record is not valid.
 */
static uint32_t slot_copy(const struct rd_region *rg, const uint8_t *sl, uint64_t seq, uint8_t *buf,
			  uint32_t cap)
{
	struct roshm_txn_slot *c = (void *)buf;
	uint64_t hdr, sum = 0, total;

	if (rg->slot_size > cap || rg->slot_size < sizeof(*c))
		return 0;
	memcpy(buf + ROSHM_TXN_STAGE_OFF, sl + ROSHM_TXN_STAGE_OFF, sizeof(*c) - ROSHM_TXN_STAGE_OFF);
	__asm__ volatile("" ::: "memory");
	if (c->seq != seq || c->nseg > ROSHM_TXN_MAX_SEGS)
		return 0;
	hdr = sizeof(*c) + (uint64_t)c->nseg * sizeof(struct roshm_txn_seg);
	total = hdr + c->payload_len;
	if (total > rg->slot_size)
		return 0;
	/* the segment table and the payload, once, after the fixed part */
	memcpy(buf + sizeof(*c), sl + sizeof(*c), (size_t)(total - sizeof(*c)));
	__asm__ volatile("" ::: "memory");
	/* A restricted region's window binds every record: the log does not
	 * say who wrote it, and a peer's NIC or a hostile peer's raw WRITE
	 * stages records no rd_sqe_check saw (the owner's own TXN_WRITE is
	 * held to the window there, so it is never refused here). */
	uint64_t lo = rg->restricted ? rg->win_lo : 0, hi = rg->restricted ? rg->win_hi : rg->data_size;

	if (hi > rg->data_size)
		return 0;
	for (uint32_t i = 0; i < c->nseg; i++) {
		if (c->seg[i].off < lo || c->seg[i].off > hi || c->seg[i].len > hi - c->seg[i].off)
			return 0;
		sum += c->seg[i].len;
	}
	if (sum != c->payload_len)
		return 0;
	if (rd_txn_staged_crc(buf + ROSHM_TXN_STAGE_OFF, (uint32_t)(total - ROSHM_TXN_STAGE_OFF)) != c->crc)
		return 0;
	return (uint32_t)total;
}

static void recycle(struct rd_region *rg, struct roshm_txn_slot *sl, uint64_t seq, uint32_t outcome)
{
	struct roshm_region_hdr *h = rg->map;
	uint64_t hist[ROSHM_TXN_HISTORY];

	/* The history is ours to keep, but it lives where the owner can write:
	 * read it once, write it once. */
	memcpy(hist, sl->history, sizeof(hist));
	memmove(&hist[1], &hist[0], sizeof(hist[0]) * (ROSHM_TXN_HISTORY - 1));
	hist[0] = ROSHM_TXN_STATE(seq, outcome);
	memcpy(sl->history, hist, sizeof(hist));
	/* The history is in place before the slot is handed to seq + slots. */
	__atomic_store_n(&sl->state, ROSHM_TXN_STATE(seq + rg->txn_slots, ROSHM_TXN_EMPTY),
			 __ATOMIC_RELEASE);
	__atomic_store_n(&rg->applied, seq + 1, __ATOMIC_RELEASE); /* drain.c reads it */
	rg->hole_since = 0;
	rg->abort_sent = 0;
	__atomic_store_n(&h->txn_applied, seq + 1, __ATOMIC_RELEASE);
}

/* Apply the checked private copy @c under the region's seqlock. */
static void apply(struct rd_region *rg, const struct roshm_txn_slot *c)
{
	struct roshm_region_hdr *h = rg->map;
	const uint8_t *src = (const uint8_t *)&c->seg[c->nseg];
	/* Our own count: the owner may have written anything into the shared word. */
	uint64_t sq = (__atomic_load_n(&h->seqlock, __ATOMIC_RELAXED) + 1) | 1;

	/* Seqlock: odd while the data area changes; readers retry. */
	__atomic_store_n(&h->seqlock, sq, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	for (uint32_t i = 0; i < c->nseg; i++) {
		memcpy(rg->data + c->seg[i].off, src, c->seg[i].len);
		src += c->seg[i].len;
	}
	__atomic_store_n(&h->seqlock, sq + 1, __ATOMIC_RELEASE);
}

uint32_t rd_txn_slot_apply(struct rd_region *rg, const void *slot, uint64_t seq, uint8_t *buf,
			   uint32_t cap)
{
	uint32_t len = slot_copy(rg, slot, seq, buf, cap);

	if (len)
		apply(rg, (const void *)buf);
	return len;
}

unsigned rd_txn_apply_region(struct rd_poller *p, struct rd_region *rg, uint8_t *buf, uint32_t cap,
			     uint64_t now, uint64_t abort, uint32_t *budget)
{
	struct roshm_region_hdr *h = rg->map;
	unsigned n = 0;

	while (n < 64 && *budget) {
		uint64_t seq = rg->applied;
		struct roshm_txn_slot *sl = (void *)((uint8_t *)rg->map + ROSHM_REGION_HDR_SIZE +
						     (seq % rg->txn_slots) * rg->slot_size);
		uint64_t st = __atomic_load_n(&sl->state, __ATOMIC_ACQUIRE);

		if (st == ROSHM_TXN_STATE(seq, ROSHM_TXN_COMMITTED)) {
			uint32_t len = slot_copy(rg, (const uint8_t *)sl, seq, buf, cap);

			if (len) {
				apply(rg, (const void *)buf);
				recycle(rg, sl, seq, ROSHM_TXN_APPLIED);
				RD_STAT_ADD(p->stats.txn_applied, 1);
			} else {
				/* A committed record that fails its checks is never applied. */
				recycle(rg, sl, seq, ROSHM_TXN_ABORTED);
				__atomic_fetch_add(&h->txn_aborted, 1, __ATOMIC_RELAXED);
				RD_STAT_ADD(p->stats.txn_invalid, 1);
			}
			*budget = len + 64 >= *budget ? 0 : *budget - len - 64;
			n++;
			continue;
		}
		if (st == ROSHM_TXN_STATE(seq, ROSHM_TXN_EMPTY)) {
			if (__atomic_load_n(&h->txn_tail, __ATOMIC_ACQUIRE) <= seq)
				break; /* nothing reserved */
			if (!rg->hole_since) {
				rg->hole_since = now;
				break;
			}
			if (now - rg->hole_since < abort)
				break;
			if (rg->peer && rg->xport->atomics) {
				/* Peers' commits are NIC atomics that the CPU's are not
				 * atomic with: abort with the NIC too (loopback QP). The
				 * outcome shows in the state word on a later round. */
				struct rd_op op;

				if (rg->abort_sent && now - rg->abort_sent < abort)
					break;
				memset(&op, 0, sizeof(op));
				op.region = rg;
				op.raw = true;
				op.sqe.opcode = ROSHM_OP_CMP_SWAP;
				op.sqe.off = (uint64_t)((uint8_t *)&sl->state - (uint8_t *)rg->map);
				op.sqe.len = 8;
				op.sqe.operand1 = st;
				op.sqe.operand2 = ROSHM_TXN_STATE(seq, ROSHM_TXN_ABORTED);
				if (rd_poller_submit(p, &op) >= 0)
					rg->abort_sent = now;
				break;
			}
			uint64_t expect = st;

			if (!__atomic_compare_exchange_n(&sl->state, &expect,
							 ROSHM_TXN_STATE(seq, ROSHM_TXN_ABORTED), false,
							 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
				continue; /* committed at the last moment: apply it */
			st = ROSHM_TXN_STATE(seq, ROSHM_TXN_ABORTED);
		}
		if (st == ROSHM_TXN_STATE(seq, ROSHM_TXN_ABORTED)) {
			recycle(rg, sl, seq, ROSHM_TXN_ABORTED);
			__atomic_fetch_add(&h->txn_aborted, 1, __ATOMIC_RELAXED);
			RD_STAT_ADD(p->stats.txn_aborted, 1);
			n++;
			continue;
		}
		break; /* a state that is not ours to judge (owner scribbled): wait */
	}
	return n;
}

/* ---- one round trip (TXN_COMMIT over tcp) ---- */

/* Log slots one F_AGAIN request may look through (a peer picks @lb): about
 * a microsecond, what a 4 KiB READ costs; the record of outcomes covers
 * the rest (512 compares in 8 KiB of private memory). */
#define FIND_MAX 256u

static inline struct roshm_txn_slot *slot_of(const struct rd_region *rg, uint64_t seq)
{
	return (void *)((uint8_t *)rg->map + ROSHM_REGION_HDR_SIZE +
			(seq % rg->txn_slots) * rg->slot_size);
}

/* Outcome of sequence @q from its slot's state word and history: 1
 * committed or applied, 2 aborted, 0 reserved and not committed, -1 not
 * known (recycled past the history, or a word the owner scribbled). */
static int outcome(const struct roshm_txn_slot *sl, uint64_t q, uint32_t slots)
{
	uint64_t st = __atomic_load_n(&sl->state, __ATOMIC_ACQUIRE);
	uint64_t hist[ROSHM_TXN_HISTORY];

	if (st == ROSHM_TXN_STATE(q, ROSHM_TXN_COMMITTED))
		return 1;
	if (st == ROSHM_TXN_STATE(q, ROSHM_TXN_ABORTED))
		return 2;
	if (st == ROSHM_TXN_STATE(q, ROSHM_TXN_EMPTY))
		return 0;
	if (ROSHM_TXN_SEQ(st) < q + slots)
		return -1;
	memcpy(hist, sl->history, sizeof(hist));
	for (int i = 0; i < ROSHM_TXN_HISTORY; i++) {
		if (hist[i] == ROSHM_TXN_STATE(q, ROSHM_TXN_APPLIED))
			return 1;
		if (hist[i] == ROSHM_TXN_STATE(q, ROSHM_TXN_ABORTED))
			return 2;
	}
	return -1;
}

/* An outcome into the owner's record, the oldest one making room. */
static void ids_add(struct rd_txn_ids *ids, uint64_t id, uint64_t res)
{
	if (ids->n == RD_TXN_IDS) {
		/* Outcomes come in the order their records finished, not in
		 * sequence order: the bound only ever grows. */
		uint64_t q = ROSHM_TCP_TXN_SEQ(ids->e[ids->next].res) + 1;

		if (q > ids->evicted)
			ids->evicted = q;
	} else {
		ids->n++;
	}
	ids->e[ids->next].id = id;
	ids->e[ids->next].res = res;
	ids->next = (ids->next + 1) % RD_TXN_IDS;
}

/* Look for the attempt @id among sequences [lb, tail): 1 found committed
 * (*seq), 2 found aborted, 0 it never ran, -1 not knowable. */
static int find(const struct rd_region *rg, uint64_t id, uint64_t lb, uint64_t tail, uint64_t *seq)
{
	const struct rd_txn_ids *ids = rg->txn_ids;

	if (ids) {
		for (uint32_t i = 0; i < ids->n; i++)
			if (ids->e[i].id == id) {
				*seq = ROSHM_TCP_TXN_SEQ(ids->e[i].res);
				return ROSHM_TCP_TXN_KIND(ids->e[i].res) == ROSHM_TCP_TXN_COMMITTED ? 1 : 2;
			}
		if (lb >= ids->since && lb >= ids->evicted)
			return 0;
	}
	if (tail < lb || tail - lb > rg->txn_slots || tail - lb > FIND_MAX)
		return -1;
	for (uint64_t q = lb; q < tail; q++) {
		const struct roshm_txn_slot *sl = slot_of(rg, q);
		/* the owner can write the log: each word read once */
		uint64_t s = __atomic_load_n(&sl->seq, __ATOMIC_RELAXED);
		uint64_t i = __atomic_load_n(&sl->txn_id, __ATOMIC_RELAXED);

		if (s != q || i != id)
			continue;
		*seq = q;
		switch (outcome(sl, q, rg->txn_slots)) {
		case 1:
			return 1;
		case 2:
			return 2;
		case 0:
			/* In its slot, never committed: its request died between
			 * the two (roshmd killed); the reservation is a hole that
			 * the apply aborts. It did not run. */
			return 0;
		default:
			return -1;
		}
	}
	return 0;
}

void rd_txn_ids_from_log(struct rd_region *rg, uint64_t tail)
{
	struct rd_txn_ids *ids = rg->txn_ids;
	uint64_t n = rg->txn_slots;

	/* The sequences whose records the log may still hold, [tail - n,
	 * tail): those that ran (committed or aborted) go in, in order; one
	 * that is not there never ran, as its slot was never given to a later
	 * sequence. Outcomes read from memory the owner can write, once each. */
	if (n > RD_TXN_IDS / 2)
		n = RD_TXN_IDS / 2;
	if (n > tail)
		n = tail;
	ids->since = tail - n;
	for (uint64_t q = tail - n; q < tail; q++) {
		const struct roshm_txn_slot *sl = slot_of(rg, q);
		uint64_t id = __atomic_load_n(&sl->txn_id, __ATOMIC_RELAXED);
		int o;

		if (__atomic_load_n(&sl->seq, __ATOMIC_RELAXED) != q)
			continue;
		o = outcome(sl, q, rg->txn_slots);
		if (o == 1 || o == 2)
			ids_add(ids, id, ROSHM_TCP_TXN(o == 1 ? ROSHM_TCP_TXN_COMMITTED :
						       ROSHM_TCP_TXN_ABORTED, q));
		else if (o < 0)
			ids->since = q + 1; /* a word the owner wrote: no proof from here */
	}
}

int rd_txn_one_begin(struct rd_region *rg, uint64_t id, uint64_t lb, bool again, uint32_t len,
		     uint64_t *seq, int32_t *status, uint64_t *result)
{
	struct roshm_region_hdr *h = rg->map;
	uint64_t tail, s = 0;

	*status = 0;
	*result = 0;
	if (!rg->txn_slots || !rg->slot_size) {
		*status = -EOPNOTSUPP;
		return 1;
	}
	if (len < sizeof(struct roshm_txn_slot) - ROSHM_TXN_STAGE_OFF ||
	    len > rg->slot_size - ROSHM_TXN_STAGE_OFF) {
		*status = -EMSGSIZE;
		return 1;
	}
	tail = __atomic_load_n(&h->txn_tail, __ATOMIC_ACQUIRE);
	if (again) {
		int f = find(rg, id, lb, tail, &s);

		if (f < 0) {
			*status = -EIO;
			return 1;
		}
		if (f) {
			*result = ROSHM_TCP_TXN(f == 1 ? ROSHM_TCP_TXN_COMMITTED : ROSHM_TCP_TXN_ABORTED, s);
			return 1;
		}
	}
	/* Draining: what is under way finishes, nothing new starts. */
	if (rg->draining || tail - rg->applied >= rg->txn_slots) {
		/* after a look that proved the first attempt never ran, say so:
		 * the writer's next try is a new one (it needs no look) */
		if (again)
			*result = ROSHM_TCP_TXN(ROSHM_TCP_TXN_NOT_RUN, 0);
		else
			*status = -EAGAIN;
		return 1;
	}
	s = __atomic_fetch_add(&h->txn_tail, 1, __ATOMIC_ACQ_REL);
	if (s - rg->applied >= rg->txn_slots ||
	    __atomic_load_n(&slot_of(rg, s)->state, __ATOMIC_ACQUIRE) !=
		    ROSHM_TXN_STATE(s, ROSHM_TXN_EMPTY)) {
		/* Another reservation came between (a local client's, or the
		 * owner moved txn_tail): s is the writer's, staged the usual way. */
		*result = ROSHM_TCP_TXN(ROSHM_TCP_TXN_RESERVED, s);
		return 1;
	}
	*seq = s;
	return 0;
}

bool rd_txn_one_holds(const struct rd_region *rg, uint64_t seq)
{
	return __atomic_load_n(&slot_of(rg, seq)->state, __ATOMIC_ACQUIRE) ==
	       ROSHM_TXN_STATE(seq, ROSHM_TXN_EMPTY);
}

uint8_t *rd_txn_one_dst(const struct rd_region *rg, uint64_t seq)
{
	return (uint8_t *)slot_of(rg, seq) + ROSHM_TXN_STAGE_OFF;
}

uint64_t rd_txn_one_end(struct rd_region *rg, uint64_t id, uint64_t seq, uint32_t len)
{
	struct roshm_txn_slot *sl = slot_of(rg, seq);
	uint64_t expect = ROSHM_TXN_STATE(seq, ROSHM_TXN_EMPTY), res;

	/* The writer left seq and crc to us: it did not know s. What the apply
	 * reads is checked there, from its own copy (txn.c slot_copy). Not in
	 * a slot that is no longer s's (rd_txn_one_holds). */
	if (rd_txn_one_holds(rg, seq)) {
		__atomic_store_n(&sl->seq, seq, __ATOMIC_RELAXED);
		sl->crc = rd_txn_staged_crc((const uint8_t *)sl + ROSHM_TXN_STAGE_OFF, len);
	}
	if (__atomic_compare_exchange_n(&sl->state, &expect, ROSHM_TXN_STATE(seq, ROSHM_TXN_COMMITTED),
					false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		res = ROSHM_TCP_TXN(ROSHM_TCP_TXN_COMMITTED, seq);
	else /* aborted as a hole while its payload came in (slower than
	      * txn_abort_ms), or the owner wrote the word: not committed */
		res = ROSHM_TCP_TXN(ROSHM_TCP_TXN_ABORTED, seq);
	if (rg->txn_ids)
		ids_add(rg->txn_ids, id, res);
	return res;
}
