// SPDX-License-Identifier: MIT
/* verbs CM private data: decode and validate the peer's bytes (verbs_pdata.h). */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "config.h"
#include "transport/verbs/verbs_pdata.h"

/* Hello and proof share their first 8 bytes with the challenge's layout:
 * magic, kind, version, then qp_index (hello, proof) or rsvd (challenge). */
struct vpd_head {
	uint32_t magic;
	uint8_t kind;
	uint8_t version;
	uint16_t word;
};
_Static_assert(offsetof(struct roshm_verbs_hello, qp_index) == offsetof(struct vpd_head, word), "head");
_Static_assert(offsetof(struct roshm_verbs_proof, qp_index) == offsetof(struct vpd_head, word), "head");
_Static_assert(offsetof(struct roshm_verbs_challenge, rsvd) == offsetof(struct vpd_head, word), "head");

/* A node name field of @w bytes: terminated inside the field, zero after the
 * terminator (the MAC covers the name only, so trailing bytes would be an
 * unauthenticated channel), and a valid non-empty name. */
static bool name_field_ok(const char *f, size_t w, char *out, size_t cap)
{
	const char *nul = memchr(f, 0, w);
	size_t n;

	if (!nul)
		return false;
	n = (size_t)(nul - f);
	for (size_t i = n; i < w; i++)
		if (f[i])
			return false;
	if (!n || n >= cap)
		return false;
	memcpy(out, f, n);
	out[n] = 0;
	return rd_valid_name(out);
}

int rd_verbs_pdata_decode(const void *pd, size_t len, enum rd_vpd_where where, struct rd_vpd *m)
{
	struct vpd_head h;

	memset(m, 0, sizeof(*m));
	/* a request carries a hello or a proof (56 bytes), a reject a challenge
	 * or a denial (both in the 120-byte challenge layout) */
	if (!pd || len < (where == RD_VPD_REJECT ? sizeof(struct roshm_verbs_challenge) :
						   sizeof(struct roshm_verbs_hello)))
		return -EPROTO;
	memcpy(&h, pd, sizeof(h));
	if (h.magic != ROSHM_VERBS_MAGIC || h.version != ROSHM_VERBS_VERSION)
		return -EPROTO;
	/* copy before checking: the caller's buffer is never read twice */
	if (where == RD_VPD_REQUEST && h.kind == ROSHM_VERBS_HELLO) {
		struct roshm_verbs_hello x;

		memcpy(&x, pd, sizeof(x));
		if (!name_field_ok(x.node, sizeof(x.node), m->node, sizeof(m->node)))
			goto bad;
		m->qp_index = x.qp_index;
		memcpy(m->nonce, x.nonce, sizeof(m->nonce));
	} else if (where == RD_VPD_REQUEST && h.kind == ROSHM_VERBS_PROOF) {
		struct roshm_verbs_proof x;

		memcpy(&x, pd, sizeof(x));
		m->qp_index = x.qp_index;
		memcpy(m->nonce, x.nonce, sizeof(m->nonce));
		memcpy(m->mac, x.mac, sizeof(m->mac));
	} else if (where == RD_VPD_REJECT && h.kind == ROSHM_VERBS_CHALLENGE) {
		struct roshm_verbs_challenge x;

		memcpy(&x, pd, sizeof(x));
		if (x.rsvd || !name_field_ok(x.node, sizeof(x.node), m->node, sizeof(m->node)))
			goto bad;
		memcpy(m->nonce, x.nonce, sizeof(m->nonce));
		memcpy(m->mac, x.mac, sizeof(m->mac));
	} else if (where == RD_VPD_REJECT && h.kind == ROSHM_VERBS_DENIED) {
		/* carries nothing: what the responder says to anything it refuses */
	} else {
		goto bad;
	}
	m->kind = h.kind;
	return 0;
bad:
	memset(m, 0, sizeof(*m));
	return -EBADMSG;
}

int rd_verbs_pdata_encode(const struct rd_vpd *m, void *buf, size_t cap)
{
	size_t sz;

	switch (m->kind) {
	case ROSHM_VERBS_HELLO: {
		struct roshm_verbs_hello x = { .magic = ROSHM_VERBS_MAGIC, .kind = m->kind,
					       .version = ROSHM_VERBS_VERSION, .qp_index = m->qp_index };

		memcpy(x.nonce, m->nonce, sizeof(x.nonce));
		memcpy(x.node, m->node, strnlen(m->node, sizeof(x.node) - 1));
		if (cap < (sz = sizeof(x)))
			return -ENOSPC;
		memcpy(buf, &x, sz);
		break;
	}
	case ROSHM_VERBS_PROOF: {
		struct roshm_verbs_proof x = { .magic = ROSHM_VERBS_MAGIC, .kind = m->kind,
					       .version = ROSHM_VERBS_VERSION, .qp_index = m->qp_index };

		memcpy(x.nonce, m->nonce, sizeof(x.nonce));
		memcpy(x.mac, m->mac, sizeof(x.mac));
		if (cap < (sz = sizeof(x)))
			return -ENOSPC;
		memcpy(buf, &x, sz);
		break;
	}
	case ROSHM_VERBS_CHALLENGE:
	case ROSHM_VERBS_DENIED: {
		struct roshm_verbs_challenge x = { .magic = ROSHM_VERBS_MAGIC, .kind = m->kind,
						   .version = ROSHM_VERBS_VERSION };

		if (m->kind == ROSHM_VERBS_CHALLENGE) {
			memcpy(x.nonce, m->nonce, sizeof(x.nonce));
			memcpy(x.node, m->node, strnlen(m->node, sizeof(x.node) - 1));
			memcpy(x.mac, m->mac, sizeof(x.mac));
		}
		if (cap < (sz = sizeof(x)))
			return -ENOSPC;
		memcpy(buf, &x, sz);
		break;
	}
	default:
		return -EINVAL;
	}
	return (int)sz;
}
