// SPDX-License-Identifier: MIT
/*
 * The etcd backend (etcd.c): records from etcd. Each key-value is parsed
 * and its record's MAC checked before it enters the cache; the watch
 * streams changes from the revision of the last full range of the prefix,
 * and a full range (resync) starts over after an error or a compaction.
 */
#define _GNU_SOURCE
#include "registry/etcd_int.h"

/* ---- records from etcd --------------------------------------------------------- */


/* @rel as one of our keys: regions/<tenant>/<name> (@a, @b) or nodes/<node> (@a). */
bool etcd_classify(const char *rel, bool *region, char *a, char *b)
{
	if (!strncmp(rel, "regions/", 8)) {
		const char *t = rel + 8, *sl = strchr(t, '/');

		if (!sl || (size_t)(sl - t) >= ROSHM_NAME_MAX || strlen(sl + 1) >= ROSHM_NAME_MAX)
			return false;
		memcpy(a, t, (size_t)(sl - t));
		a[sl - t] = 0;
		strcpy(b, sl + 1);
		*region = true;
		return rd_valid_name(a) && rd_valid_name(b);
	}
	if (!strncmp(rel, "nodes/", 6)) {
		if (strlen(rel + 6) >= ROSHM_NAME_MAX)
			return false;
		strcpy(a, rel + 6);
		b[0] = 0;
		*region = false;
		return rd_valid_name(a);
	}
	return false;
}

/* A kv of a range or a watch event into @p: 0, or -1 when its key is not
 * one of ours (ignored). The record is verified here, outside the lock. */
int etcd_parse_kv(struct etcd *e, json_t *kv, bool del, struct parsed *p)
{
	struct rd_registry *r = e->r;
	char *raw, *val, a[ROSHM_NAME_MAX], b[ROSHM_NAME_MAX];
	json_t *k = json_object_get(kv, "key"), *v;
	int n;

	memset(p, 0, sizeof(*p));
	if (!json_is_string(k) || (n = etcd_unb64(json_string_value(k), KEY_MAX, &raw)) < 0)
		return -1;
	if ((size_t)n != strlen(raw) || (size_t)n <= e->plen + 1 || memcmp(raw, e->prefix, e->plen) ||
	    raw[e->plen] != '/') {
		free(raw);
		return -1;
	}
	snprintf(p->rel, sizeof(p->rel), "%s", raw + e->plen + 1);
	free(raw);
	if (!etcd_classify(p->rel, &p->region, a, b) || !etcd_get_i64(kv, "mod_revision", &p->rev) || p->rev <= 0)
		return -1;
	p->present = !del;
	if (del)
		return 0;
	if (!etcd_get_i64(kv, "lease", &p->lease) || p->lease < 0)
		p->lease = 0;   /* (proto3 leaves a 0 out) */
	p->status = -EBADMSG;
	v = json_object_get(kv, "value");
	if (!json_is_string(v) || (n = etcd_unb64(json_string_value(v), RD_REC_MAX, &val)) < 0) {
		p->why = "value absent, not base64, or larger than 64 KiB";
		return 0;
	}
	p->rec = malloc(etcd_rec_size(p->region));
	if (!p->rec) {
		p->why = "out of memory";
	} else if (p->region) {
		struct rd_region_rec *rec = p->rec;

		if (!rd_region_rec_verify(val, (size_t)n, r->key, r->keylen, rec, &p->why)) {
			if (strcmp(rec->tenant, a) || strcmp(rec->name, b))
				p->why = "filed under another name";
			else
				p->status = 0;
		}
	} else {
		struct rd_node_rec *rec = p->rec;

		if (!rd_node_rec_verify(val, (size_t)n, r->key, r->keylen, rec, &p->why)) {
			if (strcmp(rec->node, a))
				p->why = "filed under another name";
			else
				p->status = 0;
		}
	}
	free(val);
	if (p->status) {
		free(p->rec);
		p->rec = NULL;
	} else {
		etcd_rec_mac(r, p->region, p->rec, p->mac);
	}
	return 0;
}

/*
 * @p into the cache: only if newer than what the cache holds (a range
 * replaces: @force, and marks the key seen in resync generation @gen).
 * Someone else changing one of our own records makes us put it back.
 */
