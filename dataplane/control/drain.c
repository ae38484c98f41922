// SPDX-License-Identifier: MIT
/*
 * Drain (preStop, SIGTERM, `roshmctl drain [--tenant T | --region R]`):
 * mark the regions stale in the registry (peers pause their work instead of
 * failing it), refuse new work for them, let transactions under way finish
 * and apply everything committed (holes are aborted after txn.abort_ms),
 * then unpublish them. The admin request is answered when that is done.
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "control/control.h"

#define RD_LOG_COMPONENT RD_LC_CONTROL

struct rd_drain_job {
	int reply_fd;                 /* the admin connection waiting, or -1 */
	uint32_t pending;             /* its regions not drained yet */
	uint32_t drained, timed_out;
	uint64_t deadline_ns;
	uint64_t not_before_ns;       /* peers must have had time to see "stale" */
	struct rd_region **regions;   /* every region it drains (held) */
	uint32_t nregions;
	struct rd_drain_job *next;
};

static bool matches(const struct rd_region *rg, const struct rd_drain_match *m)
{
	char full[2 * ROSHM_NAME_MAX];

	if (rg->remote || !rg->owner || rg->ctl_draining)
		return false;
	if (m->owner_tenant && strcmp(rg->tenant, m->owner_tenant))
		return false;
	if (m->tenant)
		return !strcmp(rg->tenant, m->tenant);
	if (m->region) {
		snprintf(full, sizeof(full), "%s/%s", rg->tenant, rg->name);
		return !strcmp(full, m->region);
	}
	if (m->pod)
		return !strcmp(rg->owner->pod, m->pod);
	return true;
}

int rd_drain_start(struct rd_control *ctl, const struct rd_drain_match *m, int reply_fd)
{
	struct rd_drain_job *job = calloc(1, sizeof(*job));
	struct rd_region_rec rec;
	uint32_t n = 0;

	if (!job)
		return -ENOMEM;
	for (struct rd_region *rg = ctl->regions; rg; rg = rg->next)
		n += matches(rg, m);
	job->regions = calloc(n ? n : 1, sizeof(*job->regions));
	if (!job->regions) {
		free(job);
		return -ENOMEM;
	}
	job->reply_fd = reply_fd;
	job->deadline_ns = rd_mono_ns() + (uint64_t)ctl->cfg->drain_timeout_ms * 1000000ull;
	/* Peers check the registry every revalidate_ms (at once with etcd's
	 * watch): keep the stale record up for two of those, so that they
	 * pause rather than find the region gone. */
	job->not_before_ns = rd_mono_ns();
	for (struct rd_region *rg = ctl->regions; rg && job->nregions < n; rg = rg->next) {
		if (!matches(rg, m))
			continue;
		struct rd_cmd cmd = { .type = RD_CMD_REGION_DRAIN, .region = rg };

		rd_region_to_rec(ctl, rg, &rec, RD_STATE_STALE);
		ctl->reg.ops->put_region(&ctl->reg, &rec, 0, NULL, NULL);
		rd_control_cmd(ctl, &cmd);
		rg->ctl_draining = true;
		rg->refs++; /* held until the job is done */
		job->regions[job->nregions++] = rg;
		RD_LOG(INFO, "region %s/%s: draining (stale in the registry)", rg->tenant, rg->name);
	}
	if (m->region && !job->nregions) {
		free(job->regions);
		free(job);
		return -ENOENT;
	}
	job->pending = job->nregions;
	if (m->owner_tenant) /* a tenant's own drain: its stale records are its registry writes */
		rd_reg_rate_take_tenant(ctl, m->owner_tenant, job->nregions);
	/* peers (any network provider) see the stale records at their next
	 * revalidation and hold their work: give them two */
	if (job->nregions && ctl->poller->net)
		job->not_before_ns += 2ull * ctl->cfg->revalidate_ms * 1000000ull;
	job->next = ctl->drains;
	ctl->drains = job;
	return (int)job->nregions;
}

static bool region_drained(const struct rd_region *rg)
{
	const struct roshm_region_hdr *h = rg->map;

	if (!rg->txn_slots)
		return true;
	/* The poller's own count of what it applied, not the header's (the
	 * owner can write that); the tail is where reservations land. */
	return __atomic_load_n(&rg->applied, __ATOMIC_ACQUIRE) >=
	       __atomic_load_n(&h->txn_tail, __ATOMIC_ACQUIRE);
}

void rd_drain_forget_fd(struct rd_control *ctl, int fd)
{
	for (struct rd_drain_job *j = ctl->drains; j; j = j->next)
		if (j->reply_fd == fd)
			j->reply_fd = -1;
}

void rd_drain_tick(struct rd_control *ctl)
{
	uint64_t now = rd_mono_ns();
	struct rd_drain_job **pp = &ctl->drains;

	while (*pp) {
		struct rd_drain_job *j = *pp;
		bool late = now >= j->deadline_ns;

		if (now < j->not_before_ns && !late) {
			pp = &j->next;
			continue;
		}

		for (uint32_t i = 0; i < j->nregions; i++) {
			struct rd_region *rg = j->regions[i];

			if (!rg)
				continue;
			if (!region_drained(rg) && !late)
				continue;
			if (late && !region_drained(rg)) {
				RD_LOG(WARNING, "region %s/%s: drain timed out with transactions unapplied",
				       rg->tenant, rg->name);
				j->timed_out++;
			} else {
				j->drained++;
			}
			if (rg->owner)
				rd_region_unpublish(ctl, rg);
			j->regions[i] = NULL;
			j->pending--;
			struct rd_region *keep = rg;

			keep->refs--; /* our hold; the owner's handle keeps it mapped */
			if (!keep->refs) {
				/* nothing else holds it: freeing needs control's list */
				keep->refs = 1;
				rd_control_region_put(ctl, keep);
			}
		}
		if (j->pending) {
			pp = &j->next;
			continue;
		}
		if (j->reply_fd >= 0) {
			json_t *o = json_object();

			json_object_set_new(o, "drained", json_integer(j->drained));
			json_object_set_new(o, "timed_out", json_integer(j->timed_out));
			rd_control_admin_reply(j->reply_fd, o);
			json_decref(o);
			rd_control_drain_answered(ctl, j->reply_fd);
		}
		RD_LOG(INFO, "drain done: %u regions drained, %u timed out", j->drained, j->timed_out);
		*pp = j->next;
		free(j->regions);
		free(j);
	}
}

bool rd_drain_idle(const struct rd_control *ctl)
{
	return !ctl->drains;
}
