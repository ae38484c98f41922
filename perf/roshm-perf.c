// SPDX-License-Identifier: MIT
/*
 * roshm-perf: measures roshm and, in the same run, the baselines DESIGN
 * section 9 compares it to. Trials alternate baseline and roshm; each figure
 * is the median of its trials. Tables use perftest's columns.
 *
 *   roshm-perf [-s SOCK] [-t TRIALS] [--json FILE] all     the local metrics of this node
 *   roshm-perf [-s SOCK] [--out DIR] sweep|batch|clients|fair   sweeps (CSV, JSON, plots)
 *   roshm-perf restart ROSHMD CONF                         SIGKILL + restart blackout
 *
 * Latency here is completion latency: submit -> CQE, a full round trip
 * through roshmd, for WRITE, READ and atomics alike.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_ring.h>

#include "roshm.h"
#include "perf.h"

uint64_t hz;
unsigned worker;

/* ---- statistics ---- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static double us(uint64_t cycles)
{
	return (double)cycles * 1e6 / (double)hz;
}

double us_of(uint64_t cycles)
{
	return us(cycles);
}


struct lat lat_of(uint64_t *c, size_t n)
{
	struct lat l;
	double sum = 0, sq = 0;

	qsort(c, n, sizeof(*c), cmp_u64);
	for (size_t i = 0; i < n; i++)
		sum += us(c[i]);
	l.avg = sum / (double)n;
	for (size_t i = 0; i < n; i++)
		sq += (us(c[i]) - l.avg) * (us(c[i]) - l.avg);
	l.stdev = sqrt(sq / (double)n);
	l.min = us(c[0]);
	l.max = us(c[n - 1]);
	l.typical = us(c[n / 2]);
	l.p99 = us(c[(size_t)((double)n * 0.99)]);
	l.p999 = us(c[(size_t)((double)n * 0.999)]);
	return l;
}

double median(double *v, int n)
{
	double t[64];

	memcpy(t, v, sizeof(double) * (size_t)n);
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
			double x = t[j];

			t[j] = t[j - 1];
			t[j - 1] = x;
		}
	return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

void lat_header(const char *what)
{
	printf("\n %s\n", what);
	printf(" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    "
	       "t_stdev[usec]   99%% percentile[usec]   99.9%% percentile[usec]\n");
}

void lat_row(uint64_t bytes, size_t iters, struct lat l)
{
	printf(" %-7llu %-10zu %-13.3f %-14.3f %-16.3f %-14.3f %-15.3f %-22.3f %-.3f\n",
	       (unsigned long long)bytes, iters, l.min, l.max, l.typical, l.avg, l.stdev, l.p99, l.p999);
}

void bw_header(const char *what)
{
	printf("\n %s\n", what);
	printf(" #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]\n");
}

void bw_row(uint64_t bytes, uint64_t iters, double peak, double avg)
{
	printf(" %-10llu %-14llu %-19.2f %-21.2f %-.6f\n", (unsigned long long)bytes,
	       (unsigned long long)iters, peak / 1048576.0, avg / 1048576.0,
	       avg / (double)bytes / 1e6);
}

/* ---- roshm ---- */

struct roshm *R;
uint32_t H;          /* handle of our own region */
uint64_t REGION;

void die(const char *what, int err)
{
	fprintf(stderr, "roshm-perf: %s: %s\n", what, roshm_strerror(err));
	exit(1);
}

void reap_one(void)
{
	struct roshm_cqe *cqe;

	while (roshm_peek_cqe(R, &cqe))
		;
	if (cqe->status)
		die("operation", cqe->status);
	roshm_cqe_seen(R, cqe);
}

double op_lat(uint8_t op, uint32_t len, size_t iters, uint64_t *samples, struct lat *out)
{
	for (size_t i = 0; i < iters + 100; i++) {
		uint64_t t0 = rte_rdtsc_precise();
		struct roshm_sqe *s = roshm_get_sqe(R);

		if (!s)
			die("get_sqe", -EBUSY);
		if (op == ROSHM_OP_NOP)
			roshm_prep_nop(s);
		else if (op == ROSHM_OP_FETCH_ADD)
			roshm_prep_fetch_add(s, H, 0, 1);
		else
			roshm_prep_rw(s, op, H, 0, 0, len);
		roshm_submit(R);
		reap_one();
		if (i >= 100)
			samples[i - 100] = rte_rdtsc_precise() - t0;
	}
	*out = lat_of(samples, iters);
	return out->typical * 1000;
}

