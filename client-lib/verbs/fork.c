// SPDX-License-Identifier: MIT
/*
 * libroshm-verbs and fork(). A registered buffer's pages are roshm's
 * MAP_SHARED memfd pages (mr.c), whole pages around the buffer: a child of
 * fork() would share them with its parent, so its stores (to the buffer,
 * or to the allocator's data on the same page) would reach the parent and
 * its peers. A NIC's kernel (5.12 and later) gives a child copies of the
 * pages a NIC holds instead, and rdma-core then reports IBV_FORK_UNNEEDED.
 * So does this library: a handler run in the child (pthread_atfork) puts
 * a private copy over every mapping of an MR's memfd it finds in the
 * child's /proc/self/maps, also of MRs already deregistered (their pages
 * stay the memfd's), but for the parts that were shared memory before
 * they were registered (rv_fork_keep: shared anonymous memory, a memfd),
 * which the child keeps sharing. ibv_fork_init has nothing to do.
 *
 * The copy is taken in the child right after fork(), not at its instant:
 * what the parent's other threads or its peers store to those pages
 * meanwhile may or may not be in it. The child copies all registered
 * memory (as the kernel does for pinned pages), at fork().
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rv.h"

/* The memfds of MRs ever registered (device, inode): a set that only grows
 * (a deregistered MR's pages stay mapped). */
struct rv_fid {
	uint64_t ino;
	unsigned int maj, min;
};
static struct rv_fid *fids;
static size_t nfid, capfid;
static pthread_mutex_t fid_lock = PTHREAD_MUTEX_INITIALIZER;

/* Parts of those memfds (file offsets) that were shared memory before they
 * were registered (mr.c: shared anonymous memory, a memfd, ...): a child
 * keeps sharing them, as it did before the registration and as on a NIC. */
struct rv_keep {
	struct rv_fid f;
	uint64_t off, len;
};
static struct rv_keep *keeps;
static size_t nkeep, capkeep;

/*
 * The two arrays live in private anonymous mappings of their own, never on
 * the heap: the child reads them before it has copied the registered
 * pages, and a heap page may be one of those, still shared with the parent
 * (whose threads may move the heap's objects meanwhile). *@a of @cap
 * elements of @size bytes to twice as many (or 64): false when out of
 * memory.
 */
static bool grow(void **a, size_t *cap, size_t size)
{
	size_t n = *cap ? 2 * *cap : 64;
	void *b = mmap(NULL, n * size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (b == MAP_FAILED)
		return false;
	if (*a) {
		memcpy(b, *a, *cap * size);
		munmap(*a, *cap * size);
	}
	*a = b;
	*cap = n;
	return true;
}

#define RV_FORK_BATCH 256
static struct rv_vma todo[RV_FORK_BATCH];

static bool is_ours(const struct rv_vma *v)
{
	for (size_t i = 0; i < nfid; i++)
		if (fids[i].ino == v->ino && fids[i].maj == v->maj && fids[i].min == v->min)
			return true;
	return false;
}

/* The copy of @arg's pages moved over them; on a stack of its own
 * (rv_on_own_stack: they may hold the child's stack), storing nothing of
 * the caller's before the move. */
RV_NO_ASAN static int privatize_move(void *arg)
{
	const struct rv_vma *v = arg;
	size_t len = v->end - v->start;
	void *tmp = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (tmp == MAP_FAILED)
		return -ENOMEM;   /* out of memory: the child keeps sharing them */
	if (v->prot & PROT_READ)
		rv_dma_copy(tmp, (const void *)v->start, len);
	if (mprotect(tmp, len, v->prot) ||
	    mremap(tmp, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)v->start) == MAP_FAILED) {
		munmap(tmp, len);
		return -ENOMEM;
	}
	return 0;
}

/* [start, end) of the child: the same bytes, its own from now on. */
static bool privatize(const struct rv_vma *v)
{
	return !rv_on_own_stack(privatize_move, (void *)v);
}

/* Where in @v (file offset @at or after, below @end) the next part a child
 * keeps shared starts, and in *kend where it ends; @end when none. */
