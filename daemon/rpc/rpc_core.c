/* SPDX-License-Identifier: BSD-3-Clause */
/* io.rdmamemd methods about the daemon itself. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "daemon/core/core.h"
#include "proto/json.h"
#include "daemon/rdma/device.h"
#include "daemon/rdma/rdma.h"
#include "daemon/remote/remote.h"
#include "daemon/mem/region.h"
#include "daemon/rpc/metrics.h"
#include "daemon/rpc/rpc.h"
#include "daemon/core/session.h"

/*
 * The most data a Ping echoes: the reply is printed on the loop, and a control
 * character prints as six bytes, so 16 KiB costs well under a millisecond.
 */
#define PING_DATA_MAX (16U * 1024U)

struct ping_params {
	const char *data;
};

/* clang-format off */
RPC_DEFINE_METHOD(Ping,
		  "Round trip with no side effects. Any data sent comes back unchanged; data\n"
		  "longer than 16384 bytes is refused with InvalidParameter.",
		  VARLINK_INPUT(struct ping_params, data, VARLINK_STRING, VARLINK_NULLABLE),
		  VARLINK_OUTPUT(data, VARLINK_STRING, VARLINK_NULLABLE));
/* clang-format on */

static int method_ping(struct rpc_call *call, void *params)
{
	const struct ping_params *p = params;
	cJSON *reply = NULL;

	if (p->data && strnlen(p->data, PING_DATA_MAX + 1) > PING_DATA_MAX)
		return rpc_invalid_param(call, "data", "parameter 'data' may be at most %u bytes",
					 PING_DATA_MAX);
	if (p->data) {
		reply = cJSON_CreateObject();
		if (!reply || json_add_string(reply, "data", p->data) < 0) {
			cJSON_Delete(reply);
			return -ENOMEM;
		}
	}
	return rpc_reply(call, reply);
}

/* What rdmamemctl doctor checks first: can the daemon pin client memory? */
static int add_memlock(cJSON *p)
{
	struct rlimit rl;
	bool cap = false;
	FILE *f;
	char line[256];

	/* Both fields are declared non-optional. */
	if (getrlimit(RLIMIT_MEMLOCK, &rl) < 0)
		return -errno;
	if (rl.rlim_cur == RLIM_INFINITY ? json_add_string(p, "memlock_limit", "infinity") < 0 :
					   json_add_u64(p, "memlock_limit", rl.rlim_cur) < 0)
		return -ENOMEM;
	/* CAP_IPC_LOCK (bit 14) in the effective set lifts the limit. */
	f = fopen("/proc/self/status", "re");
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, "CapEff:", 7) == 0)
			cap = (strtoull(line + 7, NULL, 16) >> 14) & 1;
	if (f)
		fclose(f);
	return json_add_bool(p, "cap_ipc_lock", cap);
}

/*
 * The fd limit, and what the limits let one uid make the daemon hold: its
 * connections up to the global cap, the refused ones waiting to be told, a
 * region (and so an fd) up to the per-uid region cap, the links to other
 * daemons up to their global cap, and the daemon's own.
 */
static int add_fd_limit(cJSON *p, const struct rpc_ctx *ctx, const struct rpc_server_status *st)
{
	const struct daemon_config *cfg = &ctx->core->cfg;
	uint64_t need = (uint64_t)cfg->max_connections + st->n_rejected_max + DAEMON_FDS_OWN +
			DAEMON_FDS_PER_DEVICE * ctx->rdma->n_devices +
			(uint64_t)DAEMON_FDS_PER_LINK * cfg->max_links;
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		rl.rlim_cur = 0;
	need = cfg->max_regions_per_uid > UINT64_MAX - need ? UINT64_MAX :
							      need + cfg->max_regions_per_uid;
	if (json_add_int(p, "fd_limit", (int64_t)MIN(rl.rlim_cur, (rlim_t)INT64_MAX)) < 0 ||
	    json_add_u64(p, "fds_needed", need) < 0)
		return -ENOMEM;
	return 0;
}

