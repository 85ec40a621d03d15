/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "daemon/core/account.h"
#include "daemon/core/json_arena.h"
#include "daemon/ipc/conn.h"
#include "daemon/ipc/metrics_http.h"
#include "daemon/daemon.h"
#include "daemon/fdstore.h"
#include "daemon/rdma/device.h"
#include "daemon/rdma/endpoint.h"
#include "daemon/mem/lease.h"
#include "daemon/core/log.h"
#include "daemon/mem/region.h"
#include "daemon/ipc/server.h"
#include "daemon/rdma/token.h"
#include "daemon/remote/notify.h"
#include "daemon/remote/plan.h"
#include "daemon/remote/transfer.h"
#include "daemon/rpc/rpc_rdma.h"

#define DAEMON_TICK_MSEC 1000U
/* Slots for small requests' trees (json_arena.h): 32 MiB of address space;
 * past that many calls at once, requests parse on the heap. */
#define DAEMON_JSON_SLOTS 4096U

/* Sent from the tick, so a burst of connections costs one datagram. */
static void daemon_send_status(struct daemon *d)
{
	char status[sizeof(d->status_sent)];

	if (!d->under_systemd || d->core.shutting_down)
		return;
	snprintf(status, sizeof(status),
		 "STATUS=Serving %u clients, %" PRIu64 " regions, %" PRIu64 " bytes pinned",
		 d->server->n_conns, d->regions.n_regions, d->regions.pinned_bytes);
	if (strcmp(status, d->status_sent) == 0)
		return;
	sd_notify(0, status);
	memcpy(d->status_sent, status, sizeof(status));
}

/* The watchdog pings come from the loop itself: a loop stuck for longer than
 * WatchdogSec= gets the daemon restarted. */
static void on_watchdog(uv_timer_t *t)
{
	(void)t;
	sd_notify(0, "WATCHDOG=1");
}

static void on_tick(uv_timer_t *t)
{
	struct daemon *d = t->data;
	uint64_t now = uv_now(d->core.loop);
	struct conn *c, *n;

	list_for_each_entry_safe(c, n, &d->server->conns, link)
		conn_tick(c, now);
	daemon_send_status(d);
}

static void on_restart_needed(const char *name, void *userdata)
{
	(void)userdata;
	log_notice("Reload: %s changed, but takes effect only after a restart; keeping the "
		   "running value",
		   name);
}

/*
 * SIGHUP: the configuration is made again from the same file and command
 * line; what may change under connected clients is applied (limits, log
 * level, the allowed networks), the rest is named and kept.
 */
static void daemon_reload(struct daemon *d)
{
	struct daemon_config fresh;
	enum config_action action;
	const char *path = NULL;
	char err[512], msg[128];
	struct timespec ts;
	int r;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	snprintf(msg, sizeof(msg),
		 "RELOADING=1\nSTATUS=Reloading configuration\nMONOTONIC_USEC=%llu",
		 (unsigned long long)ts.tv_sec * 1000000ULL +
			 (unsigned long long)ts.tv_nsec / 1000);
	sd_notify(0, msg);

	r = config_from_args(d->argc, d->argv, &fresh, &path, &action, err, sizeof(err));
	if (r < 0) {
		log_error("Reload failed, keeping the running configuration: %s", err);
	} else {
		r = config_apply_reload(&d->core.cfg, &fresh, on_restart_needed, NULL);
		log_set_max_level(d->core.cfg.log_level);
		endpoint_reload(&d->rdma);
		/* Larger budgets let waiting connections go on. */
		for (unsigned k = 0; k < BUDGET_KINDS; k++)
			budget_freed(&d->server->budgets[k]);
		log_info("Configuration reloaded from %s: %d settings changed", path ?: "defaults",
			 r);
	}
	daemon_config_done(&fresh);
	sd_notify(0, "READY=1");
	d->status_sent[0] = '\0';
	daemon_send_status(d);
}

