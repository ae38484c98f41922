// SPDX-License-Identifier: MIT
/*
 * The etcd backend's watch stream (dataplane/registry/etcd.c: watch_data,
 * watch_line, parse_kv, classify, apply and the cache), through
 * rd_etcd_probe_*: whoever can write under the prefix in etcd chooses the
 * keys, the values and their order, and the gateway's line framing may
 * split anywhere.
 *
 * Input: byte 0 picks the form.
 *   even: the rest is the raw stream, fed in chunks of 1 + byte 1 % 64
 *         bytes (framing, JSON, base64 and every field as they come).
 *   odd:  events of [op][key][rev][len lo][len hi][len bytes of value]:
 *         op bit 0  DELETE (else PUT)
 *         op bit 1  the value, when it parses as a region or node record,
 *                   is signed with the cluster key (the fuzzer cannot
 *                   forge a MAC; this lets valid records reach the cache)
 *         op bit 2  file it under the record's own name (else key % 8 of
 *                   the keys below: ours, another prefix, bad names, ...)
 *         op bit 3  the line says "created"; op bit 4 it is an error line;
 *         op bit 5  the line is split in two at (rev * 7) % its length.
 *         rev is the mod_revision (so the fuzzer orders and replays them).
 * Properties: rd_etcd_probe_check holds after every event (counts, caps,
 * every cached key one of ours, a good record filed under its own name and
 * its MAC, no body on a bad one); list_regions yields only valid names;
 * nothing leaks. In the odd form also what each key must read as, from a
 * model of the watch (struct mkey): a record that does not verify
 * (rd_*_rec_verify, under the key's own name) never reads as good (-EBADMSG);
 * an event older than the key's revision changes nothing; a DELETE makes
 * it -ENOENT; a good one reads as exactly the record that was signed; and
 * list_regions yields as many regions as the model holds good ones.
 * (Without the model a cache that took unsigned records, ignored revisions
 * or DELETEs passed every seed.)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <string.h>

#include "config.h"
#include "fuzz.h"
#include "registry/registry.h"

static const uint8_t key_bytes[] = "fuzz-cluster-secret-0123456789abcdef";
static const char *const keys[8] = {
	"roshm/regions/a/r1", "roshm/nodes/n1", "other/regions/a/r1", "roshm/regions/a",
	"roshm/regions/a/b/c", "roshm/regions/../x", "roshm/nodes/", "roshm/regionsx/a/r1",
};

/* ---- the model: what every key of ours must read as ---- */

enum { M_ABSENT, M_GOOD, M_BAD };

struct mkey {
	char rel[300];                /* "regions/T/N" or "nodes/N" */
	bool region;
	char a[ROSHM_NAME_MAX], b[ROSHM_NAME_MAX];
	int64_t rev;                  /* of what it holds (none when absent) */
	int state;
	char *json;                   /* M_GOOD: the record's canonical form */
};

#define MODEL_MAX 64
static struct mkey model[MODEL_MAX];
static int nmodel;
static bool model_off;                /* more keys than the model holds: no checks */

static void model_reset(void)
{
	for (int i = 0; i < nmodel; i++)
		free(model[i].json);
	memset(model, 0, sizeof(model));
	nmodel = 0;
	model_off = false;
}

/* etcd.c's classify, for the model: one of ours and its names. */
static bool ours(const char *key, char *rel, bool *region, char *a, char *b)
{
	const char *r, *sl;

	if (strncmp(key, "roshm/", 6))
		return false;
	r = key + 6;
	snprintf(rel, 300, "%s", r);
	if (!strncmp(r, "regions/", 8)) {
		r += 8;
		sl = strchr(r, '/');
		if (!sl || (size_t)(sl - r) >= ROSHM_NAME_MAX || strlen(sl + 1) >= ROSHM_NAME_MAX)
			return false;
		memcpy(a, r, (size_t)(sl - r));
		a[sl - r] = 0;
		strcpy(b, sl + 1);
		*region = true;
		return rd_valid_name(a) && rd_valid_name(b);
	}
	if (!strncmp(r, "nodes/", 6)) {
		if (strlen(r + 6) >= ROSHM_NAME_MAX)
			return false;
		strcpy(a, r + 6);
		b[0] = 0;
		*region = false;
		return rd_valid_name(a);
	}
	return false;
}

