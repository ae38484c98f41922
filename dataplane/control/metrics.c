// SPDX-License-Identifier: MIT
/*
 * /metrics: Prometheus text format 0.0.4 from the control thread, and
 * /readyz (200 when the registry is ready, else 503). A tiny
 * HTTP/1.0 server: non-blocking sockets in the control thread's epoll, one
 * GET per connection, answered and closed; a connection that does not send
 * its request within 2 s is dropped. The page is built from the poller's
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
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "control/control.h"
#include "control/metrics.h"
#include "addr.h"

#define RD_LOG_COMPONENT RD_LC_CONTROL

#define REQ_MAX 2048
#define CONN_TIMEOUT_NS 2000000000ull

struct rd_mconn {
	struct rd_ep_tag tag;         /* RD_EP_METRICS_CONN */
	int fd;
	uint32_t have;
	char buf[REQ_MAX];
	uint64_t deadline_ns;
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

static void page_build(struct rd_control *ctl, struct page *p)
{
	const struct rd_poller_stats *ps = &ctl->poller->stats;
	/* rows of the latency histogram: struct rd_provider lat */
	static const struct rd_provider *const xpv[RD_LAT_XPORTS] = {
		[RD_LAT_TCP] = &rd_tcp_provider, [RD_LAT_VERBS] = &rd_verbs_provider };
	const char *xp[RD_LAT_XPORTS];
	char e1[160];
	uint64_t cum, total;

	for (int x = 0; x < RD_LAT_XPORTS; x++)
		xp[x] = xpv[x]->name;

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

	/* Remote operation latency: submit to completion, per transport. */
	head(p, "roshm_op_latency_seconds", "histogram",
	     "Remote operation latency from submission to completion, by transport");
	for (int x = 0; x < RD_LAT_XPORTS; x++) {
		cum = 0;
		for (int i = 0; i < RD_LAT_BUCKETS; i++) {
			cum += RD_STAT_GET(ps->lat_hist[x][i]);
			put(p, "roshm_op_latency_seconds_bucket{transport=\"%s\",le=\"%g\"} %llu\n", xp[x],
			    (double)(1ull << i) * 1e-6, (unsigned long long)cum);
		}
		total = cum + RD_STAT_GET(ps->lat_hist[x][RD_LAT_BUCKETS]);
		put(p, "roshm_op_latency_seconds_bucket{transport=\"%s\",le=\"+Inf\"} %llu\n", xp[x],
		    (unsigned long long)total);
		put(p, "roshm_op_latency_seconds_sum{transport=\"%s\"} %.9f\n", xp[x],
		    (double)RD_STAT_GET(ps->lat_sum_us[x]) * 1e-6);
		put(p, "roshm_op_latency_seconds_count{transport=\"%s\"} %llu\n", xp[x],
		    (unsigned long long)total);
	}

	/* Per tenant: what its clients did. */
	head(p, "roshm_tenant_sqes_total", "counter", "SQEs consumed, by tenant");
	for (int t = 0; t < ctl->cfg->ntenants; t++) {
		uint64_t n = 0;

		for (struct rd_client *c = ctl->clients; c; c = c->next)
			if (!strcmp(c->tenant, ctl->cfg->tenants[t].name))
				n += RD_STAT_GET(c->stats.sqes);
		put(p, "roshm_tenant_sqes_total{tenant=\"%s\"} %llu\n",
		    esc(ctl->cfg->tenants[t].name, e1, sizeof(e1)),
		    (unsigned long long)(n + ctl->tenant_sqes_gone[t]));
	}

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
		     "verbs: error completions (each took the peer down)",
		     offsetof(struct rd_peer_stats, errors), true);
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

static void reply(struct rd_mconn *m, const char *status, const char *type, const char *body,
		  size_t blen)
{
	char hdr[256];
	int n = snprintf(hdr, sizeof(hdr),
			 "HTTP/1.0 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
			 status, type, blen);
	struct iovec iov[2] = { { hdr, (size_t)n }, { (void *)body, blen } };
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };

	/* The page fits the socket buffer of a fresh connection; what does not
	 * (a peer that never reads) is cut: this thread never blocks. */
	(void)sendmsg(m->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* A round that takes this long is a stuck poller (rounds are bounded: a
 * byte budget per client, a bounded transaction apply). */
#define HEALTH_STUCK_MS 2000

void rd_metrics_readable(struct rd_control *ctl, void *tag)
{
	struct rd_mconn *m = tag;
	ssize_t n = read(m->fd, m->buf + m->have, sizeof(m->buf) - 1 - m->have);

	if (n <= 0) {
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		mconn_close(ctl, m);
		return;
	}
	m->have += (uint32_t)n;
	m->buf[m->have] = 0;
	if (!strstr(m->buf, "\r\n\r\n") && !strstr(m->buf, "\n\n")) {
		if (m->have >= sizeof(m->buf) - 1) {
			reply(m, "431 Request Header Fields Too Large", "text/plain", "", 0);
			mconn_close(ctl, m);
		}
		return;
	}
	if (strncmp(m->buf, "GET ", 4)) {
		reply(m, "405 Method Not Allowed", "text/plain", "GET only\n", 9);
	} else if (!strncmp(m->buf + 4, "/readyz ", 8)) {
		/* readiness probe: roshmd serves its pods without the registry,
		 * but cannot publish or find regions across nodes; a draining
		 * roshmd (SIGTERM) takes no new work */
		if (ctl->stopping)
			reply(m, "503 Service Unavailable", "text/plain", "draining\n", 9);
		else if (ctl->reg.ops->ready(&ctl->reg))
			reply(m, "200 OK", "text/plain", "ready\n", 6);
		else
			reply(m, "503 Service Unavailable", "text/plain", "registry not ready\n", 19);
	} else if (!strncmp(m->buf + 4, "/healthz ", 9)) {
		/* liveness probe: this thread answers, and the poller is asleep
		 * or began a round in the last HEALTH_STUCK_MS */
		char body[96];
		uint64_t ms = rd_poller_stuck_ms(ctl->poller);
		int bl = ms < HEALTH_STUCK_MS ? snprintf(body, sizeof(body), "ok\n") :
			 snprintf(body, sizeof(body), "poller in one round for %llu ms\n",
				  (unsigned long long)ms);

		reply(m, ms < HEALTH_STUCK_MS ? "200 OK" : "503 Service Unavailable", "text/plain", body,
		      (size_t)bl);
	} else if (strncmp(m->buf + 4, "/metrics ", 9) && strncmp(m->buf + 4, "/metrics?", 9)) {
		reply(m, "404 Not Found", "text/plain", "try /metrics, /healthz or /readyz\n", 34);
	} else {
		size_t len;
		char *page = rd_metrics_page(ctl, &len);

		if (page)
			reply(m, "200 OK", "text/plain; version=0.0.4; charset=utf-8", page, len);
		else
			reply(m, "500 Internal Server Error", "text/plain", "", 0);
		free(page);
	}
	mconn_close(ctl, m);
}
