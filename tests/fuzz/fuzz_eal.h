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

/* 0, or exits the process with a message. */
int fuzz_eal_init(const char *name);
/* A temporary directory of this process (created once, removed at exit). */
const char *fuzz_tmpdir(void);

#endif
