// SPDX-License-Identifier: MIT
/*
 * libroshm-verbs: a libibverbs.so.1 for unmodified, dynamically linked verbs
 * applications. Placed first on LD_LIBRARY_PATH, it shows one device,
 * "roshm0", whose context is ours (the inline ibv_post_send / ibv_poll_cq of
 * rdma-core 44's <infiniband/verbs.h> call through context->ops), and carries
 * RDMA WRITE, READ and atomics over libroshm to the peer's roshmd.
 *
 * Memory: ibv_reg_mr() creates a libroshm region "ibv-mr-<rkey>" of one
 * metadata page plus the buffer's pages, copies the buffer in once and maps
 * the region's memfd over the buffer's own pages (MAP_FIXED | MAP_SHARED):
 * from then on the application's loads and stores and the peers' operations
 * act on the same bytes. The rkey alone names the region (the tenant's
 * registry), the metadata page says which virtual range it covers.
 * Data path: a WRITE copies its source into an arena slot, a READ lands in
 * one and is copied out on completion (one copy, on the requester only).
 * See docs/verbs-compat.md.
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

#include "roshm.h"

#define RV_EXPORT __attribute__((visibility("default")))
#define RV_PAGE 4096ull
#define RV_META_MAGIC 0x31524d5672687372ull /* "rshrVMR1" */
#define RV_META_TAG UINT64_MAX
#define RV_RKEY_CACHE 64
#define RV_MAX_INLINE 256
#define RV_MAX_WR 4096
#define RV_MAX_SGE 16

/* First page of every MR region: what the owner registered. Read by peers. */
struct rv_meta {
	uint64_t magic;
	uint64_t addr;          /* ibv_mr.addr */
	uint64_t length;
	uint64_t page_start;    /* data offset RV_PAGE maps here */
	uint32_t access;        /* IBV_ACCESS_* */
	uint32_t rkey;
};

struct rv_rkey {
	uint32_t rkey;
	uint32_t handle;
	bool valid;
	struct rv_meta m;
};

struct rv_mr {
	struct ibv_mr mr;
	struct rv_mr *next;
	uint32_t handle;
	uintptr_t page_start;
	size_t page_len;
};

struct rv_cq {
	struct ibv_cq cq;
	struct ibv_wc *wc;
	uint32_t mask, head, tail;
	bool overrun;
};

/* A send WR in flight; completions are reported in posting order (RC). */
struct rv_swr {
	uint64_t wr_id;
	uint32_t pending;       /* SQEs not yet completed */
	enum ibv_wc_status status;
	enum ibv_wc_opcode opcode;
	uint32_t byte_len;
	bool signaled;
};

struct rv_qp {
	struct ibv_qp qp;
	struct rv_swr *swr;
	uint32_t mask, head, tail;
	uint32_t max_send_wr;
	bool sq_sig_all;
	struct ibv_qp_cap cap;
	uint32_t dest_qp_num, rq_psn, sq_psn;
};

/* One SQE in flight: it owns arena slot == its index. */
struct rv_op {
	struct rv_qp *qp;
	uint32_t widx;
	uint32_t len;
	uint8_t kind;           /* 0 write, 1 read (copy out), 2 atomic (8-byte result) */
	void *dst;
};

struct rv_ctx {
	struct verbs_context vc;
	struct roshm *r;
	uint8_t *arena;
	uint64_t slot_size;
	uint32_t nslots;        /* slot nslots is the metadata slot */
	uint32_t *free_slots;
	uint32_t nfree;
	struct rv_op *ops;
	struct rv_mr *mrs;
	struct rv_rkey rkeys[RV_RKEY_CACHE];
	uint32_t rkey_next;
	bool meta_done;
	int meta_status;
	uint64_t guid;
};

static struct ibv_device rv_device = {
	.node_type = IBV_NODE_CA,
	.transport_type = IBV_TRANSPORT_IB,
	.name = "roshm0",
	.dev_name = "uverbs-roshm0",
	.dev_path = "",
	.ibdev_path = "",
};

