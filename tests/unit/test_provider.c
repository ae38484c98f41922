// SPDX-License-Identifier: MIT
/*
 * The poller's side of the provider seam (dataplane/transport/transport.h),
 * with a mock network provider in place of tcp or verbs: the checks every
 * provider relies on (rd_poller_submit: paused, peer down, too large), and
 * the one way back (pv->done: the byte count for WRITE/READ, the old value
 * for atomics, nothing on error; the tenant's share and the client's hold
 * returned; no CQE for a client that detached, which is freed only then).
 * The real providers are driven end to end by the integration, security
 * and softroce suites.
 */
#define _GNU_SOURCE
#include <errno.h>
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

/* ---- the mock: queues everything, finishes when the test says ---- */

#define MOCK_MAX 16
static struct {
	struct rd_pend pend[MOCK_MAX];
	struct rd_op ops[MOCK_MAX];
	int n;                        /* queued */
	int submits;                  /* calls of submit */
	bool full;                    /* answer -EBUSY */
	struct rd_client *gone;       /* client_gone's argument */
} mock;

static int mock_submit(struct rd_provider *pv, struct rd_op *op)
{
	(void)pv;
	mock.submits++;
	if (mock.full || mock.n == MOCK_MAX)
		return -EBUSY;
	mock.ops[mock.n] = *op;
	rd_pend_start(&mock.pend[mock.n], op, op->region->peer, 0);
	mock.n++;
	return RD_OP_QUEUED;
}

static void mock_flush(struct rd_provider *pv)
{
	(void)pv;
}

static unsigned mock_poll(struct rd_provider *pv, unsigned budget)
{
	(void)pv;
	(void)budget;
	return 0;
}

static void mock_client_gone(struct rd_provider *pv, struct rd_client *c)
{
	(void)pv;
	mock.gone = c;
}

static const struct rd_provider_dp_ops mock_dp = {
	.submit = mock_submit,
	.flush = mock_flush,
	.poll = mock_poll,
	.client_gone = mock_client_gone,
};

static struct rd_provider mock_pv = {
	.name = "mock",
	.scheme = "mock:",
	.dp = &mock_dp,
	.xp = RD_XP_NONE,
	.wake_fd = -1,
	.max_msg = 4096,
};

/* ---- a client over plain memory, a remote region behind the mock ---- */

struct fixture {
	void *mem;
	struct rd_client c;
	struct roshm r;
	struct rd_peer peer;
	struct rd_region rg;
	struct rd_handle handles[4];
};

static struct fixture *fixture_new(void)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct roshm_chan_layout l;
	uint8_t *m;

	assert_non_null(f);
	roshm_chan_layout(16, 32, 65536, &l);
	assert_int_equal(posix_memalign(&f->mem, 4096, l.size), 0);
	memset(f->mem, 0, l.size);
	m = f->mem;
	struct roshm_ring_idx *sqi = (void *)(m + l.sq_idx_off);
	struct roshm_ring_idx *cqi = (void *)(m + l.cq_idx_off);

	f->c.id = 7;
	f->c.hdr = f->mem;
	f->c.sq_khead = &sqi->head;
	f->c.sq_ktail = &sqi->tail;
	f->c.sqes = (void *)(m + l.sq_off);
	f->c.sq_entries = 16;
	f->c.sq_mask = 15;
	f->c.cq_khead = &cqi->head;
	f->c.cq_ktail = &cqi->tail;
	f->c.cqes = (void *)(m + l.cq_off);
	f->c.cq_entries = 32;
	f->c.cq_mask = 31;
	f->c.arena = m + l.arena_off;
	f->c.arena_size = 65536;
	f->c.nhandles = 4;
	f->c.dp_handles = f->handles;
	f->c.cq_wfd = -1;
	f->c.tidx = 0;

	snprintf(f->peer.node, sizeof(f->peer.node), "far");
	f->peer.prov = &mock_pv;
	f->peer.dp_up = true;
	f->rg.remote = true;
	f->rg.peer = &f->peer;
	f->rg.xport = &mock_pv;
	f->rg.data_size = 1 << 20;
	f->handles[1].region = &f->rg;

	f->r.sq.khead = &sqi->head;
	f->r.sq.ktail = &sqi->tail;
	f->r.sq.kflags = &f->c.hdr->sq_flags;
	f->r.sq.sqes = f->c.sqes;
	f->r.sq.entries = 16;
	f->r.sq.mask = 15;
	f->r.cq.khead = &cqi->head;
	f->r.cq.ktail = &cqi->tail;
	f->r.cq.kflags = &f->c.hdr->cq_flags;
	f->r.cq.cqes = f->c.cqes;
	f->r.cq.entries = 32;
	f->r.cq.mask = 31;
	f->r.arena = f->c.arena;
	f->r.arena_size = 65536;
	f->r.sq_event_fd = -1;

	struct rd_cmd cmd = { .type = RD_CMD_CLIENT_ADD, .client = &f->c };

	assert_int_equal(rd_poller_cmd(&poller, &cmd), 0);
	memset(&mock, 0, sizeof(mock));
	return f;
}

