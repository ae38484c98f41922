// SPDX-License-Identifier: MIT
/*
 * quota.registry_ops_per_sec (control/reg_rate.c) against pods of the same
 * tenant that flood it (from the adversary review of 32b71ed):
 *
 * oldest_starves: a client whose connection is older than its tenant's
 *   flooders asks once while they keep asking. When every refill let all
 *   waiting connections read at once, newest first, the newest took the
 *   tokens and the older one waited until the flood ended (10.7 s at 20/s
 *   and 4 flooders; 8.9 s at the default 500/s and 150 flooders). Now the
 *   tenant's waiting requests are served first come, first served: a fair
 *   turn (about 0.25 s), within 3 s.
 * herd: 120 waiting connections; roshm_tenant_registry_held_total (as
 *   roshmd logs it) counts requests that waited, once each, not every
 *   time a connection was woken and waited again (it was ~33x too many).
 *
 * Knobs: ADV_RATE (a's and c's registry_ops_per_sec, default 20),
 * ADV_FLOODERS (a's newer connections, default 4).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
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

#include "attack.h"
#include "roshm/ctl.h"

static struct th_daemon d;

/* roshmd's control thread (its main thread) CPU time, seconds */
static double ctl_cpu(void)
{
	char p[64], buf[1024];
	unsigned long ut = 0, st = 0;
	FILE *f;

	snprintf(p, sizeof(p), "/proc/%d/task/%d/stat", (int)d.pid, (int)d.pid);
	f = fopen(p, "r");
	assert_non_null(f);
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	char *s = strrchr(buf, ')');
	/* fields after ") ": state(3) ... utime(14) stime(15) */
	assert_int_equal(sscanf(s + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut,
				&st), 2);
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* The largest "(N so far)" roshmd logged for @tenant's held requests. */
static long held_logged(const char *tenant)
{
	char line[512], want[64];
	long best = -1;
	FILE *f = fopen(d.log, "r");

	assert_non_null(f);
	snprintf(want, sizeof(want), "tenant %s: more registry operations", tenant);
	while (fgets(line, sizeof(line), f)) {
		char *p = strstr(line, want), *q;

		if (!p || !(q = strstr(p, "wait (")))
			continue;
		if (atol(q + 6) > best)
			best = atol(q + 6);
	}
	fclose(f);
	return best;
}

/* Read one reply if there is one: 1, 0 (none yet) */
static int take_reply(int fd)
{
	char buf[256];
	ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);

	if (n < 0 && errno == EAGAIN)
		return 0;
	assert_true(n >= (ssize_t)sizeof(struct roshm_ctl_hdr));
	return 1;
}

/*
 * Flood: every fd in @fds keeps one REGION_OPEN of a name nobody published
 * in flight (a read past the cache each), for @secs. Meanwhile, if @victim
 * >= 0, it sends one such open at @victim_at and we note when it is answered.
 * Returns the number of answers the flooders got.
 */
static long flood(const int *fds, int n, double secs, int victim, double victim_at,
		  double *victim_wait)
{
	struct pollfd pf[300];
	bool busy[300];
	double t0 = atk_now_s(), vsent = -1;
	long answers = 0, vans = 0;
	char name[64];

	assert_true(n + 1 <= 300);
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "nobody-%d", i);
		assert_int_equal(atk_send_open(fds[i], name, NULL, 0), 0);
		busy[i] = true;
	}
	/* the victim asks again as soon as it is answered: its longest wait */
	*victim_wait = -1;
	while (atk_now_s() - t0 < secs || (vsent >= 0 && atk_now_s() - t0 < secs + 30)) {
		int m = 0;

		if (victim >= 0 && vsent < 0 && atk_now_s() - t0 >= victim_at && atk_now_s() - t0 < secs) {
			snprintf(name, sizeof(name), "victim-nobody-%ld", vans);
			assert_int_equal(atk_send_open(victim, name, NULL, 0), 0);
			vsent = atk_now_s();
		}
		for (int i = 0; i < n; i++)
			pf[m++] = (struct pollfd){ .fd = fds[i], .events = POLLIN };
		if (vsent >= 0)
			pf[m++] = (struct pollfd){ .fd = victim, .events = POLLIN };
		if (poll(pf, (nfds_t)m, 20) <= 0)
			continue;
		for (int i = 0; i < m; i++) {
			if (!(pf[i].revents & POLLIN))
				continue;
			if (pf[i].fd == victim && vsent >= 0) {
				assert_int_equal(take_reply(victim), 1);
				if (atk_now_s() - vsent > *victim_wait)
					*victim_wait = atk_now_s() - vsent;
				vsent = -1;
				vans++;
				continue;
			}
			if (!take_reply(pf[i].fd))
				continue;
			answers++;
			busy[i] = false;
			if (atk_now_s() - t0 < secs) {  /* ask again at once */
				snprintf(name, sizeof(name), "nobody-%d-%ld", i, answers);
				assert_int_equal(atk_send_open(pf[i].fd, name, NULL, 0), 0);
				busy[i] = true;
			}
		}
	}
	if (victim >= 0)
		fprintf(stderr, "victim: %ld answers, longest wait %.3f s\n", vans, *victim_wait);
	/* what is still in flight: let it be answered */
	for (int i = 0; i < n; i++) {
		struct pollfd q = { .fd = fds[i], .events = POLLIN };

		if (busy[i] && poll(&q, 1, 5000) == 1)
			take_reply(fds[i]);
	}
	return answers;
}

