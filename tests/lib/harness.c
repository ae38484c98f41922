// SPDX-License-Identifier: MIT
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <ftw.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "roshm.h"

#ifndef ROSHMD_PATH
#error "ROSHMD_PATH must point to the built roshmd"
#endif
#ifndef NETNS_SH
#error "NETNS_SH must point to tests/lib/netns.sh"
#endif

/* ---- clean-up registry: what the atexit handler undoes ---- */

#define TH_MAX 64

static struct {
	pid_t owner;                  /* the test process; forked children never clean up */
	struct { pid_t pid; char dir[256]; char log[300]; char prefix[128]; bool used; } d[TH_MAX];
	char dirs[TH_MAX][256];
	pid_t pids[256];              /* th_spawn children, etcd */
	struct { char prefix[64]; int n; } ns[8];
	char *cmds[64];               /* th_cleanup_sh: run at exit, newest first */
	int ncmds;
} reg;

static bool keep(void)
{
	const char *k = getenv("ROSHM_TEST_KEEP");

	return k && *k && strcmp(k, "0");
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void rm_tree(const char *dir)
{
	if (dir[0] && !keep())
		nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* EAL's runtime directory for --file-prefix @prefix: EAL leaves it behind
 * (config, mp socket) even with --no-shconf. Nothing in it helps a
 * post-mortem, so it goes whatever ROSHM_TEST_KEEP says. */
static void rm_eal_runtime(const char *prefix)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	char path[512];

	if (!prefix[0])
		return;
	if (geteuid() == 0)
		snprintf(path, sizeof(path), "/var/run/dpdk/%s", prefix);
	else
		snprintf(path, sizeof(path), "%s/dpdk/%s", xdg ? xdg : "/tmp", prefix);
	nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* SIGKILL ends a stopped process too; the SIGCONT first is for one that a
 * test stopped (SIGSTOP) and that was sent a SIGTERM before. */
static void kill_reap(pid_t pid)
{
	int st;

	kill(pid, SIGCONT);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
}

static void cleanup(void)
{
	if (reg.owner != getpid())
		return;
	reg.owner = 0; /* once: atexit after a signal handler already ran it */
	for (int i = 0; i < TH_MAX; i++) {
		if (!reg.d[i].used)
			continue;
		if (reg.d[i].pid > 0) {
			/* still running at exit: the test ended early, its log says why */
			kill_reap(reg.d[i].pid);
			struct th_daemon tmp = { .last_pid = reg.d[i].pid };

			snprintf(tmp.log, sizeof(tmp.log), "%s", reg.d[i].log);
			fprintf(stderr, "harness: roshmd %d was still running at exit; killed\n",
				(int)reg.d[i].pid);
			th_daemon_dump_log(&tmp);
		}
		rm_tree(reg.d[i].dir);
		rm_eal_runtime(reg.d[i].prefix);
	}
	for (int i = 0; i < TH_MAX; i++)
		if (reg.pids[i] > 0)
			kill_reap(reg.pids[i]);
	while (reg.ncmds > 0) {
		char *cmd = reg.cmds[--reg.ncmds];
		int rc = system(cmd);

		(void)rc;
		free(cmd);
	}
	for (size_t i = 0; i < sizeof(reg.ns) / sizeof(reg.ns[0]); i++)
		if (reg.ns[i].prefix[0])
			th_sh("%s down %s %d", NETNS_SH, reg.ns[i].prefix, reg.ns[i].n);
	for (int i = 0; i < TH_MAX; i++)
		rm_tree(reg.dirs[i]);
}

static void on_signal(int sig)
{
	/* Not async-signal-safe, and need not be: the process ends here. */
	cleanup();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void reg_init(void)
{
	if (reg.owner)
		return;
	reg.owner = getpid();
	atexit(cleanup);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGHUP, on_signal);
}

static int reg_daemon(const struct th_daemon *d)
{
	int free_slot = -1;

	reg_init();
	for (int i = 0; i < TH_MAX; i++) {
		if (reg.d[i].used && !strcmp(reg.d[i].dir, d->dir))
			return i;
		if (!reg.d[i].used && free_slot < 0)
			free_slot = i;
	}
	if (free_slot < 0) {
		fprintf(stderr, "harness: more than %d daemons\n", TH_MAX);
		abort();
	}
	reg.d[free_slot].used = true;
	reg.d[free_slot].pid = 0;
	snprintf(reg.d[free_slot].prefix, sizeof(reg.d[free_slot].prefix), "%s-%s-%d", th_tag(), d->name,
		 (int)getpid());
	snprintf(reg.d[free_slot].dir, sizeof(reg.d[free_slot].dir), "%s", d->dir);
	snprintf(reg.d[free_slot].log, sizeof(reg.d[free_slot].log), "%s", d->log);
	return free_slot;
}

static void reg_daemon_pid(const struct th_daemon *d)
{
	reg.d[reg_daemon(d)].pid = d->pid;
}

const char *th_tag(void)
{
	const char *t = getenv("ROSHM_TEST_TAG");

	return t && *t ? t : "manual";
}

int th_mkdtemp(char *buf, size_t len, const char *what)
{
	snprintf(buf, len, "/tmp/roshm-test-%s-%s-XXXXXX", th_tag(), what);
	if (!mkdtemp(buf))
		return -errno;
	th_track_dir(buf);
	return 0;
}

void th_track_dir(const char *dir)
{
	reg_init();
	for (int i = 0; i < TH_MAX; i++)
		if (!reg.dirs[i][0]) {
			snprintf(reg.dirs[i], sizeof(reg.dirs[i]), "%s", dir);
			return;
		}
	fprintf(stderr, "harness: more than %d directories\n", TH_MAX);
	abort();
}

void th_track_pid(pid_t pid)
{
	reg_init();
	for (int i = 0; i < TH_MAX; i++)
		if (reg.pids[i] <= 0) {
			reg.pids[i] = pid;
			return;
		}
	fprintf(stderr, "harness: more than %d tracked processes\n", TH_MAX);
	abort();
}

void th_untrack_pid(pid_t pid)
{
	for (int i = 0; i < TH_MAX; i++)
		if (reg.pids[i] == pid)
			reg.pids[i] = 0;
}

static int netns_up(char *prefix, size_t len, const char *what, int n, const char *opt);

int th_netns_up(char *prefix, size_t len, const char *what, int n)
{
	return netns_up(prefix, len, what, n, "");
}

int th_netns_up_v6(char *prefix, size_t len, const char *what, int n)
{
	return netns_up(prefix, len, what, n, "v6");
}

static bool port_free(int p)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)p),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok = fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;

	if (fd >= 0)
		close(fd);
	return ok;
}

