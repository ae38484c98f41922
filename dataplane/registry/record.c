// SPDX-License-Identifier: MIT
/* Region records as JSON (jansson). Parsing treats the text as hostile. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "../config.h"
#include "registry.h"

char *rd_region_rec_to_json(const struct rd_region_rec *rec)
{
	json_t *o = json_object(), *t = json_array();
	char *s;

	for (uint32_t i = 0; i < rec->ntenants; i++)
		json_array_append_new(t, json_string(rec->tenants[i]));
	json_object_set_new(o, "node", json_string(rec->node));
	json_object_set_new(o, "tenant", json_string(rec->tenant));
	json_object_set_new(o, "name", json_string(rec->name));
	json_object_set_new(o, "state", json_string(rec->state));
	json_object_set_new(o, "endpoint", json_string(rec->endpoint));
	json_object_set_new(o, "region_id", json_integer(rec->region_id));
	json_object_set_new(o, "key", json_integer(rec->key));
	/* u64 as a decimal string: JSON numbers lose precision past 2^53. */
	char buf[32];

	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)rec->epoch);
	json_object_set_new(o, "epoch", json_string(buf));
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)rec->mem_id);
	json_object_set_new(o, "mem_id", json_string(buf));
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)rec->data_size);
	json_object_set_new(o, "data_size", json_string(buf));
	if (!strncmp(rec->endpoint, "verbs:", 6)) {
		/* what the peers' NICs need; roshmd never hands it to a client */
		json_object_set_new(o, "rkey", json_integer(rec->rkey));
		snprintf(buf, sizeof(buf), "%llu", (unsigned long long)rec->raddr);
		json_object_set_new(o, "raddr", json_string(buf));
	}
	json_object_set_new(o, "txn_slots", json_integer(rec->txn_slots));
	json_object_set_new(o, "slot_size", json_integer(rec->slot_size));
	json_object_set_new(o, "policy", json_string(rec->policy == ROSHM_POLICY_OWNER ? "owner" :
						      rec->policy == ROSHM_POLICY_LIST ? "list" :
											 "tenant"));
	json_object_set_new(o, "tenants", t);
	s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	return s;
}

static int get_str(json_t *o, const char *k, char *dst, size_t cap, bool name)
{
	json_t *v = json_object_get(o, k);
	const char *s;

	if (!json_is_string(v))
		return -EBADMSG;
	s = json_string_value(v);
	if (strlen(s) >= cap || (name && !rd_valid_name(s)))
		return -EBADMSG;
	snprintf(dst, cap, "%s", s);
	return 0;
}

static int get_u64s(json_t *o, const char *k, uint64_t *dst)
{
	json_t *v = json_object_get(o, k);
	const char *s;
	char *end;

	if (!json_is_string(v))
		return -EBADMSG;
	s = json_string_value(v);
	if (!*s || *s == '-' || strlen(s) > 20)
		return -EBADMSG;
	errno = 0;
	*dst = strtoull(s, &end, 10);
	return (*end || errno) ? -EBADMSG : 0;
}

static int get_u32(json_t *o, const char *k, uint32_t *dst)
{
	json_t *v = json_object_get(o, k);

	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > UINT32_MAX)
		return -EBADMSG;
	*dst = (uint32_t)json_integer_value(v);
	return 0;
}

int rd_region_rec_from_json(const char *text, size_t len, struct rd_region_rec *rec)
{
	json_error_t jerr;
	json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr), *t;
	char pol[16];
	int ret = -EBADMSG;

	memset(rec, 0, sizeof(*rec));
	if (!json_is_object(o))
		goto out;
	if (get_str(o, "node", rec->node, sizeof(rec->node), true) ||
	    get_str(o, "tenant", rec->tenant, sizeof(rec->tenant), true) ||
	    get_str(o, "name", rec->name, sizeof(rec->name), true) ||
	    get_str(o, "state", rec->state, sizeof(rec->state), false) ||
	    get_str(o, "endpoint", rec->endpoint, sizeof(rec->endpoint), false) ||
	    get_str(o, "policy", pol, sizeof(pol), false) ||
	    get_u32(o, "region_id", &rec->region_id) || get_u32(o, "key", &rec->key) ||
	    get_u32(o, "txn_slots", &rec->txn_slots) || get_u32(o, "slot_size", &rec->slot_size) ||
	    get_u64s(o, "epoch", &rec->epoch) || get_u64s(o, "data_size", &rec->data_size) ||
	    get_u64s(o, "mem_id", &rec->mem_id))
		goto out;
	if (strcmp(rec->state, RD_STATE_ACTIVE) && strcmp(rec->state, RD_STATE_STALE))
		goto out;
	if (!strncmp(rec->endpoint, "verbs:", 6) &&
	    (get_u32(o, "rkey", &rec->rkey) || get_u64s(o, "raddr", &rec->raddr)))
		goto out;
	if (!strcmp(pol, "tenant"))
		rec->policy = ROSHM_POLICY_TENANT;
	else if (!strcmp(pol, "owner"))
		rec->policy = ROSHM_POLICY_OWNER;
	else if (!strcmp(pol, "list"))
		rec->policy = ROSHM_POLICY_LIST;
	else
		goto out;
	t = json_object_get(o, "tenants");
	if (!json_is_array(t) || json_array_size(t) > ROSHM_POLICY_TENANTS_MAX)
		goto out;
	rec->ntenants = (uint32_t)json_array_size(t);
	for (uint32_t i = 0; i < rec->ntenants; i++) {
		json_t *e = json_array_get(t, i);

		if (!json_is_string(e) || strlen(json_string_value(e)) >= ROSHM_NAME_MAX ||
		    !rd_valid_name(json_string_value(e)))
			goto out;
		snprintf(rec->tenants[i], ROSHM_NAME_MAX, "%s", json_string_value(e));
	}
	ret = 0;
out:
	json_decref(o);
	return ret;
}

char *rd_node_rec_to_json(const struct rd_node_rec *rec)
{
	json_t *o = json_object();
	char *s;

	json_object_set_new(o, "node", json_string(rec->node));
	json_object_set_new(o, "endpoint", json_string(rec->endpoint));
	json_object_set_new(o, "pid", json_integer(rec->pid));
	s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	return s;
}

int rd_node_rec_from_json(const char *text, size_t len, struct rd_node_rec *rec)
{
	json_error_t jerr;
	json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	int ret = -EBADMSG;

	memset(rec, 0, sizeof(*rec));
	if (json_is_object(o) && !get_str(o, "node", rec->node, sizeof(rec->node), true) &&
	    !get_str(o, "endpoint", rec->endpoint, sizeof(rec->endpoint), false) &&
	    !get_u32(o, "pid", &rec->pid))
		ret = 0;
	json_decref(o);
	return ret;
}