double write_run(struct roshm *r, uint32_t h, uint64_t region, const struct wopts *o, double *peak,
		 uint64_t *ops)
{
	size_t arena_size;
	uint8_t *arena = roshm_arena(r, &arena_size);
	unsigned depth = o->depth < r->sq.entries ? o->depth : r->sq.entries;
	uint64_t ndst = region / o->len, seq = 0;
	uint64_t t0 = rte_rdtsc(), end = t0 + (uint64_t)(o->seconds * (double)hz);
	uint64_t done = 0, inflight = 0, win_t = t0, win_done = 0;
	struct roshm_cqe *cqes[64];
	struct roshm_sqe *s;
	unsigned batch;

	if (o->fill && (uint64_t)depth * o->len > arena_size)
		depth = (unsigned)(arena_size / o->len);
	if (!depth || !ndst)
		die("write_run: the arena or the region is smaller than one WRITE", -EINVAL);
	batch = o->batch && o->batch < depth ? o->batch : depth;
	if (ndst > depth)
		ndst = depth;
	if (peak)
		*peak = 0;
	/* at least one completion, however short the time: a rate of 0 is no figure */
	while (rte_rdtsc() < end || !done) {
		unsigned n = 0;

		if (!o->lockstep || !inflight)
			while (inflight + n < depth && n < batch && (s = roshm_get_sqe(r))) {
				uint64_t slot = o->fill ? seq % depth : 0;

				if (o->fill)
					memset(arena + slot * o->len, (int)(seq & 0xff), o->len);
				roshm_prep_write(s, o->nh ? o->hs[seq % o->nh] : h, (seq % ndst) * o->len,
						 slot * o->len, o->len);
				seq++;
				n++;
			}
		if (n) {
			roshm_submit(r);
			inflight += n;
		}
		unsigned got = roshm_peek_batch_cqe(r, cqes, 64);

		for (unsigned i = 0; i < got; i++)
			if (cqes[i]->status)
				die("write", cqes[i]->status);
		roshm_cq_advance(r, got);
		inflight -= got;
		done += got;
		if (peak) {
			uint64_t now = rte_rdtsc();

			if (now - win_t > hz / 100) { /* 10 ms windows for the peak */
				double bw = (double)(done - win_done) * o->len /
					    ((double)(now - win_t) / (double)hz);

				if (bw > *peak)
					*peak = bw;
				win_t = now;
				win_done = done;
			}
		}
	}
	uint64_t t1 = rte_rdtsc();

	while (inflight) {
		struct roshm_cqe *c;
		int err = roshm_wait_cqe(r, &c);

		if (err)
			die("write", err);
		if (c->status)
			die("write", c->status);
		roshm_cqe_seen(r, c);
		inflight--;
	}
	if (ops)
		*ops = done;
	return (double)done * o->len / ((double)(t1 - t0) / (double)hz);
}

double write_bw(uint32_t len, unsigned depth, double seconds, double *peak)
{
	struct wopts o = { .len = len, .depth = depth, .seconds = seconds };

	return write_run(R, H, REGION, &o, peak, NULL);
}

/* ---- results ---- */

struct result {
	const char *metric;
	double value, baseline, ratio;
	const char *unit;
	const char *cmp;  /* "<=" or ">=" */
	double target;
	bool absolute;    /* no baseline: the value itself meets the target */
	const char *ref;  /* a reference column: what, its value, measured here or published */
	double ref_value;
	bool ref_measured;
};

static struct result results[48];
static int nresults;

void add_result(const char *metric, double value, double baseline, const char *unit,
		const char *cmp, double target)
{
	struct result *r;

	if (nresults == (int)(sizeof(results) / sizeof(results[0])))
		die("too many results", -ENOSPC);
	r = &results[nresults++];
	memset(r, 0, sizeof(*r));
	r->metric = metric;
	r->value = value;
	r->baseline = baseline;
	r->unit = unit;
	r->ratio = value / baseline;
	r->cmp = cmp;
	r->target = target;
}

void add_absolute(const char *metric, double value, const char *unit, const char *cmp, double target)
{
	add_result(metric, value, 1, unit, cmp, target);
	results[nresults - 1].absolute = true;
	results[nresults - 1].ratio = value;
}

void add_reference(const char *what, double value, bool measured)
{
	struct result *r = &results[nresults - 1];

	r->ref = what;
	r->ref_value = value;
	r->ref_measured = measured;
}

static bool met(const struct result *r)
{
	double v = r->absolute ? r->value : r->ratio;

	if (!isfinite(v))
		return false;
	if (r->cmp[0] == '<')
		return r->cmp[1] == '=' ? v <= r->target : v < r->target;
	return r->cmp[1] == '=' ? v >= r->target : v > r->target;
}

