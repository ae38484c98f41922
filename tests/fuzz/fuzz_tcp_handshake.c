// SPDX-License-Identifier: MIT
/*
 * tcp transport handshake, responder side (dataplane/transport/peer_auth.c):
 * rd_tcp_accept_step on one end of a non-blocking socketpair, the input
 * written into the other end as the peer's bytes (hello1, then hello3,
 * then whatever follows), in chunks so that every partial-read path runs.
 *
 * Input: one control byte, then the peer's bytes.
 *   bit 0     sign: replace hello3's MAC by the right one, computed from the
 *             hello2 that came back (the fuzzer cannot forge HMAC-SHA256;
 *             this lets it reach the accepting path and what follows)
 *   bit 1     close the peer's end after the last byte (EOF paths)
 *   bits 2-7  chunk size - 1 (1..64 bytes per write)
 * Properties: hello2 is well-formed and carries the right MAC; a step never
 * reads past hello3 (the bytes after it belong to the poller); it accepts
 * only with the right MAC and names the node of hello1.
 *
 * The requester side (rd_tcp_connect) is not fuzzed: it takes a
 * "tcp:IPv4:port" endpoint and opens its own TCP socket, so its checks of
 * hello2 cannot be reached without a TCP connection and a second thread.
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

#define SELF "fuzz-responder"

static const struct rd_tcp_secret secret = {
	.key = "fuzz-cluster-secret-0123456789abcdef",
	.len = 36,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const size_t h1 = sizeof(struct roshm_tcp_hello1), h3 = sizeof(struct roshm_tcp_hello3);
	struct rd_tcp_accept a;
	struct roshm_tcp_hello1 hello1;
	struct roshm_tcp_hello2 hello2;
	char node[ROSHM_NAME_MAX];
	uint8_t *peer, rest[256];
	size_t len, chunk, off = 0;
	bool sign, eof, got_h2 = false;
	int sv[2], ret = 0;

	if (size < 1)
		return 0;
	sign = data[0] & 1;
	eof = data[0] & 2;
	chunk = (size_t)(data[0] >> 2) + 1;
	len = size - 1;
	if (len > 4096)
		return 0; /* beyond what a socket buffer takes without a reader */
	peer = malloc(len ? len : 1);
	if (!peer)
		abort();
	memcpy(peer, data + 1, len);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv))
		abort();
	memset(&a, 0, sizeof(a));
	a.fd = sv[0];
	memset(node, 0, sizeof(node));
	while (ret == 0) {
		size_t n = len - off < chunk ? len - off : chunk;

		/* a chunk never straddles the end of hello1: hello2 must be back
		 * before hello3 can be signed */
		if (off < h1 && off + n > h1)
			n = h1 - off;
		if (sign && got_h2 && off <= h1 + 8 && off + n > h1 + 8 && len >= h1 + h3) {
			/* hello3's MAC goes out in full, right */
			rd_peer_mac(&secret, "roshm-req", hello2.nonce, hello1.nonce, ROSHM_TCP_NONCE,
				    SELF, ROSHM_NAME_MAX, hello1.node, ROSHM_NAME_MAX,
				    peer + h1 + offsetof(struct roshm_tcp_hello3, mac));
		}
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
		int st_before = a.state;

		ret = rd_tcp_accept_step(&a, SELF, &secret, node);
		if (ret != 0 && ret != 1 && ret != -EPROTO && ret != -EACCES && ret != -ECONNRESET &&
		    ret != -EPROTONOSUPPORT)
			fuzz_fail("rd_tcp_accept_step returned %d", ret);
		if (st_before == 0 && a.state == 1 && !got_h2) {
			/* hello1 was taken: hello2 is waiting for us, well-formed */
			uint8_t mac[ROSHM_TCP_MAC];

			if (read(sv[1], &hello2, sizeof(hello2)) != (ssize_t)sizeof(hello2))
				fuzz_fail("no complete hello2 after a good hello1");
			memcpy(&hello1, peer, h1);
			if (hello2.magic != ROSHM_TCP_MAGIC || hello2.version != ROSHM_TCP_VERSION ||
			    strcmp(hello2.node, SELF))
				fuzz_fail("malformed hello2");
			rd_peer_mac(&secret, "roshm-srv", hello1.nonce, hello2.nonce, ROSHM_TCP_NONCE,
				    hello1.node, ROSHM_NAME_MAX, hello2.node, ROSHM_NAME_MAX, mac);
			if (memcmp(mac, hello2.mac, sizeof(mac)))
				fuzz_fail("hello2 carries a wrong MAC");
			got_h2 = true;
		}
	}
	if (ret == 1) {
		/* accepted: the MAC was right, the node is hello1's, and every byte
		 * after hello3 is still in the socket for the poller */
		struct roshm_tcp_hello3 x;
		uint8_t mac[ROSHM_TCP_MAC];
		ssize_t left;

		memcpy(&x, peer + h1, sizeof(x));
		rd_peer_mac(&secret, "roshm-req", hello2.nonce, hello1.nonce, ROSHM_TCP_NONCE, SELF,
			    ROSHM_NAME_MAX, hello1.node, ROSHM_NAME_MAX, mac);
		if (!got_h2 || memcmp(mac, x.mac, sizeof(mac)))
			fuzz_fail("accepted without the right MAC");
		if (strcmp(node, hello1.node) || !rd_valid_name(node))
			fuzz_fail("accepted node '%s', hello1 said '%.64s'", node, hello1.node);
		left = recv(sv[0], rest, sizeof(rest), 0);
		if (off > h1 + h3 && (left != (ssize_t)(off - h1 - h3 < sizeof(rest) ? off - h1 - h3 : sizeof(rest)) ||
				       memcmp(rest, peer + h1 + h3, (size_t)left)))
			fuzz_fail("the handshake consumed bytes past hello3 (%zd of %zu left)", left, off - h1 - h3);
	}
	close(sv[0]);
	close(sv[1]);
	free(peer);
	return 0;
}
