// SPDX-License-Identifier: MIT
/*
 * Attacks on region grants (ROSHM_POLICY_GRANT, REGION_GRANT), from a pod
 * of the same tenant, against one real roshmd:
 * - REGION_GRANT spoken by hand: malformed messages are refused, and a
 *   client that only opened a region cannot grant it (roshmd's check, not
 *   the library's);
 * - the granted region's name, taken over once its owner closed it: by a
 *   new region (REGION_CREATE), and by a REGION_REATTACH whose forged
 *   header carries the old region's mem_id (which every registry record
 *   shows): neither inherits the grant;
 * - a roshmd restart: the granter gives its grants again by id, so a pod
 *   that takes the grantee's name before the grantee re-attaches gets
 *   nothing, while the real grantee, once back, gets in;
 * - a grant whose record could not be written (-EAGAIN) is still taken
 *   back when the handle it went through is closed;
 * - a part taken back: what was staged through its handle is never
 *   committed, not even through a later handle of the same value;
 * - grants to a client (roshm_region_grant_owner, ABI 7): one grant in
 *   roshmd for every name the client owns, counted; nobody else of the
 *   tenant gets in, not a pod that asks for the grantee's client key while
 *   it is attached; it goes with the revoke under the last name; and the
 *   grantee keeps its identity across a roshmd restart (its key) while a
 *   new client does not get it.
 * The owner's data is checked unchanged after every refused attempt.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "attack.h"
#include "roshm/ctl.h"

static struct th_daemon d;

static struct roshm *cl(void)
{
	int err;
	struct roshm *r = atk_open(&d, "a", NULL, &err);

	assert_non_null(r);
	return r;
}

/* REGION_REATTACH by hand on @fd: a memfd whose header is ours to write,
 * with @mem_id (and no grant key: roshmd gives it one). */
static int forge_reattach(int fd, const char *name, uint64_t size, uint64_t mem_id, uint32_t policy,
			  uint32_t *handle)
{
	struct roshm_ctl_region_create req;
	struct roshm_ctl_region_reply rep;
	uint64_t ms = roshm_region_map_size(size, 0, 0);
	struct roshm_region_hdr *h;
	void *map;
	int mfd = atk_memfd(ms, &map);
	ssize_t n;

	if (mfd < 0)
		return mfd;
	h = map;
	memset(h, 0, sizeof(*h));
	h->magic = ROSHM_REGION_MAGIC;
	h->abi_version = ROSHM_ABI_VERSION;
	h->data_size = size;
	h->data_off = roshm_region_data_off(0, 0);
	h->txn_log_off = ROSHM_REGION_HDR_SIZE;
	h->mem_id = mem_id;
	memset(&req, 0, sizeof(req));
	atk_ctl_hdr(&req.hdr, ROSHM_CTL_REGION_REATTACH, sizeof(req));
	snprintf(req.name, sizeof(req.name), "%s", name);
	req.size = size;
	req.policy = policy;
	n = atk_ctl_call(fd, &req, sizeof(req), mfd, &rep, sizeof(rep), 5000);
	/* mfd stays open: the region's memory is ours */
	if (n < (ssize_t)sizeof(struct roshm_ctl_hdr))
		return n < 0 ? (int)n : -EPROTO;
	if (rep.hdr.status)
		return rep.hdr.status;
	*handle = rep.handle;
	return 0;
}

/* REGION_GRANT by hand; @len other than the message's size is allowed. */
static int raw_grant(int fd, const struct roshm_ctl_region_grant *g, size_t len)
{
	struct {
		struct roshm_ctl_region_grant g;
		char extra[64];
	} req;
	struct roshm_ctl_region_grant_reply rep;
	ssize_t n;

	memset(&req, 0, sizeof(req));
	req.g = *g;
	atk_ctl_hdr(&req.g.hdr, ROSHM_CTL_REGION_GRANT, len);
	n = atk_ctl_call(fd, &req, len, -1, &rep, sizeof(rep), 5000);
	if (n < (ssize_t)sizeof(rep.hdr))
		return n < 0 ? (int)n : -EPROTO;
	return rep.hdr.status;
}

