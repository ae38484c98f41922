// SPDX-License-Identifier: MIT
/*
 * Registry record MACs: a signed record verifies; a change to any one of its
 * fields, a record signed with another secret, a missing or misspelled MAC,
 * and invalid names, states or policies (even with a right MAC) do not.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <jansson.h>
#include <cmocka.h>

#include "addr.h"
#include "registry/registry.h"
#include "roshm/ctl.h"

static const uint8_t key1[] = "registry-unit-secret-0123456789";
static const uint8_t key2[] = "registry-unit-secret-0123456788";

static void sample(struct rd_region_rec *r, bool verbs)
{
	memset(r, 0, sizeof(*r));
	strcpy(r->node, "node-1");
	strcpy(r->tenant, "blue");
	strcpy(r->name, "shared.buf");
	strcpy(r->state, RD_STATE_ACTIVE);
	strcpy(r->endpoint, verbs ? "verbs:10.0.0.1:7472" : "tcp:10.0.0.1:7471");
	r->region_id = 7;
	r->key = 0xdeadbeef;
	if (verbs) {
		r->rkey = 0x1234;
		r->raddr = 0x7f0000001000ull;
		/* and limits on the openers: their fields are covered too */
		r->access = ROSHM_ACCESS_READ | ROSHM_ACCESS_ATOMIC;
		r->win_lo = 4096;
		r->win_hi = 8192;
		r->va_base = 0x7f0000002000ull;
	}
	r->epoch = 0xfedcba9876543210ull;
	r->mem_id = 42;
	r->gid = 0x0123456789abcdefull;
	r->ogid = 0x1122334455667788ull;
	r->data_size = 1 << 20;
	r->txn_slots = 64;
	r->slot_size = 4096;
	r->policy = ROSHM_POLICY_LIST;
	r->ntenants = 2;
	strcpy(r->tenants[0], "green");
	strcpy(r->tenants[1], "red");
}

/* A different value of the same type and grammar as @v. */
static json_t *other_value(const char *k, json_t *v)
{
	if (!strcmp(k, "state"))
		return json_string(strcmp(json_string_value(v), "active") ? "active" : "stale");
	if (!strcmp(k, "gid") || !strcmp(k, "ogid"))
		return json_string(strcmp(json_string_value(v), "0123456789abcdef") ?
				   "0123456789abcdef" : "0123456789abcdee");
	if (!strcmp(k, "policy"))
		return json_string(strcmp(json_string_value(v), "tenant") ? "tenant" : "owner");
	if (!strcmp(k, "tenants")) {
		json_t *a = json_deep_copy(v);

		json_array_append_new(a, json_string("mallory"));
		return a;
	}
	if (!strcmp(k, "endpoint"))
		return json_string(!strncmp(json_string_value(v), "verbs:", 6) ? "verbs:10.6.6.6:7472" :
										 "tcp:10.6.6.6:7471");
	if (json_is_integer(v))
		return json_integer(json_integer_value(v) + 1);
	if (json_is_string(v)) {
		const char *s = json_string_value(v);
		char buf[128];

		/* numbers as strings stay numbers; names stay names */
		if (s[0] >= '0' && s[0] <= '9' && strspn(s, "0123456789") == strlen(s))
			snprintf(buf, sizeof(buf), "%llu", strtoull(s, NULL, 10) + 1);
		else
			snprintf(buf, sizeof(buf), "%sx", s);
		return json_string(buf);
	}
	return NULL;
}

static char *with_field(const char *text, const char *k, json_t *v)
{
	json_error_t jerr;
	json_t *o = json_loads(text, 0, &jerr);
	char *s;

	assert_non_null(o);
	if (v)
		json_object_set_new(o, k, v);
	else
		json_object_del(o, k);
	s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	return s;
}

