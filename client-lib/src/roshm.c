// SPDX-License-Identifier: MIT
/* libroshm slow path: attach, regions, submit, waiting, admin. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "roshm.h"
#include "roshm_internal.h"

struct roshm_owned {
	struct roshm_owned *next;
	uint32_t handle;
	void *map;
	size_t map_size;
	uint8_t *data;
	uint64_t data_size;
};

static const char *env_or(const char *v, const char *env, const char *dflt)
{
	const char *e;

	if (v)
		return v;
	e = getenv(env);
	return e && *e ? e : dflt;
}

static void close_fds(int *fds, int n)
{
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0) {
			close(fds[i]);
			fds[i] = -1;
		}
}

int roshm__ctl_call(int fd, void *req, size_t req_len, void *reply, size_t reply_max,
		    int *fds, int nfds_max, int *nfds)
{
	struct roshm_ctl_hdr *rh = reply;
	union {
		char buf[CMSG_SPACE(sizeof(int) * 8)];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = reply, .iov_len = reply_max };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = u.buf, .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *c;
	ssize_t n;
	int got = 0;

	if (nfds)
		*nfds = 0;
	do {
		n = send(fd, req, req_len, MSG_NOSIGNAL);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EPIPE ? -ECONNRESET : -errno;
	do {
		n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (n == 0)
		return -ECONNRESET;
	for (c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		int cnt = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		int *p = (int *)CMSG_DATA(c);

		for (int i = 0; i < cnt; i++) {
			if (fds && got < nfds_max)
				fds[got++] = p[i];
			else
				close(p[i]);
		}
	}
	if (nfds)
		*nfds = got;
	if ((size_t)n < sizeof(*rh) || rh->magic != ROSHM_CTL_MAGIC || rh->len != (uint32_t)n ||
	    (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		close_fds(fds, got);
		if (nfds)
			*nfds = 0;
		return -EPROTO;
	}
	return 0;
}

static void ctl_hdr(struct roshm_ctl_hdr *h, uint16_t type, size_t len)
{
	h->magic = ROSHM_CTL_MAGIC;
	h->type = type;
	h->version = ROSHM_ABI_VERSION;
	h->len = (uint32_t)len;
	h->status = 0;
}

static int sock_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	return fd;
}

static int copy_name(char *dst, size_t cap, const char *src)
{
	size_t n = strlen(src);

	if (n >= cap)
		return -EINVAL;
	memset(dst, 0, cap);
	memcpy(dst, src, n);
	return 0;
}

/* The channel header comes from roshmd; check it anyway so a bad daemon
 * or a version skew is -EPROTO instead of a wild pointer. */
static int check_chan(const struct roshm_chan_hdr *h, size_t size)
{
	uint64_t sq_end, cq_end;

	if (h->magic != ROSHM_CHAN_MAGIC || h->abi_version != ROSHM_ABI_VERSION ||
	    h->total_size != size)
		return -EPROTO;
	if (!h->sq_entries || (h->sq_entries & (h->sq_entries - 1)) ||
	    !h->cq_entries || (h->cq_entries & (h->cq_entries - 1)))
		return -EPROTO;
	sq_end = h->sq_off + (uint64_t)h->sq_entries * sizeof(struct roshm_sqe);
	cq_end = h->cq_off + (uint64_t)h->cq_entries * sizeof(struct roshm_cqe);
	if (h->sq_idx_off + sizeof(struct roshm_ring_idx) > size ||
	    h->cq_idx_off + sizeof(struct roshm_ring_idx) > size ||
	    sq_end > size || cq_end > size || h->arena_off > size ||
	    h->arena_size > size - h->arena_off)
		return -EPROTO;
	return 0;
}

struct roshm *roshm_open(const struct roshm_params *p, int *err)
{
	struct roshm_params dflt = { 0 };
	struct roshm_ctl_hello req;
	struct roshm_ctl_hello_reply rep;
	int fds[ROSHM_HELLO_NFDS] = { -1, -1, -1 };
	struct roshm *r = NULL;
	struct roshm_chan_hdr *h;
	struct stat st;
	int nfds = 0, ret, fd;
	void *map;

