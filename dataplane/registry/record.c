// SPDX-License-Identifier: MIT
/*
 * Registry records as JSON (jansson), and their MAC. Parsing treats the text
 * as hostile. The MAC covers the canonical encoding of what was parsed (not
 * the bytes read), so that only fields roshmd uses are covered, and any
 * change to one of them, however it is spelled, fails verification.
 */
#include <errno.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "registry/registry.h"

/* Domain label: a record MAC can never pass for another HMAC over the secret. */
static const char rec_label[] = "roshm-rec-v1"; /* hashed with its NUL */

void rd_rec_mac(const uint8_t *key, size_t keylen, const char *text, size_t len, uint8_t out[32])
{
	unsigned char *msg = malloc(sizeof(rec_label) + len);
	unsigned int n = 0;

	if (!msg) {
		memset(out, 0, 32); /* never matches a real MAC: the record is refused */
		return;
	}
	memcpy(msg, rec_label, sizeof(rec_label));
	memcpy(msg + sizeof(rec_label), text, len);
	if (!HMAC(EVP_sha256(), key, (int)keylen, msg, sizeof(rec_label) + len, out, &n) || n != 32)
		memset(out, 0, 32);
	free(msg);
}

uint64_t rd_grant_id(const char *node, const char *tenant, const char *name, uint64_t key)
{
	static const char label[] = "roshm-grant-v1";
	uint8_t msg[sizeof(label) + 3 * ROSHM_NAME_MAX + 8], md[EVP_MAX_MD_SIZE];
	size_t n = 0, l;
	unsigned int mdlen = 0;
	uint64_t id = 0;

	memcpy(msg, label, sizeof(label));
	n = sizeof(label);
	for (const char *const *p = (const char *const[]){ node, tenant, name, NULL }; *p; p++) {
		l = strnlen(*p, ROSHM_NAME_MAX - 1);
		memcpy(msg + n, *p, l);
		n += l;
		msg[n++] = 0;
	}
	for (int i = 0; i < 8; i++)
		msg[n++] = (uint8_t)(key >> (8 * i));
	if (!EVP_Digest(msg, n, md, &mdlen, EVP_sha256(), NULL) || mdlen < 8)
		return 0; /* matches no grant: 0 is never one (region_grant) */
	for (int i = 0; i < 8; i++)
		id |= (uint64_t)md[i] << (8 * i);
	return id;
}

static uint8_t node_key[32];
static pthread_once_t node_key_once = PTHREAD_ONCE_INIT;

static void node_key_init(void)
{
	/* without randomness the key is zeroes: the hash is then only unkeyed */
	if (RAND_bytes(node_key, sizeof(node_key)) != 1)
		memset(node_key, 0, sizeof(node_key));
}

uint64_t rd_node_hash(const char *node)
{
	uint8_t md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	uint64_t h = 0;

	pthread_once(&node_key_once, node_key_init);
	if (!HMAC(EVP_sha256(), node_key, (int)sizeof(node_key), (const uint8_t *)node,
		  strnlen(node, ROSHM_NAME_MAX - 1), md, &mdlen) || mdlen < 8)
		return 1;
	for (int i = 0; i < 8; i++)
		h |= (uint64_t)md[i] << (8 * i);
	return h | 1;
}

static void hex(const uint8_t *in, size_t len, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < len; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * len] = 0;
}

/* Lowercase hex only: one spelling per MAC. */
static int unhex(const char *in, uint8_t *out, size_t len)
{
	if (strlen(in) != 2 * len)
		return -1;
	for (size_t i = 0; i < 2 * len; i++) {
		char c = in[i];
		int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;

		if (v < 0)
			return -1;
		if (i & 1)
			out[i / 2] |= (uint8_t)v;
		else
			out[i / 2] = (uint8_t)(v << 4);
	}
	return 0;
}

/* @canon with "mac" added, or NULL. */
static char *sign(char *canon, const uint8_t *key, size_t keylen)
{
	json_error_t jerr;
	json_t *o;
	uint8_t mac[32];
	char mhex[65], *s = NULL;

	if (!canon)
		return NULL;
	rd_rec_mac(key, keylen, canon, strlen(canon), mac);
	hex(mac, sizeof(mac), mhex);
	o = json_loads(canon, 0, &jerr);
	if (o && !json_object_set_new(o, "mac", json_string(mhex)))
		s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	free(canon);
	return s;
}

