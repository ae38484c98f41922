// SPDX-License-Identifier: MIT
/*
 * Raw reservations of a region's transaction log (FETCH_ADD on txn_tail,
 * the reserve of the two-round-trip protocol) by a hand-written peer that
 * holds the cluster secret. Two roshmd (tcp, loopback, a private network
 * namespace: root needed, else skipped).
 *
 * 1. grant_flood: node 2 holds a WRITE grant to 64 bytes of tenant a's
 * ROSHM_POLICY_GRANT region on node 1 (txn_slots 4). The peer, as node 2,
 * sends 3000 FETCH_ADD(txn_tail, 1) at once and never stages any of them.
 * Each reservation it got is a hole that the owner's apply gives up on
 * txn.abort_ms (1 s) after the one before: 3000 of them stalled every
 * transaction of the region for 50 minutes, and one reserved more than
 * txn_slots ahead took over the slot of another node's sequence. Expected:
 * a node holds at most one reservation that is neither committed nor given
 * up, so every one it got but the first came after a hole of its own was
 * given up on (successes <= 1 + holes aborted meanwhile, counted in the
 * owner's header, whatever the timing); the others are -EAGAIN; an addend
 * of 2 is -EACCES. The two-round-trip protocol still works for the node,
 * by hand (reserve, retried on -EAGAIN; stage; commit): right after a
 * commit it reserves again at once. The owner's own transaction and the
 * grantee's (node 2's roshmd, TXN_COMMIT) then commit.
 *
 * 2. window_flood: the same peer on a restricted region (access window, the
 * default tenant policy: no slot owners) of tenant a, txn_slots 4. An
 * addend of 5 is -EACCES; of 64 + 4 reservations at once, each that
 * succeeded got a sequence s < applied + txn_slots (applied read after all
 * answers: it only grows), at most 4 + holes aborted meanwhile succeeded,
 * the others are -EAGAIN. The owner's transaction commits once the holes
 * are given up on.
 *
 * How it fails before the fix (main at a43a9c1):
 *   grant_flood: "3000 raw reservations answered 0, with 0 holes given up
 *     on meanwhile: a node holds more than one open reservation"
 *   window_flood: "FETCH_ADD(txn_tail, 5) on a restricted region: status 0"
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "attack.h"

#define PORT1 7631
#define PORT2 7632
#define SLOTS 4u
#define SLOT 4096u
#define NRES 3000
#define NWIN (64 + SLOTS)
#define PART 64u

static struct th_daemon n1, n2;
static char workdir[256], secret[300], regdir[512];
static struct roshm_tcp_req qs[NRES];

/* One request on @fd and its answer (no READ payloads): the status. */
static int32_t call(int fd, const struct roshm_tcp_req *q, const void *payload, uint64_t *res)
{
	struct roshm_tcp_resp r;

	assert_int_equal(atk_write_all(fd, q, sizeof(*q)), 0);
	if (payload)
		assert_int_equal(atk_write_all(fd, payload, q->len), 0);
	assert_int_equal(atk_read_full(fd, &r, sizeof(r), 10000), 0);
	assert_int_equal(r.tag, q->tag);
	assert_int_equal(r.len, 0);
	if (res)
		*res = r.result;
	return r.status;
}

static void req_base(struct roshm_tcp_req *q, const struct atk_rec *rec)
{
	memset(q, 0, sizeof(*q));
	q->region_id = rec->id;
	q->key = rec->key;
	q->epoch = rec->epoch;
	q->flags = ROSHM_TCP_F_RAW;
}

static void fadd_tail(struct roshm_tcp_req *q, const struct atk_rec *rec, uint64_t n, uint64_t tag)
{
	req_base(q, rec);
	q->opcode = ROSHM_OP_FETCH_ADD;
	q->len = 8;
	q->off = offsetof(struct roshm_region_hdr, txn_tail);
	q->operand1 = n;
	q->tag = tag;
}

/* Send @n reservations at once and take their answers: successes (their
 * sequences in @seqs), every other status must be -EAGAIN. */
