/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libmicrohttpd driven from the daemon's loop.
 *
 * Why in the loop and not in a thread of MHD's own: the text is read from
 * the loop's counters (metrics.h), which have no lock, and giving them one
 * would make the data path wait on scrapes. A thread would have to ask the
 * loop for the text (a uv_async and a wait), so the loop does the same work
 * either way, and the thread adds a handoff. Here MHD runs without threads
 * (no MHD_USE_INTERNAL_POLLING_THREAD) on its own epoll set: that one fd is
 * a uv_poll, its timeouts a uv_timer, and MHD_run() never blocks (it waits
 * on that epoll with a zero timeout). A scrape costs the loop the text's
 * making (about the same as a GetStats) and MHD's parse and send, on a
 * non-blocking socket; a slow or idle scraper costs nothing but its fd, and
 * at most METRICS_HTTP_CONNECTIONS are taken at once.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "daemon/core/log.h"
#include "daemon/core/netaddr.h"
#include "daemon/ipc/metrics_http.h"
#include "daemon/rpc/metrics.h"
#include "daemon/rpc/rpc.h"
#include "util/macro.h"

/* Scrapers are few: a Prometheus or two, an operator's curl. */
#define METRICS_HTTP_CONNECTIONS 16U
/* Seconds an HTTP connection may sit idle before MHD closes it. */
#define METRICS_HTTP_IDLE_SEC 10U

struct metrics_http {
	const struct rpc_ctx *ctx;
	struct MHD_Daemon *mhd;
	uv_poll_t poll;   /* MHD's epoll fd */
	uv_timer_t timer; /* MHD_get_timeout() */
	unsigned n_open;  /* handles not closed yet */
};

static void on_timer(uv_timer_t *t);

/* MHD's work until it would block, then its next deadline. */
static void mh_run(struct metrics_http *h)
{
	MHD_UNSIGNED_LONG_LONG ms;

	MHD_run(h->mhd);
	if (MHD_get_timeout(h->mhd, &ms) == MHD_YES)
		uv_timer_start(&h->timer, on_timer, ms, 0);
	else
		uv_timer_stop(&h->timer);
}

static void on_poll(uv_poll_t *p, int status, int events)
{
	(void)status;
	(void)events;
	mh_run(p->data);
}

static void on_timer(uv_timer_t *t)
{
	mh_run(t->data);
}

static enum MHD_Result respond(struct MHD_Connection *conn, unsigned code, char *text, size_t len,
			       enum MHD_ResponseMemoryMode mode, const char *type)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(len, text, mode);
	enum MHD_Result r;

	if (!resp) {
		if (mode == MHD_RESPMEM_MUST_FREE)
			free(text);
		return MHD_NO;
	}
	if (MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type) != MHD_YES) {
		MHD_destroy_response(resp);
		return MHD_NO;
	}
	r = MHD_queue_response(conn, code, resp);
	MHD_destroy_response(resp);
	return r;
}

/* A GET carries no body: MHD calls this once per request, and the answer
 * goes at once. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version, const char *upload_data,
				  size_t *upload_data_size, void **con_cls)
{
	static char not_found[] = "Not found: the metrics are at /metrics\n";
	static char not_allowed[] = "Only GET and HEAD\n";
	struct metrics_http *h = cls;
	enum metrics_format format = METRICS_PROMETHEUS;
	const char *accept;
	char *text;
	size_t len;

	(void)version;
	(void)upload_data;
	(void)con_cls;
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return respond(conn, MHD_HTTP_METHOD_NOT_ALLOWED, not_allowed,
			       sizeof(not_allowed) - 1, MHD_RESPMEM_PERSISTENT, "text/plain");
	if (*upload_data_size)
		return MHD_NO;
	if (strcmp(url, "/metrics") != 0)
		return respond(conn, MHD_HTTP_NOT_FOUND, not_found, sizeof(not_found) - 1,
			       MHD_RESPMEM_PERSISTENT, "text/plain");
	/* Prometheus asks for OpenMetrics first when it reads it. */
	accept = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
	if (accept && strstr(accept, "application/openmetrics-text"))
		format = METRICS_OPENMETRICS;
	if (metrics_text(h->ctx, format, METRICS_ALL_UIDS, &text, &len) < 0)
		return MHD_NO;
	return respond(conn, MHD_HTTP_OK, text, len, MHD_RESPMEM_MUST_FREE,
		       metrics_content_type(format));
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	char buf[256];

	(void)cls;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	buf[strcspn(buf, "\n")] = '\0';
	log_notice("Metrics endpoint: %s", buf);
}

/* The listening socket is ours: made CLOEXEC, from the daemon's own
 * address syntax, then handed to MHD (which closes it when stopped). */
static int listen_on(const char *address, int *ret_fd)
{
	struct sockaddr_storage ss;
	int fd, one = 1, r;

	r = netaddr_parse_address(address, &ss);
	if (r < 0)
		return r;
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&ss,
		 ss.ss_family == AF_INET ? sizeof(struct sockaddr_in) :
					   sizeof(struct sockaddr_in6)) < 0 ||
	    listen(fd, METRICS_HTTP_CONNECTIONS) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	*ret_fd = fd;
	return 0;
}

static void on_closed(uv_handle_t *handle)
{
	struct metrics_http *h = handle->data;

	if (--h->n_open == 0)
		free(h);
}

int metrics_http_new(uv_loop_t *loop, const struct rpc_ctx *ctx, const char *address,
		     struct metrics_http **ret)
{
	const union MHD_DaemonInfo *info;
	struct metrics_http *h;
	int fd = -1, r;

	r = listen_on(address, &fd);
	if (r < 0)
		return log_error_errno(r, "Cannot listen for metrics on %s: %m", address);
	h = calloc(1, sizeof(*h));
	if (!h) {
		close(fd);
		return -ENOMEM;
	}
	h->ctx = ctx;
	/* The logger first: MHD says so, else it may print some on its own. */
	h->mhd = MHD_start_daemon(MHD_USE_EPOLL | MHD_USE_ERROR_LOG, 0, NULL, NULL, on_request, h,
				  MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, h,
				  MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT,
				  METRICS_HTTP_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT,
				  METRICS_HTTP_IDLE_SEC, MHD_OPTION_END);
	info = h->mhd ? MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_EPOLL_FD) : NULL;
	if (!info) {
		if (h->mhd)
			MHD_stop_daemon(h->mhd);
		else
			close(fd);
		free(h);
		return log_error_errno(-EIO, "Cannot start the metrics endpoint on %s", address);
	}
	r = uv_poll_init(loop, &h->poll, info->epoll_fd);
	if (r < 0) {
		MHD_stop_daemon(h->mhd);
		free(h);
		return log_error_errno(-EIO, "Cannot watch the metrics endpoint: %s",
				       uv_strerror(r));
	}
	uv_timer_init(loop, &h->timer);
	h->poll.data = h->timer.data = h;
	h->n_open = 2;
	uv_poll_start(&h->poll, UV_READABLE, on_poll);
	log_info("Serving metrics on http://%s/metrics", address);
	*ret = h;
	return 0;
}

void metrics_http_stop(struct metrics_http *h)
{
	if (!h)
		return;
	/* The poll goes before MHD closes the fd it watches. */
	uv_close((uv_handle_t *)&h->poll, on_closed);
	uv_close((uv_handle_t *)&h->timer, on_closed);
	MHD_stop_daemon(h->mhd);
	h->mhd = NULL;
}
