/* SPDX-License-Identifier: MIT */
/*
 * roshmd shared definitions: clients, regions, handle tables, the
 * control -> poller command ring and the poller's per-client state.
 *
 * Ownership: the control thread creates and frees clients and regions; the
 * poller is the only thread that reads rings, handle tables (poller view)
 * and region memory on the data path. Every change the poller must see goes
 * through a command on the command ring, and the control thread waits for
 * the poller's acknowledgement before it frees or reuses anything.
 */
#ifndef ROSHMD_H
#define ROSHMD_H

#include <errno.h>
#include <stdatomic.h>
#include <rte_log.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "roshm/abi.h"
#include "roshm/ctl.h"
#include "config.h"
#include "registry/registry.h"

/*
 * Logs (log.c): one DPDK log type per component. A file that logs defines
 * RD_LOG_COMPONENT (RD_LC_*) and writes RD_LOG(LEVEL, fmt, ...): one line
 * per event, "roshm.tcp: ..."; never on the data path per operation.
 */
enum rd_log_comp { RD_LC_CONTROL, RD_LC_POLLER, RD_LC_TCP, RD_LC_VERBS, RD_LC_REGISTRY, RD_LC_N };
extern int rd_logtypes[RD_LC_N];
extern const char *const rd_log_names[RD_LC_N];
/* log.level's name as an RTE_LOG_* level. */
int rd_log_level(const char *s);
/* After rte_eal_init: register the types; a type that an EAL --log-level
 * of @eal_argv names has the EAL's level, the others @level (log.level). */
