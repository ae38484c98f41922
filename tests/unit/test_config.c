// SPDX-License-Identifier: MIT
/* Config loading: each kind of error is reported with file:line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <cmocka.h>

#include "config.h"

static char path[300];
/* made and removed by main(), so that a failed check leaves nothing behind:
 * the config file above and test_env's fake sysfs live in it */
static char dir[256];

static int load(const char *text, struct rd_config *cfg, char *err, size_t len)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	err[0] = 0;
	return rd_config_load(cfg, path, err, len);
}

/* Expect an error at @line whose message contains @needle. */
static void expect_error(const char *text, int line, const char *needle)
{
	struct rd_config cfg;
	char err[512], want[340];

	if (load(text, &cfg, err, sizeof(err)) == 0)
		fail_msg("config accepted, expected an error at line %d:\n%s", line, text);
	snprintf(want, sizeof(want), "%s:%d: ", path, line);
	if (strncmp(err, want, strlen(want)) || !strstr(err, needle))
		fail_msg("got \"%s\", expected \"%s...%s\"", err, want, needle);
	rd_config_free(&cfg);
}

static void test_sample_config_is_valid(void **st)
{
	struct rd_config cfg;
	char err[512];

	(void)st;
	/* The documented sample must load and say what its comments say. */
	assert_int_equal(rd_config_load(&cfg, SAMPLE_CONF, err, sizeof(err)), 0);
	assert_int_equal(cfg.burst, 32);
	assert_int_equal(cfg.sq_entries, 256);
	assert_int_equal(cfg.idle, RD_IDLE_ADAPTIVE);
	assert_string_equal(cfg.registry_backend, "file");
	assert_true(cfg.eal_argc > 0);
	rd_config_free(&cfg);
}

