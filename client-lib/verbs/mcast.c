// SPDX-License-Identifier: MIT
/*
 * libroshm-verbs: UD multicast (ibv_attach_mcast, ibv_detach_mcast, and a
 * send to a group: remote QPN 0xFFFFFF with an AH whose GID is a multicast
 * one). No switch copies a packet here: a QP's membership of a group is a
 * record in the registry, an empty region of its tenant named
 * "ibv-mc-<group GID, 32 hex digits>-<QPN, 6 hex digits>", and a sender
 * sends the datagram to each member QP as to a unicast destination (ud.c),
 * one after the other. A sender learns a group's members from the registry
 * (roshm_region_list) when it first sends to the group, and again at most
 * once per RV_MC_TTL_NS while it keeps sending. Only its tenant's QPs are
 * members (the listing is the tenant's, and the rings are), and a member's
 * ring delivers a group's datagram only while the QP is a member.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rv.h"

#define RV_MC_TTL_NS (1000ull * 1000000)   /* a group's members are listed again after */
#define RV_MC_RETRY_NS (50ull * 1000000)   /* ... or after a listing that failed */
#define RV_MC_PREFIX "ibv-mc-"

/* A multicast GID: IPv6 ff00::/8, or IPv4-mapped 224.0.0.0/4 (RoCE v2). */
bool rv_gid_is_mc(const union ibv_gid *g)
{
	static const uint8_t v4[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	return g->raw[0] == 0xff || (!memcmp(g->raw, v4, sizeof(v4)) && (g->raw[12] & 0xf0) == 0xe0);
}

/* "ibv-mc-<gid>-": the start of every member record's name of @g. */
static void group_prefix(const union ibv_gid *g, char *out, size_t cap)
{
	size_t n = (size_t)snprintf(out, cap, RV_MC_PREFIX);

	for (int i = 0; i < 16 && n + 2 < cap; i++, n += 2)
		snprintf(out + n, cap - n, "%02x", g->raw[i]);
	snprintf(out + n, cap - n, "-");
}

bool rv_mc_member(const struct rv_qp *q, const uint8_t *mgid)
{
	for (uint32_t i = 0; i < q->nmc; i++)
		if (!memcmp(q->mc_gid[i].raw, mgid, 16))
			return true;
	return false;
}

static int mc_find(const struct rv_qp *q, const union ibv_gid *g)
{
	for (uint32_t i = 0; i < q->nmc; i++)
		if (!memcmp(&q->mc_gid[i], g, sizeof(*g)))
			return (int)i;
	return -1;
}

RV_EXPORT int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	struct rv_qp *q = (struct rv_qp *)qp;
	struct rv_ctx *c;
	char name[ROSHM_NAME_MAX];
	uint32_t h;
	int ret = 0;

	(void)lid;   /* RoCE: the GID names the group */
	if (!qp || !gid || qp->qp_type != IBV_QPT_UD || !rv_gid_is_mc(gid))
		return EINVAL;
	c = to_ctx(qp->context);
	rv_lock(c);
	if (mc_find(q, gid) >= 0)
		goto out;   /* a member already */
	if (q->nmc == RV_MC_QP) {
		ret = ENOMEM;
		goto out;
	}
	group_prefix(gid, name, sizeof(name));
	snprintf(name + strlen(name), sizeof(name) - strlen(name), "%06" PRIx32, qp->qp_num);
	ret = rv_create(c, name, 4096, NULL, &h);
	if (ret) {
		if (getenv("ROSHM_VERBS_DEBUG"))
			fprintf(stderr, "roshm-verbs: attach_mcast: %s: %s\n", name, strerror(-ret));
		ret = ret == -EDQUOT || ret == -ENOSPC ? ENOMEM : -ret;
		goto out;
	}
	q->mc_gid[q->nmc] = *gid;
	q->mc_handle[q->nmc] = h;
	q->nmc++;
out:
	rv_unlock(c);
	return ret;
}

static void mc_leave(struct rv_ctx *c, struct rv_qp *q, int i)
{
	roshm_region_close(c->r, q->mc_handle[i]);   /* the record goes with it */
	q->nmc--;
	q->mc_gid[i] = q->mc_gid[q->nmc];
	q->mc_handle[i] = q->mc_handle[q->nmc];
}

RV_EXPORT int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	struct rv_qp *q = (struct rv_qp *)qp;
	struct rv_ctx *c;
	int i, ret = 0;

	(void)lid;
	if (!qp || !gid || qp->qp_type != IBV_QPT_UD)
		return EINVAL;
	c = to_ctx(qp->context);
	rv_lock(c);
	i = mc_find(q, gid);
	if (i < 0)
		ret = EINVAL;   /* not a member */
	else
		mc_leave(c, q, i);
	rv_unlock(c);
	return ret;
}

