// SPDX-License-Identifier: MIT
/*
 * DPDK telemetry of a real roshmd, over its real telemetry socket (the v2
 * protocol: SOCK_SEQPACKET, a JSON greeting, then one JSON reply per
 * command): with 600 regions, more than one reply can hold (16 KiB),
 * /roshm/regions answers in pages that each stay inside the limit, and
 * following "next" from the first page to the last yields every region
 * exactly once, in name order; /roshm/region,T/NAME answers each of them
 * with what roshmd knows of it (names with '-' and '.', which DPDK refuses
 * as dict keys, included). Unknown or malformed parameters get null.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <cmocka.h>

#include "roshm.h"
#include "harness.h"

#define NREG 600
#define TEL_MAX_REPLY 16384       /* DPDK's MAX_OUTPUT_LEN */
#define TEL_MAX_ARRAY 512         /* RTE_TEL_MAX_ARRAY_ENTRIES */

static struct th_daemon node;
static struct th_chan ready, done;
static pid_t owner_pid;
static int tfd = -1;

#define CHECK(cond) do { if (!(cond)) { fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); return 1; } } while (0)

/* Region "tel-IDX" is the (IDX * 343 % NREG)th created (343 = 1/7 mod 600). */
static json_int_t size_of(int idx)
{
	return 4096 + 4096 * ((idx * 343) % NREG % 3);
}

/* The owner pod: NREG regions, held until the test is done. */
static int owner(void *arg)
{
	struct roshm_params p = { .sock_path = node.sock };
	struct roshm *r;
	int err;

	(void)arg;
	r = roshm_open(&p, &err);
	CHECK(r);
	for (int i = 0; i < NREG; i++) {
		char name[32];
		uint32_t h;

		/* created out of order: the pages come back sorted anyway */
		snprintf(name, sizeof(name), "tel-%04d", (i * 7) % NREG);
		err = roshm_region_create(r, name, 4096 + 4096 * (uint64_t)(i % 3), NULL, &h);
		if (err) {
			fprintf(stderr, "create %s: %s\n", name, roshm_strerror(err));
			return 1;
		}
	}
	th_chan_send(&ready, 1);
	th_chan_recv(&done);
	roshm_close(r);
	return 0;
}

