// SPDX-License-Identifier: MIT
/*
 * Whoever can write etcd pushes every new region out of every roshmd's
 * view, without forging a MAC. The etcd backend caches every key under its
 * prefix that looks like a record, and a record whose MAC does not verify
 * is cached too, "as bad" (dataplane/registry/etcd.c parse_kv / apply ->
 * ent_get), against the same cap as the good ones: RD_REG_CACHE_MAX
 * (65536). Past the cap, "the rest are not cached (reads of them answer
 * ENOENT)". 65536 junk values under regions/<t>/<n> keys fill it for good;
 * from then on every record written by a roshmd (of another node: a node's
 * own records are exempt) is invisible to get_region. For roshmd that
 * means: an open still works (it reads past the cache), but the next
 * revalidation (peers.c revalidate -> get_region: -ENOENT) declares the
 * region gone ("record removed") and every handle to it fails with ESTALE,
 * on every node, for every region created after the flood.
 *
 * The backends through their interface, as tests/integration/test_registry.c
 * drives them, with a real etcd on loopback (plain http here). Two nodes'
 * registries n1 and n2. The attacker writes 65536 junk values (no valid MAC)
 * under PREFIX/regions/junk/; n1 has taken them in (their keys read
 * -EBADMSG). Then n2 publishes a valid record. Expected: n1 reads it
 * (get_region 0) within 5 s.
 *
 * How it fails on today's code (adv at 02924eb), 5 of 5 runs:
 *   "node n1 does not see n2's new region t/legit 5 s after it was
 *    published: get_region -2 (No such file or directory), after 65536 junk
 *    records (none with a valid MAC) were written under the prefix"
 * and n1 logs "registry: more than 65536 records under /roshm-flood/v1: the
 * rest are not cached".
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "config.h"
#include "harness.h"
#include "registry/registry.h"

#define SECRET "registry-flood-cluster-secret-0123456789"
#define PREFIX "/roshm-flood/v1"
#define JUNK RD_REG_CACHE_MAX
#define BATCH 1024

static char dir[128];
static int port, peer_port;
static pid_t etcd_pid;

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int start_etcd(void)
{
	char data[300], log[300], url[64], purl[64], cluster[128];

	port = th_free_ports(2);
	peer_port = port + 1;
	if (port < 0)
		return -1;
	snprintf(data, sizeof(data), "%s/etcd", dir);
	snprintf(log, sizeof(log), "%s/etcd.log", dir);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	snprintf(purl, sizeof(purl), "http://127.0.0.1:%d", peer_port);
	snprintf(cluster, sizeof(cluster), "t=%s", purl);
	etcd_pid = fork();
	if (etcd_pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(fd, 1);
		dup2(fd, 2);
		execlp("etcd", "etcd", "--name", "t", "--data-dir", data, "--listen-client-urls", url,
		       "--advertise-client-urls", url, "--listen-peer-urls", purl,
		       "--initial-advertise-peer-urls", purl, "--initial-cluster", cluster,
		       "--max-txn-ops", "1024", "--unsafe-no-fsync", (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 100; i++) {
		if (sh("curl -s -f --max-time 2 http://127.0.0.1:%d/health >/dev/null 2>&1", port) == 0)
			return 0;
		usleep(100000);
	}
	return -1;
}

static void stop_etcd(void)
{
	if (etcd_pid > 0) {
		kill(etcd_pid, SIGKILL);
		waitpid(etcd_pid, NULL, 0);
		etcd_pid = 0;
	}
}

static const char *prefix = PREFIX;

static int open_reg(struct rd_registry *r, const char *node)
{
	struct rd_config cfg;
	int ret;

	rd_config_defaults(&cfg);
	snprintf(cfg.node, sizeof(cfg.node), "%s", node);
	strcpy(cfg.registry_backend, "etcd");
	snprintf(cfg.etcd_endpoints, sizeof(cfg.etcd_endpoints), "http://127.0.0.1:%d", port);
	snprintf(cfg.etcd_prefix, sizeof(cfg.etcd_prefix), "%s", prefix);
	cfg.lease_ttl_s = 5;
	cfg.registry_timeout_ms = 2000;
	ret = rd_registry_etcd_open(r, &cfg, (const uint8_t *)SECRET, strlen(SECRET));
	rd_config_free(&cfg);
	return ret;
}

static bool wait_ready(struct rd_registry *r, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;

	while (now_ms() < end) {
		r->ops->dispatch(r);
		if (r->ops->ready(r))
			return true;
		usleep(20000);
	}
	return false;
}

static char *b64(const char *s)
{
	size_t len = strlen(s);
	char *o = malloc(4 * ((len + 2) / 3) + 1);

	EVP_EncodeBlock((unsigned char *)o, (const unsigned char *)s, (int)len);
	return o;
}

/* Keys PREFIX/regions/junk/k<i> for i in [from, from + n): a value that is no record. */
static int put_junk(int from, int n)
{
	char path[300], key[128];
	char *val = b64("{\"not\":\"a record\"}");
	FILE *f;
	int ret;

	snprintf(path, sizeof(path), "%s/txn.json", dir);
	f = fopen(path, "w");
	if (!f)
		return -1;
	fprintf(f, "{\"success\":[");
	for (int i = from; i < from + n; i++) {
		char *k;

		snprintf(key, sizeof(key), PREFIX "/regions/junk/k%05d", i);
		k = b64(key);
		fprintf(f, "%s{\"requestPut\":{\"key\":\"%s\",\"value\":\"%s\"}}", i > from ? "," : "", k,
			val);
		free(k);
	}
	fprintf(f, "]}");
	fclose(f);
	free(val);
	ret = sh("curl -s -f --max-time 20 http://127.0.0.1:%d/v3/kv/txn -d @%s >/dev/null", port, path);
	return ret;
}

