// SPDX-License-Identifier: MIT
/*
 * The etcd backend (etcd.c): writes (put, put if unchanged, put if absent,
 * delete, fetch) as the registry thread runs them, the reconcile that puts
 * this node's records back when they were lost or changed, and the
 * thread's loop.
 */
#define _GNU_SOURCE
#include "registry/etcd_int.h"

/* ---- writes ------------------------------------------------------------------- */

static int put_plain(struct etcd *e, struct req *q, int64_t *rev)
{
	json_t *o = etcd_key_body(e, q->key), *resp;
	char *v = etcd_b64(q->val, strlen(q->val));
	int ret;

	json_object_set_new(o, "value", json_string(v ? v : ""));
	free(v);
	json_object_set_new(o, "lease", json_string(e->lease));
	ret = etcd_call(e, "/v3/kv/put", o, &resp, q->deadline_ns, 0);
	json_decref(o);
	if (!ret) {
		*rev = etcd_header_rev(resp);
		json_decref(resp);
	}
	return ret;
}

/* A txn: put @q if the key's @target ("CREATE" or "MOD") revision is @cmp;
 * else *cur gets the key's kv (or NULL when absent). 1 when put, 0 when not. */
static int put_if(struct etcd *e, struct req *q, const char *target, int64_t cmp, int64_t *rev,
		  json_t **cur)
{
	json_t *t = json_object(), *c = etcd_key_body(e, q->key), *put = etcd_key_body(e, q->key), *resp;
	json_t *rr, *arr;
	char *v = etcd_b64(q->val, strlen(q->val)), n[32];
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
	json_object_set_new(t, "failure", json_pack("[{s:o}]", "request_range", etcd_key_body(e, q->key)));
	ret = etcd_call(e, "/v3/kv/txn", t, &resp, q->deadline_ns, 0);
	json_decref(t);
	if (ret)
		return ret;
	if (json_is_true(json_object_get(resp, "succeeded"))) {
		*rev = etcd_header_rev(resp);
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
		ret = etcd_parse_kv(e, cur, false, &p);
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
	json_t *o = etcd_key_body(e, q->key), *resp;
	int64_t n = 0;
	int ret = etcd_call(e, "/v3/kv/deleterange", o, &resp, q->deadline_ns, 0);

	json_decref(o);
	if (ret)
		return ret;
	*rev = etcd_header_rev(resp);
	if (etcd_get_i64(resp, "deleted", &n) && n == 0)
		ret = -ENOENT;
	json_decref(resp);
	return ret;
}

static int fetch(struct etcd *e, struct req *q)
{
	json_t *o = etcd_key_body(e, q->key), *resp, *kvs;
	struct parsed p;
	int ret = etcd_call(e, "/v3/kv/range", o, &resp, q->deadline_ns, 0);

	json_decref(o);
	if (ret)
		return ret;
	kvs = json_object_get(resp, "kvs");
	if (!json_array_size(kvs)) {
		ret = -ENOENT;
	} else if (etcd_parse_kv(e, json_array_get(kvs, 0), false, &p)) {
		ret = -EBADMSG;
	} else if (!p.region || strcmp(p.rel, q->key)) {
		/* etcd answered with another key than the one asked for */
		free(p.rec);
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
		etcd_apply(e, &p, false, 0); /* the cache learns it too */
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
		etcd_todo_push_front(e, q);
		e->retry_ns = now_ns() + 250 * MS;
		return;
	}
	if (ret == -EHOSTUNREACH)
		ret = -ETIMEDOUT; /* nothing answered within registry.timeout_ms (an
				   * attempt cut short by the deadline says so too) */
	if (ret == -ENOLINK) {
		etcd_lease_lost(e, "a put was refused for it");
		etcd_todo_push_front(e, q); /* again under the next lease */
		return;
	}
	if (ret == -ECANCELED && !e->closing) {
		etcd_todo_push_front(e, q); /* close() answers it */
		return;
	}
	etcd_finish(e, q, ret, rev);
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
		q->rec = malloc(etcd_rec_size(x->region));
		if (!q->val || !q->rec) {
			etcd_req_free(q);
			return NULL;
		}
		memcpy(q->rec, x->o_rec, etcd_rec_len(x->region, x->o_rec));
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
			etcd_lease_lost(e, "a put was refused for it");
		if (ret && ret != -ENOENT && ret != -EEXIST) {
			failed = true;
			all = false;
		}
		etcd_finish(e, q, ret, ret && ret != -ENOENT ? 0 : rev);
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
		etcd_signal_efd(e);
		pthread_mutex_unlock(&e->lock);
	}
}

