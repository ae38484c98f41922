// SPDX-License-Identifier: MIT
/*
 * roshmd: one per node. Loads the config, brings up DPDK's EAL, runs the
 * poller on a worker lcore and the control thread on the main lcore, and
 * exits 0 after an orderly stop on SIGTERM or SIGINT.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_launch.h>
#include <rte_pause.h>
#include <rte_lcore.h>
#include <rte_log.h>

#include "config.h"
#include "control/control.h"
#include "roshmd.h"

#define RD_LOG_COMPONENT RD_LC_CONTROL



static void usage(FILE *f)
{
	fprintf(f,
		"usage: roshmd [-c FILE]           run with FILE (default /etc/roshm/roshmd.conf)\n"
		"       roshmd --check-config FILE validate FILE and exit\n"
		"       roshmd --version\n");
}

static bool has_lcore_arg(const struct rd_config *cfg)
{
	for (int i = 0; i < cfg->eal_argc; i++) {
		const char *a = cfg->eal_argv[i];

		if (!strcmp(a, "-l") || !strcmp(a, "-c") || !strncmp(a, "--lcores", 8) ||
		    !strncmp(a, "-l", 2))
			return true;
	}
	return false;
}

/*
 * Without -l/-c/--lcores in the config, take the lcores from our CPU
 * affinity (inside a Kubernetes CPU-manager cpuset this is the pod's
 * exclusive set): main lcore on the first CPU, poller on the second. With a
 * single CPU both lcores share it.
 */
static void lcores_from_affinity(char *out, size_t len)
{
	cpu_set_t set;
	int first = -1, second = -1;

	if (sched_getaffinity(0, sizeof(set), &set) == 0) {
		for (int i = 0; i < CPU_SETSIZE && second < 0; i++) {
			if (!CPU_ISSET(i, &set))
				continue;
			if (first < 0)
				first = i;
			else
				second = i;
		}
	}
	if (first < 0)
		first = 0;
	if (second < 0)
		second = first;
	snprintf(out, len, "0@%d,1@%d", first, second);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "check-config", required_argument, NULL, 'C' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = "/etc/roshm/roshmd.conf";
	bool check_only = false;
	struct rd_config cfg;
	struct rd_poller poller;
	struct rd_control ctl;
	char err[512], lcores[64];
	char *eal_argv[RD_EAL_ARGS_MAX + 4];
	int eal_argc = 0, opt, ret, rc = 1;
	unsigned worker;
	sigset_t set;

	while ((opt = getopt_long(argc, argv, "c:hV", opts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			path = optarg;
			break;
		case 'C':
			path = optarg;
			check_only = true;
			break;
		case 'V':
			printf("roshmd %s (ABI %u)\n", ROSHM_VERSION, ROSHM_ABI_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	if (rd_config_load(&cfg, path, err, sizeof(err))) {
		fprintf(stderr, "roshmd: %s\n", err);
		return 1;
	}
	if (check_only) {
		printf("%s: OK\n", path);
		rd_config_free(&cfg);
		return 0;
	}
	{
		extern char **environ;
		char envlog[256];

		if (rd_config_apply_env(&cfg, environ, "/sys", envlog, sizeof(envlog), err, sizeof(err))) {
			fprintf(stderr, "roshmd: %s\n", err);
			goto out_cfg;
		}
		if (envlog[0])
			fprintf(stderr, "roshmd: from the environment:%s\n", envlog);
	}

	/* Block the stop signals before EAL starts its threads, so that they
	 * inherit the mask and only the control thread's signalfd sees them. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);

	eal_argv[eal_argc++] = argv[0];
	for (int i = 0; i < cfg.eal_argc; i++)
		eal_argv[eal_argc++] = cfg.eal_argv[i];
	if (!has_lcore_arg(&cfg)) {
		lcores_from_affinity(lcores, sizeof(lcores));
		eal_argv[eal_argc++] = "--lcores";
		eal_argv[eal_argc++] = lcores;
	}
	eal_argv[eal_argc] = NULL;
	ret = rte_eal_init(eal_argc, eal_argv);
	if (ret < 0) {
		fprintf(stderr, "roshmd: EAL init failed: %s\n", rte_strerror(rte_errno));
		goto out_cfg;
	}
	rd_log_init(cfg.log_level, cfg.eal_argc, cfg.eal_argv);

	if (cfg.lcore >= 0) {
		worker = (unsigned)cfg.lcore;
		if (!rte_lcore_is_enabled(worker) || worker == rte_get_main_lcore()) {
			RD_LOG(ERR, "dataplane.lcore %u is not an enabled worker lcore", worker);
			goto out_eal;
		}
	} else {
		worker = rte_get_next_lcore(-1, 1, 0);
		if (worker >= RTE_MAX_LCORE) {
			RD_LOG(ERR, "EAL gave no worker lcore for the poller (need two lcores)");
			goto out_eal;
		}
	}
	ret = rd_poller_init(&poller, &cfg);
	if (ret) {
		RD_LOG(ERR, "poller init: %s", strerror(-ret));
		goto out_eal;
	}
	ret = rd_control_init(&ctl, &cfg, &poller);
	if (ret)
		goto out_control;
	ctl.cfg_path = path;
	atomic_store(&poller.running, true);
	ret = rte_eal_remote_launch(rd_poller_main, &poller, worker);
	if (ret) {
		RD_LOG(ERR, "launching the poller on lcore %u: %s", worker, strerror(-ret));
		goto out_control;
	}
	RD_LOG(INFO, "version %s ready: node %s, main lcore %u, poller lcore %u", ROSHM_VERSION,
	       cfg.node, rte_get_main_lcore(), worker);
	{
		char st[512];

		snprintf(st, sizeof(st), "READY=1\nMAINPID=%d\nSTATUS=serving on %s", (int)getpid(),
			 cfg.socket);
		rd_notify(st);
	}

	rd_control_run(&ctl);

	atomic_store(&poller.stop, true);
	{
		uint64_t one = 1;
		ssize_t w = write(poller.cmd_efd, &one, sizeof(one));

		(void)w;
	}
	rte_eal_wait_lcore(worker);
	/* pairs with the poller's last store: its accesses before our teardown */
	while (!atomic_load_explicit(&poller.exited, memory_order_acquire))
		rte_pause();
	RD_LOG(INFO, "stopped");
	rc = ctl.failed ? 1 : 0;
out_control:
	rd_control_fini(&ctl);
	rd_poller_fini(&poller);
out_eal:
	rte_eal_cleanup();
out_cfg:
	rd_config_free(&cfg);
	return rc;
}
