// SPDX-License-Identifier: MIT
/*
 * Region access limits (roshm_region_opts access / win_off+win_len) against a
 * peer that holds the cluster secret and writes transactions by hand.
 *
 * The tcp responder checks a READ/WRITE/atomic on a restricted region
 * against the owner's limits (check_req), but a transaction reaches the data
 * another way: the peer reserves a sequence (FETCH_ADD on txn_tail), stages
 * a record into the log (a raw WRITE) and commits it (CAS on the slot's state
 * word); the owner's poller then applies the record's segments. Raw accesses
 * are checked only against the log's layout, and the owner-side apply only
 * against the data area, so a peer that skips its own rd_sqe_check writes
 * any byte of the region: outside the window, and on a region whose owner
 * gave others no ROSHM_ACCESS_WRITE at all.
 *
 * Expected: the bytes outside the window, and every byte of a read-only
 * region, are unchanged; roshmd stays up; tenant b's bystander is unharmed.
 * roshmd runs in a private network namespace (root needed, else skipped).
 *
 * How it fails on main at 4ede7a7 (before the fix), 3 of 3 runs:
 *   outside_window: "64 bytes outside the window changed (first at data
 *     offset 0: 0xee)"
 *   no_write_access: "reserve on a region without WRITE access answered 0;
 *     64 bytes of the read-only region changed"
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "attack.h"

#define PORT 7473
#define SIZE (64u << 10)
#define SLOT 4096u
#define WIN_OFF 8192u
#define WIN_LEN 4096u
#define EVIL 64u

static struct th_daemon d;
static struct atk_bystander by;
static char workdir[256], secret[300], regdir[512];
static int peer_fd = -1;

/* One request of the hand-written peer and its answer (no READ payloads). */
static int peer_call(const struct atk_rec *rec, uint8_t opcode, uint64_t off, const void *data,
		     uint32_t len, uint64_t op1, uint64_t op2, uint64_t *result)
{
	struct roshm_tcp_req q;
	struct roshm_tcp_resp resp;
	static uint64_t tag = 1;
	int st;

	memset(&q, 0, sizeof(q));
	q.opcode = opcode;
	/* a staging WRITE says which sequence it is for (operand1) */
	q.flags = ROSHM_TCP_F_RAW | (opcode == ROSHM_OP_WRITE ? ROSHM_TCP_F_SEQ : 0);
	q.len = len;
	q.region_id = rec->id;
	q.key = rec->key;
	q.epoch = rec->epoch;
	q.off = off;
	q.operand1 = op1;
	q.operand2 = op2;
	q.tag = tag++;
	st = atk_write_all(peer_fd, &q, sizeof(q));
	if (!st && data)
		st = atk_write_all(peer_fd, data, len);
	if (!st)
		st = atk_read_full(peer_fd, &resp, sizeof(resp), 5000);
	if (st)
		fail_msg("peer: no answer to opcode %u: %s", opcode, roshm_strerror(st));
	assert_int_equal(resp.tag, q.tag);
	assert_int_equal(resp.len, 0);
	if (result)
		*result = resp.result;
	return resp.status;
}

/*
 * The whole transaction protocol by hand: one segment of EVIL bytes of 0xee
 * at data offset @off. Returns the first non-zero status (reserve, stage,
 * commit) and the sequence it reserved in *seq.
 */
