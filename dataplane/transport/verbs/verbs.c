// SPDX-License-Identifier: MIT
/*
 * `verbs` transport, poller side. Requests of every local client to one
 * peer node share its RC QP(s). submit() turns an operation into a WR in the
 * QP's chain for this round, pointing straight at the client's arena (its
 * channel is one MR) or at the transaction engine's buffers; flush() posts
 * each QP's chain with one ibv_post_send (the doorbell), signaling only the
 * last WR and every signal_every-th; poll() reaps each QP's CQ in bursts.
 * Completions of an RC send queue arrive in order, so a signaled CQE
 * completes every WR before it.
 *
 * A responder's NAK (remote access, invalid request or operation error: an
 * rkey that went stale under a pod's dereg, a region withdrawn while a WR
 * to it was in flight) fails that one WR: the WRs before it were
 * acknowledged, the responder executed none after it, and its QP is in
 * the error state on both ends. The peer is reset (qp_reset): new work for
 * it waits in the clients' rings, its other QPs drain, the control thread
 * re-makes the connection at once, and the WRs after the refused one are
 * posted again on the new QP, except those of the client whose WR was
 * refused (-ECONNRESET, as its own QP on a NIC would flush them). So one
 * pod's race with its peer's dereg does not fail the other pods' work.
 *
 * Any other error completion (or a failed post) takes the peer down: the WR
 * that failed gets its own status, every other WR of the peer fails with
 * -ECONNRESET (its outcome is unknown), the control thread is told, and it
 * reconnects with new QPs.
 *
 * No locks, syscalls or allocation here, except ibv_modify_qp(ERR) when the
 * control thread takes a peer down.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "transport/verbs/verbs.h"

static int verbs_init(struct rd_provider *pv, struct rd_poller *p)
{
	struct rd_verbs *v = calloc(1, sizeof(*v));

	if (!v)
		return -ENOMEM;
	v->pv = pv;
	v->poller = p;
	v->signal_every = p->cfg->verbs_signal_every;
	v->max_msg = 1u << 30; /* the control thread lowers it to the port's max_msg_sz */
	pv->max_msg = v->max_msg;
	v->max_act = (p->cfg->max_peers + 1) * p->cfg->verbs_qps_per_peer;
	v->act = calloc(v->max_act, sizeof(*v->act));
	v->max_rst = p->cfg->max_peers + 1;
	v->rst = calloc(v->max_rst, sizeof(*v->rst));
	if (!v->act || !v->rst) {
		free(v->act);
		free(v->rst);
		free(v);
		return -ENOMEM;
	}
	pv->priv = v;
	return 0;
}

static void verbs_fini(struct rd_provider *pv)
{
	struct rd_verbs *v = pv->priv;

	if (!v)
		return;
	free(v->act);
	free(v->rst);
	free(v);
	pv->priv = NULL;
	pv->wake_fd = -1;
}

static void post_event(struct rd_verbs *v, struct rd_peer *peer, const char *why)
{
	struct rd_event ev = { .type = RD_EV_PEER_DOWN, .peer = peer };

	snprintf(ev.node, sizeof(ev.node), "%s", peer->node);
	snprintf(ev.why, sizeof(ev.why), "%s", why);
	v->pv->event(v->pv, &ev);
}

static int wc_errno(enum ibv_wc_status st)
{
	switch (st) {
	case IBV_WC_REM_ACCESS_ERR:
		return -EACCES;      /* rkey, bounds or rights refused by the responder */
	case IBV_WC_REM_INV_REQ_ERR:
	case IBV_WC_REM_OP_ERR:
		return -EINVAL;
	case IBV_WC_RETRY_EXC_ERR:
	case IBV_WC_RNR_RETRY_EXC_ERR:
		return -EHOSTUNREACH; /* no answer from the peer */
	case IBV_WC_LOC_PROT_ERR:
	case IBV_WC_LOC_LEN_ERR:
		return -EFAULT;
	default:
		return -ECONNRESET;
	}
}

