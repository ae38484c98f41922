// SPDX-License-Identifier: MIT
/*
 * txn-transfer: money moves between accounts with transactions, and the
 * owner of the accounts never sees money in flight.
 *
 *   txn-transfer owner  [-r NAME] [-w WRITERS] [-n TRANSFERS]
 *   txn-transfer writer [-r NAME] [--plain] ID
 *
 * The owner pod creates region NAME (default "accounts") with a transaction
 * log: a header, then ACCOUNTS accounts for each writer, each starting with
 * START. Writer ID (on any node) owns accounts ID * ACCOUNTS ... + ACCOUNTS:
 * it moves money between two of them in one transaction (the two new
 * balances and its transfer count), TRANSFERS times. The owner meanwhile
 * takes consistent snapshots (roshm_region_read_consistent) and checks that
 * every one has the same total, and each writer's accounts the same sum.
 * It exits 0 once every writer's transfers are applied and every snapshot
 * was right.
 *
 * With --plain a writer uses two plain WRITEs instead of a transaction:
 * the owner then sees totals that are off (and exits 1). That is what the
 * transaction is for.
 *
 * A transaction writes values, not differences: each writer is the only one
 * that writes its accounts, keeps their balances itself and commits the new
 * ones. Committing the same transaction twice leaves the same state, so when
 * its outcome is unknown (-ECONNRESET, -EIO, -ETIMEDOUT) the writer simply
 * commits it again.
 */
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "roshm.h"

#define WRITERS_MAX 8
#define ACCOUNTS 8                   /* per writer */
#define START 1000                   /* each account's first balance */

/* One value per 64-byte line: a torn snapshot could not hide in a line. */
struct line {
	uint64_t v;
	uint64_t pad[7];
};

struct bank {
	uint64_t ready;                  /* set by the owner once the rest is filled in */
	uint64_t writers;
	uint64_t transfers;              /* per writer */
	uint64_t finished;               /* writers done (FETCH_ADD) */
	uint64_t pad[4];
	struct line done[WRITERS_MAX];   /* transfers writer w committed */
	struct line balance[WRITERS_MAX * ACCOUNTS];
};

/* A transaction record: 64 bytes of header, 16 per write, the payload.
 * Three 8-byte writes: 64 + 48 + 24 = 136 bytes, in slots of 256. */
#define TXN_SLOTS 64
#define SLOT_SIZE 256

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int owner(const char *name, unsigned writers, unsigned transfers)
{
	struct roshm_region_opts opts = { .txn_slots = TXN_SLOTS, .slot_size = SLOT_SIZE };
	struct bank *b, snap;
	uint64_t total = (uint64_t)writers * ACCOUNTS * START, reads = 0, bad = 0;
	uint32_t h;
	int err;

	struct roshm *r = roshm_open(NULL, &err);

	if (!r) {
		fprintf(stderr, "owner: cannot attach to roshmd: %s\n", roshm_strerror(err));
		return 1;
	}
	err = roshm_region_create(r, name, sizeof(struct bank), &opts, &h);
	if (err) {
		fprintf(stderr, "owner: create %s: %s\n", name, roshm_strerror(err));
		roshm_close(r);
		return 1;
	}
	/* Our own memory: plain stores, before any writer may start. */
	b = roshm_region_data(r, h, NULL);
	b->writers = writers;
	b->transfers = transfers;
	for (unsigned i = 0; i < writers * ACCOUNTS; i++)
		b->balance[i].v = START;
	__atomic_store_n(&b->ready, 1, __ATOMIC_RELEASE);
	printf("owner: region %s: %u writers x %d accounts, total %llu\n", name, writers, ACCOUNTS,
	       (unsigned long long)total);
	fflush(stdout);

	bool all_done = false;
	uint64_t during = 0; /* snapshots taken while transfers went on */
	double deadline = now_s() + 120;

	while (!all_done && now_s() < deadline) {
		uint64_t sum = 0, moved = 0;
		bool wrong = false;

		/* No transaction is half-applied in what this copies. -EAGAIN:
		 * the applier held the region's seqlock all the while (it was
		 * not scheduled): try again, as the call says */
		err = roshm_region_read_consistent(r, h, 0, &snap, sizeof(snap));
		if (err == -EAGAIN)
			continue;
		if (err) {
			fprintf(stderr, "owner: consistent read: %s\n", roshm_strerror(err));
			roshm_close(r);
			return 1;
		}
		reads++;
		for (unsigned w = 0; w < writers; w++) {
			uint64_t mine = 0;

			for (unsigned k = 0; k < ACCOUNTS; k++)
				mine += snap.balance[w * ACCOUNTS + k].v;
			wrong |= mine != (uint64_t)ACCOUNTS * START; /* each writer's own sum too */
			sum += mine;
			moved += snap.done[w].v;
		}
		wrong |= sum != total;
		if (wrong && bad++ < 3)
			printf("owner: snapshot %llu: total %llu after %llu transfers\n",
			       (unsigned long long)reads, (unsigned long long)sum,
			       (unsigned long long)moved);
		during += moved && moved < (uint64_t)writers * transfers;
		all_done = moved == (uint64_t)writers * transfers;
		/* An owner that only reads its own memory calls into the library
		 * now and then: that is when it notices a roshmd restart and
		 * registers its region with the new one. */
		if (reads % 256 == 0 && (err = roshm_nop_sync(r))) {
			fprintf(stderr, "owner: nop: %s\n", roshm_strerror(err));
			roshm_close(r);
			return 1;
		}
		usleep(200);
	}
	/* The writers read their balances back before they go: stay until then. */
	while (__atomic_load_n(&b->finished, __ATOMIC_ACQUIRE) < writers && now_s() < deadline)
		usleep(10000);
	if (!all_done || b->finished < writers) {
		printf("owner: timed out: %llu of %u writers finished\n",
		       (unsigned long long)b->finished, writers);
		bad++;
	}
	if (bad)
		printf("owner: %llu consistent snapshots (%llu during the transfers), %llu wrong: "
		       "money was in flight\n", (unsigned long long)reads, (unsigned long long)during,
		       (unsigned long long)bad);
	else
		printf("owner: %llu consistent snapshots (%llu during the transfers), every total %llu; "
		       "%u writers x %u transfers applied\n", (unsigned long long)reads,
		       (unsigned long long)during, (unsigned long long)total, writers, transfers);
	roshm_close(r);
	return bad ? 1 : 0;
}