/* The event (@del, @key, @rev, value @text) as the watch must take it. */
static void model_event(bool del, const char *key, int64_t rev, const char *text, size_t tlen)
{
	char rel[300], a[ROSHM_NAME_MAX], b[ROSHM_NAME_MAX];
	struct mkey *m = NULL;
	bool region;

	if (model_off || !ours(key, rel, &region, a, b) || rev <= 0)
		return;
	for (int i = 0; i < nmodel && !m; i++)
		if (!strcmp(model[i].rel, rel))
			m = &model[i];
	if (!m) {
		if (nmodel == MODEL_MAX) {
			model_off = true;
			return;
		}
		m = &model[nmodel++];
		snprintf(m->rel, sizeof(m->rel), "%s", rel);
		m->region = region;
		strcpy(m->a, a);
		strcpy(m->b, b);
	}
	if (m->state != M_ABSENT && rev <= m->rev)
		return; /* older than what it holds */
	free(m->json);
	m->json = NULL;
	if (del) {
		m->state = M_ABSENT; /* forgotten with its revision */
		m->rev = 0;
		return;
	}
	m->rev = rev;
	m->state = M_BAD;
	if (tlen > RD_REC_MAX)
		return;
	if (region) {
		struct rd_region_rec rr;

		if (!rd_region_rec_verify(text, tlen, key_bytes, sizeof(key_bytes) - 1, &rr, NULL) &&
		    !strcmp(rr.tenant, a) && !strcmp(rr.name, b)) {
			m->state = M_GOOD;
			m->json = rd_region_rec_to_json(&rr);
		}
	} else {
		struct rd_node_rec nr;

		if (!rd_node_rec_verify(text, tlen, key_bytes, sizeof(key_bytes) - 1, &nr, NULL) &&
		    !strcmp(nr.node, a)) {
			m->state = M_GOOD;
			m->json = rd_node_rec_to_json(&nr);
		}
	}
	if (m->state == M_GOOD && !m->json)
		abort();
}

static int count_cb_n;

static void count_cb(const struct rd_region_rec *rec, void *arg)
{
	(void)rec;
	(void)arg;
	count_cb_n++;
}

/* Every key of the model reads as the model says. */
static void model_check(struct rd_registry *r)
{
	int good_regions = 0;

	if (model_off)
		return;
	for (int i = 0; i < nmodel; i++) {
		const struct mkey *m = &model[i];
		struct rd_region_rec rr;
		struct rd_node_rec nr;
		char *json = NULL;
		int ret;

		if (m->region) {
			ret = r->ops->get_region(r, m->a, m->b, &rr);
			if (!ret)
				json = rd_region_rec_to_json(&rr);
		} else {
			ret = r->ops->get_node(r, m->a, &nr);
			if (!ret)
				json = rd_node_rec_to_json(&nr);
		}
		good_regions += m->region && m->state == M_GOOD;
		if (m->state == M_ABSENT && ret != -ENOENT)
			fuzz_fail("%s: deleted (or never put), reads as %d", m->rel, ret);
		if (m->state == M_BAD && ret != -EBADMSG)
			fuzz_fail("%s: its record at revision %lld does not verify, reads as %d", m->rel,
				  (long long)m->rev, ret);
		if (m->state == M_GOOD && (ret || !json || strcmp(json, m->json)))
			fuzz_fail("%s: reads as %d %.300s, not the record of revision %lld %.300s", m->rel,
				  ret, json ? json : "", (long long)m->rev, m->json);
		free(json);
	}
	count_cb_n = 0;
	r->ops->list_regions(r, count_cb, NULL);
	if (count_cb_n != good_regions)
		fuzz_fail("list_regions yields %d regions, the watch put %d good ones", count_cb_n,
			  good_regions);
}

static char *b64(const void *p, size_t n)
{
	char *out = malloc(4 * ((n + 2) / 3) + 1);

	if (!out)
		abort();
	EVP_EncodeBlock((unsigned char *)out, p, (int)n);
	return out;
}

static void list_cb(const struct rd_region_rec *rec, void *arg)
{
	(void)arg;
	if (!rd_valid_name(rec->tenant) || !rd_valid_name(rec->name))
		fuzz_fail("list_regions yields a region named %.64s/%.64s", rec->tenant, rec->name);
}