/* The QP goes: out of every group (lock held). */
void rv_mc_leave_all(struct rv_ctx *c, struct rv_qp *q)
{
	while (q->nmc)
		mc_leave(c, q, (int)q->nmc - 1);
}

/* The members of @g as the registry lists them now (lock held: a call to
 * roshmd, as a UD destination's first lookup is). Only records whose names
 * are exactly a member's of @g count, each QPN once; an error lists none. */
static void mc_list(struct rv_ctx *c, struct rv_mcg *g, uint64_t now)
{
	char prefix[ROSHM_NAME_MAX], *text = NULL;
	size_t pl, k;
	json_t *a, *o;
	int ret;

	group_prefix(&g->gid, prefix, sizeof(prefix));
	pl = strlen(prefix);
	g->at_ns = now;
	ret = roshm_region_list(c->r, prefix, &text);
	a = ret ? NULL : json_loads(text, 0, NULL);
	free(text);
	if (!json_is_array(a)) {
		/* the members listed before stay, until the next try, soon
		 * (roshmd refuses a tenant's listings past its registry quota
		 * with EAGAIN) */
		g->at_ns = now - (RV_MC_TTL_NS - RV_MC_RETRY_NS);
		if (getenv("ROSHM_VERBS_DEBUG"))
			fprintf(stderr, "roshm-verbs: listing group %s: %s\n", prefix,
				ret ? strerror(-ret) : "not a list");
		json_decref(a);
		return;
	}
	g->n = 0;
	json_array_foreach(a, k, o) {
		const char *name = json_string_value(json_object_get(o, "name"));
		const char *state = json_string_value(json_object_get(o, "state"));
		const char *base = name ? strchr(name, '/') : NULL;
		char tail[8], *end;
		unsigned long qpn;
		bool dup = false;

		if (!base || !state || strcmp(state, "active") || strncmp(++base, prefix, pl) ||
		    strlen(base + pl) != 6)
			continue;
		memcpy(tail, base + pl, 7);
		qpn = strtoul(tail, &end, 16);
		if (*end || tail[0] == '+' || tail[0] == '-' || tail[0] == ' ')
			continue;
		for (uint32_t j = 0; j < g->n; j++)
			dup |= g->qpn[j] == qpn;
		if (!dup && g->n < RV_MC_MEMBERS)
			g->qpn[g->n++] = (uint32_t)qpn;
		else if (!dup && getenv("ROSHM_VERBS_DEBUG"))
			fprintf(stderr, "roshm-verbs: group %s: member %06lx past the first %d: "
				"it gets nothing\n", prefix, qpn, RV_MC_MEMBERS);
	}
	json_decref(a);
	if (getenv("ROSHM_VERBS_DEBUG"))
		fprintf(stderr, "roshm-verbs: group %s: %u members\n", prefix, g->n);
}

/*
 * The entry of group @gid for a WR, a reference taken: its members listed
 * again when RV_MC_TTL_NS old and no WR is going through them. -1 when
 * every entry is in use (lock held).
 */
int rv_mc_get(struct rv_ctx *c, const union ibv_gid *gid)
{
	uint64_t now = rv_now_ns();
	int at = -1, same = -1;
	struct rv_mcg *g;

	for (int i = 0; i < RV_MCG; i++) {
		g = &c->mcg[i];
		if (g->used && !memcmp(&g->gid, gid, sizeof(*gid))) {
			if (now - g->at_ns <= RV_MC_TTL_NS) {
				g->refs++;
				return i;
			}
			same = i;   /* listed too long ago */
		} else if (at < 0 && !g->refs) {
			at = i;     /* free, or nobody's now */
		}
	}
	if (same >= 0 && !c->mcg[same].refs) {
		at = same;   /* listed again in place */
	} else if (at < 0) {
		if (same < 0)
			return -1;
		c->mcg[same].refs++;   /* no entry free: the old list a while longer */
		return same;
	}
	g = &c->mcg[at];
	if (at != same) {
		/* a new entry; an old one of the group keeps its list for the
		 * WRs going through it (so that a sender that always has one in
		 * flight still sees members come and go), and is found no more */
		g->used = true;
		g->gid = *gid;
		g->n = same >= 0 ? c->mcg[same].n : 0;
		if (same >= 0) {
			memcpy(g->qpn, c->mcg[same].qpn, sizeof(g->qpn));
			c->mcg[same].used = false;
		}
	}
	mc_list(c, g, now);   /* a listing that fails keeps the members before */
	g->refs = 1;
	return at;
}

void rv_mc_put(struct rv_ctx *c, int i)
{
	if (i >= 0 && c->mcg[i].refs)
		c->mcg[i].refs--;
}
