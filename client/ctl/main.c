/* SPDX-License-Identifier: BSD-3-Clause */
/* rdmamemctl: look at what rdmamemd is doing. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/macro.h"
#include "util/sockpath.h"
#include "rdmamem.h"
#include "ctl/ctl.h"

static void help(void)
{
	printf("Usage: rdmamemctl [OPTIONS] COMMAND [ARGS]\n"
	       "\n"
	       "Query rdmamemd, the memory-registration daemon.\n"
	       "\n"
	       "Commands:\n"
	       "  status            daemon version, uptime, clients, regions, devices\n"
	       "  regions           the regions this user may see (all of them for root)\n"
	       "  region ID         one region: owner, source, lock, leases, shares,\n"
	       "                    registrations (failed ones with their cause)\n"
	       "  devices           RDMA devices: ports, GIDs, MRs, pinned bytes, events\n"
	       "  connections       remote peers' queue pairs, by device and uid\n"
	       "  peers             remote daemons, by address: links to them and their\n"
	       "                    state, bytes and work requests each way, errors,\n"
	       "                    notifications\n"
	       "  gpus              CUDA driver, GPUs, dma-buf and peer-memory support\n"
	       "  clients           connected clients (yours; all of them for root)\n"
	       "  stats             calls by method, errors by name, bytes moved\n"
	       "  limits            your uid's limits and what it uses of each\n"
	       "  doctor            check what the daemon needs, say what to fix (also\n"
	       "                    when it is not running)\n"
	       "  ping              check that the daemon answers\n"
	       "  descriptor DESC   what a region descriptor names (endpoints, devices, keys)\n"
	       "  retry REGION DEVICE\n"
	       "                    forget a recorded registration failure so that the\n"
	       "                    next request tries again (root)\n"
	       "  call METHOD [JSON]\n"
	       "                    call any method (io.rdmamemd. may be left out) with\n"
	       "                    JSON parameters ('-': standard input); print the reply\n"
	       "\n"
	       "Options:\n"
	       "  -s, --socket=PATH daemon socket (default: $RDMAMEM_SOCKET, the per-user\n"
	       "                    socket, then /run/rdmamemd/rdmamemd.sock)\n"
	       "  -j, --json        print JSON instead of a table\n"
	       "  -h, --help        show this help\n"
	       "      --version     show the version\n"
	       "\n"
	       "Colour on a terminal unless $NO_COLOR is set.\n");
}

/*
 * A verb calls one method and shows its reply: as JSON with --json, else
 * as text through show. The others (doctor, peers, call, retry) run on
 * their own.
 */
struct verb {
	const char *name;
	const char *usage; /* the arguments, for the usage line */
	int min_args, max_args;
	const char *method;
	const char *params;                                /* fixed parameters */
	int (*make_params)(char *const *args, char **ret); /* from the arguments */
	void (*show)(const cJSON *reply);
	int (*run)(struct rdmamem_client *c, char *const *args);
	bool paged;    /* a listing: every page, shown as one */
	bool connects; /* run connects itself (doctor: the daemon may be down) */
};

static const struct verb verbs[] = {
	{ "clients", "", 0, 0, "io.rdmamemd.ListClients", .show = show_clients, .paged = true },
	{ "stats", "", 0, 0, "io.rdmamemd.GetStats", .show = show_stats },
	{ "limits", "", 0, 0, "io.rdmamemd.GetLimits", .show = show_limits },
	{ "doctor", "", 0, 0, .run = verb_doctor, .connects = true },
	/* probe: an operator asking may load the driver in the daemon. */
	{ "gpus", "", 0, 0, "io.rdmamemd.ListGpus", "{\"probe\":true}", .show = show_gpus },
	{ "devices", "", 0, 0, "io.rdmamemd.ListDevices", .show = show_devices },
	{ "connections", "", 0, 0, "io.rdmamemd.ListConnections", .show = show_connections,
	  .paged = true },
	{ "peers", "", 0, 0, .run = verb_peers },
	{ "status", "", 0, 0, "io.rdmamemd.GetStatus", .show = show_status },
	{ "regions", "", 0, 0, "io.rdmamemd.ListRegions", .show = show_regions, .paged = true },
	{ "region", " ID", 1, 1, "io.rdmamemd.GetRegion", .make_params = region_params,
	  .show = show_region },
	{ "ping", "", 0, 0, "io.rdmamemd.Ping", .show = show_ping },
	{ "descriptor", " DESC", 1, 1, "io.rdmamemd.ImportRemote", .make_params = descriptor_params,
	  .show = show_descriptor },
	{ "retry", " REGION DEVICE", 2, 2, .run = verb_retry },
	{ "call", " METHOD [JSON]", 1, 2, .run = verb_call },
};

static int query(struct rdmamem_client *c, const struct verb *v, char *const *args)
{
	_cleanup_free_ char *params = NULL;
	cJSON *reply;
	int r;

	if (v->make_params) {
		r = v->make_params(args, &params);
		if (r < 0)
			return r;
	}
	r = call_paged(c, v->method, params ?: v->params, v->paged, &reply);
	if (r < 0)
		return r;
	annotate_ids(reply);
	if (arg_json)
		r = print_json(reply);
	else
		v->show(reply);
	cJSON_Delete(reply);
	return r;
}

static int run_verb(const struct verb *v, char *const *args)
{
	struct rdmamem_client *c = NULL;
	int r;

	if (v->connects)
		return v->run(NULL, args);
	r = ctl_connect(&c);
	if (r < 0) {
		char why[512];

		connect_error(r, why, sizeof(why));
		fprintf(stderr, "rdmamemctl: %s\n", why);
		return r;
	}
	r = v->run ? v->run(c, args) : query(c, v, args);
	rdmamem_client_close(c);
	return r;
}

static int version(void)
{
	if (arg_json)
		printf("{\n\t\"version\":\t\"%s\"\n}\n", RDMAMEM_PACKAGE_VERSION);
	else
		printf("rdmamemctl %s\n", RDMAMEM_PACKAGE_VERSION);
	return EXIT_SUCCESS;
}

int main(int argc, char **argv)
{
	enum { OPT_VERSION = 0x100 };
	static const struct option options[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, OPT_VERSION },
		{},
	};
	bool show_version = false;
	const char *verb;
	int opt, n, r;

	while ((opt = getopt_long(argc, argv, "s:jh", options, NULL)) >= 0) {
		switch (opt) {
		case 's':
			arg_socket = optarg;
			break;
		case 'j':
			arg_json = true;
			break;
		case 'h':
			help();
			return EXIT_SUCCESS;
		case OPT_VERSION:
			show_version = true;
			break;
		default:
			return 2;
		}
	}
	if (show_version)
		return version();
	color_init();
	verb = optind < argc ? argv[optind] : "status";
	n = optind < argc ? argc - optind - 1 : 0;

	for (size_t i = 0; i < ELEMENTSOF(verbs); i++) {
		const struct verb *v = &verbs[i];

		if (strcmp(v->name, verb) != 0)
			continue;
		if (n < v->min_args || n > v->max_args) {
			fprintf(stderr, "rdmamemctl: usage: rdmamemctl %s%s\n", verb, v->usage);
			return 2;
		}
		r = run_verb(v, argv + optind + 1);
		return r == -EUSAGE ? 2 : r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
	}
	fprintf(stderr, "rdmamemctl: unknown command '%s' (try --help)\n", verb);
	return 2;
}
