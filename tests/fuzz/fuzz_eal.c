// SPDX-License-Identifier: MIT
#define _GNU_SOURCE
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include <sys/mman.h>

#include "roshmd.h"
#include "transport/transport.h"
#include "fuzz_eal.h"

static char prefix[128], tmp[128];

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static void cleanup(void)
{
	char dir[256];

	rte_eal_cleanup();
	snprintf(dir, sizeof(dir), "%s/dpdk/%s", getuid() ? (getenv("XDG_RUNTIME_DIR") ?: "/tmp") :
		 "/var/run", prefix);
	nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
	if (tmp[0])
		nftw(tmp, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

int fuzz_eal_init(const char *name)
{
	const char *tag = getenv("ROSHM_TEST_TAG");
	/* FUZZ_LOG_LEVEL=info shows what roshmd made of an input */
	char level[32];
	char *argv[] = { "fuzz", "--no-huge", "-m", "64", "--no-pci", "--no-shconf", "-l", "0",
			 "--no-telemetry", "--log-level", level, "--file-prefix", prefix, NULL };

	snprintf(level, sizeof(level), "*:%s", getenv("FUZZ_LOG_LEVEL") ?: "error");

	snprintf(prefix, sizeof(prefix), "%s-fuzz-%s-%d", tag ? tag : "manual", name, (int)getpid());
	if (rte_eal_init((int)(sizeof(argv) / sizeof(argv[0])) - 1, argv) < 0) {
		fprintf(stderr, "fuzz: EAL init: %s\n", rte_strerror(rte_errno));
		exit(1);
	}
	atexit(cleanup);
	return 0;
}

const char *fuzz_tmpdir(void)
{
	if (!tmp[0]) {
		const char *tag = getenv("ROSHM_TEST_TAG");

		snprintf(tmp, sizeof(tmp), "/tmp/roshm-test-%s-fuzz-XXXXXX", tag ? tag : "manual");
		if (!mkdtemp(tmp)) {
			perror("fuzz: mkdtemp");
			exit(1);
		}
	}
	return tmp;
}

void fuzz_tcp_region(struct rd_poller *p, struct rd_region *rg, uint32_t id, uint64_t data,
		     uint32_t slots, uint32_t slot_size, uint32_t key, uint64_t epoch)
{
	const size_t page = 4096;
	size_t map_size = roshm_region_map_size(data, slots, slot_size);
	uint8_t *mem = mmap(NULL, map_size + 2 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t *map = mem + page;
	struct roshm_region_hdr *h = (void *)map;

	if (mem == MAP_FAILED || mprotect(map, map_size, PROT_READ | PROT_WRITE))
		abort();
	h->magic = ROSHM_REGION_MAGIC;
	h->abi_version = ROSHM_ABI_VERSION;
	h->epoch = epoch;
	h->data_size = data;
	h->data_off = roshm_region_data_off(slots, slot_size);
	h->txn_slots = slots;
	h->slot_size = slot_size;
	h->txn_log_off = ROSHM_REGION_HDR_SIZE;
	h->mem_id = 42;
	memset(rg, 0, sizeof(*rg));
	rg->id = id;
	rg->key = key;
	rg->epoch = epoch;
	rg->map = map;
	rg->map_size = map_size;
	rg->data = map + h->data_off;
	rg->data_size = data;
	rg->data_off = h->data_off;
	rg->txn_slots = slots;
	rg->slot_size = slot_size;
	rg->tidx = 0;
	rg->xport = p->net;
	rg->txn_ids = calloc(1, sizeof(*rg->txn_ids)); /* one-round-trip commits' outcomes */
	if (!rg->txn_ids)
		abort();
	p->net->dp->export(p->net, rg, true);
}

void fuzz_drain_events(struct rd_poller *p)
{
	struct rd_event ev;

	while (rte_ring_sc_dequeue_elem(p->ev_ring, &ev, sizeof(ev)) == 0)
		;
}