void print_results(const char *json_path)
{
	json_error_t jerr;
	json_t *arr = NULL;

	printf("\n %-42s %12s %12s %-8s %8s %9s  %-4s %s\n", "metric", "roshm", "baseline", "unit",
	       "ratio", "target", "met", "reference (ratio)");
	for (int i = 0; i < nresults; i++) {
		const struct result *r = &results[i];
		char base[32], ratio[32], ref[160] = "";

		if (r->absolute) {
			snprintf(base, sizeof(base), "-");
			snprintf(ratio, sizeof(ratio), "-");
		} else {
			snprintf(base, sizeof(base), "%.3f", r->baseline);
			snprintf(ratio, sizeof(ratio), "%.3f", r->ratio);
		}
		if (r->ref && r->absolute)
			snprintf(ref, sizeof(ref), "%s %.3f%s", r->ref, r->ref_value,
				 r->ref_measured ? "" : " (published)");
		else if (r->ref)
			snprintf(ref, sizeof(ref), "%s %.3f (%.3f)", r->ref, r->ref_value,
				 r->value / r->ref_value);
		printf(" %-42s %12.3f %12s %-8s %8s %5s %-4.2f %-4s %s\n", r->metric, r->value, base, r->unit,
		       ratio, r->cmp, r->target, met(r) ? "yes" : "NO", ref);
	}
	if (!json_path)
		return;
	/* Merge: metrics of this run replace same-named ones already in the file. */
	if (access(json_path, F_OK) == 0)
		arr = json_load_file(json_path, 0, &jerr);
	if (!json_is_array(arr)) {
		json_decref(arr);
		arr = json_array();
	}
	for (int i = 0; i < nresults; i++) {
		const struct result *r = &results[i];
		char target[32];
		size_t k;
		json_t *o = json_object(), *e;

		snprintf(target, sizeof(target), "%s %.2f", r->cmp, r->target);
		json_object_set_new(o, "metric", json_string(r->metric));
		json_object_set_new(o, "value", json_real(r->value));
		json_object_set_new(o, "unit", json_string(r->unit));
		/* absolute metrics: no baseline, the value is held to the target */
		json_object_set_new(o, "baseline", r->absolute ? json_null() : json_real(r->baseline));
		json_object_set_new(o, "ratio", r->absolute || !isfinite(r->ratio) ? json_null() :
						json_real(r->ratio));
		json_object_set_new(o, "target", json_string(target));
		json_object_set_new(o, "met", json_boolean(met(r)));
		if (r->ref) {
			json_t *ref = json_object();

			json_object_set_new(ref, "what", json_string(r->ref));
			json_object_set_new(ref, "value", json_real(r->ref_value));
			json_object_set_new(ref, "measured", json_boolean(r->ref_measured));
			if (!r->absolute)
				json_object_set_new(ref, "ratio", json_real(r->value / r->ref_value));
			json_object_set_new(o, "reference", ref);
		}
		json_array_foreach(arr, k, e)
			if (!strcmp(json_string_value(json_object_get(e, "metric")) ?: "", r->metric)) {
				json_array_remove(arr, k);
				break;
			}
		json_array_append_new(arr, o);
	}
	if (json_dump_file(arr, json_path, JSON_INDENT(2) | JSON_REAL_PRECISION(6))) {
		fprintf(stderr, "roshm-perf: cannot write %s\n", json_path);
		exit(1);
	}
	json_decref(arr);
	printf("\n results written to %s\n", json_path);
}

/* ---- main ---- */

