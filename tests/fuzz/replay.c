// SPDX-License-Identifier: MIT
/*
 * Replay driver: runs a fuzz target over every file of the directories (or
 * the files) named on the command line, in name order, without libFuzzer.
 * The first argument is the seed corpus and must hold at least one input (a
 * replay of nothing proves nothing); later ones, such as the crash
 * reproducers, may be absent or empty. A crash or a failed property aborts
 * the process, which fails the test; the input being run is printed first.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long n;

	if (!f) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
		fclose(f);
		return -1;
	}
	/* an exact-size heap copy: ASan sees any read past the input's end */
	buf = malloc(n ? (size_t)n : 1);
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		fprintf(stderr, "replay: %s: short read\n", path);
		free(buf);
		fclose(f);
		return -1;
	}
	fclose(f);
	fprintf(stderr, "replay: %s (%ld bytes)\n", path, n);
	LLVMFuzzerTestOneInput(buf, (size_t)n);
	free(buf);
	return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

/* Returns the number of inputs run, or -1. */
static int run_path(const char *path, int required)
{
	struct dirent **ents;
	struct stat st;
	int n, ran = 0;

	if (stat(path, &st)) {
		if (!required && errno == ENOENT)
			return 0;
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode))
		return run_file(path) ? -1 : 1;
	n = scandir(path, &ents, NULL, by_name);
	if (n < 0)
		return -1;
	for (int i = 0; i < n; i++) {
		char p[4096];

		if (ents[i]->d_name[0] != '.') {
			snprintf(p, sizeof(p), "%s/%s", path, ents[i]->d_name);
			if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) {
				if (run_file(p)) {
					ran = -1;
				} else if (ran >= 0) {
					ran++;
				}
			}
		}
		free(ents[i]);
	}
	free(ents);
	return ran;
}

int main(int argc, char **argv)
{
	int total = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR [MORE_DIRS_OR_FILES...]\n", argv[0]);
		return 2;
	}
	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	for (int i = 1; i < argc; i++) {
		int n = run_path(argv[i], i == 1);

		if (n < 0 || (i == 1 && n == 0)) {
			fprintf(stderr, "replay: %s: %s\n", argv[i], n < 0 ? "unreadable" : "no inputs");
			printf("replay: 0 passed, 1 failed\n");
			return 1;
		}
		printf("replay: %s: %d input(s)\n", argv[i], n);
		total += n;
	}
	printf("replay: %d passed, 0 failed\n", total);
	return 0;
}
