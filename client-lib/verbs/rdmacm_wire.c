// SPDX-License-Identifier: MIT
/*
 * Encoding and checked decoding of libroshm-verbs' CM messages
 * (rdmacm_wire.h). No field of a peer's frame is used before its length and
 * range are known to be right.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "rdmacm_wire.h"

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8), p[1] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

unsigned rc_wire_pd_max(uint8_t type)
{
	switch (type) {
	case RC_MSG_REQ:
		return RC_PD_REQ;
	case RC_MSG_REP:
		return RC_PD_REP;
	case RC_MSG_REJ:
		return RC_PD_REJ;
	case RC_MSG_SIDR_REQ:
		return RC_PD_SIDR_REQ;
	case RC_MSG_SIDR_REP:
		return RC_PD_SIDR_REP;
	default:
		return 0;
	}
}

static bool is_conn(uint8_t type)
{
	return type == RC_MSG_REQ || type == RC_MSG_REP || type == RC_MSG_SIDR_REQ ||
	       type == RC_MSG_SIDR_REP;
}

static bool is_sidr(uint8_t type)
{
	return type == RC_MSG_SIDR_REQ || type == RC_MSG_SIDR_REP;
}

/* The QP types a message of @m's type may name (rdmacm_wire.h). */
static bool qp_type_ok(const struct rc_msg *m)
{
	switch (m->type) {
	case RC_MSG_REQ:
		return m->qp_type == RC_WIRE_QPT_RC || m->qp_type == RC_WIRE_QPT_XRC_SEND;
	case RC_MSG_REP:
		return m->qp_type == RC_WIRE_QPT_RC || m->qp_type == RC_WIRE_QPT_XRC_RECV;
	default:
		return m->qp_type == RC_WIRE_QPT_UD;
	}
}

/* SIDR frames carry no PSN, and a Q_Key only in the REP. */
static int conn_fields_ok(const struct rc_msg *m)
{
	bool sidr = is_sidr(m->type);

	return m->qpn <= 0xffffff && m->mtu >= 1 && m->mtu <= 5 &&
	       m->flow_control <= 1 && m->retry_count <= 7 && m->rnr_retry_count <= 7 &&
	       m->srq <= 1 && qp_type_ok(m) &&
	       (sidr ? !m->psn : m->psn <= 0xffffff && !m->qkey) &&
	       (m->type == RC_MSG_SIDR_REP || !m->qkey);
}

int rc_wire_encode(const struct rc_msg *m, uint8_t *buf, size_t cap)
{
	size_t plen;
	uint8_t *p = buf + RC_WIRE_HDR;

	switch (m->type) {
	case RC_MSG_REQ:
	case RC_MSG_REP:
	case RC_MSG_SIDR_REQ:
	case RC_MSG_SIDR_REP:
		if (!conn_fields_ok(m) || m->pd_len > rc_wire_pd_max(m->type))
			return -EINVAL;
		plen = RC_WIRE_CONN + m->pd_len;
		break;
	case RC_MSG_REJ:
		if (m->pd_len > RC_PD_REJ)
			return -EINVAL;
		plen = RC_WIRE_REJ + m->pd_len;
		break;
	case RC_MSG_RTU:
	case RC_MSG_DREQ:
		plen = 0;
		break;
	default:
		return -EINVAL;
	}
	if (cap < RC_WIRE_HDR + plen)
		return -EINVAL;
	put32(buf, RC_WIRE_MAGIC);
	buf[4] = RC_WIRE_VERSION;
	buf[5] = m->type;
	put16(buf + 6, (uint16_t)plen);
	if (is_conn(m->type)) {
		put32(p, m->qpn);
		put32(p + 4, is_sidr(m->type) ? m->qkey : m->psn);
		memcpy(p + 8, m->gid, 16);
		put16(p + 24, m->lid);
		p[26] = m->mtu;
		p[27] = m->responder_resources;
		p[28] = m->initiator_depth;
		p[29] = m->flow_control;
		p[30] = m->retry_count;
		p[31] = m->rnr_retry_count;
		p[32] = m->srq;
		p[33] = m->qp_type;
		p[34] = m->pd_len;
		p[35] = 0;
		memcpy(p + RC_WIRE_CONN, m->pd, m->pd_len);
	} else if (m->type == RC_MSG_REJ) {
		put32(p, m->reason);
		p[4] = m->pd_len;
		p[5] = p[6] = p[7] = 0;
		memcpy(p + RC_WIRE_REJ, m->pd, m->pd_len);
	}
	return (int)(RC_WIRE_HDR + plen);
}

int rc_wire_decode(const uint8_t *buf, size_t len, struct rc_msg *m)
{
	const uint8_t *p = buf + RC_WIRE_HDR;
	size_t plen;

	memset(m, 0, sizeof(*m));
	/* refuse garbage as soon as the bytes that show it have arrived */
	for (size_t i = 0; i < 4 && i < len; i++)
		if (buf[i] != (uint8_t)(RC_WIRE_MAGIC >> (24 - 8 * i)))
			return -EPROTO;
	if (len > 4 && buf[4] != RC_WIRE_VERSION)
		return -EPROTO;
	if (len > 5 && (buf[5] < RC_MSG_REQ || buf[5] > RC_MSG_SIDR_REP))
		return -EPROTO;
	if (len < RC_WIRE_HDR)
		return 0;
	plen = get16(buf + 6);
	switch (buf[5]) {
	case RC_MSG_REQ:
	case RC_MSG_REP:
	case RC_MSG_SIDR_REQ:
	case RC_MSG_SIDR_REP:
		if (plen < RC_WIRE_CONN || plen > RC_WIRE_CONN + rc_wire_pd_max(buf[5]))
			return -EPROTO;
		break;
	case RC_MSG_REJ:
		if (plen < RC_WIRE_REJ || plen > RC_WIRE_REJ + RC_PD_REJ)
			return -EPROTO;
		break;
	default:
		if (plen)
			return -EPROTO;
	}
	if (len < RC_WIRE_HDR + plen)
		return 0;
	m->type = buf[5];
	if (is_conn(m->type)) {
		m->qpn = get32(p);
		if (is_sidr(m->type))
			m->qkey = get32(p + 4);
		else
			m->psn = get32(p + 4);
		memcpy(m->gid, p + 8, 16);
		m->lid = get16(p + 24);
		m->mtu = p[26];
		m->responder_resources = p[27];
		m->initiator_depth = p[28];
		m->flow_control = p[29];
		m->retry_count = p[30];
		m->rnr_retry_count = p[31];
		m->srq = p[32];
		m->qp_type = p[33];
		m->pd_len = p[34];
		if (p[35] || !conn_fields_ok(m) || plen != RC_WIRE_CONN + (size_t)m->pd_len)
			goto bad;
		memcpy(m->pd, p + RC_WIRE_CONN, m->pd_len);
	} else if (m->type == RC_MSG_REJ) {
		m->reason = get32(p);
		m->pd_len = p[4];
		if (p[5] || p[6] || p[7] || plen != RC_WIRE_REJ + (size_t)m->pd_len)
			goto bad;
		memcpy(m->pd, p + RC_WIRE_REJ, m->pd_len);
	}
	return (int)(RC_WIRE_HDR + plen);
bad:
	memset(m, 0, sizeof(*m));
	return -EPROTO;
}