void etcd_apply(struct etcd *e, struct parsed *p, bool force, uint64_t gen)
{
	struct ent *x;
	bool changed, bad_news = false;

	pthread_mutex_lock(&e->lock);
	x = p->present ? etcd_ent_get(e, p->rel, p->region, false, p->status != 0) : etcd_ent_find(e, p->rel);
	if (!x || (!force && p->rev <= x->s_rev)) {
		pthread_mutex_unlock(&e->lock);
		free(p->rec);
		return;
	}
	changed = x->s_present != p->present || x->s_status != p->status ||
		  (p->present && !p->status && CRYPTO_memcmp(x->s_mac, p->mac, 32));
	bool lease_moved = x->s_lease != (p->present ? p->lease : 0);
	bad_news = changed && p->present && p->status;
	etcd_store_set(e, x, p->present, p->status, p->rec, p->mac, p->rev);
	x->s_lease = p->present ? p->lease : 0;
	p->rec = NULL;
	if (force)
		x->seen = gen;
	/* our node name's record written from another boot, or put under
	 * another lease: whose is it? */
	if ((changed || lease_moved) && etcd_other_boot(e, x))
		e->name_look = true;
	if (x->own && x->o_synced && !x->pending && !etcd_own_in_store(x)) {
		x->o_synced = false;
		e->need_reconcile = true;
	}
	if (changed) {
		e->flags |= RD_REG_CHANGED;
		etcd_signal_efd(e);
	}
	etcd_ent_maybe_free(e, x);
	pthread_mutex_unlock(&e->lock);
	if (bad_news)
		rd_registry_log_bad(e->r, p->rel, p->why);
}

/* ---- the watch --------------------------------------------------------------- */

size_t etcd_watch_data(char *data, size_t size, size_t nmemb, void *arg)
{
	struct etcd *e = arg;
	size_t n = size * nmemb;
	char *nl;

	if (etcd_collect(data, size, nmemb, &e->wbuf) != n) {
		etcd_note_err(e, "watch message larger than 16 MiB: watching again");
		e->watch_failed = true;
		e->watch_err = -EBADMSG;
		return 0; /* ends the transfer */
	}
	/* the gateway writes one JSON object per line */
	while (e->wbuf.len && (nl = memchr(e->wbuf.p, '\n', e->wbuf.len))) {
		size_t l = (size_t)(nl - e->wbuf.p);

		if (l)
			etcd_watch_line(e, e->wbuf.p, l);
		memmove(e->wbuf.p, nl + 1, e->wbuf.len - l - 1);
		e->wbuf.len -= l + 1;
		e->wbuf.p[e->wbuf.len] = 0;
		if (e->watch_failed)
			return 0;
	}
	return n;
}

void etcd_watch_line(struct etcd *e, const char *s, size_t len)
{
	json_error_t jerr;
	json_t *o = json_loadb(s, len, 0, &jerr), *res, *evs, *ev;
	int64_t rev = 0;
	size_t i;

	if (!json_is_object(o)) {
		etcd_note_err(e, "watch: a message that is not JSON: watching again");
		e->watch_failed = true;
		e->watch_err = -EBADMSG;
		goto out;
	}
	if (json_object_get(o, "error")) {
		struct buf b = { .p = (char *)s, .len = len };
		char msg[200];

		etcd_error_text(&b, msg, sizeof(msg));
		if (strstr(msg, "token"))
			e->token[0] = 0;
		etcd_note_err(e, "watch: %s", msg);
		e->watch_failed = true;
		e->watch_err = strstr(msg, "token") || strstr(msg, "auth") || strstr(msg, "permission") ?
			       -EACCES : -EIO;
		goto out;
	}
	res = json_object_get(o, "result");
	if (json_is_true(json_object_get(res, "canceled"))) {
		json_t *why = json_object_get(res, "cancel_reason");
		int64_t compact = 0;
		const char *w = json_is_string(why) ? json_string_value(why) : "";

		etcd_get_i64(res, "compact_revision", &compact);
		if (strstr(w, "token") || strstr(w, "auth") || strstr(w, "permission")) {
			e->token[0] = 0; /* log in again before the next watch */
			e->watch_err = -EACCES;
		} else if (!compact) {
			e->watch_err = -EIO;
		}
		if (compact)
			RD_LOG(INFO, "etcd: watch from revision %lld compacted (now %lld): range and watch again",
			       (long long)(e->watch_rev + 1), (long long)compact);
		else
			etcd_note_err(e, "watch canceled: %.150s", w);
		e->watch_failed = true;
		goto out;
	}
	if (json_is_true(json_object_get(res, "created")) && !e->watch_created) {
		e->watch_created = true;
		rd_registry_observe(e->r, RD_REGOP_WATCH, e->watch_start_ns, 0);
		atomic_store(&e->a_synced, e->synced);
	}
	evs = json_object_get(res, "events");
	json_array_foreach(evs, i, ev) {
		json_t *type = json_object_get(ev, "type");
		bool del = json_is_string(type) && !strcmp(json_string_value(type), "DELETE");
		struct parsed p;

		if (etcd_parse_kv(e, json_object_get(ev, "kv"), del, &p) == 0)
			etcd_apply(e, &p, false, 0);
	}
	if (etcd_get_i64(json_object_get(res, "header"), "revision", &rev) && rev > e->watch_rev)
		e->watch_rev = rev;
out:
	json_decref(o);
}