static void usage_to(FILE *f)
{
	fprintf(f,
		"usage: roshm-perf [-s SOCK] [-t TRIALS] [-n ITERS] [--json FILE] [--out DIR] [-q]\n"
		"                  [--remote T/NAME] MODE [ARGS]\n"
		"       roshm-perf --help | --version\n"
		"modes:\n"
		"  all                     local metrics beside the floor (rte_ring pipeline moving the\n"
		"                          same bytes), a cross-core copy, rte_ring ping-pong; old\n"
		"                          yardsticks (pointer ring, memcpy) as reference columns\n"
		"  sweep [MAX]             latency (WRITE, READ, FETCH_ADD, the floor) 2 B .. MAX (8 MiB)\n"
		"                          and bandwidth (WRITE, cross-core copy) 64 B .. MAX\n"
		"  batch                   64 B WRITE rate against batch size 1 .. 256, beside the floor\n"
		"  clients [MAX]           1 .. MAX (256) clients' aggregate 64 B WRITE rate and p99, and\n"
		"                          roshmd's private memory\n"
		"  fair                    a tenant's 64 B WRITE p99 while another floods, over its idle\n"
		"                          p99 (flooder: $ROSHM_FLOOD_TENANT, $ROSHM_FLOOD_TOKEN)\n"
		"  restart ROSHMD CONF     run `ROSHMD -c CONF`, SIGKILL and restart it --kills times under\n"
		"                          a client that keeps writing: the blackout, median\n"
		"  serve NAME SIZE [SLOTS SLOT_SIZE]\n"
		"                          create region NAME (with a transaction log) and hold it until SIGTERM\n"
		"  txn                     transaction commit latency beside plain WRITE latency (--remote)\n"
		"  tcp-server ADDR PORT    raw TCP echo/sink baseline server\n"
		"  tcp --peer ADDR:PORT [--redis ADDR:PORT]\n"
		"                          two-node metrics against --remote, raw TCP and Redis baselines\n"
		"  tcp-sweep --peer ADDR:PORT\n"
		"                          latency and bandwidth against message size over tcp, beside\n"
		"                          raw TCP (--remote)\n"
		"  peers --remote T/NAME,T/NAME...\n"
		"                          64 B WRITE rate and cycles per operation against the number\n"
		"                          of peer nodes written to (one region on each)\n"
		"  verbs --peer ADDR [--ib-dev DEV] [--sweep-iters N]\n"
		"                          roshm over verbs against --remote beside perftest (ib_read_lat,\n"
		"                          ib_atomic_lat) on the same devices; ADDR runs the perftest servers\n"
		"options: -s/--socket roshmd's socket ($ROSHM_SOCK), -t/--trials (1..64, default 5),\n"
		"  -n/--iters per trial (>= 100), --json FILE (merge the metrics into FILE),\n"
		"  --out DIR (write each sweep as DIR/NAME.csv, .json and .gp; perf/plot.sh draws them),\n"
		"  --seconds S (each rate or bandwidth point, default 0.2), --kills N (restart, 10),\n"
		"  --daemon-log FILE (restart: roshmd's output), -q/--quiet (no progress on stderr),\n"
		"  --remote TENANT/NAME (the target region), --spin-us N (client spin before sleeping)\n"
		"The tenant and token are libroshm's: $ROSHM_TENANT and $ROSHM_TOKEN.\n"
		"Each metric is printed beside its baseline measured in the same run, as a ratio\n"
		"(docs/performance.md). Exit 0 done, 1 a run failed, 2 usage.\n");
}

/* EAL's runtime directory of our --file-prefix stays behind, empty (no
 * shared config): take it away on every exit. */
static char eal_dir[4096];

static void eal_rmdir(void)
{
	if (eal_dir[0])
		rmdir(eal_dir);
}

static void usage(void)
{
	usage_to(stderr);
	exit(2);
}

double run_seconds = 0.2;
const char *sock_path;
cpu_set_t perf_cpus;

/* In flight for a streaming size: what the arena holds, at most @want. */
static unsigned depth_for(uint32_t len, unsigned want)
{
	size_t arena;
	uint64_t d;

	roshm_arena(R, &arena);
	d = arena / len;
	if (d > want)
		d = want;
	if (d > R->sq.entries)
		d = R->sq.entries;
	return d ? (unsigned)d : 1;
}

