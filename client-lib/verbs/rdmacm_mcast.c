// SPDX-License-Identifier: MIT
/*
 * libroshm-verbs' RDMA CM: multicast on UD ids (RDMA_PS_UDP). A group is
 * the GID of its address, as rdma_cm maps it on RoCE v2 (an IPv4 group
 * ::ffff:a.b.c.d, an IPv6 one itself); joining attaches the id's QP to it
 * (ibv_attach_mcast, mcast.c: the membership is the registry's, no switch
 * is involved) and gives RDMA_CM_EVENT_MULTICAST_JOIN with what a sender
 * needs: the group's AH attributes, QPN 0xFFFFFF and the port space's
 * Q_Key, and the join's context as private_data. A send-only join
 * (rdma_join_multicast_ex) attaches nothing.
 */
#define _GNU_SOURCE
#include "rdmacm_int.h"

static int mc_find(const struct rc_id *i, const union ibv_gid *g)
{
	for (int k = 0; k < i->nmc; k++)
		if (!memcmp(&i->mc[k].gid, g, sizeof(*g)))
			return k;
	return -1;
}

static int join(struct rdma_cm_id *id, const struct sockaddr *addr, bool send_only, void *context)
{
	struct rc_id *i = rc_to_id(id);
	struct rdma_ud_param *u;
	struct rc_evt *e;
	union ibv_gid g;
	int err = 0;

	if (!id || !addr || !rc_sa_len(addr))
		return rc_err(EINVAL);
	if (!rc_sa_mc(addr))
		return rc_err(EINVAL);
	pthread_mutex_lock(&rc_lock);
	rc_sa_gid(addr, &g);
	if (!i->id.verbs) {
		err = ENODEV;   /* bound to no device yet (rdma_cm: the same) */
	} else if (i->id.qp_type != IBV_QPT_UD) {
		err = EINVAL;   /* RC ids have no groups */
	} else if (mc_find(i, &g) >= 0) {
		err = EADDRINUSE;
	} else if (i->nmc == RC_MC_MAX) {
		err = ENOMEM;
	} else if (!send_only && i->id.qp && (err = ibv_attach_mcast(i->id.qp, &g, 0))) {
		/* EINVAL, ENOMEM, or what roshmd said */
	} else if (!(e = rc_evt_new(i, RDMA_CM_EVENT_MULTICAST_JOIN, 0))) {
		if (!send_only && i->id.qp)
			ibv_detach_mcast(i->id.qp, &g, 0);
		err = ENOMEM;
	} else {
		i->mc[i->nmc].gid = g;
		i->mc[i->nmc].attached = !send_only && i->id.qp;
		i->nmc++;
		u = &e->ev.param.ud;
		u->private_data = context;
		u->ah_attr.port_num = 1;
		u->ah_attr.is_global = 1;
		u->ah_attr.grh.dgid = g;
		u->ah_attr.grh.sgid_index = (uint8_t)i->sgid_index;
		u->ah_attr.grh.hop_limit = 64;
		u->ah_attr.grh.traffic_class = i->tos;
		u->qp_num = 0xffffff;
		u->qkey = RDMA_UDP_QKEY;
		rc_chan_push(i->ch, e);
	}
	pthread_mutex_unlock(&rc_lock);
	if (err)
		return rc_err(err);
	return rc_id_complete(i);
}

RC_EXPORT int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)
{
	return join(id, addr, false, context);
}

RC_EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *id, struct rdma_cm_join_mc_attr_ex *a,
				     void *context)
{
	if (!a || !(a->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS) ||
	    !(a->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) ||
	    (a->comp_mask & ~(RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS)) ||
	    (a->join_flags != RDMA_MC_JOIN_FLAG_FULLMEMBER &&
	     a->join_flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER))
		return rc_err(EINVAL);
	return join(id, a->addr, a->join_flags == RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER, context);
}

/* Out of group @k of @i (lock held): its QP leaves it too. */
void rc_mc_leave(struct rc_id *i, int k)
{
	if (i->mc[k].attached && i->id.qp)
		ibv_detach_mcast(i->id.qp, &i->mc[k].gid, 0);
	i->mc[k] = i->mc[--i->nmc];
}

RC_EXPORT int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct rc_id *i = rc_to_id(id);
	union ibv_gid g;
	int k, err = 0;

	if (!id || !addr || !rc_sa_len(addr))
		return rc_err(EINVAL);
	pthread_mutex_lock(&rc_lock);
	rc_sa_gid(addr, &g);
	k = mc_find(i, &g);
	if (k < 0)
		err = EADDRNOTAVAIL;   /* not joined */
	else
		rc_mc_leave(i, k);
	pthread_mutex_unlock(&rc_lock);
	return err ? rc_err(err) : 0;
}
