/* SPDX-License-Identifier: MIT */
#ifndef RD_CONTROL_H
#define RD_CONTROL_H

#include "roshmd.h"
#include "registry/registry.h"
#include "transport/transport.h"

struct rd_conn;

struct rd_control {
	const struct rd_config *cfg;
	struct rd_poller *poller;
	struct rd_registry reg;
	struct rd_transport local;
	int listen_fd;
	int epfd;
	int sig_fd;
	uint32_t next_client_id;
	uint32_t next_region_id;
	uint32_t nclients;
	uint32_t nregions;
	struct rd_client *clients;
	struct rd_region *regions;
	struct rd_conn *conns;
	uint64_t start_ns;
	volatile int stop;
};

int rd_control_init(struct rd_control *ctl, const struct rd_config *cfg, struct rd_poller *p);
/* Serve until SIGTERM/SIGINT; returns 0 on an orderly stop. */
int rd_control_run(struct rd_control *ctl);
/* Release every client and region (after the poller stopped). */
void rd_control_fini(struct rd_control *ctl);

#endif
