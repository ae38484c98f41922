/* SPDX-License-Identifier: MIT */
/*
 * Transport providers. The poller hands each validated operation to the
 * provider that serves the target region: `local` (same node) today, `tcp`
 * and `verbs` for remote nodes. A provider either completes an operation at
 * once (submit returns 1 with op->status/result set) or queues it and later
 * reports it through rd_op_complete() from its poll callback. flush runs once
 * per poll round, after every client's burst was submitted: that is where a
 * network provider rings one doorbell (writev, ibv_post_send) per peer.
 */
#ifndef RD_TRANSPORT_H
#define RD_TRANSPORT_H

#include <stdint.h>
#include "roshmd.h"

struct rd_txn;

struct rd_op {
	struct rd_client *client;   /* NULL for roshmd's own operations */
	struct rd_region *region;
	struct roshm_sqe sqe;       /* validated copy */
	/* roshmd's own operations (transactions): */
	struct rd_txn *txn;         /* completion goes to the transaction engine */
	bool raw;                   /* sqe.off is from the region start (header, log) */
	const uint8_t *src;         /* WRITE source instead of the client's arena */
	uint8_t *dst;               /* READ destination instead of the client's arena */
	int32_t status;
	uint64_t result;
};

/* Whether a raw (region-relative) access touches only what the transaction
 * protocol needs: txn_tail, slot state words, staged slot bytes. */
bool rd_raw_access_ok(const struct rd_region *rg, uint8_t opcode, uint64_t off, uint32_t len);

struct rd_transport;

struct rd_transport_ops {
	const char *name;
	/* 1: completed (status/result set); 0: queued; never fails otherwise. */
	int (*submit)(struct rd_transport *t, struct rd_op *op);
	/* End of a poll round: push queued work to the wire. May be NULL. */
	void (*flush)(struct rd_transport *t);
	/* Reap up to @budget completions. May be NULL. */
	unsigned (*poll)(struct rd_transport *t, unsigned budget);
};

struct rd_transport {
	const struct rd_transport_ops *ops;
	void *priv;
};

extern const struct rd_transport_ops rd_local_transport_ops;

/* An atomic on one of our own regions through the verbs loopback QP
 * (verbs.c): same return values as submit. */
int rd_verbs_submit_local(void *verbs, struct rd_op *op);

/* Execute one operation on a region mapped in this process (local.c). */
void rd_local_exec(struct rd_op *op);

#endif