static inline void complete_one(struct rd_verbs *v, struct rd_vqp *q, uint32_t id, int32_t st)
{
	struct rd_vpend *pd = &q->pend[id & q->mask];
	struct rd_region *rg = pd->region;

	pd->region = NULL;
	v->pv->done(v->pv, &pd->h, st, q->res[id & q->mask]);
	if (rg)
		rd_region_unhold(v->poller, rg);
}

static void act_del(struct rd_verbs *v, struct rd_vqp *q)
{
	for (uint32_t i = 0; i < v->nact; i++)
		if (v->act[i] == q) {
			v->act[i] = v->act[--v->nact];
			return;
		}
}

static void rst_del(struct rd_verbs *v, struct rd_peer *peer)
{
	rd_vpeer(peer)->resetting = false;
	rd_vpeer(peer)->reset_posted = false;
	for (uint32_t i = 0; i < v->nrst; i++)
		if (v->rst[i] == peer) {
			v->rst[i] = v->rst[--v->nrst];
			return;
		}
}

/* Fail everything of one QP: @failed gets @st, the rest -ECONNRESET. A QP
 * already down may still hold WRs to post again (a reset): they fail too. */
static void qp_fail(struct rd_verbs *v, struct rd_vqp *q, uint32_t failed, int32_t st)
{
	if (q->up) {
		q->up = false;
		act_del(v, q);
	}
	q->nchain = 0;
	for (; q->head != q->tail; q->head++)
		complete_one(v, q, q->head, q->head == failed ? st : -ECONNRESET);
}

/* Take the whole peer down (every QP of it, and the WRs a reset holds) and
 * tell the control thread, unless no QP was up (a reset whose reconnect
 * failed: the control thread knows). */
static void peer_fail(struct rd_verbs *v, struct rd_peer *peer, struct rd_vqp *q, uint32_t failed,
		      int32_t st, int32_t others, const char *why)
{
	bool was_up = false;

	for (uint32_t i = 0; i < rd_vpeer(peer)->nvq; i++) {
		struct rd_vqp *o = rd_vpeer(peer)->vq[i];

		if (!o || (!o->up && o->head == o->tail))
			continue;
		was_up |= o->up;
		qp_fail(v, o, o == q ? failed : o->tail, o == q ? st : others);
	}
	if (rd_vpeer(peer)->resetting)
		rst_del(v, peer);
	if (was_up)
		post_event(v, peer, why);
}

static bool wc_is_nak(enum ibv_wc_status st)
{
	return st == IBV_WC_REM_ACCESS_ERR || st == IBV_WC_REM_INV_REQ_ERR ||
	       st == IBV_WC_REM_OP_ERR;
}

/* Complete @q's WRs up to @id, in order (an RC send queue completes in
 * order: a CQE, or an error after them, says every earlier WR is done). */
static unsigned complete_upto(struct rd_verbs *v, struct rd_vqp *q, uint32_t id)
{
	unsigned n = 0;

	while ((int32_t)(id - q->head) >= 0) {
		struct rd_vpend *pd = &q->pend[q->head & q->mask];

		if (rd_op_moves_bytes(pd->h.opcode))
			RD_STAT_ADD(q->bytes, pd->h.len);
		complete_one(v, q, q->head, 0);
		q->head++;
		n++;
	}
	return n;
}

static inline uint32_t wr_rkey(const struct ibv_send_wr *wr)
{
	return wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD || wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ?
		       wr->wr.atomic.rkey : wr->wr.rdma.rkey;
}

/* Remember that @peer refused @rkey (the oldest entry makes room). */
static void refused_add(struct rd_verbs_peer *vp, uint32_t rkey)
{
	uint64_t until = rte_rdtsc() + rte_get_tsc_hz() * RD_VERBS_REFUSED_SEC;
	uint32_t at = 0;
	bool found = false;

	for (uint32_t i = 0; i < vp->nrefused && !found; i++) {
		found = vp->refused[i].rkey == rkey;
		if (found || vp->refused[i].until < vp->refused[at].until)
			at = i;
	}
	if (!found && vp->nrefused < RD_VERBS_REFUSED)
		at = vp->nrefused++;
	vp->refused[at].rkey = rkey;
	vp->refused[at].until = until;
}