static uint64_t next_keep(const struct rv_vma *v, uint64_t at, uint64_t end, uint64_t *kend)
{
	uint64_t best = end;

	for (size_t i = 0; i < nkeep; i++) {
		const struct rv_keep *k = &keeps[i];
		uint64_t lo = k->off > at ? k->off : at;

		if (k->f.ino != v->ino || k->f.maj != v->maj || k->f.min != v->min ||
		    k->off + k->len <= at || lo >= best)
			continue;
		best = lo;
		*kend = k->off + k->len;
	}
	return best;
}

/* @v without the parts a child keeps shared: the pieces to copy, into
 * todo[*n...] (at most @cap in all). */
static void split(const struct rv_vma *v, size_t *n, size_t cap)
{
	uint64_t at = v->off, end = v->off + (v->end - v->start);

	while (at < end && *n < cap) {
		uint64_t kend = end, k = next_keep(v, at, end, &kend);

		if (k > at) {
			todo[*n] = *v;
			todo[*n].start = v->start + (at - v->off);
			todo[*n].end = v->start + (k - v->off);
			todo[*n].off = at;
			(*n)++;
		}
		at = k < end ? (kend < end ? kend : end) : end;
	}
}

/* One line of /proc/self/maps into @v; false when it is not one. */
static bool parse_line(const char *l, struct rv_vma *v)
{
	unsigned long long s, e, off, ino;
	unsigned int maj, min;
	char perm[5];

	if (sscanf(l, "%llx-%llx %4s %llx %x:%x %llu", &s, &e, perm, &off, &maj, &min, &ino) != 7)
		return false;
	*v = (struct rv_vma){ .start = (uintptr_t)s, .end = (uintptr_t)e, .off = off, .ino = ino,
			      .maj = maj, .min = min, .shared = perm[3] == 's',
			      .prot = (perm[0] == 'r' ? PROT_READ : 0) |
				      (perm[1] == 'w' ? PROT_WRITE : 0) |
				      (perm[2] == 'x' ? PROT_EXEC : 0) };
	return true;
}

/*
 * The child's handler. It must not touch the heap before the shared pages
 * are its own (a registered page may hold the allocator's data, and the
 * parent's), so no malloc and no stdio: /proc/self/maps is read with
 * read(2) into static storage, the mappings to copy are collected there
 * (a pass per 256), then copied.
 */
static char mbuf[8192];

static size_t collect(void)
{
	size_t n = 0, have = 0;
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	ssize_t r;

	if (fd < 0)
		return 0;
	while (n < RV_FORK_BATCH &&
	       (r = read(fd, mbuf + have, sizeof(mbuf) - 1 - have)) > 0) {
		char *l = mbuf, *nl;

		have += (size_t)r;
		mbuf[have] = 0;
		while (n < RV_FORK_BATCH && (nl = strchr(l, '\n'))) {
			struct rv_vma v;

			*nl = 0;
			/* by name too: a SysV segment's inode is its shmid, which
			 * one of our memfds' inodes may equal */
			if (parse_line(l, &v) && v.shared && strstr(l, " /memfd:roshm-") && is_ours(&v))
				split(&v, &n, RV_FORK_BATCH);
			l = nl + 1;
		}
		have -= (size_t)(l - mbuf);
		memmove(mbuf, l, have);
		if (have == sizeof(mbuf) - 1)
			have = 0;   /* no line is this long: drop it */
	}
	close(fd);
	return n;
}

static void child(void)
{
	size_t n, done;

	/* copied mappings are no longer ours: each pass finds the rest (the
	 * parts kept shared stay ours and yield nothing to copy) */
	if (nfid)
		do {
			done = 0;
			n = collect();
			for (size_t i = 0; i < n; i++)
				done += privatize(&todo[i]);
		} while (n == RV_FORK_BATCH && done);   /* a pass that copied nothing: out of memory */
	rv_wbar_fork(false);
	pthread_mutex_unlock(&fid_lock);
}

/* around fork(): the set stays whole for the child, and no registration is
 * half way through a move (pages read-only under a barrier whose thread the
 * child does not have) */
static void prepare(void)
{
	pthread_mutex_lock(&fid_lock);
	rv_wbar_fork(true);
}

