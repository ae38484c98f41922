// SPDX-License-Identifier: MIT
/*
 * roshmctl: admin CLI for roshmd. Talks to the control socket through
 * libroshm's admin API; prints a table by default, the raw JSON with --json.
 * Exit codes: 0 ok, 1 roshmd refused or failed, 2 usage, 3 roshmd not reachable.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "roshm.h"

#define DRAIN_BUSY_S 30 /* a drain refused for the tenant's drains under way: retried so long */

static void usage(FILE *f)
{
	fprintf(f, "usage: roshmctl [-s SOCKET] [--json] [--admin-token-file FILE]\n"
		   "                [--as TENANT --token-file FILE] COMMAND\n"
		   "       roshmctl --version | --help\n"
		   "commands:\n"
		   "  status    node, version, uptime, counts\n"
		   "  clients   attached clients and their counters\n"
		   "  regions [PREFIX]\n"
		   "            regions in the registry (whose names begin with PREFIX)\n"
		   "  peers     nodes this roshmd has connected to (tcp or verbs)\n"
		   "  drain [--tenant T | --region T/NAME | --pod POD]\n"
		   "            mark regions stale, finish their transactions, unpublish them;\n"
		   "            returns when done (preStop). --pod: the regions owned by the\n"
		   "            clients of pod POD ($ROSHM_POD in the pod, its metadata.uid)\n"
		   "  stats     poller counters and batch-size histogram\n"
		   "SOCKET defaults to $ROSHM_SOCK or " ROSHM_DEFAULT_SOCK ".\n"
		   "Credentials: the node's admin token (--admin-token-file, $ROSHM_ADMIN_TOKEN,\n"
		   "$ROSHM_ADMIN_TOKEN_FILE or " ROSHM_DEFAULT_ADMIN_TOKEN "), which allows\n"
		   "everything; or a tenant's token (--as TENANT --token-file FILE, or\n"
		   "$ROSHM_TENANT and $ROSHM_TOKEN), which allows that tenant's own clients,\n"
		   "regions and drains.\n");
}

/* The first line of @path into a malloc'd string, or NULL with a message. */
static char *read_secret(const char *path)
{
	char buf[512];
	FILE *f = fopen(path, "r");

	if (!f) {
		fprintf(stderr, "roshmctl: %s: %s\n", path, strerror(errno));
		return NULL;
	}
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = 0;
	fclose(f);
	buf[strcspn(buf, "\r\n")] = 0;
	return strdup(buf);
}

static void print_value(json_t *v, int width)
{
	char *s;

	if (json_is_string(v))
		printf("%-*s", width, json_string_value(v));
	else {
		s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
		printf("%-*s", width, s ? s : "?");
		free(s);
	}
}

static int value_width(json_t *v)
{
	char *s;
	int n;

	if (json_is_string(v))
		return (int)strlen(json_string_value(v));
	s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
	n = s ? (int)strlen(s) : 1;
	free(s);
	return n;
}

