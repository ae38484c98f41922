/* SPDX-License-Identifier: MIT */
#ifndef RD_CONFIG_H
#define RD_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include "roshm/ctl.h"
#include "addr.h"

#define RD_EAL_ARGS_MAX 64
#define RD_TENANTS_MAX 64
#define RD_ADMIN_UIDS_MAX 16
#define RD_PATH_MAX 256

enum rd_idle { RD_IDLE_ADAPTIVE, RD_IDLE_BUSY };
enum rd_hugepages { RD_HUGE_AUTO, RD_HUGE_ON, RD_HUGE_OFF };

/* The least transport.tcp.max_msg a node may have: every node takes frames
 * of this length (a transaction's pieces when nodes differ, txn_attempt.c). */
#define RD_TCP_MAX_MSG_MIN 4096u

/* What one tenant may hold on this node (quota group, or a tenant's own). */
struct rd_quota {
	uint32_t clients;        /* attached clients */
	uint32_t regions;        /* regions it owns here */
	uint64_t bytes;          /* channel + region memory it hands roshmd */
	uint32_t txn;            /* transactions in flight */
	uint32_t peer_inflight;  /* operations in flight to one peer node */
	uint32_t grant_mrs;      /* verbs: NIC MRs of its regions' grants (revoked at the NIC) */
	/* the poller's fair share (struct rd_share) */
	uint32_t weight;         /* share of each poller round, against other tenants' */
	uint64_t ops_per_sec;    /* SQEs per second, 0: no limit */
	uint64_t bytes_per_sec;  /* bytes moved per second, 0: no limit */
	/* registry writes and reads past the cache that its clients' control
	 * requests cause, per second (control/reg_rate.c), 0: no limit */
	uint32_t registry_ops_per_sec;
};

struct rd_tenant_cfg {
	char name[ROSHM_NAME_MAX];
	char token[ROSHM_TOKEN_MAX];
	struct rd_quota quota;
};

