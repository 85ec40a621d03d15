/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/core/account.h"
#include "daemon/core/core.h"
#include "daemon/core/offload.h"
#include "daemon/gpu/gpu.h"
#include "daemon/mem/keep.h"
#include "daemon/mem/region.h"
#include "daemon/rdma/device.h"
#include "daemon/rdma/rdma.h"
#include "daemon/remote/link.h"
#include "daemon/remote/remote.h"
#include "daemon/rpc/metrics.h"
#include "daemon/rpc/rpc.h"
#include "util/textbuf.h"

/* The text grows in one buffer; a failed append sticks (checked at the end). */
struct mtext {
	struct textbuf b;
	enum metrics_format format;
};

static void mt_printf(struct mtext *t, const char *fmt, ...) _printf_(2, 3);
static void mt_printf(struct mtext *t, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	textbuf_vprintf(&t->b, fmt, ap);
	va_end(ap);
}

/* A label value: backslash, double quote and newline escaped. Names here
 * (methods, errors, devices, addresses) have none, but a name is data. */
static void mt_label(struct mtext *t, const char *s)
{
	textbuf_reserve(&t->b, 2 * strlen(s) + 1);
	for (; !t->b.oom && *s; s++) {
		if (*s == '\\' || *s == '"' || *s == '\n') {
			t->b.p[t->b.len++] = '\\';
			t->b.p[t->b.len++] = *s == '\n' ? 'n' : *s;
		} else {
			t->b.p[t->b.len++] = *s;
		}
	}
	if (!t->b.oom)
		t->b.p[t->b.len] = '\0';
}

enum mtype { M_COUNTER, M_GAUGE, M_HISTOGRAM };

static const char *const mtype_name[] = { "counter", "gauge", "histogram" };

/*
 * A family's HELP and TYPE. OpenMetrics names a counter's family without
 * the _total its samples carry; Prometheus' text format names it with.
 */
static void mt_family(struct mtext *t, const char *name, enum mtype type, const char *help)
{
	const char *suffix = type == M_COUNTER && t->format == METRICS_PROMETHEUS ? "_total" : "";

	mt_printf(t, "# HELP rdmamemd_%s%s %s\n# TYPE rdmamemd_%s%s %s\n", name, suffix, help, name,
		  suffix, mtype_name[type]);
}

/* A family of one sample without labels. */
static void mt_one(struct mtext *t, const char *name, enum mtype type, const char *help, uint64_t v)
{
	mt_family(t, name, type, help);
	mt_printf(t, "rdmamemd_%s%s %" PRIu64 "\n", name, type == M_COUNTER ? "_total" : "", v);
}

/* One sample with one label. */
static void mt_sample1(struct mtext *t, const char *name, enum mtype type, const char *label,
		       const char *value, uint64_t v)
{
	mt_printf(t, "rdmamemd_%s%s{%s=\"", name, type == M_COUNTER ? "_total" : "", label);
	mt_label(t, value);
	mt_printf(t, "\"} %" PRIu64 "\n", v);
}

static void mt_counters(struct mtext *t, const char *name, const char *help, const char *label,
			const struct counters *c)
{
	mt_family(t, name, M_COUNTER, help);
	for (size_t i = 0; i < c->n; i++)
		mt_sample1(t, name, M_COUNTER, label, c->v[i].name, c->v[i].n);
}

/* Seconds from nanoseconds, exactly: 9 decimals. */
static void mt_seconds(struct mtext *t, uint64_t ns)
{
	mt_printf(t, "%" PRIu64 ".%09" PRIu64, ns / 1000000000, ns % 1000000000);
}

/* name_suffix{label="value",more or name_suffix{more: the series' start. */
static void mt_series(struct mtext *t, const char *name, const char *suffix, const char *label,
		      const char *value, bool more)
{
	mt_printf(t, "rdmamemd_%s%s", name, suffix);
	if (label) {
		mt_printf(t, "{%s=\"", label);
		mt_label(t, value);
		mt_printf(t, more ? "\"," : "\"}");
	} else if (more) {
		mt_printf(t, "{");
	}
}