/* Detach: 1 when the poller says it may be freed now. */
static int fixture_detach(struct fixture *f)
{
	struct rd_cmd cmd = { .type = RD_CMD_CLIENT_DEL, .client = &f->c };

	return rd_poller_cmd(&poller, &cmd);
}

static void submit(struct fixture *f, uint8_t opc, uint32_t len, uint64_t ud)
{
	struct roshm_sqe *s = roshm_get_sqe(&f->r);

	assert_non_null(s);
	if (opc == ROSHM_OP_WRITE)
		roshm_prep_write(s, 1, 0, 0, len);
	else if (opc == ROSHM_OP_READ)
		roshm_prep_read(s, 1, 0, 0, len);
	else
		roshm_prep_fetch_add(s, 1, 8, 1);
	s->user_data = ud;
	roshm_submit(&f->r);
}

static int reap(struct fixture *f, struct roshm_cqe *out)
{
	struct roshm_cqe *cqe;

	if (roshm_peek_cqe(&f->r, &cqe))
		return -1;
	*out = *cqe;
	roshm_cqe_seen(&f->r, cqe);
	return 0;
}

/* ---- the checks before dispatch ---- */

static void test_submit_checks(void **state)
{
	struct fixture *f = fixture_new();
	struct roshm_cqe c;

	(void)state;
	/* too large for the provider: -EMSGSIZE, never submitted */
	submit(f, ROSHM_OP_WRITE, 8192, 1);
	rd_poller_round(&poller);
	assert_int_equal(reap(f, &c), 0);
	assert_int_equal(c.status, -EMSGSIZE);
	assert_int_equal(mock.submits, 0);
	/* the peer is down (poller view): -EHOSTUNREACH, never submitted */
	f->peer.dp_up = false;
	submit(f, ROSHM_OP_READ, 64, 2);
	rd_poller_round(&poller);
	assert_int_equal(reap(f, &c), 0);
	assert_int_equal(c.user_data, 2);
	assert_int_equal(c.status, -EHOSTUNREACH);
	assert_int_equal(mock.submits, 0);
	f->peer.dp_up = true;
	/* paused (stale): the SQE waits in the ring, no CQE, never submitted */
	f->rg.paused = true;
	submit(f, ROSHM_OP_WRITE, 64, 3);
	rd_poller_round(&poller);
	assert_int_equal(reap(f, &c), -1);
	assert_int_equal(mock.submits, 0);
	/* released: it goes to the provider */
	f->rg.paused = false;
	rd_poller_round(&poller);
	assert_int_equal(mock.submits, 1);
	assert_int_equal(mock.n, 1);
	/* the provider is full: nothing taken, tried again next round */
	mock.full = true;
	submit(f, ROSHM_OP_WRITE, 64, 4);
	rd_poller_round(&poller);
	assert_int_equal(mock.n, 1);
	mock.full = false;
	rd_poller_round(&poller);
	assert_int_equal(mock.n, 2);
	for (int i = 0; i < mock.n; i++)
		mock_pv.done(&mock_pv, &mock.pend[i], 0, 0);
	rd_poller_round(&poller);
	assert_int_equal(reap(f, &c), 0);
	assert_int_equal(c.user_data, 3);
	assert_int_equal(reap(f, &c), 0);
	assert_int_equal(c.user_data, 4);
	assert_int_equal(fixture_detach(f), 1);
	free(f->mem);
	free(f);
}

/* ---- the way back ---- */

