// SPDX-License-Identifier: MIT
/* verbs CM private data decoder: every message as verbs_cm.c builds it
 * decodes, and each malformation is refused with the documented code. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "transport/verbs/verbs_pdata.h"

/* the bytes verbs_cm.c's qp_connect and on_request put on the wire */
static struct roshm_verbs_hello hello(const char *node)
{
	struct roshm_verbs_hello h = { .magic = ROSHM_VERBS_MAGIC, .kind = ROSHM_VERBS_HELLO,
				       .version = ROSHM_VERBS_VERSION, .qp_index = 3 };

	memset(h.nonce, 0xa5, sizeof(h.nonce));
	memcpy(h.node, node, strnlen(node, ROSHM_VERBS_ID - 1));
	return h;
}

static struct roshm_verbs_challenge challenge(const char *node)
{
	struct roshm_verbs_challenge c = { .magic = ROSHM_VERBS_MAGIC, .kind = ROSHM_VERBS_CHALLENGE,
					   .version = ROSHM_VERBS_VERSION };

	memset(c.nonce, 0x5a, sizeof(c.nonce));
	memset(c.mac, 0x77, sizeof(c.mac));
	snprintf(c.node, sizeof(c.node), "%s", node);
	return c;
}

static struct roshm_verbs_proof proof(void)
{
	struct roshm_verbs_proof p = { .magic = ROSHM_VERBS_MAGIC, .kind = ROSHM_VERBS_PROOF,
				       .version = ROSHM_VERBS_VERSION, .qp_index = 1 };

	memset(p.nonce, 0x5a, sizeof(p.nonce));
	memset(p.mac, 0x11, sizeof(p.mac));
	return p;
}

static void expect_roundtrip(const struct rd_vpd *m, enum rd_vpd_where where, const void *orig, size_t len)
{
	uint8_t buf[256];
	struct rd_vpd again;
	int n = rd_verbs_pdata_encode(m, buf, sizeof(buf));

	assert_int_equal(n, (int)len);
	assert_memory_equal(buf, orig, len);
	assert_int_equal(rd_verbs_pdata_decode(buf, (size_t)n, where, &again), 0);
	assert_memory_equal(&again, m, sizeof(again));
}

static void test_valid(void **st)
{
	struct roshm_verbs_hello h = hello("node-a.1_x");
	struct roshm_verbs_challenge c = challenge("node-b");
	struct roshm_verbs_proof p = proof();
	struct roshm_verbs_challenge d = { .magic = ROSHM_VERBS_MAGIC, .kind = ROSHM_VERBS_DENIED,
					   .version = ROSHM_VERBS_VERSION };
	struct rd_vpd m;

	(void)st;
	assert_int_equal(rd_verbs_pdata_decode(&h, sizeof(h), RD_VPD_REQUEST, &m), 0);
	assert_int_equal(m.kind, ROSHM_VERBS_HELLO);
	assert_int_equal(m.qp_index, 3);
	assert_string_equal(m.node, "node-a.1_x");
	assert_int_equal(m.nonce[15], 0xa5);
	expect_roundtrip(&m, RD_VPD_REQUEST, &h, sizeof(h));

	assert_int_equal(rd_verbs_pdata_decode(&c, sizeof(c), RD_VPD_REJECT, &m), 0);
	assert_int_equal(m.kind, ROSHM_VERBS_CHALLENGE);
	assert_string_equal(m.node, "node-b");
	assert_int_equal(m.mac[31], 0x77);
	expect_roundtrip(&m, RD_VPD_REJECT, &c, sizeof(c));

	assert_int_equal(rd_verbs_pdata_decode(&p, sizeof(p), RD_VPD_REQUEST, &m), 0);
	assert_int_equal(m.kind, ROSHM_VERBS_PROOF);
	assert_int_equal(m.qp_index, 1);
	assert_string_equal(m.node, "");
	expect_roundtrip(&m, RD_VPD_REQUEST, &p, sizeof(p));

	assert_int_equal(rd_verbs_pdata_decode(&d, sizeof(d), RD_VPD_REJECT, &m), 0);
	assert_int_equal(m.kind, ROSHM_VERBS_DENIED);
	expect_roundtrip(&m, RD_VPD_REJECT, &d, sizeof(d));
}

