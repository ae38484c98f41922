/* SPDX-License-Identifier: MIT */
/*
 * libroshm: one-sided WRITE / READ / atomics against named memory regions of
 * other pods, through the node's roshmd. The API has the shape of liburing:
 *
 *	struct roshm_sqe *sqe = roshm_get_sqe(r);
 *	roshm_prep_write(sqe, handle, off, arena_off, len);
 *	roshm_sqe_set_data(sqe, cookie);
 *	roshm_submit(r);
 *	roshm_wait_cqe(r, &cqe);  ... roshm_cqe_seen(r, cqe);
 *
 * Data moves between a region and this client's arena (roshm_arena()), which
 * roshmd maps too: no copy in the library. Every int-returning function
 * returns >= 0 on success or -errno; the library never sets errno, never
 * prints and never exits. A struct roshm is not thread-safe: use one per
 * thread, as with an io_uring.
 */
#ifndef ROSHM_H
#define ROSHM_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <errno.h>

#include "roshm/abi.h"
#include "roshm/ctl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Submission ring, client side. khead/ktail point into shared memory. */
struct roshm_sq {
	uint32_t *khead;        /* consumer index, written by roshmd */
	uint32_t *ktail;        /* producer index, written by us */
	uint32_t *kflags;       /* ROSHM_SQ_NEED_WAKEUP */
	struct roshm_sqe *sqes;
	uint32_t mask;
	uint32_t entries;
	uint32_t sqe_head;      /* first local SQE not yet published */
	uint32_t sqe_tail;      /* next local SQE to hand out */
};

struct roshm_cq {
	uint32_t *khead;        /* consumer index, written by us */
	uint32_t *ktail;        /* producer index, written by roshmd */
	uint32_t *kflags;       /* ROSHM_CQ_NEED_WAKEUP */
	struct roshm_cqe *cqes;
	uint32_t mask;
	uint32_t entries;
};

/*
 * Every SQE that expects a CQE travels with a library tag in user_data and
 * is remembered until its CQE is peeked (then the caller's user_data is put
 * back). After a roshmd restart the library re-attaches and resubmits the
 * remembered idempotent SQEs (NOP, WRITE, READ, FENCE); FETCH_ADD, CMP_SWAP
 * and TXN_COMMIT whose outcome was lost complete with -ECONNRESET instead.
 */
struct roshm_tag {
	uint64_t user_data;
	uint64_t seq;           /* submission order */
	struct roshm_sqe sqe;   /* as the caller prepared it */
	uint32_t next_free;
	uint32_t used;
};
#define ROSHM_CQE_F_LIB (1u << 31)   /* user_data already given back */

struct roshm {
	struct roshm_sq sq;
	struct roshm_cq cq;
	struct roshm_tag *tags;
	uint32_t ntags, tag_free;
	uint64_t tag_seq;
	struct roshm_cqe *lcq;  /* completions made by the library (reconnect) */
	uint32_t lcq_head, lcq_n, lcq_cap;
	bool lcq_batch;         /* the last batch peek came from lcq */
	struct roshm_hmap *hmap; /* handles the application holds -> roshmd's */
	uint32_t nhmap;
	bool remapped;          /* handles need translation (after a reconnect) */
	struct roshm_params *params;
	uint32_t reconnect_ms;
	void *chan;
	size_t chan_size;
	uint8_t *arena;
	size_t arena_size;
	int sock_fd;
	int sq_event_fd;
	int cq_event_fd;
	uint32_t client_id;
	uint64_t instance;      /* of the roshmd we are attached to */
	uint32_t spin_us;
	uint64_t submitted;     /* SQEs published */
	uint64_t reaped;        /* CQEs consumed */
	struct roshm_owned *owned; /* regions this client created (mapped) */
	char node[ROSHM_NAME_MAX];
	bool chan_huge;         /* the channel is on 2 MiB pages */
	uint64_t client_key;    /* roshmd's, kept across its restarts (struct roshm_ctl_hello) */
	uint32_t max_handles;   /* regions it may hold open at once (limits.max_handles) */
};

