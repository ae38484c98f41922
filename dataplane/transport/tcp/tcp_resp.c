// SPDX-License-Identifier: MIT
/*
 * `tcp` transport, responder side: what a peer's request may do to this
 * node's regions, decided from its header before any byte of it lands (the
 * checks a NIC makes: region id, epoch, key, bounds, access; a grant
 * region's grants to the requesting node; the transaction log's own
 * rules), and the admission of a TXN_COMMIT (poller/txn_owner.c does the
 * log's part). tcp.c parses the frames and moves the bytes. Poller thread
 * only.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "poller/txn.h"
#include "transport/tcp/tcp.h"

int rd_tcp_check_req(const struct rd_tcp *t, const struct rd_tcp_conn *c, const struct roshm_tcp_req *q,
		     struct rd_region **out)
{
	struct rd_region *rg;
	bool raw = q->flags & ROSHM_TCP_F_RAW;
	uint32_t need = raw || q->opcode == ROSHM_OP_WRITE ? ROSHM_ACCESS_WRITE :
			q->opcode == ROSHM_OP_READ ? ROSHM_ACCESS_READ : ROSHM_ACCESS_ATOMIC;

	*out = NULL;
	rg = q->region_id < t->nexported ? t->exported[q->region_id] : NULL;
	if (!rg || rg->dead || rg->epoch != q->epoch)
		return -ESTALE;
	if (rg->key != q->key)
		return -EACCES;
	/* Its owner's grants, as they are now: a revoke holds for the whole
	 * node at once, whatever the other node has read of the record. */
	if (!rd_node_granted(rg, c->node_h, need, q->off, q->len, raw))
		return -EACCES;
	/* Draining: transactions under way finish, nothing new starts. */
	if (rg->draining && (!(q->flags & ROSHM_TCP_F_RAW) ||
			     q->off == offsetof(struct roshm_region_hdr, txn_tail)))
		return -EAGAIN;
	if (q->flags & ROSHM_TCP_F_RAW) {
		/* Raw accesses are others' transactions: writes (the window
		 * is the owner-side apply's to check, txn.c slot_copy). */
		if (rg->restricted && !(rg->access & ROSHM_ACCESS_WRITE))
			return -EACCES;
		if (!rd_raw_access_ok(rg, q->opcode, q->off, q->len))
			return -EFAULT;
	} else if (q->off > rg->data_size || q->len > rg->data_size - q->off) {
		return -EFAULT;
	} else if (rg->restricted) {
		/* The requester's roshmd checked its client against the
		 * region's limits (rd_sqe_check) and sent a data offset; a
		 * peer that did not is refused here too. */
		if (!(rg->access & need))
			return -EACCES;
		if (q->off < rg->win_lo || q->off > rg->win_hi || q->len > rg->win_hi - q->off)
			return -EFAULT;
	}
	*out = rg;
	return 0;
}

bool rd_tcp_txn_granted(const struct rd_region *rg, const struct rd_tcp_conn *c, const void *slot)
{
	const struct roshm_txn_slot *sl = slot;
	uint32_t nseg;

	if (rg->policy != ROSHM_POLICY_GRANT || (rg->node_grants && rg->node_grants->any))
		return true;
	/* The peer's own bytes (it can write them only while the slot is
	 * EMPTY, rd_tcp_stage_guard), read in this same step of the poller. */
	nseg = __atomic_load_n(&sl->nseg, __ATOMIC_RELAXED);
	if (nseg > ROSHM_TXN_MAX_SEGS ||
	    sizeof(*sl) + (uint64_t)nseg * sizeof(sl->seg[0]) > rg->slot_size)
		return false;
	for (uint32_t i = 0; i < nseg; i++) {
		uint64_t off = __atomic_load_n(&sl->seg[i].off, __ATOMIC_RELAXED);
		uint32_t len = __atomic_load_n(&sl->seg[i].len, __ATOMIC_RELAXED);

		if (!rd_node_granted(rg, c->node_h, ROSHM_ACCESS_WRITE, off, len, false))
			return false;
	}
	return true;
}

/*
 * Whether @c's node reserved sequence @seq of grant region @rg's log over
 * tcp (a raw FETCH_ADD on txn_tail, a TXN_COMMIT): only it stages, commits
 * or gives up that sequence. Other regions: any node.
 */
bool rd_tcp_slot_ours(const struct rd_region *rg, const struct rd_tcp_conn *c, uint64_t seq)
{
	const struct rd_slot_owner *o;

	if (rg->policy != ROSHM_POLICY_GRANT)
		return true;
	if (!rg->slot_owner || !rg->txn_slots)
		return false;
	o = &rg->slot_owner[seq % rg->txn_slots];
	return o->seq == seq && o->node == c->node_h;
}

/* Whether sequence @seq is reserved (below @tail, not yet applied) and
 * neither committed nor given up: open, a hole if it stays so. */
static inline bool seq_open(const struct rd_region *rg, uint64_t seq, uint64_t applied, uint64_t tail)
{
	return seq >= applied && seq < tail && rd_txn_one_holds(rg, seq);
}