static void check_every_field(bool verbs)
{
	struct rd_region_rec r, back;
	const char *why, *k;
	char *signed_text = NULL;
	json_error_t jerr;
	json_t *o, *v;
	int nfields = 0;

	sample(&r, verbs);
	signed_text = rd_region_rec_sign(&r, key1, sizeof(key1) - 1);
	assert_non_null(signed_text);
	assert_int_equal(rd_region_rec_verify(signed_text, strlen(signed_text), key1, sizeof(key1) - 1,
					      &back, &why), 0);
	assert_memory_equal(back.tenants, r.tenants, sizeof(r.tenants));
	assert_int_equal(back.epoch, r.epoch);
	assert_int_equal(back.raddr, r.raddr);
	assert_int_equal(back.ogid, r.ogid);
	/* the MAC covers the canonical form: to_json of what was parsed */
	char *canon = rd_region_rec_to_json(&back), *canon0 = rd_region_rec_to_json(&r);

	assert_string_equal(canon, canon0);
	assert_null(strstr(canon, "\"mac\""));
	free(canon);
	free(canon0);
	o = json_loads(signed_text, 0, &jerr);
	assert_non_null(o);
	json_object_foreach(o, k, v) {
		json_t *nv;
		char *t;
		int ret;

		if (!strcmp(k, "mac"))
			continue;
		nv = other_value(k, v);
		assert_non_null(nv);
		t = with_field(signed_text, k, nv);
		ret = rd_region_rec_verify(t, strlen(t), key1, sizeof(key1) - 1, &back, &why);
		if (ret != -EBADMSG)
			fail_msg("field '%s' changed, record still verifies (%d): %s", k, ret, t);
		if (!strstr(why, "MAC"))
			fail_msg("field '%s' changed: rejected for '%s', expected the MAC", k, why);
		/* and removed */
		free(t);
		t = with_field(signed_text, k, NULL);
		assert_int_equal(rd_region_rec_verify(t, strlen(t), key1, sizeof(key1) - 1, &back, &why),
				 -EBADMSG);
		free(t);
		nfields++;
	}
	json_decref(o);
	assert_int_equal(nfields, verbs ? 22 : 16); /* verbs: with rkey, raddr and the four limits */
	free(signed_text);
}

static void test_region_every_field(void **st)
{
	(void)st;
	check_every_field(false);
	check_every_field(true);
}

/*
 * The limits have one encoding: one that parses to other limits than the
 * signed ones but re-encodes to the same canonical text would keep its MAC.
 * "win_hi": "0" re-encoded as data_size (an empty window for the reader:
 * every opener's operation refused), and default limits added to a record
 * without any (dropped by the encoder).
 */
static void test_region_limits_one_form(void **st)
{
	struct rd_region_rec r, back;
	const char *why;
	char *s, *t;

	(void)st;
	sample(&r, true);
	r.win_lo = 0;
	r.win_hi = r.data_size;
	s = rd_region_rec_sign(&r, key1, sizeof(key1) - 1);
	assert_non_null(s);
	assert_int_equal(rd_region_rec_verify(s, strlen(s), key1, sizeof(key1) - 1, &back, &why), 0);
	t = with_field(s, "win_hi", json_string("0"));
	if (rd_region_rec_verify(t, strlen(t), key1, sizeof(key1) - 1, &back, &why) != -EBADMSG)
		fail_msg("\"win_hi\": \"0\" still verifies (window [%llu, %llu)): %s",
			 (unsigned long long)back.win_lo, (unsigned long long)back.win_hi, t);
	free(t);
	free(s);

	sample(&r, false);
	s = rd_region_rec_sign(&r, key1, sizeof(key1) - 1);
	assert_non_null(s);
	char *t1 = with_field(s, "access", json_integer(ROSHM_ACCESS_ALL));
	char *t2 = with_field(t1, "win_lo", json_string("0"));
	char *t3 = with_field(t2, "win_hi", json_string("0"));

	t = with_field(t3, "va_base", json_string("0"));
	if (rd_region_rec_verify(t, strlen(t), key1, sizeof(key1) - 1, &back, &why) != -EBADMSG)
		fail_msg("default limits added to an unlimited record still verify: %s", t);
	free(t);
	free(t1);
	free(t2);
	free(t3);
	free(s);
}

