// SPDX-License-Identifier: MIT
/*
 * demo-writer: a "pod" that opens another pod's region by name and writes
 * records into it (WRITE), bumps its counter (FETCH_ADD), reads it back
 * (READ) and sets a done flag (COMPARE_SWAP).
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "roshm.h"
#include "demo_board.h"

static int check(int ret, const char *what)
{
	if (ret < 0)
		fprintf(stderr, "writer: %s: %s\n", what, roshm_strerror(ret));
	return ret;
}

int main(void)
{
	struct roshm *r;
	uint32_t h;
	uint64_t size, old;
	uint8_t *arena;
	int err = 0;

	r = roshm_open(NULL, &err);
	if (!r) {
		fprintf(stderr, "writer: cannot attach to roshmd: %s\n", roshm_strerror(err));
		return 1;
	}
	for (int i = 0; i < 500; i++) { /* the owner may not have created it yet */
		err = roshm_region_open(r, "default/" BOARD_NAME, &h, &size);
		if (err != -ENOENT)
			break;
		usleep(10000);
	}
	if (check(err, "open default/" BOARD_NAME))
		return 1;
	printf("writer (pid %d): opened default/%s (%llu bytes)\n", getpid(), BOARD_NAME,
	       (unsigned long long)size);
	arena = roshm_arena(r, NULL);
	for (int i = 0; i < BOARD_RECORDS; i++) {
		struct roshm_sqe *sqe;
		struct roshm_cqe *cqe;

		memset(arena, 0, BOARD_REC_SIZE);
		snprintf((char *)arena, BOARD_REC_SIZE, "record %d from pid %d", i, getpid());
		/* WRITE then FETCH_ADD in one submit; the FENCE flag makes the
		 * counter move only after the record landed. */
		sqe = roshm_get_sqe(r);
		if (!sqe)
			return 1; /* cannot happen: the SQ is empty here */
		roshm_prep_write(sqe, h, offsetof(struct board, rec) + (uint64_t)i * BOARD_REC_SIZE,
				 0, BOARD_REC_SIZE);
		roshm_sqe_set_data(sqe, 1);
		sqe = roshm_get_sqe(r);
		if (!sqe)
			return 1;
		roshm_prep_fetch_add(sqe, h, offsetof(struct board, count), 1);
		roshm_sqe_set_flags(sqe, ROSHM_SQE_F_FENCE);
		roshm_sqe_set_data(sqe, 2);
		roshm_submit(r);
		for (int k = 0; k < 2; k++) {
			if (check(roshm_wait_cqe(r, &cqe), "wait"))
				return 1;
			if (cqe->status) {
				check(cqe->status, cqe->user_data == 1 ? "write" : "fetch_add");
				return 1;
			}
			roshm_cqe_seen(r, cqe);
		}
	}
	if (check(roshm_read_sync(r, h, 0, 4096, sizeof(struct board)), "read"))
		return 1;
	const struct board *copy = (const void *)(arena + 4096);
	uint64_t count = copy->count;

	printf("writer (pid %d): wrote %d records with WRITE + FETCH_ADD; READ back counter = %llu, "
	       "last record \"%s\"\n", getpid(), BOARD_RECORDS, (unsigned long long)copy->count,
	       copy->rec[BOARD_RECORDS - 1]);
	if (check(roshm_cmp_swap_sync(r, h, offsetof(struct board, done), 0, (uint64_t)getpid(), &old),
		  "cmp_swap"))
		return 1;
	printf("writer (pid %d): COMPARE_SWAP done 0 -> %d (old value %llu)\n", getpid(), getpid(),
	       (unsigned long long)old);
	roshm_close(r);
	return count == BOARD_RECORDS && old == 0 ? 0 : 1;
}
