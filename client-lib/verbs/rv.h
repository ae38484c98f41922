/* SPDX-License-Identifier: MIT */
/*
 * libroshm-verbs internals, shared by verbs.c (device, context, memory),
 * qp.c (QPs and the send engine), recv.c (receive queues and the inbound
 * ring every QP owns) and cq.c (CQs, completion channels, the notifier).
 *
 * Locking: one mutex per context (rv_ctx.lock) covers everything below it;
 * every entry point that touches the context takes it, so the verbs calls
 * are thread-safe, and the notifier thread (cq.c) drives progress for
 * applications that sleep on a completion channel. A channel has its own
 * lock (taken inside the context's, never the other way round).
 */
#ifndef RV_H
#define RV_H

#include <pthread.h>
#include <sys/types.h>
#include <stdbool.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "roshm.h"
#include "roshm/dma.h"

#define RV_EXPORT __attribute__((visibility("default")))

/*
 * What a NIC's DMA does to application memory: the bytes of a registered
 * buffer moved in or out by the library on the NIC's behalf (received
 * messages, READ data and atomic results, gathered sends, registration).
 * The ranges are checked against the MRs when the WR is posted; ASan checks
 * the program's own accesses, not the NIC's, so under ASan these copies are
 * not instrumented: an application that frees a registered buffer while its
 * QP still receives into it gets what it gets from a NIC, and a report from
 * the notifier thread cut off by the application's exit() is not the
 * library's. The last bytes land last and once (roshm/dma.h), as a NIC's:
 * an application may poll the last byte of a READ's buffer.
 */
static inline void rv_dma_copy(void *dst, const void *src, size_t n)
{
	roshm_dma_copy(dst, src, n);
}
#define RV_PAGE 4096ull
#define RV_META_MAGIC 0x33524d5672687372ull /* "rshrVMR3" */
#define RV_RKEY_CACHE 64
#define RV_RKEY_BAD 8          /* rkeys remembered as refused (rkey.c) */
#define RV_MAX_INLINE 256
#define RV_MAX_WR 16384
#define RV_MAX_SRQ_WR 16384
#define RV_MAX_SGE 16
/* CQ entries: libfabric's ofi_rxm sizes its MSG CQ for its universe
 * ((tx + rx) * 256, about 196k); the ring (2x, private memory, touched only
 * as used) stays virtual until completions fill it */
#define RV_MAX_CQE (1 << 20)
#define RV_MAX_RD_ATOM 16        /* max_qp_rd_atom, max_qp_init_rd_atom */
/* An arena slot holds a 64 KiB message and its fragment header. */
#define RV_SLOT_TARGET (68u * 1024)
#define RV_META_SIZE 4096u      /* arena tail: the synchronous header reads */

/* user_data of our SQEs: an arena slot, or a synchronous read. */
#define RV_UD_PUBLISH (1ull << 32)      /* the CAS that publishes a fragment */
#define RV_UD_SYNC (2ull << 62)         /* | sequence: sync_read() */

/*
 * First page of every MR region: what the owner registered, read by peers.
 * An MR's pages are the runs of segs[], in address order: a page is owned by
 * the first live MR that covered it (its region holds the page after this
 * metadata page); a later MR over the same page names that region's key
 * and offset instead (registrations may overlap, as on a NIC).
 */
#define RV_MR_SEGS 32           /* runs of one MR */
#define RV_MR_KEYS 8            /* regions one MR's runs may lie in */
struct rv_seg {
	uint64_t va;            /* page-aligned start */
	uint64_t data_off;      /* region data offset of va (>= RV_PAGE) */
	uint64_t len;           /* bytes, a multiple of RV_PAGE */
	uint32_t key;           /* the region "ibv-mr-<key>" holding the run */
	uint32_t rsvd;
};
_Static_assert(sizeof(struct rv_seg) == 32, "segment");
struct rv_meta {
	uint64_t magic;
	uint64_t addr;          /* ibv_mr.addr */
	uint64_t length;
	uint32_t access;        /* IBV_ACCESS_* */
	uint32_t rkey;
	uint32_t nseg;
	uint32_t qpn;           /* a type 2 memory window: the one peer QP that may use
				 * it (its QP's dest_qp_num, mw.c); else 0 */
	struct rv_seg seg[RV_MR_SEGS];
};
_Static_assert(sizeof(struct rv_meta) <= RV_META_SIZE, "metadata fits the sync read area");

/*
 * Inbound ring of a QP: region "ibv-qp-<qpn>" (6 hex digits), created with
 * the QP, in the QP's tenant. Data offset 0 holds this header; slots of 64
 * bytes start at RV_RING_SLOTS. The owner writes everything here but the
 * slots; the connected peer READs the credit words and fills slots.
 */
#define RV_RING_MAGIC 0x31474e5272687372ull /* "rshrRNG1" */
#define RV_RING_CREDIT 64               /* offset of cons, rnr_timer */
#define RV_RING_SLOTS 4096ull
#define RV_SLOT 64u
struct rv_ring_hdr {
	uint64_t magic;
	uint32_t qpn;
	uint32_t nslots;        /* a power of two; 0: the QP has no receive queue */
	uint32_t peer;          /* RV_RING_PEER | the QPN its QP is connected to
				 * (set at RTR, 0 after a reset): a peer uses the
				 * ring, and reaches the owner's MRs, only when it
				 * names the peer's QP */
	uint32_t rsvd1;
	uint64_t rsvd0[5];
	uint64_t cons;          /* slots consumed (store-release by the owner) */
	uint32_t rnr_timer;     /* the owner's min_rnr_timer (0..31) */
	uint32_t qp_access;     /* RV_QPACC_KNOWN | the owner's qp_access_flags'
				 * IBV_ACCESS_REMOTE_*: what its peer may do */
	uint64_t rq;            /* RECVs taken << 32 | RECVs posted (rv_ring_rq; 0 for
				 * an SRQ's or XRC QP): a full ring whose owner has
				 * RECVs waiting is not receiver-not-ready */
	uint64_t rsvd2[5];
};
_Static_assert(sizeof(struct rv_ring_hdr) == 128, "ring header");
#define RV_RING_CREDIT_LEN 24           /* cons, rnr_timer, qp_access, rq */
_Static_assert(__builtin_offsetof(struct rv_ring_hdr, rq) == RV_RING_CREDIT + 16, "rq word");
#define RV_QPACC_KNOWN (1u << 31)
#define RV_RING_PEER (1u << 31)
#define RV_REMOTE_ACCESS (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)
_Static_assert(__builtin_offsetof(struct rv_ring_hdr, cons) == RV_RING_CREDIT, "credit words");