static int flood(int fd, const struct atk_rec *rec, int n, uint64_t *seqs, int *other)
{
	struct roshm_tcp_resp r;
	int ok = 0;

	*other = 0;
	for (int i = 0; i < n; i++)
		fadd_tail(&qs[i], rec, 1, 1000 + (uint64_t)i);
	assert_int_equal(atk_write_all(fd, qs, (size_t)n * sizeof(qs[0])), 0);
	for (int i = 0; i < n; i++) {
		assert_int_equal(atk_read_full(fd, &r, sizeof(r), 10000), 0);
		assert_int_equal(r.tag, 1000 + (uint64_t)i);
		if (!r.status)
			seqs[ok++] = r.result;
		else if (r.status != -EAGAIN && !(*other)++)
			fprintf(stderr, "reservation %d: status %d (%s)\n", i, r.status,
				roshm_strerror(r.status));
	}
	return ok;
}

/*
 * An honest two-round-trip writer by hand: reserve (again after -EAGAIN),
 * stage one write of PART bytes of @fill at data offset @off, commit with
 * the CAS; a sequence given up on meanwhile is replayed with a new one.
 * Bounded waits only. 0 and the committed sequence in *seq.
 */
static int raw_txn(int fd, const struct atk_rec *rec, uint64_t off, uint8_t fill, uint64_t *seq,
		   int *eagain)
{
	uint8_t img[sizeof(struct roshm_txn_slot) + sizeof(struct roshm_txn_seg) + PART];
	struct roshm_txn_slot *sl = (void *)img;
	struct roshm_tcp_req q;
	uint64_t s, res, tag = 50000;
	int32_t st;

	*eagain = 0;
	for (int tries = 0; tries < 3000; tries++) {
		fadd_tail(&q, rec, 1, tag++);
		st = call(fd, &q, NULL, &s);
		if (st == -EAGAIN) {
			(*eagain)++;
			usleep(10000);
			continue;
		}
		if (st)
			return st;
		memset(img, 0, sizeof(img));
		sl->seq = s;
		sl->txn_id = 0x7a11u + s;
		sl->nseg = 1;
		sl->payload_len = PART;
		sl->seg[0].off = off;
		sl->seg[0].len = PART;
		memset(&sl->seg[1], fill, PART);
		sl->crc = atk_staged_crc(img + ROSHM_TXN_STAGE_OFF, sizeof(img) - ROSHM_TXN_STAGE_OFF);
		req_base(&q, rec);
		q.opcode = ROSHM_OP_WRITE;
		q.flags |= ROSHM_TCP_F_SEQ;
		q.off = ROSHM_REGION_HDR_SIZE + (s % SLOTS) * SLOT + ROSHM_TXN_STAGE_OFF;
		q.len = sizeof(img) - ROSHM_TXN_STAGE_OFF;
		q.operand1 = s;
		q.tag = tag++;
		st = call(fd, &q, img + ROSHM_TXN_STAGE_OFF, NULL);
		if (st == -ECANCELED)
			continue; /* given up on before it landed: replay */
		if (st)
			return st;
		req_base(&q, rec);
		q.opcode = ROSHM_OP_CMP_SWAP;
		q.len = 8;
		q.off = ROSHM_REGION_HDR_SIZE + (s % SLOTS) * SLOT;
		q.operand1 = ROSHM_TXN_STATE(s, ROSHM_TXN_EMPTY);
		q.operand2 = ROSHM_TXN_STATE(s, ROSHM_TXN_COMMITTED);
		q.tag = tag++;
		st = call(fd, &q, NULL, &res);
		if (st)
			return st;
		if (res == ROSHM_TXN_STATE(s, ROSHM_TXN_EMPTY)) {
			*seq = s;
			return 0;
		}
		/* aborted as a hole before the CAS: replay */
	}
	return -ETIME;
}

/* Wait (bounded) until the owner's poller settled every reserved sequence. */
static void wait_settled(const struct roshm_region_hdr *h)
{
	for (int i = 0; i < 3000 && __atomic_load_n(&h->txn_applied, __ATOMIC_ACQUIRE) <
					     __atomic_load_n(&h->txn_tail, __ATOMIC_ACQUIRE); i++)
		usleep(10000);
	assert_int_equal(h->txn_applied, h->txn_tail);
}

static int owner_txn(struct roshm *r, uint32_t h, uint64_t off, const char *what)
{
	struct roshm_txn_write w = { .off = off, .arena_off = 0, .len = 4 };
	uint64_t seq = 0;
	int st;

	memcpy(roshm_arena(r, NULL), what, 4);
	st = roshm_txn_sync(r, h, &w, 1, &seq);
	fprintf(stderr, "%s: %d (%s), seq %llu\n", what, st, roshm_strerror(st),
		(unsigned long long)seq);
	return st;
}

