// SPDX-License-Identifier: MIT
/*
 * The etcd backend (etcd.c), its HTTP side: base64 for keys and values,
 * requests through libcurl with the endpoints tried in turn and a timeout
 * per attempt (the watch stream runs beside them in the same multi
 * handle), etcd auth (a token, renewed when etcd says it expired) and the
 * lease (granted with back-off, kept alive every TTL/3).
 */
#define _GNU_SOURCE
#include "registry/etcd_int.h"

/* ---- base64 ------------------------------------------------------------ */

char *etcd_b64(const void *data, size_t len)
{
	char *out = malloc(4 * ((len + 2) / 3) + 1);

	if (out)
		EVP_EncodeBlock((unsigned char *)out, data, (int)len);
	return out;
}

/* @in decoded into *out (NUL-terminated); its length, or -1 (malformed, or
 * more than @max bytes). */
int etcd_unb64(const char *in, size_t max, char **out)
{
	size_t len = strlen(in);
	int n, pad = 0;

	*out = NULL;
	if (len % 4 || len / 4 * 3 > max + 2)
		return -1;
	*out = malloc(len / 4 * 3 + 1);
	if (!*out)
		return -1;
	n = EVP_DecodeBlock((unsigned char *)*out, (const unsigned char *)in, (int)len);
	if (n < 0) {
		free(*out);
		*out = NULL;
		return -1;
	}
	if (len && in[len - 1] == '=')
		pad++;
	if (len > 1 && in[len - 2] == '=')
		pad++;
	n -= pad;
	if ((size_t)n > max) {
		free(*out);
		*out = NULL;
		return -1;
	}
	(*out)[n] = 0;
	return n;
}

/* An int64 field: a decimal string or a number; absent is 0 (proto3). */
bool etcd_get_i64(json_t *o, const char *k, int64_t *v)
{
	json_t *x = json_object_get(o, k);
	const char *s;
	char *end;

	*v = 0;
	if (!x)
		return true;
	if (json_is_integer(x)) {
		*v = json_integer_value(x);
		return true;
	}
	if (!json_is_string(x))
		return false;
	s = json_string_value(x);
	if (!*s || strlen(s) > 20)
		return false;
	errno = 0;
	*v = strtoll(s, &end, 10);
	return !*end && !errno;
}

/* ---- HTTP ------------------------------------------------------------------ */

