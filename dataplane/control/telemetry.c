// SPDX-License-Identifier: MIT
/*
 * DPDK telemetry commands (dpdk-telemetry.py, or the v2 socket under the
 * EAL runtime directory):
 *   /roshm/stats              node status and poller counters
 *   /roshm/regions[,START]    a page of the registry's region names
 *   /roshm/region,T/NAME      one region: node, state, size, epoch, policy
 *   /roshm/peers[,START]      a page of the peer nodes' names
 *   /roshm/peer,NODE          one peer: endpoint, transport, up, counters
 * A page is {"regions" (or "peers"): [names >= START, in name order],
 * "total": entries in the whole list, "next": the START of the next page,
 * present while names remain}. It holds as many names as fit well inside
 * telemetry's limits (a reply is at most 16 KiB, and DPDK drops what does
 * not fit without a word): PAGE_MAX names, PAGE_BYTES of them. Names are
 * values, never dict keys: DPDK refuses keys with '-' or '.', which names
 * may have.
 *
 * Callbacks run on DPDK's telemetry threads, which must not walk the control
 * thread's lists: the control thread renders the lists as JSON (sorted by
 * name) into a snapshot behind a mutex, stats and peers every tick, regions
 * once a second (they read the registry), and a callback converts its copy.
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
	uint64_t next_ns;             /* control thread: next refresh of the regions */
};

#define REFRESH_NS 1000000000ull  /* regions: once a second */
/* A page: at most this many names and this many bytes of them, well inside
 * telemetry's 512 array entries and 16 KiB reply. */
#define PAGE_MAX 128
#define PAGE_BYTES 12288
#define START_MAX 256             /* a START or a name given to a command */

static struct rd_tel tel = { .lock = PTHREAD_MUTEX_INITIALIZER };

static const char *const name_key[TEL_N] = { NULL, "name", "node" };
static const char *const list_key[TEL_N] = { NULL, "regions", "peers" };

struct ent {
	const char *name;
	json_t *e;
};

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct ent *)a)->name, ((const struct ent *)b)->name);
}

/* The entries of @a (objects) sorted by their string field @key: a new array. */
static json_t *sorted(json_t *a, const char *key)
{
	size_t n = json_array_size(a), i;
	struct ent *v = calloc(n ? n : 1, sizeof(*v));
	json_t *e, *out = json_array();

	if (!out || !v) {
		free(v);
		json_decref(out);
		return NULL;
	}
	json_array_foreach(a, i, e) {
		const char *s = json_string_value(json_object_get(e, key));

		v[i].name = s ? s : "";
		v[i].e = e;
	}
	qsort(v, n, sizeof(*v), by_name);
	for (i = 0; i < n; i++)
		json_array_append(out, v[i].e);
	free(v);
	return out;
}

