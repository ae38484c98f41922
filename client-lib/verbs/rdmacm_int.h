/* SPDX-License-Identifier: MIT */
/*
 * The user-space RDMA CM of libroshm-verbs (rdmacm*.c): its state and what
 * its parts call of each other. Not installed; every rc_* symbol stays
 * inside librdmacm.so.1 (librdmacm.map).
 * - rdmacm.c: addresses, the device, event channels and their events, the
 *   ids' sockets and messages, QP attributes;
 * - rdmacm_proto.c: the protocol as it comes in (REQ, REP, REJ, RTU, DREQ)
 *   on a channel's sockets;
 * - rdmacm_id.c: the rdma_cm_id calls (create, bind, resolve, listen,
 *   connect, accept, reject, disconnect, destroy);
 * - rdmacm_api.c: the event channel and event calls, QPs, the rest of
 *   librdmacm's interface, and the synchronous endpoints;
 * - rdmacm_mcast.c: multicast groups of UD ids.
 */
#ifndef RDMACM_INT_H
#define RDMACM_INT_H

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "rdmacm_wire.h"

#define RC_EXPORT __attribute__((visibility("default")))

/* The CM's own TCP and UDP sockets come from the kernel directly: under
 * rdma-core's librspreload (LD_PRELOAD), socket() would make them rsockets,
 * which run over this very CM. */
#include <sys/syscall.h>
static inline int rc_socket(int family, int type)
{
	return (int)syscall(SYS_socket, family, type, 0);
}
#define RC_DEVICE "roshm0"
#define RC_MAX_PENDING 64          /* accepted sockets still without a REQ, per listener */
#define RC_MAX_BACKLOG 1024        /* rdma_listen's backlog: CONNECT_REQUESTs not yet taken */
#define RC_TIMEOUT_MS 30000        /* REQ -> REP, REP -> RTU, accept -> REQ */
#define RC_REJ_CONSUMER 28         /* IB_CM_REJ_CONSUMER_DEFINED */
#define RC_REJ_NO_LISTENER 8       /* IB_CM_REJ_INVALID_SERVICE_ID */
#define RC_REJ_TRANSPORT 9         /* IB_CM_REJ_INVALID_TRANSPORT_TYPE: RC against XRC */
#define RC_REJ_VENDOR 35           /* IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED */
#define RC_MC_MAX 16               /* groups an id joins (a QP: RV_MC_QP) */

_Static_assert(RC_WIRE_QPT_RC == IBV_QPT_RC, "wire qp type");
_Static_assert(RC_WIRE_QPT_UD == IBV_QPT_UD, "wire qp type");
_Static_assert(RC_WIRE_QPT_XRC_SEND == IBV_QPT_XRC_SEND, "wire qp type");
_Static_assert(RC_WIRE_QPT_XRC_RECV == IBV_QPT_XRC_RECV, "wire qp type");
#define RC_SIDR_UNSUPPORTED 1      /* IB_SIDR_UNSUPPORTED: no listener */
#define RC_SIDR_REJECT 2           /* IB_SIDR_REJECT */

enum rc_state {
	RC_IDLE,
	RC_BOUND,
	RC_LISTEN,
	RC_ADDR_RESOLVED,
	RC_ROUTE_RESOLVED,
	RC_CONNECTING,     /* active: TCP connect in progress, REQ ready */
	RC_REQ_SENT,       /* active: waiting for REP */
	RC_REP_RCVD,       /* active without QP: CONNECT_RESPONSE given, waiting for rdma_establish */
	RC_HIDDEN,         /* passive: accepted socket, no whole REQ yet; the application does not know it */
	RC_REQ_RCVD,       /* passive: CONNECT_REQUEST given */
	RC_REP_SENT,       /* passive: accepted, waiting for RTU */
	RC_CONNECTED,
	RC_CLOSED,         /* disconnected or failed: nothing left on the wire */
};

