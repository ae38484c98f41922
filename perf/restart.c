// SPDX-License-Identifier: MIT
/*
 * Restart blackout: roshm-perf runs roshmd itself, as a supervisor would,
 * and a client that keeps writing (64 B WRITEs, one at a time, through
 * roshm_write_sync: libroshm's own reconnect path). A harness thread
 * SIGKILLs roshmd, reaps it and starts it again at once; the blackout of
 * that kill is the time from the kill to the first completion the client
 * gets from the new instance (struct roshm's instance changes when libroshm
 * re-attached), on CLOCK_MONOTONIC. The next kill waits until the client
 * has measured the last one, plus a random 100-300 ms of steady state.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "perf.h"

extern char **environ;

static char *const *daemon_argv;
static const char *daemon_log;
static _Atomic pid_t daemon_pid;
static uint64_t t_kill[64];
static atomic_int kills_done, kills_measured, harness_failed;
static atomic_bool stop_harness;
static int nkills;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* roshmd takes its lcores from the CPUs it may use: it gets the ones
 * roshm-perf had before the EAL pinned our threads (perf_cpus), as it would
 * from a supervisor. The calling thread's affinity is inherited. */
static pid_t spawn_daemon(void)
{
	posix_spawn_file_actions_t fa;
	cpu_set_t mine;
	pid_t pid;
	int err;

	pthread_getaffinity_np(pthread_self(), sizeof(mine), &mine);
	pthread_setaffinity_np(pthread_self(), sizeof(perf_cpus), &perf_cpus);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, daemon_log, O_WRONLY | O_CREAT | O_APPEND, 0644);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	err = posix_spawn(&pid, daemon_argv[0], &fa, NULL, daemon_argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	pthread_setaffinity_np(pthread_self(), sizeof(mine), &mine);
	return err ? -err : pid;
}

static void *harness(void *arg)
{
	unsigned seed = (unsigned)getpid();

	(void)arg;
	for (int k = 0; k < nkills && !stop_harness; k++) {
		struct timespec ts = { 0, (long)(100 + rand_r(&seed) % 200) * 1000000L };
		pid_t old = daemon_pid, pid;
		int st;

		nanosleep(&ts, NULL);
		t_kill[k] = now_ns();
		kill(old, SIGKILL);
		waitpid(old, &st, 0);
		pid = spawn_daemon();
		if (pid < 0) {
			atomic_store(&harness_failed, 1);
			return NULL;
		}
		daemon_pid = pid;
		atomic_store(&kills_done, k + 1);
		/* the client measures this one before the next */
		uint64_t deadline = now_ns() + 30000000000ull;

		while (atomic_load(&kills_measured) < k + 1 && !stop_harness) {
			if (now_ns() > deadline) {
				atomic_store(&harness_failed, 1);
				return NULL;
			}
			usleep(1000);
		}
	}
	return NULL;
}

static void stop_daemon(void)
{
	pid_t pid = daemon_pid;
	int st;

	if (pid <= 0)
		return;
	kill(pid, SIGTERM);
	for (int i = 0; i < 100; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return;
		usleep(100000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
}

int run_restart(int kills, char **argv2, const char *sock, const char *log, const char *json)
{
	char *argv_d[] = { argv2[0], "-c", argv2[1], NULL };
	struct roshm_params p = { .sock_path = sock, .spin_us = 1000, .reconnect_ms = 10000 };
	double ms[64];
	uint64_t inst, writes = 0;
	pthread_t th;
	char name[64];
	pid_t pid;
	int err;

	if (!sock) {
		fprintf(stderr, "roshm-perf: restart: -s SOCK (the socket CONF names) is required\n");
		return 2;
	}
	daemon_argv = argv_d;
	daemon_log = log;
	nkills = kills;
	pid = spawn_daemon();
	if (pid < 0)
		die(argv2[0], pid);
	daemon_pid = pid;
	for (int i = 0; i < 200 && !(R = roshm_open(&p, &err)); i++)
		usleep(50000);
	if (!R) {
		stop_daemon();
		die("attach to the roshmd we started", err);
	}
	snprintf(name, sizeof(name), "restart-%d", (int)getpid());
	err = roshm_region_create(R, name, 65536, NULL, &H);
	if (err) {
		stop_daemon();
		die("region create", err);
	}
	REGION = 65536;
	printf(" roshm-perf restart: %s -c %s, %d kills (SIGKILL, restarted at once)\n", argv2[0],
	       argv2[1], kills);
	fflush(stdout);
	inst = R->instance;
	if (pthread_create(&th, NULL, harness, NULL)) {
		stop_daemon();
		die("harness thread", -EAGAIN);
	}
	while (atomic_load(&kills_measured) < kills && !atomic_load(&harness_failed)) {
		err = roshm_write_sync(R, H, 0, 0, 64);
		uint64_t t = now_ns();

		if (err) {
			stop_harness = true;
			pthread_join(th, NULL);
			stop_daemon();
			die("a WRITE across the restart", err);
		}
		writes++;
		if (R->instance != inst) {
			int k = atomic_load(&kills_done) - 1;

			inst = R->instance;
			if (k >= 0 && k == atomic_load(&kills_measured)) {
				ms[k] = (double)(t - t_kill[k]) / 1e6;
				progress("restart %d/%d: blackout %.1f ms", k + 1, kills, ms[k]);
				atomic_store(&kills_measured, k + 1);
			}
		}
	}
	stop_harness = true;
	pthread_join(th, NULL);
	if (atomic_load(&harness_failed)) {
		stop_daemon();
		fprintf(stderr, "roshm-perf: restart: roshmd could not be restarted, or the client did "
			"not come back within 30 s (see %s)\n", log);
		return 1;
	}
	roshm_close(R);
	R = NULL;
	stop_daemon();

	struct sweep *sw = sweep_new("restart", "SIGKILL of roshmd to the next completion of a writing "
				     "client (roshmd restarted at once)",
				     "kill,blackout_ms", "kill", "blackout [ms]", NULL, 0);
	double lo = ms[0], hi = ms[0];

	printf("\n #kill   blackout[ms]\n");
	for (int k = 0; k < kills; k++) {
		printf(" %-7d %.2f\n", k + 1, ms[k]);
		sweep_row(sw, (double[]){ k + 1, ms[k] });
		lo = ms[k] < lo ? ms[k] : lo;
		hi = ms[k] > hi ? ms[k] : hi;
	}
	sweep_done(sw);
	double med = median(ms, kills);

	printf(" blackout: median %.1f ms, min %.1f, max %.1f over %d kills; %llu WRITEs\n", med, lo, hi,
	       kills, (unsigned long long)writes);
	add_absolute("restart_blackout_ms", med, "ms", "<=", 100);
	add_reference("Snap upgrade blackout, median", 250, false);
	print_results(json);
	return 0;
}
