/* SPDX-License-Identifier: BSD-3-Clause */
/* io.rdmamemd methods about the daemon itself. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "conn.h"
#include "core.h"
#include "proto/json.h"
#include "rdma.h"
#include "region.h"
#include "rpc.h"
#include "server.h"
#include "session.h"

/*
 * The most data a Ping echoes: the reply is printed on the loop, and a control
 * character prints as six bytes, so 16 KiB costs well under a millisecond.
 */
#define PING_DATA_MAX (16U * 1024U)

static int method_ping(struct rpc_call *call)
{
	struct {
		const char *data;
	} p = {};
	static const struct json_field fields[] = {
		{ "data", JSON_STRING, 0, 0 },
		{},
	};
	cJSON *reply = NULL;
	int r;

	r = rpc_params(call, fields, &p);
	if (r < 0)
		return r;
	if (p.data && strnlen(p.data, PING_DATA_MAX + 1) > PING_DATA_MAX)
		return rpc_invalid_param(call, "data", "parameter 'data' may be at most %u bytes",
					 PING_DATA_MAX);
	if (p.data) {
		reply = cJSON_CreateObject();
		if (!reply || json_add_string(reply, "data", p.data) < 0) {
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
 * region (and so an fd) up to the per-uid region cap, and the daemon's own.
 */
static int add_fd_limit(cJSON *p, const struct rpc_ctx *ctx)
{
	const struct daemon_config *cfg = &ctx->core->cfg;
	uint64_t need = (uint64_t)cfg->max_connections + SERVER_REJECTED_MAX + DAEMON_FDS_OWN +
			DAEMON_FDS_PER_DEVICE * ctx->rdma->n_devices;
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

static int method_get_status(struct rpc_call *call)
{
	const struct rpc_ctx *ctx = call->ctx;
	_cleanup_json_ cJSON *p = NULL;
	int r;

	r = rpc_params(call, (const struct json_field[]){ {} }, NULL);
	if (r < 0)
		return r;

	p = cJSON_CreateObject();
	if (!p)
		return -ENOMEM;
	if (json_add_string(p, "version", RDMAMEMD_VERSION) < 0 ||
	    json_add_int(p, "pid", getpid()) < 0 ||
	    json_add_u64(p, "uptime_msec", core_uptime_msec(ctx->core)) < 0 ||
	    json_add_string(p, "socket", ctx->server->path) < 0 ||
	    json_add_int(p, "clients", ctx->server->n_conns) < 0 ||
	    json_add_int(p, "regions", (int64_t)ctx->regions->n_regions) < 0 ||
	    json_add_u64(p, "pinned_bytes", ctx->regions->pinned_bytes) < 0 ||
	    json_add_u64(p, "input_bytes", ctx->server->budgets[BUDGET_INPUT].bytes) < 0 ||
	    json_add_u64(p, "output_bytes", ctx->server->budgets[BUDGET_OUTPUT].bytes) < 0 ||
	    json_add_int(p, "devices", ctx->rdma->n_devices) < 0 || add_fd_limit(p, ctx) < 0 ||
	    json_add_int(p, "rdma_connections", ctx->rdma->n_rconns) < 0)
		return -ENOMEM;
	r = add_memlock(p);
	if (r < 0)
		return r;
	return rpc_reply(call, TAKE_PTR(p));
}

static int method_get_stats(struct rpc_call *call)
{
	const struct stats *st = &call->ctx->core->stats;
	_cleanup_json_ cJSON *p = cJSON_CreateObject();
	cJSON *calls, *errors;
	int r;

	r = rpc_params(call, (const struct json_field[]){ {} }, NULL);
	if (r < 0)
		return r;
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
	    json_add_u64(p, "rdma_rejected_connections", call->ctx->rdma->rejected) < 0)
		return -ENOMEM;
	return rpc_reply(call, TAKE_PTR(p));
}

/* Others' connections are their business; root sees all. */
static int client_item(struct rpc_call *call, struct idseq_node *node, cJSON **ret)
{
	const struct conn *c = container_of(node, struct conn, order);
	const struct session *s = c->session;
	_cleanup_json_ cJSON *o = NULL;

	if (call->session->cred.uid != 0 && s->cred.uid != call->session->cred.uid)
		return 0;
	o = cJSON_CreateObject();
	if (!o || json_add_u64(o, "id", c->id) < 0 || json_add_int(o, "pid", s->cred.pid) < 0 ||
	    json_add_int(o, "uid", s->cred.uid) < 0 || json_add_int(o, "gid", s->cred.gid) < 0 ||
	    json_add_u64(o, "calls", c->n_calls) < 0 ||
	    json_add_int(o, "regions", session_count(s, SESSION_REGION)) < 0 ||
	    json_add_int(o, "leases", session_count(s, SESSION_LEASE)) < 0 ||
	    json_add_int(o, "tokens", session_count(s, SESSION_TOKEN)) < 0 ||
	    json_add_bool(o, "self", s == call->session) < 0 ||
	    json_add_string(o, "state", c->reject ? "refused" :
					c->call && s != call->session ? "in a call" : "idle") < 0)
		return -ENOMEM;
	*ret = TAKE_PTR(o);
	return 0;
}

static int method_list_clients(struct rpc_call *call)
{
	return rpc_reply_page(call, &call->ctx->server->conn_order, "clients", client_item);
}

const struct rpc_method rpc_core_methods[] = {
	{ "io.rdmamemd.GetStats", method_get_stats, 0 },
	{ "io.rdmamemd.ListClients", method_list_clients, 0 },
	{ "io.rdmamemd.Ping", method_ping, 0 },
	{ "io.rdmamemd.GetStatus", method_get_status, 0 },
	{},
};