static void run_all(int trials, size_t iters, const char *json)
{
	static const uint32_t bw_sizes[] = { 4096, 65536, 1048576 };
	static const char *const bw_names[] = { "local_write_4k_bw_vs_cross_core_copy",
						"local_write_64k_bw_vs_cross_core_copy",
						"local_write_1m_bw_vs_cross_core_copy" };
	uint64_t *samples = malloc(sizeof(uint64_t) * iters), ops64 = 0, fops64 = 0, ops[3] = { 0 };
	uint64_t fops[3] = { 0 };
	double ring_rtt[64], nop_rtt[64], ring_rate[64], w64_rate[64], f64_rate[64], w64_peak[64];
	double mc[3][64], xc[3][64], wb[3][64], wpeak[3][64];
	struct lat nop_l = { 0 }, ring_l;
	uint64_t *ring_samples = malloc(sizeof(uint64_t) * iters);

	if (!samples || !ring_samples)
		die("samples", -ENOMEM);
	for (int t = 0; t < trials; t++) {
		struct wopts o64 = { .len = 64, .depth = depth_for(64, 128), .fill = true,
				     .seconds = run_seconds };

		progress("all: trial %d/%d", t + 1, trials);
		ring_rtt[t] = ring_pingpong_rtt_ns(iters, ring_samples);
		nop_rtt[t] = op_lat(ROSHM_OP_NOP, 0, iters, samples, &nop_l);
		ring_rate[t] = ring_burst_rate(run_seconds);
		f64_rate[t] = floor_run(&o64, &fops64) / 64;
		w64_rate[t] = write_run(R, H, REGION, &o64, &w64_peak[t], &ops64) / 64;
		for (int k = 0; k < 3; k++) {
			struct wopts o = { .len = bw_sizes[k], .depth = depth_for(bw_sizes[k], 32),
					   .fill = true, .seconds = run_seconds };

			mc[k][t] = memcpy_bw(bw_sizes[k], run_seconds / 2);
			xc[k][t] = floor_run(&o, &fops[k]);
			wb[k][t] = write_run(R, H, REGION, &o, &wpeak[k][t], &ops[k]);
		}
	}
	ring_l = lat_of(ring_samples, iters);
	lat_header("NOP round trip through roshmd (client -> poller -> client), last trial");
	lat_row(0, iters, nop_l);
	lat_header("rte_ring SPSC ping-pong of an 8-byte pointer between the same two cores, last trial");
	lat_row(8, iters, ring_l);
	bw_header("local 64 B WRITE, batched, client writes each payload (median of trials; "
		  "iterations: last trial)");
	bw_row(64, ops64, median(w64_peak, trials) * 1, median(w64_rate, trials) * 64);
	bw_header("the floor: 64 B through an rte_ring pipeline between the same two cores");
	bw_row(64, fops64, median(f64_rate, trials) * 64, median(f64_rate, trials) * 64);
	bw_header("local WRITE streaming, client writes each buffer (median of trials)");
	for (int k = 0; k < 3; k++)
		bw_row(bw_sizes[k], ops[k], median(wpeak[k], trials), median(wb[k], trials));
	bw_header("cross-core copy: the consumer core copies buffers the producer core just wrote");
	for (int k = 0; k < 3; k++)
		bw_row(bw_sizes[k], fops[k], median(xc[k], trials), median(xc[k], trials));
	printf("\n reference: rte_ring burst-32 of 8-byte pointers %.2f Mops/s; memcpy on one core"
	       " 4 KiB %.0f, 64 KiB %.0f, 1 MiB %.0f MiB/s (medians of %d trials)\n",
	       median(ring_rate, trials) / 1e6, median(mc[0], trials) / 1048576.0,
	       median(mc[1], trials) / 1048576.0, median(mc[2], trials) / 1048576.0, trials);

	add_result("nop_rtt_vs_rte_ring", median(nop_rtt, trials), median(ring_rtt, trials), "ns",
		   "<=", 1.1);
	add_result("local_write_64b_rate_vs_floor", median(w64_rate, trials) / 1e6,
		   median(f64_rate, trials) / 1e6, "Mops/s", ">=", 0.8);
	add_reference("rte_ring burst of 8 B pointers", median(ring_rate, trials) / 1e6, true);
	for (int k = 0; k < 3; k++) {
		add_result(bw_names[k], median(wb[k], trials) / 1e9, median(xc[k], trials) / 1e9, "GB/s",
			   ">=", 0.9);
		add_reference("memcpy, one core", median(mc[k], trials) / 1e9, true);
	}
	print_results(json);
	free(samples);
	free(ring_samples);
}

/* Latency and bandwidth against message size, beside the floor and the
 * cross-core copy of the same sizes. */
