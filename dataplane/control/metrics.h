/* SPDX-License-Identifier: MIT */
/* /metrics (Prometheus text 0.0.4) and DPDK telemetry commands. */
#ifndef RD_METRICS_H
#define RD_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rd_control;

/*
 * The node's counters, one line each in rd_metrics[] (metrics.c): /metrics
 * shows those with a name, the admin "stats" JSON (and /roshm/stats) those
 * with a key, both in the table's order.
 */
enum rd_metric_type {
	RD_METRIC_COUNTER,            /* a counter; a JSON integer */
	RD_METRIC_GAUGE,              /* a gauge; a JSON integer */
	RD_METRIC_FLAG,               /* a gauge of 0 or 1; a JSON boolean */
};
struct rd_metric {
	const char *name;             /* on /metrics; NULL: not there */
	const char *key;              /* in the admin "stats"; NULL: not there */
	enum rd_metric_type type;
	const char *help;
	uint64_t (*get)(struct rd_control *ctl); /* the value; NULL: the poller's counter... */
	size_t stat;                  /* ...at this offset in struct rd_poller_stats */
};
extern const struct rd_metric rd_metrics[];
extern const size_t rd_nmetrics;
uint64_t rd_metric_value(struct rd_control *ctl, const struct rd_metric *m);

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
