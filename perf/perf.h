/* SPDX-License-Identifier: MIT */
/* roshm-perf internals shared by the local and the network benchmarks. */
#ifndef ROSHM_PERF_H
#define ROSHM_PERF_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "roshm.h"

struct lat {
	double min, max, typical, avg, stdev, p99, p999;
};

extern uint64_t hz;              /* TSC ticks per second */
extern struct roshm *R;          /* our channel */
extern uint32_t H;               /* handle of the region under test */
extern uint64_t REGION;          /* its size */
extern unsigned worker;          /* the second lcore (the baselines' other side) */
extern const char *out_dir;      /* --out: sweeps go there as CSV, JSON and a gnuplot script */
extern bool quiet;               /* -q: no progress on stderr */
extern double run_seconds;       /* --seconds: each rate or bandwidth point */
extern const char *sock_path;    /* -s: roshmd's socket (NULL: libroshm's default) */
extern cpu_set_t perf_cpus;      /* the CPUs we may use, before the EAL pinned us */

struct lat lat_of(uint64_t *cycles, size_t n);
double median(double *v, int n);
double us_of(uint64_t cycles);
void lat_header(const char *what);
void lat_row(uint64_t bytes, size_t iters, struct lat l);
void bw_header(const char *what);
void bw_row(uint64_t bytes, uint64_t iters, double peak, double avg);
void die(const char *what, int err) __attribute__((noreturn));
void reap_one(void);
/* Progress of a long run, one line on stderr ("sweep 4096 B: 3/7 trials"). */
void progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Completion latency of one operation kind, median in ns; *out gets the table row. */
double op_lat(uint8_t op, uint32_t len, size_t iters, uint64_t *samples, struct lat *out);

/*
 * Streaming WRITEs of @len on channel @r to region @h, @depth in flight,
 * submitted @batch at a time (0: whenever there is room). With @fill the
 * client writes each payload into its own arena slot just before it
 * submits it (what an application does; the floor's producer does the
 * same); without, every WRITE sends arena offset 0 as it stands.
 * @lockstep: submit a batch, reap all of it, then the next (message rate
 * against batch size). Returns bytes/s; *peak: the best 10 ms window;
 * *ops (if set): operations completed.
 */
struct wopts {
	uint32_t len;
	unsigned depth, batch;
	bool fill, lockstep;
	double seconds;
	const uint32_t *hs;   /* with nh: WRITE i goes to region hs[i % nh] instead of @h */
	unsigned nh;
};
double write_run(struct roshm *r, uint32_t h, uint64_t region, const struct wopts *o, double *peak,
		 uint64_t *ops);
/* Streaming WRITEs of @len with @depth in flight: bytes/s (and the 10 ms peak). */
double write_bw(uint32_t len, unsigned depth, double seconds, double *peak);

/* ---- results ---- */
/* A ratio metric: @value over @baseline (same run), compared with @target. */
void add_result(const char *metric, double value, double baseline, const char *unit,
		const char *cmp, double target);
/* An absolute metric (no baseline of the same run): @value against @target. */
void add_absolute(const char *metric, double value, const char *unit, const char *cmp,
		  double target);
/* A reference column for the metric added last: an older or published
 * yardstick, @value in the metric's unit ("measured" or not). */
void add_reference(const char *what, double value, bool measured);
/* Print the table; with @json_path, merge into that JSON array file. */
void print_results(const char *json_path);

/* ---- sweeps (out.c): CSV + JSON + gnuplot script under out_dir ---- */
#define SWEEP_COLS 16
#define SW_LOGX 1u
#define SW_LOGY 2u
#define SW_LOGY2 8u
#define SW_BYTES 4u   /* x is a size in bytes: 1KiB, 1MiB on the axis */
struct sweep;
/*
 * @cols: comma-separated column names, the first is x. A name ending in
 * ":y2" is drawn against the right axis, one ending in ":-" is written but
 * not drawn. @xlabel/@ylabel/@y2label label the plot.
 */
struct sweep *sweep_new(const char *name, const char *title, const char *cols, const char *xlabel,
			const char *ylabel, const char *y2label, unsigned flags);
void sweep_row(struct sweep *s, const double *v);
/* Write NAME.csv, NAME.json and NAME.gp into out_dir (nothing without
 * --out), then free @s. */
void sweep_done(struct sweep *s);

/* Log-scaled histogram of cycles: 3 % buckets, any number of samples. */
#define HIST_BUCKETS 1920
struct hist {
	uint64_t n;
	uint64_t b[HIST_BUCKETS];
};
static inline unsigned hist_idx(uint64_t v)
{
	if (v < 64)
		return (unsigned)v;
	unsigned e = 63u - (unsigned)__builtin_clzll(v);

	return 64 + (e - 6) * 32 + (unsigned)((v >> (e - 5)) & 31);
}
static inline void hist_add(struct hist *h, uint64_t v)
{
	h->b[hist_idx(v)]++;
	h->n++;
}
/* The @q quantile (0..1) in microseconds. */
double hist_us(const struct hist *h, double q);

/* ---- baselines on the two cores (floor.c) ---- */
extern bool floor_huge;          /* the floor's buffers on 2 MiB pages (as roshm's channel) */
void floor_init(void);
/*
 * The floor of a shared-memory service between our two cores: the main
 * lcore (the client's core) writes each payload into a buffer slot and
 * sends a 64-byte descriptor through an rte_ring; the worker lcore (the
 * poller's core) copies the payload out to a destination buffer and sends
 * a 32-byte completion back through another ring. Same options as
 * write_run (@fill always on). Returns bytes/s, *ops completed.
 */
double floor_run(const struct wopts *o, uint64_t *ops);
/* The same pipeline one operation at a time: completion latency samples. */
void floor_lat(uint32_t len, size_t iters, uint64_t *samples);
/* References: an 8-byte-pointer rte_ring ping-pong (RTT in ns), burst-32
 * one-way pointer rate (per s), an L1-hot memcpy on one core (bytes/s). */
double ring_pingpong_rtt_ns(size_t iters, uint64_t *samples);
double ring_burst_rate(double seconds);
double memcpy_bw(size_t size, double seconds);

/* ---- modes ---- */
void run_clients(int trials, unsigned max_clients, const char *json);
void run_fair(int trials, size_t iters, const char *json);
int run_restart(int kills, char **roshmd_argv, const char *sock, const char *log,
		const char *json);
/* roshmd's pid, from the control socket's peer credentials; -1 unknown. */
int roshmd_pid(struct roshm *r);
/* roshmd's private memory in MiB without the clients' channels and regions
 * (docs/performance.md, "roshmd_rss"); < 0 when /proc is not readable. */
double roshmd_private_mib(int pid, double *shared_mib);

/* net.c */
int net_server(const char *addr, int port);
void run_tcp(int trials, size_t iters, const char *peer, const char *redis, const char *json);
void run_tcp_sweep(int trials, size_t iters, const char *peer);
/* 64 B WRITE rate and cycles per operation against the number of peer
 * nodes written to (@list: comma-separated TENANT/NAME, one per node). */
void run_peers(int trials, const char *list);

/* verbs.c: beside perftest on the same devices (the peer runs its servers) */
void run_verbs(int trials, size_t iters, size_t sweep_iters, const char *peer, const char *dev,
	       const char *json);

#endif
