// SPDX-License-Identifier: MIT
/*
 * The registry backends through their interface (registry.h), no roshmd:
 * - file: round trips, completions only from dispatch(), records with a bad
 *   or missing MAC ignored, RD_REG_EXCL, and symlinks, FIFOs and oversized
 *   files planted in the directory never followed nor read; an untrusted
 *   root (symlink, group-writable, someone else's) refused.
 * - etcd: a real etcd on loopback over TLS with client-cert-auth and auth
 *   enabled (root user), certificates made here with the openssl CLI.
 *   Round trips and the watch, a record tampered in etcd ignored, our own
 *   tampered record put back, RD_REG_EXCL, a lease revoked behind our back,
 *   etcd stopped (reads answer from the cache at once, writes fail after
 *   the timeout, the lease is re-taken when it is back), etcd restarted
 *   (tokens invalid: log in again, range and watch again), and a wrong
 *   password or no client certificate: a clear error and not ready.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <rte_log.h>

#include "config.h"
#include "harness.h"
#include "registry/registry.h"

#define SECRET "registry-test-cluster-secret-0123456789"
#define PREFIX "/roshm-test/v1"

static char dir[128];                 /* everything of this run */
static char ca[200], ccert[200], ckey[200], pwfile[200], badpw[200];
static int port, peer_port;
static pid_t etcd_pid;
static char token[512];

/* ---- helpers -------------------------------------------------------------- */

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

/* Output of a shell command (trailing newline cut). */
static int sh_out(char *out, size_t cap, const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	FILE *p;
	size_t n;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	n = fread(out, 1, cap - 1, p);
	out[n] = 0;
	while (n && out[n - 1] == '\n')
		out[--n] = 0;
	return pclose(p) == 0 ? 0 : -1;
}

/* Registries the waits below dispatch, and what dispatch() returned. */
static struct rd_registry *regs[8];
static unsigned reg_flags[8];

static void track(struct rd_registry *r)
{
	for (int i = 0; i < 8; i++)
		if (!regs[i]) {
			regs[i] = r;
			reg_flags[i] = 0;
			return;
		}
	fail_msg("too many registries");
}

static void untrack(struct rd_registry *r)
{
	for (int i = 0; i < 8; i++)
		if (regs[i] == r)
			regs[i] = NULL;
}

static unsigned flags_of(struct rd_registry *r)
{
	for (int i = 0; i < 8; i++)
		if (regs[i] == r)
			return reg_flags[i];
	return 0;
}

/* Wait up to @ms for any registry's event fd, then dispatch them all. */
static void pump(int ms)
{
	struct pollfd p[8];
	int n = 0;

	for (int i = 0; i < 8; i++)
		if (regs[i])
			p[n++] = (struct pollfd){ .fd = regs[i]->ops->event_fd(regs[i]), .events = POLLIN };
	poll(p, (nfds_t)n, ms);
	for (int i = 0; i < 8; i++)
		if (regs[i])
			reg_flags[i] |= regs[i]->ops->dispatch(regs[i]);
}

#define WAIT_UNTIL(cond, ms)                                              \
	({                                                                \
		uint64_t _end = now_ms() + (ms);                          \
		bool _ok;                                                 \
		while (!(_ok = (cond)) && now_ms() < _end)                \
			pump(20);                                         \
		_ok;                                                      \
	})

struct done {
	int called;
	int status;
	uint64_t at_ms;
};

static void on_done(void *arg, int status)
{
	struct done *d = arg;

	d->called++;
	d->status = status;
	d->at_ms = now_ms();
}

struct got {
	int called;
	int status;
	struct rd_region_rec rec;
};

static void on_got(void *arg, int status, const struct rd_region_rec *rec)
{
	struct got *g = arg;

	g->called++;
	g->status = status;
	if (rec)
		g->rec = *rec;
}

static void region(struct rd_region_rec *r, const char *node, const char *tenant, const char *name)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->node, sizeof(r->node), "%s", node);
	snprintf(r->tenant, sizeof(r->tenant), "%s", tenant);
	snprintf(r->name, sizeof(r->name), "%s", name);
	strcpy(r->state, RD_STATE_ACTIVE);
	snprintf(r->endpoint, sizeof(r->endpoint), "tcp:127.0.0.1:7471");
	r->region_id = 3;
	r->key = 0x1234;
	r->epoch = 77;
	r->mem_id = 5;
	r->data_size = 4096;
	r->policy = ROSHM_POLICY_TENANT;
}

/* Write and wait for the completion. */
static int put_wait(struct rd_registry *r, const struct rd_region_rec *rec, unsigned flags)
{
	struct done d = { 0 };
	int ret = r->ops->put_region(r, rec, flags, on_done, &d);

	if (ret)
		return ret;
	/* never from inside the call */
	assert_int_equal(d.called, 0);
	if (!WAIT_UNTIL(d.called, 10000))
		fail_msg("put %s/%s: no completion in 10 s", rec->tenant, rec->name);
	assert_int_equal(d.called, 1);
	return d.status;
}

static int del_wait(struct rd_registry *r, const char *tenant, const char *name)
{
	struct done d = { 0 };
	int ret = r->ops->del_region(r, tenant, name, on_done, &d);

	if (ret)
		return ret;
	assert_int_equal(d.called, 0);
	if (!WAIT_UNTIL(d.called, 10000))
		fail_msg("del %s/%s: no completion in 10 s", tenant, name);
	return d.status;
}

/* Requests @op the registry counted (struct rd_reg_stats), and its errors
 * for @why (-1: every reason). */
static uint64_t reqs(const struct rd_registry *r, enum rd_reg_op op)
{
	uint64_t n = 0;

	for (int i = 0; i <= RD_REG_LAT_BUCKETS; i++)
		n += __atomic_load_n(&r->stats.hist[op][i], __ATOMIC_RELAXED);
	return n;
}

static uint64_t errs(const struct rd_registry *r, enum rd_reg_op op, int why)
{
	uint64_t n = 0;

	for (int w = 0; w < RD_REGERRS; w++)
		if (why < 0 || w == why)
			n += __atomic_load_n(&r->stats.errors[op][w], __ATOMIC_RELAXED);
	return n;
}

static uint64_t errs_all(const struct rd_registry *r)
{
	uint64_t n = 0;

	for (int o = 0; o < RD_REGOPS; o++)
		n += errs(r, o, -1);
	return n;
}

static void count_cb(const struct rd_region_rec *rec, void *arg)
{
	struct { int n; char names[32][140]; } *l = arg;

	if (l->n < 32)
		snprintf(l->names[l->n], sizeof(l->names[0]), "%s/%s", rec->tenant, rec->name);
	l->n++;
}

/* Whether tenant/name is in the list the registry gives. */
static bool listed(struct rd_registry *r, const char *full)
{
	struct { int n; char names[32][140]; } l = { 0 };

	r->ops->list_regions(r, count_cb, &l);
	for (int i = 0; i < l.n && i < 32; i++)
		if (!strcmp(l.names[i], full))
			return true;
	return false;
}

/* Whether list_prefix(@tenant, @prefix) lists tenant/name @full, and only
 * records of @tenant whose names begin with @prefix. */
