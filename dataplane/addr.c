// SPDX-License-Identifier: MIT
/*
 * Addresses: "HOST", "HOST:PORT" and "[IPV6]:PORT" split by hand (the forms
 * are few and the errors must say what is wrong), resolved by getaddrinfo.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "addr.h"

static int __attribute__((format(printf, 3, 4))) bad(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	if (why && whylen) {
		va_start(ap, fmt);
		vsnprintf(why, whylen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static bool is_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* An IPv6 literal, with an optional "%zone". */
static bool v6_literal(const char *h)
{
	char a[INET6_ADDRSTRLEN];
	struct in6_addr x;
	const char *pct = strchr(h, '%');
	size_t n = pct ? (size_t)(pct - h) : strlen(h);

	if (n >= sizeof(a))
		return false;
	memcpy(a, h, n);
	a[n] = 0;
	if (inet_pton(AF_INET6, a, &x) != 1)
		return false;
	if (pct) {
		const char *z = pct + 1;

		if (!*z || strlen(z) >= IF_NAMESIZE)
			return false;
		for (; *z; z++)
			if (!is_alnum(*z) && *z != '-' && *z != '_' && *z != '.')
				return false;
	}
	return true;
}

/* The host part's form: an address literal, or (unless @numeric) a DNS name. */
static int check_host(const char *h, bool numeric, char *why, size_t whylen)
{
	struct in_addr a4;
	bool digits = true;

	if (!*h)
		return bad(why, whylen, "missing host");
	if (strchr(h, ':'))
		return v6_literal(h) ? 0 : bad(why, whylen, "'%s' is not an IPv6 address", h);
	for (const char *p = h; *p; p++)
		digits &= (*p >= '0' && *p <= '9') || *p == '.';
	if (digits)
		return inet_pton(AF_INET, h, &a4) == 1 ? 0 :
		       bad(why, whylen, "'%s' is not an IPv4 address", h);
	if (numeric)
		return bad(why, whylen, "'%s' is not an IP address (a name is not allowed here)", h);
	/* a DNS name: labels of letters, digits, '-' and '_', dot-separated */
	if (strlen(h) > 253 || h[0] == '.' || strstr(h, ".."))
		return bad(why, whylen, "'%s' is not a host name or an IP address", h);
	for (const char *p = h; *p; p++)
		if (!is_alnum(*p) && *p != '-' && *p != '_' && *p != '.')
			return bad(why, whylen, "'%s' is not a host name or an IP address", h);
	return 0;
}

static int parse_port(const char *p, uint16_t *port, char *why, size_t whylen)
{
	unsigned long v = 0;

	if (!*p)
		return bad(why, whylen, "missing port after ':'");
	for (const char *c = p; *c; c++) {
		if (*c < '0' || *c > '9' || c - p >= 5)
			return bad(why, whylen, "port '%s' is not a number from 1 to 65535", p);
		v = v * 10 + (unsigned long)(*c - '0');
	}
	if (v < 1 || v > 65535)
		return bad(why, whylen, "port %lu is out of range 1-65535", v);
	*port = (uint16_t)v;
	return 0;
}

int rd_addr_split(const char *s, unsigned flags, char *host, size_t hostlen, uint16_t *port,
		  char *why, size_t whylen)
{
	bool want_port = flags & RD_ADDR_PORT;
	const char *h, *p = NULL;   /* host, and what follows the port's ':' */
	size_t hl;

	if (!s || !*s)
		return bad(why, whylen, "empty address");
	if (s[0] == '[') {
		const char *close = strchr(s, ']');

		if (!close)
			return bad(why, whylen, "unterminated '[' in '%s' (an IPv6 address with a port "
				   "is written [ADDR]:PORT)", s);
		h = s + 1;
		hl = (size_t)(close - h);
		if (close[1] == ':')
			p = close + 2;
		else if (close[1])
			return bad(why, whylen, "'%s' after ']' in '%s' (expected ':PORT')", close + 1, s);
		if (!memchr(h, ':', hl))
			return bad(why, whylen, "brackets are for IPv6 addresses only: '%s'", s);
	} else {
		const char *c1 = strchr(s, ':');

		if (strchr(s, ']'))
			return bad(why, whylen, "unmatched ']' in '%s'", s);
		h = s;
		hl = strlen(s);
		if (c1 && !strchr(c1 + 1, ':')) {
			/* one colon: HOST:PORT */
			hl = (size_t)(c1 - s);
			p = c1 + 1;
		} else if (c1 && want_port) {
			return bad(why, whylen, "missing port in '%s' (an IPv6 address with a port is "
				   "written [ADDR]:PORT)", s);
		}
	}
	if (hl >= hostlen)
		return bad(why, whylen, "host too long in '%s'", s);
	memcpy(host, h, hl);
	host[hl] = 0;
	if (p && !want_port)
		return bad(why, whylen, "no port here: '%s' (give the address alone)", s);
	if (!p && want_port)
		return bad(why, whylen, "missing port in '%s' (HOST:PORT, [IPV6]:PORT)", s);
	if (p) {
		uint16_t v = 0;
		int ret = parse_port(p, &v, why, whylen);

		if (ret)
			return ret;
		if (port)
			*port = v;
	}
	return check_host(host, flags & RD_ADDR_NUMERIC, why, whylen);
}

