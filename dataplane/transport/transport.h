/* SPDX-License-Identifier: MIT */
/*
 * Transport providers: one interface for `local` (same node), `tcp` and
 * `verbs` (other nodes). A provider is a scheme ("tcp:", "verbs:"), a table
 * of poller operations (the data path: submit, flush, poll, ...) and a table
 * of control operations (connections, memory registration, peer state);
 * a NULL entry means the provider needs no such step.
 *
 * The poller owns one network provider (tcp or verbs, whichever the config
 * enables) besides `local`; every region points at the provider that reaches
 * it (rg->xport), every peer at the one that connects it (peer->prov).
 *
 * One way back: an operation a provider queued carries a struct rd_pend
 * header (first in the provider's own pending entry). The provider finishes
 * it with pv->done(pv, pend, status, result): @result is the provider's raw
 * value (the old value of an atomic); the poller turns it into what the
 * client sees (the byte count for WRITE/READ), routes it to the transaction
 * engine or to the client's CQ, returns the tenant's share of the peer and
 * the client hold, and counts the completion and its latency. Events for
 * the control thread (a peer lost, an inbound connection closed) go through
 * pv->event().
 */
#ifndef RD_TRANSPORT_H
#define RD_TRANSPORT_H

#include <stdint.h>
#include <string.h>
#include "roshmd.h"
#include "roshm/dma.h"
#ifdef ROSHM_DMA_ASAN
#include <sanitizer/asan_interface.h>
#endif

struct rd_txn;
struct rd_control;
struct json_t;

struct rd_op {
	struct rd_client *client;   /* NULL for roshmd's own operations */
	struct rd_region *region;
	struct roshm_sqe sqe;       /* validated copy */
	/* roshmd's own operations (transactions): */
	struct rd_txn *txn;         /* completion goes to the transaction engine */
	bool raw;                   /* sqe.off is from the region start (header, log) */
	const uint8_t *src;         /* WRITE source instead of the client's arena */
	uint8_t *dst;               /* READ destination instead of the client's arena */
	/* A client's ROSHM_SQE_F_LBUF: the region of its own that src or dst
	 * points into (held by the operation until it is done), else NULL */
	struct rd_region *lbuf;
	bool again;                 /* TXN_COMMIT: an earlier attempt's outcome was lost */
	uint32_t nic_rkey;          /* a client's: its handle's nic_rkey (0: the region's) */
	int32_t status;
	uint64_t result;
};

/* The common header of an operation a provider queued (struct rd_op minus
 * what only submit needs). Filled by rd_pend_start(). */
struct rd_pend {
	struct rd_client *client;   /* held (dp_refs) until done; NULL: roshmd's own */
	struct rd_txn *txn;         /* the transaction engine's operation, or NULL */
	struct rd_peer *peer;       /* whose per-tenant share it counts in */
	struct rd_region *lbuf;     /* the client's region it reads or fills, held; or NULL */
	uint64_t user_data;
	uint64_t tsc;               /* submitted at */
	uint32_t len;
	uint8_t opcode;
	int16_t tidx;               /* the client's tenant, -1: none */
};

/* WRITE and READ move bytes (their result is the byte count); atomics
 * return the old value. */
static inline bool rd_op_moves_bytes(uint8_t opcode)
{
	return opcode == ROSHM_OP_WRITE || opcode == ROSHM_OP_READ;
}

/* roshm_dma_copy for roshmd: bytes into a region or a client's buffer land
 * as a NIC's DMA lands them (roshm/dma.h: an application may poll the last
 * byte of its buffer). Under ASan its copies are not instrumented (a
 * client's memory is the client's), but roshmd's own buffers stay checked:
 * a copy that would touch poisoned memory goes by memmove, which reports
 * it. Regions and arenas are mappings ASan never poisons. */
static inline void rd_dma_copy(uint8_t *dst, const uint8_t *src, uint32_t len)
{
#ifdef ROSHM_DMA_ASAN
	if (__asan_region_is_poisoned((void *)(uintptr_t)src, len) ||
	    __asan_region_is_poisoned(dst, len)) {
		memmove(dst, src, len);
		return;
	}
#endif
	roshm_dma_copy(dst, src, len);
}

/* rd_dma_copy, or memmove where the ranges overlap: with ROSHM_SQE_F_LBUF a
 * client's own region may be both, and a copy onto itself is as undefined
 * in its order as a NIC's. */
static inline void rd_dma_move(uint8_t *dst, const uint8_t *src, uint32_t len)
{
	if (dst < src + len && src < dst + len)
		memmove(dst, src, len);
	else
		rd_dma_copy(dst, src, len);
}

/* A local WRITE (@buf into the region at @region) or READ (the other way):
 * the one copy of the local transport (rd_local_exec, and the poller's own
 * path for small ones in client_round). */
