/* SPDX-License-Identifier: MIT */
#ifndef RD_CONTROL_H
#define RD_CONTROL_H

#include "roshmd.h"
#include "registry/registry.h"
#include "transport/transport.h"
#include "guard.h"

struct rd_conn;
struct json_t;


#define RD_NAME_BUCKETS 4096

/* What a tenant holds on this node, against its quota (control thread). */
struct rd_tenant_use {
	uint32_t clients;
	uint32_t regions;
	uint64_t bytes;
	uint32_t grant_mrs;           /* NIC MRs of its grants (quota.grant_mrs) */
	uint64_t grant_mr_bytes;      /* the bytes they cover (quota.bytes) */
	uint64_t grants_no_mr;        /* grants to other nodes made without one (a metric) */
	uint64_t grant_mrs_logged;    /* when a grant without one was last logged */
	uint32_t drains;              /* its drains that connections not attached wait for */
};


/* A tenant's registry operations (quota.registry_ops_per_sec, reg_rate.c). */
struct rd_reg_bucket {
	int64_t tokens;
	uint64_t last_ns;
	uint64_t held;                /* requests that waited for it (a metric) */
	uint64_t logged_ns;           /* when that was last logged */
	struct rd_conn *q_head, *q_tail; /* connections waiting, first come first */
};

struct rd_control {
	const struct rd_config *cfg;
	struct rd_poller *poller;
	struct rd_registry reg;
	int listen_fd;
	int epfd;
	int sig_fd;
	uint32_t next_client_id;
	uint32_t next_region_id;
	uint32_t nclients;
	uint32_t nregions;
	struct rd_client *clients;
	struct rd_region *regions;
	struct rd_conn *conns;        /* newest first */
	struct rd_conn *conns_tail;   /* the oldest */
	bool accept_paused;           /* every pending slot taken: newcomers wait in the backlog */
	uint64_t accept_resume_ns;    /* ...until then at most (0: until a slot changes) */
	uint64_t accept_gen;          /* rd_conn_accept's calls (struct rd_conn peek_gen) */
	/* evictable() (accept.c): connections before HELLO per source, a
	 * table of src_cap entries, valid where gen == evict_gen */
	struct rd_src_count { uint64_t src, gen; uint32_t n; } *src_tab;
	uint32_t src_cap;
	uint64_t evict_gen;
	struct rd_region **slots;     /* local regions by id (1..max_regions) */
	/* tcp transport, control side (peers.c) */
	struct rd_peer *peers;
	uint32_t npeers;
	char endpoint[96];            /* what peers dial: "tcp:HOST:PORT" (addr.h) */
	struct rd_peer *self;         /* the loopback peer (atomics through the provider), or NULL */
	int metrics_fd;               /* /metrics listener, -1 when off */
	const char *cfg_path;         /* the configuration file (SIGHUP reloads from it) */
	struct rd_mconn *mconns;
	struct rd_mconn *mdead;       /* closed in this epoll batch, freed after it */
	uint64_t tenant_sqes_gone[RD_TENANTS_MAX]; /* of detached clients: counters never go down */
	/* requests refused for a tenant's quota (-EDQUOT): attach (clients,
	 * bytes), region create (regions, bytes) */
	uint64_t tenant_attach_refused[RD_TENANTS_MAX];
	uint64_t tenant_region_refused[RD_TENANTS_MAX];
	struct rd_tel *tel;           /* telemetry snapshot */
	uint64_t next_revalidate_ns;
	bool recheck_pending;         /* a remote region has recheck set */
	uint64_t pause_due_ns;        /* the first paused region's drain.timeout_ms ends (0: none) */
	uint32_t retarget_waits;      /* regions set retarget_wait since the last count (peers.c
				       * redial_awaited; 0: none waits) */
	uint64_t redial_ns;           /* redial_awaited: not again before this */
	bool node_published;          /* our node record is in the registry (fini deletes it) */
	struct rd_drain_job *drains;
	volatile int stopping;        /* SIGTERM: draining, then stop */
	uint64_t start_ns;
	uint64_t instance;            /* random per start (HELLO reply) */
	volatile int stop;
	bool failed;                  /* stopped for an error (roshmd exits 1) */
	struct rd_region *by_name[RD_NAME_BUCKETS];
	struct rd_tenant_use tuse[RD_TENANTS_MAX];
	struct rd_reg_bucket reg_bucket[RD_TENANTS_MAX];
	struct rd_client **client_slots; /* attached clients by id & 0xffff */
	uint32_t npending;            /* connections not attached (admin.max_pending) */
	uint16_t next_slot_gen;
	struct rd_region *zombie_regions; /* handed to the poller, freed from its graveyard */
	uint64_t grants_retry_ns;     /* rd_grants_timer's last look */
	struct rd_grant_defer *grant_defer; /* revoked grants' MRs, released later (grants.c) */
	struct rd_client *zombie_clients;
	char admin_token[ROSHM_ADMIN_TOKEN_MAX]; /* "" : none */
	struct rd_conn *dead_conns;   /* closed in this epoll batch, freed after it */
	uint64_t refused_conns;       /* over admin.max_pending: evicted */
	uint64_t next_wait_id;        /* names a waiting request to the registry's completion */
	int lock_fd;                  /* flock on the socket's lock: one roshmd per socket */
	int node_lock_fd;             /* one roshmd per node name of a registry (take_node_lock) */
	uint64_t sock_dev, sock_ino;  /* the socket file we bound: the only one we unlink */
	struct rd_guard guard;        /* holes punched in regions (guard.h) */
	uint64_t tampered_regions;
};