static int watch_start(struct etcd *e)
{
	char key[sizeof(e->prefix) + 2], end[sizeof(e->prefix) + 2], url[300];
	char ah[sizeof(e->token) + 32], rev[32];
	json_t *cr, *w;
	char *body;

	snprintf(key, sizeof(key), "%s/", e->prefix);
	snprintf(end, sizeof(end), "%s0", e->prefix); /* '/' + 1 */
	cr = etcd_kv_body(key, strlen(key), end, strlen(end));
	snprintf(rev, sizeof(rev), "%lld", (long long)(e->watch_rev + 1));
	json_object_set_new(cr, "start_revision", json_string(rev));
	w = json_object();
	json_object_set_new(w, "create_request", cr);
	body = json_dumps(w, JSON_COMPACT);
	json_decref(w);
	e->watch = curl_easy_init();
	if (!body || !e->watch) {
		free(body);
		etcd_watch_stop(e);
		return -ENOMEM;
	}
	snprintf(url, sizeof(url), "%s/v3/watch", e->endpoints[e->cur]);
	e->watch_hdr = curl_slist_append(NULL, "Content-Type: application/json");
	if (e->token[0]) {
		snprintf(ah, sizeof(ah), "Authorization: %s", e->token);
		e->watch_hdr = curl_slist_append(e->watch_hdr, ah);
	}
	etcd_common_opts(e, e->watch);
	curl_easy_setopt(e->watch, CURLOPT_URL, url);
	curl_easy_setopt(e->watch, CURLOPT_HTTPHEADER, e->watch_hdr);
	curl_easy_setopt(e->watch, CURLOPT_COPYPOSTFIELDS, body);
	curl_easy_setopt(e->watch, CURLOPT_WRITEFUNCTION, etcd_watch_data);
	curl_easy_setopt(e->watch, CURLOPT_WRITEDATA, e);
	curl_easy_setopt(e->watch, CURLOPT_CONNECTTIMEOUT_MS, (long)CONNECT_MS);
	/* a peer gone without a FIN must not leave us watching nothing */
	curl_easy_setopt(e->watch, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e->watch, CURLOPT_TCP_KEEPIDLE, 5L);
	curl_easy_setopt(e->watch, CURLOPT_TCP_KEEPINTVL, 2L);
	free(body);
	e->watch_start_ns = now_ns();
	curl_multi_add_handle(e->multi, e->watch);
	return 0;
}

/* ---- a full range of the prefix ---------------------------------------------- */

/* Keys not seen by the range of generation @gen are gone (as of @rev). */
static void sweep(struct etcd *e, uint64_t gen, int64_t rev)
{
	pthread_mutex_lock(&e->lock);
	for (unsigned i = 0; i < NBUCKETS; i++) {
		struct ent *x = e->buckets[i], *next;

		for (; x; x = next) {
			next = x->next;
			if (x->seen == gen || !x->s_present)
				continue;
			etcd_store_set(e, x, false, 0, NULL, NULL, rev);
			e->flags |= RD_REG_CHANGED;
			if (x->own && x->o_synced && !x->pending && !etcd_own_in_store(x)) {
				x->o_synced = false;
				e->need_reconcile = true;
			}
			etcd_ent_maybe_free(e, x);
		}
	}
	pthread_mutex_unlock(&e->lock);
}

/* Records of this node that this instance did not write: left by an earlier roshmd. */

