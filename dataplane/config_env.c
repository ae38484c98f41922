// SPDX-License-Identifier: MIT
/*
 * What roshmd takes from its environment over the config file (a pod's
 * downward API and device plugin): ROSHM_NODE, ROSHM_ADVERTISE and the
 * SR-IOV VF a device plugin gives (PCIDEVICE_*), each checked as the file's
 * values are (docs/operations.md).
 */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addr.h"
#include "config.h"

/* The first entry of /sys/bus/pci/devices/ADDR/SUB/ (an ibdev or a netdev). */
static bool sysfs_first(const char *sysfs, const char *pci, const char *sub, char *out, size_t len)
{
	char path[512];
	DIR *d;
	struct dirent *e;
	bool found = false;

	snprintf(path, sizeof(path), "%s/bus/pci/devices/%s/%s", sysfs, pci, sub);
	d = opendir(path);
	if (!d)
		return false;
	while (!found && (e = readdir(d)))
		if (e->d_name[0] != '.' && strlen(e->d_name) < len) {
			snprintf(out, len, "%s", e->d_name);
			found = true;
		}
	closedir(d);
	return found;
}

static bool pci_addr_ok(const char *s)
{
	unsigned a, b, c, f;
	char tail;

	return sscanf(s, "%4x:%2x:%2x.%1x%c", &a, &b, &c, &f, &tail) == 4 && strlen(s) == 12;
}

/* Append to @log (of @len bytes, @ll used): truncated, never past its end. */
static void __attribute__((format(printf, 4, 5))) log_add(char *log, size_t len, size_t *ll,
							  const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*ll + 1 >= len)
		return;
	va_start(ap, fmt);
	n = vsnprintf(log + *ll, len - *ll, fmt, ap);
	va_end(ap);
	if (n > 0)
		*ll = *ll + (size_t)n < len ? *ll + (size_t)n : len - 1;
}

int rd_config_apply_env(struct rd_config *cfg, char *const *envp, const char *sysfs, char *log,
			size_t loglen, char *err, size_t errlen)
{
	size_t ll = 0;

	log[0] = 0;
	for (char *const *e = envp; e && *e; e++) {
		const char *v = strchr(*e, '=');

		if (!v)
			continue;
		v++;
		if (!strncmp(*e, "ROSHM_NODE=", 11)) {
			if (!rd_valid_name(v) || strlen(v) >= sizeof(cfg->node)) {
				snprintf(err, errlen, "ROSHM_NODE='%s': letters, digits, '-', '_', '.'", v);
				return -1;
			}
			snprintf(cfg->node, sizeof(cfg->node), "%s", v);
			log_add(log, loglen, &ll, " node=%s", v);
		} else if (!strncmp(*e, "ROSHM_ADVERTISE=", 16)) {
			char host[RD_HOST_MAX], why[256];

			if (rd_addr_split(v, 0, host, sizeof(host), NULL, why, sizeof(why))) {
				snprintf(err, errlen, "ROSHM_ADVERTISE='%s': %s", v, why);
				return -1;
			}
			if (rd_host_is_any(host)) {
				snprintf(err, errlen, "ROSHM_ADVERTISE='%s' is a wildcard address, not one a "
					 "peer can reach", v);
				return -1;
			}
			snprintf(cfg->tcp_advertise, sizeof(cfg->tcp_advertise), "%s", host);
			snprintf(cfg->verbs_advertise, sizeof(cfg->verbs_advertise), "%s", host);
			log_add(log, loglen, &ll, " advertise=%s", host);
		} else if (!strncmp(*e, "PCIDEVICE_", 10) && cfg->verbs_enabled && !cfg->verbs_device[0] &&
			   !cfg->verbs_netdev[0]) {
			/* the device plugin's value: one PCI address, or a list */
			char pci[32];
			size_t n = strcspn(v, ",");

			if (n >= sizeof(pci))
				continue;
			memcpy(pci, v, n);
			pci[n] = 0;
			if (!pci_addr_ok(pci))
				continue;
			if (!sysfs_first(sysfs, pci, "infiniband", cfg->verbs_device, sizeof(cfg->verbs_device))) {
				snprintf(err, errlen, "%.*s=%s: no RDMA device under %s/bus/pci/devices/%s/infiniband",
					 (int)(v - *e - 1), *e, pci, sysfs, pci);
				return -1;
			}
			sysfs_first(sysfs, pci, "net", cfg->verbs_netdev, sizeof(cfg->verbs_netdev));
			log_add(log, loglen, &ll, " verbs device=%s netdev=%s (VF %s)", cfg->verbs_device,
				cfg->verbs_netdev[0] ? cfg->verbs_netdev : "?", pci);
		}
	}
	return 0;
}
