// SPDX-License-Identifier: MIT
/*
 * roshmd configuration: libconfig file checked against a schema. Every key
 * in config/roshmd.conf appears in schema[] (config_schema.h); anything else is an error
 * naming file:line, as are wrong types and out-of-range values.
 */
#include <errno.h>
#include <inttypes.h>
#include <libconfig.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "registry/registry.h"
#include "config_schema.h"

struct ctx {
	const char *file;
	char *err;
	size_t errlen;
};

static int fail(struct ctx *c, const config_setting_t *s, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	const char *f = s ? config_setting_source_file(s) : NULL;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(c->err, c->errlen, "%s:%d: %s", f ? f : c->file,
		 s ? (int)config_setting_source_line(s) : 0, msg);
	return -1;
}

/*
 * libconfig (1.5) keeps an integer literal without an L suffix in 32 bits
 * and cuts what does not fit, silently (4294967296 reads as 0, which for a
 * rate means no cap). For an integer it read as 32 bits: look for a literal
 * on its source line (comments and strings aside) that does not fit 32 bits
 * and cuts to the value read; 0, or -1 with @lit set to it.
 */
static int cut_literal(const config_setting_t *s, const char *file, char *lit, size_t litlen)
{
	const char *f = config_setting_source_file(s);
	unsigned line = config_setting_source_line(s), n = 0;
	int v = config_setting_get_int(s), ret = 0;
	char *buf = NULL;
	size_t cap = 0;
	FILE *fp = fopen(f ? f : file, "r");

	if (!fp || !line)
		goto out;
	while (n < line && getline(&buf, &cap, fp) >= 0)
		n++;
	if (n < line)
		goto out;
	for (char *p = buf; *p;) {
		if (*p == '"') { /* a string: to its closing quote */
			for (p++; *p && *p != '"'; p++)
				if (*p == '\\' && p[1])
					p++;
			p += *p == '"';
			continue;
		}
		if (*p == '#' || (p[0] == '/' && p[1] == '/'))
			break;
		if (p[0] == '/' && p[1] == '*') {
			char *e = strstr(p + 2, "*/");

			if (!e)
				break;
			p = e + 2;
			continue;
		}
		bool start = *p >= '0' && *p <= '9' &&
			     (p == buf || !(p[-1] == '_' || p[-1] == '.' || (p[-1] >= '0' && p[-1] <= '9') ||
					    (p[-1] >= 'a' && p[-1] <= 'z') || (p[-1] >= 'A' && p[-1] <= 'Z')));

		if (!start) {
			p++;
			continue;
		}
		char *num = p > buf && (p[-1] == '-' || p[-1] == '+') ? p - 1 : p, *end;
		long long ll;

		errno = 0;
		ll = strtoll(num, &end, 0);
		if (*end != 'L' && *end != '.' && *end != 'e' && *end != 'E' &&
		    (errno == ERANGE || ll < INT32_MIN || ll > INT32_MAX) &&
		    (int32_t)(uint32_t)(unsigned long long)ll == v) {
			snprintf(lit, litlen, "%.*s", (int)(end - num), num);
			ret = -1;
			break;
		}
		p = end > p ? end : p + 1;
	}
out:
	free(buf);
	if (fp)
		fclose(fp);
	return ret;
}

static const struct key *find_key(const char *path)
{
	for (size_t i = 0; i < sizeof(schema) / sizeof(schema[0]); i++)
		if (!strcmp(schema[i].path, path))
			return &schema[i];
	return NULL;
}

static bool is_int(const config_setting_t *s)
{
	int t = config_setting_type(s);

	return t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64;
}

static int check(struct ctx *c, const config_setting_t *s, const char *prefix);