static void on_signal(uv_poll_t *h, int status, int events)
{
	struct daemon *d = h->data;
	struct signalfd_siginfo si;

	(void)status;
	(void)events;
	while (read(d->signal_fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGHUP) {
			if (!d->core.shutting_down)
				daemon_reload(d);
			continue;
		}
		daemon_shutdown(d, strsignal((int)si.ssi_signo));
	}
}

void daemon_check_drained(struct daemon *d)
{
	if (!d->core.shutting_down || !list_empty(&d->server->conns))
		return;
	/* Closing the last handles lets uv_run() return. */
	core_close_handle((uv_handle_t *)&d->signal_poll);
	core_close_handle((uv_handle_t *)&d->tick);
	core_close_handle((uv_handle_t *)&d->drain_timer);
	core_close_handle((uv_handle_t *)&d->watchdog);
	server_stop_handles(d->server);
	keep_stop(&d->keep);
	d->fdstore = fdstore_free(d->fdstore);
	region_registry_stop(&d->regions);
	/* After the regions: a GPU's context goes with the last of them. */
	gpu_ctx_stop(&d->gpu);
}

static void on_server_drained(void *userdata)
{
	daemon_check_drained(userdata);
}

static void on_drain_timeout(uv_timer_t *t)
{
	struct daemon *d = t->data;
	struct conn *c, *n;

	log_warning("Calls still running after %ums, closing %u connections",
		    d->core.cfg.drain_timeout_ms, d->server->n_conns + d->server->n_rejected);
	list_for_each_entry_safe(c, n, &d->server->conns, link)
		conn_close(c);
}

void daemon_shutdown(struct daemon *d, const char *why)
{
	struct conn *c, *n;

	if (d->core.shutting_down)
		return;
	d->core.shutting_down = true;
	log_info("Shutting down (%s)", why);
	sd_notify(0, "STOPPING=1\nSTATUS=Shutting down");
	/* Before any owner disconnects: the regions stay in the fd store for
	 * the next process, and those nobody reclaimed yet go (they stay
	 * there too). */
	keep_freeze(&d->keep);

	server_stop_listening(d->server);
	metrics_http_stop(d->metrics_http);
	d->metrics_http = NULL;
	/* Our own queue pairs to other daemons first: transfers in flight end
	 * (posted work flushes), before the devices under them stop. */
	link_pool_stop(&d->remote.links);
	/* Remote peers lose their queue pairs now: the memory behind them is
	 * about to go. */
	endpoint_stop(&d->rdma);
	devices_stop(&d->rdma);
	uv_timer_start(&d->drain_timer, on_drain_timeout, d->core.cfg.drain_timeout_ms, 0);
	list_for_each_entry_safe(c, n, &d->server->conns, link)
		conn_drain(c);
	daemon_check_drained(d);
}

/*
 * SIGTERM, SIGINT and SIGHUP are read from a signalfd in the loop, as
 * sd-event does, not caught by a handler: nothing runs in signal context,
 * and a signal that arrives at any moment is simply readable (ThreadSanitizer,
 * which defers handlers to its own safe points, lost one that came between
 * READY=1 and the first epoll_wait). Blocked here, before the loop starts
 * any thread, so every thread inherits the mask and none takes them.
 */
static int daemon_start_signals(struct daemon *d)
{
	sigset_t set;
	int r;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	r = pthread_sigmask(SIG_BLOCK, &set, NULL);
	if (r)
		return -r;
	d->signal_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (d->signal_fd < 0)
		return -errno;
	if (uv_poll_init(d->core.loop, &d->signal_poll, d->signal_fd) < 0)
		return -ENOMEM;
	d->signal_poll.data = d;
	return uv_poll_start(&d->signal_poll, UV_READABLE, on_signal) < 0 ? -EINVAL : 0;
}

/* The signals stay blocked: one that comes while the process winds down
 * must not end it with a signal's status instead of 0. */
static void daemon_stop_signals(struct daemon *d)
{
	if (d->signal_fd >= 0)
		close(d->signal_fd);
	d->signal_fd = -1;
}

static void on_regions_restored(void *userdata)
{
	struct daemon *d = userdata;

	log_info("Fd store: restored GPU regions are back; taking clients");
	server_hold(d->server, false);
}

