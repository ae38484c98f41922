// SPDX-License-Identifier: MIT
/*
 * rsockets of libroshm-verbs (client-lib/verbs/rsocket_wire.c): a peer's
 * hello and the immediates of its messages, against a model of the
 * receiver's counts that runs the way rsocket_io.c runs them.
 *
 * Properties: an accepted hello is canonical (made again, it is the bytes
 * read) and in bounds; an accepted immediate is canonical (RS_IMM of what
 * it decoded) and returns no more credits than the peer could owe; a
 * refused one leaves nothing set; after a FIN only CREDIT is accepted.
 * IOMAP bytes: see iomap(). With only
 * accepted messages applied, the
 * receiver never holds more data credits than the peer has slots, more
 * control credits than RS_CTRL, nor more unread slots than its own.
 *
 * Input: our slots (1 byte, +RS_PEER_SLOTS_MIN), our slot size (1 byte,
 * x64 +RS_SEG_MIN), the hello's length (1 byte) and bytes, then steps of
 * 7 bytes: an action, then an immediate and a length for a message; or
 * (action & 7 == 4) an IOMAP's 24 bytes, against the peer's maps so far;
 * or (action & 7 == 5) a length byte and 64 bytes, of which that many
 * (at most 64) are a UDP message to a datagram rsocket (rs_dg_parse) and
 * a UD datagram (rs_dg_ud_parse), for datagrams of at most 16 bytes: an
 * accepted one is its own header; an ADDR or CHALLENGE is the header and
 * an 8-byte argument, a PROOF two, a DATA at most 16 more bytes, the QPN
 * 24 bits but 0; a UD datagram names an IPv4 or IPv6 address (IPv4: 12
 * bytes 0), a PROBE is its header and a nonce, a DATA at most 16 more
 * bytes; a refused one sets nothing.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "rsocket_wire.h"

struct rcv {
	uint32_t nrx, seg, peer_nrx;
	uint32_t credits, ctrl_credits, owed, ctrl_owed, unread;
	bool fin;
};

static void check(const struct rcv *r)
{
	if (r->credits > r->peer_nrx)
		fuzz_fail("%u data credits for %u peer slots", r->credits, r->peer_nrx);
	if (r->ctrl_credits > RS_CTRL)
		fuzz_fail("%u control credits", r->ctrl_credits);
	if (r->unread > r->nrx)
		fuzz_fail("%u unread slots of %u", r->unread, r->nrx);
	if (r->ctrl_owed > RS_CTRL)
		fuzz_fail("%u control RECVs owed", r->ctrl_owed);
}

/* A message from the peer; false: the connection broke. */
static bool message(struct rcv *r, uint32_t imm, uint32_t len)
{
	static const struct rs_msg zero;
	struct rs_room room = { .data = r->peer_nrx - r->credits, .ctrl = RS_CTRL - r->ctrl_credits,
				.seg = r->seg, .rx_full = r->unread >= r->nrx,
				.ctrl_full = r->ctrl_owed >= RS_CTRL, .fin = r->fin };
	struct rs_msg m;
	int ret = rs_msg_parse(imm, len, &room, &m);

	if (ret) {
		if (ret != EPROTO || memcmp(&m, &zero, sizeof(m)))
			fuzz_fail("a refused immediate: %d, or fields set", ret);
		return false;
	}
	if (RS_IMM(m.type, m.ctrl, m.data) != imm)
		fuzz_fail("immediate %08x accepted as type %u, %u control, %u data credits", imm,
			  m.type, m.ctrl, m.data);
	if (m.type > RS_T_FIN || m.data > room.data || m.ctrl > room.ctrl || len > r->seg ||
	    (m.type != RS_T_DATA && len))
		fuzz_fail("immediate %08x with %u bytes accepted", imm, len);
	if (r->fin && m.type != RS_T_CREDIT)
		fuzz_fail("type %u accepted after the peer's FIN", m.type);
	r->fin |= m.type == RS_T_FIN;
	r->credits += m.data;
	r->ctrl_credits += m.ctrl;
	if (m.type == RS_T_DATA && len)
		r->unread++;
	else if (m.type == RS_T_DATA)
		r->owed++;
	else
		r->ctrl_owed++;
	return true;
}

/* An IOMAP's bytes against the peer's maps so far: a map accepted is its
 * own encoding; the maps never overlap, never pass INT64_MAX or wrap an
 * address, never more than RS_IOMAPS; a refused one changes nothing. */
