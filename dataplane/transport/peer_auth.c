// SPDX-License-Identifier: MIT
/*
 * tcp transport handshake: mutual HMAC-SHA256 challenge over the cluster
 * secret (see roshm/wire.h). Runs in the control thread as two non-blocking
 * state machines driven by its epoll, the requester's (dial) and the
 * responder's (accept), so that a slow, dead or hostile peer never stalls
 * it; their deadlines are kept by the caller.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "transport/tcp/tcp.h"

int rd_tcp_secret_load(struct rd_tcp_secret *s, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f) {
		snprintf(err, errlen, "cluster secret %s: %s", path, strerror(errno));
		return -errno;
	}
	n = fread(s->key, 1, sizeof(s->key), f);
	fclose(f);
	while (n && (s->key[n - 1] == '\n' || s->key[n - 1] == '\r'))
		n--;
	if (n < 16) {
		snprintf(err, errlen, "cluster secret %s: need at least 16 bytes", path);
		return -EINVAL;
	}
	const char *weak = rd_weak_secret(s->key, n);

	if (weak) {
		snprintf(err, errlen, "cluster secret %s: refused: %s", path, weak);
		OPENSSL_cleanse(s->key, sizeof(s->key));
		return -EINVAL;
	}
	s->len = n;
	return 0;
}

void rd_peer_mac(const struct rd_tcp_secret *sec, const char *label, const uint8_t *n1,
		 const uint8_t *n2, size_t nonce_len, const char *node1, size_t node1_w,
		 const char *node2, size_t node2_w, uint8_t *out)
{
	uint8_t msg[16 + 2 * ROSHM_TCP_NONCE + 2 * ROSHM_NAME_MAX];
	unsigned int len = 0;
	size_t o = 16;

	memset(msg, 0, sizeof(msg));
	memcpy(msg, label, strnlen(label, 15));
	memcpy(msg + o, n1, nonce_len);
	o += nonce_len;
	memcpy(msg + o, n2, nonce_len);
	o += nonce_len;
	memcpy(msg + o, node1, strnlen(node1, node1_w - 1));
	o += node1_w;
	memcpy(msg + o, node2, strnlen(node2, node2_w - 1));
	o += node2_w;
	HMAC(EVP_sha256(), sec->key, (int)sec->len, msg, o, out, &len);
}

static void mac(const struct rd_tcp_secret *sec, const char *label, const uint8_t *n1,
		const uint8_t *n2, const char *node1, const char *node2, uint8_t *out)
{
	rd_peer_mac(sec, label, n1, n2, ROSHM_TCP_NONCE, node1, ROSHM_NAME_MAX, node2, ROSHM_NAME_MAX,
		    out);
}

static void tune(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int rd_tcp_dial_start(struct rd_tcp_dial *d, const char *endpoint, const char *self)
{
	struct rd_addr sa;
	int ret;

	memset(d, 0, sizeof(*d));
	d->fd = -1;
	/* numeric: never a DNS lookup in the control thread */
	ret = rd_parse_endpoint(endpoint, "tcp", &sa);
	if (ret)
		return ret;
	d->fd = socket(sa.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (d->fd < 0)
		return -errno;
	if (connect(d->fd, (struct sockaddr *)&sa.ss, sa.len) < 0 && errno != EINPROGRESS) {
		ret = -errno;
		close(d->fd);
		d->fd = -1;
		return ret;
	}
	d->h1.magic = ROSHM_TCP_MAGIC;
	d->h1.version = ROSHM_TCP_VERSION;
	if (getrandom(d->h1.nonce, sizeof(d->h1.nonce), 0) != sizeof(d->h1.nonce)) {
		close(d->fd);
		d->fd = -1;
		return -EIO;
	}
	snprintf(d->h1.node, sizeof(d->h1.node), "%s", self);
	d->want_out = true;
	return 0;
}