int th_free_ports(int n)
{
	int lo = 32768, t, q;
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");

	if (f) {
		if (fscanf(f, "%d", &lo) != 1)
			lo = 32768;
		fclose(f);
	}
	if (lo > 32768)
		lo = 32768;
	srand((unsigned)getpid() ^ (unsigned)time(NULL));
	for (t = 0; t < 200 && lo - n > 10000; t++) {
		int p = 10000 + rand() % (lo - n - 10000);

		for (q = 0; q < n && port_free(p + q); q++)
			;
		if (q == n)
			return p;
	}
	return -1;
}

bool th_ipv6_available(void)
{
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	int fd = socket(AF_INET6, SOCK_STREAM, 0);
	bool ok = fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;

	if (fd >= 0)
		close(fd);
	return ok;
}

static int netns_up(char *prefix, size_t len, const char *what, int n, const char *opt)
{
	size_t i;
	int st;

	reg_init();
	snprintf(prefix, len, "%s-%s%d", th_tag(), what, (int)getpid() % 100000);
	for (i = 0; i < sizeof(reg.ns) / sizeof(reg.ns[0]) && reg.ns[i].prefix[0]; i++)
		;
	if (i == sizeof(reg.ns) / sizeof(reg.ns[0])) {
		fprintf(stderr, "harness: too many namespace sets\n");
		abort();
	}
	/* registered before it exists: a half-made set is deleted too */
	snprintf(reg.ns[i].prefix, sizeof(reg.ns[i].prefix), "%s", prefix);
	reg.ns[i].n = n;
	st = th_sh("%s up %s %d %s", NETNS_SH, prefix, n, opt);
	if (st)
		th_netns_down(prefix);
	return st;
}

