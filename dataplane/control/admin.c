// SPDX-License-Identifier: MIT
/*
 * Admin requests on the control socket (roshmctl): who may ask (the node's
 * admin token or uid, or a tenant's token for its own part), the JSON
 * answers (status, clients, regions, peers, stats; telemetry.c renders the
 * same), and drains (drain.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "control/internal.h"
#include "control/metrics.h"

#define RD_LOG_COMPONENT RD_LC_CONTROL

#ifndef ROSHM_VERSION
#define ROSHM_VERSION "0"
#endif

/*
 * Who may administer: the holder of the node's admin token (a file that
 * roshmd's own container has and pods do not), roshmd's own uid when that
 * is not root, and admin.uids (never 0: pods often run as root). Returns
 * true for the node admin; false otherwise.
 */
static bool admin_by_credential(const struct rd_control *ctl, const struct rd_conn *conn,
				const struct roshm_ctl_admin *req)
{
	char want[ROSHM_ADMIN_TOKEN_MAX];

	if (ctl->admin_token[0]) {
		memset(want, 0, sizeof(want));
		memcpy(want, ctl->admin_token, sizeof(want));
		if (CRYPTO_memcmp(want, req->admin_token, sizeof(want)) == 0)
			return true;
	}
	if (conn->uid != 0 && conn->uid == geteuid())
		return true;
	for (int i = 0; i < ctl->cfg->nadmin_uids; i++)
		if (ctl->cfg->admin_uids[i] == conn->uid)
			return true;
	return false;
}

/* A tenant's own token (constant time over the zero-padded buffers). */
static bool tenant_by_token(const struct rd_control *ctl, const struct roshm_ctl_admin *req)
{
	const struct rd_tenant_cfg *t;
	char want[ROSHM_TOKEN_MAX];

	if (!req->tenant[0])
		return false;
	t = rd_config_tenant(ctl->cfg, req->tenant);
	memset(want, 0, sizeof(want));
	if (t)
		memcpy(want, t->token, sizeof(want));
	return CRYPTO_memcmp(want, req->token, sizeof(want)) == 0 && t;
}

/* "regions PREFIX" lists this many at most: its reply stays far below
 * ROSHM_CTL_MSG_MAX (a verbs multicast sender uses 64 of a group's) */
#define RD_LIST_PREFIX_MAX 512

struct list_ctx {
	json_t *a;
	const char *tenant;           /* NULL: every record */
	const char *prefix;           /* NULL: every name */
	unsigned seen;                /* records the registry read for it */
};

static void list_cb(const struct rd_region_rec *rec, void *arg)
{
	struct list_ctx *lc = arg;
	json_t *o;
	char buf[32];

	lc->seen++;
	if (lc->tenant && strcmp(rec->tenant, lc->tenant))
		return;
	if (lc->prefix && (strncmp(rec->name, lc->prefix, strlen(lc->prefix)) ||
			   json_array_size(lc->a) >= RD_LIST_PREFIX_MAX))
		return;
	o = json_object();
	json_object_set_new(o, "name", json_sprintf("%s/%s", rec->tenant, rec->name));
	json_object_set_new(o, "node", json_string(rec->node));
	json_object_set_new(o, "state", json_string(rec->state));
	json_object_set_new(o, "size", json_integer((json_int_t)rec->data_size));
	snprintf(buf, sizeof(buf), "%016llx", (unsigned long long)rec->epoch);
	json_object_set_new(o, "epoch", json_string(buf));
	json_object_set_new(o, "policy", json_string(rd_policy_name(rec->policy)));
	json_array_append_new(lc->a, o);
}