static void test_region_mac_forms(void **st)
{
	struct rd_region_rec r, back;
	const char *why;
	char *s, *t, mac[65];
	json_error_t jerr;
	json_t *o;

	(void)st;
	sample(&r, false);
	s = rd_region_rec_sign(&r, key1, sizeof(key1) - 1);
	/* another cluster's secret */
	assert_int_equal(rd_region_rec_verify(s, strlen(s), key2, sizeof(key2) - 1, &back, &why), -EBADMSG);
	assert_non_null(strstr(why, "wrong MAC"));
	/* no MAC: what a record of an older roshmd looks like */
	t = with_field(s, "mac", NULL);
	assert_int_equal(rd_region_rec_verify(t, strlen(t), key1, sizeof(key1) - 1, &back, &why), -EBADMSG);
	assert_string_equal(why, "no MAC");
	assert_int_equal(rd_region_rec_from_json(t, strlen(t), &back), 0); /* parses, but is not trusted */
	free(t);
	/* the same MAC in uppercase, or cut short, is not the MAC */
	o = json_loads(s, 0, &jerr);
	snprintf(mac, sizeof(mac), "%s", json_string_value(json_object_get(o, "mac")));
	json_decref(o);
	for (char *p = mac; *p; p++)
		if (*p >= 'a' && *p <= 'f')
			*p = (char)(*p - 'a' + 'A');
	t = with_field(s, "mac", json_string(mac));
	assert_int_equal(rd_region_rec_verify(t, strlen(t), key1, sizeof(key1) - 1, &back, &why), -EBADMSG);
	assert_string_equal(why, "malformed MAC");
	free(t);
	mac[62] = 0;
	t = with_field(s, "mac", json_string(mac));
	assert_int_equal(rd_region_rec_verify(t, strlen(t), key1, sizeof(key1) - 1, &back, &why), -EBADMSG);
	free(t);
	t = with_field(s, "mac", json_integer(1));
	assert_int_equal(rd_region_rec_verify(t, strlen(t), key1, sizeof(key1) - 1, &back, &why), -EBADMSG);
	free(t);
	/* an extra field is not covered and not used: still the same record */
	t = with_field(s, "comment", json_string("ignored"));
	assert_int_equal(rd_region_rec_verify(t, strlen(t), key1, sizeof(key1) - 1, &back, &why), 0);
	free(t);
	/* duplicate keys are refused outright (no "which one counts") */
	t = strdup(s);
	t[strlen(t) - 1] = 0;
	char dup[8192];

	snprintf(dup, sizeof(dup), "%s,\"policy\":\"list\"}", t);
	assert_int_equal(rd_region_rec_verify(dup, strlen(dup), key1, sizeof(key1) - 1, &back, &why), -EBADMSG);
	free(t);
	free(s);
}

/* Signed correctly, but not a record roshmd accepts. */
static void test_region_invalid_signed(void **st)
{
	struct rd_region_rec r, back;
	const char *why;
	char *s;

	(void)st;
	sample(&r, false);
	strcpy(r.tenant, "../etc");
	s = rd_region_rec_sign(&r, key1, sizeof(key1) - 1);
	assert_int_equal(rd_region_rec_verify(s, strlen(s), key1, sizeof(key1) - 1, &back, &why), -EBADMSG);
	free(s);
	sample(&r, false);
	strcpy(r.tenants[1], ".hidden");
	s = rd_region_rec_sign(&r, key1, sizeof(key1) - 1);
	assert_int_equal(rd_region_rec_verify(s, strlen(s), key1, sizeof(key1) - 1, &back, &why), -EBADMSG);
	free(s);
	sample(&r, false);
	strcpy(r.state, "zombie");
	s = rd_region_rec_sign(&r, key1, sizeof(key1) - 1);
	assert_int_equal(rd_region_rec_verify(s, strlen(s), key1, sizeof(key1) - 1, &back, &why), -EBADMSG);
	assert_string_equal(why, "unknown state");
	free(s);
	sample(&r, false);
	r.policy = 9; /* encodes as "tenant": to_json knows three policies */
	s = rd_region_rec_sign(&r, key1, sizeof(key1) - 1);
	assert_int_equal(rd_region_rec_verify(s, strlen(s), key1, sizeof(key1) - 1, &back, &why), 0);
	assert_int_equal(back.policy, ROSHM_POLICY_TENANT);
	free(s);
	/* an unknown policy string with a MAC over it */
	{
		const char *t = "{\"data_size\":\"1\",\"endpoint\":\"\",\"epoch\":\"1\",\"key\":1,"
				"\"gid\":\"0000000000000000\",\"mem_id\":\"1\",\"name\":\"n\","
				"\"node\":\"a\",\"policy\":\"everyone\","
				"\"region_id\":1,\"slot_size\":0,\"state\":\"active\",\"tenant\":\"t\","
				"\"tenants\":[],\"txn_slots\":0,\"mac\":\"00\"}";

		assert_int_equal(rd_region_rec_verify(t, strlen(t), key1, sizeof(key1) - 1, &back, &why),
				 -EBADMSG);
		assert_string_equal(why, "unknown policy");
	}
	/* an owner client id ("ogid") is 16 lowercase hex digits, never 0;
	 * absent is none (a record of an older roshmd) */
	for (int i = 0; i < 4; i++) {
		static const char *const bad[] = { "\"0000000000000000\"", "\"0123\"",
						   "\"0123456789ABCDEF\"", "5" };
		char t[600];

		snprintf(t, sizeof(t),
			 "{\"data_size\":\"1\",\"endpoint\":\"\",\"epoch\":\"1\",\"key\":1,"
			 "\"gid\":\"0000000000000001\",\"ogid\":%s,\"mem_id\":\"1\",\"name\":\"n\","
			 "\"node\":\"a\",\"policy\":\"grant\",\"region_id\":1,\"slot_size\":0,"
			 "\"state\":\"active\",\"tenant\":\"t\",\"tenants\":[],\"txn_slots\":0,"
			 "\"mac\":\"00\"}", bad[i]);
		assert_int_equal(rd_region_rec_verify(t, strlen(t), key1, sizeof(key1) - 1, &back, &why),
				 -EBADMSG);
		assert_string_equal(why, "malformed ogid");
	}
	sample(&r, false);
	r.ogid = 0;   /* none: not written, and read back as none */
	s = rd_region_rec_sign(&r, key1, sizeof(key1) - 1);
	assert_null(strstr(s, "ogid"));
	assert_int_equal(rd_region_rec_verify(s, strlen(s), key1, sizeof(key1) - 1, &back, &why), 0);
	assert_int_equal(back.ogid, 0);
	free(s);
	/* not JSON, not an object, too large */
	assert_int_equal(rd_region_rec_verify("[]", 2, key1, sizeof(key1) - 1, &back, &why), -EBADMSG);
	assert_int_equal(rd_region_rec_verify("{", 1, key1, sizeof(key1) - 1, &back, &why), -EBADMSG);
	char *big = calloc(1, RD_REC_MAX + 2);

	memset(big, ' ', RD_REC_MAX + 1);
	big[0] = '{';
	big[RD_REC_MAX] = '}';
	assert_int_equal(rd_region_rec_verify(big, RD_REC_MAX + 1, key1, sizeof(key1) - 1, &back, &why),
			 -EBADMSG);
	free(big);
}

