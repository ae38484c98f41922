// SPDX-License-Identifier: MIT
/*
 * The control thread's loop: one epoll over the control socket and its
 * connections (attach.c), the signalfd, the poller's events, the registry,
 * the hole guard, the tcp/verbs transports' sockets (peers.c) and /metrics;
 * after each batch its timers (deadlines, peers, drains, telemetry). It never
 * touches a ring's data path; every change the poller must see is a command
 * (rd_poller_cmd) that is applied before the control thread answers the
 * client or frees anything. Also: its setup (control socket and lock, admin
 * token, the node's record) and teardown.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "control/internal.h"
#include "control/metrics.h"

#define RD_LOG_COMPONENT RD_LC_CONTROL

/* epoll tags for the fds that are not connections */
static struct rd_ep_tag tag_listen = { RD_EP_LISTEN }, tag_sig = { RD_EP_SIG }, tag_ev = { RD_EP_EV };
/* the registry's event fd: its work runs from rd_control_run's dispatch */
static struct rd_ep_tag tag_reg = { RD_EP_EV };
/* the hole guard's: a region's owner punched a hole in it */
static struct rd_ep_tag tag_guard = { RD_EP_EV };

uint64_t rd_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void rd_random_bytes(void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = getrandom(p, len, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			/* getrandom(2) cannot fail with a valid buffer on Linux >= 3.17. */
			abort();
		}
		p += n;
		len -= (size_t)n;
	}
}

int rd_control_cmd(struct rd_control *ctl, struct rd_cmd *cmd)
{
	return rd_poller_cmd(ctl->poller, cmd);
}

void rd_control_epoll_add(struct rd_control *ctl, int fd, void *tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = tag };

	epoll_ctl(ctl->epfd, EPOLL_CTL_ADD, fd, &ev);
}

void rd_control_epoll_del(struct rd_control *ctl, int fd)
{
	epoll_ctl(ctl->epfd, EPOLL_CTL_DEL, fd, NULL);
}

/*
 * The hole guard found a hole that a region's owner punched (guard.h): the
 * owner is disconnected (its regions close), and the region's memory is
 * punched out by region.c when the poller has let go of it.
 */
