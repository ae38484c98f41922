// SPDX-License-Identifier: MIT
/*
 * libroshm-verbs: memory registration. ibv_reg_mr() creates a libroshm
 * region "ibv-mr-<rkey>" of one metadata page plus the buffer's pages that
 * no earlier MR holds, copies their bytes in once and maps the region's
 * memfd over them (MAP_FIXED | MAP_SHARED): from then on the application's
 * loads and stores and the peers' operations act on the same bytes. Pages an
 * earlier MR holds are named in the metadata's segments (its key and
 * offset), once /proc/self/maps says they are still that MR's memfd there:
 * an application that unmapped and mapped them again has other pages at
 * those addresses now. See docs/verbs-compat.md, "Memory".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "rv.h"

/*
 * The whole pages around a buffer move into the region, other objects of
 * those pages with it (they keep working: same address, same bytes). Under
 * ASan the bytes around the buffer are other objects' redzones, which a
 * checked memcpy refuses: the kernel copies them (or rv_dma_copy), as a NIC
 * would.
 */
RV_NO_ASAN static int copy_pages(void *dst, const void *src, size_t n)
{
	/* through the kernel: a page another thread unmapped or made
	 * unreadable since the check fails the registration (EFAULT) instead
	 * of the application (SIGSEGV), as a NIC's pinning would; where the
	 * call is not allowed (a seccomp profile), a plain copy */
	while (n) {
		struct iovec l = { dst, n }, r = { (void *)src, n };
		/* the thread's id: the process's is gone once its main thread
		 * called pthread_exit (ESRCH) */
		ssize_t got = process_vm_readv(gettid(), &l, 1, &r, 1, 0);

		if (got < 0 && (errno == ENOSYS || errno == EPERM || errno == ESRCH)) {
			rv_dma_copy(dst, src, n);
			return 0;
		}
		if (got <= 0)
			return -EFAULT;
		dst = (uint8_t *)dst + got;
		src = (const uint8_t *)src + got;
		n -= (size_t)got;
	}
	return 0;
}

/*
 * A SysV segment (its shmid, the inode /proc/self/maps gives) that only
 * this process has: marked for removal (no one finds it by its key) and
 * attached @own times (this process's mappings of it: an MR over a part
 * splits one in three, an mprotect too), as /proc/sysvipc/shm says.
 * Another process could still attach it by its id, if this one handed the
 * id over.
 */
static bool sysv_alone(uint64_t shmid, uint64_t own)
{
	FILE *f = fopen("/proc/sysvipc/shm", "re");
	char line[512];
	bool alone = false;

	while (f && fgets(line, sizeof(line), f)) {
		unsigned long long id, nattch;
		unsigned int perms;

		if (sscanf(line, "%*d %llu %o %*u %*d %*d %llu", &id, &perms, &nattch) == 3 &&
		    id == shmid) {
			alone = (perms & 01000) && nattch == own;   /* SHM_DEST */
			break;
		}
	}
	if (f)
		fclose(f);
	return alone;
}

/*
 * A shared mapping (@path: the rest of its /proc/self/maps line): may
 * another process share it, or must its stores reach a file? Then it cannot
 * be an MR: its pages would move into the MR's region, and from then on
 * this process's stores would reach neither the file nor the others that
 * map it. Taken are only shared memory that nobody can open any more:
 * memfds, shared anonymous memory (MAP_HUGETLB too, named or not), a SysV
 * segment this process alone has (sysv_alone, in vma_check), an unlinked
 * file; each
 * shared with the mappings already made only (mr.c checks that no other of
 * this process maps the same pages; fork.c keeps them shared with a child).
 * Refused: a file or device with its name (a data file, POSIX shm in
 * /dev/shm, DPDK's hugetlbfs files, DAX, a GPU's or any MMIO), a SysV
 * segment others have or may find, and kernel objects (io_uring rings,
 * secret memory, DMA buffers). *ours: one of roshm's own memfds; *sysv: a
 * SysV segment.
 */