/* The MAC of @o against its canonical re-encoding @canon; 0 or -EBADMSG. */
static int check_mac(json_t *o, char *canon, const uint8_t *key, size_t keylen, const char **why)
{
	json_t *m = json_object_get(o, "mac");
	uint8_t want[32], got[32];
	int ret = -EBADMSG;

	if (!canon) {
		*why = "cannot re-encode";
		return -ENOMEM;
	}
	if (!json_is_string(m)) {
		*why = "no MAC";
	} else if (unhex(json_string_value(m), got, sizeof(got))) {
		*why = "malformed MAC";
	} else {
		rd_rec_mac(key, keylen, canon, strlen(canon), want);
		if (CRYPTO_memcmp(want, got, sizeof(want)) == 0)
			ret = 0;
		else
			*why = "wrong MAC (not written with this cluster's secret, or changed since)";
	}
	free(canon);
	return ret;
}

static json_t *region_obj(const struct rd_region_rec *rec)
{
	json_t *o = json_object(), *t = json_array();

	for (uint32_t i = 0; i < rec->ntenants; i++)
		json_array_append_new(t, json_string(rec->tenants[i]));
	json_object_set_new(o, "node", json_string(rec->node));
	json_object_set_new(o, "tenant", json_string(rec->tenant));
	json_object_set_new(o, "name", json_string(rec->name));
	json_object_set_new(o, "state", json_string(rec->state));
	json_object_set_new(o, "endpoint", json_string(rec->endpoint));
	json_object_set_new(o, "region_id", json_integer(rec->region_id));
	json_object_set_new(o, "key", json_integer(rec->key));
	/* u64 as a decimal string: JSON numbers lose precision past 2^53. */
	char buf[32];

	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)rec->epoch);
	json_object_set_new(o, "epoch", json_string(buf));
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)rec->mem_id);
	json_object_set_new(o, "mem_id", json_string(buf));
	snprintf(buf, sizeof(buf), "%016llx", (unsigned long long)rec->gid);
	json_object_set_new(o, "gid", json_string(buf));
	if (rec->ogid) {   /* its owner client's grant id (ROSHM_GRANT_ADD_OWNER) */
		snprintf(buf, sizeof(buf), "%016llx", (unsigned long long)rec->ogid);
		json_object_set_new(o, "ogid", json_string(buf));
	}
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)rec->data_size);
	json_object_set_new(o, "data_size", json_string(buf));
	if (!strncmp(rec->endpoint, "verbs:", 6)) {
		/* what the peers' NICs need; roshmd never hands it to a client */
		json_object_set_new(o, "rkey", json_integer(rec->rkey));
		snprintf(buf, sizeof(buf), "%llu", (unsigned long long)rec->raddr);
		json_object_set_new(o, "raddr", json_string(buf));
	}
	if (rd_region_restricted(rec->access, rec->win_lo, rec->win_hi, rec->data_size,
				 rec->va_base)) {
		json_object_set_new(o, "access", json_integer(rec->access ? rec->access :
									  ROSHM_ACCESS_ALL));
		snprintf(buf, sizeof(buf), "%llu", (unsigned long long)rec->win_lo);
		json_object_set_new(o, "win_lo", json_string(buf));
		snprintf(buf, sizeof(buf), "%llu",
			 (unsigned long long)(rec->win_hi ? rec->win_hi : rec->data_size));
		json_object_set_new(o, "win_hi", json_string(buf));
		snprintf(buf, sizeof(buf), "%llu", (unsigned long long)rec->va_base);
		json_object_set_new(o, "va_base", json_string(buf));
	}
	json_object_set_new(o, "txn_slots", json_integer(rec->txn_slots));
	json_object_set_new(o, "slot_size", json_integer(rec->slot_size));
	json_object_set_new(o, "policy", json_string(rd_policy_name(rec->policy)));
	json_object_set_new(o, "tenants", t);
	if (rec->policy == ROSHM_POLICY_GRANT) {
		json_t *g = json_array();
		bool nic = false;

		for (uint32_t i = 0; i < rec->ngrants && i < ROSHM_GRANTS_MAX; i++) {
			const struct rd_grant *e = &rec->grants[i];
			char gb[RD_GRANT_PART_LEN + 1];

			if (!e->lo && e->hi == rec->data_size && e->access == ROSHM_ACCESS_ALL)
				snprintf(gb, sizeof(gb), "%016llx", (unsigned long long)e->gid);
			else   /* a part: "id:lo:hi:access", fixed widths (one encoding) */
				snprintf(gb, sizeof(gb), "%016llx:%016llx:%016llx:%x",
					 (unsigned long long)e->gid, (unsigned long long)e->lo,
					 (unsigned long long)e->hi, e->access);
			json_array_append_new(g, json_string(gb));
			if (e->nic_rkey)
				nic = true;
		}
		json_object_set_new(o, "grants", g);
		if (nic && !strncmp(rec->endpoint, "verbs:", 6)) {
			/* per grant, its own MR's rkey (0: none), for peers' NICs */
			json_t *k = json_array();

			for (uint32_t i = 0; i < rec->ngrants && i < ROSHM_GRANTS_MAX; i++)
				json_array_append_new(k, json_integer(rec->grants[i].nic_rkey));
			json_object_set_new(o, "grant_rkeys", k);
		}
	}
	return o;
}

