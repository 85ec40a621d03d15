/* SPDX-License-Identifier: BSD-3-Clause */
/* io.rdmamemd methods about the daemon itself. */
#include <errno.h>
#include <unistd.h>

#include "daemon.h"
#include "proto/json.h"
#include "rpc.h"
#include "server.h"

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
	if (p.data) {
		reply = cJSON_CreateObject();
		if (!reply || json_add_string(reply, "data", p.data) < 0) {
			cJSON_Delete(reply);
			return -ENOMEM;
		}
	}
	return rpc_reply(call, reply);
}

static int method_get_status(struct rpc_call *call)
{
	struct daemon *d = call->daemon;
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
	    json_add_u64(p, "uptime_msec", daemon_uptime_msec(d)) < 0 ||
	    json_add_string(p, "socket", d->server->path) < 0 ||
	    json_add_int(p, "clients", d->server->n_conns) < 0 ||
	    json_add_int(p, "regions", (int64_t)d->n_regions) < 0 ||
	    json_add_u64(p, "pinned_bytes", d->pinned_bytes) < 0 ||
	    json_add_int(p, "devices", d->n_devices) < 0 ||
	    json_add_int(p, "rdma_connections", d->n_rconns) < 0)
		return -ENOMEM;
	return rpc_reply(call, TAKE_PTR(p));
}

const struct rpc_method rpc_core_methods[] = {
	{ "io.rdmamemd.Ping", method_ping, 0 },
	{ "io.rdmamemd.GetStatus", method_get_status, 0 },
	{},
};