/* clang-format off */
RPC_DEFINE_METHOD(
	GetStatus, "What the daemon is doing.",
	VARLINK_OUTPUT(version, VARLINK_STRING, 0),
	VARLINK_OUTPUT(pid, VARLINK_INT, 0),
	VARLINK_FIELD_COMMENT("milliseconds since start, decimal string"),
	VARLINK_OUTPUT(uptime_msec, VARLINK_U64, 0),
	VARLINK_FIELD_COMMENT("the socket the daemon listens on"),
	VARLINK_OUTPUT(socket, VARLINK_STRING, 0),
	VARLINK_FIELD_COMMENT("connected clients"),
	VARLINK_OUTPUT(clients, VARLINK_INT, 0),
	VARLINK_OUTPUT(regions, VARLINK_INT, 0),
	VARLINK_FIELD_COMMENT(
		"bytes of client memory the daemon keeps mapped, decimal string"),
	VARLINK_OUTPUT(pinned_bytes, VARLINK_U64, 0),
	VARLINK_FIELD_COMMENT(
		"bytes of client messages the daemon holds: input buffers, and large\n"
		"messages until they are served and freed, decimal string"),
	VARLINK_OUTPUT(input_bytes, VARLINK_U64, 0),
	VARLINK_FIELD_COMMENT(
		"bytes of replies the daemon holds: queued replies, and large Read\n"
		"replies from when their room is reserved until they are queued, decimal\n"
		"string"),
	VARLINK_OUTPUT(output_bytes, VARLINK_U64, 0),
	VARLINK_FIELD_COMMENT("RDMA devices opened"),
	VARLINK_OUTPUT(devices, VARLINK_INT, 0),
	VARLINK_FIELD_COMMENT(
		"the daemon's RLIMIT_MEMLOCK: bytes as a decimal string, or \"infinity\""),
	VARLINK_OUTPUT(memlock_limit, VARLINK_STRING, 0),
	VARLINK_FIELD_COMMENT("whether the daemon may lock memory beyond that limit"),
	VARLINK_OUTPUT(cap_ipc_lock, VARLINK_BOOL, 0),
	VARLINK_FIELD_COMMENT(
		"the daemon's RLIMIT_NOFILE (it raises the soft limit to the hard one)"),
	VARLINK_OUTPUT(fd_limit, VARLINK_INT, 0),
	VARLINK_FIELD_COMMENT(
		"file descriptors the configured limits let one uid make the daemon\n"
		"hold (max-connections, refused clients waiting for their answer, one\n"
		"per region up to max-regions-per-uid, the daemon's own), decimal string"),
	VARLINK_OUTPUT(fds_needed, VARLINK_U64, 0),
	VARLINK_FIELD_COMMENT("remote peers' queue pairs"),
	VARLINK_OUTPUT(rdma_connections, VARLINK_INT, 0));
/* clang-format on */

static int method_get_status(struct rpc_call *call, _unused_ void *params)
{
	const struct rpc_ctx *ctx = call->ctx;
	struct rpc_server_status st;
	_cleanup_json_ cJSON *p = NULL;
	int r;

	ctx->server_ops->status(ctx->server, &st);
	p = cJSON_CreateObject();
	if (!p)
		return -ENOMEM;
	if (json_add_string(p, "version", RDMAMEMD_VERSION) < 0 ||
	    json_add_int(p, "pid", getpid()) < 0 ||
	    json_add_u64(p, "uptime_msec", core_uptime_msec(ctx->core)) < 0 ||
	    json_add_string(p, "socket", st.path) < 0 ||
	    json_add_int(p, "clients", st.n_clients) < 0 ||
	    json_add_int(p, "regions", (int64_t)ctx->regions->n_regions) < 0 ||
	    json_add_u64(p, "pinned_bytes", ctx->regions->pinned_bytes) < 0 ||
	    json_add_u64(p, "input_bytes", st.bytes[BUDGET_INPUT]) < 0 ||
	    json_add_u64(p, "output_bytes", st.bytes[BUDGET_OUTPUT]) < 0 ||
	    json_add_int(p, "devices", ctx->rdma->n_devices) < 0 || add_fd_limit(p, ctx, &st) < 0 ||
	    json_add_int(p, "rdma_connections", ctx->rdma->n_rconns) < 0)
		return -ENOMEM;
	r = add_memlock(p);
	if (r < 0)
		return r;
	return rpc_reply(call, TAKE_PTR(p));
}

