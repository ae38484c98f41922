// SPDX-License-Identifier: MIT
/*
 * tcp transport, responder side: the frames an authenticated peer sends on
 * an inbound connection (dataplane/transport/tcp/tcp.c conn_rx, frame_header,
 * check_req, the WRITE payload into region memory, READ and atomics, a
 * TXN_COMMIT's reserve, record and commit and its look for an earlier
 * attempt (poller/txn_owner.c), the answers through the tx ring), driven through the transport's poll and
 * flush as the poller drives them, with a real poller (EAL in memory).
 *
 * One exported region (id 1) with a 2-slot log: mapped between two
 * inaccessible pages, so a write or read past it faults. A second (id 2),
 * of policy grant, likewise: the peer's node holds a grant of data
 * [4096, 8192) only (rd_node_granted, the log's rules for grant regions
 * in tcp_resp.c).
 *
 * Input: a control byte, then the peer's bytes.
 *   bit 0     fix each frame's region id (1 where it is odd, else 2), key
 *             and epoch to the region's (so
 *             that frames get past the key check), and bound WRITE/READ
 *             lengths to max_msg, 32 KiB (payload remainders of 16 KiB and
 *             more are read straight into place): the frames are walked as the responder
 *             would (header, then a WRITE's payload)
 *   bit 1     close the peer's end after the last byte
 *   bits 2-7  chunk size - 1, times 16 (16..1024 bytes per write)
 * Properties: the region's header fields that only roshmd writes (magic,
 * sizes, layout, epoch, mem_id) never change; every answer is a
 * well-formed response (a known status, a READ's bytes only with status
 * 0 and at most what was asked), never more answers than requests; the
 * grant region's data outside the part stays zero.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "config.h"
#include "fuzz.h"
#include "fuzz_eal.h"
#include "roshmd.h"
#include "transport/tcp/tcp.h"

#define DATA (64u << 10)
#define SLOTS 2
#define SLOT_SIZE 1024
#define KEY 0x5eed1234u
#define EPOCH 0x1122334455667788ull

static struct rd_config cfg;
static struct rd_poller p;
static struct rd_region rg, rg2;
static uint8_t *map;
static size_t map_size;
static struct roshm_region_hdr hdr0;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_eal_init("tcp");
	rd_config_defaults(&cfg);
	cfg.tcp_enabled = true;
	cfg.max_regions = 4;
	cfg.max_peers = 2;
	cfg.tcp_max_msg = 32 << 10;
	if (rd_poller_init(&p, &cfg))
		abort();
	fuzz_tcp_region(&p, &rg, 1, DATA, SLOTS, SLOT_SIZE, KEY, EPOCH);
	/* the grant region: its policy, node list and slot owners set as
	 * roshmd sets them (regions.c, grants.c), before any frame */
	fuzz_tcp_region(&p, &rg2, 2, DATA, SLOTS, SLOT_SIZE, KEY, EPOCH);
	rg2.policy = ROSHM_POLICY_GRANT;
	rg2.nres = SLOTS;
	rg2.slot_owner = calloc(SLOTS + rg2.nres, sizeof(*rg2.slot_owner));
	rg2.node_grants = malloc(sizeof(*rg2.node_grants) + 2 * sizeof(rg2.node_grants->e[0]));
	if (!rg2.slot_owner || !rg2.node_grants)
		abort();
	rg2.node_res = rg2.slot_owner + SLOTS;
	for (uint32_t i = 0; i < rg2.nres; i++)
		rg2.node_res[i].seq = UINT64_MAX;
	rg2.node_grants->any = false;
	rg2.node_grants->n = 2;
	rg2.node_grants->e[0] = (struct rd_node_grant){ rd_node_hash("fuzzpeer"), 4096, 8192,
							ROSHM_ACCESS_ALL };
	rg2.node_grants->e[1] = (struct rd_node_grant){ rd_node_hash("another"), 0, DATA,
							ROSHM_ACCESS_ALL };
	map = rg.map;
	map_size = rg.map_size;
	hdr0 = *(struct roshm_region_hdr *)map;
	return 0;
}

/* Walk @buf as the responder would and make each frame reach the region. */
static size_t fix_frames(uint8_t *buf, size_t len, size_t *nreq)
{
	size_t off = 0;

	*nreq = 0;
	while (off + sizeof(struct roshm_tcp_req) <= len) {
		struct roshm_tcp_req q;

		memcpy(&q, buf + off, sizeof(q));
		q.region_id = q.region_id & 1 ? 1 : 2;
		q.key = KEY;
		q.epoch = EPOCH;
		if (q.opcode == ROSHM_OP_WRITE || q.opcode == ROSHM_OP_READ ||
		    q.opcode == ROSHM_OP_TXN_COMMIT)
			q.len %= (32u << 10) + 1;
		if (q.opcode == ROSHM_OP_TXN_COMMIT) {
			q.off = 0;
			q.flags &= ROSHM_TCP_F_AGAIN;
		}
		memcpy(buf + off, &q, sizeof(q));
		off += sizeof(q);
		(*nreq)++;
		if (q.opcode == ROSHM_OP_WRITE || q.opcode == ROSHM_OP_TXN_COMMIT)
			off += q.len;
	}
	return off;
}

