// SPDX-License-Identifier: MIT
/*
 * SPSC rings: the client's inline ring code (roshm.h) against the real
 * poller (rd_poller_round), in one process over plain memory. Full/empty,
 * index wrap-around past 2^32, and a two-thread stress that checks the order
 * and content of millions of entries.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <rte_eal.h>

#include "roshm.h"
#include "roshmd.h"
#include "transport/transport.h"

static struct rd_config cfg;
static struct rd_poller poller;


struct fixture {
	void *mem;
	struct rd_client c;       /* roshmd's view */
	struct roshm r;           /* the client's view */
	struct rd_region rg;
	uint64_t word[64];
	struct rd_handle handles[4];
};

static void dump(const struct fixture *f, const char *what)
{
	fprintf(stderr, "%s: SQ khead %u ktail %u poller head %u | CQ khead %u ktail %u poller tail %u"
		" inflight %u | client sqe_head %u sqe_tail %u\n", what, *f->c.sq_khead, *f->c.sq_ktail,
		f->c.sq_head, *f->c.cq_khead, *f->c.cq_ktail, f->c.cq_tail, f->c.inflight,
		f->r.sq.sqe_head, f->r.sq.sqe_tail);
}

#define VERIFY(f, cond) do { if (!(cond)) { dump(f, #cond); fail_msg("%s", #cond); abort(); } } while (0)

static struct fixture *fixture_new(uint32_t sq, uint32_t cq, uint32_t start)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct roshm_chan_layout l;
	uint8_t *m;

	assert_non_null(f);
	/* the channel as roshmd and libroshm lay it out */
	roshm_chan_layout(sq, cq, 65536, &l);
	assert_int_equal(posix_memalign(&f->mem, 4096, l.size), 0);
	memset(f->mem, 0, l.size);
	m = f->mem;
	struct roshm_ring_idx *sqi = (void *)(m + l.sq_idx_off);
	struct roshm_sqe *sqes = (void *)(m + l.sq_off);
	struct roshm_ring_idx *cqi = (void *)(m + l.cq_idx_off);
	struct roshm_cqe *cqes = (void *)(m + l.cq_off);
	uint8_t *arena = m + l.arena_off;

	sqi->head = sqi->tail = cqi->head = cqi->tail = start;
	f->c.id = 1;
	f->c.hdr = f->mem;
	f->c.sq_khead = &sqi->head;
	f->c.sq_ktail = &sqi->tail;
	f->c.sqes = sqes;
	f->c.sq_entries = sq;
	f->c.sq_mask = sq - 1;
	f->c.cq_khead = &cqi->head;
	f->c.cq_ktail = &cqi->tail;
	f->c.cqes = cqes;
	f->c.cq_entries = cq;
	f->c.cq_mask = cq - 1;
	f->c.arena = arena;
	f->c.arena_size = 65536;
	f->c.sq_head = f->c.cq_tail = start;
	f->c.nhandles = 4;
	f->c.dp_handles = f->handles;
	f->c.cq_wfd = -1;
	f->rg.data = (uint8_t *)f->word;
	f->rg.data_size = sizeof(f->word);
	f->rg.xport = &rd_local_provider;
	f->handles[1].region = &f->rg;
	f->handles[1].gen = 0;

	f->r.sq.khead = &sqi->head;
	f->r.sq.ktail = &sqi->tail;
	f->r.sq.kflags = &f->c.hdr->sq_flags;
	f->r.sq.sqes = sqes;
	f->r.sq.entries = sq;
	f->r.sq.mask = sq - 1;
	f->r.sq.sqe_head = f->r.sq.sqe_tail = start;
	f->r.cq.khead = &cqi->head;
	f->r.cq.ktail = &cqi->tail;
	f->r.cq.kflags = &f->c.hdr->cq_flags;
	f->r.cq.cqes = cqes;
	f->r.cq.entries = cq;
	f->r.cq.mask = cq - 1;
	f->r.arena = arena;
	f->r.arena_size = 65536;
	f->r.sq_event_fd = -1;

	struct rd_cmd cmd = { .type = RD_CMD_CLIENT_ADD, .client = &f->c };

	assert_int_equal(rd_poller_cmd(&poller, &cmd), 0);
	return f;
}

