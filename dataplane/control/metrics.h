/* SPDX-License-Identifier: MIT */
/* /metrics (Prometheus text 0.0.4) and DPDK telemetry commands. */
#ifndef RD_METRICS_H
#define RD_METRICS_H

#include <stdbool.h>
#include <stddef.h>

struct rd_control;

int rd_metrics_init(struct rd_control *ctl);
void rd_metrics_fini(struct rd_control *ctl);
void rd_metrics_accept(struct rd_control *ctl);
bool rd_metrics_conn_live(struct rd_control *ctl, void *tag);
void rd_metrics_readable(struct rd_control *ctl, void *tag);
void rd_metrics_timer(struct rd_control *ctl);
/* The page as text (malloc'd). */
char *rd_metrics_page(struct rd_control *ctl, size_t *len);

/* telemetry.c: /roshm/stats, /roshm/regions, /roshm/peers. The control
 * thread refreshes the snapshot the telemetry thread answers from. */
int rd_telemetry_init(struct rd_control *ctl);
void rd_telemetry_refresh(struct rd_control *ctl);

#endif