static void run_sweep(int trials, size_t iters, uint64_t max)
{
	enum { NSZ = 32 };
	uint64_t *samples = malloc(sizeof(uint64_t) * iters);
	struct lat lw[NSZ], lr[NSZ], lf[NSZ], lfa;
	uint64_t szs[NSZ];
	size_t its[NSZ], arena;
	int n = 0;
	struct sweep *sw;

	if (!samples)
		die("samples", -ENOMEM);
	roshm_arena(R, &arena);
	for (uint64_t sz = 2; sz <= max && sz <= REGION && sz <= arena && n < NSZ; sz *= 2)
		szs[n++] = sz;
	for (int i = 0; i < n; i++) {
		size_t it = szs[i] >= (1u << 20) ? iters / 10 : iters;

		progress("sweep latency %llu B: %d/%d sizes", (unsigned long long)szs[i], i + 1, n);
		op_lat(ROSHM_OP_WRITE, (uint32_t)szs[i], it, samples, &lw[i]);
		op_lat(ROSHM_OP_READ, (uint32_t)szs[i], it, samples, &lr[i]);
		floor_lat((uint32_t)szs[i], it, samples);
		lf[i] = lat_of(samples, it);
		its[i] = it;
	}
	op_lat(ROSHM_OP_FETCH_ADD, 8, iters, samples, &lfa);

	/* bandwidth: 64 B .. max by 4x */
	struct { uint64_t sz, ops, fops; double w, f, peak; } bw[NSZ];
	int nb = 0;

	for (uint64_t sz = 64; sz <= max && sz <= REGION && sz <= arena && nb < NSZ; sz *= 4) {
		double w[64], f[64], pk[64];
		struct wopts o = { .len = (uint32_t)sz, .depth = depth_for((uint32_t)sz, sz <= 64 ? 128 : 32),
				   .fill = true, .seconds = run_seconds / 2 };

		for (int t = 0; t < trials; t++) {
			progress("sweep %llu B: %d/%d trials", (unsigned long long)sz, t + 1, trials);
			f[t] = floor_run(&o, &bw[nb].fops);
			w[t] = write_run(R, H, REGION, &o, &pk[t], &bw[nb].ops);
		}
		bw[nb].sz = sz;
		bw[nb].w = median(w, trials);
		bw[nb].f = median(f, trials);
		bw[nb].peak = median(pk, trials);
		nb++;
	}

	lat_header("WRITE completion latency (submit -> CQE: a full round trip)");
	for (int i = 0; i < n; i++)
		lat_row(szs[i], its[i], lw[i]);
	lat_header("READ completion latency (submit -> CQE: a full round trip)");
	for (int i = 0; i < n; i++)
		lat_row(szs[i], its[i], lr[i]);
	lat_header("the floor: descriptor + payload copy + completion through rte_rings, one at a time");
	for (int i = 0; i < n; i++)
		lat_row(szs[i], its[i], lf[i]);
	lat_header("FETCH_ADD completion latency (submit -> CQE: a full round trip)");
	lat_row(8, iters, lfa);
	bw_header("local WRITE streaming, client writes each buffer (medians of trials)");
	for (int i = 0; i < nb; i++)
		bw_row(bw[i].sz, bw[i].ops, bw[i].peak, bw[i].w);
	bw_header("the floor / cross-core copy of the same sizes (medians of trials)");
	for (int i = 0; i < nb; i++)
		bw_row(bw[i].sz, bw[i].fops, bw[i].f, bw[i].f);

	sw = sweep_new("local_lat", "local completion latency against message size (typical = median)",
		       "bytes,write_us,read_us,floor_us,write_p99_us:-,read_p99_us:-,floor_p99_us:-",
		       "message size", "latency [us]", NULL, SW_LOGX | SW_LOGY | SW_BYTES);
	for (int i = 0; i < n; i++)
		sweep_row(sw, (double[]){ (double)szs[i], lw[i].typical, lr[i].typical, lf[i].typical,
					  lw[i].p99, lr[i].p99, lf[i].p99 });
	sweep_done(sw);
	sw = sweep_new("local_bw", "local WRITE bandwidth against message size, beside the floor "
		       "(cross-core copy)",
		       "bytes,write_MiBps,floor_MiBps,write_Mops:-,floor_Mops:-,ratio:-,"
		       "write_cycles_per_op:-,floor_cycles_per_op:-",
		       "message size", "bandwidth [MiB/s]", NULL, SW_LOGX | SW_LOGY | SW_BYTES);
	for (int i = 0; i < nb; i++) {
		double wr = bw[i].w / (double)bw[i].sz, fr = bw[i].f / (double)bw[i].sz;

		sweep_row(sw, (double[]){ (double)bw[i].sz, bw[i].w / 1048576, bw[i].f / 1048576, wr / 1e6,
					  fr / 1e6, bw[i].w / bw[i].f, (double)hz / wr, (double)hz / fr });
	}
	sweep_done(sw);
	free(samples);
}

/* 64 B WRITE message rate against batch size: a batch is prepared,
 * submitted with one roshm_submit and reaped whole before the next. */
static void run_batch(int trials)
{
	struct sweep *sw = sweep_new("batch", "64 B WRITE rate against batch size (lock-step batches)",
				     "batch,roshm_Mops,floor_Mops,roshm_cycles_per_op:y2,"
				     "floor_cycles_per_op:y2,ratio:-",
				     "SQEs per submit (batch)", "message rate [Mops/s]",
				     "cycles per operation", SW_LOGX | SW_LOGY2);

	bw_header("64 B WRITE, lock-step batches: roshm, then the floor (medians of trials)");
	for (unsigned b = 1; b <= 256 && b <= R->sq.entries; b *= 2) {
		double w[64], f[64];
		uint64_t ops = 0, fops = 0;
		struct wopts o = { .len = 64, .depth = b, .batch = b, .lockstep = true, .fill = true,
				   .seconds = run_seconds / 2 };

		for (int t = 0; t < trials; t++) {
			progress("batch %u: %d/%d trials", b, t + 1, trials);
			f[t] = floor_run(&o, &fops) / 64;
			w[t] = write_run(R, H, REGION, &o, NULL, &ops) / 64;
		}
		double wm = median(w, trials), fm = median(f, trials);

		printf(" batch %-4u", b);
		bw_row(64, ops, wm * 64, wm * 64);
		printf(" floor %-4u", b);
		bw_row(64, fops, fm * 64, fm * 64);
		sweep_row(sw, (double[]){ b, wm / 1e6, fm / 1e6, (double)hz / wm, (double)hz / fm, wm / fm });
	}
	sweep_done(sw);
}