/* sample() of policy grant (no tenant list), no grants yet */
static void grant_sample(struct rd_region_rec *r, bool verbs)
{
	sample(r, verbs);
	r->policy = ROSHM_POLICY_GRANT;
	r->ntenants = 0;
	memset(r->tenants, 0, sizeof(r->tenants));
}

/* ROSHM_POLICY_GRANT: the grant list is covered, has one form, and only
 * that policy has one. */
static void test_region_grants(void **st)
{
	struct rd_region_rec r, back;
	const char *why;
	char *s, *t;
	json_t *a;
	static const char *const bad[] = { "00000000000000ab0", "0000000000000AB0", "000000000000ab0",
					   "0000000000000000", "-000000000000ab0", " 000000000000ab0" };

	(void)st;
	grant_sample(&r, false);
	r.ngrants = 4;
	for (int i = 0; i < 3; i++)
		r.grants[i] = (struct rd_grant){ .hi = r.data_size, .access = ROSHM_ACCESS_ALL };
	r.grants[0].gid = 0xab0;
	r.grants[1].gid = UINT64_MAX;
	r.grants[2].gid = rd_grant_id("node-a", "t", "ibv-qp-000001", 7);
	/* a part: bytes [0x10, 0x30) for READ only */
	r.grants[3] = (struct rd_grant){ .gid = 0xab0, .lo = 0x10, .hi = 0x30,
					 .access = ROSHM_ACCESS_READ };
	s = rd_region_rec_sign(&r, key1, sizeof(key1) - 1);
	assert_non_null(s);
	assert_non_null(strstr(s, "\"policy\":\"grant\""));
	assert_non_null(strstr(s, "\"0000000000000ab0\",\"ffffffffffffffff\""));
	assert_non_null(strstr(s, "\"0000000000000ab0:0000000000000010:0000000000000030:1\""));
	assert_int_equal(rd_region_rec_verify(s, strlen(s), key1, sizeof(key1) - 1, &back, &why), 0);
	assert_int_equal(back.policy, ROSHM_POLICY_GRANT);
	assert_int_equal(back.ngrants, 4);
	assert_memory_equal(back.grants, r.grants, 4 * sizeof(r.grants[0]));
	/* malformed parts, whatever the MAC: one encoding, lo < hi <= size,
	 * known operations, not all of it in the long form */
	{
		char all[64], past[64];
		const char *const badp[] = {
			"0000000000000ab0:0000000000000030:0000000000000010:1", /* lo > hi */
			"0000000000000ab0:0000000000000010:0000000000000010:1", /* empty */
			"0000000000000ab0:0000000000000010:0000000000000030:0", /* no operation */
			"0000000000000ab0:0000000000000010:0000000000000030:8", /* unknown */
			"0000000000000ab0:0000000000000010:0000000000000030:11",
			"0000000000000ab0:000000000000010:00000000000000030:1",
			"0000000000000ab0:0000000000000010:0000000000000030;1",
			"0000000000000ab0:000000000000001A:0000000000000030:1",
			"0000000000000000:0000000000000010:0000000000000030:1", /* id 0 */
			all, past,
		};

		snprintf(all, sizeof(all), "0000000000000ab0:0000000000000000:%016llx:7",
			 (unsigned long long)r.data_size);
		snprintf(past, sizeof(past), "0000000000000ab0:0000000000000000:%016llx:1",
			 (unsigned long long)r.data_size + 1);
		for (unsigned i = 0; i < sizeof(badp) / sizeof(badp[0]); i++) {
			a = json_array();
			json_array_append_new(a, json_string(badp[i]));
			t = with_field(s, "grants", a);
			assert_int_equal(rd_region_rec_verify(t, strlen(t), key1, sizeof(key1) - 1,
							      &back, &why), -EBADMSG);
			if (strcmp(why, "malformed grants"))
				fail_msg("grant \"%s\": rejected for '%s'", badp[i], why);
			free(t);
		}
	}
	/* another grant, one more, one fewer: the MAC */
	a = json_array();
	json_array_append_new(a, json_string("0000000000000ab1"));
	json_array_append_new(a, json_string("ffffffffffffffff"));
	t = with_field(s, "grants", a);
	assert_int_equal(rd_region_rec_verify(t, strlen(t), key1, sizeof(key1) - 1, &back, &why), -EBADMSG);
	assert_non_null(strstr(why, "MAC"));
	free(t);
	/* malformed ids, whatever the MAC */
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		a = json_array();
		json_array_append_new(a, json_string(bad[i]));
		t = with_field(s, "grants", a);
		assert_int_equal(rd_region_rec_verify(t, strlen(t), key1, sizeof(key1) - 1, &back, &why),
				 -EBADMSG);
		if (strcmp(why, "malformed grants"))
			fail_msg("grant \"%s\": rejected for '%s'", bad[i], why);
		free(t);
	}
	a = json_array();
	for (int i = 0; i <= ROSHM_GRANTS_MAX; i++)
		json_array_append_new(a, json_string("0000000000000ab0"));
	t = with_field(s, "grants", a);
	assert_int_equal(rd_region_rec_verify(t, strlen(t), key1, sizeof(key1) - 1, &back, &why), -EBADMSG);
	assert_string_equal(why, "malformed grants");
	free(t);
	t = with_field(s, "grants", json_string("0000000000000ab0"));
	assert_int_equal(rd_region_rec_verify(t, strlen(t), key1, sizeof(key1) - 1, &back, &why), -EBADMSG);
	free(t);
	/* policy grant without a list; a list on another policy */
	t = with_field(s, "grants", NULL);
	assert_int_equal(rd_region_rec_verify(t, strlen(t), key1, sizeof(key1) - 1, &back, &why), -EBADMSG);
	assert_string_equal(why, "malformed grants");
	free(t);
	t = with_field(s, "policy", json_string("tenant"));
	assert_int_equal(rd_region_rec_verify(t, strlen(t), key1, sizeof(key1) - 1, &back, &why), -EBADMSG);
	assert_string_equal(why, "malformed grants");
	free(t);
	free(s);
	/* none granted yet: an empty list */
	r.ngrants = 0;
	s = rd_region_rec_sign(&r, key1, sizeof(key1) - 1);
	assert_non_null(strstr(s, "\"grants\":[]"));
	assert_int_equal(rd_region_rec_verify(s, strlen(s), key1, sizeof(key1) - 1, &back, &why), 0);
	assert_int_equal(back.ngrants, 0);
	/* the region's own id: 16 lowercase hex digits, 0 for none */
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (!strcmp(bad[i], "0000000000000000"))
			continue;
		t = with_field(s, "gid", json_string(bad[i]));
		assert_int_equal(rd_region_rec_verify(t, strlen(t), key1, sizeof(key1) - 1, &back, &why),
				 -EBADMSG);
		assert_string_equal(why, "malformed gid");
		free(t);
	}
	free(s);
	/* the id names node, tenant, name and key, each */
	uint64_t id = rd_grant_id("node-a", "t", "ibv-qp-000001", 7);

	assert_true(id != 0);
	assert_true(id == rd_grant_id("node-a", "t", "ibv-qp-000001", 7));
	assert_true(id != rd_grant_id("node-b", "t", "ibv-qp-000001", 7));
	assert_true(id != rd_grant_id("node-a", "u", "ibv-qp-000001", 7));
	assert_true(id != rd_grant_id("node-a", "t", "ibv-qp-000002", 7));
	assert_true(id != rd_grant_id("node-a", "t", "ibv-qp-000001", 8));
	/* no ambiguity where one name ends and the next begins */
	assert_true(rd_grant_id("ab", "c", "d", 1) != rd_grant_id("a", "bc", "d", 1));
}