static bool listed_prefix(struct rd_registry *r, const char *tenant, const char *prefix,
			  const char *full)
{
	struct { int n; char names[32][140]; } l = { 0 };
	char want[140];
	bool found = false;

	assert_non_null(r->ops->list_prefix);
	snprintf(want, sizeof(want), "%s/%s", tenant, prefix);
	r->ops->list_prefix(r, tenant, prefix, 32, count_cb, &l);
	for (int i = 0; i < l.n && i < 32; i++) {
		assert_true(!strncmp(l.names[i], want, strlen(want)));
		found |= !strcmp(l.names[i], full);
	}
	return found;
}

/* Log lines of the registry code go to @f while capturing (rte_log works without EAL). */
static FILE *capture;

static void capture_start(void)
{
	capture = tmpfile();
	assert_non_null(capture);
	rte_openlog_stream(capture);
}

/* Does the capture hold @needle by now? (a registry's thread logs a bad
 * record just after it stores it: a look may come between the two) */
static bool capture_has(const char *needle)
{
	char b[16384];
	ssize_t n;

	fflush(capture);
	n = pread(fileno(capture), b, sizeof(b) - 1, 0);
	if (n < 0)
		return false;
	b[n] = 0;
	return strstr(b, needle) != NULL;
}

/* Stop capturing; true when the log holds @needle. */
static bool capture_stop(const char *needle, char *out, size_t cap)
{
	size_t n;

	fflush(capture);
	rte_openlog_stream(NULL);
	rewind(capture);
	n = fread(out, 1, cap - 1, capture);
	out[n] = 0;
	fclose(capture);
	capture = NULL;
	fputs(out, stderr);
	return strstr(out, needle) != NULL;
}

/* ---- file backend ------------------------------------------------------------ */

static void file_path(char *out, size_t cap, const char *rel)
{
	snprintf(out, cap, "%s/freg/%s", dir, rel);
}

static void rewrite_json(const char *path, const char *k, json_t *v)
{
	json_error_t jerr;
	json_t *o = json_load_file(path, 0, &jerr);

	assert_non_null(o);
	if (v)
		json_object_set_new(o, k, v);
	else
		json_object_del(o, k);
	assert_int_equal(json_dump_file(o, path, JSON_COMPACT | JSON_SORT_KEYS), 0);
	json_decref(o);
}

static void test_file_records(void **st)
{
	struct rd_registry a, b, other;
	struct rd_region_rec rec, back;
	struct rd_node_rec n = { .pid = 99 }, nback;
	struct got g = { 0 };
	char path[512], rdir[300];
	const uint8_t *key = (const uint8_t *)SECRET;
	size_t kl = strlen(SECRET);
	struct stat sb;

	(void)st;
	snprintf(rdir, sizeof(rdir), "%s/freg", dir);
	assert_int_equal(rd_registry_file_open(&a, rdir, "node-a", key, kl), 0);
	assert_int_equal(rd_registry_file_open(&b, rdir, "node-b", key, kl), 0);
	assert_int_equal(rd_registry_file_open(&other, rdir, "node-c", (const uint8_t *)"another-cluster-secret!", 23), 0);
	track(&a);
	track(&b);
	track(&other);
	assert_true(a.ops->ready(&a));
	/* created 0700: nobody but roshmd's user reads or plants */
	assert_int_equal(stat(rdir, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0700);

	region(&rec, "node-a", "blue", "buf1");
	assert_int_equal(put_wait(&a, &rec, RD_REG_EXCL), 0);
	file_path(path, sizeof(path), "regions/blue/buf1.json");
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);
	assert_int_equal(b.ops->get_region(&b, "blue", "buf1", &back), 0);
	assert_int_equal(back.epoch, 77);
	assert_true(listed(&b, "blue/buf1"));
	assert_true(listed_prefix(&b, "blue", "buf", "blue/buf1"));
	assert_true(listed_prefix(&b, "blue", "", "blue/buf1"));
	assert_false(listed_prefix(&b, "blue", "bufx", "blue/buf1"));
	assert_false(listed_prefix(&b, "green", "", "blue/buf1"));
	assert_int_equal(b.ops->fetch_region(&b, "blue", "buf1", on_got, &g), 0);
	assert_int_equal(g.called, 0);
	assert_true(WAIT_UNTIL(g.called, 1000));
	assert_int_equal(g.status, 0);
	assert_string_equal(g.rec.node, "node-a");
	strcpy(n.node, "node-a");
	strcpy(n.endpoint, "tcp:127.0.0.1:7471");
	{
		struct done d = { 0 };

		assert_int_equal(a.ops->put_node(&a, &n, on_done, &d), 0);
		assert_int_equal(d.called, 0);
		assert_true(WAIT_UNTIL(d.called, 1000));
		assert_int_equal(d.status, 0);
	}
	assert_int_equal(b.ops->get_node(&b, "node-a", &nback), 0);
	assert_int_equal(nback.pid, 99);

	/* records of another cluster secret are not believed */
	assert_int_equal(other.ops->get_region(&other, "blue", "buf1", &back), -EBADMSG);
	assert_false(listed(&other, "blue/buf1"));
	assert_int_equal(other.ops->get_node(&other, "node-a", &nback), -EBADMSG);

	/* EXCL: another node's name is refused; our own is overwritten */
	region(&rec, "node-b", "blue", "buf1");
	assert_int_equal(put_wait(&b, &rec, RD_REG_EXCL), -EEXIST);
	assert_int_equal(b.ops->get_region(&b, "blue", "buf1", &back), 0);
	assert_string_equal(back.node, "node-a");
	region(&rec, "node-a", "blue", "buf1");
	rec.epoch = 78;
	assert_int_equal(put_wait(&a, &rec, RD_REG_EXCL), 0);
	/* a forged record does not hold a name */
	region(&rec, "node-c", "blue", "forged");
	assert_int_equal(put_wait(&other, &rec, 0), 0);
	region(&rec, "node-b", "blue", "forged");
	assert_int_equal(put_wait(&b, &rec, RD_REG_EXCL), 0);

	/* tampering: policy and tenants changed, MAC kept */
	rewrite_json(path, "policy", json_string("list"));
	rewrite_json(path, "tenants", json_pack("[s]", "mallory"));
	assert_int_equal(b.ops->get_region(&b, "blue", "buf1", &back), -EBADMSG);
	assert_false(listed(&b, "blue/buf1"));
	g.called = 0;
	assert_int_equal(b.ops->fetch_region(&b, "blue", "buf1", on_got, &g), 0);
	assert_true(WAIT_UNTIL(g.called, 1000));
	assert_int_equal(g.status, -EBADMSG);
	/* no MAC at all */
	rewrite_json(path, "mac", NULL);
	assert_int_equal(b.ops->get_region(&b, "blue", "buf1", &back), -EBADMSG);
	/* a valid record copied under another name */
	file_path(path, sizeof(path), "regions/blue/forged.json");
	sh("cp %s %s/freg/regions/blue/copy.json", path, dir);
	assert_int_equal(b.ops->get_region(&b, "blue", "copy", &back), -EBADMSG);
	/* and a hostile writer's flood is logged once per key per minute */
	{
		char log[16384];
		int lines = 0;

		capture_start();
		for (int i = 0; i < 50; i++)
			b.ops->get_region(&b, "blue", "copy", &back);
		capture_stop("regions/blue/copy", log, sizeof(log));
		for (char *p = log; (p = strstr(p, "regions/blue/copy")); p++)
			lines++;
		assert_int_equal(lines, 0); /* logged above already, within the minute */
	}

	assert_int_equal(del_wait(&a, "blue", "buf1"), 0);
	assert_int_equal(a.ops->get_region(&a, "../x", "buf1", &back), -EINVAL);
	assert_int_equal(a.ops->get_region(&a, "blue", "buf1", &back), -ENOENT);
	assert_int_equal(del_wait(&a, "blue", "buf1"), -ENOENT);

	/* the metrics: every request each made of the directory; absent is an
	 * answer, a record that does not verify an error; a bad name asks
	 * nothing */
	assert_int_equal(a.stats.ops, 1u << RD_REGOP_PUT | 1u << RD_REGOP_GET | 1u << RD_REGOP_DELETE);
	assert_int_equal(reqs(&a, RD_REGOP_PUT), 3);
	assert_int_equal(reqs(&a, RD_REGOP_GET), 1);
	assert_int_equal(reqs(&a, RD_REGOP_DELETE), 2);
	assert_int_equal(errs_all(&a), 0);
	assert_int_equal(reqs(&b, RD_REGOP_PUT), 2);
	assert_int_equal(reqs(&b, RD_REGOP_GET), 64);   /* 4 of them list_prefix */
	assert_int_equal(errs(&b, RD_REGOP_GET, RD_REGERR_INVALID), 54);
	assert_int_equal(errs_all(&b), 54);
	assert_int_equal(reqs(&other, RD_REGOP_PUT), 1);
	assert_int_equal(reqs(&other, RD_REGOP_GET), 3);
	assert_int_equal(errs(&other, RD_REGOP_GET, RD_REGERR_INVALID), 2);
	for (int o = RD_REGOP_PUT; o < RD_REGOPS; o++) {
		uint64_t cum = 0;

		for (int i = 0; i <= RD_REG_LAT_BUCKETS; i++)
			cum += a.stats.hist[o][i];
		if (cum)
			assert_true(a.stats.sum_ns[o] > 0 && a.stats.sum_ns[o] / cum < 1000000000ull);
	}
	untrack(&a);
	untrack(&b);
	untrack(&other);
	a.ops->close(&a);
	b.ops->close(&b);
	other.ops->close(&other);
}