/* One-write transaction commit latency next to a plain 64 B WRITE, same path. */
static void run_txn(int trials, size_t iters, const char *json)
{
	uint64_t *samples = malloc(sizeof(uint64_t) * iters);
	double wl[64], tl[64];
	struct lat l = { 0 }, lt = { 0 };
	struct roshm_txn_write tw = { .off = 0, .arena_off = 0, .len = 64 };

	for (int t = 0; t < trials; t++) {
		progress("txn: trial %d/%d", t + 1, trials);
		wl[t] = op_lat(ROSHM_OP_WRITE, 64, iters, samples, &l);
		for (size_t i = 0; i < iters + 100; i++) {
			uint64_t t0 = rte_rdtsc_precise();
			int err = roshm_txn_sync(R, H, &tw, 1, NULL);

			if (err)
				die("transaction", err);
			if (i >= 100)
				samples[i - 100] = rte_rdtsc_precise() - t0;
		}
		lt = lat_of(samples, iters);
		tl[t] = lt.typical * 1000;
	}
	lat_header("64 B WRITE completion latency, last trial");
	lat_row(64, iters, l);
	lat_header("one-write (64 B) transaction commit latency: reserve, stage, commit; last trial");
	lat_row(64, iters, lt);
	add_result("txn_commit_lat_vs_write", median(tl, trials) / 1000, median(wl, trials) / 1000, "us",
		   "<=", 2.0);
	print_results(json);
	free(samples);
}

static volatile sig_atomic_t serve_stop;

static void on_term(int sig)
{
	(void)sig;
	serve_stop = 1;
}