int rd_tcp_dial_step(struct rd_tcp_dial *d, const struct rd_tcp_secret *sec, char *peer_node)
{
	struct roshm_tcp_hello2 h2;
	struct roshm_tcp_hello3 h3;
	uint8_t expect[ROSHM_TCP_MAC];

	if (d->state == 0) {
		int err = 0;
		socklen_t el = sizeof(err);

		if (getsockopt(d->fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
			return -errno;
		if (err)
			return err == EINPROGRESS ? 0 : -err;
		tune(d->fd);
		/* 104 bytes into an empty socket buffer: a short write means trouble. */
		if (send(d->fd, &d->h1, sizeof(d->h1), MSG_NOSIGNAL) != (ssize_t)sizeof(d->h1))
			return errno == EAGAIN ? -EIO : -errno;
		d->state = 1;
		d->want_out = false;
	}
	/* exactly hello2: what follows is the poller's */
	while (d->have < sizeof(h2)) {
		ssize_t n = recv(d->fd, d->buf + d->have, sizeof(h2) - d->have, 0);

		if (n == 0)
			return -ECONNRESET;
		if (n < 0)
			return (errno == EAGAIN || errno == EINTR) ? 0 : -errno;
		d->have += (uint32_t)n;
	}
	memcpy(&h2, d->buf, sizeof(h2));
	if (h2.magic == ROSHM_TCP_MAGIC && h2.version != ROSHM_TCP_VERSION)
		return -EPROTONOSUPPORT;
	if (h2.magic != ROSHM_TCP_MAGIC ||
	    !memchr(h2.node, 0, sizeof(h2.node)) || !rd_valid_name(h2.node))
		return -EPROTO;
	mac(sec, "roshm-srv", d->h1.nonce, h2.nonce, d->h1.node, h2.node, expect);
	if (CRYPTO_memcmp(expect, h2.mac, sizeof(expect)))
		return -EACCES; /* the peer does not hold our cluster secret */
	memset(&h3, 0, sizeof(h3));
	h3.magic = ROSHM_TCP_MAGIC;
	h3.version = ROSHM_TCP_VERSION;
	mac(sec, "roshm-req", h2.nonce, d->h1.nonce, h2.node, d->h1.node, h3.mac);
	if (send(d->fd, &h3, sizeof(h3), MSG_NOSIGNAL) != (ssize_t)sizeof(h3))
		return -EIO;
	snprintf(peer_node, ROSHM_NAME_MAX, "%s", h2.node);
	return 1;
}

int rd_tcp_accept_step(struct rd_tcp_accept *a, const char *self, const struct rd_tcp_secret *sec,
		       char *node)
{
	size_t need = a->state == 0 ? sizeof(struct roshm_tcp_hello1) : sizeof(struct roshm_tcp_hello3);

	/* Read exactly what this step needs: bytes after hello3 are frames and
	 * belong to the poller. */
	while (a->have < need) {
		ssize_t n = recv(a->fd, a->buf + a->have, need - a->have, 0);

		if (n == 0)
			return -ECONNRESET;
		if (n < 0)
			return (errno == EAGAIN || errno == EINTR) ? 0 : -errno;
		a->have += (uint32_t)n;
	}
	a->have = 0;
	if (a->state == 0) {
		struct roshm_tcp_hello2 h2;

		memcpy(&a->h1, a->buf, sizeof(a->h1));
		if (a->h1.magic == ROSHM_TCP_MAGIC && a->h1.version != ROSHM_TCP_VERSION)
			return -EPROTONOSUPPORT;
		if (a->h1.magic != ROSHM_TCP_MAGIC ||
		    !memchr(a->h1.node, 0, sizeof(a->h1.node)) || !rd_valid_name(a->h1.node))
			return -EPROTO;
		memset(&h2, 0, sizeof(h2));
		h2.magic = ROSHM_TCP_MAGIC;
		h2.version = ROSHM_TCP_VERSION;
		if (getrandom(a->nonce, sizeof(a->nonce), 0) != sizeof(a->nonce))
			return -EIO;
		memcpy(h2.nonce, a->nonce, sizeof(h2.nonce));
		snprintf(h2.node, sizeof(h2.node), "%s", self);
		mac(sec, "roshm-srv", a->h1.nonce, a->nonce, a->h1.node, h2.node, h2.mac);
		/* 136 bytes into an empty socket buffer: a short write means trouble. */
		if (send(a->fd, &h2, sizeof(h2), MSG_NOSIGNAL) != (ssize_t)sizeof(h2))
			return -EIO;
		a->state = 1;
		return rd_tcp_accept_step(a, self, sec, node);
	}
	struct roshm_tcp_hello3 h3;
	uint8_t expect[ROSHM_TCP_MAC];

	memcpy(&h3, a->buf, sizeof(h3));
	if (h3.magic != ROSHM_TCP_MAGIC || h3.version != ROSHM_TCP_VERSION)
		return -EPROTO;
	mac(sec, "roshm-req", a->nonce, a->h1.nonce, self, a->h1.node, expect);
	if (CRYPTO_memcmp(expect, h3.mac, sizeof(expect)))
		return -EACCES;
	tune(a->fd);
	snprintf(node, ROSHM_NAME_MAX, "%s", a->h1.node);
	return 1;
}
