// SPDX-License-Identifier: MIT
/* Region memory: [header | txn staging log | data area], sealed memfd. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "roshmd.h"

int rd_region_alloc(struct rd_region *rg, uint64_t data_size, uint32_t txn_slots,
		    uint32_t slot_size, enum rd_hugepages huge)
{
	uint64_t log_size = (uint64_t)txn_slots * slot_size;
	uint64_t data_off = roshm_region_data_off(txn_slots, slot_size);
	size_t size;
	struct roshm_region_hdr *h;
	int fd;

	if (data_size > (1ull << 40) || log_size > (1ull << 32))
		return -EINVAL;
	size = (size_t)(data_off + data_size);
	fd = rd_memfd_create("roshm-region", &size, huge, &rg->hugetlb);
	if (fd < 0)
		return fd;
	rg->map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (rg->map == MAP_FAILED) {
		int e = -errno;

		close(fd);
		return e;
	}
	rg->fd = fd;
	rg->map_size = size;
	h = rg->map;
	memset(h, 0, sizeof(*h));
	h->magic = ROSHM_REGION_MAGIC;
	h->abi_version = ROSHM_ABI_VERSION;
	h->epoch = rg->epoch;
	h->data_size = data_size;
	h->data_off = data_off;
	h->txn_slots = txn_slots;
	h->slot_size = slot_size;
	h->txn_log_off = ROSHM_REGION_HDR_SIZE;
	if (getrandom(&h->mem_id, sizeof(h->mem_id), 0) != sizeof(h->mem_id))
		h->mem_id = (uint64_t)(uintptr_t)rg ^ rg->epoch;
	rg->mem_id = h->mem_id;
	for (uint32_t i = 0; i < txn_slots; i++) {
		struct roshm_txn_slot *sl = (void *)((uint8_t *)rg->map + ROSHM_REGION_HDR_SIZE +
						     (uint64_t)i * slot_size);

		sl->state = ROSHM_TXN_STATE(i, ROSHM_TXN_EMPTY);
	}
	rg->txn_slots = txn_slots;
	rg->slot_size = slot_size;
	rg->data_off = data_off;
	rg->data = (uint8_t *)rg->map + data_off;
	rg->data_size = data_size;
	return 0;
}

void rd_region_free(struct rd_region *rg)
{
	if (rg->map)
		munmap(rg->map, rg->map_size);
	if (rg->fd >= 0)
		close(rg->fd);
	rg->map = NULL;
	rg->fd = -1;
}

int rd_region_adopt(struct rd_region *rg, int fd, uint64_t data_size, uint32_t txn_slots,
		    uint32_t slot_size)
{
	uint64_t data_off = roshm_region_data_off(txn_slots, slot_size);
	int seals = fcntl(fd, F_GET_SEALS);
	struct roshm_region_hdr *h;
	struct stat st;
	void *map;

	/* It must not be able to shrink or grow under us, and we must write it. */
	if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW) ||
	    (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)))
		return -EINVAL;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size < data_off + data_size ||
	    (uint64_t)st.st_size > data_off + data_size + (2u << 20))
		return -EINVAL;
	map = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (map == MAP_FAILED)
		return -errno;
	h = map;
	if (h->magic != ROSHM_REGION_MAGIC || h->data_size != data_size || h->data_off != data_off ||
	    h->txn_slots != txn_slots || h->slot_size != slot_size ||
	    h->txn_log_off != ROSHM_REGION_HDR_SIZE || h->txn_applied > h->txn_tail) {
		munmap(map, (size_t)st.st_size);
		return -EINVAL;
	}
	/* the memory keeps its contents and its log; the epoch is new */
	h->epoch = rg->epoch;
	rg->mem_id = h->mem_id;
	rg->fd = fd;
	rg->map = map;
	rg->map_size = (size_t)st.st_size;
	rg->hugetlb = st.st_blksize >= (2 << 20);
	rg->data = (uint8_t *)map + data_off;
	rg->data_size = data_size;
	rg->txn_slots = txn_slots;
	rg->slot_size = slot_size;
	rg->data_off = data_off;
	return 0;
}