/*
 * A fragment: nslots consecutive slots (never wrapping), this header in the
 * first, len payload bytes right after it. The sender WRITEs header and
 * payload (tag 0), then CASes tag 0 -> slot sequence + 1 on the same
 * connection: the tag is what the owner polls. A message is one or more
 * fragments, FIRST ... LAST, like the packets of an IB message.
 */
/* RV_FRAG_SEND_INV: imm is the rkey the receiver invalidates (host order) */
enum { RV_FRAG_SEND = 1, RV_FRAG_SEND_IMM = 2, RV_FRAG_WRITE_IMM = 3, RV_FRAG_SEND_INV = 4 };
#define RV_FRAG_FIRST 1u
#define RV_FRAG_LAST 2u
struct rv_frag {
	uint64_t tag;
	uint32_t len;           /* payload bytes in this fragment */
	uint32_t nslots;        /* slots it covers, this header's included */
	uint32_t total;         /* message bytes (WRITE_WITH_IMM: the write's length) */
	uint32_t imm;           /* as the sender gave it (network order) */
	uint32_t src_qp;
	uint8_t opcode;         /* RV_FRAG_* */
	uint8_t flags;          /* RV_FRAG_FIRST | RV_FRAG_LAST */
	uint16_t rsvd0;
	uint32_t srqn;          /* from an XRC_SEND QP: the SRQ of the receiver's XRC
				 * domain the message goes to (xrc.c), else 0 */
	uint32_t rsvd2;
	uint64_t rsvd1[3];
};
_Static_assert(sizeof(struct rv_frag) == RV_SLOT, "fragment header");
#define RV_MSG_MAX (1u << 30)   /* max_msg_sz */

/* The message an RC QP is receiving (recv.c), as its fragments built it (frag.c). */
struct rv_rmsg {
	bool in_msg;            /* fragments of a message delivered, LAST not yet */
	bool lenerr;            /* it does not fit its RECV */
	uint8_t op;
	uint32_t total, imm;
	uint64_t off;
};
bool rv_frag_ok(const struct rv_rmsg *m, uint32_t ring_n, uint32_t dest_qp, const struct rv_frag *f,
		uint32_t at);
uint64_t rv_frag_take(struct rv_rmsg *m, const struct rv_frag *f);

/*
 * Inbound ring of a UD QP: two regions. "ibv-qp-<qpn>" holds the header page
 * (magic RV_UD_MAGIC) and a state word per slot (RV_UD_STATES, padded to
 * whole pages); "ibv-qpd-<qpn>" holds the slots, RV_UD_STRIDE bytes each: a
 * datagram header and up to the MTU of payload. Any QP of the tenant may
 * send to it (a UD QP has no peer), so both are ROSHM_POLICY_TENANT, and
 * others may only CAS the state words (not the header page) and only WRITE
 * the slots: no READ, and no atomic on the slots, whose old value would read
 * them, so a sender cannot see other senders' datagrams. A sender claims a
 * slot with a CAS of its state 0 -> CLAIMED(token), WRITEs header and
 * payload, then CASes CLAIMED(token) -> FULL(token) (the owner's node
 * executes a client's operations in order, as a fragment's WRITE and tag); a
 * failed claim tries the next slot, then the ones after with pauses
 * between; once they went round the ring and 200 ms passed (or 2 s in
 * any case, ud.c) the datagram is dropped, as UD may. The owner takes FULL slots whose header carries the
 * state's token, and gives them back with a 0.
 */
#define RV_UD_MAGIC 0x3150445572687372ull /* "rshrUDP1" */
#define RV_UD_MTU 4096u
#define RV_UD_HDR 64u
#define RV_UD_STRIDE (RV_UD_HDR + RV_UD_MTU)
#define RV_UD_GRH 40u                   /* what a UD RECV gets first (struct ibv_grh) */
#define RV_UD_MIN_SLOTS 16u
/* a sender writes no slot this long after its claim (ud.c), and the owner
 * frees a slot that stays claimed this long (ud_ring.c): later, so that a
 * slot is never written under its next owner */
#define RV_UD_LATE_NS (1000ull * 1000000)
#define RV_UD_STUCK_NS (3000ull * 1000000)
_Static_assert(RV_UD_LATE_NS < RV_UD_STUCK_NS, "a late sender writes into a freed slot");
#define RV_UD_MAX_SLOTS 1024u
#define RV_UD_STATES RV_RING_SLOTS      /* data offset of the state words */
#define RV_UD_CLAIMED 1u
#define RV_UD_FULL 2u
struct rv_udh {
	uint64_t token;         /* the state's token (state >> 2) */
	uint32_t len;           /* payload bytes, <= RV_UD_MTU */
	uint32_t qkey;
	uint32_t src_qp;
	uint32_t imm;           /* as the sender gave it (network order) */
	uint8_t opcode;         /* RV_FRAG_SEND or RV_FRAG_SEND_IMM */
	uint8_t flags;          /* RV_UDH_MC: sent to the group mgid */
	uint8_t rsvd0[2];
	uint32_t seq;           /* the sender's count to this QP: the owner delivers a
				 * sender's datagrams in this order (a hint only) */
	uint8_t sgid[16];       /* the sender's GID (its node) */
	uint8_t mgid[16];       /* RV_UDH_MC: the group (the GRH's destination) */
};
#define RV_UDH_MC 1
_Static_assert(sizeof(struct rv_udh) == RV_UD_HDR, "datagram header");

static inline uint64_t rv_ud_states_size(uint32_t n)
{
	return RV_UD_STATES + (((uint64_t)n * 8 + 4095) & ~4095ull);
}

static inline uint64_t rv_ud_slots_size(uint32_t n)
{
	return (uint64_t)n * RV_UD_STRIDE;
}

