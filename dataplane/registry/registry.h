/* SPDX-License-Identifier: MIT */
/*
 * Region registry: where `<tenant>/<name>` is published with everything a
 * peer needs to reach it. Backends: `file` (a directory shared by the
 * roshmd instances of one host, the default) and `etcd`.
 *
 * The registry is a trust anchor only through the records' MAC: whoever can
 * write etcd or the directory is not trusted. Every record carries
 * "mac" = HMAC-SHA256(cluster secret, "roshm-rec-v1\0" | canonical JSON
 * without "mac"), and every read (get, list, fetch, watch) checks it; a
 * record without a valid MAC, with a bad name or an unknown state or policy
 * is -EBADMSG, which callers treat as absent.
 *
 * Threads: every op runs in the control thread, and no op waits on the
 * network. Reads answer from what is at hand (file: the directory; etcd: a
 * cache kept exact by a watch). Writes are queued (etcd: to the backend's
 * registry thread) and their completions run later from dispatch(), never
 * from inside the call that queued them.
 */
#ifndef RD_REGISTRY_H
#define RD_REGISTRY_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include "roshm/ctl.h"

/*
 * One grant of a ROSHM_POLICY_GRANT region: the owner of the region whose
 * grant id is @gid may open data offsets [lo, hi) of it for the operations
 * in @access (ROSHM_ACCESS_*). All of it: lo 0, hi the data size, access
 * ROSHM_ACCESS_ALL (the form a record writes as the bare id).
 */
#define RD_GRANT_PART_LEN 52 /* "id:lo:hi:access" in a record */
struct rd_grant {
	uint64_t gid;
	uint64_t lo, hi;
	uint32_t access;
	/* verbs: the rkey of the MR the owner's roshmd registered for this
	 * grant alone (its part, its operations), which a grantee's node
	 * uses instead of the region's, so that a revoke (the MR deregistered)
	 * holds at the owner's NIC at once; 0: none (use the region's) */
	uint32_t nic_rkey;
};

/* The same grant: id, part and operations (not the NIC key it was given). */
static inline int rd_grant_same(const struct rd_grant *a, const struct rd_grant *b)
{
	return a->gid == b->gid && a->lo == b->lo && a->hi == b->hi && a->access == b->access;
}

#define RD_STATE_ACTIVE "active"
#define RD_STATE_STALE "stale"

/* Largest record accepted from a store (file or etcd): one with
 * ROSHM_GRANTS_MAX grants, each a part, is about 30 KiB. */
#define RD_REC_MAX 65536
/* Most records the etcd backend caches (a hostile etcd cannot make it grow). */
#define RD_REG_CACHE_MAX 65536
#define RD_REG_BAD_MAX 1024     /* records that do not verify, cached apart */

/* put_region flags */
#define RD_REG_EXCL 1u                /* -EEXIST if a valid record of another node holds the name */
/* dispatch() result bits */
#define RD_REG_CHANGED 1u             /* something under the prefix changed (watch) */
#define RD_REG_REPUBLISHED 2u         /* the lease was lost; our records were put again */

struct rd_region_rec {
	char node[ROSHM_NAME_MAX];
	char tenant[ROSHM_NAME_MAX];
	char name[ROSHM_NAME_MAX];
	char state[16];
	char endpoint[128];          /* transport address of the owning node */
	uint32_t region_id;
	uint32_t key;
	uint32_t rkey;               /* verbs: the region's MR (0 and absent otherwise) */
	uint64_t raddr;              /* verbs: its address in the owner's roshmd */
	uint64_t epoch;
	uint64_t mem_id;             /* same memory across epochs (re-attach after a restart) */
	uint64_t gid;                /* its grant id (rd_grant_id), never 0 */
	uint64_t ogid;               /* its owner client's (struct rd_client cgid), 0: none */
	uint64_t data_size;
	uint32_t txn_slots;
	uint32_t slot_size;
	uint32_t policy;
	uint32_t ntenants;
	char tenants[ROSHM_POLICY_TENANTS_MAX][ROSHM_NAME_MAX];
	/* what openers may do (struct rd_region): in the record only when not
	 * the default (every operation on the whole data area, offsets) */
	uint32_t access;
	uint64_t win_lo, win_hi;
	uint64_t va_base;
	/* ROSHM_POLICY_GRANT: who may open it besides the owner, and what */
	uint32_t ngrants;
	struct rd_grant grants[ROSHM_GRANTS_MAX];
};

