/* SPDX-License-Identifier: MIT */
/*
 * Control-socket wire format between libroshm / roshmctl and roshmd.
 *
 * The socket is AF_UNIX SOCK_SEQPACKET: one request, one reply, each a
 * single datagram that starts with struct roshm_ctl_hdr. Replies that carry
 * file descriptors (attach, region create) pass them with SCM_RIGHTS.
 * Everything a client sends is untrusted: roshmd checks len, version,
 * string termination and every field.
 */
#ifndef ROSHM_CTL_H
#define ROSHM_CTL_H

#include <stdint.h>
#include "abi.h"

#define ROSHM_CTL_MAGIC 0x4c54434fu /* "OCTL" */
#define ROSHM_NAME_MAX 64           /* including the NUL */
#define ROSHM_TOKEN_MAX 128
#define ROSHM_POLICY_TENANTS_MAX 8
#define ROSHM_CTL_MSG_MAX (256 * 1024)
#define ROSHM_DEFAULT_SOCK "/run/roshm/roshmd.sock"

enum roshm_ctl_type {
	ROSHM_CTL_HELLO = 1,
	ROSHM_CTL_REGION_CREATE = 2,
	ROSHM_CTL_REGION_OPEN = 3,
	ROSHM_CTL_REGION_CLOSE = 4,
	ROSHM_CTL_ADMIN = 5,        /* roshmctl: request text is a command, reply is JSON */
	ROSHM_CTL_REGION_REATTACH = 6, /* region_create + the region's memfd: re-register it
					* after a roshmd restart; its contents survive */
};

struct roshm_ctl_hdr {
	uint32_t magic;
	uint16_t type;
	uint16_t version;           /* ROSHM_ABI_VERSION */
	uint32_t len;               /* whole message including this header */
	int32_t status;             /* replies: 0 or -errno */
};

struct roshm_ctl_hello {
	struct roshm_ctl_hdr hdr;
	char tenant[ROSHM_NAME_MAX];
	char token[ROSHM_TOKEN_MAX];
	uint32_t sq_entries;        /* 0: default */
	uint32_t cq_entries;        /* 0: default */
	uint64_t arena_size;        /* 0: default */
};

/* Reply: channel memfd and wakeup eventfds in SCM_RIGHTS, in this order. */
#define ROSHM_HELLO_FD_CHAN 0
#define ROSHM_HELLO_FD_SQ_EVENT 1   /* client writes after submit when NEED_WAKEUP */
#define ROSHM_HELLO_FD_CQ_EVENT 2   /* roshmd writes when the client sleeps */
#define ROSHM_HELLO_NFDS 3
struct roshm_ctl_hello_reply {
	struct roshm_ctl_hdr hdr;
	uint32_t client_id;
	uint32_t rsvd;
	uint64_t chan_size;
	uint64_t instance;          /* random per roshmd start: tells a restart from a kick-out */
	char node[ROSHM_NAME_MAX];
};

enum roshm_policy {
	ROSHM_POLICY_TENANT = 0,    /* any client of the owner's tenant (default) */
	ROSHM_POLICY_OWNER = 1,     /* the owning client only */
	ROSHM_POLICY_LIST = 2,      /* the owner's tenant and the listed tenants */
};

struct roshm_ctl_region_create {
	struct roshm_ctl_hdr hdr;
	char name[ROSHM_NAME_MAX];
	uint64_t size;
	uint32_t policy;
	uint32_t ntenants;
	char tenants[ROSHM_POLICY_TENANTS_MAX][ROSHM_NAME_MAX];
	uint32_t txn_slots;
	uint32_t slot_size;
};

/* Reply to create (region memfd in SCM_RIGHTS) and to open. */
struct roshm_ctl_region_reply {
	struct roshm_ctl_hdr hdr;
	uint32_t handle;
	uint32_t rsvd;
	uint64_t data_size;
	uint64_t map_size;          /* create: size of the memfd to map */
	uint64_t epoch;
};

struct roshm_ctl_region_open {
	struct roshm_ctl_hdr hdr;
	char name[2 * ROSHM_NAME_MAX];  /* "<tenant>/<name>" or "<name>" (own tenant) */
};

struct roshm_ctl_region_close {
	struct roshm_ctl_hdr hdr;
	uint32_t handle;
	uint32_t rsvd;
};

struct roshm_ctl_admin {
	struct roshm_ctl_hdr hdr;
	char cmd[256];              /* "status", "clients", "regions", "stats", ... */
};
/* Admin reply: header followed by NUL-terminated JSON text. */

#endif /* ROSHM_CTL_H */
