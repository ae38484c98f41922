// SPDX-License-Identifier: MIT
/*
 * Records staged over tcp into a region's transaction log, by a hand-written
 * peer that holds the cluster secret (peers do; they are checked on every
 * key and epoch). roshmd runs in a private network namespace (root needed,
 * else skipped).
 *
 * 1. A record that outlives its region. Defect 3: when a region is
 * unexported (its owner closes it), the tcp transport forgets a WRITE payload that is streaming into it only if the
 * destination lies in the region's data area (rd_tcp_export). A raw
 * transaction-staging WRITE (ROSHM_TCP_F_RAW) lands in the log, before the
 * data area: its destination pointer survives the munmap, and the rest of the
 * payload is written wherever it points, which is usually the next region
 * created on the node, mapped at the same address.
 *
 * The peer sends a raw staging WRITE of ~1 MiB into the
 * slot of tenant "a"'s region and stops after 8 KiB. Tenant "a" closes the
 * region; tenant "b" creates one of the same mapping size. The peer sends the
 * rest. Expected: b's new region is unchanged (header and data), the peer
 * gets a non-zero status for that WRITE, roshmd stays up, and tenant b's
 * other client beside it is unharmed.
 *
 * How it fails on today's code (main at ddc53d9), 5 of 5 runs:
 *   "tenant b's new region changed: 1040352 of its bytes, the first at map
 *    offset 12320 (0xee)" - the rest of the peer's payload, written into the
 *    new region through the stale pointer (the peer's status was -116, ESTALE).
 *
 * 2. A record that outlives its slot: a one-round-trip commit (tcp
 * TXN_COMMIT) whose record comes in slower than txn.abort_ms. The owner's roshmd reserves sequence s and receives the
 * record straight into slot s; when the payload stalls, the apply gives s up
 * as a hole and hands the slot to s + txn_slots, which another writer then
 * stages and commits. The rest of the slow record must not land in that slot
 * (it is the other transaction's now), nor may its seq and crc be written
 * there: the slow writer is told ABORTED (it replays), the other
 * transaction's record stays whole, and it is applied as committed.
 *
 * The same for the two-round-trip protocol's staging WRITE (a raw WRITE into
 * the slot after a FETCH_ADD of txn_tail), which a writer uses when its
 * TXN_COMMIT found the log full: the rest is dropped and the WRITE answered
 * -ECANCELED (its commit CAS then fails and the writer replays).
 *
 * The peer is the slow writer; the region's owner (tenant "a", one log
 * slot) commits the other transaction itself.
 *
 * Before the guard (tcp.h rd_tcp_rx_guard), both cases overwrote 61413 bytes of the
 * other transaction's record (and the TXN_COMMIT its seq).
 *
 * 3. A staging WRITE whose header itself comes after its sequence was given
 * up on (found by a review of the guard above, which took any EMPTY state
 * word: the apply recycles an aborted hole to EMPTY(s + slots) in the same
 * step). Now a staging WRITE names its sequence (ROSHM_TCP_F_SEQ) and lands
 * only on EMPTY(s):
 *   a. W1 reserves 0 and is late; 0 is aborted; W2 reserves 1 and stages;
 *      W1's WRITE for 0 comes: -ECANCELED, and W2's commit is applied
 *      (before: W1's record overwrote W2's, W2 was told committed, and its
 *      record was rejected by the apply: an acknowledged commit lost);
 *   b. W1 reserves 2 and is late; W2's TXN_COMMIT takes 3, half its record
 *      in; W1's WRITE for 2 comes: -ECANCELED, and W2's record is applied
 *      whole (before: a mix of both records was committed as W2's).
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

#define PORT 7471
#define SLOT (1u << 20)
#define PAYLOAD (SLOT - ROSHM_TXN_STAGE_OFF)
#define FIRST 8192u                   /* sent before the pause */
#define MAP (ROSHM_REGION_HDR_SIZE + 2 * SLOT) /* both regions' mapping size */
/* 2: a slot of 64 KiB, a record of all of it, 4 KiB before the stall */
#define SSLOT (64u << 10)
#define SPAYLOAD (SSLOT - ROSHM_TXN_STAGE_OFF)
#define SFIRST 4096u
#define ABORT_MS 200

static struct th_daemon d;
static struct atk_bystander by;
static char workdir[256], secret[300], regdir[512];

