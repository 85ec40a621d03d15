/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <ini.h>

#include "daemon/core/config.h"
#include "daemon/core/log.h"
#include "daemon/core/netaddr.h"
#include "util/macro.h"
#include "util/sockpath.h"

enum config_type {
	CFG_STRING,   /* char * */
	CFG_MODE,     /* mode_t, octal */
	CFG_UINT,     /* unsigned */
	CFG_U64,      /* uint64_t */
	CFG_SIZE,     /* uint64_t bytes, with K/M/G/T suffixes */
	CFG_LIST,     /* char **, NULL-terminated; space or comma separated */
	CFG_LOGLEVEL, /* int */
};

struct config_key {
	const char *section;
	const char *key;
	const char *option;  /* command-line name; NULL: the key */
	const char *metavar; /* what --help shows after '='; NULL: by the type */
	enum config_type type;
	size_t offset;
	bool reloadable;   /* SIGHUP applies it to a running daemon */
	uint64_t min, max; /* numbers: accepted range */
	const char *help;
	/* Lists whose items have a form: its check (0 or -EINVAL) and name. */
	int (*check_item)(const char *item);
	const char *item_form;
};

#define F(member) offsetof(struct daemon_config, member)

/* An address with its port given: a metrics port has no default. */
static int check_host_port(const char *s)
{
	const char *colon = strrchr(s, ':'), *bracket = strrchr(s, ']');

	if (netaddr_check_address(s) < 0 || !colon || (bracket && colon < bracket))
		return -EINVAL;
	return 0;
}