static inline struct rv_ctx *to_ctx(struct ibv_context *c)
{
	return (struct rv_ctx *)((char *)c - offsetof(struct rv_ctx, vc.context));
}

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

static int rv_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
static int rv_req_notify_cq(struct ibv_cq *cq, int solicited_only);
static int rv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
static int rv_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
static int rv_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
static int rv_query_port(struct ibv_context *c, uint8_t port, struct ibv_port_attr *a, size_t len);

RV_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *d)
{
	struct roshm_params p;
	struct rv_ctx *c;
	const char *e;
	size_t arena_size;
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
	e = getenv("ROSHM_VERBS_ARENA");
	p.arena_size = e ? strtoull(e, NULL, 0) : 16ull << 20;
	c->r = roshm_open(&p, &err);
	if (!c->r) {
		free(c);
		errno = err < 0 ? -err : EIO;
		return NULL;
	}
	c->arena = roshm_arena(c->r, &arena_size);
	c->nslots = 256;
	while (c->nslots > 8 && arena_size / (c->nslots + 1) < 16384)
		c->nslots /= 2;
	c->slot_size = (arena_size / (c->nslots + 1)) & ~63ull;
	c->free_slots = calloc(c->nslots, sizeof(*c->free_slots));
	c->ops = calloc(c->nslots, sizeof(*c->ops));
	if (!c->free_slots || !c->ops || c->slot_size < sizeof(struct rv_meta)) {
		roshm_close(c->r);
		free(c->free_slots);
		free(c->ops);
		free(c);
		errno = ENOMEM;
		return NULL;
	}
	for (uint32_t i = 0; i < c->nslots; i++)
		c->free_slots[c->nfree++] = c->nslots - 1 - i;
	c->guid = fnv1a(c->r->node);
	c->vc.sz = sizeof(c->vc);
	c->vc.query_port = rv_query_port;
	c->vc.context.device = d;
	c->vc.context.abi_compat = __VERBS_ABI_IS_EXTENDED;
	c->vc.context.cmd_fd = -1;
	c->vc.context.async_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	c->vc.context.num_comp_vectors = 1;
	pthread_mutex_init(&c->vc.context.mutex, NULL);
	c->vc.context.ops.poll_cq = rv_poll_cq;
	c->vc.context.ops.req_notify_cq = rv_req_notify_cq;
	c->vc.context.ops.post_send = rv_post_send;
	c->vc.context.ops.post_recv = rv_post_recv;
	c->vc.context.ops.post_srq_recv = rv_post_srq_recv;
	return &c->vc.context;
}

RV_EXPORT int ibv_close_device(struct ibv_context *ctx)
{
	struct rv_ctx *c = to_ctx(ctx);

	roshm_close(c->r);   /* closes every region: nothing stays behind in roshmd */
	if (ctx->async_fd >= 0)
		close(ctx->async_fd);
	free(c->free_slots);
	free(c->ops);
	free(c);
	return 0;
}

RV_EXPORT int ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *a)
{
	struct rv_ctx *c = to_ctx(ctx);

	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "roshm-0.1");
	a->node_guid = htobe64(c->guid);
	a->sys_image_guid = a->node_guid;
	a->max_mr_size = 1ull << 40;
	a->page_size_cap = RV_PAGE;
	a->vendor_id = 0;
	a->vendor_part_id = 0;
	a->max_qp = 4096;
	a->max_qp_wr = RV_MAX_WR;
	a->device_cap_flags = 0;
	a->max_sge = RV_MAX_SGE;
	a->max_cq = 4096;
	a->max_cqe = 65536;
	a->max_mr = 4096;
	a->max_pd = 4096;
	a->max_qp_rd_atom = 16;
	a->max_qp_init_rd_atom = 16;
	a->max_res_rd_atom = 4096;
	a->atomic_cap = IBV_ATOMIC_HCA;
	a->max_pkeys = 1;
	a->phys_port_cnt = 1;
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
	pa.max_msg_sz = 1u << 30;
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

RV_EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
{
	free(pd);
	return 0;
}

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RV_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define RV_ASAN 1
#endif
/*
 * The whole pages around a buffer move into the region, other objects of
 * those pages with it (they keep working: same address, same bytes). Under
 * ASan the bytes around the buffer are other objects' redzones, which a
 * checked memcpy refuses: copy them unchecked there.
 */