static void test_done_results(void **state)
{
	struct fixture *f = fixture_new();
	struct roshm_cqe c;

	(void)state;
	submit(f, ROSHM_OP_WRITE, 100, 10);
	submit(f, ROSHM_OP_READ, 200, 11);
	submit(f, ROSHM_OP_FETCH_ADD, 8, 12);
	submit(f, ROSHM_OP_WRITE, 300, 13);
	rd_poller_round(&poller);
	assert_int_equal(mock.n, 4);
	/* queued: the client is held and its tenant's share of the peer taken */
	assert_int_equal(f->c.dp_refs, 4);
	assert_int_equal(f->peer.tenant_inflight[0], 4);
	assert_int_equal(f->c.inflight, 4);
	/* raw results from the provider: what the client sees is decided once */
	mock_pv.done(&mock_pv, &mock.pend[0], 0, 0xdead);
	mock_pv.done(&mock_pv, &mock.pend[1], 0, 0xdead);
	mock_pv.done(&mock_pv, &mock.pend[2], 0, 41);
	mock_pv.done(&mock_pv, &mock.pend[3], -ECONNRESET, 0xdead);
	assert_int_equal(f->c.dp_refs, 0);
	assert_int_equal(f->peer.tenant_inflight[0], 0);
	assert_int_equal(f->c.inflight, 0);
	/* the entries were let go of: nothing in them names the operation */
	for (int i = 0; i < 4; i++) {
		assert_null(mock.pend[i].client);
		assert_null(mock.pend[i].txn);
	}
	rd_poller_round(&poller);
	assert_int_equal(reap(f, &c), 0);
	assert_int_equal(c.user_data, 10);
	assert_int_equal(c.status, 0);
	assert_int_equal(c.result, 100);
	assert_int_equal(reap(f, &c), 0);
	assert_int_equal(c.user_data, 11);
	assert_int_equal(c.result, 200);
	assert_int_equal(reap(f, &c), 0);
	assert_int_equal(c.user_data, 12);
	assert_int_equal(c.result, 41);
	assert_int_equal(reap(f, &c), 0);
	assert_int_equal(c.user_data, 13);
	assert_int_equal(c.status, -ECONNRESET);
	assert_int_equal(c.result, 0);
	assert_int_equal(reap(f, &c), -1);
	assert_int_equal(fixture_detach(f), 1);
	free(f->mem);
	free(f);
}

/* A client that detaches with operations queued: the provider is told, the
 * client is not freed until the last one is done, and it gets no CQE. */
static void test_client_gone(void **state)
{
	struct fixture *f = fixture_new();
	struct rd_defer *d;

	(void)state;
	submit(f, ROSHM_OP_READ, 64, 20);
	submit(f, ROSHM_OP_WRITE, 64, 21);
	rd_poller_round(&poller);
	assert_int_equal(mock.n, 2);
	uint32_t tail = *f->c.cq_ktail;

	assert_int_equal(fixture_detach(f), 0); /* held: the poller frees it later */
	assert_ptr_equal(mock.gone, &f->c);
	assert_true(f->c.released);
	mock_pv.done(&mock_pv, &mock.pend[0], 0, 0);
	assert_null(rd_poller_graveyard(&poller)); /* one still queued */
	mock_pv.done(&mock_pv, &mock.pend[1], -ECONNRESET, 0);
	assert_int_equal(f->c.cq_tail, tail); /* no CQE posted for it */
	assert_int_equal(f->peer.tenant_inflight[0], 0);
	d = rd_poller_graveyard(&poller);
	assert_ptr_equal(d, &f->c.defer);
	assert_null(d->next);
	free(f->mem);
	free(f);
}

int main(void)
{
	char prefix[64];
	char *argv[] = { "test_provider", "--no-huge", "-m", "64", "--no-pci", "--no-shconf",
			 "--file-prefix", prefix, "--log-level", "lib.eal:error", "--no-telemetry",
			 "-l", "0", NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_submit_checks),
		cmocka_unit_test(test_done_results),
		cmocka_unit_test(test_client_gone),
	};
	const char *tag = getenv("ROSHM_TEST_TAG");
	char rm[512];
	int ret;

	snprintf(prefix, sizeof(prefix), "%s-provider-%d", tag && *tag ? tag : "manual",
		 (int)getpid());
	if (rte_eal_init((int)(sizeof(argv) / sizeof(argv[0])) - 1, argv) < 0) {
		fprintf(stderr, "EAL init failed\n");
		return 1;
	}
	rd_config_defaults(&cfg);
	cfg.ntenants = 1;
	snprintf(cfg.tenants[0].name, sizeof(cfg.tenants[0].name), "t");
	cfg.tenants[0].quota.peer_inflight = 64;
	/* never launched: commands apply in place, rounds run on this thread */
	if (rd_poller_init(&poller, &cfg) || rd_poller_set_net(&poller, &mock_pv))
		return 1;
	ret = cmocka_run_group_tests_name("provider", tests, NULL, NULL);
	poller.net = NULL; /* the mock has nothing to tear down */
	rd_poller_fini(&poller);
	rte_eal_cleanup();
	snprintf(rm, sizeof(rm), "rm -rf %s/dpdk/%s", geteuid() == 0 ? "/var/run" :
		 getenv("XDG_RUNTIME_DIR") ? getenv("XDG_RUNTIME_DIR") : "/tmp", prefix);
	if (system(rm))
		ret = 1;
	return ret;
}