/* REGION_OPEN by hand: 0 with *@handle, or the status. */
static int raw_open(int fd, const char *name, uint32_t *handle)
{
	struct roshm_ctl_region_open o;
	struct roshm_ctl_region_reply rep;
	ssize_t n;

	memset(&o, 0, sizeof(o));
	atk_ctl_hdr(&o.hdr, ROSHM_CTL_REGION_OPEN, sizeof(o));
	snprintf(o.name, sizeof(o.name), "%s", name);
	n = atk_ctl_call(fd, &o, sizeof(o), -1, &rep, sizeof(rep), 5000);
	if (n < (ssize_t)sizeof(rep.hdr))
		return n < 0 ? (int)n : -EPROTO;
	if (!rep.hdr.status)
		*handle = rep.handle;
	return rep.hdr.status;
}

static void put_word(struct roshm *owner, uint32_t h, uint64_t v)
{
	memcpy(roshm_region_data(owner, h, NULL), &v, 8);
}

static uint64_t word(struct roshm *owner, uint32_t h)
{
	uint64_t v;

	memcpy(&v, roshm_region_data(owner, h, NULL), 8);
	return v;
}

static void test_raw_messages(void **st)
{
	struct roshm_region_opts grant = { .policy = ROSHM_POLICY_GRANT };
	struct roshm *v = cl();
	int fd = atk_raw_attach(d.sock, "a", 0, 0);
	uint32_t hm, hmine, hring, hx;
	struct roshm_ctl_region_grant g;

	(void)st;
	assert_true(fd >= 0);
	assert_int_equal(roshm_region_create(v, "raw-mem", 4096, &grant, &hm), 0);
	/* the hostile client: a region of its own, and a handle on the victim's? no:
	 * it may not open it; it opens a tenant region of the victim instead */
	assert_int_equal(forge_reattach(fd, "raw-ring", 4096, 7, 0, &hring), 0);
	assert_int_equal(forge_reattach(fd, "raw-own", 4096, 8, ROSHM_POLICY_GRANT, &hmine), 0);
	memset(&g, 0, sizeof(g));
	g.handle = hmine;
	g.peer = hring;
	g.op = ROSHM_GRANT_ADD;
	assert_int_equal(raw_grant(fd, &g, sizeof(g)), 0);             /* its own: fine */
	/* malformed: unknown op, rsvd, fields an op does not use, bad name */
	for (uint32_t op = 0; op <= 6; op += 5) {
		g.op = op;
		assert_int_equal(raw_grant(fd, &g, sizeof(g)), -EINVAL);
	}
	g.op = ROSHM_GRANT_ADD;
	g.access = 8;                                                   /* unknown operation */
	assert_int_equal(raw_grant(fd, &g, sizeof(g)), -EINVAL);
	g.access = 0;
	g.win_off = 64;                                                 /* an offset, no length */
	assert_int_equal(raw_grant(fd, &g, sizeof(g)), -EINVAL);
	g.win_len = 4096;                                               /* past the end */
	assert_int_equal(raw_grant(fd, &g, sizeof(g)), -EINVAL);
	g.win_off = UINT64_MAX - 8;                                     /* wraps */
	g.win_len = 64;
	assert_int_equal(raw_grant(fd, &g, sizeof(g)), -EINVAL);
	g.win_off = g.win_len = 0;
	g.gid = 5;
	assert_int_equal(raw_grant(fd, &g, sizeof(g)), -EINVAL);
	g.gid = 0;
	snprintf(g.name, sizeof(g.name), "raw-ring");
	assert_int_equal(raw_grant(fd, &g, sizeof(g)), -EINVAL);
	g.op = ROSHM_GRANT_ADD_NAME;
	g.peer = 0;
	snprintf(g.name, sizeof(g.name), "../etc");
	assert_int_equal(raw_grant(fd, &g, sizeof(g)), -EINVAL);
	memset(g.name, 'x', sizeof(g.name));
	assert_int_equal(raw_grant(fd, &g, sizeof(g)), -EINVAL);
	memset(g.name, 0, sizeof(g.name));
	snprintf(g.name, sizeof(g.name), "no-such-region");
	assert_int_equal(raw_grant(fd, &g, sizeof(g)), -ENOENT);
	g.op = ROSHM_GRANT_REMOVE;
	memset(g.name, 0, sizeof(g.name));
	assert_int_equal(raw_grant(fd, &g, sizeof(g)), -EINVAL);      /* no id */
	g.op = ROSHM_GRANT_ADD;
	g.peer = hring;
	g.handle = 0xffffffffu;
	assert_int_equal(raw_grant(fd, &g, sizeof(g)), -EBADF);
	g.handle = hmine;
	g.peer = 0xfffffffeu;
	assert_int_equal(raw_grant(fd, &g, sizeof(g)), -EBADF);
	/* a region it only opened: roshmd refuses, whatever the library does */
	assert_int_equal(roshm_region_create(v, "raw-tenant", 4096, NULL, &hx), 0);
	assert_int_equal(raw_open(fd, "raw-tenant", &g.handle), 0);
	g.peer = hring;
	assert_int_equal(raw_grant(fd, &g, sizeof(g)), -EACCES);
	/* wrong sizes */
	g.handle = hmine;
	assert_true(raw_grant(fd, &g, sizeof(g) - 4) < 0);
	assert_true(raw_grant(fd, &g, sizeof(g) + 40) < 0);
	close(fd);
	/* and it never got into the victim's region */
	fd = atk_raw_attach(d.sock, "a", 0, 0);
	assert_true(fd >= 0);
	assert_int_equal(raw_open(fd, "raw-mem", &hx), -EACCES);
	close(fd);
	atk_assert_alive(&d);
	roshm_close(v);
}

