// SPDX-License-Identifier: MIT
/*
 * tcp transport handshake, requester side (dataplane/transport/peer_auth.c):
 * rd_tcp_dial_step after its hello1 went out (state 1) on one end of a
 * non-blocking socketpair; the input is what the "responder" answers
 * (hello2, then whatever follows), written in chunks so that every
 * partial-read path runs.
 *
 * Input: one control byte, then the responder's bytes.
 *   bit 0     sign: replace hello2's MAC by the right one for the node name
 *             it carries (the fuzzer cannot forge HMAC-SHA256; this lets it
 *             reach the authenticated path)
 *   bit 1     close the responder's end after the last byte (EOF paths)
 *   bits 2-7  chunk size - 1 (1..64 bytes per write)
 * Properties: a step returns 0, 1 or an error it documents; it authenticates
 * only a well-formed hello2 with the right MAC and a valid node name, then
 * sends exactly one hello3 with the right MAC and names hello2's node; it
 * never reads past hello2 (what follows is the poller's).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "fuzz.h"
#include "transport/tcp/tcp.h"

#define SELF "fuzz-requester"

static const struct rd_tcp_secret secret = {
	.key = "fuzz-cluster-secret-0123456789abcdef",
	.len = 36,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const size_t h2len = sizeof(struct roshm_tcp_hello2);
	struct rd_tcp_dial d;
	struct roshm_tcp_hello2 h2;
	char node[ROSHM_NAME_MAX];
	uint8_t *peer, rest[256];
	size_t len, chunk, off = 0;
	bool sign, eof;
	int sv[2], ret = 0;

	if (size < 1)
		return 0;
	sign = data[0] & 1;
	eof = data[0] & 2;
	chunk = (size_t)(data[0] >> 2) + 1;
	len = size - 1;
	if (len > 4096)
		return 0;
	peer = malloc(len ? len : 1);
	if (!peer)
		abort();
	memcpy(peer, data + 1, len);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv))
		abort();
	memset(&d, 0, sizeof(d));
	d.fd = sv[0];
	d.state = 1; /* hello1 sent */
	d.h1.magic = ROSHM_TCP_MAGIC;
	d.h1.version = ROSHM_TCP_VERSION;
	memset(d.h1.nonce, 0x5a, sizeof(d.h1.nonce));
	snprintf(d.h1.node, sizeof(d.h1.node), "%s", SELF);
	if (sign && len >= h2len) {
		/* the right MAC for whatever node name the input's hello2 carries */
		memcpy(&h2, peer, h2len);
		rd_peer_mac(&secret, "roshm-srv", d.h1.nonce, h2.nonce, ROSHM_TCP_NONCE, d.h1.node,
			    ROSHM_NAME_MAX, h2.node, ROSHM_NAME_MAX,
			    peer + offsetof(struct roshm_tcp_hello2, mac));
	}
	memset(node, 0, sizeof(node));
	while (ret == 0) {
		size_t n = len - off < chunk ? len - off : chunk;

		if (n) {
			if (write(sv[1], peer + off, n) != (ssize_t)n)
				abort();
			off += n;
		} else if (eof) {
			shutdown(sv[1], SHUT_WR);
			eof = false;
		} else {
			break; /* nothing more will come: the step is left waiting */
		}
		ret = rd_tcp_dial_step(&d, &secret, node);
		if (ret != 0 && ret != 1 && ret != -EPROTO && ret != -EACCES && ret != -ECONNRESET &&
		    ret != -EIO && ret != -EPROTONOSUPPORT)
			fuzz_fail("rd_tcp_dial_step returned %d", ret);
	}
	if (ret == 1) {
		struct roshm_tcp_hello3 h3;
		uint8_t mac[ROSHM_TCP_MAC];
		ssize_t left;

		memcpy(&h2, peer, h2len);
		rd_peer_mac(&secret, "roshm-srv", d.h1.nonce, h2.nonce, ROSHM_TCP_NONCE, d.h1.node,
			    ROSHM_NAME_MAX, h2.node, ROSHM_NAME_MAX, mac);
		if (h2.magic != ROSHM_TCP_MAGIC || h2.version != ROSHM_TCP_VERSION ||
		    memcmp(mac, h2.mac, sizeof(mac)))
			fuzz_fail("authenticated a hello2 without the right MAC");
		if (!memchr(h2.node, 0, sizeof(h2.node)) || strcmp(node, h2.node) || !rd_valid_name(node))
			fuzz_fail("authenticated node '%s', hello2 said '%.64s'", node, h2.node);
		/* exactly one hello3, with the right MAC */
		if (recv(sv[1], &h3, sizeof(h3), MSG_DONTWAIT) != (ssize_t)sizeof(h3))
			fuzz_fail("no complete hello3");
		rd_peer_mac(&secret, "roshm-req", h2.nonce, d.h1.nonce, ROSHM_TCP_NONCE, h2.node,
			    ROSHM_NAME_MAX, d.h1.node, ROSHM_NAME_MAX, mac);
		if (h3.magic != ROSHM_TCP_MAGIC || h3.version != ROSHM_TCP_VERSION ||
		    memcmp(mac, h3.mac, sizeof(mac)))
			fuzz_fail("malformed hello3");
		if (recv(sv[1], rest, sizeof(rest), MSG_DONTWAIT) > 0)
			fuzz_fail("more than one hello3");
		/* bytes after hello2 are still in the socket for the poller */
		left = recv(sv[0], rest, sizeof(rest), MSG_DONTWAIT);
		if (off > h2len && (left != (ssize_t)(off - h2len < sizeof(rest) ? off - h2len : sizeof(rest)) ||
				    memcmp(rest, peer + h2len, (size_t)left)))
			fuzz_fail("the handshake consumed bytes past hello2 (%zd of %zu left)", left,
				  off - h2len);
	}
	close(sv[0]);
	close(sv[1]);
	free(peer);
	return 0;
}