static int check_one(struct ctx *c, const config_setting_t *s, const char *path)
{
	const struct key *k = find_key(path);
	int n, t = config_setting_type(s);

	if (!k)
		return fail(c, s, "unknown key '%s'", path);
	switch (k->kind) {
	case K_INT: {
		char lit[32];

		if (!is_int(s))
			return fail(c, s, "'%s' must be an integer", path);
		if (t == CONFIG_TYPE_INT && cut_literal(s, c->file, lit, sizeof(lit)))
			return fail(c, s, "'%s' = %s does not fit 32 bits (read as %d): write %sL",
				    path, lit, config_setting_get_int(s), lit);
		long long v = config_setting_get_int64(s);

		if (v < k->min || v > k->max)
			return fail(c, s, "'%s' = %lld is out of range [%lld, %lld]", path, v,
				    (long long)k->min, (long long)k->max);
		return 0;
	}
	case K_STR: {
		if (t != CONFIG_TYPE_STRING)
			return fail(c, s, "'%s' must be a string", path);
		size_t len = strlen(config_setting_get_string(s));

		if ((int64_t)len < k->min || (int64_t)len > k->max)
			return fail(c, s, "'%s' must be %lld to %lld characters", path,
				    (long long)k->min, (long long)k->max);
		return 0;
	}
	case K_BOOL:
		if (t != CONFIG_TYPE_BOOL)
			return fail(c, s, "'%s' must be true or false", path);
		return 0;
	case K_GROUP:
		if (t != CONFIG_TYPE_GROUP)
			return fail(c, s, "'%s' must be a group { ... }", path);
		return check(c, s, path);
	case K_STRARR:
	case K_INTARR:
		if (t != CONFIG_TYPE_ARRAY && t != CONFIG_TYPE_LIST)
			return fail(c, s, "'%s' must be an array [ ... ]", path);
		n = config_setting_length(s);
		if (n > RD_EAL_ARGS_MAX - 8)
			return fail(c, s, "'%s' has too many elements", path);
		for (int i = 0; i < n; i++) {
			const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);

			char lit[32];

			if (k->kind == K_STRARR ? config_setting_type(e) != CONFIG_TYPE_STRING
						: !is_int(e))
				return fail(c, e, "'%s' element %d must be a%s", path, i,
					    k->kind == K_STRARR ? " string" : "n integer");
			if (k->kind == K_INTARR && config_setting_type(e) == CONFIG_TYPE_INT &&
			    cut_literal(e, c->file, lit, sizeof(lit)))
				return fail(c, e, "'%s' element %d = %s does not fit 32 bits (read as "
					    "%d): write %sL", path, i, lit, config_setting_get_int(e), lit);
			if (k->kind == K_INTARR && (config_setting_get_int64(e) < k->min ||
						    config_setting_get_int64(e) > k->max))
				return fail(c, e, "'%s' element %d is out of range", path, i);
		}
		return 0;
	case K_LIST: {
		char sub[200];

		if (t != CONFIG_TYPE_LIST)
			return fail(c, s, "'%s' must be a list ( ... )", path);
		n = config_setting_length(s);
		if (n > k->max)
			return fail(c, s, "'%s' has more than %lld entries", path, (long long)k->max);
		snprintf(sub, sizeof(sub), "%s.*", path);
		for (int i = 0; i < n; i++) {
			const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);

			if (config_setting_type(e) != CONFIG_TYPE_GROUP)
				return fail(c, e, "'%s' entries must be groups { ... }", path);
			if (check(c, e, sub))
				return -1;
		}
		return 0;
	}
	}
	return 0;
}

static int check(struct ctx *c, const config_setting_t *grp, const char *prefix)
{
	int n = config_setting_length(grp);

	for (int i = 0; i < n; i++) {
		const config_setting_t *s = config_setting_get_elem(grp, (unsigned)i);
		const char *name = config_setting_name(s);
		char path[160];

		if (!name)
			return fail(c, s, "unnamed setting");
		if (*prefix)
			snprintf(path, sizeof(path), "%s.%s", prefix, name);
		else
			snprintf(path, sizeof(path), "%s", name);
		if (check_one(c, s, path))
			return -1;
	}
	return 0;
}

static void set_eal_default(struct rd_config *cfg)
{
	static const char *const dflt[] = { "--no-huge", "-m", "256", "--no-pci",
					    "--no-shconf", "--file-prefix", "roshmd" };

	cfg->eal_argc = 0;
	for (size_t i = 0; i < sizeof(dflt) / sizeof(dflt[0]); i++)
		cfg->eal_argv[cfg->eal_argc++] = strdup(dflt[i]);
}