static void test_stage_write_into_closed_region(void **state)
{
	struct roshm_region_opts o = { .txn_slots = 1, .slot_size = SLOT };
	struct roshm_tcp_req q;
	struct roshm_tcp_resp resp;
	struct atk_rec rec;
	struct roshm *a, *b;
	uint8_t *ea, *payload, *snap, *bmap;
	uint32_t ha, hb;
	int err, fd, st;
	char why[512] = "";
	size_t wl = 0;

	(void)state;
	a = atk_open(&d, "a", NULL, &err);
	assert_non_null(a);
	b = atk_open(&d, "b", NULL, &err);
	assert_non_null(b);
	/* [hdr | 1 MiB slot | 1 MiB data] */
	assert_int_equal(roshm_region_create(a, "stage", SLOT, &o, &ha), 0);
	ea = (uint8_t *)atk_region_hdr(a, ha, 1, SLOT);
	assert_int_equal(atk_record(regdir, "a", "stage", &rec), 0);

	/* a peer that holds the registry's secret too: a node record of its own */
	char sf[300];

	snprintf(sf, sizeof(sf), "%s/registry.secret", d.dir);
	assert_int_equal(atk_publish_node(regdir, sf, "intruder", "tcp:127.0.0.1:7999"), 0);
	fd = atk_peer_connect("127.0.0.1", PORT, ATK_SECRET, "intruder");
	if (fd < 0)
		fail_msg("peer handshake: %s", roshm_strerror(fd));
	payload = malloc(PAYLOAD);
	assert_non_null(payload);
	memset(payload, 0xee, PAYLOAD);
	memset(&q, 0, sizeof(q));
	q.opcode = ROSHM_OP_WRITE;
	q.flags = ROSHM_TCP_F_RAW | ROSHM_TCP_F_SEQ; /* staging for sequence 0 (operand1) */
	q.len = PAYLOAD;
	q.region_id = rec.id;
	q.key = rec.key;
	q.epoch = rec.epoch;
	q.off = ROSHM_REGION_HDR_SIZE + ROSHM_TXN_STAGE_OFF; /* slot 0, staged part */
	q.tag = 0x5e5e;
	assert_int_equal(atk_write_all(fd, &q, sizeof(q)), 0);
	assert_int_equal(atk_write_all(fd, payload, FIRST), 0);
	/* roshmd has taken the first part (the owner sees it in its log) */
	for (int i = 0; i < 500 && ea[q.off + FIRST - 1] != 0xee; i++)
		usleep(10000);
	assert_int_equal(ea[q.off + FIRST - 1], 0xee);

	/* the owner closes its region; another tenant creates one as large */
	assert_int_equal(roshm_region_close(a, ha), 0);
	assert_int_equal(roshm_region_create(b, "after", 2 * SLOT, NULL, &hb), 0);
	bmap = (uint8_t *)roshm_region_data(b, hb, NULL) - ROSHM_REGION_HDR_SIZE;
	for (uint32_t i = 0; i < 2 * SLOT; i++)
		bmap[ROSHM_REGION_HDR_SIZE + i] = (uint8_t)(i * 29 + 3);
	snap = malloc(MAP);
	assert_non_null(snap);
	memcpy(snap, bmap, MAP);

	/* the rest of the payload, and the peer's answer */
	st = atk_write_all(fd, payload + FIRST, PAYLOAD - FIRST);
	if (!st)
		st = atk_read_full(fd, &resp, sizeof(resp), 5000);
	if (st)
		wl += (size_t)snprintf(why + wl, sizeof(why) - wl, "the peer got no status for its "
				       "WRITE: %s; ", roshm_strerror(st));
	else if (resp.tag != q.tag || resp.status == 0)
		wl += (size_t)snprintf(why + wl, sizeof(why) - wl, "the peer's WRITE into the closed "
				       "region got status %d (tag %#llx); ", resp.status,
				       (unsigned long long)resp.tag);
	close(fd);
	/* give a late write the time to land: the check is on bytes, not timing */
	usleep(200000);
	{
		uint32_t n = 0, first = 0;

		for (uint32_t i = 0; i < MAP; i++)
			if (bmap[i] != snap[i] && !n++)
				first = i;
		if (n)
			wl += (size_t)snprintf(why + wl, sizeof(why) - wl, "tenant b's new region changed: "
					       "%u of its bytes, the first at map offset %u (%#x); "
					       "peer status %d; ", n, first, bmap[first],
					       st ? 0 : resp.status);
	}
	if (!atk_alive(&d)) {
		atk_log_tail(&d, 10);
		wl += (size_t)snprintf(why + wl, sizeof(why) - wl, "roshmd %s; ", atk_how(&d));
	}
	free(payload);
	free(snap);
	if (wl)
		fail_msg("%s", why);
	assert_int_equal(roshm_nop_sync(b), 0);
	roshm_close(a);
	roshm_close(b);
	atk_bystander_check(&by);
	atk_assert_alive(&d);
}

