// SPDX-License-Identifier: MIT
/*
 * Client memory (issue 10, items 10 and 17). The memory a pod asks for is
 * the pod's: a client's channel and regions are charged to its own memory
 * cgroup, not to roshmd's (256 clients with 4 MiB arenas used to be 1 GiB
 * of roshmd's memory). And a client can no longer pull memory out from
 * under roshmd: no shrinking, no hole punched in a channel, no hugetlb
 * region (whose vanished pages would come back as SIGBUS in roshmd); a hole
 * it punches in its own (shmem) region costs roshmd nothing but a zero page.
 * Nor can a hole in a channel be hidden from roshmd's check by pages
 * allocated past its end (fallocate(KEEP_SIZE)): roshmd drops those and
 * refuses the channel, instead of filling the hole in its own memory.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <setjmp.h>
#include <unistd.h>
#include <cmocka.h>

#include "roshm.h"
#include "harness.h"

static struct th_daemon d;

/* ---- memory cgroups (v1 memory controller or v2) ---- */

struct cg {
	char path[256];
	const char *usage;            /* memory.usage_in_bytes (v1) or memory.current (v2) */
};

static bool cg_make(struct cg *c, const char *name)
{
	struct stat st;

	if (stat("/sys/fs/cgroup/memory/cgroup.procs", &st) == 0) {
		snprintf(c->path, sizeof(c->path), "/sys/fs/cgroup/memory/%s", name);
		c->usage = "memory.usage_in_bytes";
	} else if (stat("/sys/fs/cgroup/cgroup.controllers", &st) == 0) {
		snprintf(c->path, sizeof(c->path), "/sys/fs/cgroup/%s", name);
		c->usage = "memory.current";
	} else {
		return false;
	}
	return mkdir(c->path, 0755) == 0 || errno == EEXIST;
}