/* Whether @peer refused @rkey lately (expired entries go). */
static bool refused(struct rd_verbs_peer *vp, uint32_t rkey)
{
	uint64_t now = rte_rdtsc();

	for (uint32_t i = 0; i < vp->nrefused; i++) {
		if (vp->refused[i].until <= now) {
			vp->refused[i--] = vp->refused[--vp->nrefused];
			continue;
		}
		if (vp->refused[i].rkey == rkey)
			return true;
	}
	return false;
}

/* A reset peer whose QPs have all drained: the control thread re-makes it. */
static void reset_check(struct rd_verbs *v, struct rd_peer *peer)
{
	struct rd_verbs_peer *vp = rd_vpeer(peer);
	struct rd_event ev = { .type = RD_EV_PEER_RESET, .peer = peer };

	/* Posted once; with no room for the event now, at a later poll (a
	 * lost one would leave the work held for good). */
	if (vp->reset_posted || !rte_ring_free_count(v->poller->ev_ring))
		return;
	for (uint32_t i = 0; i < vp->nvq; i++)
		if (vp->vq[i] && vp->vq[i]->up && vp->vq[i]->head != vp->vq[i]->tail)
			return;
	for (uint32_t i = 0; i < vp->nvq; i++)
		if (vp->vq[i] && vp->vq[i]->up) {
			vp->vq[i]->up = false;
			vp->vq[i]->nchain = 0;
			act_del(v, vp->vq[i]);
		}
	vp->reset_posted = true;
	snprintf(ev.node, sizeof(ev.node), "%s", peer->node);
	snprintf(ev.why, sizeof(ev.why), "%s", "an operation refused by the peer");
	v->pv->event(v->pv, &ev);
}

/*
 * @q's WR @failed was refused by the responder (status @st): the WRs
 * before it are done, it fails, and of those after it (flushed, never
 * executed) those of the refused WR's client (or transaction) fail with
 * -ECONNRESET, those with the same refused rkey with @st (they would be
 * refused too), and the others stay, packed in order from q->head, to be
 * posted again when the peer is back (verbs_peer_up). New work for the
 * peer waits meanwhile; new work with the refused rkey fails at once.
 */
static unsigned qp_reset(struct rd_verbs *v, struct rd_vqp *q, uint32_t failed, int32_t st)
{
	struct rd_peer *peer = q->peer;
	struct rd_verbs_peer *vp = rd_vpeer(peer);
	unsigned n = 0;
	uint32_t w;

	if (q->head == q->tail) {
		/* a refusal of nothing we sent: a broken NIC or peer */
		peer_fail(v, peer, q, q->tail, st, -ECONNRESET, "an error for no WR in flight");
		return 0;
	}

	/* First, so that nothing the completions below start (a
	 * transaction's next step) is queued here: it waits. */
	q->up = false;
	q->nchain = 0;
	act_del(v, q);
	if (!vp->resetting) {
		vp->resetting = true;
		RD_STAT_ADD(vp->resets, 1);
		v->rst[v->nrst++] = peer; /* one entry per peer: max_peers + loopback */
	}
	if ((int32_t)(failed - q->head) < 0 || (int32_t)(q->tail - failed) <= 0)
		failed = q->head; /* not one in flight: blame the oldest */
	if (failed != q->head)
		n = complete_upto(v, q, failed - 1);
	const struct rd_client *fc = q->pend[failed & q->mask].h.client;
	const struct rd_txn *ft = fc ? NULL : q->pend[failed & q->mask].h.txn;
	bool stale = st == -EACCES;
	uint32_t rk = wr_rkey(&q->wr[failed & q->mask]);

	if (stale)
		refused_add(vp, rk);
	complete_one(v, q, failed, st);
	q->head++;
	w = q->head;
	for (uint32_t j = q->head; j != q->tail; j++) {
		struct rd_vpend *pd = &q->pend[j & q->mask];

		if (fc ? pd->h.client == fc : !pd->h.client && pd->h.txn == ft) {
			complete_one(v, q, j, -ECONNRESET);
			continue;
		}
		if (stale && wr_rkey(&q->wr[j & q->mask]) == rk) {
			complete_one(v, q, j, st);
			continue;
		}
		if (w != j) {
			q->pend[w & q->mask] = *pd;
			q->wr[w & q->mask] = q->wr[j & q->mask];
			q->sge[w & q->mask] = q->sge[j & q->mask];
			pd->region = NULL;
		}
		w++;
	}
	q->tail = w;
	reset_check(v, peer);
	return n;
}

