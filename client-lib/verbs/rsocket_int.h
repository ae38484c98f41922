/* SPDX-License-Identifier: MIT */
/*
 * rsockets of libroshm-verbs (rsocket.c: descriptors, connections, close;
 * rsocket_io.c: the data path, rpoll, send and receive; rsocket_opt.c:
 * names, options, fcntl): the protocol, the rsocket and what the three
 * files call of each other. Not installed; nothing here is exported but
 * the RS_EXPORT entry points. See rsocket.c for the design.
 */
#ifndef RSOCKET_INT_H
#define RSOCKET_INT_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

#include "rsocket_wire.h"

#define RS_EXPORT __attribute__((visibility("default")))

#define RS_SEG_DEFAULT (16u << 10)
#define RS_SLOTS_MIN 4u
#define RS_BUF_DEFAULT (256u << 10)
#define RS_BUF_MAX (16u << 20)
#define RS_WR_DATA (1ull << 32)
#define RS_WR_CTRL (2ull << 32)
#define RS_SPIN_NS 20000ull
#define RS_CLOSE_MS 2000
#define RS_CM_MS 60000
#define RS_POLL_BATCHES 8             /* x 16 completions per look: a flood cannot hold a caller */
/* rs_wait's own events (rs_revents), beyond poll(2)'s: a riowrite may go
 * (a slot, no data credit needed), a control message may go (riomap) */
#define RS_EV_WRITE ((short)0x4000)
#define RS_EV_CTRL ((short)0x8000)

enum rs_state { RS_NEW, RS_CONNECTING, RS_LISTEN, RS_CONN, RS_DEAD };

struct rs_rx {
	uint32_t slot, len;
};

/* a sleeper's eventfd, on the list of each rsocket it sleeps on */
struct rs_waiter {
	int fd;
	struct rs_waiter *next;
};

/* a connection request a listener took in, for raccept */
#define RS_REQS 32
struct rs_req {
	struct rdma_cm_id *id;
	uint8_t pd_len;
	uint8_t pd[64];
};

struct rs_dg;                         /* rsocket_dgram.c */

struct rs {
	int fd;
	struct rs_dg *dg;             /* a datagram rsocket's (its fd is a UDP socket) */
	int ref;                      /* the table's, and each call's */
	pthread_mutex_t lock;
	enum rs_state state;
	int fl;                       /* O_NONBLOCK */
	int err;                      /* why the connection broke (0: it did not) */
	bool broken, rx_fin, peer_gone, tx_shut, rd_shut, fin_sent, closed;
	bool data_failed;             /* a DATA or WRITE of ours completed in error (not flushed) */
	struct rs_waiter *wl;
	struct rs_req *reqs;          /* a listener's, RS_REQS of them */
	uint32_t req_head, req_tail;
	struct rdma_event_channel *cmch;
	struct rdma_cm_id *id;
	struct ibv_comp_channel *cch;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf;                 /* ntx send slots, then nrq receive slots */
	uint32_t seg, ntx, nrx, nrq;  /* nrq = nrx data + RS_CTRL control RECVs */
	uint32_t peer_seg, peer_nrx;
	uint32_t credits, ctrl_credits, owed, ctrl_owed;
	uint32_t tx_head, tx_tail, sq_busy, sq_max;
	struct rs_rx *rx;             /* nrq entries: slots with data, in order */
	uint32_t rx_head, rx_tail, rx_off;
	/* riomap: our buffers the peer may riowrite (rsocket_iomap.c), and
	 * the peer's, as its IOMAP messages said */
	struct rs_lmap {
		struct rs_iomap m;    /* host order */
		void *addr;
		struct ibv_mr *mr;
	} lmap[RS_IOMAPS];
	struct rs_iomap rmap[RS_IOMAPS];
	uint32_t nlmap, nrmap;
	/* options */
	int sndbuf, rcvbuf, sqsize, rqsize, inl, nodelay, keepalive, keepidle, reuse, v6only, iomapsize;
	struct linger linger;
};

/* rsocket.c */
struct rs *rs_new(void);
int rs_publish(struct rs *rs);
struct rs *rs_ref(int fd, bool closed_too);
struct rs *rs_get(int fd);
bool rs_is(int fd);
void rs_put(struct rs *rs);
int rs_fail(int e);
int rs_put_fail(struct rs *rs, int e);
uint64_t rs_now_ns(void);
void rs_kick(struct rs *rs);
int rs_post_recv(struct rs *rs, uint32_t slot);
int rs_verbs_bufs(struct rs *rs, struct ibv_context *v, size_t size, int cqe);

/* rsocket_io.c */
void rs_break(struct rs *rs, int e);
int rs_post_send(struct rs *rs, uint32_t type, const void *data, uint32_t len);
bool rs_can_write(const struct rs *rs);
bool rs_can_ctrl(const struct rs *rs);
int rs_wait(struct rs *rs, short events, int ms);
int rs_tx_err(const struct rs *rs);
int rs_block(struct rs *rs, int flags, short events);
void rs_progress(struct rs *rs, bool cm);
void rs_listen_pull(struct rs *ls);
void rs_drain_events(struct rs *rs);

/* rsocket_dgram.c: the datagram rsocket's calls (an errno, or -1 with
 * errno for the ssize_t ones; those take the lock themselves) */
int rs_dg_socket(int domain, int type);
void rs_dg_free(struct rs *rs);
int rs_dg_bind(struct rs *rs, const struct sockaddr *a, socklen_t l);
int rs_dg_connect(struct rs *rs, const struct sockaddr *a, socklen_t l);
int rs_dg_name(struct rs *rs, struct sockaddr *a, socklen_t *l, bool peer);
int rs_dg_shutdown(struct rs *rs, int how);
void rs_dg_close(struct rs *rs);
short rs_dg_revents(struct rs *rs, short events);
int rs_dg_pollfds(struct rs *rs, struct pollfd *pf);
ssize_t rs_dg_send(struct rs *rs, const struct iovec *v, int n, int flags,
		   const struct sockaddr *to, socklen_t tolen);
ssize_t rs_dg_recv(struct rs *rs, const struct iovec *v, int n, int flags, struct sockaddr *a,
		   socklen_t *l, int *mflags);

#endif
