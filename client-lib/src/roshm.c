// SPDX-License-Identifier: MIT
/* libroshm slow path: attach, regions, submit, waiting, admin. */
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

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

struct roshm_owned {
	struct roshm_owned *next;
	uint32_t handle;              /* the application's */
	void *map;
	size_t map_size;
	uint8_t *data;
	uint64_t data_size;
	int fd;                       /* kept: re-registered after a roshmd restart */
	struct roshm_ctl_region_create req;
};

/* Every handle the application holds, and roshmd's value for it now. */
struct roshm_hmap {
	uint32_t app;
	uint32_t srv;
	char name[2 * ROSHM_NAME_MAX];
	struct roshm_owned *owned;    /* NULL: opened by name */
};

static const char *env_or(const char *v, const char *env, const char *dflt)
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

	v = env_or(v, "ROSHM_POD", NULL);
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

static void ctl_hdr(struct roshm_ctl_hdr *h, uint16_t type, size_t len)
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

static int sock_connect(const char *path, int64_t server_uid)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, ret;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	ret = check_server(fd, server_uid);
	if (ret) {
		close(fd);
		return ret;
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
static int own_memory(const char *name, uint64_t size, bool huge, void **map, size_t *mapped)
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
static int attach(struct roshm *r, void **chan, size_t *chan_size)
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
	ctl_hdr(&req.hdr, ROSHM_CTL_HELLO, sizeof(req));
	if (copy_name(req.tenant, sizeof(req.tenant), p->tenant) ||
	    copy_name(req.token, sizeof(req.token), p->token) ||
	    copy_name(req.pod, sizeof(req.pod), p->pod) || !valid_label(p->pod))
		return -EINVAL;
	req.sq_entries = p->sq_entries;
	req.cq_entries = p->cq_entries;
	req.arena_size = p->arena_size;
	fd = sock_connect(p->sock_path, p->server_uid);
	if (fd < 0)
		return fd;
	ret = roshm__ctl_call(fd, &req, sizeof(req), &rep, sizeof(rep), NULL, 0, NULL);
	if (ret)
		goto err_sock;
	if (rep.hdr.status) {
		ret = rep.hdr.status < 0 ? rep.hdr.status : -EPROTO;
		goto err_sock;
	}
	if (rep.hdr.len != sizeof(rep) || !rep.sq_entries || (rep.sq_entries & (rep.sq_entries - 1)) ||
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
		mfd = own_memory("roshm-channel", lay.size, true, &map, &mapped);
		huge = mfd >= 0;
		if (mfd < 0 && want == ROSHM_HUGEPAGES_ON) {
			ret = -ENOMEM; /* the pod has no huge pages left */
			goto err_sock;
		}
	}
	if (mfd < 0)
		mfd = own_memory("roshm-channel", lay.size, false, &map, &mapped);
	if (mfd < 0) {
		ret = mfd;
		goto err_sock;
	}
	memset(&creq, 0, sizeof(creq));
	ctl_hdr(&creq.hdr, ROSHM_CTL_CHANNEL, sizeof(creq));
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
static void bind_channel(struct roshm *r, void *map, size_t size)
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
	r->params->sock_path = strdup(env_or(p->sock_path, "ROSHM_SOCK", ROSHM_DEFAULT_SOCK));
	r->params->tenant = strdup(env_or(p->tenant, "ROSHM_TENANT", "default"));
	r->params->token = strdup(env_or(p->token, "ROSHM_TOKEN", ""));
	r->params->pod = default_pod(p->pod);
	r->params->admin_token = NULL; /* not kept: attach never sends it */
	if (!r->params->sock_path || !r->params->tenant || !r->params->token || !r->params->pod)
		goto err_free;
	ret = attach(r, &map, &size);
	if (ret)
		goto err_free;
	bind_channel(r, map, size);
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

static struct roshm_hmap *hmap_find(struct roshm *r, uint32_t app)
{
	for (uint32_t i = 0; i < r->nhmap; i++)
		if (r->hmap[i].app == app)
			return &r->hmap[i];
	return NULL;
}

static int hmap_add(struct roshm *r, uint32_t handle, const char *name, struct roshm_owned *o)
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

/* roshmd's value of an application handle (identity until a reconnect). */
static inline uint32_t srv_handle(struct roshm *r, uint32_t app)
{
	struct roshm_hmap *m;

	if (!r->remapped)
		return app;
	m = hmap_find(r, app);
	return m ? m->srv : 0xffffffffu; /* unknown: roshmd answers EBADF */
}

static int reconnect(struct roshm *r);

/* An earlier re-attach gave up (no socket): a control call tries again first. */
static int ensure_attached(struct roshm *r)
{
	return r->sock_fd >= 0 ? 0 : reconnect(r);
}

/* A control request; when roshmd went away, re-attach once and retry. */
static int ctl_call_retry(struct roshm *r, void *req, size_t req_len, void *reply, size_t reply_max,
			  int *fds, int nfds_max, int *nfds, int fd_out)
{
	int ret = ensure_attached(r);

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
		ret = reconnect(r);
		if (ret)
			return ret;
	}
}

