// SPDX-License-Identifier: MIT
/* Shared pieces of the security tests: see attack.h. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "attack.h"
#include "config.h"
#include "registry/registry.h"

struct roshm *atk_open(const struct th_daemon *d, const char *tenant,
		       const struct roshm_params *p, int *err)
{
	struct roshm_params q = { 0 };
	char token[ROSHM_NAME_MAX + 1];
	int e;

	if (p)
		q = *p;
	snprintf(token, sizeof(token), "t%s", tenant);
	q.sock_path = d->sock;
	q.tenant = tenant;
	q.token = token;
	if (!q.reconnect_ms)
		q.reconnect_ms = 300;
	return roshm_open(&q, err ? err : &e);
}

double atk_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

uint64_t atk_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void atk_pin(int cpu)
{
	cpu_set_t set, one;
	int n = 0;

	if (sched_getaffinity(0, sizeof(set), &set))
		return;
	int count = CPU_COUNT(&set);

	if (!count)
		return;
	CPU_ZERO(&one);
	for (int i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, &set) && n++ == cpu % count) {
			CPU_SET(i, &one);
			break;
		}
	pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
}

int atk_netns_enter_new(char *name, size_t cap)
{
	snprintf(name, cap, "rsec%d", (int)getpid());
	if (th_sh("ip netns add %s && ip -n %s link set lo up", name, name))
		return -EIO;
	th_cleanup_sh("ip netns del %s 2>/dev/null", name);
	return th_enter_netns(name);
}

int atk_workdir(char *dir, size_t dcap, char *secret_path, size_t scap)
{
	FILE *f;

	snprintf(dir, dcap, "/tmp/roshm-sec-XXXXXX");
	if (!mkdtemp(dir))
		return -errno;
	th_cleanup_dir(dir);
	snprintf(secret_path, scap, "%s/cluster.secret", dir);
	f = fopen(secret_path, "w");
	if (!f)
		return -errno;
	fprintf(f, "%s\n", ATK_SECRET);
	fclose(f);
	return 0;
}

int atk_open_retry(struct roshm *r, const char *name, uint32_t *h)
{
	int ret = -ENOENT;

	for (int i = 0; i < 300 && (ret == -ENOENT || ret == -EAGAIN || ret == -EHOSTUNREACH); i++) {
		ret = roshm_region_open(r, name, h, NULL);
		if (ret == -ENOENT || ret == -EAGAIN || ret == -EHOSTUNREACH)
			usleep(10000);
	}
	return ret;
}

int atk_two_nodes(struct th_daemon *n1, struct th_daemon *n2, const char *prefix, int port1,
		  int port2, const char *workdir, const char *secret, const char *head)
{
	for (int n = 1; n <= 2; n++) {
		char name[64], extra[2048];

		snprintf(name, sizeof(name), "%s%d", prefix, n);
		snprintf(extra, sizeof(extra),
			 "%s"
			 "channel: { hugepages = \"off\"; };\n"
			 "transport: { tcp: { enabled = true; listen = \"127.0.0.1\"; port = %d;"
			 " secret_file = \"%s\"; }; };\n"
			 "registry: { dir = \"%s/registry\"; revalidate_ms = 100; };\n",
			 head ? head : ATK_TENANTS, n == 1 ? port1 : port2, secret, workdir);
		if (th_daemon_start(n == 1 ? n1 : n2, name, extra))
			return -1;
	}
	return 0;
}

/* ---- roshmd liveness ---- */

/* How each roshmd we saw die ended (waitpid reaps once: keep the answer). */
static struct {
	pid_t pid;
	int status;                   /* waitpid status, -1: unknown */
} gone[64];
static int ngone;

static int gone_find(pid_t pid)
{
	for (int i = 0; i < ngone; i++)
		if (gone[i].pid == pid)
			return i;
	return -1;
}