void rd_config_defaults(struct rd_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	if (gethostname(cfg->node, sizeof(cfg->node) - 1) != 0 || !cfg->node[0])
		strcpy(cfg->node, "node");
	snprintf(cfg->socket, sizeof(cfg->socket), "%s", ROSHM_DEFAULT_SOCK);
	set_eal_default(cfg);
	cfg->lcore = -1;
	cfg->idle = RD_IDLE_ADAPTIVE;
	cfg->idle_spin_us = 200;
	cfg->burst = 32;
	cfg->share_quantum = 2048;
	cfg->sq_entries = 256;
	cfg->cq_entries = 512;
	cfg->max_sq_entries = 4096;
	cfg->arena_size = 4ull << 20;
	cfg->max_arena_size = 256ull << 20;
	cfg->hugepages = RD_HUGE_AUTO;
	cfg->max_clients = 256;
	cfg->max_handles = 1024;
	cfg->max_regions = 4096;
	cfg->max_peers = 256;
	cfg->max_grants = ROSHM_GRANTS_MAX;
	cfg->max_grant_mrs = 16384;
	cfg->max_region_size = 1ull << 30;
	strcpy(cfg->registry_backend, "file");
	/* not under /run/roshm, which pods mount: records are roshmd's alone */
	strcpy(cfg->registry_dir, "/var/lib/roshm/registry");
	strcpy(cfg->etcd_endpoints, "http://127.0.0.1:2379");
	strcpy(cfg->etcd_prefix, "/roshm/v1");
	cfg->lease_ttl_s = 5;
	cfg->revalidate_ms = 1000;
	cfg->registry_timeout_ms = 5000;
	cfg->tcp_enabled = false;
	cfg->tcp_check_peer_addr = true;
	strcpy(cfg->tcp_listen, "0.0.0.0");
	cfg->tcp_port = 7471;
	strcpy(cfg->tcp_secret_file, "/etc/roshm/cluster.secret");
	cfg->tcp_max_msg = 1u << 20;
	cfg->tcp_max_inflight = 1024;
	cfg->tcp_connect_timeout_ms = 2000;
	cfg->verbs_enabled = false;
	cfg->verbs_gid_index = -1;
	cfg->verbs_port = 7472;
	strcpy(cfg->verbs_secret_file, "/etc/roshm/cluster.secret");
	cfg->verbs_qps_per_peer = 1;
	cfg->verbs_sq_depth = 256;
	cfg->verbs_signal_every = 16;
	cfg->verbs_max_inline = 128;
	cfg->verbs_connect_timeout_ms = 3000;
	cfg->verbs_ack_timeout = 16;
	/* not 7: rdma_rxe retries forever at 7 (operations.md, "verbs retries") */
	cfg->verbs_retry_count = 6;
	cfg->txn_max_inflight = 256;
	cfg->txn_max_per_client = 32;
	cfg->txn_max_slot_size = 65536;
	cfg->txn_abort_ms = 1000;
	cfg->txn_deadline_ms = 10000;
	cfg->drain_timeout_ms = 20000;
	cfg->quota.clients = 256;
	cfg->quota.regions = 4096;
	cfg->quota.bytes = 64ull << 30;
	cfg->quota.txn = 128;
	cfg->quota.peer_inflight = 512;
	cfg->quota.weight = 1;
	cfg->quota.registry_ops_per_sec = 500;
	cfg->ntenants = 1;
	strcpy(cfg->tenants[0].name, "default");
	cfg->tenants[0].quota = cfg->quota;
	cfg->nadmin_uids = 0;
	strcpy(cfg->admin_token_file, ROSHM_DEFAULT_ADMIN_TOKEN);
	cfg->max_pending_conns = 64;
	cfg->hello_timeout_ms = 5000;
	cfg->pending_grace_ms = 100;
	strcpy(cfg->log_level, "info");
}

void rd_config_free(struct rd_config *cfg)
{
	for (int i = 0; i < cfg->eal_argc; i++)
		free(cfg->eal_argv[i]);
	cfg->eal_argc = 0;
}

static bool power_of_two(uint64_t v)
{
	return v && !(v & (v - 1));
}

/* Comma-separated http:// or https:// URLs (only https:// with @tls). */
static bool endpoints_ok(const char *list, bool tls)
{
	const char *p = list;

	for (;;) {
		size_t n = strcspn(p, ",");

		if (!(n > 8 && !strncmp(p, "https://", 8)) &&
		    (tls || !(n > 7 && !strncmp(p, "http://", 7))))
			return false;
		if (!p[n])
			return true;
		p += n + 1;
	}
}

const char *rd_placeholder(const void *buf, size_t len)
{
	static const char *const words[] = { "replace-me", "replace_me", "replaceme", "change-me",
					     "change_me", "changeme", "placeholder", "example" };
	const char *b = buf;

	for (size_t w = 0; w < sizeof(words) / sizeof(words[0]); w++) {
		size_t n = strlen(words[w]);

		for (size_t i = 0; i + n <= len; i++)
			if (!strncasecmp(b + i, words[w], n))
				return words[w];
	}
	return NULL;
}

const char *rd_weak_secret(const void *buf, size_t len)
{
	const uint8_t *b = buf;
	bool seen[256] = { false };
	unsigned distinct = 0;

	if (rd_placeholder(buf, len))
		return "it is a placeholder from an example (make one: openssl rand -base64 32)";
	for (size_t i = 0; i < len; i++)
		if (!seen[b[i]]) {
			seen[b[i]] = true;
			distinct++;
		}
	if (distinct < 8)
		return "fewer than 8 different bytes: not random (make one: openssl rand -base64 32)";
	return NULL;
}

