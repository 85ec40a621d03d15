/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The daemon as a whole: it composes the subsystems' contexts. Only main.c
 * (and tests that run a whole daemon) include this. Everything here runs on
 * the loop thread.
 */
#ifndef RDMAMEMD_DAEMON_H
#define RDMAMEMD_DAEMON_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <uv.h>

#include "daemon/core/account.h"
#include "daemon/core/core.h"
#include "daemon/gpu/gpu.h"
#include "daemon/core/offload.h"
#include "daemon/rdma/rdma.h"
#include "daemon/remote/remote.h"
#include "daemon/mem/keep.h"
#include "daemon/mem/region.h"
#include "daemon/rpc/rpc.h"

struct server;

/*
 * The composition: the core every subsystem shares, each subsystem's own
 * context (each module takes its own, never this), and what only the
 * daemon as a process has (signals, timers, systemd). Teardown runs the
 * other way: the server (and with it every connection and session, so
 * every region, lease, token and remote connection), then the devices (PDs,
 * then contexts), then the registries.
 */
struct daemon {
	struct core core;
	struct account_table accounts;  /* core.accounts points here */
	struct offload offload;         /* core.offload points here */
	struct region_registry regions; /* mem */
	struct keep_ctx keep;           /* regions kept across a restart */
	struct fdstore *fdstore;        /* systemd's store, for keep; NULL: none */
	struct rdma_ctx rdma;
	struct remote_ctx remote; /* remote handles, plans, export ids */
	struct gpu_ctx gpu;
	struct server *server;             /* ipc */
	struct metrics_http *metrics_http; /* metrics-listen; NULL when not set */
	struct rpc_ctx rpc;                /* pointers to the above, for the handlers */

	/* How the configuration was made, to make it again on SIGHUP. */
	int argc;
	char **argv;
	const char *config_path; /* NULL: none was read */

	int signal_fd; /* signalfd: SIGTERM, SIGINT, SIGHUP */
	uv_poll_t signal_poll;
	uv_timer_t tick; /* housekeeping once a second */
	uv_timer_t drain_timer;
	uv_timer_t watchdog; /* WATCHDOG=1 when WatchdogSec= is set */

	bool under_systemd;    /* NOTIFY_SOCKET was set */
	char status_sent[256]; /* last STATUS= line, to skip repeats */
};

int daemon_new(const struct daemon_config *cfg, struct daemon **ret);
int daemon_run(struct daemon *d);
struct daemon *daemon_free(struct daemon *d);

/* Begins an orderly shutdown: stop accepting, drain, close, exit the loop. */
void daemon_shutdown(struct daemon *d, const char *why);

/* During shutdown: once every connection is gone, let the loop end. */
void daemon_check_drained(struct daemon *d);

#endif