/* Tries of the reservation's CAS: only another thread moves txn_tail (the
 * owner pod writes its own header), and past a few the log is its to stall. */
#define TAIL_CAS_TRIES 8

int rd_tcp_tail_reserve(struct rd_region *rg, const struct rd_tcp_conn *c,
			const struct roshm_tcp_req *q, uint64_t *seq)
{
	struct roshm_region_hdr *h = rg->map;
	struct rd_slot_owner *mine = NULL, *spare = NULL;
	uint64_t applied = __atomic_load_n(&rg->applied, __ATOMIC_ACQUIRE);
	uint64_t tail = __atomic_load_n(&h->txn_tail, __ATOMIC_ACQUIRE);

	*seq = 0;
	if (q->operand1 != 1)
		return -EACCES;
	if (rg->slot_owner) {
		/* this node's last raw reservation, or an entry it may take */
		for (uint32_t i = 0; i < rg->nres && !mine; i++) {
			struct rd_slot_owner *e = &rg->node_res[i];

			if (e->node == c->node_h && e->seq != UINT64_MAX)
				mine = e;
			else if (!spare && !seq_open(rg, e->seq, applied, tail))
				spare = e;
		}
		if (mine && seq_open(rg, mine->seq, applied, tail))
			return -EAGAIN; /* one at a time */
		if (!mine)
			mine = spare;
		if (!mine)
			return -EAGAIN; /* RD_TXN_RES_NODES nodes hold one each */
	}
	for (int i = 0; i < TAIL_CAS_TRIES; i++) {
		/* Log full (as rd_txn_one_begin): what would be reserved has no
		 * slot yet. Also when the owner moved txn_tail below applied. */
		if (tail - applied >= rg->txn_slots)
			return -EAGAIN;
		/* A grant region: its slot's owner entry is taken over only
		 * when the slot is this sequence's (EMPTY(tail)); an open
		 * sequence there would show EMPTY of its own. Within the log's
		 * window it always is, unless the owner pod wrote its log. */
		if (rg->slot_owner && !rd_txn_one_holds(rg, tail))
			return -EAGAIN;
		if (__atomic_compare_exchange_n(&h->txn_tail, &tail, tail + 1, false, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE)) {
			*seq = tail;
			if (rg->slot_owner) {
				rg->slot_owner[tail % rg->txn_slots] = (struct rd_slot_owner){ tail, c->node_h };
				*mine = (struct rd_slot_owner){ tail, c->node_h };
			}
			return 0;
		}
	}
	return -EAGAIN;
}

/*
 * A raw access of a grant region's log (rd_raw_access_ok let it in) by
 * @c's node: 0 or -EACCES. READ: a slot's state and history only (the
 * writer's outcome check); the staged part holds other grantees' records,
 * writes to parts this node may not read. FETCH_ADD: +1 only. CMP_SWAP:
 * EMPTY(s) to COMMITTED(s) or ABORTED(s) only; any other value is a state
 * the owner's apply waits on for ever. What commits is held to the node's
 * grants (rd_tcp_txn_granted).
 */
int rd_tcp_log_access(const struct rd_region *rg, const struct rd_tcp_conn *c,
		      const struct roshm_tcp_req *q)
{
	uint64_t in_slot = (q->off - ROSHM_REGION_HDR_SIZE) % rg->slot_size;
	const void *sl = (const uint8_t *)rg->map + q->off - in_slot;

	switch (q->opcode) {
	case ROSHM_OP_READ:
		return in_slot < ROSHM_TXN_STAGE_OFF && q->len <= ROSHM_TXN_STAGE_OFF - in_slot ?
			       0 : -EACCES;
	case ROSHM_OP_FETCH_ADD:
		return q->operand1 == 1 &&
		       rd_tcp_slot_ours(rg, c, ROSHM_TXN_SEQ(__atomic_load_n((const uint64_t *)sl,
									     __ATOMIC_ACQUIRE))) &&
		       rd_tcp_txn_granted(rg, c, sl) ? 0 : -EACCES;
	case ROSHM_OP_CMP_SWAP:
		if (ROSHM_TXN_KIND(q->operand1) != ROSHM_TXN_EMPTY ||
		    !rd_tcp_slot_ours(rg, c, ROSHM_TXN_SEQ(q->operand1)))
			return -EACCES;
		if (q->operand2 == ROSHM_TXN_STATE(ROSHM_TXN_SEQ(q->operand1), ROSHM_TXN_ABORTED))
			return 0;
		return q->operand2 == ROSHM_TXN_STATE(ROSHM_TXN_SEQ(q->operand1), ROSHM_TXN_COMMITTED) &&
				       rd_tcp_txn_granted(rg, c, sl) ? 0 : -EACCES;
	default:
		return 0; /* WRITE: rd_tcp_stage_guard */
	}
}

/* A malformed frame: the peer is not speaking our protocol. (A length over
 * our transport.tcp.max_msg is not: a node configured with a larger one
 * sent it, and frame_header refuses it alone.) */
