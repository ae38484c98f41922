// SPDX-License-Identifier: MIT
/*
 * `etcd` registry backend over etcd's v3 JSON gateway (kv, lease
 * and watch endpoints) with libcurl. Keys and values are base64, int64s are strings,
 * and proto3 leaves out default fields: an empty range has no "kvs", a lost
 * lease's keepalive answer has no "TTL", a PUT watch event has no "type".
 *
 * Every record of this node hangs off the node's lease, so a dead node's
 * regions vanish when the lease runs out. Requests run in the control
 * thread with a short timeout; the watch is a long-lived request in a curl
 * multi handle, pumped from tick().
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../config.h"
#include "../roshmd.h"
#include "registry.h"

#define MAX_ENDPOINTS 8

struct etcd {
	char endpoints[MAX_ENDPOINTS][128];
	int nend, cur;
	char prefix[64];
	uint32_t ttl;
	char lease[32];               /* int64 as decimal string */
	uint64_t next_keepalive_ns;
	CURL *easy;
	CURLM *multi;
	CURL *watch;
	bool changed;
	uint64_t watch_retry_ns;
	char errbuf[CURL_ERROR_SIZE];
};

struct buf {
	char *p;
	size_t len, cap;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static size_t collect(char *data, size_t size, size_t nmemb, void *arg)
{
	struct buf *b = arg;
	size_t n = size * nmemb;

	if (b->len + n + 1 > (1u << 24))
		return 0; /* a 16 MiB answer is not one we asked for */
	if (b->len + n + 1 > b->cap) {
		size_t cap = (b->len + n + 1) * 2;
		char *p = realloc(b->p, cap);

		if (!p)
			return 0;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, n);
	b->len += n;
	b->p[b->len] = 0;
	return n;
}

static char *b64(const void *data, size_t len)
{
	char *out = malloc(4 * ((len + 2) / 3) + 1);

	if (out)
		EVP_EncodeBlock((unsigned char *)out, data, (int)len);
	return out;
}

/* Returns the decoded length or -1; @out gets a NUL-terminated copy. */
static int unb64(const char *in, char **out)
{
	size_t len = strlen(in);
	int n, pad = 0;

	if (len % 4)
		return -1;
	*out = malloc(len / 4 * 3 + 1);
	if (!*out)
		return -1;
	n = EVP_DecodeBlock((unsigned char *)*out, (const unsigned char *)in, (int)len);
	if (n < 0) {
		free(*out);
		return -1;
	}
	if (len && in[len - 1] == '=')
		pad++;
	if (len > 1 && in[len - 2] == '=')
		pad++;
	n -= pad;
	(*out)[n] = 0;
	return n;
}

/* POST @body to @path; on success *resp is the parsed answer. */
static int call(struct etcd *e, const char *path, json_t *body, json_t **resp)
{
	char *text = json_dumps(body, JSON_COMPACT);
	int ret = -EIO;

	*resp = NULL;
	if (!text)
		return -ENOMEM;
	for (int attempt = 0; attempt < e->nend; attempt++) {
		struct buf b = { 0 };
		char url[256];
		long code = 0;
		struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");

		snprintf(url, sizeof(url), "%s%s", e->endpoints[e->cur], path);
		curl_easy_reset(e->easy);
		curl_easy_setopt(e->easy, CURLOPT_URL, url);
		curl_easy_setopt(e->easy, CURLOPT_POSTFIELDS, text);
		curl_easy_setopt(e->easy, CURLOPT_HTTPHEADER, h);
		curl_easy_setopt(e->easy, CURLOPT_WRITEFUNCTION, collect);
		curl_easy_setopt(e->easy, CURLOPT_WRITEDATA, &b);
		curl_easy_setopt(e->easy, CURLOPT_TIMEOUT_MS, 2000L);
		curl_easy_setopt(e->easy, CURLOPT_CONNECTTIMEOUT_MS, 1000L);
		curl_easy_setopt(e->easy, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(e->easy, CURLOPT_ERRORBUFFER, e->errbuf);
		CURLcode rc = curl_easy_perform(e->easy);

		curl_slist_free_all(h);
		curl_easy_getinfo(e->easy, CURLINFO_RESPONSE_CODE, &code);
		if (rc == CURLE_OK && code == 200 && b.p) {
			json_error_t jerr;

			*resp = json_loads(b.p, 0, &jerr);
			free(b.p);
			ret = *resp ? 0 : -EBADMSG;
			break;
		}
		if (rc == CURLE_OK) {
			RD_LOG(WARNING, "etcd %s: HTTP %ld: %.200s", path, code, b.p ? b.p : "");
			free(b.p);
			ret = -EIO;
			break; /* the server answered: another endpoint will not help */
		}
		free(b.p);
		RD_LOG(WARNING, "etcd %s: %s", url, e->errbuf[0] ? e->errbuf : curl_easy_strerror(rc));
		e->cur = (e->cur + 1) % e->nend;
		ret = -EHOSTUNREACH;
	}
	free(text);
	return ret;
}

static json_t *kv_body(const char *key, const char *range_end)
{
	json_t *o = json_object();
	char *k = b64(key, strlen(key));

	json_object_set_new(o, "key", json_string(k));
	free(k);
	if (range_end) {
		char *re = b64(range_end, strlen(range_end));

		json_object_set_new(o, "range_end", json_string(re));
		free(re);
	}
	return o;
}

static int put(struct etcd *e, const char *key, const char *value)
{
	json_t *o = kv_body(key, NULL), *resp;
	char *v = b64(value, strlen(value));
	int ret;

	json_object_set_new(o, "value", json_string(v));
	free(v);
	if (e->lease[0])
		json_object_set_new(o, "lease", json_string(e->lease));
	ret = call(e, "/v3/kv/put", o, &resp);
	json_decref(o);
	json_decref(resp);
	return ret;
}

/* Value of @key in *out (malloc'd), -ENOENT if absent. */
static int get(struct etcd *e, const char *key, char **out, int *len)
{
	json_t *o = kv_body(key, NULL), *resp, *kvs, *v;
	int ret = call(e, "/v3/kv/range", o, &resp);

	json_decref(o);
	if (ret)
		return ret;
	kvs = json_object_get(resp, "kvs");
	v = json_object_get(json_array_get(kvs, 0), "value");
	if (!json_is_array(kvs) || !json_array_size(kvs))
		ret = -ENOENT;
	else if (!json_is_string(v) || (*len = unb64(json_string_value(v), out)) < 0)
		ret = -EBADMSG;
	json_decref(resp);
	return ret;
}

static int del(struct etcd *e, const char *key)
{
	json_t *o = kv_body(key, NULL), *resp;
	int ret = call(e, "/v3/kv/deleterange", o, &resp);

	json_decref(o);
	json_decref(resp);
	return ret;
}

static int grant(struct etcd *e)
{
	json_t *o = json_object(), *resp, *id;
	int ret;

	json_object_set_new(o, "TTL", json_integer(e->ttl));
	ret = call(e, "/v3/lease/grant", o, &resp);
	json_decref(o);
	if (ret)
		return ret;
	id = json_object_get(resp, "ID");
	if (json_is_string(id) && strlen(json_string_value(id)) < sizeof(e->lease)) {
		snprintf(e->lease, sizeof(e->lease), "%s", json_string_value(id));
		e->next_keepalive_ns = now_ns() + (uint64_t)e->ttl * 1000000000ull / 3;
	} else {
		ret = -EBADMSG;
	}
	json_decref(resp);
	return ret;
}

/* 1: lease alive, 0: lease gone, <0: etcd unreachable */
static int keepalive(struct etcd *e)
{
	json_t *o = json_object(), *resp, *ttl;
	int ret;

	json_object_set_new(o, "ID", json_string(e->lease));
	ret = call(e, "/v3/lease/keepalive", o, &resp);
	json_decref(o);
	if (ret)
		return ret;
	ttl = json_object_get(json_object_get(resp, "result"), "TTL");
	ret = json_is_string(ttl) && atoll(json_string_value(ttl)) > 0;
	json_decref(resp);
	return ret;
}

static void key_region(struct etcd *e, const char *tenant, const char *name, char *out, size_t cap)
{
	snprintf(out, cap, "%s/regions/%s/%s", e->prefix, tenant, name);
}

static int etcd_put_region(struct rd_registry *r, const struct rd_region_rec *rec)
{
	struct etcd *e = r->priv;
	char key[256], *json;
	int ret;

	if (!rd_valid_name(rec->tenant) || !rd_valid_name(rec->name))
		return -EINVAL;
	key_region(e, rec->tenant, rec->name, key, sizeof(key));
	json = rd_region_rec_to_json(rec);
	if (!json)
		return -ENOMEM;
	ret = put(e, key, json);
	free(json);
	return ret;
}

static int etcd_get_region(struct rd_registry *r, const char *tenant, const char *name,
			   struct rd_region_rec *rec)
{
	struct etcd *e = r->priv;
	char key[256], *val;
	int len, ret;

	if (!rd_valid_name(tenant) || !rd_valid_name(name))
		return -EINVAL;
	key_region(e, tenant, name, key, sizeof(key));
	ret = get(e, key, &val, &len);
	if (ret)
		return ret;
	ret = rd_region_rec_from_json(val, (size_t)len, rec);
	free(val);
	if (!ret && (strcmp(rec->tenant, tenant) || strcmp(rec->name, name)))
		ret = -EBADMSG;
	return ret;
}

static int etcd_del_region(struct rd_registry *r, const char *tenant, const char *name)
{
	struct etcd *e = r->priv;
	char key[256];

	if (!rd_valid_name(tenant) || !rd_valid_name(name))
		return -EINVAL;
	key_region(e, tenant, name, key, sizeof(key));
	return del(e, key);
}

static int etcd_list_regions(struct rd_registry *r,
			     void (*fn)(const struct rd_region_rec *rec, void *arg), void *arg)
{
	struct etcd *e = r->priv;
	char key[128], end[128];
	json_t *o, *resp, *kvs, *kv;
	size_t i;
	int ret, count = 0;

	snprintf(key, sizeof(key), "%s/regions/", e->prefix);
	snprintf(end, sizeof(end), "%s/regions0", e->prefix); /* '/' + 1 */
	o = kv_body(key, end);
	ret = call(e, "/v3/kv/range", o, &resp);
	json_decref(o);
	if (ret)
		return ret;
	kvs = json_object_get(resp, "kvs");
	json_array_foreach(kvs, i, kv) {
		json_t *v = json_object_get(kv, "value");
		struct rd_region_rec rec;
		char *val;
		int len;

		if (!json_is_string(v) || (len = unb64(json_string_value(v), &val)) < 0)
			continue;
		if (rd_region_rec_from_json(val, (size_t)len, &rec) == 0) {
			fn(&rec, arg);
			count++;
		}
		free(val);
	}
	json_decref(resp);
	return count;
}

static int etcd_put_node(struct rd_registry *r, const struct rd_node_rec *rec)
{
	struct etcd *e = r->priv;
	char key[256], *json = rd_node_rec_to_json(rec);
	int ret;

	if (!json)
		return -ENOMEM;
	snprintf(key, sizeof(key), "%s/nodes/%s", e->prefix, rec->node);
	ret = put(e, key, json);
	free(json);
	return ret;
}

static int etcd_get_node(struct rd_registry *r, const char *node, struct rd_node_rec *rec)
{
	struct etcd *e = r->priv;
	char key[256], *val;
	int len, ret;

	if (!rd_valid_name(node))
		return -EINVAL;
	snprintf(key, sizeof(key), "%s/nodes/%s", e->prefix, node);
	ret = get(e, key, &val, &len);
	if (ret)
		return ret;
	ret = rd_node_rec_from_json(val, (size_t)len, rec);
	free(val);
	if (!ret && strcmp(rec->node, node))
		ret = -EBADMSG;
	return ret;
}

static int etcd_del_node(struct rd_registry *r, const char *node)
{
	struct etcd *e = r->priv;
	char key[256];

	snprintf(key, sizeof(key), "%s/nodes/%s", e->prefix, node);
	return del(e, key);
}

/* The watch stream: any event under our prefix means "look again". */
static size_t watch_data(char *data, size_t size, size_t nmemb, void *arg)
{
	struct etcd *e = arg;
	size_t n = size * nmemb;

	if (memmem(data, n, "\"events\"", 8))
		e->changed = true;
	return n;
}

static void watch_start(struct etcd *e)
{
	static char body[512];
	char key[128], end[128];
	json_t *o, *wrap;
	char *text;

	snprintf(key, sizeof(key), "%s/", e->prefix);
	snprintf(end, sizeof(end), "%s0", e->prefix);
	o = kv_body(key, end);
	wrap = json_object();
	json_object_set_new(wrap, "create_request", o);
	text = json_dumps(wrap, JSON_COMPACT);
	json_decref(wrap);
	snprintf(body, sizeof(body), "%s", text ? text : "{}");
	free(text);

	char url[256];

	snprintf(url, sizeof(url), "%s/v3/watch", e->endpoints[e->cur]);
	e->watch = curl_easy_init();
	curl_easy_setopt(e->watch, CURLOPT_URL, url);
	curl_easy_setopt(e->watch, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(e->watch, CURLOPT_WRITEFUNCTION, watch_data);
	curl_easy_setopt(e->watch, CURLOPT_WRITEDATA, e);
	curl_easy_setopt(e->watch, CURLOPT_CONNECTTIMEOUT_MS, 1000L);
	curl_easy_setopt(e->watch, CURLOPT_NOSIGNAL, 1L);
	curl_multi_add_handle(e->multi, e->watch);
	/* Whatever happened while no watch ran is unknown: look again. */
	e->changed = true;
}

static void watch_stop(struct etcd *e)
{
	if (!e->watch)
		return;
	curl_multi_remove_handle(e->multi, e->watch);
	curl_easy_cleanup(e->watch);
	e->watch = NULL;
}

static int etcd_tick(struct rd_registry *r)
{
	struct etcd *e = r->priv;
	uint64_t now = now_ns();
	int running = 0, lost = 0;

	if (now >= e->next_keepalive_ns) {
		int alive = keepalive(e);

		e->next_keepalive_ns = now + (uint64_t)e->ttl * 1000000000ull / 3;
		if (alive == 0) {
			RD_LOG(WARNING, "etcd: lease %s is gone: taking a new one", e->lease);
			e->lease[0] = 0;
			if (grant(e) == 0)
				lost = 1;
			else
				e->next_keepalive_ns = now + 500000000ull;
		}
	}
	if (!e->watch && now >= e->watch_retry_ns)
		watch_start(e);
	if (e->watch) {
		CURLMsg *m;
		int q;

		curl_multi_perform(e->multi, &running);
		while ((m = curl_multi_info_read(e->multi, &q)))
			if (m->msg == CURLMSG_DONE) {
				watch_stop(e);
				e->watch_retry_ns = now + 500000000ull;
				break;
			}
	}
	return lost;
}

static bool etcd_changed(struct rd_registry *r)
{
	struct etcd *e = r->priv;
	bool c = e->changed;

	e->changed = false;
	return c;
}

static void etcd_close(struct rd_registry *r)
{
	struct etcd *e = r->priv;
	json_t *o, *resp;

	if (!e)
		return;
	watch_stop(e);
	if (e->lease[0]) {
		/* Revoking drops every record of ours at once. */
		o = json_object();
		json_object_set_new(o, "ID", json_string(e->lease));
		if (call(e, "/v3/lease/revoke", o, &resp) == 0)
			json_decref(resp);
		json_decref(o);
	}
	curl_multi_cleanup(e->multi);
	curl_easy_cleanup(e->easy);
	free(e);
	r->priv = NULL;
}

static const struct rd_registry_ops etcd_ops = {
	.name = "etcd",
	.put_region = etcd_put_region,
	.get_region = etcd_get_region,
	.del_region = etcd_del_region,
	.list_regions = etcd_list_regions,
	.put_node = etcd_put_node,
	.get_node = etcd_get_node,
	.del_node = etcd_del_node,
	.tick = etcd_tick,
	.changed = etcd_changed,
	.close = etcd_close,
};

int rd_registry_etcd_open(struct rd_registry *r, const struct rd_config *cfg)
{
	struct etcd *e = calloc(1, sizeof(*e));
	char list[RD_PATH_MAX], *save = NULL, *tok;
	int ret;

	memset(r, 0, sizeof(*r));
	if (!e)
		return -ENOMEM;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	snprintf(list, sizeof(list), "%s", cfg->etcd_endpoints);
	for (tok = strtok_r(list, ",", &save); tok && e->nend < MAX_ENDPOINTS;
	     tok = strtok_r(NULL, ",", &save)) {
		size_t l = strlen(tok);

		while (l && tok[l - 1] == '/')
			tok[--l] = 0;
		snprintf(e->endpoints[e->nend++], sizeof(e->endpoints[0]), "%s", tok);
	}
	snprintf(e->prefix, sizeof(e->prefix), "%s", cfg->etcd_prefix);
	e->ttl = cfg->lease_ttl_s;
	e->easy = curl_easy_init();
	e->multi = curl_multi_init();
	if (!e->nend || !e->easy || !e->multi) {
		free(e);
		return -EINVAL;
	}
	r->priv = e;
	r->ops = &etcd_ops;
	snprintf(r->node, sizeof(r->node), "%s", cfg->node);
	ret = grant(e);
	if (ret) {
		RD_LOG(ERR, "etcd at %s: cannot take a lease: %s", cfg->etcd_endpoints, strerror(-ret));
		etcd_close(r);
		r->ops = NULL;
		return ret;
	}
	RD_LOG(INFO, "etcd: lease %s, TTL %u s", e->lease, e->ttl);
	return 0;
}