/*
 * The grantee's name taken over after its owner closed it, while the
 * granter still holds its handle (a QP not yet destroyed): a new region, or
 * a forged re-attach with the old mem_id, is not the region granted.
 */
static void test_name_taken_over(void **st)
{
	struct roshm_region_opts grant = { .policy = ROSHM_POLICY_GRANT };
	struct roshm *v = cl(), *p = cl(), *x;
	uint32_t hm, hr, hring, hx, hforged;
	uint64_t mid;
	int fd;

	(void)st;
	assert_int_equal(roshm_region_create(v, "to-mem", 4096, &grant, &hm), 0);
	put_word(v, hm, 0x5ec2e7);
	assert_int_equal(roshm_region_create(p, "to-ring", 4096, NULL, &hr), 0);
	mid = atk_region_hdr(p, hr, 0, 0)->mem_id; /* also in the registry record */
	assert_int_equal(roshm_region_open(v, "to-ring", &hring, NULL), 0);
	assert_int_equal(roshm_region_grant(v, hm, hring), 0);
	assert_int_equal(roshm_region_open(p, "to-mem", &hx, NULL), 0);
	assert_int_equal(roshm_region_close(p, hx), 0);
	assert_int_equal(roshm_region_close(p, hr), 0);
	roshm_close(p);
	/* a new region under the name */
	x = cl();
	assert_int_equal(roshm_region_create(x, "to-ring", 4096, NULL, &hx), 0);
	assert_int_equal(roshm_region_open(x, "to-mem", &hx, NULL), -EACCES);
	roshm_close(x);
	/* a forged re-attach with the old mem_id */
	fd = atk_raw_attach(d.sock, "a", 0, 0);
	assert_true(fd >= 0);
	assert_int_equal(forge_reattach(fd, "to-ring", 4096, mid, 0, &hforged), 0);
	assert_int_equal(raw_open(fd, "to-mem", &hx), -EACCES);
	close(fd);
	assert_true(word(v, hm) == 0x5ec2e7);
	roshm_close(v);
	atk_assert_alive(&d);
}

/*
 * A roshmd restart. The granter comes back first and gives its grant again
 * by the grantee's id: a pod that took the grantee's name meanwhile gets
 * nothing; then, in a second round without a squatter, the real grantee
 * re-attaches (same key) and gets in.
 */
