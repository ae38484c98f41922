/* SPDX-License-Identifier: MIT */
#ifndef RD_TCP_H
#define RD_TCP_H

#include <sys/uio.h>

#include "transport/transport.h"
#include "roshm/wire.h"
#include "addr.h"

/*
 * A connection of the tcp transport. Outbound connections carry this node's
 * requests to a peer (one per peer node, shared by every local client);
 * inbound connections carry a peer's requests to our regions.
 */
struct rd_tcp_pend {
	struct rd_pend h;             /* the common header (client held while it is used) */
	uint8_t *dst;                 /* where a READ's payload goes: the engine's buffer or the
					 client's arena (kept mapped by the hold) */
	uint64_t hdr_pos;             /* its request header's place in the tx ring (tx_tail then) */
	uint32_t seg;                 /* a WRITE: the tx segment of its payload */
	uint32_t gen;
	bool used;
	bool unsent;                  /* its payload is not all in the socket yet */
	int32_t fail;                 /* 0, or the status it completes with whatever the peer
					 says: -EFAULT (a hole in its ROSHM_SQE_F_LBUF region),
					 -ESTALE (that region closed while it was under way) */
};

/*
 * What a connection sends, in order: spans of its tx ring (headers built in
 * private memory, and an inbound connection's answers) and, between them,
 * WRITE payloads sent straight from where they are (a client's arena, the
 * transaction engine's record), without a copy. A payload's memory stays
 * held (the client's hold, the engine's operation) until its segment is
 * consumed, i.e. the bytes are in the socket.
 */
struct rd_tcp_seg {
	const uint8_t *ext;           /* NULL: the next @len bytes of the tx ring */
	uint32_t len;
	uint32_t pend;                /* ext: the pending entry whose payload it is */
};

struct rd_tcp_conn {
	int fd;
	bool up;
	bool inbound;
	bool blocked;                 /* inbound: a response did not fit in tx */
	bool tx_full;                 /* the socket took less than we had: wait for EPOLLOUT */
	uint32_t ev_mask;             /* what its fd is registered for in the tcp epoll */
	struct rd_peer *peer;         /* outbound */
	char node[ROSHM_NAME_MAX];    /* the node at the other end */
	uint64_t node_h;              /* inbound: rd_node_hash(node), for rd_node_granted */
	/* rx: bytes [rx_start, rx_end) of rx_buf are unparsed */
	uint8_t *rx_buf;
	uint32_t rx_start, rx_end;
	int rx_state;                 /* 0: header, 1: payload */
	uint8_t *rx_dst;              /* payload destination, NULL: discard */
	struct rd_region *rx_rg;      /* inbound: the region rx_dst is in */
	int32_t rx_status;            /* inbound WRITE: its answer, decided at its header */
	uint64_t rx_result;           /* inbound TXN_COMMIT answered at its header: its result */
	uint64_t rx_seq;              /* inbound TXN_COMMIT being staged (rx_rg set): its sequence */
	/* inbound record going into a log slot (TXN_COMMIT, or a raw staging
	 * WRITE): the slot's state word, which must keep this value while the
	 * payload lands (else the slot went to another sequence); NULL: none */
	const uint64_t *rx_word;
	uint64_t rx_expect;
	uint32_t rx_left;
	uint32_t rx_len;              /* the payload's whole length */
	uint8_t rx_hdr[64];           /* the header whose payload is being received */
	/* tx ring: bytes [tx_head, tx_tail) are not in the socket yet */
	uint8_t *tx;
	uint32_t tx_size;             /* power of two */
	uint64_t tx_head, tx_tail;
	/* what to send, in order: segments [seg_head, seg_tail), seg_off bytes
	 * of the first already sent */
	struct rd_tcp_seg *seg;
	uint32_t seg_mask;            /* entries - 1, a power of two */
	uint32_t seg_head, seg_tail, seg_off;
	/* outbound: operations waiting for a response, by tag */
	struct rd_tcp_pend *pend;
	uint32_t npend;
	uint32_t *free_ids;
	uint32_t nfree;
	uint64_t frames_tx, frames_rx, bytes_tx, bytes_rx;
	uint64_t last_rx;             /* inbound: timer cycles of the last read (or the connect) */
	struct rd_tcp_conn *next_dead;  /* inbound: closed, freed after the poll */
};

/* A peer reached with tcp (peer->priv). */
struct rd_dial;
struct rd_tcp_peer {
	struct rd_tcp_conn conn;      /* outbound, poller-owned while up */
	struct rd_dial *dial;         /* control: the dial's state while dialing */
};

static inline struct rd_tcp_conn *rd_tcp_peer_conn(const struct rd_peer *p)
{
	return &((struct rd_tcp_peer *)p->priv)->conn;
}

/* Poller-side state of the tcp transport (rd_tcp_provider.priv). */
struct rd_tcp {
	struct rd_poller *poller;
	struct rd_provider *pv;
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
	const uint8_t *zeros;         /* max_msg zero bytes: what a detached client's payload
					 becomes once its header is on the wire */
	struct iovec *iov;            /* one writev's vector */
};

