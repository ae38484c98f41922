// SPDX-License-Identifier: MIT
/*
 * Hostile clients against a real roshmd while a well-behaved client works
 * beside them: bad SQEs, SQ flood, corrupted ring indices, closing mid-stream,
 * ftruncate on sealed memfds, malformed control messages. roshmd must stay
 * up and the good client must never see an error.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/falloc.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <cmocka.h>
#include <jansson.h>

#include "roshm.h"
#include "harness.h"

static struct th_daemon d;
static pid_t good_pid;
static volatile uint64_t *good_shared; /* [0] stop flag, [1] iterations, [2] errors */

static struct roshm *attach(void)
{
	struct roshm_params p = { .sock_path = d.sock };
	int err;

	return roshm_open(&p, &err);
}

/* ---- the well-behaved client ---- */

static int good_client(void *arg)
{
	struct roshm *r = attach();
	uint32_t h;
	uint8_t *arena, *data;
	uint64_t old;

	(void)arg;
	if (!r || roshm_region_create(r, "good", 65536, NULL, &h))
		return 2;
	arena = roshm_arena(r, NULL);
	data = roshm_region_data(r, h, NULL);
	for (uint64_t it = 0; !good_shared[0]; it++) {
		memset(arena, (int)(it & 0xff), 4096);
		int a = roshm_write_sync(r, h, 4096, 0, 4096);
		int b = roshm_read_sync(r, h, 4096, 8192, 4096);
		int c = roshm_fetch_add_sync(r, h, 0, 1, &old);

		if (a || b || c || memcmp(arena, arena + 8192, 4096) || old != it ||
		    data[4096] != (uint8_t)(it & 0xff)) {
			fprintf(stderr, "good client: iteration %llu: write %d read %d fadd %d old %llu\n",
				(unsigned long long)it, a, b, c, (unsigned long long)old);
			good_shared[2]++;
			return 1;
		}
		good_shared[1] = it + 1;
	}
	roshm_close(r);
	return 0;
}

/* ---- raw control-socket access ---- */

static int raw_connect(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);

	strcpy(sa.sun_path, d.sock);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* recv one reply; returns its length (0: closed), fds in fds[] */
static ssize_t raw_recv(int fd, void *buf, size_t cap, int *fds, int *nfds)
{
	union {
		char b[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr a;
	} u;
	struct iovec iov = { .iov_base = buf, .iov_len = cap };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b,
			    .msg_controllen = sizeof(u.b) };
	struct pollfd p = { .fd = fd, .events = POLLIN };
	ssize_t n;

	*nfds = 0;
	if (poll(&p, 1, 5000) != 1)
		return -1;
	n = recvmsg(fd, &m, 0);
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
		if (c->cmsg_type == SCM_RIGHTS) {
			*nfds = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			memcpy(fds, CMSG_DATA(c), sizeof(int) * (size_t)*nfds);
		}
	return n;
}

static void hdr(struct roshm_ctl_hdr *h, uint16_t type, size_t len)
{
	h->magic = ROSHM_CTL_MAGIC;
	h->type = type;
	h->version = ROSHM_ABI_VERSION;
	h->len = (uint32_t)len;
	h->status = 0;
}

static bool closed_by_peer(int fd)
{
	char b[64];
	int fds[4], n;

	return raw_recv(fd, b, sizeof(b), fds, &n) == 0;
}

/* ---- tests ---- */

struct expect {
	struct roshm_sqe sqe;
	int status;
	const char *what;
};

