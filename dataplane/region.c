// SPDX-License-Identifier: MIT
/* Region memory: [header | txn staging log | data area], the owner's memfd. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include "roshmd.h"
#include "guard.h"

/*
 * Take the region memory its owner made (@fd, roshm_region_map_size()
 * bytes): checked and sealed (shm.c). A new region gets a fresh header and
 * slot states; with @reattach the memory comes back from an earlier roshmd
 * with its contents and log, and its header is checked (one copy, read
 * once: the owner may be rewriting it as we look).
 */
int rd_region_take(struct rd_region *rg, struct rd_guard *guard, int fd, uint64_t data_size,
		   uint32_t txn_slots, uint32_t slot_size, bool reattach)
{
	uint64_t data_off = roshm_region_data_off(txn_slots, slot_size);
	uint64_t want = roshm_region_map_size(data_size, txn_slots, slot_size);
	struct roshm_region_hdr *h, copy;
	size_t size;
	void *map;
	bool huge;
	int ret;

	if (data_size > (1ull << 40) || (uint64_t)txn_slots * slot_size > (1ull << 32))
		return -EINVAL;
	ret = rd_memfd_take(fd, want, RD_MEM_NO_POPULATE | (reattach ? RD_MEM_SEALED_OK : 0), &map,
			    &size, &huge);
	if (ret)
		return ret;
	/* Watched before anything of ours touches it (populate included). */
	rg->tampered = false;
	rg->guard = NULL;
	if (guard) {
		ret = rd_guard_add(guard, map, size, &rg->tampered);
		if (ret) {
			munmap(map, size);
			return ret;
		}
		rg->guard = guard;
	}
	ret = rd_memfd_populate(fd, map, size);
	if (ret) {
		if (rg->guard)
			rd_guard_remove(rg->guard, map);
		rg->guard = NULL;
		munmap(map, size);
		return ret;
	}
	h = map;
	if (reattach) {
		memcpy(&copy, h, sizeof(copy));
		__asm__ volatile("" ::: "memory");
		if (copy.magic != ROSHM_REGION_MAGIC || copy.data_size != data_size ||
		    copy.data_off != data_off || copy.txn_slots != txn_slots ||
		    copy.slot_size != slot_size || copy.txn_log_off != ROSHM_REGION_HDR_SIZE) {
			if (rg->guard)
				rd_guard_remove(rg->guard, map);
			rg->guard = NULL;
			munmap(map, size);
			return -EINVAL;
		}
		/* the memory keeps its contents and its log; the epoch is new */
		rg->mem_id = copy.mem_id;
		rg->grant_key = copy.grant_key;
		while (!rg->grant_key) /* a header without one (ABI < 5) */
			if (getrandom(&rg->grant_key, sizeof(rg->grant_key), 0) != sizeof(rg->grant_key))
				rg->grant_key = rg->epoch ^ (uint64_t)(uintptr_t)rg;
		h->grant_key = rg->grant_key;
		rg->applied = copy.txn_applied;
		h->epoch = rg->epoch;
	} else {
		memset(h, 0, sizeof(*h));
		h->magic = ROSHM_REGION_MAGIC;
		h->abi_version = ROSHM_ABI_VERSION;
		h->epoch = rg->epoch;
		h->data_size = data_size;
		h->data_off = data_off;
		h->txn_slots = txn_slots;
		h->slot_size = slot_size;
		h->txn_log_off = ROSHM_REGION_HDR_SIZE;
		if (getrandom(&rg->mem_id, sizeof(rg->mem_id), 0) != sizeof(rg->mem_id))
			rg->mem_id = (uint64_t)(uintptr_t)rg ^ rg->epoch;
		h->mem_id = rg->mem_id;
		do
			if (getrandom(&rg->grant_key, sizeof(rg->grant_key), 0) != sizeof(rg->grant_key))
				rg->grant_key = rg->epoch ^ (uint64_t)(uintptr_t)rg ^ rg->mem_id;
		while (!rg->grant_key);
		h->grant_key = rg->grant_key;
		for (uint32_t i = 0; i < txn_slots; i++) {
			struct roshm_txn_slot *sl = (void *)((uint8_t *)map + ROSHM_REGION_HDR_SIZE +
							     (uint64_t)i * slot_size);

			memset(sl, 0, ROSHM_TXN_STAGE_OFF);
			sl->state = ROSHM_TXN_STATE(i, ROSHM_TXN_EMPTY);
		}
		rg->applied = 0;
	}
	rg->fd = -1; /* the mapping is all we keep; the owner holds the memfd */
	rg->map = map;
	rg->map_size = size;
	rg->hugetlb = huge;
	rg->data = (uint8_t *)map + data_off;
	rg->data_size = data_size;
	rg->txn_slots = txn_slots;
	rg->slot_size = slot_size;
	rg->data_off = data_off;
	/* Owner side of one-round-trip commits: without it (no memory) an
	 * attempt sent again is looked for in the log only. Re-attached, it
	 * starts from the outcomes the log still holds (the last roshmd's
	 * record of them died with it). */
	rg->txn_ids = txn_slots ? calloc(1, sizeof(*rg->txn_ids)) : NULL;
	if (rg->txn_ids)
		rd_txn_ids_from_log(rg, reattach ? copy.txn_tail : 0);
	return 0;
}

void rd_region_free(struct rd_region *rg)
{
	if (rg->map && rg->guard)
		rd_guard_remove(rg->guard, rg->map);
	rg->guard = NULL;
	/* Its owner punched holes and our touches filled them: those pages
	 * are charged to us for as long as the owner keeps the memfd. Punch
	 * the whole region out (the owner was disconnected for it). */
	if (rg->map && __atomic_load_n(&rg->tampered, __ATOMIC_ACQUIRE))
		madvise(rg->map, rg->map_size, MADV_REMOVE);
	if (rg->map)
		munmap(rg->map, rg->map_size);
	if (rg->fd >= 0)
		close(rg->fd);
	rg->map = NULL;
	rg->fd = -1;
	free(rg->txn_ids);
	rg->txn_ids = NULL;
}
