// SPDX-License-Identifier: MIT
/*
 * The poller's loop and its idle policy: rounds back to back while there is
 * work; with `idle = "adaptive"`, after `idle_spin_us` without work (at
 * once, with `inflight_sleep_bytes` or more of our WRs in the NIC: their
 * completion event is far off, and on a node whose cores are shared the
 * application and the NIC's own work get the CPU we would spin on) it
 * announces NEED_WAKEUP to every client, looks once more (W1 pairs with the
 * client's W0 in roshm_submit) and sleeps in epoll on the command eventfd,
 * the clients' wakeup sockets and the network provider's fd, for as long as
 * the transaction engine, a full CQ or a held tenant allow. With
 * `idle_yield` its spin gives the CPU to whatever else is runnable there
 * (sched_yield) instead of pausing: for applications that share its CPU.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_pause.h>
#include <rte_ring.h>

#include "roshmd.h"
#include "transport/transport.h"
#include "poller/txn.h"

#define RD_LOG_COMPONENT RD_LC_POLLER

static bool work_pending(struct rd_poller *p)
{
	if (rte_ring_count(p->cmd_ring) || rd_txn_busy(p))
		return true;
	/* Only work that can go on now; the provider arms its wakeup (wake_fd)
	 * for the rest. */
	if (p->net && p->net->dp->busy && p->net->dp->busy(p->net))
		return true;
	p->cq_blocked = false;
	p->held_any = false;
	for (uint32_t i = 0; i < p->nclients; i++) {
		struct rd_client *c = p->clients[i];

		if (c->dead)
			continue;
		if (p->share[c->tidx].held) {
			/* its rate limit: poller_sleep wakes up when its tokens
			 * are back (rd_share_held_ms) */
			p->held_any = true;
			continue;
		}
		if (c->copy.region)
			return true; /* a big copy under way */
		if (__atomic_load_n(c->sq_ktail, __ATOMIC_ACQUIRE) == c->sq_head)
			continue;
		if (c->sq_busy) {
			/* Its next SQE found no room in its transport (peer
			 * quota, request ids, socket buffer; a paused region)
			 * in every round of the idle spin. What frees it wakes
			 * us (a completion or EPOLLOUT through wake_fd, a
			 * command); 20 ms at most, as for a full CQ, in case. */
			p->cq_blocked = true;
			continue;
		}
		/* SQEs, but none we may take: no CQ room (the client must reap;
		 * reaping does not wake us: libroshm does before it sleeps,
		 * and we sleep 20 ms at most), or a
		 * FENCE behind operations in flight (their completions wake
		 * us). One look at the head SQE, only to decide to sleep. */
		uint32_t used = c->cq_tail - __atomic_load_n(c->cq_khead, __ATOMIC_ACQUIRE);

		if (used + c->inflight >= c->cq_entries) {
			p->cq_blocked = true;
			continue;
		}
		const struct roshm_sqe *s = &c->sqes[c->sq_head & c->sq_mask];
		uint8_t opc = __atomic_load_n(&s->opcode, __ATOMIC_RELAXED);
		uint8_t fl = __atomic_load_n(&s->flags, __ATOMIC_RELAXED);

		if (c->inflight && (opc == ROSHM_OP_FENCE || (fl & ROSHM_SQE_F_FENCE)))
			continue;
		return true;
	}
	return false;
}

static void set_need_wakeup(struct rd_poller *p, bool on)
{
	for (uint32_t i = 0; i < p->nclients; i++)
		__atomic_store_n(&p->clients[i]->hdr->sq_flags, on ? ROSHM_SQ_NEED_WAKEUP : 0,
				 __ATOMIC_RELAXED);
}

/* What woke an epoll wait of ours: let the provider look, clear our
 * eventfd and the clients' wakeup datagrams. */