bool atk_alive(struct th_daemon *d)
{
	int st;
	pid_t r;

	if (d->pid <= 0)
		return false;
	if (gone_find(d->pid) >= 0)
		return false;
	r = waitpid(d->pid, &st, WNOHANG);
	if (r == 0)
		return true;
	if (ngone < (int)(sizeof(gone) / sizeof(gone[0]))) {
		gone[ngone].pid = d->pid;
		gone[ngone].status = r == d->pid ? st : -1;
		ngone++;
	}
	return false;
}

const char *atk_how(struct th_daemon *d)
{
	static char buf[96];
	int i;

	if (atk_alive(d))
		return "running";
	i = gone_find(d->pid);
	if (i < 0 || gone[i].status < 0)
		snprintf(buf, sizeof(buf), "gone (status unknown)");
	else if (WIFSIGNALED(gone[i].status))
		snprintf(buf, sizeof(buf), "killed by signal %d (%s)", WTERMSIG(gone[i].status),
			 strsignal(WTERMSIG(gone[i].status)));
	else
		snprintf(buf, sizeof(buf), "exited with status %d", WEXITSTATUS(gone[i].status));
	return buf;
}

void atk_log_tail(const struct th_daemon *d, int lines)
{
	FILE *f = fopen(d->log, "r");
	char *buf;
	long n;

	if (!f)
		return;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n) {
		long i = n;

		buf[n] = 0;
		for (int k = 0; i > 0 && k <= lines; i--)
			if (buf[i - 1] == '\n')
				k++;
		fprintf(stderr, "---- last lines of %s ----\n%s---- end ----\n", d->log, buf + i);
	}
	free(buf);
	fclose(f);
}

int atk_log_count(const struct th_daemon *d, const char *needle)
{
	FILE *f = fopen(d->log, "r");
	char line[2048];
	int n = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, needle) != NULL;
	fclose(f);
	return n;
}

void atk_assert_alive(struct th_daemon *d)
{
	if (!atk_alive(d)) {
		atk_log_tail(d, 25);
		fail_msg("roshmd %s is gone: %s", d->name, atk_how(d));
	}
}

void atk_daemon_kill(struct th_daemon *d)
{
	int st;

	if (d->pid > 0 && atk_alive(d)) {
		kill(d->pid, SIGCONT);
		kill(d->pid, SIGKILL);
		waitpid(d->pid, &st, 0);
	}
	d->pid = 0;
}

/* ---- bounded waits ---- */

