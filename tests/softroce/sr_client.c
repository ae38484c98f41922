// SPDX-License-Identifier: MIT
/*
 * Pods and probes for the Soft-RoCE tests (run inside the two VMs by
 * guest_verbs.sh; roshmd in each VM uses the verbs transport). The VMs
 * coordinate through files in the shared directory /run/shared.
 *
 *   sr_client owner          VM1: creates the regions, then checks what the
 *                            others did to them (ops, atomics, transactions)
 *   sr_client ops            VM2: every opcode across nodes, access checks
 *   sr_client fa ID [UNTIL]  FETCH_ADD stream (two in VM2, one in VM1 until UNTIL exists)
 *   sr_client lock ID        VM2: COMPARE_SWAP lock, READ-modify-WRITE (two at once)
 *   sr_client probe          VM2: a hand-written librdmacm peer: the CM
 *                            challenge, forged rkeys and bounds at the NIC
 *   sr_client txn REGION W NTX  transaction writer W (two run at once)
 *   sr_client sowner|stall   VM1: a region; VM2: WRITEs and a FETCH_ADD that meet
 *                            a peer QP that stopped answering (guest_verbs_stall.sh)
 *   sr_client vowner|doomer  VM1: the regions of the reset test (tenants blue, default)
 *   sr_client victim|racer   VM2: WRITEs that must all succeed (blue), WRITEs to a
 *                            region withdrawn under them (default): the stale
 *                            rkey's NAK resets the shared QP (guest_verbs_reset.sh)
 *
 * Every check prints "sr: <role>: FAIL ..." and exits 1 when it fails.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "roshm.h"
#include "roshm/wire.h"

#define SH "/run/shared/"
#define OPS_SIZE (1u << 20)
#define FA_N 400
#define LOCK_N 40
#define WRITERS 2
#define MAXTX 2000
#define REC 32
#define HWM_OFF ((uint64_t)WRITERS * MAXTX * REC)
#define TXN_SIZE (HWM_OFF + 4096)
#define MAGIC 0x7258ull

static const char *role = "?";

#define CHECK(c) do { if (!(c)) { printf("sr: %s: FAIL %s:%d: %s\n", role, __FILE__, __LINE__, #c); fflush(stdout); exit(1); } } while (0)
#define CHECK_EQ(a, b) do { long long _a = (long long)(a), _b = (long long)(b); if (_a != _b) { printf("sr: %s: FAIL %s:%d: %s = %lld, expected %lld\n", role, __FILE__, __LINE__, #a, _a, _b); fflush(stdout); exit(1); } } while (0)

static void touch(const char *name)
{
	char p[256];
	int fd;

	snprintf(p, sizeof(p), SH "%s", name);
	fd = open(p, O_CREAT | O_WRONLY, 0644);
	if (fd >= 0)
		close(fd);
}

/* @r: keep using the channel meanwhile, as a live pod does (libroshm
 * notices a restarted roshmd on its next call and re-attaches). */
static void wait_file(struct roshm *r, const char *name, int seconds)
{
	char p[256];
	struct stat st;

	snprintf(p, sizeof(p), SH "%s", name);
	for (int i = 0, last = 0; i < seconds * 10; i++) {
		if (stat(p, &st) == 0)
			return;
		if (r) {
			/* a NOP now and then notices a restarted roshmd (and
			 * re-attaches); say when that does not work */
			struct timespec t0, t1;

			clock_gettime(CLOCK_MONOTONIC, &t0);
			int ret = roshm_nop_sync(r);

			clock_gettime(CLOCK_MONOTONIC, &t1);
			if ((ret && ret != last) || t1.tv_sec - t0.tv_sec > 1)
				printf("sr: %s: NOP while waiting: %s after %ld s (inst %llx)\n", role,
				       roshm_strerror(ret), (long)(t1.tv_sec - t0.tv_sec),
				       (unsigned long long)r->instance);
			fflush(stdout);
			last = ret;
		}
		usleep(100000);
	}
	printf("sr: %s: FAIL waited %d s for %s\n", role, seconds, p);
	exit(1);
}

static struct roshm *attach(void)
{
	struct roshm_params p = { .sock_path = getenv("ROSHM_SOCK"), .reconnect_ms = 120000 };
	int err;
	struct roshm *r = roshm_open(&p, &err);

	if (!r) {
		printf("sr: %s: FAIL attach: %s\n", role, roshm_strerror(err));
		exit(1);
	}
	return r;
}

static uint32_t open_region(struct roshm *r, const char *name)
{
	uint32_t h;
	int ret = -ENOENT;

	for (int i = 0; i < 300 && ret == -ENOENT; i++)
		if ((ret = roshm_region_open(r, name, &h, NULL)) == -ENOENT)
			usleep(20000);
	CHECK_EQ(ret, 0);
	return h;
}

/* ---- VM1: the owner pod ---- */

struct txn_result {
	uint8_t acked[MAXTX];
	int32_t last_err;
	uint32_t done, ntx;
};

static void verify_txn(const char *region, const uint8_t *d, const struct roshm_region_hdr *hdr)
{
	struct txn_result res[WRITERS];
	uint64_t present = 0;

	for (int w = 0; w < WRITERS; w++) {
		char p[64];
		FILE *f;

		snprintf(p, sizeof(p), SH "%s.w%d", region, w);
		f = fopen(p, "r");
		CHECK(f);
		CHECK_EQ(fread(&res[w], sizeof(res[w]), 1, f), 1);
		fclose(f);
		printf("sr: owner: %s writer %d acknowledged %u of %u (last error %d)\n", region, w,
		       res[w].done, res[w].ntx, res[w].last_err);
		CHECK_EQ(res[w].done, res[w].ntx); /* replay hides the failure from the pod */
	}
	for (int w = 0; w < WRITERS; w++) {
		int64_t last = -1;

		for (int i = 0; i < MAXTX; i++) {
			const uint64_t *p = (const uint64_t *)(const void *)(d + ((uint64_t)w * MAXTX + (uint64_t)i) * REC);
			uint64_t id = ((uint64_t)w << 32) | (uint64_t)i;
			bool first = p[0] == MAGIC && p[1] == id;
			bool second = p[2] == ~id && p[3] == (id ^ 0x5555555555555555ull);

			CHECK_EQ(first, second);               /* all or nothing */
			if (!first)
				CHECK(!p[0] && !p[1] && !p[2] && !p[3]);
			if (res[w].acked[i])
				CHECK(first);                  /* nothing acknowledged is lost */
			if (first) {
				present++;
				CHECK((uint32_t)i < res[w].ntx);
				last = i;
			}
		}
		CHECK_EQ(*(const uint64_t *)(const void *)(d + HWM_OFF + (uint64_t)w * 8), last + 1);
	}
	CHECK_EQ(hdr->txn_applied - hdr->txn_aborted, present); /* none applied twice */
	printf("sr: owner: %s: %llu transactions applied exactly once, %llu holes aborted\n", region,
	       (unsigned long long)present, (unsigned long long)hdr->txn_aborted);
}

