/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "account.h"
#include "conn.h"
#include "device.h"
#include "endpoint.h"
#include "lease.h"
#include "region.h"
#include "daemon.h"
#include "log.h"
#include "server.h"

#define DAEMON_TICK_MSEC 1000U

/* Half of physical memory: pinning more than that for one user starves
 * everyone else. */
static uint64_t daemon_default_pinned_max(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);

	if (pages <= 0 || size <= 0)
		return UINT64_C(1) << 40;
	return (uint64_t)pages * (uint64_t)size / 2;
}

void daemon_config_init(struct daemon_config *cfg)
{
	*cfg = (struct daemon_config){
		.socket_mode = 0660,
		.max_connections = 4096,
		.max_connections_per_uid = 1024,
		.output_max = 8U * 1024U * 1024U,
		.output_stall_sec = 30,
		.drain_timeout_ms = 5000,
		.max_regions_per_uid = 16384,
		.max_pinned_bytes_per_uid = daemon_default_pinned_max(),
		.read_inline_max = 4U * 1024U * 1024U,
		.max_rdma_connections = 1024,
		.log_level = LOG_INFO,
	};
}

static char **strv_free(char **v)
{
	for (char **p = v; p && *p; p++)
		free(*p);
	free(v);
	return NULL;
}

void daemon_config_done(struct daemon_config *cfg)
{
	free(cfg->socket_path);
	cfg->socket_path = NULL;
	cfg->devices_allow = strv_free(cfg->devices_allow);
	cfg->devices_deny = strv_free(cfg->devices_deny);
	cfg->rdmacm_listen = strv_free(cfg->rdmacm_listen);
	cfg->rdma_allow = strv_free(cfg->rdma_allow);
}

uint64_t daemon_uptime_msec(const struct daemon *d)
{
	return uv_now(d->loop) - d->start_msec;
}

/* Sent from the tick, so a burst of connections costs one datagram. */
static void daemon_send_status(struct daemon *d)
{
	char status[sizeof(d->status_sent)];

	if (!d->under_systemd || d->shutting_down)
		return;
	snprintf(status, sizeof(status),
		 "STATUS=Serving %u clients, %" PRIu64 " regions, %" PRIu64 " bytes pinned",
		 d->server->n_conns, d->n_regions, d->pinned_bytes);
	if (strcmp(status, d->status_sent) == 0)
		return;
	sd_notify(0, status);
	memcpy(d->status_sent, status, sizeof(status));
}

static void on_tick(uv_timer_t *t)
{
	struct daemon *d = t->data;
	uint64_t now = uv_now(d->loop);
	struct conn *c, *n;

	list_for_each_entry_safe(c, n, &d->server->conns, link)
		conn_tick(c, now);
	daemon_send_status(d);
}

static void on_signal(uv_signal_t *h, int signum)
{
	struct daemon *d = h->data;

	if (signum == SIGHUP) {
		log_info("SIGHUP received; this version has no configuration to reload");
		return;
	}
	daemon_shutdown(d, strsignal(signum));
}

static void close_handle(uv_handle_t *h)
{
	if (h->loop && !uv_is_closing(h))
		uv_close(h, NULL);
}

void daemon_check_drained(struct daemon *d)
{
	if (!d->shutting_down || !list_empty(&d->server->conns))
		return;
	/* Closing the last handles lets uv_run() return. */
	close_handle((uv_handle_t *)&d->sig_term);
	close_handle((uv_handle_t *)&d->sig_int);
	close_handle((uv_handle_t *)&d->sig_hup);
	close_handle((uv_handle_t *)&d->tick);
	close_handle((uv_handle_t *)&d->drain_timer);
	timeouts_close(&d->timeouts);
}

static void on_drain_timeout(uv_timer_t *t)
{
	struct daemon *d = t->data;
	struct conn *c, *n;

	log_warning("Calls still running after %ums, closing %u connections",
		    d->cfg.drain_timeout_ms, d->server->n_conns + d->server->n_rejected);
	list_for_each_entry_safe(c, n, &d->server->conns, link)
		conn_close(c);
}

