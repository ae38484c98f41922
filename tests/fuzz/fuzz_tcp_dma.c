// SPDX-License-Identifier: MIT
/*
 * tcp transport, responder side: how a peer's WRITE payloads land
 * (dataplane/transport/tcp/tcp_rx.c: the parse loop's copy, the direct read
 * of a large payload into place whose last ROSHM_DMA_TAIL bytes go through
 * the rx buffer, rx_fault), with a real poller (EAL in memory) and one
 * exported region of 8 MiB between two inaccessible pages.
 *
 * The peer sends WRITE frames of chosen lengths (0, 1, 63 .. 66, around
 * 16 KiB where the direct read starts, around 32 KiB and 256 KiB, up to
 * max_msg), some refused (past the region, a wrong key), some READs, some
 * with a hole (an inaccessible page) in the middle of a direct-read
 * payload, and cuts the stream so that reads end after a header, inside a
 * payload's last 64 bytes, one byte before or after its end, or inside the
 * next header.
 * Input: byte 0 unused; then 6-byte records, one per frame: length
 * selector, gap (2 bytes), cut points (bits: after the header, end - 64,
 * end - 63, end - 65, end - 1, end + 1, inside the next header, a point of
 * the payload), payload seed, kind (write, write past the end, bad key,
 * read, write with a hole).
 * Properties: every frame is answered, in order, only after all its bytes
 * were sent, with the status expected (0, -EFAULT, -EACCES), and at its
 * answer a WRITE's bytes are in the region; at the end the region is the
 * model (every good WRITE applied, nothing else touched), the connection
 * is still up, and it goes when its peer does.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "config.h"
#include "fuzz.h"
#include "fuzz_eal.h"
#include "roshmd.h"
#include "transport/tcp/tcp.h"

#define DATA (8u << 20)
#define SLOTS 2
#define SLOT_SIZE 1024
#define KEY 0x5eed1234u
#define EPOCH 0x1122334455667788ull
#define H ((uint32_t)sizeof(struct roshm_tcp_req))
#define MAXF 64
#define PG 4096u

static struct rd_config cfg;
static struct rd_poller p;
static struct rd_region rg;
static uint8_t *data0, *model;
static uint32_t maxm;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_eal_init("tcpdma");
	rd_config_defaults(&cfg);
	cfg.tcp_enabled = true;
	cfg.max_regions = 4;
	cfg.max_peers = 2;
	maxm = getenv("DMA_MAXM") ? (uint32_t)atoi(getenv("DMA_MAXM")) : 300000;
	cfg.tcp_max_msg = maxm;
	if (rd_poller_init(&p, &cfg))
		abort();
	fuzz_tcp_region(&p, &rg, 1, DATA, SLOTS, SLOT_SIZE, KEY, EPOCH);
	data0 = rg.data;
	model = malloc(DATA);
	if (!model)
		abort();
	return 0;
}

struct fr {
	uint64_t start, end;  /* in the stream */
	uint32_t len, off;
	int kind;             /* 0 write ok, 1 write bad off, 2 bad key, 3 read, 4 write with hole */
	int32_t want_st;
	uint8_t *hole;
};

static struct fr fr[MAXF];
static int nfr, nans;
static uint64_t sent;

static void check_answer(const struct roshm_tcp_resp *r)
{
	struct fr *f;

	if (nans >= nfr)
		fuzz_fail("answer %d to %d frames", nans, nfr);
	f = &fr[nans];
	if (sent < f->end)
		fuzz_fail("frame %d (len %u) answered with %llu of its %llu bytes sent", nans, f->len,
			  (unsigned long long)(sent - f->start), (unsigned long long)(f->end - f->start));
	if (r->tag != (uint64_t)nans + 1000)
		fuzz_fail("answer tag %llu for frame %d", (unsigned long long)r->tag, nans);
	if (r->status != f->want_st)
		fuzz_fail("frame %d (kind %d len %u): status %d, want %d", nans, f->kind, f->len, r->status, f->want_st);
	if (f->kind == 0 && memcmp(data0 + f->off, model + f->off, f->len)) {
		uint32_t i = 0;
		while (data0[f->off + i] == model[f->off + i])
			i++;
		fuzz_fail("frame %d (len %u off %u): byte %u of it wrong at its answer", nans, f->len, f->off, i);
	}
	if (f->hole)
		mprotect(f->hole, PG, PROT_READ | PROT_WRITE);
	nans++;
}