static void iomap(struct rs_iomap *maps, uint32_t *n, const uint8_t *b)
{
	static const struct rs_iomap zero;
	struct rs_iomap before[RS_IOMAPS], m;
	uint32_t n0 = *n;
	int ret;

	memcpy(before, maps, sizeof(before));
	ret = rs_iomap_parse(b, sizeof(struct rs_iomap), &m);
	if (ret) {
		if (ret != EPROTO || memcmp(&m, &zero, sizeof(m)))
			fuzz_fail("a refused IOMAP: %d, or fields set", ret);
		return;
	}
	{
		struct rs_iomap w = { htobe64(m.off), htobe64(m.addr), htonl(m.len), htonl(m.rkey) };

		if (memcmp(&w, b, sizeof(w)))
			fuzz_fail("an IOMAP accepted that is not its own encoding");
	}
	ret = rs_iomap_apply(maps, n, &m);
	if (ret) {
		if (ret != EPROTO || *n != n0 || memcmp(before, maps, sizeof(before)))
			fuzz_fail("a refused IOMAP changed the maps");
		return;
	}
	if (*n > RS_IOMAPS)
		fuzz_fail("%u maps", *n);
	for (uint32_t i = 0; i < *n; i++) {
		if (!maps[i].len || maps[i].off > (uint64_t)INT64_MAX - maps[i].len ||
		    maps[i].addr > UINT64_MAX - maps[i].len)
			fuzz_fail("map %u: off %llu len %u addr %llx", i, (unsigned long long)maps[i].off,
				  maps[i].len, (unsigned long long)maps[i].addr);
		for (uint32_t j = 0; j < i; j++)
			if (maps[i].off < maps[j].off + maps[j].len &&
			    maps[j].off < maps[i].off + maps[i].len)
				fuzz_fail("maps %u and %u overlap", j, i);
	}
}

#define DG_WIN 64u
#define DG_MTU 16u

static const uint8_t ee[16] = { 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee,
				0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee };

/* The same bytes as a UDP message and as a UD datagram of a datagram
 * rsocket whose datagrams hold DG_MTU bytes. */
