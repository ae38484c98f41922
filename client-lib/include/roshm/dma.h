/* SPDX-License-Identifier: MIT */
/*
 * How the bytes of a WRITE (and of a READ's answer) land in memory an
 * application may be watching: in ascending address order, each byte stored
 * exactly once, as a NIC's DMA writes them. Used by roshmd wherever it puts
 * a payload into a region or a client's buffer (tcp, local, transactions)
 * and by libroshm-verbs where it copies into an application's MR.
 *
 * Applications poll the last byte of a buffer to learn that all of it has
 * arrived (perftest's ib_write_lat, rdma-core's riostream), and some then
 * write that byte themselves for their next round. memcpy promises neither
 * order nor a single store: glibc's for 64 to 128 bytes stores the first 64
 * and then the last 64, which for exactly 64 bytes are the same 64, so the
 * application can see the last byte after the first store, write its own,
 * and have the second store put the old one back (riostream then waits
 * forever). Not a memcpy: the ranges must not overlap.
 */
#ifndef ROSHM_DMA_H
#define ROSHM_DMA_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The last bytes of a copy land one store at a time, after all the others. */
#define ROSHM_DMA_TAIL 64

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

/*
 * Copy @n bytes from @src to @dst (not overlapping). All but the last
 * ROSHM_DMA_TAIL bytes go first, by memcpy (as fast as it goes, in its own
 * order: all of them are in place before the tail's first store, a
 * release); then the tail from its first byte to its last, each byte once,
 * in stores a DMA engine would make: the largest of 16, 8, 4, 2, 1 bytes
 * that the destination's alignment and the bytes left allow, so none
 * crosses a cache line and an aligned word is one store. Volatile stores,
 * which the compiler neither merges into a memcpy call nor reorders, each
 * a release: on any CPU the last byte lands last and once.
 * Instrumentation would flag the bytes around an MR's buffer, which a NIC
 * reads and writes as it likes: not instrumented (under ASan, whose memcpy
 * checks, all of it goes the tail's way).
 */
__attribute__((no_sanitize("address"))) static inline void roshm_dma_copy(void *dst, const void *src,
									   size_t n)
{
	uint8_t *d = (uint8_t *)dst;
	const uint8_t *s = (const uint8_t *)src;

#ifndef ROSHM_DMA_ASAN
	if (n > ROSHM_DMA_TAIL) {
		memcpy(d, s, n - ROSHM_DMA_TAIL);
		d += n - ROSHM_DMA_TAIL;
		s += n - ROSHM_DMA_TAIL;
		n = ROSHM_DMA_TAIL;
	}
#endif
	while (n) {
		uintptr_t a = (uintptr_t)d;
		size_t k;

		__atomic_thread_fence(__ATOMIC_RELEASE);
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

#endif /* ROSHM_DMA_H */
