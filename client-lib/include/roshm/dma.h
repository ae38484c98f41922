/* SPDX-License-Identifier: MIT */
/*
 * How the bytes of a WRITE (and of a READ's answer) land in memory an
 * application may be watching, as a NIC's DMA lands them for it: the store
 * that holds the last byte comes last, and no byte of it is stored before.
 * Used by roshmd wherever it puts a payload into a region or a client's
 * buffer (tcp, local) and by libroshm-verbs where it copies into an
 * application's MR.
 *
 * Applications poll the last byte of a buffer to learn that all of it has
 * arrived (perftest's ib_write_lat, rdma-core's riostream), and some then
 * write that byte themselves for their next round. memcpy promises no
 * order and no single store: glibc's for 64 to 128 bytes stores the first
 * 64 and then the last 64, which for exactly 64 bytes are the same 64, so
 * the application can see the last byte after the first store, write its
 * own, and have the second store put the old one back (riostream then
 * waits forever). Not a memcpy: the ranges must not overlap.
 */
#ifndef ROSHM_DMA_H
#define ROSHM_DMA_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A reader that gets a payload in pieces (tcp's direct read into place)
 * leaves at least this many of its last bytes to roshm_dma_copy. */
#define ROSHM_DMA_TAIL 64

/* Between the stores that must land in order: x86 keeps stores in program
 * order (string and non-temporal ones of memcpy included: glibc fences
 * those), so only the compiler must; elsewhere a release. */
#if defined(__x86_64__) || defined(__i386__)
#define ROSHM_DMA_ORDER() __atomic_signal_fence(__ATOMIC_SEQ_CST)
#else
#define ROSHM_DMA_ORDER() __atomic_thread_fence(__ATOMIC_RELEASE)
#endif

#if defined(__SANITIZE_ADDRESS__)
#define ROSHM_DMA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ROSHM_DMA_ASAN 1
#endif
#endif

typedef uint8_t roshm_dma_v16 __attribute__((vector_size(16), aligned(1), may_alias));
typedef uint64_t roshm_dma_u64 __attribute__((aligned(1), may_alias));
typedef uint32_t roshm_dma_u32 __attribute__((aligned(1), may_alias));
typedef uint16_t roshm_dma_u16 __attribute__((aligned(1), may_alias));

/* @n bytes in a DMA engine's stores: from the first byte to the last,
 * each the largest of 16, 8, 4, 2, 1 bytes that the destination's alignment
 * and the bytes left allow (none crosses a cache line, an aligned word is
 * one store); volatile, which the compiler neither merges into a memcpy
 * call nor reorders, each after all before it (ROSHM_DMA_ORDER). */
__attribute__((no_sanitize("address"))) static inline void roshm_dma_store(uint8_t *d, const uint8_t *s,
									    size_t n)
{
	while (n) {
		uintptr_t a = (uintptr_t)d;
		size_t k;

#if !defined(__x86_64__) && !defined(__i386__)
		ROSHM_DMA_ORDER();
#endif
		if (n >= 16 && !(a & 15)) {
			*(volatile roshm_dma_v16 *)d = *(const roshm_dma_v16 *)s;
			k = 16;
		} else if (n >= 8 && !(a & 7)) {
			*(volatile roshm_dma_u64 *)d = *(const roshm_dma_u64 *)s;
			k = 8;
		} else if (n >= 4 && !(a & 3)) {
			*(volatile roshm_dma_u32 *)d = *(const roshm_dma_u32 *)s;
			k = 4;
		} else if (n >= 2 && !(a & 1)) {
			*(volatile roshm_dma_u16 *)d = *(const roshm_dma_u16 *)s;
			k = 2;
		} else {
			*(volatile uint8_t *)d = *s;
			k = 1;
		}
		d += k;
		s += k;
		n -= k;
	}
}

/* @n bytes in any order, stores overlapping where it is cheaper (memcpy's
 * way): up to 48 inline, all loads before the stores; more by memcpy. */
