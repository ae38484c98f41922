// SPDX-License-Identifier: MIT
/*
 * /metrics: Prometheus text format 0.0.4 from the control thread, and
 * /readyz (200 when the registry is ready, else 503). A tiny
 * HTTP/1.0 server: non-blocking sockets in the control thread's epoll, one
 * GET per connection, answered and closed; a connection that does not send
 * its request within 2 s is dropped, one that does not take its answer
 * within 10 s too (the answer goes out as the socket drains). The page is built from the poller's
 * counters (relaxed reads) and the control thread's own state; the node's
 * counters are one table, rd_metrics[], that the admin "stats" JSON
 * (admin.c) is built from too.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rte_cycles.h>

#include "control/control.h"
#include "control/metrics.h"
#include "addr.h"

#define RD_LOG_COMPONENT RD_LC_CONTROL

#define REQ_MAX 2048
#define CONN_TIMEOUT_NS 2000000000ull
#define SEND_TIMEOUT_NS 10000000000ull

struct rd_mconn {
	struct rd_ep_tag tag;         /* RD_EP_METRICS_CONN */
	int fd;
	uint32_t have;
	char buf[REQ_MAX];
	uint64_t deadline_ns;
	char *out;                    /* the answer, being sent (NULL: reading the request) */
	size_t out_len, out_off;
	struct rd_mconn *next;
};

int rd_metrics_init(struct rd_control *ctl)
{
	static struct rd_ep_tag listen_tag = { RD_EP_METRICS };
	const char *spec = ctl->cfg->metrics_listen;
	char why[256], as[RD_ADDR_PORT_STRLEN];
	struct rd_addr a;
	int fd;

	ctl->metrics_fd = -1;
	if (!spec[0])
		return 0;
	/* "HOST:PORT" or "[IPV6]:PORT"; a name resolves here, once */
	if (rd_addr_parse(spec, RD_ADDR_PORT | RD_ADDR_PASSIVE, 0, &a, why, sizeof(why))) {
		RD_LOG(ERR, "metrics.listen: %s", why);
		return -EINVAL;
	}
	rd_addr_str(&a, true, as, sizeof(as));
	fd = rd_addr_listen(&a, 16);
	if (fd < 0) {
		RD_LOG(ERR, "metrics: listening on %s: %s", as, strerror(-fd));
		return fd;
	}
	ctl->metrics_fd = fd;
	rd_control_epoll_add(ctl, fd, &listen_tag);
	RD_LOG(INFO, "metrics: http://%s/metrics%s", as,
	       a.ss.ss_family == AF_INET6 && rd_addr_is_any(&a) ? " (IPv6 and IPv4)" : "");
	return 0;
}

static void mconn_close(struct rd_control *ctl, struct rd_mconn *m)
{
	struct rd_mconn **pp;

	rd_control_epoll_del(ctl, m->fd);
	close(m->fd);
	m->fd = -1;
	free(m->out);
	m->out = NULL;
	for (pp = &ctl->mconns; *pp; pp = &(*pp)->next)
		if (*pp == m) {
			*pp = m->next;
			break;
		}
	/* freed after this epoll batch: an event of it may still name m */
	m->next = ctl->mdead;
	ctl->mdead = m;
}

static void mdead_free(struct rd_control *ctl)
{
	while (ctl->mdead) {
		struct rd_mconn *m = ctl->mdead;

		ctl->mdead = m->next;
		free(m);
	}
}

void rd_metrics_fini(struct rd_control *ctl)
{
	while (ctl->mconns)
		mconn_close(ctl, ctl->mconns);
	mdead_free(ctl);
	if (ctl->metrics_fd >= 0)
		close(ctl->metrics_fd);
	ctl->metrics_fd = -1;
}

/* Scrapers are few: past this many connections at once, the oldest goes
 * for the newcomer (holding them all takes a flood, not a few idle ones:
 * the liveness and readiness probes must get through). */
#define MCONN_MAX 32

