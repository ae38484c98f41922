/* SPDX-License-Identifier: MIT */
/*
 * The targets that drive roshmd's poller or control thread need an EAL
 * (rte_ring, timers). Started once per process, in memory only: no huge
 * pages, no PCI, one lcore, no telemetry; its runtime directory (named for
 * the test run, ROSHM_TEST_TAG, so check_leftovers sees a leak) is removed
 * at exit.
 */
#ifndef FUZZ_EAL_H
#define FUZZ_EAL_H

#include <stdint.h>

/* 0, or exits the process with a message. */
int fuzz_eal_init(const char *name);
/* A temporary directory of this process (created once, removed at exit). */
const char *fuzz_tmpdir(void);

struct rd_poller;
struct rd_region;
/* Region @id (@key, @epoch) of @data bytes with a log of @slots slots of
 * @slot_size, mapped between two inaccessible pages (a write or read past
 * it faults), its header as roshmd writes it, exported on @p's transport;
 * exits the process on failure. */
void fuzz_tcp_region(struct rd_poller *p, struct rd_region *rg, uint32_t id, uint64_t data,
		     uint32_t slots, uint32_t slot_size, uint32_t key, uint64_t epoch);

/* Take the poller's events (a region's peer gone, ...) off its ring. */
void fuzz_drain_events(struct rd_poller *p);

#endif