/* clang-format off */
static const struct config_key keys[] = {
	{ .section = "daemon", .key = "socket", .type = CFG_STRING, .offset = F(socket_path),
	  .metavar = "PATH",
	  .help = "listen on PATH (default: $RUNTIME_DIRECTORY, /run/rdmamemd/ as root, else "
		  "$XDG_RUNTIME_DIR/rdmamemd/)" },
	{ .section = "daemon", .key = "socket-mode", .type = CFG_MODE, .offset = F(socket_mode),
	  .max = 0777, .help = "permissions of a socket the daemon creates (default 0660)" },
	{ .section = "daemon", .key = "socket-group", .type = CFG_STRING,
	  .offset = F(socket_group), .metavar = "GROUP",
	  .help = "group (name or number) of a socket the daemon creates, so that its members "
		  "may connect, e.g. rdmamem (default: the daemon's own group)" },
	{ .section = "daemon", .key = "metrics-listen", .type = CFG_STRING,
	  .offset = F(metrics_listen), .metavar = "ADDR:PORT", .check_item = check_host_port,
	  .item_form = "an ADDR:PORT or [ADDR6]:PORT address",
	  .help = "serve the metrics over HTTP at ADDR:PORT/metrics (default: none; "
		  "127.0.0.1:PORT keeps them on this host)" },
	{ .section = "daemon", .key = "log-level", .type = CFG_LOGLEVEL, .offset = F(log_level),
	  .reloadable = true, .help = "error, warning, notice, info (default) or debug" },
	{ .section = "daemon", .key = "bandwidth-probe-size", .type = CFG_SIZE,
	  .offset = F(bandwidth_probe_size), .max = 1ULL << 30,
	  .help = "buffer size of the host memory bandwidth measurement at start (default 64M; "
		  "0: not measured)" },
	{ .section = "daemon", .key = "loop-work-usec", .type = CFG_UINT,
	  .offset = F(loop_work_usec), .reloadable = true, .max = 1000,
	  .help = "a copy expected to take at most this many microseconds runs on the event loop "
		  "itself; longer ones go to a pool thread, whose wake-ups cost about as much on "
		  "a GPU host (default 40; 0: every copy to the pool)" },
	{ .section = "daemon", .key = "loop-import-usec", .type = CFG_UINT,
	  .offset = F(loop_import_usec), .reloadable = true, .max = 1000,
	  .help = "a GPU import (a VMM fd's map, an IPC handle's open) that the last imports of "
		  "its kind and size say takes at most this many microseconds runs on the event "
		  "loop itself, while the driver is otherwise idle; on a pool thread it costs its "
		  "client two wake-ups more (default 100; 0: every import to the pool)" },
	{ .section = "daemon", .key = "reclaim-grace-sec", .type = CFG_UINT,
	  .offset = F(reclaim_grace_sec), .max = 86400,
	  .help = "under systemd, regions outlive a restart in its fd store and wait this many "
		  "seconds for their owners to reclaim them (default 120; 0: not kept)" },
	{ .section = "limits", .key = "max-connections", .type = CFG_UINT,
	  .offset = F(max_connections), .reloadable = true, .min = 1, .max = 1U << 20,
	  .help = "connections from all users (default 4096)" },
	{ .section = "limits", .key = "max-connections-per-uid", .type = CFG_UINT,
	  .offset = F(max_connections_per_uid), .reloadable = true, .min = 1, .max = 1U << 20,
	  .help = "connections from one user (default 1024)" },
	{ .section = "limits", .key = "max-regions-per-uid", .type = CFG_U64,
	  .offset = F(max_regions_per_uid), .reloadable = true, .max = UINT64_MAX,
	  .help = "regions one user may register (default 16384)" },
	{ .section = "limits", .key = "max-pinned-bytes-per-uid", .type = CFG_SIZE,
	  .offset = F(max_pinned_bytes_per_uid), .reloadable = true, .max = UINT64_MAX,
	  .help = "bytes one user may keep in regions (default: half of physical memory)" },
	{ .section = "limits", .key = "max-leases-per-uid", .type = CFG_UINT,
	  .offset = F(max_leases_per_uid), .reloadable = true, .min = 1, .max = 1U << 24,
	  .help = "leases one user may hold or wait for (default 16384)" },
	{ .section = "limits", .key = "max-access-tokens-per-uid", .type = CFG_UINT,
	  .offset = F(max_tokens_per_uid), .reloadable = true, .min = 1, .max = 1U << 24,
	  .help = "access tokens one user may hold (default 256)" },
	{ .section = "limits", .key = "max-remotes-per-uid", .type = CFG_UINT,
	  .offset = F(max_remotes_per_uid), .reloadable = true, .min = 1, .max = 1U << 24,
	  .help = "remote handles (imported descriptors) one user may hold (default 1024)" },
	{ .section = "limits", .key = "max-plans-per-uid", .type = CFG_UINT,
	  .offset = F(max_plans_per_uid), .reloadable = true, .min = 1, .max = 1U << 24,
	  .help = "prepared transfer plans one user may hold, each up to 16000 ranges "
		  "(default 256)" },
	{ .section = "limits", .key = "max-transfer-ops", .type = CFG_UINT,
	  .offset = F(max_transfer_ops), .reloadable = true, .min = 1, .max = 1U << 24,
	  .help = "ops one Transfer call may carry, listed or by plan index (default 100000)" },
	{ .section = "limits", .key = "max-shares-per-region", .type = CFG_UINT,
	  .offset = F(max_shares_per_region), .reloadable = true, .min = 1, .max = 4096,
	  .help = "uids and gids one region may be shared with, at most 4096 (default 64)" },
	{ .section = "limits", .key = "read-inline-max", .type = CFG_SIZE,
	  .offset = F(read_inline_max), .reloadable = true, .min = 1, .max = 12U << 20,
	  .help = "largest Read answered inline, at most 12M (default 4M)" },
	{ .section = "limits", .key = "max-input-bytes-per-uid", .type = CFG_SIZE,
	  .offset = F(max_input_bytes_per_uid), .reloadable = true, .min = 1U << 20,
	  .max = UINT64_MAX,
	  .help = "bytes of messages from one user the daemon buffers before it reads no more "
		  "of them (default 256M)" },
	{ .section = "limits", .key = "max-input-bytes", .type = CFG_SIZE,
	  .offset = F(max_input_bytes), .reloadable = true, .min = 1U << 20, .max = UINT64_MAX,
	  .help = "the same from all users (default: an eighth of physical memory, at least "
		  "256M)" },
	{ .section = "limits", .key = "input-stall-timeout", .type = CFG_UINT,
	  .offset = F(input_stall_sec), .reloadable = true, .min = 1, .max = 86400,
	  .help = "seconds a client may leave a message unfinished before it is dropped "
		  "(default 30)" },
	{ .section = "limits", .key = "max-output-bytes-per-uid", .type = CFG_SIZE,
	  .offset = F(max_output_bytes_per_uid), .reloadable = true, .min = 1U << 20,
	  .max = UINT64_MAX,
	  .help = "bytes of replies to one user the daemon holds (queued, or Read replies being "
		  "made) before that user's calls wait (default 256M)" },
	{ .section = "limits", .key = "max-output-bytes", .type = CFG_SIZE,
	  .offset = F(max_output_bytes), .reloadable = true, .min = 1U << 20, .max = UINT64_MAX,
	  .help = "the same to all users (default: an eighth of physical memory, at least "
		  "256M)" },
	{ .section = "limits", .key = "output-stall-timeout", .type = CFG_UINT,
	  .offset = F(output_stall_sec), .reloadable = true, .min = 1, .max = 86400,
	  .help = "seconds a client may leave its replies unread before it is dropped (default 30)" },
	{ .section = "rdma", .key = "devices", .type = CFG_LIST, .offset = F(devices_allow),
	  .metavar = "DEVICE,...",
	  .help = "RDMA devices to open (default: all)" },
	{ .section = "rdma", .key = "exclude-devices", .type = CFG_LIST, .offset = F(devices_deny),
	  .metavar = "DEVICE,...",
	  .help = "RDMA devices not to open" },
	{ .section = "rdma", .key = "rdmacm-listen", .type = CFG_LIST, .offset = F(rdmacm_listen),
	  .check_item = netaddr_check_address, .item_form = "an ADDR[:PORT] address",
	  .metavar = "ADDR[:PORT],...",
	  .help = "ADDR[:PORT] to accept RDMA connections on (default port 7471; default: none)" },
	{ .section = "rdma", .key = "allow-networks", .option = "rdma-allow-network",
	  .type = CFG_LIST, .offset = F(rdma_allow), .reloadable = true,
	  .check_item = netaddr_check_network, .item_form = "an ADDR/PREFIX network",
	  .metavar = "ADDR/PREFIX,...",
	  .help = "ADDR/PREFIX remote peers may connect from (default: any)" },
	{ .section = "rdma", .key = "max-connections", .option = "max-rdma-connections",
	  .type = CFG_UINT, .offset = F(max_rdma_connections), .reloadable = true,
	  .max = 1U << 20, .help = "remote queue pairs in all (default 1024)" },
	{ .section = "rdma", .key = "max-connections-per-uid",
	  .option = "max-rdma-connections-per-uid", .type = CFG_UINT,
	  .offset = F(max_rdma_connections_per_uid), .reloadable = true, .max = 1U << 20,
	  .help = "remote queue pairs into one user's memory (default 256)" },
	{ .section = "rdma", .key = "link-idle-sec", .type = CFG_UINT, .offset = F(link_idle_sec),
	  .min = 1, .max = 86400,
	  .help = "seconds a queue pair to another daemon may stay idle before it is closed "
		  "(default 60)" },
	{ .section = "rdma", .key = "transfer-window", .type = CFG_UINT,
	  .offset = F(transfer_window), .min = 1, .max = 4096,
	  .help = "work requests outstanding per queue pair to another daemon, at most 4096 "
		  "(default 128)" },
	{ .section = "rdma", .key = "link-ack-timeout", .type = CFG_UINT,
	  .offset = F(link_ack_timeout), .min = 1, .max = 31,
	  .help = "a queue pair to another daemon resends what the peer left unanswered "
		  "for 4.096 us x 2^N, six times, then fails: 18 (default) is 1.07 s, a "
		  "silent peer seen within 7.5 s (30 s at most, per the IB spec)" },
	{ .section = "rdma", .key = "max-links", .type = CFG_UINT, .offset = F(max_links),
	  .min = 1, .max = 1U << 16,
	  .help = "queue pairs to other daemons (Transfer) in all, each two fds (default 256)" },
	{ .section = "rdma", .key = "max-links-per-uid", .type = CFG_UINT,
	  .offset = F(max_links_per_uid), .min = 1, .max = 1U << 16,
	  .help = "queue pairs to other daemons for one user's transfers (default 64)" },
	{ .section = "rdma", .key = "link-stall-sec", .type = CFG_UINT,
	  .offset = F(link_stall_sec), .min = 1, .max = 3600,
	  .help = "a queue pair to another daemon with work requests in flight and no completion "
		  "for this long fails, its work flushed (default 30)" },
	{ .section = "gpu", .key = "context-linger-sec", .option = "gpu-context-linger-sec",
	  .type = CFG_UINT, .offset = F(gpu_context_linger_sec), .max = 86400,
	  .help = "seconds a GPU's primary context is kept after its last region goes, so that "
		  "the next import does not create it again (default 30; 0: released with the "
		  "last region)" },
};
/* clang-format on */