/* Buffers of a connection (control thread, before it is handed over). */
int rd_tcp_conn_alloc(struct rd_tcp_conn *c, uint32_t max_msg, uint32_t max_inflight, bool inbound);
void rd_tcp_conn_free(struct rd_tcp_conn *c);

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
/* Requester side: connect to "tcp:HOST:PORT" (numeric: see addr.h) and authenticate both ways,
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

/* Control side (tcp_ctl.c): rd_tcp_provider.ctl_priv. */

/* Handshakes in progress at most (tcp_ctl.c tcp_accept). */
#define RD_TCP_ACCEPT_MAX 64

/* Where handshakes come from, counted: an IPv4 address (IPv4-mapped IPv6
 * too), or an IPv6 /64 prefix. */
struct rd_acc_src {
	uint8_t key[16];              /* rd_addr_key, an IPv6 one past its /64 zeroed */
	uint32_t n;                   /* handshakes in progress from it; 0: entry unused */
};

struct rd_acc {
	struct rd_ep_tag tag;         /* RD_EP_PROVIDER */
	int kind;                     /* tcp_ctl.c's */
	struct rd_tcp_accept a;       /* a.deadline_ns: the whole handshake's */
	uint64_t hello_deadline_ns;   /* the peer's hello1 is due by then */
	struct rd_addr from;          /* the peer's address (record check) */
	struct rd_acc_src *src;       /* its source's count (per-source cap, eviction) */
	char addr[RD_ADDR_PORT_STRLEN];
	/* authenticated as @node, whose record this node's registry has not
	 * shown yet: tcp_timer looks again until the handshake's deadline.
	 * Never evicted for a newcomer. */
	bool wait_record;
	char node[ROSHM_NAME_MAX];
	struct rd_acc *next;          /* older */
	struct rd_acc *prev;          /* newer */
};

/* A tcp connect to a peer in progress. */
struct rd_dial {
	struct rd_ep_tag tag;         /* RD_EP_PROVIDER */
	int kind;                     /* tcp_ctl.c's */
	struct rd_tcp_dial d;
	struct rd_peer *peer;
	struct rd_dial *next_dead;    /* ended: on rd_tcp_ctl's dial_dead */
};

struct rd_tcp_ctl {
	struct rd_tcp_secret secret;
	int listen_fd;
	struct rd_acc *accepting;     /* handshakes in progress, newest first */
	struct rd_acc *acc_oldest;    /* ... and the last of them */
	struct rd_acc *acc_dead;      /* evicted: freed after their batch of events */
	struct rd_dial *dial_dead;    /* ended: freed after their batch of events */
	uint32_t naccepting;
	struct rd_acc_src srcs[RD_TCP_ACCEPT_MAX];  /* one per source of a handshake */
	uint64_t refused_peers;       /* handshakes over their caps, evicted or refused */
};

/* Responder side (tcp_resp.c), poller thread. A frame that is not of our
 * protocol (the connection drops). */
bool rd_tcp_req_malformed(const struct rd_tcp *t, const struct roshm_tcp_req *q);
/* Whether @q may touch the region it names: 0 with *out, or the status. */
int rd_tcp_check_req(const struct rd_tcp *t, const struct rd_tcp_conn *c, const struct roshm_tcp_req *q,
		     struct rd_region **out);
/* A grant region's record staged in log slot @sl, about to be committed by
 * @c's node (a TXN_COMMIT's payload, a raw atomic on its state word):
 * whether every write in it lies inside a WRITE grant of that node
 * (rd_node_granted); a record it cannot read is refused too. */
bool rd_tcp_txn_granted(const struct rd_region *rg, const struct rd_tcp_conn *c, const void *sl);
/* Whether @c's node reserved @seq of grant region @rg's log (any node on
 * other regions). */
bool rd_tcp_slot_ours(const struct rd_region *rg, const struct rd_tcp_conn *c, uint64_t seq);
/*
 * A raw FETCH_ADD on @rg's txn_tail (the reserve of the two-round-trip
 * protocol) by @c's node: 0 with *@seq reserved, else nothing done and
 * -EACCES (an addend other than 1) or -EAGAIN: the log is full (txn_tail -
 * applied >= txn_slots, as for a TXN_COMMIT), or, on a grant region, this
 * node's last raw reservation is still neither committed nor given up, or
 * the slot's owner entry still holds an open sequence. A grant region's
 * reservation makes its slot this node's (rd_tcp_slot_ours).
 */
int rd_tcp_tail_reserve(struct rd_region *rg, const struct rd_tcp_conn *c,
			const struct roshm_tcp_req *q, uint64_t *seq);
/* A raw access of a grant region's log by @c's node: 0 or -EACCES. */
int rd_tcp_log_access(const struct rd_region *rg, const struct rd_tcp_conn *c,
		      const struct roshm_tcp_req *q);