/* Everything in @d, recursively, with sizes and mtimes: to see nothing changed. */
static void snapshot(const char *d, char *out, size_t cap)
{
	assert_int_equal(sh_out(out, cap, "cd %s && find . -printf '%%p %%y %%s %%T@\\n' | sort", d), 0);
}

static void test_file_symlinks(void **st)
{
	struct rd_registry a;
	struct rd_region_rec rec, back;
	struct rd_node_rec nback;
	char rdir[300], outside[300], before[8192], after[8192], path[512], log[8192];
	const uint8_t *key = (const uint8_t *)SECRET;
	size_t kl = strlen(SECRET);
	struct stat sb;
	char *valid;

	(void)st;
	snprintf(rdir, sizeof(rdir), "%s/sreg", dir);
	snprintf(outside, sizeof(outside), "%s/outside", dir);
	assert_int_equal(mkdir(outside, 0700), 0);
	assert_int_equal(rd_registry_file_open(&a, rdir, "node-a", key, kl), 0);
	track(&a);
	/* Outside the registry: a valid record (if a symlink were followed,
	 * it would be believed) and a file roshmd must never overwrite. */
	region(&rec, "node-a", "evil", "x");
	valid = rd_region_rec_sign(&rec, key, kl);
	sh("printf '%%s' '%s' > %s/x.json", valid, outside);
	sh("cp %s/x.json %s/bait.json; cp %s/x.json %s/node-x.json", outside, outside, outside, outside);
	free(valid);
	sh("mkdir -p %s/regions/default", rdir);
	/* as root: a tenant directory, records and a node record replaced by symlinks */
	assert_int_equal(symlink(outside, (snprintf(path, sizeof(path), "%s/regions/evil", rdir), path)), 0);
	snprintf(path, sizeof(path), "%s/regions/default/bait.json", rdir);
	assert_int_equal(symlink((snprintf(log, sizeof(log), "%s/bait.json", outside), log), path), 0);
	snprintf(path, sizeof(path), "%s/nodes/node-x.json", rdir);
	assert_int_equal(symlink((snprintf(log, sizeof(log), "%s/node-x.json", outside), log), path), 0);
	/* a FIFO and an oversized file in place of records */
	snprintf(path, sizeof(path), "%s/regions/default/fifo.json", rdir);
	assert_int_equal(mkfifo(path, 0600), 0);
	sh("head -c 70000 /dev/zero | tr '\\0' ' ' > %s/regions/default/big.json", rdir);
	snapshot(outside, before, sizeof(before));

	capture_start();
	assert_int_equal(a.ops->get_region(&a, "evil", "x", &back), -EBADMSG);
	assert_int_equal(a.ops->get_region(&a, "default", "bait", &back), -EBADMSG);
	assert_int_equal(a.ops->get_node(&a, "node-x", &nback), -EBADMSG);
	uint64_t t0 = now_ms();

	assert_int_equal(a.ops->get_region(&a, "default", "fifo", &back), -EBADMSG);
	assert_true(now_ms() - t0 < 1000); /* never blocks on the FIFO */
	assert_int_equal(a.ops->get_region(&a, "default", "big", &back), -EBADMSG);
	assert_false(listed(&a, "evil/x"));
	assert_false(listed(&a, "default/bait"));
	/* writes through the planted links: refused, or they replace the link */
	region(&rec, "node-a", "evil", "new");
	assert_int_not_equal(put_wait(&a, &rec, 0), 0);
	assert_int_not_equal(del_wait(&a, "evil", "x"), 0);
	region(&rec, "node-a", "default", "bait");
	assert_int_equal(put_wait(&a, &rec, 0), 0);
	snprintf(path, sizeof(path), "%s/regions/default/bait.json", rdir);
	assert_int_equal(lstat(path, &sb), 0);
	assert_true(S_ISREG(sb.st_mode)); /* the link itself was replaced */
	assert_int_equal(a.ops->get_region(&a, "default", "bait", &back), 0);
	capture_stop("a symlink", log, sizeof(log));
	assert_non_null(strstr(log, "regions/evil/"));
	assert_non_null(strstr(log, "not a regular file"));
	assert_non_null(strstr(log, "larger than 64 KiB"));
	snapshot(outside, after, sizeof(after));
	assert_string_equal(before, after);
	untrack(&a);
	a.ops->close(&a);

	/* an untrusted root is refused, with the reason */
	snprintf(path, sizeof(path), "%s/rootlink", dir);
	assert_int_equal(symlink(rdir, path), 0);
	capture_start();
	assert_int_not_equal(rd_registry_file_open(&a, path, "node-a", key, kl), 0);
	assert_true(capture_stop("a symlink", log, sizeof(log)));
	assert_int_equal(chmod(rdir, 0770), 0);
	capture_start();
	assert_int_equal(rd_registry_file_open(&a, rdir, "node-a", key, kl), -EPERM);
	assert_true(capture_stop("writable by group or others", log, sizeof(log)));
	assert_int_equal(chmod(rdir, 0700), 0);
	if (geteuid() == 0) {
		assert_int_equal(chown(rdir, 65534, 65534), 0);
		capture_start();
		assert_int_equal(rd_registry_file_open(&a, rdir, "node-a", key, kl), -EPERM);
		assert_true(capture_stop("owned by uid 65534", log, sizeof(log)));
		assert_int_equal(chown(rdir, 0, 0), 0);
		/* a tenant directory of someone else's is not read either */
		sh("mkdir -p %s/regions/foreign && chown 65534 %s/regions/foreign", rdir, rdir);
		assert_int_equal(rd_registry_file_open(&a, rdir, "node-a", key, kl), 0);
		assert_int_equal(a.ops->get_region(&a, "foreign", "x", &back), -EBADMSG);
		a.ops->close(&a);
	}
	assert_int_equal(rd_registry_file_open(&a, rdir, "node-a", key, kl), 0);
	a.ops->close(&a);
}