/* clang-format off */
static const struct varlink_symbol rpc_type_DeviceTransfers = VARLINK_DEFINE_TYPE(
	DeviceTransfers, NULL,
	VARLINK_FIELD(device, VARLINK_STRING, 0),
	VARLINK_FIELD_COMMENT("RDMA READ work requests completed, and the bytes they brought in"),
	VARLINK_FIELD(reads, VARLINK_U64, 0),
	VARLINK_FIELD(bytes_in, VARLINK_U64, 0),
	VARLINK_FIELD_COMMENT("RDMA WRITE work requests completed, and the bytes they sent out"),
	VARLINK_FIELD(writes, VARLINK_U64, 0),
	VARLINK_FIELD(bytes_out, VARLINK_U64, 0));

RPC_DEFINE_METHOD(GetStats,
		  "Counters since the daemon started. calls: method name -> calls answered;\n"
		  "errors: error name -> errors answered; values are decimal strings.",
		  VARLINK_OUTPUT(calls, VARLINK_STRING, VARLINK_MAP),
		  VARLINK_OUTPUT(errors, VARLINK_STRING, VARLINK_MAP),
		  VARLINK_OUTPUT(uptime_msec, VARLINK_U64, 0),
		  VARLINK_OUTPUT(bytes_read, VARLINK_U64, 0),
		  VARLINK_OUTPUT(bytes_written, VARLINK_U64, 0),
		  VARLINK_OUTPUT(bytes_copied, VARLINK_U64, 0),
		  VARLINK_OUTPUT(regions_registered, VARLINK_U64, 0),
		  VARLINK_OUTPUT(pinned_bytes, VARLINK_U64, 0),
		  VARLINK_OUTPUT(pinned_bytes_peak, VARLINK_U64, 0),
		  VARLINK_OUTPUT(rdma_registrations, VARLINK_U64, 0),
		  VARLINK_OUTPUT(rdma_registration_failures, VARLINK_U64, 0),
		  VARLINK_OUTPUT(rdma_rejected_connections, VARLINK_U64, 0),
		  VARLINK_FIELD_COMMENT("notifications queued for their exports' owners"),
		  VARLINK_OUTPUT(notifications_received, VARLINK_U64, 0),
		  VARLINK_FIELD_COMMENT("dropped: the owner's queue was full"),
		  VARLINK_OUTPUT(notifications_dropped_full, VARLINK_U64, 0),
		  VARLINK_FIELD_COMMENT("dropped: not a notification of the connection's export"),
		  VARLINK_OUTPUT(notifications_dropped_malformed, VARLINK_U64, 0),
		  VARLINK_FIELD_COMMENT("Transfers (this daemon the initiator): started = done +\n"
					"failed + cancelled + those running"),
		  VARLINK_OUTPUT(transfers_started, VARLINK_U64, 0),
		  VARLINK_OUTPUT(transfers_done, VARLINK_U64, 0),
		  VARLINK_OUTPUT(transfers_failed, VARLINK_U64, 0),
		  VARLINK_OUTPUT(transfers_cancelled, VARLINK_U64, 0),
		  VARLINK_OUTPUT(transfers_running, VARLINK_U64, 0),
		  VARLINK_FIELD_COMMENT("its queue pairs to other daemons (links): connected, failed\n"
					"to connect, and why any went to error since start, by kind\n"
					"(as ListLinks' errors): decimal strings"),
		  VARLINK_OUTPUT(links_connected, VARLINK_U64, 0),
		  VARLINK_OUTPUT(links_failed, VARLINK_U64, 0),
		  VARLINK_OUTPUT(link_errors, VARLINK_STRING, VARLINK_MAP),
		  VARLINK_FIELD_COMMENT("what the daemon's own queue pairs carried, per device"),
		  VARLINK_OUTPUT_BY_TYPE(transfer_devices, rpc_type_DeviceTransfers,
					 VARLINK_ARRAY));
/* clang-format on */

