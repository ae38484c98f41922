// SPDX-License-Identifier: MIT
/*
 * Two-node benchmarks over the tcp transport, and their baselines measured
 * in the same run over the same path: a raw TCP ping-pong, a raw TCP stream
 * (against `roshm-perf tcp-server` on the other node), and redis-server SET
 * through redis-benchmark with the same value size and pipelining depth.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <rte_cycles.h>

#include "perf.h"

#define PINGPONG_SIZE 64
#define STREAM_CHUNK 65536
#define PIPELINE 16
#define MAX_FRAME (1u << 20)   /* the largest echo frame the server takes (tcp's max_msg) */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int io_all(int fd, void *buf, size_t len, bool wr)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = wr ? write(fd, (char *)buf + done, len - done) : read(fd, (char *)buf + done, len - done);

		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			return -1;
		}
		done += (size_t)n;
	}
	return 0;
}

/* ---- server: 'E' echo fixed-size frames, 'S' sink and report the count ---- */

static void *serve_conn(void *arg)
{
	int fd = (int)(intptr_t)arg, one = 1;
	uint8_t mode, *buf = malloc(MAX_FRAME);
	uint32_t size;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (!buf || io_all(fd, &mode, 1, false) || io_all(fd, &size, 4, false) || size > MAX_FRAME)
		goto out;
	if (mode == 'E') {
		while (!io_all(fd, buf, size, false) && !io_all(fd, buf, size, true))
			;
	} else if (mode == 'S') {
		uint64_t total = 0;
		ssize_t n;

		while ((n = read(fd, buf, MAX_FRAME)) > 0)
			total += (uint64_t)n;
		io_all(fd, &total, sizeof(total), true);
	}
out:
	free(buf);
	close(fd);
	return NULL;
}

int net_server(const char *addr, int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 16) < 0) {
		perror("roshm-perf tcp-server");
		return 1;
	}
	printf("tcp-server listening on %s:%d\n", addr, port);
	fflush(stdout);
	for (;;) {
		int c = accept(fd, NULL, NULL);
		pthread_t t;

		if (c < 0)
			continue;
		if (pthread_create(&t, NULL, serve_conn, (void *)(intptr_t)c) == 0)
			pthread_detach(t);
		else
			close(c);
	}
}

static int dial(const char *peer, uint8_t mode, uint32_t size)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	char host[64];
	const char *colon = strrchr(peer, ':');
	int fd, one = 1;

	if (!colon || (size_t)(colon - peer) >= sizeof(host))
		die("peer address", -EINVAL);
	memcpy(host, peer, (size_t)(colon - peer));
	host[colon - peer] = 0;
	sa.sin_port = htons((uint16_t)atoi(colon + 1));
	inet_pton(AF_INET, host, &sa.sin_addr);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die("connect to the baseline server", -errno);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (io_all(fd, &mode, 1, true) || io_all(fd, &size, 4, true))
		die("baseline server", -EIO);
	return fd;
}

/* The client side of the baseline busy-polls, as roshm_wait_cqe spins before it sleeps. */
static int spin_read(int fd, void *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = recv(fd, (char *)buf + done, len - done, MSG_DONTWAIT);

		if (n > 0)
			done += (size_t)n;
		else if (n == 0 || (errno != EAGAIN && errno != EINTR))
			return -1;
	}
	return 0;
}

/* Raw TCP ping-pong of @size bytes each way; *l (if set) gets the table row. */
static double tcp_pingpong_ns(const char *peer, uint32_t size, size_t iters, uint64_t *samples,
			      struct lat *l)
{
	uint8_t *buf = calloc(1, size);
	int fd = dial(peer, 'E', size);
	struct lat r;

	if (!buf)
		die("ping-pong", -ENOMEM);
	for (size_t i = 0; i < iters + 100; i++) {
		uint64_t t0 = rte_rdtsc_precise();

		if (io_all(fd, buf, size, true) || spin_read(fd, buf, size))
			die("ping-pong", -EIO);
		if (i >= 100)
			samples[i - 100] = rte_rdtsc_precise() - t0;
	}
	close(fd);
	free(buf);
	r = lat_of(samples, iters);
	if (l)
		*l = r;
	return r.typical * 1000;
}

/* One raw TCP stream written @chunk bytes at a time: bytes/s the sink counted. */
static double tcp_stream_bps(const char *peer, uint32_t chunk_len, double seconds)
{
	uint8_t *chunk = calloc(1, chunk_len);
	int fd = dial(peer, 'S', 0);
	double t0 = now_s();
	uint64_t total = 0;

	if (!chunk)
		die("stream", -ENOMEM);
	do {
		if (io_all(fd, chunk, chunk_len, true))
			die("stream", -EIO);
	} while (now_s() - t0 < seconds);
	free(chunk);
	shutdown(fd, SHUT_WR);
	if (io_all(fd, &total, sizeof(total), false))
		die("stream count", -EIO);
	double el = now_s() - t0;

	close(fd);
	return (double)total / el;
}

