/* SPDX-License-Identifier: MIT */
/*
 * Region registry: where `<tenant>/<name>` is published with everything a
 * peer needs to reach it. Backends: `file` (a directory shared by the
 * roshmd instances of one host, the default) and, later, `etcd`. Records
 * read back are untrusted input: every backend validates them and returns
 * -EBADMSG for a malformed one.
 */
#ifndef RD_REGISTRY_H
#define RD_REGISTRY_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include "roshm/ctl.h"

#define RD_STATE_ACTIVE "active"
#define RD_STATE_STALE "stale"

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
	uint64_t data_size;
	uint32_t txn_slots;
	uint32_t slot_size;
	uint32_t policy;
	uint32_t ntenants;
	char tenants[ROSHM_POLICY_TENANTS_MAX][ROSHM_NAME_MAX];
};

struct rd_node_rec {
	char node[ROSHM_NAME_MAX];
	char endpoint[128];          /* "tcp:ADDR:PORT", or "" without a network transport */
	uint32_t pid;
};

struct rd_registry;

struct rd_registry_ops {
	const char *name;
	int (*put_region)(struct rd_registry *r, const struct rd_region_rec *rec);
	/* -ENOENT when absent, -EBADMSG when malformed. */
	int (*get_region)(struct rd_registry *r, const char *tenant, const char *name,
			  struct rd_region_rec *rec);
	int (*del_region)(struct rd_registry *r, const char *tenant, const char *name);
	/* Calls @fn for each well-formed record; returns the count or -errno. */
	int (*list_regions)(struct rd_registry *r,
			    void (*fn)(const struct rd_region_rec *rec, void *arg), void *arg);
	int (*put_node)(struct rd_registry *r, const struct rd_node_rec *rec);
	int (*get_node)(struct rd_registry *r, const char *node, struct rd_node_rec *rec);
	int (*del_node)(struct rd_registry *r, const char *node);
	/*
	 * Called from the control loop every ~100 ms: keep the lease alive,
	 * pump the watch. Returns 1 when the lease was lost and a new one taken:
	 * the caller then publishes its node and regions again. May be NULL.
	 */
	int (*tick)(struct rd_registry *r);
	/* True once after the registry saw a change under its prefix. May be NULL. */
	bool (*changed)(struct rd_registry *r);
	void (*close)(struct rd_registry *r);
};

struct rd_registry {
	const struct rd_registry_ops *ops;
	char node[ROSHM_NAME_MAX];
	char dir[256];
	void *priv;
};

struct rd_config;
int rd_registry_file_open(struct rd_registry *r, const char *dir, const char *node);
int rd_registry_etcd_open(struct rd_registry *r, const struct rd_config *cfg);
char *rd_node_rec_to_json(const struct rd_node_rec *rec);
int rd_node_rec_from_json(const char *text, size_t len, struct rd_node_rec *rec);

/* JSON encoding shared by every backend (record.c). */
char *rd_region_rec_to_json(const struct rd_region_rec *rec);
int rd_region_rec_from_json(const char *text, size_t len, struct rd_region_rec *rec);

#endif
