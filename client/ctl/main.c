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
	printf("Usage: rdmamemctl [OPTIONS] COMMAND\n"
	       "\n"
	       "Query rdmamemd, the memory-registration daemon.\n"
	       "\n"
	       "Commands:\n"
	       "  status            daemon version, uptime, clients, regions, devices\n"
	       "  regions           the regions this user may see (all of them for root)\n"
	       "  region ID         one region: owner, source, lock, leases, shares\n"
	       "  devices           RDMA devices: ports, GIDs, MRs, pinned bytes, events\n"
	       "  connections       remote peers' queue pairs, by device and uid\n"
	       "  peers             remote daemons, by address: links to them and their\n"
	       "                    state, bytes and work requests each way, errors,\n"
	       "                    notifications\n"
	       "  gpus              CUDA driver, GPUs, dma-buf and peer-memory support\n"
	       "  clients           connected clients (yours; all of them for root)\n"
	       "  stats             calls by method, errors by name, bytes moved\n"
	       "  limits            your uid's limits and what it uses of each\n"
	       "  doctor            check what the daemon needs, say what to fix\n"
	       "  ping              check that the daemon answers\n"
	       "  descriptor DESC   what a region descriptor names (endpoints, devices, keys)\n"
	       "\n"
	       "Options:\n"
	       "  -s, --socket=PATH daemon socket (default: $RDMAMEM_SOCKET, the per-user\n"
	       "                    socket, then /run/rdmamemd/rdmamemd.sock)\n"
	       "  -j, --json        print JSON instead of a table\n"
	       "  -h, --help        show this help\n");
}

/*
 * A verb calls one method and shows its reply: as JSON with --json, else
 * as text through show. doctor calls several and runs on its own.
 */
struct verb {
	const char *name;
	const char *method;
	const char *params;                              /* fixed parameters */
	int (*make_params)(const char *arg, char **ret); /* from the argument */
	void (*show)(const cJSON *reply);
	int (*run)(struct rdmamem_client *c, const char *arg);
	bool takes_arg;
	bool paged; /* a listing: every page, shown as one */
};

static const struct verb verbs[] = {
	{ "clients", "io.rdmamemd.ListClients", .show = show_clients, .paged = true },
	{ "stats", "io.rdmamemd.GetStats", .show = show_stats },
	{ "limits", "io.rdmamemd.GetLimits", .show = show_limits },
	{ "doctor", .run = verb_doctor },
	/* probe: an operator asking may load the driver in the daemon. */
	{ "gpus", "io.rdmamemd.ListGpus", "{\"probe\":true}", .show = show_gpus },
	{ "devices", "io.rdmamemd.ListDevices", .show = show_devices },
	{ "connections", "io.rdmamemd.ListConnections", .show = show_connections, .paged = true },
	{ "peers", .run = verb_peers },
	{ "status", "io.rdmamemd.GetStatus", .show = show_status },
	{ "regions", "io.rdmamemd.ListRegions", .show = show_regions, .paged = true },
	{ "region", "io.rdmamemd.GetRegion", .make_params = region_params, .show = show_region,
	  .takes_arg = true },
	{ "ping", "io.rdmamemd.Ping", .show = show_ping },
	{ "descriptor", "io.rdmamemd.ImportRemote", .make_params = descriptor_params,
	  .show = show_descriptor, .takes_arg = true },
};

static int query(struct rdmamem_client *c, const struct verb *v, const char *arg)
{
	_cleanup_free_ char *params = NULL;
	cJSON *reply;
	int r;

	if (v->make_params) {
		r = v->make_params(arg, &params);
		if (r < 0)
			return r;
	}
	r = call_paged(c, v->method, params ?: v->params, v->paged, &reply);
	if (r < 0)
		return r;
	if (arg_json)
		r = print_json(reply);
	else
		v->show(reply);
	cJSON_Delete(reply);
	return r;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	struct rdmamem_client *c = NULL;
	char path[108];
	const char *verb;
	int opt, r;

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
		default:
			return 2;
		}
	}
	verb = optind < argc ? argv[optind] : "status";

	for (size_t i = 0; i < ELEMENTSOF(verbs); i++) {
		const char *arg = optind + 1 < argc ? argv[optind + 1] : NULL;

		if (strcmp(verbs[i].name, verb) != 0)
			continue;
		if (optind + 1 + verbs[i].takes_arg < argc || (verbs[i].takes_arg && !arg)) {
			fprintf(stderr, "rdmamemctl: usage: rdmamemctl %s%s\n", verb,
				verbs[i].takes_arg ? " ID" : "");
			return 2;
		}
		if (!arg_socket && sockpath_client_default(path, sizeof(path)) == 0)
			arg_socket = path;
		r = rdmamem_client_connect(arg_socket, &c);
		if (r < 0) {
			bool absent = r == -ENOENT || r == -ECONNREFUSED;

			fprintf(stderr, "rdmamemctl: cannot connect to rdmamemd at '%s': %s%s\n",
				arg_socket ?: "the default socket", strerror(-r),
				absent ? " (is the daemon running?)" : "");
			return EXIT_FAILURE;
		}
		arg_socket = rdmamem_client_socket_path(c);
		r = verbs[i].run ? verbs[i].run(c, arg) : query(c, &verbs[i], arg);
		rdmamem_client_close(c);
		return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
	}
	fprintf(stderr, "rdmamemctl: unknown command '%s' (try --help)\n", verb);
	return 2;
}
