// SPDX-License-Identifier: MIT
/*
 * rsockets of libroshm-verbs: riomap, riounmap and riowrite (riostream).
 *
 * riomap registers the caller's buffer for remote writes and tells the peer
 * in an IOMAP message (a control message, inline: where the buffer sits in
 * this socket's riomap space, its address and rkey). riowrite copies the
 * caller's bytes into a send slot and RDMA WRITEs them into the peer's map
 * that holds [offset, offset + n): they land in the peer's memory with no
 * call of the peer's, and before anything the caller sends after them (one
 * RC QP: in order). riounmap tells the peer (an IOMAP of length 0) and
 * deregisters the buffer; a peer's WRITE that was already under way then
 * fails and resets the connection, as on rdma-core's rsockets.
 *
 * The peer's IOMAP messages are checked (rsocket_wire.c: length, no
 * overlap, RS_IOMAPS at most, an unmap of a map it gave); its WRITEs reach
 * only the buffers we registered, each inside its MR (roshmd checks the
 * rkey and the bounds on every access, and the tenant as for any verbs
 * traffic). RDMA_IOMAPSIZE is taken and kept, RS_IOMAPS maps each way
 * whatever it says. Both sides must be connected; maps go with the
 * connection.
 */
#define _GNU_SOURCE
#include <sys/mman.h>

#include "rsocket_int.h"

/* The rsocket, connected and locked, or NULL with errno set. */
static struct rs *rs_conn_lock(int s)
{
	struct rs *rs = rs_get(s);

	if (!rs)
		return NULL;
	pthread_mutex_lock(&rs->lock);
	if (rs->state != RS_CONN || rs->dg) {
		pthread_mutex_unlock(&rs->lock);
		rs_put_fail(rs, ENOTCONN);
		return NULL;
	}
	return rs;
}

/* Tell the peer about @m (host order), on a control credit. */
static int rs_send_iomap(struct rs *rs, const struct rs_iomap *m)
{
	struct rs_iomap w = { .off = htobe64(m->off), .addr = htobe64(m->addr),
			      .len = htonl(m->len), .rkey = htonl(m->rkey) };
	int e;

	for (;;) {
		rs_progress(rs, false);
		if ((e = rs_tx_err(rs)))
			return e;
		if (rs_can_ctrl(rs))
			return rs_post_send(rs, RS_T_IOMAP, &w, sizeof(w));
		if ((e = rs_wait(rs, RS_EV_CTRL, -1)))
			return e;
	}
}

/* Our map at @off out of the table, its MR deregistered. */
static void lmap_drop(struct rs *rs, uint64_t off)
{
	for (uint32_t i = 0; i < rs->nlmap; i++)
		if (rs->lmap[i].m.off == off) {
			ibv_dereg_mr(rs->lmap[i].mr);
			rs->lmap[i] = rs->lmap[--rs->nlmap];
			return;
		}
}

RS_EXPORT off_t riomap(int s, void *b, size_t n, int prot, int flags, off_t off)
{
	struct rs_lmap *l;
	struct rs *rs;
	uint64_t at;
	int e = 0;

	if (!(rs = rs_conn_lock(s)))
		return -1;
	if (!b || !n || n > UINT32_MAX || prot != PROT_WRITE || flags || (off < 0 && off != -1)) {
		e = EINVAL;
		goto out;
	}
	if (rs->nlmap >= RS_IOMAPS) {
		e = ENOMEM;
		goto out;
	}
	if (off == -1) {   /* after the last one */
		at = 0;
		for (uint32_t i = 0; i < rs->nlmap; i++)
			if (rs->lmap[i].m.off + rs->lmap[i].m.len > at)
				at = rs->lmap[i].m.off + rs->lmap[i].m.len;
	} else {
		at = (uint64_t)off;
	}
	if (at > (uint64_t)INT64_MAX - n) {
		e = EINVAL;
		goto out;
	}
	for (uint32_t i = 0; i < rs->nlmap; i++)
		if (at < rs->lmap[i].m.off + rs->lmap[i].m.len && rs->lmap[i].m.off < at + n) {
			e = EINVAL;   /* overlaps a map of ours */
			goto out;
		}
	/* in the table before the message: another thread's riomap, which
	 * may run while this one waits for a control credit, sees it */
	l = &rs->lmap[rs->nlmap];
	l->mr = ibv_reg_mr(rs->pd, b, n, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!l->mr) {
		e = errno ? errno : ENOMEM;
		goto out;
	}
	l->addr = b;
	l->m = (struct rs_iomap){ .off = at, .addr = (uintptr_t)b, .len = (uint32_t)n,
				  .rkey = l->mr->rkey };
	rs->nlmap++;
	{
		struct rs_iomap m = l->m;   /* l may move while we wait */

		e = rs_send_iomap(rs, &m);
		if (e)
			lmap_drop(rs, m.off);
	}
out:
	pthread_mutex_unlock(&rs->lock);
	if (e)
		return rs_put_fail(rs, e);
	rs_put(rs);
	return (off_t)at;
}