int atk_wait_child(pid_t pid, int timeout_ms)
{
	uint64_t end = atk_now_ms() + (uint64_t)timeout_ms;
	int st;

	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		if (r < 0)
			return -errno;
		if (atk_now_ms() >= end)
			break;
		usleep(5000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -ETIME;
}

int atk_run_bounded(int (*fn)(void *), void *arg, int timeout_ms)
{
	pid_t pid = th_spawn(fn, arg);

	if (pid < 0)
		return -errno;
	return atk_wait_child(pid, timeout_ms);
}

struct roshm_sqe *atk_sqe(struct roshm *r)
{
	struct roshm_sqe *s = roshm_get_sqe(r);

	if (!s) {
		fail_msg("SQ full");
		abort(); /* fail_msg does not return; this tells the compiler */
	}
	return s;
}

int atk_reap(struct roshm *r, struct roshm_cqe *out, int timeout_ms)
{
	struct roshm_cqe *c;
	int ret = roshm_wait_cqe_timeout(r, &c, timeout_ms);

	if (ret)
		return ret;
	*out = *c;
	roshm_cqe_seen(r, c);
	return 0;
}

/* ---- the bystander ---- */

struct atk_by_shared {
	volatile int stop;
	volatile int ready;           /* 1: first round done, -1: could not start */
	volatile int errors;
	volatile uint64_t iters;
	char msg[256];
};

#define BY_SIZE 65536u
#define BY_CANARY (1u << 20)
#define BY_UNTOUCHED 16384u           /* [BY_UNTOUCHED, BY_SIZE) is never written */

struct by_ctx {
	struct atk_bystander *b;
	struct th_daemon *d;
	const char *tenant;
};

static uint8_t by_pat(uint32_t i)
{
	return (uint8_t)(i * 131u + 7u);
}

/* One operation, its CQE waited for with a bound: a stalled roshmd is an
 * error for a client that must keep working, a slow one is not. */
static int by_op(struct roshm *r, const struct roshm_sqe *tmpl, uint64_t *res)
{
	struct roshm_sqe *s = roshm_get_sqe(r);
	struct roshm_cqe c;
	int ret;

	if (!s)
		return -EBUSY;
	*s = *tmpl;
	roshm_submit(r);
	ret = atk_reap(r, &c, 20000);
	if (ret)
		return ret;
	if (res)
		*res = c.result;
	return c.status;
}

static int by_fail(struct atk_by_shared *sh, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(sh->msg, sizeof(sh->msg), fmt, ap);
	va_end(ap);
	sh->errors++;
	if (!sh->ready)
		sh->ready = -1;
	return 1;
}

static int by_check_untouched(struct atk_by_shared *sh, const uint8_t *d, const uint8_t *canary,
			      const uint8_t *canary_hdr, const uint8_t *hdr_snap)
{
	for (uint32_t i = BY_UNTOUCHED; i < BY_SIZE; i++)
		if (d[i] != by_pat(i))
			return by_fail(sh, "its region's byte %u changed to %#x (expected %#x)", i, d[i],
				       by_pat(i));
	for (uint32_t i = 0; i < BY_CANARY; i++)
		if (canary[i] != by_pat(i ^ 0x55))
			return by_fail(sh, "its canary region's byte %u changed to %#x (expected %#x)", i,
				       canary[i], by_pat(i ^ 0x55));
	if (memcmp(canary_hdr, hdr_snap, ROSHM_REGION_HDR_SIZE))
		return by_fail(sh, "its canary region's header changed");
	return 0;
}

static int by_main(void *arg)
{
	struct by_ctx *x = arg;
	struct atk_by_shared *sh = x->b->sh;
	static uint8_t hdr_snap[ROSHM_REGION_HDR_SIZE];
	char cname[64];
	struct roshm_sqe s;
	uint32_t h, hc;
	uint8_t *a, *d, *canary, *canary_hdr;
	uint64_t old;
	int err, ret;
	struct roshm *r = atk_open(x->d, x->tenant, NULL, &err);

	if (!r)
		return by_fail(sh, "attach: %s", roshm_strerror(err));
	snprintf(cname, sizeof(cname), "%s-canary", x->b->name);
	if ((ret = roshm_region_create(r, x->b->name, BY_SIZE, NULL, &h)) ||
	    (ret = roshm_region_create(r, cname, BY_CANARY, NULL, &hc)))
		return by_fail(sh, "region create: %s", roshm_strerror(ret));
	a = roshm_arena(r, NULL);
	d = roshm_region_data(r, h, NULL);
	canary = roshm_region_data(r, hc, NULL);
	/* a region without a log: its header sits one page before the data */
	canary_hdr = canary - roshm_region_data_off(0, 0);
	memcpy(hdr_snap, canary_hdr, sizeof(hdr_snap));
	for (uint32_t i = BY_UNTOUCHED; i < BY_SIZE; i++)
		d[i] = by_pat(i);
	for (uint32_t i = 0; i < BY_CANARY; i++)
		canary[i] = by_pat(i ^ 0x55);
	for (uint64_t it = 0;; it++) {
		bool last = sh->stop;

		memset(a, (int)(it & 0xff), 4096);
		roshm_prep_write(&s, h, 4096, 0, 4096);
		if ((ret = by_op(r, &s, NULL)))
			return by_fail(sh, "iteration %llu: WRITE: %s", (unsigned long long)it,
				       roshm_strerror(ret));
		roshm_prep_read(&s, h, 4096, 8192, 4096);
		if ((ret = by_op(r, &s, NULL)))
			return by_fail(sh, "iteration %llu: READ: %s", (unsigned long long)it,
				       roshm_strerror(ret));
		roshm_prep_fetch_add(&s, h, 0, 1);
		if ((ret = by_op(r, &s, &old)))
			return by_fail(sh, "iteration %llu: FETCH_ADD: %s", (unsigned long long)it,
				       roshm_strerror(ret));
		if (old != it || memcmp(a, a + 8192, 4096) || d[4096] != (uint8_t)it)
			return by_fail(sh, "iteration %llu: wrong bytes (counter %llu)",
				       (unsigned long long)it, (unsigned long long)old);
		if ((it % 64 == 0 || last) && by_check_untouched(sh, d, canary, canary_hdr, hdr_snap))
			return 1;
		sh->iters = it + 1;
		sh->ready = 1;
		if (last)
			break;
		usleep(1000); /* a client that works, not one that floods */
	}
	roshm_close(r);
	return 0;
}

int atk_bystander_start(struct atk_bystander *b, struct th_daemon *d, const char *tenant,
			const char *name)
{
	struct by_ctx x = { .b = b, .d = d, .tenant = tenant };

	memset(b, 0, sizeof(*b));
	snprintf(b->name, sizeof(b->name), "%s", name);
	b->sh = mmap(NULL, sizeof(*b->sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (b->sh == MAP_FAILED) {
		b->sh = NULL;
		return -ENOMEM;
	}
	b->pid = th_spawn(by_main, &x);
	for (int i = 0; i < 1000 && !b->sh->ready; i++)
		usleep(10000);
	if (b->sh->ready != 1) {
		fprintf(stderr, "bystander %s did not start: %s\n", name, b->sh->msg);
		atk_bystander_stop(b);
		return -EIO;
	}
	return 0;
}

void atk_bystander_stop(struct atk_bystander *b)
{
	if (b->pid > 0) {
		b->sh->stop = 1;
		atk_wait_child(b->pid, 30000);
		b->pid = 0;
	}
}

void atk_bystander_check(struct atk_bystander *b)
{
	int st;

	if (!b->sh)
		fail_msg("no bystander");
	b->sh->stop = 1;
	st = b->pid > 0 ? atk_wait_child(b->pid, 30000) : -ECHILD;
	b->pid = 0;
	if (b->sh->errors || st)
		fail_msg("bystander %s (another tenant) was harmed after %llu rounds: %s (exit %d)",
			 b->name, (unsigned long long)b->sh->iters,
			 b->sh->msg[0] ? b->sh->msg : "no message", st);
	if (!b->sh->iters)
		fail_msg("bystander %s never ran", b->name);
	print_message("bystander %s: %llu rounds, no error, its regions unchanged\n", b->name,
		      (unsigned long long)b->sh->iters);
}

/* ---- control socket ---- */

int atk_ctl_connect(const char *sock)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	return fd;
}

static ssize_t ctl_reply(int fd, void *reply, size_t cap, int timeout_ms)
{
	union {
		char b[CMSG_SPACE(sizeof(int) * 8)];
		struct cmsghdr a;
	} u;
	struct iovec iov = { .iov_base = reply, .iov_len = cap };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b,
			    .msg_controllen = sizeof(u.b) };
	struct pollfd p = { .fd = fd, .events = POLLIN };
	ssize_t n;

	if (poll(&p, 1, timeout_ms) != 1)
		return -ETIME;
	n = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
	if (n < 0)
		return -errno;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++)
				close(((int *)CMSG_DATA(c))[i]);
	return n;
}

