/* SPDX-License-Identifier: MIT */
/*
 * Shared pieces of the security tests (tests/security): a well-behaved
 * bystander of another tenant, roshmd liveness with the reason it died,
 * bounded waits, and every raw protocol piece an attacker uses, kept here in
 * one place so that a change of the control-socket or tcp wire format is
 * adapted once:
 *   - control socket: a request with a bounded wait for its reply,
 *   - tcp transport: an authenticated hand-written peer and its frames,
 *   - region memory as its owner sees it: header, transaction log, the
 *     crc32c roshmd checks on a staged record,
 *   - the file registry's records.
 */
#ifndef ATTACK_H
#define ATTACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "roshm.h"
#include "roshm/wire.h"
#include "harness.h"

/* Two tenants that do not trust each other: "a" attacks, "b" is the bystander. */
#define ATK_TENANTS \
	"tenants = ( { name = \"a\"; token = \"ta\"; }, { name = \"b\"; token = \"tb\"; } );\n"
#define ATK_SECRET "roshm-security-test-secret-0123456789"

/* Attach to @d's roshmd as @tenant (token "t<tenant>"); @p may be NULL or
 * carry ring/arena sizes. reconnect_ms defaults to 300 here: a client of a
 * dead roshmd should learn it quickly, not after the library's 10 s. */
struct roshm *atk_open(const struct th_daemon *d, const char *tenant,
		       const struct roshm_params *p, int *err);

/* ---- roshmd liveness ---- */

/* Whether roshmd is still running; once it is not, remembers how it ended. */
bool atk_alive(struct th_daemon *d);
/* "running", "exited with status N" or "killed by signal N (name)". */
const char *atk_how(struct th_daemon *d);
/* Fail the current test if roshmd is gone (with how it ended and its log tail). */
void atk_assert_alive(struct th_daemon *d);
/* Print the last @lines lines of roshmd's log to stderr. */
void atk_log_tail(const struct th_daemon *d, int lines);
/* Kill it (resumed first if stopped) and forget it; the directory goes at exit. */
void atk_daemon_kill(struct th_daemon *d);
/* Count lines of roshmd's log that contain @needle. */
int atk_log_count(const struct th_daemon *d, const char *needle);

/* ---- bounded waits ---- */

/* Run fn(arg) in a child; its exit code, or -ETIME if it did not finish in
 * @timeout_ms (then it is killed). A bound on waiting, never a measurement. */
int atk_run_bounded(int (*fn)(void *), void *arg, int timeout_ms);
/* Wait for child @pid at most @timeout_ms: exit code, 128 + signal, or -ETIME (killed). */
int atk_wait_child(pid_t pid, int timeout_ms);
/* Submit nothing; wait for one CQE at most @timeout_ms; copy it out and mark it seen.
 * 0, -ETIME or a roshm_wait_cqe_timeout error. */
int atk_reap(struct roshm *r, struct roshm_cqe *out, int timeout_ms);
uint64_t atk_now_ms(void);
/* The same clock in seconds. */
double atk_now_s(void);
/* roshm_get_sqe() that fails the current test when the SQ is full. */
struct roshm_sqe *atk_sqe(struct roshm *r) __attribute__((returns_nonnull));
/* Pin the calling thread to CPU @cpu modulo the CPUs we may use. */
void atk_pin(int cpu);

/* ---- the bystander: another tenant's well-behaved client ---- */

struct atk_by_shared;
struct atk_bystander {
	pid_t pid;
	struct atk_by_shared *sh;
	char name[48];
};

/*
 * Start a child that attaches to @d as @tenant, creates region @name (64 KiB,
 * written, read back and counted with FETCH_ADD in a loop, every CQE waited
 * for with a bound) and region "@name-canary" (1 MiB it never writes through
 * roshmd), and checks both mappings byte for byte as it goes. Returns 0 once
 * it has completed its first round.
 */
int atk_bystander_start(struct atk_bystander *b, struct th_daemon *d, const char *tenant,
			const char *name);
/* Stop it; fail the current test unless it ran, saw no error and its bytes never changed. */
void atk_bystander_check(struct atk_bystander *b);
/* Stop it without judging (cleanup after an earlier failure). */
void atk_bystander_stop(struct atk_bystander *b);

/* ---- control socket ---- */

/* One control request and its reply, waiting at most @timeout_ms for it.
 * Returns the reply length, -ETIME, or -errno. Descriptors that come with
 * the reply are closed. */
ssize_t atk_ctl_request(const char *sock, const void *req, size_t len, void *reply, size_t cap,
			int timeout_ms);
/* An admin command with a bounded wait: 0 and *json (malloc'd), the
 * reply's -errno, or -ETIME. */
int atk_admin(const char *sock, const char *cmd, int timeout_ms, char **json);
/* Send an admin command and return the connection without waiting for the
 * reply (a drain answers when it is done); close the fd to drop it. */
int atk_admin_send(const char *sock, const char *cmd);

/* ---- raw control connections (a hostile pod holds its own descriptors) ---- */

/* A connected control socket (SOCK_SEQPACKET): fd or -errno. */
int atk_ctl_connect(const char *sock);
/* Send @req on @fd with descriptor @send_fd (-1: none) and wait at most
 * @timeout_ms for the reply. Returns the reply's length, -ETIME or -errno.
 * Descriptors that come with the reply are closed. */
ssize_t atk_ctl_call(int fd, const void *req, size_t len, int send_fd, void *reply, size_t cap,
		     int timeout_ms);
