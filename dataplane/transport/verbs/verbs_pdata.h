/* SPDX-License-Identifier: MIT */
/*
 * The verbs CM private data (roshm/wire.h: hello, challenge, proof, denied)
 * as plain bytes in and out, with no rdma_cm_id: the peer's bytes are
 * untrusted, so they are decoded and validated here once, in one pure
 * function that unit tests and the fuzzer reach directly.
 *
 * What this checks: length, magic, version, that the kind belongs where it
 * came (a connect request carries HELLO or PROOF, a reject CHALLENGE or
 * DENIED), reserved fields zero, node names NUL-terminated inside their
 * field, NUL-padded after it, non-empty and valid (rd_valid_name).
 * What it leaves to the caller: the MACs, whether a proof's nonce names a
 * challenge that was issued, is unexpired and unused (single use), and
 * whether the node is the one expected.
 */
#ifndef RD_VERBS_PDATA_H
#define RD_VERBS_PDATA_H

#include <stddef.h>
#include <stdint.h>
#include "roshm/wire.h"

/* Where the private data arrived. */
enum rd_vpd_where {
	RD_VPD_REQUEST, /* a connect request (responder side): HELLO or PROOF */
	RD_VPD_REJECT,  /* a reject (requester side): CHALLENGE or DENIED */
};

/* A decoded message. Fields a kind does not carry are zero. */
struct rd_vpd {
	uint8_t kind;                      /* enum roshm_verbs_kind */
	uint16_t qp_index;                 /* HELLO, PROOF */
	uint8_t nonce[ROSHM_VERBS_NONCE];  /* HELLO: requester's; CHALLENGE, PROOF: responder's */
	char node[ROSHM_NAME_MAX];         /* HELLO (at most ROSHM_VERBS_ID - 1 chars), CHALLENGE */
	uint8_t mac[32];                   /* CHALLENGE, PROOF */
};

/*
 * Decode @len bytes of private data received at @where into @m.
 * The CM may deliver more bytes than were sent (a REQ's or REJ's private
 * data area is fixed-size and zero-filled): bytes past the message are
 * ignored. Returns 0, or:
 *   -EPROTO   not a roshm message: NULL, shorter than a hello (request) or a
 *             challenge (reject), wrong magic or version
 *             (a peer of another protocol or release; deny without a MAC)
 *   -EBADMSG  a roshm message that is malformed: a kind that does not belong
 *             at @where, a reserved field set, a node name that is empty,
 *             unterminated, not NUL-padded, or not a valid name
 * On error @m is zeroed.
 */
int rd_verbs_pdata_decode(const void *pd, size_t len, enum rd_vpd_where where, struct rd_vpd *m);

/*
 * Encode @m (of any kind) into @buf, which must hold @cap bytes. A HELLO
 * carries the first ROSHM_VERBS_ID - 1 characters of the node name (the
 * REQ has no room for more; both sides MAC the same truncated name).
 * Returns the message size (what to pass as private_data_len), or
 * -EINVAL for an unknown kind and -ENOSPC when @cap is too small.
 */
int rd_verbs_pdata_encode(const struct rd_vpd *m, void *buf, size_t cap);

#endif
