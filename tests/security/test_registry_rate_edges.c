// SPDX-License-Identifier: MIT
/*
 * Requests that wait for their tenant's registry rate (RD_WAIT_RATE,
 * control/reg_rate.c), with tenant "e" at 1 registry operation a second
 * (from the adversary review of 32b71ed): a waiting connection's hang-up,
 * descriptors, malformed messages and a SIGHUP leave roshmd's descriptors
 * where they were and roshmd up; a request whose client half-closed after
 * sending it is answered (it was dropped); a tenant's own drain is charged
 * to its bucket (its stale records were free writes).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "attack.h"
#include "roshm/ctl.h"

static struct th_daemon d;

static int nfds_of_roshmd(void)
{
	char p[64];
	int n = 0;
	DIR *dir;

	snprintf(p, sizeof(p), "/proc/%d/fd", (int)d.pid);
	dir = opendir(p);
	assert_non_null(dir);
	while (readdir(dir))
		n++;
	closedir(dir);
	return n;
}

/* Empty e's bucket (1 token a second): one open takes it; a second one waits. */
static int exhaust(void)
{
	int fd = atk_raw_attach(d.sock, "e", 2, 4096);

	assert_true(fd >= 0);
	assert_int_equal(atk_send_open(fd, "x0", NULL, 0), 0);
	assert_int_equal(atk_wait_reply(fd, 3000), 1);
	return fd;
}

static void test_parked_edges(void **st)
{
	int base, ex, p, mfd, three[3];
	void *map;

	(void)st;
	sleep(1);
	base = nfds_of_roshmd();
	ex = exhaust();

	/* a: a parked open that carries 3 descriptors: closed when read, none kept */
	p = atk_raw_attach(d.sock, "e", 2, 4096);
	assert_true(p >= 0);
	mfd = atk_memfd(4096, &map);
	assert_true(mfd >= 0);
	three[0] = three[1] = three[2] = mfd;
	assert_int_equal(atk_send_open(p, "x1", three, 3), 0);
	assert_int_equal(atk_wait_reply(p, 5000), 0);   /* "too many descriptors": EOF */
	close(p);

	/* b: hang-up while parked with a create and its memfd in the socket */
	ex = (close(ex), exhaust());
	p = atk_raw_attach(d.sock, "e", 2, 4096);
	assert_true(p >= 0);
	{
		struct roshm_ctl_region_create c;
		char rep[64];

		memset(&c, 0, sizeof(c));
		atk_ctl_hdr(&c.hdr, ROSHM_CTL_REGION_CREATE, sizeof(c));
		snprintf(c.name, sizeof(c.name), "hang");
		c.size = 4096;
		assert_int_equal(atk_ctl_call(p, &c, sizeof(c), mfd, rep, sizeof(rep), 50), -ETIME);
	}
	close(p);
	munmap(map, 4096);
	close(mfd);

	/* c: a short message while the bucket is empty: not held, refused at once */
	p = atk_raw_attach(d.sock, "e", 2, 4096);
	assert_true(p >= 0);
	assert_int_equal(send(p, "12345678", 8, MSG_NOSIGNAL), 8);
	assert_int_equal(atk_wait_reply(p, 500), 0);
	close(p);

	/* d: a zero-length message (SEQPACKET allows it) */
	p = atk_raw_attach(d.sock, "e", 2, 4096);
	assert_true(p >= 0);
	assert_int_equal(send(p, "", 0, MSG_NOSIGNAL), 0);
	assert_int_equal(atk_wait_reply(p, 500), 0);
	close(p);

	close(ex);
	sleep(2);
	fprintf(stderr, "roshmd descriptors: %d before, %d after\n", base, nfds_of_roshmd());
	assert_int_equal(nfds_of_roshmd(), base);
	atk_assert_alive(&d);
}

/* A client that sends its request and half-closes (shutdown SHUT_WR) gets
 * its answer when it is read at once; when it was parked for the rate, the
 * hang-up check closes the connection and the request is never answered. */