/* Fill a control header (this ABI's magic and version). */
void atk_ctl_hdr(struct roshm_ctl_hdr *h, uint16_t type, size_t len);
/* Send a REGION_OPEN of @name on @fd with @n (0..4) descriptors @fds,
 * without waiting for its answer: 0 or -errno. */
int atk_send_open(int fd, const char *name, const int *fds, int n);
/* Wait at most @ms for @fd's next message: 1 (one, read), 0 (EOF), -ETIME. */
int atk_wait_reply(int fd, int ms);
/* "drain tenant @tenant" with the tenant's own @token on a connection of
 * its own, its answer awaited (5 s): 1, 0 (EOF), -ETIME or -errno. */
int atk_tenant_drain(const char *sock, const char *tenant, const char *token);
/* A sealable memfd of @size bytes, every page touched (MAP_POPULATE),
 * mapped at *map: fd or -errno. */
int atk_memfd(size_t size, void **map);
/* Attach as @tenant (token "t<tenant>") by hand: HELLO with @sq entries
 * and an @arena byte arena (0: defaults), then CHANNEL with a memfd of our
 * own (unmapped and closed after). Returns the control socket or -errno. */
int atk_raw_attach(const char *sock, const char *tenant, uint32_t sq, uint64_t arena);
/* The same, asking for client key @key (0: a new one); *@key_out (if not
 * NULL) is the one roshmd gave. */
int atk_raw_attach_key(const char *sock, const char *tenant, uint32_t sq, uint64_t arena,
		       uint64_t key, uint64_t *key_out);

/*
 * A private network namespace with only lo up, entered by the calling
 * process (call it before starting threads): roshmd instances started from
 * then on listen on 127.0.0.1 there without clashing with anything else on
 * the host. Deleted at cleanup (th_cleanup_enable first). 0 or -errno.
 */
int atk_netns_enter_new(char *name, size_t cap);
/* Write ATK_SECRET to a file in a new temporary directory (removed at
 * cleanup); @path receives the file, @dir the directory. 0 or -errno. */
int atk_workdir(char *dir, size_t dcap, char *secret_path, size_t scap);
/*
 * Two roshmd on 127.0.0.1 with the tcp transport, ports @port1 and @port2,
 * named "<prefix>1" and "<prefix>2", sharing the file registry under
 * @workdir and the cluster secret file @secret (atk_workdir), channels on
 * 4 KiB pages, records revalidated every 100 ms; @tenants is the tenants
 * line (NULL: ATK_TENANTS). 0, or -1 when one did not start.
 */
/* roshm_region_open(@name), tried again every 10 ms for 3 s while the
 * record is not there yet or its node not reached (-ENOENT, -EAGAIN,
 * -EHOSTUNREACH): what it returned last. */
int atk_open_retry(struct roshm *r, const char *name, uint32_t *h);
/* Two roshmd (PREFIX1, PREFIX2) on loopback ports @port1 and @port2, tcp
 * transport with @secret, a file registry under @workdir (revalidate_ms
 * 100); @head, config before that (tenants, limits; NULL: ATK_TENANTS).
 * 0, or -1 when one did not start. */
int atk_two_nodes(struct th_daemon *n1, struct th_daemon *n2, const char *prefix, int port1,
		  int port2, const char *workdir, const char *secret, const char *head);

/* ---- tcp transport: a hand-written peer that holds the cluster secret ---- */

/* Connect to @ip:@port and pass the HMAC challenge as node @node. fd or -errno. */
int atk_peer_connect(const char *ip, int port, const char *secret, const char *node);
/* The same from source address @src (IPv4; NULL: the kernel's choice). */
int atk_peer_connect_from(const char *src, const char *ip, int port, const char *secret,
			  const char *node);
/* A valid node record for @node at @endpoint ("tcp:ADDR:PORT") in the file
 * registry @regdir, signed with the secret in @secret_file: what a peer that
 * also holds the registry's secret can publish (roshmd gives an inbound
 * connection only to a node with a record, from the record's address).
 * 0 or -errno. */
int atk_publish_node(const char *regdir, const char *secret_file, const char *node,
		     const char *endpoint);
int atk_write_all(int fd, const void *buf, size_t len);
/* Read exactly @len bytes within @timeout_ms: 0, -ETIME, -ECONNRESET (closed). */
int atk_read_full(int fd, void *buf, size_t len, int timeout_ms);

/* A region's registry record (file backend): what a peer needs to address it. */
struct atk_rec {
	uint32_t id, key;
	uint64_t epoch;
	char state[16];
};
/* 0, -ENOENT (no record), -EBADMSG. */
int atk_record(const char *regdir, const char *tenant, const char *name, struct atk_rec *rec);
/* Number of records of @tenant in the file registry at @regdir (-errno on error). */
int atk_record_count(const char *regdir, const char *tenant);

/* ---- region memory as its owner maps it ---- */

/* The header of a region this client created with (@slots, @slot_size). */
struct roshm_region_hdr *atk_region_hdr(struct roshm *r, uint32_t handle, uint32_t slots,
					uint32_t slot_size);
/* Slot of sequence @seq in that region's log. */
struct roshm_txn_slot *atk_slot(struct roshm_region_hdr *h, uint64_t seq);
/* The crc32c roshmd expects in a staged record: @staged points at
 * ROSHM_TXN_STAGE_OFF of the slot, @len bytes from there (txn.c staged_crc). */
uint32_t atk_staged_crc(const void *staged, uint32_t len);

#endif
