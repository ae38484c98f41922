// SPDX-License-Identifier: MIT
/*
 * verbs CM private data (dataplane/transport/verbs/verbs_pdata.c): the bytes a
 * peer puts in a connect request or a reject. Properties: what decodes
 * re-encodes to the same leading bytes (the encoding is canonical: nothing
 * the MAC does not cover can vary), decodes again to the same message, and
 * carries a valid node name where it carries one.
 *
 * Input: one byte (bit 0: 0 = connect request, 1 = reject), then the
 * private data.
 */
#include <errno.h>
#include <string.h>

#include "config.h"
#include "fuzz.h"
#include "transport/verbs/verbs_pdata.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum rd_vpd_where where;
	struct rd_vpd m, again;
	uint8_t buf[sizeof(struct roshm_verbs_challenge)];
	int ret, n;

	if (size < 1)
		return 0;
	where = (data[0] & 1) ? RD_VPD_REJECT : RD_VPD_REQUEST;
	/* a copy of exactly the private data: ASan sees any read past it */
	uint8_t *pd = malloc(size - 1 ? size - 1 : 1);

	if (!pd)
		abort();
	memcpy(pd, data + 1, size - 1);
	ret = rd_verbs_pdata_decode(pd, size - 1, where, &m);
	if (ret && ret != -EPROTO && ret != -EBADMSG)
		fuzz_fail("decode returned %d", ret);
	if (ret) {
		static const struct rd_vpd zero;

		if (memcmp(&m, &zero, sizeof(m)))
			fuzz_fail("a refused message left fields set");
		free(pd);
		return 0;
	}
	if (where == RD_VPD_REQUEST ? m.kind != ROSHM_VERBS_HELLO && m.kind != ROSHM_VERBS_PROOF
				    : m.kind != ROSHM_VERBS_CHALLENGE && m.kind != ROSHM_VERBS_DENIED)
		fuzz_fail("kind %u accepted in a %s", m.kind, where == RD_VPD_REQUEST ? "request" : "reject");
	if ((m.kind == ROSHM_VERBS_HELLO || m.kind == ROSHM_VERBS_CHALLENGE) &&
	    (!memchr(m.node, 0, sizeof(m.node)) || !rd_valid_name(m.node)))
		fuzz_fail("kind %u accepted with an invalid node name", m.kind);
	if (m.kind == ROSHM_VERBS_HELLO && strlen(m.node) >= ROSHM_VERBS_ID)
		fuzz_fail("hello node name longer than its field");
	n = rd_verbs_pdata_encode(&m, buf, sizeof(buf));
	if (n < (int)sizeof(struct roshm_verbs_hello))
		fuzz_fail("encode of a decoded kind %u returned %d", m.kind, n);
	if (m.kind != ROSHM_VERBS_DENIED && ((size_t)n > size - 1 || memcmp(buf, pd, (size_t)n)))
		fuzz_fail("kind %u: the encoding is not the bytes that were decoded", m.kind);
	if (rd_verbs_pdata_decode(buf, (size_t)n, where, &again) || memcmp(&m, &again, sizeof(m)))
		fuzz_fail("kind %u: decode(encode(m)) != m", m.kind);
	free(pd);
	return 0;
}