ssize_t atk_ctl_request(const char *sock, const void *req, size_t len, void *reply, size_t cap,
			int timeout_ms)
{
	int fd = atk_ctl_connect(sock);
	ssize_t n;

	if (fd < 0)
		return fd;
	if (send(fd, req, len, MSG_NOSIGNAL) != (ssize_t)len) {
		n = -errno;
		close(fd);
		return n;
	}
	n = ctl_reply(fd, reply, cap, timeout_ms);
	close(fd);
	return n;
}

void atk_ctl_hdr(struct roshm_ctl_hdr *h, uint16_t type, size_t len)
{
	memset(h, 0, sizeof(*h));
	h->magic = ROSHM_CTL_MAGIC;
	h->type = type;
	h->version = ROSHM_ABI_VERSION;
	h->len = (uint32_t)len;
}

int atk_send_open(int fd, const char *name, const int *fds, int n)
{
	struct roshm_ctl_region_open o;
	union {
		char b[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr a;
	} u;
	struct iovec iov = { .iov_base = &o, .iov_len = sizeof(o) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (n < 0 || n > 4)
		return -EINVAL;
	memset(&o, 0, sizeof(o));
	atk_ctl_hdr(&o.hdr, ROSHM_CTL_REGION_OPEN, sizeof(o));
	snprintf(o.name, sizeof(o.name), "%s", name);
	if (n) {
		struct cmsghdr *c;

		memset(&u, 0, sizeof(u));
		m.msg_control = u.b;
		m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)n);
	}
	if (sendmsg(fd, &m, MSG_NOSIGNAL) != (ssize_t)sizeof(o))
		return errno ? -errno : -EIO;
	return 0;
}

