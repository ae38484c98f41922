// SPDX-License-Identifier: MIT
/*
 * roshm/dma.h: how a WRITE's bytes land (roshmd's tcp and local transports,
 * libroshm-verbs' copies into MRs). An application that polls the last byte
 * of its buffer and then writes its own there (riostream) needs that byte
 * to land last and once; glibc's memcpy of 64 bytes stores them twice.
 *
 * The order is checked where a copy crosses a page: the page after the
 * boundary is inaccessible, so the first store into it faults; the handler
 * checks that every byte before the boundary has landed, then closes the
 * page before the boundary and opens the one after it, so a store before
 * the boundary after one behind it (out of order, or a byte stored again)
 * faults too and is counted. The boundary (page aligned, so a line's start)
 * 1 to 16 bytes before the copy's end (the last store: its last line's
 * part) and 64 (the whole last line, or its last 16 bytes), sizes 2 to
 * 300 and some big ones; the harness
 * itself must catch a copy that stores the last byte first and one that
 * stores the 64 bytes twice (as glibc's memcpy does).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "roshm/dma.h"
#include "transport/transport.h"

static long pg;
static uint8_t *area;             /* four pages: open, A | B | C (C: never open) */
static uint8_t *bound;            /* B's start */
static const uint8_t *want_src;   /* what [copy start, bound) must hold at the first fault */
static uint8_t *want_dst;
static volatile int state, faults_b, early, late;

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	uint8_t *a = si->si_addr;

	(void)sig;
	(void)uc;
	if (state == 0 && a >= bound && a < bound + pg) {
		/* the first store behind the boundary: all before it landed? */
		faults_b++;
		if (memcmp(want_dst, want_src, (size_t)(bound - want_dst)))
			early++;
		mprotect(bound - pg, (size_t)pg, PROT_NONE);
		mprotect(bound, (size_t)pg, PROT_READ | PROT_WRITE);
		state = 1;
		return;
	}
	if (state == 1 && a >= bound - pg && a < bound) {
		/* a store before the boundary after one behind it */
		late++;
		mprotect(bound - pg, (size_t)pg, PROT_READ | PROT_WRITE);
		state = 2;
		return;
	}
	/* anything else: a bug of this test */
	signal(SIGSEGV, SIG_DFL);
}

typedef void (*copy_fn)(void *, const void *, size_t);

/* Copy @n bytes so that the boundary falls @k bytes before the copy's
 * end; 0 if it landed in order and once, else 1. */
static int run_one(copy_fn fn, const uint8_t *src, size_t n, size_t k)
{
	uint8_t *dst = bound - (n - k);
	struct sigaction sa, old;

	/* ours for the copy (cmocka has its own for the test) */
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGSEGV, &sa, &old), 0);

	memset(area, 0xa5, (size_t)pg * 3);
	mprotect(bound, (size_t)pg, PROT_NONE);
	want_src = src;
	want_dst = dst;
	state = 0;
	early = late = 0;
	faults_b = 0;
	fn(dst, src, n);
	mprotect(bound - pg, (size_t)pg * 2, PROT_READ | PROT_WRITE);
	sigaction(SIGSEGV, &old, NULL);
	assert_int_equal(faults_b, 1);          /* it did cross */
	assert_memory_equal(dst, src, n);       /* and copied */
	assert_int_equal(dst[-1], 0xa5);        /* nothing before */
	if (dst + n < bound + pg)
		assert_int_equal(dst[n], 0xa5); /* nothing after */
	return early || late;
}

static void roshm_copy(void *d, const void *s, size_t n)
{
	roshm_dma_copy(d, s, n);
}

static void dma_move(void *d, const void *s, size_t n)
{
	rd_dma_move(d, s, (uint32_t)n);
}

/* what the harness must catch */
static void last_first(void *d, const void *s, size_t n)
{
	volatile uint8_t *vd = d;
	const uint8_t *vs = s;

	vd[n - 1] = vs[n - 1];
	for (size_t i = 0; i + 1 < n; i++)
		vd[i] = vs[i];
}

