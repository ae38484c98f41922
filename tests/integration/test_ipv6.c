// SPDX-License-Identifier: MIT
/*
 * IPv6: two real roshmd in network namespaces that talk tcp over IPv6
 * (fd00:198:18::1 and ::2 behind a bridge), pods on both sides doing
 * WRITE, READ, FETCH_ADD, COMPARE_SWAP and a transaction across, both ways:
 *   node1 listens on "::" (dual-stack) and learns its address from
 *         ROSHM_ADVERTISE="[fd00:198:18::1]"; metrics on [::1]
 *   node2 listens on fd00:198:18::2 (advertised as itself); metrics on [::]
 * Their registry records carry the bracketed IPv6 endpoints, each accepts
 * the other's connection from the address of its record
 * (check_peer_address), /metrics answers on [::1], and node2's "::"
 * metrics listener takes IPv4 too. Then a dual-stack listener with IPv4
 * peers: node4 (in node1's namespace) listens on "::" and advertises
 * 198.18.0.1, node3 is plain IPv4; node3's connection arrives as
 * ::ffff:198.18.0.3 and must pass the record check against 198.18.0.3.
 * Exits 77 when IPv6 is disabled here.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "roshm.h"
#include "harness.h"

#define SECRET "roshm-ipv6-test-cluster-secret-0123456789"
#define PORT 7471
#define PORT_V4 7481
#define MPORT 9472

static char prefix[64], workdir[200], ns[4][80];
static struct th_daemon node1, node2, node3, node4;

#define CHECK(cond) do { if (!(cond)) { fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); return 1; } } while (0)
#define CHECK_EQ(a, b) do { long long _a = (long long)(a), _b = (long long)(b); if (_a != _b) { fprintf(stderr, "%s:%d: %s = %lld, expected %lld\n", __FILE__, __LINE__, #a, _a, _b); return 1; } } while (0)

/* ---- pods ---- */

struct pod_ctx {
	const struct th_daemon *owner_node, *user_node;
	char name[64];
	struct th_chan ready, done;
};

static struct roshm *attach(const struct th_daemon *d)
{
	struct roshm_params p = { .sock_path = d->sock };
	int err;
	struct roshm *r = roshm_open(&p, &err);

	if (!r)
		fprintf(stderr, "attach to %s: %s\n", d->name, roshm_strerror(err));
	return r;
}

/* The owner: a region with a transaction log; checks what the user did. */
static int owner(void *arg)
{
	struct pod_ctx *x = arg;
	struct roshm_region_opts o = { .txn_slots = 8, .slot_size = 1024 };
	struct roshm *r = attach(x->owner_node);
	uint8_t *d, snap[256];
	uint32_t h;

	CHECK(r);
	CHECK_EQ(roshm_region_create(r, x->name, 1 << 20, &o, &h), 0);
	d = roshm_region_data(r, h, NULL);
	CHECK(d);
	for (int i = 0; i < 4096; i++)
		d[65536 + i] = (uint8_t)(i * 7);
	th_chan_send(&x->ready, 1);
	CHECK_EQ(th_chan_recv(&x->done), 1);
	for (int i = 0; i < 3000; i++)
		CHECK_EQ(d[i], (uint8_t)(i ^ 0xa5));
	CHECK_EQ(*(volatile uint64_t *)(d + 8192), 42);
	CHECK_EQ(*(volatile uint64_t *)(d + 8200), 9);
	/* the transaction: both writes, seen together */
	for (int i = 0; i < 200; i++) {
		CHECK_EQ(roshm_region_read_consistent(r, h, 16384, snap, sizeof(snap)), 0);
		if (snap[0] == 0x11)
			break;
		usleep(10000);
	}
	for (int i = 0; i < 128; i++) {
		CHECK_EQ(snap[i], 0x11);
		CHECK_EQ(snap[128 + i], 0x22);
	}
	roshm_close(r);
	return 0;
}