/* Options for roshm_open(); zero-initialise and set what you need. */
struct roshm_params {
	const char *sock_path;  /* NULL: $ROSHM_SOCK or ROSHM_DEFAULT_SOCK */
	const char *tenant;     /* NULL: $ROSHM_TENANT or "default" */
	const char *token;      /* NULL: $ROSHM_TOKEN or "" */
	uint32_t sq_entries;    /* 0: roshmd's default; rounded up to a power of two */
	uint32_t cq_entries;    /* 0: roshmd's default (>= sq_entries) */
	uint64_t arena_size;    /* 0: roshmd's default */
	uint32_t spin_us;       /* roshm_wait_cqe spins this long before sleeping; 0: 50 */
	uint32_t reconnect_ms;  /* after roshmd went away, try this long to re-attach; 0: 10000 */
	const char *pod;        /* NULL: $ROSHM_POD or the host name (a pod's containers share it) */
	/*
	 * Whom the library trusts to be roshmd: before it sends a token or a
	 * memfd it checks the socket's peer uid (SO_PEERCRED). 0: root or our
	 * own euid, unless $ROSHM_SERVER_UID names another; > 0: that uid or
	 * root; -1: no check.
	 */
	int64_t server_uid;
	/* Channel memory (the client's own): ROSHM_HUGEPAGES_AUTO (2 MiB pages
	 * when roshmd allows and the pod has them, else 4 KiB; $ROSHM_HUGEPAGES
	 * = auto|on|off overrides), _ON (required) or _OFF. */
	int hugepages;
	/* roshm_admin_params(): the node's admin token (NULL: $ROSHM_ADMIN_TOKEN,
	 * or the file $ROSHM_ADMIN_TOKEN_FILE or ROSHM_DEFAULT_ADMIN_TOKEN). */
	const char *admin_token;
};
#define ROSHM_HUGEPAGES_AUTO 0
#define ROSHM_HUGEPAGES_ON 1
#define ROSHM_HUGEPAGES_OFF 2

/* Options for roshm_region_create(). */
struct roshm_region_opts {
	enum roshm_policy policy;          /* default ROSHM_POLICY_TENANT */
	uint32_t ntenants;                 /* ROSHM_POLICY_LIST: number of tenants */
	const char *tenants[ROSHM_POLICY_TENANTS_MAX];
	/* Transaction staging log: 0 and 0 for none; else txn_slots a power of
	 * two up to 65536, and slot_size a multiple of 64 from
	 * ROSHM_TXN_SLOT_MIN (128) to roshmd's txn.max_slot_size (default 64 KiB).
	 * A transaction's record (a 64-byte header, 16 bytes per write, the
	 * payload) must fit one slot (-EMSGSIZE); other values: -EINVAL. */
	uint32_t txn_slots;
	uint32_t slot_size;
	/*
	 * What clients other than the owner may do, checked by roshmd on every
	 * operation (the owner's own handle is not limited, but for the window
	 * on its transactions: the log's apply cannot tell who wrote a
	 * record). All zero: the whole data area, every operation.
	 * - access: ROSHM_ACCESS_READ | _WRITE (also TXN_*) | _ATOMIC; an
	 *   operation without its flag completes with -EACCES. 0: all.
	 * - win_off, win_len: the part of the data area they may touch; an
	 *   operation outside it completes with -EFAULT. win_len 0: all (then
	 *   win_off must be 0); else win_off + win_len <= size.
	 * - va_base: non-zero: their SQE offsets are addresses, data offset =
	 *   off - va_base (an RDMA MR's remote_addr). roshmd keeps va_base to
	 *   itself and its peers: openers never learn it.
	 * Other values: -EINVAL.
	 */
	uint32_t access;
	uint64_t win_off, win_len;
	uint64_t va_base;
};

/*
 * roshm_open() - attach to roshmd.
 * Returns a handle, or NULL with *err set to: -ENOENT / -ECONNREFUSED (no
 * roshmd at the socket), -EPERM (the socket is served by a process of
 * another uid than expected: see server_uid), -EACCES (bad tenant or token),
 * -EDQUOT (the tenant's quota of clients or memory is used up), -EMFILE
 * (roshmd's client limit), -EPROTO (ABI mismatch or malformed reply), -EINVAL
 * (bad params, sizes above roshmd's limits, or huge pages required and
 * hugepages OFF), -ENAMETOOLONG (socket path), -ENOMEM (no memory for the
 * channel, or huge pages required and missing), -ECONNRESET, or another
 * -errno from socket, connect, memfd_create, ftruncate or mmap.
 */
