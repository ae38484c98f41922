/* SPDX-License-Identifier: MIT */
/*
 * What only the control thread's files in dataplane/control/ share: the
 * control-socket connection, replies, handles, the control messages'
 * handlers. The control thread's API for the rest of roshmd is control.h.
 */
#ifndef RD_CONTROL_INTERNAL_H
#define RD_CONTROL_INTERNAL_H

#include "control/control.h"

/* What a connection's request waits for (the connection is not read meanwhile). */
enum rd_conn_wait { RD_WAIT_NONE, RD_WAIT_PEER, RD_WAIT_FETCH, RD_WAIT_PUT, RD_WAIT_RATE, RD_WAIT_DRAIN };

/*
 * A control-socket connection: a client attaching (HELLO, then CHANNEL),
 * an attached client, or roshmctl with an admin request. Until it is
 * attached it counts against admin.max_pending and must finish (or send its
 * next request) within admin.hello_timeout_ms.
 */
struct rd_conn {
	struct rd_ep_tag tag;         /* RD_EP_CONN */
	int fd;
	pid_t pid;
	uid_t uid;
	struct rd_client *client;     /* after CHANNEL */
	/* after HELLO, until CHANNEL: what was granted (and reserved in the quota) */
	bool hello;
	int tidx;
	char tenant[ROSHM_NAME_MAX];
	char pod[ROSHM_NAME_MAX];
	uint32_t sq, cq;
	uint64_t arena;
	uint64_t ckey;                /* the client key it was given (struct rd_client) */
	struct roshm_chan_layout lay;
	uint64_t deadline_ns;         /* not attached: closed then; 0 while a drain answers */
	int drain_tidx;               /* RD_WAIT_DRAIN: the tenant whose drain it waits for, or -1 */
	uint64_t accept_ns;           /* when (CLOCK_MONOTONIC) */
	uint64_t peek_gen;            /* that call saw its request waiting (evictable) */
	uint64_t src;                 /* its peer's network namespace (SO_NETNS_COOKIE), 0: unknown */
	/*
	 * A request that waits (the connection is not read meanwhile): an
	 * open for its region's node to be connected (park_peer) or for the
	 * registry to be read past its cache (RD_WAIT_FETCH), a create for its
	 * record to be in the registry (RD_WAIT_PUT); or a request not read yet,
	 * for its tenant's registry rate (RD_WAIT_RATE, reg_rate.c); a connection
	 * not attached whose drain runs (RD_WAIT_DRAIN: out of the pending
	 * count, closed once answered). wait_id names it to the
	 * registry's completion, which may come after the connection is gone.
	 */
	enum rd_conn_wait wait;
	uint64_t wait_id;
	struct rd_peer *park_peer;
	struct roshm_ctl_region_open park_req;
	struct rd_region_rec *fetched; /* the record the fetch brought, for the open's rerun */
	int park_tries;
	struct rd_region *put_rg;     /* RD_WAIT_PUT: the new region and its owner handle */
	uint32_t put_hv;
	bool put_reattach;
	/* RD_WAIT_RATE: in its tenant's queue (reg_rate.c), until its request is read */
	bool rate_queued;
	int rate_tidx;
	struct rd_conn *rate_next;
	struct rd_conn *next, *prev;
};

/* loop.c */
/* @len random bytes from getrandom(2) (aborts only if the kernel cannot). */
void rd_random_bytes(void *buf, size_t len);

/* attach.c: replies */
/* Fill a reply header of @type, @len bytes in all, with @status. */
void rd_reply_hdr(struct roshm_ctl_hdr *h, uint16_t type, size_t len, int status);
/* Send one datagram with @nfds descriptors; 0 or -EIO (never blocks). */
int rd_send_reply(int fd, const void *buf, size_t len, const int *fds, int nfds);
/* A reply that is only a header: @status for a request of @type. */
int rd_send_status(int fd, uint16_t type, int status);

/* attach.c: connections and clients */
/* Close @conn (detach its client); its memory goes at rd_conns_reap. */
void rd_conn_close(struct rd_control *ctl, struct rd_conn *conn, const char *why);
/* Free the connections closed in this epoll batch. */
void rd_conns_reap(struct rd_control *ctl);
/* Close unattached connections past their deadline, then reap. */
void rd_conns_timer(struct rd_control *ctl, uint64_t now);
/* Accept every waiting connection on the control socket. */
void rd_conn_accept(struct rd_control *ctl);
/* An epoll event (@events) on @conn: read its request, or a hang-up while it waits. */
void rd_conn_event(struct rd_control *ctl, struct rd_conn *conn, uint32_t events);
/* Free a client the poller no longer touches (detach, or its graveyard). */
void rd_control_client_free(struct rd_control *ctl, struct rd_client *c);