static bool shared_refused(char *path, bool *ours, bool *sysv)
{
	static const char del[] = " (deleted)";
	size_t n = strcspn(path, "\n"), d = sizeof(del) - 1;
	bool gone = n >= d && !memcmp(path + n - d, del, d);

	path[gone ? n - d : n] = 0;
	*ours = gone && !strncmp(path, "/memfd:roshm-", 13);
	if (!strncmp(path, "[anon_shmem:", 12))
		return false;   /* shared anonymous memory with a name (PR_SET_VMA) */
	if (path[0] != '/' || !gone)
		return true;    /* anon_inode:[io_uring] and the like; a name */
	if (!strncmp(path, "/SYSV", 5) && strlen(path) == 13) {
		*sysv = true;
		return false;   /* vma_check asks sysv_alone */
	}
	if (!strncmp(path, "/memfd:", 7) || !strcmp(path, "/dev/zero") ||
	    !strcmp(path, "/anon_hugepage"))
		return false;
	/* an unlinked file has a directory; /secretmem, /dmabuf:... have none */
	return !strchr(path + 1, '/');
}

/* The process's mappings, in address order (the kernel lists them so), in
 * *v and *n; -errno when they cannot be read whole (then no earlier MR's
 * pages can be told apart from new ones). */
int rv_maps_load(struct rv_vma **out, size_t *n)
{
	struct rv_vma *v = NULL, *t;
	size_t cap = 0;
	char *line = NULL;
	size_t len = 0;
	int ret = 0;
	FILE *f = fopen("/proc/thread-self/maps", "re");

	*n = 0;
	*out = NULL;
	if (!f)
		return -errno;
	while (getline(&line, &len, f) > 0) {
		struct rv_vma e;
		unsigned long s, x;
		char perm[5];

		int pos = 0;

		if (sscanf(line, "%lx-%lx %4s %" SCNx64 " %x:%x %" SCNu64 " %n", &s, &x, perm, &e.off,
			   &e.maj, &e.min, &e.ino, &pos) != 7)
			continue;
		e.start = s;
		e.end = x;
		e.prot = (perm[0] == 'r' ? PROT_READ : 0) | (perm[1] == 'w' ? PROT_WRITE : 0) |
			 (perm[2] == 'x' ? PROT_EXEC : 0);
		e.shared = perm[3] == 's';
		e.refused = false;
		e.ours = false;
		e.sysv = false;
		if (e.shared)
			e.refused = !pos || shared_refused(line + pos, &e.ours, &e.sysv);
		if (*n == cap) {
			cap = cap ? 2 * cap : 256;
			t = realloc(v, cap * sizeof(*v));
			if (!t) {
				ret = -ENOMEM;
				break;
			}
			v = t;
		}
		v[(*n)++] = e;
	}
	if (!ret && ferror(f))
		ret = -EIO;
	free(line);
	fclose(f);
	if (ret) {
		free(v);
		*n = 0;
		return ret;
	}
	*out = v;
	return 0;
}

/* The first mapping that ends after @a (n: none). */
static size_t vma_find(const struct rv_vma *v, size_t n, uintptr_t a)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid].end <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Where the mapping holding @a ends (or, in a hole, where the next begins). */
static uintptr_t vma_end(const struct rv_vma *v, size_t n, uintptr_t a)
{
	size_t i = vma_find(v, n, a);

	if (i == n)
		return UINTPTR_MAX;
	return v[i].start > a ? v[i].start : v[i].end;
}

/*
 * How far from @a (up to @limit) the process's pages are @m's memfd at file
 * offset @off onwards, contiguously: the end of that, or @a when @a is not.
 */
static uintptr_t backed_until(const struct rv_vma *v, size_t n, const struct rv_mr *m,
			      uintptr_t a, uintptr_t limit, uint64_t off)
{
	for (size_t i = vma_find(v, n, a); i < n && a < limit; i++) {
		const struct rv_vma *e = &v[i];

		if (e->start > a || e->ino != m->ino || e->maj != m->maj || e->min != m->min ||
		    e->off + (a - e->start) != off)
			break;
		uintptr_t b = e->end < limit ? e->end : limit;

		off += b - a;
		a = b;
	}
	return a < limit ? a : limit;
}

/*
 * Cut [start, end) into segments in address order: the runs other MRs'
 * regions hold (key and offset there, *owner[i] that MR) where the process
 * still maps those regions' pages (@v, @nv: /proc/self/maps), and the gaps
 * between them (*owner[i] NULL, key and offset filled in by the caller).
 * 0 with *nseg, or -ENOMEM past RV_MR_SEGS segments.
 */
