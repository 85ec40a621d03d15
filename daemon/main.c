/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "daemon.h"
#include "log.h"

static void help(void)
{
	printf("Usage: rdmamemd [OPTIONS]\n"
	       "\n"
	       "Memory-registration daemon for RDMA and GPU hosts.\n"
	       "\n"
	       "  -s, --socket=PATH          listen on PATH (default: $RUNTIME_DIRECTORY,\n"
	       "                             /run/rdmamemd/ as root, else $XDG_RUNTIME_DIR/rdmamemd/)\n"
	       "      --socket-mode=MODE     permissions of the socket (default 0660)\n"
	       "      --max-connections=N    connections from all users (default 4096)\n"
	       "      --max-connections-per-uid=N\n"
	       "                             connections from one user (default 1024)\n"
	       "      --max-regions-per-uid=N\n"
	       "                             regions one user may register (default 16384)\n"
	       "      --max-pinned-bytes-per-uid=BYTES\n"
	       "                             bytes one user may keep in regions\n"
	       "                             (default: half of physical memory)\n"
	       "      --read-inline-max=BYTES\n"
	       "                             largest Read answered inline (default 4194304)\n"
	       "      --devices=LIST         RDMA devices to open, comma-separated (default all)\n"
	       "      --exclude-devices=LIST RDMA devices not to open\n"
	       "      --rdmacm-listen=ADDR[:PORT]\n"
	       "                             accept RDMA connections there (repeatable;\n"
	       "                             default port 7471; default: none)\n"
	       "      --rdma-allow-network=ADDR/PREFIX\n"
	       "                             peers may connect only from these (repeatable)\n"
	       "      --max-rdma-connections=N\n"
	       "                             remote queue pairs in all (default 1024)\n"
	       "      --log-level=LEVEL      error, warning, notice, info (default) or debug\n"
	       "  -d, --debug                same as --log-level=debug\n"
	       "  -h, --help                 show this help\n"
	       "      --version              show the version\n");
}

static int parse_unsigned(const char *s, unsigned long max, unsigned long *ret)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 0);
	if (errno || end == s || *end || s[0] == '-' || v > max)
		return -EINVAL;
	*ret = v;
	return 0;
}