/* What an entry of a channel's epoll set points at. */
enum rc_src_kind { RC_SRC_QUEUE, RC_SRC_TIMER, RC_SRC_ID };
struct rc_src {
	enum rc_src_kind kind;
};

struct rc_evt;
struct rc_id;

struct rc_chan {
	struct rdma_event_channel ch;   /* ch.fd: the epoll set */
	struct rc_src queue_src, timer_src;
	int efd;                        /* readable while events wait */
	int tfd;                        /* the earliest deadline of its ids */
	struct rc_evt *head, *tail;
	struct rc_id *ids;              /* every id on it, hidden ones too */
	bool dead;                      /* destroyed while ids remained: freed with the last */
};

struct rc_id {
	struct rdma_cm_id id;
	struct rc_src src;
	struct rc_id *cnext, *cprev;    /* the channel's list */
	struct rc_chan *ch;
	enum rc_state state;
	bool sync;                      /* created without a channel: calls wait for their event */
	bool destroyed;
	unsigned refs;                  /* the application's, and one per event naming it */
	int fd;                         /* listening or connection socket */
	uint32_t ep_events;             /* registered with the channel's epoll (0: not) */
	struct rc_id *listener;         /* while hidden: its listener */
	unsigned npending;              /* listener: hidden connections */
	unsigned backlog, nqueued;      /* listener: CONNECT_REQUESTs not yet taken, at most backlog */
	uint64_t deadline;              /* CLOCK_MONOTONIC ms, 0: none */
	uint32_t rlen;
	uint8_t rbuf[RC_WIRE_MAX];
	uint32_t txlen;                 /* REQ waiting for the TCP connect */
	uint8_t txbuf[RC_WIRE_MAX];
	struct rc_msg peer;             /* the peer's REQ or REP */
	bool have_peer;
	bool have_psn;
	uint32_t psn;
	uint8_t resp_res, init_depth, retry_count, rnr_retry_count;
	int sgid_index;
	uint8_t tos, ack_timeout;
	bool ack_timeout_set;
	int afonly;                     /* -1: not set */
	struct ibv_qp_init_attr *ep_attr;   /* rdma_create_ep, passive: QPs of rdma_get_request */
	bool xsend_flip;                /* an RC id made XRC_SEND by rdma_create_qp */
	unsigned made_cqs;              /* RC_MADE_*: the id's CQs librdmacm made (rdmacm_api.c) */
	/* multicast groups joined (rdmacm_mcast.c) */
	struct rc_mc { union ibv_gid gid; bool attached; } mc[RC_MC_MAX];
	int nmc;
	uint8_t connect_len;
	uint8_t connect_pd[RC_PD_REQ];  /* rdma_addrinfo.ai_connect, sent before conn_param's */
	struct ibv_ece local_ece;
	/* active: the QPN its REQ named, on the process's list of those
	 * (rc_active_*: a REP that names one is refused) */
	bool active_listed;
	uint32_t req_qpn;
	struct rc_id *anext, *aprev;
	/* a loopback of our own (rc_peer_claim_ok): an active id's random
	 * cookie; a passive id, the cookie of the active id of ours whose REQ
	 * it took over that id's own connection; the active id, the QPN our
	 * passive id answered it with */
	uint64_t cookie, loop_cookie;
	uint32_t loop_qpn;
};

struct rc_evt {
	struct rdma_cm_event ev;
	struct rc_evt *next;
	struct rc_id *id, *listen;      /* each holds a reference */
	bool counted;                   /* a CONNECT_REQUEST in its listener's nqueued */
	uint8_t pd[RC_PD_REP];
};

extern pthread_mutex_t rc_lock;
/* rdmacm.c, lock held: the QPNs our active ids sent in their REQs */
void rc_active_add(struct rc_id *i, uint32_t qpn);
void rc_active_del(struct rc_id *i);
bool rc_active_qpn(uint32_t qpn);
bool rc_peer_claim_ok(struct rc_id *i, const struct rc_msg *m, bool rep);
void rc_loop_rep(const struct rc_id *i, uint32_t qpn);
bool rc_loop_ok(const struct rc_id *i);
/* libroshm-verbs' (recv.c): is @qpn a QP of this process, connected to @dest? */
bool roshm_verbs_qpn_ours(uint32_t qpn, uint32_t *dest);