struct roshm *roshm_open(const struct roshm_params *p, int *err);

/* roshm_close() - detach; closes every handle and frees created regions. */
void roshm_close(struct roshm *r);

/*
 * roshm_region_create() - create region "name" of @size data bytes owned by
 * this client, publish it as "<tenant>/<name>", map it here and return its
 * handle in *handle. The memory is this process's (a memfd it creates and
 * touches), handed to roshmd. Returns 0, -EINVAL (bad name, size, options),
 * -EEXIST (name taken), -ENOMEM / -ENOSPC (limits), -EDQUOT (the tenant's
 * quota of regions or memory), -EMFILE (handle table full), -EAGAIN (the
 * registry did not take the record), -EPROTO, -ECONNRESET.
 */
int roshm_region_create(struct roshm *r, const char *name, uint64_t size,
			const struct roshm_region_opts *opts, uint32_t *handle);

/*
 * roshm_region_data() - the owner's mapping of a region it created: plain
 * loads and stores. Returns NULL if @handle is not a region this client created.
 */
void *roshm_region_data(struct roshm *r, uint32_t handle, uint64_t *size);

/*
 * roshm_region_fd() - a new descriptor (close-on-exec; the caller closes it)
 * for the memfd behind a region this client created, and in *data_off (may be
 * NULL) the file offset of its data area, a multiple of 4096. Mapping it
 * MAP_SHARED at that offset gives another view of the same bytes roshmd
 * serves (libroshm-verbs maps an application's registered buffer this way).
 * Returns the descriptor, -EBADF (not a region this client created), or
 * -errno from fcntl(F_DUPFD_CLOEXEC).
 */
int roshm_region_fd(struct roshm *r, uint32_t handle, uint64_t *data_off);

/*
 * roshm_region_owner() - who owns the region behind @handle, as roshmd
 * said when it was opened (or created): an opaque identity of the owner
 * client, the same for all regions of one client and different for any
 * two live clients (a remote region's comes from its record, under the
 * cluster's MAC); 0 when roshmd does not know it. -EBADF: no such handle.
 */
int roshm_region_owner(struct roshm *r, uint32_t handle, uint64_t *owner);

/*
 * roshm_region_open() - open "<tenant>/<name>" (or "<name>" in our tenant).
 * Returns 0 with *handle and *size (may be NULL) set, -ENOENT (no such
 * region, yet), -EACCES (policy forbids it, or its node failed to
 * authenticate), -EAGAIN (draining or moving; the registry did not answer),
 * -EHOSTUNREACH (its node is unreachable), -EMFILE (handle table full),
 * -EINVAL, -ENOMEM, -EPROTO, -ECONNRESET.
 */
int roshm_region_open(struct roshm *r, const char *name, uint32_t *handle,
		      uint64_t *size);

/*
 * roshm_region_close() - release a handle. Closing a region this client
 * created unpublishes it; peers' operations then complete with -ESTALE.
 * Returns 0, -EBADF (unknown handle), -EPROTO, -ECONNRESET.
 */
int roshm_region_close(struct roshm *r, uint32_t handle);

/*
 * roshm_region_grant() - let whichever client owns the region behind
 * @peer (a handle this client holds: opened, or its own) open @handle, a
 * region this client created with ROSHM_POLICY_GRANT. What is granted is
 * that very region (its node, name and memory): a region made later under
 * the same name is not. Returns once the region's record says so: 0,
 * -EBADF (unknown handle), -EACCES (@handle not ours, or @peer of another
 * tenant), -EINVAL (not a ROSHM_POLICY_GRANT region), -ESTALE (@peer is
 * closed by its owner), -ENOSPC (roshmd's limits.max_grants grants),
 * -EAGAIN (the registry did not answer: the grant stands, call again),
 * -ECONNRESET.
 * libroshm gives the grant again after a roshmd restart, and takes it back
 * when @peer is closed (roshm_region_close) or with roshm_region_revoke().
 */
int roshm_region_grant(struct roshm *r, uint32_t handle, uint32_t peer);
int roshm_region_revoke(struct roshm *r, uint32_t handle, uint32_t peer);
/*
 * The same, for the region published under @name in our tenant when roshmd
 * looks (no handle on it needed: it may not let us open it yet). -ENOENT:
 * no such region (yet). The revoke takes back every grant made under
 * @name, whether or not that region still exists.
 */