/* A raw WRITE into @rg's log (staging): 0 (its slot's state word is set to
 * be watched), -ECANCELED or -EINVAL. */
int rd_tcp_stage_guard(struct rd_tcp_conn *c, const struct rd_region *rg, const struct roshm_tcp_req *q);
/* A TXN_COMMIT's header: where its payload goes and its answer (rx_*). */
void rd_tcp_txn_header(struct rd_tcp *t, struct rd_tcp_conn *c, const struct roshm_tcp_req *q);

static inline uint8_t *rd_tcp_req_base(const struct rd_region *rg, const struct roshm_tcp_req *q)
{
	return (q->flags & ROSHM_TCP_F_RAW) ? (uint8_t *)rg->map : rg->data;
}

/*
 * A record goes into its log slot only while the slot is still its
 * sequence's. Given up on as a hole (its payload slower than txn_abort_ms)
 * and handed to the next sequence, the slot is another record's: the rest
 * is dropped, and the answer is ABORTED (TXN_COMMIT) or -ECANCELED (a raw
 * staging WRITE: its commit CAS fails, the writer replays). The apply that
 * aborts holes runs on this thread, between our reads: checked before
 * every write into the slot. A region unexported meanwhile (rx_rg NULL) is
 * not looked at.
 */
static inline void rd_tcp_rx_guard(struct rd_tcp_conn *c)
{
	if (!c->rx_rg || !c->rx_word || __atomic_load_n(c->rx_word, __ATOMIC_ACQUIRE) == c->rx_expect)
		return;
	c->rx_dst = NULL;
	c->rx_rg = NULL;
	if (c->rx_hdr[0] == ROSHM_OP_TXN_COMMIT) {
		c->rx_status = 0;
		c->rx_result = ROSHM_TCP_TXN(ROSHM_TCP_TXN_ABORTED, c->rx_seq);
	} else {
		c->rx_status = -ECANCELED;
	}
}

#define RX_BUF (256u * 1024)
#define DIRECT_MIN (16u * 1024)      /* payload remainders this big skip the rx buffer */
#define RX_BUDGET (4u << 20)         /* bytes per connection per round */

/* ---- the tx ring (tcp.c and tcp_rx.c) ---- */

static inline uint32_t tx_space(const struct rd_tcp_conn *c)
{
	return c->tx_size - (uint32_t)(c->tx_tail - c->tx_head);
}

static inline uint32_t seg_room(const struct rd_tcp_conn *c)
{
	return c->seg_mask + 1 - (c->seg_tail - c->seg_head);
}

static inline bool tx_pending(const struct rd_tcp_conn *c)
{
	return c->seg_tail != c->seg_head;
}

static inline void ring_write(struct rd_tcp_conn *c, uint64_t at, const void *src, uint32_t len)
{
	uint32_t pos = (uint32_t)at & (c->tx_size - 1);
	uint32_t first = c->tx_size - pos < len ? c->tx_size - pos : len;

	memcpy(c->tx + pos, src, first);
	memcpy(c->tx, (const uint8_t *)src + first, len - first);
}

/* Bytes into the tx ring, sent after everything queued before them. The
 * caller checked tx_space; a ring span extends the last segment when that
 * is one, so that an inbound connection needs one segment only. */
static inline void tx_put(struct rd_tcp_conn *c, const void *src, uint32_t len)
{
	struct rd_tcp_seg *last = &c->seg[(c->seg_tail - 1) & c->seg_mask];

	ring_write(c, c->tx_tail, src, len);
	c->tx_tail += len;
	if (tx_pending(c) && !last->ext) {
		last->len += len;
		return;
	}
	c->seg[c->seg_tail++ & c->seg_mask] = (struct rd_tcp_seg){ .len = len };
}

/* @len bytes at @src, sent in place (outbound WRITE payloads): the caller
 * checked seg_room and keeps @src valid until the segment is consumed. */
static inline uint32_t tx_ext(struct rd_tcp_conn *c, const uint8_t *src, uint32_t len, uint32_t pend)
{
	uint32_t at = c->seg_tail++;

	c->seg[at & c->seg_mask] = (struct rd_tcp_seg){ .ext = src, .len = len, .pend = pend };
	return at;
}

/* tcp.c: an outbound operation is over (the host finishes it, its slot
 * comes back); what a connection waits for in epoll; a connection down
 * (every operation on it fails with @status). */
void rd_tcp_pend_done(struct rd_tcp *t, struct rd_tcp_conn *c, uint32_t id, int32_t status,
		      uint64_t result);
void rd_tcp_conn_events(struct rd_tcp *t, struct rd_tcp_conn *c);
void rd_tcp_conn_down(struct rd_tcp *t, struct rd_tcp_conn *c, int status, const char *why);
/* tcp_rx.c: read and handle what a connection has for us (up to RX_BUDGET). */
void rd_tcp_conn_rx(struct rd_tcp *t, struct rd_tcp_conn *c);

#endif