static int add_transfer_stats(cJSON *p, const struct rpc_ctx *ctx)
{
	static const struct remote_ctx none;
	const struct remote_ctx *rc = ctx->remote ?: &none;
	cJSON *list = cJSON_AddArrayToObject(p, "transfer_devices");
	cJSON *errors = cJSON_AddObjectToObject(p, "link_errors");
	const struct device *dev;

	if (!list || json_add_u64(p, "transfers_started", rc->n_transfers_started) < 0 ||
	    json_add_u64(p, "transfers_done", rc->n_transfers_done) < 0 ||
	    json_add_u64(p, "transfers_failed", rc->n_transfers_failed) < 0 ||
	    json_add_u64(p, "transfers_cancelled", rc->n_transfers_cancelled) < 0 ||
	    json_add_u64(p, "transfers_running", rc->n_transfers) < 0 ||
	    json_add_u64(p, "links_connected", rc->links.n_connected) < 0 ||
	    json_add_u64(p, "links_failed", rc->links.n_failed) < 0 || !errors)
		return -ENOMEM;
	for (int k = 0; k < LINK_ERR_KINDS; k++)
		if (json_add_u64(errors, link_error_kind_name(k), rc->links.errors[k]) < 0)
			return -ENOMEM;
	list_for_each_entry(dev, &ctx->rdma->devices, link) {
		cJSON *o = cJSON_CreateObject();

		if (!o)
			return -ENOMEM;
		cJSON_AddItemToArray(list, o);
		if (json_add_string(o, "device", dev->info.name) < 0 ||
		    json_add_u64(o, "reads", dev->xfer.reads) < 0 ||
		    json_add_u64(o, "bytes_in", dev->xfer.bytes_in) < 0 ||
		    json_add_u64(o, "writes", dev->xfer.writes) < 0 ||
		    json_add_u64(o, "bytes_out", dev->xfer.bytes_out) < 0)
			return -ENOMEM;
	}
	return 0;
}

static int method_get_stats(struct rpc_call *call, _unused_ void *params)
{
	const struct stats *st = &call->ctx->core->stats;
	static const struct notify_stats none;
	const struct notify_stats *ns = call->ctx->remote ? &call->ctx->remote->notify.stats :
							    &none;
	_cleanup_json_ cJSON *p = cJSON_CreateObject();
	cJSON *calls, *errors;

	calls = counters_json(&st->calls);
	errors = counters_json(&st->errors);
	if (!p || !calls || !errors) {
		cJSON_Delete(calls);
		cJSON_Delete(errors);
		return -ENOMEM;
	}
	cJSON_AddItemToObject(p, "calls", calls);
	cJSON_AddItemToObject(p, "errors", errors);
	if (json_add_u64(p, "uptime_msec", core_uptime_msec(call->ctx->core)) < 0 ||
	    json_add_u64(p, "bytes_read", st->bytes_read) < 0 ||
	    json_add_u64(p, "bytes_written", st->bytes_written) < 0 ||
	    json_add_u64(p, "bytes_copied", st->bytes_copied) < 0 ||
	    json_add_u64(p, "regions_registered", st->regions_registered) < 0 ||
	    json_add_u64(p, "pinned_bytes", call->ctx->regions->pinned_bytes) < 0 ||
	    json_add_u64(p, "pinned_bytes_peak", st->pinned_peak) < 0 ||
	    json_add_u64(p, "rdma_registrations", st->mrs_registered) < 0 ||
	    json_add_u64(p, "rdma_registration_failures", st->mr_failures) < 0 ||
	    json_add_u64(p, "rdma_rejected_connections", call->ctx->rdma->rejected) < 0 ||
	    json_add_u64(p, "notifications_received", ns->received) < 0 ||
	    json_add_u64(p, "notifications_dropped_full", ns->full) < 0 ||
	    json_add_u64(p, "notifications_dropped_malformed", ns->malformed) < 0 ||
	    add_transfer_stats(p, call->ctx) < 0)
		return -ENOMEM;
	return rpc_reply(call, TAKE_PTR(p));
}

/* clang-format off */
static const struct varlink_symbol rpc_type_Limit = VARLINK_DEFINE_TYPE(
	Limit, NULL,
	VARLINK_FIELD(quota, VARLINK_STRING, 0),
	VARLINK_FIELD(limit, VARLINK_U64, 0),
	VARLINK_FIELD(used, VARLINK_U64, 0));

