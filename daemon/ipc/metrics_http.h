/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The metrics over HTTP (metrics-listen): GET /metrics answers the text
 * GetMetrics makes, every uid's series, OpenMetrics when the scraper asks
 * for it (Accept: application/openmetrics-text), the Prometheus text format
 * otherwise. libmicrohttpd runs inside the daemon's loop, without a thread
 * of its own: see metrics_http.c for why. Loop only.
 */
#ifndef RDMAMEMD_METRICS_HTTP_H
#define RDMAMEMD_METRICS_HTTP_H

#include <uv.h>

struct rpc_ctx;
struct metrics_http;

/* Listens on address ("ADDR:PORT", "[ADDR6]:PORT"); the text comes from
 * ctx's counters. -errno (logged) when it cannot listen. */
int metrics_http_new(uv_loop_t *loop, const struct rpc_ctx *ctx, const char *address,
		     struct metrics_http **ret);
/* Stops listening and serving, drops every scrape in progress, and frees h
 * once the loop has closed its handles. NULL is fine. */
void metrics_http_stop(struct metrics_http *h);

#endif
