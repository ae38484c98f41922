// SPDX-License-Identifier: MIT
/* libroshm slow path: attach and the channel, submit (regions: roshm_region.c;
 * after a roshmd restart: roshm_restart.c; waiting, synchronous calls, admin:
 * roshm_sync.c). */
#define _GNU_SOURCE
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
#include "roshm_internal.h"

const char *roshm__env_or(const char *v, const char *env, const char *dflt)
{
	const char *e;

	if (v)
		return v;
	e = getenv(env);
	return e && *e ? e : dflt;
}

/* Pod labels and the like: [A-Za-z0-9._-], not starting with a dot. */
static bool valid_label(const char *s)
{
	if (*s == '.')
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
		      *s == '-' || *s == '_' || *s == '.'))
			return false;
	return true;
}

/* The pod label: given, $ROSHM_POD (the downward API's metadata.uid in the
 * manifests), else the host name, which every container of a pod shares
 * (none if it is not a usable label, e.g. "(none)"). */
static char *default_pod(const char *v)
{
	char host[ROSHM_NAME_MAX] = "";

	v = roshm__env_or(v, "ROSHM_POD", NULL);
	if (v)
		return strdup(v);
	if (gethostname(host, sizeof(host) - 1) < 0 || !valid_label(host))
		host[0] = 0;
	return strdup(host);
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
		n = req_len ? send(fd, req, req_len, MSG_NOSIGNAL) : 0;
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

/* As roshm__ctl_call, with one descriptor sent along (SCM_RIGHTS). */
int roshm__ctl_call_fd(int fd, void *req, size_t req_len, void *reply, size_t reply_max,
		       int *fds, int nfds_max, int *nfds, int fd_out)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = req, .iov_len = req_len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			      .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *c;
	ssize_t n;

	memset(&u, 0, sizeof(u));
	c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd_out, sizeof(int));
	do {
		n = sendmsg(fd, &msg, MSG_NOSIGNAL);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EPIPE ? -ECONNRESET : -errno;
	/* the reply: an empty request sends nothing more */
	return roshm__ctl_call(fd, NULL, 0, reply, reply_max, fds, nfds_max, nfds);
}

void roshm__ctl_hdr(struct roshm_ctl_hdr *h, uint16_t type, size_t len)
{
	h->magic = ROSHM_CTL_MAGIC;
	h->type = type;
	h->version = ROSHM_ABI_VERSION;
	h->len = (uint32_t)len;
	h->status = 0;
}

/*
 * Whom we trust to be roshmd: root, or our own euid (a process of our own
 * uid could read our memory anyway), or the uid the caller names. Checked on
 * the connected socket (SO_PEERCRED) before a token or a memfd is sent: a
 * process that took over the socket path gets nothing.
 */
static int check_server(int fd, int64_t want)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	const char *env;

	if (want == 0 && (env = getenv("ROSHM_SERVER_UID")) && *env) {
		char *end;
		long long v = strtoll(env, &end, 10);

		if (*end || v < -1 || v > UINT32_MAX)
			return -EINVAL;
		want = v;
	}
	if (want == -1)
		return 0;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
		return -errno;
	if (cr.uid == 0 || (want == 0 && cr.uid == geteuid()) || (want > 0 && cr.uid == (uid_t)want))
		return 0;
	return -EPERM;
}

#define CONNECT_TIMEOUT_S 10

int roshm__sock_connect(const char *path, int64_t server_uid)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, ret;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* roshmd leaves newcomers in its backlog while every pending slot is
	 * taken (admin.max_pending), and a connect to a full backlog sleeps
	 * for the send timeout: bounded, then none again for the connection */
	struct timeval tv = { .tv_sec = CONNECT_TIMEOUT_S }, none = { 0 };

	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		ret = errno == EAGAIN || errno == EINPROGRESS ? -ETIME : -errno;
		close(fd);
		return ret;
	}
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof(none));
	ret = check_server(fd, server_uid);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