static int verbs_peer_up(struct rd_provider *pv, struct rd_peer *peer, int fd)
{
	struct rd_verbs *v = pv->priv;
	struct rd_verbs_peer *vp = rd_vpeer(peer);

	(void)fd;
	if (v->nact + vp->nvq > v->max_act)
		return -ENOSPC; /* peers.c keeps to max_peers: a bug, not load */
	for (uint32_t i = 0; i < vp->nvq; i++) {
		struct rd_vqp *q = vp->vq[i];

		q->nchain = 0;
		q->since_signal = 0;
		/* After a reset: the WRs held in the slots go first, in order,
		 * on the new QP (its CQ is new: no old wr_id comes back). */
		for (uint32_t j = q->head; j != q->tail; j++) {
			struct ibv_send_wr *wr = &q->wr[j & q->mask];
			struct ibv_sge *sg = &q->sge[j & q->mask];

			wr->wr_id = j;
			wr->sg_list = sg;
			wr->send_flags &= ~(unsigned)IBV_SEND_SIGNALED;
			if (sg->length > q->max_inline) /* the new QP may inline less */
				wr->send_flags &= ~(unsigned)IBV_SEND_INLINE;
			if (wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ||
			    wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP)
				sg->addr = (uintptr_t)&q->res[j & q->mask];
			if (++q->since_signal >= v->signal_every) {
				wr->send_flags |= IBV_SEND_SIGNALED;
				q->since_signal = 0;
			}
			q->nchain++;
			RD_STAT_ADD(vp->reposted, 1);
		}
		q->up = true;
		v->act[v->nact++] = q;
	}
	if (vp->resetting)
		rst_del(v, peer);
	return 0;
}

static void verbs_peer_down(struct rd_provider *pv, struct rd_peer *peer, int status,
			    const char *why)
{
	struct rd_verbs_peer *vp = rd_vpeer(peer);

	/* Stop the hardware first, so that nothing lands after we said it failed. */
	for (uint32_t i = 0; i < vp->nvq; i++) {
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

		if (vp->vq[i] && vp->vq[i]->up)
			ibv_modify_qp(vp->vq[i]->qp, &a, IBV_QP_STATE);
	}
	peer_fail(pv->priv, peer, NULL, 0, status, status, why);
}

static unsigned verbs_poll(struct rd_provider *pv, unsigned budget);

/*
 * Before the poller sleeps. WRs in flight: a busy poller keeps polling the
 * CQs; an adaptive one requests completion events (the comp channel is its
 * wake_fd) and sleeps, unless a completion came before the request (which
 * raises no event).
 */
static bool verbs_busy(struct rd_provider *pv)
{
	struct rd_verbs *v = pv->priv;
	bool inflight = false;

	for (uint32_t k = 0; k < v->nact && !inflight; k++)
		inflight = v->act[k]->head != v->act[k]->tail;
	if (!inflight)
		return false;
	if (v->poller->cfg->idle == RD_IDLE_BUSY)
		return true;
	for (uint32_t k = 0; k < v->nact; k++)
		if (v->act[k]->head != v->act[k]->tail)
			ibv_req_notify_cq(v->act[k]->cq, 0);
	return verbs_poll(pv, 0) > 0;
}