static int done_status = 1;

static void put_done(void *arg, int status)
{
	(void)arg;
	done_status = status;
}

/* @r (node n2) publishes region t/legit, validly, into @rec. */
static void put_legit(struct rd_registry *r, struct rd_region_rec *rec)
{
	uint64_t end;

	memset(rec, 0, sizeof(*rec));
	strcpy(rec->node, "n2");
	strcpy(rec->tenant, "t");
	strcpy(rec->name, "legit");
	strcpy(rec->state, RD_STATE_ACTIVE);
	strcpy(rec->endpoint, "tcp:127.0.0.1:7999");
	rec->region_id = 7;
	rec->key = 0x1234;
	rec->epoch = 0xabcdef;
	rec->mem_id = 42;
	rec->data_size = 4096;
	done_status = 1;
	assert_int_equal(r->ops->put_region(r, rec, RD_REG_EXCL, put_done, NULL), 0);
	end = now_ms() + 5000;
	while (now_ms() < end && done_status == 1) {
		r->ops->dispatch(r);
		usleep(20000);
	}
	assert_int_equal(done_status, 0);
}

static void test_junk_pushes_out_new_records(void **state)
{
	struct rd_registry r1, r2;
	struct rd_region_rec rec, got;
	char last[16];
	uint64_t end;
	int ret = -1;

	(void)state;
	memset(&r1, 0, sizeof(r1));
	memset(&r2, 0, sizeof(r2));
	assert_int_equal(open_reg(&r1, "n1"), 0);
	assert_int_equal(open_reg(&r2, "n2"), 0);
	assert_true(wait_ready(&r1, 10000));
	assert_true(wait_ready(&r2, 10000));

	/* the flood: junk only, nothing with a valid MAC */
	for (int i = 0; i < JUNK; i += BATCH)
		assert_int_equal(put_junk(i, BATCH), 0);
	/* n1's watch is taking it in (the first junk records are cached as
	 * bad; the rest, past RD_REG_BAD_MAX, are not cached at all). The watch
	 * is in revision order: once n1 sees the record below, it has seen
	 * all of the junk. */
	snprintf(last, sizeof(last), "k%05d", 0);
	end = now_ms() + 30000;
	while (now_ms() < end && (ret = r1.ops->get_region(&r1, "junk", last, &got)) != -EBADMSG) {
		r1.ops->dispatch(&r1);
		usleep(50000);
	}
	assert_int_equal(ret, -EBADMSG);

	/* n2 publishes a region, validly */
	put_legit(&r2, &rec);

	/* n1 must see it */
	end = now_ms() + 5000;
	while (now_ms() < end && (ret = r1.ops->get_region(&r1, "t", "legit", &got)) != 0) {
		r1.ops->dispatch(&r1);
		usleep(50000);
	}
	r1.ops->close(&r1);
	r2.ops->close(&r2);
	if (ret)
		fail_msg("node n1 does not see n2's new region t/legit 5 s after it was published: "
			 "get_region %d (%s), after %d junk records (none with a valid MAC) were written "
			 "under the prefix", ret, strerror(-ret), JUNK);
	assert_int_equal(got.epoch, rec.epoch);
}