static void guard_events(struct rd_control *ctl)
{
	uint64_t v;
	bool again = true;

	if (read(ctl->guard.efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return;
	while (again) {
		again = false;
		for (struct rd_region *rg = ctl->regions; rg; rg = rg->next) {
			if (rg->remote || rg->tamper_seen ||
			    !__atomic_load_n(&rg->tampered, __ATOMIC_ACQUIRE))
				continue;
			rg->tamper_seen = true;
			ctl->tampered_regions++;
			RD_LOG(WARNING, "region %s/%s: its owner punched a hole in the region's memory: "
			       "owner (client %u) disconnected, region closed",
			       rg->tenant, rg->name, rg->owner ? rg->owner->id : 0);
			if (rg->owner && rg->owner->conn) {
				rd_conn_close(ctl, rg->owner->conn, "punched a hole in its region");
				again = true; /* the list changed under us */
				break;
			}
		}
	}
}

static void poller_events(struct rd_control *ctl)
{
	struct rd_event ev;
	uint64_t v;
	ssize_t r = read(ctl->poller->ev_efd, &v, sizeof(v));

	(void)r;
	while (rte_ring_sc_dequeue_elem(ctl->poller->ev_ring, &ev, sizeof(ev)) == 0) {
		if (ev.type != RD_EV_CLIENT_CORRUPT) {
			rd_peers_event(ctl, &ev);
			continue;
		}
		struct rd_client *c = ctl->client_slots[ev.client_id & 0xffffu];

		if (c && c->id == ev.client_id) {
			ev.why[sizeof(ev.why) - 1] = 0;
			RD_LOG(WARNING, "client %u (pid %d): %s: disconnecting it", ev.client_id,
			       (int)c->pid, ev.why);
			rd_conn_close(ctl, c->conn, ev.why);
		}
	}
	/* What the poller let go of since: free it now. */
	for (struct rd_defer *d = rd_poller_graveyard(ctl->poller), *next; d; d = next) {
		next = d->next;
		if (d->kind == RD_DEFER_REGION)
			rd_control_region_free(ctl, container_of(d, struct rd_region, defer));
		else
			rd_control_client_free(ctl, container_of(d, struct rd_client, defer));
	}
}

/* ---- setup ---------------------------------------------------------------------- */

/*
 * Where the lock that says which roshmd serves @sock lives: in the admin
 * token's directory (roshmd's own, which no pod mounts), named after the
 * socket path, so that no tenant can hold it: the socket's directory is
 * mounted into every pod, and flock() needs only a read-only descriptor,
 * which a pod running as root opens whatever the file's mode. Without an
 * admin token directory (admin.token_file "" or not writable), next to the
 * socket as "<socket>.lock", with a warning.
 */
static void lock_path(const struct rd_control *ctl, const char *sock, char *out, size_t n)
{
	const char *tok = ctl->cfg->admin_token_file;
	const char *slash = strrchr(tok, '/'), *base = strrchr(sock, '/');
	uint64_t h = 1469598103934665603ull;  /* FNV-1a */
	char dir[RD_PATH_MAX], sdir[RD_PATH_MAX];
	struct stat st, ss;
	uint64_t id[2] = { 0, 0 };

	/* the socket by what it is, not how it is spelled: its directory's
	 * device and inode, and its name */
	base = base ? base + 1 : sock;
	snprintf(sdir, sizeof(sdir), "%.*s", base > sock ? (int)(base - sock) : 1,
		 base > sock ? sock : ".");
	if (stat(sdir, &ss) == 0) {
		id[0] = ss.st_dev;
		id[1] = ss.st_ino;
	}
	for (size_t i = 0; i < sizeof(id); i++)
		h = (h ^ ((const uint8_t *)id)[i]) * 1099511628211ull;
	for (const char *p = base; *p; p++)
		h = (h ^ (uint8_t)*p) * 1099511628211ull;
	if (tok[0] && slash && slash != tok && (size_t)(slash - tok) < sizeof(dir)) {
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - tok), tok);
		mkdir(dir, 0700);
		if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && access(dir, W_OK) == 0 &&
		    (size_t)snprintf(out, n, "%s/roshmd-%016" PRIx64 ".lock", dir, h) < n) {
			if (id[1] && st.st_dev == ss.st_dev && st.st_ino == ss.st_ino)
				RD_LOG(WARNING, "admin.token_file %s is in the socket's directory, which "
				       "pods mount: they can read the admin token and hold roshmd's "
				       "lock; give it a directory of roshmd's own", tok);
			return;
		}
	}
	snprintf(out, n, "%s.lock", sock);
	RD_LOG(WARNING, "lock file %s next to the socket (no writable admin token directory): a "
	       "process that can open it, read-only too, can keep roshmd from starting", out);
}

/*
 * The control socket. Whether another roshmd serves it is decided by a lock
 * (lock_path), not by connecting: a stale socket file, or a process that
 * took over the path and answers, must not keep roshmd from starting.
 * The directory is created 0755: pods get it mounted read-only, so none of
 * them can replace the socket (libroshm also checks the server's uid).
 */
static int take_lock(struct rd_control *ctl, const char *path)
{
	struct sockaddr_un sa;
	char dir[sizeof(sa.sun_path)], lock[RD_PATH_MAX + 32];
	struct stat st;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');

	if (slash && slash != dir) {
		*slash = 0;
		for (char *p = dir + 1; *p; p++)
			if (*p == '/') {
				*p = 0;
				mkdir(dir, 0755);
				*p = '/';
			}
		mkdir(dir, 0755);
		if (stat(dir, &st) == 0 && (st.st_mode & 022) && !(st.st_mode & S_ISVTX))
			RD_LOG(WARNING, "socket directory %s is writable by others (mode %03o): anyone "
			       "who can write it can put another socket in roshmd's place",
			       dir, (unsigned)(st.st_mode & 0777));
	}
	lock_path(ctl, path, lock, sizeof(lock));
	ctl->lock_fd = open(lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (ctl->lock_fd < 0)
		return -errno;
	if (flock(ctl->lock_fd, LOCK_EX | LOCK_NB) < 0)
		return errno == EWOULDBLOCK ? -EADDRINUSE : -errno;
	return 0;
}

/* flock(LOCK_EX | LOCK_NB) on the regular file @path (made 0600 if
 * missing): its fd, -EADDRINUSE (held), -ENOLCK (no locks on that file
 * system), or -errno. */
static int flock_file(const char *path)
{
	struct stat st;
	int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;

		close(fd);
		return e == EWOULDBLOCK ? -EADDRINUSE : e == EOPNOTSUPP ? -ENOLCK : -e;
	}
	return fd;
}

