// SPDX-License-Identifier: MIT
/*
 * Scale: the aggregate batched 64 B WRITE rate of 1, 2, 4 .. N attached
 * clients, each its own channel (roshm_open), against one client's; the
 * p50/p99 of their completions; and roshmd's private memory as clients
 * attach.
 *
 * One thread drives every client in turn (reap its completions, refill it
 * to its depth, one submit), so that the client side costs the same core
 * whatever the number of clients and what grows is roshmd's work: with
 * one thread per client on a 2-core machine the measure would be the
 * scheduler's. Latency is submit -> reaped, so it includes the driver's
 * visit of the other clients (a client is reaped once per pass).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rte_cycles.h>

#include "perf.h"

#define CL_DEPTH 32

struct cl {
	struct roshm *r;
	uint32_t h;
	unsigned inflight;
	uint64_t seq;
};

int roshmd_pid(struct roshm *r)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	if (getsockopt(r->sock_fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
		return -1;
	return cr.pid;
}

/* Private_Clean + Private_Dirty + Private_Hugetlb, kB, of one smaps block. */
static bool private_kb(const char *line, double *kb)
{
	static const char *const keys[] = { "Private_Clean:", "Private_Dirty:", "Private_Hugetlb:" };

	for (unsigned i = 0; i < 3; i++)
		if (!strncmp(line, keys[i], strlen(keys[i]))) {
			*kb += atof(line + strlen(keys[i]));
			return true;
		}
	return false;
}

/*
 * roshmd's private memory: smaps_rollup's Private_* (pages only roshmd
 * maps) minus the Private_* of the clients' memfd mappings (channels and
 * regions: the pods' memory, charged to them, which roshmd maps too; a
 * page of them counts as private while the client has not touched it).
 * *shared_mib: the resident size of those memfd mappings.
 */
double roshmd_private_mib(int pid, double *shared_mib)
{
	char path[64], line[512];
	double total = 0, memfd_priv = 0, memfd_rss = 0;
	bool in_memfd = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		private_kb(line, &total);
	fclose(f);
	snprintf(path, sizeof(path), "/proc/%d/smaps", pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		/* a mapping's first line: "start-end perms offset dev inode [path]" */
		unsigned long lo, hi;
		char perms[8];

		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3) {
			in_memfd = strstr(line, "/memfd:") != NULL;
			continue;
		}
		if (!in_memfd)
			continue;
		if (!strncmp(line, "Rss:", 4))
			memfd_rss += atof(line + 4);
		else
			private_kb(line, &memfd_priv);
	}
	fclose(f);
	if (shared_mib)
		*shared_mib = memfd_rss / 1024;
	return (total - memfd_priv) / 1024;
}

/* Visit every client once: reap, then refill to depth and submit. */
static uint64_t pass(struct cl *c, unsigned n, struct hist *h)
{
	struct roshm_cqe *cqes[64];
	uint64_t done = 0;

	for (unsigned i = 0; i < n; i++) {
		struct roshm *r = c[i].r;
		uint8_t *arena = roshm_arena(r, NULL);
		unsigned got = roshm_peek_batch_cqe(r, cqes, 64), k = 0;
		uint64_t now = rte_rdtsc();
		struct roshm_sqe *s;

		for (unsigned j = 0; j < got; j++) {
			if (cqes[j]->status)
				die("write", cqes[j]->status);
			if (h)
				hist_add(h, now - cqes[j]->user_data);
		}
		roshm_cq_advance(r, got);
		c[i].inflight -= got;
		done += got;
		while (c[i].inflight + k < CL_DEPTH && (s = roshm_get_sqe(r))) {
			uint64_t slot = c[i].seq++ % CL_DEPTH;

			memset(arena + slot * 64, (int)(slot & 0xff), 64);
			roshm_prep_write(s, c[i].h, ((i % 64) * CL_DEPTH + slot) * 64, slot * 64, 64);
			roshm_sqe_set_data(s, now);
			k++;
		}
		if (k) {
			roshm_submit(r);
			c[i].inflight += k;
		}
	}
	return done;
}

static void drain(struct cl *c, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		while (c[i].inflight) {
			struct roshm_cqe *cqe;
			int err = roshm_wait_cqe(c[i].r, &cqe);

			if (err)
				die("write", err);
			roshm_cqe_seen(c[i].r, cqe);
			c[i].inflight--;
		}
}