static void test_restart(void **st)
{
	struct roshm_region_opts grant = { .policy = ROSHM_POLICY_GRANT };
	struct roshm *v = cl(), *p = cl(), *x;
	uint32_t hm, hr, hring, hx, hsq, dummy;

	(void)st;
	assert_int_equal(roshm_region_create(v, "rs-mem", 4096, &grant, &hm), 0);
	put_word(v, hm, 0xfeed);
	assert_int_equal(roshm_region_create(p, "rs-ring", 4096, NULL, &hr), 0);
	assert_int_equal(roshm_region_open(v, "rs-ring", &hring, NULL), 0);
	assert_int_equal(roshm_region_grant(v, hm, hring), 0);
	assert_int_equal(roshm_region_open(p, "rs-mem", &hx, NULL), 0);

	kill(d.pid, SIGKILL);
	waitpid(d.pid, NULL, 0);
	d.pid = 0;
	assert_int_equal(th_daemon_restart(&d), 0);
	x = cl();
	assert_int_equal(roshm_region_create(x, "rs-ring", 4096, NULL, &hsq), 0);
	/* the granter reconnects (any call): re-attaches rs-mem, gives the grant again */
	assert_int_equal(roshm_region_open(v, "none-here", &dummy, NULL), -ENOENT);
	assert_int_equal(roshm_region_open(x, "rs-mem", &hx, NULL), -EACCES);
	assert_true(word(v, hm) == 0xfeed);
	/* the squatter goes; the real grantee comes back and is let in */
	roshm_close(x);
	assert_int_equal(roshm_region_open(p, "rs-mem", &hx, NULL), 0);
	{
		uint64_t w = 0xabcdef;

		memcpy(roshm_arena(p, NULL), &w, 8);
		assert_int_equal(roshm_write_sync(p, hx, 0, 0, 8), 0);
		assert_true(word(v, hm) == 0xabcdef);
	}
	roshm_close(p);
	roshm_close(v);
}

/* A grant answered -EAGAIN (the registry did not take the record) stands,
 * and closing the handle it went through still takes it back. */
static void test_eagain_taken_back(void **st)
{
	struct roshm_region_opts grant = { .policy = ROSHM_POLICY_GRANT };
	struct roshm *v = cl(), *p = cl();
	uint32_t hm, hr, hring, hx;
	char path[600];
	int dfd, ret;

	(void)st;
	assert_int_equal(roshm_region_create(v, "ea-mem", 4096, &grant, &hm), 0);
	assert_int_equal(roshm_region_create(p, "ea-ring", 4096, NULL, &hr), 0);
	assert_int_equal(roshm_region_open(v, "ea-ring", &hring, NULL), 0);
	snprintf(path, sizeof(path), "%s/registry/regions/a", d.dir);
	dfd = open(path, O_RDONLY | O_DIRECTORY);
	assert_true(dfd >= 0);
	assert_int_equal(flock(dfd, LOCK_EX), 0);
	ret = roshm_region_grant(v, hm, hring);
	flock(dfd, LOCK_UN);
	close(dfd);
	assert_int_equal(ret, -EAGAIN);   /* the record could not be written */
	assert_int_equal(roshm_region_open(p, "ea-mem", &hx, NULL), 0); /* it stands */
	/* and roshmd writes the record again by itself, for the other nodes */
	snprintf(path, sizeof(path), "%s/registry/regions/a/ea-mem.json", d.dir);
	for (int i = 0; i < 300; i++) {
		char text[8192] = "";
		FILE *f = fopen(path, "r");

		if (f) {
			size_t n = fread(text, 1, sizeof(text) - 1, f);

			text[n] = 0;
			fclose(f);
		}
		ret = strstr(text, "\"grants\":[\"") ? 0 : -EAGAIN;
		if (!ret)
			break;
		usleep(10000);
	}
	assert_int_equal(ret, 0);
	assert_int_equal(roshm_region_close(p, hx), 0);
	assert_int_equal(roshm_region_close(v, hring), 0);
	assert_int_equal(roshm_region_open(p, "ea-mem", &hx, NULL), -EACCES);
	roshm_close(p);
	roshm_close(v);
}

/*
 * A TXN_WRITE staged through a part handle dies with that handle (a revoke
 * closes it; found by an adversarial review of ABI 6). Before the fix, once
 * the handle's 16-bit generation wrapped, a handle on another, smaller part
 * got the same value, and its TXN_COMMIT committed the write into the part
 * taken back.
 */
