/* SPDX-License-Identifier: MIT */
/*
 * `verbs` transport (RoCE v2 through rdma-core). The control thread owns
 * the device, the PD, every MR and the connection manager (verbs_cm.c); the
 * poller owns the send side of each connected RC QP (verbs.c): it builds a
 * WR chain per QP during a poll round, posts it with one ibv_post_send at
 * the end of the round, and polls each QP's CQ in bursts.
 */
#ifndef RD_VERBS_H
#define RD_VERBS_H

#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>

#include "transport/transport.h"
#include "transport/tcp/tcp.h"
#include "transport/verbs/verbs_pdata.h"

#define RD_VERBS_REFUSED 4            /* refused rkeys remembered per peer */
#define RD_VERBS_REFUSED_SEC 5        /* ... for at most this long */

/* An operation on a QP's send queue, by wr_id (a running counter). */
struct rd_vpend {
	struct rd_pend h;             /* the common header (client held: the WR uses its arena) */
	struct rd_region *region;     /* held while the NIC may touch it (our own, loopback) */
};

/* One RC QP to a peer node, shared by every local client. */
struct rd_vqp {
	struct rd_peer *peer;
	uint32_t index;               /* among the peer's qps_per_peer */
	struct rdma_cm_id *id;
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	struct ibv_mr *res_mr;
	uint64_t *res;                /* [depth] atomic results land here */
	struct rd_vpend *pend;        /* [depth] by wr_id & mask */
	struct ibv_send_wr *wr;       /* [depth] by wr_id & mask: kept until done (a reset re-posts) */
	struct ibv_sge *sge;          /* [depth] by wr_id & mask */
	uint32_t depth, mask;
	uint32_t head, tail;          /* next to complete, next to submit */
	uint32_t nchain;
	uint32_t since_signal;
	uint32_t max_inline;
	bool up;                      /* poller view */
	/* stats: poller writes, control reads */
	uint64_t wrs, posts, cqes, errors, bytes;
	/* control: connecting it, one CM event at a time (verbs_cm.c) */
	int dstate;                   /* VD_* */
	int phase;                    /* 1: hello (answered by a challenge), 2: proof */
	struct rd_addr dst;
	struct roshm_verbs_hello hello;
	struct rd_vpd chal;              /* the responder's challenge, decoded */
};
enum { VD_IDLE, VD_ADDR, VD_ROUTE, VD_CONN }; /* rd_vqp.dstate */

/* A peer reached with verbs (peer->priv): its RC QPs, poller-owned while up. */
struct rd_verbs_peer {
	struct rd_vqp *vq[RD_VERBS_QPS_MAX];
	uint32_t nvq;
	/* poller: the peer refused one WR (a responder NAK): its QPs are
	 * drained and re-made, the other clients' WRs after the refused one
	 * stay in their slots and are posted again on the new QP */
	bool resetting;
	bool reset_posted;            /* drained: RD_EV_PEER_RESET is with the control thread */
	/* rkeys this peer refused lately: new WRs with one fail here (EACCES)
	 * until the registry says the region is gone, RD_VERBS_REFUSED_SEC at
	 * most (rkeys are reused: the entry expires) */
	struct {
		uint32_t rkey;
		uint64_t until;       /* TSC */
	} refused[RD_VERBS_REFUSED];
	uint32_t nrefused;
	uint64_t resets;              /* stats: resets, WRs posted again */
	uint64_t reposted;
};

static inline struct rd_verbs_peer *rd_vpeer(const struct rd_peer *p)
{
	return p->priv;
}

/* Poller-side state (rd_verbs_provider.priv). */
struct rd_verbs {
	struct rd_provider *pv;
	struct rd_poller *poller;
	uint32_t signal_every;
	uint32_t max_msg;
	struct ibv_comp_channel *comp; /* every requester CQ's events: adaptive idle sleeps on it */
	struct rd_vqp **act;          /* up QPs: (max_peers + loopback) * qps_per_peer */
	uint32_t nact, max_act;
	struct rd_peer **rst;         /* peers resetting: max_peers + loopback */
	uint32_t nrst, max_rst;
	struct {
		const uint8_t *base;
		size_t len;
		uint32_t lkey;
	} mem[2];                     /* the transaction engine's buffers */
};

#define RD_VERBS_CQ_BURST 32

/* The poller side is rd_verbs_provider's dp ops (verbs.c). */