/* A UD destination a sender resolved: the ring of QPN @qpn, opened (the
 * context's cache; WRs hold references). */
#define RV_UDD 64
struct rv_udd {
	uint32_t qpn;
	uint32_t handle;        /* its states (CAS) */
	uint32_t dhandle;       /* its slots (WRITE) */
	uint32_t n;             /* its slots (0: no UD QP there: datagrams are dropped) */
	uint32_t next;          /* the slot to claim next */
	uint32_t refs;
	bool used;
	bool open;              /* handle is ours to close */
	bool stale;             /* an operation found it closed or gone: look again */
	uint8_t tries;          /* lookups so far (n == 0: looking while < RV_UD_LOOKS) */
	uint64_t retry_ns;      /* n == 0: the next lookup, not before this */
	uint64_t full_until;    /* a datagram found no room: others get one claim till then */
	uint32_t fails;         /* failed claims since the last that worked (a lap: full) */
	/* a slot claimed ahead for the next datagram (ud.c): RV_PRE_* */
	uint8_t pre;
	uint32_t pre_slot;
	uint32_t claims;        /* claims issued to it (pre_seq: the claim ahead's) */
	uint32_t pre_seq;
	uint64_t pre_token, pre_at;
};
enum { RV_PRE_NONE, RV_PRE_PENDING, RV_PRE_READY };

/* Multicast (mcast.c): a group a context sends to, its members as the
 * registry listed them (a QP's membership is a region of its tenant,
 * "ibv-mc-<group GID>-<QPN>"). */
#define RV_MC_QP 16             /* groups a QP may join */
#define RV_MCG 16               /* groups a context sends to at once */
#define RV_MC_MEMBERS 64        /* QPs of a group a datagram goes to */
struct rv_mcg {
	union ibv_gid gid;
	uint64_t at_ns;         /* members listed then */
	uint32_t refs;          /* WRs on their way through its members */
	uint32_t n;
	uint32_t qpn[RV_MC_MEMBERS];
	bool used;
};

/* A remote MR as a peer resolved it: its metadata (private copy, checked)
 * and a handle per segment (handles[] of the distinct regions, opened once). */
struct rv_rkey {
	uint32_t rkey;
	uint32_t mask;          /* IBV_ACCESS_REMOTE_* the peer QP allows: opened with
				 * the MR's access and these (rv_rkey_resolve) */
	uint32_t refs;          /* WRs that still use it */
	bool valid;
	bool stale;             /* a WR found a handle closed (a grant taken back): look again */
	uint32_t nh;
	/* the client that owns the MR (roshm_region_owner), its metadata page
	 * and every region its segments name: the one at the other end of the
	 * QP that posts to it (the process a NIC's responder would be) */
	uint64_t owner;
	/* [0]: the metadata page (READ); then one per segment: the MR's bytes
	 * in it, opened as the part its owner granted (rv_seg_part) */
	uint32_t handles[RV_MR_SEGS + 1];
	uint8_t seg_h[RV_MR_SEGS]; /* index into handles[] of each segment */
	struct rv_meta m;
};

/* An MR of ours. Its region holds the pages no earlier live MR held (runs[]);
 * refs counts the live MRs whose segments use them, itself included while
 * registered: a deregistered MR's region stays open (dead) until no other MR
 * uses its pages. */
struct rv_mr {
	struct ibv_mr mr;
	struct rv_mr *next;
	uint32_t handle;
	uint32_t refs;
	bool dead;
	uint32_t nrun;
	struct rv_seg runs[RV_MR_SEGS];    /* own pages: key = this MR's */
	uint32_t nuse;
	struct rv_mr *uses[RV_MR_KEYS];    /* other MRs whose pages it uses */
	/* All its pages, in address order (the metadata page's segments, our
	 * private copy), and the handle of the region holding each: where
	 * roshmd finds a WR's local bytes (ROSHM_SQE_F_LBUF, rv_lbuf) */
	uint32_t nseg;
	struct rv_seg seg[RV_MR_SEGS];
	uint32_t seg_handle[RV_MR_SEGS];
	int mr_access;          /* IBV_ACCESS_* it was registered with */
	uint64_t ino, foff;     /* its memfd (inode, device) and its data's file offset */
	unsigned int maj, min;
	uint32_t nmw;           /* memory windows bound to it (dereg: EBUSY) */
	/* A bound memory window (mw.c) is an entry of the list too, with no
	 * pages of its own and no lkey: win_of the MR it is bound to, win_qp
	 * (type 2) the QP it was bound through, the only one granted it. */
	struct rv_mr *win_of;
	struct rv_qp *win_qp;
};

struct rv_mw {
	struct ibv_mw mw;
	struct rv_mw *next;     /* the context's */
	struct rv_mr *win;      /* bound: its entry in the MR list; NULL: free */
};

struct rv_cq {
	union {                 /* cqx: ibv_create_cq_ex's (cq_ex.c); its first fields are cq's */
		struct ibv_cq cq;
		struct ibv_cq_ex cqx;
	};
	struct ibv_wc xwc;      /* cq_ex.c: the completion ibv_wc_read_* answer from */
	pthread_mutex_t xlock;  /* cq_ex.c: held from ibv_start_poll to ibv_end_poll */
	struct rv_cq *next;     /* the context's CQs */
	struct ibv_wc *wc;
	uint64_t *ts;           /* cq_ex.c with timestamps: each entry's CLOCK_MONOTONIC ns, else NULL */
	uint64_t xts;           /* cq_ex.c: the current completion's */
	uint32_t mask, head, tail;
	bool overrun;
	uint32_t aev_reported;  /* its async events given to the application */
	bool armed;             /* ibv_req_notify_cq: the next completion fires */
	bool in_poll;           /* the application's poll of it is taking completions in */
	bool deferred;          /* ... one came while armed: its event waits for the poll's end */
	uint64_t polls;         /* the application's polls of it (context lock) */
	uint64_t polls_seen;    /* ... at the notifier's last look */
	bool served, looked;    /* notifier: polled since its last look; looked at once */
	bool queued;            /* on its channel's list of fired CQs */
	uint32_t ev_pending;    /* its events not yet taken by ibv_get_cq_event */
	uint32_t ev_reported;   /* its events ibv_get_cq_event gave (channel's lock) */
	struct rv_cq *ev_next;
};