static void test_bad_sqes(void **state)
{
	struct roshm *r = attach();
	struct roshm_cqe *cqe;
	uint32_t h, hg;
	size_t asz;
	struct expect e[16];
	int n = 0;

	(void)state;
	assert_non_null(r);
	roshm_arena(r, &asz);
	assert_int_equal(roshm_region_create(r, "hostile", 4096, NULL, &h), 0);
	assert_int_equal(roshm_region_open(r, "default/good", &hg, NULL), 0);
#define E(prep, st, w) do { memset(&e[n], 0, sizeof(e[n])); prep; e[n].status = st; e[n].what = w; n++; } while (0)
	E(roshm_prep_write(&e[n].sqe, h, 4090, 0, 8), -EFAULT, "write past region end");
	E(roshm_prep_write(&e[n].sqe, h, UINT64_MAX - 3, 0, 8), -EFAULT, "offset overflow");
	E(roshm_prep_read(&e[n].sqe, h, 0, asz - 4, 8), -EFAULT, "arena past end");
	E(roshm_prep_read(&e[n].sqe, h, 0, UINT64_MAX - 3, 8), -EFAULT, "arena offset overflow");
	E(roshm_prep_write(&e[n].sqe, 999, 0, 0, 8), -EBADF, "unknown handle");
	E(roshm_prep_write(&e[n].sqe, h + (1u << 16), 0, 0, 8), -EBADF, "stale handle generation");
	E(roshm_prep_write(&e[n].sqe, h, 0, 0, 8); e[n].sqe.opcode = 200, -EINVAL, "bad opcode");
	E(roshm_prep_write(&e[n].sqe, h, 0, 0, 8); e[n].sqe.rsvd2 = 1, -EINVAL, "reserved field");
	E(roshm_prep_write(&e[n].sqe, h, 0, 0, 8); e[n].sqe.flags = 0x80, -EINVAL, "unknown flag");
	E(roshm_prep_fetch_add(&e[n].sqe, h, 3, 1), -EINVAL, "misaligned atomic");
	E(roshm_prep_fetch_add(&e[n].sqe, h, 0, 1); e[n].sqe.len = 4, -EINVAL, "atomic length");
	E(roshm_prep_cmp_swap(&e[n].sqe, hg, 65536, 0, 1), -EFAULT, "atomic past end of good region");
	E(roshm_prep_write(&e[n].sqe, h, 4088, 0, 8), 0, "last word (valid)");
#undef E
	for (int i = 0; i < n; i++) {
		struct roshm_sqe *s = roshm_get_sqe(r);

		assert_non_null(s);
		*s = e[i].sqe;
		s->user_data = (uint64_t)i;
	}
	assert_int_equal(roshm_submit(r), n);
	for (int i = 0; i < n; i++) {
		assert_int_equal(roshm_wait_cqe_timeout(r, &cqe, 5000), 0);
		if (cqe->user_data != (uint64_t)i || cqe->status != e[i].status)
			fail_msg("%s: CQE user_data %llu status %d, expected %d status %d", e[i].what,
				 (unsigned long long)cqe->user_data, cqe->status, i, e[i].status);
		roshm_cqe_seen(r, cqe);
	}
	roshm_close(r);
}

static void test_sq_flood(void **state)
{
	struct roshm_params p = { .sock_path = d.sock, .sq_entries = 64, .cq_entries = 128 };
	struct roshm *r;
	struct roshm_cqe *cqe;
	uint64_t sent = 0, got = 0;
	int err;

	(void)state;
	r = roshm_open(&p, &err);
	assert_non_null(r);
	/* Submit without reaping until neither ring has room. */
	for (int round = 0; round < 20; round++) {
		struct roshm_sqe *s;

		while ((s = roshm_get_sqe(r))) {
			roshm_prep_nop(s);
			roshm_sqe_set_data(s, sent++);
		}
		roshm_submit(r);
		usleep(2000);
	}
	/* At most SQ + CQ entries can be outstanding, never more. */
	assert_true(sent <= 64 + 128);
	assert_true(sent >= 128);
	assert_true(*r->cq.ktail - *r->cq.khead <= 128);
	while (got < sent) {
		assert_int_equal(roshm_wait_cqe_timeout(r, &cqe, 5000), 0);
		assert_int_equal(cqe->user_data, got);
		assert_int_equal(cqe->status, 0);
		roshm_cqe_seen(r, cqe);
		got++;
	}
	assert_int_equal(roshm_peek_cqe(r, &cqe), -EAGAIN);
	roshm_close(r);
}

static void test_corrupt_sq_tail(void **state)
{
	struct roshm *r = attach();
	struct roshm_cqe *cqe;

	(void)state;
	assert_non_null(r);
	__atomic_store_n(r->sq.ktail, *r->sq.khead + 100000, __ATOMIC_RELEASE);
	uint64_t one = 1;

	assert_int_equal(write(r->sq_event_fd, &one, 8), 8);
	assert_int_equal(roshm_wait_cqe_timeout(r, &cqe, 5000), -ECONNRESET);
	roshm_close(r);
}

