// SPDX-License-Identifier: MIT
/*
 * grants.c on its own: who a grant list lets in (rd_client_grant) and what
 * a revoke closes (rd_control_grants_enforce), on clients, handles and
 * regions made here. No roshmd, no EAL: a control struct, and a poller that
 * does not run (its commands are applied in place, on the clients'
 * dp_handles).
 *
 * who: a grant names a client by its cgid, or by the gid of a region it
 *   owns on this node (not one it only opened, not a remote one, not in
 *   another tenant, never gid 0); of the grants that cover a handle, the
 *   narrowest (bytes, then operations), the first in the list of two as
 *   narrow.
 * revoke_closes: a revoke closes exactly the handles no remaining grant
 *   covers (a part another grant still covers stays), never the owner's.
 * remote_rekey: a remote region's handle still let in takes the NIC key
 *   of the grant that lets it in now.
 * revoke_work (security review: a revoke held the control thread 0.4 s):
 *   each handle on the region was checked by scanning its client's whole
 *   handle table and, for each region the client owns, the whole grant
 *   list: with 8 clients each owning 240 regions and holding 780 handles
 *   on a region of 500 grants, ~750 million comparisons per revoke. Now a
 *   handle is compared with the grants that name its client only: the
 *   count (rd_grant_checks) is at most, over the clients, their handles on
 *   the region times the grants that name them.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <rte_log.h>

#include "control/internal.h"
#include "poller/sqe.h"
#include "roshm/ctl.h"

#define ALL ROSHM_ACCESS_ALL
#define RD ROSHM_ACCESS_READ
#define WR ROSHM_ACCESS_WRITE
#define AT ROSHM_ACCESS_ATOMIC
#define SIZE 4096u

struct rig {
	struct rd_config cfg;
	struct rd_control ctl;
	struct rd_poller poller;
	struct rd_client *clients[16];
	struct rd_region *regions[4096];
	uint32_t nclients, nregions;
};

static struct rig *rig_new(void)
{
	struct rig *r = calloc(1, sizeof(*r));

	assert_non_null(r);
	r->ctl.cfg = &r->cfg;
	r->ctl.poller = &r->poller;   /* not running: commands apply in place */
	r->ctl.epfd = -1;
	return r;
}

static void rig_free(struct rig *r)
{
	for (uint32_t i = 0; i < r->nclients; i++) {
		free(r->clients[i]->ctl_handles);
		free(r->clients[i]->dp_handles);
		free(r->clients[i]);
	}
	for (uint32_t i = 0; i < r->nregions; i++)
		free(r->regions[i]);
	free(r);
}

/* A client of @tenant with @cgid and a table of @nhandles, last in the list. */
static struct rd_client *client(struct rig *r, const char *tenant, uint64_t cgid,
				uint32_t nhandles)
{
	struct rd_client *c = calloc(1, sizeof(*c)), **pp = &r->ctl.clients;

	assert_non_null(c);
	c->id = r->nclients + 1;
	strcpy(c->tenant, tenant);
	c->cgid = cgid;
	c->nhandles = nhandles;
	c->ctl_handles = calloc(nhandles, sizeof(*c->ctl_handles));
	c->dp_handles = calloc(nhandles, sizeof(*c->dp_handles));
	assert_non_null(c->ctl_handles);
	assert_non_null(c->dp_handles);
	while (*pp)
		pp = &(*pp)->next;
	*pp = c;
	r->clients[r->nclients++] = c;
	return c;
}

/* A region of @tenant that @owner owns (NULL: none here), grant id @gid.
 * Its refs never reach 0 here. */
static struct rd_region *region(struct rig *r, const char *tenant, const char *name,
				struct rd_client *owner, uint64_t gid, bool remote)
{
	struct rd_region *rg = calloc(1, sizeof(*rg));

	assert_non_null(rg);
	strcpy(rg->tenant, tenant);
	strcpy(rg->name, name);
	rg->owner = owner;
	rg->gid = gid;
	rg->remote = remote;
	rg->policy = ROSHM_POLICY_GRANT;
	rg->data_size = SIZE;
	rg->refs = 1u << 30;
	r->regions[r->nregions++] = rg;
	return rg;
}

