// SPDX-License-Identifier: MIT
/*
 * `etcd` registry backend over etcd's v3 JSON gateway (kv, lease, watch and
 * auth endpoints) with libcurl, optionally over TLS with a client
 * certificate and with etcd auth (a token in the Authorization header).
 * Keys and values are base64, int64s are strings, and proto3 leaves out
 * default fields: an empty range has no "kvs", a lost lease's keepalive
 * answer has no "TTL", a PUT watch event has no "type".
 *
 * Every request runs in the backend's registry thread; the control thread
 * never waits on the network. The thread owns:
 * - the lease: granted with back-off until etcd answers (roshmd runs, not
 *   ready, meanwhile), kept alive every TTL/3. Every record this node writes
 *   is its desired state, remembered here (`own`), put under the lease, and
 *   put again after the lease was lost, a write failed, or someone else
 *   changed or deleted it;
 * - the watch: one streaming /v3/watch on the prefix, from the revision of
 *   a full range of the prefix, so no event is missed; on an error or a
 *   compaction, range and watch again;
 * - the cache of every record under the prefix, kept exact by the watch,
 *   that the control thread reads (under `lock`, never held across a
 *   network call). A record whose MAC does not verify is cached as bad
 *   (-EBADMSG) and never listed.
 * Completions and changes go back to the control thread through a queue and
 * an eventfd (dispatch()).
 *
 * Everything etcd sends is untrusted: answers are capped at 16 MiB, values
 * at 16 KiB, keys at 512 bytes, the cache at RD_REG_CACHE_MAX valid records
 * (and RD_REG_BAD_MAX that do not verify, apart).
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "roshmd.h"
#include "registry/registry.h"

#define RD_LOG_COMPONENT RD_LC_REGISTRY

#define MAX_ENDPOINTS 8
#define RESP_MAX (1u << 24)          /* a 16 MiB answer is not one we asked for */
#define KEY_MAX 512                  /* longer keys under the prefix are not ours */
#define PAGE_KEY_MAX 65536           /* any key etcd holds, for range paging */
#define NBUCKETS 16384
#define PAGE 500                     /* records per range page */
#define ATTEMPT_MS 2000              /* one HTTP attempt */
#define CONNECT_MS 1000
#define BACKOFF_MIN_MS 200
#define BACKOFF_MAX_MS 5000
#define CLOSE_MS 2000                /* close(): queued writes get this long */
#define REVOKE_MS 1000
#define MS 1000000ull

/* One key under the prefix. */
struct ent {
	struct ent *next;             /* hash chain */
	uint64_t seen;                /* resync generation that last saw it */
	/* the store, as the last range, watch event or answer to us told */
	bool s_present;
	int s_status;                 /* 0 or -EBADMSG */
	int64_t s_rev;                /* mod_revision of what s_* describes (or of its deletion) */
	uint8_t s_mac[32];            /* of a valid record: tells ours from someone else's */
	void *s_rec;                  /* struct rd_region_rec / rd_node_rec when s_status == 0 */
	/* this node's desired state under the key: what readers see while set */
	bool own, o_present, o_excl, o_synced;
	uint64_t o_gen;
	char *o_val;                  /* signed JSON */
	uint8_t o_mac[32];
	void *o_rec;
	unsigned pending;             /* our writes queued or in flight */
	bool region;                  /* regions/<t>/<n>, else nodes/<n> */
	char key[];                   /* relative to the prefix */
};

enum op { OP_PUT, OP_DEL, OP_FETCH };

struct req {
	struct req *next;
	enum op op;
	bool region, excl, internal;  /* internal: the thread's own (reconcile, clean-up) */
	uint64_t gen;                 /* own generation this write makes */
	uint64_t deadline_ns;
	char key[KEY_MAX];            /* relative */
	char *val;                    /* OP_PUT: signed JSON */
	uint8_t mac[32];
	void *rec;                    /* OP_PUT: the record; OP_FETCH: the answer */
	rd_reg_done_fn done;
	rd_reg_get_fn got;
	void *arg;
	int status;
};

struct buf {
	char *p;
	size_t len, cap;
};

struct etcd {
	struct rd_registry *r;
	/* set at open, read-only after */
	char endpoints[MAX_ENDPOINTS][128];
	int nend;
	char prefix[64];
	size_t plen;
	uint32_t ttl;
	uint64_t timeout_ns;
	char cacert[RD_PATH_MAX], cert[RD_PATH_MAX], key[RD_PATH_MAX];
	char user[128], password[256];
	int efd;
	pthread_t thread;
	CURLM *multi;                 /* curl_multi_wakeup() is the only call from another thread */
	atomic_bool stop;
	/* readiness, written by the thread */
	_Atomic uint64_t a_lease_until;
	atomic_bool a_synced;

	/* thread only */
	CURL *easy;                   /* the request in flight */
	CURL *watch;
	struct curl_slist *watch_hdr;
	struct buf wbuf;              /* watch stream, up to the next newline */
	bool watch_done, watch_failed, watch_created;
	int watch_err;                /* why it failed (metrics): -errno, 0 not an error */
	CURLcode watch_rc;
	uint64_t watch_start_ns;
	unsigned watch_backoff_ms;
	int cur;
	char token[1024];
	char lease[32];               /* int64 as a decimal string, "" when none */
	uint64_t next_keepalive_ns, retry_ns, reconcile_ns, sync_retry_ns;
	unsigned backoff_ms, sync_backoff_ms;
	bool synced, granted_once, republish_pending, cleaned, closing;
	int64_t watch_rev;
	uint64_t sweep_gen;
	char errbuf[CURL_ERROR_SIZE];
	char last_err[300];
	uint64_t last_err_ns, down_logged_ns;
	bool unreachable;
	char answer[200];             /* the last error answer's message */

