// SPDX-License-Identifier: MIT
/*
 * `tcp` transport, poller side: what comes in on a connection. Frames are
 * parsed from the connection's rx buffer; a large payload's rest is read
 * straight into place (the region a peer's WRITE lands in, the buffer a READ
 * answer fills) with one readv that also takes the next frame's header. An
 * inbound request is checked (tcp_resp.c) and answered into the tx ring
 * (respond); an answer completes its outbound operation. Everything a peer
 * sends is untrusted: a malformed frame drops the connection.
 */
#include <errno.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <rte_cycles.h>

#include "guard.h"
#include "poller/txn.h"
#include "transport/tcp/tcp.h"

/* ---- responder: apply a request to our region (its checks: tcp_resp.c) ---- */

static void respond(struct rd_tcp_conn *c, uint64_t tag, int32_t status, uint64_t result,
		    const uint8_t *data, uint32_t len)
{
	struct roshm_tcp_resp r = { .tag = tag, .status = status, .len = data ? len : 0,
				    .result = result };

	tx_put(c, &r, sizeof(r));
	if (data)
		tx_put(c, data, len);
	RD_STAT_ADD(c->frames_tx, 1);
}

/* ---- rx: parse frames from the buffer ---- */

/* Bytes needed for the header of the next frame on this connection. */
static inline uint32_t hdr_size(const struct rd_tcp_conn *c)
{
	return c->inbound ? sizeof(struct roshm_tcp_req) : sizeof(struct roshm_tcp_resp);
}