int roshm_region_grant_name(struct roshm *r, uint32_t handle, const char *name);
int roshm_region_revoke_name(struct roshm *r, uint32_t handle, const char *name);

/*
 * A part of a region: data offsets [off, off + len) and the operations in
 * @access (ROSHM_ACCESS_READ | _WRITE | _ATOMIC). len 0 (then off 0): all
 * of it; access 0: every operation.
 */
struct roshm_part {
	uint64_t off, len;
	uint32_t access;
};

/*
 * roshm_region_grant_part() - as roshm_region_grant_name(), for @part of
 * the region only: its grantee may open that part or less
 * (roshm_region_open_part), and roshmd checks each of its operations
 * against it (-EFAULT outside, -EACCES for another operation). One region
 * may grant several parts to one name. -EINVAL also for a part past the
 * region's end. Grants of a part are counted: roshm_region_revoke_part()
 * takes back one grant of that very part, and roshmd's goes with the last;
 * roshm_region_revoke_name() takes back everything granted under @name.
 */
int roshm_region_grant_part(struct roshm *r, uint32_t handle, const char *name,
			    const struct roshm_part *part);
int roshm_region_revoke_part(struct roshm *r, uint32_t handle, const char *name,
			     const struct roshm_part *part);

/*
 * roshm_region_grant_owner() - as roshm_region_grant_part(), but to the
 * client (process) that owns the region published as @name now, not to
 * that region: it may open @part (NULL: all of it) through any region it
 * owns, also once that region is closed, while it stays attached (its
 * identity survives a restart of its roshmd). Several names whose owner is
 * the same client make one grant in roshmd, counted here: it goes with
 * its last revoke (roshm_region_revoke_part or roshm_region_revoke_name,
 * under each name it was granted by).
 */
int roshm_region_grant_owner(struct roshm *r, uint32_t handle, const char *name,
			     const struct roshm_part *part);

/*
 * roshm_region_open_part() - roshm_region_open() for @part of the region
 * (NULL: all of it): the handle's operations outside it complete with
 * -EFAULT, others than it names with -EACCES; *@size is the whole region's
 * data size. On a ROSHM_POLICY_GRANT region a grant must cover the part
 * and its operations (else -EACCES); on others it is a limit the opener
 * sets itself. -EINVAL: a part past the region's end, or malformed.
 */
int roshm_region_open_part(struct roshm *r, const char *name, const struct roshm_part *part,
			   uint32_t *handle, uint64_t *size);

/* roshm_arena() - this client's data arena (shared with roshmd). */
static inline void *roshm_arena(struct roshm *r, size_t *size)
{
	if (size)
		*size = r->arena_size;
	return r->arena;
}

/*
 * roshm_get_sqe() - next free SQE, or NULL when the SQ is full (not an
 * error: submit and reap). Only bumps a local tail; nothing is visible to
 * roshmd until roshm_submit().
 */
static inline struct roshm_sqe *roshm_get_sqe(struct roshm *r)
{
	struct roshm_sq *sq = &r->sq;
	/* Acquire pairs with roshmd's release of the SQ head (poller R1). */
	uint32_t head = __atomic_load_n(sq->khead, __ATOMIC_ACQUIRE);

	if (sq->sqe_tail - head >= sq->entries)
		return NULL;
	return &sq->sqes[sq->sqe_tail++ & sq->mask];
}

static inline void roshm_prep_rw(struct roshm_sqe *sqe, uint8_t op, uint32_t handle,
				 uint64_t off, uint64_t arena_off, uint32_t len)
{
	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = op;
	sqe->handle = handle;
	sqe->off = off;
	sqe->arena_off = arena_off;
	sqe->len = len;
}

static inline void roshm_prep_nop(struct roshm_sqe *sqe)
{
	roshm_prep_rw(sqe, ROSHM_OP_NOP, 0, 0, 0, 0);
}

/* WRITE @len bytes from arena[@arena_off] to region @handle at @off. */
static inline void roshm_prep_write(struct roshm_sqe *sqe, uint32_t handle,
				    uint64_t off, uint64_t arena_off, uint32_t len)
{
	roshm_prep_rw(sqe, ROSHM_OP_WRITE, handle, off, arena_off, len);
}

