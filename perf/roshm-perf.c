// SPDX-License-Identifier: MIT
/*
 * roshm-perf: measures roshm and, in the same run, the baselines DESIGN
 * section 9 compares it to. Trials alternate baseline and roshm; each figure
 * is the median of its trials. Tables use perftest's columns.
 *
 *   roshm-perf [-s SOCK] [-t TRIALS] [--json FILE] all     every metric of this node
 *   roshm-perf [-s SOCK] sweep                             WRITE/READ latency, 2 B .. 8 MiB
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
static unsigned worker;

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

/* ---- baselines: rte_ring ping-pong and burst, memcpy ---- */

static struct rte_ring *ring_a, *ring_b;
static volatile int worker_stop;

static int pong_worker(void *arg)
{
	void *obj;

	(void)arg;
	while (!worker_stop)
		if (rte_ring_sc_dequeue(ring_a, &obj) == 0)
			while (rte_ring_sp_enqueue(ring_b, obj))
				;
	return 0;
}

static double ring_pingpong_rtt_ns(size_t iters, uint64_t *samples)
{
	void *obj;

	worker_stop = 0;
	rte_eal_remote_launch(pong_worker, NULL, worker);
	for (size_t i = 0; i < iters + 1000; i++) {
		uint64_t t0 = rte_rdtsc_precise();

		rte_ring_sp_enqueue(ring_a, (void *)(uintptr_t)(i + 1));
		while (rte_ring_sc_dequeue(ring_b, &obj))
			;
		if (i >= 1000)
			samples[i - 1000] = rte_rdtsc_precise() - t0;
	}
	worker_stop = 1;
	rte_eal_wait_lcore(worker);
	struct lat l = lat_of(samples, iters);

	return l.typical * 1000;
}

static volatile uint64_t burst_consumed;

static int burst_consumer(void *arg)
{
	void *objs[32];
	uint64_t n = 0;

	(void)arg;
	while (!worker_stop)
		n += rte_ring_sc_dequeue_burst(ring_a, objs, 32, NULL);
	burst_consumed = n;
	return 0;
}

static double ring_burst_rate(double seconds)
{
	void *objs[32];
	uint64_t end, produced = 0, t0;
	void *drain;

	for (int i = 0; i < 32; i++)
		objs[i] = (void *)(uintptr_t)(i + 1);
	worker_stop = 0;
	rte_eal_remote_launch(burst_consumer, NULL, worker);
	t0 = rte_rdtsc();
	end = t0 + (uint64_t)(seconds * (double)hz);
	while (rte_rdtsc() < end)
		produced += rte_ring_sp_enqueue_burst(ring_a, objs, 32, NULL);
	uint64_t t1 = rte_rdtsc();

	worker_stop = 1;
	rte_eal_wait_lcore(worker);
	while (rte_ring_sc_dequeue(ring_a, &drain) == 0)
		;
	return (double)produced / ((double)(t1 - t0) / (double)hz);
}

