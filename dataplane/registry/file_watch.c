// SPDX-License-Identifier: MIT
/*
 * The `file` registry backend's view of changes other roshmd of the host
 * make (file.c has the rest).
 *
 * inotify on nodes/, regions/ and the directory of each tenant the
 * control thread calls ours (r->wants_tenant; at most FILE_WATCH_MAX) tells
 * dispatch() of a record written, renamed into place or removed by any
 * roshmd of the host; it tells the control thread (r->changed), which looks
 * at its remote regions of that name soon, and of a node record removed
 * (RD_REG_CHANGED). A registry writer is distrusted here too: one dispatch
 * reads FILE_READS_MAX times at most, tells each name once (FILE_CHANGES_MAX
 * names, past that RD_REG_CHANGED), and RD_REG_CHANGED comes 10 times a
 * second at most. What inotify does not see (a filesystem shared by hosts;
 * changes while events are lost, until the next look) waits for
 * revalidate_ms, as before. The tenant list does not change under a running
 * roshmd (SIGHUP refuses to: rd_control_reload_file).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "roshmd.h"
#include "registry/file_int.h"

#define RD_LOG_COMPONENT RD_LC_REGISTRY

/* The watch of tenant directory @name, or -1. */
static int watch_find(const struct file_reg *f, const char *name)
{
	for (uint32_t i = 0; i < f->nw; i++)
		if (!strcmp(f->w[i].tenant, name))
			return (int)i;
	return -1;
}

static void watch_drop(struct file_reg *f, uint32_t i, bool rm)
{
	if (rm)
		inotify_rm_watch(f->ifd, f->w[i].wd);
	f->w[i] = f->w[--f->nw];
}

/* Watch tenant directory @name of regions/ (a valid name of one of our
 * tenants, a directory we open without following a link), once. */