/* Wait for one completion: its status, or the wait's own error. */
static int reap(struct roshm *r)
{
	struct roshm_cqe *cqe;
	int ret = roshm_wait_cqe(r, &cqe);

	if (ret)
		return ret;
	ret = cqe->status;
	roshm_cqe_seen(r, cqe);
	return ret;
}

/* One transfer: the balances of accounts @a and @b and the transfer count
 * (already in the arena at 0, 8 and 16), all or nothing. */
static int transfer(struct roshm *r, uint32_t h, unsigned a, unsigned b, unsigned id)
{
	const uint64_t off_a = offsetof(struct bank, balance) + a * sizeof(struct line);
	const uint64_t off_b = offsetof(struct bank, balance) + b * sizeof(struct line);
	const uint64_t off_n = offsetof(struct bank, done) + id * sizeof(struct line);

	for (int tries = 0;; tries++) {
		struct roshm_sqe *sqe[4];
		struct roshm_cqe *cqe;
		int ret;

		for (int i = 0; i < 4; i++)
			if (!(sqe[i] = roshm_get_sqe(r)))
				return -EBUSY; /* not here: the SQ is empty between transfers */
		roshm_prep_txn_write(sqe[0], h, off_a, 0, 8);
		roshm_prep_txn_write(sqe[1], h, off_b, 8, 8);
		roshm_prep_txn_write(sqe[2], h, off_n, 16, 8);
		roshm_prep_txn_commit(sqe[3], h);
		roshm_submit(r); /* four SQEs, one doorbell; only the commit has a CQE */
		ret = roshm_wait_cqe(r, &cqe);
		if (ret)
			return ret; /* no roshmd came back within reconnect_ms */
		ret = cqe->status;
		roshm_cqe_seen(r, cqe);
		/* Outcome unknown (-ECONNRESET, -EIO, -ETIMEDOUT), or not now
		 * (-EAGAIN: the region drains; -EBUSY: no transaction context
		 * free): the same values once more are harmless. */
		if ((ret != -ECONNRESET && ret != -EIO && ret != -ETIMEDOUT && ret != -EAGAIN &&
		     ret != -EBUSY) || tries == 20)
			return ret;
		usleep(50000);
	}
}

/* The same with plain WRITEs: each lands on its own. */
static int transfer_plain(struct roshm *r, uint32_t h, unsigned a, unsigned b, unsigned id)
{
	int ret = roshm_write_sync(r, h, offsetof(struct bank, balance) + a * sizeof(struct line), 0, 8);

	usleep(1000); /* money in flight, for everyone to see */
	if (!ret)
		ret = roshm_write_sync(r, h, offsetof(struct bank, balance) + b * sizeof(struct line), 8, 8);
	if (!ret)
		ret = roshm_write_sync(r, h, offsetof(struct bank, done) + id * sizeof(struct line), 16, 8);
	return ret;
}