/* verbs: each grant's own MR rkey ("grant_rkeys", one per grant, 0 for
 * none), covered by the MAC, absent when none has one or the endpoint is
 * not verbs; malformed lists are refused whatever the MAC. */
static void test_region_grant_rkeys(void **st)
{
	struct rd_region_rec r, back;
	const char *why;
	char *s, *t;
	json_t *a;

	(void)st;
	grant_sample(&r, true);
	r.ngrants = 3;
	for (int i = 0; i < 3; i++)
		r.grants[i] = (struct rd_grant){ .gid = 0xab0 + i, .hi = r.data_size,
						 .access = ROSHM_ACCESS_ALL };
	r.grants[1].nic_rkey = 0x1234;
	r.grants[2].nic_rkey = UINT32_MAX;
	s = rd_region_rec_sign(&r, key1, sizeof(key1) - 1);
	assert_non_null(s);
	assert_non_null(strstr(s, "\"grant_rkeys\":[0,4660,4294967295]"));
	assert_int_equal(rd_region_rec_verify(s, strlen(s), key1, sizeof(key1) - 1, &back, &why), 0);
	assert_memory_equal(back.grants, r.grants, 3 * sizeof(r.grants[0]));
	/* another rkey: the MAC */
	a = json_array();
	for (int i = 0; i < 3; i++)
		json_array_append_new(a, json_integer(i == 1 ? 0x1235 : r.grants[i].nic_rkey));
	t = with_field(s, "grant_rkeys", a);
	assert_int_equal(rd_region_rec_verify(t, strlen(t), key1, sizeof(key1) - 1, &back, &why),
			 -EBADMSG);
	assert_non_null(strstr(why, "MAC"));
	free(t);
	/* malformed, whatever the MAC: a count other than the grants', not
	 * an integer, out of range, not a list */
	{
		json_t *bad[6];

		bad[0] = json_pack("[i,i]", 0, 1);
		bad[1] = json_pack("[i,i,i,i]", 0, 1, 2, 3);
		bad[2] = json_pack("[i,s,i]", 0, "1", 2);
		bad[3] = json_pack("[i,I,i]", 0, (json_int_t)UINT32_MAX + 1, 2);
		bad[4] = json_pack("[i,i,i]", 0, -1, 2);
		bad[5] = json_string("0");
		for (unsigned i = 0; i < 6; i++) {
			t = with_field(s, "grant_rkeys", bad[i]);
			assert_int_equal(rd_region_rec_verify(t, strlen(t), key1, sizeof(key1) - 1,
							      &back, &why), -EBADMSG);
			if (strcmp(why, "malformed grant_rkeys"))
				fail_msg("grant_rkeys %u: rejected for '%s'", i, why);
			free(t);
		}
	}
	free(s);
	/* none has one: no list */
	r.grants[1].nic_rkey = r.grants[2].nic_rkey = 0;
	s = rd_region_rec_sign(&r, key1, sizeof(key1) - 1);
	assert_null(strstr(s, "grant_rkeys"));
	free(s);
	/* tcp: no NIC keys are written, and none are read */
	grant_sample(&r, false);
	r.ngrants = 1;
	r.grants[0] = (struct rd_grant){ .gid = 0xab0, .hi = r.data_size,
					 .access = ROSHM_ACCESS_ALL, .nic_rkey = 7 };
	s = rd_region_rec_sign(&r, key1, sizeof(key1) - 1);
	assert_null(strstr(s, "grant_rkeys"));
	assert_int_equal(rd_region_rec_verify(s, strlen(s), key1, sizeof(key1) - 1, &back, &why), 0);
	assert_int_equal(back.grants[0].nic_rkey, 0);
	t = with_field(s, "grant_rkeys", json_pack("[i]", 7));
	assert_int_equal(rd_region_rec_verify(t, strlen(t), key1, sizeof(key1) - 1, &back, &why),
			 -EBADMSG);
	assert_string_equal(why, "malformed grant_rkeys");
	free(t);
	free(s);
}

