// SPDX-License-Identifier: MIT
/*
 * `file` registry backend: one JSON record per region under
 * <dir>/regions/<tenant>/<name>.json, written to a temporary file and
 * renamed into place, so a reader sees the old record or the new one,
 * never a torn one. Several roshmd on one host may share the directory.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../config.h"
#include "registry.h"

#define REC_MAX 16384

static int mkdirs(const char *path)
{
	char tmp[512];

	if (snprintf(tmp, sizeof(tmp), "%s", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static int rec_path(struct rd_registry *r, const char *tenant, const char *name, char *out,
		    size_t cap)
{
	/* Names are [A-Za-z0-9._-], not starting with '.': no path tricks. */
	if (!rd_valid_name(tenant) || !rd_valid_name(name))
		return -EINVAL;
	if (snprintf(out, cap, "%s/regions/%s/%s.json", r->dir, tenant, name) >= (int)cap)
		return -ENAMETOOLONG;
	return 0;
}

static int file_put_region(struct rd_registry *r, const struct rd_region_rec *rec)
{
	char path[512], tdir[512], tmp[600];
	char *json = rd_region_rec_to_json(rec);
	int fd, ret;
	size_t len;

	if (!json)
		return -ENOMEM;
	ret = rec_path(r, rec->tenant, rec->name, path, sizeof(path));
	if (ret)
		goto out;
	snprintf(tdir, sizeof(tdir), "%s/regions/%s", r->dir, rec->tenant);
	ret = mkdirs(tdir);
	if (ret)
		goto out;
	snprintf(tmp, sizeof(tmp), "%s/.%s.%d.tmp", tdir, rec->name, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		ret = -errno;
		goto out;
	}
	len = strlen(json);
	if (write(fd, json, len) != (ssize_t)len || fsync(fd) < 0) {
		ret = -EIO;
		close(fd);
		unlink(tmp);
		goto out;
	}
	close(fd);
	if (rename(tmp, path) < 0) {
		ret = -errno;
		unlink(tmp);
	}
out:
	free(json);
	return ret;
}

static int read_rec(const char *path, struct rd_region_rec *rec)
{
	char buf[REC_MAX];
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t n;

	if (fd < 0)
		return errno == ENOENT ? -ENOENT : -errno;
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n < 0)
		return -errno;
	if (n == (ssize_t)sizeof(buf))
		return -EBADMSG;
	return rd_region_rec_from_json(buf, (size_t)n, rec);
}

static int file_get_region(struct rd_registry *r, const char *tenant, const char *name,
			   struct rd_region_rec *rec)
{
	char path[512];
	int ret = rec_path(r, tenant, name, path, sizeof(path));

	if (ret)
		return ret;
	ret = read_rec(path, rec);
	if (ret)
		return ret;
	/* The record must describe the name it is filed under. */
	if (strcmp(rec->tenant, tenant) || strcmp(rec->name, name))
		return -EBADMSG;
	return 0;
}

static int file_del_region(struct rd_registry *r, const char *tenant, const char *name)
{
	char path[512];
	int ret = rec_path(r, tenant, name, path, sizeof(path));

	if (ret)
		return ret;
	return unlink(path) < 0 ? -errno : 0;
}

static int file_list_regions(struct rd_registry *r,
			     void (*fn)(const struct rd_region_rec *rec, void *arg), void *arg)
{
	char path[800];
	struct rd_region_rec rec;
	DIR *top, *sub;
	struct dirent *t, *e;
	int count = 0;

	snprintf(path, sizeof(path), "%s/regions", r->dir);
	top = opendir(path);
	if (!top)
		return errno == ENOENT ? 0 : -errno;
	while ((t = readdir(top))) {
		if (t->d_name[0] == '.' || !rd_valid_name(t->d_name))
			continue;
		snprintf(path, sizeof(path), "%s/regions/%s", r->dir, t->d_name);
		sub = opendir(path);
		if (!sub)
			continue;
		while ((e = readdir(sub))) {
			size_t l = strlen(e->d_name);
			char name[ROSHM_NAME_MAX];

			if (e->d_name[0] == '.' || l < 6 || l - 5 >= sizeof(name) ||
			    strcmp(e->d_name + l - 5, ".json"))
				continue;
			memcpy(name, e->d_name, l - 5);
			name[l - 5] = 0;
			if (file_get_region(r, t->d_name, name, &rec) == 0) {
				fn(&rec, arg);
				count++;
			}
		}
		closedir(sub);
	}
	closedir(top);
	return count;
}

static int node_path(struct rd_registry *r, const char *node, char *out, size_t cap)
{
	if (!rd_valid_name(node))
		return -EINVAL;
	if (snprintf(out, cap, "%s/nodes/%s.json", r->dir, node) >= (int)cap)
		return -ENAMETOOLONG;
	return 0;
}

static int write_atomic(const char *dir, const char *path, const char *base, const char *text)
{
	char tmp[600];
	size_t len = strlen(text);
	int fd, ret = mkdirs(dir);

	if (ret)
		return ret;
	snprintf(tmp, sizeof(tmp), "%s/.%s.%d.tmp", dir, base, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	if (write(fd, text, len) != (ssize_t)len || fsync(fd) < 0) {
		close(fd);
		unlink(tmp);
		return -EIO;
	}
	close(fd);
	if (rename(tmp, path) < 0) {
		ret = -errno;
		unlink(tmp);
	}
	return ret;
}

static int file_put_node(struct rd_registry *r, const struct rd_node_rec *rec)
{
	char path[512], dir[512];
	char *json = rd_node_rec_to_json(rec);
	int ret = json ? node_path(r, rec->node, path, sizeof(path)) : -ENOMEM;

	if (!ret) {
		snprintf(dir, sizeof(dir), "%s/nodes", r->dir);
		ret = write_atomic(dir, path, rec->node, json);
	}
	free(json);
	return ret;
}

static int file_get_node(struct rd_registry *r, const char *node, struct rd_node_rec *rec)
{
	char path[512], buf[4096];
	int ret = node_path(r, node, path, sizeof(path)), fd;
	ssize_t n;

	if (ret)
		return ret;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n < 0 || n == (ssize_t)sizeof(buf))
		return -EBADMSG;
	ret = rd_node_rec_from_json(buf, (size_t)n, rec);
	if (!ret && strcmp(rec->node, node))
		ret = -EBADMSG;
	return ret;
}

static int file_del_node(struct rd_registry *r, const char *node)
{
	char path[512];
	int ret = node_path(r, node, path, sizeof(path));

	if (ret)
		return ret;
	return unlink(path) < 0 ? -errno : 0;
}

static void file_close(struct rd_registry *r)
{
	(void)r;
}

static const struct rd_registry_ops file_ops = {
	.name = "file",
	.put_region = file_put_region,
	.get_region = file_get_region,
	.del_region = file_del_region,
	.list_regions = file_list_regions,
	.put_node = file_put_node,
	.get_node = file_get_node,
	.del_node = file_del_node,
	.close = file_close,
};

int rd_registry_file_open(struct rd_registry *r, const char *dir, const char *node)
{
	char path[512];
	int ret;

	memset(r, 0, sizeof(*r));
	if (snprintf(r->dir, sizeof(r->dir), "%s", dir) >= (int)sizeof(r->dir))
		return -ENAMETOOLONG;
	snprintf(r->node, sizeof(r->node), "%s", node);
	snprintf(path, sizeof(path), "%s/regions", dir);
	ret = mkdirs(path);
	if (ret)
		return ret;
	r->ops = &file_ops;
	return 0;
}