/* A counter's sample with an escaped label and a fixed one ("op=\"read\""). */
static void mt_counter2(struct mtext *t, const char *name, const char *label, const char *value,
			const char *fixed, uint64_t v)
{
	mt_series(t, name, "_total", label, value, true);
	mt_printf(t, "%s} %" PRIu64 "\n", fixed, v);
}

/* One histogram's samples, with one label or none. */
static void mt_histogram_samples(struct mtext *t, const char *name, const char *label,
				 const char *value, const struct histogram *h)
{
	uint64_t cum = 0;

	for (unsigned i = 0; i < HISTOGRAM_BUCKETS; i++) {
		cum += h->bucket[i];
		mt_series(t, name, "_bucket", label, value, true);
		mt_printf(t, "le=\"");
		mt_seconds(t, histogram_bounds_ns[i]);
		mt_printf(t, "\"} %" PRIu64 "\n", cum);
	}
	mt_series(t, name, "_bucket", label, value, true);
	mt_printf(t, "le=\"+Inf\"} %" PRIu64 "\n", h->count);
	mt_series(t, name, "_sum", label, value, false);
	mt_printf(t, " ");
	mt_seconds(t, h->sum_ns);
	mt_printf(t, "\n");
	mt_series(t, name, "_count", label, value, false);
	mt_printf(t, " %" PRIu64 "\n", h->count);
}

static void mt_histogram(struct mtext *t, const char *name, const char *help,
			 const struct histogram *h)
{
	mt_family(t, name, M_HISTOGRAM, help);
	mt_histogram_samples(t, name, NULL, NULL, h);
}

struct uid_walk {
	struct mtext *t;
	uid_t only;
	int what; /* 0: pinned bytes, 1: regions, 2: connections */
};

static void uid_sample(uint64_t id, void *value, void *userdata)
{
	static const char *const names[] = { "uid_pinned_bytes", "uid_regions", "uid_clients" };
	struct uid_walk *w = userdata;
	const struct account *a = value;
	uint64_t v = w->what == 0 ? a->pinned_bytes :
		     w->what == 1 ? a->n_regions :
				    a->n_connections;

	if (w->only != METRICS_ALL_UIDS && id != w->only)
		return;
	mt_printf(w->t, "rdmamemd_%s{uid=\"%" PRIu64 "\"} %" PRIu64 "\n", names[w->what], id, v);
}

static void add_uids(struct mtext *t, const struct rpc_ctx *ctx, uid_t only)
{
	static const char *const help[] = {
		"Bytes of client memory kept in regions, by owner uid.",
		"Regions held, by owner uid.",
		"Varlink connections admitted, by uid.",
	};
	static const char *const names[] = { "uid_pinned_bytes", "uid_regions", "uid_clients" };
	struct uid_walk w = { .t = t, .only = only };

	for (w.what = 0; w.what < 3; w.what++) {
		mt_family(t, names[w.what], M_GAUGE, help[w.what]);
		idmap_foreach(&ctx->core->accounts->by_uid, uid_sample, &w);
	}
}