/* This host's boot_id (one per boot of the kernel, the same in every
 * container of the host): tells a roshmd of another host under our node
 * name from an earlier one of ours. "" when it cannot be read. */
void etcd_host_id(char *out, size_t n)
{
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");

	out[0] = 0;
	if (f) {
		if (!fgets(out, (int)n, f))
			out[0] = 0;
		fclose(f);
	}
	out[strcspn(out, "\n")] = 0;
	if (!rd_valid_host_id(out))
		out[0] = 0;
}

/* @x (under lock) is our node name's key and holds a valid record written
 * from another boot than ours (its host), under a lease. */
bool etcd_other_boot(struct etcd *e, const struct ent *x)
{
	const struct rd_node_rec *n = x->s_rec;

	return e->host[0] && !x->region && x->s_present && !x->s_status && n && x->s_lease > 0 &&
	       !strcmp(n->node, e->r->node) && n->host[0] && strcmp(n->host, e->host);
}

/* /v3/lease/timetolive: the seconds @lease has left (0: it runs out within
 * the second, or has and is not revoked yet), -1 when it is gone, or
 * -errno when etcd did not answer. */
static int64_t lease_left(struct etcd *e, int64_t lease)
{
	json_t *o = json_object(), *resp;
	int64_t ttl = 0;
	char id[24];
	int ret;

	snprintf(id, sizeof(id), "%lld", (long long)lease);
	json_object_set_new(o, "ID", json_string(id));
	ret = etcd_call(e, "/v3/lease/timetolive", o, &resp, now_ns() + ATTEMPT_MS * MS, 0);
	json_decref(o);
	if (ret == -ENOLINK || ret == -ENOENT)
		return -1;   /* "requested lease not found" */
	if (ret)
		return ret < 0 ? ret : -EIO;
	if (!etcd_get_i64(resp, "TTL", &ttl))
		ttl = 0;   /* (proto3 leaves a 0 out) */
	json_decref(resp);
	return ttl < 0 ? -1 : ttl > 3600 ? 3600 : ttl;
}

static void name_set(struct etcd *e, int st)
{
	if (atomic_exchange(&e->a_name, st) != st) {
		pthread_mutex_lock(&e->lock);
		etcd_signal_efd(e);   /* the control thread looks (name_state) */
		pthread_mutex_unlock(&e->lock);
	}
}

/* Our node name is ours: the first time, what an earlier roshmd of ours
 * left goes (never before: it might be another host's). */
static void name_ours(struct etcd *e)
{
	name_set(e, RD_NAME_OURS);
	if (!e->cleaned) {
		e->cleaned = true;
		etcd_clean_leftovers(e);
	}
}

/* Our node name's record as etcd holds it now (one key's range, not the
 * cache, which may lag: after a new lease, the watch may be down), into
 * the cache too: 1 when it was written from another boot under a lease
 * (*@lease, e->other), 0 when not, -errno when etcd did not answer. */
static int name_read(struct etcd *e, int64_t *lease)
{
	char key[KEY_MAX];
	json_t *o, *resp, *kvs;
	struct parsed p;
	struct ent *x;
	int64_t rev = 0;
	int ret;

	snprintf(key, sizeof(key), "nodes/%s", e->r->node);
	o = etcd_key_body(e, key);
	ret = etcd_call(e, "/v3/kv/range", o, &resp, now_ns() + ATTEMPT_MS * MS, 0);
	json_decref(o);
	if (ret)
		return ret < 0 ? ret : -EIO;
	kvs = json_object_get(resp, "kvs");
	if (json_array_size(kvs)) {
		if (!etcd_parse_kv(e, json_array_get(kvs, 0), false, &p)) {
			if (!p.region && !strcmp(p.rel, key))
				etcd_apply(e, &p, false, 0);
			else
				free(p.rec);
		}
	} else if (etcd_get_i64(json_object_get(resp, "header"), "revision", &rev) && rev > 0) {
		memset(&p, 0, sizeof(p));   /* gone, as of that revision */
		snprintf(p.rel, sizeof(p.rel), "%s", key);
		p.rev = rev;
		etcd_apply(e, &p, false, 0);
	}
	json_decref(resp);
	ret = 0;
	pthread_mutex_lock(&e->lock);
	x = etcd_ent_find(e, key);
	if (x && etcd_other_boot(e, x)) {
		*lease = x->s_lease;
		e->other = *(const struct rd_node_rec *)x->s_rec;
		ret = 1;
	}
	pthread_mutex_unlock(&e->lock);
	return ret;
}

