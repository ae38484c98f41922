// SPDX-License-Identifier: MIT
/*
 * The poller: the only thread on the data path. Each round it applies
 * control commands, then serves every client round-robin: up to `burst`
 * SQEs each, copied out of shared memory before validation, handed to the
 * transport of the target region, completions posted to the client's CQ.
 * Shared indices are published once per client per round (and every
 * 64 KiB copied within a client's turn). When it idles: idle.c.
 *
 * Barrier pairs (see roshm.h / roshm.c for the client side):
 *   R0  client store-release SQ tail  -> poller load-acquire SQ tail
 *   R1  poller store-release SQ head  -> client load-acquire in get_sqe
 *   R2  poller store-release CQ tail  -> client load-acquire in peek_cqe
 *   R3  client store-release CQ head  -> poller load-acquire CQ head
 *   W0/W1  client submit vs poller going to sleep (SQ_NEED_WAKEUP)
 *   W2/W3  client going to sleep vs poller posting (CQ_NEED_WAKEUP)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_prefetch.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "roshmd.h"
#include "poller/sqe.h"
#include "transport/transport.h"
#include "poller/txn.h"

#define RD_LOG_COMPONENT RD_LC_POLLER


static void op_done(struct rd_provider *pv, struct rd_pend *pd, int32_t status, uint64_t result);
static void op_event(struct rd_provider *pv, const struct rd_event *ev);

/* The host callbacks: every provider's way back goes through the poller. */
static struct rd_provider *provider_install(struct rd_poller *p, struct rd_provider *pv)
{
	pv->poller = p;
	pv->done = op_done;
	pv->event = op_event;
	return pv;
}

int rd_poller_init(struct rd_poller *p, const struct rd_config *cfg)
{
	struct epoll_event ev = { .events = EPOLLIN };

	memset(p, 0, sizeof(*p));
	p->cfg = cfg;
	p->epfd = p->cmd_efd = p->ev_efd = -1;
	p->tsc_per_us = rte_get_tsc_hz() / 1000000;
	if (!p->tsc_per_us)
		p->tsc_per_us = 1;
	/* 1/8 us per cycle, in 32.32 fixed point: latencies cost a multiply */
	p->lat_mult = (uint64_t)((8000000ull << 32) / (rte_get_tsc_hz() ? rte_get_tsc_hz() : 1000000));
	p->cmd_ring = rte_ring_create("roshm_cmd", 1024, SOCKET_ID_ANY, RING_F_SC_DEQ);
	/* Room for every event that can be outstanding at once: one per
	 * client (CLIENT_CORRUPT, then it is dead), one per connection the
	 * control thread brought up (PEER_DOWN, INBOUND_DOWN), and the
	 * handshakes one control turn may add: none is ever dropped. */
	uint32_t nev = 1024;

	while (nev < cfg->max_clients + 4 * cfg->max_peers * RD_VERBS_QPS_MAX + 256)
		nev <<= 1;
	p->ev_ring = rte_ring_create_elem("roshm_ev", sizeof(struct rd_event), nev,
					  SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ | RING_F_EXACT_SZ);
	p->clients = calloc(cfg->max_clients, sizeof(*p->clients));
	p->epfd = epoll_create1(EPOLL_CLOEXEC);
	p->cmd_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	p->ev_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!p->cmd_ring || !p->ev_ring || !p->clients || p->epfd < 0 || p->cmd_efd < 0 ||
	    p->ev_efd < 0) {
		rd_poller_fini(p);
		return -ENOMEM;
	}
	ev.data.fd = p->cmd_efd;
	if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, p->cmd_efd, &ev) < 0) {
		rd_poller_fini(p);
		return -errno;
	}
	if (rd_txn_init(p)) {
		rd_poller_fini(p);
		return -ENOMEM;
	}
	for (int t = 0; t < cfg->ntenants; t++)
		rd_share_set(p, t, &cfg->tenants[t].quota);
	p->local = provider_install(p, &rd_local_provider);
	if (cfg->tcp_enabled || cfg->verbs_enabled) {
		int ret = rd_poller_set_net(p, cfg->tcp_enabled ? &rd_tcp_provider : &rd_verbs_provider);

		if (ret) {
			rd_poller_fini(p);
			return ret;
		}
	}
	return 0;
}

int rd_poller_set_net(struct rd_poller *p, struct rd_provider *pv)
{
	int ret;

	provider_install(p, pv);
	ret = pv->dp->init ? pv->dp->init(pv, p) : 0;
	if (ret)
		return ret;
	p->net = pv;
	if (pv->wake_fd >= 0)
		return rd_poller_watch(p, pv->wake_fd);
	return 0;
}