#define FIELD(cfg, k, type) ((type *)((char *)(cfg) + (k)->offset))

/* Half of physical memory: pinning more than that for one user starves
 * everyone else. */
static uint64_t default_pinned_max(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);

	if (pages <= 0 || size <= 0)
		return UINT64_C(1) << 40;
	return (uint64_t)pages * (uint64_t)size / 2;
}

/* An eighth of physical memory, and never less than one user may hold by
 * default: messages on their way in or out are a small share of what the
 * daemon serves. */
static uint64_t default_all_max(uint64_t per_uid)
{
	long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);

	if (pages <= 0 || size <= 0)
		return per_uid;
	return MAX((uint64_t)pages * (uint64_t)size / 8, per_uid);
}

void daemon_config_init(struct daemon_config *cfg)
{
	*cfg = (struct daemon_config){
		.socket_mode = 0660,
		.max_connections = 4096,
		.max_connections_per_uid = 1024,
		.output_max = 8U * 1024U * 1024U,
		.output_stall_sec = 30,
		.max_input_bytes_per_uid = CONFIG_INPUT_PER_UID_DEFAULT,
		.max_input_bytes = default_all_max(CONFIG_INPUT_PER_UID_DEFAULT),
		.input_stall_sec = 30,
		.max_output_bytes_per_uid = CONFIG_OUTPUT_PER_UID_DEFAULT,
		.max_output_bytes = default_all_max(CONFIG_OUTPUT_PER_UID_DEFAULT),
		.drain_timeout_ms = 5000,
		.max_regions_per_uid = 16384,
		.max_pinned_bytes_per_uid = default_pinned_max(),
		.max_leases_per_uid = 16384,
		.max_tokens_per_uid = 256,
		.max_remotes_per_uid = 1024,
		.max_plans_per_uid = 256,
		.max_transfer_ops = 100000,
		.max_shares_per_region = 64,
		.read_inline_max = 4U * 1024U * 1024U,
		.max_rdma_connections = 1024,
		.max_rdma_connections_per_uid = 256,
		.link_idle_sec = 60,
		.transfer_window = 128,
		.link_ack_timeout = 18, /* LINK_ACK_TIMEOUT_DEFAULT (remote/link.h) */
		.link_stall_sec = 30,
		.max_links = 256,
		.max_links_per_uid = 64,
		.log_level = LOG_INFO,
		.bandwidth_probe_size = 64ULL << 20,
		.reclaim_grace_sec = 120,
		.gpu_context_linger_sec = 30,
		.loop_work_usec = 40,
		.loop_import_usec = 100,
	};
}