static int peer_txn(const struct atk_rec *rec, uint32_t slots, uint64_t off, uint64_t *seq)
{
	uint8_t img[SLOT];
	struct roshm_txn_slot *sl = (void *)img;
	uint32_t total = (uint32_t)(sizeof(*sl) + sizeof(struct roshm_txn_seg) + EVIL);
	uint64_t slot_off;
	int st;

	st = peer_call(rec, ROSHM_OP_FETCH_ADD, offsetof(struct roshm_region_hdr, txn_tail), NULL, 8,
		       1, 0, seq);
	if (st)
		return st;
	memset(img, 0, sizeof(img));
	sl->seq = *seq;
	sl->txn_id = 0x1badu;
	sl->nseg = 1;
	sl->payload_len = EVIL;
	sl->seg[0].off = off;
	sl->seg[0].len = EVIL;
	memset(&sl->seg[1], 0xee, EVIL);
	sl->crc = atk_staged_crc(img + ROSHM_TXN_STAGE_OFF, total - ROSHM_TXN_STAGE_OFF);
	slot_off = ROSHM_REGION_HDR_SIZE + (*seq % slots) * SLOT;
	st = peer_call(rec, ROSHM_OP_WRITE, slot_off + ROSHM_TXN_STAGE_OFF, img + ROSHM_TXN_STAGE_OFF,
		       total - ROSHM_TXN_STAGE_OFF, *seq, 0, NULL);
	if (st)
		return st;
	return peer_call(rec, ROSHM_OP_CMP_SWAP, slot_off, NULL, 8,
			 ROSHM_TXN_STATE(*seq, ROSHM_TXN_EMPTY),
			 ROSHM_TXN_STATE(*seq, ROSHM_TXN_COMMITTED), NULL);
}

static void peer_up(void)
{
	char sf[300];

	snprintf(sf, sizeof(sf), "%s/registry.secret", d.dir);
	assert_int_equal(atk_publish_node(regdir, sf, "intruder", "tcp:127.0.0.1:7999"), 0);
	peer_fd = atk_peer_connect("127.0.0.1", PORT, ATK_SECRET, "intruder");
	if (peer_fd < 0)
		fail_msg("peer handshake: %s", roshm_strerror(peer_fd));
}

/* Create @name for tenant a with @o, fill its data with a pattern; its data. */
static uint8_t *owner_region(struct roshm *a, const char *name, struct roshm_region_opts *o,
			     uint32_t *h, struct roshm_region_hdr **hdr)
{
	uint8_t *data;

	assert_int_equal(roshm_region_create(a, name, SIZE, o, h), 0);
	data = roshm_region_data(a, *h, NULL);
	assert_non_null(data);
	for (uint32_t i = 0; i < SIZE; i++)
		data[i] = (uint8_t)(i * 31 + 7);
	*hdr = atk_region_hdr(a, *h, o->txn_slots, o->slot_size);
	assert_non_null(*hdr);
	return data;
}

/* Wait (bounded) until the owner's poller dealt with @seq, applied or aborted. */
static void wait_dealt(struct roshm_region_hdr *hdr, uint64_t seq)
{
	for (int i = 0; i < 500 && __atomic_load_n(&hdr->txn_applied, __ATOMIC_ACQUIRE) <= seq; i++)
		usleep(10000);
}

/* Bytes of @data that differ from the pattern, outside [lo, hi); first in *first. */
static uint32_t changed(const uint8_t *data, uint32_t lo, uint32_t hi, uint32_t *first)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < SIZE; i++)
		if ((i < lo || i >= hi) && data[i] != (uint8_t)(i * 31 + 7) && !n++)
			*first = i;
	return n;
}

static void test_outside_window(void **state)
{
	struct roshm_region_opts o = { .txn_slots = 2, .slot_size = SLOT, .win_off = WIN_OFF,
				       .win_len = WIN_LEN };
	struct roshm_region_hdr *hdr;
	struct atk_rec rec;
	struct roshm *a;
	uint8_t *data;
	uint64_t seq = 0;
	uint32_t h, n, first = 0;
	int err, st;

	(void)state;
	a = atk_open(&d, "a", NULL, &err);
	assert_non_null(a);
	data = owner_region(a, "win", &o, &h, &hdr);
	assert_int_equal(atk_record(regdir, "a", "win", &rec), 0);
	peer_up();

	/* inside the window: the protocol itself works for this peer */
	st = peer_txn(&rec, o.txn_slots, WIN_OFF, &seq);
	assert_int_equal(st, 0);
	wait_dealt(hdr, seq);
	assert_int_equal(data[WIN_OFF], 0xee);

	/* outside it: data offset 0 */
	st = peer_txn(&rec, o.txn_slots, 0, &seq);
	if (!st)
		wait_dealt(hdr, seq);
	n = changed(data, WIN_OFF, WIN_OFF + WIN_LEN, &first);
	if (n)
		fail_msg("%u bytes outside the window changed (first at data offset %u: %#x); "
			 "the peer's statuses were 0", n, first, data[first]);
	close(peer_fd);
	peer_fd = -1;
	assert_int_equal(roshm_region_close(a, h), 0);
	roshm_close(a);
	atk_assert_alive(&d);
}