void rd_poller_fini(struct rd_poller *p)
{
	struct rd_provider *net = p->net;

	/* Everything queued fails (and finishes the engine's operations)
	 * before the engine goes. */
	if (net && net->dp->close_all)
		net->dp->close_all(net);
	rd_txn_fini(p);
	if (net) {
		net->dp->fini(net);
		p->net = NULL;
	}
	rte_ring_free(p->cmd_ring);
	rte_ring_free(p->ev_ring);
	free(p->clients);
	if (p->epfd >= 0)
		close(p->epfd);
	if (p->cmd_efd >= 0)
		close(p->cmd_efd);
	if (p->ev_efd >= 0)
		close(p->ev_efd);
	p->cmd_ring = p->ev_ring = NULL;
	p->clients = NULL;
	p->epfd = p->cmd_efd = p->ev_efd = -1;
}

uint64_t rd_poller_stuck_ms(const struct rd_poller *p)
{
	uint64_t hb = atomic_load_explicit(&p->heartbeat, memory_order_relaxed);
	uint64_t now = rte_get_timer_cycles(), hz = rte_get_timer_hz() / 1000;

	if (!atomic_load(&p->running) || !hb || now < hb || !hz)
		return 0;
	return (now - hb) / hz;
}

int rd_poller_watch(struct rd_poller *p, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };

	return epoll_ctl(p->epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

/* roshmd's own eventfds (command and event rings) */
static void kick(int efd)
{
	uint64_t one = 1;
	ssize_t n = write(efd, &one, sizeof(one));

	(void)n; /* EAGAIN: the counter is already non-zero, a wakeup is pending */
}

/* A sleeping client's wakeup socket: never blocks, never raises SIGPIPE. */
static void kick_client(int fd)
{
	char one = 1;
	ssize_t n = send(fd, &one, 1, MSG_DONTWAIT | MSG_NOSIGNAL);

	(void)n; /* EAGAIN: wakeups are queued already; EPIPE: the client closed its end */
}

int rd_poller_cmd(struct rd_poller *p, struct rd_cmd *cmd)
{
	struct timespec ts = { 0, 20000 };
	uint64_t waited = 0;

	atomic_store_explicit(&cmd->done, 0, memory_order_relaxed);
	cmd->result = 0;
	if (!atomic_load(&p->running)) {
		/* Before launch or after the poller lcore returned, the control
		 * thread is the only thread: apply in place. */
		rd_poller_apply_cmd(p, cmd);
		return cmd->result;
	}
	/* The ring has room for every command the one control thread can have
	 * outstanding (one); a full ring would be a bug, not load. */
	while (rte_ring_mp_enqueue(p->cmd_ring, cmd) != 0)
		nanosleep(&ts, NULL);
	kick(p->cmd_efd);
	/* Commands are rare (attach, open, close); a short sleep-wait keeps the
	 * control thread simple. Acquire pairs with the poller's release. */
	while (!atomic_load_explicit(&cmd->done, memory_order_acquire)) {
		nanosleep(&ts, NULL);
		if (++waited % 250000 == 0) /* every ~5 s: say so, keep waiting */
			RD_LOG(ERR, "poller has not applied command %d for %llu s", cmd->type,
			       (unsigned long long)(waited / 50000));
	}
	return cmd->result;
}

/* ---- lifetimes (struct rd_defer) ---- */

static void bury(struct rd_poller *p, struct rd_defer *d)
{
	struct rd_defer *top = atomic_load_explicit(&p->graveyard, memory_order_relaxed);

	/* One producer (us): the CAS only races with control's exchange. */
	do
		d->next = top;
	while (!atomic_compare_exchange_weak_explicit(&p->graveyard, &top, d, memory_order_release,
						      memory_order_relaxed));
	kick(p->ev_efd);
}

struct rd_defer *rd_poller_graveyard(struct rd_poller *p)
{
	return atomic_exchange_explicit(&p->graveyard, NULL, memory_order_acquire);
}

void rd_region_unhold(struct rd_poller *p, struct rd_region *rg)
{
	if (--rg->dp_refs == 0 && rg->released)
		bury(p, &rg->defer);
}

void rd_client_unhold(struct rd_poller *p, struct rd_client *c)
{
	if (--c->dp_refs == 0 && c->released)
		bury(p, &c->defer);
}

/* ---- tenants' shares of the poller (struct rd_share; share.c) ----------- */

/* What a client round used: off its tenant's credit and buckets. An empty
 * bucket holds the tenant's next clients in this round too: one client's
 * burst over the bucket, not one per client. */
static inline void share_charge(struct rd_poller *p, struct rd_share *sh, int64_t cost,
				uint32_t ops, uint64_t bytes)
{
	if (p->ntenants_on > 1)
		sh->credit -= cost;
	if (p->limits_on) {
		sh->ops_tokens -= ops;
		sh->byte_tokens -= (int64_t)bytes;
		sh->held = (sh->ops_per_sec && sh->ops_tokens <= 0) ||
			   (sh->bytes_per_sec && sh->byte_tokens <= 0);
	}
}

void rd_poller_post_event(struct rd_poller *p, const struct rd_event *ev)
{
	if (rte_ring_sp_enqueue_elem(p->ev_ring, (void *)(uintptr_t)ev, sizeof(*ev)) == 0)
		kick(p->ev_efd);
	else
		RD_STAT_ADD(p->stats.events_lost, 1);
}

static void client_corrupt(struct rd_poller *p, struct rd_client *c, const char *why)
{
	struct rd_event ev = { .type = RD_EV_CLIENT_CORRUPT, .client_id = c->id };

	c->dead = true;
	RD_STAT_ADD(p->stats.corrupt_clients, 1);
	strncpy(ev.why, why, sizeof(ev.why) - 1);
	/* The control thread disconnects the client and frees its state. */
	rd_poller_post_event(p, &ev);
}

static inline void cq_post(struct rd_client *c, uint64_t user_data, int32_t status,
			   uint64_t result)
{
	struct roshm_cqe *cqe = &c->cqes[c->cq_tail & c->cq_mask];

	cqe->user_data = user_data;
	cqe->status = status;
	cqe->flags = 0;
	cqe->result = result;
	cqe->rsvd = 0;
	c->cq_tail++;
}

/* A completion of an SQE handled in the round that consumed it, counted. */
static inline void post(struct rd_poller *p, struct rd_client *c, unsigned xp, uint8_t opcode,
			uint64_t user_data, int32_t status, uint64_t result)
{
	cq_post(c, user_data, status, result);
	rd_op_count(p, xp, opcode, status);
}

void rd_op_complete(struct rd_poller *p, struct rd_client *c, unsigned xp, uint8_t opcode,
		    uint64_t user_data, int32_t status, uint64_t result)
{
	/* The CQ slot was reserved when the SQE was consumed (inflight). */
	cq_post(c, user_data, status, result);
	c->inflight--;
	rd_op_count(p, xp, opcode, status);
	if (status)
		RD_STAT_ADD(c->stats.errors, 1);
}

/*
 * The one way back of every queued operation (pv->done): what the client
 * sees is decided here once (the byte count for WRITE/READ, the old value
 * for atomics, nothing on error), then it goes to the transaction engine or
 * to the client's CQ (a client that detached gets none), the tenant's share
 * of the peer and the client's hold come back, and what the client got is
 * counted with its latency (the transaction engine's own steps are not: the
 * commit's completion is).
 */
static void op_done(struct rd_provider *pv, struct rd_pend *pd, int32_t status, uint64_t result)
{
	struct rd_poller *p = pv->poller;
	/* Everything out of the entry first: what is called below may queue
	 * a new operation into the same slot (a transaction's next step). */
	struct rd_pend d = *pd;
	uint64_t res = status ? 0 : rd_op_moves_bytes(d.opcode) ? d.len : result;

	pd->client = NULL;
	pd->txn = NULL;
	pd->peer = NULL;
	pd->lbuf = NULL;
	if (d.peer && d.tidx >= 0)
		d.peer->tenant_inflight[d.tidx]--;
	if (d.lbuf)
		rd_region_unhold(p, d.lbuf);
	if (d.client) {
		if (!d.client->released) {
			if (!status)
				rd_lat_record(p, pv->xp, d.opcode, d.tsc, rte_rdtsc());
			rd_op_complete(p, d.client, pv->xp, d.opcode, d.user_data, status, res);
		}
		rd_client_unhold(p, d.client);
	} else if (d.txn) {
		rd_txn_complete(d.txn, d.opcode, status, res);
	}
}

void rd_pend_forget_client(struct rd_provider *pv, struct rd_pend *pd)
{
	struct rd_client *c = pd->client;

	if (!c)
		return;
	pd->client = NULL;
	rd_client_unhold(pv->poller, c);
}

static void op_event(struct rd_provider *pv, const struct rd_event *ev)
{
	/* The poller's view of the peer first: no new work goes to it. */
	if (ev->type == RD_EV_PEER_DOWN && ev->peer)
		ev->peer->dp_up = false;
	rd_poller_post_event(pv->poller, ev);
}

/*
 * Hand one validated operation to the provider of its region, after the
 * checks every provider needs: RD_OP_DONE (status, result set), RD_OP_QUEUED,
 * or -EBUSY (nothing taken: try again next round).
 */
int rd_poller_submit(struct rd_poller *p, struct rd_op *op)
{
	struct rd_region *rg = op->region;
	struct rd_provider *pv = rg->xport;

	(void)p;
	if (rg->remote) {
		if (rg->paused)
			return -EBUSY; /* stale: the SQE waits in its ring for the next epoch */
		if (!rg->peer->dp_up) {
			op->status = -EHOSTUNREACH;
			return RD_OP_DONE;
		}
		if (op->sqe.len > pv->max_msg && rd_op_moves_bytes(op->sqe.opcode)) {
			op->status = -EMSGSIZE;
			return RD_OP_DONE;
		}
	}
	return pv->dp->submit(pv, op);
}

/* Make this round's progress visible to the client, and wake it if it sleeps. */
static inline void client_publish(struct rd_client *c)
{
	if (c->sq_head != c->sq_pub) {
		/* R1: the client may reuse these SQE slots. */
		__atomic_store_n(c->sq_khead, c->sq_head, __ATOMIC_RELEASE);
		c->sq_pub = c->sq_head;
	}
	if (c->cq_tail == c->cq_pub)
		return;
	/* R2: CQE contents before the new tail. */
	__atomic_store_n(c->cq_ktail, c->cq_tail, __ATOMIC_RELEASE);
	c->cq_pub = c->cq_tail;
	/* W3: pairs with the client's W2 before it sleeps. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&c->hdr->cq_flags, __ATOMIC_RELAXED) & ROSHM_CQ_NEED_WAKEUP)
		kick_client(c->cq_wfd);
}

/*
 * Mid-turn (PUBLISH_BYTES): the tails only. cq_pub stays behind, so the
 * round's client_publish still makes its fence and its wake-up check: at
 * most one wake-up per client per round, whatever the pod makes us copy.
 */
static inline void client_publish_tails(struct rd_client *c)
{
	__atomic_store_n(c->sq_khead, c->sq_head, __ATOMIC_RELEASE);
	c->sq_pub = c->sq_head;
	__atomic_store_n(c->cq_ktail, c->cq_tail, __ATOMIC_RELEASE);
}

static inline unsigned batch_bucket(unsigned n)
{
	unsigned b = 0;

	while (n > 1 && b < RD_BATCH_BUCKETS - 1) {
		n >>= 1;
		b++;
	}
	return b;
}

/*
 * Local WRITE/READ bigger than this are copied a piece per round (struct
 * rd_copy), and a client copies at most ROUND_BYTES per round: one client's
 * 256 MiB copy never holds up the others' rounds.
 */
#define COPY_CHUNK (64u << 10)
#define ROUND_BYTES (256u << 10)

/*
 * Within a client's turn its completions are published every PUBLISH_BYTES
 * copied, not only at the end of the round: a client streaming 4 KiB WRITEs
 * refills the first buffers of a burst while the poller copies the rest,
 * instead of the two cores taking turns (a burst of 32 is 128 KiB, about
 * as long to copy as to write). Per 64 KiB: two release stores (the
 * wake-up check stays at the end of the round: client_publish_tails).
 */
#define PUBLISH_BYTES (64u << 10)

/*
 * A big copy goes in pieces of COPY_PIECE; between pieces it gives the rest
 * of its turn up when a client of another tenant waits with a small
 * operation (SMALL_OP bytes or fewer: what a latency-bound tenant sends).
 * Such a victim then waits for one piece, not for the flooder's whole
 * share of the round; the round then takes every client once more
 * (rd_poller_round), so the flooder still gets its whole share in it: the
 * small operation only went first. Bulk against bulk keeps whole turns.
 * The looks cost cross-core reads of rings other clients write, charged
 * to no tenant: at most PEEK_CLIENTS per piece, from a rotating start, and
 * PEEKS_PER_ROUND in a round (a client that keeps storing its SQ tail makes
 * each look a cache miss), and another pass only follows one that served
 * an SQE.
 */
#define COPY_PIECE 512u
#define SMALL_OP 4096u
#define PEEK_CLIENTS 2u
#define PEEKS_PER_ROUND 16u
#define YIELD_PASSES 4

static bool small_waiting(struct rd_poller *p, const struct rd_client *c)
{
	uint32_t n = p->nclients, lim = n < PEEK_CLIENTS ? n : PEEK_CLIENTS;

	if (p->peeks_left < lim)
		return false; /* this round's looks are spent: the copy keeps its turn */
	p->peeks_left -= lim;
	for (uint32_t i = 0; i < lim; i++) {
		const struct rd_client *o = p->clients[(p->peek + i) % n];

		/* only one the next pass would serve: its tenant has share left,
		 * its transport took its last SQE, its CQ has room (else a pod
		 * that never reaps would make every copy step aside) */
		if (o->tidx == c->tidx || o->dead || o->copy.region || o->sq_busy ||
		    p->share[o->tidx].held || p->share[o->tidx].credit <= 0 ||
		    __atomic_load_n(o->sq_ktail, __ATOMIC_ACQUIRE) == o->sq_head ||
		    o->cq_tail - __atomic_load_n(o->cq_khead, __ATOMIC_ACQUIRE) + o->inflight >=
			    o->cq_entries)
			continue;
		/* one look at its head SQE, only to decide whom to serve first
		 * (client_round copies and checks it before any use); a FENCE
		 * behind work in flight would not be served */
		const struct roshm_sqe *s = &o->sqes[o->sq_head & o->sq_mask];

		if (o->inflight && (__atomic_load_n(&s->opcode, __ATOMIC_RELAXED) == ROSHM_OP_FENCE ||
				    (__atomic_load_n(&s->flags, __ATOMIC_RELAXED) & ROSHM_SQE_F_FENCE)))
			continue;
		if (__atomic_load_n(&s->len, __ATOMIC_RELAXED) <= SMALL_OP)
			return true;
	}
	p->peek += lim;
	return false;
}

/* Go on with a client's big local copy; returns the bytes copied. */
static uint32_t copy_step(struct rd_poller *p, struct rd_client *c, uint32_t budget)
{
	struct rd_copy *k = &c->copy;
	const struct roshm_sqe *s = &k->sqe;
	uint32_t n = s->len - k->done < budget ? s->len - k->done : budget;
	uint8_t *region = k->region->data + s->off + k->done;
	uint8_t *arena = (k->lbuf ? k->lbuf->data : c->arena) + s->arena_off + k->done;
	uint8_t *dst = s->opcode == ROSHM_OP_WRITE ? region : arena;
	const uint8_t *src = s->opcode == ROSHM_OP_WRITE ? arena : region;
	/* in pieces, while no other tenant's small operation waits; whole
	 * when only one tenant is attached */
	uint32_t piece = p->ntenants_on > 1 ? COPY_PIECE : n, m = 0;

	do {
		uint32_t l = n - m < piece ? n - m : piece;

		/* LBUF: both may be one region, overlapping (rd_dma_move: then
		 * memmove, each piece defined, the whole as undefined as on a
		 * NIC); else the last bytes of each piece land last, the last
		 * piece's last of all */
		rd_dma_move(dst + m, src + m, l);
		m += l;
	} while (m < n && !small_waiting(p, c));
	if (m < n) {
		RD_STAT_ADD(p->stats.copy_yields, 1);
		p->yielded = true; /* the round serves the others, then this one again */
	}
	n = m;
	k->done += n;
	if (k->done == s->len) {
		rd_lat_record(p, RD_XP_LOCAL, s->opcode, k->tsc, rte_rdtsc());
		rd_op_complete(p, c, RD_XP_LOCAL, s->opcode, s->user_data, 0, s->len);
		rd_region_unhold(p, k->region);
		k->region = NULL;
		if (k->lbuf)
			rd_region_unhold(p, k->lbuf);
		k->lbuf = NULL;
	}
	return n;
}

/*
 * Local operations completed in a row within a client's turn are timed
 * together: one TSC read for up to LAT_RUN of them (a TSC read costs about
 * as much as a 64 B WRITE's whole work on the poller, 10 ns on this kind of
 * machine), each recorded with the run's mean (the sum loses less than a
 * cycle per operation). Whatever else the turn does ends the run first, so
 * its time is not charged to local operations. The histogram's first
 * bucket (1/8 us) holds a small local copy either way.
 */
#define LAT_RUN 32u

struct lat_run {
	uint64_t t0;          /* the end of the last operation timed */
	unsigned n;
	uint8_t op[LAT_RUN];  /* opcodes of the run */
};

/* Whether @op (checked, @ret) completes here as a local operation timed in a run. */
static inline bool local_timed(const struct rd_poller *p, const struct rd_op *op, int ret)
{
	uint8_t opc = op->sqe.opcode;

	if (ret || !op->region || op->region->xport != p->local || op->region->draining)
		return false;
	if (opc == ROSHM_OP_WRITE || opc == ROSHM_OP_READ)
		return true;
	/* atomics, unless they go through the verbs loopback (local_submit) */
	return (opc == ROSHM_OP_FETCH_ADD || opc == ROSHM_OP_CMP_SWAP) && !op->region->peer;
}

/* Record the run (each of its stretches of one opcode at once), start the next. */
static void lat_flush(struct rd_poller *p, struct lat_run *lr)
{
	uint64_t now = rte_rdtsc();
	uint64_t per = lr->n ? (now - lr->t0) / lr->n : 0;

	for (unsigned i = 0, j; i < lr->n; i = j) {
		for (j = i + 1; j < lr->n && lr->op[j] == lr->op[i]; j++)
			;
		rd_lat_record_n(p, RD_XP_LOCAL, lr->op[i], per, j - i);
	}
	lr->n = 0;
	lr->t0 = now;
}

/* The transport row of the operation counters for @rg (NULL: none). */
static inline unsigned xp_of(const struct rd_region *rg)
{
	return rg ? rg->xport->xp : RD_XP_NONE;
}

/*
 * Serve one client: returns SQEs consumed (and big copies advanced).
 * The latency of an operation finished here (local) is the poller's time on
 * it: from the end of the one before it in this round to its completion,
 * its copy and checks included, as the mean of its run (struct lat_run).
 */
static unsigned client_round(struct rd_poller *p, struct rd_client *c)
{
	uint32_t sq_tail, avail, cq_head, used, room, n, i;
	/* cost units this round: ROUND_BYTES, or less when its tenant's share
	 * of the round is less (each SQE RD_OP_COST, plus the bytes it moves) */
	int64_t budget = ROUND_BYTES, budget0;
	struct rd_share *sh = &p->share[c->tidx];
	unsigned done = 0;
	uint64_t bytes = 0, errors = 0, staged = 0, pub_at = 0;
	struct lat_run lr = { .n = 0 };
	struct rd_op op;

	if (c->dead)
		return 0;
	/* ROUND_BYTES is for the whole round, its extra passes too */
	if (p->pass)
		budget = c->round_left;
	else
		c->round_left = budget;
	if (budget <= 0)
		return 0;
	if (sh->held || (p->ntenants_on > 1 && sh->credit <= 0)) {
		/* its tenant's rate limit, or its share of this round is spent */
		if (c->copy.region || __atomic_load_n(c->sq_ktail, __ATOMIC_ACQUIRE) != c->sq_head)
			RD_STAT_ADD(p->stats.tenant_held[c->tidx][sh->held ? 0 : 1], 1);
		return 0;
	}
	if (p->ntenants_on > 1 && sh->credit < budget)
		budget = sh->credit;
	budget0 = budget;
	bool by_share = budget0 < (int64_t)ROUND_BYTES;
	if (c->copy.region) {
		uint32_t k = copy_step(p, c, (uint32_t)budget);

		budget -= k;
		c->round_left = budget;
		share_charge(p, sh, k, 0, 0); /* its bytes were charged when it began */
		if (c->copy.region) {
			if (by_share) /* the rest waits for its tenant's next share */
				RD_STAT_ADD(p->stats.tenant_held[c->tidx][1], 1);
			return 1; /* its budget went into the copy */
		}
		budget0 = budget;
		done = 1; /* progress: the poller must not sleep */
	}
	/* R0 */
	sq_tail = __atomic_load_n(c->sq_ktail, __ATOMIC_ACQUIRE);
	avail = sq_tail - c->sq_head;
	if (avail > c->sq_entries) {
		client_corrupt(p, c, "SQ tail out of range");
		return 0;
	}
	if (!avail)
		return done;
	done = 0;
	/* R3 */
	cq_head = __atomic_load_n(c->cq_khead, __ATOMIC_ACQUIRE);
	used = c->cq_tail - cq_head;
	if (used > c->cq_entries) {
		client_corrupt(p, c, "CQ head out of range");
		return 0;
	}
	/* Slots for operations in flight are reserved. used + inflight passes
	 * cq_entries only if the client moved its head back while they were in
	 * flight: no room then (not a wrap to ~4G, a full burst over unread
	 * CQEs). Both terms are <= cq_entries: no overflow; a cmov, no branch. */
	used += c->inflight;
	room = used < c->cq_entries ? c->cq_entries - used : 0;
	n = avail < p->cfg->burst ? avail : p->cfg->burst;
	if (n > room) {
		n = room; /* the client must reap first */
		RD_STAT_ADD(p->stats.cq_full, 1);
	}

	/* The SQEs were written by the client's core and the CQE slots were
	 * last read there: start the cache-line transfers for the whole burst. */
	for (i = 0; i < n; i++) {
		rte_prefetch0(&c->sqes[(c->sq_head + i) & c->sq_mask]);
		__builtin_prefetch(&c->cqes[(c->cq_tail + i) & c->cq_mask], 1, 3);
	}
	c->sq_busy = false;
	lr.t0 = rte_rdtsc();
	for (i = 0; i < n && budget > 0; i++) {
		/* Copy before validating: the client may rewrite the SQE under
		 * us, and we must check and use one and the same value. */
		memcpy(&op.sqe, &c->sqes[c->sq_head & c->sq_mask], sizeof(op.sqe));
		__asm__ volatile("" ::: "memory");
		if ((op.sqe.opcode == ROSHM_OP_FENCE || (op.sqe.flags & ROSHM_SQE_F_FENCE)) &&
		    c->inflight)
			break; /* earlier work still in flight: come back next round */

		int ret = rd_sqe_check(&op.sqe, c->dp_handles, c->nhandles, c->arena_size,
				       &op.region, &op.lbuf);
		/* the handle's own NIC key (verbs grants), valid when ret is 0 */
		op.nic_rkey = op.region ? c->dp_handles[op.sqe.handle & 0xffffu].nic_rkey : 0;
		budget -= RD_OP_COST;
		if (lr.n && !local_timed(p, &op, ret))
			lat_flush(p, &lr);
		if (op.sqe.opcode == ROSHM_OP_TXN_WRITE) {
			/* No CQE of its own: its status travels to the commit.
			 * It costs what staging copied and moved (the payload
			 * gathered so far moves for every segment added). */
			uint64_t work = rd_txn_write(p, c, &op.sqe, op.region, ret);

			budget -= (int64_t)work;
			if (work)
				staged += op.sqe.len; /* bytes it gets through (bytes_per_sec) */
		} else if (op.sqe.opcode == ROSHM_OP_TXN_COMMIT) {
			/* Even a rejected commit ends what was gathered. */
			c->inflight++;
			ret = rd_txn_commit(p, c, &op.sqe, op.region, ret);
			if (ret) {
				c->inflight--;
				post(p, c, xp_of(op.region), op.sqe.opcode, op.sqe.user_data, ret, 0);
				errors++;
			}
		} else if (!ret && op.region && op.region->draining) {
			/* draining: no new work */
			post(p, c, xp_of(op.region), op.sqe.opcode, op.sqe.user_data, -EAGAIN, 0);
			errors++;
		} else if (ret) {
			post(p, c, RD_XP_NONE, op.sqe.opcode, op.sqe.user_data, ret, 0);
			errors++;
		} else if (!op.region) { /* NOP, FENCE */
			post(p, c, RD_XP_NONE, op.sqe.opcode, op.sqe.user_data, 0, 0);
		} else if (op.sqe.len > COPY_CHUNK && op.region->xport == p->local &&
			   rd_op_moves_bytes(op.sqe.opcode)) {
			/* a big local copy: a piece now, the rest in later rounds */
			lat_flush(p, &lr);
			c->copy.sqe = op.sqe;
			c->copy.done = 0;
			c->copy.tsc = lr.t0;
			c->copy.region = op.region;
			rd_region_hold(op.region);
			c->copy.lbuf = op.lbuf;
			if (op.lbuf)
				rd_region_hold(op.lbuf);
			c->inflight++;
			bytes += op.sqe.len;
			c->sq_head++;
			done++;
			budget -= copy_step(p, c, budget > 0 ? (uint32_t)budget : 0);
			break;
		} else if (op.region->xport == p->local && rd_op_moves_bytes(op.sqe.opcode)) {
			/* a small local WRITE or READ, the common case: the copy
			 * here (rd_local_exec without the struct rd_op) */
			rd_local_copy(op.sqe.opcode, op.region->data + op.sqe.off,
				      (op.lbuf ? op.lbuf->data : c->arena) + op.sqe.arena_off,
				      op.sqe.len);
			post(p, c, RD_XP_LOCAL, op.sqe.opcode, op.sqe.user_data, 0, op.sqe.len);
			budget -= op.sqe.len;
			bytes += op.sqe.len;
			lr.op[lr.n++] = op.sqe.opcode;
			if (lr.n == LAT_RUN)
				lat_flush(p, &lr);
		} else {
			/* A client's operation: never raw, never roshmd's buffers. */
			op.client = c;
			op.txn = NULL;
			op.raw = false;
			op.again = false;
			op.src = NULL;
			op.dst = NULL;
			if (op.lbuf) { /* its own region's memory instead of its arena */
				if (op.sqe.opcode == ROSHM_OP_WRITE)
					op.src = op.lbuf->data + op.sqe.arena_off;
				else
					op.dst = op.lbuf->data + op.sqe.arena_off;
			}
			op.status = 0;
			op.result = 0;
			ret = rd_poller_submit(p, &op);
			if (ret < 0) {
				budget += RD_OP_COST;
				c->sq_busy = true; /* work_pending: not work until something frees it */
				/* The SQE stays, next round: a paused region waits
				 * for its next instance; else the tenant's share of
				 * the peer is used up, or the transport is full. */
				if (op.region->paused)
					break;
				if (op.region->peer && !rd_peer_inflight_ok(p, op.region->peer, c))
					RD_STAT_ADD(p->stats.tenant_held[c->tidx][RD_HELD_PEER], 1);
				else
					RD_STAT_ADD(p->stats.xport_busy, 1);
				break;
			}
			if (rd_op_moves_bytes(op.sqe.opcode))
				budget -= op.sqe.len;
			if (ret) {
				unsigned xp = xp_of(op.region);

				post(p, c, xp, op.sqe.opcode, op.sqe.user_data, op.status, op.result);
				if (op.status) {
					errors++;
				} else {
					if (xp == RD_XP_LOCAL) {
						lr.op[lr.n++] = op.sqe.opcode;
						if (lr.n == LAT_RUN)
							lat_flush(p, &lr);
					} else {
						uint64_t now = rte_rdtsc();

						rd_lat_record(p, xp, op.sqe.opcode, lr.t0, now);
						lr.t0 = now;
					}
					if (rd_op_moves_bytes(op.sqe.opcode))
						bytes += op.sqe.len;
				}
			} else {
				c->inflight++;
				if (rd_op_moves_bytes(op.sqe.opcode))
					bytes += op.sqe.len;
			}
		}
		c->sq_head++;
		done++;
		if (bytes - pub_at >= PUBLISH_BYTES) {
			client_publish_tails(c);
			pub_at = bytes;
		}
	}
	if (lr.n)
		lat_flush(p, &lr);
	c->round_left = budget;
	if (!done)
		return 0;
	share_charge(p, sh, budget0 - budget, done, bytes + staged);
	if (by_share && budget <= 0 && (c->copy.region || i < avail))
		RD_STAT_ADD(p->stats.tenant_held[c->tidx][1], 1); /* more waits for the next share */

	RD_STAT_ADD(c->stats.sqes, done);
	RD_STAT_ADD(c->stats.errors, errors);
	RD_STAT_ADD(c->stats.bytes, bytes);
	RD_STAT_ADD(p->stats.sqes, done);
	RD_STAT_ADD(p->stats.batch_hist[batch_bucket(done)], 1);
	RD_STAT_ADD(p->stats.batch_sqes, done);
	return done;
}

unsigned rd_poller_round(struct rd_poller *p)
{
	unsigned total = 0, n;

	if (rte_ring_count(p->cmd_ring))
		rd_poller_drain_cmds(p);
	p->peeks_left = PEEKS_PER_ROUND;
	n = p->nclients; /* after the commands: CLIENT_DEL shrinks the set */
	if (p->ntenants_on > 1 || p->limits_on)
		rd_share_round(p);
	if (p->net)
		total += p->net->dp->poll(p->net, p->cfg->burst);
	total += rd_txn_tick(p);
	if (n) {
		uint32_t start = p->rr++ % n;

		for (unsigned i = 0; i < n; i++)
			total += client_round(p, p->clients[(start + i) % n]);
		/* A big copy stepped aside for another tenant's small operation:
		 * every client once more, with what its share left (a few times
		 * at most: each pass serves the small ones first). */
		for (p->pass = 1; p->yielded && p->pass <= YIELD_PASSES; p->pass++) {
			uint64_t sqes = p->stats.sqes;

			p->yielded = false;
			for (unsigned i = 0; i < n; i++)
				total += client_round(p, p->clients[(start + i) % n]);
			if (p->stats.sqes == sqes)
				break; /* nobody's SQE was served: no more passes */
		}
		p->pass = 0;
		p->yielded = false;
		for (unsigned i = 0; i < n; i++)
			if (!p->clients[i]->dead)
				client_publish(p->clients[i]);
	}
	if (p->net)
		p->net->dp->flush(p->net);
	RD_STAT_ADD(p->stats.rounds, 1);
	if (total)
		RD_STAT_ADD(p->stats.busy_rounds, 1);
	return total;
}