/*
 * One roshmd per node name of a registry, on this host: a second one with
 * the same `node` and another socket (a copied configuration, two started
 * by hand that both take the hostname) would remove the first one's region
 * records as its own leftovers, put its node record over the first one's
 * and delete it as it exits. file: a lock file in the registry's nodes/
 * directory (whoever shares the directory); etcd: one in the admin token's
 * directory (roshmd's own, like the socket's lock: no pod or other user can
 * hold it), named after the prefix and the node, so roshmd instances of a
 * host that share that directory (the default) see each other; others,
 * and roshmd on other hosts under one name, are not seen. Held until
 * exit. 0, -EADDRINUSE, or -errno.
 */
static int take_node_lock(struct rd_control *ctl)
{
	const struct rd_config *cfg = ctl->cfg;
	char path[RD_PATH_MAX + ROSHM_NAME_MAX + 48];
	int fd;

	if (!strcmp(cfg->registry_backend, "file")) {
		if (snprintf(path, sizeof(path), "%s/nodes/.%s.lock", cfg->registry_dir, cfg->node) >=
		    (int)sizeof(path))
			return -ENAMETOOLONG;
	} else {
		const char *tok = cfg->admin_token_file, *slash = strrchr(tok, '/');
		const char *parts[2] = { cfg->etcd_prefix, cfg->node };
		uint64_t h = 1469598103934665603ull;  /* FNV-1a */

		for (int i = 0; i < 2; i++)
			for (const char *p = parts[i];; p++) {
				h = (h ^ (uint8_t)*p) * 1099511628211ull;
				if (!*p)
					break;
			}
		if (!tok[0] || !slash || slash == tok ||
		    snprintf(path, sizeof(path), "%.*s/roshmd-node-%016llx.lock", (int)(slash - tok),
			     tok, (unsigned long long)h) >= (int)sizeof(path)) {
			RD_LOG(NOTICE, "node name %s: no admin token directory: another roshmd under "
			       "this name is not looked for", cfg->node);
			return 0;
		}
	}
	fd = flock_file(path);
	if (fd == -ENOLCK) {
		RD_LOG(WARNING, "node name %s: %s: the file system has no locks: another roshmd "
		       "under this name is not looked for", cfg->node, path);
		return 0;
	}
	if (fd < 0)
		return fd;
	ctl->node_lock_fd = fd;
	return 0;
}

/* The socket, once take_lock() holds its lock: its fd, or -errno. */
static int listen_socket(struct rd_control *ctl, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int fd;

	strcpy(sa.sun_path, path);   /* take_lock checked its length */
	/* Ours now: whatever sits at the path is stale or an impostor (an empty
	 * directory too: kubelet makes one for a pod's subPath mount of a name
	 * that does not exist yet). What cannot be removed is said as such. */
	if (unlink(path) < 0 && errno == EISDIR && rmdir(path) < 0) {
		RD_LOG(ERR, "socket %s: a directory that cannot be removed (%s) is in the way",
		       path, strerror(errno));
		return -EISDIR;
	}
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	/* Any local process may attach; tenants and tokens decide what it gets.
	 * The mode comes from the umask at bind (no chmod by path after it,
	 * which would follow whatever was put there meanwhile). */
	mode_t old = umask(0111);
	int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));

	umask(old);
	if (r < 0 || listen(fd, 128) < 0) {
		int e = -errno;

		close(fd);
		return e == -EADDRINUSE ? -EEXIST : e;  /* EADDRINUSE: the lock's */
	}
	if (lstat(path, &st) == 0) {
		ctl->sock_dev = st.st_dev;
		ctl->sock_ino = st.st_ino;
	}
	return fd;
}

/*
 * The node's admin token: the file's first line, or a new random one that
 * roshmd writes there (0600, in a directory of its own that pods do not
 * mount); roshmctl in roshmd's container reads the same file.
 */