/* Control side (verbs_cm.c). */
#define RD_VERBS_CHAL_MAX 1024
struct rd_control;
struct rd_vchal {
	uint8_t src[16];              /* the hello's source address (IPv4 as ::ffff:a.b.c.d) */
	uint8_t nonce_s[ROSHM_VERBS_NONCE];
	uint8_t nonce_r[ROSHM_VERBS_NONCE];
	char node_r[ROSHM_VERBS_ID + 1];
	uint64_t expires_ns;
	bool used;
};

struct rd_vin {                       /* an accepted (inbound) QP: passive */
	struct rdma_cm_id *id;
	struct ibv_cq *cq;
	char node[ROSHM_VERBS_ID + 1];
	struct rd_vin *next;
};

struct rd_verbs_ctl {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *listen;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mem_mr[2];
	char dev[64];
	uint8_t port;
	int gid_index;
	struct rd_addr addr;          /* ours: the GID's address, transport.verbs.port */
	uint32_t max_qp_rd_atom, max_qp_init_rd_atom, max_msg;
	struct rd_tcp_secret secret;
	struct rd_vchal chal[RD_VERBS_CHAL_MAX];
	uint64_t chal_refused;        /* hellos refused: no free challenge slot for them */
	uint64_t chal_evicted;        /* live challenges dropped for a newcomer (table full) */
	struct rd_vin *inbound;
	struct ibv_comp_channel *comp;
	bool atomic_glob;             /* the NIC's atomics are atomic with the CPU's */
	/* the device's async events (verbs_async.c) */
	union ibv_gid gid;            /* ours at start (gid_index) */
	uint64_t async_events;        /* every one read */
	uint64_t port_downs;          /* IBV_EVENT_PORT_ERR on our port */
	uint64_t qp_errors;           /* QP_FATAL, QP_REQ_ERR, QP_ACCESS_ERR, CQ_ERR */
	bool port_down;               /* our port: down since its last PORT_ERR */
	bool device_fatal;
};

int rd_verbs_ctl_init(struct rd_control *ctl, char *endpoint, size_t eplen);
void rd_verbs_ctl_fini(struct rd_control *ctl);
void rd_verbs_cm_events(struct rd_control *ctl);
/* verbs_async.c: the CM channel and the device's async fd in the control
 * thread's epoll; what either has to say (CM events, async events) */
int rd_verbs_events_init(struct rd_control *ctl);
void rd_verbs_epoll_event(struct rd_control *ctl, void *tag, uint32_t events);
void rd_verbs_status_json(struct rd_control *ctl, struct json_t *o);
/* Start connecting @p's QPs (CM events drive it; rd_peers_dial_done tells
 * the outcome). 0 started or -errno. */
int rd_verbs_dial(struct rd_control *ctl, struct rd_peer *p);
/* Give up a dial (its deadline passed): tear down what it made. */
void rd_verbs_dial_abort(struct rd_control *ctl, struct rd_peer *p);
/* Tear the QPs down (the poller already let go); rd_verbs_peer_free at the end. */
void rd_verbs_peer_release(struct rd_control *ctl, struct rd_peer *p);
void rd_verbs_peer_free(struct rd_control *ctl, struct rd_peer *p);
int rd_verbs_reg_client(struct rd_control *ctl, struct rd_client *c);
void rd_verbs_unreg_client(struct rd_control *ctl, struct rd_client *c);
int rd_verbs_reg_region(struct rd_control *ctl, struct rd_region *rg);
void rd_verbs_unreg_region(struct rd_region *rg);
/* verbs_mr.c: the provider's control ops for memory the NIC reaches */
void rd_verbs_unreg_region_op(struct rd_control *ctl, struct rd_region *rg);
int rd_verbs_reg_grant(struct rd_control *ctl, struct rd_region *rg, struct rd_grant *g,
		       void **nic);
void rd_verbs_unreg_grant(struct rd_control *ctl, void *nic);
/* verbs_cm.c, for verbs_resp.c too: the MAC of a hello/challenge/proof
 * exchange; random bytes (abort without entropy); an inbound QP freed */
void rd_verbs_vmac(const struct rd_tcp_secret *sec, const char *label, const uint8_t *nonce_r,
		   const uint8_t *nonce_s, const char *node_r, const char *node_s, uint8_t *out);
void rd_verbs_rnd(void *p, size_t n);
void rd_verbs_vin_free(struct rd_vin *in);
/* verbs_resp.c: a peer's connect request (hello, then proof): true when @id
 * is kept (accepted), false when the caller destroys it. */
bool rd_verbs_on_request(struct rd_control *ctl, struct rdma_cm_id *id, const void *pdata,
			 size_t plen, uint8_t initiator_depth);

#endif