int roshm__copy_name(char *dst, size_t cap, const char *src)
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
	    h->total_size > size)
		return -EPROTO;
	if (!h->sq_entries || (h->sq_entries & (h->sq_entries - 1)) ||
	    !h->cq_entries || (h->cq_entries & (h->cq_entries - 1)))
		return -EPROTO;
	size = h->total_size;
	sq_end = h->sq_off + (uint64_t)h->sq_entries * sizeof(struct roshm_sqe);
	cq_end = h->cq_off + (uint64_t)h->cq_entries * sizeof(struct roshm_cqe);
	if (h->sq_idx_off + sizeof(struct roshm_ring_idx) > size ||
	    h->cq_idx_off + sizeof(struct roshm_ring_idx) > size ||
	    sq_end > size || cq_end > size || h->arena_off > size ||
	    h->arena_size > size - h->arena_off)
		return -EPROTO;
	return 0;
}


/*
 * Memory this client owns and hands to roshmd: a sealable memfd of @size
 * bytes, every page touched here (MAP_POPULATE) so that it is charged to our
 * pod. With @huge, 2 MiB pages (the size rounded up to them). Returns the fd
 * and the mapping in *map, *mapped (the memfd's size).
 */
int roshm__own_memory(const char *name, uint64_t size, bool huge, void **map, size_t *mapped)
{
	const uint64_t hp = 2ull << 20;
	uint64_t sz = huge ? (size + hp - 1) & ~(hp - 1) : size;
	int fd, ret;
	void *m;

	if (sz > SIZE_MAX / 2)
		return -ENOMEM;
	fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING | (huge ? MFD_HUGETLB : 0));
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)sz) < 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	m = mmap(NULL, (size_t)sz, PROT_READ | PROT_WRITE, MAP_SHARED | (huge ? MAP_POPULATE : 0), fd, 0);
	if (m == MAP_FAILED) {
		ret = -errno;
		close(fd);
		return ret;
	}
	/* MAP_POPULATE ignores a fault that finds no huge page (a pod whose
	 * hugetlb cgroup limits usage but not reservations): count what was
	 * allocated, as roshmd will (st_blocks), and let the caller fall back. */
	if (huge) {
		struct stat st;

		if (fstat(fd, &st) || (uint64_t)st.st_blocks * 512 < sz) {
			munmap(m, (size_t)sz);
			close(fd);
			return -ENOMEM;
		}
	}
	if (!huge) {
		/* 2 MiB transparent pages where the node allows them for shmem
		 * (shmem_enabled = advise), then every page allocated now */
		madvise(m, (size_t)sz, MADV_HUGEPAGE);
		if (madvise(m, (size_t)sz, MADV_POPULATE_WRITE) < 0)
			for (uint64_t o = 0; o < sz; o += 4096)
				((volatile uint8_t *)m)[o] = 0;
	}
	*map = m;
	*mapped = (size_t)sz;
	return fd;
}

static int hugepages_wanted(const struct roshm_params *p)
{
	const char *e = getenv("ROSHM_HUGEPAGES");

	if (p->hugepages != ROSHM_HUGEPAGES_AUTO || !e || !*e)
		return p->hugepages;
	if (!strcmp(e, "on"))
		return ROSHM_HUGEPAGES_ON;
	if (!strcmp(e, "off"))
		return ROSHM_HUGEPAGES_OFF;
	return ROSHM_HUGEPAGES_AUTO;
}

/*
 * Attach to roshmd: socket (whose server we check), HELLO, then the channel:
 * our own memfd, mapped and touched here, sent to roshmd, which seals it and
 * answers with the wakeup sockets.
 */
