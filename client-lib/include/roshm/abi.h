/* SPDX-License-Identifier: MIT */
/*
 * roshm shared-memory ABI: channel header, SPSC rings, SQE/CQE, region header.
 *
 * This header is the one definition shared by libroshm and roshmd. Every
 * struct here lives in memory that both sides map; fixed-width types,
 * explicit padding and static asserts pin the layout. Bump ROSHM_ABI_VERSION
 * on any change.
 */
#ifndef ROSHM_ABI_H
#define ROSHM_ABI_H

#include <stdint.h>
#include <stddef.h>

/* The layout checks, in C and in C++ (roshm.h is usable from both). */
#ifdef __cplusplus
#define ROSHM_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#define ROSHM_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif

#define ROSHM_ABI_VERSION 9u
#define ROSHM_CHAN_MAGIC 0x4d48534fu /* "OSHM" */
#define ROSHM_REGION_MAGIC 0x4e474552u /* "REGN" */
#define ROSHM_CACHELINE 64

/* Opcodes (struct roshm_sqe.opcode). */
enum roshm_op {
	ROSHM_OP_NOP = 0,
	ROSHM_OP_WRITE = 1,      /* arena[arena_off..+len] -> region[off..+len] */
	ROSHM_OP_READ = 2,       /* region[off..+len] -> arena[arena_off..+len] */
	ROSHM_OP_FETCH_ADD = 3,  /* u64 at region[off] += operand1; result = old */
	ROSHM_OP_CMP_SWAP = 4,   /* if u64 == operand1 then = operand2; result = old */
	ROSHM_OP_TXN_WRITE = 5,  /* stage a write of a transaction (issue 4) */
	ROSHM_OP_TXN_COMMIT = 6, /* commit the staged writes (issue 4) */
	ROSHM_OP_FENCE = 7,      /* later SQEs start after all earlier ones completed */
	ROSHM_OP__MAX
};

/* SQE flags. */
#define ROSHM_SQE_F_FENCE (1u << 0) /* this SQE waits for all earlier ones */
/* WRITE/READ: the local buffer is not the arena but region lbuf_handle, one
 * this client created, at data offset arena_off (no copy through the arena:
 * roshm_sqe_set_lbuf()). */
#define ROSHM_SQE_F_LBUF (1u << 1)
#define ROSHM_SQE_F_VALID_MASK (ROSHM_SQE_F_FENCE | ROSHM_SQE_F_LBUF)

/* Submission queue entry: 64 bytes, written by the client, untrusted. */
struct roshm_sqe {
	uint8_t opcode;
	uint8_t flags;
	uint16_t rsvd0;      /* must be 0 */
	uint32_t handle;     /* index | generation << 16 into the client's handle table */
	uint64_t off;        /* offset in the target region's data area */
	uint64_t arena_off;  /* offset in this channel's arena (ROSHM_SQE_F_LBUF: in lbuf_handle's data) */
	uint32_t len;        /* bytes for WRITE/READ; 8 for atomics (or 0) */
	uint32_t lbuf_handle; /* ROSHM_SQE_F_LBUF: a region this client created; else 0 */
	uint64_t operand1;   /* FETCH_ADD addend, CMP_SWAP compare value */
	uint64_t operand2;   /* CMP_SWAP swap value */
	uint64_t user_data;  /* returned untouched in the CQE */
	uint64_t rsvd2;      /* must be 0 */
};

/* Completion queue entry: 32 bytes, written by roshmd. */
struct roshm_cqe {
	uint64_t user_data;
	int32_t status;      /* 0 or -errno */
	uint32_t flags;
	uint64_t result;     /* old value of an atomic; bytes moved for WRITE/READ */
	uint64_t rsvd;
};

ROSHM_STATIC_ASSERT(sizeof(struct roshm_sqe) == 64, "SQE is 64 bytes");
ROSHM_STATIC_ASSERT(sizeof(struct roshm_cqe) == 32, "CQE is 32 bytes");
ROSHM_STATIC_ASSERT(offsetof(struct roshm_sqe, user_data) == 48, "SQE layout");
ROSHM_STATIC_ASSERT(offsetof(struct roshm_cqe, result) == 16, "CQE layout");