static char **strv_free(char **v)
{
	for (char **p = v; p && *p; p++)
		free(*p);
	free(v);
	return NULL;
}

static char **strv_copy(char *const *v, bool *oom)
{
	size_t n = 0;
	char **c;

	if (!v)
		return NULL;
	while (v[n])
		n++;
	c = calloc(n + 1, sizeof(*c));
	for (size_t i = 0; c && i < n; i++) {
		c[i] = strdup(v[i]);
		if (!c[i])
			c = strv_free(c);
	}
	*oom = *oom || !c;
	return c;
}

static bool strv_equal(char *const *a, char *const *b)
{
	if (!a || !b)
		return a == b;
	for (; *a && *b; a++, b++)
		if (strcmp(*a, *b) != 0)
			return false;
	return *a == *b;
}

void daemon_config_done(struct daemon_config *cfg)
{
	for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
		if (keys[i].type == CFG_STRING) {
			free(*FIELD(cfg, &keys[i], char *));
			*FIELD(cfg, &keys[i], char *) = NULL;
		} else if (keys[i].type == CFG_LIST) {
			*FIELD(cfg, &keys[i], char **) = strv_free(*FIELD(cfg, &keys[i], char **));
		}
	}
}

int daemon_config_copy(struct daemon_config *dst, const struct daemon_config *src)
{
	bool oom = false;

	*dst = *src;
	for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
		if (keys[i].type == CFG_STRING && *FIELD(src, &keys[i], char *)) {
			*FIELD(dst, &keys[i], char *) = strdup(*FIELD(src, &keys[i], char *));
			oom = oom || !*FIELD(dst, &keys[i], char *);
		} else if (keys[i].type == CFG_LIST) {
			*FIELD(dst, &keys[i], char **) =
				strv_copy(*FIELD(src, &keys[i], char **), &oom);
		}
	}
	if (oom) {
		daemon_config_done(dst);
		return -ENOMEM;
	}
	return 0;
}

static int fail(char *err, size_t size, const char *fmt, ...) _printf_(3, 4);