	if (!p)
		p = &dflt;
	memset(&req, 0, sizeof(req));
	ctl_hdr(&req.hdr, ROSHM_CTL_HELLO, sizeof(req));
	if (copy_name(req.tenant, sizeof(req.tenant), env_or(p->tenant, "ROSHM_TENANT", "default")) ||
	    copy_name(req.token, sizeof(req.token), env_or(p->token, "ROSHM_TOKEN", ""))) {
		ret = -EINVAL;
		goto err;
	}
	req.sq_entries = p->sq_entries;
	req.cq_entries = p->cq_entries;
	req.arena_size = p->arena_size;

	fd = sock_connect(env_or(p->sock_path, "ROSHM_SOCK", ROSHM_DEFAULT_SOCK));
	if (fd < 0) {
		ret = fd;
		goto err;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		close(fd);
		ret = -ENOMEM;
		goto err;
	}
	r->sock_fd = fd;
	r->sq_event_fd = r->cq_event_fd = -1;
	r->spin_us = p->spin_us ? p->spin_us : 50;

	ret = roshm__ctl_call(fd, &req, sizeof(req), &rep, sizeof(rep), fds, ROSHM_HELLO_NFDS, &nfds);
	if (ret)
		goto err_close;
	if (rep.hdr.status) {
		ret = rep.hdr.status < 0 ? rep.hdr.status : -EPROTO;
		goto err_fds;
	}
	if (rep.hdr.len != sizeof(rep) || nfds != ROSHM_HELLO_NFDS) {
		ret = -EPROTO;
		goto err_fds;
	}
	if (fstat(fds[ROSHM_HELLO_FD_CHAN], &st) < 0 || (uint64_t)st.st_size < rep.chan_size ||
	    rep.chan_size < ROSHM_CHAN_HDR_SIZE || rep.chan_size > SIZE_MAX) {
		ret = -EPROTO;
		goto err_fds;
	}
	map = mmap(NULL, rep.chan_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		   fds[ROSHM_HELLO_FD_CHAN], 0);
	if (map == MAP_FAILED) {
		ret = -errno;
		goto err_fds;
	}
	close(fds[ROSHM_HELLO_FD_CHAN]);
	fds[ROSHM_HELLO_FD_CHAN] = -1;
	r->chan = map;
	r->chan_size = rep.chan_size;
	h = map;
	ret = check_chan(h, rep.chan_size);
	if (ret)
		goto err_fds;

	r->sq_event_fd = fds[ROSHM_HELLO_FD_SQ_EVENT];
	r->cq_event_fd = fds[ROSHM_HELLO_FD_CQ_EVENT];
	r->client_id = rep.client_id;
	memcpy(r->node, rep.node, sizeof(r->node));
	r->node[sizeof(r->node) - 1] = 0;

	struct roshm_ring_idx *sqi = (void *)((uint8_t *)map + h->sq_idx_off);
	struct roshm_ring_idx *cqi = (void *)((uint8_t *)map + h->cq_idx_off);

	r->sq.khead = &sqi->head;
	r->sq.ktail = &sqi->tail;
	r->sq.kflags = &h->sq_flags;
	r->sq.sqes = (void *)((uint8_t *)map + h->sq_off);
	r->sq.entries = h->sq_entries;
	r->sq.mask = h->sq_entries - 1;
	r->sq.sqe_head = r->sq.sqe_tail = *r->sq.ktail;
	r->cq.khead = &cqi->head;
	r->cq.ktail = &cqi->tail;
	r->cq.kflags = &h->cq_flags;
	r->cq.cqes = (void *)((uint8_t *)map + h->cq_off);
	r->cq.entries = h->cq_entries;
	r->cq.mask = h->cq_entries - 1;
	r->arena = (uint8_t *)map + h->arena_off;
	r->arena_size = h->arena_size;
	*err = 0;
	return r;

err_fds:
	close_fds(fds, nfds);
err_close:
	if (r->chan)
		munmap(r->chan, r->chan_size);
	close(r->sock_fd);
	free(r);
err:
	*err = ret;
	return NULL;
}