static void test_grant_flood(void **state)
{
	struct roshm_region_opts o = { .policy = ROSHM_POLICY_GRANT, .txn_slots = SLOTS,
				       .slot_size = SLOT };
	struct roshm_part part = { .off = 0, .len = PART,
				   .access = ROSHM_ACCESS_READ | ROSHM_ACCESS_WRITE };
	static uint64_t seqs[NRES];
	struct roshm_region_hdr *h;
	struct roshm_tcp_req q;
	struct roshm *v, *g;
	struct atk_rec rec;
	uint64_t aborted0, aborted1, seq = 0, seq2 = 0;
	uint32_t hg, hr, hx;
	uint8_t *data, want[PART];
	int err, fd, ok, other, eagain;

	(void)state;
	v = atk_open(&n1, "a", NULL, &err);
	g = atk_open(&n2, "a", NULL, &err);
	assert_non_null(v);
	assert_non_null(g);
	assert_int_equal(roshm_region_create(g, "ring", 4096, NULL, &hr), 0);
	assert_int_equal(roshm_region_create(v, "gl", 65536, &o, &hg), 0);
	h = atk_region_hdr(v, hg, SLOTS, SLOT);
	data = roshm_region_data(v, hg, NULL);
	assert_non_null(h);
	assert_non_null(data);
	/* node 1 sees "ring"'s record within revalidate_ms (100): -ENOENT
	 * (or -EAGAIN) until then; 10 s at most on a loaded machine */
	for (int k = 0;; k++) {
		int gr = roshm_region_grant_part(v, hg, "ring", &part);

		if (!gr)
			break;
		assert_true((gr == -ENOENT || gr == -EAGAIN) && k < 200);
		usleep(50000);
	}
	assert_int_equal(atk_record(regdir, "a", "gl", &rec), 0);
	assert_int_equal(owner_txn(v, hg, 1024, "PRE!"), 0);

	/* the hostile node: node 2's name (its record's address) */
	fd = atk_peer_connect("127.0.0.1", PORT1, ATK_SECRET, "ttf2");
	assert_true(fd >= 0);
	fadd_tail(&q, &rec, 2, 1);
	assert_int_equal(call(fd, &q, NULL, NULL), -EACCES);

	aborted0 = __atomic_load_n(&h->txn_aborted, __ATOMIC_ACQUIRE);
	ok = flood(fd, &rec, NRES, seqs, &other);
	aborted1 = __atomic_load_n(&h->txn_aborted, __ATOMIC_ACQUIRE);
	fprintf(stderr, "raw FETCH_ADD(txn_tail, 1) x%d: %d answered 0 (first seq %llu), "
		"%d other than -EAGAIN; holes given up on meanwhile: %llu\n", NRES, ok,
		(unsigned long long)(ok ? seqs[0] : 0), other, (unsigned long long)(aborted1 - aborted0));
	if ((uint64_t)ok > 1 + (aborted1 - aborted0))
		fail_msg("%d raw reservations answered 0, with %llu holes given up on meanwhile: "
			 "a node holds more than one open reservation", ok,
			 (unsigned long long)(aborted1 - aborted0));
	assert_true(ok >= 1);
	assert_int_equal(other, 0);

	/* the two-round-trip protocol, honestly: waits out its own open
	 * reservation (-EAGAIN), then commits inside its part */
	assert_int_equal(raw_txn(fd, &rec, 0, 0x5a, &seq, &eagain), 0);
	fprintf(stderr, "raw transaction committed as %llu after %d -EAGAIN\n",
		(unsigned long long)seq, eagain);
	/* committed: the next reservation is free at once */
	assert_int_equal(raw_txn(fd, &rec, 0, 0xa5, &seq2, &eagain), 0);
	assert_int_equal(eagain, 0);
	assert_true(seq2 > seq);
	close(fd);
	wait_settled(h);
	memset(want, 0xa5, PART);
	assert_memory_equal(data, want, PART);

	/* the owner's own transaction, and the grantee's through its roshmd
	 * (opened only now: node 2's own connection to node 1 would replace
	 * the hand-written one, which uses node 2's name) */
	for (int i = 0; i < 300 && (err = roshm_region_open_part(g, "gl", &part, &hx, NULL)); i++)
		usleep(10000);
	assert_int_equal(err, 0);
	assert_int_equal(owner_txn(v, hg, 1024, "OWNR"), 0);
	assert_int_equal(owner_txn(g, hx, 8, "GRNT"), 0);
	wait_settled(h);
	assert_memory_equal(data + 1024, "OWNR", 4);
	assert_memory_equal(data + 8, "GRNT", 4);
	atk_assert_alive(&n1);
	atk_assert_alive(&n2);
	roshm_close(g);
	roshm_close(v);
}