/*
 * Ring indices. The producer index and the consumer index each sit on
 * their own cache line so that the two sides never false-share. Indices
 * are free-running u32, masked on access; full when tail - head == entries.
 */
struct roshm_ring_idx {
	uint32_t head;              /* written by the consumer only */
	uint8_t pad0[ROSHM_CACHELINE - 4];
	uint32_t tail;              /* written by the producer only */
	uint8_t pad1[ROSHM_CACHELINE - 4];
};
ROSHM_STATIC_ASSERT(sizeof(struct roshm_ring_idx) == 2 * ROSHM_CACHELINE, "ring idx");
ROSHM_STATIC_ASSERT(offsetof(struct roshm_ring_idx, tail) == ROSHM_CACHELINE, "ring idx");

/* Channel header flags (chan_hdr.sq_flags, written by roshmd). */
#define ROSHM_SQ_NEED_WAKEUP (1u << 0) /* poller sleeps: write the SQ wakeup socket after submit */
/* chan_hdr.cq_flags, written by the client. */
#define ROSHM_CQ_NEED_WAKEUP (1u << 0) /* client sleeps: poller writes the CQ wakeup socket */

/*
 * Channel memory: [header | SQ idx | SQEs | CQ idx | CQEs | arena].
 * All offsets are from the start of the channel mapping. roshmd fills the
 * header before it passes the memfd and never trusts it afterwards: it keeps
 * its own copy of every size and offset.
 */
struct roshm_chan_hdr {
	uint32_t magic;
	uint32_t abi_version;
	uint32_t client_id;
	uint32_t rsvd0;
	uint64_t total_size;
	uint32_t sq_entries;
	uint32_t cq_entries;
	uint64_t sq_idx_off;
	uint64_t sq_off;
	uint64_t cq_idx_off;
	uint64_t cq_off;
	uint64_t arena_off;
	uint64_t arena_size;
	uint8_t pad0[ROSHM_CACHELINE * 2 - 80];
	uint32_t sq_flags;          /* roshmd -> client (NEED_WAKEUP) */
	uint8_t pad1[ROSHM_CACHELINE - 4];
	uint32_t cq_flags;          /* client -> roshmd (NEED_WAKEUP) */
	uint8_t pad2[ROSHM_CACHELINE - 4];
};
ROSHM_STATIC_ASSERT(sizeof(struct roshm_chan_hdr) == 4 * ROSHM_CACHELINE, "chan hdr");
ROSHM_STATIC_ASSERT(offsetof(struct roshm_chan_hdr, sq_flags) == 2 * ROSHM_CACHELINE, "chan hdr");

#define ROSHM_CHAN_HDR_SIZE 4096u

/*
 * Where everything sits in a channel of @sq SQEs, @cq CQEs and an @arena
 * byte arena: header | SQ idx | SQEs | CQ idx | CQEs | arena (page aligned).
 * The client creates the channel memfd of at least @size bytes (it is the
 * client's memory, charged to its pod); roshmd computes the same layout from
 * its own copy of the sizes and never reads it back from shared memory.
 */
struct roshm_chan_layout {
	uint64_t sq_idx_off;
	uint64_t sq_off;
	uint64_t cq_idx_off;
	uint64_t cq_off;
	uint64_t arena_off;
	uint64_t size;
};

static inline void roshm_chan_layout(uint32_t sq, uint32_t cq, uint64_t arena,
				     struct roshm_chan_layout *l)
{
	uint64_t off = ROSHM_CHAN_HDR_SIZE;

	l->sq_idx_off = off;
	off += sizeof(struct roshm_ring_idx);
	l->sq_off = off;
	off += (uint64_t)sq * sizeof(struct roshm_sqe);
	l->cq_idx_off = off;
	off += sizeof(struct roshm_ring_idx);
	l->cq_off = off;
	off += (uint64_t)cq * sizeof(struct roshm_cqe);
	l->arena_off = (off + 4095) & ~4095ull;
	l->size = l->arena_off + arena;
}

/*
 * Region memory: [header (4 KiB) | txn staging log | data area].
 * The owner maps all of it; SQE offsets are data-area offsets.
 */