/*
 * Send a region create with the region's memory: with @fd >= 0 a re-attach
 * of a region we own (its memfd, contents kept); otherwise a new memfd that
 * we make and touch here (our pod's memory), which roshmd checks, seals and
 * initialises.
 */
static int create_region(struct roshm *r, struct roshm_ctl_region_create *req, int fd,
			 struct roshm_owned **out, uint32_t *handle)
{
	struct roshm_ctl_region_reply rep;
	struct roshm_owned *o;
	uint64_t want;
	size_t mapped = 0;
	void *map = NULL;
	int mfd, ret;

	if (fd >= 0) {
		ret = roshm__ctl_call_fd(r->sock_fd, req, sizeof(*req), &rep, sizeof(rep), NULL, 0, NULL, fd);
		if (!ret && rep.hdr.status)
			ret = rep.hdr.status < 0 ? rep.hdr.status : -EPROTO;
		if (!ret && rep.hdr.len != sizeof(rep))
			ret = -EPROTO;
		if (!ret)
			*handle = rep.handle;
		return ret;
	}
	if (!req->size || req->size > (1ull << 40) || req->txn_slots > 65536 ||
	    req->slot_size > (1u << 20))
		return -EINVAL;
	want = roshm_region_map_size(req->size, req->txn_slots, req->slot_size);
	mfd = own_memory("roshm-region", want, false, &map, &mapped);
	if (mfd < 0)
		return mfd;
	ret = ctl_call_retry(r, req, sizeof(*req), &rep, sizeof(rep), NULL, 0, NULL, mfd);
	if (ret)
		goto err;
	if (rep.hdr.status) {
		ret = rep.hdr.status < 0 ? rep.hdr.status : -EPROTO;
		goto err;
	}
	const struct roshm_region_hdr *rh = map;

	/* roshmd wrote the header into our memory: check it all the same */
	if (rep.hdr.len != sizeof(rep) || rep.map_size != mapped || rep.data_size != req->size ||
	    rh->magic != ROSHM_REGION_MAGIC || rh->data_size != req->size ||
	    rh->data_off != roshm_region_data_off(req->txn_slots, req->slot_size)) {
		ret = -EPROTO;
		goto err;
	}
	o = calloc(1, sizeof(*o));
	if (!o) {
		ret = -ENOMEM;
		goto err;
	}
	o->handle = rep.handle;
	o->map = map;
	o->map_size = mapped;
	o->data = (uint8_t *)map + rh->data_off;
	o->data_size = req->size;
	o->fd = mfd;
	o->req = *req;
	*out = o;
	*handle = rep.handle;
	return 0;
err:
	munmap(map, mapped);
	close(mfd);
	return ret;
}

int roshm_region_create(struct roshm *r, const char *name, uint64_t size,
			const struct roshm_region_opts *opts, uint32_t *handle)
{
	struct roshm_ctl_region_create req;
	struct roshm_owned *o;
	int ret;

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
		req.access = opts->access;
		req.win_off = opts->win_off;
		req.win_len = opts->win_len;
		req.va_base = opts->va_base;
	}
	ret = create_region(r, &req, -1, &o, handle);
	if (ret)
		return ret;
	/* A handle value the application will keep, even across reconnects. */
	if (r->remapped)
		for (uint32_t app = o->handle;; app += 1u << 16)
			if (!hmap_find(r, app)) {
				*handle = app;
				break;
			}
	ret = hmap_add(r, *handle, name, o);
	if (ret) {
		munmap(o->map, o->map_size);
		close(o->fd);
		free(o);
		return ret;
	}
	r->hmap[r->nhmap - 1].srv = o->handle;
	o->handle = *handle;
	o->next = r->owned;
	r->owned = o;
	return 0;
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