void roshm_close(struct roshm *r)
{
	struct roshm_owned *o, *next;

	if (!r)
		return;
	for (o = r->owned; o; o = next) {
		next = o->next;
		munmap(o->map, o->map_size);
		free(o);
	}
	/* Closing the socket tells roshmd to release every handle and region. */
	close(r->sock_fd);
	close(r->sq_event_fd);
	close(r->cq_event_fd);
	munmap(r->chan, r->chan_size);
	free(r);
}

int roshm_region_create(struct roshm *r, const char *name, uint64_t size,
			const struct roshm_region_opts *opts, uint32_t *handle)
{
	struct roshm_ctl_region_create req;
	struct roshm_ctl_region_reply rep;
	struct roshm_owned *o;
	struct stat st;
	int fd = -1, nfds, ret;
	void *map;

	if (!name || !handle)
		return -EINVAL;
	memset(&req, 0, sizeof(req));
	ctl_hdr(&req.hdr, ROSHM_CTL_REGION_CREATE, sizeof(req));
	if (copy_name(req.name, sizeof(req.name), name))
		return -EINVAL;
	req.size = size;
	if (opts) {
		req.policy = opts->policy;
		req.ntenants = opts->ntenants;
		if (opts->ntenants > ROSHM_POLICY_TENANTS_MAX)
			return -EINVAL;
		for (uint32_t i = 0; i < opts->ntenants; i++)
			if (!opts->tenants[i] ||
			    copy_name(req.tenants[i], sizeof(req.tenants[i]), opts->tenants[i]))
				return -EINVAL;
		req.txn_slots = opts->txn_slots;
		req.slot_size = opts->slot_size;
	}
	ret = roshm__ctl_call(r->sock_fd, &req, sizeof(req), &rep, sizeof(rep), &fd, 1, &nfds);
	if (ret)
		return ret;
	if (rep.hdr.status) {
		ret = rep.hdr.status < 0 ? rep.hdr.status : -EPROTO;
		goto err;
	}
	if (rep.hdr.len != sizeof(rep) || nfds != 1 || fstat(fd, &st) < 0 ||
	    (uint64_t)st.st_size < rep.map_size || rep.map_size > SIZE_MAX ||
	    rep.data_size > rep.map_size - ROSHM_REGION_HDR_SIZE) {
		ret = -EPROTO;
		goto err;
	}
	map = mmap(NULL, rep.map_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		ret = -errno;
		goto err;
	}
	close(fd);
	fd = -1;
	const struct roshm_region_hdr *rh = map;

	if (rh->magic != ROSHM_REGION_MAGIC || rh->data_off > rep.map_size ||
	    rh->data_size != rep.data_size || rh->data_size > rep.map_size - rh->data_off) {
		munmap(map, rep.map_size);
		ret = -EPROTO;
		goto err;
	}
	o = calloc(1, sizeof(*o));
	if (!o) {
		munmap(map, rep.map_size);
		ret = -ENOMEM;
		goto err;
	}
	o->handle = rep.handle;
	o->map = map;
	o->map_size = rep.map_size;
	o->data = (uint8_t *)map + rh->data_off;
	o->data_size = rh->data_size;
	o->next = r->owned;
	r->owned = o;
	*handle = rep.handle;
	return 0;
err:
	if (fd >= 0)
		close(fd);
	return ret;
}

void *roshm_region_data(struct roshm *r, uint32_t handle, uint64_t *size)
{
	for (struct roshm_owned *o = r->owned; o; o = o->next)
		if (o->handle == handle) {
			if (size)
				*size = o->data_size;
			return o->data;
		}
	return NULL;
}