/* The one device, opened on first need and kept for the process (like
 * librdmacm, which never closes its devices' contexts). */
struct rc_dev {
	struct ibv_context *verbs;
	struct ibv_pd *pd;
	struct ibv_xrcd *xrcd;   /* XRC QPs and SRQs given no domain: rc_dev_xrcd() */
	uint8_t max_resp, max_init;
	uint16_t lid;
	uint8_t mtu;
	int gid_len;
};
extern struct rc_dev rc_dev;

int rc_err(int e);
uint64_t rc_now_ms(void);
uint64_t rc_timeout(void);
socklen_t rc_sa_len(const struct sockaddr *sa);
uint16_t rc_sa_port(const struct sockaddr *sa);
bool rc_sa_any(const struct sockaddr *sa);
bool rc_sa_loopback(const struct sockaddr *sa);
void rc_sa_unmap(struct sockaddr_storage *ss);
void rc_sa_gid(const struct sockaddr *sa, union ibv_gid *g);
bool rc_sa_mc(const struct sockaddr *sa);
int rc_dev_get(void);
struct ibv_xrcd *rc_dev_xrcd(void);
int rc_id_attach(struct rc_id *i);
void rc_chan_free(struct rc_chan *c);
struct rc_chan *rc_chan_new(void);
struct rc_chan *rc_to_chan(struct rdma_event_channel *ch);
struct rc_id *rc_to_id(struct rdma_cm_id *id);
void rc_chan_link(struct rc_chan *c, struct rc_id *i);
void rc_chan_unlink(struct rc_id *i);
bool rc_chan_reap(struct rc_chan *c);
void rc_chan_arm(struct rc_chan *c);
void rc_evt_free(struct rc_evt *e);
void rc_efd_clear(int fd);
void rc_chan_push(struct rc_chan *c, struct rc_evt *e);
struct rc_evt *rc_chan_pop(struct rc_chan *c);
void rc_id_put(struct rc_id *i);
struct rc_id *rc_id_new(struct rc_chan *c, void *context, enum rdma_port_space ps,
			    enum ibv_qp_type qp_type);
void rc_id_watch(struct rc_id *i, uint32_t events);
void rc_id_close_fd(struct rc_id *i);
struct rc_evt *rc_evt_new(struct rc_id *i, enum rdma_cm_event_type type, int status);
void rc_queue_evt(struct rc_id *i, enum rdma_cm_event_type type, int status);
void rc_evt_conn(struct rc_evt *e, const struct rc_msg *m, uint8_t report_len);
void rc_evt_ud(struct rc_evt *e, struct rc_id *i, const struct rc_msg *m);
int rc_id_send(struct rc_id *i, const struct rc_msg *m);
void rc_send_simple(struct rc_id *i, uint8_t type, uint32_t reason);
void rc_qp_to_err(struct rc_id *i);
void rc_conn_end(struct rc_id *i, enum rdma_cm_event_type type, int status);
void rc_refused(struct rc_id *i);
void rc_id_destroy(struct rc_id *i);
void rc_hidden_drop(struct rc_id *i);
int rc_init_qp_attr(struct rc_id *i, struct ibv_qp_attr *a, int *mask);
int rc_qp_connect(struct rc_id *i);
uint32_t rc_new_psn(void);
void rc_local_conn(struct rc_id *i, struct rc_msg *m, uint8_t type, uint32_t qpn, uint8_t srq);
void rc_chan_process(struct rc_chan *c);
void rc_sock_tos(int fd, int family, uint8_t tos);
int rc_id_socket(struct rc_id *i, int family);
void rc_chan_purge(struct rc_chan *c, struct rc_id *i);
int rc_id_complete(struct rc_id *i);
void rc_mc_leave(struct rc_id *i, int k);

#endif
