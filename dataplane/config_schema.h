// SPDX-License-Identifier: MIT
/*
 * The keys roshmd.conf may hold, their types and ranges (config.c checks a
 * file against them; included there only).
 */
#ifndef RD_CONFIG_SCHEMA_H
#define RD_CONFIG_SCHEMA_H

#include <stdint.h>

#include "config.h"
#include "roshm/ctl.h"
#include "registry/registry.h"

enum kind { K_INT, K_STR, K_BOOL, K_GROUP, K_STRARR, K_INTARR, K_LIST };

struct key {
	const char *path;  /* "*" stands for a list element */
	enum kind kind;
	int64_t min, max;  /* K_INT range; K_STR/K_STRARR: max length */
};

#define SZ_MAX_ARENA (1ll << 32)
static const struct key schema[] = {
	{ "node", K_STR, 0, ROSHM_NAME_MAX - 1 },
	{ "socket", K_STR, 1, 107 },
	{ "eal", K_STRARR, 0, 255 },
	{ "dataplane", K_GROUP, 0, 0 },
	{ "dataplane.lcore", K_INT, -1, 1023 },
	{ "dataplane.idle", K_STR, 0, 15 },
	{ "dataplane.idle_spin_us", K_INT, 0, 10000000 },
	{ "dataplane.inflight_sleep_bytes", K_INT, 0, 1ll << 40 },
	{ "dataplane.idle_yield", K_BOOL, 0, 0 },
	{ "dataplane.burst", K_INT, 1, 1024 },
	{ "dataplane.share_quantum", K_INT, 1024, 1 << 20 },
	{ "channel", K_GROUP, 0, 0 },
	{ "channel.sq_entries", K_INT, 2, 65536 },
	{ "channel.cq_entries", K_INT, 2, 131072 },
	{ "channel.max_sq_entries", K_INT, 2, 65536 },
	{ "channel.arena_size", K_INT, 4096, SZ_MAX_ARENA },
	{ "channel.max_arena_size", K_INT, 4096, SZ_MAX_ARENA },
	{ "channel.hugepages", K_STR, 0, 15 },
	{ "limits", K_GROUP, 0, 0 },
	{ "limits.max_clients", K_INT, 1, 65536 },
	{ "limits.max_handles", K_INT, 1, 65536 },
	{ "limits.max_regions", K_INT, 1, 1 << 20 },
	{ "limits.max_peers", K_INT, 1, 4096 },
	{ "limits.max_grants", K_INT, 1, ROSHM_GRANTS_MAX },
	{ "limits.max_grant_mrs", K_INT, 0, 1 << 24 },
	{ "limits.max_region_size", K_INT, 4096, 1ll << 40 },
	{ "registry", K_GROUP, 0, 0 },
	{ "registry.backend", K_STR, 0, 15 },
	{ "registry.dir", K_STR, 1, RD_PATH_MAX - 1 },
	{ "registry.endpoints", K_STR, 1, RD_PATH_MAX - 1 },
	{ "registry.prefix", K_STR, 1, 63 },
	{ "registry.lease_ttl", K_INT, 2, 3600 },
	{ "registry.revalidate_ms", K_INT, 50, 60000 },
	{ "registry.timeout_ms", K_INT, 100, 600000 },
	{ "registry.secret_file", K_STR, 0, RD_PATH_MAX - 1 },
	{ "registry.cacert", K_STR, 0, RD_PATH_MAX - 1 },
	{ "registry.cert", K_STR, 0, RD_PATH_MAX - 1 },
	{ "registry.key", K_STR, 0, RD_PATH_MAX - 1 },
	{ "registry.username", K_STR, 0, 127 },
	{ "registry.password_file", K_STR, 0, RD_PATH_MAX - 1 },
	{ "transport", K_GROUP, 0, 0 },
	{ "transport.tcp", K_GROUP, 0, 0 },
	{ "transport.tcp.enabled", K_BOOL, 0, 0 },
	{ "transport.tcp.check_peer_address", K_BOOL, 0, 0 },
	{ "transport.tcp.listen", K_STR, 1, RD_HOST_MAX - 1 },
	{ "transport.tcp.port", K_INT, 1, 65535 },
	{ "transport.tcp.advertise", K_STR, 0, RD_HOST_MAX - 1 },
	{ "transport.tcp.secret_file", K_STR, 1, RD_PATH_MAX - 1 },
	{ "transport.tcp.max_msg", K_INT, RD_TCP_MAX_MSG_MIN, 64 << 20 },
	{ "transport.tcp.max_inflight", K_INT, 1, 65536 },
	{ "transport.tcp.connect_timeout_ms", K_INT, 10, 60000 },
	{ "transport.verbs", K_GROUP, 0, 0 },
	{ "transport.verbs.enabled", K_BOOL, 0, 0 },
	{ "transport.verbs.device", K_STR, 0, 63 },
	{ "transport.verbs.netdev", K_STR, 0, 31 },
	{ "transport.verbs.gid_index", K_INT, -1, 1023 },
	{ "transport.verbs.listen", K_STR, 0, RD_HOST_MAX - 1 },
	{ "transport.verbs.port", K_INT, 1, 65535 },
	{ "transport.verbs.advertise", K_STR, 0, RD_HOST_MAX - 1 },
	{ "transport.verbs.secret_file", K_STR, 1, RD_PATH_MAX - 1 },
	{ "transport.verbs.qps_per_peer", K_INT, 1, 8 },
	{ "transport.verbs.sq_depth", K_INT, 16, 8192 },
	{ "transport.verbs.signal_every", K_INT, 1, 8192 },
	{ "transport.verbs.max_inline", K_INT, 0, 1024 },
	{ "transport.verbs.connect_timeout_ms", K_INT, 10, 60000 },
	{ "transport.verbs.ack_timeout", K_INT, 1, 31 },
	{ "transport.verbs.retry_count", K_INT, 0, 6 }, /* 7: Soft-RoCE retries forever */
	{ "txn", K_GROUP, 0, 0 },
	{ "txn.max_inflight", K_INT, 1, 65536 },
	{ "txn.max_per_client", K_INT, 1, 65536 },
	{ "txn.max_slot_size", K_INT, 128, 1 << 20 },
	{ "txn.abort_ms", K_INT, 1, 3600000 },
	{ "txn.deadline_ms", K_INT, 1, 3600000 },
	{ "metrics", K_GROUP, 0, 0 },
	{ "metrics.listen", K_STR, 0, RD_HOST_MAX + 7 },
	{ "drain", K_GROUP, 0, 0 },
	{ "drain.timeout_ms", K_INT, 1, 3600000 },
	{ "quota", K_GROUP, 0, 0 },
	{ "quota.clients", K_INT, 1, 65536 },
	{ "quota.regions", K_INT, 1, 1 << 20 },
	{ "quota.bytes", K_INT, 4096, 1ll << 50 },
	{ "quota.txn", K_INT, 1, 65536 },
	{ "quota.peer_inflight", K_INT, 1, 1 << 20 },
	{ "quota.grant_mrs", K_INT, 0, 1 << 24 },
	{ "quota.weight", K_INT, 1, 1000 },
	{ "quota.ops_per_sec", K_INT, 0, 1ll << 40 },
	{ "quota.bytes_per_sec", K_INT, 0, 1ll << 50 },
	{ "quota.registry_ops_per_sec", K_INT, 0, 1000000 },
	{ "tenants", K_LIST, 0, RD_TENANTS_MAX },
	{ "tenants.*.name", K_STR, 1, ROSHM_NAME_MAX - 1 },
	{ "tenants.*.token", K_STR, 0, ROSHM_TOKEN_MAX - 1 },
	{ "tenants.*.quota", K_GROUP, 0, 0 },
	{ "tenants.*.quota.clients", K_INT, 1, 65536 },
	{ "tenants.*.quota.regions", K_INT, 1, 1 << 20 },
	{ "tenants.*.quota.bytes", K_INT, 4096, 1ll << 50 },
	{ "tenants.*.quota.txn", K_INT, 1, 65536 },
	{ "tenants.*.quota.peer_inflight", K_INT, 1, 1 << 20 },
	{ "tenants.*.quota.grant_mrs", K_INT, 0, 1 << 24 },
	{ "tenants.*.quota.weight", K_INT, 1, 1000 },
	{ "tenants.*.quota.ops_per_sec", K_INT, 0, 1ll << 40 },
	{ "tenants.*.quota.bytes_per_sec", K_INT, 0, 1ll << 50 },
	{ "tenants.*.quota.registry_ops_per_sec", K_INT, 0, 1000000 },
	{ "admin", K_GROUP, 0, 0 },
	{ "admin.uids", K_INTARR, 0, UINT32_MAX },
	{ "admin.token_file", K_STR, 0, RD_PATH_MAX - 1 },
	{ "admin.max_pending", K_INT, 1, 65536 },
	{ "admin.hello_timeout_ms", K_INT, 10, 600000 },
	{ "admin.pending_grace_ms", K_INT, 0, 60000 },
	{ "log", K_GROUP, 0, 0 },
	{ "log.level", K_STR, 0, 15 },
};

#endif