size_t etcd_collect(char *data, size_t size, size_t nmemb, void *arg)
{
	struct buf *b = arg;
	size_t n = size * nmemb;

	if (b->len + n + 1 > RESP_MAX)
		return 0;
	if (b->len + n + 1 > b->cap) {
		size_t cap = (b->len + n + 1) * 2;
		char *p;

		if (cap > RESP_MAX)
			cap = RESP_MAX;
		p = realloc(b->p, cap);
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

void etcd_common_opts(struct etcd *e, CURL *h)
{
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	if (e->cacert[0])
		curl_easy_setopt(h, CURLOPT_CAINFO, e->cacert);
	if (e->cert[0]) {
		curl_easy_setopt(h, CURLOPT_SSLCERT, e->cert);
		curl_easy_setopt(h, CURLOPT_SSLKEY, e->key);
	}
}


void etcd_watch_stop(struct etcd *e)
{
	if (e->watch) {
		curl_multi_remove_handle(e->multi, e->watch);
		curl_easy_cleanup(e->watch);
		e->watch = NULL;
	}
	curl_slist_free_all(e->watch_hdr);
	e->watch_hdr = NULL;
	free(e->wbuf.p);
	memset(&e->wbuf, 0, sizeof(e->wbuf));
	e->watch_done = e->watch_failed = e->watch_created = false;
	e->watch_err = 0;
	atomic_store(&e->a_synced, false);
}

/* The watch ended (etcd closed it, or we gave up on it): range and watch again. */
void etcd_watch_reap(struct etcd *e, CURLcode rc)
{
	uint64_t now = now_ns();
	int err = e->watch_err;

	if (!e->watch_failed && !atomic_load(&e->stop))
		etcd_note_err(e, "watch on %s ended: %s", e->prefix,
			 rc == CURLE_OK ? "closed by etcd" : curl_easy_strerror(rc));
	if (!e->watch_failed)
		err = rc == CURLE_OK ? -EIO : rc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT : -EHOSTUNREACH;
	/* metrics: a watch never set up is a failed request; one that ended
	 * (not a compaction) an error */
	if (!atomic_load(&e->stop) && (err || !e->watch_created))
		rd_registry_observe(e->r, RD_REGOP_WATCH, e->watch_created ? 0 : e->watch_start_ns,
				    err ? err : -EIO);
	/* a watch that lived a while was fine: start over quickly */
	if (e->watch_created && now - e->watch_start_ns > 5000 * MS)
		e->watch_backoff_ms = 0;
	e->watch_backoff_ms = e->watch_backoff_ms ? e->watch_backoff_ms * 2 : BACKOFF_MIN_MS;
	if (e->watch_backoff_ms > BACKOFF_MAX_MS)
		e->watch_backoff_ms = BACKOFF_MAX_MS;
	etcd_watch_stop(e);
	e->synced = false;
	e->sync_retry_ns = now + e->watch_backoff_ms * MS;
}

/* Drive every transfer once; returns @h's result (1 while in progress). A
 * finished watch is reaped here. */
int etcd_drive(struct etcd *e, CURL *h)
{
	int running, q, ret = 1;
	CURLMsg *m;

	curl_multi_perform(e->multi, &running);
	while ((m = curl_multi_info_read(e->multi, &q))) {
		if (m->msg != CURLMSG_DONE)
			continue;
		if (h && m->easy_handle == h) {
			CURLcode rc = m->data.result;

			/* CURLE_WRITE_ERROR: etcd_collect refused the answer
			 * (past RESP_MAX, or no memory for it): etcd is up */
			ret = rc == CURLE_OK ? 0 : rc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT :
			      rc == CURLE_WRITE_ERROR ? -EFBIG : -EHOSTUNREACH;
			if (rc != CURLE_OK && !e->errbuf[0])
				snprintf(e->errbuf, sizeof(e->errbuf), "%s", curl_easy_strerror(rc));
		} else if (m->easy_handle == e->watch) {
			/* reaped after the loop: removing a handle ends its message */
			e->watch_done = true;
			e->watch_rc = m->data.result;
		}
	}
	if (e->watch_done && e->watch)
		etcd_watch_reap(e, e->watch_rc);
	return ret;
}

/*
 * POST @body to @path on the current endpoint, driving the watch meanwhile;
 * *code gets the HTTP status. 0 (etcd answered), -ETIMEDOUT (@deadline
 * passed), -EHOSTUNREACH (no answer: connection, TLS), -EFBIG (an answer
 * past RESP_MAX), -ECANCELED (close() asked us to stop).
 */
static int http(struct etcd *e, const char *path, const char *body, bool auth, struct buf *out,
		long *code, uint64_t deadline)
{
	CURL *h = e->easy;
	struct curl_slist *hdr = NULL;
	char url[300], ah[sizeof(e->token) + 32];
	uint64_t now = now_ns();
	long ms;
	int ret;

	*code = 0;
	if (now >= deadline)
		return -ETIMEDOUT;
	ms = (long)((deadline - now) / MS) + 1;
	curl_easy_reset(h);
	etcd_common_opts(e, h);
	snprintf(url, sizeof(url), "%s%s", e->endpoints[e->cur], path);
	hdr = curl_slist_append(hdr, "Content-Type: application/json");
	if (auth && e->token[0]) {
		snprintf(ah, sizeof(ah), "Authorization: %s", e->token);
		hdr = curl_slist_append(hdr, ah);
	}
	e->errbuf[0] = 0;
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, etcd_collect);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, ms);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, ms < CONNECT_MS ? ms : (long)CONNECT_MS);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, e->errbuf);
	curl_multi_add_handle(e->multi, h);
	while ((ret = etcd_drive(e, h)) == 1) {
		etcd_expire(e);
		if (atomic_load(&e->stop) && !e->closing) {
			ret = -ECANCELED;
			break;
		}
		if (now_ns() >= deadline + 200 * MS) {
			ret = -ETIMEDOUT; /* curl's own timer should have fired */
			break;
		}
		curl_multi_poll(e->multi, NULL, 0, 100, NULL);
	}
	curl_multi_remove_handle(e->multi, h);
	if (!ret)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, code);
	curl_slist_free_all(hdr);
	return ret;
}

