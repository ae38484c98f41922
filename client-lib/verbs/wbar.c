// SPDX-License-Identifier: MIT
/*
 * libroshm-verbs: other threads' stores held off the pages ibv_reg_mr
 * moves, while it copies and remaps them.
 *
 * A registration copies a run of pages into its region, then maps the
 * region over them (mr.c move_run). A store another thread makes to those
 * pages between the copy and the remap lands in the old page and is lost
 * with it: a counter on the heap page of a malloc'd buffer, another
 * thread's object beside it. So the run's writable parts are made
 * read-only first (rv_wbar_hold), and a thread that writes there meanwhile
 * faults: this SIGSEGV handler finds the address in a part held, waits
 * (a futex) until the barrier is lifted (rv_wbar_end), and returns; the
 * store runs again, on the region's pages, with the protection the
 * application had. Faults of anything else go to the handler that was
 * there before (the application's, a sanitizer's, or the default).
 *
 * One barrier at a time (a mutex), over one run; the handler remembers
 * the last 1024 runs, so a thread that wakes late still finds its own and
 * retries once. What it cannot hold (a store the kernel makes, a thread
 * that cannot take the signal, a handler installed since that keeps
 * faults to itself) is in docs/verbs-compat.md, "Memory". The calling
 * thread's own control block is never made read-only (rv_wbar_hold).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#if __has_include(<sys/rseq.h>)
#include <sys/rseq.h>   /* glibc 2.35: the thread's rseq area */
#define HAVE_RSEQ_AREA 1
#endif

#include "rv.h"

#define WBAR_PAST 1024   /* runs remembered: a thread woken late still finds its own */

static struct {
	_Atomic uint32_t seq;   /* odd while a barrier stands */
	_Atomic uintptr_t owner;   /* the thread pointer of the thread that holds it */
	atomic_uint next;
	struct {
		_Atomic uint32_t seq;   /* the barrier; 0 while written */
		_Atomic uintptr_t lo, hi;   /* the run it held */
	} run[WBAR_PAST];
} bar;

static pthread_mutex_t bar_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t bar_once = PTHREAD_ONCE_INIT;
static struct sigaction bar_prev;
static bool bar_on;
static int bar_cancel;   /* the holder's cancel state, while it holds */
/* the last fault let through as a late one: the same again is not */
static __thread __attribute__((tls_model("initial-exec"))) uintptr_t late_addr;
static __thread __attribute__((tls_model("initial-exec"))) uint32_t late_seq;

/* the newest barrier (an odd seq) that holds or held @a, 0 for none */
static uint32_t held_by(uintptr_t a)
{
	uint32_t best = 0;

	for (unsigned int i = 0; i < WBAR_PAST; i++) {
		uint32_t s = atomic_load_explicit(&bar.run[i].seq, memory_order_acquire);
		uintptr_t lo = atomic_load_explicit(&bar.run[i].lo, memory_order_relaxed);
		uintptr_t hi = atomic_load_explicit(&bar.run[i].hi, memory_order_relaxed);

		atomic_thread_fence(memory_order_acquire);
		if (s && a >= lo && a < hi &&
		    atomic_load_explicit(&bar.run[i].seq, memory_order_relaxed) == s &&
		    (!best || (int32_t)(s - best) > 0))
			best = s;
	}
	return best;
}

/* The fault to the handler that was there before, as the kernel would have
 * run it: its mask (and SIGSEGV, but with SA_NODEFER) blocked meanwhile,
 * SA_RESETHAND; SIG_IGN and SIG_DFL as the kernel takes them. */
static void chain(int sig, siginfo_t *si, void *uc)
{
	bool fault = si->si_code > 0;
	sigset_t mask, old;

	/* the value, whatever the flags say (SA_RESETHAND leaves SA_SIGINFO
	 * beside SIG_DFL) */
	if (bar_prev.sa_handler == SIG_DFL || bar_prev.sa_handler == SIG_IGN) {
		/* a fault ignored is a fault all the same: the default; one
		 * someone sent and the process ignored stays ignored */
		if (bar_prev.sa_handler == SIG_IGN && !fault)
			return;
		signal(sig, SIG_DFL);
		if (!fault)
			raise(sig);   /* kills here */
		return;   /* a fault comes again on return: a core of the faulting store */
	}
	mask = bar_prev.sa_mask;
	if (!(bar_prev.sa_flags & SA_NODEFER))
		sigaddset(&mask, sig);
	if (bar_prev.sa_flags & SA_RESETHAND)
		signal(sig, SIG_DFL);
	pthread_sigmask(SIG_BLOCK, &mask, &old);
	if (bar_prev.sa_flags & SA_SIGINFO)
		bar_prev.sa_sigaction(sig, si, uc);
	else
		bar_prev.sa_handler(sig);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	int err = errno;
	uintptr_t a = (uintptr_t)si->si_addr;
	uint32_t s = si->si_code == SEGV_ACCERR ? held_by(a) : 0;

	/* the thread that holds the barrier never waits for itself */
	if (s && atomic_load_explicit(&bar.owner, memory_order_relaxed) ==
		 (uintptr_t)__builtin_thread_pointer())
		s = 0;
	if (s) {
		uint32_t now;

		while ((now = atomic_load_explicit(&bar.seq, memory_order_acquire)) == s)
			syscall(SYS_futex, &bar.seq, FUTEX_WAIT_PRIVATE, now, NULL, NULL, 0);
		/* lifted: the store runs again on the region's pages; once for
		 * this address and barrier (a page that was read-only faults
		 * again, and goes on) */
		if (late_addr != a || late_seq != s) {
			late_addr = a;
			late_seq = s;
			errno = err;
			return;
		}
	}
	errno = err;
	chain(sig, si, uc);
}