/*
 * One client of tenant a (older connection) asks once while 4 newer
 * connections of the same tenant keep asking. Fair share: 5 askers of 20
 * tokens a second: about 0.25 s. It must be answered within 3 s; it is
 * answered only when the flooders stop (12 s).
 */
static void test_oldest_starves(void **st)
{
	int victim, fds[190] = { 0 };
	double wait;
	long answers;
	int nf = getenv("ADV_FLOODERS") ? atoi(getenv("ADV_FLOODERS")) : 4;

	(void)st;
	assert_true(nf > 0 && nf <= 190);
	victim = atk_raw_attach(d.sock, "a", 2, 4096);
	assert_true(victim >= 0);
	usleep(20 * 1000);
	for (int i = 0; i < nf; i++) {
		fds[i] = atk_raw_attach(d.sock, "a", 2, 4096);
		assert_true(fds[i] >= 0);
	}
	answers = flood(fds, nf, 12.0, victim, 1.5, &wait);
	fprintf(stderr, "%d flooders: %ld answers in 12 s; the older client waited %.3f s "
		"\n", nf, answers, wait);
	assert_true(wait >= 0);
	assert_true(wait < 3.0);
	for (int i = 0; i < nf; i++)
		close(fds[i]);
	close(victim);
	atk_assert_alive(&d);
}

/*
 * 120 connections of tenant a each keep one open waiting for the bucket;
 * compare the control thread's CPU per answered request with one
 * connection asking as fast as it can (same rate, same answers), and the
 * held counter with the number of requests that waited.
 */
static void test_herd(void **st)
{
	enum { N = 120 };
	int fds[N];
	double c0, c1, wait;
	long aN, held;

	(void)st;
	for (int i = 0; i < N; i++) {
		fds[i] = atk_raw_attach(d.sock, "c", 2, 4096);
		assert_true(fds[i] >= 0);
	}
	c0 = ctl_cpu();
	aN = flood(fds, N, 11.0, -1, 0, &wait);   /* > 10 s: roshmd logs the count again */
	c1 = ctl_cpu();
	held = held_logged("c");
	fprintf(stderr, "%d connections of c: %ld answers in 11 s, control thread %.3f s CPU "
		"(%.0f us per answer); roshm_tenant_registry_held_total{c} logged %ld\n", N, aN,
		c1 - c0, (c1 - c0) / (double)(aN ? aN : 1) * 1e6, held);
	/* "requests that waited" cannot be more than the requests there were */
	assert_true(held <= aN + N);
	for (int i = 0; i < N; i++)
		close(fds[i]);
	atk_assert_alive(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_oldest_starves),
		cmocka_unit_test(test_herd),
	};
	int fails;
	const char *rate = getenv("ADV_RATE");
	char conf[1024];

	th_cleanup_enable();
	snprintf(conf, sizeof(conf),
		 "tenants = ( { name = \"a\"; token = \"ta\"; quota = { registry_ops_per_sec = %s; clients = 200; }; },\n"
		 "            { name = \"c\"; token = \"tc\"; quota = { registry_ops_per_sec = %s; clients = 200; }; },\n"
		 "            { name = \"b\"; token = \"tb\"; } );\n"
		 "limits: { max_clients = 600; };\n"
		 "channel: { hugepages = \"off\"; };\n", rate ? rate : "20", rate ? rate : "20");
	if (th_daemon_start(&d, "secratefifo", conf))
		return 1;
	fails = cmocka_run_group_tests_name("security_registry_rate_fifo", tests, NULL, NULL);
	if (fails)
		atk_log_tail(&d, 20);
	atk_daemon_kill(&d);
	return fails;
}