static int admin_token_load(struct rd_control *ctl)
{
	const char *path = ctl->cfg->admin_token_file;
	char dir[RD_PATH_MAX], buf[ROSHM_ADMIN_TOKEN_MAX];
	uint8_t raw[32];
	ssize_t n;
	int fd;

	ctl->admin_token[0] = 0;
	if (!path[0])
		return 0;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		snprintf(dir, sizeof(dir), "%s", path);
		char *slash = strrchr(dir, '/');

		if (slash && slash != dir) {
			*slash = 0;
			mkdir(dir, 0700);
		}
		rd_random_bytes(raw, sizeof(raw));
		for (size_t i = 0; i < sizeof(raw); i++)
			snprintf(buf + 2 * i, 3, "%02x", raw[i]);
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0 || write(fd, buf, 64) != 64 || write(fd, "\n", 1) != 1) {
			/* e.g. not root, or a read-only root: run without one */
			RD_LOG(WARNING, "admin token %s: cannot create it (%s): no admin token; only "
			       "roshmd's own uid (if not root) and admin.uids may administer it",
			       path, strerror(errno ? errno : EIO));
			if (fd >= 0) {
				close(fd);
				unlink(path);
			}
			return 0;
		}
		close(fd);
		snprintf(ctl->admin_token, sizeof(ctl->admin_token), "%.64s", buf);
		RD_LOG(INFO, "admin token created in %s (roshmctl reads it there)", path);
		return 0;
	}
	if (fd < 0) {
		RD_LOG(ERR, "admin token %s: %s", path, strerror(errno));
		return -errno;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	buf[strcspn(buf, "\r\n")] = 0;
	if (strlen(buf) < 16) {
		RD_LOG(ERR, "admin token %s: shorter than 16 characters", path);
		return -EINVAL;
	}
	snprintf(ctl->admin_token, sizeof(ctl->admin_token), "%s", buf);
	return 0;
}

static int publish_node(struct rd_control *ctl)
{
	struct rd_node_rec n = { .pid = (uint32_t)getpid() };

	snprintf(n.node, sizeof(n.node), "%s", ctl->cfg->node);
	snprintf(n.endpoint, sizeof(n.endpoint), "%s", ctl->endpoint);
	return ctl->reg.ops->put_node(&ctl->reg, &n, NULL, NULL);
}

/*
 * The registry found our node name held by a roshmd of another host
 * (etcd): said once, and nothing of ours is written or deleted from then
 * on (the registry refuses it, and the node record is not ours to delete).
 */
static bool node_name_taken(struct rd_control *ctl)
{
	struct rd_node_rec other;

	if (!ctl->reg.ops->name_state ||
	    ctl->reg.ops->name_state(&ctl->reg, &other) != RD_NAME_TAKEN)
		return false;
	if (ctl->node_published)
		RD_LOG(ERR, "node name %s: a roshmd of another host holds it (its record: host %s, "
		       "pid %u, endpoint \"%s\", under a lease kept alive): give each roshmd a node "
		       "name of its own", ctl->cfg->node, other.host, other.pid, other.endpoint);
	ctl->node_published = false;
	return true;
}

static void forget_own_records(const struct rd_region_rec *rec, void *arg)
{
	struct rd_control *ctl = arg;

	if (!strcmp(rec->node, ctl->cfg->node)) {
		RD_LOGC(RD_LC_REGISTRY, INFO, "registry: removing %s/%s left by an earlier roshmd on "
			"this node", rec->tenant, rec->name);
		ctl->reg.ops->del_region(&ctl->reg, rec->tenant, rec->name, NULL, NULL);
	}
}

/*
 * systemd's readiness protocol (sd_notify(3)) without libsystemd: one
 * datagram to $NOTIFY_SOCKET ("@..." is the abstract namespace). Nothing
 * when roshmd does not run under systemd (Type=notify).
 */
void rd_notify(const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t len;
	int fd;

	if (!path || !*path || (path[0] != '/' && path[0] != '@'))
		return;
	len = strlen(path);
	if (len >= sizeof(sa.sun_path))
		return;
	memcpy(sa.sun_path, path, len);
	if (path[0] == '@')
		sa.sun_path[0] = 0;
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	(void)sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa,
		     (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len));
	close(fd);
}