#ifdef RV_ASAN
__attribute__((no_sanitize("address"))) static void copy_pages(void *dst, const void *src,
								size_t n)
{
	volatile uint64_t *d = dst;
	const volatile uint64_t *s = src;

	for (size_t i = 0; i < n / 8; i++) /* whole pages: whole words */
		d[i] = s[i];
}
#else
static void copy_pages(void *dst, const void *src, size_t n)
{
	memcpy(dst, src, n);
}
#endif

#undef ibv_reg_mr
RV_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	struct rv_ctx *c = to_ctx(pd->context);
	uintptr_t start = (uintptr_t)addr & ~(RV_PAGE - 1);
	uintptr_t end = ((uintptr_t)addr + length + RV_PAGE - 1) & ~(RV_PAGE - 1);
	struct rv_meta *meta;
	struct rv_mr *m;
	uint64_t data_off;
	uint32_t handle = 0, rkey = 0;
	char name[ROSHM_NAME_MAX];
	int ret = -EEXIST, fd;
	void *map;

	if (!addr || !length || (uintptr_t)addr + length < (uintptr_t)addr) {
		errno = EINVAL;
		return NULL;
	}
	/* Two regions cannot both own one page: overlapping registrations are refused. */
	for (m = c->mrs; m; m = m->next)
		if (start < m->page_start + m->page_len && m->page_start < end) {
			errno = EINVAL;
			return NULL;
		}
	m = calloc(1, sizeof(*m));
	if (!m) {
		errno = ENOMEM;
		return NULL;
	}
	/* -EEXIST: that rkey is taken in the tenant, draw another; -EAGAIN: the
	 * registry did not take the record this time (a busy file registry) */
	for (int tries = 0; (ret == -EEXIST || ret == -EAGAIN) && tries < 50; tries++) {
		if (ret == -EAGAIN)
			usleep(20000u * (unsigned)(tries < 10 ? tries : 10));
		if (getrandom(&rkey, sizeof(rkey), 0) != sizeof(rkey) || !rkey)
			continue;
		snprintf(name, sizeof(name), "ibv-mr-%08" PRIx32, rkey);
		ret = roshm_region_create(c->r, name, RV_PAGE + (end - start), NULL, &handle);
	}
	if (ret)
		goto err;
	meta = roshm_region_data(c->r, handle, NULL);
	fd = roshm_region_fd(c->r, handle, &data_off);
	if (!meta || fd < 0) {
		ret = fd < 0 ? fd : -EIO;
		goto err_region;
	}
	/* The one copy: the buffer's current bytes go into the region, then the
	 * region's pages take the buffer's place at the same virtual address. */
	copy_pages((uint8_t *)meta + RV_PAGE, (const void *)start, end - start);
	map = mmap((void *)start, end - start, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
		   fd, (off_t)(data_off + RV_PAGE));
	close(fd);
	if (map == MAP_FAILED) {
		ret = -errno;
		goto err_region;
	}
	*meta = (struct rv_meta){ .magic = RV_META_MAGIC, .addr = (uintptr_t)addr,
				  .length = length, .page_start = start,
				  .access = (uint32_t)access, .rkey = rkey };
	m->mr.context = pd->context;
	m->mr.pd = pd;
	m->mr.addr = addr;
	m->mr.length = length;
	m->mr.handle = handle;
	m->mr.lkey = rkey;
	m->mr.rkey = rkey;
	m->handle = handle;
	m->page_start = start;
	m->page_len = end - start;
	m->next = c->mrs;
	c->mrs = m;
	return &m->mr;
err_region:
	roshm_region_close(c->r, handle);
err:
	free(m);
	if (getenv("ROSHM_VERBS_DEBUG"))
		fprintf(stderr, "roshm-verbs: reg_mr %p+%zu: %s\n", addr, length, strerror(-ret));
	errno = ret == -EDQUOT || ret == -ENOSPC ? ENOMEM : -ret;
	return NULL;
}

