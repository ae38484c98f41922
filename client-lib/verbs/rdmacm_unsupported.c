// SPDX-License-Identifier: MIT
/*
 * The librdmacm entry points roshm0 has nothing behind, so that every
 * binary linked against rdma-core 44's librdmacm.so.1 loads (symbols are
 * bound at load time) and learns at the call, with errno, never by a crash.
 *
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