static void parent(void)
{
	rv_wbar_fork(false);
	pthread_mutex_unlock(&fid_lock);
}

/* At load: before the handlers applications install later, which run after
 * ours in the child (and may allocate). */
__attribute__((constructor)) static void install(void)
{
	pthread_atfork(prepare, parent, child);
}

/* An MR's memfd, once registered: 0, or -ENOMEM. */
int rv_fork_track(uint64_t ino, unsigned int maj, unsigned int min)
{
	int ret = 0;

	pthread_mutex_lock(&fid_lock);
	if (nfid == capfid)
		grow((void **)&fids, &capfid, sizeof(*fids));
	if (nfid < capfid)
		fids[nfid++] = (struct rv_fid){ .ino = ino, .maj = maj, .min = min };
	else
		ret = -ENOMEM;
	pthread_mutex_unlock(&fid_lock);
	return ret;
}

/* Bytes [off, off + len) of an MR's memfd were shared memory before (a
 * child keeps sharing them): 0, or -ENOMEM (then a child gets a copy). */
int rv_fork_keep(uint64_t ino, unsigned int maj, unsigned int min, uint64_t off, uint64_t len)
{
	int ret = 0;

	pthread_mutex_lock(&fid_lock);
	if (nkeep == capkeep)
		grow((void **)&keeps, &capkeep, sizeof(*keeps));
	if (nkeep < capkeep)
		keeps[nkeep++] = (struct rv_keep){ { ino, maj, min }, off, len };
	else
		ret = -ENOMEM;
	pthread_mutex_unlock(&fid_lock);
	return ret;
}

/* The parts of [a, a + n), which @v maps (one of roshm's memfds), that a
 * child keeps shared: each as [lo, hi) to @fn (a registration that moves
 * them into another region keeps them shared there too). */
void rv_fork_kept(const struct rv_vma *v, uintptr_t a, uintptr_t n,
		  void (*fn)(uintptr_t lo, uintptr_t hi, void *arg), void *arg)
{
	uintptr_t (*r)[2] = NULL;
	size_t nr = 0;

	/* collected under the lock, handed out after it (@fn records new
	 * parts: rv_fork_keep takes the lock) */
	pthread_mutex_lock(&fid_lock);
	if (nkeep)
		r = malloc(nkeep * sizeof(*r));
	for (size_t i = 0; r && i < nkeep; i++) {
		const struct rv_keep *k = &keeps[i];
		uintptr_t lo, hi;

		if (k->f.ino != v->ino || k->f.maj != v->maj || k->f.min != v->min ||
		    k->off + k->len <= v->off || k->off >= v->off + (v->end - v->start))
			continue;
		lo = k->off > v->off ? v->start + (k->off - v->off) : v->start;
		hi = v->start + (k->off + k->len - v->off);
		hi = hi < v->end ? hi : v->end;
		lo = lo > a ? lo : a;
		hi = hi < a + n ? hi : a + n;
		if (lo < hi) {
			r[nr][0] = lo;
			r[nr++][1] = hi;
		}
	}
	pthread_mutex_unlock(&fid_lock);
	for (size_t i = 0; i < nr; i++)
		fn(r[i][0], r[i][1], arg);
	free(r);
}

/* Children get copies (above): nothing to prepare, as on a kernel with
 * copy-on-fork for pinned pages. */
RV_EXPORT int ibv_fork_init(void)
{
	return 0;
}

RV_EXPORT enum ibv_fork_status ibv_is_fork_initialized(void)
{
	return IBV_FORK_UNNEEDED;
}

static int fork_range(void *base, size_t size, int advice)
{
	uintptr_t start = (uintptr_t)base & ~(RV_PAGE - 1);
	uintptr_t end = ((uintptr_t)base + size + RV_PAGE - 1) & ~(RV_PAGE - 1);

	if (!size || end < start)
		return EINVAL;
	return madvise((void *)start, end - start, advice) ? errno : 0;
}

RV_EXPORT int ibv_dontfork_range(void *base, size_t size)
{
	return fork_range(base, size, MADV_DONTFORK);
}

RV_EXPORT int ibv_dofork_range(void *base, size_t size)
{
	return fork_range(base, size, MADV_DOFORK);
}
