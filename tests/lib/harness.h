/* SPDX-License-Identifier: MIT */
/* Test harness: real roshmd processes with a throwaway config and directory. */
#ifndef TH_HARNESS_H
#define TH_HARNESS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct th_daemon {
	pid_t pid;
	char netns[64];           /* "" : the caller's namespace */
	char name[64];
	char dir[256];
	char sock[300];
	char conf[300];
	char log[300];
	char admin_token_file[300];
};

/* Start roshmd with the default test settings plus @extra (libconfig text,
 * may be NULL). Waits until it accepts connections. 0 or -errno. */
int th_daemon_start(struct th_daemon *d, const char *name, const char *extra);
/* The same inside network namespace @netns (NULL: ours). A @extra that sets
 * `registry` replaces the default private file registry (and its secret:
 * such a registry takes the transport's secret, or its own secret_file). */
int th_daemon_start_ns(struct th_daemon *d, const char *name, const char *netns, const char *extra);
/* Start roshmd again with the same config (after a kill). 0 or -errno. */
int th_daemon_restart(struct th_daemon *d);
/* SIGKILL, reap; the directory stays. */
void th_daemon_kill(struct th_daemon *d);
/* Enter network namespace @netns (in a child, before exec or work). */
int th_enter_netns(const char *netns);
/* th_spawn inside a network namespace. */
pid_t th_spawn_ns(const char *netns, int (*fn)(void *), void *arg);
/* Run a shell command; returns its exit status. */
int th_sh(const char *fmt, ...);
/* SIGTERM and wait; returns roshmd's exit status, or -1 if it died by a signal. */
int th_daemon_stop(struct th_daemon *d);
bool th_daemon_alive(struct th_daemon *d);
/* Print the daemon log (on failure). */
void th_daemon_dump_log(struct th_daemon *d);
/* An admin command on @d with its admin token (roshm_admin_params). */
int th_admin(struct th_daemon *d, const char *cmd, char **json);

/* Fork a child that runs fn(arg) and exits with its return value. */
pid_t th_spawn(int (*fn)(void *), void *arg);
/* Wait for a child; returns its exit status, or 128 + signal. */
int th_wait(pid_t pid);

/*
 * Opt-in cleanup for tests that may leave things behind when they fail
 * (a roshmd that crashed, a stopped one, a network namespace): once enabled,
 * every roshmd started and every child spawned from then on is remembered,
 * and at exit (or on SIGTERM / SIGINT / SIGHUP, e.g. a meson timeout) the
 * ones still running are resumed and killed, their directories and the
 * registered ones removed (unless ROSHM_TEST_KEEP is set) and the
 * registered shell commands run. Tests that never call it see nothing new.
 */
void th_cleanup_enable(void);
/* Remove @path (recursively) at cleanup unless ROSHM_TEST_KEEP is set. */
void th_cleanup_dir(const char *path);
/* Run a shell command at cleanup (e.g. "ip netns del X"), last in, first out. */
void th_cleanup_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Run the cleanup now (idempotent; also runs at exit). */
void th_cleanup_run(void);

/* Tiny pipe-based barrier between processes. */
struct th_chan {
	int fd[2];
};
void th_chan_init(struct th_chan *c);
void th_chan_send(struct th_chan *c, uint64_t v);
uint64_t th_chan_recv(struct th_chan *c); /* 5 s timeout: returns UINT64_MAX */

#endif
