// SPDX-License-Identifier: MIT
/*
 * `file` registry backend: one JSON record per region under
 * <dir>/regions/<tenant>/<name>.json and per node under
 * <dir>/nodes/<node>.json, written to a temporary file and renamed into
 * place, so a reader sees the old record or the new one, never a torn one.
 * Several roshmd on one host may share the directory.
 *
 * roshmd runs as root, so the directory must be one that nobody else can
 * write: the root is created 0700 and refused when it is a symlink, not
 * ours, or writable by group or others, and every file operation is an
 * *at() call relative to a directory opened O_NOFOLLOW | O_DIRECTORY (a
 * symlink planted in place of a tenant directory or a record is never
 * followed). Records are read only from regular files of at most 64 KiB,
 * and their MAC decides whether they are believed.
 *
 * Writes happen at once; their completions are queued and run from
 * dispatch() (an eventfd), like the etcd backend's. Every read and write of
 * the directory is a request in the registry's metrics (struct
 * rd_reg_stats: put, get, delete; no lease).
 *
 * Changes from other roshmd of the host: file_watch.c (inotify).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "roshmd.h"
#include "registry/file_int.h"

#define RD_LOG_COMPONENT RD_LC_REGISTRY

/* A directory roshmd may trust: ours, and nobody else may write it. */
static int check_dir(int fd, char *why, size_t len)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode)) {
		snprintf(why, len, "not a directory");
		return -ENOTDIR;
	}
	if (st.st_uid != geteuid()) {
		snprintf(why, len, "owned by uid %u, not by roshmd's (%u)", (unsigned)st.st_uid,
			 (unsigned)geteuid());
		return -EPERM;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		snprintf(why, len, "writable by group or others (mode %04o)", (unsigned)(st.st_mode & 07777));
		return -EPERM;
	}
	return 0;
}

/* @name under @dfd as a trusted directory fd (created 0700 with @create). */
static int open_dir(int dfd, const char *name, bool create, char *why, size_t len)
{
	int fd, ret;

	snprintf(why, len, "cannot open");
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT && create) {
		if (mkdirat(dfd, name, 0700) < 0 && errno != EEXIST)
			return -errno;
		fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd < 0) {
		ret = -errno;
		if (ret == -ELOOP || ret == -ENOTDIR)
			snprintf(why, len, "a symlink or not a directory");
		return ret;
	}
	ret = check_dir(fd, why, len);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

/*
 * The text of record @fname in @dfd into @buf (NUL-terminated): its length,
 * -ENOENT, or -EBADMSG (not a regular file, too large: @why says).
 */
