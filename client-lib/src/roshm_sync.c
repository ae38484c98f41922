// SPDX-License-Identifier: MIT
/*
 * libroshm: waiting for completions (spin, then sleep on the CQ eventfd,
 * re-attaching when roshmd went away), the synchronous calls built on
 * submit and wait, admin requests, and roshm_strerror.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <poll.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "roshm.h"
#include "roshm_internal.h"

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
		if (r->sock_fd < 0) {
			/* an earlier re-attach gave up: try again */
			int ret = roshm__reconnect(r);

			if (ret)
				return ret;
			continue;
		}
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
		/* SQEs roshmd has not taken (it had no CQ room for them, and
		 * reaping does not wake it): wake it before we sleep. */
		if (__atomic_load_n(r->sq.khead, __ATOMIC_ACQUIRE) != r->sq.sqe_head &&
		    (__atomic_load_n(r->sq.kflags, __ATOMIC_RELAXED) & ROSHM_SQ_NEED_WAKEUP)) {
			char one = 1;
			ssize_t w = send(r->sq_event_fd, &one, 1, MSG_DONTWAIT | MSG_NOSIGNAL);

			(void)w;
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
			char v[64];
			ssize_t rd;

			do /* every queued wakeup datagram */
				rd = recv(r->cq_event_fd, v, sizeof(v), MSG_DONTWAIT);
			while (rd > 0);

			(void)rd;
		}
		if (n > 0 && (pfd[1].revents & (POLLHUP | POLLERR | POLLIN)) &&
		    roshm_peek_cqe(r, cqe) != 0) {
			/* roshmd went away: re-attach to its successor and go on */
			int ret = roshm__reconnect(r);

			if (ret)
				return ret == -ECONNRESET ? -ECONNRESET : ret;
		}
		spin_end = now_ns() + (uint64_t)r->spin_us * 1000;
	}
}

int roshm_wait_cqe(struct roshm *r, struct roshm_cqe **cqe)
{
	return roshm_wait_cqe_timeout(r, cqe, -1);
}

/*
 * Wait for the one operation of a blocking helper. When no roshmd came back
 * (-ECONNRESET), the library has completed that operation with -ECONNRESET
 * itself: take that CQE too, so that the ring is idle again and the next
 * call tries to re-attach instead of failing with -EBUSY for good.
 */
