/* SPDX-License-Identifier: MIT */
/*
 * roshm node-to-node wire format of the `tcp` transport (little-endian,
 * packed by construction: every field is naturally aligned and sizes are
 * static-asserted).
 *
 * A connection is opened by the requesting node and carries its requests one
 * way and the responses back; a node that also serves the other direction
 * has a second connection. Before any frame, a mutual HMAC-SHA256 challenge
 * over the cluster secret:
 *
 *   requester -> responder  roshm_tcp_hello1 {nonce_r, node_r}
 *   responder -> requester  roshm_tcp_hello2 {nonce_s, node_s,
 *                           mac_s = HMAC(secret, "roshm-srv" nonce_r nonce_s node_r node_s)}
 *   requester -> responder  roshm_tcp_hello3 {mac_r = HMAC(secret, "roshm-req" nonce_s nonce_r node_s node_r)}
 *
 * A peer that fails it, or later sends a malformed or oversized frame, is
 * disconnected; nothing it sent is applied.
 */
#ifndef ROSHM_WIRE_H
#define ROSHM_WIRE_H

#include <stdint.h>
#include <stddef.h>
#include "ctl.h"

#define ROSHM_TCP_MAGIC 0x50435452u /* "RTCP" */
#define ROSHM_TCP_VERSION 1u
#define ROSHM_TCP_NONCE 32
#define ROSHM_TCP_MAC 32

struct roshm_tcp_hello1 {
	uint32_t magic;
	uint32_t version;
	uint8_t nonce[ROSHM_TCP_NONCE];
	char node[ROSHM_NAME_MAX];
};

struct roshm_tcp_hello2 {
	uint32_t magic;
	uint32_t version;
	uint8_t nonce[ROSHM_TCP_NONCE];
	char node[ROSHM_NAME_MAX];
	uint8_t mac[ROSHM_TCP_MAC];
};

struct roshm_tcp_hello3 {
	uint32_t magic;
	uint32_t version;
	uint8_t mac[ROSHM_TCP_MAC];
};

ROSHM_STATIC_ASSERT(sizeof(struct roshm_tcp_hello1) == 104, "hello1");
ROSHM_STATIC_ASSERT(sizeof(struct roshm_tcp_hello2) == 136, "hello2");
ROSHM_STATIC_ASSERT(sizeof(struct roshm_tcp_hello3) == 40, "hello3");

/* Request: followed by @len payload bytes for WRITE. */
#define ROSHM_TCP_F_RAW 1u     /* off is from the region start: transaction log access */

struct roshm_tcp_req {
	uint8_t opcode;         /* ROSHM_OP_WRITE, READ, FETCH_ADD, CMP_SWAP */
	uint8_t flags;          /* ROSHM_TCP_F_* */
	uint8_t rsvd[2];
	uint32_t len;           /* WRITE/READ bytes; 8 for atomics */
	uint32_t region_id;
	uint32_t key;           /* the region's random key for this epoch */
	uint64_t epoch;
	uint64_t off;
	uint64_t operand1;
	uint64_t operand2;
	uint64_t tag;           /* requester's; echoed in the response */
};
ROSHM_STATIC_ASSERT(sizeof(struct roshm_tcp_req) == 56, "tcp req");

/* Response: followed by @len bytes for a successful READ. */
struct roshm_tcp_resp {
	uint64_t tag;
	int32_t status;         /* 0, -ESTALE (epoch/region gone), -EACCES (key), -EFAULT (bounds), -EINVAL */
	uint32_t len;
	uint64_t result;
};
ROSHM_STATIC_ASSERT(sizeof(struct roshm_tcp_resp) == 24, "tcp resp");

/*
 * `verbs` transport: connection setup through librdmacm between roshmd
 * instances. The CM private data carries the node identity and a mutual
 * HMAC-SHA256 challenge over the cluster secret, in two CM exchanges (an RC
 * connect request has room for 56 bytes of private data):
 *
 *   REQ  roshm_verbs_hello     {nonce_r, node_r (first 31 bytes)}
 *   REJ  roshm_verbs_challenge {nonce_s, node_s,
 *                               mac_s = HMAC(secret, "roshm-vsrv" nonce_r nonce_s node_r node_s)}
 *   REQ  roshm_verbs_proof     {nonce_s, mac_r = HMAC(secret, "roshm-vreq" nonce_r nonce_s node_r node_s)}
 *   REP  (accepted: the QP is connected)
 *
 * A challenge is good for one proof within 2 s. Anything else is rejected
 * with roshm_verbs_challenge.kind == ROSHM_VERBS_DENIED and no MAC.
 * rkeys and addresses of regions travel in the registry, never over this.
 */
#define ROSHM_VERBS_MAGIC 0x53425652u /* "RVBS" */
#define ROSHM_VERBS_VERSION 1u
#define ROSHM_VERBS_NONCE 16
#define ROSHM_VERBS_ID 32

enum roshm_verbs_kind {
	ROSHM_VERBS_HELLO = 1,
	ROSHM_VERBS_CHALLENGE = 2,
	ROSHM_VERBS_PROOF = 3,
	ROSHM_VERBS_DENIED = 4,
};

struct roshm_verbs_hello {
	uint32_t magic;
	uint8_t kind;
	uint8_t version;
	uint16_t qp_index;      /* which of the requester's qps_per_peer QPs */
	uint8_t nonce[ROSHM_VERBS_NONCE];
	char node[ROSHM_VERBS_ID];  /* NUL-padded, truncated */
};

struct roshm_verbs_challenge {
	uint32_t magic;
	uint8_t kind;
	uint8_t version;
	uint16_t rsvd;
	uint8_t nonce[ROSHM_VERBS_NONCE];
	char node[ROSHM_NAME_MAX];
	uint8_t mac[32];
};

struct roshm_verbs_proof {
	uint32_t magic;
	uint8_t kind;
	uint8_t version;
	uint16_t qp_index;
	uint8_t nonce[ROSHM_VERBS_NONCE];  /* the responder's */
	uint8_t mac[32];
};

ROSHM_STATIC_ASSERT(sizeof(struct roshm_verbs_hello) == 56, "verbs hello fits an RC REQ");
ROSHM_STATIC_ASSERT(sizeof(struct roshm_verbs_challenge) == 120, "verbs challenge fits a REJ");
ROSHM_STATIC_ASSERT(sizeof(struct roshm_verbs_proof) == 56, "verbs proof fits an RC REQ");

#endif /* ROSHM_WIRE_H */
