// SPDX-License-Identifier: MIT
/*
 * Every control-socket message (dataplane/control/attach.c: HELLO, CHANNEL,
 * REGION_CREATE / REATTACH / OPEN / CLOSE, ADMIN, and whatever else comes),
 * with the descriptors they carry, sent on one connection to a real
 * control thread and poller (EAL in memory, the poller not launched: its
 * commands apply in place, and a poll round runs after each message).
 *
 * Input: records of [kind][len lo][len hi][len bytes of message].
 *   kind bits 0-1  descriptor: 0 none, 1 a touched memfd of the size the
 *                  message asks for (the channel size of the last HELLO
 *                  reply, a region's map size; at most 8 MiB), 2 a memfd of
 *                  a size from the message's first byte, 3 a pipe
 *   kind bit 2     fix the header: magic, version, length
 *   kind bits 3-5  0: keep the type, else set it to that value
 *   kind bit 6     a HELLO with the right token of tenant a, b or default
 *                  (by the byte after the header): the fuzzer cannot guess
 *                  a token; this lets it reach everything after HELLO
 *   kind bit 7     peer credentials of uid 1000 for the rest (else 0)
 * Properties: every reply is one well-formed datagram (magic, version,
 * length, a status that is 0 or -errno) with at most the descriptors its
 * type carries; when the peer goes away everything it had is released: the
 * process holds as many descriptors as before the input.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "control/control.h"
#include "fuzz.h"
#include "fuzz_eal.h"
#include "roshmd.h"
#include "roshm/ctl.h"

static struct rd_config cfg;
static struct rd_poller p;
static struct rd_control ctl;
static const char *const tenants[3][2] = {
	{ "default", "" },
	{ "a", "fuzz-token-of-tenant-a" },
	{ "b", "fuzz-token-of-tenant-b" },
};

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		abort();
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the directory's own */
}

static void show_fds(const char *when)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	char path[300], to[256];

	while (d && (e = readdir(d))) {
		ssize_t k;

		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		k = readlink(path, to, sizeof(to) - 1);
		to[k > 0 ? k : 0] = 0;
		fprintf(stderr, "%s: fd %s -> %s\n", when, e->d_name, to);
	}
	if (d)
		closedir(d);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f || fputs(text, f) < 0 || fclose(f))
		abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *dir;
	char path[256], text[2048], err[512];

	(void)argc;
	(void)argv;
	fuzz_eal_init("ctl");
	dir = fuzz_tmpdir();
	snprintf(path, sizeof(path), "%s/reg.secret", dir);
	write_file(path, "fuzz-registry-secret-0123456789abcdef\n");
	snprintf(text, sizeof(text),
		 "node = \"fuzz-node\";\n"
		 "socket = \"%s/ctl.sock\";\n"
		 "registry: { dir = \"%s/reg\"; secret_file = \"%s/reg.secret\"; };\n"
		 "admin: { token_file = \"%s/admin.token\"; hello_timeout_ms = 60000; };\n"
		 "channel: { hugepages = \"off\"; sq_entries = 8; cq_entries = 8; arena_size = 65536; };\n"
		 "limits: { max_clients = 8; max_regions = 16; max_handles = 8;"
		 " max_region_size = 8388608L; };\n"
		 "quota: { bytes = 67108864L; };\n"
		 "tenants = ( { name = \"%s\"; token = \"%s\"; }, { name = \"%s\"; token = \"%s\"; },"
		 " { name = \"%s\"; token = \"%s\"; } );\n",
		 dir, dir, dir, dir, tenants[0][0], tenants[0][1], tenants[1][0], tenants[1][1],
		 tenants[2][0], tenants[2][1]);
	snprintf(path, sizeof(path), "%s/roshmd.conf", dir);
	write_file(path, text);
	if (rd_config_load(&cfg, path, err, sizeof(err))) {
		fprintf(stderr, "fuzz_control: config: %s\n", err);
		exit(1);
	}
	if (rd_poller_init(&p, &cfg) || rd_control_init(&ctl, &cfg, &p)) {
		fprintf(stderr, "fuzz_control: poller or control init failed\n");
		exit(1);
	}
	return 0;
}

static int memfd_of(uint64_t size)
{
	int fd = memfd_create("fuzz", MFD_ALLOW_SEALING | MFD_CLOEXEC);
	void *m;

	if (fd < 0)
		abort();
	if (!size)
		return fd;
	if (ftruncate(fd, (off_t)size))
		abort();
	m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		abort();
	memset(m, 0, size); /* touched: the pages are ours */
	munmap(m, size);
	return fd;
}