static void print_table(json_t *arr)
{
	json_t *first = json_array_get(arr, 0), *row, *v;
	const char *key;
	size_t i;
	int widths[32] = { 0 }, k;

	if (!first) {
		printf("(none)\n");
		return;
	}
	k = 0;
	json_object_foreach(first, key, v) {
		if (k >= 32)
			break;
		widths[k++] = (int)strlen(key);
	}
	json_array_foreach(arr, i, row) {
		k = 0;
		json_object_foreach(first, key, v) {
			if (k >= 32)
				break;
			int w = value_width(json_object_get(row, key));

			if (w > widths[k])
				widths[k] = w;
			k++;
		}
	}
	k = 0;
	json_object_foreach(first, key, v) {
		if (k >= 32)
			break;
		printf("%-*s  ", widths[k++], key);
	}
	printf("\n");
	json_array_foreach(arr, i, row) {
		k = 0;
		json_object_foreach(first, key, v) {
			if (k >= 32)
				break;
			print_value(json_object_get(row, key), widths[k++]);
			printf("  ");
		}
		printf("\n");
	}
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "tenant", required_argument, NULL, 'T' },
		{ "region", required_argument, NULL, 'R' },
		{ "pod", required_argument, NULL, 'P' },
		{ "as", required_argument, NULL, 'a' },
		{ "token-file", required_argument, NULL, 't' },
		{ "admin-token-file", required_argument, NULL, 'A' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *sock = NULL, *tenant = NULL, *region = NULL, *pod = NULL;
	struct roshm_params p = { 0 };
	char *token = NULL, *admin = NULL;
	char cmd[256];
	bool as_json = false;
	char *text = NULL;
	json_t *doc;
	json_error_t jerr;
	int opt, ret;

	while ((opt = getopt_long(argc, argv, "s:jhVT:R:", opts, NULL)) != -1) {
		switch (opt) {
		case 'V':
			printf("roshmctl %s (ABI %u)\n", ROSHM_VERSION, ROSHM_ABI_VERSION);
			ret = 0;
			goto out;
		case 'P':
			pod = optarg;
			break;
		case 'a':
			p.tenant = optarg;
			break;
		case 't':
			free(token);
			token = read_secret(optarg);
			if (!token) {
				ret = 2;
				goto out;
			}
			break;
		case 'A':
			free(admin);
			admin = read_secret(optarg);
			if (!admin) {
				ret = 2;
				goto out;
			}
			break;
		case 'T':
			tenant = optarg;
			break;
		case 'R':
			region = optarg;
			break;
		case 's':
			sock = optarg;
			break;
		case 'j':
			as_json = true;
			break;
		case 'h':
			usage(stdout);
			ret = 0;
			goto out;
		default:
			usage(stderr);
			ret = 2;
			goto out;
		}
	}
	/* regions PREFIX */
	const char *prefix = NULL;

	if (optind == argc - 2 && !strcmp(argv[optind], "regions")) {
		prefix = argv[argc - 1];
	} else if (optind != argc - 1) {
		usage(stderr);
		ret = 2;
		goto out;
	}
	{
		static const char *const cmds[] = { "status", "clients", "regions", "peers", "drain",
						    "stats" };
		bool known = false;

		for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
			known |= !strcmp(argv[optind], cmds[i]);
		if (!known) {
			fprintf(stderr, "roshmctl: unknown command '%s'\n", argv[optind]);
			usage(stderr);
			ret = 2;
			goto out;
		}
	}
	if ((tenant || region || pod) && strcmp(argv[optind], "drain")) {
		usage(stderr);
		ret = 2;
		goto out;
	}
	if (!!tenant + !!region + !!pod > 1) {
		fprintf(stderr, "roshmctl: drain takes one of --tenant, --region, --pod\n");
		ret = 2;
		goto out;
	}
	if (token && !p.tenant) {
		fprintf(stderr, "roshmctl: --token-file goes with --as TENANT\n");
		ret = 2;
		goto out;
	}
	snprintf(cmd, sizeof(cmd), "%s%s%s", argv[optind],
		 tenant ? " tenant " : region ? " region " : pod ? " pod " : prefix ? " " : "",
		 tenant ? tenant : region ? region : pod ? pod : prefix ? prefix : "");
	p.sock_path = sock;
	p.token = token;
	p.admin_token = admin;
	ret = roshm_admin_params(&p, cmd, &text);
	/* -EBUSY: the tenant has as many drains under way as it may have
	 * clients (a preStop must not give up on it): wait for one, up to
	 * DRAIN_BUSY_S */
	for (int i = 0; ret == -EBUSY && !strncmp(cmd, "drain", 5) && i < DRAIN_BUSY_S * 5; i++) {
		usleep(200000);
		ret = roshm_admin_params(&p, cmd, &text);
	}
	free(token);
	free(admin);
	token = admin = NULL;
	const char *path = sock ? sock : getenv("ROSHM_SOCK");
	struct stat st;

	if (!path || !*path)
		path = ROSHM_DEFAULT_SOCK;
	/* -ENOENT is also roshmd's answer to a drain that matched nothing:
	 * only a socket that is not there means roshmd cannot be reached */
	if ((ret == -ENOENT && (stat(path, &st) || !S_ISSOCK(st.st_mode))) || ret == -ECONNREFUSED) {
		fprintf(stderr, "roshmctl: cannot reach roshmd at %s: %s (is it running? -s SOCKET)\n",
			path, strerror(-ret));
		return 3;
	}
	if (ret) {
		fprintf(stderr, "roshmctl: %s: %s\n", argv[optind],
			ret == -EINVAL ? "unknown command" :
			ret == -EPERM ? "not allowed: no admin token, or a tenant asking for what is "
					"not its own (or the socket is not served by roshmd's uid)" :
			ret == -ENOENT ? "nothing matched" :
			ret == -EAGAIN ? "the tenant's registry quota is used up this second "
					 "(quota.registry_ops_per_sec): try again" :
			ret == -ETIME ? "roshmd did not answer in 10 s (timed out)" :
			ret == -EBUSY ? "the tenant's drains under way stayed at its quota.clients" :
					strerror(-ret));
		return 1;
	}
	if (as_json) {
		printf("%s\n", text);
		free(text);
		return 0;
	}
	doc = json_loads(text, 0, &jerr);
	free(text);
	if (!doc) {
		fprintf(stderr, "roshmctl: malformed reply from roshmd\n");
		return 1;
	}
	if (json_is_array(doc)) {
		print_table(doc);
	} else {
		const char *key;
		json_t *v;

		json_object_foreach(doc, key, v) {
			printf("%-16s ", key);
			print_value(v, 0);
			printf("\n");
		}
	}
	json_decref(doc);
	return 0;
out:
	free(token);
	free(admin);
	return ret;
}