void th_netns_down(const char *prefix)
{
	for (size_t i = 0; i < sizeof(reg.ns) / sizeof(reg.ns[0]); i++)
		if (reg.ns[i].prefix[0] && !strcmp(reg.ns[i].prefix, prefix)) {
			th_sh("%s down %s %d", NETNS_SH, prefix, reg.ns[i].n);
			reg.ns[i].prefix[0] = 0;
		}
}

/* ---- the security tests' names for the same registry ---- */

void th_cleanup_enable(void)
{
	reg_init(); /* always on: kept for the callers that ask */
}

void th_cleanup_dir(const char *path)
{
	th_track_dir(path);
}

void th_cleanup_sh(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;

	reg_init();
	if (reg.ncmds >= (int)(sizeof(reg.cmds) / sizeof(reg.cmds[0])))
		return;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	reg.cmds[reg.ncmds++] = strdup(cmd);
}

void th_cleanup_run(void)
{
	cleanup();
}

int th_enter_netns(const char *netns)
{
	char path[128];
	int fd;

	if (!netns || !*netns)
		return 0;
	snprintf(path, sizeof(path), "/var/run/netns/%s", netns);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET) < 0)
		return -errno;
	close(fd);
	return 0;
}

pid_t th_spawn_ns(const char *netns, int (*fn)(void *), void *arg)
{
	pid_t pid = fork();

	if (pid == 0) {
		if (th_enter_netns(netns))
			_exit(99);
		_exit(fn(arg));
	}
	if (pid > 0)
		th_track_pid(pid); /* a client a failed test never waited for */
	return pid;
}

int th_sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void th_daemon_kill(struct th_daemon *d)
{
	int st;

	if (d->pid <= 0 || d->reaped)
		return;
	kill(d->pid, SIGKILL);
	waitpid(d->pid, &st, 0);
	d->pid = 0;
	reg_daemon_pid(d);
}

int th_daemon_start(struct th_daemon *d, const char *name, const char *extra)
{
	return th_daemon_start_ns(d, name, NULL, extra);
}

int th_daemon_start_ns(struct th_daemon *d, const char *name, const char *netns, const char *extra)
{
	return th_daemon_start_eal(d, name, netns, false, NULL, extra);
}

int th_daemon_start_eal(struct th_daemon *d, const char *name, const char *netns, bool telemetry,
			const char *eal, const char *extra)
{
	char secret[300];
	FILE *f;

	memset(d, 0, sizeof(*d));
	snprintf(d->netns, sizeof(d->netns), "%s", netns ? netns : "");
	snprintf(d->name, sizeof(d->name), "%s", name);
	snprintf(d->dir, sizeof(d->dir), "/tmp/roshm-test-%s-%s-XXXXXX", th_tag(), name);
	if (!mkdtemp(d->dir))
		return -errno;
	snprintf(d->log, sizeof(d->log), "%s/roshmd.log", d->dir);
	reg_daemon(d); /* from here on the directory is removed at exit */
	snprintf(d->sock, sizeof(d->sock), "%s/roshmd.sock", d->dir);
	snprintf(d->conf, sizeof(d->conf), "%s/roshmd.conf", d->dir);
	snprintf(d->log, sizeof(d->log), "%s/roshmd.log", d->dir);
	snprintf(d->admin_token_file, sizeof(d->admin_token_file), "%s/admin.token", d->dir);
	/* The default private file registry signs its records with a secret
	 * of this daemon's own, which a restart (same config) keeps. */
	snprintf(secret, sizeof(secret), "%s/registry.secret", d->dir);
	f = fopen(secret, "w");
	if (!f)
		return -errno;
	fprintf(f, "th-registry-%s-%d-%ld\n", name, (int)getpid(), (long)time(NULL));
	fclose(f);
	f = fopen(d->conf, "w");
	if (!f)
		return -errno;
	snprintf(d->eal_prefix, sizeof(d->eal_prefix), "%s-%s-%d", th_tag(), name, (int)getpid());
	fprintf(f,
		"node = \"%s\";\n"
		"socket = \"%s\";\n"
		"eal = [ \"--no-huge\", \"-m\", \"128\", \"--no-pci\", \"--no-shconf\",\n"
		"        \"--file-prefix\", \"%s\", \"--log-level\", \"lib.eal:error\"%s%s%s ];\n",
		name, d->sock, d->eal_prefix, telemetry ? "" : ", \"--no-telemetry\"",
		eal ? ", " : "", eal ? eal : "");
	if (!extra || !strstr(extra, "admin"))
		fprintf(f, "admin: { token_file = \"%s\"; };\n", d->admin_token_file);
	/* (not "registry_ops_per_sec", a quota) */
	if (!extra || !(strstr(extra, "registry:") || strstr(extra, "registry =") ||
			strstr(extra, "registry.")))
		fprintf(f, "registry: { dir = \"%s/registry\"; secret_file = \"%s\"; };\n", d->dir, secret);
	fprintf(f, "%s\n", extra ? extra : "");
	fclose(f);

	return th_daemon_restart(d);
}