static int sync_wait(struct roshm *r, struct roshm_cqe **cqe)
{
	int ret = roshm_wait_cqe(r, cqe);

	if (ret == -ECONNRESET && roshm_peek_cqe(r, cqe) == 0)
		roshm_cqe_seen(r, *cqe);
	return ret;
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
	ret = sync_wait(r, &cqe);
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
	ret = sync_wait(r, &cqe);
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

			if (s1 & 1) {
				/* the applier mid-transaction: on a CPU we share
				 * with it, only our yield lets it finish */
				if (spins >= 1000)
					sched_yield();
				continue;
			}
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

/* The node's admin token: given, $ROSHM_ADMIN_TOKEN, or the first line of
 * $ROSHM_ADMIN_TOKEN_FILE or ROSHM_DEFAULT_ADMIN_TOKEN (when readable). */
void roshm__admin_token(const char *given, char *out, size_t cap)
{
	const char *v = roshm__env_or(given, "ROSHM_ADMIN_TOKEN", NULL);
	const char *path;
	ssize_t n;
	int fd;

	out[0] = 0;
	if (v) {
		snprintf(out, cap, "%s", v);
		return;
	}
	path = roshm__env_or(NULL, "ROSHM_ADMIN_TOKEN_FILE", ROSHM_DEFAULT_ADMIN_TOKEN);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return;
	n = read(fd, out, cap - 1);
	close(fd);
	out[n > 0 ? n : 0] = 0;
	out[strcspn(out, "\r\n")] = 0;
}

#define ADMIN_TIMEOUT_S 10

int roshm_admin_params(const struct roshm_params *p, const char *cmd, char **json)
{
	struct roshm_params dflt = { 0 };
	struct roshm_ctl_admin req;
	const char *tenant, *token;
	char *buf;
	int fd, ret;

	if (!cmd || !json)
		return -EINVAL;
	if (!p)
		p = &dflt;
	memset(&req, 0, sizeof(req));
	roshm__ctl_hdr(&req.hdr, ROSHM_CTL_ADMIN, sizeof(req));
	tenant = roshm__env_or(p->tenant, "ROSHM_TENANT", "");
	token = roshm__env_or(p->token, "ROSHM_TOKEN", "");
	if (roshm__copy_name(req.cmd, sizeof(req.cmd), cmd) ||
	    roshm__copy_name(req.tenant, sizeof(req.tenant), tenant) ||
	    roshm__copy_name(req.token, sizeof(req.token), token))
		return -EINVAL;
	roshm__admin_token(p->admin_token, req.admin_token, sizeof(req.admin_token));
	fd = roshm__sock_connect(roshm__env_or(p->sock_path, "ROSHM_SOCK", ROSHM_DEFAULT_SOCK), p->server_uid);
	if (fd < 0) {
		explicit_bzero(&req, sizeof(req));
		return fd;
	}
	/* A roshmd that does not answer (stopped, or its control thread stuck)
	 * must not hang the caller, a probe or a preStop hook: ADMIN_TIMEOUT_S
	 * for everything but a drain, whose answer comes when it is done
	 * (roshmd bounds that with drain.timeout_ms). */
	struct timeval tv = { .tv_sec = ADMIN_TIMEOUT_S };

	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (strncmp(cmd, "drain", 5))
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	buf = malloc(ROSHM_CTL_MSG_MAX);
	if (!buf) {
		explicit_bzero(&req, sizeof(req));
		close(fd);
		return -ENOMEM;
	}
	ret = roshm__ctl_call(fd, &req, sizeof(req), buf, ROSHM_CTL_MSG_MAX, NULL, 0, NULL);
	explicit_bzero(&req, sizeof(req));
	close(fd);
	if (ret == -EAGAIN || ret == -EWOULDBLOCK)
		ret = -ETIME;
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

int roshm_admin(const char *sock_path, const char *cmd, char **json)
{
	struct roshm_params p = { .sock_path = sock_path };

	return roshm_admin_params(&p, cmd, json);
}

const char *roshm_strerror(int status)
{
	const char *d;

	switch (-status) {
	case 0: return "success";
	case EINVAL: return "invalid argument or SQE field";
	case EBADF: return "unknown or closed region handle";
	case EFAULT: return "offset/length outside the region or the arena";
	case EOPNOTSUPP: return "operation not supported (a transaction on a region without a log)";
	case ESTALE: return "region was closed or re-created (stale epoch)";
	case ENOENT: return "no such region, or no roshmd at the socket";
	case EACCES: return "access denied by tenant or region policy";
	case ECONNRESET: return "connection to roshmd or to the peer node was lost (outcome unknown)";
	case EHOSTUNREACH: return "peer node unreachable";
	case ETIME: return "timed out";
	case ETIMEDOUT: return "transaction deadline ran out";
	case EIO: return "transaction outcome could not be determined";
	case EAGAIN: return "region is draining or paused: try again";
	case EMSGSIZE: return "too big for a transaction slot or the transport";
	case EEXIST: return "region name taken";
	case EMFILE: return "handle table or client limit full";
	case ENOSPC: return "no room for another region";
	case EPROTO: return "protocol error (ABI mismatch or malformed message)";
	case EBUSY: return "busy (operations in flight, or no transaction context free)";
	case EPERM: return "not permitted (credentials, or the socket is not roshmd's)";
	case EDQUOT: return "the tenant's quota is used up";
	default:
		/* any other -errno: the C library's words for it */
		d = status < 0 ? strerrordesc_np(-status) : NULL;
		return d ? d : "error";
	}
}

int roshm_region_list(struct roshm *r, const char *prefix, char **json)
{
	struct roshm_params p;
	char cmd[8 + ROSHM_NAME_MAX];

	if (!r || !prefix || !json || strlen(prefix) >= ROSHM_NAME_MAX)
		return -EINVAL;
	/* the tenant's own credentials: an admin token of the environment
	 * would list every tenant's */
	p = *r->params;
	p.admin_token = "";
	snprintf(cmd, sizeof(cmd), "regions %s", prefix);
	return roshm_admin_params(&p, cmd, json);
}