int roshm_region_fd(struct roshm *r, uint32_t handle, uint64_t *data_off)
{
	for (struct roshm_owned *o = r->owned; o; o = o->next)
		if (o->handle == handle) {
			int fd = fcntl(o->fd, F_DUPFD_CLOEXEC, 0);

			if (fd < 0)
				return -errno;
			if (data_off)
				*data_off = (uint64_t)(o->data - (uint8_t *)o->map);
			return fd;
		}
	return -EBADF;
}

static int open_region(struct roshm *r, const char *name, uint32_t *handle, uint64_t *size)
{
	struct roshm_ctl_region_open req;
	struct roshm_ctl_region_reply rep;
	int ret;

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

int roshm_region_open(struct roshm *r, const char *name, uint32_t *handle, uint64_t *size)
{
	uint32_t srv;
	int ret;

	if (!name || !handle)
		return -EINVAL;
	ret = ensure_attached(r);
	if (ret)
		return ret;
	ret = open_region(r, name, &srv, size);
	if ((ret == -ECONNRESET || ret == -EPIPE) && !(ret = reconnect(r)))
		ret = open_region(r, name, &srv, size);
	if (ret)
		return ret;
	*handle = srv;
	if (r->remapped)
		for (uint32_t app = srv;; app += 1u << 16)
			if (!hmap_find(r, app)) {
				*handle = app;
				break;
			}
	ret = hmap_add(r, *handle, name, NULL);
	if (ret)
		return ret;
	r->hmap[r->nhmap - 1].srv = srv;
	return 0;
}

int roshm_region_close(struct roshm *r, uint32_t handle)
{
	struct roshm_ctl_region_close req;
	struct roshm_ctl_region_reply rep;
	struct roshm_owned **pp;
	struct roshm_hmap *m = hmap_find(r, handle);
	int ret;

	if (!m)
		return -EBADF;
	ret = ensure_attached(r);
	if (ret)
		return ret;
	memset(&req, 0, sizeof(req));
	ctl_hdr(&req.hdr, ROSHM_CTL_REGION_CLOSE, sizeof(req));
	req.handle = m->srv;
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
			close(o->fd);
			free(o);
			break;
		}
	}
	*m = r->hmap[--r->nhmap];
	return 0;
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
			sqe->handle = srv_handle(r, sqe->handle);
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