void rd_log_init(const char *level, int eal_argc, char *const *eal_argv);
/* A new log.level (SIGHUP) for the types the EAL line does not name. */
void rd_log_set_default(const char *level);
#define RD_LOGC(comp, level, fmt, ...) \
	rte_log(RTE_LOG_##level, (uint32_t)rd_logtypes[comp], "%s: " fmt "\n", rd_log_names[comp], \
		##__VA_ARGS__)
#define RD_LOG(level, fmt, ...) RD_LOGC(RD_LOG_COMPONENT, level, fmt, ##__VA_ARGS__)

#ifndef container_of
#define container_of(ptr, type, member) ((type *)(void *)((char *)(ptr) - offsetof(type, member)))
#endif

/* A stat written by one thread (the poller) and read by another. */
#define RD_STAT_ADD(x, n) __atomic_store_n(&(x), (x) + (n), __ATOMIC_RELAXED)
#define RD_STAT_GET(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

struct rd_peer;
struct rd_dial;

/*
 * An object the data path may still touch when the control thread is done
 * with it (a region a transaction still targets, a client whose arena a
 * verbs WR still reads). The control thread hands it over with a command;
 * the poller counts its own references (dp_refs) and, when the last one
 * goes, pushes it on its graveyard (a lock-free stack) and rings ev_efd; the
 * control thread frees it from there. Nothing is freed while the poller may
 * touch it, and the control thread never waits for that.
 */
enum rd_defer_kind { RD_DEFER_REGION, RD_DEFER_CLIENT };
struct rd_defer {
	struct rd_defer *next;
	enum rd_defer_kind kind;
};

/* Peer nodes that may each hold one raw reservation of a grant region's
 * log at a time (struct rd_region node_res); more at once wait (-EAGAIN). */
#define RD_TXN_RES_NODES 64u

/*
 * The owner's record of its last RD_TXN_IDS one-round-trip commits to a
 * region (tcp TXN_COMMIT, txn_owner.c): an attempt sent
 * again after its answer was lost finds its outcome here, however far the
 * log has moved on since. Private memory (the log is the owner pod's).
 */
#define RD_TXN_IDS 512u
struct rd_txn_ids {
	uint64_t since;               /* txn_tail when it began: later sequences are all here */
	uint64_t evicted;             /* 1 + the highest sequence that fell out, 0: none */
	uint32_t n, next;
	struct { uint64_t id, res; } e[RD_TXN_IDS]; /* res: ROSHM_TCP_TXN(kind, seq) */
};

/*
 * What a local ROSHM_POLICY_GRANT region's grants let other nodes do, as
 * its owner's roshmd checks every request a peer node sends (the tcp
 * responder): a node's request passes only inside one grant naming a
 * grantee on that node. The grantee's own roshmd checks its client
 * against the record too; this check is the owner's, so a revoke holds
 * for the whole node at once, before the other node reads the record.
 */
struct rd_node_grant {
	uint64_t node;                /* rd_node_hash() of the grantee's node (registry.h) */
	uint64_t lo, hi;              /* data offsets [lo, hi) */
	uint32_t access;              /* ROSHM_ACCESS_* */
};
struct rd_node_grants {
	bool any;                     /* a grant of unknown node (by id): every node passes */
	uint32_t n;
	struct rd_node_grant e[];
};

struct rd_region {
	uint32_t id;                  /* local: slot in the export table (1..max_regions);
					 remote: the owner node's region id */
	bool remote;                  /* lives on another node, reached through @peer */
	struct rd_peer *peer;
	char node[ROSHM_NAME_MAX];    /* owning node */
	char tenant[ROSHM_NAME_MAX];
	char name[ROSHM_NAME_MAX];
	uint64_t epoch;
	uint32_t key;                 /* random per epoch, checked by remote transports */
	uint32_t policy;
	uint32_t ntenants;
	char tenants[ROSHM_POLICY_TENANTS_MAX][ROSHM_NAME_MAX];
	/* local, ROSHM_POLICY_GRANT (control): the regions whose owners may
	 * open it, each as rd_grant_id() of that region; grants_cap of them
	 * allocated (limits.max_grants at most), freed with the region */
	uint32_t ngrants, grants_cap;
	struct rd_grant *grants;
	/* control: per grant, rd_node_hash() of the node its grantee lives
	 * on, 0 where the grant names only an id (ROSHM_GRANT_ADD_ID) */
	uint64_t *grant_node;
	/* control: per grant, what the provider registered for it alone
	 * (verbs: an MR of its part with its operations, whose rkey is the
	 * grant's nic_rkey), or NULL; released when the grant goes */
	void **grant_nic;
	bool grants_unknown;          /* control: some grant_node is 0: looked for again at
				       * grants_resolve_ns (rd_grants_timer), backing off */
	uint32_t grants_resolve_ms;
	uint64_t grants_resolve_ns;
	/* poller view (RD_CMD_NODE_GRANTS): the grants of other nodes, which
	 * the tcp responder holds each request to (rd_node_granted); NULL:
	 * none. Freed with the region. */
	struct rd_node_grants *node_grants;
	/* poller view, a local grant region with a log: per slot, the
	 * sequence a peer node reserved in it over tcp and that node
	 * (rd_node_hash); only that node stages, commits or gives up that
	 * sequence there (tcp_resp.c). Freed with the region. */
	struct rd_slot_owner {
		uint64_t seq, node;
	} *slot_owner;
	/* poller view, with slot_owner (the same allocation, after its
	 * txn_slots entries): per peer node, the last sequence it reserved
	 * with a raw FETCH_ADD on txn_tail over tcp ({UINT64_MAX, 0}: none),
	 * nres = min(txn_slots, RD_TXN_RES_NODES) of them: a node reserves
	 * again only once that one is committed or given up
	 * (rd_tcp_tail_reserve). */
	struct rd_slot_owner *node_res;
	uint32_t nres;
	int fd;
	void *map;
	size_t map_size;
	bool hugetlb;
	bool tampered;                /* local: its owner punched a hole (guard.h); atomic */
	bool tamper_seen;             /* control: acted on it */
	bool no_record;               /* control: its publish failed: the record is not ours */
	bool rec_dirty;               /* control: a grant's record write failed: written again
					 (rd_grants_timer) */
	struct rd_guard *guard;       /* local: watching its mapping, or NULL */
	uint8_t *data;                /* data area in roshmd's mapping */
	uint64_t data_size;
	/* transaction log layout (local and remote) */
	uint32_t txn_slots;
	uint32_t slot_size;
	uint64_t data_off;            /* offset of the data area in the region */
	/* What clients other than the owner may do (roshm_region_opts): set at
	 * create, carried in the record; the poller checks them (rd_sqe_check),
	 * the tcp responder again. restricted: any of them is not the default. */
	bool restricted;
	uint32_t access;              /* ROSHM_ACCESS_* */
	uint64_t win_lo, win_hi;      /* data-area offsets [lo, hi) */
	uint64_t va_base;             /* 0, or openers' offsets are addresses */
	uint64_t hole_since;          /* owner's poller: when the next sequence became a hole */
	uint64_t abort_sent;          /* owner's poller: when its abort CAS went to the NIC */
	uint64_t applied;             /* owner's poller: next sequence to apply */
	struct rd_txn_ids *txn_ids;   /* owner's poller: recent one-round-trip outcomes (txn_owner.c) */
	uint64_t txn_hint;            /* writer's poller: highest txn_applied seen */
	uint64_t txn_lb;              /* writer's poller: a lower bound of txn_tail (a reserved
					 sequence + 1), for TXN_COMMIT's look after a lost answer */
	struct rd_provider *xport;    /* provider that reaches this region */
	struct rd_client *owner;      /* control view; NULL once closed */
	uint32_t owner_handle;
	uint32_t refs;                /* control view: owner + open handles */
	bool dead;                    /* poller view: set by RD_CMD_REGION_DEAD */
	bool ctl_dead;                /* control view of the same */
	bool recheck;                 /* control, remote: its record changed (file registry),
				       * revalidated at recheck_ns */
	uint64_t recheck_ns;          /* control, remote: not again before this */
	bool draining;                /* poller view, local: no new work, finish the log */
	bool paused;                  /* poller view, remote: stale, hold work until the next epoch */
	uint32_t gen;                 /* remote: bumped when retargeted to a new epoch */
	bool keep_log;                /* remote: the last retarget kept the same memory */
	uint64_t mem_id;              /* the memory behind it (survives re-attach) */
	uint64_t grant_key;           /* local: the secret in its grant id (header, re-attach) */
	uint64_t gid;                 /* rd_grant_id() of it: local, made at create; remote, the
					 record's (control) */
	uint64_t grants_seen;         /* remote, ROSHM_POLICY_GRANT: a hash of the record's
					 grants as last enforced (control) */
	/* verbs: local regions have an MR over the whole mapping; remote ones
	 * carry the owner's rkey and mapping address from the registry */
	void *mr;                     /* struct ibv_mr * */
	uint32_t rkey;
	uint64_t raddr;
	/* control view */
	bool ctl_draining, ctl_paused;
	bool pause_looked;            /* control: looked at when drain.timeout_ms ran out */
	bool retarget_wait;           /* control: paused, its next instance's node (retarget_node)
				       * being dialed: looked at again when that dial succeeds */
	char retarget_node[ROSHM_NAME_MAX];
	uint64_t paused_since;
	int tidx;                     /* local: the owner's tenant (quota), -1 remote */
	struct rd_region *next, *prev; /* control's list */
	struct rd_region *name_next;  /* control: local regions by name (hash chain) */
	/* lifetime: control's refs above; the poller's own below */
	uint32_t dp_refs;             /* poller: transactions and WRs that use it */
	bool released;                /* poller: control let go; free when dp_refs is 0 */
	bool zombie;                  /* control: handed to the poller to free later */
	struct rd_defer defer;
	struct rd_region *znext;      /* control: zombies, freed at exit if still held */
};

/*
 * Whether node @node may do @need (ROSHM_ACCESS_*) on data offsets
 * [off, off + len) of local region @rg (@any_range: anywhere in it, for a
 * transaction's raw accesses, which the log's rules bound). Poller thread.
 */
static inline bool rd_node_granted(const struct rd_region *rg, uint64_t node, uint32_t need,
				   uint64_t off, uint64_t len, bool any_range)
{
	const struct rd_node_grants *ng = rg->node_grants;

	if (rg->policy != ROSHM_POLICY_GRANT)
		return true;
	if (!ng)
		return false;
	if (ng->any)
		return true;
	for (uint32_t i = 0; i < ng->n; i++) {
		const struct rd_node_grant *e = &ng->e[i];

		if (e->node != node || (need & ~e->access))
			continue;
		if (any_range || (off >= e->lo && off <= e->hi && len <= e->hi - off))
			return true;
	}
	return false;
}

#define RD_VERBS_QPS_MAX 8
struct rd_provider;

struct rd_peer {
	char node[ROSHM_NAME_MAX];
	char endpoint[128];
	struct rd_provider *prov;     /* the provider its endpoint's scheme names */
	void *priv;                   /* the provider's per-peer state (cp->peer_alloc) */
	bool self;                    /* verbs loopback to this node (atomics on our regions) */
	bool dp_up;                   /* poller view: connected (PEER_UP .. down) */
	/* poller: each tenant's operations in flight to this peer, within
	 * quota.peer_inflight, so that no tenant takes every slot of a
	 * connection that all tenants share */
	uint32_t tenant_inflight[RD_TENANTS_MAX];
	/* control view */
	bool ctl_up;
	bool dialing;                 /* a connect is under way (never waited for) */
	bool resetting;               /* re-made after RD_EV_PEER_RESET: the poller holds work */
	uint64_t reset_window_ns;     /* resets in the second from here: past RESETS_PER_SEC, */
	uint32_t resets_in_window;    /* the re-dial backs off as any reconnect does */
	uint64_t dial_deadline_ns;
	uint32_t refs;                /* remote regions that point here */
	uint64_t retry_ns;
	uint64_t backoff_ns;          /* the next reconnect's delay (doubles while failing) */
	int last_err;
	struct rd_peer *next;
};

/* A peer's counters, whatever its provider (metrics, admin). */
struct rd_peer_stats {
	uint64_t ops;                 /* operations sent (tcp frames, verbs WRs) */
	uint64_t doorbells;           /* verbs: ibv_post_send calls */
	uint64_t errors;              /* verbs: error completions */
	uint64_t resets;              /* verbs: re-made after a refused WR */
	uint64_t reposted;            /* verbs: WRs posted again after a reset */
	bool nic;                     /* doorbells and errors are counted (a NIC provider) */
};

struct rd_handle {
	struct rd_region *region;
	uint16_t gen;
	bool own;                     /* the owner's handle: not limited by access/window */
	/* opened for a part of the region (roshm_ctl_region_open): the data
	 * offsets [lo, hi) and the operations in @access only */
	bool part;
	uint32_t access;
	uint64_t lo, hi;
	/* a remote region over verbs: the rkey of the owner's MR for the
	 * grant this handle was opened under (its nic_rkey), which the
	 * transport uses instead of the region's; 0: the region's */
	uint32_t nic_rkey;
};

#define RD_BATCH_BUCKETS 12 /* 1, 2, 4, ... 2048 */

/*
 * The poller's operation counters (metrics.c shows them). Rows by the
 * transport that carried the operation (struct rd_provider xp); RD_XP_NONE:
 * none did (NOP, FENCE, an SQE refused before it reached one).
 */
enum { RD_XP_NONE, RD_XP_LOCAL, RD_XP_TCP, RD_XP_VERBS, RD_XPORTS };
/* Columns by opcode: ROSHM_OP_* (TXN_WRITE never completes on its own),
 * then one for opcodes roshmd does not know. */
#define RD_SOPS (ROSHM_OP__MAX + 1)
/* A completion's status, as a class an operator can act on. */
enum rd_status_class {
	RD_ST_OK,
	RD_ST_INVALID,                /* the SQE: -EINVAL -EBADF -EFAULT -EOPNOTSUPP -EMSGSIZE */
	RD_ST_DENIED,                 /* -EACCES (a key or bounds the owner refused) */
	RD_ST_STALE,                  /* -ESTALE: the region went away or was re-created */
	RD_ST_UNREACHABLE,            /* -EHOSTUNREACH: its node is down or unreachable */
	RD_ST_RESET,                  /* -ECONNRESET: connection lost, outcome unknown */
	RD_ST_BUSY,                   /* -EAGAIN (draining) -EBUSY -ENOSPC -EDQUOT (quotas) */
	RD_ST_TIMEOUT,                /* -ETIMEDOUT (a transaction's deadline) */
	RD_ST_ERROR,                  /* anything else (-EIO, -EPROTO, ...) */
	RD_STATUSES
};
static inline unsigned rd_status_class(int32_t status)
{
	switch (status) {
	case 0: return RD_ST_OK;
	case -EINVAL: case -EBADF: case -EFAULT: case -EOPNOTSUPP: case -EMSGSIZE: return RD_ST_INVALID;
	case -EACCES: return RD_ST_DENIED;
	case -ESTALE: return RD_ST_STALE;
	case -EHOSTUNREACH: return RD_ST_UNREACHABLE;
	case -ECONNRESET: return RD_ST_RESET;
	case -EAGAIN: case -EBUSY: case -ENOSPC: case -EDQUOT: return RD_ST_BUSY;
	case -ETIMEDOUT: return RD_ST_TIMEOUT;
	default: return RD_ST_ERROR;
	}
}
/* Latency histograms: rows RD_XP_LOCAL.. (index xp - 1), the operations
 * that reach a transport. */
enum { RD_LOP_WRITE, RD_LOP_READ, RD_LOP_FETCH_ADD, RD_LOP_CMP_SWAP, RD_LOP_TXN_COMMIT, RD_LOPS };
#define RD_LAT_XPORTS (RD_XPORTS - 1)
/* <= 1/8 us, 1/4 us, ... 2^22/8 us (524 ms); then one overflow bucket */
#define RD_LAT_BUCKETS 23

/* A big local WRITE/READ in progress, a piece per poll round. */
struct rd_copy {
	struct roshm_sqe sqe;         /* the validated copy */
	struct rd_region *region;     /* held; NULL: no copy in progress */
	struct rd_region *lbuf;       /* held: the client's own region instead of its arena */
	uint32_t done;
	uint64_t tsc;                 /* consumed at (its latency) */
};

struct rd_client_stats {
	uint64_t sqes;
	uint64_t errors;
	uint64_t bytes;
};

struct rd_conn;
struct rd_client {
	uint32_t id;                  /* slot (low 16 bits) | reuse count << 16 */
	struct rd_conn *conn;         /* control: its connection */
	int sock;
	/* Wakeups are datagram socketpairs, not eventfds: roshmd keeps its own
	 * ends (its own file descriptions) and never blocks on them whatever
	 * the client does to its ends (MSG_DONTWAIT; MSG_NOSIGNAL). */
	int sq_rfd;                   /* client -> poller wakeup: roshmd's end */
	int cq_wfd;                   /* poller -> client wakeup: roshmd's end */
	pid_t pid;
	uid_t uid;
	char tenant[ROSHM_NAME_MAX];
	int tidx;                     /* index of its tenant in cfg->tenants */
	/* Its grant identity (ROSHM_GRANT_ADD_OWNER): cgid = rd_grant_id(node,
	 * tenant, "", ckey), in its regions' records as their owner's. ckey is
	 * a secret it may bring back after a restart (struct roshm_ctl_hello);
	 * no two live clients of this roshmd have the same one. */
	uint64_t ckey, cgid;
	char pod[ROSHM_NAME_MAX];     /* the pod it says it belongs to (HELLO, under its token) */
	/* channel memory (the client's memfd); sizes and offsets are roshmd's own copies */
	void *chan;
	size_t chan_size;
	bool hugetlb;
	struct roshm_chan_hdr *hdr;
	uint32_t *sq_ktail;           /* client-written: untrusted */
	uint32_t *sq_khead;
	struct roshm_sqe *sqes;
	uint32_t sq_entries, sq_mask;
	uint32_t *cq_khead;           /* client-written: untrusted */
	uint32_t *cq_ktail;
	struct roshm_cqe *cqes;
	uint32_t cq_entries, cq_mask;
	uint8_t *arena;
	uint64_t arena_size;
	void *mr;                     /* verbs: struct ibv_mr * over the channel */
	uint32_t lkey;
	/* handle tables: one per side, same size */
	uint32_t nhandles;
	uint32_t handle_hint;            /* control: no free handle below it */
	struct rd_handle *ctl_handles;   /* control thread */
	struct rd_handle *dp_handles;    /* poller */
	/* poller state */
	uint32_t sq_head;             /* local copy; the shared one is never read back */
	uint32_t cq_tail;
	uint32_t inflight;            /* consumed SQEs without a posted CQE */
	uint32_t sq_pub, cq_pub;      /* indices last published */
	bool fenced;                  /* a FENCE waits for inflight == 0 */
	bool sq_busy;                 /* poller: its next SQE's transport had no room (-EBUSY) */
	struct rd_copy copy;          /* poller: a big local copy in progress */
	int64_t round_left;           /* poller: of ROUND_BYTES, what this round's passes left */
	struct rd_txn *txn_build;     /* poller: the transaction being gathered */
	int32_t txn_err;              /* poller: the gathered transaction already failed (no context) */
	uint32_t txn_active;          /* poller: its transactions in flight (txn.max_per_client) */
	bool dead;                    /* poller: ring corrupted, no more service */
	struct rd_client_stats stats; /* poller writes, control reads */
	struct rd_client *next;       /* control's list */
	/* lifetime (see struct rd_defer) */
	uint32_t dp_refs;             /* poller: WRs in flight that read or write its arena */
	bool released;                /* poller: detached; free when dp_refs is 0 */
	bool zombie;                  /* control: handed to the poller to free later */
	struct rd_defer defer;
	struct rd_client *znext;
};

enum rd_cmd_type {
	RD_CMD_CLIENT_ADD,
	RD_CMD_CLIENT_DEL,            /* result 1: free it now; 0: the poller hands it back later */
	RD_CMD_HANDLE_SET,
	RD_CMD_HANDLE_CLEAR,
	RD_CMD_REGION_DEAD,
	RD_CMD_REGION_EXPORT,         /* local region reachable by peers (by id) */
	RD_CMD_REGION_UNEXPORT,
	RD_CMD_PEER_UP,               /* outbound connection of @peer is @fd */
	RD_CMD_PEER_DOWN,             /* fail everything on it (registry says it is gone) */
	RD_CMD_INBOUND_ADD,           /* an authenticated peer connection: @fd, @node */
	RD_CMD_REGION_DRAIN,          /* local @region: refuse new work, finish its log */
	RD_CMD_REGION_PAUSE,          /* remote @region: hold (@fd = 1) or release (0) work */
	RD_CMD_REGION_RETARGET,       /* remote @region: now the instance described by @target */
	RD_CMD_REGION_RELEASE,        /* control let go of @region: result 1 free it now, 0 the
					 poller frees it later (graveyard) */
	RD_CMD_SHARE_SET,             /* tenant @handle's share: @share (SIGHUP) */
	RD_CMD_NODE_GRANTS,           /* local @region's grants of other nodes are @ngrants;
					 the old ones come back in @ngrants */
};

struct rd_cmd {
	enum rd_cmd_type type;
	struct rd_client *client;
	struct rd_region *region;
	uint32_t handle;
	struct rd_peer *peer;
	int fd;
	const char *node;
	const struct rd_region *target;
	int status;                   /* PEER_DOWN: what its operations fail with */
	const char *why;
	const struct rd_quota *share; /* SHARE_SET: weight, ops_per_sec, bytes_per_sec */
	bool own;                     /* HANDLE_SET: the region's owner's handle */
	const struct rd_handle *limits; /* HANDLE_SET: its part (part, access, lo, hi) */
	struct rd_node_grants *ngrants; /* NODE_GRANTS */
	int result;                   /* poller's answer (0 or -errno) */
	atomic_int done;              /* poller sets it (release) when applied */
};

enum rd_event_type {
	RD_EV_CLIENT_CORRUPT,         /* poller gave up on a client's rings */
	RD_EV_PEER_DOWN,              /* outbound connection lost: @peer */
	RD_EV_PEER_RESET,             /* @peer refused one operation: re-make its connection,
				       * the poller holds the others' work meanwhile */
	RD_EV_INBOUND_DOWN,           /* inbound connection from @node closed */
};

struct rd_event {
	enum rd_event_type type;
	uint32_t client_id;
	struct rd_peer *peer;
	char node[ROSHM_NAME_MAX];
	char why[64];
};

enum { RD_HELD_RATE, RD_HELD_SHARE, RD_HELD_PEER, RD_HELD_REASONS };
struct rd_poller_stats {
	uint64_t rounds;
	uint64_t busy_rounds;
	uint64_t sleeps;
	uint64_t sqes;
	uint64_t errors;
	uint64_t corrupt_clients;
	uint64_t events_lost;         /* poller -> control events that found the ring full */
	uint64_t batch_hist[RD_BATCH_BUCKETS];
	uint64_t batch_sqes;          /* sum over the batches of batch_hist */
	uint64_t cq_full;             /* client rounds that left SQEs for want of CQ room */
	uint64_t copy_yields;         /* big copies that gave their turn to another tenant's small op */
	uint64_t xport_busy;          /* SQEs left in their ring: the transport was full */
	uint64_t txn_committed, txn_replayed, txn_log_full;   /* as writer */
	uint64_t txn_one;             /* as writer: committed in one round trip (TXN_COMMIT) */
	uint64_t txn_again;           /* as writer: TXN_COMMITs sent again, their answer lost */
	uint64_t txn_applied, txn_aborted, txn_invalid;       /* as owner */
	uint64_t txn_found;           /* as owner: a TXN_COMMIT sent again found its first attempt */
	/* completions posted to clients */
	uint64_t done[RD_XPORTS][RD_SOPS][RD_STATUSES];
	/* successful client operations, consumed to completed: buckets of
	 * 1/8 us, 1/4 us, ...; the sum in TSC cycles */
	uint64_t lat_hist[RD_LAT_XPORTS][RD_LOPS][RD_LAT_BUCKETS + 1];
	uint64_t lat_sum[RD_LAT_XPORTS][RD_LOPS];
	/* client rounds in which a tenant's waiting SQEs were held back: by
	 * its ops/bytes rate limit [RD_HELD_RATE], by its share of the round
	 * [RD_HELD_SHARE], by its share of a peer's operations in flight
	 * (quota.peer_inflight) [RD_HELD_PEER] */
	uint64_t tenant_held[RD_TENANTS_MAX][RD_HELD_REASONS];
	/* transactions refused for its share of contexts (quota.txn) */
	uint64_t tenant_txn_refused[RD_TENANTS_MAX];
};

/*
 * A tenant's share of the poller (poller only). With clients of more than
 * one tenant attached, each round gives every tenant share_quantum x weight
 * of cost (deficit round robin: a bytes-moving operation costs its length,
 * every SQE RD_OP_COST more), so that a tenant's operation waits at most a
 * quantum per other tenant, whatever the others submit. Optional token
 * buckets cap its operations and bytes per second.
 */
#define RD_OP_COST 512
struct rd_share {
	int64_t credit;               /* DRR deficit, in cost units; may go negative (a big op) */
	int64_t ops_tokens;           /* token buckets, may go negative (a big op) */
	int64_t byte_tokens;
	uint64_t ops_tsc, byte_tsc;   /* the buckets' last refill */
	uint32_t weight;
	uint64_t ops_per_sec, bytes_per_sec; /* 0: no limit */
	uint32_t nclients;            /* attached */
	bool held;                    /* this round: its rate limit holds it */
};

struct rte_ring;
struct rd_poller {
	const struct rd_config *cfg;
	struct rte_ring *cmd_ring;    /* control -> poller */
	struct rte_ring *ev_ring;     /* poller -> control */
	int epfd;                     /* adaptive idle: clients' sq_rfd + cmd_efd + transports */
	bool cq_blocked;              /* work_pending: a client's SQEs wait for CQ room */
	int cmd_efd;                  /* control rings it after enqueueing a command */
	int ev_efd;                   /* poller rings it after enqueueing an event */
	atomic_bool stop;
	atomic_bool running;
	/* liveness (/healthz): timer cycles when the poller last began a round,
	 * 0 while it sleeps in epoll (relaxed: a hint for the control thread) */
	_Atomic uint64_t heartbeat;
	atomic_bool exited;           /* rd_poller_main returned (release) */
	uint32_t nclients;
	uint32_t rr;                  /* round-robin start */
	uint32_t peek;                /* small_waiting's rotating start */
	uint32_t peeks_left;          /* small_waiting's looks left in this round */
	bool yielded;                 /* this round: a big copy stepped aside (copy_step) */
	int pass;                     /* 0, or the extra pass of the round after a copy stepped aside */
	struct rd_client **clients;   /* poller's active set, max_clients */
	struct rd_provider *local;    /* same-node regions */
	struct rd_provider *net;      /* other nodes' (tcp or verbs), NULL when neither is on */
	struct rd_txn_engine *txn;
	struct rd_share share[RD_TENANTS_MAX];
	uint32_t ntenants_on;         /* tenants with clients attached */
	bool limits_on;               /* some tenant has a rate limit */
	bool held_any;                /* a rate limit held work back: sleep until its tokens are back */
	struct rd_poller_stats stats;
	uint64_t tsc_per_us;
	uint64_t lat_mult;            /* TSC cycles to 1/8 us: (cycles * lat_mult) >> 32 */
	_Atomic(struct rd_defer *) graveyard; /* poller pushes, control pops (struct rd_defer) */
};

/* The data path's references (poller only). */
static inline void rd_region_hold(struct rd_region *rg)
{
	rg->dp_refs++;
}
void rd_region_unhold(struct rd_poller *p, struct rd_region *rg);
void rd_client_unhold(struct rd_poller *p, struct rd_client *c);
/* Control: take everything the poller let go of (a list through ->next). */
struct rd_defer *rd_poller_graveyard(struct rd_poller *p);

/* A completion posted to a client: its transport row @xp, @opcode, @status
 * (poller only; plain stores: this thread is the only writer). */
static inline void rd_op_count(struct rd_poller *p, unsigned xp, uint8_t opcode, int32_t status)
{
	unsigned o = opcode < ROSHM_OP__MAX ? opcode : ROSHM_OP__MAX;

	RD_STAT_ADD(p->stats.done[xp][o][rd_status_class(status)], 1);
	if (status)
		RD_STAT_ADD(p->stats.errors, 1);
}

/* Latency of a successful client operation @opcode on transport row @xp
 * (RD_XP_LOCAL..), TSC @t0 to @now (poller only). */
/* @n operations of @opcode over @xp that took @cycles each. */
static inline void rd_lat_record_n(struct rd_poller *p, unsigned xp, uint8_t opcode, uint64_t cycles,
				   unsigned n)
{
	unsigned o, b;
	uint64_t u;

	switch (opcode) {
	case ROSHM_OP_WRITE: o = RD_LOP_WRITE; break;
	case ROSHM_OP_READ: o = RD_LOP_READ; break;
	case ROSHM_OP_FETCH_ADD: o = RD_LOP_FETCH_ADD; break;
	case ROSHM_OP_CMP_SWAP: o = RD_LOP_CMP_SWAP; break;
	case ROSHM_OP_TXN_COMMIT: o = RD_LOP_TXN_COMMIT; break;
	default: return;
	}
	if (xp == RD_XP_NONE || xp >= RD_XPORTS)
		return;
	u = (uint64_t)(((unsigned __int128)cycles * p->lat_mult) >> 32);
	b = u <= 1 ? 0 : 64 - (unsigned)__builtin_clzll(u - 1);
	if (b > RD_LAT_BUCKETS)
		b = RD_LAT_BUCKETS;
	RD_STAT_ADD(p->stats.lat_hist[xp - 1][o][b], n);
	RD_STAT_ADD(p->stats.lat_sum[xp - 1][o], cycles * n);
}

static inline void rd_lat_record(struct rd_poller *p, unsigned xp, uint8_t opcode, uint64_t t0,
				 uint64_t now)
{
	rd_lat_record_n(p, xp, opcode, now - t0, 1);
}

/* A tenant's operations in flight to a peer (poller only): may one more go? */
static inline bool rd_peer_inflight_ok(const struct rd_poller *p, const struct rd_peer *peer,
				       const struct rd_client *c)
{
	return !c || peer->tenant_inflight[c->tidx] < p->cfg->tenants[c->tidx].quota.peer_inflight;
}

/* Post a completion for an operation whose CQ slot was reserved, and count
 * it (@xp: the transport row that carried it) (poller only). */
void rd_op_complete(struct rd_poller *p, struct rd_client *c, unsigned xp, uint8_t opcode,
		    uint64_t user_data, int32_t status, uint64_t result);
/* Events for the control thread (poller only). */
void rd_poller_post_event(struct rd_poller *p, const struct rd_event *ev);

/* Hand a validated operation to its region's provider, after the checks
 * they all need (paused, peer down, too large): RD_OP_DONE, RD_OP_QUEUED or
 * -EBUSY (transport.h). Poller only. */
struct rd_op;
int rd_poller_submit(struct rd_poller *p, struct rd_op *op);
/* Install @pv as the poller's network provider (host callbacks, its init,
 * its wake fd): rd_poller_init does, with tcp or verbs; tests with a mock. */
struct rd_provider;
int rd_poller_set_net(struct rd_poller *p, struct rd_provider *pv);
/* For how long the poller has been in its current round: 0 while it sleeps
 * (or does not run); the liveness probe's measure (control thread). */
uint64_t rd_poller_stuck_ms(const struct rd_poller *p);
/* Add @fd to what wakes a sleeping poller (before it runs). 0 or -errno. */
int rd_poller_watch(struct rd_poller *p, int fd);

int rd_poller_init(struct rd_poller *p, const struct rd_config *cfg);
void rd_poller_fini(struct rd_poller *p);
int rd_poller_main(void *arg);
/* One poll round; returns the number of SQEs handled. Exposed for tests. */
unsigned rd_poller_round(struct rd_poller *p);
/* Apply the control commands queued for the poller (poller thread only). */
void rd_poller_drain_cmds(struct rd_poller *p);
/* One control command, on the poller thread (or in place while it does not run). */
void rd_poller_apply_cmd(struct rd_poller *p, struct rd_cmd *cmd);
/* Tenants' shares (share.c): a tenant's weight and limits, the per-round
 * credit and refill, and how long an idle poller may sleep for held ones. */
void rd_share_set(struct rd_poller *p, int t, const struct rd_quota *q);
void rd_share_round(struct rd_poller *p);
int rd_share_held_ms(const struct rd_poller *p);
/*
 * Control side: run one command on the poller and wait until it is applied.
 * It waits as long as that takes (a poll round is bounded): returning
 * earlier would leave the poller holding a command on our stack, and the
 * caller freeing what the command still names. A stuck poller stops the
 * control thread, and the liveness probe notices.
 */
int rd_poller_cmd(struct rd_poller *p, struct rd_cmd *cmd);

/* Region memory (region.c): the owner's memfd @fd, taken, sealed, and
 * initialised (or, with @reattach, checked and kept). 0 or -errno. */
struct rd_guard;
/* @guard (may be NULL) watches the mapping for holes the owner punches. */
int rd_region_take(struct rd_region *rg, struct rd_guard *guard, int fd, uint64_t data_size,
		   uint32_t txn_slots, uint32_t slot_size, bool reattach);
void rd_region_free(struct rd_region *rg);
/* Fill @rg's new rd_txn_ids from its log, whose txn_tail was @tail (txn_owner.c). */
void rd_txn_ids_from_log(struct rd_region *rg, uint64_t tail);

/* Client memory (shm.c): map and seal a memfd the client made and touched.
 * Flags: */
#define RD_MEM_HUGE_OK 1u     /* it may be MFD_HUGETLB (size rounded up to 2 MiB) */
#define RD_MEM_HUGE_REQ 2u    /* it must be */
#define RD_MEM_NO_HOLES 4u    /* seal F_SEAL_FUTURE_WRITE too: no hole punching from now on */
#define RD_MEM_SEALED_OK 8u   /* already sealed by an earlier roshmd (re-attach) */
#define RD_MEM_NO_POPULATE 16u /* the caller populates (rd_memfd_populate) */
int rd_memfd_take(int fd, uint64_t size, unsigned flags, void **map, size_t *map_size, bool *huge);
/* Page tables for a mapping rd_memfd_take made, then the check that every
 * page of @fd is still there. 0 or -EFAULT. */
int rd_memfd_populate(int fd, void *map, size_t size);

#endif