static void slow_record(const char *name, bool raw)
{
	struct roshm_region_opts o = { .txn_slots = 1, .slot_size = SSLOT };
	struct roshm_tcp_req q;
	struct roshm_tcp_resp resp;
	struct roshm_region_hdr *h;
	struct roshm_txn_slot *sl;
	struct atk_rec rec;
	struct roshm *a;
	uint8_t *payload, *data, *arena, *staged;
	uint32_t ha;
	int err, fd, st;
	char sf[300];

	a = atk_open(&d, "a", NULL, &err);
	assert_non_null(a);
	assert_int_equal(roshm_region_create(a, name, 4096, &o, &ha), 0);
	h = atk_region_hdr(a, ha, 1, SSLOT);
	sl = atk_slot(h, 0);
	data = roshm_region_data(a, ha, NULL);
	assert_int_equal(atk_record(regdir, "a", name, &rec), 0);
	snprintf(sf, sizeof(sf), "%s/registry.secret", d.dir);
	assert_int_equal(atk_publish_node(regdir, sf, "slowpeer", "tcp:127.0.0.1:7999"), 0);
	fd = atk_peer_connect("127.0.0.1", PORT, ATK_SECRET, "slowpeer");
	if (fd < 0)
		fail_msg("peer handshake: %s", roshm_strerror(fd));

	/* The slow writer: a TXN_COMMIT of a whole slot's record, 4 KiB of it. */
	payload = malloc(SPAYLOAD);
	assert_non_null(payload);
	memset(payload, 0xee, SPAYLOAD);
	memset(&q, 0, sizeof(q));
	q.region_id = rec.id;
	q.key = rec.key;
	q.epoch = rec.epoch;
	if (raw) {
		/* reserve s = 0 (FETCH_ADD txn_tail), then stage into its slot */
		q.opcode = ROSHM_OP_FETCH_ADD;
		q.flags = ROSHM_TCP_F_RAW;
		q.len = 8;
		q.off = offsetof(struct roshm_region_hdr, txn_tail);
		q.operand1 = 1;
		q.tag = 0x5106;
		assert_int_equal(atk_write_all(fd, &q, sizeof(q)), 0);
		assert_int_equal(atk_read_full(fd, &resp, sizeof(resp), 5000), 0);
		assert_int_equal(resp.status, 0);
		assert_int_equal(resp.result, 0);
		memcpy(payload, &(uint64_t){ 0 }, 8); /* the record's seq */
		q.opcode = ROSHM_OP_WRITE;
		q.flags = ROSHM_TCP_F_RAW | ROSHM_TCP_F_SEQ;
		q.off = ROSHM_REGION_HDR_SIZE + ROSHM_TXN_STAGE_OFF;
		q.operand1 = 0; /* for sequence 0 */
	} else {
		q.opcode = ROSHM_OP_TXN_COMMIT;
		q.operand1 = 0x51041234ull; /* its txn_id */
	}
	q.len = SPAYLOAD;
	q.tag = 0x5107;
	assert_int_equal(atk_write_all(fd, &q, sizeof(q)), 0);
	assert_int_equal(atk_write_all(fd, payload, SFIRST), 0);
	staged = (uint8_t *)sl + ROSHM_TXN_STAGE_OFF;
	for (int i = 0; i < 500 && staged[SFIRST - 1] != 0xee; i++)
		usleep(10000);
	assert_int_equal(staged[SFIRST - 1], 0xee); /* it reserved s = 0, its bytes are coming in */
	assert_int_equal(h->txn_tail, 1);

	/* The owner commits a transaction of its own: s = 1, the same slot,
	 * once s = 0 was given up on (ABORT_MS). */
	arena = roshm_arena(a, NULL);
	memcpy(arena, "the other transaction, applied whole", 37);
	struct roshm_txn_write tw = { .off = 100, .arena_off = 0, .len = 37 };
	uint64_t seq = 0;

	assert_int_equal(roshm_txn_sync(a, ha, &tw, 1, &seq), 0);
	assert_int_equal(seq, 1);
	for (int i = 0; i < 300 && h->txn_applied < 2; i++)
		usleep(10000);
	assert_int_equal(h->txn_applied, 2);
	assert_int_equal(h->txn_aborted, 1);
	assert_memory_equal(data + 100, "the other transaction, applied whole", 37);
	/* slot 0 now holds s = 1's record, recycled for s = 2 */
	uint8_t before[SPAYLOAD];

	memcpy(before, staged, SPAYLOAD);
	assert_int_equal(sl->seq, 1);

	/* The rest of the slow record, and its answer. */
	st = atk_write_all(fd, payload + SFIRST, SPAYLOAD - SFIRST);
	if (!st)
		st = atk_read_full(fd, &resp, sizeof(resp), 5000);
	if (st)
		fail_msg("the slow writer got no answer: %s", roshm_strerror(st));
	assert_int_equal(resp.tag, q.tag);
	if (raw) {
		assert_int_equal(resp.status, -ECANCELED);
	} else {
		assert_int_equal(resp.status, 0);
		if (ROSHM_TCP_TXN_KIND(resp.result) != ROSHM_TCP_TXN_ABORTED ||
		    ROSHM_TCP_TXN_SEQ(resp.result))
			fail_msg("the slow writer was told kind %u, sequence %llu (expected ABORTED, 0)",
				 ROSHM_TCP_TXN_KIND(resp.result),
				 (unsigned long long)ROSHM_TCP_TXN_SEQ(resp.result));
	}
	usleep(100000);
	/* nothing of it landed in the slot that is no longer its own */
	if (memcmp(before, staged, SPAYLOAD)) {
		uint32_t n = 0;

		for (uint32_t i = 0; i < SPAYLOAD; i++)
			n += before[i] != staged[i];
		fail_msg("%u bytes of the slot of s = 1 changed after the slow record's rest came "
			 "(seq now %llu)", n, (unsigned long long)sl->seq);
	}
	assert_int_equal(h->txn_applied, 2);
	assert_memory_equal(data + 100, "the other transaction, applied whole", 37);
	close(fd);
	free(payload);
	roshm_close(a);
	atk_assert_alive(&d);
}

