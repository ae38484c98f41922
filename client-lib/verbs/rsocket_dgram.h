/* SPDX-License-Identifier: MIT */
/*
 * Datagram rsockets of libroshm-verbs: the state the two files share
 * (rsocket_dgram.c: the socket, its setup and calls; rsocket_dgram_peer.c:
 * the peer table, the UDP and UD messages, progress). The design is in
 * rsocket_dgram.c. Not installed.
 */
#ifndef RSOCKET_DGRAM_H
#define RSOCKET_DGRAM_H

#include "rsocket_int.h"

#define RS_DG_FRESH_NS (5000ull * 1000000)      /* how long a confirmation holds */
#define RS_DG_EPOCH_NS (10000ull * 1000000)     /* tokens: this epoch's and the last one's count */
#define RS_DG_PROBE_NS (1000ull * 1000000)      /* between probes of an address */
#define RS_DG_PROBES 16                         /* probes in all per RS_DG_PROBE_NS */
#define RS_DG_PEERS 64                          /* addresses known, least recently used go */
#define RS_DG_UQ 16                             /* UDP datagrams taken in, not yet read */
#define RS_DG_UDP_BATCH 32                      /* UDP messages read per look */
#define RS_DG_TX_MIN 4u
#define RS_DG_RX_MIN 16u
#define RS_DG_SLOTS_MAX 1024u
#define RS_DG_LINGER_NS (200ull * 1000000)      /* close waits this long for sends */
#define RS_DG_QKEY 0x01234567u                  /* rdma_cm's RDMA_UDP_QKEY */
#define RS_GRH 40u
#define RS_DG_UDH ((uint32_t)sizeof(struct rs_dg_ud))   /* 32 */

#define RS_DG_PEND 32                           /* proofs being put together */

enum { RS_DG_NONE, RS_DG_CLAIMED, RS_DG_CONFIRMED };

/* An address we send to: what its ADDR claims, and its proof. */
struct rs_dg_peer {
	struct sockaddr_storage addr;
	socklen_t len;                          /* 0: a free entry */
	struct sockaddr_storage me;             /* our address as it reaches us */
	uint64_t token;                         /* what it takes from us (its ADDR) */
	uint8_t gid[16];                        /* its QP, as its ADDR claims */
	uint32_t qpn;
	int state;
	bool asked;                             /* we sent it DATA: its ADDR counts */
	uint64_t n1, n2;                        /* the nonces of this claim's probe */
	uint64_t probe_ns, confirmed_ns, used_ns;
	struct ibv_ah *ah;
};

/* A proof we owe an address: a PROBE's nonce that came over UD under its
 * token, a CHALLENGE's that came from it over UDP; sent once both are in. */
struct rs_dg_pend {
	struct sockaddr_storage addr;
	socklen_t len;                          /* 0: a free entry */
	struct sockaddr_storage local;          /* where the CHALLENGE came in */
	uint64_t n1, n2, t;
};

struct rs_dg_rx {             /* a UD RECV that completed, not yet read */
	uint32_t slot, len;                     /* len: the datagram's */
	struct sockaddr_storage from;           /* its sender (checked) */
	socklen_t fromlen;
};

struct rs_dg_udp {            /* a datagram that came over UDP, not yet read */
	struct sockaddr_storage from;
	socklen_t fromlen;
	uint32_t len;
	uint8_t *data;
};

struct rs_dg {
	int family, soerr;
	bool ready, connected, udp_first;
	struct sockaddr_storage peer;           /* rconnect's */
	socklen_t peerlen;
	struct ibv_context *ctx;
	struct ibv_qp *qp;
	uint32_t mtu, ntx, nrx, stride;         /* mtu: a datagram's payload */
	uint32_t tx_head, tx_tail;              /* sends posted, completed */
	uint8_t gid[16];
	uint8_t key[32];                        /* tokens: HMAC-SHA256(key, address) */
	struct rs_dg_rx *rq;                    /* nrx entries */
	uint32_t rq_head, rq_tail;
	struct rs_dg_udp uq[RS_DG_UQ];
	uint32_t uq_head, uq_tail;
	uint8_t *scratch;                       /* one UDP message, in or out */
	struct rs_dg_peer peers[RS_DG_PEERS];
	struct rs_dg_pend pend[RS_DG_PEND];
	uint64_t probe_period_ns;
	int probes;                             /* sent in this period */
};

/* rsocket_dgram_peer.c */
bool rs_dg_sa_eq(const struct sockaddr *a, const struct sockaddr *b);
int rs_dg_post_recv(struct rs *rs, uint32_t slot);
struct rs_dg_peer *rs_dg_find(struct rs_dg *d, const struct sockaddr *a);
struct rs_dg_peer *rs_dg_peer(struct rs_dg *d, const struct sockaddr *a, socklen_t len);
bool rs_dg_confirmed(const struct rs_dg_peer *p, uint64_t now);
bool rs_dg_can_send(const struct rs_dg *d);
int rs_dg_send_udp(struct rs *rs, uint8_t op, uint64_t a1, uint64_t a2, const struct iovec *v,
		   int n, size_t len, const struct sockaddr *to, socklen_t tolen,
		   const struct sockaddr_storage *from);
int rs_dg_send_ud(struct rs *rs, struct rs_dg_peer *p, uint32_t kind, uint64_t arg,
		  const struct iovec *v, int n, size_t len);
void rs_dg_cq(struct rs *rs);
void rs_dg_progress(struct rs *rs);

#endif