/* The bytes of @rec that say something: its grants past ngrants are
 * not copied, and a cache keeps no more (etcd's, of every record). */
static inline size_t rd_region_rec_len(const struct rd_region_rec *rec)
{
	uint32_t n = rec->ngrants < ROSHM_GRANTS_MAX ? rec->ngrants : ROSHM_GRANTS_MAX;

	return offsetof(struct rd_region_rec, grants) + n * sizeof(rec->grants[0]);
}

/* Whether a region's access/window/va_base limit other clients at all
 * (access 0 and win_hi 0 are the defaults of a zeroed record: all). */
static inline bool rd_region_restricted(uint32_t access, uint64_t win_lo, uint64_t win_hi,
					uint64_t data_size, uint64_t va_base)
{
	return (access && access != ROSHM_ACCESS_ALL) || win_lo != 0 ||
	       (win_hi && win_hi != data_size) || va_base != 0;
}

static inline const char *rd_policy_name(uint32_t policy)
{
	return policy == ROSHM_POLICY_OWNER ? "owner" : policy == ROSHM_POLICY_LIST ? "list" :
	       policy == ROSHM_POLICY_GRANT ? "grant" : "tenant";
}

#define RD_HOST_ID_MAX 40

/* A node record's host: a boot_id's characters (lowercase hex and '-'),
 * not empty, shorter than RD_HOST_ID_MAX. */
static inline bool rd_valid_host_id(const char *s)
{
	size_t n = strlen(s);

	return n && n < RD_HOST_ID_MAX && strspn(s, "0123456789abcdef-") == n;
}

struct rd_node_rec {
	char node[ROSHM_NAME_MAX];
	char endpoint[128];          /* "tcp:HOST:PORT" (addr.h), or "" without a network transport */
	uint32_t pid;
	/* etcd: the writer's host (its kernel's boot_id), so that a roshmd of
	 * another host under the same node name is told from this host's
	 * earlier one; "" unknown (file registry, an older writer) */
	char host[RD_HOST_ID_MAX];
};

/* Whose our node name is in the store (etcd, name_state()) */
enum rd_name_state {
	RD_NAME_UNREAD,     /* the store not read yet: nothing of ours written */
	RD_NAME_WAIT,       /* a record of another boot, under a lease: is it kept alive? */
	RD_NAME_OURS,       /* none, ours, this boot's, or one whose lease ran out */
	RD_NAME_TAKEN,      /* a roshmd of another boot keeps it alive */
};

struct rd_registry;

typedef void (*rd_reg_done_fn)(void *arg, int status);
typedef void (*rd_reg_get_fn)(void *arg, int status, const struct rd_region_rec *rec);