static void test_half_close(void **st)
{
	int ex, p, r_unparked, r_parked;

	(void)st;
	sleep(2); /* bucket full again */
	p = atk_raw_attach(d.sock, "e", 2, 4096);
	assert_true(p >= 0);
	assert_int_equal(atk_send_open(p, "hc0", NULL, 0), 0);
	shutdown(p, SHUT_WR);
	r_unparked = atk_wait_reply(p, 3000);
	close(p);

	ex = exhaust();
	p = atk_raw_attach(d.sock, "e", 2, 4096);
	assert_true(p >= 0);
	assert_int_equal(atk_send_open(p, "hc1", NULL, 0), 0);
	shutdown(p, SHUT_WR);
	r_parked = atk_wait_reply(p, 5000);
	close(p);
	close(ex);
	fprintf(stderr, "half-closed request: %s when read at once, %s when parked\n",
		r_unparked == 1 ? "answered" : "NOT answered",
		r_parked == 1 ? "answered" : "NOT answered");
	assert_int_equal(r_unparked, 1);
	assert_int_equal(r_parked, 1);
	atk_assert_alive(&d);
}

/* SIGHUP with a new rate (and a tenant list change) while a request waits. */
static void test_sighup(void **st)
{
	int ex, p;
	FILE *f;

	(void)st;
	sleep(2);
	ex = exhaust();
	p = atk_raw_attach(d.sock, "e", 2, 4096);
	assert_true(p >= 0);
	assert_int_equal(atk_send_open(p, "s0", NULL, 0), 0);
	f = fopen(d.conf, "a");
	assert_non_null(f);
	fprintf(f, "quota: { registry_ops_per_sec = 0; };\n");
	fclose(f);
	kill(d.pid, SIGHUP);
	assert_int_equal(atk_wait_reply(p, 5000), 1);
	close(p);
	close(ex);
	atk_assert_alive(&d);
}

/*
 * "drain tenant f" with f's own token (what any pod of f may send, no
 * attach needed) writes every region's record again (stale); it is never
 * held, but it is charged, 1 per region. With 4 operations a second: the
 * bucket is full again (4) after the first 2 creates and a second; the
 * drain of 2 regions leaves 2; the next create runs (a request runs while
 * tokens are left, then pays 2: 0) and the one after waits for a token,
 * 0.25 s at 4/s less what accrued since the bucket was last full (0.215 s
 * seen). An uncharged drain would let both through at once (milliseconds).
 */
static void test_drain_uncharged(void **st)
{
	struct roshm *r;
	uint32_t h[4];
	double t0, t1;
	int err;

	(void)st;
	r = atk_open(&d, "f", NULL, &err);
	assert_non_null(r);
	assert_int_equal(roshm_region_create(r, "d0", 4096, NULL, &h[0]), 0);
	assert_int_equal(roshm_region_create(r, "d1", 4096, NULL, &h[1]), 0);
	sleep(1);   /* f's bucket is full again: 4 */
	assert_int_equal(atk_tenant_drain(d.sock, "f", "tf"), 1); /* 2 puts (stale), 2 deletes */
	t0 = atk_now_s();
	assert_int_equal(roshm_region_create(r, "d2", 4096, NULL, &h[2]), 0);
	assert_int_equal(roshm_region_create(r, "d3", 4096, NULL, &h[3]), 0);
	t1 = atk_now_s();
	fprintf(stderr, "after a drain of 2 regions, 2 creates took %.3f s (rate 4/s)\n", t1 - t0);
	assert_true(t1 - t0 >= 0.15);
	roshm_close(r);
	atk_assert_alive(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parked_edges),
		cmocka_unit_test(test_half_close),
		cmocka_unit_test(test_sighup),
		cmocka_unit_test(test_drain_uncharged),
	};
	int fails;

	th_cleanup_enable();
	char conf[1024];

	snprintf(conf, sizeof(conf), "tenants = ( { name = \"e\"; token = \"te\"; quota = { registry_ops_per_sec = 1; }; },\n"
			    "            { name = \"f\"; token = \"tf\"; quota = { registry_ops_per_sec = 4; }; },\n"
			    "            { name = \"b\"; token = \"tb\"; } );\n"
			    "channel: { hugepages = \"off\"; };\n");
	if (th_daemon_start(&d, "secrateedge", conf))
		return 1;
	fails = cmocka_run_group_tests_name("security_registry_rate_edges", tests, NULL, NULL);
	atk_log_tail(&d, 25);
	atk_daemon_kill(&d);
	return fails;
}