static void test_txn_after_revoke(void **st)
{
	struct roshm_region_opts o = { .policy = ROSHM_POLICY_GRANT, .txn_slots = 4,
				       .slot_size = 4096 };
	const struct roshm_part p1 = { .off = 0, .len = 64, .access = ROSHM_ACCESS_WRITE };
	const struct roshm_part p2 = { .off = 4096, .len = 64, .access = ROSHM_ACCESS_WRITE };
	struct roshm *v = cl(), *a = cl();
	uint32_t hm, hring, h2, hx;
	struct roshm_cqe cqe;
	uint8_t *mem, *arena;
	unsigned long tries = 0;

	(void)st;
	assert_int_equal(roshm_region_create(v, "pt-mem", 8192, &o, &hm), 0);
	mem = roshm_region_data(v, hm, NULL);
	memset(mem, 0, 8192);
	assert_int_equal(roshm_region_create(a, "pt-ring", 4096, NULL, &hring), 0);
	assert_int_equal(roshm_region_grant_part(v, hm, "pt-ring", &p1), 0);
	assert_int_equal(roshm_region_grant_part(v, hm, "pt-ring", &p2), 0);

	/* while granted p2: stage a write there, no commit */
	assert_int_equal(roshm_region_open_part(a, "pt-mem", &p2, &h2, NULL), 0);
	arena = roshm_arena(a, NULL);
	memset(arena, 0x41, 8);
	roshm_prep_txn_write(atk_sqe(a), h2, 4096, 0, 8);
	assert_int_equal(roshm_submit(a), 1);
	assert_int_equal(roshm_nop_sync(a), 0); /* the TXN_WRITE was consumed */

	/* the owner takes p2 back: h2 is closed, p2 cannot be opened */
	assert_int_equal(roshm_region_revoke_part(v, hm, "pt-ring", &p2), 0);
	assert_int_equal(roshm_read_sync(a, h2, 4096, 0, 8), -EBADF);
	assert_int_equal(roshm_region_open_part(a, "pt-mem", &p2, &hx, NULL), -EACCES);

	/* open/close p1 until its handle has h2's value (16-bit generation) */
	for (;;) {
		assert_int_equal(roshm_region_open_part(a, "pt-mem", &p1, &hx, NULL), 0);
		tries++;
		if (hx == h2)
			break;
		assert_int_equal(roshm_region_close(a, hx), 0);
		assert_true(tries < 200000);
	}
	fprintf(stderr, "handle 0x%08x again after %lu opens\n", h2, tries);
	/* the p1 handle cannot touch p2 ... */
	assert_int_equal(roshm_write_sync(a, hx, 4096, 0, 8), -EFAULT);
	/* ... but its TXN_COMMIT commits the write staged into p2 */
	roshm_prep_txn_commit(atk_sqe(a), hx);
	assert_int_equal(roshm_submit(a), 1);
	assert_int_equal(atk_reap(a, &cqe, 5000), 0);
	fprintf(stderr, "commit status %d\n", cqe.status);
	assert_true(cqe.status < 0);   /* nothing staged through this handle */
	usleep(200 * 1000); /* the owner side applies it */
	fprintf(stderr, "mem[4096] = 0x%02x (0x41: written outside the granted part after revoke)\n",
		mem[4096]);
	assert_int_not_equal(mem[4096], 0x41);
	roshm_close(a);
	roshm_close(v);
}

/*
 * A grant to a client (ROSHM_GRANT_ADD_OWNER): the owner of ow-r0 may open
 * ow-mem; its 70 region names make one grant in roshmd (70 region grants
 * would be refused past the 64 of limits.max_grants here), taken back with
 * the last name.
 */
