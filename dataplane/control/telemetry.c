// SPDX-License-Identifier: MIT
/*
 * DPDK telemetry commands /roshm/stats, /roshm/regions, /roshm/peers
 * (dpdk-telemetry.py, or the v2 socket under the EAL runtime directory).
 * Callbacks run on DPDK's telemetry thread, which must not walk the control
 * thread's lists: the control thread renders the three answers as JSON
 * every tick into a snapshot behind a mutex, and a callback converts its
 * copy into rte_tel_data (objects become dicts, one level of nesting).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <rte_telemetry.h>

#include "control/control.h"
#include "control/metrics.h"

enum { TEL_STATS, TEL_REGIONS, TEL_PEERS, TEL_N };

struct rd_tel {
	pthread_mutex_t lock;
	char *json[TEL_N];
	uint64_t next_ns;             /* control thread: next refresh */
};

#define REFRESH_NS 1000000000ull  /* regions: once a second */

static struct rd_tel tel = { .lock = PTHREAD_MUTEX_INITIALIZER };


void rd_telemetry_refresh(struct rd_control *ctl)
{
	static const char *const cmd[TEL_N] = { "stats", "regions", "peers" };
	char *s[TEL_N];

	bool regions;

	if (!ctl->tel)
		return;
	/* stats and peers each tick; the regions list reads the registry */
	regions = rd_mono_ns() >= ctl->tel->next_ns;
	if (regions)
		ctl->tel->next_ns = rd_mono_ns() + REFRESH_NS;
	for (int i = 0; i < TEL_N; i++) {
		json_t *o = i == TEL_REGIONS && !regions ? NULL : rd_control_admin_json(ctl, cmd[i], NULL);

		if (i == TEL_REGIONS && !regions) {
			s[i] = NULL;
			continue;
		}
		if (o && i == TEL_STATS) {
			/* status fields too: one command tells the node's state */
			json_t *st = rd_control_admin_json(ctl, "status", NULL);

			if (st)
				json_object_update(o, st);
			json_decref(st);
		}
		s[i] = o ? json_dumps(o, JSON_COMPACT) : NULL;
		json_decref(o);
	}
	pthread_mutex_lock(&tel.lock);
	for (int i = 0; i < TEL_N; i++) {
		if (i == TEL_REGIONS && !regions)
			continue;
		free(tel.json[i]);
		tel.json[i] = s[i];
	}
	pthread_mutex_unlock(&tel.lock);
}

static void put_value(struct rte_tel_data *d, const char *k, json_t *v)
{
	char buf[64];

	if (json_is_integer(v) && json_integer_value(v) >= 0)
		rte_tel_data_add_dict_u64(d, k, (uint64_t)json_integer_value(v));
	else if (json_is_integer(v))
		rte_tel_data_add_dict_int(d, k, (int)json_integer_value(v));
	else if (json_is_string(v))
		rte_tel_data_add_dict_string(d, k, json_string_value(v));
	else if (json_is_boolean(v))
		rte_tel_data_add_dict_u64(d, k, json_is_true(v));
	else if (json_is_real(v)) {
		snprintf(buf, sizeof(buf), "%g", json_real_value(v));
		rte_tel_data_add_dict_string(d, k, buf);
	}
}

/* A flat object into @d; arrays of integers become u64 arrays. */
static void put_object(struct rte_tel_data *d, json_t *o, bool nest)
{
	const char *k;
	json_t *v;

	json_object_foreach(o, k, v) {
		if (json_is_array(v) && nest) {
			struct rte_tel_data *a = rte_tel_data_alloc();
			size_t i;
			json_t *e;

			if (!a)
				continue;
			rte_tel_data_start_array(a, RTE_TEL_U64_VAL);
			json_array_foreach(v, i, e)
				rte_tel_data_add_array_u64(a, (uint64_t)json_integer_value(e));
			rte_tel_data_add_dict_container(d, k, a, 0);
		} else if (!json_is_array(v) && !json_is_object(v)) {
			put_value(d, k, v);
		}
	}
}

static int answer(int which, const char *key, struct rte_tel_data *d)
{
	json_error_t err;
	json_t *o;
	char *s;

	pthread_mutex_lock(&tel.lock);
	s = tel.json[which] ? strdup(tel.json[which]) : NULL;
	pthread_mutex_unlock(&tel.lock);
	if (!s)
		return -EAGAIN;
	o = json_loads(s, 0, &err);
	free(s);
	if (!o)
		return -EINVAL;
	rte_tel_data_start_dict(d);
	if (json_is_object(o)) {
		put_object(d, o, true);
	} else {
		/* a list: one dict per entry, named by its @key field */
		size_t i;
		json_t *e;

		json_array_foreach(o, i, e) {
			struct rte_tel_data *c = rte_tel_data_alloc();
			const char *name = json_string_value(json_object_get(e, key));

			if (!c || !name) {
				rte_tel_data_free(c);
				continue;
			}
			rte_tel_data_start_dict(c);
			put_object(c, e, false);
			rte_tel_data_add_dict_container(d, name, c, 0);
		}
	}
	json_decref(o);
	return 0;
}

static int tel_stats(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	(void)params;
	return answer(TEL_STATS, NULL, d);
}

static int tel_regions(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	(void)params;
	return answer(TEL_REGIONS, "name", d);
}

static int tel_peers(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	(void)params;
	return answer(TEL_PEERS, "node", d);
}

int rd_telemetry_init(struct rd_control *ctl)
{
	if (rte_telemetry_register_cmd("/roshm/stats", tel_stats,
				       "roshmd node status and poller counters. No parameters") ||
	    rte_telemetry_register_cmd("/roshm/regions", tel_regions,
				       "Regions in the registry, by tenant/name. No parameters") ||
	    rte_telemetry_register_cmd("/roshm/peers", tel_peers,
				       "Peer nodes and their connections. No parameters"))
		return -EINVAL;
	ctl->tel = &tel;
	rd_telemetry_refresh(ctl);
	return 0;
}