static void test_defaults_and_values(void **st)
{
	struct rd_config cfg;
	char err[512];

	(void)st;
	assert_int_equal(load("", &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.burst, 32);
	assert_int_equal(cfg.max_handles, 1024);
	assert_int_equal(cfg.max_grants, ROSHM_GRANTS_MAX);
	assert_true(cfg.inflight_sleep_bytes == 0); /* spin idle_spin_us, as before */
	assert_false(cfg.idle_yield);
	rd_config_free(&cfg);
	assert_int_equal(load("limits: { max_grants = 80; };\n", &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.max_grants, 80);
	rd_config_free(&cfg);
	assert_int_equal(load("dataplane: { inflight_sleep_bytes = 65536; idle_yield = true; };\n", &cfg,
			      err, sizeof(err)), 0);
	assert_true(cfg.inflight_sleep_bytes == 65536);
	assert_true(cfg.idle_yield);
	rd_config_free(&cfg);
	assert_int_equal(load("node = \"n1\";\ndataplane: { idle = \"busy\"; burst = 64; };\n"
			      "channel: { arena_size = 8388608; };\n"
			      "tenants = ( { name = \"a\"; token = \"t\"; } );\n", &cfg, err, sizeof(err)), 0);
	assert_string_equal(cfg.node, "n1");
	assert_int_equal(cfg.idle, RD_IDLE_BUSY);
	assert_int_equal(cfg.burst, 64);
	assert_int_equal(cfg.arena_size, 8388608);
	assert_int_equal(cfg.ntenants, 1);
	assert_string_equal(cfg.tenants[0].token, "t");
	rd_config_free(&cfg);
}

static void test_syntax_error(void **st)
{
	(void)st;
	expect_error("node = \"a\";\n\ndataplane: { burst = ; };\n", 3, "syntax error");
}

static void test_unknown_key(void **st)
{
	(void)st;
	expect_error("node = \"a\";\nnodes = \"b\";\n", 2, "unknown key 'nodes'");
	expect_error("dataplane: {\n  burst = 8;\n  brust = 9;\n};\n", 3, "unknown key 'dataplane.brust'");
	expect_error("tenants = (\n { name = \"a\";\n   tokn = \"x\"; }\n);\n", 3,
		     "unknown key 'tenants.*.tokn'");
}

static void test_wrong_type(void **st)
{
	(void)st;
	expect_error("\ndataplane: { burst = \"32\"; };\n", 2, "must be an integer");
	expect_error("node = 5;\n", 1, "must be a string");
	expect_error("dataplane = 5;\n", 1, "must be a group");
	expect_error("eal = [ 1, 2 ];\n", 1, "must be a string");
	expect_error("\n\ntenants = { name = \"a\"; };\n", 3, "must be a list");
}

static void test_out_of_range(void **st)
{
	(void)st;
	expect_error("dataplane: {\n burst = 0;\n};\n", 2, "out of range");
	expect_error("dataplane: { inflight_sleep_bytes = -1; };\n", 1, "out of range");
	expect_error("channel: {\n\n sq_entries = 100;\n};\n", 3, "power of two");
	expect_error("limits: { max_clients = 1000000; };\n", 1, "out of range");
	expect_error("limits: { max_grants = 513; };\n", 1, "out of range"); /* ROSHM_GRANTS_MAX */
	expect_error("limits: { max_grants = 0; };\n", 1, "out of range");
	expect_error("dataplane: { idle = \"lazy\"; };\n", 1, "\"busy\" or \"adaptive\"");
	expect_error("channel: { hugepages = \"maybe\"; };\n", 1, "\"auto\", \"on\" or \"off\"");
	expect_error("\nnode = \"a/b\";\n", 2, "letters, digits");
	expect_error("tenants = ( { name = \"a\"; }, \n { name = \"a\"; } );\n", 2, "defined twice");
	expect_error("registry: { backend = \"zookeeper\"; };\n", 1, "must be \"file\"");
}

/* The poller's shares: inherited from quota, a tenant's own block wins,
 * ranges checked. */
static void test_shares(void **st)
{
	struct rd_config cfg;
	char err[512];

	(void)st;
	assert_int_equal(load("dataplane: { share_quantum = 4096; };\n"
			      "quota: { weight = 2; bytes_per_sec = 1048576; };\n"
			      "tenants = ( { name = \"a\"; }, { name = \"b\"; quota = { weight = 5; "
			      "ops_per_sec = 100; }; } );\n", &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.share_quantum, 4096);
	assert_int_equal(cfg.tenants[0].quota.weight, 2);
	assert_int_equal(cfg.tenants[0].quota.bytes_per_sec, 1048576);
	assert_int_equal(cfg.tenants[0].quota.ops_per_sec, 0);
	assert_int_equal(cfg.tenants[1].quota.weight, 5);
	assert_int_equal(cfg.tenants[1].quota.ops_per_sec, 100);
	assert_int_equal(cfg.tenants[1].quota.bytes_per_sec, 1048576);
	rd_config_free(&cfg);
	assert_int_equal(load("node = \"n\";\n", &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.share_quantum, 2048);
	assert_int_equal(cfg.tenants[0].quota.weight, 1);
	assert_int_equal(cfg.tenants[0].quota.registry_ops_per_sec, 500);
	rd_config_free(&cfg);
	/* the registry's rate: quota's for every tenant, a tenant's own wins, 0 no limit */
	assert_int_equal(load("quota: { registry_ops_per_sec = 50; };\n"
			      "tenants = ( { name = \"a\"; }, { name = \"b\"; quota = { "
			      "registry_ops_per_sec = 0; }; } );\n", &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.tenants[0].quota.registry_ops_per_sec, 50);
	assert_int_equal(cfg.tenants[1].quota.registry_ops_per_sec, 0);
	rd_config_free(&cfg);
	expect_error("quota: { registry_ops_per_sec = 1000001; };\n", 1, "out of range");
	expect_error("tenants = ( { name = \"a\";\n quota = { registry_ops_per_sec = -1; }; } );\n",
		     2, "out of range");
	expect_error("quota: { weight = 0; };\n", 1, "out of range");
	expect_error("tenants = ( { name = \"a\";\n quota = { weight = 1001; }; } );\n", 2,
		     "out of range");
	expect_error("dataplane: { share_quantum = 100; };\n", 1, "out of range");
	expect_error("quota: { ops_per_sec = -1; };\n", 1, "out of range");
	/* grant MRs (verbs): each tenant's share of limits.max_grant_mrs unless
	 * chosen, for every tenant or in its own block; 0: none */
	assert_int_equal(load("node = \"n\";\n", &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.max_grant_mrs, 16384);
	assert_int_equal(cfg.tenants[0].quota.grant_mrs, 16384);
	rd_config_free(&cfg);
	assert_int_equal(load("limits: { max_grant_mrs = 1000; };\n"
			      "tenants = ( { name = \"a\"; }, { name = \"b\"; quota = { "
			      "grant_mrs = 0; }; }, { name = \"c\"; } );\n", &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.tenants[0].quota.grant_mrs, 333);
	assert_int_equal(cfg.tenants[1].quota.grant_mrs, 0);
	assert_int_equal(cfg.tenants[2].quota.grant_mrs, 333);
	rd_config_free(&cfg);
	assert_int_equal(load("quota: { grant_mrs = 7; };\n"
			      "tenants = ( { name = \"a\"; }, { name = \"b\"; } );\n",
			      &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.tenants[0].quota.grant_mrs, 7);
	assert_int_equal(cfg.tenants[1].quota.grant_mrs, 7);
	rd_config_free(&cfg);
	expect_error("limits: { max_grant_mrs = -1; };\n", 1, "out of range");
	expect_error("tenants = ( { name = \"a\";\n quota = { grant_mrs = 16777217; }; } );\n", 2,
		     "out of range");
}

/*
 * libconfig (1.5, Debian 12) keeps an integer literal without an L suffix
 * in 32 bits and cuts what does not fit, silently: `bytes_per_sec =
 * 4294967296;` (4 GiB/s) read as 0, which is "no cap", 4294967297 as 1
 * byte/s, and `bytes = 4294971392;` (4 GiB + 4 KiB) as 4096. Such a value
 * is an error that says to write the L; with it, it is the value written.
 */
static void test_int_past_32_bits(void **st)
{
	struct rd_config cfg;
	char err[512];

	(void)st;
	expect_error("quota: { bytes_per_sec = 4294967296; };\n", 1, "does not fit 32 bits");
	expect_error("\nquota: { bytes = 4294971392; };\n", 2, "4294971392L");
	expect_error("tenants = ( { name = \"a\";\n quota = { ops_per_sec = 0x100000001; }; } );\n", 2,
		     "does not fit 32 bits");
	expect_error("quota: { bytes_per_sec = 8589934592 ; bytes = 4096; };\n", 1,
		     "does not fit 32 bits");
	assert_int_equal(load("quota: { bytes_per_sec = 4294967296L; bytes = 4294971392L; };\n",
			      &cfg, err, sizeof(err)), 0);
	assert_true(cfg.quota.bytes_per_sec == 4294967296ull);
	assert_true(cfg.quota.bytes == 4294971392ull);
	rd_config_free(&cfg);
	/* what fits stays as it is, comments and strings around it too */
	assert_int_equal(load("# bytes_per_sec = 99999999999;\nquota: { bytes_per_sec = 2147483647; "
			      "/* bytes = 99999999999 */ };\n", &cfg, err, sizeof(err)), 0);
	assert_true(cfg.quota.bytes_per_sec == 2147483647ull);
	rd_config_free(&cfg);
}

static void test_verbs_keys(void **st)
{
	struct rd_config cfg;
	char err[512];

	(void)st;
	assert_int_equal(load("transport: { verbs: { enabled = true; device = \"rxe0\";\n"
			      " gid_index = 3; qps_per_peer = 2; sq_depth = 512; signal_every = 32; }; };\n",
			      &cfg, err, sizeof(err)), 0);
	assert_true(cfg.verbs_enabled);
	assert_string_equal(cfg.verbs_device, "rxe0");
	assert_int_equal(cfg.verbs_gid_index, 3);
	assert_int_equal(cfg.verbs_qps_per_peer, 2);
	assert_int_equal(cfg.verbs_sq_depth, 512);
	assert_int_equal(cfg.verbs_port, 7472);
	/* 6, not 7: rdma_rxe retries forever at 7 (a peer QP in error whose
	 * NAK was lost held every WR to that node for good) */
	assert_int_equal(cfg.verbs_retry_count, 6);
	rd_config_free(&cfg);
	expect_error("transport: {\n tcp: { enabled = true; advertise = \"198.18.0.1\"; };\n"
		     " verbs: {\n enabled = true; }; };\n", 4, "one network transport");
	expect_error("transport: { verbs: {\n sq_depth = 100; }; };\n", 2, "power of two");
	expect_error("transport: { verbs: {\n signal_every = 200; }; };\n", 2, "sq_depth / 2");
	expect_error("transport: { verbs: {\n qps_per_peer = 9; }; };\n", 2, "out of range");
	expect_error("transport: { verbs: {\n retry_count = 7; }; };\n", 2, "out of range");
	expect_error("transport: { verbs: {\n listen = \"eth0\"; }; };\n", 2,
		     "'transport.verbs.listen': 'eth0' is not an IP address");
	expect_error("transport: { verbs: {\n gid_index = -2; }; };\n", 2, "out of range");
}

static void test_registry_keys(void **st)
{
	struct rd_config cfg;
	char err[512];

	(void)st;
	/* defaults: out of /run/roshm, the transport's secret, 5 s writes */
	assert_int_equal(load("", &cfg, err, sizeof(err)), 0);
	assert_string_equal(cfg.registry_dir, "/var/lib/roshm/registry");
	assert_string_equal(cfg.registry_secret_file, "");
	assert_int_equal(cfg.registry_timeout_ms, 5000);
	assert_string_equal(cfg.etcd_cacert, "");
	assert_string_equal(cfg.etcd_username, "");
	rd_config_free(&cfg);
	assert_int_equal(load("registry: { backend = \"etcd\";\n"
			      " endpoints = \"https://10.0.0.1:2379,https://10.0.0.2:2379\";\n"
			      " secret_file = \"/etc/roshm/registry.secret\"; timeout_ms = 750;\n"
			      " cacert = \"/tls/ca.crt\"; cert = \"/tls/client.crt\"; key = \"/tls/client.key\";\n"
			      " username = \"roshm\"; password_file = \"/tls/password\"; };\n",
			      &cfg, err, sizeof(err)), 0);
	assert_string_equal(cfg.registry_secret_file, "/etc/roshm/registry.secret");
	assert_int_equal(cfg.registry_timeout_ms, 750);
	assert_string_equal(cfg.etcd_cacert, "/tls/ca.crt");
	assert_string_equal(cfg.etcd_cert, "/tls/client.crt");
	assert_string_equal(cfg.etcd_key, "/tls/client.key");
	assert_string_equal(cfg.etcd_username, "roshm");
	assert_string_equal(cfg.etcd_password_file, "/tls/password");
	rd_config_free(&cfg);
	/* a CA alone (server-authenticated TLS) is fine */
	assert_int_equal(load("registry: { endpoints = \"https://e:2379\"; cacert = \"/ca\"; };\n",
			      &cfg, err, sizeof(err)), 0);
	rd_config_free(&cfg);
	expect_error("registry: {\n cert = \"/c\";\n endpoints = \"https://e:2379\"; };\n", 2,
		     "'registry.cert' and 'registry.key' go together");
	expect_error("registry: { endpoints = \"https://e:2379\";\n\n key = \"/k\"; };\n", 3,
		     "'registry.cert' and 'registry.key' go together");
	expect_error("registry: { endpoints = \"https://a:2379,http://b:2379\";\n cacert = \"/ca\"; };\n", 2,
		     "must be https://");
	expect_error("registry: {\n cacert = \"/ca\"; };\n", 2, "must be https://");
	expect_error("registry: {\n endpoints = \"https://a:2379,b:2379\"; };\n", 2,
		     "http:// or https:// URLs");
	expect_error("registry: {\n username = \"roshm\"; };\n", 2,
		     "'registry.username' and 'registry.password_file' go together");
	expect_error("registry: {\n\n password_file = \"/p\"; };\n", 3,
		     "'registry.username' and 'registry.password_file' go together");
	expect_error("registry: {\n timeout_ms = 10; };\n", 2, "out of range");
	expect_error("registry: {\n secret_file = 1; };\n", 2, "must be a string");
	expect_error("registry: {\n secret = \"x\"; };\n", 2, "unknown key 'registry.secret'");
}

static void test_env(void **st)
{
	char p[700], log[256], err[256];
	struct rd_config cfg;

	(void)st;
	snprintf(p, sizeof(p), "mkdir -p %s/bus/pci/devices/0000:3b:02.1/infiniband/mlx5_3 "
		 "%s/bus/pci/devices/0000:3b:02.1/net/ens1f0v1", dir, dir);
	assert_int_equal(system(p), 0);
	assert_int_equal(load("transport: { verbs: { enabled = true; }; };\n", &cfg, err, sizeof(err)), 0);
	char *env[] = { "PATH=/bin", "ROSHM_NODE=worker-7", "ROSHM_ADVERTISE=10.1.2.3",
			"PCIDEVICE_NVIDIA_COM_ROCE_VF=0000:3b:02.1", NULL };

	assert_int_equal(rd_config_apply_env(&cfg, env, dir, log, sizeof(log), err, sizeof(err)), 0);
	assert_string_equal(cfg.node, "worker-7");
	assert_string_equal(cfg.verbs_advertise, "10.1.2.3");
	assert_string_equal(cfg.verbs_device, "mlx5_3");
	assert_string_equal(cfg.verbs_netdev, "ens1f0v1");
	assert_non_null(strstr(log, "VF 0000:3b:02.1"));
	rd_config_free(&cfg);
	/* a device named in the file wins over the VF */
	assert_int_equal(load("transport: { verbs: { enabled = true; device = \"rxe0\"; }; };\n", &cfg,
			      err, sizeof(err)), 0);
	assert_int_equal(rd_config_apply_env(&cfg, env, dir, log, sizeof(log), err, sizeof(err)), 0);
	assert_string_equal(cfg.verbs_device, "rxe0");
	rd_config_free(&cfg);
	/* bad values are errors that name the variable */
	char *bad1[] = { "ROSHM_NODE=a/b", NULL }, *bad2[] = { "ROSHM_ADVERTISE=10.1.2.3:7471", NULL };
	char *bad3[] = { "PCIDEVICE_X=0000:3b:02.2", NULL };

	assert_int_equal(load("transport: { verbs: { enabled = true; }; };\n", &cfg, err, sizeof(err)), 0);
	assert_int_equal(rd_config_apply_env(&cfg, bad1, dir, log, sizeof(log), err, sizeof(err)), -1);
	assert_non_null(strstr(err, "ROSHM_NODE"));
	assert_int_equal(rd_config_apply_env(&cfg, bad2, dir, log, sizeof(log), err, sizeof(err)), -1);
	assert_non_null(strstr(err, "ROSHM_ADVERTISE"));
	assert_int_equal(rd_config_apply_env(&cfg, bad3, dir, log, sizeof(log), err, sizeof(err)), -1);
	assert_non_null(strstr(err, "no RDMA device"));
	rd_config_free(&cfg);
}

/* Listen, advertise and metrics addresses: IPv4, IPv6 (bare or in
 * brackets) and names; a bad form is an error at its line that says what
 * is wrong. */
static void test_addresses(void **st)
{
	struct rd_config cfg;
	char err[512], log[256];

	(void)st;
	assert_int_equal(load("transport: { tcp: { enabled = true; listen = \"[::]\";\n"
			      " advertise = \"[fd00:198:18::1]\"; }; };\n"
			      "metrics: { listen = \"[::1]:9472\"; };\n", &cfg, err, sizeof(err)), 0);
	assert_string_equal(cfg.tcp_listen, "::");
	assert_string_equal(cfg.tcp_advertise, "fd00:198:18::1");
	assert_string_equal(cfg.metrics_listen, "[::1]:9472");
	rd_config_free(&cfg);
	/* a specific listen address is the advertised one */
	assert_int_equal(load("transport: { tcp: { enabled = true; listen = \"fd00:198:18::2\"; }; };\n",
			      &cfg, err, sizeof(err)), 0);
	assert_string_equal(cfg.tcp_advertise, "fd00:198:18::2");
	rd_config_free(&cfg);
	assert_int_equal(load("transport: { tcp: { enabled = true; listen = \"roshm-node-1\"; }; };\n"
			      "metrics: { listen = \"localhost:9472\"; };\n", &cfg, err, sizeof(err)), 0);
	assert_string_equal(cfg.tcp_advertise, "roshm-node-1");
	rd_config_free(&cfg);
	assert_int_equal(load("transport: { verbs: { enabled = true; listen = \"fd00:198:18::1\"; }; };\n"
			      "metrics: { listen = \"198.18.0.1:9472\"; };\n", &cfg, err, sizeof(err)), 0);
	assert_string_equal(cfg.verbs_listen, "fd00:198:18::1");
	rd_config_free(&cfg);
	/* ROSHM_ADVERTISE in any form of a host */
	char *env6[] = { "ROSHM_ADVERTISE=[fd00:198:18::3]", NULL }, *envp[] = { "ROSHM_ADVERTISE=::", NULL };

	assert_int_equal(load("", &cfg, err, sizeof(err)), 0);
	assert_int_equal(rd_config_apply_env(&cfg, env6, dir, log, sizeof(log), err, sizeof(err)), 0);
	assert_string_equal(cfg.tcp_advertise, "fd00:198:18::3");
	assert_string_equal(cfg.verbs_advertise, "fd00:198:18::3");
	assert_int_equal(rd_config_apply_env(&cfg, envp, dir, log, sizeof(log), err, sizeof(err)), -1);
	assert_non_null(strstr(err, "wildcard"));
	rd_config_free(&cfg);

	expect_error("transport: { tcp: {\n enabled = true; listen = \"::\"; }; };\n", 1,
		     "'transport.tcp.advertise' is needed when listening on a wildcard address (::)");
	expect_error("metrics: {\n listen = \"127.0.0.1\"; };\n", 2,
		     "'metrics.listen': missing port in '127.0.0.1'");
	expect_error("metrics: {\n listen = \"[::1]\"; };\n", 2, "missing port");
	expect_error("metrics: {\n listen = \"::1:9472\"; };\n", 2,
		     "an IPv6 address with a port is written [ADDR]:PORT");
	expect_error("metrics: {\n listen = \"[::1]:0\"; };\n", 2, "port 0 is out of range 1-65535");
	expect_error("metrics: {\n listen = \"[::1]:65536\"; };\n", 2,
		     "port 65536 is out of range 1-65535");
	expect_error("metrics: {\n\n listen = \"127.0.0.1:0\"; };\n", 3, "port 0 is out of range");
	expect_error("metrics: {\n listen = \"[::1:9472\"; };\n", 2, "unterminated '['");
	expect_error("metrics: {\n listen = \"127.0.0.1:http\"; };\n", 2, "not a number");
	expect_error("transport: { tcp: {\n listen = \"[fd00::1\"; }; };\n", 2,
		     "'transport.tcp.listen': unterminated '['");
	expect_error("transport: { tcp: {\n listen = \"198.18.0.1:7471\"; }; };\n", 2,
		     "no port here");
	expect_error("transport: { tcp: {\n advertise = \"0.0.0.0\"; }; };\n", 2, "wildcard");
	expect_error("transport: { tcp: {\n advertise = \"fd00::1::2\"; }; };\n", 2,
		     "is not an IPv6 address");
	expect_error("transport: { verbs: {\n advertise = \"[198.18.0.1]\"; }; };\n", 2,
		     "brackets are for IPv6 addresses only");
}

static void test_missing_file(void **st)
{
	struct rd_config cfg;
	char err[512];

	(void)st;
	assert_int_equal(rd_config_load(&cfg, "/nonexistent/roshmd.conf", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "/nonexistent/roshmd.conf:0: cannot read"));
	rd_config_free(&cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sample_config_is_valid),
		cmocka_unit_test(test_defaults_and_values),
		cmocka_unit_test(test_syntax_error),
		cmocka_unit_test(test_unknown_key),
		cmocka_unit_test(test_wrong_type),
		cmocka_unit_test(test_out_of_range),
		cmocka_unit_test(test_shares),
		cmocka_unit_test(test_int_past_32_bits),
		cmocka_unit_test(test_verbs_keys),
		cmocka_unit_test(test_registry_keys),
		cmocka_unit_test(test_env),
		cmocka_unit_test(test_addresses),
		cmocka_unit_test(test_missing_file),
	};
	const char *tag = getenv("ROSHM_TEST_TAG");
	char rm[300];
	int fd;

	snprintf(dir, sizeof(dir), "/tmp/roshm-test-%s-sysfs-XXXXXX", tag && *tag ? tag : "manual");
	if (!mkdtemp(dir))
		return 1;
	snprintf(path, sizeof(path), "%s/roshmd.conf", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return 1;
	close(fd);
	int ret = cmocka_run_group_tests_name("config", tests, NULL, NULL);

	snprintf(rm, sizeof(rm), "rm -rf '%s'", dir);
	if (system(rm))
		ret = 1;
	return ret;
}
