// SPDX-License-Identifier: MIT
/*
 * libroshm-verbs' librdmacm: the CM frames a peer sends over its TCP
 * connection (client-lib/verbs/rdmacm_wire.c), fed as a stream the way
 * rdmacm.c's reader takes them. Properties: a decoded frame re-encodes to
 * exactly the bytes it came from and decodes again to the same message; its
 * fields are within their ranges (a REQ names an RC or XRC_SEND QP, a REP an
 * RC or XRC_RECV one); no proper prefix of it decodes (or is
 * refused): a frame is never taken before its last byte; a refusal leaves
 * the message zeroed.
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "rdmacm_wire.h"

static void check_fields(const struct rc_msg *m)
{
	if (m->type < RC_MSG_REQ || m->type > RC_MSG_SIDR_REP)
		fuzz_fail("type %u accepted", m->type);
	if (m->pd_len > rc_wire_pd_max(m->type))
		fuzz_fail("type %u with %u bytes of private data", m->type, m->pd_len);
	if (m->type == RC_MSG_REQ || m->type == RC_MSG_REP) {
		if (m->qpn > 0xffffff || m->psn > 0xffffff || m->mtu < 1 || m->mtu > 5 ||
		    m->retry_count > 7 || m->rnr_retry_count > 7 || m->flow_control > 1 ||
		    m->srq > 1 ||
		    (m->qp_type != RC_WIRE_QPT_RC &&
		     m->qp_type != (m->type == RC_MSG_REQ ? RC_WIRE_QPT_XRC_SEND : RC_WIRE_QPT_XRC_RECV)))
			fuzz_fail("a %s with a field out of range", m->type == RC_MSG_REQ ? "REQ" : "REP");
	}
	if (m->type == RC_MSG_SIDR_REQ || m->type == RC_MSG_SIDR_REP) {
		if (m->qpn > 0xffffff || m->psn || m->mtu < 1 || m->mtu > 5 || m->qp_type != RC_WIRE_QPT_UD ||
		    (m->type == RC_MSG_SIDR_REQ && m->qkey))
			fuzz_fail("a SIDR %s with a field out of range", m->type == RC_MSG_SIDR_REQ ? "REQ" : "REP");
	} else if (m->qkey) {
		fuzz_fail("type %u with a Q_Key", m->type);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct rc_msg zero;
	struct rc_msg m, again;
	uint8_t buf[RC_WIRE_MAX];
	size_t off = 0;

	while (off < size) {
		size_t left = size - off;
		/* an exact-size copy of what is left: ASan sees any read past it */
		uint8_t *p = malloc(left);
		int n, e;

		if (!p)
			abort();
		memcpy(p, data + off, left);
		n = rc_wire_decode(p, left, &m);
		if (n < 0) {
			if (n != -EPROTO)
				fuzz_fail("decode returned %d", n);
			if (memcmp(&m, &zero, sizeof(m)))
				fuzz_fail("a refused frame left fields set");
			free(p);
			return 0;
		}
		if (n == 0) {
			free(p);
			return 0;
		}
		if ((size_t)n > left || n > RC_WIRE_MAX)
			fuzz_fail("a frame of %d bytes out of %zu (max %d)", n, left, RC_WIRE_MAX);
		check_fields(&m);
		for (int k = 0; k < n; k++)
			if ((e = rc_wire_decode(p, (size_t)k, &again)) != 0)
				fuzz_fail("a %d-byte prefix of a %d-byte frame decoded to %d", k, n, e);
		e = rc_wire_encode(&m, buf, sizeof(buf));
		if (e != n || memcmp(buf, p, (size_t)n))
			fuzz_fail("type %u: encode gives %d bytes, not the %d decoded", m.type, e, n);
		if (rc_wire_decode(buf, (size_t)e, &again) != n || memcmp(&m, &again, sizeof(m)))
			fuzz_fail("type %u: decode(encode(m)) != m", m.type);
		free(p);
		off += (size_t)n;
	}
	return 0;
}