/*
 * SIGHUP: read the configuration file again and apply what can change under
 * a running roshmd: tenant tokens (a client that attached keeps its
 * session), log.level (for the roshm.* log types that no EAL --log-level
 * names), and the quotas only this thread enforces (clients,
 * regions, bytes). Everything else (sockets, transports, limits, the tenant
 * list itself, the quotas the poller reads) needs a restart, and the log
 * says so. A file that does not load changes nothing.
 */
void rd_control_reload(struct rd_control *ctl)
{
	rd_notify("RELOADING=1");
	rd_control_reload_file(ctl);
	rd_notify("READY=1");
}

void rd_control_reload_file(struct rd_control *ctl)
{
	struct rd_config *cur = (struct rd_config *)(uintptr_t)ctl->cfg; /* main's, not const */
	struct rd_config *n = calloc(1, sizeof(*n));
	char err[512], done[256] = "";
	size_t o = 0;
	int tokens = 0, quotas = 0;

	if (!ctl->cfg_path || !n) {
		RD_LOG(WARNING, "SIGHUP: nothing to reload from");
		free(n);
		return;
	}
	if (rd_config_load(n, ctl->cfg_path, err, sizeof(err))) {
		RD_LOG(ERR, "SIGHUP: %s: the running configuration is kept", err);
		free(n);
		return;
	}
	/* applied after the line that says so: it may silence that line */
	bool level = strcmp(n->log_level, cur->log_level);

	if (level)
		o += (size_t)snprintf(done + o, sizeof(done) - o, " log.level=%s", n->log_level);
	bool same = n->ntenants == cur->ntenants;

	for (int i = 0; same && i < n->ntenants; i++)
		same = !strcmp(n->tenants[i].name, cur->tenants[i].name);
	if (!same) {
		RD_LOG(WARNING, "SIGHUP: the list of tenants changed: that needs a restart (tokens and "
		       "quotas not reloaded)");
	} else {
		for (int i = 0; i < n->ntenants; i++) {
			struct rd_tenant_cfg *t = &cur->tenants[i];
			const struct rd_tenant_cfg *u = &n->tenants[i];

			if (strcmp(t->token, u->token)) {
				memcpy(t->token, u->token, sizeof(t->token));
				tokens++;
			}
			if (t->quota.clients != u->quota.clients || t->quota.regions != u->quota.regions ||
			    t->quota.bytes != u->quota.bytes ||
			    t->quota.grant_mrs != u->quota.grant_mrs ||
			    t->quota.registry_ops_per_sec != u->quota.registry_ops_per_sec) {
				t->quota.clients = u->quota.clients;
				t->quota.regions = u->quota.regions;
				t->quota.bytes = u->quota.bytes;
				t->quota.grant_mrs = u->quota.grant_mrs; /* for grants from now on */
				t->quota.registry_ops_per_sec = u->quota.registry_ops_per_sec;
				quotas++;
			}
			if (t->quota.weight != u->quota.weight ||
			    t->quota.ops_per_sec != u->quota.ops_per_sec ||
			    t->quota.bytes_per_sec != u->quota.bytes_per_sec) {
				struct rd_cmd cmd = { .type = RD_CMD_SHARE_SET, .handle = (uint32_t)i,
						      .share = &u->quota };

				/* the poller's own copy, set while we wait */
				rd_poller_cmd(ctl->poller, &cmd);
				t->quota.weight = u->quota.weight;
				t->quota.ops_per_sec = u->quota.ops_per_sec;
				t->quota.bytes_per_sec = u->quota.bytes_per_sec;
				quotas++;
			}
		}
		if (tokens && o < sizeof(done))
			o += (size_t)snprintf(done + o, sizeof(done) - o, " tokens of %d tenant(s)", tokens);
		if (quotas && o < sizeof(done))
			o += (size_t)snprintf(done + o, sizeof(done) - o, " quotas of %d tenant(s)", quotas);
	}
	RD_LOG(NOTICE, "SIGHUP: reloaded %s:%s (the rest of the file takes effect at a restart)",
	       ctl->cfg_path, o ? done : " nothing changed");
	if (level) {
		snprintf(cur->log_level, sizeof(cur->log_level), "%s", n->log_level);
		rd_log_set_default(cur->log_level);
	}
	OPENSSL_cleanse(n->tenants, sizeof(n->tenants));
	rd_config_free(n);
	free(n);
}

