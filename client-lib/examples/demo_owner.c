// SPDX-License-Identifier: MIT
/*
 * demo-owner: a "pod" that owns the region "board". It reads what other
 * pods write into it with plain loads from its own mapping.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "roshm.h"
#include "demo_board.h"

int main(void)
{
	struct roshm *r;
	struct board *b;
	uint32_t h;
	uint64_t size, seen = 0;
	int err;

	r = roshm_open(NULL, &err);
	if (!r) {
		fprintf(stderr, "owner: cannot attach to roshmd: %s\n", roshm_strerror(err));
		return 1;
	}
	err = roshm_region_create(r, BOARD_NAME, sizeof(struct board), NULL, &h);
	if (err) {
		fprintf(stderr, "owner: region create: %s\n", roshm_strerror(err));
		return 1;
	}
	b = roshm_region_data(r, h, &size);
	printf("owner  (pid %d): created region default/%s, %llu bytes, on node %s\n", getpid(),
	       BOARD_NAME, (unsigned long long)size, r->node);
	fflush(stdout);
	for (int i = 0; i < 3000; i++) { /* up to 30 s */
		uint64_t n = __atomic_load_n(&b->count, __ATOMIC_ACQUIRE);

		while (seen < n && seen < BOARD_RECORDS) {
			printf("owner  (pid %d): sees record %llu: \"%.*s\"\n", getpid(),
			       (unsigned long long)seen, BOARD_REC_SIZE, b->rec[seen]);
			seen++;
		}
		if (__atomic_load_n(&b->done, __ATOMIC_ACQUIRE)) {
			printf("owner  (pid %d): counter = %llu, done flag set by pid %llu\n", getpid(),
			       (unsigned long long)b->count, (unsigned long long)b->done);
			roshm_close(r);
			return seen == BOARD_RECORDS && n == BOARD_RECORDS ? 0 : 1;
		}
		usleep(10000);
	}
	fprintf(stderr, "owner: timed out with %llu records\n", (unsigned long long)seen);
	roshm_close(r);
	return 1;
}