struct rv_chan {
	struct ibv_comp_channel ch;     /* ch.fd: an eventfd (semaphore), one count per event */
	pthread_mutex_t lock;
	struct rv_cq *first, *last;     /* fired CQs, in order */
	uint32_t owed;                  /* counts a waiter's read took (rv_fd_back) */
};

/* A send WR: recorded by ibv_post_send, issued as resources and credits allow. */
struct rv_swr {
	uint64_t wr_id;
	uint64_t len;           /* bytes of the message */
	uint64_t done;          /* RDMA bytes issued so far */
	uint64_t sent;          /* message bytes published in fragments so far */
	uint64_t raddr;         /* remote address (RDMA and atomics) */
	uint64_t cmp, swap;
	struct rv_rkey *k;      /* remote MR (RDMA and atomics), a reference held */
	uint8_t *inl;           /* inline copy of the data, or NULL */
	uint32_t pending;       /* SQEs issued and not completed */
	uint32_t nsqe;          /* SQEs issued so far */
	uint32_t frags;         /* fragments published so far */
	uint32_t imm;
	uint32_t xsrqn;         /* XRC_SEND: the receiver's SRQ (remote_srqn) */
	enum ibv_wc_status status;
	enum ibv_wc_opcode wc_op;
	enum ibv_wr_opcode op;
	uint16_t nsge;
	uint32_t gen;           /* rv_ctx.dereg_gen when its SGEs were last found in MRs */
	bool signaled;
	bool issued;            /* nothing left to issue */
	bool drop;              /* UC: lost at the peer; completes as sent */
	/* UD: the destination and where its datagram stands (ud.c) */
	uint8_t ud_phase;
	uint8_t ud_tries;       /* failed claims in a row */
	bool ud_bg;             /* parked: out of the QP's issue order (ud.c) */
	int16_t udd;            /* index in rv_ctx.udd holding a reference, or -1 */
	int8_t mcg;             /* to a group: index in rv_ctx.mcg holding a reference, or -1 */
	uint8_t mc_left;        /* to a group: its members still to go */
	bool ud_mc;             /* to a group: mc_gid */
	union ibv_gid mc_gid;
	uint64_t mc_t0;         /* to a group: its members' turn began (mcast.c RV_UD_WAIT_NS) */
	uint32_t ud_qpn, ud_qkey, ud_slot;
	uint32_t ud_seq;        /* its QP's count at the post (the header's seq) */
	uint64_t ud_token;
	uint64_t ud_t0;         /* first failed claim (dropped RV_UD_WAIT_NS on), 0: none yet */
	uint64_t ud_at;         /* the claim was issued at, or: no claim before this */
};

struct rv_rwr {
	uint64_t wr_id;
	uint64_t len;           /* sum of its SGEs */
	uint16_t nsge;
	bool bad;               /* an SGE outside its MR: LOC_PROT_ERR when used */
};

struct rv_srq {
	struct ibv_srq srq;
	struct rv_srq *next;    /* the context's SRQs */
	struct rv_xrcd *xrcd;   /* an XRC SRQ: its domain, else NULL */
	struct ibv_cq *cq;      /* an XRC SRQ: where its RECVs complete */
	uint32_t srqn;          /* an XRC SRQ: its number (ibv_get_srq_num) */
	struct rv_rwr *rwr;
	struct ibv_sge *rsge;   /* max_sge per WR */
	uint32_t mask, head, tail;
	uint32_t max_wr, max_sge, limit;
	uint32_t nqps;          /* QPs that use it (destroy: EBUSY) */
	bool dying;             /* an XRC SRQ in ibv_destroy_srq: no message takes it */
	uint32_t aev_reported;  /* its async events given to the application */
	/* QPs with a message waiting for a RECV, in the order they found it */
	struct rv_qp *wait_head, *wait_tail;
};

/*
 * An XRC domain (xrc.c): the XRC SRQs and XRC_RECV QPs made in it. The
 * opens of one file (its inode) in one context share it.
 */
struct rv_xrcd {
	struct ibv_xrcd xrcd;
	struct rv_xrcd *next;   /* the context's */
	uint32_t opens;
	bool has_ino;
	uint64_t ino, dev;
	uint32_t nsrq, nqps;    /* its SRQs and XRC_RECV QPs (close: EBUSY) */
};

struct rv_qp {
	union {                 /* qpx: ibv_qp_to_qp_ex's (qp_ex.c); its qp_base is qp */
		struct ibv_qp qp;
		struct ibv_qp_ex qpx;
	};
	struct rv_qp *pnext, *pprev;   /* the process's QPs, every context's (roshm_verbs_qpn_ours) */
	/* XRC_RECV: its domain; its SRQ (srq) is the one the message it
	 * receives names, chosen at each message's first fragment */
	struct rv_xrcd *xrcd;
	struct rv_qpx *x;       /* the work-request API's batch, or NULL (qp_ex.c) */
	struct rv_qp *next;     /* the context's QPs */
	struct ibv_qp_cap cap;
	/* what ibv_modify_qp set that roshm keeps only to report it
	 * (ibv_query_qp): the address vector, access flags, timeouts, ... */
	struct ibv_qp_attr set;
	bool sq_sig_all;
	uint32_t dest_qp_num, rq_psn, sq_psn;
	uint8_t rnr_retry;      /* 7: forever */
	bool broken;            /* a WR failed: what was not issued is flushed */
	bool xrc_last;          /* XRC_RECV: its held message is the last it takes (xrc.c) */
	bool destroying;        /* destroy or reset drains it: no issue, no completions */
	bool backlog_on;        /* counted in rv_ctx.nbacklog */
	uint32_t aev_reported;  /* its async events given to the application */

	/* send queue: [head, issue) issued, [issue, tail) waiting */
	struct rv_swr *swr;
	struct ibv_sge *sge;    /* cap.max_send_sge per WR */
	uint8_t *inl;           /* RV_MAX_INLINE per WR */
	uint32_t mask, head, issue, tail;
	uint32_t max_send_wr, sge_stride;
	uint32_t inflight;      /* SQEs of this QP in roshmd (credit reads too) */
	uint32_t data_inflight; /* RDMA WRITE and atomic SQEs: publications wait for them */

