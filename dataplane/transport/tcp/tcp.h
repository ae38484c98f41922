/* SPDX-License-Identifier: MIT */
#ifndef RD_TCP_H
#define RD_TCP_H

#include "transport/transport.h"
#include "roshm/wire.h"

/* Poller-side state of the tcp transport. */
struct rd_tcp {
	struct rd_transport base;     /* base.priv == this */
	struct rd_poller *poller;
	uint32_t max_msg;
	uint32_t max_inflight;
	int epfd;                     /* every up connection; nested in the poller's epfd */
	struct rd_region **exported;  /* by region id; poller view */
	uint32_t nexported;
	struct rd_tcp_conn **out;     /* up outbound connections: one per peer, max_peers */
	uint32_t nout;
	struct rd_tcp_conn **in;      /* inbound connections: two per peer at most */
	uint32_t nin, max_in;
	struct rd_tcp_conn *dead;     /* inbound ones closed this round, freed after it */
	uint8_t *scratch;             /* discard buffer */
};

int rd_tcp_init(struct rd_tcp *t, struct rd_poller *p, uint32_t max_regions);
void rd_tcp_fini(struct rd_tcp *t);
/* Buffers of a connection (control thread, before it is handed over). */
int rd_tcp_conn_alloc(struct rd_tcp_conn *c, uint32_t max_msg, uint32_t max_inflight, bool inbound);
void rd_tcp_conn_free(struct rd_tcp_conn *c);

/* Poller commands (poller.c's apply_cmd calls these). */
int rd_tcp_peer_up(struct rd_tcp *t, struct rd_peer *peer, int fd);
void rd_tcp_peer_down(struct rd_tcp *t, struct rd_peer *peer, int status, const char *why);
int rd_tcp_inbound_add(struct rd_tcp *t, int fd, const char *node);
void rd_tcp_client_gone(struct rd_tcp *t, struct rd_client *c);
void rd_tcp_export(struct rd_tcp *t, struct rd_region *rg, bool on);
/* Close everything (poller stopped). */
void rd_tcp_close_all(struct rd_tcp *t);

/* Handshake (peer_auth.c), control thread. */
struct rd_tcp_secret {
	uint8_t key[256];
	size_t len;
};
int rd_tcp_secret_load(struct rd_tcp_secret *s, const char *path, char *err, size_t errlen);
/* HMAC-SHA256(secret, label | n1 | n2 | node1 | node2): label zero-padded to
 * 16 bytes, node names to their widths; the tcp and verbs handshakes' MAC. */
void rd_peer_mac(const struct rd_tcp_secret *sec, const char *label, const uint8_t *n1,
		 const uint8_t *n2, size_t nonce_len, const char *node1, size_t node1_w,
		 const char *node2, size_t node2_w, uint8_t *out);
/* "SCHEME:IPV4:PORT" (tcp, verbs) into @sa; -EINVAL when malformed. */
struct sockaddr_in;
int rd_parse_endpoint(const char *ep, const char *scheme, struct sockaddr_in *sa);
/* Requester side: connect to "tcp:ADDR:PORT" and authenticate both ways,
 * step by step as the control thread's epoll says the fd is ready (for
 * writing while want_out, else for reading). */
struct rd_tcp_dial {
	int fd;
	int state;                    /* 0: connecting, 1: hello1 sent, reading hello2 */
	bool want_out;
	uint32_t have;
	struct roshm_tcp_hello1 h1;
	uint8_t buf[sizeof(struct roshm_tcp_hello2)];
};
/* 0 started (fd non-blocking, connecting), or -errno. */
int rd_tcp_dial_start(struct rd_tcp_dial *d, const char *endpoint, const char *self);
/* 1 authenticated (peer's node name in @peer_node; d->fd is the connection),
 * 0 wait for the fd again, -errno failed (-EACCES: the peer failed the
 * challenge). The caller closes d->fd on failure. */
int rd_tcp_dial_step(struct rd_tcp_dial *d, const struct rd_tcp_secret *sec, char *peer_node);

/* Server side: a step-by-step handshake driven by the control thread's epoll. */
struct rd_tcp_accept {
	int fd;
	int state;                    /* 0: want hello1, 1: want hello3 */
	uint32_t have;
	uint8_t buf[sizeof(struct roshm_tcp_hello2)];
	struct roshm_tcp_hello1 h1;
	uint8_t nonce[ROSHM_TCP_NONCE];
	uint64_t deadline_ns;
	struct rd_tcp_accept *next;
};
/* Returns 1 when authenticated (node name in @node), 0 to wait for more, -errno to drop. */
int rd_tcp_accept_step(struct rd_tcp_accept *a, const char *self, const struct rd_tcp_secret *sec,
		       char *node);

extern const struct rd_transport_ops rd_tcp_transport_ops;

#endif
