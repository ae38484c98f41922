// SPDX-License-Identifier: MIT
/*
 * Addresses (dataplane/addr.c): every accepted form splits and resolves to
 * the address it names, every bad form is refused with a reason that says
 * what is wrong, endpoints from records never resolve names, and a "::"
 * listener takes IPv4 too (on loopback; skipped where IPv6 is off).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "addr.h"

static bool ipv6_on(void)
{
	int fd = socket(AF_INET6, SOCK_STREAM, 0);
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	bool ok = fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;

	if (fd >= 0)
		close(fd);
	return ok;
}

/* @s splits (with @flags) into @host and @port. */
static void good(const char *s, unsigned flags, const char *host, unsigned port)
{
	char h[RD_HOST_MAX], why[256] = "";
	uint16_t p = 0;

	if (rd_addr_split(s, flags, h, sizeof(h), &p, why, sizeof(why)))
		fail_msg("'%s' refused: %s", s, why);
	if (strcmp(h, host) || p != port)
		fail_msg("'%s': host '%s' port %u, expected '%s' %u", s, h, p, host, port);
}

/* @s is refused (with @flags) and the reason contains @needle. */
static void refused(const char *s, unsigned flags, const char *needle)
{
	char h[RD_HOST_MAX], why[256] = "";
	uint16_t p = 0;
	int ret = rd_addr_split(s, flags, h, sizeof(h), &p, why, sizeof(why));

	if (ret != -EINVAL)
		fail_msg("'%s' accepted (host '%s' port %u), expected: %s", s, h, p, needle);
	if (!strstr(why, needle))
		fail_msg("'%s': reason \"%s\", expected \"%s\"", s, why, needle);
}

static void test_forms(void **st)
{
	(void)st;
	good("198.18.0.1:7471", RD_ADDR_PORT, "198.18.0.1", 7471);
	good("[fd00:198:18::1]:7471", RD_ADDR_PORT, "fd00:198:18::1", 7471);
	good("[::1]:1", RD_ADDR_PORT, "::1", 1);
	good("[::]:65535", RD_ADDR_PORT, "::", 65535);
	good("localhost:9472", RD_ADDR_PORT, "localhost", 9472);
	good("node-1.example.org:80", RD_ADDR_PORT, "node-1.example.org", 80);
	good("[fe80::1%eth0]:7471", RD_ADDR_PORT, "fe80::1%eth0", 7471);
	/* no port: bare IPv6, bracketed IPv6, IPv4, a name */
	good("fd00:198:18::2", 0, "fd00:198:18::2", 0);
	good("[fd00:198:18::2]", 0, "fd00:198:18::2", 0);
	good("::", 0, "::", 0);
	good("0.0.0.0", 0, "0.0.0.0", 0);
	good("roshm-0", 0, "roshm-0", 0);
	good("[::ffff:198.18.0.1]", RD_ADDR_NUMERIC, "::ffff:198.18.0.1", 0);
}

