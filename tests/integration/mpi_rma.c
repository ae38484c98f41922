// SPDX-License-Identifier: MIT
/*
 * MPI through libroshm-verbs, for an MPI without mpi4py here (Debian's
 * MPICH, ch4:ucx, so UCX's rc_verbs / ud_verbs on roshm0): the checks of
 * mpi_check.py in C. Two ranks, each on its own roshmd node
 * (check_verbs_mpi.sh); the MPI library and UCX are unmodified, this only
 * drives them and checks every byte and value that comes back:
 *   - two-sided: Sendrecv of 8 B to 4 MiB (eager and rendezvous), both ways;
 *   - one-sided on an MPI window: Put and Get of 256 KiB at an odd offset
 *     (bytes around it untouched), Accumulate(SUM), Fetch_and_op(SUM) from
 *     both ranks at once on one counter (every fetched value distinct, the
 *     sum exact), Compare_and_swap (exactly one rank wins).
 * Exit 0 and a last line "mpi_rma: ok" on rank 0, else a message and 1.
 * Built with the MPI's own compiler wrapper (mpicc.mpich) by meson.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank;

#define FAIL(...)                                                      \
	do {                                                           \
		printf("mpi_rma rank %d: FAIL: ", rank);               \
		printf(__VA_ARGS__);                                   \
		printf("\n");                                          \
		fflush(stdout);                                        \
		MPI_Abort(MPI_COMM_WORLD, 1);                          \
	} while (0)

static uint8_t pat(size_t i, int seed)
{
	return (uint8_t)(i * 131 + (size_t)seed * 7 + (i >> 8));
}

static void fill(uint8_t *b, size_t n, int seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = pat(i, seed);
}

/* the first byte of b[0..n) that is not pattern seed, or -1 */
static long differs(const uint8_t *b, size_t n, int seed)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != pat(i, seed))
			return (long)i;
	return -1;
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

#define WIN (1 << 20)
#define K 300

