// SPDX-License-Identifier: MIT
/*
 * `local` transport: the target region lives on this node, so the poller
 * moves the bytes itself (memcpy between the client's arena and the region)
 * and runs atomics with the CPU's own instructions. Atomics are sequentially
 * consistent and 8-byte aligned (rd_sqe_check), matching what an RDMA NIC
 * guarantees among its own atomics.
 */
#include <errno.h>
#include <string.h>

#include "transport.h"

void rd_local_exec(struct rd_op *op)
{
	const struct roshm_sqe *s = &op->sqe;
	uint8_t *data = op->region->data;
	uint8_t *arena = op->client->arena;
	uint64_t *word;

	op->status = 0;
	switch (s->opcode) {
	case ROSHM_OP_WRITE:
		memcpy(data + s->off, arena + s->arena_off, s->len);
		op->result = s->len;
		break;
	case ROSHM_OP_READ:
		memcpy(arena + s->arena_off, data + s->off, s->len);
		op->result = s->len;
		break;
	case ROSHM_OP_FETCH_ADD:
		word = (uint64_t *)(void *)(data + s->off);
		op->result = __atomic_fetch_add(word, s->operand1, __ATOMIC_SEQ_CST);
		break;
	case ROSHM_OP_CMP_SWAP: {
		uint64_t expect = s->operand1;

		word = (uint64_t *)(void *)(data + s->off);
		/* As with IBV_WR_ATOMIC_CMP_AND_SWP, the result is the old value
		 * whether or not the swap happened. */
		__atomic_compare_exchange_n(word, &expect, s->operand2, false,
					    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
		op->result = expect;
		break;
	}
	default:
		op->status = -EINVAL;
		break;
	}
}

static int local_submit(struct rd_transport *t, struct rd_op *op)
{
	(void)t;
	rd_local_exec(op);
	return 1;
}

const struct rd_transport_ops rd_local_transport_ops = {
	.name = "local",
	.submit = local_submit,
};