/* Complete the frame whose payload just ended (or had none). */
static int frame_done(struct rd_tcp *t, struct rd_tcp_conn *c)
{
	if (c->inbound) {
		struct roshm_tcp_req q;

		memcpy(&q, c->rx_hdr, sizeof(q));
		if (q.opcode == ROSHM_OP_WRITE) {
			/* The status decided when the header came (the bytes went
			 * where it said), or ESTALE if the region went meanwhile. */
			respond(c, q.tag, c->rx_status, c->rx_status ? 0 : q.len, NULL, 0);
			c->rx_rg = NULL;
		} else if (q.opcode == ROSHM_OP_TXN_COMMIT) {
			/* Staged in its slot: commit it now. Answered at its
			 * header, or its region went meanwhile (ESTALE): say so. */
			struct roshm_txn_slot *sl = c->rx_rg ?
				(void *)(rd_txn_one_dst(c->rx_rg, c->rx_seq) - ROSHM_TXN_STAGE_OFF) : NULL;
			uint64_t empty = ROSHM_TXN_STATE(c->rx_seq, ROSHM_TXN_EMPTY);

			/* A grant region: the record's writes, against the grants
			 * of this node as they are now (the header's check only
			 * said it holds a WRITE grant somewhere). Outside: the
			 * slot is given up on (a hole the apply skips). */
			if (sl && rd_txn_one_holds(c->rx_rg, c->rx_seq) &&
			    !rd_tcp_txn_granted(c->rx_rg, c, sl)) {
				__atomic_compare_exchange_n(&sl->state, &empty,
							    ROSHM_TXN_STATE(c->rx_seq, ROSHM_TXN_ABORTED),
							    false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
				respond(c, q.tag, -EACCES, 0, NULL, 0);
			} else if (c->rx_rg)
				respond(c, q.tag, 0, rd_txn_one_end(c->rx_rg, q.operand1, c->rx_seq, q.len), NULL, 0);
			else
				respond(c, q.tag, c->rx_status, c->rx_status ? 0 : c->rx_result, NULL, 0);
			c->rx_rg = NULL;
		}
		return 0;
	}
	struct roshm_tcp_resp r;

	memcpy(&r, c->rx_hdr, sizeof(r));
	rd_tcp_pend_done(t, c, (uint32_t)r.tag, r.status, r.result);
	return 0;
}

/*
 * A header is complete at rx_buf + rx_start. Returns 1 consumed, 0 blocked
 * (response does not fit yet), -1 protocol violation.
 */
static int frame_header(struct rd_tcp *t, struct rd_tcp_conn *c)
{
	const uint8_t *h = c->rx_buf + c->rx_start;

	if (c->inbound) {
		struct roshm_tcp_req q;
		struct rd_region *rg;
		int st;

		memcpy(&q, h, sizeof(q));
		if (rd_tcp_req_malformed(t, &q))
			return -1;
		/* longer than our transport.tcp.max_msg (a node configured with
		 * a larger one): -EMSGSIZE for it alone, its payload dropped,
		 * the connection and the requests behind it go on */
		bool big = q.len > t->max_msg;
		uint32_t need = sizeof(struct roshm_tcp_resp) +
				(q.opcode == ROSHM_OP_READ && !big ? q.len : 0);

		if (tx_space(c) < need) {
			if (!c->blocked) {
				c->blocked = true;
				rd_tcp_conn_events(t, c);
			}
			return 0;
		}
		if (c->blocked) {
			c->blocked = false;
			rd_tcp_conn_events(t, c);
		}
		c->rx_start += sizeof(q);
		if (big) {
			if (q.opcode == ROSHM_OP_READ) {
				respond(c, q.tag, -EMSGSIZE, 0, NULL, 0);
				return 1;
			}
			/* WRITE or TXN_COMMIT (malformed let no other opcode
			 * have such a length): answered after its payload */
			memcpy(c->rx_hdr, &q, sizeof(q));
			c->rx_dst = NULL;
			c->rx_rg = NULL;
			c->rx_word = NULL;
			c->rx_status = -EMSGSIZE;
			c->rx_result = 0;
			c->rx_left = c->rx_len = q.len;
			c->rx_state = 1;
			return 1;
		}
		if (q.opcode == ROSHM_OP_TXN_COMMIT) {
			rd_tcp_txn_header(t, c, &q);
			if (!q.len)
				frame_done(t, c), c->rx_state = 0;
			return 1;
		}
		st = rd_tcp_check_req(t, c, &q, &rg);
		/* A raw atomic on a log slot's state word may commit the record
		 * staged there: the writes in it, against this node's grants. */
		bool slot_word = !st && (q.flags & ROSHM_TCP_F_RAW) && q.off >= ROSHM_REGION_HDR_SIZE &&
				 rg->policy == ROSHM_POLICY_GRANT;
		/* A sequence reserved (rd_raw_access_ok let only FETCH_ADD at
		 * txn_tail in): of 1, within the log, one open per node on a
		 * grant region (rd_tcp_tail_reserve). */
		bool tail = !st && (q.flags & ROSHM_TCP_F_RAW) &&
			    q.off == offsetof(struct roshm_region_hdr, txn_tail);

		if (slot_word)
			st = rd_tcp_log_access(rg, c, &q);
		switch (q.opcode) {
		case ROSHM_OP_WRITE:
			memcpy(c->rx_hdr, &q, sizeof(q));
			c->rx_word = NULL;
			if (!st && (q.flags & ROSHM_TCP_F_RAW))
				st = rd_tcp_stage_guard(c, rg, &q);
			c->rx_dst = st ? NULL : rd_tcp_req_base(rg, &q) + q.off;
			c->rx_rg = st ? NULL : rg;
			c->rx_status = st;
			c->rx_left = c->rx_len = q.len;
			c->rx_state = 1;
			if (!q.len)
				frame_done(t, c), c->rx_state = 0;
			return 1;
		case ROSHM_OP_READ:
			respond(c, q.tag, st, st ? 0 : q.len, st ? NULL : rd_tcp_req_base(rg, &q) + q.off, q.len);
			return 1;
		case ROSHM_OP_FETCH_ADD: {
			uint64_t *w = st ? NULL : (uint64_t *)(void *)(rd_tcp_req_base(rg, &q) + q.off), old = 0;

			if (w && tail) {
				st = rd_tcp_tail_reserve(rg, c, &q, &old);
			} else if (w && slot_word) {
				/* +1 (rd_tcp_log_access) commits an EMPTY slot only: on
				 * any other state it would make one the owner waits on
				 * for ever (ABORTED + 1); the writer sees the old value
				 * and knows it did not commit. */
				old = __atomic_load_n(w, __ATOMIC_SEQ_CST);
				while (ROSHM_TXN_KIND(old) == ROSHM_TXN_EMPTY &&
				       !__atomic_compare_exchange_n(w, &old, old + 1, false, __ATOMIC_SEQ_CST,
								    __ATOMIC_SEQ_CST))
					;
			} else if (w) {
				old = __atomic_fetch_add(w, q.operand1, __ATOMIC_SEQ_CST);
			}
			respond(c, q.tag, st, old, NULL, 0);
			return 1;
		}
		default: { /* CMP_SWAP */
			uint64_t expect = q.operand1;

			if (!st)
				__atomic_compare_exchange_n((uint64_t *)(void *)(rd_tcp_req_base(rg, &q) + q.off), &expect,
							    q.operand2, false, __ATOMIC_SEQ_CST,
							    __ATOMIC_SEQ_CST);
			respond(c, q.tag, st, st ? 0 : expect, NULL, 0);
			return 1;
		}
		}
	}
	struct roshm_tcp_resp r;
	struct rd_tcp_pend *pd;
	uint32_t id;

	memcpy(&r, h, sizeof(r));
	id = (uint32_t)r.tag;
	if (id >= c->npend)
		return -1;
	pd = &c->pend[id];
	if (!pd->used || pd->gen != (uint32_t)(r.tag >> 32))
		return -1;
	/* An answer to a request that has not all left yet: no peer that
	 * speaks the protocol sends one, and taking it would let the client
	 * reuse (or unmap) a payload that is still being sent. */
	if (pd->unsent || c->tx_head < pd->hdr_pos + sizeof(struct roshm_tcp_req))
		return -1;
	if (r.len && (r.status || pd->h.opcode != ROSHM_OP_READ || r.len != pd->h.len))
		return -1;
	if (!r.status && pd->h.opcode == ROSHM_OP_READ && r.len != pd->h.len)
		return -1;
	c->rx_start += sizeof(r);
	memcpy(c->rx_hdr, &r, sizeof(r));
	if (r.len) {
		/* A client that left (client_gone) gets nothing written. */
		c->rx_dst = pd->h.client || pd->h.txn ? pd->dst : NULL;
		c->rx_left = c->rx_len = r.len;
		c->rx_state = 1;
		return 1;
	}
	frame_done(t, c);
	return 1;
}

/*
 * A direct readv into c->rx_dst said EFAULT: the destination is a region
 * whose owner punched a hole there (a READ answer into a client's own
 * region, ROSHM_SQE_F_LBUF; a WRITE into one of our regions); arenas are
 * sealed against holes. The rest of the payload is discarded, the operation
 * fails with -EFAULT, and the region is reported as the guard reports a
 * hole. False: no such region, the connection goes down.
 */
static bool rx_fault(struct rd_tcp_conn *c)
{
	struct rd_region *rg;

	if (c->inbound) {
		rg = c->rx_rg;
		if (!rg)
			return false;
		c->rx_rg = NULL;
		c->rx_status = -EFAULT;
	} else {
		struct roshm_tcp_resp r;
		struct rd_tcp_pend *pd;

		memcpy(&r, c->rx_hdr, sizeof(r));
		pd = &c->pend[(uint32_t)r.tag];
		rg = pd->h.lbuf;
		if (!rg)
			return false;
		pd->fail = -EFAULT;
	}
	c->rx_dst = NULL;
	rd_guard_report(rg->guard, &rg->tampered); /* control logs it */
	return true;
}

void rd_tcp_conn_rx(struct rd_tcp *t, struct rd_tcp_conn *c)
{
	uint32_t budget = RX_BUDGET;
	bool drained = false;

	while (c->up) {
		/* Parse what is buffered. */
		for (;;) {
			uint32_t avail = c->rx_end - c->rx_start;

			if (c->rx_state == 1) {
				uint32_t n = avail < c->rx_left ? avail : c->rx_left;

				if (n) {
					rd_tcp_rx_guard(c);
					if (c->rx_dst) {
						/* the last bytes last, once (roshm/dma.h) */
						rd_dma_copy(c->rx_dst, c->rx_buf + c->rx_start, n);
						c->rx_dst += n;
					}
					c->rx_start += n;
					c->rx_left -= n;
				}
				if (c->rx_left)
					break;
				c->rx_state = 0;
				frame_done(t, c);
				RD_STAT_ADD(c->frames_rx, 1);
				continue;
			}
			if (avail < hdr_size(c))
				break;
			int r = frame_header(t, c);

			if (r < 0) {
				rd_tcp_conn_down(t, c, -ECONNRESET, "malformed or oversized frame");
				return;
			}
			if (r == 0)
				return; /* blocked on tx space: leave the rest in the socket */
			if (c->rx_state == 0)
				RD_STAT_ADD(c->frames_rx, 1);
		}
		/* The socket had less than we asked for: it is empty (the next
		 * round's epoll says when there is more), no read that would
		 * only say EAGAIN. */
		if (!budget || drained)
			return;
		/* The rest of a large payload with an empty buffer (the parse
		 * above took what was buffered): read it straight into place,
		 * and only the next frame's header behind it into the buffer, so
		 * that in a stream of large frames every payload goes straight
		 * into place, one read per frame. Its last ROSHM_DMA_TAIL bytes
		 * go into the buffer too, and from there into place by the parse
		 * above, after the kernel's copy of all before them (which has
		 * an order of its own): the last byte lands last (roshm/dma.h). */
		if (c->rx_state == 1 && c->rx_start == c->rx_end &&
		    (c->rx_left >= DIRECT_MIN || c->rx_len >= DIRECT_MIN) &&
		    (!c->rx_dst || c->rx_left > ROSHM_DMA_TAIL)) {
			rd_tcp_rx_guard(c);
			uint8_t *dst = c->rx_dst ? c->rx_dst : t->scratch;
			uint32_t want = c->rx_left, tail = c->rx_dst ? ROSHM_DMA_TAIL : 0;
			struct iovec v[2];
			int nv = 1;

			if (!c->rx_dst && want > RX_BUF)
				want = RX_BUF;
			v[0].iov_base = dst;
			v[0].iov_len = want - tail;
			if (want == c->rx_left) {
				c->rx_start = c->rx_end = 0;
				v[1].iov_base = c->rx_buf;
				v[1].iov_len = tail + hdr_size(c);
				nv = 2;
			}
			want -= tail;
			ssize_t n = readv(c->fd, v, nv);

			if (n <= 0) {
				if (n < 0 && (errno == EAGAIN || errno == EINTR))
					return;
				if (n < 0 && errno == EFAULT && c->rx_dst && rx_fault(c))
					continue;
				rd_tcp_conn_down(t, c, -ECONNRESET, n ? "read failed" : "connection closed by peer");
				return;
			}
			uint32_t in_place = (size_t)n < want ? (uint32_t)n : want;

			drained = (size_t)n < want + (nv == 2 ? v[1].iov_len : 0);
			if (c->rx_dst)
				c->rx_dst += in_place;
			c->rx_left -= in_place;
			c->rx_end += (uint32_t)n - in_place;
			c->last_rx = rte_get_timer_cycles();
			RD_STAT_ADD(c->bytes_rx, (uint64_t)n);
			budget = (uint32_t)n >= budget ? 0 : budget - (uint32_t)n;
			if (!c->rx_left) {
				c->rx_state = 0;
				frame_done(t, c);
				RD_STAT_ADD(c->frames_rx, 1);
			}
			continue;
		}
		/* Compact, then fill the buffer. */
		if (c->rx_start) {
			memmove(c->rx_buf, c->rx_buf + c->rx_start, c->rx_end - c->rx_start);
			c->rx_end -= c->rx_start;
			c->rx_start = 0;
		}
		ssize_t n = read(c->fd, c->rx_buf + c->rx_end, RX_BUF - c->rx_end);

		if (n <= 0) {
			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				return;
			rd_tcp_conn_down(t, c, -ECONNRESET, n ? "read failed" : "connection closed by peer");
			return;
		}
		drained = (size_t)n < RX_BUF - c->rx_end;
		c->rx_end += (uint32_t)n;
		c->last_rx = rte_get_timer_cycles();
		RD_STAT_ADD(c->bytes_rx, (uint64_t)n);
		budget = (uint32_t)n >= budget ? 0 : budget - (uint32_t)n;
	}
}