static int mr_plan(struct rv_ctx *c, uintptr_t start, uintptr_t end, const struct rv_vma *v,
		   size_t nv, struct rv_seg *seg, struct rv_mr **owner, uint32_t *nseg)
{
	uint32_t n = 0;

	for (uintptr_t pos = start; pos < end;) {
		const struct rv_seg *hit = NULL;
		struct rv_mr *hit_mr = NULL;
		uintptr_t next = end;   /* where the gap from pos ends at the latest */
		uintptr_t e = pos;

		for (struct rv_mr *m = c->mrs; m && !hit; m = m->next)
			for (uint32_t i = 0; i < m->nrun; i++) {
				const struct rv_seg *r = &m->runs[i];
				uintptr_t lim = r->va + r->len < end ? r->va + r->len : end;

				if (r->va <= pos && pos < r->va + r->len) {
					e = backed_until(v, nv, m, pos, lim,
							 m->foff + r->data_off + (pos - r->va));
					if (e > pos) {
						hit = r;
						hit_mr = m;
						break;
					}
					/* its pages are no longer mapped here: look again
					 * where the mapping that is there now ends */
					uintptr_t after = vma_end(v, nv, pos);

					if (after < next)
						next = after;
				} else if (r->va > pos && r->va < next) {
					next = r->va;
				}
			}
		if (hit) {
			if (n == RV_MR_SEGS)
				return -ENOMEM;
			seg[n] = (struct rv_seg){ .va = pos, .len = e - pos,
						  .key = hit->key,
						  .data_off = hit->data_off + (pos - hit->va) };
			owner[n++] = hit_mr;
			pos = e;
		} else if (n && !owner[n - 1] && seg[n - 1].va + seg[n - 1].len == pos) {
			seg[n - 1].len += next - pos;   /* the gap goes on */
			pos = next;
		} else {
			if (n == RV_MR_SEGS)
				return -ENOMEM;
			seg[n] = (struct rv_seg){ .va = pos, .len = next - pos };
			owner[n++] = NULL;
			pos = next;
		}
	}
	*nseg = n;
	return 0;
}

/* Does any MR hold a run over [start, end)? Only then is /proc/self/maps
 * read under the lock (mr_plan). */
static bool mr_overlaps(const struct rv_ctx *c, uintptr_t start, uintptr_t end)
{
	for (const struct rv_mr *m = c->mrs; m; m = m->next)
		for (uint32_t i = 0; i < m->nrun; i++)
			if (m->runs[i].va < end && start < m->runs[i].va + m->runs[i].len)
				return true;
	return false;
}

/* Close an MR's region and forget it: no live MR uses its pages any more. */
static void mr_release(struct rv_ctx *c, struct rv_mr *m)
{
	struct rv_mr **pp;

	for (pp = &c->mrs; *pp && *pp != m; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = m->next;
	roshm_region_close(c->r, m->handle);
	free(m);
}

static void mr_unref(struct rv_ctx *c, struct rv_mr *m)
{
	if (--m->refs == 0)
		mr_release(c, m);
}

/* Does another mapping of the process map pages of @v[i]'s file? Copies
 * of them would no longer be one (a ring buffer mapped twice). */
static bool aliased(const struct rv_vma *v, size_t nv, size_t i)
{
	uint64_t lo = v[i].off, hi = v[i].off + (v[i].end - v[i].start);

	/* a SysV segment's inode is its shmid, which a memfd's may equal */
	for (size_t j = 0; j < nv; j++)
		if (j != i && v[j].ino == v[i].ino && v[j].maj == v[i].maj && v[j].min == v[i].min &&
		    v[j].sysv == v[i].sysv && v[j].off < hi && lo < v[j].off + (v[j].end - v[j].start))
			return true;
	return false;
}

/* This process's mappings of the SysV segment @v[i]. */
static uint64_t sysv_own(const struct rv_vma *v, size_t nv, size_t i)
{
	uint64_t n = 0;

	for (size_t j = 0; j < nv; j++)
		n += v[j].sysv && v[j].ino == v[i].ino && v[j].maj == v[i].maj && v[j].min == v[i].min;
	return n;
}

/*
 * Can [start, end) be an MR with @access, as the process maps it (@v, @nv)?
 * As a NIC's registration pins the pages: every page mapped and readable,
 * and writable when the MR's access writes (-EFAULT); and no shared memory
 * that others may map by its name (-EOPNOTSUPP, its range in @what).
 */
static int vma_check(const struct rv_vma *v, size_t nv, uintptr_t start, uintptr_t end,
		     int access, char *what, size_t cap)
{
	bool wr = access & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			    IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND);
	uintptr_t a = start;

	for (size_t i = vma_find(v, nv, start); i < nv && a < end; i++) {
		if (v[i].start > a)
			return -EFAULT;   /* a hole */
		if (!(v[i].prot & PROT_READ) || (wr && !(v[i].prot & PROT_WRITE)))
			return -EFAULT;
		if (v[i].refused || (v[i].sysv && !sysv_alone(v[i].ino, sysv_own(v, nv, i))) ||
		    (v[i].shared && !v[i].ours && aliased(v, nv, i))) {
			snprintf(what, cap, "%#lx-%#lx", (unsigned long)v[i].start, (unsigned long)v[i].end);
			return -EOPNOTSUPP;
		}
		a = v[i].end;
	}
	return a < end ? -EFAULT : 0;
}

