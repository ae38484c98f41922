// SPDX-License-Identifier: MIT
/*
 * Socket impersonation (issue 10, item 6). Tenant pods share the directory
 * of roshmd's socket; a process that takes over the socket path must get
 * nothing from a client (no token, no memfd), and a stale or hostile socket
 * file must not keep roshmd from starting. Only one roshmd serves one socket.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <setjmp.h>
#include <unistd.h>
#include <cmocka.h>

#include "roshm.h"
#include "harness.h"

#define NOBODY 65534

static char dir[128];

/*
 * An impostor: a process of uid nobody listening at @path. It accepts one
 * connection and reports through @report how many bytes it received before
 * the client hung up (or -1 if nobody came).
 */
static pid_t impostor(const char *path, int report)
{
	pid_t pid = fork();

	if (pid)
		return pid;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, c;
	long got = 0;
	char buf[4096];

	if (setgid(NOBODY) || setuid(NOBODY))
		_exit(90);
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	unlink(path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 8))
		_exit(91);
	/* tell the parent we listen */
	if (write(report, &got, sizeof(got)) != sizeof(got))
		_exit(92);
	struct pollfd p = { .fd = fd, .events = POLLIN };

	if (poll(&p, 1, 10000) != 1) {
		got = -1;
	} else {
		c = accept(fd, NULL, NULL);
		/* the first message (or the hang-up), then hang up ourselves */
		struct pollfd q = { .fd = c, .events = POLLIN };

		if (poll(&q, 1, 3000) == 1) {
			ssize_t n = recv(c, buf, sizeof(buf), 0);

			got = n > 0 ? n : 0;
		}
		close(c);
	}
	if (write(report, &got, sizeof(got)) != sizeof(got))
		_exit(93);
	for (;;)
		pause(); /* keep listening until killed */
}

static long wait_report(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	long v = -2;

	if (poll(&p, 1, 15000) == 1 && read(fd, &v, sizeof(v)) != sizeof(v))
		v = -2;
	return v;
}

/* The library asks the kernel who serves the socket before it sends a token. */
static void test_client_refuses_impostor(void **state)
{
	char path[200];
	int rp[2], err;
	struct roshm_params p = { .tenant = "default", .token = "" };
	char *json = NULL;
	pid_t pid;

	(void)state;
	snprintf(path, sizeof(path), "%s/fake.sock", dir);
	assert_int_equal(pipe(rp), 0);
	pid = impostor(path, rp[1]);
	assert_int_equal(wait_report(rp[0]), 0); /* listening */
	p.sock_path = path;
	assert_null(roshm_open(&p, &err));
	assert_int_equal(err, -EPERM);
	assert_int_equal(wait_report(rp[0]), 0); /* it got not one byte: no token */
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);

	/* the admin path, with an admin token to lose, likewise */
	pid = impostor(path, rp[1]);
	assert_int_equal(wait_report(rp[0]), 0);
	p.admin_token = "the-admin-token-0123456789";
	assert_int_equal(roshm_admin_params(&p, "status", &json), -EPERM);
	assert_int_equal(wait_report(rp[0]), 0);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);

	/* whoever trusts that uid explicitly gets what they asked for */
	pid = impostor(path, rp[1]);
	assert_int_equal(wait_report(rp[0]), 0);
	p.server_uid = NOBODY;
	p.admin_token = NULL;
	assert_null(roshm_open(&p, &err));
	assert_true(wait_report(rp[0]) > 0);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(rp[0]);
	close(rp[1]);
}

/* A hostile listener at roshmd's socket path does not keep it from
 * starting; a second roshmd on the same socket is refused. */
static void test_daemon_takes_its_socket(void **state)
{
	struct th_daemon d, d2;
	struct roshm_params p = { 0 };
	struct roshm *r = NULL;
	int rp[2], err = 0;
	pid_t pid;
	char path[sizeof(d.sock)];

	(void)state;
	/* the impostor goes first, at the path the daemon will use */
	assert_int_equal(th_daemon_start(&d, "sock", NULL), 0);
	snprintf(path, sizeof(path), "%s", d.sock);
	th_daemon_kill(&d);
	assert_int_equal(chmod(d.dir, 0777), 0);
	assert_int_equal(pipe(rp), 0);
	pid = impostor(path, rp[1]);
	assert_int_equal(wait_report(rp[0]), 0);
	/* restart roshmd on that path: it must take it over */
	assert_int_equal(th_daemon_restart(&d), 0);
	p.sock_path = path;
	for (int i = 0; i < 100 && !r; i++) {
		r = roshm_open(&p, &err);
		if (!r)
			usleep(50000);
	}
	if (!r)
		th_daemon_dump_log(&d);
	assert_non_null(r);
	assert_int_equal(roshm_nop_sync(r), 0);
	roshm_close(r);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(rp[0]);
	close(rp[1]);

	/* a second roshmd with the same socket: refused, the first unharmed */
	memset(&d2, 0, sizeof(d2));
	d2 = d;
	d2.pid = fork();
	if (d2.pid == 0) {
		int lfd = open("/dev/null", O_WRONLY);

		dup2(lfd, 1);
		dup2(lfd, 2);
		execl(ROSHMD_PATH, "roshmd", "-c", d.conf, (char *)NULL);
		_exit(127);
	}
	int st;

	assert_int_equal(waitpid(d2.pid, &st, 0), d2.pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) != 0);
	r = roshm_open(&p, &err);
	assert_non_null(r);
	assert_int_equal(roshm_nop_sync(r), 0);
	roshm_close(r);
	assert_int_equal(th_daemon_stop(&d), 0);
}