/* A handle of @c on @rg: all of it (@hi 0), or [lo, hi) with @access. */
static struct rd_handle *handle(struct rd_client *c, struct rd_region *rg, uint64_t lo,
				uint64_t hi, uint32_t access, uint32_t nic_rkey)
{
	for (uint32_t i = 0; i < c->nhandles; i++) {
		struct rd_handle *h = &c->ctl_handles[i];

		if (h->region)
			continue;
		h->region = rg;
		h->gen = 1;
		h->part = hi != 0;
		h->lo = hi ? lo : 0;
		h->hi = hi ? hi : rg->data_size;
		h->access = hi ? access : ALL;
		h->nic_rkey = nic_rkey;
		h->own = !rg->remote && rg->owner == c;
		if (h->own)
			rg->owner_handle = rd_handle_make(i, h->gen);
		c->dp_handles[i] = *h;
		rg->refs++;
		return h;
	}
	fail_msg("handle table full");
	return NULL;
}

static bool open_(const struct rd_client *c, const struct rd_handle *h)
{
	uint32_t i = (uint32_t)(h - c->ctl_handles);

	assert_true(!h->region == !c->dp_handles[i].region);  /* the poller was told */
	return h->region != NULL;
}

static const struct rd_grant *who(const struct rd_client *c, const struct rd_grant *g, uint32_t n,
				  uint64_t lo, uint64_t hi, uint32_t access)
{
	struct rd_handle want = { .lo = lo, .hi = hi, .access = access };

	return rd_client_grant(c, "a", g, n, &want);
}

/* Tenant a: O owns R; A owns PA (gid 0xa, and its cgid is 0xa0); B owns
 * nothing (cgid 0xb0); C owns PC, remote (gid 0xc); E only opened PE (gid
 * 0xe, of O); F has cgid 0 and owns P0 of gid 0. Tenant b: D owns PD (gid 0xd). */
struct cast {
	struct rd_client *O, *A, *B, *C, *D, *E, *F;
	struct rd_region *R;
};

static struct cast cast(struct rig *r, bool remote)
{
	struct cast k;

	k.O = client(r, "a", 0x10, 16);
	k.A = client(r, "a", 0xa0, 16);
	k.B = client(r, "a", 0xb0, 16);
	k.C = client(r, "a", 0xc0, 16);
	k.D = client(r, "b", 0xd0, 16);
	k.E = client(r, "a", 0xe0, 16);
	k.F = client(r, "a", 0, 16);
	k.R = region(r, "a", "R", remote ? NULL : k.O, 0x100, remote);
	if (!remote)
		handle(k.O, k.R, 0, 0, 0, 0);
	handle(k.A, region(r, "a", "PA", k.A, 0xa, false), 0, 0, 0, 0);
	handle(k.C, region(r, "a", "PC", NULL, 0xc, true), 0, 0, 0, 0);
	handle(k.D, region(r, "b", "PD", k.D, 0xd, false), 0, 0, 0, 0);
	handle(k.E, region(r, "a", "PE", k.O, 0xe, false), 0, 0, 0, 0);
	handle(k.F, region(r, "a", "P0", k.F, 0, false), 0, 0, 0, 0);
	return k;
}

static void test_who(void **state)
{
	struct rig *r = rig_new();
	struct cast k = cast(r, false);
	const struct rd_grant g[] = {
		{ 0xa, 0, SIZE, ALL },       /* 0: A's region, all of it */
		{ 0xb0, 0, 64, RD },         /* 1: B itself, a part */
		{ 0xa, 64, 128, RD },        /* 2: A's region, a part */
		{ 0xc, 0, SIZE, ALL },       /* 3: C's remote region */
		{ 0xd, 0, SIZE, ALL },       /* 4: D's, of another tenant */
		{ 0xe, 0, SIZE, ALL },       /* 5: E's open region (O's) */
		{ 0xa, 64, 128, RD | WR },   /* 6: A's region, wider operations */
		{ 0, 0, SIZE, ALL },         /* 7: gid 0 */
	};
	const uint32_t n = sizeof(g) / sizeof(g[0]);

	(void)state;
	assert_ptr_equal(who(k.A, g, n, 0, SIZE, ALL), &g[0]);
	assert_ptr_equal(who(k.A, g, n, 64, 128, RD), &g[2]);    /* fewer bytes, fewer ops */
	assert_ptr_equal(who(k.A, g, n, 64, 128, WR), &g[6]);
	assert_ptr_equal(who(k.A, g, n, 64, 127, RD | WR), &g[6]);
	assert_ptr_equal(who(k.A, g, n, 0, 64, RD), &g[0]);
	assert_null(who(k.A, g, 0, 0, 64, RD));
	assert_ptr_equal(who(k.B, g, n, 0, 64, RD), &g[1]);
	assert_ptr_equal(who(k.B, g, n, 8, 16, RD), &g[1]);
	assert_null(who(k.B, g, n, 0, 64, WR));
	assert_null(who(k.B, g, n, 0, 65, RD));
	assert_null(who(k.C, g, n, 0, SIZE, RD));    /* a remote region is not its to name */
	assert_null(who(k.D, g, n, 0, SIZE, RD));    /* another tenant */
	/* (a list of a region of its own tenant would) */
	assert_ptr_equal(rd_client_grant(k.D, "b", g, n, &(struct rd_handle){ .hi = 8, .access = RD }),
			 &g[4]);
	assert_null(who(k.E, g, n, 0, SIZE, RD));    /* opened, not owned */
	assert_null(who(k.F, g, n, 0, SIZE, RD));    /* gid 0 names nobody */
	assert_null(who(k.O, g, n, 0, SIZE, RD));    /* no grant names the owner */

	/* two as narrow: the first in the list, its cgid's or its region's */
	const struct rd_grant t[] = { { 0xa, 0, 64, RD | WR }, { 0xa0, 0, 64, RD | AT } };
	const struct rd_grant u[] = { { 0xa0, 0, 64, RD | AT }, { 0xa, 0, 64, RD | WR } };

	assert_ptr_equal(who(k.A, t, 2, 0, 64, RD), &t[0]);
	assert_ptr_equal(who(k.A, u, 2, 0, 64, RD), &u[0]);
	assert_ptr_equal(who(k.A, t, 2, 0, 64, AT), &t[1]);
	rig_free(r);
}