/*
 * Whose is our node name (after the first full read of the prefix, a new
 * lease, another boot's record or lease arriving under it, or that lease
 * gone)? A record written from another boot (its host: the kernel's
 * boot_id, not ours) under a lease may be a roshmd of another host that
 * uses the name, or this host's before a reboot, or one whose host is
 * gone: which, its lease tells. Its TTL is looked up, and once that has run
 * out (plus 1 s) looked up again: a lease with a second or more left then
 * was kept alive, so a roshmd holds the name (RD_NAME_TAKEN: nothing of
 * ours is written, and roshmd stops); one that is gone leaves the name to
 * us (RD_NAME_OURS), once the record is read again. Meanwhile
 * (RD_NAME_WAIT, up to the other's lease TTL) nothing of ours is written.
 * A record without a lease (roshmd never writes one: a copy put back by
 * hand, or replayed) or without a host is ours to replace. (An etcd that
 * elects a new leader extends every lease: a dead holder's may then look
 * kept alive once, and roshmd stops; started again, it looks again.)
 */
static void name_look(struct etcd *e)
{
	int64_t lease = 0, left;
	int r;

	if (atomic_load(&e->a_name) == RD_NAME_TAKEN) {
		e->name_look = false;
		return;
	}
	r = name_read(e, &lease);
	if (r == 0) {
		e->name_look = false;
		name_ours(e);
		return;
	}
	left = r > 0 ? lease_left(e, lease) : r;
	if (left == -1) {
		e->name_look = false;
		name_ours(e);
		return;
	}
	if (left < -1) {
		/* etcd did not answer: again in a moment, nothing written meanwhile */
		etcd_note_err(e, "node name %s: cannot read its record or lease (%s): our writes "
			      "wait", e->r->node, strerror((int)-left));
		e->name_look_ns = now_ns() + 500 * MS;
		return;
	}
	e->name_look = false;
	if (atomic_load(&e->a_name) == RD_NAME_WAIT && e->name_lease == lease)
		return;   /* the same lease: its time to look again stays */
	RD_LOG(NOTICE, "etcd: node name %s: its record is of another boot (host %s, pid %u, "
	       "endpoint \"%s\"), under a lease with %lld s left: waiting to see whether it is "
	       "kept alive", e->r->node, e->other.host, e->other.pid, e->other.endpoint,
	       (long long)left);
	e->name_lease = lease;
	e->name_recheck_ns = now_ns() + (uint64_t)(left + 1) * 1000 * MS;
	name_set(e, RD_NAME_WAIT);
}

/* RD_NAME_WAIT, its time come: the other boot's lease kept alive, or gone
 * (then the record is read again: it may be under another lease now). */
static void name_recheck(struct etcd *e)
{
	int64_t left = lease_left(e, e->name_lease);

	int64_t lease = 0;
	int r;

	if (left == -1) {
		RD_LOG(NOTICE, "etcd: node name %s: the other boot's lease ran out", e->r->node);
		e->name_lease = 0;
		e->name_look = true;
		e->name_look_ns = 0;
	} else if (left >= 1 && (r = name_read(e, &lease)) >= 0) {
		/* kept alive: taken, if its record is still there under it */
		if (r == 1 && lease == e->name_lease) {
			name_set(e, RD_NAME_TAKEN);
		} else {
			e->name_look = true;
			e->name_look_ns = 0;
		}
	} else {
		/* running out now, or etcd did not answer: again shortly */
		e->name_recheck_ns = now_ns() + 500 * MS;
	}
}