static void test_no_write_access(void **state)
{
	struct roshm_region_opts o = { .txn_slots = 2, .slot_size = SLOT,
				       .access = ROSHM_ACCESS_READ };
	struct roshm_region_hdr *hdr;
	struct atk_rec rec;
	struct roshm *a;
	uint8_t *data;
	uint64_t seq = 0;
	uint32_t h, n, first = 0;
	int err, st;
	char why[256] = "";

	(void)state;
	a = atk_open(&d, "a", NULL, &err);
	assert_non_null(a);
	data = owner_region(a, "ro", &o, &h, &hdr);
	assert_int_equal(atk_record(regdir, "a", "ro", &rec), 0);
	peer_up();

	st = peer_txn(&rec, o.txn_slots, 0, &seq);
	if (!st) {
		snprintf(why, sizeof(why), "reserve on a region without WRITE access answered 0; ");
		wait_dealt(hdr, seq);
	}
	n = changed(data, 0, 0, &first);
	if (n)
		fail_msg("%s%u bytes of the read-only region changed (first at %u)", why, n, first);
	close(peer_fd);
	peer_fd = -1;
	/* the owner's own handle is not limited by access: its transaction applies */
	struct roshm_sqe *s = atk_sqe(a);
	uint8_t *arena = roshm_arena(a, NULL);

	memset(arena, 0x5a, 16);
	roshm_prep_txn_write(s, h, 0, 0, 16);
	s = atk_sqe(a);
	roshm_prep_txn_commit(s, h);
	s->user_data = 1;
	assert_true(roshm_submit(a) >= 0);
	struct roshm_cqe cqe;

	assert_int_equal(atk_reap(a, &cqe, 5000), 0);
	assert_int_equal(cqe.status, 0);
	/* committed is not applied yet: the owner's poller applies the log later */
	wait_dealt(hdr, __atomic_load_n(&hdr->txn_tail, __ATOMIC_ACQUIRE) - 1);
	assert_int_equal(data[0], 0x5a);
	assert_int_equal(roshm_region_close(a, h), 0);
	roshm_close(a);
	atk_bystander_check(&by);
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
		 " secret_file = \"%s\"; }; };\n", PORT, secret);
	if (th_daemon_start(&d, "sec-wtxn", extra))
		return -1;
	snprintf(regdir, sizeof(regdir), "%s/registry", d.dir);
	return atk_bystander_start(&by, &d, "b", "by-wtxn") ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	if (peer_fd >= 0)
		close(peer_fd);
	atk_bystander_stop(&by);
	atk_daemon_kill(&d);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_outside_window),
		cmocka_unit_test(test_no_write_access),
	};
	char ns[64];

	if (geteuid() != 0) {
		printf("window_txn: skipped: needs root for a network namespace\n");
		return 77;
	}
	th_cleanup_enable();
	if (atk_netns_enter_new(ns, sizeof(ns)) || atk_workdir(workdir, sizeof(workdir), secret,
							       sizeof(secret))) {
		printf("window_txn: cannot set up a network namespace and a work directory\n");
		return 1;
	}
	return cmocka_run_group_tests_name("window_txn", tests, setup, teardown);
}