static void test_bad_forms(void **st)
{
	(void)st;
	refused("198.18.0.1", RD_ADDR_PORT, "missing port");
	refused("[::1]", RD_ADDR_PORT, "missing port");
	refused("fd00::1", RD_ADDR_PORT, "written [ADDR]:PORT");
	refused("fd00::1:7471", RD_ADDR_PORT, "written [ADDR]:PORT");
	refused("198.18.0.1:", RD_ADDR_PORT, "missing port");
	refused("[::1]:", RD_ADDR_PORT, "missing port");
	refused("198.18.0.1:0", RD_ADDR_PORT, "port 0 is out of range 1-65535");
	refused("[::1]:65536", RD_ADDR_PORT, "port 65536 is out of range 1-65535");
	refused("[::1]:99999999", RD_ADDR_PORT, "not a number from 1 to 65535");
	refused("198.18.0.1:80x", RD_ADDR_PORT, "not a number");
	refused("198.18.0.1:-1", RD_ADDR_PORT, "not a number");
	refused("[::1:7471", RD_ADDR_PORT, "unterminated '['");
	refused("[::1", 0, "unterminated '['");
	refused("::1]:7471", RD_ADDR_PORT, "unmatched ']'");
	refused("[::1]7471", RD_ADDR_PORT, "after ']'");
	refused("[198.18.0.1]:7471", RD_ADDR_PORT, "brackets are for IPv6");
	refused("[]:7471", RD_ADDR_PORT, "brackets are for IPv6");
	refused(":7471", RD_ADDR_PORT, "missing host");
	refused("", 0, "empty address");
	refused("198.18.0.1:7471", 0, "no port here");
	refused("[::1]:7471", 0, "no port here");
	refused("198.18.0.256", 0, "not an IPv4 address");
	refused("10.1.2", 0, "not an IPv4 address");
	refused("fd00::zz", 0, "not an IPv6 address");
	refused("fd00::1%", 0, "not an IPv6 address");
	refused("eth0", RD_ADDR_NUMERIC, "a name is not allowed here");
	refused("a b", 0, "not a host name");
	refused("-x..y", 0, "not a host name");
}

static void test_resolve_and_print(void **st)
{
	struct rd_addr a, b;
	char s[RD_ADDR_PORT_STRLEN], why[256];

	(void)st;
	assert_int_equal(rd_addr_parse("198.18.0.1:7471", RD_ADDR_PORT, 0, &a, why, sizeof(why)), 0);
	assert_int_equal(a.ss.ss_family, AF_INET);
	rd_addr_str(&a, true, s, sizeof(s));
	assert_string_equal(s, "198.18.0.1:7471");
	assert_int_equal(rd_addr_parse("[fd00:198:18:0::1]:7471", RD_ADDR_PORT, 0, &a, why, sizeof(why)), 0);
	assert_int_equal(a.ss.ss_family, AF_INET6);
	assert_int_equal(rd_addr_port(&a), 7471);
	rd_addr_str(&a, true, s, sizeof(s));
	assert_string_equal(s, "[fd00:198:18::1]:7471");     /* the canonical spelling */
	rd_addr_str(&a, false, s, sizeof(s));
	assert_string_equal(s, "[fd00:198:18::1]");
	/* the default port where the string has none */
	assert_int_equal(rd_addr_parse("fd00:198:18::2", 0, 7472, &a, why, sizeof(why)), 0);
	assert_int_equal(rd_addr_port(&a), 7472);
	/* a v4-mapped address is its IPv4 host */
	assert_int_equal(rd_addr_parse("[::ffff:198.18.0.3]:1", RD_ADDR_PORT, 0, &a, why, sizeof(why)), 0);
	assert_int_equal(rd_addr_parse("198.18.0.3:2", RD_ADDR_PORT, 0, &b, why, sizeof(why)), 0);
	assert_true(rd_addr_same_host(&a, &b));
	rd_addr_str(&a, false, s, sizeof(s));
	assert_string_equal(s, "198.18.0.3");
	assert_int_equal(rd_addr_parse("198.18.0.4:2", RD_ADDR_PORT, 0, &b, why, sizeof(why)), 0);
	assert_false(rd_addr_same_host(&a, &b));
	/* wildcards: to bind, never to dial or advertise */
	assert_int_equal(rd_addr_parse("[::]:7471", RD_ADDR_PORT | RD_ADDR_PASSIVE, 0, &a, why,
				       sizeof(why)), 0);
	assert_true(rd_addr_is_any(&a));
	assert_int_equal(rd_addr_parse("0.0.0.0:7471", RD_ADDR_PORT, 0, &a, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "wildcard"));
	assert_true(rd_host_is_any("::") && rd_host_is_any("0.0.0.0") && rd_host_is_any("0::0"));
	assert_true(rd_host_is_any("::ffff:0.0.0.0"));
	assert_false(rd_host_is_any("::1") || rd_host_is_any("localhost"));
	assert_int_equal(rd_parse_endpoint("tcp:[::ffff:0.0.0.0]:7471", "tcp", &a), -EINVAL);
	/* a name through getaddrinfo (/etc/hosts: no DNS server needed) */
	assert_int_equal(rd_addr_parse("localhost:9", RD_ADDR_PORT, 0, &a, why, sizeof(why)), 0);
	rd_addr_str(&a, false, s, sizeof(s));
	assert_true(!strcmp(s, "127.0.0.1") || !strcmp(s, "[::1]"));
	assert_int_equal(rd_addr_parse("no-such-host.invalid:9", RD_ADDR_PORT, 0, &a, why, sizeof(why)),
			 -ENOENT);
	assert_non_null(strstr(why, "cannot resolve 'no-such-host.invalid'"));
}

