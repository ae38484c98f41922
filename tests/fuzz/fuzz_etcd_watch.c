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
 * nothing leaks.
 */
#define _GNU_SOURCE
#include <openssl/evp.h>
#include <string.h>

#include "config.h"
#include "fuzz.h"
#include "registry/registry.h"

static const uint8_t key[] = "fuzz-cluster-secret-0123456789abcdef";
static const char *const keys[8] = {
	"roshm/regions/a/r1", "roshm/nodes/n1", "other/regions/a/r1", "roshm/regions/a",
	"roshm/regions/a/b/c", "roshm/regions/../x", "roshm/nodes/", "roshm/regionsx/a/r1",
};

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
			signed_text = rd_region_rec_sign(&rr, key, sizeof(key) - 1);
			if (op & 4)
				snprintf(k, sizeof(k), "roshm/regions/%s/%s", rr.tenant, rr.name);
		} else if (rd_node_rec_from_json((const char *)val, vlen, &nr) == 0) {
			signed_text = rd_node_rec_sign(&nr, key, sizeof(key) - 1);
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
	rd_registry_init_common(&r, "fuzz-node", key, sizeof(key) - 1);
	if (rd_etcd_probe_open(&r, "roshm"))
		abort();
	if (!(data[0] & 1)) {
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
	return 0;
}
