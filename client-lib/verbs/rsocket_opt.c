// SPDX-License-Identifier: MIT
/*
 * rsockets of libroshm-verbs: addresses, socket options, fcntl.
 */
#define _GNU_SOURCE
#include "rsocket_int.h"

static struct sockaddr *rs_addr(struct rs *rs, bool peer)
{
	return peer ? rdma_get_peer_addr(rs->id) : rdma_get_local_addr(rs->id);
}

static int rs_name(int s, struct sockaddr *a, socklen_t *l, bool peer)
{
	struct rs *rs = rs_get(s);
	struct sockaddr *sa;
	socklen_t n;

	if (!rs)
		return -1;
	if (!l || (!a && *l))
		return rs_put_fail(rs, EFAULT);
	if (rs->dg) {
		int e;

		pthread_mutex_lock(&rs->lock);
		e = rs_dg_name(rs, a, l, peer);
		pthread_mutex_unlock(&rs->lock);
		return e ? rs_put_fail(rs, e) : (rs_put(rs), 0);
	}
	if (peer && rs->state != RS_CONN)
		return rs_put_fail(rs, ENOTCONN);
	sa = rs_addr(rs, peer);
	n = sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
	if (a)   /* librspreload asks the size alone (NULL, 0) */
		memcpy(a, sa, *l < n ? *l : n);
	*l = n;
	rs_put(rs);
	return 0;
}

RS_EXPORT int rgetpeername(int s, struct sockaddr *a, socklen_t *l)
{
	return rs_name(s, a, l, true);
}

RS_EXPORT int rgetsockname(int s, struct sockaddr *a, socklen_t *l)
{
	return rs_name(s, a, l, false);
}

static int *rs_opt(struct rs *rs, int level, int name)
{
	switch (level) {
	case SOL_SOCKET:
		switch (name) {
		case SO_REUSEADDR:
			return &rs->reuse;
		case SO_KEEPALIVE:
			return &rs->keepalive;
		case SO_SNDBUF:
			return &rs->sndbuf;
		case SO_RCVBUF:
			return &rs->rcvbuf;
		}
		break;
	case IPPROTO_TCP:
		switch (name) {
		case TCP_NODELAY:
			return &rs->nodelay;
		case TCP_KEEPIDLE:
			return &rs->keepidle;
		}
		break;
	case IPPROTO_IPV6:
		if (name == IPV6_V6ONLY)
			return &rs->v6only;
		break;
	case SOL_RDMA:
		switch (name) {
		case RDMA_SQSIZE:
			return &rs->sqsize;
		case RDMA_RQSIZE:
			return &rs->rqsize;
		case RDMA_INLINE:
			return &rs->inl;
		case RDMA_IOMAPSIZE:   /* kept: RS_IOMAPS maps each way, whatever it says */
			return &rs->iomapsize;
		}
		break;
	}
	return NULL;
}

RS_EXPORT int rsetsockopt(int s, int level, int name, const void *v, socklen_t l)
{
	struct rs *rs = rs_get(s);
	int *o;

	if (!rs)
		return -1;
	if (level == SOL_SOCKET && name == SO_LINGER) {
		if (!v || l < sizeof(struct linger))
			return rs_put_fail(rs, EINVAL);
		memcpy(&rs->linger, v, sizeof(rs->linger));
		rs_put(rs);
		return 0;
	}
	o = rs_opt(rs, level, name);
	if (!o)
		return rs_put_fail(rs, ENOTSUP);
	if (!v || l < sizeof(int))
		return rs_put_fail(rs, EINVAL);
	pthread_mutex_lock(&rs->lock);
	memcpy(o, v, sizeof(int));
	if ((o == &rs->sndbuf || o == &rs->rcvbuf) && (*o < 0 || (unsigned)*o > RS_BUF_MAX))
		*o = *o < 0 ? 0 : (int)RS_BUF_MAX;
	if ((o == &rs->sqsize || o == &rs->rqsize) && (*o < 0 || (unsigned)*o > RS_SLOTS_MAX))
		*o = *o < 0 ? 0 : (int)RS_SLOTS_MAX;
	/* sizes count once the connection is set up; later ones are kept
	 * for getsockopt only */
	pthread_mutex_unlock(&rs->lock);
	rs_put(rs);
	return 0;
}

RS_EXPORT int rgetsockopt(int s, int level, int name, void *v, socklen_t *l)
{
	struct rs *rs = rs_get(s);
	int val, *o;

	if (!rs)
		return -1;
	if (!v || !l)
		return rs_put_fail(rs, EFAULT);
	if (level == SOL_SOCKET && name == SO_LINGER) {
		if (*l < sizeof(struct linger))
			return rs_put_fail(rs, EINVAL);
		memcpy(v, &rs->linger, sizeof(rs->linger));
		*l = sizeof(struct linger);
		rs_put(rs);
		return 0;
	}
	pthread_mutex_lock(&rs->lock);
	if (level == SOL_SOCKET && name == SO_ERROR) {
		val = rs->broken && rs->err != EPIPE ? rs->err : rs->state == RS_DEAD ? rs->err : 0;
		if (rs->state == RS_DEAD)
			rs->err = 0;
	} else if (level == SOL_SOCKET && name == SO_TYPE) {
		val = rs->dg ? SOCK_DGRAM : SOCK_STREAM;
	} else if (level == IPPROTO_TCP && name == TCP_MAXSEG) {
		val = (int)(rs->seg ? rs->seg : RS_SEG_DEFAULT);
	} else if ((o = rs_opt(rs, level, name))) {
		val = *o;
		if (rs->dg)
			;   /* as set: the slots are made at the first use */
		else if (rs->state == RS_CONN && o == &rs->sndbuf)
			val = (int)(rs->ntx * rs->seg);
		else if (rs->state == RS_CONN && o == &rs->rcvbuf)
			val = (int)(rs->nrx * rs->seg);
		else if (o == &rs->v6only && val < 0)
			val = 0;
	} else {
		pthread_mutex_unlock(&rs->lock);
		return rs_put_fail(rs, ENOTSUP);
	}
	pthread_mutex_unlock(&rs->lock);
	if (*l < sizeof(int))
		return rs_put_fail(rs, EINVAL);
	memcpy(v, &val, sizeof(int));
	*l = sizeof(int);
	rs_put(rs);
	return 0;
}

RS_EXPORT int rfcntl(int s, int cmd, ...)
{
	struct rs *rs = rs_get(s);
	va_list ap;
	int arg = 0, ret;

	if (!rs)
		return -1;
	if (cmd == F_SETFD || cmd == F_SETFL) {
		va_start(ap, cmd);
		arg = va_arg(ap, int);
		va_end(ap);
	}
	switch (cmd) {
	case F_GETFD:   /* close-on-exec: the descriptor's own */
		ret = fcntl(rs->fd, F_GETFD);
		break;
	case F_SETFD:
		ret = fcntl(rs->fd, F_SETFD, arg);
		break;
	case F_GETFL:
		ret = O_RDWR | rs->fl;
		break;
	case F_SETFL:
		rs->fl = arg & O_NONBLOCK;
		ret = 0;
		break;
	default:
		return rs_put_fail(rs, ENOTSUP);
	}
	rs_put(rs);
	return ret;
}

