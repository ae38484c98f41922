// SPDX-License-Identifier: MIT
/*
 * Attacks on grants to a client (ABI 7, ROSHM_GRANT_ADD_OWNER /
 * roshm_region_grant_owner), from an adversarial review of them; two roshmd
 * (tcp, file registry) in a private network namespace (root needed, else
 * skipped), tenant "a" only:
 * - test_key_claims_hold: a HELLO asking for a live client's key, or for
 *   the key of another pending HELLO, gets another one;
 * - test_replayed_record_name: a registry writer may "write, delete and
 *   replay records" (docs/security.md). H (node 2) owned "on-peer" and
 *   closed it; P owns it now; the writer puts H's old signed record back;
 *   V (node 1) grants its region to "on-peer" by name (ADD_NAME): the grant
 *   names H's dead region, which nobody can hold, and H gets -EACCES.
 *   The same replay before a grant to the *owner* of "on-peer" names H
 *   itself, while it stays attached: docs/security.md says so (a limit: only
 *   the owner's node could say who owns the name now).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "attack.h"
#include "roshm/ctl.h"

static struct th_daemon n1, n2;
static char workdir[256], secret[300];

static int read_file(const char *path, char *buf, size_t cap)
{
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f)
		return -errno;
	n = fread(buf, 1, cap - 1, f);
	fclose(f);
	buf[n] = 0;
	return (int)n;
}

/* The registry writer: put @text back as the record of @name (tenant a). */
static void replay(const char *name, const char *text)
{
	char path[600], tmp[640];
	FILE *f;

	snprintf(path, sizeof(path), "%s/registry/regions/a/%s.json", workdir, name);
	snprintf(tmp, sizeof(tmp), "%s/registry/regions/a/.replay.tmp", workdir);
	f = fopen(tmp, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(rename(tmp, path), 0);
}

static int wait_record(const char *name, char *buf, size_t cap, bool gone)
{
	char path[600];

	snprintf(path, sizeof(path), "%s/registry/regions/a/%s.json", workdir, name);
	for (int i = 0; i < 300; i++) {
		int n = read_file(path, buf, cap);

		if (gone ? n == -ENOENT : n > 0)
			return 0;
		usleep(10000);
	}
	return -ETIME;
}

static void run(void)
{
	struct roshm_region_opts grant = { .policy = ROSHM_POLICY_GRANT };
	const struct roshm_part all = { 0 };
	struct roshm *v, *h, *p;
	char old[16384], cur[16384];
	uint32_t hm, hh, hp, hx;
	const char *peer = "on-peer", *mem = "on-mem";
	int err, ret;

	v = atk_open(&n1, "a", NULL, &err);
	h = atk_open(&n2, "a", NULL, &err);
	p = atk_open(&n2, "a", NULL, &err);
	assert_non_null(v);
	assert_non_null(h);
	assert_non_null(p);
	assert_int_equal(roshm_region_create(v, mem, 4096, &grant, &hm), 0);
	memset(roshm_region_data(v, hm, NULL), 0, 8);

	/* H once owned the name: the registry writer keeps its signed record */
	assert_int_equal(roshm_region_create(h, peer, 4096, NULL, &hh), 0);
	assert_int_equal(wait_record(peer, old, sizeof(old), false), 0);
	fprintf(stderr, "H's record: %s\n", old);
	assert_int_equal(roshm_region_close(h, hh), 0);
	assert_int_equal(wait_record(peer, cur, sizeof(cur), true), 0);

	/* P owns it now; the writer replays H's record */
	assert_int_equal(roshm_region_create(p, peer, 4096, NULL, &hp), 0);
	assert_int_equal(wait_record(peer, cur, sizeof(cur), false), 0);
	replay(peer, old);
	usleep(300000);   /* past revalidate_ms */

	/* V grants to "the owner of om-peer" (P, it believes) */
	ret = roshm_region_grant_part(v, hm, peer, &all);
	fprintf(stderr, "grant_part: %d\n", ret);
	assert_true(ret == 0 || ret == -EAGAIN);
	usleep(300000);

	/* H, which closed om-peer long ago, tries V's region */
	ret = atk_open_retry(h, mem, &hx);
	fprintf(stderr, "H opens %s: %d\n", mem, ret);
	if (!ret) {
		uint64_t w = 0x4841434b;   /* "HACK" */

		memcpy(roshm_arena(h, NULL), &w, 8);
		ret = roshm_write_sync(h, hx, 0, 0, 8);
		fprintf(stderr, "H writes it: %d, V's word now 0x%llx\n", ret,
			(unsigned long long)*(volatile uint64_t *)roshm_region_data(v, hm, NULL));
		ret = 0;
	}
	assert_int_equal(ret, -EACCES);
	roshm_close(p);
	roshm_close(h);
	roshm_close(v);
	atk_assert_alive(&n1);
	atk_assert_alive(&n2);
}

/* the replay against ADD_NAME */
static void test_replayed_record_name(void **st)
{
	(void)st;
	run();
}


/* HELLO by hand asking for @key: the key the reply gives, 0 on failure.
 * The connection stays open (pending) in *@fd. */
static uint64_t hello_key(const struct th_daemon *d, uint64_t key, int *fd)
{
	struct roshm_ctl_hello hl;
	struct roshm_ctl_hello_reply hr;
	ssize_t n;

	*fd = atk_ctl_connect(d->sock);
	if (*fd < 0)
		return 0;
	memset(&hl, 0, sizeof(hl));
	atk_ctl_hdr(&hl.hdr, ROSHM_CTL_HELLO, sizeof(hl));
	snprintf(hl.tenant, sizeof(hl.tenant), "a");
	snprintf(hl.token, sizeof(hl.token), "ta");
	hl.client_key = key;
	n = atk_ctl_call(*fd, &hl, sizeof(hl), -1, &hr, sizeof(hr), 5000);
	return n == (ssize_t)sizeof(hr) && !hr.hdr.status ? hr.client_key : 0;
}

/* What held: a live client's key, and a key another pending HELLO asked
 * for, are not handed out again. */
static void test_key_claims_hold(void **st)
{
	int err, f1, f2, f3;
	struct roshm *a = atk_open(&n1, "a", NULL, &err);
	uint64_t k;

	(void)st;
	assert_non_null(a);
	assert_true(a->client_key != 0);
	k = hello_key(&n1, a->client_key, &f1);
	assert_true(k && k != a->client_key);
	assert_true(hello_key(&n1, 0x1234567812345678ull, &f2) == 0x1234567812345678ull);
	k = hello_key(&n1, 0x1234567812345678ull, &f3);
	assert_true(k && k != 0x1234567812345678ull);
	close(f1);
	close(f2);
	close(f3);
	roshm_close(a);
	atk_assert_alive(&n1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_key_claims_hold),
		cmocka_unit_test(test_replayed_record_name),
	};
	char ns[64];
	int fails;

	if (geteuid() != 0) {
		printf("owner_grant: skipped: needs root for a network namespace\n");
		return 77;
	}
	th_cleanup_enable();
	if (atk_netns_enter_new(ns, sizeof(ns)) ||
	    atk_workdir(workdir, sizeof(workdir), secret, sizeof(secret)) ||
	    atk_two_nodes(&n1, &n2, "sec-og", 7481, 7482, workdir, secret,
			  "tenants = ( { name = \"a\"; token = \"ta\"; } );\n")) {
		printf("owner_grant: cannot set up two nodes\n");
		return 1;
	}
	fails = cmocka_run_group_tests_name("owner_grant", tests, NULL, NULL);
	if (fails) {
		atk_log_tail(&n1, 20);
		atk_log_tail(&n2, 20);
	}
	atk_daemon_kill(&n1);
	atk_daemon_kill(&n2);
	return fails;
}
