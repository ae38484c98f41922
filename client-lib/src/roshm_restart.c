// SPDX-License-Identifier: MIT
/*
 * libroshm across a roshmd restart: attach again, register the owned
 * regions again with their memory, open the rest again by name, and submit
 * again, in order, what had no completion and may be (docs/architecture.md,
 * "libroshm across a roshmd restart").
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "roshm.h"
#include "roshm_internal.h"

static int cmp_tag_seq(const void *a, const void *b)
{
	const struct roshm_tag *x = *(const struct roshm_tag *const *)a;
	const struct roshm_tag *y = *(const struct roshm_tag *const *)b;

	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Move the completions roshmd posted into the library's own queue (lcq),
 * which can hold one per tag: that keeps the CQ from filling while we
 * resubmit more than it holds. */
static void cq_to_lcq(struct roshm *r)
{
	uint32_t head = *r->cq.khead, tail = __atomic_load_n(r->cq.ktail, __ATOMIC_ACQUIRE);

	for (; head != tail && r->lcq_n < r->lcq_cap; head++) {
		struct roshm_cqe *c = &r->lcq[(r->lcq_head + r->lcq_n++) % r->lcq_cap];

		*c = r->cq.cqes[head & r->cq.mask];
		roshm__untag(r, c);
	}
	__atomic_store_n(r->cq.khead, head, __ATOMIC_RELEASE);
}

/*
 * Resubmit what had no CQE, in order, a ring's worth at a time: there can be
 * more of it (up to SQ + CQ entries) than the SQ holds. Idempotent operations
 * go again; FETCH_ADD, CMP_SWAP and TXN_COMMIT whose outcome was lost
 * complete with -ECONNRESET, never twice. Returns once roshmd consumed them all.
 */
