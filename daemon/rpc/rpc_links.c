/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ListLinks: the queue pairs this daemon opened to other daemons for
 * Transfer (daemon/remote/link.h), with their state and counters. A
 * link is in the listing from its first connect attempt until it is freed:
 * one that failed stays while a transfer still holds it, with why.
 */
#include <errno.h>

#include "daemon/core/core.h"
#include "daemon/core/session.h"
#include "daemon/rdma/device.h"
#include "daemon/remote/link.h"
#include "daemon/remote/remote.h"
#include "daemon/rpc/rpc.h"
#include "proto/json.h"

/* clang-format off */
static const struct varlink_symbol rpc_type_Link = VARLINK_DEFINE_TYPE(
	Link, NULL,
	VARLINK_FIELD(id, VARLINK_U64, 0),
	VARLINK_FIELD_COMMENT("\"connecting\", \"ready\", \"error\" or \"closed\""),
	VARLINK_FIELD(state, VARLINK_STRING, 0),
	VARLINK_FIELD_COMMENT("the local device, and the uid whose protection domain it is in"),
	VARLINK_FIELD(device, VARLINK_STRING, 0),
	VARLINK_FIELD(uid, VARLINK_INT, 0),
	VARLINK_FIELD_COMMENT("the remote daemon's rdmacm endpoint, address:port"),
	VARLINK_FIELD(endpoint, VARLINK_STRING, 0),
	VARLINK_FIELD(age_msec, VARLINK_U64, 0),
	VARLINK_FIELD_COMMENT("how long the connect took; absent until ready"),
	VARLINK_FIELD(connect_msec, VARLINK_U64, VARLINK_NULLABLE),
	VARLINK_FIELD(in_flight, VARLINK_INT, 0),
	VARLINK_FIELD_COMMENT("work requests posted, every kind"),
	VARLINK_FIELD(wrs_posted, VARLINK_U64, 0),
	VARLINK_FIELD_COMMENT("RDMA READs completed and the bytes they brought in"),
	VARLINK_FIELD(reads, VARLINK_U64, 0),
	VARLINK_FIELD(bytes_in, VARLINK_U64, 0),
	VARLINK_FIELD_COMMENT("RDMA WRITEs completed and the bytes they sent out"),
	VARLINK_FIELD(writes, VARLINK_U64, 0),
	VARLINK_FIELD(bytes_out, VARLINK_U64, 0),
	VARLINK_FIELD_COMMENT("work requests that did not complete when it failed"),
	VARLINK_FIELD(flushed, VARLINK_U64, 0),
	VARLINK_FIELD(notifications_sent, VARLINK_U64, 0),
	VARLINK_FIELD_COMMENT("why it went to error, by kind (connect, remote_access,\n"
			      "local_access, retry_exceeded, disconnect, stalled, other): decimal strings"),
	VARLINK_FIELD(errors, VARLINK_STRING, VARLINK_MAP),
	VARLINK_FIELD_COMMENT("error or closed: why"),
	VARLINK_FIELD(reason, VARLINK_STRING, VARLINK_NULLABLE));
/* clang-format on */

static int link_errors_json(cJSON *o, const struct link *l)
{
	cJSON *errors = cJSON_AddObjectToObject(o, "errors");

	if (!errors)
		return -ENOMEM;
	for (int k = 0; k < LINK_ERR_KINDS; k++)
		if (json_add_u64(errors, link_error_kind_name(k), l->stats.errors[k]) < 0)
			return -ENOMEM;
	return 0;
}

/* The caller's uid's links; root sees all. */
static int link_item(struct rpc_call *call, struct idseq_node *node, cJSON **ret)
{
	const struct link *l = container_of(node, struct link, order);
	const struct link_stats *st = &l->stats;
	_cleanup_json_ cJSON *o = NULL;

	if (call->session->cred.uid != 0 && call->session->cred.uid != l->key.uid)
		return 0;
	o = cJSON_CreateObject();
	if (!o || json_add_u64(o, "id", l->id) < 0 ||
	    json_add_string(o, "state", link_state_name(l->state)) < 0 ||
	    json_add_string(o, "device", l->key.dev->info.name) < 0 ||
	    json_add_int(o, "uid", l->key.uid) < 0 || json_add_string(o, "endpoint", l->peer) < 0 ||
	    json_add_u64(o, "age_msec", uv_hrtime() / 1000000 - l->created_msec) < 0 ||
	    (l->ready_msec &&
	     json_add_u64(o, "connect_msec", l->ready_msec - l->created_msec) < 0) ||
	    json_add_int(o, "in_flight", (int64_t)(l->tail_seq - l->head_seq)) < 0 ||
	    json_add_u64(o, "wrs_posted", st->wrs) < 0 ||
	    json_add_u64(o, "reads", st->done.reads) < 0 ||
	    json_add_u64(o, "bytes_in", st->done.bytes_in) < 0 ||
	    json_add_u64(o, "writes", st->done.writes) < 0 ||
	    json_add_u64(o, "bytes_out", st->done.bytes_out) < 0 ||
	    json_add_u64(o, "flushed", st->flushed) < 0 ||
	    json_add_u64(o, "notifications_sent", st->notifications) < 0 ||
	    link_errors_json(o, l) < 0 ||
	    (l->state >= LINK_ERROR && json_add_string(o, "reason", l->reason) < 0))
		return -ENOMEM;
	*ret = TAKE_PTR(o);
	return 0;
}

/* clang-format off */
RPC_DEFINE_METHOD(ListLinks,
		  "The queue pairs this daemon opened to other daemons for Transfer: the\n"
		  "caller's uid's (all of them for root); a page at a time, by id, as\n"
		  "ListRegions. A link is listed from its first connect attempt until it\n"
		  "is gone; one in error stays while a transfer still holds it.",
		  RPC_PAGE_INPUTS,
		  VARLINK_OUTPUT_BY_TYPE(links, rpc_type_Link, VARLINK_ARRAY),
		  VARLINK_OUTPUT(next, VARLINK_U64, VARLINK_NULLABLE));
/* clang-format on */

static int method_list_links(struct rpc_call *call, void *params)
{
	static const struct idseq none;

	return rpc_reply_page(call, params,
			      call->ctx->remote ? &call->ctx->remote->links.order : &none, "links",
			      link_item);
}

const struct rpc_method rpc_links_methods[] = {
	RPC_METHOD(RDMAMEMD_INTERFACE, ListLinks, method_list_links, RPC_PAGE_PARAMS),
	{},
};
