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
	uint8_t mode, buf[STREAM_CHUNK];
	uint32_t size;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (io_all(fd, &mode, 1, false) || io_all(fd, &size, 4, false) || size > sizeof(buf))
		goto out;
	if (mode == 'E') {
		while (!io_all(fd, buf, size, false) && !io_all(fd, buf, size, true))
			;
	} else if (mode == 'S') {
		uint64_t total = 0;
		ssize_t n;

		while ((n = read(fd, buf, sizeof(buf))) > 0)
			total += (uint64_t)n;
		io_all(fd, &total, sizeof(total), true);
	}
out:
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

static double tcp_pingpong_ns(const char *peer, size_t iters, uint64_t *samples)
{
	uint8_t buf[PINGPONG_SIZE] = { 0 };
	int fd = dial(peer, 'E', PINGPONG_SIZE);

	for (size_t i = 0; i < iters + 100; i++) {
		uint64_t t0 = rte_rdtsc_precise();

		if (io_all(fd, buf, sizeof(buf), true) || spin_read(fd, buf, sizeof(buf)))
			die("ping-pong", -EIO);
		if (i >= 100)
			samples[i - 100] = rte_rdtsc_precise() - t0;
	}
	close(fd);
	return lat_of(samples, iters).typical * 1000;
}

static double tcp_stream_bps(const char *peer, double seconds)
{
	static uint8_t chunk[STREAM_CHUNK];
	int fd = dial(peer, 'S', 0);
	double t0 = now_s();
	uint64_t total = 0;

	while (now_s() - t0 < seconds) {
		if (io_all(fd, chunk, sizeof(chunk), true))
			die("stream", -EIO);
	}
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
		pp[t] = tcp_pingpong_ns(peer, iters, samples);
		wl[t] = op_lat(ROSHM_OP_WRITE, 64, iters, samples, &l);
		st[t] = tcp_stream_bps(peer, 0.3);
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
		   "GB/s", ">=", 0.8);
	if (redis)
		add_result("tcp_4k_vs_redis_set", median(w4, trials) / 1e3, median(rs, trials) / 1e3,
			   "kops/s", ">=", 3.0);
	print_results(json);
	free(samples);
}