/* ---- etcd ---------------------------------------------------------------------- */

static const char *curl_base(void)
{
	static char b[1024];

	snprintf(b, sizeof(b), "curl -s --max-time 5 --cacert %s --cert %s --key %s", ca, ccert, ckey);
	return b;
}

/* POST @body to etcd's @path as root; the answer in @out. */
static int etcd_post(const char *path, const char *body, char *out, size_t cap)
{
	return sh_out(out, cap, "%s -H 'Authorization: %s' https://127.0.0.1:%d%s -d '%s'", curl_base(),
		      token, port, path, body);
}

static char *b64(const char *s, size_t len)
{
	char *o = malloc(4 * ((len + 2) / 3) + 1);

	EVP_EncodeBlock((unsigned char *)o, (const unsigned char *)s, (int)len);
	return o;
}

/* The value of @key in etcd (NUL-terminated, malloc'd) and its lease; NULL if absent. */
static char *etcd_value(const char *key, char *lease, size_t lcap)
{
	char body[512], out[65536], *k = b64(key, strlen(key)), *v = NULL;
	json_error_t jerr;
	json_t *o, *kv;

	snprintf(body, sizeof(body), "{\"key\":\"%s\"}", k);
	free(k);
	if (etcd_post("/v3/kv/range", body, out, sizeof(out)))
		return NULL;
	o = json_loads(out, 0, &jerr);
	kv = json_array_get(json_object_get(o, "kvs"), 0);
	if (kv) {
		const char *b = json_string_value(json_object_get(kv, "value"));
		size_t bl = strlen(b);

		v = calloc(1, bl + 1);
		EVP_DecodeBlock((unsigned char *)v, (const unsigned char *)b, (int)bl);
		if (lease)
			snprintf(lease, lcap, "%s", json_string_value(json_object_get(kv, "lease")) ?: "");
	}
	json_decref(o);
	return v;
}

/* Put @value under @key (no lease), as someone with write access to etcd. */
static void etcd_put(const char *key, const char *value)
{
	char *k = b64(key, strlen(key)), *v = b64(value, strlen(value)), *body, out[4096];

	assert_true(asprintf(&body, "{\"key\":\"%s\",\"value\":\"%s\"}", k, v) > 0);
	assert_int_equal(etcd_post("/v3/kv/put", body, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "revision"));
	free(body);
	free(k);
	free(v);
}

static void etcd_cfg(struct rd_config *cfg, const char *node)
{
	rd_config_defaults(cfg);
	snprintf(cfg->node, sizeof(cfg->node), "%s", node);
	strcpy(cfg->registry_backend, "etcd");
	snprintf(cfg->etcd_endpoints, sizeof(cfg->etcd_endpoints), "https://127.0.0.1:%d", port);
	strcpy(cfg->etcd_prefix, PREFIX);
	cfg->lease_ttl_s = 2;
	cfg->registry_timeout_ms = 1000;
	snprintf(cfg->etcd_cacert, sizeof(cfg->etcd_cacert), "%s", ca);
	snprintf(cfg->etcd_cert, sizeof(cfg->etcd_cert), "%s", ccert);
	snprintf(cfg->etcd_key, sizeof(cfg->etcd_key), "%s", ckey);
	strcpy(cfg->etcd_username, "root");
	snprintf(cfg->etcd_password_file, sizeof(cfg->etcd_password_file), "%s", pwfile);
}

static int etcd_open(struct rd_registry *r, const char *node)
{
	struct rd_config cfg;
	int ret;

	etcd_cfg(&cfg, node);
	ret = rd_registry_etcd_open(r, &cfg, (const uint8_t *)SECRET, strlen(SECRET));
	rd_config_free(&cfg);
	if (!ret)
		track(r);
	return ret;
}

static void etcd_close(struct rd_registry *r)
{
	untrack(r);
	r->ops->close(r);
}