static char *dump(json_t *o)
{
	char *s = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;

	json_decref(o);
	return s;
}

char *rd_region_rec_to_json(const struct rd_region_rec *rec)
{
	return dump(region_obj(rec));
}

char *rd_region_rec_sign(const struct rd_region_rec *rec, const uint8_t *key, size_t keylen)
{
	return sign(rd_region_rec_to_json(rec), key, keylen);
}

static int get_str(json_t *o, const char *k, char *dst, size_t cap, bool name)
{
	json_t *v = json_object_get(o, k);
	const char *s;

	if (!json_is_string(v))
		return -EBADMSG;
	s = json_string_value(v);
	if (strlen(s) >= cap || (name && !rd_valid_name(s)))
		return -EBADMSG;
	snprintf(dst, cap, "%s", s);
	return 0;
}

static int get_u64s(json_t *o, const char *k, uint64_t *dst)
{
	json_t *v = json_object_get(o, k);
	const char *s;
	char *end;

	if (!json_is_string(v))
		return -EBADMSG;
	s = json_string_value(v);
	if (!*s || *s == '-' || strlen(s) > 20)
		return -EBADMSG;
	errno = 0;
	*dst = strtoull(s, &end, 10);
	return (*end || errno) ? -EBADMSG : 0;
}

static int get_u32(json_t *o, const char *k, uint32_t *dst)
{
	json_t *v = json_object_get(o, k);

	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > UINT32_MAX)
		return -EBADMSG;
	*dst = (uint32_t)json_integer_value(v);
	return 0;
}

/* 16 lowercase hex digits (the one form a grant id has); 0 only if @zero_ok */
static int hex64(json_t *e, uint64_t *dst, bool zero_ok)
{
	const char *v = json_is_string(e) ? json_string_value(e) : "";

	if (strlen(v) != 16 || strspn(v, "0123456789abcdef") != 16)
		return -EBADMSG;
	*dst = strtoull(v, NULL, 16);
	return *dst || zero_ok ? 0 : -EBADMSG;
}

/* 16 lowercase hex digits at @v, not 0 unless @zero_ok. */
static int hex16(const char *v, uint64_t *dst, bool zero_ok)
{
	char b[17];

	memcpy(b, v, 16);
	b[16] = 0;
	if (strspn(b, "0123456789abcdef") != 16)
		return -EBADMSG;
	*dst = strtoull(b, NULL, 16);
	return *dst || zero_ok ? 0 : -EBADMSG;
}

/*
 * One entry of "grants": the bare id (all of the region, every operation),
 * or "id:lo:hi:access" (16, 16 and 16 lowercase hex digits and one, a part
 * [lo, hi) of the data area, lo < hi <= @data_size, and ROSHM_ACCESS_*
 * flags, not 0), never a part that is all of it (one encoding).
 */
static int grant_from_json(json_t *e, uint64_t data_size, struct rd_grant *g)
{
	const char *v = json_is_string(e) ? json_string_value(e) : "";
	size_t n = strlen(v);

	memset(g, 0, sizeof(*g));
	if (n == 16) {
		g->hi = data_size;
		g->access = ROSHM_ACCESS_ALL;
		return hex16(v, &g->gid, false);
	}
	if (n != RD_GRANT_PART_LEN || v[16] != ':' || v[33] != ':' || v[50] != ':' ||
	    hex16(v, &g->gid, false) || hex16(v + 17, &g->lo, true) || hex16(v + 34, &g->hi, true) ||
	    v[51] < '1' || v[51] > '7')
		return -EBADMSG;
	g->access = (uint32_t)(v[51] - '0');
	if (g->lo >= g->hi || g->hi > data_size ||
	    (!g->lo && g->hi == data_size && g->access == ROSHM_ACCESS_ALL))
		return -EBADMSG;
	return 0;
}