/* The largest record a node writes: names and endpoint at their longest,
 * every limit set, ROSHM_GRANTS_MAX grants each a part with the widest
 * encoding. It fits RD_REC_MAX (what every store reads back) and comes back
 * whole; rd_region_rec_len covers exactly its grants. */
static void test_region_largest(void **st)
{
	struct rd_region_rec *r = calloc(1, sizeof(*r)), *back = calloc(1, sizeof(*back));
	const char *why;
	char *s;

	(void)st;
	assert_non_null(r);
	assert_non_null(back);
	sample(r, true);
	memset(r->node, 'n', ROSHM_NAME_MAX - 1);
	memset(r->tenant, 't', ROSHM_NAME_MAX - 1);
	memset(r->name, 'r', ROSHM_NAME_MAX - 1);
	snprintf(r->endpoint, sizeof(r->endpoint), "verbs:[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535");
	r->policy = ROSHM_POLICY_GRANT;
	r->ntenants = 0;
	memset(r->tenants, 0, sizeof(r->tenants));
	r->ngrants = ROSHM_GRANTS_MAX;   /* parts are written with fixed widths */
	for (uint32_t i = 0; i < ROSHM_GRANTS_MAX; i++)
		r->grants[i] = (struct rd_grant){ .gid = UINT64_MAX - i, .lo = 8 * i,
						  .hi = r->data_size - i,
						  .access = ROSHM_ACCESS_ALL & ~ROSHM_ACCESS_READ,
						  .nic_rkey = UINT32_MAX - i };  /* widest too */
	s = rd_region_rec_sign(r, key1, sizeof(key1) - 1);
	assert_non_null(s);
	assert_true(strlen(s) <= RD_REC_MAX);
	assert_true(strlen(s) > 16384);   /* past the 16 KiB of before */
	if (rd_region_rec_verify(s, strlen(s), key1, sizeof(key1) - 1, back, &why))
		fail_msg("the largest record does not verify: %s", why);
	assert_int_equal(back->ngrants, ROSHM_GRANTS_MAX);
	assert_memory_equal(back->grants, r->grants, ROSHM_GRANTS_MAX * sizeof(r->grants[0]));
	assert_string_equal(back->name, r->name);
	assert_int_equal(rd_region_rec_len(back), sizeof(*back));
	back->ngrants = 3;
	assert_int_equal(rd_region_rec_len(back),
			 offsetof(struct rd_region_rec, grants) + 3 * sizeof(back->grants[0]));
	free(s);
	free(r);
	free(back);
}