struct rd_registry_ops {
	const char *name;
	/* Reads never block: file reads its directory, etcd its watched cache.
	 * 0, -ENOENT, -EBADMSG (present but malformed or forged), -EINVAL (bad name). */
	int (*get_region)(struct rd_registry *r, const char *tenant, const char *name,
			  struct rd_region_rec *rec);
	int (*get_node)(struct rd_registry *r, const char *node, struct rd_node_rec *rec);
	/*
	 * Calls @fn for each valid record; returns the count or -errno. etcd:
	 * @fn runs with the cache locked (keep it short); it may call the
	 * registry again, reads and writes.
	 */
	int (*list_regions)(struct rd_registry *r,
			    void (*fn)(const struct rd_region_rec *rec, void *arg), void *arg);
	/*
	 * Optional (NULL: list_regions and a filter): list_regions for
	 * @tenant's records whose names begin with @prefix only, where the
	 * backend can skip the others' reads (file: their files; etcd: their
	 * cache entries, by key), and @max records at most (the rest are not
	 * read).
	 */
	int (*list_prefix)(struct rd_registry *r, const char *tenant, const char *prefix,
			   unsigned max, void (*fn)(const struct rd_region_rec *rec, void *arg),
			   void *arg);
	/*
	 * A read that goes past the cache to the store (etcd: one range request
	 * in the thread), for a region that may have been created a moment ago
	 * on another node. @fn runs later from dispatch() with 0 and the record,
	 * or -ENOENT / -EBADMSG / -ETIMEDOUT and NULL. Returns 0 or -errno (then
	 * @fn never runs).
	 */
	int (*fetch_region)(struct rd_registry *r, const char *tenant, const char *name,
			    rd_reg_get_fn fn, void *arg);
	/*
	 * Writes. @done (may be NULL) runs later from dispatch() with 0 or
	 * -errno once the store answered (etcd: or after registry.timeout_ms
	 * with -ETIMEDOUT). The call itself returns 0 (queued) or -errno (then
	 * @done never runs). Reads of this registry see a queued write at once.
	 * etcd: the records this node wrote are its desired state, which the
	 * thread keeps in etcd (under the node's lease) until they are deleted:
	 * a write that timed out is still made when etcd answers again.
	 * RD_REG_EXCL on put_region: fail with -EEXIST if a valid record of
	 * ANOTHER node holds the name (our own node's record is overwritten).
	 */
	int (*put_region)(struct rd_registry *r, const struct rd_region_rec *rec, unsigned flags,
			  rd_reg_done_fn done, void *arg);
	int (*del_region)(struct rd_registry *r, const char *tenant, const char *name,
			  rd_reg_done_fn done, void *arg);
	int (*put_node)(struct rd_registry *r, const struct rd_node_rec *rec, rd_reg_done_fn done,
			void *arg);
	int (*del_node)(struct rd_registry *r, const char *node, rd_reg_done_fn done, void *arg);
	/* Readable when dispatch() has work (completions, changes). */
	int (*event_fd)(struct rd_registry *r);
	/* Control thread: run completions; returns RD_REG_CHANGED | RD_REG_REPUBLISHED. */
	unsigned (*dispatch)(struct rd_registry *r);
	/* Lease held and cache in sync (etcd); always true for file. */
	bool (*ready)(struct rd_registry *r);
	/*
	 * etcd: whose our node name is (enum rd_name_state), and in *@holder
	 * (not NULL) the record of the roshmd of another boot that holds or
	 * may hold it. Until RD_NAME_OURS nothing of ours is written; at
	 * RD_NAME_TAKEN every write fails with -EADDRINUSE and roshmd should
	 * stop. NULL (file): not looked for.
	 */
	int (*name_state)(struct rd_registry *r, struct rd_node_rec *holder);
	/*
	 * etcd: finish queued writes and revoke the lease (bounded: about
	 * timeout_ms plus 1 s), stop the thread. Completions not yet run are
	 * run from here (those never answered with -ECANCELED), so that their
	 * arguments can be freed.
	 */
	void (*close)(struct rd_registry *r);
};

/* Bad records are logged at most once per key per minute, and at most
 * RD_REG_BADLOG_BURST lines a minute in all (a hostile writer cannot flood). */
#define RD_REG_BADLOG_SLOTS 256
#define RD_REG_BADLOG_BURST 32
struct rd_reg_badslot {
	uint64_t hash;                /* of the key; 0: free */
	uint64_t last_ns;
};
struct rd_reg_badlog {
	pthread_mutex_t lock;         /* the etcd thread and the control thread log */
	uint64_t window_ns;
	unsigned in_window, suppressed;
	struct rd_reg_badslot slot[RD_REG_BADLOG_SLOTS];
};