static int fail(char *err, size_t size, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, size, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* "4096", "64K", "16M", "2G", "1T" (powers of 1024). */
static int parse_number(const char *s, bool suffixes, uint64_t *ret)
{
	static const char units[] = "KMGT";
	uint64_t v = 0;
	const char *p = s;

	if (!*p)
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (p == s)
		return -EINVAL;
	if (*p && suffixes) {
		const char *u = strchr(units, *p);
		unsigned shift;

		if (!u || p[1])
			return -EINVAL;
		shift = 10 * (unsigned)(u - units + 1);
		if (v > UINT64_MAX >> shift)
			return -ERANGE;
		v <<= shift;
	} else if (*p) {
		return -EINVAL;
	}
	*ret = v;
	return 0;
}

static int list_append(char ***v, const char *item)
{
	size_t n = 0;
	char **nv;

	while (*v && (*v)[n])
		n++;
	nv = realloc(*v, (n + 2) * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	*v = nv;
	nv[n] = strdup(item);
	nv[n + 1] = NULL;
	return nv[n] ? 0 : -ENOMEM;
}

/* Adds the space- or comma-separated items of text to *v. */
static int list_add(char ***v, const char *text)
{
	_cleanup_free_ char *copy = strdup(text);
	char *save = NULL;
	int r = 0;

	if (!copy)
		return -ENOMEM;
	for (char *t = strtok_r(copy, ", \t", &save); t && r == 0;
	     t = strtok_r(NULL, ", \t", &save))
		r = list_append(v, t);
	/* "devices =" with nothing still means "no device", not "all". */
	if (r == 0 && !*v)
		*v = calloc(1, sizeof(char *));
	return r;
}

static int set_key(struct daemon_config *cfg, const struct config_key *k, const char *value,
		   bool add, char *err, size_t size)
{
	uint64_t v;
	int r;

	switch (k->type) {
	case CFG_STRING: {
		char *s;

		if (*value && k->check_item && k->check_item(value) < 0)
			return fail(err, size, "%s: '%s' is not %s", k->key, value, k->item_form);
		s = *value ? strdup(value) : NULL;
		if (*value && !s)
			return -ENOMEM;
		free(*FIELD(cfg, k, char *));
		*FIELD(cfg, k, char *) = s;
		return 0;
	}
	case CFG_MODE: {
		char *end;
		unsigned long m;

		errno = 0;
		m = strtoul(value, &end, 8);
		if (errno || end == value || *end || value[0] != '0' || m > k->max)
			return fail(err, size, "%s wants an octal mode such as 0660, not '%s'",
				    k->key, value);
		*FIELD(cfg, k, mode_t) = (mode_t)m;
		return 0;
	}
	case CFG_UINT:
	case CFG_U64:
	case CFG_SIZE:
		r = parse_number(value, k->type == CFG_SIZE, &v);
		if (r < 0 || v < k->min || v > k->max)
			return fail(err, size,
				    "%s wants %s from %" PRIu64 " to %" PRIu64 ", not '%s'", k->key,
				    k->type == CFG_SIZE ? "a size (bytes, or with K, M, G, T)" :
							  "a number",
				    k->min, k->max, value);
		if (k->type == CFG_UINT)
			*FIELD(cfg, k, unsigned) = (unsigned)v;
		else
			*FIELD(cfg, k, uint64_t) = v;
		return 0;
	case CFG_LIST:
		if (!add)
			*FIELD(cfg, k, char **) = strv_free(*FIELD(cfg, k, char **));
		r = list_add(FIELD(cfg, k, char **), value);
		for (char **item = *FIELD(cfg, k, char **);
		     r == 0 && k->check_item && item && *item; item++)
			if (k->check_item(*item) < 0)
				return fail(err, size, "%s: '%s' is not %s", k->key, *item,
					    k->item_form);
		return r;
	case CFG_LOGLEVEL:
		r = log_level_from_string(value);
		if (r < 0)
			return fail(
				err, size,
				"log-level wants error, warning, notice, info or debug, not '%s'",
				value);
		*FIELD(cfg, k, int) = r;
		return 0;
	}
	return -EINVAL;
}

static const struct config_key *find_key(const char *section, const char *key)
{
	for (size_t i = 0; i < ELEMENTSOF(keys); i++)
		if (strcmp(keys[i].section, section) == 0 && strcmp(keys[i].key, key) == 0)
			return &keys[i];
	return NULL;
}

int config_set(struct daemon_config *cfg, const char *section, const char *key, const char *value,
	       char *err, size_t size)
{
	const struct config_key *k = find_key(section, key);

	if (!k)
		return fail(err, size, "unknown setting '%s' in section [%s]", key, section);
	return set_key(cfg, k, value, false, err, size);
}

struct load_state {
	struct daemon_config *cfg;
	char err[256];
};

static int on_ini(void *user, const char *section, const char *name, const char *value)
{
	struct load_state *st = user;

	/* libinih reports the line of the first handler failure. */
	return config_set(st->cfg, section, name, value, st->err, sizeof(st->err)) == 0;
}

int config_load_file(struct daemon_config *cfg, const char *path, char *err, size_t size)
{
	struct load_state st = { .cfg = cfg };
	FILE *f;
	int line;

	f = fopen(path, "re");
	if (!f) {
		int e = errno;

		if (e != ENOENT)
			fail(err, size, "%s: %s", path, strerror(e));
		else
			fail(err, size, "%s: no such file", path);
		return -e;
	}
	line = ini_parse_file(f, on_ini, &st);
	fclose(f);
	if (line > 0)
		return fail(err, size, "%s:%d: %s", path, line,
			    st.err[0] ? st.err : "not a 'key = value' line or a [section]");
	if (line < 0)
		return fail(err, size, "%s: cannot be parsed", path);
	return 0;
}

/* A size the way a file would spell it, which the parser reads back: the
 * largest suffix that divides it (64M, not 67108864). */
static void print_size(uint64_t v, FILE *f)
{
	static const char suffix[] = "KMGT";
	int i = -1;

	while (v && i + 1 < (int)sizeof(suffix) - 1 && v % 1024 == 0) {
		v /= 1024;
		i++;
	}
	if (i < 0)
		fprintf(f, "%" PRIu64, v);
	else
		fprintf(f, "%" PRIu64 "%c", v, suffix[i]);
}

static void print_value(const struct daemon_config *cfg, const struct config_key *k, FILE *f)
{
	switch (k->type) {
	case CFG_STRING:
		fprintf(f, "%s", *FIELD(cfg, k, char *) ?: "");
		break;
	case CFG_MODE:
		fprintf(f, "%04o", (unsigned)*FIELD(cfg, k, mode_t));
		break;
	case CFG_UINT:
		fprintf(f, "%u", *FIELD(cfg, k, unsigned));
		break;
	case CFG_U64:
		fprintf(f, "%" PRIu64, *FIELD(cfg, k, uint64_t));
		break;
	case CFG_SIZE:
		print_size(*FIELD(cfg, k, uint64_t), f);
		break;
	case CFG_LIST:
		for (char **p = *FIELD(cfg, k, char **); p && *p; p++)
			fprintf(f, "%s%s", p == *FIELD(cfg, k, char **) ? "" : " ", *p);
		break;
	case CFG_LOGLEVEL:
		fprintf(f, "%s", log_level_to_string(*FIELD(cfg, k, int)));
		break;
	}
}

void config_print(const struct daemon_config *cfg, FILE *f)
{
	const char *section = "";

	for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
		const struct config_key *k = &keys[i];

		if (strcmp(section, k->section) != 0) {
			fprintf(f, "%s[%s]\n", i ? "\n" : "", k->section);
			section = k->section;
		}
		fprintf(f, "%s = ", k->key);
		print_value(cfg, k, f);
		fprintf(f, "\n");
	}
}

static bool key_equal(const struct daemon_config *a, const struct daemon_config *b,
		      const struct config_key *k)
{
	switch (k->type) {
	case CFG_STRING: {
		const char *x = *FIELD(a, k, char *), *y = *FIELD(b, k, char *);

		return x && y ? strcmp(x, y) == 0 : x == y;
	}
	case CFG_MODE:
		return *FIELD(a, k, mode_t) == *FIELD(b, k, mode_t);
	case CFG_UINT:
		return *FIELD(a, k, unsigned) == *FIELD(b, k, unsigned);
	case CFG_U64:
	case CFG_SIZE:
		return *FIELD(a, k, uint64_t) == *FIELD(b, k, uint64_t);
	case CFG_LIST:
		return strv_equal(*FIELD(a, k, char **), *FIELD(b, k, char **));
	case CFG_LOGLEVEL:
		return *FIELD(a, k, int) == *FIELD(b, k, int);
	}
	return true;
}

int config_apply_reload(struct daemon_config *cur, const struct daemon_config *new,
			void (*restart)(const char *name, void *userdata), void *userdata)
{
	int changed = 0;

	for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
		const struct config_key *k = &keys[i];
		char name[64];

		if (key_equal(cur, new, k))
			continue;
		changed++;
		snprintf(name, sizeof(name), "%s.%s", k->section, k->key);
		if (!k->reloadable) {
			restart(name, userdata);
			continue;
		}
		switch (k->type) {
		case CFG_LIST: {
			bool oom = false;
			char **copy = strv_copy(*FIELD(new, k, char **), &oom);

			if (oom) {
				restart(name, userdata);
				break;
			}
			strv_free(*FIELD(cur, k, char **));
			*FIELD(cur, k, char **) = copy;
			break;
		}
		case CFG_UINT:
			*FIELD(cur, k, unsigned) = *FIELD(new, k, unsigned);
			break;
		case CFG_U64:
		case CFG_SIZE:
			*FIELD(cur, k, uint64_t) = *FIELD(new, k, uint64_t);
			break;
		case CFG_LOGLEVEL:
			*FIELD(cur, k, int) = *FIELD(new, k, int);
			break;
		default:
			/* Strings and modes are not reloadable. */
			break;
		}
	}
	return changed;
}