struct keep_to {
	const struct stat *st;
	uintptr_t a;
	uint64_t off;
};

static void keep_one(uintptr_t lo, uintptr_t hi, void *arg)
{
	const struct keep_to *t = arg;

	rv_fork_keep(t->st->st_ino, major(t->st->st_dev), minor(t->st->st_dev), t->off + (lo - t->a),
		     hi - lo);
}

/*
 * The pages of [a, a + n), at file offset @off of the region's memfd (@st),
 * that were shared memory (@v, @nv: before; or pages of an earlier region
 * of ours that were) stay shared with a child of fork(), as they were
 * (fork.c).
 */
static void keep_shared(const struct rv_vma *v, size_t nv, uintptr_t a, uintptr_t n,
			const struct stat *st, uint64_t off)
{
	struct keep_to t = { st, a, off };
	uintptr_t end = a + n;

	for (size_t i = vma_find(v, nv, a); i < nv && v[i].start < end; i++) {
		uintptr_t lo = v[i].start > a ? v[i].start : a;
		uintptr_t hi = v[i].end < end ? v[i].end : end;

		if (v[i].shared && !v[i].ours)
			keep_one(lo, hi, &t);
		else if (v[i].ours)
			rv_fork_kept(&v[i], lo, hi - lo, keep_one, &t);
	}
}

/*
 * One run of pages into the region: copied, then the region's pages mapped
 * in their place, part by part with the protection the application had
 * there (@v, @nv: its mappings as read before; read-only memory stays
 * read-only, never writable for a moment, and no later mprotect can fail).
 * With @held, the writable parts are read-only from before the copy until
 * the region's pages are in their place: another thread's store meanwhile
 * waits for them (wbar.c) instead of landing in a page about to go.
 * Runs on a stack of its own (rv_on_own_stack): it stores nothing to the
 * caller's memory before the remap, the result comes back in a register;
 * @done (how many bytes of the run are the region's now) is stored last.
 */
struct move {
	uint8_t *dst;
	uintptr_t va;
	size_t len;
	int fd;
	off_t off;
	const struct rv_vma *v;
	size_t nv;
	bool held;
	size_t done;
};

/* The part of the run at @at: up to @hi, protection @prot (@i: where the
 * last look ended). False where no mapping held @at when the maps were read. */
RV_NO_ASAN static bool part_at(const struct move *mv, size_t *i, uintptr_t at, uintptr_t *hi,
			       int *prot)
{
	uintptr_t end = mv->va + mv->len;

	while (*i < mv->nv && mv->v[*i].end <= at)
		(*i)++;
	if (*i == mv->nv || mv->v[*i].start > at)
		return false;
	*hi = mv->v[*i].end < end ? mv->v[*i].end : end;
	*prot = mv->v[*i].prot;
	return true;
}

/* the writable parts in [from, to) writable again (the barrier's undone) */
RV_NO_ASAN static void unhold(const struct move *mv, uintptr_t from, uintptr_t to)
{
	uintptr_t hi;
	size_t i = 0;
	int prot;

	for (uintptr_t at = from; at < to && part_at(mv, &i, at, &hi, &prot); at = hi)
		if (prot & PROT_WRITE)
			syscall(SYS_mprotect, at, (hi < to ? hi : to) - at, prot);
}

