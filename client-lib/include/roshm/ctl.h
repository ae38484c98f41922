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
#define ROSHM_DEFAULT_ADMIN_TOKEN "/var/lib/roshm/admin.token"

enum roshm_ctl_type {
	ROSHM_CTL_HELLO = 1,        /* authenticate as a tenant; reply: the channel's sizes */
	ROSHM_CTL_REGION_CREATE = 2, /* + the region memfd the client made (SCM_RIGHTS) */
	ROSHM_CTL_REGION_OPEN = 3,
	ROSHM_CTL_REGION_CLOSE = 4,
	ROSHM_CTL_ADMIN = 5,        /* roshmctl: request text is a command, reply is JSON */
	ROSHM_CTL_REGION_REATTACH = 6, /* region_create + the region's memfd: re-register it
					* after a roshmd restart; its contents survive */
	ROSHM_CTL_CHANNEL = 7,      /* after HELLO: + the channel memfd; reply: the wakeup sockets */
	ROSHM_CTL_REGION_GRANT = 8, /* let the owner of a region we opened open one we own */
};

struct roshm_ctl_hdr {
	uint32_t magic;
	uint16_t type;
	uint16_t version;           /* ROSHM_ABI_VERSION */
	uint32_t len;               /* whole message including this header */
	int32_t status;             /* replies: 0 or -errno */
};

/*
 * Attach is two requests. HELLO authenticates (tenant and token) and asks
 * for ring and arena sizes; the reply grants sizes and says how big the
 * channel memfd must be (roshm_chan_layout()). The client creates that memfd
 * itself, so the memory is its pod's, touches every page, and sends it with
 * CHANNEL; roshmd checks it, maps it, seals it (no shrink, grow, hole punch
 * or new writable mapping) and answers with the two wakeup sockets.
 */
struct roshm_ctl_hello {
	struct roshm_ctl_hdr hdr;
	char tenant[ROSHM_NAME_MAX];
	char token[ROSHM_TOKEN_MAX];
	char pod[ROSHM_NAME_MAX];   /* the client's pod ("" none): `roshmctl drain --pod` */
	uint32_t sq_entries;        /* 0: default */
	uint32_t cq_entries;        /* 0: default */
	uint64_t arena_size;        /* 0: default */
	/* ABI 7: the client's key from an earlier reply of a roshmd of this
	 * node (libroshm, re-attaching after a restart), 0 for a new one. A
	 * client keeps its grant identity (ROSHM_GRANT_ADD_OWNER) across
	 * restarts with it: a secret, like a region's grant_key. */
	uint64_t client_key;
};

#define ROSHM_HELLO_F_HUGETLB_OK (1u << 0)   /* the channel may be MFD_HUGETLB */
#define ROSHM_HELLO_F_HUGETLB_REQ (1u << 1)  /* it must be (channel.hugepages = "on") */
struct roshm_ctl_hello_reply {
	struct roshm_ctl_hdr hdr;
	uint32_t client_id;
	uint32_t flags;             /* ROSHM_HELLO_F_* */
	uint32_t sq_entries;        /* granted */
	uint32_t cq_entries;
	uint64_t arena_size;
	uint64_t chan_size;         /* roshm_chan_layout(sq, cq, arena).size */
	uint64_t instance;          /* random per roshmd start: tells a restart from a kick-out */
	char node[ROSHM_NAME_MAX];
	uint64_t client_key;        /* ABI 7: the one asked for, unless another live client
				     * has it (then a new random one); never 0 */
	uint32_t max_handles;       /* ABI 8: limits.max_handles, the regions this client
				     * may hold open at once (its own and others'); >= 1 */
	uint32_t pad;
};

struct roshm_ctl_channel {
	struct roshm_ctl_hdr hdr;
	uint64_t size;              /* of the memfd sent along (>= chan_size) */
};

/* Reply to CHANNEL: the client's ends of two AF_UNIX SOCK_DGRAM socketpairs
 * in SCM_RIGHTS, in this order. A wakeup is any datagram; roshmd keeps the
 * other ends (its own file descriptions) and never blocks on them. */
#define ROSHM_CHANNEL_FD_SQ_EVENT 0 /* client sends after submit when NEED_WAKEUP */
#define ROSHM_CHANNEL_FD_CQ_EVENT 1 /* roshmd sends when the client sleeps */
#define ROSHM_CHANNEL_NFDS 2

enum roshm_policy {
	ROSHM_POLICY_TENANT = 0,    /* any client of the owner's tenant (default) */
	ROSHM_POLICY_OWNER = 1,     /* the owning client only */
	ROSHM_POLICY_LIST = 2,      /* the owner's tenant and the listed tenants */
	ROSHM_POLICY_GRANT = 3,     /* the owner, and clients of its tenant that own a
				     * region it was granted to (REGION_GRANT) */
};

/* Most grants one region holds (ROSHM_POLICY_GRANT): what any roshmd
 * accepts in a record; a node's own regions hold its `limits.max_grants`
 * (this by default). */
#define ROSHM_GRANTS_MAX 512

/* Sent with the region memfd of roshm_region_map_size() bytes, made and
 * touched by the client (its pod's memory): roshmd checks and seals it. */
