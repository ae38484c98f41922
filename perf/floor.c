// SPDX-License-Identifier: MIT
/*
 * Baselines on the same two cores as the client (main lcore) and roshmd's
 * poller (the worker lcore, which the poller leaves while it sleeps):
 *
 *  - the floor: what any shared-memory service must do for a WRITE, and
 *    nothing else. The client's core writes the payload into a buffer slot
 *    and sends a 64-byte descriptor (an SQE's size) through an SPSC
 *    rte_ring; the other core copies the payload out of that buffer, which
 *    the first core just wrote, into a destination, and sends a 32-byte
 *    completion (a CQE's size) back through another ring. Both sides move
 *    descriptors and completions in bursts. At 64 B this is the message-rate
 *    floor; at 4 KiB .. 1 MiB it is a cross-core copy (the consumer copies
 *    buffers the producer just wrote); one at a time, it is the latency floor.
 *  - references kept from the first yardsticks: an rte_ring ping-pong of
 *    8-byte pointers, bursts of pointers, and memcpy on one core (L1/L2-hot).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <rte_cycles.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_pause.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "perf.h"

/* what the descriptor ring carries: the size of an SQE */
struct floor_desc {
	uint8_t op;
	uint8_t flags;
	uint16_t rsvd;
	uint32_t len;
	uint64_t src_off;
	uint64_t dst_off;
	uint64_t user_data;
	uint64_t pad[4];
};
/* and the completion ring: the size of a CQE */
struct floor_cpl {
	uint64_t user_data;
	int32_t status;
	uint32_t flags;
	uint64_t result;
	uint64_t rsvd;
};
_Static_assert(sizeof(struct floor_desc) == sizeof(struct roshm_sqe), "descriptor is an SQE's size");
_Static_assert(sizeof(struct floor_cpl) == sizeof(struct roshm_cqe), "completion is a CQE's size");

#define FLOOR_RING 1024
#define FLOOR_BURST 32
#define FLOOR_FLUSH_BYTES (64u << 10)

static struct rte_ring *ring_a, *ring_b;   /* 8-byte pointers */
static struct rte_ring *ring_d, *ring_c;   /* descriptors, completions */
static volatile int worker_stop;
static const uint8_t *f_src;
static uint8_t *f_dst;

