// SPDX-License-Identifier: MIT
/*
 * Addresses (dataplane/addr.c): an endpoint out of a registry record, or an
 * address out of the config or the environment, from untrusted bytes. The
 * first byte picks the flags. Properties: a refusal always says why; an
 * accepted numeric endpoint prints back to an endpoint that parses to the
 * same address and port (the spelling roshmd publishes is stable).
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "addr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char s[256], host[RD_HOST_MAX], why[256], out[RD_ADDR_PORT_STRLEN + 8];
	struct rd_addr a, b;
	uint16_t port = 0;
	unsigned flags;

	if (size < 1 || size - 1 >= sizeof(s))
		return 0;
	flags = data[0] & (RD_ADDR_PORT | RD_ADDR_NUMERIC | RD_ADDR_PASSIVE);
	memcpy(s, data + 1, size - 1);
	s[size - 1] = 0;
	why[0] = 0;
	if (rd_addr_split(s, flags, host, sizeof(host), &port, why, sizeof(why))) {
		if (!why[0])
			fuzz_fail("'%s' refused without a reason", s);
		return 0;
	}
	if ((flags & RD_ADDR_PORT) && port == 0)
		fuzz_fail("'%s': port 0 accepted", s);
	/* no DNS here: numeric only */
	if (rd_addr_resolve(host, port ? port : 1, flags | RD_ADDR_NUMERIC, &a, why, sizeof(why)))
		return 0;
	rd_addr_str(&a, true, out + 4, sizeof(out) - 4);
	memcpy(out, "tcp:", 4);
	if (rd_addr_is_any(&a))
		return 0;
	if (rd_parse_endpoint(out, "tcp", &b))
		fuzz_fail("'%s' prints as '%s', which does not parse", s, out);
	if (!rd_addr_same_host(&a, &b) || rd_addr_port(&a) != rd_addr_port(&b))
		fuzz_fail("'%s' prints as '%s', which is another address", s, out);
	return 0;
}