/* The CM hands over its whole private-data area: trailing bytes are ignored. */
static void test_padded(void **st)
{
	uint8_t area[148];
	struct roshm_verbs_hello h = hello("n1");
	struct roshm_verbs_challenge c = challenge("n2");
	struct rd_vpd m;

	(void)st;
	memset(area, 0xee, sizeof(area));
	memcpy(area, &h, sizeof(h));
	assert_int_equal(rd_verbs_pdata_decode(area, sizeof(area), RD_VPD_REQUEST, &m), 0);
	assert_string_equal(m.node, "n1");
	memcpy(area, &c, sizeof(c));
	assert_int_equal(rd_verbs_pdata_decode(area, sizeof(area), RD_VPD_REJECT, &m), 0);
	assert_string_equal(m.node, "n2");
}

/* A 40-character node name: the hello carries 31 of them, still a valid name. */
static void test_long_name(void **st)
{
	const char *name = "abcdefghij-abcdefghij-abcdefghij-abcdefg";
	struct roshm_verbs_hello h = hello(name);
	struct rd_vpd m = { .kind = ROSHM_VERBS_HELLO };
	uint8_t buf[64];

	(void)st;
	assert_int_equal(rd_verbs_pdata_decode(&h, sizeof(h), RD_VPD_REQUEST, &m), 0);
	assert_int_equal(strlen(m.node), ROSHM_VERBS_ID - 1);
	assert_memory_equal(m.node, name, ROSHM_VERBS_ID - 1);
	snprintf(m.node, sizeof(m.node), "%s", name);
	assert_int_equal(rd_verbs_pdata_encode(&m, buf, sizeof(buf)), (int)sizeof(h));
	assert_int_equal(buf[offsetof(struct roshm_verbs_hello, node) + ROSHM_VERBS_ID - 1], 0);
}

static void test_not_roshm(void **st)
{
	struct roshm_verbs_hello h = hello("n1");
	struct roshm_verbs_challenge c = challenge("n2");
	struct rd_vpd m;

	(void)st;
	assert_int_equal(rd_verbs_pdata_decode(NULL, 56, RD_VPD_REQUEST, &m), -EPROTO);
	assert_int_equal(rd_verbs_pdata_decode(&h, sizeof(h) - 1, RD_VPD_REQUEST, &m), -EPROTO);
	/* a reject shorter than a challenge, even one that starts like a denial */
	assert_int_equal(rd_verbs_pdata_decode(&c, sizeof(c) - 1, RD_VPD_REJECT, &m), -EPROTO);
	assert_int_equal(rd_verbs_pdata_decode(&c, 56, RD_VPD_REJECT, &m), -EPROTO);
	h.magic ^= 1;
	assert_int_equal(rd_verbs_pdata_decode(&h, sizeof(h), RD_VPD_REQUEST, &m), -EPROTO);
	h = hello("n1");
	h.version = ROSHM_VERBS_VERSION + 1;
	assert_int_equal(rd_verbs_pdata_decode(&h, sizeof(h), RD_VPD_REQUEST, &m), -EPROTO);
	assert_int_equal(m.kind, 0);
}

static void test_kind_misplaced(void **st)
{
	struct roshm_verbs_hello h = hello("n1");
	struct roshm_verbs_challenge c = challenge("n2");
	struct roshm_verbs_proof p = proof();
	uint8_t big[148] = { 0 };
	struct rd_vpd m;

	(void)st;
	memcpy(big, &h, sizeof(h));
	assert_int_equal(rd_verbs_pdata_decode(big, sizeof(big), RD_VPD_REJECT, &m), -EBADMSG);
	memcpy(big, &p, sizeof(p));
	assert_int_equal(rd_verbs_pdata_decode(big, sizeof(big), RD_VPD_REJECT, &m), -EBADMSG);
	assert_int_equal(rd_verbs_pdata_decode(&c, sizeof(c), RD_VPD_REQUEST, &m), -EBADMSG);
	c.kind = ROSHM_VERBS_DENIED;
	assert_int_equal(rd_verbs_pdata_decode(&c, sizeof(c), RD_VPD_REQUEST, &m), -EBADMSG);
	for (unsigned k = 0; k < 256; k++) {
		if (k >= ROSHM_VERBS_HELLO && k <= ROSHM_VERBS_DENIED)
			continue;
		h.kind = (uint8_t)k;
		c.kind = (uint8_t)k;
		assert_int_equal(rd_verbs_pdata_decode(&h, sizeof(h), RD_VPD_REQUEST, &m), -EBADMSG);
		assert_int_equal(rd_verbs_pdata_decode(&c, sizeof(c), RD_VPD_REJECT, &m), -EBADMSG);
	}
}

