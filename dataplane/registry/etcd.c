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
 * at RD_REC_MAX (64 KiB), keys at 512 bytes, the cache at RD_REG_CACHE_MAX valid records
 * (and RD_REG_BAD_MAX that do not verify, apart).
 */
#define _GNU_SOURCE
#include "registry/etcd_int.h"

/* etcd answered with an error: one line per distinct problem (again after
 * 30 s), not one per retry. */
void etcd_note_err(struct etcd *e, const char *fmt, ...)
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
void etcd_note_down(struct etcd *e, const char *fmt, ...)
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

void etcd_note_up(struct etcd *e)
{
	if (!e->unreachable)
		return;
	RD_LOG(NOTICE, "etcd: %s answers again", e->endpoints[e->cur]);
	e->unreachable = false;
}

void etcd_backoff(struct etcd *e)
{
	e->backoff_ms = e->backoff_ms ? e->backoff_ms * 2 : BACKOFF_MIN_MS;
	if (e->backoff_ms > BACKOFF_MAX_MS)
		e->backoff_ms = BACKOFF_MAX_MS;
	e->retry_ns = now_ns() + e->backoff_ms * MS;
}

void etcd_signal_efd(struct etcd *e)
{
	uint64_t one = 1;

	if (write(e->efd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is already non-zero, dispatch() is due */
	}
}

/* ---- the cache ------------------------------------------------------------ */

uint32_t etcd_hash_key(const char *k)
{
	uint32_t h = 2166136261u;

	for (; *k; k++)
		h = (h ^ (uint8_t)*k) * 16777619u;
	return h;
}

struct ent *etcd_ent_find(struct etcd *e, const char *key)
{
	for (struct ent *x = e->buckets[etcd_hash_key(key) % NBUCKETS]; x; x = x->next)
		if (!strcmp(x->key, key))
			return x;
	return NULL;
}

/* Found or created; NULL at the cap (which our own records do not count
 * against). Records that do not verify (@bad) have a small cap of their
 * own: junk written into etcd never takes the place of a valid record. */
struct ent *etcd_ent_get(struct etcd *e, const char *key, bool region, bool own, bool bad)
{
	struct ent *x = etcd_ent_find(e, key), **b;
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
	b = &e->buckets[etcd_hash_key(key) % NBUCKETS];
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
void etcd_ent_maybe_free(struct etcd *e, struct ent *x)
{
	struct ent **pp;

	if (x->s_present || x->own || x->pending)
		return;
	for (pp = &e->buckets[etcd_hash_key(x->key) % NBUCKETS]; *pp; pp = &(*pp)->next)
		if (*pp == x) {
			*pp = x->next;
			break;
		}
	free(x->s_rec);
	free(x);
	e->nent--;
}

/* The store's view of @x becomes @present / @status / @rec (taken) at @rev. */
void etcd_store_set(struct etcd *e, struct ent *x, bool present, int status, void *rec,
		      const uint8_t *mac, int64_t rev)
{
	bool was_bad = x->s_present && x->s_status, bad = present && status;

	e->nbad += (unsigned)bad - (unsigned)was_bad;
	free(x->s_rec);
	x->s_present = present;
	x->s_status = present ? status : 0;
	x->s_rec = present && !status ? etcd_rec_trim(x->region, rec) : NULL;
	if (!(present && !status))
		free(rec);
	if (mac && present && !status)
		memcpy(x->s_mac, mac, 32);
	else
		memset(x->s_mac, 0, 32);
	x->s_rev = rev;
}

/* Whether the store still holds what this node wants under @x. */
bool etcd_own_in_store(const struct ent *x)
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

size_t etcd_rec_size(bool region)
{
	return region ? sizeof(struct rd_region_rec) : sizeof(struct rd_node_rec);
}

/* The bytes of @rec that say something (a region's unused grants are not
 * kept: the cache holds every record under the prefix). */
size_t etcd_rec_len(bool region, const void *rec)
{
	return region ? rd_region_rec_len(rec) : sizeof(struct rd_node_rec);
}

/* @rec (malloc'd, etcd_rec_size) cut to what it says; @rec itself when
 * the allocator cannot shrink it. */
void *etcd_rec_trim(bool region, void *rec)
{
	void *n = rec && region ? realloc(rec, etcd_rec_len(region, rec)) : NULL;

	return n ? n : rec;
}

void etcd_rec_mac(struct rd_registry *r, bool region, const void *rec, uint8_t mac[32])
{
	char *canon = region ? rd_region_rec_to_json(rec) : rd_node_rec_to_json(rec);

	if (canon)
		rd_rec_mac(r->key, r->keylen, canon, strlen(canon), mac);
	else
		memset(mac, 0, 32);
	free(canon);
}

/* ---- completions -------------------------------------------------------- */

void etcd_req_free(struct req *q)
{
	free(q->val);
	free(q->rec);
	free(q);
}

/*
 * @q is answered with @status (the store at @rev, when known): update the
 * key's store view and our own state, queue the completion for dispatch().
 */
void etcd_finish(struct etcd *e, struct req *q, int status, int64_t rev)
{
	struct ent *x;
	bool own = false;

	pthread_mutex_lock(&e->lock);
	x = q->op == OP_FETCH ? NULL : etcd_ent_find(e, q->key);
	if (x) {
		bool ok = status == 0 || (status == -ENOENT && q->op == OP_DEL);

		own = x->own;
		x->pending--;
		if (ok) {
			if (rev > x->s_rev) {
				etcd_store_set(e, x, q->op == OP_PUT, 0, q->rec, q->mac, rev);
				x->s_lease = 0;   /* (ours: our lease) */
				q->rec = NULL;
			}
			/* done, unless the store has moved past our write to
			 * what someone else wrote (the watch told first): then
			 * it is put again */
			if (x->own && x->o_gen == q->gen) {
				x->o_synced = q->op != OP_PUT || etcd_own_in_store(x);
				if (!x->o_synced)
					e->need_reconcile = true;
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
		etcd_ent_maybe_free(e, x);
	}
	/* the thread's own retries say nothing: the first failure was logged */
	if (status && status != -ENOENT && status != -EEXIST && q->op != OP_FETCH && !q->internal)
		RD_LOG(WARNING, "registry: %s %s: %s%s", q->op == OP_PUT ? "publishing" : "removing",
		       q->key, strerror(-status),
		       status == -EADDRINUSE ? " (our node name is another host's)" :
		       status == -ECANCELED ? " (our node name was not known to be ours)" :
		       own ? " (done when etcd answers again)" : "");
	if (q->internal || (!q->done && !q->got)) {
		etcd_req_free(q);
	} else {
		q->status = status;
		q->next = NULL;
		*e->done_tail = q;
		e->done_tail = &q->next;
		etcd_signal_efd(e);
	}
	pthread_mutex_unlock(&e->lock);
}

/* Queued requests past their deadline fail with -ETIMEDOUT. */
void etcd_expire(struct etcd *e)
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
		etcd_finish(e, q, -ETIMEDOUT, 0);
	}
	pthread_mutex_unlock(&e->lock);
}

struct req *etcd_todo_pop(struct etcd *e)
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

void etcd_todo_push_front(struct etcd *e, struct req *q)
{
	pthread_mutex_lock(&e->lock);
	q->next = e->todo;
	if (!e->todo)
		e->todo_tail = &q->next;
	e->todo = q;
	pthread_mutex_unlock(&e->lock);
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
		orec = malloc(etcd_rec_len(q->region, rec));
		if (!oval || !orec) {
			free(oval);
			free(orec);
			etcd_req_free(q);
			return -ENOMEM;
		}
		memcpy(orec, rec, etcd_rec_len(q->region, rec));
	}
	pthread_mutex_lock(&e->lock);
	x = etcd_ent_get(e, q->key, q->region, true, false);
	if (!x) {
		pthread_mutex_unlock(&e->lock);
		free(oval);
		free(orec);
		etcd_req_free(q);
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
		etcd_req_free(q);
		return -ENOMEM;
	}
	memcpy(q->rec, rec, sizeof(*rec));
	etcd_rec_mac(r, true, rec, q->mac);
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

	struct rd_node_rec n = *rec;

	if (!rd_valid_name(rec->node))
		return -EINVAL;
	/* ours: this boot's (etcd_thread.c name_look) */
	snprintf(n.host, sizeof(n.host), "%s", e->host);
	snprintf(key, sizeof(key), "nodes/%s", n.node);
	q = new_req(e, OP_PUT, false, key);
	if (!q)
		return -ENOMEM;
	q->done = done;
	q->arg = arg;
	q->val = rd_node_rec_sign(&n, r->key, r->keylen);
	q->rec = malloc(sizeof(n));
	if (!q->val || !q->rec) {
		etcd_req_free(q);
		return -ENOMEM;
	}
	memcpy(q->rec, &n, sizeof(n));
	etcd_rec_mac(r, false, &n, q->mac);
	return submit_write(e, q, &n);
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

/* A cached record under @key into @out (@size bytes: etcd_rec_size, of
 * which what it says is filled in). */
static int cache_get(struct etcd *e, const char *key, void *out, size_t size)
{
	const void *rec;
	struct ent *x;
	int ret;

	pthread_mutex_lock(&e->lock);
	x = etcd_ent_find(e, key);
	ret = x ? ent_view(x, &rec) : -ENOENT;
	if (!ret)
		memcpy(out, rec, etcd_rec_len(x->region, rec));
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

/* @tenant's records whose names begin with @prefix: the cache's keys are
 * compared first, and only those records are handed on. */
static int etcd_list_prefix(struct rd_registry *r, const char *tenant, const char *prefix,
			    unsigned max, void (*fn)(const struct rd_region_rec *rec, void *arg),
			    void *arg)
{
	struct etcd *e = r->priv;
	char key[8 + 2 * ROSHM_NAME_MAX];
	int count = 0;
	size_t kl;

	if ((size_t)snprintf(key, sizeof(key), "regions/%s/%s", tenant, prefix) >= sizeof(key))
		return -EINVAL;
	kl = strlen(key);
	pthread_mutex_lock(&e->lock);
	for (unsigned i = 0; i < NBUCKETS && (unsigned)count < max; i++)
		for (struct ent *x = e->buckets[i]; x && (unsigned)count < max; x = x->next) {
			const void *rec;

			if (x->region && !strncmp(x->key, key, kl) && ent_view(x, &rec) == 0) {
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
	etcd_req_free(q);
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

	return atomic_load(&e->a_synced) && now_ns() < atomic_load(&e->a_lease_until) &&
	       atomic_load(&e->a_name) == RD_NAME_OURS;
}

static int etcd_name_state(struct rd_registry *r, struct rd_node_rec *holder)
{
	struct etcd *e = r->priv;
	int st = atomic_load(&e->a_name);

	if (holder) {
		pthread_mutex_lock(&e->lock);
		*holder = e->other;
		pthread_mutex_unlock(&e->lock);
	}
	return st;
}

void etcd_free(struct etcd *e)
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

const struct rd_registry_ops etcd_ops = {
	.name = "etcd",
	.get_region = etcd_get_region,
	.get_node = etcd_get_node,
	.list_regions = etcd_list_regions,
	.list_prefix = etcd_list_prefix,
	.fetch_region = etcd_fetch_region,
	.put_region = etcd_put_region,
	.del_region = etcd_del_region,
	.put_node = etcd_put_node,
	.del_node = etcd_del_node,
	.event_fd = etcd_event_fd,
	.dispatch = etcd_dispatch,
	.ready = etcd_ready,
	.name_state = etcd_name_state,
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
	etcd_host_id(e->host, sizeof(e->host));
	if (!e->host[0])
		RD_LOG(WARNING, "etcd: this host's boot_id cannot be read: a roshmd of another host "
		       "under node name %s is not looked for", cfg->node);
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
	ret = -pthread_create(&e->thread, NULL, etcd_thread_main, e);
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