static void twice64(void *d, const void *s, size_t n)
{
	/* glibc's memcpy for 64 to 128 bytes: the first 64, then the last 64 */
	typedef uint8_t v64 __attribute__((vector_size(64), aligned(1), may_alias));
	v64 a = *(const v64 *)s, b = *(const v64 *)((const uint8_t *)s + n - 64);

	*(volatile v64 *)d = a;
	*(volatile v64 *)((uint8_t *)d + n - 64) = b;
}

static uint8_t src_buf[3 * 4096];

static void fill(void)
{
	for (size_t i = 0; i < sizeof(src_buf); i++)
		src_buf[i] = (uint8_t)(i * 7 + 3);
}

static void check_fn(copy_fn fn)
{
	static const size_t big[] = { 1000, 4095, 4096, 5000, 8000 };

	for (size_t n = 2; n <= 300; n++)
		for (size_t k = 1; k < n && k <= 64; k = k == 16 ? 64 : k + 1)
			if (run_one(fn, src_buf + (n % 13), n, k)) {
				fail_msg("%zu bytes, the page boundary %zu bytes before their end: "
					 "a byte before it landed after one behind it", n, k);
			}
	for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++)
		for (size_t k = 1; k <= 64; k = k == 16 ? 64 : k + 1)
			if (run_one(fn, src_buf + 5, big[i], k))
				fail_msg("%zu bytes, boundary %zu before the end: out of order", big[i], k);
}

static void test_order_dma_copy(void **st)
{
	(void)st;
	check_fn(roshm_copy);
}

static void test_order_dma_move(void **st)
{
	(void)st;
	check_fn(dma_move);
}

static void test_harness_catches(void **st)
{
	(void)st;
	/* the last byte first: the boundary anywhere before the end */
	assert_int_equal(run_one(last_first, src_buf, 64, 10), 1);
	assert_int_equal(run_one(last_first, src_buf, 200, 1), 1);
	/* the 64 bytes twice: a store before the boundary comes again after
	 * one behind it */
	assert_int_equal(run_one(twice64, src_buf, 64, 1), 1);
	assert_int_equal(run_one(twice64, src_buf, 64, 40), 1);
	/* and lets an in-order copy through */
	assert_int_equal(run_one(roshm_copy, src_buf, 64, 1), 0);
}

/* every size and alignment: the bytes, and nothing beside them */
static void test_bytes(void **st)
{
	static uint8_t dst[512 + 64];

	(void)st;
	for (size_t n = 0; n <= 512; n++)
		for (size_t so = 0; so < 16; so += 3)
			for (size_t dof = 0; dof < 16; dof += 5) {
				memset(dst, 0x5a, sizeof(dst));
				roshm_dma_copy(dst + 16 + dof, src_buf + so, n);
				assert_memory_equal(dst + 16 + dof, src_buf + so, n);
				for (size_t i = 0; i < 16 + dof; i++)
					assert_int_equal(dst[i], 0x5a);
				for (size_t i = 16 + dof + n; i < sizeof(dst); i++)
					assert_int_equal(dst[i], 0x5a);
			}
}

/* a client's own region as its buffer may overlap the target: memmove's answer */
static void test_overlap(void **st)
{
	static uint8_t a[600], b[600];

	(void)st;
	for (int dlt = -40; dlt <= 40; dlt += 8)
		for (uint32_t n = 1; n <= 300; n += 17) {
			for (size_t i = 0; i < sizeof(a); i++)
				a[i] = b[i] = (uint8_t)(i * 13 + 1);
			rd_dma_move(a + 200 + dlt, a + 200, n);
			memmove(b + 200 + dlt, b + 200, n);
			assert_memory_equal(a, b, sizeof(a));
		}
}

static int setup(void **st)
{
	(void)st;
	pg = sysconf(_SC_PAGESIZE);
	area = mmap(NULL, (size_t)pg * 4, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED)
		return -1;
	mprotect(area + 3 * pg, (size_t)pg, PROT_NONE);
	bound = area + 2 * pg;
	fill();
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_harness_catches),
		cmocka_unit_test(test_order_dma_copy),
		cmocka_unit_test(test_order_dma_move),
		cmocka_unit_test(test_bytes),
		cmocka_unit_test(test_overlap),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