/* @seen (not NULL): the records a "regions" listing read */
static json_t *admin_json(struct rd_control *ctl, const char *cmd, const char *tenant, unsigned *seen)
{
	const struct rd_poller_stats *ps = &ctl->poller->stats;
	int tidx = tenant ? rd_config_tenant_idx(ctl->cfg, tenant) : -1;
	json_t *o;

	if (tenant && tidx < 0)
		return NULL;
	if (!strcmp(cmd, "status")) {
		o = json_object();
		json_object_set_new(o, "node", json_string(ctl->cfg->node));
		json_object_set_new(o, "version", json_string(ROSHM_VERSION));
		json_object_set_new(o, "pid", json_integer(getpid()));
		json_object_set_new(o, "uptime_s",
				    json_integer((json_int_t)((rd_mono_ns() - ctl->start_ns) / 1000000000ull)));
		json_object_set_new(o, "clients", json_integer(tenant ? ctl->tuse[tidx].clients : ctl->nclients));
		json_object_set_new(o, "regions", json_integer(tenant ? ctl->tuse[tidx].regions : ctl->nregions));
		/* verbs: MRs of grants at the NIC now, and grants to other
		 * nodes made without one (quota.grant_mrs, quota.bytes, the NIC) */
		uint64_t gm = 0, gn = 0;

		for (int t = 0; t < ctl->cfg->ntenants; t++)
			if (!tenant || t == tidx) {
				gm += ctl->tuse[t].grant_mrs;
				gn += ctl->tuse[t].grants_no_mr;
			}
		json_object_set_new(o, "grant_mrs", json_integer((json_int_t)gm));
		json_object_set_new(o, "grants_without_mr", json_integer((json_int_t)gn));
		if (tenant)
			json_object_set_new(o, "tenant", json_string(tenant));
		json_object_set_new(o, "registry", json_string(ctl->reg.ops->name));
		json_object_set_new(o, "registry_ready", json_boolean(ctl->reg.ops->ready(&ctl->reg)));
		char xp[32];

		snprintf(xp, sizeof(xp), "local%s%s", ctl->poller->net ? "," : "",
			 ctl->poller->net ? ctl->poller->net->name : "");
		json_object_set_new(o, "transports", json_string(xp));
		if (ctl->endpoint[0])
			json_object_set_new(o, "endpoint", json_string(ctl->endpoint));
		json_object_set_new(o, "idle", json_string(ctl->cfg->idle == RD_IDLE_BUSY ? "busy" : "adaptive"));
		json_object_set_new(o, "socket", json_string(ctl->cfg->socket));
		if (!tenant && ctl->poller->net && ctl->poller->net->cp->status_json)
			ctl->poller->net->cp->status_json(ctl, o);
		return o;
	}
	if (!strcmp(cmd, "clients")) {
		o = json_array();
		for (struct rd_client *c = ctl->clients; c; c = c->next) {
			if (tenant && c->tidx != tidx)
				continue;
			json_t *e = json_object();
			uint32_t nh = 0;

			for (uint32_t i = 0; i < c->nhandles; i++)
				nh += c->ctl_handles[i].region != NULL;
			json_object_set_new(e, "id", json_integer(c->id));
			json_object_set_new(e, "pid", json_integer(c->pid));
			json_object_set_new(e, "uid", json_integer(c->uid));
			json_object_set_new(e, "tenant", json_string(c->tenant));
			json_object_set_new(e, "pod", json_string(c->pod));
			json_object_set_new(e, "sq_entries", json_integer(c->sq_entries));
			json_object_set_new(e, "cq_entries", json_integer(c->cq_entries));
			json_object_set_new(e, "arena_size", json_integer((json_int_t)c->arena_size));
			json_object_set_new(e, "hugetlb", json_boolean(c->hugetlb));
			json_object_set_new(e, "handles", json_integer(nh));
			json_object_set_new(e, "sqes", json_integer((json_int_t)RD_STAT_GET(c->stats.sqes)));
			json_object_set_new(e, "errors", json_integer((json_int_t)RD_STAT_GET(c->stats.errors)));
			json_object_set_new(e, "bytes", json_integer((json_int_t)RD_STAT_GET(c->stats.bytes)));
			json_array_append_new(o, e);
		}
		return o;
	}
	if (!strncmp(cmd, "regions", 7) && (!cmd[7] || cmd[7] == ' ')) {
		/* "regions PREFIX": those whose names begin with PREFIX (a
		 * verbs application's multicast group: its members' records).
		 * A tenant's listing reads only its own records (the file
		 * registry: only its files), RD_LIST_PREFIX_MAX at most. */
		struct list_ctx lc = { .a = json_array(), .tenant = tenant,
				       .prefix = cmd[7] ? cmd + 8 : tenant ? "" : NULL };

		if (tenant && ctl->reg.ops->list_prefix)
			ctl->reg.ops->list_prefix(&ctl->reg, tenant, lc.prefix, RD_LIST_PREFIX_MAX,
						  list_cb, &lc);
		else
			ctl->reg.ops->list_regions(&ctl->reg, list_cb, &lc);
		if (seen)
			*seen = lc.seen;
		return lc.a;
	}
	if (tenant)
		return NULL; /* the node's peers and counters are the admin's */
	if (!strcmp(cmd, "peers"))
		return rd_peers_json(ctl);
	if (!strcmp(cmd, "stats")) {
		json_t *h = json_array();

		o = json_object();
		for (size_t i = 0; i < rd_nmetrics; i++) {
			const struct rd_metric *m = &rd_metrics[i];
			uint64_t v;

			if (!m->key)
				continue;
			v = rd_metric_value(ctl, m);
			json_object_set_new(o, m->key, m->type == RD_METRIC_FLAG ? json_boolean(v) :
						       json_integer((json_int_t)v));
		}
		for (int i = 0; i < RD_BATCH_BUCKETS; i++)
			json_array_append_new(h, json_integer((json_int_t)RD_STAT_GET(ps->batch_hist[i])));
		json_object_set_new(o, "batch_log2_hist", h);
		/* work each tenant's limits, share and share of peers held back
		 * (roshm_tenant_throttled_total) */
		json_t *th = json_object();

		for (int t = 0; t < ctl->cfg->ntenants; t++) {
			json_t *e = json_object();

			json_object_set_new(e, "rate", json_integer((json_int_t)RD_STAT_GET(ps->tenant_held[t][0])));
			json_object_set_new(e, "share", json_integer((json_int_t)RD_STAT_GET(ps->tenant_held[t][1])));
			json_object_set_new(e, "peer", json_integer((json_int_t)RD_STAT_GET(ps->tenant_held[t][RD_HELD_PEER])));
			json_object_set_new(th, ctl->cfg->tenants[t].name, e);
		}
		json_object_set_new(o, "tenant_throttled", th);
		return o;
	}
	return NULL;
}