static int tel_connect(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	char buf[4096];
	int fd;

	/* EAL's runtime directory: /var/run/dpdk/PREFIX as root */
	snprintf(buf, sizeof(buf), "%s/dpdk/%s/dpdk_telemetry.v2",
		 geteuid() == 0 ? "/var/run" : xdg ? xdg : "/tmp", node.eal_prefix);
	if (strlen(buf) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "telemetry socket path too long: %s\n", buf);
		return -1;
	}
	memcpy(sa.sun_path, buf, strlen(buf) + 1);
	fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		fprintf(stderr, "telemetry socket %s: %s\n", sa.sun_path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	/* the greeting: {"version":...,"pid":...,"max_output_len":16384} */
	if (recv(fd, buf, sizeof(buf), 0) <= 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Send @cmd, return the value under its command name (a new reference; NULL
 * for a JSON null), and the reply's size in @len. Fails the test on a
 * reply over telemetry's limit or that is not JSON. */
static json_t *tel(const char *cmd, size_t *len)
{
	static char buf[1 << 20];
	char key[64];
	json_error_t err;
	json_t *o, *v;
	ssize_t n;

	assert_int_equal(send(tfd, cmd, strlen(cmd), 0), (ssize_t)strlen(cmd));
	n = recv(tfd, buf, sizeof(buf), 0);
	assert_true(n > 0);
	if (n > TEL_MAX_REPLY)
		fail_msg("%s: a reply of %zd bytes, over telemetry's %d", cmd, n, TEL_MAX_REPLY);
	o = json_loadb(buf, (size_t)n, 0, &err);
	if (!o)
		fail_msg("%s: not JSON (%s): %.200s", cmd, err.text, buf);
	snprintf(key, sizeof(key), "%.*s", (int)strcspn(cmd, ","), cmd);
	v = json_object_get(o, key);
	if (!v)
		fail_msg("%s: no \"%s\" in the reply: %.200s", cmd, key, buf);
	v = json_is_null(v) ? NULL : json_incref(v);
	json_decref(o);
	if (len)
		*len = (size_t)n;
	return v;
}

/* .total of /roshm/regions once the snapshot (refreshed each second) has
 * every region. */
static void wait_all(void)
{
	for (int i = 0; i < 50; i++) {
		json_t *p = tel("/roshm/regions", NULL);
		json_int_t t = json_integer_value(json_object_get(p, "total"));

		json_decref(p);
		if (t == NREG)
			return;
		usleep(100000);
	}
	fail_msg("the telemetry snapshot never held the %d regions", NREG);
}

static void test_regions_paged(void **state)
{
	char cmd[300], next[200] = "", prev[200] = "";
	static char seen[NREG];
	int pages = 0, count = 0;

	(void)state;
	wait_all();
	for (;;) {
		size_t len, i;
		json_t *p, *names, *v, *nx;

		if (next[0])
			snprintf(cmd, sizeof(cmd), "/roshm/regions,%s", next);
		else
			snprintf(cmd, sizeof(cmd), "/roshm/regions");
		p = tel(cmd, &len);
		assert_non_null(p);
		assert_int_equal(json_integer_value(json_object_get(p, "total")), NREG);
		names = json_object_get(p, "regions");
		assert_true(json_is_array(names));
		assert_true(json_array_size(names) > 0 && json_array_size(names) <= TEL_MAX_ARRAY);
		pages++;
		json_array_foreach(names, i, v) {
			const char *k = json_string_value(v);
			int idx = -1;

			if (!k || sscanf(k, "default/tel-%04d", &idx) != 1 || idx < 0 || idx >= NREG)
				fail_msg("page %d: unexpected entry %s", pages, json_dumps(v, JSON_ENCODE_ANY));
			if (seen[idx]++)
				fail_msg("'%s' on two pages", k);
			/* in name order, within the page and across pages */
			if (strcmp(k, prev) <= 0 || (next[0] && strcmp(k, next) < 0))
				fail_msg("'%s' after '%s' on a page from '%s'", k, prev, next);
			snprintf(prev, sizeof(prev), "%s", k);
			count++;
		}
		print_message("page %d: %zu regions, %zu bytes\n", pages, json_array_size(names), len);
		nx = json_object_get(p, "next");
		if (!nx) {
			json_decref(p);
			break;
		}
		/* the next page starts after everything on this one */
		assert_true(json_is_string(nx));
		assert_true(strcmp(json_string_value(nx), prev) > 0);
		snprintf(next, sizeof(next), "%s", json_string_value(nx));
		json_decref(p);
		assert_true(pages < 100);
	}
	assert_int_equal(count, NREG);
	/* more than one reply holds: it took pages */
	assert_true(pages >= 3);
	for (int i = 0; i < NREG; i++)
		if (!seen[i])
			fail_msg("default/tel-%04d on no page", i);
}

static void test_start_in_the_middle(void **state)
{
	json_t *p, *names;

	(void)state;
	/* START need not be a name: the page starts at the next one */
	p = tel("/roshm/regions,default/tel-0299x", NULL);
	names = json_object_get(p, "regions");
	assert_string_equal(json_string_value(json_array_get(names, 0)), "default/tel-0300");
	json_decref(p);
	p = tel("/roshm/regions,default/tel-0599", NULL);
	names = json_object_get(p, "regions");
	assert_int_equal(json_array_size(names), 1);
	assert_null(json_object_get(p, "next"));
	json_decref(p);
	/* past the end: an empty page */
	p = tel("/roshm/regions,zzz", NULL);
	assert_int_equal(json_array_size(json_object_get(p, "regions")), 0);
	assert_int_equal(json_integer_value(json_object_get(p, "total")), NREG);
	assert_null(json_object_get(p, "next"));
	json_decref(p);
}

static void test_each_region(void **state)
{
	char cmd[100], big[400];
	json_t *r;

	(void)state;
	for (int i = 0; i < NREG; i++) {
		snprintf(cmd, sizeof(cmd), "/roshm/region,default/tel-%04d", i);
		r = tel(cmd, NULL);
		if (!r)
			fail_msg("%s: null", cmd);
		if (strcmp(json_string_value(json_object_get(r, "name")), cmd + 14) ||
		    strcmp(json_string_value(json_object_get(r, "node")), "tel") ||
		    strcmp(json_string_value(json_object_get(r, "state")), "active") ||
		    strcmp(json_string_value(json_object_get(r, "policy")), "tenant") ||
		    strlen(json_string_value(json_object_get(r, "epoch"))) != 16 ||
		    json_integer_value(json_object_get(r, "size")) != size_of(i))
			fail_msg("%s: %s", cmd, json_dumps(r, JSON_COMPACT));
		json_decref(r);
	}
	/* no such region, no parameter, a parameter past any name's length */
	assert_null(tel("/roshm/region,default/none", NULL));
	assert_null(tel("/roshm/region", NULL));
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	memcpy(big, "/roshm/region,", 14);
	assert_null(tel(big, NULL));
	memcpy(big, "/roshm/regions", 14);
	big[14] = ',';
	assert_null(tel(big, NULL));
	/* the other commands answer too */
	r = tel("/roshm/stats", NULL);
	assert_string_equal(json_string_value(json_object_get(r, "node")), "tel");
	assert_int_equal(json_integer_value(json_object_get(r, "regions")), NREG);
	json_decref(r);
	r = tel("/roshm/peers", NULL);
	assert_int_equal(json_array_size(json_object_get(r, "peers")), 0);
	assert_non_null(json_object_get(r, "total"));
	json_decref(r);
	assert_null(tel("/roshm/peer,nobody", NULL));
	/* the command list names them all */
	r = tel("/", NULL);
	static const char *const cmds[] = { "/roshm/stats", "/roshm/regions", "/roshm/region",
					    "/roshm/peers", "/roshm/peer" };
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		bool found = false;
		size_t j;
		json_t *e;

		json_array_foreach(r, j, e)
			found |= !strcmp(json_string_value(e), cmds[i]);
		if (!found)
			fail_msg("%s is not registered", cmds[i]);
	}
	json_decref(r);
}

static int setup(void **state)
{
	(void)state;
	if (th_daemon_start_eal(&node, "tel", NULL, true, NULL, NULL))
		return -1;
	th_chan_init(&ready);
	th_chan_init(&done);
	owner_pid = th_spawn(owner, NULL);
	if (th_chan_recv(&ready) != 1) {
		th_daemon_dump_log(&node);
		return -1;
	}
	tfd = tel_connect();
	return tfd < 0 ? -1 : 0;
}

static int teardown(void **state)
{
	int bad;

	(void)state;
	if (tfd >= 0)
		close(tfd);
	th_chan_send(&done, 1);
	bad = th_wait(owner_pid) != 0;
	if (th_daemon_stop(&node)) {
		th_daemon_dump_log(&node);
		bad = 1;
	}
	return bad ? -1 : 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_regions_paged),
		cmocka_unit_test(test_start_in_the_middle),
		cmocka_unit_test(test_each_region),
	};
	struct rlimit rl;

	/* 600 regions: a memfd each in the owner and in roshmd */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 4096) {
		rl.rlim_cur = rl.rlim_max < 4096 ? rl.rlim_max : 4096;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	return cmocka_run_group_tests_name("telemetry", tests, setup, teardown) ? 1 : 0;
}