static int owner(void)
{
	struct roshm *r = attach();
	struct roshm_region_opts own = { .policy = ROSHM_POLICY_OWNER };
	struct roshm_region_opts lg = { .txn_slots = 64, .slot_size = 512 };
	uint32_t hops, hfa, hlock, hpriv, htxn, htxl;
	uint8_t *ops, *txn;
	uint64_t *fa, *lock;
	struct roshm_region_hdr *hdr;

	CHECK_EQ(roshm_region_create(r, "ops", OPS_SIZE, NULL, &hops), 0);
	CHECK_EQ(roshm_region_create(r, "fa", 4096, NULL, &hfa), 0);
	CHECK_EQ(roshm_region_create(r, "lock", 4096, NULL, &hlock), 0);
	CHECK_EQ(roshm_region_create(r, "priv", 4096, &own, &hpriv), 0);
	CHECK_EQ(roshm_region_create(r, "txn", TXN_SIZE, &lg, &htxn), 0);
	CHECK_EQ(roshm_region_create(r, "txl", TXN_SIZE, &lg, &htxl), 0);
	ops = roshm_region_data(r, hops, NULL);
	fa = roshm_region_data(r, hfa, NULL);
	lock = roshm_region_data(r, hlock, NULL);
	for (int i = 0; i < 4096; i++)
		ops[8192 + i] = (uint8_t)(i * 3);
	touch("ready");
	printf("sr: owner: regions ops, fa, lock, priv, txn published\n");
	fflush(stdout);

	wait_file(r, "ops.done", 300);
	for (int i = 0; i < 1000; i++)
		CHECK_EQ(ops[i], (uint8_t)(i ^ 0x5a));
	for (uint32_t i = 0; i < 256 * 1024; i += 997)
		CHECK_EQ(ops[(1 << 19) + i], (uint8_t)(i * 13));
	CHECK_EQ(*(uint64_t *)(ops + 16384), 10);
	CHECK_EQ(*(uint64_t *)(ops + 16392), 7);
	printf("sr: owner: every opcode landed\n");

	/* Atomics and transactions of pods on both nodes at once: ours go
	 * through the NIC as the peer's do, or updates would be lost. */
	wait_file(r, "atomics.done", 300);
	wait_file(r, "atomics.local.done", 300);
	long local = 0;
	FILE *cf = fopen(SH "fa.3.count", "r");

	CHECK(cf && fscanf(cf, "%ld", &local) == 1);
	fclose(cf);
	printf("sr: owner: %d FETCH_ADDs from the peer's two pods, %ld from ours meanwhile\n",
	       2 * FA_N, local);
	CHECK_EQ(fa[0], 2 * FA_N + local); /* no update lost between CPU and NIC */
	CHECK_EQ(lock[0], 0);
	CHECK_EQ(lock[1], 3 * LOCK_N);
	printf("sr: owner: atomics from pods on both nodes: counter %llu, lock count %llu\n",
	       (unsigned long long)fa[0], (unsigned long long)lock[1]);
	wait_file(r, "txl.w0", 300);
	wait_file(r, "txl.w1", 300);
	txn = roshm_region_data(r, htxl, NULL);
	hdr = (struct roshm_region_hdr *)(void *)(txn - roshm_region_data_off(64, 512));
	for (int i = 0; i < 1000 && __atomic_load_n(&hdr->txn_applied, __ATOMIC_ACQUIRE) !=
				  __atomic_load_n(&hdr->txn_tail, __ATOMIC_ACQUIRE); i++)
		usleep(10000);
	CHECK_EQ(hdr->txn_applied, hdr->txn_tail);
	verify_txn("txl", txn, hdr);
	fflush(stdout);

	/* The transaction writers run; the test kills our roshmd meanwhile and
	 * restarts it: libroshm re-attaches the region (same memory, new epoch). */
	wait_file(r, "txn.w0", 600);
	wait_file(r, "txn.w1", 600);
	txn = roshm_region_data(r, htxn, NULL);
	hdr = (struct roshm_region_hdr *)(void *)(txn - roshm_region_data_off(64, 512));
	for (int i = 0; i < 1000 && __atomic_load_n(&hdr->txn_applied, __ATOMIC_ACQUIRE) !=
				  __atomic_load_n(&hdr->txn_tail, __ATOMIC_ACQUIRE); i++)
		usleep(10000);
	CHECK_EQ(hdr->txn_applied, hdr->txn_tail);
	verify_txn("txn", txn, hdr);
	roshm_close(r);
	printf("sr: owner: all passed\n");
	return 0;
}

/* ---- VM2: every opcode, access checks ---- */

