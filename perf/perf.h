/* SPDX-License-Identifier: MIT */
/* roshm-perf internals shared by the local and the network benchmarks. */
#ifndef ROSHM_PERF_H
#define ROSHM_PERF_H

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

struct lat lat_of(uint64_t *cycles, size_t n);
double median(double *v, int n);
void lat_header(const char *what);
void lat_row(uint64_t bytes, size_t iters, struct lat l);
void bw_header(const char *what);
void bw_row(uint64_t bytes, uint64_t iters, double peak, double avg);
void die(const char *what, int err);
void reap_one(void);
/* Completion latency of one operation kind, median in ns; *out gets the table row. */
double op_lat(uint8_t op, uint32_t len, size_t iters, uint64_t *samples, struct lat *out);
/* Streaming WRITEs of @len with @depth in flight: bytes/s (and the 10 ms peak). */
double write_bw(uint32_t len, unsigned depth, double seconds, double *peak);
void add_result(const char *metric, double value, double baseline, const char *unit,
		const char *cmp, double target);
/* Print the table; with @json_path, merge into that JSON array file. */
void print_results(const char *json_path);

/* net.c */
int net_server(const char *addr, int port);
void run_tcp(int trials, size_t iters, const char *peer, const char *redis, const char *json);

/* verbs.c: beside perftest on the same devices (the peer runs its servers) */
void run_verbs(int trials, size_t iters, size_t sweep_iters, const char *peer, const char *dev,
	       const char *json);

#endif
