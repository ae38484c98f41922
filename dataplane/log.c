// SPDX-License-Identifier: MIT
/*
 * Log types: one DPDK log type per component (roshm.control, roshm.poller,
 * roshm.tcp, roshm.verbs, roshm.registry), so that the EAL's own
 * --log-level=roshm.tcp:debug (or roshm.*:debug, or a regex) sets one
 * component's level, and log.level the level of every roshm.* type that
 * the EAL line does not name. Every line starts with its type's name.
 */
#define _GNU_SOURCE
#include <fnmatch.h>
#include <regex.h>
#include <string.h>

#include <rte_log.h>

#include "roshmd.h"

const char *const rd_log_names[RD_LC_N] = {
	[RD_LC_CONTROL] = "roshm.control",
	[RD_LC_POLLER] = "roshm.poller",
	[RD_LC_TCP] = "roshm.tcp",
	[RD_LC_VERBS] = "roshm.verbs",
	[RD_LC_REGISTRY] = "roshm.registry",
};

/* Until rd_log_init: a type every DPDK has (tests that link the modules
 * without an EAL log through it too). */
int rd_logtypes[RD_LC_N] = { RTE_LOGTYPE_USER1, RTE_LOGTYPE_USER1, RTE_LOGTYPE_USER1,
			     RTE_LOGTYPE_USER1, RTE_LOGTYPE_USER1 };
/* The EAL line set this component's level: log.level leaves it alone. */
static bool eal_named[RD_LC_N];

int rd_log_level(const char *s)
{
	if (!strcmp(s, "debug"))
		return RTE_LOG_DEBUG;
	if (!strcmp(s, "notice"))
		return RTE_LOG_NOTICE;
	if (!strcmp(s, "warning"))
		return RTE_LOG_WARNING;
	if (!strcmp(s, "error"))
		return RTE_LOG_ERR;
	return RTE_LOG_INFO;
}

/* Does EAL argument @arg (the value of a --log-level) name log type @type?
 * The EAL's own reading of it: "PATTERN:LEVEL" is a shell glob on the type's
 * name, "REGEX,LEVEL" a regular expression, a bare level the global one. */
static bool names_type(const char *arg, const char *type)
{
	const char *colon = strrchr(arg, ':'), *comma = strrchr(arg, ',');
	char pat[256];
	size_t n;

	if (comma) {
		regex_t re;
		bool hit;

		n = (size_t)(comma - arg);
		if (n >= sizeof(pat))
			return false;
		memcpy(pat, arg, n);
		pat[n] = 0;
		if (regcomp(&re, pat, REG_NOSUB))
			return false;
		hit = regexec(&re, type, 0, NULL, 0) == 0;
		regfree(&re);
		return hit;
	}
	if (!colon)
		return false;
	n = (size_t)(colon - arg);
	if (n >= sizeof(pat))
		return false;
	memcpy(pat, arg, n);
	pat[n] = 0;
	return fnmatch(pat, type, 0) == 0;
}

void rd_log_init(const char *level, int eal_argc, char *const *eal_argv)
{
	uint32_t def = (uint32_t)rd_log_level(level);

	for (int c = 0; c < RD_LC_N; c++) {
		eal_named[c] = false;
		for (int i = 0; i < eal_argc; i++) {
			const char *a = eal_argv[i];

			if (!strncmp(a, "--log-level=", 12))
				eal_named[c] |= names_type(a + 12, rd_log_names[c]);
			else if (!strcmp(a, "--log-level") && i + 1 < eal_argc)
				eal_named[c] |= names_type(eal_argv[i + 1], rd_log_names[c]);
		}
		/* the EAL kept its --log-level patterns for types registered
		 * later: this picks a named type's level from them */
		int t = rte_log_register_type_and_pick_level(rd_log_names[c], def);

		rd_logtypes[c] = t >= 0 ? t : RTE_LOGTYPE_USER1;
	}
}

void rd_log_set_default(const char *level)
{
	for (int c = 0; c < RD_LC_N; c++)
		if (!eal_named[c] && rd_logtypes[c] != RTE_LOGTYPE_USER1)
			rte_log_set_level((uint32_t)rd_logtypes[c], (uint32_t)rd_log_level(level));
}