static int ops_user(void)
{
	struct roshm *r = attach();
	struct roshm_sqe *sqe;
	struct roshm_cqe *cqe;
	uint64_t old, size;
	uint32_t h, hp;
	uint8_t *a;

	h = open_region(r, "default/ops");
	a = roshm_arena(r, NULL);
	CHECK_EQ(roshm_nop_sync(r), 0);
	for (int i = 0; i < 1000; i++)
		a[i] = (uint8_t)(i ^ 0x5a);
	CHECK_EQ(roshm_write_sync(r, h, 0, 0, 1000), 0);
	memset(a + 65536, 0, 4096);
	CHECK_EQ(roshm_read_sync(r, h, 8192, 65536, 4096), 0);
	for (int i = 0; i < 4096; i++)
		CHECK_EQ(a[65536 + i], (uint8_t)(i * 3));
	for (uint32_t i = 0; i < 256 * 1024; i++)
		a[(1 << 20) + i] = (uint8_t)(i * 13);
	CHECK_EQ(roshm_write_sync(r, h, 1 << 19, 1 << 20, 256 * 1024), 0);
	CHECK_EQ(roshm_read_sync(r, h, 1 << 19, 2 << 20, 256 * 1024), 0);
	CHECK(memcmp(a + (1 << 20), a + (2 << 20), 256 * 1024) == 0);
	/* small writes go inline; zero-length ones are legal */
	a[0] = 0x5a;
	CHECK_EQ(roshm_write_sync(r, h, 0, 0, 1), 0);
	CHECK_EQ(roshm_write_sync(r, h, 0, 0, 0), 0);
	CHECK_EQ(roshm_fetch_add_sync(r, h, 16384, 5, &old), 0);
	CHECK_EQ(old, 0);
	CHECK_EQ(roshm_fetch_add_sync(r, h, 16384, 5, &old), 0);
	CHECK_EQ(old, 5);
	CHECK_EQ(roshm_cmp_swap_sync(r, h, 16392, 0, 7, &old), 0);
	CHECK_EQ(old, 0);
	CHECK_EQ(roshm_cmp_swap_sync(r, h, 16392, 0, 9, &old), 0);
	CHECK_EQ(old, 7);
	/* a batch of 64 writes and reads in one round, then a FENCE */
	for (int i = 0; i < 64; i++) {
		sqe = roshm_get_sqe(r);
		CHECK(sqe);
		if (i % 2)
			roshm_prep_read(sqe, h, 8192 + (uint64_t)i * 64, 3u << 20 | (uint32_t)i * 64, 64);
		else
			roshm_prep_write(sqe, h, 100000 + (uint64_t)i * 64, 0, 64);
		roshm_sqe_set_data(sqe, (uint64_t)i);
	}
	sqe = roshm_get_sqe(r);
	CHECK(sqe);
	roshm_prep_fence(sqe);
	roshm_sqe_set_data(sqe, 1000);
	roshm_submit(r);
	for (int i = 0; i < 65; i++) {
		CHECK_EQ(roshm_wait_cqe_timeout(r, &cqe, 10000), 0);
		CHECK_EQ(cqe->status, 0);
		CHECK_EQ(cqe->user_data, i == 64 ? 1000 : i); /* one QP: in order */
		roshm_cqe_seen(r, cqe);
	}
	for (int i = 1; i < 64; i += 2)
		for (int j = 0; j < 64; j++)
			CHECK_EQ(a[(3u << 20) + (uint32_t)i * 64 + (uint32_t)j], (uint8_t)((i * 64 + j) * 3));
	/* access checks */
	CHECK_EQ(roshm_write_sync(r, h, OPS_SIZE - 7, 0, 8), -EFAULT);
	CHECK_EQ(roshm_read_sync(r, h, OPS_SIZE, 0, 1), -EFAULT);
	CHECK_EQ(roshm_fetch_add_sync(r, h, 16385, 1, &old), -EINVAL); /* unaligned atomic */
	CHECK_EQ(roshm_region_open(r, "default/priv", &hp, &size), -EACCES);
	CHECK_EQ(roshm_region_open(r, "default/nosuch", &hp, &size), -ENOENT);
	roshm_close(r);
	printf("sr: ops: every opcode and the access checks passed over verbs\n");
	return 0;
}

/* FA_N FETCH_ADDs; with @until, as many as fit until that file appears
 * (the count goes to fa.ID.count): a pod on the owner's node hammering the
 * counter for as long as the peer's pods do. */
static int fa_user(int id, const char *until)
{
	struct roshm *r = attach();
	uint32_t h = open_region(r, "default/fa");
	uint64_t prev = 0;
	int sent = 0, got = 0, n = until ? 1 << 30 : FA_N;
	char p[128];
	struct stat st;

	if (until)
		snprintf(p, sizeof(p), SH "%s", until);
	while (got < n) {
		struct roshm_sqe *sqe;
		struct roshm_cqe *cqe;

		if (until && sent == got && stat(p, &st) == 0)
			break;
		while (sent < n && sent - got < 16 && (sqe = roshm_get_sqe(r))) {
			roshm_prep_fetch_add(sqe, h, 0, 1);
			sent++;
		}
		roshm_submit(r);
		CHECK_EQ(roshm_wait_cqe_timeout(r, &cqe, 20000), 0);
		do {
			CHECK_EQ(cqe->status, 0);
			/* one QP, in order: the old values this pod sees only grow */
			CHECK(got == 0 || cqe->result > prev);
			prev = cqe->result;
			roshm_cqe_seen(r, cqe);
			got++;
		} while (roshm_peek_cqe(r, &cqe) == 0);
	}
	roshm_close(r);
	if (until) {
		FILE *f;

		snprintf(p, sizeof(p), SH "fa.%d.count", id);
		f = fopen(p, "w");
		CHECK(f);
		fprintf(f, "%d\n", got);
		fclose(f);
	}
	printf("sr: fa %d: %d FETCH_ADDs completed\n", id, got);
	return 0;
}

static int lock_user(int id)
{
	struct roshm *r = attach();
	uint32_t h = open_region(r, "default/lock");
	uint8_t *a = roshm_arena(r, NULL);
	uint64_t old, me = 1000 + (uint64_t)id;

	for (int i = 0; i < LOCK_N; i++) {
		do
			CHECK_EQ(roshm_cmp_swap_sync(r, h, 0, 0, me, &old), 0);
		while (old);
		CHECK_EQ(roshm_read_sync(r, h, 8, 0, 8), 0);
		(*(uint64_t *)(void *)a)++;
		CHECK_EQ(roshm_write_sync(r, h, 8, 0, 8), 0);
		CHECK_EQ(roshm_cmp_swap_sync(r, h, 0, me, 0, &old), 0);
		CHECK_EQ(old, me);
	}
	roshm_close(r);
	printf("sr: lock %d: %d critical sections\n", id, LOCK_N);
	return 0;
}

/* ---- a stale rkey's NAK must not fail another tenant's work ---- */

/* The victim writes records of VIC_LEN(seq) bytes at slot seq % VIC_NREC. */
#define VIC_NREC 256
#define VIC_SLOT 4096
#define VIC_LEN(s) ((s) % 4 == 3 ? 2048u : 64u) /* inline and not */
#define VIC_BYTE(s, k) ((uint8_t)((s) * 31 + (k)))

/* VM1, tenant blue: the victim's region; checks what it holds at the end. */
static int vic_owner(void)
{
	struct roshm *r = attach();
	uint32_t h;
	long n = 0;

	CHECK_EQ(roshm_region_create(r, "vic", (uint64_t)VIC_NREC * VIC_SLOT, NULL, &h), 0);
	uint8_t *d = roshm_region_data(r, h, NULL);

	touch("vic.ready");
	wait_file(r, "vic.done", 600);
	FILE *f = fopen(SH "vic.count", "r");

	CHECK(f && fscanf(f, "%ld", &n) == 1);
	fclose(f);
	CHECK(n > VIC_NREC);
	/* each slot holds the last record written to it */
	for (long s = n - VIC_NREC; s < n; s++) {
		const uint8_t *rec = d + (s % VIC_NREC) * VIC_SLOT;

		for (uint32_t k = 0; k < VIC_LEN(s); k++)
			if (rec[k] != VIC_BYTE(s, k)) {
				printf("sr: vowner: FAIL record %ld byte %u: %u, expected %u\n", s, k,
				       rec[k], VIC_BYTE(s, k));
				exit(1);
			}
	}
	printf("sr: vowner: every record of the victim's %ld WRITEs is in place\n", n);
	roshm_close(r);
	return 0;
}

