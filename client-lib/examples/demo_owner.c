// SPDX-License-Identifier: MIT
/*
 * demo-owner: a "pod" that owns the region "board". It reads what other
 * pods write into it with plain loads from its own mapping.
 *   demo-owner           wait up to 30 s for a writer; exit 0 once it is done
 *   demo-owner --serve   a service (k8s/examples/app): wait for writers for as
 *                        long as it runs, until SIGTERM or SIGINT (exit 0)
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "roshm.h"
#include "demo_board.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };
	bool serve = argc == 2 && !strcmp(argv[1], "--serve");
	struct roshm *r;
	struct board *b;
	uint32_t h;
	uint64_t size, seen = 0, done = 0;
	int err;

	if (argc > 1 && !serve) {
		fprintf(stderr, "usage: demo-owner [--serve]\n");
		return 2;
	}
	if (serve) {
		sigaction(SIGTERM, &sa, NULL);
		sigaction(SIGINT, &sa, NULL);
	}

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
	for (int i = 0; (serve || i < 3000) && !stop; i++) { /* up to 30 s, or a service */
		uint64_t n = __atomic_load_n(&b->count, __ATOMIC_ACQUIRE);

		while (seen < n && seen < BOARD_RECORDS) {
			printf("owner  (pid %d): sees record %llu: \"%.*s\"\n", getpid(),
			       (unsigned long long)seen, BOARD_REC_SIZE, b->rec[seen]);
			seen++;
		}
		if (!done && __atomic_load_n(&b->done, __ATOMIC_ACQUIRE)) {
			done = b->done;
			printf("owner  (pid %d): counter = %llu, done flag set by pid %llu\n", getpid(),
			       (unsigned long long)b->count, (unsigned long long)done);
			if (!serve) {
				roshm_close(r);
				return seen == BOARD_RECORDS && n == BOARD_RECORDS ? 0 : 1;
			}
		}
		fflush(stdout);
		/* a service notices a roshmd restart when it calls in */
		if (serve && i % 100 == 0 && roshm_nop_sync(r) == -ECONNRESET)
			fprintf(stderr, "owner: roshmd is gone; trying again\n");
		usleep(10000);
	}
	if (stop) {
		printf("owner  (pid %d): stopping\n", getpid());
		roshm_close(r);
		return 0;
	}
	fprintf(stderr, "owner: timed out with %llu records\n", (unsigned long long)seen);
	roshm_close(r);
	return 1;
}