json_t *rd_control_admin_json(struct rd_control *ctl, const char *cmd, const char *tenant)
{
	return admin_json(ctl, cmd, tenant, NULL);
}

int rd_control_admin_reply(int fd, json_t *o)
{
	char *text = json_dumps(o, JSON_COMPACT), *out;
	size_t tl;
	int ret;

	if (!text)
		return -ENOMEM;
	tl = strlen(text) + 1;
	if (tl + sizeof(struct roshm_ctl_hdr) > ROSHM_CTL_MSG_MAX) {
		free(text);
		return -EMSGSIZE;
	}
	out = malloc(sizeof(struct roshm_ctl_hdr) + tl);
	if (!out) {
		free(text);
		return -ENOMEM;
	}
	rd_reply_hdr((void *)out, ROSHM_CTL_ADMIN, sizeof(struct roshm_ctl_hdr) + tl, 0);
	memcpy(out + sizeof(struct roshm_ctl_hdr), text, tl);
	ret = rd_send_reply(fd, out, sizeof(struct roshm_ctl_hdr) + tl, NULL, 0);
	free(out);
	free(text);
	return ret ? -ECONNRESET : 1;
}

/* "regions PREFIX": a prefix of a region name (its characters, up to its
 * length; nothing else after it). */
static bool regions_prefix_ok(const char *s)
{
	return strlen(s) < ROSHM_NAME_MAX && rd_valid_name(s);
}

static bool known_admin_cmd(const char *cmd)
{
	static const char *const cmds[] = { "status", "clients", "regions", "peers", "stats" };

	if (!strncmp(cmd, "regions ", 8))
		return regions_prefix_ok(cmd + 8);

	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(cmd, cmds[i]))
			return true;
	return false;
}

/*
 * An admin request. The node admin may do everything; a tenant with its
 * token may see its own clients and regions and drain its own regions:
 * "drain tenant T" for its own T, "drain region T/N" in its own T, "drain pod
 * P" (its regions whose owners attached with pod P). Nobody else anything.
 */