/* The bytes of the WRs in flight, up to @enough (not the fast path: the
 * poller asks once, when a round first finds no work). */
static uint64_t verbs_inflight(struct rd_provider *pv, uint64_t enough)
{
	struct rd_verbs *v = pv->priv;
	uint64_t n = 0;

	for (uint32_t k = 0; k < v->nact && n < enough; k++) {
		const struct rd_vqp *q = v->act[k];

		for (uint32_t j = q->head; j != q->tail && n < enough; j++)
			n += q->sge[j & q->mask].length;
	}
	return n;
}

/* The comp channel woke the poller: consume and acknowledge its events. */
static void verbs_on_wake(struct rd_provider *pv)
{
	struct rd_verbs *v = pv->priv;
	struct ibv_cq *cq;
	void *ctx;

	while (ibv_get_cq_event(v->comp, &cq, &ctx) == 0)
		ibv_ack_cq_events(cq, 1);
}

static void verbs_close_all(struct rd_provider *pv)
{
	struct rd_verbs *v = pv->priv;

	if (!v)
		return;
	while (v->nact) {
		struct rd_vqp *q = v->act[0];

		peer_fail(v, q->peer, NULL, 0, -ECONNRESET, -ECONNRESET, "roshmd stopping");
	}
	while (v->nrst)
		peer_fail(v, v->rst[0], NULL, 0, -ECONNRESET, -ECONNRESET, "roshmd stopping");
}

/* lkey of roshmd-owned memory the transaction engine uses. */
static bool own_lkey(const struct rd_verbs *v, const void *p, uint32_t len, uint32_t *lkey)
{
	for (int i = 0; i < 2; i++) {
		const uint8_t *b = v->mem[i].base;

		if ((const uint8_t *)p >= b && (const uint8_t *)p + len <= b + v->mem[i].len) {
			*lkey = v->mem[i].lkey;
			return true;
		}
	}
	return false;
}

