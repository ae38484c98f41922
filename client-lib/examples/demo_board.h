/* SPDX-License-Identifier: MIT */
/* Layout of the demo's shared "board" region. */
#ifndef DEMO_BOARD_H
#define DEMO_BOARD_H
#include <stdint.h>

#define BOARD_NAME "board"
#define BOARD_RECORDS 16
#define BOARD_REC_SIZE 64

struct board {
	uint64_t count;        /* bumped with FETCH_ADD after each record */
	uint64_t done;         /* set with COMPARE_SWAP 0 -> writer pid */
	uint8_t pad[48];
	char rec[BOARD_RECORDS][BOARD_REC_SIZE];
};
#endif