void floor_init(void)
{
	ring_a = rte_ring_create("perf_a", 1024, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
	ring_b = rte_ring_create("perf_b", 1024, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
	ring_d = rte_ring_create_elem("perf_d", sizeof(struct floor_desc), FLOOR_RING, SOCKET_ID_ANY,
				      RING_F_SP_ENQ | RING_F_SC_DEQ);
	ring_c = rte_ring_create_elem("perf_c", sizeof(struct floor_cpl), FLOOR_RING, SOCKET_ID_ANY,
				      RING_F_SP_ENQ | RING_F_SC_DEQ);
	if (!ring_a || !ring_b || !ring_d || !ring_c || worker >= RTE_MAX_LCORE)
		die("rte_ring for the baselines", -ENOMEM);
}

/* ---- the floor ---- */

/* The producer never has more in flight than the ring holds: this never
 * waits for long. */
static void post(const struct floor_cpl *c, unsigned n)
{
	for (unsigned done = 0; done < n;)
		done += rte_ring_sp_enqueue_burst_elem(ring_c, c + done, sizeof(c[0]), n - done, NULL);
}

static int floor_consumer(void *arg)
{
	struct floor_desc d[FLOOR_BURST];
	struct floor_cpl c[FLOOR_BURST];

	(void)arg;
	while (!worker_stop) {
		unsigned n = rte_ring_sc_dequeue_burst_elem(ring_d, d, sizeof(d[0]), FLOOR_BURST, NULL);

		if (!n) {
			rte_pause();
			continue;
		}
		unsigned from = 0;
		uint64_t bytes = 0;

		for (unsigned i = 0; i < n; i++) {
			memcpy(f_dst + d[i].dst_off, f_src + d[i].src_off, d[i].len);
			c[i] = (struct floor_cpl){ .user_data = d[i].user_data, .result = d[i].len };
			bytes += d[i].len;
			/* Completions go back once a burst's worth of bytes is
			 * copied, not only at the end of the burst: the producer
			 * refills those buffers while the rest is copied. */
			if (bytes >= FLOOR_FLUSH_BYTES || i == n - 1) {
				post(c + from, i + 1 - from);
				from = i + 1;
				bytes = 0;
			}
		}
	}
	return 0;
}

bool floor_huge;
static size_t f_src_size, f_dst_size;

/* The floor's buffers are the same kind of memory as roshm's: the source
 * (the arena's part) on 2 MiB pages when roshm's channel got them (else a
 * copy of 1 MiB buffers would pay TLB misses roshm does not), the
 * destination (a region's part) on 4 KiB pages, as libroshm makes regions. */
static void *buf_alloc(size_t *size, bool huge)
{
	const size_t hp = 2u << 20;
	void *m = MAP_FAILED;

	if (huge) {
		size_t sz = (*size + hp - 1) & ~(hp - 1);

		m = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB,
			 -1, 0);
		if (m != MAP_FAILED)
			*size = sz;
	}
	if (m == MAP_FAILED) {
		*size = (*size + 4095) & ~(size_t)4095;
		m = mmap(NULL, *size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	}
	if (m == MAP_FAILED)
		die("floor buffers", -ENOMEM);
	return m;
}

static void floor_start(uint32_t len, unsigned depth, unsigned ndst, uint8_t **src)
{
	f_src_size = (size_t)depth * len;
	f_dst_size = (size_t)ndst * len;
	*src = buf_alloc(&f_src_size, floor_huge);
	f_dst = buf_alloc(&f_dst_size, false);
	memset(*src, 1, f_src_size);
	memset(f_dst, 2, f_dst_size);
	f_src = *src;
	worker_stop = 0;
	rte_eal_remote_launch(floor_consumer, NULL, worker);
}

static void floor_stop(uint8_t *src)
{
	worker_stop = 1;
	rte_eal_wait_lcore(worker);
	munmap(src, f_src_size);
	munmap(f_dst, f_dst_size);
	f_dst = NULL;
}

static unsigned ndst_of(uint32_t len, unsigned depth)
{
	uint64_t n = REGION / len;

	if (n > depth)
		n = depth;
	return n ? (unsigned)n : 1;
}

double floor_run(const struct wopts *o, uint64_t *ops)
{
	unsigned depth = o->depth > FLOOR_RING - 1 ? FLOOR_RING - 1 : o->depth;
	unsigned batch = o->batch && o->batch < depth ? o->batch : depth;
	unsigned ndst = ndst_of(o->len, depth);
	struct floor_desc d[256];
	struct floor_cpl c[64];
	uint64_t seq = 0, done = 0, inflight = 0, t0, end;
	uint8_t *src;

	if (batch > 256)
		batch = 256;
	floor_start(o->len, depth, ndst, &src);
	t0 = rte_rdtsc();
	end = t0 + (uint64_t)(o->seconds * (double)hz);
	while (rte_rdtsc() < end || !done) {
		unsigned n = 0;

		if (!o->lockstep || !inflight)
			while (inflight + n < depth && n < batch) {
				unsigned slot = (unsigned)(seq % depth);

				memset(src + (size_t)slot * o->len, (int)(seq & 0xff), o->len);
				d[n] = (struct floor_desc){ .op = ROSHM_OP_WRITE, .len = o->len,
							    .src_off = (uint64_t)slot * o->len,
							    .dst_off = (seq % ndst) * o->len,
							    .user_data = seq };
				seq++;
				n++;
			}
		if (n) {
			for (unsigned k = 0; k < n;)
				k += rte_ring_sp_enqueue_burst_elem(ring_d, d + k, sizeof(d[0]), n - k, NULL);
			inflight += n;
		}
		unsigned got = rte_ring_sc_dequeue_burst_elem(ring_c, c, sizeof(c[0]), 64, NULL);

		inflight -= got;
		done += got;
	}
	uint64_t t1 = rte_rdtsc();

	while (inflight)
		inflight -= rte_ring_sc_dequeue_burst_elem(ring_c, c, sizeof(c[0]), 64, NULL);
	floor_stop(src);
	if (ops)
		*ops = done;
	return (double)done * o->len / ((double)(t1 - t0) / (double)hz);
}

void floor_lat(uint32_t len, size_t iters, uint64_t *samples)
{
	struct floor_desc d;
	struct floor_cpl c;
	uint8_t *src;

	floor_start(len, 1, 1, &src);
	for (size_t i = 0; i < iters + 100; i++) {
		uint64_t t0 = rte_rdtsc_precise();

		memset(src, (int)(i & 0xff), len);
		d = (struct floor_desc){ .op = ROSHM_OP_WRITE, .len = len, .user_data = i };
		while (rte_ring_sp_enqueue_elem(ring_d, &d, sizeof(d)))
			;
		while (rte_ring_sc_dequeue_elem(ring_c, &c, sizeof(c)))
			;
		if (i >= 100)
			samples[i - 100] = rte_rdtsc_precise() - t0;
	}
	floor_stop(src);
}

/* ---- references ---- */

static int pong_worker(void *arg)
{
	void *obj;

	(void)arg;
	while (!worker_stop)
		if (rte_ring_sc_dequeue(ring_a, &obj) == 0)
			while (rte_ring_sp_enqueue(ring_b, obj))
				;
	return 0;
}

double ring_pingpong_rtt_ns(size_t iters, uint64_t *samples)
{
	void *obj;

	worker_stop = 0;
	rte_eal_remote_launch(pong_worker, NULL, worker);
	for (size_t i = 0; i < iters + 1000; i++) {
		uint64_t t0 = rte_rdtsc_precise();

		rte_ring_sp_enqueue(ring_a, (void *)(uintptr_t)(i + 1));
		while (rte_ring_sc_dequeue(ring_b, &obj))
			;
		if (i >= 1000)
			samples[i - 1000] = rte_rdtsc_precise() - t0;
	}
	worker_stop = 1;
	rte_eal_wait_lcore(worker);
	return lat_of(samples, iters).typical * 1000;
}

static volatile uint64_t burst_consumed;

static int burst_consumer(void *arg)
{
	void *objs[32];
	uint64_t n = 0;

	(void)arg;
	while (!worker_stop)
		n += rte_ring_sc_dequeue_burst(ring_a, objs, 32, NULL);
	burst_consumed = n;
	return 0;
}

double ring_burst_rate(double seconds)
{
	void *objs[32];
	uint64_t end, produced = 0, t0;
	void *drain;

	for (int i = 0; i < 32; i++)
		objs[i] = (void *)(uintptr_t)(i + 1);
	worker_stop = 0;
	rte_eal_remote_launch(burst_consumer, NULL, worker);
	t0 = rte_rdtsc();
	end = t0 + (uint64_t)(seconds * (double)hz);
	while (rte_rdtsc() < end)
		produced += rte_ring_sp_enqueue_burst(ring_a, objs, 32, NULL);
	uint64_t t1 = rte_rdtsc();

	worker_stop = 1;
	rte_eal_wait_lcore(worker);
	while (rte_ring_sc_dequeue(ring_a, &drain) == 0)
		;
	return (double)produced / ((double)(t1 - t0) / (double)hz);
}

double memcpy_bw(size_t size, double seconds)
{
	uint8_t *src = aligned_alloc(4096, size), *dst = aligned_alloc(4096, size);
	uint64_t t0, end, n = 0;

	if (!src || !dst)
		die("memcpy buffers", -ENOMEM);
	memset(src, 1, size);
	memset(dst, 2, size);
	t0 = rte_rdtsc();
	end = t0 + (uint64_t)(seconds * (double)hz);
	while (rte_rdtsc() < end) {
		memcpy(dst, src, size);
		__asm__ volatile("" ::: "memory");
		n++;
	}
	double bw = (double)n * (double)size / ((double)(rte_rdtsc() - t0) / (double)hz);

	free(src);
	free(dst);
	return bw;
}