static void dgram(const uint8_t *b)
{
	uint32_t len = b[0] > DG_WIN ? DG_WIN : b[0], qpn = 0xdeadbeef;
	uint64_t a1 = 0xeeeeeeeeeeeeeeeeull, a2 = 0xeeeeeeeeeeeeeeeeull;
	uint8_t op = 0xee, gid[16], *m = malloc(len ? len : 1);   /* ASan: no read past it */
	struct rs_dg_ud u, u0;
	struct rs_dg_hdr h;
	int ret;

	if (!m)
		abort();
	memcpy(m, b + 1, len);
	memset(gid, 0xee, sizeof(gid));
	ret = rs_dg_parse(m, len, DG_MTU, &op, &qpn, gid, &a1, &a2);
	if (ret) {
		if (ret != EPROTO || op != 0xee || qpn != 0xdeadbeef || memcmp(gid, ee, 16) ||
		    a1 != 0xeeeeeeeeeeeeeeeeull || a2 != 0xeeeeeeeeeeeeeeeeull)
			fuzz_fail("a refused UDP message: %d, or fields set", ret);
	} else {
		size_t args = op == RS_DG_PROOF ? 16 : op == RS_DG_DATA ? 0 : 8;
		uint64_t w[2] = { htobe64(a1), htobe64(a2) };

		rs_dg_make(op, qpn, gid, &h);
		if (len < sizeof(h) || memcmp(&h, m, sizeof(h)))
			fuzz_fail("a UDP message accepted whose header is not its own encoding");
		if (!qpn || qpn > 0xffffff || op < RS_DG_DATA || op > RS_DG_CHALLENGE ||
		    (op == RS_DG_DATA ? len - sizeof(h) > DG_MTU : len != sizeof(h) + args))
			fuzz_fail("a UDP message accepted: op %u, QPN %u, %u bytes", op, qpn, len);
		if (args && memcmp(w, m + sizeof(h), args))
			fuzz_fail("a UDP message whose arguments are not its bytes");
		if ((args < 16 && a2) || (!args && a1))
			fuzz_fail("a UDP message with arguments it does not carry");
	}
	a1 = 0xeeeeeeeeeeeeeeeeull;
	memset(&u, 0xee, sizeof(u));
	u0 = u;
	ret = rs_dg_ud_parse(m, len, DG_MTU, &u, &a1);
	if (ret) {
		if (ret != EPROTO || memcmp(&u, &u0, sizeof(u)) || a1 != 0xeeeeeeeeeeeeeeeeull)
			fuzz_fail("a refused UD datagram: %d, or fields set", ret);
	} else {
		struct rs_dg_ud w = u;
		static const uint8_t z[12];

		w.token = htobe64(u.token);
		w.kind = htonl(u.kind);
		w.family = htons(u.family);
		w.port = htons(u.port);
		if (len < sizeof(w) || memcmp(&w, m, sizeof(w)))
			fuzz_fail("a UD datagram accepted whose header is not its own encoding");
		if ((u.family != AF_INET && u.family != AF_INET6) ||
		    (u.family == AF_INET && memcmp(u.addr + 4, z, 12)))
			fuzz_fail("a UD datagram accepted naming family %u", u.family);
		if (u.kind == RS_DG_UD_PROBE ? len != sizeof(w) + 8
		    : u.kind != RS_DG_UD_DATA || len - sizeof(w) > DG_MTU)
			fuzz_fail("a UD datagram accepted: kind %u, %u bytes", u.kind, len);
	}
	free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rs_iomap maps[RS_IOMAPS];
	uint32_t nmaps = 0;
	struct rcv r;
	uint32_t slots = 0, seg = 0, hl;
	uint8_t *pd;
	int ret;

	if (size < 3)
		return 0;
	memset(&r, 0, sizeof(r));
	r.nrx = RS_PEER_SLOTS_MIN + data[0];
	r.seg = RS_SEG_MIN + 64u * data[1];
	hl = data[2];
	data += 3;
	size -= 3;
	if (hl > size)
		hl = (uint32_t)size;
	/* a copy of exactly the private data: ASan sees any read past it */
	pd = malloc(hl ? hl : 1);
	if (!pd)
		abort();
	memcpy(pd, data, hl);
	ret = rs_hello_parse(pd, hl, &slots, &seg);
	if (ret) {
		if (ret != EPROTO || slots || seg)
			fuzz_fail("a refused hello: %d, or fields set", ret);
		free(pd);
		return 0;
	}
	{
		struct rs_hello h;

		rs_hello_make(slots, seg, &h);
		if (hl < sizeof(h) || memcmp(&h, pd, sizeof(h)))
			fuzz_fail("a hello accepted that is not its own encoding");
	}
	free(pd);
	if (slots < RS_PEER_SLOTS_MIN || slots > RS_SLOTS_MAX || seg < RS_SEG_MIN || seg > RS_SEG_MAX)
		fuzz_fail("a hello of %u slots of %u bytes accepted", slots, seg);
	data += hl;
	size -= hl;
	r.peer_nrx = slots;
	r.credits = slots;
	r.ctrl_credits = RS_CTRL;
	for (; size >= 7; data += 7, size -= 7) {
		uint32_t imm = (uint32_t)data[1] << 24 | (uint32_t)data[2] << 16 |
			       (uint32_t)data[3] << 8 | data[4];
		uint32_t len = ((uint32_t)data[5] << 8 | data[6]) * 32u;

		if ((data[0] & 7) == 5) {   /* a UDP message: a length, 48 bytes */
			if (size < 2 + DG_WIN)
				return 0;
			dgram(data + 1);
			data += 2 + DG_WIN - 7;
			size -= 2 + DG_WIN - 7;
			continue;
		}
		if ((data[0] & 7) == 4) {   /* an IOMAP's bytes: the next 24 */
			if (size < 1 + sizeof(struct rs_iomap))
				return 0;
			iomap(maps, &nmaps, data + 1);
			data += 1 + sizeof(struct rs_iomap) - 7;
			size -= 1 + sizeof(struct rs_iomap) - 7;
			continue;
		}
		switch (data[0] & 3) {
		case 0:   /* the peer's message */
			if (!message(&r, imm, len))
				return 0;
			break;
		case 1:   /* we send DATA: a data credit spent, what we owe returned */
			if (r.credits) {
				r.credits--;
				r.owed = r.ctrl_owed = 0;
			}
			break;
		case 2:   /* we send CREDIT or FIN: a control credit spent */
			if (r.ctrl_credits) {
				r.ctrl_credits--;
				r.owed = r.ctrl_owed = 0;
			}
			break;
		case 3:   /* the application read a slot: its RECV posted again */
			if (r.unread) {
				r.unread--;
				r.owed++;
			}
			break;
		}
		check(&r);
	}
	return 0;
}