/* The message of an error answer (untrusted: only for logs and matching). */
void etcd_error_text(const struct buf *b, char *out, size_t len)
{
	json_error_t jerr;
	json_t *o = b->p ? json_loadb(b->p, b->len, 0, &jerr) : NULL, *m;

	m = json_object_get(o, "message");
	if (!json_is_string(m))
		m = json_object_get(o, "error");
	if (json_is_object(m))
		m = json_object_get(m, "message");
	if (json_is_string(m))
		snprintf(out, len, "%s", json_string_value(m));
	else
		snprintf(out, len, "%.120s", b->p ? b->p : "(empty)");
	for (char *p = out; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?'; /* one log line, no terminal escapes */
	json_decref(o);
}


#define CALL_NOAUTH 1u               /* the authenticate call itself */

/* The registry operation a request of the gateway is (its metrics). */
static enum rd_reg_op path_op(const char *path)
{
	if (!strcmp(path, "/v3/kv/range"))
		return RD_REGOP_GET;
	if (!strcmp(path, "/v3/kv/deleterange"))
		return RD_REGOP_DELETE;
	if (!strncmp(path, "/v3/lease/", 10))
		return RD_REGOP_LEASE;
	if (!strncmp(path, "/v3/auth/", 9))
		return RD_REGOP_AUTH;
	return RD_REGOP_PUT; /* /v3/kv/put, and /v3/kv/txn: the conditional puts */
}

static int call_once(struct etcd *e, const char *path, json_t *body, json_t **resp,
		     uint64_t deadline, unsigned flags);

/* call_once(), timed and counted (a re-authentication inside it counts too). */
int etcd_call(struct etcd *e, const char *path, json_t *body, json_t **resp, uint64_t deadline,
		unsigned flags)
{
	uint64_t t0 = rd_registry_now_ns();
	int ret = call_once(e, path, body, resp, deadline, flags);

	rd_registry_observe(e->r, path_op(path), t0, ret);
	return ret;
}

/*
 * POST @body (JSON) to @path, trying each endpoint in turn while none
 * answers, re-authenticating once when etcd says the token is invalid or
 * expired. On 0, *resp is the parsed answer (a streaming endpoint's
 * {"result": ...} unwrapped). Errors: -ETIMEDOUT, -EHOSTUNREACH (no
 * endpoint answered), -EFBIG (an answer past RESP_MAX: what is under the
 * key range, not etcd, is the problem), -ECANCELED, -ENOLINK (lease not found), -EACCES
 * (auth or permission), -EIO (another error answer), -EBADMSG (not JSON).
 */
static int call_once(struct etcd *e, const char *path, json_t *body, json_t **resp,
		     uint64_t deadline, unsigned flags)
{
	char *text = json_dumps(body, JSON_COMPACT), msg[200];
	bool reauthed = false;
	int ret = -EHOSTUNREACH;

	*resp = NULL;
	if (!text)
		return -ENOMEM;
	for (int tries = 0; tries < e->nend;) {
		uint64_t now = now_ns(), until = now + ATTEMPT_MS * MS;
		struct buf b = { 0 };
		long code;

		ret = http(e, path, text, !(flags & CALL_NOAUTH), &b, &code,
			   until < deadline ? until : deadline);
		if (ret == -EHOSTUNREACH || (ret == -ETIMEDOUT && now_ns() < deadline)) {
			bool tls = !strncmp(e->endpoints[e->cur], "https:", 6);

			etcd_note_down(e, "%s%s: %s%s", e->endpoints[e->cur], path,
				  e->errbuf[0] ? e->errbuf : "no answer",
				  tls && !e->cert[0] ? " (no client certificate is configured: if etcd runs "
				  "with --client-cert-auth, set registry.cert and registry.key)" : "");
			free(b.p);
			e->cur = (e->cur + 1) % e->nend;
			tries++;
			ret = -EHOSTUNREACH;
			continue;
		}
		if (ret) {
			free(b.p);
			break;
		}
		etcd_note_up(e);
		if (code == 200) {
			json_error_t jerr;
			json_t *o = b.p ? json_loadb(b.p, b.len, 0, &jerr) : NULL;

			free(b.p);
			if (json_is_object(json_object_get(o, "result"))) {
				json_t *in = json_incref(json_object_get(o, "result"));

				json_decref(o);
				o = in;
			}
			ret = json_is_object(o) ? 0 : -EBADMSG;
			if (ret)
				json_decref(o);
			else
				*resp = o;
			break;
		}
		etcd_error_text(&b, msg, sizeof(msg));
		snprintf(e->answer, sizeof(e->answer), "%s", msg);
		free(b.p);
		if (code == 401 && strstr(msg, "token") && e->user[0] && !(flags & CALL_NOAUTH) &&
		    !reauthed) {
			/* simple tokens expire, and die with the member that issued them */
			reauthed = true;
			e->token[0] = 0;
			ret = etcd_authenticate(e, deadline);
			if (ret)
				break;
			continue;
		}
		if (strstr(msg, "lease not found")) {
			ret = -ENOLINK; /* expected after a lease loss: the caller says so */
		} else if (strstr(msg, "user name is empty")) {
			etcd_note_err(e, "etcd has auth enabled: set registry.username and registry.password_file");
			ret = -EACCES;
		} else if (code == 401 || code == 403 || strstr(msg, "permission denied") ||
			   strstr(msg, "authentication failed")) {
			if (!(flags & CALL_NOAUTH)) /* etcd_authenticate() says it */
				etcd_note_err(e, "%s: %s", path, msg);
			ret = -EACCES;
		} else {
			etcd_note_err(e, "%s: HTTP %ld: %s", path, code, msg);
			ret = -EIO;
		}
		break;
	}
	free(text);
	return ret;
}

json_t *etcd_kv_body(const void *key, size_t klen, const void *end, size_t elen)
{
	json_t *o = json_object();
	char *k = etcd_b64(key, klen);

	json_object_set_new(o, "key", json_string(k ? k : ""));
	free(k);
	if (end) {
		char *re = etcd_b64(end, elen);

		json_object_set_new(o, "range_end", json_string(re ? re : ""));
		free(re);
	}
	return o;
}

json_t *etcd_key_body(struct etcd *e, const char *rel)
{
	char full[sizeof(e->prefix) + KEY_MAX + 2];

	snprintf(full, sizeof(full), "%s/%s", e->prefix, rel);
	return etcd_kv_body(full, strlen(full), NULL, 0);
}

int64_t etcd_header_rev(json_t *resp)
{
	int64_t rev = 0;

	if (!etcd_get_i64(json_object_get(resp, "header"), "revision", &rev) || rev < 0)
		return 0;
	return rev;
}

/* ---- auth and lease --------------------------------------------------------- */

int etcd_authenticate(struct etcd *e, uint64_t deadline)
{
	json_t *o = json_object(), *resp, *t;
	int ret;

	json_object_set_new(o, "name", json_string(e->user));
	json_object_set_new(o, "password", json_string(e->password));
	ret = etcd_call(e, "/v3/auth/authenticate", o, &resp, deadline, CALL_NOAUTH);
	json_decref(o);
	if (ret) {
		if (ret == -EACCES)
			etcd_note_err(e, "authentication as '%s' failed: %s (registry.username, "
				 "registry.password_file)", e->user, e->answer);
		return ret;
	}
	t = json_object_get(resp, "token");
	if (json_is_string(t) && json_string_length(t) > 0 &&
	    json_string_length(t) < sizeof(e->token)) {
		snprintf(e->token, sizeof(e->token), "%s", json_string_value(t));
		/* a header value: nothing that could end the line */
		for (char *p = e->token; *p; p++)
			if ((unsigned char)*p < 0x20)
				*p = '?';
	} else {
		ret = -EBADMSG;
	}
	json_decref(resp);
	return ret;
}

static void set_lease_until(struct etcd *e, int64_t ttl)
{
	uint64_t now = now_ns();

	if (ttl > 3600)
		ttl = 3600; /* etcd's word for it, within reason */

	atomic_store(&e->a_lease_until, now + (uint64_t)ttl * 1000 * MS);
	e->next_keepalive_ns = now + (uint64_t)e->ttl * 1000 * MS / 3;
}

static void mark_own_unsynced(struct etcd *e)
{
	pthread_mutex_lock(&e->lock);
	for (unsigned i = 0; i < NBUCKETS; i++)
		for (struct ent *x = e->buckets[i]; x; x = x->next)
			if (x->own)
				x->o_synced = false;
	e->need_reconcile = true;
	pthread_mutex_unlock(&e->lock);
	e->reconcile_ns = 0;
}

int etcd_grant(struct etcd *e)
{
	json_t *o = json_object(), *resp, *id;
	int64_t ttl = 0;
	int ret;

	json_object_set_new(o, "TTL", json_integer(e->ttl));
	ret = etcd_call(e, "/v3/lease/grant", o, &resp, now_ns() + ATTEMPT_MS * MS, 0);
	json_decref(o);
	if (ret)
		return ret;
	id = json_object_get(resp, "ID");
	if (json_is_string(id) && json_string_length(id) > 0 &&
	    json_string_length(id) < sizeof(e->lease) && etcd_get_i64(resp, "TTL", &ttl) && ttl > 0) {
		snprintf(e->lease, sizeof(e->lease), "%s", json_string_value(id));
		set_lease_until(e, ttl);
	} else {
		ret = -EBADMSG;
	}
	json_decref(resp);
	if (ret)
		return ret;
	if (e->granted_once) {
		RD_LOG(WARNING, "etcd: new lease %s: this node's records go under it again", e->lease);
		e->republish_pending = true;
		/* meanwhile a roshmd of another host may have taken our name */
		e->name_look = true;
	} else {
		RD_LOG(INFO, "etcd: lease %s, TTL %u s", e->lease, e->ttl);
	}
	e->granted_once = true;
	mark_own_unsynced(e);
	return 0;
}

void etcd_lease_lost(struct etcd *e, const char *why)
{
	RD_LOG(WARNING, "etcd: lease %s is gone (%s): taking a new one", e->lease, why);
	if (e->lease[0]) /* once per lease */
		RD_STAT_ADD(e->r->stats.lease_lost, 1);
	e->lease[0] = 0;
	atomic_store(&e->a_lease_until, 0);
}

void etcd_keepalive(struct etcd *e)
{
	json_t *o = json_object(), *resp;
	uint64_t now = now_ns(), wait = (uint64_t)e->ttl * 1000 * MS / 3;
	int64_t ttl = 0;
	int ret;

	json_object_set_new(o, "ID", json_string(e->lease));
	ret = etcd_call(e, "/v3/lease/keepalive", o, &resp, now + (wait < ATTEMPT_MS * MS ? wait : ATTEMPT_MS * MS),
		   0);
	json_decref(o);
	if (ret == 0) {
		if (etcd_get_i64(resp, "TTL", &ttl) && ttl > 0)
			set_lease_until(e, ttl);
		else
			etcd_lease_lost(e, "keepalive answered without a TTL");
		json_decref(resp);
		return;
	}
	if (ret == -ENOLINK) {
		etcd_lease_lost(e, "etcd does not know it");
		return;
	}
	/* not answered: try again soon; past its TTL it is gone for us */
	e->next_keepalive_ns = now_ns() + 500 * MS;
	if (now_ns() >= atomic_load(&e->a_lease_until))
		etcd_lease_lost(e, "not kept alive within its TTL");
}