	/* shared, under lock (recursive: list_regions' callback may call back) */
	pthread_mutex_t lock;
	struct ent *buckets[NBUCKETS];
	unsigned nent;
	unsigned nbad;                /* of them, records whose MAC did not verify */
	uint64_t cap_logged_ns;
	uint64_t gen;
	struct req *todo, **todo_tail;
	struct req *done, **done_tail;
	unsigned flags;               /* for dispatch(): RD_REG_CHANGED | RD_REG_REPUBLISHED */
	bool need_reconcile;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void note_err(struct etcd *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note_down(struct etcd *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* etcd answered with an error: one line per distinct problem (again after
 * 30 s), not one per retry. */
static void note_err(struct etcd *e, const char *fmt, ...)
{
	char msg[sizeof(e->last_err)];
	uint64_t now = now_ns();
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (strcmp(msg, e->last_err) || now - e->last_err_ns >= 30000 * MS) {
		RD_LOG(WARNING, "etcd: %s", msg);
		snprintf(e->last_err, sizeof(e->last_err), "%s", msg);
		e->last_err_ns = now;
	}
}

/* etcd did not answer (connection, TLS, timeout): a line when that starts,
 * then one every 30 s while it lasts, whatever curl says each time. */
static void note_down(struct etcd *e, const char *fmt, ...)
{
	uint64_t now = now_ns();
	char msg[300];
	va_list ap;

	if (e->unreachable && now - e->down_logged_ns < 30000 * MS)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	RD_LOG(WARNING, "etcd: %s%s", msg, e->unreachable ? " (still)" : "");
	e->unreachable = true;
	e->down_logged_ns = now;
}

static void note_up(struct etcd *e)
{
	if (!e->unreachable)
		return;
	RD_LOG(NOTICE, "etcd: %s answers again", e->endpoints[e->cur]);
	e->unreachable = false;
}

static void backoff(struct etcd *e)
{
	e->backoff_ms = e->backoff_ms ? e->backoff_ms * 2 : BACKOFF_MIN_MS;
	if (e->backoff_ms > BACKOFF_MAX_MS)
		e->backoff_ms = BACKOFF_MAX_MS;
	e->retry_ns = now_ns() + e->backoff_ms * MS;
}

static void signal_efd(struct etcd *e)
{
	uint64_t one = 1;

	if (write(e->efd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is already non-zero, dispatch() is due */
	}
}

/* ---- base64 ------------------------------------------------------------ */

static char *b64(const void *data, size_t len)
{
	char *out = malloc(4 * ((len + 2) / 3) + 1);

	if (out)
		EVP_EncodeBlock((unsigned char *)out, data, (int)len);
	return out;
}

/* @in decoded into *out (NUL-terminated); its length, or -1 (malformed, or
 * more than @max bytes). */
static int unb64(const char *in, size_t max, char **out)
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
static bool get_i64(json_t *o, const char *k, int64_t *v)
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

/* ---- the cache ------------------------------------------------------------ */

static uint32_t hash_key(const char *k)
{
	uint32_t h = 2166136261u;

	for (; *k; k++)
		h = (h ^ (uint8_t)*k) * 16777619u;
	return h;
}

static struct ent *ent_find(struct etcd *e, const char *key)
{
	for (struct ent *x = e->buckets[hash_key(key) % NBUCKETS]; x; x = x->next)
		if (!strcmp(x->key, key))
			return x;
	return NULL;
}

/* Found or created; NULL at the cap (which our own records do not count
 * against). Records that do not verify (@bad) have a small cap of their
 * own: junk written into etcd never takes the place of a valid record. */
static struct ent *ent_get(struct etcd *e, const char *key, bool region, bool own, bool bad)
{
	struct ent *x = ent_find(e, key), **b;
	size_t kl = strlen(key);

	if (x)
		return x;
	if (!own && bad && e->nbad >= RD_REG_BAD_MAX)
		return NULL; /* reads of it answer ENOENT, as for an absent record */
	if (!own && !bad && e->nent - e->nbad >= RD_REG_CACHE_MAX) {
		uint64_t now = now_ns();

		if (now - e->cap_logged_ns >= 60000 * MS || !e->cap_logged_ns) {
			RD_LOG(WARNING, "registry: more than %u records under %s: the rest are not cached "
			       "(reads of them answer ENOENT)", RD_REG_CACHE_MAX, e->prefix);
			e->cap_logged_ns = now;
		}
		return NULL;
	}
	x = calloc(1, sizeof(*x) + kl + 1);
	if (!x)
		return NULL;
	memcpy(x->key, key, kl + 1);
	x->region = region;
	b = &e->buckets[hash_key(key) % NBUCKETS];
	x->next = *b;
	*b = x;
	e->nent++;
	return x;
}

static void own_clear(struct ent *x)
{
	x->own = false;
	x->o_present = false;
	free(x->o_val);
	free(x->o_rec);
	x->o_val = NULL;
	x->o_rec = NULL;
}

/* Unlink and free @x when nothing is left in it. */
static void ent_maybe_free(struct etcd *e, struct ent *x)
{
	struct ent **pp;

	if (x->s_present || x->own || x->pending)
		return;
	for (pp = &e->buckets[hash_key(x->key) % NBUCKETS]; *pp; pp = &(*pp)->next)
		if (*pp == x) {
			*pp = x->next;
			break;
		}
	free(x->s_rec);
	free(x);
	e->nent--;
}

/* The store's view of @x becomes @present / @status / @rec (taken) at @rev. */
static void store_set(struct etcd *e, struct ent *x, bool present, int status, void *rec,
		      const uint8_t *mac, int64_t rev)
{
	bool was_bad = x->s_present && x->s_status, bad = present && status;

	e->nbad += (unsigned)bad - (unsigned)was_bad;
	free(x->s_rec);
	x->s_present = present;
	x->s_status = present ? status : 0;
	x->s_rec = present && !status ? rec : NULL;
	if (!(present && !status))
		free(rec);
	if (mac && present && !status)
		memcpy(x->s_mac, mac, 32);
	else
		memset(x->s_mac, 0, 32);
	x->s_rev = rev;
}

/* Whether the store still holds what this node wants under @x. */
static bool own_in_store(const struct ent *x)
{
	if (!x->o_present)
		return !x->s_present;
	return x->s_present && !x->s_status && !CRYPTO_memcmp(x->s_mac, x->o_mac, 32);
}

/* What readers see: our own desired state while we hold one, else the store's. */
static int ent_view(const struct ent *x, const void **rec)
{
	*rec = NULL;
	if (x->own) {
		*rec = x->o_rec;
		return x->o_present ? 0 : -ENOENT;
	}
	if (!x->s_present)
		return -ENOENT;
	if (x->s_status)
		return x->s_status;
	*rec = x->s_rec;
	return 0;
}

static size_t rec_size(bool region)
{
	return region ? sizeof(struct rd_region_rec) : sizeof(struct rd_node_rec);
}

static void rec_mac(struct rd_registry *r, bool region, const void *rec, uint8_t mac[32])
{
	char *canon = region ? rd_region_rec_to_json(rec) : rd_node_rec_to_json(rec);

	if (canon)
		rd_rec_mac(r->key, r->keylen, canon, strlen(canon), mac);
	else
		memset(mac, 0, 32);
	free(canon);
}

/* ---- completions -------------------------------------------------------- */

static void req_free(struct req *q)
{
	free(q->val);
	free(q->rec);
	free(q);
}

/*
 * @q is answered with @status (the store at @rev, when known): update the
 * key's store view and our own state, queue the completion for dispatch().
 */
static void finish(struct etcd *e, struct req *q, int status, int64_t rev)
{
	struct ent *x;
	bool own = false;

	pthread_mutex_lock(&e->lock);
	x = q->op == OP_FETCH ? NULL : ent_find(e, q->key);
	if (x) {
		bool ok = status == 0 || (status == -ENOENT && q->op == OP_DEL);

		own = x->own;
		x->pending--;
		if (ok) {
			if (x->own && x->o_gen == q->gen)
				x->o_synced = true;
			if (rev > x->s_rev) {
				store_set(e, x, q->op == OP_PUT, 0, q->rec, q->mac, rev);
				q->rec = NULL;
			}
		} else if (status == -EEXIST) {
			if (x->own && x->o_gen == q->gen) {
				RD_LOG(WARNING, "registry: %s is held by another node: not published",
				       q->key);
				own_clear(x);
			}
		} else if (x->own) {
			/* the store may not hold what we want: try again later */
			e->need_reconcile = true;
		}
		if (x->own && !x->o_present && x->o_synced && !x->pending)
			own_clear(x); /* deleted for good: the store's view is enough */
		ent_maybe_free(e, x);
	}
	/* the thread's own retries say nothing: the first failure was logged */
	if (status && status != -ENOENT && status != -EEXIST && q->op != OP_FETCH && !q->internal)
		RD_LOG(WARNING, "registry: %s %s: %s%s", q->op == OP_PUT ? "publishing" : "removing",
		       q->key, strerror(-status), own ? " (done when etcd answers again)" : "");
	if (q->internal || (!q->done && !q->got)) {
		req_free(q);
	} else {
		q->status = status;
		q->next = NULL;
		*e->done_tail = q;
		e->done_tail = &q->next;
		signal_efd(e);
	}
	pthread_mutex_unlock(&e->lock);
}

/* Queued requests past their deadline fail with -ETIMEDOUT. */
static void expire(struct etcd *e)
{
	uint64_t now = now_ns();
	struct req **pp, *q;

	pthread_mutex_lock(&e->lock);
	for (pp = &e->todo; (q = *pp);) {
		if (now < q->deadline_ns) {
			pp = &q->next;
			continue;
		}
		*pp = q->next;
		if (e->todo_tail == &q->next)
			e->todo_tail = pp;
		finish(e, q, -ETIMEDOUT, 0);
	}
	pthread_mutex_unlock(&e->lock);
}

static struct req *todo_pop(struct etcd *e)
{
	struct req *q;

	pthread_mutex_lock(&e->lock);
	q = e->todo;
	if (q) {
		e->todo = q->next;
		if (!e->todo)
			e->todo_tail = &e->todo;
	}
	pthread_mutex_unlock(&e->lock);
	return q;
}

static void todo_push_front(struct etcd *e, struct req *q)
{
	pthread_mutex_lock(&e->lock);
	q->next = e->todo;
	if (!e->todo)
		e->todo_tail = &q->next;
	e->todo = q;
	pthread_mutex_unlock(&e->lock);
}

/* ---- HTTP ------------------------------------------------------------------ */

static size_t collect(char *data, size_t size, size_t nmemb, void *arg)
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

static void common_opts(struct etcd *e, CURL *h)
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

static void watch_line(struct etcd *e, const char *s, size_t len);

static void watch_stop(struct etcd *e)
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
static void watch_reap(struct etcd *e, CURLcode rc)
{
	uint64_t now = now_ns();
	int err = e->watch_err;

	if (!e->watch_failed && !atomic_load(&e->stop))
		note_err(e, "watch on %s ended: %s", e->prefix,
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
	watch_stop(e);
	e->synced = false;
	e->sync_retry_ns = now + e->watch_backoff_ms * MS;
}

/* Drive every transfer once; returns @h's result (1 while in progress). A
 * finished watch is reaped here. */
static int drive(struct etcd *e, CURL *h)
{
	int running, q, ret = 1;
	CURLMsg *m;

	curl_multi_perform(e->multi, &running);
	while ((m = curl_multi_info_read(e->multi, &q))) {
		if (m->msg != CURLMSG_DONE)
			continue;
		if (h && m->easy_handle == h) {
			CURLcode rc = m->data.result;

			ret = rc == CURLE_OK ? 0 : rc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT : -EHOSTUNREACH;
			if (rc != CURLE_OK && !e->errbuf[0])
				snprintf(e->errbuf, sizeof(e->errbuf), "%s", curl_easy_strerror(rc));
		} else if (m->easy_handle == e->watch) {
			/* reaped after the loop: removing a handle ends its message */
			e->watch_done = true;
			e->watch_rc = m->data.result;
		}
	}
	if (e->watch_done && e->watch)
		watch_reap(e, e->watch_rc);
	return ret;
}

/*
 * POST @body to @path on the current endpoint, driving the watch meanwhile;
 * *code gets the HTTP status. 0 (etcd answered), -ETIMEDOUT (@deadline
 * passed), -EHOSTUNREACH (no answer: connection, TLS), -ECANCELED (close()
 * asked us to stop).
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
	common_opts(e, h);
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
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, ms);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, ms < CONNECT_MS ? ms : (long)CONNECT_MS);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, e->errbuf);
	curl_multi_add_handle(e->multi, h);
	while ((ret = drive(e, h)) == 1) {
		expire(e);
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
static void error_text(const struct buf *b, char *out, size_t len)
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

static int authenticate(struct etcd *e, uint64_t deadline);

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
static int call(struct etcd *e, const char *path, json_t *body, json_t **resp, uint64_t deadline,
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
 * endpoint answered), -ECANCELED, -ENOLINK (lease not found), -EACCES
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

			note_down(e, "%s%s: %s%s", e->endpoints[e->cur], path,
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
		note_up(e);
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
		error_text(&b, msg, sizeof(msg));
		snprintf(e->answer, sizeof(e->answer), "%s", msg);
		free(b.p);
		if (code == 401 && strstr(msg, "token") && e->user[0] && !(flags & CALL_NOAUTH) &&
		    !reauthed) {
			/* simple tokens expire, and die with the member that issued them */
			reauthed = true;
			e->token[0] = 0;
			ret = authenticate(e, deadline);
			if (ret)
				break;
			continue;
		}
		if (strstr(msg, "lease not found")) {
			ret = -ENOLINK; /* expected after a lease loss: the caller says so */
		} else if (strstr(msg, "user name is empty")) {
			note_err(e, "etcd has auth enabled: set registry.username and registry.password_file");
			ret = -EACCES;
		} else if (code == 401 || code == 403 || strstr(msg, "permission denied") ||
			   strstr(msg, "authentication failed")) {
			if (!(flags & CALL_NOAUTH)) /* authenticate() says it */
				note_err(e, "%s: %s", path, msg);
			ret = -EACCES;
		} else {
			note_err(e, "%s: HTTP %ld: %s", path, code, msg);
			ret = -EIO;
		}
		break;
	}
	free(text);
	return ret;
}

static json_t *kv_body(const void *key, size_t klen, const void *end, size_t elen)
{
	json_t *o = json_object();
	char *k = b64(key, klen);

	json_object_set_new(o, "key", json_string(k ? k : ""));
	free(k);
	if (end) {
		char *re = b64(end, elen);

		json_object_set_new(o, "range_end", json_string(re ? re : ""));
		free(re);
	}
	return o;
}

static json_t *key_body(struct etcd *e, const char *rel)
{
	char full[sizeof(e->prefix) + KEY_MAX + 2];

	snprintf(full, sizeof(full), "%s/%s", e->prefix, rel);
	return kv_body(full, strlen(full), NULL, 0);
}

static int64_t header_rev(json_t *resp)
{
	int64_t rev = 0;

	if (!get_i64(json_object_get(resp, "header"), "revision", &rev) || rev < 0)
		return 0;
	return rev;
}

/* ---- auth and lease --------------------------------------------------------- */

static int authenticate(struct etcd *e, uint64_t deadline)
{
	json_t *o = json_object(), *resp, *t;
	int ret;

	json_object_set_new(o, "name", json_string(e->user));
	json_object_set_new(o, "password", json_string(e->password));
	ret = call(e, "/v3/auth/authenticate", o, &resp, deadline, CALL_NOAUTH);
	json_decref(o);
	if (ret) {
		if (ret == -EACCES)
			note_err(e, "authentication as '%s' failed: %s (registry.username, "
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

static int grant(struct etcd *e)
{
	json_t *o = json_object(), *resp, *id;
	int64_t ttl = 0;
	int ret;

	json_object_set_new(o, "TTL", json_integer(e->ttl));
	ret = call(e, "/v3/lease/grant", o, &resp, now_ns() + ATTEMPT_MS * MS, 0);
	json_decref(o);
	if (ret)
		return ret;
	id = json_object_get(resp, "ID");
	if (json_is_string(id) && json_string_length(id) > 0 &&
	    json_string_length(id) < sizeof(e->lease) && get_i64(resp, "TTL", &ttl) && ttl > 0) {
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
	} else {
		RD_LOG(INFO, "etcd: lease %s, TTL %u s", e->lease, e->ttl);
	}
	e->granted_once = true;
	mark_own_unsynced(e);
	return 0;
}

static void lease_lost(struct etcd *e, const char *why)
{
	RD_LOG(WARNING, "etcd: lease %s is gone (%s): taking a new one", e->lease, why);
	if (e->lease[0]) /* once per lease */
		RD_STAT_ADD(e->r->stats.lease_lost, 1);
	e->lease[0] = 0;
	atomic_store(&e->a_lease_until, 0);
}

static void keepalive(struct etcd *e)
{
	json_t *o = json_object(), *resp;
	uint64_t now = now_ns(), wait = (uint64_t)e->ttl * 1000 * MS / 3;
	int64_t ttl = 0;
	int ret;

	json_object_set_new(o, "ID", json_string(e->lease));
	ret = call(e, "/v3/lease/keepalive", o, &resp, now + (wait < ATTEMPT_MS * MS ? wait : ATTEMPT_MS * MS),
		   0);
	json_decref(o);
	if (ret == 0) {
		if (get_i64(resp, "TTL", &ttl) && ttl > 0)
			set_lease_until(e, ttl);
		else
			lease_lost(e, "keepalive answered without a TTL");
		json_decref(resp);
		return;
	}
	if (ret == -ENOLINK) {
		lease_lost(e, "etcd does not know it");
		return;
	}
	/* not answered: try again soon; past its TTL it is gone for us */
	e->next_keepalive_ns = now_ns() + 500 * MS;
	if (now_ns() >= atomic_load(&e->a_lease_until))
		lease_lost(e, "not kept alive within its TTL");
}

/* ---- records from etcd --------------------------------------------------------- */

struct parsed {
	char rel[KEY_MAX];
	bool region, present;
	int status;                   /* 0 or -EBADMSG */
	int64_t rev;
	void *rec;                    /* malloc'd, when status == 0 */
	uint8_t mac[32];
	const char *why;
};

/* @rel as one of our keys: regions/<tenant>/<name> (@a, @b) or nodes/<node> (@a). */
static bool classify(const char *rel, bool *region, char *a, char *b)
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
static int parse_kv(struct etcd *e, json_t *kv, bool del, struct parsed *p)
{
	struct rd_registry *r = e->r;
	char *raw, *val, a[ROSHM_NAME_MAX], b[ROSHM_NAME_MAX];
	json_t *k = json_object_get(kv, "key"), *v;
	int n;

	memset(p, 0, sizeof(*p));
	if (!json_is_string(k) || (n = unb64(json_string_value(k), KEY_MAX, &raw)) < 0)
		return -1;
	if ((size_t)n != strlen(raw) || (size_t)n <= e->plen + 1 || memcmp(raw, e->prefix, e->plen) ||
	    raw[e->plen] != '/') {
		free(raw);
		return -1;
	}
	snprintf(p->rel, sizeof(p->rel), "%s", raw + e->plen + 1);
	free(raw);
	if (!classify(p->rel, &p->region, a, b) || !get_i64(kv, "mod_revision", &p->rev) || p->rev <= 0)
		return -1;
	p->present = !del;
	if (del)
		return 0;
	p->status = -EBADMSG;
	v = json_object_get(kv, "value");
	if (!json_is_string(v) || (n = unb64(json_string_value(v), RD_REC_MAX, &val)) < 0) {
		p->why = "value absent, not base64, or larger than 16 KiB";
		return 0;
	}
	p->rec = malloc(rec_size(p->region));
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
		rec_mac(r, p->region, p->rec, p->mac);
	}
	return 0;
}

/*
 * @p into the cache: only if newer than what the cache holds (a range
 * replaces: @force, and marks the key seen in resync generation @gen).
 * Someone else changing one of our own records makes us put it back.
 */
static void apply(struct etcd *e, struct parsed *p, bool force, uint64_t gen)
{
	struct ent *x;
	bool changed, bad_news = false;

	pthread_mutex_lock(&e->lock);
	x = p->present ? ent_get(e, p->rel, p->region, false, p->status != 0) : ent_find(e, p->rel);
	if (!x || (!force && p->rev <= x->s_rev)) {
		pthread_mutex_unlock(&e->lock);
		free(p->rec);
		return;
	}
	changed = x->s_present != p->present || x->s_status != p->status ||
		  (p->present && !p->status && CRYPTO_memcmp(x->s_mac, p->mac, 32));
	bad_news = changed && p->present && p->status;
	store_set(e, x, p->present, p->status, p->rec, p->mac, p->rev);
	p->rec = NULL;
	if (force)
		x->seen = gen;
	if (x->own && x->o_synced && !x->pending && !own_in_store(x)) {
		x->o_synced = false;
		e->need_reconcile = true;
	}
	if (changed) {
		e->flags |= RD_REG_CHANGED;
		signal_efd(e);
	}
	ent_maybe_free(e, x);
	pthread_mutex_unlock(&e->lock);
	if (bad_news)
		rd_registry_log_bad(e->r, p->rel, p->why);
}

/* ---- the watch --------------------------------------------------------------- */

static size_t watch_data(char *data, size_t size, size_t nmemb, void *arg)
{
	struct etcd *e = arg;
	size_t n = size * nmemb;
	char *nl;

	if (collect(data, size, nmemb, &e->wbuf) != n) {
		note_err(e, "watch message larger than 16 MiB: watching again");
		e->watch_failed = true;
		e->watch_err = -EBADMSG;
		return 0; /* ends the transfer */
	}
	/* the gateway writes one JSON object per line */
	while (e->wbuf.len && (nl = memchr(e->wbuf.p, '\n', e->wbuf.len))) {
		size_t l = (size_t)(nl - e->wbuf.p);

		if (l)
			watch_line(e, e->wbuf.p, l);
		memmove(e->wbuf.p, nl + 1, e->wbuf.len - l - 1);
		e->wbuf.len -= l + 1;
		e->wbuf.p[e->wbuf.len] = 0;
		if (e->watch_failed)
			return 0;
	}
	return n;
}

static void watch_line(struct etcd *e, const char *s, size_t len)
{
	json_error_t jerr;
	json_t *o = json_loadb(s, len, 0, &jerr), *res, *evs, *ev;
	int64_t rev = 0;
	size_t i;

	if (!json_is_object(o)) {
		note_err(e, "watch: a message that is not JSON: watching again");
		e->watch_failed = true;
		e->watch_err = -EBADMSG;
		goto out;
	}
	if (json_object_get(o, "error")) {
		struct buf b = { .p = (char *)s, .len = len };
		char msg[200];

		error_text(&b, msg, sizeof(msg));
		if (strstr(msg, "token"))
			e->token[0] = 0;
		note_err(e, "watch: %s", msg);
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

		get_i64(res, "compact_revision", &compact);
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
			note_err(e, "watch canceled: %.150s", w);
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

		if (parse_kv(e, json_object_get(ev, "kv"), del, &p) == 0)
			apply(e, &p, false, 0);
	}
	if (get_i64(json_object_get(res, "header"), "revision", &rev) && rev > e->watch_rev)
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
	cr = kv_body(key, strlen(key), end, strlen(end));
	snprintf(rev, sizeof(rev), "%lld", (long long)(e->watch_rev + 1));
	json_object_set_new(cr, "start_revision", json_string(rev));
	w = json_object();
	json_object_set_new(w, "create_request", cr);
	body = json_dumps(w, JSON_COMPACT);
	json_decref(w);
	e->watch = curl_easy_init();
	if (!body || !e->watch) {
		free(body);
		watch_stop(e);
		return -ENOMEM;
	}
	snprintf(url, sizeof(url), "%s/v3/watch", e->endpoints[e->cur]);
	e->watch_hdr = curl_slist_append(NULL, "Content-Type: application/json");
	if (e->token[0]) {
		snprintf(ah, sizeof(ah), "Authorization: %s", e->token);
		e->watch_hdr = curl_slist_append(e->watch_hdr, ah);
	}
	common_opts(e, e->watch);
	curl_easy_setopt(e->watch, CURLOPT_URL, url);
	curl_easy_setopt(e->watch, CURLOPT_HTTPHEADER, e->watch_hdr);
	curl_easy_setopt(e->watch, CURLOPT_COPYPOSTFIELDS, body);
	curl_easy_setopt(e->watch, CURLOPT_WRITEFUNCTION, watch_data);
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
			store_set(e, x, false, 0, NULL, NULL, rev);
			e->flags |= RD_REG_CHANGED;
			if (x->own && x->o_synced && !x->pending && !own_in_store(x)) {
				x->o_synced = false;
				e->need_reconcile = true;
			}
			ent_maybe_free(e, x);
		}
	}
	pthread_mutex_unlock(&e->lock);
}

/* Records of this node that this instance did not write: left by an earlier roshmd. */
static void clean_leftovers(struct etcd *e);

/* Range the whole prefix (in pages, at one revision), replace the cache, watch from there. */
static int resync(struct etcd *e)
{
	char start[sizeof(e->prefix) + 2], end[sizeof(e->prefix) + 2];
	char *from = NULL;
	size_t flen;
	uint64_t gen = ++e->sweep_gen;
	int64_t rev = 0;
	bool more = true;
	int ret = 0;

	watch_stop(e);
	e->synced = false;
	snprintf(start, sizeof(start), "%s/", e->prefix);
	snprintf(end, sizeof(end), "%s0", e->prefix);
	from = strdup(start);
	flen = strlen(start);
	while (more && from) {
		json_t *o = kv_body(from, flen, end, strlen(end)), *resp, *kvs, *kv;
		size_t i;

		json_object_set_new(o, "limit", json_integer(PAGE));
		if (rev)
			json_object_set_new(o, "revision", json_integer(rev));
		ret = call(e, "/v3/kv/range", o, &resp, now_ns() + ATTEMPT_MS * MS, 0);
		json_decref(o);
		if (ret)
			break;
		if (!rev)
			rev = header_rev(resp);
		kvs = json_object_get(resp, "kvs");
		more = json_is_true(json_object_get(resp, "more")) && json_array_size(kvs) > 0;
		if (!rev) {
			ret = -EBADMSG;
			json_decref(resp);
			break;
		}
		json_array_foreach(kvs, i, kv) {
			struct parsed p;

			if (parse_kv(e, kv, false, &p) == 0)
				apply(e, &p, true, gen);
		}
		if (more) {
			/* the next page starts just after the last key */
			json_t *last = json_object_get(json_array_get(kvs, json_array_size(kvs) - 1), "key");
			char *raw = NULL;
			int n = json_is_string(last) ? unb64(json_string_value(last), PAGE_KEY_MAX, &raw) : -1;

			free(from);
			from = NULL;
			if (n >= 0) {
				from = malloc((size_t)n + 1);
				if (from) {
					memcpy(from, raw, (size_t)n);
					from[n] = 0; /* key + "\0": the smallest key after it */
					flen = (size_t)n + 1;
				}
			}
			free(raw);
			if (!from)
				ret = -EBADMSG;
		}
		json_decref(resp);
	}
	free(from);
	if (ret)
		return ret;
	sweep(e, gen, rev);
	e->watch_rev = rev;
	e->synced = true;
	pthread_mutex_lock(&e->lock);
	e->flags |= RD_REG_CHANGED;
	signal_efd(e);
	pthread_mutex_unlock(&e->lock);
	if (!e->cleaned) {
		e->cleaned = true;
		clean_leftovers(e);
	}
	ret = watch_start(e);
	if (ret)
		e->synced = false;
	return ret;
}

/* ---- writes ------------------------------------------------------------------- */

static int put_plain(struct etcd *e, struct req *q, int64_t *rev)
{
	json_t *o = key_body(e, q->key), *resp;
	char *v = b64(q->val, strlen(q->val));
	int ret;

	json_object_set_new(o, "value", json_string(v ? v : ""));
	free(v);
	json_object_set_new(o, "lease", json_string(e->lease));
	ret = call(e, "/v3/kv/put", o, &resp, q->deadline_ns, 0);
	json_decref(o);
	if (!ret) {
		*rev = header_rev(resp);
		json_decref(resp);
	}
	return ret;
}

/* A txn: put @q if the key's @target ("CREATE" or "MOD") revision is @cmp;
 * else *cur gets the key's kv (or NULL when absent). 1 when put, 0 when not. */
static int put_if(struct etcd *e, struct req *q, const char *target, int64_t cmp, int64_t *rev,
		  json_t **cur)
{
	json_t *t = json_object(), *c = key_body(e, q->key), *put = key_body(e, q->key), *resp;
	json_t *rr, *arr;
	char *v = b64(q->val, strlen(q->val)), n[32];
	int ret;

	*cur = NULL;
	snprintf(n, sizeof(n), "%lld", (long long)cmp);
	json_object_set_new(c, "result", json_string("EQUAL"));
	json_object_set_new(c, "target", json_string(target));
	json_object_set_new(c, !strcmp(target, "CREATE") ? "create_revision" : "mod_revision", json_string(n));
	json_object_set_new(put, "value", json_string(v ? v : ""));
	free(v);
	json_object_set_new(put, "lease", json_string(e->lease));
	json_object_set_new(t, "compare", json_pack("[o]", c));
	json_object_set_new(t, "success", json_pack("[{s:o}]", "request_put", put));
	json_object_set_new(t, "failure", json_pack("[{s:o}]", "request_range", key_body(e, q->key)));
	ret = call(e, "/v3/kv/txn", t, &resp, q->deadline_ns, 0);
	json_decref(t);
	if (ret)
		return ret;
	if (json_is_true(json_object_get(resp, "succeeded"))) {
		*rev = header_rev(resp);
		ret = 1;
	} else {
		rr = json_object_get(json_array_get(json_object_get(resp, "responses"), 0), "response_range");
		arr = json_object_get(rr, "kvs");
		if (json_array_size(arr))
			*cur = json_incref(json_array_get(arr, 0));
		ret = 0;
	}
	json_decref(resp);
	return ret;
}

/*
 * RD_REG_EXCL: create the key if nobody holds it; overwrite it if we hold it,
 * or if what holds it is not a valid record; -EEXIST if a valid record of
 * another node does. Each overwrite compares the revision it read, so a
 * record written in between is looked at again.
 */
static int put_excl(struct etcd *e, struct req *q, int64_t *rev)
{
	const char *target = "CREATE";
	int64_t cmp = 0;

	for (int round = 0; round < 5; round++) {
		json_t *cur;
		struct parsed p;
		int ret = put_if(e, q, target, cmp, rev, &cur);

		if (ret < 0)
			return ret;
		if (ret == 1)
			return 0;
		if (!cur) {
			/* deleted in between: create it */
			target = "CREATE";
			cmp = 0;
			continue;
		}
		ret = parse_kv(e, cur, false, &p);
		json_decref(cur);
		if (ret)
			return -EBADMSG;
		if (!p.status && p.region &&
		    strcmp(((struct rd_region_rec *)p.rec)->node, e->r->node)) {
			free(p.rec);
			return -EEXIST;
		}
		free(p.rec);
		target = "MOD";
		cmp = p.rev;
	}
	return -EAGAIN;
}

static int del_key(struct etcd *e, struct req *q, int64_t *rev)
{
	json_t *o = key_body(e, q->key), *resp;
	int64_t n = 0;
	int ret = call(e, "/v3/kv/deleterange", o, &resp, q->deadline_ns, 0);

	json_decref(o);
	if (ret)
		return ret;
	*rev = header_rev(resp);
	if (get_i64(resp, "deleted", &n) && n == 0)
		ret = -ENOENT;
	json_decref(resp);
	return ret;
}

static int fetch(struct etcd *e, struct req *q)
{
	json_t *o = key_body(e, q->key), *resp, *kvs;
	struct parsed p;
	int ret = call(e, "/v3/kv/range", o, &resp, q->deadline_ns, 0);

	json_decref(o);
	if (ret)
		return ret;
	kvs = json_object_get(resp, "kvs");
	if (!json_array_size(kvs)) {
		ret = -ENOENT;
	} else if (parse_kv(e, json_array_get(kvs, 0), false, &p)) {
		ret = -EBADMSG;
	} else {
		ret = p.status;
		if (!ret) {
			q->rec = malloc(sizeof(struct rd_region_rec));
			if (q->rec)
				memcpy(q->rec, p.rec, sizeof(struct rd_region_rec));
			else
				ret = -ENOMEM;
		}
		apply(e, &p, false, 0); /* the cache learns it too */
	}
	json_decref(resp);
	return ret;
}

/* Run @q: 0 or -errno; *rev is the store revision of the change. */
static int run(struct etcd *e, struct req *q, int64_t *rev)
{
	*rev = 0;
	switch (q->op) {
	case OP_PUT:
		return q->excl ? put_excl(e, q, rev) : put_plain(e, q, rev);
	case OP_DEL:
		return del_key(e, q, rev);
	case OP_FETCH:
		return fetch(e, q);
	}
	return -EINVAL;
}

/* A queued request of the control thread. */
static void run_queued(struct etcd *e, struct req *q)
{
	int64_t rev;
	int ret = run(e, q, &rev);

	if (ret == -EHOSTUNREACH && now_ns() < q->deadline_ns) {
		/* nothing answered yet: again in a moment, until its deadline */
		todo_push_front(e, q);
		e->retry_ns = now_ns() + 250 * MS;
		return;
	}
	if (ret == -EHOSTUNREACH)
		ret = -ETIMEDOUT; /* nothing answered within registry.timeout_ms (an
				   * attempt cut short by the deadline says so too) */
	if (ret == -ENOLINK) {
		lease_lost(e, "a put was refused for it");
		todo_push_front(e, q); /* again under the next lease */
		return;
	}
	if (ret == -ECANCELED && !e->closing) {
		todo_push_front(e, q); /* close() answers it */
		return;
	}
	finish(e, q, ret, rev);
}

/* Our own state under @x as an internal request (lock held). */
static struct req *own_req(struct etcd *e, struct ent *x)
{
	struct req *q = calloc(1, sizeof(*q));

	if (!q)
		return NULL;
	q->internal = true;
	q->region = x->region;
	q->excl = x->o_excl;
	q->gen = x->o_gen;
	q->op = x->o_present ? OP_PUT : OP_DEL;
	q->deadline_ns = now_ns() + e->timeout_ns;
	snprintf(q->key, sizeof(q->key), "%s", x->key);
	if (x->o_present) {
		q->val = strdup(x->o_val);
		q->rec = malloc(rec_size(x->region));
		if (!q->val || !q->rec) {
			req_free(q);
			return NULL;
		}
		memcpy(q->rec, x->o_rec, rec_size(x->region));
		memcpy(q->mac, x->o_mac, 32);
	}
	x->pending++;
	return q;
}

/* Put back everything of ours the store may not hold (lease lost, a write
 * that failed, someone else's change). */
static void reconcile(struct etcd *e)
{
	struct req *list = NULL, **tail = &list, *q;
	bool failed = false, all = true;

	pthread_mutex_lock(&e->lock);
	e->need_reconcile = false;
	for (unsigned i = 0; i < NBUCKETS; i++)
		for (struct ent *x = e->buckets[i]; x; x = x->next)
			if (x->own && !x->o_synced && !x->pending && (q = own_req(e, x))) {
				*tail = q;
				tail = &q->next;
			}
	pthread_mutex_unlock(&e->lock);
	while ((q = list)) {
		int64_t rev;
		int ret;

		list = q->next;
		ret = failed ? -EHOSTUNREACH : run(e, q, &rev);
		if (ret == -ENOLINK)
			lease_lost(e, "a put was refused for it");
		if (ret && ret != -ENOENT && ret != -EEXIST) {
			failed = true;
			all = false;
		}
		finish(e, q, ret, ret && ret != -ENOENT ? 0 : rev);
	}
	if (failed) {
		pthread_mutex_lock(&e->lock);
		e->need_reconcile = true;
		pthread_mutex_unlock(&e->lock);
		e->reconcile_ns = now_ns() + 1000 * MS;
	} else {
		/* someone rewriting our records in a loop gets one answer per 100 ms */
		e->reconcile_ns = now_ns() + 100 * MS;
	}
	if (all && e->republish_pending) {
		e->republish_pending = false;
		RD_LOG(NOTICE, "etcd: every record of node %s is back, under lease %s", e->r->node,
		       e->lease);
		pthread_mutex_lock(&e->lock);
		e->flags |= RD_REG_REPUBLISHED;
		signal_efd(e);
		pthread_mutex_unlock(&e->lock);
	}
}

static void clean_leftovers(struct etcd *e)
{
	struct req *list = NULL, *q;

	pthread_mutex_lock(&e->lock);
	for (unsigned i = 0; i < NBUCKETS; i++)
		for (struct ent *x = e->buckets[i]; x; x = x->next) {
			const char *node;

			if (x->own || !x->s_present || x->s_status)
				continue;
			node = x->region ? ((struct rd_region_rec *)x->s_rec)->node :
					   ((struct rd_node_rec *)x->s_rec)->node;
			if (strcmp(node, e->r->node))
				continue;
			q = calloc(1, sizeof(*q));
			if (!q)
				break;
			q->internal = true;
			q->op = OP_DEL;
			q->deadline_ns = now_ns() + e->timeout_ns;
			snprintf(q->key, sizeof(q->key), "%s", x->key);
			x->pending++;
			q->next = list;
			list = q;
		}
	pthread_mutex_unlock(&e->lock);
	while ((q = list)) {
		int64_t rev;
		int ret;

		list = q->next;
		RD_LOG(INFO, "registry: removing %s left by an earlier roshmd on this node", q->key);
		ret = run(e, q, &rev);
		finish(e, q, ret, ret ? 0 : rev);
	}
}

/* ---- the thread ------------------------------------------------------------------ */

/* One step of network work, if any is due: true when it did some. */
static bool step(struct etcd *e)
{
	uint64_t now = now_ns();
	struct req *q;
	int ret;

	if (now < e->retry_ns)
		return false;
	if (e->lease[0] && now >= atomic_load(&e->a_lease_until))
		lease_lost(e, "not kept alive within its TTL"); /* whatever etcd thinks of it */
	if (e->user[0] && !e->token[0]) {
		ret = authenticate(e, now + ATTEMPT_MS * MS);
		if (ret)
			backoff(e);
		return true;
	}
	if (!e->lease[0]) {
		ret = grant(e);
		if (ret) {
			if (ret != -EHOSTUNREACH && ret != -EACCES)
				note_err(e, "cannot take a lease: %s", strerror(-ret));
			backoff(e);
		} else {
			e->backoff_ms = 0;
		}
		return true;
	}
	if (now >= e->next_keepalive_ns) {
		keepalive(e);
		return true;
	}
	if (e->synced && e->watch && !e->watch_created && now - e->watch_start_ns > 5000 * MS) {
		/* etcd accepted the watch but never said it was created */
		note_err(e, "watch on %s not created within 5 s: watching again", e->prefix);
		e->watch_failed = true;
		watch_reap(e, CURLE_OK);
		return true;
	}
	/* writes do not need the cache: a watch being set up again waits alone */
	if (!e->synced && now >= e->sync_retry_ns) {
		ret = resync(e);
		if (ret) {
			e->sync_backoff_ms = e->sync_backoff_ms ? e->sync_backoff_ms * 2 : BACKOFF_MIN_MS;
			if (e->sync_backoff_ms > BACKOFF_MAX_MS)
				e->sync_backoff_ms = BACKOFF_MAX_MS;
			e->sync_retry_ns = now_ns() + e->sync_backoff_ms * MS;
		} else {
			e->sync_backoff_ms = 0;
		}
		return true;
	}
	q = todo_pop(e);
	if (q) {
		run_queued(e, q);
		return true;
	}
	pthread_mutex_lock(&e->lock);
	ret = e->need_reconcile && now >= e->reconcile_ns;
	pthread_mutex_unlock(&e->lock);
	if (ret) {
		reconcile(e);
		return true;
	}
	return false;
}

static void shutdown_thread(struct etcd *e)
{
	uint64_t until = now_ns() + (e->timeout_ns < CLOSE_MS * MS ? e->timeout_ns : CLOSE_MS * MS);
	struct req *q;

	e->closing = true;
	/* What the control thread asked last (unpublish, drain) gets a bounded
	 * chance; then the lease goes, and every record of ours with it. */
	while ((q = todo_pop(e))) {
		int64_t rev;
		int ret = -ECANCELED;

		if (e->lease[0] && (!e->user[0] || e->token[0]) && now_ns() < until) {
			if (q->deadline_ns > until)
				q->deadline_ns = until;
			ret = run(e, q, &rev);
		}
		finish(e, q, ret, ret ? 0 : rev);
	}
	watch_stop(e);
	if (e->lease[0]) {
		json_t *o = json_object(), *resp;

		json_object_set_new(o, "ID", json_string(e->lease));
		if (call(e, "/v3/lease/revoke", o, &resp, now_ns() + REVOKE_MS * MS, 0) == 0)
			json_decref(resp);
		json_decref(o);
		e->lease[0] = 0;
	}
}

static void *thread_main(void *arg)
{
	struct etcd *e = arg;

	while (!atomic_load(&e->stop)) {
		expire(e);
		if (step(e))
			continue;
		curl_multi_poll(e->multi, NULL, 0, 100, NULL);
		drive(e, NULL);
	}
	shutdown_thread(e);
	return NULL;
}

/* ---- the control thread's side ------------------------------------------------------ */

static struct req *new_req(struct etcd *e, enum op op, bool region, const char *key)
{
	struct req *q = calloc(1, sizeof(*q));

	if (!q)
		return NULL;
	q->op = op;
	q->region = region;
	q->deadline_ns = now_ns() + e->timeout_ns;
	snprintf(q->key, sizeof(q->key), "%s", key);
	return q;
}

static void enqueue(struct etcd *e, struct req *q)
{
	q->next = NULL;
	*e->todo_tail = q;
	e->todo_tail = &q->next;
}

/* Queue a write of ours (@val NULL: delete); readers see it at once. */
static int submit_write(struct etcd *e, struct req *q, const void *rec)
{
	struct ent *x;
	char *oval = NULL;
	void *orec = NULL;

	RD_LOG(DEBUG, "registry: etcd: %s %s", q->op == OP_PUT ? "put" : "delete", q->key);

	if (q->op == OP_PUT) {
		oval = strdup(q->val);
		orec = malloc(rec_size(q->region));
		if (!oval || !orec) {
			free(oval);
			free(orec);
			req_free(q);
			return -ENOMEM;
		}
		memcpy(orec, rec, rec_size(q->region));
	}
	pthread_mutex_lock(&e->lock);
	x = ent_get(e, q->key, q->region, true, false);
	if (!x) {
		pthread_mutex_unlock(&e->lock);
		free(oval);
		free(orec);
		req_free(q);
		return -ENOMEM;
	}
	own_clear(x);
	x->own = true;
	x->o_present = q->op == OP_PUT;
	x->o_excl = q->excl;
	x->o_synced = false;
	x->o_val = oval;
	x->o_rec = orec;
	memcpy(x->o_mac, q->mac, 32);
	x->o_gen = q->gen = ++e->gen;
	x->pending++;
	enqueue(e, q);
	pthread_mutex_unlock(&e->lock);
	curl_multi_wakeup(e->multi);
	return 0;
}

static int etcd_put_region(struct rd_registry *r, const struct rd_region_rec *rec, unsigned flags,
			   rd_reg_done_fn done, void *arg)
{
	struct etcd *e = r->priv;
	char key[KEY_MAX];
	struct req *q;

	if (!rd_valid_name(rec->tenant) || !rd_valid_name(rec->name) || !rd_valid_name(rec->node))
		return -EINVAL;
	snprintf(key, sizeof(key), "regions/%s/%s", rec->tenant, rec->name);
	q = new_req(e, OP_PUT, true, key);
	if (!q)
		return -ENOMEM;
	q->excl = flags & RD_REG_EXCL;
	q->done = done;
	q->arg = arg;
	q->val = rd_region_rec_sign(rec, r->key, r->keylen);
	q->rec = malloc(sizeof(*rec));
	if (!q->val || !q->rec) {
		req_free(q);
		return -ENOMEM;
	}
	memcpy(q->rec, rec, sizeof(*rec));
	rec_mac(r, true, rec, q->mac);
	return submit_write(e, q, rec);
}

static int etcd_del_region(struct rd_registry *r, const char *tenant, const char *name,
			   rd_reg_done_fn done, void *arg)
{
	struct etcd *e = r->priv;
	char key[KEY_MAX];
	struct req *q;

	if (!rd_valid_name(tenant) || !rd_valid_name(name))
		return -EINVAL;
	snprintf(key, sizeof(key), "regions/%s/%s", tenant, name);
	q = new_req(e, OP_DEL, true, key);
	if (!q)
		return -ENOMEM;
	q->done = done;
	q->arg = arg;
	return submit_write(e, q, NULL);
}

static int etcd_put_node(struct rd_registry *r, const struct rd_node_rec *rec, rd_reg_done_fn done,
			 void *arg)
{
	struct etcd *e = r->priv;
	char key[KEY_MAX];
	struct req *q;

	if (!rd_valid_name(rec->node))
		return -EINVAL;
	snprintf(key, sizeof(key), "nodes/%s", rec->node);
	q = new_req(e, OP_PUT, false, key);
	if (!q)
		return -ENOMEM;
	q->done = done;
	q->arg = arg;
	q->val = rd_node_rec_sign(rec, r->key, r->keylen);
	q->rec = malloc(sizeof(*rec));
	if (!q->val || !q->rec) {
		req_free(q);
		return -ENOMEM;
	}
	memcpy(q->rec, rec, sizeof(*rec));
	rec_mac(r, false, rec, q->mac);
	return submit_write(e, q, rec);
}

static int etcd_del_node(struct rd_registry *r, const char *node, rd_reg_done_fn done, void *arg)
{
	struct etcd *e = r->priv;
	char key[KEY_MAX];
	struct req *q;

	if (!rd_valid_name(node))
		return -EINVAL;
	snprintf(key, sizeof(key), "nodes/%s", node);
	q = new_req(e, OP_DEL, false, key);
	if (!q)
		return -ENOMEM;
	q->done = done;
	q->arg = arg;
	return submit_write(e, q, NULL);
}

static int etcd_fetch_region(struct rd_registry *r, const char *tenant, const char *name,
			     rd_reg_get_fn fn, void *arg)
{
	struct etcd *e = r->priv;
	char key[KEY_MAX];
	struct req *q;

	if (!rd_valid_name(tenant) || !rd_valid_name(name) || !fn)
		return -EINVAL;
	snprintf(key, sizeof(key), "regions/%s/%s", tenant, name);
	q = new_req(e, OP_FETCH, true, key);
	if (!q)
		return -ENOMEM;
	q->got = fn;
	q->arg = arg;
	pthread_mutex_lock(&e->lock);
	enqueue(e, q);
	pthread_mutex_unlock(&e->lock);
	curl_multi_wakeup(e->multi);
	return 0;
}

/* A cached record under @key into @out (@size bytes). */
static int cache_get(struct etcd *e, const char *key, void *out, size_t size)
{
	const void *rec;
	struct ent *x;
	int ret;

	pthread_mutex_lock(&e->lock);
	x = ent_find(e, key);
	ret = x ? ent_view(x, &rec) : -ENOENT;
	if (!ret)
		memcpy(out, rec, size);
	pthread_mutex_unlock(&e->lock);
	if (ret)
		memset(out, 0, size);
	return ret;
}

static int etcd_get_region(struct rd_registry *r, const char *tenant, const char *name,
			   struct rd_region_rec *rec)
{
	char key[KEY_MAX];

	if (!rd_valid_name(tenant) || !rd_valid_name(name))
		return -EINVAL;
	snprintf(key, sizeof(key), "regions/%s/%s", tenant, name);
	return cache_get(r->priv, key, rec, sizeof(*rec));
}

static int etcd_get_node(struct rd_registry *r, const char *node, struct rd_node_rec *rec)
{
	char key[KEY_MAX];

	if (!rd_valid_name(node))
		return -EINVAL;
	snprintf(key, sizeof(key), "nodes/%s", node);
	return cache_get(r->priv, key, rec, sizeof(*rec));
}

static int etcd_list_regions(struct rd_registry *r,
			     void (*fn)(const struct rd_region_rec *rec, void *arg), void *arg)
{
	struct etcd *e = r->priv;
	int count = 0;

	pthread_mutex_lock(&e->lock);
	for (unsigned i = 0; i < NBUCKETS; i++)
		for (struct ent *x = e->buckets[i]; x; x = x->next) {
			const void *rec;

			if (x->region && ent_view(x, &rec) == 0) {
				fn(rec, arg);
				count++;
			}
		}
	pthread_mutex_unlock(&e->lock);
	return count;
}

static int etcd_event_fd(struct rd_registry *r)
{
	struct etcd *e = r->priv;

	return e->efd;
}

static void run_done(struct req *q)
{
	if (q->got)
		q->got(q->arg, q->status, q->status ? NULL : q->rec);
	else if (q->done)
		q->done(q->arg, q->status);
	req_free(q);
}

static unsigned etcd_dispatch(struct rd_registry *r)
{
	struct etcd *e = r->priv;
	struct req *list;
	unsigned flags;
	uint64_t v;

	if (read(e->efd, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing new */
	}
	pthread_mutex_lock(&e->lock);
	list = e->done;
	e->done = NULL;
	e->done_tail = &e->done;
	flags = e->flags;
	e->flags = 0;
	pthread_mutex_unlock(&e->lock);
	while (list) {
		struct req *next = list->next;

		run_done(list);
		list = next;
	}
	return flags;
}

static bool etcd_ready(struct rd_registry *r)
{
	struct etcd *e = r->priv;

	return atomic_load(&e->a_synced) && now_ns() < atomic_load(&e->a_lease_until);
}

static void etcd_free(struct etcd *e)
{
	for (unsigned i = 0; i < NBUCKETS; i++)
		while (e->buckets[i]) {
			struct ent *x = e->buckets[i];

			e->buckets[i] = x->next;
			own_clear(x);
			free(x->s_rec);
			free(x);
		}
	if (e->easy)
		curl_easy_cleanup(e->easy);
	if (e->multi)
		curl_multi_cleanup(e->multi);
	if (e->efd >= 0)
		close(e->efd);
	pthread_mutex_destroy(&e->lock);
	OPENSSL_cleanse(e->password, sizeof(e->password));
	OPENSSL_cleanse(e->token, sizeof(e->token));
	free(e);
}

static void etcd_close(struct rd_registry *r)
{
	struct etcd *e = r->priv;
	struct req *q;

	if (!e)
		return;
	atomic_store(&e->stop, true);
	curl_multi_wakeup(e->multi);
	pthread_join(e->thread, NULL);
	/* everything queued was answered by the thread's shutdown */
	etcd_dispatch(r);
	while ((q = e->todo)) {
		e->todo = q->next;
		q->status = -ECANCELED;
		run_done(q);
	}
	etcd_free(e);
	r->priv = NULL;
	curl_global_cleanup();
	rd_registry_fini_common(r);
}

static const struct rd_registry_ops etcd_ops = {
	.name = "etcd",
	.get_region = etcd_get_region,
	.get_node = etcd_get_node,
	.list_regions = etcd_list_regions,
	.fetch_region = etcd_fetch_region,
	.put_region = etcd_put_region,
	.del_region = etcd_del_region,
	.put_node = etcd_put_node,
	.del_node = etcd_del_node,
	.event_fd = etcd_event_fd,
	.dispatch = etcd_dispatch,
	.ready = etcd_ready,
	.close = etcd_close,
};

/* A PEM file named in the config must be readable at start. */
static int check_file(const char *what, const char *path)
{
	if (!path[0] || access(path, R_OK) == 0)
		return 0;
	RD_LOG(ERR, "registry.%s %s: %s", what, path, strerror(errno));
	return -errno;
}

static int read_password(struct etcd *e, const char *path)
{
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f) {
		int err = -errno;

		RD_LOG(ERR, "registry.password_file %s: %s", path, strerror(errno));
		return err;
	}
	n = fread(e->password, 1, sizeof(e->password) - 1, f);
	fclose(f);
	while (n && (e->password[n - 1] == '\n' || e->password[n - 1] == '\r'))
		n--;
	e->password[n] = 0;
	if (!n) {
		RD_LOG(ERR, "registry.password_file %s is empty", path);
		return -EINVAL;
	}
	return 0;
}

int rd_registry_etcd_open(struct rd_registry *r, const struct rd_config *cfg, const uint8_t *key,
			  size_t keylen)
{
	struct etcd *e = calloc(1, sizeof(*e));
	char list[RD_PATH_MAX], *save = NULL, *tok;
	pthread_mutexattr_t ma;
	bool plain = false;
	int ret;

	rd_registry_init_common(r, cfg->node, key, keylen);
	if (!e) {
		rd_registry_fini_common(r);
		return -ENOMEM;
	}
	e->r = r;
	r->stats.ops = ((1u << RD_REGOPS) - 1) & ~(cfg->etcd_username[0] ? 0u : 1u << RD_REGOP_AUTH);
	e->efd = -1;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&e->lock, &ma);
	pthread_mutexattr_destroy(&ma);
	e->todo_tail = &e->todo;
	e->done_tail = &e->done;
	snprintf(list, sizeof(list), "%s", cfg->etcd_endpoints);
	for (tok = strtok_r(list, ",", &save); tok && e->nend < MAX_ENDPOINTS;
	     tok = strtok_r(NULL, ",", &save)) {
		size_t l = strlen(tok);

		while (l && tok[l - 1] == '/')
			tok[--l] = 0;
		snprintf(e->endpoints[e->nend++], sizeof(e->endpoints[0]), "%s", tok);
		plain |= !strncmp(tok, "http://", 7);
	}
	snprintf(e->prefix, sizeof(e->prefix), "%s", cfg->etcd_prefix);
	e->plen = strlen(e->prefix);
	e->ttl = cfg->lease_ttl_s;
	e->timeout_ns = (uint64_t)cfg->registry_timeout_ms * MS;
	snprintf(e->cacert, sizeof(e->cacert), "%s", cfg->etcd_cacert);
	snprintf(e->cert, sizeof(e->cert), "%s", cfg->etcd_cert);
	snprintf(e->key, sizeof(e->key), "%s", cfg->etcd_key);
	snprintf(e->user, sizeof(e->user), "%s", cfg->etcd_username);
	ret = e->nend ? 0 : -EINVAL;
	if (!ret)
		ret = check_file("cacert", e->cacert);
	if (!ret)
		ret = check_file("cert", e->cert);
	if (!ret)
		ret = check_file("key", e->key);
	if (!ret && e->user[0])
		ret = read_password(e, cfg->etcd_password_file);
	if (ret)
		goto err;
	if (e->user[0] && plain)
		RD_LOG(WARNING, "etcd: registry.username is set with an http:// endpoint: the password "
		       "and the token cross the network in the clear");
	e->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (e->efd < 0) {
		ret = -errno;
		goto err;
	}
	/* not thread-safe: here, before the thread exists */
	curl_global_init(CURL_GLOBAL_DEFAULT);
	e->multi = curl_multi_init();
	e->easy = curl_easy_init();
	if (!e->multi || !e->easy) {
		curl_global_cleanup();
		ret = -ENOMEM;
		goto err;
	}
	r->priv = e;
	r->ops = &etcd_ops;
	ret = -pthread_create(&e->thread, NULL, thread_main, e);
	if (ret) {
		curl_global_cleanup();
		r->priv = NULL;
		r->ops = NULL;
		goto err;
	}
	RD_LOG(INFO, "etcd: registry at %s (prefix %s%s%s), not ready until a lease is held and %s "
	       "is ranged and watched", cfg->etcd_endpoints, e->prefix, e->cert[0] ? ", client certificate" : "",
	       e->user[0] ? ", auth" : "", e->prefix);
	return 0;
err:
	etcd_free(e);
	rd_registry_fini_common(r);
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

	if (watch_data((char *)data, 1, len, e) != len || e->watch_failed) {
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
			if (hash_key(x->key) % NBUCKETS != i) {
				snprintf(why, len, "%s in the wrong bucket", x->key);
				return -1;
			}
			if (!classify(x->key, &region, a, b) || region != x->region) {
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
			rec_mac(r, region, x->s_rec, mac);
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