static void fixture_free(struct fixture *f)
{
	struct rd_cmd cmd = { .type = RD_CMD_CLIENT_DEL, .client = &f->c };

	rd_poller_cmd(&poller, &cmd);
	free(f->mem);
	free(f);
}

static void test_full_empty(void **state)
{
	struct fixture *f = fixture_new(8, 16, 0);
	struct roshm_cqe *cqe = NULL;
	uint64_t next = 0, reaped = 0;

	(void)state;
	VERIFY(f, roshm_peek_cqe(&f->r, &cqe) == -EAGAIN);
	VERIFY(f, rd_poller_round(&poller) == 0);
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < 8; i++) {
			struct roshm_sqe *s = roshm_get_sqe(&f->r);

			VERIFY(f, s != NULL);
			roshm_prep_nop(s);
			s->user_data = next++;
		}
		VERIFY(f, roshm_get_sqe(&f->r) == NULL); /* SQ full */
		VERIFY(f, roshm_submit(&f->r) == 8);
		VERIFY(f, rd_poller_round(&poller) == 8);
	}
	/* CQ is full (16): the poller must not take more SQEs. */
	for (int i = 0; i < 8; i++) {
		struct roshm_sqe *s = roshm_get_sqe(&f->r);

		VERIFY(f, s != NULL);
		roshm_prep_nop(s);
		s->user_data = next++;
	}
	roshm_submit(&f->r);
	VERIFY(f, rd_poller_round(&poller) == 0);
	VERIFY(f, *f->c.cq_ktail - *f->c.cq_khead == 16);
	/* Reap one, the poller takes exactly one. */
	VERIFY(f, roshm_peek_cqe(&f->r, &cqe) == 0);
	VERIFY(f, cqe->user_data == reaped++);
	roshm_cqe_seen(&f->r, cqe);
	VERIFY(f, rd_poller_round(&poller) == 1);
	while (roshm_peek_cqe(&f->r, &cqe) == 0) {
		VERIFY(f, cqe->user_data == reaped);
		reaped++;
		roshm_cqe_seen(&f->r, cqe);
		rd_poller_round(&poller);
	}
	VERIFY(f, reaped == next);
	fixture_free(f);
}

/* Start every index just below 2^32 so the run crosses the wrap. */
static void test_wraparound(void **state)
{
	const uint32_t start = UINT32_MAX - 40;
	struct fixture *f = fixture_new(16, 32, start);
	struct roshm_cqe *cqe = NULL;
	uint64_t next = 0, reaped = 0;

	(void)state;
	while (reaped < 1000) {
		unsigned batch = 1 + (unsigned)(next * 7 % 13);

		for (unsigned i = 0; i < batch; i++) {
			struct roshm_sqe *s = roshm_get_sqe(&f->r);

			if (!s)
				break;
			roshm_prep_fetch_add(s, 1, 8, 1);
			s->user_data = next++;
		}
		roshm_submit(&f->r);
		rd_poller_round(&poller);
		while (roshm_peek_cqe(&f->r, &cqe) == 0) {
			VERIFY(f, cqe->user_data == reaped);
			VERIFY(f, cqe->status == 0);
			VERIFY(f, cqe->result == reaped); /* old value: applied in order */
			reaped++;
			roshm_cqe_seen(&f->r, cqe);
		}
	}
	VERIFY(f, *f->c.sq_khead < start); /* wrapped */
	VERIFY(f, *f->c.cq_ktail < start);
	VERIFY(f, f->word[1] == reaped);
	fixture_free(f);
}

static volatile int stop_poller;

