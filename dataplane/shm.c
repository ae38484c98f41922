// SPDX-License-Identifier: MIT
/*
 * Client memory. Channels and regions are memfds that the client creates
 * and touches itself, so their pages are charged to the client's pod, not
 * to roshmd (256 clients with 4 MiB arenas would otherwise be 1 GiB of
 * roshmd's memory). roshmd takes such a memfd only if it can seal it:
 *
 *  - F_SEAL_SHRINK | F_SEAL_GROW before it looks at the size, so that no
 *    client can ftruncate memory roshmd has mapped (no SIGBUS that way);
 *  - every page must already be allocated, so roshmd's touches never
 *    allocate on the client's behalf. st_blocks alone does not say that:
 *    pages allocated past the end (fallocate(KEEP_SIZE) before the seals)
 *    count as much as the ones a hole lacks. So once the size is sealed
 *    (F_SEAL_GROW also refuses fallocate past the end, KEEP_SIZE or not),
 *    roshmd punches out everything past the end itself (allowed under
 *    SHRINK|GROW; only WRITE/FUTURE_WRITE refuse a punch), after which
 *    st_blocks counts the pages before the end only. On shmem, also no
 *    hole before the end by lseek(SEEK_HOLE), which a page cache folio
 *    straddling the end (shmem THP) cannot hide; it reports a page that was
 *    fallocated but never written as a hole too, so such a memfd is
 *    refused (libroshm writes every page). hugetlbfs has no SEEK_HOLE of
 *    its own (it answers the size, whatever is there): st_blocks there,
 *    exact in huge pages once nothing is past the end;
 *  - channels: F_SEAL_FUTURE_WRITE once roshmd has mapped it. Existing
 *    writable mappings (the client's and roshmd's) stay, but from then on
 *    nobody can punch a hole (fallocate(PUNCH_HOLE) fails with EPERM), so a
 *    hugetlb page can never vanish under the poller and come back as a
 *    SIGBUS when the pool is empty;
 *  - regions: never hugetlb, and F_SEAL_SEAL only. A region must stay
 *    mappable writable for the next roshmd after a restart (re-attach), so
 *    FUTURE_WRITE is not an option there, and its owner can punch holes in
 *    it. roshmd's next touch of a hole would allocate a page charged to
 *    roshmd; the hole guard (guard.h) turns that touch into a report: the
 *    owner is disconnected and roshmd punches out the whole region when it
 *    lets go of it, which frees whatever its touches allocated.
 *    docs/security.md.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "roshmd.h"

#define HUGE_2M (2ull << 20)

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/*
 * Every page before the end is there. To be asked only once nothing can be
 * past the end (sealed against growing, drop_past_end done): st_blocks
 * counts pages past the end too.
 */
static bool all_pages_present(int fd)
{
	struct stat st;
	off_t hole;

	if (fstat(fd, &st) < 0 || st.st_size <= 0 ||
	    (uint64_t)st.st_blocks * 512 < (uint64_t)st.st_size)
		return false;
	/* shmem: the first hole is at the end. hugetlbfs answers st_size
	 * (default_llseek), which leaves st_blocks to decide there. */
	hole = lseek(fd, 0, SEEK_HOLE);
	return hole == st.st_size;
}

/*
 * Free whatever the client allocated past the end (fallocate(KEEP_SIZE)
 * before we sealed the size), so that st_blocks counts what lies before it
 * only. Under F_SEAL_GROW nothing can be allocated past the end again.
 */
static int drop_past_end(int fd, off_t size)
{
	/* to the largest offset the kernel takes (s_maxbytes, LLONG_MAX for
	 * shmem and hugetlbfs), whole huge pages */
	off_t len = (off_t)(((uint64_t)INT64_MAX - (uint64_t)size) & ~(HUGE_2M - 1));

	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, size, len) < 0)
		return -errno;
	return 0;
}

int rd_memfd_take(int fd, uint64_t size, unsigned flags, void **map, size_t *map_size, bool *huge)
{
	int seals = fcntl(fd, F_GET_SEALS);
	struct statfs sfs;
	struct stat st;
	uint64_t max;
	void *m;

	*map = NULL;
	if (seals < 0)
		return -EINVAL; /* not a memfd that allows sealing */
	if (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE))
		return -EINVAL; /* we could not write it */
	if (!(seals & F_SEAL_SEAL)) {
		if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0)
			return -EINVAL;
	} else if (!(flags & RD_MEM_SEALED_OK) ||
		   (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW)) {
		return -EINVAL;
	}
	/* From here on its size is fixed. */
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || fstatfs(fd, &sfs) < 0)
		return -EINVAL;
	*huge = sfs.f_type == HUGETLBFS_MAGIC;
	if ((*huge && !(flags & RD_MEM_HUGE_OK)) || (!*huge && (flags & RD_MEM_HUGE_REQ)))
		return -EINVAL;
	max = *huge ? (size + HUGE_2M - 1) & ~(HUGE_2M - 1) : size;
	if ((uint64_t)st.st_size < size || (uint64_t)st.st_size > max || (uint64_t)st.st_size > SIZE_MAX)
		return -EINVAL;
	if (drop_past_end(fd, st.st_size) < 0)
		return -EINVAL;
	if (!all_pages_present(fd))
		return -EFAULT; /* the client must have touched every page */
	m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return -errno;
	if (!(seals & F_SEAL_SEAL) &&
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL | ((flags & RD_MEM_NO_HOLES) ? F_SEAL_FUTURE_WRITE : 0)) < 0) {
		munmap(m, (size_t)st.st_size);
		return -EINVAL; /* the client sealed it under us */
	}
	/* A hole punched before the seal would be allocated by our touches.
	 * From here on a channel's cannot change (FUTURE_WRITE: no punch, no
	 * MADV_REMOVE; GROW: nothing past the end), so this check holds; a
	 * region's owner can still punch (the hole guard, guard.h). */
	if (!all_pages_present(fd)) {
		munmap(m, (size_t)st.st_size);
		return -EFAULT;
	}
	/* Page tables now, not page faults on the poller later; nothing is
	 * allocated (every page is there). */
	if (!(flags & RD_MEM_NO_POPULATE))
		madvise(m, (size_t)st.st_size, MADV_POPULATE_WRITE);
	*map = m;
	*map_size = (size_t)st.st_size;
	return 0;
}

int rd_memfd_populate(int fd, void *map, size_t size)
{
	/* Under the hole guard a hole makes this fail (EFAULT) instead of
	 * allocating; either way the st_blocks check after it decides. */
	madvise(map, size, MADV_POPULATE_WRITE);
	return all_pages_present(fd) ? 0 : -EFAULT;
}