int roshm__attach(struct roshm *r, void **chan, size_t *chan_size)
{
	const struct roshm_params *p = r->params;
	struct roshm_ctl_hello req;
	struct roshm_ctl_hello_reply rep;
	struct roshm_ctl_channel creq;
	struct roshm_ctl_hdr crep;
	struct roshm_chan_layout lay;
	int fds[ROSHM_CHANNEL_NFDS] = { -1, -1 };
	int nfds = 0, ret, fd, mfd = -1, want;
	bool huge = false;
	void *map = NULL;
	size_t mapped = 0;

	memset(&req, 0, sizeof(req));
	roshm__ctl_hdr(&req.hdr, ROSHM_CTL_HELLO, sizeof(req));
	if (roshm__copy_name(req.tenant, sizeof(req.tenant), p->tenant) ||
	    roshm__copy_name(req.token, sizeof(req.token), p->token) ||
	    roshm__copy_name(req.pod, sizeof(req.pod), p->pod) || !valid_label(p->pod))
		return -EINVAL;
	req.sq_entries = p->sq_entries;
	req.cq_entries = p->cq_entries;
	req.arena_size = p->arena_size;
	req.client_key = r->client_key;   /* 0 the first time */
	fd = roshm__sock_connect(p->sock_path, p->server_uid);
	if (fd < 0)
		return fd;
	ret = roshm__ctl_call(fd, &req, sizeof(req), &rep, sizeof(rep), NULL, 0, NULL);
	if (ret)
		goto err_sock;
	if (rep.hdr.status) {
		ret = rep.hdr.status < 0 ? rep.hdr.status : -EPROTO;
		goto err_sock;
	}
	if (rep.hdr.len != sizeof(rep) || !rep.client_key || !rep.max_handles || !rep.sq_entries || (rep.sq_entries & (rep.sq_entries - 1)) ||
	    !rep.cq_entries || (rep.cq_entries & (rep.cq_entries - 1)) || rep.arena_size % 4096) {
		ret = -EPROTO;
		goto err_sock;
	}
	roshm_chan_layout(rep.sq_entries, rep.cq_entries, rep.arena_size, &lay);
	if (lay.size != rep.chan_size || lay.size > SIZE_MAX / 2) {
		ret = -EPROTO;
		goto err_sock;
	}
	want = hugepages_wanted(p);
	if (r->chan)
		/* re-attaching: the same kind of pages, so the channel has the
		 * same size and moves into the old one's place */
		want = r->chan_huge ? ROSHM_HUGEPAGES_ON : ROSHM_HUGEPAGES_OFF;
	if (rep.flags & ROSHM_HELLO_F_HUGETLB_REQ) {
		if (want == ROSHM_HUGEPAGES_OFF) {
			ret = -EINVAL; /* roshmd insists on what we refuse */
			goto err_sock;
		}
		want = ROSHM_HUGEPAGES_ON;
	}
	if (!(rep.flags & ROSHM_HELLO_F_HUGETLB_OK) && want == ROSHM_HUGEPAGES_ON) {
		ret = -ENOMEM; /* no huge pages for channels on this node */
		goto err_sock;
	}
	if ((rep.flags & ROSHM_HELLO_F_HUGETLB_OK) && want != ROSHM_HUGEPAGES_OFF) {
		mfd = roshm__own_memory("roshm-channel", lay.size, true, &map, &mapped);
		huge = mfd >= 0;
		if (mfd < 0 && want == ROSHM_HUGEPAGES_ON) {
			ret = -ENOMEM; /* the pod has no huge pages left */
			goto err_sock;
		}
	}
	if (mfd < 0)
		mfd = roshm__own_memory("roshm-channel", lay.size, false, &map, &mapped);
	if (mfd < 0) {
		ret = mfd;
		goto err_sock;
	}
	memset(&creq, 0, sizeof(creq));
	roshm__ctl_hdr(&creq.hdr, ROSHM_CTL_CHANNEL, sizeof(creq));
	creq.size = mapped;
	ret = roshm__ctl_call_fd(fd, &creq, sizeof(creq), &crep, sizeof(crep), fds, ROSHM_CHANNEL_NFDS,
				 &nfds, mfd);
	close(mfd); /* roshmd has its own reference now; our mapping stays */
	if (ret)
		goto err_map;
	if (crep.status) {
		ret = crep.status < 0 ? crep.status : -EPROTO;
		goto err_fds;
	}
	if (crep.len != sizeof(crep) || nfds != ROSHM_CHANNEL_NFDS) {
		ret = -EPROTO;
		goto err_fds;
	}
	/* roshmd filled the header: check it anyway (a bad daemon or a version
	 * skew is -EPROTO, not a wild pointer). */
	ret = check_chan(map, mapped);
	if (ret)
		goto err_fds;
	r->chan_huge = huge;
	r->sock_fd = fd;
	r->sq_event_fd = fds[ROSHM_CHANNEL_FD_SQ_EVENT];
	r->cq_event_fd = fds[ROSHM_CHANNEL_FD_CQ_EVENT];
	r->client_id = rep.client_id;
	r->instance = rep.instance;
	r->client_key = rep.client_key;
	r->max_handles = rep.max_handles;
	memcpy(r->node, rep.node, sizeof(r->node));
	r->node[sizeof(r->node) - 1] = 0;
	*chan = map;
	*chan_size = mapped;
	return 0;
err_fds:
	close_fds(fds, nfds);
err_map:
	munmap(map, mapped);
err_sock:
	close(fd);
	return ret;
}