static void test_slow_txn_commit(void **state)
{
	(void)state;
	slow_record("slow", false);
}

static void test_slow_stage_write(void **state)
{
	(void)state;
	slow_record("slow-raw", true);
}

/* A staged record of one segment of 64 bytes of @fill at data offset @off. */
#define LREC (sizeof(struct roshm_txn_slot) + sizeof(struct roshm_txn_seg) + 64)
#define LSTAGED (LREC - ROSHM_TXN_STAGE_OFF)
static void late_rec(uint8_t *img, uint64_t seq, uint64_t off, uint8_t fill)
{
	struct roshm_txn_slot *s = (void *)img;

	memset(img, 0, LREC);
	s->seq = seq;
	s->txn_id = 0x1234 + seq;
	s->nseg = 1;
	s->payload_len = 64;
	s->seg[0].off = off;
	s->seg[0].len = 64;
	memset(&s->seg[1], fill, 64);
	s->crc = atk_staged_crc(img + ROSHM_TXN_STAGE_OFF, LSTAGED);
}

static int32_t late_call(int fd, const struct roshm_tcp_req *q, const void *payload, uint64_t *res)
{
	struct roshm_tcp_resp r;

	assert_int_equal(atk_write_all(fd, q, sizeof(*q)), 0);
	if (payload)
		assert_int_equal(atk_write_all(fd, payload, q->len), 0);
	assert_int_equal(atk_read_full(fd, &r, sizeof(r), 5000), 0);
	assert_int_equal(r.tag, q->tag);
	if (res)
		*res = r.result;
	return r.status;
}

static void wait_applied(const struct roshm_region_hdr *h, uint64_t n)
{
	for (int i = 0; i < 500 && h->txn_applied < n; i++)
		usleep(10000);
	assert_int_equal(h->txn_applied, n);
}