static void add_devices(struct mtext *t, const struct rpc_ctx *ctx)
{
	const struct device *dev;

	mt_family(t, "device_registered_bytes", M_GAUGE,
		  "Bytes of regions registered on an RDMA device.");
	list_for_each_entry(dev, &ctx->rdma->devices, link)
		mt_sample1(t, "device_registered_bytes", M_GAUGE, "device", dev->info.name,
			   dev->mr_bytes);
	mt_family(t, "device_registrations", M_GAUGE,
		  "Memory registrations held on an RDMA device.");
	list_for_each_entry(dev, &ctx->rdma->devices, link)
		mt_sample1(t, "device_registrations", M_GAUGE, "device", dev->info.name,
			   dev->n_mrs);
	mt_family(t, "device_transfer_bytes", M_COUNTER,
		  "Bytes the daemon's queue pairs moved on an RDMA device: in by READ, out by "
		  "WRITE.");
	list_for_each_entry(dev, &ctx->rdma->devices, link) {
		mt_counter2(t, "device_transfer_bytes", "device", dev->info.name,
			    "direction=\"in\"", dev->xfer.bytes_in);
		mt_counter2(t, "device_transfer_bytes", "device", dev->info.name,
			    "direction=\"out\"", dev->xfer.bytes_out);
	}
	mt_family(t, "device_transfer_ops", M_COUNTER,
		  "RDMA READ and WRITE work requests the daemon's queue pairs completed on an "
		  "RDMA device.");
	list_for_each_entry(dev, &ctx->rdma->devices, link) {
		mt_counter2(t, "device_transfer_ops", "device", dev->info.name, "op=\"read\"",
			    dev->xfer.reads);
		mt_counter2(t, "device_transfer_ops", "device", dev->info.name, "op=\"write\"",
			    dev->xfer.writes);
	}
}

/* Per peer: each live link (queue pair to another daemon) by its peer and
 * id; a link's counters start at its connect and go with it. */
static void link_samples(struct mtext *t, const struct link_pool *pool, const char *name,
			 const char *label, const char *a, const char *b, bool bytes)
{
	const struct link *l;

	list_for_each_entry(l, &pool->links, node) {
		const struct xfer_count *x = &l->stats.done;

		mt_series(t, name, "_total", "peer", l->peer, true);
		mt_printf(t, "link=\"%" PRIu64 "\",%s=\"%s\"} %" PRIu64 "\n", l->id, label, a,
			  bytes ? x->bytes_in : x->reads);
		mt_series(t, name, "_total", "peer", l->peer, true);
		mt_printf(t, "link=\"%" PRIu64 "\",%s=\"%s\"} %" PRIu64 "\n", l->id, label, b,
			  bytes ? x->bytes_out : x->writes);
	}
}

