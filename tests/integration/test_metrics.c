// SPDX-License-Identifier: MIT
/*
 * /metrics after real operations, checked against exactly what the test
 * did: completions by transport, operation and status class, latency
 * histograms (local and tcp), the registry's requests, quota refusals and
 * throttling, the CQ-full counter, peers up and down. Real roshmd
 * processes in a private network namespace (loopback only): one node with
 * the local transport, then two nodes with tcp and a shared file registry.
 * Each page is fetched whole (Content-Length: with the namespace's 4 KiB
 * TCP send buffers and a small receive window, roshmd sends a page over
 * many writable events),
 * parsed, and every histogram checked for buckets that never decrease and a
 * +Inf bucket equal to its count.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "roshm.h"
#include "harness.h"

#define M1 9501           /* metrics of the one-node daemon */
#define M2 9502           /* metrics of tcp node 1 (owner) and node 2 (user) */
#define M3 9503
#define TCP1 7501
#define TCP2 7502
#define TENANTS                                                                       \
	"tenants = ( { name = \"default\"; token = \"\"; },\n"                       \
	"  { name = \"q\"; token = \"tq-token-for-the-metrics-test\";\n"             \
	"    quota = { clients = 1; regions = 1; txn = 1; peer_inflight = 1;\n"           \
	"              registry_ops_per_sec = 2; }; } );\n"
#define QTOKEN "tq-token-for-the-metrics-test"

static char workdir[256], secret[300];

/* ---- the page ---- */

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* GET /metrics on 127.0.0.1:@port: the body, whole (its Content-Length
 * checked), or NULL. */
static char *scrape(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	const char req[] = "GET /metrics HTTP/1.0\r\n\r\n";
	size_t len = 0, cap = 1 << 16;
	char *buf = malloc(cap), *body, *cl;
	uint64_t deadline = now_ms() + 5000;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), small = 4096;

	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	/* a small window: the page cannot be sent in one go */
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	if (!buf || fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    write(fd, req, sizeof(req) - 1) != (ssize_t)sizeof(req) - 1) {
		fprintf(stderr, "scrape :%d: %s\n", port, strerror(errno));
		goto fail;
	}
	for (;;) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (now_ms() > deadline || poll(&pf, 1, 1000) < 0) {
			fprintf(stderr, "scrape :%d: no end of the answer in 5 s\n", port);
			goto fail;
		}
		if (len + 4096 >= cap) {
			char *b = realloc(buf, cap * 2);

			if (!b)
				goto fail;
			buf = b;
			cap *= 2;
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			goto fail;
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = 0;
	close(fd);
	body = strstr(buf, "\r\n\r\n");
	cl = strcasestr(buf, "\r\nContent-Length: ");
	if (strncmp(buf, "HTTP/1.0 200 ", 13) || !body || !cl || cl > body ||
	    strtoull(cl + 18, NULL, 10) != len - (size_t)(body + 4 - buf)) {
		fprintf(stderr, "scrape :%d: not a whole 200 answer (%zu bytes):\n%.300s\n", port, len, buf);
		free(buf);
		return NULL;
	}
	memmove(buf, body + 4, len - (size_t)(body + 4 - buf) + 1);
	return buf;
fail:
	if (fd >= 0)
		close(fd);
	free(buf);
	return NULL;
}

/* The value of the series @fmt (name and labels, exactly as printed), NAN
 * when the page has no such line. */