static void *poller_thread(void *arg)
{
	(void)arg;
	while (!stop_poller)
		rd_poller_round(&poller);
	return NULL;
}

#define STRESS_OPS (4u << 20)

static void test_two_thread_stress(void **state)
{
	struct fixture *f = fixture_new(256, 512, UINT32_MAX - 100000);
	struct roshm_cqe *cqe = NULL;
	uint64_t next = 0, reaped = 0;
	pthread_t t;

	(void)state;
	stop_poller = 0;
	assert_int_equal(pthread_create(&t, NULL, poller_thread, NULL), 0);
	while (reaped < STRESS_OPS) {
		struct roshm_sqe *s;
		unsigned n = 0;

		while (next < STRESS_OPS && n < 64 && (s = roshm_get_sqe(&f->r))) {
			/* Content: FETCH_ADD returns the running count, so each
			 * CQE's result must equal its sequence number. */
			roshm_prep_fetch_add(s, 1, 16, 1);
			s->user_data = next++ ^ 0x5a5a5a5a00000000ull;
			n++;
		}
		if (n)
			roshm_submit(&f->r);
		while (roshm_peek_cqe(&f->r, &cqe) == 0) {
			if (cqe->user_data != (reaped ^ 0x5a5a5a5a00000000ull) || cqe->status ||
			    cqe->result != reaped) {
				stop_poller = 1;
				pthread_join(t, NULL);
				dump(f, "stress");
				fail_msg("entry %llu: user_data %llx status %d result %llu",
					 (unsigned long long)reaped, (unsigned long long)cqe->user_data,
					 cqe->status, (unsigned long long)cqe->result);
			}
			reaped++;
			roshm_cqe_seen(&f->r, cqe);
		}
	}
	stop_poller = 1;
	pthread_join(t, NULL);
	VERIFY(f, f->word[2] == STRESS_OPS);
	VERIFY(f, *f->c.sq_khead == (uint32_t)(UINT32_MAX - 100000 + STRESS_OPS));
	fixture_free(f);
}

int main(void)
{
	char prefix[64];
	char *argv[] = { "test_ring", "--no-huge", "-m", "64", "--no-pci", "--no-shconf",
			 "--file-prefix", prefix, "--log-level", "lib.eal:error", "--no-telemetry",
			 "-l", "0", NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_full_empty),
		cmocka_unit_test(test_wraparound),
		cmocka_unit_test(test_two_thread_stress),
	};

	const char *tag = getenv("ROSHM_TEST_TAG");

	/* the run's tag: check_leftovers.sh finds EAL's runtime directory by it */
	snprintf(prefix, sizeof(prefix), "%s-ring-%d", tag && *tag ? tag : "manual", (int)getpid());
	if (rte_eal_init((int)(sizeof(argv) / sizeof(argv[0])) - 1, argv) < 0) {
		fprintf(stderr, "EAL init failed\n");
		return 1;
	}
	/* EAL pinned this thread to lcore 0's CPU; the stress test wants the
	 * poller thread and this one on different CPUs, as in roshmd. */
	cpu_set_t all;

	CPU_ZERO(&all);
	for (int i = 0; i < CPU_SETSIZE; i++)
		CPU_SET(i, &all);
	pthread_setaffinity_np(pthread_self(), sizeof(all), &all);
	rd_config_defaults(&cfg);
	if (rd_poller_init(&poller, &cfg))
		return 1;
	int ret = cmocka_run_group_tests_name("ring", tests, NULL, NULL);

	rd_poller_fini(&poller);
	rte_eal_cleanup();
	/* EAL leaves its runtime directory (config, mp socket) behind */
	char rm[512];

	snprintf(rm, sizeof(rm), "rm -rf %s/dpdk/%s", geteuid() == 0 ? "/var/run" :
		 getenv("XDG_RUNTIME_DIR") ? getenv("XDG_RUNTIME_DIR") : "/tmp", prefix);
	if (system(rm))
		ret = 1;
	return ret;
}