void rd_metrics_accept(struct rd_control *ctl)
{
	int fd;

	while ((fd = accept4(ctl->metrics_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
		struct rd_mconn *m, *oldest = NULL;
		uint32_t n = 0;

		for (m = ctl->mconns; m; m = m->next) {
			n++;
			oldest = m; /* newest first */
		}
		if (n >= MCONN_MAX && oldest)
			mconn_close(ctl, oldest);
		m = calloc(1, sizeof(*m));
		if (!m) {
			close(fd);
			continue;
		}
		m->tag.kind = RD_EP_METRICS_CONN;
		m->fd = fd;
		m->deadline_ns = rd_mono_ns() + CONN_TIMEOUT_NS;
		m->next = ctl->mconns;
		ctl->mconns = m;
		rd_control_epoll_add(ctl, fd, m);
	}
}

bool rd_metrics_conn_live(struct rd_control *ctl, void *tag)
{
	for (struct rd_mconn *m = ctl->mconns; m; m = m->next)
		if ((void *)m == tag)
			return true;
	return false;
}

void rd_metrics_timer(struct rd_control *ctl)
{
	mdead_free(ctl); /* after the batch that closed them */
	uint64_t now = rd_mono_ns();

	for (struct rd_mconn *m = ctl->mconns, *next; m; m = next) {
		next = m->next;
		if (now >= m->deadline_ns)
			mconn_close(ctl, m);
	}
}

/* ---- the node's counters: /metrics and the admin "stats" ---- */

static uint64_t get_clients(struct rd_control *ctl)
{
	return ctl->nclients;
}

static uint64_t get_regions(struct rd_control *ctl)
{
	return ctl->nregions;
}

static uint64_t get_registry_ready(struct rd_control *ctl)
{
	return ctl->reg.ops->ready(&ctl->reg);
}

static uint64_t get_tampered(struct rd_control *ctl)
{
	return ctl->tampered_regions;
}

static uint64_t get_hole_guard(struct rd_control *ctl)
{
	return ctl->guard.uffd >= 0;
}

static uint64_t get_hole_faults(struct rd_control *ctl)
{
	return __atomic_load_n(&ctl->guard.faults, __ATOMIC_RELAXED);
}

static uint64_t get_pending(struct rd_control *ctl)
{
	return ctl->npending;
}

static uint64_t get_evicted(struct rd_control *ctl)
{
	return ctl->refused_conns;
}

static uint64_t get_lease_lost(struct rd_control *ctl)
{
	return RD_STAT_GET(ctl->reg.stats.lease_lost);
}

/* a counter of the poller's (struct rd_poller_stats) */
#define POLLER(field) .stat = offsetof(struct rd_poller_stats, field)

/* In the order of the page and of the JSON object. */
const struct rd_metric rd_metrics[] = {
	{ "roshm_clients", NULL, RD_METRIC_GAUGE, "Attached clients (pods)", .get = get_clients },
	{ "roshm_regions", NULL, RD_METRIC_GAUGE, "Regions owned by this node's clients",
	  .get = get_regions },
	{ "roshm_registry_ready", NULL, RD_METRIC_FLAG,
	  "1 when the registry is usable (etcd: lease held, prefix ranged and watched)",
	  .get = get_registry_ready },
	{ "roshm_registry_lease_lost_total", "registry_lease_lost", RD_METRIC_COUNTER,
	  "etcd: times this node's lease expired or etcd forgot it (its records were put again)",
	  .get = get_lease_lost },
	{ "roshm_control_pending_connections", "pending_conns", RD_METRIC_GAUGE,
	  "Connections to the control socket that have not attached (admin.max_pending)",
	  .get = get_pending },
	{ "roshm_control_evicted_total", "pending_evicted", RD_METRIC_COUNTER,
	  "Connections not attached that were closed to make room for a newcomer",
	  .get = get_evicted },
	{ "roshm_poller_rounds_total", "rounds", RD_METRIC_COUNTER, "Poll rounds", POLLER(rounds) },
	{ "roshm_poller_busy_rounds_total", "busy_rounds", RD_METRIC_COUNTER,
	  "Poll rounds that did work", POLLER(busy_rounds) },
	{ "roshm_poller_sleeps_total", "sleeps", RD_METRIC_COUNTER, "Times the adaptive poller slept",
	  POLLER(sleeps) },
	{ "roshm_sqes_total", "sqes", RD_METRIC_COUNTER, "Submission queue entries consumed",
	  POLLER(sqes) },
	{ "roshm_sqe_errors_total", "errors", RD_METRIC_COUNTER, "Completions with an error status",
	  POLLER(errors) },
	{ "roshm_corrupt_clients_total", "corrupt_clients", RD_METRIC_COUNTER,
	  "Clients cut off for corrupting their rings", POLLER(corrupt_clients) },
	{ "roshm_cq_full_total", "cq_full", RD_METRIC_COUNTER,
	  "Client rounds that left SQEs in the ring because the client's CQ was full",
	  POLLER(cq_full) },
	{ "roshm_copy_yields_total", "copy_yields", RD_METRIC_COUNTER,
	  "Big local copies that gave the rest of their turn to another tenant's small operation",
	  POLLER(copy_yields) },
	{ "roshm_transport_busy_total", "transport_busy", RD_METRIC_COUNTER,
	  "Times an SQE stayed in its ring because its transport's queue was full",
	  POLLER(xport_busy) },
	{ "roshm_regions_tampered_total", "regions_tampered", RD_METRIC_COUNTER,
	  "Regions whose owner punched a hole in their memory (owner disconnected)",
	  .get = get_tampered },
	{ NULL, "events_lost", RD_METRIC_COUNTER, "Poller events that found the event ring full",
	  POLLER(events_lost) },
	{ "roshm_hole_guard", "hole_guard", RD_METRIC_FLAG,
	  "1 when roshmd's mappings of regions are guarded against holes", .get = get_hole_guard },
	{ NULL, "hole_faults", RD_METRIC_COUNTER, "Holes the hole guard found",
	  .get = get_hole_faults },
	{ "roshm_txn_committed_total", "txn_committed", RD_METRIC_COUNTER,
	  "Transactions committed as writer", POLLER(txn_committed) },
	{ "roshm_txn_replayed_total", "txn_replayed", RD_METRIC_COUNTER,
	  "Transactions replayed with a new sequence", POLLER(txn_replayed) },
	{ "roshm_txn_one_round_trip_total", "txn_one", RD_METRIC_COUNTER,
	  "Transactions committed in one round trip (tcp: the owner's roshmd reserves, stages "
	  "and commits)", POLLER(txn_one) },
	{ "roshm_txn_again_total", "txn_again", RD_METRIC_COUNTER,
	  "One-round-trip commits sent again after their answer was lost with a connection",
	  POLLER(txn_again) },
	{ "roshm_txn_found_total", "txn_found", RD_METRIC_COUNTER,
	  "Commits sent again whose first attempt this node found in its log (it had run)",
	  POLLER(txn_found) },
	{ "roshm_txn_log_full_total", "txn_log_full", RD_METRIC_COUNTER,
	  "Reservations that waited for a full log", POLLER(txn_log_full) },
	{ "roshm_txn_applied_total", "txn_applied", RD_METRIC_COUNTER,
	  "Transactions applied to this node's regions", POLLER(txn_applied) },
	{ "roshm_txn_aborted_total", "txn_aborted", RD_METRIC_COUNTER,
	  "Reserved sequences aborted as holes", POLLER(txn_aborted) },
	{ "roshm_txn_invalid_total", "txn_invalid", RD_METRIC_COUNTER,
	  "Committed records that failed their checks", POLLER(txn_invalid) },
};
const size_t rd_nmetrics = sizeof(rd_metrics) / sizeof(rd_metrics[0]);

uint64_t rd_metric_value(struct rd_control *ctl, const struct rd_metric *m)
{
	if (m->get)
		return m->get(ctl);
	return RD_STAT_GET(*(const uint64_t *)(const void *)((const uint8_t *)&ctl->poller->stats +
							       m->stat));
}

/* ---- the page ---- */

struct page {
	char *buf;
	size_t len, cap;
	bool oom;
};

static void put(struct page *p, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(p->buf + p->len, p->cap - p->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			p->oom = true;
			return;
		}
		if ((size_t)n < p->cap - p->len) {
			p->len += (size_t)n;
			return;
		}
		size_t cap = p->cap * 2 + (size_t)n;
		char *b = realloc(p->buf, cap);

		if (!b) {
			p->oom = true;
			return;
		}
		p->buf = b;
		p->cap = cap;
	}
}

static void head(struct page *p, const char *name, const char *type, const char *help)
{
	put(p, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void gauge(struct page *p, const char *name, const char *help, double v)
{
	head(p, name, "gauge", help);
	put(p, "%s %.17g\n", name, v);
}

/*
 * The standard process metrics (as Prometheus client libraries export them),
 * from /proc/self: start time, CPU, memory, descriptors. Read per scrape, on
 * the control thread.
 */
static void process_metrics(struct page *p)
{
	char buf[1024], *q;
	unsigned long long utime = 0, stime = 0, start = 0, vsize = 0;
	long long rss = 0, btime = 0;
	long tck = sysconf(_SC_CLK_TCK), pg = sysconf(_SC_PAGESIZE);
	FILE *f = fopen("/proc/self/stat", "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	struct rlimit rl;
	DIR *d;
	long fds = 0;

	if (f)
		fclose(f);
	buf[n] = 0;
	/* after "(comm)", which may hold spaces: field 3 onwards */
	q = strrchr(buf, ')');
	if (q && sscanf(q + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d "
			"%*d %*d %*d %llu %llu %lld", &utime, &stime, &start, &vsize, &rss) != 5)
		q = NULL;
	f = fopen("/proc/stat", "r");
	while (f && fgets(buf, sizeof(buf), f))
		if (sscanf(buf, "btime %lld", &btime) == 1)
			break;
	if (f)
		fclose(f);
	if (q && tck > 0) {
		gauge(p, "process_start_time_seconds", "Start time of the process since unix epoch in seconds",
		      (double)btime + (double)start / (double)tck);
		head(p, "process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds");
		put(p, "process_cpu_seconds_total %.17g\n", (double)(utime + stime) / (double)tck);
		gauge(p, "process_virtual_memory_bytes", "Virtual memory size in bytes", (double)vsize);
		gauge(p, "process_resident_memory_bytes", "Resident memory size in bytes",
		      (double)rss * (double)pg);
	}
	d = opendir("/proc/self/fd");
	for (struct dirent *e; d && (e = readdir(d));)
		fds += e->d_name[0] != '.';
	if (d) {
		closedir(d);
		gauge(p, "process_open_fds", "Number of open file descriptors", (double)(fds - 1));
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		gauge(p, "process_max_fds", "Maximum number of open file descriptors",
		      rl.rlim_cur == RLIM_INFINITY ? -1.0 : (double)rl.rlim_cur);
}

/* Label values: escape backslash, quote and newline (names are plain anyway). */
static const char *esc(const char *s, char *out, size_t cap)
{
	size_t o = 0;

	for (; *s && o + 2 < cap; s++) {
		if (*s == '\\' || *s == '"' || *s == '\n') {
			out[o++] = '\\';
			out[o++] = *s == '\n' ? 'n' : *s;
		} else {
			out[o++] = *s;
		}
	}
	out[o] = 0;
	return out;
}

/* A counter of every peer whose provider counts it (struct rd_peer_stats). */
static void peer_counter(struct rd_control *ctl, struct page *p, const char *name, const char *help,
			 size_t off, bool nic_only)
{
	char e[160];

	head(p, name, "counter", help);
	for (struct rd_peer *q = ctl->peers; q; q = q->next) {
		struct rd_peer_stats st = { 0 };

		if (q->prov->cp->peer_stats)
			q->prov->cp->peer_stats(q, &st);
		if (nic_only && !st.nic)
			continue;
		put(p, "%s{node=\"%s\"} %llu\n", name, esc(q->node, e, sizeof(e)),
		    (unsigned long long)*(const uint64_t *)(const void *)((const uint8_t *)&st + off));
	}
}

/* Label values of the poller's operation counters (roshmd.h). */
static const char *const xp_name[RD_XPORTS] = { "none", "local", "tcp", "verbs" };
static const char *const op_name[RD_SOPS] = {
	[ROSHM_OP_NOP] = "nop", [ROSHM_OP_WRITE] = "write", [ROSHM_OP_READ] = "read",
	[ROSHM_OP_FETCH_ADD] = "fetch_add", [ROSHM_OP_CMP_SWAP] = "compare_swap",
	[ROSHM_OP_TXN_WRITE] = "txn_write", [ROSHM_OP_TXN_COMMIT] = "txn_commit",
	[ROSHM_OP_FENCE] = "fence", [ROSHM_OP__MAX] = "other" };
static const char *const lop_name[RD_LOPS] = { "write", "read", "fetch_add", "compare_swap",
					       "txn_commit" };
static const uint8_t lop_opcode[RD_LOPS] = { ROSHM_OP_WRITE, ROSHM_OP_READ, ROSHM_OP_FETCH_ADD,
					     ROSHM_OP_CMP_SWAP, ROSHM_OP_TXN_COMMIT };
static const char *const st_name[RD_STATUSES] = { "ok", "invalid", "denied", "stale",
						  "unreachable", "reset", "busy", "timeout",
						  "error" };
static const char *const regop_name[RD_REGOPS] = { "put", "get", "delete", "watch", "lease",
						   "auth" };
static const char *const held_name[RD_HELD_REASONS] = { [RD_HELD_RATE] = "rate",
							[RD_HELD_SHARE] = "share",
							[RD_HELD_PEER] = "peer" };
static const char *const regerr_name[RD_REGERRS] = { "timeout", "unreachable", "denied",
						     "invalid", "other" };

/* The transports this roshmd has: local, and its network provider if any. */
static bool xp_present(const struct rd_control *ctl, unsigned xp)
{
	const struct rd_provider *net = ctl->poller->net;

	return xp == RD_XP_LOCAL || (net && net->xp == xp);
}

/* Operations and their completions: latency histograms (successful client
 * operations, consumed to completed) and completion counters by status. */
static void op_metrics(struct rd_control *ctl, struct page *p)
{
	const struct rd_poller_stats *ps = &ctl->poller->stats;
	double hz = rte_get_tsc_hz() ? (double)rte_get_tsc_hz() : 1e9; /* the sums are in TSC cycles */

	head(p, "roshm_op_latency_seconds", "histogram",
	     "Client operation latency in roshmd, from the poller taking the SQE to its completion "
	     "(local: the poller's time on it; tcp, verbs: including the network round trip), "
	     "successful operations, by transport and operation");
	for (unsigned xp = RD_XP_LOCAL; xp < RD_XPORTS; xp++) {
		if (!xp_present(ctl, xp))
			continue;
		for (unsigned o = 0; o < RD_LOPS; o++) {
			const uint64_t *h = ps->lat_hist[xp - 1][o];
			uint64_t cum = 0;

			for (int i = 0; i < RD_LAT_BUCKETS; i++) {
				cum += RD_STAT_GET(h[i]);
				/* bucket i: up to 2^i / 8 us */
				put(p, "roshm_op_latency_seconds_bucket{transport=\"%s\",op=\"%s\",le=\"%g\"} %llu\n",
				    xp_name[xp], lop_name[o], (double)(1ull << i) * 0.125e-6,
				    (unsigned long long)cum);
			}
			cum += RD_STAT_GET(h[RD_LAT_BUCKETS]);
			put(p, "roshm_op_latency_seconds_bucket{transport=\"%s\",op=\"%s\",le=\"+Inf\"} %llu\n",
			    xp_name[xp], lop_name[o], (unsigned long long)cum);
			put(p, "roshm_op_latency_seconds_sum{transport=\"%s\",op=\"%s\"} %.12g\n", xp_name[xp],
			    lop_name[o], (double)RD_STAT_GET(ps->lat_sum[xp - 1][o]) / hz);
			put(p, "roshm_op_latency_seconds_count{transport=\"%s\",op=\"%s\"} %llu\n", xp_name[xp],
			    lop_name[o], (unsigned long long)cum);
		}
	}

	/* Every status of what this roshmd's transports can do, zero or not
	 * (a rate or an increase needs the series before its first
	 * increment), and every other series that is not zero. */
	head(p, "roshm_completions_total", "counter",
	     "Completions posted to clients (CQEs), by transport, operation and status class");
	for (unsigned xp = 0; xp < RD_XPORTS; xp++)
		for (unsigned o = 0; o < RD_SOPS; o++)
			for (unsigned st = 0; st < RD_STATUSES; st++) {
				uint64_t v = RD_STAT_GET(ps->done[xp][o][st]);
				bool base = xp == RD_XP_NONE ?
					    st == RD_ST_OK && (o == ROSHM_OP_NOP || o == ROSHM_OP_FENCE) :
					    xp_present(ctl, xp) && memchr(lop_opcode, (int)o, RD_LOPS);

				if (v || base)
					put(p, "roshm_completions_total{transport=\"%s\",op=\"%s\",status=\"%s\"} %llu\n",
					    xp_name[xp], op_name[o], st_name[st], (unsigned long long)v);
			}
}

/* The registry's requests to its store (struct rd_reg_stats). */
static void registry_metrics(struct rd_control *ctl, struct page *p)
{
	const struct rd_reg_stats *rs = &ctl->reg.stats;
	const char *b = ctl->reg.ops->name;

	head(p, "roshm_registry_latency_seconds", "histogram",
	     "Registry requests to the store (file: the directory; etcd: its HTTP gateway), answered "
	     "or not, by backend and operation");
	for (unsigned o = 0; o < RD_REGOPS; o++) {
		uint64_t cum = 0;

		if (!(rs->ops & (1u << o)))
			continue;
		for (int i = 0; i < RD_REG_LAT_BUCKETS; i++) {
			cum += RD_STAT_GET(rs->hist[o][i]);
			put(p, "roshm_registry_latency_seconds_bucket{backend=\"%s\",op=\"%s\",le=\"%g\"} %llu\n",
			    b, regop_name[o], (double)rd_reg_lat_le_ns[i] * 1e-9, (unsigned long long)cum);
		}
		cum += RD_STAT_GET(rs->hist[o][RD_REG_LAT_BUCKETS]);
		put(p, "roshm_registry_latency_seconds_bucket{backend=\"%s\",op=\"%s\",le=\"+Inf\"} %llu\n",
		    b, regop_name[o], (unsigned long long)cum);
		put(p, "roshm_registry_latency_seconds_sum{backend=\"%s\",op=\"%s\"} %.9f\n", b,
		    regop_name[o], (double)RD_STAT_GET(rs->sum_ns[o]) * 1e-9);
		put(p, "roshm_registry_latency_seconds_count{backend=\"%s\",op=\"%s\"} %llu\n", b,
		    regop_name[o], (unsigned long long)cum);
	}
	head(p, "roshm_registry_errors_total", "counter",
	     "Registry requests that failed, by backend, operation and reason");
	for (unsigned o = 0; o < RD_REGOPS; o++)
		for (unsigned w = 0; w < RD_REGERRS && (rs->ops & (1u << o)); w++)
			put(p, "roshm_registry_errors_total{backend=\"%s\",op=\"%s\",reason=\"%s\"} %llu\n", b,
			    regop_name[o], regerr_name[w], (unsigned long long)RD_STAT_GET(rs->errors[o][w]));
}

/* Per tenant: what its clients did, and what its quotas held back. */
static void tenant_metrics(struct rd_control *ctl, struct page *p)
{
	const struct rd_poller_stats *ps = &ctl->poller->stats;
	const struct rd_config *cfg = ctl->cfg;
	char e[160];

	head(p, "roshm_tenant_sqes_total", "counter", "SQEs consumed, by tenant");
	for (int t = 0; t < cfg->ntenants; t++) {
		uint64_t n = 0;

		for (struct rd_client *c = ctl->clients; c; c = c->next)
			if (!strcmp(c->tenant, cfg->tenants[t].name))
				n += RD_STAT_GET(c->stats.sqes);
		put(p, "roshm_tenant_sqes_total{tenant=\"%s\"} %llu\n",
		    esc(cfg->tenants[t].name, e, sizeof(e)),
		    (unsigned long long)(n + ctl->tenant_sqes_gone[t]));
	}
	head(p, "roshm_tenant_throttled_total", "counter",
	     "Client rounds in which a tenant's waiting SQEs were held back: by its rate limit "
	     "(quota.ops_per_sec, quota.bytes_per_sec), by its share of the poller (quota.weight), "
	     "or by its share of a peer's operations in flight (quota.peer_inflight)");
	for (int t = 0; t < cfg->ntenants; t++)
		for (int r = 0; r < RD_HELD_REASONS; r++)
			put(p, "roshm_tenant_throttled_total{tenant=\"%s\",reason=\"%s\"} %llu\n",
			    esc(cfg->tenants[t].name, e, sizeof(e)), held_name[r],
			    (unsigned long long)RD_STAT_GET(ps->tenant_held[t][r]));
	head(p, "roshm_tenant_quota_refusals_total", "counter",
	     "Requests refused for a tenant's quota: attach (quota.clients, quota.bytes), region "
	     "(quota.regions, quota.bytes), txn (quota.txn: the commit fails with EBUSY)");
	for (int t = 0; t < cfg->ntenants; t++) {
		esc(cfg->tenants[t].name, e, sizeof(e));
		put(p, "roshm_tenant_quota_refusals_total{tenant=\"%s\",request=\"attach\"} %llu\n", e,
		    (unsigned long long)ctl->tenant_attach_refused[t]);
		put(p, "roshm_tenant_quota_refusals_total{tenant=\"%s\",request=\"region\"} %llu\n", e,
		    (unsigned long long)ctl->tenant_region_refused[t]);
		put(p, "roshm_tenant_quota_refusals_total{tenant=\"%s\",request=\"txn\"} %llu\n", e,
		    (unsigned long long)RD_STAT_GET(ps->tenant_txn_refused[t]));
	}
	head(p, "roshm_tenant_grant_mrs", "gauge",
	     "verbs: MRs a tenant's grants to other nodes hold at the NIC (quota.grant_mrs)");
	for (int t = 0; t < cfg->ntenants; t++)
		put(p, "roshm_tenant_grant_mrs{tenant=\"%s\"} %llu\n",
		    esc(cfg->tenants[t].name, e, sizeof(e)), (unsigned long long)ctl->tuse[t].grant_mrs);
	head(p, "roshm_tenant_grants_without_mr_total", "counter",
	     "verbs: grants to other nodes made without an MR of their own (past quota.grant_mrs "
	     "or quota.bytes, or the NIC refused one): their revoke waits for the record");
	for (int t = 0; t < cfg->ntenants; t++)
		put(p, "roshm_tenant_grants_without_mr_total{tenant=\"%s\"} %llu\n",
		    esc(cfg->tenants[t].name, e, sizeof(e)),
		    (unsigned long long)ctl->tuse[t].grants_no_mr);
	head(p, "roshm_tenant_registry_held_total", "counter",
	     "Control requests of a tenant that waited for its registry rate "
	     "(quota.registry_ops_per_sec) before they were read, and listings "
	     "of its regions refused for it");
	for (int t = 0; t < cfg->ntenants; t++)
		put(p, "roshm_tenant_registry_held_total{tenant=\"%s\"} %llu\n",
		    esc(cfg->tenants[t].name, e, sizeof(e)), (unsigned long long)ctl->reg_bucket[t].held);
}

static void page_build(struct rd_control *ctl, struct page *p)
{
	const struct rd_poller_stats *ps = &ctl->poller->stats;
	char e1[160];
	uint64_t cum;

	head(p, "roshm_build_info", "gauge", "roshmd version and node; always 1");
	put(p, "roshm_build_info{version=\"%s\",node=\"%s\"} 1\n", ROSHM_VERSION,
	    esc(ctl->cfg->node, e1, sizeof(e1)));
	process_metrics(p);
	gauge(p, "roshm_uptime_seconds", "Seconds since roshmd started",
	      (double)(rd_mono_ns() - ctl->start_ns) / 1e9);
	for (size_t i = 0; i < rd_nmetrics; i++) {
		const struct rd_metric *m = &rd_metrics[i];

		if (!m->name)
			continue;
		head(p, m->name, m->type == RD_METRIC_COUNTER ? "counter" : "gauge", m->help);
		put(p, "%s %llu\n", m->name, (unsigned long long)rd_metric_value(ctl, m));
	}

	/* SQEs consumed per client per poll round (rounds that consumed any). */
	head(p, "roshm_batch_size", "histogram", "SQEs taken from one client in one poll round");
	cum = 0;
	for (int i = 0; i < RD_BATCH_BUCKETS; i++) {
		cum += RD_STAT_GET(ps->batch_hist[i]);
		/* bucket i holds batches of [2^i, 2^(i+1)) SQEs */
		put(p, "roshm_batch_size_bucket{le=\"%u\"} %llu\n", (2u << i) - 1, (unsigned long long)cum);
	}
	put(p, "roshm_batch_size_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)cum);
	put(p, "roshm_batch_size_sum %llu\n", (unsigned long long)RD_STAT_GET(ps->batch_sqes));
	put(p, "roshm_batch_size_count %llu\n", (unsigned long long)cum);

	op_metrics(ctl, p);
	registry_metrics(ctl, p);
	tenant_metrics(ctl, p);

	/* Peers. */
	head(p, "roshm_peer_up", "gauge", "1 when the connection to the peer node is up");
	for (struct rd_peer *q = ctl->peers; q; q = q->next)
		put(p, "roshm_peer_up{node=\"%s\",transport=\"%s\"} %d\n", esc(q->node, e1, sizeof(e1)),
		    rd_peer_transport_name(q), q->ctl_up ? 1 : 0);
	peer_counter(ctl, p, "roshm_peer_work_requests_total",
		     "Operations sent to the peer (tcp frames, verbs WRs)",
		     offsetof(struct rd_peer_stats, ops), false);
	peer_counter(ctl, p, "roshm_peer_doorbells_total", "verbs: ibv_post_send calls (WR chains)",
		     offsetof(struct rd_peer_stats, doorbells), true);
	peer_counter(ctl, p, "roshm_peer_completion_errors_total",
		     "verbs: error completions (each took the peer down, or reset it)",
		     offsetof(struct rd_peer_stats, errors), true);
	peer_counter(ctl, p, "roshm_peer_resets_total",
		     "verbs: connections re-made after the peer refused one WR (a stale rkey)",
		     offsetof(struct rd_peer_stats, resets), true);
	peer_counter(ctl, p, "roshm_peer_reposted_total",
		     "verbs: other clients' WRs posted again after such a reset",
		     offsetof(struct rd_peer_stats, reposted), true);
}

char *rd_metrics_page(struct rd_control *ctl, size_t *len)
{
	struct page p = { .cap = 16384 };

	p.buf = malloc(p.cap);
	if (!p.buf)
		return NULL;
	p.buf[0] = 0;
	page_build(ctl, &p);
	if (p.oom) {
		free(p.buf);
		return NULL;
	}
	*len = p.len;
	return p.buf;
}

/* Send what the socket takes of the answer; the rest when it drains
 * (EPOLLOUT). The connection closes once it is all out, or on an error. */
static void flush(struct rd_control *ctl, struct rd_mconn *m)
{
	while (m->out_off < m->out_len) {
		ssize_t n = send(m->fd, m->out + m->out_off, m->out_len - m->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n > 0) {
			m->out_off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct epoll_event ev = { .events = EPOLLOUT, .data.ptr = m };

			epoll_ctl(ctl->epfd, EPOLL_CTL_MOD, m->fd, &ev);
			return;
		}
		break; /* the scraper went away */
	}
	mconn_close(ctl, m);
}

/* Answer @m: this thread never blocks on it (a scraper that never reads
 * is dropped at its deadline). */
static void reply(struct rd_control *ctl, struct rd_mconn *m, const char *status, const char *type,
		  const char *body, size_t blen)
{
	char hdr[256];
	int n = snprintf(hdr, sizeof(hdr),
			 "HTTP/1.0 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
			 status, type, blen);

	m->out = malloc((size_t)n + blen);
	if (!m->out) {
		mconn_close(ctl, m);
		return;
	}
	memcpy(m->out, hdr, (size_t)n);
	memcpy(m->out + n, body, blen);
	m->out_len = (size_t)n + blen;
	m->out_off = 0;
	m->deadline_ns = rd_mono_ns() + SEND_TIMEOUT_NS;
	flush(ctl, m);
}

/* A round that takes this long is a stuck poller (rounds are bounded: a
 * byte budget per client, a bounded transaction apply). */
#define HEALTH_STUCK_MS 2000

void rd_metrics_readable(struct rd_control *ctl, void *tag)
{
	struct rd_mconn *m = tag;
	ssize_t n;

	if (m->out) { /* writable: the rest of the answer */
		flush(ctl, m);
		return;
	}
	n = read(m->fd, m->buf + m->have, sizeof(m->buf) - 1 - m->have);

	if (n <= 0) {
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		mconn_close(ctl, m);
		return;
	}
	m->have += (uint32_t)n;
	m->buf[m->have] = 0;
	if (!strstr(m->buf, "\r\n\r\n") && !strstr(m->buf, "\n\n")) {
		if (m->have >= sizeof(m->buf) - 1)
			reply(ctl, m, "431 Request Header Fields Too Large", "text/plain", "", 0);
		return;
	}
	if (strncmp(m->buf, "GET ", 4)) {
		reply(ctl, m, "405 Method Not Allowed", "text/plain", "GET only\n", 9);
	} else if (!strncmp(m->buf + 4, "/readyz ", 8)) {
		/* readiness probe: roshmd serves its pods without the registry,
		 * but cannot publish or find regions across nodes; a draining
		 * roshmd (SIGTERM) takes no new work */
		if (ctl->stopping)
			reply(ctl, m, "503 Service Unavailable", "text/plain", "draining\n", 9);
		else if (ctl->reg.ops->ready(&ctl->reg))
			reply(ctl, m, "200 OK", "text/plain", "ready\n", 6);
		else
			reply(ctl, m, "503 Service Unavailable", "text/plain", "registry not ready\n", 19);
	} else if (!strncmp(m->buf + 4, "/healthz ", 9)) {
		/* liveness probe: this thread answers, and the poller is asleep
		 * or began a round in the last HEALTH_STUCK_MS */
		char body[96];
		uint64_t ms = rd_poller_stuck_ms(ctl->poller);
		int bl = ms < HEALTH_STUCK_MS ? snprintf(body, sizeof(body), "ok\n") :
			 snprintf(body, sizeof(body), "poller in one round for %llu ms\n",
				  (unsigned long long)ms);

		reply(ctl, m, ms < HEALTH_STUCK_MS ? "200 OK" : "503 Service Unavailable", "text/plain", body,
		      (size_t)bl);
	} else if (strncmp(m->buf + 4, "/metrics ", 9) && strncmp(m->buf + 4, "/metrics?", 9)) {
		reply(ctl, m, "404 Not Found", "text/plain", "try /metrics, /healthz or /readyz\n", 34);
	} else {
		size_t len;
		char *page = rd_metrics_page(ctl, &len);

		if (page)
			reply(ctl, m, "200 OK", "text/plain; version=0.0.4; charset=utf-8", page, len);
		else
			reply(ctl, m, "500 Internal Server Error", "text/plain", "", 0);
		free(page);
	}
}
