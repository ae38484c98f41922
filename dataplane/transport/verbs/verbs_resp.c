// SPDX-License-Identifier: MIT
/*
 * verbs transport, control half, the responder: a peer roshmd's connect
 * request (rdma_cm) carries a hello; we answer with a challenge in the
 * reject's private data, and accept the second request only with a proof
 * made with the cluster secret (verbs_pdata.c), the QP set up for it then.
 * Everything in a request's private data is the peer's: checked before use.
 * The rest of the control half is verbs_cm.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "control/control.h"
#include "transport/verbs/verbs.h"
#include "transport/verbs/verbs_pdata.h"

#define RD_LOG_COMPONENT RD_LC_VERBS

#define VCTL ((struct rd_verbs_ctl *)rd_verbs_provider.ctl_priv)
#define CHAL_TTL_NS 2000000000ull      /* a challenge answers one proof within this */
#define CHAL_PER_ADDR 4                /* challenges outstanding per peer address */
#define INBOUND_DEPTH 4                /* an inbound QP's send queue: answers only */

static void deny(struct rdma_cm_id *id)
{
	struct roshm_verbs_challenge d = { .magic = ROSHM_VERBS_MAGIC, .kind = ROSHM_VERBS_DENIED,
					   .version = ROSHM_VERBS_VERSION };

	rdma_reject(id, &d, sizeof(d));
}

/* A connect request: answer a hello with a challenge, accept a good proof.
 * Returns true when @id is kept (accepted), false when the caller destroys it. */