static int verbs_submit(struct rd_provider *pv, struct rd_op *op)
{
	struct rd_verbs *v = pv->priv;
	struct rd_region *rg = op->region;
	struct rd_peer *peer = rg->peer;
	const struct roshm_sqe *s = &op->sqe;
	struct rd_vqp *q;
	struct rd_vpend *pd;
	struct ibv_send_wr *wr;
	struct ibv_sge *sg;
	uint64_t raddr;
	uint32_t i, lkey = 0;
	uint8_t *laddr = NULL;

	/* A client's operations stay on one QP (ordered); the transaction
	 * engine's go on the first (its staging WRITE and commit CAS must be
	 * executed in order). */
	struct rd_verbs_peer *vp = rd_vpeer(peer);

	if (vp->resetting)
		return -EBUSY; /* re-made after a refused WR: the SQE waits, briefly */
	q = vp->nvq ? vp->vq[op->client && vp->nvq > 1 ? op->client->id % vp->nvq : 0] : NULL;
	if (!q || !q->up) {
		/* The loopback (atomics on our own regions) is being re-made:
		 * wait (the SQE stays, a transaction step is retried). A remote
		 * peer is down: fail, as the poller's own check does. */
		if (peer->self)
			return -EBUSY;
		op->status = -EHOSTUNREACH;
		return RD_OP_DONE;
	}
	if (q->tail - q->head >= q->depth || !rd_peer_inflight_ok(v->poller, peer, op->client))
		return -EBUSY; /* send queue (or this tenant's share of it) full: next round */
	/* a grantee's handle names the owner's MR of its grant alone */
	uint32_t rkey = op->nic_rkey && op->client && !op->raw ? op->nic_rkey : rg->rkey;

	if (__builtin_expect(vp->nrefused != 0, 0) && refused(vp, rkey)) {
		op->status = -EACCES; /* refused a moment ago: not again, until the registry knows */
		return RD_OP_DONE;
	}
	if (s->opcode == ROSHM_OP_WRITE || s->opcode == ROSHM_OP_READ) {
		if (op->lbuf) {
			/* the client's own region (ROSHM_SQE_F_LBUF), held by
			 * the operation: the NIC moves its bytes, no copy */
			const struct ibv_mr *lmr = op->lbuf->mr;

			laddr = s->opcode == ROSHM_OP_WRITE ? (uint8_t *)(uintptr_t)op->src : op->dst;
			if (!lmr) {
				op->status = -EFAULT;
				return RD_OP_DONE;
			}
			lkey = lmr->lkey;
		} else if (op->client) {
			laddr = op->client->arena + s->arena_off;
			lkey = op->client->lkey;
		} else {
			laddr = s->opcode == ROSHM_OP_WRITE ? (uint8_t *)(uintptr_t)op->src : op->dst;
			if (!own_lkey(v, laddr, s->len, &lkey)) {
				op->status = -EFAULT;
				return RD_OP_DONE;
			}
		}
	}
	i = q->tail & q->mask;
	pd = &q->pend[i];
	wr = &q->wr[i];
	sg = &q->sge[i];
	raddr = rg->raddr + (op->raw ? 0 : rg->data_off) + s->off;
	memset(wr, 0, sizeof(*wr));
	wr->wr_id = q->tail;
	wr->sg_list = sg;
	wr->num_sge = 1;
	switch (s->opcode) {
	case ROSHM_OP_WRITE:
		wr->opcode = IBV_WR_RDMA_WRITE;
		wr->wr.rdma.remote_addr = raddr;
		wr->wr.rdma.rkey = rkey;
		if (s->len <= q->max_inline)
			wr->send_flags = IBV_SEND_INLINE; /* copied at post time, in this round */
		break;
	case ROSHM_OP_READ:
		wr->opcode = IBV_WR_RDMA_READ;
		wr->wr.rdma.remote_addr = raddr;
		wr->wr.rdma.rkey = rkey;
		break;
	case ROSHM_OP_FETCH_ADD:
	case ROSHM_OP_CMP_SWAP:
		wr->opcode = s->opcode == ROSHM_OP_FETCH_ADD ? IBV_WR_ATOMIC_FETCH_AND_ADD
							     : IBV_WR_ATOMIC_CMP_AND_SWP;
		wr->wr.atomic.remote_addr = raddr;
		wr->wr.atomic.rkey = rkey;
		wr->wr.atomic.compare_add = s->operand1;
		wr->wr.atomic.swap = s->operand2;
		laddr = (uint8_t *)&q->res[i];
		lkey = q->res_mr->lkey;
		break;
	default:
		op->status = -EINVAL;
		return RD_OP_DONE;
	}
	sg->addr = (uintptr_t)laddr;
	sg->length = s->opcode == ROSHM_OP_FETCH_ADD || s->opcode == ROSHM_OP_CMP_SWAP ? 8 : s->len;
	sg->lkey = lkey;
	if (!sg->length)
		wr->num_sge = 0;
	if (++q->since_signal >= v->signal_every) {
		wr->send_flags |= IBV_SEND_SIGNALED;
		q->since_signal = 0;
	}
	rd_pend_start(&pd->h, op, peer, rte_rdtsc());
	/* The NIC writes into our own regions through the loopback: keep the
	 * region (its memory and MR) until the WR is done. */
	pd->region = rg->remote ? NULL : rg;
	if (pd->region)
		rd_region_hold(rg);
	q->tail++;
	q->nchain++;
	return RD_OP_QUEUED;
}

