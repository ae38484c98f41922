// SPDX-License-Identifier: MIT
/* The hole guard (guard.h): userfaultfd over roshmd's mappings of regions. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "roshmd.h"
#include "guard.h"

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

static void kick(int efd)
{
	uint64_t one = 1;
	ssize_t n = write(efd, &one, sizeof(one));

	(void)n;
}

/* One missing page: mark its region, fill it with zeros, let the toucher go. */
static void resolve(struct rd_guard *g, uint64_t addr)
{
	long psz = sysconf(_SC_PAGESIZE);
	uintptr_t page = (uintptr_t)addr & ~((uintptr_t)psz - 1);
	bool found = false;

	pthread_mutex_lock(&g->mu);
	for (uint32_t i = 0; i < g->n; i++)
		if (page >= g->ranges[i].start && page < g->ranges[i].end) {
			__atomic_store_n(g->ranges[i].tampered, true, __ATOMIC_RELEASE);
			found = true;
			break;
		}
	pthread_mutex_unlock(&g->mu);
	__atomic_fetch_add(&g->faults, 1, __ATOMIC_RELAXED);
	if (g->zeropage) {
		struct uffdio_zeropage z = { .range = { .start = page, .len = (uint64_t)psz } };

		if (ioctl(g->uffd, UFFDIO_ZEROPAGE, &z) == 0 || errno != EEXIST)
			goto out;
	} else {
		static const uint8_t zeros[1 << 16];
		struct uffdio_copy c = { .dst = page, .src = (uintptr_t)zeros, .len = (uint64_t)psz };

		if ((size_t)psz <= sizeof(zeros) && (ioctl(g->uffd, UFFDIO_COPY, &c) == 0 || errno != EEXIST))
			goto out;
	}
	/* EEXIST: someone filled it meanwhile (the owner touched it): wake only */
	struct uffdio_range w = { .start = page, .len = (uint64_t)psz };

	ioctl(g->uffd, UFFDIO_WAKE, &w);
out:
	if (found)
		kick(g->efd);
}

void rd_guard_report(struct rd_guard *g, bool *tampered)
{
	__atomic_store_n(tampered, true, __ATOMIC_RELEASE);
	if (g && g->efd >= 0)
		kick(g->efd);
}

static void *guard_main(void *arg)
{
	struct rd_guard *g = arg;
	struct uffd_msg msg[16];

	for (;;) {
		struct pollfd pfd[2] = { { .fd = g->uffd, .events = POLLIN },
					 { .fd = g->stop_efd, .events = POLLIN } };

		if (poll(pfd, 2, -1) < 0 && errno != EINTR)
			break;
		if (pfd[1].revents)
			break;
		ssize_t n = read(g->uffd, msg, sizeof(msg));

		if (n < 0)
			continue; /* EAGAIN: another wakeup took it */
		for (ssize_t i = 0; i < n / (ssize_t)sizeof(msg[0]); i++)
			if (msg[i].event == UFFD_EVENT_PAGEFAULT)
				resolve(g, msg[i].arg.pagefault.address);
	}
	return NULL;
}

void rd_guard_init(struct rd_guard *g)
{
	struct uffdio_api api = { .api = UFFD_API, .features = UFFD_FEATURE_MISSING_SHMEM };

	memset(g, 0, sizeof(*g));
	g->uffd = g->efd = g->stop_efd = -1;
	pthread_mutex_init(&g->mu, NULL);
	/* User-mode faults only: any process may have that (no CAP_SYS_PTRACE,
	 * vm.unprivileged_userfaultfd = 0), and a kernel-mode touch of a hole
	 * then fails with EFAULT rather than allocating. */
	g->uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
	if (g->uffd < 0) {
		snprintf(g->reason, sizeof(g->reason), "userfaultfd: %s", strerror(errno));
		return;
	}
	if (ioctl(g->uffd, UFFDIO_API, &api) < 0) {
		snprintf(g->reason, sizeof(g->reason), "userfaultfd API (shmem): %s", strerror(errno));
		goto fail;
	}
	g->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	g->stop_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (g->efd < 0 || g->stop_efd < 0) {
		snprintf(g->reason, sizeof(g->reason), "eventfd: %s", strerror(errno));
		goto fail;
	}
	if (pthread_create(&g->tid, NULL, guard_main, g)) {
		snprintf(g->reason, sizeof(g->reason), "thread: %s", strerror(errno));
		goto fail;
	}
	pthread_setname_np(g->tid, "roshm-guard");
	g->thread = true;
	return;
fail:
	close(g->uffd);
	g->uffd = -1;
}

void rd_guard_fini(struct rd_guard *g)
{
	if (g->thread) {
		kick(g->stop_efd);
		pthread_join(g->tid, NULL);
		g->thread = false;
	}
	if (g->uffd >= 0)
		close(g->uffd);
	if (g->efd >= 0)
		close(g->efd);
	if (g->stop_efd >= 0)
		close(g->stop_efd);
	g->uffd = g->efd = g->stop_efd = -1;
	free(g->ranges);
	g->ranges = NULL;
	g->n = g->cap = 0;
	pthread_mutex_destroy(&g->mu);
}

int rd_guard_add(struct rd_guard *g, void *addr, size_t len, bool *tampered)
{
	struct uffdio_register reg = {
		.range = { .start = (uintptr_t)addr, .len = len },
		.mode = UFFDIO_REGISTER_MODE_MISSING,
	};
	int ret = 0;

	if (g->uffd < 0)
		return 0;
	pthread_mutex_lock(&g->mu);
	if (g->n == g->cap) {
		uint32_t cap = g->cap ? g->cap * 2 : 64;
		struct rd_guard_range *r = realloc(g->ranges, cap * sizeof(*r));

		if (!r) {
			ret = -ENOMEM;
			goto out;
		}
		g->ranges = r;
		g->cap = cap;
	}
	if (ioctl(g->uffd, UFFDIO_REGISTER, &reg) < 0) {
		ret = -errno;
		goto out;
	}
	g->zeropage = (reg.ioctls >> _UFFDIO_ZEROPAGE) & 1;
	g->ranges[g->n++] = (struct rd_guard_range){ .start = (uintptr_t)addr,
						     .end = (uintptr_t)addr + len,
						     .tampered = tampered };
out:
	pthread_mutex_unlock(&g->mu);
	return ret;
}

void rd_guard_remove(struct rd_guard *g, void *addr)
{
	if (g->uffd < 0)
		return;
	pthread_mutex_lock(&g->mu);
	for (uint32_t i = 0; i < g->n; i++)
		if (g->ranges[i].start == (uintptr_t)addr) {
			struct uffdio_range r = { .start = g->ranges[i].start,
						  .len = g->ranges[i].end - g->ranges[i].start };

			ioctl(g->uffd, UFFDIO_UNREGISTER, &r);
			g->ranges[i] = g->ranges[--g->n];
			break;
		}
	pthread_mutex_unlock(&g->mu);
}