static double memcpy_bw(uint8_t *dst, const uint8_t *src, size_t size, double seconds)
{
	uint64_t t0 = rte_rdtsc(), end = t0 + (uint64_t)(seconds * (double)hz), n = 0;

	while (rte_rdtsc() < end) {
		memcpy(dst, src, size);
		__asm__ volatile("" ::: "memory");
		n++;
	}
	return (double)n * (double)size / ((double)(rte_rdtsc() - t0) / (double)hz);
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

/* Streaming WRITEs of @len, @depth in flight; returns bytes/s and peak. */
double write_bw(uint32_t len, unsigned depth, double seconds, double *peak)
{
	uint64_t t0 = rte_rdtsc(), end = t0 + (uint64_t)(seconds * (double)hz);
	uint64_t done = 0, inflight = 0, win_t = t0, win_done = 0;
	struct roshm_cqe *cqes[64];

	*peak = 0;
	while (rte_rdtsc() < end) {
		struct roshm_sqe *s;

		while (inflight < depth && (s = roshm_get_sqe(R))) {
			roshm_prep_write(s, H, 0, 0, len);
			inflight++;
		}
		roshm_submit(R);
		unsigned got = roshm_peek_batch_cqe(R, cqes, 64);

		for (unsigned i = 0; i < got; i++)
			if (cqes[i]->status)
				die("write", cqes[i]->status);
		roshm_cq_advance(R, got);
		inflight -= got;
		done += got;
		uint64_t now = rte_rdtsc();

		if (now - win_t > hz / 100) { /* 10 ms windows for the peak */
			double bw = (double)(done - win_done) * len / ((double)(now - win_t) / (double)hz);

			if (bw > *peak)
				*peak = bw;
			win_t = now;
			win_done = done;
		}
	}
	while (inflight) {
		reap_one();
		inflight--;
	}
	return (double)done * len / ((double)(rte_rdtsc() - t0) / (double)hz);
}

/* ---- results ---- */

struct result {
	const char *metric;
	double value, baseline, ratio;
	const char *unit;
	const char *cmp;  /* "<=" or ">=" */
	double target;
};

static struct result results[32];
static int nresults;

void add_result(const char *metric, double value, double baseline, const char *unit,
		       const char *cmp, double target)
{
	struct result *r = &results[nresults++];

	r->metric = metric;
	r->value = value;
	r->baseline = baseline;
	r->unit = unit;
	r->ratio = value / baseline;
	r->cmp = cmp;
	r->target = target;
}

static bool met(const struct result *r)
{
	return r->cmp[0] == '<' ? r->ratio <= r->target : r->ratio >= r->target;
}

void print_results(const char *json_path)
{
	json_error_t jerr;
	json_t *arr = NULL;

	printf("\n %-42s %14s %14s %-8s %8s %8s  %s\n", "metric", "roshm", "baseline", "unit", "ratio",
	       "target", "met");
	for (int i = 0; i < nresults; i++) {
		const struct result *r = &results[i];

		printf(" %-42s %14.3f %14.3f %-8s %8.3f %5s %-4.2f %s\n", r->metric, r->value,
		       r->baseline, r->unit, r->ratio, r->cmp, r->target, met(r) ? "yes" : "NO");
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
		json_object_set_new(o, "baseline", json_real(r->baseline));
		json_object_set_new(o, "ratio", json_real(r->ratio));
		json_object_set_new(o, "target", json_string(target));
		json_object_set_new(o, "met", json_boolean(met(r)));
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
		"usage: roshm-perf [-s SOCK] [-t TRIALS] [-n ITERS] [--json FILE] [--remote T/NAME] MODE\n"
		"       roshm-perf --help | --version\n"
		"modes:\n"
		"  all                     local-path metrics with rte_ring and memcpy baselines\n"
		"  sweep [MAX]             WRITE/READ/FETCH_ADD latency, 2 B .. MAX (8 MiB)\n"
		"  serve NAME SIZE [SLOTS SLOT_SIZE]\n"
		"                          create region NAME (with a transaction log) and hold it until SIGTERM\n"
		"  txn                     transaction commit latency beside plain WRITE latency (--remote)\n"
		"  tcp-server ADDR PORT    raw TCP echo/sink baseline server\n"
		"  tcp --peer ADDR:PORT [--redis ADDR:PORT]\n"
		"                          two-node metrics against --remote, raw TCP and Redis baselines\n"
		"  verbs --peer ADDR [--ib-dev DEV] [--sweep-iters N]\n"
		"                          roshm over verbs against --remote beside perftest (ib_read_lat,\n"
		"                          ib_atomic_lat) on the same devices; ADDR runs the perftest servers\n"
		"options: -s/--socket roshmd's socket ($ROSHM_SOCK), -t/--trials (1..64, default 5),\n"
		"  -n/--iters per trial (>= 100), --json FILE (merge the metrics into FILE),\n"
		"  --remote TENANT/NAME (the target region), --spin-us N (client spin before sleeping)\n"
		"Each metric is printed beside its baseline measured in the same run, as a ratio\n"
		"(docs/performance.md). Exit 0 done, 1 a run failed, 2 usage.\n");
}

static void usage(void)
{
	usage_to(stderr);
	exit(2);
}

static void run_all(int trials, size_t iters, const char *json)
{
	static const uint32_t bw_sizes[] = { 4096, 65536, 1048576 };
	static const char *const bw_names[] = { "local_write_4k_bw_vs_memcpy",
						"local_write_64k_bw_vs_memcpy",
						"local_write_1m_bw_vs_memcpy" };
	uint64_t *samples = malloc(sizeof(uint64_t) * iters);
	double ring_rtt[64], nop_rtt[64], ring_rate[64], w64_rate[64];
	double mc[3][64], wb[3][64], wpeak[3][64];
	uint8_t *src = aligned_alloc(4096, 1 << 20), *dst = aligned_alloc(4096, 1 << 20);
	struct lat nop_l = { 0 };

	memset(src, 1, 1 << 20);
	memset(dst, 2, 1 << 20);
	for (int t = 0; t < trials; t++) {
		ring_rtt[t] = ring_pingpong_rtt_ns(iters, samples);
		nop_rtt[t] = op_lat(ROSHM_OP_NOP, 0, iters, samples, &nop_l);
		ring_rate[t] = ring_burst_rate(0.2);
		double peak;

		w64_rate[t] = write_bw(64, 128, 0.2, &peak) / 64;
		for (int k = 0; k < 3; k++) {
			mc[k][t] = memcpy_bw(dst, src, bw_sizes[k], 0.1);
			wb[k][t] = write_bw(bw_sizes[k], 32, 0.1, &wpeak[k][t]);
		}
	}
	lat_header("NOP round trip through roshmd (client -> poller -> client), last trial");
	lat_row(0, iters, nop_l);
	bw_header("local WRITE streaming (median of trials), beside memcpy of the same size");
	for (int k = 0; k < 3; k++) {
		bw_row(bw_sizes[k], 0, median(wpeak[k], trials), median(wb[k], trials));
		printf("   memcpy %u B: %.2f MiB/s\n", bw_sizes[k], median(mc[k], trials) / 1048576.0);
	}
	printf("\n rte_ring SPSC ping-pong RTT %.1f ns, NOP RTT %.1f ns; rte_ring burst-32 one-way %.2f Mops/s,"
	       " 64 B WRITE batched %.2f Mops/s (medians of %d trials)\n",
	       median(ring_rtt, trials), median(nop_rtt, trials), median(ring_rate, trials) / 1e6,
	       median(w64_rate, trials) / 1e6, trials);

	add_result("nop_rtt_vs_rte_ring", median(nop_rtt, trials), median(ring_rtt, trials), "ns",
		   "<=", 1.2);
	for (int k = 0; k < 3; k++)
		add_result(bw_names[k], median(wb[k], trials) / 1e9, median(mc[k], trials) / 1e9, "GB/s",
			   ">=", 0.8);
	add_result("local_write_64b_rate_vs_rte_ring_burst", median(w64_rate, trials) / 1e6,
		   median(ring_rate, trials) / 1e6, "Mops/s", ">=", 0.3);
	print_results(json);
	free(samples);
	free(src);
	free(dst);
}

static void run_sweep(size_t iters, uint64_t max)
{
	uint64_t *samples = malloc(sizeof(uint64_t) * iters);
	size_t arena;
	struct lat l;

	roshm_arena(R, &arena);
	for (int op = ROSHM_OP_WRITE; op <= ROSHM_OP_READ; op++) {
		lat_header(op == ROSHM_OP_WRITE ? "WRITE completion latency (submit -> CQE: a full round trip)"
						: "READ completion latency (submit -> CQE: a full round trip)");
		for (uint64_t sz = 2; sz <= max && sz <= REGION && sz <= arena; sz *= 2) {
			size_t it = sz >= (1u << 20) ? iters / 10 : iters;

			op_lat((uint8_t)op, (uint32_t)sz, it, samples, &l);
			lat_row(sz, it, l);
		}
	}
	lat_header("FETCH_ADD completion latency (submit -> CQE: a full round trip)");
	op_lat(ROSHM_OP_FETCH_ADD, 8, iters, samples, &l);
	lat_row(8, iters, l);
	free(samples);
}

/* One-write transaction commit latency next to a plain 64 B WRITE, same path. */
static void run_txn(int trials, size_t iters, const char *json)
{
	uint64_t *samples = malloc(sizeof(uint64_t) * iters);
	double wl[64], tl[64];
	struct lat l = { 0 }, lt = { 0 };
	struct roshm_txn_write tw = { .off = 0, .arena_off = 0, .len = 64 };

	for (int t = 0; t < trials; t++) {
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
		   "<=", 3.0);
	print_results(json);
	free(samples);
}

static int serve(const char *name, uint64_t size, uint32_t slots, uint32_t slot_size)
{
	struct roshm_region_opts o = { .txn_slots = slots, .slot_size = slot_size };
	uint32_t h;
	int err;

	err = roshm_region_create(R, name, size, &o, &h);
	if (err)
		die("region create", err);
	printf("serving region %s (%llu bytes) on node %s until SIGTERM\n", name,
	       (unsigned long long)size, R->node);
	fflush(stdout);
	for (;;)
		pause();
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
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct roshm_params p = { 0 };
	const char *json = NULL, *remote = NULL, *peer = NULL, *redis = NULL, *mode, *ibdev = "rxe0";
	size_t sweep_iters = 100;
	long spin_us = 1000;
	int trials = 5, opt, err;
	size_t iters = 20000;
	char prefix[64], lcores[64];
	cpu_set_t set;
	int cpus[2] = { -1, -1 }, nc = 0;

	while ((opt = getopt_long(argc, argv, "s:t:n:j:r:p:R:S:D:P:hV", opts, NULL)) != -1) {
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
		default: usage();
		}
	}
	if (optind >= argc || trials < 1 || trials > 64 || iters < 100)
		usage();
	mode = argv[optind];
	if (!strcmp(mode, "tcp-server")) {
		if (optind + 3 != argc)
			usage();
		return net_server(argv[optind + 1], atoi(argv[optind + 2]));
	}

	/* Two lcores on the first two CPUs we may use: main (the client) and
	 * a worker for the rte_ring baselines' other side. */
	sched_getaffinity(0, sizeof(set), &set);
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
	hz = rte_get_tsc_hz();
	worker = rte_get_next_lcore(-1, 1, 0);
	ring_a = rte_ring_create("perf_a", 1024, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
	ring_b = rte_ring_create("perf_b", 1024, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
	if (!ring_a || !ring_b || worker >= RTE_MAX_LCORE) {
		fprintf(stderr, "roshm-perf: rings or worker lcore unavailable\n");
		return 1;
	}

	p.sq_entries = 256;
	p.cq_entries = 512;
	p.arena_size = 16u << 20;
	p.spin_us = (uint32_t)spin_us; /* measure roshm, not the wakeup of a sleeping client */
	R = roshm_open(&p, &err);
	if (!R)
		die("attach to roshmd", err);
	if (!strcmp(mode, "serve")) {
		if (optind + 3 != argc && optind + 5 != argc)
			usage();
		return serve(argv[optind + 1], strtoull(argv[optind + 2], NULL, 0),
			     optind + 5 == argc ? (uint32_t)atoi(argv[optind + 3]) : 0,
			     optind + 5 == argc ? (uint32_t)atoi(argv[optind + 4]) : 0);
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
	if (!strcmp(mode, "all") && !remote)
		run_all(trials, iters, json);
	else if (!strcmp(mode, "sweep"))
		run_sweep(iters, optind + 1 < argc ? strtoull(argv[optind + 1], NULL, 0) : 8u << 20);
	else if (!strcmp(mode, "txn"))
		run_txn(trials, iters, json);
	else if (!strcmp(mode, "verbs") && remote && peer)
		run_verbs(trials, iters, sweep_iters, peer, ibdev, json);
	else if (!strcmp(mode, "tcp") && remote && peer) {
		/* Two roshmd pollers share this machine with us: let the
		 * scheduler place the client, as it would a pod's. */
		sched_setaffinity(0, sizeof(set), &set);
		run_tcp(trials, iters, peer, redis, json);
	}
	else
		usage();
	roshm_close(R);
	rte_eal_cleanup();
	return 0;
}