/* READ @len bytes from region @handle at @off into arena[@arena_off]. */
static inline void roshm_prep_read(struct roshm_sqe *sqe, uint32_t handle,
				   uint64_t off, uint64_t arena_off, uint32_t len)
{
	roshm_prep_rw(sqe, ROSHM_OP_READ, handle, off, arena_off, len);
}

/* Atomic 64-bit add at @off (8-byte aligned); cqe->result is the old value. */
static inline void roshm_prep_fetch_add(struct roshm_sqe *sqe, uint32_t handle,
					uint64_t off, uint64_t add)
{
	roshm_prep_rw(sqe, ROSHM_OP_FETCH_ADD, handle, off, 0, 8);
	sqe->operand1 = add;
}

/* Atomic compare-and-swap at @off; cqe->result is the old value (swapped iff == @expect). */
static inline void roshm_prep_cmp_swap(struct roshm_sqe *sqe, uint32_t handle,
				       uint64_t off, uint64_t expect, uint64_t desired)
{
	roshm_prep_rw(sqe, ROSHM_OP_CMP_SWAP, handle, off, 0, 8);
	sqe->operand1 = expect;
	sqe->operand2 = desired;
}

/*
 * Transactions: any number of TXN_WRITEs (up to ROSHM_TXN_MAX_SEGS, all to
 * one region with a log, fitting one slot) then one TXN_COMMIT on the same
 * handle. The writes get no CQE; the commit's CQE is 0 (result: the sequence)
 * once the transaction is committed, and then it is applied exactly once, all
 * or nothing. Errors come on the commit: -EINVAL (no writes, or writes to
 * another handle), -EOPNOTSUPP (the commit's region has no log), -EMSGSIZE,
 * -EFAULT, -EBADF, -EBUSY (no transaction context free: nothing done),
 * -EAGAIN (the region drains: nothing done), -ESTALE (region closed),
 * -ETIMEDOUT (txn.deadline_ms; a commit in flight then may have committed),
 * -EIO and -ECONNRESET (outcome unknown; never committed again by itself).
 */
static inline void roshm_prep_txn_write(struct roshm_sqe *sqe, uint32_t handle,
					uint64_t off, uint64_t arena_off, uint32_t len)
{
	roshm_prep_rw(sqe, ROSHM_OP_TXN_WRITE, handle, off, arena_off, len);
}

static inline void roshm_prep_txn_commit(struct roshm_sqe *sqe, uint32_t handle)
{
	roshm_prep_rw(sqe, ROSHM_OP_TXN_COMMIT, handle, 0, 0, 0);
}

/* FENCE: SQEs after it start only once every SQE before it has completed. */
static inline void roshm_prep_fence(struct roshm_sqe *sqe)
{
	roshm_prep_rw(sqe, ROSHM_OP_FENCE, 0, 0, 0, 0);
}

static inline void roshm_sqe_set_data(struct roshm_sqe *sqe, uint64_t data)
{
	sqe->user_data = data;
}

static inline void roshm_sqe_set_flags(struct roshm_sqe *sqe, uint8_t flags)
{
	sqe->flags = flags;
}

/*
 * roshm_sqe_set_lbuf() - a WRITE's source or a READ's destination is not the
 * arena but region @lbuf_handle, one this client created (roshm_region_create),
 * at data offset @lbuf_off: roshmd moves the bytes from or into that memory
 * itself, with no copy through the arena. Call after roshm_prep_write() or
 * roshm_prep_read(). roshmd answers -EACCES for a handle this client opened
 * but did not create, -EBADF for none, -ESTALE for a closed region, -EFAULT
 * for a range outside its data area and -EINVAL on other opcodes. The
 * region's memory must not be changed while the WRITE is in flight (what it
 * sends is what it reads then), as with a NIC's DMA.
 */
static inline void roshm_sqe_set_lbuf(struct roshm_sqe *sqe, uint32_t lbuf_handle,
				      uint64_t lbuf_off)
{
	sqe->flags |= ROSHM_SQE_F_LBUF;
	sqe->lbuf_handle = lbuf_handle;
	sqe->arena_off = lbuf_off;
}

/*
 * roshm_submit() - publish every SQE obtained since the last submit (one
 * store-release) and wake roshmd if it sleeps. Returns the number published.
 */
int roshm_submit(struct roshm *r);