/* mmap(MAP_SHARED | MAP_FIXED) of @fd at @at: 0, or -1 and errno */
RV_NO_ASAN static int raw_map(uintptr_t at, size_t len, int prot, int fd, off_t off)
{
#if defined(__x86_64__) || defined(__aarch64__)
	return syscall(SYS_mmap, at, len, prot, MAP_SHARED | MAP_FIXED, fd, off) == -1 ? -1 : 0;
#else
	return mmap((void *)at, len, prot, MAP_SHARED | MAP_FIXED, fd, off) == MAP_FAILED ? -1 : 0;
#endif
}

RV_NO_ASAN static int move_run(void *arg)
{
	struct move *mv = arg;
	uintptr_t at = mv->va, hi = 0, end = mv->va + mv->len;
	size_t i = 0;
	int ret = 0, prot;

	/* every part held by a mapping when the maps were read (vma_check
	 * refused holes): a part of none is never mapped at all */
	for (; at < end; at = hi)
		if (!part_at(mv, &i, at, &hi, &prot))
			return -EFAULT;
	for (at = mv->va, i = 0; mv->held && at < end; at = hi) {
		part_at(mv, &i, at, &hi, &prot);
		ret = rv_wbar_hold(at, hi, prot);
		if (ret) {
			unhold(mv, mv->va, hi);
			return ret;
		}
	}
	ret = copy_pages(mv->dst, (const void *)mv->va, mv->len);
	for (at = mv->va, i = 0; !ret && at < end; at = hi) {
		part_at(mv, &i, at, &hi, &prot);
		/* the system calls themselves, here and in the barrier: an
		 * application's hook on mmap (UCX's memory events, before the
		 * call) would run, and store, while the pages are held */
		if (raw_map(at, hi - at, prot, mv->fd, mv->off + (off_t)(at - mv->va))) {
			ret = -errno;
			break;
		}
	}
	if (ret && mv->held)
		unhold(mv, at, end);   /* the old pages, with every store made to them */
	mv->done = at - mv->va;
	return ret;
}

/*
 * The page size of the mapping that holds @a (/proc/self/smaps'
 * KernelPageSize), 0 when it cannot be read or nothing is mapped there.
 */
static uint64_t vma_page_size(uintptr_t a)
{
	FILE *f = fopen("/proc/thread-self/smaps", "re");
	char *line = NULL;
	size_t len = 0;
	bool in = false;
	uint64_t ps = 0;

	if (!f)
		return 0;
	while (getline(&line, &len, f) > 0) {
		unsigned long s, e, kb;

		if (sscanf(line, "%lx-%lx ", &s, &e) == 2 && strchr(line, '-') < strchr(line, ' ')) {
			if (in)
				break;   /* its block ended without the field */
			in = s <= a && a < e;
		} else if (in && sscanf(line, "KernelPageSize: %lu kB", &kb) == 1) {
			ps = (uint64_t)kb * 1024;
			break;
		}
	}
	free(line);
	fclose(f);
	return ps;
}

/*
 * A mapping of huge pages (MAP_HUGETLB, SHM_HUGETLB, a hugetlbfs file) can
 * be mapped over only in whole huge pages (mmap: EINVAL). Widen [*start,
 * *end) to the huge pages around it at either end that lies in one: those
 * pages move into the MR's region whole (4 KiB pages from then on), with
 * the other objects they hold, as the 4 KiB pages around an unaligned
 * buffer do. true when it widened.
 */
static bool huge_span(uintptr_t *start, uintptr_t *end)
{
	uint64_t ps = vma_page_size(*start);
	bool wide = false;

	if (ps > RV_PAGE && (ps & (ps - 1)) == 0 && *start & (ps - 1)) {
		*start &= ~(uintptr_t)(ps - 1);
		wide = true;
	}
	ps = vma_page_size(*end - 1);
	if (ps > RV_PAGE && (ps & (ps - 1)) == 0 && *end & (ps - 1)) {
		*end = (*end + ps - 1) & ~(uintptr_t)(ps - 1);
		wide = true;
	}
	return wide;
}

