// SPDX-License-Identifier: MIT
/*
 * rdma_getaddrinfo / rdma_freeaddrinfo of libroshm-verbs' librdmacm:
 * getaddrinfo(3) underneath, with librdmacm's mapping of hints and results
 * (port space <-> protocol, QP type <-> socket type, RAI_PASSIVE giving the
 * source address). AF_IB addresses do not exist on roshm0.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/rdma_cma.h>

#define RC_EXPORT __attribute__((visibility("default")))

static void to_ai(struct addrinfo *ai, const struct rdma_addrinfo *h)
{
	memset(ai, 0, sizeof(*ai));
	if (h->ai_flags & RAI_PASSIVE)
		ai->ai_flags = AI_PASSIVE;
	if (h->ai_flags & RAI_NUMERICHOST)
		ai->ai_flags |= AI_NUMERICHOST;
	ai->ai_family = h->ai_family;
	switch (h->ai_qp_type) {
	case IBV_QPT_RC:
	case IBV_QPT_UC:
	case IBV_QPT_XRC_SEND:
	case IBV_QPT_XRC_RECV:
		ai->ai_socktype = SOCK_STREAM;
		break;
	case IBV_QPT_UD:
		ai->ai_socktype = SOCK_DGRAM;
		break;
	default:
		break;
	}
	switch (h->ai_port_space) {
	case RDMA_PS_TCP:
		ai->ai_protocol = IPPROTO_TCP;
		break;
	case RDMA_PS_IPOIB:
	case RDMA_PS_UDP:
		ai->ai_protocol = IPPROTO_UDP;
		break;
	case RDMA_PS_IB:
		ai->ai_protocol = ai->ai_socktype == SOCK_STREAM ? IPPROTO_TCP :
				  ai->ai_socktype == SOCK_DGRAM ? IPPROTO_UDP : 0;
		break;
	default:
		break;
	}
}

static int copy_addr(struct sockaddr **dst, socklen_t *dst_len, const struct sockaddr *src,
		     socklen_t len)
{
	*dst = malloc(len);
	if (!*dst)
		return EAI_MEMORY;
	memcpy(*dst, src, len);
	*dst_len = len;
	return 0;
}

RC_EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	while (res) {
		struct rdma_addrinfo *r = res;

		res = res->ai_next;
		free(r->ai_connect);
		free(r->ai_route);
		free(r->ai_src_canonname);
		free(r->ai_dst_canonname);
		free(r->ai_src_addr);
		free(r->ai_dst_addr);
		free(r);
	}
}

/* Returns 0, or a getaddrinfo error code (gai_strerror), like librdmacm. */
RC_EXPORT int rdma_getaddrinfo(const char *node, const char *service,
			       const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)
{
	static const struct rdma_addrinfo none;
	struct rdma_addrinfo *r;
	struct addrinfo aih, *ai = NULL;
	int ret = 0;

	if (!res || (!node && !service && !hints)) {
		errno = EINVAL;
		return EAI_SYSTEM;
	}
	if (!hints)
		hints = &none;
	if (hints->ai_family == AF_IB) {
		errno = EAFNOSUPPORT;
		return EAI_FAMILY;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return EAI_MEMORY;
	if (node || service) {
		to_ai(&aih, hints);
		ret = getaddrinfo(node, service, hints == &none ? NULL : &aih, &ai);
		if (ret)
			goto err;
		r->ai_qp_type = hints->ai_qp_type ? hints->ai_qp_type :
				ai->ai_socktype == SOCK_DGRAM ? IBV_QPT_UD : IBV_QPT_RC;
		r->ai_port_space = hints->ai_port_space ? hints->ai_port_space :
				   ai->ai_protocol == IPPROTO_UDP ? RDMA_PS_UDP : RDMA_PS_TCP;
		r->ai_family = ai->ai_family;
		if (ai->ai_flags & AI_PASSIVE) {
			r->ai_flags = RAI_PASSIVE;
			if (ai->ai_canonname && !(r->ai_src_canonname = strdup(ai->ai_canonname)))
				ret = EAI_MEMORY;
			if (!ret)
				ret = copy_addr(&r->ai_src_addr, &r->ai_src_len, ai->ai_addr, ai->ai_addrlen);
		} else {
			if (ai->ai_canonname && !(r->ai_dst_canonname = strdup(ai->ai_canonname)))
				ret = EAI_MEMORY;
			if (!ret)
				ret = copy_addr(&r->ai_dst_addr, &r->ai_dst_len, ai->ai_addr, ai->ai_addrlen);
		}
		freeaddrinfo(ai);
	} else {
		r->ai_flags = hints->ai_flags;
		r->ai_family = hints->ai_family;
		r->ai_qp_type = hints->ai_qp_type;
		r->ai_port_space = hints->ai_port_space;
		if (hints->ai_dst_len && hints->ai_dst_addr)
			ret = copy_addr(&r->ai_dst_addr, &r->ai_dst_len, hints->ai_dst_addr,
					hints->ai_dst_len);
	}
	if (!ret && !r->ai_src_len && hints->ai_src_len && hints->ai_src_addr)
		ret = copy_addr(&r->ai_src_addr, &r->ai_src_len, hints->ai_src_addr, hints->ai_src_len);
	if (ret)
		goto err;
	*res = r;
	return 0;
err:
	rdma_freeaddrinfo(r);
	if (ret == EAI_MEMORY)
		errno = ENOMEM;
	return ret;
}