const char *th_daemon_wrap;

int th_daemon_restart(struct th_daemon *d)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	d->reaped = false;
	d->pid = fork();
	if (d->pid < 0)
		return -errno;
	if (d->pid > 0) {
		d->last_pid = d->pid;
		reg_daemon_pid(d);
	}
	if (d->pid == 0) {
		int lfd = open(d->log, O_WRONLY | O_CREAT | O_APPEND, 0644);

		if (lfd >= 0) {
			dup2(lfd, 1);
			dup2(lfd, 2);
		}
		if (th_enter_netns(d->netns))
			_exit(98);
		if (th_daemon_wrap)
			execl("/bin/sh", "sh", "-c", th_daemon_wrap, "sh", ROSHMD_PATH, "-c", d->conf,
			      (char *)NULL);
		else
			execl(ROSHMD_PATH, "roshmd", "-c", d->conf, (char *)NULL);
		_exit(127);
	}
	strcpy(sa.sun_path, d->sock);
	for (int i = 0; i < 1000; i++) { /* 10 s */
		fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			close(fd);
			return 0;
		}
		close(fd);
		if (!th_daemon_alive(d)) {
			th_daemon_dump_log(d);
			return -ECHILD;
		}
		usleep(10000);
	}
	th_daemon_dump_log(d);
	return -ETIMEDOUT;
}

bool th_daemon_alive(struct th_daemon *d)
{
	pid_t w;
	int st;

	if (d->pid <= 0 || d->reaped)
		return false;
	w = waitpid(d->pid, &st, WNOHANG);
	if (w == 0)
		return true;
	if (w != d->pid)
		return false;   /* not our child (any more) */
	/* reaped: its pid may be another process's from now on, not to be
	 * signalled by th_daemon_stop (which answers with its status) or at
	 * exit. (d->pid stays: a test's kill(d->pid, ...) must not become
	 * kill(0, ...), its whole process group.) */
	d->reaped = true;
	d->reaped_status = st;
	reg.d[reg_daemon(d)].pid = 0;
	return false;
}

int th_daemon_stop(struct th_daemon *d)
{
	int st;

	if (d->reaped) {
		d->reaped = false;
		d->pid = 0;
		st = d->reaped_status;
		rm_eal_runtime(reg.d[reg_daemon(d)].prefix);
		if (WIFSIGNALED(st))
			fprintf(stderr, "harness: roshmd %d died by signal %d\n", (int)d->last_pid,
				WTERMSIG(st));
		return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	}
	if (d->pid <= 0)
		return -1;
	kill(d->pid, SIGTERM);
	kill(d->pid, SIGCONT); /* a stopped roshmd acts on the SIGTERM once continued */
	for (int i = 0; i < 1000; i++) {
		if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
			d->pid = 0;
			reg_daemon_pid(d);
			rm_eal_runtime(reg.d[reg_daemon(d)].prefix);
			if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
				rm_tree(d->dir);
			} else if (WIFSIGNALED(st)) {
				/* e.g. SIGABRT from a sanitizer (abort_on_error) */
				fprintf(stderr, "harness: roshmd %d died by signal %d\n", (int)d->last_pid,
					WTERMSIG(st));
			}
			return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
		}
		usleep(10000);
	}
	fprintf(stderr, "harness: roshmd %d ignored SIGTERM for 10 s; killed\n", (int)d->pid);
	kill_reap(d->pid);
	d->pid = 0;
	reg_daemon_pid(d);
	rm_eal_runtime(reg.d[reg_daemon(d)].prefix);
	return -1;
}

