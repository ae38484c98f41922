/* SPDX-License-Identifier: MIT */
/*
 * The messages libroshm-verbs' librdmacm exchanges over TCP between the two
 * application processes of a connection (the roles of IB CM's REQ, REP, REJ,
 * RTU and DREQ). Everything decoded here came from a peer: rc_wire_decode()
 * checks every length and field before anything else reads it.
 *
 * Frame: be32 magic "RCM1", u8 version, u8 type, be16 payload length.
 * REQ/REP payload: be32 qpn, be32 psn, gid[16], be16 lid, u8 mtu,
 *   responder_resources, initiator_depth, flow_control, retry_count,
 *   rnr_retry_count, srq, qp_type, private_data_len, u8 zero, private data.
 * REJ payload: be32 reason, u8 private_data_len, u8 zero[3], private data.
 * RTU, DREQ: empty.
 * qp_type: RC in a REQ and a REP, or XRC_SEND in a REQ and XRC_RECV in a
 *   REP (an XRC connection: the requester's XRC_SEND QP and the responder's
 *   XRC_RECV QP).
 * SIDR_REQ / SIDR_REP (RDMA_PS_UDP, the roles of IB CM's SIDR): the REQ/REP
 *   payload with qp_type UD and the Q_Key where the PSN is; once the REP (or
 *   a REJ) is sent, nothing more goes over the connection.
 */
#ifndef ROSHM_RDMACM_WIRE_H
#define ROSHM_RDMACM_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define RC_WIRE_MAGIC 0x52434d31u /* "RCM1" */
#define RC_WIRE_VERSION 1
#define RC_WIRE_HDR 8
#define RC_WIRE_CONN 36           /* fixed part of REQ / REP */
#define RC_WIRE_REJ 8             /* fixed part of REJ */
/* Private data of RDMA_PS_TCP on IB / RoCE: IB CM's sizes (REQ less the 36
 * bytes of the CMA header). Receivers report these lengths, zero-padded,
 * as rdma_cm does. */
#define RC_PD_REQ 56
#define RC_PD_REP 196
#define RC_PD_REJ 148
#define RC_PD_SIDR_REQ 180        /* SIDR REQ's 216 less the CMA header */
#define RC_PD_SIDR_REP 136
#define RC_WIRE_MAX (RC_WIRE_HDR + RC_WIRE_CONN + RC_PD_REP)
#define RC_WIRE_QPT_RC 2          /* IBV_QPT_RC: REQ and REP */
#define RC_WIRE_QPT_UD 4          /* IBV_QPT_UD: SIDR_REQ and SIDR_REP */
#define RC_WIRE_QPT_XRC_SEND 9    /* IBV_QPT_XRC_SEND: the REQ of an XRC connection */
#define RC_WIRE_QPT_XRC_RECV 10   /* IBV_QPT_XRC_RECV: its REP */

enum rc_msg_type {
	RC_MSG_REQ = 1,
	RC_MSG_REP = 2,
	RC_MSG_REJ = 3,
	RC_MSG_RTU = 4,
	RC_MSG_DREQ = 5,
	RC_MSG_SIDR_REQ = 6,
	RC_MSG_SIDR_REP = 7,
};

struct rc_msg {
	uint8_t type;
	/* REQ / REP (and SIDR_REQ / SIDR_REP but for psn) */
	uint32_t qpn;             /* 24 bits */
	uint32_t psn;             /* 24 bits */
	uint32_t qkey;            /* SIDR_REP: the Q_Key to send with; SIDR_REQ: 0 */
	uint8_t gid[16];
	uint16_t lid;
	uint8_t mtu;              /* enum ibv_mtu, 1..5 */
	uint8_t responder_resources;
	uint8_t initiator_depth;
	uint8_t flow_control;     /* 0 or 1 */
	uint8_t retry_count;      /* 0..7 */
	uint8_t rnr_retry_count;  /* 0..7 */
	uint8_t srq;              /* 0 or 1 */
	uint8_t qp_type;          /* RC_WIRE_QPT_RC; _XRC_SEND (REQ) and _XRC_RECV
				   * (REP) for XRC; _UD for SIDR */
	/* REJ */
	uint32_t reason;
	/* REQ, REP, REJ */
	uint8_t pd_len;
	uint8_t pd[RC_PD_REP];
};

/* The largest private data a message of @type carries (0: none). */
unsigned rc_wire_pd_max(uint8_t type);

/* Encode @m into @buf: the frame's length, or -EINVAL when a field is out
 * of range or @cap is too small. */
int rc_wire_encode(const struct rc_msg *m, uint8_t *buf, size_t cap);

/* Decode the first frame of @buf[0..len): its length (> 0) with *m filled,
 * 0 when more bytes are needed (nothing seen so far is wrong), or -EPROTO
 * when the bytes are no valid frame (the connection must go). @m is zeroed
 * first in every case. */
int rc_wire_decode(const uint8_t *buf, size_t len, struct rc_msg *m);

#endif
