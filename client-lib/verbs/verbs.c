// SPDX-License-Identifier: MIT
/*
 * libroshm-verbs: a libibverbs.so.1 for unmodified, dynamically linked verbs
 * applications. Placed first on LD_LIBRARY_PATH, it shows one device,
 * "roshm0", whose context is ours (the inline ibv_post_send / ibv_poll_cq of
 * rdma-core 44's <infiniband/verbs.h> call through context->ops), and carries
 * RDMA WRITE, READ, atomics, SEND and RDMA WRITE with immediate over
 * libroshm to the peer's roshmd.
 *
 * This file: the device, the context and PDs; mr.c registers memory
 * (regions "ibv-mr-<rkey>" mapped over the application's own pages).
 * qp.c is the send engine, recv.c the receive side, cq.c the CQs and
 * completion channels. See docs/verbs-compat.md.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "rv.h"

static struct ibv_device rv_device = {
	.node_type = IBV_NODE_CA,
	.transport_type = IBV_TRANSPORT_IB,
	.name = "roshm0",
	.dev_name = "uverbs-roshm0",
	.dev_path = "",
	.ibdev_path = "",
};

/* The node's name as libroshm learned it at attach: hashed into LID and GUID. */
static uint64_t fnv1a(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	return h;
}

/* ---------------------------------------------------------------- devices */

RV_EXPORT struct ibv_device **ibv_get_device_list(int *num)
{
	struct ibv_device **l = calloc(2, sizeof(*l));

	if (!l) {
		errno = ENOMEM;
		return NULL;
	}
	l[0] = &rv_device;
	if (num)
		*num = 1;
	return l;
}

RV_EXPORT void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

RV_EXPORT const char *ibv_get_device_name(struct ibv_device *d)
{
	return d ? d->name : NULL;
}

RV_EXPORT int ibv_get_device_index(struct ibv_device *d)
{
	return d == &rv_device ? 0 : -1;
}

RV_EXPORT __be64 ibv_get_device_guid(struct ibv_device *d)
{
	(void)d;
	return htobe64(fnv1a("roshm0"));
}

static int rv_query_port(struct ibv_context *c, uint8_t port, struct ibv_port_attr *a, size_t len);