RV_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
					  uint64_t iova, unsigned int access)
{
	if (iova != (uintptr_t)addr) {
		errno = EOPNOTSUPP;   /* remote addresses are the owner's virtual addresses */
		return NULL;
	}
	return ibv_reg_mr(pd, addr, length, (int)(access & ~IBV_ACCESS_OPTIONAL_RANGE));
}

RV_EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
{
	struct rv_ctx *c = to_ctx(mr->context);
	struct rv_mr *m = (struct rv_mr *)mr, **pp;

	for (pp = &c->mrs; *pp && *pp != m; pp = &(*pp)->next)
		;
	if (!*pp)
		return EINVAL;
	*pp = m->next;
	/* roshmd forgets the region; the application keeps its bytes (our
	 * MAP_SHARED view keeps the memfd alive until the pages are unmapped). */
	roshm_region_close(c->r, m->handle);
	free(m);
	return 0;
}

/* --------------------------------------------------------------- CQ, channel */

RV_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *ctx)
{
	struct ibv_comp_channel *ch = calloc(1, sizeof(*ch));

	if (!ch) {
		errno = ENOMEM;
		return NULL;
	}
	ch->context = ctx;
	ch->fd = eventfd(0, EFD_CLOEXEC);
	if (ch->fd < 0) {
		free(ch);
		return NULL;
	}
	return ch;
}

RV_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *ch)
{
	close(ch->fd);
	free(ch);
	return 0;
}

RV_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
				       struct ibv_comp_channel *channel, int comp_vector)
{
	struct rv_cq *q;
	uint32_t n = 1024;

	(void)comp_vector;
	if (cqe < 1 || cqe > 65536) {
		errno = EINVAL;
		return NULL;
	}
	while (n < 2u * (uint32_t)cqe)
		n <<= 1;
	q = calloc(1, sizeof(*q));
	if (q)
		q->wc = calloc(n, sizeof(*q->wc));
	if (!q || !q->wc) {
		free(q);
		errno = ENOMEM;
		return NULL;
	}
	q->mask = n - 1;
	q->cq.context = ctx;
	q->cq.channel = channel;
	q->cq.cq_context = cq_context;
	q->cq.cqe = cqe;
	pthread_mutex_init(&q->cq.mutex, NULL);
	pthread_cond_init(&q->cq.cond, NULL);
	return &q->cq;
}

RV_EXPORT int ibv_destroy_cq(struct ibv_cq *cq)
{
	struct rv_cq *q = (struct rv_cq *)cq;

	free(q->wc);
	free(q);
	return 0;
}

/* Completion events would need a waiter on roshmd's CQ eventfd that turns
 * into channel events per CQ: not in this slice (docs/verbs-compat.md). */
static int rv_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	(void)cq;
	(void)solicited_only;
	return EOPNOTSUPP;
}

RV_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **cq_context)
{
	(void)ch;
	(void)cq;
	(void)cq_context;
	errno = EOPNOTSUPP;
	return -1;
}

RV_EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	(void)cq;
	(void)nevents;
}

/* ------------------------------------------------------------------- QPs */

RV_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
	struct rv_qp *q;
	uint32_t n = 1, qpn = 0;

	if (a->qp_type != IBV_QPT_RC || a->srq) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!a->send_cq || !a->recv_cq || a->cap.max_send_wr > RV_MAX_WR ||
	    a->cap.max_send_sge > RV_MAX_SGE || a->cap.max_inline_data > RV_MAX_INLINE) {
		errno = EINVAL;
		return NULL;
	}
	while (n < a->cap.max_send_wr)
		n <<= 1;
	q = calloc(1, sizeof(*q));
	if (q)
		q->swr = calloc(n, sizeof(*q->swr));
	if (!q || !q->swr) {
		free(q);
		errno = ENOMEM;
		return NULL;
	}
	while (!qpn)
		if (getrandom(&qpn, sizeof(qpn), 0) == sizeof(qpn))
			qpn &= 0xffffff;
	q->mask = n - 1;
	q->max_send_wr = a->cap.max_send_wr ? a->cap.max_send_wr : 1;
	q->sq_sig_all = a->sq_sig_all;
	q->cap = a->cap;
	q->cap.max_recv_wr = 0;    /* no RECV in this slice */
	q->cap.max_recv_sge = 0;
	q->cap.max_inline_data = RV_MAX_INLINE;
	a->cap = q->cap;
	q->qp.context = pd->context;
	q->qp.qp_context = a->qp_context;
	q->qp.pd = pd;
	q->qp.send_cq = a->send_cq;
	q->qp.recv_cq = a->recv_cq;
	q->qp.qp_num = qpn;
	q->qp.state = IBV_QPS_RESET;
	q->qp.qp_type = IBV_QPT_RC;
	pthread_mutex_init(&q->qp.mutex, NULL);
	pthread_cond_init(&q->qp.cond, NULL);
	return &q->qp;
}