static void take_events(struct rd_poller *p, const struct epoll_event *evs, int n)
{
	for (int i = 0; i < n; i++) {
		char buf[256];

		if (p->net && evs[i].data.fd == p->net->wake_fd) {
			/* the provider's (tcp: its nested epoll, which its
			 * round reads; verbs: the completion channel) */
			if (p->net->dp->on_wake)
				p->net->dp->on_wake(p->net);
			continue;
		}
		ssize_t r;

		if (evs[i].data.fd == p->cmd_efd) /* our eventfd: clear it */
			r = read(p->cmd_efd, buf, sizeof(uint64_t));
		else /* a client's wakeup socket, roshmd's own end: one
		      * datagram, never blocking (a client that keeps
		      * sending fills its own queue and gets EAGAIN) */
			r = recv(evs[i].data.fd, buf, sizeof(buf), MSG_DONTWAIT);
		(void)r;
	}
}

/* Adaptive idle: announce NEED_WAKEUP, look once more, then sleep in epoll. */
static void poller_sleep(struct rd_poller *p)
{
	struct epoll_event evs[32];
	int n;

	set_need_wakeup(p, true);
	/* W1: pairs with the client's W0 in roshm_submit(). */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (!work_pending(p) && !atomic_load(&p->stop)) {
		RD_STAT_ADD(p->stats.sleeps, 1);
		int ms = rd_txn_sleep_ms(p);

		atomic_store_explicit(&p->heartbeat, 0, memory_order_relaxed); /* asleep, not stuck */

		if (p->cq_blocked && ms > 20)
			ms = 20;
		if (p->held_any) {
			int h = rd_share_held_ms(p);

			if (ms < 0 || ms > h)
				ms = h;
		}
		n = epoll_wait(p->epfd, evs, 32, ms);
		take_events(p, evs, n);
	}
	set_need_wakeup(p, false);
}

int rd_poller_main(void *arg)
{
	struct rd_poller *p = arg;
	uint64_t hz = rte_get_timer_hz();
	uint64_t spin = hz / 1000000 * p->cfg->idle_spin_us;
	uint64_t enough = p->cfg->inflight_sleep_bytes;
	uint64_t (*inflight)(struct rd_provider *, uint64_t) =
		p->net && enough ? p->net->dp->inflight : NULL;
	uint64_t idle_since = 0;
	bool deep = false; /* this idle began with `enough` in the NIC */

	RD_LOG(INFO, "poller running on lcore %u, idle policy %s%s, burst %u", rte_lcore_id(),
	       p->cfg->idle == RD_IDLE_BUSY ? "busy" : "adaptive",
	       p->cfg->idle != RD_IDLE_BUSY && p->cfg->idle_yield ? " (yielding while it spins)" : "",
	       p->cfg->burst);
	while (!atomic_load_explicit(&p->stop, memory_order_relaxed)) {
		atomic_store_explicit(&p->heartbeat, rte_get_timer_cycles(), memory_order_relaxed);
		if (rd_poller_round(p)) {
			idle_since = 0;
			continue;
		}
		if (p->cfg->idle == RD_IDLE_BUSY) {
			rte_pause();
			continue;
		}
		uint64_t now = rte_get_timer_cycles();

		if (!idle_since) {
			/* Rounds without work neither submit nor complete: what
			 * is in the NIC now stays so (or less) while we spin. */
			idle_since = now;
			deep = inflight && inflight(p->net, enough) >= enough;
		} else if (deep || now - idle_since >= spin) {
			poller_sleep(p);
			idle_since = 0;
		} else if (p->cfg->idle_yield) {
			/* a CPU shared with the applications: theirs at once,
			 * ours again when they yield or block */
			sched_yield();
		} else {
			rte_pause();
		}
	}
	rd_poller_drain_cmds(p);
	atomic_store(&p->running, false);
	rd_poller_drain_cmds(p); /* anything enqueued while we were stopping */
	RD_LOG(INFO, "poller stopped");
	/* Last: everything above happens before whoever sees this (main,
	 * after rte_eal_wait_lcore, before it tears the poller down; EAL's own
	 * ordering of the two is in code no sanitizer sees). */
	atomic_store_explicit(&p->exited, true, memory_order_release);
	return 0;
}