/* VM1, tenant default: the racer's regions doom0, doom1, ..., each
 * withdrawn while the racer streams WRITEs to it, until VM2 says a reset
 * posted some of the victim's WRs again (reset.enough) or 8 rounds. */
static int doomer(void)
{
	struct roshm *r = attach();
	struct stat st;
	char name[64];
	uint32_t h;

	for (int k = 0; k < 8 && stat(SH "reset.enough", &st) != 0; k++) {
		snprintf(name, sizeof(name), "doom%d", k);
		CHECK_EQ(roshm_region_create(r, name, 1 << 20, NULL, &h), 0);
		snprintf(name, sizeof(name), "doom%d.ready", k);
		touch(name);
		snprintf(name, sizeof(name), "doom%d.go", k);
		wait_file(r, name, 600);
		usleep(300000);
		CHECK_EQ(roshm_region_close(r, h), 0); /* unpublished, its MR deregistered */
		printf("sr: doomer: region doom%d withdrawn under the racer's WRITEs\n", k);
		snprintf(name, sizeof(name), "cycle%d.done", k);
		wait_file(r, name, 600);
	}
	touch("cycles.over");
	roshm_close(r);
	return 0;
}

/* VM2, tenant blue: VIC_CLIENTS pods' worth of clients (so that some of
 * its WRs follow the racer's in a round's chain, whatever the round robin
 * order), WRITEs with 16 in flight each, until the rounds are over; not
 * one may fail. */
#define VIC_CLIENTS 3
static int victim(void)
{
	struct roshm *rs[VIC_CLIENTS];
	uint32_t hs[VIC_CLIENTS];
	uint64_t sent[VIC_CLIENTS] = { 0 }, got[VIC_CLIENTS] = { 0 };
	uint64_t seq = 0, total = 0, look = 0, stop_at = 0;
	/* which record each client's arena slot holds: sequence numbers are
	 * global, so the owner can check the last of each slot */
	struct stat st;

	for (int c = 0; c < VIC_CLIENTS; c++) {
		rs[c] = attach();
		hs[c] = open_region(rs[c], "blue/vic");
	}
	touch("vic.streaming");
	for (;;) {
		bool busy = false;

		if (!stop_at && total >= look) {
			look = total + 256;
			if (stat(SH "cycles.over", &st) == 0)
				stop_at = seq + 1024; /* a while more: past any reset's replay */
		}
		for (int c = 0; c < VIC_CLIENTS; c++) {
			struct roshm_sqe *sqe;
			uint8_t *a = roshm_arena(rs[c], NULL);

			while (sent[c] - got[c] < 16 && (!stop_at || seq < stop_at) &&
			       (sqe = roshm_get_sqe(rs[c]))) {
				/* arena slot by this client's own count: 64 slots, 16 in flight */
				uint32_t ao = (uint32_t)(sent[c] % 64) * VIC_SLOT;

				for (uint32_t k = 0; k < VIC_LEN(seq); k++)
					a[ao + k] = VIC_BYTE(seq, k);
				roshm_prep_write(sqe, hs[c], (seq % VIC_NREC) * VIC_SLOT, ao, VIC_LEN(seq));
				roshm_sqe_set_data(sqe, seq);
				seq++;
				sent[c]++;
			}
			roshm_submit(rs[c]);
		}
		for (int c = 0; c < VIC_CLIENTS; c++) {
			struct roshm_cqe *cqe;

			while (roshm_peek_cqe(rs[c], &cqe) == 0) {
				if (cqe->status) {
					printf("sr: victim: FAIL WRITE %llu: %s\n",
					       (unsigned long long)cqe->user_data,
					       roshm_strerror(cqe->status));
					exit(1);
				}
				roshm_cqe_seen(rs[c], cqe);
				got[c]++;
				total++;
				busy = true;
			}
		}
		bool idle = true;

		for (int c = 0; c < VIC_CLIENTS; c++)
			idle &= sent[c] == got[c];
		if (stop_at && idle && seq >= stop_at)
			break;
		if (!busy) {
			/* wait on the client with the most in flight */
			int w = 0;
			struct roshm_cqe *cqe;

			for (int c = 1; c < VIC_CLIENTS; c++)
				if (sent[c] - got[c] > sent[w] - got[w])
					w = c;
			if (sent[w] != got[w]) {
				int ret = roshm_wait_cqe_timeout(rs[w], &cqe, 60000);

				CHECK_EQ(ret, 0);
			}
		}
	}
	/* Records of one slot are 256 sequence numbers apart, and no client
	 * has more than 16 in flight: the last of each slot is the last
	 * written there. */
	FILE *f = fopen(SH "vic.count", "w");

	CHECK(f);
	fprintf(f, "%llu\n", (unsigned long long)seq);
	fclose(f);
	for (int c = 0; c < VIC_CLIENTS; c++)
		roshm_close(rs[c]);
	touch("vic.done");
	printf("sr: victim: %llu WRITEs from %d clients while the racer's regions went away, none "
	       "failed\n", (unsigned long long)total, VIC_CLIENTS);
	return 0;
}

/* VM2, tenant default: WRITEs to doomK, 16 in flight, until they fail with
 * ESTALE (its node said it is gone); the first failure says how. */
static int racer(int k)
{
	struct roshm *r = attach();
	char name[64];
	uint32_t h;
	uint64_t sent = 0, got = 0, ok = 0;
	int first = 0, stale = 0;

	snprintf(name, sizeof(name), "doom%d.ready", k);
	wait_file(r, name, 600);
	snprintf(name, sizeof(name), "default/doom%d", k);
	h = open_region(r, name);
	snprintf(name, sizeof(name), "doom%d.go", k);
	touch(name);
	while (!stale || sent != got) {
		struct roshm_sqe *sqe;
		struct roshm_cqe *cqe;

		while (!stale && sent - got < 16 && (sqe = roshm_get_sqe(r))) {
			roshm_prep_write(sqe, h, (sent % 1024) * 64, 0, 64);
			sent++;
		}
		roshm_submit(r);
		CHECK_EQ(roshm_wait_cqe_timeout(r, &cqe, 60000), 0);
		do {
			if (cqe->status && !first)
				first = cqe->status;
			if (cqe->status == -ESTALE)
				stale = 1;
			ok += cqe->status == 0;
			roshm_cqe_seen(r, cqe);
			got++;
		} while (roshm_peek_cqe(r, &cqe) == 0);
	}
	roshm_close(r);
	printf("sr: racer: doom%d: %llu WRITEs landed, first failure %s, then ESTALE\n", k,
	       (unsigned long long)ok,
	       first == -EACCES ? "EACCES (the NIC refused the stale rkey)" : roshm_strerror(first));
	return 0;
}