size_t config_options(struct option *opts, size_t n)
{
	size_t i;

	for (i = 0; i < ELEMENTSOF(keys) && i + 1 < n; i++)
		opts[i] = (struct option){ keys[i].option ?: keys[i].key, required_argument, NULL,
					   CONFIG_OPTION_BASE + (int)i };
	opts[i] = (struct option){};
	return i;
}

int config_set_option(struct daemon_config *cfg, int i, const char *value, char *err, size_t size)
{
	if (i < 0 || (size_t)i >= ELEMENTSOF(keys))
		return -EINVAL;
	/* A list option given on the command line adds to what the same
	 * command line gave before (the caller clears the file's list once). */
	return set_key(cfg, &keys[i], value, true, err, size);
}

static const char *metavar(const struct config_key *k)
{
	static const char *const by_type[] = {
		[CFG_STRING] = "VALUE",   [CFG_MODE] = "MODE", [CFG_UINT] = "N",
		[CFG_U64] = "N",          [CFG_SIZE] = "SIZE", [CFG_LIST] = "LIST",
		[CFG_LOGLEVEL] = "LEVEL",
	};

	return k->metavar ?: by_type[k->type];
}

/* Each setting as an option with what it takes, then where it goes in the
 * file: the option is the key's name unless two sections share a key. */
