// SPDX-License-Identifier: MIT
/*
 * Registry records (dataplane/registry/record.c): a region record and a
 * node record parsed from the same untrusted bytes (whoever can write the
 * registry is not trusted). Property: a record that parses re-encodes to
 * JSON that parses back to the very same struct.
 */
#include <string.h>

#include "fuzz.h"
#include "registry/registry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct rd_region_rec r1, r2; /* 600 bytes each: off the stack */
	struct rd_node_rec n1, n2;
	char *s;

	if (rd_region_rec_from_json((const char *)data, size, &r1) == 0) {
		s = rd_region_rec_to_json(&r1);
		if (!s)
			fuzz_fail("a parsed region record does not encode");
		if (rd_region_rec_from_json(s, strlen(s), &r2))
			fuzz_fail("a re-encoded region record does not parse: %s", s);
		if (memcmp(&r1, &r2, sizeof(r1)))
			fuzz_fail("region record changed in a round trip: %s", s);
		free(s);
	}
	if (rd_node_rec_from_json((const char *)data, size, &n1) == 0) {
		s = rd_node_rec_to_json(&n1);
		if (!s)
			fuzz_fail("a parsed node record does not encode");
		if (rd_node_rec_from_json(s, strlen(s), &n2))
			fuzz_fail("a re-encoded node record does not parse: %s", s);
		if (memcmp(&n1, &n2, sizeof(n1)))
			fuzz_fail("node record changed in a round trip: %s", s);
		free(s);
	}
	return 0;
}