RV_EXPORT int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	struct rv_qp *q = (struct rv_qp *)qp;

	if (mask & IBV_QP_STATE) {
		if (a->qp_state > IBV_QPS_ERR)
			return EINVAL;
		qp->state = a->qp_state;
	}
	if (mask & IBV_QP_DEST_QPN)
		q->dest_qp_num = a->dest_qp_num;
	if (mask & IBV_QP_RQ_PSN)
		q->rq_psn = a->rq_psn;
	if (mask & IBV_QP_SQ_PSN)
		q->sq_psn = a->sq_psn;
	return 0;
}

RV_EXPORT int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask,
			   struct ibv_qp_init_attr *init)
{
	struct rv_qp *q = (struct rv_qp *)qp;

	(void)mask;
	memset(a, 0, sizeof(*a));
	a->qp_state = qp->state;
	a->cur_qp_state = qp->state;
	a->path_mtu = IBV_MTU_4096;
	a->dest_qp_num = q->dest_qp_num;
	a->rq_psn = q->rq_psn;
	a->sq_psn = q->sq_psn;
	a->cap = q->cap;
	if (init) {
		memset(init, 0, sizeof(*init));
		init->qp_context = qp->qp_context;
		init->send_cq = qp->send_cq;
		init->recv_cq = qp->recv_cq;
		init->cap = q->cap;
		init->qp_type = IBV_QPT_RC;
		init->sq_sig_all = q->sq_sig_all;
	}
	return 0;
}

RV_EXPORT int ibv_destroy_qp(struct ibv_qp *qp)
{
	struct rv_qp *q = (struct rv_qp *)qp;
	struct rv_ctx *c = to_ctx(qp->context);

	if (q->head != q->tail) {
		/* SQEs still in roshmd name this QP: let them drain first */
		struct timespec t0, t;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		do {
			struct ibv_wc wc;

			rv_poll_cq(qp->send_cq, 0, &wc);
			clock_gettime(CLOCK_MONOTONIC, &t);
		} while (q->head != q->tail && t.tv_sec - t0.tv_sec < 10);
		if (q->head != q->tail)
			return EBUSY;
	}
	(void)c;
	free(q->swr);
	free(q);
	return 0;
}

RV_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	(void)qp;
	return NULL;   /* QPs are not created with ibv_create_qp_ex: no new post API */
}

/* ------------------------------------------------------------- data path */

static void cq_push(struct ibv_cq *cq, const struct ibv_wc *wc)
{
	struct rv_cq *q = (struct rv_cq *)cq;

	if (q->tail - q->head > q->mask) {
		q->overrun = true;
		return;
	}
	q->wc[q->tail++ & q->mask] = *wc;
}

/* Report the QP's finished WRs in posting order. */
static void qp_retire(struct rv_qp *q)
{
	while (q->head != q->tail) {
		struct rv_swr *w = &q->swr[q->head & q->mask];
		struct ibv_wc wc;

		if (w->pending)
			break;
		if (w->status != IBV_WC_SUCCESS)
			q->qp.state = IBV_QPS_ERR;
		if (w->signaled || w->status != IBV_WC_SUCCESS) {
			memset(&wc, 0, sizeof(wc));
			wc.wr_id = w->wr_id;
			wc.status = w->status;
			wc.opcode = w->opcode;
			wc.byte_len = w->byte_len;
			wc.qp_num = q->qp.qp_num;
			wc.vendor_err = 0;
			cq_push(q->qp.send_cq, &wc);
		}
		q->head++;
	}
}