void config_help(FILE *f)
{
	for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
		const struct config_key *k = &keys[i];
		char opt[96];

		snprintf(opt, sizeof(opt), "--%s=%s", k->option ?: k->key, metavar(k));
		fprintf(f, "  %-34s [%s] %s: %s\n", opt, k->section, k->key, k->help);
	}
}

int config_socket_group(const struct daemon_config *cfg, gid_t *ret)
{
	char buf[4096], *end;
	struct group gr, *found = NULL;
	unsigned long v;

	*ret = (gid_t)-1;
	if (!cfg->socket_group || !cfg->socket_group[0])
		return 0;
	errno = 0;
	v = strtoul(cfg->socket_group, &end, 10);
	if (!*end && !errno && v < (gid_t)-1) {
		*ret = (gid_t)v;
		return 0;
	}
	if (getgrnam_r(cfg->socket_group, &gr, buf, sizeof(buf), &found) != 0 || !found)
		return -ENOENT;
	*ret = found->gr_gid;
	return 0;
}

/*
 * The socket the daemon will create, in force from here on (--print-config
 * shows it): the configured path, else the default for this environment.
 * Not root and no XDG_RUNTIME_DIR: there is no default, and the error is
 * one line that says what to give. A socket systemd passes (activation)
 * wins over both (ipc/server.c).
 */
static int resolve_socket(struct daemon_config *cfg, char *err, size_t size)
{
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int r;

	if (cfg->socket_path)
		return 0;
	r = sockpath_server_default(path, sizeof(path));
	/* Socket activation: the socket systemd passes needs no path here. */
	if (r == -ENXIO && getenv("LISTEN_FDS"))
		return 0;
	if (r == -ENXIO)
		return fail(err, size,
			    "no socket path: not root and XDG_RUNTIME_DIR is not set; "
			    "give one with --socket=PATH (or set RDMAMEM_SOCKET)");
	if (r < 0)
		return fail(err, size,
			    "the default socket path is too long; give one with "
			    "--socket=PATH");
	cfg->socket_path = strdup(path);
	return cfg->socket_path ? 0 : -ENOMEM;
}