int rd_addr_resolve(const char *host, uint16_t port, unsigned flags, struct rd_addr *a, char *why,
		    size_t whylen)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	char ps[8];
	int ret;

	ret = check_host(host, flags & RD_ADDR_NUMERIC, why, whylen);
	if (ret)
		return ret;
	/* (no AI_ADDRCONFIG: it ignores loopback, and a test's network
	 * namespace may have nothing else; getaddrinfo puts the addresses this
	 * host can reach first anyway) */
	if (strchr(host, ':') || strspn(host, "0123456789.") == strlen(host))
		hints.ai_flags |= AI_NUMERICHOST;
	if (flags & RD_ADDR_PASSIVE)
		hints.ai_flags |= AI_PASSIVE;
	snprintf(ps, sizeof(ps), "%u", port);
	ret = getaddrinfo(host, ps, &hints, &res);
	if (ret) {
		const char *e = ret == EAI_SYSTEM ? strerror(errno) : gai_strerror(ret);

		bad(why, whylen, "cannot resolve '%s': %s", host, e);
		return ret == EAI_NONAME || ret == EAI_NODATA || ret == EAI_FAIL ? -ENOENT : -EINVAL;
	}
	if (!res || res->ai_addrlen > sizeof(a->ss)) {
		freeaddrinfo(res);
		return bad(why, whylen, "cannot resolve '%s'", host);
	}
	memset(a, 0, sizeof(*a));
	memcpy(&a->ss, res->ai_addr, res->ai_addrlen);
	a->len = res->ai_addrlen;
	freeaddrinfo(res);
	if (!(flags & RD_ADDR_PASSIVE) && rd_addr_is_any(a))
		return bad(why, whylen, "'%s' is a wildcard address, not one a peer can reach", host);
	return 0;
}

int rd_addr_parse(const char *s, unsigned flags, uint16_t dflt_port, struct rd_addr *a, char *why,
		  size_t whylen)
{
	char host[RD_HOST_MAX];
	uint16_t port = dflt_port;
	int ret = rd_addr_split(s, flags, host, sizeof(host), &port, why, whylen);

	return ret ? ret : rd_addr_resolve(host, port, flags, a, why, whylen);
}

static bool v4_mapped(const struct rd_addr *a, struct in_addr *v4)
{
	const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&a->ss;

	if (a->ss.ss_family != AF_INET6 || !IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr))
		return false;
	memcpy(v4, s6->sin6_addr.s6_addr + 12, 4);
	return true;
}

void rd_addr_str(const struct rd_addr *a, bool port, char *out, size_t len)
{
	char h[INET6_ADDRSTRLEN], zone[IF_NAMESIZE + 1] = "";
	struct in_addr v4;
	const char *fmt = "%s%s";

	if (a->ss.ss_family == AF_INET) {
		inet_ntop(AF_INET, &((const struct sockaddr_in *)&a->ss)->sin_addr, h, sizeof(h));
	} else if (a->ss.ss_family == AF_INET6 && v4_mapped(a, &v4)) {
		inet_ntop(AF_INET, &v4, h, sizeof(h));
	} else if (a->ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&a->ss;
		char ifn[IF_NAMESIZE];

		inet_ntop(AF_INET6, &s6->sin6_addr, h, sizeof(h));
		if (s6->sin6_scope_id) {
			/* by name only where getaddrinfo reads a name back */
			if ((IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr) ||
			     IN6_IS_ADDR_MC_LINKLOCAL(&s6->sin6_addr)) &&
			    if_indextoname(s6->sin6_scope_id, ifn))
				snprintf(zone, sizeof(zone), "%%%s", ifn);
			else
				snprintf(zone, sizeof(zone), "%%%u", s6->sin6_scope_id);
		}
		fmt = "[%s%s]";
	} else {
		snprintf(out, len, "?");
		return;
	}
	int n = snprintf(out, len, fmt, h, zone);

	if (port && n > 0 && (size_t)n < len)
		snprintf(out + n, len - (size_t)n, ":%u", rd_addr_port(a));
}