/* Take whatever answers are in @fd into @acc; parse complete ones. */
static void read_answers(int fd, uint8_t *acc, size_t *have, size_t cap, size_t *nresp)
{
	for (;;) {
		ssize_t n = recv(fd, acc + *have, cap - *have, MSG_DONTWAIT);

		if (n <= 0)
			break;
		*have += (size_t)n;
		for (;;) {
			struct roshm_tcp_resp r;

			if (*have < sizeof(r))
				break;
			memcpy(&r, acc, sizeof(r));
			if (r.status != 0 && r.status != -ESTALE && r.status != -EACCES &&
			    r.status != -EFAULT && r.status != -EINVAL && r.status != -EOPNOTSUPP &&
			    r.status != -EAGAIN && r.status != -EMSGSIZE && r.status != -EIO &&
			    r.status != -ECANCELED)
				fuzz_fail("answer with status %d", r.status);
			if (r.len && r.status)
				fuzz_fail("an error answer carries %u bytes", r.len);
			if (r.len > cfg.tcp_max_msg)
				fuzz_fail("an answer of %u bytes", r.len);
			if (*have < sizeof(r) + r.len)
				break;
			memmove(acc, acc + sizeof(r) + r.len, *have - sizeof(r) - r.len);
			*have -= sizeof(r) + r.len;
			(*nresp)++;
		}
		if (*have == cap)
			fuzz_fail("an answer larger than the buffer");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t acc[64 << 10];
	struct rd_provider *pv = p.net;
	struct rd_tcp *tcp = pv->priv;
	size_t len, chunk, off = 0, have = 0, nreq = 0, nresp = 0;
	uint8_t *peer;
	bool fix, eof;
	int sv[2];

	if (size < 1 || size > (256u << 10))
		return 0;
	fix = data[0] & 1;
	eof = data[0] & 2;
	chunk = ((size_t)(data[0] >> 2) + 1) * 16;
	len = size - 1;
	peer = malloc(len ? len : 1);
	if (!peer)
		abort();
	memcpy(peer, data + 1, len);
	if (fix)
		fix_frames(peer, len, &nreq);
	else
		nreq = len / sizeof(struct roshm_tcp_req) + 1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv))
		abort();
	if (pv->dp->inbound(pv, sv[0], "fuzzpeer"))
		abort();
	for (int idle = 0; idle < 4;) {
		size_t n = len - off < chunk ? len - off : chunk;
		bool progress = false;

		if (n) {
			ssize_t w = send(sv[1], peer + off, n, MSG_DONTWAIT | MSG_NOSIGNAL);

			if (w > 0) {
				off += (size_t)w;
				progress = true;
			}
		} else if (eof) {
			shutdown(sv[1], SHUT_WR);
			eof = false;
			progress = true;
		}
		pv->dp->poll(pv, 64);
		pv->dp->flush(pv);
		size_t before = have + nresp;

		read_answers(sv[1], acc, &have, sizeof(acc), &nresp);
		progress |= have + nresp != before;
		idle = progress ? 0 : idle + 1;
		fuzz_drain_events(&p);
	}
	if (nresp > nreq)
		fuzz_fail("%zu answers to %zu requests", nresp, nreq);
	/* the peer goes away: its connection goes down and is freed */
	close(sv[1]);
	for (int i = 0; i < 4 && tcp->nin; i++) {
		pv->dp->poll(pv, 64);
		pv->dp->flush(pv);
		fuzz_drain_events(&p);
	}
	if (tcp->nin)
		fuzz_fail("the connection outlived its peer");
	struct roshm_region_hdr *h = (void *)map;

	if (h->magic != hdr0.magic || h->abi_version != hdr0.abi_version || h->epoch != hdr0.epoch ||
	    h->data_size != hdr0.data_size || h->data_off != hdr0.data_off ||
	    h->txn_slots != hdr0.txn_slots || h->slot_size != hdr0.slot_size ||
	    h->txn_log_off != hdr0.txn_log_off || h->mem_id != hdr0.mem_id)
		fuzz_fail("a peer changed the region header's layout fields");
	for (uint64_t i = 0; i < DATA; i++)
		if (rg2.data[i] && (i < 4096 || i >= 8192))
			fuzz_fail("byte %llu of the grant region, outside the part granted, is %#x",
				  (unsigned long long)i, rg2.data[i]);
	free(peer);
	return 0;
}