static void test_node_record(void **st)
{
	struct rd_node_rec n = { .pid = 1234 }, back;
	const char *why;
	char *s, *t;

	(void)st;
	strcpy(n.node, "node-2");
	strcpy(n.endpoint, "tcp:10.0.0.2:7471");
	s = rd_node_rec_sign(&n, key1, sizeof(key1) - 1);
	assert_int_equal(rd_node_rec_verify(s, strlen(s), key1, sizeof(key1) - 1, &back, &why), 0);
	assert_string_equal(back.endpoint, n.endpoint);
	assert_int_equal(back.pid, 1234);
	t = with_field(s, "node", json_string("node-3"));
	assert_int_equal(rd_node_rec_verify(t, strlen(t), key1, sizeof(key1) - 1, &back, &why), -EBADMSG);
	free(t);
	t = with_field(s, "endpoint", json_string("tcp:10.6.6.6:7471"));
	assert_int_equal(rd_node_rec_verify(t, strlen(t), key1, sizeof(key1) - 1, &back, &why), -EBADMSG);
	free(t);
	t = with_field(s, "pid", json_integer(1));
	assert_int_equal(rd_node_rec_verify(t, strlen(t), key1, sizeof(key1) - 1, &back, &why), -EBADMSG);
	free(t);
	assert_int_equal(rd_node_rec_verify(s, strlen(s), key2, sizeof(key2) - 1, &back, &why), -EBADMSG);
	/* a node MAC is not a region MAC: a node record never passes as a region */
	struct rd_region_rec r;

	assert_int_equal(rd_region_rec_verify(s, strlen(s), key1, sizeof(key1) - 1, &r, &why), -EBADMSG);
	/* without a host (file registry, an older writer): "", and no "host" */
	assert_string_equal(back.host, "");
	assert_null(strstr(s, "\"host\""));
	free(s);
	/* the writer's host (etcd: its boot_id) round-trips under the MAC */
	strcpy(n.host, "d68b1ac8-83f1-4265-8b79-0d6ea71e10ac");
	s = rd_node_rec_sign(&n, key1, sizeof(key1) - 1);
	assert_int_equal(rd_node_rec_verify(s, strlen(s), key1, sizeof(key1) - 1, &back, &why), 0);
	assert_string_equal(back.host, n.host);
	t = with_field(s, "host", json_string("d68b1ac8-83f1-4265-8b79-0d6ea71e10ad"));
	assert_int_equal(rd_node_rec_verify(t, strlen(t), key1, sizeof(key1) - 1, &back, &why), -EBADMSG);
	free(t);
	free(s);
	/* a host that is not a boot_id's characters, empty, too long or not a
	 * string: malformed, whatever signs it */
	static const char *const bad[] = { "D68B", "", "a b", "x\"", "0123456789abcdef0123456789abcdef01234567" };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		strcpy(n.host, "ab");
		s = rd_node_rec_to_json(&n);
		t = with_field(s, "host", json_string(bad[i]));
		assert_int_equal(rd_node_rec_from_json(t, strlen(t), &back), -EBADMSG);
		free(t);
		free(s);
	}
	s = rd_node_rec_to_json(&n);
	t = with_field(s, "host", json_integer(5));
	assert_int_equal(rd_node_rec_from_json(t, strlen(t), &back), -EBADMSG);
	free(t);
	free(s);
}