void rd_telemetry_refresh(struct rd_control *ctl)
{
	static const char *const cmd[TEL_N] = { "stats", "regions", "peers" };
	char *s[TEL_N] = { NULL };
	bool regions;

	if (!ctl->tel)
		return;
	/* stats and peers each tick; the regions list reads the registry */
	regions = rd_mono_ns() >= ctl->tel->next_ns;
	if (regions)
		ctl->tel->next_ns = rd_mono_ns() + REFRESH_NS;
	for (int i = 0; i < TEL_N; i++) {
		if (i == TEL_REGIONS && !regions)
			continue;
		json_t *o = rd_control_admin_json(ctl, cmd[i], NULL);

		if (o && i == TEL_STATS) {
			/* status fields too: one command tells the node's state */
			json_t *st = rd_control_admin_json(ctl, "status", NULL);

			if (st)
				json_object_update(o, st);
			json_decref(st);
		} else if (o && json_is_array(o)) {
			json_t *so = sorted(o, name_key[i]);

			json_decref(o);
			o = so;
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

/* The telemetry thread's own copy of snapshot @which, or NULL. */
static json_t *snapshot(int which)
{
	json_error_t err;
	char *s;
	json_t *o;

	pthread_mutex_lock(&tel.lock);
	s = tel.json[which] ? strdup(tel.json[which]) : NULL;
	pthread_mutex_unlock(&tel.lock);
	if (!s)
		return NULL;
	o = json_loads(s, 0, &err);
	free(s);
	return o;
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

/* A flat object into @d; arrays of integers become u64 arrays (what
 * telemetry documents: a dict holds values and arrays of them). */
static void put_object(struct rte_tel_data *d, json_t *o)
{
	const char *k;
	json_t *v;

	json_object_foreach(o, k, v) {
		if (json_is_array(v)) {
			struct rte_tel_data *a = rte_tel_data_alloc();
			size_t i;
			json_t *e;

			if (!a)
				continue;
			rte_tel_data_start_array(a, RTE_TEL_U64_VAL);
			json_array_foreach(v, i, e)
				rte_tel_data_add_array_u64(a, (uint64_t)json_integer_value(e));
			if (rte_tel_data_add_dict_container(d, k, a, 0))
				rte_tel_data_free(a);
		} else if (!json_is_array(v) && !json_is_object(v)) {
			put_value(d, k, v);
		}
	}
}

/* One page of list @which from @start (NULL or "": the first name). */
static int page(int which, const char *start, struct rte_tel_data *d)
{
	const char *key = name_key[which], *next = NULL;
	struct rte_tel_data *names;
	json_t *a, *e;
	size_t i, used = 0;
	unsigned n = 0;

	if (start && strlen(start) >= START_MAX)
		return -EINVAL;
	a = snapshot(which);
	names = rte_tel_data_alloc();
	if (!json_is_array(a) || !names) {
		json_decref(a);
		rte_tel_data_free(names);
		return -EAGAIN;
	}
	rte_tel_data_start_array(names, RTE_TEL_STRING_VAL);
	json_array_foreach(a, i, e) {
		const char *name = json_string_value(json_object_get(e, key));
		size_t cost;

		if (!name || (start && strcmp(name, start) < 0))
			continue;
		cost = strlen(name) + 3; /* "name", */
		/* what does not fit starts the next page, never drops out */
		if (n == PAGE_MAX || used + cost > PAGE_BYTES ||
		    rte_tel_data_add_array_string(names, name)) {
			next = name;
			break;
		}
		used += cost;
		n++;
	}
	rte_tel_data_start_dict(d);
	if (rte_tel_data_add_dict_container(d, list_key[which], names, 0))
		rte_tel_data_free(names);
	if (next)
		rte_tel_data_add_dict_string(d, "next", next);
	rte_tel_data_add_dict_u64(d, "total", json_array_size(a));
	json_decref(a);
	return 0;
}

/* Entry @name of list @which, flat. */
static int one(int which, const char *name, struct rte_tel_data *d)
{
	const char *key = name_key[which];
	json_t *a, *e;
	size_t i;
	int ret = -ENOENT;

	if (!name || !*name || strlen(name) >= START_MAX)
		return -EINVAL;
	a = snapshot(which);
	if (!json_is_array(a)) {
		json_decref(a);
		return -EAGAIN;
	}
	json_array_foreach(a, i, e) {
		const char *n = json_string_value(json_object_get(e, key));

		if (n && json_is_object(e) && !strcmp(n, name)) {
			rte_tel_data_start_dict(d);
			put_object(d, e);
			ret = 0;
			break;
		}
	}
	json_decref(a);
	return ret;
}

static int tel_stats(const char *cmd, const char *params, struct rte_tel_data *d)
{
	json_t *o = snapshot(TEL_STATS);

	(void)cmd;
	(void)params;
	if (!json_is_object(o)) {
		json_decref(o);
		return -EAGAIN;
	}
	rte_tel_data_start_dict(d);
	put_object(d, o);
	json_decref(o);
	return 0;
}

static int tel_regions(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	return page(TEL_REGIONS, params, d);
}

static int tel_region(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	return one(TEL_REGIONS, params, d);
}

static int tel_peers(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	return page(TEL_PEERS, params, d);
}

static int tel_peer(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	return one(TEL_PEERS, params, d);
}

int rd_telemetry_init(struct rd_control *ctl)
{
	/* help texts: under 64 bytes (DPDK's limit) */
	if (rte_telemetry_register_cmd("/roshm/stats", tel_stats,
				       "roshmd status and poller counters. No parameters") ||
	    rte_telemetry_register_cmd("/roshm/regions", tel_regions,
				       "Region names, a page. Parameter: START (next)") ||
	    rte_telemetry_register_cmd("/roshm/region", tel_region,
				       "One region. Parameter: tenant/name") ||
	    rte_telemetry_register_cmd("/roshm/peers", tel_peers,
				       "Peer node names, a page. Parameter: START (next)") ||
	    rte_telemetry_register_cmd("/roshm/peer", tel_peer,
				       "One peer node. Parameter: node name"))
		return -EINVAL;
	ctl->tel = &tel;
	rd_telemetry_refresh(ctl);
	return 0;
}