int atk_wait_reply(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char buf[512];

	if (poll(&p, 1, ms) != 1)
		return -ETIME;
	return recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0 ? 1 : 0;
}

int atk_tenant_drain(const char *sock, const char *tenant, const char *token)
{
	struct roshm_ctl_admin q;
	int fd = atk_ctl_connect(sock), ret;

	if (fd < 0)
		return fd;
	memset(&q, 0, sizeof(q));
	atk_ctl_hdr(&q.hdr, ROSHM_CTL_ADMIN, sizeof(q));
	snprintf(q.cmd, sizeof(q.cmd), "drain tenant %s", tenant);
	snprintf(q.tenant, sizeof(q.tenant), "%s", tenant);
	snprintf(q.token, sizeof(q.token), "%s", token);
	ret = send(fd, &q, sizeof(q), MSG_NOSIGNAL) == (ssize_t)sizeof(q) ? atk_wait_reply(fd, 5000) :
									       -errno;
	close(fd);
	return ret;
}

ssize_t atk_ctl_call(int fd, const void *req, size_t len, int send_fd, void *reply, size_t cap,
		     int timeout_ms)
{
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr a;
	} u;
	struct iovec iov = { .iov_base = (void *)req, .iov_len = len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (send_fd >= 0) {
		struct cmsghdr *c;

		memset(&u, 0, sizeof(u));
		m.msg_control = u.b;
		m.msg_controllen = sizeof(u.b);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &send_fd, sizeof(int));
	}
	if (sendmsg(fd, &m, MSG_NOSIGNAL) != (ssize_t)len)
		return -errno;
	return ctl_reply(fd, reply, cap, timeout_ms);
}

int atk_memfd(size_t size, void **map)
{
	int fd = memfd_create("atk", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size) < 0) {
		close(fd);
		return -EIO;
	}
	*map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (*map == MAP_FAILED) {
		close(fd);
		return -ENOMEM;
	}
	return fd;
}

int atk_raw_attach(const char *sock, const char *tenant, uint32_t sq, uint64_t arena)
{
	return atk_raw_attach_key(sock, tenant, sq, arena, 0, NULL);
}

