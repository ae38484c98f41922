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
 * A peer that fails it, or later sends a malformed frame, is disconnected;
 * nothing it sent is applied. A WRITE, READ or TXN_COMMIT longer than the
 * responder's max_msg is answered -EMSGSIZE (its payload dropped) and the
 * connection goes on.
 */
#ifndef ROSHM_WIRE_H
#define ROSHM_WIRE_H

#include <stdint.h>
#include <stddef.h>
#include "ctl.h"

#define ROSHM_TCP_MAGIC 0x50435452u /* "RTCP" */
/* 2: TXN_COMMIT and staging WRITEs that name their sequence (F_SEQ). Peers of
 * another version are refused at the handshake (-EPROTONOSUPPORT). */
#define ROSHM_TCP_VERSION 2u
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

/* Request: followed by @len payload bytes for WRITE and TXN_COMMIT. */
#define ROSHM_TCP_F_RAW 1u     /* off is from the region start: transaction log access */
#define ROSHM_TCP_F_AGAIN 2u   /* TXN_COMMIT: sent again after its outcome was lost */
/* A raw WRITE into a log slot (staging) must say which sequence s it is for
 * (operand1): it lands only while the slot's state word is EMPTY(s), from its
 * header to its last byte; else it is answered -ECANCELED (the slot was given
 * up on, or is another sequence's), without F_SEQ or with an s of another
 * slot -EINVAL. */
#define ROSHM_TCP_F_SEQ 4u

/*
 * TXN_COMMIT: a transaction in one round trip. The owner's roshmd reserves a
 * sequence s, receives the staged record (struct roshm_txn_slot from
 * ROSHM_TXN_STAGE_OFF on, @len bytes, seq and crc left for the owner to
 * fill) into slot s and commits it, all in its poller. operand1 is the
 * record's txn_id (64 random bits, one per attempt), operand2 a lower bound
 * the writer knows of txn_tail (the log's, before it sent the request). The
 * response's result is ROSHM_TCP_TXN(kind, s) with status 0:
 *   COMMITTED  done: s is the transaction's sequence
 *   RESERVED   s is reserved but the log was full: stage and commit it the
 *              two-round-trip way (WAIT, STAGE, COMMIT)
 *   ABORTED    s was aborted before the record was in (the payload was
 *              slower than txn_abort_ms): replay with a new id
 *   NOT_RUN    (F_AGAIN only; s is 0) the first attempt never ran, and this
 *              one did not start either (log full, draining): send it as
 *              new, without F_AGAIN
 * or a status: -EAGAIN nothing happened (log full, draining), -ESTALE,
 * -EACCES, -EMSGSIZE as for other requests, -EIO (F_AGAIN only: the
 * outcome can no longer be known).
 * With ROSHM_TCP_F_AGAIN the owner first looks for txn_id (its record of its
 * last outcomes, then the log between operand2 and txn_tail): found, it
 * answers that outcome; proved absent, the first attempt never ran (its
 * connection was replaced before this one's first frame, so it never will)
 * and this one runs as new.
 */
#define ROSHM_TCP_TXN_COMMITTED 0u
#define ROSHM_TCP_TXN_RESERVED 1u
#define ROSHM_TCP_TXN_ABORTED 2u
#define ROSHM_TCP_TXN_NOT_RUN 3u
#define ROSHM_TCP_TXN(kind, seq) (((uint64_t)(kind) << 62) | (seq))
#define ROSHM_TCP_TXN_KIND(res) ((uint32_t)((res) >> 62))
#define ROSHM_TCP_TXN_SEQ(res) ((res) & ((1ull << 62) - 1))

struct roshm_tcp_req {
	uint8_t opcode;         /* ROSHM_OP_WRITE, READ, FETCH_ADD, CMP_SWAP, TXN_COMMIT */
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