/* Point the ring and arena fields at channel memory @map. */
void roshm__bind_channel(struct roshm *r, void *map, size_t size)
{
	struct roshm_chan_hdr *h = map;
	struct roshm_ring_idx *sqi = (void *)((uint8_t *)map + h->sq_idx_off);
	struct roshm_ring_idx *cqi = (void *)((uint8_t *)map + h->cq_idx_off);

	r->chan = map;
	r->chan_size = size;
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
}

static void free_params(struct roshm_params *p)
{
	if (!p)
		return;
	free((char *)p->sock_path);
	free((char *)p->tenant);
	free((char *)p->token);
	free((char *)p->pod);
	free(p);
}

struct roshm *roshm_open(const struct roshm_params *p, int *err)
{
	struct roshm_params dflt = { 0 };
	struct roshm *r;
	void *map;
	size_t size;
	int ret = -ENOMEM;

	if (!p)
		p = &dflt;
	r = calloc(1, sizeof(*r));
	if (!r)
		goto err;
	r->sock_fd = r->sq_event_fd = r->cq_event_fd = -1;
	r->spin_us = p->spin_us ? p->spin_us : 50;
	r->reconnect_ms = p->reconnect_ms ? p->reconnect_ms : 10000;
	r->params = calloc(1, sizeof(*r->params));
	if (!r->params)
		goto err_free;
	*r->params = *p;
	r->params->sock_path = strdup(roshm__env_or(p->sock_path, "ROSHM_SOCK", ROSHM_DEFAULT_SOCK));
	r->params->tenant = strdup(roshm__env_or(p->tenant, "ROSHM_TENANT", "default"));
	r->params->token = strdup(roshm__env_or(p->token, "ROSHM_TOKEN", ""));
	r->params->pod = default_pod(p->pod);
	r->params->admin_token = NULL; /* not kept: attach never sends it */
	if (!r->params->sock_path || !r->params->tenant || !r->params->token || !r->params->pod)
		goto err_free;
	ret = roshm__attach(r, &map, &size);
	if (ret)
		goto err_free;
	roshm__bind_channel(r, map, size);
	/* Re-attaching asks for the same ring and arena sizes. */
	r->params->sq_entries = r->sq.entries;
	r->params->cq_entries = r->cq.entries;
	r->params->arena_size = r->arena_size;
	r->ntags = r->sq.entries + r->cq.entries;
	r->lcq_cap = r->ntags;
	r->tags = calloc(r->ntags, sizeof(*r->tags));
	r->lcq = calloc(r->lcq_cap, sizeof(*r->lcq));
	if (!r->tags || !r->lcq) {
		ret = -ENOMEM;
		goto err_free;
	}
	for (uint32_t i = 0; i < r->ntags; i++)
		r->tags[i].next_free = i + 1;
	r->tag_free = 0;
	*err = 0;
	return r;
err_free:
	if (r->chan)
		munmap(r->chan, r->chan_size);
	if (r->sock_fd >= 0)
		close(r->sock_fd);
	if (r->sq_event_fd >= 0)
		close(r->sq_event_fd);
	if (r->cq_event_fd >= 0)
		close(r->cq_event_fd);
	free(r->tags);
	free(r->lcq);
	free_params(r->params);
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
		close(o->fd);
		free(o->grants);
		free(o);
	}
	/* Closing the socket tells roshmd to release every handle and region. */
	close(r->sock_fd);
	close(r->sq_event_fd);
	close(r->cq_event_fd);
	munmap(r->chan, r->chan_size);
	free(r->tags);
	free(r->lcq);
	free(r->hmap);
	free_params(r->params);
	free(r);
}