RPC_DEFINE_METHOD(
	GetLimits,
	"The caller's uid's limits and what it uses of each, by the names\n"
	"QuotaExceeded gives them (\"regions\", \"pinned_bytes\", \"leases\",\n"
	"\"tokens\", \"rdma_connections\", \"remotes\", \"plans\"), and\n"
	"\"connections\" (Varlink connections); shares_per_region bounds each\n"
	"region's shares.",
	VARLINK_OUTPUT(uid, VARLINK_INT, 0),
	VARLINK_OUTPUT_BY_TYPE(limits, rpc_type_Limit, VARLINK_ARRAY),
	VARLINK_OUTPUT(shares_per_region, VARLINK_INT, 0));
/* clang-format on */

static int method_get_limits(struct rpc_call *call, _unused_ void *params)
{
	const struct daemon_config *cfg = &call->ctx->core->cfg;
	const struct account *a = call->session->account;
	const struct {
		const char *quota;
		uint64_t limit, used;
	} limits[] = {
		{ "connections", cfg->max_connections_per_uid, a->n_connections },
		{ "regions", cfg->max_regions_per_uid, a->n_regions },
		{ "pinned_bytes", cfg->max_pinned_bytes_per_uid, a->pinned_bytes },
		{ "leases", cfg->max_leases_per_uid, a->n_leases },
		{ "tokens", cfg->max_tokens_per_uid, a->n_tokens },
		{ "rdma_connections", cfg->max_rdma_connections_per_uid, a->n_rdma_connections },
		{ "remotes", cfg->max_remotes_per_uid, a->n_remotes },
		{ "plans", cfg->max_plans_per_uid, a->n_plans },
		{ "links", cfg->max_links_per_uid,
		  link_count_uid(&call->ctx->remote->links, call->session->cred.uid) },
	};
	_cleanup_json_ cJSON *p = cJSON_CreateObject();
	cJSON *list = p ? cJSON_AddArrayToObject(p, "limits") : NULL;

	if (!list || json_add_int(p, "uid", call->session->cred.uid) < 0 ||
	    json_add_int(p, "shares_per_region", cfg->max_shares_per_region) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < ELEMENTSOF(limits); i++) {
		cJSON *o = cJSON_CreateObject();

		if (!o)
			return -ENOMEM;
		cJSON_AddItemToArray(list, o);
		if (json_add_string(o, "quota", limits[i].quota) < 0 ||
		    json_add_u64(o, "limit", limits[i].limit) < 0 ||
		    json_add_u64(o, "used", limits[i].used) < 0)
			return -ENOMEM;
	}
	return rpc_reply(call, TAKE_PTR(p));
}

/* clang-format off */
static const struct varlink_symbol rpc_type_Client = VARLINK_DEFINE_TYPE(
	Client, NULL,
	VARLINK_FIELD(id, VARLINK_U64, 0),
	VARLINK_FIELD(pid, VARLINK_INT, 0),
	VARLINK_FIELD(uid, VARLINK_INT, 0),
	VARLINK_FIELD(gid, VARLINK_INT, 0),
	VARLINK_FIELD_COMMENT("calls this connection made"),
	VARLINK_FIELD(calls, VARLINK_U64, 0),
	VARLINK_FIELD(regions, VARLINK_INT, 0),
	VARLINK_FIELD(leases, VARLINK_INT, 0),
	VARLINK_FIELD(tokens, VARLINK_INT, 0),
	VARLINK_FIELD_COMMENT("the connection asking"),
	VARLINK_FIELD(self, VARLINK_BOOL, 0),
	VARLINK_FIELD_COMMENT("\"idle\", \"in a call\" or \"refused\" (over a connection limit)"),
	VARLINK_FIELD(state, VARLINK_STRING, 0));
/* clang-format on */

