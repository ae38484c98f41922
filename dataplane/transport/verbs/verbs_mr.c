// SPDX-License-Identifier: MIT
/*
 * Memory the NIC reaches (verbs transport, control thread): a client's
 * arena, a region (its MR, whose rkey and address go in its record), and a
 * grant's own MR (its part, its operations), released at the revoke.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "control/control.h"
#include "transport/verbs/verbs.h"

#define RD_LOG_COMPONENT RD_LC_VERBS

#define VCTL ((struct rd_verbs_ctl *)rd_verbs_provider.ctl_priv)

int rd_verbs_reg_client(struct rd_control *ctl, struct rd_client *c)
{
	struct ibv_mr *mr;

	(void)ctl;
	if (!VCTL)
		return 0;
	mr = ibv_reg_mr(VCTL->pd, c->chan, c->chan_size, IBV_ACCESS_LOCAL_WRITE);
	if (!mr) {
		int e = errno;

		RD_LOG(ERR, "verbs: registering the channel of client %u (%zu bytes): %s", c->id,
		       c->chan_size, strerror(e));
		return -e;
	}
	c->mr = mr;
	c->lkey = mr->lkey;
	return 0;
}

/* Called when the client is freed: the poller let go of it, so no WR of
 * it is in flight (its dp_refs counted them). */
void rd_verbs_unreg_client(struct rd_control *ctl, struct rd_client *c)
{
	(void)ctl;
	if (!c->mr)
		return;
	ibv_dereg_mr(c->mr);
	c->mr = NULL;
}

int rd_verbs_reg_region(struct rd_control *ctl, struct rd_region *rg)
{
	struct ibv_mr *mr;

	if (!VCTL)
		return 0;
	mr = ibv_reg_mr(VCTL->pd, rg->map, rg->map_size,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			IBV_ACCESS_REMOTE_ATOMIC);
	if (!mr) {
		int e = errno;

		RD_LOG(ERR, "verbs: registering region %s/%s (%zu bytes): %s", rg->tenant, rg->name,
		       rg->map_size, strerror(e));
		return -e;
	}
	rg->mr = mr;
	rg->rkey = mr->rkey;
	rg->raddr = (uintptr_t)rg->map;
	/* Our own atomics on it go through the NIC too (loopback QP) when the
	 * NIC's atomics are not atomic with the CPU's (atomic_cap != GLOB). */
	rg->peer = ctl->self;
	return 0;
}

/*
 * A grant's own MR: the grant's part of @rg's data area, its operations
 * only. Its rkey goes in the record in place of the region's for the
 * grantee's node, so that deregistering it (the revoke) ends the grantee's
 * access at this NIC at once, while the region's other grantees keep
 * theirs. Same addresses as the region's MR (a peer's remote address does
 * not depend on which of the two it names).
 */
int rd_verbs_reg_grant(struct rd_control *ctl, struct rd_region *rg, struct rd_grant *g,
			   void **nic)
{
	int flags = 0;
	struct ibv_mr *mr;

	(void)ctl;
	if (!VCTL || !rg->mr)
		return 0;
	if (g->access & ROSHM_ACCESS_READ)
		flags |= IBV_ACCESS_REMOTE_READ;
	if (g->access & ROSHM_ACCESS_WRITE)
		flags |= IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	if (g->access & ROSHM_ACCESS_ATOMIC)
		flags |= IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
	mr = ibv_reg_mr(VCTL->pd, (uint8_t *)rg->map + rg->data_off + g->lo, g->hi - g->lo, flags);
	if (!mr) {
		int e = errno ? errno : ENOMEM;

		RD_LOG(ERR, "verbs: registering a grant of region %s/%s ([%llu, %llu)): %s",
		       rg->tenant, rg->name, (unsigned long long)g->lo, (unsigned long long)g->hi,
		       strerror(e));
		return -e;
	}
	g->nic_rkey = mr->rkey;
	*nic = mr;
	return 0;
}

void rd_verbs_unreg_grant(struct rd_control *ctl, void *nic)
{
	(void)ctl;
	ibv_dereg_mr(nic);
}

void rd_verbs_unreg_region(struct rd_region *rg)
{
	if (rg->mr)
		ibv_dereg_mr(rg->mr);
	rg->mr = NULL;
}

void rd_verbs_unreg_region_op(struct rd_control *ctl, struct rd_region *rg)
{
	(void)ctl;
	rd_verbs_unreg_region(rg);
}