/*
 * The segments of a registration widened over huge pages, cut to the MR's
 * own pages [lo, hi) (its metadata names those, from the first page of the
 * buffer on: rv_meta_check); the region keeps the whole huge pages (runs).
 */
static uint32_t segs_trim(struct rv_seg *seg, struct rv_mr **owner, uint32_t n, uintptr_t lo,
			  uintptr_t hi)
{
	uint32_t k = 0;

	for (uint32_t i = 0; i < n; i++) {
		uintptr_t a = seg[i].va > lo ? seg[i].va : lo;
		uintptr_t b = seg[i].va + seg[i].len < hi ? seg[i].va + seg[i].len : hi;

		if (a >= b)
			continue;
		seg[k] = seg[i];
		seg[k].data_off += a - seg[i].va;
		seg[k].va = a;
		seg[k].len = b - a;
		owner[k++] = owner[i];
	}
	return k;
}

#undef ibv_reg_mr
RV_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	struct rv_ctx *c = to_ctx(pd->context);
	uintptr_t start = (uintptr_t)addr & ~(RV_PAGE - 1);
	uintptr_t end = ((uintptr_t)addr + length + RV_PAGE - 1) & ~(RV_PAGE - 1);
	struct rv_seg seg[RV_MR_SEGS];
	struct rv_mr *owner[RV_MR_SEGS];
	uint64_t own = 0, data_off;
	struct rv_meta *meta;
	uint32_t handle = 0, rkey = 0, nseg = 0;
	struct rv_vma *vma = NULL, *chk = NULL;
	size_t nvma = 0, nchk = 0;
	bool widened = false;
	char what[64];
	struct stat st;
	struct rv_mr *m;
	uint8_t *base;
	int ret, fd;

	/* as the kernel's ib_check_mr_access: remote writes need local ones */
	if (!addr || !length || (uintptr_t)addr + length < (uintptr_t)addr ||
	    end < (uintptr_t)addr ||
	    ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	     !(access & IBV_ACCESS_LOCAL_WRITE))) {
		errno = EINVAL;
		return NULL;
	}
	/* what the process maps there, read without the lock (a long read in a
	 * process of many mappings holds up no other thread's verbs call);
	 * unreadable: refuse, never guess */
	ret = rv_maps_load(&chk, &nchk);
	if (!ret && (ret = vma_check(chk, nchk, start, end, access, what, sizeof(what))) &&
	    ret == -EOPNOTSUPP && getenv("ROSHM_VERBS_DEBUG"))
		fprintf(stderr, "roshm-verbs: reg_mr %p+%zu: %s is shared memory that other "
			"processes may map by its name\n", addr, length, what);
	if (ret) {
		free(chk);
		errno = -ret;
		return NULL;
	}
	rv_lock(c);