/* Others' connections are their business; root sees all. */
static int client_item(struct rpc_call *call, struct idseq_node *node, cJSON **ret)
{
	const struct session *s;
	struct rpc_client c;
	_cleanup_json_ cJSON *o = NULL;

	call->ctx->server_ops->client(node, &c);
	s = c.session;
	if (call->session->cred.uid != 0 && s->cred.uid != call->session->cred.uid)
		return 0;
	o = cJSON_CreateObject();
	if (!o || json_add_u64(o, "id", c.id) < 0 || json_add_int(o, "pid", s->cred.pid) < 0 ||
	    json_add_int(o, "uid", s->cred.uid) < 0 || json_add_int(o, "gid", s->cred.gid) < 0 ||
	    json_add_u64(o, "calls", c.n_calls) < 0 ||
	    json_add_int(o, "regions", session_count(s, SESSION_REGION)) < 0 ||
	    json_add_int(o, "leases", session_count(s, SESSION_LEASE)) < 0 ||
	    json_add_int(o, "tokens", session_count(s, SESSION_TOKEN)) < 0 ||
	    json_add_bool(o, "self", s == call->session) < 0 ||
	    json_add_string(o, "state",
			    c.refused                       ? "refused" :
			    c.in_call && s != call->session ? "in a call" :
							      "idle") < 0)
		return -ENOMEM;
	*ret = TAKE_PTR(o);
	return 0;
}

/* clang-format off */
RPC_DEFINE_METHOD(ListClients,
		  "Connected clients: all of them for root, a user's own otherwise; a page\n"
		  "at a time, by id, as ListRegions.",
		  RPC_PAGE_INPUTS,
		  VARLINK_OUTPUT_BY_TYPE(clients, rpc_type_Client, VARLINK_ARRAY),
		  VARLINK_OUTPUT(next, VARLINK_U64, VARLINK_NULLABLE));
/* clang-format on */

static int method_list_clients(struct rpc_call *call, void *params)
{
	const struct rpc_ctx *ctx = call->ctx;

	return rpc_reply_page(call, params, ctx->server_ops->clients(ctx->server), "clients",
			      client_item);
}

struct get_metrics_params {
	const char *format;
};

/* clang-format off */
RPC_DEFINE_METHOD(
	GetMetrics,
	"Everything GetStatus, GetStats and the listings count, as one text for\n"
	"monitoring: format \"openmetrics\" (the default; OpenMetrics 1.0) or\n"
	"\"prometheus\" (the Prometheus text format 0.0.4). The series by uid are\n"
	"every uid's for root, the caller's own otherwise.",
	VARLINK_INPUT(struct get_metrics_params, format, VARLINK_STRING, VARLINK_NULLABLE),
	VARLINK_OUTPUT(text, VARLINK_STRING, 0));
/* clang-format on */

static int method_get_metrics(struct rpc_call *call, void *params)
{
	const struct get_metrics_params *p = params;
	enum metrics_format format = METRICS_OPENMETRICS;
	uid_t uid = call->session->cred.uid;
	_cleanup_free_ char *text = NULL;
	_cleanup_json_ cJSON *reply = NULL;
	size_t len;
	int r;

	if (p->format && strcmp(p->format, "prometheus") == 0)
		format = METRICS_PROMETHEUS;
	else if (p->format && strcmp(p->format, "openmetrics") != 0)
		return rpc_invalid_param(call, "format",
					 "parameter 'format' is \"openmetrics\" or \"prometheus\"");
	r = metrics_text(call->ctx, format, uid == 0 ? METRICS_ALL_UIDS : uid, &text, &len);
	if (r < 0)
		return r;
	reply = cJSON_CreateObject();
	if (!reply || json_add_string(reply, "text", text) < 0)
		return -ENOMEM;
	return rpc_reply(call, TAKE_PTR(reply));
}

const struct rpc_method rpc_core_methods[] = {
	RPC_METHOD(RDMAMEMD_INTERFACE, Ping, method_ping, RPC_PARAMS(struct ping_params)),
	RPC_METHOD(RDMAMEMD_INTERFACE, GetStatus, method_get_status),
	RPC_METHOD(RDMAMEMD_INTERFACE, GetStats, method_get_stats),
	RPC_METHOD(RDMAMEMD_INTERFACE, GetMetrics, method_get_metrics,
		   RPC_PARAMS(struct get_metrics_params)),
	RPC_METHOD(RDMAMEMD_INTERFACE, GetLimits, method_get_limits),
	RPC_METHOD(RDMAMEMD_INTERFACE, ListClients, method_list_clients, RPC_PAGE_PARAMS),
	{},
};