static void add_remote(struct mtext *t, const struct rpc_ctx *ctx)
{
	static const struct remote_ctx none_remote;
	const struct remote_ctx *rc = ctx->remote ?: &none_remote;
	const struct notify_stats *ns = &rc->notify.stats;

	mt_one(t, "transfers_started", M_COUNTER, "Transfers this daemon started.",
	       rc->n_transfers_started);
	mt_family(t, "transfers_ended", M_COUNTER, "Transfers ended, by result.");
	mt_sample1(t, "transfers_ended", M_COUNTER, "result", "done", rc->n_transfers_done);
	mt_sample1(t, "transfers_ended", M_COUNTER, "result", "failed", rc->n_transfers_failed);
	mt_sample1(t, "transfers_ended", M_COUNTER, "result", "cancelled",
		   rc->n_transfers_cancelled);
	mt_one(t, "transfers_running", M_GAUGE, "Transfers started and not yet ended.",
	       rc->n_transfers);
	mt_one(t, "links_connected", M_COUNTER, "Queue pairs to other daemons connected.",
	       rc->links.n_connected);
	mt_one(t, "links_failed", M_COUNTER, "Queue pairs to other daemons that failed to connect.",
	       rc->links.n_failed);
	mt_one(t, "links", M_GAUGE, "Queue pairs to other daemons held now.", rc->links.n_links);
	mt_family(t, "link_errors", M_COUNTER,
		  "Why queue pairs to other daemons went to error, by kind.");
	for (int k = 0; k < LINK_ERR_KINDS; k++)
		mt_sample1(t, "link_errors", M_COUNTER, "kind", link_error_kind_name(k),
			   rc->links.errors[k]);
	mt_family(t, "link_transfer_bytes", M_COUNTER,
		  "Bytes a queue pair to another daemon moved: in by READ, out by WRITE, by peer "
		  "and link.");
	link_samples(t, &rc->links, "link_transfer_bytes", "direction", "in", "out", true);
	mt_family(t, "link_transfer_ops", M_COUNTER,
		  "RDMA READ and WRITE work requests a queue pair to another daemon completed, by "
		  "peer and link.");
	link_samples(t, &rc->links, "link_transfer_ops", "op", "read", "write", false);
	mt_family(t, "peer_transfers", M_COUNTER,
		  "Transfers done that reached a peer (another daemon, by its endpoint).");
	for (unsigned i = 0; i < rc->n_peers; i++)
		mt_sample1(t, "peer_transfers", M_COUNTER, "peer", rc->peers[i].peer,
			   rc->peers[i].transfers);
	mt_family(t, "peer_transfer_bytes", M_COUNTER,
		  "Bytes of the ops of transfers done, by the peer they reached.");
	for (unsigned i = 0; i < rc->n_peers; i++)
		mt_sample1(t, "peer_transfer_bytes", M_COUNTER, "peer", rc->peers[i].peer,
			   rc->peers[i].bytes);
	mt_family(t, "peer_transfer_latency_seconds", M_HISTOGRAM,
		  "Time from a transfer's start to its end, of transfers done, by the peer they "
		  "reached.");
	for (unsigned i = 0; i < rc->n_peers; i++)
		mt_histogram_samples(t, "peer_transfer_latency_seconds", "peer", rc->peers[i].peer,
				     &rc->peers[i].latency);
	mt_family(t, "notifications", M_COUNTER,
		  "Notifications from peers: queued for their exports' owners, or dropped.");
	mt_sample1(t, "notifications", M_COUNTER, "outcome", "received", ns->received);
	mt_sample1(t, "notifications", M_COUNTER, "outcome", "dropped_full", ns->full);
	mt_sample1(t, "notifications", M_COUNTER, "outcome", "dropped_malformed", ns->malformed);
}