static int user(void *arg)
{
	struct pod_ctx *x = arg;
	struct roshm *r = attach(x->user_node);
	char full[128];
	uint64_t size = 0, old, seq;
	uint32_t h;
	uint8_t *a;
	int ret = -ENOENT;

	CHECK(r);
	CHECK_EQ(th_chan_recv(&x->ready), 1);
	snprintf(full, sizeof(full), "default/%s", x->name);
	for (int i = 0; i < 500 && ret == -ENOENT; i++) {
		ret = roshm_region_open(r, full, &h, &size);
		if (ret == -ENOENT)
			usleep(10000);
	}
	CHECK_EQ(ret, 0);
	CHECK_EQ(size, 1 << 20);
	a = roshm_arena(r, NULL);
	for (int i = 0; i < 3000; i++)
		a[i] = (uint8_t)(i ^ 0xa5);
	CHECK_EQ(roshm_write_sync(r, h, 0, 0, 3000), 0);
	memset(a + 8192, 0, 4096);
	CHECK_EQ(roshm_read_sync(r, h, 65536, 8192, 4096), 0);
	for (int i = 0; i < 4096; i++)
		CHECK_EQ(a[8192 + i], (uint8_t)(i * 7));
	CHECK_EQ(roshm_fetch_add_sync(r, h, 8192, 40, &old), 0);
	CHECK_EQ(old, 0);
	CHECK_EQ(roshm_fetch_add_sync(r, h, 8192, 2, &old), 0);
	CHECK_EQ(old, 40);
	CHECK_EQ(roshm_cmp_swap_sync(r, h, 8200, 0, 9, &old), 0);
	CHECK_EQ(old, 0);
	CHECK_EQ(roshm_cmp_swap_sync(r, h, 8200, 0, 5, &old), 0);
	CHECK_EQ(old, 9);
	memset(a + 32768, 0x11, 128);
	memset(a + 32768 + 128, 0x22, 128);
	struct roshm_txn_write w[2] = { { .off = 16384, .arena_off = 32768, .len = 128 },
					{ .off = 16384 + 128, .arena_off = 32768 + 128, .len = 128 } };

	CHECK_EQ(roshm_txn_sync(r, h, w, 2, &seq), 0);
	th_chan_send(&x->done, 1);
	roshm_close(r);
	return 0;
}

/* A pod on @owner_node owns a region that a pod on @user_node works on. */
static void across(const struct th_daemon *owner_node, const char *owner_ns,
		   const struct th_daemon *user_node, const char *user_ns, const char *name)
{
	struct pod_ctx x = { .owner_node = owner_node, .user_node = user_node };

	th_chan_init(&x.ready);
	th_chan_init(&x.done);
	snprintf(x.name, sizeof(x.name), "%s", name);
	pid_t o = th_spawn_ns(owner_ns, owner, &x), u = th_spawn_ns(user_ns, user, &x);
	int su = th_wait(u), so = th_wait(o);

	if (su || so) {
		th_daemon_dump_log((struct th_daemon *)owner_node);
		th_daemon_dump_log((struct th_daemon *)user_node);
		fail_msg("%s -> %s: user exit %d, owner exit %d", user_node->name, owner_node->name, su, so);
	}
}

/* ---- helpers ---- */

/* The file @path holds @needle. */
static bool file_has(const char *path, const char *needle)
{
	char buf[65536];
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

	if (f)
		fclose(f);
	buf[n] = 0;
	return strstr(buf, needle) != NULL;
}

struct http_ctx {
	const char *netns;
	char host[64];
	int family;
	uint16_t port;
	const char *path, *want;
};

/* GET @path from [host]:port inside @netns; 0 when the answer is 200 and holds @want. */
static int http_get(void *arg)
{
	struct http_ctx *x = arg;
	struct sockaddr_storage ss = { 0 };
	socklen_t sl;
	char req[256], buf[65536];
	size_t have = 0;
	ssize_t n;
	int fd;

	if (x->family == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(x->port);
		CHECK(inet_pton(AF_INET6, x->host, &s6->sin6_addr) == 1);
		sl = sizeof(*s6);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		s4->sin_family = AF_INET;
		s4->sin_port = htons(x->port);
		CHECK(inet_pton(AF_INET, x->host, &s4->sin_addr) == 1);
		sl = sizeof(*s4);
	}
	fd = socket(x->family, SOCK_STREAM, 0);
	CHECK(fd >= 0);
	if (connect(fd, (struct sockaddr *)&ss, sl)) {
		fprintf(stderr, "connect %s port %u: %s\n", x->host, x->port, strerror(errno));
		return 1;
	}
	snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\n\r\n", x->path);
	CHECK(write(fd, req, strlen(req)) == (ssize_t)strlen(req));
	while (have < sizeof(buf) - 1 && (n = read(fd, buf + have, sizeof(buf) - 1 - have)) > 0)
		have += (size_t)n;
	buf[have] = 0;
	close(fd);
	if (strncmp(buf, "HTTP/1.0 200", 12) && strncmp(buf, "HTTP/1.1 200", 12)) {
		fprintf(stderr, "GET %s from %s: %.80s\n", x->path, x->host, buf);
		return 1;
	}
	if (!strstr(buf, x->want)) {
		fprintf(stderr, "GET %s from %s: no '%s' in the answer\n", x->path, x->host, x->want);
		return 1;
	}
	return 0;
}