/* Give the caller's user_data back and free the tag (once per CQE). */
static inline void roshm__untag(struct roshm *r, struct roshm_cqe *c)
{
	uint64_t t = c->user_data;

	if (c->flags & ROSHM_CQE_F_LIB)
		return;
	c->flags |= ROSHM_CQE_F_LIB;
	if (t < r->ntags && r->tags[t].used) {
		c->user_data = r->tags[t].user_data;
		r->tags[t].used = 0;
		r->tags[t].next_free = r->tag_free;
		r->tag_free = (uint32_t)t;
	}
}

/*
 * roshm_peek_cqe() - the next completion without waiting: 0 with *cqe set,
 * or -EAGAIN when the CQ is empty.
 */
static inline int roshm_peek_cqe(struct roshm *r, struct roshm_cqe **cqe)
{
	struct roshm_cq *cq = &r->cq;
	uint32_t head, tail;

	if (r->lcq_n) {
		*cqe = &r->lcq[r->lcq_head];
		return 0;
	}
	head = *cq->khead;
	/* Acquire pairs with the poller's release of the CQ tail (poller R2). */
	tail = __atomic_load_n(cq->ktail, __ATOMIC_ACQUIRE);
	if (head == tail)
		return -EAGAIN;
	*cqe = &cq->cqes[head & cq->mask];
	roshm__untag(r, *cqe);
	return 0;
}

/* roshm_cqe_seen() - mark the CQE from peek/wait consumed. */
static inline void roshm_cqe_seen(struct roshm *r, struct roshm_cqe *cqe)
{
	r->reaped++;
	if (r->lcq_n && cqe == &r->lcq[r->lcq_head]) {
		r->lcq_head = (r->lcq_head + 1) % r->lcq_cap;
		r->lcq_n--;
		return;
	}
	/* Release: our reads of the CQE happen before roshmd may reuse it. */
	__atomic_store_n(r->cq.khead, *r->cq.khead + 1, __ATOMIC_RELEASE);
}

/*
 * roshm_peek_batch_cqe() - up to @count completions without waiting, in
 * order, into @cqes; returns how many. Mark them consumed with
 * roshm_cq_advance(). One acquire load for the whole batch.
 */
static inline unsigned roshm_peek_batch_cqe(struct roshm *r, struct roshm_cqe **cqes,
					    unsigned count)
{
	struct roshm_cq *cq = &r->cq;
	uint32_t head, ready;

	r->lcq_batch = r->lcq_n != 0;
	if (r->lcq_batch) {
		if (count > r->lcq_n)
			count = r->lcq_n;
		for (unsigned i = 0; i < count; i++)
			cqes[i] = &r->lcq[(r->lcq_head + i) % r->lcq_cap];
		return count;
	}
	head = *cq->khead;
	/* R2 */
	ready = __atomic_load_n(cq->ktail, __ATOMIC_ACQUIRE) - head;
	if (count > ready)
		count = ready;
	for (unsigned i = 0; i < count; i++) {
		cqes[i] = &cq->cqes[(head + i) & cq->mask];
		roshm__untag(r, cqes[i]);
	}
	return count;
}

/* roshm_cq_advance() - mark @n CQEs from roshm_peek_batch_cqe() consumed. */
static inline void roshm_cq_advance(struct roshm *r, unsigned n)
{
	if (!n)
		return;
	r->reaped += n;
	if (r->lcq_batch) {
		r->lcq_head = (r->lcq_head + n) % r->lcq_cap;
		r->lcq_n -= n;
		return;
	}
	__atomic_store_n(r->cq.khead, *r->cq.khead + n, __ATOMIC_RELEASE);
}

/*
 * roshm_wait_cqe() - wait for the next completion: spins spin_us, then
 * sleeps on the CQ wakeup socket. If roshmd went away, re-attaches to its
 * successor (see struct roshm_tag) for up to reconnect_ms. Returns 0 with
 * *cqe set, -ECONNRESET if no roshmd came back (or this one hung up on us:
 * every operation without a CQE then completes with -ECONNRESET), -EPROTO if
 * the successor's channel differs, -EINTR, -ENOMEM.
 */
int roshm_wait_cqe(struct roshm *r, struct roshm_cqe **cqe);

/* roshm_wait_cqe_timeout() - as roshm_wait_cqe(); -ETIME after @timeout_ms. */
int roshm_wait_cqe_timeout(struct roshm *r, struct roshm_cqe **cqe, int timeout_ms);

