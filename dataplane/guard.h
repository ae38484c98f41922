/* SPDX-License-Identifier: MIT */
/*
 * The hole guard: region memory is the owner's memfd, and its owner can
 * punch holes in it (fallocate(PUNCH_HOLE) or MADV_REMOVE; regions cannot be
 * sealed against that, they must stay mappable writable for the next roshmd).
 * Without a guard roshmd's next touch of a hole allocates a fresh page,
 * charged to roshmd's memory cgroup, and the charge outlives roshmd's mapping
 * for as long as the owner holds the memfd: repeated, a pod could move
 * unbounded memory onto roshmd.
 *
 * With the guard, roshmd's mappings of regions are registered with a
 * userfaultfd (missing-page mode, user-mode faults only): a page the owner
 * punched out is a fault reported to the guard's thread instead of an
 * allocation. The thread marks the region tampered, resolves the fault with
 * one zero page (the poller goes on) and wakes the control thread, which
 * disconnects the owner; when the region is freed its memory is punched
 * out by roshmd (MADV_REMOVE), which frees every page roshmd's touches could
 * have allocated. Kernel-mode accesses to a hole (madvise populate, ibv_reg_mr)
 * fail with EFAULT instead of allocating. Nothing on the fast path: a region
 * with no holes never faults.
 */
#ifndef ROSHMD_GUARD_H
#define ROSHMD_GUARD_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rd_guard_range {
	uintptr_t start, end;
	bool *tampered;               /* set (atomically) by the guard thread */
};

struct rd_guard {
	int uffd;                     /* -1: no guard (see reason) */
	int efd;                      /* control thread: something was tampered with */
	int stop_efd;
	bool thread;
	pthread_t tid;
	pthread_mutex_t mu;           /* ranges: control thread and guard thread */
	struct rd_guard_range *ranges;
	uint32_t n, cap;
	bool zeropage;                /* UFFDIO_ZEROPAGE works on these mappings */
	uint64_t faults;              /* relaxed atomic: holes found */
	char reason[160];             /* why there is no guard */
};

/* Start the guard (its thread). Never fails roshmd: without userfaultfd
 * (old kernel, seccomp) g->uffd is -1 and g->reason says why. */
void rd_guard_init(struct rd_guard *g);
void rd_guard_fini(struct rd_guard *g);
/* Watch [addr, addr + len) (a whole mapping) for holes; *tampered is set
 * when one is touched. 0, or -errno (then the caller must not use it: it
 * cannot be watched). Without a guard: 0 and nothing is watched. */
int rd_guard_add(struct rd_guard *g, void *addr, size_t len, bool *tampered);
/* Before the mapping goes (munmap also unregisters it). */
void rd_guard_remove(struct rd_guard *g, void *addr);
/* A kernel-mode touch of a watched mapping failed with EFAULT (a syscall
 * that read or wrote it met a hole): the same report as a fault the guard
 * thread resolves (*tampered set, the control thread woken, the owner
 * disconnected). Any thread; @g may be NULL (nothing watched). */
void rd_guard_report(struct rd_guard *g, bool *tampered);

#endif