static int region_from_obj(json_t *o, struct rd_region_rec *rec, const char **why)
{
	json_t *t;
	char pol[16];

	memset(rec, 0, sizeof(*rec));
	*why = "malformed";
	if (!json_is_object(o))
		return -EBADMSG;
	if (get_str(o, "node", rec->node, sizeof(rec->node), true) ||
	    get_str(o, "tenant", rec->tenant, sizeof(rec->tenant), true) ||
	    get_str(o, "name", rec->name, sizeof(rec->name), true) ||
	    get_str(o, "state", rec->state, sizeof(rec->state), false) ||
	    get_str(o, "endpoint", rec->endpoint, sizeof(rec->endpoint), false) ||
	    get_str(o, "policy", pol, sizeof(pol), false) ||
	    get_u32(o, "region_id", &rec->region_id) || get_u32(o, "key", &rec->key) ||
	    get_u32(o, "txn_slots", &rec->txn_slots) || get_u32(o, "slot_size", &rec->slot_size) ||
	    get_u64s(o, "epoch", &rec->epoch) || get_u64s(o, "data_size", &rec->data_size) ||
	    get_u64s(o, "mem_id", &rec->mem_id))
		return -EBADMSG;
	if (hex64(json_object_get(o, "gid"), &rec->gid, true)) { /* 0: none (never granted) */
		*why = "malformed gid";
		return -EBADMSG;
	}
	if (json_object_get(o, "ogid") && hex64(json_object_get(o, "ogid"), &rec->ogid, false)) {
		*why = "malformed ogid";   /* absent: no owner to grant to (0) */
		return -EBADMSG;
	}
	if (strcmp(rec->state, RD_STATE_ACTIVE) && strcmp(rec->state, RD_STATE_STALE)) {
		*why = "unknown state";
		return -EBADMSG;
	}
	if (!strncmp(rec->endpoint, "verbs:", 6) &&
	    (get_u32(o, "rkey", &rec->rkey) || get_u64s(o, "raddr", &rec->raddr)))
		return -EBADMSG;
	rec->access = ROSHM_ACCESS_ALL;
	rec->win_hi = rec->data_size;
	if (json_object_get(o, "access")) {
		/* all four or none; the same limits as at create */
		if (get_u32(o, "access", &rec->access) || get_u64s(o, "win_lo", &rec->win_lo) ||
		    get_u64s(o, "win_hi", &rec->win_hi) || get_u64s(o, "va_base", &rec->va_base) ||
		    !rec->access || (rec->access & ~ROSHM_ACCESS_ALL) || rec->win_lo > rec->win_hi ||
		    rec->win_hi > rec->data_size || rec->va_base > UINT64_MAX - rec->data_size ||
		    /* one encoding: what region_obj writes, never a form it
		     * re-encodes otherwise (the MAC covers that re-encoding) */
		    (!rec->win_hi && rec->data_size) ||
		    !rd_region_restricted(rec->access, rec->win_lo, rec->win_hi, rec->data_size,
					  rec->va_base)) {
			*why = "malformed access window";
			return -EBADMSG;
		}
	}
	if (!strcmp(pol, "tenant")) {
		rec->policy = ROSHM_POLICY_TENANT;
	} else if (!strcmp(pol, "owner")) {
		rec->policy = ROSHM_POLICY_OWNER;
	} else if (!strcmp(pol, "list")) {
		rec->policy = ROSHM_POLICY_LIST;
	} else if (!strcmp(pol, "grant")) {
		rec->policy = ROSHM_POLICY_GRANT;
	} else {
		*why = "unknown policy";
		return -EBADMSG;
	}
	t = json_object_get(o, "tenants");
	if (!json_is_array(t) || json_array_size(t) > ROSHM_POLICY_TENANTS_MAX)
		return -EBADMSG;
	rec->ntenants = (uint32_t)json_array_size(t);
	for (uint32_t i = 0; i < rec->ntenants; i++) {
		json_t *e = json_array_get(t, i);

		if (!json_is_string(e) || strlen(json_string_value(e)) >= ROSHM_NAME_MAX ||
		    !rd_valid_name(json_string_value(e)))
			return -EBADMSG;
		snprintf(rec->tenants[i], ROSHM_NAME_MAX, "%s", json_string_value(e));
	}
	/* "grants": with policy "grant" and only then; 16 lowercase hex digits
	 * each (one encoding), none 0 */
	t = json_object_get(o, "grants");
	if ((rec->policy == ROSHM_POLICY_GRANT) != (t != NULL) || (t && rec->ntenants) ||
	    (t && (!json_is_array(t) || json_array_size(t) > ROSHM_GRANTS_MAX))) {
		*why = "malformed grants";
		return -EBADMSG;
	}
	rec->ngrants = t ? (uint32_t)json_array_size(t) : 0;
	for (uint32_t i = 0; i < rec->ngrants; i++)
		if (grant_from_json(json_array_get(t, i), rec->data_size, &rec->grants[i])) {
			*why = "malformed grants";
			return -EBADMSG;
		}
	/* "grant_rkeys": verbs only, one rkey per grant (0: none), optional */
	t = json_object_get(o, "grant_rkeys");
	if (t && (!rec->ngrants || strncmp(rec->endpoint, "verbs:", 6) || !json_is_array(t) ||
		  json_array_size(t) != rec->ngrants)) {
		*why = "malformed grant_rkeys";
		return -EBADMSG;
	}
	for (uint32_t i = 0; t && i < rec->ngrants; i++) {
		json_t *v = json_array_get(t, i);

		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) > UINT32_MAX) {
			*why = "malformed grant_rkeys";
			return -EBADMSG;
		}
		rec->grants[i].nic_rkey = (uint32_t)json_integer_value(v);
	}
	*why = NULL;
	return 0;
}