struct rd_config {
	char node[ROSHM_NAME_MAX];
	char socket[RD_PATH_MAX];
	int eal_argc;
	char *eal_argv[RD_EAL_ARGS_MAX];
	/* dataplane */
	int lcore;               /* -1: the first worker lcore */
	enum rd_idle idle;
	uint32_t idle_spin_us;
	uint64_t inflight_sleep_bytes; /* adaptive: sleep at once with this much in the NIC (0: never) */
	bool idle_yield;         /* adaptive: yield the CPU in each round of the idle spin */
	uint32_t burst;
	uint32_t share_quantum;  /* cost units a weight-1 tenant gets per round (rd_share) */
	/* channel */
	uint32_t sq_entries, cq_entries, max_sq_entries;
	uint64_t arena_size, max_arena_size;
	enum rd_hugepages hugepages;
	/* limits */
	uint32_t max_clients, max_handles, max_regions, max_peers;
	uint32_t max_grants;          /* per region of ours (<= ROSHM_GRANTS_MAX) */
	uint32_t max_grant_mrs;       /* verbs: NIC MRs for grants, all tenants together */
	uint64_t max_region_size;
	/* registry */
	char registry_backend[16];
	char registry_dir[RD_PATH_MAX];
	char etcd_endpoints[RD_PATH_MAX]; /* comma-separated http://host:port */
	char etcd_prefix[64];
	uint32_t lease_ttl_s;
	uint32_t revalidate_ms;
	uint32_t registry_timeout_ms;     /* a write not answered by then fails with ETIMEDOUT */
	char registry_secret_file[RD_PATH_MAX]; /* record MAC key; "": the transport's secret */
	char etcd_cacert[RD_PATH_MAX];    /* PEM files for https:// endpoints ("": none) */
	char etcd_cert[RD_PATH_MAX];
	char etcd_key[RD_PATH_MAX];
	char etcd_username[128];          /* etcd auth ("": auth off) */
	char etcd_password_file[RD_PATH_MAX];
	/* transport.tcp */
	bool tcp_enabled;
	bool tcp_check_peer_addr;     /* inbound: from the address of the node's record */
	char tcp_listen[RD_HOST_MAX];    /* a host: brackets removed by the loader */
	uint32_t tcp_port;
	char tcp_advertise[RD_HOST_MAX]; /* "": listen's (or ROSHM_ADVERTISE) */
	char tcp_secret_file[RD_PATH_MAX];
	uint32_t tcp_max_msg;
	uint32_t tcp_max_inflight;
	uint32_t tcp_connect_timeout_ms;
	/* transport.verbs */
	bool verbs_enabled;
	char verbs_device[64];
	char verbs_netdev[32];
	int verbs_gid_index;     /* -1: the first RoCE v2 GID with an IPv4 address (else IPv6) */
	char verbs_listen[RD_HOST_MAX];   /* an address; "": the address of the chosen GID */
	uint32_t verbs_port;
	char verbs_advertise[RD_HOST_MAX];
	char verbs_secret_file[RD_PATH_MAX];
	uint32_t verbs_qps_per_peer;
	uint32_t verbs_sq_depth;
	uint32_t verbs_signal_every;
	uint32_t verbs_max_inline;
	uint32_t verbs_connect_timeout_ms;
	uint32_t verbs_ack_timeout;
	uint32_t verbs_retry_count;
	/* txn */
	uint32_t txn_max_inflight;
	uint32_t txn_max_per_client;
	uint32_t txn_max_slot_size;
	uint32_t txn_abort_ms;
	uint32_t txn_deadline_ms;
	uint32_t drain_timeout_ms;
	char metrics_listen[RD_HOST_MAX + 8];  /* "HOST:PORT" or "[IPV6]:PORT", "" = off */
	/* tenants */
	struct rd_quota quota;   /* every tenant's, unless its entry says otherwise */
	int ntenants;
	struct rd_tenant_cfg tenants[RD_TENANTS_MAX];
	int nadmin_uids;
	uint32_t admin_uids[RD_ADMIN_UIDS_MAX];
	char admin_token_file[RD_PATH_MAX]; /* "" : no admin token */
	uint32_t max_pending_conns;   /* control-socket connections not attached yet */
	uint32_t hello_timeout_ms;    /* to finish attaching, or to send an admin request */
	uint32_t pending_grace_ms;    /* to send a first message before a newcomer may close it */
	char log_level[16];
};

/*
 * Load and validate @path. On error returns -1 and writes "file:line: what"
 * into @err. Unknown keys, wrong types and out-of-range values are errors.
 */
int rd_config_load(struct rd_config *cfg, const char *path, char *err, size_t errlen);
void rd_config_defaults(struct rd_config *cfg);
/*
 * What the environment says about this instance (Kubernetes): ROSHM_NODE
 * (spec.nodeName) names the node, ROSHM_ADVERTISE (status.podIP or the host
 * IP) is the address peers use, and an SR-IOV VF given to the pod by the
 * device plugin (PCIDEVICE_*=<PCI address>) selects the verbs device and
 * netdev when the file names none. @sysfs is "/sys" except in tests.
 * Returns 0, or -1 with @err set. Each override is described in @log.
 */
int rd_config_apply_env(struct rd_config *cfg, char *const *envp, const char *sysfs, char *log,
			size_t loglen, char *err, size_t errlen);
void rd_config_free(struct rd_config *cfg);
/* Names of nodes, tenants and regions: [A-Za-z0-9._-]+, not starting with a dot. */
bool rd_valid_name(const char *s);
/* The placeholder word in @buf ("replace-me", "changeme", ...), or NULL. */
const char *rd_placeholder(const void *buf, size_t len);
/* Why @buf is not fit to be a cluster secret (a placeholder, not random
 * enough), or NULL. */
const char *rd_weak_secret(const void *buf, size_t len);
const struct rd_tenant_cfg *rd_config_tenant(const struct rd_config *cfg, const char *name);
/* Index of tenant @name in cfg->tenants, or -1. */
int rd_config_tenant_idx(const struct rd_config *cfg, const char *name);

#endif