static long long cg_usage(const struct cg *c)
{
	char p[300];
	long long v = -1;
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", c->path, c->usage);
	f = fopen(p, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

static bool cg_join(const struct cg *c, pid_t pid)
{
	char p[300];
	FILE *f;
	bool ok;

	snprintf(p, sizeof(p), "%s/cgroup.procs", c->path);
	f = fopen(p, "w");
	if (!f)
		return false;
	ok = fprintf(f, "%d\n", (int)pid) > 0;
	return fclose(f) == 0 && ok;
}

static void cg_remove(const struct cg *c)
{
	rmdir(c->path);
}

#define ARENA (64ull << 20)

struct charge_report {
	long long before, after;       /* the client's cgroup */
	int err;
};

/* In the client's cgroup: attach with a 64 MiB arena and a 32 MiB region,
 * report the cgroup's usage before and after, wait to be told to go. */
static int charged_client(void *arg)
{
	struct charge_report *rep = arg;
	struct roshm_params p = { .sock_path = d.sock, .arena_size = ARENA,
				  .hugepages = ROSHM_HUGEPAGES_OFF };
	struct roshm *r;
	uint32_t h;
	int err;

	r = roshm_open(&p, &err);
	if (!r) {
		rep->err = err;
		return 1;
	}
	err = roshm_region_create(r, "charged", 32 << 20, NULL, &h);
	rep->err = err;
	pause();
	return 0;
}

static void test_memory_is_the_pods(void **state)
{
	struct cg cl, dm;
	char name[64];
	struct charge_report *rep;
	long long d_before, d_after, c_before, c_after;
	pid_t pid;

	(void)state;
	snprintf(name, sizeof(name), "roshm-test-%d-client", (int)getpid());
	if (!cg_make(&cl, name)) {
		print_message("skipped: no memory cgroup to make\n");
		skip();
	}
	snprintf(name, sizeof(name), "roshm-test-%d-daemon", (int)getpid());
	assert_true(cg_make(&dm, name));
	/* roshmd in a cgroup of its own (what it charges from now on) */
	assert_true(cg_join(&dm, d.pid));
	rep = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	rep->err = 1;
	c_before = cg_usage(&cl);
	d_before = cg_usage(&dm);
	pid = fork();
	if (pid == 0) {
		/* into the client's cgroup first, then attach */
		if (!cg_join(&cl, getpid()))
			_exit(2);
		_exit(charged_client(rep));
	}
	for (int i = 0; i < 500 && rep->err == 1; i++)
		usleep(10000);
	c_after = cg_usage(&cl);
	d_after = cg_usage(&dm);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	assert_int_equal(rep->err, 0);
	print_message("client cgroup +%lld MiB, roshmd cgroup +%lld MiB\n",
		      (c_after - c_before) >> 20, (d_after - d_before) >> 20);
	/* the arena and the region are the client's */
	assert_true(c_after - c_before >= (long long)(ARENA + (32 << 20)));
	/* roshmd maps them but is charged for none of it (a little slack for its
	 * own page tables and allocations) */
	assert_true(d_after - d_before < (8ll << 20));
	/* back to the root group before the groups go */
	if (!cg_join(&(struct cg){ .path = "/sys/fs/cgroup/memory" }, d.pid))
		cg_join(&(struct cg){ .path = "/sys/fs/cgroup" }, d.pid);
	cg_remove(&cl);
	cg_remove(&dm);
	munmap(rep, 4096);
}

/* ---- raw control messages, to hold the memfds ourselves ---- */

static int raw_connect(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);

	strcpy(sa.sun_path, d.sock);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

static void hdr(struct roshm_ctl_hdr *h, uint16_t type, size_t len)
{
	memset(h, 0, sizeof(*h));
	h->magic = ROSHM_CTL_MAGIC;
	h->type = type;
	h->version = ROSHM_ABI_VERSION;
	h->len = (uint32_t)len;
}

static int call(int sock, const void *buf, size_t len, int fd, void *reply, size_t cap, int *fds)
{
	union {
		char b[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr a;
	} u;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct pollfd p = { .fd = sock, .events = POLLIN };
	int n = 0;

	memset(&u, 0, sizeof(u));
	if (fd >= 0) {
		struct cmsghdr *c;

		m.msg_control = u.b;
		m.msg_controllen = CMSG_SPACE(sizeof(int));
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	assert_int_equal(sendmsg(sock, &m, 0), (ssize_t)len);
	iov.iov_base = reply;
	iov.iov_len = cap;
	m.msg_control = u.b;
	m.msg_controllen = sizeof(u.b);
	assert_int_equal(poll(&p, 1, 5000), 1);
	assert_true(recvmsg(sock, &m, 0) > 0);
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
		if (c->cmsg_type == SCM_RIGHTS) {
			n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			memcpy(fds, CMSG_DATA(c), sizeof(int) * (size_t)n);
		}
	return n;
}

static int memfd_touched(size_t size, unsigned flags, void **map)
{
	int fd = memfd_create("t", MFD_ALLOW_SEALING | flags);

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size)) {
		close(fd);
		return -errno;
	}
	*map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (*map == MAP_FAILED) {
		close(fd);
		return -ENOMEM;
	}
	return fd;
}

/* A raw attached client as tenant @tenant: returns the socket. */
static int raw_attach(const char *tenant, const char *token)
{
	struct roshm_ctl_hello h;
	struct roshm_ctl_hello_reply hr;
	struct roshm_ctl_channel ch;
	struct roshm_ctl_hdr rep;
	int sock = raw_connect(), fds[4], mfd, n;
	void *map;

	memset(&h, 0, sizeof(h));
	hdr(&h.hdr, ROSHM_CTL_HELLO, sizeof(h));
	strcpy(h.tenant, tenant);
	strcpy(h.token, token);
	call(sock, &h, sizeof(h), -1, &hr, sizeof(hr), fds);
	assert_int_equal(hr.hdr.status, 0);
	mfd = memfd_touched(hr.chan_size, 0, &map);
	assert_true(mfd >= 0);
	memset(&ch, 0, sizeof(ch));
	hdr(&ch.hdr, ROSHM_CTL_CHANNEL, sizeof(ch));
	ch.size = hr.chan_size;
	n = call(sock, &ch, sizeof(ch), mfd, &rep, sizeof(rep), fds);
	assert_int_equal(rep.status, 0);
	for (int i = 0; i < n; i++)
		close(fds[i]);
	close(mfd);
	return sock;
}

static long long allocated(int fd)
{
	struct stat st;

	assert_int_equal(fstat(fd, &st), 0);
	return (long long)st.st_blocks * 512;
}

#define HUGE_2M (2ull << 20)

/*
 * One channel memfd, tampered with before CHANNEL: @past bytes allocated past
 * its end (fallocate(KEEP_SIZE)) and @hole bytes punched out of its arena
 * (its second half). Returns CHANNEL's status with *after = the bytes the
 * memfd holds once roshmd answered, or 1 if this kind of memfd cannot be
 * made here (hugetlb without free huge pages).
 */
static int chan_tampered(unsigned mfd_flags, uint64_t arena, bool with_hole, size_t *size_out,
			 size_t *hole_out, long long *after)
{
	const size_t align = (mfd_flags & MFD_HUGETLB) ? HUGE_2M : 4096;
	struct roshm_ctl_hello h;
	struct roshm_ctl_hello_reply hr;
	struct roshm_ctl_channel ch;
	struct roshm_ctl_hdr rep;
	int sock = raw_connect(), fds[4], mfd, n;
	size_t size, hole;
	void *map;

	memset(&h, 0, sizeof(h));
	hdr(&h.hdr, ROSHM_CTL_HELLO, sizeof(h));
	strcpy(h.tenant, "a");
	strcpy(h.token, "token-a");
	h.arena_size = arena;
	call(sock, &h, sizeof(h), -1, &hr, sizeof(hr), fds);
	assert_int_equal(hr.hdr.status, 0);
	size = (hr.chan_size + align - 1) & ~(align - 1);
	mfd = memfd_touched(size, mfd_flags, &map);
	if (mfd < 0 || allocated(mfd) < (long long)size) {
		if (mfd >= 0) {
			munmap(map, size);
			close(mfd);
		}
		close(sock);
		return 1;
	}
	hole = (size / 2) & ~(align - 1);
	if (fallocate(mfd, FALLOC_FL_KEEP_SIZE, (off_t)size, (off_t)hole)) {
		munmap(map, size);
		close(mfd);
		close(sock);
		return 1;
	}
	if (with_hole)
		assert_int_equal(fallocate(mfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					  (off_t)(size - hole), (off_t)hole), 0);
	/* st_blocks alone still says "every page is there" */
	assert_true(allocated(mfd) >= (long long)size);
	memset(&ch, 0, sizeof(ch));
	hdr(&ch.hdr, ROSHM_CTL_CHANNEL, sizeof(ch));
	ch.size = hr.chan_size;
	n = call(sock, &ch, sizeof(ch), mfd, &rep, sizeof(rep), fds);
	for (int i = 0; i < n; i++)
		close(fds[i]);
	/* a channel taken is populated at once (rd_memfd_take), before the reply */
	*after = allocated(mfd);
	*size_out = size;
	*hole_out = hole;
	munmap(map, size);
	close(mfd);
	close(sock);
	return rep.status;
}

/*
 * A channel with a hole in it, hidden from st_blocks by as many bytes
 * allocated past its end before CHANNEL: roshmd must refuse it, and allocate
 * none of the hole (its MADV_POPULATE_WRITE would fill the hole in roshmd's
 * memory cgroup; on hugetlb, a populate that fails leaves a hole the poller
 * takes a SIGBUS on). The same memfd without the hole is taken, and what
 * was past its end is gone (dropped by roshmd). On hugetlb too where free
 * huge pages allow it.
 */
static void test_channel_hole_past_end(void **state)
{
	static const struct {
		unsigned flags;
		const char *kind;
	} kinds[] = { { 0, "shmem" }, { MFD_HUGETLB, "hugetlb" } };
	size_t size, hole;
	long long after;
	int st;

	(void)state;
	for (unsigned k = 0; k < 2; k++) {
		st = chan_tampered(kinds[k].flags, 64 << 20, true, &size, &hole, &after);
		if (st == 1) {
			print_message("%s: skipped (no such memfd with pages past its end here)\n",
				      kinds[k].kind);
			continue;
		}
		if (st == 0)
			fail_msg("%s: roshmd took a channel of %zu bytes with a %zu-byte hole hidden by "
				 "as many bytes allocated past its end; the memfd now holds %lld bytes: "
				 "roshmd allocated %lld of them",
				 kinds[k].kind, size, hole, after, after - (long long)size);
		assert_int_equal(st, -EFAULT);
		/* nothing past the end, and the hole still a hole */
		if (after != (long long)(size - hole))
			fail_msg("%s: refused, but the memfd holds %lld bytes (expected %zu: %zu minus "
				 "the hole; the pages past its end dropped)",
				 kinds[k].kind, after, size - hole, size);
		print_message("%s: channel with a %zu MiB hole refused; memfd %lld MiB\n",
			      kinds[k].kind, hole >> 20, after >> 20);

		st = chan_tampered(kinds[k].flags, 64 << 20, false, &size, &hole, &after);
		assert_int_equal(st, 0);
		if (after != (long long)size)
			fail_msg("%s: taken, but the memfd holds %lld bytes: the %zu bytes past its "
				 "end of %zu were not dropped", kinds[k].kind, after, hole, size);
	}
	assert_true(th_daemon_alive(&d));
}

#define REGION (1u << 20)

/* A region backed by huge pages is refused. One whose owner punches holes
 * in it: roshmd's first touch of a hole (another tenant's READ) is caught by
 * the hole guard, the owner is disconnected and the region closed, and once
 * roshmd lets go of it the region's memory is punched out by roshmd (no page
 * its touches allocated stays charged to it). */
static void test_region_holes(void **state)
{
	struct roshm_ctl_region_create rc;
	struct roshm_ctl_region_reply rr;
	uint64_t size = roshm_region_map_size(REGION, 0, 0);
	int sock = raw_attach("a", "token-a"), fds[4], fd;
	void *map;

	(void)state;
	memset(&rc, 0, sizeof(rc));
	hdr(&rc.hdr, ROSHM_CTL_REGION_CREATE, sizeof(rc));
	strcpy(rc.name, "holes");
	rc.size = REGION;
	rc.policy = ROSHM_POLICY_LIST;
	rc.ntenants = 1;
	strcpy(rc.tenants[0], "b");
	/* on 2 MiB pages: refused (when this machine has huge pages at all) */
	fd = memfd_touched((size + (2u << 20) - 1) & ~((2ull << 20) - 1), MFD_HUGETLB, &map);
	if (fd >= 0) {
		call(sock, &rc, sizeof(rc), fd, &rr, sizeof(rr), fds);
		assert_int_equal(rr.hdr.status, -EINVAL);
		munmap(map, (size + (2u << 20) - 1) & ~((2ull << 20) - 1));
		close(fd);
	} else {
		print_message("no huge pages here: the hugetlb region case is not run\n");
	}
	fd = memfd_touched(size, 0, &map);
	assert_true(fd >= 0);
	call(sock, &rc, sizeof(rc), fd, &rr, sizeof(rr), fds);
	assert_int_equal(rr.hdr.status, 0);
	/* tenant b writes into it and reads back through roshmd */
	struct roshm_params p = { .sock_path = d.sock, .tenant = "b", .token = "token-b" };
	struct roshm *r;
	uint32_t h;
	uint8_t *arena;
	int err;

	r = roshm_open(&p, &err);
	assert_non_null(r);
	assert_int_equal(roshm_region_open(r, "a/holes", &h, NULL), 0);
	arena = roshm_arena(r, NULL);
	memset(arena, 0x5a, REGION);
	assert_int_equal(roshm_write_sync(r, h, 0, 0, REGION), 0);
	/* the owner punches the whole data area out */
	assert_int_equal(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				   (off_t)roshm_region_data_off(0, 0), REGION), 0);
	memset(arena, 0xff, REGION);
	err = roshm_read_sync(r, h, 0, 0, REGION);
	if (err == 0) {
		for (uint32_t i = 0; i < REGION; i++)
			if (arena[i]) {
				fail_msg("byte %u reads %#x from a hole: expected zeros", i, arena[i]);
				break;
			}
	} else {
		assert_int_equal(err, -ESTALE);
	}
	/* the owner is disconnected for it */
	struct pollfd pfd = { .fd = sock, .events = POLLIN };
	char b1;

	assert_int_equal(poll(&pfd, 1, 5000), 1);
	assert_int_equal(recv(sock, &b1, 1, MSG_DONTWAIT), 0);
	/* and its region is gone for the others */
	for (int i = 0; i < 200 && (err = roshm_write_sync(r, h, 8192, 0, 4096)) == 0; i++)
		usleep(10000);
	assert_int_equal(err, -ESTALE);
	/* once the last handle goes, roshmd punches the region out: nothing
	 * of it is left (what roshmd's touches allocated included) */
	roshm_region_close(r, h);
	struct stat st;

	for (int i = 0; i < 200; i++) {
		assert_int_equal(fstat(fd, &st), 0);
		if (st.st_blocks == 0)
			break;
		usleep(10000);
	}
	assert_int_equal(st.st_blocks, 0);
	char *json = NULL;

	assert_int_equal(th_admin(&d, "stats", &json), 0);
	if (!strstr(json, "\"regions_tampered\":1") && !strstr(json, "\"regions_tampered\": 1"))
		fail_msg("stats do not count the tampered region: %s", json);
	free(json);
	roshm_close(r);
	munmap(map, size);
	close(fd);
	close(sock);
	assert_true(th_daemon_alive(&d));
}

static int setup(void **state)
{
	(void)state;
	return th_daemon_start(&d, "memory",
			       "channel: { max_arena_size = 134217728; };\n"
			       "tenants = ( { name = \"default\"; token = \"\"; },\n"
			       "            { name = \"a\"; token = \"token-a\"; },\n"
			       "            { name = \"b\"; token = \"token-b\"; } );");
}

static int teardown(void **state)
{
	(void)state;
	if (th_daemon_stop(&d)) {
		th_daemon_dump_log(&d);
		return -1;
	}
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_memory_is_the_pods),
		cmocka_unit_test(test_region_holes),
		cmocka_unit_test(test_channel_hole_past_end),
	};

	return cmocka_run_group_tests_name("memory", tests, setup, teardown);
}