/* loop.c: the control thread */
int rd_control_init(struct rd_control *ctl, const struct rd_config *cfg, struct rd_poller *p);
/* Serve until SIGTERM/SIGINT; returns 0 on an orderly stop. */
int rd_control_run(struct rd_control *ctl);
/* One turn of the control loop: wait up to @timeout_ms for events, handle
 * them, run the timers (rd_control_run is this in a loop; fuzzers drive it). */
void rd_control_step(struct rd_control *ctl, int timeout_ms);
/* SIGHUP: reload tokens, log.level and the control thread's quotas from
 * ctl->cfg_path (set by main after init). */
void rd_control_reload(struct rd_control *ctl);
void rd_control_reload_file(struct rd_control *ctl);
/* sd_notify(3): @state to $NOTIFY_SOCKET, when systemd gave one. */
void rd_notify(const char *state);
/* Release every client and region (after the poller stopped). */
void rd_control_fini(struct rd_control *ctl);
/* attach.c: serve @fd, an already connected control-socket peer with these
 * credentials, as if it had been accepted (fuzzers, tests). */
int rd_control_adopt_conn(struct rd_control *ctl, int fd, pid_t pid, uid_t uid);

/* loop.c, for the control thread's other files (peers.c, drain.c, metrics.c) */
uint64_t rd_mono_ns(void);
int rd_control_cmd(struct rd_control *ctl, struct rd_cmd *cmd);
void rd_control_epoll_add(struct rd_control *ctl, int fd, void *tag);
void rd_control_epoll_del(struct rd_control *ctl, int fd);

/* reg_rate.c: @n registry operations charged to @tenant (a drain it asked for). */
void rd_reg_rate_take_tenant(struct rd_control *ctl, const char *tenant, unsigned n);
/* grants.c: write again the grant records whose last write failed */
void rd_grants_timer(struct rd_control *ctl, uint64_t now);
/* grants.c: release the revoked grants' MRs that are due (@rg NULL), or
 * all of @rg's (it is freed: @now 0), or those of @rg no grant of it
 * covers now (@now 1); a remote region's handles back to its own key */
void rd_grants_defer_release(struct rd_control *ctl, const struct rd_region *rg, uint64_t now);
void rd_control_handles_unkey(struct rd_control *ctl, struct rd_region *rg);
void rd_control_grants_enforce(struct rd_control *ctl, struct rd_region *rg, const char *tenant,
			       const struct rd_grant *grants, uint32_t n);
/* regions.c */
bool rd_policy_allows(uint32_t policy, const char *owner_tenant, uint32_t ntenants,
		      const char (*tenants)[ROSHM_NAME_MAX], const char *tenant);
void rd_region_unpublish(struct rd_control *ctl, struct rd_region *rg);
void rd_control_region_put(struct rd_control *ctl, struct rd_region *rg);
/* Add @rg to the control thread's lists (local ones also by name). */
void rd_control_region_link(struct rd_control *ctl, struct rd_region *rg);
void rd_region_to_rec(struct rd_control *ctl, const struct rd_region *rg,
		      struct rd_region_rec *rec, const char *state);