static int start_etcd(void)
{
	char data[300], log[300], url[64], purl[64], cluster[128];

	snprintf(data, sizeof(data), "%s/etcd", dir);
	snprintf(log, sizeof(log), "%s/etcd.log", dir);
	snprintf(url, sizeof(url), "https://127.0.0.1:%d", port);
	snprintf(purl, sizeof(purl), "http://127.0.0.1:%d", peer_port);
	snprintf(cluster, sizeof(cluster), "t=%s", purl);
	etcd_pid = fork();
	if (etcd_pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
		char cert[300], key[300], tca[300];

		/* no etcd outlives this test, however it ends */
		prctl(PR_SET_PDEATHSIG, SIGKILL);

		dup2(fd, 1);
		dup2(fd, 2);
		snprintf(cert, sizeof(cert), "--cert-file=%s/server.crt", dir);
		snprintf(key, sizeof(key), "--key-file=%s/server.key", dir);
		snprintf(tca, sizeof(tca), "--trusted-ca-file=%s", ca);
		execlp("etcd", "etcd", "--name", "t", "--data-dir", data, "--listen-client-urls", url,
		       "--advertise-client-urls", url, "--listen-peer-urls", purl,
		       "--initial-advertise-peer-urls", purl, "--initial-cluster", cluster, cert, key, tca,
		       "--client-cert-auth", (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 100; i++) {
		if (sh("%s -f https://127.0.0.1:%d/health >/dev/null 2>&1", curl_base(), port) == 0)
			return 0;
		usleep(100000);
	}
	fprintf(stderr, "etcd did not come up:\n");
	sh("tail -20 %s", log);
	return -1;
}

static void stop_etcd(void)
{
	if (etcd_pid > 0) {
		kill(etcd_pid, SIGCONT);
		kill(etcd_pid, SIGTERM);
		waitpid(etcd_pid, NULL, 0);
		etcd_pid = 0;
	}
}

static int login(void)
{
	char out[1024];
	json_error_t jerr;
	json_t *o;

	if (sh_out(out, sizeof(out), "%s https://127.0.0.1:%d/v3/auth/authenticate "
		   "-d '{\"name\":\"root\",\"password\":\"root-pw-for-test\"}'", curl_base(), port))
		return -1;
	o = json_loads(out, 0, &jerr);
	snprintf(token, sizeof(token), "%s", json_string_value(json_object_get(o, "token")) ?: "");
	json_decref(o);
	return token[0] ? 0 : -1;
}

static int setup_etcd(void **st)
{
	(void)st;
	/* CA, etcd's server certificate (clientAuth too: etcd's gateway dials
	 * its own gRPC server with it), and a client certificate without a CN
	 * (etcd refuses gateway requests from a CN certificate with auth on) */
	if (sh("cd %s && exec >openssl.log 2>&1 && "
	       "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key "
	       "  -out ca.crt -days 1 -subj /CN=roshm-test-ca && "
	       "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout server.key "
	       "  -out server.csr -subj /CN=etcd-test-server && "
	       "printf 'subjectAltName=IP:127.0.0.1\\nextendedKeyUsage=serverAuth,clientAuth\\n' > server.ext && "
	       "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt "
	       "  -days 1 -extfile server.ext && "
	       "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout client.key "
	       "  -out client.csr -subj /O=roshm-test && "
	       "printf 'extendedKeyUsage=clientAuth\\n' > client.ext && "
	       "openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out client.crt "
	       "  -days 1 -extfile client.ext", dir)) {
		fprintf(stderr, "openssl failed:\n");
		sh("cat %s/openssl.log", dir);
		return -1;
	}
	snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
	snprintf(ccert, sizeof(ccert), "%s/client.crt", dir);
	snprintf(ckey, sizeof(ckey), "%s/client.key", dir);
	snprintf(pwfile, sizeof(pwfile), "%s/password", dir);
	snprintf(badpw, sizeof(badpw), "%s/badpassword", dir);
	sh("echo root-pw-for-test > %s; echo not-the-password > %s", pwfile, badpw);
	port = th_free_ports(2);
	peer_port = port + 1;
	if (port < 0 || peer_port < 0 || port == peer_port || start_etcd())
		return -1;
	/* auth on, through the gateway: user root with role root */
	if (sh("B='%s'; U=https://127.0.0.1:%d/v3/auth; "
	       "$B $U/user/add -d '{\"name\":\"root\",\"password\":\"root-pw-for-test\"}' | grep -q header && "
	       "$B $U/role/add -d '{\"name\":\"root\"}' | grep -q header && "
	       "$B $U/user/grant -d '{\"user\":\"root\",\"role\":\"root\"}' | grep -q header && "
	       "$B $U/enable -d '{}' | grep -q header", curl_base(), port) || login()) {
		fprintf(stderr, "enabling etcd auth failed\n");
		return -1;
	}
	return 0;
}

static int teardown_etcd(void **st)
{
	(void)st;
	stop_etcd();
	return 0;
}

static bool ready(struct rd_registry *r)
{
	return r->ops->ready(r);
}

static void test_etcd_records(void **st)
{
	struct rd_registry a, b;
	struct rd_region_rec rec, back;
	struct rd_node_rec n = { .pid = 1 }, nback;
	struct got g = { 0 };
	char *v, lease[32];
	uint64_t t0;

	(void)st;
	assert_int_equal(etcd_open(&a, "node-a"), 0);
	assert_int_equal(etcd_open(&b, "node-b"), 0);
	assert_true(WAIT_UNTIL(ready(&a) && ready(&b), 8000));
	strcpy(n.node, "node-a");
	strcpy(n.endpoint, "tcp:127.0.0.1:7471");
	{
		struct done d = { 0 };

		assert_int_equal(a.ops->put_node(&a, &n, on_done, &d), 0);
		assert_true(WAIT_UNTIL(d.called, 5000));
		assert_int_equal(d.status, 0);
	}
	region(&rec, "node-a", "blue", "r1");
	t0 = now_ms();
	{
		struct done d = { 0 };

		assert_int_equal(a.ops->put_region(&a, &rec, RD_REG_EXCL, on_done, &d), 0);
		assert_int_equal(d.called, 0);
		/* our own write is visible to our reads at once */
		assert_int_equal(a.ops->get_region(&a, "blue", "r1", &back), 0);
		assert_true(WAIT_UNTIL(d.called, 5000));
		assert_int_equal(d.status, 0);
	}
	print_message("put answered in %llu ms\n", (unsigned long long)(now_ms() - t0));
	/* in etcd: signed, under a lease */
	v = etcd_value(PREFIX "/regions/blue/r1", lease, sizeof(lease));
	assert_non_null(v);
	assert_non_null(strstr(v, "\"mac\":\""));
	assert_true(lease[0] != 0);
	free(v);
	/* the other node learns it through its watch */
	assert_true(WAIT_UNTIL(b.ops->get_region(&b, "blue", "r1", &back) == 0, 3000));
	assert_true(flags_of(&b) & RD_REG_CHANGED);
	assert_string_equal(back.node, "node-a");
	assert_true(listed(&b, "blue/r1"));
	assert_true(listed_prefix(&b, "blue", "r", "blue/r1"));
	assert_true(listed_prefix(&b, "blue", "", "blue/r1"));
	assert_false(listed_prefix(&b, "blue", "r2", "blue/r1"));
	assert_false(listed_prefix(&b, "blu", "", "blue/r1"));
	assert_true(WAIT_UNTIL(b.ops->get_node(&b, "node-a", &nback) == 0, 3000));
	assert_int_equal(b.ops->fetch_region(&b, "blue", "r1", on_got, &g), 0);
	assert_true(WAIT_UNTIL(g.called, 5000));
	assert_int_equal(g.status, 0);
	assert_int_equal(g.rec.epoch, 77);
	g.called = 0;
	assert_int_equal(b.ops->fetch_region(&b, "blue", "none", on_got, &g), 0);
	assert_true(WAIT_UNTIL(g.called, 5000));
	assert_int_equal(g.status, -ENOENT);

	assert_int_equal(del_wait(&a, "blue", "r1"), 0);
	assert_int_equal(a.ops->get_region(&a, "blue", "r1", &back), -ENOENT);
	v = etcd_value(PREFIX "/regions/blue/r1", NULL, 0);
	assert_null(v);
	assert_true(WAIT_UNTIL(b.ops->get_region(&b, "blue", "r1", &back) == -ENOENT, 3000));

	/* the metrics: the thread's requests (reads from the cache are none),
	 * every one answered */
	assert_int_equal(a.stats.ops, (1u << RD_REGOPS) - 1);
	assert_true(reqs(&a, RD_REGOP_AUTH) >= 1);
	assert_true(reqs(&a, RD_REGOP_LEASE) >= 1);
	assert_true(reqs(&a, RD_REGOP_GET) >= 1);  /* the range before the watch */
	assert_true(reqs(&a, RD_REGOP_WATCH) >= 1);
	assert_true(reqs(&a, RD_REGOP_PUT) >= 2);  /* node, region */
	assert_true(reqs(&a, RD_REGOP_DELETE) >= 1);
	assert_true(reqs(&b, RD_REGOP_GET) >= 3);  /* its range, two fetches */
	assert_int_equal(errs(&a, RD_REGOP_PUT, -1) + errs(&a, RD_REGOP_DELETE, -1), 0);
	assert_int_equal(errs(&b, RD_REGOP_GET, -1), 0);
	assert_int_equal(a.stats.lease_lost, 0);

	/* close revokes the lease: the node record goes with it */
	etcd_close(&a);
	v = etcd_value(PREFIX "/nodes/node-a", NULL, 0);
	assert_null(v);
	assert_true(WAIT_UNTIL(b.ops->get_node(&b, "node-a", &nback) == -ENOENT, 3000));
	etcd_close(&b);
}

static void test_etcd_tamper(void **st)
{
	struct rd_registry a, b;
	struct rd_region_rec rec, back;
	json_error_t jerr;
	json_t *o;
	char *signed_text, *t, *orig;
	char log[16384];

	(void)st;
	assert_int_equal(etcd_open(&b, "node-b"), 0);
	assert_true(WAIT_UNTIL(ready(&b), 8000));
	/* a record of a node that is not running, written straight into etcd */
	region(&rec, "ghost", "blue", "g1");
	signed_text = rd_region_rec_sign(&rec, (const uint8_t *)SECRET, strlen(SECRET));
	etcd_put(PREFIX "/regions/blue/g1", signed_text);
	assert_true(WAIT_UNTIL(b.ops->get_region(&b, "blue", "g1", &back) == 0, 3000));
	assert_true(listed(&b, "blue/g1"));
	/* someone who can write etcd widens its policy, MAC kept */
	o = json_loads(signed_text, 0, &jerr);
	json_object_set_new(o, "policy", json_string("list"));
	json_object_set_new(o, "tenants", json_pack("[s]", "mallory"));
	t = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	capture_start();
	etcd_put(PREFIX "/regions/blue/g1", t);
	free(t);
	assert_true(WAIT_UNTIL(b.ops->get_region(&b, "blue", "g1", &back) == -EBADMSG, 3000));
	assert_false(listed(&b, "blue/g1"));
	/* a record without a MAC, and one under a key that does not match it */
	etcd_put(PREFIX "/regions/blue/g2", "{\"node\":\"ghost\"}");
	etcd_put(PREFIX "/regions/blue/g3", signed_text);
	assert_true(WAIT_UNTIL(b.ops->get_region(&b, "blue", "g3", &back) == -EBADMSG, 3000));
	assert_int_equal(b.ops->get_region(&b, "blue", "g2", &back), -EBADMSG);
	assert_true(WAIT_UNTIL(capture_has("wrong MAC") && capture_has("filed under another name"), 3000));
	capture_stop("rejected", log, sizeof(log));
	assert_non_null(strstr(log, "regions/blue/g1"));
	assert_non_null(strstr(log, "wrong MAC"));
	assert_non_null(strstr(log, "filed under another name"));
	free(signed_text);

	/* our own record tampered with: put back by the node that owns it */
	assert_int_equal(etcd_open(&a, "node-a"), 0);
	assert_true(WAIT_UNTIL(ready(&a), 8000));
	region(&rec, "node-a", "blue", "mine");
	assert_int_equal(put_wait(&a, &rec, 0), 0);
	orig = etcd_value(PREFIX "/regions/blue/mine", NULL, 0);
	assert_non_null(orig);
	o = json_loads(orig, 0, &jerr);
	json_object_set_new(o, "policy", json_string("list"));
	json_object_set_new(o, "tenants", json_pack("[s]", "mallory"));
	t = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	etcd_put(PREFIX "/regions/blue/mine", t);
	free(t);
	bool healed = false;

	for (int i = 0; i < 50 && !healed; i++) {
		char *now = etcd_value(PREFIX "/regions/blue/mine", NULL, 0);

		healed = now && !strcmp(now, orig);
		free(now);
		if (!healed)
			pump(100);
	}
	assert_true(healed);
	/* and deleted behind its back: put back too */
	{
		char *k = b64(PREFIX "/regions/blue/mine", strlen(PREFIX "/regions/blue/mine")), body[256], out[1024];

		snprintf(body, sizeof(body), "{\"key\":\"%s\"}", k);
		free(k);
		assert_int_equal(etcd_post("/v3/kv/deleterange", body, out, sizeof(out)), 0);
	}
	healed = false;
	for (int i = 0; i < 50 && !healed; i++) {
		char *now = etcd_value(PREFIX "/regions/blue/mine", NULL, 0);

		healed = now && !strcmp(now, orig);
		free(now);
		if (!healed)
			pump(100);
	}
	assert_true(healed);
	free(orig);
	assert_int_equal(b.ops->get_region(&b, "blue", "mine", &back), 0);
	etcd_close(&a);
	etcd_close(&b);
}

static void test_etcd_excl(void **st)
{
	struct rd_registry a, b;
	struct rd_region_rec rec, back;

	(void)st;
	assert_int_equal(etcd_open(&a, "node-a"), 0);
	assert_int_equal(etcd_open(&b, "node-b"), 0);
	assert_true(WAIT_UNTIL(ready(&a) && ready(&b), 8000));
	region(&rec, "node-a", "blue", "x");
	assert_int_equal(put_wait(&a, &rec, RD_REG_EXCL), 0);
	region(&rec, "node-b", "blue", "x");
	assert_int_equal(put_wait(&b, &rec, RD_REG_EXCL), -EEXIST);
	/* b's refused write does not linger in its view */
	assert_int_equal(b.ops->get_region(&b, "blue", "x", &back), 0);
	assert_string_equal(back.node, "node-a");
	/* our own node's record is overwritten */
	region(&rec, "node-a", "blue", "x");
	rec.epoch = 1000;
	assert_int_equal(put_wait(&a, &rec, RD_REG_EXCL), 0);
	assert_true(WAIT_UNTIL(b.ops->get_region(&b, "blue", "x", &back) == 0 && back.epoch == 1000, 3000));
	/* a forged record does not hold a name */
	etcd_put(PREFIX "/regions/blue/y", "{\"node\":\"node-a\",\"mac\":\"00\"}");
	region(&rec, "node-b", "blue", "y");
	assert_int_equal(put_wait(&b, &rec, RD_REG_EXCL), 0);
	etcd_close(&a);
	etcd_close(&b);
}

static void test_etcd_lease_revoked(void **st)
{
	struct rd_registry a;
	struct rd_region_rec rec;
	struct rd_node_rec n = { .pid = 2 };
	char lease[32], lease2[32], body[128], out[8192], *v;
	bool back = false;

	(void)st;
	assert_int_equal(etcd_open(&a, "node-a"), 0);
	assert_true(WAIT_UNTIL(ready(&a), 8000));
	strcpy(n.node, "node-a");
	assert_int_equal(a.ops->put_node(&a, &n, NULL, NULL), 0);
	region(&rec, "node-a", "blue", "leased");
	assert_int_equal(put_wait(&a, &rec, 0), 0);
	v = etcd_value(PREFIX "/nodes/node-a", lease, sizeof(lease));
	assert_non_null(v);
	free(v);
	snprintf(body, sizeof(body), "{\"ID\":\"%s\"}", lease);
	capture_start();
	assert_int_equal(etcd_post("/v3/lease/revoke", body, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "revision"));
	/* the records went with the lease; the watch (or the next keepalive)
	 * tells the thread, which may have put them back before we look */
	for (int i = 0; i < 60 && !back; i++) {
		char *r = etcd_value(PREFIX "/regions/blue/leased", NULL, 0);

		v = etcd_value(PREFIX "/nodes/node-a", lease2, sizeof(lease2));
		back = r && v;
		free(r);
		free(v);
		pump(100);
	}
	assert_true(back);
	assert_string_not_equal(lease, lease2);
	assert_true(WAIT_UNTIL(flags_of(&a) & RD_REG_REPUBLISHED, 3000));
	assert_true(WAIT_UNTIL(ready(&a), 3000));
	assert_int_equal(__atomic_load_n(&a.stats.lease_lost, __ATOMIC_RELAXED), 1);
	assert_true(WAIT_UNTIL(capture_has("is gone") && capture_has("is back, under lease"), 3000));
	capture_stop("is gone", out, sizeof(out));
	assert_non_null(strstr(out, "is gone"));
	assert_non_null(strstr(out, "is back, under lease"));
	etcd_close(&a);
}

static void test_etcd_stopped(void **st)
{
	struct rd_registry a;
	struct rd_region_rec rec, back;
	struct rd_node_rec n = { .pid = 3 };
	struct done d = { 0 };
	char lease[32], lease2[32], *v;
	uint64_t t0, dt;

	(void)st;
	assert_int_equal(etcd_open(&a, "node-a"), 0);
	assert_true(WAIT_UNTIL(ready(&a), 8000));
	strcpy(n.node, "node-a");
	assert_int_equal(a.ops->put_node(&a, &n, NULL, NULL), 0);
	region(&rec, "node-a", "blue", "before");
	assert_int_equal(put_wait(&a, &rec, 0), 0);
	v = etcd_value(PREFIX "/nodes/node-a", lease, sizeof(lease));
	assert_non_null(v);
	free(v);

	assert_int_equal(kill(etcd_pid, SIGSTOP), 0);
	/* reads answer from the cache, at once */
	t0 = now_ms();
	for (int i = 0; i < 1000; i++)
		assert_int_equal(a.ops->get_region(&a, "blue", "before", &back), 0);
	assert_true(listed(&a, "blue/before"));
	dt = now_ms() - t0;
	print_message("1000 reads with etcd stopped: %llu ms\n", (unsigned long long)dt);
	assert_true(dt < 500);
	/* a write fails after registry.timeout_ms (1 s) */
	region(&rec, "node-a", "blue", "during");
	t0 = now_ms();
	assert_int_equal(a.ops->put_region(&a, &rec, 0, on_done, &d), 0);
	assert_true(WAIT_UNTIL(d.called, 5000));
	dt = d.at_ms - t0;
	print_message("write with etcd stopped: %s after %llu ms\n", strerror(-d.status),
		      (unsigned long long)dt);
	assert_int_equal(d.status, -ETIMEDOUT);
	assert_true(dt >= 900 && dt < 2500);
	/* past the lease TTL (2 s) without a keepalive: not ready */
	assert_true(WAIT_UNTIL(!ready(&a), 4000));
	/* the metrics: keepalives that etcd never answered (each waited its
	 * attempt out: TTL/3), and the lease lost. (The write may have expired
	 * in the queue behind them, never sent: no request then.) */
	assert_true(WAIT_UNTIL(errs(&a, RD_REGOP_LEASE, -1) >= 1 &&
			       __atomic_load_n(&a.stats.lease_lost, __ATOMIC_RELAXED) >= 1, 3000));
	assert_true(__atomic_load_n(&a.stats.sum_ns[RD_REGOP_LEASE], __ATOMIC_RELAXED) >= 500000000ull);
	assert_int_equal(a.ops->get_region(&a, "blue", "before", &back), 0);
	pump(500);
	assert_int_equal(kill(etcd_pid, SIGCONT), 0);

	/* back: a new lease, our records under it, the failed write made */
	assert_true(WAIT_UNTIL(ready(&a), 10000));
	bool published = false;

	for (int i = 0; i < 50 && !published; i++) {
		char *r1 = etcd_value(PREFIX "/regions/blue/before", NULL, 0);
		char *r2 = etcd_value(PREFIX "/regions/blue/during", NULL, 0);

		v = etcd_value(PREFIX "/nodes/node-a", lease2, sizeof(lease2));
		published = r1 && r2 && v && strcmp(lease, lease2);
		free(r1);
		free(r2);
		free(v);
		if (!published)
			pump(100);
	}
	assert_true(published);
	region(&rec, "node-a", "blue", "after");
	assert_int_equal(put_wait(&a, &rec, 0), 0);
	etcd_close(&a);
}

static void test_etcd_restarted(void **st)
{
	struct rd_registry a, b;
	struct rd_region_rec rec, back;
	char *v;

	(void)st;
	assert_int_equal(etcd_open(&a, "node-a"), 0);
	assert_int_equal(etcd_open(&b, "node-b"), 0);
	assert_true(WAIT_UNTIL(ready(&a) && ready(&b), 8000));
	/* etcd restarts: its simple tokens die with it, the watches end */
	stop_etcd();
	assert_int_equal(start_etcd(), 0);
	assert_int_equal(login(), 0);
	/* a write logs in again */
	region(&rec, "node-a", "blue", "after-restart");
	assert_int_equal(put_wait(&a, &rec, 0), 0);
	v = etcd_value(PREFIX "/regions/blue/after-restart", NULL, 0);
	assert_non_null(v);
	free(v);
	/* and the other node watches again */
	assert_true(WAIT_UNTIL(b.ops->get_region(&b, "blue", "after-restart", &back) == 0, 8000));
	assert_true(WAIT_UNTIL(ready(&a) && ready(&b), 8000));
	etcd_close(&a);
	etcd_close(&b);
}

static void test_etcd_refused(void **st)
{
	struct rd_registry w, c;
	struct rd_config cfg;
	char log[32768];
	int ret;

	(void)st;
	capture_start();
	/* wrong password */
	etcd_cfg(&cfg, "node-w");
	snprintf(cfg.etcd_password_file, sizeof(cfg.etcd_password_file), "%s", badpw);
	assert_int_equal(rd_registry_etcd_open(&w, &cfg, (const uint8_t *)SECRET, strlen(SECRET)), 0);
	track(&w);
	rd_config_free(&cfg);
	/* no client certificate: etcd runs with --client-cert-auth */
	etcd_cfg(&cfg, "node-c");
	cfg.etcd_cert[0] = cfg.etcd_key[0] = 0;
	assert_int_equal(rd_registry_etcd_open(&c, &cfg, (const uint8_t *)SECRET, strlen(SECRET)), 0);
	track(&c);
	pump(0);
	assert_false(WAIT_UNTIL(ready(&w) || ready(&c), 2500));
	{
		struct done d = { 0 };
		struct rd_region_rec rec;

		region(&rec, "node-w", "blue", "refused");
		assert_int_equal(w.ops->put_region(&w, &rec, 0, on_done, &d), 0);
		assert_true(WAIT_UNTIL(d.called, 3000));
		assert_int_equal(d.status, -ETIMEDOUT);
	}
	/* the metrics: refused logins; a TLS session etcd ends */
	assert_true(errs(&w, RD_REGOP_AUTH, RD_REGERR_DENIED) >= 1);
	{
		uint64_t n = 0;

		for (int o = 0; o < RD_REGOPS; o++)
			n += errs(&c, o, RD_REGERR_UNREACHABLE);
		assert_true(n >= 1);
	}
	etcd_close(&w);
	etcd_close(&c);
	capture_stop("authentication as 'root' failed", log, sizeof(log));
	assert_non_null(strstr(log, "authentication as 'root' failed"));
	assert_non_null(strstr(log, "invalid user ID or password"));
	/* without a client certificate etcd ends the TLS session (how curl
	 * words it varies), and the log says what to configure */
	assert_non_null(strstr(log, "no client certificate is configured"));
	rd_config_free(&cfg);

	/* start-up errors: a missing password file, a missing CA file */
	etcd_cfg(&cfg, "node-x");
	snprintf(cfg.etcd_password_file, sizeof(cfg.etcd_password_file), "%s/nonexistent", dir);
	ret = rd_registry_etcd_open(&w, &cfg, (const uint8_t *)SECRET, strlen(SECRET));
	assert_int_equal(ret, -ENOENT);
	snprintf(cfg.etcd_password_file, sizeof(cfg.etcd_password_file), "%s", pwfile);
	snprintf(cfg.etcd_cacert, sizeof(cfg.etcd_cacert), "%s/nonexistent.crt", dir);
	assert_int_equal(rd_registry_etcd_open(&w, &cfg, (const uint8_t *)SECRET, strlen(SECRET)), -ENOENT);
	rd_config_free(&cfg);
}

/* The record key: registry.secret_file, the transport's, or random. */
static void test_key_sources(void **st)
{
	struct rd_config cfg;
	uint8_t k1[64], k2[64];
	size_t l1, l2;
	bool rnd;
	char err[512], path[200];

	(void)st;
	rd_config_defaults(&cfg);
	assert_int_equal(rd_registry_load_key(&cfg, k1, &l1, &rnd, err, sizeof(err)), 0);
	assert_true(rnd);
	assert_int_equal(l1, 32);
	assert_int_equal(rd_registry_load_key(&cfg, k2, &l2, &rnd, err, sizeof(err)), 0);
	assert_memory_not_equal(k1, k2, 32);
	snprintf(path, sizeof(path), "%s/tcp.secret", dir);
	sh("echo tcp-secret-0123456789abcdef > %s", path);
	cfg.tcp_enabled = true;
	snprintf(cfg.tcp_secret_file, sizeof(cfg.tcp_secret_file), "%s", path);
	assert_int_equal(rd_registry_load_key(&cfg, k1, &l1, &rnd, err, sizeof(err)), 0);
	assert_false(rnd);
	assert_int_equal(l1, strlen("tcp-secret-0123456789abcdef"));
	assert_memory_equal(k1, "tcp-secret-0123456789abcdef", l1);
	/* registry.secret_file wins; short or missing ones are errors */
	snprintf(path, sizeof(path), "%s/reg.secret", dir);
	sh("echo short > %s", path);
	snprintf(cfg.registry_secret_file, sizeof(cfg.registry_secret_file), "%s", path);
	assert_int_equal(rd_registry_load_key(&cfg, k1, &l1, &rnd, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "at least 16 bytes"));
	/* a placeholder from an example, or bytes that are not random */
	sh("echo replace-me-with-32-random-bytes-base64 > %s", path);
	assert_int_equal(rd_registry_load_key(&cfg, k1, &l1, &rnd, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "placeholder"));
	sh("echo aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa > %s", path);
	assert_int_equal(rd_registry_load_key(&cfg, k1, &l1, &rnd, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "not random"));
	snprintf(cfg.registry_secret_file, sizeof(cfg.registry_secret_file), "%s/none", dir);
	assert_int_equal(rd_registry_load_key(&cfg, k1, &l1, &rnd, err, sizeof(err)), -ENOENT);
	/* verbs' when tcp is off; a long secret becomes HMAC's own hash of it */
	cfg.registry_secret_file[0] = 0;
	cfg.tcp_enabled = false;
	cfg.verbs_enabled = true;
	snprintf(path, sizeof(path), "%s/verbs.secret", dir);
	sh("printf '0123456789%%.0s' 1 2 3 4 5 6 7 8 9 10 > %s", path); /* 100 bytes */
	snprintf(cfg.verbs_secret_file, sizeof(cfg.verbs_secret_file), "%s", path);
	assert_int_equal(rd_registry_load_key(&cfg, k1, &l1, &rnd, err, sizeof(err)), 0);
	assert_int_equal(l1, 32);
	rd_config_free(&cfg);
	/* a record signed with the 100-byte secret verifies with its hash */
	{
		char secret[101];
		struct rd_region_rec rec, back;
		char *s;

		for (int i = 0; i < 100; i++)
			secret[i] = (char)('0' + i % 10);
		secret[100] = 0;
		region(&rec, "n", "t", "r");
		s = rd_region_rec_sign(&rec, (const uint8_t *)secret, 100);
		assert_int_equal(rd_region_rec_verify(s, strlen(s), k1, l1, &back, NULL), 0);
		free(s);
	}
}

int main(void)
{
	const struct CMUnitTest file_tests[] = {
		cmocka_unit_test(test_key_sources),
		cmocka_unit_test(test_file_records),
		cmocka_unit_test(test_file_symlinks),
	};
	const struct CMUnitTest etcd_tests[] = {
		cmocka_unit_test(test_etcd_records),
		cmocka_unit_test(test_etcd_tamper),
		cmocka_unit_test(test_etcd_excl),
		cmocka_unit_test(test_etcd_lease_revoked),
		cmocka_unit_test(test_etcd_stopped),
		cmocka_unit_test(test_etcd_restarted),
		cmocka_unit_test(test_etcd_refused),
	};
	int fails;

	signal(SIGPIPE, SIG_IGN);
	snprintf(dir, sizeof(dir), "/tmp/roshm-registry-XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	fails = cmocka_run_group_tests_name("registry_file", file_tests, NULL, NULL);
	if (sh("command -v etcd >/dev/null && command -v openssl >/dev/null && command -v curl >/dev/null")) {
		printf("registry_etcd: skipped: needs etcd (etcd-server), openssl and curl\n");
		sh("rm -rf %s", dir);
		return fails ? 1 : 77;
	}
	fails += cmocka_run_group_tests_name("registry_etcd", etcd_tests, setup_etcd, teardown_etcd);
	stop_etcd();
	if (!getenv("ROSHM_TEST_KEEP"))
		sh("rm -rf %s", dir);
	else
		printf("kept %s\n", dir);
	return fails ? 1 : 0;
}