static inline void rd_local_copy(uint8_t opcode, uint8_t *region, uint8_t *buf, uint32_t len)
{
	if (opcode == ROSHM_OP_WRITE)
		rd_dma_move(region, buf, len);
	else
		rd_dma_move(buf, region, len);
}

/* Whether a raw (region-relative) access touches only what the transaction
 * protocol needs: txn_tail, slot state words, staged slot bytes. Where and
 * with what: the tcp responder's check of a peer's raw request (a raw
 * operation of the local transport is this roshmd's own engine's). What a
 * FETCH_ADD on txn_tail may add and when it may reserve is
 * rd_tcp_tail_reserve's. */
bool rd_raw_access_ok(const struct rd_region *rg, uint8_t opcode, uint64_t off, uint32_t len);

/* submit() results */
#define RD_OP_QUEUED 0   /* pv->done() comes later (in a poll or a peer_down) */
#define RD_OP_DONE 1     /* finished now: op->status, op->result set */
/* -EBUSY: no room right now (send queue, tx ring, the tenant's share of the
 * peer): nothing was taken; the SQE stays in its ring, a transaction step
 * is retried next round. A provider returns nothing else. */

/* What an event of the control thread's epoll points at (a provider adds
 * its own fds with RD_EP_PROVIDER: cp->epoll_event gets them). */
enum rd_ep_kind { RD_EP_LISTEN, RD_EP_SIG, RD_EP_EV, RD_EP_CONN, RD_EP_PROVIDER, RD_EP_METRICS,
		  RD_EP_METRICS_CONN };
struct rd_ep_tag {
	enum rd_ep_kind kind;
};

struct rd_provider;

/* Poller side: called on the poller thread only (or before it runs / after
 * it stopped). */
struct rd_provider_dp_ops {
	int (*init)(struct rd_provider *pv, struct rd_poller *p);
	void (*fini)(struct rd_provider *pv);
	/* The poller checked before: the region is not paused, its peer is up
	 * (poller view), len <= pv->max_msg. */
	int (*submit)(struct rd_provider *pv, struct rd_op *op);
	/* End of a poll round: push queued work to the wire (the doorbell). */
	void (*flush)(struct rd_provider *pv);
	/* Reap completions and input; returns the work done. */
	unsigned (*poll)(struct rd_provider *pv, unsigned budget);
	/* Before the poller sleeps: work that can go on now. A provider may arm
	 * its wakeups (pv->wake_fd) here and look once more. */
	bool (*busy)(struct rd_provider *pv);
	/* Optional: the bytes of our WRs in the NIC, counted up to @enough
	 * (their completions raise an event on pv->wake_fd once busy() armed
	 * it): adaptive idle sleeps at once when inflight_sleep_bytes are. */
	uint64_t (*inflight)(struct rd_provider *pv, uint64_t enough);
	/* pv->wake_fd woke the poller: consume what woke it. */
	void (*on_wake)(struct rd_provider *pv);
	/* The control thread connected @peer (@fd: tcp's socket, -1 verbs). */
	int (*peer_up)(struct rd_provider *pv, struct rd_peer *peer, int fd);
	/* Fail everything queued to @peer with @status; no new work. */
	void (*peer_down)(struct rd_provider *pv, struct rd_peer *peer, int status, const char *why);
	/* An authenticated inbound connection from @node (tcp). */
	int (*inbound)(struct rd_provider *pv, int fd, const char *node);
	/* @c detached: nothing of its is written any more. */
	void (*client_gone)(struct rd_provider *pv, struct rd_client *c);
	/* A local region becomes reachable by peers (@on) or stops being. */
	void (*export)(struct rd_provider *pv, struct rd_region *rg, bool on);
	/* roshmd stops: fail everything, close every connection. */
	void (*close_all)(struct rd_provider *pv);
};