static void get_in_ns(const char *netns, int family, const char *host, uint16_t port,
		      const char *path, const char *want)
{
	struct http_ctx x = { .netns = netns, .family = family, .port = port, .path = path,
			      .want = want };

	snprintf(x.host, sizeof(x.host), "%s", host);
	int st = th_wait(th_spawn_ns(netns, http_get, &x));

	if (st)
		fail_msg("GET http://%s%s%s:%u%s in %s: exit %d", family == AF_INET6 ? "[" : "", host,
			 family == AF_INET6 ? "]" : "", port, path, netns, st);
}

/* ---- the IPv6 pair ---- */

static void test_records_carry_ipv6(void **state)
{
	char path[400], *json = NULL;

	(void)state;
	snprintf(path, sizeof(path), "%s/registry6/nodes/node1.json", workdir);
	if (!file_has(path, "\"endpoint\":\"tcp:[fd00:198:18::1]:7471\""))
		fail_msg("%s does not carry node1's IPv6 endpoint", path);
	snprintf(path, sizeof(path), "%s/registry6/nodes/node2.json", workdir);
	if (!file_has(path, "\"endpoint\":\"tcp:[fd00:198:18::2]:7471\""))
		fail_msg("%s does not carry node2's IPv6 endpoint", path);
	assert_int_equal(th_admin(&node1, "status", &json), 0);
	assert_non_null(strstr(json, "\"endpoint\":\"tcp:[fd00:198:18::1]:7471\""));
	free(json);
	if (!file_has(node1.log, "listening on [::]:7471 (IPv6 and IPv4)"))
		fail_msg("node1 does not say it listens dual-stack");
}

static void test_ops_node2_to_node1(void **state)
{
	(void)state;
	across(&node1, ns[1], &node2, ns[2], "v6-on-node1");
}

static void test_ops_node1_to_node2(void **state)
{
	char *json = NULL;

	(void)state;
	across(&node2, ns[2], &node1, ns[1], "v6-on-node2");
	/* both connections are up, each accepted from its record's address */
	assert_int_equal(th_admin(&node1, "peers", &json), 0);
	if (!strstr(json, "tcp:[fd00:198:18::2]:7471"))
		fail_msg("node1's peers: %s", json);
	free(json);
	assert_int_equal(th_admin(&node2, "peers", &json), 0);
	if (!strstr(json, "tcp:[fd00:198:18::1]:7471"))
		fail_msg("node2's peers: %s", json);
	free(json);
	if (file_has(node1.log, "refused") || file_has(node2.log, "refused")) {
		th_daemon_dump_log(&node1);
		th_daemon_dump_log(&node2);
		fail_msg("a connection was refused");
	}
	assert_true(file_has(node1.log, "node node2 connected to us"));
	assert_true(file_has(node2.log, "node node1 connected to us"));
}

static void test_metrics_ipv6(void **state)
{
	(void)state;
	/* node1: [::1] only */
	get_in_ns(ns[1], AF_INET6, "::1", MPORT, "/metrics", "node=\"node1\"");
	get_in_ns(ns[1], AF_INET6, "::1", MPORT, "/healthz", "ok");
	/* node2: "::", so its IPv6 address from another node, and IPv4 too */
	get_in_ns(ns[1], AF_INET6, "fd00:198:18::2", MPORT, "/metrics", "node=\"node2\"");
	get_in_ns(ns[2], AF_INET, "127.0.0.1", MPORT, "/metrics", "node=\"node2\"");
	get_in_ns(ns[1], AF_INET, "198.18.0.2", MPORT, "/readyz", "");
}

/* ---- a dual-stack listener with IPv4 peers ---- */

