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

/* ---- opt-in cleanup (th_cleanup_enable) ---- */

#define TH_TRACK_MAX 512
static pid_t cl_owner;                 /* the process that enabled it; 0: off */
static pid_t cl_pids[TH_TRACK_MAX];
static int cl_npids;
static char *cl_dirs[TH_TRACK_MAX];
static int cl_ndirs;
static char *cl_cmds[64];
static int cl_ncmds;

static bool cl_on(void)
{
	/* Only the enabling process tracks and cleans: a forked child that
	 * exits must not tear down what its parent still uses. */
	return cl_owner && cl_owner == getpid();
}

static void cl_track_pid(pid_t pid)
{
	if (cl_on() && pid > 0 && cl_npids < TH_TRACK_MAX)
		cl_pids[cl_npids++] = pid;
}

void th_cleanup_dir(const char *path)
{
	if (cl_on() && cl_ndirs < TH_TRACK_MAX)
		cl_dirs[cl_ndirs++] = strdup(path);
}

void th_cleanup_sh(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;

	if (!cl_on() || cl_ncmds >= (int)(sizeof(cl_cmds) / sizeof(cl_cmds[0])))
		return;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	cl_cmds[cl_ncmds++] = strdup(cmd);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw);

void th_cleanup_run(void)
{
	if (!cl_on())
		return;
	/* Newest first: clients before the daemons they talk to. A pid is
	 * only signalled while it is still our unreaped child, so a recycled
	 * pid is never hit. A stopped roshmd is resumed before the kill so
	 * that it does not linger in the stopped state. */
	while (cl_npids > 0) {
		pid_t pid = cl_pids[--cl_npids];
		int st;

		if (waitpid(pid, &st, WNOHANG) == 0) {
			kill(pid, SIGCONT);
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
		}
	}
	while (cl_ncmds > 0) {
		char *cmd = cl_cmds[--cl_ncmds];
		int rc = system(cmd);

		(void)rc;
		free(cmd);
	}
	while (cl_ndirs > 0) {
		char *dir = cl_dirs[--cl_ndirs];

		if (!getenv("ROSHM_TEST_KEEP"))
			nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
		free(dir);
	}
}

static void cl_atexit(void)
{
	th_cleanup_run();
}

static void cl_signal(int sig)
{
	th_cleanup_run();
	signal(sig, SIG_DFL);
	raise(sig);
}

void th_cleanup_enable(void)
{
	struct sigaction sa = { .sa_handler = cl_signal };

	if (cl_owner)
		return;
	cl_owner = getpid();
	atexit(cl_atexit);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
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
	cl_track_pid(pid);
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

	if (d->pid <= 0)
		return;
	kill(d->pid, SIGKILL);
	waitpid(d->pid, &st, 0);
	d->pid = 0;
}

int th_daemon_start(struct th_daemon *d, const char *name, const char *extra)
{
	return th_daemon_start_ns(d, name, NULL, extra);
}

int th_daemon_start_ns(struct th_daemon *d, const char *name, const char *netns, const char *extra)
{
	char secret[300];
	FILE *f;

	memset(d, 0, sizeof(*d));
	snprintf(d->netns, sizeof(d->netns), "%s", netns ? netns : "");
	snprintf(d->name, sizeof(d->name), "%s", name);
	snprintf(d->dir, sizeof(d->dir), "/tmp/roshm-test-%s-XXXXXX", name);
	if (!mkdtemp(d->dir))
		return -errno;
	th_cleanup_dir(d->dir);
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
	fprintf(f,
		"node = \"%s\";\n"
		"socket = \"%s\";\n"
		"eal = [ \"--no-huge\", \"-m\", \"128\", \"--no-pci\", \"--no-shconf\",\n"
		"        \"--file-prefix\", \"th-%s-%d\", \"--log-level\", \"lib.eal:error\",\n"
		"        \"--no-telemetry\" ];\n",
		name, d->sock, name, (int)getpid());
	if (!extra || !strstr(extra, "admin"))
		fprintf(f, "admin: { token_file = \"%s\"; };\n", d->admin_token_file);
	if (!extra || !strstr(extra, "registry"))
		fprintf(f, "registry: { dir = \"%s/registry\"; secret_file = \"%s\"; };\n", d->dir, secret);
	fprintf(f, "%s\n", extra ? extra : "");
	fclose(f);

	return th_daemon_restart(d);
}

int th_daemon_restart(struct th_daemon *d)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	d->pid = fork();
	if (d->pid < 0)
		return -errno;
	if (d->pid == 0) {
		int lfd = open(d->log, O_WRONLY | O_CREAT | O_APPEND, 0644);

		if (lfd >= 0) {
			dup2(lfd, 1);
			dup2(lfd, 2);
		}
		if (th_enter_netns(d->netns))
			_exit(98);
		execl(ROSHMD_PATH, "roshmd", "-c", d->conf, (char *)NULL);
		_exit(127);
	}
	cl_track_pid(d->pid);
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
	int st;

	if (d->pid <= 0)
		return false;
	return waitpid(d->pid, &st, WNOHANG) == 0;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

int th_daemon_stop(struct th_daemon *d)
{
	int st;

	if (d->pid <= 0)
		return -1;
	kill(d->pid, SIGTERM);
	for (int i = 0; i < 1000; i++) {
		if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
			d->pid = 0;
			if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && !getenv("ROSHM_TEST_KEEP"))
				nftw(d->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
			return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
		}
		usleep(10000);
	}
	kill(d->pid, SIGKILL);
	waitpid(d->pid, &st, 0);
	d->pid = 0;
	return -1;
}

void th_daemon_dump_log(struct th_daemon *d)
{
	char buf[4096];
	ssize_t n;
	int fd = open(d->log, O_RDONLY);

	if (fd < 0)
		return;
	fprintf(stderr, "---- %s ----\n", d->log);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		fwrite(buf, 1, (size_t)n, stderr);
	fprintf(stderr, "---- end ----\n");
	close(fd);
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
	cl_track_pid(pid);
	return pid;
}

int th_wait(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid)
		return -1;
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