#define OW_NAMES 70
static void test_owner_grant(void **st)
{
	struct roshm_region_opts grant = { .policy = ROSHM_POLICY_GRANT };
	struct roshm *v = cl(), *p = cl(), *x = cl();
	uint32_t hm, hr[OW_NAMES], hx, hp;
	uint64_t key = 0, w = 0x0a0b0c;
	char name[32];
	int fd;

	(void)st;
	assert_int_equal(roshm_region_create(v, "ow-mem", 4096, &grant, &hm), 0);
	put_word(v, hm, 0x0111);
	for (int i = 0; i < OW_NAMES; i++) {
		snprintf(name, sizeof(name), "ow-r%d", i);
		assert_int_equal(roshm_region_create(p, name, 4096, NULL, &hr[i]), 0);
		assert_int_equal(roshm_region_grant_owner(v, hm, name, NULL), 0);
	}
	/* not a client of another tenant's name, not a name nobody has */
	assert_int_equal(roshm_region_grant_owner(v, hm, "ow-none", NULL), -ENOENT);
	assert_int_equal(roshm_region_open(x, "ow-mem", &hx, NULL), -EACCES);
	/* a pod asking for the grantee's key while it is attached gets another */
	fd = atk_raw_attach_key(d.sock, "a", 0, 0, p->client_key, &key);
	assert_true(fd >= 0);
	assert_true(key && key != p->client_key);
	assert_int_equal(raw_open(fd, "ow-mem", &hx), -EACCES);
	close(fd);
	/* the grantee gets in through any region of its own, also once the
	 * named ones are closed: the grant names the client */
	for (int i = 0; i < OW_NAMES; i++)
		assert_int_equal(roshm_region_close(p, hr[i]), 0);
	assert_int_equal(roshm_region_open(p, "ow-mem", &hp, NULL), 0);
	memcpy(roshm_arena(p, NULL), &w, 8);
	assert_int_equal(roshm_write_sync(p, hp, 0, 0, 8), 0);
	assert_true(word(v, hm) == 0x0a0b0c);
	/* counted: taken back under all names but one, it stands */
	for (int i = 1; i < OW_NAMES; i++) {
		snprintf(name, sizeof(name), "ow-r%d", i);
		assert_int_equal(roshm_region_revoke_name(v, hm, name), 0);
	}
	w = 0x0d0e0f;
	memcpy(roshm_arena(p, NULL), &w, 8);
	assert_int_equal(roshm_write_sync(p, hp, 0, 0, 8), 0);
	assert_true(word(v, hm) == 0x0d0e0f);
	/* the last: the grantee's handle is closed, a new open refused */
	assert_int_equal(roshm_region_revoke_name(v, hm, "ow-r0"), 0);
	w = 0x666;
	memcpy(roshm_arena(p, NULL), &w, 8);
	assert_int_equal(roshm_write_sync(p, hp, 0, 0, 8), -EBADF);
	assert_int_equal(roshm_region_open(p, "ow-mem", &hp, NULL), -EACCES);
	assert_true(word(v, hm) == 0x0d0e0f);
	roshm_close(x);
	roshm_close(p);
	roshm_close(v);
	atk_assert_alive(&d);
}

/*
 * A grant to a client across a roshmd restart: the granter gives it again
 * by id; the grantee re-attaches with its key and is let in; a client that
 * attaches first, and owns a region of the grantee's name, is not.
 */
static void test_owner_restart(void **st)
{
	struct roshm_region_opts grant = { .policy = ROSHM_POLICY_GRANT };
	struct roshm *v = cl(), *p = cl(), *x;
	uint32_t hm, hr, hx, hsq, hp, dummy;
	uint64_t key, w = 0x5151;

	(void)st;
	assert_int_equal(roshm_region_create(v, "or-mem", 4096, &grant, &hm), 0);
	put_word(v, hm, 0xfeed);
	assert_int_equal(roshm_region_create(p, "or-ring", 4096, NULL, &hr), 0);
	assert_int_equal(roshm_region_grant_owner(v, hm, "or-ring", NULL), 0);
	assert_int_equal(roshm_region_open(p, "or-mem", &hp, NULL), 0);
	key = p->client_key;

	kill(d.pid, SIGKILL);
	waitpid(d.pid, NULL, 0);
	d.pid = 0;
	assert_int_equal(th_daemon_restart(&d), 0);
	x = cl();
	assert_true(x->client_key != key);
	assert_int_equal(roshm_region_create(x, "or-ring", 4096, NULL, &hsq), 0);
	assert_int_equal(roshm_region_open(v, "none-here", &dummy, NULL), -ENOENT);
	assert_int_equal(roshm_region_open(x, "or-mem", &hx, NULL), -EACCES);
	roshm_close(x);
	/* the grantee re-attaches (its next call) with its key */
	memcpy(roshm_arena(p, NULL), &w, 8);
	assert_int_equal(roshm_write_sync(p, hp, 0, 0, 8), 0);
	assert_true(p->client_key == key);
	assert_true(word(v, hm) == 0x5151);
	roshm_close(p);
	roshm_close(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_raw_messages),
		cmocka_unit_test(test_name_taken_over),
		cmocka_unit_test(test_eagain_taken_back),
		cmocka_unit_test(test_txn_after_revoke),
		cmocka_unit_test(test_restart),
		cmocka_unit_test(test_owner_grant),
		cmocka_unit_test(test_owner_restart),
	};
	int fails;

	th_cleanup_enable();
	/* 64 grants a region: test_owner_grant's 70 names must make one */
	if (th_daemon_start(&d, "secgrant", ATK_TENANTS "channel: { hugepages = \"off\"; };\n"
			    "limits: { max_grants = 64; };\n"))
		return 1;
	fails = cmocka_run_group_tests_name("security_grant", tests, NULL, NULL);
	if (fails)
		atk_log_tail(&d, 30);
	atk_daemon_kill(&d);
	return fails;
}