static int writer(const char *name, unsigned id, bool plain)
{
	uint64_t bal[ACCOUNTS] = { 0 }, hdr[4] = { 0 }, *arena, old;
	uint32_t h;
	int err;
	struct roshm *r = roshm_open(NULL, &err);

	if (!r) {
		fprintf(stderr, "writer %u: cannot attach to roshmd: %s\n", id, roshm_strerror(err));
		return 1;
	}
	arena = roshm_arena(r, NULL);
	/* The owner (maybe on another node) may not be there yet. */
	for (int i = 0; i < 1000; i++) {
		err = roshm_region_open(r, name, &h, NULL);
		if (err != -ENOENT && err != -EHOSTUNREACH && err != -EAGAIN)
			break;
		usleep(10000);
	}
	for (int i = 0; !err && i < 1000; i++) {
		err = roshm_read_sync(r, h, 0, 0, sizeof(hdr));
		memcpy(hdr, arena, sizeof(hdr));
		if (!err && hdr[0])
			break;
		usleep(10000);
	}
	if (err || !hdr[0] || id >= hdr[1]) {
		fprintf(stderr, "writer %u: %s: %s\n", id, name,
			err ? roshm_strerror(err) : !hdr[0] ? "never ready" : "no such writer");
		roshm_close(r);
		return 1;
	}
	unsigned transfers = (unsigned)hdr[2];

	/* Our balances: ACCOUNTS READs, one submit, then their completions. */
	for (unsigned k = 0; k < ACCOUNTS; k++) {
		struct roshm_sqe *sqe = roshm_get_sqe(r);

		if (!sqe) {
			/* SQ full (not an error): send what is queued, reap it */
			roshm_submit(r);
			while (!err && roshm_inflight(r))
				err = reap(r);
			sqe = roshm_get_sqe(r);
			if (err || !sqe)
				break;
		}
		roshm_prep_read(sqe, h, offsetof(struct bank, balance) +
				(id * ACCOUNTS + k) * sizeof(struct line), 64 + 8 * k, 8);
		roshm_sqe_set_data(sqe, k);
	}
	roshm_submit(r);
	while (!err && roshm_inflight(r))
		err = reap(r);
	for (unsigned k = 0; !err && k < ACCOUNTS; k++)
		bal[k] = arena[8 + k];

	unsigned seed = (unsigned)getpid() ^ id;
	double t0 = now_s();

	for (unsigned i = 0; !err && i < transfers; i++) {
		unsigned a, b;

		do /* from an account with money (the sum never changes: one has) */
			a = (unsigned)rand_r(&seed) % ACCOUNTS;
		while (!bal[a]);
		b = (a + 1 + (unsigned)rand_r(&seed) % (ACCOUNTS - 1)) % ACCOUNTS;
		uint64_t amount = 1 + (uint64_t)rand_r(&seed) % bal[a];

		bal[a] -= amount;
		bal[b] += amount;
		arena[0] = bal[a];
		arena[1] = bal[b];
		arena[2] = i + 1;
		err = plain ? transfer_plain(r, h, id * ACCOUNTS + a, id * ACCOUNTS + b, id)
			    : transfer(r, h, id * ACCOUNTS + a, id * ACCOUNTS + b, id);
	}
	if (err) {
		fprintf(stderr, "writer %u: transfer: %s\n", id, roshm_strerror(err));
		roshm_close(r);
		return 1;
	}
	double dt = now_s() - t0;

	/* Committed is not yet applied: the owner's roshmd applies the log in
	 * order. Read our count until it shows the last transfer. */
	for (int i = 0; !err && i < 1000; i++) {
		err = roshm_read_sync(r, h, offsetof(struct bank, done) + id * sizeof(struct line), 0, 8);
		if (!err && arena[0] == transfers)
			break;
		usleep(10000);
	}
	for (unsigned k = 0; !err && k < ACCOUNTS; k++) {
		err = roshm_read_sync(r, h, offsetof(struct bank, balance) +
				      (id * ACCOUNTS + k) * sizeof(struct line), 8, 8);
		if (!err && arena[1] != bal[k]) {
			fprintf(stderr, "writer %u: account %u holds %llu, we committed %llu\n", id, k,
				(unsigned long long)arena[1], (unsigned long long)bal[k]);
			err = -EIO;
		}
	}
	if (!err)
		err = roshm_fetch_add_sync(r, h, offsetof(struct bank, finished), 1, &old);
	if (err) {
		fprintf(stderr, "writer %u: read back: %s\n", id, roshm_strerror(err));
		roshm_close(r);
		return 1;
	}
	printf("writer %u: %u %s in %.2f s (%.0f us each); balances read back match\n", id,
	       transfers, plain ? "plain transfers" : "transactions", dt, dt * 1e6 / transfers);
	roshm_close(r);
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: txn-transfer owner [-r NAME] [-w WRITERS] [-n TRANSFERS]\n"
			"       txn-transfer writer [-r NAME] [--plain] ID\n");
	return 2;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "plain", no_argument, NULL, 'p' },
		{ NULL, 0, NULL, 0 },
	};
	const char *name = "accounts";
	unsigned writers = 2, transfers = 200;
	bool plain = false;
	int c;

	if (argc < 2)
		return usage();
	optind = 2;
	while ((c = getopt_long(argc, argv, "r:w:n:", longopts, NULL)) != -1) {
		switch (c) {
		case 'r': name = optarg; break;
		case 'w': writers = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'n': transfers = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'p': plain = true; break;
		default: return usage();
		}
	}
	if (!strcmp(argv[1], "owner") && optind == argc && writers >= 1 && writers <= WRITERS_MAX &&
	    transfers >= 1)
		return owner(name, writers, transfers);
	if (!strcmp(argv[1], "writer") && optind == argc - 1)
		return writer(name, (unsigned)strtoul(argv[optind], NULL, 10), plain);
	return usage();
}