/* ---- VM2: transactions ---- */

static int txn_writer(const char *region, int w, int ntx)
{
	struct roshm *r = attach();
	char full[96];
	uint32_t h;

	snprintf(full, sizeof(full), "default/%s", region);
	h = open_region(r, full);
	uint8_t *a = roshm_arena(r, NULL);
	struct txn_result res;
	char p[64];
	FILE *f;

	memset(&res, 0, sizeof(res));
	res.ntx = (uint32_t)ntx;
	for (int i = 0; i < ntx; i++) {
		uint64_t id = ((uint64_t)w << 32) | (uint64_t)i, off = ((uint64_t)w * MAXTX + (uint64_t)i) * REC;
		uint64_t *q = (uint64_t *)(void *)a;
		struct roshm_txn_write tw[3] = {
			{ .off = off, .arena_off = 0, .len = 16 },
			{ .off = off + 16, .arena_off = 16, .len = 16 },
			{ .off = HWM_OFF + (uint64_t)w * 8, .arena_off = 32, .len = 8 },
		};
		int ret;

		q[0] = MAGIC;
		q[1] = id;
		q[2] = ~id;
		q[3] = id ^ 0x5555555555555555ull;
		q[4] = (uint64_t)i + 1;
		ret = roshm_txn_sync(r, h, tw, 3, NULL);
		if (ret) {
			res.last_err = ret;
			printf("sr: txn %d: transaction %d failed: %s\n", w, i, strerror(-ret));
			break;
		}
		res.acked[i] = 1;
		res.done = (uint32_t)i + 1;
		if (i == 100 && w == 0 && !strcmp(region, "txn"))
			touch("txn.started");
		if (i % 250 == 0) {
			printf("sr: txn %d: %d acknowledged\n", w, i);
			fflush(stdout);
		}
	}
	roshm_close(r);
	snprintf(p, sizeof(p), SH "%s.w%d.tmp", region, w);
	f = fopen(p, "w");
	CHECK(f);
	CHECK_EQ(fwrite(&res, sizeof(res), 1, f), 1);
	fclose(f);
	char q2[64];

	snprintf(q2, sizeof(q2), SH "%s.w%d", region, w);
	rename(p, q2);
	printf("sr: txn %s %d: %u of %d transactions acknowledged\n", region, w, res.done, ntx);
	return 0;
}

/* ---- VM2: a hand-written peer against roshmd's CM and the NIC's checks ---- */

static struct rdma_event_channel *pch;
static uint8_t secret[256];
static size_t secret_len;

static void pmac(const char *label, const uint8_t *nr, const uint8_t *ns, const char *node_r,
		 const char *node_s, uint8_t *out)
{
	uint8_t msg[16 + 2 * ROSHM_VERBS_NONCE + ROSHM_VERBS_ID + ROSHM_NAME_MAX];
	unsigned int len;

	memset(msg, 0, sizeof(msg));
	memcpy(msg, label, strlen(label));
	memcpy(msg + 16, nr, ROSHM_VERBS_NONCE);
	memcpy(msg + 16 + ROSHM_VERBS_NONCE, ns, ROSHM_VERBS_NONCE);
	memcpy(msg + 16 + 2 * ROSHM_VERBS_NONCE, node_r, strnlen(node_r, ROSHM_VERBS_ID - 1));
	memcpy(msg + 16 + 2 * ROSHM_VERBS_NONCE + ROSHM_VERBS_ID, node_s,
	       strnlen(node_s, ROSHM_NAME_MAX - 1));
	HMAC(EVP_sha256(), secret, (int)secret_len, msg, sizeof(msg), out, &len);
}

static struct rdma_cm_event *next_event(struct rdma_cm_id *id)
{
	struct rdma_cm_event *ev;

	for (int i = 0; i < 200; i++) {
		if (rdma_get_cm_event(pch, &ev) == 0) {
			if (ev->id == id)
				return ev;
			rdma_ack_cm_event(ev);
			continue;
		}
		struct pollfd pfd = { .fd = pch->fd, .events = POLLIN };

		poll(&pfd, 1, 50);
	}
	printf("sr: probe: FAIL no CM event in 10 s\n");
	exit(1);
}

struct pconn {
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	int event;            /* RDMA_CM_EVENT_* of the connect */
	struct roshm_verbs_challenge reply;
};