static json_t *load(const char *text, size_t len)
{
	json_error_t jerr;

	/* a record is far below this; the cap also bounds jansson's work */
	if (len > RD_REC_MAX)
		return NULL;
	return json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
}

int rd_region_rec_from_json(const char *text, size_t len, struct rd_region_rec *rec)
{
	json_t *o = load(text, len);
	const char *why;
	int ret = region_from_obj(o, rec, &why);

	json_decref(o);
	return ret;
}

int rd_region_rec_verify(const char *text, size_t len, const uint8_t *key, size_t keylen,
			 struct rd_region_rec *rec, const char **why)
{
	json_t *o = load(text, len);
	const char *w;
	int ret = region_from_obj(o, rec, &w);

	if (!ret)
		ret = check_mac(o, rd_region_rec_to_json(rec), key, keylen, &w);
	json_decref(o);
	if (ret)
		memset(rec, 0, sizeof(*rec));
	if (why)
		*why = w;
	return ret;
}

static json_t *node_obj(const struct rd_node_rec *rec)
{
	json_t *o = json_object();

	json_object_set_new(o, "node", json_string(rec->node));
	json_object_set_new(o, "endpoint", json_string(rec->endpoint));
	json_object_set_new(o, "pid", json_integer(rec->pid));
	if (rec->host[0])   /* (a record without one reads as before) */
		json_object_set_new(o, "host", json_string(rec->host));
	return o;
}

/* A node record's optional "host": a boot_id's characters, shorter than
 * RD_HOST_ID_MAX; "" when missing. */
static int get_host(json_t *o, char *dst)
{
	json_t *v = json_object_get(o, "host");

	dst[0] = 0;
	if (!v)
		return 0;
	if (get_str(o, "host", dst, RD_HOST_ID_MAX, false) || !rd_valid_host_id(dst)) {
		dst[0] = 0;
		return -EBADMSG;
	}
	return 0;
}

char *rd_node_rec_to_json(const struct rd_node_rec *rec)
{
	return dump(node_obj(rec));
}

char *rd_node_rec_sign(const struct rd_node_rec *rec, const uint8_t *key, size_t keylen)
{
	return sign(rd_node_rec_to_json(rec), key, keylen);
}

static int node_from_obj(json_t *o, struct rd_node_rec *rec, const char **why)
{
	memset(rec, 0, sizeof(*rec));
	if (json_is_object(o) && !get_str(o, "node", rec->node, sizeof(rec->node), true) &&
	    !get_str(o, "endpoint", rec->endpoint, sizeof(rec->endpoint), false) &&
	    !get_u32(o, "pid", &rec->pid) && !get_host(o, rec->host)) {
		*why = NULL;
		return 0;
	}
	*why = "malformed";
	return -EBADMSG;
}

int rd_node_rec_from_json(const char *text, size_t len, struct rd_node_rec *rec)
{
	json_t *o = load(text, len);
	const char *why;
	int ret = node_from_obj(o, rec, &why);

	json_decref(o);
	return ret;
}

int rd_node_rec_verify(const char *text, size_t len, const uint8_t *key, size_t keylen,
		       struct rd_node_rec *rec, const char **why)
{
	json_t *o = load(text, len);
	const char *w;
	int ret = node_from_obj(o, rec, &w);

	if (!ret)
		ret = check_mac(o, rd_node_rec_to_json(rec), key, keylen, &w);
	json_decref(o);
	if (ret)
		memset(rec, 0, sizeof(*rec));
	if (why)
		*why = w;
	return ret;
}
