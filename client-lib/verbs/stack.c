// SPDX-License-Identifier: MIT
/*
 * libroshm-verbs: a copy and a remap of pages that may hold the calling
 * thread's own stack, on a stack of their own.
 *
 * ibv_reg_mr copies a buffer's pages into its region and maps the region
 * over them (MAP_FIXED); a child of fork() copies its registered pages and
 * moves the copy over them (fork.c). Should those pages hold the stack the
 * calling thread runs on (an MR over a buffer on the stack: UCX's
 * registration cache widens ranges, MPI_Gather's buffer is a local), every
 * store to them between the copy and the remap (the return address of the
 * next call, a spilled local) is lost with the old page, and the thread
 * returns into what the copy held: SIGSEGV (mpich-rma under ASan). So
 * both run on a stack mapped for the purpose, the asynchronous signals
 * blocked (a handler would run on that stack): between the copy and the
 * remap nothing is stored to the calling stack. The function must store
 * nothing of the caller's before its remap; its result comes back in a
 * register, and it is built without ASan's instrumentation (RV_NO_ASAN):
 * its locals would live in ASan's fake frames, allocated on the new stack
 * and freed by ASan as frames of a stack it has left.
 *
 * What this does not cover: a non-main thread's control block and static
 * TLS sit at the top of its stack mapping, where the kernel (rseq's cpu_id
 * after a migration) and glibc's SIGSETXID / SIGCANCEL handlers (never
 * blocked) may store meanwhile (the write barrier leaves those pages
 * writable: wbar.c). Other threads' stores are held off by that barrier
 * (docs/verbs-compat.md, "Memory").
 *
 * The switch is a few instructions of assembly rather than
 * makecontext/swapcontext, which ASan intercepts with a warning on stderr
 * and which save and restore the signal mask on each switch anyway.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>

#include "rv.h"

#define RV_ALT_STACK (256ul << 10)   /* ASan's interceptors and the kernel calls of a copy */
#define RV_ALT_GUARD 4096ul

#if defined(__x86_64__)
/* fn(arg) with the stack pointer at @top (16-byte aligned) */
__attribute__((noinline)) static int call_on(void *top, int (*fn)(void *), void *arg)
{
	long ret;

	__asm__ volatile("mov %%rsp, %%rbx\n\t"
			 "mov %[top], %%rsp\n\t"
			 "call *%[fn]\n\t"
			 "mov %%rbx, %%rsp"
			 : "=a"(ret), "+D"(arg), [fn] "+r"(fn), [top] "+r"(top)
			 :
			 : "rbx", "rcx", "rdx", "rsi", "r8", "r9", "r10", "r11", "memory", "cc",
			   "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",
			   "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
	return (int)ret;
}
#define RV_CALL_ON 1
#elif defined(__aarch64__)
__attribute__((noinline)) static int call_on(void *top, int (*fn)(void *), void *arg)
{
	register long x0 __asm__("x0") = (long)arg;

	__asm__ volatile("mov x19, sp\n\t"
			 "mov sp, %[top]\n\t"
			 "blr %[fn]\n\t"
			 "mov sp, x19"
			 : "+r"(x0), [fn] "+r"(fn), [top] "+r"(top)
			 :
			 : "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10", "x11",
			   "x12", "x13", "x14", "x15", "x16", "x17", "x18", "x19", "x30", "memory",
			   "cc", "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v16", "v17",
			   "v18", "v19", "v20", "v21", "v22", "v23", "v24", "v25", "v26", "v27",
			   "v28", "v29", "v30", "v31");
	return (int)x0;
}
#define RV_CALL_ON 1
#endif

int rv_on_own_stack(int (*fn)(void *), void *arg)
{
#ifdef RV_CALL_ON
	sigset_t async, old;
	uint8_t *s;
	int ret;

	s = mmap(NULL, RV_ALT_STACK, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (s == MAP_FAILED)
		return -ENOMEM;
	mprotect(s, RV_ALT_GUARD, PROT_NONE);   /* an overflow faults, not corrupts */
	sigfillset(&async);
	/* faults of the copy itself still report (a fallback copy's) */
	sigdelset(&async, SIGSEGV);
	sigdelset(&async, SIGBUS);
	sigdelset(&async, SIGFPE);
	sigdelset(&async, SIGILL);
	sigdelset(&async, SIGTRAP);
	/* a seccomp profile that traps process_vm_readv: a blocked SIGSYS
	 * would kill the process instead of its handler running */
	sigdelset(&async, SIGSYS);
	pthread_sigmask(SIG_BLOCK, &async, &old);
	ret = call_on(s + RV_ALT_STACK, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	munmap(s, RV_ALT_STACK);
	return ret;
#else
	/* no switch for this architecture: as before, a stack in the range
	 * is not safe */
	return fn(arg);
#endif
}