static void watch_tenant(struct rd_registry *r, const char *name)
{
	struct file_reg *f = r->priv;
	char path[64];
	int fd, wd;

	if (f->ifd < 0 || !rd_valid_name(name) ||
	    (r->wants_tenant && !r->wants_tenant(r->changed_arg, name)))
		return;
	if (f->nw >= FILE_WATCH_MAX) {
		RD_LOG(WARNING, "registry directory: %u tenant directories watched, no more: "
		       "changes under %s are seen every revalidate_ms", FILE_WATCH_MAX, name);
		return;
	}
	fd = openat(f->regions_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	wd = inotify_add_watch(f->ifd, path, IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM |
					     IN_DELETE | IN_ONLYDIR);
	close(fd);
	if (wd < 0)
		return;
	for (uint32_t i = 0; i < f->nw; i++)
		if (f->w[i].wd == wd) {   /* that directory, renamed into place */
			snprintf(f->w[i].tenant, sizeof(f->w[i].tenant), "%s", name);
			return;
		}
	f->w[f->nw].wd = wd;
	snprintf(f->w[f->nw].tenant, sizeof(f->w[f->nw].tenant), "%s", name);
	f->nw++;
}

/* The tenant directories there are now (the first look, and after lost events). */
static void watch_scan(struct rd_registry *r)
{
	struct file_reg *f = r->priv;
	int fd = openat(f->regions_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

	if (!d && fd >= 0)
		close(fd);
	for (struct dirent *e; d && (e = readdir(d));)
		if (e->d_name[0] != '.' && (e->d_type == DT_DIR || e->d_type == DT_UNKNOWN) &&
		    watch_find(f, e->d_name) < 0)
			watch_tenant(r, e->d_name);
	if (d)
		closedir(d);
	f->scanned = true;
}

/* A region record changed: noted once per look (@seen, @nseen). */
static bool note_change(struct rd_registry *r, char (*seen)[2][ROSHM_NAME_MAX], uint32_t *nseen,
			const char *tenant, const char *name)
{
	for (uint32_t i = 0; i < *nseen; i++)
		if (!strcmp(seen[i][0], tenant) && !strcmp(seen[i][1], name))
			return true;
	if (*nseen == FILE_CHANGES_MAX)
		return false;   /* too many: look at everything */
	snprintf(seen[*nseen][0], ROSHM_NAME_MAX, "%s", tenant);
	snprintf(seen[*nseen][1], ROSHM_NAME_MAX, "%s", name);
	(*nseen)++;
	if (r->changed)
		r->changed(r->changed_arg, tenant, name);
	return true;
}

/*
 * What inotify said since the last look, FILE_READS_MAX reads at most (the
 * rest waits for the next dispatch: the fd stays readable): the control
 * thread is told once of each region record of our tenants that changed;
 * RD_REG_CHANGED when a node record went, when events were lost or too many
 * names changed, 10 times a second at most (a registry writer that keeps
 * touching files costs us that much, and never holds the control thread).
 */
unsigned file_watch_changes(struct rd_registry *r)
{
	struct file_reg *f = r->priv;
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	char seen[FILE_CHANGES_MAX][2][ROSHM_NAME_MAX];
	uint32_t nseen = 0;
	uint64_t now;
	ssize_t n;

	if (f->ifd < 0)
		return 0;
	if (!f->scanned)
		watch_scan(r);
	for (int reads = 0; reads < FILE_READS_MAX && (n = read(f->ifd, buf, sizeof(buf))) > 0;
	     reads++) {
		const struct inotify_event *ev;

		for (char *p = buf; p + sizeof(*ev) <= buf + n; p += sizeof(*ev) + ev->len) {
			char rname[ROSHM_NAME_MAX];
			size_t l;
			int i;

			ev = (const struct inotify_event *)p;
			if (p + sizeof(*ev) + ev->len > buf + n)
				break;
			if (ev->mask & IN_Q_OVERFLOW) {
				f->full = true;   /* lost some: look at everything */
				f->scanned = false;
				continue;
			}
			if (ev->mask & IN_IGNORED) {   /* its directory went */
				for (uint32_t j = 0; j < f->nw; j++)
					if (f->w[j].wd == ev->wd) {
						watch_drop(f, j, false);
						break;
					}
				continue;
			}
			if (!ev->len || ev->name[0] == '.')
				continue;          /* a temporary file, or the directory itself */
			if (ev->wd == f->wd_regions) {
				if (!(ev->mask & IN_ISDIR))
					continue;
				i = watch_find(f, ev->name);
				if (ev->mask & (IN_MOVED_FROM | IN_DELETE)) {
					if (i >= 0)   /* not that tenant's any more */
						watch_drop(f, (uint32_t)i, true);
				} else {
					watch_tenant(r, ev->name);
				}
				continue;
			}
			l = strnlen(ev->name, ev->len);
			if (l <= 5 || l - 5 >= sizeof(rname) || strcmp(ev->name + l - 5, ".json"))
				continue;
			if (ev->wd == f->wd_nodes) {
				if (ev->mask & (IN_DELETE | IN_MOVED_FROM))
					f->full = true;   /* a node left */
				continue;
			}
			memcpy(rname, ev->name, l - 5);
			rname[l - 5] = 0;
			for (uint32_t j = 0; j < f->nw; j++)
				if (f->w[j].wd == ev->wd) {
					if (rd_valid_name(rname) &&
					    !note_change(r, seen, &nseen, f->w[j].tenant, rname))
						f->full = true;
					break;
				}
		}
	}
	now = rd_registry_now_ns();
	if (!f->full || now - f->full_ns < 100000000ull)
		return 0;
	f->full = false;
	f->full_ns = now;
	return RD_REG_CHANGED;
}

/* inotify on nodes/ and regions/ (the tenant directories: at the first
 * dispatch, when the control thread says which tenants are ours); none
 * (revalidate_ms only) when the kernel refuses. */
void file_watch_start(struct file_reg *f)
{
	char path[64];
	struct epoll_event ev = { .events = EPOLLIN };

	f->ifd = f->pfd = f->wd_regions = f->wd_nodes = -1;
	f->w = calloc(FILE_WATCH_MAX, sizeof(*f->w));
	f->ifd = f->w ? inotify_init1(IN_NONBLOCK | IN_CLOEXEC) : -1;
	f->pfd = f->ifd >= 0 ? epoll_create1(EPOLL_CLOEXEC) : -1;
	if (f->pfd < 0)
		goto none;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", f->regions_fd);
	f->wd_regions = inotify_add_watch(f->ifd, path, IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM |
							     IN_DELETE | IN_ONLYDIR);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", f->nodes_fd);
	f->wd_nodes = inotify_add_watch(f->ifd, path, IN_DELETE | IN_MOVED_FROM | IN_ONLYDIR);
	ev.data.fd = f->efd;
	if (f->wd_regions < 0 || f->wd_nodes < 0 || epoll_ctl(f->pfd, EPOLL_CTL_ADD, f->efd, &ev))
		goto none;
	ev.data.fd = f->ifd;
	if (epoll_ctl(f->pfd, EPOLL_CTL_ADD, f->ifd, &ev))
		goto none;
	return;
none:
	RD_LOG(NOTICE, "registry directory: no inotify (%s): other roshmd's changes are seen "
	       "every revalidate_ms", strerror(errno));
	if (f->pfd >= 0)
		close(f->pfd);
	if (f->ifd >= 0)
		close(f->ifd);
	f->ifd = f->pfd = -1;
}
