// SPDX-License-Identifier: MIT
/*
 * rsockets of libroshm-verbs: the checks of what a peer sends (the protocol
 * is described in rsocket.c). The caller passes a private copy: the CM's
 * private data as the event carried it, the immediate and length of a
 * completion. Anything a correct peer could not have sent is EPROTO.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "rsocket_wire.h"

void rs_hello_make(uint32_t slots, uint32_t seg, struct rs_hello *h)
{
	h->magic = htonl(RS_MAGIC);
	h->slots = htonl(slots);
	h->seg = htonl(seg);
}

int rs_hello_parse(const void *pd, size_t len, uint32_t *slots, uint32_t *seg)
{
	struct rs_hello h;
	uint32_t n, s;

	if (!pd || len < sizeof(h))
		return EPROTO;
	memcpy(&h, pd, sizeof(h));
	n = ntohl(h.slots);
	s = ntohl(h.seg);
	if (ntohl(h.magic) != RS_MAGIC || n < RS_PEER_SLOTS_MIN || n > RS_SLOTS_MAX ||
	    s < RS_SEG_MIN || s > RS_SEG_MAX)
		return EPROTO;
	*slots = n;
	*seg = s;
	return 0;
}

/*
 * Refused: reserved bits, an unknown type, credits beyond what the peer can
 * owe us, bytes longer than a slot, bytes in a control message (an IOMAP
 * has exactly its struct's), bytes when
 * every data slot is full (DATA sent on a control credit), a control
 * message when every control RECV is taken, anything but CREDIT after the
 * peer's FIN (its stream has ended, and so have its maps' news).
 */
int rs_msg_parse(uint32_t imm, uint32_t byte_len, const struct rs_room *room, struct rs_msg *m)
{
	uint32_t type = imm >> 28, c = (imm >> 24) & 0xfu, n = imm & RS_CREDIT_MASK;

	memset(m, 0, sizeof(*m));
	if ((imm & RS_IMM_RSVD) || type > RS_T_IOMAP || n > room->data || c > room->ctrl ||
	    byte_len > room->seg ||
	    (type == RS_T_IOMAP ? byte_len != sizeof(struct rs_iomap) :
	     type != RS_T_DATA && byte_len) ||
	    (type == RS_T_DATA && byte_len && room->rx_full) ||
	    (type != RS_T_DATA && room->ctrl_full) || (room->fin && type != RS_T_CREDIT))
		return EPROTO;
	m->type = type;
	m->data = n;
	m->ctrl = c;
	return 0;
}

int rs_iomap_parse(const void *b, size_t len, struct rs_iomap *m)
{
	struct rs_iomap w;

	memset(m, 0, sizeof(*m));
	if (!b || len != sizeof(w))
		return EPROTO;
	memcpy(&w, b, sizeof(w));
	w.off = be64toh(w.off);
	w.addr = be64toh(w.addr);
	w.len = ntohl(w.len);
	w.rkey = ntohl(w.rkey);
	/* offsets are off_t: nothing past INT64_MAX, nothing that wraps */
	if (w.off > (uint64_t)INT64_MAX - w.len || w.addr > UINT64_MAX - w.len)
		return EPROTO;
	*m = w;
	return 0;
}

int rs_iomap_apply(struct rs_iomap *maps, uint32_t *n, const struct rs_iomap *m)
{
	uint32_t i;

	if (!m->len) {   /* riounmap: the map that starts there */
		for (i = 0; i < *n && maps[i].off != m->off; i++)
			;
		if (i == *n)
			return EPROTO;
		maps[i] = maps[--*n];
		return 0;
	}
	if (*n >= RS_IOMAPS)
		return EPROTO;
	for (i = 0; i < *n; i++)
		if (m->off < maps[i].off + maps[i].len && maps[i].off < m->off + m->len)
			return EPROTO;
	maps[(*n)++] = *m;
	return 0;
}

void rs_dg_make(uint8_t op, uint32_t qpn, const uint8_t gid[16], struct rs_dg_hdr *h)
{
	memset(h, 0, sizeof(*h));
	h->magic = htonl(RS_DG_MAGIC);
	h->op = op;
	h->qpn = htonl(qpn);
	memcpy(h->gid, gid, sizeof(h->gid));
}

static uint64_t rs_be64_at(const void *b, size_t off)
{
	uint64_t v;

	memcpy(&v, (const uint8_t *)b + off, sizeof(v));
	return be64toh(v);
}

int rs_dg_parse(const void *b, size_t len, uint32_t mtu, uint8_t *op, uint32_t *qpn,
		uint8_t gid[16], uint64_t *a1, uint64_t *a2)
{
	struct rs_dg_hdr h;
	uint64_t x = 0, y = 0;
	uint32_t q;

	if (!b || len < sizeof(h))
		return EPROTO;
	memcpy(&h, b, sizeof(h));
	q = ntohl(h.qpn);
	if (ntohl(h.magic) != RS_DG_MAGIC || h.rsvd[0] || h.rsvd[1] || h.rsvd[2] ||
	    !q || q > 0xffffffu)
		return EPROTO;
	switch (h.op) {
	case RS_DG_DATA:
		if (len - sizeof(h) > mtu)
			return EPROTO;
		break;
	case RS_DG_ADDR:
	case RS_DG_CHALLENGE:
		if (len != sizeof(h) + 8)
			return EPROTO;
		x = rs_be64_at(b, sizeof(h));
		break;
	case RS_DG_PROOF:
		if (len != sizeof(h) + 16)
			return EPROTO;
		x = rs_be64_at(b, sizeof(h));
		y = rs_be64_at(b, sizeof(h) + 8);
		break;
	default:
		return EPROTO;
	}
	*op = h.op;
	*qpn = q;
	memcpy(gid, h.gid, sizeof(h.gid));
	*a1 = x;
	*a2 = y;
	return 0;
}

int rs_dg_ud_parse(const void *b, size_t len, uint32_t mtu, struct rs_dg_ud *u, uint64_t *a1)
{
	static const uint8_t zero[12];
	struct rs_dg_ud w;
	uint32_t kind;
	uint16_t fam;
	uint64_t x = 0;

	if (!b || len < sizeof(w))
		return EPROTO;
	memcpy(&w, b, sizeof(w));
	kind = ntohl(w.kind);
	fam = ntohs(w.family);
	if ((fam != AF_INET && fam != AF_INET6) || (fam == AF_INET && memcmp(w.addr + 4, zero, 12)))
		return EPROTO;
	if (kind == RS_DG_UD_PROBE) {
		if (len != sizeof(w) + 8)
			return EPROTO;
		x = rs_be64_at(b, sizeof(w));
	} else if (kind != RS_DG_UD_DATA || len - sizeof(w) > mtu) {
		return EPROTO;
	}
	u->token = be64toh(w.token);
	u->kind = kind;
	u->family = fam;
	u->port = ntohs(w.port);
	memcpy(u->addr, w.addr, sizeof(u->addr));
	*a1 = x;
	return 0;
}
