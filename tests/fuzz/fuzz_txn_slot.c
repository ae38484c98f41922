// SPDX-License-Identifier: MIT
/*
 * The owner side's apply of a committed transaction slot
 * (dataplane/poller/txn_owner.c rd_txn_slot_apply): the slot lives in region memory its
 * owner (and every writer) can scribble on; roshmd copies it once into a
 * private buffer, checks it (sequence, segment count, lengths, bounds, crc)
 * and applies the copy to the data area under the region's seqlock.
 *
 * Input: a control byte, 2 bytes of data size (1..4096), 2 bytes of slot
 * size (128..4096, rounded down to 8), then the slot's bytes from its
 * staged part on (seq, txn_id, nseg, payload_len, crc, rsvd, segments,
 * payload).
 *   bit 0  fix the sequence to the one applied (else the input's)
 *   bit 1  fix the crc to the right one (the fuzzer cannot find crc32c
 *          values; this lets it reach the apply)
 * The region is mapped with an inaccessible page on either side, so that a
 * read or write past it faults.
 * Properties: a record is applied only when it is valid (checked here
 * independently: segments in bounds, lengths that add up, the right crc);
 * then the data area holds exactly what a shadow copy says, and nothing else
 * of the mapping (header but its seqlock, which ends even, the slot) moved.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <rte_hash_crc.h>

#include "fuzz.h"
#include "roshmd.h"
#include "poller/txn.h"

#define SEQ 12345u

/* crc32c of @len bytes at any alignment, as roshmd computes it */
static uint32_t crc_bytes(const uint8_t *p, size_t len, uint32_t crc)
{
	for (; len; p++, len--)
		crc = rte_hash_crc_1byte(*p, crc);
	return crc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const size_t page = 4096;
	struct roshm_txn_slot *sl, fixed;
	struct rd_region rg;
	uint32_t data_size, slot_size, len, cap = 8192;
	uint8_t *mem, *map, *before, *shadow, *buf;
	size_t map_size, staged;
	bool valid = true;
	uint64_t sum = 0;

	if (size < 5)
		return 0;
	data_size = 1 + (((uint32_t)data[1] | (uint32_t)data[2] << 8) % 4096);
	slot_size = 128 + (((uint32_t)data[3] | (uint32_t)data[4] << 8) % (4096 - 128 + 1));
	slot_size &= ~7u;
	map_size = (ROSHM_REGION_HDR_SIZE + slot_size + data_size + page - 1) & ~(page - 1);
	mem = mmap(NULL, map_size + 2 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		abort();
	map = mem + page;
	if (mprotect(map, map_size, PROT_READ | PROT_WRITE))
		abort();
	/* the data area ends where the guard page starts */
	uint8_t *d = map + map_size - data_size;
	struct roshm_region_hdr *h = (void *)map;

	memset(map, 0xa5, map_size);
	memset(h, 0, sizeof(*h));
	h->seqlock = 6;
	sl = (void *)(map + ROSHM_REGION_HDR_SIZE);
	staged = size - 5 < slot_size - ROSHM_TXN_STAGE_OFF ? size - 5 : slot_size - ROSHM_TXN_STAGE_OFF;
	memcpy((uint8_t *)sl + ROSHM_TXN_STAGE_OFF, data + 5, staged);
	memcpy(&fixed, sl, sizeof(fixed));
	if (data[0] & 1)
		fixed.seq = SEQ;
	memcpy(sl, &fixed, sizeof(fixed));
	/* what a valid record of this slot is, found here on our own */
	uint64_t hdr = sizeof(fixed) + (uint64_t)fixed.nseg * sizeof(struct roshm_txn_seg);
	uint64_t total = hdr + fixed.payload_len;

	if (fixed.seq != SEQ || fixed.nseg > ROSHM_TXN_MAX_SEGS || total > slot_size) {
		valid = false;
	} else {
		for (uint32_t i = 0; i < fixed.nseg; i++) {
			if (sl->seg[i].off > data_size || sl->seg[i].len > data_size - sl->seg[i].off)
				valid = false;
			sum += sl->seg[i].len;
		}
		if (sum != fixed.payload_len)
			valid = false;
	}
	if (valid) {
		const uint8_t *st = (const uint8_t *)sl + ROSHM_TXN_STAGE_OFF;
		uint32_t crc = crc_bytes(st, 24, 0xffffffffu);

		crc = crc_bytes(st + 28, (size_t)(total - ROSHM_TXN_STAGE_OFF - 28), crc);
		if (data[0] & 2)
			sl->crc = crc;
		if (sl->crc != crc)
			valid = false;
	}
	before = malloc(map_size);
	shadow = malloc(data_size);
	buf = malloc(cap);
	if (!before || !shadow || !buf)
		abort();
	memcpy(before, map, map_size);
	memcpy(shadow, d, data_size);
	if (valid) {
		const uint8_t *src = (const uint8_t *)&sl->seg[sl->nseg];

		for (uint32_t i = 0; i < sl->nseg; i++) {
			memcpy(shadow + sl->seg[i].off, src, sl->seg[i].len);
			src += sl->seg[i].len;
		}
	}
	memset(&rg, 0, sizeof(rg));
	rg.map = map;
	rg.map_size = map_size;
	rg.data = d;
	rg.data_size = data_size;
	rg.txn_slots = 1;
	rg.slot_size = slot_size;
	rg.data_off = (uint64_t)(d - map);
	len = rd_txn_slot_apply(&rg, sl, SEQ, buf, cap);
	if (!valid && len)
		fuzz_fail("an invalid record was applied (%u bytes)", len);
	if (valid && len != total)
		fuzz_fail("a valid record of %llu bytes was not applied (%u)",
			  (unsigned long long)total, len);
	if (memcmp(d, shadow, data_size))
		fuzz_fail("the data area differs from what the record says");
	/* the rest of the mapping did not move, but the seqlock (even again) */
	if (len) {
		if (h->seqlock != 8)
			fuzz_fail("seqlock %llu after one apply from 6", (unsigned long long)h->seqlock);
		h->seqlock = 6;
	}
	if (memcmp(map, before, map_size - data_size))
		fuzz_fail("the apply wrote outside the data area");
	free(before);
	free(shadow);
	free(buf);
	munmap(mem, map_size + 2 * page);
	return 0;
}