RV_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *d)
{
	struct roshm_params p;
	struct rv_ctx *c;
	const char *e;
	size_t arena_size;
	uint64_t avail;
	int err = 0;

	if (d != &rv_device) {
		errno = ENODEV;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	memset(&p, 0, sizeof(p));
	/* room for every arena slot's SQEs (a fragment takes two) in flight */
	p.sq_entries = 1024;
	p.cq_entries = 2048;
	e = getenv("ROSHM_VERBS_ARENA");
	p.arena_size = e ? strtoull(e, NULL, 0) : 16ull << 20;
	e = getenv("ROSHM_VERBS_RECV_RING");
	c->ring_bytes = e ? strtoull(e, NULL, 0) : 0;
	/* The application shares its CPU with roshmd's poller (a small VM):
	 * give the poller the CPU at each post and each empty poll, where an
	 * application spinning on a NIC's CQ would keep it (verbs-compat.md) */
	e = getenv("ROSHM_VERBS_YIELD");
	c->yield = e && *e && strcmp(e, "0");
	/* tests (verbs_ud): a UD sender's first slot at a destination is its
	 * last, not a random one (ud.c) */
	e = getenv("ROSHM_VERBS_UD_FIRST");
	c->ud_first_last = e && !strcmp(e, "last");
	c->r = roshm_open(&p, &err);
	if (!c->r) {
		free(c);
		errno = err < 0 ? -err : EIO;
		return NULL;
	}
	/* The arena: nslots slots (each big enough for a 64 KiB message and its
	 * fragment header when the arena allows), then the synchronous read area. */
	c->arena = roshm_arena(c->r, &arena_size);
	avail = arena_size > RV_META_SIZE ? arena_size - RV_META_SIZE : 0;
	c->nslots = (uint32_t)(avail / RV_SLOT_TARGET < 8 ? 8 : avail / RV_SLOT_TARGET > 256 ?
			       256 : avail / RV_SLOT_TARGET);
	c->slot_size = (avail / c->nslots) & ~63ull;
	c->meta_off = c->nslots * c->slot_size;
	c->free_slots = calloc(c->nslots, sizeof(*c->free_slots));
	c->ops = calloc(c->nslots, sizeof(*c->ops));
	c->wake_fd = -1;
	/* blocking, as the kernel's: ibv_get_async_event waits on it (async.c) */
	c->vc.context.async_fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	if (!c->free_slots || !c->ops || c->slot_size < 1024 || c->vc.context.async_fd < 0) {
		int err2 = c->vc.context.async_fd < 0 ? errno : ENOMEM;

		if (c->vc.context.async_fd >= 0)
			close(c->vc.context.async_fd);
		roshm_close(c->r);
		free(c->free_slots);
		free(c->ops);
		free(c);
		errno = err2;
		return NULL;
	}
	for (uint32_t i = 0; i < c->nslots; i++)
		c->free_slots[c->nfree++] = c->nslots - 1 - i;
	pthread_mutex_init(&c->lock, NULL);
	c->guid = fnv1a(c->r->node);
	c->vc.sz = sizeof(c->vc);
	c->vc.query_port = rv_query_port;
	c->vc.create_qp_ex = rv_create_qp_ex;
	c->vc.create_cq_ex = rv_create_cq_ex;
	c->vc.query_device_ex = rv_query_device_ex;
	c->vc.query_rt_values = rv_query_rt_values;
	c->vc.open_xrcd = rv_open_xrcd;
	c->vc.close_xrcd = rv_close_xrcd;
	c->vc.create_srq_ex = rv_create_srq_ex;
	c->vc.get_srq_num = rv_get_srq_num;
	c->vc.context.device = d;
	c->vc.context.abi_compat = __VERBS_ABI_IS_EXTENDED;
	c->vc.context.cmd_fd = -1;
	c->vc.context.num_comp_vectors = 1;
	pthread_mutex_init(&c->vc.context.mutex, NULL);
	c->vc.context.ops.poll_cq = rv_poll_cq;
	c->vc.context.ops.req_notify_cq = rv_req_notify_cq;
	c->vc.context.ops.post_send = rv_post_send;
	c->vc.context.ops.post_recv = rv_post_recv;
	c->vc.context.ops.post_srq_recv = rv_post_srq_recv;
	rv_mw_ops(c);
	rv_ctx_track(c);
	return &c->vc.context;
}

RV_EXPORT int ibv_close_device(struct ibv_context *ctx)
{
	struct rv_ctx *c = to_ctx(ctx);

	rv_ctx_untrack(c);
	rv_notifier_stop(c);
	for (struct rv_qp *q = c->qps; q; q = q->next)
		rv_qpn_del(q);   /* their QPNs are no longer ours (another may draw one) */
	roshm_close(c->r);   /* closes every region: nothing stays behind in roshmd */
	while (c->mrs) {
		struct rv_mr *m = c->mrs;

		c->mrs = m->next;
		free(m);
	}
	rv_mw_free_all(c);
	while (c->xrcds) {   /* its XRC domains (xrc.c) */
		struct rv_xrcd *x = c->xrcds;

		c->xrcds = x->next;
		free(x);
	}
	if (ctx->async_fd >= 0)
		close(ctx->async_fd);
	free(c->aev);
	pthread_mutex_destroy(&c->lock);
	free(c->free_slots);
	free(c->ops);
	free(c);
	return 0;
}

RV_EXPORT int ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *a)
{
	struct rv_ctx *c = to_ctx(ctx);
	/* an MR or a memory window is a region of the client, a connected QP
	 * holds two (its inbound ring, its peer's), as does each peer MR it
	 * uses: roshmd lets it hold limits.max_handles at once (HELLO's reply) */
	int h = c->r->max_handles < 4096 ? (int)c->r->max_handles : 4096;

	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "roshm-0.1");
	a->node_guid = htobe64(c->guid);
	a->sys_image_guid = a->node_guid;
	a->max_mr_size = 1ull << 40;
	a->page_size_cap = RV_PAGE;
	a->vendor_id = 0;
	a->vendor_part_id = 0;
	a->max_qp = h / 2 ? h / 2 : 1;
	a->max_qp_wr = RV_MAX_WR;
	/* RNR NAKs: a SEND waits for a RECV (rnr_retry); no port events */
	a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SYS_IMAGE_GUID | IBV_DEVICE_SRQ_RESIZE |
			      IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B |   /* mw.c */
			      IBV_DEVICE_XRC;   /* xrc.c */
	a->max_mw = h;
	a->max_sge = RV_MAX_SGE;
	a->max_sge_rd = RV_MAX_SGE;   /* a READ scatters as a SEND gathers */
	a->max_cq = 4096;
	a->max_cqe = RV_MAX_CQE;
	a->max_mr = h;
	a->max_pd = 4096;
	a->max_srq = 4096;
	a->max_srq_wr = RV_MAX_SRQ_WR;
	a->max_srq_sge = RV_MAX_SGE;
	a->max_qp_rd_atom = RV_MAX_RD_ATOM;
	a->max_qp_init_rd_atom = RV_MAX_RD_ATOM;
	a->max_res_rd_atom = 4096;
	a->atomic_cap = IBV_ATOMIC_HCA;
	a->max_pkeys = 1;
	a->phys_port_cnt = 1;
	/* multicast (mcast.c): groups live in the registry; a datagram goes
	 * to RV_MC_MEMBERS of a group's QPs at most, a QP joins RV_MC_QP */
	a->max_mcast_grp = a->max_qp * RV_MC_QP;
	a->max_mcast_qp_attach = RV_MC_MEMBERS;
	a->max_total_mcast_qp_attach = a->max_qp * RV_MC_QP;
	return 0;
}