struct roshm_hmap *roshm__hmap_find(struct roshm *r, uint32_t app)
{
	for (uint32_t i = 0; i < r->nhmap; i++)
		if (r->hmap[i].app == app)
			return &r->hmap[i];
	return NULL;
}

int roshm__hmap_add(struct roshm *r, uint32_t handle, const char *name, struct roshm_owned *o)
{
	struct roshm_hmap *m = realloc(r->hmap, sizeof(*m) * (r->nhmap + 1));

	if (!m)
		return -ENOMEM;
	r->hmap = m;
	m = &r->hmap[r->nhmap++];
	memset(m, 0, sizeof(*m));
	m->app = m->srv = handle;
	snprintf(m->name, sizeof(m->name), "%s", name);
	m->owned = o;
	return 0;
}



/* An earlier re-attach gave up (no socket): a control call tries again first. */
int roshm__ensure_attached(struct roshm *r)
{
	return r->sock_fd >= 0 ? 0 : roshm__reconnect(r);
}

/* A control request; when roshmd went away, re-attach once and retry. */
int roshm__ctl_call_retry(struct roshm *r, void *req, size_t req_len, void *reply, size_t reply_max,
			  int *fds, int nfds_max, int *nfds, int fd_out)
{
	int ret = roshm__ensure_attached(r);

	if (ret)
		return ret;
	for (int attempt = 0;; attempt++) {
		if (fd_out >= 0)
			ret = roshm__ctl_call_fd(r->sock_fd, req, req_len, reply, reply_max, fds, nfds_max,
						 nfds, fd_out);
		else
			ret = roshm__ctl_call(r->sock_fd, req, req_len, reply, reply_max, fds, nfds_max,
					      nfds);
		if ((ret != -ECONNRESET && ret != -EPIPE && ret != -ENOTCONN) || attempt)
			return ret;
		ret = roshm__reconnect(r);
		if (ret)
			return ret;
	}
}

int roshm_submit(struct roshm *r)
{
	struct roshm_sq *sq = &r->sq;
	uint32_t n = sq->sqe_tail - sq->sqe_head, cqes = 0;

	if (!n)
		return 0;
	for (uint32_t i = sq->sqe_head; i != sq->sqe_tail; i++) {
		struct roshm_sqe *sqe = &sq->sqes[i & sq->mask];

		if (r->remapped)
			sqe->handle = roshm__srv_handle(r, sqe->handle);
		/* A TXN_WRITE has no CQE of its own (its transaction's commit has). */
		if (sqe->opcode == ROSHM_OP_TXN_WRITE)
			continue;
		uint32_t t = r->tag_free;

		/* Cannot run out: at most SQ + CQ entries are ever outstanding. */
		if (t < r->ntags) {
			struct roshm_tag *tg = &r->tags[t];

			r->tag_free = tg->next_free;
			tg->used = 1;
			tg->seq = r->tag_seq++;
			tg->user_data = sqe->user_data;
			tg->sqe = *sqe;
			sqe->user_data = t;
		}
		cqes++;
	}
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
		char one = 1;
		ssize_t w = send(r->sq_event_fd, &one, 1, MSG_DONTWAIT | MSG_NOSIGNAL);

		(void)w; /* EAGAIN: wakeups are queued already; EPIPE: roshmd is gone */
	}
	return (int)n;
}