static int cmp_tag_seq(const void *a, const void *b)
{
	const struct roshm_tag *x = *(const struct roshm_tag *const *)a;
	const struct roshm_tag *y = *(const struct roshm_tag *const *)b;

	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Move the completions roshmd posted into the library's own queue (lcq),
 * which can hold one per tag: that keeps the CQ from filling while we
 * resubmit more than it holds. */
static void cq_to_lcq(struct roshm *r)
{
	uint32_t head = *r->cq.khead, tail = __atomic_load_n(r->cq.ktail, __ATOMIC_ACQUIRE);

	for (; head != tail && r->lcq_n < r->lcq_cap; head++) {
		struct roshm_cqe *c = &r->lcq[(r->lcq_head + r->lcq_n++) % r->lcq_cap];

		*c = r->cq.cqes[head & r->cq.mask];
		roshm__untag(r, c);
	}
	__atomic_store_n(r->cq.khead, head, __ATOMIC_RELEASE);
}

/*
 * Resubmit what had no CQE, in order, a ring's worth at a time: there can be
 * more of it (up to SQ + CQ entries) than the SQ holds. Idempotent operations
 * go again; FETCH_ADD, CMP_SWAP and TXN_COMMIT whose outcome was lost
 * complete with -ECONNRESET, never twice. Returns once roshmd consumed them all.
 */
static int resubmit(struct roshm *r, struct roshm_tag **order, uint32_t n, uint64_t deadline)
{
	uint32_t i = 0;

	for (;;) {
		uint32_t head = __atomic_load_n(r->sq.khead, __ATOMIC_ACQUIRE);

		while (i < n && r->sq.sqe_tail - head < r->sq.entries) {
			struct roshm_tag *tg = order[i++];
			uint32_t t = (uint32_t)(tg - r->tags);
			uint8_t op = tg->sqe.opcode;

			if (op == ROSHM_OP_NOP || op == ROSHM_OP_WRITE || op == ROSHM_OP_READ ||
			    op == ROSHM_OP_FENCE) {
				struct roshm_sqe *sqe = &r->sq.sqes[r->sq.sqe_tail++ & r->sq.mask];

				*sqe = tg->sqe;
				sqe->handle = srv_handle(r, tg->sqe.handle);
				sqe->user_data = t;
				continue;
			}
			struct roshm_cqe *c = &r->lcq[(r->lcq_head + r->lcq_n++) % r->lcq_cap];

			memset(c, 0, sizeof(*c));
			c->user_data = tg->user_data;
			c->status = -ECONNRESET;
			c->flags = ROSHM_CQE_F_LIB;
			tg->used = 0;
			tg->next_free = r->tag_free;
			r->tag_free = t;
		}
		if (r->sq.sqe_tail != r->sq.sqe_head) {
			char one = 1;
			ssize_t w;

			__atomic_store_n(r->sq.ktail, r->sq.sqe_tail, __ATOMIC_RELEASE);
			r->sq.sqe_head = r->sq.sqe_tail;
			w = send(r->sq_event_fd, &one, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
			(void)w;
		}
		cq_to_lcq(r);
		if (i == n && __atomic_load_n(r->sq.khead, __ATOMIC_ACQUIRE) == r->sq.sqe_tail)
			return 0;
		if (mono_ms() >= deadline)
			return -ECONNRESET;
		usleep(100);
	}
}

/* No roshmd came back in time: every operation without a CQE completes
 * with -ECONNRESET from the library (the caller sees each one once), and
 * the next wait tries to re-attach again. */
static void fail_inflight(struct roshm *r)
{
	for (uint32_t t = 0; t < r->ntags; t++) {
		struct roshm_tag *tg = &r->tags[t];
		struct roshm_cqe *c;

		if (!tg->used || r->lcq_n >= r->lcq_cap)
			continue;
		c = &r->lcq[(r->lcq_head + r->lcq_n++) % r->lcq_cap];
		memset(c, 0, sizeof(*c));
		c->user_data = tg->user_data;
		c->status = -ECONNRESET;
		c->flags = ROSHM_CQE_F_LIB;
		tg->used = 0;
		tg->next_free = r->tag_free;
		r->tag_free = t;
	}
}

/*
 * roshmd went away: attach to its successor at the same socket, move the
 * arena over (same address, same contents), re-register the regions we own
 * from their memfds, re-open the others by name, and resubmit what had no
 * CQE. Non-idempotent operations whose outcome was lost complete with
 * -ECONNRESET from the library.
 */
static int reconnect(struct roshm *r)
{
	uint64_t deadline = mono_ms() + r->reconnect_ms;
	struct roshm_tag **order = NULL;
	uint32_t norder = 0;
	void *map = NULL;
	size_t size = 0;
	int ret;

	uint64_t old_instance = r->instance;

	close(r->sock_fd);
	close(r->sq_event_fd);
	close(r->cq_event_fd);
	r->sock_fd = r->sq_event_fd = r->cq_event_fd = -1;
	for (;;) {
		ret = attach(r, &map, &size);
		if (!ret && r->instance == old_instance) {
			/* The same roshmd hung up on us (it judged our ring corrupt):
			 * that is an answer, not an outage. */
			munmap(map, size);
			close(r->sock_fd);
			close(r->sq_event_fd);
			close(r->cq_event_fd);
			r->sock_fd = r->sq_event_fd = r->cq_event_fd = -1;
			fail_inflight(r);
			return -ECONNRESET;
		}
		if (!ret)
			break;
		if (mono_ms() >= deadline) {
			fail_inflight(r);
			return -ECONNRESET;
		}
		/* A restarted roshmd serves within a few hundred ms: look every
		 * 5 ms for the first 2 s (a refused connect() costs microseconds),
		 * then every 50 ms. */
		usleep(mono_ms() + r->reconnect_ms - deadline < 2000 ? 5000 : 50000);
	}
	const struct roshm_chan_hdr *h = map;

	if (size != r->chan_size || h->sq_entries != r->sq.entries || h->cq_entries != r->cq.entries ||
	    h->arena_size != r->arena_size) {
		munmap(map, size);
		return -EPROTO; /* a successor with other channel sizes: give up */
	}
	/* Completions roshmd posted that we have not read yet are kept. */
	cq_to_lcq(r);
	/* The application's arena pointers stay valid: same place, same bytes. */
	memcpy((uint8_t *)map + h->arena_off, r->arena, r->arena_size);
	/* SQEs prepared but not submitted move along too (at most a ring's worth). */
	uint32_t unsent = r->sq.sqe_tail - r->sq.sqe_head;
	struct roshm_sqe *keep = unsent ? malloc(sizeof(*keep) * unsent) : NULL;

	if (unsent && !keep) {
		munmap(map, size);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < unsent; i++)
		keep[i] = r->sq.sqes[(r->sq.sqe_head + i) & r->sq.mask];
	if (mremap(map, size, size, MREMAP_MAYMOVE | MREMAP_FIXED, r->chan) == MAP_FAILED) {
		ret = -errno;
		munmap(map, size);
		free(keep);
		return ret;
	}
	bind_channel(r, r->chan, size);

	/* Regions: ours from their memfds (contents survive), others by name. */
	r->remapped = true;
	for (uint32_t i = 0; i < r->nhmap; i++) {
		struct roshm_hmap *m = &r->hmap[i];
		uint32_t srv = 0xffffffffu;

		if (m->owned) {
			struct roshm_ctl_region_create req = m->owned->req;

			ctl_hdr(&req.hdr, ROSHM_CTL_REGION_REATTACH, sizeof(req));
			if (create_region(r, &req, m->owned->fd, NULL, &srv))
				srv = 0xffffffffu;
		} else {
			/* its owner, or its node, may still be coming back: give
			 * them the deadline */
			for (;;) {
				int e = open_region(r, m->name, &srv, NULL);

				if ((e != -ENOENT && e != -EHOSTUNREACH && e != -EAGAIN) ||
				    mono_ms() >= deadline)
					break;
				srv = 0xffffffffu;
				usleep(50000);
			}
		}
		m->srv = srv;
	}

	/* Resubmit in submission order. */
	order = malloc(sizeof(*order) * r->ntags);
	if (!order) {
		free(keep);
		return -ENOMEM;
	}
	for (uint32_t t = 0; t < r->ntags; t++)
		if (r->tags[t].used)
			order[norder++] = &r->tags[t];
	qsort(order, norder, sizeof(*order), cmp_tag_seq);
	ret = resubmit(r, order, norder, deadline);
	free(order);
	if (ret) {
		free(keep);
		return ret;
	}
	/* They keep their place after what was resubmitted, which roshmd has
	 * consumed by now: the empty ring holds them (get_sqe saw room). */
	for (uint32_t i = 0; i < unsent; i++)
		r->sq.sqes[r->sq.sqe_tail++ & r->sq.mask] = keep[i];
	free(keep);
	return 0;
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
		if (r->sock_fd < 0) {
			/* an earlier re-attach gave up: try again */
			int ret = reconnect(r);

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
			int ret = reconnect(r);

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

/* The node's admin token: given, $ROSHM_ADMIN_TOKEN, or the first line of
 * $ROSHM_ADMIN_TOKEN_FILE or ROSHM_DEFAULT_ADMIN_TOKEN (when readable). */
static void admin_token(const char *given, char *out, size_t cap)
{
	const char *v = env_or(given, "ROSHM_ADMIN_TOKEN", NULL);
	const char *path;
	ssize_t n;
	int fd;

	out[0] = 0;
	if (v) {
		snprintf(out, cap, "%s", v);
		return;
	}
	path = env_or(NULL, "ROSHM_ADMIN_TOKEN_FILE", ROSHM_DEFAULT_ADMIN_TOKEN);
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
	ctl_hdr(&req.hdr, ROSHM_CTL_ADMIN, sizeof(req));
	tenant = env_or(p->tenant, "ROSHM_TENANT", "");
	token = env_or(p->token, "ROSHM_TOKEN", "");
	if (copy_name(req.cmd, sizeof(req.cmd), cmd) ||
	    copy_name(req.tenant, sizeof(req.tenant), tenant) ||
	    copy_name(req.token, sizeof(req.token), token))
		return -EINVAL;
	admin_token(p->admin_token, req.admin_token, sizeof(req.admin_token));
	fd = sock_connect(env_or(p->sock_path, "ROSHM_SOCK", ROSHM_DEFAULT_SOCK), p->server_uid);
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