int atk_raw_attach_key(const char *sock, const char *tenant, uint32_t sq, uint64_t arena,
		       uint64_t key, uint64_t *key_out)
{
	struct roshm_ctl_hello h;
	struct roshm_ctl_hello_reply hr;
	struct roshm_ctl_channel ch;
	struct roshm_ctl_hdr rep;
	int fd = atk_ctl_connect(sock), mfd;
	ssize_t n;
	void *map;

	if (fd < 0)
		return fd;
	memset(&h, 0, sizeof(h));
	atk_ctl_hdr(&h.hdr, ROSHM_CTL_HELLO, sizeof(h));
	snprintf(h.tenant, sizeof(h.tenant), "%s", tenant);
	snprintf(h.token, sizeof(h.token), "t%s", tenant);
	h.sq_entries = sq;
	h.cq_entries = sq;
	h.arena_size = arena;
	h.client_key = key;
	n = atk_ctl_call(fd, &h, sizeof(h), -1, &hr, sizeof(hr), 5000);
	if (n != (ssize_t)sizeof(hr) || hr.hdr.status) {
		close(fd);
		return n < 0 ? (int)n : n == (ssize_t)sizeof(rep) ? hr.hdr.status : -EPROTO;
	}
	if (key_out)
		*key_out = hr.client_key;
	mfd = atk_memfd(hr.chan_size, &map);
	if (mfd < 0) {
		close(fd);
		return mfd;
	}
	memset(&ch, 0, sizeof(ch));
	atk_ctl_hdr(&ch.hdr, ROSHM_CTL_CHANNEL, sizeof(ch));
	ch.size = hr.chan_size;
	n = atk_ctl_call(fd, &ch, sizeof(ch), mfd, &rep, sizeof(rep), 5000);
	munmap(map, hr.chan_size);
	close(mfd);
	if (n != (ssize_t)sizeof(rep) || rep.status) {
		close(fd);
		return n < 0 ? (int)n : rep.status ? rep.status : -EPROTO;
	}
	return fd;
}

/* An admin request with the node's admin token: the harness keeps it in
 * the daemon's directory, beside the socket (a test convention only: a real
 * node keeps it where no pod looks). */
static void admin_req(struct roshm_ctl_admin *q, const char *sock, const char *cmd)
{
	char path[512];
	const char *slash = strrchr(sock, '/');
	FILE *f;

	memset(q, 0, sizeof(*q));
	q->hdr.magic = ROSHM_CTL_MAGIC;
	q->hdr.type = ROSHM_CTL_ADMIN;
	q->hdr.version = ROSHM_ABI_VERSION;
	q->hdr.len = sizeof(*q);
	snprintf(q->cmd, sizeof(q->cmd), "%s", cmd);
	snprintf(path, sizeof(path), "%.*s/admin.token", slash ? (int)(slash - sock) : 1,
		 slash ? sock : ".");
	f = fopen(path, "r");
	if (f) {
		if (!fgets(q->admin_token, sizeof(q->admin_token), f))
			q->admin_token[0] = 0;
		q->admin_token[strcspn(q->admin_token, "\n")] = 0;
		fclose(f);
	}
}

int atk_admin(const char *sock, const char *cmd, int timeout_ms, char **json)
{
	struct roshm_ctl_admin q;
	char *buf = malloc(ROSHM_CTL_MSG_MAX);
	const struct roshm_ctl_hdr *h = (const void *)buf;
	ssize_t n;
	int ret;

	if (!buf)
		return -ENOMEM;
	admin_req(&q, sock, cmd);
	n = atk_ctl_request(sock, &q, sizeof(q), buf, ROSHM_CTL_MSG_MAX, timeout_ms);
	if (n < 0)
		ret = (int)n;
	else if (n == 0)
		ret = -ECONNRESET;
	else if ((size_t)n < sizeof(*h) || h->magic != ROSHM_CTL_MAGIC)
		ret = -EPROTO;
	else if (h->status)
		ret = h->status;
	else if ((size_t)n == sizeof(*h) || buf[n - 1] != 0)
		ret = -EPROTO;
	else {
		*json = strdup(buf + sizeof(*h));
		ret = *json ? 0 : -ENOMEM;
	}
	free(buf);
	return ret;
}

int atk_admin_send(const char *sock, const char *cmd)
{
	struct roshm_ctl_admin q;
	int fd = atk_ctl_connect(sock);

	if (fd < 0)
		return fd;
	admin_req(&q, sock, cmd);
	if (send(fd, &q, sizeof(q), MSG_NOSIGNAL) != (ssize_t)sizeof(q)) {
		int e = -errno;

		close(fd);
		return e;
	}
	return fd;
}

