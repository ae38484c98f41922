/* SPDX-License-Identifier: MIT */
/*
 * Test harness: real roshmd processes with a throwaway config and directory.
 *
 * Clean-up, pass or fail: every daemon started here, every directory and
 * network namespace registered here, and every tracked child are undone by
 * an atexit handler (and on SIGTERM/SIGINT/SIGHUP, which is how meson stops
 * a test that ran out of time): stopped daemons get SIGCONT then SIGKILL,
 * directories are removed unless ROSHM_TEST_KEEP=1, namespaces deleted.
 * Names carry the run's tag (ROSHM_TEST_TAG, set by meson per build
 * directory) so that tests/check_leftovers.sh can tell this run's leftovers
 * from another build's.
 */
#ifndef TH_HARNESS_H
#define TH_HARNESS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct th_daemon {
	pid_t pid;
	pid_t last_pid;           /* the last roshmd run: its sanitizer report */
	char netns[64];           /* "" : the caller's namespace */
	char name[64];
	char dir[256];
	char sock[300];
	char conf[300];
	char log[300];
	char admin_token_file[300];
	char eal_prefix[128];     /* its EAL --file-prefix (the telemetry socket's directory) */
	bool reaped;              /* th_daemon_alive found it gone: its wait status */
	int reaped_status;
};

/* Start roshmd with the default test settings plus @extra (libconfig text,
 * may be NULL). Waits until it accepts connections. 0 or -errno. */
int th_daemon_start(struct th_daemon *d, const char *name, const char *extra);
/* The same inside network namespace @netns (NULL: ours). A @extra that sets
 * `registry` replaces the default private file registry (and its secret:
 * such a registry takes the transport's secret, or its own secret_file). */
int th_daemon_start_ns(struct th_daemon *d, const char *name, const char *netns, const char *extra);
/* The same with EAL arguments of its own: @eal (libconfig strings, e.g.
 * "\"--log-level\", \"roshm.tcp:debug\"", may be NULL) after the defaults,
 * and DPDK telemetry on when @telemetry (its socket in the EAL runtime
 * directory of d->eal_prefix; the default is --no-telemetry). */
int th_daemon_start_eal(struct th_daemon *d, const char *name, const char *netns, bool telemetry,
			const char *eal, const char *extra);
/* A shell command that th_daemon_start* and th_daemon_restart run roshmd
 * under while set: its "$@" is roshmd and its arguments (e.g. "exec unshare
 * -m sh -c '...; exec \"$@\"' sh \"$@\"", to give it a mount namespace of
 * its own). NULL: roshmd is exec'd directly. */
extern const char *th_daemon_wrap;
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
/* Print the daemon log (on failure), and any sanitizer report its last
 * process wrote (ROSHM_SAN_LOGS, set by scripts/sanitize.sh). */
void th_daemon_dump_log(struct th_daemon *d);
/* An admin command on @d with its admin token (roshm_admin_params). */
int th_admin(struct th_daemon *d, const char *cmd, char **json);

/* Stop nodes[first..last] that run; 1 if one exited badly (its log is
 * printed), else 0. */
int th_daemons_stop(struct th_daemon *nodes, int first, int last);

/* A client of the roshmd at @sock, or NULL with the reason on stderr. */
struct roshm *th_attach(const char *sock);

/* This run's tag: ROSHM_TEST_TAG, or "manual" outside meson. */
const char *th_tag(void);
/* Make "/tmp/roshm-test-TAG-@what-XXXXXX" into @buf (mkdtemp) and remove it
 * at exit (unless ROSHM_TEST_KEEP). 0 or -errno. */
int th_mkdtemp(char *buf, size_t len, const char *what);
/* Remove @dir at exit (unless ROSHM_TEST_KEEP). */
void th_track_dir(const char *dir);
/* SIGCONT + SIGKILL + reap @pid at exit unless th_untrack_pid came first. */
void th_track_pid(pid_t pid);
void th_untrack_pid(pid_t pid);
/* tests/lib/netns.sh up PREFIX N, deleted again at exit; a prefix of
 * "TAG-@what" + our pid, written to @prefix. 0 or the script's status. */
int th_netns_up(char *prefix, size_t len, const char *what, int n);
void th_netns_down(const char *prefix);
/* The same with IPv6 too: fd00:198:18::i/64 beside 198.18.0.i (netns.sh v6). */
int th_netns_up_v6(char *prefix, size_t len, const char *what, int n);
/* IPv6 works here (a socket binds to ::1); false also when it is disabled. */
bool th_ipv6_available(void);
/* A TCP port P on 127.0.0.1 with P..P+n-1 free, picked at random below the
 * kernel's ephemeral range (an outgoing connection cannot take it before the
 * daemon binds it, as it can a port that bind(0) handed out); -1 if none. */
int th_free_ports(int n);

/* Fork a child that runs fn(arg) and exits with its return value. It is
 * killed at exit unless th_wait reaped it first. */
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