static void test_late_stage_write(void **state)
{
	struct roshm_region_opts o = { .txn_slots = 1, .slot_size = 4096 };
	struct roshm_tcp_req base, q;
	struct roshm_region_hdr *h;
	struct atk_rec rec;
	struct roshm *a;
	uint8_t w1[LREC], w2[LREC], want[64], *data;
	uint64_t res;
	uint32_t ha;
	int err, fd, fd2;
	char sf[300];

	(void)state;
	a = atk_open(&d, "a", NULL, &err);
	assert_non_null(a);
	assert_int_equal(roshm_region_create(a, "late", 4096, &o, &ha), 0);
	h = atk_region_hdr(a, ha, 1, 4096);
	data = roshm_region_data(a, ha, NULL);
	assert_int_equal(atk_record(regdir, "a", "late", &rec), 0);
	snprintf(sf, sizeof(sf), "%s/registry.secret", d.dir);
	assert_int_equal(atk_publish_node(regdir, sf, "late1", "tcp:127.0.0.1:7998"), 0);
	assert_int_equal(atk_publish_node(regdir, sf, "late2", "tcp:127.0.0.1:7997"), 0);
	fd = atk_peer_connect("127.0.0.1", PORT, ATK_SECRET, "late1");
	assert_true(fd >= 0);
	memset(&base, 0, sizeof(base));
	base.region_id = rec.id;
	base.key = rec.key;
	base.epoch = rec.epoch;
	base.flags = ROSHM_TCP_F_RAW;
	struct roshm_tcp_req fadd = base, stage = base, cas = base;

	fadd.opcode = ROSHM_OP_FETCH_ADD;
	fadd.len = 8;
	fadd.off = offsetof(struct roshm_region_hdr, txn_tail);
	fadd.operand1 = 1;
	stage.opcode = ROSHM_OP_WRITE;
	stage.flags |= ROSHM_TCP_F_SEQ;
	stage.off = ROSHM_REGION_HDR_SIZE + ROSHM_TXN_STAGE_OFF;
	stage.len = LSTAGED;
	cas.opcode = ROSHM_OP_CMP_SWAP;
	cas.len = 8;
	cas.off = ROSHM_REGION_HDR_SIZE;

	/* a. W1 reserves 0 and is late: 0 is aborted */
	fadd.tag = 1;
	assert_int_equal(late_call(fd, &fadd, NULL, &res), 0);
	assert_int_equal(res, 0);
	wait_applied(h, 1);
	/* W2 reserves 1 and stages */
	fadd.tag = 2;
	assert_int_equal(late_call(fd, &fadd, NULL, &res), 0);
	assert_int_equal(res, 1);
	late_rec(w2, 1, 100, 0x77);
	q = stage;
	q.operand1 = 1;
	q.tag = 3;
	assert_int_equal(late_call(fd, &q, w2 + ROSHM_TXN_STAGE_OFF, NULL), 0);
	/* W1's staging WRITE for 0 */
	late_rec(w1, 0, 200, 0xee);
	q.operand1 = 0;
	q.tag = 4;
	assert_int_equal(late_call(fd, &q, w1 + ROSHM_TXN_STAGE_OFF, NULL), -ECANCELED);
	/* W2 commits: told committed, and applied */
	q = cas;
	q.operand1 = ROSHM_TXN_STATE(1, ROSHM_TXN_EMPTY);
	q.operand2 = ROSHM_TXN_STATE(1, ROSHM_TXN_COMMITTED);
	q.tag = 5;
	assert_int_equal(late_call(fd, &q, NULL, &res), 0);
	assert_int_equal(res, ROSHM_TXN_STATE(1, ROSHM_TXN_EMPTY));
	wait_applied(h, 2);
	memset(want, 0x77, 64);
	assert_memory_equal(data + 100, want, 64);
	assert_int_equal(h->txn_aborted, 1);

	/* b. W1 reserves 2 and is late: 2 is aborted */
	fadd.tag = 6;
	assert_int_equal(late_call(fd, &fadd, NULL, &res), 0);
	assert_int_equal(res, 2);
	wait_applied(h, 3);
	/* W2's TXN_COMMIT takes 3, half its record in */
	fd2 = atk_peer_connect("127.0.0.1", PORT, ATK_SECRET, "late2");
	assert_true(fd2 >= 0);
	late_rec(w2, 0, 300, 0x55); /* the owner fills in seq and crc */
	q = base;
	q.flags = 0;
	q.opcode = ROSHM_OP_TXN_COMMIT;
	q.operand1 = 0xabcdef;
	q.len = LSTAGED;
	q.tag = 7;
	assert_int_equal(atk_write_all(fd2, &q, sizeof(q)), 0);
	assert_int_equal(atk_write_all(fd2, w2 + ROSHM_TXN_STAGE_OFF, 48), 0);
	for (int i = 0; i < 200 && h->txn_tail < 4; i++)
		usleep(10000);
	assert_int_equal(h->txn_tail, 4);
	/* W1's staging WRITE for 2 */
	late_rec(w1, 2, 400, 0xee);
	q = stage;
	q.operand1 = 2;
	q.tag = 8;
	assert_int_equal(late_call(fd, &q, w1 + ROSHM_TXN_STAGE_OFF, NULL), -ECANCELED);
	/* the rest of W2's record: committed as 3, applied whole, where it said */
	struct roshm_tcp_resp r;

	assert_int_equal(atk_write_all(fd2, w2 + ROSHM_TXN_STAGE_OFF + 48, LSTAGED - 48), 0);
	assert_int_equal(atk_read_full(fd2, &r, sizeof(r), 5000), 0);
	assert_int_equal(r.status, 0);
	assert_int_equal(ROSHM_TCP_TXN_KIND(r.result), ROSHM_TCP_TXN_COMMITTED);
	assert_int_equal(ROSHM_TCP_TXN_SEQ(r.result), 3);
	wait_applied(h, 4);
	memset(want, 0x55, 64);
	assert_memory_equal(data + 300, want, 64);
	assert_int_equal(h->txn_aborted, 2);
	/* a staging WRITE without its sequence, or with another slot's: refused */
	q = stage;
	q.flags = ROSHM_TCP_F_RAW;
	q.operand1 = 4;
	q.tag = 9;
	assert_int_equal(late_call(fd, &q, w1 + ROSHM_TXN_STAGE_OFF, NULL), -EINVAL);
	struct roshm_region_opts o2 = { .txn_slots = 2, .slot_size = 4096 };
	uint32_t h2;
	struct atk_rec rec2;

	assert_int_equal(roshm_region_create(a, "late-2", 4096, &o2, &h2), 0);
	assert_int_equal(atk_record(regdir, "a", "late-2", &rec2), 0);
	q = stage;
	q.region_id = rec2.id;
	q.key = rec2.key;
	q.epoch = rec2.epoch;
	q.off = ROSHM_REGION_HDR_SIZE + 4096 + ROSHM_TXN_STAGE_OFF; /* slot 1 */
	q.operand1 = 0;                                              /* slot 0's */
	q.tag = 10;
	assert_int_equal(late_call(fd, &q, w1 + ROSHM_TXN_STAGE_OFF, NULL), -EINVAL);
	q.operand1 = 1; /* its own: EMPTY(1) */
	q.tag = 11;
	assert_int_equal(late_call(fd, &q, w1 + ROSHM_TXN_STAGE_OFF, NULL), 0);
	close(fd);
	close(fd2);
	roshm_close(a);
	atk_assert_alive(&d);
}

