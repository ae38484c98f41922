// SPDX-License-Identifier: MIT
#define _GNU_SOURCE
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>

#include "fuzz_eal.h"

static char prefix[128], tmp[128];

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static void cleanup(void)
{
	char dir[256];

	rte_eal_cleanup();
	snprintf(dir, sizeof(dir), "%s/dpdk/%s", getuid() ? (getenv("XDG_RUNTIME_DIR") ?: "/tmp") :
		 "/var/run", prefix);
	nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
	if (tmp[0])
		nftw(tmp, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

int fuzz_eal_init(const char *name)
{
	const char *tag = getenv("ROSHM_TEST_TAG");
	/* FUZZ_LOG_LEVEL=info shows what roshmd made of an input */
	char level[32];
	char *argv[] = { "fuzz", "--no-huge", "-m", "64", "--no-pci", "--no-shconf", "-l", "0",
			 "--no-telemetry", "--log-level", level, "--file-prefix", prefix, NULL };

	snprintf(level, sizeof(level), "*:%s", getenv("FUZZ_LOG_LEVEL") ?: "error");

	snprintf(prefix, sizeof(prefix), "%s-fuzz-%s-%d", tag ? tag : "manual", name, (int)getpid());
	if (rte_eal_init((int)(sizeof(argv) / sizeof(argv[0])) - 1, argv) < 0) {
		fprintf(stderr, "fuzz: EAL init: %s\n", rte_strerror(rte_errno));
		exit(1);
	}
	atexit(cleanup);
	return 0;
}

const char *fuzz_tmpdir(void)
{
	if (!tmp[0]) {
		const char *tag = getenv("ROSHM_TEST_TAG");

		snprintf(tmp, sizeof(tmp), "/tmp/roshm-test-%s-fuzz-XXXXXX", tag ? tag : "manual");
		if (!mkdtemp(tmp)) {
			perror("fuzz: mkdtemp");
			exit(1);
		}
	}
	return tmp;
}