int rd_msg_admin(struct rd_control *ctl, struct rd_conn *conn, const void *msg, int fd)
{
	const struct roshm_ctl_admin *req = msg;
	const char *tenant = NULL;
	unsigned seen = 0;
	bool by_tenant;
	json_t *o;
	int ret;

	(void)fd;
	if (!memchr(req->cmd, 0, sizeof(req->cmd)) ||
	    !memchr(req->tenant, 0, sizeof(req->tenant)) || !memchr(req->token, 0, sizeof(req->token)) ||
	    !memchr(req->admin_token, 0, sizeof(req->admin_token)))
		return -EINVAL;
	RD_LOG(DEBUG, "admin '%.32s' from pid %d uid %u", req->cmd, (int)conn->pid,
	       (unsigned)conn->uid);
	if (!admin_by_credential(ctl, conn, req)) {
		if (!tenant_by_token(ctl, req)) {
			RD_LOG(NOTICE, "admin '%.32s' refused: pid %d uid %u has no admin token and no "
			       "tenant token", req->cmd, (int)conn->pid, (unsigned)conn->uid);
			return -EPERM;
		}
		tenant = req->tenant;
	}
	if (!strncmp(req->cmd, "drain", 5) && (req->cmd[5] == 0 || req->cmd[5] == ' ')) {
		/* The reply comes when the regions are drained (rd_drain_tick). */
		char what[16] = "", arg[2 * ROSHM_NAME_MAX] = "", extra[2];
		struct rd_drain_match m = { 0 };

		if (req->cmd[5] && (sscanf(req->cmd + 6, "%15s %127s %1s", what, arg, extra) != 2 ||
				    (strcmp(what, "tenant") && strcmp(what, "region") && strcmp(what, "pod"))))
			return -EINVAL;
		if (!strcmp(what, "tenant"))
			m.tenant = arg;
		else if (!strcmp(what, "region"))
			m.region = arg;
		else if (!strcmp(what, "pod"))
			m.pod = arg;
		if (tenant) {
			size_t tl = strlen(tenant);

			/* a tenant drains only what it owns */
			if ((!m.tenant && !m.region && !m.pod) || (m.tenant && strcmp(m.tenant, tenant)) ||
			    (m.region && (strncmp(m.region, tenant, tl) || m.region[tl] != '/')))
				return -EPERM;
			m.owner_tenant = tenant;
		}
		/* a connection not attached waits for its answer outside the
		 * pending slots (attach.c), as many at once as the tenant may
		 * have clients */
		int tidx = tenant ? rd_config_tenant_idx(ctl->cfg, tenant) : -1;

		if (!conn->client && (conn->wait != RD_WAIT_NONE || !rd_conn_drain_room(ctl, tidx)))
			return -EBUSY;
		ret = rd_drain_start(ctl, &m, conn->fd);
		if (ret >= 0 && !conn->client)
			rd_conn_drain_wait(ctl, conn, tidx);
		return ret < 0 ? ret : 1;
	}
	if (!known_admin_cmd(req->cmd))
		return -EINVAL;
	/* a tenant's listing reads the store (file registry) or walks every
	 * record (etcd's cache): one registry operation of its quota, refused
	 * rather than queued when there is none (reg_rate.c), and 1 more for
	 * each 32 records it read, taken after (a record read costs about a
	 * 40th of a create's share of the control thread, measured) */
	by_tenant = tenant && !strncmp(req->cmd, "regions", 7);
	if (by_tenant && !rd_reg_rate_try(ctl, tenant, 1))
		return -EAGAIN;
	/* "regions PREFIX" lists the tenant the request names, the admin's
	 * too (a verbs application's multicast group is its tenant's) */
	if (!tenant && req->tenant[0] && !strncmp(req->cmd, "regions ", 8))
		tenant = req->tenant;
	o = admin_json(ctl, req->cmd, tenant, &seen);
	if (by_tenant && seen >= 32)
		rd_reg_rate_take_tenant(ctl, tenant, seen / 32);
	if (!o)
		return -EPERM;
	ret = rd_control_admin_reply(conn->fd, o);
	json_decref(o);
	return ret;
}