/* SET requests/s from redis-benchmark: one connection, PIPELINE deep, 4 KiB values. */
static double redis_set_rate(const char *redis, int n)
{
	char host[64], cmd[256], line[512];
	const char *colon = strrchr(redis, ':');
	double rate = 0;
	FILE *f;

	if (!colon || (size_t)(colon - redis) >= sizeof(host))
		die("redis address", -EINVAL);
	memcpy(host, redis, (size_t)(colon - redis));
	host[colon - redis] = 0;
	snprintf(cmd, sizeof(cmd), "redis-benchmark -h %s -p %s -c 1 -P %d -d 4096 -t set -n %d -q 2>&1",
		 host, colon + 1, PIPELINE, n);
	f = popen(cmd, "r");
	if (!f)
		die("redis-benchmark", -errno);
	while (fgets(line, sizeof(line), f)) {
		/* "SET: 12345.67 requests per second, p50=..." (the last \r-separated part) */
		char *p = strrchr(line, '\r');

		p = p ? p + 1 : line;
		if (!strncmp(p, "SET: ", 5))
			rate = atof(p + 5);
	}
	pclose(f);
	if (rate <= 0)
		die("redis-benchmark gave no SET rate (is redis-server running?)", -EIO);
	return rate;
}

void run_tcp(int trials, size_t iters, const char *peer, const char *redis, const char *json)
{
	uint64_t *samples = malloc(sizeof(uint64_t) * iters);
	double pp[64], wl[64], st[64], ws[64], rs[64], w4[64], peak;
	struct lat l = { 0 };

	for (int t = 0; t < trials; t++) {
		progress("tcp: trial %d/%d", t + 1, trials);
		pp[t] = tcp_pingpong_ns(peer, PINGPONG_SIZE, iters, samples, NULL);
		wl[t] = op_lat(ROSHM_OP_WRITE, 64, iters, samples, &l);
		st[t] = tcp_stream_bps(peer, STREAM_CHUNK, 0.3);
		ws[t] = write_bw(STREAM_CHUNK, PIPELINE, 0.3, &peak);
		if (redis)
			rs[t] = redis_set_rate(redis, 20000);
		w4[t] = write_bw(4096, PIPELINE, 0.3, &peak) / 4096;
	}
	lat_header("64 B WRITE completion latency over tcp (full round trip), last trial");
	lat_row(64, iters, l);
	printf("\n raw TCP ping-pong %d B RTT %.1f us; roshm WRITE 64 B %.1f us\n", PINGPONG_SIZE,
	       median(pp, trials) / 1000, median(wl, trials) / 1000);
	printf(" raw TCP stream %.2f MiB/s; roshm 64 KiB WRITE stream (depth %d) %.2f MiB/s\n",
	       median(st, trials) / 1048576, PIPELINE, median(ws, trials) / 1048576);
	printf(" roshm 4 KiB WRITE (depth %d) %.0f ops/s", PIPELINE, median(w4, trials));
	if (redis)
		printf("; redis SET 4 KiB (pipeline %d, 1 connection) %.0f req/s", PIPELINE,
		       median(rs, trials));
	printf(" (medians of %d trials)\n", trials);
	add_result("tcp_write_64b_lat_vs_tcp_pingpong", median(wl, trials) / 1000,
		   median(pp, trials) / 1000, "us", "<=", 1.1);
	add_result("tcp_stream_64k_vs_tcp_stream", median(ws, trials) / 1e9, median(st, trials) / 1e9,
		   "GB/s", ">=", 0.9);
	if (redis)
		add_result("tcp_4k_vs_redis_set", median(w4, trials) / 1e3, median(rs, trials) / 1e3,
			   "kops/s", ">=", 3.0);
	print_results(json);
	free(samples);
}

/*
 * Latency and bandwidth against message size over the tcp transport, each
 * beside raw TCP on the same path: a ping-pong of the same size, and one
 * stream written in chunks of the same size (roshm: WRITEs at depth 16).
 */