static char *fmt_name(const char *fmt, unsigned n)
{
	char *s;

	if (asprintf(&s, fmt, n) < 0)
		die("name", -ENOMEM);
	return s;
}

void run_clients(int trials, unsigned max, const char *json)
{
	struct cl *c = calloc(max ? max : 1, sizeof(*c));
	struct hist *h = malloc(sizeof(*h));
	char region[64];
	struct rlimit rl;
	int pid = roshmd_pid(R);
	double rate1 = 0, rss1 = -1, rss = -1, shared = 0, rate_max = 0;
	unsigned attached = 1;
	struct sweep *sw;

	if (max < 1 || max > 4096 || !c || !h)
		die("clients: 1 .. 4096", -EINVAL);
	/* a socket and two wakeup sockets per client */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	snprintf(region, sizeof(region), "perf-%d", (int)getpid());
	c[0].r = R; /* the first client is our own channel, on its own region */
	c[0].h = H;
	if (pid > 0)
		rss1 = roshmd_private_mib(pid, NULL);
	sw = sweep_new("clients", "aggregate 64 B WRITE rate and p99 against attached clients "
		       "(each depth 32, one driver thread)",
		       "clients,rate_Mops,p99_us:y2,p50_us:y2,rate_vs_1:-,cycles_per_op:-,"
		       "roshmd_private_MiB:-",
		       "attached clients", "aggregate rate [Mops/s]", "latency [us]", SW_LOGX | SW_LOGY2);
	bw_header("64 B WRITE, every client depth 32 (one driver): aggregate over all clients");
	printf(" %-8s", "clients");
	printf("  (then: p50 / p99 [usec], roshmd private MiB)\n");
	for (unsigned n = 1;; n = n * 2 > max ? max : n * 2) {
		double rate[64], p50[64], p99[64];
		uint64_t ops = 0;

		for (; attached < n; attached++) {
			struct roshm_params p = { .sock_path = sock_path, .sq_entries = 64,
						  .cq_entries = 128, .arena_size = 65536,
						  .spin_us = 1000 };
			uint64_t size;
			int err;

			c[attached].r = roshm_open(&p, &err);
			if (!c[attached].r) {
				fprintf(stderr, "roshm-perf: client %u of %u: ", attached + 1, max);
				die("attach", err);
			}
			err = roshm_region_open(c[attached].r, region, &c[attached].h, &size);
			if (err)
				die("region open", err);
		}
		for (int t = 0; t < trials; t++) {
			uint64_t t0, end, done = 0;

			progress("clients %u: %d/%d trials", n, t + 1, trials);
			memset(h, 0, sizeof(*h));
			pass(c, n, NULL); /* warm: every client has its depth in flight */
			t0 = rte_rdtsc();
			end = t0 + (uint64_t)(run_seconds * (double)hz);
			while (rte_rdtsc() < end || !done)
				done += pass(c, n, h);
			rate[t] = (double)done / ((double)(rte_rdtsc() - t0) / (double)hz);
			drain(c, n);
			p50[t] = hist_us(h, 0.5);
			p99[t] = hist_us(h, 0.99);
			ops = done;
		}
		double rm = median(rate, trials);

		if (n == 1)
			rate1 = rm;
		rate_max = rm;
		rss = pid > 0 ? roshmd_private_mib(pid, &shared) : -1;
		printf(" %-8u", n);
		bw_row(64, ops, rm * 64, rm * 64);
		printf("          p50 %.2f / p99 %.2f usec, roshmd private %.1f MiB (clients' channels and "
		       "regions mapped: %.1f MiB)\n", median(p50, trials), median(p99, trials), rss, shared);
		sweep_row(sw, (double[]){ n, rm / 1e6, median(p99, trials), median(p50, trials), rm / rate1,
					  (double)hz / rm, rss });
		if (n == max)
			break;
	}
	sweep_done(sw);
	add_result(fmt_name("scale_%u_clients_rate_vs_1", max), rate_max / 1e6, rate1 / 1e6, "Mops/s",
		   ">=", 0.8);
	if (rss >= 0) {
		add_absolute(fmt_name("roshmd_rss_%u_clients_mib", max), rss, "MiB", "<", 64);
		add_reference("with 1 client", rss1, true);
	} else {
		printf(" roshmd's /proc/%d/smaps is not readable: roshmd_rss not measured\n", pid);
	}
	print_results(json);
	for (unsigned i = 1; i < attached; i++)
		roshm_close(c[i].r);
	free(c);
	free(h);
}