int config_from_args(int argc, char **argv, struct daemon_config *cfg, const char **ret_path,
		     enum config_action *ret_action, char *err, size_t size)
{
	enum {
		ARG_CONFIG = 0x100,
		ARG_NO_CONFIG,
		ARG_CHECK_CONFIG,
		ARG_PRINT_CONFIG,
		ARG_VERSION,
	};
	struct option opts[ELEMENTSOF(keys) + 8];
	bool listed[ELEMENTSOF(keys)] = {};
	enum config_action action = CONFIG_RUN;
	const char *path = NULL;
	bool no_file = false;
	size_t n;
	int c, r;

	n = config_options(opts, ELEMENTSOF(keys) + 1);
	opts[n++] = (struct option){ "config", required_argument, NULL, ARG_CONFIG };
	opts[n++] = (struct option){ "no-config", no_argument, NULL, ARG_NO_CONFIG };
	opts[n++] = (struct option){ "check-config", no_argument, NULL, ARG_CHECK_CONFIG };
	opts[n++] = (struct option){ "print-config", no_argument, NULL, ARG_PRINT_CONFIG };
	opts[n++] = (struct option){ "debug", no_argument, NULL, 'd' };
	opts[n++] = (struct option){ "help", no_argument, NULL, 'h' };
	opts[n++] = (struct option){ "version", no_argument, NULL, ARG_VERSION };
	opts[n] = (struct option){};

	/* First pass: which file, and what to do. */
	opterr = 0;
	optind = 0;
	while ((c = getopt_long(argc, argv, "s:dh", opts, NULL)) >= 0) {
		if (c == ARG_CONFIG)
			path = optarg;
		else if (c == ARG_NO_CONFIG)
			no_file = true;
		else if (c == ARG_CHECK_CONFIG)
			action = CONFIG_CHECK;
		else if (c == ARG_PRINT_CONFIG)
			action = CONFIG_PRINT;
		else if (c == 'h')
			action = CONFIG_HELP;
		else if (c == ARG_VERSION)
			action = CONFIG_VERSION;
		else if (c == '?')
			return fail(err, size, "unknown option '%s' (try --help)",
				    argv[optind - 1]);
	}
	if (optind < argc)
		return fail(err, size, "unexpected argument '%s'", argv[optind]);
	if (path && no_file)
		return fail(err, size, "--config and --no-config: give one of them");
	*ret_action = action;
	if (action == CONFIG_HELP || action == CONFIG_VERSION)
		return 0;

	daemon_config_init(cfg);
	if (path) {
		r = config_load_file(cfg, path, err, size);
		if (r < 0)
			return r == -ENOMEM ? r : -EINVAL;
	} else if (no_file) {
		/* Defaults and the command line alone: what the tests run with,
		 * whatever an administrator put in the installed file. */
	} else if (config_load_file(cfg, CONFIG_DEFAULT_PATH, err, size) == 0) {
		path = CONFIG_DEFAULT_PATH;
	} else if (access(CONFIG_DEFAULT_PATH, F_OK) == 0) {
		/* There, but wrong: say so rather than run with defaults. */
		return -EINVAL;
	}
	*ret_path = path;

	/* Second pass: the command line overrides the file. */
	optind = 0;
	while ((c = getopt_long(argc, argv, "s:dh", opts, NULL)) >= 0) {
		int i = c - CONFIG_OPTION_BASE;

		if (c == 's')
			r = config_set(cfg, "daemon", "socket", optarg, err, size);
		else if (c == 'd')
			r = config_set(cfg, "daemon", "log-level", "debug", err, size);
		else if (i >= 0 && (size_t)i < ELEMENTSOF(keys)) {
			/* The first use of a list option replaces the file's list. */
			if (keys[i].type == CFG_LIST && !listed[i]) {
				*FIELD(cfg, &keys[i], char **) =
					strv_free(*FIELD(cfg, &keys[i], char **));
				listed[i] = true;
			}
			r = config_set_option(cfg, i, optarg, err, size);
		} else
			r = 0;
		if (r < 0) {
			char msg[256];

			snprintf(msg, sizeof(msg), "%s", err);
			fail(err, size, "%s: %s", argv[optind - 1], msg);
			return r;
		}
	}
	r = config_socket_group(cfg, &(gid_t){ 0 });
	if (r < 0)
		return fail(err, size, "socket-group '%s': no such group", cfg->socket_group);
	r = resolve_socket(cfg, err, size);
	/* Only a daemon that runs needs one: --print-config shows the gap. */
	return r == -EINVAL && action != CONFIG_RUN ? 0 : r;
}