int rd_control_init(struct rd_control *ctl, const struct rd_config *cfg, struct rd_poller *p)
{
	struct epoll_event ev = { .events = EPOLLIN };
	sigset_t set;
	int ret;

	memset(ctl, 0, sizeof(*ctl));
	rd_guard_init(&ctl->guard);
	ctl->cfg = cfg;
	ctl->poller = p;
	ctl->listen_fd = ctl->epfd = ctl->sig_fd = ctl->lock_fd = ctl->node_lock_fd = -1;
	ctl->metrics_fd = -1;
	ctl->start_ns = rd_mono_ns();
	rd_random_bytes(&ctl->instance, sizeof(ctl->instance));
	ctl->slots = calloc(cfg->max_regions + 1, sizeof(*ctl->slots));
	ctl->client_slots = calloc(cfg->max_clients, sizeof(*ctl->client_slots));
	if (!ctl->slots || !ctl->client_slots)
		return -ENOMEM;
	ctl->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (ctl->epfd < 0)
		return -errno;
	/* Whether another roshmd serves this socket, before anything is done
	 * in its name: a second one started by mistake (twice by hand, a
	 * rollout's new pod before the old one is gone) would otherwise remove
	 * the first one's region records as its own leftovers, put its node
	 * record over the first one's and delete it as it exits. */
	ret = take_lock(ctl, cfg->socket);
	if (ret) {
		RD_LOG(ERR, "socket %s: %s", cfg->socket,
		       ret == -EADDRINUSE ? "another roshmd holds its lock file" : strerror(-ret));
		return ret;
	}
	ret = admin_token_load(ctl);   /* (a new token is written by the lock's holder) */
	if (ret)
		return ret;
	ret = rd_registry_open(&ctl->reg, cfg);
	ctl->reg.changed = rd_peers_record_changed;   /* after: open clears it */
	ctl->reg.wants_tenant = rd_peers_wants_tenant;
	ctl->reg.changed_arg = ctl;
	if (ret)
		return ret;
	ret = take_node_lock(ctl);
	if (ret) {
		struct rd_node_rec other;

		if (ret == -EADDRINUSE && ctl->reg.ops->get_node(&ctl->reg, cfg->node, &other) == 0)
			RD_LOG(ERR, "node name %s: another roshmd of this host uses it (its record: pid "
			       "%u, endpoint \"%s\"): give each roshmd a node name of its own", cfg->node,
			       other.pid, other.endpoint);
		else
			RD_LOG(ERR, "node name %s: %s", cfg->node, ret == -EADDRINUSE ?
			       "another roshmd of this host uses it: give each roshmd a node name of "
			       "its own" : strerror(-ret));
		return ret;
	}
	ctl->reg.ops->list_regions(&ctl->reg, forget_own_records, ctl);
	ret = rd_peers_init(ctl);
	if (ret)
		return ret;
	ret = rd_metrics_init(ctl);
	if (ret)
		return ret;
	ret = rd_telemetry_init(ctl);
	if (ret)
		RD_LOG(WARNING, "telemetry commands /roshm/* not registered: %s", strerror(-ret));
	ret = publish_node(ctl);
	ctl->node_published = !ret;
	if (ret) {
		RD_LOGC(RD_LC_REGISTRY, ERR, "registry: publishing node %s: %s", cfg->node,
			strerror(-ret));
		return ret;
	}
	/* etcd: whose our node name is, known from the first read of the
	 * registry before anything of ours is written (a few ms with etcd
	 * up; up to 3 s waited for here), or, when a record of another boot
	 * holds it, once its lease has run out or been kept alive (up to a
	 * minute waited for here): so that we refuse before serving; later,
	 * rd_control_step stops us */
	for (int i = 0, st; ctl->reg.ops->name_state &&
			    ((st = ctl->reg.ops->name_state(&ctl->reg, NULL)) == RD_NAME_UNREAD ||
			     st == RD_NAME_WAIT) && i < (st == RD_NAME_WAIT ? 6000 : 300); i++)
		usleep(10000);
	if (node_name_taken(ctl))
		return -EADDRINUSE;
	for (int i = 0; i < cfg->ntenants; i++)
		if (!cfg->tenants[i].token[0])
			RD_LOG(WARNING, "tenant '%s' has no token: any local process may attach as it",
			       cfg->tenants[i].name);
	if (cfg->max_pending_conns <= (uint32_t)cfg->ntenants)
		RD_LOG(WARNING, "admin.max_pending (%u) is not above the number of tenants (%d): "
		       "tenants that each hold one connection past HELLO can make the others wait "
		       "(docs/security.md)", cfg->max_pending_conns, cfg->ntenants);
	ret = listen_socket(ctl, cfg->socket);
	if (ret < 0) {
		RD_LOG(ERR, "socket %s: %s", cfg->socket,
		       ret == -EEXIST ? "the path is taken and roshmd could not remove what is there" :
		       strerror(-ret));
		return ret;
	}
	ctl->listen_fd = ret;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	ctl->sig_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (ctl->sig_fd < 0)
		return -errno;
	ev.data.ptr = &tag_listen;
	epoll_ctl(ctl->epfd, EPOLL_CTL_ADD, ctl->listen_fd, &ev);
	ev.data.ptr = &tag_sig;
	epoll_ctl(ctl->epfd, EPOLL_CTL_ADD, ctl->sig_fd, &ev);
	ev.data.ptr = &tag_ev;
	epoll_ctl(ctl->epfd, EPOLL_CTL_ADD, p->ev_efd, &ev);
	ev.data.ptr = &tag_reg;
	epoll_ctl(ctl->epfd, EPOLL_CTL_ADD, ctl->reg.ops->event_fd(&ctl->reg), &ev);
	if (ctl->guard.uffd >= 0) {
		ev.data.ptr = &tag_guard;
		epoll_ctl(ctl->epfd, EPOLL_CTL_ADD, ctl->guard.efd, &ev);
	} else {
		RD_LOG(WARNING, "no hole guard (%s): a region owner that punches holes in its memory "
		       "can make roshmd allocate pages charged to roshmd (docs/security.md)",
		       ctl->guard.reason);
	}
	RD_LOG(INFO, "node %s listening on %s, registry %s:%s", cfg->node, cfg->socket,
	       ctl->reg.ops->name,
	       strcmp(ctl->reg.ops->name, "etcd") ? cfg->registry_dir : cfg->etcd_endpoints);
	return 0;
}