	/* receive queue (with an SRQ: the one RECV taken from it, srq.c) */
	struct rv_srq *srq;
	struct rv_qp *srq_wnext;  /* in its SRQ's line of QPs waiting for a RECV */
	bool srq_waiting;
	struct rv_rwr *rwr;
	struct ibv_sge *rsge;   /* cap.max_recv_sge per WR */
	uint32_t rq_mask, rq_head, rq_tail;
	uint32_t rsge_stride;

	/* our inbound ring */
	uint32_t ring_handle;
	struct rv_ring_hdr *ring;
	uint32_t ring_n;        /* slots */
	uint64_t ring_cons;
	struct rv_rmsg rm;      /* the message being received */

	/* connected: the owner of the peer's ring may open our ring and our
	 * PD's MRs (ROSHM_POLICY_GRANT), as a NIC lets only the QPs connected
	 * to a QP of the MR's PD use its rkey */
	bool gr_ok;
	/* its qp_access_flags' IBV_ACCESS_REMOTE_* (what a peer may do to our
	 * PD's MRs through it), and those its grants were made with */
	uint32_t acc, gr_acc;
	/* the peer QP's, from its ring header (peer_acc_known): what our RDMA
	 * and atomics may do through it; looked up at most a few times while
	 * its ring is not found */
	uint32_t peer_acc;
	bool peer_acc_known;
	uint8_t peer_acc_tries;
	uint64_t peer_acc_ns;   /* when it was last looked up */
	/* the peer's ring (we send to it) */
	bool peer_ok;
	enum ibv_wc_status peer_status; /* not SUCCESS: every SEND to the peer fails so */
	uint32_t peer_handle, peer_n;
	/* who owns the peer QP's ring (roshm_region_owner; 0: not known yet):
	 * our RDMA and atomics reach that client's MRs only, as a NIC's reach
	 * the responder's; looked up with the ring, a few tries */
	uint64_t peer_owner;
	bool peer_owner_tried;
	uint64_t peer_owner_ns; /* its last look (one per 100 ms after the first) */
	uint64_t prod;          /* next slot sequence we fill */
	uint64_t cons_known;    /* the peer's cons, as last read */
	bool credit_inflight;
	uint32_t want;          /* slots the blocked fragment needs (0: none blocked) */
	uint32_t rnr_count;
	uint8_t peer_rnr_timer;
	uint64_t rnr_next_ns;   /* no credit read before this (RNR timer) */
	/* a full ring whose owner says RECVs wait (qp.c, credit_done) */
	struct rv_full {
		uint64_t since_ns;      /* the wait's start or its cons' last move (0: none) */
		uint64_t wait_ns;       /* the next re-read's delay (backs off) */
		bool stalled;           /* cons still for RV_RING_FULL_STALL_NS: RNR */
		bool ended;             /* the last read found no RECV waiting */
	} full;

	/* UD (ud.c): its Q_Key, where the owner looks next, and per slot what
	 * it last saw there that was neither free nor full (and since when) */
	uint32_t qkey;
	uint32_t ud_dhandle;    /* the slots' region ("ibv-qpd-<qpn>") */
	uint8_t *ud_data;
	uint32_t ud_open;       /* parked WRs (their claims out of the issue order) */
	uint32_t ud_cur;
	uint64_t ud_sweep_ns;
	struct rv_udseen { uint64_t v, since; } *ud_seen;
	/* rv_ud_deliver: the full slots of one look, in the order they go
	 * into RECVs (ud_ord[ud_pos..ud_m) still to go), and the merge sort's
	 * other half; ud_seq: UD datagrams posted (the headers' seq) */
	struct rv_udord { uint64_t v; uint32_t at, seq, key; } *ud_ord, *ud_tmp;
	uint32_t ud_pos, ud_m, ud_seq;
	/* multicast groups it joined (mcast.c), each with its record's region */
	uint32_t nmc;
	union ibv_gid mc_gid[RV_MC_QP];
	uint32_t mc_handle[RV_MC_QP];
};

enum { RV_OP_WRITE, RV_OP_READ, RV_OP_ATOMIC, RV_OP_FRAG, RV_OP_CREDIT, RV_OP_PROBE,
       RV_OP_UD_CLAIM, RV_OP_UD_SEND, RV_OP_UD_PRECLAIM, RV_OP_UD_UNCLAIM };

/* One arena slot in use: the SQE(s) that own it. */
struct rv_op {
	struct rv_qp *qp;
	uint32_t widx;          /* RV_OP_UD_(UN)PRECLAIM: the rv_udd index instead */
	uint32_t len;
	uint8_t kind;           /* RV_OP_* */
	uint8_t refs;           /* CQEs still to come (a fragment: WRITE and CAS) */
	void *dst;              /* atomic: where the old value goes */
};

/* An async event not yet taken by ibv_get_async_event (async.c). */
struct rv_aev {
	void *obj;              /* struct rv_qp, rv_srq or rv_cq, as type says */
	enum ibv_event_type type;
};

