/* SPDX-License-Identifier: MIT */
/*
 * roshmd shared definitions: clients, regions, handle tables, the
 * control -> poller command ring and the poller's per-client state.
 *
 * Ownership: the control thread creates and frees clients and regions; the
 * poller is the only thread that reads rings, handle tables (poller view)
 * and region memory on the data path. Every change the poller must see goes
 * through a command on the command ring, and the control thread waits for
 * the poller's acknowledgement before it frees or reuses anything.
 */
#ifndef ROSHMD_H
#define ROSHMD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "roshm/abi.h"
#include "roshm/ctl.h"
#include "config.h"

extern int rd_logtype;
#define RD_LOG(level, fmt, ...) \
	rte_log(RTE_LOG_##level, rd_logtype, "roshmd: " fmt "\n", ##__VA_ARGS__)

/* A stat written by one thread (the poller) and read by another. */
#define RD_STAT_ADD(x, n) __atomic_store_n(&(x), (x) + (n), __ATOMIC_RELAXED)
#define RD_STAT_GET(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

struct rd_region {
	uint32_t id;                  /* node-local, never reused while roshmd runs */
	char tenant[ROSHM_NAME_MAX];
	char name[ROSHM_NAME_MAX];
	uint64_t epoch;
	uint32_t key;                 /* random per epoch, checked by remote transports */
	uint32_t policy;
	uint32_t ntenants;
	char tenants[ROSHM_POLICY_TENANTS_MAX][ROSHM_NAME_MAX];
	int fd;
	void *map;
	size_t map_size;
	bool hugetlb;
	uint8_t *data;                /* data area in roshmd's mapping */
	uint64_t data_size;
	struct rd_transport *xport;   /* provider that reaches this region */
	struct rd_client *owner;      /* control view; NULL once closed */
	uint32_t owner_handle;
	uint32_t refs;                /* control view: owner + open handles */
	bool dead;                    /* poller view: set by RD_CMD_REGION_DEAD */
	struct rd_region *next;       /* control's list */
};

struct rd_handle {
	struct rd_region *region;
	uint16_t gen;
};

#define RD_BATCH_BUCKETS 12 /* 1, 2, 4, ... 2048 */

struct rd_client_stats {
	uint64_t sqes;
	uint64_t errors;
	uint64_t bytes;
};

struct rd_client {
	uint32_t id;
	int sock;
	int sq_efd;                   /* client -> poller wakeup */
	int cq_efd;                   /* poller -> client wakeup */
	pid_t pid;
	uid_t uid;
	char tenant[ROSHM_NAME_MAX];
	/* channel memory; sizes and offsets are roshmd's own copies */
	int chan_fd;
	void *chan;
	size_t chan_size;
	bool hugetlb;
	struct roshm_chan_hdr *hdr;
	uint32_t *sq_ktail;           /* client-written: untrusted */
	uint32_t *sq_khead;
	struct roshm_sqe *sqes;
	uint32_t sq_entries, sq_mask;
	uint32_t *cq_khead;           /* client-written: untrusted */
	uint32_t *cq_ktail;
	struct roshm_cqe *cqes;
	uint32_t cq_entries, cq_mask;
	uint8_t *arena;
	uint64_t arena_size;
	/* handle tables: one per side, same size */
	uint32_t nhandles;
	struct rd_handle *ctl_handles;   /* control thread */
	struct rd_handle *dp_handles;    /* poller */
	/* poller state */
	uint32_t sq_head;             /* local copy; the shared one is never read back */
	uint32_t cq_tail;
	uint32_t inflight;            /* consumed SQEs without a posted CQE */
	bool fenced;                  /* a FENCE waits for inflight == 0 */
	bool dead;                    /* poller: ring corrupted, no more service */
	struct rd_client_stats stats; /* poller writes, control reads */
	struct rd_client *next;       /* control's list */
};

enum rd_cmd_type {
	RD_CMD_CLIENT_ADD,
	RD_CMD_CLIENT_DEL,
	RD_CMD_HANDLE_SET,
	RD_CMD_HANDLE_CLEAR,
	RD_CMD_REGION_DEAD,
};

struct rd_cmd {
	enum rd_cmd_type type;
	struct rd_client *client;
	struct rd_region *region;
	uint32_t handle;
	atomic_int done;              /* poller sets it (release) when applied */
};

enum rd_event_type {
	RD_EV_CLIENT_CORRUPT,         /* poller gave up on a client's rings */
};

struct rd_event {
	enum rd_event_type type;
	uint32_t client_id;
	char why[64];
};

struct rd_poller_stats {
	uint64_t rounds;
	uint64_t busy_rounds;
	uint64_t sleeps;
	uint64_t sqes;
	uint64_t errors;
	uint64_t corrupt_clients;
	uint64_t batch_hist[RD_BATCH_BUCKETS];
};

struct rte_ring;
struct rd_poller {
	const struct rd_config *cfg;
	struct rte_ring *cmd_ring;    /* control -> poller */
	struct rte_ring *ev_ring;     /* poller -> control */
	int epfd;                     /* adaptive idle: clients' sq_efd + cmd_efd */
	int cmd_efd;                  /* control rings it after enqueueing a command */
	int ev_efd;                   /* poller rings it after enqueueing an event */
	atomic_bool stop;
	atomic_bool running;
	uint32_t nclients;
	uint32_t rr;                  /* round-robin start */
	struct rd_client **clients;   /* poller's active set, max_clients */
	struct rd_poller_stats stats;
};

int rd_poller_init(struct rd_poller *p, const struct rd_config *cfg);
void rd_poller_fini(struct rd_poller *p);
int rd_poller_main(void *arg);
/* One poll round; returns the number of SQEs handled. Exposed for tests. */
unsigned rd_poller_round(struct rd_poller *p);
/* Control side: run one command on the poller and wait until it is applied. */
int rd_poller_cmd(struct rd_poller *p, struct rd_cmd *cmd);

/* Region memory (region.c). */
int rd_region_alloc(struct rd_region *rg, uint64_t data_size, uint32_t txn_slots,
		    uint32_t slot_size, enum rd_hugepages huge);
void rd_region_free(struct rd_region *rg);

/* Sealed memfd (shm.c): hugetlb when @huge allows and pages are free. */
int rd_memfd_create(const char *name, size_t *size, enum rd_hugepages huge, bool *hugetlb);

#endif