/* @from becomes the smallest key after the last of @kvs (its own + "\0"):
 * 0, or -EBADMSG. The key came in an answer of at most RESP_MAX. */
static int page_next(json_t *kvs, char **from, size_t *flen)
{
	json_t *last = json_object_get(json_array_get(kvs, json_array_size(kvs) - 1), "key");
	char *raw = NULL;
	int n = json_is_string(last) ? etcd_unb64(json_string_value(last), RESP_MAX, &raw) : -1;

	free(*from);
	*from = NULL;
	if (n >= 0) {
		*from = malloc((size_t)n + 1);
		if (*from) {
			memcpy(*from, raw, (size_t)n);
			(*from)[n] = 0; /* key + "\0": the smallest key after it */
			*flen = (size_t)n + 1;
		}
	}
	free(raw);
	return *from ? 0 : -EBADMSG;
}

/*
 * Range the whole prefix (in pages, at one revision), replace the cache,
 * watch from there. Values a registry writer made large (etcd takes up to
 * its request limit) must not keep us from syncing, nor from keeping our
 * lease: each page is sized from the bytes of the one before (PAGE_BYTES,
 * PAGE keys at most, PAGE_FIRST first); one whose answer is still past
 * RESP_MAX is asked again with half as many keys, and a single value past
 * it is skipped (its key read alone), as a record that does not verify
 * would be; the lease is kept alive between pages.
 */
int etcd_resync(struct etcd *e)
{
	char start[sizeof(e->prefix) + 2], end[sizeof(e->prefix) + 2];
	char *from = NULL;
	size_t flen;
	uint64_t gen = ++e->sweep_gen;
	int64_t rev = 0;
	bool more = true;
	int ret = 0, limit = PAGE_FIRST;
	unsigned skipped = 0;

	etcd_watch_stop(e);
	e->synced = false;
	snprintf(start, sizeof(start), "%s/", e->prefix);
	snprintf(end, sizeof(end), "%s0", e->prefix);
	from = strdup(start);
	flen = strlen(start);
	while (more && from) {
		json_t *o = etcd_kv_body(from, flen, end, strlen(end)), *resp, *kvs, *kv;
		uint64_t bytes = 0, next;
		size_t i;

		if (e->lease[0] && now_ns() >= e->next_keepalive_ns)
			etcd_keepalive(e);   /* a long sync must not cost us the lease */
		json_object_set_new(o, "limit", json_integer(limit ? limit : 1));
		if (!limit)   /* the one key whose value is too large to read */
			json_object_set_new(o, "keys_only", json_true());
		if (rev)
			json_object_set_new(o, "revision", json_integer(rev));
		ret = etcd_call(e, "/v3/kv/range", o, &resp, now_ns() + ATTEMPT_MS * MS, 0);
		json_decref(o);
		if (ret == -EFBIG && limit) {
			limit /= 2;   /* 0: read that key alone, without its value */
			continue;
		}
		if (ret)
			break;
		if (!rev)
			rev = etcd_header_rev(resp);
		kvs = json_object_get(resp, "kvs");
		more = json_is_true(json_object_get(resp, "more")) && json_array_size(kvs) > 0;
		if (!rev) {
			ret = -EBADMSG;
			json_decref(resp);
			break;
		}
		if (!limit) {
			/* that key is skipped: the next page starts after it */
			if (json_array_size(kvs)) {
				skipped++;
				ret = page_next(kvs, &from, &flen);
			}
			limit = 1;
			json_decref(resp);
			continue;
		}
		json_array_foreach(kvs, i, kv) {
			struct parsed p;

			bytes += json_string_length(json_object_get(kv, "key")) +
				 json_string_length(json_object_get(kv, "value")) + 64;
			if (etcd_parse_kv(e, kv, false, &p) == 0)
				etcd_apply(e, &p, true, gen);
		}
		if (more)   /* the next page starts just after the last key */
			ret = page_next(kvs, &from, &flen);
		/* the next page: PAGE_BYTES at this page's bytes per key, at
		 * most 4 times this one */
		next = bytes ? (uint64_t)limit * PAGE_BYTES / bytes : PAGE;
		if (next > 4 * (uint64_t)limit)
			next = 4 * (uint64_t)limit;
		limit = next < 1 ? 1 : next > PAGE ? PAGE : (int)next;
		json_decref(resp);
	}
	free(from);
	if (skipped)
		RD_LOG(WARNING, "registry: %u value(s) under %s too large to read (an answer past "
		       "16 MiB): not records, skipped", skipped, e->prefix);
	if (ret) {
		/* etcd down or refusing is said where the call fails */
		if (ret == -EBADMSG || ret == -EFBIG)
			RD_LOG(WARNING, "registry: etcd: reading %s failed (%s): again later",
			       e->prefix, strerror(-ret));
		return ret;
	}
	sweep(e, gen, rev);
	e->watch_rev = rev;
	e->synced = true;
	pthread_mutex_lock(&e->lock);
	e->flags |= RD_REG_CHANGED;
	etcd_signal_efd(e);
	pthread_mutex_unlock(&e->lock);
	/* whose our node name is, before anything of ours is written or an
	 * earlier roshmd's leftovers removed (etcd_thread.c name_look) */
	if (!e->read_once) {
		e->read_once = true;
		e->name_look = true;
	}
	ret = watch_start(e);
	if (ret)
		e->synced = false;
	return ret;
}

