// SPDX-License-Identifier: MIT
/*
 * roshmd's configuration (dataplane/config.c): rd_config_load on the input
 * as a libconfig file, then rd_config_apply_env on a fake environment and a
 * fake sysfs (one SR-IOV VF with an RDMA device and a netdev).
 *
 * Input: the config text up to the first NUL byte; after it, environment
 * entries separated by newlines (ROSHM_NODE=..., PCIDEVICE_...=...).
 *
 * Inputs that use libconfig's @include are skipped: the directive reads any
 * file the text names (/dev/zero never ends), which is what it is for in a
 * file an administrator writes, and is libconfig's, not roshm's, parser.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <ftw.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "fuzz.h"

#define ENV_MAX 16

static char dir[128], conf[192], sysfs[192];

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static void cleanup(void)
{
	if (dir[0])
		nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

static void mkdirs(const char *path)
{
	char p[256];

	snprintf(p, sizeof(p), "%s", path);
	for (char *s = p + 1; *s; s++)
		if (*s == '/') {
			*s = 0;
			mkdir(p, 0755);
			*s = '/';
		}
	mkdir(p, 0755);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char p[256];

	(void)argc;
	(void)argv;
	const char *tag = getenv("ROSHM_TEST_TAG");

	/* under meson test, named for the run (tests/check_leftovers.sh) */
	if (tag && *tag)
		snprintf(dir, sizeof(dir), "/tmp/roshm-test-%s-fuzz-config-XXXXXX", tag);
	else
		snprintf(dir, sizeof(dir), "/tmp/roshm-fuzz-config-XXXXXX");
	if (!mkdtemp(dir))
		abort();
	atexit(cleanup);
	snprintf(conf, sizeof(conf), "%s/roshmd.conf", dir);
	snprintf(sysfs, sizeof(sysfs), "%s/sys", dir);
	snprintf(p, sizeof(p), "%s/bus/pci/devices/0000:3b:02.1/infiniband/mlx5_3", sysfs);
	mkdirs(p);
	snprintf(p, sizeof(p), "%s/bus/pci/devices/0000:3b:02.1/net/ens1f0v1", sysfs);
	mkdirs(p);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, 0, size);
	size_t tlen = nul ? (size_t)(nul - data) : size;
	char *env[ENV_MAX + 1], *envbuf = NULL, err[512], log[512];
	static struct rd_config cfg; /* 8 KiB: off the stack */
	int fd, n = 0, ret;

	if (!dir[0])
		LLVMFuzzerInitialize(NULL, NULL);
	if (memmem(data, tlen, "@include", 8))
		return 0;
	fd = open(conf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, data, tlen) != (ssize_t)tlen)
		abort();
	close(fd);
	memset(err, 0x7f, sizeof(err));
	ret = rd_config_load(&cfg, conf, err, sizeof(err));
	if (ret != 0 && ret != -1)
		fuzz_fail("rd_config_load returned %d", ret);
	if (ret && (!memchr(err, 0, sizeof(err)) || !err[0]))
		fuzz_fail("a refused config without an error message");
	if (ret == 0) {
		if (!rd_valid_name(cfg.node))
			fuzz_fail("accepted node name '%s'", cfg.node);
		if (cfg.eal_argc < 0 || cfg.eal_argc > RD_EAL_ARGS_MAX)
			fuzz_fail("eal_argc %d", cfg.eal_argc);
		for (int i = 0; i < cfg.eal_argc; i++)
			if (!cfg.eal_argv[i])
				fuzz_fail("eal_argv[%d] is NULL", i);
		if (nul) {
			size_t elen = size - tlen - 1;

			envbuf = malloc(elen + 1);
			if (!envbuf)
				abort();
			memcpy(envbuf, nul + 1, elen);
			envbuf[elen] = 0;
			for (char *save = NULL, *e = strtok_r(envbuf, "\n", &save); e && n < ENV_MAX;
			     e = strtok_r(NULL, "\n", &save))
				env[n++] = e;
		}
		env[n] = NULL;
		memset(log, 0x7f, sizeof(log));
		memset(err, 0x7f, sizeof(err));
		ret = rd_config_apply_env(&cfg, env, sysfs, log, sizeof(log), err, sizeof(err));
		if (ret != 0 && ret != -1)
			fuzz_fail("rd_config_apply_env returned %d", ret);
		if (!memchr(log, 0, sizeof(log)))
			fuzz_fail("log not terminated");
		if (ret && (!memchr(err, 0, sizeof(err)) || !err[0]))
			fuzz_fail("a refused environment without an error message");
		if (ret == 0 && !rd_valid_name(cfg.node))
			fuzz_fail("node name '%s' after the environment", cfg.node);
		free(envbuf);
	}
	rd_config_free(&cfg);
	return 0;
}
