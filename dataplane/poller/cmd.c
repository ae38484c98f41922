// SPDX-License-Identifier: MIT
/*
 * Control commands, applied by the poller thread between rounds (or by the
 * control thread in place while the poller does not run, rd_poller_cmd):
 * clients and their handles, regions' life (export, drain, pause,
 * retarget, release), peers, tenants' shares. struct rd_cmd in roshmd.h.
 */
#include <errno.h>
#include <stdatomic.h>
#include <sys/epoll.h>

#include <rte_ring.h>

#include "roshmd.h"
#include "transport/transport.h"
#include "poller/txn.h"

static void region_export(struct rd_poller *p, struct rd_region *rg, bool on);

void rd_poller_apply_cmd(struct rd_poller *p, struct rd_cmd *cmd)
{
	struct rd_client *c = cmd->client;
	uint32_t idx = cmd->handle & 0xffffu;

	switch (cmd->type) {
	case RD_CMD_CLIENT_ADD:
		p->clients[p->nclients++] = c;
		if (p->share[c->tidx].nclients++ == 0)
			p->ntenants_on++;
		break;
	case RD_CMD_CLIENT_DEL:
		for (uint32_t i = 0; i < p->nclients; i++)
			if (p->clients[i] == c) {
				p->clients[i] = p->clients[--p->nclients];
				if (--p->share[c->tidx].nclients == 0)
					p->ntenants_on--;
				break;
			}
		/* No event for it after this (the control thread closes the
		 * fd, and its number may be reused, once we answer). */
		epoll_ctl(p->epfd, EPOLL_CTL_DEL, c->sq_rfd, NULL);
		/* Providers let go of what they can first (a hold they drop
		 * now must not bury it: the control thread frees it below when
		 * nothing holds it), then it is released: whatever completes
		 * later for it posts no CQE, and its last hold buries it. */
		if (p->net && p->net->dp->client_gone)
			p->net->dp->client_gone(p->net, c);
		rd_txn_client_gone(p, c);
		if (c->copy.region) { /* its big copy ends here */
			rd_region_unhold(p, c->copy.region);
			c->copy.region = NULL;
			if (c->copy.lbuf)
				rd_region_unhold(p, c->copy.lbuf);
			c->copy.lbuf = NULL;
		}
		c->released = true;
		cmd->result = c->dp_refs == 0;
		break;
	case RD_CMD_HANDLE_SET:
		c->dp_handles[idx].region = cmd->region;
		c->dp_handles[idx].gen = (uint16_t)(cmd->handle >> 16);
		c->dp_handles[idx].own = cmd->own;
		c->dp_handles[idx].part = cmd->limits && cmd->limits->part;
		c->dp_handles[idx].nic_rkey = cmd->limits && cmd->region->remote ?
					      cmd->limits->nic_rkey : 0;
		if (c->dp_handles[idx].part) {
			c->dp_handles[idx].access = cmd->limits->access;
			c->dp_handles[idx].lo = cmd->limits->lo;
			c->dp_handles[idx].hi = cmd->limits->hi;
		}
		break;
	case RD_CMD_HANDLE_CLEAR:
		c->dp_handles[idx].region = NULL;
		rd_txn_handle_gone(c, cmd->handle);
		break;
	case RD_CMD_REGION_DEAD:
		cmd->region->dead = true;
		if (!cmd->region->remote)
			region_export(p, cmd->region, false);
		break;
	case RD_CMD_REGION_EXPORT:
	case RD_CMD_REGION_UNEXPORT:
		region_export(p, cmd->region, cmd->type == RD_CMD_REGION_EXPORT);
		break;
	case RD_CMD_SHARE_SET:
		rd_share_set(p, (int)cmd->handle, cmd->share);
		break;
	case RD_CMD_NODE_GRANTS: { /* nothing holds the old list between rounds */
		struct rd_node_grants *old = cmd->region->node_grants;

		cmd->region->node_grants = cmd->ngrants;
		cmd->ngrants = old;
		break;
	}
	case RD_CMD_REGION_RELEASE:
		/* Nothing reaches it from now on; what still holds it finishes. */
		cmd->region->dead = true;
		if (!cmd->region->remote)
			region_export(p, cmd->region, false);
		cmd->region->released = true;
		cmd->result = cmd->region->dp_refs == 0;
		break;
	case RD_CMD_PEER_UP: {
		struct rd_provider *pv = cmd->peer->prov;

		cmd->result = pv && pv == p->net ? pv->dp->peer_up(pv, cmd->peer, cmd->fd) : -EOPNOTSUPP;
		cmd->peer->dp_up = cmd->result == 0;
		break;
	}
	case RD_CMD_PEER_DOWN: {
		int st = cmd->status ? cmd->status : -EHOSTUNREACH;
		const char *why = cmd->why ? cmd->why : "registry: node gone";
		struct rd_provider *pv = cmd->peer->prov;

		cmd->peer->dp_up = false;
		if (pv && pv == p->net)
			pv->dp->peer_down(pv, cmd->peer, st, why);
		break;
	}
	case RD_CMD_INBOUND_ADD:
		cmd->result = p->net && p->net->dp->inbound ?
			      p->net->dp->inbound(p->net, cmd->fd, cmd->node) : -EOPNOTSUPP;
		break;
	case RD_CMD_REGION_DRAIN:
		cmd->region->draining = true;
		break;
	case RD_CMD_REGION_PAUSE:
		cmd->region->paused = cmd->fd != 0;
		break;
	case RD_CMD_REGION_RETARGET: {
		struct rd_region *rg = cmd->region;
		const struct rd_region *t = cmd->target;

		/* The log survives only in the same memory with the same layout. */
		rg->keep_log = rg->mem_id == t->mem_id && rg->txn_slots == t->txn_slots &&
			       rg->slot_size == t->slot_size && rg->data_off == t->data_off;
		rg->mem_id = t->mem_id;
		rg->peer = t->peer;
		rg->id = t->id;
		rg->epoch = t->epoch;
		rg->key = t->key;
		rg->rkey = t->rkey;
		rg->raddr = t->raddr;
		rg->data_size = t->data_size;
		rg->txn_slots = t->txn_slots;
		rg->slot_size = t->slot_size;
		rg->data_off = t->data_off;
		rg->access = t->access;
		rg->win_lo = t->win_lo;
		rg->win_hi = t->win_hi;
		rg->va_base = t->va_base;
		rg->restricted = t->restricted;
		rg->txn_hint = 0;
		if (!rg->keep_log)
			rg->txn_lb = 0; /* a new log: its tail starts again */
		rg->gen++;
		rg->paused = false;
		break;
	}
	}
	atomic_store_explicit(&cmd->done, 1, memory_order_release);
}

/* A local region reachable by peers (@on) or not: the network provider and
 * the transaction engine (whose log it applies) are told. */
static void region_export(struct rd_poller *p, struct rd_region *rg, bool on)
{
	if (p->net && p->net->dp->export)
		p->net->dp->export(p->net, rg, on);
	rd_txn_region_add(p, rg, on);
}

void rd_poller_drain_cmds(struct rd_poller *p)
{
	void *obj;

	while (rte_ring_sc_dequeue(p->cmd_ring, &obj) == 0)
		rd_poller_apply_cmd(p, obj);
}