static enum ibv_wc_status wc_status(int st)
{
	switch (st) {
	case 0:
		return IBV_WC_SUCCESS;
	case -EACCES: case -EPERM: case -ERANGE: case -EBADF: case -ESTALE: case -ENOENT:
	case -EFAULT:
		return IBV_WC_REM_ACCESS_ERR;
	case -EINVAL:
		return IBV_WC_REM_INV_REQ_ERR;
	case -EHOSTUNREACH: case -ECONNRESET: case -ETIMEDOUT: case -EIO:
		return IBV_WC_RETRY_EXC_ERR;
	default:
		return IBV_WC_REM_OP_ERR;
	}
}

/* Reap roshmd's completions: copy READ data and atomic results out, finish WRs. */
static void progress(struct rv_ctx *c)
{
	struct roshm_cqe *cqes[32];
	unsigned n = roshm_peek_batch_cqe(c->r, cqes, 32);

	for (unsigned i = 0; i < n; i++) {
		struct roshm_cqe *e = cqes[i];
		struct rv_op *op;
		struct rv_swr *w;

		if (e->user_data == RV_META_TAG) {
			c->meta_done = true;
			c->meta_status = e->status;
			continue;
		}
		if (e->user_data >= c->nslots)
			continue;
		op = &c->ops[e->user_data];
		w = &op->qp->swr[op->widx & op->qp->mask];
		if (e->status) {
			if (w->status == IBV_WC_SUCCESS)
				w->status = wc_status(e->status);
		} else if (op->kind == 1) {
			memcpy(op->dst, c->arena + e->user_data * c->slot_size, op->len);
		} else if (op->kind == 2) {
			memcpy(op->dst, &e->result, 8);
		}
		c->free_slots[c->nfree++] = (uint32_t)e->user_data;
		w->pending--;
		if (!w->pending)
			qp_retire(op->qp);
	}
	if (n)
		roshm_cq_advance(c->r, n);
}

static int rv_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	struct rv_cq *q = (struct rv_cq *)cq;
	int got = 0;

	progress(to_ctx(cq->context));
	if (q->overrun && q->head == q->tail)
		return -1;
	while (got < n && q->head != q->tail)
		wc[got++] = q->wc[q->head++ & q->mask];
	return got;
}

/* The remote MR behind @rkey: open "ibv-mr-<rkey>" in our tenant and read its
 * metadata page once; cached. A failed lookup leaves nothing cached. */
static struct rv_rkey *resolve(struct rv_ctx *c, uint32_t rkey)
{
	struct rv_rkey *k;
	struct roshm_sqe *sqe;
	char name[ROSHM_NAME_MAX];
	uint64_t size;
	uint32_t h;
	struct timespec t0, t;

	for (unsigned i = 0; i < RV_RKEY_CACHE; i++)
		if (c->rkeys[i].valid && c->rkeys[i].rkey == rkey)
			return &c->rkeys[i];
	k = &c->rkeys[c->rkey_next++ % RV_RKEY_CACHE];
	if (k->valid) {
		roshm_region_close(c->r, k->handle);
		k->valid = false;
	}
	snprintf(name, sizeof(name), "ibv-mr-%08" PRIx32, rkey);
	if (roshm_region_open(c->r, name, &h, &size))
		return NULL;
	sqe = roshm_get_sqe(c->r);
	if (!sqe)
		goto err;
	roshm_prep_read(sqe, h, 0, c->nslots * c->slot_size, sizeof(struct rv_meta));
	roshm_sqe_set_data(sqe, RV_META_TAG);
	c->meta_done = false;
	roshm_submit(c->r);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		progress(c);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (!c->meta_done && t.tv_sec - t0.tv_sec < 10);
	if (!c->meta_done || c->meta_status)
		goto err;
	memcpy(&k->m, c->arena + c->nslots * c->slot_size, sizeof(k->m));
	if (k->m.magic != RV_META_MAGIC || k->m.rkey != rkey ||
	    k->m.page_start & (RV_PAGE - 1) || k->m.addr < k->m.page_start ||
	    k->m.length > size || k->m.addr - k->m.page_start > size - RV_PAGE - k->m.length)
		goto err;
	k->rkey = rkey;
	k->handle = h;
	k->valid = true;
	return k;
err:
	roshm_region_close(c->r, h);
	return NULL;
}

