// SPDX-License-Identifier: MIT
/*
 * The TSC frequency without DPDK's 100 ms sleep. The EAL asks
 * get_tsc_freq_arch() first (CPUID leaf 0x15, or Intel's platform MSR) and,
 * when that knows nothing (AMD, most VMs), measures the TSC against
 * CLOCK_MONOTONIC_RAW across a 100 ms nanosleep: a restarted roshmd's
 * clients would wait for it. The kernel has calibrated the TSC already and
 * publishes the conversion it uses in every perf event's mmap page
 * (time_mult, time_shift: ns = cycles * mult >> shift, exact while the TSC
 * is the clocksource and cap_user_time is set; not in a VM whose
 * sched_clock is paravirtual). Else it is measured as DPDK does, over 10 ms
 * instead of 100: each end is one TSC read on either side of a
 * clock_gettime (the tightest of 8 tries, so that a preemption in between
 * is not taken), which bounds the error by about 2 x 50 ns in 10 ms (1e-5;
 * DPDK rounds its own to 10 MHz, 0.3%). roshmd links the EAL statically
 * with --wrap=get_tsc_freq_arch (meson.build): the EAL's call lands here,
 * DPDK's own answer goes first, then the kernel's, then the measurement;
 * 0 (a clock that fails) lets the EAL measure, as before.
 */
#define _GNU_SOURCE
#include <linux/perf_event.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

uint64_t __real_get_tsc_freq_arch(void);
uint64_t __wrap_get_tsc_freq_arch(void);

static uint64_t kernel_tsc_hz(void)
{
	struct perf_event_attr a;
	long page = sysconf(_SC_PAGESIZE);
	uint64_t hz = 0;
	int fd;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_DUMMY;
	a.disabled = 1;
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return 0; /* perf events refused (paranoid, seccomp): the EAL measures */
	void *m = mmap(NULL, (size_t)page, PROT_READ, MAP_SHARED, fd, 0);

	if (m != MAP_FAILED) {
		const volatile struct perf_event_mmap_page *pg = m;

		for (int tries = 0; tries < 16; tries++) {
			uint32_t seq = pg->lock;

			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			int user_time = pg->cap_user_time; /* the fields hold the TSC conversion */
			uint32_t mult = pg->time_mult;
			uint16_t shift = pg->time_shift;

			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			if (pg->lock != seq || (seq & 1))
				continue;
			if (user_time && mult && shift < 64) {
				unsigned __int128 q = ((unsigned __int128)1000000000u << shift) / mult;

				hz = q > UINT64_MAX ? 0 : (uint64_t)q;
			}
			break;
		}
		munmap(m, (size_t)page);
	}
	close(fd);
	/* a sane TSC: 100 MHz .. 20 GHz */
	return hz >= 100000000ull && hz <= 20000000000ull ? hz : 0;
}

/* The TSC and CLOCK_MONOTONIC_RAW at one instant (*width: the TSC cycles
 * around the clock read): 0, or -1 when the clock fails. */
static int pair(uint64_t *tsc, uint64_t *ns, uint64_t *width_out)
{
	uint64_t width = UINT64_MAX;

	for (int i = 0; i < 8; i++) {
		struct timespec t;
		uint64_t a = __rdtsc();

		if (clock_gettime(CLOCK_MONOTONIC_RAW, &t))
			return -1;
		uint64_t b = __rdtsc();

		if (b - a < width) {
			width = b - a;
			*tsc = a + (b - a) / 2;
			*ns = (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
		}
	}
	*width_out = width;
	return 0;
}

static uint64_t measured_tsc_hz(void)
{
	struct timespec d = { .tv_nsec = 10000000 };
	uint64_t c0, n0, c1, n1, w0, w1;

	if (pair(&c0, &n0, &w0))
		return 0;
	nanosleep(&d, NULL);
	if (pair(&c1, &n1, &w1) || n1 <= n0 || c1 <= c0)
		return 0;
	/* each end is known to within half its bracket: more than 1/4000 of
	 * the interval (every try preempted, a slow clock source) and the EAL
	 * had better measure for itself */
	if ((w0 + w1) * 2000 > c1 - c0)
		return 0;
	uint64_t hz = (uint64_t)((unsigned __int128)(c1 - c0) * 1000000000u / (n1 - n0));

	return hz >= 100000000ull && hz <= 20000000000ull ? hz : 0;
}

uint64_t __wrap_get_tsc_freq_arch(void)
{
	uint64_t hz = __real_get_tsc_freq_arch();

	if (!hz)
		hz = kernel_tsc_hz();
	return hz ? hz : measured_tsc_hz();
}