/*
 * ibv_query_device_ex: the attributes above, and a clock for completion
 * timestamps (cq_ex.c): CLOCK_MONOTONIC in ns, so 1 GHz (hca_core_clock is
 * in kHz) over 64 bits. Nothing else of the extended ones (ODP, TSO, RSS,
 * tag matching, packet pacing, device memory): zero, as a NIC without them.
 */
int rv_query_device_ex(struct ibv_context *ctx, const struct ibv_query_device_ex_input *in,
		       struct ibv_device_attr_ex *a, size_t len)
{
	struct ibv_device_attr_ex x;

	if ((in && in->comp_mask) || len < sizeof(x.orig_attr))
		return EINVAL;
	memset(&x, 0, sizeof(x));
	ibv_query_device(ctx, &x.orig_attr);
	x.completion_timestamp_mask = UINT64_MAX;
	x.hca_core_clock = 1000000;   /* kHz */
	x.device_cap_flags_ex = x.orig_attr.device_cap_flags;
	x.phys_port_cnt_ex = x.orig_attr.phys_port_cnt;
	memset(a, 0, len);
	memcpy(a, &x, len < sizeof(x) ? len : sizeof(x));
	return 0;
}

/* ibv_query_rt_values_ex: the clock's value now, in tv_nsec as providers
 * give their cycle counter; comp_mask comes back as what was answered */
int rv_query_rt_values(struct ibv_context *ctx, struct ibv_values_ex *v)
{
	uint32_t done = 0;

	(void)ctx;
	if (v->comp_mask & IBV_VALUES_MASK_RAW_CLOCK) {
		v->raw_clock.tv_sec = 0;
		v->raw_clock.tv_nsec = (long)rv_now_ns();
		done |= IBV_VALUES_MASK_RAW_CLOCK;
	}
	v->comp_mask = done;
	return 0;
}

static int rv_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *a, size_t len)
{
	struct ibv_port_attr pa;

	(void)ctx;

	if (port != 1)
		return EINVAL;
	memset(&pa, 0, sizeof(pa));
	pa.state = IBV_PORT_ACTIVE;
	pa.max_mtu = IBV_MTU_4096;
	pa.active_mtu = IBV_MTU_4096;
	pa.gid_tbl_len = 1;
	pa.max_msg_sz = RV_MSG_MAX;
	pa.pkey_tbl_len = 1;
	/* RoCE: no LID, no subnet manager; peers are addressed by GID */
	pa.lid = 0;
	pa.sm_lid = 0;
	pa.lmc = 0;
	pa.max_vl_num = 1;
	pa.active_width = 2;    /* 4x */
	pa.active_speed = 32;   /* EDR: 25 Gb/s per lane */
	pa.phys_state = 5;      /* LinkUp */
	pa.link_layer = IBV_LINK_LAYER_ETHERNET;
	pa.port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
	memcpy(a, &pa, len < sizeof(pa) ? len : sizeof(pa));
	return 0;
}

#undef ibv_query_port
RV_EXPORT int ibv_query_port(struct ibv_context *ctx, uint8_t port, struct _compat_ibv_port_attr *a)
{
	/* the compat struct is the leading part of struct ibv_port_attr */
	return rv_query_port(ctx, port, (struct ibv_port_attr *)a,
			     offsetof(struct ibv_port_attr, link_layer) + 1);
}

/*
 * One GID, RoCE v2: the IPv6 link-local address fe80::<hash of the node's
 * name>. It identifies the node (every pod of a node shows the same GID, as
 * every process on one NIC port does); roshm never routes by it.
 */
RV_EXPORT int ibv_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid)
{
	if (port != 1 || index != 0)
		return -1;
	gid->global.subnet_prefix = htobe64(0xfe80000000000000ull);
	gid->global.interface_id = htobe64(to_ctx(ctx)->guid);
	return 0;
}

RV_EXPORT int _ibv_query_gid_ex(struct ibv_context *ctx, uint32_t port, uint32_t index,
				struct ibv_gid_entry *e, uint32_t flags, size_t len)
{
	if (flags || len < sizeof(*e))
		return EINVAL;
	if (port != 1 || index != 0)
		return ENODATA;
	memset(e, 0, sizeof(*e));
	ibv_query_gid(ctx, 1, 0, &e->gid);
	e->port_num = 1;
	e->gid_type = IBV_GID_TYPE_ROCE_V2;
	e->ndev_ifindex = 0;
	return 0;
}