/* IPv6 endpoints: the longest one roshmd writes fits and round-trips under
 * the MAC, any change to its address or port fails it, and one longer than
 * the record's field is refused, never cut short. */
static void test_ipv6_endpoints(void **st)
{
	struct rd_region_rec r, back;
	struct rd_node_rec n = { .pid = 7 }, nback;
	const char *why;
	char ep[RD_ADDR_PORT_STRLEN + 8], *s, *t;
	/* "[" 45-char IPv6 "%" 15-char zone "]:65535" */
	const char *host = "[ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255%abcdefghijklmno]";

	(void)st;
	snprintf(ep, sizeof(ep), "verbs:%s:65535", host);
	assert_true(strlen(ep) < sizeof(r.endpoint));
	assert_true(strlen(ep) < 96); /* ctl->endpoint, what the node record is made from */
	sample(&r, true);
	snprintf(r.endpoint, sizeof(r.endpoint), "%s", ep);
	s = rd_region_rec_sign(&r, key1, sizeof(key1) - 1);
	assert_int_equal(rd_region_rec_verify(s, strlen(s), key1, sizeof(key1) - 1, &back, &why), 0);
	assert_string_equal(back.endpoint, ep);
	assert_int_equal(back.rkey, r.rkey); /* verbs fields still ride along */
	free(s);
	snprintf(r.endpoint, sizeof(r.endpoint), "tcp:[fd00:198:18::1]:7471");
	s = rd_region_rec_sign(&r, key1, sizeof(key1) - 1);
	assert_int_equal(rd_region_rec_verify(s, strlen(s), key1, sizeof(key1) - 1, &back, &why), 0);
	assert_string_equal(back.endpoint, "tcp:[fd00:198:18::1]:7471");
	static const char *const forged[] = { "tcp:[fd00:198:18::6]:7471", "tcp:[fd00:198:18::1]:7472",
					      "tcp:[fd00:198:18:0::1]:7471", "tcp:fd00:198:18::1:7471" };
	for (size_t i = 0; i < sizeof(forged) / sizeof(forged[0]); i++) {
		t = with_field(s, "endpoint", json_string(forged[i]));
		assert_int_equal(rd_region_rec_verify(t, strlen(t), key1, sizeof(key1) - 1, &back, &why),
				 -EBADMSG);
		free(t);
	}
	free(s);
	strcpy(n.node, "node-6");
	snprintf(n.endpoint, sizeof(n.endpoint), "tcp:[fd00:198:18::2]:7471");
	s = rd_node_rec_sign(&n, key1, sizeof(key1) - 1);
	assert_int_equal(rd_node_rec_verify(s, strlen(s), key1, sizeof(key1) - 1, &nback, &why), 0);
	assert_string_equal(nback.endpoint, n.endpoint);
	t = with_field(s, "endpoint", json_string("tcp:[fd00:198:18::3]:7471"));
	assert_int_equal(rd_node_rec_verify(t, strlen(t), key1, sizeof(key1) - 1, &nback, &why),
			 -EBADMSG);
	free(t);
	/* 128 bytes: one more than the field holds */
	char big[160];

	memset(big, 'a', sizeof(big));
	memcpy(big, "tcp:[", 5);
	big[128] = 0;
	t = with_field(s, "endpoint", json_string(big));
	assert_int_equal(rd_node_rec_from_json(t, strlen(t), &nback), -EBADMSG);
	free(t);
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_region_every_field),
		cmocka_unit_test(test_region_limits_one_form),
		cmocka_unit_test(test_region_mac_forms),
		cmocka_unit_test(test_region_invalid_signed),
		cmocka_unit_test(test_region_grants),
		cmocka_unit_test(test_region_grant_rkeys),
		cmocka_unit_test(test_region_largest),
		cmocka_unit_test(test_node_record),
		cmocka_unit_test(test_ipv6_endpoints),
	};

	return cmocka_run_group_tests_name("record", tests, NULL, NULL);
}