static bool ours(void)
{
	struct sigaction cur;

	return !sigaction(SIGSEGV, NULL, &cur) && (cur.sa_flags & SA_SIGINFO) &&
	       cur.sa_sigaction == on_segv;
}

static void install(void)
{
	struct sigaction sa, cur;

	/* the one before, read first: a fault of another thread while ours
	 * goes in finds it */
	if (sigaction(SIGSEGV, NULL, &bar_prev))
		return;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_segv;
	/* SA_NODEFER: the handler chained to runs with the mask it asked for */
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	bar_on = !sigaction(SIGSEGV, &sa, &cur);
	/* one the application put in between: that one */
	if (bar_on && (cur.sa_handler != bar_prev.sa_handler || cur.sa_flags != bar_prev.sa_flags))
		bar_prev = cur;
}

/* dlclose of this library (Open MPI's finalize): the handler that was there
 * before is back, not one into unmapped code. Not while a move stands (at
 * exit() with another thread in one: the handler stays, as the process
 * goes) */
__attribute__((destructor)) static void uninstall(void)
{
	if (!bar_on || pthread_mutex_trylock(&bar_mu))
		return;
	if (ours())
		sigaction(SIGSEGV, &bar_prev, NULL);
	bar_on = false;
	pthread_mutex_unlock(&bar_mu);
}

/*
 * A barrier over the run [lo, hi): 0, or -ENOTSUP where none can stand
 * (our handler is not the one in place: a sanitizer that keeps its own,
 * a handler the application installed since; then nothing is held, as
 * before). Not cancelled while it stands.
 */
int rv_wbar_begin(uintptr_t lo, uintptr_t hi)
{
	unsigned int i;
	uint32_t s;

	pthread_once(&bar_once, install);
	pthread_mutex_lock(&bar_mu);
	if (!bar_on || !ours()) {
		pthread_mutex_unlock(&bar_mu);
		return -ENOTSUP;
	}
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &bar_cancel);
	atomic_store_explicit(&bar.owner, (uintptr_t)__builtin_thread_pointer(),
			      memory_order_relaxed);
	s = atomic_fetch_add_explicit(&bar.seq, 1, memory_order_release) + 1;
	i = atomic_fetch_add_explicit(&bar.next, 1, memory_order_relaxed) % WBAR_PAST;
	atomic_store_explicit(&bar.run[i].seq, 0, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&bar.run[i].lo, lo, memory_order_relaxed);
	atomic_store_explicit(&bar.run[i].hi, hi, memory_order_relaxed);
	atomic_store_explicit(&bar.run[i].seq, s, memory_order_release);
	return 0;
}

void rv_wbar_end(void)
{
	int st;

	atomic_store_explicit(&bar.owner, 0, memory_order_relaxed);
	atomic_fetch_add_explicit(&bar.seq, 1, memory_order_release);
	syscall(SYS_futex, &bar.seq, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
	pthread_setcancelstate(bar_cancel, &st);
	pthread_mutex_unlock(&bar_mu);
}

void rv_wbar_fork(bool before)
{
	if (before)
		pthread_mutex_lock(&bar_mu);
	else
		pthread_mutex_unlock(&bar_mu);
}

RV_NO_ASAN static int hold(uintptr_t lo, uintptr_t hi, int prot)
{
	if (lo >= hi)
		return 0;
	/* the system call itself: no hook of the application's on mprotect
	 * runs (and stores) while pages are held */
	return syscall(SYS_mprotect, lo, hi - lo, prot & ~PROT_WRITE) ? -errno : 0;
}

/*
 * [lo, hi) of protection @prot read-only while the barrier stands; not the
 * pages of the calling thread's control block (from pthread_self() and the
 * thread pointer to its rseq area and its errno: the kernel writes rseq's
 * after a migration; glibc's SIGSETXID and SIGCANCEL handlers, never
 * blocked, write the block; a failed call here, errno: this very thread
 * would fault on a barrier it holds). Runs on rv_on_own_stack's stack:
 * stores nothing of the caller's.
 */
RV_NO_ASAN int rv_wbar_hold(uintptr_t lo, uintptr_t hi, int prot)
{
	uintptr_t tp = (uintptr_t)__builtin_thread_pointer(), xlo = tp, xhi = tp + 1;
	uintptr_t self = (uintptr_t)pthread_self(), e = (uintptr_t)&errno;
	int ret;

	if (!(prot & PROT_WRITE))
		return 0;
	xlo = self < xlo ? self : xlo;
	xhi = self + 1 > xhi ? self + 1 : xhi;
	xlo = e < xlo ? e : xlo;
	xhi = e + sizeof(int) > xhi ? e + sizeof(int) : xhi;
#ifdef HAVE_RSEQ_AREA
	{   /* its place even where rseq is off (glibc.pthread.rseq=0) */
		uintptr_t rs = tp + (uintptr_t)__rseq_offset;

		xlo = rs < xlo ? rs : xlo;
		xhi = rs + 32 > xhi ? rs + 32 : xhi;
	}
#endif
	xlo &= ~(uintptr_t)(RV_PAGE - 1);
	xhi = (xhi + RV_PAGE - 1) & ~(uintptr_t)(RV_PAGE - 1);
	if (xhi <= lo || xlo >= hi)
		return hold(lo, hi, prot);
	ret = hold(lo, xlo > lo ? xlo : lo, prot);
	return ret ? ret : hold(xhi < hi ? xhi : hi, hi, prot);
}