int daemon_new(const struct daemon_config *cfg, struct daemon **ret)
{
	struct fdstore_passed passed = { .socket = -1 };
	struct daemon *d;
	int r;

	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->core.cfg = *cfg;
	account_table_init(&d->accounts);
	d->core.accounts = &d->accounts;
	d->core.offload = &d->offload;
	d->under_systemd = getenv("NOTIFY_SOCKET") != NULL;
	d->signal_fd = -1;

	d->core.loop = malloc(sizeof(*d->core.loop));
	if (!d->core.loop || uv_loop_init(d->core.loop) < 0) {
		free(d->core.loop);
		free(d);
		return -ENOMEM;
	}
	d->core.start_msec = uv_now(d->core.loop);
	/* Before any other thread uses cJSON; for the process's life (a test
	 * or the fuzzer may make several daemons). */
	r = json_arena_setup(DAEMON_JSON_SLOTS);
	if (r < 0 && r != -EALREADY)
		log_warning_errno(r, "Requests are parsed on the heap: no slots for them: %m");
	offload_init(&d->offload, d->core.loop);

	/* The subsystems, each with its own context; the session's drop hooks
	 * register with them. */
	region_registry_init(&d->regions, &d->core);
	lease_registry_init(&d->regions);
	d->rdma.core = &d->core;
	list_init(&d->rdma.devices);
	list_init(&d->rdma.listeners);
	endpoint_init(&d->rdma);
	token_registry_init(&d->rdma);
	remote_ctx_init(&d->remote, &d->core, &d->rdma);
	plan_init(&d->remote);
	notify_init(&d->remote.notify, &d->rdma);
	link_pool_init(&d->remote.links, d->core.loop,
		       &(struct link_pool_config){
			       .window = d->core.cfg.transfer_window,
			       .idle_sec = d->core.cfg.link_idle_sec,
			       .ack_timeout = d->core.cfg.link_ack_timeout,
			       .stall_sec = d->core.cfg.link_stall_sec,
			       .max_links = d->core.cfg.max_links,
			       .max_links_per_uid = d->core.cfg.max_links_per_uid,
		       });
	transfer_engine_init(&d->remote, &d->regions);
	gpu_ctx_init(&d->gpu, d->core.loop, &d->regions,
		     d->core.cfg.gpu_context_linger_sec * 1000U);
	d->rpc = (struct rpc_ctx){
		.core = &d->core,
		.regions = &d->regions,
		.rdma = &d->rdma,
		.remote = &d->remote,
		.gpu = &d->gpu,
	};

	/* The store of a service manager that says it has one ($FDSTORE);
	 * without it the passed files are still restored, or dropped. */
	if (d->under_systemd && fdstore_new(d->core.loop, &d->fdstore) < 0)
		log_warning("NOTIFY_SOCKET names no Unix socket: regions are not kept across "
			    "restarts");
	keep_init(&d->keep, &d->regions, d->fdstore ? &fdstore_ops : NULL, d->fdstore,
		  d->core.cfg.reclaim_grace_sec ? fdstore_max() : 0);
	rpc_keep_init(&d->rpc);
	r = fdstore_take(d->fdstore, &passed);
	if (r < 0)
		goto fail;
	r = server_new(&d->core, &d->rpc, passed.socket, &d->server);
	if (r < 0)
		goto fail;
	passed.socket = -1; /* the server's now */
	d->rpc.server_ops = &server_rpc_ops;
	d->rpc.server = d->server;
	d->server->drained = on_server_drained;
	d->server->drained_userdata = d;
	r = devices_open(&d->rdma);
	if (r < 0)
		goto fail;
	/* Once the devices are open: the regions register on them again. */
	keep_restore(&d->keep, passed.stored, passed.n_stored, d->core.cfg.reclaim_grace_sec);
	fdstore_passed_done(&passed);
	/* GPU regions come back on the pool: their owners' Reclaims wait in
	 * the socket's backlog until they are there. */
	if (keep_restoring(&d->keep)) {
		server_hold(d->server, true);
		d->keep.on_restored = on_regions_restored;
		d->keep.on_restored_data = d;
	}
	if (d->core.cfg.metrics_listen) {
		r = metrics_http_new(d->core.loop, &d->rpc, d->core.cfg.metrics_listen,
				     &d->metrics_http);
		if (r < 0)
			goto fail;
	}
	r = endpoint_start(&d->rdma);
	if (r < 0)
		goto fail;

	r = daemon_start_signals(d);
	if (r < 0) {
		log_error_errno(r, "Cannot take SIGTERM, SIGINT and SIGHUP: %m");
		goto fail;
	}
	/* Not before the signals are blocked: the first job starts libuv's pool
	 * threads, which inherit the mask; one that did not block SIGTERM would
	 * take it with its default action. */
	if (d->core.cfg.bandwidth_probe_size)
		membw_start(&d->regions.membw, &d->offload, d->core.cfg.bandwidth_probe_size);
	uv_timer_init(d->core.loop, &d->tick);
	d->tick.data = d;
	uv_timer_start(&d->tick, on_tick, DAEMON_TICK_MSEC, DAEMON_TICK_MSEC);
	uv_timer_init(d->core.loop, &d->drain_timer);
	d->drain_timer.data = d;
	{
		uint64_t usec = 0;

		if (sd_watchdog_enabled(0, &usec) > 0 && usec >= 2000) {
			uv_timer_init(d->core.loop, &d->watchdog);
			uv_timer_start(&d->watchdog, on_watchdog, usec / 2000, usec / 2000);
			log_debug("Watchdog: pinging systemd every %" PRIu64 " ms", usec / 2000);
		}
	}

	*ret = d;
	return 0;

fail:
	/* Nothing ran yet: closing the handles and running the loop once
	 * releases them. */
	fdstore_passed_done(&passed);
	keep_freeze(&d->keep);
	keep_stop(&d->keep);
	d->fdstore = fdstore_free(d->fdstore);
	if (d->server) {
		server_stop_listening(d->server);
		server_stop_handles(d->server);
	}
	metrics_http_stop(d->metrics_http);
	d->metrics_http = NULL;
	link_pool_stop(&d->remote.links);
	endpoint_stop(&d->rdma);
	devices_stop(&d->rdma);
	core_close_handle((uv_handle_t *)&d->signal_poll);
	region_registry_stop(&d->regions);
	/* Restored GPU regions may have had their context kept already. */
	gpu_ctx_stop(&d->gpu);
	uv_run(d->core.loop, UV_RUN_DEFAULT);
	daemon_free(d);
	return r;
}

