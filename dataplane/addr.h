/* SPDX-License-Identifier: MIT */
/*
 * Network addresses as roshmd reads and writes them: the config's listen and
 * advertise addresses, ROSHM_ADVERTISE, metrics.listen and the endpoints in
 * registry records ("tcp:HOST:PORT", "verbs:HOST:PORT"). A host is an IPv4
 * address, an IPv6 address (bare where no port follows, in brackets where
 * one may: "[fd00::1]:7471") or, where the caller allows it, a name that
 * getaddrinfo resolves. Names are resolved once, at start-up: an endpoint in
 * a record is always numeric, and dialing one never waits for DNS.
 */
#ifndef RD_ADDR_H
#define RD_ADDR_H

#include <net/if.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Longest host roshmd accepts in its config (a DNS name, or an address). */
#define RD_HOST_MAX 128
/* A numeric host as written: "[" IPv6 "%" zone "]". */
#define RD_ADDR_STRLEN (INET6_ADDRSTRLEN + IF_NAMESIZE + 2)
/* ... with ":PORT". */
#define RD_ADDR_PORT_STRLEN (RD_ADDR_STRLEN + 6)

struct rd_addr {
	struct sockaddr_storage ss;
	socklen_t len;
};

/* rd_addr_split() / rd_addr_resolve() flags */
#define RD_ADDR_PORT 1u      /* "HOST:PORT": a port is required (else none is allowed) */
#define RD_ADDR_NUMERIC 2u   /* an address, never a name (no DNS) */
#define RD_ADDR_PASSIVE 4u   /* for bind(): a wildcard (0.0.0.0, ::) is fine */

/*
 * Split @s into its host (brackets removed, into @host of @hostlen bytes)
 * and, with RD_ADDR_PORT, its port. Accepted: "HOST", "[IPV6]", bare
 * "IPV6"; with RD_ADDR_PORT "V4:PORT", "NAME:PORT", "[IPV6]:PORT". The host
 * is checked for its form (an IPv4 or IPv6 literal, or a DNS name; with
 * RD_ADDR_NUMERIC no name) without any lookup. Returns 0, or -EINVAL with
 * the reason in @why ("missing port", "port 0 is out of range 1-65535",
 * "unterminated '['", ...).
 */
int rd_addr_split(const char *s, unsigned flags, char *host, size_t hostlen, uint16_t *port,
		  char *why, size_t whylen);
/*
 * @host (as rd_addr_split leaves it) and @port through getaddrinfo: the
 * first address it gives. With RD_ADDR_NUMERIC it never asks DNS. Returns 0
 * or -EINVAL / -ENOENT (no such name) with the reason in @why.
 */
int rd_addr_resolve(const char *host, uint16_t port, unsigned flags, struct rd_addr *a, char *why,
		    size_t whylen);
/* rd_addr_split + rd_addr_resolve; @dflt_port when @s has none (no RD_ADDR_PORT). */
int rd_addr_parse(const char *s, unsigned flags, uint16_t dflt_port, struct rd_addr *a, char *why,
		  size_t whylen);
/* "198.18.0.1" or "[fd00::1]", with ":PORT" when @port. A v4-mapped IPv6
 * address prints as IPv4. */
void rd_addr_str(const struct rd_addr *a, bool port, char *out, size_t len);
uint16_t rd_addr_port(const struct rd_addr *a);
void rd_addr_set_port(struct rd_addr *a, uint16_t port);
/* 0.0.0.0 or :: */
bool rd_addr_is_any(const struct rd_addr *a);
/* @host (no brackets) is a wildcard address (0.0.0.0, ::). */
bool rd_host_is_any(const char *host);
/* The same host: IPv4 a.b.c.d and IPv6 ::ffff:a.b.c.d are one. */
bool rd_addr_same_host(const struct rd_addr *a, const struct rd_addr *b);
/* @sa (NULL, or of another family than IPv4/IPv6: an empty address) into @a. */
void rd_addr_from_sa(struct rd_addr *a, const struct sockaddr *sa);
/* The host as 16 bytes (IPv4 as ::ffff:a.b.c.d): a key to count by. */
void rd_addr_key(const struct rd_addr *a, uint8_t key[16]);
/*
 * A non-blocking, close-on-exec TCP listening socket on @a with
 * SO_REUSEADDR; on the IPv6 wildcard "::" dual-stack (IPV6_V6ONLY off: IPv4
 * peers arrive as ::ffff:a.b.c.d). Returns the fd or -errno.
 */
int rd_addr_listen(const struct rd_addr *a, int backlog);
/* "SCHEME:HOST:PORT" (tcp, verbs) into @a, numeric only; -EINVAL when malformed. */
int rd_parse_endpoint(const char *ep, const char *scheme, struct rd_addr *a);

#endif
