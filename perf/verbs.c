// SPDX-License-Identifier: MIT
/*
 * roshm-perf verbs: roshm over the verbs transport next to perftest on the
 * same RDMA devices, in the same run. Like is compared with like: a roshm
 * WRITE's completion latency is a full round trip to a passive responder,
 * as is ib_read_lat's; FETCH_ADD is compared with ib_atomic_lat. Trials
 * alternate perftest and roshm; figures are medians of the trials' typical
 * latencies. The peer runs the perftest servers (a loop per port):
 *   18515  ib_read_lat -s 64 -n ITERS
 *   18516  ib_atomic_lat -n ITERS
 *   18517  ib_read_lat -a -n SWEEP_ITERS
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf.h"

#define MAX_ROWS 32

struct prow {
	uint64_t bytes;
	unsigned iters;
	double v[7];   /* min max typical avg stdev p99 p999 */
};

/* Run a perftest client; parse its result rows. Retries while the
 * server's loop restarts it. Returns the number of rows. */
static int perftest(const char *cmd, struct prow *rows, int max)
{
	for (int attempt = 0; attempt < 40; attempt++) {
		FILE *f = popen(cmd, "r");
		char line[512];
		int n = 0;

		if (!f)
			break;
		while (fgets(line, sizeof(line), f)) {
			struct prow r;

			if (n < max && sscanf(line, " %lu %u %lf %lf %lf %lf %lf %lf %lf", &r.bytes, &r.iters,
					      &r.v[0], &r.v[1], &r.v[2], &r.v[3], &r.v[4], &r.v[5],
					      &r.v[6]) == 9)
				rows[n++] = r;
		}
		bool finite = n > 0;

		for (int i = 0; i < n; i++)
			finite &= isfinite(rows[i].v[2]) && rows[i].v[2] > 0;
		if (pclose(f) == 0 && finite) {
			/* The peer's server loop starts its next server now (a process
			 * start is heavy under TCG): let it settle before we measure. */
			sleep(2);
			return n;
		}
		usleep(500000); /* the server is not listening again yet */
	}
	fprintf(stderr, "roshm-perf: '%s' failed\n", cmd);
	exit(1);
}