static double val(const char *page, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static double val(const char *page, const char *fmt, ...)
{
	char series[512];
	size_t n;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(series, sizeof(series), fmt, ap);
	va_end(ap);
	n = strlen(series);
	for (const char *p = page; p && *p;) {
		const char *nl = strchr(p, '\n');

		if (!strncmp(p, series, n) && p[n] == ' ')
			return strtod(p + n + 1, NULL);
		p = nl ? nl + 1 : NULL;
	}
	return NAN;
}

#define EXPECT(page, want, ...)                                                             \
	do {                                                                                \
		double _v = val(page, __VA_ARGS__), _w = (double)(want);                    \
		if (_v != _w) {                                                             \
			char _s[512];                                                       \
			snprintf(_s, sizeof(_s), __VA_ARGS__);                              \
			fail_msg("%s = %g, expected %g", _s, _v, _w);                      \
		}                                                                           \
	} while (0)

/*
 * The histogram @name{@labels}: its buckets never decrease, +Inf is its
 * count, the sum is not negative. Returns the count; *avg the mean.
 */
static double hist(const char *page, const char *name, const char *labels, double *avg)
{
	char pre[512];
	double last = -1, inf = NAN, count, sum;
	size_t n;

	n = (size_t)snprintf(pre, sizeof(pre), "%s_bucket{%s,le=\"", name, labels);
	for (const char *p = page; p && *p;) {
		const char *nl = strchr(p, '\n'), *q;

		if (!strncmp(p, pre, n)) {
			double v;

			q = strchr(p + n, ' ');
			assert_non_null(q);
			v = strtod(q + 1, NULL);
			if (v < last)
				fail_msg("%s: bucket %.*s = %g after %g", pre, (int)(q - p - n), p + n, v, last);
			last = v;
			if (!strncmp(p + n, "+Inf\"}", 6))
				inf = v;
		}
		p = nl ? nl + 1 : NULL;
	}
	count = val(page, "%s_count{%s}", name, labels);
	sum = val(page, "%s_sum{%s}", name, labels);
	if (isnan(inf) || inf != count || !(sum >= 0))
		fail_msg("%s{%s}: +Inf %g, count %g, sum %g", name, labels, inf, count, sum);
	*avg = count > 0 ? sum / count : 0;
	return count;
}

/* Every histogram on the page, checked (each _count line names one). */
static void all_hists(const char *page)
{
	int n = 0;

	for (const char *p = page; p && *p;) {
		const char *nl = strchr(p, '\n'), *c = strstr(p, "_count{");

		if (p[0] != '#' && c && (!nl || c < nl)) {
			char name[128], labels[384];
			const char *b = c + 7, *e = strchr(b, '}');
			double avg;

			snprintf(name, sizeof(name), "%.*s", (int)(c - p), p);
			snprintf(labels, sizeof(labels), "%.*s", (int)(e - b), b);
			hist(page, name, labels, &avg);
			n++;
		}
		p = nl ? nl + 1 : NULL;
	}
	assert_true(n > 0);
}

/* Wait (10 s at most) until @series is @want on @port's page, or at least
 * @want with @atleast: what a thread learns a little later. */
static bool wait_val(int port, const char *series, double want, bool atleast)
{
	for (uint64_t end = now_ms() + 10000; now_ms() < end; usleep(50000)) {
		char *page = scrape(port);
		double v = page ? val(page, "%s", series) : NAN;

		free(page);
		if (v == want || (atleast && v > want))
			return true;
	}
	return false;
}

/* ---- clients ---- */

static struct roshm *attach_as(const struct th_daemon *d, const char *tenant, const char *token,
			       uint32_t entries, int *err)
{
	struct roshm_params p = { .sock_path = d->sock, .tenant = tenant, .token = token,
				  .sq_entries = entries, .cq_entries = entries, .reconnect_ms = 300 };

	return roshm_open(&p, err);
}

static struct roshm *attach(const struct th_daemon *d)
{
	int err;
	struct roshm *r = attach_as(d, "default", "", 0, &err);

	if (!r)
		fail_msg("attach to %s: %s", d->name, roshm_strerror(err));
	return r;
}

static struct roshm_sqe *sqe_of(struct roshm *r)
{
	struct roshm_sqe *s = roshm_get_sqe(r);

	assert_non_null(s);
	return s;
}

/* Submit what is prepared and reap @n completions, their statuses in @st. */
static void reap(struct roshm *r, int n, int32_t *st)
{
	assert_true(roshm_submit(r) >= 0);
	for (int i = 0; i < n; i++) {
		struct roshm_cqe *c;

		assert_int_equal(roshm_wait_cqe_timeout(r, &c, 10000), 0);
		if (st)
			st[i] = c->status;
		roshm_cqe_seen(r, c);
	}
}

static int open_retry(struct roshm *r, const char *name, uint32_t *h)
{
	int ret = -ENOENT;

	for (int i = 0; i < 500 && (ret == -ENOENT || ret == -EHOSTUNREACH); i++) {
		ret = roshm_region_open(r, name, h, NULL);
		if (ret == -ENOENT || ret == -EHOSTUNREACH)
			usleep(10000);
	}
	return ret;
}

/* The client-visible status as its class on the page (docs/operations.md). */
static const char *status_class(int32_t st)
{
	switch (-st) {
	case 0: return "ok";
	case EINVAL: case EBADF: case EFAULT: case EOPNOTSUPP: case EMSGSIZE: return "invalid";
	case EACCES: return "denied";
	case ESTALE: return "stale";
	case EHOSTUNREACH: return "unreachable";
	case ECONNRESET: return "reset";
	case EAGAIN: case EBUSY: case ENOSPC: case EDQUOT: return "busy";
	case ETIMEDOUT: return "timeout";
	default: return "error";
	}
}

/* ---- one node: the local transport ---- */

#define C(page, want, xp, op, st) \
	EXPECT(page, want, "roshm_completions_total{transport=\"%s\",op=\"%s\",status=\"%s\"}", xp, op, st)

static void test_local(void **state)
{
	struct th_daemon d;
	struct roshm_region_opts log = { .txn_slots = 16, .slot_size = 256 };
	struct roshm_txn_write tw = { .off = 4096, .arena_off = 0, .len = 64 };
	char extra[1024], *page;
	struct roshm *r, *q, *q2, *s;
	uint32_t hm, hp, hq, hq2;
	uint64_t old, sqes = 0, put0, del0;
	int32_t st[16];
	int err;
	double avg;

	(void)state;
	snprintf(extra, sizeof(extra), TENANTS "metrics: { listen = \"127.0.0.1:%d\"; };\n", M1);
	assert_int_equal(th_daemon_start(&d, "met-local", extra), 0);
	r = attach(&d);
	assert_int_equal(roshm_region_create(r, "m", 1 << 20, &log, &hm), 0);
	assert_int_equal(roshm_region_create(r, "p", 1 << 18, NULL, &hp), 0);

	for (int i = 0; i < 3; i++)
		assert_int_equal(roshm_nop_sync(r), 0);
	roshm_prep_fence(sqe_of(r));
	reap(r, 1, st);
	assert_int_equal(st[0], 0);
	for (int i = 0; i < 10; i++)
		assert_int_equal(roshm_write_sync(r, hm, (uint64_t)i * 64, 0, 64), 0);
	/* one bigger than a poll round's piece: copied over several rounds */
	assert_int_equal(roshm_write_sync(r, hm, 1 << 19, 0, 200 << 10), 0);
	for (int i = 0; i < 7; i++)
		assert_int_equal(roshm_read_sync(r, hm, 0, 65536, 64), 0);
	for (int i = 0; i < 5; i++)
		assert_int_equal(roshm_fetch_add_sync(r, hm, 8192, 1, &old), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(roshm_cmp_swap_sync(r, hm, 8200, (uint64_t)i, (uint64_t)i + 1, &old), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(roshm_txn_sync(r, hm, &tw, 1, NULL), 0);
	sqes = 3 + 1 + 11 + 7 + 5 + 4 + 3 * 2;
	/* refused: out of bounds, misaligned, a transaction on a region without a log */
	assert_int_equal(roshm_write_sync(r, hp, 1 << 18, 0, 64), -EFAULT);
	assert_int_equal(roshm_fetch_add_sync(r, hp, 4, 1, &old), -EINVAL);
	assert_int_equal(roshm_txn_sync(r, hp, &tw, 1, NULL), -EOPNOTSUPP);
	sqes += 1 + 1 + 2;

	page = scrape(M1);
	assert_non_null(page);
	all_hists(page);
	C(page, 3, "none", "nop", "ok");
	C(page, 1, "none", "fence", "ok");
	C(page, 11, "local", "write", "ok");
	C(page, 7, "local", "read", "ok");
	C(page, 5, "local", "fetch_add", "ok");
	C(page, 4, "local", "compare_swap", "ok");
	C(page, 3, "local", "txn_commit", "ok");
	C(page, 1, "none", "write", "invalid");
	C(page, 1, "none", "fetch_add", "invalid");
	C(page, 1, "none", "txn_commit", "invalid");
	EXPECT(page, 3, "roshm_sqe_errors_total");
	EXPECT(page, (double)sqes, "roshm_sqes_total");
	EXPECT(page, 3, "roshm_txn_committed_total");
	EXPECT(page, 3, "roshm_txn_applied_total");
	/* local latency: one observation per successful operation, the
	 * poller's time on it (well under a millisecond each, on average) */
	static const struct { const char *op; int n; } lat[] = {
		{ "write", 11 }, { "read", 7 }, { "fetch_add", 5 }, { "compare_swap", 4 },
		{ "txn_commit", 3 } };
	for (size_t i = 0; i < sizeof(lat) / sizeof(lat[0]); i++) {
		char labels[128];

		snprintf(labels, sizeof(labels), "transport=\"local\",op=\"%s\"", lat[i].op);
		assert_int_equal(hist(page, "roshm_op_latency_seconds", labels, &avg), lat[i].n);
		if (!(avg > 0 && avg < 0.01))
			fail_msg("local %s: mean latency %g s", lat[i].op, avg);
	}
	/* no network transport here: no rows for one */
	assert_null(strstr(page, "transport=\"tcp\""));
	assert_null(strstr(page, "transport=\"verbs\""));
	/* the registry: the node record and two regions put, nothing failed */
	put0 = (uint64_t)val(page, "roshm_registry_latency_seconds_count{backend=\"file\",op=\"put\"}");
	assert_true(put0 >= 3);
	assert_true(val(page, "roshm_registry_latency_seconds_count{backend=\"file\",op=\"get\"}") >= 2);
	for (int o = 0; o < 3; o++)
		for (int w = 0; w < 5; w++) {
			static const char *const ops[] = { "put", "get", "delete" };
			static const char *const why[] = { "timeout", "unreachable", "denied", "invalid",
							   "other" };

			EXPECT(page, 0, "roshm_registry_errors_total{backend=\"file\",op=\"%s\",reason=\"%s\"}",
			       ops[o], why[w]);
		}
	assert_true(isnan(val(page, "roshm_registry_latency_seconds_count{backend=\"file\",op=\"watch\"}")));
	del0 = (uint64_t)val(page, "roshm_registry_latency_seconds_count{backend=\"file\",op=\"delete\"}");
	EXPECT(page, 1, "roshm_registry_ready");
	EXPECT(page, 0, "roshm_registry_lease_lost_total");
	/* the standard process metrics */
	assert_true(fabs(val(page, "process_start_time_seconds") - (double)time(NULL)) < 300);
	assert_true(val(page, "process_cpu_seconds_total") > 0);
	assert_true(val(page, "process_resident_memory_bytes") > 0);
	assert_true(val(page, "process_open_fds") > 0);
	free(page);

	/* a region closed: its record deleted */
	assert_int_equal(roshm_region_close(r, hp), 0);
	page = scrape(M1);
	assert_non_null(page);
	EXPECT(page, (double)(del0 + 1), "roshm_registry_latency_seconds_count{backend=\"file\",op=\"delete\"}");
	free(page);

	/* quotas of tenant q: one client, one region */
	q = attach_as(&d, "q", QTOKEN, 0, &err);
	assert_non_null(q);
	assert_int_equal(roshm_region_create(q, "q1", 4096, NULL, &hq), 0);
	assert_int_equal(roshm_region_create(q, "q2", 4096, NULL, &hq2), -EDQUOT);
	q2 = attach_as(&d, "q", QTOKEN, 0, &err);
	assert_null(q2);
	assert_int_equal(err, -EDQUOT);
	page = scrape(M1);
	assert_non_null(page);
	EXPECT(page, 1, "roshm_tenant_quota_refusals_total{tenant=\"q\",request=\"attach\"}");
	EXPECT(page, 1, "roshm_tenant_quota_refusals_total{tenant=\"q\",request=\"region\"}");
	EXPECT(page, 0, "roshm_tenant_quota_refusals_total{tenant=\"q\",request=\"txn\"}");
	EXPECT(page, 0, "roshm_tenant_quota_refusals_total{tenant=\"default\",request=\"attach\"}");
	EXPECT(page, 0, "roshm_tenant_throttled_total{tenant=\"q\",reason=\"peer\"}");
	/* q1's create took q's 2 registry operations a second: q2's waited */
	EXPECT(page, 1, "roshm_tenant_registry_held_total{tenant=\"q\"}");
	EXPECT(page, 0, "roshm_tenant_registry_held_total{tenant=\"default\"}");
	/* grants' own MRs are the verbs transport's: none over tcp */
	EXPECT(page, 0, "roshm_tenant_grant_mrs{tenant=\"q\"}");
	EXPECT(page, 0, "roshm_tenant_grants_without_mr_total{tenant=\"q\"}");
	EXPECT(page, 0, "roshm_cq_full_total");
	free(page);
	roshm_close(q);

	/* a client that does not reap: its CQ fills and an SQE waits */
	s = attach_as(&d, "default", "", 8, &err);
	assert_non_null(s);
	for (int i = 0; i < 8; i++)
		roshm_prep_nop(sqe_of(s));
	assert_int_equal(roshm_submit(s), 8);
	for (uint64_t end = now_ms() + 5000; now_ms() < end; usleep(1000)) {
		struct roshm_cqe *c[8];

		if (roshm_peek_batch_cqe(s, c, 8) == 8)
			break;
	}
	roshm_prep_nop(sqe_of(s));
	assert_int_equal(roshm_submit(s), 1);
	assert_true(wait_val(M1, "roshm_cq_full_total", 1, true));
	{
		struct roshm_cqe *c;

		for (int i = 0; i < 9; i++) {
			assert_int_equal(roshm_wait_cqe_timeout(s, &c, 5000), 0);
			assert_int_equal(c->status, 0);
			roshm_cqe_seen(s, c);
		}
	}
	roshm_close(s);
	page = scrape(M1);
	assert_non_null(page);
	C(page, 3 + 9, "none", "nop", "ok");
	assert_true(val(page, "roshm_cq_full_total") >= 1);
	free(page);

	roshm_close(r);
	assert_int_equal(th_daemon_stop(&d), 0);
}

/* ---- two nodes: tcp ---- */

static void tcp_start(struct th_daemon *d, const char *name, int port, int mport)
{
	char extra[2048];

	snprintf(extra, sizeof(extra),
		 TENANTS
		 "transport: { tcp: { enabled = true; listen = \"127.0.0.1\"; port = %d;"
		 " secret_file = \"%s\"; }; };\n"
		 "registry: { dir = \"%s/registry\"; revalidate_ms = 100; };\n"
		 "metrics: { listen = \"127.0.0.1:%d\"; };\n"
		 "drain: { timeout_ms = 2000; };\n",
		 port, secret, workdir, mport);
	assert_int_equal(th_daemon_start(d, name, extra), 0);
}

static void test_tcp(void **state)
{
	struct roshm_region_opts log = { .txn_slots = 16, .slot_size = 256 };
	struct roshm_txn_write tw = { .off = 4096, .arena_off = 0, .len = 64 };
	struct th_daemon n1, n2;
	struct roshm *own, *qown, *u, *qu;
	uint32_t ho, hq, h, hqu;
	uint64_t old, t0;
	int32_t st[32];
	char *page, labels[128];
	int err, ret;
	double avg;

	(void)state;
	tcp_start(&n1, "met-n1", TCP1, M2);
	tcp_start(&n2, "met-n2", TCP2, M3);
	own = attach(&n1);
	assert_int_equal(roshm_region_create(own, "t", 1 << 20, &log, &ho), 0);
	qown = attach_as(&n1, "q", QTOKEN, 0, &err);
	assert_non_null(qown);
	assert_int_equal(roshm_region_create(qown, "qt", 1 << 20, &log, &hq), 0);

	u = attach(&n2);
	assert_int_equal(open_retry(u, "default/t", &h), 0);
	for (int i = 0; i < 20; i++)
		assert_int_equal(roshm_write_sync(u, h, (uint64_t)i * 64, 0, 64), 0);
	for (int i = 0; i < 10; i++)
		assert_int_equal(roshm_read_sync(u, h, 0, 65536, 64), 0);
	for (int i = 0; i < 6; i++)
		assert_int_equal(roshm_fetch_add_sync(u, h, 8192, 1, &old), 0);
	for (int i = 0; i < 5; i++)
		assert_int_equal(roshm_cmp_swap_sync(u, h, 8200, (uint64_t)i, (uint64_t)i + 1, &old), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(roshm_txn_sync(u, h, &tw, 1, NULL), 0);
	assert_int_equal(roshm_write_sync(u, h, 1 << 20, 0, 64), -EFAULT);

	page = scrape(M3);
	assert_non_null(page);
	all_hists(page);
	C(page, 20, "tcp", "write", "ok");
	C(page, 10, "tcp", "read", "ok");
	C(page, 6, "tcp", "fetch_add", "ok");
	C(page, 5, "tcp", "compare_swap", "ok");
	C(page, 4, "tcp", "txn_commit", "ok");
	C(page, 1, "none", "write", "invalid");
	C(page, 0, "local", "write", "ok");
	EXPECT(page, 1, "roshm_sqe_errors_total");
	static const struct { const char *op; int n; } lat[] = {
		{ "write", 20 }, { "read", 10 }, { "fetch_add", 6 }, { "compare_swap", 5 },
		{ "txn_commit", 4 } };
	for (size_t i = 0; i < sizeof(lat) / sizeof(lat[0]); i++) {
		snprintf(labels, sizeof(labels), "transport=\"tcp\",op=\"%s\"", lat[i].op);
		assert_int_equal(hist(page, "roshm_op_latency_seconds", labels, &avg), lat[i].n);
		if (!(avg > 0 && avg < 1))
			fail_msg("tcp %s: mean latency %g s", lat[i].op, avg);
	}
	assert_int_equal(hist(page, "roshm_op_latency_seconds", "transport=\"local\",op=\"write\"", &avg), 0);
	assert_null(strstr(page, "transport=\"verbs\""));
	EXPECT(page, 1, "roshm_peer_up{node=\"met-n1\",transport=\"tcp\"}");
	/* a transaction over tcp is one request (TXN_COMMIT: the owner's
	 * roshmd reserves, stages and commits) */
	assert_true(val(page, "roshm_peer_work_requests_total{node=\"met-n1\"}") >= 20 + 10 + 6 + 5 + 4);
	EXPECT(page, 4, "roshm_txn_one_round_trip_total");
	EXPECT(page, 0, "roshm_txn_again_total");
	assert_true(val(page, "roshm_registry_latency_seconds_count{backend=\"file\",op=\"get\"}") >= 1);
	free(page);
	assert_true(wait_val(M2, "roshm_txn_applied_total", 4, false));

	/* tenant q on node 2: one operation in flight to a peer, one
	 * transaction at a time (quota.peer_inflight, quota.txn) */
	qu = attach_as(&n2, "q", QTOKEN, 64, &err);
	assert_non_null(qu);
	assert_int_equal(open_retry(qu, "q/qt", &hqu), 0);
	for (int i = 0; i < 16; i++)
		roshm_prep_write(sqe_of(qu), hqu, (uint64_t)i * 64, 0, 64);
	reap(qu, 16, st);
	for (int i = 0; i < 16; i++)
		assert_int_equal(st[i], 0);
	roshm_prep_txn_write(sqe_of(qu), hqu, 0, 0, 64);
	roshm_prep_txn_commit(sqe_of(qu), hqu);
	roshm_prep_txn_write(sqe_of(qu), hqu, 64, 0, 64);
	roshm_prep_txn_commit(sqe_of(qu), hqu);
	reap(qu, 2, st);
	assert_true((st[0] == 0 && st[1] == -EBUSY) || (st[0] == -EBUSY && st[1] == 0));
	page = scrape(M3);
	assert_non_null(page);
	assert_true(val(page, "roshm_tenant_throttled_total{tenant=\"q\",reason=\"peer\"}") >= 1);
	EXPECT(page, 0, "roshm_tenant_throttled_total{tenant=\"default\",reason=\"peer\"}");
	EXPECT(page, 0, "roshm_tenant_throttled_total{tenant=\"q\",reason=\"rate\"}");
	EXPECT(page, 1, "roshm_tenant_quota_refusals_total{tenant=\"q\",request=\"txn\"}");
	C(page, 1, "tcp", "txn_commit", "busy");
	C(page, 5, "tcp", "txn_commit", "ok");
	C(page, 36, "tcp", "write", "ok");
	free(page);

	/* node 1 dies: node 2 sees the peer down, and an operation on its
	 * region fails with a status counted in its class */
	th_daemon_kill(&n1);
	assert_true(wait_val(M3, "roshm_peer_up{node=\"met-n1\",transport=\"tcp\"}", 0, false));
	t0 = now_ms();
	ret = roshm_write_sync(u, h, 0, 0, 64);
	print_message("a write to the dead node's region: %s after %llu ms\n", roshm_strerror(ret),
		      (unsigned long long)(now_ms() - t0));
	assert_true(ret < 0);
	page = scrape(M3);
	assert_non_null(page);
	if (val(page, "roshm_completions_total{transport=\"tcp\",op=\"write\",status=\"%s\"}",
		status_class(ret)) != 1 &&
	    val(page, "roshm_completions_total{transport=\"none\",op=\"write\",status=\"%s\"}",
		status_class(ret)) != 1)
		fail_msg("no write completion counted as %s", status_class(ret));
	/* out of bounds, the refused commit, this write */
	EXPECT(page, 3, "roshm_sqe_errors_total");
	free(page);

	roshm_close(qu);
	roshm_close(u);
	roshm_close(qown);
	roshm_close(own);
	assert_int_equal(th_daemon_stop(&n2), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_local),
		cmocka_unit_test(test_tcp),
	};
	char ns[64];
	FILE *f;

	if (geteuid() != 0) {
		printf("metrics: skipped: needs root for a private network namespace\n");
		return 77;
	}
	th_cleanup_enable();
	/* a namespace of our own: fixed ports on its loopback, nobody else's;
	 * small send buffers, so that a page does not fit one */
	snprintf(ns, sizeof(ns), "%s-met%d", th_tag(), (int)getpid() % 100000);
	if (th_sh("ip netns add %s && ip -n %s link set lo up && "
		  "ip netns exec %s sysctl -qw net.ipv4.tcp_wmem='4096 4096 4096'", ns, ns, ns)) {
		printf("metrics: cannot make a network namespace\n");
		return 1;
	}
	th_cleanup_sh("ip netns del %s 2>/dev/null", ns);
	if (th_enter_netns(ns) || th_mkdtemp(workdir, sizeof(workdir), "metrics")) {
		printf("metrics: cannot enter the namespace or make a directory\n");
		return 1;
	}
	snprintf(secret, sizeof(secret), "%s/cluster.secret", workdir);
	f = fopen(secret, "w");
	if (!f)
		return 1;
	fprintf(f, "roshm-metrics-test-secret-0123456789\n");
	fclose(f);
	return cmocka_run_group_tests_name("metrics", tests, NULL, NULL);
}