int main(int argc, char **argv)
{
	static const size_t sizes[] = { 8, 1000, 8192, 65536, 1 << 20, 4 << 20 };
	int size, peer;
	uint8_t *out, *got, *mem, *src, *back;
	MPI_Win win;
	long bad;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size != 2)
		FAIL("want 2 ranks, have %d", size);
	peer = 1 - rank;

	/* two-sided, both ways at once */
	out = malloc(4 << 20);
	got = malloc(4 << 20);
	if (!out || !got)
		FAIL("out of memory");
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size_t n = sizes[s];

		fill(out, n, rank + (int)n);
		memset(got, 0, n);
		MPI_Sendrecv(out, (int)n, MPI_BYTE, peer, (int)(n & 0x7fff), got, (int)n, MPI_BYTE,
			     peer, (int)(n & 0x7fff), MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		if ((bad = differs(got, n, peer + (int)n)) >= 0)
			FAIL("Sendrecv of %zu bytes: byte %ld differs", n, bad);
	}
	if (!rank)
		printf("mpi_rma: Sendrecv 8 B .. 4 MiB both ways: bytes right\n");
	fflush(stdout);

	/* one-sided: Put 256 KiB into the peer's window at an odd offset,
	 * then Get it back */
	MPI_Win_allocate(WIN, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win);
	memset(mem, 0, WIN);
	MPI_Barrier(MPI_COMM_WORLD);
	{
		const size_t n = 256 * 1024, off = 4099;

		src = malloc(n);
		back = calloc(1, n);
		if (!src || !back)
			FAIL("out of memory");
		fill(src, n, rank + 40);
		MPI_Win_fence(0, win);
		MPI_Put(src, (int)n, MPI_BYTE, peer, off, (int)n, MPI_BYTE, win);
		MPI_Win_fence(0, win);
		if ((bad = differs(mem + off, n, peer + 40)) >= 0)
			FAIL("Put: byte %ld of %zu differs from what the peer put", bad, n);
		for (size_t i = 0; i < off; i++)
			if (mem[i])
				FAIL("Put: byte %zu before the target range changed", i);
		for (size_t i = off + n; i < off + n + 4096; i++)
			if (mem[i])
				FAIL("Put: byte %zu after the target range changed", i);
		MPI_Win_fence(0, win);
		MPI_Get(back, (int)n, MPI_BYTE, peer, off, (int)n, MPI_BYTE, win);
		MPI_Win_fence(0, win);
		if ((bad = differs(back, n, rank + 40)) >= 0)
			FAIL("Get: byte %ld is not what this rank put there", bad);
	}
	if (!rank)
		printf("mpi_rma: Put and Get of 256 KiB at an odd offset: bytes right\n");
	fflush(stdout);

	/* atomics on 8-byte words at offsets 0, 8, 16 of rank 0's window */
	{
		enum { CTR = 0, ACC = 8, CAS = 16 };
		int64_t seen[K], all[2 * K], one = 1, res, inc = rank + 1, fin[2];
		int64_t claim = 100 + rank, cmpv = 0, old = -1, olds[2], word;
		int winner;

		MPI_Win_fence(0, win);
		memset(mem, 0, 64);
		MPI_Barrier(MPI_COMM_WORLD);
		MPI_Win_fence(0, win);
		MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
		for (int i = 0; i < K; i++) {
			MPI_Fetch_and_op(&one, &res, MPI_INT64_T, 0, CTR, MPI_SUM, win);
			MPI_Win_flush(0, win);
			seen[i] = res;
			MPI_Accumulate(&inc, 1, MPI_INT64_T, 0, ACC, 1, MPI_INT64_T, MPI_SUM, win);
		}
		MPI_Win_unlock(0, win);
		MPI_Gather(seen, K, MPI_INT64_T, all, K, MPI_INT64_T, 0, MPI_COMM_WORLD);
		MPI_Barrier(MPI_COMM_WORLD);
		if (!rank) {
			MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
			MPI_Get(fin, 2, MPI_INT64_T, 0, CTR, 2, MPI_INT64_T, win);
			MPI_Win_unlock(0, win);
			qsort(all, 2 * K, sizeof(all[0]), cmp64);
			for (int i = 0; i < 2 * K; i++)
				if (all[i] != i)
					FAIL("Fetch_and_op: fetched values are not 0..%d once each", 2 * K - 1);
			if (fin[0] != 2 * K || fin[1] != 3 * K)
				FAIL("counter %lld (want %d), accumulated %lld (want %d)",
				     (long long)fin[0], 2 * K, (long long)fin[1], 3 * K);
			printf("mpi_rma: %d Fetch_and_op from both ranks: each value once, sum exact; "
			       "Accumulate exact\n", 2 * K);
			fflush(stdout);
		}

		/* both ranks try to claim one word; exactly one wins */
		MPI_Barrier(MPI_COMM_WORLD);
		MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
		MPI_Compare_and_swap(&claim, &cmpv, &old, MPI_INT64_T, 0, CAS, win);
		MPI_Win_unlock(0, win);
		MPI_Gather(&old, 1, MPI_INT64_T, olds, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
		MPI_Barrier(MPI_COMM_WORLD);
		if (!rank) {
			MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
			MPI_Get(&word, 1, MPI_INT64_T, 0, CAS, 1, MPI_INT64_T, win);
			MPI_Win_unlock(0, win);
			winner = olds[0] == 0 ? 0 : 1;
			if ((olds[0] == 0) == (olds[1] == 0) || word != 100 + winner ||
			    olds[1 - winner] != word)
				FAIL("Compare_and_swap: olds %lld %lld, word %lld", (long long)olds[0],
				     (long long)olds[1], (long long)word);
			printf("mpi_rma: Compare_and_swap: rank %d won, the other saw its value\n",
			       winner);
			fflush(stdout);
		}
	}
	MPI_Win_free(&win);
	MPI_Barrier(MPI_COMM_WORLD);
	if (!rank)
		printf("mpi_rma: ok\n");
	fflush(stdout);
	free(out);
	free(got);
	free(src);
	free(back);
	MPI_Finalize();
	return 0;
}