__attribute__((no_sanitize("address"))) static inline void roshm_dma_bulk(uint8_t *d, const uint8_t *s,
									   size_t n)
{
	if (n > 48) {
		memcpy(d, s, n);
	} else if (n > 32) {
		roshm_dma_v16 a = *(const roshm_dma_v16 *)s, b = *(const roshm_dma_v16 *)(s + 16),
			      c = *(const roshm_dma_v16 *)(s + n - 16);

		*(roshm_dma_v16 *)d = a;
		*(roshm_dma_v16 *)(d + 16) = b;
		*(roshm_dma_v16 *)(d + n - 16) = c;
	} else if (n >= 16) {
		roshm_dma_v16 a = *(const roshm_dma_v16 *)s, b = *(const roshm_dma_v16 *)(s + n - 16);

		*(roshm_dma_v16 *)d = a;
		*(roshm_dma_v16 *)(d + n - 16) = b;
	} else if (n >= 8) {
		uint64_t a = *(const roshm_dma_u64 *)s, b = *(const roshm_dma_u64 *)(s + n - 8);

		*(roshm_dma_u64 *)d = a;
		*(roshm_dma_u64 *)(d + n - 8) = b;
	} else if (n >= 4) {
		uint32_t a = *(const roshm_dma_u32 *)s, b = *(const roshm_dma_u32 *)(s + n - 4);

		*(roshm_dma_u32 *)d = a;
		*(roshm_dma_u32 *)(d + n - 4) = b;
	} else {
		for (size_t i = 0; i < n; i++)
			d[i] = s[i];
	}
}

/*
 * A copy that ends a cache line ends with one store of the whole line where
 * the CPU has one (AVX-512): a 64-byte WRITE, the common small one, then
 * costs what memcpy's did (its own two stores of the same 64 bytes), where
 * 16-byte stores took a fifth off the poller's 64-byte WRITE rate
 * (local_write_64b_rate_vs_floor, roshm-perf all: 0.67 against 0.84).
 * x86-64 only, chosen at run time.
 */
#if defined(__x86_64__) && !defined(ROSHM_DMA_ASAN)
typedef uint8_t roshm_dma_v64 __attribute__((vector_size(64), aligned(1), may_alias));

__attribute__((target("avx512f"))) static inline void roshm_dma_line(uint8_t *d,
									      const uint8_t *s)
{
	*(volatile roshm_dma_v64 *)d = *(const roshm_dma_v64 *)s;
}

static inline int roshm_dma_have_line(void)
{
	static int have = -1;
	int h = __atomic_load_n(&have, __ATOMIC_RELAXED);

	if (h < 0) {
		h = __builtin_cpu_supports("avx512f") ? 1 : 0;
		__atomic_store_n(&have, h, __ATOMIC_RELAXED);
	}
	return h;
}
#define ROSHM_DMA_LINE 1
#endif

/*
 * Copy @n bytes from @src to @dst (not overlapping). The last store holds
 * the last byte and nothing of it is stored before: the whole last line
 * where the copy ends one and the CPU can (roshm_dma_line), else the 16
 * bytes that end the copy in one store when they lie in one cache line (a
 * store within a line becomes visible whole), else the last line's part of
 * them by roshm_dma_store. All the bytes before it first, in any order
 * (roshm_dma_bulk), then it (ROSHM_DMA_ORDER): an application that sees
 * the last byte sees all of them, and no store of the copy comes after.
 * Instrumentation would flag the bytes around an MR's buffer, which a NIC
 * reads and writes as it likes: not instrumented (under ASan, whose memcpy
 * checks, all of it goes by roshm_dma_store).
 */
__attribute__((no_sanitize("address"))) static inline void roshm_dma_copy(void *dst, const void *src,
									   size_t n)
{
	uint8_t *d = (uint8_t *)dst;
	const uint8_t *s = (const uint8_t *)src;

#ifdef ROSHM_DMA_ASAN
	roshm_dma_store(d, s, n);
#else
	uintptr_t last = (uintptr_t)d + n - 1;

	if (n < 16) {
		roshm_dma_store(d, s, n);
#ifdef ROSHM_DMA_LINE
	} else if (n >= 64 && (last & 63) == 63 && roshm_dma_have_line()) {
		roshm_dma_bulk(d, s, n - 64);
		ROSHM_DMA_ORDER();
		roshm_dma_line(d + n - 64, s + n - 64);
#endif
	} else if (!(((last - 15) ^ last) & ~(uintptr_t)63)) {
		roshm_dma_v16 fin = *(const roshm_dma_v16 *)(s + n - 16);

		roshm_dma_bulk(d, s, n - 16);
		ROSHM_DMA_ORDER();
		*(volatile roshm_dma_v16 *)(d + n - 16) = fin;
	} else {
		size_t tail = (size_t)(last & 63) + 1;   /* 1 .. 15 bytes of the last line */

		roshm_dma_bulk(d, s, n - tail);
		ROSHM_DMA_ORDER();
		roshm_dma_store(d + n - tail, s + n - tail, tail);
	}
#endif
}

#endif /* ROSHM_DMA_H */