static int strv_append(char ***v, const char *s)
{
	size_t n = 0;
	char **nv;

	while (*v && (*v)[n])
		n++;
	nv = realloc(*v, (n + 2) * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	*v = nv;
	nv[n] = strdup(s);
	nv[n + 1] = NULL;
	return nv[n] ? 0 : -ENOMEM;
}

/* "a,b" appends a and b; empty items are skipped. */
static int strv_split_append(char ***v, const char *list)
{
	char *copy = strdup(list), *save = NULL;
	int r = 0;

	if (!copy)
		return -ENOMEM;
	for (char *t = strtok_r(copy, ",", &save); t && r == 0; t = strtok_r(NULL, ",", &save))
		r = strv_append(v, t);
	free(copy);
	/* An empty allow list still means "none", not "all". */
	if (r == 0 && !*v)
		r = strv_append(v, "");
	return r;
}

static int parse_args(int argc, char **argv, struct daemon_config *cfg)
{
	enum {
		ARG_SOCKET_MODE = 0x100,
		ARG_MAX_CONNECTIONS,
		ARG_MAX_CONNECTIONS_PER_UID,
		ARG_MAX_REGIONS_PER_UID,
		ARG_MAX_PINNED_PER_UID,
		ARG_READ_INLINE_MAX,
		ARG_DEVICES,
		ARG_EXCLUDE_DEVICES,
		ARG_RDMACM_LISTEN,
		ARG_RDMA_ALLOW,
		ARG_MAX_RDMA_CONNECTIONS,
		ARG_LOG_LEVEL,
		ARG_VERSION,
	};
	static const struct option options[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "socket-mode", required_argument, NULL, ARG_SOCKET_MODE },
		{ "max-connections", required_argument, NULL, ARG_MAX_CONNECTIONS },
		{ "max-connections-per-uid", required_argument, NULL, ARG_MAX_CONNECTIONS_PER_UID },
		{ "max-regions-per-uid", required_argument, NULL, ARG_MAX_REGIONS_PER_UID },
		{ "max-pinned-bytes-per-uid", required_argument, NULL, ARG_MAX_PINNED_PER_UID },
		{ "read-inline-max", required_argument, NULL, ARG_READ_INLINE_MAX },
		{ "devices", required_argument, NULL, ARG_DEVICES },
		{ "exclude-devices", required_argument, NULL, ARG_EXCLUDE_DEVICES },
		{ "rdmacm-listen", required_argument, NULL, ARG_RDMACM_LISTEN },
		{ "rdma-allow-network", required_argument, NULL, ARG_RDMA_ALLOW },
		{ "max-rdma-connections", required_argument, NULL, ARG_MAX_RDMA_CONNECTIONS },
		{ "log-level", required_argument, NULL, ARG_LOG_LEVEL },
		{ "debug", no_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, ARG_VERSION },
		{},
	};
	unsigned long v;
	int c, r;

	while ((c = getopt_long(argc, argv, "s:dh", options, NULL)) >= 0) {
		switch (c) {
		case 's':
			free(cfg->socket_path);
			cfg->socket_path = strdup(optarg);
			if (!cfg->socket_path)
				return -ENOMEM;
			break;
		case ARG_SOCKET_MODE:
			if (parse_unsigned(optarg, 0777, &v) < 0 || optarg[0] != '0') {
				fprintf(stderr, "rdmamemd: --socket-mode wants an octal mode such as 0660\n");
				return -EINVAL;
			}
			cfg->socket_mode = (mode_t)v;
			break;
		case ARG_MAX_CONNECTIONS:
		case ARG_MAX_CONNECTIONS_PER_UID:
			if (parse_unsigned(optarg, 1U << 20, &v) < 0 || v == 0) {
				fprintf(stderr, "rdmamemd: %s wants a number from 1 to 1048576\n",
					argv[optind - 1]);
				return -EINVAL;
			}
			if (c == ARG_MAX_CONNECTIONS)
				cfg->max_connections = v;
			else
				cfg->max_connections_per_uid = v;
			break;
		case ARG_MAX_REGIONS_PER_UID:
		case ARG_MAX_PINNED_PER_UID:
			if (parse_unsigned(optarg, ULONG_MAX, &v) < 0) {
				fprintf(stderr, "rdmamemd: %s wants a number\n", argv[optind - 1]);
				return -EINVAL;
			}
			if (c == ARG_MAX_REGIONS_PER_UID)
				cfg->max_regions_per_uid = v;
			else
				cfg->max_pinned_bytes_per_uid = v;
			break;
		case ARG_READ_INLINE_MAX:
			/* Its base64 must fit in one 16 MiB reply. */
			if (parse_unsigned(optarg, 12UL << 20, &v) < 0 || v == 0) {
				fprintf(stderr, "rdmamemd: --read-inline-max wants 1 to 12582912\n");
				return -EINVAL;
			}
			cfg->read_inline_max = v;
			break;
		case ARG_DEVICES:
		case ARG_EXCLUDE_DEVICES:
			r = strv_split_append(c == ARG_DEVICES ? &cfg->devices_allow :
								 &cfg->devices_deny,
					      optarg);
			if (r < 0)
				return r;
			break;
		case ARG_RDMACM_LISTEN:
		case ARG_RDMA_ALLOW:
			r = strv_append(c == ARG_RDMACM_LISTEN ? &cfg->rdmacm_listen : &cfg->rdma_allow,
					optarg);
			if (r < 0)
				return r;
			break;
		case ARG_MAX_RDMA_CONNECTIONS:
			if (parse_unsigned(optarg, 1U << 20, &v) < 0) {
				fprintf(stderr, "rdmamemd: --max-rdma-connections wants a number\n");
				return -EINVAL;
			}
			cfg->max_rdma_connections = v;
			break;
		case ARG_LOG_LEVEL:
			r = log_level_from_string(optarg);
			if (r < 0) {
				fprintf(stderr, "rdmamemd: unknown log level '%s'\n", optarg);
				return -EINVAL;
			}
			cfg->log_level = r;
			break;
		case 'd':
			cfg->log_level = LOG_DEBUG;
			break;
		case 'h':
			help();
			return 0;
		case ARG_VERSION:
			printf("rdmamemd " RDMAMEMD_VERSION "\n");
			return 0;
		default:
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "rdmamemd: unexpected argument '%s'\n", argv[optind]);
		return -EINVAL;
	}
	return 1;
}

/* select() is not used anywhere, so the soft fd limit may be the hard one:
 * every client costs an fd, and each registration of a memfd another. */
static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			log_debug_errno(-errno, "Cannot raise RLIMIT_NOFILE, ignoring: %m");
	}
}

int main(int argc, char **argv)
{
	struct daemon_config cfg;
	struct daemon *d;
	int r;

	log_setup();
	daemon_config_init(&cfg);
	r = parse_args(argc, argv, &cfg);
	if (r <= 0) {
		daemon_config_done(&cfg);
		return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
	}
	log_set_max_level(cfg.log_level);

	signal(SIGPIPE, SIG_IGN);
	raise_fd_limit();

	/* The daemon owns cfg's strings from here on. */
	r = daemon_new(&cfg, &d);
	if (r < 0) {
		log_error_errno(r, "Failed to start: %m");
		return EXIT_FAILURE;
	}
	r = daemon_run(d);
	daemon_free(d);
	return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