/* ---- tcp peer ---- */

/* HMAC(secret, label n1 n2 node1 node2) with every field zero-padded (wire.h). */
static void peer_mac(const char *secret, const char *label, const uint8_t *n1, const uint8_t *n2,
		     const char *node1, const char *node2, uint8_t *out)
{
	uint8_t msg[16 + 2 * ROSHM_TCP_NONCE + 2 * ROSHM_NAME_MAX];
	unsigned int len;

	memset(msg, 0, sizeof(msg));
	memcpy(msg, label, strlen(label));
	memcpy(msg + 16, n1, ROSHM_TCP_NONCE);
	memcpy(msg + 16 + ROSHM_TCP_NONCE, n2, ROSHM_TCP_NONCE);
	memcpy(msg + 16 + 2 * ROSHM_TCP_NONCE, node1, strnlen(node1, ROSHM_NAME_MAX - 1));
	memcpy(msg + 16 + 2 * ROSHM_TCP_NONCE + ROSHM_NAME_MAX, node2,
	       strnlen(node2, ROSHM_NAME_MAX - 1));
	HMAC(EVP_sha256(), secret, (int)strlen(secret), msg, sizeof(msg), out, &len);
}

int atk_write_all(int fd, const void *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = send(fd, (const char *)buf + done, len - done, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		done += (size_t)n;
	}
	return 0;
}

int atk_read_full(int fd, void *buf, size_t len, int timeout_ms)
{
	uint64_t end = atk_now_ms() + (uint64_t)timeout_ms;
	size_t got = 0;

	while (got < len) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		uint64_t now = atk_now_ms();

		if (now >= end || poll(&p, 1, (int)(end - now)) != 1)
			return -ETIME;
		ssize_t n = read(fd, (char *)buf + got, len - got);

		if (n == 0)
			return -ECONNRESET;
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		got += (size_t)n;
	}
	return 0;
}

int atk_peer_connect(const char *ip, int port, const char *secret, const char *node)
{
	return atk_peer_connect_from(NULL, ip, port, secret, node);
}

int atk_peer_connect_from(const char *src, const char *ip, int port, const char *secret,
			  const char *node)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct sockaddr_in la = { .sin_family = AF_INET };
	struct roshm_tcp_hello1 h1 = { .magic = ROSHM_TCP_MAGIC, .version = ROSHM_TCP_VERSION };
	struct roshm_tcp_hello2 h2;
	struct roshm_tcp_hello3 h3 = { .magic = ROSHM_TCP_MAGIC, .version = ROSHM_TCP_VERSION };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ret;

	if (fd < 0)
		return -errno;
	inet_pton(AF_INET, ip, &sa.sin_addr);
	if (src && inet_pton(AF_INET, src, &la.sin_addr) != 1) {
		ret = -EINVAL;
		goto err;
	}
	if ((src && bind(fd, (struct sockaddr *)&la, sizeof(la)) < 0) ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    getrandom(h1.nonce, sizeof(h1.nonce), 0) != sizeof(h1.nonce)) {
		ret = -errno;
		goto err;
	}
	snprintf(h1.node, sizeof(h1.node), "%s", node);
	if ((ret = atk_write_all(fd, &h1, sizeof(h1))) ||
	    (ret = atk_read_full(fd, &h2, sizeof(h2), 5000)))
		goto err;
	peer_mac(secret, "roshm-req", h2.nonce, h1.nonce, h2.node, h1.node, h3.mac);
	if ((ret = atk_write_all(fd, &h3, sizeof(h3))))
		goto err;
	return fd;
err:
	close(fd);
	return ret;
}

/* ---- registry ---- */

