// SPDX-License-Identifier: MIT
/*
 * `local` transport: the target region lives on this node, so the poller
 * moves the bytes itself (memcpy between the client's arena and the region)
 * and runs atomics with the CPU's own instructions. Atomics are sequentially
 * consistent and 8-byte aligned (rd_sqe_check), matching what an RDMA NIC
 * guarantees among its own atomics.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "transport/transport.h"

void rd_local_exec(struct rd_op *op)
{
	const struct roshm_sqe *s = &op->sqe;
	uint8_t *data = op->raw ? op->region->map : op->region->data;
	const uint8_t *src = op->src ? op->src : (op->client ? op->client->arena + s->arena_off : NULL);
	uint8_t *dst = op->dst ? op->dst : (op->client ? op->client->arena + s->arena_off : NULL);
	uint64_t *word;

	op->status = 0;
	switch (s->opcode) {
	case ROSHM_OP_WRITE:
		rd_local_copy(s->opcode, data + s->off, (uint8_t *)src, s->len);
		op->result = s->len;
		break;
	case ROSHM_OP_READ:
		rd_local_copy(s->opcode, data + s->off, dst, s->len);
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

static int local_submit(struct rd_provider *pv, struct rd_op *op)
{
	uint8_t opc = op->sqe.opcode;

	/* Atomics on our regions go through the provider that peers' atomics
	 * come in by (the verbs loopback), when the NIC's are not atomic with
	 * the CPU's; region->peer is that loopback then. */
	if (pv->atomics && op->region->peer && (opc == ROSHM_OP_FETCH_ADD || opc == ROSHM_OP_CMP_SWAP))
		return pv->atomics->dp->submit(pv->atomics, op);
	rd_local_exec(op);
	return RD_OP_DONE;
}

static int local_init(struct rd_provider *pv, struct rd_poller *p)
{
	(void)p;
	pv->max_msg = UINT32_MAX;
	return 0;
}

static const struct rd_provider_dp_ops local_dp_ops = {
	.init = local_init,
	.submit = local_submit,
};

struct rd_provider rd_local_provider = {
	.name = "local",
	.dp = &local_dp_ops,
	.xp = RD_XP_LOCAL,
	.log_comp = RD_LC_CONTROL,
	.wake_fd = -1,
	.max_msg = UINT32_MAX,
};

struct rd_provider *rd_provider_by_name(const char *name)
{
	static struct rd_provider *const all[] = { &rd_local_provider, &rd_tcp_provider,
						   &rd_verbs_provider };

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (!strcmp(all[i]->name, name))
			return all[i];
	return NULL;
}

struct rd_provider *rd_provider_by_endpoint(const char *endpoint)
{
	static struct rd_provider *const net[] = { &rd_tcp_provider, &rd_verbs_provider };

	for (size_t i = 0; i < sizeof(net) / sizeof(net[0]); i++)
		if (!strncmp(endpoint, net[i]->scheme, strlen(net[i]->scheme)))
			return net[i];
	return NULL;
}

bool rd_raw_access_ok(const struct rd_region *rg, uint8_t opcode, uint64_t off, uint32_t len)
{
	uint64_t log_end = ROSHM_REGION_HDR_SIZE + (uint64_t)rg->txn_slots * rg->slot_size;
	uint64_t in_slot;

	if (!rg->txn_slots)
		return false;
	if (off == offsetof(struct roshm_region_hdr, txn_tail)) /* the addend: rd_tcp_tail_reserve */
		return opcode == ROSHM_OP_FETCH_ADD && len == 8;
	if (off == offsetof(struct roshm_region_hdr, txn_applied))
		return opcode == ROSHM_OP_READ && len == 8;
	if (off < ROSHM_REGION_HDR_SIZE || off >= log_end || len > log_end - off)
		return false;
	in_slot = (off - ROSHM_REGION_HDR_SIZE) % rg->slot_size;
	switch (opcode) {
	case ROSHM_OP_READ:
		return len <= rg->slot_size - in_slot;
	case ROSHM_OP_WRITE:   /* staging: never the owner's state and history words */
		return in_slot >= ROSHM_TXN_STAGE_OFF && len <= rg->slot_size - in_slot;
	case ROSHM_OP_FETCH_ADD:
	case ROSHM_OP_CMP_SWAP:  /* the state word only */
		return in_slot == 0 && len == 8;
	default:
		return false;
	}
}