int daemon_run(struct daemon *d)
{
	char ready[128];

	snprintf(ready, sizeof(ready), "READY=1\nSTATUS=Listening on %s", d->server->path);
	sd_notify(0, ready);
	log_info("rdmamemd " RDMAMEMD_VERSION " ready (pid %d)", (int)getpid());

	uv_run(d->core.loop, UV_RUN_DEFAULT);
	log_info("Stopped");
	return 0;
}

struct daemon *daemon_free(struct daemon *d)
{
	int r;

	if (!d)
		return NULL;
	server_free(d->server);
	/* link_pool_stop() ran and the loop after it: no link is left unless
	 * a reference leaked, which would keep a QP in a PD freed below. */
	if (link_pool_done(&d->remote.links) < 0)
		log_warning("%u queue pairs to other daemons left at exit",
			    d->remote.links.n_links);
	/* Every region (and so every MR) and QP is gone: PDs, then contexts. */
	devices_free(&d->rdma);
	region_registry_done(&d->regions);
	lease_registry_done(&d->regions);
	remote_ctx_done(&d->remote);
	token_registry_done(&d->rdma);
	account_table_done(&d->accounts);
	if (d->core.loop) {
		r = uv_loop_close(d->core.loop);
		if (r < 0)
			log_warning("Event loop closed with handles open: %s", uv_strerror(r));
		free(d->core.loop);
	}
	daemon_stop_signals(d);
	daemon_config_done(&d->core.cfg);
	counters_done(&d->core.stats.calls);
	counters_done(&d->core.stats.errors);
	free(d);
	return NULL;
}