static void test_corrupt_cq_head(void **state)
{
	struct roshm *r = attach();
	struct roshm_sqe *s;
	struct roshm_cqe *cqe;

	(void)state;
	assert_non_null(r);
	assert_int_equal(roshm_nop_sync(r), 0);
	__atomic_store_n(r->cq.khead, *r->cq.ktail + 5000, __ATOMIC_RELEASE);
	s = roshm_get_sqe(r);
	if (!s) {
		fail_msg("no SQE");
		return;
	}
	roshm_prep_nop(s);
	roshm_submit(r);
	/* Our own CQ view is garbage now; roshmd's answer is to hang up. */
	assert_true(closed_by_peer(r->sock_fd));
	(void)cqe;
	roshm_close(r);
}

static void test_close_mid_stream(void **state)
{
	(void)state;
	for (int k = 0; k < 20; k++) {
		struct roshm *r = attach();
		uint32_t h;
		struct roshm_sqe *s;

		assert_non_null(r);
		assert_int_equal(roshm_region_open(r, "default/good", &h, NULL), 0);
		while ((s = roshm_get_sqe(r)))
			roshm_prep_read(s, h, 0, 0, 65536);
		roshm_submit(r);
		roshm_close(r); /* gone with everything in flight */
	}
	assert_true(th_daemon_alive(&d));
}

/* Send @buf with one descriptor. */
static void send_fd(int sock, const void *buf, size_t len, int fd)
{
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr a;
	} u;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b,
			    .msg_controllen = sizeof(u.b) };
	struct cmsghdr *c;

	memset(&u, 0, sizeof(u));
	c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	assert_int_equal(sendmsg(sock, &m, 0), (ssize_t)len);
}