int roshm_region_open(struct roshm *r, const char *name, uint32_t *handle, uint64_t *size)
{
	struct roshm_ctl_region_open req;
	struct roshm_ctl_region_reply rep;
	int ret;

	if (!name || !handle)
		return -EINVAL;
	memset(&req, 0, sizeof(req));
	ctl_hdr(&req.hdr, ROSHM_CTL_REGION_OPEN, sizeof(req));
	if (copy_name(req.name, sizeof(req.name), name))
		return -EINVAL;
	ret = roshm__ctl_call(r->sock_fd, &req, sizeof(req), &rep, sizeof(rep), NULL, 0, NULL);
	if (ret)
		return ret;
	if (rep.hdr.status)
		return rep.hdr.status < 0 ? rep.hdr.status : -EPROTO;
	if (rep.hdr.len != sizeof(rep))
		return -EPROTO;
	*handle = rep.handle;
	if (size)
		*size = rep.data_size;
	return 0;
}

int roshm_region_close(struct roshm *r, uint32_t handle)
{
	struct roshm_ctl_region_close req;
	struct roshm_ctl_region_reply rep;
	struct roshm_owned **pp;
	int ret;

	memset(&req, 0, sizeof(req));
	ctl_hdr(&req.hdr, ROSHM_CTL_REGION_CLOSE, sizeof(req));
	req.handle = handle;
	ret = roshm__ctl_call(r->sock_fd, &req, sizeof(req), &rep, sizeof(rep), NULL, 0, NULL);
	if (ret)
		return ret;
	if (rep.hdr.status)
		return rep.hdr.status < 0 ? rep.hdr.status : -EPROTO;
	for (pp = &r->owned; *pp; pp = &(*pp)->next) {
		if ((*pp)->handle == handle) {
			struct roshm_owned *o = *pp;

			*pp = o->next;
			munmap(o->map, o->map_size);
			free(o);
			break;
		}
	}
	return 0;
}

int roshm_submit(struct roshm *r)
{
	struct roshm_sq *sq = &r->sq;
	uint32_t n = sq->sqe_tail - sq->sqe_head, cqes = n;

	if (!n)
		return 0;
	/* A TXN_WRITE has no CQE of its own (its transaction's commit has). */
	for (uint32_t i = sq->sqe_head; i != sq->sqe_tail; i++)
		if (sq->sqes[i & sq->mask].opcode == ROSHM_OP_TXN_WRITE)
			cqes--;
	/* R0: release pairs with the poller's acquire of the SQ tail: the SQE
	 * contents are visible before the new tail. */
	__atomic_store_n(sq->ktail, sq->sqe_tail, __ATOMIC_RELEASE);
	sq->sqe_head = sq->sqe_tail;
	r->submitted += cqes;
	/* W0: full barrier between publishing the tail and reading NEED_WAKEUP;
	 * pairs with the poller's barrier between setting the flag and its last
	 * look at the tail (poller W1), so one of us sees the other. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(sq->kflags, __ATOMIC_RELAXED) & ROSHM_SQ_NEED_WAKEUP) {
		uint64_t one = 1;
		ssize_t w = write(r->sq_event_fd, &one, sizeof(one));

		(void)w; /* EAGAIN means a wakeup is already pending */
	}
	return (int)n;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int roshm_wait_cqe_timeout(struct roshm *r, struct roshm_cqe **cqe, int timeout_ms)
{
	uint64_t start = now_ns(), spin_end = start + (uint64_t)r->spin_us * 1000;
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : start + (uint64_t)timeout_ms * 1000000;

	for (;;) {
		if (roshm_peek_cqe(r, cqe) == 0)
			return 0;
		uint64_t t = now_ns();

		if (t < spin_end)
			continue;
		if (t >= deadline)
			return -ETIME;
		__atomic_store_n(r->cq.kflags, ROSHM_CQ_NEED_WAKEUP, __ATOMIC_RELAXED);
		/* W2: pairs with the poller's barrier between publishing the CQ
		 * tail and reading our flag (poller W3). */
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		if (roshm_peek_cqe(r, cqe) == 0) {
			__atomic_store_n(r->cq.kflags, 0, __ATOMIC_RELAXED);
			return 0;
		}
		struct pollfd pfd[2] = {
			{ .fd = r->cq_event_fd, .events = POLLIN },
			{ .fd = r->sock_fd, .events = POLLIN },
		};
		int ms = deadline == UINT64_MAX ? 100 : (int)((deadline - t) / 1000000) + 1;

		if (ms > 100)
			ms = 100; /* re-check now and then: a lost wakeup costs at most this */
		int n = poll(pfd, 2, ms);

		__atomic_store_n(r->cq.kflags, 0, __ATOMIC_RELAXED);
		if (n < 0 && errno == EINTR)
			return -EINTR;
		if (n > 0 && (pfd[0].revents & POLLIN)) {
			uint64_t v;
			ssize_t rd = read(r->cq_event_fd, &v, sizeof(v));

			(void)rd;
		}
		if (n > 0 && (pfd[1].revents & (POLLHUP | POLLERR | POLLIN)) &&
		    roshm_peek_cqe(r, cqe) != 0)
			return -ECONNRESET;
		spin_end = now_ns() + (uint64_t)r->spin_us * 1000;
	}
}