bool rd_verbs_on_request(struct rd_control *ctl, struct rdma_cm_id *id, const void *pdata,
			 size_t plen, uint8_t initiator_depth)
{
	struct rd_verbs_ctl *v = VCTL;
	uint64_t now = rd_mono_ns();
	struct rd_vpd m;
	int dr = rd_verbs_pdata_decode(pdata, plen, RD_VPD_REQUEST, &m);

	/* decoded and checked once (verbs_pdata.c): names valid, nothing
	 * unterminated reaches a log line or a MAC */
	if (dr) {
		RD_LOG(WARNING, "verbs: connect request %s: refused",
		       dr == -EPROTO ? "that is not from a roshm peer" : "with malformed private data");
		deny(id);
		return false;
	}
	if (m.kind == ROSHM_VERBS_HELLO) {
		struct roshm_verbs_challenge c = { .magic = ROSHM_VERBS_MAGIC,
						   .kind = ROSHM_VERBS_CHALLENGE,
						   .version = ROSHM_VERBS_VERSION };
		struct rd_addr from;
		uint8_t src[16];

		rd_addr_from_sa(&from, rdma_get_peer_addr(id));
		rd_addr_key(&from, src);
		struct rd_vchal *slot = NULL;
		uint32_t same = 0;

		/* One source address holds at most CHAL_PER_ADDR challenges
		 * (past that its hellos are refused: it retries). Free or
		 * expired slots go first; when every slot is live (many
		 * addresses at once), the oldest challenge goes: filling the
		 * table then takes a steady flood from many addresses, and a
		 * real peer's proof comes back within its round trip. */
		struct rd_vchal *oldest = NULL;

		for (size_t i = 0; i < RD_VERBS_CHAL_MAX; i++) {
			if (v->chal[i].used && v->chal[i].expires_ns >= now) {
				same += !memcmp(v->chal[i].src, src, sizeof(src));
				if (!oldest || v->chal[i].expires_ns < oldest->expires_ns)
					oldest = &v->chal[i];
				continue;
			}
			if (!slot)
				slot = &v->chal[i];
		}
		if (!slot && same < CHAL_PER_ADDR) {
			slot = oldest;
			v->chal_evicted++;
		}
		if (!slot || same >= CHAL_PER_ADDR) {
			v->chal_refused++;
			deny(id);
			return false;
		}
		memcpy(slot->src, src, sizeof(slot->src));
		rd_verbs_rnd(slot->nonce_s, sizeof(slot->nonce_s));
		memcpy(slot->nonce_r, m.nonce, sizeof(slot->nonce_r));
		memset(slot->node_r, 0, sizeof(slot->node_r));
		memcpy(slot->node_r, m.node, strnlen(m.node, ROSHM_VERBS_ID - 1));
		slot->expires_ns = now + CHAL_TTL_NS;
		slot->used = true;
		memcpy(c.nonce, slot->nonce_s, sizeof(c.nonce));
		snprintf(c.node, sizeof(c.node), "%s", ctl->cfg->node);
		rd_verbs_vmac(&v->secret, "roshm-vsrv", slot->nonce_r, slot->nonce_s, slot->node_r, c.node, c.mac);
		rdma_reject(id, &c, sizeof(c));
		return false;
	}
	if (m.kind != ROSHM_VERBS_PROOF) {
		deny(id);
		return false;
	}
	const struct rd_vpd *pr = &m;
	struct rd_vchal *ch = NULL;
	uint8_t expect[32];

	for (size_t i = 0; i < RD_VERBS_CHAL_MAX; i++)
		if (v->chal[i].used && !memcmp(v->chal[i].nonce_s, pr->nonce, ROSHM_VERBS_NONCE))
			ch = &v->chal[i];
	if (!ch || ch->expires_ns < now) {
		RD_LOG(WARNING, "verbs: connect request with an unknown or expired challenge: refused");
		deny(id);
		return false;
	}
	ch->used = false; /* one proof per challenge */
	rd_verbs_vmac(&v->secret, "roshm-vreq", ch->nonce_r, ch->nonce_s, ch->node_r, ctl->cfg->node, expect);
	if (CRYPTO_memcmp(expect, pr->mac, sizeof(expect))) {
		RD_LOG(WARNING, "verbs: node '%s' failed the cluster-secret challenge: refused",
		       ch->node_r);
		deny(id);
		return false;
	}
	/* Bounded: a node has at most RD_VERBS_QPS_MAX passive QPs (its own
	 * qps_per_peer may differ from ours; a new one past that replaces its
	 * oldest: a node that restarted connects again), and all nodes together
	 * 2 x max_peers x RD_VERBS_QPS_MAX (the oldest of all makes room), so
	 * that a peer holding the secret cannot pile up QPs. */
	{
		struct rd_vin **mine = NULL, **any = NULL;
		uint32_t nmine = 0, nall = 0;

		for (struct rd_vin **pp = &v->inbound; *pp; pp = &(*pp)->next) {
			nall++;
			any = pp; /* newest first: the last is the oldest */
			if (!strcmp((*pp)->node, ch->node_r)) {
				nmine++;
				mine = pp;
			}
		}
		struct rd_vin **drop = nmine >= RD_VERBS_QPS_MAX ? mine :
				       nall >= 2 * ctl->cfg->max_peers * RD_VERBS_QPS_MAX ? any : NULL;

		if (drop) {
			struct rd_vin *old = *drop;

			RD_LOG(NOTICE, "verbs: an older QP of node %s closed for a new one (%s)", old->node,
			       drop == mine ? "its QPs are at the most" : "inbound QPs full");
			*drop = old->next;
			rd_verbs_vin_free(old);
		}
	}
	/* Authenticated: a passive QP that lets the peer's NIC reach our MRs. */
	struct rd_vin *in = calloc(1, sizeof(*in));
	struct ibv_qp_init_attr qa = { 0 };
	struct rdma_conn_param cp = { 0 };

	if (!in)
		goto fail;
	in->cq = ibv_create_cq(v->ctx, INBOUND_DEPTH, NULL, NULL, 0);
	if (!in->cq)
		goto fail;
	qa.send_cq = qa.recv_cq = in->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = 1;
	qa.cap.max_recv_wr = 1;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	if (rdma_create_qp(id, v->pd, &qa))
		goto fail;
	/* responder_resources > 0 is what grants REMOTE_READ and REMOTE_ATOMIC. */
	cp.responder_resources = initiator_depth < v->max_qp_rd_atom ? initiator_depth : (uint8_t)v->max_qp_rd_atom;
	if (!cp.responder_resources)
		cp.responder_resources = 1;
	cp.initiator_depth = 0;
	cp.rnr_retry_count = 7;
	if (rdma_accept(id, &cp)) {
		RD_LOG(WARNING, "verbs: rdma_accept: %s", strerror(errno));
		rdma_destroy_qp(id);
		goto fail;
	}
	in->id = id;
	snprintf(in->node, sizeof(in->node), "%s", ch->node_r);
	in->next = v->inbound;
	v->inbound = in;
	return true;
fail:
	RD_LOG(WARNING, "verbs: cannot accept node '%s': %s", ch->node_r, strerror(errno));
	if (in && in->cq)
		ibv_destroy_cq(in->cq);
	free(in);
	deny(id);
	return false;
}
