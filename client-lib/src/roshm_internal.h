/* SPDX-License-Identifier: MIT */
/*
 * libroshm's own header: what its parts share (roshm.c: attach and the
 * channel, submit; roshm_region.c: regions; roshm_restart.c: re-attaching
 * after a roshmd restart; roshm_sync.c: waiting, the synchronous calls,
 * admin, strerror). Not installed; none of it is exported (libroshm.map).
 */
#ifndef ROSHM_INTERNAL_H
#define ROSHM_INTERNAL_H
#include <stddef.h>
#include <fcntl.h>
#include <stdbool.h>
#include <poll.h>
#include <stdlib.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "roshm.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* A grant made on an owned region (roshm_region_grant*), given again by
 * its id after a roshmd restart. */
struct roshm_grant {
	uint64_t gid;
	uint32_t peer;                /* the application handle it was made through, or 0 */
	char name[ROSHM_NAME_MAX];    /* or the name, or "" */
	struct roshm_part part;       /* what of the region (all: zeroes) */
};

struct roshm_owned {
	struct roshm_owned *next;
	uint32_t handle;              /* the application's */
	void *map;
	size_t map_size;
	uint8_t *data;
	uint64_t data_size;
	int fd;                       /* kept: re-registered after a roshmd restart */
	struct roshm_ctl_region_create req;
	uint32_t ngrants;
	struct roshm_grant *grants;
	uint64_t owner;               /* its owner's identity (us), as roshmd said */
};

/* Every handle the application holds, and roshmd's value for it now. */
struct roshm_hmap {
	uint32_t app;
	uint32_t srv;
	char name[2 * ROSHM_NAME_MAX];
	struct roshm_part part;       /* opened by name: what of it (all: zeroes) */
	struct roshm_owned *owned;    /* NULL: opened by name */
	uint64_t owner;               /* opened by name: its owner, as roshmd said (0: unknown) */
};

/* One request/reply on a control socket; received fds land in fds[]. */
int roshm__ctl_call(int fd, void *req, size_t req_len, void *reply, size_t reply_max,
		    int *fds, int nfds_max, int *nfds);
int roshm__ctl_call_fd(int fd, void *req, size_t req_len, void *reply, size_t reply_max,
		       int *fds, int nfds_max, int *nfds, int fd_out);
const char *roshm__env_or(const char *v, const char *env, const char *dflt);
void roshm__ctl_hdr(struct roshm_ctl_hdr *h, uint16_t type, size_t len);
int roshm__sock_connect(const char *path, int64_t server_uid);
int roshm__copy_name(char *dst, size_t cap, const char *src);
int roshm__own_memory(const char *name, uint64_t size, bool huge, void **map, size_t *mapped);
int roshm__attach(struct roshm *r, void **chan, size_t *chan_size);
void roshm__bind_channel(struct roshm *r, void *map, size_t size);
struct roshm_hmap *roshm__hmap_find(struct roshm *r, uint32_t app);
int roshm__hmap_add(struct roshm *r, uint32_t handle, const char *name, struct roshm_owned *o);
int roshm__ensure_attached(struct roshm *r);
int roshm__ctl_call_retry(struct roshm *r, void *req, size_t req_len, void *reply, size_t reply_max,
			  int *fds, int nfds_max, int *nfds, int fd_out);
int roshm__create_region(struct roshm *r, struct roshm_ctl_region_create *req, int fd,
			 struct roshm_owned **out, uint32_t *handle);
int roshm__open_region(struct roshm *r, const char *name, const struct roshm_part *part,
		       uint32_t *handle, uint64_t *size, uint64_t *owner);
int roshm__reconnect(struct roshm *r);
int roshm__grant_call(struct roshm *r, uint32_t srv_handle, uint32_t srv_peer, uint32_t op,
		      uint64_t gid, const char *name, const struct roshm_part *part,
		      uint64_t *gid_out);
void roshm__grants_forget_peer(struct roshm *r, uint32_t peer);
void roshm__admin_token(const char *given, char *out, size_t cap);

/* Whether two grants are one in roshmd: the same region, part and access. */
static inline bool roshm__grant_same(const struct roshm_grant *a, const struct roshm_grant *b)
{
	return a->gid == b->gid && a->part.off == b->part.off && a->part.len == b->part.len &&
	       (a->part.access ? a->part.access : ROSHM_ACCESS_ALL) ==
		       (b->part.access ? b->part.access : ROSHM_ACCESS_ALL);
}

/* roshmd's value of an application handle (identity until a reconnect). */
static inline uint32_t roshm__srv_handle(struct roshm *r, uint32_t app)
{
	struct roshm_hmap *m;

	if (!r->remapped)
		return app;
	m = roshm__hmap_find(r, app);
	return m ? m->srv : 0xffffffffu; /* unknown: roshmd answers EBADF */
}

#endif