again:
	vma = NULL;
	nvma = 0;
	m = calloc(1, sizeof(*m));
	ret = m ? 0 : -ENOMEM;
	/* an earlier MR's pages there are still its memfd's? read again under
	 * the lock: another thread's registration may have moved them since */
	if (m && mr_overlaps(c, start, end))
		ret = rv_maps_load(&vma, &nvma);
	if (!ret)
		ret = mr_plan(c, start, end, vma, nvma, seg, owner, &nseg);
	if (ret)
		goto err;
	/* The other MRs it uses, once each, and the pages it brings itself. */
	for (uint32_t i = 0; i < nseg; i++) {
		uint32_t j = 0;

		if (!owner[i]) {
			seg[i].data_off = RV_PAGE + own;
			own += seg[i].len;
			m->runs[m->nrun++] = seg[i];
			continue;
		}
		while (j < m->nuse && m->uses[j] != owner[i])
			j++;
		if (j == m->nuse) {
			if (m->nuse + 1 == RV_MR_KEYS) {   /* a slot stays for its own region */
				ret = -ENOMEM;
				goto err;
			}
			m->uses[m->nuse++] = owner[i];
		}
	}
	/* only the owners of the rings our PD's QPs are connected to may open
	 * it, and only the parts they are granted (rv_grant_mr, rv_grant_connect) */
	ret = rv_create_named(c, "ibv-mr-", 8, RV_PAGE + own,
			      &(struct roshm_region_opts){ .policy = ROSHM_POLICY_GRANT }, &rkey,
			      &handle);
	if (ret)
		goto err;
	meta = roshm_region_data(c->r, handle, NULL);
	fd = roshm_region_fd(c->r, handle, &data_off);
	if (!meta || fd < 0 || fstat(fd, &st)) {
		ret = fd < 0 ? fd : meta ? -errno : -EIO;
		if (fd >= 0)
			close(fd);
		goto err_region;
	}
	/* what /proc/self/maps shows for its pages, for later registrations
	 * and for a child of fork() (fork.c) */
	m->ino = st.st_ino;
	m->maj = major(st.st_dev);
	m->min = minor(st.st_dev);
	ret = rv_fork_track(m->ino, m->maj, m->min);
	if (ret) {
		close(fd);
		goto err_region;
	}
	m->foff = data_off;
	/* The one copy: the bytes of the pages no MR held yet go into the
	 * region, then its pages take their place at the same virtual address. */
	base = (uint8_t *)meta;
	for (uint32_t i = 0; i < m->nrun; i++) {
		struct rv_seg *r = &m->runs[i];

		struct move mv = { base + r->data_off, r->va, r->len, fd,
				   (off_t)(data_off + r->data_off), chk, nchk };

		/* other threads' stores held off its pages meanwhile; on a
		 * stack of its own: the run may hold this very stack */
		mv.held = !rv_wbar_begin(r->va, r->va + r->len);
		ret = rv_on_own_stack(move_run, &mv);
		if (mv.held)
			rv_wbar_end();
		/* also the parts of a run that failed part-way: their pages
		 * stay the region's, shared memory shared with a child */
		if (mv.done)
			keep_shared(chk, nchk, r->va, mv.done, &st, data_off + r->data_off);
		if (ret) {
			close(fd);
			goto err_region;
		}
		r->key = rkey;
	}
	close(fd);
	free(vma);
	if (widened)
		nseg = segs_trim(seg, owner, nseg, (uintptr_t)addr & ~(RV_PAGE - 1),
				 ((uintptr_t)addr + length + RV_PAGE - 1) & ~(RV_PAGE - 1));
	for (uint32_t i = 0; i < nseg; i++) {
		if (!owner[i])
			seg[i].key = rkey;
		m->seg[i] = seg[i];
		m->seg_handle[i] = owner[i] ? owner[i]->handle : handle;
	}
	m->nseg = nseg;
	for (uint32_t j = 0; j < m->nuse; j++)
		m->uses[j]->refs++;
	*meta = (struct rv_meta){ .magic = RV_META_MAGIC, .addr = (uintptr_t)addr,
				  .length = length, .access = (uint32_t)access, .rkey = rkey,
				  .nseg = nseg };
	memcpy(meta->seg, seg, nseg * sizeof(seg[0]));
	m->mr.context = pd->context;
	m->mr.pd = pd;
	m->mr.addr = addr;
	m->mr.length = length;
	m->mr.handle = handle;
	m->mr.lkey = rkey;
	m->mr.rkey = rkey;
	m->mr_access = access;
	m->handle = handle;
	m->refs = 1;
	m->next = c->mrs;
	c->mrs = m;
	ret = rv_grant_mr(c, m, true);
	rv_unlock(c);
	free(chk);
	if (ret) {
		/* a connected QP's peer could not be let in (limits.max_grants on
		 * a region its bytes lie in): out of resources, and nothing of it
		 * is left */
		if (getenv("ROSHM_VERBS_DEBUG"))
			fprintf(stderr, "roshm-verbs: reg_mr %p+%zu: a connected QP's peer cannot be "
				"granted it: %s\n", addr, length, strerror(-ret));
		ibv_dereg_mr(&m->mr);
		errno = ENOMEM;
		return NULL;
	}
	return &m->mr;
err_region:
	roshm_region_close(c->r, handle);  /* pages already mapped keep their bytes */