struct rv_ctx {
	struct verbs_context vc;
	pthread_mutex_t lock;
	struct roshm *r;
	uint8_t *arena;
	uint64_t slot_size;
	uint32_t nslots;
	uint64_t meta_off;      /* RV_META_SIZE bytes after the slots */
	uint32_t *free_slots;
	uint32_t nfree;
	struct rv_op *ops;
	struct rv_mr *mrs;
	uint32_t dereg_gen;     /* counts ibv_dereg_mr: a WR posted before looks at its MRs again */
	struct rv_mw *mws;
	struct rv_qp *qps;
	struct rv_cq *cqs;
	struct rv_xrcd *xrcds;  /* xrc.c */
	struct rv_srq *srqs;    /* its SRQs (XRC ones have an srqn) */
	uint32_t xsrqn_next;
	uint32_t nbacklog;      /* QPs with WRs waiting for issue */
	bool grant_drops;       /* a QP went to the error state: its grants go (rv_progress) */
	uint64_t pushes;        /* completions ever added to its CQs (notifier) */
	struct rv_rkey rkeys[RV_RKEY_CACHE];
	uint32_t rkey_next;
	/* rkeys waited for in vain lately: one try each, no wait, until then
	 * (a peer that hands out an rkey never granted to us costs one wait) */
	struct { uint32_t key; uint64_t until; } rkey_bad[RV_RKEY_BAD];
	uint32_t rkey_bad_next;
	uint64_t rkey_until;    /* in rv_post_send: every rkey wait of the post ends then */
	uint32_t sync_seq;
	bool sync_done;
	int sync_status;
	uint64_t guid;
	uint64_t self_owner;     /* this client's identity as roshmd gives it (rkey.c), 0: not yet */
	uint64_t ring_bytes;    /* $ROSHM_VERBS_RECV_RING, 0: by max_recv_wr */
	bool yield;             /* $ROSHM_VERBS_YIELD: posts and empty polls yield the CPU */
	bool ud_first_last;     /* $ROSHM_VERBS_UD_FIRST=last (tests): ud.c */
	/* the notifier (cq.c): started by the first ibv_req_notify_cq */
	pthread_t thr;
	bool thr_on, stop;
	bool idle_sleep;        /* it sleeps with no timer for posted work: a post kicks it */
	struct rv_ctx *live_next;       /* the open contexts (cq.c, for fork) */
	bool no_thread;         /* it could not start: progress is the application's */
	bool watching;          /* it looks at the rings on a timer */
	int wake_fd;
	/* async events (async.c): vc.context.async_fd counts them */
	struct rv_aev *aev;     /* aev_cap of them (a power of two, or 0) */
	uint32_t aev_cap, aev_head, aev_tail;
	uint32_t aev_owed;      /* async_fd counts a waiter's read took (rv_fd_back) */
	/* UD destinations (ud.c) */
	struct rv_udd udd[RV_UDD];
	uint32_t udd_next;
	struct rv_mcg mcg[RV_MCG];   /* multicast groups sent to (mcast.c) */
};

static inline struct rv_ctx *to_ctx(struct ibv_context *c)
{
	return (struct rv_ctx *)((char *)c - __builtin_offsetof(struct rv_ctx, vc.context));
}

static inline void rv_lock(struct rv_ctx *c)
{
	pthread_mutex_lock(&c->lock);
}

static inline void rv_unlock(struct rv_ctx *c)
{
	pthread_mutex_unlock(&c->lock);
}

/* One line of /proc/self/maps: what backs [start, end). */
struct rv_vma {
	uintptr_t start, end;
	uint64_t off, ino;
	unsigned int maj, min;
	int prot;               /* PROT_* */
	bool shared;
	bool refused;           /* shared, and not memory an MR may take (mr.c) */
	bool ours;              /* one of roshm's own memfds */
	bool sysv;              /* a SysV segment (ino: its shmid) */
};
int rv_maps_load(struct rv_vma **out, size_t *n);
/* Not instrumented by ASan: code that runs on rv_on_own_stack's stack. */
#if defined(__clang__) || defined(__GNUC__)
#define RV_NO_ASAN __attribute__((no_sanitize("address")))
#else
#define RV_NO_ASAN
#endif
/* fn(arg) on a stack of its own, asynchronous signals blocked: for a copy
 * and a remap of pages that may hold the calling stack (stack.c). */
int rv_on_own_stack(int (*fn)(void *), void *arg);
/* Other threads' stores held off pages being moved (wbar.c): begin, over
 * a run (0, or -ENOTSUP where no barrier can stand), hold each writable
 * part of protection @prot read-only (on the own stack), end (every held
 * store runs again, on the new pages); around fork(), @before and after. */
int rv_wbar_begin(uintptr_t lo, uintptr_t hi);
int rv_wbar_hold(uintptr_t lo, uintptr_t hi, int prot);
void rv_wbar_end(void);
void rv_wbar_fork(bool before);

/* The smallest power of two >= @v (1 for 0; 2^63 for anything above). */
static inline uint64_t rv_pow2(uint64_t v)
{
	uint64_t n = 1;

	while (n < v && n < (1ull << 63))
		n <<= 1;
	return n;
}

/* SQ room and arena slots (the context's lock held) */
static inline uint32_t rv_sq_room(struct roshm *r)
{
	/* Acquire pairs with roshmd's release of the SQ head (poller R1). */
	uint32_t head = __atomic_load_n(r->sq.khead, __ATOMIC_ACQUIRE);

	return r->sq.entries - (r->sq.sqe_tail - head);
}

/*
 * An arena slot free and @n SQEs (into @s)? If not, ring the doorbell so that
 * roshmd takes what is queued; the caller retries on a later progress. Only
 * the context's lock holder produces SQEs, so the room checked is the room
 * taken.
 */
static inline bool rv_room(struct rv_ctx *c, struct roshm_sqe **s, uint32_t n)
{
	if (!c->nfree || rv_sq_room(c->r) < n) {
		roshm_submit(c->r);
		return false;
	}
	for (uint32_t i = 0; i < n; i++)
		if (!(s[i] = roshm_get_sqe(c->r)))
			return false;
	return true;
}

static inline uint32_t rv_take_slot(struct rv_ctx *c)
{
	return c->free_slots[--c->nfree];
}

static inline void rv_put_slot(struct rv_ctx *c, uint32_t slot)
{
	c->free_slots[c->nfree++] = slot;
}

/* mr.c */
bool rv_local_ok(struct rv_ctx *c, const struct ibv_sge *s, bool write);
bool rv_lbuf(struct rv_ctx *c, uint32_t lkey, uint64_t va, uint32_t *handle, uint64_t *off,
	     uint64_t *room);
/* mr_meta.c: 0 if a peer's metadata (a private copy) is well-formed for
 * @rkey (segments contiguous from addr's page to past addr + length, page
 * aligned, behind their region's metadata page, nothing wraps), else
 * -EINVAL; rv_meta_at: the segment holding remote address @va, which lies
 * in [addr, addr + length) of a checked @m, its data offset in *off and the
 * bytes from there to the segment's end in *room. */