bool rd_valid_name(const char *s)
{
	if (!*s || *s == '.')
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '-' || *s == '_' || *s == '.'))
			return false;
	return true;
}

/*
 * The address of key @key (setting @s, NULL when absent): its form checked
 * (rd_addr_split with @flags), and with @dst its host stored there without
 * brackets. "" passes (the keys where it is allowed say what it means).
 */
static int host_key(struct ctx *c, const config_setting_t *s, const char *key, char *dst,
		    size_t len, unsigned flags)
{
	char host[RD_HOST_MAX], why[256];
	const char *v = s ? config_setting_get_string(s) : NULL;

	if (!v || !*v)
		return 0;
	if (rd_addr_split(v, flags & (RD_ADDR_PORT | RD_ADDR_NUMERIC), host, sizeof(host), NULL, why,
			  sizeof(why)))
		return fail(c, s, "'%s': %s", key, why);
	if (!(flags & RD_ADDR_PASSIVE) && !(flags & RD_ADDR_PORT) && rd_host_is_any(host))
		return fail(c, s, "'%s': %s is a wildcard address, not one a peer can reach", key, host);
	if (dst)
		snprintf(dst, len, "%s", host);
	return 0;
}

int rd_config_load(struct rd_config *cfg, const char *path, char *err, size_t errlen)
{
	struct ctx c = { .file = path, .err = err, .errlen = errlen };
	config_t lc;
	const config_setting_t *s, *root;
	long long v;
	const char *str;
	int ret = -1;

	rd_config_defaults(cfg);
	config_init(&lc);
	if (!config_read_file(&lc, path)) {
		if (config_error_type(&lc) == CONFIG_ERR_FILE_IO)
			snprintf(err, errlen, "%s:0: cannot read file", path);
		else
			snprintf(err, errlen, "%s:%d: %s",
				 config_error_file(&lc) ? config_error_file(&lc) : path,
				 config_error_line(&lc), config_error_text(&lc));
		goto out;
	}
	root = config_root_setting(&lc);
	if (check(&c, root, ""))
		goto out;

#define GET_INT(p, dst) do { if ((s = config_lookup(&lc, p))) { v = config_setting_get_int64(s); (dst) = (__typeof__(dst))v; } } while (0)
#define GET_STR(p, dst) do { if ((s = config_lookup(&lc, p))) snprintf((dst), sizeof(dst), "%s", config_setting_get_string(s)); } while (0)

	GET_STR("node", cfg->node);
	if ((s = config_lookup(&lc, "node")) && !rd_valid_name(cfg->node)) {
		fail(&c, s, "'node' must be letters, digits, '-', '_' or '.'");
		goto out;
	}
	GET_STR("socket", cfg->socket);
	if ((s = config_lookup(&lc, "eal"))) {
		rd_config_free(cfg);
		for (int i = 0; i < config_setting_length(s); i++)
			cfg->eal_argv[cfg->eal_argc++] =
				strdup(config_setting_get_string_elem(s, (unsigned)i));
	}
	GET_INT("dataplane.lcore", cfg->lcore);
	if ((s = config_lookup(&lc, "dataplane.idle"))) {
		str = config_setting_get_string(s);
		if (!strcmp(str, "busy"))
			cfg->idle = RD_IDLE_BUSY;
		else if (!strcmp(str, "adaptive"))
			cfg->idle = RD_IDLE_ADAPTIVE;
		else {
			fail(&c, s, "'dataplane.idle' must be \"busy\" or \"adaptive\", not \"%s\"", str);
			goto out;
		}
	}
	GET_INT("dataplane.idle_spin_us", cfg->idle_spin_us);
	GET_INT("dataplane.inflight_sleep_bytes", cfg->inflight_sleep_bytes);
	if ((s = config_lookup(&lc, "dataplane.idle_yield")))
		cfg->idle_yield = config_setting_get_bool(s);
	GET_INT("dataplane.burst", cfg->burst);
	GET_INT("dataplane.share_quantum", cfg->share_quantum);
	GET_INT("channel.sq_entries", cfg->sq_entries);
	GET_INT("channel.cq_entries", cfg->cq_entries);
	GET_INT("channel.max_sq_entries", cfg->max_sq_entries);
	GET_INT("channel.arena_size", cfg->arena_size);
	GET_INT("channel.max_arena_size", cfg->max_arena_size);
	if ((s = config_lookup(&lc, "channel.hugepages"))) {
		str = config_setting_get_string(s);
		if (!strcmp(str, "auto"))
			cfg->hugepages = RD_HUGE_AUTO;
		else if (!strcmp(str, "on"))
			cfg->hugepages = RD_HUGE_ON;
		else if (!strcmp(str, "off"))
			cfg->hugepages = RD_HUGE_OFF;
		else {
			fail(&c, s, "'channel.hugepages' must be \"auto\", \"on\" or \"off\", not \"%s\"", str);
			goto out;
		}
	}
	static const char *const pow2[] = { "channel.sq_entries", "channel.cq_entries",
					    "channel.max_sq_entries" };
	for (size_t i = 0; i < 3; i++)
		if ((s = config_lookup(&lc, pow2[i])) &&
		    !power_of_two((uint64_t)config_setting_get_int64(s))) {
			fail(&c, s, "'%s' must be a power of two", pow2[i]);
			goto out;
		}
	if (cfg->sq_entries > cfg->max_sq_entries || cfg->cq_entries < cfg->sq_entries) {
		s = config_lookup(&lc, "channel");
		fail(&c, s, "need sq_entries <= max_sq_entries and cq_entries >= sq_entries");
		goto out;
	}
	if (cfg->arena_size > cfg->max_arena_size || cfg->arena_size % 4096 ||
	    cfg->max_arena_size % 4096) {
		s = config_lookup(&lc, "channel");
		fail(&c, s, "arena sizes must be multiples of 4096 and arena_size <= max_arena_size");
		goto out;
	}
	GET_INT("limits.max_clients", cfg->max_clients);
	GET_INT("limits.max_handles", cfg->max_handles);
	GET_INT("limits.max_regions", cfg->max_regions);
	GET_INT("limits.max_peers", cfg->max_peers);
	GET_INT("limits.max_grants", cfg->max_grants);
	GET_INT("limits.max_grant_mrs", cfg->max_grant_mrs);
	GET_INT("limits.max_region_size", cfg->max_region_size);
	GET_STR("registry.backend", cfg->registry_backend);
	if ((s = config_lookup(&lc, "registry.backend")) && !rd_registry_backend(cfg->registry_backend)) {
		char names[128] = "";
		size_t o = 0;

		/* the backends' names: "file" or "etcd" */
		for (size_t i = 0; i < rd_registry_nbackends && o < sizeof(names); i++) {
			int n = snprintf(names + o, sizeof(names) - o, "%s\"%s\"",
					 !i ? "" : i + 1 < rd_registry_nbackends ? ", " : " or ",
					 rd_registry_backends[i].name);

			o += n > 0 ? (size_t)n : 0;
		}
		fail(&c, s, "'registry.backend' must be %s", names);
		goto out;
	}
	GET_STR("registry.dir", cfg->registry_dir);
	GET_STR("registry.endpoints", cfg->etcd_endpoints);
	if ((s = config_lookup(&lc, "registry.endpoints")) && !endpoints_ok(cfg->etcd_endpoints, false)) {
		fail(&c, s, "'registry.endpoints' must be http:// or https:// URLs, comma-separated");
		goto out;
	}
	GET_STR("registry.prefix", cfg->etcd_prefix);
	if ((s = config_lookup(&lc, "registry.prefix")) && cfg->etcd_prefix[0] != '/') {
		fail(&c, s, "'registry.prefix' must start with '/'");
		goto out;
	}
	GET_INT("registry.lease_ttl", cfg->lease_ttl_s);
	GET_INT("registry.revalidate_ms", cfg->revalidate_ms);
	GET_INT("registry.timeout_ms", cfg->registry_timeout_ms);
	GET_STR("registry.secret_file", cfg->registry_secret_file);
	GET_STR("registry.cacert", cfg->etcd_cacert);
	GET_STR("registry.cert", cfg->etcd_cert);
	GET_STR("registry.key", cfg->etcd_key);
	GET_STR("registry.username", cfg->etcd_username);
	GET_STR("registry.password_file", cfg->etcd_password_file);
	if (!cfg->etcd_cert[0] != !cfg->etcd_key[0]) {
		s = config_lookup(&lc, cfg->etcd_cert[0] ? "registry.cert" : "registry.key");
		fail(&c, s, "'registry.cert' and 'registry.key' go together (the client certificate and its key)");
		goto out;
	}
	if ((cfg->etcd_cacert[0] || cfg->etcd_cert[0]) && !endpoints_ok(cfg->etcd_endpoints, true)) {
		/* a TLS setting with a plaintext endpoint would quietly not apply to it */
		s = config_lookup(&lc, cfg->etcd_cacert[0] ? "registry.cacert" : "registry.cert");
		fail(&c, s, "TLS files are set: every 'registry.endpoints' URL must be https://");
		goto out;
	}
	if (!cfg->etcd_username[0] != !cfg->etcd_password_file[0]) {
		s = config_lookup(&lc, cfg->etcd_username[0] ? "registry.username" : "registry.password_file");
		fail(&c, s, "'registry.username' and 'registry.password_file' go together (etcd auth)");
		goto out;
	}
	if ((s = config_lookup(&lc, "transport.tcp.enabled")))
		cfg->tcp_enabled = config_setting_get_bool(s);
	GET_STR("transport.tcp.listen", cfg->tcp_listen);
	GET_INT("transport.tcp.port", cfg->tcp_port);
	GET_STR("transport.tcp.advertise", cfg->tcp_advertise);
	if ((s = config_lookup(&lc, "transport.tcp.check_peer_address")))
		cfg->tcp_check_peer_addr = config_setting_get_bool(s);
	GET_STR("transport.tcp.secret_file", cfg->tcp_secret_file);
	GET_INT("transport.tcp.max_msg", cfg->tcp_max_msg);
	GET_INT("transport.tcp.max_inflight", cfg->tcp_max_inflight);
	GET_INT("transport.tcp.connect_timeout_ms", cfg->tcp_connect_timeout_ms);
	if ((s = config_lookup(&lc, "transport.verbs.enabled")))
		cfg->verbs_enabled = config_setting_get_bool(s);
	GET_STR("transport.verbs.device", cfg->verbs_device);
	GET_STR("transport.verbs.netdev", cfg->verbs_netdev);
	GET_INT("transport.verbs.gid_index", cfg->verbs_gid_index);
	GET_STR("transport.verbs.listen", cfg->verbs_listen);
	GET_INT("transport.verbs.port", cfg->verbs_port);
	GET_STR("transport.verbs.advertise", cfg->verbs_advertise);
	GET_STR("transport.verbs.secret_file", cfg->verbs_secret_file);
	GET_INT("transport.verbs.qps_per_peer", cfg->verbs_qps_per_peer);
	GET_INT("transport.verbs.sq_depth", cfg->verbs_sq_depth);
	GET_INT("transport.verbs.signal_every", cfg->verbs_signal_every);
	GET_INT("transport.verbs.max_inline", cfg->verbs_max_inline);
	GET_INT("transport.verbs.connect_timeout_ms", cfg->verbs_connect_timeout_ms);
	GET_INT("transport.verbs.ack_timeout", cfg->verbs_ack_timeout);
	GET_INT("transport.verbs.retry_count", cfg->verbs_retry_count);
	if (cfg->verbs_enabled && cfg->tcp_enabled) {
		s = config_lookup(&lc, "transport.verbs.enabled");
		fail(&c, s, "enable one network transport per node: 'transport.verbs' or 'transport.tcp'");
		goto out;
	}
	if ((s = config_lookup(&lc, "transport.verbs.signal_every")) &&
	    cfg->verbs_signal_every > cfg->verbs_sq_depth / 2) {
		fail(&c, s, "'transport.verbs.signal_every' must be at most sq_depth / 2");
		goto out;
	}
	if ((s = config_lookup(&lc, "transport.verbs.sq_depth")) &&
	    (cfg->verbs_sq_depth & (cfg->verbs_sq_depth - 1))) {
		fail(&c, s, "'transport.verbs.sq_depth' must be a power of two");
		goto out;
	}
	GET_INT("txn.max_inflight", cfg->txn_max_inflight);
	GET_INT("txn.max_per_client", cfg->txn_max_per_client);
	GET_INT("txn.max_slot_size", cfg->txn_max_slot_size);
	GET_INT("txn.abort_ms", cfg->txn_abort_ms);
	GET_INT("txn.deadline_ms", cfg->txn_deadline_ms);
	GET_INT("drain.timeout_ms", cfg->drain_timeout_ms);
	GET_STR("metrics.listen", cfg->metrics_listen);
	/* Addresses: their form here; a name is resolved when roshmd starts
	 * (--check-config asks no DNS). Hosts are kept without brackets. */
	if ((s = config_lookup(&lc, "metrics.listen")) && cfg->metrics_listen[0] &&
	    host_key(&c, s, "metrics.listen", NULL, 0, RD_ADDR_PORT))
		goto out;
	if (host_key(&c, config_lookup(&lc, "transport.tcp.listen"), "transport.tcp.listen",
		     cfg->tcp_listen, sizeof(cfg->tcp_listen), RD_ADDR_PASSIVE) ||
	    host_key(&c, config_lookup(&lc, "transport.tcp.advertise"), "transport.tcp.advertise",
		     cfg->tcp_advertise, sizeof(cfg->tcp_advertise), 0) ||
	    host_key(&c, config_lookup(&lc, "transport.verbs.listen"), "transport.verbs.listen",
		     cfg->verbs_listen, sizeof(cfg->verbs_listen), RD_ADDR_NUMERIC | RD_ADDR_PASSIVE) ||
	    host_key(&c, config_lookup(&lc, "transport.verbs.advertise"), "transport.verbs.advertise",
		     cfg->verbs_advertise, sizeof(cfg->verbs_advertise), 0))
		goto out;
	/* ROSHM_ADVERTISE (rd_config_apply_env) may supply it */
	if (cfg->tcp_enabled && !cfg->tcp_advertise[0] && !getenv("ROSHM_ADVERTISE")) {
		if (!rd_host_is_any(cfg->tcp_listen)) {
			snprintf(cfg->tcp_advertise, sizeof(cfg->tcp_advertise), "%s", cfg->tcp_listen);
		} else {
			s = config_lookup(&lc, "transport.tcp");
			fail(&c, s, "'transport.tcp.advertise' is needed when listening on a wildcard "
			     "address (%s)", cfg->tcp_listen);
			goto out;
		}
	}
	GET_INT("quota.clients", cfg->quota.clients);
	GET_INT("quota.regions", cfg->quota.regions);
	GET_INT("quota.bytes", cfg->quota.bytes);
	GET_INT("quota.txn", cfg->quota.txn);
	GET_INT("quota.peer_inflight", cfg->quota.peer_inflight);
	GET_INT("quota.grant_mrs", cfg->quota.grant_mrs);
	GET_INT("quota.weight", cfg->quota.weight);
	GET_INT("quota.ops_per_sec", cfg->quota.ops_per_sec);
	GET_INT("quota.bytes_per_sec", cfg->quota.bytes_per_sec);
	GET_INT("quota.registry_ops_per_sec", cfg->quota.registry_ops_per_sec);
	cfg->tenants[0].quota = cfg->quota;
	/* which quotas the operator chose for every tenant (the rest: a fair
	 * share of the node, below) */
	bool q_clients = config_lookup(&lc, "quota.clients") != NULL;
	bool q_regions = config_lookup(&lc, "quota.regions") != NULL;
	bool q_txn = config_lookup(&lc, "quota.txn") != NULL;
	bool q_peer = config_lookup(&lc, "quota.peer_inflight") != NULL;
	bool q_gmrs = config_lookup(&lc, "quota.grant_mrs") != NULL;
	uint8_t t_set[RD_TENANTS_MAX] = { 0 }; /* bit per quota set in the tenant's own block */
	if ((s = config_lookup(&lc, "tenants"))) {
		cfg->ntenants = config_setting_length(s);
		for (int i = 0; i < cfg->ntenants; i++) {
			const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
			const char *name = NULL, *tok = "";

			if (!config_setting_lookup_string(e, "name", &name)) {
				fail(&c, e, "tenant entry without a name");
				goto out;
			}
			if (!rd_valid_name(name)) {
				fail(&c, e, "tenant name '%s' must be letters, digits, '-', '_' or '.'", name);
				goto out;
			}
			config_setting_lookup_string(e, "token", &tok);
			if (tok && rd_placeholder(tok, strlen(tok))) {
				fail(&c, e, "tenant '%s': its token is a placeholder from an example "
				     "(scripts/k8s-secrets.sh makes real ones)", name);
				goto out;
			}
			for (int j = 0; j < i; j++)
				if (!strcmp(cfg->tenants[j].name, name)) {
					fail(&c, e, "tenant '%s' defined twice", name);
					goto out;
				}
			snprintf(cfg->tenants[i].name, sizeof(cfg->tenants[i].name), "%s", name);
			snprintf(cfg->tenants[i].token, sizeof(cfg->tenants[i].token), "%s", tok);
			cfg->tenants[i].quota = cfg->quota;
			const config_setting_t *q = config_setting_get_member(e, "quota");
			long long qv;

			if (q && config_setting_lookup_int64(q, "clients", &qv)) {
				cfg->tenants[i].quota.clients = (uint32_t)qv;
				t_set[i] |= 1;
			}
			if (q && config_setting_lookup_int64(q, "regions", &qv)) {
				cfg->tenants[i].quota.regions = (uint32_t)qv;
				t_set[i] |= 2;
			}
			if (q && config_setting_lookup_int64(q, "bytes", &qv))
				cfg->tenants[i].quota.bytes = (uint64_t)qv;
			if (q && config_setting_lookup_int64(q, "txn", &qv)) {
				cfg->tenants[i].quota.txn = (uint32_t)qv;
				t_set[i] |= 4;
			}
			if (q && config_setting_lookup_int64(q, "peer_inflight", &qv)) {
				cfg->tenants[i].quota.peer_inflight = (uint32_t)qv;
				t_set[i] |= 8;
			}
			if (q && config_setting_lookup_int64(q, "grant_mrs", &qv)) {
				cfg->tenants[i].quota.grant_mrs = (uint32_t)qv;
				t_set[i] |= 16;
			}
			if (q && config_setting_lookup_int64(q, "weight", &qv))
				cfg->tenants[i].quota.weight = (uint32_t)qv;
			if (q && config_setting_lookup_int64(q, "ops_per_sec", &qv))
				cfg->tenants[i].quota.ops_per_sec = (uint64_t)qv;
			if (q && config_setting_lookup_int64(q, "bytes_per_sec", &qv))
				cfg->tenants[i].quota.bytes_per_sec = (uint64_t)qv;
			if (q && config_setting_lookup_int64(q, "registry_ops_per_sec", &qv))
				cfg->tenants[i].quota.registry_ops_per_sec = (uint32_t)qv;
		}
	}
	/* A quota nobody chose is the tenant's share of the node's limit, so
	 * that no tenant can take what the others need (with one tenant: the
	 * whole node). Chosen ones may oversubscribe: the operator's call. */
	for (int i = 0; i < cfg->ntenants; i++) {
		uint32_t n = (uint32_t)cfg->ntenants;
		struct rd_quota *q = &cfg->tenants[i].quota;

		if (!q_clients && !(t_set[i] & 1))
			q->clients = cfg->max_clients / n ? cfg->max_clients / n : 1;
		if (!q_regions && !(t_set[i] & 2))
			q->regions = cfg->max_regions / n ? cfg->max_regions / n : 1;
		if (!q_txn && !(t_set[i] & 4))
			q->txn = cfg->txn_max_inflight / n ? cfg->txn_max_inflight / n : 1;
		if (!q_peer && !(t_set[i] & 8))
			q->peer_inflight = cfg->tcp_max_inflight / n ? cfg->tcp_max_inflight / n : 1;
		if (!q_gmrs && !(t_set[i] & 16))
			q->grant_mrs = cfg->max_grant_mrs / n;
	}
	if ((s = config_lookup(&lc, "admin.uids"))) {
		cfg->nadmin_uids = config_setting_length(s);
		if (cfg->nadmin_uids > RD_ADMIN_UIDS_MAX) {
			fail(&c, s, "'admin.uids' has more than %d entries", RD_ADMIN_UIDS_MAX);
			goto out;
		}
		for (int i = 0; i < cfg->nadmin_uids; i++) {
			cfg->admin_uids[i] = (uint32_t)config_setting_get_int64_elem(s, (unsigned)i);
			if (!cfg->admin_uids[i]) {
				fail(&c, s, "'admin.uids' cannot hold 0: pods often run as root; "
				     "give admins the token of admin.token_file instead");
				goto out;
			}
		}
	}
	GET_STR("admin.token_file", cfg->admin_token_file);
	GET_INT("admin.max_pending", cfg->max_pending_conns);
	GET_INT("admin.hello_timeout_ms", cfg->hello_timeout_ms);
	GET_INT("admin.pending_grace_ms", cfg->pending_grace_ms);
	GET_STR("log.level", cfg->log_level);
	if ((s = config_lookup(&lc, "log.level")) && strcmp(cfg->log_level, "debug") &&
	    strcmp(cfg->log_level, "info") && strcmp(cfg->log_level, "notice") &&
	    strcmp(cfg->log_level, "warning") && strcmp(cfg->log_level, "error")) {
		fail(&c, s, "'log.level' must be debug, info, notice, warning or error");
		goto out;
	}
	ret = 0;
out:
	config_destroy(&lc);
	if (ret)
		rd_config_free(cfg);
	return ret;
}

int rd_config_tenant_idx(const struct rd_config *cfg, const char *name)
{
	for (int i = 0; i < cfg->ntenants; i++)
		if (!strcmp(cfg->tenants[i].name, name))
			return i;
	return -1;
}

const struct rd_tenant_cfg *rd_config_tenant(const struct rd_config *cfg, const char *name)
{
	int i = rd_config_tenant_idx(cfg, name);

	return i < 0 ? NULL : &cfg->tenants[i];
}