static void test_window_flood(void **state)
{
	struct roshm_region_opts o = { .txn_slots = SLOTS, .slot_size = SLOT, .win_off = 0,
				       .win_len = 4096 };
	static uint64_t seqs[NWIN];
	struct roshm_region_hdr *h;
	struct roshm_tcp_req q;
	struct roshm *v;
	struct atk_rec rec;
	uint64_t aborted0, aborted1, applied, res = 0;
	uint32_t hw;
	int err, fd, ok, other;
	int32_t st;

	(void)state;
	v = atk_open(&n1, "a", NULL, &err);
	assert_non_null(v);
	assert_int_equal(roshm_region_create(v, "wl", 65536, &o, &hw), 0);
	h = atk_region_hdr(v, hw, SLOTS, SLOT);
	assert_non_null(h);
	for (int i = 0; i < 300 && atk_record(regdir, "a", "wl", &rec); i++)
		usleep(10000);
	assert_int_equal(atk_record(regdir, "a", "wl", &rec), 0);

	fd = atk_peer_connect("127.0.0.1", PORT1, ATK_SECRET, "ttf2");
	assert_true(fd >= 0);
	fadd_tail(&q, &rec, 5, 1);
	st = call(fd, &q, NULL, &res);
	if (st != -EACCES)
		fail_msg("FETCH_ADD(txn_tail, 5) on a restricted region: status %d (old tail %llu)", st,
			 (unsigned long long)res);

	aborted0 = __atomic_load_n(&h->txn_aborted, __ATOMIC_ACQUIRE);
	ok = flood(fd, &rec, NWIN, seqs, &other);
	aborted1 = __atomic_load_n(&h->txn_aborted, __ATOMIC_ACQUIRE);
	applied = __atomic_load_n(&h->txn_applied, __ATOMIC_ACQUIRE);
	fprintf(stderr, "raw FETCH_ADD(txn_tail, 1) x%u: %d answered 0, %d other than -EAGAIN; "
		"holes given up on meanwhile: %llu, applied %llu\n", NWIN, ok, other,
		(unsigned long long)(aborted1 - aborted0), (unsigned long long)applied);
	for (int i = 0; i < ok; i++)
		if (seqs[i] >= applied + SLOTS)
			fail_msg("sequence %llu reserved with the log at most at %llu applied "
				 "(%u slots)", (unsigned long long)seqs[i], (unsigned long long)applied,
				 SLOTS);
	if ((uint64_t)ok > SLOTS + (aborted1 - aborted0))
		fail_msg("%d raw reservations answered 0, with %llu holes given up on meanwhile "
			 "(%u slots)", ok, (unsigned long long)(aborted1 - aborted0), SLOTS);
	assert_int_equal(other, 0);
	close(fd);
	wait_settled(h);
	assert_int_equal(owner_txn(v, hw, 16, "WNDW"), 0);
	atk_assert_alive(&n1);
	roshm_close(v);
}

static int setup(void **state)
{
	(void)state;
	if (atk_two_nodes(&n1, &n2, "ttf", PORT1, PORT2, workdir, secret, NULL))
		return -1;
	snprintf(regdir, sizeof(regdir), "%s/registry", workdir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	atk_daemon_kill(&n1);
	atk_daemon_kill(&n2);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grant_flood),
		cmocka_unit_test(test_window_flood),
	};
	char ns[64];

	th_cleanup_enable();
	if (atk_netns_enter_new(ns, sizeof(ns)) || atk_workdir(workdir, sizeof(workdir), secret, sizeof(secret)))
		return 1;
	return cmocka_run_group_tests_name("sec_txn_tail_flood", tests, setup, teardown);
}