/* One connect with @pdata; leaves the QP up when established. */
static void pconnect(struct pconn *c, struct sockaddr_in *dst, const void *pdata, size_t len)
{
	struct rdma_cm_event *ev;
	struct ibv_qp_init_attr qa = { 0 };
	struct rdma_conn_param cp = { 0 };

	memset(c, 0, sizeof(*c));
	CHECK(rdma_create_id(pch, &c->id, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_resolve_addr(c->id, NULL, (struct sockaddr *)dst, 2000) == 0);
	ev = next_event(c->id);
	CHECK_EQ(ev->event, RDMA_CM_EVENT_ADDR_RESOLVED);
	rdma_ack_cm_event(ev);
	CHECK(rdma_resolve_route(c->id, 2000) == 0);
	ev = next_event(c->id);
	CHECK_EQ(ev->event, RDMA_CM_EVENT_ROUTE_RESOLVED);
	rdma_ack_cm_event(ev);
	c->pd = ibv_alloc_pd(c->id->verbs);
	c->cq = ibv_create_cq(c->id->verbs, 16, NULL, NULL, 0);
	CHECK(c->pd && c->cq);
	qa.send_cq = qa.recv_cq = c->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	CHECK(rdma_create_qp(c->id, c->pd, &qa) == 0);
	cp.private_data = pdata;
	cp.private_data_len = (uint8_t)len;
	cp.initiator_depth = 1;
	cp.retry_count = 3;
	cp.rnr_retry_count = 3;
	CHECK(rdma_connect(c->id, &cp) == 0);
	ev = next_event(c->id);
	c->event = ev->event;
	if (ev->event == RDMA_CM_EVENT_REJECTED && ev->param.conn.private_data &&
	    ev->param.conn.private_data_len >= sizeof(c->reply))
		memcpy(&c->reply, ev->param.conn.private_data, sizeof(c->reply));
	rdma_ack_cm_event(ev);
}

static void pc_close(struct pconn *c)
{
	if (c->event == RDMA_CM_EVENT_ESTABLISHED)
		rdma_disconnect(c->id);
	rdma_destroy_qp(c->id);
	ibv_destroy_cq(c->cq);
	ibv_dealloc_pd(c->pd);
	rdma_destroy_id(c->id);
}

/* RDMA READ @len bytes at @raddr/@rkey; returns the completion status. */
static int pread_remote(struct pconn *c, void *buf, struct ibv_mr *mr, uint64_t raddr,
			uint32_t rkey, uint32_t len)
{
	struct ibv_sge sg = { .addr = (uintptr_t)buf, .length = len, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_RDMA_READ,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;
	int n = 0;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	CHECK(ibv_post_send(c->id->qp, &wr, &bad) == 0);
	for (long i = 0; i < 100000000 && n == 0; i++)
		n = ibv_poll_cq(c->cq, 1, &wc);
	CHECK_EQ(n, 1);
	return wc.status;
}

/* A full, correct handshake as node @self. */
static void pauth(struct pconn *c, struct sockaddr_in *dst, const char *self)
{
	struct roshm_verbs_hello h = { .magic = ROSHM_VERBS_MAGIC, .kind = ROSHM_VERBS_HELLO,
				       .version = ROSHM_VERBS_VERSION };
	struct roshm_verbs_proof pr = { .magic = ROSHM_VERBS_MAGIC, .kind = ROSHM_VERBS_PROOF,
					.version = ROSHM_VERBS_VERSION };
	struct pconn first;

	for (int i = 0; i < ROSHM_VERBS_NONCE; i++)
		h.nonce[i] = (uint8_t)rand();
	snprintf(h.node, sizeof(h.node), "%s", self);
	pconnect(&first, dst, &h, sizeof(h));
	CHECK_EQ(first.event, RDMA_CM_EVENT_REJECTED);
	CHECK_EQ(first.reply.kind, ROSHM_VERBS_CHALLENGE);
	pc_close(&first);
	memcpy(pr.nonce, first.reply.nonce, sizeof(pr.nonce));
	pmac("roshm-vreq", h.nonce, first.reply.nonce, h.node, first.reply.node, pr.mac);
	pconnect(c, dst, &pr, sizeof(pr));
}

static int probe(void)
{
	struct roshm_verbs_hello h = { .magic = ROSHM_VERBS_MAGIC, .kind = ROSHM_VERBS_HELLO,
				       .version = ROSHM_VERBS_VERSION };
	struct roshm_verbs_proof pr = { .magic = ROSHM_VERBS_MAGIC, .kind = ROSHM_VERBS_PROOF,
					.version = ROSHM_VERBS_VERSION };
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(7472) };
	uint8_t junk[56], expect[32], *buf;
	struct pconn c;
	json_error_t jerr;
	json_t *rec;
	FILE *f;
	uint64_t raddr, data;
	uint32_t rkey;
	struct ibv_mr *mr;

	f = fopen(SH "secret", "r");
	CHECK(f);
	secret_len = fread(secret, 1, sizeof(secret), f);
	fclose(f);
	while (secret_len && (secret[secret_len - 1] == '\n'))
		secret_len--;
	inet_pton(AF_INET, "198.18.1.1", &dst.sin_addr);
	pch = rdma_create_event_channel();
	CHECK(pch);
	fcntl(pch->fd, F_SETFL, O_NONBLOCK);

	/* 1. not a roshm peer */
	memset(junk, 0x41, sizeof(junk));
	pconnect(&c, &dst, junk, sizeof(junk));
	CHECK_EQ(c.event, RDMA_CM_EVENT_REJECTED);
	CHECK_EQ(c.reply.kind, ROSHM_VERBS_DENIED);
	pc_close(&c);
	/* 2. hello: the challenge proves that roshmd knows the secret */
	for (int i = 0; i < ROSHM_VERBS_NONCE; i++)
		h.nonce[i] = (uint8_t)(i * 7 + 1);
	snprintf(h.node, sizeof(h.node), "probe");
	pconnect(&c, &dst, &h, sizeof(h));
	CHECK_EQ(c.event, RDMA_CM_EVENT_REJECTED);
	CHECK_EQ(c.reply.kind, ROSHM_VERBS_CHALLENGE);
	CHECK(!strcmp(c.reply.node, "vm1"));
	pmac("roshm-vsrv", h.nonce, c.reply.nonce, h.node, c.reply.node, expect);
	CHECK(!memcmp(expect, c.reply.mac, 32));
	struct roshm_verbs_challenge ch = c.reply;

	pc_close(&c);
	/* 3. a wrong proof is refused, and burns the challenge */
	memcpy(pr.nonce, ch.nonce, sizeof(pr.nonce));
	memset(pr.mac, 0x33, sizeof(pr.mac));
	pconnect(&c, &dst, &pr, sizeof(pr));
	CHECK_EQ(c.event, RDMA_CM_EVENT_REJECTED);
	CHECK_EQ(c.reply.kind, ROSHM_VERBS_DENIED);
	pc_close(&c);
	/* 4. the right proof for a used challenge (a replay) is refused too */
	pmac("roshm-vreq", h.nonce, ch.nonce, h.node, ch.node, pr.mac);
	pconnect(&c, &dst, &pr, sizeof(pr));
	CHECK_EQ(c.event, RDMA_CM_EVENT_REJECTED);
	CHECK_EQ(c.reply.kind, ROSHM_VERBS_DENIED);
	pc_close(&c);
	printf("sr: probe: the CM challenge refuses junk, a wrong MAC and a replay\n");

	/* 5. authenticated: the NIC serves what the registry's rkey allows */
	rec = json_load_file(SH "registry/regions/default/ops.json", 0, &jerr);
	CHECK(rec);
	raddr = strtoull(json_string_value(json_object_get(rec, "raddr")), NULL, 10);
	rkey = (uint32_t)json_integer_value(json_object_get(rec, "rkey"));
	json_decref(rec);
	data = raddr + roshm_region_data_off(0, 0);
	pauth(&c, &dst, "probe");
	CHECK_EQ(c.event, RDMA_CM_EVENT_ESTABLISHED);
	buf = aligned_alloc(4096, 8192);
	mr = ibv_reg_mr(c.pd, buf, 8192, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr);
	CHECK_EQ(pread_remote(&c, buf, mr, data + 8192, rkey, 64), IBV_WC_SUCCESS);
	for (int i = 0; i < 64; i++)
		CHECK_EQ(buf[i], (uint8_t)(i * 3));
	/* a forged rkey */
	CHECK_EQ(pread_remote(&c, buf, mr, data + 8192, rkey ^ 0x5a5a00, 64), IBV_WC_REM_ACCESS_ERR);
	ibv_dereg_mr(mr);
	pc_close(&c);
	/* past the end of the region's MR */
	pauth(&c, &dst, "probe");
	CHECK_EQ(c.event, RDMA_CM_EVENT_ESTABLISHED);
	mr = ibv_reg_mr(c.pd, buf, 8192, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr);
	CHECK_EQ(pread_remote(&c, buf, mr, data + OPS_SIZE - 32, rkey, 64), IBV_WC_REM_ACCESS_ERR);
	ibv_dereg_mr(mr);
	pc_close(&c);
	printf("sr: probe: the NIC refuses a forged rkey and an access past the region\n");
	rdma_destroy_event_channel(pch);
	return 0;
}

static bool exists(const char *name)
{
	char p[256];
	struct stat st;

	snprintf(p, sizeof(p), SH "%s", name);
	return stat(p, &st) == 0;
}

/*
 * A grant's revoke over RoCE (VM1's "gowner", VM2's "gpeer"). The owner
 * grants part A = [0, 4096) of "gr" to gpeer's region; gpeer WRITEs a
 * counter into it every 10 ms. The owner grants the wider B = [0, 8192),
 * then revokes A: every WRITE of the next 3 s must pass (A's MR at VM1's
 * NIC is kept until gpeer's node has read the record and moved its handle
 * to B's). Then gpeer WRITEs every 5 ms and the owner revokes B: from the
 * moment the revoke returns, no WRITE lands (the counter moves by the one
 * in flight at most in the next 500 ms), since VM1's NIC refuses B's MR
 * (VM2's roshmd reads the record only every 300 ms, and until then used to
 * let them through); gpeer's WRITEs fail from then on, none passes after
 * the first refusal (-EACCES by the NIC, -EBADF once its handle closed).
 */
static const struct roshm_part part_a = { 0, 4096, ROSHM_ACCESS_WRITE };
static const struct roshm_part part_b = { 0, 8192, ROSHM_ACCESS_WRITE };

static int gowner(void)
{
	struct roshm *r = attach();
	struct roshm_region_opts go = { .policy = ROSHM_POLICY_GRANT };
	uint32_t h;
	uint64_t *d, c0, c1, c2;

	CHECK_EQ(roshm_region_create(r, "gr", 16384, &go, &h), 0);
	d = roshm_region_data(r, h, NULL);
	wait_file(r, "gpeer.ready", 300);
	CHECK_EQ(roshm_region_grant_part(r, h, "gpeer", &part_a), 0);
	touch("g.a");
	wait_file(r, "g.writing", 120);
	CHECK_EQ(roshm_region_grant_part(r, h, "gpeer", &part_b), 0);
	CHECK_EQ(roshm_region_revoke_part(r, h, "gpeer", &part_a), 0);
	touch("g.moved");
	wait_file(r, "g.moved.ok", 120);
	c0 = __atomic_load_n(d, __ATOMIC_ACQUIRE);
	usleep(300000);   /* gpeer writes on */
	CHECK_EQ(roshm_region_revoke_part(r, h, "gpeer", &part_b), 0);
	c1 = __atomic_load_n(d, __ATOMIC_ACQUIRE);
	usleep(500000);
	c2 = __atomic_load_n(d, __ATOMIC_ACQUIRE);
	touch("g.done");
	printf("sr: gowner: counter %llu before the revoke, %llu when it returned, %llu 500 ms "
	       "later\n", (unsigned long long)c0, (unsigned long long)c1, (unsigned long long)c2);
	CHECK(c1 > c0);        /* gpeer was writing */
	CHECK(c2 <= c1 + 1);   /* nothing but the one in flight landed after */
	printf("sr: gowner: no WRITE landed after the revoke returned\n");
	return 0;
}

static int gpeer(void)
{
	struct roshm *r = attach();
	uint32_t mine, h;
	uint64_t n = 0, *a = roshm_arena(r, NULL);
	int ret = -EACCES, first = 0;
	struct timespec t0, t;

	CHECK_EQ(roshm_region_create(r, "gpeer", 4096, NULL, &mine), 0);
	touch("gpeer.ready");
	wait_file(r, "g.a", 300);
	for (int i = 0; i < 600 && ret; i++) {   /* until the grant's record is here */
		ret = roshm_region_open_part(r, "gr", &part_a, &h, NULL);
		if (ret)
			usleep(100000);
	}
	CHECK_EQ(ret, 0);
	*a = ++n;
	CHECK_EQ(roshm_write_sync(r, h, 0, 0, 8), 0);
	touch("g.writing");
	while (!exists("g.moved")) {
		*a = ++n;
		CHECK_EQ(roshm_write_sync(r, h, 0, 0, 8), 0);
		usleep(10000);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {   /* A revoked, B covers it: nothing fails */
		*a = ++n;
		CHECK_EQ(roshm_write_sync(r, h, 0, 0, 8), 0);
		usleep(10000);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (t.tv_sec - t0.tv_sec < 3);
	touch("g.moved.ok");
	printf("sr: gpeer: part A revoked while B covers it: %llu WRITEs, none failed\n",
	       (unsigned long long)n);
	while (!exists("g.done")) {
		*a = ++n;
		ret = roshm_write_sync(r, h, 0, 0, 8);
		if (ret && !first) {
			first = ret;
			printf("sr: gpeer: the first refused WRITE: %s\n", roshm_strerror(ret));
		}
		CHECK(first ? ret == -EACCES || ret == -EBADF : ret == 0);
		usleep(5000);
	}
	CHECK(first != 0);
	printf("sr: gpeer: refused after the revoke, never passed again; last: %s\n",
	       roshm_strerror(ret));
	return 0;
}

/* ---- a peer QP that stopped answering (guest_verbs_stall.sh) ---- */

#define STALL_A 0           /* client 1's WRITE: fails, not executed */
#define STALL_X 4096        /* client 2's WRITE: fails, not executed */
#define STALL_CTR 8192      /* client 1's FETCH_ADD: fails, not executed */
#define STALL_B 12288       /* client 1's second WRITE: fails, not executed */
#define STALL_AFTER 16384   /* client 2's WRITE once the peer is back: lands */
#define STALL_LEN 64
#define STALL_BYTE(off, k) ((uint8_t)((off) / 4096 * 67 + (k) + 1))

/* VM1: the region; once VM2 is done, what landed and what did not. */
static int stall_owner(void)
{
	struct roshm *r = attach();
	uint32_t h;

	CHECK_EQ(roshm_region_create(r, "stall", 20480, NULL, &h), 0);
	uint8_t *d = roshm_region_data(r, h, NULL);

	CHECK(d);
	touch("stall.ready");
	wait_file(r, "stall.done", 600);
	for (uint32_t k = 0; k < STALL_LEN; k++) {
		CHECK_EQ(d[STALL_A + k], 0);
		CHECK_EQ(d[STALL_X + k], 0);
		CHECK_EQ(d[STALL_B + k], 0);
		CHECK_EQ(d[STALL_AFTER + k], STALL_BYTE(STALL_AFTER, k));
	}
	uint64_t ctr;

	memcpy(&ctr, d + STALL_CTR, 8);
	CHECK_EQ(ctr, 0);
	printf("sr: sowner: the WRITEs and the FETCH_ADD that failed changed nothing; the "
	       "WRITE after the reconnect landed\n");
	roshm_close(r);
	return 0;
}

static void stall_post(struct roshm *r, uint32_t h, uint64_t off, uint64_t data)
{
	struct roshm_sqe *sqe = roshm_get_sqe(r);
	uint8_t *a = roshm_arena(r, NULL);

	CHECK(sqe && a);
	for (uint32_t k = 0; k < STALL_LEN; k++)
		a[off + k] = STALL_BYTE(off, k);   /* arena offset = region offset */
	roshm_prep_write(sqe, h, off, off, STALL_LEN);
	roshm_sqe_set_data(sqe, data);
}

/* @n completions of @r, in any order (a WR posted again completes after
 * a later one that failed): st[user_data - 1] */
static void stall_wait(struct roshm *r, unsigned n, int32_t *st, bool *seen)
{
	for (unsigned i = 0; i < n; i++) {
		struct roshm_cqe *cqe;

		CHECK_EQ(roshm_wait_cqe_timeout(r, &cqe, 120000), 0);
		uint64_t d = cqe->user_data;

		CHECK(d >= 1 && d <= 4 && !seen[d - 1]);
		seen[d - 1] = true;
		st[d - 1] = cqe->status;
		roshm_cqe_seen(r, cqe);
	}
}

/* VM2: once VM1's inbound QPs are in the error state (no answer, no NAK),
 * client 1 posts WRITE, FETCH_ADD, WRITE and client 2 one WRITE. After the
 * retries each fails with a clear status (DESIGN.md: no silent retry; the
 * responder executed none of them), and once the peer is connected again
 * client 2's next WRITE lands. */
static int stall_user(void)
{
	struct roshm *r1 = attach(), *r2 = attach();

	wait_file(NULL, "stall.ready", 600);
	uint32_t h1 = open_region(r1, "default/stall"), h2 = open_region(r2, "default/stall");
	struct roshm_sqe *sqe;

	touch("stall.opened");
	wait_file(NULL, "stalled", 600);
	stall_post(r1, h1, STALL_A, 1);
	CHECK(sqe = roshm_get_sqe(r1));
	roshm_prep_fetch_add(sqe, h1, STALL_CTR, 1);
	roshm_sqe_set_data(sqe, 2);
	stall_post(r1, h1, STALL_B, 3);
	stall_post(r2, h2, STALL_X, 4);
	CHECK(roshm_submit(r1) == 3 && roshm_submit(r2) == 1);
	int32_t st[4];
	bool seen[4] = { false };

	stall_wait(r1, 3, st, seen);
	stall_wait(r2, 1, st, seen);
	int32_t a = st[0], fa = st[1], b = st[2], x = st[3];

	printf("sr: stall: client 1: WRITE %s, FETCH_ADD %s, WRITE %s; client 2: WRITE %s\n",
	       roshm_strerror(a), roshm_strerror(fa), roshm_strerror(b), roshm_strerror(x));
	for (int i = 0; i < 4; i++)
		CHECK(st[i] == -EHOSTUNREACH || st[i] == -ECONNRESET);
	/* the peer comes back (the next use re-dials it, then every second) */
	int ret = -EHOSTUNREACH, tries = 0;

	for (; ret && tries < 60; tries++) {
		stall_post(r2, h2, STALL_AFTER, 5);
		CHECK_EQ(roshm_submit(r2), 1);
		struct roshm_cqe *cqe;

		CHECK_EQ(roshm_wait_cqe_timeout(r2, &cqe, 120000), 0);
		CHECK_EQ(cqe->user_data, 5);
		ret = cqe->status;
		roshm_cqe_seen(r2, cqe);
		CHECK(ret == 0 || ret == -EHOSTUNREACH || ret == -ECONNRESET);
		if (ret)
			usleep(500000);
	}
	CHECK_EQ(ret, 0);
	printf("sr: stall: every operation in flight failed; client 2's WRITE after the "
	       "reconnect succeeded (try %d)\n", tries);
	touch("stall.done");
	roshm_close(r1);
	roshm_close(r2);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: sr_client owner|ops|fa ID|lock ID|probe|txn REGION W NTX|"
			"vowner|doomer|victim|racer K|gowner|gpeer|sowner|stall\n");
		return 2;
	}
	role = argv[1];
	setvbuf(stdout, NULL, _IOLBF, 0);
	srand((unsigned)time(NULL) ^ (unsigned)getpid());
	if (!strcmp(role, "owner"))
		return owner();
	if (!strcmp(role, "ops"))
		return ops_user();
	if (!strcmp(role, "fa") && argc > 2)
		return fa_user(atoi(argv[2]), argc > 3 ? argv[3] : NULL);
	if (!strcmp(role, "lock") && argc > 2)
		return lock_user(atoi(argv[2]));
	if (!strcmp(role, "probe"))
		return probe();
	if (!strcmp(role, "gowner"))
		return gowner();
	if (!strcmp(role, "gpeer"))
		return gpeer();
	if (!strcmp(role, "vowner"))
		return vic_owner();
	if (!strcmp(role, "doomer"))
		return doomer();
	if (!strcmp(role, "victim"))
		return victim();
	if (!strcmp(role, "racer") && argc > 2)
		return racer(atoi(argv[2]));
	if (!strcmp(role, "sowner"))
		return stall_owner();
	if (!strcmp(role, "stall"))
		return stall_user();
	if (!strcmp(role, "txn") && argc > 4)
		return txn_writer(argv[2], atoi(argv[3]), atoi(argv[4]));
	fprintf(stderr, "sr_client: unknown role %s\n", role);
	return 2;
}