/*
 * A second roshmd with the node name of a running one and a socket of its
 * own (a copied configuration, two that both take the hostname) is refused
 * before it touches the registry: it would have removed the first one's
 * region records as its own leftovers and put its node record over the
 * first one's. The first one's records and clients are unharmed.
 *
 * How it failed before the fix (4e9e29a): "a second roshmd with the node
 * name of a running one started".
 */
static void test_daemon_node_name_taken(void **state)
{
	struct th_daemon d;
	struct roshm_params p = { 0 };
	struct roshm *r, *r2;
	char conf2[400], sock2[400], log2[400], rec[400];
	uint32_t h, h2;
	int err = 0, st;
	pid_t pid;

	(void)state;
	assert_int_equal(th_daemon_start(&d, "nodename", NULL), 0);
	p.sock_path = d.sock;
	r = roshm_open(&p, &err);
	assert_non_null(r);
	assert_int_equal(roshm_region_create(r, "kept", 4096, NULL, &h), 0);
	snprintf(sock2, sizeof(sock2), "%s/other.sock", d.dir);
	snprintf(conf2, sizeof(conf2), "%s/other.conf", d.dir);
	snprintf(log2, sizeof(log2), "%s/other.log", d.dir);
	assert_int_equal(th_sh("sed -e 's#^socket = .*#socket = \"%s\";#' -e 's#%s#%sx#' %s > %s",
			       sock2, d.eal_prefix, d.eal_prefix, d.conf, conf2), 0);
	pid = fork();
	if (pid == 0) {
		int lfd = open(log2, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		dup2(lfd, 1);
		dup2(lfd, 2);
		execl(ROSHMD_PATH, "roshmd", "-c", conf2, (char *)NULL);
		_exit(127);
	}
	assert_true(pid > 0);
	th_track_pid(pid);
	for (int i = 0; i < 300 && waitpid(pid, &st, WNOHANG) == 0; i++)
		usleep(50000);
	if (waitpid(pid, &st, WNOHANG) == 0) {
		kill(pid, SIGTERM);
		waitpid(pid, &st, 0);
		fail_msg("a second roshmd with the node name of a running one started");
	}
	th_untrack_pid(pid);
	/* its EAL runtime directory (the harness knows the first one's only) */
	th_sh("rm -rf /var/run/dpdk/%sx \"${XDG_RUNTIME_DIR:-/tmp}\"/dpdk/%sx", d.eal_prefix,
	      d.eal_prefix);
	if (!WIFEXITED(st) || WEXITSTATUS(st) == 0 ||
	    th_sh("grep -q 'another roshmd of this host uses it' %s", log2)) {
		th_sh("cat %s >&2", log2);
		fail_msg("the second roshmd with the same node name: not refused for it");
	}
	/* the first: its region, its node record, a new client */
	r2 = roshm_open(&p, &err);
	assert_non_null(r2);
	assert_int_equal(roshm_region_open(r2, "kept", &h2, NULL), 0);
	snprintf(rec, sizeof(rec), "%s/registry/nodes/nodename.json", d.dir);
	assert_int_equal(access(rec, F_OK), 0);
	assert_int_equal(roshm_nop_sync(r2), 0);
	roshm_close(r2);
	roshm_close(r);
	assert_int_equal(th_daemon_stop(&d), 0);
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/roshm-test-sock-XXXXXX");
	if (!mkdtemp(dir) || chmod(dir, 0777))
		return -1;
	return 0;
}

static int teardown(void **state)
{
	char cmd[256];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) ? -1 : 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_client_refuses_impostor),
		cmocka_unit_test(test_daemon_takes_its_socket),
		cmocka_unit_test(test_daemon_node_name_taken),
	};

	if (geteuid() != 0) {
		printf("security_socket: skipped: needs root (an impostor of another uid)\n");
		return 77;
	}
	return cmocka_run_group_tests_name("socket", tests, setup, teardown);
}