uint16_t rd_addr_port(const struct rd_addr *a)
{
	if (a->ss.ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)&a->ss)->sin_port);
	if (a->ss.ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)&a->ss)->sin6_port);
	return 0;
}

void rd_addr_set_port(struct rd_addr *a, uint16_t port)
{
	if (a->ss.ss_family == AF_INET)
		((struct sockaddr_in *)&a->ss)->sin_port = htons(port);
	else if (a->ss.ss_family == AF_INET6)
		((struct sockaddr_in6 *)&a->ss)->sin6_port = htons(port);
}

bool rd_addr_is_any(const struct rd_addr *a)
{
	struct in_addr v4;

	if (a->ss.ss_family == AF_INET)
		return ((const struct sockaddr_in *)&a->ss)->sin_addr.s_addr == htonl(INADDR_ANY);
	if (v4_mapped(a, &v4))
		return v4.s_addr == htonl(INADDR_ANY);
	if (a->ss.ss_family == AF_INET6)
		return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)&a->ss)->sin6_addr);
	return false;
}

bool rd_host_is_any(const char *host)
{
	struct in_addr a4;
	struct in6_addr a6;
	static const uint8_t mapped_any[16] = { [10] = 0xff, [11] = 0xff };

	if (inet_pton(AF_INET, host, &a4) == 1)
		return a4.s_addr == htonl(INADDR_ANY);
	return inet_pton(AF_INET6, host, &a6) == 1 &&
	       (IN6_IS_ADDR_UNSPECIFIED(&a6) || !memcmp(&a6, mapped_any, 16));
}

void rd_addr_from_sa(struct rd_addr *a, const struct sockaddr *sa)
{
	memset(a, 0, sizeof(*a));
	if (sa && sa->sa_family == AF_INET)
		a->len = sizeof(struct sockaddr_in);
	else if (sa && sa->sa_family == AF_INET6)
		a->len = sizeof(struct sockaddr_in6);
	if (a->len)
		memcpy(&a->ss, sa, a->len);
}

void rd_addr_key(const struct rd_addr *a, uint8_t key[16])
{
	memset(key, 0, 16);
	if (a->ss.ss_family == AF_INET) {
		key[10] = key[11] = 0xff;
		memcpy(key + 12, &((const struct sockaddr_in *)&a->ss)->sin_addr, 4);
	} else if (a->ss.ss_family == AF_INET6) {
		memcpy(key, &((const struct sockaddr_in6 *)&a->ss)->sin6_addr, 16);
	}
}

bool rd_addr_same_host(const struct rd_addr *a, const struct rd_addr *b)
{
	uint8_t ka[16], kb[16];

	if ((a->ss.ss_family != AF_INET && a->ss.ss_family != AF_INET6) ||
	    (b->ss.ss_family != AF_INET && b->ss.ss_family != AF_INET6))
		return false;
	rd_addr_key(a, ka);
	rd_addr_key(b, kb);
	return !memcmp(ka, kb, 16);
}

int rd_addr_listen(const struct rd_addr *a, int backlog)
{
	int one = 1, zero = 0, fd, ret;

	fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* "::" takes IPv4 too, whatever net.ipv6.bindv6only says */
	if (a->ss.ss_family == AF_INET6 && rd_addr_is_any(a) &&
	    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)) < 0)
		goto err;
	if (bind(fd, (const struct sockaddr *)&a->ss, a->len) < 0 || listen(fd, backlog) < 0)
		goto err;
	return fd;
err:
	ret = -errno;
	close(fd);
	return ret;
}

int rd_parse_endpoint(const char *ep, const char *scheme, struct rd_addr *a)
{
	size_t sl = strlen(scheme);
	char host[RD_HOST_MAX];
	uint16_t port = 0;

	if (strncmp(ep, scheme, sl) || ep[sl] != ':')
		return -EINVAL;
	if (rd_addr_split(ep + sl + 1, RD_ADDR_PORT | RD_ADDR_NUMERIC, host, sizeof(host), &port,
			  NULL, 0) ||
	    rd_addr_resolve(host, port, RD_ADDR_NUMERIC, a, NULL, 0))
		return -EINVAL;
	return 0;
}
