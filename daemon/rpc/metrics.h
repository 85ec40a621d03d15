/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The node's metrics as text: what GetStatus, GetStats, ListDevices and
 * ListLinks count, read from the same counters, for GetMetrics (rdmamemctl
 * metrics) and the HTTP endpoint (ipc/metrics_http.c). Loop only: the
 * counters are the loop's, so reading them takes no lock and the data path
 * never waits on a scrape.
 *
 * The cost does not grow with the regions: every family is a counter the
 * model keeps up to date, or a walk of uids, devices or links (a few).
 */
#ifndef RDMAMEMD_METRICS_H
#define RDMAMEMD_METRICS_H

#include <stddef.h>
#include <sys/types.h>

struct rpc_ctx;

enum metrics_format {
	/* OpenMetrics 1.0 (application/openmetrics-text; version=1.0.0): a
	 * counter's family is named without _total, the text ends in # EOF. */
	METRICS_OPENMETRICS,
	/* Prometheus text 0.0.4 (text/plain; version=0.0.4), what promtool
	 * check metrics reads: a counter's family is its sample's name. */
	METRICS_PROMETHEUS,
};

/* Every uid's series; otherwise only those of the uid given. */
#define METRICS_ALL_UIDS ((uid_t)-1)

/* The text, NUL-terminated, in *ret (free()) and its length; -ENOMEM. */
int metrics_text(const struct rpc_ctx *ctx, enum metrics_format format, uid_t only_uid, char **ret,
		 size_t *ret_len);

/* The Content-Type of format's text. */
const char *metrics_content_type(enum metrics_format format);

#endif