int rv_meta_check(const struct rv_meta *m, uint32_t rkey);
/* The part of the region holding segment @g that an MR [addr, addr +
 * length) grants its peers: the MR's bytes in @g, as data offsets; false
 * when @g holds none. rv_roshm_access: the ROSHM_ACCESS_* of its
 * IBV_ACCESS_REMOTE_* flags (0: none). */
bool rv_seg_part(uint64_t addr, uint64_t length, const struct rv_seg *g, struct roshm_part *p);
uint32_t rv_roshm_access(uint32_t ibv_access);
uint32_t rv_meta_at(const struct rv_meta *m, uint64_t va, uint64_t *off, uint64_t *room);
int rv_create_named(struct rv_ctx *c, const char *prefix, int digits, uint64_t size,
		    const struct roshm_region_opts *opts, uint32_t *id, uint32_t *handle);
int rv_create(struct rv_ctx *c, const char *name, uint64_t size,
	      const struct roshm_region_opts *opts, uint32_t *handle);
uint64_t rv_now_ns(void);
int rv_query_device_ex(struct ibv_context *ctx, const struct ibv_query_device_ex_input *in,
		       struct ibv_device_attr_ex *a, size_t len);
int rv_query_rt_values(struct ibv_context *ctx, struct ibv_values_ex *v);

/* qp.c: the send engine */
int rv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
void rv_reap(struct rv_ctx *c);
void rv_progress(struct rv_ctx *c);
void rv_qp_fail(struct rv_qp *q);
/* issue what the QP's send queue holds, as far as resources allow */
void rv_qp_issue(struct rv_ctx *c, struct rv_qp *q);
/* a QP has WRs waiting for resources (rv_progress issues them), or none */
void rv_backlog(struct rv_ctx *c, struct rv_qp *q, bool on);
/* the work completion status of a roshm status (-errno) */
enum ibv_wc_status rv_wc_status(int st);

/* rkey.c: peers' MRs and QP rings */
#define RV_SYNC_NS (10ull * 1000000000ull)   /* a synchronous READ waits this long */
#define RV_RKEY_WAIT_NS (2ull * 1000000000ull)   /* a peer's rkey: its grant to us, at most this late */
/* READ @len bytes at @off of region @handle into @out and wait (RV_SYNC_NS at most). */
int rv_sync_read(struct rv_ctx *c, uint32_t handle, uint64_t off, uint32_t len, void *out);
struct rv_rkey *rv_rkey_resolve(struct rv_ctx *c, uint32_t rkey, uint32_t mask, uint64_t owner);
bool rv_peer_owner(struct rv_ctx *c, struct rv_qp *q);
enum ibv_wc_status rv_peer_resolve(struct rv_ctx *c, struct rv_qp *q, int tries);
uint32_t rv_peer_access(struct rv_ctx *c, struct rv_qp *q, uint32_t want);
int rv_grant_access(struct rv_ctx *c, struct rv_qp *q, uint32_t acc);
void rv_peer_drop(struct rv_ctx *c, struct rv_qp *q);
int rv_grant_connect(struct rv_ctx *c, struct rv_qp *q);
void rv_grant_drop(struct rv_ctx *c, struct rv_qp *q);
void rv_grant_drops(struct rv_ctx *c);
int rv_grant_mr(struct rv_ctx *c, struct rv_mr *m, bool add);
void rv_grant_xrc_pd(struct rv_ctx *c, struct rv_xrcd *x, struct ibv_pd *pd, bool add);
void rv_rkey_forget(struct rv_ctx *c, uint32_t rkey);

/* mw.c: memory windows. A bind or an invalidation runs when posted
 * (under the context's lock): the status its WR completes with. */
enum ibv_wc_status rv_mw_bind(struct rv_ctx *c, struct rv_qp *q, struct ibv_mw *mw, uint32_t rkey,
			      const struct ibv_mw_bind_info *bi);
enum ibv_wc_status rv_mw_invalidate(struct rv_ctx *c, struct rv_qp *q, uint32_t rkey);
void rv_mw_ops(struct rv_ctx *c);
/* @q loses its connection (rv_grant_drop: reset, another peer, the error
 * state, destroyed): the type 2 windows bound through it are invalidated */
void rv_mw_qp_gone(struct rv_ctx *c, struct rv_qp *q);
void rv_mw_qp_failed(struct rv_ctx *c, struct rv_qp *q);
void rv_mw_free_all(struct rv_ctx *c);

/* Where remote address @va of @k lives: the region handle (returned), the
 * data offset in *off, and in *room the bytes from there to its segment's end. */
static inline uint32_t rv_rkey_at(const struct rv_rkey *k, uint64_t va, uint64_t *off,
				  uint64_t *room)
{
	return k->handles[k->seg_h[rv_meta_at(&k->m, va, off, room)]];
}

/* recv.c */
int rv_ring_create(struct rv_ctx *c, struct rv_qp *q, uint32_t max_recv_wr);
void rv_qpn_add(struct rv_qp *q);
void rv_qpn_del(struct rv_qp *q);
bool roshm_verbs_qpn_ours(uint32_t qpn, uint32_t *dest);
void rv_qpn_fork_prepare(void);
void rv_qpn_fork_parent(void);
void rv_qpn_fork_child(void);
void rv_ring_set_rnr_timer(struct rv_qp *q, uint8_t timer);
void rv_ring_set_access(struct rv_qp *q, uint32_t acc);
void rv_ring_set_peer(struct rv_qp *q, uint32_t dest_qpn);
void rv_ring_rq(struct rv_qp *q);
int rv_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int rv_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
bool rv_deliver(struct rv_ctx *c, struct rv_qp *q);
void rv_rq_flush(struct rv_qp *q);
void rv_ring_discard(struct rv_qp *q);
struct rv_srq *rv_srq_new(struct ibv_pd *pd, struct ibv_srq_init_attr *a);
uint32_t rv_srq_ring_wr(const struct rv_srq *s);
void rv_srq_link(struct rv_ctx *c, struct rv_srq *s);
void rv_srq_free(struct rv_srq *s);
bool rv_srq_take(struct rv_qp *q);
void rv_srq_wait(struct rv_qp *q);
void rv_srq_unwait(struct rv_qp *q);
bool rv_srq_turn(struct rv_qp *q, bool *took, bool *waits);
void rv_deliver_each(struct rv_ctx *c, const struct ibv_cq *cq, const struct rv_srq *srq);
void rv_rwr_set(struct rv_ctx *c, struct rv_rwr *r, struct ibv_sge *sg, const struct ibv_recv_wr *wr);
void rv_rwr_recheck(struct rv_ctx *c, struct rv_qp *q, uint32_t ra);
bool rv_ring_ready(const struct rv_qp *q);