void run_verbs(int trials, size_t iters, size_t sweep_iters, const char *peer, const char *dev,
	       const char *json)
{
	uint64_t *samples = malloc(sizeof(uint64_t) * (iters > sweep_iters ? iters : sweep_iters));
	double rd[64], wr[64], at[64], fa[64];
	struct lat lw = { 0 }, lf = { 0 }, lr[MAX_ROWS], ll[MAX_ROWS];
	struct prow rows[MAX_ROWS], prd = { 0 }, pat = { 0 };
	char cmd[256];
	int n;
	size_t arena;

	/* Trial -1 warms up (under TCG, code runs slowly until translated). */
	for (int t = -1; t < trials; t++) {
		double r, w, a, f;

		snprintf(cmd, sizeof(cmd), "ib_read_lat -d %s -s 64 -n %zu -F -p 18515 %s 2>&1", dev, iters,
			 peer);
		perftest(cmd, &prd, 1);
		r = prd.v[2];
		w = op_lat(ROSHM_OP_WRITE, 64, iters, samples, &lw) / 1000;
		snprintf(cmd, sizeof(cmd), "ib_atomic_lat -d %s -n %zu -F -p 18516 %s 2>&1", dev, iters, peer);
		perftest(cmd, &pat, 1);
		a = pat.v[2];
		f = op_lat(ROSHM_OP_FETCH_ADD, 8, iters, samples, &lf) / 1000;
		progress("verbs: %s %d/%d", t < 0 ? "warm-up" : "trial", t + 1, trials);
		printf(" %s %d: ib_read_lat %.1f us, roshm WRITE 64 B %.1f us; ib_atomic_lat %.1f us, "
		       "roshm FETCH_ADD %.1f us\n", t < 0 ? "warm-up" : "trial", t + 1, r, w, a, f);
		fflush(stdout);
		if (t < 0)
			continue;
		rd[t] = r;
		wr[t] = w;
		at[t] = a;
		fa[t] = f;
	}
	lat_header("ib_read_lat -s 64 (perftest, same devices), last trial");
	lat_row(prd.bytes, prd.iters, (struct lat){ prd.v[0], prd.v[1], prd.v[2], prd.v[3], prd.v[4],
						  prd.v[5], prd.v[6] });
	lat_header("roshm 64 B WRITE over verbs, completion latency (submit -> CQE), last trial");
	lat_row(64, iters, lw);
	lat_header("ib_atomic_lat (perftest, FETCH_ADD), last trial");
	lat_row(pat.bytes, pat.iters, (struct lat){ pat.v[0], pat.v[1], pat.v[2], pat.v[3], pat.v[4],
						  pat.v[5], pat.v[6] });
	lat_header("roshm FETCH_ADD over verbs, completion latency, last trial");
	lat_row(8, iters, lf);

	/* Sweep: perftest's rows beside roshm WRITE and READ at each size. */
	if (sweep_iters) {
		snprintf(cmd, sizeof(cmd), "ib_read_lat -d %s -a -n %zu -F -p 18517 %s 2>&1", dev,
			 sweep_iters, peer);
		n = perftest(cmd, rows, MAX_ROWS);
		roshm_arena(R, &arena);
		lat_header("ib_read_lat -a (perftest)");
		for (int i = 0; i < n; i++)
			lat_row(rows[i].bytes, rows[i].iters,
				(struct lat){ rows[i].v[0], rows[i].v[1], rows[i].v[2], rows[i].v[3],
					      rows[i].v[4], rows[i].v[5], rows[i].v[6] });
		for (int i = 0; i < n; i++) {
			if (rows[i].bytes > REGION || rows[i].bytes > arena) {
				n = i;
				break;
			}
			op_lat(ROSHM_OP_WRITE, (uint32_t)rows[i].bytes, sweep_iters, samples, &lw);
			op_lat(ROSHM_OP_READ, (uint32_t)rows[i].bytes, sweep_iters, samples, &lr[i]);
			ll[i] = lw;
		}
		lat_header("roshm WRITE over verbs (completion latency)");
		for (int i = 0; i < n; i++)
			lat_row(rows[i].bytes, sweep_iters, ll[i]);
		lat_header("roshm READ over verbs (completion latency)");
		for (int i = 0; i < n; i++)
			lat_row(rows[i].bytes, sweep_iters, lr[i]);
		struct sweep *sw = sweep_new("verbs_lat", "completion latency over verbs (Soft-RoCE) "
					     "against message size, beside perftest ib_read_lat",
					     "bytes,write_us,read_us,ib_read_lat_us,write_p99_us:-,"
					     "read_p99_us:-,ib_read_lat_p99_us:-",
					     "message size", "latency [us]", NULL,
					     SW_LOGX | SW_LOGY | SW_BYTES);

		for (int i = 0; i < n; i++)
			sweep_row(sw, (double[]){ (double)rows[i].bytes, ll[i].typical, lr[i].typical,
						  rows[i].v[2], ll[i].p99, lr[i].p99, rows[i].v[5] });
		sweep_done(sw);
		printf("\n side by side, t_typical[usec]:\n");
		printf(" #bytes     ib_read_lat   roshm READ   roshm WRITE   READ/ib   WRITE/ib\n");
		for (int i = 0; i < n; i++)
			printf(" %-10lu %-13.2f %-12.2f %-13.2f %-9.2f %-.2f\n", rows[i].bytes,
			       rows[i].v[2], lr[i].typical, ll[i].typical, lr[i].typical / rows[i].v[2],
			       ll[i].typical / rows[i].v[2]);
	}
	add_result("verbs_write_64b_lat_vs_ib_read_lat", median(wr, trials), median(rd, trials), "us",
		   "<=", 1.2);
	add_result("verbs_fadd_lat_vs_ib_atomic_lat", median(fa, trials), median(at, trials), "us",
		   "<=", 1.2);
	print_results(json);
	free(samples);
}
