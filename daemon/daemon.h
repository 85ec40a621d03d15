/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The daemon as a whole: its loop, configuration and top-level objects.
 * Everything here runs on the loop thread.
 */
#ifndef RDMAMEMD_DAEMON_H
#define RDMAMEMD_DAEMON_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <uv.h>

#include "config.h"
#include "idmap.h"
#include "idseq.h"
#include "offload.h"
#include "proto/list.h"
#include "stats.h"
#include "timeout.h"
#include "token.h"

#define RDMAMEMD_VERSION "0.1.0"

/* fds the daemon holds for itself (sockets, signalfd, epoll, the loop's own,
 * rdmacm channels), and for each RDMA device it opens: a generous allowance,
 * for GetStatus's fds_needed. */
#define DAEMON_FDS_OWN 64U
#define DAEMON_FDS_PER_DEVICE 8U

struct server;
struct vb_device;


struct daemon {
	uv_loop_t *loop;
	struct daemon_config cfg;
	/* How the configuration was made, to make it again on SIGHUP. */
	int argc;
	char **argv;
	const char *config_path;	/* NULL: none was read */
	struct server *server;
	struct idmap accounts;		/* uid → struct account, while the uid has anything */

	struct idmap regions;		/* id → struct region, weak */
	struct idseq region_order;	/* the same regions by id, for ListRegions */
	uint64_t next_region_id;
	uint64_t n_regions;
	uint64_t pinned_bytes;
	struct idmap leases;		/* id → struct lease */
	uint64_t next_lease_id;
	struct timeouts timeouts;	/* lock-wait deadlines */

	struct list_head devices;	/* struct device */
	unsigned n_devices;
	struct vb_device **vb_devices;
	size_t n_vb_devices;
	struct list_head listeners;	/* struct listener (rdmacm) */
	struct list_head rconns;	/* struct rconn: remote peers' queue pairs */
	struct idseq rconn_order;	/* the same by id, for ListConnections */
	unsigned n_rconns;
	uint64_t next_rconn_id;
	struct token_registry tokens;
	struct allowed_network {
		struct sockaddr_storage addr;
		unsigned prefix;
	} *allow;
	size_t n_allow;
	uint64_t rdma_rejected;		/* connections refused: token, network, limit */

	struct stats stats;
	struct offload offload;		/* client-made CPU work on the pool */

	struct list_head gpu_ipcs;	/* struct gpu_ipc: open legacy IPC handles */
	unsigned gpu_regions[16];	/* live regions by GPU ordinal (GPU_LIST_MAX) */
	bool cuda_loaded;		/* the first GPU import loaded the driver */

	int signal_fd;			/* signalfd: SIGTERM, SIGINT, SIGHUP */
	uv_poll_t signal_poll;
	uv_timer_t tick;		/* housekeeping once a second */
	uv_timer_t drain_timer;
	uv_timer_t watchdog;		/* WATCHDOG=1 when WatchdogSec= is set */
	uint64_t start_msec;		/* uv_now() at start */

	bool under_systemd;		/* NOTIFY_SOCKET was set */
	bool shutting_down;
	char status_sent[256];		/* last STATUS= line, to skip repeats */
};

int daemon_new(const struct daemon_config *cfg, struct daemon **ret);
int daemon_run(struct daemon *d);
struct daemon *daemon_free(struct daemon *d);

/* Begins an orderly shutdown: stop accepting, drain, close, exit the loop. */
void daemon_shutdown(struct daemon *d, const char *why);

/* During shutdown: once every connection is gone, let the loop end. */
void daemon_check_drained(struct daemon *d);

/* Milliseconds since the daemon started. */
uint64_t daemon_uptime_msec(const struct daemon *d);

#endif