/* A memfd of @size bytes, every page touched, as libroshm makes them. */
static int own_memfd(size_t size, void **map)
{
	int fd = memfd_create("hostile", MFD_ALLOW_SEALING | MFD_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	*map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
	assert_true(*map != MAP_FAILED);
	return fd;
}

/* A new connection past HELLO as tenant "default": the connection; @hr
 * its reply. */
static int raw_hello(struct roshm_ctl_hello_reply *hr)
{
	struct roshm_ctl_hello hello = { 0 };
	int fds[4], nfds, fd = raw_connect();

	hdr(&hello.hdr, ROSHM_CTL_HELLO, sizeof(hello));
	strcpy(hello.tenant, "default");
	assert_int_equal(send(fd, &hello, sizeof(hello), 0), sizeof(hello));
	assert_int_equal(raw_recv(fd, hr, sizeof(*hr), fds, &nfds), sizeof(*hr));
	assert_int_equal(hr->hdr.status, 0);
	assert_int_equal(nfds, 0);
	return fd;
}

/* A CHANNEL of @chan on @fd, past HELLO, refused with @status; the
 * connection ends with it (one answer before attach). */
static void channel_refused(int fd, const struct roshm_ctl_channel *ch, int chan, int status)
{
	char buf[512];
	int fds[4], nfds;

	send_fd(fd, ch, sizeof(*ch), chan);
	assert_true(raw_recv(fd, buf, sizeof(buf), fds, &nfds) > 0);
	assert_int_equal(((struct roshm_ctl_hdr *)buf)->status, status);
	assert_true(raw_recv(fd, buf, sizeof(buf), fds, &nfds) <= 0);
	close(fd);
}

/* The memory a client hands over is sealed: it can no longer shrink or grow
 * it, nor punch holes in its channel; memory it did not touch, or that is
 * not a sealable memfd, is refused. */
static void test_ftruncate_sealed(void **state)
{
	struct roshm_ctl_hello_reply hr;
	struct roshm_ctl_channel ch = { 0 };
	struct roshm_ctl_region_create rc = { 0 };
	char buf[512];
	void *map;
	int fds[4], nfds, fd = raw_hello(&hr), chan;

	(void)state;
	/* memory with pages missing: refused */
	chan = memfd_create("lazy", MFD_ALLOW_SEALING);
	assert_int_equal(ftruncate(chan, (off_t)hr.chan_size), 0);
	hdr(&ch.hdr, ROSHM_CTL_CHANNEL, sizeof(ch));
	ch.size = hr.chan_size;
	channel_refused(fd, &ch, chan, -EFAULT);
	close(chan);
	/* the wrong size: refused */
	fd = raw_hello(&hr);
	chan = own_memfd(hr.chan_size + 4096, &map);
	channel_refused(fd, &ch, chan, -EINVAL);
	munmap(map, hr.chan_size + 4096);
	close(chan);
	/* a proper one: sealed by roshmd */
	fd = raw_hello(&hr);
	chan = own_memfd(hr.chan_size, &map);
	send_fd(fd, &ch, sizeof(ch), chan);
	assert_true(raw_recv(fd, buf, sizeof(buf), fds, &nfds) > 0);
	assert_int_equal(((struct roshm_ctl_hdr *)buf)->status, 0);
	assert_int_equal(nfds, ROSHM_CHANNEL_NFDS);
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	assert_int_equal(ftruncate(chan, 0), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(ftruncate(chan, 1 << 30), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(fallocate(chan, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(fcntl(chan, F_ADD_SEALS, F_SEAL_WRITE), -1);
	/* a second channel on the same connection: refused */
	send_fd(fd, &ch, sizeof(ch), chan);
	assert_true(raw_recv(fd, buf, sizeof(buf), fds, &nfds) > 0);
	assert_int_equal(((struct roshm_ctl_hdr *)buf)->status, -EPROTO);
	close(chan);

	/* a region: sealed against shrinking and growing; the channel's memfd
	 * (sealed already) is not a region */
	hdr(&rc.hdr, ROSHM_CTL_REGION_CREATE, sizeof(rc));
	strcpy(rc.name, "sealed");
	rc.size = 4096;
	int rfd = own_memfd(roshm_region_map_size(4096, 0, 0), &map);

	send_fd(fd, &rc, sizeof(rc), rfd);
	assert_true(raw_recv(fd, buf, sizeof(buf), fds, &nfds) > 0);
	assert_int_equal(((struct roshm_ctl_hdr *)buf)->status, 0);
	assert_int_equal(nfds, 0);
	assert_int_equal(((struct roshm_region_hdr *)map)->magic, ROSHM_REGION_MAGIC);
	assert_int_equal(ftruncate(rfd, 0), -1);
	assert_int_equal(errno, EPERM);
	munmap(map, roshm_region_map_size(4096, 0, 0));
	close(rfd);
	close(fd);
}

static void test_malformed_ctl(void **state)
{
	struct roshm_ctl_hello hello = { 0 };
	struct roshm_ctl_region_open ro = { 0 };
	char buf[8192];
	int fds[4], nfds, fd;

	(void)state;
	/* garbage */
	fd = raw_connect();
	assert_int_equal(send(fd, "abc", 3, 0), 3);
	assert_true(closed_by_peer(fd));
	close(fd);
	/* wrong magic */
	fd = raw_connect();
	hdr(&hello.hdr, ROSHM_CTL_HELLO, sizeof(hello));
	hello.hdr.magic = 0xdeadbeef;
	assert_int_equal(send(fd, &hello, sizeof(hello), 0), sizeof(hello));
	assert_true(closed_by_peer(fd));
	close(fd);
	/* oversized datagram */
	fd = raw_connect();
	memset(buf, 0, sizeof(buf));
	hdr((void *)buf, ROSHM_CTL_HELLO, sizeof(buf));
	assert_int_equal(send(fd, buf, sizeof(buf), 0), sizeof(buf));
	assert_true(closed_by_peer(fd));
	close(fd);
	/* unterminated tenant: an error reply, then the connection ends (before
	 * HELLO one answer per connection: nobody holds a pending slot by
	 * sending requests that fail) */
	fd = raw_connect();
	hdr(&hello.hdr, ROSHM_CTL_HELLO, sizeof(hello));
	memset(hello.tenant, 'a', sizeof(hello.tenant));
	assert_int_equal(send(fd, &hello, sizeof(hello), 0), sizeof(hello));
	assert_true(raw_recv(fd, buf, sizeof(buf), fds, &nfds) > 0);
	assert_int_equal(((struct roshm_ctl_hdr *)buf)->status, -EINVAL);
	assert_int_equal(nfds, 0);
	assert_true(closed_by_peer(fd));
	close(fd);
	/* region open before HELLO */
	fd = raw_connect();
	hdr(&ro.hdr, ROSHM_CTL_REGION_OPEN, sizeof(ro));
	strcpy(ro.name, "default/good");
	assert_int_equal(send(fd, &ro, sizeof(ro), 0), sizeof(ro));
	assert_true(raw_recv(fd, buf, sizeof(buf), fds, &nfds) > 0);
	assert_int_equal(((struct roshm_ctl_hdr *)buf)->status, -ENOTCONN);
	assert_true(closed_by_peer(fd));
	close(fd);
	/* unknown type */
	fd = raw_connect();
	hdr(&ro.hdr, 99, sizeof(ro));
	assert_int_equal(send(fd, &ro, sizeof(ro), 0), sizeof(ro));
	assert_true(raw_recv(fd, buf, sizeof(buf), fds, &nfds) > 0);
	assert_int_equal(((struct roshm_ctl_hdr *)buf)->status, -EOPNOTSUPP);
	assert_true(closed_by_peer(fd));
	close(fd);
	/* descriptors sent to roshmd: one with a HELLO is closed and ignored,
	 * two in one message end the connection */
	{
		int pair[2], nfd;
		union {
			char b[CMSG_SPACE(sizeof(int) * 2)];
			struct cmsghdr a;
		} u;
		struct iovec iov = { .iov_base = &hello, .iov_len = sizeof(hello) };
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b };
		struct cmsghdr *c;

		assert_int_equal(pipe(pair), 0);
		memset(&hello, 0, sizeof(hello));
		hdr(&hello.hdr, ROSHM_CTL_HELLO, sizeof(hello));
		strcpy(hello.tenant, "default");
		for (int k = 1; k <= 2; k++) {
			fd = raw_connect();
			memset(&u, 0, sizeof(u));
			m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)k);
			c = CMSG_FIRSTHDR(&m);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)k);
			memcpy(CMSG_DATA(c), pair, sizeof(int) * (size_t)k);
			assert_int_equal(sendmsg(fd, &m, 0), sizeof(hello));
			if (k == 1) {
				assert_true(raw_recv(fd, buf, sizeof(buf), fds, &nfd) > 0);
				assert_int_equal(((struct roshm_ctl_hdr *)buf)->status, 0);
				for (int i = 0; i < nfd; i++)
					close(fds[i]);
			} else {
				assert_true(closed_by_peer(fd));
			}
			close(fd);
		}
		/* roshmd kept no copy of our pipe: its write end closes for real */
		close(pair[1]);
		char x;
		struct pollfd pp = { .fd = pair[0], .events = POLLIN };

		assert_int_equal(poll(&pp, 1, 2000), 1); /* a leaked copy would keep it open */
		assert_int_equal(read(pair[0], &x, 1), 0);
		close(pair[0]);
	}
	/* unknown admin command */
	char *json = NULL;

	assert_int_equal(th_admin(&d, "format-disk", &json), -EINVAL);
	assert_true(th_daemon_alive(&d));
}