/* Control side: called on the control thread. */
struct rd_provider_cp_ops {
	/* Bring up listener, device, secret; fill @endpoint (what peers dial). */
	int (*init)(struct rd_control *ctl, struct rd_provider *pv, char *endpoint, size_t len);
	void (*fini)(struct rd_control *ctl, struct rd_provider *pv);
	/* Per-peer state (peer->priv). */
	int (*peer_alloc)(struct rd_control *ctl, struct rd_peer *peer);
	void (*peer_free)(struct rd_control *ctl, struct rd_peer *peer);
	/* Start connecting @peer; the outcome comes to rd_peers_dial_done(). */
	int (*connect)(struct rd_control *ctl, struct rd_peer *peer);
	/* The connect's deadline passed: undo what it made. */
	void (*dial_abort)(struct rd_control *ctl, struct rd_peer *peer);
	/* The poller let go of a peer that went down: tear its connection down. */
	void (*release)(struct rd_control *ctl, struct rd_peer *peer);
	/* Memory the NIC reaches. */
	int (*reg_client)(struct rd_control *ctl, struct rd_client *c);
	void (*unreg_client)(struct rd_control *ctl, struct rd_client *c);
	int (*reg_region)(struct rd_control *ctl, struct rd_region *rg);
	void (*unreg_region)(struct rd_control *ctl, struct rd_region *rg);
	/* A grant of local region @rg (ROSHM_POLICY_GRANT): register its part
	 * alone with its operations (setting g->nic_rkey) in *@nic, so that
	 * the grant can be taken back at the NIC (unreg_grant) without
	 * touching the region's other grantees. */
	int (*reg_grant)(struct rd_control *ctl, struct rd_region *rg, struct rd_grant *g,
			 void **nic);
	void (*unreg_grant)(struct rd_control *ctl, void *nic);
	/* The provider's part of the peer's JSON (admin "peers") and counters. */
	void (*peer_json)(struct rd_control *ctl, const struct rd_peer *peer, struct json_t *o);
	void (*peer_stats)(const struct rd_peer *peer, struct rd_peer_stats *st);
	/* An fd it put in the control thread's epoll with an RD_EP_PROVIDER
	 * tag is ready (the tag may name something an earlier event of the
	 * same batch ended: the provider checks). */
	void (*epoll_event)(struct rd_control *ctl, void *tag, uint32_t events);
	/* Every control turn: its own deadlines (handshakes). */
	void (*timer)(struct rd_control *ctl, uint64_t now_ns);
	/* Its part of the admin "status" JSON (the device's state), or NULL. */
	void (*status_json)(struct rd_control *ctl, struct json_t *o);
};

struct rd_provider {
	const char *name;             /* "local", "tcp", "verbs" */
	const char *scheme;           /* endpoint prefix: "tcp:", "verbs:"; NULL local */
	const struct rd_provider_dp_ops *dp;
	const struct rd_provider_cp_ops *cp;
	const char *loopback_name;    /* a peer that is ourselves (atomics): "verbs-loopback" */
	bool keep_peers;              /* its peers are never forgotten when the table is full */
	unsigned xp;                  /* RD_XP_*: its row of the operation counters and
					 latency histograms (RD_XP_NONE: not counted) */
	int log_comp;                 /* RD_LC_*: the log type of its connections' events */
	/* set by the provider */
	void *priv;                   /* poller-side state */
	void *ctl_priv;               /* control-side state */
	uint32_t max_msg;             /* largest WRITE/READ (the poller checks) */
	/* takes TXN_COMMIT (a transaction in one round trip, roshm/wire.h):
	 * the responder is the owner's roshmd, not a NIC */
	bool txn_one;
	int wake_fd;                  /* in the poller's epoll: on_wake; -1 none */
	/* local: atomics on this node's regions go through this provider (the
	 * NIC's atomics are not atomic with the CPU's): NULL means the CPU */
	struct rd_provider *atomics;
	/* host callbacks, installed by the poller */
	struct rd_poller *poller;
	void (*done)(struct rd_provider *pv, struct rd_pend *pd, int32_t status, uint64_t result);
	void (*event)(struct rd_provider *pv, const struct rd_event *ev);
};

/* The providers there are: by name, by endpoint scheme. */
extern struct rd_provider rd_local_provider;
extern struct rd_provider rd_tcp_provider;
extern struct rd_provider rd_verbs_provider;
struct rd_provider *rd_provider_by_name(const char *name);
struct rd_provider *rd_provider_by_endpoint(const char *endpoint);

/* Fill the common header of an operation @op a provider is queueing: the
 * client is held, its tenant's share of @peer taken (poller only). */
static inline void rd_pend_start(struct rd_pend *pd, const struct rd_op *op, struct rd_peer *peer,
				 uint64_t tsc)
{
	pd->client = op->client;
	pd->txn = op->txn;
	pd->peer = peer;
	pd->user_data = op->sqe.user_data;
	pd->tsc = tsc;
	pd->len = op->sqe.len;
	pd->opcode = op->sqe.opcode;
	pd->tidx = op->client ? (int16_t)op->client->tidx : -1;
	pd->lbuf = op->lbuf;
	if (op->lbuf)
		rd_region_hold(op->lbuf);
	if (op->client) {
		op->client->dp_refs++;
		if (peer)
			peer->tenant_inflight[pd->tidx]++;
	}
}

/*
 * The client of @pd detached (from client_gone): its operation completes to
 * nobody, and the hold on it ends now rather than at the completion (its
 * tenant's share of the peer stays taken until then). Only for a provider
 * that writes nothing more into the client's arena from here on (tcp); one
 * whose NIC may still do (verbs) keeps the hold until the WR completes, so
 * that the memory stays mapped. Poller only.
 */
void rd_pend_forget_client(struct rd_provider *pv, struct rd_pend *pd);

/* Execute one operation on a region mapped in this process (local.c). */
void rd_local_exec(struct rd_op *op);

#endif