static void test_bad_names(void **st)
{
	static const char *const bad[] = { "", ".hidden", "a/b", "a b", "tab\there", "nl\n", "\xc3\xa9t\xc3\xa9" };
	struct roshm_verbs_hello h;
	struct roshm_verbs_challenge c;
	struct rd_vpd m;

	(void)st;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		h = hello(bad[i]);
		c = challenge(bad[i]);
		assert_int_equal(rd_verbs_pdata_decode(&h, sizeof(h), RD_VPD_REQUEST, &m), -EBADMSG);
		assert_int_equal(rd_verbs_pdata_decode(&c, sizeof(c), RD_VPD_REJECT, &m), -EBADMSG);
	}
	/* unterminated: every byte of the field used */
	h = hello("n");
	memset(h.node, 'x', sizeof(h.node));
	assert_int_equal(rd_verbs_pdata_decode(&h, sizeof(h), RD_VPD_REQUEST, &m), -EBADMSG);
	c = challenge("n");
	memset(c.node, 'x', sizeof(c.node));
	assert_int_equal(rd_verbs_pdata_decode(&c, sizeof(c), RD_VPD_REJECT, &m), -EBADMSG);
	/* bytes after the terminator: the MAC does not cover them */
	h = hello("n1");
	h.node[10] = 'z';
	assert_int_equal(rd_verbs_pdata_decode(&h, sizeof(h), RD_VPD_REQUEST, &m), -EBADMSG);
	c = challenge("n2");
	c.node[ROSHM_NAME_MAX - 1] = 1;
	assert_int_equal(rd_verbs_pdata_decode(&c, sizeof(c), RD_VPD_REJECT, &m), -EBADMSG);
	assert_string_equal(m.node, "");
}

static void test_reserved(void **st)
{
	struct roshm_verbs_challenge c = challenge("n2");
	struct rd_vpd m;

	(void)st;
	c.rsvd = 1;
	assert_int_equal(rd_verbs_pdata_decode(&c, sizeof(c), RD_VPD_REJECT, &m), -EBADMSG);
}

static void test_encode_errors(void **st)
{
	struct rd_vpd m = { .kind = ROSHM_VERBS_CHALLENGE };
	uint8_t buf[256];

	(void)st;
	assert_int_equal(rd_verbs_pdata_encode(&m, buf, sizeof(struct roshm_verbs_challenge) - 1), -ENOSPC);
	m.kind = ROSHM_VERBS_HELLO;
	assert_int_equal(rd_verbs_pdata_encode(&m, buf, sizeof(struct roshm_verbs_hello) - 1), -ENOSPC);
	m.kind = 0;
	assert_int_equal(rd_verbs_pdata_encode(&m, buf, sizeof(buf)), -EINVAL);
	m.kind = 9;
	assert_int_equal(rd_verbs_pdata_encode(&m, buf, sizeof(buf)), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid),
		cmocka_unit_test(test_padded),
		cmocka_unit_test(test_long_name),
		cmocka_unit_test(test_not_roshm),
		cmocka_unit_test(test_kind_misplaced),
		cmocka_unit_test(test_bad_names),
		cmocka_unit_test(test_reserved),
		cmocka_unit_test(test_encode_errors),
	};

	return cmocka_run_group_tests_name("verbs_pdata", tests, NULL, NULL);
}
