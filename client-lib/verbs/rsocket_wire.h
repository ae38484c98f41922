/* SPDX-License-Identifier: MIT */
/*
 * rsockets of libroshm-verbs: what a peer sends, checked without a
 * connection (rsocket_wire.c): the hello in the CM's private data and the
 * immediate of each SEND. Nothing of verbs or the CM here:
 * tests/fuzz/fuzz_rsocket_wire.c drives both with any bytes.
 */
#ifndef RSOCKET_WIRE_H
#define RSOCKET_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RS_MAGIC 0x52535231u          /* "RSR1" */
#define RS_T_DATA 0u
#define RS_T_CREDIT 1u
#define RS_T_FIN 2u
#define RS_T_IOMAP 3u                 /* a riomap'd buffer, or its riounmap */
/* the immediate: type << 28 | control credits << 24 | data credits */
#define RS_IMM(t, c, n) ((t) << 28 | (c) << 24 | (n))
#define RS_IMM_RSVD 0x00ff0000u
#define RS_CREDIT_MASK 0xffffu
#define RS_CTRL 4u                    /* control RECVs and credits, each way */
#define RS_SEG_MIN 64u
#define RS_SEG_MAX (1u << 20)
#define RS_PEER_SLOTS_MIN 2u          /* the fewest data slots a peer may have */
#define RS_SLOTS_MAX 1024u

/* the hello, in network byte order */
struct rs_hello {
	uint32_t magic, slots, seg;
};

#define RS_IOMAPS 8u                  /* riomap'd buffers, each way */

/* An IOMAP message's bytes, in network byte order: the peer's buffer at
 * [off, off + len) of its riomap space is at addr with rkey; len 0 takes
 * the map at off away (riounmap). */
struct rs_iomap {
	uint64_t off, addr;
	uint32_t len, rkey;
};

/* What a message from the peer may carry now, from the receiver's counts. */
struct rs_room {
	uint32_t data;      /* data credits it may give back: its slots less the credits we hold */
	uint32_t ctrl;      /* control credits it may give back: RS_CTRL less those we hold */
	uint32_t seg;       /* the bytes of one of our slots */
	bool rx_full;       /* every data slot holds bytes not yet read */
	bool ctrl_full;     /* every control RECV is taken */
	bool fin;           /* the peer's FIN came: only CREDIT may follow */
};

/* A message, decoded and checked. */
struct rs_msg {
	uint32_t type;      /* RS_T_* */
	uint32_t data;      /* data credits given back */
	uint32_t ctrl;      /* control credits given back */
};

void rs_hello_make(uint32_t slots, uint32_t seg, struct rs_hello *h);
/* 0, or EPROTO (nothing set) */
int rs_hello_parse(const void *pd, size_t len, uint32_t *slots, uint32_t *seg);
/* @imm in host order; 0, or EPROTO (@m zeroed): the connection is broken */
int rs_msg_parse(uint32_t imm, uint32_t byte_len, const struct rs_room *room, struct rs_msg *m);
/* An IOMAP's bytes (exactly sizeof(struct rs_iomap)), into host order, checked:
 * 0, or EPROTO (@m zeroed) */
int rs_iomap_parse(const void *b, size_t len, struct rs_iomap *m);
/* The peer's maps @maps (@n of them, host order) after IOMAP @m: 0, or
 * EPROTO (an overlap, one map too many, an unmap of no map); @maps unchanged
 * then */
int rs_iomap_apply(struct rs_iomap *maps, uint32_t *n, const struct rs_iomap *m);

/*
 * Datagram rsockets (rsocket_dgram.c, which describes the protocol). Over
 * the kernel UDP socket bound beside each one, network byte order, struct
 * rs_dg_hdr first, then by op:
 *   DATA       a datagram (to an address not confirmed yet)
 *   ADDR       8 bytes: the token the answerer takes from the address it
 *              answers (its QP in the header)
 *   CHALLENGE  8 bytes: a nonce, the half of a proof that goes over UDP
 *   PROOF      16 bytes: the PROBE's nonce, then the CHALLENGE's
 * Over UD, struct rs_dg_ud first (the token the receiver gave the sender's
 * address, and that address), then by kind: DATA a datagram, PROBE 8
 * bytes, a nonce.
 */
#define RS_DG_MAGIC 0x52534431u       /* "RSD1" */
#define RS_DG_DATA 1u
#define RS_DG_ADDR 2u
#define RS_DG_PROOF 3u
#define RS_DG_CHALLENGE 4u
struct rs_dg_hdr {
	uint32_t magic;
	uint8_t op, rsvd[3];
	uint32_t qpn;
	uint8_t gid[16];
};
#define RS_DG_UD_DATA 0u
#define RS_DG_UD_PROBE 1u
struct rs_dg_ud {
	uint64_t token;
	uint32_t kind;
	uint16_t family, port;        /* the sender's address, as the receiver sees it */
	uint8_t addr[16];             /* IPv4: the first 4 bytes, the rest 0 */
};

void rs_dg_make(uint8_t op, uint32_t qpn, const uint8_t gid[16], struct rs_dg_hdr *h);
/* A UDP message of @len bytes (a private copy), whose datagrams may hold
 * @mtu bytes: 0 with its op, QPN, GID and arguments (ADDR, CHALLENGE: a1;
 * PROOF: a1, a2; 0 otherwise), the payload after the header for DATA; or
 * EPROTO (nothing set): dropped */
int rs_dg_parse(const void *b, size_t len, uint32_t mtu, uint8_t *op, uint32_t *qpn,
		uint8_t gid[16], uint64_t *a1, uint64_t *a2);
/* A UD datagram's first @len bytes (a private copy of its header, and a
 * PROBE's nonce): 0 with the header in host order (@u) and a PROBE's nonce
 * (@a1), the payload after the header for DATA (at most @mtu bytes); or
 * EPROTO (nothing set): dropped. The address is AF_INET or AF_INET6, an
 * IPv4 one with its last 12 bytes 0. */
int rs_dg_ud_parse(const void *b, size_t len, uint32_t mtu, struct rs_dg_ud *u, uint64_t *a1);

#endif
