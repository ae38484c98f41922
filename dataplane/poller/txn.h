/* SPDX-License-Identifier: MIT */
/*
 * Transactions (DESIGN section 6), run by roshmd's poller.
 *
 * Writer side: a client's TXN_WRITEs are gathered (their bytes copied out of
 * the arena at once) and its TXN_COMMIT starts the protocol against the
 * target region, through whatever transport reaches it:
 *   RESERVE  FETCH_ADD txn_tail, 1            -> sequence s
 *   WAIT     FETCH_ADD state(s), 0 (a read)   until EMPTY(s): the slot is ours
 *   STAGE    WRITE the record (seq, segments, payload, crc32c) into the slot
 *   COMMIT   CMP_SWAP state(s) EMPTY(s) -> COMMITTED(s)
 * Over tcp the four steps are one request instead (ONE: TXN_COMMIT, the
 * owner's roshmd reserves, stages and commits; txn_owner.c and roshm/wire.h),
 * and an attempt whose answer was lost is sent again and found by its id.
 * The client's one CQE says 0 (result = s) only once the commit CAS
 * succeeded. A transport error leaves the outcome of an in-flight commit
 * unknown: the engine retries until it can read the slot (state and history)
 * and decides: COMMITTED or APPLIED(s) -> done; EMPTY(s) -> stage and commit
 * again; ABORTED(s) -> replay with a new sequence. txn_deadline_ms bounds it
 * all (-ETIMEDOUT).
 *
 * Owner side: each round the poller applies, in sequence order, committed
 * slots of its regions under the region's seqlock, and aborts a reserved
 * sequence that stays uncommitted for txn_abort_ms.
 */
#ifndef RD_TXN_H
#define RD_TXN_H

#include "roshmd.h"

struct rd_txn_engine;

int rd_txn_init(struct rd_poller *p);
void rd_txn_fini(struct rd_poller *p);
/* TXN_WRITE (@status: its validation result, reported on the commit).
 * Always consumed: a write that fails, or finds no context within the
 * client's and its tenant's share, fails the whole transaction at its
 * commit (-EBUSY then), and never holds up the ring. Returns the bytes it
 * copied and moved (0 when it staged nothing): the poller charges them. */
uint64_t rd_txn_write(struct rd_poller *p, struct rd_client *c, const struct roshm_sqe *s,
		      struct rd_region *rg, int status);
/* TXN_COMMIT, whatever its validation said (@status): what was gathered is
 * started or dropped now. 0 started (a CQE comes later), or -errno for the
 * CQE now (@status, -EAGAIN draining, the gathering's error, -EINVAL). */
int rd_txn_commit(struct rd_poller *p, struct rd_client *c, const struct roshm_sqe *s,
		  struct rd_region *rg, int status);
/* Completion of one of the engine's own operations (transports call it). */
void rd_txn_complete(struct rd_txn *t, uint8_t opcode, int32_t status, uint64_t result);
/* Once per poll round: retries, and the owner-side apply of local logs. */
unsigned rd_txn_tick(struct rd_poller *p);
/* Work the engine can do right now (the poller must not sleep). */
bool rd_txn_busy(const struct rd_poller *p);
/* How long the poller may sleep before the engine needs a look. */
int rd_txn_sleep_ms(const struct rd_poller *p);
void rd_txn_client_gone(struct rd_poller *p, struct rd_client *c);
void rd_txn_handle_gone(struct rd_client *c, uint32_t hv);
/* The engine's memory that transports read from and write into (verbs MRs):
 * @i 0 the staging images, 1 the read-back buffers. */
void rd_txn_mem(const struct rd_poller *p, int i, uint8_t **base, size_t *len);
void rd_txn_region_add(struct rd_poller *p, struct rd_region *rg, bool on);
/* The owner side (txn_owner.c): apply @rg's committed records in order and
 * abort its holes (older than @abort cycles), within *@budget bytes, with
 * @buf (@cap bytes) for the private copy of each record. Returns the
 * sequences it settled. */
unsigned rd_txn_apply_region(struct rd_poller *p, struct rd_region *rg, uint8_t *buf, uint32_t cap,
			     uint64_t now, uint64_t abort, uint32_t *budget);
/* The owner side's apply of one committed slot of @rg (at @slot, sequence
 * @seq): copied once into @buf (@cap bytes, private), checked, applied from
 * the copy. Returns the record's length, or 0 when it is not valid (nothing
 * applied). Exposed for the fuzzer. */
uint32_t rd_txn_slot_apply(struct rd_region *rg, const void *slot, uint64_t seq, uint8_t *buf,
			   uint32_t cap);

/* CRC32C of a staged record (@len bytes from ROSHM_TXN_STAGE_OFF), all but
 * its crc word: what the writer fills in and the owner's apply checks. */
uint32_t rd_txn_staged_crc(const uint8_t *staged, uint32_t len);

/*
 * The owner's half of a tcp TXN_COMMIT (txn_owner.c; the protocol is in
 * roshm/wire.h), on the owner's poller. rd_txn_one_begin at the request's
 * header (@rg checked for epoch, key and access): 0, the @len staged bytes
 * go to rd_txn_one_dst(rg, *seq), then rd_txn_one_end gives the response's
 * result; 1, answered at once (*status, *result), the payload is dropped.
 */
int rd_txn_one_begin(struct rd_region *rg, uint64_t id, uint64_t lb, bool again, uint32_t len,
		     uint64_t *seq, int32_t *status, uint64_t *result);
uint8_t *rd_txn_one_dst(const struct rd_region *rg, uint64_t seq);
/* Whether slot @seq is still waiting for @seq's record (not given up on). */
bool rd_txn_one_holds(const struct rd_region *rg, uint64_t seq);
uint64_t rd_txn_one_end(struct rd_region *rg, uint64_t id, uint64_t seq, uint32_t len);

#endif