/* ud.c: UD QPs */
int rv_ud_ring_create(struct rv_ctx *c, struct rv_qp *q, uint32_t max_recv_wr);
int rv_ud_post(struct rv_ctx *c, struct rv_qp *q, const struct ibv_send_wr *wr, uint64_t len);
void rv_ud_prep(struct rv_qp *q, struct rv_swr *w, const struct ibv_send_wr *wr);
bool rv_ud_issue(struct rv_ctx *c, struct rv_qp *q, uint32_t widx, struct rv_swr *w);
void rv_ud_advance(struct rv_ctx *c, struct rv_qp *q);
void rv_ud_cqe(struct rv_ctx *c, struct rv_swr *w, const struct rv_op *op, const struct roshm_cqe *e,
	       bool publish);
void rv_ud_release(struct rv_ctx *c, struct rv_swr *w);
void rv_ud_opcqe(struct rv_ctx *c, const struct rv_op *op, const struct roshm_cqe *e);
bool rv_ud_deliver(struct rv_ctx *c, struct rv_qp *q);
void rv_ud_ring_close(struct rv_ctx *c, struct rv_qp *q);
void rv_ud_discard(struct rv_qp *q);
/* mcast.c: UD multicast */
bool rv_gid_is_mc(const union ibv_gid *g);
bool rv_mc_member(const struct rv_qp *q, const uint8_t *mgid);
int rv_mc_get(struct rv_ctx *c, const union ibv_gid *gid);
void rv_mc_put(struct rv_ctx *c, int i);
void rv_mc_leave_all(struct rv_ctx *c, struct rv_qp *q);
/* recv.c: copy @n bytes to the RECV at @at of @q from message byte @off on */
void rv_scatter(struct rv_qp *q, uint32_t at, uint64_t off, const uint8_t *src, uint64_t n);
/* qp.c: a send WR's data, @n bytes from message byte @off, to @dst */
bool rv_sources_ok(struct rv_ctx *c, struct rv_qp *q, uint32_t widx, struct rv_swr *w);
void rv_gather(struct rv_qp *q, uint32_t widx, const struct rv_swr *w, uint64_t off, uint8_t *dst,
	       uint64_t n);

/* xrc.c: XRC domains, XRC SRQs; the receive CQ of @q's messages (an
 * XRC_RECV QP: its current SRQ's, or NULL) */
struct ibv_xrcd *rv_open_xrcd(struct ibv_context *ctx, struct ibv_xrcd_init_attr *a);
int rv_close_xrcd(struct ibv_xrcd *xrcd);
struct ibv_srq *rv_create_srq_ex(struct ibv_context *ctx, struct ibv_srq_init_attr_ex *a);
int rv_get_srq_num(struct ibv_srq *srq, uint32_t *srqn);
bool rv_xrc_has_pd(const struct rv_qp *q, const struct ibv_pd *pd);
bool rv_xrc_pick(struct rv_qp *q, const struct rv_frag *f);
bool rv_xrc_recvs(const struct rv_qp *q);
void rv_xrc_srq_gone(struct rv_ctx *c, struct rv_srq *s);
bool rv_xrc_on_cq(const struct rv_qp *q, const struct ibv_cq *cq);
bool rv_xrc_watch(const struct rv_qp *q, bool armed_only);
static inline struct ibv_cq *rv_qp_rcq(const struct rv_qp *q)
{
	if (q->qp.qp_type == IBV_QPT_XRC_RECV)
		return q->srq ? q->srq->cq : NULL;
	return q->qp.recv_cq;
}

/* qp_state.c: a QP on @pd, or (XRC_RECV) in @xrcd */
struct ibv_qp *rv_qp_create(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_xrcd *xrcd,
			    struct ibv_qp_init_attr *a);

/* cq_ex.c: ibv_create_cq_ex and struct ibv_cq_ex's polling API */
struct ibv_cq_ex *rv_create_cq_ex(struct ibv_context *ctx, struct ibv_cq_init_attr_ex *a);

/* qp_ex.c: ibv_create_qp_ex and struct ibv_qp_ex's work-request API */
struct ibv_qp *rv_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a);
void rv_qpx_free(struct rv_qp *q);

/* async.c */
void rv_async_push(struct rv_ctx *c, enum ibv_event_type t, void *obj);
void rv_async_forget(struct rv_ctx *c, const void *obj);
void rv_async_settle(pthread_mutex_t *mu, pthread_cond_t *cv, const uint32_t *done,
		     uint32_t reported);

/* fork.c: a child of fork() gets private copies of every MR's pages */
int rv_fork_track(uint64_t ino, unsigned int maj, unsigned int min);
int rv_fork_keep(uint64_t ino, unsigned int maj, unsigned int min, uint64_t off, uint64_t len);
void rv_fork_kept(const struct rv_vma *v, uintptr_t a, uintptr_t n,
		  void (*fn)(uintptr_t lo, uintptr_t hi, void *arg), void *arg);
int rv_fd_wait(int fd);
void rv_fd_back(int fd, uint32_t *owed);
void rv_fd_take(int fd, uint32_t *owed);

/* cq.c */
void rv_cq_push(struct ibv_cq *cq, const struct ibv_wc *wc);
int rv_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
int rv_poll_cq_ts(struct ibv_cq *cq, int n, struct ibv_wc *wc, uint64_t *ts, bool hold);
void rv_poll_cq_end(struct ibv_cq *cq);
int rv_req_notify_cq(struct ibv_cq *cq, int solicited_only);
void rv_notifier_stop(struct rv_ctx *c);
void rv_notify_recv(struct rv_ctx *c, struct rv_qp *q);
void rv_guard(struct rv_ctx *c);
void rv_ctx_track(struct rv_ctx *c);
void rv_ctx_untrack(struct rv_ctx *c);

#endif /* RV_H */