bool rd_tcp_req_malformed(const struct rd_tcp *t, const struct roshm_tcp_req *q)
{
	(void)t;
	if (q->rsvd[0] || q->rsvd[1])
		return true;
	if (q->opcode == ROSHM_OP_TXN_COMMIT)
		return (q->flags & ~ROSHM_TCP_F_AGAIN) || q->off;
	if (q->flags & ~(ROSHM_TCP_F_RAW | ROSHM_TCP_F_SEQ))
		return true;
	if ((q->flags & ROSHM_TCP_F_SEQ) &&
	    (!(q->flags & ROSHM_TCP_F_RAW) || q->opcode != ROSHM_OP_WRITE))
		return true;
	switch (q->opcode) {
	case ROSHM_OP_WRITE:
	case ROSHM_OP_READ:
		return false;
	case ROSHM_OP_FETCH_ADD:
	case ROSHM_OP_CMP_SWAP:
		return q->len != 8 || (q->off & 7);
	default:
		return true;
	}
}

/*
 * A TXN_COMMIT's header (roshm/wire.h): reserve its slot and receive the
 * record there, or decide the answer now and drop the record. Answered
 * after its payload either way (the caller's frame_done, at once for a
 * payload of 0 bytes): an answer to a request still being sent is a
 * protocol violation for the requester.
 */
void rd_tcp_txn_header(struct rd_tcp *t, struct rd_tcp_conn *c, const struct roshm_tcp_req *q)
{
	struct rd_region *rg = q->region_id < t->nexported ? t->exported[q->region_id] : NULL;
	int32_t st = 0;
	uint64_t res = 0, seq = 0;
	bool stage = false;

	if (!rg || rg->dead || rg->epoch != q->epoch)
		st = -ESTALE;
	else if (rg->key != q->key)
		st = -EACCES;
	else if ((rg->restricted && !(rg->access & ROSHM_ACCESS_WRITE)) ||
		 !rd_node_granted(rg, c->node_h, ROSHM_ACCESS_WRITE, 0, 0, true))
		st = -EACCES;
	else if (!rd_txn_one_begin(rg, q->operand1, q->operand2, q->flags & ROSHM_TCP_F_AGAIN, q->len,
				   &seq, &st, &res))
		stage = true;
	else if (!st && (q->flags & ROSHM_TCP_F_AGAIN) &&
		 (ROSHM_TCP_TXN_KIND(res) == ROSHM_TCP_TXN_COMMITTED ||
		  ROSHM_TCP_TXN_KIND(res) == ROSHM_TCP_TXN_ABORTED))
		RD_STAT_ADD(t->poller->stats.txn_found, 1);
	if (stage && rg->slot_owner)   /* no other node stages or ends it */
		rg->slot_owner[seq % rg->txn_slots] = (struct rd_slot_owner){ seq, c->node_h };
	c->rx_dst = stage ? rd_txn_one_dst(rg, seq) : NULL;
	c->rx_rg = stage ? rg : NULL;
	c->rx_seq = seq;
	/* the slot's state word is at its start, ROSHM_TXN_STAGE_OFF before */
	c->rx_word = stage ? (const uint64_t *)(const void *)(c->rx_dst - ROSHM_TXN_STAGE_OFF) : NULL;
	c->rx_expect = ROSHM_TXN_STATE(seq, ROSHM_TXN_EMPTY);
	memcpy(c->rx_hdr, q, sizeof(*q));
	c->rx_status = st;
	c->rx_result = res;
	c->rx_left = c->rx_len = q->len;
	c->rx_state = 1;
}

/*
 * A raw WRITE into a log slot (a staging WRITE, rd_raw_access_ok let it in:
 * within one slot, from its staged part on) for sequence @seq (ROSHM_TCP_F_SEQ)
 * lands only while the slot's state word is EMPTY(seq), checked here and
 * before every byte (rx_guard): 0, -ECANCELED when the slot is not or no
 * longer waiting for seq's record (a hole given up on is recycled to the
 * next sequence in the same step, so "any EMPTY" would let a late record
 * into another transaction's slot), -EINVAL without a sequence or with one
 * of another slot.
 */
int rd_tcp_stage_guard(struct rd_tcp_conn *c, const struct rd_region *rg, const struct roshm_tcp_req *q)
{
	uint64_t in_log = q->off - ROSHM_REGION_HDR_SIZE, want;
	const uint64_t *w;

	if (q->off < ROSHM_REGION_HDR_SIZE)
		return 0; /* not the log (txn_tail, txn_applied are no WRITE) */
	if (!(q->flags & ROSHM_TCP_F_SEQ) || q->operand1 % rg->txn_slots != in_log / rg->slot_size ||
	    q->operand1 > ROSHM_TXN_SEQ(UINT64_MAX))
		return -EINVAL;
	if (!rd_tcp_slot_ours(rg, c, q->operand1))
		return -EACCES;
	w = (const uint64_t *)(const void *)((const uint8_t *)rg->map + q->off - in_log % rg->slot_size);
	want = ROSHM_TXN_STATE(q->operand1, ROSHM_TXN_EMPTY);
	if (__atomic_load_n(w, __ATOMIC_ACQUIRE) != want)
		return -ECANCELED;
	c->rx_word = w;
	c->rx_expect = want;
	return 0;
}