/*
 * What the backend asked of its store (metrics.c shows it): the latency of
 * every request, answered or not, and the failed ones by reason. File: the
 * control thread's reads and writes of the directory; etcd: the thread's
 * HTTP requests (the control thread's reads answer from the cache and are
 * not requests), the watch's set-up, the lease. One thread writes them
 * (RD_STAT_ADD), the control thread reads them.
 */
enum rd_reg_op { RD_REGOP_PUT, RD_REGOP_GET, RD_REGOP_DELETE, RD_REGOP_WATCH, RD_REGOP_LEASE,
		 RD_REGOP_AUTH, RD_REGOPS };
enum rd_reg_err {
	RD_REGERR_TIMEOUT,            /* -ETIMEDOUT */
	RD_REGERR_UNREACHABLE,        /* -EHOSTUNREACH: no endpoint answered (connection, TLS) */
	RD_REGERR_DENIED,             /* -EACCES -EPERM: auth, permission, certificate */
	RD_REGERR_INVALID,            /* -EBADMSG: an answer or a record that does not verify */
	RD_REGERR_OTHER,              /* another error answer, an I/O error */
	RD_REGERRS
};
#define RD_REG_LAT_BUCKETS 16         /* 100 us .. 10 s (rd_reg_lat_le), then overflow */
extern const uint64_t rd_reg_lat_le_ns[RD_REG_LAT_BUCKETS];
struct rd_reg_stats {
	unsigned ops;                 /* 1 << RD_REGOP_*: what this backend does */
	uint64_t hist[RD_REGOPS][RD_REG_LAT_BUCKETS + 1];
	uint64_t sum_ns[RD_REGOPS];
	uint64_t errors[RD_REGOPS][RD_REGERRS];
	uint64_t lease_lost;          /* etcd: the lease expired or etcd forgot it */
};
/* Count a request @op that started at CLOCK_MONOTONIC @t0_ns (0: only its
 * error, no latency) and ended with @status (0 or -errno; -ENOENT, -EEXIST
 * and -ECANCELED are answers, not failures). From the backend's one writing
 * thread. */
void rd_registry_observe(struct rd_registry *r, enum rd_reg_op op, uint64_t t0_ns, int status);
/* CLOCK_MONOTONIC in ns. */
uint64_t rd_registry_now_ns(void);

struct rd_registry {
	const struct rd_registry_ops *ops;
	char node[ROSHM_NAME_MAX];
	char dir[256];
	uint8_t key[64];              /* record MAC key (HMAC's own form of a longer secret) */
	size_t keylen;
	struct rd_reg_badlog badlog;
	struct rd_reg_stats stats;
	/* Control thread, from dispatch(): the record of region @tenant/@name
	 * changed in the store (file backend: inotify), so that a remote region
	 * is looked at again now, not at the next revalidate_ms. NULL: none. */
	void (*changed)(void *arg, const char *tenant, const char *name);
	/* Whether changes under @tenant matter here (file backend: which tenant
	 * directories it watches; NULL: all, up to its cap). Same arg. */
	bool (*wants_tenant)(void *arg, const char *tenant);
	void *changed_arg;
	void *priv;
};

struct rd_config;
/*
 * Open the backend cfg->registry_backend names, with the record key from
 * rd_registry_load_key(). Logs why it failed; returns 0 or -errno.
 */
int rd_registry_open(struct rd_registry *r, const struct rd_config *cfg);
/*
 * The record key: registry.secret_file, else the secret_file of the enabled
 * network transport (tcp, else verbs), else random (*random set: only this
 * instance can verify its records). A configured file that is missing or
 * shorter than 16 bytes is an error (-errno, @err says why).
 */
int rd_registry_load_key(const struct rd_config *cfg, uint8_t key[64], size_t *keylen,
			 bool *random, char *err, size_t errlen);