/* One key (@klen bytes from @key, padded with 'z') with a value of @vlen bytes. */
static int put_kv(const char *key, size_t klen, size_t vlen)
{
	char path[300], *k = malloc(klen + 1), *v = malloc(vlen + 1), *bk, *bv;
	FILE *f;
	int ret = -1;

	snprintf(k, klen + 1, "%s", key);
	memset(k + strlen(k), 'z', klen - strlen(k));
	k[klen] = 0;
	memset(v, 'A', vlen);
	v[vlen] = 0;
	bk = b64(k);
	bv = b64(v);
	snprintf(path, sizeof(path), "%s/put.json", dir);
	f = fopen(path, "w");
	if (f) {
		fprintf(f, "{\"key\":\"%s\",\"value\":\"%s\"}", bk, bv);
		fclose(f);
		ret = sh("curl -s -f --max-time 20 http://127.0.0.1:%d/v3/kv/put -d @%s >/dev/null",
			 port, path);
	}
	free(k);
	free(v);
	free(bk);
	free(bv);
	return ret;
}

/* A valid record of node n2 under the current prefix, and n1 that must
 * get ready and read it after what the writer left there. */
static void n1_reads_legit(const char *what)
{
	struct rd_registry r1, r2;
	struct rd_region_rec rec, got;
	uint64_t lost;
	int ret;

	memset(&r1, 0, sizeof(r1));
	memset(&r2, 0, sizeof(r2));
	assert_int_equal(open_reg(&r2, "n2"), 0);
	assert_true(wait_ready(&r2, 15000));
	put_legit(&r2, &rec);
	assert_int_equal(open_reg(&r1, "n1"), 0);
	if (!wait_ready(&r1, 20000))
		fail_msg("a registry never got ready after %s", what);
	ret = r1.ops->get_region(&r1, "t", "legit", &got);
	lost = r1.stats.lease_lost;
	r1.ops->close(&r1);
	r2.ops->close(&r2);
	assert_int_equal(ret, 0);
	assert_int_equal(got.epoch, rec.epoch);
	if (lost)   /* its records would have gone from etcd meanwhile */
		fail_msg("n1 lost its lease (TTL 5 s) while it read %s", what);
}

/*
 * Values no record is, made as large as etcd takes (1.4 MB; its request
 * limit is 1.5 MiB): a range page of them is past the 16 MiB answer cap.
 * Before, the range failed on every try and a starting roshmd never got
 * ready (nor one that had to read everything again): nine such keys kept
 * every node of the cluster out. Then, with pages asked again with fewer
 * keys but sized back up after each, reading 110 of them took longer than
 * the 5 s lease, which was lost (and every record of the node with it).
 * Now pages are sized by the bytes of the one before and the lease is kept
 * alive between them: the registry gets ready, keeps its lease, and reads
 * the valid record.
 */
static void test_big_values(void **state)
{
	char key[128];

	(void)state;
	prefix = "/roshm-big/v1";
	for (int i = 0; i < 110; i++) {
		snprintf(key, sizeof(key), "%s/regions/junk/big%03d", prefix, i);
		assert_int_equal(put_kv(key, strlen(key), 1400000), 0);
	}
	n1_reads_legit("110 values of 1.4 MB under its prefix");
	prefix = PREFIX;
}

/*
 * A key longer than 64 KiB as the last of a range page (PAGE, 150, in
 * dataplane/registry/etcd_int.h: 149 keys that sort first, then it).
 * Before, the next page's start could not be decoded and the sync failed
 * on every try, without a log line.
 */
static void test_long_key_ends_page(void **state)
{
	char key[128];

	(void)state;
	prefix = "/roshm-key/v1";
	for (int i = 0; i < 149; i++) {
		snprintf(key, sizeof(key), "%s/!%03d", prefix, i);
		assert_int_equal(put_kv(key, strlen(key), 1), 0);
	}
	snprintf(key, sizeof(key), "%s/!149", prefix);
	assert_int_equal(put_kv(key, 70000, 1), 0);
	n1_reads_legit("a key of 70000 bytes at the end of a range page");
	prefix = PREFIX;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_big_values),
		cmocka_unit_test(test_long_key_ends_page),
		cmocka_unit_test(test_junk_pushes_out_new_records),
	};
	int fails;

	signal(SIGPIPE, SIG_IGN);
	if (sh("command -v etcd >/dev/null && command -v curl >/dev/null")) {
		printf("registry_flood: skipped: needs etcd (etcd-server) and curl\n");
		return 77;
	}
	snprintf(dir, sizeof(dir), "/tmp/roshm-flood-XXXXXX");
	if (!mkdtemp(dir) || start_etcd()) {
		printf("registry_flood: cannot start etcd\n");
		stop_etcd();
		return 1;
	}
	fails = cmocka_run_group_tests_name("registry_flood", tests, NULL, NULL);
	stop_etcd();
	if (!getenv("ROSHM_TEST_KEEP"))
		sh("rm -rf %s", dir);
	return fails ? 1 : 0;
}
