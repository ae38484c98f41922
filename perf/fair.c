// SPDX-License-Identifier: MIT
/*
 * Fairness: tenant A's 64 B WRITE completion latency (one at a time) while
 * tenant B floods the same roshmd, over A's latency with B idle:
 *   bulk   B keeps its SQ full of 1 MiB WRITEs (full depth)
 *   small  B keeps its SQ full of 64 B WRITEs (full rate)
 * A is our channel ($ROSHM_TENANT / $ROSHM_TOKEN, as libroshm takes them);
 * B is a second channel of this process as $ROSHM_FLOOD_TENANT with
 * $ROSHM_FLOOD_TOKEN. One thread drives both: while A waits for its
 * completion it keeps B's ring full (reap, refill, submit, a few SQEs at a
 * time), so that B never runs dry and neither side needs a core of its own
 * (two cores: the client's and the poller's). The idle phase runs the same
 * loop with B at depth 0. Trials alternate idle, bulk, idle, small.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_cycles.h>

#include "perf.h"

#define FLOOD_CHUNK 16        /* SQEs per refill: A is looked at between refills */
#define BULK_LEN (1u << 20)

struct flood {
	struct roshm *r;
	uint32_t h;
	uint32_t len;
	unsigned depth, inflight;
	uint64_t done, seq;
};

/* Reap B's completions and refill its SQ. With @a (A's channel, while A
 * waits) it stops as soon as A's completion is there: A's latency is not
 * to hold the harness's own work for B. */
static void flood_service(struct flood *f, struct roshm *a)
{
	struct roshm_cqe *cqes[FLOOD_CHUNK * 2], *ac;
	struct roshm_sqe *s;
	unsigned got = roshm_peek_batch_cqe(f->r, cqes, FLOOD_CHUNK * 2), k = 0;

	for (unsigned i = 0; i < got; i++)
		if (cqes[i]->status)
			die("flood write", cqes[i]->status);
	roshm_cq_advance(f->r, got);
	f->inflight -= got;
	f->done += got;
	while (f->inflight + k < f->depth && k < FLOOD_CHUNK && !(a && roshm_peek_cqe(a, &ac) == 0) &&
	       (s = roshm_get_sqe(f->r))) {
		/* bulk: every WRITE from arena offset 0 (the flooder does not
		 * write payloads: its client side stays cheap) */
		uint64_t off = f->len == BULK_LEN ? (f->seq & 1) * BULK_LEN : (f->seq % 4096) * f->len;

		roshm_prep_write(s, f->h, off, f->len == BULK_LEN ? 0 : (f->seq % 4096) * f->len, f->len);
		f->seq++;
		k++;
	}
	if (k) {
		roshm_submit(f->r);
		f->inflight += k;
	}
}

static void flood_drain(struct flood *f)
{
	while (f->inflight) {
		struct roshm_cqe *c;
		int err = roshm_wait_cqe(f->r, &c);

		if (err)
			die("flood", err);
		roshm_cqe_seen(f->r, c);
		f->inflight--;
	}
}

/* A's latency samples with B doing @f's work; B's rate in *rate (ops/s). */
static void victim(struct flood *f, size_t iters, uint64_t *samples, double *rate)
{
	struct roshm_cqe *c;
	uint64_t d0, t0;

	for (int i = 0; i < 64 && f->depth; i++) /* B at full depth first */
		flood_service(f, NULL);
	d0 = f->done;
	t0 = rte_rdtsc();
	for (size_t i = 0; i < iters + 100; i++) {
		uint64_t a = rte_rdtsc_precise();
		struct roshm_sqe *s = roshm_get_sqe(R);

		if (!s)
			die("get_sqe", -EBUSY);
		roshm_prep_write(s, H, 0, 0, 64);
		roshm_submit(R);
		while (roshm_peek_cqe(R, &c))
			flood_service(f, R);
		uint64_t b = rte_rdtsc_precise();

		if (c->status)
			die("victim write", c->status);
		roshm_cqe_seen(R, c);
		if (i >= 100)
			samples[i - 100] = b - a;
		flood_service(f, NULL);
	}
	*rate = (double)(f->done - d0) / ((double)(rte_rdtsc() - t0) / (double)hz);
	flood_drain(f);
}