static int setup(void **state)
{
	char extra[1024];

	(void)state;
	snprintf(extra, sizeof(extra),
		 ATK_TENANTS
		 "channel: { hugepages = \"off\"; };\n"
		 "transport: { tcp: { enabled = true; listen = \"127.0.0.1\"; port = %d;"
		 " secret_file = \"%s\"; }; };\n"
		 "txn: { max_slot_size = %u; abort_ms = %d; };\n", PORT, secret, SLOT, ABORT_MS);
	if (th_daemon_start(&d, "sec-stage", extra))
		return -1;
	snprintf(regdir, sizeof(regdir), "%s/registry", d.dir);
	return atk_bystander_start(&by, &d, "b", "by-stage") ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	atk_bystander_stop(&by);
	atk_daemon_kill(&d);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_slow_txn_commit),
		cmocka_unit_test(test_slow_stage_write),
		cmocka_unit_test(test_late_stage_write),
		cmocka_unit_test(test_stage_write_into_closed_region), /* last: checks the bystander */
	};
	char ns[64];

	if (geteuid() != 0) {
		printf("tcp_stage: skipped: needs root for a network namespace\n");
		return 77;
	}
	th_cleanup_enable();
	if (atk_netns_enter_new(ns, sizeof(ns)) || atk_workdir(workdir, sizeof(workdir), secret,
							       sizeof(secret))) {
		printf("tcp_stage: cannot set up a network namespace and a work directory\n");
		return 1;
	}
	return cmocka_run_group_tests_name("tcp_stage", tests, setup, teardown);
}