int metrics_text(const struct rpc_ctx *ctx, enum metrics_format format, uid_t only_uid, char **ret,
		 size_t *ret_len)
{
	const struct stats *st = &ctx->core->stats;
	struct rpc_server_status ss = {};
	struct mtext t = { .format = format };

	/* About 8 KiB with a device or two: one allocation, most times. */
	textbuf_reserve(&t.b, 16384);
	if (ctx->server_ops)
		ctx->server_ops->status(ctx->server, &ss);

	mt_one(&t, "uptime_seconds", M_GAUGE, "Seconds since the daemon started.",
	       core_uptime_msec(ctx->core) / 1000);
	mt_one(&t, "pinned_bytes", M_GAUGE, "Bytes of client memory kept in regions.",
	       ctx->regions->pinned_bytes);
	mt_one(&t, "pinned_peak_bytes", M_GAUGE, "The most bytes kept in regions at once.",
	       st->pinned_peak);
	mt_one(&t, "regions", M_GAUGE, "Regions held.", ctx->regions->n_regions);
	if (ctx->regions->keep) {
		const struct keep_ctx *k = ctx->regions->keep;

		mt_one(&t, "regions_kept", M_GAUGE,
		       "Regions in systemd's fd store, kept across a restart.", k->n_kept);
		mt_one(&t, "regions_awaiting_reclaim", M_GAUGE,
		       "Regions restored at start, waiting for their owners' Reclaim.",
		       k->n_awaiting);
		mt_one(&t, "regions_restored", M_COUNTER,
		       "Regions restored from the fd store at start.", k->n_restored);
		mt_one(&t, "regions_reclaimed", M_COUNTER,
		       "Restored regions their owners reclaimed.", k->n_reclaimed);
		mt_one(&t, "regions_unclaimed", M_COUNTER,
		       "Restored regions released unclaimed when the grace ended.", k->n_expired);
	}
	add_uids(&t, ctx, only_uid);
	mt_one(&t, "regions_registered", M_COUNTER, "Regions made since start.",
	       st->regions_registered);
	mt_one(&t, "registrations", M_COUNTER, "Memory registrations on RDMA devices made.",
	       st->mrs_registered);
	mt_one(&t, "registration_failures", M_COUNTER,
	       "Memory registrations on RDMA devices that failed.", st->mr_failures);
	add_devices(&t, ctx);
	mt_histogram(&t, "import_latency_seconds",
		     "Time to import a region: from its memory being taken to the region existing.",
		     &st->import_latency);
	mt_histogram(&t, "registration_latency_seconds",
		     "Time to register a region on an RDMA device, queued to settled.",
		     &st->registration_latency);
	mt_counters(&t, "calls", "Calls answered, by method.", "method", &st->calls);
	mt_counters(&t, "errors", "Errors answered, by error name.", "error", &st->errors);
	mt_one(&t, "read_bytes", M_COUNTER, "Bytes Read out of regions.", st->bytes_read);
	mt_one(&t, "written_bytes", M_COUNTER, "Bytes Written into regions.", st->bytes_written);
	mt_one(&t, "copied_bytes", M_COUNTER, "Bytes Copied between regions.", st->bytes_copied);
	mt_one(&t, "clients", M_GAUGE, "Varlink connections admitted.", ss.n_clients);
	mt_one(&t, "connections_refused", M_COUNTER,
	       "Varlink connections refused over a connection limit.", ss.n_refused_total);
	mt_one(&t, "connections_refused_waiting", M_GAUGE,
	       "Refused Varlink connections kept open until told why.", ss.n_rejected);
	mt_one(&t, "rdma_connections", M_GAUGE, "Remote peers' queue pairs into this daemon.",
	       ctx->rdma->n_rconns);
	mt_one(&t, "rdma_connections_refused", M_COUNTER,
	       "Remote peers' connections refused: token, network or limit.", ctx->rdma->rejected);
	mt_one(&t, "input_queue_bytes", M_GAUGE,
	       "Bytes of client messages held: input buffers and large messages being served.",
	       ss.bytes[BUDGET_INPUT]);
	mt_one(&t, "output_queue_bytes", M_GAUGE, "Bytes of replies held for clients.",
	       ss.bytes[BUDGET_OUTPUT]);
	mt_one(&t, "offload_waiting", M_GAUGE,
	       "Client-made jobs (large messages) waiting for the thread pool.",
	       ctx->core->offload ? ctx->core->offload->n_waiting : 0);
	mt_one(&t, "offload_running", M_GAUGE, "Client-made jobs on the thread pool.",
	       ctx->core->offload ? ctx->core->offload->running : 0);
	mt_family(
		&t, "gpu_imports", M_COUNTER,
		"GPU imports made (VMM maps, IPC opens), by where: on the event loop itself or on "
		"a pool thread (loop-import-usec).");
	mt_sample1(&t, "gpu_imports", M_COUNTER, "on", "loop",
		   ctx->gpu ? ctx->gpu->imports_on_loop : 0);
	mt_sample1(&t, "gpu_imports", M_COUNTER, "on", "pool",
		   ctx->gpu ? ctx->gpu->imports_on_pool : 0);
	add_remote(&t, ctx);
	if (format == METRICS_OPENMETRICS)
		mt_printf(&t, "# EOF\n");
	if (t.b.oom) {
		free(t.b.p);
		return -ENOMEM;
	}
	*ret = t.b.p;
	*ret_len = t.b.len;
	return 0;
}

const char *metrics_content_type(enum metrics_format format)
{
	return format == METRICS_OPENMETRICS ?
		       "application/openmetrics-text; version=1.0.0; charset=utf-8" :
		       "text/plain; version=0.0.4; charset=utf-8";
}