static void test_revoke_closes(void **state)
{
	struct rig *r = rig_new();
	struct cast k = cast(r, false);
	struct rd_grant g[] = {
		{ 0xa, 0, SIZE, ALL },       /* A's region, all of it */
		{ 0xb0, 0, 64, RD },         /* B, a part */
		{ 0xa, 64, 128, RD },        /* A's region, a part */
		{ 0xa0, 64, 128, RD | WR },  /* A itself, the part, wider operations */
		{ 0xe, 0, SIZE, ALL },       /* E's open region (O's) */
	};
	uint32_t n = 5;
	struct rd_handle *own = &k.O->ctl_handles[0];
	struct rd_handle *a_all = handle(k.A, k.R, 0, 0, 0, 0);
	struct rd_handle *a_part = handle(k.A, k.R, 64, 128, RD, 0);
	struct rd_handle *b1 = handle(k.B, k.R, 0, 64, RD, 0);
	struct rd_handle *b2 = handle(k.B, k.R, 0, 32, RD, 0);
	struct rd_handle *b3 = handle(k.B, k.R, 0, 32, WR, 0);   /* no grant lets it in */
	struct rd_handle *e = handle(k.E, k.R, 0, 0, 0, 0);
	struct rd_handle *a_pa = &k.A->ctl_handles[0];           /* A's own region */

	(void)state;
#define REVOKE(i)                                                                   \
	do {                                                                        \
		memmove(&g[i], &g[i + 1], (n - (i) - 1) * sizeof(g[0]));           \
		n--;                                                                \
		rd_control_grants_enforce(&r->ctl, k.R, "a", g, n);                 \
	} while (0)
	rd_control_grants_enforce(&r->ctl, k.R, "a", g, n);
	assert_true(open_(k.O, own));
	assert_true(open_(k.A, a_all));
	assert_true(open_(k.A, a_part));
	assert_true(open_(k.B, b1));
	assert_true(open_(k.B, b2));
	assert_false(open_(k.B, b3));
	assert_false(open_(k.E, e));
	REVOKE(0);   /* A's all: its part stays (two grants cover it) */
	assert_false(open_(k.A, a_all));
	assert_true(open_(k.A, a_part));
	assert_true(open_(k.A, a_pa));
	REVOKE(1);   /* A's region's part: A's own grant still covers it */
	assert_true(open_(k.A, a_part));
	REVOKE(1);   /* and that one */
	assert_false(open_(k.A, a_part));
	assert_true(open_(k.B, b1));
	assert_true(open_(k.B, b2));
	REVOKE(0);   /* B's */
	assert_false(open_(k.B, b1));
	assert_false(open_(k.B, b2));
	assert_true(open_(k.O, own));
	assert_true(open_(k.A, a_pa));
	assert_int_equal(n, 1);
#undef REVOKE
	rig_free(r);
}