static void read_answers(int fd, uint8_t *acc, size_t *have, size_t cap)
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
			if (*have < sizeof(r) + r.len)
				break;
			check_answer(&r);
			memmove(acc, acc + sizeof(r) + r.len, *have - sizeof(r) - r.len);
			*have -= sizeof(r) + r.len;
		}
	}
}

static int cmp64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t size)
{
	static uint8_t acc[1 << 20];
	static uint64_t cuts[MAXF * 10 + 4];
	struct rd_provider *pv = p.net;
	struct rd_tcp *tcp = pv->priv;
	uint32_t tbl[] = { 0, 1, 8, 63, 64, 65, 66, 127, 128, 129, 1000, 16319, 16320, 16383, 16384, 16385,
			   16447, 16448, 16449, 16450, 16511, 16512, 16513, 32767, 32768, 32832, 32833,
			   262143, 262144, 262145, 262208, 262209, maxm - 65, maxm - 64, maxm - 1, maxm };
	size_t ntbl = sizeof(tbl) / sizeof(tbl[0]), ncut = 0, have = 0;
	uint64_t slen = 0, cursor = 0;
	uint8_t *stream;
	int sv[2];

	if (size < 1)
		return 0;
	nfr = nans = 0;
	sent = 0;
	/* the frames */
	stream = malloc((size_t)MAXF * (maxm + H));
	if (!stream)
		abort();
	for (size_t i = 1; i + 6 <= size && nfr < MAXF; i += 6) {
		const uint8_t *r = in + i;
		struct fr *f = &fr[nfr];
		uint32_t len = r[0] < 0xc0 ? tbl[r[0] % ntbl] : (uint32_t)((r[1] | r[2] << 8 | r[4] << 16) * 2654435761u) % (maxm + 1);
		uint32_t gap = (r[1] | r[2] << 8) % 257;

		if (len > maxm)
			len = maxm;
		struct roshm_tcp_req q = { .opcode = ROSHM_OP_WRITE, .len = len, .region_id = 1,
					   .key = KEY, .epoch = EPOCH, .tag = 1000u + (unsigned)nfr };

		f->kind = r[5] % 5;
		if (f->kind == 3)
			q.opcode = ROSHM_OP_READ, q.len = len = len % 4097;
		if (cursor + gap + len > DATA)
			break;
		f->off = (uint32_t)(cursor + gap);
		f->len = len;
		f->hole = NULL;
		q.off = f->off;
		f->want_st = 0;
		if (f->kind == 1)
			q.off = DATA - len + 1 + gap, f->want_st = -EFAULT;
		else if (f->kind == 2)
			q.key ^= 1, f->want_st = -EACCES;
		else if (f->kind == 4) {
			uint8_t *mid = (uint8_t *)((uintptr_t)(data0 + f->off + len / 2) & ~(uintptr_t)(PG - 1));
			if (len >= DIRECT_MIN + 3 * PG && mid > data0 + f->off && mid + PG + 64 <= data0 + f->off + len) {
				f->hole = mid;
				f->want_st = -EFAULT;
			} else {
				f->kind = 0;
			}
		}
		cursor = f->off + len;
		f->start = slen;
		memcpy(stream + slen, &q, H);
		slen += H;
		if (q.opcode == ROSHM_OP_WRITE) {
			for (uint32_t k = 0; k < len; k++)
				stream[slen + k] = (uint8_t)(r[4] + k * 131 + (k >> 8) * 7 + nfr);
			slen += len;
		}
		f->end = slen;
		/* cut points */
		uint8_t c = r[3];
		uint64_t fs = f->start, fe = f->end;
		if (f->hole) {
			cuts[ncut++] = fs + H; /* header alone, then the payload in one */
		} else {
#define CUT(x) do { uint64_t _x = (x); if (_x > fs && ncut < sizeof(cuts) / 8) cuts[ncut++] = _x; } while (0)
			if (c & 1) CUT(fs + H);
			if (c & 2) CUT(fe - 64);
			if (c & 4) CUT(fe - 63);
			if (c & 8) CUT(fe - 65);
			if (c & 16) CUT(fe - 1);
			if (c & 32) CUT(fe + 1);
			if (c & 64) CUT(fe + H - 1);
			if (c & 128) CUT(fs + H + (uint64_t)r[4] * 97 % (len + 1));
		}
		nfr++;
	}
	/* the model: the region before, then each good WRITE */
	for (uint32_t k = 0; k < DATA; k += 4096)
		memset(data0 + k, (uint8_t)(k >> 12), 4096);
	memcpy(model, data0, DATA);
	for (int i = 0; i < nfr; i++)
		if (fr[i].kind == 0)
			memcpy(model + fr[i].off, stream + fr[i].start + H, fr[i].len);
	for (int i = 0; i < nfr; i++)
		if (fr[i].hole)
			mprotect(fr[i].hole, PG, PROT_NONE);
	cuts[ncut++] = slen;
	qsort(cuts, ncut, 8, cmp64);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv))
		abort();
	int big = 4 << 20;
	setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	if (pv->dp->inbound(pv, sv[0], "fuzzpeer"))
		abort();
	size_t ci = 0;
	for (int idle = 0; idle < 4;) {
		bool progress = false;

		while (ci < ncut && cuts[ci] <= sent)
			ci++;
		int unread = 0;

		ioctl(sv[0], FIONREAD, &unread);
		if (ci < ncut && !unread) {
			uint64_t to = cuts[ci] > slen ? slen : cuts[ci];
			ssize_t w = send(sv[1], stream + sent, to - sent, MSG_DONTWAIT | MSG_NOSIGNAL);

			if (w > 0) {
				sent += (uint64_t)w;
				progress = true;
			}
		}
		pv->dp->poll(pv, 64);
		pv->dp->flush(pv);
		int before = nans;
		size_t hb = have;

		read_answers(sv[1], acc, &have, sizeof(acc));
		int unread2 = 0;

		ioctl(sv[0], FIONREAD, &unread2);
		progress |= nans != before || have != hb || unread2 != unread;
		idle = progress ? 0 : idle + 1;
		fuzz_drain_events(&p);
	}
	if (!tcp->nin) {
		for (size_t i = 0; i < size; i++)
			fprintf(stderr, "%02x", in[i]);
		fuzz_fail("connection dropped (%d frames, %d answers)", nfr, nans);
	}
	if (nans != nfr)
		fuzz_fail("%d answers to %d frames, %llu of %llu bytes sent (stuck)", nans, nfr,
			  (unsigned long long)sent, (unsigned long long)slen);
	for (int i = 0; i < nfr; i++)
		if (fr[i].kind == 4)
			memcpy(model + fr[i].off, data0 + fr[i].off, fr[i].len); /* whatever landed */
	if (memcmp(model, data0, DATA))
		fuzz_fail("region differs from the model at the end");
	close(sv[1]);
	for (int i = 0; i < 4 && tcp->nin; i++) {
		pv->dp->poll(pv, 64);
		pv->dp->flush(pv);
		fuzz_drain_events(&p);
	}
	if (tcp->nin)
		fuzz_fail("the connection outlived its peer");
	free(stream);
	return 0;
}