static int resubmit(struct roshm *r, struct roshm_tag **order, uint32_t n, uint64_t deadline)
{
	uint32_t i = 0;

	for (;;) {
		uint32_t head = __atomic_load_n(r->sq.khead, __ATOMIC_ACQUIRE);

		while (i < n && r->sq.sqe_tail - head < r->sq.entries) {
			struct roshm_tag *tg = order[i++];
			uint32_t t = (uint32_t)(tg - r->tags);
			uint8_t op = tg->sqe.opcode;

			if (op == ROSHM_OP_NOP || op == ROSHM_OP_WRITE || op == ROSHM_OP_READ ||
			    op == ROSHM_OP_FENCE) {
				struct roshm_sqe *sqe = &r->sq.sqes[r->sq.sqe_tail++ & r->sq.mask];

				*sqe = tg->sqe;
				sqe->handle = roshm__srv_handle(r, tg->sqe.handle);
				sqe->user_data = t;
				continue;
			}
			struct roshm_cqe *c = &r->lcq[(r->lcq_head + r->lcq_n++) % r->lcq_cap];

			memset(c, 0, sizeof(*c));
			c->user_data = tg->user_data;
			c->status = -ECONNRESET;
			c->flags = ROSHM_CQE_F_LIB;
			tg->used = 0;
			tg->next_free = r->tag_free;
			r->tag_free = t;
		}
		if (r->sq.sqe_tail != r->sq.sqe_head) {
			char one = 1;
			ssize_t w;

			__atomic_store_n(r->sq.ktail, r->sq.sqe_tail, __ATOMIC_RELEASE);
			r->sq.sqe_head = r->sq.sqe_tail;
			w = send(r->sq_event_fd, &one, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
			(void)w;
		}
		cq_to_lcq(r);
		if (i == n && __atomic_load_n(r->sq.khead, __ATOMIC_ACQUIRE) == r->sq.sqe_tail)
			return 0;
		if (mono_ms() >= deadline)
			return -ECONNRESET;
		usleep(100);
	}
}

/* No roshmd came back in time: every operation without a CQE completes
 * with -ECONNRESET from the library (the caller sees each one once), and
 * the next wait tries to re-attach again. */
static void fail_inflight(struct roshm *r)
{
	for (uint32_t t = 0; t < r->ntags; t++) {
		struct roshm_tag *tg = &r->tags[t];
		struct roshm_cqe *c;

		if (!tg->used || r->lcq_n >= r->lcq_cap)
			continue;
		c = &r->lcq[(r->lcq_head + r->lcq_n++) % r->lcq_cap];
		memset(c, 0, sizeof(*c));
		c->user_data = tg->user_data;
		c->status = -ECONNRESET;
		c->flags = ROSHM_CQE_F_LIB;
		tg->used = 0;
		tg->next_free = r->tag_free;
		r->tag_free = t;
	}
}

/*
 * roshmd went away: attach to its successor at the same socket, move the
 * arena over (same address, same contents), re-register the regions we own
 * from their memfds, re-open the others by name, and resubmit what had no
 * CQE. Non-idempotent operations whose outcome was lost complete with
 * -ECONNRESET from the library.
 */
int roshm__reconnect(struct roshm *r)
{
	uint64_t deadline = mono_ms() + r->reconnect_ms;
	struct roshm_tag **order = NULL;
	uint32_t norder = 0;
	void *map = NULL;
	size_t size = 0;
	int ret;

	uint64_t old_instance = r->instance;

	close(r->sock_fd);
	close(r->sq_event_fd);
	close(r->cq_event_fd);
	r->sock_fd = r->sq_event_fd = r->cq_event_fd = -1;
	for (;;) {
		ret = roshm__attach(r, &map, &size);
		if (!ret && r->instance == old_instance) {
			/* The same roshmd hung up on us (it judged our ring corrupt):
			 * that is an answer, not an outage. */
			munmap(map, size);
			close(r->sock_fd);
			close(r->sq_event_fd);
			close(r->cq_event_fd);
			r->sock_fd = r->sq_event_fd = r->cq_event_fd = -1;
			fail_inflight(r);
			return -ECONNRESET;
		}
		if (!ret)
			break;
		if (mono_ms() >= deadline) {
			fail_inflight(r);
			return -ECONNRESET;
		}
		/* A restarted roshmd serves within a few hundred ms: look every
		 * 5 ms for the first 2 s (a refused connect() costs microseconds),
		 * then every 50 ms. */
		usleep(mono_ms() + r->reconnect_ms - deadline < 2000 ? 5000 : 50000);
	}
	const struct roshm_chan_hdr *h = map;

	if (size != r->chan_size || h->sq_entries != r->sq.entries || h->cq_entries != r->cq.entries ||
	    h->arena_size != r->arena_size) {
		munmap(map, size);
		return -EPROTO; /* a successor with other channel sizes: give up */
	}
	/* Completions roshmd posted that we have not read yet are kept. */
	cq_to_lcq(r);
	/* The application's arena pointers stay valid: same place, same bytes. */
	memcpy((uint8_t *)map + h->arena_off, r->arena, r->arena_size);
	/* SQEs prepared but not submitted move along too (at most a ring's worth). */
	uint32_t unsent = r->sq.sqe_tail - r->sq.sqe_head;
	struct roshm_sqe *keep = unsent ? malloc(sizeof(*keep) * unsent) : NULL;

	if (unsent && !keep) {
		munmap(map, size);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < unsent; i++)
		keep[i] = r->sq.sqes[(r->sq.sqe_head + i) & r->sq.mask];
	if (mremap(map, size, size, MREMAP_MAYMOVE | MREMAP_FIXED, r->chan) == MAP_FAILED) {
		ret = -errno;
		munmap(map, size);
		free(keep);
		return ret;
	}
	roshm__bind_channel(r, r->chan, size);

	/* Regions: ours from their memfds (contents survive), others by name. */
	r->remapped = true;
	for (uint32_t i = 0; i < r->nhmap; i++) {
		struct roshm_hmap *m = &r->hmap[i];
		uint32_t srv = 0xffffffffu;

		if (m->owned) {
			struct roshm_ctl_region_create req = m->owned->req;

			roshm__ctl_hdr(&req.hdr, ROSHM_CTL_REGION_REATTACH, sizeof(req));
			if (roshm__create_region(r, &req, m->owned->fd, NULL, &srv))
				srv = 0xffffffffu;
		} else {
			/* its owner, or its node, may still be coming back: give
			 * them the deadline */
			for (;;) {
				int e = roshm__open_region(r, m->name, &m->part, &srv, NULL, &m->owner);

				if ((e != -ENOENT && e != -EHOSTUNREACH && e != -EAGAIN) ||
				    mono_ms() >= deadline)
					break;
				srv = 0xffffffffu;
				usleep(50000);
			}
		}
		m->srv = srv;
	}
	/* Grants, by their ids: to those very regions, whoever holds their
	 * names now. */
	for (struct roshm_owned *o = r->owned; o; o = o->next)
		for (uint32_t i = 0; i < o->ngrants; i++) {
			bool again = false;

			for (uint32_t j = 0; j < i; j++)
				again |= roshm__grant_same(&o->grants[j], &o->grants[i]);
			if (!again)
				roshm__grant_call(r, roshm__srv_handle(r, o->handle), 0,
						  ROSHM_GRANT_ADD_ID, o->grants[i].gid, NULL,
						  &o->grants[i].part, NULL);
		}

	/* Resubmit in submission order. */
	order = malloc(sizeof(*order) * r->ntags);
	if (!order) {
		free(keep);
		return -ENOMEM;
	}
	for (uint32_t t = 0; t < r->ntags; t++)
		if (r->tags[t].used)
			order[norder++] = &r->tags[t];
	qsort(order, norder, sizeof(*order), cmp_tag_seq);
	ret = resubmit(r, order, norder, deadline);
	free(order);
	if (ret) {
		free(keep);
		return ret;
	}
	/* They keep their place after what was resubmitted, which roshmd has
	 * consumed by now: the empty ring holds them (get_sqe saw room). */
	for (uint32_t i = 0; i < unsent; i++)
		r->sq.sqes[r->sq.sqe_tail++ & r->sq.mask] = keep[i];
	free(keep);
	return 0;
}