static void test_remote_rekey(void **state)
{
	struct rig *r = rig_new();
	struct cast k = cast(r, true);
	const struct rd_grant g[] = {
		{ 0xa, 0, SIZE, ALL, 1 },
		{ 0xa, 64, 128, RD | WR, 6 },
		{ 0xb0, 0, 64, RD, 7 },
	};
	struct rd_handle *a_part = handle(k.A, k.R, 64, 128, RD, 2);   /* under a grant now gone */
	struct rd_handle *a_all = handle(k.A, k.R, 0, 0, 0, 1);
	struct rd_handle *b = handle(k.B, k.R, 0, 8, RD, 7);
	uint32_t ia = (uint32_t)(a_part - k.A->ctl_handles);

	(void)state;
	rd_control_grants_enforce(&r->ctl, k.R, "a", g, 3);
	assert_true(open_(k.A, a_part));
	assert_int_equal(a_part->nic_rkey, 6);
	assert_int_equal(k.A->dp_handles[ia].nic_rkey, 6);
	assert_true(open_(k.A, a_all));
	assert_int_equal(a_all->nic_rkey, 1);
	assert_true(open_(k.B, b));
	assert_int_equal(b->nic_rkey, 7);
	rd_control_grants_enforce(&r->ctl, k.R, "a", g, 2);   /* B's revoked */
	assert_false(open_(k.B, b));
	assert_true(open_(k.A, a_part));
	rd_control_grants_enforce(&r->ctl, k.R, "a", g, 1);
	assert_int_equal(a_part->nic_rkey, 1);
	assert_int_equal(k.A->dp_handles[ia].nic_rkey, 1);
	rig_free(r);
}

/* The security review's set-up, with roshmd's default limits: 8 clients
 * each owning 240 regions and holding 780 handles on R (1024 in all), R
 * with 500 grants: each client's (ROSHM_GRANT_ADD_OWNER), and 492 parts
 * to client 0's first region. */
static void test_revoke_work(void **state)
{
	enum { K = 8, OWN = 240, ON_R = 780, NG = 500 };
	struct rig *r = rig_new();
	struct rd_client *o = client(r, "a", 1, 1024);
	struct rd_region *R = region(r, "a", "R", o, 2, false);
	struct rd_client *c[K];
	struct rd_grant *g = calloc(NG, sizeof(*g));
	uint64_t bound = 0;
	uint32_t n = 0;

	(void)state;
	assert_non_null(g);
	handle(o, R, 0, 0, 0, 0);
	for (uint32_t i = 0; i < K; i++) {
		c[i] = client(r, "a", 0x1000 + i, 1024);
		for (uint32_t j = 0; j < OWN; j++) {
			char name[32];

			snprintf(name, sizeof(name), "g%u_%u", i, j);
			handle(c[i], region(r, "a", name, c[i], 0x10000 + i * OWN + j, false), 0, 0,
			       0, 0);
		}
		for (uint32_t j = 0; j < ON_R; j++)
			handle(c[i], R, 0, 0, 0, 0);
		g[n++] = (struct rd_grant){ c[i]->cgid, 0, SIZE, ALL };
	}
	while (n < NG) {
		g[n] = (struct rd_grant){ 0x10000, 8 * (n - K), 8 * (n - K) + 8, RD };
		n++;
	}
	/* what names client 0: its cgid and the 492 parts; the others: their cgid */
	bound = (uint64_t)ON_R * (1 + NG - K) + (uint64_t)(K - 1) * ON_R;

	rd_grant_checks = 0;
	rd_control_grants_enforce(&r->ctl, R, "a", g, n);
	print_message("revoke_work: %llu comparisons (bound %llu; was ~%llu)\n",
		      (unsigned long long)rd_grant_checks, (unsigned long long)bound,
		      (unsigned long long)K * ON_R * (NG + (uint64_t)OWN * NG));
	assert_true(rd_grant_checks <= bound);
	for (uint32_t i = 0; i < K; i++)
		for (uint32_t j = 0; j < OWN + ON_R; j++)
			assert_true(open_(c[i], &c[i]->ctl_handles[j]));

	/* client 3's grant revoked: its 780 handles on R close, nothing else */
	memmove(&g[3], &g[4], (n - 4) * sizeof(g[0]));
	n--;
	rd_grant_checks = 0;
	rd_control_grants_enforce(&r->ctl, R, "a", g, n);
	assert_true(rd_grant_checks <= bound);
	for (uint32_t i = 0; i < K; i++)
		for (uint32_t j = 0; j < OWN + ON_R; j++)
			assert_true(open_(c[i], &c[i]->ctl_handles[j]) == (i != 3 || j < OWN));
	free(g);
	rig_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_who),
		cmocka_unit_test(test_revoke_closes),
		cmocka_unit_test(test_remote_rekey),
		cmocka_unit_test(test_revoke_work),
	};

	rte_log_set_global_level(RTE_LOG_NOTICE);   /* not the 780 closes' lines */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