/* Our node name is another host's (name_look: -EADDRINUSE), or at the
 * shutdown not known to be ours (-ECANCELED): every write and read queued
 * fails, nothing is put again. */
static void refuse_queued(struct etcd *e, int status)
{
	struct req *q;

	while ((q = etcd_todo_pop(e)))
		etcd_finish(e, q, status, 0);
	pthread_mutex_lock(&e->lock);
	e->need_reconcile = false;
	pthread_mutex_unlock(&e->lock);
}

void etcd_clean_leftovers(struct etcd *e)
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
		etcd_finish(e, q, ret, ret ? 0 : rev);
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
		etcd_lease_lost(e, "not kept alive within its TTL"); /* whatever etcd thinks of it */
	if (e->user[0] && !e->token[0]) {
		ret = etcd_authenticate(e, now + ATTEMPT_MS * MS);
		if (ret)
			etcd_backoff(e);
		return true;
	}
	if (!e->lease[0]) {
		ret = etcd_grant(e);
		if (ret) {
			if (ret != -EHOSTUNREACH && ret != -EACCES)
				etcd_note_err(e, "cannot take a lease: %s", strerror(-ret));
			etcd_backoff(e);
		} else {
			e->backoff_ms = 0;
		}
		return true;
	}
	if (now >= e->next_keepalive_ns) {
		etcd_keepalive(e);
		return true;
	}
	if (e->synced && e->watch && !e->watch_created && now - e->watch_start_ns > 5000 * MS) {
		/* etcd accepted the watch but never said it was created */
		etcd_note_err(e, "watch on %s not created within 5 s: watching again", e->prefix);
		e->watch_failed = true;
		etcd_watch_reap(e, CURLE_OK);
		return true;
	}
	/* writes do not need the cache: a watch being set up again waits alone */
	if (!e->synced && now >= e->sync_retry_ns) {
		ret = etcd_resync(e);
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
	/* (the first look after the first full read: leftovers of ours are
	 * removed from the cache's view) */
	if (e->name_look && e->read_once && now >= e->name_look_ns) {
		name_look(e);
		return true;
	}
	if (atomic_load(&e->a_name) == RD_NAME_WAIT && now >= e->name_recheck_ns) {
		name_recheck(e);
		return true;
	}
	/* nothing of ours is written before we know the name is ours */
	if (atomic_load(&e->a_name) != RD_NAME_OURS || e->name_look) {
		if (atomic_load(&e->a_name) == RD_NAME_TAKEN)
			refuse_queued(e, -EADDRINUSE);
		return false;
	}
	q = etcd_todo_pop(e);
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
	/* (not known to be ours, or to be looked at again: a new lease) */
	if (atomic_load(&e->a_name) != RD_NAME_OURS || e->name_look)
		refuse_queued(e, atomic_load(&e->a_name) == RD_NAME_TAKEN ? -EADDRINUSE : -ECANCELED);
	/* What the control thread asked last (unpublish, drain) gets a bounded
	 * chance; then the lease goes, and every record of ours with it. */
	while ((q = etcd_todo_pop(e))) {
		int64_t rev;
		int ret = -ECANCELED;

		if (e->lease[0] && (!e->user[0] || e->token[0]) && now_ns() < until) {
			if (q->deadline_ns > until)
				q->deadline_ns = until;
			ret = run(e, q, &rev);
		}
		etcd_finish(e, q, ret, ret ? 0 : rev);
	}
	etcd_watch_stop(e);
	if (e->lease[0]) {
		json_t *o = json_object(), *resp;

		json_object_set_new(o, "ID", json_string(e->lease));
		if (etcd_call(e, "/v3/lease/revoke", o, &resp, now_ns() + REVOKE_MS * MS, 0) == 0)
			json_decref(resp);
		json_decref(o);
		e->lease[0] = 0;
	}
}

void *etcd_thread_main(void *arg)
{
	struct etcd *e = arg;

	while (!atomic_load(&e->stop)) {
		etcd_expire(e);
		if (step(e))
			continue;
		curl_multi_poll(e->multi, NULL, 0, 100, NULL);
		etcd_drive(e, NULL);
	}
	shutdown_thread(e);
	return NULL;
}
