/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Configuration: built-in defaults, then the INI file (libinih), then the
 * command line. One table of settings drives all three, --print-config, and
 * SIGHUP reload, which applies what can change at run time and names what
 * needs a restart.
 */
#ifndef RDMAMEMD_CONFIG_H
#define RDMAMEMD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define CONFIG_DEFAULT_PATH SYSCONFDIR "/rdmamemd/rdmamemd.conf"

/* max-input-bytes-per-uid: room for dozens of 16 MiB messages at once;
 * max-output-bytes-per-uid: for dozens of the largest Read replies. */
#define CONFIG_INPUT_PER_UID_DEFAULT (UINT64_C(256) << 20)
#define CONFIG_OUTPUT_PER_UID_DEFAULT (UINT64_C(256) << 20)

struct daemon_config {
	char *socket_path; /* NULL: the default for this environment */
	mode_t socket_mode;
	char *socket_group;       /* NULL: the daemon's own group */
	char *metrics_listen;     /* ADDR:PORT of the HTTP metrics endpoint; NULL: none */
	unsigned max_connections; /* all uids together */
	unsigned max_connections_per_uid;
	size_t output_max;         /* queued reply bytes before a connection stops being read */
	unsigned output_stall_sec; /* a client that reads nothing for this long is dropped */
	uint64_t max_input_bytes_per_uid;  /* buffered messages, before reading stops */
	uint64_t max_input_bytes;          /* the same, all uids together */
	unsigned input_stall_sec;          /* a message left unfinished this long: dropped */
	uint64_t max_output_bytes_per_uid; /* replies held, before calls wait */
	uint64_t max_output_bytes;         /* the same, all uids together */
	unsigned drain_timeout_ms;         /* at shutdown, how long in-flight calls may take */
	uint64_t max_regions_per_uid;
	uint64_t max_pinned_bytes_per_uid;
	unsigned max_leases_per_uid;  /* held or waiting */
	unsigned max_tokens_per_uid;  /* access tokens */
	unsigned max_remotes_per_uid; /* remote handles (ImportRemote) */
	unsigned max_plans_per_uid;   /* prepared plans (PrepareTransfer) */
	unsigned max_transfer_ops;    /* ops one Transfer call may carry */
	unsigned max_shares_per_region;
	uint64_t read_inline_max; /* largest Read answered inline */
	char **devices_allow;     /* NULL: every device */
	char **devices_deny;
	char **rdmacm_listen; /* ADDR[:PORT] to accept RDMA connections on */
	char **rdma_allow;    /* ADDR/PREFIX peers may come from; NULL: any */
	unsigned max_rdma_connections;
	unsigned max_rdma_connections_per_uid; /* into one uid's protection domains */
	unsigned link_idle_sec;     /* a queue pair to another daemon idle this long: closed */
	unsigned transfer_window;   /* work requests outstanding per such queue pair */
	unsigned link_ack_timeout;  /* its RC ack timeout: 4.096 us x 2^n */
	unsigned link_stall_sec;    /* work in flight, no completion this long: failed */
	unsigned max_links;         /* queue pairs to other daemons, in all */
	unsigned max_links_per_uid; /* and for one uid's transfers */
	int log_level;
	uint64_t bandwidth_probe_size;   /* each buffer of the host memcpy measurement; 0: none */
	unsigned reclaim_grace_sec;      /* kept regions wait this long for Reclaim; 0: none kept */
	unsigned gpu_context_linger_sec; /* a GPU's context kept after its last region; 0: not */
	unsigned loop_work_usec;         /* a copy expected to take this long runs on the loop */
	unsigned loop_import_usec;       /* a GPU import expected to take this long, too */
};

/* The built-in defaults: the daemon runs with no configuration file. */
void daemon_config_init(struct daemon_config *cfg);
void daemon_config_done(struct daemon_config *cfg);
/* Deep copy; -ENOMEM. */
int daemon_config_copy(struct daemon_config *dst, const struct daemon_config *src);

/*
 * Reads path into cfg (keys it names replace cfg's values). Returns 0,
 * -ENOENT when the file does not exist, or -EINVAL with err set to
 * "PATH:LINE: what is wrong".
 */
int config_load_file(struct daemon_config *cfg, const char *path, char *err, size_t size);

/*
 * Sets section.key from text, the way the file and the command line do.
 * Returns 0 or -EINVAL with err saying what is wrong with the value.
 */
int config_set(struct daemon_config *cfg, const char *section, const char *key, const char *value,
	       char *err, size_t size);

/* Writes every setting as the file would say it. */
void config_print(const struct daemon_config *cfg, FILE *f);

/*
 * Copies from new into cur what can change while clients are connected;
 * for each setting that differs but needs a restart, calls restart(name).
 * Returns how many settings changed.
 */
int config_apply_reload(struct daemon_config *cur, const struct daemon_config *new,
			void (*restart)(const char *name, void *userdata), void *userdata);

/* Command-line options generated from the table: the long option for
 * section.key is the key (rdma keys with their rdma- aliases). */
struct option;
/* Fills opts (NULL-terminated, at most n) and returns how many; each
 * option's val is CONFIG_OPTION_BASE + its index in the table. */
#define CONFIG_OPTION_BASE 0x1000
size_t config_options(struct option *opts, size_t n);
/* Applies the option with index i (from val) to cfg; list options add. */
int config_set_option(struct daemon_config *cfg, int i, const char *value, char *err, size_t size);
/* For --help. */
void config_help(FILE *f);

enum config_action {
	CONFIG_RUN,
	CONFIG_CHECK, /* --check-config */
	CONFIG_PRINT, /* --print-config */
	CONFIG_HELP,
	CONFIG_VERSION,
};

/* The gid socket-group names, or (gid_t)-1 when none is set: 0, or
 * -ENOENT when no such group exists. */
int config_socket_group(const struct daemon_config *cfg, gid_t *ret);

/*
 * The whole command line: defaults, then the file (--config PATH, which
 * must exist, else CONFIG_DEFAULT_PATH if it exists, none with
 * --no-config), then the options; last, the socket path in force when
 * none was given (see resolve_socket()).
 * Fills cfg (initialised here), *ret_path (the file read, or NULL; static
 * or from argv) and *ret_action. Returns 0 or -EINVAL with err set; may be
 * called again (SIGHUP) with the same argv.
 */
int config_from_args(int argc, char **argv, struct daemon_config *cfg, const char **ret_path,
		     enum config_action *ret_action, char *err, size_t size);

#endif
