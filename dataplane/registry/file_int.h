/* SPDX-License-Identifier: MIT */
/* The `file` registry backend's state (file.c, file_watch.c). */
#ifndef RD_REGISTRY_FILE_INT_H
#define RD_REGISTRY_FILE_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "registry/registry.h"

struct fcomp {
	struct fcomp *next;
	rd_reg_done_fn done;
	rd_reg_get_fn got;
	void *arg;
	int status;
	struct rd_region_rec rec;     /* fetch_region's answer */
};

#define FILE_WATCH_MAX 1024      /* tenant directories watched */
#define FILE_READS_MAX 16        /* inotify reads per dispatch */
#define FILE_CHANGES_MAX 32      /* names told per dispatch; past it, everything */

struct fwatch {
	int wd;
	char tenant[ROSHM_NAME_MAX];
};

struct file_reg {
	int root_fd, regions_fd, nodes_fd;
	int efd;
	int ifd, pfd;                 /* inotify (-1: none); epoll over efd and ifd */
	int wd_regions, wd_nodes;
	struct fwatch *w;             /* one per tenant directory of ours */
	uint32_t nw;
	bool scanned;                 /* the tenant directories were looked for */
	bool full;                    /* RD_REG_CHANGED owed (at most every 100 ms: full_ns) */
	uint64_t full_ns;
	struct fcomp *head, **tail;
};

/* inotify on nodes/ and regions/ (-1 fds, and revalidate_ms only, when the
 * kernel refuses); the tenant directories come at the first look. */
void file_watch_start(struct file_reg *f);
/* What changed since the last look (dispatch): RD_REG_CHANGED or 0; the
 * region records that changed are told through r->changed. */
unsigned file_watch_changes(struct rd_registry *r);

#endif
