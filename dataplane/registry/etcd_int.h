/* SPDX-License-Identifier: MIT */
/*
 * The etcd registry backend's own header (dataplane/registry/etcd*.c): its
 * state, and what its parts call of each other.
 * - etcd.c: the cache of records, completions to the control thread, the
 *   registry interface the control thread calls, opening and closing;
 * - etcd_http.c: base64, HTTP through libcurl (one request at a time, the
 *   watch stream beside it), etcd auth and the lease;
 * - etcd_sync.c: records from etcd: parsing and checking, the watch, a full
 *   range of the prefix (resync);
 * - etcd_thread.c: writes (put, conditional put, delete, fetch), reconcile
 *   of this node's records, and the registry thread's loop.
 */
#ifndef RD_REGISTRY_ETCD_H
#define RD_REGISTRY_ETCD_H

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
#define NBUCKETS 16384
/* records per range page: a page of values of RD_REC_MAX (base64) and
 * keys of KEY_MAX stays under RESP_MAX */
#define PAGE 150
/* the first page's limit, and the bytes a page is sized for after it
 * (values a writer made large make etcd slow to answer a page of them) */
#define PAGE_FIRST 32
#define PAGE_BYTES (4u << 20)
_Static_assert((uint64_t)PAGE * ((RD_REC_MAX + KEY_MAX) * 4 / 3 + 512) < RESP_MAX,
	       "a range page of the largest records fits in an answer");
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
	int64_t s_lease;              /* the lease it is under, 0 none or not known */
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
	char host[RD_HOST_ID_MAX];    /* this host's boot_id, stamped on our node record; "" unknown */
	pthread_t thread;
	CURLM *multi;                 /* curl_multi_wakeup() is the only call from another thread */
	atomic_bool stop;
	/* readiness, written by the thread */
	_Atomic uint64_t a_lease_until;
	atomic_bool a_synced;
	/* whose our node name is (enum rd_name_state, etcd_thread.c
	 * name_look), and the record of another boot (`other`, under lock) */
	atomic_int a_name;
	struct rd_node_rec other;

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
	/* name_look: due (after a full read, a new lease, another boot's
	 * record under our name); WAIT: the lease watched and when to look again */
	bool name_look, read_once;    /* read_once: a full read of the prefix done */
	int64_t name_lease;
	uint64_t name_look_ns, name_recheck_ns;
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

struct parsed {
	char rel[KEY_MAX];
	bool region, present;
	int status;                   /* 0 or -EBADMSG */
	int64_t rev;
	int64_t lease;                /* 0: none */
	void *rec;                    /* malloc'd, when status == 0 */
	uint8_t mac[32];
	const char *why;
};

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* etcd.c: log lines (one per problem, not per retry), back-off, waking the
 * control thread; the cache of records; completions */
void etcd_note_err(struct etcd *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void etcd_note_down(struct etcd *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void etcd_note_up(struct etcd *e);
void etcd_backoff(struct etcd *e);
void etcd_signal_efd(struct etcd *e);
struct ent *etcd_ent_find(struct etcd *e, const char *key);
struct ent *etcd_ent_get(struct etcd *e, const char *key, bool region, bool own, bool bad);
void etcd_ent_maybe_free(struct etcd *e, struct ent *x);
void etcd_store_set(struct etcd *e, struct ent *x, bool present, int status, void *rec,
		    const uint8_t *mac, int64_t rev);
bool etcd_own_in_store(const struct ent *x);
size_t etcd_rec_size(bool region);
size_t etcd_rec_len(bool region, const void *rec);
void *etcd_rec_trim(bool region, void *rec);
void etcd_rec_mac(struct rd_registry *r, bool region, const void *rec, uint8_t mac[32]);
void etcd_req_free(struct req *q);
void etcd_finish(struct etcd *e, struct req *q, int status, int64_t rev);
void etcd_expire(struct etcd *e);
struct req *etcd_todo_pop(struct etcd *e);
void etcd_todo_push_front(struct etcd *e, struct req *q);
/* etcd_http.c: base64, requests, auth, the lease */
char *etcd_b64(const void *data, size_t len);
int etcd_unb64(const char *in, size_t max, char **out);
bool etcd_get_i64(json_t *o, const char *k, int64_t *v);
size_t etcd_collect(char *data, size_t size, size_t nmemb, void *arg);
void etcd_common_opts(struct etcd *e, CURL *h);
void etcd_watch_stop(struct etcd *e);
void etcd_watch_reap(struct etcd *e, CURLcode rc);
int etcd_drive(struct etcd *e, CURL *h);
int64_t etcd_header_rev(json_t *resp);
void etcd_error_text(const struct buf *b, char *out, size_t len);
int etcd_call(struct etcd *e, const char *path, json_t *body, json_t **resp, uint64_t deadline,
	      unsigned flags);
json_t *etcd_kv_body(const void *key, size_t klen, const void *end, size_t elen);
json_t *etcd_key_body(struct etcd *e, const char *rel);
int etcd_authenticate(struct etcd *e, uint64_t deadline);
int etcd_grant(struct etcd *e);
void etcd_lease_lost(struct etcd *e, const char *why);
void etcd_keepalive(struct etcd *e);
/* etcd_sync.c: records from etcd, the watch, a full range */
bool etcd_classify(const char *rel, bool *region, char *a, char *b);
int etcd_parse_kv(struct etcd *e, json_t *kv, bool del, struct parsed *p);
void etcd_apply(struct etcd *e, struct parsed *p, bool force, uint64_t gen);
size_t etcd_watch_data(char *data, size_t size, size_t nmemb, void *arg);
void etcd_watch_line(struct etcd *e, const char *s, size_t len);
int etcd_resync(struct etcd *e);
/* etcd_thread.c: writes, reconcile, the thread */
void etcd_clean_leftovers(struct etcd *e);
bool etcd_other_boot(struct etcd *e, const struct ent *x);
void etcd_host_id(char *out, size_t n);
void *etcd_thread_main(void *arg);
/* etcd.c: the interface the control thread calls; a key's hash bucket;
 * everything of a backend freed */
extern const struct rd_registry_ops etcd_ops;
uint32_t etcd_hash_key(const char *k);
void etcd_free(struct etcd *e);

#endif
