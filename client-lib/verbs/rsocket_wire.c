// SPDX-License-Identifier: MIT
/*
 * rsockets of libroshm-verbs: the checks of what a peer sends (the protocol
 * is described in rsocket.c). The caller passes a private copy: the CM's
 * private data as the event carried it, the immediate and length of a
 * completion. Anything a correct peer could not have sent is EPROTO.
 */
#include <arpa/inet.h>
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
 * owe us, bytes longer than a slot, bytes in a control message, bytes when
 * every data slot is full (DATA sent on a control credit), a control
 * message when every control RECV is taken.
 */
int rs_msg_parse(uint32_t imm, uint32_t byte_len, const struct rs_room *room, struct rs_msg *m)
{
	uint32_t type = imm >> 28, c = (imm >> 24) & 0xfu, n = imm & RS_CREDIT_MASK;

	memset(m, 0, sizeof(*m));
	if ((imm & RS_IMM_RSVD) || type > RS_T_FIN || n > room->data || c > room->ctrl ||
	    byte_len > room->seg || (type != RS_T_DATA && byte_len) ||
	    (type == RS_T_DATA && byte_len && room->rx_full) ||
	    (type != RS_T_DATA && room->ctrl_full))
		return EPROTO;
	m->type = type;
	m->data = n;
	m->ctrl = c;
	return 0;
}