static void test_endpoints(void **st)
{
	struct rd_addr a;
	char s[RD_ADDR_PORT_STRLEN];

	(void)st;
	assert_int_equal(rd_parse_endpoint("tcp:198.18.0.1:7471", "tcp", &a), 0);
	assert_int_equal(rd_parse_endpoint("tcp:[fd00:198:18::1]:7471", "tcp", &a), 0);
	rd_addr_str(&a, true, s, sizeof(s));
	assert_string_equal(s, "[fd00:198:18::1]:7471");
	assert_int_equal(rd_parse_endpoint("verbs:[fd00:198:18::1]:7472", "verbs", &a), 0);
	assert_int_equal(rd_addr_port(&a), 7472);
	/* a record is untrusted: malformed, names (a DNS lookup in the control
	 * thread), wildcards and the wrong scheme are all refused */
	static const char *const bad[] = {
		"tcp:fd00:198:18::1:7471", "tcp:[fd00:198:18::1]", "tcp:[fd00::1:7471",
		"tcp:localhost:7471", "tcp:0.0.0.0:7471", "tcp:[::]:7471", "tcp:198.18.0.1:0",
		"tcp:198.18.0.1:65536", "verbs:198.18.0.1:7471", "tcp198.18.0.1:7471", "tcp:",
		"tcp:[]:1", "local:/run/roshm/roshmd.sock",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (rd_parse_endpoint(bad[i], "tcp", &a) != -EINVAL)
			fail_msg("endpoint '%s' accepted", bad[i]);
}

/* A "::" listener takes an IPv4 client (dual-stack), seen as v4-mapped. */
static void test_dual_stack_listener(void **st)
{
	struct rd_addr a, peer, v4;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	char why[256];
	int lfd, cfd, afd = -1;

	(void)st;
	if (!ipv6_on())
		skip();
	assert_int_equal(rd_addr_parse("[::]:1", RD_ADDR_PORT | RD_ADDR_PASSIVE, 0, &a, why, sizeof(why)), 0);
	rd_addr_set_port(&a, 0);
	lfd = rd_addr_listen(&a, 4);
	assert_true(lfd >= 0);
	a.len = sizeof(a.ss);
	assert_int_equal(getsockname(lfd, (struct sockaddr *)&a.ss, &a.len), 0);
	sa.sin_port = htons(rd_addr_port(&a));
	cfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(cfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	for (int i = 0; i < 100 && afd < 0; i++) {
		peer.len = sizeof(peer.ss);
		afd = accept(lfd, (struct sockaddr *)&peer.ss, &peer.len);
		if (afd < 0)
			usleep(10000);
	}
	assert_true(afd >= 0);
	assert_int_equal(peer.ss.ss_family, AF_INET6);
	assert_int_equal(rd_addr_parse("127.0.0.1:1", RD_ADDR_PORT, 0, &v4, why, sizeof(why)), 0);
	assert_true(rd_addr_same_host(&peer, &v4));
	close(afd);
	close(cfd);
	close(lfd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_forms),
		cmocka_unit_test(test_bad_forms),
		cmocka_unit_test(test_resolve_and_print),
		cmocka_unit_test(test_endpoints),
		cmocka_unit_test(test_dual_stack_listener),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