void run_fair(int trials, size_t iters, const char *json)
{
	const char *ft = getenv("ROSHM_FLOOD_TENANT"), *fk = getenv("ROSHM_FLOOD_TOKEN");
	const char *vt = getenv("ROSHM_TENANT") && *getenv("ROSHM_TENANT") ? getenv("ROSHM_TENANT") :
										  "default";
	struct roshm_params p = { .sock_path = sock_path, .tenant = ft, .token = fk,
				  .sq_entries = 256, .cq_entries = 512,
				  .arena_size = 2 * BULK_LEN, .spin_us = 1000 };
	uint64_t *samples = malloc(sizeof(uint64_t) * iters);
	uint64_t *keep[3];
	double p99[3][64], p50[3][64], frate[3][64];
	struct lat last[3];
	char name[64];
	struct flood f = { 0 };
	int err;
	static const char *const phase[3] = { "idle", "bulk", "small" };

	if (!ft || !*ft) {
		fprintf(stderr, "roshm-perf: fair: set ROSHM_FLOOD_TENANT (and ROSHM_FLOOD_TOKEN) to the "
			"flooding tenant, ROSHM_TENANT and ROSHM_TOKEN to the victim's\n");
		exit(2);
	}
	if (!strcmp(ft, vt)) {
		fprintf(stderr, "roshm-perf: fair: the flooder (%s) must be another tenant than the "
			"victim (%s)\n", ft, vt);
		exit(2);
	}
	for (int k = 0; k < 3; k++) {
		keep[k] = malloc(sizeof(uint64_t) * iters);
		if (!keep[k])
			die("samples", -ENOMEM);
	}
	if (!samples)
		die("samples", -ENOMEM);
	f.r = roshm_open(&p, &err);
	if (!f.r)
		die("attach as the flooding tenant", err);
	snprintf(name, sizeof(name), "flood-%d", (int)getpid());
	err = roshm_region_create(f.r, name, 2 * BULK_LEN, NULL, &f.h);
	if (err)
		die("flood region", err);
	for (int t = 0; t < trials; t++) {
		for (int k = 0; k < 3; k++) {
			/* idle, bulk, idle, small ...: the idle trial sits between floods */
			f.len = k == 1 ? BULK_LEN : 64;
			f.depth = k == 0 ? 0 : f.r->sq.entries;
			progress("fair %s: %d/%d trials", phase[k], t + 1, trials);
			victim(&f, iters, samples, &frate[k][t]);
			last[k] = lat_of(samples, iters);
			memcpy(keep[k], samples, sizeof(uint64_t) * iters); /* sorted */
			p50[k][t] = last[k].typical;
			p99[k][t] = last[k].p99;
		}
	}
	lat_header("tenant A: 64 B WRITE completion latency, tenant B idle (last trial)");
	lat_row(64, iters, last[0]);
	lat_header("tenant A while tenant B keeps its SQ full of 1 MiB WRITEs (last trial)");
	lat_row(64, iters, last[1]);
	lat_header("tenant A while tenant B keeps its SQ full of 64 B WRITEs (last trial)");
	lat_row(64, iters, last[2]);
	bw_header("tenant B's flood (medians of trials)");
	bw_row(BULK_LEN, 0, median(frate[1], trials) * BULK_LEN, median(frate[1], trials) * BULK_LEN);
	bw_row(64, 0, median(frate[2], trials) * 64, median(frate[2], trials) * 64);

	struct sweep *sw = sweep_new("fair", "tenant A's 64 B WRITE latency, tenant B idle or flooding",
				     "trial,idle_p99_us,bulk_p99_us,small_p99_us,idle_p50_us,bulk_p50_us,"
				     "small_p50_us,bulk_flood_MiBps:-,small_flood_Mops:-",
				     "trial", "tenant A latency [us]", NULL, SW_LOGY);

	for (int t = 0; t < trials; t++)
		sweep_row(sw, (double[]){ t + 1, p99[0][t], p99[1][t], p99[2][t], p50[0][t], p50[1][t],
					  p50[2][t], frate[1][t] * BULK_LEN / 1048576,
					  frate[2][t] / 1e6 });
	sweep_done(sw);
	/* the whole distribution of the last trial of each phase */
	sw = sweep_new("fair_cdf", "tenant A's 64 B WRITE latency distribution (last trial of each)",
		       "percentile,idle_us,bulk_us,small_us", "percentile", "latency [us]", NULL, SW_LOGY);
	for (double q = 1; q < 100; q += q < 90 ? 1 : q < 99 ? 0.5 : 0.1) {
		size_t i = (size_t)((double)iters * q / 100);

		sweep_row(sw, (double[]){ q, us_of(keep[0][i]), us_of(keep[1][i]), us_of(keep[2][i]) });
	}
	sweep_done(sw);

	double idle = median(p99[0], trials), bulk = median(p99[1], trials),
	       small = median(p99[2], trials);

	add_result("victim_p99_under_flood_vs_idle_bulk", bulk, idle, "us", "<=", 2.0);
	add_result("victim_p99_under_flood_vs_idle_small", small, idle, "us", "<=", 2.0);
	/* the headline: the worse of the two */
	add_result("victim_p99_under_flood_vs_idle", bulk > small ? bulk : small, idle, "us", "<=", 2.0);
	print_results(json);
	roshm_close(f.r);
	for (int k = 0; k < 3; k++)
		free(keep[k]);
	free(samples);
}