/* ---- test hook: the watch parser alone ---------------------------------------- */

int rd_etcd_probe_open(struct rd_registry *r, const char *prefix)
{
	struct etcd *e = calloc(1, sizeof(*e));

	if (!e)
		return -ENOMEM;
	e->r = r;
	e->efd = -1;
	snprintf(e->prefix, sizeof(e->prefix), "%s", prefix);
	e->plen = strlen(e->prefix);
	pthread_mutex_init(&e->lock, NULL);
	r->ops = &etcd_ops;
	r->priv = e;
	return 0;
}

void rd_etcd_probe_feed(struct rd_registry *r, const char *data, size_t len)
{
	struct etcd *e = r->priv;

	if (etcd_watch_data((char *)data, 1, len, e) != len || e->watch_failed) {
		/* as the thread does: a new watch starts from an empty line buffer */
		e->watch_failed = false;
		e->wbuf.len = 0;
	}
}

int rd_etcd_probe_check(struct rd_registry *r, char *why, size_t len)
{
	struct etcd *e = r->priv;
	unsigned n = 0, bad = 0;

	for (unsigned i = 0; i < NBUCKETS; i++)
		for (struct ent *x = e->buckets[i]; x; x = x->next) {
			char a[ROSHM_NAME_MAX], b[ROSHM_NAME_MAX];
			bool region;
			uint8_t mac[32];

			n++;
			if (etcd_hash_key(x->key) % NBUCKETS != i) {
				snprintf(why, len, "%s in the wrong bucket", x->key);
				return -1;
			}
			if (!etcd_classify(x->key, &region, a, b) || region != x->region) {
				snprintf(why, len, "cached key %s is not one of ours", x->key);
				return -1;
			}
			if (x->own || x->pending || !x->s_present) {
				snprintf(why, len, "%s: cached with nothing in it", x->key);
				return -1;
			}
			if (x->s_status) {
				bad++;
				if (x->s_rec) {
					snprintf(why, len, "%s: a bad record with a body", x->key);
					return -1;
				}
				continue;
			}
			if (!x->s_rec) {
				snprintf(why, len, "%s: a good record without a body", x->key);
				return -1;
			}
			if (region ? strcmp(((struct rd_region_rec *)x->s_rec)->tenant, a) ||
					     strcmp(((struct rd_region_rec *)x->s_rec)->name, b)
				   : strcmp(((struct rd_node_rec *)x->s_rec)->node, a)) {
				snprintf(why, len, "%s holds a record of another name", x->key);
				return -1;
			}
			etcd_rec_mac(r, region, x->s_rec, mac);
			if (CRYPTO_memcmp(mac, x->s_mac, 32)) {
				snprintf(why, len, "%s: the cached MAC is not the record's", x->key);
				return -1;
			}
		}
	if (n != e->nent || bad != e->nbad || bad > RD_REG_BAD_MAX ||
	    n - bad > RD_REG_CACHE_MAX) {
		snprintf(why, len, "counts: %u entries (nent %u), %u bad (nbad %u)", n, e->nent, bad,
			 e->nbad);
		return -1;
	}
	return 0;
}

void rd_etcd_probe_close(struct rd_registry *r)
{
	struct etcd *e = r->priv;

	free(e->wbuf.p);
	etcd_free(e);
	r->priv = NULL;
	r->ops = NULL;
}