err:
	free(vma);
	free(m);
	/* mmap refused a part of huge pages: once more over the whole huge
	 * pages (the runs mapped before it are in no MR and come again) */
	if (ret == -EINVAL && !widened && huge_span(&start, &end)) {
		widened = true;
		own = 0;
		nseg = 0;
		handle = rkey = 0;
		goto again;
	}
	rv_unlock(c);
	free(chk);
	if (getenv("ROSHM_VERBS_DEBUG"))
		fprintf(stderr, "roshm-verbs: reg_mr %p+%zu: %s\n", addr, length, strerror(-ret));
	/* out of the tenant's bytes or regions, or of the process's handles
	 * (limits.max_handles): out of resources, as a NIC says it */
	errno = ret == -EDQUOT || ret == -ENOSPC || ret == -EMFILE ? ENOMEM : -ret;
	return NULL;
}

RV_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
					  uint64_t iova, unsigned int access)
{
	if (iova != (uintptr_t)addr) {
		errno = EOPNOTSUPP;   /* remote addresses are the owner's virtual addresses */
		return NULL;
	}
	return ibv_reg_mr(pd, addr, length, (int)(access & ~IBV_ACCESS_OPTIONAL_RANGE));
}

#undef ibv_reg_mr_iova
RV_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
					 uint64_t iova, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, iova, (unsigned int)access);
}

RV_EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
{
	struct rv_mr *m = (struct rv_mr *)mr, *e;
	struct rv_meta *meta;
	struct rv_ctx *c;

	if (!mr || !mr->context)
		return EINVAL;
	c = to_ctx(mr->context);
	rv_lock(c);
	for (e = c->mrs; e && e != m; e = e->next)
		;
	if (!e || m->dead || m->win_of) {
		rv_unlock(c);
		return EINVAL;
	}
	if (m->nmw) {   /* memory windows are bound to it */
		rv_unlock(c);
		return EBUSY;
	}
	/* The rkey dies now: a peer that resolves it finds no metadata. roshmd
	 * forgets the region once no other MR uses its pages; the application
	 * keeps its bytes (our MAP_SHARED view keeps the memfd alive). */
	rv_grant_mr(c, m, false);
	m->dead = true;
	c->dereg_gen++;   /* WRs posted before it look at their MRs again (qp.c) */
	meta = roshm_region_data(c->r, m->handle, NULL);
	if (meta)
		__atomic_store_n(&meta->magic, 0, __ATOMIC_RELEASE);
	rv_rkey_forget(c, m->mr.rkey);
	for (uint32_t j = 0; j < m->nuse; j++)
		mr_unref(c, m->uses[j]);
	mr_unref(c, m);
	rv_unlock(c);
	return 0;
}

/* Is @s inside a local MR of ours whose lkey it names, one the NIC may write
 * into when it is the destination (@write: a RECV's, a READ's, an atomic's
 * result), as IBV_ACCESS_LOCAL_WRITE allows? */
bool rv_local_ok(struct rv_ctx *c, const struct ibv_sge *s, bool write)
{
	for (struct rv_mr *m = c->mrs; m; m = m->next)
		if (!m->dead && !m->win_of && m->mr.lkey == s->lkey &&
		    (!write || (m->mr_access & IBV_ACCESS_LOCAL_WRITE)) && s->addr >= (uintptr_t)m->mr.addr &&
		    s->length <= m->mr.length &&
		    s->addr - (uintptr_t)m->mr.addr <= m->mr.length - s->length)
			return true;
	return false;
}


/*
 * Where the byte at @va of the live MR @lkey lies: the handle of the region
 * of ours that holds its page (the MR's own, or an earlier MR's), its data
 * offset there, and how many bytes from @va on lie contiguously there. An
 * RDMA WRITE's source and READ's destination go to roshmd as that memory
 * (ROSHM_SQE_F_LBUF): no copy through the arena. The segments are the ones
 * of the registration, as a NIC's MR keeps the pages it pinned then.
 */
bool rv_lbuf(struct rv_ctx *c, uint32_t lkey, uint64_t va, uint32_t *handle, uint64_t *off,
	     uint64_t *room)
{
	for (struct rv_mr *m = c->mrs; m; m = m->next) {
		if (m->dead || m->win_of || m->mr.lkey != lkey)
			continue;
		for (uint32_t i = 0; i < m->nseg; i++) {
			const struct rv_seg *g = &m->seg[i];

			if (va >= g->va && va - g->va < g->len) {
				*handle = m->seg_handle[i];
				*off = g->data_off + (va - g->va);
				*room = g->len - (va - g->va);
				return true;
			}
		}
		return false;
	}
	return false;
}