void daemon_shutdown(struct daemon *d, const char *why)
{
	struct conn *c, *n;

	if (d->shutting_down)
		return;
	d->shutting_down = true;
	log_info("Shutting down (%s)", why);
	sd_notify(0, "STOPPING=1\nSTATUS=Shutting down");

	server_stop_listening(d->server);
	/* Remote peers lose their queue pairs now: the memory behind them is
	 * about to go. */
	endpoint_stop(d);
	devices_stop(d);
	uv_timer_start(&d->drain_timer, on_drain_timeout, d->cfg.drain_timeout_ms, 0);
	list_for_each_entry_safe(c, n, &d->server->conns, link)
		conn_drain(c);
	daemon_check_drained(d);
}

static int daemon_start_signal(struct daemon *d, uv_signal_t *h, int signum)
{
	int r;

	r = uv_signal_init(d->loop, h);
	if (r < 0)
		return -ENOMEM;
	h->data = d;
	return uv_signal_start(h, on_signal, signum) < 0 ? -EINVAL : 0;
}

int daemon_new(const struct daemon_config *cfg, struct daemon **ret)
{
	struct daemon *d;
	int r;

	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->cfg = *cfg;
	list_init(&d->accounts);
	list_init(&d->devices);
	list_init(&d->listeners);
	list_init(&d->rconns);
	list_init(&d->tokens);
	list_init(&d->gpu_ipcs);
	region_registry_init(d);
	lease_registry_init(d);
	d->under_systemd = getenv("NOTIFY_SOCKET") != NULL;

	d->loop = malloc(sizeof(*d->loop));
	if (!d->loop || uv_loop_init(d->loop) < 0) {
		free(d->loop);
		free(d);
		return -ENOMEM;
	}
	d->start_msec = uv_now(d->loop);
	timeouts_init(&d->timeouts, d->loop);

	r = server_new(d, &d->server);
	if (r < 0)
		goto fail;
	r = devices_open(d);
	if (r < 0)
		goto fail;
	r = endpoint_start(d);
	if (r < 0)
		goto fail;

	if (daemon_start_signal(d, &d->sig_term, SIGTERM) < 0 ||
	    daemon_start_signal(d, &d->sig_int, SIGINT) < 0 ||
	    daemon_start_signal(d, &d->sig_hup, SIGHUP) < 0) {
		r = log_error_errno(-EINVAL, "Cannot install signal handlers");
		goto fail;
	}
	uv_timer_init(d->loop, &d->tick);
	d->tick.data = d;
	uv_timer_start(&d->tick, on_tick, DAEMON_TICK_MSEC, DAEMON_TICK_MSEC);
	uv_timer_init(d->loop, &d->drain_timer);
	d->drain_timer.data = d;

	*ret = d;
	return 0;

fail:
	/* Nothing ran yet: closing the handles and running the loop once
	 * releases them. */
	if (d->server)
		server_stop_listening(d->server);
	endpoint_stop(d);
	devices_stop(d);
	close_handle((uv_handle_t *)&d->sig_term);
	close_handle((uv_handle_t *)&d->sig_int);
	close_handle((uv_handle_t *)&d->sig_hup);
	timeouts_close(&d->timeouts);
	uv_run(d->loop, UV_RUN_DEFAULT);
	daemon_free(d);
	return r;
}

int daemon_run(struct daemon *d)
{
	char ready[128];

	snprintf(ready, sizeof(ready), "READY=1\nSTATUS=Listening on %s", d->server->path);
	sd_notify(0, ready);
	log_info("rdmamemd " RDMAMEMD_VERSION " ready (pid %d)", (int)getpid());

	uv_run(d->loop, UV_RUN_DEFAULT);
	log_info("Stopped");
	return 0;
}

struct daemon *daemon_free(struct daemon *d)
{
	int r;

	if (!d)
		return NULL;
	server_free(d->server);
	/* Every region (and so every MR) and QP is gone: PDs, then contexts. */
	devices_free(d);
	region_registry_done(d);
	lease_registry_done(d);
	if (d->loop) {
		r = uv_loop_close(d->loop);
		if (r < 0)
			log_warning("Event loop closed with handles open: %s", uv_strerror(r));
		free(d->loop);
	}
	daemon_config_done(&d->cfg);
	free(d);
	return NULL;
}
