/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer targets: each file defines LLVMFuzzerTestOneInput for one parser
 * of untrusted input. Built with clang -fsanitize=fuzzer by `make fuzz`, and
 * with replay.c (a plain main) by every build, so that `make test` replays
 * the checked-in corpus and every committed crash reproducer.
 *
 * A target must be deterministic in what it checks, fast (no sleeps),
 * leak-free and must not need an EAL. It calls fuzz_fail() when a property
 * it checks does not hold, which both drivers count as a crash.
 */
#ifndef FUZZ_H
#define FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Optional, once before the first input (both drivers call it). */
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define fuzz_fail(...)                                                   \
	do {                                                             \
		fprintf(stderr, "%s:%d: property failed: ", __FILE__, __LINE__); \
		fprintf(stderr, __VA_ARGS__);                            \
		fputc('\n', stderr);                                     \
		abort();                                                 \
	} while (0)

#endif