struct roshm_ctl_region_create {
	struct roshm_ctl_hdr hdr;
	char name[ROSHM_NAME_MAX];
	uint64_t size;
	uint32_t policy;
	uint32_t ntenants;
	char tenants[ROSHM_POLICY_TENANTS_MAX][ROSHM_NAME_MAX];
	uint32_t txn_slots;
	uint32_t slot_size;
	/* What other clients may do (the owner's own handle is not limited):
	 * see struct roshm_region_opts. All zero: everything, as before. */
	uint64_t va_base;
	uint64_t win_off;
	uint64_t win_len;
	uint32_t access;            /* ROSHM_ACCESS_*; 0: all */
	uint32_t rsvd;
};

/* struct roshm_region_opts.access: what clients other than the owner may do */
#define ROSHM_ACCESS_READ (1u << 0)     /* READ */
#define ROSHM_ACCESS_WRITE (1u << 1)    /* WRITE, TXN_WRITE, TXN_COMMIT */
#define ROSHM_ACCESS_ATOMIC (1u << 2)   /* FETCH_ADD, CMP_SWAP */
#define ROSHM_ACCESS_ALL (ROSHM_ACCESS_READ | ROSHM_ACCESS_WRITE | ROSHM_ACCESS_ATOMIC)

/* Reply to create and to open. */
struct roshm_ctl_region_reply {
	struct roshm_ctl_hdr hdr;
	uint32_t handle;
	uint32_t rsvd;
	uint64_t data_size;
	uint64_t map_size;          /* create: size of the region memfd */
	uint64_t epoch;
	/* ABI 9: who owns the region: its owner client's grant id (struct
	 * rd_client cgid; a remote region's, as its MAC'd record says), the
	 * same for every region of one client; 0: unknown */
	uint64_t owner;
};

struct roshm_ctl_region_open {
	struct roshm_ctl_hdr hdr;
	char name[2 * ROSHM_NAME_MAX];  /* "<tenant>/<name>" or "<name>" (own tenant) */
	/* A part of it only (ABI 6): the handle may touch data offsets
	 * [win_off, win_off + win_len) with the operations in @access, and no
	 * more. win_len 0 (then win_off 0): all of it; access 0: all. On a
	 * ROSHM_POLICY_GRANT region a grant must cover that part and those
	 * operations (struct roshm_ctl_region_grant). */
	uint64_t win_off;
	uint64_t win_len;
	uint32_t access;            /* ROSHM_ACCESS_* */
	uint32_t rsvd;
};

struct roshm_ctl_region_close {
	struct roshm_ctl_hdr hdr;
	uint32_t handle;
	uint32_t rsvd;
};

/*
 * REGION_GRANT: @handle is a region this client owns, created with
 * ROSHM_POLICY_GRANT. A grant lets whichever client owns one region of its
 * tenant (that very region: its node, name and secret key) open @handle's
 * region. The reply gives that region's grant id, which names the grant
 * from then on. The fields an op does not use are 0.
 * - ADD: the region behind @peer, a handle this client holds on it
 *   (opened, or its own);
 * - ADD_NAME: the region published as @name in this client's tenant now;
 * - ADD_OWNER (ABI 7): the client that owns the region published as @name
 *   now: whichever regions it owns, also later ones, while it is attached
 *   (its identity: its node, tenant and client key, struct
 *   roshm_ctl_hello). Every region a client owns names the same one, so
 *   one grant serves all of them;
 * - ADD_ID: @gid, from an earlier reply (libroshm, after a restart);
 * - REMOVE: takes grant @gid back.
 * A grant covers data offsets [win_off, win_off + win_len) and the
 * operations in @access (ROSHM_ACCESS_*) of the region: win_len 0 (then
 * win_off 0) all of it, access 0 all operations. A grantee opens that part
 * or less (struct roshm_ctl_region_open), roshmd checks each operation
 * against it. One region may be granted several parts; REMOVE takes back
 * the one with the same id, part and access.
 * The reply comes once the region's record says so; with status 0, or
 * -EAGAIN when the registry did not answer (the change stands: roshmd
 * writes it when it does), it carries the id.
 */
#define ROSHM_GRANT_ADD 1u
#define ROSHM_GRANT_REMOVE 2u
#define ROSHM_GRANT_ADD_NAME 3u
#define ROSHM_GRANT_ADD_ID 4u
#define ROSHM_GRANT_ADD_OWNER 5u
struct roshm_ctl_region_grant {
	struct roshm_ctl_hdr hdr;
	uint32_t handle;
	uint32_t peer;
	uint32_t op;                /* ROSHM_GRANT_* */
	uint32_t access;            /* ROSHM_ACCESS_*; 0: all */
	uint64_t gid;
	char name[ROSHM_NAME_MAX];
	uint64_t win_off;           /* the part granted; win_len 0: all */
	uint64_t win_len;
};

struct roshm_ctl_region_grant_reply {
	struct roshm_ctl_hdr hdr;
	uint64_t gid;
};

/*
 * Admin requests carry their credentials: the node's admin token (a file
 * that roshmd's own container holds and pods do not), or a tenant and its
 * token, which allow only that tenant's part ("drain tenant T" for its own
 * T, "drain region T/N", "drain pod P" for its own pod's regions).
 */
#define ROSHM_ADMIN_TOKEN_MAX 128
struct roshm_ctl_admin {
	struct roshm_ctl_hdr hdr;
	char cmd[256];              /* "status", "clients", "regions", "stats", "drain ..." */
	char tenant[ROSHM_NAME_MAX];
	char token[ROSHM_TOKEN_MAX];
	char admin_token[ROSHM_ADMIN_TOKEN_MAX];
};
/* Admin reply: header followed by NUL-terminated JSON text. */

#endif /* ROSHM_CTL_H */