RS_EXPORT int riounmap(int s, void *b, size_t n)
{
	struct rs *rs;
	uint32_t i;
	int e = 0;

	if (!(rs = rs_conn_lock(s)))
		return -1;
	for (i = 0; i < rs->nlmap && (rs->lmap[i].addr != b || rs->lmap[i].m.len != n); i++)
		;
	if (i == rs->nlmap) {
		e = EINVAL;
	} else {
		struct rs_iomap gone = { .off = rs->lmap[i].m.off };
		struct ibv_mr *mr = rs->lmap[i].mr;

		/* out of the table first (another thread's call may run while
		 * this one waits), the peer hears of it, then the MR goes */
		rs->lmap[i] = rs->lmap[--rs->nlmap];
		e = rs_send_iomap(rs, &gone);
		ibv_dereg_mr(mr);
	}
	pthread_mutex_unlock(&rs->lock);
	if (e)
		return rs_put_fail(rs, e);
	rs_put(rs);
	return 0;
}

/* An RDMA WRITE of @len bytes of @data, through a send slot, to @raddr. */
static int rs_post_write(struct rs *rs, const void *data, uint32_t len, uint64_t raddr, uint32_t rkey)
{
	uint8_t *dst = rs->buf + (size_t)(rs->tx_head % rs->ntx) * rs->seg;
	struct ibv_sge sge = { .addr = (uintptr_t)dst, .length = len, .lkey = rs->mr->lkey };
	struct ibv_send_wr wr, *bad;
	int ret;

	memcpy(dst, data, len);
	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr_id = RS_WR_DATA;   /* its completion frees the slot */
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	ret = ibv_post_send(rs->id->qp, &wr, &bad);
	if (ret) {
		rs_break(rs, ret);
		return ret;
	}
	rs->sq_busy++;
	rs->tx_head++;
	return 0;
}

/* The peer's map that holds all of [off, off + n), or NULL. */
static const struct rs_iomap *rmap_find(const struct rs *rs, uint64_t off, size_t n)
{
	for (uint32_t i = 0; i < rs->nrmap; i++)
		if (off >= rs->rmap[i].off && off - rs->rmap[i].off <= rs->rmap[i].len &&
		    n <= rs->rmap[i].len - (off - rs->rmap[i].off))
			return &rs->rmap[i];
	return NULL;
}

RS_EXPORT size_t riowrite(int s, const void *b, size_t n, off_t off, int flags)
{
	const uint8_t *p = b;
	const struct rs_iomap *m = NULL;
	struct rs *rs;
	size_t sent = 0;
	bool nomap = false;
	int e = 0;

	if (!(rs = rs_conn_lock(s)))
		return (size_t)-1;
	if (flags & ~(MSG_DONTWAIT | MSG_NOSIGNAL | MSG_WAITALL) || off < 0 || (n && !b)) {
		e = EINVAL;
		goto out;
	}
	for (;;) {
		rs_progress(rs, false);   /* the peer's IOMAP messages so far */
		/* the peer's map that holds all of it, looked up again after
		 * each wait (the peer may have taken it away meanwhile) */
		if (!(m = rmap_find(rs, (uint64_t)off, n))) {
			e = EINVAL;
			nomap = true;
			break;
		}
		if (sent == n) {
			/* a WRITE our library refused at its post (an rkey it
			 * could not open) has completed in error by now: say so
			 * here, since a peer that spins on its buffer (riostream)
			 * never calls in, and we may never poll again */
			if (n && rs->data_failed) {
				e = rs->err ? rs->err : ECONNRESET;
				sent = 0;
			}
			break;
		}
		if ((e = rs_tx_err(rs)))
			break;
		if (rs_can_write(rs)) {
			uint32_t len = n - sent < rs->seg ? (uint32_t)(n - sent) : rs->seg;

			if (rs_post_write(rs, p + sent, len, m->addr + ((uint64_t)off - m->off) + sent,
					  m->rkey))
				continue;   /* broken now */
			sent += len;
			continue;
		}
		if ((e = rs_block(rs, flags, RS_EV_WRITE)))
			break;
	}
out:
	pthread_mutex_unlock(&rs->lock);
	if (sent || (!n && !e)) {
		rs_put(rs);
		return sent;
	}
	rs_put_fail(rs, e);
	/* as rdma-core's: 0 where the peer has no map (errno EINVAL here, none
	 * there), else (size_t)-1 and errno */
	return nomap ? 0 : (size_t)-1;
}