int atk_record(const char *regdir, const char *tenant, const char *name, struct atk_rec *rec)
{
	char path[600];
	json_error_t e;
	json_t *o;
	const char *ep, *st;

	snprintf(path, sizeof(path), "%s/regions/%s/%s.json", regdir, tenant, name);
	if (access(path, F_OK))
		return -ENOENT;
	o = json_load_file(path, 0, &e);
	if (!o)
		return -EBADMSG;
	ep = json_string_value(json_object_get(o, "epoch"));
	st = json_string_value(json_object_get(o, "state"));
	memset(rec, 0, sizeof(*rec));
	rec->id = (uint32_t)json_integer_value(json_object_get(o, "region_id"));
	rec->key = (uint32_t)json_integer_value(json_object_get(o, "key"));
	rec->epoch = ep ? strtoull(ep, NULL, 10) : 0;
	snprintf(rec->state, sizeof(rec->state), "%s", st ? st : "");
	json_decref(o);
	return ep ? 0 : -EBADMSG;
}

int atk_record_count(const char *regdir, const char *tenant)
{
	char path[600];
	struct dirent *e;
	DIR *dir;
	int n = 0;

	snprintf(path, sizeof(path), "%s/regions/%s", regdir, tenant);
	dir = opendir(path);
	if (!dir)
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(dir))) {
		size_t l = strlen(e->d_name);

		n += e->d_name[0] != '.' && l > 5 && !strcmp(e->d_name + l - 5, ".json");
	}
	closedir(dir);
	return n;
}

/* ---- region memory ---- */

struct roshm_region_hdr *atk_region_hdr(struct roshm *r, uint32_t handle, uint32_t slots,
					uint32_t slot_size)
{
	uint8_t *d = roshm_region_data(r, handle, NULL);

	return d ? (struct roshm_region_hdr *)(void *)(d - roshm_region_data_off(slots, slot_size)) : NULL;
}

struct roshm_txn_slot *atk_slot(struct roshm_region_hdr *h, uint64_t seq)
{
	return (struct roshm_txn_slot *)(void *)((uint8_t *)h + ROSHM_REGION_HDR_SIZE +
						 (seq % h->txn_slots) * h->slot_size);
}

/* crc32c (Castagnoli, reflected) without the final inversion: what
 * rte_hash_crc() computes from a given start value. */
static uint32_t crc32c(uint32_t crc, const uint8_t *p, size_t len)
{
	static uint32_t table[256];

	if (!table[1])
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t c = i;

			for (int k = 0; k < 8; k++)
				c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
			table[i] = c;
		}
	while (len--)
		crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

uint32_t atk_staged_crc(const void *staged, uint32_t len)
{
	const uint8_t *s = staged;
	/* every staged byte but the crc word itself (bytes 24..27 of the staged part) */
	uint32_t crc = crc32c(0xffffffffu, s, 24);

	return crc32c(crc, s + 28, len - 28);
}

int atk_publish_node(const char *regdir, const char *secret_file, const char *node,
		     const char *endpoint)
{
	struct rd_config cfg;
	struct rd_registry r;
	struct rd_node_rec rec;
	uint8_t key[64];
	size_t keylen;
	bool rnd;
	char err[256];
	int ret;

	memset(&cfg, 0, sizeof(cfg));
	if ((size_t)snprintf(cfg.registry_secret_file, sizeof(cfg.registry_secret_file), "%s",
			     secret_file) >= sizeof(cfg.registry_secret_file))
		return -ENAMETOOLONG;
	ret = rd_registry_load_key(&cfg, key, &keylen, &rnd, err, sizeof(err));
	if (ret)
		return ret;
	memset(&r, 0, sizeof(r));
	ret = rd_registry_file_open(&r, regdir, node, key, keylen);
	if (ret)
		return ret;
	memset(&rec, 0, sizeof(rec));
	snprintf(rec.node, sizeof(rec.node), "%s", node);
	snprintf(rec.endpoint, sizeof(rec.endpoint), "%s", endpoint);
	rec.pid = (uint32_t)getpid();
	ret = r.ops->put_node(&r, &rec, NULL, NULL);
	r.ops->dispatch(&r);
	r.ops->close(&r);
	return ret;
}