/* The reports a sanitizer wrote for process @pid (log_path=DIR/asan gives
 * DIR/asan.PID). */
static void dump_san_logs(pid_t pid)
{
	const char *dir = getenv("ROSHM_SAN_LOGS");
	static const char *const kinds[] = { "asan", "ubsan", "tsan" };
	char path[512], buf[4096];
	ssize_t n;

	if (!dir || !*dir || pid <= 0)
		return;
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		snprintf(path, sizeof(path), "%s/%s.%d", dir, kinds[k], (int)pid);
		int fd = open(path, O_RDONLY);

		if (fd < 0)
			continue;
		fprintf(stderr, "---- %s ----\n", path);
		while ((n = read(fd, buf, sizeof(buf))) > 0)
			fwrite(buf, 1, (size_t)n, stderr);
		fprintf(stderr, "---- end ----\n");
		close(fd);
	}
}

void th_daemon_dump_log(struct th_daemon *d)
{
	char buf[4096];
	ssize_t n;
	int fd = open(d->log, O_RDONLY);

	if (fd < 0) {
		dump_san_logs(d->last_pid);
		return;
	}
	fprintf(stderr, "---- %s ----\n", d->log);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		fwrite(buf, 1, (size_t)n, stderr);
	fprintf(stderr, "---- end ----\n");
	close(fd);
	dump_san_logs(d->last_pid);
}

int th_admin(struct th_daemon *d, const char *cmd, char **json)
{
	struct roshm_params p = { .sock_path = d->sock };
	char tok[256] = "";
	FILE *f = fopen(d->admin_token_file, "r");

	if (f) {
		if (!fgets(tok, sizeof(tok), f))
			tok[0] = 0;
		fclose(f);
	}
	tok[strcspn(tok, "\n")] = 0;
	p.admin_token = tok;
	p.tenant = "";
	p.token = "";
	return roshm_admin_params(&p, cmd, json);
}

pid_t th_spawn(int (*fn)(void *), void *arg)
{
	pid_t pid = fork();

	if (pid == 0) {
		fflush(stdout);
		_exit(fn(arg));
	}
	if (pid > 0)
		th_track_pid(pid); /* a client a failed test never waited for */
	return pid;
}

int th_wait(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid)
		return -1;
	th_untrack_pid(pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void th_chan_init(struct th_chan *c)
{
	if (pipe(c->fd))
		abort();
}

void th_chan_send(struct th_chan *c, uint64_t v)
{
	if (write(c->fd[1], &v, sizeof(v)) != sizeof(v))
		abort();
}

uint64_t th_chan_recv(struct th_chan *c)
{
	struct pollfd p = { .fd = c->fd[0], .events = POLLIN };
	uint64_t v;

	if (poll(&p, 1, 10000) != 1 || read(c->fd[0], &v, sizeof(v)) != sizeof(v))
		return UINT64_MAX;
	return v;
}

struct roshm *th_attach(const char *sock)
{
	struct roshm_params p = { .sock_path = sock };
	int err;
	struct roshm *r = roshm_open(&p, &err);

	if (!r)
		fprintf(stderr, "attach to %s: %s\n", sock, roshm_strerror(err));
	return r;
}

int th_daemons_stop(struct th_daemon *nodes, int first, int last)
{
	int bad = 0;

	for (int n = first; n <= last; n++) {
		if (!nodes[n].pid)
			continue;
		int st = th_daemon_stop(&nodes[n]);

		if (st) {
			fprintf(stderr, "node %d: roshmd exit status %d\n", n, st);
			th_daemon_dump_log(&nodes[n]);
			bad = 1;
		}
	}
	return bad;
}
