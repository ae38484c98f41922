// SPDX-License-Identifier: MIT
/*
 * The librdmacm entry points roshm0 has nothing behind, so that every
 * binary linked against rdma-core 44's librdmacm.so.1 loads (symbols are
 * bound at load time) and learns at the call, with errno, never by a crash.
 *
 * - rsockets: rsocket() fails with ENOSYS, so no rsocket descriptor can
 *   exist; rpoll / rselect on ordinary descriptors are poll / select, which
 *   is what librdmacm does for them (rping's and ucmatose's common code
 *   calls rpoll); every other r* call names no rsocket: EBADF.
 * - Multicast: EOPNOTSUPP (UD does not exist on roshm0).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <sys/select.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>

#define RC_EXPORT __attribute__((visibility("default")))

static int no_rsocket(void)
{
	errno = EBADF;
	return -1;
}

RC_EXPORT int rsocket(int domain, int type, int protocol)
{
	(void)domain, (void)type, (void)protocol;
	errno = ENOSYS;
	return -1;
}

RC_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	return poll(fds, nfds, timeout);
}

RC_EXPORT int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds,
		      struct timeval *timeout)
{
	return select(nfds, readfds, writefds, exceptfds, timeout);
}

RC_EXPORT int rbind(int s, const struct sockaddr *a, socklen_t l)
{
	(void)s, (void)a, (void)l;
	return no_rsocket();
}

RC_EXPORT int rlisten(int s, int backlog)
{
	(void)s, (void)backlog;
	return no_rsocket();
}

RC_EXPORT int raccept(int s, struct sockaddr *a, socklen_t *l)
{
	(void)s, (void)a, (void)l;
	return no_rsocket();
}

RC_EXPORT int rconnect(int s, const struct sockaddr *a, socklen_t l)
{
	(void)s, (void)a, (void)l;
	return no_rsocket();
}

RC_EXPORT int rshutdown(int s, int how)
{
	(void)s, (void)how;
	return no_rsocket();
}

RC_EXPORT int rclose(int s)
{
	(void)s;
	return no_rsocket();
}

RC_EXPORT ssize_t rrecv(int s, void *b, size_t n, int f)
{
	(void)s, (void)b, (void)n, (void)f;
	return no_rsocket();
}

RC_EXPORT ssize_t rrecvfrom(int s, void *b, size_t n, int f, struct sockaddr *a, socklen_t *l)
{
	(void)s, (void)b, (void)n, (void)f, (void)a, (void)l;
	return no_rsocket();
}

RC_EXPORT ssize_t rrecvmsg(int s, struct msghdr *m, int f)
{
	(void)s, (void)m, (void)f;
	return no_rsocket();
}

RC_EXPORT ssize_t rsend(int s, const void *b, size_t n, int f)
{
	(void)s, (void)b, (void)n, (void)f;
	return no_rsocket();
}

RC_EXPORT ssize_t rsendto(int s, const void *b, size_t n, int f, const struct sockaddr *a,
			  socklen_t l)
{
	(void)s, (void)b, (void)n, (void)f, (void)a, (void)l;
	return no_rsocket();
}

RC_EXPORT ssize_t rsendmsg(int s, const struct msghdr *m, int f)
{
	(void)s, (void)m, (void)f;
	return no_rsocket();
}

RC_EXPORT ssize_t rread(int s, void *b, size_t n)
{
	(void)s, (void)b, (void)n;
	return no_rsocket();
}

RC_EXPORT ssize_t rreadv(int s, const struct iovec *v, int n)
{
	(void)s, (void)v, (void)n;
	return no_rsocket();
}

RC_EXPORT ssize_t rwrite(int s, const void *b, size_t n)
{
	(void)s, (void)b, (void)n;
	return no_rsocket();
}

RC_EXPORT ssize_t rwritev(int s, const struct iovec *v, int n)
{
	(void)s, (void)v, (void)n;
	return no_rsocket();
}

RC_EXPORT int rgetpeername(int s, struct sockaddr *a, socklen_t *l)
{
	(void)s, (void)a, (void)l;
	return no_rsocket();
}

RC_EXPORT int rgetsockname(int s, struct sockaddr *a, socklen_t *l)
{
	(void)s, (void)a, (void)l;
	return no_rsocket();
}

RC_EXPORT int rsetsockopt(int s, int level, int name, const void *v, socklen_t l)
{
	(void)s, (void)level, (void)name, (void)v, (void)l;
	return no_rsocket();
}

RC_EXPORT int rgetsockopt(int s, int level, int name, void *v, socklen_t *l)
{
	(void)s, (void)level, (void)name, (void)v, (void)l;
	return no_rsocket();
}

RC_EXPORT int rfcntl(int s, int cmd, ...)
{
	(void)s, (void)cmd;
	return no_rsocket();
}

RC_EXPORT off_t riomap(int s, void *b, size_t n, int prot, int flags, off_t off)
{
	(void)s, (void)b, (void)n, (void)prot, (void)flags, (void)off;
	return no_rsocket();
}

RC_EXPORT int riounmap(int s, void *b, size_t n)
{
	(void)s, (void)b, (void)n;
	return no_rsocket();
}

RC_EXPORT size_t riowrite(int s, const void *b, size_t n, off_t off, int flags)
{
	(void)s, (void)b, (void)n, (void)off, (void)flags;
	errno = EBADF;
	return 0;
}

/* ------------------------------------------------- multicast (UD only) */

RC_EXPORT int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)
{
	(void)id, (void)addr, (void)context;
	errno = EOPNOTSUPP;
	return -1;
}

RC_EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *id, struct rdma_cm_join_mc_attr_ex *a,
				     void *context)
{
	(void)id, (void)a, (void)context;
	errno = EOPNOTSUPP;
	return -1;
}

RC_EXPORT int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	(void)id, (void)addr;
	errno = EOPNOTSUPP;
	return -1;
}