static int read_file(int dfd, const char *fname, char *buf, size_t cap, const char **why)
{
	struct stat st;
	size_t n = 0;
	int fd;

	/* O_NONBLOCK: a FIFO planted as a record must not hang the open */
	fd = openat(dfd, fname, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return -ENOENT;
		*why = errno == ELOOP ? "a symlink" : "cannot be opened";
		return -EBADMSG;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		*why = "not a regular file";
		return -EBADMSG;
	}
	if (st.st_size > RD_REC_MAX) {
		close(fd);
		*why = "larger than 64 KiB";
		return -EBADMSG;
	}
	while (n < cap - 1) {
		ssize_t r = read(fd, buf + n, cap - 1 - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	if (n > RD_REC_MAX) {
		*why = "larger than 64 KiB"; /* it grew after fstat */
		return -EBADMSG;
	}
	buf[n] = 0;
	return (int)n;
}

/* @text in a new file of @dfd under a random name (returned in @tmp), on
 * disk: what a rename then publishes at once. 0 or -errno. */
static int write_tmp(int dfd, const char *fname, const char *text, char *tmp, size_t tmpsz)
{
	size_t len = strlen(text), off = 0;
	uint64_t rnd;
	int fd, ret = 0;

	tmp[0] = 0;
	/* random name, O_EXCL: nothing planted under a guessable name is reused */
	if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
		return -EAGAIN;
	snprintf(tmp, tmpsz, ".%s.%016llx.tmp", fname, (unsigned long long)rnd);
	fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		ret = -errno;
		tmp[0] = 0;
		return ret;
	}
	while (off < len) {
		ssize_t w = write(fd, text + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			ret = w < 0 ? -errno : -EIO;
			break;
		}
		off += (size_t)w;
	}
	if (!ret && fsync(fd) < 0)
		ret = -errno;
	close(fd);
	if (ret) {
		unlinkat(dfd, tmp, 0);
		tmp[0] = 0;
	}
	return ret;
}

/* @tmp (write_tmp) renamed to @fname: renameat replaces whatever @fname
 * is, a planted symlink included, without following it. */
static int rename_tmp(int dfd, const char *tmp, const char *fname)
{
	int ret = renameat(dfd, tmp, dfd, fname) < 0 ? -errno : 0;

	if (ret)
		unlinkat(dfd, tmp, 0);
	return ret;
}

#define TMP_NAME_MAX (ROSHM_NAME_MAX + 48)

/* @text written to a new temporary file in @dfd, renamed to @fname. */
static int write_atomic(int dfd, const char *fname, const char *text)
{
	char tmp[TMP_NAME_MAX];
	int ret = write_tmp(dfd, fname, text, tmp, sizeof(tmp));

	return ret ? ret : rename_tmp(dfd, tmp, fname);
}

static void complete(struct rd_registry *r, rd_reg_done_fn done, rd_reg_get_fn got, void *arg,
		     int status, const struct rd_region_rec *rec)
{
	struct file_reg *f = r->priv;
	struct fcomp *c;
	uint64_t one = 1;

	if (!done && !got)
		return;
	c = calloc(1, sizeof(*c));
	if (!c) {
		RD_LOG(ERR, "registry: out of memory: a completion (status %d) is dropped", status);
		return;
	}
	c->done = done;
	c->got = got;
	c->arg = arg;
	c->status = status;
	if (rec)
		c->rec = *rec;
	*f->tail = c;
	f->tail = &c->next;
	if (write(f->efd, &one, sizeof(one)) < 0) {
		/* the counter is already non-zero: dispatch() is due anyway */
	}
}

static void log_write(const char *what, const char *key, int ret)
{
	if (ret && ret != -ENOENT)
		RD_LOG(WARNING, "registry: %s %s: %s", what, key, strerror(-ret));
	else if (!ret)
		RD_LOG(DEBUG, "registry: %s %s: done", what, key);
}

/* Record @fname in @dfd, verified; @key names it in logs. */
static int get_region_at(struct rd_registry *r, int tdir, const char *tenant, const char *name,
			 struct rd_region_rec *rec)
{
	char buf[RD_REC_MAX + 2], fname[ROSHM_NAME_MAX + 8], key[2 * ROSHM_NAME_MAX + 16];
	const char *why = NULL;
	int n;

	snprintf(fname, sizeof(fname), "%s.json", name);
	snprintf(key, sizeof(key), "regions/%s/%s", tenant, name);
	n = read_file(tdir, fname, buf, sizeof(buf), &why);
	if (n == -EBADMSG)
		rd_registry_log_bad(r, key, why);
	if (n < 0)
		return n;
	n = rd_region_rec_verify(buf, (size_t)n, r->key, r->keylen, rec, &why);
	if (!n && (strcmp(rec->tenant, tenant) || strcmp(rec->name, name))) {
		/* a valid record copied under another name */
		why = "filed under another name";
		n = -EBADMSG;
	}
	if (n) {
		memset(rec, 0, sizeof(*rec));
		rd_registry_log_bad(r, key, why);
		return -EBADMSG;
	}
	return 0;
}

/* The tenant directory, for reading: -ENOENT when absent, -EBADMSG when not trusted. */
static int tenant_dir(struct rd_registry *r, const char *tenant)
{
	struct file_reg *f = r->priv;
	char why[96], key[ROSHM_NAME_MAX + 16];
	int fd = open_dir(f->regions_fd, tenant, false, why, sizeof(why));

	if (fd == -ENOENT || fd >= 0)
		return fd;
	snprintf(key, sizeof(key), "regions/%s/", tenant);
	rd_registry_log_bad(r, key, why);
	return -EBADMSG;
}

static int get_region(struct rd_registry *r, const char *tenant, const char *name,
		      struct rd_region_rec *rec)
{
	int tdir, ret;

	/* Names are [A-Za-z0-9._-], not starting with '.': no path tricks. */
	if (!rd_valid_name(tenant) || !rd_valid_name(name))
		return -EINVAL;
	tdir = tenant_dir(r, tenant);
	if (tdir < 0)
		return tdir;
	ret = get_region_at(r, tdir, tenant, name, rec);
	close(tdir);
	return ret;
}

static int file_get_region(struct rd_registry *r, const char *tenant, const char *name,
			   struct rd_region_rec *rec)
{
	uint64_t t0 = rd_registry_now_ns();
	int ret;

	if (!rd_valid_name(tenant) || !rd_valid_name(name))
		return -EINVAL; /* asks nothing of the directory */
	ret = get_region(r, tenant, name, rec);

	rd_registry_observe(r, RD_REGOP_GET, t0, ret);
	return ret;
}

static int file_fetch_region(struct rd_registry *r, const char *tenant, const char *name,
			     rd_reg_get_fn fn, void *arg)
{
	struct rd_region_rec rec;
	int ret;

	if (!rd_valid_name(tenant) || !rd_valid_name(name) || !fn)
		return -EINVAL;
	ret = file_get_region(r, tenant, name, &rec);
	complete(r, NULL, fn, arg, ret, ret ? NULL : &rec);
	return 0;
}

/* Every valid record, or (@tenant, @prefix not NULL) only that tenant's
 * whose names begin with @prefix: the others' files are not read; @max
 * records at most. */
static int list_regions(struct rd_registry *r, const char *tenant, const char *prefix,
			unsigned max, void (*fn)(const struct rd_region_rec *rec, void *arg), void *arg)
{
	struct file_reg *f = r->priv;
	struct rd_region_rec rec;
	struct dirent *t, *e;
	int count = 0, fd;
	DIR *top, *sub;

	fd = dup(f->regions_fd);
	if (fd < 0)
		return -errno;
	top = fdopendir(fd);
	if (!top) {
		close(fd);
		return -errno;
	}
	rewinddir(top); /* a dup shares the offset: start over */
	while ((unsigned)count < max && (t = readdir(top))) {
		if (!rd_valid_name(t->d_name) || (tenant && strcmp(t->d_name, tenant)))
			continue;
		fd = tenant_dir(r, t->d_name);
		if (fd < 0)
			continue;
		sub = fdopendir(fd);
		if (!sub) {
			close(fd);
			continue;
		}
		while ((unsigned)count < max && (e = readdir(sub))) {
			size_t l = strlen(e->d_name);
			char name[ROSHM_NAME_MAX];

			if (l < 6 || l - 5 >= sizeof(name) || strcmp(e->d_name + l - 5, ".json") ||
			    (prefix && strncmp(e->d_name, prefix, strlen(prefix))))
				continue;
			memcpy(name, e->d_name, l - 5);
			name[l - 5] = 0;
			if (!rd_valid_name(name))
				continue;
			if (get_region_at(r, dirfd(sub), t->d_name, name, &rec) == 0) {
				fn(&rec, arg);
				count++;
			}
		}
		closedir(sub);
	}
	closedir(top);
	return count;
}

static int file_list_regions(struct rd_registry *r,
			     void (*fn)(const struct rd_region_rec *rec, void *arg), void *arg)
{
	uint64_t t0 = rd_registry_now_ns();
	int ret = list_regions(r, NULL, NULL, UINT_MAX, fn, arg);

	rd_registry_observe(r, RD_REGOP_GET, t0, ret < 0 ? ret : 0);
	return ret;
}

static int file_list_prefix(struct rd_registry *r, const char *tenant, const char *prefix,
			    unsigned max, void (*fn)(const struct rd_region_rec *rec, void *arg),
			    void *arg)
{
	uint64_t t0 = rd_registry_now_ns();
	int ret = list_regions(r, tenant, prefix, max, fn, arg);

	rd_registry_observe(r, RD_REGOP_GET, t0, ret < 0 ? ret : 0);
	return ret;
}

/* Whether a valid record of another node holds @fname in @tdir. */
static bool held_by_other(struct rd_registry *r, int tdir, const struct rd_region_rec *mine)
{
	struct rd_region_rec cur;

	return get_region_at(r, tdir, mine->tenant, mine->name, &cur) == 0 &&
	       strcmp(cur.node, r->node) != 0;
}

static int file_put_region(struct rd_registry *r, const struct rd_region_rec *rec, unsigned flags,
			   rd_reg_done_fn done, void *arg)
{
	struct file_reg *f = r->priv;
	char why[96], fname[ROSHM_NAME_MAX + 8], key[2 * ROSHM_NAME_MAX + 16], *json;
	uint64_t t0 = rd_registry_now_ns();
	int tdir, ret;

	if (!rd_valid_name(rec->tenant) || !rd_valid_name(rec->name) || !rd_valid_name(rec->node))
		return -EINVAL;
	json = rd_region_rec_sign(rec, r->key, r->keylen);
	if (!json)
		return -ENOMEM;
	snprintf(fname, sizeof(fname), "%s.json", rec->name);
	snprintf(key, sizeof(key), "regions/%s/%s", rec->tenant, rec->name);
	tdir = open_dir(f->regions_fd, rec->tenant, true, why, sizeof(why));
	if (tdir < 0) {
		RD_LOG(WARNING, "registry: tenant directory of %s: %s", key, why);
		ret = tdir;
		goto out;
	}
	/* another roshmd of this host may be writing the same name: the
	 * check and the rename are one step under the tenant directory's lock,
	 * which another roshmd holds for that step only (the record is written
	 * and on disk before: an fsync under the lock, 100 ms on a busy disk,
	 * made the other node's writes fail). Never waited for in earnest
	 * (this is the control thread, and whoever can open the directory can
	 * take the lock): tries over 20 ms at most (100 us apart, then 1 ms: a
	 * holder descheduled on a loaded node), then -EAGAIN. A grant's record
	 * that fails so is written again later (rd_grants_timer). */
	char tmp[TMP_NAME_MAX];
	bool locked = false;

	ret = write_tmp(tdir, fname, json, tmp, sizeof(tmp));
	for (int i = 0; !ret && !locked && i < 29; i++) {
		if (flock(tdir, LOCK_EX | LOCK_NB) == 0) {
			locked = true;
			if ((flags & RD_REG_EXCL) && held_by_other(r, tdir, rec)) {
				unlinkat(tdir, tmp, 0);
				ret = -EEXIST;
			} else {
				ret = rename_tmp(tdir, tmp, fname);
			}
			flock(tdir, LOCK_UN);
		} else if (errno != EWOULDBLOCK && errno != EINTR) {
			ret = -errno;
		} else {
			usleep(i < 10 ? 100 : 1000);
		}
	}
	if (!locked && !ret)
		ret = -EAGAIN;
	if (!locked && ret && tmp[0]) /* written, never renamed */
		unlinkat(tdir, tmp, 0);
	close(tdir);
	if (ret == -EAGAIN)
		RD_LOG(WARNING, "registry: %s: the tenant directory stays locked: not published", key);
	log_write("publishing", key, ret == -EEXIST ? 0 : ret);
out:
	free(json);
	rd_registry_observe(r, RD_REGOP_PUT, t0, ret);
	complete(r, done, NULL, arg, ret, NULL);
	return 0;
}

static int file_del_region(struct rd_registry *r, const char *tenant, const char *name,
			   rd_reg_done_fn done, void *arg)
{
	char fname[ROSHM_NAME_MAX + 8], key[2 * ROSHM_NAME_MAX + 16];
	uint64_t t0 = rd_registry_now_ns();
	int tdir, ret;

	if (!rd_valid_name(tenant) || !rd_valid_name(name))
		return -EINVAL;
	snprintf(fname, sizeof(fname), "%s.json", name);
	snprintf(key, sizeof(key), "regions/%s/%s", tenant, name);
	tdir = tenant_dir(r, tenant);
	if (tdir == -EBADMSG)
		ret = -EPERM;
	else if (tdir < 0)
		ret = tdir;
	else {
		struct rd_region_rec cur;

		/* only our own record: another node's (it won the name) stays */
		if (get_region_at(r, tdir, tenant, name, &cur) == 0 && strcmp(cur.node, r->node))
			ret = -EPERM;
		else
			ret = unlinkat(tdir, fname, 0) < 0 ? -errno : 0;
		close(tdir);
	}
	log_write("removing", key, ret);
	rd_registry_observe(r, RD_REGOP_DELETE, t0, ret);
	complete(r, done, NULL, arg, ret, NULL);
	return 0;
}

static int file_put_node(struct rd_registry *r, const struct rd_node_rec *rec, rd_reg_done_fn done,
			 void *arg)
{
	struct file_reg *f = r->priv;
	char fname[ROSHM_NAME_MAX + 8], *json;
	uint64_t t0 = rd_registry_now_ns();
	int ret;

	if (!rd_valid_name(rec->node))
		return -EINVAL;
	json = rd_node_rec_sign(rec, r->key, r->keylen);
	if (!json)
		return -ENOMEM;
	snprintf(fname, sizeof(fname), "%s.json", rec->node);
	ret = write_atomic(f->nodes_fd, fname, json);
	free(json);
	log_write("publishing node", rec->node, ret);
	rd_registry_observe(r, RD_REGOP_PUT, t0, ret);
	complete(r, done, NULL, arg, ret, NULL);
	return 0;
}

static int get_node(struct rd_registry *r, const char *node, struct rd_node_rec *rec)
{
	struct file_reg *f = r->priv;
	char buf[RD_REC_MAX + 2], fname[ROSHM_NAME_MAX + 8], key[ROSHM_NAME_MAX + 16];
	const char *why = NULL;
	int n;

	if (!rd_valid_name(node))
		return -EINVAL;
	snprintf(fname, sizeof(fname), "%s.json", node);
	snprintf(key, sizeof(key), "nodes/%s", node);
	n = read_file(f->nodes_fd, fname, buf, sizeof(buf), &why);
	if (n == -EBADMSG)
		rd_registry_log_bad(r, key, why);
	if (n < 0)
		return n;
	n = rd_node_rec_verify(buf, (size_t)n, r->key, r->keylen, rec, &why);
	if (!n && strcmp(rec->node, node)) {
		why = "filed under another name";
		n = -EBADMSG;
	}
	if (n) {
		memset(rec, 0, sizeof(*rec));
		rd_registry_log_bad(r, key, why);
		return -EBADMSG;
	}
	return 0;
}

static int file_get_node(struct rd_registry *r, const char *node, struct rd_node_rec *rec)
{
	uint64_t t0 = rd_registry_now_ns();
	int ret;

	if (!rd_valid_name(node))
		return -EINVAL; /* asks nothing of the directory */
	ret = get_node(r, node, rec);

	rd_registry_observe(r, RD_REGOP_GET, t0, ret);
	return ret;
}

static int file_del_node(struct rd_registry *r, const char *node, rd_reg_done_fn done, void *arg)
{
	struct file_reg *f = r->priv;
	char fname[ROSHM_NAME_MAX + 8];
	uint64_t t0 = rd_registry_now_ns();
	int ret;

	if (!rd_valid_name(node))
		return -EINVAL;
	snprintf(fname, sizeof(fname), "%s.json", node);
	ret = unlinkat(f->nodes_fd, fname, 0) < 0 ? -errno : 0;
	log_write("removing node", node, ret);
	rd_registry_observe(r, RD_REGOP_DELETE, t0, ret);
	complete(r, done, NULL, arg, ret, NULL);
	return 0;
}

static int file_event_fd(struct rd_registry *r)
{
	struct file_reg *f = r->priv;

	return f->pfd >= 0 ? f->pfd : f->efd;
}

static unsigned file_dispatch(struct rd_registry *r)
{
	struct file_reg *f = r->priv;
	struct fcomp *c;
	unsigned flags;
	uint64_t v;

	if (read(f->efd, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing signalled; the list may still hold work */
	}
	flags = file_watch_changes(r);
	/* Completions queued by these callbacks wait for the next dispatch. */
	c = f->head;
	f->head = NULL;
	f->tail = &f->head;
	while (c) {
		struct fcomp *next = c->next;

		if (c->got)
			c->got(c->arg, c->status, c->status ? NULL : &c->rec);
		else
			c->done(c->arg, c->status);
		free(c);
		c = next;
	}
	return flags;
}

static bool file_ready(struct rd_registry *r)
{
	(void)r;
	return true;
}

static void file_close(struct rd_registry *r)
{
	struct file_reg *f = r->priv;

	if (!f)
		return;
	r->changed = NULL;   /* the control thread is going: completions only */
	while (f->head)
		file_dispatch(r);
	close(f->nodes_fd);
	close(f->regions_fd);
	close(f->root_fd);
	close(f->efd);
	if (f->pfd >= 0)
		close(f->pfd);
	if (f->ifd >= 0)
		close(f->ifd);
	free(f->w);
	free(f);
	r->priv = NULL;
	rd_registry_fini_common(r);
}

static const struct rd_registry_ops file_ops = {
	.name = "file",
	.get_region = file_get_region,
	.get_node = file_get_node,
	.list_regions = file_list_regions,
	.list_prefix = file_list_prefix,
	.fetch_region = file_fetch_region,
	.put_region = file_put_region,
	.del_region = file_del_region,
	.put_node = file_put_node,
	.del_node = file_del_node,
	.event_fd = file_event_fd,
	.dispatch = file_dispatch,
	.ready = file_ready,
	.close = file_close,
};

/* Create the missing components of @path, 0700 (existing ones are left alone). */
static int mkdirs(const char *path)
{
	char tmp[RD_PATH_MAX];

	if (snprintf(tmp, sizeof(tmp), "%s", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(tmp, 0700) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, 0700) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int rd_registry_file_open(struct rd_registry *r, const char *dir, const char *node,
			  const uint8_t *key, size_t keylen)
{
	struct file_reg *f;
	char why[96];
	int ret;

	rd_registry_init_common(r, node, key, keylen);
	if (snprintf(r->dir, sizeof(r->dir), "%s", dir) >= (int)sizeof(r->dir)) {
		ret = -ENAMETOOLONG;
		snprintf(why, sizeof(why), "path too long");
		goto err;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		ret = -ENOMEM;
		snprintf(why, sizeof(why), "out of memory");
		goto err;
	}
	f->root_fd = f->regions_fd = f->nodes_fd = f->efd = f->ifd = f->pfd = -1;
	f->tail = &f->head;
	r->priv = f;
	ret = mkdirs(dir);
	if (ret) {
		snprintf(why, sizeof(why), "cannot create it");
		goto err_free;
	}
	f->root_fd = open_dir(AT_FDCWD, dir, false, why, sizeof(why));
	if (f->root_fd < 0) {
		ret = f->root_fd;
		goto err_free;
	}
	f->regions_fd = open_dir(f->root_fd, "regions", true, why, sizeof(why));
	if (f->regions_fd < 0) {
		ret = f->regions_fd;
		snprintf(why + strlen(why), sizeof(why) - strlen(why), " (regions/)");
		goto err_free;
	}
	f->nodes_fd = open_dir(f->root_fd, "nodes", true, why, sizeof(why));
	if (f->nodes_fd < 0) {
		ret = f->nodes_fd;
		snprintf(why + strlen(why), sizeof(why) - strlen(why), " (nodes/)");
		goto err_free;
	}
	f->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (f->efd < 0) {
		ret = -errno;
		snprintf(why, sizeof(why), "eventfd");
		goto err_free;
	}
	file_watch_start(f);
	r->ops = &file_ops;
	r->stats.ops = 1u << RD_REGOP_PUT | 1u << RD_REGOP_GET | 1u << RD_REGOP_DELETE;
	return 0;
err_free:
	if (f->nodes_fd >= 0)
		close(f->nodes_fd);
	if (f->regions_fd >= 0)
		close(f->regions_fd);
	if (f->root_fd >= 0)
		close(f->root_fd);
	free(f);
	r->priv = NULL;
err:
	RD_LOG(ERR, "registry directory %s: %s: refused (%s)", dir, why, strerror(-ret));
	rd_registry_fini_common(r);
	return ret;
}