static bool local_ok(struct rv_ctx *c, const struct ibv_sge *s)
{
	for (struct rv_mr *m = c->mrs; m; m = m->next)
		if (m->mr.lkey == s->lkey && s->addr >= (uintptr_t)m->mr.addr &&
		    s->length <= m->mr.length &&
		    s->addr - (uintptr_t)m->mr.addr <= m->mr.length - s->length)
			return true;
	return false;
}

static int post_one(struct rv_ctx *c, struct rv_qp *q, struct ibv_send_wr *wr)
{
	struct rv_swr *w;
	struct rv_rkey *k;
	uint64_t len = 0, need, roff = 0, access = 0;
	uint8_t kind;
	enum ibv_wc_opcode wop;

	switch (wr->opcode) {
	case IBV_WR_RDMA_WRITE:
		kind = 0, wop = IBV_WC_RDMA_WRITE, access = IBV_ACCESS_REMOTE_WRITE;
		break;
	case IBV_WR_RDMA_READ:
		kind = 1, wop = IBV_WC_RDMA_READ, access = IBV_ACCESS_REMOTE_READ;
		break;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		kind = 2, wop = IBV_WC_FETCH_ADD, access = IBV_ACCESS_REMOTE_ATOMIC;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		kind = 2, wop = IBV_WC_COMP_SWAP, access = IBV_ACCESS_REMOTE_ATOMIC;
		break;
	default:
		return EOPNOTSUPP;
	}
	if (wr->num_sge < 0 || wr->num_sge > RV_MAX_SGE)
		return EINVAL;
	if (kind == 2 && (wr->num_sge != 1 || wr->sg_list[0].length != 8))
		return EINVAL;
	if (kind == 1 && wr->num_sge > 1)
		return EINVAL;    /* scatter of one READ: one SGE in this slice */
	for (int i = 0; i < wr->num_sge; i++)
		len += wr->sg_list[i].length;
	if ((wr->send_flags & IBV_SEND_INLINE) && (kind || len > RV_MAX_INLINE))
		return EINVAL;
	if (q->tail - q->head >= q->max_send_wr)
		return ENOMEM;
	need = kind == 2 ? 1 : (len + c->slot_size - 1) / c->slot_size;
	if (!need)
		need = 1;
	/* Arena slots and SQEs are this library's, not the application's queue:
	 * when they run short, wait for roshmd's completions (bounded). */
	{
		struct timespec t0, t;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		while (c->nfree < need) {
			progress(c);
			clock_gettime(CLOCK_MONOTONIC, &t);
			if (t.tv_sec - t0.tv_sec >= 10)
				return ENOMEM;
		}
	}
	w = &q->swr[q->tail & q->mask];
	memset(w, 0, sizeof(*w));
	w->wr_id = wr->wr_id;
	w->opcode = wop;
	w->byte_len = kind == 2 ? 8 : (uint32_t)len;
	w->signaled = q->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
	w->status = IBV_WC_SUCCESS;
	q->tail++;
	if (q->qp.state == IBV_QPS_ERR) {
		w->status = IBV_WC_WR_FLUSH_ERR;
		qp_retire(q);
		return 0;
	}
	if (!(wr->send_flags & IBV_SEND_INLINE))
		for (int i = 0; i < wr->num_sge; i++)
			if (!local_ok(c, &wr->sg_list[i])) {
				w->status = IBV_WC_LOC_PROT_ERR;
				qp_retire(q);
				return 0;
			}
	{
		uint64_t raddr = kind == 2 ? wr->wr.atomic.remote_addr : wr->wr.rdma.remote_addr;
		uint32_t rkey = kind == 2 ? wr->wr.atomic.rkey : wr->wr.rdma.rkey;
		uint64_t rlen = kind == 2 ? 8 : len;

		k = resolve(c, rkey);
		if (!k || !(k->m.access & access) || raddr < k->m.addr || rlen > k->m.length ||
		    raddr - k->m.addr > k->m.length - rlen || (kind == 2 && (raddr & 7))) {
			w->status = IBV_WC_REM_ACCESS_ERR;
			qp_retire(q);
			return 0;
		}
		roff = RV_PAGE + (raddr - k->m.page_start);
	}
	w->pending = (uint32_t)need;
	if (kind == 2) {
		uint32_t slot = c->free_slots[--c->nfree];
		struct roshm_sqe *sqe = roshm_get_sqe(c->r);

		if (!sqe) {
			roshm_submit(c->r);
			while (!(sqe = roshm_get_sqe(c->r)))
				progress(c);
		}
		if (wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD)
			roshm_prep_fetch_add(sqe, k->handle, roff, wr->wr.atomic.compare_add);
		else
			roshm_prep_cmp_swap(sqe, k->handle, roff, wr->wr.atomic.compare_add,
					    wr->wr.atomic.swap);
		roshm_sqe_set_data(sqe, slot);
		c->ops[slot] = (struct rv_op){ .qp = q, .widx = q->tail - 1, .len = 8, .kind = 2,
					       .dst = (void *)(uintptr_t)wr->sg_list[0].addr };
		return 0;
	}
	/* WRITE / READ, in arena-slot-sized chunks; a WRITE gathers its SGEs */
	{
		int sg = 0;
		uint64_t sg_off = 0, done = 0;

		for (uint64_t i = 0; i < need; i++) {
			uint32_t slot = c->free_slots[--c->nfree];
			uint64_t chunk = len - done < c->slot_size ? len - done : c->slot_size;
			uint8_t *buf = c->arena + slot * c->slot_size;
			struct roshm_sqe *sqe;

			if (kind == 0)
				for (uint64_t got = 0; got < chunk;) {
					const struct ibv_sge *s = &wr->sg_list[sg];
					uint64_t take = s->length - sg_off;

					if (take > chunk - got)
						take = chunk - got;
					memcpy(buf + got, (void *)(uintptr_t)(s->addr + sg_off), take);
					got += take;
					sg_off += take;
					if (sg_off == s->length)
						sg++, sg_off = 0;
				}
			sqe = roshm_get_sqe(c->r);
			if (!sqe) {
				roshm_submit(c->r);
				while (!(sqe = roshm_get_sqe(c->r)))
					progress(c);
			}
			if (!chunk)
				roshm_prep_nop(sqe);
			else if (kind == 0)
				roshm_prep_write(sqe, k->handle, roff + done, slot * c->slot_size,
						 (uint32_t)chunk);
			else
				roshm_prep_read(sqe, k->handle, roff + done, slot * c->slot_size,
						(uint32_t)chunk);
			roshm_sqe_set_data(sqe, slot);
			c->ops[slot] = (struct rv_op){ .qp = q, .widx = q->tail - 1,
						       .len = (uint32_t)chunk, .kind = kind,
						       .dst = kind == 1 ? (void *)(uintptr_t)
							     (wr->sg_list[0].addr + done) : NULL };
			done += chunk;
		}
	}
	return 0;
}

static int rv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct rv_ctx *c = to_ctx(qp->context);
	struct rv_qp *q = (struct rv_qp *)qp;
	int ret = 0;

	if (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_ERR) {
		*bad = wr;
		return EINVAL;
	}
	for (; wr; wr = wr->next) {
		ret = post_one(c, q, wr);
		if (ret) {
			*bad = wr;
			break;
		}
	}
	roshm_submit(c->r);   /* one doorbell for the chain */
	return ret;
}

/* SEND/RECV are not in this slice: no receive queue exists. */
static int rv_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	(void)qp;
	*bad = wr;
	return EOPNOTSUPP;
}

static int rv_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	(void)srq;
	*bad = wr;
	return EOPNOTSUPP;
}