/* The backends by the name registry.backend gives (registry.c). */
struct rd_registry_backend {
	const char *name;
	int (*open)(struct rd_registry *r, const struct rd_config *cfg, const uint8_t *key,
		    size_t keylen);
};
extern const struct rd_registry_backend rd_registry_backends[];
extern const size_t rd_registry_nbackends;
/* The backend called @name; NULL when there is none. */
const struct rd_registry_backend *rd_registry_backend(const char *name);
/* Backends, with an explicit key (tests drive them directly). */
int rd_registry_file_open(struct rd_registry *r, const char *dir, const char *node,
			  const uint8_t *key, size_t keylen);
int rd_registry_etcd_open(struct rd_registry *r, const struct rd_config *cfg, const uint8_t *key,
			  size_t keylen);

/*
 * Test hook (tests/fuzz/fuzz_etcd_watch.c): an etcd backend with no thread
 * and no connection under @prefix, fed bytes as the gateway's watch stream
 * would bring them (probe_feed, any split), and its cache checked against
 * its invariants (probe_check: 0, or -1 and @why). @r comes from
 * rd_registry_init_common; get_region, get_node and list_regions work.
 */
int rd_etcd_probe_open(struct rd_registry *r, const char *prefix);
void rd_etcd_probe_feed(struct rd_registry *r, const char *data, size_t len);
int rd_etcd_probe_check(struct rd_registry *r, char *why, size_t len);
void rd_etcd_probe_close(struct rd_registry *r);

/* Shared by the backends (registry.c). */
void rd_registry_init_common(struct rd_registry *r, const char *node, const uint8_t *key,
			     size_t keylen);
void rd_registry_fini_common(struct rd_registry *r);
/* Log a rejected record under @key (rate-limited as above). */
void rd_registry_log_bad(struct rd_registry *r, const char *key, const char *why);

/*
 * Records as JSON (record.c). to_json is the canonical form the MAC covers:
 * compact, sorted keys, no "mac". sign adds "mac"; verify parses hostile
 * text, re-encodes it and checks the MAC in constant time: 0 or -EBADMSG
 * (@why, if not NULL, says what was wrong).
 */
char *rd_region_rec_to_json(const struct rd_region_rec *rec);
int rd_region_rec_from_json(const char *text, size_t len, struct rd_region_rec *rec);
char *rd_region_rec_sign(const struct rd_region_rec *rec, const uint8_t *key, size_t keylen);
int rd_region_rec_verify(const char *text, size_t len, const uint8_t *key, size_t keylen,
			 struct rd_region_rec *rec, const char **why);
char *rd_node_rec_to_json(const struct rd_node_rec *rec);
int rd_node_rec_from_json(const char *text, size_t len, struct rd_node_rec *rec);
char *rd_node_rec_sign(const struct rd_node_rec *rec, const uint8_t *key, size_t keylen);
int rd_node_rec_verify(const char *text, size_t len, const uint8_t *key, size_t keylen,
		       struct rd_node_rec *rec, const char **why);
/*
 * A region's identity in a grant list (ROSHM_POLICY_GRANT): the first 8
 * bytes of SHA-256("roshm-grant-v1\0" node \0 tenant \0 name \0 key
 * little-endian), where key is the region's grant_key: random per region,
 * kept across a re-attach, known to roshmd and to the region's owner only.
 * Another region under the same name (made after this one went, or
 * re-attached with a forged header) has another key, so it does not
 * inherit the grant; knowing a region's id does not help make one.
 */
uint64_t rd_grant_id(const char *node, const char *tenant, const char *name, uint64_t key);
/* A node's name as the owner's per-node grant check keeps it (struct
 * rd_node_grant): 64 bits of its HMAC-SHA256 under a key random per
 * process (the values never leave it, so no name can be picked to match
 * another's), never 0. Computed when a grant is made or a peer connects,
 * not per operation. */
uint64_t rd_node_hash(const char *node);
/* HMAC-SHA256(key, "roshm-rec-v1\0" | text) */
void rd_rec_mac(const uint8_t *key, size_t keylen, const char *text, size_t len, uint8_t out[32]);

#endif