/* admin.c */
int rd_control_admin_reply(int fd, struct json_t *o);
/* An admin command's JSON; @tenant NULL: the node admin's view, else that
 * tenant's own part (NULL when the command is not a tenant's). */
struct json_t *rd_control_admin_json(struct rd_control *ctl, const char *cmd, const char *tenant);

/* drain.c: stop new work on regions, finish their logs, unpublish them.
 * Which regions: all NULL is every one; else those of @tenant, the region
 * "T/N", or those whose owner attached with @pod; @owner_tenant (a tenant's
 * own request) narrows any of them to its own. */
struct rd_drain_match {
	const char *tenant;
	const char *region;
	const char *pod;
	const char *owner_tenant;
};
int rd_drain_start(struct rd_control *ctl, const struct rd_drain_match *m, int reply_fd);
void rd_drain_tick(struct rd_control *ctl);
bool rd_drain_idle(const struct rd_control *ctl);
void rd_drain_forget_fd(struct rd_control *ctl, int fd);
/* attach.c: the drain answered on @fd: a connection that has not attached is closed (its one answer). */
void rd_control_drain_answered(struct rd_control *ctl, int fd);
/* loop.c: whether the control socket is watched for newcomers. */
void rd_control_listen_arm(struct rd_control *ctl, bool on);

/* peers.c: peers and remote regions, through the network provider's control ops */
int rd_peers_init(struct rd_control *ctl);
void rd_peers_fini(struct rd_control *ctl);
/* An RD_EP_PROVIDER fd of the control thread's epoll is ready. */
void rd_peers_epoll_event(struct rd_control *ctl, void *tag, uint32_t events);
/* Memory the network provider reaches (no-ops without one). */
int rd_peers_reg_client(struct rd_control *ctl, struct rd_client *c);
void rd_peers_unreg_client(struct rd_control *ctl, struct rd_client *c);
int rd_peers_reg_region(struct rd_control *ctl, struct rd_region *rg);
void rd_peers_unreg_region(struct rd_control *ctl, struct rd_region *rg);
/* Grant @i of local region @rg: its own NIC registration (nic_rkey), if
 * it gets one; its release (at once: a revoke holds at the NIC from then
 * on), or that of an MR a grant of @rg over @bytes bytes had. */
bool rd_peers_reg_grant(struct rd_control *ctl, struct rd_region *rg, uint32_t i);
void rd_peers_unreg_grant(struct rd_control *ctl, struct rd_region *rg, uint32_t i);
void rd_peers_unreg_nic(struct rd_control *ctl, struct rd_region *rg, void *nic, uint64_t bytes);
/* "tcp", "verbs", "verbs-loopback" */
const char *rd_peer_transport_name(const struct rd_peer *p);
/* 0 with *out; -EINPROGRESS: *peer is being connected, the open waits for
 * rd_control_peer_ready(); -EHOSTUNREACH, -EACCES, -ENOMEM. */
int rd_peers_open_remote(struct rd_control *ctl, const struct rd_region_rec *rec,
			 struct rd_region **out, struct rd_peer **peer);
/* A connect finished (tcp: @fd; verbs: -1): @err 0 or why not. */
void rd_peers_dial_done(struct rd_control *ctl, struct rd_peer *p, int fd, int err, const char *node);
/* regions.c: the opens waiting for @p go on (@status 0: it is up). */
void rd_control_peer_ready(struct rd_control *ctl, struct rd_peer *p, int status);
/* Whether an open waits for @p to be connected. */
bool rd_control_peer_waited(const struct rd_control *ctl, const struct rd_peer *p);
void rd_peers_region_free(struct rd_control *ctl, struct rd_region *rg);
void rd_peers_timer(struct rd_control *ctl, bool registry_changed);
/* struct rd_registry changed: a record the store says changed, looked at now. */
void rd_peers_record_changed(void *arg, const char *tenant, const char *name);
bool rd_peers_wants_tenant(void *arg, const char *tenant);
void rd_peers_event(struct rd_control *ctl, const struct rd_event *ev);
struct json_t *rd_peers_json(struct rd_control *ctl);

#endif