struct roshm_region_hdr {
	uint32_t magic;
	uint32_t abi_version;
	uint64_t epoch;
	uint64_t data_size;
	uint64_t data_off;
	uint32_t txn_slots;
	uint32_t slot_size;
	uint64_t txn_log_off;
	uint64_t txn_tail;          /* FETCH_ADD target for reservations */
	uint64_t txn_applied;       /* next sequence to apply */
	uint64_t seqlock;           /* odd while the owner's roshmd applies */
	uint64_t txn_aborted;       /* sequences skipped as aborted holes */
	uint64_t mem_id;            /* random per allocation; kept across re-attach */
	uint64_t grant_key;         /* roshmd's: random per allocation, kept across re-attach,
				     * never published: the secret in the region's grant id */
	uint8_t pad[ROSHM_CACHELINE - 32];
};
ROSHM_STATIC_ASSERT(sizeof(struct roshm_region_hdr) == 128, "region hdr");
ROSHM_STATIC_ASSERT(offsetof(struct roshm_region_hdr, txn_tail) == 48, "region hdr");
#define ROSHM_REGION_HDR_SIZE 4096u

/* Offset of the data area: the header, then the log rounded up to a page. */
static inline uint64_t roshm_region_data_off(uint32_t txn_slots, uint32_t slot_size)
{
	return ROSHM_REGION_HDR_SIZE + (((uint64_t)txn_slots * slot_size + 4095) & ~4095ull);
}

/* Size of the memfd behind a region: header, log and data, whole pages. The
 * owning client creates it (its pod's memory); roshmd checks and seals it. */
static inline uint64_t roshm_region_map_size(uint64_t data_size, uint32_t txn_slots,
					     uint32_t slot_size)
{
	return (roshm_region_data_off(txn_slots, slot_size) + data_size + 4095) & ~4095ull;
}

/*
 * Transaction staging log: txn_slots slots of slot_size bytes at txn_log_off.
 * Sequence s uses slot s % txn_slots. The state word is tagged with the
 * sequence, so a late or repeated commit of an old sequence can never match:
 *   EMPTY(s)      free for sequence s (initially slot i holds EMPTY(i))
 *   COMMITTED(s)  the writer's CAS EMPTY(s) -> COMMITTED(s) made it final
 *   ABORTED(s)    the owner gave up on a reserved sequence (writer died)
 * After applying or skipping s, the owner's roshmd records the outcome in
 * history[] (newest first) and sets EMPTY(s + txn_slots).
 */
#define ROSHM_TXN_EMPTY 0u
#define ROSHM_TXN_COMMITTED 1u
#define ROSHM_TXN_ABORTED 2u
#define ROSHM_TXN_APPLIED 3u        /* history only */
#define ROSHM_TXN_STATE(seq, st) (((uint64_t)(seq) << 2) | (st))
#define ROSHM_TXN_SEQ(state) ((state) >> 2)
#define ROSHM_TXN_KIND(state) ((uint32_t)(state) & 3u)
#define ROSHM_TXN_MAX_SEGS 16
#define ROSHM_TXN_HISTORY 3

struct roshm_txn_seg {
	uint64_t off;               /* data-area offset */
	uint32_t len;
	uint32_t rsvd;
};

struct roshm_txn_slot {
	uint64_t state;             /* owner + writer's CAS */
	uint64_t history[ROSHM_TXN_HISTORY];
	/* staged by the writer, from ROSHM_TXN_STAGE_OFF on */
	uint64_t seq;
	uint64_t txn_id;            /* the writer's random id for this attempt: a tcp
				       TXN_COMMIT whose answer was lost finds it by it */
	uint32_t nseg;
	uint32_t payload_len;
	uint32_t crc;               /* crc32c of the staged bytes, all but this field */
	uint32_t rsvd;
	struct roshm_txn_seg seg[]; /* then the payload, segment after segment */
};
#define ROSHM_TXN_STAGE_OFF 32u
ROSHM_STATIC_ASSERT(offsetof(struct roshm_txn_slot, seq) == ROSHM_TXN_STAGE_OFF, "txn slot");
ROSHM_STATIC_ASSERT(sizeof(struct roshm_txn_slot) == 64, "txn slot");
#define ROSHM_TXN_SLOT_MIN 128u

#endif /* ROSHM_ABI_H */