static void test_good_client_unharmed(void **state)
{
	char *json = NULL;
	json_t *o;

	(void)state;
	assert_true(good_shared[1] > 0);
	good_shared[0] = 1;
	assert_int_equal(th_wait(good_pid), 0);
	assert_int_equal(good_shared[2], 0);
	assert_int_equal(th_admin(&d, "stats", &json), 0);
	o = json_loads(json, 0, NULL);
	assert_non_null(o);
	/* exactly the two clients that corrupted their indices were cut off */
	assert_int_equal(json_integer_value(json_object_get(o, "corrupt_clients")), 2);
	json_decref(o);
	free(json);
	printf("good client ran %llu iterations beside the hostile ones\n",
	       (unsigned long long)good_shared[1]);
}

static int setup(void **state)
{
	(void)state;
	if (th_daemon_start(&d, "hostile", "channel: { hugepages = \"off\"; };"))
		return -1;
	good_shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	good_pid = th_spawn(good_client, NULL);
	for (int i = 0; i < 500 && !good_shared[1]; i++)
		usleep(10000);
	return good_shared[1] ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	if (!good_shared[0]) {
		good_shared[0] = 1;
		th_wait(good_pid);
	}
	int st = th_daemon_stop(&d);

	if (st) {
		th_daemon_dump_log(&d);
		return -1;
	}
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_sqes),
		cmocka_unit_test(test_sq_flood),
		cmocka_unit_test(test_corrupt_sq_tail),
		cmocka_unit_test(test_corrupt_cq_head),
		cmocka_unit_test(test_close_mid_stream),
		cmocka_unit_test(test_ftruncate_sealed),
		cmocka_unit_test(test_malformed_ctl),
		cmocka_unit_test(test_good_client_unharmed),
	};

	return cmocka_run_group_tests_name("hostile", tests, setup, teardown);
}