/* Hold a region until SIGTERM or SIGINT; then detach and exit 0. */
static int serve(const char *name, uint64_t size, uint32_t slots, uint32_t slot_size)
{
	struct sigaction sa = { .sa_handler = on_term };
	struct roshm_region_opts o = { .txn_slots = slots, .slot_size = slot_size };
	uint32_t h;
	int err;

	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	err = roshm_region_create(R, name, size, &o, &h);
	if (err)
		die("region create", err);
	printf("serving region %s (%llu bytes) on node %s until SIGTERM\n", name,
	       (unsigned long long)size, R->node);
	fflush(stdout);
	while (!serve_stop)
		pause();
	roshm_close(R);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "trials", required_argument, NULL, 't' },
		{ "iters", required_argument, NULL, 'n' },
		{ "json", required_argument, NULL, 'j' },
		{ "remote", required_argument, NULL, 'r' },
		{ "peer", required_argument, NULL, 'p' },
		{ "redis", required_argument, NULL, 'R' },
		{ "sweep-iters", required_argument, NULL, 'S' },
		{ "ib-dev", required_argument, NULL, 'D' },
		{ "spin-us", required_argument, NULL, 'P' },
		{ "out", required_argument, NULL, 'o' },
		{ "seconds", required_argument, NULL, 'T' },
		{ "kills", required_argument, NULL, 'K' },
		{ "daemon-log", required_argument, NULL, 'L' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct roshm_params p = { 0 };
	const char *json = NULL, *remote = NULL, *peer = NULL, *redis = NULL, *mode, *ibdev = "rxe0";
	const char *daemon_log = "/dev/null";
	size_t sweep_iters = 100;
	long spin_us = 1000;
	int trials = 5, opt, err, kills = 10;
	size_t iters = 20000;
	char prefix[64], lcores[64];
	cpu_set_t set;
	int cpus[2] = { -1, -1 }, nc = 0;

	while ((opt = getopt_long(argc, argv, "s:t:n:j:r:p:R:S:D:P:o:T:K:L:qhV", opts, NULL)) != -1) {
		switch (opt) {
		case 'h':
			usage_to(stdout);
			return 0;
		case 'V':
			printf("roshm-perf %s (ABI %u)\n", ROSHM_VERSION, ROSHM_ABI_VERSION);
			return 0;
		case 's': p.sock_path = optarg; break;
		case 't': trials = atoi(optarg); break;
		case 'n': iters = (size_t)atol(optarg); break;
		case 'j': json = optarg; break;
		case 'r': remote = optarg; break;
		case 'p': peer = optarg; break;
		case 'R': redis = optarg; break;
		case 'S': sweep_iters = (size_t)atol(optarg); break;
		case 'D': ibdev = optarg; break;
		case 'P': spin_us = atol(optarg); break;
		case 'o': out_dir = optarg; break;
		case 'T': run_seconds = atof(optarg); break;
		case 'K': kills = atoi(optarg); break;
		case 'L': daemon_log = optarg; break;
		case 'q': quiet = true; break;
		default: usage();
		}
	}
	if (optind >= argc || trials < 1 || trials > 64 || iters < 100 || !(run_seconds >= 0.001) ||
	    run_seconds > 60 || kills < 1 || kills > 64)
		usage();
	mode = argv[optind];
	if (!strcmp(mode, "tcp-server")) {
		if (optind + 3 != argc)
			usage();
		return net_server(argv[optind + 1], atoi(argv[optind + 2]));
	}

	/* Two lcores on the first two CPUs we may use: main (the client) and
	 * a worker for the baselines' other side. */
	sched_getaffinity(0, sizeof(set), &set);
	perf_cpus = set;
	for (int i = 0; i < CPU_SETSIZE && nc < 2; i++)
		if (CPU_ISSET(i, &set))
			cpus[nc++] = i;
	if (nc < 2)
		cpus[1] = cpus[0];
	snprintf(lcores, sizeof(lcores), "0@%d,1@%d", cpus[0], cpus[1]);
	snprintf(prefix, sizeof(prefix), "roshm-perf-%d", (int)getpid());
	char *eal[] = { argv[0], "--no-huge", "-m", "64", "--no-pci", "--no-shconf", "--file-prefix",
			prefix, "--log-level", "lib.eal:error", "--no-telemetry", "--lcores", lcores, NULL };
	if (rte_eal_init((int)(sizeof(eal) / sizeof(eal[0])) - 1, eal) < 0) {
		fprintf(stderr, "roshm-perf: EAL init failed\n");
		return 1;
	}
	snprintf(eal_dir, sizeof(eal_dir), "%s", rte_eal_get_runtime_dir());
	atexit(eal_rmdir);
	hz = rte_get_tsc_hz();
	worker = rte_get_next_lcore(-1, 1, 0);
	floor_init();

	if (!strcmp(mode, "restart")) {
		if (optind + 3 != argc)
			usage();
		int ret = run_restart(kills, &argv[optind + 1], p.sock_path, daemon_log, json);

		rte_eal_cleanup();
		return ret;
	}
	p.sq_entries = 256;
	p.cq_entries = 512;
	p.arena_size = 16u << 20;
	p.spin_us = (uint32_t)spin_us; /* measure roshm, not the wakeup of a sleeping client */
	sock_path = p.sock_path;
	R = roshm_open(&p, &err);
	if (!R)
		die("attach to roshmd", err);
	floor_huge = R->chan_huge;
	if (!strcmp(mode, "serve")) {
		if (optind + 3 != argc && optind + 5 != argc)
			usage();
		return serve(argv[optind + 1], strtoull(argv[optind + 2], NULL, 0),
			     optind + 5 == argc ? (uint32_t)atoi(argv[optind + 3]) : 0,
			     optind + 5 == argc ? (uint32_t)atoi(argv[optind + 4]) : 0);
	}
	if (!strcmp(mode, "peers")) {
		if (!remote)
			usage();
		run_peers(trials, remote);
		roshm_close(R);
		rte_eal_cleanup();
		return 0;
	}
	if (remote) {
		for (int i = 0; i < 200; i++) {
			err = roshm_region_open(R, remote, &H, &REGION);
			if (err != -ENOENT)
				break;
			usleep(25000);
		}
		if (err)
			die(remote, err);
	} else {
		char name[64];

		REGION = 8u << 20;
		snprintf(name, sizeof(name), "perf-%d", (int)getpid());
		err = roshm_region_create(R, name, REGION, NULL, &H);
		if (err)
			die("region create", err);
	}
	printf(" roshm-perf: node %s, region %s (%llu bytes), %d trials of %zu iterations\n", R->node,
	       remote ? remote : "local", (unsigned long long)REGION, trials, iters);
	fflush(stdout);
	if (!strcmp(mode, "all") && !remote)
		run_all(trials, iters, json);
	else if (!strcmp(mode, "sweep"))
		run_sweep(trials, iters, optind + 1 < argc ? strtoull(argv[optind + 1], NULL, 0) : 8u << 20);
	else if (!strcmp(mode, "batch") && !remote)
		run_batch(trials);
	else if (!strcmp(mode, "clients") && !remote)
		run_clients(trials, optind + 1 < argc ? (unsigned)atoi(argv[optind + 1]) : 256, json);
	else if (!strcmp(mode, "fair") && !remote)
		run_fair(trials, iters, json);
	else if (!strcmp(mode, "txn"))
		run_txn(trials, iters, json);
	else if (!strcmp(mode, "verbs") && remote && peer)
		run_verbs(trials, iters, sweep_iters, peer, ibdev, json);
	else if ((!strcmp(mode, "tcp") || !strcmp(mode, "tcp-sweep")) && remote && peer) {
		/* Two roshmd pollers share this machine with us: let the
		 * scheduler place the client, as it would a pod's. */
		sched_setaffinity(0, sizeof(set), &set);
		if (!strcmp(mode, "tcp"))
			run_tcp(trials, iters, peer, redis, json);
		else
			run_tcp_sweep(trials, iters, peer);
	}
	else
		usage();
	roshm_close(R);
	rte_eal_cleanup();
	return 0;
}