void run_tcp_sweep(int trials, size_t iters, const char *peer)
{
	enum { NSZ = 12 };
	uint64_t *samples = malloc(sizeof(uint64_t) * iters);
	struct lat lw[NSZ], lt[NSZ];
	double bw[NSZ], tb[NSZ], pk[NSZ];
	uint64_t szs[NSZ];
	size_t its[NSZ], arena;
	int n = 0;

	if (!samples)
		die("samples", -ENOMEM);
	roshm_arena(R, &arena);
	for (uint64_t sz = 64; sz <= MAX_FRAME && sz <= REGION && sz * PIPELINE <= arena && n < NSZ;
	     sz *= 4)
		szs[n++] = sz;
	for (int i = 0; i < n; i++) {
		size_t it = szs[i] >= 65536 ? iters / 10 : iters;
		double w[64], tt[64], b[64], s[64], p[64];

		for (int t = 0; t < trials; t++) {
			progress("tcp sweep %llu B: %d/%d trials", (unsigned long long)szs[i], t + 1, trials);
			tt[t] = tcp_pingpong_ns(peer, (uint32_t)szs[i], it, samples, &lt[i]);
			w[t] = op_lat(ROSHM_OP_WRITE, (uint32_t)szs[i], it, samples, &lw[i]);
			s[t] = tcp_stream_bps(peer, (uint32_t)szs[i], run_seconds);
			b[t] = write_bw((uint32_t)szs[i], PIPELINE, run_seconds, &p[t]);
		}
		/* the rows of the median trial's figures; the last trial's spread */
		lw[i].typical = median(w, trials) / 1000;
		lt[i].typical = median(tt, trials) / 1000;
		bw[i] = median(b, trials);
		tb[i] = median(s, trials);
		pk[i] = median(p, trials);
		its[i] = it;
	}
	lat_header("roshm WRITE over tcp, completion latency (t_typical: median of trials)");
	for (int i = 0; i < n; i++)
		lat_row(szs[i], its[i], lw[i]);
	lat_header("raw TCP ping-pong of the same size, same path (t_typical: median of trials)");
	for (int i = 0; i < n; i++)
		lat_row(szs[i], its[i], lt[i]);
	bw_header("roshm WRITE over tcp, depth 16 (medians of trials)");
	for (int i = 0; i < n; i++)
		bw_row(szs[i], 0, pk[i], bw[i]);
	bw_header("raw TCP stream written in chunks of the same size (medians of trials)");
	for (int i = 0; i < n; i++)
		bw_row(szs[i], 0, tb[i], tb[i]);

	struct sweep *sw = sweep_new("tcp_lat", "completion latency over tcp against message size, "
				     "beside a raw TCP ping-pong",
				     "bytes,write_us,tcp_pingpong_us,write_p99_us:-,tcp_pingpong_p99_us:-",
				     "message size", "latency [us]", NULL, SW_LOGX | SW_LOGY | SW_BYTES);

	for (int i = 0; i < n; i++)
		sweep_row(sw, (double[]){ (double)szs[i], lw[i].typical, lt[i].typical, lw[i].p99,
					  lt[i].p99 });
	sweep_done(sw);
	sw = sweep_new("tcp_bw", "WRITE bandwidth over tcp against message size, beside a raw TCP "
		       "stream", "bytes,write_MiBps,tcp_stream_MiBps,ratio:-,write_cycles_per_op:-",
		       "message size", "bandwidth [MiB/s]", NULL, SW_LOGX | SW_LOGY | SW_BYTES);
	for (int i = 0; i < n; i++)
		sweep_row(sw, (double[]){ (double)szs[i], bw[i] / 1048576, tb[i] / 1048576, bw[i] / tb[i],
					  (double)hz * (double)szs[i] / bw[i] });
	sweep_done(sw);
	free(samples);
}

/*
 * What one more peer node costs: 64 B WRITEs at depth 32 spread round-robin
 * over the regions of the first 1, 2 .. K peer nodes (one region each, all
 * through the tcp transport), the rate and the client core's cycles per
 * operation at each K.
 */
void run_peers(int trials, const char *list)
{
	enum { MAXP = 32 };
	uint32_t hs[MAXP];
	uint64_t region = UINT64_MAX;
	char buf[4096], *save = NULL;
	unsigned n = 0;
	struct sweep *sw;

	snprintf(buf, sizeof(buf), "%s", list);
	for (char *name = strtok_r(buf, ",", &save); name && n < MAXP; name = strtok_r(NULL, ",", &save)) {
		uint64_t size = 0;
		int err = -ENOENT;

		for (int i = 0; i < 200 && err == -ENOENT; i++) {
			err = roshm_region_open(R, name, &hs[n], &size);
			if (err == -ENOENT)
				usleep(25000);
		}
		if (err)
			die(name, err);
		if (size < region)
			region = size;
		n++;
	}
	if (!n)
		die("peers: no region", -EINVAL);
	sw = sweep_new("peers", "64 B WRITE rate against peer nodes written to (tcp, depth 32, round-robin)",
		       "peers,rate_Mops,cycles_per_op:y2", "peer nodes", "message rate [Mops/s]",
		       "cycles per operation", 0);
	bw_header("64 B WRITE over tcp to 1 .. N peer nodes, round-robin, depth 32 (medians of trials)");
	for (unsigned k = 1; k <= n; k++) {
		double r[64];
		uint64_t ops = 0;
		struct wopts o = { .len = 64, .depth = 32, .seconds = run_seconds, .hs = hs, .nh = k };

		for (int t = 0; t < trials; t++) {
			progress("peers %u: %d/%d trials", k, t + 1, trials);
			r[t] = write_run(R, hs[0], region, &o, NULL, &ops) / 64;
		}
		double m = median(r, trials);

		printf(" peers %-3u", k);
		bw_row(64, ops, m * 64, m * 64);
		sweep_row(sw, (double[]){ k, m / 1e6, (double)hz / m });
	}
	sweep_done(sw);
}