int rd_control_run(struct rd_control *ctl)
{
	while (!ctl->stop) {
		int ms = 100;

		/* a newcomer that waits for a connection's grace (evictable) */
		if (ctl->accept_paused && ctl->accept_resume_ns) {
			uint64_t now = rd_mono_ns();

			ms = now >= ctl->accept_resume_ns ? 0 :
			     (int)((ctl->accept_resume_ns - now + 999999) / 1000000);
			if (ms > 100)
				ms = 100;
		}
		rd_control_step(ctl, ms);
	}
	return 0;
}

void rd_control_listen_arm(struct rd_control *ctl, bool on)
{
	struct epoll_event ev = { .events = on ? EPOLLIN : 0, .data.ptr = &tag_listen };

	epoll_ctl(ctl->epfd, EPOLL_CTL_MOD, ctl->listen_fd, &ev);
}

void rd_control_step(struct rd_control *ctl, int timeout_ms)
{
	struct epoll_event evs[64];

	{
		int n = epoll_wait(ctl->epfd, evs, 64, timeout_ms);

		for (int i = 0; i < n; i++) {
			void *tag = evs[i].data.ptr;
			enum rd_ep_kind kind = ((struct rd_ep_tag *)tag)->kind;

			if (kind == RD_EP_PROVIDER) {
				rd_peers_epoll_event(ctl, tag, evs[i].events);
			} else if (kind == RD_EP_METRICS) {
				rd_metrics_accept(ctl);
			} else if (kind == RD_EP_METRICS_CONN) {
				if (rd_metrics_conn_live(ctl, tag))
					rd_metrics_readable(ctl, tag);
			} else if (tag == &tag_listen) {
				rd_conn_accept(ctl);
			} else if (tag == &tag_sig) {
				struct signalfd_siginfo si;

				if (read(ctl->sig_fd, &si, sizeof(si)) == sizeof(si) &&
				    si.ssi_signo == SIGHUP) {
					rd_control_reload(ctl);
				} else if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
					if (ctl->stopping) {
						RD_LOG(INFO, "signal %u again: stopping now", si.ssi_signo);
						ctl->stop = 1;
					} else {
						/* preStop / SIGTERM: drain every region, then exit */
						RD_LOG(INFO, "signal %u: draining, then stopping", si.ssi_signo);
						ctl->stopping = 1;
						rd_notify("STOPPING=1\nSTATUS=draining");
						struct rd_drain_match all = { 0 };

						rd_drain_start(ctl, &all, -1);
					}
				}
			} else if (tag == &tag_ev) {
				poller_events(ctl);
			} else if (tag == &tag_reg) {
				/* dispatched below */
			} else if (tag == &tag_guard) {
				guard_events(ctl);
			} else {
				rd_conn_event(ctl, tag, evs[i].events);
			}
		}
		rd_conns_reap(ctl);
		rd_conns_timer(ctl, rd_mono_ns());
		unsigned rs = ctl->reg.ops->dispatch(&ctl->reg);

		if (node_name_taken(ctl) && !ctl->stop) {
			ctl->stop = 1;
			ctl->failed = true;
		}

		if (rs & RD_REG_REPUBLISHED)
			RD_LOGC(RD_LC_REGISTRY, NOTICE, "registry: node %s and its regions published "
				"again", ctl->cfg->node);
		rd_peers_timer(ctl, rs & RD_REG_CHANGED);
		rd_grants_timer(ctl, rd_mono_ns());
		rd_reg_rate_timer(ctl, rd_mono_ns());
		rd_drain_tick(ctl);
		rd_metrics_timer(ctl);
		rd_telemetry_refresh(ctl);
		if (ctl->stopping && rd_drain_idle(ctl))
			ctl->stop = 1;
	}
}