/* rdma-core's private call that ibv_devinfo imports (IBVERBS_PRIVATE_34):
 * the type of GID @index, 1 for RoCE v2 (enum ibv_gid_type_sysfs) */
int ibv_query_gid_type(struct ibv_context *ctx, uint8_t port, unsigned int index, int *type);
RV_EXPORT int ibv_query_gid_type(struct ibv_context *ctx, uint8_t port, unsigned int index,
				 int *type)
{
	(void)ctx;
	if (port != 1 || index != 0) {
		errno = EINVAL;
		return -1;
	}
	*type = 1;   /* IBV_GID_TYPE_SYSFS_ROCE_V2 */
	return 0;
}

RV_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *ctx, struct ibv_gid_entry *e,
				       size_t max_entries, uint32_t flags, size_t len)
{
	if (flags || len < sizeof(*e))
		return -EINVAL;
	if (!max_entries)
		return -EINVAL;   /* roshm0 has one GID */
	return _ibv_query_gid_ex(ctx, 1, 0, e, 0, sizeof(*e)) ? -EINVAL : 1;
}

RV_EXPORT int ibv_query_pkey(struct ibv_context *ctx, uint8_t port, int index, __be16 *pkey)
{
	(void)ctx;
	if (port != 1 || index != 0)
		return -1;
	*pkey = htobe16(0xffff);
	return 0;
}

RV_EXPORT int ibv_get_pkey_index(struct ibv_context *ctx, uint8_t port, __be16 pkey)
{
	(void)ctx;
	if (port == 1 && be16toh(pkey) == 0xffff)
		return 0;
	errno = ENOENT;
	return -1;
}

/* --------------------------------------------------------- PD, MR (memory) */

RV_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *ctx)
{
	struct ibv_pd *pd = calloc(1, sizeof(*pd));

	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	pd->context = ctx;
	return pd;
}

/* EBUSY while an MR, memory window, QP or SRQ of it lives, as on a NIC:
 * they name it by its address, which a later PD may reuse (an XRC SRQ's PD
 * says whose MRs its domain's peers reach, xrc.c). */
RV_EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
{
	struct rv_ctx *c = to_ctx(pd->context);
	bool busy = false;

	rv_lock(c);
	for (const struct rv_mr *m = c->mrs; m && !busy; m = m->next)
		busy = !m->dead && m->mr.pd == pd;
	for (const struct rv_mw *w = c->mws; w && !busy; w = w->next)
		busy = w->mw.pd == pd;
	for (const struct rv_qp *q = c->qps; q && !busy; q = q->next)
		busy = q->qp.pd == pd;
	for (const struct rv_srq *s = c->srqs; s && !busy; s = s->next)
		busy = s->srq.pd == pd;
	rv_unlock(c);
	if (busy)
		return EBUSY;
	free(pd);
	return 0;
}

/*
 * Create a region named @prefix and a random nonzero id of @digits hex digits
 * (8: 32 bits, 6: 24 bits), drawing another id while the name is taken in the
 * tenant (-EEXIST) or the registry did not take the record (-EAGAIN, a busy
 * file registry). 0 with *id and *handle, or -errno.
 */
int rv_create_named(struct rv_ctx *c, const char *prefix, int digits, uint64_t size,
		    const struct roshm_region_opts *opts, uint32_t *id, uint32_t *handle)
{
	uint32_t mask = digits >= 8 ? UINT32_MAX : (1u << (4 * digits)) - 1;
	char name[ROSHM_NAME_MAX];
	uint32_t v = 0;
	int ret = -EEXIST;

	for (int tries = 0; (ret == -EEXIST || ret == -EAGAIN) && tries < 50; tries++) {
		if (ret == -EAGAIN)
			usleep(20000u * (unsigned)(tries < 10 ? tries : 10));
		if (getrandom(&v, sizeof(v), 0) != sizeof(v) || !(v & mask))
			continue;
		v &= mask;
		snprintf(name, sizeof(name), "%s%0*" PRIx32, prefix, digits, v);
		ret = roshm_region_create(c->r, name, size, opts, handle);
	}
	if (!ret)
		*id = v;
	return ret;
}

/* roshm_region_create of @name, again while the registry did not take
 * the record (-EAGAIN, a busy file registry), 2 s at most. */
int rv_create(struct rv_ctx *c, const char *name, uint64_t size,
	      const struct roshm_region_opts *opts, uint32_t *handle)
{
	int ret = -EAGAIN;

	for (int tries = 0; ret == -EAGAIN && tries < 20; tries++) {
		if (tries)
			usleep(20000u * (unsigned)(tries < 10 ? tries : 10));
		ret = roshm_region_create(c->r, name, size, opts, handle);
	}
	return ret;
}

uint64_t rv_now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}