static void check(struct rd_registry *r)
{
	char why[600];
	struct rd_region_rec rr;
	struct rd_node_rec nr;

	if (rd_etcd_probe_check(r, why, sizeof(why)))
		fuzz_fail("%s", why);
	r->ops->list_regions(r, list_cb, NULL);
	if (r->ops->get_region(r, "a", "r1", &rr) == 0 && (strcmp(rr.tenant, "a") || strcmp(rr.name, "r1")))
		fuzz_fail("get_region a/r1 answers %.64s/%.64s", rr.tenant, rr.name);
	if (r->ops->get_node(r, "n1", &nr) == 0 && strcmp(nr.node, "n1"))
		fuzz_fail("get_node n1 answers %.64s", nr.node);
	model_check(r);
}

/* One watch message for @ev, fed whole or in two pieces. */
static void event(struct rd_registry *r, uint8_t op, uint8_t ksel, uint8_t rev, const uint8_t *val,
		  size_t vlen)
{
	static struct rd_region_rec rr;
	struct rd_node_rec nr;
	char *signed_text = NULL, *kb, *vb, *line, k[300];
	const char *text = (const char *)val;
	size_t tlen = vlen;
	int n;

	snprintf(k, sizeof(k), "%s", keys[ksel % 8]);
	if (op & 2) {
		if (rd_region_rec_from_json((const char *)val, vlen, &rr) == 0) {
			signed_text = rd_region_rec_sign(&rr, key_bytes, sizeof(key_bytes) - 1);
			if (op & 4)
				snprintf(k, sizeof(k), "roshm/regions/%s/%s", rr.tenant, rr.name);
		} else if (rd_node_rec_from_json((const char *)val, vlen, &nr) == 0) {
			signed_text = rd_node_rec_sign(&nr, key_bytes, sizeof(key_bytes) - 1);
			if (op & 4)
				snprintf(k, sizeof(k), "roshm/nodes/%s", nr.node);
		}
		if (signed_text) {
			text = signed_text;
			tlen = strlen(signed_text);
		}
	}
	kb = b64(k, strlen(k));
	vb = b64(text, tlen);
	if (op & 16)
		n = asprintf(&line, "{\"error\":{\"grpc_code\":16,\"message\":\"%s\"}}\n",
			     rev & 1 ? "invalid auth token" : "etcdserver: fuzz");
	else
		n = asprintf(&line,
			     "{\"result\":{\"header\":{\"revision\":\"%u\"},%s\"events\":[{%s\"kv\":"
			     "{\"key\":\"%s\",\"create_revision\":\"1\",\"mod_revision\":\"%u\","
			     "\"version\":\"1\",\"value\":\"%s\"}}]}}\n",
			     rev, op & 8 ? "\"created\":true," : "", op & 1 ? "\"type\":\"DELETE\"," : "",
			     kb, rev, vb);
	if (n < 0)
		abort();
	if (op & 32) {
		size_t cut = ((size_t)rev * 7) % (size_t)n;

		rd_etcd_probe_feed(r, line, cut);
		rd_etcd_probe_feed(r, line + cut, (size_t)n - cut);
	} else {
		rd_etcd_probe_feed(r, line, (size_t)n);
	}
	if (!(op & 16))
		model_event(op & 1, k, rev, text, tlen);
	free(line);
	free(kb);
	free(vb);
	free(signed_text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rd_registry r;

	if (!size)
		return 0;
	rd_registry_init_common(&r, "fuzz-node", key_bytes, sizeof(key_bytes) - 1);
	if (rd_etcd_probe_open(&r, "roshm"))
		abort();
	model_reset();
	if (!(data[0] & 1)) {
		model_off = true; /* the raw stream: invariants only */
		size_t chunk = 1 + (size > 1 ? data[1] % 64 : 0);

		for (size_t off = 2; off < size; off += chunk)
			rd_etcd_probe_feed(&r, (const char *)data + off,
					   size - off < chunk ? size - off : chunk);
		check(&r);
	} else {
		size_t off = 1;

		while (off + 5 <= size) {
			uint8_t op = data[off], ksel = data[off + 1], rev = data[off + 2];
			size_t len = (size_t)data[off + 3] | (size_t)data[off + 4] << 8;

			off += 5;
			if (len > size - off)
				len = size - off;
			event(&r, op, ksel, rev, data + off, len);
			off += len;
			check(&r);
		}
	}
	rd_etcd_probe_close(&r);
	rd_registry_fini_common(&r);
	model_reset();
	return 0;
}