void rd_control_fini(struct rd_control *ctl)
{
	/* The poller has stopped: close its connections before the peers
	 * (which own the outbound ones) are freed. */
	if (ctl->poller && ctl->poller->net && ctl->poller->net->dp->close_all)
		ctl->poller->net->dp->close_all(ctl->poller->net);
	while (ctl->conns)
		rd_conn_close(ctl, ctl->conns, "roshmd stopping");
	rd_conns_reap(ctl);
	/* The poller has stopped: what it still held is ours to free. */
	poller_events(ctl);
	while (ctl->zombie_regions)
		rd_control_region_free(ctl, ctl->zombie_regions);
	while (ctl->zombie_clients)
		rd_control_client_free(ctl, ctl->zombie_clients);
	if (ctl->listen_fd >= 0) {
		struct stat st;

		close(ctl->listen_fd);
		/* only our own: a successor may have bound the path already */
		if (lstat(ctl->cfg->socket, &st) == 0 && st.st_dev == ctl->sock_dev &&
		    st.st_ino == ctl->sock_ino)
			unlink(ctl->cfg->socket);
	}
	if (ctl->sig_fd >= 0)
		close(ctl->sig_fd);
	if (ctl->epfd >= 0)
		close(ctl->epfd);
	rd_grants_defer_release(ctl, NULL, UINT64_MAX); /* MRs before their PD */
	rd_peers_fini(ctl);
	rd_metrics_fini(ctl);
	if (ctl->reg.ops) {
		/* only the record we put (not one of whoever holds the lock) */
		if (ctl->node_published)
			ctl->reg.ops->del_node(&ctl->reg, ctl->cfg->node, NULL, NULL);
		ctl->reg.ops->close(&ctl->reg);
	}
	/* last: a successor starts once our records are gone, not before
	 * (it would publish its node record, and we delete it) */
	if (ctl->node_lock_fd >= 0)
		close(ctl->node_lock_fd);
	if (ctl->lock_fd >= 0)
		close(ctl->lock_fd);
	free(ctl->slots);
	free(ctl->client_slots);
	free(ctl->src_tab);
	rd_guard_fini(&ctl->guard); /* every mapping it watched is gone */
}