static void send_msg(int sock, const void *buf, size_t len, int fd)
{
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr a;
	} u;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (fd >= 0) {
		memset(&u, 0, sizeof(u));
		m.msg_control = u.b;
		m.msg_controllen = sizeof(u.b);
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);

		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	(void)sendmsg(sock, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* Every reply waiting: checked, its descriptors closed. */
static void take_replies(int sock, uint64_t *chan_size)
{
	for (;;) {
		union {
			char b[CMSG_SPACE(sizeof(int) * 8)];
			struct cmsghdr a;
		} u;
		_Alignas(8) char buf[8192];
		struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b,
				    .msg_controllen = sizeof(u.b) };
		ssize_t n = recvmsg(sock, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		int nfds = 0;

		if (n <= 0)
			return;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
				for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
					close(((int *)CMSG_DATA(c))[i]);
					nfds++;
				}
		struct roshm_ctl_hdr h;

		if ((size_t)n < sizeof(h) || (m.msg_flags & MSG_TRUNC))
			fuzz_fail("a reply of %zd bytes", n);
		memcpy(&h, buf, sizeof(h));
		if (h.magic != ROSHM_CTL_MAGIC || h.version != ROSHM_ABI_VERSION || h.len != (uint32_t)n)
			fuzz_fail("malformed reply header (type %u, len %u of %zd)", h.type, h.len, n);
		if (h.status > 0 || h.status < -4095)
			fuzz_fail("reply status %d", h.status);
		if (nfds && !(h.type == ROSHM_CTL_CHANNEL && !h.status && nfds == ROSHM_CHANNEL_NFDS))
			fuzz_fail("a reply of type %u (status %d) carries %d descriptors", h.type,
				  h.status, nfds);
		if (h.type == ROSHM_CTL_HELLO && !h.status &&
		    (size_t)n >= sizeof(struct roshm_ctl_hello_reply)) {
			struct roshm_ctl_hello_reply r;

			memcpy(&r, buf, sizeof(r));
			*chan_size = r.chan_size;
		}
	}
}

static void turn(int sock, uint64_t *chan_size)
{
	for (int i = 0; i < 3; i++) {
		rd_control_step(&ctl, 0);
		rd_poller_round(&p);
	}
	take_replies(sock, chan_size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* Counted at each input, not once: between inputs libFuzzer itself
	 * may open descriptors for good (the sanitizer's symbolizer keeps two
	 * pipes to llvm-symbolizer from the first NEW_FUNC it prints on). */
	int base = count_fds();
	uint64_t chan_size = 0;
	uid_t uid = 0;
	size_t off = 0;
	int sv[2];

	if (getenv("FUZZ_SHOW_FDS"))
		show_fds("before");
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv))
		abort();
	if (size && (data[0] & 0x80))
		uid = 1000;
	if (rd_control_adopt_conn(&ctl, sv[0], getpid(), uid))
		abort();
	while (off + 3 <= size) {
		uint8_t kind = data[off];
		size_t len = (size_t)data[off + 1] | (size_t)data[off + 2] << 8;
		_Alignas(8) uint8_t msg[4096 + 64];
		int fd = -1;

		off += 3;
		if (len > size - off)
			len = size - off;
		if (len > sizeof(msg))
			len = sizeof(msg);
		memset(msg, 0, sizeof(msg));
		memcpy(msg, data + off, len);
		off += len;
		struct roshm_ctl_hdr *h = (void *)msg;

		if (kind & 0x40) {
			/* a HELLO that passes */
			struct roshm_ctl_hello *hl = (void *)msg;
			int t = (len > sizeof(*h) ? msg[sizeof(*h)] : 0) % 3;

			if (len < sizeof(*hl))
				len = sizeof(*hl);
			h->type = ROSHM_CTL_HELLO;
			memset(hl->tenant, 0, sizeof(hl->tenant));
			memset(hl->token, 0, sizeof(hl->token));
			memset(hl->pod, 0, sizeof(hl->pod));
			snprintf(hl->tenant, sizeof(hl->tenant), "%s", tenants[t][0]);
			snprintf(hl->token, sizeof(hl->token), "%s", tenants[t][1]);
			hl->arena_size %= 1u << 20;
			kind |= 4;
		}
		if ((kind >> 3) & 7)
			h->type = (kind >> 3) & 7;
		if (kind & 4 && len >= sizeof(*h)) {
			h->magic = ROSHM_CTL_MAGIC;
			h->version = ROSHM_ABI_VERSION;
			h->len = (uint32_t)len;
		}
		switch (kind & 3) {
		case 1:
			if (h->type == ROSHM_CTL_CHANNEL) {
				fd = memfd_of(chan_size <= (8u << 20) ? chan_size : 4096);
			} else if (len >= sizeof(struct roshm_ctl_region_create)) {
				struct roshm_ctl_region_create rc;

				memcpy(&rc, msg, sizeof(rc));
				uint64_t sz = roshm_region_map_size(rc.size % (4u << 20), rc.txn_slots % 64,
								    rc.slot_size % 65536);
				fd = memfd_of(sz <= (8u << 20) ? sz : 4096);
			} else {
				fd = memfd_of(4096);
			}
			break;
		case 2:
			fd = memfd_of(len ? (uint64_t)msg[0] * 4096 : 0);
			break;
		case 3: {
			int pp[2];

			if (pipe2(pp, O_CLOEXEC))
				abort();
			close(pp[1]);
			fd = pp[0];
			break;
		}
		default:
			break;
		}
		send_msg(sv[1], msg, len, fd);
		if (fd >= 0)
			close(fd);
		turn(sv[1], &chan_size);
	}
	/* the peer goes: everything it had is released */
	close(sv[1]);
	for (int i = 0; i < 4; i++) {
		rd_control_step(&ctl, 0);
		rd_poller_round(&p);
	}
	if (ctl.conns || ctl.nclients)
		fuzz_fail("a connection or client outlived its peer (%u clients)", ctl.nclients);
	/* What the data path or a registry completion still holds is let go
	 * of a turn or a few later (graveyard, async completions): a leak is
	 * what is still open after a second of turns. */
	int now = count_fds();

	for (int i = 0; i < 100 && now != base; i++) {
		rd_control_step(&ctl, 10);
		rd_poller_round(&p);
		now = count_fds();
	}

	if (now != base && getenv("FUZZ_SHOW_FDS"))
		show_fds("after");
	if (now != base)
		fuzz_fail("%d descriptors before the input, %d after", base, now);
	return 0;
}