/* One doorbell per QP per round. */
static void verbs_flush(struct rd_provider *pv)
{
	struct rd_verbs *v = pv->priv;

	for (uint32_t k = 0; k < v->nact; k++) {
		struct rd_vqp *q = v->act[k];
		struct ibv_send_wr *bad = NULL;
		uint32_t n = q->nchain;
		int ret;

		if (!n)
			continue;
		uint32_t first = q->tail - n;

		for (uint32_t j = first; j + 1 != q->tail; j++)
			q->wr[j & q->mask].next = &q->wr[(j + 1) & q->mask];
		struct ibv_send_wr *last = &q->wr[(q->tail - 1) & q->mask];

		last->next = NULL;
		last->send_flags |= IBV_SEND_SIGNALED; /* the round's last completes the rest */
		q->since_signal = 0;
		ret = ibv_post_send(q->qp, &q->wr[first & q->mask], &bad);
		q->nchain = 0;
		RD_STAT_ADD(q->posts, 1);
		RD_STAT_ADD(q->wrs, n);
		if (ret) {
			RD_STAT_ADD(q->errors, 1);
			peer_fail(v, q->peer, q, bad ? (uint32_t)bad->wr_id : q->tail, ret > 0 ? -ret : -EIO,
				  -ECONNRESET, "ibv_post_send failed");
			k = (uint32_t)-1; /* the active set changed: start over */
		}
	}
}

static unsigned verbs_poll(struct rd_provider *pv, unsigned budget)
{
	struct rd_verbs *v = pv->priv;
	struct ibv_wc wc[RD_VERBS_CQ_BURST];
	unsigned total = 0;

	(void)budget;
	for (uint32_t k = 0; k < v->nact; k++) {
		struct rd_vqp *q = v->act[k];

		if (q->head == q->tail)
			continue;
		int n = ibv_poll_cq(q->cq, RD_VERBS_CQ_BURST, wc);

		for (int j = 0; j < n; j++) {
			uint32_t id = (uint32_t)wc[j].wr_id;

			if (wc[j].status != IBV_WC_SUCCESS) {
				char why[64];

				RD_STAT_ADD(q->errors, 1);
				if (wc_is_nak(wc[j].status)) {
					total += qp_reset(v, q, id, wc_errno(wc[j].status));
				} else {
					snprintf(why, sizeof(why), "completion error: %s",
						 ibv_wc_status_str(wc[j].status));
					peer_fail(v, q->peer, q, id, wc_errno(wc[j].status),
						  -ECONNRESET, why);
				}
				k = (uint32_t)-1; /* the active set changed: start over */
				break;
			}
			/* In order: this completes every WR up to it. */
			total += complete_upto(v, q, id);
			RD_STAT_ADD(q->cqes, 1);
		}
		if (n < 0) {
			peer_fail(v, q->peer, q, q->tail, -EIO, -ECONNRESET, "ibv_poll_cq failed");
			k = (uint32_t)-1;
		}
	}
	/* Reset peers whose other QPs drained in this poll go to the control thread. */
	for (uint32_t k = 0; k < v->nrst; k++)
		reset_check(v, v->rst[k]);
	return total;
}

static const struct rd_provider_dp_ops verbs_dp_ops = {
	.init = verbs_init,
	.fini = verbs_fini,
	.submit = verbs_submit,
	.flush = verbs_flush,
	.poll = verbs_poll,
	.busy = verbs_busy,
	.inflight = verbs_inflight,
	.on_wake = verbs_on_wake,
	.peer_up = verbs_peer_up,
	.peer_down = verbs_peer_down,
	.close_all = verbs_close_all,
};

extern const struct rd_provider_cp_ops rd_verbs_cp_ops;

struct rd_provider rd_verbs_provider = {
	.name = "verbs",
	.scheme = "verbs:",
	.dp = &verbs_dp_ops,
	.cp = &rd_verbs_cp_ops,
	.loopback_name = "verbs-loopback",
	.keep_peers = true,
	.xp = RD_XP_VERBS,
	.log_comp = RD_LC_VERBS,
	.wake_fd = -1,
};