int roshm_wait_cqe(struct roshm *r, struct roshm_cqe **cqe)
{
	return roshm_wait_cqe_timeout(r, cqe, -1);
}

static int sync_op(struct roshm *r, struct roshm_sqe *tmpl, uint64_t *result)
{
	struct roshm_sqe *sqe;
	struct roshm_cqe *cqe;
	int ret;

	if (roshm_inflight(r) || r->sq.sqe_tail != r->sq.sqe_head)
		return -EBUSY;
	sqe = roshm_get_sqe(r);
	if (!sqe)
		return -EBUSY;
	*sqe = *tmpl;
	roshm_submit(r);
	ret = roshm_wait_cqe(r, &cqe);
	if (ret)
		return ret;
	ret = cqe->status;
	if (result)
		*result = cqe->result;
	roshm_cqe_seen(r, cqe);
	return ret;
}

int roshm_txn_sync(struct roshm *r, uint32_t handle, const struct roshm_txn_write *w,
		   unsigned nseg, uint64_t *seq)
{
	struct roshm_sqe *sqe;
	struct roshm_cqe *cqe;
	int ret;

	if (!nseg || nseg > ROSHM_TXN_MAX_SEGS || nseg + 1 > r->sq.entries)
		return -EINVAL;
	if (roshm_inflight(r) || r->sq.sqe_tail != r->sq.sqe_head)
		return -EBUSY;
	for (unsigned i = 0; i < nseg; i++) {
		sqe = roshm_get_sqe(r);
		if (!sqe)
			return -EBUSY;
		roshm_prep_txn_write(sqe, handle, w[i].off, w[i].arena_off, w[i].len);
	}
	sqe = roshm_get_sqe(r);
	if (!sqe)
		return -EBUSY;
	roshm_prep_txn_commit(sqe, handle);
	roshm_submit(r);
	ret = roshm_wait_cqe(r, &cqe);
	if (ret)
		return ret;
	ret = cqe->status;
	if (seq)
		*seq = cqe->result;
	roshm_cqe_seen(r, cqe);
	return ret;
}

int roshm_region_read_consistent(struct roshm *r, uint32_t handle, uint64_t off, void *dst,
				 size_t len)
{
	for (struct roshm_owned *o = r->owned; o; o = o->next) {
		const struct roshm_region_hdr *h = o->map;

		if (o->handle != handle)
			continue;
		if (off > o->data_size || len > o->data_size - off)
			return -EFAULT;
		for (unsigned spins = 0; spins < 1000000; spins++) {
			/* Pairs with the release stores of roshmd's applier. */
			uint64_t s1 = __atomic_load_n(&h->seqlock, __ATOMIC_ACQUIRE);

			if (s1 & 1)
				continue;
			memcpy(dst, o->data + off, len);
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			if (__atomic_load_n(&h->seqlock, __ATOMIC_RELAXED) == s1)
				return 0;
		}
		return -EAGAIN;
	}
	return -EBADF;
}

