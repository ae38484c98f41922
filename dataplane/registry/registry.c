// SPDX-License-Identifier: MIT
/*
 * Registry backends by name (rd_registry_backends[]), the record key, and the rate-limited log of
 * rejected records (a hostile writer may plant thousands of them; each is
 * worth one line a minute at most, and all of them together a few dozen).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "config.h"
#include "roshmd.h"
#include "transport/tcp/tcp.h"
#include "registry/registry.h"

#define RD_LOG_COMPONENT RD_LC_REGISTRY

uint64_t rd_registry_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

const uint64_t rd_reg_lat_le_ns[RD_REG_LAT_BUCKETS] = {
	100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000, 25000000, 50000000,
	100000000, 250000000, 500000000, 1000000000, 2500000000, 5000000000, 10000000000,
};

void rd_registry_observe(struct rd_registry *r, enum rd_reg_op op, uint64_t t0_ns, int status)
{
	struct rd_reg_stats *st = &r->stats;
	uint64_t d = rd_registry_now_ns() - t0_ns;
	unsigned b = 0, why;

	if (status == -ECANCELED)
		return; /* roshmd stops: not the store's doing */
	if (t0_ns) {
		while (b < RD_REG_LAT_BUCKETS && d > rd_reg_lat_le_ns[b])
			b++;
		RD_STAT_ADD(st->hist[op][b], 1);
		RD_STAT_ADD(st->sum_ns[op], d);
	}
	switch (status) {
	case 0: case -ENOENT: case -EEXIST: return;
	case -ETIMEDOUT: why = RD_REGERR_TIMEOUT; break;
	case -EHOSTUNREACH: case -ECONNREFUSED: case -ENOTCONN: why = RD_REGERR_UNREACHABLE; break;
	case -EACCES: case -EPERM: why = RD_REGERR_DENIED; break;
	case -EBADMSG: why = RD_REGERR_INVALID; break;
	default: why = RD_REGERR_OTHER; break;
	}
	RD_STAT_ADD(st->errors[op][why], 1);
}

int rd_registry_load_key(const struct rd_config *cfg, uint8_t key[64], size_t *keylen,
			 bool *random, char *err, size_t errlen)
{
	struct rd_tcp_secret sec;
	const char *path = cfg->registry_secret_file[0] ? cfg->registry_secret_file :
			   cfg->tcp_enabled ? cfg->tcp_secret_file :
			   cfg->verbs_enabled ? cfg->verbs_secret_file : NULL;
	int ret;

	*random = false;
	if (!path) {
		size_t off = 0;

		while (off < 32) {
			ssize_t n = getrandom(key + off, 32 - off, 0);

			if (n < 0 && errno != EINTR) {
				snprintf(err, errlen, "registry key: getrandom: %s", strerror(errno));
				return -errno;
			}
			off += n > 0 ? (size_t)n : 0;
		}
		*keylen = 32;
		*random = true;
		return 0;
	}
	ret = rd_tcp_secret_load(&sec, path, err, errlen);
	if (ret)
		return ret;
	if (sec.len > 64) {
		/* What HMAC does with a key longer than its block: same MACs. */
		SHA256(sec.key, sec.len, key);
		*keylen = 32;
	} else {
		memcpy(key, sec.key, sec.len);
		*keylen = sec.len;
	}
	OPENSSL_cleanse(&sec, sizeof(sec));
	return 0;
}

static int file_open(struct rd_registry *r, const struct rd_config *cfg, const uint8_t *key,
		     size_t keylen)
{
	return rd_registry_file_open(r, cfg->registry_dir, cfg->node, key, keylen);
}

const struct rd_registry_backend rd_registry_backends[] = {
	{ "file", file_open },
	{ "etcd", rd_registry_etcd_open },
};
const size_t rd_registry_nbackends = sizeof(rd_registry_backends) / sizeof(rd_registry_backends[0]);

const struct rd_registry_backend *rd_registry_backend(const char *name)
{
	for (size_t i = 0; i < rd_registry_nbackends; i++)
		if (!strcmp(rd_registry_backends[i].name, name))
			return &rd_registry_backends[i];
	return NULL;
}

int rd_registry_open(struct rd_registry *r, const struct rd_config *cfg)
{
	const struct rd_registry_backend *b = rd_registry_backend(cfg->registry_backend);
	uint8_t key[64];
	size_t keylen;
	bool rnd;
	char err[512];
	int ret = rd_registry_load_key(cfg, key, &keylen, &rnd, err, sizeof(err));

	memset(r, 0, sizeof(*r));
	if (ret) {
		RD_LOG(ERR, "registry: %s", err);
		return ret;
	}
	if (rnd)
		RD_LOG(NOTICE, "registry: no registry.secret_file and no network transport: records are "
		       "signed with a random key of this start, so records of other roshmd instances "
		       "(and of earlier starts) cannot be trusted and are ignored");
	if (b) {
		ret = b->open(r, cfg, key, keylen);
	} else { /* the config loader lets only a known name through */
		RD_LOG(ERR, "registry: no backend '%s'", cfg->registry_backend);
		ret = -EINVAL;
	}
	OPENSSL_cleanse(key, sizeof(key));
	return ret;
}

void rd_registry_init_common(struct rd_registry *r, const char *node, const uint8_t *key,
			     size_t keylen)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->node, sizeof(r->node), "%s", node);
	if (keylen > sizeof(r->key)) {
		SHA256(key, keylen, r->key);
		r->keylen = 32;
	} else {
		memcpy(r->key, key, keylen);
		r->keylen = keylen;
	}
	pthread_mutex_init(&r->badlog.lock, NULL);
}

void rd_registry_fini_common(struct rd_registry *r)
{
	OPENSSL_cleanse(r->key, sizeof(r->key));
	r->keylen = 0;
	pthread_mutex_destroy(&r->badlog.lock);
}

void rd_registry_log_bad(struct rd_registry *r, const char *key, const char *why)
{
	struct rd_reg_badlog *b = &r->badlog;
	uint64_t now = rd_registry_now_ns(), h = 1469598103934665603ull; /* FNV-1a */
	unsigned suppressed = 0;
	bool log = false;

	for (const char *p = key; *p; p++)
		h = (h ^ (uint8_t)*p) * 1099511628211ull;
	h |= 1; /* 0 marks a free slot */
	pthread_mutex_lock(&b->lock);
	if (now - b->window_ns >= 60000000000ull) {
		suppressed = b->suppressed;
		b->window_ns = now;
		b->in_window = 0;
		b->suppressed = 0;
	}
	/* One slot per hash bucket: a colliding key can only log more often
	 * than once a minute, and the burst cap still holds. */
	struct rd_reg_badslot *s = &b->slot[h % RD_REG_BADLOG_SLOTS];

	if (s->hash == h && now - s->last_ns < 60000000000ull) {
		/* this key was logged within the minute */
	} else if (b->in_window >= RD_REG_BADLOG_BURST) {
		b->suppressed++;
	} else {
		s->hash = h;
		s->last_ns = now;
		b->in_window++;
		log = true;
	}
	pthread_mutex_unlock(&b->lock);
	if (suppressed)
		RD_LOG(WARNING, "registry: %u more rejected records were not logged in the last minute",
		       suppressed);
	if (log)
		RD_LOG(WARNING, "registry: record %.200s rejected (treated as absent): %s", key, why);
}
