/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "daemon/core/config.h"
#include "daemon/daemon.h"
#include "daemon/core/log.h"
#include "daemon/rpc/rpc.h"

static void help(void)
{
	printf("Usage: rdmamemd [OPTIONS]\n"
	       "\n"
	       "Memory-registration daemon for RDMA and GPU hosts. Settings come from the\n"
	       "built-in defaults, then the configuration file, then these options.\n"
	       "\n"
	       "  --config=PATH                      configuration file (default " CONFIG_DEFAULT_PATH
	       ",\n"
	       "                                     read when it exists)\n"
	       "  --no-config                        read no file: defaults and these options\n"
	       "  --check-config                     check the configuration and exit\n"
	       "  --print-config                     print the settings in force and exit\n"
	       "  -s PATH                            same as --socket=PATH\n"
	       "  -d, --debug                        same as --log-level=debug\n"
	       "  -h, --help                         show this help\n"
	       "      --version                      show the version\n"
	       "      --print-idl INTERFACE          print an interface's description and exit\n"
	       "\n"
	       "Settings: the option, then [section] key in the file (see rdmamemd(8)):\n");
	config_help(stdout);
}

/*
 * Each client connection holds an fd, and so does each region of a memfd:
 * the per-uid region cap, not the fd limit, is what a client should meet.
 * select() is not used anywhere, so the soft limit may be the hard one.
 */
static void raise_fd_limit(void)
{
	struct rlimit rl;
	rlim_t was;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0) {
		log_warning_errno(-errno, "Cannot read RLIMIT_NOFILE: %m");
		return;
	}
	was = rl.rlim_cur;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
			log_warning_errno(-errno,
					  "Cannot raise RLIMIT_NOFILE from %llu to %llu, "
					  "keeping it: %m",
					  (unsigned long long)was, (unsigned long long)rl.rlim_max);
			return;
		}
	}
	if (was != rl.rlim_cur)
		log_info("File descriptor limit raised from %llu to the hard limit, %llu",
			 (unsigned long long)was, (unsigned long long)rl.rlim_cur);
	else
		log_info("File descriptor limit: %llu (the hard limit)",
			 (unsigned long long)rl.rlim_cur);
}

/* What GetInterfaceDescription serves; `make idl` writes proto/ with it. */
static int print_idl(const char *name)
{
	_cleanup_free_ char *text = NULL;
	int r;

	r = rpc_idl_text(name, &text);
	if (r < 0) {
		fprintf(stderr, "rdmamemd: %s: %s\n", name,
			r == -ENOENT ? "no such interface" : strerror(-r));
		return EXIT_FAILURE;
	}
	fputs(text, stdout);
	return fflush(stdout) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

int main(int argc, char **argv)
{
	struct daemon_config cfg = {};
	enum config_action action;
	const char *path = NULL;
	struct daemon *d;
	char err[512];
	int r;

	log_setup();
	/* Before the configuration: a build step, which reads none. */
	if (argc == 3 && strcmp(argv[1], "--print-idl") == 0)
		return print_idl(argv[2]);
	r = config_from_args(argc, argv, &cfg, &path, &action, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "rdmamemd: %s\n", err);
		daemon_config_done(&cfg);
		return EXIT_FAILURE;
	}
	switch (action) {
	case CONFIG_HELP:
		help();
		return EXIT_SUCCESS;
	case CONFIG_VERSION:
		printf("rdmamemd " RDMAMEMD_VERSION "\n");
		return EXIT_SUCCESS;
	case CONFIG_CHECK:
		printf("%s: ok\n", path ?: "built-in defaults (no configuration file)");
		daemon_config_done(&cfg);
		return EXIT_SUCCESS;
	case CONFIG_PRINT:
		printf("# rdmamemd " RDMAMEMD_VERSION ": defaults, %s, command line\n",
		       path ?: "no file");
		if (!cfg.socket_path)
			printf("# no socket here: not root and XDG_RUNTIME_DIR is not set; "
			       "the daemon needs --socket=PATH\n");
		config_print(&cfg, stdout);
		daemon_config_done(&cfg);
		return EXIT_SUCCESS;
	case CONFIG_RUN:
		break;
	}
	log_set_max_level(cfg.log_level);

	/*
	 * A fixed threshold: buffers of a client's large message (up to 16 MiB)
	 * get their own mappings, so growing one is an mremap() rather than a
	 * copy of megabytes on the loop, and freeing one gives the memory back.
	 * glibc's default threshold rises to the size of the largest block
	 * freed, after which both go through the heap.
	 */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	signal(SIGPIPE, SIG_IGN);
	raise_fd_limit();

	/* Before "Listening on": what the daemon runs with comes first. */
	if (path)
		log_info("Configuration from %s", path);
	else
		log_info("Configuration: built-in defaults and the command line (no file)");

	/* The daemon owns cfg's strings from here on. */
	r = daemon_new(&cfg, &d);
	if (r < 0) {
		log_error_errno(r, "Failed to start: %m");
		return EXIT_FAILURE;
	}
	d->argc = argc;
	d->argv = argv;
	d->config_path = path;
	r = daemon_run(d);
	daemon_free(d);
	return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