int roshm_nop_sync(struct roshm *r)
{
	struct roshm_sqe s;

	roshm_prep_nop(&s);
	return sync_op(r, &s, NULL);
}

int roshm_write_sync(struct roshm *r, uint32_t handle, uint64_t off, uint64_t arena_off, uint32_t len)
{
	struct roshm_sqe s;

	roshm_prep_write(&s, handle, off, arena_off, len);
	return sync_op(r, &s, NULL);
}

int roshm_read_sync(struct roshm *r, uint32_t handle, uint64_t off, uint64_t arena_off, uint32_t len)
{
	struct roshm_sqe s;

	roshm_prep_read(&s, handle, off, arena_off, len);
	return sync_op(r, &s, NULL);
}

int roshm_fetch_add_sync(struct roshm *r, uint32_t handle, uint64_t off, uint64_t add, uint64_t *old)
{
	struct roshm_sqe s;

	roshm_prep_fetch_add(&s, handle, off, add);
	return sync_op(r, &s, old);
}

int roshm_cmp_swap_sync(struct roshm *r, uint32_t handle, uint64_t off, uint64_t expect,
			uint64_t desired, uint64_t *old)
{
	struct roshm_sqe s;

	roshm_prep_cmp_swap(&s, handle, off, expect, desired);
	return sync_op(r, &s, old);
}

int roshm_admin(const char *sock_path, const char *cmd, char **json)
{
	struct roshm_ctl_admin req;
	char *buf;
	int fd, ret;

	if (!cmd || !json)
		return -EINVAL;
	memset(&req, 0, sizeof(req));
	ctl_hdr(&req.hdr, ROSHM_CTL_ADMIN, sizeof(req));
	if (copy_name(req.cmd, sizeof(req.cmd), cmd))
		return -EINVAL;
	fd = sock_connect(env_or(sock_path, "ROSHM_SOCK", ROSHM_DEFAULT_SOCK));
	if (fd < 0)
		return fd;
	buf = malloc(ROSHM_CTL_MSG_MAX);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	ret = roshm__ctl_call(fd, &req, sizeof(req), buf, ROSHM_CTL_MSG_MAX, NULL, 0, NULL);
	close(fd);
	if (ret)
		goto out;
	struct roshm_ctl_hdr *h = (void *)buf;

	if (h->status) {
		ret = h->status < 0 ? h->status : -EPROTO;
		goto out;
	}
	size_t n = h->len - sizeof(*h);

	if (n == 0 || buf[sizeof(*h) + n - 1] != '\0') {
		ret = -EPROTO;
		goto out;
	}
	*json = strdup(buf + sizeof(*h));
	ret = *json ? 0 : -ENOMEM;
out:
	free(buf);
	return ret;
}

const char *roshm_strerror(int status)
{
	switch (-status) {
	case 0: return "success";
	case EINVAL: return "invalid argument or SQE field";
	case EBADF: return "unknown or closed region handle";
	case EFAULT: return "offset/length outside the region or the arena";
	case EOPNOTSUPP: return "operation not supported by this roshmd";
	case ESTALE: return "region was closed or re-created (stale epoch)";
	case ENOENT: return "no such region";
	case EACCES: return "access denied by tenant or region policy";
	case ECONNRESET: return "connection to roshmd or to the peer node was lost";
	case EHOSTUNREACH: return "peer node unreachable";
	case ETIME: return "timed out";
	case EPROTO: return "protocol error (ABI mismatch or malformed message)";
	case EBUSY: return "operations in flight";
	default: return "error";
	}
}