/* Number of submitted SQEs whose CQE was not consumed yet. */
static inline uint64_t roshm_inflight(const struct roshm *r)
{
	return r->submitted - r->reaped;
}

/*
 * Blocking conveniences: submit one operation and wait for its completion.
 * They need an idle ring (-EBUSY if any operation is in flight) and return
 * the operation's status (0 or its -errno), or a roshm_wait_cqe error. After
 * -ECONNRESET (no roshmd came back) the ring is idle again: the next call
 * tries to re-attach.
 */
int roshm_nop_sync(struct roshm *r);
int roshm_write_sync(struct roshm *r, uint32_t handle, uint64_t off,
		     uint64_t arena_off, uint32_t len);
int roshm_read_sync(struct roshm *r, uint32_t handle, uint64_t off,
		    uint64_t arena_off, uint32_t len);
int roshm_fetch_add_sync(struct roshm *r, uint32_t handle, uint64_t off,
			 uint64_t add, uint64_t *old);
int roshm_cmp_swap_sync(struct roshm *r, uint32_t handle, uint64_t off,
			uint64_t expect, uint64_t desired, uint64_t *old);

/* One write of a transaction: @len bytes from the arena at @arena_off to @off. */
struct roshm_txn_write {
	uint64_t off;
	uint64_t arena_off;
	uint32_t len;
};

/*
 * roshm_txn_sync() - one transaction of @n writes to region @handle,
 * applied all-or-nothing and exactly once.
 * Returns 0 once committed (*seq: its sequence in the region's log), -EINVAL
 * (@n 0, above ROSHM_TXN_MAX_SEGS or the SQ), -EBUSY (ring not idle), or
 * any status of the commit (see roshm_prep_txn_write) or of roshm_wait_cqe.
 */
int roshm_txn_sync(struct roshm *r, uint32_t handle, const struct roshm_txn_write *w,
		   unsigned n, uint64_t *seq);

/*
 * roshm_region_read_consistent() - for the owner of a region with a
 * transaction log: copy data at @off into @dst so that no transaction is
 * half-visible in it (the region's seqlock). 0, -EFAULT, -EBADF (not a region
 * this client created), -EAGAIN (the applier never let go).
 */
int roshm_region_read_consistent(struct roshm *r, uint32_t handle, uint64_t off, void *dst,
				 size_t len);

/*
 * roshm_admin() - run an admin command ("status", "clients", "regions",
 * "peers", "stats", "drain [tenant T | region T/N | pod P]") on the roshmd at
 * @sock_path (NULL: default) without attaching, with the credentials of the
 * environment: the node's admin token ($ROSHM_ADMIN_TOKEN, the file
 * $ROSHM_ADMIN_TOKEN_FILE or ROSHM_DEFAULT_ADMIN_TOKEN) and, when set,
 * $ROSHM_TENANT with $ROSHM_TOKEN (a tenant may drain and list only its own).
 * On success returns 0 and *json holds a malloc'd JSON document the caller
 * frees. -EPERM when the credentials do not allow the command (or the socket
 * is not roshmd's), -EINVAL for an unknown command, -ENOENT nothing matched,
 * -ETIME when roshmd did not answer within 10 s (a drain waits for as long
 * as roshmd drains, which its drain.timeout_ms bounds).
 */
int roshm_admin(const char *sock_path, const char *cmd, char **json);

/* roshm_admin_params() - roshm_admin() with the socket, tenant, token,
 * admin token and server uid of @p (NULL fields: as roshm_admin()). */
int roshm_admin_params(const struct roshm_params *p, const char *cmd, char **json);

/*
 * roshm_region_list() - the registry's regions of @r's tenant whose names
 * begin with @prefix (the "regions PREFIX" admin command, with @r's tenant
 * credentials only, never the node's admin token): 0 and *json a malloc'd
 * JSON array of {"name": "<tenant>/<name>", "node", "state", "size", ...}
 * the caller frees, or an admin command's -errno.
 */
int roshm_region_list(struct roshm *r, const char *prefix, char **json);

/* roshm_strerror() - a short description of a roshm -errno status. */
const char *roshm_strerror(int status);

#ifdef __cplusplus
}
#endif
#endif /* ROSHM_H */