/* regions.c */
/* Free a region the poller no longer touches (its last put, or the graveyard). */
void rd_control_region_free(struct rd_control *ctl, struct rd_region *rg);
/* Drop @c's handle @hv; @notify_poller false: @c is already gone from the poller. */
void rd_handle_release(struct rd_control *ctl, struct rd_client *c, uint32_t hv,
		       bool notify_poller);

/* Control-message handlers (attach.c's message table says what they return). */
int rd_msg_region_create(struct rd_control *ctl, struct rd_conn *conn, const void *msg, int fd);
int rd_msg_region_reattach(struct rd_control *ctl, struct rd_conn *conn, const void *msg, int fd);
int rd_msg_region_open(struct rd_control *ctl, struct rd_conn *conn, const void *msg, int fd);
int rd_msg_region_close(struct rd_control *ctl, struct rd_conn *conn, const void *msg, int fd);
int rd_msg_region_grant(struct rd_control *ctl, struct rd_conn *conn, const void *msg, int fd);

/* regions.c: the connection is not read until rd_conn_unpark (a hang-up
 * still closes it) */
void rd_conn_wait_for(struct rd_control *ctl, struct rd_conn *conn, enum rd_conn_wait kind);
void rd_conn_unpark(struct rd_control *ctl, struct rd_conn *conn);
bool rd_conn_drain_room(const struct rd_control *ctl, int tidx);
void rd_conn_pending_changed(struct rd_control *ctl);
void rd_conn_link(struct rd_control *ctl, struct rd_conn *conn);
void rd_conn_drain_wait(struct rd_control *ctl, struct rd_conn *conn, int tidx);

/* reg_rate.c: quota.registry_ops_per_sec */
/* Whether @conn's next request must wait for its tenant's bucket (then
 * the connection waits, RD_WAIT_RATE, its request unread). */
bool rd_reg_rate_hold(struct rd_control *ctl, struct rd_conn *conn);
/* What a request of @type that ran took from tenant @tidx's bucket. */
void rd_reg_rate_charge(struct rd_control *ctl, int tidx, uint16_t type);
/* @n registry operations a request of tenant @tidx caused (a read past the cache). */
void rd_reg_rate_take(struct rd_control *ctl, int tidx, unsigned n);
/* Take @n from @tenant's bucket if it has tokens and nobody of the tenant
 * waits (true; also when the tenant has no quota), else nothing (false). */
bool rd_reg_rate_try(struct rd_control *ctl, const char *tenant, unsigned n);
/* Let each tenant's first waiting connection read as its bucket refills. */
void rd_reg_rate_timer(struct rd_control *ctl, uint64_t now);
/* @conn is closed: out of its tenant's queue (the next may read). */
void rd_reg_rate_forget(struct rd_control *ctl, struct rd_conn *conn);

/* regions.c, for grants.c */
struct rd_region *rd_region_find(struct rd_control *ctl, const char *tenant, const char *name);
struct rd_handle *rd_handle_lookup(struct rd_client *c, uint32_t hv);
typedef void (*rd_put_done_fn)(struct rd_control *ctl, struct rd_conn *conn, int status,
			       uint64_t arg);
int rd_conn_put_wait(struct rd_control *ctl, struct rd_conn *conn, const struct rd_region_rec *rec,
		     rd_put_done_fn done, uint64_t arg);
/* grants.c: the narrowest of @grants (the first of those as narrow) that
 * lets @c (of @tenant) open @want (a grant to @c itself, or to a region it
 * owns on this node), or NULL */
const struct rd_grant *rd_client_grant(const struct rd_client *c, const char *tenant,
				       const struct rd_grant *grants, uint32_t n,
				       const struct rd_handle *want);
/* grants.c: grant-to-handle comparisons made so far (rd_client_grant,
 * rd_control_grants_enforce), control thread only: what tests/unit/
 * test_grants.c bounds a revoke's work by */
extern uint64_t rd_grant_checks;
static inline bool rd_client_granted(const struct rd_client *c, const char *tenant,
				     const struct rd_grant *grants, uint32_t n,
				     const struct rd_handle *want)
{
	return rd_client_grant(c, tenant, grants, n, want) != NULL;
}
/* admin.c */
int rd_msg_admin(struct rd_control *ctl, struct rd_conn *conn, const void *msg, int fd);

#endif
