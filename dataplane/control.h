/* SPDX-License-Identifier: MIT */
#ifndef RD_CONTROL_H
#define RD_CONTROL_H

#include "roshmd.h"
#include "registry/registry.h"
#include "transport/transport.h"
#include "transport/tcp.h"
#include "transport/verbs.h"

struct rd_conn;
struct json_t;

/* What an epoll event of the control thread points at. */
enum rd_ep_kind { RD_EP_LISTEN, RD_EP_SIG, RD_EP_EV, RD_EP_CONN, RD_EP_TCP_LISTEN, RD_EP_TCP_ACCEPT,
		  RD_EP_VERBS_CM, RD_EP_METRICS, RD_EP_METRICS_CONN };
struct rd_ep_tag {
	enum rd_ep_kind kind;
};

struct rd_acc {
	struct rd_ep_tag tag;         /* RD_EP_TCP_ACCEPT */
	struct rd_tcp_accept a;
	char addr[64];
	struct rd_acc *next;
};

struct rd_control {
	const struct rd_config *cfg;
	struct rd_poller *poller;
	struct rd_registry reg;
	struct rd_transport local;
	int listen_fd;
	int epfd;
	int sig_fd;
	uint32_t next_client_id;
	uint32_t next_region_id;
	uint32_t nclients;
	uint32_t nregions;
	struct rd_client *clients;
	struct rd_region *regions;
	struct rd_conn *conns;
	struct rd_region **slots;     /* local regions by id (1..max_regions) */
	/* tcp transport, control side (peers.c) */
	struct rd_peer *peers;
	struct rd_acc *accepting;
	struct rd_tcp_secret secret;
	int tcp_listen_fd;
	char endpoint[96];            /* what peers connect to: "tcp:ADDR:PORT", "verbs:ADDR:PORT" */
	struct rd_verbs_ctl *verbs;   /* verbs transport, control side */
	int metrics_fd;               /* /metrics listener, -1 when off */
	struct rd_mconn *mconns;
	uint64_t tenant_sqes_gone[RD_TENANTS_MAX]; /* of detached clients: counters never go down */
	struct rd_tel *tel;           /* telemetry snapshot */
	uint64_t next_revalidate_ns;
	struct rd_drain_job *drains;
	volatile int stopping;        /* SIGTERM: draining, then stop */
	uint64_t start_ns;
	uint64_t instance;            /* random per start (HELLO reply) */
	volatile int stop;
};

int rd_control_init(struct rd_control *ctl, const struct rd_config *cfg, struct rd_poller *p);
/* Serve until SIGTERM/SIGINT; returns 0 on an orderly stop. */
int rd_control_run(struct rd_control *ctl);
/* Release every client and region (after the poller stopped). */
void rd_control_fini(struct rd_control *ctl);

/* Shared with peers.c */
uint64_t rd_mono_ns(void);
int rd_control_cmd(struct rd_control *ctl, struct rd_cmd *cmd);
void rd_control_epoll_add(struct rd_control *ctl, int fd, void *tag);
void rd_control_epoll_del(struct rd_control *ctl, int fd);
bool rd_policy_allows(uint32_t policy, const char *owner_tenant, uint32_t ntenants,
		      const char (*tenants)[ROSHM_NAME_MAX], const char *tenant);

void rd_region_unpublish(struct rd_control *ctl, struct rd_region *rg);
void rd_control_region_put(struct rd_control *ctl, struct rd_region *rg);
int rd_control_admin_reply(int fd, struct json_t *o);
void rd_region_to_rec(struct rd_control *ctl, const struct rd_region *rg,
		      struct rd_region_rec *rec, const char *state);

/* drain.c: stop new work on regions, finish their logs, unpublish them */
int rd_drain_start(struct rd_control *ctl, const char *tenant, const char *region, int reply_fd);
void rd_drain_tick(struct rd_control *ctl);
bool rd_drain_idle(const struct rd_control *ctl);
void rd_drain_forget_fd(struct rd_control *ctl, int fd);

/* peers.c: the tcp transport's control side */
int rd_peers_init(struct rd_control *ctl);
void rd_peers_fini(struct rd_control *ctl);
void rd_peers_accept(struct rd_control *ctl);
void rd_peers_accept_step(struct rd_control *ctl, struct rd_acc *acc);
int rd_peers_open_remote(struct rd_control *ctl, const struct rd_region_rec *rec,
			 struct rd_region **out);
void rd_peers_region_free(struct rd_control *ctl, struct rd_region *rg);
void rd_peers_timer(struct rd_control *ctl, bool registry_changed);
void rd_peers_event(struct rd_control *ctl, const struct rd_event *ev);
struct json_t *rd_peers_json(struct rd_control *ctl);
bool rd_peers_acc_live(struct rd_control *ctl, struct rd_acc *acc);

#endif