static void test_dual_stack_ipv4_peer(void **state)
{
	char path[400];

	(void)state;
	across(&node4, ns[1], &node3, ns[3], "v4-on-node4");
	across(&node3, ns[3], &node4, ns[1], "v4-on-node3");
	snprintf(path, sizeof(path), "%s/registry4/nodes/node3.json", workdir);
	assert_true(file_has(path, "\"endpoint\":\"tcp:198.18.0.3:7481\""));
	if (file_has(node4.log, "refused") || !file_has(node4.log, "node node3 connected to us")) {
		th_daemon_dump_log(&node4);
		fail_msg("node4 (listening on ::) did not take node3's IPv4 connection");
	}
}

/* ---- setup ---- */

static int start(struct th_daemon *d, const char *name, const char *netns, const char *tcp,
		 const char *reg, const char *metrics)
{
	char extra[2048];

	snprintf(extra, sizeof(extra),
		 "transport: { tcp: { enabled = true; %s secret_file = \"%s/cluster.secret\"; }; };\n"
		 "registry: { dir = \"%s/%s\"; revalidate_ms = 200; secret_file = \"%s/cluster.secret\"; };\n"
		 "%s%s%s\n",
		 tcp, workdir, workdir, reg, workdir, metrics ? "metrics: { listen = \"" : "",
		 metrics ? metrics : "", metrics ? "\"; };" : "");
	return th_daemon_start_ns(d, name, netns, extra);
}

static int setup(void **state)
{
	char m1[64], m2[64], tcp[256];

	(void)state;
	/* node1 learns what to advertise from the environment, as in a pod */
	setenv("ROSHM_ADVERTISE", "[fd00:198:18::1]", 1);
	snprintf(m1, sizeof(m1), "[::1]:%d", MPORT);
	snprintf(tcp, sizeof(tcp), "listen = \"::\"; port = %d;", PORT);
	int ret = start(&node1, "node1", ns[1], tcp, "registry6", m1);

	unsetenv("ROSHM_ADVERTISE");
	if (ret)
		return -1;
	snprintf(m2, sizeof(m2), "[::]:%d", MPORT);
	snprintf(tcp, sizeof(tcp), "listen = \"fd00:198:18::2\"; port = %d;", PORT);
	if (start(&node2, "node2", ns[2], tcp, "registry6", m2))
		return -1;
	snprintf(tcp, sizeof(tcp), "listen = \"198.18.0.3\"; port = %d;", PORT_V4);
	if (start(&node3, "node3", ns[3], tcp, "registry4", NULL))
		return -1;
	snprintf(tcp, sizeof(tcp), "listen = \"[::]\"; advertise = \"198.18.0.1\"; port = %d;", PORT_V4);
	return start(&node4, "node4", ns[1], tcp, "registry4", NULL) ? -1 : 0;
}

static int teardown(void **state)
{
	struct th_daemon *all[] = { &node1, &node2, &node3, &node4 };
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		if (!all[i]->pid)
			continue;
		int st = th_daemon_stop(all[i]);

		if (st) {
			fprintf(stderr, "%s: roshmd exit status %d\n", all[i]->name, st);
			th_daemon_dump_log(all[i]);
			bad = 1;
		}
	}
	return bad ? -1 : 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_records_carry_ipv6),
		cmocka_unit_test(test_ops_node2_to_node1),
		cmocka_unit_test(test_ops_node1_to_node2),
		cmocka_unit_test(test_metrics_ipv6),
		cmocka_unit_test(test_dual_stack_ipv4_peer),
	};

	if (!th_ipv6_available()) {
		printf("ipv6: skipped: IPv6 is disabled on this host (no socket binds to ::1)\n");
		return 77;
	}
	if (geteuid() != 0) {
		printf("ipv6: skipped: needs root to create network namespaces\n");
		return 77;
	}
	if (th_sh("command -v ip >/dev/null")) {
		printf("ipv6: skipped: needs iproute2 (make deps installs it)\n");
		return 77;
	}
	if (th_mkdtemp(workdir, sizeof(workdir), "ipv6")) {
		printf("ipv6: cannot create a directory in /tmp\n");
		return 1;
	}
	th_sh("echo %s > %s/cluster.secret", SECRET, workdir);
	if (th_netns_up_v6(prefix, sizeof(prefix), "v6", 3)) {
		printf("ipv6: cannot create network namespaces with IPv6 addresses\n");
		return 1;
	}
	for (int n = 1; n <= 3; n++)
		snprintf(ns[n], sizeof(ns[n]), "%s-%d", prefix, n);
	/* the namespaces and the directory go at exit (harness), pass or fail */
	return cmocka_run_group_tests_name("ipv6", tests, setup, teardown) ? 1 : 0;
}
